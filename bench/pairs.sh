#!/bin/sh
# Alternating pairs: one program on one layout, run by two builds (or one
# build in two environments) taking turns, so that the load of this
# shared machine falls on both alike.  Prints each pair's times, CPU (of
# the whole run: daemons, launcher and ranks) and the share of the two
# CPUs' time left idle during the timed part (build/bench/cpuidle; "-"
# without it), and the paired medians of the differences, B - A, with
# how many pairs B was lower in.  This is how docs/performance.md
# measures a change ("What moved LU").
#
#   bench/pairs.sh [-n PAIRS] [-l LAYOUT] [-L LAYOUT_B] [-A BUILD_A]
#                  [-B BUILD_B] [-e "VAR=VALUE ..."] [-E "VAR=VALUE ..."]
#                  [-p PROGRAM] [-a "ARGS"] [-T SECONDS]
#
#   -A, -B  build directories (default: build at the top of the tree for
#           both); -e, -E: environment for A's and B's runs only (compare
#           LEMURIA_POPULATE=0 against the default with one build, say);
#           -L: a layout for B's runs (default -l's: 4+4), to compare a
#           layout setting
#   -p      program under the build's splash2/ (default lu), -a its
#           arguments without -p and -t (default "-n1024 -b16")
# Exit status: 0 when every run passed, 1 when one failed, 2 on a usage
# error.

# ARGS and the environments split into words on purpose; lib.sh is found
# at run time.
# shellcheck disable=SC2086,SC1091
set -u

me=bench/pairs.sh
top=$(cd "$(dirname "$0")/.." && pwd)
pairs=6
layout=4+4
layout_b=""
build_a=$top/build
build_b=$top/build
env_a=""
env_b=""
prog=lu
args="-n1024 -b16"
limit=300

usage() {
	sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts n:l:L:A:B:e:E:p:a:T:h opt; do
	case $opt in
	n) pairs=$OPTARG ;;
	l) layout=$OPTARG ;;
	L) layout_b=$OPTARG ;;
	A) build_a=$OPTARG ;;
	B) build_b=$OPTARG ;;
	e) env_a=$OPTARG ;;
	E) env_b=$OPTARG ;;
	p) prog=$OPTARG ;;
	a) args=$OPTARG ;;
	T) limit=$OPTARG ;;
	*) usage ;;
	esac
