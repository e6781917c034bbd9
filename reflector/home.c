/* Reflector protocol layer: role R of docs/dsm.md, for a root cluster of
 * one or more reflectors ("Several reflectors").  A state machine fed
 * decoded messages; it never touches a socket.
 *
 * Choices where docs/dsm.md leaves room (the lead may fold them into it):
 *  - Run ids compare as unsigned numbers: larger is newer.  The first
 *    message of a larger run, from a cluster or a reflector, resets every
 *    piece of run state but not the counters of lm_home_stats.
 *  - Messages are taken from the clusters whose reflector is this one and
 *    from the other reflectors of the layout; anything else is dropped
 *    and counted.  Kinds are checked (requests vs one-way messages), and
 *    replies must answer a request of ours, with the matching type.
 *  - A FETCH of a page outside the region is answered with a PAGE of
 *    data_len 0 (PAGE has no status; the lemuriad treats it as an error)
 *    and counted in dropped_bad, so the requester does not hang.
 *  - A FLUSH list is all or nothing at the router (checked whole before
 *    any part goes to a home) and at each home.  A page's version goes up
 *    once per applied list that contains it.  A FLUSH must name its
 *    writer: a rank of the sending cluster (or, between reflectors, of a
 *    cluster of the sending reflector), else it is dropped as bad input.
 *  - ALLOC: with align == 0 and id != 0 it reserves `size` ids of kind id
 *    (see home.h; id != 0 with an align is LM_EINVAL, a kind out of range
 *    LM_EINVAL, ids exhausted LM_ENOMEM).  With id == 0 it allocates
 *    memory: sizes rounded up to LM_HOME_ALIGN, alignment the larger of
 *    the explicit one (a power of two) and the default (LM_HOME_ALIGN, or
 *    page_size when size >= page_size).  Size 0 or a bad align: LM_EINVAL.
 *  - LOCK from a rank already waiting for that lock, UNLOCK from a rank
 *    that does not hold it, a second arrival at a barrier before it
 *    completed, a rank outside the sender's clusters: logged, dropped,
 *    counted in dropped_bad.
 *  - JOIN (request, if a lemuriad sends one) is answered JOIN_OK{0}.
 *    ABORT from a cluster goes to every other cluster served and to the
 *    other reflectors, which pass it to their clusters. */
#include "home.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "log.h"
#include "lm_error.h"

/* Active lock entries (held, waited for, or carrying notices); beyond
 * this, LOCK is dropped. */
#define LM_HOME_LOCKS_MAX 65536u

/* Requests of ours to other reflectors that may be outstanding at once;
 * beyond this a cluster's request is dropped (I5). */
#define LM_HOME_FORWARDS_MAX 65536u

/* Messages held for flush acks at once (I5). */
#define LM_HOME_HELD_MAX 65536u

/* A notice with the epoch of the release that sent it. */
struct tagged_notice {
	struct lm_notice n;
	uint32_t epoch;
};

struct home_waiter {
	struct home_waiter *next;
	uint16_t node;   /* who asked: a cluster of ours or a reflector */
	uint32_t req_id; /* its LOCK request, answered by GRANT */
	uint32_t rank;
	uint32_t epoch;  /* the requester's epoch */
};

/* A lock at its manager.  `notes` are the write notices its releases
 * carried since the last barrier: what the next holder must see. */
struct home_lock {
	uint32_t id;
	uint32_t holder;             /* rank; meaningful when held */
	bool held;
	bool recalled;               /* RECALL sent to the holder's cluster */
	struct home_waiter *head, *tail; /* FIFO of waiters */
	struct tagged_notice *notes;
	size_t nnotes;
};

/* A barrier at a router: which of our clusters arrived. */
struct router_barrier {
	bool pending;
	uint32_t id;
	uint32_t arrived;
	uint8_t *seen;    /* per layout cluster index, owned */
};

/* A barrier at its manager: which reflectors arrived and the notices
 * they brought. */
struct mgr_barrier {
	bool pending;
	uint32_t id;
	uint32_t arrived;
	uint8_t *seen;    /* per reflector index, owned */
	struct lm_notice *notices;
	size_t nnotices, cap;
};

/* The epoch's entry of a page at its home: who changed it since the
 * epoch began, from which version. */
struct page_epoch {
	uint32_t epoch1;  /* epoch + 1 of the entry; 0: none yet */
	uint32_t base;
	uint32_t writer;
	uint32_t wcluster;
};

/* A set of notices, one per page, latest version kept. */
struct notice_set {
	struct lm_notice *v; /* npages entries */
	uint32_t n;
	uint32_t *at;        /* per page: index + 1 in v, 0 when absent */
};

/* A request of ours to another reflector or to a cluster of ours,
 * matched by req_id. */
struct forward {
	uint32_t req_id;
	uint16_t type;     /* the request's type */
	uint16_t to;       /* node it went to */
	uint16_t node;     /* who we answer (0: our own home, for PULL) */
	uint32_t node_req; /* ... and its request id */
	uint64_t seq;      /* FLUSH, REGISTER: place among our flushes */
	uint32_t agg;      /* REGISTER: the cluster's request it is part of */
};

/* A cluster's REGISTER, split over homes: answered when every part is. */
struct reg_agg {
	uint32_t id;
	uint16_t node;
	uint32_t req_id;
	uint32_t parts;    /* parts not acked yet */
	int32_t status;
	struct lm_notice *notices;
	size_t n, cap;
};

/* A delta registered at its home and not applied yet (lazy relay): it
 * stays at its cluster until pulled or pushed. */
struct pending {
	struct pending *next;
	uint32_t version;  /* the page's version once it is applied */
	uint32_t cluster;  /* layout index of the cluster holding it */
	bool pulling;      /* PULL sent */
	bool has_data;
	uint8_t *data;     /* the delta as a diff, owned */
	size_t len;
};

/* A page of another reflector's home, cached by its router. */
struct rpage {
	uint32_t page;
	uint32_t version;
	struct rpage *hnext;
	struct rpage *prev, *next; /* LRU, head = most recent */
	uint8_t data[];
};

/* A cluster's FETCH waiting at the router for another home's PAGE. */
struct rwaiter {
	struct rwaiter *next;
	uint16_t node;
	uint32_t req_id;
	uint32_t need;   /* oldest version that may answer it */
};

/* One FETCH of ours per page in flight; the clusters' FETCHes of the page
 * wait on it (coalesced). */
struct rfetch {
	uint32_t id;
	uint32_t page;
	struct rwaiter *waiters;
};

