/* Messages between reflectors (reflector/route.c and the dispatcher
 * above it): placement, requests routed to a page's home, a lock's or
 * barrier's manager and the allocator, I2 (synchronisation held for
 * flush acks), CREATE/END/ABORT routing and bad input between
 * reflectors. */
#include "unit.h"

#include "root_util.h"

static void test_placement(void)
{
	setup("conf/2x2-two-reflectors.ini");
	CU_ASSERT(lm_home_of_page(net.layout, 0) == 0);
	CU_ASSERT(lm_home_of_page(net.layout, LM_HOME_PAGE_BLOCK - 1) == 0);
	CU_ASSERT(lm_home_of_page(net.layout, LM_HOME_PAGE_BLOCK) == 1);
	CU_ASSERT(lm_home_of_page(net.layout, 2 * LM_HOME_PAGE_BLOCK) == 0);
	CU_ASSERT(lm_home_manager_of(net.layout, 1) == 1);
	CU_ASSERT(lm_home_manager_of(net.layout, 2) == 0);
	teardown();
}

/* A FETCH of a page homed at the other reflector goes there and back. */
static void test_fetch_routed_to_home(void)
{
	const struct net_msg *p = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);
	struct dlist d = { .len = 0 };

	setup("conf/2x2-two-reflectors.ini");
	dl_text(&d, 9, 4, "nine");
	flush(C1, 2, &d); /* page 9: home r1, the writer's own reflector */
	m.page = 9;
	from_cluster(C0, REQUEST, 41, &m);
	CU_ASSERT(net.ndown == 0); /* not answered before r1 does */
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->how == REPLY && p->req_id == 41);
	CU_ASSERT(p->m.page == 9 && p->m.version == 1);
	CU_ASSERT_FATAL(p->m.data_len == 4096);
	CU_ASSERT(memcmp(p->m.data + 4, "nine", 4) == 0);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_forwarded == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches == 1);
	teardown();
}

/* I2: a reflector's barrier arrival waits until the other home has acked
 * the diffs its clusters sent before it. */
static void test_arrival_held_until_flush_acked(void)
{
	setup("conf/2x2-two-reflectors.ini");
	flush1(C0, 1, 8, 0, "x"); /* home r1: a FLUSH request r0 -> r1 */
	oneway(C0, LM_MSG_BARRIER, 2, 0);
	oneway(C2, LM_MSG_BARRIER, 2, 0);
	/* barrier 2 is managed by r0 itself: nothing may have gone to it,
	 * so the messages in flight are the FLUSH and r0's word to r1 that
	 * its clusters all wait in barrier 2 (WAITING, which I2 does not
	 * hold: it carries no change) */
	CU_ASSERT_FATAL(net.qn == 2);
	CU_ASSERT(net.q[net.qhead].m.type == LM_MSG_FLUSH);
	CU_ASSERT(net.q[(net.qhead + 1) % QMAX].m.type == LM_MSG_WAITING);
	CU_ASSERT(lm_home_stats(net.h[0])->held == 1);
	oneway(C1, LM_MSG_BARRIER, 2, 0);
	oneway(C3, LM_MSG_BARRIER, 2, 0);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT(down_to(C3, LM_MSG_RELEASE, NULL) == 1);
	teardown();
}

/* A lock managed by r1, handed from a client of r0 to one of r1: the
 * GRANT names what the first holder wrote under it. */
static void test_lock_across_reflectors_carries_notices(void)
{
	const struct net_msg *g = NULL;
	const struct lm_notice *n;
	struct lm_msg m = msg(LM_MSG_LOCK);

	setup("conf/2x2-two-reflectors.ini");
	m.id = 1;
	m.rank = 0;
	from_cluster(C0, REQUEST, 5, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_GRANT, &g) == 1);
	CU_ASSERT(g->req_id == 5 && g->m.nnotices == 0);
	m.rank = 6;
	from_cluster(C3, REQUEST, 6, &m);
	pump();
	CU_ASSERT(down_to(C3, LM_MSG_GRANT, NULL) == 0); /* waits */
	flush1(C0, 0, 16, 0, "mine"); /* home r0 */
	flush1(C0, 0, 24, 0, "also"); /* home r1 */
	oneway(C0, LM_MSG_UNLOCK, 1, 0);
	pump();
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_GRANT, &g) == 1);
	CU_ASSERT(g->req_id == 6);
	n = notice_of(g, 16);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->writer == 0);
	n = notice_of(g, 24);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->writer == 0);
	teardown();
}

/* A chain of locks across reflectors: c0 (under r0) writes page 24
 * under lock 1; c1 (under r1) takes lock 1, then releases lock 2; c3
 * (under r1 too) and c2 (under r0), taking lock 2 after it, must learn
 * of page 24 although neither r1's clusters nor lock 2's releases
 * wrote it: r1 passes on what its clusters were sent (dsmtest chain). */
