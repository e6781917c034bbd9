/* The router of a reflector's own clusters (docs/dsm.md, "Several
 * reflectors"): requests to other reflectors, the cache of pages relayed
 * from other homes, diffs and registrations split by home, the epoch set,
 * and synchronisation messages held until the homes acked (I2). */
#include "home_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "log.h"
#include "lm_error.h"

struct forward *lm_router_fwd_add(lm_home *h, uint16_t type, uint16_t to,
				  uint16_t node, uint32_t node_req)
{
	struct forward *f;

	if (h->nfwd == h->fwd_cap) {
		size_t cap = h->fwd_cap ? h->fwd_cap * 2 : 64;
		struct forward *nf;

		if (h->nfwd >= LM_HOME_FORWARDS_MAX)
			return NULL;
		nf = realloc(h->fwd, cap * sizeof(*nf));
		if (!nf)
			return NULL;
		h->fwd = nf;
		h->fwd_cap = cap;
	}
	f = &h->fwd[h->nfwd++];
	memset(f, 0, sizeof(*f));
	f->req_id = ++h->next_req;
	f->type = type;
	f->to = to;
	f->node = node;
	f->node_req = node_req;
	return f;
}

static struct forward *fwd_find(lm_home *h, uint32_t req_id)
{
	for (size_t i = 0; i < h->nfwd; i++)
		if (h->fwd[i].req_id == req_id)
			return &h->fwd[i];
	return NULL;
}

static void fwd_remove(lm_home *h, struct forward *f)
{
	*f = h->fwd[--h->nfwd];
}

/* Sends cluster request m (from node, node_req) on to reflector `to`. */
void lm_router_forward(lm_home *h, uint32_t to, const struct lm_msg *m,
		       uint16_t node, uint32_t node_req)
{
	struct forward *f = lm_router_fwd_add(h, m->type,
					      refl_node(h, to), node,
					      node_req);

	if (!f) {
		/* its sender would wait for the answer for ever */
		lose_run(h, "too many requests in flight to forward one more");
		return;
	}
	h->out.request(h->ctx, f->to, f->req_id, m);
}

/* Whether a FLUSH forwarded up to seq `mark` still waits for its ack. */
static bool flush_pending_upto(const lm_home *h, uint64_t mark)
{
	for (size_t i = 0; i < h->nfwd; i++)
		if (h->fwd[i].seq && h->fwd[i].seq <= mark)
			return true;
	return false;
}

static size_t rbucket(const lm_home *h, uint32_t page)
{
	return (size_t)((page * 2654435761u) >> (32 - h->rbits));
}

static struct rpage *rcache_find(const lm_home *h, uint32_t page)
{
	struct rpage *rp = h->rbuckets[rbucket(h, page)];

	while (rp && rp->page != page)
		rp = rp->hnext;
	return rp;
}

static void rlru_unlink(lm_home *h, struct rpage *rp)
{
	if (rp->prev)
		rp->prev->next = rp->next;
	else
		h->rhead = rp->next;
	if (rp->next)
		rp->next->prev = rp->prev;
	else
		h->rtail = rp->prev;
	rp->prev = rp->next = NULL;
}

static void rlru_push(lm_home *h, struct rpage *rp)
{
	rp->next = h->rhead;
	if (h->rhead)
		h->rhead->prev = rp;
	else
		h->rtail = rp;
	h->rhead = rp;
}

static void rcache_remove(lm_home *h, struct rpage *rp)
{
	struct rpage **pp = &h->rbuckets[rbucket(h, rp->page)];

	while (*pp != rp)
		pp = &(*pp)->hnext;
	*pp = rp->hnext;
	rlru_unlink(h, rp);
	free(rp);
	h->ncached--;
}

void lm_router_cache_clear(lm_home *h)
{
	while (h->rhead)
		rcache_remove(h, h->rhead);
}

/* Keeps `data` as page at version; an older copy is replaced, a newer one
 * kept (I3). */
static void rcache_put(lm_home *h, uint32_t page, uint32_t version,
		       const uint8_t *data)
{
	struct rpage *rp = rcache_find(h, page);
	size_t b;

	if (rp) {
		if (version > rp->version) {
			memcpy(rp->data, data, h->page_size);
			rp->version = version;
		}
		rlru_unlink(h, rp);
		rlru_push(h, rp);
		return;
	}
	if (h->ncached >= h->cache_max)
		rcache_remove(h, h->rtail);
	rp = malloc(sizeof(*rp) + h->page_size);
	if (!rp)
		return; /* a cache: nothing is lost */
	rp->page = page;
	rp->version = version;
	memcpy(rp->data, data, h->page_size);
	b = rbucket(h, page);
	rp->hnext = h->rbuckets[b];
	h->rbuckets[b] = rp;
	rp->prev = NULL;
	rlru_push(h, rp);
	h->ncached++;
}

