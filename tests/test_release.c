/* The lemuriad state machine driven by hand (tests/lemuriad_util.h):
 * lemuriad/release.c: a barrier RELEASE held for its updates, sent a
 * client at a time, and what it puts off meanwhile. */
#include "unit.h"

#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "deltas.h"
#include "diff.h"
#include "diff_util.h"
#include "lemuriad_util.h"
#include "globals_desc.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "updates.h"
#include "wire.h"
#include "cluster_copy.h"

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

/* A RELEASE with updates goes out a client at a time (docs/dsm.md
 * "Updates", staged release): each step of the daemon's background work
 * releases one more.  In between, a released client's fault on a cached
 * page and the home's PULL are answered at once; its fault that misses
 * and its FLUSH wait, and are handled in the order they came once every
 * client has its RELEASE. */
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

/* A message put off while a RELEASE is staged keeps copies of what it
 * points to: the caller's buffer is gone when it is handled (the daemon
 * decodes each datagram into a buffer it reuses). */
static void test_put_off_message_keeps_its_own_copy(void)
{
	struct lm_msg f = msg(LM_MSG_FLUSH, RUN);
	size_t cap = 4096 + 64;
	uint8_t *list = malloc(cap);
	lm_lemuriad *c = staged_release();
	struct out *o;

	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	f.diffs.data = list;
	f.diffs.len = make_flush(list, cap, 9, 0, 8, 0x55);
	f.diffs.count = 1;
	creq(c, 0, 92, &f); /* waits for the RELEASE */
	CU_ASSERT_EQUAL(nouts, 0);
	memset(list, 0xee, cap);
	free(list);
	while (lm_lemuriad_background(c))
		;
	o = find_out(REPLIED, node_of(0), LM_MSG_FLUSH_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL(o->m.status, 0);
	clear_outs();
	fetch(c, 0, 93, 9); /* cached, with the FLUSH's bytes */
	o = find_out(REPLIED, node_of(0), LM_MSG_PAGE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o->data);
	CU_ASSERT_EQUAL(o->data[0], 0x55);
	CU_ASSERT_EQUAL(o->data[7], 0x55);
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
	lm_lemuriad_peer_lost(c, refl, NULL);
	for (uint32_t r = 0; r < 4; r++) {
		CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(r),
					    LM_MSG_RELEASE));
		CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(r),
						LM_MSG_ABORT));
	}
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

/* copy = cluster: a client's RELEASE carries only the notices the
 * cluster's copy is too old for (docs/dsm.md "One copy per cluster"); a
 * page the copy holds at the notice's version, or at its base with our
 * cluster the only writer since, would leave every view alone. */
static void test_shared_release_leaves_out_held_notices(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_notice n[4] = {
		NOTE(1, 3), /* the copy holds 2: sent */
		NOTE(2, 5), /* the copy holds 5: left out */
		/* the copy holds the base, and only we (c0) wrote since */
		{ .page = 3, .version = 6, .base = 4, .writer = LM_WRITER_MANY,
		  .wcluster = 0 },
		NOTE(4, 2), /* the copy lacks the page: sent */
	};
	join_all_shared(c, RUN);
	cache_page(c, 1, 2, 0xa1);
	cache_page(c, 2, 5, 0xa2);
	cache_page(c, 3, 4, 0xa3);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_installs, 3);
	arrive_and_release(c, 6, n, 4); /* checks the BARRIER went up */
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
	for (uint32_t r = 0; r < 4; r++) {
		struct out *o = find_out(REPLIED, node_of(r), LM_MSG_RELEASE);

		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_EQUAL_FATAL(o->m.nnotices, 2);
		CU_ASSERT_EQUAL(o->notices[0].page, 1);
		CU_ASSERT_EQUAL(o->notices[0].version, 3);
		CU_ASSERT_EQUAL(o->notices[1].page, 4);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_notices_held, 2);
	teardown(c);
}

/* The REGISTER among the outputs, answered with notices n and the pages
 * of `granted` made ours (docs/dsm.md "Pages one cluster owns"). */
static void grant_to(lm_lemuriad *c, uint32_t req_id,
		     const struct lm_notice *n, uint32_t nn,
		     const uint32_t *granted, uint32_t ng)
{
	struct lm_msg r = msg(LM_MSG_REGISTER_OK, RUN);
	uint8_t data[16];

	CU_ASSERT_FATAL(ng <= 4);
	for (uint32_t i = 0; i < ng; i++)
		lm_put32(data + 4 * i, granted[i]);
	r.notices = n;
	r.nnotices = nn;
	r.data = data;
	r.data_len = 4 * ng;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, &r);
}

static void grant(lm_lemuriad *c, const struct lm_notice *n, uint32_t nn,
		  const uint32_t *granted, uint32_t ng)
{
	struct out *reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);

	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	grant_to(c, reg->req_id, n, nn, granted, ng);
}

/* A client's write: page cached at `version` (every byte `fill`) goes
 * into the copy, takes its twin, and byte 9 becomes `byte`. */
static void written(lm_lemuriad *c, const struct lm_ccopy *cc, uint32_t page,
		    uint32_t version, uint8_t fill, uint8_t byte)
{
	cache_page(c, page, version, fill);
	CU_ASSERT(lm_ccopy_twin(cc, page) == 0);
	lm_ccopy_page(cc, page)[9] = byte;
}

/* Every client arrives at barrier id: the seal's REGISTER goes up. */
static void all_arrive(lm_lemuriad *c, uint32_t id)
{
	clear_outs();
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, id);
}

/* A lemuriad of a shared copy whose clients all joined, and the copy. */
static const struct lm_ccopy *shared_joined(lm_lemuriad *c)
{
	const struct lm_ccopy *cc;

	join_all_shared(c, RUN);
	cc = lm_lemuriad_copy(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cc);
	return cc;
}

/* copy = cluster: a page the home makes ours loses its twin and its
 * deltas (the home pulls the whole page); a write to it is sealed by
 * nobody; a PULL takes the whole page, writes since the grant included,
 * and the page is tracked again.  A grant for a page whose copy lacks a
 * change (it is not at the notice's version) is refused. */
static void test_shared_owned_pages(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_notice n[2] = {
		{ .page = 7, .version = 3, .base = 2,
		  .writer = LM_WRITER_MANY, .wcluster = 0 },
		/* the copy holds 1, not the base: another change is missing */
		{ .page = 8, .version = 3, .base = 2,
		  .writer = LM_WRITER_MANY, .wcluster = 0 },
	};
	const uint32_t granted[2] = { 7, 8 };
	const struct lm_ccopy *cc;
	const struct out *d;

	cc = shared_joined(c);
	written(c, cc, 7, 2, 0x11, 0x55);
	written(c, cc, 8, 1, 0x22, 0x56);
	all_arrive(c, 1);
	grant(c, n, 2, granted, 2);
	CU_ASSERT(lm_ccopy_is_owned(cc, 7));
	CU_ASSERT(!lm_ccopy_is_twinned(cc, 7));
	CU_ASSERT(!lm_ccopy_is_owned(cc, 8));
	CU_ASSERT(lm_ccopy_is_twinned(cc, 8));
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_owned, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_own_refused, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_forgotten, 1);
	release(c, 1);
	CU_ASSERT(!is_cached(c, 7)); /* it would go stale under the writes */
	clear_outs();
	lm_ccopy_page(cc, 7)[10] = 0x66; /* untracked */
	all_arrive(c, 2);
	/* no registration names page 7: nobody tracks its writes */
	for (size_t i = 0; i < nouts; i++)
		for (uint32_t k = 0; outs[i].m.type == LM_MSG_REGISTER &&
				     k < outs[i].m.nnotices; k++)
			CU_ASSERT(outs[i].notices[k].page != 7);
	answer_registers(c, true, 40);
	release(c, 2);
	d = pull(c, 7, 3);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 0, 0xff), 0x11); /* the whole page */
	CU_ASSERT_EQUAL(delta_byte(d, 9, 0xff), 0x55);
	CU_ASSERT_EQUAL(delta_byte(d, 10, 0xff), 0x66);
	CU_ASSERT(!lm_ccopy_is_owned(cc, 7));
	CU_ASSERT(lm_ccopy_is_twinned(cc, 7));
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_recalls, 1);
	teardown(c);
}

/* copy = cluster: the home's PULL of the entry a grant marked may come
 * before the REGISTER_OK that names the grant (the answer waits for the
 * other homes): the PULL takes the delta, and the grant, whose entry is
 * gone, is refused; the page stays twinned and its writes are sealed. */
