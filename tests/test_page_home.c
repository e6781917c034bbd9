/* The home of a share of the pages (reflector/page_home.c) on one
 * reflector: master copies and versions, FETCHV and pages as diffs,
 * lists applied whole, and the notices that name their writers. */
#include "unit.h"

#include "diff.h"
#include "home_util.h"

static void test_fetch_zero_page(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const struct captured *c = fetch(h, C0, 5, 17);
	const uint8_t *data = (const uint8_t *)"x";
	uint32_t version = 99;
	size_t nonzero = 0;

	CU_ASSERT(c->m.version == 0);
	CU_ASSERT(c->m.run == RUN);
	CU_ASSERT_FATAL(c->m.data_len == PAGE && c->data != NULL);
	for (size_t i = 0; i < PAGE; i++)
		nonzero += c->data[i] != 0;
	CU_ASSERT(nonzero == 0);
	CU_ASSERT(lm_home_page(h, 17, &data, &version) == 0);
	CU_ASSERT(data == NULL);
	CU_ASSERT(version == 0);
	CU_ASSERT(lm_home_stats(h)->fetches == 1);
	teardown(h);
}

static void test_flush_then_fetch(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const struct captured *c;
	const uint8_t *data;
	uint32_t version;

	flush1(h, C0, 3, 100, "hello");
	CU_ASSERT(cap.n == 0); /* FLUSH is one-way: no answer */
	c = fetch(h, C1, 6, 3);
	CU_ASSERT(c->m.version == 1);
	CU_ASSERT_FATAL(c->m.data_len == PAGE);
	CU_ASSERT(memcmp(c->data + 100, "hello", 5) == 0);
	CU_ASSERT(c->data[99] == 0 && c->data[105] == 0);
	CU_ASSERT(lm_home_page(h, 3, &data, &version) == 0);
	CU_ASSERT(data != NULL && version == 1);
	CU_ASSERT(lm_home_stats(h)->flushes == 1);
	CU_ASSERT(lm_home_stats(h)->diffs_applied == 1);

	/* Two entries for one page in one list: version goes up once. */
	{
		struct dlist d = { .len = 0 };

		dl_add(&d, 3, 0, "ab", 2);
		dl_add(&d, 3, 200, "cd", 2);
		flush_list(h, C0, &d);
	}
	c = fetch(h, C0, 7, 3);
	CU_ASSERT(c->m.version == 2);
	CU_ASSERT(memcmp(c->data, "ab", 2) == 0);
	CU_ASSERT(memcmp(c->data + 200, "cd", 2) == 0);
	CU_ASSERT(memcmp(c->data + 100, "hello", 5) == 0);
	teardown(h);
}

/* FETCHV (docs/protocol.md): the home serves at once every page asked
 * that is its own and settled, in one PAGES; a page with a registered
 * delta still at its cluster, or outside the region, is left out (the
 * lemuriad asks for it alone); no more than LM_FETCHV_MAX pages. */
