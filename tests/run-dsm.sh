#!/bin/sh
# End-to-end DSM tests: real daemons and clients under lemuria-run on
# several layouts (private ports), small sizes so make check stays short.
#   tests/run-dsm.sh BUILD_DIR
set -u
build=${1:-build}
bin=$build/bin
tmp=$(mktemp -d /tmp/lm-dsm.XXXXXX)
failures=0
checks=0
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up
. tests/lib.sh

# verdict OK TEXT: a check counted by the caller, passed when OK is y;
# a failure shows the end of the last run's output.
verdict() {
	if [ "$1" = y ]; then
		echo "  ok   $2"
	else
		failures=$((failures + 1))
		echo "  FAIL $2"
		tail -n 25 "$tmp/out" | sed 's/^/       /'
	fi
}

n=0
for l in 1 2 4+4 4+4+4+4 2x2-two-reflectors 3-reflectors; do
	n=$((n + 1))
	mkdir -p "$tmp/$n"
	lay=$(private_layout "conf/$l.ini" "$tmp/$n" "$n")
	echo "dsm: layout $l"
	run_expect "LU n=128 b=16 on $l" "$lay" 120 "TEST PASSED" \
		"$build/splash2/lu" -n128 -b16 -t
	run_expect "lock counter on $l" "$lay" 120 "PASSED" \
		"$build/tests/dsmtest" counter 50
	run_expect "1000 barriers on $l" "$lay" 240 "PASSED" \
		"$build/tests/dsmtest" barriers 1000
	run_expect "race-free stress on $l" "$lay" 240 "PASSED" \
		"$build/tests/dsmtest" stress 6 8 7
	# pages owned by one cluster, taken back, moving on (docs/dsm.md
	# "Pages one cluster owns"); under copy = client nothing is owned
	run_expect "owners moving on $l" "$lay" 240 "PASSED" \
		"$build/tests/dsmtest" owners 8 16 $((n + 5))
	# words spun on with no synchronisation, changed by other clusters
	# (docs/dsm.md "Eventual visibility"); the old tree waited for ever
	np=$(awk -F= '/^clients/ { s += $2 } END { print s }' "$lay")
	run_expect "spinning on flags and counters on $l" "$lay" 60 \
		"spinflag: $np processes: PASSED" "$build/splash2/spinflag" "$np" 2
	# ordinary globals written after CREATE (fmm's Grid, volrend's
	# view): the old tree's workers kept rank 0's values at CREATE
	run_expect "globals written after CREATE on $l" "$lay" 60 \
		"globals: $np processes: PASSED" "$build/splash2/globals" "$np" 5
	# records reached through pointers read with no lock (barnes's tree,
	# fmm's boxes): never seen before their contents (docs/dsm.md
	# "Order"); the old tree read thousands of words stale on 4+4
	run_expect "records before their pointers on $l" "$lay" 90 \
		"publish: $np processes: PASSED" "$build/splash2/publish" "$np" 16
	# fmm's box tree: a box's list, then flags in its children, spun
	# on; counts raised under locks other boxes share, spun on; values
	# passed down (docs/dsm.md "Order").  The tree before read a box
	# older than its child's flag on 4+4+4+4, 5 runs of 6 (30 rounds)
	tw=6
	[ "$l" = 4+4+4+4 ] && tw=16
	run_expect "fmm's box tree on $l" "$lay" 120 \
		"treewave: $np processes: PASSED" "$build/splash2/treewave" "$np" $tw
	# random words raised with no synchronisation: never seen going
	# back, every final value seen (dsmtest visible, two seeds); the
	# second with a lemuriad cache of one page, so that the pages of a
	# CHANGED's set leave the cache before the set goes in, and are
	# asked for again (the tree before 0d9abd4 failed in every run)
	mkdir -p "$tmp/$n/tiny"
	tlay=$(private_layout "conf/$l.ini" "$tmp/$n/tiny" "$n")
	sed -i 's/^cache = .*/cache = 4K/' "$tlay"
	run_expect "writes seen without synchronisation on $l, seed $((n * 10 + 1))" \
		"$lay" 120 "PASSED" "$build/tests/dsmtest" visible 4 3 $((n * 10 + 1))
	run_expect "writes seen without synchronisation on $l, seed $((n * 10 + 2)), a one-page cache" \
		"$tlay" 120 "PASSED" "$build/tests/dsmtest" visible 4 3 $((n * 10 + 2))
	# The chaos test (docs/testing.md): two seeds with the layout's
	# adaptive relay and two with eager, a few seconds a run (fewer
	# rounds where more processes share the two cores).
	mkdir -p "$tmp/$n/eager"
	elay=$(private_layout "conf/$l.ini" "$tmp/$n/eager" "$n")
	sed -i 's/^relay = .*/relay = eager/' "$elay"
	rounds=30
	[ "$l" = 4+4 ] && rounds=20
	[ "$l" = 4+4+4+4 ] && rounds=12
	for k in 1 2 3 4; do
		seed=$((n * 10 + k)) relay=adaptive rlay=$lay
		[ $k -gt 2 ] && relay=eager rlay=$elay
		run_expect "chaos $rounds $seed on $l, $relay" "$rlay" 120 \
			"PASSED" "$build/tests/dsmtest" chaos $rounds $seed
	done
	# over 2000 pages: a rank's gap chunks twin hundreds of pages while
	# cluster-mates' releases seal (lm_ccopy_seal_at_once ran past its
	# room there: 30da3bb crashed a lemuriad in 4 seeds of 4 on 4+4);
	# where clusters have several clients to twin at once, and across
	# three reflectors
	case $l in 4+4|4+4+4+4|3-reflectors)
		run_expect "chaos $rounds $((n * 10 + 5)) over 2000 pages on $l" \
			"$lay" 120 "PASSED" "$build/tests/dsmtest" chaos \
			$rounds $((n * 10 + 5)) 2000 ;;
	esac
done

