/* lemuriad protocol layer: the state machine of role L in docs/dsm.md.
 * It owns the cluster page cache (cache.c), the cluster deltas (deltas.c)
 * and the lock tokens held in the cluster (tokens.c), and relays
 * everything else between the cluster's clients and its reflector
 * (barrier releases: release.c); it never touches a socket.  This file
 * holds the runs, the parked messages and the handling of each message;
 * cluster_int.h is what the parts share.
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
 *  - An UNLOCK of a lock not granted to that rank through us is answered
 *    UNLOCK_OK{LM_EINVAL} and not forwarded.
 *  - A client's CREATE for rank 0 or a rank beyond the layout is answered
 *    CREATE_OK{LM_EINVAL} and not forwarded.
 *  - One CREATE is kept per worker until its WAIT_WORK; a second one is
 *    dropped and counted.
 *  - PAGE has no status: a FETCH outside the region, or one whose reply
 *    from R is not a whole page, is answered with a PAGE of data_len 0
 *    (as R does), which the client reports as an error, instead of
 *    leaving it blocked.
 *  - A lock token whose clients all left stays here, free, until the
 *    manager recalls it, so the lock is not lost.
 *  - Coalesced fetches respect I3: a reply older than a notice seen while
 *    the fetch was pending is not cached, and the clients that asked after
 *    that notice are served by a new upstream FETCH.
 *  - A reply gets our deltas the home lacks written on top; one that was
 *    pending while data of the page left us (push, pull, eager) is cached
 *    only if at least as new as the version that data is in at the home,
 *    so a cached copy always holds every delta of ours: what the
 *    sole-cluster rule in lm_cluster_apply_notices relies on.
 *  - A client's diffs join the page's delta with the sender's rank as
 *    writer (the one the home's notices name), taken from its node id
 *    like LOCK's. */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deltas.h"
#include "diff.h"
#include "lm_error.h"
#include "log.h"
#include "updates.h"

/* Client requests that may wait on the reflector at once, per client
 * (I5: a client that floods us cannot grow our lists without bound). */
#define LM_LEMURIAD_WAITS_PER_CLIENT 64u

/* ---- helpers ------------------------------------------------------- */

static int client_slot(const lm_lemuriad *c, uint16_t node);

/* Client `node` got a copy of `page` (barrier updates keep it valid). */
static void hold(lm_lemuriad *c, uint16_t node, uint32_t page)
{
	int slot = client_slot(c, node);

	if (c->updates && slot >= 0)
		lm_updates_hold(c->updates, (uint32_t)slot, page);
}

/* Local rank of a client node, or -1 when the node is not one of ours. */
static int client_slot(const lm_lemuriad *c, uint16_t node)
{
	if (node < c->first_node ||
	    (uint32_t)(node - c->first_node) >= c->nclients)
		return -1;
	return node - c->first_node;
}

