#!/bin/sh
# Resident memory of a run, per cluster, under copy = cluster and copy =
# client taking turns (issue 40 asks for the lemuriads' and the clients'
# memory per cluster).  Each run is a program under lemuria-run
# --start-daemons on a private copy of the layout; while it runs, the
# /proc status of its reflectors, lemuriads and ranks (found by the
# private layout's path in their command line or environment) is read
# every 50 ms.  Per process the peak resident set (VmHWM) and the largest
# anonymous and shared resident parts seen (RssAnon, RssShmem: the
# cluster copy is shared memory, counted in every client that touched
# it, so the table gives it once per cluster, as the largest client's).
#
#   bench/resident.sh [-n RUNS] [-l LAYOUT] [-p PROGRAM] [-a "ARGS"]
#                     [-B BUILD]
#
#   -n  runs per mode (default 3); -l layout under conf/ (default 4+4);
#   -p  program under BUILD/splash2 (default lu), -a its arguments
#       (default "-n1024 -b16")
# Prints one line per run, mode and cluster (MB), then per mode and
# cluster the medians with min and max over the runs.  Exit status: 0
# when every run passed, 1 when one failed, 2 on a usage error.

# ARGS split into words on purpose.
# shellcheck disable=SC2086
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
runs=3
layout=4+4
prog=lu
args="-n1024 -b16"
build=$top/build

usage() {
	sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts n:l:p:a:B:h opt; do
	case $opt in
	n) runs=$OPTARG ;;
	l) layout=$OPTARG ;;
	p) prog=$OPTARG ;;
	a) args=$OPTARG ;;
	B) build=$OPTARG ;;
	*) usage ;;
	esac
