/* The relay cache (reflector/relay_cache.c): FETCHes of pages homed at
 * another reflector coalesced into one, and answered from the cache. */
#include "unit.h"

#include "root_util.h"

/* Fetches of one remote page by two clusters of r0 make one FETCH to
 * its home; the copy r0 keeps answers later FETCHes that need no newer
 * version, and a FETCH that needs a newer one goes to the home again. */
static void test_router_coalesces_and_caches_pages(void)
{
	const struct net_msg *p = NULL;

	setup("conf/2x2-two-reflectors.ini");
	flush1(C1, 2, 8, 0, "v1"); /* page 8: home r1, now at version 1 */
	fetch_from(C0, 11, 8, 0);
	fetch_from(C2, 12, 8, 1);
	CU_ASSERT_EQUAL(net.qn, 1); /* one FETCH to r1 */
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->req_id == 11 && p->m.version == 1);
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->req_id == 12 && p->m.version == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_forwarded == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_coalesced == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches == 1);
	down_clear();

	fetch_from(C0, 13, 8, 1); /* from r0's cache: no message */
	CU_ASSERT_EQUAL(net.qn, 0);
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->req_id == 13 && p->m.version == 1);
	CU_ASSERT(memcmp(p->m.data, "v1", 2) == 0);
	CU_ASSERT(lm_home_stats(net.h[0])->fetch_cache_hits == 1);
	down_clear();

	flush1(C3, 6, 8, 0, "v2");
	pump();
	fetch_from(C2, 14, 8, 2); /* needs what the cache lacks */
	pump();
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->m.version == 2 && memcmp(p->m.data, "v2", 2) == 0);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_forwarded == 2);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches == 2);
	teardown();
}

LM_TEST_SUITE("relay_cache",
	      LM_TEST(test_router_coalesces_and_caches_pages))
