# SPLASH-2 programs, included by the root Makefile after it has defined
# BUILD, CC, CFLAGS_ALL and LDFLAGS_ALL.  Each program is one PARMACS m4
# source; m4 with a macro file turns it into C under $(BUILD)/splash2/gen/
# and the C is compiled with the project flags.  See docs/splash2.md.

SPLASH2_M4 ?= m4

# $(call splash2_pthread,NAME,SOURCE): $(BUILD)/splash2/NAME-pthread from
# SOURCE with the pthreads macros.  The C is written to a temporary file
# first so a failed m4 run leaves nothing that looks up to date.
define splash2_pthread
$(BUILD)/splash2/gen/$(1)-pthread.c: $(2) splash2/macros/pthread.m4
	@mkdir -p $$(dir $$@)
	$(SPLASH2_M4) splash2/macros/pthread.m4 $(2) > $$@.tmp
	mv $$@.tmp $$@

$(BUILD)/splash2/$(1)-pthread: $(BUILD)/splash2/gen/$(1)-pthread.c \
		splash2/common/splash_util.h
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_ALL) -Isplash2/common -o $$@ $$< $$(LDFLAGS_ALL) -lpthread -lm

SPLASH2_BINS += $(BUILD)/splash2/$(1)-pthread
endef

$(eval $(call splash2_pthread,lu,splash2/lu/lu.C))

# Quick correctness run of the baselines (a few seconds).
.PHONY: splash2-check
SPLASH2_PT := $(BUILD)/splash2
splash2-check: $(SPLASH2_PT)/lu-pthread $(SPLASH2_PT)/lucontig-pthread \
		$(SPLASH2_PT)/radix-pthread $(SPLASH2_PT)/fft-pthread \
		$(SPLASH2_PT)/ocean-pthread $(SPLASH2_PT)/initenv-pthread \
		$(SPLASH2_PT)/funcptr-pthread $(SPLASH2_PT)/stdinput-pthread \
		$(SPLASH2_PT)/spinflag-pthread $(SPLASH2_PT)/globals-pthread \
		$(SPLASH2_PT)/publish-pthread $(SPLASH2_PT)/treewave-pthread \
		$(SPLASH2_PT)/treemerge-pthread
	$(SPLASH2_PT)/initenv-pthread 4 | grep -q 'initenv: 4 processes: PASSED'
	echo 4 | $(SPLASH2_PT)/stdinput-pthread | grep -q 'stdinput: 4 processes: PASSED'
	$(SPLASH2_PT)/funcptr-pthread 4 | grep -q 'funcptr: 4 processes: PASSED'
	$(SPLASH2_PT)/spinflag-pthread 4 | grep -q 'spinflag: 4 processes: PASSED'
	$(SPLASH2_PT)/globals-pthread 4 | grep -q 'globals: 4 processes: PASSED'
	$(SPLASH2_PT)/publish-pthread 4 | grep -q 'publish: 4 processes: PASSED'
	$(SPLASH2_PT)/treewave-pthread 4 | grep -q 'treewave: 4 processes: PASSED'
	$(SPLASH2_PT)/treemerge-pthread 4 | grep -q 'treemerge: 4 processes: PASSED'
	$(SPLASH2_PT)/lu-pthread -n512 -b16 -p1 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/lu-pthread -n512 -b16 -p4 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/lu-pthread -n130 -b16 -p6 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/lucontig-pthread -n130 -b16 -p6 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/radix-pthread -p4 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/radix-pthread -n20000 -r4 -m65536 -p3 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/fft-pthread -m16 -p4 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/ocean-pthread -n66 -p4 -t | grep -q 'TEST PASSED'
	$(SPLASH2_PT)/ocean-pthread -n130 -p8 -k2 -t | grep -q 'TEST PASSED'

# $(call splash2_lemuria,NAME,SOURCE): $(BUILD)/splash2/NAME from SOURCE
# with the Lemuria macros, linked with the shared liblemuria (CREATE
# needs the library state outside the executable data segment).
define splash2_lemuria
$(BUILD)/splash2/gen/$(1).c: $(2) splash2/macros/lemuria.m4
	@mkdir -p $$(dir $$@)
	$(SPLASH2_M4) splash2/macros/lemuria.m4 $(2) > $$@.tmp
	mv $$@.tmp $$@

$(BUILD)/splash2/$(1): $(BUILD)/splash2/gen/$(1).c $(LIB_SO) \
		splash2/common/splash_util.h
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_API) -Isplash2/common -o $$@ $$< -L$(BUILD)/lib -llemuria \
		-Wl,-rpath,'$$$$ORIGIN/../lib' $$(LDFLAGS_ALL) -lm

SPLASH2_BINS += $(BUILD)/splash2/$(1)
endef

$(eval $(call splash2_lemuria,lu,splash2/lu/lu.C))

$(eval $(call splash2_pthread,lucontig,splash2/lucontig/lucontig.C))
$(eval $(call splash2_lemuria,lucontig,splash2/lucontig/lucontig.C))
$(eval $(call splash2_pthread,radix,splash2/radix/radix.C))
$(eval $(call splash2_lemuria,radix,splash2/radix/radix.C))
$(eval $(call splash2_pthread,fft,splash2/fft/fft.C))
$(eval $(call splash2_lemuria,fft,splash2/fft/fft.C))
$(eval $(call splash2_pthread,ocean,splash2/ocean/ocean.C))
$(eval $(call splash2_lemuria,ocean,splash2/ocean/ocean.C))
# Patterns of the original codes that the runtime must take as they are
# (issue 41): small programs of our own, built both ways.
$(eval $(call splash2_pthread,initenv,splash2/patterns/initenv.C))
$(eval $(call splash2_lemuria,initenv,splash2/patterns/initenv.C))
$(eval $(call splash2_pthread,funcptr,splash2/patterns/funcptr.C))
$(eval $(call splash2_lemuria,funcptr,splash2/patterns/funcptr.C))
$(eval $(call splash2_pthread,stdinput,splash2/patterns/stdinput.C))
$(eval $(call splash2_lemuria,stdinput,splash2/patterns/stdinput.C))
$(eval $(call splash2_pthread,spinflag,splash2/patterns/spinflag.C))
$(eval $(call splash2_lemuria,spinflag,splash2/patterns/spinflag.C))
$(eval $(call splash2_pthread,globals,splash2/patterns/globals.C))
$(eval $(call splash2_lemuria,globals,splash2/patterns/globals.C))
$(eval $(call splash2_pthread,publish,splash2/patterns/publish.C))
$(eval $(call splash2_lemuria,publish,splash2/patterns/publish.C))
$(eval $(call splash2_pthread,treewave,splash2/patterns/treewave.C))
$(eval $(call splash2_lemuria,treewave,splash2/patterns/treewave.C))
$(eval $(call splash2_pthread,treemerge,splash2/patterns/treemerge.C))
$(eval $(call splash2_lemuria,treemerge,splash2/patterns/treemerge.C))
