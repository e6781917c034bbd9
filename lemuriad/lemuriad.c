/* lemuriad protocol layer: the state machine of role L in docs/dsm.md,
 * which never touches a socket.  This file is its top: creation, runs,
 * the routing of every message to the part that handles it, and what
 * the clients ask that no part below owns (JOIN, LEAVE, FLUSH, BARRIER,
 * ALLOC/FREE, CREATE, WAIT_WORK, END, WAIT_END, ABORT).  The parts below
 * it, and what they share, are listed in lemuriad_int.h.
 *
 * Readings of docs/dsm.md where it leaves a choice (simplest that keeps
 * DESIGN.md I1-I5):
 *  - A message from the reflector with a newer run also starts that run
 *    (a CREATE for a worker may reach us before the worker's JOIN); from a
 *    client only JOIN does.
 *  - ABORT (lost peer, or an ABORT from the reflector or a client) goes to
 *    every joined client of the run, waiting or not: a superset of the
 *    waiting ones, so none is left blocked.  The run then stays aborted
 *    until a JOIN with a newer run.
 *  - WAIT_END{n} consumes n ENDs, so create/wait cycles can repeat.
 *  - Forwarded ranks (LOCK, UNLOCK, END) are the sender's rank, taken from
 *    its node id, not what the message claims.
 *  - A client's CREATE for rank 0 or a rank beyond the layout is answered
 *    CREATE_OK{LM_EINVAL} and not forwarded.
 *  - One CREATE is kept per worker until its WAIT_WORK; a second one is
 *    dropped and counted.
 *  - A client's diffs join the page's delta with the sender's rank as
 *    writer (the one the home's notices name), taken from its node id
 *    like LOCK's. */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "deltas.h"
#include "diff.h"
#include "lm_error.h"
#include "log.h"
#include "udp.h"
#include "updates.h"

/* Client requests that may wait on the reflector at once, per client
 * (I5: a client that floods us cannot grow our lists without bound). */
#define LM_LEMURIAD_WAITS_PER_CLIENT 64u

static void free_client_work(struct client *cl)
{
	free(cl->work_data);
	free(cl->work_notices);
	cl->work_data = NULL;
	cl->work_notices = NULL;
	cl->work_len = 0;
	cl->work_nnotices = 0;
	cl->has_work = false;
}

/* Discards all state of the current run (pages, waits, barrier, ENDs,
 * locks) and starts `run`.  Counters stay. */
static void reset_run(lm_lemuriad *c, uint64_t run)
{
	if (run != c->run)
		lm_copy_end_run(c); /* the next run's first JOIN makes its
				       own copy */
	lm_cache_clear(c);
	while (c->ups) {
		struct upreq *up = c->ups;

		c->ups = up->next;
		lm_upreq_free_waiters(c, up->waiters);
		free(up->batch);
		free(up);
	}
	memset(c->up_by_id, 0, LM_LEMURIAD_UP_BUCKETS * sizeof(*c->up_by_id));
	memset(c->up_by_page, 0,
	       LM_LEMURIAD_UP_BUCKETS * sizeof(*c->up_by_page));
	for (uint32_t i = 0; i < c->nclients; i++) {
		free_client_work(&c->clients[i]);
		memset(&c->clients[i], 0, sizeof(c->clients[i]));
	}
	lm_deltas_reset(c->deltas);
	lm_release_clear(c);
	lm_release_free_deferred(c);
	if (c->updates)
		lm_updates_reset(c->updates);
	memset(c->known, 0, c->npages * sizeof(*c->known));
	memset(c->told_all, 0, c->npages * sizeof(*c->told_all));
	for (uint32_t i = 0; i < c->nchg; i++)
		c->chg_want[c->chg_list[i]] = 0;
	c->nchg = 0;
	lm_fetch_group_clear(c);
	lm_changes_clear(c);
	lm_order_clear(c);
	c->released_us = 0;
	c->released = false;
	c->client_us = 0;
	c->client_spoke = false;
	memset(c->leaving, 0, c->npages);
	lm_park_clear(c);
	c->barrier_up = false;
	c->rounds = 0;
	c->someone_left = false;
	c->gathering = false;
	c->ends = 0;
	free(c->end_notices);
	c->end_notices = NULL;
	c->end_nnotices = 0;
	lm_locks_clear(c);
	lm_notices_epoch_end(c);
	c->run = run;
	c->active = false;
	c->aborted = false;
}

/* Answers every client request still waiting here with `m` (an ABORT):
 * a client blocked in a call does not read one-way messages, and must not
 * wait for an answer the aborted run will never give. */
static void answer_waiting(lm_lemuriad *c, const struct lm_msg *m,
			   uint16_t skip)
{
	for (uint32_t i = 0; i < c->nclients; i++) {
		struct client *cl = &c->clients[i];
		uint16_t node = slot_node(c, (int)i);

		if (node == skip)
			continue;
		if (cl->at_barrier)
			c->out.reply(c->ctx, node, cl->barrier_req, m);
		if (cl->wants_work)
			c->out.reply(c->ctx, node, cl->work_req, m);
		if (cl->wants_end)
			c->out.reply(c->ctx, node, cl->end_req, m);
	}
	for (struct upreq *up = c->ups; up; up = up->next)
		for (struct waiter *w = up->waiters; w; w = w->next)
			if (w->node != skip)
				c->out.reply(c->ctx, w->node, w->req_id, m);
	lm_locks_answer_waiting(c, m, skip);
	lm_park_answer_waiting(c, m, skip);
}

/* Sends ABORT{rank, reason} to every joined client but `skip`, then drops
 * the run.  The run id stays so that its late messages are dropped. */
static void abort_run(lm_lemuriad *c, uint32_t rank, const char *reason,
		      int skip)
{
	struct lm_msg a;

	if (!c->active || c->aborted) {
		/* nobody to tell; the copies came from a home now gone */
		lm_cache_clear(c);
		return;
	}
	lm_log_warn("cluster %s: run %llu aborted: %s", c->cfg->name,
		    (unsigned long long)c->run, reason);
	msg_init(c, &a, LM_MSG_ABORT);
	a.rank = rank;
	a.data = (const uint8_t *)reason;
	a.data_len = strlen(reason);
	for (uint32_t i = 0; i < c->nclients; i++)
		if ((int)i != skip && c->clients[i].joined)
			c->out.send(c->ctx, slot_node(c, (int)i), &a);
	answer_waiting(c, &a, skip >= 0 ? slot_node(c, skip) : 0);
	reset_run(c, c->run);
	c->aborted = true;
}

