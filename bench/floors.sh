#!/bin/sh
# The protocol's floors: a SPLASH-2 program on a layout with the DSM's
# data path taken away a stage at a time, each beside the pthreads build
# in the same round, to show how much of the gap to shared memory each
# stage costs and what no tuning of the later stages can go below.  The
# stages come from bench/oracle.patch, applied to a copy of this tree
# built apart (never to the tree itself: the oracles give wrong answers).
#
# With `-m cluster` (the default, as `copy = cluster` is the layouts'
# default: one copy per cluster, docs/dsm.md "One copy per cluster"):
#
#   one       the same processes in one cluster (conf/N.ini for N
#             processes): nothing crosses between clusters; what is left
#             is the cluster's own synchronisation and faults
#   skeleton  the layout, but a lemuriad's seal does nothing: nothing is
#             registered, so no write notice invalidates a page and each
#             page crosses once per cluster (a page one cluster owns, by
#             its recall); what is left is the synchronisation, the first
#             fetches and the write tracking of the pages that crossed
#   compare   the seal compares the twinned pages of the copy as always
#             and drops the diffs it finds
#   full      the protocol unchanged (the program must pass its test)
#
# With `-m client` (the per-process protocol of `copy = client`):
#
#   skeleton  past a client's first 4 flushes its flushes do nothing (no
#             twin comparison, no diffs, no write notices) and its
#             acquires apply nothing (no invalidations, no updates); what
#             is left is the synchronisation, the faults that fetch each
#             page once, and the processes sharing the CPUs
#   compare   the flush compares the open pages with their twins and
#             closes idle pages as always, but sends nothing
#   send      the diffs go to the lemuriad, which (after each client's
#             first 4 FLUSH messages) acknowledges and drops them: the
#             transport of the flushes and nothing after it
#   full      the protocol unchanged
#
#   bench/floors.sh [-q] [-m MODE] [-r ROUNDS] [-l LAYOUT] [-p PROGRAM]
#                   [-a "ARGS"] [-O DIR] [-T SECONDS]
#
# Needs make, a C toolchain and git or patch (to apply the patch).  Exit
# status: 0 when every run gave a time (and the full runs passed), 1 when
# one did not or the patch no longer applies, 2 on a usage error.

# ARGS splits into words on purpose, the trap handler is reached only
# through trap, and lib.sh uses caller and limit.
# shellcheck disable=SC2086,SC2317,SC1091,SC2034
set -u

me=bench/floors.sh
. "$(dirname "$0")/lib.sh" # is_count absolute layout_file layout_size stats timed seconds why sample_start idle_share
rounds=5
layout=4+4
prog=lu
args="-n1024 -b16"
outdir=""
limit=600
quick=0
given_r=0; given_a=0
mode=cluster

usage() {
	cat <<EOF
usage: $me [-q] [-m MODE] [-r ROUNDS] [-l LAYOUT] [-p PROGRAM] [-a "ARGS"]
                       [-O DIR] [-T SECONDS]
  -m MODE     cluster (default) or client: the copy mode whose stages run
  -r ROUNDS   rounds (default $rounds); each runs the pthreads build and the
              four stages once, the stages in a turned order each round
  -l LAYOUT   layout (default $layout): a name under conf/ or a path
  -p PROGRAM  lu or lucontig (default $prog)
  -a "ARGS"   the program's arguments without -p and -t (default "$args")
  -O DIR      where floors.md and floors-runs.csv go (default
              floors-PROGRAM-LAYOUT-MODE/ in build/bench-results, or in
              \$LEMURIA_BENCH_RESULTS: bench/results to update the tree's)
  -T SECONDS  limit for each run (default $limit)
  -q          quick check: -a "-n256 -b16" -r 1 unless given, files in
              \${TMPDIR:-/tmp}/lemuria-floors-quick unless -O is given
EOF
}

while getopts qm:r:l:p:a:O:T:h opt; do
	case $opt in
	q) quick=1 ;;
	m) mode=$OPTARG ;;
	r) rounds=$OPTARG; given_r=1 ;;
	l) layout=$OPTARG ;;
	p) prog=$OPTARG ;;
	a) args=$OPTARG; given_a=1 ;;
	O) outdir=$OPTARG ;;
	T) limit=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
no_operands "$@"
set -f
if [ $quick -eq 1 ]; then
	[ $given_a -eq 1 ] || args="-n256 -b16"
	[ $given_r -eq 1 ] || rounds=1
	[ -n "$outdir" ] || outdir=${TMPDIR:-/tmp}/lemuria-floors-quick
fi
[ -n "$outdir" ] && outdir=$(absolute "$outdir")
caller=$PWD
cd "$(dirname "$0")/.." || exit 2
root=$PWD

