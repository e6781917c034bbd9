/* The lemuriad state machine (lemuriad/cluster.c) driven by hand: decoded
 * messages go in as if from clients of c0 in conf/4+4.ini (ranks 0..3)
 * or from its reflector, and every message it emits is captured and
 * checked: joins, coalesced fetches, flushes, barriers, locks, relays,
 * CREATE/END routing, the LRU bound, runs and lost peers. */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lemuriad.h"
#include "config.h"
#include "deltas.h"
#include "diff.h"
#include "diff_util.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "updates.h"

#define HASH 0x1234abcd5678ef00ull
#define RUN 100u
#define MAX_OUT 64

/* A notice of a page written by several ranks of several clusters: it
 * keeps no copy, whatever the copy's version. */
#define NOTE(p, v) { (p), (v), 0, LM_WRITER_MANY, LM_WRITER_MANY }

enum how { SENT, REQUESTED, REPLIED };

/* One captured message, deep-copied so it outlives the callback. */
struct out {
	enum how how;
	uint16_t node;
	uint32_t req_id;
	struct lm_msg m;
	uint8_t *data;
	uint8_t *diffs;
	struct lm_notice *notices;
};

static struct out outs[MAX_OUT];
static size_t nouts;

static void record(enum how how, uint16_t node, uint32_t req_id,
		   const struct lm_msg *m)
{
	struct out *o;

	CU_ASSERT_FATAL(nouts < MAX_OUT);
	o = &outs[nouts++];
	memset(o, 0, sizeof(*o));
	o->how = how;
	o->node = node;
	o->req_id = req_id;
	o->m = *m;
	if (m->data_len) {
		o->data = malloc(m->data_len);
		memcpy(o->data, m->data, m->data_len);
		o->m.data = o->data;
	}
	if (m->diffs.len) {
		o->diffs = malloc(m->diffs.len);
		memcpy(o->diffs, m->diffs.data, m->diffs.len);
		o->m.diffs.data = o->diffs;
	}
	if (m->nnotices) {
		o->notices = malloc(m->nnotices * sizeof(*o->notices));
		memcpy(o->notices, m->notices,
		       m->nnotices * sizeof(*o->notices));
		o->m.notices = o->notices;
	}
}

static void out_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	(void)ctx;
	record(SENT, node, 0, m);
}

static void out_request(void *ctx, uint16_t node, uint32_t req_id,
			const struct lm_msg *m)
{
	(void)ctx;
	record(REQUESTED, node, req_id, m);
}

static void out_reply(void *ctx, uint16_t node, uint32_t req_id,
		      const struct lm_msg *m)
{
	(void)ctx;
	record(REPLIED, node, req_id, m);
}

static const struct lm_msg_out out_cbs = {
	.send = out_send, .request = out_request, .reply = out_reply,
};

/* The daemon's later(), counted: a test with it drives the cluster's
 * background work itself (lm_lemuriad_background). */
static int laters;

static void out_later(void *ctx)
{
	(void)ctx;
	laters++;
}

static const struct lm_msg_out out_cbs_later = {
	.send = out_send, .request = out_request, .reply = out_reply,
	.later = out_later,
};

static const struct lm_msg_out *out_now = &out_cbs; /* setup's */

static void clear_outs(void)
{
	for (size_t i = 0; i < nouts; i++) {
		free(outs[i].data);
		free(outs[i].diffs);
		free(outs[i].notices);
	}
	nouts = 0;
}

static struct lm_layout *layout;
static uint16_t refl;   /* node id of r0 */

static lm_lemuriad *setup_path(const char *path)
{
	char err[256];
	lm_lemuriad *c;

	clear_outs();
	layout = NULL;
	if (lm_layout_load(path, &layout, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		CU_FAIL_FATAL("layout does not load");
	}
	refl = lm_layout_reflector(layout, "r0")->id;
	c = lm_lemuriad_create(layout, "c0", HASH, out_now, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	return c;
}

static lm_lemuriad *setup_text(const char *text);

/* conf/4+4.ini with the lazy relay these tests describe (the layout's
 * default is adaptive), and the fetch ahead of `prefetch = 7`. */
static const char lazy_layout[] =
	"[lemuria]\n"
	"prefetch = 7\n"
	"shared_size = 64M\n"
	"page_size = 4096\n"
	"base = 0x500000000000\n"
	"auth = off\n"
	"relay = lazy\n"
	"[reflector r0]\n"
	"listen = 127.0.0.1:17500\n"
	"[cluster c0]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17510\n"
	"clients = 4\n"
	"cache = 64M\n"
	"[cluster c1]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17511\n"
	"clients = 4\n"
	"cache = 64M\n";

static lm_lemuriad *setup(void)
{
	return setup_text(lazy_layout);
}

static void teardown(lm_lemuriad *c)
{
	lm_lemuriad_destroy(c);
	lm_layout_free(layout);
	layout = NULL;
	clear_outs();
}

static uint16_t node_of(uint32_t rank)
{
	return lm_layout_client_id(layout, rank);
}

static struct lm_msg msg(uint16_t type, uint64_t run)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.run = run;
	return m;
}

/* A request from client `rank`. */
static void creq(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
		 const struct lm_msg *m)
{
	lm_lemuriad_handle(c, node_of(rank), LM_REL_REQUEST, req_id, m);
}

static void join(lm_lemuriad *c, uint32_t rank, uint64_t run)
{
	struct lm_msg m = msg(LM_MSG_JOIN, run);

	m.rank = rank;
	m.pid = 1000 + rank;
	m.layout_hash = HASH;
	creq(c, rank, 1, &m);
}

static void join_all(lm_lemuriad *c, uint64_t run)
{
	for (uint32_t r = 0; r < 4; r++)
		join(c, r, run);
	CU_ASSERT_EQUAL(nouts, 4);
	for (size_t i = 0; i < nouts; i++)
		CU_ASSERT_EQUAL(outs[i].m.status, 0);
	clear_outs();
}

static void fetch(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
		  uint32_t page)
{
	struct lm_msg m = msg(LM_MSG_FETCH, RUN);

	m.page = page;
	creq(c, rank, req_id, &m);
}

/* The reflector answers request req_id with page at version, filled with
 * byte `fill`. */
static void r_page_poked(lm_lemuriad *c, uint32_t req_id, uint32_t page,
			 uint32_t version, uint8_t fill, size_t at, size_t n,
			 uint8_t val)
{
	static uint8_t buf[65536];
	struct lm_msg m = msg(LM_MSG_PAGE, RUN);

	memset(buf, fill, layout->page_size);
	memset(buf + at, val, n);
	m.page = page;
	m.version = version;
	m.data = buf;
	m.data_len = layout->page_size;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, &m);
}

static void r_page(lm_lemuriad *c, uint32_t req_id, uint32_t page,
		   uint32_t version, uint8_t fill)
{
	r_page_poked(c, req_id, page, version, fill, 0, 0, 0);
}

/* The reflector answers FETCHV req_id with PAGES holding one entry,
 * `entry` (len bytes) under `note`, or none when note is NULL. */
static void r_pages_one(lm_lemuriad *c, uint32_t req_id,
			const struct lm_notice *note, const uint8_t *entry,
			size_t len)
{
	static uint8_t list[65536 + 64];
	struct lm_msg m = msg(LM_MSG_PAGES, RUN);
	size_t used = 0;

	if (note) {
		CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(list, sizeof(list),
							  &used, note->page,
							  entry, len),
				      0);
		m.notices = note;
		m.nnotices = 1;
		m.diffs = (struct lm_msg_diffs){ list, used, 1 };
	}
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, &m);
}

/* The reflector answers FETCHV req_id with PAGES holding `page` at
 * version, filled with `fill` but n bytes of `val` at `at`; page
 * UINT32_MAX: with no page at all. */
static void r_pages_poked(lm_lemuriad *c, uint32_t req_id, uint32_t page,
			  uint32_t version, uint8_t fill, size_t at, size_t n,
			  uint8_t val)
{
	static uint8_t buf[65536];
	struct lm_notice note = { .page = page, .version = version,
				  .base = LM_NO_BASE };

	memset(buf, fill, layout->page_size);
	memset(buf + at, val, n);
	r_pages_one(c, req_id, page != UINT32_MAX ? &note : NULL, buf,
		    layout->page_size);
}

/* The reflector answers FETCHV req_id with PAGES holding, for `page`,
 * a diff against our copy at `base`: n bytes of `val` at `at`. */
static void r_pages_diff(lm_lemuriad *c, uint32_t req_id, uint32_t page,
			 uint32_t version, uint32_t base, size_t at, size_t n,
			 uint8_t val)
{
	uint8_t diff[64];
	struct lm_notice note = { .page = page, .version = version,
				  .base = base };
	size_t hdr = test_run_header(diff, at, n);

	memset(diff + hdr, val, n);
	r_pages_one(c, req_id, &note, diff, hdr + n);
}

/* Puts page into the cache at version (filled with `fill`). */
static void cache_page(lm_lemuriad *c, uint32_t page, uint32_t version,
		       uint8_t fill)
{
	uint32_t up;

	clear_outs();
	fetch(c, 0, 900 + page, page);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	up = outs[0].req_id;
	clear_outs();
	r_page(c, up, page, version, fill);
	CU_ASSERT_EQUAL(nouts, 1);
	clear_outs();
}

/* True when a FETCH of page is answered from the cache (and then the
 * output is cleared; a miss's upstream FETCH is left for the caller). */
static bool is_cached(lm_lemuriad *c, uint32_t page)
{
	bool hit;

	clear_outs();
	fetch(c, 3, 800 + page, page);
	hit = nouts == 1 && outs[0].how == REPLIED &&
	      outs[0].m.type == LM_MSG_PAGE;
	if (hit)
		clear_outs();
	return hit;
}

static struct out *find_out(enum how how, uint16_t node, uint16_t type)
{
	for (size_t i = 0; i < nouts; i++)
		if (outs[i].how == how && outs[i].node == node &&
		    outs[i].m.type == type)
			return &outs[i];
	return NULL;
}

static void test_join(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg m = msg(LM_MSG_JOIN, RUN);

	m.rank = 0;
	m.layout_hash = HASH;
	creq(c, 0, 7, &m);
	CU_ASSERT_EQUAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(0));
	CU_ASSERT_EQUAL(outs[0].req_id, 7);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_JOIN_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	CU_ASSERT_EQUAL(outs[0].m.run, RUN);
	clear_outs();

	/* rank 4 lives in c1; rank 2 is not node_of(1)'s rank */
	m.rank = 4;
	creq(c, 1, 8, &m);
	m.rank = 2;
	creq(c, 1, 9, &m);
	/* right rank, wrong layout */
	m.rank = 1;
	m.layout_hash = HASH + 1;
	creq(c, 1, 10, &m);
	CU_ASSERT_EQUAL(nouts, 3);
	for (size_t i = 0; i < nouts; i++) {
		CU_ASSERT_EQUAL(outs[i].m.type, LM_MSG_JOIN_OK);
		CU_ASSERT_EQUAL(outs[i].m.status, LM_EINVAL);
		CU_ASSERT_EQUAL(outs[i].req_id, 8 + i);
	}
	clear_outs();

	/* rank 1 never joined: its FETCH is dropped */
	fetch(c, 1, 11, 0);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);

	/* a node of cluster c1 is not ours, whatever it says */
	m.rank = 4;
	m.layout_hash = HASH;
	lm_lemuriad_handle(c, node_of(4), LM_REL_REQUEST, 12, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 2);

	/* the joined rank 0 is served */
	fetch(c, 0, 13, 0);
	CU_ASSERT_EQUAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	teardown(c);
}

static void test_create_rejects_unknown_name(void)
{
	lm_lemuriad *c = setup();

	CU_ASSERT_PTR_NULL(lm_lemuriad_create(layout, "nope", HASH, &out_cbs,
					     NULL));
	lm_lemuriad_destroy(NULL);
	teardown(c);
}

/* A client's FETCHV of pages[0..n) (rank, req_id) whose fault reached
 * `reach` pages after the first (the first notice's version). */
static void creq_fetchv_reach(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
			      const uint32_t *pages, uint32_t n, uint32_t reach)
{
	struct lm_notice ask[LM_CFG_PREFETCH_MAX * 2 + 2];
	struct lm_msg m = msg(LM_MSG_FETCHV, RUN);

	CU_ASSERT_FATAL(n <= LM_CFG_PREFETCH_MAX * 2 + 2);
	lm_msg_fetchv(&m, ask, pages, n, reach);
	creq(c, rank, req_id, &m);
}

/* ... reaching as far as the layout lets it. */
static void creq_fetchv(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
			const uint32_t *pages, uint32_t n)
{
	creq_fetchv_reach(c, rank, req_id, pages, n, layout->prefetch);
}

/* A client's FETCHV of pages[0..n) (rank 0, req_id 31). */
static void fetchv(lm_lemuriad *c, const uint32_t *pages, uint32_t n)
{
	creq_fetchv(c, 0, 31, pages, n);
}

/* Neighbour pages (docs/dsm.md): a client's FETCHV whose first page we
 * hold is answered at once by one PAGES with it and the others we hold,
 * in order, each with its version; one whose first page we lack is that
 * page's FETCH, answered by a PAGES with it and the others we hold then;
 * pages outside the region are refused, not served. */
