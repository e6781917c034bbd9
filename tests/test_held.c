/* Synchronisation messages on one reflector (reflector/held.c): CREATE
 * and END sent on to their clusters with the epoch's notices. */
#include "unit.h"

#include "home_util.h"

static void test_create_routed_to_target_cluster(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_msg m = msg(LM_MSG_CREATE);
	static const uint8_t image[] = "data segment";

	m.rank = 5;
	m.offset = 0x1234;
	m.data = image;
	m.data_len = sizeof(image);
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_SEND && cap.v[0].node == C1);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_CREATE);
	CU_ASSERT(cap.v[0].m.rank == 5 && cap.v[0].m.offset == 0x1234);
	CU_ASSERT(cap.v[0].m.data_len == sizeof(image) &&
		  memcmp(cap.v[0].data, image, sizeof(image)) == 0);
	cap_clear();
	m.rank = 2;
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].node == C0 && cap.v[0].m.rank == 2);
	cap_clear();
	m.rank = 8; /* no such rank */
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &m);
	m.rank = 0; /* rank 0 runs main, never created */
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 2);
	teardown(h);
}

static void test_end_routed_to_rank0_with_notices(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_msg m = msg(LM_MSG_END);

	flush1(h, C1, 4, 10, "done");
	m.rank = 6;
	m.status = 3;
	lm_home_handle(h, C1, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_SEND && cap.v[0].node == C0);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_END);
	CU_ASSERT(cap.v[0].m.rank == 6 && cap.v[0].m.status == 3);
	CU_ASSERT(cap.v[0].m.nnotices == 1 && has_notice(&cap.v[0], 4, 1));
	teardown(h);
}

LM_TEST_SUITE("held",
	      LM_TEST(test_create_routed_to_target_cluster),
	      LM_TEST(test_end_routed_to_rank0_with_notices))
