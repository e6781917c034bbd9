/* Synchronisation messages of our clusters (BARRIER once all arrived,
 * UNLOCK, END, CREATE) held until the homes have acked every change our
 * clusters sent before them (I2), then sent on with the epoch's notices.
 * A role: calls route.c only. */
#include "reflector_int.h"

#include <stdlib.h>
#include <string.h>

/* Sends a held message on, with our clusters' notices of the epoch: a
 * superset of what the sender's changes were. */
static void held_send(lm_home *h, const struct held_msg *hm)
{
	const struct lm_notice_set *s = &h->epoch_set;
	const struct lm_cluster_cfg *c;
	struct lm_msg r = msg_new(h, hm->type);

	r.id = hm->id;
	r.rank = hm->rank;
	r.epoch = h->epoch;
	switch (hm->type) {
	case LM_MSG_BARRIER:
		r.notices = s->v;
		r.nnotices = s->n;
		/* to the barrier's manager (DESIGN.md §2, step 3) */
		(void)lm_route(h, lm_home_manager_of(h->layout, hm->id), &r,
			       0, 0, NULL, NULL);
		break;
	case LM_MSG_UNLOCK:
		r.notices = s->v;
		r.nnotices = s->n;
		(void)lm_route(h, lm_home_manager_of(h->layout, hm->id), &r,
			       0, 0, NULL, NULL);
		break;
	case LM_MSG_END:
		/* to rank 0's cluster, so that its WAIT_END sees what the
		 * worker flushed before it ended (I2, I3) */
		r.status = hm->status;
		r.epoch = 0;
		r.notices = s->v;
		r.nnotices = s->n;
		c = lm_layout_cluster_of_rank(h->layout, 0);
		h->out.send(h->ctx, cluster_via(h, c), &r);
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
		h->out.send(h->ctx, cluster_via(h, c), &r);
		break;
	}
}

/* Sends, in order, every held message whose flushes have been acked. */
void lm_held_release(lm_home *h)
{
	size_t done = 0;

	while (done < h->nheld &&
	       !lm_fwd_flush_pending(h, h->held[done].mark)) {
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
void lm_held_add(lm_home *h, uint16_t from, const struct lm_msg *m)
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
	if (lm_fwd_flush_pending(h, hm->mark))
		h->stats.held++;
	lm_held_release(h);
}

void lm_held_clear(lm_home *h)
{
	for (size_t i = 0; i < h->nheld; i++)
		free(h->held[i].data);
	h->nheld = 0;
}

void lm_held_destroy(lm_home *h)
{
	lm_held_clear(h);
	free(h->held);
}