static void test_client_fetchv_serves_what_is_cached(void)
{
	lm_lemuriad *c = setup();
	const uint32_t hit[] = { 7, 8, 9 }, miss[] = { 8, 9 };
	const uint32_t bad[] = { 7, 1u << 30 };
	uint32_t many[LM_CFG_PREFETCH_MAX * 2 + 2];
	size_t pos = 0, len;
	const uint8_t *data;
	struct out *o;
	uint32_t page;

	join_all(c, RUN);
	cache_page(c, 7, 3, 0x70);
	cache_page(c, 9, 4, 0x90);
	fetchv(c, hit, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	o = &outs[0];
	CU_ASSERT_EQUAL(o->how, REPLIED);
	CU_ASSERT_EQUAL(o->req_id, 31);
	CU_ASSERT_EQUAL_FATAL(o->m.type, LM_MSG_PAGES);
	CU_ASSERT_EQUAL_FATAL(o->m.nnotices, 2);
	CU_ASSERT(o->m.notices[0].page == 7 && o->m.notices[0].version == 3);
	CU_ASSERT(o->m.notices[1].page == 9 && o->m.notices[1].version == 4);
	CU_ASSERT_FATAL(lm_msg_diffs_next(&o->m.diffs, &pos, &page, &data,
					  &len) == 1);
	CU_ASSERT(page == 7 && len == layout->page_size && data[0] == 0x70);
	CU_ASSERT_FATAL(lm_msg_diffs_next(&o->m.diffs, &pos, &page, &data,
					  &len) == 1);
	CU_ASSERT(page == 9 && len == layout->page_size && data[5] == 0x90);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->fetch_neighbours, 1);
	clear_outs();

	/* the first page is not here: it goes up alone, and its PAGES
	 * brings 9, which we hold */
	fetchv(c, miss, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[0].m.page, 8);
	r_page(c, outs[0].req_id, 8, 5, 0x80);
	o = find_out(REPLIED, node_of(0), LM_MSG_PAGES);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL(o->req_id, 31);
	CU_ASSERT_EQUAL_FATAL(o->m.nnotices, 2);
	CU_ASSERT(o->m.notices[0].page == 8 && o->m.notices[0].version == 5);
	CU_ASSERT(o->m.notices[1].page == 9 && o->m.notices[1].version == 4);
	pos = 0;
	CU_ASSERT_FATAL(lm_msg_diffs_next(&o->m.diffs, &pos, &page, &data,
					  &len) == 1);
	CU_ASSERT(page == 8 && len == layout->page_size && data[0] == 0x80);
	clear_outs();

	/* a page outside the region is counted and left out */
	fetchv(c, bad, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_PAGES);
	CU_ASSERT_EQUAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	clear_outs();

	/* up to 2 * LM_CFG_PREFETCH_MAX pages after the first (after it
	 * and along a stride); one more is refused with an empty PAGE */
	for (uint32_t i = 0; i < LM_CFG_PREFETCH_MAX * 2 + 2; i++)
		many[i] = 7 + 2 * i;
	fetchv(c, many, LM_CFG_PREFETCH_MAX * 2 + 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_PAGES);
	CU_ASSERT_EQUAL(outs[0].m.nnotices, 2); /* 7 and 9 */
	clear_outs();
	fetchv(c, many, LM_CFG_PREFETCH_MAX * 2 + 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_PAGE);
	CU_ASSERT_EQUAL(outs[0].m.data_len, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 2);
	teardown(c);
}

/* A client's read miss, once answered, has the lemuriad ask in one
 * FETCHV for the `prefetch` pages after it that it neither holds nor
 * fetches already (docs/dsm.md "Neighbour pages"); faults on them while
 * it is on its way wait for it; of the pages its PAGES leaves out, only
 * those a client waits for are asked for alone. */
static void test_read_miss_fetches_the_next_pages_ahead(void)
{
	lm_lemuriad *c = setup();
	const uint32_t ask[] = { 10, 11 };
	const uint32_t ahead[] = { 11, 13, 15, 16, 17 };
	uint32_t fetch10, fetch14, batch;
	struct out *o;

	CU_ASSERT_EQUAL_FATAL(layout->prefetch, 7);
	join_all(c, RUN);
	cache_page(c, 12, 2, 0x12);
	fetchv(c, ask, 2); /* rank 0 misses 10 */
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCH);
	fetch10 = outs[0].req_id;
	clear_outs();
	fetch(c, 1, 41, 14); /* a plain FETCH: no pages ahead */
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	fetch14 = outs[0].req_id;
	clear_outs();
	r_page(c, fetch14, 14, 3, 0x14);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	clear_outs();

	r_page(c, fetch10, 10, 4, 0x10);
	o = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL_FATAL(o->m.nnotices, 5);
	for (uint32_t i = 0; i < 5; i++)
		CU_ASSERT(o->m.notices[i].page == ahead[i] &&
			  o->m.notices[i].base == LM_NO_BASE);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->fetch_ahead, 5);
	batch = o->req_id;
	clear_outs();

	fetch(c, 2, 42, 13);
	fetch(c, 3, 43, 15);
	CU_ASSERT_EQUAL(nouts, 0); /* both wait for the FETCHV */
	r_pages_poked(c, batch, 13, 5, 0x13, 0, 0, 0);
	o = find_out(REPLIED, node_of(2), LM_MSG_PAGE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT(o->req_id == 42 && o->m.version == 5 && o->data[9] == 0x13);
	/* 15 is waited for: asked alone; 11, 16 and 17 are left */
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	o = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL(o->m.page, 15);
	r_page(c, o->req_id, 15, 6, 0x15);
	o = find_out(REPLIED, node_of(3), LM_MSG_PAGE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT(o->req_id == 43 && o->m.version == 6);
	CU_ASSERT(is_cached(c, 13));
	CU_ASSERT(!is_cached(c, 11));
	teardown(c);
}

/* The one message out, a client's read miss on `page` sent up as a
 * FETCH, is answered by the reflector; returns the FETCHV ahead that the
 * lemuriad sends then (NULL: none). */
static struct out *miss_answered(lm_lemuriad *c, uint32_t page, uint8_t fill)
{
	uint32_t fetch;

	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCH);
	fetch = outs[0].req_id;
	clear_outs();
	r_page(c, fetch, page, 4, fill);
	return find_out(REQUESTED, refl, LM_MSG_FETCHV);
}

/* With `prefetch = 31` a client's FETCHV may name 63 pages, and the
 * fetch ahead after its miss could ask for 31 + 62: the FETCHV to the
 * reflector takes the pages after the miss first and stops at
 * LM_FETCHV_MAX, the most a reflector serves. */
static void test_fetch_ahead_fits_one_fetchv(void)
{
	char text[sizeof(lazy_layout) + 8];
	uint32_t ask[1 + 2 * LM_CFG_PREFETCH_MAX];
	const char *at = strstr(lazy_layout, "prefetch = 7");
	lm_lemuriad *c;
	struct out *o;

	CU_ASSERT_EQUAL_FATAL(LM_CFG_PREFETCH_MAX, 31);
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*sprefetch = 31%s",
		 (int)(at - lazy_layout), lazy_layout,
		 at + strlen("prefetch = 7"));
	c = setup_text(text);
	CU_ASSERT_EQUAL_FATAL(layout->prefetch, 31);
	join_all(c, RUN);
	ask[0] = 100;
	for (uint32_t i = 1; i < 1 + 2 * LM_CFG_PREFETCH_MAX; i++)
		ask[i] = 200 + 2 * i; /* none among the 31 after 100 */
	fetchv(c, ask, 1 + 2 * LM_CFG_PREFETCH_MAX);
	o = miss_answered(c, 100, 0x64);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL_FATAL(o->m.nnotices, LM_FETCHV_MAX);
	for (uint32_t i = 0; i < LM_CFG_PREFETCH_MAX; i++)
		CU_ASSERT_EQUAL(o->m.notices[i].page, 101 + i);
	for (uint32_t i = LM_CFG_PREFETCH_MAX; i < LM_FETCHV_MAX; i++)
		CU_ASSERT_EQUAL(o->m.notices[i].page,
				ask[1 + i - LM_CFG_PREFETCH_MAX]);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->fetch_ahead, LM_FETCHV_MAX);
	teardown(c);
}

/* The lemuriad fetches ahead as far as the client's fault reached (the
 * FETCHV's first version, docs/protocol.md) and never beyond `prefetch`;
 * a fault that reached no page after it still has the pages it named
 * along its stride fetched ahead. */
static void test_fetch_ahead_goes_as_far_as_the_fault(void)
{
	static const struct {
		uint32_t reach, n; /* n: pages after 10 fetched ahead */
	} cases[] = { { 2, 2 }, { 0, 0 }, { 1000, 7 } };
	const uint32_t ask[] = { 10, 40 };

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		lm_lemuriad *c = setup();
		struct out *o;

		CU_ASSERT_EQUAL_FATAL(layout->prefetch, 7);
		join_all(c, RUN);
		creq_fetchv_reach(c, 0, 31, ask, 2, cases[k].reach);
		o = miss_answered(c, 10, 0x10);
		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		/* the pages after the miss, then the stride's 40 */
		CU_ASSERT_EQUAL_FATAL(o->m.nnotices, cases[k].n + 1);
		for (uint32_t i = 0; i < cases[k].n; i++)
			CU_ASSERT_EQUAL(o->m.notices[i].page, 11 + i);
		CU_ASSERT_EQUAL(o->m.notices[cases[k].n].page, 40);
		teardown(c);
	}
}

/* The reflector answers FETCHV req_id with PAGES holding whole pages
 * pages[0..n), each at version and filled with its own number. */
static void r_pages_whole(lm_lemuriad *c, uint32_t req_id,
			  const uint32_t *pages, uint32_t n, uint32_t version)
{
	static uint8_t list[4 * (65536 + 16)];
	static uint8_t buf[65536];
	struct lm_notice notes[4];
	struct lm_msg m = msg(LM_MSG_PAGES, RUN);
	size_t used = 0;

	CU_ASSERT_FATAL(n <= 4);
	for (uint32_t i = 0; i < n; i++) {
		memset(buf, (int)pages[i], layout->page_size);
		notes[i] = (struct lm_notice){ .page = pages[i],
			.version = version, .base = LM_NO_BASE };
		CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(list, sizeof(list),
							  &used, pages[i], buf,
							  layout->page_size),
				      0);
	}
	m.notices = notes;
	m.nnotices = n;
	m.diffs = (struct lm_msg_diffs){ list, used, n };
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, &m);
}

/* A read miss whose FETCHV named pages along a stride (docs/dsm.md
 * "Neighbour pages"): they go ahead with the pages after it; a FETCHV
 * waiting on one page of that batch is answered with the later pages of
 * the batch it asked for, since the batch is taken last page first. */
static void test_read_miss_fetches_its_stride_ahead(void)
{
	lm_lemuriad *c = setup();
	const uint32_t ask[] = { 10, 11, 30, 40 }, wait[] = { 13, 30 };
	const uint32_t reply[] = { 13, 30 };
	uint32_t batch;
	bool asked30 = false, asked40 = false;
	struct out *o;

	join_all(c, RUN);
	fetchv(c, ask, 4); /* rank 0 misses 10 */
	o = miss_answered(c, 10, 0x10);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	for (uint32_t i = 0; i < o->m.nnotices; i++) {
		asked30 |= o->m.notices[i].page == 30;
		asked40 |= o->m.notices[i].page == 40;
	}
	CU_ASSERT(asked30 && asked40);
	CU_ASSERT_EQUAL(o->m.nnotices, 9); /* 11..17, 30, 40 */
	batch = o->req_id;
	clear_outs();

	creq_fetchv(c, 2, 42, wait, 2); /* rank 2 waits on 13 */
	CU_ASSERT_EQUAL(nouts, 0);
	r_pages_whole(c, batch, reply, 2, 5);
	o = find_out(REPLIED, node_of(2), LM_MSG_PAGES);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL(o->req_id, 42);
	CU_ASSERT_EQUAL_FATAL(o->m.nnotices, 2);
	CU_ASSERT(o->m.notices[0].page == 13 && o->m.notices[1].page == 30);
	teardown(c);
}

static void test_fetch_coalesces_and_hits(void)
{
	lm_lemuriad *c = setup();
	uint32_t up;

	join_all(c, RUN);
	fetch(c, 0, 21, 7);
	fetch(c, 1, 22, 7);
	fetch(c, 2, 23, 7);
	/* exactly one FETCH goes up for three clients */
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[0].m.page, 7);
	CU_ASSERT_EQUAL(outs[0].m.run, RUN);
	up = outs[0].req_id;
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->fetch_misses, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->fetch_coalesced, 2);
	clear_outs();

	r_page(c, up, 7, 3, 0x5a);
	CU_ASSERT_EQUAL_FATAL(nouts, 3);
	for (uint32_t r = 0; r < 3; r++) {
		struct out *o = find_out(REPLIED, node_of(r), LM_MSG_PAGE);

		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_EQUAL(o->req_id, 21 + r);
		CU_ASSERT_EQUAL(o->m.page, 7);
		CU_ASSERT_EQUAL(o->m.version, 3);
		CU_ASSERT_EQUAL_FATAL(o->m.data_len, layout->page_size);
		CU_ASSERT(o->data[0] == 0x5a &&
			  o->data[layout->page_size - 1] == 0x5a);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, layout->page_size);
	clear_outs();

	/* now a hit: answered at once, nothing goes up */
	fetch(c, 3, 24, 7);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(3));
	CU_ASSERT_EQUAL(outs[0].req_id, 24);
	CU_ASSERT_EQUAL(outs[0].m.version, 3);
	CU_ASSERT_EQUAL(outs[0].data[100], 0x5a);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->fetch_hits, 1);
	clear_outs();

	/* a second reply to the same request matches nothing */
	r_page(c, up, 7, 3, 0);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	teardown(c);
}

static void test_fetch_ids_grow(void)
{
	lm_lemuriad *c = setup();

	join_all(c, RUN);
	fetch(c, 0, 1, 1);
	fetch(c, 0, 2, 2);
	fetch(c, 0, 3, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 3);
	CU_ASSERT(outs[0].req_id < outs[1].req_id);
	CU_ASSERT(outs[1].req_id < outs[2].req_id);
	/* out of the region: an empty PAGE at once, nothing goes up */
	clear_outs();
	fetch(c, 0, 4, (uint32_t)(layout->shared_size / layout->page_size));
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].req_id, 4);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_PAGE);
	CU_ASSERT_EQUAL(outs[0].m.data_len, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	teardown(c);
}

static void test_fetch_bad_reply_fails_waiters(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg p = msg(LM_MSG_PAGE, RUN);
	uint32_t up;

	join_all(c, RUN);
	fetch(c, 0, 1, 8);
	fetch(c, 1, 2, 8);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	p.page = 8; /* R's answer for a page it cannot serve: no data */
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &p);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	for (size_t i = 0; i < nouts; i++) {
		CU_ASSERT_EQUAL(outs[i].how, REPLIED);
		CU_ASSERT_EQUAL(outs[i].m.type, LM_MSG_PAGE);
		CU_ASSERT_EQUAL(outs[i].m.data_len, 0);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	teardown(c);
}