/* A FETCH waiting for a page's pending deltas. */
struct fetch_wait {
	struct fetch_wait *next;
	uint16_t node;
	uint32_t req_id;
};

/* A cluster's message held until the homes applied every change our
 * clusters sent before it (I2). */
struct held_msg {
	uint16_t type;     /* BARRIER, UNLOCK, END or CREATE */
	uint32_t id, rank;
	int32_t status;
	uint64_t offset;
	uint8_t *data;     /* CREATE's image, owned */
	size_t data_len;
	uint64_t mark;     /* flushes up to this seq must be acked first */
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
	uint32_t self_index;   /* into layout->reflectors */
	uint32_t nrefl;
	uint32_t nserved;      /* clusters whose reflector is self */
	uint32_t nactive;      /* reflectors that serve clusters */
	uint32_t page_size;
	uint32_t npages;
	uint64_t run;

	/* ---- home: master copies of our pages; NULL until first written */
	uint8_t **pages;
	uint32_t *versions;
	struct page_epoch *pe;
	uint8_t *zero; /* page_size zero bytes, answers FETCH of NULL pages */
	/* flush_mark[p] == flush_seq when p's version went up in the list
	 * being applied. */
	uint32_t *flush_mark;
	uint32_t flush_seq;
	/* per page: deltas registered and not applied, in version order,
	 * and the FETCHes that wait for them (lazy relay) */
	struct pending **pend;
	struct fetch_wait **fwait;

	/* ---- router */
	uint32_t epoch;            /* barriers released to our clusters */
	struct notice_set epoch_set; /* our clusters' changes this epoch */
	struct router_barrier barriers[LM_HOME_BARRIERS_MAX];
	struct forward *fwd;
	size_t nfwd, fwd_cap;
	uint32_t next_req;
	uint64_t flush_sent;       /* seq of the last FLUSH forwarded */
	struct held_msg *held;
	size_t nheld, held_cap;
	uint8_t *split;            /* builds per-home parts of a list */
	size_t split_cap;
	struct lm_notice *split_notices; /* npages entries: the same for
					    REGISTER entries */
	struct reg_agg *aggs;
	size_t naggs, aggs_cap;
	uint32_t next_agg;
	/* pages relayed from other homes: cache (LRU, bounded by our
	 * `cache`) and FETCHes in flight */
	struct rpage **rbuckets;
	uint32_t rbits;
	struct rpage *rhead, *rtail;
	size_t ncached, cache_max;
	struct rfetch *rfetches;
	size_t nrfetches, rfetches_cap;
	uint32_t next_rfetch;

	/* ---- managers */
	struct mgr_barrier mbarriers[LM_HOME_BARRIERS_MAX];
	struct home_lock *locks; /* unordered, active entries only */
	size_t nlocks, locks_cap;
	struct lm_notice *scratch; /* npages entries: notices being sent */

	/* ---- allocator (the first reflector) */
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

/* ---- placement -------------------------------------------------------- */

uint32_t lm_home_of_page(const struct lm_layout *l, uint32_t page)
{
	return (uint32_t)((page / LM_HOME_PAGE_BLOCK) % l->nreflectors);
}

uint32_t lm_home_manager_of(const struct lm_layout *l, uint32_t id)
{
	return (uint32_t)(id % l->nreflectors);
}

static uint16_t refl_node(const lm_home *h, uint32_t index)
{
	return h->layout->reflectors[index].id;
}

/* Index of the reflector with node id `node`, other than us, or -1. */
static long peer_reflector(const lm_home *h, uint16_t node)
{
	for (uint32_t i = 0; i < h->nrefl; i++)
		if (h->layout->reflectors[i].id == node)
			return i == h->self_index ? -1 : (long)i;
	return -1;
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
	    (uint32_t)l->clusters[i].reflector_index != h->self_index)
		return -1;
	return (long)i;
}

/* The cluster holding `rank` if reflector `index` serves it, else NULL. */
static const struct lm_cluster_cfg *rank_under(const lm_home *h,
					       uint32_t rank, uint32_t index)
{
	const struct lm_cluster_cfg *c;

	c = lm_layout_cluster_of_rank(h->layout, rank);
	if (!c || (uint32_t)c->reflector_index != index)
		return NULL;
	return c;
}

static bool serves_clusters(const lm_home *h, uint32_t index)
{
	for (size_t i = 0; i < h->layout->nclusters; i++)
		if ((uint32_t)h->layout->clusters[i].reflector_index == index)
			return true;
	return false;
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

/* Notices from another reflector must name pages of the region. */
static bool notices_valid(const lm_home *h, const struct lm_msg *m)
{
	for (uint32_t i = 0; i < m->nnotices; i++)
		if (m->notices[i].page >= h->npages)
			return false;
	return true;
}

/* ---- notice sets ------------------------------------------------------ */

static void set_put(struct notice_set *s, const struct lm_notice *n)
{
	uint32_t at = s->at[n->page];

	if (!at) {
		s->v[s->n] = *n;
		s->at[n->page] = ++s->n;
	} else if (n->version > s->v[at - 1].version) {
		s->v[at - 1] = *n;
	}
}

static void set_clear(struct notice_set *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		s->at[s->v[i].page] = 0;
	s->n = 0;
}

/* ---- run state -------------------------------------------------------- */

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

static void locks_clear(lm_home *h)
{
	for (size_t i = 0; i < h->nlocks; i++)
		lock_free_entry(&h->locks[i]);
	h->nlocks = 0;
}

static void barriers_clear(lm_home *h)
{
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		h->barriers[i].pending = false;
		h->barriers[i].arrived = 0;
		memset(h->barriers[i].seen, 0, h->layout->nclusters);
		h->mbarriers[i].pending = false;
		h->mbarriers[i].arrived = 0;
		h->mbarriers[i].nnotices = 0;
		memset(h->mbarriers[i].seen, 0, h->nrefl);
	}
}

static void pending_clear(lm_home *h)
{
	for (uint32_t p = 0; p < h->npages; p++) {
		while (h->pend[p]) {
			struct pending *pd = h->pend[p];

			h->pend[p] = pd->next;
			free(pd->data);
			free(pd);
		}
		while (h->fwait[p]) {
			struct fetch_wait *w = h->fwait[p];

			h->fwait[p] = w->next;
			free(w);
		}
	}
	for (size_t i = 0; i < h->naggs; i++)
		free(h->aggs[i].notices);
	h->naggs = 0;
}

static void held_clear(lm_home *h)
{
	for (size_t i = 0; i < h->nheld; i++)
		free(h->held[i].data);
	h->nheld = 0;
}