static void test_lock_chain_passes_notices_on(void)
{
	const struct net_msg *g = NULL;
	struct lm_msg m = msg(LM_MSG_LOCK);

	setup("conf/2x2-two-reflectors.ini");
	m.id = 1; /* managed by r1 */
	m.rank = 0;
	from_cluster(C0, REQUEST, 5, &m);
	pump();
	flush1(C0, 0, 24, 0, "data"); /* home r1 */
	oneway(C0, LM_MSG_UNLOCK, 1, 0);
	pump();
	m.rank = 2;
	from_cluster(C1, REQUEST, 6, &m); /* c1 takes lock 1 ... */
	m.id = 2; /* managed by r0 */
	from_cluster(C1, REQUEST, 7, &m); /* ... and lock 2 */
	pump();
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_GRANT, &g) == 2);
	oneway(C1, LM_MSG_UNLOCK, 2, 2);
	pump();
	m.rank = 4;
	from_cluster(C2, REQUEST, 8, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_GRANT, &g) == 1);
	CU_ASSERT(notice_of(g, 24) != NULL);
	teardown();
}

/* What rank 0 wrote before CREATE reaches the worker's cluster as
 * notices, under its own reflector (whose cache may hold an old copy)
 * and under the other one. */
static void test_create_carries_what_rank0_wrote(void)
{
	const struct net_msg *d = NULL;
	struct lm_msg m;

	setup("conf/2x2-two-reflectors.ini");
	flush1(C0, 0, 8, 0, "init"); /* home r1 */
	flush1(C0, 0, 3, 0, "init"); /* home r0 */
	for (uint32_t rank = 4; rank <= 6; rank += 2) { /* c2, c3 */
		m = msg(LM_MSG_CREATE);
		m.rank = rank;
		m.offset = 0x40;
		from_cluster(C0, SEND, 0, &m);
	}
	pump();
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_CREATE, &d) == 1);
	CU_ASSERT(notice_of(d, 8) != NULL && notice_of(d, 3) != NULL);
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_CREATE, &d) == 1);
	CU_ASSERT(notice_of(d, 8) != NULL && notice_of(d, 3) != NULL);
	teardown();
}

/* The token of a lock managed by r1 and held in c0 (under r0) is
 * recalled through r0 when a client of c3 asks for it. */
static void test_recall_routed_to_holder_cluster(void)
{
	const struct net_msg *r = NULL;
	struct lm_msg m = msg(LM_MSG_LOCK);

	setup("conf/2x2-two-reflectors.ini");
	m.id = 3; /* managed by r1 */
	m.rank = 1;
	from_cluster(C0, REQUEST, 5, &m);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_GRANT, NULL) == 1);
	m.rank = 7;
	from_cluster(C3, REQUEST, 6, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_RECALL, &r) == 1);
	CU_ASSERT(r->m.id == 3 && r->m.rank == 1 && r->src == 1);
	CU_ASSERT(down_to(C3, LM_MSG_RECALL, NULL) == 0);
	oneway(C0, LM_MSG_UNLOCK, 3, 1);
	pump();
	CU_ASSERT(down_to(C3, LM_MSG_GRANT, NULL) == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->lock_recalls == 1);
	teardown();
}

/* The allocator is the first reflector, whoever asks. */
static void test_alloc_at_first_reflector(void)
{
	const struct net_msg *a = NULL, *b = NULL;
	struct lm_msg m = msg(LM_MSG_ALLOC);

	setup("conf/2x2-two-reflectors.ini");
	m.size = 100;
	from_cluster(C1, REQUEST, 9, &m);
	from_cluster(C0, REQUEST, 10, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_ALLOC_OK, &a) == 1);
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_ALLOC_OK, &b) == 1);
	CU_ASSERT(a->req_id == 9 && a->m.status == 0);
	CU_ASSERT(b->req_id == 10 && b->m.status == 0);
	CU_ASSERT(a->m.offset != b->m.offset);
	CU_ASSERT(lm_home_stats(net.h[0])->allocs == 2);
	CU_ASSERT(lm_home_stats(net.h[1])->allocs == 0);
	teardown();
}

/* CREATE reaches the worker's cluster under the other reflector; its END
 * comes back to rank 0's cluster with the notices of what it wrote. */
