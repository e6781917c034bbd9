#!/bin/sh
# Real hosts, simulated: the reflector and each cluster (its lemuriad and
# its clients) run in network namespaces of their own, with their own
# addresses on a bridge, so that nothing depends on loopback.  Each
# cluster's ranks are started by their own lemuria-run (--cluster, one
# --run id), as on separate hosts; then the whole run again from one
# command (--hosts, with `ip netns exec` as the launch agent where ssh
# would be), as docs/operations.md "Every host from one command" walks
# through.  The namespaces are created here and removed at the end; where
# `ip netns` is not permitted the test is skipped with a message.
#   tests/run-netns.sh BUILD_DIR
set -u
build=${1:-build}
bin=$build/bin
tmp=$(mktemp -d /tmp/lm-netns.XXXXXX)
tag=$$
hub=lm-hub-$tag
spaces="lm-r-$tag lm-c0-$tag lm-c1-$tag"
failures=0
checks=0
pids=""

cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	for ns in $spaces $hub; do ip netns del "$ns" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # cleanup runs as the script exits

if ! ip netns add "$hub" 2>"$tmp/err"; then
	echo "netns: SKIPPED: cannot create network namespaces here ($(cat "$tmp/err"))"
	exit 0
fi
echo "netns: reflector and two clusters in namespaces of their own"
ip -n "$hub" link add br0 type bridge
ip -n "$hub" link set br0 up
n=0
for ns in $spaces; do
	n=$((n + 1))
	ip netns add "$ns"
	ip -n "$hub" link add "v$n" type veth peer name eth0 netns "$ns"
	ip -n "$hub" link set "v$n" master br0 up
	ip -n "$ns" addr add "10.231.0.$n/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
done

# The layout: every daemon at its namespace's address.
cp conf/demo.key "$tmp/demo.key"
cat >"$tmp/layout.ini" <<EOF
[lemuria]
shared_size = 64M
page_size = 4096
base = 0x500000000000
secret_file = demo.key
[reflector r0]
listen = 10.231.0.1:7600
[cluster c0]
reflector = r0
listen = 10.231.0.2:7610
clients = 2
[cluster c1]
reflector = r0
listen = 10.231.0.3:7611
clients = 2
EOF
lay=$tmp/layout.ini

ip netns exec "lm-r-$tag" "$bin/reflector" -c "$lay" -n r0 -l warn \
	2>>"$tmp/daemons.log" &
pids="$pids $!"
ip netns exec "lm-c0-$tag" "$bin/lemuriad" -c "$lay" -n c0 -l warn \
	2>>"$tmp/daemons.log" &
pids="$pids $!"
ip netns exec "lm-c1-$tag" "$bin/lemuriad" -c "$lay" -n c1 -l warn \
	2>>"$tmp/daemons.log" &
pids="$pids $!"

# lemuriactl runs in the reflector's namespace: the others are reachable
# over the bridge only.
i=0
until ip netns exec "lm-r-$tag" "$bin/lemuriactl" -c "$lay" -t 0.5 status \
	>"$tmp/status" 2>&1; do
	i=$((i + 1)); [ $i -ge 20 ] && break; sleep 0.5
done
checks=$((checks + 1))
if [ "$(grep -c ' up ' "$tmp/status")" -eq 3 ]; then
	echo "  ok   every daemon answers across namespaces"
else
	failures=$((failures + 1))
	echo "  FAIL daemons not all up across namespaces"
	sed 's/^/       /' "$tmp/status" "$tmp/daemons.log"
fi

# One run over both "hosts": each cluster's ranks by its own lemuria-run.
# run_both NAME PATTERN COUNT PROGRAM ARGS...: both exit 0 and PATTERN
# appears COUNT times in their output.
run_both() {
	name=$1; pattern=$2; count=$3; shift 3
	checks=$((checks + 1))
	# an id of its own for every run: two runs begun within a second
	# once had one, and the daemons took them for one run
	run=$(( $(date +%s%N) / 1000 ))
	for c in c0 c1; do
		timeout -k 5 120 ip netns exec "lm-$c-$tag" "$bin/lemuria-run" \
			-c "$lay" --cluster "$c" --run "$run" --timeout 110 -- \
			"$@" >"$tmp/out-$c" 2>&1 &
		eval "rp_$c=\$!"
	done
	# shellcheck disable=SC2154 # set by the eval above
	wait "$rp_c0"; s0=$?
	# shellcheck disable=SC2154
	wait "$rp_c1"; s1=$?
	if [ $s0 -eq 0 ] && [ $s1 -eq 0 ] &&
	   [ "$(cat "$tmp/out-c0" "$tmp/out-c1" | grep -c -- "$pattern")" -eq "$count" ]; then
		echo "  ok   $name"
	else
		failures=$((failures + 1))
		echo "  FAIL $name (status $s0 and $s1)"
		tail -n 15 "$tmp/out-c0" "$tmp/out-c1" | sed 's/^/       /'
	fi
}
run_both "LU n=256 over two namespaces" "TEST PASSED" 1 \
	"$build/splash2/lu" -n256 -b16 -t
run_both "race-free stress over two namespaces" "PASSED" 4 \
	"$build/tests/dsmtest" stress 4 8 21

# Every host from one command: another layout (its own ports, the first
# run's daemons still up), a host file naming each daemon's namespace,
# the launcher in the reflector's (it must reach the reflector to see it
# up, as on the first host of a real run).
sed 's/:76/:77/' "$lay" >"$tmp/hosts-layout.ini"
printf '%s\n' "# NAME HOST: here, the namespace that ip netns exec enters" \
	"r0 lm-r-$tag" "c0 lm-c0-$tag" "c1 lm-c1-$tag" >"$tmp/hosts"
one_command() {
	name=$1; want_status=$2; pattern=$3; count=$4; shift 4
	checks=$((checks + 1))
	timeout -k 5 120 ip netns exec "lm-r-$tag" "$bin/lemuria-run" \
		-c "$tmp/hosts-layout.ini" --hosts "$tmp/hosts" \
		--agent "ip netns exec" --start-daemons --timeout 100 -- \
		"$@" >"$tmp/one" 2>&1
	st=$?
	if [ "$st" -eq "$want_status" ] &&
	   [ "$(grep -c -- "$pattern" "$tmp/one")" -eq "$count" ] &&
	   ! pgrep -f "$tmp/hosts-layout.ini" >/dev/null; then
		echo "  ok   $name"
	else
		failures=$((failures + 1))
		echo "  FAIL $name (status $st, want $want_status)"
		tail -n 15 "$tmp/one" | sed 's/^/       /'
		pgrep -fa "$tmp/hosts-layout.ini" | sed 's/^/       left: /'
	fi
}
one_command "LU n=256 on every namespace from one command" 0 \
	"TEST PASSED" 1 "$build/splash2/lu" -n256 -b16 -t
one_command "rank 0 reads pages after their writers' namespace is done" 0 \
	"lastread: PASSED" 1 "$build/tests/dsmtest" lastread 1000
# rank 3 (c1's second) fails: the run ends with its status, nothing left
# (the other ranks would sleep on); the words reach the ranks as given
printf '%s\n' 'test "$LM_RANK" != 3 || exit 3' 'sleep 20' >"$tmp/rank3.sh"
one_command "a failing rank on another host ends the one-command run" 3 \
	"cluster c1 on lm-c1-$tag exited with status 3" 1 \
	sh -c '. "$0"' "$tmp/rank3.sh"

echo "netns: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