# The same programs with a copy per client process (copy = client, for
# clients on other hosts than their lemuriad; docs/layout.md), on the
# layouts with several clusters.
n=40
for l in 4+4 2x2-two-reflectors 3-reflectors; do
	n=$((n + 1))
	mkdir -p "$tmp/$n"
	lay=$(private_layout "conf/$l.ini" "$tmp/$n" "$n")
	set_copy "$lay" client
	echo "dsm: layout $l, copy = client"
	run_expect "LU n=128 b=16 on $l, copy = client" "$lay" 120 \
		"TEST PASSED" "$build/splash2/lu" -n128 -b16 -t
	run_expect "lock counter on $l, copy = client" "$lay" 120 "PASSED" \
		"$build/tests/dsmtest" counter 50
	run_expect "race-free stress on $l, copy = client" "$lay" 240 \
		"PASSED" "$build/tests/dsmtest" stress 6 8 7
	run_expect "owners moving on $l, copy = client" "$lay" 240 \
		"PASSED" "$build/tests/dsmtest" owners 8 16 $n
	run_expect "chaos 20 $((n * 10)) on $l, copy = client" "$lay" 120 \
		"PASSED" "$build/tests/dsmtest" chaos 20 $((n * 10))
	np=$(awk -F= '/^clients/ { s += $2 } END { print s }' "$lay")
	run_expect "globals written after CREATE on $l, copy = client" \
		"$lay" 60 "globals: $np processes: PASSED" \
		"$build/splash2/globals" "$np" 5
done

mkdir -p "$tmp/progs"
lay=$(private_layout conf/4+4.ini "$tmp/progs" 8)
echo "dsm: more SPLASH-2 programs on 4+4"
run_expect "LU contiguous n=130 b=16" "$lay" 120 "TEST PASSED" \
	"$build/splash2/lucontig" -n130 -b16 -t
run_expect "Radix n=65536" "$lay" 120 "TEST PASSED" \
	"$build/splash2/radix" -n65536 -t
run_expect "Radix n=20000 r=4 (8 passes)" "$lay" 120 "TEST PASSED" \
	"$build/splash2/radix" -n20000 -r4 -m65536 -t
run_expect "FFT 2^12 points" "$lay" 120 "TEST PASSED" \
	"$build/splash2/fft" -m12 -t
run_expect "Ocean n=66" "$lay" 120 "TEST PASSED" \
	"$build/splash2/ocean" -n66 -t
# Issue 41's patterns of the original codes, taken as they are:
# MAIN_INITENV in a function with no argc or argv, PAGE_SIZE undefined
run_expect "MAIN_INITENV in a function of the program's own" "$lay" 60 \
	"initenv: 8 processes: PASSED" "$build/splash2/initenv" 8
# shared memory below 4 GiB, for pointers kept in 32-bit ints
run_expect "shared memory below 4 GiB" "$lay" 60 "PASSED" \
	"$build/tests/dsmtest" low 1
# main reads stdin before MAIN_INITENV: the workers must never run it
echo 8 >"$tmp/eight"
run_expect "workers never run main (it reads stdin)" "$lay" 60 \
	"stdinput: 8 processes: PASSED" "$build/splash2/stdinput" <"$tmp/eight"
# pointers into the program (a function, a string) kept in shared memory
run_expect "a function pointer in shared memory" "$lay" 60 \
	"funcptr: 8 processes: PASSED" "$build/splash2/funcptr" 8
# Processes that compute after their last read faults, calling nothing,
# for far longer than the lemuriad resends a reply before it gives up
# (here about 0.4 s: 8 retries, rto_max 100 ms): the acks of those
# replies must still leave (docs/dsm.md "Client acknowledgements").
mkdir -p "$tmp/compute"
clay=$(private_layout conf/4+4.ini "$tmp/compute" 6)
printf '\n[transport client]\nretries = 8\nrto_max = 100ms\n' >>"$clay"
run_expect "computing 3 s after read faults (replies given up on after 0.4 s)" \
	"$clay" 60 "PASSED" "$build/tests/dsmtest" compute 3000

# A SPLASH-2 main that ends before creating its workers (-h) must not
# leave them waiting for work: rank 0 releases them (status 0, at once).
run_expect "LU -h ends every rank" "$lay" 20 "Usage: lu" "$build/splash2/lu" -h
# The same with exit(0) and no lm_finalize, as the original SPLASH-2
# sources do: the library's exit handler releases them (the old tree
# waited for --timeout).  Ranks that run SPMD go on meanwhile.
run_expect "exit(0) of rank 0 before any CREATE ends every rank" "$lay" 30 \
	"rank 0 exits" "$build/tests/dsmtest" exit0 serve
checks=$((checks + 1))
verdict "$([ "$secs" -le 10 ] && echo y)" "... within 10 s, daemons included (${secs}s)"
run_expect "exit(0) of rank 0 leaves SPMD ranks computing" "$lay" 30 \
	"exit0: rank 7 PASSED" "$build/tests/dsmtest" exit0 2000
passed=$(grep -c "^dsmtest exit0: rank [1-7] PASSED" "$tmp/out")
checks=$((checks + 1))
verdict "$([ "$passed" = 7 ] && echo y)" "... and all 7 of them finish ($passed)"

mkdir -p "$tmp/loss"
lay=$(private_layout conf/4+4.ini "$tmp/loss" 9)
echo "dsm: 4+4 with 5% loss, duplication and reordering injected (every program)"
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=11" run_expect \
	"race-free stress on 4+4 with loss" "$lay" 240 "PASSED" \
	"$build/tests/dsmtest" stress 4 8 3
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=20" run_expect \
	"chaos 20 71 on 4+4 with loss" "$lay" 240 "PASSED" \
	"$build/tests/dsmtest" chaos 20 71
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=12" run_expect \
	"LU n=128 on 4+4 with loss" "$lay" 240 "TEST PASSED" \
	"$build/splash2/lu" -n128 -b16 -t
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=16" run_expect \
	"LU contiguous n=130 on 4+4 with loss" "$lay" 240 "TEST PASSED" \
	"$build/splash2/lucontig" -n130 -b16 -t
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=17" run_expect \
	"Radix n=65536 on 4+4 with loss" "$lay" 240 "TEST PASSED" \
	"$build/splash2/radix" -n65536 -t
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=18" run_expect \
	"FFT 2^12 points on 4+4 with loss" "$lay" 240 "TEST PASSED" \
	"$build/splash2/fft" -m12 -t
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=19" run_expect \
	"Ocean n=66 on 4+4 with loss" "$lay" 240 "TEST PASSED" \
	"$build/splash2/ocean" -n66 -k2 -t
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=25" run_expect \
	"writes seen without synchronisation on 4+4 with loss" "$lay" 120 \
	"PASSED" "$build/tests/dsmtest" visible 4 3 25

