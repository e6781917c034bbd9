/* Reflector protocol layer: R's role in docs/dsm.md with one reflector
 * level.  The home of every page, manager of every lock and barrier, and
 * the allocator, as a state machine fed decoded messages.
 *
 * Choices where docs/dsm.md leaves room (the lead may fold them into it):
 *  - Run ids compare as unsigned numbers: larger is newer.  The home starts
 *    at run 0; the first message of a larger run resets every piece of run
 *    state (pages, versions, epoch, barriers, locks, allocator, id
 *    counters) but not the counters of lm_home_stats.
 *  - Only messages from clusters whose reflector is this one are served;
 *    anything else (clients, tools, other reflectors' clusters) is dropped
 *    and counted.  Kinds are checked: FETCH, LOCK, ALLOC, FREE and JOIN
 *    must be requests, FLUSH, BARRIER, UNLOCK, CREATE, END and ABORT
 *    one-way.
 *  - A FETCH of a page outside the region is answered with a PAGE of
 *    data_len 0 (PAGE has no status; the lemuriad treats it as an error)
 *    and counted in dropped_bad, so the requester does not hang.
 *  - A FLUSH list is all or nothing: if any entry is malformed, names a
 *    page outside the region or fails lm_diff_validate, nothing of it is
 *    applied and its entries count as rejected (those up to the first bad
 *    one when the list itself does not parse).  A page's version goes
 *    up once per applied list that contains it, however many entries for
 *    it the list has.  A FLUSH must name its writer: a rank of the
 *    sending cluster, else it is dropped as bad input.
 *  - Notices name who wrote the page in the epoch (base, writer,
 *    wcluster; docs/dsm.md "Sole writers"), so that a sole writer's copy
 *    is kept instead of refetched.
 *  - ALLOC: with align == 0 and id != 0 it reserves `size` ids of kind id
 *    (see home.h) and answers the first one in offset (id != 0 with an
 *    align is LM_EINVAL; a kind out of range LM_EINVAL; ids exhausted
 *    LM_ENOMEM).  With id == 0 it allocates memory:
 *    sizes are rounded up to LM_HOME_ALIGN, the alignment is the larger of
 *    the explicit one (a power of two) and the default (LM_HOME_ALIGN, or
 *    page_size when size >= page_size).  Size 0 or a bad align: LM_EINVAL.
 *  - LOCK from a rank already waiting for that lock, UNLOCK from a rank
 *    that does not hold it, a second BARRIER arrival of a cluster before
 *    the barrier completed, a rank (LOCK, UNLOCK, FLUSH) outside the
 *    sending cluster: logged, dropped, counted in dropped_bad.
 *  - JOIN (request, if a lemuriad sends one) is answered JOIN_OK{0}.
 *    ABORT from a cluster is passed on to every other cluster served, so
 *    their waiting clients fail instead of hanging. */
#include "home.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "log.h"
#include "lm_error.h"

/* Active lock entries (held or waited for); beyond this, LOCK is dropped.
 * Entries of free locks with no waiters are removed, so the table is
 * bounded by what the clients hold and wait for at the same moment. */
#define LM_HOME_LOCKS_MAX 65536u

struct home_waiter {
	struct home_waiter *next;
	uint16_t node;   /* lemuriad that asked */
	uint32_t req_id; /* its LOCK request, answered by GRANT */
	uint32_t rank;
};

struct home_lock {
	uint32_t id;
	uint32_t holder;             /* rank; meaningful when held */
	bool held;
	struct home_waiter *head, *tail; /* FIFO of waiters */
};

struct home_barrier {
	bool pending;
	uint32_t id;
	uint32_t arrived; /* clusters so far */
	uint8_t *seen;    /* per layout cluster index, owned */
};

/* A range of the shared region [off, off + len). */
struct extent {
	uint64_t off, len;
};

/* Sorted by off, no overlaps. */
struct extent_vec {
	struct extent *v;
	size_t n, cap;
};

