#!/bin/sh
# Memory (I5, docs/dsm.md "Lazy, adaptive and eager relay"): a lemuriad
# whose `cache` is smaller than the data completes LU n=1024 (an 8 MiB
# matrix) correctly, its resident size staying within the cache plus a
# fixed overhead.  The same run with the
# 64M cache of conf/4+4.ini is measured beside it, to show that the cache is
# what limits memory.  docs/testing.md has the measured figures.
#   tests/run-memory.sh BUILD_DIR
set -u
build=${1:-build}
bin=$build/bin
tmp=$(mktemp -d /tmp/lm-mem.XXXXXX)
dpids=""
run=""
failures=0
checks=0
cleanup() {
	[ -n "$run" ] && kill -TERM "$run" 2>/dev/null
	stop_daemons
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM
. tests/lib.sh

MIB=1048576

# allowance K PAGE NPAGES: the overhead allowed beside the cache, in bytes,
# for a lemuriad of K clients, pages of PAGE bytes and NPAGES region pages.  Each term is
# a bound of the code, not a measurement (docs/testing.md, "Memory"):
#  - reassembly: each client has at most one FLUSH in flight, cut at 1 MiB
#    plus one diff (liblemuria/client.c), and the reflector's largest
#    message is a notice list of the whole region (20 bytes a page);
#  - delta overshoot: a spill waits for the registration in flight, and
#    meanwhile each client may flush 1 MiB of whole-page diffs, a delta
#    buffer of a page and a bit per byte for every page of it;
#  - reply caches: 512 KiB per peer (common/reliable.c), k clients and
#    the reflector;
#  - encoding: the daemon's scratch buffer and the REGISTER being built,
#    each at most LM_DELTAS_MSG_DATA (1 MiB) and a quarter;
#  - tables: a notice and a delta slot per page of the region;
#  - updates (docs/dsm.md "Updates"): the epoch's masks and the encoded
#    updates an eighth of the cache each, a held RELEASE's saved copies
#    an eighth (the pages it fetches go into the cache), its masks of the
#    other clusters' bytes a sixty-fourth, a bit and an idle count (a
#    byte) per page per client and two slots per page, and k + 2 client
#    lists of an eighth of the cache within 1..8 MiB each (the list being
#    built, the RELEASE being encoded, and the k RELEASEs a barrier
#    queues at once);
#  - heap pad: the heap grows LM_DAEMON_HEAP_PAD (4 MiB, common/daemon_protocol.h)
#    beyond each need, and those pages are given at once (common/mem.h).
# The idle lemuriad's own RSS (code, libraries) is measured, not assumed.
allowance() {
	k=$1; page=$2; npages=$3; cache=$4
	reasm=$((k * (MIB + page) + npages * 24))
	over=$((k * (MIB / page + 1) * (page + page / 8)))
	replies=$(((k + 1) * 512 * 1024))
	enc=$((2 * (MIB + MIB / 4)))
	tables=$((npages * 40))
	list=$((cache / 8)); [ $list -lt $MIB ] && list=$MIB
	[ $list -gt $((8 * MIB)) ] && list=$((8 * MIB))
	upd=$((3 * cache / 8 + cache / 64 + (k + 2) * list + k * npages * 9 / 8 + npages * 12))
	pad=$((4 * MIB))
	echo "$reasm $over $replies $enc $tables $upd $pad"
}

# size VALUE: a layout size (4096, 4K, 64M, 1G) in bytes.
size() {
	case $1 in
	*[kK]) echo $((${1%?} * 1024)) ;;
	*[mM]) echo $((${1%?} * MIB)) ;;
	*[gG]) echo $((${1%?} * 1024 * MIB)) ;;
	*) echo "$1" ;;
	esac
}

