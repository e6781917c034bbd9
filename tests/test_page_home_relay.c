/* Lazy relay at the page homes (reflector/page_home.c) across two
 * reflectors: deltas registered, pulled (and pulled ahead) when a FETCH
 * needs them, applied in version order, pushed data needing no PULL,
 * bad registrations refused. */
#include "unit.h"

#include "root_util.h"

/* Lazy relay end to end through two reflectors: a registration carries
 * no data; a FETCH from another cluster makes the home pull the delta
 * from the cluster that holds it, then the page is served with it. */
static void test_lazy_fetch_pulls_delta(void)
{
	struct lm_notice e[1] = { { .page = 8, .writer = 0 } };
	const struct net_msg *r, *p, *pg = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);

	setup("conf/2x2-two-reflectors.ini");
	r = reg(C0, 0, e, 1, NULL, 50);
	CU_ASSERT_EQUAL(r->m.status, 0);
	CU_ASSERT_FATAL(r->m.nnotices == 1);
	CU_ASSERT(r->m.notices[0].page == 8 && r->m.notices[0].version == 1 &&
		  r->m.notices[0].writer == 0 && r->m.notices[0].wcluster == 0);
	down_clear();
	m.page = 8;
	from_cluster(C1, REQUEST, 51, &m);
	pump();
	CU_ASSERT(down_to(C1, LM_MSG_PAGE, NULL) == 0); /* waits */
	p = pull_to(C0, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(p->m.page == 8 && p->m.id == 0);
	answer_pull(p, 0, "lazy");
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_PAGE, &pg) == 1);
	CU_ASSERT(pg->req_id == 51 && pg->m.version == 1);
	CU_ASSERT(memcmp(pg->m.data, "lazy", 4) == 0);
	CU_ASSERT(lm_home_stats(net.h[1])->pulls_sent == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches_waited == 1);
	teardown();
}

/* A FETCH that waits for a PULL has the home pull the unpulled deltas of
 * the pages after it that the FETCH names (its id, the reader's reach;
 * never beyond `prefetch`), from every cluster but the reader's; the
 * reader's next FETCH then finds its page settled.  Pages beyond the
 * window are left. */
static void test_fetch_pulls_the_next_pages_ahead(void)
{
	struct lm_notice e[6];
	const struct net_msg *pg = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);
	/* the last page just beyond the window: 24 or 40 with 15 or 31 */
	const uint32_t beyond = 8 + LM_CFG_PREFETCH_DEFAULT + 1;
	const uint32_t c0_pages[6] = { 8, 9, 10, 12, 15, beyond };
	uint64_t waited;

	/* 8-15, 24-31, 40-47 ... at r1, 16-23, 32-39 ... at r0 */
	setup("conf/2x2-two-reflectors.ini");
	CU_ASSERT_EQUAL_FATAL(net.layout->prefetch, LM_CFG_PREFETCH_DEFAULT);
	CU_ASSERT_EQUAL_FATAL(beyond / 8 % 2, 1); /* r1's */
	for (int i = 0; i < 6; i++)
		e[i] = (struct lm_notice){ .page = c0_pages[i], .writer = 0 };
	CU_ASSERT(reg(C0, 0, e, 5, NULL, 1)->m.nnotices == 5);
	CU_ASSERT(reg(C0, 0, e + 5, 1, NULL, 2)->m.nnotices == 1);
	e[0] = (struct lm_notice){ .page = 10, .writer = 2 };
	e[1] = (struct lm_notice){ .page = 11, .writer = 2 };
	CU_ASSERT(reg(C1, 1, e, 2, NULL, 3)->m.nnotices == 2);

	down_clear();
	m.page = 8;
	m.id = LM_CFG_PREFETCH_DEFAULT + 7; /* more than the layout allows */
	from_cluster(C1, REQUEST, 80, &m);
	pump();
	CU_ASSERT(down_to(C1, LM_MSG_PAGE, NULL) == 0); /* waits for 8 */
	CU_ASSERT_EQUAL(pulls_of(C0, 8), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 9), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 10), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 12), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 15), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, beyond), 0); /* beyond the window */
	CU_ASSERT_EQUAL(pulls_of(C1, 10), 0); /* the reader's own */
	CU_ASSERT_EQUAL(pulls_of(C1, 11), 0);
	CU_ASSERT_EQUAL(lm_home_stats(net.h[1])->pulls_ahead, 4);

	/* the data of 9 comes; C1's fault on it is served at once */
	CU_ASSERT_FATAL(pulls_of_page(C0, 9, &pg) == 1);
	answer_pull(pg, 0, "ahead");
	waited = lm_home_stats(net.h[1])->fetches_waited;
	down_clear();
	m.page = 9;
	m.id = 0;
	from_cluster(C1, REQUEST, 81, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_PAGE, &pg) == 1);
	CU_ASSERT(pg->req_id == 81 && memcmp(pg->m.data, "ahead", 5) == 0);
	CU_ASSERT_EQUAL(lm_home_stats(net.h[1])->fetches_waited, waited);
	CU_ASSERT_EQUAL(pulls_of(C0, 9), 0); /* no second PULL */
	teardown();
}

