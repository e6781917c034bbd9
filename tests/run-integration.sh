#!/bin/sh
# Integration tests with real daemons on loopback: start a layout's daemons,
# ask them with lemuriactl, stop one, check it is reported, stop the rest
# with SIGTERM and check they exit cleanly; bad command lines and layouts
# are refused with status 2 and a message naming the cause.
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
expect "lemuriactl ping: 50 round trips each" 0 $bin/lemuriactl -c "$tmp/layout.ini" -n 50 ping

victim=$(echo "$names" | awk -F: '$1 == "cluster" { print $2; exit }')
eval "vpid=\$pid_$(echo "$victim" | tr -c 'a-zA-Z0-9\n' _)"
kill -TERM "$vpid"
wait "$vpid"; st=$?
pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$vpid" | tr '\n' ' ')
if [ "$st" -eq 0 ]; then ok "lemuriad exits 0 on SIGTERM"; else fail "lemuriad exit status $st on SIGTERM"; fi
expect "status fails when a daemon is down" 1 $bin/lemuriactl -c "$tmp/layout.ini" -t 300 status
expect_output "status names the daemon that is down" "$victim .*down"

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

echo "integration: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