struct lm_home {
	const struct lm_layout *layout; /* borrowed */
	uint16_t self_id;
	struct lm_msg_out out;
	void *ctx;
	size_t self_index;   /* into layout->reflectors */
	uint32_t nserved;    /* clusters whose reflector is self */
	uint32_t page_size;
	uint32_t npages;
	uint64_t run;

	/* Master copies: NULL until first written (the zero page). */
	uint8_t **pages;
	uint32_t *versions;
	uint8_t *zero; /* page_size zero bytes, answers FETCH of NULL pages */

	/* The epoch's notice list: one entry per page changed since the last
	 * barrier, with its latest version, the version it had before the
	 * epoch's first change and who made the changes.  in_epoch[p] is the
	 * index + 1 of p's entry, 0 when p has none, so a notice is updated
	 * in place and the list is cleared in O(changed). */
	struct lm_notice *notices; /* npages entries */
	uint32_t nnotices;
	uint32_t *in_epoch;

	/* flush_mark[p] == flush_seq when p's version went up in the list
	 * being applied. */
	uint32_t *flush_mark;
	uint32_t flush_seq;

	struct home_barrier barriers[LM_HOME_BARRIERS_MAX];

	struct home_lock *locks; /* unordered, active entries only */
	size_t nlocks, locks_cap;

	struct extent_vec free_list; /* free ranges */
	struct extent_vec used;      /* live allocations (rounded size) */
	uint64_t next_id[LM_HOME_ID_KINDS]; /* may reach 2^32: exhausted */

	struct lm_home_stats stats;
};

/* ---- helpers ---------------------------------------------------------- */

static int vec_reserve(struct extent_vec *v, size_t want)
{
	struct extent *nv;
	size_t cap;

	if (want <= v->cap)
		return 0;
	cap = v->cap ? v->cap * 2 : 16;
	while (cap < want)
		cap *= 2;
	nv = realloc(v->v, cap * sizeof(*nv));
	if (!nv)
		return LM_ENOMEM;
	v->v = nv;
	v->cap = cap;
	return 0;
}

static void vec_insert(struct extent_vec *v, size_t at, struct extent e)
{
	memmove(&v->v[at + 1], &v->v[at], (v->n - at) * sizeof(*v->v));
	v->v[at] = e;
	v->n++;
}

static void vec_remove(struct extent_vec *v, size_t at)
{
	memmove(&v->v[at], &v->v[at + 1], (v->n - at - 1) * sizeof(*v->v));
	v->n--;
}

/* Index of the first extent with off >= key. */
static size_t vec_lower_bound(const struct extent_vec *v, uint64_t key)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v->v[mid].off < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Layout index of the cluster with node id `node` if this reflector serves
 * it, else -1. */
static long served_cluster(const lm_home *h, uint16_t node)
{
	const struct lm_layout *l = h->layout;
	size_t first = l->nreflectors + 1;
	size_t i;

	if (node < first || node - first >= l->nclusters)
		return -1;
	i = node - first;
	if (l->clusters[i].id != node ||
	    (size_t)l->clusters[i].reflector_index != h->self_index)
		return -1;
	return (long)i;
}

/* The served cluster holding `rank`, or NULL. */
static const struct lm_cluster_cfg *served_rank(const lm_home *h,
						uint32_t rank)
{
	const struct lm_cluster_cfg *c;

	c = lm_layout_cluster_of_rank(h->layout, rank);
	if (!c || (size_t)c->reflector_index != h->self_index)
		return NULL;
	return c;
}

static void drop_bad(lm_home *h, uint16_t from, const struct lm_msg *m,
		     const char *why)
{
	h->stats.dropped_bad++;
	lm_log_warn("home: %s from node %u dropped: %s",
		    lm_msg_name(m->type), from, why);
}

static struct lm_msg msg_new(const lm_home *h, enum lm_msg_type type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (uint16_t)type;
	m.run = h->run;
	return m;
}

/* ---- run state -------------------------------------------------------- */

static void epoch_clear(lm_home *h)
{
	for (uint32_t i = 0; i < h->nnotices; i++)
		h->in_epoch[h->notices[i].page] = 0;
	h->nnotices = 0;
}

