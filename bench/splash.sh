#!/bin/sh
# SPLASH-2 benchmark driver: runs SPLASH-2 programs on a list of Lemuria
# layouts and, in the same session, their pthreads builds with as many
# threads, so that every Lemuria time is reported beside its shared-memory
# baseline (DESIGN.md section 7), with the messages and bytes each level of
# the hierarchy carried (lemuria-run --stats).  See docs/performance.md,
# "Reproducing".
#
#   bench/splash.sh [-qP] [-p PROGRAMS] [-a "ARGS"] [-r REPS] [-l "LAYOUTS"]
#                   [-o CSV] [-O DIR] [-T SECONDS] [-B BUILD_DIR]
#
# Needs build/splash2/PROGRAM, build/splash2/PROGRAM-pthread and
# build/bin/lemuria-run (make).  Exit status: 0 when every run passed, 1 when
# some failed (they are counted in the CSV), 2 on a usage error.

# ARGS and LAYOUTS are meant to split into words (with set -f, below), the
# trap handlers are reached only through trap, and lib.sh uses caller and
# sets traffic_cols.
# shellcheck disable=SC2086,SC2046,SC2317,SC1091,SC2034,SC2154
set -u

me=bench/splash.sh
. "$(dirname "$0")/lib.sh" # is_count absolute layout_* timed seconds stats ...
all_programs="lu lucontig fft radix ocean"
progs=lu
args=""
reps=3
layouts="1 2 4 4+4 8 4+4+4+4 8+8 8+8+8+8"
out=""
outdir=""
limit=900
build=""
quick=0
pin="--pin --batch" # each cluster on CPUs of its own; -U: none
report=0
# The quick mode sets only what was not given on the command line.
given_a=""; given_r=0; given_l=0

# default_args PROGRAM QUICK: the program's arguments when -a is not given
# (without -p and -t): sizes chosen so that the default set of every program
# runs in reasonable time on a small machine (docs/splash2.md), or, when
# QUICK is 1, in seconds.
default_args() {
	case $2:$1 in
	0:lu | 0:lucontig) echo "-n1024 -b16" ;;
	0:fft) echo "-m20" ;;
	0:radix) echo "-n1048576" ;;
	0:ocean) echo "-n258" ;;
	1:lu | 1:lucontig) echo "-n256 -b16" ;;
	1:fft) echo "-m14" ;;
	1:radix) echo "-n65536" ;;
	1:ocean) echo "-n66 -k2" ;;
	*) echo "" ;;
	esac
}

usage() {
	cat <<EOF
usage: $me [-qPU] [-p PROGRAMS] [-a "ARGS"] [-r REPS] [-l "LAYOUTS"] [-o CSV]
                       [-O DIR] [-T SECONDS] [-B BUILD_DIR]
  -p PROGRAMS  SPLASH-2 programs under BUILD_DIR/splash2, separated by
               blanks, or all ($all_programs) (default $progs)
  -a "ARGS"    the program's arguments, without -p and -t (one program
               only; default per program: lu and lucontig "$(default_args lu 0)",
               fft "$(default_args fft 0)", radix "$(default_args radix 0)", ocean "$(default_args ocean 0)")
  -r REPS      runs of each build per layout (default $reps)
  -l "LAYOUTS" layout names (conf/NAME.ini) or .ini paths
               (default "$layouts")
  -o CSV       result file (one program only; default DIR/PROGRAM.csv)
  -O DIR       directory of the result files (default build/bench-results,
               or \$LEMURIA_BENCH_RESULTS: bench/results to update the tree's)
  -T SECONDS   limit for each single run (default $limit)
  -B DIR       build directory (default build at the top of the tree)
  -q           quick check: small sizes (lu -n256, fft -m14, radix -n65536,
               ocean -n66 -k2), -r 1 and -l "1 4+4" unless given, and the
               CSVs in \${TMPDIR:-/tmp}/lemuria-splash-quick unless -o/-O
  -U           run the Lemuria build unplaced (default: lemuria-run
               --pin --batch, each cluster's lemuriad and ranks on CPUs of
               their own, the ranks under SCHED_BATCH)
  -P           after the runs, bench/plot.sh: a markdown table per program
               (printed, and written beside the CSV as PROGRAM.md) and the
               plots PROGRAM-time.png and PROGRAM-traffic.png (these need
               gnuplot, Debian package gnuplot-nox; without it they are
               skipped with a message)
The Lemuria build runs under lemuria-run --pin --batch --all-stats with ARGS -t on a private
copy of each layout (ports of its own); the pthreads build runs with ARGS
-pN, N the layout's client count.  A Lemuria run that exits non-zero, prints
TEST FAILED or no time is counted as failed and not timed; so is a failed
pthreads run.  Each program's CSV has one row per layout; every single run
is in the same name ending in -runs.csv.
EOF
}

