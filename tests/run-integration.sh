#!/bin/sh
# Integration tests with real daemons on loopback: start a layout's daemons,
# ask them with lemuriactl, run a small DSM program on them and read the
# counters (lemuriactl stats, --json, lemuria-run --stats), stop one, check
# it is reported (status and stats), stop the rest
# with SIGTERM and check they exit cleanly; run one detached with a pidfile
# and a log file (SIGHUP reopens it, a second copy is refused, SIGTERM
# removes the pidfile, a stale pidfile is replaced); bad command lines and
# layouts are refused with status 2 and a message naming the cause; a
# flood of bad datagrams is counted and logged rate-limited; a reflector
# and a lemuriad started from different layout files find it out and a
# run on them fails at once; a layout with slow client-level timeouts
# starts and runs; a lemuriad and a reflector killed (SIGKILL) and
# started again serve the very next run; a lemuria-run killed by SIGKILL
# takes the ranks and daemons it started with it; one command starts
# every "host" through an agent that works as ssh does (--hosts), and
# stops them all when a rank fails or it is stopped itself; a test
# script stopped with TERM ends at once.
#   tests/run-integration.sh BUILD_DIR
set -u
build=${1:-build}
bin=$build/bin
tmp=$(mktemp -d /tmp/lm-integ.XXXXXX)
pids=""
failures=0
checks=0

cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # cleanup runs as the script exits

ok() { checks=$((checks + 1)); echo "  ok   $1"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "  FAIL $1"; }
expect() { # expect DESCRIPTION WANTED_STATUS COMMAND...
	desc=$1; want=$2; shift 2
	"$@" >"$tmp/out" 2>&1
	got=$?
	if [ "$got" -eq "$want" ]; then ok "$desc"; else
		fail "$desc (status $got, wanted $want)"; sed 's/^/       /' "$tmp/out"; fi
}
expect_output() { # expect_output DESCRIPTION PATTERN
	if grep -q -- "$2" "$tmp/out"; then ok "$1"; else
		fail "$1 (no \"$2\" in output)"; sed 's/^/       /' "$tmp/out"; fi
}

. tests/lib.sh
private_layout conf/4+4.ini "$tmp" >/dev/null
cp "$tmp/4+4.ini" "$tmp/layout.ini"

echo "integration: daemons of a 4+4 layout"
names=$(awk '/^\[(reflector|cluster) /{ gsub(/[\[\]]/, ""); print $1 ":" $2 }' "$tmp/layout.ini")
for entry in $names; do
	role=${entry%%:*}; name=${entry#*:}
	prog=$bin/lemuriad; [ "$role" = reflector ] && prog=$bin/reflector
	"$prog" -c "$tmp/layout.ini" -n "$name" -l warn 2>"$tmp/$name.log" &
	pids="$pids $!"
	eval "pid_$(echo "$name" | tr -c 'a-zA-Z0-9\n' _)=$!"
done

# The daemons bind at once; give them up to 5 s to answer.
i=0
until $bin/lemuriactl -c "$tmp/layout.ini" -t 0.5 status >"$tmp/out" 2>&1; do
	i=$((i + 1)); [ $i -ge 10 ] && break; sleep 0.5
done
expect "lemuriactl status: every daemon up" 0 $bin/lemuriactl -c "$tmp/layout.ini" status
expect_output "status lists the reflector" "reflector  r0"
expect_output "status shows clients attached and the run (none yet)" \
	"^lemuriad  *c0 .* up  *[0-9.]*  *[0-9.]*  *0  none$"
expect "lemuriactl ping: 50 round trips each" 0 $bin/lemuriactl -c "$tmp/layout.ini" -n 50 ping

echo "integration: counters (lemuriactl stats, lemuria-run --stats)"
# json_check FILE PYTHON_EXPR: the file is JSON and EXPR holds for it (d).
json_check() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>>"$tmp/json.err"
}
lemuriads='[x for x in d["daemons"] if x["role"] == "lemuriad"]'
$bin/lemuriactl -c "$tmp/layout.ini" stats --json >"$tmp/before.json" 2>&1
expect "a small DSM run on the running daemons" 0 timeout -k 5 60 \
	$bin/lemuria-run -c "$tmp/layout.ini" --timeout 50 -v -- "$build/tests/dsmtest" counter 20
# one form of run id everywhere, the decimal --run takes (issue 42: the
# daemons printed it in hex)
runid=$(sed -n 's/^lemuria-run: run \([0-9]*\), .*/\1/p' "$tmp/out")
expect "lemuriactl status after the run" 0 $bin/lemuriactl -c "$tmp/layout.ini" status
expect_output "status names the run as lemuria-run did (${runid:-no id printed})" \
	"^lemuriad  *c0 .* ${runid:-no-id}$"