/* The window is the FETCH's: a reader whose faults read two pages after
 * them has 9 and 10 pulled, not 12 and 15, whose owner keeps writing them
 * with no twin (docs/dsm.md "Pages one cluster owns"); a FETCH naming
 * none (a page fetched ahead, or asked again) pulls nothing else. */
static void test_fetch_pulls_as_far_as_it_reaches(void)
{
	struct lm_notice e[5];
	struct lm_msg m = msg(LM_MSG_FETCH);
	const uint32_t c0_pages[5] = { 8, 9, 10, 12, 15 };

	setup("conf/2x2-two-reflectors.ini");
	for (int i = 0; i < 5; i++)
		e[i] = (struct lm_notice){ .page = c0_pages[i], .writer = 0 };
	CU_ASSERT(reg(C0, 0, e, 5, NULL, 1)->m.nnotices == 5);

	down_clear();
	m.page = 8;
	m.id = 2;
	from_cluster(C1, REQUEST, 90, &m);
	pump();
	CU_ASSERT(down_to(C1, LM_MSG_PAGE, NULL) == 0);
	CU_ASSERT_EQUAL(pulls_of(C0, 8), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 9), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 10), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 12), 0);
	CU_ASSERT_EQUAL(pulls_of(C0, 15), 0);
	CU_ASSERT_EQUAL(lm_home_stats(net.h[1])->pulls_ahead, 2);

	down_clear();
	m.page = 12;
	m.id = 0;
	from_cluster(C1, REQUEST, 91, &m);
	pump();
	CU_ASSERT_EQUAL(pulls_of(C0, 12), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 15), 0);
	CU_ASSERT_EQUAL(lm_home_stats(net.h[1])->pulls_ahead, 2);
	teardown();
}

/* I1 at the home: a cluster's next delta merges into the one it holds
 * only when nobody wrote the page in between; pulled deltas are applied
 * in version order whatever order their data arrives in. */
static void test_lazy_deltas_applied_in_version_order(void)
{
	struct lm_notice e[1];
	const struct net_msg *r, *pg = NULL;
	const struct net_msg *p2, *p3, *p4;
	struct lm_msg m = msg(LM_MSG_FETCH);
	uint32_t v;

	setup("conf/2x2-two-reflectors.ini");
	e[0] = (struct lm_notice){ .page = 8, .writer = 0 };
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 1)->m.notices[0].version == 1);
	e[0] = (struct lm_notice){ .page = 8, .version = 1, .writer = 1 };
	r = reg(C0, 0, e, 1, NULL, 2); /* holds 1: merged into 2 */
	CU_ASSERT(r->m.notices[0].version == 2);
	CU_ASSERT(r->m.notices[0].writer == LM_WRITER_MANY);
	CU_ASSERT(lm_home_stats(net.h[1])->regs_merged == 1);
	e[0] = (struct lm_notice){ .page = 8, .writer = 2 };
	CU_ASSERT(reg(C1, 1, e, 1, NULL, 3)->m.notices[0].version == 3);
	e[0] = (struct lm_notice){ .page = 8, .version = 2, .writer = 0 };
	r = reg(C0, 0, e, 1, NULL, 4); /* c1 wrote in between: apart */
	CU_ASSERT(r->m.notices[0].version == 4);
	CU_ASSERT(r->m.notices[0].wcluster == LM_WRITER_MANY);
	CU_ASSERT(lm_home_stats(net.h[1])->regs_merged == 1);

	down_clear();
	m.page = 8;
	from_cluster(C2, REQUEST, 60, &m);
	pump();
	p2 = pull_to(C0, 2);
	p3 = pull_to(C1, 3);
	p4 = pull_to(C0, 4);
	CU_ASSERT_FATAL(p2 && p3 && p4 && !pull_to(C0, 1));
	answer_pull(p4, 0, "C");
	answer_pull(p3, 0, "BB");
	CU_ASSERT(down_to(C2, LM_MSG_PAGE, NULL) == 0);
	CU_ASSERT(master(8, &v) == NULL); /* nothing applied out of order */
	answer_pull(p2, 0, "AAAA");
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_PAGE, &pg) == 1);
	CU_ASSERT(pg->m.version == 4);
	CU_ASSERT(memcmp(pg->m.data, "CBAA", 4) == 0);
	teardown();
}

