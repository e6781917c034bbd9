#!/bin/sh
# The benchmarks' own tools, which their figures rest on: build/bench/cpuidle
# samples the CPUs' idle and busy ticks and stops when told or at its
# bound, refusing bad options; bench/lib.sh's idle_share keeps the share
# of idle ticks inside a SPLASH-2 program's timed part, and gives nothing
# without one or when too few ticks fall in it; bench/targets.sh makes its
# table, LU on one process with three times the runs of the others;
# bench/floors.sh applies bench/oracle.patch to a copy and runs its stages.
#   tests/run-bench.sh BUILD_DIR
set -u
build=${1:-build}
tmp=$(mktemp -d /tmp/lm-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up
failures=0
checks=0
. tests/lib.sh
# shellcheck disable=SC1091 # found at run time, as in bench/pairs.sh
. bench/lib.sh

echo "bench: cpuidle"
sampler=$build/bench/cpuidle
start=$(date +%s)
timeout 10 "$sampler" -i 20 -t 1 >"$tmp/samples" 2>"$tmp/err"
st=$?
secs=$(($(date +%s) - start))
# at least two lines of three numbers, the clock and both counts never
# going back
ok=$(awk 'NF != 3 || $1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/ ||
		$3 !~ /^[0-9]+$/ { bad = 1 }
	NR > 1 && ($1 <= t || $2 < i || $3 < b) { bad = 1 }
	{ t = $1; i = $2; b = $3 }
	END { if (!bad && NR >= 2) print "y" }' "$tmp/samples")
check "$([ $st -eq 0 ] && [ $secs -le 3 ] && echo "$ok")" \
	"-t 1 stops by itself (status $st, ${secs} s, $(wc -l <"$tmp/samples") samples)"

"$sampler" -i 10 >"$tmp/samples" 2>&1 &
pid=$!
sleep 0.3
kill "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 20 ]; do
	i=$((i + 1)); sleep 0.1
done
wait "$pid"
st=$?
check "$([ $st -eq 0 ] && [ -s "$tmp/samples" ] && echo y)" \
	"SIGTERM ends it with status 0 (status $st)"

for bad in "-i 0" "-i x" "-t 0" "-t 99999999999" "extra"; do
	# shellcheck disable=SC2086 # the options, split on purpose
	timeout 5 "$sampler" $bad >/dev/null 2>"$tmp/err"
	st=$?
	opt=${bad%% *}
	named=$(case $bad in -*) grep -q -- "$opt wants a number" "$tmp/err" &&
		echo y ;; *) grep -q "usage" "$tmp/err" && echo y ;; esac)
	check "$([ $st -eq 2 ] && echo "$named")" \
		"'$bad' refused with status 2 and a message ($(head -1 "$tmp/err"))"
done

echo "bench: idle_share"
cat >"$tmp/log" <<'EOF'
Initialization finish time        :           1000 us (0.001000 s)
Overall finish time               :           5000 us (0.005000 s)
EOF
# ticks: 20 idle and 80 busy inside [1000, 5000]; the samples outside
# (much idler) must not count
cat >"$tmp/samples" <<'EOF'
500 0 0
1000 100 50
3000 110 90
5000 120 130
6000 900 130
EOF
# share_is SAMPLES LOG WANT TEXT: idle_share gives WANT ("" for nothing)
share_is() {
	share=$(idle_share "$1" "$2")
	check "$([ "$share" = "$3" ] && echo y)" "$4: ${share:-nothing}"
}
share_is "$tmp/samples" "$tmp/log" 20.0 \
	"20 idle ticks of 100 in the timed part give 20.0 %"
echo "no timing here" >"$tmp/log2"
share_is "$tmp/samples" "$tmp/log2" "" "a log without a timed part gives nothing"
printf '1000 100 50\n' >"$tmp/one"
share_is "$tmp/one" "$tmp/log" "" "one sample in the timed part gives nothing"
printf '1000 100 50\n5000 110 79\n' >"$tmp/short"
share_is "$tmp/short" "$tmp/log" "" "39 ticks in the timed part give nothing"
printf '1000 100 50\n5000 110 80\n' >"$tmp/short"
share_is "$tmp/short" "$tmp/log" 25.0 \
	"40 ticks in the timed part give 25.0 %"

echo "bench: targets.sh, quick"
# The issue-40 table from tiny runs: every row there with a ratio, and LU
# on one process taken three times as often as the other layouts (its
# short runs come in two speeds on these hosts)
tq=$tmp/targets
timeout 600 sh bench/targets.sh -q -B "$build" -O "$tq" >"$tmp/tq.log" 2>&1
st=$?
rows=$(grep -c -E '^\| .* \| (yes|no|no data) \|$' "$tq/targets.md" 2>/dev/null)
ratios=$(grep -E '^\| .* \| (yes|no|no data) \|$' "$tq/targets.md" 2>/dev/null | grep -c -E '[0-9.]+× \|')
check "$([ $st -eq 0 ] && [ "$rows" = 8 ] && [ "$ratios" = 8 ] && echo y)" \
	"the table has its 8 targets, each with a ratio (status $st, rows ${rows:-0}, ratios ${ratios:-0})"
# FFT, Radix and Ocean beside their pthreads runs, each with a ratio and
# the bytes between the clusters: the programs LU does not stand for
reported=$(grep -c -E '^\| (fft|radix|ocean) -.* on 4\+4 vs [a-z]+-pthread -p8 \| [0-9.e-]+ s .* \| [0-9.]+× \| [0-9.e-]+ MB ' "$tq/targets.md" 2>/dev/null)
check "$([ "$reported" = 3 ] && echo y)" \
	"FFT, Radix and Ocean are reported on 4+4 with ratios and bytes (${reported:-0} of 3)"