/* Something of the run was lost here (no memory to keep a message or
 * notices, deltas refused): a worker, a WAIT_END or a lock's next holder
 * would wait for it for ever, or read stale data, so the run ends at
 * once, everywhere, naming the cause. */
static void lose_run(lm_lemuriad *c, const char *why)
{
	char reason[LM_MSG_REASON_MAX];
	struct lm_msg a;

	snprintf(reason, sizeof(reason), "lemuriad %s: %s", c->cfg->name,
		 why);
	lm_log_error("cluster %s: %s", c->cfg->name, reason);
	if (c->active && !c->aborted) {
		msg_init(c, &a, LM_MSG_ABORT);
		a.rank = LM_LEMURIAD_ABORT_REFLECTOR;
		a.data = (const uint8_t *)reason;
		a.data_len = strlen(reason);
		c->out.send(c->ctx, c->reflector, &a);
	}
	abort_run(c, LM_LEMURIAD_ABORT_REFLECTOR, reason, -1);
}

/* ---- messages from clients ----------------------------------------- */

static void handle_join(lm_lemuriad *c, int slot, uint16_t from,
			enum lm_rel_msg_kind kind, uint32_t req_id,
			const struct lm_msg *m)
{
	struct lm_msg r;
	int32_t status = 0;

	if (kind != LM_REL_REQUEST) {
		count_bad(c, from, m, "JOIN not a request");
		return;
	}
	if (m->run < c->run) {
		c->stats.dropped_stale_run++;
		return;
	}
	if (slot_rank(c, slot) != m->rank)
		status = LM_EINVAL; /* not this node's rank of our cluster */
	else if (m->layout_hash != c->layout_hash)
		status = LM_EINVAL;
	else if (m->run == c->run && c->aborted)
		status = LM_ECLOSED;
	if (status) {
		lm_log_info("cluster %s: JOIN of rank %u from node %u "
			    "refused: %s", c->cfg->name, m->rank, from,
			    lm_strerror(status));
		msg_init(c, &r, LM_MSG_JOIN_OK);
		r.run = m->run;
		r.status = status;
		c->out.reply(c->ctx, from, req_id, &r);
		return;
	}
	if (m->run == c->run && c->clients[slot].left) {
		/* a new process under a run id that was used before: the two
		 * runs would mix (the daemons take it for one run, whose rank
		 * has finished), so it is refused, saying why */
		char why[160];

		snprintf(why, sizeof(why), "rank %u already joined run "
			 "%llu and left it: every run needs an id of its "
			 "own (lemuria-run --run)", m->rank,
			 (unsigned long long)m->run);
		lm_log_warn("cluster %s: JOIN refused: %s", c->cfg->name, why);
		msg_init(c, &r, LM_MSG_ABORT);
		r.run = m->run;
		r.rank = m->rank;
		r.data = (const uint8_t *)why;
		r.data_len = strlen(why);
		c->out.reply(c->ctx, from, req_id, &r);
		return;
	}
	if (m->run > c->run) {
		if (c->active)
			lm_log_info("cluster %s: run %llu replaces "
				    "%llu", c->cfg->name,
				    (unsigned long long)m->run,
				    (unsigned long long)c->run);
		reset_run(c, m->run);
	}
	/* the run's copy, made at its first JOIN (the run may have begun
	 * here with a message from the reflector) */
	if (c->shared && c->copy.fd < 0 && (status = lm_copy_start(c)) != 0) {
		reply_status(c, from, req_id, LM_MSG_JOIN_OK, status);
		return;
	}
	/* copy = cluster: the client maps our copy, handed over before it
	 * hears that it joined; one we cannot reach (another host, another
	 * network or pid namespace) fails its lm_init, naming the key */
	if (c->shared &&
	    (status = lm_copy_give(c, slot, m->pid, m->data,
				   m->data_len)) != 0) {
		reply_status(c, from, req_id, LM_MSG_JOIN_OK, status);
		return;
	}
	c->clients[slot].joined = true;
	c->clients[slot].pid = m->pid;
	c->active = true;
	reply_status(c, from, req_id, LM_MSG_JOIN_OK, 0);
}

/* Checks every entry of a diff list: 0 or LM_EBADMSG. */
static int flush_validate(const lm_lemuriad *c, const struct lm_msg_diffs *d)
{
	size_t pos = 0;
	uint32_t page;
	const uint8_t *diff;
	size_t len;
	int r;

	while ((r = lm_msg_diffs_next(d, &pos, &page, &diff, &len)) == 1)
		if (page >= c->npages ||
		    lm_diff_validate(diff, len, c->page_size) < 0)
			return LM_EBADMSG;
	return r < 0 ? LM_EBADMSG : 0;
}

static void handle_flush(lm_lemuriad *c, int slot, uint16_t from,
			 uint32_t req_id, const struct lm_msg *m)
{
	size_t pos = 0;
	uint32_t page;
	const uint8_t *diff;
	size_t len;

	/* all or nothing: a bad list changes no copy and never goes home */
	if (flush_validate(c, &m->diffs) < 0) {
		count_bad(c, from, m, "malformed diff list");
		reply_status(c, from, req_id, LM_MSG_FLUSH_OK, LM_EBADMSG);
		return;
	}
	/* the copy keeps its version: it now holds more than that version,
	 * so the next notice for the page still invalidates it (I3) unless
	 * it names us as the only cluster that wrote it.  The diffs join
	 * the page's open delta, which goes up (registered, or with its
	 * data) before anything the client publishes later (I2); a reply
	 * still on its way gets them from the delta. */
	while (lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) == 1) {
		struct lm_delta *w = NULL;

		if (c->updates) {
			/* a refused mask only costs this epoch its updates */
			w = lm_updates_writer_mask(c->updates, page,
						   (uint32_t)slot);
			lm_updates_hold(c->updates, (uint32_t)slot, page);
		}
		if (lm_cache_take_diff(c, page, slot_rank(c, slot), w, diff,
				       len) != 0) {
			lm_log_error("cluster %s: no memory for a delta of "
				     "page %u", c->cfg->name, page);
			reply_status(c, from, req_id, LM_MSG_FLUSH_OK,
				     LM_ENOMEM);
			return;
		}
	}
	c->stats.flushes++;
	reply_status(c, from, req_id, LM_MSG_FLUSH_OK, 0);
	lm_park_keep_budget(c);
}