static void test_fetchv_serves_settled_pages(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_notice want[LM_FETCHV_MAX + 4], reg = {
		.page = 5, .version = 0, .base = LM_REG_NEW,
		.writer = first_rank_of(C1), .wcluster = 1 };
	struct lm_msg m = msg(LM_MSG_FETCHV), r = msg(LM_MSG_REGISTER);
	const uint8_t *data;
	size_t pos = 0, len;
	uint32_t page;

	flush1(h, C0, 3, 100, "hello");
	r.notices = &reg;
	r.nnotices = 1;
	lm_home_handle(h, C1, LM_REL_REQUEST, 4, &r); /* page 5 pending */
	cap_clear();
	want[0] = (struct lm_notice){ .page = 3, .base = LM_NO_BASE };
	want[1] = (struct lm_notice){ .page = 5, .base = LM_NO_BASE };
	want[2] = (struct lm_notice){ .page = 1u << 30, .base = LM_NO_BASE };
	want[3] = (struct lm_notice){ .page = 17, .base = LM_NO_BASE };
	m.notices = want;
	m.nnotices = 4;
	lm_home_handle(h, C0, LM_REL_REQUEST, 9, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].req_id == 9);
	CU_ASSERT_FATAL(cap.v[0].m.type == LM_MSG_PAGES);
	CU_ASSERT_FATAL(cap.v[0].m.nnotices == 2);
	CU_ASSERT(cap.v[0].notices[0].page == 3);
	CU_ASSERT(cap.v[0].notices[0].version == 1);
	CU_ASSERT(cap.v[0].notices[0].base == LM_NO_BASE); /* whole */
	CU_ASSERT(cap.v[0].notices[1].page == 17);
	CU_ASSERT(cap.v[0].notices[1].version == 0);
	CU_ASSERT_FATAL(cap.v[0].m.diffs.count == 2);
	CU_ASSERT_FATAL(lm_msg_diffs_next(&cap.v[0].m.diffs, &pos, &page,
					  &data, &len) == 1);
	CU_ASSERT(page == 3 && len == PAGE);
	CU_ASSERT(memcmp(data + 100, "hello", 5) == 0);
	CU_ASSERT(lm_home_stats(h)->dropped_bad == 1); /* page 2^30 */

	/* no more than LM_FETCHV_MAX pages, whatever was asked */
	for (uint32_t i = 0; i < LM_FETCHV_MAX + 4; i++)
		want[i] = (struct lm_notice){ .page = 100 + i,
					      .base = LM_NO_BASE };
	m.nnotices = LM_FETCHV_MAX + 4;
	cap_clear();
	lm_home_handle(h, C0, LM_REL_REQUEST, 10, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].m.nnotices == LM_FETCHV_MAX);
	teardown(h);
}

/* Pages as diffs (docs/dsm.md): a cluster whose copy is at the page's
 * epoch base gets the bytes the other clusters changed since, not the
 * page; a copy at any other base, or none, gets the whole page. */
static void test_fetchv_pages_as_diffs(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_notice want = { .page = 3, .base = 0 };
	struct lm_msg m = msg(LM_MSG_FETCHV);
	uint8_t copy[PAGE] = { 0 };
	const uint8_t *data, *master;
	size_t pos = 0, len;
	uint32_t page, version;

	flush1(h, C0, 3, 100, "mine");
	flush1(h, C1, 3, 2000, "theirs");
	m.notices = &want;
	m.nnotices = 1;
	cap_clear();
	lm_home_handle(h, C0, LM_REL_REQUEST, 9, &m);
	CU_ASSERT_FATAL(cap.n == 1 && cap.v[0].m.nnotices == 1);
	CU_ASSERT(cap.v[0].notices[0].version == 2);
	CU_ASSERT(cap.v[0].notices[0].base == 0);
	CU_ASSERT_FATAL(lm_msg_diffs_next(&cap.v[0].m.diffs, &pos, &page,
					  &data, &len) == 1);
	CU_ASSERT(len < 16); /* c1's six bytes, not c0's nor the page */
	/* c0's copy at base 0 with its own bytes, plus the diff: the page */
	memcpy(copy + 100, "mine", 4);
	CU_ASSERT_EQUAL_FATAL(lm_diff_apply(copy, PAGE, data, len), 0);
	CU_ASSERT_FATAL(lm_home_page(h, 3, &master, &version) == 0);
	CU_ASSERT(memcmp(copy, master, PAGE) == 0);
	CU_ASSERT(lm_home_stats(h)->page_diffs == 1);

	/* another base, or none: whole */
	want.base = 1;
	cap_clear();
	lm_home_handle(h, C0, LM_REL_REQUEST, 10, &m);
	CU_ASSERT_FATAL(cap.n == 1 && cap.v[0].m.nnotices == 1);
	CU_ASSERT(cap.v[0].notices[0].base == LM_NO_BASE);
	pos = 0;
	CU_ASSERT(lm_msg_diffs_next(&cap.v[0].m.diffs, &pos, &page, &data,
				    &len) == 1 && len == PAGE);
	want.base = LM_NO_BASE;
	cap_clear();
	lm_home_handle(h, C1, LM_REL_REQUEST, 11, &m);
	CU_ASSERT(cap.n == 1 && cap.v[0].notices[0].base == LM_NO_BASE);
	CU_ASSERT(lm_home_stats(h)->page_diffs == 1);
	teardown(h);
}

