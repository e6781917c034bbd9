/* Pages homed at other reflectors, as their FETCHes pass through for our
 * clusters (docs/dsm.md, "Several reflectors"): a cache bounded by the
 * reflector's `cache` (LRU, I3: a copy answers only FETCHes it is new
 * enough for) and one FETCH in flight per page, which the clusters'
 * FETCHes of the page join.  A role: calls route.c only. */
#include "reflector_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lm_error.h"

int lm_relay_cache_init(lm_home *h)
{
	h->cache_max = h->layout->reflectors[h->self_index].cache_size /
		       h->page_size;
	if (h->cache_max == 0)
		h->cache_max = 1;
	h->rbits = 4;
	while (((size_t)1 << h->rbits) < h->cache_max && h->rbits < 20)
		h->rbits++;
	h->rbuckets = calloc((size_t)1 << h->rbits, sizeof(*h->rbuckets));
	return h->rbuckets ? 0 : LM_ENOMEM;
}

void lm_relay_cache_destroy(lm_home *h)
{
	if (h->rbuckets)
		lm_relay_cache_clear(h);
	free(h->rbuckets);
	free(h->rfetches);
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

static void rcache_clear(lm_home *h)
{
	while (h->rhead)
		rcache_remove(h, h->rhead);
}

/* Keeps `data` as page at version; an older copy is replaced, a newer one
 * kept (I3). */
/* Keeps the home's tags of the page with it (at most one a cluster). */
static void rcache_tags(lm_home *h, struct rpage *rp, const struct lm_msg *m)
{
	rp->ntags = m->ntags <= h->layout->nclusters ? m->ntags : 0;
	if (rp->ntags)
		memcpy(rp->data + h->page_size, m->tags,
		       (size_t)rp->ntags * LM_MSG_TAG_SIZE);
}

static void rcache_put(lm_home *h, const struct lm_msg *m)
{
	struct rpage *rp = rcache_find(h, m->page);
	size_t b;

	if (rp) {
		if (m->version > rp->version) {
			memcpy(rp->data, m->data, h->page_size);
			rp->version = m->version;
			rcache_tags(h, rp, m);
		}
		rlru_unlink(h, rp);
		rlru_push(h, rp);
		return;
	}
	if (h->ncached >= h->cache_max)
		rcache_remove(h, h->rtail);
	rp = malloc(sizeof(*rp) + h->page_size +
		    h->layout->nclusters * LM_MSG_TAG_SIZE);
	if (!rp)
		return; /* a cache: nothing is lost */
	rp->page = m->page;
	rp->version = m->version;
	memcpy(rp->data, m->data, h->page_size);
	rcache_tags(h, rp, m);
	b = rbucket(h, m->page);
	rp->hnext = h->rbuckets[b];
	h->rbuckets[b] = rp;
	rp->prev = NULL;
	rlru_push(h, rp);
	h->ncached++;
}

/* Drops copies older than the notices passing down (they could never
 * answer a FETCH of the clusters that learn them). */
void lm_relay_cache_invalidate(lm_home *h, const struct lm_notice *n,
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

void lm_relay_cache_clear(lm_home *h)
{
	rcache_clear(h);
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
	r.id = rf->ahead;
	for (struct rwaiter *w = rf->waiters; w; w = w->next)
		if (w->need > r.version)
			r.version = w->need;
	f = lm_fwd_add(h, LM_MSG_FETCH,
		       refl_node(h, lm_home_of_page(h->layout, rf->page)),
		       0, 0);
	if (!f) {
		lm_log_error("home: too many requests in flight; FETCH of "
			     "page %u waits for the next", rf->page);
		return;
	}
	f->agg = rf->id;
	rf->ahead = 0; /* a FETCH sent again follows pulls made already */
	h->stats.fetches_forwarded++;
	h->out.request(h->ctx, f->to, f->req_id, &r);
}

/* A cluster's FETCH of a page homed elsewhere: from our cache when the
 * copy is as new as the cluster needs, else joined to the FETCH in flight,
 * else sent to the home. */
void lm_relay_cache_fetch(lm_home *h, uint16_t from, uint32_t req_id,
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
		r.tags = rp->data + h->page_size;
		r.ntags = rp->ntags;
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
	rf->ahead = m->id;
	rf->waiters = w;
	rfetch_send(h, rf);
}

/* The home's PAGE for one of our FETCHes: cached, and every waiter it is
 * new enough for answered; the others wait for a FETCH sent again. */
void lm_relay_cache_page(lm_home *h, uint32_t id, const struct lm_msg *m)
{
	struct rfetch *rf = rfetch_by_id(h, id);
	struct rwaiter **pp;
	bool whole;

	if (!rf)
		return;
	whole = m->page == rf->page && m->data &&
		m->data_len == h->page_size;
	if (whole)
		rcache_put(h, m);
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