static void rcache_clear(lm_home *h);
static void rfetches_clear(lm_home *h);

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
	memset(h->pe, 0, (size_t)h->npages * sizeof(*h->pe));
	h->epoch = 0;
	set_clear(&h->epoch_set);
	barriers_clear(h);
	locks_clear(h);
	held_clear(h);
	pending_clear(h);
	rcache_clear(h);
	rfetches_clear(h);
	h->nfwd = 0;
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

	if (!layout || !out || !out->send || !out->reply || !out->request ||
	    layout->page_size == 0 || layout->nreflectors == 0)
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
	h->nrefl = (uint32_t)layout->nreflectors;
	for (i = 0; i < layout->nreflectors; i++)
		if (layout->reflectors[i].id == self_id)
			break;
	if (i == layout->nreflectors)
		goto err;
	h->self_index = (uint32_t)i;
	for (i = 0; i < layout->nclusters; i++)
		if ((uint32_t)layout->clusters[i].reflector_index ==
		    h->self_index)
			h->nserved++;
	for (i = 0; i < h->nrefl; i++)
		h->nactive += serves_clusters(h, (uint32_t)i);

	h->pages = calloc(npages, sizeof(*h->pages));
	h->versions = calloc(npages, sizeof(*h->versions));
	h->pe = calloc(npages, sizeof(*h->pe));
	h->zero = calloc(1, layout->page_size);
	h->flush_mark = calloc(npages, sizeof(*h->flush_mark));
	h->epoch_set.v = calloc(npages, sizeof(*h->epoch_set.v));
	h->epoch_set.at = calloc(npages, sizeof(*h->epoch_set.at));
	h->scratch = calloc(npages, sizeof(*h->scratch));
	h->split_notices = calloc(npages, sizeof(*h->split_notices));
	h->pend = calloc(npages, sizeof(*h->pend));
	h->cache_max = layout->reflectors[h->self_index].cache_size /
		       layout->page_size;
	if (h->cache_max == 0)
		h->cache_max = 1;
	h->rbits = 4;
	while (((size_t)1 << h->rbits) < h->cache_max && h->rbits < 20)
		h->rbits++;
	h->rbuckets = calloc((size_t)1 << h->rbits, sizeof(*h->rbuckets));
	h->fwait = calloc(npages, sizeof(*h->fwait));
	if (!h->pages || !h->versions || !h->pe || !h->zero ||
	    !h->flush_mark || !h->epoch_set.v || !h->epoch_set.at ||
	    !h->scratch || !h->split_notices || !h->pend || !h->fwait ||
	    !h->rbuckets)
		goto err;
	for (i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		/* +1: calloc(0) may be NULL */
		h->barriers[i].seen = calloc(layout->nclusters + 1, 1);
		h->mbarriers[i].seen = calloc(h->nrefl + 1, 1);
		if (!h->barriers[i].seen || !h->mbarriers[i].seen)
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
	free(h->pe);
	free(h->zero);
	free(h->flush_mark);
	free(h->epoch_set.v);
	free(h->epoch_set.at);
	free(h->scratch);
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		free(h->barriers[i].seen);
		free(h->mbarriers[i].seen);
		free(h->mbarriers[i].notices);
	}
	locks_clear(h);
	free(h->locks);
	held_clear(h);
	free(h->held);
	if (h->pend && h->fwait)
		pending_clear(h);
	free(h->pend);
	free(h->fwait);
	if (h->rbuckets) {
		rcache_clear(h);
		rfetches_clear(h);
	}
	free(h->rbuckets);
	free(h->rfetches);
	free(h->aggs);
	free(h->split_notices);
	free(h->fwd);
	free(h->split);
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

/* ---- home: pages ------------------------------------------------------ */

static void serve_page(lm_home *h, uint16_t node, uint32_t req_id,
		       uint32_t page)
{
	struct lm_msg r = msg_new(h, LM_MSG_PAGE);

	r.page = page;
	r.version = h->versions[page];
	r.data = h->pages[page] ? h->pages[page] : h->zero;
	r.data_len = h->page_size;
	h->stats.fetches++;
	h->out.reply(h->ctx, node, req_id, &r);
}

/* An empty PAGE: the requester fails instead of waiting forever. */
static void refuse_fetch(lm_home *h, uint16_t from, uint32_t req_id,
			 const struct lm_msg *m, const char *why)
{
	struct lm_msg r = msg_new(h, LM_MSG_PAGE);

	r.page = m->page;
	drop_bad(h, from, m, why);
	h->out.reply(h->ctx, from, req_id, &r);
}

/* Checks a whole diff list (and, for a home, that every page is ours);
 * returns the number of entries or a negative count - 1 of entries seen
 * before the first bad one. */
static long flush_check(const lm_home *h, const struct lm_msg_diffs *d,
			bool as_home)
{
	size_t pos = 0;
	long n = 0;
	uint32_t page;
	const uint8_t *diff;
	size_t len;
	int r;

	while ((r = lm_msg_diffs_next(d, &pos, &page, &diff, &len)) == 1) {
		if (page >= h->npages ||
		    (as_home &&
		     lm_home_of_page(h->layout, page) != h->self_index) ||
		    lm_diff_validate(diff, len, h->page_size) < 0)
			return -(n + 1);
		n++;
	}
	if (r < 0)
		return -(n + 1);
	return n;
}

/* Appends a pending delta of `page` at the next version; with data when
 * diff is not NULL.  0 or LM_ENOMEM. */
static int queue_delta(lm_home *h, uint32_t page, uint32_t cluster,
		       const uint8_t *diff, size_t len)
{
	struct pending *pd = calloc(1, sizeof(*pd)), **pp;

	if (!pd || (diff && len && !(pd->data = malloc(len)))) {
		free(pd);
		return LM_ENOMEM;
	}
	if (diff) {
		pd->has_data = true;
		pd->len = len;
		if (len)
			memcpy(pd->data, diff, len);
	}
	pd->cluster = cluster;
	pd->version = ++h->versions[page];
	for (pp = &h->pend[page]; *pp; pp = &(*pp)->next)
		;
	*pp = pd;
	return 0;
}

/* Applies a list of rank `writer`, sent in `epoch`, to our master copies,
 * all or nothing.  A page's version goes up once per list; its epoch entry
 * records the epoch's base and writers, so that the notice is exact: a
 * copy at `base` plus exactly the epoch's diffs is the page at `version`,
 * which lets a sole writer keep its copy (docs/dsm.md "Sole writers").
 * The notices of the pages go to h->scratch; returns their count, or a
 * negative LM_E* with nothing applied. */
