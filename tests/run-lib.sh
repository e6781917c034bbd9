#!/bin/sh
# The library is its API (issue 39): liblemuria.so exports exactly the
# functions lemuria.h declares (LM_API), needs no libevent (no daemon code
# inside), and a program that includes lemuria.h alone, error codes
# included, builds against it, as built and as `make install` installs it
# (headers, lemuria.pc for shared and static linking).
#   tests/run-lib.sh BUILD_DIR
set -u
build=${1:-build}
lib=$build/lib
tmp=$(mktemp -d /tmp/lm-lib.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up
failures=0
checks=0
. tests/lib.sh
yes_if() { if "$@"; then echo y; else echo n; fi; }

need_built run-lib "$lib/liblemuria.so" "$lib/liblemuria.a"

echo "lib: exports"
# every function the public headers declare, one per line, and those
# they mark LM_API: a prototype without it would be missing from the .so
sed -n 's/^[A-Za-z_][A-Za-z_0-9 *]*[ *]\(lm_[a-z_0-9]*\)(.*/\1/p' \
	liblemuria/lemuria.h liblemuria/lemuria_error.h | sort >"$tmp/api"
sed -n 's/^LM_API [^(]*[ *]\(lm_[a-z_0-9]*\)(.*/\1/p' \
	liblemuria/lemuria.h liblemuria/lemuria_error.h | sort >"$tmp/marked"
nm -D --defined-only "$lib/liblemuria.so" | awk '{ print $NF }' |
	sort >"$tmp/exported"
check "$(yes_if test "$(wc -l <"$tmp/api")" -ge 18)" \
	"lemuria.h declares $(wc -l <"$tmp/api") functions"
check "$(yes_if cmp -s "$tmp/api" "$tmp/marked")" \
	"each marked LM_API ($(wc -l <"$tmp/marked"))"
if cmp -s "$tmp/api" "$tmp/exported"; then
	check y "liblemuria.so exports exactly them"
else
	check n "liblemuria.so exports exactly them (< lemuria.h, > .so):"
	diff "$tmp/api" "$tmp/exported" | sed -n 's/^[<>]/       &/p'
fi
readelf -d "$lib/liblemuria.so" >"$tmp/dynamic"
check "$(yes_if test -s "$tmp/dynamic")" "readelf reads liblemuria.so"
check "$(yes_if sh -c "! grep -q 'NEEDED.*libevent' '$tmp/dynamic'")" \
	"liblemuria.so needs no libevent"
nm "$lib/liblemuria.a" >"$tmp/static"
check "$(yes_if sh -c "! grep -Eq ' T lm_(daemon|evnode|pidfile)_' '$tmp/static'")" \
	"liblemuria.a holds no daemon code"

# A program that uses the error codes and lm_strerror, as a user writes it.
cat >"$tmp/user.c" <<'EOF'
#include <lemuria.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	const char *s = lm_strerror(LM_EINVAL);

	if (strcmp(s, "invalid argument") != 0 || lm_rank() != -1 ||
	    LM_EUNREACH >= 0 || LM_EIO >= 0) {
		printf("wrong: %s\n", s);
		return 1;
	}
	printf("%s %s\n", lm_version(), s);
	return 0;
}
EOF
cc=${CC:-cc}

echo "lib: a user's program"
# -Iliblemuria only: lemuria.h must not need anything of common/
"$cc" -std=c99 -Wall -Wextra -Werror -Iliblemuria -o "$tmp/user" \
	"$tmp/user.c" -L"$lib" -llemuria -Wl,-rpath,"$(cd "$lib" && pwd)" \
	>"$tmp/cc.log" 2>&1
check "$(yes_if test $? -eq 0)" "builds with lemuria.h alone and -llemuria"
sed 's/^/       /' "$tmp/cc.log"
out=$("$tmp/user" 2>&1)
check "$(yes_if test "$out" = "0.1 invalid argument")" \
	"runs and prints \"$out\" (lm_version, lm_strerror(LM_EINVAL))"

echo "lib: make install"
make --no-print-directory install BUILD="$build" DESTDIR="$tmp/root" \
	PREFIX=/usr/local >"$tmp/install.log" 2>&1
check "$(yes_if test $? -eq 0)" "make install DESTDIR=..."
root=$tmp/root/usr/local
for f in include/lemuria.h include/lemuria_error.h lib/liblemuria.so.0 \
	lib/liblemuria.a lib/pkgconfig/lemuria.pc; do
	check "$(yes_if test -e "$root/$f")" "installs $f"