$bin/lemuriactl -c "$tmp/layout.ini" stats >"$tmp/out" 2>&1
expect_output "stats names the same run" "^lemuriad c0 (.*): up .*, run ${runid:-no-id},"
expect "lemuriactl stats: every daemon answers" 0 $bin/lemuriactl -c "$tmp/layout.ini" stats
expect_output "stats has a block per daemon" "^lemuriad c0 (127.0.0.1:[0-9]*): up "
# issue 42: a summary by default (75 rows a daemon before), -a for all
rows=$(awk '/^lemuriad c0 /{ l = 1; next } /^(lemuriad|reflector) /{ l = 0 }
	l && NF { n++ } END { print n + 0 }' "$tmp/out")
if [ "$rows" -ge 3 ] && [ "$rows" -le 12 ] && grep -q "^  msgs_sent  *[0-9]" "$tmp/out"; then
	ok "stats: a summary of $rows rows a daemon, messages first"
else
	fail "stats: $rows rows for c0, not a summary"; sed 's/^/       /' "$tmp/out"
fi
expect "lemuriactl stats -a" 0 $bin/lemuriactl -c "$tmp/layout.ini" stats -a
# In a lemuriad's block the first column is the client level.
if awk '/^lemuriad /{ l = 1 } /^reflector /{ l = 0 }
	l && $1 == "msgs_received" && $2 > 0 { n++ } END { exit n >= 2 ? 0 : 1 }' "$tmp/out"; then
	ok "stats: every lemuriad received client messages"
else
	fail "stats: no client-level msgs_received > 0"; sed 's/^/       /' "$tmp/out"
fi
expect "lemuriactl stats --json" 0 $bin/lemuriactl -c "$tmp/layout.ini" stats --json
cp "$tmp/out" "$tmp/after.json"
if python3 -m json.tool "$tmp/after.json" >/dev/null 2>&1; then ok "stats --json is valid JSON"; else
	fail "stats --json is not JSON"; sed 's/^/       /' "$tmp/after.json"; fi
if json_check "$tmp/after.json" "len(d['daemons']) == 3 and all(x['up'] for x in d['daemons']) and all(x['counters']['client']['msgs_received'] > 0 and x['counters']['client']['msgs_sent'] > 0 for x in $lemuriads)"; then
	ok "stats --json: client-level message counts of every lemuriad > 0"
else
	fail "stats --json: client-level counts"; sed 's/^/       /' "$tmp/after.json"
fi
# --json before the command too (issue 42: it worked only after stats)
expect "lemuriactl --json stats" 0 $bin/lemuriactl -c "$tmp/layout.ini" --json stats
if json_check "$tmp/out" "len(d['daemons']) == 3"; then ok "... is the same JSON"; else
	fail "--json stats is not the JSON of every daemon"; sed 's/^/       /' "$tmp/out"; fi
if json_check "$tmp/before.json" "all(x['counters']['client']['msgs_received'] < y['counters']['client']['msgs_received'] for x, y in zip($lemuriads, [x for x in json.load(open('$tmp/after.json'))['daemons'] if x['role'] == 'lemuriad']))"; then
	ok "stats: the run raised the client-level counts"
else
	fail "stats: counts did not grow over the run"; sed 's/^/       /' "$tmp/before.json"
fi
expect "lemuria-run --stats on the running daemons" 0 timeout -k 5 60 \
	$bin/lemuria-run -c "$tmp/layout.ini" --timeout 50 --stats -- "$build/tests/dsmtest" counter 20
expect_output "lemuria-run --stats prints the summary" "^lemuria-run: what the run did, summed over the 3 daemons that answered (of 3; every counter with -a)"
if [ "$(grep -c '^lemuria-run: ' "$tmp/out")" -le 20 ]; then
	ok "lemuria-run --stats: a summary, not every counter"
else
	fail "lemuria-run --stats printed $(grep -c '^lemuria-run: ' "$tmp/out") lines"
fi
expect "lemuria-run -a on the running daemons" 0 timeout -k 5 60 \
	$bin/lemuria-run -c "$tmp/layout.ini" --timeout 50 -a -- "$build/tests/dsmtest" counter 20
expect_output "lemuria-run -a prints the total" "^lemuria-run: total of the 3 daemons that answered (of 3)"
# The total's columns: client, cluster, root, -.
if awk '/^lemuria-run: total/{ t = 1; next } /^lemuria-run: [a-z]/{ t = 0 }
	t && $2 == "msgs_received" && $3 > 0 && $4 > 0 { n++ } END { exit n == 1 ? 0 : 1 }' "$tmp/out"; then
	ok "lemuria-run --stats: client and cluster totals > 0"
else
	fail "lemuria-run --stats: no per-level totals"; sed 's/^/       /' "$tmp/out"
fi
expect_output "lemuria-run --stats lists each daemon" "^lemuria-run: lemuriad c1 (127.0.0.1:[0-9]*): up "

# Ranks that another launcher starts (issue 42): srun gives each process
# SLURM_PROCID and the job's start time and step, Open MPI's mpirun
# OMPI_COMM_WORLD_RANK (its user exports LM_RUN); with LM_LAYOUT
# exported, the ranks join one run without lemuria-run.
echo "integration: ranks started as srun and mpirun start them"
np=$(awk -F= '/^clients/ { s += $2 } END { print s }' "$tmp/layout.ini")
start=$(($(date +%s) + 1)) # after the runs above, as a later job's
mpirun_run=$(date +%s%N)
mpirun_run=$((mpirun_run + 3000000000)) # and after the srun's
# (a run below after these would need an id larger than mpirun_run)
for style in srun mpirun; do
	rpids=""
	r=0
	while [ $r -lt "$np" ]; do
		if [ $style = srun ]; then
			set -- "SLURM_JOB_START_TIME=$start" SLURM_STEP_ID=3 \
				SLURM_PROCID=$r
		else
			set -- "LM_RUN=$mpirun_run" OMPI_COMM_WORLD_RANK=$r
		fi
		env -u LM_RANK -u LM_RUN LM_LAYOUT="$tmp/layout.ini" "$@" \
			timeout -k 5 60 "$build/tests/dsmtest" counter 20 \
			>"$tmp/rank-$style-$r" 2>&1 &
		rpids="$rpids $!"
		r=$((r + 1))
	done
	st=0
	for p in $rpids; do wait "$p" || st=$?; done
	if [ "$st" -eq 0 ] && grep -q PASSED "$tmp/rank-$style-0"; then
		ok "$np ranks started as $style starts them: one run, PASSED"
	else
		fail "$np ranks started as $style starts them (status $st)"
		sed 's/^/       /' "$tmp/rank-$style-0"
	fi
done
env -u LM_RANK -u LM_RUN LM_LAYOUT="$tmp/layout.ini" \
	timeout -k 5 30 "$build/tests/dsmtest" counter 20 >"$tmp/out" 2>&1
expect_output "no rank from any launcher: lm_init says where one comes from" \
	"LM_RANK is not set (nor SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK)"
env -u LM_RANK -u LM_RUN LM_LAYOUT="$tmp/layout.ini" SLURM_PROCID=0 \
	timeout -k 5 30 "$build/tests/dsmtest" counter 20 >"$tmp/out" 2>&1
expect_output "a rank but no run: lm_init says how to give one" \
	"LM_RUN is not set (nor SLURM_JOB_START_TIME)"

victim=$(echo "$names" | awk -F: '$1 == "cluster" { print $2; exit }')
eval "vpid=\$pid_$(echo "$victim" | tr -c 'a-zA-Z0-9\n' _)"
# shellcheck disable=SC2154 # set by the eval above
kill -TERM "$vpid"
wait "$vpid"; st=$?
pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$vpid" | tr '\n' ' ')
if [ "$st" -eq 0 ]; then ok "lemuriad exits 0 on SIGTERM"; else fail "lemuriad exit status $st on SIGTERM"; fi
expect "status fails when a daemon is down" 1 $bin/lemuriactl -c "$tmp/layout.ini" -t 0.3 status
expect_output "status names the daemon that is down" "$victim .*down"
expect "stats fails when a daemon is down" 1 $bin/lemuriactl -c "$tmp/layout.ini" -t 0.3 stats
expect_output "stats names the daemon that is down" "^lemuriad $victim (127.0.0.1:[0-9]*): down ("
expect_output "stats still shows the others" "^reflector r0 (127.0.0.1:[0-9]*): up "
expect "stats --json fails when a daemon is down" 1 $bin/lemuriactl -c "$tmp/layout.ini" -t 0.3 stats --json
if json_check "$tmp/out" "[x['up'] for x in d['daemons'] if x['name'] == '$victim'] == [False] and sum(x['up'] for x in d['daemons']) == 2"; then
	ok "stats --json marks only $victim down"
else
	fail "stats --json: $victim not marked down"; sed 's/^/       /' "$tmp/out"
fi

# A restarted daemon serves again (new session, same node id).
"$bin/lemuriad" -c "$tmp/layout.ini" -n "$victim" -l warn 2>>"$tmp/$victim.log" &
pids="$pids $!"
i=0
until $bin/lemuriactl -c "$tmp/layout.ini" -t 0.5 status >"$tmp/out" 2>&1; do
	i=$((i + 1)); [ $i -ge 10 ] && break; sleep 0.5
done
expect "restarted lemuriad answers again" 0 $bin/lemuriactl -c "$tmp/layout.ini" status

for p in $pids; do kill -TERM "$p" 2>/dev/null; done
clean=0
for p in $pids; do wait "$p" 2>/dev/null || clean=1; done
pids=""
if [ $clean -eq 0 ]; then ok "all daemons exit 0 on SIGTERM"; else fail "a daemon exited non-zero on SIGTERM"; fi
if cat "$tmp"/*.log | grep -q "ERROR\|error:"; then fail "daemon logs show errors"; cat "$tmp"/*.log; else ok "no errors logged"; fi

echo "integration: a detached daemon (-d, -p, --log-file, SIGHUP)"
pidf=$tmp/detached.pid
logf=$tmp/detached.log
detach() { # detach LOG: starts the victim detached with the pidfile
	"$bin/lemuriad" -c "$tmp/layout.ini" -n "$victim" -l info -d -p "$pidf" --log-file "$1"
}
sig() { # sig SIGNAL PID: never "kill 0" (our own group) when a pid is missing
	[ "${2:-0}" -gt 1 ] 2>/dev/null && kill "-$1" "$2" 2>/dev/null
}
wait_gone() { # wait_gone PID: up to 5 s for a process we cannot wait(1) for
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.1; done
	! kill -0 "$1" 2>/dev/null
}
t0=$(date +%s%N)
expect "lemuriad -d returns 0" 0 timeout 10 "$bin/lemuriad" -c "$tmp/layout.ini" -n "$victim" -l info -d -p "$pidf" --log-file "$logf"
ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$ms" -lt 3000 ]; then ok "lemuriad -d returns at once (${ms} ms)"; else fail "lemuriad -d took ${ms} ms"; fi
dpid=$(cat "$pidf" 2>/dev/null)
if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
	ok "pidfile holds a live pid ($dpid)"; pids="$pids $dpid"
else
	fail "pidfile holds no live pid (\"$dpid\")"
fi
if [ "$(readlink "/proc/$dpid/cwd" 2>/dev/null)" = / ]; then ok "detached daemon runs in /"; else fail "detached daemon is not in /"; fi
"$bin/lemuriactl" -c "$tmp/layout.ini" -t 300 status >"$tmp/out" 2>&1
expect_output "detached daemon answers lemuriactl" "lemuriad *$victim .* up "
mv "$logf" "$logf.1"
sig HUP "$dpid"
i=0
until grep -q "reopened logs" "$logf" 2>/dev/null; do
	i=$((i + 1)); [ $i -ge 50 ] && break; sleep 0.1
done
if grep -q "info: reopened logs" "$logf" 2>/dev/null; then ok "SIGHUP reopens the log file"; else fail "no \"reopened logs\" in a new $logf"; fi
if grep -q "listening" "$logf.1"; then ok "earlier lines stay in the moved log"; else fail "moved log lost its lines"; cat "$logf.1"; fi
expect "second instance with the same pidfile refused" 1 detach "$tmp/second.log"
expect_output "refusal names the pidfile and its pid" "pidfile $pidf names running process $dpid"
sig TERM "$dpid"
if wait_gone "$dpid"; then ok "detached daemon stops on SIGTERM"; else fail "detached daemon ignores SIGTERM"; fi
pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$dpid" | tr '\n' ' ')
if [ -n "$dpid" ] && [ ! -e "$pidf" ]; then ok "SIGTERM removes the pidfile"; else fail "pidfile left after SIGTERM"; fi
if grep -q "info: stopped" "$logf"; then ok "clean stop logged"; else fail "no \"stopped\" in $logf"; cat "$logf"; fi
# A pidfile left by a killed daemon is stale: the next start replaces it.
expect "restart with -d" 0 detach "$logf"
dpid=$(cat "$pidf" 2>/dev/null); pids="$pids $dpid"
sig KILL "$dpid"; wait_gone "$dpid"
expect "a stale pidfile is replaced" 0 detach "$logf"
npid=$(cat "$pidf" 2>/dev/null); pids="$pids $npid"
if [ -n "$npid" ] && [ "$npid" != "$dpid" ] && kill -0 "$npid" 2>/dev/null; then ok "pidfile names the new daemon"; else fail "pidfile \"$npid\" after replacing $dpid"; fi
sig TERM "$npid"; wait_gone "$npid"
pids=""
if grep -qi "error" "$logf" "$logf.1"; then fail "detached daemon logged errors"; cat "$logf"; else ok "detached daemon logged no errors"; fi

echo "integration: --help and --version of every program"
for p in reflector lemuriad lemuriactl lemuria-run; do
	expect "$p --help exits 0" 0 sh -c "$bin/$p --help 2>/dev/null"
	expect_output "... with its usage on stdout" "^usage: $p "
	expect "$p --version exits 0" 0 sh -c "$bin/$p --version 2>/dev/null"
	expect_output "... naming it and the version" \
		"^$p (Lemuria) [0-9][0-9]*\.[0-9][0-9]*\$"
done

echo "integration: bad input to the programs"
expect "reflector without -n is a usage error" 2 $bin/reflector -c "$tmp/layout.ini"
expect_output "usage error says what is missing" "-n NAME"
expect "unknown section name" 2 $bin/lemuriad -c "$tmp/layout.ini" -n nosuch
expect_output "names the missing section" "no \[cluster nosuch\]"
printf '[lemuria]\nshared_size = 64M\nbase = 0x500000000000\nbogus = 1\n' >"$tmp/bad.ini"
expect "bad layout refused" 2 $bin/reflector -c "$tmp/bad.ini" -n r0
expect_output "message gives file:line" "bad.ini:4"
expect "missing layout file" 2 $bin/lemuriactl -c "$tmp/nonexistent.ini" status
expect "unknown lemuriactl command" 2 $bin/lemuriactl -c "$tmp/layout.ini" frobnicate
expect "--json only with stats" 2 $bin/lemuriactl -c "$tmp/layout.ini" status --json
expect_output "... says so" "--json goes with stats only, not with status"
expect "--json before a command other than stats" 2 $bin/lemuriactl -c "$tmp/layout.ini" --json ping
expect "lemuriactl -t takes seconds, as lemuria-run's" 2 $bin/lemuriactl -c "$tmp/layout.ini" -t 500ms status
expect_output "... and says so" "-t takes seconds"

echo "integration: bad datagrams, and a layout that differs between daemons"
# Reflector r0 reads layout A, lemuriad c0 layout B: the same file but
# for c1's client count (same ports, same secret).
mkdir "$tmp/mm"
private_layout conf/4+4.ini "$tmp/mm" 1 >/dev/null
mv "$tmp/mm/4+4.ini" "$tmp/mm/a.ini"
awk '/^\[cluster c1\]/ { c = 1 } c && /^clients/ { $0 = "clients = 3"; c = 0 } { print }' \
	"$tmp/mm/a.ini" >"$tmp/mm/b.ini"
"$bin/reflector" -c "$tmp/mm/a.ini" -n r0 -l warn 2>"$tmp/mm/r0.log" &
rpid=$!; pids="$pids $rpid"
"$bin/lemuriad" -c "$tmp/mm/b.ini" -n c0 -l warn 2>"$tmp/mm/c0.log" &
cpid=$!; pids="$pids $cpid"
i=0
until $bin/lemuriactl -c "$tmp/mm/a.ini" -t 300 status 2>/dev/null | grep -q "^reflector  *r0 .* up"; do
	i=$((i + 1)); [ $i -ge 20 ] && break; sleep 0.25
done
rport=$(awk '/^\[reflector r0\]/ { r = 1 } r && /^listen/ { sub(/.*:/, ""); print; exit }' "$tmp/mm/a.ini")
# 300 truncated datagrams, 300 with a bad MAC (claiming to be rank 0,
# node 4, whose address is learned), 50 claiming to be lemuriad c0 (node
# 2) from an address that is not c0's.
wire_version=$(awk '/^#define LM_WIRE_VERSION/ { print $3 }' common/wire.h)
python3 - "$rport" "$wire_version" <<'PY'
import socket, struct, sys, time
port, version = int(sys.argv[1]), int(sys.argv[2])
def dg(sender):
    hdr = struct.pack('<HBBHHHHQQQIIIIIHHI', 0x4d4c, version, 1, 1, sender, 1, 4,
                      1, 0, 1, 1, 0, 0, 0, 4, 0, 1, 0)
    return hdr + b'\0' * 4 + b'\x5a' * 16
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(300):  # paced: the socket buffer must not overflow
    s.sendto(b'LM-garbage', ('127.0.0.1', port))
    s.sendto(dg(4), ('127.0.0.1', port))
    if i % 10 == 9:
        time.sleep(0.002)
for i in range(50):
    s.sendto(dg(2), ('127.0.0.1', port))
PY
flood_at=$(date +%s)
# counter_of DAEMON NAME: DAEMON's counter NAME at level "-" (or -1)
counter_of() {
	$bin/lemuriactl -c "$tmp/mm/a.ini" -t 500 stats --json 2>/dev/null | python3 -c 'import json, sys
d = json.load(sys.stdin)
print([x["counters"]["-"].get(sys.argv[2], -1) for x in d["daemons"] if x["name"] == sys.argv[1]][0])' "$1" "$2" 2>/dev/null || echo -1
}
r0_counter() { counter_of r0 "$1"; }
i=0
until [ "$(r0_counter dropped_malformed)" -ge 300 ] 2>/dev/null; do
	i=$((i + 1)); [ $i -ge 20 ] && break; sleep 0.25
done
for c in dropped_malformed:300 dropped_auth:300 dropped_wrong_address:50; do
	got=$(r0_counter "${c%%:*}")
	if [ "$got" = "${c#*:}" ]; then ok "bad datagrams counted: ${c%%:*} = $got"; else
		fail "counter ${c%%:*} is $got, wanted ${c#*:}"; fi
done
# lines_between FILE PATTERN MIN MAX: MIN..MAX lines of FILE match PATTERN
lines_between() {
	n=$(grep -c -- "$2" "$1")
	if [ "$n" -ge "$3" ] && [ "$n" -le "$4" ]; then ok "$5 ($n lines)"; else
		fail "$5: $n lines match \"$2\", wanted $3..$4"; sed 's/^/       /' "$1" | head -30; fi
}
lines_between "$tmp/mm/r0.log" "dropped malformed datagram (10 bytes) from 127.0.0.1:[0-9]*: shorter than the header" \
	1 10 "truncated datagrams logged with the sender, rate-limited"
lines_between "$tmp/mm/r0.log" "dropped datagram from 127.0.0.1:[0-9]* (node 4): bad MAC" \
	1 10 "bad MACs logged with the sender, rate-limited"
lines_between "$tmp/mm/r0.log" "claims to come from node 2, which the layout puts at 127.0.0.1:" \
	1 10 "datagrams from the wrong address logged, rate-limited"

t0=$(date +%s%N)
timeout -k 5 40 $bin/lemuria-run -c "$tmp/mm/b.ini" --cluster c0 --timeout 30 -- \
	"$build/tests/dsmtest" counter 5 >"$tmp/out" 2>&1
st=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && [ "$ms" -lt 10000 ]; then
	ok "a run across different layouts fails at once (status $st, ${ms} ms)"
else
	fail "run across different layouts: status $st after ${ms} ms"; sed 's/^/       /' "$tmp/out"
fi
expect_output "the ranks are told why" "aborted: reflector r0 (node 1) runs a different layout than lemuriad c0"
# mismatch_line LOG PEER: the daemon logged the mismatch with PEER and two
# different hashes (waits up to 5 s); sets $hashes to "THEIRS OURS"
mismatch_line() {
	i=0
	until grep -q "layout mismatch: $2" "$1"; do
		i=$((i + 1)); [ $i -ge 20 ] && break; sleep 0.25
	done
	line=$(grep "layout mismatch: $2" "$1" | head -1)
	hashes=$(echo "$line" | sed -n 's/.*(hash \([0-9a-f]\{16\}\), ours \([0-9a-f]\{16\}\) from .*/\1 \2/p')
	if [ -n "$hashes" ] && [ "${hashes% *}" != "${hashes#* }" ] &&
	   echo "$line" | grep -q "error: .*refused"; then
		ok "$(basename "$1" .log) logs the mismatch with ${2%% (*} and both hashes"
	else
		fail "$(basename "$1" .log): no mismatch line naming ${2%% (*}"; sed 's/^/       /' "$1" | head -20
	fi
}
mismatch_line "$tmp/mm/r0.log" "lemuriad c0 (node 2) at 127.0.0.1:[0-9]* runs a different layout file"
h1=$hashes
mismatch_line "$tmp/mm/c0.log" "reflector r0 (node 1) at 127.0.0.1:[0-9]* runs a different layout file"
h2=$hashes
if [ -n "$h1" ] && [ "${h1#* }" = "${h2% *}" ] && [ "${h1% *}" = "${h2#* }" ]; then
	ok "both daemons agree on the two hashes"
