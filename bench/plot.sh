#!/bin/sh
# Draws and tabulates the CSVs written by bench/splash.sh, in the manner of
# the Lemuria paper's Table 4 (one row per layout).  For each program:
#
#   PROGRAM-time.png     above, the time of each layout, Lemuria (median,
#                        min-max bar, ratio to pthreads) beside the pthreads
#                        build, log scale; below, the speedup over one
#                        process of both builds, with the ideal line
#   PROGRAM-traffic.png  MB each level of the hierarchy carried by layout
#                        (CSVs with the traffic columns only)
#
# or, with -m, a markdown table of each program on stdout (no gnuplot
# needed): time, speedup vs 1 process, ratio to pthreads, traffic per level.
#
#   bench/plot.sh [-m] [-p PROGRAMS] [-i CSV] [-I DIR] [-o PNG]
#
# Plots need gnuplot (Debian package gnuplot-nox, not installed by
# tools/install-deps.sh).  Exit status: 0 when every PNG or table was
# written, 1 when gnuplot is missing or fails or a CSV is missing or
# unusable, 2 on a usage error.
set -u

me=bench/plot.sh
# shellcheck disable=SC1091 # lib.sh: read when run
. "$(dirname "$0")/lib.sh" # need_gnuplot results_dir
all_programs="lu lucontig fft radix ocean"
progs=""
csv=""
dir=""
png=""
table=0

usage() {
	cat <<EOF
usage: $me [-m] [-p PROGRAMS] [-i CSV] [-I DIR] [-o PNG]
  -m          print a markdown table per program instead of plotting
  -p PROGRAMS programs, separated by blanks, or all ($all_programs),
              for the default paths and the titles (default lu, or the
              CSV's name when -i is given)
  -i CSV      results of bench/splash.sh (one program; default
              DIR/PROGRAM.csv)
  -I DIR      directory of the CSVs (default: bench/lib.sh's results_dir,
              build/bench-results unless LEMURIA_BENCH_RESULTS says)
  -o PNG      time plot to write (one program; default PROGRAM-time.png
              beside the CSV); the traffic plot goes beside it as
              PROGRAM-traffic.png
Speedups are over the layout with one process (layout 1), for Lemuria and
for the pthreads build each; without such a layout they are left out.
EOF
}

while getopts mp:i:I:o:h opt; do
	case $opt in
	m) table=1 ;;
	p) progs=$OPTARG ;;
	i) csv=$OPTARG ;;
	I) dir=$OPTARG ;;
	o) png=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
no_operands "$@"
set -f
[ "$progs" = all ] && progs=$all_programs
if [ -z "$progs" ]; then
	if [ -n "$csv" ]; then progs=$(basename "$csv" .csv); else progs=lu; fi
fi
n=0
for p in $progs; do n=$((n + 1)); done
if [ "$n" -ne 1 ] && [ -n "$csv$png" ]; then
	echo "$me: -i and -o name one program's files; with several use -I DIR" >&2
	exit 2
fi
[ -n "$dir" ] || dir=$(results_dir "$(cd "$(dirname "$0")/.." && pwd)")

if [ $table -eq 0 ]; then
	need_gnuplot "$me" || exit 1
fi

tmp=$(mktemp -d /tmp/lm-plot.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

want=layout,processes,clusters,median_s,min_s,max_s,pthread_median_s
want=$want,ratio_to_pthread

# usable PROGRAM CSV: whether CSV exists and is a bench/splash.sh CSV with
# at least one layout.
usable() {
	if [ ! -r "$2" ]; then
		echo "$me: $2: not found (run bench/splash.sh -p $1 first)" >&2
		return 1
	fi
	case $(head -n 1 "$2" | tr -d '\r') in
	"$want" | "$want",*) ;;
	*)
		echo "$me: $2: not a bench/splash.sh CSV (header '$want...')" >&2
		return 1
		;;
	esac
	if [ "$(wc -l <"$2")" -lt 2 ]; then
		echo "$me: $2: no layouts in it" >&2
		return 1
	fi
}