/* Drops copies older than the notices passing down (they could never
 * answer a FETCH of the clusters that learn them). */
static void rcache_invalidate(lm_home *h, const struct lm_notice *n,
			      uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		struct rpage *rp = rcache_find(h, n[i].page);

		if (rp && rp->version < n[i].version)
			rcache_remove(h, rp);
	}
}

static struct rfetch *rfetch_by_page(lm_home *h, uint32_t page)
{
	for (size_t i = 0; i < h->nrfetches; i++)
		if (h->rfetches[i].page == page)
			return &h->rfetches[i];
	return NULL;
}

static struct rfetch *rfetch_by_id(lm_home *h, uint32_t id)
{
	for (size_t i = 0; i < h->nrfetches; i++)
		if (h->rfetches[i].id == id)
			return &h->rfetches[i];
	return NULL;
}

static void rfetch_free_waiters(struct rfetch *rf)
{
	while (rf->waiters) {
		struct rwaiter *w = rf->waiters;

		rf->waiters = w->next;
		free(w);
	}
}

void lm_router_fetches_clear(lm_home *h)
{
	for (size_t i = 0; i < h->nrfetches; i++)
		rfetch_free_waiters(&h->rfetches[i]);
	h->nrfetches = 0;
}

/* Sends the FETCH of rf to the page's home, for the newest need. */
static void rfetch_send(lm_home *h, struct rfetch *rf)
{
	struct lm_msg r = msg_new(h, LM_MSG_FETCH);
	struct forward *f;

	r.page = rf->page;
	for (struct rwaiter *w = rf->waiters; w; w = w->next)
		if (w->need > r.version)
			r.version = w->need;
	f = lm_router_fwd_add(h, LM_MSG_FETCH,
			      refl_node(h, lm_home_of_page(h->layout,
							   rf->page)),
			      0, 0);
	if (!f) {
		lm_log_error("home: too many requests in flight; FETCH of "
			     "page %u waits for the next", rf->page);
		return;
	}
	f->agg = rf->id;
	h->stats.fetches_forwarded++;
	h->out.request(h->ctx, f->to, f->req_id, &r);
}

/* A cluster's FETCH of a page homed elsewhere: from our cache when the
 * copy is as new as the cluster needs, else joined to the FETCH in flight,
 * else sent to the home. */
void lm_router_fetch(lm_home *h, uint16_t from, uint32_t req_id,
		     const struct lm_msg *m)
{
	struct rpage *rp = rcache_find(h, m->page);
	struct rfetch *rf;
	struct rwaiter *w, **pp;

	if (rp && rp->version >= m->version) {
		struct lm_msg r = msg_new(h, LM_MSG_PAGE);

		rlru_unlink(h, rp);
		rlru_push(h, rp);
		r.page = rp->page;
		r.version = rp->version;
		r.data = rp->data;
		r.data_len = h->page_size;
		h->stats.fetch_cache_hits++;
		h->out.reply(h->ctx, from, req_id, &r);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		drop_bad(h, from, m, "out of memory");
		return;
	}
	w->node = from;
	w->req_id = req_id;
	w->need = m->version;
	rf = rfetch_by_page(h, m->page);
	if (rf) {
		for (pp = &rf->waiters; *pp; pp = &(*pp)->next)
			;
		*pp = w;
		h->stats.fetches_coalesced++;
		return;
	}
	if (h->nrfetches == h->rfetches_cap) {
		size_t cap = h->rfetches_cap ? h->rfetches_cap * 2 : 16;
		struct rfetch *nr = realloc(h->rfetches, cap * sizeof(*nr));

		if (!nr) {
			free(w);
			drop_bad(h, from, m, "out of memory");
			return;
		}
		h->rfetches = nr;
		h->rfetches_cap = cap;
	}
	rf = &h->rfetches[h->nrfetches++];
	rf->id = ++h->next_rfetch;
	rf->page = m->page;
	rf->waiters = w;
	rfetch_send(h, rf);
}

/* The home's PAGE for one of our FETCHes: cached, and every waiter it is
 * new enough for answered; the others wait for a FETCH sent again. */
