/* Barrier releases with updates (docs/dsm.md "Updates"): how a RELEASE
 * from the reflector reaches our clients.  With updates on it is held
 * until the pages they hold that other clusters changed are fetched, so
 * that each client gets the new bytes with the notices; then it goes out
 * a client at a time, and what would change the epoch's state meanwhile
 * is put off, kept as decoded, for lemuriad.c to handle after it. */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"

/* Replies RELEASE{id, notices} to client `i` if it waits at barrier id,
 * with its updates when `updates` (lm_updates_prepare done); false when
 * it does not wait there. */
static bool release_one(lm_lemuriad *c, uint32_t i, uint32_t id,
			const struct lm_notice *n, uint32_t count,
			bool updates)
{
	struct client *cl = &c->clients[i];
	struct lm_msg r;

	if (!cl->at_barrier || cl->barrier_id != id)
		return false;
	msg_init(c, &r, LM_MSG_RELEASE);
	r.id = id;
	r.notices = n;
	r.nnotices = count;
	cl->at_barrier = false;
	if (updates)
		lm_updates_for_client(c->updates, i, slot_rank(c, (int)i), n,
				      count, &r.diffs);
	c->out.reply(c->ctx, slot_node(c, (int)i), cl->barrier_req, &r);
	return true;
}

/* Releases every client waiting at barrier id at once (a RELEASE
 * without updates: its notices alone, quickly sent). */
static void release_clients(lm_lemuriad *c, uint32_t id,
			    const struct lm_notice *n, uint32_t count)
{
	n = lm_copy_client_notices(c, n, count, &count);
	for (uint32_t i = 0; i < c->nclients; i++)
		release_one(c, i, id, n, count, false);
	if (c->updates)
		lm_updates_epoch_end(c->updates);
}

bool lm_release_step(lm_lemuriad *c)
{
	struct held_release *h = &c->rel;

	if (!h->staging)
		return false;
	while (h->next_slot < c->nclients)
		if (release_one(c, h->next_slot++, h->id, h->notices,
				h->nnotices, h->updates))
			break; /* one client a step */
	if (h->next_slot < c->nclients)
		return true;
	if (c->updates)
		lm_updates_epoch_end(c->updates);
	lm_release_clear(c);
	return false;
}

/* Whether m may be handled while a RELEASE is staged. */
static bool may_handle(const lm_lemuriad *c, uint16_t from,
		       enum lm_rel_msg_kind kind, const struct lm_msg *m)
{
	uint32_t page;

	if (kind != LM_REL_REQUEST)
		return false;
	if (from == c->reflector)
		return m->type == LM_MSG_PULL; /* reads deltas only */
	/* a fault answered from the cache: a miss would put a page in the
	 * cache, which may evict one the remaining updates read */
	if (m->type == LM_MSG_FETCH)
		page = m->page;
	else if (m->type == LM_MSG_FETCHV && m->nnotices)
		page = m->notices[0].page;
	else
		return false;
	return page < c->npages &&
	       lm_cache_find((lm_lemuriad *)c, page) != NULL;
}

/* Keeps m for after the staged RELEASE, with copies of what it points
 * to in one block; false when out of memory or over the bound
 * (LM_RELEASE_DEFER_*). */
static bool defer(lm_lemuriad *c, uint16_t from, enum lm_rel_msg_kind kind,
		  uint32_t req_id, const struct lm_msg *m)
{
	size_t nb = m->notices ? m->nnotices * sizeof(*m->notices) : 0;
	size_t db = m->data ? m->data_len : 0;
	size_t fb = m->diffs.data ? m->diffs.len : 0;
	struct deferred_msg *d;
	uint8_t *mem;

	/* I5: a client has a call or two in flight, the reflector a few
	 * one-way messages; more than that is a flood, not the protocol */
	if (c->ndeferred >= LM_RELEASE_DEFER_PER_CLIENT * c->nclients +
				   LM_RELEASE_DEFER_REFLECTOR)
		return false;
	if (c->ndeferred == c->deferred_cap) {
		size_t cap = c->deferred_cap ? 2 * c->deferred_cap : 16;

		d = realloc(c->deferred, cap * sizeof(*d));
		if (!d)
			return false;
		c->deferred = d;
		c->deferred_cap = cap;
	}
	mem = malloc(nb + db + fb ? nb + db + fb : 1);
	if (!mem)
		return false;
	d = &c->deferred[c->ndeferred++];
	*d = (struct deferred_msg){ .from = from, .kind = kind,
				    .req_id = req_id, .m = *m, .mem = mem };
	/* notices first: the block is aligned for them */
	if (nb) {
		memcpy(mem, m->notices, nb);
		d->m.notices = (const struct lm_notice *)(void *)mem;
	}
	if (db) {
		memcpy(mem + nb, m->data, db);
		d->m.data = mem + nb;
	}
	if (fb) {
		memcpy(mem + nb + db, m->diffs.data, fb);
		d->m.diffs.data = mem + nb + db;
	}
	return true;
}