static void test_shared_grant_after_pull_refused(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_notice n = { .page = 7, .version = 3, .base = 2,
			       .writer = LM_WRITER_MANY, .wcluster = 0 };
	const uint32_t granted = 7;
	const struct lm_ccopy *cc;
	const struct out *d, *reg;
	uint32_t req;

	cc = shared_joined(c);
	written(c, cc, 7, 2, 0x11, 0x55);
	all_arrive(c, 1);
	reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	req = reg->req_id;
	d = pull(c, 7, 3); /* the registered delta, answer still away */
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 9, 0xff), 0x55);
	CU_ASSERT_EQUAL(delta_byte(d, 0, 0xff), 0xff); /* a delta, not whole */
	grant_to(c, req, &n, 1, &granted, 1);
	CU_ASSERT(!lm_ccopy_is_owned(cc, 7));
	CU_ASSERT(lm_ccopy_is_twinned(cc, 7));
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_own_refused, 1);
	teardown(c);
}

/* copy = cluster: at a barrier, a page the copy holds older than a
 * notice, that nobody here wrote, leaves the copy, and the registration
 * says so to its home (an LM_REG_DROP entry); the clients' views of it
 * close before they go on (drops). */
static void test_shared_stale_pages_forgotten(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_notice n = { .page = 9, .version = 5, .base = 2,
			       .writer = LM_WRITER_MANY, .wcluster = 1 };
	const struct lm_ccopy *cc;
	const struct out *reg;
	uint64_t drops;

	cc = shared_joined(c);
	cache_page(c, 9, 2, 0x33);
	barrier_release(c, 1, &n, 1); /* another cluster wrote page 9 */
	CU_ASSERT(lm_ccopy_holds(cc, 9, 2));
	drops = atomic_load(&cc->hdr->drops);
	all_arrive(c, 2);
	CU_ASSERT(!lm_ccopy_holds(cc, 9, 0));
	CU_ASSERT(atomic_load(&cc->hdr->drops) == drops + 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_forgotten, 1);
	reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	CU_ASSERT_EQUAL_FATAL(reg->m.nnotices, 1);
	CU_ASSERT_EQUAL(reg->notices[0].page, 9);
	CU_ASSERT_EQUAL(reg->notices[0].base, LM_REG_DROP);
	CU_ASSERT_EQUAL(reg->notices[0].wcluster, 0);
	teardown(c);
}

/* copy = cluster: a barrier keeps the idle twin of a page no other
 * cluster wrote (the clients' views stay writable: no drop for them to
 * see), drops the idle twin of a page another cluster wrote since, which
 * then leaves the copy, and once the kept twins were compared about as
 * often as a drop costs the clients, drops them all at the next one. */
static void test_shared_idle_twins_kept_until_they_cost(void)
{
	lm_lemuriad *c = setup_shared();
	/* our registration leaves page 9 at 40 (answer_registers) */
	struct lm_notice n = { .page = 9, .version = 45, .base = 40,
			       .writer = LM_WRITER_MANY, .wcluster = 1 };
	const uint32_t first = 100, kept = 60; /* one REGISTER of the harness */
	const uint32_t due = LM_LEMURIAD_KEEP_COMPARES_PER_CLIENT * 4 / kept;
	const struct lm_ccopy *cc = shared_joined(c);
	uint32_t id = 1, more = 0;
	uint64_t drops;

	written(c, cc, 9, 2, 0x33, 0x44);
	for (uint32_t p = first; p < first + kept; p++)
		written(c, cc, p, 2, 0x10, 0x11);
	barrier_release(c, id++, NULL, 0); /* the writes are sealed */
	barrier_release(c, id++, &n, 1);   /* another cluster wrote 9 */
	drops = atomic_load(&cc->hdr->drops);
	for (int k = 2; k < LM_CCOPY_IDLE_SEALS; k++)
		barrier_release(c, id++, NULL, 0);
	CU_ASSERT(lm_ccopy_is_twinned(cc, 9));
	barrier_release(c, id++, NULL, 0); /* idle at IDLE_SEALS seals */
	CU_ASSERT(!lm_ccopy_is_twinned(cc, 9));
	CU_ASSERT(!lm_ccopy_holds(cc, 9, 0));
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_forgotten, 1);
	CU_ASSERT(atomic_load(&cc->hdr->drops) > drops);
	drops = atomic_load(&cc->hdr->drops);
	/* the others stay, until their comparisons add up */
	while (lm_ccopy_is_twinned(cc, first) && more < 2 * due) {
		CU_ASSERT(lm_ccopy_is_twinned(cc, first + kept - 1));
		CU_ASSERT(atomic_load(&cc->hdr->drops) == drops);
		barrier_release(c, id++, NULL, 0);
		more++;
	}
	CU_ASSERT(more >= due - 1 && more <= due + 1);
	for (uint32_t p = first; p < first + kept; p++)
		CU_ASSERT(!lm_ccopy_is_twinned(cc, p));
	CU_ASSERT(atomic_load(&cc->hdr->drops) == drops + 1);
	teardown(c);
}

/* copy = cluster (docs/dsm.md "Eventual visibility"): a cluster whose
 * copy nothing sealed for LM_LEMURIAD_PUBLISH_US seals and registers it
 * by itself, so that processes of other clusters that never synchronise
 * hear of the writes; not before, and not again until that long passed
 * after the last seal. */
static void test_shared_quiet_cluster_publishes(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc;
	const struct out *reg;
	const uint64_t t = 5000000;

	cc = shared_joined(c);
	written(c, cc, 7, 2, 0x11, 0x55);
	clear_outs();
	/* the clock starts: the run's start counts as a barrier, and the
	 * clients just spoke, so the cluster is quiet LM_LEMURIAD_QUIET_US
	 * from here (after LM_LEMURIAD_PUBLISH_US without a seal) */
	CU_ASSERT_EQUAL(lm_lemuriad_pulse(c, t), t + LM_LEMURIAD_QUIET_US);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US - 1);
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_REGISTER));
	/* a client that asks for a page is not spinning: the wait starts
	 * again (LU's clients fault every few milliseconds) */
	fetch(c, 1, 77, 9);
	CU_ASSERT_EQUAL(lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US - 1),
			t + 2 * LM_LEMURIAD_QUIET_US - 1);
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_REGISTER));
	clear_outs();
	CU_ASSERT_EQUAL(lm_lemuriad_pulse(c, t + 2 * LM_LEMURIAD_QUIET_US - 1),
			t + 2 * LM_LEMURIAD_QUIET_US - 1 +
			LM_LEMURIAD_PUBLISH_US);
	reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	CU_ASSERT_EQUAL_FATAL(reg->m.nnotices, 1);
	CU_ASSERT_EQUAL(reg->notices[0].page, 7);
	CU_ASSERT_EQUAL(reg->notices[0].base, LM_REG_NEW);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_published, 1);
	answer_registers(c, true, 40);
	/* written again at once: waits for the bound from the last seal */
	lm_ccopy_page(cc, 7)[9] = 0x56;
	clear_outs();
	lm_lemuriad_pulse(c, t + 2 * LM_LEMURIAD_QUIET_US - 1 +
			     LM_LEMURIAD_PUBLISH_US - 1);
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_REGISTER));
	lm_lemuriad_pulse(c, t + 2 * LM_LEMURIAD_QUIET_US - 1 +
			     LM_LEMURIAD_PUBLISH_US);
	CU_ASSERT_PTR_NOT_NULL(find_out(REQUESTED, refl, LM_MSG_REGISTER));
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_published, 2);
	/* what the first registration changed is told to the other
	 * clusters, through our reflector, LM_LEMURIAD_CHANGED_DELAY_US
	 * after the pulse that followed its REGISTER_OK */
	CU_ASSERT_PTR_NULL(find_out(SENT, refl, LM_MSG_CHANGED));
	lm_lemuriad_pulse(c, t + 2 * LM_LEMURIAD_QUIET_US - 2 +
			     LM_LEMURIAD_PUBLISH_US +
			     LM_LEMURIAD_CHANGED_DELAY_US - 1);
	CU_ASSERT_PTR_NULL(find_out(SENT, refl, LM_MSG_CHANGED));
	lm_lemuriad_pulse(c, t + 2 * LM_LEMURIAD_QUIET_US - 2 +
			     LM_LEMURIAD_PUBLISH_US +
			     LM_LEMURIAD_CHANGED_DELAY_US);
	reg = find_out(SENT, refl, LM_MSG_CHANGED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	CU_ASSERT_EQUAL(reg->m.id, LM_CHANGED_ALL);
	CU_ASSERT_EQUAL_FATAL(reg->m.nnotices, 1);
	CU_ASSERT_EQUAL(reg->notices[0].page, 7);
	CU_ASSERT_EQUAL(reg->notices[0].version, 40);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changes_told, 1);
	/* signed (docs/dsm.md "Order"): our cluster, and told through our
	 * first registration, the second being still out */
	CU_ASSERT_EQUAL(reg->m.rank, 0);
	CU_ASSERT_EQUAL(reg->m.version, 1);
	/* a reader hurries us: the second's pages are told as soon as it
	 * is answered, not LM_LEMURIAD_CHANGED_DELAY_US later */
	{
		struct lm_msg h = msg(LM_MSG_CHANGED, RUN);
		uint64_t now = t + 2 * LM_LEMURIAD_QUIET_US +
			       LM_LEMURIAD_PUBLISH_US +
			       LM_LEMURIAD_CHANGED_DELAY_US;

		h.id = LM_CHANGED_HURRY;
		lm_lemuriad_pulse(c, now);
		lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &h);
		CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->order_hurried, 1);
		/* the CHANGED sent before leaves the outputs first */
		for (size_t i = 0; i < nouts; i++)
			if (outs[i].m.type == LM_MSG_CHANGED)
				outs[i].m.type = LM_MSG_PING;
		CU_ASSERT_EQUAL(answer_registers(c, true, 41), 1);
		lm_lemuriad_pulse(c, now + 1);
		reg = find_out(SENT, refl, LM_MSG_CHANGED);
		CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
		CU_ASSERT_EQUAL(reg->m.version, 2);
		CU_ASSERT_EQUAL_FATAL(reg->m.nnotices, 1);
		CU_ASSERT_EQUAL(reg->notices[0].version, 41);
	}
	teardown(c);
}

