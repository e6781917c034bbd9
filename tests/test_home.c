/* The reflector's state machine (reflector/dispatch.c) driven by hand with
 * real layouts: pages and versions, the epoch's notices, barriers, FIFO
 * locks, the allocator, CREATE/END routing, run ids and bad input.
 * Every message the home emits is captured (deep-copied) and inspected. */
#include "unit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "diff.h"
#include "diff_util.h"
#include "home.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "wire.h"

#define CAP_MAX 32

enum how { HOW_SEND, HOW_REQUEST, HOW_REPLY };

struct captured {
	enum how how;
	uint16_t node;
	uint32_t req_id;
	struct lm_msg m;         /* pointers below replace m's borrowed ones */
	struct lm_notice *notices;
	uint8_t *data;
	uint8_t *diffs;
};

static struct capture {
	size_t n;
	struct captured v[CAP_MAX];
} cap;

static void cap_clear(void)
{
	for (size_t i = 0; i < cap.n; i++) {
		free(cap.v[i].notices);
		free(cap.v[i].data);
		free(cap.v[i].diffs);
	}
	memset(&cap, 0, sizeof(cap));
}

static void cap_add(enum how how, uint16_t node, uint32_t req_id,
		    const struct lm_msg *m)
{
	struct captured *c;

	CU_ASSERT_FATAL(cap.n < CAP_MAX);
	c = &cap.v[cap.n++];
	c->how = how;
	c->node = node;
	c->req_id = req_id;
	c->m = *m;
	if (m->nnotices) {
		c->notices = malloc(m->nnotices * sizeof(*m->notices));
		memcpy(c->notices, m->notices,
		       m->nnotices * sizeof(*m->notices));
	}
	if (m->data_len) {
		c->data = malloc(m->data_len);
		memcpy(c->data, m->data, m->data_len);
	}
	if (m->diffs.len) {
		c->diffs = malloc(m->diffs.len);
		memcpy(c->diffs, m->diffs.data, m->diffs.len);
	}
	c->m.notices = c->notices;
	c->m.data = c->data;
	c->m.diffs.data = c->diffs;
}

static void cb_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	CU_ASSERT_PTR_EQUAL(ctx, &cap);
	cap_add(HOW_SEND, node, 0, m);
}

static void cb_request(void *ctx, uint16_t node, uint32_t req_id,
		       const struct lm_msg *m)
{
	CU_ASSERT_PTR_EQUAL(ctx, &cap);
	cap_add(HOW_REQUEST, node, req_id, m);
}

static void cb_reply(void *ctx, uint16_t node, uint32_t req_id,
		     const struct lm_msg *m)
{
	CU_ASSERT_PTR_EQUAL(ctx, &cap);
	cap_add(HOW_REPLY, node, req_id, m);
}

static const struct lm_msg_out out_cbs = { cb_send, cb_request, cb_reply,
					   NULL };

/* conf/4+4.ini: reflector r0 = node 1, c0 = node 2 (ranks 0..3), c1 =
 * node 3 (ranks 4..7); 64 MiB of 4 KiB pages. */
#define R0 1
#define C0 2
#define C1 3
#define RUN 0x1000
#define PAGE 4096u
#define NPAGES (64u * 1024 * 1024 / PAGE)

static struct lm_layout *layout;

static lm_home *setup(const char *path)
{
	char err[256];
	lm_home *h;

	cap_clear();
	layout = NULL;
	lm_log_set_level(LM_LOG_ERROR); /* expected drops log warnings */
	CU_ASSERT_FATAL(lm_layout_load(path, &layout, err, sizeof(err)) ==
			0);
	h = lm_home_create(layout, R0, &out_cbs, &cap);
	CU_ASSERT_FATAL(h != NULL);
	return h;
}

static void teardown(lm_home *h)
{
	lm_home_destroy(h);
	lm_layout_free(layout);
	layout = NULL;
	cap_clear();
}

static struct lm_msg msg(enum lm_msg_type type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (uint16_t)type;
	m.run = RUN;
	return m;
}

/* Sends FETCH and returns the captured PAGE reply. */
static const struct captured *fetch(lm_home *h, uint16_t from,
				    uint32_t req, uint32_t page)
{
	struct lm_msg m = msg(LM_MSG_FETCH);

	cap_clear();
	m.page = page;
	lm_home_handle(h, from, LM_REL_REQUEST, req, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY);
	CU_ASSERT(cap.v[0].node == from);
	CU_ASSERT(cap.v[0].req_id == req);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_PAGE);
	CU_ASSERT(cap.v[0].m.page == page);
	return &cap.v[0];
}

/* A diff list under construction. */
struct dlist {
	uint8_t buf[4096];
	size_t len;
	uint32_t count;
};

/* Appends one diff entry of a single run: `n` bytes at `off` of `page`. */
static void dl_add(struct dlist *d, uint32_t page, uint32_t off,
		   const void *bytes, uint32_t n)
{
	uint8_t diff[512];
	size_t hdr;

	CU_ASSERT_FATAL(n + 10 <= sizeof(diff));
	hdr = test_run_header(diff, off, n);
	memcpy(diff + hdr, bytes, n);
	CU_ASSERT_FATAL(lm_msg_diffs_append(d->buf, sizeof(d->buf), &d->len,
					    page, diff, hdr + n) == 0);
	d->count++;
}

/* FLUSH of rank `rank` from node `from`. */
static void flush_list_as(lm_home *h, uint16_t from, uint32_t rank,
			  const struct dlist *d)
{
	struct lm_msg m = msg(LM_MSG_FLUSH);

	m.rank = rank;
	m.diffs.data = d->buf;
	m.diffs.len = d->len;
	m.diffs.count = d->count;
	lm_home_handle(h, from, LM_REL_ONEWAY, 0, &m);
}

