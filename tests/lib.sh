# shellcheck shell=sh disable=SC2154 # bin and tmp are the caller's
# Shell helpers shared by the integration scripts (sourced, not run).

# need_built WHO FILE...: exits 2, saying so, at the first FILE (a
# program or library of the build) that is not there.
need_built() {
	who=$1
	shift
	for f in "$@"; do
		if [ ! -e "$f" ]; then
			echo "$who: $f is missing: run make all first" >&2
			exit 2
		fi
	done
}

# need_layouts WHO LAYOUT...: exits 2, saying so, at the first LAYOUT
# with no conf/LAYOUT.ini (before any run, not after some).
need_layouts() {
	who=$1
	shift
	for l in "$@"; do
		if [ ! -f "conf/$l.ini" ]; then
			echo "$who: no layout conf/$l.ini" >&2
			exit 2
		fi
	done
}

# need_count WHO NAME VALUE: exits 2 unless VALUE is a whole number > 0.
need_count() {
	case $3 in
	''|*[!0-9]*|0)
		echo "$1: $2 must be a whole number > 0" >&2
		exit 2 ;;
	esac
}

# private_layout SRC DST_DIR: copies layout SRC into DST_DIR with its ports
# moved to a range of its own (so that a stray daemon of another run cannot
# answer for ours) and the secret file beside it.  Prints the new path.
# The ranges stay below 32768, where Linux starts handing out ephemeral
# ports: a client's socket once took a lemuriad's port ("Address already
# in use").
private_layout() {
	src=$1; dir=$2
	base=$((20000 + ($$ * 7 + ${3:-0} * 600) % 11000))
	out="$dir/$(basename "$src")"
	sed -e "s/127\.0\.0\.1:1\([0-9]\)\([0-9][0-9][0-9]\)/127.0.0.1:PORT\2/" "$src" |
		awk -v base="$base" '{ while (match($0, /PORT[0-9][0-9][0-9]/)) {
			p = base + substr($0, RSTART + 4, 3);
			$0 = substr($0, 1, RSTART - 1) p substr($0, RSTART + RLENGTH) }
			print }' >"$out"
	cp "$(dirname "$src")/demo.key" "$dir/demo.key"
	# LM_TEST_COPY=cluster|client: every layout of the script in that
	# mode (docs/layout.md, copy)
	if [ -n "${LM_TEST_COPY:-}" ]; then
		sed -i "/^\[lemuria\]/a copy = $LM_TEST_COPY" "$out"
	fi
	echo "$out"
}

# set_copy LAYOUT MODE: `copy = MODE` for every cluster of LAYOUT, for a
# check of what one mode alone does (the FLUSHes of copy = client, say).
set_copy() {
	sed -i "/^copy = /d; /^\[lemuria\]/a copy = $2" "$1"
}

# one_page_faults LAYOUT: sets `prefetch = 0` in LAYOUT, so that each read
# fault of bench/micro is one page's round trip: its faults step through
# the pages one by one, a stride that would bring the next ones along.
one_page_faults() {
	sed -i '/^\[lemuria\]/a prefetch = 0' "$1"
}

# check OK TEXT: one check, counted into the caller's $checks and
# $failures, passed when OK is y.
check() {
	checks=$((checks + 1))
	if [ "$1" = y ]; then
		echo "  ok   $2"
	else
		failures=$((failures + 1))
		echo "  FAIL $2"
	fi
}

# run_expect NAME LAYOUT TIMEOUT PATTERN PROGRAM ARGS...: runs PROGRAM on
# LAYOUT with its daemons (lemuria-run, at most TIMEOUT seconds); passes
# when the run exits 0 and its output matches PATTERN.  Uses the caller's
# $bin and $tmp (the run's output goes to $tmp/out) and counts into its
# $checks and $failures.  LM_FAULTS and the like pass through the
# environment.
run_expect() {
	name=$1; layout=$2; limit=$3; pattern=$4; shift 4
	checks=$((checks + 1))
	start=$(date +%s)
	timeout -k 5 "$limit" "$bin/lemuria-run" -c "$layout" --start-daemons \
		--timeout "$limit" -- "$@" >"$tmp/out" 2>&1
	st=$?
	secs=$(( $(date +%s) - start ))
	# a daemon that logs an error (a lost delta, say) fails the run even
	# when the program's own check passed: results may be wrong where
	# the program did not look
	if [ -z "${LM_DAEMON_ERRORS_OK:-}" ] &&
	   grep -q -E '^[rc][0-9]+: error: ' "$tmp/out"; then
		st=99
		grep -E '^[rc][0-9]+: error: ' "$tmp/out" | head -n 3 |
			sed 's/^/       daemon error: /'
	fi
	if [ $st -eq 0 ] && grep -q -- "$pattern" "$tmp/out"; then
		echo "  ok   $name (${secs}s)"
	else
		failures=$((failures + 1))
		echo "  FAIL $name (status $st, ${secs}s)"
		tail -n 25 "$tmp/out" | sed 's/^/       /'
	fi
}

# fails_within LIMIT DESC LAYOUT PATTERN... -- PROGRAM ARGS: the run, with
# its own daemons, must fail within LIMIT seconds with a line of each
# PATTERN (grep) in its output: a wait that can never end, named at once
# (issue 42).  Uses the caller's $bin and $tmp and counts into its
# $checks and $failures; LM_FAULTS and the like pass through the
# environment.
fails_within() {
	flimit=$1; desc=$2; flay=$3; shift 3
	pats=""
	while [ "$1" != -- ]; do pats="$pats
$1"; shift; done
	shift
	checks=$((checks + 1))
	start=$(date +%s)
	timeout -k 5 60 "$bin/lemuria-run" -c "$flay" --start-daemons \
		--timeout 40 -- "$@" >"$tmp/out" 2>&1
	st=$?
	secs=$(( $(date +%s) - start ))
	missing=$(echo "$pats" | while read -r p; do
		[ -z "$p" ] || grep -q "$p" "$tmp/out" || echo "$p"; done)
	if [ $st -ne 0 ] && [ "$secs" -le "$flimit" ] && [ -z "$missing" ]; then
		echo "  ok   $desc (${secs}s)"
	else
		failures=$((failures + 1))
		echo "  FAIL $desc (status $st, ${secs}s${missing:+; no \"$missing\"})"
		tail -n 20 "$tmp/out" | sed 's/^/       /'
	fi
}
