/* The lock manager (reflector/locks.c) on one reflector: FIFO hand-off
 * with the notices of earlier holders, UNLOCK only by the holder. */
#include "unit.h"

#include "home_util.h"

static void test_lock_fifo_with_notices(void)
{
	lm_home *h = setup("conf/4+4.ini");

	lock(h, C0, 10, 5, 0);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].node == C0 &&
		  cap.v[0].req_id == 10);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_GRANT && cap.v[0].m.id == 5);
	CU_ASSERT(cap.v[0].m.nnotices == 0);
	cap_clear();
	/* a waiter of another cluster: the holder's cluster is asked for
	 * the token back, once */
	lock(h, C1, 20, 5, 4);
	lock(h, C0, 11, 5, 1);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_SEND && cap.v[0].node == C0);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_RECALL && cap.v[0].m.id == 5 &&
		  cap.v[0].m.rank == 0);
	cap_clear();

	/* The holder writes, then releases: the next waiter (FIFO) gets the
	 * lock with the page's new version, and is asked for it back since
	 * a client of C0 waits. */
	flush1(h, C0, 9, 0, "w");
	oneway(h, C0, LM_MSG_UNLOCK, 5, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].node == C1 &&
		  cap.v[0].req_id == 20);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_GRANT && cap.v[0].m.id == 5);
	CU_ASSERT(has_notice(&cap.v[0], 9, 1));
	CU_ASSERT(cap.v[1].m.type == LM_MSG_RECALL && cap.v[1].node == C1 &&
		  cap.v[1].m.rank == 4);
	cap_clear();
	oneway(h, C1, LM_MSG_UNLOCK, 5, 4);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].node == C0 && cap.v[0].req_id == 11);
	cap_clear();
	oneway(h, C0, LM_MSG_UNLOCK, 5, 1);
	CU_ASSERT(cap.n == 0);
	/* Free again: granted at once. */
	lock(h, C1, 21, 5, 5);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].node == C1 && cap.v[0].req_id == 21);
	CU_ASSERT(lm_home_stats(h)->lock_grants == 4);
	CU_ASSERT(lm_home_stats(h)->lock_recalls == 2);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 0);
	teardown(h);
}

static void test_unlock_by_non_holder_dropped(void)
{
	lm_home *h = setup("conf/4+4.ini");

	lock(h, C0, 1, 8, 2);
	lock(h, C1, 2, 8, 6);
	cap_clear();
	oneway(h, C1, LM_MSG_UNLOCK, 8, 6);  /* waiting, not holding */
	oneway(h, C0, LM_MSG_UNLOCK, 8, 3);  /* never asked */
	oneway(h, C0, LM_MSG_UNLOCK, 99, 2); /* unknown lock */
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 3);
	/* A rank of another cluster cannot speak for this one. */
	lock(h, C0, 3, 8, 6);
	oneway(h, C1, LM_MSG_UNLOCK, 8, 2);
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 5);
	/* A second LOCK of a rank already queued is dropped too. */
	lock(h, C1, 4, 8, 6);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 6);
	/* The real holder still hands over, to the one queued waiter. */
	oneway(h, C0, LM_MSG_UNLOCK, 8, 2);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].node == C1 && cap.v[0].req_id == 2);
	cap_clear();
	oneway(h, C1, LM_MSG_UNLOCK, 8, 6);
	CU_ASSERT(cap.n == 0);
	teardown(h);
}

/* A GRANT carries what the lock's earlier holders published, with the
 * same base and writer as the barrier that ends the epoch; notices of an
 * epoch every process has left are no longer carried. */
static void test_notice_in_grant_keeps_epoch_base(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const struct lm_notice *n;
	const struct captured *c;

	flush1_as(h, C1, 4, 30, 0, "x");
	c = barrier_44(h, 1);
	CU_ASSERT(notice_of(c, 30) != NULL);
	lock(h, C1, 2, 7, 4);
	flush1_as(h, C1, 4, 30, 1, "y");
	oneway(h, C1, LM_MSG_UNLOCK, 7, 4);
	cap_clear();
	lock(h, C0, 3, 7, 0);
	CU_ASSERT_FATAL(cap.n == 1 && cap.v[0].m.type == LM_MSG_GRANT);
	n = notice_of(&cap.v[0], 30);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 2 && n->base == 1 && n->writer == 4 &&
		  n->wcluster == 1);
	flush1_as(h, C1, 4, 30, 2, "z");
	c = barrier_44(h, 2);
	n = notice_of(c, 30);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 3 && n->base == 1 && n->writer == 4);
	/* released in epoch 2 by rank 0, who wrote nothing since: page 30's
	 * notice of epoch 1 went out with barrier 2 and is dropped */
	oneway(h, C0, LM_MSG_UNLOCK, 7, 0);
	cap_clear();
	lock(h, C1, 4, 7, 5);
	CU_ASSERT_FATAL(cap.n == 1 && cap.v[0].m.type == LM_MSG_GRANT);
	CU_ASSERT(notice_of(&cap.v[0], 30) == NULL);
	teardown(h);
}

/* A cluster's PROBE (lemuriad/locks.c, "Cycles") goes to the cluster the
 * lock was granted to, naming that rank, its chain as it came; a probe
 * of a free lock ends here. */
static void test_probe_goes_to_the_holders_cluster(void)
{
	lm_home *h = setup("conf/4+4.ini");
	static const uint8_t chain[8] = { 1, 0, 0, 0, 5, 0, 0, 0 };
	struct lm_msg p = msg(LM_MSG_PROBE);

	lock(h, C1, 10, 5, 4);
	cap_clear();
	p.id = 5;
	p.version = 77;
	p.data = chain;
	p.data_len = sizeof(chain);
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &p);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_SEND && cap.v[0].node == C1);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_PROBE && cap.v[0].m.id == 5 &&
		  cap.v[0].m.rank == 4 && cap.v[0].m.version == 77);
	CU_ASSERT(cap.v[0].m.data_len == sizeof(chain));
	cap_clear();
	oneway(h, C1, LM_MSG_UNLOCK, 5, 4);
	cap_clear();
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &p);
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 0);
	teardown(h);
}

LM_TEST_SUITE("lock_manager",
	      LM_TEST(test_lock_fifo_with_notices),
	      LM_TEST(test_unlock_by_non_holder_dropped),
	      LM_TEST(test_notice_in_grant_keeps_epoch_base),
	      LM_TEST(test_probe_goes_to_the_holders_cluster))