/* A FLUSH of one diff setting bytes [off, off + n) of page to val. */
static size_t make_flush(uint8_t *list, size_t cap, uint32_t page,
			 size_t off, size_t n, uint8_t val)
{
	static uint8_t twin[4096], now[4096], diff[4096 * 5];
	size_t dlen = 0, len = 0;

	memset(twin, 0, sizeof(twin));
	memset(now, 0, sizeof(now));
	memset(now + off, val, n);
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, now, sizeof(now), diff,
					     sizeof(diff), &dlen), 0);
	CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(list, cap, &len, page, diff,
						  dlen), 0);
	return len;
}

/* A client's FLUSH goes into the cached copy and the page's open delta:
 * acked at once, nothing goes up until a release (lazy relay). */
static void test_flush_applies_and_keeps_delta(void)
{
	lm_lemuriad *c = setup();
	uint8_t list[256];
	struct lm_msg f = msg(LM_MSG_FLUSH, RUN);

	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11);
	f.diffs.data = list;
	f.diffs.len = make_flush(list, sizeof(list), 9, 100, 8, 0x77);
	f.diffs.count = 1;
	f.rank = 3; /* a lie: the writer is the sender's rank */
	creq(c, 1, 31, &f);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(1));
	CU_ASSERT_EQUAL(outs[0].req_id, 31);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FLUSH_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->flushes, 1);
	clear_outs();

	/* the cached copy holds the diff and keeps its version */
	fetch(c, 2, 32, 9);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.version, 4);
	CU_ASSERT_EQUAL(outs[0].data[99], 0x11);
	CU_ASSERT_EQUAL(outs[0].data[100], 0x77);
	CU_ASSERT_EQUAL(outs[0].data[107], 0x77);
	CU_ASSERT_EQUAL(outs[0].data[108], 0x11);
	clear_outs();

	/* a run past the page end: refused whole, nothing forwarded */
	f.diffs.len = make_flush(list, sizeof(list), 9, 200, 4, 0x99);
	list[8] = 0xff; /* run offset (first field after the entry header) */
	list[9] = 0xff;
	creq(c, 1, 33, &f);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FLUSH_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->flushes, 1);
	clear_outs();
	/* a truncated list likewise */
	f.diffs.len = make_flush(list, sizeof(list), 9, 200, 4, 0x99) - 1;
	creq(c, 1, 34, &f);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.status, LM_EBADMSG);
	clear_outs();
	fetch(c, 2, 35, 9);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].data[200], 0x11);
	teardown(c);
}

static void barrier(lm_lemuriad *c, uint32_t rank, uint32_t id)
{
	struct lm_msg b = msg(LM_MSG_BARRIER, RUN);

	b.id = id;
	creq(c, rank, 40 + rank, &b);
}

static void test_barrier_and_release(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n[2] = { NOTE(1, 3), NOTE(2, 5) };
	struct lm_msg rel = msg(LM_MSG_RELEASE, RUN);

	join_all(c, RUN);
	cache_page(c, 1, 2, 0xa1); /* older than its notice */
	cache_page(c, 2, 5, 0xa2); /* as new as its notice */
	for (uint32_t r = 0; r < 3; r++)
		barrier(c, r, 6);
	CU_ASSERT_EQUAL(nouts, 0);
	barrier(c, 3, 6);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, SENT);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL(outs[0].m.id, 6);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->barriers, 1);
	clear_outs();

	rel.id = 6;
	rel.notices = n;
	rel.nnotices = 2;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &rel);
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
	for (uint32_t r = 0; r < 4; r++) {
		struct out *o = find_out(REPLIED, node_of(r), LM_MSG_RELEASE);

		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_EQUAL(o->req_id, 40 + r);
		CU_ASSERT_EQUAL(o->m.id, 6);
		CU_ASSERT_EQUAL_FATAL(o->m.nnotices, 2);
		CU_ASSERT_EQUAL(o->notices[0].page, 1);
		CU_ASSERT_EQUAL(o->notices[1].version, 5);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 1);
	/* I3: only the older copy went */
	CU_ASSERT(is_cached(c, 2));
	CU_ASSERT(!is_cached(c, 1));
	clear_outs();

	/* the same RELEASE again finds no barrier and invalidates nothing */
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &rel);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT(is_cached(c, 2));
	teardown(c);
}

static void test_barrier_counts_each_client_once(void)
{
	lm_lemuriad *c = setup();

	join_all(c, RUN);
	barrier(c, 0, 1);
	barrier(c, 0, 1); /* a second arrival of one client */
	barrier(c, 1, 1);
	barrier(c, 2, 1);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	barrier(c, 3, 1);
	CU_ASSERT_EQUAL(nouts, 1);
	teardown(c);
}

/* The lock's manager asks for the token back. */
static void recall(lm_lemuriad *c, uint32_t id, uint32_t rank)
{
	struct lm_msg m = msg(LM_MSG_RECALL, RUN);

	m.id = id;
	m.rank = rank;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
}

static void test_lock_grant_unlock_relay(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n[1] = { NOTE(3, 2) };
	struct lm_msg m = msg(LM_MSG_LOCK, RUN);
	uint32_t up;

	join_all(c, RUN);
	cache_page(c, 3, 1, 0x33);
	m.id = 12;
	m.rank = 1;
	creq(c, 1, 51, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_LOCK);
	CU_ASSERT_EQUAL(outs[0].m.id, 12);
	CU_ASSERT_EQUAL(outs[0].m.rank, 1);
	up = outs[0].req_id;
	clear_outs();

	m = msg(LM_MSG_GRANT, RUN);
	m.id = 12;
	m.notices = n;
	m.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(1));
	CU_ASSERT_EQUAL(outs[0].req_id, 51);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_GRANT);
	CU_ASSERT_EQUAL(outs[0].m.id, 12);
	CU_ASSERT_EQUAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->locks, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 1);
	CU_ASSERT(!is_cached(c, 3));
	clear_outs();

	/* a rank that does not hold it is refused, nothing goes up */
	m = msg(LM_MSG_UNLOCK, RUN);
	m.id = 12;
	m.rank = 2;
	creq(c, 2, 52, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, LM_EINVAL);
	clear_outs();

	/* the token stays in the cluster: nothing goes up */
	m.rank = 1;
	creq(c, 1, 53, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].req_id, 53);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	clear_outs();

	/* unlocked twice: refused */
	creq(c, 1, 54, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.status, LM_EINVAL);
	clear_outs();

	/* recalled while free: it goes back at once, naming the rank the
	 * manager granted it to */
	recall(c, 12, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, SENT);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK);
	CU_ASSERT_EQUAL(outs[0].m.id, 12);
	CU_ASSERT_EQUAL(outs[0].m.rank, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->tokens_returned, 1);
	teardown(c);
}

/* A LOCK or UNLOCK of lock `id` from client `rank`. */
static void lock_op(lm_lemuriad *c, uint16_t type, uint32_t rank,
		    uint32_t req_id, uint32_t id)
{
	struct lm_msg m = msg(type, RUN);

	m.id = id;
	m.rank = rank;
	creq(c, rank, req_id, &m);
}

/* How many messages of `type` went to the reflector. */
static int ups_of(uint16_t type)
{
	int n = 0;

	for (size_t i = 0; i < nouts; i++)
		n += outs[i].node == refl && outs[i].m.type == type;
	return n;
}

enum fresh_how { FRESH_WORKER, FRESH_CREATOR, FRESH_KEPT };

/* Rank 2 holds lock 12's token here and has unlocked it; rank 1 has
 * just been given work (FRESH_WORKER), or rank 0 has just created some
 * (FRESH_CREATOR), or work waits here for rank 1, which has asked for
 * nothing yet (FRESH_KEPT); none has synchronised since. */
static lm_lemuriad *token_with_fresh_client(enum fresh_how how)
{
	lm_lemuriad *c = setup();
	struct lm_msg m;

	join_all(c, RUN);
	m = msg(LM_MSG_CREATE, RUN);
	m.offset = 0x40;
	if (how == FRESH_CREATOR) {
		m.rank = 5;
		creq(c, 0, 70, &m);
	} else {
		struct lm_msg w = msg(LM_MSG_WAIT_WORK, RUN);

		if (how == FRESH_WORKER)
			creq(c, 1, 70, &w);
		m.rank = 1;
		lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	}
	clear_outs();
	lock_op(c, LM_MSG_LOCK, 2, 80, 12);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	m = msg(LM_MSG_GRANT, RUN);
	m.id = 12;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, outs[0].req_id, &m);
	lock_op(c, LM_MSG_UNLOCK, 2, 81, 12);
	clear_outs();
	return c;
}

/* token_with_fresh_client, recalled: the token must stay. */
static lm_lemuriad *recalled_with_fresh_client(enum fresh_how how)
{
	lm_lemuriad *c = token_with_fresh_client(how);

	recall(c, 12, 2);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 0);
	return c;
}

/* Rank `rank` takes lock 12 and gives it back; returns the UNLOCKs that
 * went up meanwhile. */
static int lock_unlock(lm_lemuriad *c, uint32_t rank, uint32_t req_id)
{
	lock_op(c, LM_MSG_LOCK, rank, req_id, 12);
	lock_op(c, LM_MSG_UNLOCK, rank, req_id + 1, 12);
	return ups_of(LM_MSG_UNLOCK);
}

/* A recalled token nobody here waits for stays while a client that just
 * started (or created) work has not synchronised: SPLASH-2 programs
 * number their processes by a lock taken right then, and the cluster's
 * processes must get consecutive numbers.  Its LOCK is served here; its
 * UNLOCK, or any other synchronisation, lets the token go. */
static void test_recalled_token_waits_for_a_fresh_client(void)
{
	lm_lemuriad *c = recalled_with_fresh_client(FRESH_WORKER);
	struct lm_msg m;

	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->recalls_waited, 1);
	lock_op(c, LM_MSG_LOCK, 1, 82, 12);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(1));
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_GRANT);
	clear_outs();
	lock_op(c, LM_MSG_UNLOCK, 1, 83, 12);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->tokens_returned, 1);
	teardown(c);

	/* a BARRIER of the fresh client lets it go too */
	c = recalled_with_fresh_client(FRESH_WORKER);
	barrier(c, 1, 5);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 1);
	teardown(c);

	/* rank 0 creating work counts as fresh until it synchronises */
	c = recalled_with_fresh_client(FRESH_CREATOR);
	CU_ASSERT_EQUAL(lock_unlock(c, 0, 84), 1);
	teardown(c);

	/* so does a worker whose work came before its WAIT_WORK */
	c = recalled_with_fresh_client(FRESH_KEPT);
	m = msg(LM_MSG_WAIT_WORK, RUN);
	creq(c, 1, 86, &m);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 0);
	CU_ASSERT_EQUAL(lock_unlock(c, 1, 87), 1);
	teardown(c);

	/* but not a rank that, work kept for it, asks for something else
	 * (an SPMD rank sent work by mistake): it may never synchronise */
	c = recalled_with_fresh_client(FRESH_KEPT);
	fetch(c, 1, 89, 3);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 1);
	teardown(c);

	/* nor one that leaves */
	c = recalled_with_fresh_client(FRESH_WORKER);
	m = msg(LM_MSG_LEAVE, RUN);
	creq(c, 1, 90, &m);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 1);
	teardown(c);
}

/* The wait for a fresh client has a bound: a worker that computes long
 * before it first synchronises holds a recalled token for
 * LM_LEMURIAD_FRESH_TICKS ticks of the daemon's clock, not for as long
 * as it computes; a tick before the bound, or one while a local holder
 * has the lock, lets nothing go. */
static void test_fresh_wait_ends_after_its_ticks(void)
{
	lm_lemuriad *c = recalled_with_fresh_client(FRESH_WORKER);

	for (uint32_t i = 1; i < LM_LEMURIAD_FRESH_TICKS; i++) {
		lm_lemuriad_tick(c);
		CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 0);
	}
	lm_lemuriad_tick(c);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->tokens_returned, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->recall_waits_ended, 1);
	lm_lemuriad_tick(c); /* the token is gone: nothing more goes up */
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 1);
	teardown(c);

	/* ticks while the fresh client holds the lock do not count */
	c = recalled_with_fresh_client(FRESH_WORKER);
	lock_op(c, LM_MSG_LOCK, 1, 82, 12);
	for (uint32_t i = 0; i < 2 * LM_LEMURIAD_FRESH_TICKS; i++)
		lm_lemuriad_tick(c);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->recall_waits_ended, 0);
	teardown(c);

	/* nor do ticks with no recall pending */
	c = token_with_fresh_client(FRESH_WORKER);
	for (uint32_t i = 0; i < 2 * LM_LEMURIAD_FRESH_TICKS; i++)
		lm_lemuriad_tick(c);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 0);
	teardown(c);
}

static void test_alloc_free_relay(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg m = msg(LM_MSG_ALLOC, RUN);
	uint32_t up;

	join_all(c, RUN);
	m.size = 10000;
	m.align = 128;
	creq(c, 2, 61, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_ALLOC);
	CU_ASSERT_EQUAL(outs[0].m.size, 10000);
	CU_ASSERT_EQUAL(outs[0].m.align, 128);
	up = outs[0].req_id;
	clear_outs();

	m = msg(LM_MSG_ALLOC_OK, RUN);
	m.offset = 8192;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(2));
	CU_ASSERT_EQUAL(outs[0].req_id, 61);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_ALLOC_OK);
	CU_ASSERT_EQUAL(outs[0].m.offset, 8192);
	clear_outs();

	m = msg(LM_MSG_FREE, RUN);
	m.offset = 8192;
	creq(c, 2, 62, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FREE);
	CU_ASSERT_EQUAL(outs[0].m.offset, 8192);
	up = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_FREE_OK, RUN);
	m.status = LM_EINVAL;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].req_id, 62);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FREE_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, LM_EINVAL);
	teardown(c);
}