# rows CSV: one line per layout, blank separated, NaN where a value is
# missing: 1 index, 2 layout, 3 processes, 4 median, 5 min, 6 max,
# 7 pthread median, 8 ratio, 9 speedup, 10 pthread speedup, 11 client MB
# (both ways), 12 cluster MB, 13 root MB, 14 client msgs, 15 cluster msgs,
# 16 root msgs, 17 cluster/client bytes, 18 failed runs, 19 pthread min,
# 20 pthread max, 21 client MB down, 22 client MB up.  Speedups are over the
# first row with one process.
rows() {
	awk -F, '
		function v(name) {
			return (name in col) && $col[name] != "" ? $col[name] : "NaN"
		}
		function mb(name) {
			return v(name) == "NaN" ? "NaN" : sprintf("%.3f", v(name) / 1e6)
		}
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		{
			n++
			line[n] = sprintf("%d %s %s %s %s %s %s %s", n - 1, v("layout"),
				v("processes"), v("median_s"), v("min_s"), v("max_s"),
				v("pthread_median_s"), v("ratio_to_pthread"))
			cmb = "NaN"
			if (v("client_bytes_sent") != "NaN" && v("client_bytes_received") != "NaN")
				cmb = sprintf("%.3f", (v("client_bytes_sent") + v("client_bytes_received")) / 1e6)
			rest[n] = sprintf("%s %s %s %s %s %s %s %s %s %s %s %s", cmb,
				mb("cluster_bytes_sent"), mb("root_bytes_sent"),
				v("client_msgs_sent"), v("cluster_msgs_sent"),
				v("root_msgs_sent"), v("cluster_to_client_bytes"),
				v("failed_runs"), v("pthread_min_s"), v("pthread_max_s"),
				mb("client_bytes_sent"), mb("client_bytes_received"))
			t[n] = v("median_s"); pt[n] = v("pthread_median_s")
			if (v("processes") == 1 && !base) {
				base = 1; t1 = t[n]; pt1 = pt[n]
			}
		}
		function speedup(one, x) {
			if (!base || one == "NaN" || x == "NaN" || x + 0 <= 0) return "NaN"
			return sprintf("%.3f", one / x)
		}
		END {
			for (i = 1; i <= n; i++)
				print line[i], speedup(t1, t[i]), speedup(pt1, pt[i]), rest[i]
		}' "$1"
}

# stamp CSV: the host, tree and date of CSV's runs (bench/splash.sh writes
# them beside it), or nothing for a CSV of an older driver.
stamp() {
	[ -f "${1%.csv}.stamp" ] && head -n 1 "${1%.csv}.stamp"
}

# markdown PROGRAM CSV: the table of one program on stdout.
markdown() {
	rows "$2" >"$tmp/data" || return 1
	pargs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "args") c = i; next }
		c { print $c; exit }' "$2")
	runs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "runs") c = i; next }
		c { print $c; exit }' "$2")
	echo "### $1${pargs:+ $pargs}"
	echo
	st=$(stamp "$2")
	[ -n "$st" ] && echo "Runs: $st." && echo
	echo "Medians${runs:+ of $runs runs per build}, time without initialization (min-max);" \
		"speedup over the 1-process layout; ratio = Lemuria / pthreads at" \
		"the same process count; traffic of the Lemuria run, MB = 10^6 bytes" \
		"(client: lemuriads to clients / clients to lemuriads; cluster:" \
		"lemuriad <-> reflector; root: reflector <-> reflector)."
	echo
	echo "| layout | procs | Lemuria s | speedup | pthreads s | pthreads speedup | ratio | client msgs | client MB down / up | cluster msgs | cluster MB | root msgs | root MB | cluster / client | failed |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
	awk '
		function g(x, f) { return x == "NaN" ? "-" : sprintf(f, x) }
		function n(x,    s, r) {   # 1234567 -> 1,234,567
			if (x == "NaN") return "-"
			s = sprintf("%d", x); r = ""
			while (length(s) > 3) {
				r = "," substr(s, length(s) - 2) r
				s = substr(s, 1, length(s) - 3)
			}
			return s r
		}
		{
			tm = $4 == "NaN" ? "-" : sprintf("%.3g (%.3g-%.3g)", $4, $5, $6)
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s |\n",
				$2, $3, tm, g($9, "%.2f"), g($7, "%.3g"), g($10, "%.2f"),
				g($8, "%.1f×"), n($14), g($21, "%.1f"), g($22, "%.1f"),
				n($15), g($12, "%.1f"), n($16), g($13, "%.1f"),
				g($17, "%.3f"), $18
		}' "$tmp/data"
	echo
}