static void test_create_and_end_across_reflectors(void)
{
	const struct net_msg *d = NULL;
	struct lm_msg m = msg(LM_MSG_CREATE);
	static const uint8_t image[] = "image";

	setup("conf/2x2-two-reflectors.ini");
	m.rank = 7;
	m.offset = 0x40;
	m.data = image;
	m.data_len = sizeof(image);
	from_cluster(C0, SEND, 0, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_CREATE, &d) == 1);
	CU_ASSERT(d->m.rank == 7 && d->m.offset == 0x40);
	CU_ASSERT(d->m.data_len == sizeof(image) &&
		  memcmp(d->m.data, image, sizeof(image)) == 0);
	flush1(C3, 7, 3, 0, "work"); /* home r0 */
	m = msg(LM_MSG_END);
	m.rank = 7;
	from_cluster(C3, SEND, 0, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_END, &d) == 1);
	CU_ASSERT(d->m.rank == 7);
	CU_ASSERT(notice_of(d, 3) != NULL);
	teardown();
}

static void test_abort_reaches_every_cluster(void)
{
	struct lm_msg m = msg(LM_MSG_ABORT);

	setup("conf/2x2-two-reflectors.ini");
	m.rank = 3;
	m.data = (const uint8_t *)"gone";
	m.data_len = 4;
	from_cluster(C1, SEND, 0, &m);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C2, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C3, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C1, LM_MSG_ABORT, NULL) == 0);
	teardown();
}

/* A lost lemuriad is reported to every other cluster, through the other
 * reflector too; a lost reflector to the clusters of the one that saw it
 * go.  Before any run nothing is sent. */
static void test_peer_lost_aborts_the_run(void)
{
	const struct net_msg *a = NULL;

	setup("conf/2x2-two-reflectors.ini");
	lm_home_peer_lost(net.h[0], C0, NULL);
	CU_ASSERT_EQUAL(net.qn + net.ndown, 0);
	oneway(C0, LM_MSG_BARRIER, 1, 0); /* the run begins */
	lm_home_peer_lost(net.h[0], C0, NULL);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 0);
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_ABORT, &a) == 1);
	CU_ASSERT(a->m.data_len == strlen("lemuriad c0 lost") &&
		  memcmp(a->m.data, "lemuriad c0 lost", a->m.data_len) == 0);
	CU_ASSERT(down_to(C1, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C3, LM_MSG_ABORT, NULL) == 1);
	down_clear();
	lm_home_peer_lost(net.h[0], 2, NULL); /* r1 */
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_ABORT, &a) == 1);
	CU_ASSERT(a->m.data_len == strlen("reflector r1 lost") &&
		  memcmp(a->m.data, "reflector r1 lost", a->m.data_len) == 0);
	CU_ASSERT(down_to(C2, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C1, LM_MSG_ABORT, NULL) == 0);
	teardown();
}

/* Between reflectors too, a writer or lock holder must be under the
 * sender, a RELEASE must come from the barrier's manager, a reply must
 * answer a request. */
static void test_bad_input_between_reflectors(void)
{
	struct dlist d = { .len = 0 };
	struct lm_msg m = msg(LM_MSG_FLUSH);
	uint32_t v = 9;

	setup("conf/2x2-two-reflectors.ini");
	dl_text(&d, 8, 0, "x");
	m.rank = 2; /* a rank of r1's cluster c1, claimed by r0 */
	m.diffs.data = d.buf;
	m.diffs.len = d.len;
	m.diffs.count = d.count;
	lm_home_handle(net.h[1], 1, LM_REL_REQUEST, 1, &m);
	CU_ASSERT(master(8, &v) == NULL && v == 0);
	m = msg(LM_MSG_RELEASE);
	m.id = 2; /* managed by r0: r1 may not release it */
	lm_home_handle(net.h[0], 2, LM_REL_ONEWAY, 0, &m);
	m = msg(LM_MSG_PAGE);
	lm_home_handle(net.h[0], 2, LM_REL_REPLY, 77, &m);
	m = msg(LM_MSG_FETCH);
	m.page = 0; /* homed at r0, asked of r1 */
	lm_home_handle(net.h[1], 1, LM_REL_REQUEST, 2, &m);
	CU_ASSERT(lm_home_stats(net.h[1])->dropped_bad == 2);
	CU_ASSERT(lm_home_stats(net.h[0])->dropped_bad == 2);
	CU_ASSERT(net.ndown == 0);
	pump(); /* the refused FETCH is answered with an empty PAGE */
	CU_ASSERT(lm_home_stats(net.h[0])->dropped_bad == 3);
	teardown();
}

/* Three reflectors (conf/3-reflectors.ini): every reflector's arrival is
 * needed, and the RELEASE reaches every cluster once. */