static void test_create_routing(void)
{
	lm_lemuriad *c = setup();
	uint8_t image[300];
	struct lm_msg m = msg(LM_MSG_CREATE, RUN);
	struct lm_msg w = msg(LM_MSG_WAIT_WORK, RUN);

	join_all(c, RUN);
	memset(image, 0xc3, sizeof(image));
	/* from rank 0: forwarded one-way, then CREATE_OK */
	m.rank = 5;
	m.offset = 0x1234;
	m.data = image;
	m.data_len = sizeof(image);
	creq(c, 0, 71, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].how, SENT);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_CREATE);
	CU_ASSERT_EQUAL(outs[0].m.rank, 5);
	CU_ASSERT_EQUAL(outs[0].m.offset, 0x1234);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.data_len, sizeof(image));
	CU_ASSERT(memcmp(outs[0].data, image, sizeof(image)) == 0);
	CU_ASSERT_EQUAL(outs[1].how, REPLIED);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_CREATE_OK);
	CU_ASSERT_EQUAL(outs[1].m.status, 0);
	clear_outs();

	/* WAIT_WORK first, then the CREATE from R answers it */
	creq(c, 1, 72, &w);
	CU_ASSERT_EQUAL(nouts, 0);
	m.rank = 1;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(1));
	CU_ASSERT_EQUAL(outs[0].req_id, 72);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_CREATE);
	CU_ASSERT_EQUAL(outs[0].m.offset, 0x1234);
	clear_outs();

	/* CREATE first: kept (copied) until the WAIT_WORK */
	m.rank = 3;
	m.offset = 0x99;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	memset(image, 0, sizeof(image)); /* the received buffer is gone */
	creq(c, 3, 73, &w);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].node, node_of(3));
	CU_ASSERT_EQUAL(outs[0].req_id, 73);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_CREATE);
	CU_ASSERT_EQUAL(outs[0].m.rank, 3);
	CU_ASSERT_EQUAL(outs[0].m.offset, 0x99);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.data_len, sizeof(image));
	CU_ASSERT(outs[0].data[0] == 0xc3 &&
		  outs[0].data[sizeof(image) - 1] == 0xc3);
	clear_outs();

	/* a CREATE for a rank of another cluster is not ours */
	m.rank = 6;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	/* nor can a client target a rank beyond the layout */
	m.rank = 8;
	creq(c, 0, 74, &m);
	/* nor rank 0, which runs main */
	m.rank = 0;
	creq(c, 0, 75, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	for (size_t i = 0; i < nouts; i++) {
		CU_ASSERT_EQUAL(outs[i].how, REPLIED);
		CU_ASSERT_EQUAL(outs[i].m.type, LM_MSG_CREATE_OK);
		CU_ASSERT_EQUAL(outs[i].m.status, LM_EINVAL);
	}
	teardown(c);
}

static void test_create_kept_is_freed(void)
{
	lm_lemuriad *c = setup();
	uint8_t image[64] = { 1 };
	struct lm_msg m = msg(LM_MSG_CREATE, RUN);

	join_all(c, RUN);
	m.rank = 2;
	m.data = image;
	m.data_len = sizeof(image);
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	/* a second before the WAIT_WORK is dropped (ASan checks no leak) */
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	teardown(c);
}

static void r_end(lm_lemuriad *c, uint32_t rank, const struct lm_notice *n,
		  uint32_t nn)
{
	struct lm_msg e = msg(LM_MSG_END, RUN);

	e.rank = rank;
	e.notices = n;
	e.nnotices = nn;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &e);
}

static void test_end_and_wait_end(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n1[2] = { NOTE(4, 7), NOTE(3, 2) };
	struct lm_notice n2[2] = { NOTE(4, 9), NOTE(5, 1) };
	struct lm_msg m = msg(LM_MSG_END, RUN);

	join_all(c, RUN);
	/* a worker's END goes up with its own rank, then END_OK */
	m.rank = 2;
	m.status = 3;
	creq(c, 2, 81, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].how, SENT);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_END);
	CU_ASSERT_EQUAL(outs[0].m.rank, 2);
	CU_ASSERT_EQUAL(outs[0].m.status, 3);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_END_OK);
	CU_ASSERT_EQUAL(outs[1].req_id, 81);
	clear_outs();

	cache_page(c, 4, 8, 0x44);
	r_end(c, 5, n1, 2); /* before the WAIT_END: counted */
	m = msg(LM_MSG_WAIT_END, RUN);
	m.id = 2;
	creq(c, 0, 82, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT(is_cached(c, 4));
	r_end(c, 6, n2, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(0));
	CU_ASSERT_EQUAL(outs[0].req_id, 82);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_RELEASE);
	CU_ASSERT_EQUAL(outs[0].m.id, 0);
	/* the notices of both ENDs, merged (each reflector's END names
	 * its own clusters' writes), applied here first */
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 3);
	CU_ASSERT_EQUAL(outs[0].notices[0].page, 3);
	CU_ASSERT_EQUAL(outs[0].notices[1].page, 4);
	CU_ASSERT_EQUAL(outs[0].notices[1].version, 9);
	CU_ASSERT_EQUAL(outs[0].notices[2].page, 5);
	CU_ASSERT(!is_cached(c, 4));
	clear_outs();

	/* the two ENDs were consumed: a new WAIT_END{1} waits for one more */
	m.id = 1;
	creq(c, 0, 83, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	r_end(c, 7, NULL, 0);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].req_id, 83);
	CU_ASSERT_EQUAL(outs[0].m.nnotices, 0);
	teardown(c);
}

static const char small_layout[] =
	"[lemuria]\n"
	"shared_size = 1M\n"
	"page_size = 4096\n"
	"base = 0x500000000000\n"
	"auth = off\n"
	"[reflector r0]\n"
	"listen = 127.0.0.1:17900\n"
	"[cluster c0]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17910\n"
	"clients = 4\n"
	"cache = 12K\n";

/* Loads `text` as the layout through a temporary file. */
static lm_lemuriad *setup_text(const char *text)
{
	char path[64];
	FILE *f;
	lm_lemuriad *c;

	snprintf(path, sizeof(path), "/tmp/lm_test_cluster_%ld.ini",
		 (long)getpid());
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	c = setup_path(path);
	remove(path);
	return c;
}

/* small_layout: a cache of three pages. */
static lm_lemuriad *setup_small(void)
{
	return setup_text(small_layout);
}

static void test_lru_bound(void)
{
	lm_lemuriad *c = setup_small();

	join_all(c, RUN);
	for (uint32_t p = 0; p < 3; p++)
		cache_page(c, p, 1, (uint8_t)p);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, 3 * 4096);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->evictions, 0);
	CU_ASSERT(is_cached(c, 0)); /* page 0 is now the most recent */
	for (uint32_t p = 3; p < 10; p++) {
		cache_page(c, p, 1, (uint8_t)p);
		CU_ASSERT(lm_lemuriad_stats(c)->cached_bytes <= 12 * 1024);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, 3 * 4096);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->evictions, 7);
	/* the three most recent stay, the rest went */
	CU_ASSERT(is_cached(c, 9));
	CU_ASSERT(is_cached(c, 8));
	CU_ASSERT(is_cached(c, 7));
	CU_ASSERT(!is_cached(c, 0));
	teardown(c);
}

static void test_lru_keeps_recently_used(void)
{
	lm_lemuriad *c = setup_small();

	join_all(c, RUN);
	for (uint32_t p = 0; p < 3; p++)
		cache_page(c, p, 1, (uint8_t)p);
	CU_ASSERT(is_cached(c, 0));
	cache_page(c, 3, 1, 3); /* evicts 1, the least recently used */
	CU_ASSERT(is_cached(c, 0));
	CU_ASSERT(is_cached(c, 2));
	CU_ASSERT(is_cached(c, 3));
	CU_ASSERT(!is_cached(c, 1));
	teardown(c);
}

static void test_newer_run_resets(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg g = msg(LM_MSG_GRANT, RUN);
	uint32_t up;

	join_all(c, RUN);
	cache_page(c, 5, 1, 0x55);
	barrier(c, 1, 2);
	fetch(c, 2, 91, 6);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	CU_ASSERT(lm_lemuriad_stats(c)->cached_bytes > 0);

	join(c, 0, RUN + 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	CU_ASSERT_EQUAL(outs[0].m.run, RUN + 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, 0);
	clear_outs();

	/* the old run's reply and messages are dropped as stale */
	r_page(c, up, 6, 1, 0);
	fetch(c, 2, 92, 6);
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, 1, &g);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_stale_run, 3);
	/* an older JOIN is dropped without an answer */
	join(c, 2, RUN);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_stale_run, 4);

	/* the new run starts from nothing: rank 1's old arrival is gone */
	for (uint32_t r = 1; r < 4; r++)
		join(c, r, RUN + 1);
	clear_outs();
	for (uint32_t r = 0; r < 3; r++) {
		struct lm_msg b = msg(LM_MSG_BARRIER, RUN + 1);

		b.id = 2;
		creq(c, r, 95, &b);
	}
	CU_ASSERT_EQUAL(nouts, 0);
	teardown(c);
}

static void test_peer_lost_client_aborts(void)
{
	lm_lemuriad *c = setup();

	join_all(c, RUN);
	barrier(c, 0, 1);
	barrier(c, 1, 1);
	lm_lemuriad_peer_lost(c, node_of(2));
	/* ABORT to the three others, and as the answer to the two blocked
	 * BARRIER requests, which would otherwise wait for ever */
	CU_ASSERT_EQUAL_FATAL(nouts, 5);
	for (uint32_t r = 0; r < 4; r++) {
		struct out *o = find_out(SENT, node_of(r), LM_MSG_ABORT);
		struct out *a = find_out(REPLIED, node_of(r), LM_MSG_ABORT);

		if (r == 2) {
			CU_ASSERT_PTR_NULL(o);
			continue;
		}
		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_EQUAL(o->m.rank, 2);
		CU_ASSERT_EQUAL_FATAL(o->m.data_len, strlen("rank 2 lost"));
		CU_ASSERT(memcmp(o->data, "rank 2 lost", o->m.data_len) == 0);
		if (r < 2) {
			CU_ASSERT_PTR_NOT_NULL_FATAL(a);
			CU_ASSERT_EQUAL(a->req_id, 40 + r);
			CU_ASSERT_EQUAL(a->m.rank, 2);
		} else {
			CU_ASSERT_PTR_NULL(a);
		}
	}
	clear_outs();

	/* the run's state is gone: its messages are dropped */
	barrier(c, 2, 1);
	barrier(c, 3, 1);
	fetch(c, 3, 5, 1);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_stale_run, 3);
	/* and a new run is served */
	join(c, 0, RUN + 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	teardown(c);
}

static void test_peer_lost_reflector_aborts(void)
{
	lm_lemuriad *c = setup();

	join_all(c, RUN);
	lm_lemuriad_peer_lost(c, refl);
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
	for (size_t i = 0; i < nouts; i++) {
		CU_ASSERT_EQUAL(outs[i].how, SENT);
		CU_ASSERT_EQUAL(outs[i].m.type, LM_MSG_ABORT);
		CU_ASSERT_EQUAL(outs[i].m.rank, LM_LEMURIAD_ABORT_REFLECTOR);
		CU_ASSERT(outs[i].m.data_len == strlen("reflector lost") &&
			  memcmp(outs[i].data, "reflector lost",
				 outs[i].m.data_len) == 0);
	}
	teardown(c);
}

static void test_leave_forgets_client(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg l = msg(LM_MSG_LEAVE, RUN);

	join_all(c, RUN);
	creq(c, 3, 101, &l);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_LEAVE_OK);
	CU_ASSERT_EQUAL(outs[0].req_id, 101);
	clear_outs();
	fetch(c, 3, 102, 0);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	/* losing a client that left aborts nothing */
	lm_lemuriad_peer_lost(c, node_of(3));
	CU_ASSERT_EQUAL(nouts, 0);
	fetch(c, 0, 103, 0);
	CU_ASSERT_EQUAL(nouts, 1);
	teardown(c);
}

/* I3 across coalescing: a client that asks after a newer notice must not
 * be served by a reply older than that notice. */
static void test_fetch_after_notice_refetches(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n[1] = { NOTE(5, 4) };
	struct lm_msg m = msg(LM_MSG_LOCK, RUN);
	uint32_t up_fetch, up_lock;

	join_all(c, RUN);
	fetch(c, 0, 111, 5);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up_fetch = outs[0].req_id;
	clear_outs();
	m.id = 1;
	creq(c, 1, 112, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up_lock = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_GRANT, RUN);
	m.id = 1;
	m.notices = n;
	m.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up_lock, &m);
	clear_outs();
	fetch(c, 1, 113, 5); /* after the notice {5, 4} */
	CU_ASSERT_EQUAL(nouts, 0);

	r_page(c, up_fetch, 5, 3, 0x03);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].req_id, 111);
	CU_ASSERT_EQUAL(outs[1].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[1].m.page, 5);
	CU_ASSERT(outs[1].req_id > up_lock);
	up_fetch = outs[1].req_id;
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, 0);
	clear_outs();

	r_page(c, up_fetch, 5, 4, 0x04);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].req_id, 113);
	CU_ASSERT_EQUAL(outs[0].m.version, 4);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->cached_bytes, layout->page_size);
	teardown(c);
}

/* Client `rank` flushes one diff setting [off, off + n) of page to val;
 * the FLUSH and its FLUSH_OK are cleared. */
static void flush_page(lm_lemuriad *c, uint32_t rank, uint32_t page,
		       size_t off, size_t n, uint8_t val)
{
	static uint8_t list[4096 * 5 + 64];
	struct lm_msg f = msg(LM_MSG_FLUSH, RUN);

	clear_outs();
	f.diffs.data = list;
	f.diffs.len = make_flush(list, sizeof(list), page, off, n, val);
	f.diffs.count = 1;
	creq(c, rank, 70 + rank, &f);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FLUSH_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	clear_outs();
}

/* R releases barrier id without notices; the replies are cleared. */
static void release(lm_lemuriad *c, uint32_t id)
{
	struct lm_msg rel = msg(LM_MSG_RELEASE, RUN);

	rel.id = id;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &rel);
	clear_outs();
}

/* The homes answer every REGISTER among the outputs: a NEW entry holding
 * version v gets v + 1 when `merge`, else v + 2 (someone wrote between);
 * one holding none gets `fresh`.  Returns how many were answered; the
 * answered requests are removed from the outputs. */
