/* The lemuriad state machine driven by hand (tests/lemuriad_util.h):
 * lemuriad/locks.c: tokens relayed, kept and handed off locally, recalls
 * with their bound and their wait for fresh clients, local GRANTs that
 * pass on every notice of the epoch. */
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
#include "wire.h"

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

/* page_trace.h: a lock's way through the cluster, traced: rank 1 asks
 * and the token comes; rank 2 waits; the manager recalls it; rank 1
 * unlocks and rank 2 gets it (a hand-off left before it goes back); rank
 * 2 unlocks and the token returns, in the name of the rank the manager
 * granted it to. */
static void test_lock_path_traced(void)
{
	char dir[] = "/tmp/lm_test_trace.XXXXXX", lines[32][96];
	const char *story[] = { "lock 5 0 1", "token 5 0 1", "grant 5 0 1",
				"lock 5 0 2", "recall 5", "unlock 5 0 1",
				"grant 5 0 2", "unlock 5 0 2", "return 5 0 1" };
	lm_lemuriad *c;
	int n, at, last = -1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	setenv("LEMURIA_PAGE_TRACE", dir, 1);
	c = setup();
	unsetenv("LEMURIA_PAGE_TRACE");
	join_all(c, RUN);
	token_arrives(c, 5);
	lock_req(c, 2, 401, 5);
	recall(c, 5, 1);
	unlock_req(c, 1, 402, 5);
	unlock_req(c, 2, 403, 5);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->tokens_returned, 1);
	teardown(c);
	n = trace_read(dir, lines, 32);
	for (size_t i = 0; i < sizeof(story) / sizeof(*story); i++) {
		at = trace_line(lines, n, story[i]);
		CU_ASSERT(at > last);
		last = at;
	}
	rmdir(dir);
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

/* Rank `rank` asks for lock `id`, which the manager grants (req_id, the
 * client's request). */
static void granted_lock(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
			 uint32_t id)
{
	struct lm_msg g = msg(LM_MSG_GRANT, RUN);
	const struct out *o;

	clear_outs();
	lock_op(c, LM_MSG_LOCK, rank, req_id, id);
	o = find_out(REQUESTED, refl, LM_MSG_LOCK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	g.id = id;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, o->req_id, &g);
	CU_ASSERT_PTR_NOT_NULL(find_out(REPLIED, node_of(rank), LM_MSG_GRANT));
	clear_outs();
}

/* Two ranks of one cluster that each hold the lock the other asks for:
 * two ticks after, the run ends naming both waits (issue 42: it waited
 * for --timeout); one tick is not enough (a wait that ends soon is no
 * cycle). */
static void test_local_lock_cycle_ends_the_run(void)
{
	lm_lemuriad *c = setup();
	const struct out *a;
	char reason[512];

	join_all(c, RUN);
	granted_lock(c, 1, 60, 12);
	granted_lock(c, 2, 61, 13);
	lock_op(c, LM_MSG_LOCK, 1, 62, 13);
	lock_op(c, LM_MSG_LOCK, 2, 63, 12);
	CU_ASSERT_EQUAL(nouts, 0); /* both tokens here: queued */
	lm_lemuriad_tick(c);
	CU_ASSERT_PTR_NULL(find_out(SENT, refl, LM_MSG_ABORT));
	lm_lemuriad_tick(c);
	a = find_out(SENT, refl, LM_MSG_ABORT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	snprintf(reason, sizeof(reason), "%.*s", (int)a->m.data_len,
		 (const char *)a->data);
	CU_ASSERT_PTR_NOT_NULL(strstr(reason, "locks taken in a cycle: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(reason, "rank 1 waits for lock 13, "
				      "held by rank 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(reason, "rank 2 waits for lock 12, "
				      "held by rank 1"));
	teardown(c);
}

/* A PROBE from lock 12's manager: its holder here waits for lock 20,
 * whose token is elsewhere, so the chain goes up with that link; one
 * that comes back to a rank still in the wait it started from ends the
 * run; one whose first wait has ended (another request) does not. */
static void test_probe_follows_the_chain(void)
{
	lm_lemuriad *c = setup();
	struct lm_msg p = msg(LM_MSG_PROBE, RUN);
	uint8_t chain[16];
	const struct out *o;

	join_all(c, RUN);
	granted_lock(c, 1, 60, 12);
	lock_op(c, LM_MSG_LOCK, 1, 64, 20); /* goes up: token elsewhere */
	clear_outs();
	lm_put32(chain, 5);
	lm_put32(chain + 4, 12);
	p.id = 12;
	p.rank = 1;
	p.version = 900;
	p.data = chain;
	p.data_len = 8;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &p);
	o = find_out(SENT, refl, LM_MSG_PROBE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL(o->m.id, 20);
	CU_ASSERT_EQUAL(o->m.version, 900);
	CU_ASSERT_EQUAL_FATAL(o->m.data_len, 16);
	CU_ASSERT(lm_get32(o->data) == 5 && lm_get32(o->data + 4) == 12 &&
		  lm_get32(o->data + 8) == 1 && lm_get32(o->data + 12) == 20);
	/* back at the first rank, in another wait: nothing */
	clear_outs();
	lm_put32(chain, 1);
	lm_put32(chain + 4, 20);
	lm_put32(chain + 8, 5);
	lm_put32(chain + 12, 12);
	p.data_len = 16;
	p.version = 999;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &p);
	CU_ASSERT_EQUAL(nouts, 0);
	/* in the same wait: the run ends */
	p.version = 64;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &p);
	o = find_out(SENT, refl, LM_MSG_ABORT);
	CU_ASSERT_PTR_NOT_NULL(o);
	/* a chain of no link is refused */
	teardown(c);
	c = setup();
	join_all(c, RUN);
	p.data_len = 0;
	p.data = NULL;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &p);
	CU_ASSERT_PTR_NULL(find_out(SENT, refl, LM_MSG_PROBE));
	teardown(c);
}

