/* The lemuriad state machine driven by hand (tests/lemuriad_util.h):
 * lemuriad/fetches.c: FETCH and FETCHV from the cache or coalesced,
 * replies with our deltas on top, replies too old for a notice or for
 * our data that left, and pages fetched ahead of the faults. */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deltas.h"
#include "diff.h"
#include "diff_util.h"
#include "lemuriad_util.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "updates.h"

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
	CU_ASSERT_EQUAL(outs[0].m.id, 0); /* nor at the home */
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

/* With `prefetch = 31` a client's FETCHV may name 63 pages, and the
 * fetch ahead after its miss could ask for 31 + 62: the FETCHV to the
 * reflector takes the pages after the miss first and stops at
 * LM_FETCHV_MAX, the most a reflector serves. */
static void test_fetch_ahead_fits_one_fetchv(void)
{
	char text[1024];
	uint32_t ask[1 + 2 * LM_CFG_PREFETCH_MAX];
	lm_lemuriad *c;
	struct out *o;

	CU_ASSERT_EQUAL_FATAL(LM_CFG_PREFETCH_MAX, 31);
	lazy_layout_with(text, sizeof(text), "prefetch = 7", "prefetch = 31");
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
 * FETCHV's first version, docs/protocol.md) and never beyond `prefetch`,
 * and its FETCH of the miss lets the home pull that far ahead (its id);
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
		CU_ASSERT_EQUAL_FATAL(nouts, 1);
		CU_ASSERT_EQUAL(outs[0].m.id, cases[k].n);
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

/* A page fetched ahead that the home left out of its PAGES (pending
 * there) and a client's fault waits for is asked alone, and that FETCH
 * lets the home pull as far ahead as the waiting fault reached; one
 * nobody waits for is left to its first fault, and pulls nothing. */
static void test_page_asked_alone_pulls_as_far_as_its_waiter(void)
{
	lm_lemuriad *c = setup();
	const uint32_t miss[] = { 10 }, later[] = { 13 };
	struct out *o;
	uint32_t batch;

	CU_ASSERT_EQUAL_FATAL(layout->prefetch, 7);
	join_all(c, RUN);
	creq_fetchv_reach(c, 0, 31, miss, 1, 5);
	o = miss_answered(c, 10, 0x10);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL_FATAL(o->m.nnotices, 5); /* 11..15 */
	batch = o->req_id;
	clear_outs();
	creq_fetchv_reach(c, 1, 32, later, 1, 3);
	CU_ASSERT_EQUAL(nouts, 0); /* waits for the FETCHV */
	r_pages_poked(c, batch, 11, 5, 0x11, 0, 0, 0); /* 12..15 left out */
	o = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL(o->m.page, 13);
	CU_ASSERT_EQUAL(o->m.id, 3);
	CU_ASSERT_EQUAL(nouts, 1); /* 12, 14, 15: nobody waits */
	teardown(c);
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

LM_TEST_SUITE("fetches",
	LM_TEST(test_read_miss_fetches_the_next_pages_ahead),
	LM_TEST(test_fetch_ahead_fits_one_fetchv),
	LM_TEST(test_fetch_ahead_goes_as_far_as_the_fault),
	LM_TEST(test_page_asked_alone_pulls_as_far_as_its_waiter),
	LM_TEST(test_read_miss_fetches_its_stride_ahead),
	LM_TEST(test_fetch_coalesces_and_hits),
	LM_TEST(test_client_fetchv_serves_what_is_cached),
	LM_TEST(test_fetch_ids_grow),
	LM_TEST(test_fetch_bad_reply_fails_waiters),
	LM_TEST(test_fetch_asks_for_our_registered_versions),
	LM_TEST(test_reply_from_before_our_data_is_not_cached),
	LM_TEST(test_fetch_after_notice_refetches),
	LM_TEST(test_fetchv_leftovers_fetched_alone),
	LM_TEST(test_fetch_reply_gets_our_deltas),
	LM_TEST(test_reply_after_pull_cached_when_new_enough))