static int answer_registers(lm_lemuriad *c, bool merge, uint32_t fresh)
{
	struct out pending[MAX_OUT];
	size_t n = 0, keep = 0;
	int answered = 0;

	for (size_t i = 0; i < nouts; i++) {
		if (outs[i].how == REQUESTED &&
		    outs[i].m.type == LM_MSG_REGISTER)
			pending[n++] = outs[i];
		else
			outs[keep++] = outs[i];
	}
	nouts = keep;
	for (size_t i = 0; i < n; i++) {
		struct lm_notice v[64];
		struct lm_msg r = msg(LM_MSG_REGISTER_OK, RUN);

		CU_ASSERT_FATAL(pending[i].m.nnotices <= 64);
		for (uint32_t k = 0; k < pending[i].m.nnotices; k++) {
			const struct lm_notice *e = &pending[i].notices[k];

			v[r.nnotices] = *e;
			v[r.nnotices].base = 0;
			v[r.nnotices].version = e->version ?
				e->version + (merge ? 1 : 2) : fresh;
			if (e->base != LM_REG_PUSH)
				r.nnotices++;
		}
		r.notices = v;
		lm_lemuriad_handle(c, refl, LM_REL_REPLY, pending[i].req_id, &r);
		free(pending[i].data);
		free(pending[i].diffs);
		free(pending[i].notices);
		answered++;
	}
	return answered;
}

/* Every client arrives at barrier id, the cluster's BARRIER goes up, and
 * R releases it with notices n; what that made is left in the outputs. */
static void arrive_and_release(lm_lemuriad *c, uint32_t id,
			       const struct lm_notice *n, uint32_t nn)
{
	struct lm_msg rel = msg(LM_MSG_RELEASE, RUN);

	clear_outs();
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, id);
	answer_registers(c, true, 40);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	clear_outs();
	rel.id = id;
	rel.notices = n;
	rel.nnotices = nn;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &rel);
}

/* The same, every client answered at once; the outputs are cleared. */
static void barrier_release(lm_lemuriad *c, uint32_t id,
			    const struct lm_notice *n, uint32_t nn)
{
	arrive_and_release(c, id, n, nn);
	CU_ASSERT_EQUAL(nouts, 4);
	clear_outs();
}

/* Fetches page from the cache: its version, and byte `at` in *byte.
 * False on a miss (whose upstream FETCH is cleared). */
static bool cached_version(lm_lemuriad *c, uint32_t page, size_t at,
			   uint32_t *version, uint8_t *byte)
{
	bool hit;

	clear_outs();
	fetch(c, 2, 700 + page, page);
	hit = nouts == 1 && outs[0].how == REPLIED && outs[0].data;
	if (hit) {
		*version = outs[0].m.version;
		*byte = outs[0].data[at];
	}
	clear_outs();
	return hit;
}

/* Sole cluster: every diff of the epoch came through us and our copy is
 * at the notice's base, so it is the home's page at the notice's version:
 * kept, with that version, holding the diffs; idempotent. */
static void test_sole_cluster_notice_keeps_copy(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n[2] = {
		{ 9, 6, 4, 1, 0 },              /* rank 1 alone */
		{ 10, 3, 2, LM_WRITER_MANY, 0 } /* two ranks, both ours */
	};
	uint32_t v;
	uint8_t b;

	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11);
	cache_page(c, 10, 2, 0x22);
	flush_page(c, 1, 9, 100, 8, 0x77);
	flush_page(c, 1, 9, 300, 8, 0x78);
	flush_page(c, 1, 10, 0, 4, 0x55);
	flush_page(c, 2, 10, 8, 4, 0x56);
	barrier_release(c, 1, n, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->kept, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 0);
	CU_ASSERT_FATAL(cached_version(c, 9, 100, &v, &b));
	CU_ASSERT_EQUAL(v, 6);
	CU_ASSERT_EQUAL(b, 0x77);
	CU_ASSERT_FATAL(cached_version(c, 9, 300, &v, &b));
	CU_ASSERT_EQUAL(b, 0x78);
	CU_ASSERT_FATAL(cached_version(c, 10, 8, &v, &b));
	CU_ASSERT_EQUAL(v, 3);
	CU_ASSERT_EQUAL(b, 0x56);
	/* the same notices again change nothing (I3: idempotent) */
	barrier_release(c, 2, n, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->kept, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 0);
	CU_ASSERT_FATAL(cached_version(c, 9, 100, &v, &b));
	CU_ASSERT_EQUAL(v, 6);
	teardown(c);
}

/* Anything short of "our copy at base, every diff ours" invalidates:
 * another cluster wrote, several clusters wrote, or the copy is not at
 * the base (it missed some of the epoch's diffs, or is older). */
static const char updates_off_layout[] =
	"[lemuria]\n"
	"shared_size = 1M\n"
	"page_size = 4096\n"
	"base = 0x500000000000\n"
	"auth = off\n"
	"updates = off\n"
	"[reflector r0]\n"
	"listen = 127.0.0.1:17900\n"
	"[cluster c0]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17910\n"
	"clients = 4\n";

static void test_sole_cluster_notice_invalidates_otherwise(void)
{
	/* without updates: they would fetch pages 20 and 21 again */
	lm_lemuriad *c = setup_text(updates_off_layout);
	struct lm_notice n[4] = {
		{ 20, 5, 4, 5, 1 },                           /* cluster c1 */
		{ 21, 5, 4, LM_WRITER_MANY, LM_WRITER_MANY }, /* both */
		{ 22, 5, 3, 1, 0 },                           /* base older */
		{ 23, 5, 4, 1, 0 },                           /* copy older */
	};

	join_all(c, RUN);
	cache_page(c, 20, 4, 0x20);
	cache_page(c, 21, 4, 0x21);
	cache_page(c, 22, 4, 0x22);
	cache_page(c, 23, 3, 0x23);
	flush_page(c, 1, 22, 0, 4, 0x99);
	barrier_release(c, 1, n, 4);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->kept, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->invalidations, 4);
	for (uint32_t p = 20; p <= 23; p++)
		CU_ASSERT(!is_cached(c, p));
	teardown(c);
}

/* Like barrier_release, but the clients' RELEASE replies stay in the
 * outputs for the caller. */
static void barrier_release_kept(lm_lemuriad *c, uint32_t id,
				 const struct lm_notice *n, uint32_t nn)
{
	arrive_and_release(c, id, n, nn);
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
}

/* Like barrier_release_kept when the RELEASE is held for a fetch of
 * `page`: the FETCHV asking for it (alone) is outs[0] on return, and no
 * client has its RELEASE yet. */
static void barrier_release_held(lm_lemuriad *c, uint32_t id,
				 const struct lm_notice *n, uint32_t nn,
				 uint32_t page)
{
	arrive_and_release(c, id, n, nn);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCHV);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[0].m.notices[0].page, page);
}

/* The update a RELEASE to `rank` carries for `page`: its runs as
 * (offset, length, first byte) triples in *runs (at most 4); -1 when it
 * carries none for the page. */
struct run_list {
	uint32_t (*runs)[3];
	int n;
};

static int note_update_run(void *ctx, size_t offset, const uint8_t *bytes,
			   size_t len)
{
	struct run_list *l = ctx;

	if (l->n == 4)
		return 1;
	l->runs[l->n][0] = (uint32_t)offset;
	l->runs[l->n][1] = (uint32_t)len;
	l->runs[l->n][2] = bytes[0];
	l->n++;
	return 0;
}

/* The first runs (offset, length, first byte) of the update of `page` in
 * the RELEASE rank got; their count. */
static int update_runs(uint32_t rank, uint32_t page, uint32_t runs[4][3])
{
	struct out *o = find_out(REPLIED, node_of(rank), LM_MSG_RELEASE);
	struct run_list l = { runs, 0 };
	size_t pos = 0, len;
	uint32_t pg;
	const uint8_t *d;

	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	while (lm_msg_diffs_next(&o->m.diffs, &pos, &pg, &d, &len) == 1) {
		if (pg != page)
			continue;
		CU_ASSERT(lm_diff_foreach_run(d, len, 4096, note_update_run,
					      &l) >= 0);
		return l.n;
	}
	return -1;
}

/* Updates (docs/dsm.md "Updates"): a page only our clients wrote in the
 * epoch, whose copy we keep, is sent to each client holding a copy as
 * the bytes the other writers wrote; the writers' own bytes, pages
 * nobody here holds, and pages another cluster wrote are not sent. */
static void test_release_carries_updates(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n[2] = {
		{ 9, 6, 4, LM_WRITER_MANY, 0 }, /* ranks 1 and 2, ours */
		{ 20, 5, 4, 5, 1 },             /* rank 5 of cluster c1 */
	};
	uint32_t runs[4][3];

	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11);  /* rank 0 fetched: holds it */
	cache_page(c, 20, 4, 0x20);
	fetch(c, 1, 31, 9);         /* ranks 1 and 2: cache hits */
	fetch(c, 2, 32, 9);
	CU_ASSERT_EQUAL(nouts, 2);
	flush_page(c, 1, 9, 100, 8, 0x77);
	flush_page(c, 2, 9, 300, 8, 0x78);
	barrier_release_held(c, 1, n, 2, 20);
	/* rank 0 holds c1's page 20: fetched again before the release; c1
	 * wrote 8 bytes at 500 */
	r_pages_poked(c, outs[0].req_id, 20, 5, 0x20, 500, 8, 0x99);
	CU_ASSERT_EQUAL_FATAL(nouts, 5);
	/* rank 0 read it: both writers' bytes */
	CU_ASSERT_EQUAL_FATAL(update_runs(0, 9, runs), 2);
	CU_ASSERT_EQUAL(runs[0][0], 100);
	CU_ASSERT_EQUAL(runs[0][1], 8);
	CU_ASSERT_EQUAL(runs[0][2], 0x77);
	CU_ASSERT_EQUAL(runs[1][0], 300);
	CU_ASSERT_EQUAL(runs[1][2], 0x78);
	/* each writer: the other's bytes only */
	CU_ASSERT_EQUAL_FATAL(update_runs(1, 9, runs), 1);
	CU_ASSERT_EQUAL(runs[0][0], 300);
	CU_ASSERT_EQUAL(runs[0][2], 0x78);
	CU_ASSERT_EQUAL_FATAL(update_runs(2, 9, runs), 1);
	CU_ASSERT_EQUAL(runs[0][0], 100);
	/* rank 3 never had the page */
	CU_ASSERT_EQUAL(update_runs(3, 9, runs), -1);
	/* page 20: what c1 changed, to rank 0 only */
	CU_ASSERT_EQUAL_FATAL(update_runs(0, 20, runs), 1);
	CU_ASSERT_EQUAL(runs[0][0], 500);
	CU_ASSERT_EQUAL(runs[0][1], 8);
	CU_ASSERT_EQUAL(runs[0][2], 0x99);
	for (uint32_t r = 1; r < 4; r++)
		CU_ASSERT_EQUAL(update_runs(r, 20, runs), -1);
	CU_ASSERT_EQUAL(lm_lemuriad_updates_stats(c)->updates_sent, 4);
	clear_outs();

	/* next epoch: nothing written, so nothing sent, although the
	 * clients still hold page 9 */
	n[0].base = 6;
	n[0].version = 7;
	barrier_release_kept(c, 2, n, 1);
	for (uint32_t r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(update_runs(r, 9, runs), -1);
	CU_ASSERT_EQUAL(lm_lemuriad_updates_stats(c)->updates_sent, 4);
	teardown(c);
}

/* How many of the outputs are of `type` to client `rank`. */
static size_t count_outs(uint32_t rank, uint16_t type)
{
	size_t n = 0;

	for (size_t i = 0; i < nouts; i++)
		if (outs[i].m.type == type && outs[i].node == node_of(rank))
			n++;
	return n;
}

/* A RELEASE with updates goes out a client at a time (docs/dsm.md
 * "Updates", staged release): each step of the daemon's background work
 * releases one more.  In between, a released client's fault on a cached
 * page and the home's PULL are answered at once; its fault that misses
 * and its FLUSH wait, and are handled in the order they came once every
 * client has its RELEASE. */
/* A cluster whose clients 0-2 hold page 9, 1 and 2 wrote it, and whose
 * RELEASE with updates is staged: rank 0 has it, the others wait. */
static lm_lemuriad *staged_release(void)
{
	static struct lm_notice n[1] = { { 9, 6, 4, LM_WRITER_MANY, 0 } };
	lm_lemuriad *c;

	out_now = &out_cbs_later;
	laters = 0;
	c = setup();
	out_now = &out_cbs;
	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11); /* rank 0 holds it */
	fetch(c, 1, 31, 9);
	fetch(c, 2, 32, 9);
	clear_outs();
	flush_page(c, 1, 9, 100, 8, 0x77);
	flush_page(c, 2, 9, 300, 8, 0x78);
	arrive_and_release(c, 1, n, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(count_outs(0, LM_MSG_RELEASE), 1);
	CU_ASSERT_EQUAL(laters, 2); /* the updates ahead, and this */
	clear_outs();
	return c;
}

static void test_release_goes_out_a_client_at_a_time(void)
{
	static uint8_t list[4096 * 5 + 64];
	struct lm_msg f = msg(LM_MSG_FLUSH, RUN), p = msg(LM_MSG_PULL, RUN);
	lm_lemuriad *c = staged_release();

	fetch(c, 0, 90, 9); /* cached: answered now */
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_PAGE);
	CU_ASSERT_EQUAL(outs[0].req_id, 90);
	clear_outs();
	fetch(c, 0, 91, 300); /* a miss: waits */
	f.diffs.data = list;
	f.diffs.len = make_flush(list, sizeof(list), 12, 0, 8, 0x55);
	f.diffs.count = 1;
	creq(c, 0, 92, &f); /* waits */
	CU_ASSERT_EQUAL(nouts, 0);
	p.page = 9;
	p.version = 40; /* the delta answer_registers registered */
	lm_lemuriad_handle(c, refl, LM_REL_REQUEST, 555, &p);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_DELTA);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	clear_outs();

	CU_ASSERT_TRUE(lm_lemuriad_background(c));
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(count_outs(1, LM_MSG_RELEASE), 1);
	CU_ASSERT_TRUE(lm_lemuriad_background(c));
	CU_ASSERT_EQUAL(count_outs(2, LM_MSG_RELEASE), 1);
	CU_ASSERT_EQUAL(nouts, 2);
	/* the last RELEASE, then what waited, in order */
	CU_ASSERT_FALSE(lm_lemuriad_background(c));
	CU_ASSERT_EQUAL_FATAL(nouts, 5);
	CU_ASSERT_EQUAL(outs[2].m.type, LM_MSG_RELEASE);
	CU_ASSERT_EQUAL(outs[2].node, node_of(3));
	CU_ASSERT_EQUAL(outs[3].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[3].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[3].m.page, 300);
	CU_ASSERT_EQUAL(outs[4].m.type, LM_MSG_FLUSH_OK);
	CU_ASSERT_EQUAL(outs[4].req_id, 92);
	CU_ASSERT_EQUAL(outs[4].m.status, 0);
	/* each RELEASE carried its client's update, as at once */
	CU_ASSERT_EQUAL(lm_lemuriad_updates_stats(c)->updates_sent, 3);
	CU_ASSERT_FALSE(lm_lemuriad_background(c));
	teardown(c);
}

