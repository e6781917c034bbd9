/* Other clusters' changes go into the cluster's copy in the order they
 * were made (docs/dsm.md "Eventual visibility", "Order").  A page fetched
 * at a version newer than every change this cluster was told of carries
 * a writer's publish whose other pages the copy may hold older: a process
 * that follows a pointer in it would find the record it points at stale.
 * Each home tags a page with the number of every cluster's last
 * registration that changed it (reflector/page_home.c); each CHANGED says
 * through which of its registrations the writer has told, and what it had
 * been told itself.  A page may go in only once every registration its
 * tags name was told us, and what those writers had been told too;
 * fetches.c then puts it into the copy together with every page the lists
 * heard named that the copy holds older.  This part keeps what was told,
 * tells whether a version may go in on its own, and asks the writers to
 * hurry.
 *
 * A version needs nothing when the copy already holds it, or when a
 * barrier's RELEASE told every client of it: each client then closed its
 * view of every page of that barrier's lists that it held older, so none
 * can see this page new and another old.  For a page the copy lacks,
 * that second rule needs the page's tags told and no set waiting: a
 * page taken back from its owner keeps its version but holds what the
 * owner wrote since (lm_order_free).  A page the copy lacks needs no
 * barrier either once its tags were told and every list heard went in:
 * the set it would go in with is itself alone.  And no version older
 * than one heard goes in: a set that named the newer one may be in
 * already (a page fetched ahead before a writer's change, arriving after
 * the change's pointer went in, showed the record as it was before).
 *
 * A cached answer keeps its tags until they are told (lm_order_cached):
 * a page fetched ahead before its writer's list came is then in order
 * like one that came after it, and need not be fetched again. */
#include "lemuriad_int.h"

void lm_order_heard(lm_lemuriad *c, const struct lm_notice *n,
		    uint32_t count)
{
	if (!c->heard)
		return;
	for (uint32_t i = 0; n && i < count; i++)
		if (n[i].page < c->npages &&
		    c->heard[n[i].page] < n[i].version)
			c->heard[n[i].page] = n[i].version;
}

uint32_t lm_order_least(const lm_lemuriad *c, uint32_t page)
{
	return c->heard && page < c->npages ? c->heard[page] : 0;
}

bool lm_order_free(const lm_lemuriad *c, uint32_t page, uint32_t version,
		   bool told)
{
	uint32_t have;
	bool held;

	if (!c->heard || !c->copy.map || page >= c->npages)
		return true;
	held = lm_ccopy_version(&c->copy, page, &have);
	if (held && version <= have)
		return true;
	/* no barrier told it: it goes in with every list heard, as one set
	 * (fetches.c).  Where the copy lacks the page and every list heard
	 * went in already (none waits, and none that a writer was told is
	 * missing), that set is this page alone: no fault need wait for it */
	if (version > c->told_all[page])
		return !held && told && !c->ngrp && !c->nchg &&
		       !lm_order_untold(c);
	/* a version a barrier told every client of holds only what was
	 * written before that barrier, unless its page was taken back from
	 * an owner since: the home keeps the version, the bytes are the
	 * owner's as it answered, and the tags name the owner's list of
	 * what else it wrote.  No other cluster owns a page our copy holds
	 * (the home counts us among its holders until our LM_REG_DROP,
	 * which leaves before any fetch that follows the drop); one the
	 * copy lacks may come back so, and goes in on its own only when its
	 * tags were told us and no set of the lists heard is still to go
	 * in ahead of it */
	return held || (told && !c->ngrp && !c->nchg);
}

void lm_order_told(lm_lemuriad *c, const struct lm_msg *m)
{
	uint32_t w = m->rank;

	if (!c->heard_reg || w >= c->layout->nclusters || w == c->index)
		return;
	if (c->heard_reg[w] < m->version)
		c->heard_reg[w] = m->version;
	/* what the writer had been told goes in before its list */
	lm_order_need(c, m);
}

bool lm_order_tags_told(const lm_lemuriad *c, const struct lm_msg *m)
{
	for (uint32_t i = 0; c->heard_reg && i < m->ntags; i++) {
		uint32_t w, r;

		lm_msg_tag(m, i, &w, &r);
		if (w < c->layout->nclusters && w != c->index &&
		    c->heard_reg[w] < r)
			return false;
	}
	return true;
}