mkdir -p "$tmp/rloss"
lay=$(private_layout conf/2x2-two-reflectors.ini "$tmp/rloss" 12)
echo "dsm: two reflectors with 5% loss, duplication and reordering injected"
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=13" run_expect \
	"race-free stress on 2x2-two-reflectors with loss" "$lay" 240 "PASSED" \
	"$build/tests/dsmtest" stress 4 8 3
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=21" run_expect \
	"chaos 20 72 on 2x2-two-reflectors with loss" "$lay" 240 "PASSED" \
	"$build/tests/dsmtest" chaos 20 72
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=14" run_expect \
	"LU n=128 on 2x2-two-reflectors with loss" "$lay" 240 "TEST PASSED" \
	"$build/splash2/lu" -n128 -b16 -t
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=22" run_expect \
	"spinning on flags on 2x2-two-reflectors with loss" "$lay" 120 \
	"spinflag: 8 processes: PASSED" "$build/splash2/spinflag" 8 2
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=23" run_expect \
	"writes seen without synchronisation on 2x2-two-reflectors with loss" \
	"$lay" 120 "PASSED" "$build/tests/dsmtest" visible 4 3 23
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=25" run_expect \
	"globals written after CREATE on 2x2-two-reflectors with loss" \
	"$lay" 120 "globals: 8 processes: PASSED" "$build/splash2/globals" 8 5
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=26" run_expect \
	"records before their pointers on 2x2-two-reflectors with loss" \
	"$lay" 120 "publish: 8 processes: PASSED" "$build/splash2/publish" 8 16

mkdir -p "$tmp/eager"
lay=$(private_layout conf/2x2-two-reflectors.ini "$tmp/eager" 13)
sed -i 's/^relay = .*/relay = eager/' "$lay"
grep -q '^relay = eager' "$lay" || { echo "  FAIL cannot make an eager layout"; exit 1; }
echo "dsm: two reflectors, relay = eager, with loss"
run_expect "race-free stress on 2x2-two-reflectors, eager" "$lay" 240 "PASSED" \
	"$build/tests/dsmtest" stress 6 8 9
LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=15" run_expect \
	"LU n=128 on 2x2-two-reflectors, eager, with loss" "$lay" 240 \
	"TEST PASSED" "$build/splash2/lu" -n128 -b16 -t
run_expect "spinning on flags on 2x2-two-reflectors, eager" "$lay" 60 \
	"spinflag: 8 processes: PASSED" "$build/splash2/spinflag" 8 2
run_expect "writes seen without synchronisation on 2x2-two-reflectors, eager" \
	"$lay" 120 "PASSED" "$build/tests/dsmtest" visible 4 3 24

# The acceptance matrix of the hierarchy: three reflectors and 8+8+8+8,
# each relay, without and with loss on every link.
idx=20
for l in 3-reflectors 8+8+8+8; do
	for relay in lazy eager adaptive; do
		idx=$((idx + 1))
		mkdir -p "$tmp/m$idx"
		lay=$(private_layout "conf/$l.ini" "$tmp/m$idx" $idx)
		sed -i "s/^relay = .*/relay = $relay/" "$lay"
		echo "dsm: $l, relay = $relay, without and with 5% loss"
		run_expect "race-free stress on $l, $relay" "$lay" 240 "PASSED" \
			"$build/tests/dsmtest" stress 4 8 $((idx + 100))
		run_expect "LU n=128 on $l, $relay" "$lay" 240 "TEST PASSED" \
			"$build/splash2/lu" -n128 -b16 -t
		LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=$idx" run_expect \
			"race-free stress on $l, $relay, with loss" "$lay" 240 \
			"PASSED" "$build/tests/dsmtest" stress 4 8 $idx
		LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=$idx" run_expect \
			"LU n=128 on $l, $relay, with loss" "$lay" 240 \
			"TEST PASSED" "$build/splash2/lu" -n128 -b16 -t
		LM_FAULTS="drop=0.05,dup=0.02,reorder=0.05,seed=$idx" run_expect \
			"writes seen without synchronisation on $l, $relay, with loss" \
			"$lay" 120 "PASSED" "$build/tests/dsmtest" visible 3 3 $((idx + 200))
	done
done

# The SPLASH-2 start: rank 0 creates every other process, then each takes
# its number under one lock.  Each cluster's processes should get
# consecutive numbers (a recalled token waits for the clients that just
# started: docs/dsm.md "Locks"); without that about one run in two on
# 8+8+8+8 failed.  The rule cannot wait for a worker whose work has not
# reached its lemuriad yet, and once in a clean-clone CI run (2026-11-29)
# a cluster's first two workers took their numbers before the other six
# had work ("2 2 1 1 1 1 1 1 1 1 0 ... 2 2 2 2 2 2 3 ..."); so ten runs,
# of which at least nine must number by cluster.  Without the rule 13
# runs in 58 split a cluster (a scratch build, 2026-11-29): this check
# then fails about two times in three (three runs that all had to pass:
# one in two), and with it, splitting one run in 70 or so, about once in
# a hundred (three runs: once in 25).
mkdir -p "$tmp/numbering"
lay=$(private_layout conf/8+8+8+8.ini "$tmp/numbering" 31)
echo "dsm: the SPLASH-2 start numbers each cluster's processes together"
together=0
for r in 1 2 3 4 5 6 7 8 9 10; do
	timeout -k 5 60 "$bin/lemuria-run" -c "$lay" --start-daemons \
		--timeout 60 -- "$build/tests/dsmtest" numbering 1 >"$tmp/out" 2>&1
	st=$?
	if [ $st -eq 0 ] && grep -q PASSED "$tmp/out"; then
		together=$((together + 1))
	else
		echo "       run $r (status $st):"
		tail -n 4 "$tmp/out" | sed 's/^/       /'
	fi
done
checks=$((checks + 1))
if [ $together -ge 9 ]; then
	echo "  ok   numbers by cluster on 8+8+8+8 in $together of 10 runs (9 needed)"
