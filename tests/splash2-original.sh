#!/bin/sh
# Builds original SPLASH-2 sources, unmodified, with our PARMACS macro files
# and runs them both ways: as threads (splash2/macros/pthread.m4) and as the
# processes of a Lemuria run (splash2/macros/lemuria.m4 on a private copy of
# conf/4+4.ini).  The sources are Stanford's and may not be redistributed,
# so they are not in the tree: give a directory that holds them.
#   tests/splash2-original.sh [DIR]      (or SPLASH2_ORIG=DIR)
# DIR holds lu.C (kernels/lu/non_contiguous_blocks) and/or fft.C
# (kernels/fft), either flat or as the distribution tree (DIR/codes/...).
# Without such a directory it prints "skipped: ..." and exits 0.  Needs
# `make all` first.  SPLASH2_MACRO_DIR overrides splash2/macros (to check
# that a broken macro file makes this script fail).  docs/splash2.md,
# "Building an original SPLASH-2 source", has the steps by hand.
set -u
orig=${1:-${SPLASH2_ORIG:-}}
macros=${SPLASH2_MACRO_DIR:-splash2/macros}
build=${BUILD:-build}
failures=0
checks=0

if [ -z "$orig" ] || [ ! -d "$orig" ]; then
	echo "skipped: no directory with original SPLASH-2 sources" \
		"(give one as argument or in SPLASH2_ORIG)"
	exit 0
fi
# Paths below are relative to the top of the tree.
orig=$(cd "$orig" && pwd)
[ -d "$macros" ] && macros=$(cd "$macros" && pwd)
cd "$(dirname "$0")/.." || exit 2

# find NAME SUBDIR: the path of NAME flat in $orig or in the tree.
find_src() {
	for d in "$orig" "$orig/$2" "$orig/codes/$2" "$orig/splash2/codes/$2"; do
		if [ -f "$d/$1" ]; then echo "$d/$1"; return 0; fi
	done
	return 1
}
lu_src=$(find_src lu.C kernels/lu/non_contiguous_blocks) || lu_src=""
fft_src=$(find_src fft.C kernels/fft) || fft_src=""
if [ -z "$lu_src$fft_src" ]; then
	echo "skipped: no lu.C or fft.C under $orig"
	exit 0
fi

. tests/lib.sh
need_built splash2-original "$build/bin/lemuria-run" "$build/lib/liblemuria.so"
command -v m4 >/dev/null || { echo "splash2-original: m4 not found" >&2; exit 2; }