bad=0
complain() { echo "$me: $*" >&2; bad=1; }
is_count "$rounds" || complain "-r wants a positive integer, not '$rounds'"
is_count "$limit" || complain "-T wants a positive number of seconds, not '$limit'"
case $prog in
lu | lucontig) ;;
*) complain "-p: '$prog': the oracles are measured on lu and lucontig only" ;;
esac
case $args in *-p* | *-t*) complain "-a: give the arguments without -p and -t" ;; esac
case $mode in
cluster) stages="one skeleton compare full" ;;
client) stages="skeleton compare send full" ;;
*) complain "-m: '$mode': the copy modes are cluster and client" ;;
esac
lf=$(layout_file "$layout")
procs=""
if [ ! -r "$lf" ]; then
	complain "-l: layout '$layout': $lf not found"
elif ! procs=$(layout_size "$lf" | awk '{ print $1 }') || [ -z "$procs" ]; then
	complain "-l: layout '$layout': $lf has no [cluster] section with clients"
elif [ "$mode" = cluster ] && [ ! -r conf/$procs.ini ]; then
	complain "-l: layout '$layout': its $procs processes have no one-cluster layout conf/$procs.ini for the stage 'one'"
fi
[ -r bench/oracle.patch ] || complain "bench/oracle.patch: not found"
[ $bad -eq 0 ] || exit 2
label=$(layout_label "$lf")
[ -n "$outdir" ] || outdir=$(results_dir "$root")/floors-$prog-$label-$mode

tmp=$(mktemp -d /tmp/lm-floors.XXXXXX) || exit 1
child=""
cleanup() { rm -rf "$tmp"; }
interrupted() {
	trap '' INT TERM
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	echo "$me: interrupted" >&2
	cleanup
	exit 130
}
trap interrupted INT TERM
trap cleanup EXIT

# The copy: the sources as they are now (uncommitted changes included),
# without builds or results.
mkdir "$tmp/src" || exit 1
tar -C "$root" --exclude=./build --exclude=./.git --exclude=./bench/results \
	-cf - . | tar -C "$tmp/src" -xf - || exit 1
apply_patch() {
	if command -v git >/dev/null 2>&1; then
		(cd "$tmp/src" && git apply "$root/bench/oracle.patch")
	else
		patch -d "$tmp/src" -p1 <"$root/bench/oracle.patch"
	fi
}
if ! apply_patch >"$tmp/patch.log" 2>&1; then
	echo "$me: bench/oracle.patch no longer applies to this tree; refresh it" >&2
	sed 's/^/  | /' "$tmp/patch.log" >&2
	exit 1
fi
build=$tmp/build
echo "$me: building the patched copy in $tmp"
if ! timed 900 "$tmp/build.log" make -C "$tmp/src" BUILD="$build" \
	-j"$(nproc)" "$build/bin/lemuria-run" "$build/bin/lemuriad" \
	"$build/bin/reflector" "$build/splash2/$prog" \
	"$build/splash2/$prog-pthread" "$build/bench/cpuidle"; then
	echo "$me: the patched copy does not build" >&2
	tail -n 15 "$tmp/build.log" | sed 's/^/  | /' >&2
	exit 1
fi
. "$root/tests/lib.sh" # private_layout set_copy
lay=$(private_layout "$lf" "$tmp" 63) || exit 1
set_copy "$lay" "$mode"
if [ "$mode" = cluster ]; then
	mkdir "$tmp/one" || exit 1
	one=$(private_layout "conf/$procs.ini" "$tmp/one" 64) || exit 1
	set_copy "$one" cluster
fi
mkdir -p "$outdir" || exit 1

# the tree's commit, "-dirty" when its sources differ (results written by
# an earlier run of this script do not count)
rev=$(git -C "$root" describe --always 2>/dev/null || echo unknown)
if [ "$rev" != unknown ] && [ -n "$(git -C "$root" status --porcelain \
	--untracked-files=no -- . ':(exclude)bench/results' 2>/dev/null)" ]; then
	rev=$rev-dirty
fi
stamp="host $(uname -n), $(nproc) CPUs, tree $rev, $(date '+%Y-%m-%d %H:%M')"
echo "$me: $prog $args on $label ($procs processes), copy = $mode, $rounds rounds; $stamp"