/* I5: what waits for a staged RELEASE is bounded (8 messages per client
 * and 64); one more is dropped and counted, those before it are handled
 * afterwards. */
static void test_release_puts_off_a_bounded_number(void)
{
	lm_lemuriad *c = staged_release();
	uint64_t bad = lm_lemuriad_stats(c)->dropped_bad;
	const uint32_t bound = 8 * 4 + 64;

	for (uint32_t i = 0; i < bound; i++)
		fetch(c, 0, 100 + i, 300); /* misses: put off */
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, bad);
	fetch(c, 0, 100 + bound, 300);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, bad + 1);
	while (lm_lemuriad_background(c))
		;
	/* the last RELEASEs, then the put-off FETCHes: one goes up, the
	 * others wait for its answer */
	CU_ASSERT_EQUAL(count_outs(3, LM_MSG_RELEASE), 1);
	CU_ASSERT_FATAL(nouts >= 4);
	CU_ASSERT_EQUAL(outs[3].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[3].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[3].m.page, 300);
	teardown(c);
}

/* A neighbour page is a guess: the client that got it in a PAGES holds
 * it for updates only once it faults on it or writes it, so a write
 * elsewhere in the epoch invalidates that copy instead of updating it. */
static void test_neighbour_pages_get_no_updates(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice ask[2] = { { .page = 7, .base = LM_NO_BASE },
				    { .page = 9, .base = LM_NO_BASE } };
	struct lm_notice n[2] = { { 7, 4, 3, 2, 0 }, { 9, 5, 4, 2, 0 } };
	struct lm_msg m = msg(LM_MSG_FETCHV, RUN);
	uint32_t runs[4][3];

	join_all(c, RUN);
	cache_page(c, 7, 3, 0x70); /* rank 0 fetched both: holds them */
	cache_page(c, 9, 4, 0x90);
	m.notices = ask;
	m.nnotices = 2;
	creq(c, 1, 41, &m);        /* rank 1 faults on 7; 9 comes along */
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_PAGES);
	CU_ASSERT_EQUAL(outs[0].m.nnotices, 2);
	clear_outs();
	flush_page(c, 2, 7, 100, 8, 0x77);
	flush_page(c, 2, 9, 200, 8, 0x99);
	barrier_release_kept(c, 1, n, 2);
	CU_ASSERT_EQUAL(update_runs(1, 7, runs), 1);
	CU_ASSERT_EQUAL(update_runs(1, 9, runs), -1);
	CU_ASSERT_EQUAL(update_runs(0, 7, runs), 1);
	CU_ASSERT_EQUAL(update_runs(0, 9, runs), 1);
	CU_ASSERT_EQUAL(runs[0][0], 200);
	CU_ASSERT_EQUAL(runs[0][2], 0x99);
	teardown(c);
}

/* A held RELEASE waits for a fetch new enough: an older reply is asked
 * again; a lost reflector aborts the run and every client waiting at
 * the barrier gets the ABORT, not a RELEASE. */
static void test_held_release_too_old_then_abort(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n = { 20, 5, 4, 5, 1 };

	join_all(c, RUN);
	cache_page(c, 20, 4, 0x20); /* rank 0 holds it */
	barrier_release_held(c, 1, &n, 1, 20);
	r_pages_poked(c, outs[0].req_id, 20, 4, 0x20, 0, 0, 0);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[1].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[1].m.version, 5);
	clear_outs();
	lm_lemuriad_peer_lost(c, refl);
	for (uint32_t r = 0; r < 4; r++) {
		CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(r),
					    LM_MSG_RELEASE));
		CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(r),
						LM_MSG_ABORT));
	}
	teardown(c);
}

/* A page the reflector's PAGES leaves out (its home had to pull it, or
 * lives elsewhere) is asked for alone; its PAGE then completes the held
 * RELEASE like any. */
static void test_fetchv_leftovers_fetched_alone(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n = { 20, 5, 4, 5, 1 };
	uint32_t runs[4][3];

	join_all(c, RUN);
	cache_page(c, 20, 4, 0x20);
	barrier_release_held(c, 1, &n, 1, 20);
	r_pages_poked(c, outs[0].req_id, UINT32_MAX, 0, 0, 0, 0, 0);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[1].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[1].m.page, 20);
	CU_ASSERT_EQUAL(outs[1].m.version, 5);
	r_page_poked(c, outs[1].req_id, 20, 5, 0x20, 64, 4, 0x42);
	CU_ASSERT_EQUAL_FATAL(nouts, 6);
	CU_ASSERT_EQUAL_FATAL(update_runs(0, 20, runs), 1);
	CU_ASSERT_EQUAL(runs[0][0], 64);
	CU_ASSERT_EQUAL(runs[0][1], 4);
	CU_ASSERT_EQUAL(runs[0][2], 0x42);
	teardown(c);
}

/* Pages as diffs (docs/dsm.md): the FETCHV names the base of the copy we
 * saved; a PAGES entry that is a diff against it rebuilds the page (the
 * update and the cache hold our bytes and the other cluster's), and one
 * against another base is not trusted: the page is asked for alone. */
static void test_fetchv_pages_as_diffs(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n = { 20, 5, 4, 5, 1 };
	uint32_t runs[4][3], version;
	uint8_t byte;

	join_all(c, RUN);
	cache_page(c, 20, 4, 0x20);
	flush_page(c, 1, 20, 100, 4, 0x71); /* ours, in the same epoch */
	barrier_release_held(c, 1, &n, 1, 20);
	CU_ASSERT_EQUAL(outs[0].m.notices[0].base, 4);
	r_pages_diff(c, outs[0].req_id, 20, 5, 4, 500, 8, 0x99);
	CU_ASSERT_EQUAL_FATAL(nouts, 5);
	/* rank 0: c1's bytes and rank 1's; rank 1: c1's only */
	CU_ASSERT_EQUAL_FATAL(update_runs(0, 20, runs), 2);
	CU_ASSERT_EQUAL(runs[0][0], 100);
	CU_ASSERT_EQUAL(runs[0][2], 0x71);
	CU_ASSERT_EQUAL(runs[1][0], 500);
	CU_ASSERT_EQUAL(runs[1][1], 8);
	CU_ASSERT_EQUAL(runs[1][2], 0x99);
	CU_ASSERT_EQUAL_FATAL(update_runs(1, 20, runs), 1);
	CU_ASSERT_EQUAL(runs[0][0], 500);
	/* the cache holds the rebuilt page at the notice's version */
	clear_outs();
	CU_ASSERT_TRUE(cached_version(c, 20, 100, &version, &byte));
	CU_ASSERT_EQUAL(version, 5);
	CU_ASSERT_EQUAL(byte, 0x71);
	CU_ASSERT_TRUE(cached_version(c, 20, 500, &version, &byte));
	CU_ASSERT_EQUAL(byte, 0x99);
	CU_ASSERT_TRUE(cached_version(c, 20, 0, &version, &byte));
	CU_ASSERT_EQUAL(byte, 0x20);
	clear_outs();

	/* the diff names the bytes c1 wrote, even one it wrote with the
	 * value it had: the update is the diff's, not a comparison's (rank
	 * 1 reads the page again, so it is fetched for it) */
	fetch(c, 1, 60, 20);
	clear_outs();
	n.version = 6;
	n.base = 5;
	barrier_release_held(c, 2, &n, 1, 20);
	r_pages_diff(c, outs[0].req_id, 20, 6, 5, 700, 4, 0x20);
	CU_ASSERT_EQUAL_FATAL(update_runs(1, 20, runs), 1);
	CU_ASSERT_EQUAL(runs[0][0], 700);
	CU_ASSERT_EQUAL(runs[0][1], 4);

	/* next epoch: a diff against a base we do not hold */
	clear_outs();
	fetch(c, 1, 61, 20);
	clear_outs();
	n.version = 7;
	n.base = 6;
	barrier_release_held(c, 3, &n, 1, 20);
	CU_ASSERT_EQUAL(outs[0].m.notices[0].base, 6);
	r_pages_diff(c, outs[0].req_id, 20, 7, 3, 600, 2, 0x55);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[1].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_FETCH);
	CU_ASSERT_EQUAL(outs[1].m.page, 20);
	teardown(c);
}

/* No update without a copy kept at the notice's version: the copy was
 * not at the notice's base (it may lack bytes of the epoch). */
static void test_release_no_update_without_exact_copy(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice n = { 9, 6, 3, LM_WRITER_MANY, 0 };
	uint32_t runs[4][3];

	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11);
	flush_page(c, 1, 9, 100, 8, 0x77);
	barrier_release_kept(c, 1, &n, 1);
	for (uint32_t r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(update_runs(r, 9, runs), -1);
	CU_ASSERT_EQUAL(lm_lemuriad_updates_stats(c)->updates_sent, 0);
	teardown(c);
}

/* updates = off: the same epoch as above sends no update. */
static void test_release_updates_off(void)
{
	lm_lemuriad *c = setup_text(updates_off_layout);
	struct lm_notice n = { 9, 6, 4, LM_WRITER_MANY, 0 };
	uint32_t runs[4][3];

	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11);
	flush_page(c, 1, 9, 100, 8, 0x77);
	barrier_release_kept(c, 1, &n, 1);
	CU_ASSERT_EQUAL(update_runs(0, 9, runs), -1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->kept, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_updates_stats(c)->updates_sent, 0);
	teardown(c);
}

/* A FETCH reply that was on its way while a client's FLUSH of the page
 * went up predates that diff (FIFO): cached at its version it would look
 * like "home at base" to the sole-cluster rule while lacking the diff.
 * It answers the waiter but is not cached; a later request, which follows
 * the FLUSH, is cached again. */
/* A reply to a FETCH that was on its way while a client flushed the page
 * lacks that diff: the cluster copy is the reply with our deltas on top. */
static void test_fetch_reply_gets_our_deltas(void)
{
	lm_lemuriad *c = setup();
	uint32_t up, v;
	uint8_t b;

	join_all(c, RUN);
	fetch(c, 0, 120, 7);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	flush_page(c, 1, 7, 0, 4, 0x77);
	r_page(c, up, 7, 2, 0x02); /* home at 2, without the diff */
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].req_id, 120);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.data_len, layout->page_size);
	CU_ASSERT_EQUAL(outs[0].data[0], 0x77);
	CU_ASSERT_EQUAL(outs[0].data[4], 0x02);
	clear_outs();
	CU_ASSERT_FATAL(cached_version(c, 7, 3, &v, &b));
	CU_ASSERT_EQUAL(v, 2);
	CU_ASSERT_EQUAL(b, 0x77);
	teardown(c);
}

/* Sends PULL{page, version} from the reflector; returns the DELTA. */
static const struct out *pull(lm_lemuriad *c, uint32_t page,
			      uint32_t version)
{
	struct lm_msg m = msg(LM_MSG_PULL, RUN);

	clear_outs();
	m.page = page;
	m.version = version;
	lm_lemuriad_handle(c, refl, LM_REL_REQUEST, 555, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].req_id, 555);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_DELTA);
	return &outs[0];
}

/* The byte at `off` of the one diff a DELTA carries, after applying it
 * to a page of `fill`. */
static uint8_t delta_byte(const struct out *d, size_t off, uint8_t fill)
{
	static uint8_t page[4096];
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t pg;

	memset(page, fill, sizeof(page));
	CU_ASSERT_FATAL(lm_msg_diffs_next(&d->m.diffs, &pos, &pg, &diff,
					  &len) == 1);
	CU_ASSERT_FATAL(lm_diff_apply(page, sizeof(page), diff, len) == 0);
	return page[off];
}

/* Lazy relay: the cluster's arrival goes right behind the registration
 * of its deltas (I2: R enters it first), which carries no data, and the
 * home pulls the delta later, exactly once. */
static void test_barrier_waits_for_registration_then_pull(void)
{
	lm_lemuriad *c = setup();
	const struct out *d;

	join_all(c, RUN);
	flush_page(c, 1, 9, 100, 8, 0x77);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 2); /* not waiting for the answer */
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].how, SENT);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[0].notices[0].page, 9);
	CU_ASSERT_EQUAL(outs[0].notices[0].base, LM_REG_NEW);
	CU_ASSERT_EQUAL(outs[0].notices[0].version, 0);
	CU_ASSERT_EQUAL(outs[0].notices[0].writer, 1);
	CU_ASSERT_EQUAL(outs[0].notices[0].wcluster, 0);
	CU_ASSERT_EQUAL(outs[0].m.diffs.len, 0);
	CU_ASSERT_EQUAL(answer_registers(c, true, 5), 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, SENT);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	d = pull(c, 9, 5);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 100, 0), 0x77);
	CU_ASSERT_EQUAL(delta_byte(d, 108, 0), 0);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_pulled, 1);
	d = pull(c, 9, 5);
	CU_ASSERT_EQUAL(d->m.status, LM_ENOENT);
	teardown(c);
}

/* Log lines at warn or above, counted by a sink. */
static size_t loud_lines;

static void count_loud(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	(void)msg;
	if (level <= LM_LOG_WARN)
		loud_lines++;
}

/* A PULL of a delta the cluster no longer holds (it crossed the PUSH of
 * the same version, or was pulled before) is answered LM_ENOENT without
 * a warning: the home ignores the answer when the data reached it, and
 * logs the loss itself when not, so a line here only alarmed users of
 * runs that were fine. */
