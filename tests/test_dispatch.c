/* The reflector's dispatcher (reflector/dispatch.c) on one reflector:
 * creation, run ids, JOIN and ABORT, and bad input dropped and counted. */
#include "unit.h"

#include "home_util.h"

static void test_create_rejects_bad_arguments(void)
{
	char err[256];
	struct lm_layout *l = NULL;

	CU_ASSERT_FATAL(lm_layout_load("conf/4+4.ini", &l, err,
				       sizeof(err)) == 0);
	CU_ASSERT(lm_home_create(l, C0, &out_cbs, &cap) == NULL);
	CU_ASSERT(lm_home_create(l, 9, &out_cbs, &cap) == NULL);
	CU_ASSERT(lm_home_create(NULL, R0, &out_cbs, &cap) == NULL);
	CU_ASSERT(lm_home_create(l, R0, NULL, &cap) == NULL);
	lm_home_destroy(NULL);
	lm_layout_free(l);
}

static void test_newer_run_resets_older_dropped(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_msg m;
	uint64_t off;

	flush1(h, C0, 2, 0, "old");
	CU_ASSERT(alloc(h, 64, 0, 0, &off) == 0 && off == 0);
	CU_ASSERT(alloc(h, 1, 0, LM_ALLOC_KIND_LOCK, &off) == 0 && off == 1);
	lock(h, C0, 1, 3, 0);
	oneway(h, C0, LM_MSG_BARRIER, 1, 0);
	cap_clear();

	/* One message of a newer run resets everything. */
	m = msg(LM_MSG_FETCH);
	m.run = RUN + 1;
	m.page = 2;
	lm_home_handle(h, C1, LM_REL_REQUEST, 9, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].m.run == RUN + 1);
	CU_ASSERT(cap.v[0].m.version == 0);
	CU_ASSERT(cap.v[0].data[0] == 0);
	cap_clear();

	m = msg(LM_MSG_LOCK);
	m.run = RUN + 1;
	m.id = 3;
	m.rank = 4;
	lm_home_handle(h, C1, LM_REL_REQUEST, 2, &m);
	CU_ASSERT_FATAL(cap.n == 1); /* the old holder is forgotten */
	CU_ASSERT(cap.v[0].m.type == LM_MSG_GRANT);
	cap_clear();
	m = msg(LM_MSG_BARRIER);
	m.run = RUN + 1;
	m.id = 1;
	lm_home_handle(h, C1, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT(cap.n == 0); /* c0's old arrival is forgotten */
	m = msg(LM_MSG_ALLOC);
	m.run = RUN + 1;
	m.size = 64;
	lm_home_handle(h, C1, LM_REL_REQUEST, 3, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].m.status == 0 && cap.v[0].m.offset == 0);
	cap_clear();
	m.id = LM_ALLOC_KIND_LOCK;
	m.size = 1;
	lm_home_handle(h, C1, LM_REL_REQUEST, 4, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].m.status == 0 && cap.v[0].m.offset == 1);
	cap_clear();

	/* Messages of the old run are dropped, whatever they are. */
	m = msg(LM_MSG_FETCH);
	m.page = 2;
	lm_home_handle(h, C0, LM_REL_REQUEST, 5, &m);
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_stale_run == 1);
	teardown(h);
}

static void test_older_run_dropped(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_msg m = msg(LM_MSG_FETCH);

	m.run = RUN + 1;
	lm_home_handle(h, C0, LM_REL_REQUEST, 1, &m);
	CU_ASSERT(cap.n == 1);
	cap_clear();
	m.run = RUN;
	lm_home_handle(h, C0, LM_REL_REQUEST, 2, &m);
	oneway(h, C1, LM_MSG_BARRIER, 1, 0);
	oneway(h, C0, LM_MSG_BARRIER, 1, 0);
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_stale_run == 3);
	CU_ASSERT(lm_home_stats(h)->fetches == 1);
	teardown(h);
}

