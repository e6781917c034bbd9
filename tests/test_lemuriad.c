/* The lemuriad state machine driven by hand (tests/lemuriad_util.h):
 * lemuriad/lemuriad.c, the dispatcher: JOIN and runs, FLUSH, barriers
 * counted, ALLOC/FREE relays, CREATE/END routing, LEAVE, lost peers,
 * ABORT both ways and bad input dropped. */
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
	lm_lemuriad_peer_lost(c, node_of(2), NULL);
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
	lm_lemuriad_peer_lost(c, refl, NULL);
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
	for (size_t i = 0; i < nouts; i++) {
		CU_ASSERT_EQUAL(outs[i].how, SENT);
		CU_ASSERT_EQUAL(outs[i].m.type, LM_MSG_ABORT);
		CU_ASSERT_EQUAL(outs[i].m.rank, LM_LEMURIAD_ABORT_REFLECTOR);
		/* the reflector by name and address (setup's layout) */
		CU_ASSERT(outs[i].m.data_len ==
				  strlen("reflector r0 at 127.0.0.1:17500 lost") &&
			  memcmp(outs[i].data,
				 "reflector r0 at 127.0.0.1:17500 lost",
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
	lm_lemuriad_peer_lost(c, node_of(3), NULL);
	CU_ASSERT_EQUAL(nouts, 0);
	fetch(c, 0, 103, 0);
	CU_ASSERT_EQUAL(nouts, 1);
	teardown(c);
}

/* A barrier after a client left the run can never complete (every rank
 * takes part in every barrier): the first arrival ends the run at once,
 * here and (through the reflector) everywhere, naming the barrier, the
 * rank gone and the rank that waits (issue 42). */
static void test_barrier_after_a_leave_ends_the_run(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg l = msg(LM_MSG_LEAVE, RUN);
	const char *want = "barrier 7 can never complete: rank 3 left the run";
	bool up = false, told = false;

	join_all(c, RUN);
	creq(c, 3, 101, &l);
	clear_outs();
	barrier(c, 0, 7);
	for (size_t i = 0; i < nouts; i++) {
		const struct out *o = &outs[i];

		if (o->m.type != LM_MSG_ABORT || !o->data)
			continue;
		CU_ASSERT(memmem(o->data, o->m.data_len, want,
				 strlen(want)) != NULL);
		CU_ASSERT(memmem(o->data, o->m.data_len, "rank 0 waits",
				 strlen("rank 0 waits")) != NULL);
		if (o->node == refl)
			up = true;
		else
			told = true;
	}
	CU_ASSERT(up);   /* the reflector ends it everywhere */
	CU_ASSERT(told); /* the clients here hear why */
	teardown(c);
}

/* Two ranks of a cluster in different barriers: neither can complete
 * (every rank takes part in every barrier), so the second arrival ends
 * the run, naming both barriers and both ranks (issue 42).  The last of
 * a cluster's ranks to leave tells the reflector (GONE), with its rank. */
static void test_ranks_in_two_barriers_end_the_run(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg l = msg(LM_MSG_LEAVE, RUN);
	const char *want = "barriers 7 and 8 are waited in at once (rank 1 "
			   "in 7, rank 2 in 8)";
	bool up = false, gone = false;

	join_all(c, RUN);
	clear_outs();
	barrier(c, 1, 7);
	CU_ASSERT_EQUAL(nouts, 0);
	barrier(c, 2, 8);
	for (size_t i = 0; i < nouts; i++) {
		const struct out *o = &outs[i];

		if (o->m.type == LM_MSG_ABORT && o->node == refl && o->data)
			up = memmem(o->data, o->m.data_len, want,
				    strlen(want)) != NULL;
	}
	CU_ASSERT(up);
	teardown(c);

	c = setup();
	join_all(c, RUN);
	clear_outs();
	for (uint32_t r = 0; r < 4; r++) {
		CU_ASSERT(!gone);
		creq(c, r, 101 + r, &l);
		for (size_t i = 0; i < nouts; i++)
			if (outs[i].m.type == LM_MSG_GONE &&
			    outs[i].node == refl) {
				CU_ASSERT_EQUAL(r, 3);
				CU_ASSERT_EQUAL(outs[i].m.rank, 3);
				gone = true;
			}
		clear_outs();
	}
	CU_ASSERT(gone);
	teardown(c);
}

/* The same when the others are in the barrier first: the LEAVE ends the
 * run (after its LEAVE_OK: the client that left may go). */
static void test_leave_during_a_barrier_ends_the_run(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg l = msg(LM_MSG_LEAVE, RUN);
	const char *want = "barrier 7 can never complete: rank 3 left the run";
	bool up = false, left_ok = false;

	join_all(c, RUN);
	clear_outs();
	barrier(c, 0, 7);
	barrier(c, 1, 7);
	barrier(c, 2, 7);
	CU_ASSERT_EQUAL(nouts, 0);
	creq(c, 3, 101, &l);
	for (size_t i = 0; i < nouts; i++) {
		const struct out *o = &outs[i];

		if (o->m.type == LM_MSG_LEAVE_OK)
			left_ok = !up; /* before the ABORT went up */
		if (o->m.type == LM_MSG_ABORT && o->node == refl && o->data) {
			CU_ASSERT(memmem(o->data, o->m.data_len, want,
					 strlen(want)) != NULL);
			up = true;
		}
	}
	CU_ASSERT(left_ok);
	CU_ASSERT(up);
	teardown(c);
}

/* A rank that left its run and joins it again is a new process under a
 * run id used before (the namespaces test once gave two runs one id
 * when both began within a second): its JOIN is refused with an ABORT
 * that says so, where the daemons used to take both runs for one; a
 * new run id is served as ever. */
static void test_join_after_leave_refused(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg l = msg(LM_MSG_LEAVE, RUN);
	const char *want = "rank 3 already joined run";
	const struct out *o;

	join_all(c, RUN);
	creq(c, 3, 101, &l);
	clear_outs();
	join(c, 3, RUN);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	o = &outs[0];
	CU_ASSERT_EQUAL(o->m.type, LM_MSG_ABORT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o->data);
	CU_ASSERT(memmem(o->data, o->m.data_len, want, strlen(want)) != NULL);
	CU_ASSERT(memmem(o->data, o->m.data_len, "an id of its own",
			 strlen("an id of its own")) != NULL);
	clear_outs();
	join(c, 3, RUN + 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_JOIN_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
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

LM_TEST_SUITE("lemuriad",
	LM_TEST(test_join),
	LM_TEST(test_create_rejects_unknown_name),
	LM_TEST(test_flush_applies_and_keeps_delta),
	LM_TEST(test_barrier_counts_each_client_once),
	LM_TEST(test_alloc_free_relay),
	LM_TEST(test_create_routing),
	LM_TEST(test_create_kept_is_freed),
	LM_TEST(test_end_and_wait_end),
	LM_TEST(test_newer_run_resets),
	LM_TEST(test_peer_lost_client_aborts),
	LM_TEST(test_peer_lost_reflector_aborts),
	LM_TEST(test_leave_forgets_client),
	LM_TEST(test_barrier_after_a_leave_ends_the_run),
	LM_TEST(test_leave_during_a_barrier_ends_the_run),
	LM_TEST(test_ranks_in_two_barriers_end_the_run),
	LM_TEST(test_join_after_leave_refused),
	LM_TEST(test_abort_relayed_both_ways),
	LM_TEST(test_bad_input_dropped))