static void locks_clear(lm_home *h)
{
	for (size_t i = 0; i < h->nlocks; i++) {
		struct home_waiter *w = h->locks[i].head;

		while (w) {
			struct home_waiter *next = w->next;

			free(w);
			w = next;
		}
	}
	h->nlocks = 0;
}

static void barriers_clear(lm_home *h)
{
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		h->barriers[i].pending = false;
		h->barriers[i].arrived = 0;
		memset(h->barriers[i].seen, 0, h->layout->nclusters);
	}
}

/* Forgets everything of the current run (docs/dsm.md "Identity and
 * runs").  Cannot fail: the free list's room for one extent was reserved
 * at create. */
static void run_reset(lm_home *h)
{
	for (uint32_t p = 0; p < h->npages; p++) {
		free(h->pages[p]);
		h->pages[p] = NULL;
	}
	memset(h->versions, 0, (size_t)h->npages * sizeof(*h->versions));
	epoch_clear(h);
	barriers_clear(h);
	locks_clear(h);
	h->used.n = 0;
	h->free_list.n = 1;
	h->free_list.v[0].off = 0;
	/* The last page is the runtime's (lm_distribute), never handed out. */
	h->free_list.v[0].len = h->layout->shared_size - h->layout->page_size;
	for (size_t k = 0; k < LM_HOME_ID_KINDS; k++)
		h->next_id[k] = 1;
}

/* ---- create / destroy ------------------------------------------------- */

lm_home *lm_home_create(const struct lm_layout *layout, uint16_t self_id,
			const struct lm_msg_out *out, void *ctx)
{
	lm_home *h;
	uint64_t npages;
	size_t i;

	if (!layout || !out || !out->send || !out->reply ||
	    layout->page_size == 0)
		return NULL;
	npages = layout->shared_size / layout->page_size;
	if (npages == 0 || npages > UINT32_MAX - 1)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->layout = layout;
	h->self_id = self_id;
	h->out = *out;
	h->ctx = ctx;
	h->page_size = layout->page_size;
	h->npages = (uint32_t)npages;
	for (i = 0; i < layout->nreflectors; i++)
		if (layout->reflectors[i].id == self_id)
			break;
	if (i == layout->nreflectors)
		goto err;
	h->self_index = i;
	for (i = 0; i < layout->nclusters; i++)
		if ((size_t)layout->clusters[i].reflector_index ==
		    h->self_index)
			h->nserved++;

	h->pages = calloc(npages, sizeof(*h->pages));
	h->versions = calloc(npages, sizeof(*h->versions));
	h->zero = calloc(1, layout->page_size);
	h->notices = calloc(npages, sizeof(*h->notices));
	h->in_epoch = calloc(npages, sizeof(*h->in_epoch));
	h->flush_mark = calloc(npages, sizeof(*h->flush_mark));
	if (!h->pages || !h->versions || !h->zero || !h->notices ||
	    !h->in_epoch || !h->flush_mark)
		goto err;
	for (i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		/* +1: a layout always has clusters, but calloc(0) may be
		 * NULL */
		h->barriers[i].seen = calloc(layout->nclusters + 1, 1);
		if (!h->barriers[i].seen)
			goto err;
	}
	if (vec_reserve(&h->free_list, 16) < 0 ||
	    vec_reserve(&h->used, 16) < 0)
		goto err;
	run_reset(h);
	return h;
err:
	lm_home_destroy(h);
	return NULL;
}

void lm_home_destroy(lm_home *h)
{
	if (!h)
		return;
	if (h->pages)
		for (uint32_t p = 0; p < h->npages; p++)
			free(h->pages[p]);
	free(h->pages);
	free(h->versions);
	free(h->zero);
	free(h->notices);
	free(h->in_epoch);
	free(h->flush_mark);
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++)
		free(h->barriers[i].seen);
	locks_clear(h);
	free(h->locks);
	free(h->free_list.v);
	free(h->used.v);
	free(h);
}

const struct lm_home_stats *lm_home_stats(const lm_home *h)
{
	return &h->stats;
}

int lm_home_page(const lm_home *h, uint32_t page, const uint8_t **data,
		 uint32_t *version)
{
	if (!h || page >= h->npages)
		return LM_EINVAL;
	if (data)
		*data = h->pages[page];
	if (version)
		*version = h->versions[page];
	return 0;
}

