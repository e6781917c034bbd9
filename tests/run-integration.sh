#!/bin/sh
# Integration tests with real daemons on loopback: start a layout's daemons,
# ask them with lemuriactl, run a small DSM program on them and read the
# counters (lemuriactl stats, --json, lemuria-run --stats), stop one, check
# it is reported (status and stats), stop the rest
# with SIGTERM and check they exit cleanly; run one detached with a pidfile
# and a log file (SIGHUP reopens it, a second copy is refused, SIGTERM
# removes the pidfile, a stale pidfile is replaced); bad command lines and
# layouts are refused with status 2 and a message naming the cause.
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
trap cleanup EXIT INT TERM

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
until $bin/lemuriactl -c "$tmp/layout.ini" -t 500 status >"$tmp/out" 2>&1; do
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
	$bin/lemuria-run -c "$tmp/layout.ini" --timeout 50 -- "$build/tests/dsmtest" counter 20
expect "lemuriactl stats: every daemon answers" 0 $bin/lemuriactl -c "$tmp/layout.ini" stats
expect_output "stats has a block per daemon" "^lemuriad c0 (127.0.0.1:[0-9]*): up "
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
if json_check "$tmp/before.json" "all(x['counters']['client']['msgs_received'] < y['counters']['client']['msgs_received'] for x, y in zip($lemuriads, [x for x in json.load(open('$tmp/after.json'))['daemons'] if x['role'] == 'lemuriad']))"; then
	ok "stats: the run raised the client-level counts"
else
	fail "stats: counts did not grow over the run"; sed 's/^/       /' "$tmp/before.json"
fi
expect "lemuria-run --stats on the running daemons" 0 timeout -k 5 60 \
	$bin/lemuria-run -c "$tmp/layout.ini" --timeout 50 --stats -- "$build/tests/dsmtest" counter 20
expect_output "lemuria-run --stats prints the total" "^lemuria-run: total of the 3 daemons that answered (of 3)"
# The total's columns: client, cluster, root, -.
if awk '/^lemuria-run: total/{ t = 1; next } /^lemuria-run: [a-z]/{ t = 0 }
	t && $2 == "msgs_received" && $3 > 0 && $4 > 0 { n++ } END { exit n == 1 ? 0 : 1 }' "$tmp/out"; then
	ok "lemuria-run --stats: client and cluster totals > 0"
else
	fail "lemuria-run --stats: no per-level totals"; sed 's/^/       /' "$tmp/out"
fi
expect_output "lemuria-run --stats lists each daemon" "^lemuria-run: lemuriad c1 (127.0.0.1:[0-9]*): up "

victim=$(echo "$names" | awk -F: '$1 == "cluster" { print $2; exit }')
eval "vpid=\$pid_$(echo "$victim" | tr -c 'a-zA-Z0-9\n' _)"
kill -TERM "$vpid"
wait "$vpid"; st=$?
pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$vpid" | tr '\n' ' ')
if [ "$st" -eq 0 ]; then ok "lemuriad exits 0 on SIGTERM"; else fail "lemuriad exit status $st on SIGTERM"; fi
expect "status fails when a daemon is down" 1 $bin/lemuriactl -c "$tmp/layout.ini" -t 300 status
expect_output "status names the daemon that is down" "$victim .*down"
expect "stats fails when a daemon is down" 1 $bin/lemuriactl -c "$tmp/layout.ini" -t 300 stats
expect_output "stats names the daemon that is down" "^lemuriad $victim (127.0.0.1:[0-9]*): down ("
expect_output "stats still shows the others" "^reflector r0 (127.0.0.1:[0-9]*): up "
expect "stats --json fails when a daemon is down" 1 $bin/lemuriactl -c "$tmp/layout.ini" -t 300 stats --json
if json_check "$tmp/out" "[x['up'] for x in d['daemons'] if x['name'] == '$victim'] == [False] and sum(x['up'] for x in d['daemons']) == 2"; then
	ok "stats --json marks only $victim down"
else
	fail "stats --json: $victim not marked down"; sed 's/^/       /' "$tmp/out"
fi

# A restarted daemon serves again (new session, same node id).
"$bin/lemuriad" -c "$tmp/layout.ini" -n "$victim" -l warn 2>>"$tmp/$victim.log" &
pids="$pids $!"
i=0
until $bin/lemuriactl -c "$tmp/layout.ini" -t 500 status >"$tmp/out" 2>&1; do
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
expect "--json only after stats" 2 $bin/lemuriactl -c "$tmp/layout.ini" status --json

echo "integration: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
