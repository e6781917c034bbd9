#!/bin/sh
# The acceptance table (issue 40): each performance target of the project
# measured on this machine beside its baseline, measured in the same run
# (DESIGN.md section 7), medians of REPS runs with min and max, and whether
# the ratio meets the target.  The SPLASH-2 runs go through bench/splash.sh
# (which alternates each Lemuria run with its pthreads run and records the
# traffic per level); the read fault is build/bench/micro beside
# build/bench/transport's bare UDP round trip, as bench/micro.sh does.
#
#   bench/targets.sh [-qU] [-r REPS] [-a "ARGS"] [-f LAYOUT] [-O DIR]
#                    [-T SECONDS] [-B BUILD_DIR]
#
# Needs make (build/splash2/lu, lucontig and their pthreads builds,
# lemuria-run, build/bench/transport) and build/bench/micro (make
# bench-targets builds it).  Exit status: 0 when every run passed (met or
# not), 1 when some failed, 2 on a usage error.

# ARGS splits into words on purpose, the trap handler is reached only
# through trap, and lib.sh uses caller.
# shellcheck disable=SC2086,SC2317,SC1091,SC2034
set -u

me=bench/targets.sh
. "$(dirname "$0")/lib.sh" # is_count absolute layout_file stats timed
reps=3
args="-n1024 -b16"
fault_layout=4+4
outdir=""
limit=900
build=""
quick=0
unplaced="" # -U: bench/splash.sh -U
pin="--pin --batch" # the read-fault runs; -U: none
given_r=0; given_a=0
others="fft radix ocean" # reported with no target (below)
quick_splash=""

# The targets: a ratio to the baseline, at most this.  Issue 40 gives the
# LU figures on several clusters, LU with a copy per process (copy =
# client) and the bytes between the clusters (at most twice the pages that
# must cross); LU on one process is issue 7's, the read-fault goal (1.5
# bare round trips) the performance issue's (docs/performance.md,
# "Micro-benchmarks").
t_lu1=1.1; t_lu8=3; t_lu16=3.5; t_lu32=4.5; t_contig=2; t_client=13
t_fault=1.5; t_bytes=2

usage() {
	cat <<EOF
usage: $me [-qU] [-r REPS] [-a "ARGS"] [-f LAYOUT] [-O DIR] [-T SECONDS]
                        [-B BUILD_DIR]
  -r REPS      runs of each measurement and its baseline (default $reps;
               three times as many for LU on one process, whose short
               runs come in two speeds on these hosts)
  -a "ARGS"    LU's and lucontig's arguments, without -p and -t
               (default "$args")
  -f LAYOUT    layout of the read-fault measurement (default $fault_layout)
  -O DIR       directory of the CSVs and the table (default targets/ in
               build/bench-results, or in \$LEMURIA_BENCH_RESULTS:
               bench/results to update the tree's)
  -T SECONDS   limit for each single run (default $limit)
  -B DIR       build directory (default build at the top of the tree)
  -U           run LU, lucontig and the read faults unplaced (default:
               lemuria-run --pin --batch, each cluster's lemuriad and
               ranks on CPUs of their own, the ranks under SCHED_BATCH)
  -q           quick check (seconds): -a "-n256 -b16" -r 1 unless
               given, files in \${TMPDIR:-/tmp}/lemuria-targets-quick unless
               -O is given; the ratios then say little (tiny problems)
Measured, each against its baseline in the same run:
  LU ARGS on layouts 1, 4+4, 8+8, 8+8+8+8 vs lu-pthread -p1/-p8/-p16/-p32
  lucontig ARGS on 4+4 vs lucontig-pthread -p8
  LU ARGS on 4+4 with copy = client (a copy per process) vs lu-pthread -p8
  read fault served from the lemuriad's copy (bench/micro fault_cluster_us
  on LAYOUT) vs a bare UDP round trip of 4 KiB (bench/transport), between
  two processes on one CPU as a client and its lemuriad are when placed
  (with -U, to a thread where the scheduler puts it)
  LU on 4+4: bytes at level cluster (lemuriad <-> reflector, both ways,
  lemuria-run --stats) vs the distinct pages LU must move between the
  clusters whatever the protocol (bench/lu-floor.py --distinct)
Reported beside their pthreads runs, with no target: FFT, Radix and
Ocean on 4+4 at bench/splash.sh's sizes (its quick ones with -q).
The table goes to stdout and to DIR/targets.md, its values to
DIR/targets.csv; the runs behind it are in DIR (bench/splash.sh's CSVs
lu.csv, lucontig.csv, lu-client.csv, fft.csv, radix.csv, ocean.csv and
their -runs.csv, and fault-runs.csv).
EOF
}