/* The first rank of the cluster at node `from` (0 when it is none). */
static uint32_t first_rank_of(uint16_t from)
{
	for (size_t i = 0; i < layout->nclusters; i++)
		if (layout->clusters[i].id == from)
			return layout->clusters[i].first_rank;
	return 0;
}

static void flush_list(lm_home *h, uint16_t from, const struct dlist *d)
{
	flush_list_as(h, from, first_rank_of(from), d);
}

static void flush1_as(lm_home *h, uint16_t from, uint32_t rank,
		      uint32_t page, uint32_t off, const char *text)
{
	struct dlist d = { .len = 0 };

	dl_add(&d, page, off, text, (uint32_t)strlen(text));
	flush_list_as(h, from, rank, &d);
}

static void flush1(lm_home *h, uint16_t from, uint32_t page, uint32_t off,
		   const char *text)
{
	flush1_as(h, from, first_rank_of(from), page, off, text);
}

static void oneway(lm_home *h, uint16_t from, enum lm_msg_type type,
		   uint32_t id, uint32_t rank)
{
	struct lm_msg m = msg(type);

	m.id = id;
	m.rank = rank;
	lm_home_handle(h, from, LM_REL_ONEWAY, 0, &m);
}

static void lock(lm_home *h, uint16_t from, uint32_t req, uint32_t id,
		 uint32_t rank)
{
	struct lm_msg m = msg(LM_MSG_LOCK);

	m.id = id;
	m.rank = rank;
	lm_home_handle(h, from, LM_REL_REQUEST, req, &m);
}

/* Sends ALLOC; returns ALLOC_OK's status, offset in *off. */
static int alloc(lm_home *h, uint64_t size, uint64_t align, uint32_t kind,
		 uint64_t *off)
{
	struct lm_msg m = msg(LM_MSG_ALLOC);

	cap_clear();
	m.size = size;
	m.align = align;
	m.id = kind;
	lm_home_handle(h, C0, LM_REL_REQUEST, 77, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].node == C0 &&
		  cap.v[0].req_id == 77);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_ALLOC_OK);
	CU_ASSERT(cap.v[0].m.run == RUN);
	*off = cap.v[0].m.offset;
	return cap.v[0].m.status;
}

static int free_off(lm_home *h, uint64_t off)
{
	struct lm_msg m = msg(LM_MSG_FREE);

	cap_clear();
	m.offset = off;
	lm_home_handle(h, C0, LM_REL_REQUEST, 78, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].node == C0 &&
		  cap.v[0].req_id == 78);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_FREE_OK);
	return cap.v[0].m.status;
}

static bool has_notice(const struct captured *c, uint32_t page,
		       uint32_t version)
{
	for (uint32_t i = 0; i < c->m.nnotices; i++)
		if (c->m.notices[i].page == page &&
		    c->m.notices[i].version == version)
			return true;
	return false;
}

/* The notice for `page` in a captured message, or NULL. */
static const struct lm_notice *notice_of(const struct captured *c,
					 uint32_t page)
{
	for (uint32_t i = 0; i < c->m.nnotices; i++)
		if (c->m.notices[i].page == page)
			return &c->m.notices[i];
	return NULL;
}

/* Completes barrier `id` on conf/4+4.ini; returns the RELEASE to C0. */
static const struct captured *barrier_44(lm_home *h, uint32_t id)
{
	cap_clear();
	oneway(h, C0, LM_MSG_BARRIER, id, 0);
	oneway(h, C1, LM_MSG_BARRIER, id, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	CU_ASSERT_FATAL(cap.v[0].m.type == LM_MSG_RELEASE);
	return cap.v[0].node == C0 ? &cap.v[0] : &cap.v[1];
}

/* ---- tests ------------------------------------------------------------ */

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

/* 64 MiB region less the runtime's last page (4 KiB pages). */
#define ARENA ((64ull << 20) - 4096)

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

LM_TEST_SUITE("home",
	      LM_TEST(test_create_rejects_bad_arguments),
	      LM_TEST(test_fetch_zero_page),
	      LM_TEST(test_flush_then_fetch),
	      LM_TEST(test_fetchv_serves_settled_pages),
	      LM_TEST(test_fetchv_pages_as_diffs),
	      LM_TEST(test_fetchv_whole_when_masks_over_budget),
	      LM_TEST(test_disjoint_flushes_from_two_clusters),
	      LM_TEST(test_barrier_completes_with_all_clusters),
	      LM_TEST(test_barrier_second_arrival_dropped),
	      LM_TEST(test_barriers_with_different_ids_pending),
	      LM_TEST(test_lock_fifo_with_notices),
	      LM_TEST(test_unlock_by_non_holder_dropped),
	      LM_TEST(test_alloc_alignment),
	      LM_TEST(test_alloc_reuse_after_free),
	      LM_TEST(test_alloc_out_of_memory),
	      LM_TEST(test_bad_free),
	      LM_TEST(test_alloc_ids),
	      LM_TEST(test_create_routed_to_target_cluster),
	      LM_TEST(test_end_routed_to_rank0_with_notices),
	      LM_TEST(test_newer_run_resets_older_dropped),
	      LM_TEST(test_older_run_dropped),
	      LM_TEST(test_bad_page_id),
	      LM_TEST(test_malformed_diff_rejected_whole),
	      LM_TEST(test_bad_sender_kind_and_type_dropped),
	      LM_TEST(test_notice_names_sole_writer),
	      LM_TEST(test_notice_many_writers),
	      LM_TEST(test_notice_in_grant_keeps_epoch_base),
	      LM_TEST(test_flush_without_valid_rank_dropped),
	      LM_TEST(test_join_and_abort))
