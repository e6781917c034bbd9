# Lemuria: one Makefile for the whole tree (GNU make).
#
#   make            build everything under build/
#   make run        SPLASH-2 LU on conf/4+4.ini (LAYOUT=..., LU_ARGS=...)
#   make check      shellcheck of the scripts, the files' call layering,
#                   unit suites, the same under ASan/UBSan, then daemons
#                   and DSM runs on real layouts
#   make asan       the sanitizer build alone, under build/asan/
#   make fuzz       libFuzzer harnesses, FUZZ_SECONDS each (tests/fuzz/)
#   make bench-transport   transport round trip vs bare UDP
#   make install PREFIX=/usr/local   (also the PARMACS macro files)
#   make deps       install the Debian packages the build needs

PREFIX ?= /usr/local
BUILD ?= build
SANITIZE ?=

CC ?= cc
PKGS := libevent inih cunit libcrypto jansson
CFLAGS_BASE := -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -fno-strict-aliasing \
	-D_GNU_SOURCE
ifeq ($(SANITIZE),1)
CFLAGS_BASE += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=address,undefined
endif

# pkg-config is asked lazily so that `make deps` works before the packages
# exist.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs libevent inih libcrypto 2>/dev/null) \
	-lpthread
CUNIT_LIBS = $(shell pkg-config --libs cunit 2>/dev/null)
# The tools' JSON output (tools/runstats.c); not the library's.
JSON_LIBS = $(shell pkg-config --libs jansson 2>/dev/null)

INCLUDES := -Icommon -Iliblemuria -Ilemuriad -Ireflector -Itools
CFLAGS_ALL = $(CFLAGS_BASE) $(INCLUDES) $(PKG_CFLAGS) $(CFLAGS)
# Programs that use the library as its users do: lemuria.h alone.
CFLAGS_API = $(CFLAGS_BASE) -Iliblemuria $(CFLAGS)
# The shared library's own dependencies (the daemons' are PKG_LIBS).
LIB_LIBS = $(shell pkg-config --libs inih libcrypto 2>/dev/null) -lpthread
LDFLAGS_ALL = $(LDFLAGS_SAN) $(LDFLAGS)