static long home_apply(lm_home *h, uint16_t from, uint32_t epoch,
		       uint32_t writer, const struct lm_msg_diffs *d)
{
	const struct lm_cluster_cfg *wc;
	uint32_t wcluster, page;
	size_t pos = 0, len;
	const uint8_t *diff;
	long n, count = 0;

	n = flush_check(h, d, true);
	if (n < 0) {
		h->stats.diffs_rejected += (uint64_t)-n;
		lm_log_warn("home: FLUSH from node %u rejected: malformed "
			    "diff list or page", from);
		return LM_EBADMSG;
	}
	wc = lm_layout_cluster_of_rank(h->layout, writer);
	wcluster = wc ? (uint32_t)(wc - h->layout->clusters) : LM_WRITER_MANY;
	/* Materialise every zero page first: running out of memory then
	 * still leaves the list unapplied rather than half-applied. */
	while (lm_msg_diffs_next(d, &pos, &page, &diff, &len) == 1) {
		if (h->pages[page])
			continue;
		h->pages[page] = calloc(1, h->page_size);
		if (!h->pages[page]) {
			h->stats.diffs_rejected += (uint64_t)n;
			lm_log_error("home: FLUSH from node %u rejected: out "
				     "of memory", from);
			return LM_ENOMEM;
		}
	}
	if (++h->flush_seq == 0) {
		memset(h->flush_mark, 0,
		       (size_t)h->npages * sizeof(*h->flush_mark));
		h->flush_seq = 1;
	}
	pos = 0;
	while (lm_msg_diffs_next(d, &pos, &page, &diff, &len) == 1) {
		struct page_epoch *pe = &h->pe[page];
		struct lm_notice *no;

		if (h->pend[page]) {
			/* registered deltas come first (I1): this one waits
			 * behind them with its own version */
			if (queue_delta(h, page, wc ? (uint32_t)(wc -
				h->layout->clusters) : 0, diff, len) < 0)
				lm_log_error("home: no memory to queue a diff "
					     "of page %u: lost", page);
			h->flush_mark[page] = h->flush_seq;
		} else {
			lm_diff_apply(h->pages[page], h->page_size, diff,
				      len);
			h->stats.diffs_applied++;
			if (h->flush_mark[page] == h->flush_seq)
				continue;
			h->flush_mark[page] = h->flush_seq;
			h->versions[page]++;
		}
		if (pe->epoch1 != epoch + 1) {
			pe->epoch1 = epoch + 1;
			pe->base = h->versions[page] - 1;
			pe->writer = writer;
			pe->wcluster = wcluster;
		}
		if (pe->writer != writer)
			pe->writer = LM_WRITER_MANY;
		if (pe->wcluster != wcluster)
			pe->wcluster = LM_WRITER_MANY;
		no = &h->scratch[count++];
		no->page = page;
		no->version = h->versions[page];
		no->base = pe->base;
		no->writer = pe->writer;
		no->wcluster = pe->wcluster;
	}
	h->stats.flushes++;
	return count;
}

/* ---- home: registered deltas (lazy relay) ----------------------------- */

static struct forward *fwd_add(lm_home *h, uint16_t type, uint16_t to,
			       uint16_t node, uint32_t node_req);

/* Asks the cluster holding `pd` for its data, through its reflector. */
static void send_pull(lm_home *h, uint32_t page, struct pending *pd)
{
	const struct lm_cluster_cfg *c = &h->layout->clusters[pd->cluster];
	uint32_t ri = (uint32_t)c->reflector_index;
	struct lm_msg r = msg_new(h, LM_MSG_PULL);
	struct forward *f;

	f = fwd_add(h, LM_MSG_PULL, ri == h->self_index ? c->id :
		    refl_node(h, ri), 0, 0);
	if (!f) {
		lm_log_error("home: too many requests in flight; PULL of "
			     "page %u waits", page);
		return;
	}
	r.id = pd->cluster;
	r.page = page;
	r.version = pd->version;
	pd->pulling = true;
	h->stats.pulls_sent++;
	h->out.request(h->ctx, f->to, f->req_id, &r);
}

/* Applies the page's pending deltas that have their data, in version
 * order (I1); with none left, answers the FETCHes that waited; else pulls
 * what is missing for them. */
static void settle(lm_home *h, uint32_t page)
{
	struct pending *pd;

	while ((pd = h->pend[page]) && pd->has_data) {
		if (!h->pages[page] &&
		    !(h->pages[page] = calloc(1, h->page_size))) {
			lm_log_error("home: no memory for page %u", page);
			return;
		}
		if (pd->len)
			lm_diff_apply(h->pages[page], h->page_size, pd->data,
				      pd->len);
		h->stats.diffs_applied++;
		h->pend[page] = pd->next;
		free(pd->data);
		free(pd);
	}
	if (!h->pend[page]) {
		while (h->fwait[page]) {
			struct fetch_wait *w = h->fwait[page];

			h->fwait[page] = w->next;
			serve_page(h, w->node, w->req_id, page);
			free(w);
		}
		return;
	}
	if (!h->fwait[page])
		return;
	for (pd = h->pend[page]; pd; pd = pd->next)
		if (!pd->has_data && !pd->pulling)
			send_pull(h, page, pd);
}

/* A FETCH at the page's home: served once its deltas are in. */
static void home_fetch(lm_home *h, uint16_t node, uint32_t req_id,
		       uint32_t page)
{
	struct fetch_wait *w;

	if (!h->pend[page]) {
		serve_page(h, node, req_id, page);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		lm_log_error("home: no memory to wait for page %u", page);
		return;
	}
	w->node = node;
	w->req_id = req_id;
	w->next = h->fwait[page];
	h->fwait[page] = w;
	h->stats.fetches_waited++;
	settle(h, page);
}

/* The data of a pulled delta (or the cluster's word that it has none). */
static void home_pulled(lm_home *h, const struct lm_msg *m)
{
	struct pending *pd;
	const uint8_t *diff = NULL;
	uint32_t page;
	size_t pos = 0, len = 0;

	if (m->page >= h->npages)
		return;
	for (pd = h->pend[m->page]; pd; pd = pd->next)
		if (pd->version == m->version)
			break;
	if (!pd || pd->has_data)
		return; /* pushed meanwhile */
	if (m->status != 0 || m->diffs.count != 1 ||
	    lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) != 1 ||
	    page != m->page ||
	    lm_diff_validate(diff, len, h->page_size) < 0) {
		/* nothing better to do than go on without it, loudly */
		lm_log_error("home: delta of page %u version %u lost at "
			     "cluster %u (%s)", m->page, m->version,
			     pd->cluster, m->status ? lm_strerror(m->status) :
			     "bad data");
		len = 0;
	} else if (len && !(pd->data = malloc(len))) {
		lm_log_error("home: no memory for a delta of page %u",
			     m->page);
		pd->pulling = false;
		return;
	}
	if (len)
		memcpy(pd->data, diff, len);
	pd->len = len;
	pd->has_data = true;
	settle(h, m->page);
}

