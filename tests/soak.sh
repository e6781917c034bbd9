#!/bin/sh
# Soak: the same daemons serve run after run (LU, the race-free stress
# test, the lock counter) for SECONDS; their resident sizes must not grow
# (I5): the peak of the second half of the runs stays within 10% + 2 MiB
# of the peak of the first half, plus one step of a daemon's heap: the
# heap grows LM_DAEMON_HEAP_PAD (4 MiB, common/daemon_protocol.h) beyond each new
# peak of its use, all of it resident at once (common/mem.h), so a run
# that needs a little more than any before it adds 4 MiB, once.  Growth
# without bound takes step after step, which a long soak shows: make
# check runs a short one; a long one (e.g. 1200 s) shows the curve over
# time.
#   tests/soak.sh BUILD_DIR [SECONDS] [LAYOUT]
set -u
build=${1:-build}
secs=${2:-30}
src=${3:-conf/4+4.ini}
bin=$build/bin
tmp=$(mktemp -d /tmp/lm-soak.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # cleanup runs as the script exits
. tests/lib.sh

# The heap step the peaks may differ by, in KiB: LM_DAEMON_HEAP_PAD,
# "(N << 20)" in common/daemon_protocol.h
heap_pad=$(sed -n 's/.*define LM_DAEMON_HEAP_PAD (\([0-9]*\)u* << 20).*/\1/p' \
	common/daemon_protocol.h)
[ -n "$heap_pad" ] || {
	echo "  FAIL soak: no LM_DAEMON_HEAP_PAD in common/daemon_protocol.h"
	exit 1
}
heap_pad=$((heap_pad * 1024))

lay=$(private_layout "$src" "$tmp" 30)
names=""
for entry in $(awk '/^\[(reflector|cluster) /{ gsub(/[\[\]]/, ""); print $1 ":" $2 }' "$lay"); do
	role=${entry%%:*}; name=${entry#*:}
	prog=$bin/lemuriad; [ "$role" = reflector ] && prog=$bin/reflector
	"$prog" -c "$lay" -n "$name" -l error 2>>"$tmp/daemons.log" &
	pids="$pids $!"
	names="$names $name"
done
i=0
until "$bin/lemuriactl" -c "$lay" -t 0.5 status >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -ge 20 ] && break; sleep 0.5
done

rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

echo "soak: $src for ${secs}s: RSS (KiB) of$names after each run"
start=$(date +%s)
runs=0
failed=0
: >"$tmp/curve"
while [ $(( $(date +%s) - start )) -lt "$secs" ] && [ $runs -lt 100000 ]; do
	case $((runs % 3)) in
	0) set -- "$build/splash2/lu" -n256 -b16 -t; pattern="TEST PASSED" ;;
	1) set -- "$build/tests/dsmtest" stress 4 8 $runs; pattern=PASSED ;;
	2) set -- "$build/tests/dsmtest" counter 20; pattern=PASSED ;;
	esac
	if ! timeout -k 5 120 "$bin/lemuria-run" -c "$lay" --timeout 110 -- \
		"$@" >"$tmp/out" 2>&1 || ! grep -q "$pattern" "$tmp/out"; then
		failed=$((failed + 1))
		echo "  FAIL run $runs: $*"
		tail -n 10 "$tmp/out" | sed 's/^/       /'
	fi
	runs=$((runs + 1))
	line="$(( $(date +%s) - start ))"
	for p in $pids; do line="$line $(rss "$p")"; done
	echo "$line" >>"$tmp/curve"
done
awk '{ printf "  %5ss", $1; for (i = 2; i <= NF; i++) printf " %8s", $i; print "" }' \
	"$tmp/curve" | awk -v n="$runs" 'n <= 12 || NR % int(n / 12 + 1) == 1'

# Peaks per daemon in each half of the runs.
verdict=$(awk -v n="$runs" -v heap_pad="$heap_pad" '
	{ for (i = 2; i <= NF; i++) {
		if (NR <= n / 2) { if ($i > a[i]) a[i] = $i }
		else if ($i > b[i]) b[i] = $i
		d = NF } }
	END { bad = 0
	      for (i = 2; i <= d; i++)
		if (b[i] > a[i] * 1.10 + 2048 + heap_pad) bad = 1
	      print bad }' "$tmp/curve")
if [ "$failed" -eq 0 ] && [ "$runs" -ge 4 ] && [ "$verdict" = 0 ]; then
	echo "  ok   $runs runs, no daemon grew (second-half peak within 10% + 2 MiB + one $((heap_pad / 1024)) MiB heap step)"
	exit 0
fi
echo "  FAIL $runs runs, $failed failed, growth verdict $verdict"
exit 1