else
	fail "hashes do not match up: r0 says \"$h1\", c0 says \"$h2\""
fi
# The daemons PING each other with their hashes as they start, so the
# run's messages are refused where they would leave (c0) rather than
# where they arrive (r0).
refused=$(($(r0_counter msgs_refused_layout) + $(counter_of c0 msgs_refused_layout)))
if [ "$(r0_counter layout_mismatches)" = 1 ] && [ "$refused" -ge 1 ]; then
	ok "the mismatch and the refused messages are counted"
else
	fail "layout_mismatches $(r0_counter layout_mismatches), msgs_refused_layout $refused (r0 and c0)"
fi
# A second run fails the same way: the mismatch is remembered.
expect "a second run fails too" 1 timeout -k 5 40 $bin/lemuria-run -c "$tmp/mm/b.ini" --cluster c0 \
	--timeout 30 -- "$build/tests/dsmtest" counter 5
# The summary of what the limiter held back comes when its 10 s are over.
i=0
while ! grep -q "more malformed datagrams suppressed in the last 1[0-9] s" "$tmp/mm/r0.log" &&
	[ $(($(date +%s) - flood_at)) -lt 20 ]; do
	sleep 0.5
done
if grep -q "warn: 29[0-9] more malformed datagrams suppressed in the last 1[0-9] s" "$tmp/mm/r0.log"; then
	ok "the suppressed lines are summed up once"