# key LAYOUT SECTION KEY: the first word of KEY's value in [SECTION].
key() {
	awk -v sec="[$2]" -v k="$3" '
		/^\[/ { in_sec = ($0 == sec) }
		in_sec && $1 == k && $2 == "=" { print $3; exit }' "$1"
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# status_kb PID FIELD: VmRSS or VmHWM of PID in kB (0 once it is gone).
status_kb() {
	awk -v f="$2:" '$1 == f { print $2; found = 1 } END { if (!found) print 0 }' \
		"/proc/$1/status" 2>/dev/null || echo 0
}

# measure NAME LAYOUT INDEX: starts the layout's daemons by hand, runs LU
# n=1024 on them while sampling each lemuriad's RSS, and checks the run
# and each lemuriad's peak against its cache plus the allowance.  Sets
# PEAK_KB (the largest lemuriad VmHWM) and BOUND_KB (the smallest bound).
measure() {
	name=$1; dir=$tmp/$3
	mkdir -p "$dir"
	lay=$(private_layout "$2" "$dir" "$3")
	# The lemuriad's own memory (I5) under copy = client, where its
	# cache is the cluster's copy; under copy = cluster the copy is a
	# memory object shared with the clients, bounded by the region
	# (docs/dsm.md "One copy per cluster"), which VmHWM would count.
	set_copy "$lay" client
	page=$(size "$(key "$lay" lemuria page_size)")
	page=${page:-4096}
	npages=$(( $(size "$(key "$lay" lemuria shared_size)") / page ))
	echo "memory: LU n=1024 b=16 on $name"
	dpids=""; lems=""
	for entry in $(awk '/^\[(reflector|cluster) /{ gsub(/[\[\]]/, ""); print $1 ":" $2 }' "$lay"); do
		role=${entry%%:*}; dname=${entry#*:}
		prog=$bin/lemuriad; [ "$role" = reflector ] && prog=$bin/reflector
		"$prog" -c "$lay" -n "$dname" -l warn 2>>"$dir/daemons.log" &
		dpids="$dpids $!"
		[ "$role" = cluster ] && lems="$lems $dname:$!"
	done
	i=0
	until "$bin/lemuriactl" -c "$lay" -t 0.5 status >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -ge 10 ] && break; sleep 0.5
	done
	for l in $lems; do
		echo "${l#*:} $(status_kb "${l#*:}" VmRSS)" >>"$dir/idle"
	done

	: >"$dir/curve"
	checks=$((checks + 1))
	start=$(date +%s)
	timeout -k 5 80 "$bin/lemuria-run" -c "$lay" --timeout 70 -- \
		"$build/splash2/lu" -n1024 -b16 -t >"$dir/out" 2>&1 &
	run=$!
	# Every 0.2 s, bounded by the run's own timeout.
	n=0
	while kill -0 "$run" 2>/dev/null && [ $n -lt 450 ]; do
		line=$n
		for l in $lems; do line="$line $(status_kb "${l#*:}" VmRSS)"; done
		echo "$line" >>"$dir/curve"
		n=$((n + 1)); sleep 0.2
	done
	wait "$run"
	st=$?
	run=""
	secs=$(( $(date +%s) - start ))
	if [ $st -eq 0 ] && grep -q "TEST PASSED" "$dir/out"; then
		echo "  ok   LU n=1024 on $name (${secs}s)"
	else
		failures=$((failures + 1))
		echo "  FAIL LU n=1024 on $name (status $st, ${secs}s)"
		tail -n 15 "$dir/out" | sed 's/^/       /'
		tail -n 10 "$dir/daemons.log" | sed 's/^/       /'
	fi
	"$bin/lemuriactl" -c "$lay" -t 1 stats -a 2>/dev/null | awk '
		/^lemuriad / { d = $2 }
		d && ($1 == "evictions" || $1 == "spills") {
			for (i = 2; i <= NF && $i == "."; i++) ;
			v[d] = v[d] " " $1 " " $i }
		END { for (d in v) print d v[d] }' >"$dir/stats"

	PEAK_KB=0; BOUND_KB=0; col=1
	for l in $lems; do
		dname=${l%%:*}; pid=${l#*:}
		col=$((col + 1))
		hwm=$(status_kb "$pid" VmHWM)
		idle=$(awk -v p="$pid" '$1 == p { print $2 }' "$dir/idle")
		k=$(key "$lay" "cluster $dname" clients)
		cache=$(key "$lay" "cluster $dname" cache)
		cache=$(size "${cache:-$(key "$lay" lemuria shared_size)}")
		# shellcheck disable=SC2046 # seven numbers, split on purpose
		set -- $(allowance "$k" "$page" "$npages" "$cache")
		extra=$(($1 + $2 + $3 + $4 + $5 + $6 + $7))
		bound=$((cache + idle * 1024 + extra))
		sampled=$(awk -v c="$col" 'BEGIN { m = 0 } $c > m { m = $c } END { print m }' "$dir/curve")
		echo "       $dname: cache $(mib "$cache"), idle RSS $(mib $((idle * 1024))), allowance $(mib "$extra")" \
			"(reassembly $(mib "$1"), delta overshoot $(mib "$2"), reply caches $(mib "$3")," \
			"encoding $(mib "$4"), tables $(mib "$5"), updates $(mib "$6"), heap pad $(mib "$7"))"
		echo "       $dname: bound $(mib "$bound"), peak RSS $(mib $((hwm * 1024))) (VmHWM)," \
			"largest sample $(mib $((sampled * 1024))), $(grep "^$dname " "$dir/stats" | cut -d' ' -f2-)"
		echo "       $dname: RSS every 2 s (MiB):$(awk -v c="$col" \
			'NR % 10 == 1 { printf " %.1f", $c / 1024 }' "$dir/curve")"
		checks=$((checks + 1))
		if [ "$hwm" -gt 0 ] && [ $((hwm * 1024)) -le "$bound" ]; then
			echo "  ok   $dname peak RSS within cache + overhead"
		else
			failures=$((failures + 1))
			echo "  FAIL $dname peak RSS $(mib $((hwm * 1024))) exceeds the bound $(mib "$bound")"
		fi
		[ "$hwm" -gt "$PEAK_KB" ] && PEAK_KB=$hwm
		if [ "$BOUND_KB" -eq 0 ] || [ $((bound / 1024)) -lt "$BOUND_KB" ]; then
			BOUND_KB=$((bound / 1024))
		fi
	done
	stop_daemons
}

# stop_daemons: TERM, then KILL what is still there after 5 s.
stop_daemons() {
	for p in $dpids; do kill -TERM "$p" 2>/dev/null; done
	i=0
	for p in $dpids; do
		while kill -0 "$p" 2>/dev/null && [ $i -lt 25 ]; do
			i=$((i + 1)); sleep 0.2
		done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	dpids=""
}

measure "4+4-small-cache (cache = 4M)" conf/4+4-small-cache.ini 14
small_bound=$BOUND_KB
measure "4+4 (cache = 64M)" conf/4+4.ini 15
echo "memory: with a 64M cache the lemuriads peak at $(mib $((PEAK_KB * 1024))), against $(mib $((small_bound * 1024))) allowed with 4M"

echo "memory: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
