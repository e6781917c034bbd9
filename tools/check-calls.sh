#!/bin/sh
# Fails when files of one part of the tree call each other, in a circle of
# two or more: every folder's files must call downward only (docs/testing.md,
# "Layering").  Reads the symbols of the built objects with nm, so it sees
# what the linker sees: file A calls file B when A has an undefined symbol
# that B defines.
#
#   tools/check-calls.sh BUILD_DIR DIR...     (e.g. build reflector)
#
# Run from the top of the tree: an object whose DIR/NAME.c is gone is
# skipped.  Exits 1 naming each circle's files and symbols, else prints
# one OK line per DIR.
set -eu

if [ $# -lt 2 ]; then
	echo "usage: $0 BUILD_DIR DIR..." >&2
	exit 2
fi
build=$1
shift

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up

status=0
for dir in "$@"; do
	set -- "$build/$dir"/*.o
	if [ ! -e "$1" ]; then
		echo "check-calls: no objects in $build/$dir: build first" >&2
		status=1
		continue
	fi
	: >"$tmp/syms"
	n=0
	for o in "$@"; do
		f=$(basename "$o" .o)
		# an object left from a source since removed is not the tree's
		if [ -d "$dir" ] && [ ! -e "$dir/$f.c" ]; then
			continue
		fi
		n=$((n + 1))
		# "defined NAME FILE" and "undefined NAME FILE", one a line
		nm -g --defined-only "$o" |
			awk -v f="$f" 'NF >= 3 { print "def", $3, f }' \
			>>"$tmp/syms"
		nm -u "$o" | awk -v f="$f" 'NF >= 2 { print "use", $2, f }' \
			>>"$tmp/syms"
	done
	# Edges caller -> callee with the names that tie them, then the
	# circles: files that reach each other (transitive closure; a folder
	# has tens of files at most).
	if ! awk -v dir="$dir" -v nfiles="$n" '
	$1 == "def" { owner[$2] = $3; next }
	$1 == "use" { use[++nuse] = $2; user[nuse] = $3; next }
	END {
		for (i = 1; i <= nuse; i++) {
			s = use[i]
			if (!(s in owner) || owner[s] == user[i])
				continue
			a = user[i]; b = owner[s]
			if (!((a, b) in names)) {
				names[a, b] = s
				node[a] = node[b] = 1
				reach[a, b] = 1
			} else {
				names[a, b] = names[a, b] ", " s
			}
		}
		for (k in node)
			for (i in node)
				if ((i, k) in reach)
					for (j in node)
						if ((k, j) in reach)
							reach[i, j] = 1
		bad = 0
		for (a in node) {
			if (a in done || !((a, a) in reach))
				continue
			# a lies on a circle: the files that reach a and that
			# a reaches form it
			members = ""
			for (b in node)
				if (b == a || (((a, b) in reach) &&
				    ((b, a) in reach))) {
					done[b] = 1
					members = members " " b
				}
			bad++
			printf "check-calls: %s: files call each other:%s\n",
			    dir, members
			n = split(substr(members, 2), m, " ")
			for (i = 1; i <= n; i++)
				for (j = 1; j <= n; j++)
					if ((m[i], m[j]) in names)
						printf "  %s.o -> %s.o: %s\n",
						    m[i], m[j],
						    names[m[i], m[j]]
		}
		if (bad)
			exit 1
		printf "check-calls: %s: %d object files, %s\n", dir,
		    nfiles, "no two call each other"
	}' "$tmp/syms"; then
		status=1
	fi
done
exit "$status"
