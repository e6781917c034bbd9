#!/bin/sh
# Plots a CSV written by bench/hierarchy.sh: above, LU's time by layout with
# lazy and eager relay (medians, min-max bars); below, the bytes that
# crossed each level of the hierarchy (client-lemuriad both ways,
# lemuriad-reflector, reflector-reflector) by layout and relay, in the
# manner of the paper's Table 4.  Optional: it needs gnuplot.
#
#   bench/plot-hierarchy.sh [-i CSV] [-o PNG]
#
# Defaults: -i hierarchy.csv in bench/lib.sh's results_dir
# (build/bench-results unless asked), -o hierarchy.png beside it.
# Exit status: 0 when the PNG was written, 1 when gnuplot is missing or
# fails or the CSV is unusable, 2 on a usage error.
set -u

me=bench/plot-hierarchy.sh
csv=""
png=""
usage() {
	echo "usage: $me [-i CSV] [-o PNG]"
}
while getopts i:o:h opt; do
	case $opt in
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
# shellcheck disable=SC1091 # lib.sh: read when run
. "$(dirname "$0")/lib.sh" # results_dir
[ -n "$csv" ] || csv=$(results_dir "$(cd "$(dirname "$0")/.." && pwd)")/hierarchy.csv
# the host, tree and date of the runs (bench/hierarchy.sh writes them)
stamp=""
[ -f "${csv%.csv}.stamp" ] && stamp="; $(head -n 1 "${csv%.csv}.stamp")"
[ -n "$png" ] || png=$(dirname "$csv")/hierarchy.png

if ! command -v gnuplot >/dev/null 2>&1; then
	echo "$me: gnuplot not found; install the Debian package gnuplot-nox" >&2
	exit 1
fi
if [ ! -r "$csv" ]; then
	echo "$me: $csv: not found (run bench/hierarchy.sh first)" >&2
	exit 1
fi
case $(head -n 1 "$csv" | tr -d '\r') in
layout,relay,processes,clusters,reflectors,runs,failed_runs,median_s,min_s,max_s,client_msgs_sent,client_bytes_sent,client_bytes_received,cluster_msgs_sent,cluster_bytes_sent,root_msgs_sent,root_bytes_sent*) ;;
*)
	echo "$me: $csv: not a bench/hierarchy.sh CSV" >&2
	exit 1
	;;
esac

tmp=$(mktemp -d /tmp/lm-plot.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# One row per layout: index, label ("4+4(8p)": layout and processes), then
# for lazy and eager: median, min,
# max, client MB (both ways), cluster MB, root MB.  NaN where missing.
awk -F, 'NR > 1 {
	if (!($1 in idx)) { idx[$1] = n++; name[n - 1] = $1; procs[n - 1] = $3 }
	i = idx[$1]
	for (k = 8; k <= 10; k++) if ($k == "") $k = "NaN"
	t[i, $2] = $8 " " $9 " " $10
	mb[i, $2] = sprintf("%.1f %.1f %.1f", ($12 + $13) / 1e6, $15 / 1e6,
			    $17 / 1e6)
}
END {
	for (i = 0; i < n; i++) {
		l = (i SUBSEP "lazy") in t ? t[i, "lazy"] " " mb[i, "lazy"] : \
		    "NaN NaN NaN NaN NaN NaN"
		e = (i SUBSEP "eager") in t ? t[i, "eager"] " " mb[i, "eager"] : \
		    "NaN NaN NaN NaN NaN NaN"
		printf "%d %s(%dp) %s %s\n", i, name[i], procs[i], l, e
	}
}' "$csv" >"$tmp/data"
if [ ! -s "$tmp/data" ]; then
	echo "$me: $csv: no layouts in it" >&2
	exit 1
fi

# Columns: 1 index, 2 label, lazy 3-5 time, 6-8 MB; eager 9-11, 12-14.
cat >"$tmp/plot.gp" <<EOF
set terminal pngcairo size 1000,900 noenhanced font ",10"
set output "$png"
set datafile missing "NaN"
set multiplot layout 2,1 title "LU n=1024 b=16: lazy vs eager relay (bench/hierarchy.sh$stamp)"
set title "time without initialization (medians; bars: min to max)"
set ylabel "seconds"
set yrange [0:*]
set offsets 0.5, 0.5, 0, 0
set key top left
set grid ytics
set xtics nomirror
plot "$tmp/data" using (\$1 - 0.08):3:4:5:xtic(2) with yerrorlines lw 2 pt 7 title "lazy", \\
	"" using (\$1 + 0.08):9:10:11 with yerrorlines lw 2 pt 5 dt 2 title "eager"
set title "bytes per level (medians, MB)"
set ylabel "MB"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set offsets 0, 0, 0, 0
plot "$tmp/data" using 6:xtic(2) title "client-lemuriad, lazy", \\
	"" using 12 title "client-lemuriad, eager", \\
	"" using 7 title "lemuriad-reflector, lazy", \\
	"" using 13 title "lemuriad-reflector, eager", \\
	"" using 8 title "reflector-reflector, lazy", \\
	"" using 14 title "reflector-reflector, eager"
unset multiplot
EOF
if ! gnuplot "$tmp/plot.gp" 2>"$tmp/err"; then
	echo "$me: gnuplot failed on $csv:" >&2
	sed 's/^/  /' "$tmp/err" >&2
	rm -f "$png"
	exit 1
fi
echo "written: $png"
