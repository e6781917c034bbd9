#!/bin/sh
# The main job at this stage of the project: start every daemon of a layout
# on this host, show their status and round-trip times through the
# transport, and stop them.
#   tools/demo.sh LAYOUT
set -u
layout=${1:-conf/4+4.ini}
bin=${BUILD:-build}/bin
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null; done' EXIT INT TERM

for entry in $(awk '/^\[(reflector|cluster) /{ gsub(/[\[\]]/, ""); print $1 ":" $2 }' "$layout"); do
	role=${entry%%:*}; name=${entry#*:}
	prog=$bin/lemuriad; [ "$role" = reflector ] && prog=$bin/reflector
	"$prog" -c "$layout" -n "$name" &
	pids="$pids $!"
done
i=0
until "$bin/lemuriactl" -c "$layout" -t 500 status >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -ge 10 ]; then
		echo "demo: the daemons of $layout did not come up" >&2
		"$bin/lemuriactl" -c "$layout" status
		exit 1
	fi
	sleep 0.5
done
echo "== lemuriactl status"
"$bin/lemuriactl" -c "$layout" status
echo "== lemuriactl ping (median of 200 round trips, microseconds)"
"$bin/lemuriactl" -c "$layout" -n 200 ping
st=$?
for p in $pids; do kill -TERM "$p"; done
for p in $pids; do wait "$p"; done
pids=""
exit $st
