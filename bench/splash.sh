#!/bin/sh
# SPLASH-2 benchmark driver: runs one program on a list of Lemuria layouts
# and, in the same session, its pthreads build with as many threads, so that
# every Lemuria time is reported beside its shared-memory baseline
# (DESIGN.md section 7).  See docs/performance.md, "Reproducing".
#
#   bench/splash.sh [-p PROGRAM] [-a "ARGS"] [-r REPS] [-l "LAYOUTS"]
#                   [-o CSV] [-T SECONDS] [-B BUILD_DIR]
#
# Needs build/splash2/PROGRAM, build/splash2/PROGRAM-pthread and
# build/bin/lemuria-run (make).  Exit status: 0 when every run passed, 1 when
# some failed (they are counted in the CSV), 2 on a usage error.

# ARGS and LAYOUTS are meant to split into words (with set -f, below), and
# the trap handlers are reached only through trap.
# shellcheck disable=SC2086,SC2046,SC2317,SC1091
set -u

me=bench/splash.sh
. "$(dirname "$0")/lib.sh" # is_count absolute layout_file layout_label timed
prog=lu
args="-n1024 -b16"
reps=3
layouts="1 2 4 4+4 8 4+4+4+4 8+8 8+8+8+8"
out=""
limit=900
build=""

usage() {
	cat <<EOF
usage: $me [-p PROGRAM] [-a "ARGS"] [-r REPS] [-l "LAYOUTS"] [-o CSV]
                       [-T SECONDS] [-B BUILD_DIR]
  -p PROGRAM   SPLASH-2 program under BUILD_DIR/splash2 (default $prog)
  -a "ARGS"    its arguments, without -p and -t (default "$args")
  -r REPS      runs of each build per layout (default $reps)
  -l "LAYOUTS" layout names (conf/NAME.ini) or .ini paths
               (default "$layouts")
  -o CSV       result file (default bench/results/PROGRAM.csv)
  -T SECONDS   limit for each single run (default $limit)
  -B DIR       build directory (default build at the top of the tree)
The Lemuria build runs under lemuria-run with ARGS -t on a private copy of
each layout (ports of its own); the pthreads build runs with ARGS -pN, N the
layout's client count.  A Lemuria run that exits non-zero, prints TEST FAILED
or no time is counted as failed and not timed; so is a failed pthreads run.
EOF
}

while getopts p:a:r:l:o:T:B:h opt; do
	case $opt in
	p) prog=$OPTARG ;;
	a) args=$OPTARG ;;
	r) reps=$OPTARG ;;
	l) layouts=$OPTARG ;;
	o) out=$OPTARG ;;
	T) limit=$OPTARG ;;
	B) build=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 0 ]; then
	echo "$me: unexpected argument '$1'" >&2
	usage >&2
	exit 2
fi
set -f # ARGS and LAYOUTS are split into words, never expanded as patterns

[ -n "$out" ] && out=$(absolute "$out")
[ -n "$build" ] && build=$(absolute "$build")
caller=$PWD
cd "$(dirname "$0")/.." || exit 2
root=$PWD
[ -n "$out" ] || out=$root/bench/results/$prog.csv
[ -n "$build" ] || build=$root/build

