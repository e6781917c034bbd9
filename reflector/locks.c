/* The lock manager (docs/dsm.md, "Locks"; DESIGN.md §2): the tokens of
 * the locks whose id maps to this reflector, their FIFO of waiters, and
 * the notices their releases published.  A role: calls route.c only. */
#include "reflector_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lm_error.h"

static void lock_free_entry(struct home_lock *lk)
{
	struct home_waiter *w = lk->head;

	while (w) {
		struct home_waiter *next = w->next;

		free(w);
		w = next;
	}
	free(lk->notes);
}

void lm_lock_mgr_clear(lm_home *h)
{
	for (size_t i = 0; i < h->nlocks; i++)
		lock_free_entry(&h->locks[i]);
	h->nlocks = 0;
}

static struct home_lock *lock_find(lm_home *h, uint32_t id)
{
	for (size_t i = 0; i < h->nlocks; i++)
		if (h->locks[i].id == id)
			return &h->locks[i];
	return NULL;
}

static struct home_lock *lock_add(lm_home *h, uint32_t id)
{
	struct home_lock *lk;

	if (h->nlocks == h->locks_cap) {
		size_t cap = h->locks_cap ? h->locks_cap * 2 : 16;
		struct home_lock *nl;

		if (h->nlocks >= LM_HOME_LOCKS_MAX)
			return NULL;
		nl = realloc(h->locks, cap * sizeof(*nl));
		if (!nl)
			return NULL;
		h->locks = nl;
		h->locks_cap = cap;
	}
	lk = &h->locks[h->nlocks++];
	memset(lk, 0, sizeof(*lk));
	lk->id = id;
	return lk;
}

static void lock_remove(lm_home *h, struct home_lock *lk)
{
	lock_free_entry(lk);
	*lk = h->locks[--h->nlocks];
}

static const struct lm_cluster_cfg *cluster_of(const lm_home *h,
					       uint32_t rank)
{
	return lm_layout_cluster_of_rank(h->layout, rank);
}

/* Asks the cluster holding the lock's token for it back: its lemuriad
 * keeps a token while its own clients want it (DESIGN.md §2, Locks).
 * The earliest round of the waiters of other clusters goes with it: a
 * holder that waits in a barrier of a later round waits for a rank that
 * asked before that barrier and so never reaches it (lemuriad.c). */
static void send_recall(lm_home *h, struct home_lock *lk)
{
	const struct lm_cluster_cfg *c = cluster_of(h, lk->holder);
	struct lm_msg r = msg_new(h, LM_MSG_RECALL);

	if (!c || lk->recalled)
		return;
	lk->recalled = true;
	r.id = lk->id;
	r.rank = lk->holder;
	r.epoch = UINT32_MAX;
	for (const struct home_waiter *w = lk->head; w; w = w->next)
		if (cluster_of(h, w->rank) != c && w->epoch < r.epoch)
			r.epoch = w->epoch;
	h->stats.lock_recalls++;
	h->out.send(h->ctx, cluster_via(h, c), &r);
}

/* Whether a waiter of another cluster than the holder's is queued. */
static bool foreign_waiter(const lm_home *h, const struct home_lock *lk)
{
	const struct lm_cluster_cfg *hc = cluster_of(h, lk->holder);

	for (const struct home_waiter *w = lk->head; w; w = w->next)
		if (cluster_of(h, w->rank) != hc)
			return true;
	return false;
}

/* GRANT carries what the lock's releases published since the requester's
 * last barrier; older notices reached it with that barrier. */
static void lock_grant(lm_home *h, struct home_lock *lk, uint16_t node,
		       uint32_t req_id, uint32_t rank, uint32_t epoch)
{
	struct lm_msg r = msg_new(h, LM_MSG_GRANT);
	uint32_t n = 0;

	lk->held = true;
	lk->holder = rank;
	for (size_t i = 0; i < lk->nnotes; i++)
		if (lk->notes[i].epoch >= epoch)
			h->scratch[n++] = lk->notes[i].n;
	r.id = lk->id;
	r.rank = rank;
	r.notices = h->scratch;
	r.nnotices = n;
	if (served_cluster(h, node) >= 0)
		lm_notice_set_add(&h->epoch_set, r.notices, n);
	h->stats.lock_grants++;
	lk->recalled = false;
	h->out.reply(h->ctx, node, req_id, &r);
	if (foreign_waiter(h, lk))
		send_recall(h, lk);
}

