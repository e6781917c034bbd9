/* How far read faults reach (liblemuria/reach.c): each kind's depth
 * follows how many of its samples the program read, within 0..max, with
 * a probe now and then at 0; samples are taken on one fault in
 * LM_REACH_EVERY, a bounded number awaiting their answer. */
#include "unit.h"

#include <stdbool.h>
#include <stdint.h>

#include "reach.h"

/* One fault of `kind` that brings `n` pages along (page numbers from
 * `first`); its sample, if any, is read or not at once.  Returns whether
 * the fault sampled. */
static bool fault(struct lm_reach *r, enum lm_reach_kind kind, uint32_t n,
		  uint32_t first, bool read)
{
	uint32_t depth = lm_reach_depth(r, kind), pick;

	if (n > depth)
		n = depth;
	if (!lm_reach_sample(r, kind, n, &pick))
		return false;
	CU_ASSERT(pick < n);
	lm_reach_add(r, first + pick, kind);
	if (read)
		CU_ASSERT_TRUE(lm_reach_touched(r, first + pick));
	return true;
}

/* Faults with every sample answered `read` at the next release, until
 * the kind's depth changes (or a bound); returns the faults taken. */
static unsigned until_change(struct lm_reach *r, enum lm_reach_kind kind,
			     bool read)
{
	uint32_t was = r->depth[kind];
	unsigned faults = 0;

	while (r->depth[kind] == was && faults < 1000) {
		fault(r, kind, 31, 100, read);
		lm_reach_settle(r);
		faults++;
	}
	return faults;
}

static void test_reach_starts_at_max_and_clamps(void)
{
	struct lm_reach r;

	lm_reach_init(&r, 31);
	CU_ASSERT_EQUAL(lm_reach_depth(&r, LM_REACH_AFTER), 31);
	CU_ASSERT_EQUAL(lm_reach_depth(&r, LM_REACH_STRIDE), 31);
	lm_reach_init(&r, 1000);
	CU_ASSERT_EQUAL(r.max, 255);
	CU_ASSERT_EQUAL(lm_reach_depth(&r, LM_REACH_AFTER), 255);
}

/* Unread samples take a kind down, 31 15 7 3 1 0, a window of
 * LM_REACH_WINDOW samples a step; the other kind stays. */
static void test_unread_samples_make_a_kind_shallower(void)
{
	static const uint32_t steps[] = { 15, 7, 3, 1, 0 };
	struct lm_reach r;

	lm_reach_init(&r, 31);
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		unsigned faults = until_change(&r, LM_REACH_AFTER, false);

		CU_ASSERT_EQUAL(r.depth[LM_REACH_AFTER], steps[i]);
		/* a sample every LM_REACH_EVERY faults */
		CU_ASSERT(faults <= LM_REACH_WINDOW * LM_REACH_EVERY);
	}
	CU_ASSERT_EQUAL(r.depth[LM_REACH_STRIDE], 31);
	CU_ASSERT_EQUAL(r.stats.shallower[LM_REACH_AFTER], 5);
	CU_ASSERT_EQUAL(r.stats.read[LM_REACH_AFTER], 0);
	CU_ASSERT_EQUAL(r.stats.samples[LM_REACH_AFTER],
			5 * LM_REACH_WINDOW);
	/* it stays at 0 while its probes go unread */
	CU_ASSERT_EQUAL(until_change(&r, LM_REACH_AFTER, false), 1000);
}

/* At 0 a kind brings one page on one fault in LM_REACH_PROBE, always
 * sampled; read probes take it up again, 0 1 3 7 15 31, and no further. */
