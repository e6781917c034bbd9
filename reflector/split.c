/* A cluster's FLUSH and REGISTER lists split by home (docs/dsm.md,
 * "Several reflectors", "Lazy relay"): each list is checked whole, each
 * home's part applied here or sent to it (lm_route), and a REGISTER
 * answered once every home has entered its part.  A role: calls
 * list_check.c and route.c only. */
#include "reflector_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lm_error.h"
#include "wire.h"

int lm_split_init(lm_home *h)
{
	h->split_notices = calloc(h->npages, sizeof(*h->split_notices));
	return h->split_notices ? 0 : LM_ENOMEM;
}

/* One home's part of a cluster's list: applied here or sent to the home,
 * whose ack brings the notices into our epoch set. */
static void flush_part(lm_home *h, uint32_t home, uint32_t writer,
		       const struct lm_msg_diffs *part)
{
	struct lm_msg r = msg_new(h, LM_MSG_FLUSH);
	struct forward *f;
	long n = 0;
	int where;

	r.rank = writer;
	r.epoch = h->epoch;
	r.diffs = *part;
	where = lm_route(h, home, &r, 0, 0, &n, &f);
	if (where == 1) {
		for (long i = 0; i < n; i++)
			lm_notice_set_put(&h->epoch_set, &h->scratch[i]);
		return;
	}
	if (where < 0) {
		h->stats.diffs_rejected += part->count;
		lose_run(h, "too many requests in flight to forward diffs");
		return;
	}
	f->seq = ++h->flush_sent;
	h->stats.flushes_forwarded++;
}

/* Splits a cluster's list by home: one part per home reflector. */
void lm_split_flush(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	uint32_t page, first = UINT32_MAX;
	const uint8_t *diff;
	size_t pos = 0, len;
	bool mixed = false;
	long n;

	n = lm_list_check_flush(h, &m->diffs, false);
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
	r.data = done.granted;
	r.data_len = done.granted_len;
	h->out.reply(h->ctx, done.node, done.req_id, &r);
	free(done.notices);
	free(done.granted);
}

/* The pages our home just made the cluster the owner of go back with
 * the answer (only ours can be: docs/dsm.md "Pages one cluster owns"). */
static int agg_add_granted(struct reg_agg *a, const uint32_t *pages,
			   uint32_t n)
{
	uint8_t *g;

	if (!n)
		return 0;
	g = realloc(a->granted, a->granted_len + (size_t)n * 4);
	if (!g)
		return LM_ENOMEM;
	a->granted = g;
	for (uint32_t i = 0; i < n; i++) {
		lm_put32(g + a->granted_len, pages[i]);
		a->granted_len += 4;
	}
	return 0;
}

/* One home's part of a registration: entered here or sent to the home. */
static void register_part(lm_home *h, struct reg_agg *a, uint32_t home,
			  const struct lm_msg *part)
{
	struct forward *f;
	long n = 0;
	int where = lm_route(h, home, part, 0, 0, &n, &f);

	if (where == 1) {
		if (n < 0) {
			a->status = (int32_t)n;
			return;
		}
		for (long i = 0; i < n; i++)
			lm_notice_set_put(&h->epoch_set, &h->scratch[i]);
		if (agg_add_notices(a, h->scratch, (size_t)n) < 0)
			a->status = LM_ENOMEM;
		/* untold, a grant is only a hint at us: the cluster answers
		 * our PULL with its delta, as for any page */
		if (agg_add_granted(a, h->granted, h->ngranted) < 0)
			lm_log_warn("home: no memory to tell a cluster of the "
				    "%u pages it now owns", h->ngranted);
		return;
	}
	if (where < 0) {
		a->status = LM_ENOBUFS;
		lose_run(h, "too many requests in flight to register deltas");
		return;
	}
	f->seq = ++h->flush_sent;
	f->agg = a->id;
	a->parts++;
	h->stats.registers_forwarded++;
}

/* A cluster's REGISTER: checked whole, split by home, answered with the
 * notices once every home has entered its part. */
void lm_split_register(lm_home *h, uint16_t from, long ci,
		       uint32_t req_id, const struct lm_msg *m)
{
	struct reg_agg *a;

	if (lm_list_check_register(h, m, (uint32_t)ci, false) < 0) {
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
		part.id = m->id; /* the cluster's registration number */
		part.notices = h->split_notices;
		part.diffs.data = h->split;
		for (uint32_t i = 0; i < m->nnotices; i++) {
			const struct lm_notice *e = &m->notices[i];
			bool mine = lm_home_of_page(h->layout, e->page) == k;

			if (lm_reg_has_data(e->base))
				(void)lm_msg_diffs_next(&m->diffs, &pos, &page,
							&diff, &len);
			if (!mine)
				continue;
			h->split_notices[part.nnotices++] = *e;
			if (lm_reg_has_data(e->base)) {
				(void)lm_msg_diffs_append(h->split,
							  h->split_cap,
							  &part.diffs.len,
							  page, diff, len);
				part.diffs.count++;
			}
		}
		if (part.nnotices)
			register_part(h, a, k, &part);
		a = agg_find(h, a->id); /* the table may have moved */
	}
	a->parts--;
	agg_done(h, a);
}


/* A home's answer to a REGISTER part of registration `agg`; m is NULL
 * when the answer was bad. */
void lm_split_register_acked(lm_home *h, uint32_t agg,
			     const struct lm_msg *m)
{
	struct reg_agg *a = agg_find(h, agg);

	if (!a)
		return;
	if (!m) {
		a->status = LM_EBADMSG;
	} else {
		if (m->status)
			a->status = m->status;
		if (agg_add_notices(a, m->notices, m->nnotices) < 0)
			a->status = LM_ENOMEM;
	}
	a->parts--;
	agg_done(h, a);
}

void lm_split_clear(lm_home *h)
{
	for (size_t i = 0; i < h->naggs; i++) {
		free(h->aggs[i].notices);
		free(h->aggs[i].granted);
	}
	h->naggs = 0;
}

void lm_split_destroy(lm_home *h)
{
	if (h->aggs)
		lm_split_clear(h);
	free(h->aggs);
	free(h->split_notices);
	free(h->split);
}