static void rfetch_reply(lm_home *h, uint32_t id, const struct lm_msg *m)
{
	struct rfetch *rf = rfetch_by_id(h, id);
	struct rwaiter **pp;
	bool whole;

	if (!rf)
		return;
	whole = m->page == rf->page && m->data &&
		m->data_len == h->page_size;
	if (whole)
		rcache_put(h, m->page, m->version, m->data);
	pp = &rf->waiters;
	while (*pp) {
		struct rwaiter *w = *pp;

		/* an empty PAGE fails every waiter rather than none */
		if (whole && w->need > m->version) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		h->out.reply(h->ctx, w->node, w->req_id, m);
		free(w);
	}
	if (rf->waiters) {
		rfetch_send(h, rf);
		return;
	}
	*rf = h->rfetches[--h->nrfetches];
}

/* One home's part of a cluster's list: applied here or sent to the home,
 * whose ack brings the notices into our epoch set. */
static void flush_part(lm_home *h, uint32_t home, uint32_t writer,
		       const struct lm_msg_diffs *part)
{
	struct lm_msg r;
	struct forward *f;

	if (home == h->self_index) {
		long n = lm_home_apply(h, h->self_id, h->epoch, writer, part);

		for (long i = 0; i < n; i++)
			lm_notice_set_put(&h->epoch_set, &h->scratch[i]);
		return;
	}
	r = msg_new(h, LM_MSG_FLUSH);
	r.rank = writer;
	r.epoch = h->epoch;
	r.diffs = *part;
	f = lm_router_fwd_add(h, LM_MSG_FLUSH, refl_node(h, home), 0, 0);
	if (!f) {
		h->stats.diffs_rejected += part->count;
		lose_run(h, "too many requests in flight to forward diffs");
		return;
	}
	f->seq = ++h->flush_sent;
	h->stats.flushes_forwarded++;
	h->out.request(h->ctx, f->to, f->req_id, &r);
}

/* Splits a cluster's list by home: one part per home reflector. */
void lm_router_flush(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	uint32_t page, first = UINT32_MAX;
	const uint8_t *diff;
	size_t pos = 0, len;
	bool mixed = false;
	long n;

	n = lm_home_flush_check(h, &m->diffs, false);
	if (n < 0) {
		h->stats.diffs_rejected += (uint64_t)-n;
		lm_log_limited("FLUSH lists rejected by a home", LM_LOG_WARN,
			       "home: FLUSH from node %u rejected: malformed "
			       "diff list or page", from);
		return;
	}
	while (lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) == 1) {
		uint32_t home = lm_home_of_page(h->layout, page);

		if (first == UINT32_MAX)
			first = home;
		else if (home != first)
			mixed = true;
	}
	if (n == 0)
		return;
	if (!mixed) {
		flush_part(h, first, m->rank, &m->diffs);
		return;
	}
	if (h->split_cap < m->diffs.len) {
		uint8_t *ns = realloc(h->split, m->diffs.len);

		if (!ns) {
			h->stats.diffs_rejected += (uint64_t)n;
			lm_log_error("home: FLUSH from node %u rejected: out "
				     "of memory", from);
			return;
		}
		h->split = ns;
		h->split_cap = m->diffs.len;
	}
	for (uint32_t k = 0; k < h->nrefl; k++) {
		struct lm_msg_diffs part = { h->split, 0, 0 };

		pos = 0;
		while (lm_msg_diffs_next(&m->diffs, &pos, &page, &diff,
					 &len) == 1) {
			if (lm_home_of_page(h->layout, page) != k)
				continue;
			/* cannot fail: the parts add up to the list */
			(void)lm_msg_diffs_append(h->split, h->split_cap,
						  &part.len, page, diff, len);
			part.count++;
		}
		if (part.count)
			flush_part(h, k, m->rank, &part);
	}
}

static struct reg_agg *agg_find(lm_home *h, uint32_t id)
{
	for (size_t i = 0; i < h->naggs; i++)
		if (h->aggs[i].id == id)
			return &h->aggs[i];
	return NULL;
}

static int agg_add_notices(struct reg_agg *a, const struct lm_notice *v,
			   size_t n)
{
	if (a->n + n > a->cap) {
		size_t cap = a->n + n + 16;
		struct lm_notice *nv = realloc(a->notices, cap * sizeof(*nv));

		if (!nv)
			return LM_ENOMEM;
		a->notices = nv;
		a->cap = cap;
	}
	if (n)
		memcpy(a->notices + a->n, v, n * sizeof(*v));
	a->n += n;
	return 0;
}

