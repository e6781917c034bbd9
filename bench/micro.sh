#!/bin/sh
# shellcheck disable=SC2154 # the v_NAME figures are set by an eval
# Micro-benchmarks of the DSM next to their physical limit, measured in the
# same run: read-fault service (from the lemuriad's cluster copy, a first
# fault and a fault again on a page the process had, and from another
# cluster's home) against a bare UDP round trip of a 4 KiB page
# (build/bench/transport), barrier latency by layout, lock hand-off inside
# a cluster and across clusters.  Medians of REPS runs of build/bench/micro
# (bench/micro.c) on each layout.
#
#   bench/micro.sh [-U] [-B BUILD] [-r REPS] [-l "LAYOUTS"] [-o CSV]
#
# Defaults: build, 3, "2 8 16 32 4+4 8+8 8+8+8+8", micro.csv under
# bench/lib.sh's results_dir (build/bench-results unless asked).
# The runs are placed (lemuria-run --pin --batch: each cluster's lemuriad
# and ranks on CPUs of their own, the ranks under SCHED_BATCH); -U runs
# them unplaced.
set -u
me=bench/micro.sh
build=build
reps=3
layouts="2 8 16 32 4+4 8+8 8+8+8+8"
out=""
pin="--pin --batch"
usage() {
	echo "usage: $me [-U] [-B BUILD] [-r REPS] [-l \"LAYOUTS\"] [-o CSV]"
}
while getopts UB:r:l:o:h opt; do
	case $opt in
	U) pin="" ;;
	B) build=$OPTARG ;;
	r) reps=$OPTARG ;;
	l) layouts=$OPTARG ;;
	o) out=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
case $reps in ''|*[!0-9]*|0) echo "$me: -r takes a count" >&2; exit 2 ;; esac
for p in "$build/bin/lemuria-run" "$build/bench/micro" "$build/bench/transport"; do
	[ -x "$p" ] || { echo "$me: $p missing (make bench-micro builds it)" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/lm-micro.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
. tests/lib.sh
. bench/lib.sh # bare_rtt results_dir
[ -n "$out" ] || out=$(results_dir "$PWD")/micro.csv

# per_rtt US: US as a multiple of the same run's bare UDP round trip
# (nothing when US is empty).
per_rtt() {
	[ -n "$1" ] && awk -v a="$1" -v b="$udp" 'BEGIN { printf "%.1f", a / b }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# The limit: a bare UDP round trip of 4 KiB on loopback, same session,
# placed as the runs are: placed runs have each client share a CPU with
# its lemuriad, so their baseline is the round trip between two processes
# pinned to one CPU; unplaced (-U) ones take the scheduler's placement.
"$build/bench/transport" -n 1000 -r 5 -o "$tmp/udp.csv" >"$tmp/udp" 2>&1
mode=bare_udp_one_cpu
[ -n "$pin" ] || mode=bare_udp
udp=$(bare_rtt "$tmp/udp.csv" 4096 "$mode")
[ -n "$udp" ] || { echo "$me: no bare UDP figure"; cat "$tmp/udp"; exit 1; }
echo "bare UDP round trip, 4 KiB ($mode): $udp us (median)"

names="fault_cluster_us fault_warm_us fault_home_us barrier_us lock_local_us lock_remote_us"
mkdir -p "$(dirname "$out")"
echo "layout,processes,clusters,udp_rtt_4k_us,$(echo $names | tr ' ' ','),fault_cluster_per_rtt,fault_warm_per_rtt,fault_home_per_rtt,barrier_per_rtt,lock_local_per_rtt,lock_remote_per_rtt" >"$tmp/csv"
# fault L: a first fault on a page the lemuriad holds; fault W: the same
# pages again (bench/micro.c, fault_warm_us); fault R: from another
# cluster
printf "%-9s %5s %8s %8s %8s %8s %8s %8s %6s %6s %6s %7s %6s %7s\n" layout procs "fault L" "fault W" "fault R" barrier "lock in" "lock out" "L/rtt" "W/rtt" "R/rtt" "bar/rtt" "in/rtt" "out/rtt"
idx=40
for l in $layouts; do
	idx=$((idx + 1))
	mkdir -p "$tmp/$idx"
	lay=$(private_layout "conf/$l.ini" "$tmp/$idx" $idx)
	one_page_faults "$lay"
	procs=$(awk -F= '/^clients/ { s += $2 } END { print s }' "$lay")
	clusters=$(grep -c '^\[cluster ' "$lay")
	: >"$tmp/runs"
	r=0
	while [ $r -lt "$reps" ]; do
		timeout -k 5 300 "$build/bin/lemuria-run" -c "$lay" $pin \
			--start-daemons --timeout 280 -- "$build/bench/micro" \
			>>"$tmp/runs" 2>&1 || echo "micro: failed 1" >>"$tmp/runs"
		r=$((r + 1))
	done
	row="$l,$procs,$clusters,$udp"
	for n in $names; do
		v=$(awk -v n="$n" '$1 == "micro:" && $2 == n { print $3 }' "$tmp/runs" | median)
		eval "v_$n=\${v:-}"
		row="$row,${v:-}"
	done
	rl=$(per_rtt "$v_fault_cluster_us"); rw=$(per_rtt "$v_fault_warm_us")
	rr=$(per_rtt "$v_fault_home_us")
	rb=$(per_rtt "$v_barrier_us"); ri=$(per_rtt "$v_lock_local_us")
	ro=$(per_rtt "$v_lock_remote_us")
	echo "$row,$rl,$rw,$rr,$rb,$ri,$ro" >>"$tmp/csv"
	printf "%-9s %5s %8s %8s %8s %8s %8s %8s %6s %6s %6s %7s %6s %7s\n" "$l" "$procs" \
		"${v_fault_cluster_us:--}" "${v_fault_warm_us:--}" \
		"${v_fault_home_us:--}" \
		"${v_barrier_us:--}" "${v_lock_local_us:--}" \
		"${v_lock_remote_us:--}" "${rl:--}" "${rw:--}" "${rr:--}" \
		"${rb:--}" "${ri:--}" "${ro:--}"
	grep -q "failed" "$tmp/runs" && echo "  ($l: some runs failed)"
done
cp "$tmp/csv" "$out"
echo "written: $out (times in us, medians of $reps runs)"
