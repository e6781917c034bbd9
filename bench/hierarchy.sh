#!/bin/sh
# Traffic per level of the hierarchy: runs SPLASH-2 LU on a list of layouts
# with lazy and with eager relay and records, beside each time, the messages
# and bytes the daemons moved at each level (lemuria-run --stats), so that
# what each level carries can be compared across layouts and relay modes.
# See docs/performance.md, "Traffic per level (lazy vs eager)".
#
#   bench/hierarchy.sh [-q] [-l "LAYOUTS"] [-R "RELAYS"] [-r REPS] [-a "ARGS"]
#                      [-o CSV] [-T SECONDS] [-B BUILD_DIR]
#
# Needs build/splash2/lu and build/bin/lemuria-run (make).  Exit status: 0
# when every run passed, 1 when some failed (they are counted in the CSV),
# 2 on a usage error.

# ARGS, LAYOUTS and RELAYS are meant to split into words (with set -f,
# below), and the trap handlers are reached only through trap.
# shellcheck disable=SC2086,SC2046,SC2317,SC1091,SC2034
set -u

me=bench/hierarchy.sh
. "$(dirname "$0")/lib.sh" # is_count absolute layout_file layout_label timed eta
layouts="8 4+4 8+8 16 8+8+8+8"
relays="lazy eager"
reps=3
args="-n1024 -b16"
out=""
limit=900
build=""
quick=0
pin="--pin --batch" # each cluster on CPUs of its own; -U: none
# The quick mode sets only what was not given on the command line.
given_l=0; given_r=0; given_a=0

usage() {
	cat <<EOF
usage: $me [-qU] [-l "LAYOUTS"] [-R "RELAYS"] [-r REPS] [-a "ARGS"]
                           [-o CSV] [-T SECONDS] [-B BUILD_DIR]
  -l "LAYOUTS" layout names (conf/NAME.ini) or .ini paths
               (default "$layouts")
  -R "RELAYS"  relay modes to run each layout with: lazy, eager, adaptive
               (default "$relays")
  -r REPS      runs of each layout and relay (default $reps)
  -a "ARGS"    LU's arguments, without -p and -t (default "$args")
  -o CSV       table of medians (default hierarchy.csv in build/bench-results,
               or in \$LEMURIA_BENCH_RESULTS: bench/results to update the tree's); the
               single runs go to the same name ending in -runs.csv
  -T SECONDS   limit for each single run (default $limit)
  -B DIR       build directory (default build at the top of the tree)
  -U           run unplaced (default: lemuria-run --pin --batch, each
               cluster's lemuriad and ranks on CPUs of their own, the
               ranks under SCHED_BATCH)
  -q           quick check: -l "4+4" -a "-n128 -b16" -r 1 unless given, and
               the CSV in \${TMPDIR:-/tmp} unless -o is given
Each run is lemuria-run --pin --batch --start-daemons --all-stats -- lu ARGS -t on a private
copy of the layout (ports of its own, relay set in [lemuria]).  The time is
LU's "Total time without initialization"; the traffic is the total of the
daemons' counters of the run (messages and bytes sent at levels client,
cluster and root, bytes the lemuriads received from clients, cluster delta
bytes and PULLs).  A run that exits non-zero, prints TEST FAILED, no TEST
PASSED or no time is recorded as failed and left out of the medians.
EOF
}

while getopts qUl:R:r:a:o:T:B:h opt; do
	case $opt in
	U) pin="" ;;
	q) quick=1 ;;
	l) layouts=$OPTARG; given_l=1 ;;
	R) relays=$OPTARG ;;
	r) reps=$OPTARG; given_r=1 ;;
	a) args=$OPTARG; given_a=1 ;;
	o) out=$OPTARG ;;
	T) limit=$OPTARG ;;
	B) build=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
no_operands "$@"
set -f # ARGS, LAYOUTS and RELAYS are split into words, never expanded
if [ $quick -eq 1 ]; then
	[ $given_l -eq 1 ] || layouts="4+4"
	[ $given_a -eq 1 ] || args="-n128 -b16"
	[ $given_r -eq 1 ] || reps=1
	# A quick check never overwrites the results kept in the tree.
	[ -n "$out" ] || out=${TMPDIR:-/tmp}/lemuria-hierarchy-quick.csv
fi