static void reply_status(lm_lemuriad *c, uint16_t node, uint32_t req_id,
			 uint16_t type, int32_t status)
{
	struct lm_msg r;

	msg_init(c, &r, type);
	r.status = status;
	c->out.reply(c->ctx, node, req_id, &r);
}

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
	memset(c->leaving, 0, c->npages);
	for (size_t i = 0; i < c->nparked; i++)
		free(c->parked[i].data);
	c->nparked = 0;
	c->batch_started = c->batch_done = c->batch_parts = 0;
	c->barrier_up = false;
	c->ends = 0;
	free(c->end_notices);
	c->end_notices = NULL;
	c->end_nnotices = 0;
	lm_tokens_clear(c);
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
	for (size_t i = 0; i < c->ntokens; i++)
		for (size_t k = 0; k < c->tokens[i].nq; k++)
			if (c->tokens[i].q[k].node != skip)
				c->out.reply(c->ctx, c->tokens[i].q[k].node,
					     c->tokens[i].q[k].req_id, m);
	for (size_t i = 0; i < c->nparked; i++)
		if (c->parked[i].type == LM_MSG_GRANT &&
		    c->parked[i].node != skip)
			c->out.reply(c->ctx, c->parked[i].node,
				     c->parked[i].req_id, m);
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
	lm_log_warn("cluster %s: run %016llx aborted: %s", c->cfg->name,
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
	char reason[160];
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

/* Write notices (I3): a copy is dropped only when older than its notice.
 * A pending FETCH remembers the notice so that its reply, if older, is
 * not cached and does not answer clients that asked after the notice.
 *
 * Sole cluster (docs/dsm.md "Sole writers"): when every diff of the
 * epoch for the page came through us (wcluster) and our copy is at the
 * notice's base, the copy is the home's page at base plus those very
 * diffs, applied as we forwarded them; no diff forwarded before the copy
 * was cached can be missing, since such a copy is never cached (the
 * `left` rule) or is newer than base.  So it equals the home's page at
 * the notice's version and only its version moves. */
void lm_cluster_apply_notices(lm_lemuriad *c, const struct lm_notice *n,
			      uint32_t count)
{
	for (uint32_t i = 0; n && i < count; i++) {
		struct cpage *cp = lm_cache_find(c, n[i].page);
		struct upreq *up;

		if (n[i].page < c->npages && c->known[n[i].page] < n[i].version)
			c->known[n[i].page] = n[i].version;
		if (cp && cp->version < n[i].version) {
			if (n[i].wcluster == c->index &&
			    cp->version == n[i].base) {
				cp->version = n[i].version;
				c->stats.kept++;
			} else {
				lm_cache_remove(c, cp);
				c->stats.invalidations++;
			}
		}
		up = lm_upreq_fetch_of(c, n[i].page);
		if (up && up->min_version < n[i].version)
			up->min_version = n[i].version;
	}
	/* what we learn, our clients may learn from us: local GRANTs pass
	 * it on */
	lm_token_note_epoch(c, n, count);
}

/* ---- deltas and parked messages ------------------------------------ */

static bool over_budget(const lm_lemuriad *c)
{
	return c->ncached + delta_pages(c) > c->cache_max;
}

static bool batch_outstanding(const lm_lemuriad *c)
{
	return c->batch_done != c->batch_started;
}

/* Data of `page` just left for its home, where it is in the page from
 * `version` on (UINT32_MAX: not known yet): a FETCH reply still on its
 * way that is older may lack it, so it must not be cached. */
static void mark_data_left(lm_lemuriad *c, uint32_t page, uint32_t version)
{
	struct upreq *up = lm_upreq_fetch_of(c, page);

	/* and any FETCH started before its version is known (a reflector's
	 * cache may answer it with a copy from before the data) */
	if (version == UINT32_MAX && page < c->npages)
		c->leaving[page] = 1;
	if (up && up->left < version)
		up->left = version;
}

/* lm_deltas' way out: every REGISTER goes up as a request. */
static void emit_register(void *ctx, const struct lm_msg *reg)
{
	lm_lemuriad *c = ctx;
	struct upreq *up = lm_upreq_new(c, c->sealing ? UP_REGISTER : UP_PUSH);
	struct lm_msg r = *reg;

	/* a push names its version; data sent with a new registration
	 * gets one only in the answer */
	for (uint32_t i = 0; i < reg->nnotices; i++)
		if (reg->notices[i].base != LM_REG_NEW)
			mark_data_left(c, reg->notices[i].page,
				       reg->notices[i].base == LM_REG_PUSH ?
				       reg->notices[i].version : UINT32_MAX);
	if (!up) {
		lm_log_error("cluster %s: no memory to register deltas; "
			     "they are lost", c->cfg->name);
		return;
	}
	r.run = c->run;
	if (c->sealing)
		c->batch_parts++;
	c->out.request(c->ctx, c->reflector, up->req_id, &r);
}

static void start_batch(lm_lemuriad *c, bool with_data, bool all_sealed);

static void send_parked(lm_lemuriad *c, const struct parked *p)
{
	struct lm_msg m;

	if (p->type == LM_MSG_GRANT) {
		lm_token_grant_local(c, p->id, p->node, p->req_id);
		return;
	}
	msg_init(c, &m, p->type);
	m.id = p->id;
	m.rank = p->rank;
	m.status = p->status;
	m.offset = p->offset;
	m.data = p->data;
	m.data_len = p->data_len;
	c->out.send(c->ctx, c->reflector, &m);
}

/* Whether a parked message may go now.  Most wait for the answer to
 * the registration they need.  A BARRIER goes right behind its
 * REGISTERs: the channel to R is FIFO, R enters its own part before it
 * reads the BARRIER and holds the BARRIER until the other homes acked
 * theirs (docs/dsm.md "Several reflectors"), so the deltas are
 * registered before anyone can pass the barrier (I2), and the answer
 * reaches us before the RELEASE.  A GRANT must wait: it names the
 * versions the answer brings. */
static bool may_go(const lm_lemuriad *c, const struct parked *p)
{
	return p->need <= c->batch_done ||
	       (p->type == LM_MSG_BARRIER && p->need <= c->batch_started);
}

/* Sends, in order, the parked messages that may go; starts the
 * registration the next one waits for. */
static void flush_parked(lm_lemuriad *c)
{
	for (;;) {
		size_t done = 0;

		while (done < c->nparked && may_go(c, &c->parked[done])) {
			send_parked(c, &c->parked[done]);
			free(c->parked[done].data);
			done++;
		}
		if (done) {
			memmove(c->parked, c->parked + done,
				(c->nparked - done) * sizeof(*c->parked));
			c->nparked -= done;
		}
		if (!c->nparked || batch_outstanding(c))
			return;
		/* may come back here, through batch_finished */
		start_batch(c, false, false);
		if (!c->nparked || !may_go(c, &c->parked[0]))
			return;
	}
}

static void batch_finished(lm_lemuriad *c)
{
	c->batch_done = c->batch_started;
	flush_parked(c);
	if (!batch_outstanding(c) && over_budget(c) && c->ncached == 0 &&
	    lm_deltas_buffers(c->deltas)) {
		c->stats.spills++;
		start_batch(c, true, true);
	}
}

/* Seals the open deltas into the next registration (docs/dsm.md "Lazy
 * relay"): entries only, or with their data (eager relay, or memory
 * pressure, which also pushes every sealed delta). */
static void start_batch(lm_lemuriad *c, bool with_data, bool all_sealed)
{
	c->batch_started++;
	c->batch_parts = 0;
	c->sealing = true;
	lm_deltas_seal(c->deltas, with_data || c->eager, all_sealed);
	c->sealing = false;
	c->stats.registrations++;
	if (c->batch_parts == 0)
		batch_finished(c);
}

/* A local hand-off of lock `id` to w, behind the registration of what
 * the previous holder wrote, so that its GRANT names exact versions. */
void lm_cluster_park_grant(lm_lemuriad *c, uint32_t id,
			   const struct lwaiter *w)
{
	/* node and request id travel in `offset`, unpacked by
	 * lm_cluster_park */
	lm_cluster_park(c, LM_MSG_GRANT, id, w->rank, 0,
			w->node | ((uint64_t)w->req_id << 16), NULL, 0);
	c->stats.local_handoffs++;
}

/* Parks a message for the reflector behind the registration of every
 * delta our clients flushed so far (I2). */
void lm_cluster_park(lm_lemuriad *c, uint16_t type, uint32_t id, uint32_t rank,
		     int32_t status, uint64_t offset, const uint8_t *data,
		     size_t data_len)
{
	struct parked *p;

	if (c->nparked == c->parked_cap) {
		size_t cap = c->parked_cap ? c->parked_cap * 2 : 16;
		struct parked *np = realloc(c->parked, cap * sizeof(*np));

		if (!np) {
			lose_run(c, "out of memory for a message to send "
				 "up");
			return;
		}
		c->parked = np;
		c->parked_cap = cap;
	}
	p = &c->parked[c->nparked];
	memset(p, 0, sizeof(*p));
	if (data_len) {
		p->data = malloc(data_len);
		if (!p->data) {
			lose_run(c, "out of memory for a message to send "
				 "up");
			return;
		}
		memcpy(p->data, data, data_len);
		p->data_len = data_len;
	}
	p->type = type;
	p->id = id;
	p->rank = rank;
	p->status = status;
	p->offset = offset;
	if (type == LM_MSG_GRANT) {
		p->node = (uint16_t)(offset & 0xffff);
		p->req_id = (uint32_t)(offset >> 16);
		p->offset = 0;
	}
	p->need = c->batch_started + (lm_deltas_dirty(c->deltas) ? 1 : 0);
	c->nparked++;
	flush_parked(c);
}

/* Keeps copies and deltas within the cache size: copies go first (they
 * can be fetched again); deltas alone beyond it go home with their data. */
static void keep_budget(lm_lemuriad *c)
{
	while (over_budget(c) && c->lru_tail) {
		lm_cache_remove(c, c->lru_tail);
		c->stats.evictions++;
	}
	if (over_budget(c) && !batch_outstanding(c)) {
		c->stats.spills++;
		start_batch(c, true, true);
	}
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
	if (m->run > c->run) {
		if (c->active)
			lm_log_info("cluster %s: run %016llx replaces "
				    "%016llx", c->cfg->name,
				    (unsigned long long)m->run,
				    (unsigned long long)c->run);
		reset_run(c, m->run);
	}
	c->clients[slot].joined = true;
	c->clients[slot].pid = m->pid;
	c->active = true;
	reply_status(c, from, req_id, LM_MSG_JOIN_OK, 0);
}

/* Answers a client's FETCHV with PAGES: `page` at `version` (data), then
 * each of the n pages of `more` that we hold, in order. */
static void reply_pages(lm_lemuriad *c, uint16_t node, uint32_t req_id,
			uint32_t page, uint32_t version, const uint8_t *data,
			const uint32_t *more, uint32_t n)
{
	struct lm_notice served[LM_LEMURIAD_FETCHV_MAX];
	struct lm_msg r;
	uint32_t count = 0;
	size_t len = 0;
	struct cpage *cp;

	served[count++] = (struct lm_notice){ .page = page,
		.version = version, .base = LM_NO_BASE,
		.writer = LM_WRITER_MANY, .wcluster = LM_WRITER_MANY };
	(void)lm_msg_diffs_append(c->fetchv_buf, c->fetchv_cap, &len, page,
				  data, c->page_size);
	for (uint32_t i = 0; i < n && count < LM_LEMURIAD_FETCHV_MAX; i++) {
		if (!(cp = lm_cache_find(c, more[i])))
			continue;
		lm_cache_touch(c, cp);
		served[count++] = (struct lm_notice){ .page = cp->page,
			.version = cp->version, .base = LM_NO_BASE,
			.writer = LM_WRITER_MANY, .wcluster = LM_WRITER_MANY };
		(void)lm_msg_diffs_append(c->fetchv_buf, c->fetchv_cap, &len,
					  cp->page, cp->data, c->page_size);
	}
	c->stats.fetch_neighbours += count - 1;
	msg_init(c, &r, LM_MSG_PAGES);
	r.notices = served;
	r.nnotices = count;
	r.diffs = (struct lm_msg_diffs){ c->fetchv_buf, len, count };
	c->out.reply(c->ctx, node, req_id, &r);
}

/* A client's FETCH, or the first page of its FETCHV when we lack it
 * (`more`: the n other pages that FETCHV asked for; its answer is a
 * PAGES with those we hold by then).  `ahead`: a FETCHV's (a fault on
 * an invalid page), whose miss fetches the `reach` pages after it and
 * `more` too. */
static void handle_fetch(lm_lemuriad *c, uint16_t from, uint32_t req_id,
			 const struct lm_msg *m, bool ahead, uint32_t reach,
			 const uint32_t *more, uint32_t nmore)
{
	struct cpage *cp;
	struct upreq *up;
	struct waiter *w;
	struct lm_msg r;

	if (m->page >= c->npages) {
		count_bad(c, from, m, "FETCH outside the region");
		msg_init(c, &r, LM_MSG_PAGE);
		r.page = m->page;
		c->out.reply(c->ctx, from, req_id, &r);
		return;
	}
	cp = lm_cache_find(c, m->page);
	if (cp) {
		lm_cache_touch(c, cp);
		c->stats.fetch_hits++;
		hold(c, from, cp->page);
		msg_init(c, &r, LM_MSG_PAGE);
		r.page = cp->page;
		r.version = cp->version;
		r.data = cp->data;
		r.data_len = c->page_size;
		c->out.reply(c->ctx, from, req_id, &r);
		return;
	}
	up = lm_upreq_fetch_of(c, m->page);
	if (up) {
		if (lm_upreq_wait(c, up, from, req_id, up->min_version) < 0) {
			count_bad(c, from, m, "too many waiting requests");
			return;
		}
		c->stats.fetch_coalesced++;
	} else {
		if (lm_upreq_start(c, UP_FETCH, from, req_id, &up) < 0) {
			count_bad(c, from, m, "too many waiting requests");
			return;
		}
		lm_upreq_set_page(c, up, m->page);
		up->ahead = ahead;
		c->stats.fetch_misses++;
		msg_init(c, &r, LM_MSG_FETCH);
		r.page = m->page;
		r.version = c->known[m->page];
		c->out.request(c->ctx, c->reflector, up->req_id, &r);
	}
	for (w = up->waiters; w->next; w = w->next)
		; /* ours came last */
	w->nmore = nmore < LM_LEMURIAD_FETCHV_MAX ? nmore : 0;
	if (w->nmore)
		memcpy(w->more, more, nmore * sizeof(*more));
	w->reach = reach;
}

/* A client's FETCHV (docs/dsm.md, "Neighbour pages"): the page it
 * faulted on, then pages after it and along a stride that it lacks.
 * When we hold the first, one PAGES answers with it and every other one
 * we hold; else the first is FETCHed as usual, and its answer is a PAGES
 * with the first and those of the others that we hold by then. */
static void handle_fetchv(lm_lemuriad *c, uint16_t from, uint32_t req_id,
			  const struct lm_msg *m)
{
	uint32_t more[LM_LEMURIAD_FETCHV_MAX - 1], nmore = 0;
	struct lm_msg r, first;
	struct cpage *cp;

	if (m->nnotices == 0 || m->nnotices > LM_LEMURIAD_FETCHV_MAX) {
		count_bad(c, from, m, "FETCHV of no page or too many");
		msg_init(c, &r, LM_MSG_PAGE); /* an empty PAGE: it fails */
		c->out.reply(c->ctx, from, req_id, &r);
		return;
	}
	for (uint32_t i = 1; i < m->nnotices; i++) {
		if (m->notices[i].page >= c->npages)
			count_bad(c, from, m, "FETCHV page outside the region");
		else
			more[nmore++] = m->notices[i].page;
	}
	first = *m;
	first.type = LM_MSG_FETCH;
	first.page = m->notices[0].page;
	first.notices = NULL;
	first.nnotices = 0;
	if (first.page >= c->npages || !(cp = lm_cache_find(c, first.page))) {
		handle_fetch(c, from, req_id, &first, true,
			     lm_msg_fetchv_reach(m), more, nmore);
		return;
	}
	/* a neighbour is a guess: held (kept by updates) only once the
	 * client faults on it or writes it; until then a write elsewhere
	 * invalidates it (docs/dsm.md "Updates") */
	lm_cache_touch(c, cp);
	hold(c, from, cp->page);
	c->stats.fetch_hits++;
	reply_pages(c, from, req_id, cp->page, cp->version, cp->data, more,
		    nmore);
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
		struct cpage *cp = lm_cache_find(c, page);
		struct lm_delta *w = NULL, *open;

		if (cp)
			cp->tag = ++c->next_tag;
		if (c->updates) {
			/* a refused mask only costs this epoch its updates */
			w = lm_updates_writer_mask(c->updates, page,
						   (uint32_t)slot);
			lm_updates_hold(c->updates, (uint32_t)slot, page);
		}
		/* the copy, the writer's mask and the delta from one pass
		 * over the diff */
		open = lm_deltas_open(c->deltas, page, slot_rank(c, slot));
		if (!open) {
			if (cp)
				lm_diff_apply_valid(cp->data, diff, len);
			if (w)
				lm_delta_mark_valid_diff(w, diff, len);
			lm_log_error("cluster %s: no memory for a delta of "
				     "page %u", c->cfg->name, page);
			reply_status(c, from, req_id, LM_MSG_FLUSH_OK,
				     LM_ENOMEM);
			return;
		}
		lm_delta_add_valid_diff_also(open, w, cp ? cp->data : NULL,
					     diff, len);
	}
	c->stats.flushes++;
	reply_status(c, from, req_id, LM_MSG_FLUSH_OK, 0);
	keep_budget(c);
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
	cl->at_barrier = true;
	cl->barrier_id = m->id;
	cl->barrier_req = req_id;
	for (uint32_t i = 0; i < c->nclients; i++)
		if (c->clients[i].at_barrier &&
		    c->clients[i].barrier_id == m->id)
			arrived++;
	if (arrived < c->nclients)
		return;
	c->barrier_up = true;
	c->barrier_up_id = m->id;
	c->stats.barriers++;
	lm_cluster_park(c, LM_MSG_BARRIER, m->id, 0, 0, 0, NULL, 0);
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

/* Pages a call, about 0.1 ms with LU's four writers a page. */
#define AHEAD_PAGES 32

bool lm_lemuriad_background(lm_lemuriad *c)
{
	if (c->rel.staging)
		return lm_release_step(c) || c->ahead;
	if (c->ahead)
		c->ahead = lm_updates_encode_ahead(c->updates, copy_for_ahead,
						   c, AHEAD_PAGES);
	return c->ahead;
}

void lm_lemuriad_tick(lm_lemuriad *c)
{
	/* a staged release reads the epoch's state, which a token going
	 * back would change (its UNLOCK registers what was written): the
	 * next tick will do */
	if (c->rel.staging)
		return;
	lm_tokens_tick(c);
}

static void handle_lock(lm_lemuriad *c, int slot, uint16_t from,
			uint32_t req_id, const struct lm_msg *m)
{
	uint32_t rank = slot_rank(c, slot);
	struct token *t = lm_token_get(c, m->id);

	if (!t) {
		count_bad(c, from, m, "no memory for the lock");
		return;
	}
	if (t->busy && t->holder == rank) {
		count_bad(c, from, m, "LOCK of a lock it holds");
		return;
	}
	for (size_t i = 0; i < t->nq; i++) {
		if (t->q[i].rank == rank) {
			count_bad(c, from, m, "second LOCK while waiting");
			return;
		}
	}
	if (lm_token_enqueue(t, from, req_id, rank) < 0) {
		count_bad(c, from, m, "no memory for the lock");
		return;
	}
	if (t->here) {
		lm_token_next(c, t); /* cached here: no message leaves */
		return;
	}
	lm_token_ask(c, t);
}

static void handle_unlock(lm_lemuriad *c, int slot, uint16_t from,
			  uint32_t req_id, const struct lm_msg *m)
{
	uint32_t rank = slot_rank(c, slot);
	struct token *t = lm_token_find(c, m->id);

	if (!t || !t->here || !t->busy || t->holder != rank) {
		reply_status(c, from, req_id, LM_MSG_UNLOCK_OK, LM_EINVAL);
		return;
	}
	t->busy = false;
	reply_status(c, from, req_id, LM_MSG_UNLOCK_OK, 0);
	lm_token_next(c, t);
}

/* The manager wants the token back: at once when nobody here holds it,
 * else after at most LM_LEMURIAD_HANDOFFS_MAX more local hand-offs. */
static void handle_recall(lm_lemuriad *c, const struct lm_msg *m)
{
	struct token *t = lm_token_find(c, m->id);

	if (!t || !t->here) {
		/* on its way back already */
		count_bad(c, c->reflector, m, "RECALL of a token not here");
		return;
	}
	c->stats.recalls++;
	t->recalled = true;
	t->handoffs = 0;
	lm_token_next(c, t);
}

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
	lm_cluster_park(c, LM_MSG_CREATE, 0, m->rank, m->status, m->offset,
			m->data, m->data_len);
	reply_status(c, from, req_id, LM_MSG_CREATE_OK, 0);
}