bad=0
complain() { echo "$me: $*" >&2; bad=1; }
is_count "$reps" || complain "-r wants a positive integer, not '$reps'"
is_count "$limit" || complain "-T wants a positive number of seconds, not '$limit'"
case $prog in
'' | */*) complain "-p wants a program name, not '$prog'" ;;
esac
run_bin=$build/bin/lemuria-run
lm_bin=$build/splash2/$prog
pt_bin=$build/splash2/$prog-pthread
for f in "$run_bin" "$lm_bin" "$pt_bin"; do
	[ -x "$f" ] || complain "$f: not found or not executable (run make)"
done
[ -n "$layouts" ] || complain "-l wants at least one layout"

# layout_size FILE: prints "PROCESSES CLUSTERS", read from the layout's
# [cluster NAME] sections and their clients keys (docs/layout.md syntax:
# ';'/'#' comment lines, ' ;' trailing comments, '=' or ':', CRLF).
layout_size() {
	awk '
		{ sub(/\r$/, "") }
		/^[ \t]*[;#]/ { next }
		/^[ \t]*\[/ {
			in_cluster = ($0 ~ /^[ \t]*\[cluster[ \t]/)
			if (in_cluster) clusters++
			next
		}
		in_cluster && /^[ \t]*clients[ \t]*[=:]/ {
			v = $0
			sub(/^[^=:]*[=:][ \t]*/, "", v)
			sub(/[ \t]+;.*$/, "", v)
			sub(/[ \t]+$/, "", v)
			if (v !~ /^[0-9]+$/) { bad = 1; exit }
			procs += v
		}
		END {
			if (bad || clusters == 0 || procs == 0) exit 1
			print procs, clusters
		}' "$1"
}

for l in $layouts; do
	f=$(layout_file "$l")
	if [ ! -r "$f" ]; then
		complain "layout '$l': $f not found"
	elif ! layout_size "$f" >/dev/null; then
		complain "layout '$l': $f has no [cluster] section with clients"
	fi
done
# A layout label is a CSV field: keep it free of separators.
for l in $layouts; do
	case $(layout_label "$l") in
	*,* | *\"*) complain "layout '$l': a name with ',' or '\"'" ;;
	esac
done
[ $bad -eq 0 ] || exit 2

tmp=$(mktemp -d /tmp/lm-bench.XXXXXX) || exit 1
child=""
partial=$out.tmp

cleanup() {
	rm -rf "$tmp"
}
# A run is started in the background and waited for, so that ^C or SIGTERM
# reaches this script at once; the run is then stopped through timeout, which
# passes the signal to lemuria-run, which stops its ranks and daemons.
interrupted() {
	trap '' INT TERM
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	echo "$me: interrupted; the layouts done so far are in $partial" >&2
	cleanup
	exit 130
}
trap interrupted INT TERM
trap cleanup EXIT

# seconds LOG: the program's "Total time without initialization" in
# seconds, or nothing.
seconds() {
	awk -F: '/Total time without initialization/ {
		us = $2 + 0; found = 1; exit }
		END { if (found) printf "%.6f\n", us / 1e6 }' "$1"
}

# why STATUS LOG CHECKED: one line saying how a failed run ended; CHECKED
# is 1 when the run was given -t and must print TEST PASSED.
why() {
	case $1 in
	0) ;;
	124) echo "timed out after $limit s"; return ;;
	127) echo "could not be executed (status 127)"; return ;;
	*) echo "exit status $1"; return ;;
	esac
	if grep -q "TEST FAILED" "$2"; then
		echo "TEST FAILED"
	elif [ "$3" = 1 ] && ! grep -q "TEST PASSED" "$2"; then
		echo "no TEST PASSED in the output"
	else
		echo "no 'Total time without initialization' in the output"
	fi
}

# passed STATUS LOG TIME CHECKED: whether a run counts (see why).
passed() {
	[ "$1" -eq 0 ] && [ -n "$3" ] && ! grep -q "TEST FAILED" "$2" &&
		{ [ "$4" != 1 ] || grep -q "TEST PASSED" "$2"; }
}

# report_failure WHAT STATUS LOG CHECKED: names the failed run and shows
# the end of its output.
report_failure() {
	echo "    $1: FAILED ($(why "$2" "$3" "$4"))" >&2
	tail -n 8 "$3" | sed 's/^/      | /' >&2
}