/* Every rank takes part in every barrier: barrier `id` waits for rank
 * left_rank, which is gone, for ever.  The run ends at once, naming who
 * waits for what (issue 42); `slot` is the client that just arrived, or
 * -1 when the others were there first. */
static void barrier_never_completes(lm_lemuriad *c, uint32_t id, int slot)
{
	char why[160], waits[32];

	if (slot >= 0)
		snprintf(waits, sizeof(waits), "rank %u waits in it",
			 slot_rank(c, slot));
	else
		snprintf(waits, sizeof(waits), "others wait in it");
	snprintf(why, sizeof(why), "barrier %u can never complete: rank %u "
		 "left the run (lm_finalize or exit) before reaching it, and "
		 "%s", id, c->left_rank, waits);
	lose_run(c, why);
}

/* The last of our ranks left the run (client `slot`): the reflectors
 * learn it (GONE), so that a barrier other clusters wait in, which we
 * never reached, ends the run instead of waiting for ever (issue 42). */
static void tell_if_all_left(lm_lemuriad *c, int slot)
{
	struct lm_msg g;

	for (uint32_t i = 0; i < c->nclients; i++)
		if (!c->clients[i].left)
			return;
	msg_init(c, &g, LM_MSG_GONE);
	g.rank = slot_rank(c, slot);
	c->out.send(c->ctx, c->reflector, &g);
}

/* Two of our ranks wait in different barriers (`other` in its own,
 * `slot` in `id`): every rank takes part in every barrier, so neither
 * can complete; the run ends at once naming both (issue 42). */
static void barriers_apart(lm_lemuriad *c, uint32_t other, int slot,
			   uint32_t id)
{
	char why[200];

	snprintf(why, sizeof(why), "barriers %u and %u are waited in at once "
		 "(rank %u in %u, rank %u in %u): every rank takes part in "
		 "every barrier, so neither can complete",
		 c->clients[other].barrier_id, id, slot_rank(c, (int)other),
		 c->clients[other].barrier_id, slot_rank(c, slot), id);
	lose_run(c, why);
}

/* Whether barrier `id`, which a rank of ours waits in, has not been
 * released here yet (its RELEASE may be held for fetches meanwhile). */
static bool barrier_unreleased(const lm_lemuriad *c, uint32_t id)
{
	return (c->gathering && c->gathering_id == id) ||
	       (c->barrier_up && c->barrier_up_id == id);
}

/* A lock held here by a rank that waits in a barrier not released yet,
 * while another rank waits for the lock: the waiter never reaches the
 * barrier and the holder never unlocks, so the run ends at once naming
 * them (issue 42; it waited for --timeout).  A waiter of ours asked
 * outside barriers, so before this one could complete.  A waiter of
 * another cluster is known by the manager's RECALL, with the round it
 * asked in: one that asked after this barrier completed elsewhere (its
 * RELEASE still on its way here) counts a later round and is no
 * deadlock; one of this round or earlier is.  Checked when a rank
 * arrives at a barrier, asks for a lock, or a recall comes. */
static void lock_held_in_barrier(lm_lemuriad *c)
{
	char who[64], why[256];

	for (size_t i = 0; i < c->ntokens && !c->aborted; i++) {
		const struct token *t = &c->tokens[i];
		uint32_t slot = t->holder - c->cfg->first_rank;

		if (!t->here || !t->busy ||
		    (!t->nq && !(t->recalled && t->recall_round <= c->rounds)) ||
		    t->holder < c->cfg->first_rank || slot >= c->nclients ||
		    !c->clients[slot].at_barrier ||
		    !barrier_unreleased(c, c->clients[slot].barrier_id))
			continue;
		if (t->nq)
			snprintf(who, sizeof(who), "rank %u", t->q[0].rank);
		else
			snprintf(who, sizeof(who), "a rank of another cluster");
		snprintf(why, sizeof(why), "lock %u: %s waits for it, and rank "
			 "%u holds it while it waits in barrier %u, which the "
			 "waiter never reaches: neither can go on", t->id, who,
			 t->holder, c->clients[slot].barrier_id);
		lose_run(c, why);
		return;
	}
}

static void handle_barrier(lm_lemuriad *c, int slot, uint16_t from,
			   uint32_t req_id, const struct lm_msg *m)
{
	struct client *cl = &c->clients[slot];
	uint32_t arrived = 0;

	if (cl->at_barrier) {
		count_bad(c, from, m, "second BARRIER while waiting");
		return;
	}
	if (c->someone_left) {
		barrier_never_completes(c, m->id, slot);
		return;
	}
	for (uint32_t i = 0; i < c->nclients; i++)
		if (c->clients[i].at_barrier &&
		    c->clients[i].barrier_id != m->id) {
			barriers_apart(c, i, slot, m->id);
			return;
		}
	cl->at_barrier = true;
	cl->barrier_id = m->id;
	cl->barrier_req = req_id;
	for (uint32_t i = 0; i < c->nclients; i++)
		if (c->clients[i].at_barrier &&
		    c->clients[i].barrier_id == m->id)
			arrived++;
	if (arrived < c->nclients) {
		c->gathering = true;
		c->gathering_id = m->id;
		return;
	}
	c->gathering = false;
	c->barrier_up = true;
	c->barrier_up_id = m->id;
	c->stats.barriers++;
	lm_park_barrier(c, m->id);
	/* every FLUSH of the epoch is in: the updates can be encoded while
	 * the barrier goes round the reflectors */
	c->ahead = c->updates != NULL;
	if (c->ahead && c->out.later)
		c->out.later(c->ctx);
}

/* lm_updates_encode_ahead's look at the cache (the LRU order stays). */
static const uint8_t *copy_for_ahead(void *ctx, uint32_t page,
				     uint64_t *tag)
{
	struct cpage *cp = lm_cache_find(ctx, page);

	if (!cp)
		return NULL;
	*tag = cp->tag;
	return cp->data;
}

