#!/bin/sh
# The whole SPLASH-2 suite, unmodified (issue 41): builds the 14 codes of
# the original distribution with our PARMACS macro files, as threads
# (splash2/macros/pthread.m4) and as the processes of a Lemuria run
# (splash2/macros/lemuria.m4), runs each with a small input both ways and
# judges the Lemuria run against the pthreads one.
#   tests/splash2-suite.sh [--layouts "4+4 3-reflectors ..."]
#                          [--codes "fft lu-ncb ..."] [DIR]
# DIR (or SPLASH2_ORIG) holds the distribution: github staceyson/splash2
# at 8427f5d, e.g. `git -C MIRROR archive 8427f5d | tar -x -C DIR`; DIR
# itself or DIR/codes has kernels/ and apps/.  Stanford's sources may not
# be redistributed: they are copied into a temporary directory and only
# that copy is patched, with the one compatibility set for a 1994 SGI
# source on x86-64 (splash2/compat/: splash2-x86_64.patch, tiffio.h, and
# CFLAGS below).  Nothing in the set works around the Lemuria runtime.
# Layouts are names under conf/ (default 4+4), each run on a private copy
# (tests/lib.sh); a code runs with as many processes as the layout has
# clients, and its pthreads reference with as many threads.  Needs `make
# all` first.  Without DIR it prints "skipped: ..." and exits 0; it exits
# 0 when every run passed (or was skipped for a reason given), 1
# otherwise.  SUITE_TIMEOUT bounds each run in seconds (default 600: a
# guard against hangs, near twice the slowest correct run measured,
# radiosity with 5 % loss on 4+4+4+4 at 324 s; docs/splash2.md);
# SPLASH2_MACRO_DIR overrides splash2/macros.  docs/splash2.md, "The
# whole suite", has the steps, the checks and the results.
set -u
layouts="4+4"
codes_sel=""
while [ $# -gt 0 ]; do
	case $1 in
	--layouts) layouts=$2; shift 2 ;;
	--layouts=*) layouts=${1#*=}; shift ;;
	--codes) codes_sel=$2; shift 2 ;;
	--codes=*) codes_sel=${1#*=}; shift ;;
	-h|--help) sed -n '2,26s/^# \{0,1\}//p' "$0"; exit 0 ;;
	--) shift; break ;;
	-*) echo "splash2-suite: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
orig=${1:-${SPLASH2_ORIG:-}}
limit=${SUITE_TIMEOUT:-600}
all_codes="cholesky fft lu-cb lu-ncb radix barnes fmm ocean-cp ocean-ncp
radiosity raytrace volrend water-nsquared water-spatial"
[ -n "$codes_sel" ] || codes_sel=$all_codes

if [ -z "$orig" ] || [ ! -d "$orig" ]; then
	echo "skipped: no directory with the original SPLASH-2 distribution" \
		"(give one as argument or in SPLASH2_ORIG)"
	exit 0
fi
orig=$(cd "$orig" && pwd)
if [ -d "$orig/codes/kernels" ]; then
	orig=$orig/codes
elif [ ! -d "$orig/kernels" ]; then
	echo "skipped: no kernels/ or codes/kernels/ under $orig"
	exit 0
fi
cd "$(dirname "$0")/.." || exit 2
top=$(pwd)
macros=$(cd "${SPLASH2_MACRO_DIR:-splash2/macros}" && pwd) || exit 2
build=$(cd "${BUILD:-build}" 2>/dev/null && pwd) || build=$top/build
compat=$top/splash2/compat
. tests/lib.sh
need_built splash2-suite "$build/bin/lemuria-run" "$build/lib/liblemuria.so"
for c in m4 cc patch gzip; do
	command -v $c >/dev/null ||
		{ echo "splash2-suite: $c not found" >&2; exit 2; }
done

tmp=$(mktemp -d /tmp/lm-splash2-suite.XXXXXX)
trap '[ -n "${SUITE_KEEP:-}" ] || rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The copy and the compatibility patch.
mkdir "$tmp/src"
cp -R "$orig" "$tmp/src/codes" || exit 2
if ! patch -s -p1 -d "$tmp/src" <"$compat/splash2-x86_64.patch" \
	>"$tmp/patch.log" 2>&1; then
	echo "splash2-suite: splash2/compat/splash2-x86_64.patch does not apply:"
	sed 's/^/       /' "$tmp/patch.log"
	exit 2