else
	failures=$((failures + 1))
	echo "  FAIL numbers by cluster on 8+8+8+8 in $together of 10 runs (9 needed)"
fi

# Lazy relay at work, through the counters: every process rewrites a
# slice nobody else reads, 10 rounds x 2 KiB x 8 processes = 160 KiB of
# writes.  Lazy: the only delta data that leaves a lemuriad is the few
# bytes of lm_distribute's page (adaptive too: nobody pulls these pages);
# eager: all of it goes up.
# stat_client / stat_cluster NAME FILE: the run's total of counter NAME at
# client / cluster level, from lemuria-run --stats output in FILE
stat_client() {
	awk -v n="$1" '$2 == n { print $3; exit }' "$2"
}
stat_cluster() {
	awk -v n="$1" '$2 == n { print $4; exit }' "$2"
}
# lu_stats LAYOUT: LU n=256 on LAYOUT with its daemons and --stats, into
# $tmp/out; returns lemuria-run's status
lu_stats() {
	timeout -k 5 120 "$bin/lemuria-run" -c "$1" --start-daemons \
		--all-stats --timeout 110 -- "$build/splash2/lu" -n256 -b16 -t \
		>"$tmp/out" 2>&1
}
echo "dsm: lazy relay keeps private writes in their cluster (counters)"
idx=14
for relay in lazy eager adaptive; do
	mkdir -p "$tmp/priv-$relay"
	idx=$((idx + 1))
	lay=$(private_layout conf/2x2-two-reflectors.ini "$tmp/priv-$relay" \
		$idx)
	sed -i "s/^relay = .*/relay = $relay/" "$lay"
	checks=$((checks + 1))
	timeout -k 5 120 "$bin/lemuria-run" -c "$lay" --start-daemons \
		--all-stats --timeout 110 -- "$build/tests/dsmtest" private 10 2048 \
		>"$tmp/out" 2>&1
	st=$?
	bytes=$(stat_cluster delta_bytes_sent "$tmp/out")
	case "$relay" in
	lazy | adaptive)
		ok=$([ "${bytes:-x}" -le 1024 ] 2>/dev/null && echo y) ;;
	eager) ok=$([ "${bytes:-0}" -ge 163840 ] 2>/dev/null && echo y) ;;
	esac
	[ $st -eq 0 ] && [ "$(grep -c PASSED "$tmp/out")" -eq 8 ] || ok=n
	verdict "$ok" "$relay: status $st, $bytes delta bytes left the lemuriads"
done

# Barrier updates (docs/dsm.md "Updates"), through the counters: LU on one
# cluster of 4 with updates on refetches far fewer pages than with them
# off (361 cache hits off, 61 on), and stays correct.  Rank 0 writes
# the whole matrix before the workers start and then only its own
# columns: the copies of the others' go idle and are dropped.
echo "dsm: barrier updates spare refetches (counters)"
for u in off on; do
	mkdir -p "$tmp/upd-$u"
	lay=$(private_layout conf/4.ini "$tmp/upd-$u" 19)
	sed -i "s/^relay = .*/&\nupdates = $u/" "$lay"
	set_copy "$lay" client # one copy per cluster has no client copies
	checks=$((checks + 1))
	lu_stats "$lay"
	st=$?
	hits=$(stat_client fetch_hits "$tmp/out")
	sent=$(stat_client updates_sent "$tmp/out")
	idle=$(stat_client updates_idle "$tmp/out")
	ahead=$(stat_client updates_ahead "$tmp/out")
	if [ "$u" = off ]; then
		hits_off=${hits:-0}
		ok=$([ "${sent:-x}" -eq 0 ] 2>/dev/null && echo y)
	else
		# and the background hook encodes some while the barrier
		# goes round (lemuriad/updates.h, lm_updates_encode_ahead)
		ok=$([ "${sent:-0}" -gt 0 ] && [ "${idle:-0}" -gt 0 ] &&
			[ "${ahead:-0}" -gt 0 ] &&
			[ $((${hits:-0} * 3)) -lt "$hits_off" ] 2>/dev/null && echo y)
	fi
	[ $st -eq 0 ] && grep -q "TEST PASSED" "$tmp/out" || ok=n
	verdict "$ok" "updates $u: status $st, $hits refetches, $sent updates ($ahead encoded ahead), $idle idle copies dropped"
done

# SPLASH-2 process numbers follow ranks (docs/splash2.md, "Process
# numbers"): LU then gives each block column to processes of one cluster,
# and the bytes between the clusters stay low.  LU n=256 on 4+4, cluster
# level: 5.0-5.4 MB numbered by rank, 11.2-11.5 MB with the numbers
# shifted by one to seven as arrival order at a lock shifted them.
mkdir -p "$tmp/numbers"
lay=$(private_layout conf/4+4.ini "$tmp/numbers" 32)
echo "dsm: LU's process numbers keep its block columns in their cluster"
for r in 1 2; do
	checks=$((checks + 1))
	lu_stats "$lay"
	st=$?
	bytes=$(stat_cluster bytes_sent "$tmp/out")
	ok=$([ $st -eq 0 ] && grep -q "TEST PASSED" "$tmp/out" &&
		[ "${bytes:-99999999}" -lt 8000000 ] 2>/dev/null && echo y)
	verdict "$ok" "LU n=256 on 4+4, run $r: status $st, ${bytes:-no} bytes between clusters (< 8000000)"
done

# CREATE of a program with a 32 MiB .bss, zero but for a few words rank 0
# sets (issue 38, finding 3): the image carries only the blocks that are
# not zero, so fifteen CREATEs (seven to rank 0's own cluster) move little
# between the clusters and the run is quick; a whole-segment image was
# larger than the transport's largest message, and 15 MiB ones filled the
# reflector's send queue until a CREATE was dropped and its worker waited
# for ever.  With 10 MiB of it filled, the CREATEs overfill the send
# queues: they wait in the daemons' backlogs and still all arrive.
echo "dsm: CREATE of a program with a large .bss"
for l in 8+8 2x2-two-reflectors; do
	mkdir -p "$tmp/bss-$l"
	lay=$(private_layout "conf/$l.ini" "$tmp/bss-$l" 33)
	checks=$((checks + 1))
	start=$(date +%s)
	timeout -k 5 60 "$bin/lemuria-run" -c "$lay" --start-daemons --all-stats \
		--timeout 50 -- "$build/tests/bigbss" >"$tmp/out" 2>&1
	st=$?
	secs=$(( $(date +%s) - start ))
	bytes=$(stat_cluster bytes_sent "$tmp/out")
	ok=$([ $st -eq 0 ] && grep -q PASSED "$tmp/out" &&
		[ "${bytes:-99999999}" -lt 4000000 ] 2>/dev/null && echo y)
	verdict "$ok" "32 MiB .bss on $l: status $st, ${secs}s, ${bytes:-no} bytes between the clusters (< 4000000)"