/* copy = cluster: a CHANGED (another cluster's) brings into the copy, in
 * place, each page it names that the copy holds older (a client may be
 * reading it in a loop); a page the copy lacks or holds new enough is
 * left alone, and so is one a barrier told every client of a version
 * newer than the copy's (their views of it closed then). */
static void test_shared_changed_fetches_into_copy(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_notice ch[4] = {
		{ .page = 9, .version = 5 },  /* held at 2: fetched */
		{ .page = 10, .version = 5 }, /* not held */
		{ .page = 11, .version = 5 }, /* held at 6 */
		{ .page = 12, .version = 5 }, /* held at 2, told of 4 */
	};
	struct lm_notice told = { .page = 12, .version = 4, .base = 3,
				  .writer = LM_WRITER_MANY, .wcluster = 1 };
	struct lm_msg m = msg(LM_MSG_CHANGED, RUN);
	const struct lm_ccopy *cc;
	const struct out *f;
	const uint32_t nine = 9;
	const uint64_t t = 7000000;
	uint32_t v = 0;

	/* before any client joined there is no copy: ignored (a lemuriad
	 * slow to start got one so and crashed, on 3-reflectors) */
	m.notices = ch;
	m.nnotices = 4;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changed_heard, 0);
	cc = shared_joined(c);
	cache_page(c, 9, 2, 0x33);
	cache_page(c, 11, 6, 0x34);
	cache_page(c, 12, 2, 0x35);
	barrier_release(c, 1, &told, 1);
	CU_ASSERT(lm_ccopy_version(cc, 12, &v) && v == 2);
	clear_outs();
	m.id = 0;
	m.notices = ch;
	m.nnotices = 4;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changed_heard, 4);
	/* the barrier just passed: the cluster waits until it has been
	 * quiet for LM_LEMURIAD_QUIET_US (none of its clients spins) */
	CU_ASSERT_EQUAL(lm_lemuriad_pulse(c, t), t + LM_LEMURIAD_QUIET_US);
	CU_ASSERT_EQUAL(nouts, 0);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US - 1);
	CU_ASSERT_EQUAL(nouts, 0);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changed_fetches, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(f->m.nnotices, 1);
	CU_ASSERT_EQUAL(f->notices[0].page, 9);
	CU_ASSERT_EQUAL(f->notices[0].version, 5);
	/* asked again while on its way: nothing more */
	clear_outs();
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US + 1);
	CU_ASSERT_EQUAL(nouts, 0);
	/* a reply older than CHANGED said does not end it: asked again
	 * (dsmtest visible found a reply that crossed our own data lost
	 * so on two reflectors) */
	r_pages_whole(c, f->req_id, &nine, 1, 4);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->m.page, 9);
	CU_ASSERT_EQUAL(f->m.version, 5);
	r_page(c, f->req_id, 9, 5, 0x77);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v));
	CU_ASSERT_EQUAL(v, 5);
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 9)[100], 0x77);
	/* a newer change heard while a set is on its way joins it: the set
	 * goes in with it (a page of the set may hold that change already,
	 * and its list may name others: docs/dsm.md "Order") */
	ch[0].version = 7;
	m.nnotices = 1;
	clear_outs();
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US + 2);
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	ch[0].version = 8;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US + 3);
	clear_outs();
	r_pages_whole(c, f->req_id, &nine, 1, 7);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 5);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->m.page, 9);
	CU_ASSERT_EQUAL(f->m.version, 8);
	r_page(c, f->req_id, 9, 8, 0x78);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 8);
	teardown(c);
}

/* The reflector brings CHANGED{LM_CHANGED_ALL, rank, ch} (a writer of
 * cluster `rank`); the pulses of a quiet cluster ask for its pages:
 * that FETCHV. */
static const struct out *changed_asked(lm_lemuriad *c, struct lm_notice *ch,
				       uint32_t n, uint32_t rank)
{
	struct lm_msg m = msg(LM_MSG_CHANGED, RUN);
	const uint64_t t = 8000000;
	const struct out *f;

	m.id = LM_CHANGED_ALL;
	m.rank = rank;
	m.notices = ch;
	m.nnotices = n;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	lm_lemuriad_pulse(c, t);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US);
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	return f;
}

/* Pages 9 and 17 held at version 2; a writer's CHANGED names 9 at 5
 * and 17 at 6; the home's PAGES answering the set's FETCHV brings 9
 * alone (17 lives at another reflector): the FETCH of 17 that follows. */
static const struct out *set_half_answered(lm_lemuriad *c)
{
	struct lm_notice ch[2] = { { .page = 9, .version = 5 },
				   { .page = 17, .version = 6 } };
	const uint32_t nine = 9;
	const struct out *f;

	cache_page(c, 9, 2, 0x33);
	cache_page(c, 17, 2, 0x34);
	clear_outs();
	f = changed_asked(c, ch, 2, 0);
	CU_ASSERT_EQUAL_FATAL(f->m.nnotices, 2);
	clear_outs();
	r_pages_whole(c, f->req_id, &nine, 1, 5);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(f->m.page, 17);
	return f;
}

/* copy = cluster: the pages of one CHANGED go into the copy together,
 * when the last of them came, so that a client spinning on one never
 * reads it ahead of another the same writer changed before (barnes's
 * pointer to a cell, seen before the cell: splash2/patterns/publish.C).
 * The first reply alone changes nothing in the copy. */
static void test_shared_changed_pages_go_in_together(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	const uint64_t t = 8000000;
	const struct out *f;
	uint32_t v = 0;

	/* the home brings 9 alone: nothing goes in yet */
	f = set_half_answered(c);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 2);
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 9)[100], 0x33);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US + 1);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 2);
	r_page(c, f->req_id, 17, 6, 0x77);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 5);
	CU_ASSERT(lm_ccopy_version(cc, 17, &v) && v == 6);
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 17)[100], 0x77);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changed_groups, 1);
	teardown(c);
}

/* copy = cluster: a CHANGED's page that a fetch ahead asks for already
 * joins the set through that fetch; when the home's PAGES leaves it out
 * (it had to pull the page first) it is asked for alone, as a page a
 * fault waits for is.  Left to a first fault, as a page fetched ahead
 * that nobody waits for is, it never came: the set went in without it,
 * and a client spinning on the page read the copy's old bytes for ever
 * (treewave on 4+4+4+4, about one run in ten). */