tmp=$(mktemp -d /tmp/lm-splash2-orig.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up

ok() { checks=$((checks + 1)); echo "  ok   $1"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "  FAIL $1"; }

# run_check DESCRIPTION LOG COMMAND...: the command must exit 0 and print
# TEST PASSED and the timing line of the original programs.
run_check() {
	desc=$1; log=$2; shift 2
	"$@" >"$log" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && grep -q '^TEST PASSED' "$log" &&
		grep -q 'Total time without initialization' "$log"; then
		ok "$desc ($(awk -F: '/without init/ { print $2 + 0 }' "$log") us)"
	else
		fail "$desc (status $rc)"
		tail -n 15 "$log" | sed 's/^/       /'
	fi
}

# compile NAME SRC MACRO_FILE OUT [CC_FLAGS...]: m4 + cc, as the original
# makefiles do it (m4 -s -Ulen -Uindex; K&R C, hence gnu89 and -w).
compile() {
	name=$1; src=$2; mfile=$3; out=$4; shift 4
	if ! m4 -s -Ulen -Uindex "$macros/$mfile" "$src" >"$out.c" 2>"$out.log"; then
		fail "$name: m4 with $mfile"; sed 's/^/       /' "$out.log"; return 1
	fi
	if ! cc -std=gnu89 -O2 -w "$@" >>"$out.log" 2>&1; then
		fail "$name: compile with $mfile"; tail -n 15 "$out.log" | sed 's/^/       /'
		return 1
	fi
	ok "$name: built with $mfile"
}

libdir=$(cd "$build/lib" && pwd)
build_pt() { # NAME SRC OUT [extra cc flags]
	n=$1; s=$2; o=$3; shift 3
	compile "$n" "$s" pthread.m4 "$o" "$@" "$o.c" -o "$o" -lpthread -lm
}
build_lm() { # NAME SRC OUT
	compile "$1" "$2" lemuria.m4 "$3" -Iliblemuria "$3.c" -o "$3" \
		-L"$libdir" -llemuria -Wl,-rpath,"$libdir" -lpthread -lm
}

layout=$(private_layout conf/4+4.ini "$tmp")
# The original FFT keeps its shared pointers in 32-bit unsigned ints: the
# shared region must lie below 4 GiB.
sed 's/^base = .*/base = 0x40000000/' "$layout" >"$tmp/low.ini"
lemuria() { # LAYOUT PROGRAM ARGS...; lm_timeout bounds the run (s)
	l=$1; shift
	timeout $((${lm_timeout:-120} + 30)) "$build/bin/lemuria-run" -c "$l" \
		--start-daemons --timeout "${lm_timeout:-120}" -- "$@"
}

# The original LU prints TEST PASSED when its solution is NaN (it tests
# fabs(diff) > 1e-5), so its factors are also compared with those of a
# one-thread run.  The update order of each block does not depend on the
# number of processes, so the printed factors (-o) must be identical.
lu_small="-n200 -b16 -o"
lu_factors() { # OUTPUT_FILE: the matrix printed after the decomposition
	awk '/^Matrix after decomposition:/ { f = 1; next }
		/PROCESS STATISTICS/ { f = 0 } f && NF' "$1"
}
lu_compare() { # DESCRIPTION PROCS COMMAND...: run with $lu_small -pPROCS
	desc=$1; procs=$2; shift 2
	"$@" $lu_small -p"$procs" >"$tmp/lu-cmp.out" 2>&1
	lu_factors "$tmp/lu-cmp.out" >"$tmp/lu-cmp.mat"
	if [ -f "$tmp/lu-ref.mat" ] && cmp -s "$tmp/lu-ref.mat" "$tmp/lu-cmp.mat"; then
		ok "$desc $lu_small -p$procs: factors identical to one thread"
	else
		fail "$desc $lu_small -p$procs: factors differ from one thread"
		diff "$tmp/lu-ref.mat" "$tmp/lu-cmp.mat" | head -n 4 | sed 's/^/       /'
	fi
}

if [ -n "$lu_src" ]; then
	echo "splash2-original: $lu_src"
	if build_pt "LU" "$lu_src" "$tmp/LU-pthread"; then
		run_check "LU pthreads -n512 -p4 -t" "$tmp/lu-pt.out" \
			timeout 120 "$tmp/LU-pthread" -n512 -p4 -t
		timeout 60 "$tmp/LU-pthread" $lu_small -p1 >"$tmp/lu-ref.out" 2>&1
		lu_factors "$tmp/lu-ref.out" >"$tmp/lu-ref.mat"
		if [ -s "$tmp/lu-ref.mat" ] && ! grep -qi nan "$tmp/lu-ref.mat"; then
			ok "LU pthreads -p1 reference factors ($(wc -l <"$tmp/lu-ref.mat") rows)"
			lu_compare "LU pthreads" 4 timeout 60 "$tmp/LU-pthread"
		else
			fail "LU pthreads -p1 reference factors"
			tail -n 5 "$tmp/lu-ref.out" | sed 's/^/       /'
		fi
	fi
	if build_lm "LU" "$lu_src" "$tmp/LU"; then
		run_check "LU Lemuria 4+4 -n512 -p8 -t" "$tmp/lu-lm.out" \
			lemuria "$layout" "$tmp/LU" -n512 -p8 -t
		lu_compare "LU Lemuria 4+4" 8 lemuria "$layout" "$tmp/LU"
		# -p must be the run's size; a mismatch must end the run at
		# once with a message, not hang.
		lm_timeout=20
		lemuria "$layout" "$tmp/LU" -n64 -p4 >"$tmp/lu-bad.out" 2>&1
		rc=$?
		lm_timeout=120
		if [ $rc -ne 0 ] &&
			grep -q 'barrier for 4 processes, but the run has 8' "$tmp/lu-bad.out"; then
			ok "LU Lemuria -p4 on 8 processes fails with a message"
		else
			fail "LU Lemuria -p4 on 8 processes (status $rc)"
			tail -n 5 "$tmp/lu-bad.out" | sed 's/^/       /'
		fi
	fi
fi

if [ -n "$fft_src" ]; then
	echo "splash2-original: $fft_src"
	# Non-PIE and a large mmap threshold keep malloc below 4 GiB.
	if build_pt "FFT" "$fft_src" "$tmp/FFT-pthread" -no-pie; then
		run_check "FFT pthreads -m16 -p4 -t" "$tmp/fft-pt.out" \
			env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432 \
			timeout 120 "$tmp/FFT-pthread" -m16 -p4 -t
	fi
	if build_lm "FFT" "$fft_src" "$tmp/FFT"; then
		run_check "FFT Lemuria 4+4 (base 0x40000000) -m16 -p8 -t" \
			"$tmp/fft-lm.out" lemuria "$tmp/low.ini" "$tmp/FFT" -m16 -p8 -t
	fi
fi

echo "splash2-original: $checks checks, $failures failed"
[ $failures -eq 0 ]