static void test_pull_of_delta_not_held_is_quiet(void)
{
	lm_lemuriad *c = setup();
	enum lm_log_level saved = lm_log_get_level();

	join_all(c, RUN);
	lm_log_set_level(LM_LOG_DEBUG);
	loud_lines = 0;
	lm_log_set_sink(count_loud, NULL);
	CU_ASSERT_EQUAL(pull(c, 9, 5)->m.status, LM_ENOENT);
	CU_ASSERT_EQUAL(pull(c, 9, 6)->m.status, LM_ENOENT);
	lm_log_set_sink(NULL, NULL);
	lm_log_set_level(saved);
	CU_ASSERT_EQUAL(loud_lines, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_pull_missing, 2);
	teardown(c);
}

/* A FETCH pending while the home pulls our delta of the page: the home
 * answers it only after applying the delta, so a reply at least as new
 * as the pulled version holds it and is cached; an older one may lack it
 * (we no longer have it to write on top) and is not. */
static void test_reply_after_pull_cached_when_new_enough(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice none[1] = { NOTE(500, 1) };
	uint32_t up, v;
	uint8_t b;

	join_all(c, RUN);
	for (uint32_t page = 9; page <= 10; page++) {
		flush_page(c, 1, page, 0, 4, 0x66);
		barrier_release(c, page, none, 1); /* registered at 40 */
		clear_outs();
		fetch(c, 2, 600 + page, page);
		CU_ASSERT_EQUAL_FATAL(nouts, 1);
		up = outs[0].req_id;
		CU_ASSERT_EQUAL(pull(c, page, 40)->m.status, 0);
		clear_outs();
		r_page(c, up, page, page == 9 ? 40 : 39, 0x66);
		CU_ASSERT_EQUAL(nouts, 1); /* the waiter is answered */
		clear_outs();
		if (page == 9) {
			CU_ASSERT(cached_version(c, page, 0, &v, &b));
			CU_ASSERT_EQUAL(v, 40);
		} else {
			CU_ASSERT(!is_cached(c, page));
		}
	}
	teardown(c);
}

/* A second delta of a page whose first is still here: merged when the
 * home says nobody wrote between (version + 1), else the first is pushed
 * and the two stay apart (I1). */
static void test_next_delta_merged_or_older_pushed(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice none[1] = { NOTE(500, 1) };
	const struct out *d;

	join_all(c, RUN);
	flush_page(c, 1, 9, 0, 4, 0x11);
	barrier_release(c, 1, none, 1); /* registered at 40 */
	flush_page(c, 2, 9, 8, 4, 0x22);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].notices[0].version, 40); /* held: merge? */
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	answer_registers(c, true, 0);                    /* yes: 41 */
	release(c, 2);
	d = pull(c, 9, 41);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 0, 0), 0x11);
	CU_ASSERT_EQUAL(delta_byte(d, 8, 0), 0x22);

	/* again, but another cluster wrote the page in between */
	flush_page(c, 1, 9, 0, 4, 0x33);
	barrier_release(c, 3, none, 1); /* 40 again */
	flush_page(c, 3, 9, 8, 4, 0x44);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 4);
	answer_registers(c, false, 0); /* 42: not merged */
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_REGISTER); /* the push */
	CU_ASSERT_EQUAL_FATAL(outs[1].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[1].notices[0].base, LM_REG_PUSH);
	CU_ASSERT_EQUAL(outs[1].notices[0].version, 40);
	CU_ASSERT_EQUAL(outs[1].m.diffs.count, 1);
	d = pull(c, 9, 42);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 0, 0), 0);    /* not the pushed one */
	CU_ASSERT_EQUAL(delta_byte(d, 8, 0), 0x44);
	CU_ASSERT_EQUAL(pull(c, 9, 40)->m.status, LM_ENOENT);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_merged, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_pushed, 1);
	teardown(c);
}

/* Rank 1 takes lock 3 from R, R recalls it, rank 1 writes page 12 and
 * unlocks: the outputs are then UNLOCK_OK and the REGISTER of page 12,
 * unanswered. */
static void unlock_recalled_lock(lm_lemuriad *c)
{
	struct lm_msg m = msg(LM_MSG_LOCK, RUN);
	uint32_t up;

	join_all(c, RUN);
	m.id = 3;
	creq(c, 1, 60, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_GRANT, RUN);
	m.id = 3;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	clear_outs();
	recall(c, 3, 1); /* held: it goes back at the UNLOCK */
	CU_ASSERT_EQUAL(nouts, 0);
	flush_page(c, 1, 12, 0, 4, 0x5a);
	m = msg(LM_MSG_UNLOCK, RUN);
	m.id = 3;
	creq(c, 1, 61, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK_OK);
	CU_ASSERT_EQUAL(outs[0].req_id, 61);
	CU_ASSERT_EQUAL_FATAL(outs[1].m.type, LM_MSG_REGISTER);
}

/* An UNLOCK goes up after the registration of what was written under
 * the lock; the client is answered at once. */
static void test_unlock_parked_behind_registration(void)
{
	lm_lemuriad *c = setup();

	unlock_recalled_lock(c);
	answer_registers(c, true, 7);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[1].how, SENT);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_UNLOCK);
	CU_ASSERT_EQUAL(outs[1].m.id, 3);
	CU_ASSERT_EQUAL(outs[1].m.rank, 1);
	teardown(c);
}

/* A BARRIER goes right behind its own registration, never ahead of a
 * message parked before it: here an UNLOCK waiting for the answer to
 * the registration of what was written under the lock. */
static void test_barrier_never_overtakes_a_parked_unlock(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice reg = { .page = 12, .version = 7, .base = 0,
				 .writer = 1, .wcluster = 0 };
	struct lm_msg m;
	uint32_t up;

	unlock_recalled_lock(c);
	up = outs[1].req_id;
	flush_page(c, 2, 13, 0, 4, 0x5b);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1);
	CU_ASSERT_EQUAL(nouts, 0); /* both wait for the first answer */
	m = msg(LM_MSG_REGISTER_OK, RUN);
	m.notices = &reg;
	m.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 3);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_REGISTER); /* page 13 */
	CU_ASSERT_EQUAL(outs[2].m.type, LM_MSG_BARRIER);
	teardown(c);
}

/* Rank `rank` asks for lock `id` (request req). */
static void lock_req(lm_lemuriad *c, uint32_t rank, uint32_t req, uint32_t id)
{
	struct lm_msg m = msg(LM_MSG_LOCK, RUN);

	m.id = id;
	creq(c, rank, req, &m);
}

static void unlock_req(lm_lemuriad *c, uint32_t rank, uint32_t req,
		       uint32_t id)
{
	struct lm_msg m = msg(LM_MSG_UNLOCK, RUN);

	m.id = id;
	creq(c, rank, req, &m);
}

/* The first GRANT brings the token; rank 1 asked with request 300. */
static void token_arrives(lm_lemuriad *c, uint32_t id)
{
	struct lm_msg m;
	uint32_t up;

	clear_outs();
	lock_req(c, 1, 300, id);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_LOCK);
	up = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_GRANT, RUN);
	m.id = id;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].req_id, 300);
	clear_outs();
}

/* DESIGN.md §2, Locks: a token in the cluster goes from client to client
 * without a message to the manager; each local GRANT names what the
 * earlier holders wrote, at the versions their registration got. */
static void test_lock_token_handed_off_locally(void)
{
	lm_lemuriad *c = setup();
	const struct lm_notice *n;

	join_all(c, RUN);
	token_arrives(c, 3);
	lock_req(c, 2, 301, 3);
	CU_ASSERT_EQUAL(nouts, 0); /* waits here, nothing goes up */
	flush_page(c, 1, 12, 0, 4, 0x5a);
	unlock_req(c, 1, 302, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK_OK);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_REGISTER);
	answer_registers(c, true, 7); /* the UNLOCK_OK stays in outs[0] */
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[1].how, REPLIED);
	CU_ASSERT_EQUAL(outs[1].node, node_of(2));
	CU_ASSERT_EQUAL(outs[1].req_id, 301);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_GRANT);
	CU_ASSERT_EQUAL_FATAL(outs[1].m.nnotices, 1);
	n = &outs[1].notices[0];
	CU_ASSERT(n->page == 12 && n->version == 7 && n->writer == 1);
	clear_outs();
	/* nothing written since: the next hand-off is immediate */
	unlock_req(c, 2, 303, 3);
	lock_req(c, 3, 304, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_GRANT);
	CU_ASSERT_EQUAL(outs[1].req_id, 304);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->local_handoffs, 3);
	teardown(c);
}

/* Release consistency is transitive: rank 1 takes lock 3, whose GRANT
 * names page 20 at version 9, then lock 4 (its token here already) and
 * gives lock 4 to rank 2 locally.  Rank 2 must learn of page 20 too: it
 * may hold a copy older than 9 (dsmtest chain). */
static void test_local_grant_passes_on_what_other_grants_named(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice named[1] = { NOTE(20, 9) };
	struct lm_msg m;
	uint32_t up;
	bool seen = false;

	join_all(c, RUN);
	token_arrives(c, 4); /* rank 1 holds lock 4 */
	unlock_req(c, 1, 310, 4);
	clear_outs();
	lock_req(c, 1, 311, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_GRANT, RUN);
	m.id = 3;
	m.notices = named;
	m.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	clear_outs();
	lock_req(c, 1, 312, 4);  /* rank 1 holds 3 and 4 */
	lock_req(c, 2, 313, 4);  /* rank 2 waits for 4 */
	unlock_req(c, 1, 314, 4);
	for (size_t i = 0; i < nouts; i++) {
		if (outs[i].req_id != 313 || outs[i].m.type != LM_MSG_GRANT)
			continue;
		for (uint32_t k = 0; k < outs[i].m.nnotices; k++)
			seen |= outs[i].notices[k].page == 20 &&
				outs[i].notices[k].version == 9;
	}
	CU_ASSERT(seen);
	teardown(c);
}

/* Deltas sent with their data (eager relay) are no longer here to be
 * written on top of a copy: a FETCH must ask for their versions, so that
 * no reflector's cache answers with a copy from before them
 * (dsmtest counters on several reflectors). */
static lm_lemuriad *setup_eager(void)
{
	char text[1024];
	const char *at = strstr(small_layout, "auth = off\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = eager\n%s",
		 (int)(at - small_layout), small_layout, at);
	return setup_text(text);
}

static void test_fetch_asks_for_our_registered_versions(void)
{
	lm_lemuriad *c = setup_eager();

	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x66);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1);
	answer_registers(c, true, 7); /* the data left; the page is at 7 */
	clear_outs();
	fetch(c, 2, 900, 5);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCH);
	CU_ASSERT(outs[0].m.version >= 7);
	teardown(c);
}

/* A FETCH that starts while our data is on its way up, before we know
 * its version, may be answered from before it: the waiter gets that
 * reply (it asked before our data was published to it), but the copy is
 * not cached, else later readers here would miss the data. */
static void test_reply_from_before_our_data_is_not_cached(void)
{
	lm_lemuriad *c = setup_eager();
	uint32_t up;

	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x66);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1); /* REGISTER with the data, unanswered */
	clear_outs();
	fetch(c, 2, 901, 5);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	r_page(c, up, 5, 3, 0x00); /* a cached copy from before ours */
	CU_ASSERT_EQUAL(nouts, 1);  /* the waiter is answered */
	CU_ASSERT(!is_cached(c, 5));
	teardown(c);
}

/* Deltas the homes refused are writes lost: the run cannot be right, so
 * it ends at once, at every client here and (through R) everywhere,
 * naming the cause, instead of a log line and a wrong answer. */
static void test_refused_deltas_abort_the_run(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice v[4];
	struct lm_msg r = msg(LM_MSG_REGISTER_OK, RUN);
	struct out *up;
	int to_clients = 0;

	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x66);
	for (uint32_t k = 0; k < 4; k++)
		barrier(c, k, 1);
	up = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(up);
	CU_ASSERT_FATAL(up->m.nnotices <= 4);
	memcpy(v, up->notices, up->m.nnotices * sizeof(*v));
	r.status = LM_EBADMSG;
	r.notices = v;
	r.nnotices = 0;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up->req_id, &r);
	up = find_out(SENT, refl, LM_MSG_ABORT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(up);
	CU_ASSERT(up->m.data_len > 0 &&
		  memmem(up->m.data, up->m.data_len, "refused", 7) != NULL);
	for (size_t i = 0; i < nouts; i++)
		to_clients += outs[i].m.type == LM_MSG_ABORT &&
			      outs[i].node != refl;
	CU_ASSERT(to_clients >= 4); /* each waits in the barrier */
	teardown(c);
}

/* A recalled token makes at most LM_LEMURIAD_HANDOFFS_MAX more local
 * hand-offs, then goes back, and the cluster asks for it again for the
 * clients still waiting: no cluster starves the others. */
static void test_recalled_token_bounded_handoffs(void)
{
	lm_lemuriad *c = setup();
	uint32_t holder = 1, req = 400;
	int handoffs = 0;

	join_all(c, RUN);
	token_arrives(c, 5);
	lock_req(c, 2, req++, 5);
	lock_req(c, 3, req++, 5);
	recall(c, 5, 1);
	CU_ASSERT_EQUAL(nouts, 0);
	for (unsigned i = 0; i < 2 * LM_LEMURIAD_HANDOFFS_MAX; i++) {
		bool granted = false, returned = false;

		clear_outs();
		unlock_req(c, holder, req++, 5);
		lock_req(c, holder, req++, 5); /* and wants it again */
		for (size_t k = 0; k < nouts; k++) {
			if (outs[k].m.type == LM_MSG_GRANT) {
				granted = true;
				holder = (uint32_t)(outs[k].node - node_of(0));
			}
			if (outs[k].m.type == LM_MSG_UNLOCK)
				returned = true;
		}
		if (returned) {
			CU_ASSERT(!granted);
			CU_ASSERT_EQUAL_FATAL(nouts, 3);
			CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_UNLOCK);
			CU_ASSERT_EQUAL(outs[2].m.type, LM_MSG_LOCK);
			break;
		}
		CU_ASSERT_FATAL(granted);
		handoffs++;
	}
	CU_ASSERT_EQUAL(handoffs, LM_LEMURIAD_HANDOFFS_MAX);
	teardown(c);
}