done
case $runs in ''|*[!0-9]*|0) usage ;; esac
[ -f "$top/conf/$layout.ini" ] || { echo "resident: no conf/$layout.ini" >&2; exit 2; }
[ -x "$build/splash2/$prog" ] || { echo "resident: no $build/splash2/$prog (make first)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/lemuria-resident.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up

# A private layout: our own ports and key, the copy mode given.
make_layout() { # mode -> path
	d=$tmp/$1
	mkdir -p "$d"
	awk -v mode="$1" -v key="$top/conf/demo.key" '
		/^copy *=/ { next }
		/^secret_file *=/ { print "secret_file = " key; next }
		{ print }
		/^\[lemuria\]/ { print "copy = " mode }' \
		"$top/conf/$layout.ini" > "$d/layout.ini"
	echo "$d/layout.ini"
}

# Cluster of each rank: the layout's clusters in order, `clients` each.
cluster_of_rank() { # layout rank
	awk -v r="$2" '
		/^\[cluster / { name = $2; sub(/\]$/, "", name) }
		/^clients *=/ { split($0, kv, "="); n = kv[2] + 0
				if (r < seen + n && !done) { print name; done = 1 }
				seen += n }' "$1"
}

# One run: samples into $tmp/samples (pid role name hwm anon shmem).
one_run() { # layout
	lay=$1
	: > "$tmp/samples"
	: > "$tmp/daemons"
	"$build/bin/lemuria-run" -c "$lay" --start-daemons --timeout 300 -- \
		"$build/splash2/$prog" $args > "$tmp/out" 2>&1 &
	runner=$!
	while kill -0 "$runner" 2>/dev/null; do
		# one ps finds them (a rank by its environment, which ps e
		# appends), one cat reads their status: few forks, so that a
		# run of a second or two is sampled many times
		ps e -eo pid=,args= 2>/dev/null | awk -v lay="$lay" '
			{ s = $0 " " }
			index(s, " LM_LAYOUT=" lay " ") &&
			match(s, / LM_RANK=[0-9]+ /) {
				print $1, "rank" substr(s, RSTART + 9, RLENGTH - 10)
				next
			}
			$2 ~ /\/(lemuriad|reflector)$/ && index(s, " -c " lay " ") {
				for (i = 3; i < NF; i++)
					if ($i == "-n")
						print $1, $(i + 1)
			}' >> "$tmp/daemons"
		sort -u -o "$tmp/daemons" "$tmp/daemons"
		# shellcheck disable=SC2046,SC2002 # one path per process; cat
		# reads past a process gone meanwhile, where mawk would stop
		cat $(awk '{ printf "/proc/%s/status ", $1 }' "$tmp/daemons") \
			2>/dev/null | awk -v list="$tmp/daemons" '
			BEGIN { while ((getline l < list) > 0) {
					split(l, f, " "); name[f[1]] = f[2] } }
			/^Pid:/ { p = $2 } /^VmHWM:/ { h[p] = $2 }
			/^RssAnon:/ { a[p] = $2 } /^RssShmem:/ { sh[p] = $2 }
			END { for (q in h) if (q in name)
				print q, name[q], h[q], a[q] + 0, sh[q] + 0 }' \
			>> "$tmp/samples"
		sleep 0.05
	done
	wait "$runner"
	rc=$?
	rm -f "$tmp/daemons"
	return $rc
}

# Per cluster (and the reflectors): lemuriad peak, clients' peaks summed,
# their anonymous part summed, the shared part once (largest client).
summarise() { # layout mode run
	while read -r _ name _ _ _; do
		case $name in
		rank*) echo "$name $(cluster_of_rank "$1" "${name#rank}")" ;;
		esac
	done < "$tmp/samples" | sort -u > "$tmp/ranks"
	awk -v mode="$2" -v run="$3" '
		FNR == NR { cl[$1] = $2; next }
		{ k = $1 " " $2
		  if ($3 > hwm[k]) hwm[k] = $3; if ($4 > anon[k]) anon[k] = $4
		  if ($5 > shm[k]) shm[k] = $5; name[k] = $2 }
		END {
			for (k in hwm) {
				n = name[k]
				if (n ~ /^rank/) {
					c = cl[n]; ch[c] += hwm[k]; ca[c] += anon[k]
					if (shm[k] > cs[c]) cs[c] = shm[k]; nr[c]++
				} else {
					d[n] = hwm[k]
				}
			}
			for (n in d)
				if (!(n in ch))
					printf "%s %s %s daemon %.1f\n", run, mode, n, d[n] / 1024
			for (c in ch)
				printf "%s %s %s cluster %.1f %.1f %.1f %.1f %d\n", run, mode, c,
				       d[c] / 1024, ch[c] / 1024, ca[c] / 1024, cs[c] / 1024, nr[c]
		}' "$tmp/ranks" "$tmp/samples"
}

echo "resident: $prog $args on $layout, $runs runs per mode, MB"
echo "run mode cluster: lemuriad-peak clients-peak-sum clients-anon-sum copy-shared ranks"
status=0
: > "$tmp/all"
for k in $(seq 1 "$runs"); do
	for mode in cluster client; do
		lay=$(make_layout "$mode")
		if ! one_run "$lay"; then
			echo "resident: run $k ($mode) failed:" >&2
			tail -5 "$tmp/out" >&2
			status=1
			continue
		fi
		summarise "$lay" "$mode" "$k" | sort | tee -a "$tmp/all"
	done
done
echo "median (min-max) over the runs:"
awk '$4 == "cluster" { k = $2 " " $3
	for (i = 5; i <= 8; i++) v[k, i, ++n[k, i]] = $i }
     $4 == "daemon" { k = $2 " " $3; v[k, 5, ++n[k, 5]] = $5; dm[k] = 1 }
     END {
	for (kk in n) { split(kk, a, SUBSEP); keys[a[1]] = 1 }
	for (k in keys) {
		line = k ":"
		for (i = 5; i <= (k in dm ? 5 : 8); i++) {
			m = n[k, i]; delete s
			for (j = 1; j <= m; j++) s[j] = v[k, i, j]
			for (a1 = 1; a1 <= m; a1++) for (b = a1 + 1; b <= m; b++)
				if (s[b] < s[a1]) { t = s[a1]; s[a1] = s[b]; s[b] = t }
			line = line sprintf(" %.1f (%.1f-%.1f)", s[int((m + 1) / 2)], s[1], s[m])
		}
		print line
	}
     }' "$tmp/all" | sort
exit $status