/* Data pushed (or sent eagerly) needs no PULL. */
static void test_pushed_and_eager_data_need_no_pull(void)
{
	struct lm_notice e[2];
	struct dlist d = { .len = 0 };
	const struct net_msg *pg = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);

	setup("conf/2x2-two-reflectors.ini");
	e[0] = (struct lm_notice){ .page = 16, .writer = 1 };
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 1)->m.notices[0].version == 1);
	e[0] = (struct lm_notice){ .page = 16, .version = 1,
				   .base = LM_REG_PUSH, .writer = 1 };
	e[1] = (struct lm_notice){ .page = 24, .base = LM_REG_DATA,
				   .writer = 1 };
	dl_text(&d, 16, 0, "pushed");
	dl_text(&d, 24, 0, "eager");
	CU_ASSERT(reg(C0, 0, e, 2, &d, 2)->m.nnotices == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->pushes_received == 1);
	down_clear();
	m.page = 16;
	from_cluster(C3, REQUEST, 70, &m);
	m.page = 24;
	from_cluster(C3, REQUEST, 71, &m);
	pump();
	CU_ASSERT(!pull_to(C0, 1));
	CU_ASSERT_EQUAL_FATAL(down_to(C3, LM_MSG_PAGE, &pg), 2);
	for (size_t i = 0; i < net.ndown; i++) {
		pg = &net.down[i];
		CU_ASSERT_FATAL(pg->m.data_len == 4096);
		if (pg->req_id == 70) {
			CU_ASSERT(memcmp(pg->m.data, "pushed", 6) == 0);
		} else {
			CU_ASSERT(pg->req_id == 71 &&
				  memcmp(pg->m.data, "eager", 5) == 0);
		}
	}
	teardown();
}

/* A registration naming another cluster, or data that does not match
 * its entries, is refused whole. */
static void test_bad_registration_refused(void)
{
	struct lm_notice e[1] = { { .page = 8, .writer = 0 } };
	struct dlist d = { .len = 0 };
	uint32_t v = 7;

	setup("conf/2x2-two-reflectors.ini");
	CU_ASSERT(reg(C0, 1, e, 1, NULL, 1)->m.status == LM_EBADMSG);
	e[0] = (struct lm_notice){ .page = 8, .base = LM_REG_DATA,
				   .writer = 0 };
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 2)->m.status == LM_EBADMSG);
	dl_text(&d, 9, 0, "x"); /* data for another page */
	CU_ASSERT(reg(C0, 0, e, 1, &d, 3)->m.status == LM_EBADMSG);
	e[0] = (struct lm_notice){ .page = 8, .writer = 2 }; /* c1's rank */
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 4)->m.status == LM_EBADMSG);
	CU_ASSERT(master(8, &v) == NULL && v == 0);
	teardown();
}

/* docs/dsm.md "Eventual visibility": a cluster's CHANGED (what its
 * registrations changed) reaches every other cluster that keeps one
 * copy, the one under its own reflector and those under the other, as
 * one message each, and never its writer; a cluster that keeps copies
 * per client is not sent it.  A CHANGED that names one cluster is not
 * what a cluster sends: dropped. */