[ -n "$out" ] && out=$(absolute "$out")
[ -n "$build" ] && build=$(absolute "$build")
caller=$PWD
cd "$(dirname "$0")/.." || exit 2
root=$PWD
[ -n "$out" ] || out=$(results_dir "$root")/hierarchy.csv
[ -n "$build" ] || build=$root/build
case $out in
*.csv) runs_out=${out%.csv}-runs.csv ;;
*) runs_out=$out-runs.csv ;;
esac

bad=0
complain() { echo "$me: $*" >&2; bad=1; }
is_count "$reps" || complain "-r wants a positive integer, not '$reps'"
is_count "$limit" || complain "-T wants a positive number of seconds, not '$limit'"
run_bin=$build/bin/lemuria-run
lu_bin=$build/splash2/lu
for f in "$run_bin" "$lu_bin"; do
	[ -x "$f" ] || complain "$f: not found or not executable (run make)"
done
[ -n "$layouts" ] || complain "-l wants at least one layout"
[ -n "$relays" ] || complain "-R wants at least one relay mode"
seen=" "
for r in $relays; do
	case $r in
	lazy | eager | adaptive) ;;
	*) complain "-R: relay '$r' is not lazy, eager or adaptive" ;;
	esac
	case $seen in *" $r "*) complain "-R: relay '$r' given twice" ;; esac
	seen="$seen$r "
done

check_layouts 1
[ $bad -eq 0 ] || exit 2

# set_relay FILE MODE: makes the [lemuria] section of FILE say relay = MODE,
# replacing its relay key or adding one where there is none (lazy is the
# default then).
set_relay() {
	awk -v mode="$2" '
		function close_lemuria() {
			if (in_lemuria && !done) { print "relay = " mode; done = 1 }
			in_lemuria = 0
		}
		{ line = $0; sub(/\r$/, "", line) }
		line ~ /^[ \t]*\[/ {
			close_lemuria()
			in_lemuria = (line ~ /^[ \t]*\[lemuria\]/)
			print; next
		}
		in_lemuria && line ~ /^[ \t]*relay[ \t]*[=:]/ {
			if (!done) print "relay = " mode
			done = 1
			next
		}
		{ print }
		END { close_lemuria() }' "$1" >"$1.new" && mv "$1.new" "$1"
}

tmp=$(mktemp -d /tmp/lm-hierarchy.XXXXXX) || exit 1
child=""
partial=$out.tmp
runs_partial=$runs_out.tmp

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
	echo "$me: interrupted; the rows done so far are in $partial and $runs_partial" >&2
	cleanup
	exit 130
}
trap interrupted INT TERM
trap cleanup EXIT

# micros LOG: LU's "Total time without initialization" in µs, or nothing.
micros() {
	awk -F: '/Total time without initialization/ {
		us = $2 + 0; found = 1; exit }
		END { if (found) printf "%d\n", us }' "$1"
}

# The traffic columns, as COUNTER@LEVEL of the totals block of
# lemuria-run --stats, and their CSV names in the same order.  In the total
# every message sent at level cluster or root is received by a daemon too,
# so sent counts each once; at level client only the lemuriads count, so
# bytes_sent is what they sent down to clients and bytes_received what the
# clients sent up (their diffs).
traffic_keys="msgs_sent@client bytes_sent@client bytes_received@client"
traffic_keys="$traffic_keys msgs_sent@cluster bytes_sent@cluster"
traffic_keys="$traffic_keys msgs_sent@root bytes_sent@root"
traffic_keys="$traffic_keys delta_bytes_sent@cluster pulls_sent@cluster"
traffic_cols=client_msgs_sent,client_bytes_sent,client_bytes_received
traffic_cols=$traffic_cols,cluster_msgs_sent,cluster_bytes_sent
traffic_cols=$traffic_cols,root_msgs_sent,root_bytes_sent
traffic_cols=$traffic_cols,cluster_delta_bytes_sent,cluster_pulls_sent

# traffic LOG (bench/lib.sh) reads the lists above.