fi
copy=$tmp/src/codes

# Compiler flags of the compatibility set (docs/splash2.md):
#   -std=gnu89 -w   K&R definitions, implicit int and declarations
#   -fcommon        tentative definitions of the same global in several
#                   files (gcc 10 and later default to -fno-common)
#   -D_iobuf=_IO_FILE  raytrace's prototypes name SGI's FILE structure
#   -I$compat       <tiffio.h> for volrend (a PGM writer, see there)
CFLAGS_COMPAT="-std=gnu89 -O2 -w -fcommon -D_iobuf=_IO_FILE -I$compat"

# code_info NAME: sets dir (under codes/), files (the .C files, as the
# distribution's makefile lists them), cflags (extra, as that makefile
# has them) and extra (more C files).
code_info() {
	cflags=""; extra=""
	case $1 in
	cholesky) dir=kernels/cholesky
		files="amal assign bfac bksolve block2 fo mf numLL parts seg solve tree util malloc" ;;
	fft) dir=kernels/fft; files=fft ;;
	lu-cb) dir=kernels/lu/contiguous_blocks; files=lu ;;
	lu-ncb) dir=kernels/lu/non_contiguous_blocks; files=lu ;;
	radix) dir=kernels/radix; files=radix ;;
	barnes) dir=apps/barnes; files="code code_io load grav getparam util" ;;
	fmm) dir=apps/fmm
		files="defs memory particle box partition_grid cost_zones construct_grid interactions fmm"
		# It waits in empty loops for another processor's write
		# (interactions.C: while (b->interaction_synch !=
		# b->num_children);).  gcc -O1 and up loads both words
		# once and spins on registers, for threads too (a 1994
		# compiler reloaded them): -O0 keeps the loads.
		cflags="-O0" ;;
	ocean-cp) dir=apps/ocean/contiguous_partitions
		files="main jacobcalc jacobcalc2 laplacalc slave1 slave2 multi linkup subblock" ;;
	ocean-ncp) dir=apps/ocean/non_contiguous_partitions
		files="main jacobcalc laplacalc slave1 slave2 multi" ;;
	radiosity) dir=apps/radiosity
		files="rad_main patchman elemman taskman modelman smallobj display visible rad_tools room_model"
		cflags="-Iglibdumb -Iglibps"
		extra="glibdumb/glib.c glibps/glibps.c" ;;
	raytrace) dir=apps/raytrace
		files="bbox cr env fbuf geo huprn husetup hutv isect main matrix memory poly raystack shade sph trace tri workpool" ;;
	volrend|volrend-prep) dir=apps/volrend
		files="main file option map normal opacity octree view render adaptive raytrace"
		# The makefile has -DFLIP too: byte swapping for a
		# big-endian host; the .den files are little-endian.
		cflags="-DPRESHD" ;;
	water-nsquared|water-spatial) dir=apps/$1
		files="water mdmain syscons kineti bndry cnstnt initia interf intraf cshift poteng predcor" ;;
	*) return 1 ;;
	esac
}