/* A reflector whose cache leaves no room for the masks (cache / 8 is
 * 512 bytes, one cluster's mask of a page): the masks are broken, never
 * used, and the pages go whole, with the right bytes. */
static void test_fetchv_whole_when_masks_over_budget(void)
{
	static const char text[] =
		"[lemuria]\nshared_size = 64M\npage_size = 4096\n"
		"base = 0x500000000000\nauth = off\n"
		"[reflector r0]\nlisten = 127.0.0.1:17500\ncache = 4K\n"
		"[cluster c0]\nreflector = r0\nlisten = 127.0.0.1:17510\n"
		"clients = 4\n"
		"[cluster c1]\nreflector = r0\nlisten = 127.0.0.1:17511\n"
		"clients = 4\n";
	struct lm_notice want = { .page = 3, .base = 0 };
	struct lm_msg m = msg(LM_MSG_FETCHV);
	const uint8_t *data;
	size_t pos = 0, len;
	char path[64];
	uint32_t page;
	lm_home *h;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/lm_test_home_%ld.ini",
		 (long)getpid());
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	h = setup(path);
	remove(path);
	flush1(h, C0, 3, 100, "mine");
	flush1(h, C1, 3, 2000, "theirs");
	m.notices = &want;
	m.nnotices = 1;
	cap_clear();
	lm_home_handle(h, C0, LM_REL_REQUEST, 9, &m);
	CU_ASSERT_FATAL(cap.n == 1 && cap.v[0].m.nnotices == 1);
	CU_ASSERT(cap.v[0].notices[0].base == LM_NO_BASE);
	CU_ASSERT_FATAL(lm_msg_diffs_next(&cap.v[0].m.diffs, &pos, &page,
					  &data, &len) == 1);
	CU_ASSERT(len == PAGE && memcmp(data + 100, "mine", 4) == 0 &&
		  memcmp(data + 2000, "theirs", 6) == 0);
	CU_ASSERT(lm_home_stats(h)->page_diffs == 0);
	teardown(h);
}

static void test_disjoint_flushes_from_two_clusters(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const struct captured *c;

	flush1(h, C0, 40, 0, "AAAA");
	flush1(h, C1, 40, 8, "BBBB");
	c = fetch(h, C0, 1, 40);
	CU_ASSERT(c->m.version == 2);
	CU_ASSERT(memcmp(c->data, "AAAA\0\0\0\0BBBB", 12) == 0);
	CU_ASSERT(lm_home_stats(h)->diffs_applied == 2);
	teardown(h);
}