while getopts qUr:a:f:O:T:B:h opt; do
	case $opt in
	U) unplaced=-U; pin="" ;;
	q) quick=1 ;;
	r) reps=$OPTARG; given_r=1 ;;
	a) args=$OPTARG; given_a=1 ;;
	f) fault_layout=$OPTARG ;;
	O) outdir=$OPTARG ;;
	T) limit=$OPTARG ;;
	B) build=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
no_operands "$@"
set -f
if [ $quick -eq 1 ]; then
	[ $given_a -eq 1 ] || args="-n256 -b16"
	[ $given_r -eq 1 ] || reps=1
	# A quick check never overwrites the results kept in the tree.
	[ -n "$outdir" ] || outdir=${TMPDIR:-/tmp}/lemuria-targets-quick
	quick_splash=-q # its small sizes; -r, -l and -o are given
fi

[ -n "$outdir" ] && outdir=$(absolute "$outdir")
[ -n "$build" ] && build=$(absolute "$build")
caller=$PWD
cd "$(dirname "$0")/.." || exit 2
root=$PWD
[ -n "$outdir" ] || outdir=$(results_dir "$root")/targets
[ -n "$build" ] || build=$root/build

bad=0
complain() { echo "$me: $*" >&2; bad=1; }
is_count "$reps" || complain "-r wants a positive integer, not '$reps'"
is_count "$limit" || complain "-T wants a positive number of seconds, not '$limit'"
for f in bin/lemuria-run bench/transport bench/micro splash2/lu \
	splash2/lu-pthread splash2/lucontig splash2/lucontig-pthread \
	splash2/fft splash2/fft-pthread splash2/radix splash2/radix-pthread \
	splash2/ocean splash2/ocean-pthread; do
	[ -x "$build/$f" ] || complain "$build/$f: not found or not executable (make bench-targets builds it)"
done
fl=$(layout_file "$fault_layout")
if [ ! -r "$fl" ]; then
	complain "-f: layout '$fault_layout': $fl not found"
elif ! layout_size "$fl" >/dev/null; then
	complain "-f: layout '$fault_layout': $fl has no [cluster] section with clients"
fi
case $args in *,* | *\"*) complain "-a: arguments with ',' or '\"'" ;; esac
[ $bad -eq 0 ] || exit 2

tmp=$(mktemp -d /tmp/lm-targets.XXXXXX) || exit 1
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
mkdir -p "$outdir" || exit 1

# the tree of the build measured: with -B, another checkout's
rev=$(git -C "$build" describe --always --dirty 2>/dev/null || echo unknown)
stamp="host $(uname -n), $(nproc) CPUs, tree $rev, $(date '+%Y-%m-%d %H:%M'), ${unplaced:+un}placed"
echo "$me: $reps runs of each; LU and lucontig $args; $stamp"
failed=0

# bench/splash.sh runs in the background and is waited for, as single runs
# are, so that ^C reaches this script; it stops its own runs on SIGTERM.
# splash RUNS ARGS...
splash() {
	n=$1
	shift
	"$root/bench/splash.sh" -B "$build" -T "$limit" -r "$n" $unplaced "$@" &
	child=$!
	wait "$child"
	st=$?
	child=""
	case $st in
	0) ;;
	1) failed=1 ;;
	*) echo "$me: bench/splash.sh $* ended with status $st" >&2; exit 1 ;;
	esac
}
# LU on one process runs 0.1-0.2 s, and both it and pthreads -p1 come in
# two speeds on these hosts, in no order: five runs can put their medians
# in different modes, so this pair gets three times the runs
reps1=$((reps * 3))
splash "$reps1" -p lu -a "$args" -l 1 -o "$outdir/lu1.csv"
splash "$reps" -p lu -a "$args" -l "4+4 8+8 8+8+8+8" -o "$outdir/lu.csv"
splash "$reps" -p lucontig -a "$args" -l "4+4" -o "$outdir/lucontig.csv"
# private_layout (tests/lib.sh) gives every layout of the run this mode;
# exported and unset around the call, since an assignment in front of a
# function may outlive it (POSIX leaves that open; older bash in POSIX
# mode keeps it), and the read-fault layout below keeps its own mode
LM_TEST_COPY=client
export LM_TEST_COPY
splash "$reps" -p lu -a "$args" -l "4+4" -o "$outdir/lu-client.csv"
unset LM_TEST_COPY
# Issue 40 asks for FFT, Radix and Ocean too, with no target: all-to-all
# programs whose pthreads builds take tens of milliseconds.  They are
# here so that every targets run shows them: FFT lost half its speed to a
# change that LU hardly felt (docs/performance.md, "The seal of one
# instant").  Their sizes are bench/splash.sh's (-q: its quick ones).
for p in $others; do
	splash "$reps" -p "$p" $quick_splash -l "4+4" -o "$outdir/$p.csv"