/* Walks a REGISTER's entries with their data: checks everything
 * (as_home: that every page is ours; ci: the registering cluster) and
 * returns 0 or LM_EBADMSG. */
static int register_check(const lm_home *h, const struct lm_msg *m,
			  uint32_t ci, bool as_home)
{
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t page;

	for (uint32_t i = 0; i < m->nnotices; i++) {
		const struct lm_notice *e = &m->notices[i];
		const struct lm_cluster_cfg *wc;

		if (e->page >= h->npages || e->base >= LM_REG_KINDS ||
		    e->wcluster != ci ||
		    (as_home &&
		     lm_home_of_page(h->layout, e->page) != h->self_index))
			return LM_EBADMSG;
		if (e->writer != LM_WRITER_MANY) {
			wc = lm_layout_cluster_of_rank(h->layout, e->writer);
			if (!wc || wc != &h->layout->clusters[ci])
				return LM_EBADMSG;
		}
		if (e->base == LM_REG_NEW)
			continue;
		if (lm_msg_diffs_next(&m->diffs, &pos, &page, &diff,
				      &len) != 1 || page != e->page ||
		    lm_diff_validate(diff, len, h->page_size) < 0)
			return LM_EBADMSG;
	}
	return lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) == 0 ?
	       0 : LM_EBADMSG;
}

/* Registers a cluster's deltas at their home (docs/dsm.md "Lazy
 * relay"): each NEW or DATA entry takes the page to a new version, held
 * by the cluster (NEW) or here (DATA); a NEW entry whose cluster still
 * holds the page's latest delta, unpulled, is merged into it; PUSH
 * brings the data of one registered before.  The notices go to
 * h->scratch; returns their count or LM_EBADMSG. */
static long home_register(lm_home *h, uint16_t from, uint32_t ci,
			  uint32_t epoch, const struct lm_msg *m)
{
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t page;
	long count = 0;

	if (register_check(h, m, ci, true) < 0) {
		lm_log_warn("home: REGISTER from node %u rejected: malformed "
			    "entries or data", from);
		h->stats.dropped_bad++;
		return LM_EBADMSG;
	}
	for (uint32_t i = 0; i < m->nnotices; i++) {
		const struct lm_notice *e = &m->notices[i];
		struct pending *pd, *last = NULL;
		struct page_epoch *pe = &h->pe[e->page];
		struct lm_notice *no;

		diff = NULL;
		len = 0;
		if (e->base != LM_REG_NEW)
			(void)lm_msg_diffs_next(&m->diffs, &pos, &page, &diff,
						&len);
		for (pd = h->pend[e->page]; pd; pd = pd->next)
			last = pd;
		if (e->base == LM_REG_PUSH) {
			for (pd = h->pend[e->page]; pd; pd = pd->next)
				if (pd->version == e->version &&
				    pd->cluster == ci && !pd->has_data)
					break;
			if (pd && (!len || (pd->data = malloc(len)))) {
				if (len)
					memcpy(pd->data, diff, len);
				pd->len = len;
				pd->has_data = true;
				h->stats.pushes_received++;
			}
			continue;
		}
		if (e->base == LM_REG_NEW && e->version && last &&
		    last->cluster == ci && last->version == e->version &&
		    !last->has_data && !last->pulling &&
		    h->versions[e->page] == e->version) {
			/* the cluster folds the new delta into the one it
			 * holds: nobody wrote the page in between (I1) */
			last->version = ++h->versions[e->page];
			h->stats.regs_merged++;
		} else if (queue_delta(h, e->page, ci, diff, len) < 0) {
			lm_log_error("home: no memory to register page %u",
				     e->page);
			continue;
		}
		h->stats.regs_entered++;
		if (pe->epoch1 != epoch + 1) {
			pe->epoch1 = epoch + 1;
			pe->base = h->versions[e->page] - 1;
			pe->writer = e->writer;
			pe->wcluster = ci;
		}
		if (pe->writer != e->writer)
			pe->writer = LM_WRITER_MANY;
		if (pe->wcluster != ci)
			pe->wcluster = LM_WRITER_MANY;
		no = &h->scratch[count++];
		no->page = e->page;
		no->version = h->versions[e->page];
		no->base = pe->base;
		no->writer = pe->writer;
		no->wcluster = pe->wcluster;
	}
	for (uint32_t i = 0; i < m->nnotices; i++)
		settle(h, m->notices[i].page);
	return count;
}

/* ---- router: requests to other reflectors ----------------------------- */