static void test_malformed_diff_rejected_whole(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct dlist d = { .len = 0 };
	uint8_t bad[4 + 4];
	const uint8_t *data;
	uint32_t version;

	dl_add(&d, 1, 0, "good", 4);
	/* a run past the end of the page */
	memcpy(bad + test_run_header(bad, PAGE - 2, 4), "oops", 4);
	CU_ASSERT_FATAL(lm_msg_diffs_append(d.buf, sizeof(d.buf), &d.len, 2,
					    bad, 3 + 4) == 0);
	d.count++;
	flush_list(h, C0, &d);
	CU_ASSERT(lm_home_page(h, 1, &data, &version) == 0);
	CU_ASSERT(data == NULL && version == 0);
	CU_ASSERT(lm_home_page(h, 2, &data, &version) == 0);
	CU_ASSERT(data == NULL && version == 0);
	CU_ASSERT(lm_home_stats(h)->diffs_rejected == 2);
	CU_ASSERT(lm_home_stats(h)->diffs_applied == 0);

	/* A list cut short (entry header claims more than is there). */
	d.len = 0;
	d.count = 0;
	dl_add(&d, 1, 0, "good", 4);
	d.len -= 1;
	flush_list(h, C0, &d);
	CU_ASSERT(lm_home_page(h, 1, &data, &version) == 0);
	CU_ASSERT(data == NULL && version == 0);
	CU_ASSERT(lm_home_stats(h)->diffs_rejected == 3);

	/* Nothing reached the epoch's notices. */
	oneway(h, C0, LM_MSG_BARRIER, 1, 0);
	oneway(h, C1, LM_MSG_BARRIER, 1, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	CU_ASSERT(cap.v[0].m.nnotices == 0);
	teardown(h);
}

/* One rank's lists only: the notice names it, its cluster, and the
 * version before the epoch's first change, which stays put however many
 * lists follow; the next epoch starts from the new version. */
static void test_notice_names_sole_writer(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const struct lm_notice *n;
	const struct captured *c;

	flush1_as(h, C0, 2, 9, 0, "a");
	flush1_as(h, C0, 2, 9, 4, "b");
	flush1_as(h, C1, 5, 12, 0, "c");
	c = barrier_44(h, 1);
	n = notice_of(c, 9);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 2 && n->base == 0);
	CU_ASSERT(n->writer == 2 && n->wcluster == 0);
	n = notice_of(c, 12);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->base == 0);
	CU_ASSERT(n->writer == 5 && n->wcluster == 1);

	flush1_as(h, C0, 3, 9, 8, "d");
	c = barrier_44(h, 2);
	CU_ASSERT_FATAL(c->m.nnotices == 1);
	n = notice_of(c, 9);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 3 && n->base == 2);
	CU_ASSERT(n->writer == 3 && n->wcluster == 0);
	teardown(h);
}

/* A second rank of the same cluster makes the writer MANY but keeps the
 * cluster; a rank of another cluster makes both MANY, for the rest of the
 * epoch even if the first writer comes back. */
static void test_notice_many_writers(void)
{
	lm_home *h = setup("conf/4+4.ini");
	const struct lm_notice *n;
	const struct captured *c;

	flush1_as(h, C0, 1, 20, 0, "a");
	flush1_as(h, C0, 3, 20, 4, "b");
	flush1_as(h, C0, 1, 21, 0, "c");
	flush1_as(h, C1, 6, 21, 4, "d");
	flush1_as(h, C0, 1, 21, 8, "e");
	c = barrier_44(h, 1);
	n = notice_of(c, 20);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 2 && n->base == 0);
	CU_ASSERT(n->writer == LM_WRITER_MANY && n->wcluster == 0);
	n = notice_of(c, 21);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 3 && n->base == 0);
	CU_ASSERT(n->writer == LM_WRITER_MANY);
	CU_ASSERT(n->wcluster == LM_WRITER_MANY);
	/* A new epoch forgets who wrote before. */
	flush1_as(h, C1, 6, 21, 12, "f");
	c = barrier_44(h, 2);
	n = notice_of(c, 21);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 4 && n->base == 3);
	CU_ASSERT(n->writer == 6 && n->wcluster == 1);
	teardown(h);
}

/* REGISTER of one NEW entry for `page` from cluster node `from`; returns
 * the pages its REGISTER_OK says the cluster now owns (0 or 1 here). */