bool lm_release_puts_off(lm_lemuriad *c, uint16_t from,
			 enum lm_rel_msg_kind kind, uint32_t req_id,
			 const struct lm_msg *m)
{
	if (!c->rel.staging || may_handle(c, from, kind, m))
		return false;
	if (!defer(c, from, kind, req_id, m))
		count_bad(c, from, m,
			  "cannot put it off while a release goes out");
	return true;
}

bool lm_release_take_deferred(lm_lemuriad *c, struct deferred_msg *d)
{
	if (c->rel.staging || !c->ndeferred)
		return false;
	*d = c->deferred[0];
	memmove(c->deferred, c->deferred + 1,
		--c->ndeferred * sizeof(*c->deferred));
	return true;
}

void lm_release_free_deferred(lm_lemuriad *c)
{
	for (size_t i = 0; i < c->ndeferred; i++)
		free(c->deferred[i].mem);
	c->ndeferred = 0;
}

void lm_release_clear(lm_lemuriad *c)
{
	struct held_release *h = &c->rel;

	for (uint32_t i = 0; h->saved && i < h->nnotices; i++)
		if (h->saved[i])
			lm_cache_recycle(c, h->saved[i]);
	free(h->saved);
	free(h->slot);
	free(h->known);
	free(h->known_block);
	free(h->notices);
	free(h->kind);
	free(h->old);
	free(h->arrived);
	memset(h, 0, sizeof(*h)); /* and the staging is over */
	for (struct upreq *up = c->ups; up; up = up->next)
		up->pre = 0;
}

/* Bytes of a byte mask of one page. */
static size_t mask_bytes(const lm_lemuriad *c)
{
	return (c->page_size + 63) / 64 * sizeof(uint64_t);
}

/* Decides, before the notices apply, what each page's update comes from:
 * our copy if the sole-cluster rule will keep it, else, for a page
 * another cluster wrote whose copy at base a client of ours holds and
 * would take an update of (lm_updates_wanted), that copy (saved) and the
 * page fetched anew.  At most an eighth of the
 * cache is fetched (I5: the saved copies are the cache's own pages,
 * taken out of it; the fetched ones go into the cache, their masks take
 * another sixty-fourth).  False when out of memory: the RELEASE then
 * goes without updates. */