/* Answers the cluster once every home has acked its part. */
static void agg_done(lm_home *h, struct reg_agg *a)
{
	struct lm_msg r = msg_new(h, LM_MSG_REGISTER_OK);
	struct reg_agg done;

	if (a->parts)
		return;
	done = *a;
	*a = h->aggs[--h->naggs];
	r.status = done.status;
	r.notices = done.notices;
	r.nnotices = (uint32_t)lm_notices_merge(done.notices, done.n);
	h->out.reply(h->ctx, done.node, done.req_id, &r);
	free(done.notices);
}

/* One home's part of a registration: entered here or sent to the home. */
static void register_part(lm_home *h, struct reg_agg *a, uint32_t home,
			  uint32_t ci, const struct lm_msg *part)
{
	struct forward *f;

	if (home == h->self_index) {
		long n = lm_home_register(h, h->self_id, ci, h->epoch, part);

		if (n < 0) {
			a->status = (int32_t)n;
			return;
		}
		for (long i = 0; i < n; i++)
			lm_notice_set_put(&h->epoch_set, &h->scratch[i]);
		if (agg_add_notices(a, h->scratch, (size_t)n) < 0)
			a->status = LM_ENOMEM;
		return;
	}
	f = lm_router_fwd_add(h, LM_MSG_REGISTER, refl_node(h, home), 0, 0);
	if (!f) {
		a->status = LM_ENOBUFS;
		lose_run(h, "too many requests in flight to register deltas");
		return;
	}
	f->seq = ++h->flush_sent;
	f->agg = a->id;
	a->parts++;
	h->stats.registers_forwarded++;
	h->out.request(h->ctx, f->to, f->req_id, part);
}

/* A cluster's REGISTER: checked whole, split by home, answered with the
 * notices once every home has entered its part. */
void lm_router_register(lm_home *h, uint16_t from, long ci,
			uint32_t req_id, const struct lm_msg *m)
{
	struct reg_agg *a;

	if (lm_home_register_check(h, m, (uint32_t)ci, false) < 0) {
		struct lm_msg r = msg_new(h, LM_MSG_REGISTER_OK);

		drop_bad(h, from, m, "malformed entries or data");
		r.status = LM_EBADMSG;
		h->out.reply(h->ctx, from, req_id, &r);
		return;
	}
	if (h->naggs == h->aggs_cap) {
		size_t cap = h->aggs_cap ? h->aggs_cap * 2 : 16;
		struct reg_agg *na = realloc(h->aggs, cap * sizeof(*na));

		if (!na) {
			drop_bad(h, from, m, "out of memory");
			return;
		}
		h->aggs = na;
		h->aggs_cap = cap;
	}
	a = &h->aggs[h->naggs++];
	memset(a, 0, sizeof(*a));
	a->id = ++h->next_agg;
	a->node = from;
	a->req_id = req_id;
	a->parts = 1; /* until every part went out */
	if (h->split_cap < m->diffs.len) {
		uint8_t *ns = realloc(h->split, m->diffs.len);

		if (!ns) {
			a->status = LM_ENOMEM;
			a->parts = 0;
			agg_done(h, a);
			return;
		}
		h->split = ns;
		h->split_cap = m->diffs.len;
	}
	for (uint32_t k = 0; k < h->nrefl; k++) {
		struct lm_msg part = msg_new(h, LM_MSG_REGISTER);
		size_t pos = 0, len;
		const uint8_t *diff;
		uint32_t page;

		part.epoch = h->epoch;
		part.notices = h->split_notices;
		part.diffs.data = h->split;
		for (uint32_t i = 0; i < m->nnotices; i++) {
			const struct lm_notice *e = &m->notices[i];
			bool mine = lm_home_of_page(h->layout, e->page) == k;

			if (e->base != LM_REG_NEW)
				(void)lm_msg_diffs_next(&m->diffs, &pos, &page,
							&diff, &len);
			if (!mine)
				continue;
			h->split_notices[part.nnotices++] = *e;
			if (e->base != LM_REG_NEW) {
				(void)lm_msg_diffs_append(h->split,
							  h->split_cap,
							  &part.diffs.len,
							  page, diff, len);
				part.diffs.count++;
			}
		}
		if (part.nnotices)
			register_part(h, a, k, (uint32_t)ci, &part);
		a = agg_find(h, a->id); /* the table may have moved */
	}
	a->parts--;
	agg_done(h, a);
}

