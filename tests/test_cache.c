/* The lemuriad state machine driven by hand (tests/lemuriad_util.h):
 * lemuriad/cache.c: the cluster cache within its size, least recently
 * used first. */
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

static void test_lru_bound(void)
{
	lm_lemuriad *c = setup_small();

	join_all(c, RUN);
	for (uint32_t p = 0; p < 3; p++)
		cache_page(c, p, 1, (uint8_t)p);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, 3 * 4096);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->evictions, 0);
	CU_ASSERT(is_cached(c, 0)); /* page 0 is now the most recent */
	for (uint32_t p = 3; p < 10; p++) {
		cache_page(c, p, 1, (uint8_t)p);
		CU_ASSERT(lm_lemuriad_stats(c)->cached_bytes <= 12 * 1024);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, 3 * 4096);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->evictions, 7);
	/* the three most recent stay, the rest went */
	CU_ASSERT(is_cached(c, 9));
	CU_ASSERT(is_cached(c, 8));
	CU_ASSERT(is_cached(c, 7));
	CU_ASSERT(!is_cached(c, 0));
	teardown(c);
}

static void test_lru_keeps_recently_used(void)
{
	lm_lemuriad *c = setup_small();

	join_all(c, RUN);
	for (uint32_t p = 0; p < 3; p++)
		cache_page(c, p, 1, (uint8_t)p);
	CU_ASSERT(is_cached(c, 0));
	cache_page(c, 3, 1, 3); /* evicts 1, the least recently used */
	CU_ASSERT(is_cached(c, 0));
	CU_ASSERT(is_cached(c, 2));
	CU_ASSERT(is_cached(c, 3));
	CU_ASSERT(!is_cached(c, 1));
	teardown(c);
}

LM_TEST_SUITE("cache",
	LM_TEST(test_lru_bound),
	LM_TEST(test_lru_keeps_recently_used))