# Modules: every .c except the mains.
COMMON_SRC := $(wildcard common/*.c)
CLIENT_SRC := $(filter-out %/main.c,$(wildcard liblemuria/*.c))
LEMURIAD_SRC := $(filter-out %/main.c,$(wildcard lemuriad/*.c))
REFLECTOR_SRC := $(filter-out %/main.c,$(wildcard reflector/*.c))
TOOLS_SRC := $(filter-out tools/lemuriactl.c tools/lemuria-run.c,$(wildcard tools/*.c))
TEST_SRC := $(wildcard tests/*.c)
# The library is its API: the client runtime and the shared modules it
# uses, no daemon code and no libevent.  A module the client comes to need
# must be added here (the .so is linked with --no-undefined, so a missing
# one fails the build).
LIB_COMMON_SRC := $(addprefix common/,auth.c cluster_copy.c config.c copy_set.c diff.c \
	error.c fdpass.c link_config.c log.c loss.c mem.c proto.c reliable.c \
	rpc.c udp.c wire.c)
LIB_SRC := $(LIB_COMMON_SRC) $(CLIENT_SRC)
# Everything else is linked by the daemons, tools, unit tests and benches
# from an internal archive that is never installed.
INTERNAL_SRC := $(COMMON_SRC) $(CLIENT_SRC)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
# (a directory of their own: objects built before hidden visibility are
# not reused)
pic = $(patsubst %.c,$(BUILD)/so/%.o,$(1))

LIB_A := $(BUILD)/lib/liblemuria.a
LIB_SO := $(BUILD)/lib/liblemuria.so
INTERNAL_A := $(BUILD)/lib/liblemuria-internal.a
BINS := $(BUILD)/bin/reflector $(BUILD)/bin/lemuriad $(BUILD)/bin/lemuriactl \
	$(BUILD)/bin/lemuria-run
UNIT := $(BUILD)/tests/unit
BENCH_TRANSPORT := $(BUILD)/bench/transport
BENCH_DIFF := $(BUILD)/bench/diff
BENCH_MAC := $(BUILD)/bench/mac
DSMTEST := $(BUILD)/tests/dsmtest
BIGBSS := $(BUILD)/tests/bigbss
# Programs the unit tests run, beside the unit binary (tests/helpers/).
UNIT_HELPERS := $(BUILD)/tests/auth_at_exit
SPLASH2_BINS :=
-include splash2/splash2.mk
include tests/fuzz/fuzz.mk

.PHONY: all check check-loss unit asan asan-unit bench-transport bench-diff bench-splash bench \
	install uninstall deps \
	check-deps clean run
.DEFAULT_GOAL := all

# Builds run JOBS compilers at a time: every CPU unless given, or unless
# make runs with -j already (its jobserver then shares them out).
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
PARALLEL = $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS))

all: check-deps
	@$(MAKE) --no-print-directory $(PARALLEL) build-all

.PHONY: build-all
build-all: $(LIB_A) $(LIB_SO) $(INTERNAL_A) $(BINS) $(UNIT) $(BENCH_TRANSPORT) \
	$(BENCH_DIFF) $(BENCH_MAC) $(BUILD)/bench/region $(BUILD)/bench/pages \
	$(BUILD)/bench/micro $(BUILD)/bench/cpuidle $(SPLASH2_BINS) $(DSMTEST) \
	$(BIGBSS)

# Installs the Debian packages when pkg-config cannot find them.
check-deps:
	@{ pkg-config --exists $(PKGS) && command -v m4 && \
		command -v shellcheck && command -v help2man; } >/dev/null 2>&1 || \
		$(MAKE) --no-print-directory deps

deps:
	@sh tools/install-deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# Objects of the shared library: only what lemuria.h marks LM_API is
# exported.
$(BUILD)/so/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

$(LIB_A): $(call obj,$(LIB_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(INTERNAL_A): $(call obj,$(INTERNAL_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(call pic,$(LIB_SRC))
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,liblemuria.so.0 -Wl,--no-undefined -o $@ \
		$^ $(LDFLAGS_ALL) $(LIB_LIBS)
	ln -sf liblemuria.so $(dir $@)liblemuria.so.0

$(BUILD)/bin/reflector: $(call obj,reflector/main.c $(REFLECTOR_SRC)) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

$(BUILD)/bin/lemuriad: $(call obj,lemuriad/main.c $(LEMURIAD_SRC)) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

$(BUILD)/bin/lemuriactl: $(call obj,tools/lemuriactl.c tools/runstats.c) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS) $(JSON_LIBS)

$(BUILD)/bin/lemuria-run: $(call obj,tools/lemuria-run.c $(TOOLS_SRC)) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS) $(JSON_LIBS)

# The test binary links the modules, never a main.
$(UNIT): $(call obj,$(TEST_SRC) $(LEMURIAD_SRC) $(REFLECTOR_SRC) $(TOOLS_SRC)) $(INTERNAL_A) \
		| $(UNIT_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(CUNIT_LIBS) $(PKG_LIBS) $(JSON_LIBS)

$(BUILD)/tests/auth_at_exit: $(call obj,tests/helpers/auth_at_exit.c) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

$(BENCH_TRANSPORT): $(call obj,bench/transport.c) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

unit: $(UNIT) $(BUILD)/tests/unit-diff-portable
	$(UNIT)
	$(BUILD)/tests/unit-diff-portable

# The diff codec's word path (no SSE2), which x86 builds never take
# otherwise: its own suite, built with LM_DIFF_PORTABLE.
$(BUILD)/tests/unit-diff-portable: common/diff.c common/error.c \
		tests/test_diff.c tests/unit_main.c tests/unit.h \
		tests/diff_util.h common/diff.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DLM_DIFF_PORTABLE -o $@ common/diff.c \
		common/error.c tests/test_diff.c tests/unit_main.c \
		$(LDFLAGS_ALL) $(CUNIT_LIBS)

# The sanitizer build lives in its own tree so both can coexist.
asan: check-deps
	@$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=1 build/asan/tests/unit

asan-unit: asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	build/asan/tests/unit

# What the checks run is built first, JOBS compilers at a time.  The
# checks that mostly wait (the unit suites' timeouts, the integration
# script's daemons that fail on purpose: a fraction of one CPU each) then
# run side by side, each one's output printed whole when it ends (-O);
# the scripts that keep both CPUs busy run after them one at a time,
# since their timings must not share the CPUs with another test's.
CHECKS_SIDE_BY_SIDE := unit asan-unit lint-sh check-calls check-lib \
	splash2-check check-integration
check: check-deps
	@$(MAKE) --no-print-directory $(PARALLEL) build-all \
		$(BUILD)/tests/unit-diff-portable
	@$(MAKE) --no-print-directory $(PARALLEL) asan
	@echo "check: $(CHECKS_SIDE_BY_SIDE) side by side"
	@$(MAKE) --no-print-directory -O -j$(words $(CHECKS_SIDE_BY_SIDE)) \
		$(CHECKS_SIDE_BY_SIDE)
	@sh tests/run-bench.sh $(BUILD)
	@sh tests/run-dsm.sh $(BUILD)
	@sh tests/run-litmus.sh $(BUILD)
	@sh tests/run-memory.sh $(BUILD)
	@sh tests/run-netns.sh $(BUILD)
	@sh tests/soak.sh $(BUILD) 30
	@$(MAKE) --no-print-directory $(PARALLEL) fuzz-smoke

# The shell scripts (drivers, tests, tools) at shellcheck's warning level;
# a deliberate exception is a `# shellcheck disable=...` with its reason.
# And every trap on INT or TERM ends its script (tools/check-traps.sh).
SHELL_SCRIPTS := $(sort $(wildcard bench/*.sh tests/*.sh tools/*.sh)) .ci/run
.PHONY: check-lib check-integration
check-lib:
	@sh tests/run-lib.sh $(BUILD)
check-integration:
	@sh tests/run-integration.sh $(BUILD)

.PHONY: lint-sh
lint-sh:
	@command -v shellcheck >/dev/null 2>&1 || \
		{ echo "lint-sh: shellcheck not found (make deps installs it)" >&2; exit 1; }
	@shellcheck -S warning $(SHELL_SCRIPTS)
	@sh tools/check-traps.sh $(SHELL_SCRIPTS)
	@echo "lint-sh: $(words $(SHELL_SCRIPTS)) shell scripts, no warnings, every INT and TERM trap ends the script"

# No two files of a part of the tree call each other, directly or round a
# circle (tools/check-calls.sh, from the objects' symbols).
CHECK_CALLS_DIRS ?= reflector lemuriad liblemuria
.PHONY: check-calls
check-calls: all
	@sh tools/check-calls.sh $(BUILD) $(CHECK_CALLS_DIRS)

# Every program with injected loss on every layout: about 2 minutes, and
# some 5 more for the chaos test; once with the layouts' own copy mode
# (the default, cluster) and once with a copy per client.
check-loss: all
	@sh tests/run-loss.sh $(BUILD)
	@LM_TEST_COPY=client sh tests/run-loss.sh $(BUILD)

# The 14 codes of the original SPLASH-2 distribution, both ways, on
# three layouts (docs/splash2.md, "The whole suite"): the sources are not
# ours to ship, so give their directory, e.g.
# make check-splash2 SPLASH2_ORIG=/tmp/splash2-orig
.PHONY: check-splash2
check-splash2: all
	@sh tests/splash2-suite.sh --layouts "4+4 2x2-two-reflectors 3-reflectors" \
		$(SPLASH2_ORIG)

# The order and visibility programs (publish, treewave, spinflag,
# dsmtest visible and chaos) 10 rounds on five layouts of several
# clusters, every other round with loss (long; tests/run-order.sh).
.PHONY: check-order
check-order: all
	@sh tests/run-order.sh $(BUILD) 10

# The lost-write litmus programs 50 times on each layout with several
# reflectors and each relay mode, every other run with loss (long).
.PHONY: check-litmus
check-litmus: all
	@sh tests/run-litmus.sh $(BUILD) 50 "2x2-two-reflectors 3-reflectors"

$(BENCH_DIFF): $(call obj,bench/diff.c) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

$(BENCH_MAC): $(call obj,bench/mac.c) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

$(BUILD)/bench/region: $(call obj,bench/region.c) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

$(BUILD)/bench/pages: $(call obj,bench/pages.c) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS)

$(BUILD)/bench/micro: bench/micro.c $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -o $@ $< -L$(BUILD)/lib -llemuria \
		-Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS_ALL)

$(BUILD)/bench/cpuidle: $(call obj,bench/cpuidle.c)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)

$(DSMTEST): tests/dsm/dsmtest.c $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -o $@ $< -L$(BUILD)/lib -llemuria \
		-Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS_ALL)

# CREATE with a large .bss: a program of its own, so that dsmtest's
# segment stays small.
$(BIGBSS): tests/dsm/bigbss.c $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -o $@ $< -L$(BUILD)/lib -llemuria \
		-Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS_ALL)

# Where the bench targets write: build/bench-results, unless asked to
# update the results kept in the tree (make bench BENCH_RESULTS=bench/results).
BENCH_RESULTS ?= $(BUILD)/bench-results
export LEMURIA_BENCH_RESULTS := $(BENCH_RESULTS)

bench-transport: all
	@mkdir -p $(BENCH_RESULTS)
	$(BENCH_TRANSPORT) -o $(BENCH_RESULTS)/transport.csv

bench-diff: all
	$(BENCH_DIFF)

# The datagram MAC (lm_auth_sign) against memcpy of the same bytes.
.PHONY: bench-mac
bench-mac: all
	$(BENCH_MAC)

# Notices over 2048 pages, one mprotect per page vs per run.
.PHONY: bench-region
bench-region: all
	@$(MAKE) --no-print-directory $(BUILD)/bench/region
	$(BUILD)/bench/region

# Per page: a page fault, population, mprotect, vs memcpy of a page.
.PHONY: bench-pages
bench-pages: all
	@$(MAKE) --no-print-directory $(BUILD)/bench/pages
	$(BUILD)/bench/pages

# Fault service, barrier and lock latency vs a bare UDP round trip.
.PHONY: bench-micro
bench-micro: all $(BUILD)/bench/micro
	bench/micro.sh -B $(BUILD)

# The SPLASH-2 harness (long: see docs/performance.md); plots need gnuplot.
bench-splash: all
	bench/splash.sh -B $(BUILD) $(SPLASH_BENCH_ARGS)

# Every SPLASH-2 program on the paper's layouts, with tables and plots
# (about an hour; plots need gnuplot-nox, skipped with a message without
# it); SPLASH_BENCH_ARGS=-q for a quick check.
.PHONY: bench-programs
bench-programs: all
	bench/splash.sh -B $(BUILD) -p all -P $(SPLASH_BENCH_ARGS)

# The issue-7 targets table, each beside its baseline (several minutes);
# TARGETS_BENCH_ARGS=-q for a quick check.
.PHONY: bench-targets
bench-targets: all $(BUILD)/bench/micro
	bench/targets.sh -B $(BUILD) $(TARGETS_BENCH_ARGS)

# LU per layout with lazy and eager relay, traffic per level (long: see
# docs/performance.md); HIERARCHY_BENCH_ARGS=-q for a quick check.
.PHONY: bench-hierarchy
bench-hierarchy: all
	bench/hierarchy.sh $(HIERARCHY_BENCH_ARGS)

# LU and lucontig with the protocol's data path taken away a stage at a
# time (bench/oracle.patch on a copy of the tree), in each copy mode: the
# design's floors under the targets.  FLOORS_BENCH_ARGS=-q for a quick
# check.
.PHONY: bench-floors
bench-floors:
	for m in cluster client; do \
		bench/floors.sh -m $$m -l 4+4 $(FLOORS_BENCH_ARGS) && \
		bench/floors.sh -m $$m -l 8+8 $(FLOORS_BENCH_ARGS) && \
		bench/floors.sh -m $$m -l 8+8+8+8 $(FLOORS_BENCH_ARGS) && \
		bench/floors.sh -m $$m -l 4+4 -p lucontig $(FLOORS_BENCH_ARGS) || \
		exit 1; \
	done

# Resident memory per cluster, copy = cluster against copy = client, LU
# on 4+4 and 8+8+8+8 (a few minutes).
.PHONY: bench-resident
bench-resident: all
	bench/resident.sh -l 4+4
	bench/resident.sh -l 8+8+8+8

bench: bench-transport bench-diff bench-mac bench-pages bench-programs bench-hierarchy bench-targets bench-floors bench-resident

# The main job: SPLASH-2 LU on a two-cluster layout on this host.
LAYOUT ?= conf/4+4.ini
LU_ARGS ?= -n512 -b16 -t
run: all
	$(BUILD)/bin/lemuria-run -c $(LAYOUT) --pin --batch --start-daemons -- \
		$(BUILD)/splash2/lu $(LU_ARGS)

# Manual pages, from each program's --help and --version (help2man).
MAN_PAGES := $(patsubst %,$(BUILD)/man/%.1,reflector lemuriad lemuriactl \
	lemuria-run)
man_name_reflector := a root daemon of the Lemuria DSM (page homes, barriers, locks)
man_name_lemuriad := the cluster daemon of the Lemuria DSM (the cluster copy and its voice upward)
man_name_lemuriactl := ask the Lemuria daemons of a layout for their status and counters
man_name_lemuria-run := start the ranks of a Lemuria DSM program, and its daemons
$(BUILD)/man/%.1: $(BUILD)/bin/%
	@command -v help2man >/dev/null 2>&1 || { echo "make: the manual \
pages need help2man (tools/install-deps.sh installs it)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	help2man --no-info --no-discard-stderr --name='$(man_name_$*)' \
		--output=$@.tmp $<
	mv $@.tmp $@
.PHONY: man
man: $(MAN_PAGES)

# What install puts under PREFIX, and uninstall takes away again.  The
# example layouts and the demo key go to share/lemuria/conf (a layout
# finds its secret_file next to it); the systemd units name PREFIX/bin.
SHARE := $(DESTDIR)$(PREFIX)/share/lemuria
INSTALLED := $(patsubst %,bin/%,reflector lemuriad lemuriactl lemuria-run) \
	lib/liblemuria.a lib/liblemuria.so.0 lib/liblemuria.so \
	include/lemuria.h include/lemuria_error.h lib/pkgconfig/lemuria.pc \
	$(patsubst %,share/man/man1/%.1,reflector lemuriad lemuriactl \
		lemuria-run) \
	share/lemuria/lemuria.m4 share/lemuria/pthread.m4 \
	share/lemuria/systemd/lemuriad@.service \
	share/lemuria/systemd/reflector@.service \
	share/lemuria/conf/demo.key share/lemuria/conf/README \
	$(patsubst conf/%,share/lemuria/conf/%,$(wildcard conf/*.ini)) \
	share/lemuria/examples/hello.c

install: all $(MAN_PAGES)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib \
		$(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(SHARE)/conf \
		$(SHARE)/systemd $(SHARE)/examples
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/liblemuria.so.0
	ln -sf liblemuria.so.0 $(DESTDIR)$(PREFIX)/lib/liblemuria.so
	install -m 644 liblemuria/lemuria.h liblemuria/lemuria_error.h \
		$(DESTDIR)$(PREFIX)/include/
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 splash2/macros/lemuria.m4 splash2/macros/pthread.m4 \
		$(SHARE)/
	install -m 644 conf/*.ini $(SHARE)/conf/
	install -m 600 conf/demo.key $(SHARE)/conf/
	install -m 644 conf/README.installed $(SHARE)/conf/README
	install -m 644 examples/hello.c $(SHARE)/examples/
	for u in lemuriad@.service reflector@.service; do \
		sed -e 's|/usr/local/bin/|$(PREFIX)/bin/|g' conf/systemd/$$u \
			> $(SHARE)/systemd/$$u || exit 1; \
	done
	sed -e 's|@PREFIX@|$(PREFIX)|g' liblemuria/lemuria.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/lemuria.pc

# Removes what install put there (and the directories of ours it made),
# nothing else.
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))
	-rmdir $(SHARE)/conf $(SHARE)/systemd $(SHARE)/examples $(SHARE) \
		2>/dev/null

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