while getopts qPUp:a:r:l:o:O:T:B:h opt; do
	case $opt in
	U) pin="" ;;
	q) quick=1 ;;
	P) report=1 ;;
	p) progs=$OPTARG ;;
	a) args=$OPTARG; given_a=1 ;;
	r) reps=$OPTARG; given_r=1 ;;
	l) layouts=$OPTARG; given_l=1 ;;
	o) out=$OPTARG ;;
	O) outdir=$OPTARG ;;
	T) limit=$OPTARG ;;
	B) build=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
no_operands "$@"
set -f # ARGS and LAYOUTS are split into words, never expanded as patterns
[ "$progs" = all ] && progs=$all_programs
if [ $quick -eq 1 ]; then
	[ $given_r -eq 1 ] || reps=1
	[ $given_l -eq 1 ] || layouts="1 4+4"
	# A quick check never overwrites the results kept in the tree.
	[ -n "$out$outdir" ] || outdir=${TMPDIR:-/tmp}/lemuria-splash-quick
fi

[ -n "$out" ] && out=$(absolute "$out")
[ -n "$outdir" ] && outdir=$(absolute "$outdir")
[ -n "$build" ] && build=$(absolute "$build")
caller=$PWD
cd "$(dirname "$0")/.." || exit 2
root=$PWD
[ -n "$outdir" ] || outdir=$(results_dir "$root")
[ -n "$build" ] || build=$root/build