static void test_shared_changed_page_fetched_ahead_is_asked_alone(void)
{
	static uint8_t old[65536];
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	struct lm_notice ch = { .page = 11, .version = 5 };
	struct lm_msg m = msg(LM_MSG_CHANGED, RUN);
	const uint32_t ten = 10, twelve = 12;
	const uint64_t t = 8000000;
	const struct out *f;
	uint32_t v = 0, batch;

	CU_ASSERT_FATAL(layout->page_size <= sizeof(old));
	/* 11 in the copy at 2, not cached (a notice dropped that) */
	memset(old, 0x33, layout->page_size);
	CU_ASSERT_FATAL(lm_ccopy_install(cc, 11, 2, old) == 0);
	fetchv(c, &ten, 1); /* rank 0 misses 10 */
	f = miss_answered(c, 10, 0x10);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(f->m.notices[0].page, 11);
	batch = f->req_id;
	clear_outs();
	m.id = LM_CHANGED_ALL;
	m.rank = 1;
	m.notices = &ch;
	m.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	lm_lemuriad_pulse(c, t);
	lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_US);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changed_heard, 1);
	CU_ASSERT_EQUAL(nouts, 0); /* the fetch ahead asks for it */
	r_pages_whole(c, batch, &twelve, 1, 3);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->m.page, 11);
	CU_ASSERT_EQUAL(f->m.version, 5);
	CU_ASSERT(lm_ccopy_version(cc, 11, &v) && v == 2);
	r_page(c, f->req_id, 11, 5, 0x77);
	CU_ASSERT(lm_ccopy_version(cc, 11, &v) && v == 5);
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 11)[100], 0x77);
	teardown(c);
}

/* copy = cluster, a cache of one page: the answers of a CHANGED's set
 * stay in the cache until the set goes in (from the cache), beyond its
 * size, and the set goes in whole, its pages together (order: a list's
 * page never shows ahead of an earlier list's); then the cache is back
 * within its size.  When each answer pushed the one before out, the set
 * went in without the first (treewave on 4+4+4+4 with `cache = 4K` read
 * a box older than its child's flag in every run); before 0d9abd4 that
 * page was not even asked again. */
static void test_shared_changed_set_larger_than_the_cache(void)
{
	char text[1024];
	const struct lm_ccopy *cc;
	lm_lemuriad *c;
	uint32_t v = 0, req;

	lazy_layout_with(text, sizeof(text), "cache = 64M", "cache = 4K");
	c = setup_shared_text(text);
	cc = shared_joined(c);
	req = set_half_answered(c)->req_id;
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 2);
	clear_outs();
	r_page(c, req, 17, 6, 0x77);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 5);
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 9)[100], 9);
	CU_ASSERT(lm_ccopy_version(cc, 17, &v) && v == 6);
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 17)[100], 0x77);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changed_again, 0);
	CU_ASSERT(lm_lemuriad_stats(c)->cached_bytes <= layout->page_size);
	/* nothing left to ask */
	lm_lemuriad_pulse(c, 8000000 + LM_LEMURIAD_QUIET_US + 1);
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCHV));
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCH));
	teardown(c);
}

/* copy = cluster: the home's answer to a CHANGED page's FETCH is bad (a
 * PAGE of the wrong length): counted and dropped, and the page is asked
 * for again, as any page of the set that did not come at the version
 * CHANGED named.  Dropped with its request, it never came: the cache
 * still held it at an older version, so the set went in without it and
 * nothing asked again (a client spinning on it read the old bytes for
 * ever). */
static void test_shared_changed_page_badly_answered_is_asked_again(void)
{
	static uint8_t bad[100];
	struct lm_msg m = msg(LM_MSG_PAGE, RUN);
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	const uint32_t seventeen = 17;
	const struct out *f;
	uint64_t bad_before;
	uint32_t v = 0;

	f = set_half_answered(c);
	bad_before = lm_lemuriad_stats(c)->dropped_bad;
	m.page = 17;
	m.version = 6;
	m.data = bad;
	m.data_len = sizeof(bad);
	clear_outs();
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, f->req_id, &m);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, bad_before + 1);
	/* 9 went in with the set; 17 did not, and is asked again */
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 5);
	CU_ASSERT(lm_ccopy_version(cc, 17, &v) && v == 2);
	lm_lemuriad_pulse(c, 8000000 + LM_LEMURIAD_QUIET_US + 1);
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(f->m.nnotices, 1);
	CU_ASSERT_EQUAL(f->notices[0].page, 17);
	CU_ASSERT_EQUAL(f->notices[0].version, 6);
	r_pages_whole(c, f->req_id, &seventeen, 1, 6);
	CU_ASSERT(lm_ccopy_version(cc, 17, &v) && v == 6);
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 17)[100], 17);
	teardown(c);
}

/* copy = cluster: while every client waits in a barrier none spins, and
 * the RELEASE tells them every change: pages CHANGED names are not
 * fetched meanwhile, however long the barrier takes (LU on 8+8+8+8,
 * whose clusters wait for each other for tens of milliseconds, fetched
 * pages it was about to be told of, and took them from their owners). */
static void test_shared_changed_waits_out_a_barrier(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_notice ch = { .page = 9, .version = 5 };
	struct lm_msg m = msg(LM_MSG_CHANGED, RUN);
	const uint64_t t = 9000000;

	(void)shared_joined(c);
	cache_page(c, 9, 2, 0x33);
	all_arrive(c, 1);
	clear_outs();
	m.notices = &ch;
	m.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	CU_ASSERT_EQUAL(lm_lemuriad_pulse(c, t), 0);
	CU_ASSERT_EQUAL(lm_lemuriad_pulse(c, t + LM_LEMURIAD_QUIET_MAX_US +
					  1), 0);
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->changed_fetches, 0);
	teardown(c);
}

/* The home answers FETCH req_id (m) with page `page` at `version`, every
 * byte `page`, tagged with registration `reg` of cluster 1 (the data and
 * tags in the caller's buffers, which m keeps). */
static void answer_tagged(lm_lemuriad *c, uint32_t req_id, struct lm_msg *m,
			  uint8_t *data, uint8_t *tags, uint32_t page,
			  uint32_t version, uint32_t reg)
{
	memset(data, (int)page, layout->page_size);
	m->page = page;
	m->version = version;
	m->data = data;
	m->data_len = layout->page_size;
	lm_msg_tag_put(tags, 0, 1, reg);
	m->tags = tags;
	m->ntags = 1;
	clear_outs();
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, m);
}

/* Client `rank` faults on `page` (its request req_id), and the FETCH that
 * goes up is answered as answer_tagged answers. */
static void fault_answered_tagged(lm_lemuriad *c, uint32_t rank,
				  uint32_t req_id, struct lm_msg *m,
				  uint8_t *data, uint8_t *tags, uint32_t page,
				  uint32_t version, uint32_t reg)
{
	const struct out *f;

	clear_outs();
	fetch(c, rank, req_id, page);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	answer_tagged(c, f->req_id, m, data, tags, page, version, reg);
}

/* Cluster `rank`'s CHANGED through its registration `through`, naming
 * notices[0..n), comes from the reflector. */
static void hear_list(lm_lemuriad *c, uint32_t rank, uint32_t through,
		      struct lm_notice *notices, uint32_t n)
{
	struct lm_msg lst = msg(LM_MSG_CHANGED, RUN);

	lst.id = LM_CHANGED_ALL;
	lst.rank = rank;
	lst.version = through;
	lst.notices = notices;
	lst.nnotices = n;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &lst);
}

/* docs/dsm.md "Order": a page fetched newer than every list heard (its
 * home tags it with a registration of cluster 1 not told yet) waits: the
 * fault is not answered and the writers are asked to hurry.  A CHANGED
 * through an earlier registration does not end the wait; the one through
 * that registration names a record page the copy holds older, which is
 * fetched, and only then do both go in and the fault is answered.  A
 * page whose tags were all told goes in at once. */