# build NAME MACRO_FILE: $tmp/b/NAME.MACRO/PROG from a copy of the code's
# directory: every .H through m4 into .h (twice: radiosity's headers
# include() each other's outputs), every .C into .c, one cc.
build() {
	name=$1; mf=$2; b=$tmp/b/$name.$mf
	code_info "$name" || return 1
	rm -rf "$b"; mkdir -p "$tmp/b"; cp -R "$copy/$dir" "$b"
	if [ "$name" = volrend-prep ]; then
		# user_options.H is volrend's configuration: this build only
		# preprocesses the .den file into the .norm, .opc and .pyr
		# files the rendering builds read (README.volrend).
		sed -i -e '/^#if [01]$/{N; s/^#if 1\(\n#define RENDER_ONLY\)/#if 0\1/' \
			-e 's/^#if 0\(\n#define PREPROCESS\)/#if 1\1/}' "$b/user_options.H"
	fi
	(
		cd "$b" || exit 1
		for pass in 1 2; do
			for h in *.H; do
				[ -f "$h" ] || continue
				m4 -s -Ulen -Uindex "$macros/$mf.m4" "$h" >"${h%.H}.h" \
					2>"m4.$pass.log" || [ $pass = 1 ] || exit 1
			done
		done
		cs=""
		for f in $files; do
			m4 -s -Ulen -Uindex "$macros/$mf.m4" "$f.C" >"$f.c" || exit 1
			cs="$cs $f.c"
		done
		if [ "$mf" = pthread ]; then
			libs="-lpthread -lm"
		else
			libs="-I$top/liblemuria -L$build/lib -llemuria -Wl,-rpath,$build/lib -lm"
		fi
		# shellcheck disable=SC2086 # word lists on purpose
		nice -n 19 cc $CFLAGS_COMPAT $cflags $cs $extra -o PROG $libs
	) >"$b.log" 2>&1
}

# Inputs, made once from the copy: the smallest each code has.
inputs() {
	in=$tmp/in; mkdir -p "$in"
	gzip -dc "$copy/kernels/cholesky/inputs/lshp.O.Z" >"$in/lshp.O"
	gzip -dc "$copy/apps/raytrace/inputs/balls4.env.Z" >"$in/balls4.env"
	gzip -dc "$copy/apps/raytrace/inputs/balls4.geo.Z" >"$in/balls4.geo"
	gzip -dc "$copy/apps/volrend/inputs/head-scaleddown4.den.Z" \
		>"$in/head-scaleddown4.den"
}

# make_input NAME P FILE: the stdin of the codes that read their
# process count from their input deck, for P processes.
make_input() {
	case $1 in
	barnes) # input's parameters, with 1024 bodies instead of 16384
		awk -v p="$2" 'NR == 2 { $0 = "1024" } NR == 12 { $0 = p } 1' \
			"$copy/apps/barnes/input" >"$3" ;;
	fmm) # 2048 particles: input.256 has too few for 8 processes
		awk -v p="$2" 'NR == 5 { $0 = p } 1' \
			"$copy/apps/fmm/inputs/input.2048" >"$3" ;;
	water-*) awk -v p="$2" 'NR == 3 { $1 = p } 1' "$copy/apps/$1/input" >"$3" ;;
	*) : >"$3" ;;
	esac
}

# args NAME P: the command line after the program.
args() {
	case $1 in
	cholesky) echo "-p$2 -t lshp.O" ;;
	fft) echo "-m16 -p$2 -t" ;;
	lu-cb|lu-ncb) echo "-n256 -p$2 -t" ;;
	radix) echo "-p$2 -n262144 -t" ;;
	fmm) echo "-o" ;;
	ocean-*) echo "-n130 -p$2 -o" ;;
	radiosity) echo "-p $2 -batch" ;;
	# -m: the global heap in MB (the layouts' region is 64 MB in all)
	raytrace) echo "-p$2 -m32 balls4.env" ;;
	volrend) echo "$2 head-scaleddown4" ;;
	*) echo "" ;;
	esac
}

# needs NAME P: prints why the code cannot run on P processes, if so.
needs() {
	pow2=n
	case $2 in 1|2|4|8|16|32|64|128|256|512|1024) pow2=y ;; esac
	case $1 in
	fft|radix|ocean-*)
		[ $pow2 = y ] || echo "needs a power of 2 processes, not $2" ;;
	esac
}