static bool rel_hold(lm_lemuriad *c, const struct lm_msg *m)
{
	struct held_release *h = &c->rel;
	size_t cap = c->cache_max / 8, fetches = 0;
	uint32_t n = m->nnotices;

	h->notices = malloc((n ? n : 1) * sizeof(*h->notices));
	h->kind = calloc(n ? n : 1, 1);
	h->saved = calloc(n ? n : 1, sizeof(*h->saved));
	h->slot = calloc(n ? n : 1, sizeof(*h->slot));
	h->old = calloc(n ? n : 1, sizeof(*h->old));
	h->arrived = calloc(n ? n : 1, sizeof(*h->arrived));
	h->known = calloc(n ? n : 1, sizeof(*h->known));
	h->nnotices = n;
	if (!h->notices || !h->kind || !h->saved || !h->slot || !h->old ||
	    !h->arrived || !h->known) {
		lm_release_clear(c);
		return false;
	}
	if (n)
		memcpy(h->notices, m->notices, n * sizeof(*h->notices));
	h->id = m->id;
	h->active = true;
	for (uint32_t i = 0; i < n; i++) {
		const struct lm_notice *no = &m->notices[i];
		struct cpage *cp = lm_cache_find(c, no->page);

		if (!cp || cp->version >= no->version || cp->version != no->base)
			continue;
		if (no->wcluster == c->index) {
			h->kind[i] = REL_KEEP;
		} else if (fetches < cap &&
			   lm_updates_wanted(c->updates, no->page)) {
			h->kind[i] = REL_FETCH;
			fetches++;
		}
	}
	if (fetches)
		h->known_block = malloc(fetches * mask_bytes(c));
	fetches = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct cpage *cp;

		if (h->kind[i] != REL_FETCH)
			continue;
		if (!h->known_block) {
			h->kind[i] = REL_NONE; /* no memory: no update */
			continue;
		}
		/* the notice would drop our copy: we keep it instead of a
		 * copy of it, out of the cache (a client's FETCH meanwhile
		 * waits for the page like any miss) */
		cp = lm_cache_find(c, m->notices[i].page);
		if (!cp) { /* a page named twice */
			h->kind[i] = REL_NONE;
			continue;
		}
		lm_cache_detach(c, cp);
		h->saved[i] = cp;
		h->old[i] = cp->data;
		h->slot[i] = (uint32_t)fetches++;
	}
	return true;
}

/* Sends the held RELEASE's fetches (after the notices applied, so that
 * each FETCH names the newest notice of its page). */
static void rel_fetch(lm_lemuriad *c)
{
	struct held_release *h = &c->rel;
	struct lm_notice want[LM_FETCHV_MAX];
	uint32_t batch[LM_FETCHV_MAX], n = 0;

	for (uint32_t i = 0; i < h->nnotices; i++) {
		uint32_t page = h->notices[i].page;
		struct upreq *up;

		if (h->kind[i] != REL_FETCH)
			continue;
		up = lm_upreq_fetch_of(c, page);
		if (up && !up->pre) { /* already on its way: share it */
			up->pre = i + 1;
			h->pending++;
			continue;
		}
		if (up || !(up = lm_upreq_new(c, UP_FETCH))) {
			h->kind[i] = REL_NONE;
			continue;
		}
		lm_upreq_set_page(c, up, page);
		up->pre = i + 1;
		up->min_version = h->notices[i].version;
		up->batched = true;
		h->pending++;
		c->stats.fetch_misses++;
		/* our copy at base was saved: the home may send only what
		 * the other clusters changed since */
		want[n] = (struct lm_notice){ .page = page,
					      .version = c->known[page],
					      .base = h->notices[i].base };
		batch[n++] = page;
		if (n == LM_FETCHV_MAX) {
			lm_fetch_batch(c, want, batch, n, false);
			n = 0;
		}
	}
	if (n)
		lm_fetch_batch(c, want, batch, n, false);
}

/* hooks.rebuild: the page a PAGES diff entry brings is our copy saved at
 * the entry's base with the entry applied, built in the cluster's page
 * buffer; NULL when it does not fit what we asked. */
const uint8_t *lm_release_rebuild(lm_lemuriad *c, const struct upreq *up,
				  const struct lm_notice *n,
				  const uint8_t *data, size_t len)
{
	struct held_release *h = &c->rel;
	uint32_t i = up->pre - 1;
	struct lm_delta view;
	uint64_t *known;
	uint8_t *page;

	if (!h->active || up->pre == 0 || i >= h->nnotices ||
	    h->kind[i] != REL_FETCH || !h->old[i] ||
	    h->notices[i].base != n->base ||
	    lm_diff_validate(data, len, c->page_size) < 0)
		return NULL;
	page = c->pagebuf;
	memcpy(page, h->old[i], c->page_size);
	lm_diff_apply_valid(page, data, len);
	/* the diff names the other clusters' bytes: the updates need not
	 * compare the two copies to find them */
	known = h->known_block + (size_t)h->slot[i] * (mask_bytes(c) / 8);
	memset(known, 0, mask_bytes(c));
	view = (struct lm_delta){ .page_size = c->page_size, .mask = known };
	lm_delta_mark_valid_diff(&view, data, len);
	h->known[i] = known;
	return page;
}