static void reply_work(lm_lemuriad *c, int slot, const struct lm_msg *create)
{
	struct client *cl = &c->clients[slot];

	cl->wants_work = false;
	cl->fresh = create->offset != LM_CREATE_NO_WORK;
	c->out.reply(c->ctx, slot_node(c, slot), cl->work_req, create);
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
	lm_cluster_park(c, LM_MSG_END, 0, slot_rank(c, slot), m->status, 0,
			NULL, 0);
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
		lm_cluster_apply_notices(c, c->end_notices, c->end_nnotices);
		c->ends -= cl->end_count;
		cl->wants_end = false;
		msg_init(c, &r, LM_MSG_RELEASE);
		r.id = 0;
		r.notices = c->end_notices;
		r.nnotices = c->end_nnotices;
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
	for (size_t i = c->ntokens; i-- > 0;) {
		struct token *t = &c->tokens[i];

		for (size_t k = t->nq; k-- > 0;)
			if (t->q[k].rank == rank) {
				memmove(&t->q[k], &t->q[k + 1],
					(t->nq - k - 1) * sizeof(*t->q));
				t->nq--;
			}
		if (t->busy && t->holder == rank) {
			t->busy = false;
			lm_token_next(c, t);
		} else {
			lm_token_tidy(c, t);
		}
	}
	free_client_work(cl);
	memset(cl, 0, sizeof(*cl));
	lm_tokens_recheck(c); /* it was perhaps fresh */
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
		/* answered even in an aborted run, so the client can go */
		forget_client(c, slot);
		reply_status(c, from, req_id, LM_MSG_LEAVE_OK, 0);
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
	if (kind != LM_REL_REQUEST) {
		count_bad(c, from, m, "expected a request");
		return;
	}
	was_fresh = lm_client_fresh(&c->clients[slot]);
	if (m->type != LM_MSG_WAIT_WORK)
		c->clients[slot].active = true;
	switch (m->type) {
	case LM_MSG_FETCH:
		handle_fetch(c, from, req_id, m, false, 0, NULL, 0);
		break;
	case LM_MSG_FETCHV:
		handle_fetchv(c, from, req_id, m);
		break;
	case LM_MSG_FLUSH:
		handle_flush(c, slot, from, req_id, m);
		break;
	case LM_MSG_BARRIER:
		handle_barrier(c, slot, from, req_id, m);
		break;
	case LM_MSG_LOCK:
		handle_lock(c, slot, from, req_id, m);
		break;
	case LM_MSG_UNLOCK:
		handle_unlock(c, slot, from, req_id, m);
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
	 * client's claim on recalled tokens (tokens.c) */
	if (m->type == LM_MSG_LOCK || m->type == LM_MSG_UNLOCK ||
	    m->type == LM_MSG_BARRIER || m->type == LM_MSG_END ||
	    m->type == LM_MSG_WAIT_END)
		c->clients[slot].fresh = false;
	if (was_fresh && !lm_client_fresh(&c->clients[slot]))
		lm_tokens_recheck(c);
}

/* ---- messages from the reflector ----------------------------------- */

void lm_cluster_reply_page(lm_lemuriad *c, struct upreq *up,
			   const struct lm_msg *m)
{
	struct waiter **pp = &up->waiters;
	struct lm_msg r;

	if (m->type != LM_MSG_PAGE || m->page != up->page ||
	    m->data_len != c->page_size || !m->data) {
		count_bad(c, c->reflector, m, "bad reply to FETCH");
		/* an empty PAGE: every waiter fails instead of hanging */
		msg_init(c, &r, LM_MSG_PAGE);
		r.page = up->page;
		for (struct waiter *w = up->waiters; w; w = w->next)
			c->out.reply(c->ctx, w->node, w->req_id, &r);
		if (up->pre)
			lm_release_arrived(c, up, NULL, 0);
		lm_upreq_free(c, up);
		return;
	}
	/* the home's copy plus what our clients wrote and the home has not
	 * got yet: the cluster copy (DESIGN.md §2, read fault); a page a
	 * held release rebuilt from a diff is there already */
	if (m->data != c->pagebuf)
		memcpy(c->pagebuf, m->data, c->page_size);
	lm_deltas_overlay(c->deltas, m->page, m->version, c->pagebuf);
	if (m->version >= up->min_version && m->version >= up->left)
		lm_cache_put(c, m->page, m->version, c->pagebuf);
	/* a reply that crossed data of ours leaving is no update source */
	if (up->pre)
		lm_release_arrived(c, up,
				   m->version >= up->left ? c->pagebuf : NULL,
				   m->version);
	msg_init(c, &r, LM_MSG_PAGE);
	r.page = m->page;
	r.version = m->version;
	r.data = c->pagebuf;
	r.data_len = m->data_len;
	while (*pp) {
		struct waiter *w = *pp;

		if (w->need > m->version) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (w->nmore)
			reply_pages(c, w->node, w->req_id, m->page, m->version,
				    c->pagebuf, w->more, w->nmore);
		else
			c->out.reply(c->ctx, w->node, w->req_id, &r);
		hold(c, w->node, m->page);
		free(w);
		c->nwaits--;
	}
	if (!up->waiters && !up->pre) {
		lm_upreq_free(c, up);
		return;
	}
	/* asked after a newer notice: this reply is too old for them */
	c->stats.fetch_misses++;
	lm_cluster_fetch_again(c, up);
}

void lm_cluster_fetch_again(lm_lemuriad *c, struct upreq *up)
{
	struct lm_msg r;

	lm_upreq_renumber(c, up);
	/* the new request follows all that left so far, and asks for their
	 * versions once known (`known`) */
	up->left = c->leaving[up->page] ? UINT32_MAX : 0;
	msg_init(c, &r, LM_MSG_FETCH);
	r.page = up->page;
	r.version = up->min_version > c->known[up->page] ? up->min_version :
		    c->known[up->page];
	c->out.request(c->ctx, c->reflector, up->req_id, &r);
}

/* Our registrations' versions: a copy older than one of them may lack
 * data of ours that has left (sent with its registration, pushed or
 * pulled) and that we can no longer write on top of it, so no FETCH of
 * ours may be answered with one, not even from a reflector's cache of
 * another home's pages (docs/dsm.md, "Own data that left"). */
static void know_registered(lm_lemuriad *c, const struct lm_notice *n,
			    uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		if (n[i].page >= c->npages)
			continue;
		if (c->known[n[i].page] < n[i].version)
			c->known[n[i].page] = n[i].version;
		c->leaving[n[i].page] = 0;
	}
}

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
	struct lm_msg r;

	up = lm_upreq_find(c, req_id);
	if (!up) {
		count_bad(c, c->reflector, m, "reply to no request");
		return;
	}
	if (up->kind == UP_FETCH) {
		uint32_t page = up->page, more[LM_LEMURIAD_FETCHV_MAX - 1];
		uint32_t nmore = 0, reach = 0;
		bool ahead = up->ahead;

		/* the miss's own FETCHV's other pages go ahead too */
		if (ahead && up->waiters) {
			nmore = up->waiters->nmore;
			memcpy(more, up->waiters->more, nmore * sizeof(*more));
			reach = up->waiters->reach;
		}
		up->ahead = false; /* once, if it is asked again */
		lm_cluster_reply_page(c, up, m);
		if (ahead && m->type == LM_MSG_PAGE && m->data)
			lm_cluster_fetch_ahead(c, page, reach, more, nmore);
		if (c->rel.active && c->rel.pending == 0)
			lm_release_finish(c);
		return;
	}
	if (up->kind == UP_FETCHV) {
		lm_release_pages(c, up, m);
		if (c->rel.active && c->rel.pending == 0)
			lm_release_finish(c);
		return;
	}
	if (up->kind == UP_REGISTER || up->kind == UP_PUSH) {
		bool batch = up->kind == UP_REGISTER;

		if (m->type != LM_MSG_REGISTER_OK) {
			count_bad(c, c->reflector, m, "reply of the wrong type");
		} else {
			if (m->status) {
				/* writes of ours are lost */
				char what[80];

				snprintf(what, sizeof(what), "its deltas were "
					 "refused by their homes (%s)",
					 lm_strerror(m->status));
				lm_upreq_free(c, up);
				lose_run(c, what);
				return;
			}
			lm_deltas_registered(c->deltas, m->notices,
					     m->nnotices);
			know_registered(c, m->notices, m->nnotices);
			if (batch)
				lm_token_note_epoch(c, m->notices,
						    m->nnotices);
		}
		lm_upreq_free(c, up);
		if (batch && c->batch_parts && --c->batch_parts == 0)
			batch_finished(c);
		return;
	}
	if (m->type != expect[up->kind]) {
		count_bad(c, c->reflector, m, "reply of the wrong type");
		lm_upreq_free(c, up);
		return;
	}
	r = *m;
	if (up->kind == UP_LOCK) {
		struct token *t = lm_token_find(c, up->lock_id);

		/* older copies go before the holder can read them (I3) */
		lm_cluster_apply_notices(c, m->notices, m->nnotices);
		if (!t || t->here) {
			/* nobody asked (a reset run?): hand it straight back
			 * so that the others do not wait for it forever */
			msg_init(c, &r, LM_MSG_UNLOCK);
			r.id = up->lock_id;
			r.rank = up->rank;
			c->out.send(c->ctx, c->reflector, &r);
			lm_upreq_free(c, up);
			return;
		}
		t->asked = false;
		t->here = true;
		t->busy = false;
		t->recalled = false;
		t->handoffs = 0;
		t->granted = up->rank;
		lm_upreq_free(c, up);
		lm_token_next(c, t);
		return;
	}
	if (up->waiters)
		c->out.reply(c->ctx, up->waiters->node, up->waiters->req_id,
			     &r);
	lm_upreq_free(c, up);
}