# prepare_dir NAME DIR: the run directory with the code's inputs.
prepare_dir() {
	rm -rf "$2"; mkdir -p "$2"
	case $1 in
	cholesky) cp "$in/lshp.O" "$2/" ;;
	raytrace) cp "$in/balls4.env" "$in/balls4.geo" "$2/" ;;
	volrend) cp "$in"/head-scaleddown4.* "$2/" ;;
	water-*) cp "$copy/apps/$1/random.in" "$2/" ;;
	esac
}

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# run NAME MACRO_FILE P LAYOUT TAG: runs the build in $tmp/r/TAG (output
# in out, stdin from deck), sets rc and wall.
run() {
	name=$1; mf=$2; p=$3; rlay=$4; d=$tmp/r/$5
	prepare_dir "$name" "$d"
	make_input "$name" "$p" "$d/deck"
	prog=$tmp/b/$name.$mf/PROG
	t0=$(now)
	# shellcheck disable=SC2046 # args are words
	if [ "$mf" = pthread ]; then
		(cd "$d" && timeout -k 5 "$limit" nice -n 19 "$prog" \
			$(args "$name" "$p") <deck >out 2>&1)
	else
		(cd "$d" && timeout -k 5 $((limit + 30)) nice -n 19 \
			"$build/bin/lemuria-run" -c "$rlay" --start-daemons \
			--timeout "$limit" -- "$prog" $(args "$name" "$p") \
			<deck >out 2>&1)
	fi
	rc=$?
	wall=$(secs "$t0" "$(now)")
}

# Comparisons.  numcmp TOL A B [ABS]: A and B hold the same words,
# numbers equal within TOL relative to the larger, or within ABS
# absolute (default 1e-12).
numcmp() {
	awk -v tol="$1" -v absd="${4:-1e-12}" '
	function isnum(s) { return s ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
	function abs(x) { return x < 0 ? -x : x }
	# "(  -2.40523,   -0.15039)": the numbers, not their punctuation
	function words(s) { gsub(/[(),]/, " ", s); return s }
	FNR == NR { a[FNR] = $0; na = FNR; next }
	{ nb = FNR
	  if (!(FNR in a)) { print "line " FNR ": extra"; bad = 1; exit }
	  n = split(words(a[FNR]), x); m = split(words($0), y)
	  if (n != m) { print "line " FNR ": " a[FNR] " / " $0; bad = 1; exit }
	  for (i = 1; i <= n; i++) {
		if (x[i] == y[i]) continue
		if (isnum(x[i]) && isnum(y[i])) {
			d = abs(x[i] - y[i]); s = abs(x[i]) > abs(y[i]) ? abs(x[i]) : abs(y[i])
			if (d <= absd + 0 || d <= tol * s) continue
		}
		print "line " FNR ": " a[FNR] " / " $0; bad = 1; exit
	  } }
	END { if (!bad && na != nb) { print "lines " na " / " nb; bad = 1 }
	      exit bad }' "$2" "$3"
}

# results NAME OUT: the part of a run's output that is compared.
results() {
	case $1 in
	fmm) sed -n '/PARTICLE POSITIONS/,$p' "$2" ;;
	# The process numbered 0 by arrival prints these, and it need not
	# be rank 0: under Lemuria its lines may come before main's.
	ocean-*) grep '^iter' "$2" ;;
	water-*) # the energies: the lines that hold only numbers
		awk '{ ok = NF > 0; for (i = 1; i <= NF; i++)
			if ($i !~ /^[-+]?[0-9.]+([eE][-+]?[0-9]+)?$/) ok = 0 } ok' "$2" ;;
	radiosity) grep -E 'Iterations to converge|Number of patches|Total number of (elements|interactions)' "$2" |
		tr -s ' \t' ' ' ;;
	esac
}