static uint32_t register_new(lm_home *h, uint16_t from, uint32_t page,
			     uint32_t kind, uint32_t *owned)
{
	struct lm_notice e = { .page = page, .version = 0, .base = kind,
			       .writer = LM_WRITER_MANY,
			       .wcluster = from == C0 ? 0 : 1 };
	struct lm_msg m = msg(LM_MSG_REGISTER);

	m.notices = &e;
	m.nnotices = 1;
	cap_clear();
	lm_home_handle(h, from, LM_REL_REQUEST, 40, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT_FATAL(cap.v[0].m.type == LM_MSG_REGISTER_OK);
	CU_ASSERT(cap.v[0].m.status == 0);
	if (cap.v[0].m.data_len == 4 && owned)
		*owned = lm_get32(cap.v[0].data);
	return (uint32_t)(cap.v[0].m.data_len / 4);
}

/* Pages one cluster owns (docs/dsm.md): a cluster of ours that keeps
 * one copy and alone holds a page it registers comes to own it; another
 * cluster's FETCH then waits for the whole page, pulled from the owner,
 * and after that the page has two holders and no owner until one drops
 * it. */
static void test_sole_holder_owns(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_msg d = msg(LM_MSG_DELTA);
	uint8_t page[PAGE], diff[PAGE + 16];
	const struct captured *c;
	uint32_t owned = 0, pull_req;
	size_t len;

	(void)fetch(h, C1, 3, 5);
	CU_ASSERT(register_new(h, C1, 5, LM_REG_NEW, &owned) == 1);
	CU_ASSERT(owned == 5);
	CU_ASSERT(lm_home_stats(h)->owned_granted == 1);
	/* C0 asks: the home pulls the page from its owner and waits */
	cap_clear();
	{
		struct lm_msg f = msg(LM_MSG_FETCH);

		f.page = 5;
		lm_home_handle(h, C0, LM_REL_REQUEST, 7, &f);
	}
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REQUEST && cap.v[0].node == C1);
	CU_ASSERT_FATAL(cap.v[0].m.type == LM_MSG_PULL);
	CU_ASSERT(cap.v[0].m.page == 5 && cap.v[0].m.version == 1);
	pull_req = cap.v[0].req_id;
	memset(page, 0, sizeof(page));
	memcpy(page + 300, "owned", 5);
	CU_ASSERT_FATAL(lm_diff_encode_whole(page, PAGE, diff + 8,
					     sizeof(diff) - 8, &len) == 0);
	lm_msg_diffs_put_header(diff, 5, len);
	d.page = 5;
	d.version = 1;
	d.diffs = (struct lm_msg_diffs){ diff, len + 8, 1 };
	cap_clear();
	lm_home_handle(h, C1, LM_REL_REPLY, pull_req, &d);
	CU_ASSERT_FATAL(cap.n == 1);
	c = &cap.v[0];
	CU_ASSERT(c->how == HOW_REPLY && c->node == C0 && c->req_id == 7);
	CU_ASSERT_FATAL(c->m.type == LM_MSG_PAGE && c->m.data_len == PAGE);
	CU_ASSERT(c->m.version == 1);
	CU_ASSERT(memcmp(c->data + 300, "owned", 5) == 0);
	/* two holders: no owner */
	CU_ASSERT(register_new(h, C1, 5, LM_REG_NEW, NULL) == 0);
	/* C0's copy gave the page up: C1 alone holds it again */
	CU_ASSERT(register_new(h, C0, 5, LM_REG_DROP, NULL) == 0);
	CU_ASSERT(lm_home_stats(h)->holder_drops == 1);
	CU_ASSERT(register_new(h, C1, 5, LM_REG_NEW, &owned) == 1);
	CU_ASSERT(owned == 5);
	/* a page another cluster fetched is never owned */
	(void)fetch(h, C0, 8, 9);
	(void)fetch(h, C1, 9, 9);
	CU_ASSERT(register_new(h, C1, 9, LM_REG_NEW, NULL) == 0);
	teardown(h);
}

/* A cluster whose clients keep copies of their own (copy = client) has
 * no one copy that all its writes land in: it never owns a page. */