else
	fail "no summary of suppressed lines"; sed 's/^/       /' "$tmp/mm/r0.log" | tail -20
fi
kill -TERM "$rpid" "$cpid"
wait "$rpid"; st1=$?
wait "$cpid"; st2=$?
pids=""
if [ "$st1" -eq 0 ] && [ "$st2" -eq 0 ]; then ok "both daemons survived and stop cleanly"; else
	fail "daemon exit statuses $st1, $st2 (wanted 0)"; fi

echo "integration: slow client-level timeouts (rto_min above the tools' 50 ms)"
# The tools' first timeout (50 ms) used to fall below such an rto_min, and
# lemuria-run reported the daemons silent.
mkdir -p "$tmp/slow"
private_layout conf/4+4.ini "$tmp/slow" 3 >/dev/null
sed 's/^\[reflector r0\]/[transport client]\nrto_initial = 300ms\nrto_min = 100ms\n\n&/' \
	"$tmp/slow/4+4.ini" >"$tmp/slow/layout.ini"
expect "lemuria-run --start-daemons on it, and a small DSM run" 0 timeout -k 5 60 \
	$bin/lemuria-run -c "$tmp/slow/layout.ini" --start-daemons --timeout 50 -- \
	"$build/tests/dsmtest" counter 5

echo "integration: lemuria-run --pin --batch places each cluster's lemuriad and ranks"
# Each rank checks that it and its cluster's lemuriad run on the CPUs the
# launcher said (-v) it gave that cluster, that the other cluster's
# lemuriad does not share them when there are CPUs enough to part, and
# that it runs under SCHED_BATCH (policy 3) and its lemuriad does not.
mkdir -p "$tmp/pin"
private_layout conf/4+4.ini "$tmp/pin" 4 >/dev/null
mv "$tmp/pin/4+4.ini" "$tmp/pin/layout.ini" # no regex characters for pgrep
cat >"$tmp/pin/rank.sh" <<'EOF'
#!/bin/sh
cpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
mine=c0; other=c1; [ "$LM_RANK" -ge 4 ] && { mine=c1; other=c0; }
lemd() { pgrep -f "lemuriad -c $LM_LAYOUT -n $1( |\$)" | head -n 1; }
me=$(cpus self); l=$(lemd $mine); o=$(lemd $other)
[ -n "$l" ] && [ -n "$o" ] || { echo "rank $LM_RANK: no lemuriad pids" >&2; exit 3; }
[ "$(cpus "$l")" = "$me" ] || { echo "rank $LM_RANK on $me, lemuriad $mine on $(cpus "$l")" >&2; exit 4; }
if [ "$(nproc)" -ge 2 ] && [ "$(cpus "$o")" = "$me" ]; then
	echo "rank $LM_RANK: both lemuriads on $me" >&2; exit 5; fi