done
checks=$((checks + 1))
timeout -k 5 120 "$bin/lemuria-run" -c "$tmp/bss-8+8/8+8.ini" --start-daemons \
	--all-stats --timeout 110 -- "$build/tests/bigbss" 10 >"$tmp/out" 2>&1
st=$?
waited=$(awk '$2 == "sends_backlogged" { print $NF; exit }' "$tmp/out")
failed=$(awk '$2 == "sends_failed" { print $NF; exit }' "$tmp/out")
ok=$([ $st -eq 0 ] && grep -q PASSED "$tmp/out" && [ "${failed:-x}" = 0 ] &&
	echo y)
verdict "$ok" "15 CREATEs of 10 MiB on 8+8: status $st, ${waited:-no} messages waited for a full send queue, ${failed:-no} not sent"

# Lock and barrier ids out of range (issue 38, finding 7): lm_lock,
# lm_unlock and lm_barrier of 0, negative ids and the runtime's own fail
# with a message naming the id, the range and the rank, and the run goes
# on, lm_distribute's barrier in the runtime's range included; on two
# reflectors, where an id's manager is the id mod 2.
mkdir -p "$tmp/ids"
lay=$(private_layout conf/2x2-two-reflectors.ini "$tmp/ids" 34)
echo "dsm: lock and barrier ids out of range"
run_expect "bad ids refused and the run goes on" "$lay" 60 "PASSED" \
	"$build/tests/dsmtest" ids 1
checks=$((checks + 1))
missing=""
[ "$(grep -c "dsmtest ids: rank [0-7] PASSED" "$tmp/out")" -eq 8 ] ||
	missing="; not every rank passed"
for msg in "lm_barrier(0): barrier ids are 1..2147483391; 0 is not one" \
	"lm_lock(-1): lock ids are 1..2147483391; -1 is not one" \
	"lm_unlock(2147483392): lock ids are 1..2147483391; 2147483392 is the runtime's own"; do
	[ "$(grep -cF "$msg" "$tmp/out")" -eq 8 ] || missing="$missing; $msg"
done
verdict "$([ -z "$missing" ] && echo y)" \
	"each bad id named by every rank${missing:+; missing:$missing}"

# API misuse (docs/operations.md, "What each error means"): each call fails
# with a message naming the cause, and the run goes on.
mkdir -p "$tmp/misuse"
lay=$(private_layout conf/2.ini "$tmp/misuse" 7)
set_copy "$lay" client # the LEMURIA_PROFILE check below counts FLUSHes
echo "dsm: API misuse"
run_expect "misuse fails cleanly and the run goes on" "$lay" 60 "PASSED" \
	"$build/tests/dsmtest" misuse 1
checks=$((checks + 1))
missing=""
for msg in "does not hold lock 3" "lm_free(0x[0-9a-f]*): not shared memory" \
	"larger than the whole shared region" \
	"not a block lm_malloc returned, or freed already" \
	"lm_lock(3): this process holds lock 3 already"; do
	[ "$(grep -c "$msg" "$tmp/out")" -eq 2 ] || missing="$missing; $msg"
done
verdict "$([ -z "$missing" ] && echo y)" \
	"each misuse named by every rank${missing:+; missing:$missing}"

# Calls before lm_init and a second lm_init (issue 42): each fails, named.
run_expect "calls before lm_init fail and the run goes on" "$lay" 60 "PASSED" \
	"$build/tests/dsmtest" early 1
checks=$((checks + 1))
missing=""
for call in lm_lock lm_unlock lm_barrier lm_malloc lm_free lm_distribute; do
	[ "$(grep -c "$call: called before lm_init succeeded" "$tmp/out")" -eq 2 ] ||
		missing="$missing $call"
done
[ "$(grep -c "lm_init: called again; the first call stands" "$tmp/out")" -eq 2 ] ||
	missing="$missing lm_init"
verdict "$([ -z "$missing" ] && echo y)" \
	"each early call and the second lm_init named by every rank${missing:+; missing:$missing}"

# LEMURIA_PROFILE (docs/performance.md): each rank reports where its
# time went, once, at lm_finalize; without it, nothing.
echo "dsm: LEMURIA_PROFILE"
checks=$((checks + 1))
prof_none=$(grep -c "lemuria-profile " "$tmp/out")
export LEMURIA_PROFILE=1
run_expect "a profiled run passes" "$lay" 60 "PASSED" "$build/tests/dsmtest" \
	stress 2 4 5
unset LEMURIA_PROFILE
# key=value pairs, one line a rank, in rank order after the ranks ended
# (issue 42), barrier and lock waits apart: dsmtest stress takes both
lines=$(grep -c "^lemuria-profile rank=[01] seconds=[0-9.]* fetches=[0-9]* fetch_s=[0-9.]* flushes=[0-9]* flush_s=[0-9.]* barriers=[1-9][0-9]* barrier_wait_s=[0-9.]* locks=[1-9][0-9]* lock_wait_s=[0-9.]* unlocks=[1-9][0-9]* unlock_s=[0-9.]* other_waits=[0-9]* other_wait_s=[0-9.]* apply_s=[0-9.]* read_faults=[0-9]* write_faults=[0-9]* opened_ahead=[0-9]* mprotects=[0-9]* brought_after=[0-9]* brought_stride=[0-9]* reach_after=[0-9]* reach_after_samples=[0-9]* reach_after_read=[0-9]* reach_after_changes=[0-9]* reach_stride=[0-9]* reach_stride_samples=[0-9]* reach_stride_read=[0-9]* reach_stride_changes=[0-9]* ack_wakeups=[0-9]* in_flight_max=[0-9]*$" "$tmp/out")
order=$(sed -n 's/^lemuria-profile rank=\([0-9]*\) .*/\1/p' "$tmp/out" | tr '\n' ' ')
# a barrier's BARRIER follows its FLUSH without waiting for the FLUSH_OK
# (docs/dsm.md step 6): two calls in flight at once
piped=$(grep -c "^lemuria-profile rank=[01] .* in_flight_max=2$" "$tmp/out")
verdict "$([ "$lines" -eq 2 ] && [ "$prof_none" -eq 0 ] && [ "$piped" -eq 2 ] && [ "$order" = "0 1 " ] && echo y)" \
	"one profile line per rank ($lines of 2), in rank order ($order), none unasked ($prof_none), FLUSH and BARRIER in flight together ($piped of 2)"