done

# The read fault: each repetition measures the bare round trip, then the
# fault, on a private copy of the layout.
echo
echo "== read fault on $(layout_label "$fault_layout") vs bare UDP round trip, 4 KiB"
. "$root/tests/lib.sh"
mkdir -p "$tmp/fault"
lay=$(private_layout "$fl" "$tmp/fault" 77)
one_page_faults "$lay"
# The baseline is placed as the faults are: with --pin a client shares
# its CPU with its lemuriad, so the round trip between two processes on
# one CPU; unplaced (-U), the scheduler's placement.  The other figure
# goes along in the CSV.
mode=bare_udp_one_cpu; other=bare_udp
[ -n "$pin" ] || { mode=bare_udp; other=bare_udp_one_cpu; }
echo "run,udp_rtt_4k_us,fault_cluster_us,udp_rtt_4k_${other}_us,failure" >"$tmp/fault.csv"
rep=0
while [ $rep -lt "$reps" ]; do
	rep=$((rep + 1))
	log=$tmp/transport.$rep
	rm -f "$tmp/transport.csv"
	timed "$limit" "$log" "$build/bench/transport" -n 1000 -r 5 \
		-o "$tmp/transport.csv"
	st=$?
	udp=$(bare_rtt "$tmp/transport.csv" 4096 "$mode")
	udp_other=$(bare_rtt "$tmp/transport.csv" 4096 "$other")
	log=$tmp/micro.$rep
	timed $((limit + 20)) "$log" "$build/bin/lemuria-run" -c "$lay" \
		$pin --start-daemons --timeout "$limit" -- "$build/bench/micro"
	st2=$?
	fault=$(awk '$1 == "micro:" && $2 == "fault_cluster_us" { print $3 }' "$log")
	failure=""
	[ -n "$udp" ] || failure="transport: no 4096 B $mode figure (status $st)"
	[ -n "$fault" ] || failure="${failure:+$failure; }micro: no fault_cluster_us (status $st2)"
	if [ -n "$failure" ]; then
		failed=1
		echo "  run $rep/$reps: FAILED ($failure)" >&2
		tail -n 4 "$log" | sed 's/^/      | /' >&2
	else
		echo "  run $rep/$reps: bare UDP $udp us ($mode; $other ${udp_other:-?} us), read fault $fault us"
	fi
	echo "$rep,$udp,$fault,$udp_other,$failure" >>"$tmp/fault.csv"
done
cp "$tmp/fault.csv" "$outdir/fault-runs.csv" || exit 1

# column CSV NAME: the values of column NAME, one per line, in the rows
# that pass the awk condition in $where (which may use col["NAME"] for a
# column's number); empty values are left out.
column() {
	awk -F, -v name="$2" "
		NR == 1 { for (i = 1; i <= NF; i++) col[\$i] = i; next }
		($where) && \$col[name] != \"\" { print \$col[name] }" "$1"
}
# spread CSV NAME SCALE: "MEDIAN MIN MAX" of a column (see column), times
# SCALE, or nothing without values.
spread() {
	vals=$(column "$1" "$2")
	[ -n "$vals" ] || return 0
	stats $vals | awk -v s="$3" '{ printf "%.6g %.6g %.6g\n", $1 * s, $2 * s, $3 * s }'
}
# runs_of LAYOUT BUILD: the condition for the runs of a build on a layout
# that passed, in a bench/splash.sh runs CSV.
runs_of() {
	echo "\$col[\"layout\"] == \"$1\" && \$col[\"build\"] == \"$2\" && \$col[\"status\"] == \"passed\""
}

