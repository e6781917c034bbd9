/* Internals of the reflector's state machine (reflector/home.h).  Its
 * files call downward only:
 *   main.c, home_stats.c   the daemon and its counters
 *   dispatch.c      creation, run state, checks, one handler per message
 *   page_home.c relay_cache.c split.c held.c barriers.c locks.c alloc.c
 *                   the roles; none calls another
 *   list_check.c    FLUSH and REGISTER lists checked whole
 *   route.c         placement, requests in flight, serve here or send on
 * A role that needs another role's work hands the message to lm_route,
 * which calls the handler the dispatcher installed in h->serve when the
 * owner is this reflector.  Nothing here is for use outside reflector/. */
#ifndef LM_REFLECTOR_INT_H
#define LM_REFLECTOR_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "home.h"
#include "notice_set.h"
#include "log.h"

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

/* A barrier pending at a reflector: at the router, which of our clusters
 * arrived; at its manager, which reflectors arrived and the notices they
 * brought (unused at the router). */
struct barrier_entry {
	bool pending;
	uint32_t id;
	uint32_t arrived;
	uint8_t *seen;    /* per layout cluster or reflector index, owned */
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

/* What each cluster changed in a page since its epoch entry began
 * (docs/dsm.md "Pages as diffs"): a cluster whose copy is at the entry's
 * base gets the others' bytes instead of the page.  Complete or unused:
 * a change it could not record marks it broken. */
#define LM_HOME_EM_CLUSTERS 8
struct epoch_masks {
	uint32_t epoch1, base; /* the entry it belongs to (page_epoch) */
	bool broken;
	uint32_t n;	       /* clusters recorded */
	uint32_t cluster[LM_HOME_EM_CLUSTERS];
	uint64_t *bits[LM_HOME_EM_CLUSTERS]; /* page_size / 64 words each,
						kept for reuse */
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
	uint8_t *granted;  /* REGISTER_OK's data: pages made ours, u32 LE */
	size_t granted_len;
};

/* A delta registered at its home and not applied yet (lazy relay): it
 * stays at its cluster until pulled or pushed. */
struct pending {
	struct pending *next;
	uint32_t version;  /* the page's version once it is applied */
	uint32_t cluster;  /* layout index of the cluster holding it */
	bool pulling;      /* PULL sent */
	bool has_data;
	bool owned;        /* the cluster owns the page: what it sends is
			      the whole page, its writes since included */
	uint8_t *data;     /* the delta as a diff, owned */
	size_t len;
};

/* A page of another reflector's home, cached by its router. */
struct rpage {
	uint32_t page;
	uint32_t version;
	uint32_t ntags;  /* the home's tags, after the data */
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
	uint32_t ahead; /* the first FETCH's pull-ahead, sent once */
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

/* A role's handler of a message this reflector owns (lm_route): from is
 * the node to answer (our own id for a request of ours), req_id its
 * request.  FLUSH and REGISTER return the number of notices left in
 * h->scratch or a negative LM_E* (their caller answers); the others 0. */
typedef long lm_serve_fn(lm_home *h, uint16_t from, uint32_t req_id,
			 const struct lm_msg *m);

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
	/* per type: the role that serves it when we own it (dispatch.c) */
	lm_serve_fn *serve[LM_MSG_TYPE_COUNT];

	/* ---- home: master copies of our pages; NULL until first written */
	uint8_t **pages;
	uint32_t *versions;
	/* per page and cluster (page * nclusters + cluster): the number of
	 * the cluster's last registration that changed the page, 0 none;
	 * every PAGE and PAGES carries them (docs/dsm.md "Order") */
	uint32_t *tags;
	uint8_t *tagbuf; /* one message's tags (nclusters of them) */
	struct page_epoch *pe;
	struct epoch_masks **em; /* per page, NULL until needed */
	size_t em_bytes, em_budget;
	uint64_t *em_union;      /* scratch: the bytes a PAGES diff sends */
	uint8_t *zero; /* page_size zero bytes, answers FETCH of NULL pages */
	/* flush_mark[p] == flush_seq when p's version went up in the list
	 * being applied. */
	uint32_t *flush_mark;
	uint32_t flush_seq;
	/* per page: deltas registered and not applied, in version order,
	 * and the FETCHes that wait for them (lazy relay) */
	struct pending **pend;
	struct fetch_wait **fwait;
	/* per page, the clusters that hold it (bit = layout index; bit 63:
	 * one we cannot name, a reflector's relay, for good) and the pages
	 * lm_page_home_register just made a cluster the owner of */
	uint64_t *holders;
	uint32_t *granted;
	uint32_t ngranted;