/* A reply for the held RELEASE's fetch of notice up->pre - 1: `data`
 * (NULL for a failed fetch) is the page at `version`, which
 * fetches.c put in the cache (hooks.arrived). */
void lm_release_arrived(lm_lemuriad *c, struct upreq *up,
			const uint8_t *data, uint32_t version)
{
	struct held_release *h = &c->rel;
	uint32_t i = up->pre - 1;

	if (!h->active || i >= h->nnotices || h->kind[i] != REL_FETCH) {
		up->pre = 0;
		return;
	}
	if (data && version < h->notices[i].version)
		return; /* too old: asked again with the waiters */
	up->pre = 0;
	h->pending--;
	if (data) {
		h->arrived[i] = true;
		if (!up->rebuilt)
			h->known[i] = NULL; /* a whole page: compared */
	}
}

/* Every fetch answered: the updates go with the RELEASE. */
static void release_finish(lm_lemuriad *c)
{
	struct held_release *h = &c->rel;
	const uint8_t **copies = calloc(h->nnotices ? h->nnotices : 1,
					sizeof(*copies));
	uint64_t *tags = calloc(h->nnotices ? h->nnotices : 1, sizeof(*tags));
	bool updates = false;

	/* a page kept, or fetched and put in the cache, is read there: at
	 * the notice's version, it was not evicted or replaced since (else
	 * no update, and the clients invalidate as without updates) */
	for (uint32_t i = 0; copies && i < h->nnotices; i++) {
		struct cpage *cp;

		if ((h->kind[i] == REL_KEEP ||
		     (h->kind[i] == REL_FETCH && h->arrived[i])) &&
		    (cp = lm_cache_find(c, h->notices[i].page)) &&
		    cp->version == h->notices[i].version) {
			copies[i] = cp->data;
			if (tags)
				tags[i] = cp->tag;
		}
	}
	if (copies)
		updates = !lm_updates_prepare(c->updates, h->notices,
					      h->nnotices, copies,
					      (const uint8_t *const *)h->old,
					      (const uint64_t *const *)h->known,
					      tags);
	free(copies);
	free(tags);
	/* one client a step (lm_release_step, from the daemon's background
	 * work): between two the socket is read, so a PULL that another
	 * cluster waits for, or a released client's fault on a cached page,
	 * need not wait for every client's list (docs/performance.md,
	 * "Figures behind the lemuriad's choices") */
	h->staging = true;
	h->updates = updates;
	h->next_slot = 0;
	if (!lm_release_step(c))
		return;
	if (c->out.later)
		c->out.later(c->ctx);
	else
		while (lm_release_step(c))
			;
}

void lm_release_fetched(lm_lemuriad *c)
{
	if (c->rel.active && c->rel.pending == 0)
		release_finish(c);
}

void lm_release_handle(lm_lemuriad *c, const struct lm_msg *m)
{
	bool expected = c->barrier_up && m->id == c->barrier_up_id;
	bool held = false;

	c->ahead = false; /* what is left is encoded at the release */

	/* before the notices drop the copies it must save */
	if (c->updates && expected && !c->rel.active)
		held = rel_hold(c, m);
	/* invalidation is exact and idempotent, so it is safe even for a
	 * RELEASE we did not expect */
	lm_notices_apply(c, m->notices, m->nnotices);
	lm_notices_epoch_end(c);
	c->rounds++;
	c->released = true; /* the pulse after this message takes the time */
	for (uint32_t i = 0; i < m->nnotices; i++)
		if (m->notices[i].page < c->npages &&
		    c->told_all[m->notices[i].page] < m->notices[i].version)
			c->told_all[m->notices[i].page] = m->notices[i].version;
	if (!expected) {
		count_bad(c, c->reflector, m, "RELEASE of no pending barrier");
		return;
	}
	c->barrier_up = false;
	if (held) {
		rel_fetch(c);
		lm_release_fetched(c);
		return;
	}
	release_clients(c, m->id, m->notices, m->nnotices);
}