/* copy = cluster: a client's UNLOCK comes one-way (what it wrote is in
 * the cluster's copy; it does not wait).  The lock is handed to the
 * next local waiter at once and nothing answers the UNLOCK; one of a
 * lock the rank does not hold is counted and dropped.  Under copy =
 * client an UNLOCK must be a request (its FLUSH is answered first). */
static void unlock_oneway(lm_lemuriad *c, uint32_t rank, uint32_t id)
{
	struct lm_msg m = msg(LM_MSG_UNLOCK, RUN);

	m.id = id;
	m.rank = rank;
	lm_lemuriad_handle(c, node_of(rank), LM_REL_ONEWAY, 0, &m);
}

static void test_oneway_unlock_under_one_copy(void)
{
	lm_lemuriad *c = setup_shared();
	uint64_t bad;

	join_all_shared(c, RUN);
	token_arrives(c, 3);
	lock_req(c, 2, 301, 3);
	CU_ASSERT_EQUAL(nouts, 0); /* rank 1 holds it: rank 2 waits */
	unlock_oneway(c, 1, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 1); /* the GRANT, no UNLOCK_OK */
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].node, node_of(2));
	CU_ASSERT_EQUAL(outs[0].req_id, 301);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_GRANT);
	clear_outs();
	bad = lm_lemuriad_stats(c)->dropped_bad;
	unlock_oneway(c, 3, 3); /* rank 3 does not hold it */
	CU_ASSERT_EQUAL(nouts, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, bad + 1);
	unlock_oneway(c, 2, 3);
	lock_req(c, 3, 302, 3); /* free again: granted at once */
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_GRANT);
	CU_ASSERT_EQUAL(outs[0].req_id, 302);
	teardown(c);

	c = setup();
	join_all(c, RUN);
	token_arrives(c, 3);
	lock_req(c, 2, 301, 3);
	bad = lm_lemuriad_stats(c)->dropped_bad;
	unlock_oneway(c, 1, 3);
	CU_ASSERT_EQUAL(nouts, 0); /* refused: rank 2 still waits */
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, bad + 1);
	unlock_req(c, 1, 302, 3);
	CU_ASSERT(nouts >= 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK_OK);
	teardown(c);
}

LM_TEST_SUITE("locks",
	LM_TEST(test_lock_grant_unlock_relay),
	LM_TEST(test_recalled_token_waits_for_a_fresh_client),
	LM_TEST(test_fresh_wait_ends_after_its_ticks),
	LM_TEST(test_lock_token_handed_off_locally),
	LM_TEST(test_lock_path_traced),
	LM_TEST(test_local_grant_passes_on_what_other_grants_named),
	LM_TEST(test_recalled_token_bounded_handoffs),
	LM_TEST(test_grant_after_leave_returns_lock),
	LM_TEST(test_local_lock_cycle_ends_the_run),
	LM_TEST(test_probe_follows_the_chain),
	LM_TEST(test_oneway_unlock_under_one_copy))