static void test_three_reflectors_barrier(void)
{
	const struct lm_layout *l;
	const struct net_msg *r = NULL;

	setup("conf/3-reflectors.ini");
	l = net.layout;
	CU_ASSERT_FATAL(l->nreflectors == 3);
	for (size_t i = 0; i < l->nclusters; i++) {
		struct dlist d = { .len = 0 };

		dl_text(&d, (uint32_t)(i * LM_HOME_PAGE_BLOCK), 0, "p");
		lm_home_handle(net.h[l->clusters[i].reflector_index],
			       l->clusters[i].id, LM_REL_ONEWAY, 0,
			       &(struct lm_msg){ .type = LM_MSG_FLUSH,
						 .run = RUN,
						 .rank = l->clusters[i].first_rank,
						 .diffs = { d.buf, d.len,
							    d.count } });
	}
	for (size_t i = 0; i < l->nclusters; i++) {
		CU_ASSERT(net.ndown == 0);
		lm_home_handle(net.h[l->clusters[i].reflector_index],
			       l->clusters[i].id, LM_REL_ONEWAY, 0,
			       &(struct lm_msg){ .type = LM_MSG_BARRIER,
						 .run = RUN, .id = 5 });
		pump();
	}
	for (size_t i = 0; i < l->nclusters; i++) {
		CU_ASSERT_FATAL(down_to(l->clusters[i].id, LM_MSG_RELEASE,
					&r) == 1);
		CU_ASSERT(r->m.nnotices == l->nclusters);
	}
	teardown();
}

/* Whether an ABORT reached `cluster` carrying `text`. */
static bool aborted_with(uint16_t cluster, const char *text)
{
	for (size_t i = 0; i < net.ndown; i++) {
		const struct net_msg *d = &net.down[i];

		if (d->dst == cluster && d->m.type == LM_MSG_ABORT &&
		    d->m.data && memmem(d->m.data, d->m.data_len, text,
					strlen(text)))
			return true;
	}
	return false;
}

/* issue 42: the clusters of r0 all wait in barrier 1 and those of r1 in
 * barrier 2, which have different managers: neither can complete, and
 * the run ends at once naming both (it waited for --timeout before). */
static void test_split_across_reflectors_ends_the_run(void)
{
	setup("conf/2x2-two-reflectors.ini");
	barrier_all(5); /* a first round, completed: no report is left */
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 0);
	oneway(C0, LM_MSG_BARRIER, 1, 0);
	oneway(C2, LM_MSG_BARRIER, 1, 0);
	oneway(C1, LM_MSG_BARRIER, 2, 0);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 0); /* r1 not all in */
	oneway(C3, LM_MSG_BARRIER, 2, 0);
	pump();
	CU_ASSERT(aborted_with(C0, "barriers 1 and 2 are waited in at once "
				   "(the clusters of reflector r0 in 1, those "
				   "of reflector r1 in 2)"));
	CU_ASSERT(aborted_with(C1, "waited in at once"));
	CU_ASSERT(aborted_with(C3, "waited in at once"));
	teardown();
}

/* A report of an earlier round (the RELEASE that ended it overtook it)
 * is passed over: r1's "all in barrier 7" of round 0 does not stop r0,
 * all in barrier 2 in round 1, and every barrier still completes. */
static void test_old_waiting_report_passed_over(void)
{
	struct lm_msg w = msg(LM_MSG_WAITING);

	setup("conf/2x2-two-reflectors.ini");
	barrier_all(1);
	w.id = 7;
	w.epoch = 0;
	lm_home_handle(net.h[0], net.id[1], kind_of[SEND], 0, &w);
	oneway(C0, LM_MSG_BARRIER, 2, 0);
	oneway(C2, LM_MSG_BARRIER, 2, 0);
	pump();
	oneway(C1, LM_MSG_BARRIER, 2, 0);
	oneway(C3, LM_MSG_BARRIER, 2, 0);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 0);
	CU_ASSERT(down_to(C1, LM_MSG_ABORT, NULL) == 0);
	CU_ASSERT(down_to(C0, LM_MSG_RELEASE, NULL) == 2);
	CU_ASSERT(down_to(C3, LM_MSG_RELEASE, NULL) == 2);
	/* a cluster may not send one */
	w.epoch = 2;
	from_cluster(C0, SEND, 0, &w);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 0);
	teardown();
}

LM_TEST_SUITE("route",
	      LM_TEST(test_placement),
	      LM_TEST(test_fetch_routed_to_home),
	      LM_TEST(test_arrival_held_until_flush_acked),
	      LM_TEST(test_lock_across_reflectors_carries_notices),
	      LM_TEST(test_lock_chain_passes_notices_on),
	      LM_TEST(test_create_carries_what_rank0_wrote),
	      LM_TEST(test_recall_routed_to_holder_cluster),
	      LM_TEST(test_alloc_at_first_reflector),
	      LM_TEST(test_create_and_end_across_reflectors),
	      LM_TEST(test_abort_reaches_every_cluster),
	      LM_TEST(test_peer_lost_aborts_the_run),
	      LM_TEST(test_bad_input_between_reflectors),
	      LM_TEST(test_three_reflectors_barrier),
	      LM_TEST(test_split_across_reflectors_ends_the_run),
	      LM_TEST(test_old_waiting_report_passed_over))
