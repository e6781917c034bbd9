/* The lemuriad's deltas going up (docs/dsm.md "Lazy, adaptive and eager
 * relay"): registrations of what our clients flushed, the pushes and
 * PULLs of their data, the cache budget the deltas share, and the
 * messages parked until the registration they publish is answered (I2):
 * a barrier arrival, UNLOCK, END or CREATE for the reflector, or a local
 * GRANT (handed to locks.c through hooks.grant). */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "deltas.h"
#include "diff.h"
#include "lm_error.h"
#include "log.h"

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

void lm_park_emit(void *ctx, const struct lm_msg *reg)
{
	lm_lemuriad *c = ctx;
	struct upreq *up = lm_upreq_new(c, c->sealing ? UP_REGISTER : UP_PUSH);
	struct lm_msg r = *reg;

	/* a push names its version; data sent with a new registration
	 * gets one only in the answer */
	for (uint32_t i = 0; i < reg->nnotices; i++)
		if (lm_reg_has_data(reg->notices[i].base))
			mark_data_left(c, reg->notices[i].page,
				       reg->notices[i].base == LM_REG_PUSH ?
				       reg->notices[i].version : UINT32_MAX);
	if (!up) {
		lm_log_error("cluster %s: no memory to register deltas; "
			     "they are lost", c->cfg->name);
		return;
	}
	r.run = c->run;
	/* the homes tag the pages with the batch's number: every REGISTER
	 * of a batch (one or more seals) the same, so that a reader waits
	 * for all of it (docs/dsm.md "Order"); a push changes no version */
	r.id = c->sealing ? c->batch_started : 0;
	if (c->sealing)
		c->batch_parts++;
	c->out.request(c->ctx, c->reflector, up->req_id, &r);
}

static void start_batch(lm_lemuriad *c, bool with_data, bool all_sealed);