static void test_read_probes_make_a_kind_deeper(void)
{
	static const uint32_t steps[] = { 1, 3, 7, 15, 31 };
	struct lm_reach r;
	unsigned probes = 0;

	lm_reach_init(&r, 31);
	r.depth[LM_REACH_STRIDE] = 0;
	for (unsigned i = 0; i < 2 * LM_REACH_PROBE; i++)
		probes += lm_reach_depth(&r, LM_REACH_STRIDE);
	CU_ASSERT_EQUAL(probes, 2);
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		until_change(&r, LM_REACH_STRIDE, true);
		CU_ASSERT_EQUAL(r.depth[LM_REACH_STRIDE], steps[i]);
	}
	CU_ASSERT_EQUAL(until_change(&r, LM_REACH_STRIDE, true), 1000);
	CU_ASSERT_EQUAL(r.depth[LM_REACH_STRIDE], 31);
	CU_ASSERT_EQUAL(r.depth[LM_REACH_AFTER], 31);
}

/* Between a third and a half read, the depth stays; a window is judged
 * whole, whatever the order of its answers. */
static void test_middling_samples_keep_the_depth(void)
{
	struct lm_reach r;

	lm_reach_init(&r, 31);
	r.depth[LM_REACH_AFTER] = 7;
	for (unsigned w = 0; w < 10; w++)
		for (unsigned i = 0; i < LM_REACH_WINDOW; i++) {
			/* 3 of 8 read: not under a third, not half */
			while (!fault(&r, LM_REACH_AFTER, 7, 50, i % 3 == 1))
				;
			lm_reach_settle(&r);
		}
	CU_ASSERT_EQUAL(r.depth[LM_REACH_AFTER], 7);
	CU_ASSERT_EQUAL(r.stats.samples[LM_REACH_AFTER],
			10 * LM_REACH_WINDOW);
	CU_ASSERT_EQUAL(r.stats.read[LM_REACH_AFTER], 10 * 3);
}

/* At most LM_REACH_PENDING samples wait; a settle answers all of them
 * (unread), a touch only its own; a touch of another page is no answer;
 * max 0 samples nothing and never probes. */
static void test_pending_samples_are_bounded(void)
{
	struct lm_reach r;
	uint32_t pick = 99, taken = 0;

	lm_reach_init(&r, 31);
	CU_ASSERT_FALSE(lm_reach_sample(&r, LM_REACH_AFTER, 0, &pick));
	for (uint32_t i = 0; i < 4 * LM_REACH_PENDING; i++) {
		lm_reach_depth(&r, LM_REACH_AFTER);
		if (lm_reach_sample(&r, LM_REACH_AFTER, 5, &pick)) {
			CU_ASSERT(pick < 5);
			lm_reach_add(&r, 1000 + i, LM_REACH_AFTER);
			taken++;
		}
	}
	CU_ASSERT_EQUAL(taken, LM_REACH_PENDING);
	CU_ASSERT_EQUAL(r.npending, LM_REACH_PENDING);
	lm_reach_add(&r, 7, LM_REACH_AFTER); /* no room: dropped */
	CU_ASSERT_FALSE(lm_reach_touched(&r, 7));
	CU_ASSERT_FALSE(lm_reach_touched(&r, 999));
	CU_ASSERT_TRUE(lm_reach_touched(&r, 1000 + 2 * LM_REACH_EVERY - 1));
	CU_ASSERT_EQUAL(r.npending, LM_REACH_PENDING - 1);
	CU_ASSERT_EQUAL(r.stats.read[LM_REACH_AFTER], 1);
	lm_reach_settle(&r);
	CU_ASSERT_EQUAL(r.npending, 0);
	CU_ASSERT_EQUAL(r.stats.samples[LM_REACH_AFTER], LM_REACH_PENDING);
	CU_ASSERT_EQUAL(r.stats.read[LM_REACH_AFTER], 1);

	lm_reach_init(&r, 0);
	for (unsigned i = 0; i < 4 * LM_REACH_PROBE; i++)
		CU_ASSERT_EQUAL(lm_reach_depth(&r, LM_REACH_AFTER), 0);
}

LM_TEST_SUITE("reach",
	      LM_TEST(test_reach_starts_at_max_and_clamps),
	      LM_TEST(test_unread_samples_make_a_kind_shallower),
	      LM_TEST(test_read_probes_make_a_kind_deeper),
	      LM_TEST(test_middling_samples_keep_the_depth),
	      LM_TEST(test_pending_samples_are_bounded))