	/* ---- the routing of our own clusters */
	uint32_t epoch;            /* barriers released to our clusters */
	struct lm_notice_set epoch_set; /* this epoch: our clusters' changes
					and the notices they were sent */
	struct barrier_entry barriers[LM_HOME_BARRIERS_MAX];
	/* clusters whose ranks all left the run (GONE; barriers.c): per
	 * layout index whether, and the last rank to leave; told: the run
	 * was ended for it already */
	bool *gone;
	uint32_t *gone_rank;
	bool gone_told;
	/* every cluster of ours waits in barrier `waiting_in` (gathered,
	 * no RELEASE yet), and what the other reflectors said of theirs
	 * (WAITING, per reflector index): barriers.c, check_split */
	bool waiting;
	uint32_t waiting_in;
	struct refl_waiting {
		bool valid;
		uint32_t id, epoch;
	} *waits;
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
	struct barrier_entry mbarriers[LM_HOME_BARRIERS_MAX];
	struct home_lock *locks; /* unordered, active entries only */
	size_t nlocks, locks_cap;
	struct lm_notice *scratch; /* npages entries: notices being sent */

	/* ---- allocator (the first reflector) */
	struct extent_vec free_list; /* free ranges */
	struct extent_vec used;      /* live allocations (rounded size) */
	uint64_t next_id[LM_HOME_ID_KINDS]; /* may reach 2^32: exhausted */