static void send_parked(lm_lemuriad *c, const struct parked *p)
{
	struct lm_msg m;

	if (p->type == LM_MSG_GRANT) {
		c->hooks.grant(c, p->id, p->node, p->req_id);
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

/* Whether a parked message may go now.  A BARRIER, and an UNLOCK that
 * gives the token back, go right behind their REGISTERs: the channel to
 * R is FIFO, R enters its own part before it reads what follows and
 * holds either until the other homes acked theirs (docs/dsm.md "Several
 * reflectors", held messages), so the deltas are registered before
 * anyone can pass the barrier or take the lock (I2).  R answers the
 * registration before it lets the held message go, so the answer
 * reaches us before the RELEASE, or before any GRANT that follows the
 * UNLOCK.  A GRANT must wait: it names the versions the answer brings;
 * END and CREATE wait too (once a run: nothing to gain). */
static bool may_go(const lm_lemuriad *c, const struct parked *p)
{
	return p->need <= c->batch_done ||
	       ((p->type == LM_MSG_BARRIER || p->type == LM_MSG_UNLOCK) &&
		p->need <= c->batch_started);
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
	/* a recalled page's answer named the next one (owed_registration) */
	if (c->batch_owed && !batch_outstanding(c)) {
		c->batch_owed = false;
		if (lm_deltas_dirty(c->deltas))
			start_batch(c, false, false);
	}
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

/* Queues p (filled in by the caller from *p) behind the registration of
 * every delta flushed so far; `data` is copied. */
static void park(lm_lemuriad *c, const struct parked *p, const uint8_t *data)
{
	struct parked *e;

	/* copy = cluster: what goes up publishes what the cluster wrote, so
	 * it is sealed from the shared copy first, as the clients' FLUSHes
	 * would have come first (I2).  A local GRANT needs none: the next
	 * holder reads the same copy. */
	if (c->shared && p->type != LM_MSG_GRANT) {
		/* a barrier's BARRIER goes up once every client waits in
		 * it: twins of idle pages may go then */
		if (lm_copy_seal(c, p->type == LM_MSG_BARRIER) != 0) {
			c->hooks.lose(c, "no memory for the deltas of the "
				      "cluster's copy");
			return;
		}
		lm_park_keep_budget(c);
	}

	if (c->nparked == c->parked_cap) {
		size_t cap = c->parked_cap ? c->parked_cap * 2 : 16;
		struct parked *np = realloc(c->parked, cap * sizeof(*np));

		if (!np) {
			c->hooks.lose(c, "out of memory for a message to "
				      "send up");
			return;
		}
		c->parked = np;
		c->parked_cap = cap;
	}
	e = &c->parked[c->nparked];
	*e = *p;
	e->data = NULL;
	if (p->data_len) {
		e->data = malloc(p->data_len);
		if (!e->data) {
			c->hooks.lose(c, "out of memory for a message to "
				      "send up");
			return;
		}
		memcpy(e->data, data, p->data_len);
	}
	e->need = c->batch_started + (lm_deltas_dirty(c->deltas) ? 1 : 0);
	c->nparked++;
	flush_parked(c);
}

void lm_park_barrier(lm_lemuriad *c, uint32_t id)
{
	park(c, &(struct parked){ .type = LM_MSG_BARRIER, .id = id }, NULL);
}

void lm_park_unlock(lm_lemuriad *c, uint32_t id, uint32_t rank)
{
	park(c, &(struct parked){ .type = LM_MSG_UNLOCK, .id = id,
				  .rank = rank }, NULL);
}

void lm_park_end(lm_lemuriad *c, uint32_t rank, int32_t status)
{
	park(c, &(struct parked){ .type = LM_MSG_END, .rank = rank,
				  .status = status }, NULL);
}

void lm_park_create(lm_lemuriad *c, uint32_t rank, int32_t status,
		    uint64_t offset, const uint8_t *data, size_t data_len)
{
	park(c, &(struct parked){ .type = LM_MSG_CREATE, .rank = rank,
				  .status = status, .offset = offset,
				  .data_len = data_len }, data);
}

void lm_park_grant(lm_lemuriad *c, uint32_t id, uint16_t node,
		   uint32_t req_id)
{
	park(c, &(struct parked){ .type = LM_MSG_GRANT, .id = id,
				  .node = node, .req_id = req_id }, NULL);
	c->stats.local_handoffs++;
}

/* docs/dsm.md "Eventual visibility": nothing sealed the cluster's copy
 * for LM_LEMURIAD_PUBLISH_US (its clients compute, or wait in loops for
 * each other, with no release between); what they wrote goes up now, as
 * a release's seal would send it, so that the other clusters' lemuriads
 * hear of it (CHANGED) within a bound.  Not while a registration or a
 * parked message is out: those seal and publish anyway. */
void lm_park_publish(lm_lemuriad *c)
{
	if (!c->shared || c->nparked || batch_outstanding(c) ||
	    c->now_us - c->sealed_us < LM_LEMURIAD_PUBLISH_US)
		return;
	if (lm_copy_seal(c, false) != 0) {
		c->hooks.lose(c, "no memory for the deltas of the cluster's "
			      "copy");
		return;
	}
	c->stats.copy_published++;
	lm_park_keep_budget(c);
	if (lm_deltas_dirty(c->deltas) && !batch_outstanding(c))
		start_batch(c, false, false);
}

void lm_park_keep_budget(lm_lemuriad *c)
{
	/* copies go first (they can be fetched again); deltas alone beyond
	 * it go home with their data */
	while (over_budget(c) && lm_cache_evict_one(c))
		;
	if (over_budget(c) && !batch_outstanding(c)) {
		c->stats.spills++;
		start_batch(c, true, true);
	}
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

int lm_park_answer(lm_lemuriad *c, struct upreq *up, const struct lm_msg *m)
{
	bool batch = up->kind == UP_REGISTER;

	if (m->type != LM_MSG_REGISTER_OK) {
		count_bad(c, c->reflector, m, "reply of the wrong type");
	} else {
		if (m->status) {
			/* writes of ours are lost */
			lm_upreq_free(c, up);
			return m->status;
		}
		lm_deltas_registered(c->deltas, m->notices, m->nnotices);
		know_registered(c, m->notices, m->nnotices);
		lm_copy_advance(c, m->notices, m->nnotices);
		for (uint32_t i = 0; i < m->nnotices; i++)
			lm_copy_note_known(c, m->notices[i].page);
		lm_copy_own(c, m);
		lm_changes_note(c, m->notices, m->nnotices);
		if (batch)
			lm_notices_note(c, m->notices, m->nnotices);
	}
	lm_upreq_free(c, up);
	if (batch && c->batch_parts && --c->batch_parts == 0)
		batch_finished(c);
	return 0;
}

/* A page we own leaves whole, as it is now: it may hold a pointer to a
 * record on a twinned page that no seal took yet.  So the copy is sealed
 * after the page was read, and the answer names the registration that
 * will carry that seal: a reader waits for it (docs/dsm.md "Order").
 * The answers wait for the messages at hand (a home pulls a page and
 * the ones after it together): one seal for all of them
 * (lm_park_send_recalls).  A page nobody wrote since we came to own it
 * needs none (`seal` false): every byte of it was read by a seal before,
 * with every record it may point at.  Either way the answer names the
 * registration that carries every diff sealed so far: the one out, one
 * that goes up now, or the one right after the one out. */
static uint32_t owed_registration(lm_lemuriad *c, bool seal)
{
	if (seal && lm_copy_seal(c, false) != 0) {
		c->hooks.lose(c, "no memory for the deltas of the cluster's "
			      "copy");
		return 0;
	}
	lm_park_keep_budget(c);
	if (!lm_deltas_dirty(c->deltas))
		return c->batch_started;
	if (!batch_outstanding(c)) {
		start_batch(c, false, false);
		return c->batch_started;
	}
	c->batch_owed = true;
	return c->batch_started + 1;
}

/* Keeps the answer of a PULL of an owned page (in c->deltabuf, len
 * bytes) for lm_park_send_recalls; false without memory. */
static bool queue_recall(lm_lemuriad *c, uint32_t req_id,
			 const struct lm_msg *m, size_t len, bool unwritten)
{
	struct recall *q;

	if (c->nrecalls == c->recalls_cap) {
		size_t cap = c->recalls_cap ? 2 * c->recalls_cap : 8;

		q = realloc(c->recalls, cap * sizeof(*q));
		if (!q)
			return false;
		c->recalls = q;
		c->recalls_cap = cap;
	}
	q = &c->recalls[c->nrecalls];
	if (!(q->data = malloc(len)))
		return false;
	memcpy(q->data, c->deltabuf, len);
	q->len = len;
	q->req_id = req_id;
	q->page = m->page;
	q->version = m->version;
	q->unwritten = unwritten;
	c->nrecalls++;
	if (c->out.later)
		c->out.later(c->ctx);
	else
		lm_park_send_recalls(c);
	return true;
}

void lm_park_send_recalls(lm_lemuriad *c)
{
	bool seal = false;
	uint32_t owed;

	if (!c->nrecalls)
		return;
	for (size_t i = 0; i < c->nrecalls; i++)
		seal |= !c->recalls[i].unwritten;
	owed = owed_registration(c, seal);
	/* their readers wait for that registration's list (docs/dsm.md
	 * "Order"): it goes without the usual delay */
	if (owed > c->tell_owed)
		c->tell_owed = owed;
	for (size_t i = 0; i < c->nrecalls; i++) {
		struct recall *q = &c->recalls[i];
		struct lm_msg r;

		msg_init(c, &r, LM_MSG_DELTA);
		r.id = owed;
		r.page = q->page;
		r.version = q->version;
		r.diffs.data = q->data;
		r.diffs.len = q->len;
		r.diffs.count = 1;
		c->out.reply(c->ctx, c->reflector, q->req_id, &r);
		free(q->data);
	}
	c->nrecalls = 0;
}

/* A home wants a delta of ours: its data, and we forget it. */
void lm_park_pull(lm_lemuriad *c, uint32_t req_id, const struct lm_msg *m)
{
	struct lm_msg r;
	size_t len = 0;
	bool unwritten = false;
	int rc;

	msg_init(c, &r, LM_MSG_DELTA);
	r.page = m->page;
	r.version = m->version;
	/* a page we own goes whole: our writes since are in no delta */
	rc = lm_copy_recall(c, m->page, c->deltabuf + LM_MSG_DIFFS_ENTRY_HDR,
			    lm_diff_bound(c->page_size), &len, &unwritten);
	if (rc == 0) {
		lm_deltas_forget(c->deltas, m->page);
		lm_msg_diffs_put_header(c->deltabuf, m->page, len);
		mark_data_left(c, m->page, m->version);
		if (queue_recall(c, req_id, m, len + LM_MSG_DIFFS_ENTRY_HDR,
				 unwritten))
			return;
		/* no memory: answered alone */
		r.id = owed_registration(c, !unwritten);
	}
	else if (rc == 1 && m->page >= c->npages)
		rc = LM_EINVAL;
	else if (rc == 1 &&
		 (rc = lm_deltas_pull(c->deltas, m->page, m->version,
				      c->deltabuf + LM_MSG_DIFFS_ENTRY_HDR,
				      lm_diff_bound(c->page_size), &len)) == 0)
		lm_copy_pulled(c, m->page);
	if (rc == 0) {
		/* a recall answered alone has its header already */
		if (!r.id)
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

void lm_park_answer_waiting(lm_lemuriad *c, const struct lm_msg *m,
			    uint16_t skip)
{
	for (size_t i = 0; i < c->nparked; i++)
		if (c->parked[i].type == LM_MSG_GRANT &&
		    c->parked[i].node != skip)
			c->out.reply(c->ctx, c->parked[i].node,
				     c->parked[i].req_id, m);
}

void lm_park_clear(lm_lemuriad *c)
{
	for (size_t i = 0; i < c->nparked; i++)
		free(c->parked[i].data);
	c->nparked = 0;
	for (size_t i = 0; i < c->nrecalls; i++)
		free(c->recalls[i].data);
	c->nrecalls = 0;
	c->batch_started = c->batch_done = c->batch_parts = 0;
	c->batch_owed = false;
}