# Replies are acknowledged at once unless LEMURIA_ACK_DELAY_US delays
# them (docs/dsm.md, "Client acknowledgements"): the ack thread then
# wakes for the acks that no request carried while LU computes; a value
# that is not a delay is named by every rank, and the acks go at once.
echo "dsm: client acks at once, or after LEMURIA_ACK_DELAY_US"
checks=$((checks + 1))
woke_default=$(grep -c "^lemuria-profile rank=[01] .* ack_wakeups=0 " "$tmp/out")
for d in 400 x1; do
	LEMURIA_PROFILE=1 LEMURIA_ACK_DELAY_US=$d timeout -k 5 120 \
		"$bin/lemuria-run" -c "$lay" --start-daemons --timeout 110 -- \
		"$build/splash2/lu" -n256 -b16 -t >"$tmp/ack-$d" 2>&1 ||
		echo "status $?" >>"$tmp/ack-$d"
done
woke=$(grep "^lemuria-profile rank=[01] " "$tmp/ack-400" |
	grep -vc " ack_wakeups=0 ")
named=$(grep -c 'LEMURIA_ACK_DELAY_US="x1" is not a number of microseconds' \
	"$tmp/ack-x1")
asleep=$(grep -c "^lemuria-profile rank=[01] .* ack_wakeups=0 " \
	"$tmp/ack-x1")
passed=$(cat "$tmp/ack-400" "$tmp/ack-x1" | grep -c "TEST PASSED")
verdict "$([ "$woke_default" -eq 2 ] && [ "$woke" -ge 1 ] &&
	[ "$named" -eq 2 ] && [ "$asleep" -eq 2 ] && [ "$passed" -eq 2 ] &&
	! grep -q "^status" "$tmp/ack-400" "$tmp/ack-x1" && echo y)" \
	"ack thread asleep by default ($woke_default of 2), awake with a delay ($woke ranks), a bad value named ($named of 2) and acks at once ($asleep of 2), runs passed ($passed of 2)"

# A run of one process keeps its region private (docs/dsm.md): LU runs
# without a single FLUSH or FETCH reaching its lemuriad.
echo "dsm: a run of one process tracks no writes (counters)"
mkdir -p "$tmp/solo"
lay=$(private_layout conf/1.ini "$tmp/solo" 18)
checks=$((checks + 1))
timeout -k 5 120 "$bin/lemuria-run" -c "$lay" --start-daemons --all-stats \
	--timeout 110 -- "$build/splash2/lu" -n256 -b16 -t >"$tmp/out" 2>&1
st=$?
flushes=$(stat_client flushes "$tmp/out")
fetches=$(awk '$2 == "fetch_misses" { print $4; exit }' "$tmp/out")
ok=$([ $st -eq 0 ] && grep -q "TEST PASSED" "$tmp/out" &&
	[ "${flushes:-x}" = 0 ] && [ "${fetches:-x}" = 0 ] && echo y)
verdict "$ok" "LU on 1: status $st, $flushes flushes, $fetches fetches"


# A client killed mid-run: lemuria-run names the rank and fails within a
# bounded time; the daemons, started separately, serve the next run.
mkdir -p "$tmp/kill"
lay=$(private_layout conf/4+4.ini "$tmp/kill" 10)
echo "dsm: a client killed mid-run on 4+4"
dpids=""
for entry in $(awk '/^\[(reflector|cluster) /{ gsub(/[\[\]]/, ""); print $1 ":" $2 }' "$lay"); do
	role=${entry%%:*}; name=${entry#*:}
	prog=$bin/lemuriad; [ "$role" = reflector ] && prog=$bin/reflector
	"$prog" -c "$lay" -n "$name" -l warn 2>>"$tmp/kill/daemons.log" &
	dpids="$dpids $!"
done
i=0
until "$bin/lemuriactl" -c "$lay" -t 0.5 status >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -ge 10 ] && break; sleep 0.5
done
checks=$((checks + 1))
start=$(date +%s)
# (profiled: the killed rank writes no profile line, and lemuria-run
# says so in its place)
LEMURIA_PROFILE=1 timeout -k 5 60 "$bin/lemuria-run" -c "$lay" -- \
	"$build/tests/dsmtest" die 5 >"$tmp/out" 2>&1
st=$?
secs=$(( $(date +%s) - start ))
if [ $st -ne 0 ] && [ $secs -le 15 ] && grep -q "rank 5 .*signal 9" "$tmp/out" &&
   grep -qx "lemuria-profile rank=5 missing=1" "$tmp/out"; then
	echo "  ok   lemuria-run fails naming rank 5, its profile line missing (${secs}s)"
else
	failures=$((failures + 1))
	echo "  FAIL lost rank not reported (status $st, ${secs}s)"
	sed 's/^/       /' "$tmp/out"
fi
# A rank that finishes while the others wait in a barrier: the barrier
# can never complete, and the run must end at once saying so (issue 42).
checks=$((checks + 1))
start=$(date +%s)
timeout -k 5 60 "$bin/lemuria-run" -c "$lay" -- "$build/tests/dsmtest" leave 5 \
	>"$tmp/out" 2>&1
st=$?
secs=$(( $(date +%s) - start ))
if [ $st -ne 0 ] && [ $secs -le 10 ] &&
   grep -q "barrier 1 can never complete: rank 5 left the run" "$tmp/out"; then
	echo "  ok   a barrier after a rank left ends the run, naming it (${secs}s)"
