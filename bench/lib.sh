# shellcheck shell=sh disable=SC2154 # caller, root, limit and me are the caller's
# Shell helpers shared by the benchmark drivers bench/splash.sh,
# bench/hierarchy.sh, bench/targets.sh, bench/micro.sh and bench/pairs.sh
# (sourced, not run).  layout_file uses the caller's $caller (its starting
# directory) and $root (the top of the tree); timed sets $child, which the
# callers' interrupt traps stop; why and report_failure use $limit
# (seconds per run).  A caller may define a function of the same name
# after sourcing this file to replace one.

# no_operands ARGS...: what getopts left; a usage error (status 2, naming
# the first and printing the caller's usage) unless there is none.
no_operands() {
	[ $# -eq 0 ] && return 0
	echo "$me: unexpected argument '$1'" >&2
	usage >&2
	exit 2
}

is_count() { # a positive decimal integer
	case $1 in '' | *[!0-9]* | 0*) return 1 ;; esac
	return 0
}

# Paths given on the command line are relative to the caller's directory;
# everything else is relative to the top of the tree.
absolute() {
	case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}

# results_dir ROOT: where a driver writes its results unless told (-o,
# -O): $LEMURIA_BENCH_RESULTS (relative to ROOT unless absolute), else
# ROOT/build/bench-results.  The results kept in the tree, bench/results,
# change only when asked: LEMURIA_BENCH_RESULTS=bench/results, or
# make bench BENCH_RESULTS=bench/results (issue 42).
results_dir() {
	case ${LEMURIA_BENCH_RESULTS:-} in
	"") echo "$1/build/bench-results" ;;
	/*) echo "$LEMURIA_BENCH_RESULTS" ;;
	*) echo "$1/$LEMURIA_BENCH_RESULTS" ;;
	esac
}

# eta DONE TOTAL START: "D of T, about N min left" from the time since
# START (date +%s) and the share done, for drivers that run for long.
eta() {
	awk -v d="$1" -v t="$2" -v s="$3" -v now="$(date +%s)" 'BEGIN {
		left = d > 0 ? (now - s) / d * (t - d) : 0
		if (left >= 90) w = sprintf("about %.0f min left", left / 60)
		else w = sprintf("about %.0f s left", left)
		printf "%d of %d, %s", d, t, w }'
}

# layout_file NAME: conf/NAME.ini, or NAME itself when it is a path.
layout_file() {
	case $1 in
	*.ini | */*) case $1 in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac ;;
	*) echo "$root/conf/$1.ini" ;;
	esac
}
layout_label() {
	b=${1##*/}
	echo "${b%.ini}"
}

# layout_size FILE: prints "PROCESSES CLUSTERS REFLECTORS", read from the
# layout's [cluster NAME] sections and their clients keys and its
# [reflector NAME] sections (docs/layout.md syntax: ';'/'#' comment lines,
# ' ;' trailing comments, '=' or ':', CRLF); fails when there is no
# cluster with clients.
layout_size() {
	awk '
		{ sub(/\r$/, "") }
		/^[ \t]*[;#]/ { next }
		/^[ \t]*\[/ {
			in_cluster = ($0 ~ /^[ \t]*\[cluster[ \t]/)
			if (in_cluster) clusters++
			if ($0 ~ /^[ \t]*\[reflector[ \t]/) reflectors++
			next
		}
		in_cluster && /^[ \t]*clients[ \t]*[=:]/ {
			v = $0
			sub(/^[^=:]*[=:][ \t]*/, "", v)
			sub(/[ \t]+;.*$/, "", v)
			sub(/[ \t]+$/, "", v)
			if (v !~ /^[0-9]+$/) { bad = 1; exit }
			procs += v
		}
		END {
			if (bad || clusters == 0 || procs == 0) exit 1
			print procs, clusters, reflectors + 0
		}' "$1"
}

# check_layouts REFLECTORS: complains (the caller's complain) of each of
# $layouts that is missing, has no [cluster] section with clients or, when
# REFLECTORS is 1, no [reflector]; and of labels that cannot be CSV keys
# (a ',' or '"', or twice the same).
check_layouts() {
	for l in $layouts; do
		f=$(layout_file "$l")
		if [ ! -r "$f" ]; then
			complain "layout '$l': $f not found"
		elif ! layout_size "$f" |
			awk -v r="$1" '{ ok = !r || $3 > 0 } END { exit !ok }'; then
			if [ "$1" = 1 ]; then
				complain "layout '$l': $f lacks [cluster] sections with clients or a [reflector]"
			else
				complain "layout '$l': $f has no [cluster] section with clients"
			fi
		fi
	done
	seen=" "
	for l in $layouts; do
		b=$(layout_label "$l")
		case $b in
		*,* | *\"*) complain "layout '$l': a name with ',' or '\"'" ;;
		esac
		case $seen in *" $b "*) complain "layout '$l': a second layout named '$b'" ;; esac
		seen="$seen$b "
	done
}

# timed LIMIT LOG COMMAND...: runs COMMAND with its output in LOG, killed
# after LIMIT seconds; returns its status (124 when it timed out).  It runs
# in the background and is waited for, so that ^C or SIGTERM reaches the
# script at once.
timed() {
	lim=$1; log=$2; shift 2
	timeout -k 5 "$lim" "$@" >"$log" 2>&1 </dev/null &
	child=$!
	wait "$child"
	st=$?
	child=""
	return $st
}

# seconds LOG: a SPLASH-2 program's "Total time without initialization" in
# seconds, or nothing.
seconds() {
	awk -F: '/Total time without initialization/ {
		us = $2 + 0; found = 1; exit }
		END { if (found) printf "%.6f\n", us / 1e6 }' "$1"
}

# why STATUS LOG CHECKED: one line, without commas (it may be a CSV field),
# saying how a failed run ended; CHECKED is 1 when the run was given -t and
# must print TEST PASSED.
why() {
	case $1 in
	0) ;;
	124) echo "timed out after $limit s"; return ;;
	127) echo "could not be executed (status 127)"; return ;;
	*) echo "exit status $1"; return ;;
	esac
	if grep -q "TEST FAILED" "$2"; then
		echo "TEST FAILED"
	elif [ "$3" = 1 ] && ! grep -q "TEST PASSED" "$2"; then
		echo "no TEST PASSED in the output"
	else
		echo "no 'Total time without initialization' in the output"
	fi
}