/* Pages a call: short enough that a message is not kept waiting long
 * (docs/performance.md, "Figures behind the lemuriad's choices"). */
#define AHEAD_PAGES 32

/* ALLOC and FREE: the same request goes up, the reply comes down. */
static void handle_relay(lm_lemuriad *c, enum up_kind kind, uint16_t from,
			 uint32_t req_id, const struct lm_msg *m)
{
	struct upreq *up;
	struct lm_msg r = *m;

	if (lm_upreq_start(c, kind, from, req_id, &up) < 0) {
		count_bad(c, from, m, "too many waiting requests");
		return;
	}
	r.run = c->run;
	c->out.request(c->ctx, c->reflector, up->req_id, &r);
}

static void handle_create(lm_lemuriad *c, int slot, uint16_t from,
			  uint32_t req_id, const struct lm_msg *m)
{
	/* rank 0 runs main and is never a worker (docs/dsm.md 14) */
	if (m->rank == 0 || m->rank >= c->layout->nprocs) {
		reply_status(c, from, req_id, LM_MSG_CREATE_OK, LM_EINVAL);
		return;
	}
	if (m->offset != LM_CREATE_NO_WORK)
		c->clients[slot].fresh = true; /* it takes its own number next */
	lm_copy_note_aliases(c, m->data, m->data_len);
	lm_park_create(c, m->rank, m->status, m->offset, m->data,
		       m->data_len);
	reply_status(c, from, req_id, LM_MSG_CREATE_OK, 0);
}

static void reply_work(lm_lemuriad *c, int slot, const struct lm_msg *create)
{
	struct client *cl = &c->clients[slot];
	struct lm_msg w = *create;

	cl->wants_work = false;
	cl->fresh = create->offset != LM_CREATE_NO_WORK;
	w.notices = lm_copy_client_notices(c, create->notices,
					   create->nnotices, &w.nnotices);
	c->out.reply(c->ctx, slot_node(c, slot), cl->work_req, &w);
}

static void handle_wait_work(lm_lemuriad *c, int slot, uint16_t from,
			     uint32_t req_id, const struct lm_msg *m)
{
	struct client *cl = &c->clients[slot];
	struct lm_msg w;

	if (cl->wants_work) {
		count_bad(c, from, m, "second WAIT_WORK while waiting");
		return;
	}
	cl->wants_work = true;
	cl->work_req = req_id;
	if (!cl->has_work)
		return;
	msg_init(c, &w, LM_MSG_CREATE);
	w.rank = slot_rank(c, slot);
	w.status = cl->work_status;
	w.offset = cl->work_offset;
	w.data = cl->work_data;
	w.data_len = cl->work_len;
	w.notices = cl->work_notices;
	w.nnotices = cl->work_nnotices;
	reply_work(c, slot, &w);
	free_client_work(cl);
}

static void handle_end(lm_lemuriad *c, int slot, uint16_t from,
		       uint32_t req_id, const struct lm_msg *m)
{
	lm_park_end(c, slot_rank(c, slot), m->status);
	reply_status(c, from, req_id, LM_MSG_END_OK, 0);
}

/* Answers every WAIT_END whose count of ENDs has arrived, with the
 * notices of the ENDs, applied to our own cache first. */
static void check_wait_end(lm_lemuriad *c)
{
	for (uint32_t i = 0; i < c->nclients; i++) {
		struct client *cl = &c->clients[i];
		struct lm_msg r;

		if (!cl->wants_end || c->ends < cl->end_count)
			continue;
		lm_notices_apply(c, c->end_notices, c->end_nnotices);
		c->ends -= cl->end_count;
		cl->wants_end = false;
		msg_init(c, &r, LM_MSG_RELEASE);
		r.id = 0;
		r.notices = lm_copy_client_notices(c, c->end_notices,
						   c->end_nnotices,
						   &r.nnotices);
		c->out.reply(c->ctx, slot_node(c, (int)i), cl->end_req, &r);
		if (c->ends == 0) { /* all delivered: start afresh */
			free(c->end_notices);
			c->end_notices = NULL;
			c->end_nnotices = 0;
		}
	}
}

static void handle_wait_end(lm_lemuriad *c, int slot, uint16_t from,
			    uint32_t req_id, const struct lm_msg *m)
{
	struct client *cl = &c->clients[slot];

	if (cl->wants_end) {
		count_bad(c, from, m, "second WAIT_END while waiting");
		return;
	}
	cl->wants_end = true;
	cl->end_count = m->id;
	cl->end_req = req_id;
	check_wait_end(c);
}

/* The client is gone from the run: nothing it waited for is answered. */
static void forget_client(lm_lemuriad *c, int slot)
{
	struct client *cl = &c->clients[slot];
	uint16_t node = slot_node(c, slot);
	uint32_t rank = slot_rank(c, slot);

	for (struct upreq *up = c->ups; up; up = up->next) {
		struct waiter **pp = &up->waiters;

		while (*pp) {
			struct waiter *w = *pp;

			if (w->node == node) {
				*pp = w->next;
				free(w);
				c->nwaits--;
			} else {
				pp = &w->next;
			}
		}
	}
	lm_locks_forget(c, rank);
	free_client_work(cl);
	memset(cl, 0, sizeof(*cl));
	lm_locks_recheck(c); /* it was perhaps fresh */
}

/* The reason of an ABORT (not NUL-terminated on the wire) as a string. */
static void reason_text(const struct lm_msg *m, char *buf, size_t cap)
{
	size_t n = 0;

	if (m->data)
		n = m->data_len < cap ? m->data_len : cap - 1;
	if (n)
		memcpy(buf, m->data, n);
	buf[n] = '\0';
}

static void handle_abort_from_client(lm_lemuriad *c, int slot,
				     const struct lm_msg *m)
{
	struct lm_msg a = *m;
	char reason[LM_MSG_REASON_MAX + 1];

	reason_text(m, reason, sizeof(reason));
	a.run = c->run;
	a.rank = slot_rank(c, slot);
	c->out.send(c->ctx, c->reflector, &a);
	abort_run(c, a.rank, reason, slot);
}