else
	failures=$((failures + 1))
	echo "  FAIL a barrier after a rank left (status $st, ${secs}s)"
	tail -n 20 "$tmp/out" | sed 's/^/       /'
fi
# A whole cluster whose ranks all finish while other clusters wait in a
# barrier: its lemuriad has no arrival to see, so its reflector learns
# it (GONE) and every barrier manager does; the run ends at once naming
# the cluster (issue 42; it used to hang).  On 3-reflectors the waiting
# clusters' barrier is at other reflectors: the managers' path.
mkdir -p "$tmp/gone"
glay=$(private_layout conf/3-reflectors.ini "$tmp/gone" 35)
for range in "2 3" "0 1"; do
	# shellcheck disable=SC2086 # two ranks
	fails_within 10 "ranks $range, a whole cluster, left: the run ends naming it" \
		"$glay" "barrier 1 can never complete: every rank of cluster c[01] left the run (the last, rank [0-3])" \
		-- "$build/tests/dsmtest" leave $range
done
# Ranks in different barriers (1: even ranks in 1, odd in 2, which the
# lemuriad sees; 2: by cluster, which their reflector sees on 4+4):
# neither can complete; the run ends naming both.
mkdir -p "$tmp/apart"
alay=$(private_layout conf/4+4.ini "$tmp/apart" 36)
for how in 1 2; do
	fails_within 10 "ranks in two barriers (split $how): the run ends naming both" \
		"$alay" "barriers [12] and [12] are waited in at once ([a-z]* [a-z0-9]* in [12], [a-z]* [a-z0-9]* in [12])" \
		-- "$build/tests/dsmtest" split $how
done
# The same across reflectors (split 2 on 2x2-two-reflectors: r0's
# clusters in barrier 1, r1's in 2, whose managers differ; on
# 3-reflectors: r0 and r2 in 1, r1 in 2): each reflector tells the others
# that its clusters all wait, and one that hears of another barrier in
# the same round ends the run (it waited for --timeout before).
for spec in "2x2-two-reflectors 37" "3-reflectors 38"; do
	l=${spec% *}
	mkdir -p "$tmp/apart-$l"
	xlay=$(private_layout "conf/$l.ini" "$tmp/apart-$l" "${spec#* }")
	fails_within 10 "clusters of different reflectors in two barriers ($l): the run ends naming both" \
		"$xlay" "barriers [12] and [12] are waited in at once (the clusters of reflector r[0-2] in [12], those of reflector r[0-2] in [12])" \
		-- "$build/tests/dsmtest" split 2
done
# A lock held by a rank that waits in a barrier, and asked for by a rank
# of its cluster, which can then never reach the barrier: the lemuriad
# ends the run naming both (it waited for --timeout before).
fails_within 10 "a lock held in a barrier its local waiter never reaches: the run ends" \
	"$alay" "lock 1: rank 1 waits for it, and rank 0 holds it while it waits in barrier 15" \
	-- "$build/tests/dsmtest" lockbar 1
# ... and asked for by a rank of another cluster (the manager's RECALL
# names the round it asked in), on one reflector and across two
for flay in "$alay" "$xlay"; do
	fails_within 10 "a lock held in a barrier its waiter of another cluster never reaches: the run ends" \
		"$flay" "lock 1: a rank of another cluster waits for it, and rank 0 holds it while it waits in barrier 15" \
		-- "$build/tests/dsmtest" lockbar 5
done
# Locks taken in a cycle (issue 42: the run waited for --timeout): each
# lemuriad chases a wait of two ticks through the holders and the locks
# they wait for (PROBE, through the locks' managers) and ends the run
# naming every wait; in one cluster, across two on one reflector, and
# with the two locks managed by two reflectors.
fails_within 10 "locks taken in a cycle in one cluster: the run ends naming it" \
	"$alay" "locks taken in a cycle: " "rank 0 waits for lock 2, held by rank 1" \
	"rank 1 waits for lock 1, held by rank 0" \
	-- "$build/tests/dsmtest" lockcycle 0 1
for flay in "$alay" "$xlay"; do
	fails_within 10 "locks taken in a cycle across clusters: the run ends naming it" \
		"$flay" "rank 0 waits for lock 2, held by rank 5" \
		"rank 5 waits for lock 1, held by rank 0" \
		-- "$build/tests/dsmtest" lockcycle 0 5
done
# A rank that exits (status 0) without lm_finalize while the others wait
# in a barrier: the library names it and leaves the run for it, and the
# barrier ends the run at once (the old tree waited until the timeout).
fails_within 10 "a rank that exits without lm_finalize is named, the run ends" \
	"$alay" "rank 5 exits without lm_finalize" \
	"barrier 1 can never complete: rank 5 left the run" \
	-- "$build/tests/dsmtest" nofinal 5
run_plain() { # the same as run, without --start-daemons
	checks=$((checks + 1))
	if timeout -k 5 120 "$bin/lemuria-run" -c "$lay" --timeout 100 -- "$@" \
		>"$tmp/out" 2>&1 && grep -q PASSED "$tmp/out"; then
		echo "  ok   the same daemons serve the next run"
	else
		failures=$((failures + 1))
		echo "  FAIL the next run on the same daemons"
		tail -n 20 "$tmp/out" | sed 's/^/       /'
	fi
}
run_plain "$build/tests/dsmtest" stress 2 4 5
for p in $dpids; do kill -TERM "$p"; done
for p in $dpids; do wait "$p"; done