# summary LAYOUT RELAY PROCS CLUSTERS REFLECTORS: the CSV row of one layout
# and relay from the runs file: time (median, min, max, seconds) over the
# runs that passed, the median of each traffic column over those of them
# whose totals came from every daemon, and the bytes at level cluster over
# those at level client, each message counted once on both levels (client:
# sent by the lemuriads plus received from the clients).
summary() {
	awk -F, -v layout="$1" -v relay="$2" -v head="$1,$2,$3,$4,$5" '
		function median(a, n,    i, j, t) {
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
					t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
				}
			if (n == 0) return ""
			if (n % 2) return a[(n + 1) / 2]
			return (a[n / 2] + a[n / 2 + 1]) / 2
		}
		NR == 1 {
			for (i = 1; i <= NF; i++) col[$i] = i
			first = col["client_msgs_sent"]; last = col["cluster_pulls_sent"]
			next
		}
		$1 != layout || $2 != relay { next }
		{ runs++ }
		$col["status"] != "passed" { failed++; next }
		{
			nt++; t[nt] = $col["time_us"] / 1e6
			if (nt == 1 || t[nt] < min) min = t[nt]
			if (nt == 1 || t[nt] > max) max = t[nt]
		}
		$col["daemons_answered"] == "" ||
		    $col["daemons_answered"] != $col["daemons_total"] { next }
		{
			for (c = first; c <= last; c++)
				if ($c != "") { n[c]++; v[c, n[c]] = $c }
		}
		END {
			printf "%s,%d,%d", head, runs, failed
			if (nt) printf ",%.6f,%.6f,%.6f", median(t, nt), min, max
			else printf ",,,"
			for (c = first; c <= last; c++) {
				delete a
				for (i = 1; i <= n[c]; i++) a[i] = v[c, i] + 0
				m[c] = median(a, n[c] + 0)
				printf ",%s", m[c] == "" ? "" : sprintf("%.15g", m[c])
			}
			down = m[col["client_bytes_sent"]]
			up = m[col["client_bytes_received"]]
			clu = m[col["cluster_bytes_sent"]]
			if (down != "" && up != "" && clu != "" && down + up > 0)
				printf ",%.3f\n", clu / (down + up)
			else
				printf ",\n"
		}' "$runs_partial"
}

# show_rows CSV: the summary rows of CSV as a table (bytes in MB, 10^6).
show_rows() {
	awk -F, -v header="${2:-}" '
		function mb(x) { return x == "" ? "-" : sprintf("%.2f", x / 1e6) }
		function num(x) { return x == "" ? "-" : x }
		NR == 1 {
			for (i = 1; i <= NF; i++) col[$i] = i
			if (header != "") printf "%-9s %-5s %5s %3s %3s  %-22s %25s %18s %14s %8s %7s %7s %6s\n",
				"layout", "relay", "procs", "cl", "rf",
				"time s (min-max)", "client msgs/MBdown/MBup",
				"cluster msgs/MB", "root msgs/MB", "delta MB",
				"pulls", "clu/cli", "failed"
			next
		}
		{
			tm = "-"
			if ($col["median_s"] != "")
				tm = sprintf("%.3g (%.3g-%.3g)", $col["median_s"],
					$col["min_s"], $col["max_s"])
			printf "%-9s %-5s %5s %3s %3s  %-22s %25s %18s %14s %8s %7s %7s %6s\n",
				$col["layout"], $col["relay"], $col["processes"],
				$col["clusters"], $col["reflectors"], tm,
				num($col["client_msgs_sent"]) "/" mb($col["client_bytes_sent"]) \
					"/" mb($col["client_bytes_received"]),
				num($col["cluster_msgs_sent"]) "/" mb($col["cluster_bytes_sent"]),
				num($col["root_msgs_sent"]) "/" mb($col["root_bytes_sent"]),
				mb($col["cluster_delta_bytes_sent"]),
				num($col["cluster_pulls_sent"]),
				num($col["cluster_to_client_bytes"]),
				$col["failed_runs"] "/" $col["runs"]
		}' "$1"
}

header=layout,relay,processes,clusters,reflectors,runs,failed_runs
header=$header,median_s,min_s,max_s,$traffic_cols,cluster_to_client_bytes
runs_header=layout,relay,run,status,time_us,$traffic_cols
runs_header=$runs_header,daemons_answered,daemons_total,failure

mkdir -p "$(dirname "$out")" "$(dirname "$runs_out")" || exit 1
echo "$header" >"$partial" || exit 1
echo "$runs_header" >"$runs_partial" || exit 1

rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
stamp="host $(uname -n), $(nproc) CPUs, tree $rev, $(date '+%Y-%m-%d %H:%M')"
echo "lu $args: $reps runs per layout and relay ($relays) on layouts: $layouts"
echo "$stamp"
# for plot-hierarchy.sh's title (issue 42)
echo "$stamp" >"${out%.csv}.stamp" || exit 1
echo "limit $limit s per run; results to $out and $runs_out"
echo
show_rows "$partial" header

failed_total=0
index=0
k=0 # private_layout's port range number, one per layout and relay
# progress: every run of every layout and relay, and when the first began
runs_total=$(( $(echo $layouts | wc -w) * $(echo $relays | wc -w) * reps ))
runs_done=0
bench_start=$(date +%s)
. "$root/tests/lib.sh"
for l in $layouts; do
	index=$((index + 1))
	label=$(layout_label "$l")
	set -- $(layout_size "$(layout_file "$l")")
	procs=$1; clusters=$2; reflectors=$3

	# One private copy per relay, each with ports of its own.
	for r in $relays; do
		k=$((k + 1))
		dir=$tmp/$index-$r
		mkdir -p "$dir"
		lay=$(private_layout "$(layout_file "$l")" "$dir" "$k")
		set_relay "$lay" "$r" || exit 1
	done

	# Relays take turns within each repetition, so that a slow spell of
	# the machine does not fall on one of them only.
	rep=0
	while [ $rep -lt "$reps" ]; do
		rep=$((rep + 1))
		for r in $relays; do
			dir=$tmp/$index-$r
			lay=$dir/$(basename "$(layout_file "$l")")
			log=$dir/run.$rep
			# lemuria-run stops ranks and daemons itself at -T; the
			# outer timeout only guards against lemuria-run hanging.
			timed $((limit + 20)) "$log" "$run_bin" -c "$lay" \
				$pin --start-daemons --all-stats --timeout "$limit" -- \
				"$lu_bin" $args -t
			st=$?
			us=$(micros "$log")
			tr=$(traffic "$log")
			if passed $st "$log" "$us" 1; then
				status=passed; failure=""
			else
				status=failed
				failure=$(why $st "$log" 1 | tr ',' ';')
				failed_total=$((failed_total + 1))
			fi
			echo "$label,$r,$rep,$status,$us,$tr,$failure" \
				>>"$runs_partial"
			runs_done=$((runs_done + 1))
			echo "$tr" | awk -F, -v l="$label" -v r="$r" \
				-v rep="$rep/$reps" -v us="$us" -v st="$status" \
				-v eta="$(eta "$runs_done" "$runs_total" "$bench_start")" '
				function f(m, b) {
					return (m == "" ? "-" : m) " msgs " \
						(b == "" ? "-" : sprintf("%.2f", b / 1e6)) " MB"
				}
				{
					tm = st == "passed" ? sprintf("%.3f s", us / 1e6) : "FAILED"
					printf "  %s %s run %s: %s; client %s down %s up, cluster %s, root %s; daemons %s/%s (%s)\n",
						l, r, rep, tm, f($1, $2),
						$3 == "" ? "-" : sprintf("%.2f MB", $3 / 1e6),
						f($4, $5), f($6, $7), $10, $11, eta
				}'
			if [ $status = failed ]; then
				echo "    FAILED: $failure" >&2
				# The end of the run's output before the counters.
				awk '/^lemuria-run: counters of the run/ { exit }
					{ print }' "$log" | tail -n 8 |
					sed 's/^/      | /' >&2
			fi
		done
	done

	for r in $relays; do
		row=$(summary "$label" "$r" "$procs" "$clusters" "$reflectors")
		echo "$row" >>"$partial"
		printf '%s\n%s\n' "$header" "$row" >"$tmp/row.csv"
		show_rows "$tmp/row.csv"
	done
done

mv "$runs_partial" "$runs_out" || exit 1
mv "$partial" "$out" || exit 1

echo
echo "lu $args: medians of $reps runs (time without initialization;"
echo "traffic of the run per level: messages sent, MB (10^6 bytes) sent, and"
echo "at level client also MB received from the clients; clu/cli is cluster"
echo "bytes / client bytes both ways)"
show_rows "$out" header
echo "written: $out, $runs_out"
if [ $failed_total -gt 0 ]; then
	echo "$me: $failed_total runs failed (see the messages above)" >&2
	exit 1
fi
exit 0