static void test_changed_through_reflectors(void)
{
	struct lm_notice e[2] = { { .page = 8, .version = 3 },
				  { .page = 1, .version = 5 } };
	struct lm_msg m = msg(LM_MSG_CHANGED);
	const struct net_msg *ch = NULL;
	uint64_t dropped;

	setup("conf/2x2-two-reflectors.ini");
	m.id = LM_CHANGED_ALL;
	m.rank = 1; /* the writer's cluster, which its reflector checks */
	m.version = 9;
	m.notices = e;
	m.nnotices = 2;
	from_cluster(C1, SEND, 0, &m);
	pump();
	for (uint16_t to = C0; to <= C3; to++) {
		if (to == C1) {
			CU_ASSERT(down_to(to, LM_MSG_CHANGED, NULL) == 0);
			continue;
		}
		CU_ASSERT_FATAL(down_to(to, LM_MSG_CHANGED, &ch) == 1);
		CU_ASSERT(ch->m.id == LM_CHANGED_ALL && ch->m.nnotices == 2);
		CU_ASSERT(ch->m.rank == 1 && ch->m.version == 9);
		CU_ASSERT(notice_of(ch, 8) && notice_of(ch, 8)->version == 3);
		CU_ASSERT(notice_of(ch, 1) && notice_of(ch, 1)->version == 5);
	}
	CU_ASSERT(lm_home_stats(net.h[1])->changed_pages == 2);

	/* c2 keeps copies per client: nothing for it */
	net.layout->clusters[2].copy = LM_COPY_CLIENT;
	down_clear();
	m.rank = 3;
	from_cluster(C3, SEND, 0, &m);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_CHANGED, NULL) == 1);
	CU_ASSERT(down_to(C1, LM_MSG_CHANGED, NULL) == 1);
	CU_ASSERT(down_to(C2, LM_MSG_CHANGED, NULL) == 0);
	CU_ASSERT(down_to(C3, LM_MSG_CHANGED, NULL) == 0);

	/* a reader's hurry reaches every other cluster, copies per client
	 * included (their writes are waited for too) */
	down_clear();
	m.id = LM_CHANGED_HURRY;
	m.nnotices = 0;
	from_cluster(C0, SEND, 0, &m);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_CHANGED, NULL) == 0);
	for (uint16_t to = C1; to <= C3; to++)
		CU_ASSERT(down_to(to, LM_MSG_CHANGED, NULL) == 1);

	m.id = 0;
	m.nnotices = 2;
	dropped = lm_home_stats(net.h[0])->dropped_bad;
	down_clear();
	from_cluster(C2, SEND, 0, &m);
	pump();
	CU_ASSERT(lm_home_stats(net.h[0])->dropped_bad == dropped + 1);
	CU_ASSERT(net.ndown == 0);
	/* nor may a cluster speak for another: the readers trust the
	 * writer's name to know whose registrations were told */
	m.id = LM_CHANGED_ALL;
	m.rank = 0;
	from_cluster(C2, SEND, 0, &m);
	pump();
	CU_ASSERT(lm_home_stats(net.h[0])->dropped_bad == dropped + 2);
	CU_ASSERT(net.ndown == 0);
	teardown();
}

/* docs/dsm.md "Order": a home tags a page with the number of every
 * cluster's last registration that changed it, and every PAGE and PAGES
 * it serves carries them; a reflector that relays a page keeps them with
 * its copy. */
static void test_pages_carry_their_writers_registrations(void)
{
	struct lm_notice e = { .page = 8, .base = LM_REG_DATA };
	const struct net_msg *p = NULL;
	struct dlist d = { .len = 0 };
	uint32_t cl, r, seen = 0;

	setup("conf/2x2-two-reflectors.ini");
	dl_text(&d, 8, 0, "x");
	/* c1 (under r1) registers page 8 twice, c2 (under r0) once; the
	 * registration numbers are the requests' ids (reg) */
	e.writer = 2;
	CU_ASSERT(reg(C1, 1, &e, 1, &d, 5)->m.status == 0);
	CU_ASSERT(reg(C1, 1, &e, 1, &d, 6)->m.status == 0);
	e.writer = 4;
	CU_ASSERT(reg(C2, 2, &e, 1, &d, 11)->m.status == 0);
	/* c3 is under r1, page 8's home is r0: the PAGE passes r1 */
	down_clear();
	fetch_from(C3, 77, 8, 0);
	pump();
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT_EQUAL_FATAL(p->m.ntags, 2);
	for (uint32_t i = 0; i < 2; i++) {
		lm_msg_tag(&p->m, i, &cl, &r);
		seen |= (cl == 1 && r == 6) ? 1u : (cl == 2 && r == 11) ? 2u
									: 4u;
	}
	CU_ASSERT_EQUAL(seen, 3u);
	/* again, from r1's cache this time: the same tags */
	down_clear();
	fetch_from(C3, 78, 8, 0);
	pump();
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT_EQUAL(p->m.ntags, 2);
	teardown();
}

LM_TEST_SUITE("page_home_relay",
	      LM_TEST(test_lazy_fetch_pulls_delta),
	      LM_TEST(test_fetch_pulls_the_next_pages_ahead),
	      LM_TEST(test_fetch_pulls_as_far_as_it_reaches),
	      LM_TEST(test_lazy_deltas_applied_in_version_order),
	      LM_TEST(test_pushed_and_eager_data_need_no_pull),
	      LM_TEST(test_bad_registration_refused),
	      LM_TEST(test_changed_through_reflectors),
	      LM_TEST(test_pages_carry_their_writers_registrations))