/* relay = eager: the deltas travel with the registration, merged per
 * page (two flushes of one page make one entry). */
static void test_eager_relay_sends_data(void)
{
	char text[1024];
	lm_lemuriad *c;
	const char *at = strstr(small_layout, "auth = off\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = eager\n%s",
		 (int)(at - small_layout), small_layout, at);
	c = setup_text(text);
	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x66);
	flush_page(c, 2, 5, 16, 4, 0x67);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[0].notices[0].base, LM_REG_DATA);
	CU_ASSERT_EQUAL(outs[0].notices[0].writer, LM_WRITER_MANY);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.diffs.count, 1);
	CU_ASSERT_EQUAL(delta_byte(&outs[0], 0, 0), 0x66);
	CU_ASSERT_EQUAL(delta_byte(&outs[0], 16, 0), 0x67);
	answer_registers(c, true, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL(pull(c, 5, 3)->m.status, LM_ENOENT); /* it went */
	teardown(c);
}

/* relay = adaptive: lazy until a home pulls a page's delta; from then on
 * that page's deltas go with their data, the others stay lazy. */
static void test_adaptive_relay_sends_pulled_pages_data(void)
{
	char text[1024];
	lm_lemuriad *c;
	const char *at = strstr(small_layout, "auth = off\n");
	struct lm_notice none[1] = { NOTE(200, 1) };

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = adaptive\n%s",
		 (int)(at - small_layout), small_layout, at);
	/* room for the deltas: no spill may blur what is sent */
	CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(text, "cache = 12K"));
	memcpy(strstr(text, "cache = 12K"), "cache = 64K", 11);
	c = setup_text(text);
	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x11);
	flush_page(c, 1, 6, 0, 4, 0x12);
	barrier_release(c, 1, none, 1); /* both NEW (registered at 40) */
	CU_ASSERT_EQUAL(pull(c, 5, 40)->m.status, 0); /* 5 is shared */
	clear_outs();
	flush_page(c, 1, 5, 8, 4, 0x21);
	flush_page(c, 1, 6, 8, 4, 0x22);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 2);
	for (uint32_t i = 0; i < 2; i++) {
		const struct lm_notice *e = &outs[0].notices[i];

		if (e->page == 5) {
			CU_ASSERT_EQUAL(e->base, LM_REG_DATA);
		} else {
			CU_ASSERT(e->page == 6 && e->base == LM_REG_NEW &&
				  e->version == 40);
		}
	}
	CU_ASSERT_EQUAL(outs[0].m.diffs.count, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_sent_shared, 1);
	teardown(c);
}

/* relay = adaptive: a pulled page sends its data with its next
 * LM_DELTAS_SHARED_SENDS registrations, then goes lazy again until a
 * home pulls it anew (another cluster that stopped reading it costs no
 * more bytes). */
static void test_adaptive_page_goes_lazy_again(void)
{
	char text[1024];
	lm_lemuriad *c;
	const char *at = strstr(small_layout, "auth = off\n");
	struct lm_notice none[1] = { NOTE(200, 1) };
	uint32_t id = 2;

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = adaptive\n%s",
		 (int)(at - small_layout), small_layout, at);
	memcpy(strstr(text, "cache = 12K"), "cache = 64K", 11);
	c = setup_text(text);
	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x11);
	barrier_release(c, 1, none, 1); /* NEW, registered at 40 */
	CU_ASSERT_EQUAL(pull(c, 5, 40)->m.status, 0);
	for (uint32_t e = 0; e <= LM_DELTAS_SHARED_SENDS + 1; e++, id++) {
		uint32_t want = e < LM_DELTAS_SHARED_SENDS ? LM_REG_DATA
							   : LM_REG_NEW;

		if (e == LM_DELTAS_SHARED_SENDS + 1) {
			/* pulled anew: its data goes with it again */
			CU_ASSERT_EQUAL(pull(c, 5, 60 + e - 1)->m.status, 0);
			want = LM_REG_DATA;
		}
		flush_page(c, 1, 5, 8, 4, (uint8_t)(0x20 + e));
		for (uint32_t r = 0; r < 4; r++)
			barrier(c, r, id);
		CU_ASSERT_EQUAL_FATAL(outs[0].m.type, LM_MSG_REGISTER);
		CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
		CU_ASSERT_EQUAL(outs[0].notices[0].base, want);
		answer_registers(c, true, 60 + e);
		release(c, id);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_sent_shared,
			LM_DELTAS_SHARED_SENDS + 1);
	teardown(c);
}

/* Deltas share the cache size with the copies (I5): beyond it they go
 * home with their data, so the lemuriad's memory stays bounded. */
static void test_deltas_stay_within_cache(void)
{
	lm_lemuriad *c = setup_small(); /* a cache of three pages */

	join_all(c, RUN);
	flush_page(c, 1, 1, 0, 4, 1);
	flush_page(c, 1, 2, 0, 4, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->spills, 0);
	clear_outs();
	{
		static uint8_t list[256];
		struct lm_msg f = msg(LM_MSG_FLUSH, RUN);

		f.diffs.data = list;
		f.diffs.len = make_flush(list, sizeof(list), 3, 0, 4, 3);
		f.diffs.count = 1;
		creq(c, 1, 99, &f);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->spills, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FLUSH_OK);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].m.nnotices, 3);
	CU_ASSERT_EQUAL(outs[1].m.diffs.count, 3);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_sent_data, 3);
	teardown(c);
}

static void test_bad_input_dropped(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg m = msg(LM_MSG_FETCH, RUN);
	struct lm_msg rel = msg(LM_MSG_RELEASE, RUN);

	join_all(c, RUN);
	/* a FETCH sent one-way cannot be answered */
	lm_lemuriad_handle(c, node_of(0), LM_REL_ONEWAY, 0, &m);
	/* a type a client never sends */
	m.type = LM_MSG_GRANT;
	creq(c, 0, 2, &m);
	/* a request from the reflector */
	lm_lemuriad_handle(c, refl, LM_REL_REQUEST, 3, &rel);
	/* a node of no role here (the other lemuriad) */
	lm_lemuriad_handle(c, lm_layout_cluster(layout, "c1")->id,
			  LM_REL_REQUEST, 4, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 4);
	teardown(c);
}

static void test_abort_relayed_both_ways(void)
{
	lm_lemuriad *c = setup();
	static const char why[] = "rank 6 lost";
	struct lm_msg a = msg(LM_MSG_ABORT, RUN);

	join_all(c, RUN);
	a.rank = 6;
	a.data = (const uint8_t *)why;
	a.data_len = strlen(why);
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &a);
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
	for (uint32_t r = 0; r < 4; r++) {
		struct out *o = find_out(SENT, node_of(r), LM_MSG_ABORT);

		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_EQUAL(o->m.rank, 6);
		CU_ASSERT(o->m.data_len == strlen(why) &&
			  memcmp(o->data, why, o->m.data_len) == 0);
	}
	clear_outs();

	/* a client's ABORT goes up and to the other clients */
	join_all(c, RUN + 1);
	a.run = RUN + 1;
	a.rank = 3; /* what it claims is replaced by its own rank */
	lm_lemuriad_handle(c, node_of(1), LM_REL_ONEWAY, 0, &a);
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
	CU_ASSERT_PTR_NOT_NULL(find_out(SENT, refl, LM_MSG_ABORT));
	CU_ASSERT_PTR_NULL(find_out(SENT, node_of(1), LM_MSG_ABORT));
	for (size_t i = 0; i < nouts; i++)
		CU_ASSERT_EQUAL(outs[i].m.rank, 1);
	teardown(c);
}

static void test_grant_after_leave_returns_lock(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg m = msg(LM_MSG_LOCK, RUN);
	uint32_t up;

	join_all(c, RUN);
	m.id = 4;
	creq(c, 2, 121, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_LEAVE, RUN);
	creq(c, 2, 122, &m);
	clear_outs();
	/* nobody holds it: the token stays, free, until it is recalled */
	m = msg(LM_MSG_GRANT, RUN);
	m.id = 4;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL(nouts, 0);
	recall(c, 4, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, SENT);
	CU_ASSERT_EQUAL(outs[0].node, refl);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK);
	CU_ASSERT_EQUAL(outs[0].m.id, 4);
	CU_ASSERT_EQUAL(outs[0].m.rank, 2);
	teardown(c);
}

#define DPAGE 4096u

static void ignore_register(void *ctx, const struct lm_msg *reg)
{
	(void)ctx;
	(void)reg;
}

/* Freed delta buffers are kept up to the number asked for and taken by
 * the next deltas empty and zeroed, as new ones: nothing of a page's
 * earlier bytes goes out with another page's delta. */
static void test_delta_buffers_kept_for_reuse(void)
{
	lm_deltas *d = lm_deltas_create(DPAGE, 64, 0, false, ignore_register,
					NULL);
	uint8_t diff[16 + DPAGE], out[2 * DPAGE];
	size_t dl, ol = 1;
	struct lm_delta *x;
	int stale = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	lm_deltas_keep_spares(d, 2);
	dl = test_run_header(diff, 0, DPAGE);
	memset(diff + dl, 0xc3, DPAGE);
	for (uint32_t page = 1; page <= 3; page++) {
		x = lm_deltas_open(d, page, 0);
		CU_ASSERT_PTR_NOT_NULL_FATAL(x);
		lm_delta_add_valid_diff(x, diff, dl + DPAGE);
	}
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 3);
	lm_deltas_reset(d); /* all three freed: two kept */
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 0);
	CU_ASSERT_EQUAL(lm_deltas_spares(d), 2);
	x = lm_deltas_open(d, 9, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(x);
	CU_ASSERT_EQUAL(lm_deltas_spares(d), 1);
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 1);
	CU_ASSERT_EQUAL(x->dirty, 0);
	for (size_t i = 0; i < DPAGE; i++)
		stale += x->bytes[i] != 0;
	CU_ASSERT_EQUAL(stale, 0);
	/* one byte written: its group goes out with zeros, not 0xc3 */
	dl = test_run_header(diff, 100, 1);
	diff[dl] = 0x11;
	lm_delta_add_valid_diff(x, diff, dl + 1);
	CU_ASSERT_EQUAL(lm_delta_encode(x, out, sizeof(out), &ol), 0);
	for (size_t i = 0; i < ol; i++)
		stale += out[i] == 0xc3;
	CU_ASSERT_EQUAL(stale, 0);
	lm_deltas_keep_spares(d, 0); /* the last kept one is freed */
	CU_ASSERT_EQUAL(lm_deltas_spares(d), 0);
	lm_deltas_destroy(d); /* ASan: nothing leaks, nothing freed twice */
}

LM_TEST_SUITE("cluster",
	LM_TEST(test_join),
	LM_TEST(test_delta_buffers_kept_for_reuse),
	LM_TEST(test_create_rejects_unknown_name),
	LM_TEST(test_read_miss_fetches_the_next_pages_ahead),
	LM_TEST(test_fetch_ahead_fits_one_fetchv),
	LM_TEST(test_fetch_ahead_goes_as_far_as_the_fault),
	LM_TEST(test_read_miss_fetches_its_stride_ahead),
	LM_TEST(test_fetch_coalesces_and_hits),
	LM_TEST(test_client_fetchv_serves_what_is_cached),
	LM_TEST(test_fetch_ids_grow),
	LM_TEST(test_fetch_bad_reply_fails_waiters),
	LM_TEST(test_flush_applies_and_keeps_delta),
	LM_TEST(test_barrier_and_release),
	LM_TEST(test_barrier_counts_each_client_once),
	LM_TEST(test_lock_grant_unlock_relay),
	      LM_TEST(test_recalled_token_waits_for_a_fresh_client),
	      LM_TEST(test_fresh_wait_ends_after_its_ticks),
	LM_TEST(test_lock_token_handed_off_locally),
	LM_TEST(test_local_grant_passes_on_what_other_grants_named),
	LM_TEST(test_fetch_asks_for_our_registered_versions),
	LM_TEST(test_reply_from_before_our_data_is_not_cached),
	LM_TEST(test_refused_deltas_abort_the_run),
	LM_TEST(test_recalled_token_bounded_handoffs),
	LM_TEST(test_alloc_free_relay),
	LM_TEST(test_create_routing),
	LM_TEST(test_create_kept_is_freed),
	LM_TEST(test_end_and_wait_end),
	LM_TEST(test_lru_bound),
	LM_TEST(test_lru_keeps_recently_used),
	LM_TEST(test_newer_run_resets),
	LM_TEST(test_peer_lost_client_aborts),
	LM_TEST(test_peer_lost_reflector_aborts),
	LM_TEST(test_leave_forgets_client),
	LM_TEST(test_fetch_after_notice_refetches),
	LM_TEST(test_sole_cluster_notice_keeps_copy),
	LM_TEST(test_sole_cluster_notice_invalidates_otherwise),
	LM_TEST(test_release_carries_updates),
	LM_TEST(test_release_goes_out_a_client_at_a_time),
	LM_TEST(test_release_puts_off_a_bounded_number),
	LM_TEST(test_release_no_update_without_exact_copy),
	LM_TEST(test_held_release_too_old_then_abort),
	LM_TEST(test_fetchv_leftovers_fetched_alone),
	LM_TEST(test_fetchv_pages_as_diffs),
	LM_TEST(test_neighbour_pages_get_no_updates),
	LM_TEST(test_release_updates_off),
	LM_TEST(test_fetch_reply_gets_our_deltas),
	LM_TEST(test_barrier_waits_for_registration_then_pull),
	LM_TEST(test_pull_of_delta_not_held_is_quiet),
	LM_TEST(test_reply_after_pull_cached_when_new_enough),
	LM_TEST(test_next_delta_merged_or_older_pushed),
	LM_TEST(test_unlock_parked_behind_registration),
	LM_TEST(test_barrier_never_overtakes_a_parked_unlock),
	LM_TEST(test_eager_relay_sends_data),
	LM_TEST(test_adaptive_relay_sends_pulled_pages_data),
	LM_TEST(test_adaptive_page_goes_lazy_again),
	LM_TEST(test_deltas_stay_within_cache),
	LM_TEST(test_abort_relayed_both_ways),
	LM_TEST(test_grant_after_leave_returns_lock),
	LM_TEST(test_bad_input_dropped))