void lm_router_release(lm_home *h, uint32_t id,
		       const struct lm_notice *notices, uint32_t n)
{
	const struct lm_layout *l = h->layout;
	struct lm_msg r = msg_new(h, LM_MSG_RELEASE);

	r.id = id;
	r.notices = notices;
	r.nnotices = n;
	rcache_invalidate(h, notices, n);
	for (size_t i = 0; i < l->nclusters; i++)
		if ((uint32_t)l->clusters[i].reflector_index == h->self_index)
			h->out.send(h->ctx, l->clusters[i].id, &r);
	h->epoch++;
	lm_notice_set_clear(&h->epoch_set);
	h->stats.releases++;
}

/* Sends a held message on, with our clusters' notices of the epoch: a
 * superset of what the sender's changes were. */
static void held_send(lm_home *h, const struct held_msg *hm)
{
	const struct lm_notice_set *s = &h->epoch_set;
	const struct lm_cluster_cfg *c;
	struct lm_msg r = msg_new(h, hm->type);
	uint32_t mgr;

	r.id = hm->id;
	r.rank = hm->rank;
	r.epoch = h->epoch;
	switch (hm->type) {
	case LM_MSG_BARRIER:
		r.notices = s->v;
		r.nnotices = s->n;
		mgr = lm_home_manager_of(h->layout, hm->id);
		if (mgr == h->self_index)
			lm_mgr_arrive(h, h->self_id, mgr, &r);
		else
			h->out.send(h->ctx, refl_node(h, mgr), &r);
		break;
	case LM_MSG_UNLOCK:
		r.notices = s->v;
		r.nnotices = s->n;
		mgr = lm_home_manager_of(h->layout, hm->id);
		if (mgr == h->self_index)
			lm_mgr_unlock(h, h->self_id, &r, h->epoch, s->v, s->n);
		else
			h->out.send(h->ctx, refl_node(h, mgr), &r);
		break;
	case LM_MSG_END:
		/* to rank 0's cluster, so that its WAIT_END sees what the
		 * worker flushed before it ended (I2, I3) */
		r.status = hm->status;
		r.epoch = 0;
		r.notices = s->v;
		r.nnotices = s->n;
		c = lm_layout_cluster_of_rank(h->layout, 0);
		h->out.send(h->ctx,
			    (uint32_t)c->reflector_index == h->self_index ?
			    c->id : refl_node(h, (uint32_t)c->reflector_index),
			    &r);
		break;
	case LM_MSG_CREATE:
		/* the worker must see what rank 0 published (I2, I3) */
		r.epoch = 0;
		r.notices = s->v;
		r.nnotices = s->n;
		r.offset = hm->offset;
		r.data = hm->data;
		r.data_len = hm->data_len;
		c = lm_layout_cluster_of_rank(h->layout, hm->rank);
		h->out.send(h->ctx,
			    (uint32_t)c->reflector_index == h->self_index ?
			    c->id : refl_node(h, (uint32_t)c->reflector_index),
			    &r);
		break;
	}
}

/* Sends, in order, every held message whose flushes have been acked. */
void lm_router_held_release(lm_home *h)
{
	size_t done = 0;

	while (done < h->nheld &&
	       !flush_pending_upto(h, h->held[done].mark)) {
		held_send(h, &h->held[done]);
		free(h->held[done].data);
		h->held[done].data = NULL;
		done++;
	}
	if (done) {
		memmove(h->held, h->held + done,
			(h->nheld - done) * sizeof(*h->held));
		h->nheld -= done;
	}
}

/* Queues a cluster's synchronisation message behind the acks of every
 * FLUSH forwarded so far: the changes it publishes must be at their homes
 * before anyone can acquire them (I2). */
void lm_router_hold(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	struct held_msg *hm;

	if (h->nheld == h->held_cap) {
		size_t cap = h->held_cap ? h->held_cap * 2 : 16;
		struct held_msg *nh;

		if (h->nheld >= LM_HOME_HELD_MAX ||
		    !(nh = realloc(h->held, cap * sizeof(*nh)))) {
			drop_bad(h, from, m, "too many messages held");
			lose_run(h, "too many synchronisation messages held");
			return;
		}
		h->held = nh;
		h->held_cap = cap;
	}
	hm = &h->held[h->nheld];
	memset(hm, 0, sizeof(*hm));
	hm->type = m->type;
	hm->id = m->id;
	hm->rank = m->rank;
	hm->status = m->status;
	hm->offset = m->offset;
	hm->mark = h->flush_sent;
	if (m->type == LM_MSG_CREATE && m->data_len) {
		hm->data = malloc(m->data_len);
		if (!hm->data) {
			drop_bad(h, from, m, "out of memory");
			lose_run(h, "out of memory for a CREATE");
			return;
		}
		memcpy(hm->data, m->data, m->data_len);
		hm->data_len = m->data_len;
	}
	h->nheld++;
	if (flush_pending_upto(h, hm->mark))
		h->stats.held++;
	lm_router_held_release(h);
}