/* ---- pages ------------------------------------------------------------ */

static void handle_fetch(lm_home *h, uint16_t from, uint32_t req_id,
			 const struct lm_msg *m)
{
	struct lm_msg r = msg_new(h, LM_MSG_PAGE);

	r.page = m->page;
	if (m->page >= h->npages) {
		/* Answered anyway so the requester fails instead of
		 * waiting forever; data_len 0 marks the error. */
		drop_bad(h, from, m, "page outside the region");
		h->out.reply(h->ctx, from, req_id, &r);
		return;
	}
	r.version = h->versions[m->page];
	r.data = h->pages[m->page] ? h->pages[m->page] : h->zero;
	r.data_len = h->page_size;
	h->stats.fetches++;
	h->out.reply(h->ctx, from, req_id, &r);
}

/* Records page's new version in the epoch's notice list (I3), after a
 * list of rank `writer` from cluster index `wcluster` raised it by one.
 * The version is exact: a copy at `base` plus exactly the diffs of the
 * epoch is the page at `version`, which is what lets a sole writer keep
 * its copy (docs/dsm.md "Sole writers"); so any second writer or cluster
 * turns the field into LM_WRITER_MANY for the rest of the epoch. */
static void note_page(lm_home *h, uint32_t page, uint32_t writer,
		      uint32_t wcluster)
{
	uint32_t at = h->in_epoch[page];
	struct lm_notice *n;

	if (!at) {
		at = ++h->nnotices;
		h->in_epoch[page] = at;
		n = &h->notices[at - 1];
		n->page = page;
		n->base = h->versions[page] - 1;
		n->writer = writer;
		n->wcluster = wcluster;
	}
	n = &h->notices[at - 1];
	n->version = h->versions[page];
	if (n->writer != writer)
		n->writer = LM_WRITER_MANY;
	if (n->wcluster != wcluster)
		n->wcluster = LM_WRITER_MANY;
}

/* Checks a whole diff list; returns the number of entries or a negative
 * count - 1 of entries seen before the first bad one. */
static long flush_check(const lm_home *h, const struct lm_msg_diffs *d)
{
	size_t pos = 0;
	long n = 0;
	uint32_t page;
	const uint8_t *diff;
	size_t len;
	int r;

	while ((r = lm_msg_diffs_next(d, &pos, &page, &diff, &len)) == 1) {
		if (page >= h->npages ||
		    lm_diff_validate(diff, len, h->page_size) < 0)
			return -(n + 1);
		n++;
	}
	if (r < 0)
		return -(n + 1);
	return n;
}

static void handle_flush(lm_home *h, uint16_t from, long ci,
			 const struct lm_msg *m)
{
	size_t pos = 0;
	uint32_t page;
	const uint8_t *diff;
	size_t len;
	long n;

	n = flush_check(h, &m->diffs);
	if (n < 0) {
		h->stats.diffs_rejected += (uint64_t)-n;
		lm_log_warn("home: FLUSH from node %u rejected: malformed "
			    "diff list or page", from);
		return;
	}
	/* Materialise every zero page first: running out of memory then
	 * still leaves the list unapplied rather than half-applied. */
	while (lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) == 1) {
		if (h->pages[page])
			continue;
		h->pages[page] = calloc(1, h->page_size);
		if (!h->pages[page]) {
			h->stats.diffs_rejected += (uint64_t)n;
			lm_log_error("home: FLUSH from node %u rejected: out "
				     "of memory", from);
			return;
		}
	}
	if (++h->flush_seq == 0) {
		memset(h->flush_mark, 0,
		       (size_t)h->npages * sizeof(*h->flush_mark));
		h->flush_seq = 1;
	}
	pos = 0;
	while (lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) == 1) {
		lm_diff_apply(h->pages[page], h->page_size, diff, len);
		h->stats.diffs_applied++;
		if (h->flush_mark[page] == h->flush_seq)
			continue;
		h->flush_mark[page] = h->flush_seq;
		h->versions[page]++;
		note_page(h, page, m->rank, (uint32_t)ci);
	}
	h->stats.flushes++;
}

