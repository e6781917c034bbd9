#!/bin/sh
# Litmus programs for lost writes (issue 38), each on every layout and
# relay mode given, several runs apiece, every other run with loss
# injected:
#   counters  two counters 8 bytes apart on one page, each under a lock of
#             its own (lost when a lemuriad's FETCH was answered by a
#             reflector's cache from before its own delta)
#   chain     visibility through a chain of two locks, to another cluster
#             and within one (lost when notices stopped at a lock)
#   created   what rank 0 writes before CREATE, read by every worker
#             (stale when CREATE carried no notices)
#   bytes     every rank's own byte of one page, under barriers and under
#             locks of its own while the others write theirs (lost under
#             copy = cluster when another cluster's page overwrote the
#             cluster's copy whole)
#   tests/run-litmus.sh [BUILD_DIR] [RUNS] [LAYOUTS] [COPIES]
# RUNS (default 2) runs of counters per layout and relay, RUNS / 5 + 1 of
# the others.  make check runs the default; make check-litmus 50 runs on
# the layouts with several reflectors.  COPIES: the `copy` modes to run
# each in (default "client cluster", docs/layout.md).
set -u
build=${1:-build}
runs=${2:-2}
layouts=${3:-"4+4 2x2-two-reflectors 3-reflectors"}
copies=${4:-"client cluster"}
bin=$build/bin
tmp=$(mktemp -d /tmp/lm-litmus.XXXXXX)
failures=0
checks=0
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up
. tests/lib.sh

need_count run-litmus RUNS "$runs"
need_built run-litmus "$bin/lemuria-run" "$build/tests/dsmtest"
# shellcheck disable=SC2086 # one word per layout
need_layouts run-litmus $layouts

# litmus LAYOUT_FILE N WHAT ARGS...: N runs of dsmtest ARGS, every
# second one with loss (its seed in the name, so that a failure can be
# replayed).  (run_expect owns the variable `name`.)
litmus() {
	lay=$1; count=$2; what=$3; shift 3
	i=0
	while [ $i -lt "$count" ]; do
		i=$((i + 1))
		seed=$((seed + 1))
		if [ $((i % 2)) -eq 0 ]; then
			LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=$seed" \
				run_expect "$what, run $i with loss (seed $seed)" \
				"$lay" 120 PASSED "$build/tests/dsmtest" "$@"
		else
			run_expect "$what, run $i" "$lay" 120 PASSED \
				"$build/tests/dsmtest" "$@"
		fi
	done
}

n=70
seed=500
for l in $layouts; do
	for copy in $copies; do
		for relay in lazy adaptive eager; do
			n=$((n + 1))
			mkdir -p "$tmp/$n"
			lay=$(private_layout "conf/$l.ini" "$tmp/$n" "$n")
			sed -i "s/^relay = .*/relay = $relay/" "$lay"
			sed -i "/^copy = /d; /^\[lemuria\]/a copy = $copy" "$lay"
			if ! grep -q "^relay = $relay\$" "$lay" ||
			   ! grep -q "^copy = $copy\$" "$lay"; then
				echo "run-litmus: cannot set relay = $relay and" \
					"copy = $copy in $lay" >&2
				exit 2
			fi
			echo "litmus: $l, relay = $relay, copy = $copy"
			litmus "$lay" "$runs" "two counters on one page" counters 100 8
			litmus "$lay" $((runs / 5 + 1)) "a chain of two locks" chain 20
			litmus "$lay" $((runs / 5 + 1)) "data written before CREATE" \
				created 64
			litmus "$lay" $((runs / 5 + 1)) "bytes of one page from every rank" \
				bytes 20
		done
	done
done

echo "litmus: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
