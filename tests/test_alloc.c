/* The allocator (reflector/alloc.c): alignment, reuse after FREE,
 * exhaustion, bad FREE, and ids. */
#include "unit.h"

#include "home_util.h"

static void test_alloc_alignment(void)
{
	lm_home *h = setup("conf/4+4.ini");
	uint64_t off;

	CU_ASSERT(alloc(h, 10, 0, 0, &off) == 0 && off == 0);
	CU_ASSERT(alloc(h, 10, 0, 0, &off) == 0 && off == 64);
	CU_ASSERT(alloc(h, PAGE, 0, 0, &off) == 0 && off == PAGE);
	CU_ASSERT(alloc(h, 100, 1024, 0, &off) == 0 && off == 1024);
	CU_ASSERT(alloc(h, 1, 0, 0, &off) == 0 && off == 128);
	CU_ASSERT(alloc(h, 3 * PAGE + 1, 0, 0, &off) == 0 &&
		  off == 2 * PAGE);
	CU_ASSERT(alloc(h, 1, 8, 0, &off) == 0 && off == 192);
	CU_ASSERT(alloc(h, 64, 3, 0, &off) == LM_EINVAL);
	CU_ASSERT(alloc(h, 0, 0, 0, &off) == LM_EINVAL);
	CU_ASSERT(lm_home_stats(h)->allocs == 7);
	teardown(h);
}

static void test_alloc_reuse_after_free(void)
{
	lm_home *h = setup("conf/4+4.ini");
	uint64_t a, b, c, off;

	CU_ASSERT(alloc(h, 1000, 0, 0, &a) == 0 && a == 0);
	CU_ASSERT(alloc(h, 1000, 0, 0, &b) == 0 && b == 1024);
	CU_ASSERT(alloc(h, 1000, 0, 0, &c) == 0 && c == 2048);
	CU_ASSERT(free_off(h, a) == 0);
	CU_ASSERT(alloc(h, 500, 0, 0, &off) == 0 && off == 0);
	CU_ASSERT(free_off(h, off) == 0);
	/* Freed neighbours coalesce: the whole region is one hole again. */
	CU_ASSERT(free_off(h, c) == 0);
	CU_ASSERT(free_off(h, b) == 0);
	CU_ASSERT(alloc(h, ARENA, 0, 0, &off) == 0 && off == 0);
	teardown(h);
}

/* The arena is the region minus its last page, which lm_distribute uses:
 * no allocation may ever cover that page. */
static void test_alloc_out_of_memory(void)
{
	lm_home *h = setup("conf/2.ini");
	uint64_t off;

	CU_ASSERT(alloc(h, ARENA, 0, 0, &off) == 0 && off == 0);
	CU_ASSERT(alloc(h, 1, 0, 0, &off) == LM_ENOMEM);
	CU_ASSERT(free_off(h, 0) == 0);
	CU_ASSERT(alloc(h, ARENA + 1, 0, 0, &off) == LM_ENOMEM);
	CU_ASSERT(alloc(h, 64ull << 20, 0, 0, &off) == LM_ENOMEM);
	CU_ASSERT(alloc(h, 64, 128ull << 20, 0, &off) == LM_ENOMEM);
	CU_ASSERT(alloc(h, UINT64_MAX, 0, 0, &off) == LM_ENOMEM);
	CU_ASSERT(alloc(h, 32ull << 20, 0, 0, &off) == 0 && off == 0);
	CU_ASSERT(alloc(h, ARENA - (32ull << 20), 0, 0, &off) == 0 &&
		  off == 32ull << 20);
	CU_ASSERT(alloc(h, 64, 0, 0, &off) == LM_ENOMEM);
	teardown(h);
}

static void test_bad_free(void)
{
	lm_home *h = setup("conf/4+4.ini");
	uint64_t a, off;

	CU_ASSERT(free_off(h, 12345) == LM_EINVAL);
	CU_ASSERT(alloc(h, 256, 0, 0, &a) == 0);
	CU_ASSERT(free_off(h, a + 64) == LM_EINVAL); /* inside, not start */
	CU_ASSERT(free_off(h, a) == 0);
	CU_ASSERT(free_off(h, a) == LM_EINVAL);      /* double free */
	CU_ASSERT(alloc(h, 256, 0, 0, &off) == 0 && off == a);
	teardown(h);
}

static void test_alloc_ids(void)
{
	lm_home *h = setup("conf/4+4.ini");
	uint64_t off;

	CU_ASSERT(alloc(h, 4, 0, LM_ALLOC_KIND_LOCK, &off) == 0 && off == 1);
	CU_ASSERT(alloc(h, 2, 0, LM_ALLOC_KIND_LOCK, &off) == 0 && off == 5);
	CU_ASSERT(alloc(h, 1, 0, LM_ALLOC_KIND_BARRIER, &off) == 0 &&
		  off == 1);
	CU_ASSERT(alloc(h, 1, 0, LM_HOME_ID_KINDS, &off) == LM_EINVAL);
	CU_ASSERT(alloc(h, 0, 0, LM_ALLOC_KIND_LOCK, &off) == LM_EINVAL);
	CU_ASSERT(alloc(h, 1, 64, LM_ALLOC_KIND_LOCK, &off) == LM_EINVAL);
	CU_ASSERT(alloc(h, 1ull << 32, 0, LM_ALLOC_KIND_BARRIER, &off) ==
		  LM_ENOMEM);
	CU_ASSERT(alloc(h, UINT32_MAX - 1, 0, LM_ALLOC_KIND_BARRIER, &off) ==
		  0 && off == 2);
	CU_ASSERT(alloc(h, 1, 0, LM_ALLOC_KIND_BARRIER, &off) == LM_ENOMEM);
	/* Ids take no memory. */
	CU_ASSERT(alloc(h, 64, 0, 0, &off) == 0 && off == 0);
	CU_ASSERT(lm_home_stats(h)->allocs == 5);
	teardown(h);
}

LM_TEST_SUITE("alloc",
	      LM_TEST(test_alloc_alignment),
	      LM_TEST(test_alloc_reuse_after_free),
	      LM_TEST(test_alloc_out_of_memory),
	      LM_TEST(test_bad_free),
	      LM_TEST(test_alloc_ids))