# plot PROGRAM CSV PNG: the time and speedup plot, then the traffic plot
# beside it when the CSV has traffic.
plot() {
	prog=$1; in=$2; out=$3
	rows "$in" >"$tmp/data" || return 1
	if ! awk '$4 != "NaN" || $7 != "NaN" { ok = 1 } END { exit !ok }' \
		"$tmp/data"; then
		echo "$me: $in: no layout has a time (every run failed)" >&2
		return 1
	fi
	pargs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "args") c = i; next }
		c { print $c; exit }' "$in")
	title="$prog${pargs:+ $pargs}"
	st=$(stamp "$in")
	[ -n "$st" ] && title="$title ($st)"
	speed=0
	awk '$9 != "NaN" || $10 != "NaN" { ok = 1 } END { exit !ok }' \
		"$tmp/data" && speed=1

	{
		echo "set terminal pngcairo size 960,$((speed == 1 ? 960 : 600)) noenhanced font \",10\""
		echo "set output \"$out\""
		echo "set datafile missing \"NaN\""
		echo "ratio(s) = (s eq \"NaN\") ? \"\" : s . \"x\""
		[ $speed -eq 1 ] && echo "set multiplot layout 2,1 title \"$title (bench/splash.sh)\""
		cat <<EOF
set title "$title: time without initialization by layout (medians; bars: min to max)"
set xlabel "layout (clients per cluster, joined by +)" offset 0,-0.8
set bmargin 5
set ylabel "seconds (log scale)"
set logscale y
set format y "%g"
set grid ytics mytics
set key top left
set offsets 0.5, 0.5, 0, 0
set xtics nomirror
plot "$tmp/data" using 1:4:5:6:xtic(sprintf("%s\n%d procs", strcol(2), \$3)) \\
		with yerrorlines lw 2 pt 7 title "Lemuria", \\
	"" using 1:7 with linespoints lw 2 pt 5 dt 2 title "pthreads, same processes as threads", \\
	"" using 1:4:(ratio(strcol(8))) with labels offset 0,1.2 notitle
EOF
		if [ $speed -eq 1 ]; then
			cat <<EOF
set title "$title: speedup over one process (log scale)"
set ylabel "speedup"
plot "$tmp/data" using 1:9:xtic(sprintf("%s\n%d procs", strcol(2), \$3)) \\
		with linespoints lw 2 pt 7 title "Lemuria", \\
	"" using 1:10 with linespoints lw 2 pt 5 dt 2 title "pthreads", \\
	"" using 1:3 with lines lw 1.5 lc rgb "gray40" dt 3 title "ideal (processes)"
unset multiplot
EOF
		fi
	} >"$tmp/plot.gp"
	if ! gnuplot "$tmp/plot.gp" 2>"$tmp/err"; then
		echo "$me: gnuplot failed on $in:" >&2
		sed 's/^/  /' "$tmp/err" >&2
		rm -f "$out"
		return 1
	fi
	echo "written: $out"

	# Traffic: only CSVs with the traffic columns, and a value in them.
	awk '$11 != "NaN" || $12 != "NaN" { ok = 1 } END { exit !ok }' \
		"$tmp/data" || return 0
	tout=$(dirname "$out")/$prog-traffic.png
	cat >"$tmp/traffic.gp" <<EOF
set terminal pngcairo size 960,600 noenhanced font ",10"
set output "$tout"
set datafile missing "NaN"
set title "$title: traffic per level of the hierarchy by layout (medians, MB = 10^6 bytes)"
set ylabel "MB"
set yrange [0:*]
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key top left
set xtics nomirror
set bmargin 5
plot "$tmp/data" using 11:xtic(sprintf("%s\n%d procs", strcol(2), \$3)) \\
		title "client <-> lemuriad (both ways)", \\
	"" using 12 title "lemuriad <-> reflector", \\
	"" using 13 title "reflector <-> reflector"
EOF
	if ! gnuplot "$tmp/traffic.gp" 2>"$tmp/err"; then
		echo "$me: gnuplot failed on the traffic of $in:" >&2
		sed 's/^/  /' "$tmp/err" >&2
		rm -f "$tout"
		return 1
	fi
	echo "written: $tout"
}

status=0
for p in $progs; do
	in=${csv:-$dir/$p.csv}
	if ! usable "$p" "$in"; then
		status=1
		continue
	fi
	if [ $table -eq 1 ]; then
		# Through a file, so that a reader that stops early (head)
		# stops cat, not this script before its clean-up.
		if markdown "$p" "$in" >"$tmp/table"; then
			cat "$tmp/table"
		else
			status=1
		fi
	else
		plot "$p" "$in" "${png:-$(dirname "$in")/$p-time.png}" || status=1
	fi
done
exit $status