/* ---- barriers --------------------------------------------------------- */

static void barrier_release(lm_home *h, struct home_barrier *b)
{
	struct lm_msg r = msg_new(h, LM_MSG_RELEASE);
	const struct lm_layout *l = h->layout;

	r.id = b->id;
	r.notices = h->notices;
	r.nnotices = h->nnotices;
	for (size_t i = 0; i < l->nclusters; i++)
		if ((size_t)l->clusters[i].reflector_index == h->self_index)
			h->out.send(h->ctx, l->clusters[i].id, &r);
	b->pending = false;
	b->arrived = 0;
	memset(b->seen, 0, l->nclusters);
	epoch_clear(h);
	h->stats.barriers++;
}

static void handle_barrier(lm_home *h, uint16_t from, long ci,
			   const struct lm_msg *m)
{
	struct home_barrier *b = NULL, *spare = NULL;

	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		struct home_barrier *e = &h->barriers[i];

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
	if (++b->arrived == h->nserved)
		barrier_release(h, b);
}

/* ---- locks ------------------------------------------------------------ */

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
	*lk = h->locks[--h->nlocks];
}

/* GRANT carries the epoch's notices: every page changed since the last
 * barrier, a superset of what the lock's holder chain wrote. */
static void lock_grant(lm_home *h, struct home_lock *lk, uint16_t node,
		       uint32_t req_id, uint32_t rank)
{
	struct lm_msg r = msg_new(h, LM_MSG_GRANT);

	lk->held = true;
	lk->holder = rank;
	r.id = lk->id;
	r.rank = rank;
	r.notices = h->notices;
	r.nnotices = h->nnotices;
	h->stats.lock_grants++;
	h->out.reply(h->ctx, node, req_id, &r);
}

static void handle_lock(lm_home *h, uint16_t from, uint32_t req_id,
			const struct lm_msg *m)
{
	struct home_lock *lk = lock_find(h, m->id);
	struct home_waiter *w;

	if (!lk) {
		lk = lock_add(h, m->id);
		if (!lk) {
			drop_bad(h, from, m, "lock table full");
			return;
		}
	}
	if (!lk->held) {
		lock_grant(h, lk, from, req_id, m->rank);
		return;
	}
	for (w = lk->head; w; w = w->next) {
		if (w->rank == m->rank) {
			drop_bad(h, from, m, "rank already waits for it");
			return;
		}
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		drop_bad(h, from, m, "out of memory");
		return;
	}
	w->node = from;
	w->req_id = req_id;
	w->rank = m->rank;
	if (lk->tail)
		lk->tail->next = w;
	else
		lk->head = w;
	lk->tail = w;
}

static void handle_unlock(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	struct home_lock *lk = lock_find(h, m->id);
	struct home_waiter *w;

	if (!lk || !lk->held || lk->holder != m->rank) {
		drop_bad(h, from, m, "rank does not hold the lock");
		return;
	}
	w = lk->head;
	if (!w) {
		lock_remove(h, lk);
		return;
	}
	lk->head = w->next;
	if (!lk->head)
		lk->tail = NULL;
	lock_grant(h, lk, w->node, w->req_id, w->rank);
	free(w);
}

/* ---- allocator -------------------------------------------------------- */

static int alloc_ids(lm_home *h, uint32_t kind, uint64_t count,
		     uint64_t *first)
{
	if (kind >= LM_HOME_ID_KINDS || count == 0)
		return LM_EINVAL;
	if (count > (uint64_t)UINT32_MAX + 1 - h->next_id[kind])
		return LM_ENOMEM;
	*first = h->next_id[kind];
	h->next_id[kind] += count;
	return 0;
}