static void from_client(lm_lemuriad *c, int slot, uint16_t from,
			enum lm_rel_msg_kind kind, uint32_t req_id,
			const struct lm_msg *m)
{
	bool was_fresh;

	c->client_spoke = true; /* not spinning: see lm_lemuriad_pulse */
	if (m->type == LM_MSG_JOIN) {
		handle_join(c, slot, from, kind, req_id, m);
		return;
	}
	if (m->run < c->run) {
		c->stats.dropped_stale_run++;
		return;
	}
	if (m->type == LM_MSG_LEAVE && m->run == c->run &&
	    kind == LM_REL_REQUEST) {
		bool left = c->active && !c->aborted &&
			    c->clients[slot].joined;

		if (left) {
			c->someone_left = true;
			c->left_rank = slot_rank(c, slot);
		}
		/* answered even in an aborted run, so the client can go */
		forget_client(c, slot);
		c->clients[slot].left = left;
		reply_status(c, from, req_id, LM_MSG_LEAVE_OK, 0);
		if (left && c->gathering)
			barrier_never_completes(c, c->gathering_id, -1);
		else if (left)
			tell_if_all_left(c, slot);
		return;
	}
	if (m->run == c->run && c->aborted) {
		c->stats.dropped_stale_run++;
		return;
	}
	if (m->run > c->run || !c->clients[slot].joined) {
		count_bad(c, from, m, "client has not joined this run");
		return;
	}
	if (m->type == LM_MSG_ABORT) {
		handle_abort_from_client(c, slot, m);
		return;
	}
	/* copy = cluster: a client's UNLOCK comes one-way (nothing of
	 * the holder's waits on our answer) */
	if (kind != LM_REL_REQUEST &&
	    !(m->type == LM_MSG_UNLOCK && c->shared)) {
		count_bad(c, from, m, "expected a request");
		return;
	}
	was_fresh = client_fresh(&c->clients[slot]);
	if (m->type != LM_MSG_WAIT_WORK)
		c->clients[slot].active = true;
	switch (m->type) {
	case LM_MSG_FETCH:
		lm_fetch_handle(c, from, req_id, m);
		break;
	case LM_MSG_FETCHV:
		lm_fetch_handle_v(c, from, req_id, m);
		break;
	case LM_MSG_FLUSH:
		handle_flush(c, slot, from, req_id, m);
		break;
	case LM_MSG_BARRIER:
		handle_barrier(c, slot, from, req_id, m);
		lock_held_in_barrier(c);
		break;
	case LM_MSG_LOCK:
		lm_locks_lock(c, slot, from, req_id, m);
		lock_held_in_barrier(c);
		break;
	case LM_MSG_UNLOCK:
		lm_locks_unlock(c, slot, from,
				kind == LM_REL_REQUEST ? &req_id : NULL, m);
		break;
	case LM_MSG_ALLOC:
		handle_relay(c, UP_ALLOC, from, req_id, m);
		break;
	case LM_MSG_FREE:
		handle_relay(c, UP_FREE, from, req_id, m);
		break;
	case LM_MSG_CREATE:
		handle_create(c, slot, from, req_id, m);
		break;
	case LM_MSG_WAIT_WORK:
		handle_wait_work(c, slot, from, req_id, m);
		break;
	case LM_MSG_END:
		handle_end(c, slot, from, req_id, m);
		break;
	case LM_MSG_WAIT_END:
		handle_wait_end(c, slot, from, req_id, m);
		break;
	default:
		count_bad(c, from, m, "unexpected type from a client");
		break;
	}
	/* its first synchronisation (a LOCK queued above) ends a fresh
	 * client's claim on recalled tokens (locks.c) */
	if (m->type == LM_MSG_LOCK || m->type == LM_MSG_UNLOCK ||
	    m->type == LM_MSG_BARRIER || m->type == LM_MSG_END ||
	    m->type == LM_MSG_WAIT_END)
		c->clients[slot].fresh = false;
	if (was_fresh && !client_fresh(&c->clients[slot]))
		lm_locks_recheck(c);
}

/* ---- messages from the reflector ----------------------------------- */

/* The reflector's reply to a request of ours, to the part that made it. */
static void handle_up_reply(lm_lemuriad *c, uint32_t req_id,
			    const struct lm_msg *m)
{
	static const uint16_t expect[UP_KIND_COUNT] = {
		[UP_FETCH] = LM_MSG_PAGE,
		[UP_LOCK] = LM_MSG_GRANT,
		[UP_ALLOC] = LM_MSG_ALLOC_OK,
		[UP_FREE] = LM_MSG_FREE_OK,
	};
	struct upreq *up;
	int status;

	up = lm_upreq_find(c, req_id);
	if (!up) {
		count_bad(c, c->reflector, m, "reply to no request");
		return;
	}
	switch (up->kind) {
	case UP_FETCH:
		lm_fetch_answer(c, up, m);
		lm_release_fetched(c);
		return;
	case UP_FETCHV:
		lm_fetch_pages(c, up, m);
		lm_release_fetched(c);
		return;
	case UP_REGISTER:
	case UP_PUSH:
		status = lm_park_answer(c, up, m);
		if (status) {
			char what[80];

			snprintf(what, sizeof(what), "its deltas were "
				 "refused by their homes (%s)",
				 lm_strerror(status));
			lose_run(c, what);
		}
		return;
	default:
		break;
	}
	if (m->type != expect[up->kind]) {
		count_bad(c, c->reflector, m, "reply of the wrong type");
		lm_upreq_free(c, up);
		return;
	}
	if (up->kind == UP_LOCK) {
		lm_locks_granted(c, up, m);
		return;
	}
	if (up->waiters)
		c->out.reply(c->ctx, up->waiters->node, up->waiters->req_id,
			     m);
	lm_upreq_free(c, up);
}

