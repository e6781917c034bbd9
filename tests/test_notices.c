/* The lemuriad state machine driven by hand (tests/lemuriad_util.h):
 * lemuriad/notices.c: write notices keep or drop our copies (I3, the
 * sole-cluster rule). */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deltas.h"
#include "diff.h"
#include "diff_util.h"
#include "lemuriad_util.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "updates.h"

/* Sole cluster: every diff of the epoch came through us and our copy is
 * at the notice's base, so it is the home's page at the notice's version:
 * kept, with that version, holding the diffs; idempotent. */
static void test_sole_cluster_notice_keeps_copy(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n[2] = {
		{ 9, 6, 4, 1, 0 },              /* rank 1 alone */
		{ 10, 3, 2, LM_WRITER_MANY, 0 } /* two ranks, both ours */
	};
	uint32_t v;
	uint8_t b;

	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11);
	cache_page(c, 10, 2, 0x22);
	flush_page(c, 1, 9, 100, 8, 0x77);
	flush_page(c, 1, 9, 300, 8, 0x78);
	flush_page(c, 1, 10, 0, 4, 0x55);
	flush_page(c, 2, 10, 8, 4, 0x56);
	barrier_release(c, 1, n, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->kept, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 0);
	CU_ASSERT_FATAL(cached_version(c, 9, 100, &v, &b));
	CU_ASSERT_EQUAL(v, 6);
	CU_ASSERT_EQUAL(b, 0x77);
	CU_ASSERT_FATAL(cached_version(c, 9, 300, &v, &b));
	CU_ASSERT_EQUAL(b, 0x78);
	CU_ASSERT_FATAL(cached_version(c, 10, 8, &v, &b));
	CU_ASSERT_EQUAL(v, 3);
	CU_ASSERT_EQUAL(b, 0x56);
	/* the same notices again change nothing (I3: idempotent) */
	barrier_release(c, 2, n, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->kept, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 0);
	CU_ASSERT_FATAL(cached_version(c, 9, 100, &v, &b));
	CU_ASSERT_EQUAL(v, 6);
	teardown(c);
}

static void test_sole_cluster_notice_invalidates_otherwise(void)
{
	/* without updates: they would fetch pages 20 and 21 again */
	lm_lemuriad *c = setup_text(updates_off_layout);
	struct lm_notice n[4] = {
		{ 20, 5, 4, 5, 1 },                           /* cluster c1 */
		{ 21, 5, 4, LM_WRITER_MANY, LM_WRITER_MANY }, /* both */
		{ 22, 5, 3, 1, 0 },                           /* base older */
		{ 23, 5, 4, 1, 0 },                           /* copy older */
	};

	join_all(c, RUN);
	cache_page(c, 20, 4, 0x20);
	cache_page(c, 21, 4, 0x21);
	cache_page(c, 22, 4, 0x22);
	cache_page(c, 23, 3, 0x23);
	flush_page(c, 1, 22, 0, 4, 0x99);
	barrier_release(c, 1, n, 4);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->kept, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 4);
	for (uint32_t p = 20; p <= 23; p++)
		CU_ASSERT(!is_cached(c, p));
	teardown(c);
}

LM_TEST_SUITE("notices",
	LM_TEST(test_sole_cluster_notice_keeps_copy),
	LM_TEST(test_sole_cluster_notice_invalidates_otherwise))