# stats TIMES...: prints "MEDIAN MIN MAX", or nothing without times.
stats() {
	[ $# -gt 0 ] || return 0
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END {
			if (NR % 2) m = v[(NR + 1) / 2]
			else m = (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.6f %.6f %.6f\n", m, v[1], v[NR]
		}'
}

# Messages and bytes per level of the hierarchy are measured by
# bench/hierarchy.sh (lemuria-run --stats), next to lazy vs eager relay.
header=layout,processes,clusters,median_s,min_s,max_s
header=$header,pthread_median_s,ratio_to_pthread,failed_runs

mkdir -p "$(dirname "$out")" || exit 1
echo "$header" >"$partial" || exit 1

rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
echo "$prog $args: $reps runs per build on layouts: $layouts"
echo "host $(uname -n), $(nproc) CPUs, tree $rev, $(date '+%Y-%m-%d %H:%M')"
echo "limit $limit s per run; results to $out"

failed_total=0
index=0
. "$root/tests/lib.sh"
for l in $layouts; do
	index=$((index + 1))
	label=$(layout_label "$l")
	set -- $(layout_size "$(layout_file "$l")")
	procs=$1; clusters=$2
	mkdir -p "$tmp/$index"
	lay=$(private_layout "$(layout_file "$l")" "$tmp/$index" "$index")
	echo "layout $label: processes $procs, clusters $clusters"

	lm_times=""; pt_times=""; failed=0
	rep=0
	while [ $rep -lt "$reps" ]; do
		rep=$((rep + 1))
		log=$tmp/$index/lemuria.$rep
		# lemuria-run stops ranks and daemons itself at -T; the outer
		# timeout only guards against lemuria-run hanging.
		timed $((limit + 20)) "$log" "$run_bin" -c "$lay" \
			--start-daemons --timeout "$limit" -- "$lm_bin" $args -t
		st=$?
		t=$(seconds "$log")
		if passed $st "$log" "$t" 1; then
			lm_times="$lm_times $t"
			lm_msg="$t s"
		else
			failed=$((failed + 1))
			lm_msg=failed
			report_failure "$label lemuria run $rep/$reps" $st "$log" 1
		fi

		log=$tmp/$index/pthread.$rep
		timed "$limit" "$log" "$pt_bin" $args -p"$procs"
		st=$?
		t=$(seconds "$log")
		if passed $st "$log" "$t" 0; then
			pt_times="$pt_times $t"
			pt_msg="$t s"
		else
			failed=$((failed + 1))
			pt_msg=failed
			report_failure "$label pthread run $rep/$reps" $st "$log" 0
		fi
		printf '  run %d/%d: lemuria %s, pthread %s\n' \
			"$rep" "$reps" "$lm_msg" "$pt_msg"
	done

	set -- $(stats $lm_times)
	med=${1:-}; min=${2:-}; max=${3:-}
	set -- $(stats $pt_times)
	pt_med=${1:-}
	ratio=""
	if [ -n "$med" ] && [ -n "$pt_med" ]; then
		ratio=$(awk -v a="$med" -v b="$pt_med" \
			'BEGIN { if (b > 0) printf "%.2f\n", a / b }')
	fi
	echo "$label,$procs,$clusters,$med,$min,$max,$pt_med,$ratio,$failed" \
		>>"$partial"
	failed_total=$((failed_total + failed))
done

mv "$partial" "$out" || exit 1

echo
echo "$prog $args (medians of $reps runs; time without initialization)"
awk -F, 'NR == 1 {
		printf "%-14s %5s %8s  %-30s %12s %9s %7s\n", "layout",
			"procs", "clusters", "lemuria s (min - max)",
			"pthread s", "ratio", "failed"
		next
	}
	{
		lm = $4 == "" ? "-" : sprintf("%.3g (%.3g - %.3g)", $4, $5, $6)
		pt = $7 == "" ? "-" : sprintf("%.3g", $7)
		ra = $8 == "" ? "-" : sprintf("%.1fx", $8)
		printf "%-14s %5s %8s  %-30s %12s %9s %7s\n", $1, $2, $3,
			lm, pt, ra, $9
	}' "$out"
echo "written: $out"
if [ $failed_total -gt 0 ]; then
	echo "$me: $failed_total runs failed (see the messages above)" >&2
	exit 1
fi
exit 0