# shown "MED MIN MAX" UNIT: "MED UNIT (MIN-MAX)" as the tables show a
# spread, or "-" without one.
shown() {
	echo "$1" | awk -v unit="$2" '
		NF < 3 { print "-"; exit }
		{ printf "%.3g %s (%.3g-%.3g)\n", $1, unit, $2, $3 }'
}
# row NAME UNIT TARGET "MED MIN MAX" "MED MIN MAX": one line of the table
# (markdown and CSV, in $tmp/md and $tmp/csv).
row() {
	awk -v name="$1" -v unit="$2" -v target="$3" -v m="$4" -v b="$5" \
		-v ms="$(shown "$4" "$2")" -v bs="$(shown "$5" "$2")" '
		BEGIN {
			split(m, mv, " "); split(b, bv, " ")
			ratio = ""
			if (mv[1] != "" && bv[1] != "" && bv[1] > 0) ratio = mv[1] / bv[1]
			if (ratio == "") { r = "-"; met = "no data" }
			else {
				r = sprintf("%.2f×", ratio)
				met = ratio <= target ? "yes" : "no"
			}
			printf "| %s | %s | %s | %s | ≤ %g× | %s |\n", name, ms,
				bs, r, target, met >> "'"$tmp/md"'"
			printf "\"%s\",%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", name,
				mv[1], mv[2], mv[3], bv[1], bv[2], bv[3],
				ratio == "" ? "" : sprintf("%.4f", ratio), target,
				met == "yes" ? "yes" : met == "no" ? "no" : "",
				unit >> "'"$tmp/csv"'"
		}'
}

: >"$tmp/md"
echo "target,measured_median,measured_min,measured_max,baseline_median,baseline_min,baseline_max,ratio,target_ratio,met,unit" >"$tmp/csv"
lu_csv=$outdir/lu-runs.csv
contig_csv=$outdir/lucontig-runs.csv
for case in "1 1 $t_lu1 $outdir/lu1-runs.csv" "4+4 8 $t_lu8 $lu_csv" \
	"8+8 16 $t_lu16 $lu_csv" "8+8+8+8 32 $t_lu32 $lu_csv"; do
	set -- $case
	where=$(runs_of "$1" lemuria); m=$(spread "$4" time_s 1)
	where=$(runs_of "$1" pthread); b=$(spread "$4" time_s 1)
	row "LU $args on $1 vs lu-pthread -p$2" s "$3" "$m" "$b"