/* LOCK m of rank m->rank, whose last barrier was m->epoch. */
long lm_lock_mgr_lock(lm_home *h, uint16_t from, uint32_t req_id,
		   const struct lm_msg *m)
{
	struct home_lock *lk = lock_find(h, m->id);
	struct home_waiter *w;

	if (!lk) {
		lk = lock_add(h, m->id);
		if (!lk) {
			drop_bad(h, from, m, "lock table full");
			return 0;
		}
	}
	if (!lk->held) {
		lock_grant(h, lk, from, req_id, m->rank, m->epoch);
		return 0;
	}
	for (w = lk->head; w; w = w->next) {
		if (w->rank == m->rank) {
			drop_bad(h, from, m, "rank already waits for it");
			return 0;
		}
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		drop_bad(h, from, m, "out of memory");
		return 0;
	}
	w->node = from;
	w->req_id = req_id;
	w->rank = m->rank;
	w->epoch = m->epoch;
	if (lk->tail)
		lk->tail->next = w;
	else
		lk->head = w;
	lk->tail = w;
	if (foreign_waiter(h, lk))
		send_recall(h, lk);
	return 0;
}

static int tagged_order(const void *a, const void *b)
{
	const struct tagged_notice *x = a, *y = b;

	if (x->n.page != y->n.page)
		return x->n.page < y->n.page ? -1 : 1;
	if (x->n.version != y->n.version)
		return x->n.version > y->n.version ? -1 : 1;
	return 0;
}

/* Adds a release's notices to the lock's.  Notices of epochs before the
 * releaser's are dropped: every process has passed that barrier, so no
 * later holder needs them from the lock. */
static int lock_note(struct home_lock *lk, uint32_t epoch,
		     const struct lm_notice *v, uint32_t n)
{
	size_t keep = 0, out = 0;
	struct tagged_notice *t;

	for (size_t i = 0; i < lk->nnotes; i++)
		if (lk->notes[i].epoch >= epoch)
			lk->notes[keep++] = lk->notes[i];
	lk->nnotes = keep;
	if (!n)
		return 0;
	t = realloc(lk->notes, (keep + n) * sizeof(*t));
	if (!t)
		return LM_ENOMEM;
	lk->notes = t;
	for (uint32_t i = 0; i < n; i++) {
		t[keep + i].n = v[i];
		t[keep + i].epoch = epoch;
	}
	qsort(t, keep + n, sizeof(*t), tagged_order);
	for (size_t i = 0; i < keep + n; i++)
		if (out == 0 || t[out - 1].n.page != t[i].n.page)
			t[out++] = t[i];
	lk->nnotes = out;
	return 0;
}

/* UNLOCK m of the holder, with the notices of its release made in epoch
 * m->epoch: the token goes to the next waiter. */
long lm_lock_mgr_unlock(lm_home *h, uint16_t from, uint32_t req_id,
		     const struct lm_msg *m)
{
	struct home_lock *lk = lock_find(h, m->id);
	struct home_waiter *w;

	(void)req_id;

	if (!lk || !lk->held || lk->holder != m->rank) {
		drop_bad(h, from, m, "rank does not hold the lock");
		return 0;
	}
	if (lock_note(lk, m->epoch, m->notices, m->nnotices) < 0)
		/* the next holder could miss changes: say so loudly */
		lm_log_error("home: out of memory keeping the notices of "
			     "lock %u", m->id);
	w = lk->head;
	if (!w) {
		lk->held = false;
		if (!lk->nnotes)
			lock_remove(h, lk);
		return 0;
	}
	lk->head = w->next;
	if (!lk->head)
		lk->tail = NULL;
	lock_grant(h, lk, w->node, w->req_id, w->rank, w->epoch);
	free(w);
	return 0;
}

long lm_lock_mgr_probe(lm_home *h, uint16_t from, uint32_t req_id,
		       const struct lm_msg *m)
{
	const struct home_lock *lk = lock_find(h, m->id);
	const struct lm_cluster_cfg *c;
	struct lm_msg r = *m;

	(void)from;
	(void)req_id;
	/* free, or its holder unknown: no wait on it lasts */
	if (!lk || !lk->held || !(c = cluster_of(h, lk->holder)))
		return 0;
	r.rank = lk->holder;
	h->out.send(h->ctx, cluster_via(h, c), &r);
	return 0;
}

void lm_locks_destroy(lm_home *h)
{
	lm_lock_mgr_clear(h);
	free(h->locks);
}
