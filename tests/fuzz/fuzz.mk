# libFuzzer harnesses (tests/fuzz/, docs/testing.md), included by the root
# Makefile.  They are built with clang straight from the sources, apart
# from the gcc tree, with libFuzzer, ASan and UBSan.
#
#   make fuzz-build     build $(BUILD)/fuzz/<harness>
#   make fuzz           run each harness FUZZ_SECONDS (60) on its corpus;
#                       fails on any crash, leak or trap
#   make fuzz-smoke     each harness 5 s; skipped (exit 0, with a message)
#                       when clang or its fuzzer runtime is missing
#   make fuzz-corpus    regenerate the seeds in tests/fuzz/corpus/
#
# Each run works on $(BUILD)/fuzz/corpus-<harness>, a copy of the seeds
# that keeps what the fuzzer adds; a crashing input is written to
# $(BUILD)/fuzz/crash-<harness>-*.  Harnesses read conf/4+4.ini relative
# to the repository root (or LM_FUZZ_LAYOUT).

BUILD ?= build
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_HARNESSES := fuzz_wire fuzz_msg fuzz_engine fuzz_home fuzz_cluster

FUZZ_PKG_CFLAGS = $(shell pkg-config --cflags inih libcrypto 2>/dev/null)
FUZZ_PKG_LIBS = $(shell pkg-config --libs inih libcrypto 2>/dev/null)
FUZZ_SAN := -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=gnu11 -O1 -g -Wall -Wextra -Werror -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -fno-strict-aliasing \
	-D_GNU_SOURCE $(FUZZ_SAN) -Icommon -Ilemuriad -Ireflector \
	-Itests/fuzz $(FUZZ_PKG_CFLAGS)
FUZZ_RUN_FLAGS = -timeout=30 -rss_limit_mb=2048 -print_final_stats=1

FUZZ_BASE_SRC := common/error.c common/log.c common/wire.c
FUZZ_MACHINE_SRC := tests/fuzz/fuzz_machine.c common/proto.c common/diff.c \
	common/notice_set.c \
	common/config.c common/auth.c $(FUZZ_BASE_SRC)
FUZZ_SRC_fuzz_wire := tests/fuzz/fuzz_wire.c common/auth.c $(FUZZ_BASE_SRC)
FUZZ_SRC_fuzz_msg := tests/fuzz/fuzz_msg.c common/proto.c common/diff.c \
	$(FUZZ_BASE_SRC)
FUZZ_SRC_fuzz_engine := tests/fuzz/fuzz_engine.c common/reliable.c \
	common/mem.c common/auth.c $(FUZZ_BASE_SRC)
# Each daemon's modules, whatever their files (not its main).
FUZZ_SRC_fuzz_home := tests/fuzz/fuzz_home.c \
	$(filter-out %/main.c %_stats.c,$(wildcard reflector/*.c)) \
	$(FUZZ_MACHINE_SRC)
FUZZ_SRC_fuzz_cluster := tests/fuzz/fuzz_cluster.c \
	$(filter-out %/main.c %_stats.c,$(wildcard lemuriad/*.c)) \
	common/cluster_copy.c common/copy_set.c common/fdpass.c common/udp.c \
	$(FUZZ_MACHINE_SRC)
FUZZ_HDRS = $(wildcard common/*.h lemuriad/*.h reflector/*.h tests/fuzz/*.h)

FUZZ_BINS := $(addprefix $(FUZZ_DIR)/,$(FUZZ_HARNESSES))
FUZZ_GEN := $(FUZZ_DIR)/gen_corpus

.PHONY: fuzz-build fuzz fuzz-smoke fuzz-corpus

fuzz-build: $(FUZZ_BINS)

# One clang command per harness: the modules get the same sanitizers and
# coverage instrumentation as the harness.
define fuzz_harness_rule
$(FUZZ_DIR)/$(1): $$(FUZZ_SRC_$(1)) $$(FUZZ_HDRS) tests/fuzz/fuzz.mk
	@mkdir -p $$(dir $$@)
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -o $$@ $$(FUZZ_SRC_$(1)) $$(FUZZ_PKG_LIBS)
endef
$(foreach h,$(FUZZ_HARNESSES),$(eval $(call fuzz_harness_rule,$(h))))

# Runs every harness for $(1) seconds on its corpus copy; all of them run
# even when one fails, then the target fails naming them.
define fuzz_run_all
	@status=0; failed=""; \
	for h in $(FUZZ_HARNESSES); do \
		corpus=$(FUZZ_DIR)/corpus-$$h; \
		mkdir -p $$corpus && cp tests/fuzz/corpus/$$h/* $$corpus/ \
			|| exit 1; \
		echo "fuzz: $$h for $(1) s on $$corpus"; \
		if ! LM_FUZZ_LAYOUT=conf/4+4.ini $(FUZZ_DIR)/$$h \
			-max_total_time=$(1) $(FUZZ_RUN_FLAGS) \
			-artifact_prefix=$(FUZZ_DIR)/crash-$$h- \
			$$corpus >$(FUZZ_DIR)/$$h.log 2>&1; then \
			tail -n 40 $(FUZZ_DIR)/$$h.log; \
			echo "fuzz: $$h FAILED (log $(FUZZ_DIR)/$$h.log," \
				"input $(FUZZ_DIR)/crash-$$h-*)"; \
			status=1; failed="$$failed $$h"; \
		else \
			grep -h "stat::number_of_executed_units" \
				$(FUZZ_DIR)/$$h.log | sed 's/^/fuzz:   /'; \
		fi; \
	done; \
	if [ $$status -ne 0 ]; then echo "fuzz: failed:$$failed"; fi; \
	exit $$status
endef

fuzz: fuzz-build
	$(call fuzz_run_all,$(FUZZ_SECONDS))

# make check runs this: a machine without clang's libFuzzer runtime skips
# it rather than failing the whole check.
fuzz-smoke:
	@mkdir -p $(FUZZ_DIR)
	@printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
		'{ (void)d; (void)n; return 0; }' > $(FUZZ_DIR)/probe.c
	@if $(FUZZ_CC) $(FUZZ_SAN) -o $(FUZZ_DIR)/probe $(FUZZ_DIR)/probe.c \
		>/dev/null 2>&1; then \
		$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) \
			BUILD=$(BUILD) FUZZ_CC=$(FUZZ_CC) fuzz-smoke-run; \
	else \
		echo "fuzz-smoke: SKIPPED: '$(FUZZ_CC)' cannot build a" \
			"libFuzzer binary (apt-get install clang" \
			"libclang-rt-14-dev)"; \
	fi

.PHONY: fuzz-smoke-run
fuzz-smoke-run: fuzz-build
	$(call fuzz_run_all,$(FUZZ_SMOKE_SECONDS))

# The seed generator is ordinary code: the project's compiler, no fuzzer.
$(FUZZ_GEN): tests/fuzz/gen_corpus.c common/proto.c common/diff.c \
		common/config.c common/auth.c common/reliable.c \
		common/mem.c $(FUZZ_BASE_SRC) $(FUZZ_HDRS)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Werror -Wshadow \
		-Wstrict-prototypes -Wmissing-prototypes -D_GNU_SOURCE \
		-Icommon -Ireflector -Itests/fuzz $(FUZZ_PKG_CFLAGS) -o $@ \
		$(filter %.c,$^) $(FUZZ_PKG_LIBS)

fuzz-corpus: $(FUZZ_GEN)
	rm -rf tests/fuzz/corpus
	$(FUZZ_GEN) conf/4+4.ini tests/fuzz/corpus