# A daemon killed while everyone waits with nothing in flight (rank 0
# sleeps 60 s, the others sit in a barrier): only the keepalives can find
# it, within the transport's retries (6 here, to keep the test short);
# every client fails with a message naming it well before rank 0 wakes.
# kill_daemon WHAT NAME PATTERN IDX: kills daemon NAME (reflector|lemuriad)
# 2 s into the wait, on 2x2-two-reflectors.
kill_daemon() {
	what=$1; victim=$2; pattern=$3
	d=$tmp/kd-$victim; mkdir -p "$d"
	lay=$(private_layout conf/2x2-two-reflectors.ini "$d" $4)
	printf '\n[transport client]\nretries = 6\n[transport cluster]\nretries = 6\n[transport root]\nretries = 6\n' >>"$lay"
	dpids=""; vpid=""
	for entry in $(awk '/^\[(reflector|cluster) /{ gsub(/[\[\]]/, ""); print $1 ":" $2 }' "$lay"); do
		role=${entry%%:*}; name=${entry#*:}
		prog=$bin/lemuriad; [ "$role" = reflector ] && prog=$bin/reflector
		"$prog" -c "$lay" -n "$name" -l error 2>>"$d/daemons.log" &
		dpids="$dpids $!"
		[ "$name" = "$victim" ] && vpid=$!
	done
	i=0
	until "$bin/lemuriactl" -c "$lay" -t 0.5 status >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -ge 10 ] && break; sleep 0.5
	done
	checks=$((checks + 1))
	start=$(date +%s)
	timeout -k 5 90 "$bin/lemuria-run" -c "$lay" -- \
		"$build/tests/dsmtest" sleep 60 >"$d/out" 2>&1 &
	rpid=$!
	sleep 2
	kill -KILL "$vpid"
	wait "$rpid"
	st=$?
	secs=$(( $(date +%s) - start ))
	if [ $st -ne 0 ] && [ $st -ne 124 ] && [ $secs -le 40 ] &&
	   grep -q "$pattern" "$d/out"; then
		echo "  ok   $what $victim killed: the run fails naming it (${secs}s)"
	else
		failures=$((failures + 1))
		echo "  FAIL $what $victim killed (status $st, ${secs}s)"
		tail -n 20 "$d/out" | sed 's/^/       /'
	fi
	for p in $dpids; do kill -TERM "$p" 2>/dev/null; done
	for p in $dpids; do wait "$p" 2>/dev/null; done
}
echo "dsm: daemons killed mid-run on 2x2-two-reflectors"
kill_daemon reflector r1 "reflector" 16
kill_daemon lemuriad c2 "lemuriad c2" 17

# copy = cluster beside copy = client (docs/dsm.md "One copy per
# cluster"), and a client its lemuriad cannot hand the copy to.
mkdir -p "$tmp/mixed"
lay=$(private_layout conf/4+4.ini "$tmp/mixed" 12)
sed -i '/^\[cluster c0\]/a copy = cluster' "$lay"
sed -i '/^\[cluster c1\]/a copy = client' "$lay"
echo "dsm: 4+4 with c0 sharing one copy and c1 a copy per client"
run_expect "LU n=128 b=16, mixed copies" "$lay" 120 "TEST PASSED" \
	"$build/splash2/lu" -n128 -b16 -t
run_expect "bytes of one page from every rank, mixed copies" "$lay" 120 \
	"PASSED" "$build/tests/dsmtest" bytes 20
run_expect "chaos 20 121, mixed copies" "$lay" 120 "PASSED" \
	"$build/tests/dsmtest" chaos 20 121
if unshare -p -f true 2>/dev/null; then
	checks=$((checks + 1))
	start=$(date +%s)
	timeout -k 5 60 "$bin/lemuria-run" -c "$lay" --start-daemons -- \
		unshare -p -f "$build/tests/dsmtest" counter 1 >"$tmp/out" 2>&1
	st=$?
	secs=$(( $(date +%s) - start ))
	ok=$([ $st -ne 0 ] && [ $secs -le 20 ] &&
		grep -q "rank [0-3]: cannot map cluster c0's copy (copy = cluster" "$tmp/out" &&
		grep -q "set copy = client in its \[cluster c0\] section" "$tmp/out" &&
		echo y)
	verdict "$ok" "a client in another pid namespace fails lm_init naming copy (status $st, ${secs}s)"
else
	echo "  skip a client in another pid namespace (unshare -p needs privileges here)"
fi

# LEMURIA_CHECK_COPY=1 (docs/dsm.md "One copy per cluster"): at every
# barrier each lemuriad compares the cluster's copy with its own copies
# of the homes' pages; the runs pass, and the comparisons did happen.
mkdir -p "$tmp/check"
lay=$(private_layout conf/2x2-two-reflectors.ini "$tmp/check" 13)
set_copy "$lay" cluster
echo "dsm: LEMURIA_CHECK_COPY on 2x2-two-reflectors"
for prog in "splash2/lu -n256 -b16 -t" "tests/dsmtest chaos 20 131" \
	"tests/dsmtest bytes 20"; do
	checks=$((checks + 1))
	# shellcheck disable=SC2086 # the program and its arguments
	LEMURIA_CHECK_COPY=1 timeout -k 5 120 "$bin/lemuria-run" -c "$lay" \
		--start-daemons --all-stats --timeout 110 -- "$build"/$prog \
		>"$tmp/out" 2>&1
	st=$?
	compared=$(awk '$2 == "copy_checked" { print $NF; exit }' "$tmp/out")
	ok=$([ $st -eq 0 ] && grep -q "PASSED" "$tmp/out" &&
		[ "${compared:-0}" -gt 0 ] 2>/dev/null && echo y)
	verdict "$ok" "${prog%% *} ${prog#* }: status $st, $compared pages compared"
done

# No daemons at all: every client fails lm_init with a message naming its
# lemuriad instead of hanging (few retries, so the test stays short).
mkdir -p "$tmp/none"
lay=$(private_layout conf/2.ini "$tmp/none" 11)
printf '\n[transport client]\nretries = 4\nrto_initial = 20ms\n' >>"$lay"
echo "dsm: clients without a lemuriad"
checks=$((checks + 1))
start=$(date +%s)
timeout -k 5 60 "$bin/lemuria-run" -c "$lay" -- "$build/tests/dsmtest" counter 1 \
	>"$tmp/out" 2>&1
st=$?
secs=$(( $(date +%s) - start ))
# within about a second of refusals (issue 42), not the 11 s of retries
if [ $st -ne 0 ] && [ $secs -le 3 ] && grep -q "unreachable (lemuriad c0 at" "$tmp/out"; then
	echo "  ok   lm_init fails naming the lemuriad (${secs}s)"
else
	failures=$((failures + 1))
	echo "  FAIL silent lemuriad (status $st, ${secs}s)"
	sed 's/^/       /' "$tmp/out"
fi

echo "dsm: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