policy() { awk '{ print $41 }' "/proc/$1/stat"; }
# the lemuriad keeps lemuria-run's (our parent's) policy
[ "$(policy self)" = 3 ] && [ "$(policy "$l")" = "$(policy "$PPID")" ] || {
	echo "rank $LM_RANK: policy $(policy self), lemuriad $(policy "$l")" >&2; exit 6; }
echo "rank $LM_RANK cluster $mine cpus $me"
EOF
chmod +x "$tmp/pin/rank.sh"
expect "lemuria-run --pin --batch --start-daemons: ranks and lemuriads placed" 0 \
	timeout -k 5 60 $bin/lemuria-run -c "$tmp/pin/layout.ini" --pin --batch \
	--start-daemons --verbose --timeout 50 -- "$tmp/pin/rank.sh"
c0cpus=$(sed -n 's/^lemuria-run: cluster c0 on CPUs //p' "$tmp/out")
if [ -n "$c0cpus" ] && grep -q "^rank 0 cluster c0 cpus " "$tmp/out"; then
	ok "lemuria-run -v names each cluster's CPUs ($c0cpus for c0)"; else
	fail "no CPU placement lines from lemuria-run -v"; sed 's/^/       /' "$tmp/out"; fi

echo "integration: a daemon killed and restarted serves the very next run"
# Its peers kept the transport state of the dead incarnation: the first
# run after a restart was aborted ("lemuriad c1 lost", "reflector lost")
# although the daemon was up again.
mkdir -p "$tmp/restart"
rlay=$(private_layout conf/4+4.ini "$tmp/restart" 6)
start_daemon() { # start_daemon NAME: by hand, its pid in $rpid_NAME
	prog=$bin/lemuriad; [ "$1" = r0 ] && prog=$bin/reflector
	"$prog" -c "$rlay" -n "$1" -l warn 2>>"$tmp/restart/$1.log" &
	eval "rpid_$1=$!"; pids="$pids $!"
}
answers() { # answers: up to 5 s until every daemon answers
	i=0
	until $bin/lemuriactl -c "$rlay" -t 300 status >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -ge 10 ] && return 1; sleep 0.2
	done
}
for n in r0 c0 c1; do start_daemon $n; done
answers
expect "a first run on hand-started daemons" 0 timeout -k 5 60 \
	$bin/lemuria-run -c "$rlay" --timeout 50 -- "$build/tests/dsmtest" counter 5