static struct forward *fwd_add(lm_home *h, uint16_t type, uint16_t to,
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
static void forward(lm_home *h, uint32_t to, const struct lm_msg *m,
		    uint16_t node, uint32_t node_req)
{
	struct forward *f = fwd_add(h, m->type, refl_node(h, to), node,
				    node_req);

	if (!f) {
		lm_log_error("home: too many requests in flight; %s of "
			     "node %u dropped", lm_msg_name(m->type), node);
		h->stats.dropped_bad++;
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

/* ---- router: pages relayed from other homes --------------------------- */

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

static void rfetches_clear(lm_home *h)
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
	f = fwd_add(h, LM_MSG_FETCH,
		    refl_node(h, lm_home_of_page(h->layout, rf->page)), 0, 0);
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
static void route_fetch(lm_home *h, uint16_t from, uint32_t req_id,
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

/* ---- router: diffs ---------------------------------------------------- */

/* One home's part of a cluster's list: applied here or sent to the home,
 * whose ack brings the notices into our epoch set. */
static void flush_part(lm_home *h, uint32_t home, uint32_t writer,
		       const struct lm_msg_diffs *part)
{
	struct lm_msg r;
	struct forward *f;

	if (home == h->self_index) {
		long n = home_apply(h, h->self_id, h->epoch, writer, part);

		for (long i = 0; i < n; i++)
			set_put(&h->epoch_set, &h->scratch[i]);
		return;
	}
	r = msg_new(h, LM_MSG_FLUSH);
	r.rank = writer;
	r.epoch = h->epoch;
	r.diffs = *part;
	f = fwd_add(h, LM_MSG_FLUSH, refl_node(h, home), 0, 0);
	if (!f) {
		lm_log_error("home: too many requests in flight; diffs of "
			     "rank %u lost", writer);
		h->stats.diffs_rejected += part->count;
		return;
	}
	f->seq = ++h->flush_sent;
	h->stats.flushes_forwarded++;
	h->out.request(h->ctx, f->to, f->req_id, &r);
}

/* Splits a cluster's list by home: one part per home reflector. */
static void route_flush(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	uint32_t page, first = UINT32_MAX;
	const uint8_t *diff;
	size_t pos = 0, len;
	bool mixed = false;
	long n;

	n = flush_check(h, &m->diffs, false);
	if (n < 0) {
		h->stats.diffs_rejected += (uint64_t)-n;
		lm_log_warn("home: FLUSH from node %u rejected: malformed "
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

/* ---- router: registrations ------------------------------------------- */

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
		long n = home_register(h, h->self_id, ci, h->epoch, part);

		if (n < 0) {
			a->status = (int32_t)n;
			return;
		}
		for (long i = 0; i < n; i++)
			set_put(&h->epoch_set, &h->scratch[i]);
		if (agg_add_notices(a, h->scratch, (size_t)n) < 0)
			a->status = LM_ENOMEM;
		return;
	}
	f = fwd_add(h, LM_MSG_REGISTER, refl_node(h, home), 0, 0);
	if (!f) {
		lm_log_error("home: too many requests in flight; deltas of "
			     "cluster %u lost", ci);
		a->status = LM_ENOBUFS;
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
static void route_register(lm_home *h, uint16_t from, long ci,
			   uint32_t req_id, const struct lm_msg *m)
{
	struct reg_agg *a;

	if (register_check(h, m, (uint32_t)ci, false) < 0) {
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

/* ---- managers: barriers ----------------------------------------------- */

static void router_release(lm_home *h, uint32_t id,
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
	set_clear(&h->epoch_set);
	h->stats.releases++;
}

/* Reflector `ri` (maybe us) arrived at barrier `id` with the notices of
 * its clusters' changes in the epoch.  With every reflector that serves
 * clusters in, the merged notices go back down (DESIGN.md §2, step 4). */
static void mgr_arrive(lm_home *h, uint16_t from, uint32_t ri,
		       const struct lm_msg *m)
{
	struct mgr_barrier *b = NULL, *spare = NULL;
	struct lm_msg r;

	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		struct mgr_barrier *e = &h->mbarriers[i];

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
	if (b->seen[ri]) {
		drop_bad(h, from, m, "reflector arrived twice");
		return;
	}
	if (b->nnotices + m->nnotices > b->cap) {
		size_t cap = b->nnotices + m->nnotices;
		struct lm_notice *nv = realloc(b->notices,
					       cap * sizeof(*nv));

		if (!nv) {
			drop_bad(h, from, m, "out of memory");
			return;
		}
		b->notices = nv;
		b->cap = cap;
	}
	if (m->nnotices)
		memcpy(b->notices + b->nnotices, m->notices,
		       m->nnotices * sizeof(*m->notices));
	b->nnotices += m->nnotices;
	b->seen[ri] = 1;
	if (++b->arrived < h->nactive)
		return;

	b->nnotices = lm_notices_merge(b->notices, b->nnotices);
	r = msg_new(h, LM_MSG_RELEASE);
	r.id = b->id;
	r.notices = b->notices;
	r.nnotices = (uint32_t)b->nnotices;
	h->stats.barriers++;
	for (uint32_t k = 0; k < h->nrefl; k++) {
		if (!serves_clusters(h, k))
			continue;
		if (k == h->self_index)
			router_release(h, r.id, r.notices, r.nnotices);
		else
			h->out.send(h->ctx, refl_node(h, k), &r);
	}
	b->pending = false;
	b->arrived = 0;
	b->nnotices = 0;
	memset(b->seen, 0, h->nrefl);
}

/* ---- managers: locks -------------------------------------------------- */

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
 * keeps a token while its own clients want it (DESIGN.md §2, Locks). */
static void send_recall(lm_home *h, struct home_lock *lk)
{
	const struct lm_cluster_cfg *c = cluster_of(h, lk->holder);
	struct lm_msg r = msg_new(h, LM_MSG_RECALL);

	if (!c || lk->recalled)
		return;
	lk->recalled = true;
	r.id = lk->id;
	r.rank = lk->holder;
	h->stats.lock_recalls++;
	h->out.send(h->ctx, (uint32_t)c->reflector_index == h->self_index ?
		    c->id : refl_node(h, (uint32_t)c->reflector_index), &r);
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
	h->stats.lock_grants++;
	lk->recalled = false;
	h->out.reply(h->ctx, node, req_id, &r);
	if (foreign_waiter(h, lk))
		send_recall(h, lk);
}

static void mgr_lock(lm_home *h, uint16_t from, uint32_t req_id,
		     const struct lm_msg *m, uint32_t epoch)
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
		lock_grant(h, lk, from, req_id, m->rank, epoch);
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
	w->epoch = epoch;
	if (lk->tail)
		lk->tail->next = w;
	else
		lk->head = w;
	lk->tail = w;
	if (foreign_waiter(h, lk))
		send_recall(h, lk);
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

static void mgr_unlock(lm_home *h, uint16_t from, const struct lm_msg *m,
		       uint32_t epoch, const struct lm_notice *v, uint32_t n)
{
	struct home_lock *lk = lock_find(h, m->id);
	struct home_waiter *w;

	if (!lk || !lk->held || lk->holder != m->rank) {
		drop_bad(h, from, m, "rank does not hold the lock");
		return;
	}
	if (lock_note(lk, epoch, v, n) < 0)
		/* the next holder could miss changes: say so loudly */
		lm_log_error("home: out of memory keeping the notices of "
			     "lock %u", m->id);
	w = lk->head;
	if (!w) {
		lk->held = false;
		if (!lk->nnotes)
			lock_remove(h, lk);
		return;
	}
	lk->head = w->next;
	if (!lk->head)
		lk->tail = NULL;
	lock_grant(h, lk, w->node, w->req_id, w->rank, w->epoch);
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

/* ---- router: synchronisation held for acks (I2) ----------------------- */

/* Sends a held message on, with our clusters' notices of the epoch: a
 * superset of what the sender's changes were. */
static void held_send(lm_home *h, const struct held_msg *hm)
{
	const struct notice_set *s = &h->epoch_set;
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
			mgr_arrive(h, h->self_id, mgr, &r);
		else
			h->out.send(h->ctx, refl_node(h, mgr), &r);
		break;
	case LM_MSG_UNLOCK:
		r.notices = s->v;
		r.nnotices = s->n;
		mgr = lm_home_manager_of(h->layout, hm->id);
		if (mgr == h->self_index)
			mgr_unlock(h, h->self_id, &r, h->epoch, s->v, s->n);
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
		r.epoch = 0;
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
static void held_release(lm_home *h)
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
static void hold(lm_home *h, uint16_t from, const struct lm_msg *m)
{
	struct held_msg *hm;

	if (h->nheld == h->held_cap) {
		size_t cap = h->held_cap ? h->held_cap * 2 : 16;
		struct held_msg *nh;

		if (h->nheld >= LM_HOME_HELD_MAX ||
		    !(nh = realloc(h->held, cap * sizeof(*nh)))) {
			drop_bad(h, from, m, "too many messages held");
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
			return;
		}
		memcpy(hm->data, m->data, m->data_len);
		hm->data_len = m->data_len;
	}
	h->nheld++;
	if (flush_pending_upto(h, hm->mark))
		h->stats.held++;
	held_release(h);
}

/* ---- router: cluster barriers ----------------------------------------- */

static void router_barrier(lm_home *h, uint16_t from, long ci,
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
	hold(h, from, m); /* DESIGN.md §2, step 3 */
}

/* ---- abort ------------------------------------------------------------ */

static void spread_abort(lm_home *h, uint16_t from, const struct lm_msg *m,
			 bool to_reflectors)
{
	const struct lm_layout *l = h->layout;

	lm_log_warn("home: ABORT from node %u (rank %u): %.*s", from,
		    m->rank, (int)(m->data_len > 200 ? 200 : m->data_len),
		    m->data ? (const char *)m->data : "");
	for (size_t i = 0; i < l->nclusters; i++)
		if ((uint32_t)l->clusters[i].reflector_index ==
		    h->self_index && l->clusters[i].id != from)
			h->out.send(h->ctx, l->clusters[i].id, m);
	if (to_reflectors)
		for (uint32_t k = 0; k < h->nrefl; k++)
			if (k != h->self_index)
				h->out.send(h->ctx, refl_node(h, k), m);
}

/* ---- dispatch: from our clusters -------------------------------------- */

/* Whether `type` from a cluster is a request (answered by a reply) or
 * one-way; -1 for types R does not take from clusters. */
static int cluster_kind(uint16_t type)
{
	switch (type) {
	case LM_MSG_REGISTER:
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

static void from_cluster(lm_home *h, uint16_t from, long ci,
			 uint32_t req_id, const struct lm_msg *m)
{
	uint32_t home;

	/* Ranks in LOCK, UNLOCK and FLUSH must be clients of the sender: a
	 * FLUSH's rank is the writer its notices will name. */
	if ((m->type == LM_MSG_LOCK || m->type == LM_MSG_UNLOCK ||
	     m->type == LM_MSG_FLUSH) &&
	    rank_under(h, m->rank, h->self_index) !=
	    &h->layout->clusters[ci]) {
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
		if (m->page >= h->npages) {
			refuse_fetch(h, from, req_id, m,
				     "page outside the region");
			break;
		}
		home = lm_home_of_page(h->layout, m->page);
		if (home == h->self_index) {
			home_fetch(h, from, req_id, m->page);
		} else {
			route_fetch(h, from, req_id, m);
		}
		break;
	case LM_MSG_FLUSH:
		route_flush(h, from, m);
		break;
	case LM_MSG_REGISTER:
		route_register(h, from, ci, req_id, m);
		break;
	case LM_MSG_BARRIER:
		router_barrier(h, from, ci, m);
		break;
	case LM_MSG_LOCK: {
		struct lm_msg r = msg_new(h, LM_MSG_LOCK);
		uint32_t mgr = lm_home_manager_of(h->layout, m->id);

		r.id = m->id;
		r.rank = m->rank;
		r.epoch = h->epoch;
		if (mgr == h->self_index)
			mgr_lock(h, from, req_id, &r, h->epoch);
		else
			forward(h, mgr, &r, from, req_id);
		break;
	}
	case LM_MSG_UNLOCK:
		hold(h, from, m);
		break;
	case LM_MSG_ALLOC:
	case LM_MSG_FREE:
		if (h->self_index != 0)
			forward(h, 0, m, from, req_id);
		else if (m->type == LM_MSG_ALLOC)
			handle_alloc(h, from, req_id, m);
		else
			handle_free(h, from, req_id, m);
		break;
	case LM_MSG_CREATE:
		if (m->rank == 0 || m->rank >= h->layout->nprocs) {
			drop_bad(h, from, m, "target rank is not a worker");
			break;
		}
		hold(h, from, m);
		break;
	case LM_MSG_END:
		hold(h, from, m);
		break;
	case LM_MSG_ABORT:
		spread_abort(h, from, m, true);
		break;
	}
}

/* ---- dispatch: from other reflectors ---------------------------------- */

static int reflector_kind(uint16_t type)
{
	switch (type) {
	case LM_MSG_REGISTER:
	case LM_MSG_PULL:
	case LM_MSG_FETCH:
	case LM_MSG_FLUSH:
	case LM_MSG_LOCK:
	case LM_MSG_ALLOC:
	case LM_MSG_FREE:
		return LM_REL_REQUEST;
	case LM_MSG_BARRIER:
	case LM_MSG_RELEASE:
	case LM_MSG_UNLOCK:
	case LM_MSG_RECALL:
	case LM_MSG_CREATE:
	case LM_MSG_END:
	case LM_MSG_ABORT:
		return LM_REL_ONEWAY;
	default:
		return -1;
	}
}

static void from_reflector(lm_home *h, uint16_t from, uint32_t ri,
			   uint32_t req_id, const struct lm_msg *m)
{
	const struct lm_cluster_cfg *c;
	bool managed = lm_home_manager_of(h->layout, m->id) == h->self_index;

	if ((m->type == LM_MSG_LOCK || m->type == LM_MSG_UNLOCK ||
	     m->type == LM_MSG_FLUSH) && !rank_under(h, m->rank, ri)) {
		drop_bad(h, from, m, "rank is not under the sending reflector");
		return;
	}
	if (!notices_valid(h, m)) {
		drop_bad(h, from, m, "notice of a page outside the region");
		return;
	}
	switch (m->type) {
	case LM_MSG_FETCH:
		if (m->page >= h->npages ||
		    lm_home_of_page(h->layout, m->page) != h->self_index)
			refuse_fetch(h, from, req_id, m, "not a page of ours");
		else
			home_fetch(h, from, req_id, m->page);
		break;
	case LM_MSG_REGISTER: {
		struct lm_msg r = msg_new(h, LM_MSG_REGISTER_OK);
		uint32_t ci = m->nnotices ? m->notices[0].wcluster : 0;
		long n = LM_EBADMSG;

		/* every entry names the same cluster, one under the sender */
		if (ci < h->layout->nclusters &&
		    (uint32_t)h->layout->clusters[ci].reflector_index == ri)
			n = home_register(h, from, ci, m->epoch, m);
		else
			drop_bad(h, from, m, "cluster not under the sender");
		r.status = n < 0 ? (int32_t)n : 0;
		r.notices = h->scratch;
		r.nnotices = n < 0 ? 0 : (uint32_t)n;
		h->out.reply(h->ctx, from, req_id, &r);
		break;
	}
	case LM_MSG_PULL: {
		struct forward *f;

		if (m->id >= h->layout->nclusters ||
		    (uint32_t)h->layout->clusters[m->id].reflector_index !=
		    h->self_index) {
			struct lm_msg r = msg_new(h, LM_MSG_DELTA);

			drop_bad(h, from, m, "cluster not served here");
			r.status = LM_EINVAL;
			r.page = m->page;
			r.version = m->version;
			h->out.reply(h->ctx, from, req_id, &r);
			break;
		}
		f = fwd_add(h, LM_MSG_PULL, h->layout->clusters[m->id].id,
			    from, req_id);
		if (!f) {
			drop_bad(h, from, m, "too many requests in flight");
			break;
		}
		h->out.request(h->ctx, f->to, f->req_id, m);
		break;
	}
	case LM_MSG_FLUSH: {
		struct lm_msg r = msg_new(h, LM_MSG_FLUSH_OK);
		long n = home_apply(h, from, m->epoch, m->rank, &m->diffs);

		r.status = n < 0 ? (int32_t)n : 0;
		r.notices = h->scratch;
		r.nnotices = n < 0 ? 0 : (uint32_t)n;
		h->out.reply(h->ctx, from, req_id, &r);
		break;
	}
	case LM_MSG_LOCK:
		if (!managed)
			drop_bad(h, from, m, "lock not managed here");
		else
			mgr_lock(h, from, req_id, m, m->epoch);
		break;
	case LM_MSG_UNLOCK:
		if (!managed)
			drop_bad(h, from, m, "lock not managed here");
		else
			mgr_unlock(h, from, m, m->epoch, m->notices,
				   m->nnotices);
		break;
	case LM_MSG_ALLOC:
	case LM_MSG_FREE:
		if (h->self_index != 0)
			drop_bad(h, from, m, "not the allocator");
		else if (m->type == LM_MSG_ALLOC)
			handle_alloc(h, from, req_id, m);
		else
			handle_free(h, from, req_id, m);
		break;
	case LM_MSG_BARRIER:
		if (!managed || !serves_clusters(h, ri))
			drop_bad(h, from, m, "barrier not managed here");
		else
			mgr_arrive(h, from, ri, m);
		break;
	case LM_MSG_RELEASE:
		if (refl_node(h, lm_home_manager_of(h->layout, m->id)) != from)
			drop_bad(h, from, m, "not the barrier's manager");
		else if (h->nserved)
			router_release(h, m->id, m->notices, m->nnotices);
		break;
	case LM_MSG_RECALL:
		c = rank_under(h, m->rank, h->self_index);
		if (refl_node(h, lm_home_manager_of(h->layout, m->id)) != from)
			drop_bad(h, from, m, "not the lock's manager");
		else if (!c)
			drop_bad(h, from, m, "holder not served here");
		else
			h->out.send(h->ctx, c->id, m);
		break;
	case LM_MSG_CREATE:
		c = rank_under(h, m->rank, h->self_index);
		if (!c || m->rank == 0)
			drop_bad(h, from, m, "target rank not a worker here");
		else
			h->out.send(h->ctx, c->id, m);
		break;
	case LM_MSG_END:
		c = rank_under(h, 0, h->self_index);
		if (!c)
			drop_bad(h, from, m, "rank 0 is not served here");
		else
			h->out.send(h->ctx, c->id, m);
		break;
	case LM_MSG_ABORT:
		spread_abort(h, from, m, false);
		break;
	}
}

/* A reply of another reflector to a request we forwarded. */
static void from_reply(lm_home *h, uint16_t from, uint32_t req_id,
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
			held_release(h);
		return;
	}
	if (done.type == LM_MSG_PULL && done.node == 0) {
		home_pulled(h, m);
		return;
	}
	if (done.type == LM_MSG_FETCH && done.node == 0) {
		rfetch_reply(h, done.agg, m);
		return;
	}
	if (done.type == LM_MSG_REGISTER) {
		struct reg_agg *a = agg_find(h, done.agg);

		for (uint32_t i = 0; i < m->nnotices; i++)
			set_put(&h->epoch_set, &m->notices[i]);
		if (a) {
			if (m->status)
				a->status = m->status;
			if (agg_add_notices(a, m->notices, m->nnotices) < 0)
				a->status = LM_ENOMEM;
			a->parts--;
			agg_done(h, a);
		}
		held_release(h);
		return;
	}
	if (done.type != LM_MSG_FLUSH) {
		h->out.reply(h->ctx, done.node, done.node_req, m);
		return;
	}
	if (m->status != 0)
		lm_log_error("home: node %u refused diffs of ours: %s", from,
			     lm_strerror(m->status));
	for (uint32_t i = 0; i < m->nnotices; i++)
		set_put(&h->epoch_set, &m->notices[i]);
	held_release(h);
}

void lm_home_handle(lm_home *h, uint16_t from, enum lm_rel_msg_kind kind,
		    uint32_t req_id, const struct lm_msg *m)
{
	long ci, ri = -1;
	int want;

	if (!h || !m)
		return;
	ci = served_cluster(h, from);
	if (ci < 0)
		ri = peer_reflector(h, from);
	if (ci < 0 && ri < 0) {
		drop_bad(h, from, m, "not a cluster of ours or a reflector");
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
	if (kind == LM_REL_REPLY) {
		from_reply(h, from, req_id, m); /* checks it answers us */
		return;
	}
	want = ci >= 0 ? cluster_kind(m->type) : reflector_kind(m->type);
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
	if (ci >= 0)
		from_cluster(h, from, ci, req_id, m);
	else
		from_reflector(h, from, (uint32_t)ri, req_id, m);
}