static void handle_create_down(lm_lemuriad *c, const struct lm_msg *m)
{
	struct client *cl;
	int slot;

	if (m->rank < c->cfg->first_rank ||
	    m->rank - c->cfg->first_rank >= c->nclients) {
		count_bad(c, c->reflector, m, "CREATE for another cluster");
		return;
	}
	slot = (int)(m->rank - c->cfg->first_rank);
	cl = &c->clients[slot];
	/* what rank 0 published before it: our copies and FETCHes must be
	 * at least as new, and the worker's (I2, I3) */
	lm_notices_apply(c, m->notices, m->nnotices);
	lm_fetch_heard(c, m->notices, m->nnotices);
	lm_copy_note_aliases(c, m->data, m->data_len);
	if (cl->wants_work) {
		reply_work(c, slot, m);
		return;
	}
	if (cl->has_work) {
		count_bad(c, c->reflector, m, "second CREATE for a worker");
		return;
	}
	if (m->data_len) {
		cl->work_data = malloc(m->data_len);
		if (!cl->work_data) {
			lose_run(c, "out of memory for a CREATE");
			return;
		}
		memcpy(cl->work_data, m->data, m->data_len);
	}
	if (m->nnotices) {
		size_t sz = m->nnotices * sizeof(*m->notices);

		cl->work_notices = malloc(sz);
		if (!cl->work_notices) {
			free_client_work(cl);
			lose_run(c, "out of memory for a CREATE");
			return;
		}
		memcpy(cl->work_notices, m->notices, sz);
		cl->work_nnotices = m->nnotices;
	}
	cl->work_len = m->data_len;
	cl->work_offset = m->offset;
	cl->work_status = m->status;
	cl->has_work = true;
}

/* The notices of every END are kept, merged, not just the last END's:
 * with several reflectors each END carries what its own reflector's
 * clusters wrote, and rank 0 must see the writes of all its workers. */
static void handle_end_down(lm_lemuriad *c, const struct lm_msg *m)
{
	if (m->nnotices) {
		size_t n = c->end_nnotices + m->nnotices;
		struct lm_notice *v = realloc(c->end_notices,
					      n * sizeof(*v));

		if (!v) {
			/* WAIT_END would go without them */
			lose_run(c, "out of memory for the notices of an END");
			return;
		}
		memcpy(v + c->end_nnotices, m->notices,
		       m->nnotices * sizeof(*v));
		c->end_notices = v;
		c->end_nnotices = (uint32_t)lm_notices_merge(v, n);
	}
	c->ends++;
	check_wait_end(c);
}

static void handle_abort_down(lm_lemuriad *c, const struct lm_msg *m)
{
	char reason[LM_MSG_REASON_MAX + 1];

	reason_text(m, reason, sizeof(reason));
	abort_run(c, m->rank, reason, -1);
}

static void from_reflector(lm_lemuriad *c, enum lm_rel_msg_kind kind,
			   uint32_t req_id, const struct lm_msg *m)
{
	if (m->run < c->run || (m->run == c->run && c->aborted)) {
		c->stats.dropped_stale_run++;
		return;
	}
	if (m->run > c->run)
		reset_run(c, m->run);
	if (kind == LM_REL_REPLY) {
		handle_up_reply(c, req_id, m);
		return;
	}
	if (kind == LM_REL_REQUEST && m->type == LM_MSG_PULL) {
		lm_park_pull(c, req_id, m);
		return;
	}
	if (kind != LM_REL_ONEWAY) {
		count_bad(c, c->reflector, m, "request from the reflector");
		return;
	}
	switch (m->type) {
	case LM_MSG_RELEASE:
		lm_release_handle(c, m);
		break;
	case LM_MSG_RECALL:
		lm_locks_recall(c, m);
		lock_held_in_barrier(c);
		break;
	case LM_MSG_PROBE:
		lm_locks_probe(c, m);
		break;
	case LM_MSG_CHANGED:
		if (m->id == LM_CHANGED_HURRY)
			lm_order_hurried(c);
		else
			lm_fetch_changed(c, m);
		break;
	case LM_MSG_CREATE:
		handle_create_down(c, m);
		break;
	case LM_MSG_END:
		handle_end_down(c, m);
		break;
	case LM_MSG_ABORT:
		handle_abort_down(c, m);
		break;
	default:
		count_bad(c, c->reflector, m, "unexpected type from R");
		break;
	}
}

/* ---- API ----------------------------------------------------------- */

