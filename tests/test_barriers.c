/* Barriers on one reflector (reflector/barriers.c): completed once every
 * cluster arrived, a second arrival dropped, several ids pending. */
#include "unit.h"

#include <string.h>

#include "home_util.h"

static void test_barrier_completes_with_all_clusters(void)
{
	lm_home *h = setup("conf/4+4.ini");
	bool to_c0 = false, to_c1 = false;

	flush1(h, C0, 7, 0, "x");
	flush1(h, C1, 9, 0, "y");
	flush1(h, C1, 9, 1, "z");
	oneway(h, C0, LM_MSG_BARRIER, 1, 0);
	CU_ASSERT(cap.n == 0);
	oneway(h, C1, LM_MSG_BARRIER, 1, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	for (size_t i = 0; i < 2; i++) {
		const struct captured *c = &cap.v[i];

		CU_ASSERT(c->how == HOW_SEND);
		CU_ASSERT(c->m.type == LM_MSG_RELEASE);
		CU_ASSERT(c->m.id == 1);
		CU_ASSERT(c->m.run == RUN);
		CU_ASSERT(c->m.nnotices == 2);
		CU_ASSERT(has_notice(c, 7, 1));
		CU_ASSERT(has_notice(c, 9, 2)); /* one entry, latest */
		to_c0 |= c->node == C0;
		to_c1 |= c->node == C1;
	}
	CU_ASSERT(to_c0 && to_c1);
	CU_ASSERT(lm_home_stats(h)->barriers == 1);

	/* The epoch was cleared: the next barrier carries nothing. */
	cap_clear();
	oneway(h, C1, LM_MSG_BARRIER, 2, 0);
	oneway(h, C0, LM_MSG_BARRIER, 2, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	CU_ASSERT(cap.v[0].m.id == 2 && cap.v[0].m.nnotices == 0);
	CU_ASSERT(cap.v[1].m.id == 2 && cap.v[1].m.nnotices == 0);
	teardown(h);
}

static void test_barrier_second_arrival_dropped(void)
{
	lm_home *h = setup("conf/4+4.ini");

	oneway(h, C0, LM_MSG_BARRIER, 3, 0);
	oneway(h, C0, LM_MSG_BARRIER, 3, 0);
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 1);
	oneway(h, C1, LM_MSG_BARRIER, 3, 0);
	CU_ASSERT(cap.n == 2);
	CU_ASSERT(lm_home_stats(h)->barriers == 1);
	teardown(h);
}

static void test_barriers_with_different_ids_pending(void)
{
	lm_home *h = setup("conf/4+4.ini");

	oneway(h, C0, LM_MSG_BARRIER, 10, 0);
	oneway(h, C0, LM_MSG_BARRIER, 11, 0);
	oneway(h, C1, LM_MSG_BARRIER, 11, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	CU_ASSERT(cap.v[0].m.id == 11 && cap.v[1].m.id == 11);
	cap_clear();
	oneway(h, C1, LM_MSG_BARRIER, 10, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	CU_ASSERT(cap.v[0].m.id == 10 && cap.v[1].m.id == 10);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 0);
	teardown(h);
}

/* issue 42: every rank of a cluster left (GONE from its lemuriad): a
 * barrier the other cluster waits in ends the run at once, naming the
 * cluster and its last rank, whether the wait began before or after;
 * once only; a run without waiters goes on. */
static void check_gone_abort(size_t from)
{
	static const char want[] = "barrier 4 can never complete: every "
				   "rank of cluster c1 left the run (the "
				   "last, rank 6)";
	size_t n = 0;

	for (size_t i = from; i < cap.n; i++)
		n += cap.v[i].m.type == LM_MSG_ABORT && cap.v[i].m.data &&
		     memmem(cap.v[i].m.data, cap.v[i].m.data_len, want,
			    sizeof(want) - 1);
	CU_ASSERT(n >= 1);
}

static void test_barrier_waiting_for_a_cluster_gone(void)
{
	lm_home *h = setup("conf/4+4.ini");

	/* gone first, nobody waits: nothing; then c0 arrives */
	oneway(h, C1, LM_MSG_GONE, 0, 6);
	CU_ASSERT(cap.n == 0);
	oneway(h, C0, LM_MSG_BARRIER, 4, 0);
	check_gone_abort(0);
	CU_ASSERT(lm_home_stats(h)->barriers == 0);
	teardown(h);

	/* c0 waits first, then c1 goes */
	h = setup("conf/4+4.ini");
	oneway(h, C0, LM_MSG_BARRIER, 4, 0);
	CU_ASSERT(cap.n == 0);
	oneway(h, C1, LM_MSG_GONE, 0, 6);
	check_gone_abort(0);
	teardown(h);
}

/* issue 42: the clusters of a reflector all wait, in two barriers: the
 * run ends naming both (a program that sent half its ranks elsewhere). */
static void test_clusters_in_two_barriers_end_the_run(void)
{
	static const char want[] = "barriers 5 and 4 are waited in at once "
				   "(cluster c1 in 5, cluster c0 in 4)";
	lm_home *h = setup("conf/4+4.ini");
	size_t n = 0;

	oneway(h, C0, LM_MSG_BARRIER, 4, 0);
	CU_ASSERT(cap.n == 0);
	oneway(h, C1, LM_MSG_BARRIER, 5, 0);
	for (size_t i = 0; i < cap.n; i++)
		n += cap.v[i].m.type == LM_MSG_ABORT && cap.v[i].m.data &&
		     memmem(cap.v[i].m.data, cap.v[i].m.data_len, want,
			    sizeof(want) - 1);
	CU_ASSERT(n >= 1);
	CU_ASSERT(lm_home_stats(h)->barriers == 0);
	teardown(h);
}

LM_TEST_SUITE("barriers",
	      LM_TEST(test_barrier_completes_with_all_clusters),
	      LM_TEST(test_barrier_second_arrival_dropped),
	      LM_TEST(test_barriers_with_different_ids_pending),
	      LM_TEST(test_barrier_waiting_for_a_cluster_gone),
	      LM_TEST(test_clusters_in_two_barriers_end_the_run))