	struct lm_home_stats stats;
};

/* ---- helpers shared by the parts ---- */

static inline uint16_t refl_node(const lm_home *h, uint32_t index)
{
	return h->layout->reflectors[index].id;
}

/* The cluster holding `rank` if reflector `index` serves it, else NULL. */
static inline const struct lm_cluster_cfg *rank_under(const lm_home *h,
						      uint32_t rank,
						      uint32_t index)
{
	const struct lm_cluster_cfg *c;

	c = lm_layout_cluster_of_rank(h->layout, rank);
	if (!c || (uint32_t)c->reflector_index != index)
		return NULL;
	return c;
}

/* The node to send to for cluster c: c itself when we serve it, else its
 * reflector. */
static inline uint16_t cluster_via(const lm_home *h,
				   const struct lm_cluster_cfg *c)
{
	return (uint32_t)c->reflector_index == h->self_index ?
	       c->id : refl_node(h, (uint32_t)c->reflector_index);
}

/* Layout index of the cluster with node id `node` if this reflector serves
 * it, else -1. */
static inline long served_cluster(const lm_home *h, uint16_t node)
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

static inline bool serves_clusters(const lm_home *h, uint32_t index)
{
	for (size_t i = 0; i < h->layout->nclusters; i++)
		if ((uint32_t)h->layout->clusters[i].reflector_index == index)
			return true;
	return false;
}

/* The bit of cluster `ci` in a page's holders (h->holders): its layout
 * index; bit 63 for one we cannot name, a reflector's relay. */
#define LM_HOLDER_UNNAMED ((uint64_t)1 << 63)

static inline uint64_t lm_holder_bit(uint32_t ci)
{
	return ci < 63 ? (uint64_t)1 << ci : LM_HOLDER_UNNAMED;
}

/* Counted (dropped_bad) and logged, rate-limited: what a peer sends
 * must not flood the log (log.h). */
static inline void drop_bad(lm_home *h, uint16_t from,
			    const struct lm_msg *m, const char *why)
{
	h->stats.dropped_bad++;
	lm_log_limited("bad messages dropped by the reflector", LM_LOG_WARN,
		       "home: %s from node %u dropped: %s",
		       lm_msg_name(m->type), from, why);
}

static inline struct lm_msg msg_new(const lm_home *h, enum lm_msg_type type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (uint16_t)type;
	m.run = h->run;
	return m;
}

/* ABORT m to our clusters but `from` and, with to_reflectors, to every
 * other reflector, which pass it on to theirs. */
static inline void send_abort(lm_home *h, uint16_t from,
			      const struct lm_msg *m, bool to_reflectors)
{
	const struct lm_layout *l = h->layout;

	for (size_t i = 0; i < l->nclusters; i++)
		if ((uint32_t)l->clusters[i].reflector_index ==
		    h->self_index && l->clusters[i].id != from)
			h->out.send(h->ctx, l->clusters[i].id, m);
	if (to_reflectors)
		for (uint32_t k = 0; k < h->nrefl; k++)
			if (k != h->self_index)
				h->out.send(h->ctx, refl_node(h, k), m);
}

/* Something of the run was lost here (a limit or no memory): whoever
 * waits for it would wait for ever, so the run ends everywhere, naming
 * the cause. */
static inline void lose_run(lm_home *h, const char *what)
{
	struct lm_msg a = msg_new(h, LM_MSG_ABORT);
	char reason[2 * LM_NAME_MAX + 200];

	snprintf(reason, sizeof(reason), "reflector %s: %s",
		 h->layout->reflectors[h->self_index].name, what);
	lm_log_error("home: %s; the run is aborted", reason);
	a.rank = LM_HOME_ABORT_PEER;
	a.data = (const uint8_t *)reason;
	a.data_len = strlen(reason);
	if (a.data_len > LM_MSG_REASON_MAX)
		a.data_len = LM_MSG_REASON_MAX; /* what ABORT carries */
	send_abort(h, 0, &a, true);
}

/* Notices from another reflector must name pages of the region. */
static inline bool notices_valid(const lm_home *h, const struct lm_msg *m)
{
	for (uint32_t i = 0; i < m->nnotices; i++)
		if (m->notices[i].page >= h->npages)
			return false;
	return true;
}


/* route.c: placement, requests in flight, serve here or send on */

/* LM_REL_REQUEST or LM_REL_ONEWAY: how `type` travels between reflectors;
 * -1 for a type that does not. */
int lm_route_kind(uint16_t type);
/* A new request of ours to node `to`, answering node/node_req when its
 * reply comes (node 0: the request is our own); NULL when too many are
 * in flight (I5). */
struct forward *lm_fwd_add(lm_home *h, uint16_t type, uint16_t to,
			   uint16_t node, uint32_t node_req);
/* Removes the request that a reply of `from` with req_id answers into
 * *out; false when it answers no request of ours to `from`. */
bool lm_fwd_take(lm_home *h, uint16_t from, uint32_t req_id,
		 struct forward *out);
/* Whether a FLUSH or REGISTER of ours up to seq `mark` waits for its ack. */
bool lm_fwd_flush_pending(const lm_home *h, uint64_t mark);
/* The one choice between serving here and sending on.  m concerns
 * reflector `owner` (a page's home, a lock's or barrier's manager, the
 * allocator).  When that is us, h->serve[m->type] serves it now as from
 * node (0: ourselves) answering node_req, and its result goes to *served;
 * returns 1.  Otherwise m goes to owner: a request with a forward entry
 * answering node/node_req, left in *fwd for the caller to tag (its reply
 * can only come with a later lm_home_handle), a one-way message as it
 * is; returns 0, or LM_ENOBUFS when too many requests are in flight.
 * served and fwd may be NULL. */
int lm_route(lm_home *h, uint32_t owner, const struct lm_msg *m,
	     uint16_t node, uint32_t node_req, long *served,
	     struct forward **fwd);

/* list_check.c: FLUSH and REGISTER lists checked whole */

/* Checks a whole diff list (as_home: and that every page is ours);
 * returns its number of entries or a negative count - 1 of the entries
 * before the first bad one. */
long lm_list_check_flush(const lm_home *h, const struct lm_msg_diffs *d,
			 bool as_home);
/* Walks a REGISTER's entries with their data: checks everything
 * (as_home: that every page is ours; ci: the registering cluster) and
 * returns 0 or LM_EBADMSG. */
int lm_list_check_register(const lm_home *h, const struct lm_msg *m,
			   uint32_t ci, bool as_home);

/* page_home.c: the home of a share of the pages */
int lm_page_home_init(lm_home *h);
void lm_page_home_clear(lm_home *h);
void lm_page_home_destroy(lm_home *h);
void lm_page_home_refuse_fetch(lm_home *h, uint16_t from, uint32_t req_id,
			       const struct lm_msg *m, const char *why);
long lm_page_home_apply(lm_home *h, uint16_t from, uint32_t epoch,
			uint32_t writer, const struct lm_msg_diffs *d);
/* A lemuriad's FETCHV: PAGES with every page asked (up to
 * LM_FETCHV_MAX) that is ours and has no pending delta, the rest left to
 * the lemuriad's own FETCHes. */
void lm_page_home_fetchv(lm_home *h, uint16_t node, uint32_t req_id,
			 const struct lm_msg *m);
/* A FETCH: answered now when the page has no pending delta, else once
 * they are in, pulling the `ahead` pages after it meanwhile (at most the
 * layout's prefetch; FETCH's id). */
void lm_page_home_fetch(lm_home *h, uint16_t node, uint32_t req_id,
			uint32_t page, uint32_t ahead);
void lm_page_home_pulled(lm_home *h, const struct lm_msg *m);
/* Enters a cluster's REGISTER (its part of ours); the pages it made
 * cluster ci the owner of are left in h->granted (h->ngranted), until
 * the next call. */
long lm_page_home_register(lm_home *h, uint16_t from, uint32_t ci,
			   uint32_t epoch, const struct lm_msg *m);

/* relay_cache.c: pages of other homes, cached, and their FETCHes */
int lm_relay_cache_init(lm_home *h);
void lm_relay_cache_destroy(lm_home *h);
void lm_relay_cache_clear(lm_home *h);
void lm_relay_cache_fetch(lm_home *h, uint16_t from, uint32_t req_id,
			  const struct lm_msg *m);
void lm_relay_cache_page(lm_home *h, uint32_t id, const struct lm_msg *m);
void lm_relay_cache_invalidate(lm_home *h, const struct lm_notice *n,
			       uint32_t count);

/* split.c: our clusters' FLUSH and REGISTER lists split by home */
int lm_split_init(lm_home *h);
void lm_split_destroy(lm_home *h);
void lm_split_clear(lm_home *h);
void lm_split_flush(lm_home *h, uint16_t from, const struct lm_msg *m);
void lm_split_register(lm_home *h, uint16_t from, long ci,
		       uint32_t req_id, const struct lm_msg *m);
void lm_split_register_acked(lm_home *h, uint32_t agg,
			     const struct lm_msg *m);

/* held.c: synchronisation messages held for the homes' acks (I2) */
void lm_held_clear(lm_home *h);
void lm_held_destroy(lm_home *h);
void lm_held_add(lm_home *h, uint16_t from, const struct lm_msg *m);
void lm_held_release(lm_home *h);

/* barriers.c: our clusters' arrivals, and the barriers we manage */
int lm_barriers_init(lm_home *h);
void lm_barriers_clear(lm_home *h);
void lm_barriers_destroy(lm_home *h);
/* Cluster ci arrived at barrier m->id: true when it was the last of
 * ours, and the arrival goes on to the manager (DESIGN.md §2, step 3). */
bool lm_barriers_gather(lm_home *h, uint16_t from, long ci,
			const struct lm_msg *m);
void lm_barriers_arrive(lm_home *h, uint16_t from, uint32_t ri,
			const struct lm_msg *m);
void lm_barriers_release(lm_home *h, const struct lm_msg *m);
/* Every rank of cluster ci left the run, `rank` the last (GONE): a
 * barrier it never reached can never complete, now or later, so a
 * barrier waiting for it, here or at its manager, ends the run naming
 * the cluster (issue 42: the run used to hang). */
void lm_barriers_gone(lm_home *h, uint32_t ci, uint32_t rank);
/* Reflector ri's WAITING m: every cluster of ri waits in barrier m->id
 * since m->epoch barriers were released. */
void lm_barriers_waiting(lm_home *h, uint32_t ri, const struct lm_msg *m);

/* locks.c: the locks we manage */
void lm_lock_mgr_clear(lm_home *h);
void lm_locks_destroy(lm_home *h);
long lm_lock_mgr_lock(lm_home *h, uint16_t from, uint32_t req_id,
		   const struct lm_msg *m);
long lm_lock_mgr_unlock(lm_home *h, uint16_t from, uint32_t req_id,
		     const struct lm_msg *m);
/* PROBE m (lemuriad/locks.c): on to the cluster of the rank the lock
 * was granted to; dropped when the lock is free. */
long lm_lock_mgr_probe(lm_home *h, uint16_t from, uint32_t req_id,
		       const struct lm_msg *m);

/* alloc.c: the allocator */
long lm_alloc_request(lm_home *h, uint16_t from, uint32_t req_id,
		      const struct lm_msg *m);
long lm_alloc_free(lm_home *h, uint16_t from, uint32_t req_id,
		   const struct lm_msg *m);
int lm_alloc_init(lm_home *h);
void lm_alloc_reset(lm_home *h);
void lm_alloc_destroy(lm_home *h);

#endif
