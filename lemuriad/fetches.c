/* The lemuriad's fetches: a client's FETCH and FETCHV answered from the
 * cluster cache or coalesced into one FETCH to the reflector, the
 * replies (PAGE, PAGES) cached with our deltas on top and passed to
 * their waiters, and the pages fetched ahead of a client's faults
 * (docs/dsm.md "Neighbour pages").  A held RELEASE's fetches are ours
 * too; what they bring is handed to release.c through hooks.
 *
 * Readings of docs/dsm.md where it leaves a choice:
 *  - PAGE has no status: a FETCH outside the region, or one whose reply
 *    from R is not a whole page, is answered with a PAGE of data_len 0
 *    (as R does), which the client reports as an error, instead of
 *    leaving it blocked.
 *  - Coalesced fetches respect I3: a reply older than a notice seen while
 *    the fetch was pending is not cached, and the clients that asked after
 *    that notice are served by a new upstream FETCH.
 *  - A reply gets our deltas the home lacks written on top; one that was
 *    pending while data of the page left us (push, pull, eager) is cached
 *    only if at least as new as the version that data is in at the home,
 *    so a cached copy always holds every delta of ours: what the
 *    sole-cluster rule in lm_notices_apply relies on. */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "deltas.h"
#include "updates.h"

static void gate(lm_lemuriad *c, struct upreq *up, uint32_t version);
static void changed_due(lm_lemuriad *c);

/* Client `node` got a copy of `page` (barrier updates keep it valid). */
static void hold(lm_lemuriad *c, uint16_t node, uint32_t page)
{
	int slot = client_slot(c, node);

	if (c->updates && slot >= 0)
		lm_updates_hold(c->updates, (uint32_t)slot, page);
}

/* Answers a client's FETCH with `page` at `version`: the data itself, or
 * under copy = cluster a PAGE without it, the data being in the
 * cluster's copy (lm_copy_install before, by the caller). */