static void test_bad_page_id(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const struct captured *c = fetch(h, C0, 3, NPAGES);
	const uint8_t *data;
	uint32_t version;

	CU_ASSERT(c->m.data_len == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 1);
	CU_ASSERT(lm_home_stats(h)->fetches == 0);
	c = fetch(h, C0, 4, NPAGES - 1); /* the last page is fine */
	CU_ASSERT(c->m.data_len == PAGE);
	CU_ASSERT(lm_home_page(h, NPAGES, &data, &version) == LM_EINVAL);
	flush1(h, C0, NPAGES, 0, "x");
	CU_ASSERT(lm_home_stats(h)->diffs_rejected == 1);
	CU_ASSERT(lm_home_stats(h)->flushes == 0);
	teardown(h);
}

static void test_bad_sender_kind_and_type_dropped(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_msg m = msg(LM_MSG_FETCH);
	uint16_t client0 = lm_layout_client_id(layout, 0);

	lm_home_handle(h, client0, LM_REL_REQUEST, 1, &m); /* a client */
	lm_home_handle(h, R0, LM_REL_REQUEST, 1, &m);      /* itself */
	lm_home_handle(h, LM_NODE_CONTROL, LM_REL_REQUEST, 1, &m);
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &m);       /* wrong kind */
	lm_home_handle(h, C0, LM_REL_REPLY, 1, &m);
	m = msg(LM_MSG_BARRIER);
	lm_home_handle(h, C0, LM_REL_REQUEST, 2, &m);
	m = msg(LM_MSG_LEAVE);                             /* not for R */
	lm_home_handle(h, C0, LM_REL_REQUEST, 3, &m);
	m = msg(LM_MSG_PAGE);
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 8);
	/* The BARRIER sent as a request was not counted as an arrival. */
	oneway(h, C1, LM_MSG_BARRIER, 0, 0);
	CU_ASSERT(cap.n == 0);
	teardown(h);
}

/* The writer a notice names must be a client of the cluster that sent the
 * FLUSH: anything else is bad input and nothing of the list is applied. */
static void test_flush_without_valid_rank_dropped(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const uint8_t *data;
	uint32_t version = 99;

	flush1_as(h, C0, 4, 3, 0, "x");     /* a rank of C1 */
	flush1_as(h, C1, 0, 3, 0, "x");     /* a rank of C0 */
	flush1_as(h, C0, 8, 3, 0, "x");     /* beyond the layout */
	flush1_as(h, C0, LM_WRITER_MANY, 3, 0, "x");
	CU_ASSERT(cap.n == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 4);
	CU_ASSERT(lm_home_stats(h)->flushes == 0);
	CU_ASSERT(lm_home_page(h, 3, &data, &version) == 0);
	CU_ASSERT(data == NULL && version == 0);
	flush1_as(h, C0, 3, 3, 0, "x");
	CU_ASSERT(lm_home_stats(h)->flushes == 1);
	CU_ASSERT(barrier_44(h, 1)->m.nnotices == 1);
	teardown(h);
}

static void test_join_and_abort(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_msg m = msg(LM_MSG_JOIN);
	static const char why[] = "rank 2 died";

	lm_home_handle(h, C1, LM_REL_REQUEST, 12, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].req_id == 12);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_JOIN_OK &&
		  cap.v[0].m.status == 0);
	cap_clear();
	m = msg(LM_MSG_ABORT);
	m.rank = 2;
	m.data = (const uint8_t *)why;
	m.data_len = strlen(why);
	lm_home_handle(h, C0, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_SEND && cap.v[0].node == C1);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_ABORT && cap.v[0].m.rank == 2);
	CU_ASSERT(cap.v[0].m.data_len == strlen(why));
	teardown(h);
}

LM_TEST_SUITE("dispatch",
	      LM_TEST(test_create_rejects_bad_arguments),
	      LM_TEST(test_newer_run_resets_older_dropped),
	      LM_TEST(test_older_run_dropped),
	      LM_TEST(test_bad_page_id),
	      LM_TEST(test_bad_sender_kind_and_type_dropped),
	      LM_TEST(test_flush_without_valid_rank_dropped),
	      LM_TEST(test_join_and_abort))
