#!/bin/sh
# Every shell script that traps INT or TERM must end there: a handler
# that only cleans up (`trap 'rm -rf "$tmp"' EXIT INT TERM`) returns, and
# the script goes on without its temporary directory, failing every check
# left (a run-order stopped with TERM reported six false failures so).
# A trap on INT, TERM or HUP may be '' (ignored), - (the default: the
# signal ends the script), 'exit N', or a function of the same file that
# calls exit; the cleanup belongs to the EXIT trap, which exit runs.
#   tools/check-traps.sh FILE...
# Prints each offending trap as FILE:LINE and exits 1; 0 when none.
# (A grep, not a shell parser: a trap is one line, its action the first
# word or quoted string after `trap`.)
set -u
bad=0
for f in "$@"; do
	found=$(awk -v file="$f" '
	# the functions of the file whose body calls exit
	/^[A-Za-z_][A-Za-z_0-9]*\(\) *\{/ {
		name = $1; sub(/\(\).*/, "", name); infn = name
		if ($0 ~ /[^A-Za-z_]exit([ ;]|$)/) exits[name] = 1
		if ($0 ~ /\}[ ;]*$/) infn = ""
		next
	}
	infn != "" {
		if ($0 ~ /(^|[^A-Za-z_])exit([ ;]|$)/) exits[infn] = 1
		if ($0 ~ /^\}/) infn = ""
	}
	/^[ \t]*trap / && / (INT|TERM|HUP)( |$)/ {
		line = $0; sub(/^[ \t]*trap /, "", line)
		if (line ~ /^'\'''\''/ || line ~ /^- /) next  # ignored, default
		if (line ~ /^'\''exit [0-9]+'\''/) next        # ends
		if (line ~ /^'\''/) { bad[NR] = $0; next }     # anything else quoted
		act = line; sub(/ .*/, "", act)
		calls[NR] = act; text[NR] = $0
	}
	END {
		for (n in bad)
			printf "%s:%d: %s\n", file, n, bad[n]
		for (n in calls)
			if (!(calls[n] in exits))
				printf "%s:%d: %s (%s does not exit)\n", file, n,
				    text[n], calls[n]
	}' "$f") || {
		echo "check-traps: $f cannot be read"
		bad=1
		continue
	}
	if [ -n "$found" ]; then
		printf '%s\n' "$found" |
			sed 's/^/check-traps: a trap that does not end the script: /'
		bad=1
	fi
done
exit $bad