/* First fit over the free list, in address order. */
static int alloc_mem(lm_home *h, uint64_t size, uint64_t align,
		     uint64_t *offset)
{
	struct extent_vec *fl = &h->free_list;
	uint64_t a = size >= h->page_size ? h->page_size : LM_HOME_ALIGN;

	if (size == 0 || (align && !is_pow2(align)))
		return LM_EINVAL;
	if (align > a)
		a = align;
	if (size > h->layout->shared_size || a > h->layout->shared_size)
		return LM_ENOMEM;
	size = align_up(size, LM_HOME_ALIGN);
	/* The split below may add one free extent and always adds one
	 * live allocation: make room first so nothing fails half-way. */
	if (vec_reserve(fl, fl->n + 1) < 0 ||
	    vec_reserve(&h->used, h->used.n + 1) < 0)
		return LM_ENOMEM;
	for (size_t i = 0; i < fl->n; i++) {
		struct extent e = fl->v[i];
		uint64_t start = align_up(e.off, a);
		uint64_t end = e.off + e.len;
		struct extent u = { start, size };

		if (start >= end || end - start < size)
			continue;
		if (start > e.off) {
			fl->v[i].len = start - e.off;
			if (start + size < end) {
				struct extent tail = { start + size,
						       end - start - size };

				vec_insert(fl, i + 1, tail);
			}
		} else if (start + size < end) {
			fl->v[i].off = start + size;
			fl->v[i].len = end - start - size;
		} else {
			vec_remove(fl, i);
		}
		vec_insert(&h->used, vec_lower_bound(&h->used, start), u);
		*offset = start;
		return 0;
	}
	return LM_ENOMEM;
}

static int free_mem(lm_home *h, uint64_t offset)
{
	struct extent_vec *fl = &h->free_list;
	size_t at = vec_lower_bound(&h->used, offset);
	struct extent e;
	size_t i;

	if (at == h->used.n || h->used.v[at].off != offset)
		return LM_EINVAL;
	if (vec_reserve(fl, fl->n + 1) < 0)
		return LM_ENOMEM;
	e = h->used.v[at];
	vec_remove(&h->used, at);
	i = vec_lower_bound(fl, e.off);
	/* Coalesce with the neighbours so first fit sees whole holes. */
	if (i > 0 && fl->v[i - 1].off + fl->v[i - 1].len == e.off) {
		fl->v[i - 1].len += e.len;
		if (i < fl->n && e.off + e.len == fl->v[i].off) {
			fl->v[i - 1].len += fl->v[i].len;
			vec_remove(fl, i);
		}
	} else if (i < fl->n && e.off + e.len == fl->v[i].off) {
		fl->v[i].off = e.off;
		fl->v[i].len += e.len;
	} else {
		vec_insert(fl, i, e);
	}
	return 0;
}

static void handle_alloc(lm_home *h, uint16_t from, uint32_t req_id,
			 const struct lm_msg *m)
{
	struct lm_msg r = msg_new(h, LM_MSG_ALLOC_OK);
	uint64_t off = 0;

	if (m->id != 0 && m->align != 0)
		r.status = LM_EINVAL; /* ids have no alignment */
	else if (m->id != 0)
		r.status = alloc_ids(h, m->id, m->size, &off);
	else
		r.status = alloc_mem(h, m->size, m->align, &off);
	if (r.status == 0) {
		r.offset = off;
		h->stats.allocs++;
	}
	h->out.reply(h->ctx, from, req_id, &r);
}

static void handle_free(lm_home *h, uint16_t from, uint32_t req_id,
			const struct lm_msg *m)
{
	struct lm_msg r = msg_new(h, LM_MSG_FREE_OK);

	r.status = free_mem(h, m->offset);
	h->out.reply(h->ctx, from, req_id, &r);
}

/* ---- create / end / abort routing ------------------------------------- */

static void handle_create(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	const struct lm_cluster_cfg *c = served_rank(h, m->rank);

	if (!c || m->rank == 0) {
		drop_bad(h, from, m, "target rank not a worker served here");
		return;
	}
	h->out.send(h->ctx, c->id, m);
}

/* END goes to rank 0's cluster with the notices of the moment, so rank 0
 * sees what the worker flushed before it ended (I2, I3). */
static void handle_end(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	const struct lm_cluster_cfg *c = served_rank(h, 0);
	struct lm_msg r = *m;

	if (!c) {
		drop_bad(h, from, m, "rank 0 is not served here");
		return;
	}
	r.notices = h->notices;
	r.nnotices = h->nnotices;
	h->out.send(h->ctx, c->id, &r);
}