static void answer_page(lm_lemuriad *c, uint16_t node, uint32_t req_id,
			uint32_t page, uint32_t version, const uint8_t *data)
{
	struct lm_msg r;

	LM_PAGE_TRACE(c->trace, "reply", page, version, node);
	msg_init(c, &r, LM_MSG_PAGE);
	r.page = page;
	r.version = version;
	if (!c->shared) {
		r.data = data;
		r.data_len = c->page_size;
	}
	c->out.reply(c->ctx, node, req_id, &r);
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

	/* the others we hold go into the copy too, when in order: while a
	 * set goes in (committing), one that came after its lists */
	if (c->shared) {
		for (uint32_t i = 0; i < n; i++)
			if ((cp = lm_cache_find(c, more[i])) &&
			    cp->version >= lm_order_least(c, cp->page) &&
			    ((c->committing && lm_order_cached(c, cp)) ||
			     lm_order_free(c, cp->page, cp->version,
					   lm_order_cached(c, cp))))
				lm_copy_install(c, cp->page, cp->version,
						cp->data);
		answer_page(c, node, req_id, page, version, data);
		return;
	}
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
	for (uint32_t i = 0; c->trace && i < count; i++)
		lm_page_trace_event(c->trace, "reply", served[i].page,
				    served[i].version, node);
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
static void fetch_page(lm_lemuriad *c, uint16_t from, uint32_t req_id,
		       const struct lm_msg *m, bool ahead, uint32_t reach,
		       const uint32_t *more, uint32_t nmore)
{
	struct cpage *cp;
	struct upreq *up;
	struct waiter *w;
	struct lm_msg r;
	uint32_t held = 0;

	if (m->page >= c->npages) {
		count_bad(c, from, m, "FETCH outside the region");
		msg_init(c, &r, LM_MSG_PAGE);
		r.page = m->page;
		c->out.reply(c->ctx, from, req_id, &r);
		return;
	}
	LM_PAGE_TRACE(c->trace, "fetch", m->page, m->version, from);
	cp = lm_cache_find(c, m->page);
	if (cp && (cp->version < lm_order_least(c, cp->page) ||
		   (c->shared && !lm_order_cached(c, cp) && !cp->tags &&
		    !lm_order_free(c, cp->page, cp->version, false))))
		cp = NULL; /* older than a change we heard of, or came
			      before what its home's tags name was told and
			      they are not known */
	if (cp && c->shared &&
	    !lm_order_free(c, cp->page, cp->version, cp->ordered)) {
		/* in the copy only with the lists, and after those its tags
		 * name (fetched ahead before they were told) */
		held = cp->version;
		lm_order_need_cached(c, cp);
	} else if (cp) {
		lm_cache_touch(c, cp);
		c->stats.fetch_hits++;
		hold(c, from, cp->page);
		if (c->shared)
			lm_copy_install(c, cp->page, cp->version, cp->data);
		answer_page(c, from, req_id, cp->page, cp->version, cp->data);
		return;
	}
	up = lm_upreq_fetch_of(c, m->page);
	if (!up && held) {
		if (lm_upreq_start(c, UP_FETCH, from, req_id, &up) < 0) {
			count_bad(c, from, m, "too many waiting requests");
			return;
		}
		lm_upreq_set_page(c, up, m->page);
		gate(c, up, held);
	} else if (up) {
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
		up->min_version = lm_order_least(c, m->page);
		if (r.version < up->min_version)
			r.version = up->min_version;
		/* the home pulls ahead what we will fetch ahead next */
		r.id = ahead ? (reach < c->layout->prefetch ?
				reach : c->layout->prefetch) : 0;
		c->out.request(c->ctx, c->reflector, up->req_id, &r);
	}
	for (w = up->waiters; w->next; w = w->next)
		; /* ours came last */
	w->nmore = nmore < LM_LEMURIAD_FETCHV_MAX ? nmore : 0;
	if (w->nmore)
		memcpy(w->more, more, nmore * sizeof(*more));
	w->reach = reach;
	if (up->gated)
		lm_fetch_group_check(c); /* it may go in at once */
}

void lm_fetch_handle(lm_lemuriad *c, uint16_t from, uint32_t req_id,
		     const struct lm_msg *m)
{
	fetch_page(c, from, req_id, m, false, 0, NULL, 0);
}

/* A client's FETCHV (docs/dsm.md, "Neighbour pages"): the page it
 * faulted on, then pages after it and along a stride that it lacks.
 * When we hold the first, one PAGES answers with it and every other one
 * we hold; else the first is FETCHed as usual, and its answer is a PAGES
 * with the first and those of the others that we hold by then. */
void lm_fetch_handle_v(lm_lemuriad *c, uint16_t from, uint32_t req_id,
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
	if (first.page >= c->npages || !(cp = lm_cache_find(c, first.page)) ||
	    cp->version < lm_order_least(c, cp->page) ||
	    (c->shared &&
	     !lm_order_free(c, cp->page, cp->version,
			    lm_order_cached(c, cp)))) {
		/* fetch_page sorts out those that wait for order */
		fetch_page(c, from, req_id, &first, true,
			   lm_msg_fetchv_reach(m), more, nmore);
		return;
	}
	/* a neighbour is a guess: held (kept by updates) only once the
	 * client faults on it or writes it; until then a write elsewhere
	 * invalidates it (docs/dsm.md "Updates") */
	lm_cache_touch(c, cp);
	hold(c, from, cp->page);
	c->stats.fetch_hits++;
	if (c->shared)
		lm_copy_install(c, cp->page, cp->version, cp->data);
	reply_pages(c, from, req_id, cp->page, cp->version, cp->data, more,
		    nmore);
}


/* ---- replies from the reflector ------------------------------------ */

static void reply_page_to(lm_lemuriad *c, struct upreq *up,
			  const struct lm_msg *m);

/* The reflector's answer m (a PAGE) to our FETCH `up`: cached, passed to
 * its waiters and to a held RELEASE, or asked again when too old; the
 * last of a set fetched for CHANGED puts the set into the copy. */
static void reply_page(lm_lemuriad *c, struct upreq *up,
		       const struct lm_msg *m)
{
	LM_PAGE_TRACE(c->trace, "answer", m->page, m->version,
		      up->min_version);
	reply_page_to(c, up, m);
	if ((c->ngrp || c->ngated) && !c->committing)
		lm_fetch_group_check(c);
}

/* Whether a reply at `version` answers one of up's waiters. */
static bool answers_someone(const struct upreq *up, uint32_t version)
{
	for (const struct waiter *w = up->waiters; w; w = w->next)
		if (w->need <= version)
			return true;
	return false;
}

/* up's page is cached at `version`, which may not go into the copy yet:
 * its waiters are answered when it goes in with the lists that name it
 * (lm_fetch_group_check).  A page of the set fetched for CHANGED goes in
 * with the set. */
static void gate(lm_lemuriad *c, struct upreq *up, uint32_t version)
{
	LM_PAGE_TRACE(c->trace, "gated", up->page, version, 0);
	up->gated = true;
	up->gated_version = version;
	up->grouped = false;
	up->refresh = false;
	if (c->ngated < c->npages) /* a page asked again may come twice */
		c->gated_list[c->ngated++] = up->page;
	c->stats.order_waits++;
}

static void reply_page_to(lm_lemuriad *c, struct upreq *up,
			  const struct lm_msg *m)
{
	struct waiter **pp = &up->waiters;
	struct lm_msg r;
	uint32_t least;
	bool fits, told;

	if (m->type != LM_MSG_PAGE || m->page != up->page ||
	    m->data_len != c->page_size || !m->data) {
		count_bad(c, c->reflector, m, "bad reply to FETCH");
		/* an empty PAGE: every waiter fails instead of hanging */
		msg_init(c, &r, LM_MSG_PAGE);
		r.page = up->page;
		for (struct waiter *w = up->waiters; w; w = w->next)
			c->out.reply(c->ctx, w->node, w->req_id, &r);
		if (up->pre)
			c->hooks.arrived(c, up, NULL, 0);
		lm_upreq_free(c, up);
		return;
	}
	/* the home's copy plus what our clients wrote and the home has not
	 * got yet: the cluster copy (DESIGN.md §2, read fault); a page a
	 * held release rebuilt from a diff is there already */
	least = lm_order_least(c, m->page);
	told = lm_order_tags_told(c, m);
	if (m->version < least) {
		/* older than a change we heard of: the copy may not go back,
		 * and its faults want that change */
		if (up->min_version < least)
			up->min_version = least;
		for (struct waiter *w = up->waiters; w; w = w->next)
			if (w->need < least)
				w->need = least;
	}
	if (m->data != c->pagebuf)
		memcpy(c->pagebuf, m->data, c->page_size);
	lm_deltas_overlay(c->deltas, m->page, m->version, c->pagebuf);
	fits = m->version >= up->left;
	if (m->version >= up->min_version && fits) {
		struct cpage *cp;

		lm_cache_put(c, m->page, m->version, c->pagebuf);
		if ((cp = lm_cache_find(c, m->page)) &&
		    cp->version == m->version) {
			cp->ordered = c->committing || told;
			lm_cache_keep_tags(cp, m->tags, m->ntags);
		}
	}
	/* a reply that crossed data of ours leaving is no update source */
	if (up->pre)
		c->hooks.arrived(c, up,
				 m->version >= up->left ? c->pagebuf : NULL,
				 m->version);
	/* under copy = cluster the answer is the copy itself, which must
	 * not take a page that lacks data of ours gone up meanwhile (it
	 * would undo those bytes): such a reply answers nobody.  Pages
	 * fetched ahead go in too: the clients' faults on them are served
	 * from the copy, without asking us.  One of a set fetched for
	 * CHANGED waits for the others (lm_fetch_group_check) unless a
	 * client waits for it */
	if (c->shared && fits && !c->committing && !up->pre &&
	    m->version >= up->min_version &&
	    !lm_order_free(c, m->page, m->version, told)) {
		/* newer than what the copy holds and no barrier told: it
		 * goes in once the registrations its home tagged it with
		 * were told us, with the lists heard */
		if (answers_someone(up, m->version) || up->grouped)
			lm_order_need(c, m);
		if (answers_someone(up, m->version)) {
			gate(c, up, m->version);
			return;
		}
	} else if (c->shared && fits && m->version >= least &&
		   (!up->grouped || up->waiters)) {
		lm_copy_install(c, m->page, m->version, c->pagebuf);
	}
	while (*pp) {
		struct waiter *w = *pp;

		if (w->need > m->version || (c->shared && !fits)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (w->nmore)
			reply_pages(c, w->node, w->req_id, m->page, m->version,
				    c->pagebuf, w->more, w->nmore);
		else
			answer_page(c, w->node, w->req_id, m->page,
				    m->version, c->pagebuf);
		hold(c, w->node, m->page);
		free(w);
		c->nwaits--;
	}
	/* a CHANGED's page that did not go into the copy (the reply crossed
	 * data of ours, or is older than CHANGED said) is asked again:
	 * nothing else would bring the change to a client that spins */
	if (up->refresh && !up->waiters && !up->pre &&
	    (!fits || m->version < up->min_version)) {
		c->stats.fetch_misses++;
		lm_fetch_again(c, up);
		return;
	}
	if (!up->waiters && !up->pre) {
		lm_upreq_free(c, up);
		return;
	}
	/* asked after a newer notice: this reply is too old for them */
	c->stats.fetch_misses++;
	lm_fetch_again(c, up);
}

/* A FETCH that clients' faults wait for lets the home pull ahead as far
 * as the deepest of them reached (docs/dsm.md "Neighbour pages"); one
 * nobody waits for, none. */
static uint32_t pull_reach(const lm_lemuriad *c, const struct upreq *up)
{
	uint32_t reach = 0;

	for (const struct waiter *w = up->waiters; w; w = w->next)
		if (w->reach > reach)
			reach = w->reach;
	return reach < c->layout->prefetch ? reach : c->layout->prefetch;
}

void lm_fetch_again(lm_lemuriad *c, struct upreq *up)
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
	r.id = pull_reach(c, up);
	c->out.request(c->ctx, c->reflector, up->req_id, &r);
}

/* Sends the page's own FETCH, for one a FETCHV did not bring. */
static void fetch_alone(lm_lemuriad *c, struct upreq *up)
{
	up->batched = false;
	lm_fetch_again(c, up);
}

/* The request keeps the list of pages, so that those its PAGES leaves
 * out can be asked for alone. */
void lm_fetch_batch(lm_lemuriad *c, const struct lm_notice *want,
		    const uint32_t *pages, uint32_t n, bool ahead)
{
	struct upreq *up = lm_upreq_new(c, UP_FETCHV);
	struct lm_msg r;

	if (up && (up->batch = malloc(n * sizeof(*up->batch)))) {
		up->ahead = ahead;
		memcpy(up->batch, pages, n * sizeof(*up->batch));
		up->nbatch = n;
		msg_init(c, &r, LM_MSG_FETCHV);
		r.notices = want;
		r.nnotices = n;
		c->out.request(c->ctx, c->reflector, up->req_id, &r);
		return;
	}
	if (up)
		lm_upreq_free(c, up);
	for (uint32_t i = 0; i < n; i++) { /* no memory: one by one */
		struct upreq *p = lm_upreq_fetch_of(c, pages[i]);

		if (p && ahead)
			lm_upreq_free(c, p); /* nobody waits yet */
		else if (p)
			fetch_alone(c, p);
	}
}

/* Adds `p` to a fetch-ahead batch unless we hold it or fetch it already. */
/* Page `p` joins a FETCHV batch (want, batch, *n) with its UP_FETCH,
 * asking for version `need` or newer (and no older than we know of);
 * NULL when memory runs out (nothing added). */
static struct upreq *batch_add(lm_lemuriad *c, uint32_t p, uint32_t need,
			       struct lm_notice *want, uint32_t *batch,
			       uint32_t *n)
{
	struct upreq *up = lm_upreq_new(c, UP_FETCH);

	if (!up)
		return NULL;
	lm_upreq_set_page(c, up, p);
	up->min_version = need;
	up->batched = true;
	want[*n] = (struct lm_notice){
		.page = p, .base = LM_NO_BASE,
		.version = need > c->known[p] ? need : c->known[p] };
	batch[(*n)++] = p;
	return up;
}

static void ahead_add(lm_lemuriad *c, uint32_t p, struct lm_notice *want,
		      uint32_t *batch, uint32_t *n)
{
	/* a page the cluster owns is in its copy, and the home would have
	 * to take it back to answer */
	if (p >= c->npages || lm_cache_find(c, p) || lm_upreq_fetch_of(c, p) ||
	    (c->shared && lm_ccopy_is_owned(&c->copy, p)) ||
	    !batch_add(c, p, 0, want, batch, n))
		return;
	c->stats.fetch_ahead++;
}

/* After a client's FETCHV miss on `page` is answered: one FETCHV for the
 * `reach` pages after it (as far as the client's fault reached, at most
 * `prefetch`) and the n pages of `more` (the others its FETCHV asked
 * for) that we neither hold nor fetch already (docs/dsm.md "Neighbour
 * pages"), batched as the held RELEASE's are: the reach first, then the
 * client's others, as many as a FETCHV holds (with `prefetch` above 21
 * the client may name more). */
static void fetch_ahead(lm_lemuriad *c, uint32_t page, uint32_t reach,
			const uint32_t *more, uint32_t nmore)
{
	struct lm_notice want[LM_FETCHV_MAX];
	uint32_t batch[LM_FETCHV_MAX], n = 0;

	if (reach > c->layout->prefetch)
		reach = c->layout->prefetch;
	for (uint32_t k = 1; k <= reach && n < LM_FETCHV_MAX; k++)
		ahead_add(c, page + k, want, batch, &n);
	for (uint32_t i = 0;
	     i < nmore && i < LM_LEMURIAD_FETCHV_MAX && n < LM_FETCHV_MAX; i++)
		ahead_add(c, more[i], want, batch, &n);
	if (n)
		lm_fetch_batch(c, want, batch, n, true);
}

/* Another cluster's CHANGED: its pages wait here (the newest version
 * wanted per page) until the cluster is quiet (lm_lemuriad_pulse). */
void lm_fetch_changed(lm_lemuriad *c, const struct lm_msg *m)
{
	if (c->shared && c->copy.map)
		c->stats.changed_heard += m->nnotices;
	lm_order_told(c, m);
	lm_fetch_heard(c, m->notices, m->nnotices);
	/* a list with no page may end a wait too */
	if (!m->nnotices && (c->ngrp || c->ngated))
		lm_fetch_group_check(c);
}

/* Page p waits for the next quiet pulse, to be fetched at `version` or
 * newer (the newest wanted per page). */
static void changed_want(lm_lemuriad *c, uint32_t p, uint32_t version)
{
	if (!c->chg_want[p])
		c->chg_list[c->nchg++] = p;
	if (c->chg_want[p] < version)
		c->chg_want[p] = version;
}

void lm_fetch_heard(lm_lemuriad *c, const struct lm_notice *n,
		    uint32_t count)
{
	/* no copy yet (no client of the run joined): nothing to bring up
	 * to date, and CHANGED may come first under load */
	if (!c->shared || !c->copy.map || !c->heard || !count)
		return; /* (heard: the layout has other clusters) */
	lm_order_heard(c, n, count);
	if (!c->chg_want &&
	    (!(c->chg_want = calloc(c->npages, sizeof(*c->chg_want))) ||
	     !(c->chg_list = calloc(c->npages, sizeof(*c->chg_list))))) {
		free(c->chg_want);
		c->chg_want = NULL; /* as if lost: the next CHANGED asks again */
		return;
	}
	for (uint32_t i = 0; i < count; i++) {
		LM_PAGE_TRACE(c->trace, "heard", n[i].page, n[i].version, 0);
		if (n[i].page < c->npages && n[i].version)
			changed_want(c, n[i].page, n[i].version);
	}
	/* a wait for order may end with this list */
	if (c->ngrp || c->ngated)
		lm_fetch_group_check(c);
}

/* A client that reads a page without synchronising (a loop on a flag)
 * keeps its view of the copy open, and nothing else would bring the
 * copy up to date: the pages are fetched as a fault would fetch them,
 * each at the version CHANGED named or newer, and installed in place
 * (byte by byte where the cluster writes them too, lm_copy_install) all
 * at once when the last came (lm_fetch_group_check), so that a process
 * spinning on one page never sees it ahead of another that the same
 * writer changed before it (a pointer before its record).  Only one set
 * is out at a time; CHANGED heard meanwhile waits for the next.  A page
 * the copy lacks, holds new enough or owns needs nothing; one on its way
 * is asked again if its answer is older than CHANGED said (it may have
 * left the home before the change: dsmtest visible saw a reader wait
 * for ever so on 2x2-two-reflectors, one run in six).  Nor does one
 * that a barrier told every client of a version newer than the copy's:
 * each closed its view then, and no view opens again before a fetch
 * brings the copy that far (LU's pages that another cluster writes at
 * every step, which the copy holds until it drops them). */
void lm_fetch_changed_due(lm_lemuriad *c)
{
	if (!c->ngrp)
		changed_due(c);
}

/* Whether the copy holds page p older than `need` (at *v), so that a
 * change must be fetched for it: not when it lacks the page, nor owns
 * it, nor when a barrier told every client of a newer version (each
 * closed its view then). */
static bool copy_behind(const lm_lemuriad *c, uint32_t p, uint32_t need,
			uint32_t *v)
{
	return lm_ccopy_version(&c->copy, p, v) && *v < need &&
	       *v >= c->told_all[p] && !lm_ccopy_is_owned(&c->copy, p);
}

/* A page joins the set. */
static void group_add(lm_lemuriad *c, uint32_t p)
{
	if (c->grp_on[p])
		return;
	c->grp_on[p] = 1;
	c->grp_list[c->ngrp++] = p;
}

/* The pages CHANGED named join the set (a new one, or the one out when
 * pages of it must wait for these lists: lm_fetch_group_check). */
static void changed_due(lm_lemuriad *c)
{
	struct lm_notice want[LM_FETCHV_MAX];
	uint32_t batch[LM_FETCHV_MAX], n = 0;

	if (!c->nchg)
		return; /* (grp_list and grp_on came with heard) */
	for (uint32_t i = 0; i < c->nchg; i++) {
		uint32_t p = c->chg_list[i], need = c->chg_want[p];
		struct cpage *cp;
		struct upreq *up;
		uint32_t v;

		c->chg_want[p] = 0;
		if (!c->copy.map)
			continue;
		up = lm_upreq_fetch_of(c, p);
		if (up && up->gated) {
			/* its fault waits for order and goes in with the set,
			 * from the cache, whatever the copy holds (it may lack
			 * the page, or hold it older than a barrier told):
			 * fetched again if older than this list, or the set
			 * would show this list's other pages (a pointer)
			 * ahead of this one (the record) */
			if (up->gated_version >= need)
				continue;
			group_add(c, p);
			up->gated = false;
			up->min_version = need;
			up->refresh = true;
			up->grouped = true;
			lm_fetch_again(c, up);
			continue;
		}
		if (!copy_behind(c, p, need, &v))
			continue;
		group_add(c, p);
		if (up) {
			/* its answer may have left the home before the change:
			 * it is asked again unless it brings `need` */
			if (up->min_version < need)
				up->min_version = need;
			up->refresh = true;
			up->grouped = true;
			continue;
		}
		cp = lm_cache_find(c, p);
		if (cp && cp->version >= need && lm_order_cached(c, cp))
			continue; /* in the set, from the cache */
		if (!(up = batch_add(c, p, need, want, batch, &n)))
			continue; /* asked again when the set goes in */
		up->refresh = true;
		up->grouped = true;
		c->stats.changed_fetches++;
		if (n == LM_FETCHV_MAX) {
			lm_fetch_batch(c, want, batch, n, false);
			n = 0;
		}
	}
	c->nchg = 0;
	if (n)
		lm_fetch_batch(c, want, batch, n, false);
}

/* Whether a page of the set is still on its way; *unheard: whether a
 * registration that must be told before they go in was not yet. */
static bool set_waits(lm_lemuriad *c, bool *unheard)
{
	struct upreq *up;

	*unheard = false;
	for (uint32_t i = 0; i < c->ngrp; i++)
		if ((up = lm_upreq_fetch_of(c, c->grp_list[i])) && up->grouped)
			return true;
	*unheard = lm_order_untold(c);
	return false;
}

/* A page of the set whose answer is not in the cache at the newest
 * version heard when the set goes in joins the next set, at that
 * version: nothing else would bring it to a client that spins on it.
 * The answer never came (a bad reply, or no memory for the fetch), or a
 * notice dropped it (eviction keeps it: lm_cache_trim). */
static void set_again(lm_lemuriad *c, uint32_t p)
{
	uint32_t need = lm_order_least(c, p), v;

	if (!c->chg_want || !copy_behind(c, p, need, &v))
		return;
	LM_PAGE_TRACE(c->trace, "again", p, need, 0);
	changed_want(c, p, need);
	c->stats.changed_again++;
}

/* The set's pages, and those whose answers wait, go into the copy as one
 * (lm_copy_install_set), from the cache.  A page of the set that the copy
 * dropped, or that a fault or barrier brought further meanwhile, is left
 * as it is; one whose answer is not in the cache is asked for again
 * (set_again); a waiting page goes in also when the copy lacks it. */
static void install_set(lm_lemuriad *c)
{
	uint32_t want = c->ngrp + c->ngated, n = 0;
	struct cpage *cp;
	uint32_t v;

	if (want > c->set_cap) {
		struct lm_copy_set_item *t =
			realloc(c->set_items, want * sizeof(*t));

		if (!t) { /* one by one, in the order below */
			want = 0;
		} else {
			c->set_items = t;
			c->set_cap = want;
		}
	}
	for (uint32_t i = 0; i < c->ngrp; i++) {
		uint32_t p = c->grp_list[i];

		cp = lm_cache_find(c, p);
		if (c->copy.map && (!cp || cp->version < lm_order_least(c, p)))
			set_again(c, p);
		if (!cp || !c->copy.map ||
		    !lm_ccopy_version(&c->copy, p, &v) || v >= cp->version ||
		    lm_ccopy_is_owned(&c->copy, p))
			continue;
		if (n < want)
			c->set_items[n++] = (struct lm_copy_set_item){
				p, cp->version, cp->data };
		else
			lm_copy_install(c, p, cp->version, cp->data);
	}
	for (uint32_t i = 0; i < c->ngated; i++) {
		uint32_t p = c->gated_list[i];
		struct upreq *up = lm_upreq_fetch_of(c, p);

		/* one gated before a newer list came waits for its fetch
		 * again (changed_due); commit_gated asks for it then */
		if (!up || !up->gated || !(cp = lm_cache_find(c, p)) ||
		    c->grp_on[p] || cp->version < lm_order_least(c, p))
			continue;
		c->grp_on[p] = 1; /* once */
		if (n < want)
			c->set_items[n++] = (struct lm_copy_set_item){
				p, cp->version, cp->data };
		else
			lm_copy_install(c, p, cp->version, cp->data);
	}
	for (uint32_t i = 0; i < c->ngrp; i++)
		c->grp_on[c->grp_list[i]] = 0;
	for (uint32_t i = 0; i < c->ngated; i++)
		c->grp_on[c->gated_list[i]] = 0;
	lm_copy_install_set(c, c->set_items, n);
}

/* A waiting answer goes out: its page from the cache, into the copy as
 * the reply would have gone, or asked again when the cache lost it. */
static void commit_gated(lm_lemuriad *c, uint32_t page)
{
	struct upreq *up = lm_upreq_fetch_of(c, page);
	struct cpage *cp = lm_cache_find(c, page);
	struct lm_msg pm;

	if (!up || !up->gated)
		return;
	up->gated = false;
	if (!cp) {
		lm_fetch_again(c, up);
		return;
	}
	msg_init(c, &pm, LM_MSG_PAGE);
	pm.page = page;
	pm.version = cp->version;
	pm.data = cp->data;
	pm.data_len = c->page_size;
	reply_page_to(c, up, &pm);
}

/* The set fetched for CHANGED, and the fetch answers that wait for order
 * (docs/dsm.md "Eventual visibility", "Order"), go into the copy at once
 * when every page of them came and every version they bring is named by
 * a list heard, all those lists' pages in with them: the set's first,
 * then the faulted pages (a pointer is read before its record).  Pages
 * newer than every list heard wait while the writers are asked to tell
 * (order.c), and the lists that then come join the set, until none is
 * missing or the wait was too long. */
void lm_fetch_group_check(lm_lemuriad *c)
{
	uint32_t *pages, n;
	bool unheard;

	if (c->committing || set_waits(c, &unheard))
		return;
	if (!lm_order_late(c)) {
		if (unheard) {
			lm_order_wait(c);
			return;
		}
		/* every list heard goes in with them: a page of the set may
		 * be newer than its list said, by a change whose list came
		 * since (its record on a page of that list) */
		if (c->nchg && c->set_rounds < LM_LEMURIAD_SET_ROUNDS_MAX) {
			c->set_rounds++;
			changed_due(c);
			if (set_waits(c, &unheard) || unheard)
				return;
		} else if (c->nchg) {
			c->stats.order_cut++;
		}
	}
	install_set(c);
	if (c->ngrp)
		c->stats.changed_groups++;
	c->ngrp = 0;
	lm_cache_trim(c, 0); /* the set's pages held it beyond `cache` */
	c->set_rounds = 0;
	lm_order_done(c);
	/* the list may grow while its answers go out (a page asked again) */
	n = c->ngated;
	c->ngated = 0;
	pages = c->gated_list;
	c->committing = true;
	for (uint32_t i = 0; i < n; i++)
		commit_gated(c, pages[i]);
	c->committing = false;
}

void lm_fetch_group_clear(lm_lemuriad *c)
{
	for (uint32_t i = 0; c->grp_on && i < c->ngrp; i++)
		c->grp_on[c->grp_list[i]] = 0;
	c->ngrp = 0;
	c->ngated = 0;
	c->set_rounds = 0;
}

void lm_fetch_answer(lm_lemuriad *c, struct upreq *up, const struct lm_msg *m)
{
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
	reply_page(c, up, m);
	if (ahead && m->type == LM_MSG_PAGE && m->data)
		fetch_ahead(c, page, reach, more, nmore);
}

/* The page an entry of PAGES brings: the entry itself for a whole page,
 * else (a diff) what the held RELEASE builds from it in the cluster's
 * page buffer (hooks.rebuild), where reply_page works on it before it
 * goes into the cache.  NULL when it does not fit what we asked. */
static const uint8_t *pages_entry(lm_lemuriad *c, const struct upreq *up,
				  const struct lm_notice *n,
				  const uint8_t *data, size_t len)
{
	if (n->base == LM_NO_BASE)
		return len == c->page_size ? data : NULL;
	return c->hooks.rebuild(c, up, n, data, len);
}

void lm_fetch_pages(lm_lemuriad *c, struct upreq *batch,
		    const struct lm_msg *m)
{
	struct {
		uint32_t page;
		const uint8_t *data;
		size_t len;
	} e[LM_FETCHV_MAX];
	size_t pos = 0;
	uint32_t n = 0;

	if (m->type != LM_MSG_PAGES || m->diffs.count != m->nnotices ||
	    m->nnotices > LM_FETCHV_MAX)
		count_bad(c, c->reflector, m, "bad reply to FETCHV");
	while (m->type == LM_MSG_PAGES && n < m->nnotices &&
	       n < LM_FETCHV_MAX &&
	       lm_msg_diffs_next(&m->diffs, &pos, &e[n].page, &e[n].data,
				 &e[n].len) == 1)
		n++;
	/* last first: a client's FETCHV waiting on an early page of the
	 * batch then finds the later ones it asked for cached */
	for (uint32_t i = n; i-- > 0;) {
		struct upreq *up = lm_upreq_fetch_of(c, e[i].page);
		const uint8_t *data;
		struct lm_msg pm;

		if (e[i].page != m->notices[i].page || !up || !up->batched)
			continue;
		data = pages_entry(c, up, &m->notices[i], e[i].data, e[i].len);
		if (!data)
			continue; /* asked for alone below */
		up->batched = false;
		msg_init(c, &pm, LM_MSG_PAGE);
		pm.page = e[i].page;
		pm.version = m->notices[i].version;
		pm.data = data;
		pm.data_len = c->page_size;
		pm.tags = m->tags; /* the batch's: those of every page */
		pm.ntags = m->ntags;
		up->rebuilt = m->notices[i].base != LM_NO_BASE;
		reply_page(c, up, &pm);
		/* up may be gone: rebuilt is read only during reply_page,
		 * and a request kept for asking again is renumbered */
		if ((up = lm_upreq_fetch_of(c, e[i].page)))
			up->rebuilt = false;
	}
	/* what it did not bring is asked page by page (the home may have to
	 * pull it first, or it lives at another reflector); a page fetched
	 * ahead that nobody waits for is left to its first fault, unless a
	 * CHANGED's set took it (changed_due): no fault may come, as a
	 * client spinning on the page reads the copy's old bytes */
	for (uint32_t i = 0; i < batch->nbatch; i++) {
		struct upreq *up = lm_upreq_fetch_of(c, batch->batch[i]);

		if (!up || !up->batched)
			continue;
		if (batch->ahead && !up->waiters && !up->pre && !up->refresh)
			lm_upreq_free(c, up);
		else
			fetch_alone(c, up);
	}
	lm_upreq_free(c, batch);
}