/* A home wants a delta of ours: its data, and we forget it. */
static void handle_pull(lm_lemuriad *c, uint32_t req_id,
			const struct lm_msg *m)
{
	struct lm_msg r;
	size_t len = 0;
	int rc = LM_EINVAL;

	msg_init(c, &r, LM_MSG_DELTA);
	r.page = m->page;
	r.version = m->version;
	if (m->page < c->npages)
		rc = lm_deltas_pull(c->deltas, m->page, m->version,
				    c->deltabuf + LM_MSG_DIFFS_ENTRY_HDR,
				    lm_diff_bound(c->page_size), &len);
	if (rc == 0) {
		lm_msg_diffs_put_header(c->deltabuf, m->page, len);
		r.diffs.data = c->deltabuf;
		r.diffs.len = len + LM_MSG_DIFFS_ENTRY_HDR;
		r.diffs.count = 1;
		mark_data_left(c, m->page, m->version);
	} else {
		/* the usual cause is a PULL that crossed the delta's PUSH
		 * (docs/dsm.md "Races"); the home, which knows whether it
		 * still lacks the data, logs an error when it does */
		lm_log_limited("PULLs of deltas not held", LM_LOG_DEBUG,
			       "cluster %s: PULL of page %u version %u: %s",
			       c->cfg->name, m->page, m->version,
			       lm_strerror(rc));
	}
	r.status = rc;
	c->out.reply(c->ctx, c->reflector, req_id, &r);
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
	lm_cluster_apply_notices(c, m->notices, m->nnotices);
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
		handle_pull(c, req_id, m);
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
		handle_recall(c, m);
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
	c->layout_hash = layout_hash;
	c->reflector = layout->reflectors[cfg->reflector_index].id;
	c->index = (uint32_t)(cfg - layout->clusters);
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
	c->eager = layout->relay == LM_RELAY_EAGER;
	c->deltas = lm_deltas_create(c->page_size, (uint32_t)c->npages,
				     c->index,
				     layout->relay == LM_RELAY_ADAPTIVE,
				     emit_register, c);
	/* freed delta buffers kept for reuse, bounded like the cache's
	 * spare copies */
	if (c->deltas)
		lm_deltas_keep_spares(c->deltas, c->cache_max / 8);
	c->pagebuf = malloc(c->page_size);
	c->known = calloc(c->npages ? c->npages : 1, sizeof(*c->known));
	c->leaving = calloc(c->npages ? c->npages : 1, 1);
	if (lm_notice_set_init(&c->epoch_notes, c->npages) < 0)
		goto err;
	c->deltabuf = malloc(lm_diff_bound(c->page_size) + LM_MSG_DIFFS_ENTRY_HDR);
	c->fetchv_cap = LM_LEMURIAD_FETCHV_MAX *
		((size_t)c->page_size + LM_MSG_DIFFS_ENTRY_HDR);
	c->fetchv_buf = malloc(c->fetchv_cap);
	/* the epoch's masks, and the updates encoded at a release: an eighth
	 * of the cache each at most (docs/dsm.md "Updates") */
	if (layout->updates)
		c->updates = lm_updates_create(
			c->page_size, (uint32_t)c->npages, c->nclients,
			c->cache_max * c->page_size / 8);
	if (!c->by_page || !c->clients || (c->nclients && c->first_node == 0) ||
	    !c->up_by_id || !c->up_by_page ||
	    !c->deltas || !c->pagebuf || !c->deltabuf || !c->fetchv_buf ||
	    !c->known || !c->leaving ||
	    (layout->updates && !c->updates))
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
	lm_updates_destroy(c->updates);
	lm_release_free_deferred(c);
	free(c->deferred);
	free(c->parked);
	free(c->pagebuf);
	free(c->deltabuf);
	free(c->fetchv_buf);
	free(c->known);
	free(c->leaving);
	free(c->by_page);
	free(c->up_by_id);
	free(c->up_by_page);
	free(c->clients);
	free(c->tokens);
	lm_notice_set_free(&c->epoch_notes);
	free(c);
}

void lm_lemuriad_handle(lm_lemuriad *c, uint16_t from,
		       enum lm_rel_msg_kind kind, uint32_t req_id,
		       const struct lm_msg *m)
{
	int slot;

	if (!c || !m)
		return;
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

void lm_lemuriad_peer_lost(lm_lemuriad *c, uint16_t node)
{
	char reason[48];
	int slot;

	if (!c)
		return;
	if (node == c->reflector) {
		abort_run(c, LM_LEMURIAD_ABORT_REFLECTOR, "reflector lost", -1);
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