static void test_shared_page_waits_for_its_writers_list(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	struct lm_notice rec = { .page = 12, .version = 4 };
	struct lm_msg m = msg(LM_MSG_PAGE, RUN), ch = msg(LM_MSG_CHANGED, RUN);
	static uint8_t data[65536];
	uint8_t tags[LM_MSG_TAG_SIZE];
	const uint32_t twelve = 12;
	const struct out *f;

	uint64_t waits;

	cache_page(c, 12, 2, 0x12); /* the record's page, held older */
	waits = lm_lemuriad_stats(c)->order_waits;
	/* a fault on the pointer's page */
	fault_answered_tagged(c, 1, 500, &m, data, tags, 9, 3, 7);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(!lm_ccopy_holds(cc, 9, 3));
	f = find_out(SENT, refl, LM_MSG_CHANGED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->m.id, LM_CHANGED_HURRY);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->order_waits, waits + 1);

	/* told through 6 only: still waiting */
	clear_outs();
	ch.id = LM_CHANGED_ALL;
	ch.rank = 1;
	ch.version = 6;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &ch);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	/* through 7, with the record's page: fetched, then all goes in */
	ch.version = 7;
	ch.notices = &rec;
	ch.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &ch);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->notices[0].page, 12);
	CU_ASSERT_EQUAL(f->notices[0].version, 4);
	CU_ASSERT(!lm_ccopy_holds(cc, 9, 3) && !lm_ccopy_holds(cc, 12, 4));
	r_pages_whole(c, f->req_id, &twelve, 1, 4);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(lm_ccopy_holds(cc, 9, 3) && lm_ccopy_holds(cc, 12, 4));

	/* a page whose tags were told: at once */
	clear_outs();
	fetch(c, 2, 501, 10);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	m.page = 10;
	m.version = 2;
	clear_outs();
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, f->req_id, &m);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(2), LM_MSG_PAGE));
	CU_ASSERT(lm_ccopy_holds(cc, 10, 2));

	/* a list that never comes: the wait ends after
	 * LM_LEMURIAD_ORDER_WAIT_MAX_US, counted, the writers asked again
	 * meanwhile (no wait is for ever) */
	lm_lemuriad_pulse(c, 9000000);
	clear_outs();
	fetch(c, 3, 502, 11);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	m.page = 11;
	lm_msg_tag_put(tags, 0, 1, 99);
	clear_outs();
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, f->req_id, &m);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(3), LM_MSG_PAGE));
	clear_outs();
	lm_lemuriad_pulse(c, 9000000 + LM_LEMURIAD_HURRY_GAP_US);
	f = find_out(SENT, refl, LM_MSG_CHANGED);
	CU_ASSERT(f && f->m.id == LM_CHANGED_HURRY);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(3), LM_MSG_PAGE));
	lm_lemuriad_pulse(c, 9000000 + LM_LEMURIAD_ORDER_WAIT_MAX_US);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(3), LM_MSG_PAGE));
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->order_late, 1);
	teardown(c);
}

/* copy = cluster, a cache of one page: a fault's answer that waits for
 * its writer's list stays cached until it goes in with the set of that
 * list, and goes in with it: the answer went into the copy once the list
 * came, the list's other page with it.  When the set's answers pushed it
 * out of the cache, the set went in without it and it was fetched again
 * (treewave with cache = 4K on 4+4+4+4, about one run in 25: a child's
 * flag from the list shown while the box the list also named, the
 * waiting answer, stayed a version behind for 23 ms). */
static void test_shared_waiting_answer_goes_in_with_its_set(void)
{
	char text[1024];
	struct lm_notice rec = { .page = 12, .version = 4 };
	struct lm_msg m = msg(LM_MSG_PAGE, RUN);
	static uint8_t data[65536];
	uint8_t tags[LM_MSG_TAG_SIZE];
	const uint32_t twelve = 12;
	const struct lm_ccopy *cc;
	const struct out *f;
	lm_lemuriad *c;

	lazy_layout_with(text, sizeof(text), "cache = 64M", "cache = 4K");
	c = setup_shared_text(text);
	cc = shared_joined(c);
	cache_page(c, 12, 2, 0x12); /* the record's page, held older */
	/* a fault on the pointer's page: its answer waits for list 7 */
	fault_answered_tagged(c, 1, 500, &m, data, tags, 9, 3, 7);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	clear_outs();
	hear_list(c, 1, 7, &rec, 1);
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->notices[0].page, 12);
	clear_outs();
	r_pages_whole(c, f->req_id, &twelve, 1, 4);
	/* both went in, and the fault is answered; nothing asked again */
	CU_ASSERT(lm_ccopy_holds(cc, 9, 3));
	CU_ASSERT(lm_ccopy_holds(cc, 12, 4));
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCH));
	CU_ASSERT(lm_lemuriad_stats(c)->cached_bytes <= layout->page_size);
	teardown(c);
}

/* page_trace.h: the story above, traced with LEMURIA_PAGE_TRACE, reads
 * in the order it happened: page 9's fault, its answer waiting, the list
 * naming 12, 12's answer, the set of both, then the fault's reply; the
 * clock never goes back.  A directory that cannot be written leaves the
 * lemuriad running untraced. */
static void test_shared_page_trace_tells_the_story(void)
{
	char dir[] = "/tmp/lm_test_trace.XXXXXX", text[96];
	char lines[64][96];
	int n, at[8];

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	setenv("LEMURIA_PAGE_TRACE", dir, 1);
	test_shared_waiting_answer_goes_in_with_its_set();
	n = trace_read(dir, lines, 64);
	at[0] = trace_line(lines, n, "fetch 9");
	at[1] = trace_line(lines, n, "answer 9 3");
	at[2] = trace_line(lines, n, "gated 9 3");
	at[3] = trace_line(lines, n, "heard 12 4");
	at[4] = trace_line(lines, n, "answer 12 4");
	at[5] = trace_line(lines, n, "set 12 4 2");
	at[6] = trace_line(lines, n, "set 9 3 2");
	at[7] = trace_line(lines, n, "reply 9 3");
	for (int i = 1; i < 5; i++)
		CU_ASSERT(at[i - 1] >= 0 && at[i] > at[i - 1]);
	/* the set's two lines, in either order, then the reply */
	CU_ASSERT(at[5] > at[4] && at[6] > at[4]);
	CU_ASSERT(at[7] > at[5] && at[7] > at[6]);

	snprintf(text, sizeof(text), "%s/gone", dir);
	setenv("LEMURIA_PAGE_TRACE", text, 1);
	test_shared_waiting_answer_goes_in_with_its_set();
	unsetenv("LEMURIA_PAGE_TRACE");
	rmdir(dir);
}

/* docs/dsm.md "Order": a fault's answer that waits for its writer's list
 * goes in with the set whatever the copy holds, so it must be as new as
 * every list heard.  Here the copy holds page 9 older than a barrier told
 * (so CHANGED alone would leave it for a fault); a fault's answer, at 5,
 * waits for registration 7 of cluster 1; that list names page 9 at 6 (a
 * record written again) and page 12 at 4 (its pointer).  The set must
 * not put 12 in beside 9 at 5: the waiting fetch is asked again for 6,
 * and both go in together (the tree before installed 9 at 5 with 12, and
 * splash2/patterns/treewave read a box older than its child's flag on
 * 4+4+4+4 in 5 runs of 6). */
static void test_shared_waiting_page_takes_newer_lists(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	struct lm_notice told = { .page = 9, .version = 4, .base = 3,
				  .writer = LM_WRITER_MANY, .wcluster = 1 };
	struct lm_notice ch[2] = { { .page = 9, .version = 6 },
				   { .page = 12, .version = 4 } };
	struct lm_msg m = msg(LM_MSG_PAGE, RUN);
	static uint8_t data[65536];
	uint8_t tags[LM_MSG_TAG_SIZE];
	const uint32_t twelve = 12;
	const struct out *f, *f9, *f12;
	uint32_t v = 0;

	cache_page(c, 9, 2, 0x09);
	cache_page(c, 12, 2, 0x12);
	barrier_release(c, 1, &told, 1);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 2);
	fault_answered_tagged(c, 1, 500, &m, data, tags, 9, 5, 7);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));

	clear_outs();
	hear_list(c, 1, 7, ch, 2);
	f9 = find_fetch_up(LM_MSG_FETCH, 9);
	f12 = find_fetch_up(LM_MSG_FETCHV, 12);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f12);
	CU_ASSERT_EQUAL(f12->notices[0].version, 4);
	/* the waiting fault's page is asked again, for the list's version */
	CU_ASSERT_PTR_NOT_NULL_FATAL(f9);
	CU_ASSERT_EQUAL(f9->m.version, 6);
	{
		uint32_t req9 = f9->req_id, req12 = f12->req_id;

		r_pages_whole(c, req12, &twelve, 1, 4);
		/* the pointer's page does not go in ahead of the record's */
		CU_ASSERT(!lm_ccopy_holds(cc, 12, 4));
		CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
		answer_tagged(c, req9, &m, data, tags, 9, 6, 7);
	}
	CU_ASSERT(lm_ccopy_holds(cc, 9, 6) && lm_ccopy_holds(cc, 12, 4));
	f = find_out(REPLIED, node_of(1), LM_MSG_PAGE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->m.version, 6);
	teardown(c);
}

