#!/bin/sh
# The order and visibility programs (docs/dsm.md "Eventual visibility",
# "Order"), many rounds on layouts with several clusters, every other
# round with loss injected, each round with seeds of its own:
#   publish      records reached through pointers read with no lock
#   treewave     fmm's box tree: lists, flags in children, counts
#   spinflag     counters and tokens spun on with no lock
#   visible      random words raised with no synchronisation (dsmtest)
#   chaos        random programs against a reference (dsmtest)
# treewave and visible also with a lemuriad cache of one page, so that a
# set's pages leave the cache before it goes in.  make check runs each
# once per layout (run-dsm); the order holes found so far showed in one
# run of ten or fewer, so this is their soak: make check-order.
#   tests/run-order.sh [BUILD_DIR] [ROUNDS] [LAYOUTS]
# ROUNDS defaults to 2.  A failure names its round, seed and loss.
set -u
build=${1:-build}
rounds=${2:-2}
layouts=${3:-"4+4 4+4+4+4 8+8 2x2-two-reflectors 3-reflectors"}
bin=$build/bin
tmp=$(mktemp -d /tmp/lm-order.XXXXXX)
failures=0
checks=0
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up
. tests/lib.sh

need_count run-order ROUNDS "$rounds"
need_built run-order "$bin/lemuria-run" "$build/tests/dsmtest" \
	"$build/splash2/publish" "$build/splash2/treewave" \
	"$build/splash2/spinflag"
# shellcheck disable=SC2086 # one word per layout
need_layouts run-order $layouts

# round R LAYOUT_NAME LAYOUT TINY_LAYOUT SEED LOSS: one round's programs.
# (run_expect owns the variable `name`.)
round() {
	r=$1 l=$2 lay=$3 tlay=$4 s=$5 loss=$6
	np=$(awk -F= '/^clients/ { s += $2 } END { print s }' "$lay")
	tw=6
	[ "$np" -ge 16 ] && tw=12
	run_expect "publish, round $r on $l$loss" "$lay" 90 \
		"publish: $np processes: PASSED" "$build/splash2/publish" "$np" 16
	run_expect "treewave, round $r on $l$loss" "$lay" 150 \
		"treewave: $np processes: PASSED" "$build/splash2/treewave" "$np" $tw
	run_expect "treewave, one-page cache, round $r on $l$loss" "$tlay" 240 \
		"treewave: $np processes: PASSED" "$build/splash2/treewave" "$np" $tw
	run_expect "spinflag, round $r on $l$loss" "$lay" 90 \
		"spinflag: $np processes: PASSED" "$build/splash2/spinflag" "$np" 2
	run_expect "visible, seed $s on $l$loss" "$lay" 150 PASSED \
		"$build/tests/dsmtest" visible 4 3 "$s"
	run_expect "visible, one-page cache, seed $((s + 1)) on $l$loss" \
		"$tlay" 150 PASSED "$build/tests/dsmtest" visible 4 3 $((s + 1))
	run_expect "chaos, seed $s on $l$loss" "$lay" 150 PASSED \
		"$build/tests/dsmtest" chaos 12 "$s"
}

n=0
r=0
while [ "$r" -lt "$rounds" ]; do
	r=$((r + 1))
	for l in $layouts; do
		n=$((n + 1))
		mkdir -p "$tmp/$n/tiny"
		lay=$(private_layout "conf/$l.ini" "$tmp/$n" $((n % 17)))
		tlay=$(private_layout "conf/$l.ini" "$tmp/$n/tiny" $((n % 17)))
		sed -i 's/^cache = .*/cache = 4K/' "$tlay"
		seed=$((7000 + n * 10))
		echo "order: round $r, layout $l"
		# clusters join up to 0.3 s apart in every round (start_max:
		# a run's first messages reach lemuriads before their
		# clients), and every other round loses datagrams too
		if [ $((r % 2)) -eq 0 ]; then
			LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,start_max=300ms,seed=$seed"
			export LM_FAULTS
			round "$r" "$l" "$lay" "$tlay" $seed \
				" with loss (seed $seed)"
		else
			LM_FAULTS="start_max=300ms,seed=$seed"
			export LM_FAULTS
			round "$r" "$l" "$lay" "$tlay" $seed \
				" (starts seed $seed)"
		fi
		unset LM_FAULTS
		rm -rf "${tmp:?}/$n"
	done
done
echo "order: $checks checks, $failures failed"
[ $failures -eq 0 ]
