#!/bin/sh
# Plots a CSV written by bench/splash.sh: the time of each layout, Lemuria
# (median, min-max bar, ratio to pthreads) beside the pthreads build, on a
# log scale.  Optional and separate from the build: it needs gnuplot.
#
#   bench/plot.sh [-p PROGRAM] [-i CSV] [-o PNG]
#
# Defaults: -p lu, -i bench/results/PROGRAM.csv, -o PROGRAM-time.png beside
# the CSV.  Exit status: 0 when the PNG was written, 1 when gnuplot is
# missing or fails or the CSV is unusable, 2 on a usage error.
set -u

me=bench/plot.sh
prog=""
csv=""
png=""

usage() {
	cat <<EOF
usage: $me [-p PROGRAM] [-i CSV] [-o PNG]
  -p PROGRAM  program name, for the default paths and the title (default lu,
              or the CSV's name when -i is given)
  -i CSV      results of bench/splash.sh (default bench/results/PROGRAM.csv)
  -o PNG      image to write (default PROGRAM-time.png beside the CSV)
EOF
}

while getopts p:i:o:h opt; do
	case $opt in
	p) prog=$OPTARG ;;
	i) csv=$OPTARG ;;
	o) png=$OPTARG ;;
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

if [ -z "$prog" ]; then
	if [ -n "$csv" ]; then
		prog=$(basename "$csv" .csv)
	else
		prog=lu
	fi
fi
[ -n "$csv" ] || csv=$(dirname "$0")/results/$prog.csv
[ -n "$png" ] || png=$(dirname "$csv")/$prog-time.png

if ! command -v gnuplot >/dev/null 2>&1; then
	echo "$me: gnuplot not found; install the Debian package gnuplot-nox" \
		"(apt-get install gnuplot-nox) to plot" \
		"$csv" >&2
	exit 1
fi
if [ ! -r "$csv" ]; then
	echo "$me: $csv: not found (run bench/splash.sh -p $prog first)" >&2
	exit 1
fi
want=layout,processes,clusters,median_s,min_s,max_s,pthread_median_s
want=$want,ratio_to_pthread
case $(head -n 1 "$csv" | tr -d '\r') in
"$want" | "$want",*) ;;
*)
	echo "$me: $csv: not a bench/splash.sh CSV (header '$want...')" >&2
	exit 1
	;;
esac

tmp=$(mktemp -d /tmp/lm-plot.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# One row per layout, whitespace separated, NaN where a build had no
# successful run (gnuplot then leaves the point out).
awk -F, 'NR > 1 {
	for (i = 4; i <= 8; i++) if ($i == "") $i = "NaN"
	print NR - 2, $1, $2, $4, $5, $6, $7, $8
}' "$csv" >"$tmp/data"
if [ ! -s "$tmp/data" ]; then
	echo "$me: $csv: no layouts in it" >&2
	exit 1
fi
if ! awk '$4 != "NaN" || $7 != "NaN" { ok = 1 } END { exit !ok }' \
	"$tmp/data"; then
	echo "$me: $csv: no layout has a time (every run failed)" >&2
	exit 1
fi

# Columns of $tmp/data: 1 index, 2 layout, 3 processes, 4 median,
# 5 min, 6 max, 7 pthread median, 8 ratio.
cat >"$tmp/plot.gp" <<EOF
set terminal pngcairo size 960,600 noenhanced font ",10"
set output "$png"
set title "$prog: time without initialization by layout (medians; bars: min to max)"
set xlabel "layout (clients per cluster, joined by +)" offset 0,-0.8
set bmargin 5
set ylabel "seconds (log scale)"
set logscale y
set format y "%g"
set grid ytics mytics
set key top left
set offsets 0.5, 0.5, 0, 0
set xtics nomirror
set datafile missing "NaN"
ratio(s) = (s eq "NaN") ? "" : s . "x"
plot "$tmp/data" using 1:4:5:6:xtic(sprintf("%s\n%d procs", strcol(2), \$3)) \\
		with yerrorlines lw 2 pt 7 title "Lemuria", \\
	"" using 1:7 with linespoints lw 2 pt 5 dt 2 title "pthreads, same processes as threads", \\
	"" using 1:4:(ratio(strcol(8))) with labels offset 0,1.2 notitle
EOF

if ! gnuplot "$tmp/plot.gp" 2>"$tmp/err"; then
	echo "$me: gnuplot failed on $csv:" >&2
	sed 's/^/  /' "$tmp/err" >&2
	rm -f "$png"
	exit 1
fi
echo "written: $png"