done
where=$(runs_of 4+4 lemuria); m=$(spread "$contig_csv" time_s 1)
where=$(runs_of 4+4 pthread); b=$(spread "$contig_csv" time_s 1)
row "lucontig $args on 4+4 vs lucontig-pthread -p8" s "$t_contig" "$m" "$b"
where=$(runs_of 4+4 lemuria); m=$(spread "$outdir/lu-client-runs.csv" time_s 1)
where=$(runs_of 4+4 pthread); b=$(spread "$outdir/lu-client-runs.csv" time_s 1)
row "LU $args on 4+4 with copy = client vs lu-pthread -p8" s "$t_client" "$m" "$b"
# shellcheck disable=SC2016 # an awk condition, not for the shell
where='$col["failure"] == ""'
m=$(spread "$outdir/fault-runs.csv" fault_cluster_us 1)
b=$(spread "$outdir/fault-runs.csv" udp_rtt_4k_us 1)
case $mode in
bare_udp_one_cpu) placed="two processes on one CPU" ;;
*) placed="placed by the scheduler" ;;
esac
row "read fault from the lemuriad's copy ($(layout_label "$fault_layout")) vs bare UDP round trip, 4 KiB, $placed" µs "$t_fault" "$m" "$b"
# Bytes between the clusters: the 4+4 runs that passed with totals from
# every daemon, against the distinct pages LU's pattern must move between
# its two clusters (rank 0's first distribution of the matrix included),
# from LU's own -n and -b (its defaults 128 and 16 when not given).
lu_n=128; lu_b=16; prev=""
for w in $args; do
	case $prev in -n) lu_n=$w ;; -b) lu_b=$w ;; esac
	case $w in -n?*) lu_n=${w#-n} ;; -b?*) lu_b=${w#-b} ;; esac
	prev=$w
done
where="$(runs_of 4+4 lemuria) && \$col[\"daemons_answered\"] != \"\" && \$col[\"daemons_answered\"] == \$col[\"daemons_total\"]"
m=$(spread "$lu_csv" cluster_bytes_sent 1e-6)
must=$(python3 "$root/bench/lu-floor.py" --distinct "$lu_n" 8 4 "$lu_b") ||
	{ echo "$me: bench/lu-floor.py gave no floor for LU -n$lu_n -b$lu_b" >&2; failed=1; must=""; }
b=""
[ -n "$must" ] && b=$(echo "$must" | awk '{ v = $1 / 1e6; printf "%.6g %.6g %.6g\n", v, v, v }')
row "bytes between the clusters (both hops), LU $args on 4+4 vs the distinct pages that must cross (bench/lu-floor.py)" MB "$t_bytes" "$m" "$b"

# reported NAME CSV: one line of the table of the programs reported with
# no target (in $tmp/reported): time, pthreads time, ratio, MB between the
# clusters, from the 4+4 runs of a bench/splash.sh runs CSV.
: >"$tmp/reported"
reported() {
	where=$(runs_of 4+4 lemuria); m=$(spread "$2" time_s 1)
	mb=$(spread "$2" cluster_bytes_sent 1e-6)
	where=$(runs_of 4+4 pthread); b=$(spread "$2" time_s 1)
	awk -v name="$1" -v m="$m" -v b="$b" -v ms="$(shown "$m" s)" \
		-v bs="$(shown "$b" s)" -v mbs="$(shown "$mb" MB)" '
		BEGIN {
			split(m, mv, " "); split(b, bv, " ")
			r = "-"
			if (mv[1] != "" && bv[1] != "" && bv[1] > 0)
				r = sprintf("%.3g×", mv[1] / bv[1])
			printf "| %s | %s | %s | %s | %s |\n", name, ms, bs, r, mbs
		}' >>"$tmp/reported"
}
for p in $others; do
	a=$(awk -F, 'NR == 2 { print $NF }' "$outdir/$p.csv" 2>/dev/null)
	reported "$p ${a:-?} on 4+4 vs $p-pthread -p8" "$outdir/$p-runs.csv"
done

# How much of each Lemuria time the CPUs spent idle (idle_pct of the runs,
# build/bench/cpuidle): time a ratio owes to waiting, not to CPU.
idle_note=""
for case in "LU 4+4 $lu_csv" "LU 8+8 $lu_csv" "LU 8+8+8+8 $lu_csv" \
	"lucontig 4+4 $contig_csv"; do
	set -- $case
	where=$(runs_of "$2" lemuria); v=$(spread "$3" idle_pct 1)
	[ -n "$v" ] && idle_note="$idle_note${idle_note:+, }$1 $2 $(echo "$v" |
		awk '{ printf "%.1f %% (%.1f-%.1f)", $1, $2, $3 }')"
done
{
	echo "Performance targets (issue 40; LU on one process: issue 7): $reps runs"
	echo "of each ($reps1 of LU on one process and its baseline), medians (min-max);"
	echo "each baseline measured in the same run; $stamp."
	echo
	echo "| target | measured | baseline | ratio | target ratio | met |"
	echo "| --- | --- | --- | --- | --- | --- |"
	cat "$tmp/md"
	if [ -n "$idle_note" ]; then
		echo
		echo "CPUs idle in the timed part of the Lemuria runs: $idle_note."
	fi
	echo
	echo "Reported with no target (issue 40 asks for them), medians (min-max):"
	echo
	echo "| program | Lemuria | pthreads | ratio | between the clusters |"
	echo "| --- | --- | --- | --- | --- |"
	cat "$tmp/reported"
} >"$tmp/table.md"
cp "$tmp/table.md" "$outdir/targets.md" && cp "$tmp/csv" "$outdir/targets.csv" || exit 1
echo
cat "$tmp/table.md"
echo
echo "written: $outdir/targets.md, $outdir/targets.csv (runs in $outdir)"
if [ $failed -ne 0 ]; then
	echo "$me: some runs failed (see the messages above); their rows may say 'no data'" >&2
	exit 1
fi
exit 0