# judge NAME DIR REFDIR: sets why (empty when the run passes).  DIR is
# the Lemuria run, REFDIR the pthreads one (already judged alone when
# REFDIR is empty).
judge() {
	name=$1; o=$2/out; r=${3:-}; why=""
	case $name in
	fft|lu-cb|lu-ncb) grep -q '^TEST PASSED' "$o" || why="no TEST PASSED" ;;
	radix) grep -q '^PASSED: All keys in place' "$o" || why="keys not sorted" ;;
	cholesky) grep -q '^PASSED' "$o" || why="no PASSED ($(grep 'Max error' "$o"))" ;;
	barnes) grep -q '^COMPUTETIME' "$o" || why="no COMPUTETIME" ;;
	raytrace) [ -s "$2/balls4.rl" ] || why="no image balls4.rl" ;;
	volrend) [ -s "$2/head-scaleddown4_1003.tiff" ] || why="no frame 4" ;;
	*) [ -n "$(results "$name" "$o")" ] || why="no results printed" ;;
	esac
	if [ -n "$why" ] || [ -z "$r" ]; then return; fi
	case $name in
	raytrace) cmp -s "$2/balls4.rl" "$r/balls4.rl" ||
		why="image differs from pthreads" ;;
	volrend)
		# Not byte for byte: at 8 threads the pthreads frames differ
		# from run to run (up to 15% of the pixels, by at most 39 grey
		# levels: the work queues are reset while others still take
		# from them).  A frame passes with the same size and at most
		# 1% of its bytes more than 48 levels off the pthreads frame.
		for f in "$r"/*.tiff; do
			g=$2/${f##*/}
			if [ "$(wc -c <"$f")" != "$(wc -c <"$g" 2>/dev/null)" ]; then
				why="frame ${f##*/} missing or of another size"; break
			fi
			bad=$(cmp -l "$f" "$g" | awk '
				function o(s, v, i) { v = 0; for (i = 1; i <= length(s); i++)
					v = v * 8 + substr(s, i, 1); return v }
				{ x = o($2) - o($3); if (x > 48 || x < -48) n++ }
				END { print n + 0 }')
			if [ $((bad * 100)) -gt "$(wc -c <"$f")" ]; then
				why="frame ${f##*/}: $bad pixels more than 48 levels off pthreads"
				break
			fi
		done ;;
	fmm|ocean-*|water-*)
		# fmm prints positions to 5 decimals, and its pthreads runs
		# differ from each other by one in the last (sums in another
		# order): two units of it absolute, for positions near 0;
		# ocean's iteration counts must match; water sums under
		# locks in any order.
		absd=1e-12
		case $name in
		fmm) tol=1e-4 absd=2.5e-5 ;;
		ocean-*) tol=1e-6 ;;
		*) tol=1e-5 ;;
		esac
		results "$name" "$o" >"$2/res"; results "$name" "$r/out" >"$2/ref"
		diffl=$(numcmp $tol "$2/ref" "$2/res" $absd) ||
			why="results differ from pthreads (tolerance $tol): $diffl" ;;
	radiosity)
		# Task stealing makes radiosity differ from run to run on
		# pthreads too (6-8 iterations, elements within 3%), and more
		# on the DSM, whose timing differs more (4366-4978 elements
		# against 4246-4374 on 4+4): same patches, iterations within
		# 2, elements and interactions within 20% of the pthreads run.
		why=$(results radiosity "$o" | paste - - - - |
			awk -v ref="$(results radiosity "$r/out" | paste - - - -)" '{
			split(ref, q, " ")
			# fields: 4 iterations, 9 patches, 14 elements, 19 interactions
			if ($4 + 0 > q[4] + 2 || $4 + 0 < q[4] - 2) print "iterations " $4 " (pthreads " q[4] ")"
			else if ($9 != q[9]) print "patches " $9 " (pthreads " q[9] ")"
			else if ($14 > 1.2 * q[14] || $14 < 0.8 * q[14]) print "elements " $14 " (pthreads " q[14] ")"
			else if ($19 > 1.2 * q[19] || $19 < 0.8 * q[19]) print "interactions " $19 " (pthreads " q[19] ")"
			}') ;;
	esac
}

checks=0
failures=0
skips=0
report() { # STATUS CODE LAYOUT TEXT
	checks=$((checks + 1))
	case $1 in
	FAIL) failures=$((failures + 1)) ;;
	skip) skips=$((skips + 1)) ;;
	esac
	printf '  %-4s %-15s %-22s %s\n' "$1" "$2" "$3" "$4"
}
tail_of() { tail -n "${2:-6}" "$1" | sed 's/^/         | /'; }

echo "splash2-suite: $orig (patched copy in $tmp)"
inputs
# Build everything first: both ways, and volrend's preprocessor.
ok_build=""
for name in $codes_sel; do
	code_info "$name" || { echo "splash2-suite: unknown code $name" >&2; exit 2; }
	for mf in pthread lemuria; do
		if build "$name" "$mf"; then
			ok_build="$ok_build $name.$mf"
		else
			report FAIL "$name" "build $mf.m4" "compile or m4 failed:"
			tail_of "$tmp/b/$name.$mf.log" 8
		fi
	done