/* docs/dsm.md "Order": a version a barrier told every client of speaks
 * for a page the copy lacks only when its tags were told.  The home
 * keeps an owned page's version when it takes the page back, and the
 * owner's answer holds what it wrote since, named by the tags (its list
 * through 7, with the record on page 12).  The tree before put page 9
 * in at once, being no newer than the barrier's version: a process read
 * fmm's flag (treewave's, on 4+4) before its record. */
static void test_shared_taken_back_page_waits_for_its_list(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	struct lm_notice told[2] = {
		{ .page = 9, .version = 1, .base = 0,
		  .writer = LM_WRITER_MANY, .wcluster = 1 },
		{ .page = 12, .version = 1, .base = 0,
		  .writer = LM_WRITER_MANY, .wcluster = 1 },
	};
	struct lm_notice rec = { .page = 12, .version = 2 };
	struct lm_msg m = msg(LM_MSG_PAGE, RUN);
	static uint8_t data[65536];
	uint8_t tags[LM_MSG_TAG_SIZE];
	const uint32_t twelve = 12;
	const struct out *f;

	cache_page(c, 12, 1, 0x12);
	barrier_release(c, 1, told, 2);
	fault_answered_tagged(c, 1, 500, &m, data, tags, 9, 1, 7);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(!lm_ccopy_holds(cc, 9, 1));

	clear_outs();
	hear_list(c, 1, 7, &rec, 1);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->notices[0].page, 12);
	CU_ASSERT(!lm_ccopy_holds(cc, 9, 1) && !lm_ccopy_holds(cc, 12, 2));
	r_pages_whole(c, f->req_id, &twelve, 1, 2);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(lm_ccopy_holds(cc, 9, 1) && lm_ccopy_holds(cc, 12, 2));

	/* a page the copy holds (older) has no owner elsewhere: its answer
	 * at the barrier's version goes in at once, its tags told or not
	 * (LU's faults after each barrier) */
	cache_page(c, 15, 1, 0x15);
	told[0] = (struct lm_notice){ .page = 15, .version = 2, .base = 1,
				      .writer = LM_WRITER_MANY,
				      .wcluster = 1 };
	barrier_release(c, 2, told, 1);
	CU_ASSERT(lm_ccopy_holds(cc, 15, 1) && !lm_ccopy_holds(cc, 15, 2));
	fault_answered_tagged(c, 2, 501, &m, data, tags, 15, 2, 9);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(2), LM_MSG_PAGE));
	CU_ASSERT(lm_ccopy_holds(cc, 15, 2));
	teardown(c);
}

/* Cluster 1's CHANGED names pages 9 and 10 at version 5 (cached here
 * older); the pulses fetch them and they go into the copy together. */
static void pages_9_10_changed(lm_lemuriad *c)
{
	struct lm_notice ch[2] = { { .page = 9, .version = 5 },
				   { .page = 10, .version = 5 } };
	const uint32_t pages[2] = { 9, 10 };

	r_pages_whole(c, changed_asked(c, ch, 2, 1)->req_id, pages, 2, 5);
}

/* copy = cluster, clients that handed their userfaultfds: a set goes in
 * as one (common/copy_set.h), but not a page the clients also map at the
 * executable's globals (rank 0's CREATE describes them): a client
 * reading it there could not be made to wait, and would find the page's
 * hole filled with zeros.  That one goes in in place.  `early`: the
 * CREATE is a worker's, come down from the reflector before any client
 * joined and so before the copy was made (a cluster whose processes
 * start late: their globals' GOT then read zeros, and treewave jumped to
 * address 0 under loss on 4+4+4+4). */
static void set_leaves_globals(bool early)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_globals_desc gd = {
		.lo = 0x10000, .hi = 0x10000 + layout->page_size,
		.pages = layout->base + 9 * (uint64_t)layout->page_size,
	};
	struct lm_msg cr = msg(LM_MSG_CREATE, RUN);
	uint8_t desc[LM_GLOBALS_DESC_BYTES];
	const struct lm_ccopy *cc;
	uint8_t *view;
	uint32_t v = 0;

	lm_globals_desc_put(desc, &gd);
	cr.rank = 1;
	cr.offset = 0x1234;
	cr.data = desc;
	cr.data_len = sizeof(desc);
	if (early)
		lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &cr);
	view = join_all_shared_waiting(c, RUN, NULL);
	if (!view) {
		teardown(c);
		return; /* no userfaultfd for this user: sets go page by page */
	}
	cc = lm_lemuriad_copy(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cc);
	cache_page(c, 9, 2, 0x33);
	cache_page(c, 10, 2, 0x34);
	if (!early)
		creq(c, 0, 71, &cr);
	clear_outs();
	pages_9_10_changed(c);
	CU_ASSERT(lm_ccopy_version(cc, 9, &v) && v == 5);
	CU_ASSERT(lm_ccopy_version(cc, 10, &v) && v == 5);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_sets, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_set_pages, 1); /* 10 */
	CU_ASSERT_EQUAL(view[10 * layout->page_size + 100],
			lm_ccopy_page(cc, 10)[100]);
	munmap(view, layout->shared_size);
	teardown(c);
}

static void test_shared_set_leaves_globals_in_place(void)
{
	set_leaves_globals(false);
}

static void test_shared_set_leaves_globals_created_before_copy(void)
{
	set_leaves_globals(true);
}

/* A client's write whose wake the kernel lost (common/copy_set.h,
 * lm_copy_set_wake_waiting) goes on: the lemuriad watches each client's
 * userfaultfd from the first set on, its wait descriptor says a fault
 * waits, and lm_lemuriad_readable wakes it.  The lost wake is made on
 * purpose: the page's write-protection goes without one. */
static atomic_bool late_wrote;
static uint8_t *late_view;

static void *write_late(void *arg)
{
	(void)arg;
	late_view[9 * layout->page_size + 8] = 0x5a;
	atomic_store(&late_wrote, true);
	return NULL;
}

static bool wrote_within(int ms)
{
	for (int i = 0; i < ms && !atomic_load(&late_wrote); i++)
		usleep(1000);
	return atomic_load(&late_wrote);
}

static void test_shared_lost_wake_woken(void)
{
	lm_lemuriad *c = setup_shared();
	struct uffdio_writeprotect wp = {
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};
	struct pollfd p = { .fd = lm_lemuriad_wait_fd(c), .events = POLLIN };
	pthread_t w;
	int ufd;
	uint8_t *view = join_all_shared_waiting(c, RUN, &ufd);

	if (!view) {
		teardown(c);
		return; /* no userfaultfd for this user: nothing to watch */
	}
	/* a set of two pages: the lemuriad takes the clients' descriptors */
	cache_page(c, 9, 2, 0x33);
	cache_page(c, 10, 2, 0x34);
	pages_9_10_changed(c);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_sets, 1);
	CU_ASSERT(p.fd >= 0);
	CU_ASSERT_EQUAL(poll(&p, 1, 0), 0); /* nothing waits yet */
	late_view = view;
	atomic_store(&late_wrote, false);
	view[9 * layout->page_size] = 1; /* page 9 mapped here */
	wp.range.start = (uintptr_t)view + 9 * (uint64_t)layout->page_size;
	wp.range.len = layout->page_size;
	if (ioctl(ufd, UFFDIO_WRITEPROTECT, &wp) != 0) {
		close(ufd);
		munmap(view, layout->shared_size);
		teardown(c);
		return; /* no write-protection on shared memory here */
	}
	CU_ASSERT_FATAL(pthread_create(&w, NULL, write_late, NULL) == 0);
	CU_ASSERT_EQUAL(poll(&p, 1, 2000), 1); /* the write waits */
	wp.mode = UFFDIO_WRITEPROTECT_MODE_DONTWAKE;
	CU_ASSERT(ioctl(ufd, UFFDIO_WRITEPROTECT, &wp) == 0);
	CU_ASSERT_FALSE(wrote_within(50)); /* the lost wake */
	lm_lemuriad_readable(c);
	CU_ASSERT_TRUE(wrote_within(2000));
	CU_ASSERT(lm_lemuriad_stats(c)->copy_late_wakes >= 1);
	CU_ASSERT_EQUAL(poll(&p, 1, 0), 0);
	if (!atomic_load(&late_wrote)) { /* let the thread end all the same */
		struct uffdio_range all = { (uintptr_t)view,
					    layout->shared_size };

		(void)ioctl(ufd, UFFDIO_WAKE, &all);
	}
	pthread_join(w, NULL);
	CU_ASSERT_EQUAL(view[9 * layout->page_size + 8], 0x5a);
	close(ufd);
	munmap(view, layout->shared_size);
	teardown(c);
}