# passed STATUS LOG TIME CHECKED: whether a run counts (see why).
passed() {
	[ "$1" -eq 0 ] && [ -n "$3" ] && ! grep -q "TEST FAILED" "$2" &&
		{ [ "$4" != 1 ] || grep -q "TEST PASSED" "$2"; }
}

# run_tail LOG: the last lines of a run's output before the counters that
# lemuria-run --all-stats prints after it.
run_tail() {
	awk '/^lemuria-run: counters of the run/ { exit } { print }' "$1" |
		tail -n 8
}

# report_failure WHAT STATUS LOG CHECKED: names the failed run and shows
# the end of its output.
report_failure() {
	echo "    $1: FAILED ($(why "$2" "$3" "$4"))" >&2
	run_tail "$3" | sed 's/^/      | /' >&2
}

# stats VALUES...: prints "MEDIAN MIN MAX", or nothing without values.
stats() {
	[ $# -gt 0 ] || return 0
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END {
			if (NR % 2) m = v[(NR + 1) / 2]
			else m = (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.6f %.6f %.6f\n", m, v[1], v[NR]
		}'
}

# Traffic per level from lemuria-run --all-stats.  traffic_keys lists counters
# as COUNTER@LEVEL of the totals block; traffic_cols names them as CSV
# columns, in the same order.  In the total every message sent at level
# cluster or root is received by a daemon too, so "sent" counts each once,
# both directions together; at level client only the lemuriads count, so
# bytes_sent is what they sent down to clients and bytes_received what the
# clients sent up (their diffs).  A caller may set other lists before
# calling traffic (bench/hierarchy.sh adds delta bytes and PULLs).
traffic_keys="msgs_sent@client bytes_sent@client bytes_received@client"
traffic_keys="$traffic_keys msgs_sent@cluster bytes_sent@cluster"
traffic_keys="$traffic_keys msgs_sent@root bytes_sent@root"
traffic_cols=client_msgs_sent,client_bytes_sent,client_bytes_received
traffic_cols=$traffic_cols,cluster_msgs_sent,cluster_bytes_sent
traffic_cols=$traffic_cols,root_msgs_sent,root_bytes_sent

# traffic LOG: prints, comma-separated, the value of each of $traffic_keys
# in the "total of the N daemons that answered (of M)" block of LOG, then N
# and M; a field is empty where the block or the counter is missing.
traffic() {
	awk -v keys="$traffic_keys" '
		BEGIN { nk = split(keys, key, " ") }
		/^lemuria-run: total of the / {
			answered = $5; total = $NF; sub(/\)$/, "", total)
			block = 1; header = 0; next
		}
		block && !header {
			for (i = 3; i <= NF; i++) column[$i] = i
			header = 1; next
		}
		block && /^lemuria-run:   [a-z]/ {
			for (lvl in column) {
				v = $(column[lvl])
				if (v ~ /^[0-9]+$/) value[$2 "@" lvl] = v
			}
			next
		}
		block { block = 0 }
		END {
			for (i = 1; i <= nk; i++)
				printf "%s,", (key[i] in value) ? value[key[i]] : ""
			printf "%s,%s\n", answered, total
		}' "$1"
}

# bare_rtt CSV BYTES MODE: the median round trip (us) of MODE (bare_udp,
# bare_udp_one_cpu) at BYTES in build/bench/transport's CSV; nothing when
# the row is missing.
bare_rtt() {
	awk -F, -v b="$2" -v m="$3" '
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$col["payload_bytes"] == b && $col["mode"] == m {
			print $col["median_us"]; exit
		}' "$1" 2>/dev/null
}

# sample_start SAMPLER FILE SECONDS: starts build/bench/cpuidle (SAMPLER,
# when it is there) writing into FILE for at most SECONDS, its pid in
# $sampler_pid; sample_stop ends it (both from the same shell).
sample_start() {
	sampler_pid=""
	[ -x "$1" ] || return 0
	"$1" -t "$3" >"$2" 2>/dev/null &
	sampler_pid=$!
}
sample_stop() {
	[ -n "${sampler_pid:-}" ] || return 0
	kill "$sampler_pid" 2>/dev/null
	wait "$sampler_pid" 2>/dev/null
	sampler_pid=""
}

# idle_share SAMPLES LOG: the share of the CPUs' time spent idle, in
# percent, over a SPLASH-2 program's timed part (its "Initialization
# finish time" to its "Overall finish time" in LOG), from the lines of
# build/bench/cpuidle in SAMPLES; nothing when LOG has no timed part, or
# fewer than two samples or 40 ticks fall in it: a tick is 10 ms of one
# CPU, so below 40 (0.2 s of two CPUs) one tick more or less moves the
# share by 2.5 points or more.
idle_share() {
	awk '
		FNR == NR && /Initialization finish time/ { from = $5 }
		FNR == NR && /Overall finish time/ { to = $5 }
		FNR == NR { next }
		from != "" && to != "" && $1 >= from + 0 && $1 <= to + 0 {
			if (!n++) { i0 = $2; b0 = $3 }
			i1 = $2; b1 = $3
		}
		END {
			t = (i1 - i0) + (b1 - b0)
			if (n >= 2 && t >= 40)
				printf "%.1f\n", 100 * (i1 - i0) / t
		}' "$2" "$1" 2>/dev/null
}

# need_gnuplot WHO: fails, saying what to install, when gnuplot is missing
# (it is optional and not among tools/install-deps.sh's packages).
need_gnuplot() {
	command -v gnuplot >/dev/null 2>&1 && return 0
	echo "$1: gnuplot not found: plots need the Debian package gnuplot-nox" \
		"(apt-get install gnuplot-nox), which tools/install-deps.sh does" \
		"not install; the CSVs and tables do not need it" >&2
	return 1
}