static void handle_abort(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	const struct lm_layout *l = h->layout;

	lm_log_warn("home: ABORT from node %u (rank %u): %.*s", from,
		    m->rank, (int)(m->data_len > 200 ? 200 : m->data_len),
		    m->data ? (const char *)m->data : "");
	for (size_t i = 0; i < l->nclusters; i++)
		if ((size_t)l->clusters[i].reflector_index == h->self_index &&
		    l->clusters[i].id != from)
			h->out.send(h->ctx, l->clusters[i].id, m);
}

/* ---- dispatch --------------------------------------------------------- */

/* Whether `type` is a request at R (answered by a reply) or one-way;
 * -1 for types R does not take. */
static int expected_kind(uint16_t type)
{
	switch (type) {
	case LM_MSG_JOIN:
	case LM_MSG_FETCH:
	case LM_MSG_LOCK:
	case LM_MSG_ALLOC:
	case LM_MSG_FREE:
		return LM_REL_REQUEST;
	case LM_MSG_FLUSH:
	case LM_MSG_BARRIER:
	case LM_MSG_UNLOCK:
	case LM_MSG_CREATE:
	case LM_MSG_END:
	case LM_MSG_ABORT:
		return LM_REL_ONEWAY;
	default:
		return -1;
	}
}

void lm_home_handle(lm_home *h, uint16_t from, enum lm_rel_msg_kind kind,
		    uint32_t req_id, const struct lm_msg *m)
{
	long ci;
	int want;

	if (!h || !m)
		return;
	ci = served_cluster(h, from);
	if (ci < 0) {
		drop_bad(h, from, m, "not a cluster of this reflector");
		return;
	}
	if (m->run < h->run) {
		h->stats.dropped_stale_run++;
		return;
	}
	if (m->run > h->run) {
		if (h->run != 0)
			lm_log_info("home: run %016llx replaces %016llx",
				    (unsigned long long)m->run,
				    (unsigned long long)h->run);
		run_reset(h);
		h->run = m->run;
	}
	want = expected_kind(m->type);
	if (want < 0) {
		drop_bad(h, from, m, "not a message for a reflector");
		return;
	}
	if ((int)kind != want) {
		drop_bad(h, from, m, kind == LM_REL_REQUEST ?
			 "request where one-way expected" :
			 "one-way message where a request expected");
		return;
	}
	/* Ranks in LOCK, UNLOCK and FLUSH must be clients of the sender: a
	 * FLUSH's rank is the writer its notices will name. */
	if ((m->type == LM_MSG_LOCK || m->type == LM_MSG_UNLOCK ||
	     m->type == LM_MSG_FLUSH) &&
	    served_rank(h, m->rank) != &h->layout->clusters[ci]) {
		drop_bad(h, from, m, "rank is not in the sending cluster");
		return;
	}

	switch (m->type) {
	case LM_MSG_JOIN: {
		struct lm_msg r = msg_new(h, LM_MSG_JOIN_OK);

		h->out.reply(h->ctx, from, req_id, &r);
		break;
	}
	case LM_MSG_FETCH:
		handle_fetch(h, from, req_id, m);
		break;
	case LM_MSG_FLUSH:
		handle_flush(h, from, ci, m);
		break;
	case LM_MSG_BARRIER:
		handle_barrier(h, from, ci, m);
		break;
	case LM_MSG_LOCK:
		handle_lock(h, from, req_id, m);
		break;
	case LM_MSG_UNLOCK:
		handle_unlock(h, from, m);
		break;
	case LM_MSG_ALLOC:
		handle_alloc(h, from, req_id, m);
		break;
	case LM_MSG_FREE:
		handle_free(h, from, req_id, m);
		break;
	case LM_MSG_CREATE:
		handle_create(h, from, m);
		break;
	case LM_MSG_END:
		handle_end(h, from, m);
		break;
	case LM_MSG_ABORT:
		handle_abort(h, from, m);
		break;
	}
}