done
case " $codes_sel " in *" volrend "*)
	if build volrend-prep pthread &&
		(cd "$tmp/b/volrend-prep.pthread" && cp "$in/head-scaleddown4.den" . &&
		timeout 60 nice -n 19 ./PROG 1 head-scaleddown4 >prep.out 2>&1) &&
		cp "$tmp/b/volrend-prep.pthread"/head-scaleddown4.norm \
			"$tmp/b/volrend-prep.pthread"/head-scaleddown4.opc \
			"$tmp/b/volrend-prep.pthread"/head-scaleddown4.pyr "$in/"; then
		:
	else
		report FAIL volrend "preprocess" "volrend's .den preprocessing failed"
	fi ;;
esac

n=0
for lname in $layouts; do
	n=$((n + 1))
	src_layout=conf/$lname.ini
	[ -f "$src_layout" ] || src_layout=$lname
	if [ ! -f "$src_layout" ]; then
		report FAIL "-" "$lname" "no layout conf/$lname.ini"; continue
	fi
	mkdir -p "$tmp/l$n"
	lay=$(private_layout "$src_layout" "$tmp/l$n" "$n")
	procs=$(awk -F= '/^[ \t]*clients[ \t]*=/ { s += $2 } END { print s + 0 }' "$lay")
	echo "layout $lname: $procs processes"
	for name in $codes_sel; do
		case " $ok_build " in
		*" $name.pthread $name.lemuria "*) ;;
		*) report FAIL "$name" "$lname" "not built"; continue ;;
		esac
		why=$(needs "$name" "$procs")
		if [ -n "$why" ]; then report skip "$name" "$lname" "$why"; continue; fi
		tag=$name.p$procs
		if [ ! -f "$tmp/r/$tag.pthread/judged" ]; then
			run "$name" pthread "$procs" - "$tag.pthread"
			judge "$name" "$tmp/r/$tag.pthread" ""
			[ $rc -eq 0 ] || why="status $rc${why:+, $why}"
			echo "$rc $wall $why" >"$tmp/r/$tag.pthread/judged"
		fi
		read -r prc pwall pwhy <"$tmp/r/$tag.pthread/judged"
		if [ "$prc" -ne 0 ] || [ -n "$pwhy" ]; then
			report FAIL "$name" "$lname" "pthreads reference (p=$procs) failed: $pwhy (${pwall}s)"
			tail_of "$tmp/r/$tag.pthread/out"
			continue
		fi
		run "$name" lemuria "$procs" "$lay" "$tag.$lname"
		if [ $rc -ne 0 ]; then
			case $rc in 124|137) what="timed out after ${limit}s" ;;
			*) what="status $rc" ;; esac
			report FAIL "$name" "$lname" "$what (${wall}s, pthreads ${pwall}s)"
			tail_of "$tmp/r/$tag.$lname/out"
			continue
		fi
		judge "$name" "$tmp/r/$tag.$lname" "$tmp/r/$tag.pthread"
		# A daemon's error (docs/operations.md) fails the run even when
		# the results above came out right.
		derr=$(grep -c '^[a-z][a-z0-9_-]*: error: ' "$tmp/r/$tag.$lname/out")
		if [ "$derr" -gt 0 ]; then
			why="${why:+$why; }$derr daemon errors, first: $(grep -m1 '^[a-z][a-z0-9_-]*: error: ' "$tmp/r/$tag.$lname/out")"
		fi
		if [ -n "$why" ]; then
			report FAIL "$name" "$lname" "$why (${wall}s, pthreads ${pwall}s)"
			tail_of "$tmp/r/$tag.$lname/out" 4
		else
			report ok "$name" "$lname" "${wall}s (pthreads ${pwall}s)"
		fi
	done
done

echo "splash2-suite: $checks checks, $failures failed, $skips skipped"
[ $failures -eq 0 ]