void lm_router_barrier(lm_home *h, uint16_t from, long ci,
		       const struct lm_msg *m)
{
	struct router_barrier *b = NULL, *spare = NULL;

	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		struct router_barrier *e = &h->barriers[i];

		if (e->pending && e->id == m->id) {
			b = e;
			break;
		}
		if (!e->pending && !spare)
			spare = e;
	}
	if (!b) {
		if (!spare) {
			drop_bad(h, from, m, "too many barriers pending");
			return;
		}
		b = spare;
		b->pending = true;
		b->id = m->id;
	}
	if (b->seen[ci]) {
		drop_bad(h, from, m, "cluster arrived twice");
		return;
	}
	b->seen[ci] = 1;
	if (++b->arrived < h->nserved)
		return;
	b->pending = false;
	b->arrived = 0;
	memset(b->seen, 0, h->layout->nclusters);
	lm_router_hold(h, from, m); /* DESIGN.md §2, step 3 */
}

/* A reply of another reflector to a request we forwarded. */
void lm_router_reply(lm_home *h, uint16_t from, uint32_t req_id,
		     const struct lm_msg *m)
{
	static const uint16_t answer[LM_MSG_TYPE_COUNT] = {
		[LM_MSG_FETCH] = LM_MSG_PAGE,
		[LM_MSG_FLUSH] = LM_MSG_FLUSH_OK,
		[LM_MSG_LOCK] = LM_MSG_GRANT,
		[LM_MSG_ALLOC] = LM_MSG_ALLOC_OK,
		[LM_MSG_FREE] = LM_MSG_FREE_OK,
		[LM_MSG_REGISTER] = LM_MSG_REGISTER_OK,
		[LM_MSG_PULL] = LM_MSG_DELTA,
	};
	struct forward *f = fwd_find(h, req_id);
	struct forward done;

	if (!f || f->to != from) {
		drop_bad(h, from, m, "reply to no request of ours");
		return;
	}
	done = *f;
	fwd_remove(h, f);
	if (m->type != answer[done.type] || !notices_valid(h, m)) {
		struct reg_agg *a = agg_find(h, done.agg);

		drop_bad(h, from, m, "bad reply");
		if (done.type == LM_MSG_REGISTER && a) {
			a->status = LM_EBADMSG;
			a->parts--;
			agg_done(h, a);
		}
		if (done.seq)
			lm_router_held_release(h);
		return;
	}
	if (done.type == LM_MSG_PULL && done.node == 0) {
		lm_home_pulled(h, m);
		return;
	}
	if (done.type == LM_MSG_FETCH && done.node == 0) {
		rfetch_reply(h, done.agg, m);
		return;
	}
	if (done.type == LM_MSG_REGISTER) {
		struct reg_agg *a = agg_find(h, done.agg);

		for (uint32_t i = 0; i < m->nnotices; i++)
			lm_notice_set_put(&h->epoch_set, &m->notices[i]);
		if (a) {
			if (m->status)
				a->status = m->status;
			if (agg_add_notices(a, m->notices, m->nnotices) < 0)
				a->status = LM_ENOMEM;
			a->parts--;
			agg_done(h, a);
		}
		lm_router_held_release(h);
		return;
	}
	if (done.type == LM_MSG_LOCK)
		lm_notice_set_add(&h->epoch_set, m->notices, m->nnotices);
	if (done.type != LM_MSG_FLUSH) {
		h->out.reply(h->ctx, done.node, done.node_req, m);
		return;
	}
	if (m->status != 0)
		lm_log_error("home: node %u refused diffs of ours: %s", from,
			     lm_strerror(m->status));
	for (uint32_t i = 0; i < m->nnotices; i++)
		lm_notice_set_put(&h->epoch_set, &m->notices[i]);
	lm_router_held_release(h);
}

void lm_router_held_clear(lm_home *h)
{
	for (size_t i = 0; i < h->nheld; i++)
		free(h->held[i].data);
	h->nheld = 0;
}