/* A page fetched ahead whose writer's list has not come stays out of the
 * copy while a fault's waiting answer goes in with its set: the client's
 * FETCHV named it as a neighbour, and the answer's neighbours from the
 * cache go in only when in order themselves. */
static void test_shared_neighbour_waits_for_its_list(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	struct lm_msg m = msg(LM_MSG_PAGE, RUN), ch = msg(LM_MSG_CHANGED, RUN);
	static uint8_t data[65536];
	uint8_t tags[LM_MSG_TAG_SIZE], late[LM_MSG_TAG_SIZE];
	const uint32_t first = 30, next = 31, ask[2] = { 9, 31 };
	const struct out *f;

	/* a fault on 30 fetches 31 ahead: cached with a registration of
	 * cluster 1 nobody told us of, not in the copy */
	clear_outs();
	creq_fetchv_reach(c, 2, 600, &first, 1, 1);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	clear_outs();
	r_page(c, f->req_id, 30, 1, 0x30);
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->notices[0].page, 31);
	lm_msg_tag_put(late, 0, 1, 50);
	r_pages_tagged(c, f->req_id, &next, 1, 5, late, 1);
	CU_ASSERT(!lm_ccopy_holds(cc, 31, 5));

	/* a fault on 9 names 31 too; 9's answer waits for list 7 */
	clear_outs();
	creq_fetchv(c, 1, 601, ask, 2);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	answer_tagged(c, f->req_id, &m, data, tags, 9, 3, 7);
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	clear_outs();
	ch.id = LM_CHANGED_ALL;
	ch.rank = 1;
	ch.version = 7;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &ch);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(lm_ccopy_holds(cc, 9, 3));
	/* 31 still waits for registration 50 */
	CU_ASSERT(!lm_ccopy_holds(cc, 31, 5));
	teardown(c);
}

/* A fault on 30 fetches 31 ahead, whose answer (version 5) names
 * registration `reg` of cluster 1. */
static void neighbour_fetched(lm_lemuriad *c, uint32_t reg)
{
	const uint32_t first = 30, next = 31;
	uint8_t late[LM_MSG_TAG_SIZE];
	const struct out *f;

	clear_outs();
	creq_fetchv_reach(c, 2, 600, &first, 1, 1);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	clear_outs();
	r_page(c, f->req_id, 30, 1, 0x30);
	f = find_out(REQUESTED, refl, LM_MSG_FETCHV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(f->notices[0].page, 31);
	lm_msg_tag_put(late, 0, 1, reg);
	r_pages_tagged(c, f->req_id, &next, 1, 5, late, 1);
	clear_outs();
}

/* Cluster 1's CHANGED: it told everything through registration `reg`. */
static void told_through(lm_lemuriad *c, uint32_t reg)
{
	struct lm_msg ch = msg(LM_MSG_CHANGED, RUN);

	ch.id = LM_CHANGED_ALL;
	ch.rank = 1;
	ch.version = reg;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &ch);
}

/* The page fetched ahead keeps its tags: once its writer's list came, a
 * fault on it is answered from the cache, not fetched from the home
 * again (LU on 8+8+8+8 fetched three times as often as before the order
 * rule when it was). */
static void test_shared_neighbour_told_later_is_served_from_the_cache(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	const uint32_t next = 31;

	neighbour_fetched(c, 50);
	CU_ASSERT_FATAL(!lm_ccopy_holds(cc, 31, 5)); /* not told yet */
	told_through(c, 50);
	clear_outs();
	creq_fetchv(c, 1, 602, &next, 1);
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCH));
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCHV));
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(lm_ccopy_holds(cc, 31, 5));
	CU_ASSERT_EQUAL(lm_ccopy_page(cc, 31)[0], 31);
	teardown(c);
}

/* ... and a fault on it before the list came waits for the list, and
 * for nothing else: no second fetch. */
static void test_shared_neighbour_fault_waits_for_its_list(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	const uint32_t next = 31;

	neighbour_fetched(c, 50);
	CU_ASSERT_FATAL(!lm_ccopy_holds(cc, 31, 5));
	creq_fetchv(c, 1, 602, &next, 1);
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCH));
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCHV));
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(!lm_ccopy_holds(cc, 31, 5));
	told_through(c, 49); /* not far enough */
	CU_ASSERT_PTR_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	told_through(c, 50);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(1), LM_MSG_PAGE));
	CU_ASSERT(lm_ccopy_holds(cc, 31, 5));
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_FETCH));
	teardown(c);
}

/* A page the copy lacks, fetched ahead after its writer's list came, goes
 * into the copy as it comes when no list heard waits to go in (the set it
 * would go in with is itself alone); while a list's pages wait, it
 * waits for its fault and goes in with them. */
static void test_shared_told_page_the_copy_lacks_goes_in(void)
{
	lm_lemuriad *c = setup_shared();
	const struct lm_ccopy *cc = shared_joined(c);
	struct lm_notice n = { .page = 12, .version = 4, .base = 3,
			       .writer = LM_WRITER_MANY, .wcluster = 1 };
	struct lm_msg ch = msg(LM_MSG_CHANGED, RUN);
	static uint8_t data[65536];
	struct lm_msg m = msg(LM_MSG_PAGE, RUN);
	uint8_t tags[LM_MSG_TAG_SIZE], t2[LM_MSG_TAG_SIZE];
	const uint32_t first = 39, next = 40;
	const struct out *f, *ahead;

	told_through(c, 50);
	neighbour_fetched(c, 50); /* told already */
	CU_ASSERT(lm_ccopy_holds(cc, 31, 5));

	/* page 12, held older, is named by a list not yet fetched: a fault
	 * on 39 waits for it (39 goes in with 12), and 40, fetched ahead
	 * meanwhile, waits for its own fault */
	fault_answered_tagged(c, 2, 700, &m, data, tags, 12, 3, 50);
	CU_ASSERT_FATAL(lm_ccopy_holds(cc, 12, 3));
	ch.id = LM_CHANGED_ALL;
	ch.rank = 1;
	ch.version = 51;
	ch.notices = &n;
	ch.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &ch);
	clear_outs();
	creq_fetchv_reach(c, 2, 701, &first, 1, 1);
	f = find_out(REQUESTED, refl, LM_MSG_FETCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	clear_outs();
	r_page(c, f->req_id, 39, 1, 0x39);
	CU_ASSERT(!lm_ccopy_holds(cc, 39, 1));
	ahead = find_fetch_up(LM_MSG_FETCHV, 40);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ahead);
	lm_msg_tag_put(t2, 0, 1, 51);
	r_pages_tagged(c, ahead->req_id, &next, 1, 6, t2, 1);
	CU_ASSERT(!lm_ccopy_holds(cc, 40, 6));
	teardown(c);
}

/* copy = cluster: `page` written at version 2, registered at barrier 1
 * and granted to us at version 3, the barrier released.  Returns the id
 * of the registration that granted it. */
static uint32_t granted_page(lm_lemuriad *c, const struct lm_ccopy *cc,
			     uint32_t page)
{
	struct lm_notice n = { .page = page, .version = 3, .base = 2,
			       .writer = LM_WRITER_MANY, .wcluster = 0 };
	const struct out *reg;
	uint32_t id;

	written(c, cc, page, 2, 0x11, 0x55);
	all_arrive(c, 1);
	reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	id = reg->m.id;
	grant(c, &n, 1, &page, 1);
	CU_ASSERT_FATAL(lm_ccopy_is_owned(cc, page));
	release(c, 1);
	return id;
}

/* copy = cluster: a page taken back from us, written since we came to
 * own it, names the registration that seals what the cluster wrote
 * meanwhile, and its reader waits for that registration's list
 * (docs/dsm.md "Order"): the list goes as soon as the registration is
 * done, not after the usual delay. */