done
case $pairs in '' | *[!0-9]* | 0) echo "$me: -n wants a count, not '$pairs'" >&2; exit 2 ;; esac
case $limit in '' | *[!0-9]* | 0) echo "$me: -T wants seconds, not '$limit'" >&2; exit 2 ;; esac
# layout_path NAME: conf/NAME.ini, or NAME when it is a path
layout_path() {
	case $1 in
	*/*) echo "$1" ;;
	*) echo "$top/conf/$1.ini" ;;
	esac
}
conf=$(layout_path "$layout")
conf_b=$(layout_path "${layout_b:-$layout}")
for c in "$conf" "$conf_b"; do
	[ -r "$c" ] || { echo "$me: no layout $c" >&2; exit 2; }
done
for b in "$build_a" "$build_b"; do
	if [ ! -x "$b/bin/lemuria-run" ] || [ ! -x "$b/splash2/$prog" ]; then
		echo "$me: $b lacks bin/lemuria-run or splash2/$prog (make)" >&2
		exit 2
	fi
done

out=$(mktemp -d "${TMPDIR:-/tmp}/lemuria-pairs.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up
. "$top/tests/lib.sh" # private_layout
. "$top/bench/lib.sh"  # sample_start, sample_stop, idle_share
sampler=""
sampler_pid=""
for s in "$build_a" "$build_b" "$top/build"; do
	[ -x "$s/bench/cpuidle" ] && { sampler=$s/bench/cpuidle; break; }
done
# ports of its own, so that a run beside it cannot answer for its daemons
mkdir "$out/a" "$out/b" || exit 1
conf=$(private_layout "$conf" "$out/a") || exit 1
conf_b=$(private_layout "$conf_b" "$out/b" 1) || exit 1

# cpu_mark, then cpu_read: seconds of CPU of the children this shell has
# waited for, from the second line of `times` ("1m2.5s 0m0.25s" in dash
# and bash alike) kept in a file: in a command substitution, `times` would
# speak for a subshell
cpu_mark() { times >"$out/times"; }
cpu_read() {
	awk 'NR == 2 {
		for (i = 1; i <= 2; i++) {
			split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2]
		}
		print s }' "$out/times"
}

# run BUILD ENV LAYOUT: prints "TIME CPU IDLE" (seconds, seconds, percent
# or "-") or "fail"
run() {
	log=$out/log
	sample_start "$sampler" "$out/idle" "$limit"
	sampled=$sampler_pid
	cpu_mark; cpu0=$(cpu_read)
	# shellcheck disable=SC2046
	env $2 timeout "$limit" "$1/bin/lemuria-run" -c "$3" --pin --batch \
		--start-daemons -- "$1/splash2/$prog" $args -t >"$log" 2>&1
	rc=$?
	sample_stop
	cpu_mark; cpu1=$(cpu_read)
	idle=$([ -n "$sampled" ] && idle_share "$out/idle" "$log")
	t=$(sed -n 's/.*Total time without initialization *: *\([0-9]*\) us.*/\1/p' "$log")
	if [ $rc -ne 0 ] || [ -z "$t" ]; then
		echo fail
		tail -5 "$log" >&2
		return
	fi
	awk -v t="$t" -v c0="$cpu0" -v c1="$cpu1" -v i="${idle:--}" \
		'BEGIN { printf "%.3f %.2f %s\n", t / 1e6, c1 - c0, i }'
}

failed=0
printf 'pair  A time  B time  A CPU  B CPU  A idle  B idle\n'
i=0
while [ $i -lt "$pairs" ]; do
	i=$((i + 1))
	# who goes first alternates too
	if [ $((i % 2)) -eq 1 ]; then
		a=$(run "$build_a" "$env_a" "$conf"); b=$(run "$build_b" "$env_b" "$conf_b")
	else
		b=$(run "$build_b" "$env_b" "$conf_b"); a=$(run "$build_a" "$env_a" "$conf")
	fi
	if [ "$a" = fail ] || [ "$b" = fail ]; then
		failed=1
		echo "$i: A $a, B $b"
		continue
	fi
	echo "$i $a $b" | awk 'function pct(x) { return x == "-" ? x : x "%" }
		{ printf "%4d  %6.3f  %6.3f  %5.2f  %5.2f  %6s  %6s\n", $1, $2, $5, $3, $6, pct($4), pct($7) }'
	echo "$a $b" >>"$out/pairs"
done
[ -s "$out/pairs" ] || exit 1
awk '
function median(v, n,    i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
			t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
		}
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{ n++; ta[n] = $1; ca[n] = $2; tb[n] = $4; cb[n] = $5
  dt[n] = $4 - $1; dc[n] = $5 - $2; lt += ($4 < $1); lc += ($5 < $2)
  if ($3 != "-" && $6 != "-") {
	m++; ia[m] = $3; ib[m] = $6; di[m] = $6 - $3; li += ($6 < $3)
  } }
END {
	printf "medians: A %.3f s (CPU %.2f s), B %.3f s (CPU %.2f s)\n",
		median(ta, n), median(ca, n), median(tb, n), median(cb, n)
	printf "paired B - A: time %+.3f s (B lower in %d of %d), CPU %+.2f s (%d of %d)\n",
		median(dt, n), lt, n, median(dc, n), lc, n
	if (m)
		printf "idle in the timed part: A %.1f %%, B %.1f %%, paired B - A %+.1f points (B lower in %d of %d)\n",
			median(ia, m), median(ib, m), median(di, m), li, m
}' "$out/pairs"
exit $failed