bad=0
complain() { echo "$me: $*" >&2; bad=1; }
is_count "$reps" || complain "-r wants a positive integer, not '$reps'"
is_count "$limit" || complain "-T wants a positive number of seconds, not '$limit'"
run_bin=$build/bin/lemuria-run
[ -x "$run_bin" ] || complain "$run_bin: not found or not executable (run make)"
nprogs=0
seen=" "
for p in $progs; do
	nprogs=$((nprogs + 1))
	case $p in
	*/* | *,* | *\"*) complain "-p wants program names, not '$p'" ; continue ;;
	esac
	case $seen in *" $p "*) complain "-p: program '$p' given twice" ;; esac
	seen="$seen$p "
	for f in "$build/splash2/$p" "$build/splash2/$p-pthread"; do
		[ -x "$f" ] || complain "$f: not found or not executable (run make)"
	done
	[ -n "$given_a" ] || [ -n "$(default_args "$p" $quick)" ] ||
		complain "-p $p: no default arguments for it; give -a"
done
[ $nprogs -gt 0 ] || complain "-p wants at least one program"
case $args in *,* | *\"*) complain "-a: arguments with ',' or '\"' (they go into the CSV)" ;; esac
if [ $nprogs -gt 1 ]; then
	[ -z "$given_a" ] || complain "-a applies to one program; with several each has its defaults"
	[ -z "$out" ] || complain "-o names one program's CSV; with several use -O DIR"
fi
[ -n "$layouts" ] || complain "-l wants at least one layout"

check_layouts 0
[ $bad -eq 0 ] || exit 2
# Said before the runs, which may take long, and again after them.
if [ $report -eq 1 ] && ! need_gnuplot "$me" 2>/dev/null; then
	need_gnuplot "$me"
	echo "$me: the tables will be written, the plots skipped" >&2
fi

tmp=$(mktemp -d /tmp/lm-bench.XXXXXX) || exit 1
child=""
partial=""
runs_partial=""

# The CPUs' idle ticks beside each run (build/bench/cpuidle, when built),
# for the share left idle in its timed part (idle_share, bench/lib.sh).
sampler=$build/bench/cpuidle
sampler_pid=""

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
	sample_stop
	if [ -n "$partial" ]; then
		echo "$me: interrupted; the layouts done so far are in $partial and $runs_partial" >&2
	else
		echo "$me: interrupted" >&2
	fi
	cleanup
	exit 130
}
trap interrupted INT TERM
trap cleanup EXIT

# summary LAYOUT PROCS CLUSTERS ARGS: the CSV row of one layout from the runs
# file: Lemuria's time (median, min, max) over its runs that passed, the
# pthreads median and the ratio, the failed runs of both builds, the median
# of each traffic column over the Lemuria runs that passed with totals from
# every daemon, the bytes at level cluster over those at level client (each
# message counted once on both levels: client, sent by the lemuriads plus
# received from the clients), the pthreads min and max, the runs of each
# build and the program's arguments.
summary() {
	awk -F, -v layout="$1" -v head="$1,$2,$3" -v ntraffic="$ntraffic" \
		-v reps="$reps" -v args="$4" '
		function median(a, n,    i, j, t) {
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
					t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
				}
			if (n == 0) return ""
			if (n % 2) return a[(n + 1) / 2]
			return (a[n / 2] + a[n / 2 + 1]) / 2
		}
		function range(a, n, what,    i) {
			lo[what] = hi[what] = ""
			for (i = 1; i <= n; i++) {
				if (lo[what] == "" || a[i] < lo[what]) lo[what] = a[i]
				if (hi[what] == "" || a[i] > hi[what]) hi[what] = a[i]
			}
		}
		function fmt(x) { return x == "" ? "" : sprintf("%.6f", x) }
		NR == 1 {
			for (i = 1; i <= NF; i++) col[$i] = i
			first = col["time_s"] + 1
			next
		}
		$1 != layout { next }
		$col["status"] != "passed" { failed++; next }
		$col["build"] == "pthread" { np++; pt[np] = $col["time_s"] + 0; next }
		{ nl++; lm[nl] = $col["time_s"] + 0 }
		$col["daemons_answered"] == "" ||
		    $col["daemons_answered"] != $col["daemons_total"] { next }
		{
			for (c = first; c < first + ntraffic; c++)
				if ($c != "") { n[c]++; v[c, n[c]] = $c }
		}
		END {
			range(lm, nl, "lm"); range(pt, np, "pt")
			med = median(lm, nl); pmed = median(pt, np)
			ratio = ""
			if (med != "" && pmed != "" && pmed > 0)
				ratio = sprintf("%.2f", med / pmed)
			printf "%s,%s,%s,%s,%s,%s,%d", head, fmt(med), fmt(lo["lm"]),
				fmt(hi["lm"]), fmt(pmed), ratio, failed
			for (c = first; c < first + ntraffic; c++) {
				delete a
				for (i = 1; i <= n[c]; i++) a[i] = v[c, i] + 0
				m[c] = median(a, n[c] + 0)
				printf ",%s", m[c] == "" ? "" : sprintf("%.15g", m[c])
			}
			down = m[col["client_bytes_sent"]]
			up = m[col["client_bytes_received"]]
			clu = m[col["cluster_bytes_sent"]]
			if (down != "" && up != "" && clu != "" && down + up > 0)
				printf ",%.4f", clu / (down + up)
			else
				printf ","
			printf ",%s,%s,%d,%s\n", fmt(lo["pt"]), fmt(hi["pt"]), reps,
				args
		}' "$runs_partial"
}

# show_rows CSV [header]: the rows of a program's CSV as a table (bytes in
# MB, 10^6).
show_rows() {
	awk -F, -v header="${2:-}" '
		function mb(x) { return x == "" ? "-" : sprintf("%.1f", x / 1e6) }
		function num(x) { return x == "" ? "-" : x }
		NR == 1 {
			for (i = 1; i <= NF; i++) col[$i] = i
			if (header != "")
				printf "%-10s %5s %3s  %-24s %10s %8s  %-23s %-18s %-14s %7s %6s\n",
					"layout", "procs", "cl", "lemuria s (min-max)",
					"pthread s", "ratio", "client msgs/MBdown/MBup",
					"cluster msgs/MB", "root msgs/MB", "clu/cli",
					"failed"
			next
		}
		{
			lm = $col["median_s"] == "" ? "-" : sprintf("%.3g (%.3g-%.3g)",
				$col["median_s"], $col["min_s"], $col["max_s"])
			pt = $col["pthread_median_s"] == "" ? "-" : \
				sprintf("%.3g", $col["pthread_median_s"])
			ra = $col["ratio_to_pthread"] == "" ? "-" : \
				sprintf("%.1fx", $col["ratio_to_pthread"])
			printf "%-10s %5s %3s  %-24s %10s %8s  %-23s %-18s %-14s %7s %6s\n",
				$col["layout"], $col["processes"], $col["clusters"],
				lm, pt, ra,
				num($col["client_msgs_sent"]) "/" mb($col["client_bytes_sent"]) \
					"/" mb($col["client_bytes_received"]),
				num($col["cluster_msgs_sent"]) "/" mb($col["cluster_bytes_sent"]),
				num($col["root_msgs_sent"]) "/" mb($col["root_bytes_sent"]),
				num($col["cluster_to_client_bytes"]), $col["failed_runs"]
		}' "$1"
}

# The first nine columns are those of the CSVs before traffic was recorded
# (bench/plot.sh and bench/targets.sh read them by name; keep them first).
ntraffic=$(echo "$traffic_cols" | awk -F, '{ print NF }')
header=layout,processes,clusters,median_s,min_s,max_s
header=$header,pthread_median_s,ratio_to_pthread,failed_runs
header=$header,$traffic_cols,cluster_to_client_bytes
header=$header,pthread_min_s,pthread_max_s,runs,args
runs_header=layout,build,run,status,time_s,$traffic_cols
runs_header=$runs_header,daemons_answered,daemons_total,failure,idle_pct
# The traffic fields of a pthreads run: all empty.
no_traffic=$(echo ",$traffic_cols,x,x" | sed 's/[^,]//g')

# the tree of the build measured: with -B, another checkout's
rev=$(git -C "$build" describe --always --dirty 2>/dev/null || echo unknown)
stamp="host $(uname -n), $(nproc) CPUs, tree $rev, $(date '+%Y-%m-%d %H:%M')"
echo "programs $progs: $reps runs per build on layouts: $layouts"
echo "$stamp"
if [ -n "$out" ]; then
	echo "limit $limit s per run; results to $out"
else
	echo "limit $limit s per run; results in $outdir"
fi

# One private copy of each layout, ports of its own, for every program.
. "$root/tests/lib.sh"
index=0
for l in $layouts; do
	index=$((index + 1))
	mkdir -p "$tmp/$index"
	# (in a subshell: private_layout sets variables such as out)
	(private_layout "$(layout_file "$l")" "$tmp/$index" "$index") >/dev/null ||
		exit 1
done

# run_program PROGRAM ARGS CSV: runs both builds of PROGRAM on every layout
# and writes CSV and its runs file; adds the failed runs to failed_total.
run_program() {
	prog=$1; pargs=$2; csv=$3
	lm_bin=$build/splash2/$prog
	pt_bin=$build/splash2/$prog-pthread
	case $csv in
	*.csv) runs_csv=${csv%.csv}-runs.csv ;;
	*) runs_csv=$csv-runs.csv ;;
	esac
	partial=$csv.tmp
	runs_partial=$runs_csv.tmp
	mkdir -p "$(dirname "$csv")" || exit 1
	echo "$header" >"$partial" || exit 1
	echo "$runs_header" >"$runs_partial" || exit 1
	echo
	echo "== $prog $pargs"

	index=0
	for l in $layouts; do
		index=$((index + 1))
		label=$(layout_label "$l")
		lf=$(layout_file "$l")
		set -- $(layout_size "$lf")
		procs=$1; clusters=$2
		lay=$tmp/$index/$(basename "$lf")
		echo "layout $label: processes $procs, clusters $clusters"

		rep=0
		while [ $rep -lt "$reps" ]; do
			rep=$((rep + 1))
			log=$tmp/$index/lemuria.$rep
			# lemuria-run stops ranks and daemons itself at -T; the
			# outer timeout only guards against lemuria-run hanging.
			sample_start "$sampler" "$tmp/idle" $((limit + 60))
			timed $((limit + 20)) "$log" "$run_bin" -c "$lay" \
				$pin --start-daemons --all-stats --timeout "$limit" -- \
				"$lm_bin" $pargs -t
			st=$?
			sample_stop
			idle=$(idle_share "$tmp/idle" "$log")
			t=$(seconds "$log")
			tr=$(traffic "$log")
			if passed $st "$log" "$t" 1; then
				status=passed; failure=""; lm_msg="$t s"
			else
				status=failed; lm_msg=failed
				failure=$(why $st "$log" 1 | tr ',' ';')
				report_failure "$label lemuria run $rep/$reps" $st "$log" 1
			fi
			echo "$label,lemuria,$rep,$status,$t,$tr,$failure,$idle" \
				>>"$runs_partial"
			lm_mb=$(echo "$tr" | awk -F, -v i="$idle" '
				$2 != "" && $3 != "" && $5 != "" {
					printf ", client %.1f MB, cluster %.1f MB",
						($2 + $3) / 1e6, $5 / 1e6 }
				END { if (i != "") printf ", idle %s %%", i }')

			log=$tmp/$index/pthread.$rep
			sample_start "$sampler" "$tmp/idle" $((limit + 60))
			timed "$limit" "$log" "$pt_bin" $pargs -p"$procs"
			st=$?
			sample_stop
			idle=$(idle_share "$tmp/idle" "$log")
			t=$(seconds "$log")
			if passed $st "$log" "$t" 0; then
				status=passed; failure=""; pt_msg="$t s"
			else
				status=failed; pt_msg=failed
				failure=$(why $st "$log" 0 | tr ',' ';')
				report_failure "$label pthread run $rep/$reps" $st "$log" 0
			fi
			echo "$label,pthread,$rep,$status,$t$no_traffic,$failure,$idle" \
				>>"$runs_partial"
			[ -n "$idle" ] && pt_msg="$pt_msg, idle $idle %"
			rounds_done=$((rounds_done + 1))
			printf '  run %d/%d: lemuria %s%s; pthread %s (%s)\n' \
				"$rep" "$reps" "$lm_msg" "$lm_mb" "$pt_msg" \
				"$(eta "$rounds_done" "$rounds_total" "$bench_start")"
		done
		summary "$label" "$procs" "$clusters" "$pargs" >>"$partial"
	done

	mv "$runs_partial" "$runs_csv" && mv "$partial" "$csv" || exit 1
	# where and from what the numbers came, for plot.sh's tables and
	# plots (issue 42)
	echo "$stamp" >"${csv%.csv}.stamp" || exit 1
	failed=$(awk -F, 'NR > 1 && $4 != "passed"' "$runs_csv" | wc -l)
	failed_total=$((failed_total + failed))

	echo
	echo "$prog $pargs: medians of $reps runs (time without initialization;"
	echo "traffic of the Lemuria run per level: messages, MB (10^6 bytes) sent,"
	echo "at level client also MB received from the clients; clu/cli is"
	echo "cluster bytes / client bytes both ways)"
	show_rows "$csv" header
	echo "written: $csv, $runs_csv"
	partial=""
	[ $report -eq 1 ] && report "$prog" "$csv"
	return 0
}

# report PROGRAM CSV: the markdown table (printed and beside the CSV) and
# the plots, by bench/plot.sh; a missing gnuplot is reported, not fatal.
report() {
	case $2 in
	*.csv) md=${2%.csv}.md ;;
	*) md=$2.md ;;
	esac
	echo
	if "$root/bench/plot.sh" -m -p "$1" -i "$2" >"$md"; then
		cat "$md"
		echo "written: $md"
	else
		rm -f "$md"
	fi
	if need_gnuplot "$me"; then
		"$root/bench/plot.sh" -p "$1" -i "$2"
	fi
}

failed_total=0
# progress: the rounds (a Lemuria and a pthreads run) of every program
# on every layout, and when the first began
rounds_total=$(( $(echo $progs | wc -w) * $(echo $layouts | wc -w) * reps ))
rounds_done=0
bench_start=$(date +%s)
for p in $progs; do
	if [ -n "$given_a" ]; then a=$args; else a=$(default_args "$p" $quick); fi
	if [ -n "$out" ]; then o=$out; else o=$outdir/$p.csv; fi
	run_program "$p" "$a" "$o"
done

if [ $failed_total -gt 0 ]; then
	echo "$me: $failed_total runs failed (see the messages above)" >&2
	exit 1
fi
exit 0