done
pc() { PKG_CONFIG_PATH=$root/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$tmp/root \
	pkg-config "$@" lemuria; }
libs=$(pc --libs | sed 's/ *$//')
check "$(yes_if test "$libs" = "-L$root/lib -Wl,-rpath,$root/lib -llemuria")" \
	"lemuria.pc: Libs without the private ones, with the library's run path ($libs)"
pc --print-requires-private >"$tmp/requires"
check "$(yes_if grep -q libcrypto "$tmp/requires")" \
	"lemuria.pc: Requires.private $(tr '\n' ' ' <"$tmp/requires")"
check "$(yes_if sh -c "! grep -q libevent '$tmp/requires'")" \
	"lemuria.pc: no libevent"
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
"$cc" -std=c99 -Werror $(pc --cflags) -o "$tmp/user-installed" \
	"$tmp/user.c" $(pc --libs) -Wl,-rpath,"$root/lib" >"$tmp/cc.log" 2>&1
check "$(yes_if test $? -eq 0)" "a program builds with pkg-config --cflags --libs"
sed 's/^/       /' "$tmp/cc.log"
out=$("$tmp/user-installed" 2>&1)
check "$(yes_if test "$out" = "0.1 invalid argument")" "and runs"
# shellcheck disable=SC2046
"$cc" -std=c99 -Werror $(pc --cflags) -o "$tmp/user-static" "$tmp/user.c" \
	-Wl,-Bstatic $(pc --libs-only-L) -llemuria -Wl,-Bdynamic \
	$(pc --static --libs-only-l | sed 's/-llemuria//') >"$tmp/cc.log" 2>&1
check "$(yes_if test $? -eq 0)" "and links statically with pkg-config --static"
sed 's/^/       /' "$tmp/cc.log"

# Installed into a prefix of its own, as a user would (no DESTDIR): a
# program built with pkg-config alone runs under the installed
# lemuria-run without LD_LIBRARY_PATH (issue 42), and uninstall takes
# every file away again.
echo "lib: make install PREFIX=..., a program from it, make uninstall"
prefix=$tmp/prefix
make --no-print-directory install BUILD="$build" PREFIX="$prefix" \
	>"$tmp/install2.log" 2>&1
check "$(yes_if test $? -eq 0)" "make install PREFIX=$prefix"
for p in reflector lemuriad lemuriactl lemuria-run; do
	check "$(yes_if grep -q "^\.SH NAME" "$prefix/share/man/man1/$p.1")" \
		"a manual page for $p"
done
for f in conf/4+4.ini conf/README examples/hello.c lemuria.m4; do
	check "$(yes_if test -s "$prefix/share/lemuria/$f")" "installs share/lemuria/$f"
done
check "$(yes_if test "$(stat -c %a "$prefix/share/lemuria/conf/demo.key")" = 600)" \
	"the demo key, mode 0600"
check "$(yes_if grep -q "PUBLIC secret" "$prefix/share/lemuria/conf/README")" \
	"with its warning beside it"
check "$(yes_if grep -q "^ExecStart=$prefix/bin/lemuriad " \
	"$prefix/share/lemuria/systemd/lemuriad@.service")" \
	"the systemd units run the installed daemons"
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
"$cc" -std=c99 -Wall -Wextra -Werror \
	$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags lemuria) \
	-o "$tmp/hello" "$prefix/share/lemuria/examples/hello.c" \
	$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --libs lemuria) \
	>"$tmp/cc.log" 2>&1
check "$(yes_if test $? -eq 0)" "examples/hello.c builds with pkg-config alone"
sed 's/^/       /' "$tmp/cc.log"
out=$(env -u LD_LIBRARY_PATH "$prefix/bin/lemuria-run" -n 4 -t 60 -- \
	"$tmp/hello" 2>&1)
check "$(yes_if test "$out" = "hello: 4 ranks, sum 10: PASSED")" \
	"and runs under the installed lemuria-run -n 4, no LD_LIBRARY_PATH ($out)"
make --no-print-directory uninstall BUILD="$build" PREFIX="$prefix" \
	>"$tmp/uninstall.log" 2>&1
left=$(find "$prefix" -type f -o -type l | wc -l)
check "$(yes_if test "$left" -eq 0)" "make uninstall leaves no file ($left left)"

echo "lib: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
