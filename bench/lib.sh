# Shell helpers shared by the benchmark drivers bench/splash.sh and
# bench/hierarchy.sh (sourced, not run).  layout_file uses the caller's
# $caller (its starting directory) and $root (the top of the tree); timed
# sets $child, which the callers' interrupt traps stop.

is_count() { # a positive decimal integer
	case $1 in '' | *[!0-9]* | 0*) return 1 ;; esac
	return 0
}

# Paths given on the command line are relative to the caller's directory;
# everything else is relative to the top of the tree.
absolute() {
	case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
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
