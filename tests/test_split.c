/* Lists split by home (reflector/split.c): one FLUSH over pages of two
 * homes, and the notices its barrier's RELEASE brings. */
#include "unit.h"

#include "root_util.h"

/* One list over pages of both homes is split; the barrier's RELEASE, sent
 * by barrier 1's manager (r1) through both reflectors, names every page
 * written in the epoch, also false sharing of a page by two clusters. */
static void test_flush_split_and_barrier_notices(void)
{
	const struct net_msg *r = NULL;
	const struct lm_notice *n;
	struct dlist d = { .len = 0 };
	uint32_t v;

	setup("conf/2x2-two-reflectors.ini");
	dl_text(&d, 0, 0, "zero");
	dl_text(&d, 8, 0, "eight");
	flush(C0, 0, &d);
	flush1(C1, 2, 8, 100, "other"); /* same page, other bytes */
	flush1(C2, 4, 16, 0, "sixteen");
	oneway(C0, LM_MSG_BARRIER, 1, 0);
	oneway(C1, LM_MSG_BARRIER, 1, 0);
	oneway(C2, LM_MSG_BARRIER, 1, 0);
	pump();
	CU_ASSERT(net.ndown == 0); /* c3 has not arrived */
	oneway(C3, LM_MSG_BARRIER, 1, 0);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT(down_to(C1, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT(down_to(C2, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_RELEASE, &r) == 1);
	CU_ASSERT(r->m.id == 1 && r->m.nnotices == 3);
	n = notice_of(r, 0);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->base == 0 && n->writer == 0 &&
		  n->wcluster == 0);
	n = notice_of(r, 8);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 2 && n->base == 0 &&
		  n->writer == LM_WRITER_MANY && n->wcluster == LM_WRITER_MANY);
	n = notice_of(r, 16);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->writer == 4 && n->wcluster == 2);
	CU_ASSERT(memcmp(master(8, &v), "eight", 5) == 0);
	CU_ASSERT(memcmp(master(8, &v) + 100, "other", 5) == 0 && v == 2);
	CU_ASSERT(memcmp(master(0, &v), "zero", 4) == 0 && v == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->barriers == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->barriers == 0);
	/* the next epoch starts empty, with a new base */
	down_clear();
	flush1(C3, 6, 8, 200, "late");
	barrier_all(2);
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_RELEASE, &r) == 1);
	CU_ASSERT(r->m.nnotices == 1);
	n = notice_of(r, 8);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 3 && n->base == 2 && n->writer == 6);
	teardown();
}

LM_TEST_SUITE("split",
	      LM_TEST(test_flush_split_and_barrier_notices))