static void test_shared_recall_tells_its_registration_at_once(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_msg p = msg(LM_MSG_PULL, RUN);
	const struct lm_ccopy *cc;
	const struct out *d, *reg, *f;
	uint32_t owed;

	cc = shared_joined(c);
	(void)granted_page(c, cc, 7);
	lm_lemuriad_pulse(c, 1000000);
	written(c, cc, 8, 1, 0x22, 0x56); /* a twinned page, not yet sealed */
	lm_ccopy_page(cc, 7)[20] = 0x77; /* then the owned page */
	clear_outs();
	p.page = 7;
	p.version = 3;
	lm_lemuriad_handle(c, refl, LM_REL_REQUEST, 555, &p);
	d = find_out(REPLIED, refl, LM_MSG_DELTA);
	reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	owed = d->m.id;
	CU_ASSERT(owed != 0);
	CU_ASSERT_EQUAL(reg->m.id, owed);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_recalls_unwritten, 0);
	lm_lemuriad_pulse(c, 1000100);
	CU_ASSERT_PTR_NULL(find_out(SENT, refl, LM_MSG_CHANGED)); /* not done */
	CU_ASSERT(answer_registers(c, true, 40) == 1);
	clear_outs();
	lm_lemuriad_pulse(c, 1000200);
	f = find_out(SENT, refl, LM_MSG_CHANGED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(f->m.id, LM_CHANGED_ALL);
	CU_ASSERT(f->m.version >= owed);
	/* once: the next registration's list waits as usual */
	written(c, cc, 9, 1, 0x33, 0x57);
	all_arrive(c, 2);
	CU_ASSERT(answer_registers(c, true, 40) >= 1);
	clear_outs();
	lm_lemuriad_pulse(c, 1000300);
	CU_ASSERT_PTR_NULL(find_out(SENT, refl, LM_MSG_CHANGED));
	teardown(c);
}

/* copy = cluster: a page taken back from us that nobody wrote since we
 * came to own it needs no seal: every byte of it was read by the seal
 * whose registration granted it, with every record it can point at.  So
 * a twinned page written meanwhile stays unsealed (no REGISTER goes),
 * and the answer names the registration that carries every diff sealed
 * so far: here, with none pending, the one that granted the page, done
 * already, so its reader need not wait for a new one.  Written after the
 * recall, the page is tracked by its twin again. */
static void test_shared_unwritten_recall_needs_no_seal(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_msg p = msg(LM_MSG_PULL, RUN);
	const struct lm_ccopy *cc;
	const struct out *d, *reg;
	uint64_t seals;
	uint32_t granting;

	cc = shared_joined(c);
	granting = granted_page(c, cc, 7);
	lm_lemuriad_pulse(c, 1000000);
	written(c, cc, 8, 1, 0x22, 0x56); /* a twinned page, not yet sealed */
	seals = lm_lemuriad_stats(c)->copy_seals;
	clear_outs();
	p.page = 7;
	p.version = 3;
	lm_lemuriad_handle(c, refl, LM_REL_REQUEST, 556, &p);
	d = find_out(REPLIED, refl, LM_MSG_DELTA);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(d->m.id, granting);
	CU_ASSERT_EQUAL(delta_byte(d, 0, 0xff), 0x11); /* the whole page */
	CU_ASSERT_EQUAL(delta_byte(d, 9, 0xff), 0x55);
	CU_ASSERT_PTR_NULL(find_out(REQUESTED, refl, LM_MSG_REGISTER));
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_seals, seals);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_recalls, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_recalls_unwritten, 1);
	CU_ASSERT(!lm_ccopy_is_owned(cc, 7) && lm_ccopy_is_twinned(cc, 7));
	/* page 8's write and a write to page 7 now go with the next seal */
	lm_ccopy_page(cc, 7)[30] = 0x66;
	all_arrive(c, 2);
	reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	CU_ASSERT_EQUAL(reg->m.nnotices, 2);
	teardown(c);
}

/* copy = cluster: a recall while a registration is out names the one
 * after it, which will carry the recall's seal.  Should that seal's
 * diffs all be let go before (their page came to be owned with the
 * registration's answer, and leaves whole), the registration named
 * must still come (empty), or the recalled page's readers wait for a
 * list that never comes.  And the page granted so, whose twin bytes the
 * seal read, names that registration too when taken back unwritten,
 * not the one that granted it. */
static void test_shared_recall_names_a_registration_that_comes(void)
{
	lm_lemuriad *c = setup_shared();
	struct lm_notice n1[2] = {
		{ .page = 6, .version = 3, .base = 2,
		  .writer = LM_WRITER_MANY, .wcluster = 0 },
		{ .page = 7, .version = 3, .base = 2,
		  .writer = LM_WRITER_MANY, .wcluster = 0 },
	};
	struct lm_notice n2 = { .page = 7, .version = 4, .base = 3,
				.writer = LM_WRITER_MANY, .wcluster = 0 };
	const uint32_t q = 6, p = 7;
	const struct lm_ccopy *cc;
	const struct out *d, *reg, *f;
	uint32_t owed, reg2, reg2_id;

	cc = shared_joined(c);
	written(c, cc, q, 2, 0x10, 0x50);
	written(c, cc, p, 2, 0x11, 0x55);
	all_arrive(c, 1);
	grant(c, n1, 2, &q, 1);
	CU_ASSERT_FATAL(lm_ccopy_is_owned(cc, q));
	CU_ASSERT_FATAL(lm_ccopy_is_twinned(cc, p));
	release(c, 1);
	lm_ccopy_page(cc, p)[20] = 0x20;
	all_arrive(c, 2); /* registration 2 out, with p's diff */
	reg = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
	reg2 = reg->req_id;
	reg2_id = reg->m.id;
	lm_ccopy_page(cc, p)[21] = 0x21; /* sealed by q's recall */
	lm_ccopy_page(cc, q)[30] = 0x30;
	d = pull(c, q, 3);
	owed = d->m.id;
	CU_ASSERT(owed == reg2_id + 1);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_recalls_unwritten, 0);
	/* registration 2's answer grants p: the recall seal's diff of it,
	 * its only one, is let go */
	clear_outs();
	grant_to(c, reg2, &n2, 1, &p, 1);
	CU_ASSERT_FATAL(lm_ccopy_is_owned(cc, p));
	lm_lemuriad_pulse(c, 2000000);
	f = find_out(SENT, refl, LM_MSG_CHANGED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT(f->m.version >= owed);
	d = pull(c, p, 4);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->copy_recalls_unwritten, 1);
	CU_ASSERT_EQUAL(delta_byte(d, 21, 0xff), 0x21);
	CU_ASSERT(d->m.id >= owed);
	teardown(c);
}

LM_TEST_SUITE("release",
	LM_TEST(test_barrier_and_release),
	LM_TEST(test_release_carries_updates),
	LM_TEST(test_release_goes_out_a_client_at_a_time),
	LM_TEST(test_release_puts_off_a_bounded_number),
	LM_TEST(test_put_off_message_keeps_its_own_copy),
	LM_TEST(test_release_no_update_without_exact_copy),
	LM_TEST(test_held_release_too_old_then_abort),
	LM_TEST(test_fetchv_pages_as_diffs),
	LM_TEST(test_neighbour_pages_get_no_updates),
	LM_TEST(test_release_updates_off),
	LM_TEST(test_shared_release_leaves_out_held_notices),
	LM_TEST(test_shared_owned_pages),
	LM_TEST(test_shared_grant_after_pull_refused),
	LM_TEST(test_shared_stale_pages_forgotten),
	LM_TEST(test_shared_idle_twins_kept_until_they_cost),
	LM_TEST(test_shared_quiet_cluster_publishes),
	LM_TEST(test_shared_changed_fetches_into_copy),
	LM_TEST(test_shared_changed_waits_out_a_barrier),
	LM_TEST(test_shared_changed_pages_go_in_together),
	LM_TEST(test_shared_changed_page_fetched_ahead_is_asked_alone),
	LM_TEST(test_shared_changed_set_larger_than_the_cache),
	LM_TEST(test_shared_changed_page_badly_answered_is_asked_again),
	LM_TEST(test_shared_page_waits_for_its_writers_list),
	LM_TEST(test_shared_waiting_answer_goes_in_with_its_set),
	LM_TEST(test_shared_page_trace_tells_the_story),
	LM_TEST(test_shared_waiting_page_takes_newer_lists),
	LM_TEST(test_shared_taken_back_page_waits_for_its_list),
	LM_TEST(test_shared_set_leaves_globals_in_place),
	LM_TEST(test_shared_set_leaves_globals_created_before_copy),
	LM_TEST(test_shared_lost_wake_woken),
	LM_TEST(test_shared_neighbour_waits_for_its_list),
	LM_TEST(test_shared_recall_tells_its_registration_at_once),
	LM_TEST(test_shared_unwritten_recall_needs_no_seal),
	LM_TEST(test_shared_recall_names_a_registration_that_comes),
	LM_TEST(test_shared_neighbour_told_later_is_served_from_the_cache),
	LM_TEST(test_shared_neighbour_fault_waits_for_its_list),
	LM_TEST(test_shared_told_page_the_copy_lacks_goes_in))