for victim in c1 r0; do
	eval "vpid=\$rpid_$victim"
	# shellcheck disable=SC2154 # set by the eval above
	kill -KILL "$vpid"; wait "$vpid" 2>/dev/null
	pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$vpid" | tr '\n' ' ')
	start_daemon $victim
	answers
	expect "the run right after $victim was killed and restarted" 0 timeout -k 5 60 \
		$bin/lemuria-run -c "$rlay" --timeout 50 -- "$build/tests/dsmtest" counter 5
done
# shellcheck disable=SC2154 # set by start_daemon's eval
for p in $rpid_r0 $rpid_c0 $rpid_c1; do kill -TERM "$p" 2>/dev/null; done
clean=0
for p in $rpid_r0 $rpid_c0 $rpid_c1; do wait "$p" || clean=1; done
pids=""
if [ $clean -eq 0 ]; then ok "the daemons, restarted or not, stop cleanly"; else
	fail "a daemon exited non-zero on SIGTERM"; cat "$tmp"/restart/*.log; fi

echo "integration: lemuria-run -n N makes the run's layout itself (issue 42)"
mkdir -p "$tmp/quick"
expect "-n 8: one cluster of 8, daemons and all" 0 env TMPDIR="$tmp/quick" \
	timeout -k 5 60 $bin/lemuria-run -n 8 -v -- "$build/tests/dsmtest" counter 20
expect_output "... every rank passed" "rank 7 exited with status 0"
expect "--clusters 4+2 (-n left out)" 0 env TMPDIR="$tmp/quick" \
	timeout -k 5 60 $bin/lemuria-run --clusters 4+2 -v -- "$build/tests/dsmtest" counter 20
expect_output "... started two lemuriads" "lemuriad c1"
expect "-n 5 --per-cluster 2, placed" 0 env TMPDIR="$tmp/quick" \
	timeout -k 5 60 $bin/lemuria-run -n 5 --per-cluster 2 --pin --batch -v -- \
	"$build/tests/dsmtest" counter 10
expect_output "... in three clusters" "cluster c2 on CPUs"
if [ -z "$(ls -A "$tmp/quick")" ]; then ok "each run removed its layout and secret"; else
	fail "left in TMPDIR: $(ls "$tmp/quick")"; fi
expect "a failing rank's status comes back" 3 env TMPDIR="$tmp/quick" \
	timeout -k 5 60 $bin/lemuria-run -n 2 -- sh -c 'exit 3'
if [ -z "$(ls -A "$tmp/quick")" ]; then ok "... and its layout went too"; else
	fail "left in TMPDIR after a failed run: $(ls "$tmp/quick")"; fi
expect "-n with -c refused" 2 $bin/lemuria-run -n 4 -c "$tmp/layout.ini" -- true
expect_output "... naming both" "it does not go with -c"
expect "--clusters that do not sum to -n refused" 2 $bin/lemuria-run -n 6 --clusters 4+4 -- true
expect_output "... naming the sum" "holds 8 ranks, but -n asks for 6"
expect "a bad --shared-size refused" 2 $bin/lemuria-run -n 2 --shared-size 12Q -- true
expect_output "... quoting it" '"12Q" is not a size'

echo "integration: a daemon that is not running is found within seconds (issue 42)"
mkdir -p "$tmp/absent"
alay=$(private_layout conf/4+4.ini "$tmp/absent" 8)
start=$(date +%s)
expect "no daemon at all: the run fails" 1 timeout -k 5 60 \
	$bin/lemuria-run -c "$alay" -- "$build/tests/dsmtest" counter 5
secs=$(( $(date +%s) - start ))
expect_output "... naming the lemuriad and its address" "unreachable (lemuriad c[01] at 127.0.0.1:"
if [ $secs -le 4 ]; then ok "... within 4 s (${secs}s)"; else fail "took ${secs}s"; fi
start=$(date +%s)
expect "lemuriads without their reflector: the run fails" 1 timeout -k 5 60 \
	$bin/lemuria-run -c "$alay" --start-daemons --cluster c0 --cluster c1 -- \
	"$build/tests/dsmtest" counter 5
secs=$(( $(date +%s) - start ))
expect_output "... naming the reflector and its address" "reflector r0 at 127.0.0.1:[0-9]* lost"
if [ $secs -le 5 ]; then ok "... within 5 s (${secs}s)"; else fail "took ${secs}s"; fi

echo "integration: daemons whose layouts name different secrets (issue 42)"
# The reflector reads the layout with demo.key, the lemuriads and ranks a
# copy whose secret_file is another key: every datagram between them
# fails authentication, and the run must say so, not just "lost".
mkdir -p "$tmp/secret"
slay=$(private_layout conf/4+4.ini "$tmp/secret" 9)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret/other.key"
chmod 600 "$tmp/secret/other.key"
sed 's|^secret_file = .*|secret_file = other.key|' "$slay" >"$tmp/secret/b.ini"
"$bin/reflector" -c "$slay" -n r0 -l error 2>/dev/null &
spid=$!; pids="$pids $spid"
start=$(date +%s)
expect "another secret at the reflector: the run fails" 1 timeout -k 5 60 \
	$bin/lemuria-run -c "$tmp/secret/b.ini" --start-daemons --cluster c0 \
	--cluster c1 -- "$build/tests/dsmtest" counter 5
secs=$(( $(date +%s) - start ))
expect_output "... saying the secrets differ" "reflector r0 at 127.0.0.1:[0-9]* lost: its datagrams fail authentication: the two layouts' secret_file keys differ"
if [ $secs -le 5 ]; then ok "... within 5 s (${secs}s)"; else fail "took ${secs}s"; fi
# A rank whose layout names another secret than its lemuriad's: the
# lemuriad answers what it cannot authenticate with a signed ACK, which
# the rank cannot authenticate either, and lm_init says so at once
# (before: "peer unreachable" after 11 s).
"$bin/lemuriad" -c "$slay" -n c0 -l error 2>/dev/null &
cpid=$!; pids="$pids $cpid"
sleep 0.3
start=$(date +%s)
expect "a rank with another secret than its lemuriad's: lm_init fails" 1 \
	env LM_LAYOUT="$tmp/secret/b.ini" LM_RANK=0 LM_RUN=7 timeout -k 5 30 \
	"$build/tests/dsmtest" counter 5
secs=$(( $(date +%s) - start ))
expect_output "... saying the secrets differ" "lemuriad c0 at 127.0.0.1:[0-9]* answers, but its datagrams fail authentication: this layout's secret_file differs"
if [ $secs -le 3 ]; then ok "... within 3 s (${secs}s)"; else fail "took ${secs}s"; fi
expect "lemuriactl status with another secret: down" 1 \
	$bin/lemuriactl -c "$tmp/secret/b.ini" status
expect_output "... saying why" "lemuriad  *c0 .* down .*fail authentication"
kill "$cpid" "$spid" 2>/dev/null; wait "$cpid" "$spid" 2>/dev/null

echo "integration: lemuria-run killed (SIGKILL) leaves no rank or daemon behind"
# The launcher cannot clean up after SIGKILL: what it started must die
# with it.  -v names every pid it starts; the ranks then sit in a barrier
# (rank 0 sleeps) until killed.
mkdir -p "$tmp/orphans"
olay=$(private_layout conf/4+4.ini "$tmp/orphans" 5)
: >"$tmp/orphans/out"
"$bin/lemuria-run" -c "$olay" --start-daemons --verbose --timeout 60 -- \
	"$build/tests/dsmtest" sleep 30 >"$tmp/orphans/out" 2>&1 &
lrpid=$!
# live PID: the process exists and is not a zombie (whoever adopts an
# orphan may never reap it)
live() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
i=0
until [ "$(grep -c '^lemuria-run: rank [0-9]* is pid' "$tmp/orphans/out")" -ge 8 ]; do
	i=$((i + 1)); [ $i -ge 100 ] && break; sleep 0.1
done
sleep 0.5 # the ranks join and reach their barrier
opids=$(sed -n 's/^lemuria-run: started .* (pid \([0-9]*\))$/\1/p; s/^lemuria-run: rank [0-9]* is pid \([0-9]*\)$/\1/p' "$tmp/orphans/out")
nlive=0
for p in $opids; do live "$p" && nlive=$((nlive + 1)); done
kill -KILL "$lrpid"; wait "$lrpid" 2>/dev/null
i=0
while :; do
	left=""
	for p in $opids; do live "$p" && left="$left $p"; done
	[ -z "$left" ] && break
	i=$((i + 1)); [ $i -ge 50 ] && break; sleep 0.1
done
if [ "$nlive" -eq 11 ] && [ -z "$left" ]; then
	ok "the 3 daemons and 8 ranks die with lemuria-run"
else
	fail "after SIGKILL of lemuria-run, $nlive of 11 were running, left after 5 s:${left:- none}"
	for p in $left; do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | sed 's/^/       /'
	sed 's/^/       /' "$tmp/orphans/out"
fi
for p in $left; do kill -KILL "$p" 2>/dev/null; done

# Every host from one command (--hosts): an agent that does what ssh
# does with its words (joins them into a line for a shell "there") runs
# each cluster's launcher and, with --start-daemons, the reflector.  The
# netns test does the same across network namespaces.
echo "integration: every host from one command (--hosts, an ssh-like agent)"
mkdir -p "$tmp/hosts"
hl=$(private_layout conf/4+4.ini "$tmp/hosts" 7)
printf '%s\n' '#!/bin/sh' 'echo "agent: on $1" >&2' 'shift' 'exec sh -c "$*"' \
	>"$tmp/hosts/fake-ssh"
chmod +x "$tmp/hosts/fake-ssh"
printf '%s\n' "r0 node0" "c0 node1" "c1 node2" >"$tmp/hosts/hosts"
gone() { # gone: up to 5 s until nothing of the hosts layout runs
	i=0
	while pgrep -f "$hl" >/dev/null; do
		i=$((i + 1)); [ $i -ge 50 ] && return 1; sleep 0.1
	done
}
expect "--hosts: LU on both clusters and the reflector, one command" 0 \
	timeout -k 5 60 $bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" --start-daemons -- \
	"$build/splash2/lu" -n128 -b16 -t
expect_output "--hosts: the run passed" "TEST PASSED"
expect_output "--hosts: the reflector went through the agent" "agent: on node0"
if gone; then ok "--hosts: every launcher and daemon gone after the run"; else
	fail "--hosts: left running after the run"; pgrep -fa "$hl" | sed 's/^/       /'; fi
# c1's ranks leave first; rank 0 reads their pages a second later, which
# only c1's lemuriad holds: its launcher must keep it until rank 0's is
# done (without that: "lemuriad c1 lost")
expect "--hosts: rank 0 reads pages whose writers' host is done" 0 \
	timeout -k 5 60 $bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" --start-daemons -- \
	"$build/tests/dsmtest" lastread 1000
expect_output "--hosts: every page as its writer left it" "lastread: PASSED (8 pages"
expect "--hosts: words with spaces, quotes and \$ reach every rank" 0 \
	timeout -k 5 60 $bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" -- printf '[%s]\n' "a b 'c' \$HOME"
if [ "$(grep -cx "\[a b 'c' \$HOME\]" "$tmp/out")" -eq 8 ]; then
	ok "--hosts: 8 ranks printed the words as given"
else
	fail "--hosts: the words did not arrive whole"; sed 's/^/       /' "$tmp/out"
fi
# Rank 0's host done first tells the others the run is over; ranks still
# running there finish by themselves (before: stopped with status 129,
# which made the words check above fail when a printf started late)
expect "--hosts: ranks that outlive rank 0's host finish" 0 \
	timeout -k 5 60 $bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" -- \
	sh -c 'test "$LM_RANK" -lt 4 || sleep 1; echo "late $LM_RANK"'
if [ "$(grep -c '^late [4-7]$' "$tmp/out")" -eq 4 ]; then
	ok "--hosts: the 4 late ranks printed"
else
	fail "--hosts: the late ranks did not all print"; sed 's/^/       /' "$tmp/out"
fi
expect "--hosts: a rank failing on one host fails the run with its status" 5 \
	timeout -k 5 60 $bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" --start-daemons -- \
	sh -c 'test "$LM_RANK" != 6 || exit 5; exec sleep 30'
expect_output "--hosts: the failing host is named" "cluster c1 on node2 exited with status 5"
if gone; then ok "--hosts: the other host's sleeping ranks stopped"; else
	fail "--hosts: left running after a failed rank"; pgrep -fa "$hl" | sed 's/^/       /'; fi
timeout -k 5 60 $bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" --start-daemons -v -- sleep 30 \
	>"$tmp/out" 2>&1 &
hpid=$!
i=0
until [ "$(grep -c 'is pid' "$tmp/out")" -ge 8 ]; do
	i=$((i + 1)); [ $i -ge 100 ] && break; sleep 0.1
done
kill -TERM "$hpid"; wait "$hpid"; st=$?
if [ "$st" -eq 143 ] && gone; then
	ok "--hosts: SIGTERM to the one command stops every host (status 143)"
else
	fail "--hosts: after SIGTERM, status $st"; sed 's/^/       /' "$tmp/out"
	pgrep -fa "$hl" | sed 's/^/       /'
fi
pkill -f "$hl" 2>/dev/null
# --stats with --hosts: the counters are read from the head after the
# ranks ended, so the daemons must outlive the run (services); with
# --start-daemons each launcher stops its lemuriad first: refused.
sdp=""
for d in r0 c0 c1; do
	prog=$bin/lemuriad; [ $d = r0 ] && prog=$bin/reflector
	"$prog" -c "$hl" -n $d -l warn 2>"$tmp/hosts/$d.log" &
	sdp="$sdp $!"
done
i=0
until $bin/lemuriactl -c "$hl" -t 0.5 status >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -ge 20 ] && break; sleep 0.25
done
expect "--hosts --stats: LU, counters of every daemon after" 0 \
	timeout -k 5 60 $bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" --stats -- \
	"$build/splash2/lu" -n128 -b16 -t
expect_output "--hosts --stats: the run passed" "TEST PASSED"
expect_output "--hosts --stats: the counters of all 3 daemons" \
	"what the run did, summed over the 3 daemons that answered (of 3"
expect_output "--hosts --stats: barriers counted" "barriers  *[.]  *[1-9]"
# shellcheck disable=SC2086 # pids
kill $sdp 2>/dev/null
# shellcheck disable=SC2086
wait $sdp 2>/dev/null
expect "--hosts --stats with --start-daemons is refused" 2 \
	$bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/hosts" \
	--agent "$tmp/hosts/fake-ssh" --start-daemons --stats -- true
expect_output "--hosts --stats: the message says why" "daemons that outlive the run"
printf '%s\n' "r0 node0" "c0 node1" >"$tmp/hosts/short"
expect "--hosts: a cluster without a host is refused" 2 \
	$bin/lemuria-run -c "$hl" --hosts "$tmp/hosts/short" -- true
expect_output "--hosts: the message names it" "cluster c1 has no host"
expect "--stop-on-eof: a reflector whose stdin is a file says so" 1 \
	$bin/reflector -c "$hl" -n r0 --stop-on-eof </dev/null
expect_output "--stop-on-eof: the message names stdin" "cannot watch standard input"

# Five daemons, none running: each is asked at once, so the tool takes
# its timeout about once (asked in turn, status took 2 s each: 10 s).
mkdir "$tmp/none"
none=$(private_layout conf/8+8+8+8.ini "$tmp/none" 7)
for cmd in status stats ping; do
	t0=$(date +%s%N)
	$bin/lemuriactl -c "$none" -t 1 $cmd >"$tmp/out" 2>&1; st=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	downs=$(grep -c "down" "$tmp/out")
	if [ "$st" -eq 1 ] && [ "$downs" -eq 5 ] && [ "$ms" -lt 4000 ]; then
		ok "lemuriactl $cmd: five daemons down named in ${ms} ms"
	else
		fail "lemuriactl $cmd with five daemons down: status $st, $downs named, ${ms} ms"
		sed 's/^/       /' "$tmp/out"
	fi
done

# A test script stopped with TERM ends after the program it runs, with
# status 130 and its temporary directory gone; a trap that only cleaned
# up let run-order go on without its directory, failing every check left
# (tools/check-traps.sh, in lint-sh, looks at every script's traps).
# The build here is a stand-in whose lemuria-run sleeps 2 s.
mkdir -p "$tmp/stub/bin" "$tmp/stub/tests" "$tmp/stub/splash2"
printf '#!/bin/sh\nsleep 2\n' >"$tmp/stub/bin/lemuria-run"
chmod +x "$tmp/stub/bin/lemuria-run"
touch "$tmp/stub/tests/dsmtest" "$tmp/stub/splash2/publish" \
	"$tmp/stub/splash2/treewave" "$tmp/stub/splash2/spinflag"
ls -d /tmp/lm-order.* 2>/dev/null | sort >"$tmp/order-before"
sh tests/run-order.sh "$tmp/stub" 1 4+4 >"$tmp/order-out" 2>&1 &
order=$!
sleep 0.5
kill -TERM "$order"
i=0
while kill -0 "$order" 2>/dev/null && [ $i -lt 150 ]; do
	sleep 0.1
	i=$((i + 1))
done
if kill -0 "$order" 2>/dev/null; then
	kill -KILL "$order" 2>/dev/null
	fail "run-order stopped with TERM still runs 15 s later"
	sed 's/^/       /' "$tmp/order-out"
else
	wait "$order"
	st=$?
	ls -d /tmp/lm-order.* 2>/dev/null | sort >"$tmp/order-after"
	left=$(comm -13 "$tmp/order-before" "$tmp/order-after" | wc -l)
	ran=$(grep -c -E '^  (ok|FAIL) ' "$tmp/order-out")
	if [ "$st" -eq 130 ] && [ "$left" -eq 0 ] && [ "$ran" -eq 0 ]; then
		ok "run-order stopped with TERM: status 130, no check after it, no directory left"
	else
		fail "run-order stopped with TERM: status $st (130 wanted), $ran checks after it, $left directories left"
		sed 's/^/       /' "$tmp/order-out"
	fi
fi

echo "integration: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