void lm_order_need(lm_lemuriad *c, const struct lm_msg *m)
{
	for (uint32_t i = 0; c->need_reg && i < m->ntags; i++) {
		uint32_t w, r;

		lm_msg_tag(m, i, &w, &r);
		if (w < c->layout->nclusters && w != c->index &&
		    c->need_reg[w] < r)
			c->need_reg[w] = r;
	}
}

bool lm_order_cached(lm_lemuriad *c, struct cpage *cp)
{
	struct lm_msg m = { .tags = cp->tags, .ntags = cp->ntags };

	if (cp->ordered || !cp->tags || !lm_order_tags_told(c, &m))
		return cp->ordered;
	cp->ordered = true;
	lm_cache_keep_tags(cp, NULL, 0); /* not needed any more */
	return true;
}

void lm_order_need_cached(lm_lemuriad *c, const struct cpage *cp)
{
	struct lm_msg m = { .tags = cp->tags, .ntags = cp->ntags };

	if (cp->tags)
		lm_order_need(c, &m);
}

bool lm_order_untold(const lm_lemuriad *c)
{
	for (uint32_t w = 0; c->need_reg && w < c->layout->nclusters; w++)
		if (c->heard_reg[w] < c->need_reg[w])
			return true;
	return false;
}

void lm_order_sign(lm_lemuriad *c, struct lm_msg *m, uint32_t through)
{
	uint32_t n = 0;

	m->rank = c->index;
	m->version = through;
	for (uint32_t w = 0; c->heard_reg && w < c->layout->nclusters; w++)
		if (c->heard_reg[w])
			lm_msg_tag_put(c->tagout, n++, w, c->heard_reg[w]);
	m->tags = n ? c->tagout : NULL;
	m->ntags = n;
}

void lm_order_wait(lm_lemuriad *c)
{
	struct lm_msg m;

	if (!c->order_since)
		c->order_since = c->now_us ? c->now_us : 1;
	if (c->hurry_sent_us &&
	    c->now_us - c->hurry_sent_us < LM_LEMURIAD_HURRY_GAP_US)
		return;
	c->hurry_sent_us = c->now_us ? c->now_us : 1;
	msg_init(c, &m, LM_MSG_CHANGED);
	m.id = LM_CHANGED_HURRY;
	c->out.send(c->ctx, c->reflector, &m);
	c->stats.order_hurries++;
}

bool lm_order_late(const lm_lemuriad *c)
{
	return c->order_since && c->now_us > c->order_since &&
	       c->now_us - c->order_since >= LM_LEMURIAD_ORDER_WAIT_MAX_US;
}

void lm_order_done(lm_lemuriad *c)
{
	if (lm_order_late(c)) {
		c->stats.order_late++;
		lm_log_limited("pages put in before their writers' lists",
			       LM_LOG_WARN, "cluster %s: a page went into the "
			       "copy after %u s without the lists of changes "
			       "it depends on: a process reading with no lock "
			       "may see a pointer before its record "
			       "(docs/dsm.md \"Order\")", c->cfg->name,
			       LM_LEMURIAD_ORDER_WAIT_MAX_US / 1000000u);
	}
	c->order_since = 0;
}

uint64_t lm_order_next(const lm_lemuriad *c)
{
	uint64_t at;

	if (!c->order_since)
		return 0;
	at = c->hurry_sent_us + LM_LEMURIAD_HURRY_GAP_US;
	return at > c->now_us ? at : c->now_us + 1;
}

void lm_order_hurried(lm_lemuriad *c)
{
	c->hurry_until = c->now_us + LM_LEMURIAD_HURRY_US;
	c->stats.order_hurried++;
}

void lm_order_clear(lm_lemuriad *c)
{
	if (c->heard)
		memset(c->heard, 0, c->npages * sizeof(*c->heard));
	if (c->heard_reg) {
		memset(c->heard_reg, 0,
		       c->layout->nclusters * sizeof(*c->heard_reg));
		memset(c->need_reg, 0,
		       c->layout->nclusters * sizeof(*c->need_reg));
	}
	c->told_through = 0;
	c->order_since = 0;
	c->hurry_sent_us = 0;
	c->hurry_until = 0;
	c->tell_owed = 0;
}