lm_lemuriad *lm_lemuriad_create(const struct lm_layout *layout,
			      const char *name, uint64_t layout_hash,
			      const struct lm_msg_out *out, void *ctx)
{
	const struct lm_cluster_cfg *cfg;
	lm_lemuriad *c;

	if (!layout || !name || !out || !out->send || !out->request ||
	    !out->reply)
		return NULL;
	cfg = lm_layout_cluster(layout, name);
	if (!cfg || cfg->reflector_index < 0 ||
	    (size_t)cfg->reflector_index >= layout->nreflectors ||
	    layout->page_size == 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->layout = layout;
	c->cfg = cfg;
	c->out = *out;
	c->ctx = ctx;
	c->hooks = (struct lm_lemuriad_hooks){
		.lose = lose_run,
		.grant = lm_locks_grant_local,
		.arrived = lm_release_arrived,
		.rebuild = lm_release_rebuild,
	};
	c->layout_hash = layout_hash;
	c->reflector = layout->reflectors[cfg->reflector_index].id;
	c->index = (uint32_t)(cfg - layout->clusters);
	/* a run of one process keeps its region private (client.c) */
	c->shared = cfg->copy == LM_COPY_CLUSTER && layout->nprocs > 1;
	c->check_copy = c->shared && getenv("LEMURIA_CHECK_COPY") &&
			strcmp(getenv("LEMURIA_CHECK_COPY"), "1") == 0;
	c->trace = lm_page_trace_open(name);
	c->copy.fd = -1;
	c->nclients = cfg->clients;
	c->first_node = lm_layout_client_id(layout, cfg->first_rank);
	c->page_size = layout->page_size;
	c->npages = layout->shared_size / layout->page_size;
	c->cache_max = cfg->cache_size / layout->page_size;
	if (c->cache_max > c->npages)
		c->cache_max = c->npages;
	if (c->cache_max == 0)
		c->cache_max = 1;
	c->next_req = 1;
	c->max_waits = (size_t)LM_LEMURIAD_WAITS_PER_CLIENT * (c->nclients + 1);
	c->by_page = calloc(c->npages ? c->npages : 1, sizeof(*c->by_page));
	c->up_by_id = calloc(LM_LEMURIAD_UP_BUCKETS, sizeof(*c->up_by_id));
	c->up_by_page = calloc(LM_LEMURIAD_UP_BUCKETS, sizeof(*c->up_by_page));
	c->clients = calloc(c->nclients ? c->nclients : 1,
			    sizeof(*c->clients));
	c->set_conn = malloc((c->nclients ? c->nclients : 1) *
			     sizeof(*c->set_conn));
	c->set_uffd = malloc((c->nclients ? c->nclients : 1) *
			     sizeof(*c->set_uffd));
	c->filler.uffd = -1;
	c->uffd_watch = epoll_create1(EPOLL_CLOEXEC);
	for (uint32_t i = 0; c->set_conn && c->set_uffd && i < c->nclients;
	     i++)
		c->set_conn[i] = c->set_uffd[i] = -1;
	c->eager = layout->relay == LM_RELAY_EAGER;
	c->deltas = lm_deltas_create(c->page_size, (uint32_t)c->npages,
				     c->index,
				     layout->relay == LM_RELAY_ADAPTIVE,
				     lm_park_emit, c);
	/* freed delta buffers kept for reuse, bounded like the cache's
	 * spare copies */
	if (c->deltas)
		lm_deltas_keep_spares(c->deltas, c->cache_max / 8);
	c->pagebuf = malloc(c->page_size);
	c->known = calloc(c->npages ? c->npages : 1, sizeof(*c->known));
	c->told_all = calloc(c->npages ? c->npages : 1,
			     sizeof(*c->told_all));
	c->leaving = calloc(c->npages ? c->npages : 1, 1);
	if (c->shared && layout->nclusters > 1) {
		c->heard = calloc(c->npages ? c->npages : 1,
				  sizeof(*c->heard));
		c->gated_list = calloc(c->npages ? c->npages : 1,
				       sizeof(*c->gated_list));
		c->grp_list = calloc(c->npages ? c->npages : 1,
				     sizeof(*c->grp_list));
		c->grp_on = calloc(c->npages ? c->npages : 1, 1);
		c->heard_reg = calloc(layout->nclusters, sizeof(*c->heard_reg));
		c->need_reg = calloc(layout->nclusters, sizeof(*c->need_reg));
		c->tagout = calloc(layout->nclusters, LM_MSG_TAG_SIZE);
		if (!c->heard || !c->gated_list || !c->grp_list ||
		    !c->grp_on || !c->heard_reg || !c->need_reg || !c->tagout)
			goto err;
	}
	if (lm_notice_set_init(&c->epoch_notes, c->npages) < 0)
		goto err;
	c->deltabuf = malloc(lm_diff_bound(c->page_size) + LM_MSG_DIFFS_ENTRY_HDR);
	c->fetchv_cap = LM_LEMURIAD_FETCHV_MAX *
		((size_t)c->page_size + LM_MSG_DIFFS_ENTRY_HDR);
	c->fetchv_buf = malloc(c->fetchv_cap);
	/* the epoch's masks, and the updates encoded at a release: an eighth
	 * of the cache each at most (docs/dsm.md "Updates") */
	/* one copy per cluster: no client copies to bring up to date */
	if (layout->updates && !c->shared)
		c->updates = lm_updates_create(
			c->page_size, (uint32_t)c->npages, c->nclients,
			c->cache_max * c->page_size / 8);
	if (!c->by_page || !c->clients || !c->set_conn || !c->set_uffd ||
	    c->uffd_watch < 0 ||
	    (c->nclients && c->first_node == 0) ||
	    !c->up_by_id || !c->up_by_page ||
	    !c->deltas || !c->pagebuf || !c->deltabuf || !c->fetchv_buf ||
	    !c->known || !c->told_all || !c->leaving ||
	    (layout->updates && !c->shared && !c->updates))
		goto err;
	return c;
err:
	lm_lemuriad_destroy(c);
	return NULL;
}

void lm_lemuriad_destroy(lm_lemuriad *c)
{
	if (!c)
		return;
	if (c->by_page && c->clients && c->deltas && c->up_by_id &&
	    c->up_by_page)
		reset_run(c, c->run);
	lm_cache_free_spares(c);
	lm_deltas_destroy(c->deltas);
	lm_page_trace_close(c->trace);
	lm_updates_destroy(c->updates);
	lm_release_free_deferred(c);
	free(c->deferred);
	free(c->parked);
	for (size_t i = 0; i < c->nrecalls; i++)
		free(c->recalls[i].data);
	free(c->recalls);
	free(c->pagebuf);
	free(c->deltabuf);
	free(c->fetchv_buf);
	free(c->known);
	free(c->told_all);
	free(c->chg_want);
	free(c->chg_list);
	free(c->grp_list);
	free(c->grp_on);
	free(c->heard);
	free(c->gated_list);
	free(c->set_items);
	free(c->heard_reg);
	free(c->need_reg);
	free(c->tagout);
	lm_changes_free(c);
	free(c->leaving);
	lm_copy_end_run(c);
	free(c->sealbuf);
	free(c->by_page);
	free(c->up_by_id);
	free(c->up_by_page);
	free(c->clients);
	free(c->set_conn);
	free(c->set_uffd);
	if (c->uffd_watch >= 0)
		close(c->uffd_watch);
	free(c->tokens);
	lm_notice_set_free(&c->epoch_notes);
	free(c);
}

/* One message, from a client or the reflector, to where it belongs. */
static void dispatch(lm_lemuriad *c, uint16_t from, enum lm_rel_msg_kind kind,
		     uint32_t req_id, const struct lm_msg *m)
{
	int slot;

	if (lm_release_puts_off(c, from, kind, req_id, m))
		return;
	if (from == c->reflector) {
		from_reflector(c, kind, req_id, m);
		return;
	}
	slot = client_slot(c, from);
	if (slot < 0) {
		count_bad(c, from, m, "not a client of this cluster");
		return;
	}
	from_client(c, slot, from, kind, req_id, m);
}

/* Handles, in the order they came, the messages put off while a RELEASE
 * was staged, once it has gone out, until another one is staged (one of
 * them may stage it). */
static void replay_deferred(lm_lemuriad *c)
{
	struct deferred_msg d;

	if (c->replaying)
		return; /* the loop below goes on once this staging ends */
	c->replaying = true;
	while (lm_release_take_deferred(c, &d)) {
		dispatch(c, d.from, d.kind, d.req_id, &d.m);
		free(d.mem);
	}
	c->replaying = false;
}

void lm_lemuriad_handle(lm_lemuriad *c, uint16_t from,
			enum lm_rel_msg_kind kind, uint32_t req_id,
			const struct lm_msg *m)
{
	if (!c || !m)
		return;
	dispatch(c, from, kind, req_id, m);
	/* a RELEASE that went out during m leaves what it put off */
	replay_deferred(c);
}

bool lm_lemuriad_background(lm_lemuriad *c)
{
	lm_park_send_recalls(c);
	if (c->rel.staging) {
		bool more = lm_release_step(c);

		replay_deferred(c);
		return more || c->ahead;
	}
	if (c->ahead)
		c->ahead = lm_updates_encode_ahead(c->updates, copy_for_ahead,
						   c, AHEAD_PAGES);
	return c->ahead;
}

int lm_lemuriad_wait_fd(const lm_lemuriad *c)
{
	return c->uffd_watch;
}

void lm_lemuriad_readable(lm_lemuriad *c)
{
	lm_copy_wake_waiting(c);
}

void lm_lemuriad_tick(lm_lemuriad *c)
{
	lm_park_send_recalls(c); /* should the background hook not run */
	lm_page_trace_flush(c->trace);
	/* a staged release reads the epoch's state, which a token going
	 * back would change (its UNLOCK registers what was written): the
	 * next tick will do */
	if (c->rel.staging)
		return;
	lm_locks_tick(c);
}

/* A publish that cannot go yet (a registration or a parked message is
 * out, a release goes down) is tried again this much later. */
#define PUBLISH_RETRY_US 5000u

/* Something happened since the last pulse (`*seen`): it happened now. */
static void stamp(bool *seen, uint64_t *at, uint64_t now_us)
{
	if (*seen)
		*at = now_us;
	*seen = false;
}

/* The earlier of two times to look again, 0 being none. */
static uint64_t earliest(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

uint64_t lm_lemuriad_pulse(lm_lemuriad *c, uint64_t now_us)
{
	uint64_t quiet_at, publish_at, next, tell_at = 0;
	bool joined = false;

	c->now_us = now_us;
	/* our changes go to the others in both copy modes: a reader that
	 * keeps one copy may hold what a copy = client cluster writes */
	if (c->run && !c->aborted)
		tell_at = lm_changes_send(c, now_us);
	if (c->ngrp || c->ngated)
		lm_fetch_group_check(c);
	tell_at = earliest(tell_at, lm_order_next(c));
	for (uint32_t i = 0; i < c->nclients; i++)
		joined |= c->clients[i].joined;
	c->sealed |= !c->sealed_us; /* the clock's first reading */
	stamp(&c->sealed, &c->sealed_us, now_us);
	stamp(&c->released, &c->released_us, now_us);
	stamp(&c->client_spoke, &c->client_us, now_us);
	/* every client waits in a barrier: none spins, and the RELEASE
	 * (a message: the pulse runs after it) tells them everything */
	if (!c->shared || !c->run || c->aborted || !joined || c->barrier_up)
		return tell_at;
	/* the run's start counts as a barrier: a program's first phase
	 * (rank 0 filling its data while the others wait for work) is not
	 * a spin either */
	if (!c->released_us)
		c->released_us = now_us;
	/* No publish and no fetches of CHANGED pages while the cluster is
	 * busy: a client that spins sends nothing, and a cluster that passed
	 * a barrier lately has no client spinning (every rank takes part in
	 * every barrier) and will seal and hear of the others' writes at the
	 * next one.  Quiet: neither for LM_LEMURIAD_QUIET_US, or no barrier
	 * for LM_LEMURIAD_QUIET_MAX_US (a client may spin while a mate
	 * keeps asking for pages). */
	quiet_at = (c->released_us > c->client_us ? c->released_us :
		    c->client_us) + LM_LEMURIAD_QUIET_US;
	if (quiet_at > c->released_us + LM_LEMURIAD_QUIET_MAX_US)
		quiet_at = c->released_us + LM_LEMURIAD_QUIET_MAX_US;
	if (now_us >= quiet_at && !c->rel.active && !c->rel.staging &&
	    !c->ndeferred) {
		lm_fetch_changed_due(c);
		lm_park_publish(c);
	}
	stamp(&c->sealed, &c->sealed_us, now_us);
	publish_at = c->sealed_us + LM_LEMURIAD_PUBLISH_US;
	if (publish_at < quiet_at)
		publish_at = quiet_at;
	next = publish_at > now_us ? publish_at : now_us + PUBLISH_RETRY_US;
	if (c->nchg && quiet_at > now_us && quiet_at < next)
		next = quiet_at;
	return earliest(next, tell_at);
}

void lm_lemuriad_peer_lost(lm_lemuriad *c, uint16_t node, const char *why)
{
	char reason[LM_NAME_MAX + 160], at[32];
	int slot;

	if (!c)
		return;
	if (node == c->reflector) {
		const struct lm_reflector_cfg *r =
			&c->layout->reflectors[c->cfg->reflector_index];

		snprintf(reason, sizeof(reason), "reflector %s at %s lost%s%s",
			 r->name, lm_addr_str(&r->addr, at, sizeof(at)),
			 why ? ": " : "", why ? why : "");
		abort_run(c, LM_LEMURIAD_ABORT_REFLECTOR, reason, -1);
		return;
	}
	slot = client_slot(c, node);
	if (slot < 0 || !c->clients[slot].joined)
		return;
	snprintf(reason, sizeof(reason), "rank %u lost", slot_rank(c, slot));
	abort_run(c, slot_rank(c, slot), reason, slot);
}

const struct lm_lemuriad_stats *lm_lemuriad_stats(const lm_lemuriad *c)
{
	return &c->stats;
}

const struct lm_updates_stats *lm_lemuriad_updates_stats(const lm_lemuriad *c)
{
	static const struct lm_updates_stats none;

	return c->updates ? lm_updates_stats(c->updates) : &none;
}

const struct lm_deltas_stats *lm_lemuriad_delta_stats(const lm_lemuriad *c)
{
	return lm_deltas_stats(c->deltas);
}

const struct lm_ccopy *lm_lemuriad_copy(const lm_lemuriad *c)
{
	return c->copy.map ? &c->copy : NULL;
}