# run STAGE: one run; appends "ROUND,STAGE,SECONDS,TEST,FAILURE,IDLE" to
# the CSV, TEST being the program's own check of its answer (passed,
# failed, or - for the pthreads build, run without it): an oracle's must
# fail; IDLE the share of the CPUs left idle in the timed part (bench/lib.sh
# idle_share; empty for runs too short to say)
failed=0
run() {
	log=$tmp/log
	sample_start "$build/bench/cpuidle" "$tmp/idle" "$limit"
	if [ "$1" = pthreads ]; then
		timed "$limit" "$log" "$build/splash2/$prog-pthread" -p"$procs" $args
	else
		oracle=$1 on=$lay
		case $1 in
		full) oracle="" ;;
		one) oracle="" on=$one ;;
		esac
		timed "$limit" "$log" env LEMURIA_ORACLE="$oracle" \
			"$build/bin/lemuria-run" -c "$on" --pin --batch \
			--start-daemons --timeout "$limit" -- \
			"$build/splash2/$prog" -p"$procs" $args -t
	fi
	st=$?
	sample_stop
	idle=$(idle_share "$tmp/idle" "$log")
	t=$(seconds "$log")
	failure=""
	case $1 in
	pthreads) [ $st -eq 0 ] && [ -n "$t" ] || failure=$(why "$st" "$log" 0) ;;
	full | one) passed "$st" "$log" "$t" 1 || failure=$(why "$st" "$log" 1) ;;
	# an oracle's answer is wrong: the program may fail its test
	*) [ -n "$t" ] || failure="no time in the output (status $st)" ;;
	esac
	if [ -n "$failure" ]; then
		failed=1
		echo "  round $r, $1: FAILED ($failure)" >&2
		tail -n 4 "$log" | sed 's/^/      | /' >&2
	fi
	test=-
	if [ "$1" != pthreads ]; then
		test=failed
		grep -q "TEST PASSED" "$log" && test=passed
	fi
	echo "$r,$1,$t,$test,$failure,$idle" >>"$tmp/runs.csv"
}
# rotate N WORDS...: the words with the first N moved to the end
rotate() {
	n=$1
	shift
	while [ "$n" -gt 0 ]; do
		w=$1
		shift
		set -- "$@" "$w"
		n=$((n - 1))
	done
	echo "$*"
}
echo "round,stage,time_s,test,failure,idle_pct" >"$tmp/runs.csv"
r=0
while [ $r -lt "$rounds" ]; do
	r=$((r + 1))
	run pthreads
	# the stages in a turned order, so that none always follows another
	for s in $(rotate $(((r - 1) % 4)) $stages); do
		run "$s"
	done
	awk -F, -v r="$r" '$1 == r && $5 == "" { printf " %s %.3f", $2, $3 }
		END { print "" }' "$tmp/runs.csv" | sed "s/^/  round $r:/"
done
cp "$tmp/runs.csv" "$outdir/floors-runs.csv" || exit 1

# median_of STAGE [COLUMN]: "MEDIAN MIN MAX" of the stage's good runs'
# times (or COLUMN's non-empty values), or nothing
# shellcheck disable=SC2046 # one value per word
median_of() {
	stats $(awk -F, -v s="$1" -v c="${2:-3}" \
		'$2 == s && $5 == "" && $c != "" { print $c }' "$tmp/runs.csv")
}
base=$(median_of pthreads)
full=$(median_of full)
{
	echo "Floors of $prog $args on $label ($procs processes), copy = $mode:"
	echo "$rounds rounds, medians (min-max), ratios to the pthreads build's median"
	echo "in the same rounds; $stamp.  bench/floors.sh describes the stages."
	echo
	echo "| stage | time | ratio to pthreads | share of full | CPUs idle |"
	echo "| --- | --- | --- | --- | --- |"
	for s in pthreads $stages; do
		echo "$s|$(median_of "$s")|$base|$full|$(median_of "$s" 6)"
	done | awk -F'|' '{
		split($2, m, " "); split($3, b, " "); split($4, f, " ")
		idle = $5 == "" ? "-" : sprintf("%.1f %%", $5)
		if (m[1] == "") { printf "| %s | - | - | - | - |\n", $1; next }
		ratio = b[1] > 0 ? sprintf("%.2f×", m[1] / b[1]) : "-"
		share = f[1] > 0 ? sprintf("%.0f %%", 100 * m[1] / f[1]) : "-"
		printf "| %s | %.3f s (%.3f-%.3f) | %s | %s | %s |\n", $1, m[1], m[2], m[3], ratio, share, idle
	}'
} >"$tmp/floors.md"
cp "$tmp/floors.md" "$outdir/floors.md" || exit 1
echo
cat "$tmp/floors.md"
echo
echo "written: $outdir/floors.md, $outdir/floors-runs.csv"
if [ $failed -ne 0 ]; then
	echo "$me: some runs failed (see the messages above)" >&2
	exit 1
fi
exit 0
