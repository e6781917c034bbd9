#!/bin/sh
# Builds and runs a CUnit binary from a subset of sources, with the project's
# flags, so one module can be tested while others are half-written.
#   tools/dev-unit.sh [--asan] OUT source.c... [-- suite...]
set -eu
san=""
if [ "${1:-}" = "--asan" ]; then
	san="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
	shift
fi
out=$1; shift
srcs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do srcs="$srcs $1"; shift; done
[ "${1:-}" = "--" ] && shift
mkdir -p "$(dirname "$out")"
# shellcheck disable=SC2086,SC2046 # flags and sources split into words
cc -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -fno-strict-aliasing -D_GNU_SOURCE $san \
	-Icommon -Iliblemuria $(pkg-config --cflags libevent inih cunit libcrypto) \
	$srcs tests/unit_main.c common/error.c common/log.c -o "$out" \
	$(pkg-config --libs libevent inih cunit libcrypto) -lpthread
"$out" "$@"