static void test_client_copies_never_own(void)
{
	lm_home *h = setup("conf/4+4.ini");

	layout->clusters[1].copy = LM_COPY_CLIENT;
	(void)fetch(h, C1, 3, 5);
	CU_ASSERT(register_new(h, C1, 5, LM_REG_NEW, NULL) == 0);
	CU_ASSERT(lm_home_stats(h)->owned_granted == 0);
	teardown(h);
}

/* A cluster that holds the page's latest delta (version 1, unpulled)
 * registers a new one naming it: merged, the answer is version 2, the
 * version right after its own, which the cluster reads as a merge
 * (lemuriad/deltas.c).  When the home cannot merge (a PULL of version 1
 * is out) the answer must not be version 2: the cluster would fold its
 * deltas and answer that PULL with nothing, as the SPLASH-2 suite showed
 * ("delta of page P version V lost", fft and cholesky on 2x2-two-
 * reflectors and 4+4).  A version is skipped instead. */
static void test_unmerged_entry_skips_a_version(void)
{
	lm_home *h = setup("conf/4+4.ini");
	struct lm_notice e = { .page = 5, .version = 1, .base = LM_REG_NEW,
			       .writer = LM_WRITER_MANY, .wcluster = 1 };
	struct lm_msg m = msg(LM_MSG_REGISTER), f = msg(LM_MSG_FETCH);
	const struct captured *ok = NULL;

	(void)fetch(h, C0, 1, 5);
	CU_ASSERT(register_new(h, C1, 5, LM_REG_NEW, NULL) == 0); /* v1 */
	m.notices = &e;
	m.nnotices = 1;
	cap_clear();
	lm_home_handle(h, C1, LM_REL_REQUEST, 41, &m);
	CU_ASSERT_FATAL(cap.n == 1 && cap.v[0].m.nnotices == 1);
	CU_ASSERT_EQUAL(cap.v[0].notices[0].version, 2); /* merged */
	CU_ASSERT(lm_home_stats(h)->regs_merged == 1);
	/* C0 asks for the page: the home pulls version 2 from C1 */
	f.page = 5;
	cap_clear();
	lm_home_handle(h, C0, LM_REL_REQUEST, 7, &f);
	CU_ASSERT_FATAL(cap.n == 1 && cap.v[0].m.type == LM_MSG_PULL);
	CU_ASSERT_EQUAL(cap.v[0].m.version, 2);
	/* C1 registers again, naming version 2, while that PULL is out */
	e.version = 2;
	cap_clear();
	lm_home_handle(h, C1, LM_REL_REQUEST, 42, &m);
	for (size_t i = 0; i < cap.n; i++)
		if (cap.v[i].m.type == LM_MSG_REGISTER_OK)
			ok = &cap.v[i];
	CU_ASSERT_PTR_NOT_NULL_FATAL(ok);
	CU_ASSERT_FATAL(ok->m.nnotices == 1);
	CU_ASSERT_EQUAL(ok->notices[0].version, 4);
	CU_ASSERT(lm_home_stats(h)->regs_merged == 1);
	CU_ASSERT(lm_home_stats(h)->versions_skipped == 1);
	teardown(h);
}

LM_TEST_SUITE("page_home",
	      LM_TEST(test_fetch_zero_page),
	      LM_TEST(test_flush_then_fetch),
	      LM_TEST(test_fetchv_serves_settled_pages),
	      LM_TEST(test_fetchv_pages_as_diffs),
	      LM_TEST(test_fetchv_whole_when_masks_over_budget),
	      LM_TEST(test_disjoint_flushes_from_two_clusters),
	      LM_TEST(test_malformed_diff_rejected_whole),
	      LM_TEST(test_notice_names_sole_writer),
	      LM_TEST(test_notice_many_writers),
	      LM_TEST(test_sole_holder_owns),
	      LM_TEST(test_client_copies_never_own),
	      LM_TEST(test_unmerged_entry_skips_a_version))
