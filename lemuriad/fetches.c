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

	if (c->shared) { /* the others we hold go into the copy too */
		for (uint32_t i = 0; i < n; i++)
			if ((cp = lm_cache_find(c, more[i])))
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
		if (c->shared)
			lm_copy_install(c, cp->page, cp->version, cp->data);
		answer_page(c, from, req_id, cp->page, cp->version, cp->data);
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
	if (first.page >= c->npages || !(cp = lm_cache_find(c, first.page))) {
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
	bool grouped = up->grouped;

	reply_page_to(c, up, m);
	if (grouped)
		lm_fetch_group_check(c);
}

static void reply_page_to(lm_lemuriad *c, struct upreq *up,
			  const struct lm_msg *m)
{
	struct waiter **pp = &up->waiters;
	struct lm_msg r;
	bool fits;

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
	if (m->data != c->pagebuf)
		memcpy(c->pagebuf, m->data, c->page_size);
	lm_deltas_overlay(c->deltas, m->page, m->version, c->pagebuf);
	fits = m->version >= up->left;
	if (m->version >= up->min_version && fits)
		lm_cache_put(c, m->page, m->version, c->pagebuf);
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
	if (c->shared && fits && (!up->grouped || up->waiters))
		lm_copy_install(c, m->page, m->version, c->pagebuf);
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
	/* no copy yet (no client of the run joined): nothing to bring up
	 * to date, and CHANGED may come first under load */
	if (!c->shared || !c->copy.map)
		return;
	if (!c->chg_want &&
	    (!(c->chg_want = calloc(c->npages, sizeof(*c->chg_want))) ||
	     !(c->chg_list = calloc(c->npages, sizeof(*c->chg_list))))) {
		free(c->chg_want);
		c->chg_want = NULL; /* as if lost: the next CHANGED asks again */
		return;
	}
	c->stats.changed_heard += m->nnotices;
	for (uint32_t i = 0; i < m->nnotices; i++) {
		uint32_t p = m->notices[i].page;

		if (p >= c->npages || !m->notices[i].version)
			continue;
		if (!c->chg_want[p])
			c->chg_list[c->nchg++] = p;
		if (c->chg_want[p] < m->notices[i].version)
			c->chg_want[p] = m->notices[i].version;
	}
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
	struct lm_notice want[LM_FETCHV_MAX];
	uint32_t batch[LM_FETCHV_MAX], n = 0;

	if (c->ngrp || !c->nchg)
		return;
	if (!c->grp_list &&
	    !(c->grp_list = calloc(c->npages, sizeof(*c->grp_list))))
		return; /* asked again at the next pulse */
	for (uint32_t i = 0; i < c->nchg; i++) {
		uint32_t p = c->chg_list[i], need = c->chg_want[p];
		struct cpage *cp;
		struct upreq *up;
		uint32_t v;

		c->chg_want[p] = 0;
		if (!c->copy.map || !lm_ccopy_version(&c->copy, p, &v) ||
		    v >= need || v < c->told_all[p] ||
		    lm_ccopy_is_owned(&c->copy, p))
			continue;
		c->grp_list[c->ngrp++] = p;
		if ((up = lm_upreq_fetch_of(c, p))) {
			/* its answer may have left the home before the change:
			 * it is asked again unless it brings `need` */
			if (up->min_version < need)
				up->min_version = need;
			up->refresh = true;
			up->grouped = true;
			continue;
		}
		cp = lm_cache_find(c, p);
		if (cp && cp->version >= need)
			continue; /* in the set, from the cache */
		if (!(up = batch_add(c, p, need, want, batch, &n)))
			continue; /* the next CHANGED or fault asks again */
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
	if (c->ngrp)
		lm_fetch_group_check(c);
}

void lm_fetch_group_check(lm_lemuriad *c)
{
	struct upreq *up;

	for (uint32_t i = 0; i < c->ngrp; i++)
		if ((up = lm_upreq_fetch_of(c, c->grp_list[i])) && up->grouped)
			return;
	for (uint32_t i = 0; i < c->ngrp; i++) {
		uint32_t p = c->grp_list[i], v;
		struct cpage *cp = lm_cache_find(c, p);

		/* a page the copy dropped, or that a fault or barrier brought
		 * further meanwhile, is left as it is */
		if (cp && c->copy.map && lm_ccopy_version(&c->copy, p, &v) &&
		    v < cp->version && !lm_ccopy_is_owned(&c->copy, p))
			lm_copy_install(c, p, cp->version, cp->data);
	}
	c->stats.changed_groups++;
	c->ngrp = 0;
}

void lm_fetch_group_clear(lm_lemuriad *c)
{
	c->ngrp = 0;
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
		up->rebuilt = m->notices[i].base != LM_NO_BASE;
		reply_page(c, up, &pm);
		/* up may be gone: rebuilt is read only during reply_page,
		 * and a request kept for asking again is renumbered */
		if ((up = lm_upreq_fetch_of(c, e[i].page)))
			up->rebuilt = false;
	}
	/* what it did not bring is asked page by page (the home may have to
	 * pull it first, or it lives at another reflector); a page fetched
	 * ahead that nobody waits for is left to its first fault */
	for (uint32_t i = 0; i < batch->nbatch; i++) {
		struct upreq *up = lm_upreq_fetch_of(c, batch->batch[i]);

		if (!up || !up->batched)
			continue;
		if (batch->ahead && !up->waiters && !up->pre)
			lm_upreq_free(c, up);
		else
			fetch_alone(c, up);
	}
	lm_upreq_free(c, batch);
}