# the copy = client row ran that mode: its lemuriads sent each client
# pages and updates (bytes at level client), which one copy per cluster
# leaves near zero
# client_bytes CSV: the bytes the lemuriads sent at level client in the
# first Lemuria run on 4+4
client_bytes() {
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		$c["build"] == "lemuria" && $c["layout"] == "4+4" {
			print $c["client_bytes_sent"] + 0 }' "$1" 2>/dev/null |
		head -n 1
}
cl=$(client_bytes "$tq/lu-client-runs.csv")
cc=$(client_bytes "$tq/lu-runs.csv")
check "$([ -n "$cl" ] && [ -n "$cc" ] && [ "$cl" -gt $((cc * 4)) ] && echo y)" \
	"the copy = client row's clients carry their own copies (client bytes ${cl:-?} against ${cc:-?} with one copy per cluster)"
# runs_passed CSV LAYOUT BUILD: how many runs of BUILD on LAYOUT passed (not
# bench/lib.sh's passed, which judges one run)
runs_passed() {
	awk -F, -v l="$2" -v b="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		$c["layout"] == l && $c["build"] == b && $c["status"] == "passed" { n++ }
		END { print n + 0 }' "$1" 2>/dev/null
}
one=$(runs_passed "$tq/lu1-runs.csv" 1 lemuria)/$(runs_passed "$tq/lu1-runs.csv" 1 pthread)
other=$(runs_passed "$tq/lu-runs.csv" 4+4 lemuria)/$(runs_passed "$tq/lu-runs.csv" 4+4 pthread)
check "$([ "$one" = 3/3 ] && [ "$other" = 1/1 ] && echo y)" \
	"-r 1 runs LU on one process 3 times a build ($one), on 4+4 once ($other)"

echo "bench: floors.sh, quick"
# The oracle stages from tiny runs, in each copy mode: bench/oracle.patch
# still applies and builds, each stage gives a time and a ratio, and each
# oracle takes effect (the program's answer is then wrong) while the full
# run (and under copy = cluster, the run on one cluster) passes
for m in client cluster; do
	fq=$tmp/floors-$m
	timeout 600 sh bench/floors.sh -q -m $m -O "$fq" >"$tmp/fq-$m.log" 2>&1
	st=$?
	rows=$(grep -c -E '^\| [a-z]+ \| [0-9.]+ s .* \| [0-9.]+× \|' "$fq/floors.md" 2>/dev/null)
	check "$([ $st -eq 0 ] && [ "$rows" = 5 ] && echo y)" \
		"-m $m: the table has pthreads and the 4 stages, each with a ratio (status $st, rows ${rows:-0})"
	tests=$(awk -F, 'NR > 1 && $5 == "" { printf "%s%s=%s", sep, $2, $4; sep = " " }' \
		"$fq/floors-runs.csv" 2>/dev/null)
	case $m in
	client) want="pthreads=- skeleton=failed compare=failed send=failed full=passed" ;;
	cluster) want="pthreads=- one=passed skeleton=failed compare=failed full=passed" ;;
	esac
	check "$([ "$tests" = "$want" ] && echo y)" \
		"-m $m: the oracles' answers fail their test, the others pass ($tests)"
	grep -q "copy = $m" "$fq/floors.md" 2>/dev/null
	check "$([ $? -eq 0 ] && echo y)" "-m $m: the table names its copy mode"
done
# A patch that no longer applies is said so, before anything is built:
# a copy of the tree whose client.c changed a line the patch replaces
mkdir "$tmp/rot"
tar --exclude=./build --exclude=./.git --exclude=./bench/results -cf - . |
	tar -C "$tmp/rot" -xf -
sed -i 's/int rc = lm_region_flush(&diffs/int rc = lm_region_flush(\&(diffs)/' \
	"$tmp/rot/liblemuria/client.c"
timeout 60 sh "$tmp/rot/bench/floors.sh" -q -O "$tmp/rotq" >"$tmp/rot.log" 2>&1
st=$?
check "$(grep -q 'lm_region_flush(&(diffs)' "$tmp/rot/liblemuria/client.c" &&
	[ $st -eq 1 ] && grep -q 'oracle.patch no longer applies' "$tmp/rot.log" &&
	! grep -q building "$tmp/rot.log" && echo y)" \
	"a patch that does not apply to the code stops the script with status 1 (status $st)"
timeout 10 sh bench/floors.sh -p fft >"$tmp/usage.log" 2>&1
st=$?
check "$([ $st -eq 2 ] && grep -q "'fft': the oracles are measured on lu and lucontig only" "$tmp/usage.log" && echo y)" \
	"-p fft is refused with status 2 and the reason (status $st)"
timeout 10 sh bench/floors.sh -m shared >"$tmp/usage.log" 2>&1
st=$?
check "$([ $st -eq 2 ] && grep -q "'shared': the copy modes are cluster and client" "$tmp/usage.log" && echo y)" \
	"-m shared is refused with status 2 and the reason (status $st)"
# three reflectors with two clients each: conf/6.ini does not exist
timeout 10 sh bench/floors.sh -l 3-reflectors >"$tmp/usage.log" 2>&1
st=$?
check "$([ $st -eq 2 ] && grep -q "no one-cluster layout conf/6.ini" "$tmp/usage.log" && echo y)" \
	"-m cluster on a layout with no one-cluster twin is refused with status 2 (status $st)"

echo "bench: $checks checks, $failures failed"
[ $failures -eq 0 ]
