/* The reflector's dispatcher: role R of docs/dsm.md, for a root cluster
 * of one or more reflectors ("Several reflectors").  Creates the state,
 * checks each decoded message (sender, run, kind) and hands it to the
 * role that serves it; the top layer of reflector/ (reflector_int.h).  A
 * state machine fed decoded messages; it never touches a socket.
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
#include "reflector_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lm_error.h"

/* Index of the reflector with node id `node`, other than us, or -1. */
static long peer_reflector(const lm_home *h, uint16_t node)
{
	for (uint32_t i = 0; i < h->nrefl; i++)
		if (h->layout->reflectors[i].id == node)
			return i == h->self_index ? -1 : (long)i;
	return -1;
}

/* Index of reflector node `node`, us included; only for a reflector. */
static uint32_t refl_index(const lm_home *h, uint16_t node)
{
	long ri = peer_reflector(h, node);

	return ri < 0 ? h->self_index : (uint32_t)ri;
}

/* ---- what we serve for ourselves and our clusters (lm_route) ---------- */

static long serve_flush(lm_home *h, uint16_t from, uint32_t req_id,
			const struct lm_msg *m)
{
	(void)req_id;
	return lm_page_home_apply(h, from, m->epoch, m->rank, &m->diffs);
}

/* A registration's entries all name one cluster (lm_list_check_register). */
static long serve_register(lm_home *h, uint16_t from, uint32_t req_id,
			   const struct lm_msg *m)
{
	uint32_t ci = m->nnotices ? m->notices[0].wcluster : 0;

	(void)req_id;
	return lm_page_home_register(h, from, ci, m->epoch, m);
}

static long serve_arrive(lm_home *h, uint16_t from, uint32_t req_id,
			 const struct lm_msg *m)
{
	(void)req_id;
	lm_barriers_arrive(h, from, refl_index(h, from), m);
	return 0;
}

/* RELEASE from the barrier's manager: our cached copies older than its
 * notices go (I3) before it passes down. */
static long serve_release(lm_home *h, uint16_t from, uint32_t req_id,
			  const struct lm_msg *m)
{
	(void)from;
	(void)req_id;
	if (h->nserved) {
		lm_relay_cache_invalidate(h, m->notices, m->nnotices);
		lm_barriers_release(h, m);
	}
	return 0;
}

static void serve_install(lm_home *h)
{
	h->serve[LM_MSG_FLUSH] = serve_flush;
	h->serve[LM_MSG_REGISTER] = serve_register;
	h->serve[LM_MSG_BARRIER] = serve_arrive;
	h->serve[LM_MSG_RELEASE] = serve_release;
	h->serve[LM_MSG_LOCK] = lm_lock_mgr_lock;
	h->serve[LM_MSG_UNLOCK] = lm_lock_mgr_unlock;
	h->serve[LM_MSG_PROBE] = lm_lock_mgr_probe;
	h->serve[LM_MSG_ALLOC] = lm_alloc_request;
	h->serve[LM_MSG_FREE] = lm_alloc_free;
}

/* Forgets everything of the current run (docs/dsm.md "Identity and
 * runs").  Cannot fail: the free list's room for one extent was reserved
 * at create. */
static void run_reset(lm_home *h)
{
	lm_page_home_clear(h);
	h->epoch = 0;
	lm_notice_set_clear(&h->epoch_set);
	lm_barriers_clear(h);
	lm_lock_mgr_clear(h);
	lm_held_clear(h);
	lm_split_clear(h);
	lm_relay_cache_clear(h);
	h->nfwd = 0;
	lm_alloc_reset(h);
}

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

	h->scratch = calloc(npages, sizeof(*h->scratch));
	if (!h->scratch || lm_notice_set_init(&h->epoch_set, npages) < 0 ||
	    lm_page_home_init(h) < 0 ||
	    lm_relay_cache_init(h) < 0 ||
	    lm_split_init(h) < 0 || lm_barriers_init(h) < 0 ||
	    lm_alloc_init(h) < 0)
		goto err;
	serve_install(h);
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
	lm_page_home_destroy(h);
	lm_relay_cache_destroy(h);
	lm_split_destroy(h);
	lm_barriers_destroy(h);
	lm_locks_destroy(h);
	lm_held_destroy(h);
	lm_alloc_destroy(h);
	lm_notice_set_free(&h->epoch_set);
	free(h->scratch);
	free(h->fwd);
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

static void spread_abort(lm_home *h, uint16_t from, const struct lm_msg *m,
			 bool to_reflectors)
{
	lm_log_warn("home: ABORT from node %u (rank %u): %.*s", from,
		    m->rank, (int)(m->data_len > 200 ? 200 : m->data_len),
		    m->data ? (const char *)m->data : "");
	send_abort(h, from, m, to_reflectors);
}

/* Whether `type` from a cluster is a request (answered by a reply) or
 * one-way; -1 for types R does not take from clusters. */
static int cluster_kind(uint16_t type)
{
	switch (type) {
	case LM_MSG_REGISTER:
	case LM_MSG_JOIN:
	case LM_MSG_FETCH:
	case LM_MSG_FETCHV:
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
	case LM_MSG_CHANGED:
	case LM_MSG_GONE:
	case LM_MSG_PROBE:
		return LM_REL_ONEWAY;
	default:
		return -1;
	}
}

/* Hands m to its owner (lm_route) for node/node_req; with no room to
 * track the request its sender would wait for ever, so the run ends. */
static void route_or_lose(lm_home *h, uint32_t owner, const struct lm_msg *m,
			  uint16_t node, uint32_t node_req)
{
	if (lm_route(h, owner, m, node, node_req, NULL, NULL) < 0)
		lose_run(h, "too many requests in flight to forward one more");
}

/* A cluster's CHANGED (what its registrations changed, lemuriad/
 * changes.c), from that cluster (`writer` its layout index) or passed on
 * by its reflector (-1): to each of our other clusters that keeps one
 * copy, and from the writer's own reflector to every other that serves
 * clusters (docs/dsm.md "Eventual visibility"). */
static void pass_changed(lm_home *h, uint16_t from, long writer,
			 const struct lm_msg *m)
{
	const struct lm_layout *l = h->layout;

	bool hurry = m->id == LM_CHANGED_HURRY;

	if ((m->id != LM_CHANGED_ALL && !hurry) || (hurry && m->nnotices)) {
		drop_bad(h, from, m, "CHANGED not for every cluster");
		return;
	}
	if (!hurry && writer >= 0 && m->rank != (uint32_t)writer) {
		drop_bad(h, from, m, "CHANGED of another cluster");
		return;
	}
	h->stats.changed_pages += m->nnotices;
	/* a list is for the copies; a hurry for every writer */
	for (size_t i = 0; i < l->nclusters; i++)
		if ((uint32_t)l->clusters[i].reflector_index == h->self_index &&
		    (hurry || l->clusters[i].copy == LM_COPY_CLUSTER) &&
		    (long)i != writer) {
			h->stats.changed_sent++;
			h->out.send(h->ctx, l->clusters[i].id, m);
		}
	if (writer < 0)
		return;
	for (uint32_t k = 0; k < h->nrefl; k++)
		if (k != h->self_index && serves_clusters(h, k)) {
			h->stats.changed_sent++;
			h->out.send(h->ctx, refl_node(h, k), m);
		}
}

static void from_cluster(lm_home *h, uint16_t from, long ci,
			 uint32_t req_id, const struct lm_msg *m)
{
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
			lm_page_home_refuse_fetch(h, from, req_id, m,
						  "page outside the region");
			break;
		}
		/* a page homed elsewhere goes through our relay cache */
		if (lm_home_of_page(h->layout, m->page) == h->self_index)
			lm_page_home_fetch(h, from, req_id, m->page, m->id);
		else
			lm_relay_cache_fetch(h, from, req_id, m);
		break;
	case LM_MSG_FETCHV:
		lm_page_home_fetchv(h, from, req_id, m);
		break;
	case LM_MSG_CHANGED:
		pass_changed(h, from, ci, m);
		break;
	case LM_MSG_GONE: {
		/* every reflector may manage a barrier that waits for it */
		struct lm_msg g = *m;

		g.id = (uint32_t)ci;
		for (uint32_t k = 0; k < h->nrefl; k++)
			if (k != h->self_index)
				h->out.send(h->ctx, refl_node(h, k), &g);
		lm_barriers_gone(h, (uint32_t)ci, m->rank);
		break;
	}
	case LM_MSG_FLUSH:
		lm_split_flush(h, from, m);
		break;
	case LM_MSG_REGISTER:
		lm_split_register(h, from, ci, req_id, m);
		break;
	case LM_MSG_BARRIER:
		if (lm_barriers_gather(h, from, ci, m))
			lm_held_add(h, from, m);
		break;
	case LM_MSG_LOCK: {
		struct lm_msg r = msg_new(h, LM_MSG_LOCK);
		uint32_t mgr = lm_home_manager_of(h->layout, m->id);

		r.id = m->id;
		r.rank = m->rank;
		r.epoch = h->epoch;
		route_or_lose(h, mgr, &r, from, req_id);
		break;
	}
	case LM_MSG_UNLOCK:
		lm_held_add(h, from, m);
		break;
	case LM_MSG_PROBE: /* to the lock's manager */
		route_or_lose(h, lm_home_manager_of(h->layout, m->id), m, from,
			      0);
		break;
	case LM_MSG_ALLOC:
	case LM_MSG_FREE:
		route_or_lose(h, 0, m, from, req_id); /* the allocator */
		break;
	case LM_MSG_CREATE:
		if (m->rank == 0 || m->rank >= h->layout->nprocs) {
			drop_bad(h, from, m, "target rank is not a worker");
			break;
		}
		lm_held_add(h, from, m);
		break;
	case LM_MSG_END:
		lm_held_add(h, from, m);
		break;
	case LM_MSG_ABORT:
		spread_abort(h, from, m, true);
		break;
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
			lm_page_home_refuse_fetch(h, from, req_id, m,
						  "not a page of ours");
		else
			lm_page_home_fetch(h, from, req_id, m->page, m->id);
		break;
	case LM_MSG_REGISTER: {
		struct lm_msg r = msg_new(h, LM_MSG_REGISTER_OK);
		uint32_t ci = m->nnotices ? m->notices[0].wcluster : 0;
		long n = LM_EBADMSG;

		/* every entry names the same cluster, one under the sender */
		if (ci < h->layout->nclusters &&
		    (uint32_t)h->layout->clusters[ci].reflector_index == ri)
			n = lm_page_home_register(h, from, ci, m->epoch, m);
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
		f = lm_fwd_add(h, LM_MSG_PULL, h->layout->clusters[m->id].id,
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
		long n = serve_flush(h, from, req_id, m);

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
			lm_lock_mgr_lock(h, from, req_id, m);
		break;
	case LM_MSG_UNLOCK:
		if (!managed)
			drop_bad(h, from, m, "lock not managed here");
		else
			lm_lock_mgr_unlock(h, from, req_id, m);
		break;
	case LM_MSG_ALLOC:
	case LM_MSG_FREE:
		if (h->self_index != 0)
			drop_bad(h, from, m, "not the allocator");
		else if (m->type == LM_MSG_ALLOC)
			lm_alloc_request(h, from, req_id, m);
		else
			lm_alloc_free(h, from, req_id, m);
		break;
	case LM_MSG_BARRIER:
		if (!managed || !serves_clusters(h, ri))
			drop_bad(h, from, m, "barrier not managed here");
		else
			lm_barriers_arrive(h, from, ri, m);
		break;
	case LM_MSG_RELEASE:
		if (refl_node(h, lm_home_manager_of(h->layout, m->id)) != from)
			drop_bad(h, from, m, "not the barrier's manager");
		else
			serve_release(h, from, req_id, m);
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
	case LM_MSG_PROBE:
		/* from the manager: on to the holder's cluster, ours; else
		 * a cluster's probe for us, the manager */
		c = rank_under(h, m->rank, h->self_index);
		if (refl_node(h, lm_home_manager_of(h->layout, m->id)) == from) {
			if (c)
				h->out.send(h->ctx, c->id, m);
			else
				drop_bad(h, from, m, "holder not served here");
		} else if (managed) {
			lm_lock_mgr_probe(h, from, req_id, m);
		} else {
			drop_bad(h, from, m, "lock not managed here");
		}
		break;
	case LM_MSG_CHANGED:
		pass_changed(h, from, -1, m);
		break;
	case LM_MSG_GONE:
		if (m->id >= h->layout->nclusters ||
		    (uint32_t)h->layout->clusters[m->id].reflector_index != ri)
			drop_bad(h, from, m, "GONE of a cluster not under the "
				 "sending reflector");
		else
			lm_barriers_gone(h, m->id, m->rank);
		break;
	case LM_MSG_WAITING:
		if (!serves_clusters(h, ri) ||
		    !serves_clusters(h, h->self_index))
			drop_bad(h, from, m, "WAITING from or to a reflector "
				 "without clusters");
		else
			lm_barriers_waiting(h, ri, m);
		break;
	case LM_MSG_CREATE:
		c = rank_under(h, m->rank, h->self_index);
		if (!c || m->rank == 0) {
			drop_bad(h, from, m, "target rank not a worker here");
		} else {
			lm_notice_set_add(&h->epoch_set, m->notices,
					  m->nnotices);
			h->out.send(h->ctx, c->id, m);
		}
		break;
	case LM_MSG_END:
		c = rank_under(h, 0, h->self_index);
		if (!c) {
			drop_bad(h, from, m, "rank 0 is not served here");
		} else {
			lm_notice_set_add(&h->epoch_set, m->notices,
					  m->nnotices);
			h->out.send(h->ctx, c->id, m);
		}
		break;
	case LM_MSG_ABORT:
		spread_abort(h, from, m, false);
		break;
	}
}

/* A reply to a request of ours (lm_fwd_add): to a role when the request
 * was our own, else passed on to the node that asked. */
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
	struct forward done;

	if (!lm_fwd_take(h, from, req_id, &done)) {
		drop_bad(h, from, m, "reply to no request of ours");
		return;
	}
	if (m->type != answer[done.type] || !notices_valid(h, m)) {
		drop_bad(h, from, m, "bad reply");
		if (done.type == LM_MSG_REGISTER)
			lm_split_register_acked(h, done.agg, NULL);
		if (done.seq)
			lm_held_release(h);
		return;
	}
	if (done.type == LM_MSG_PULL && done.node == 0) {
		lm_page_home_pulled(h, m);
		return;
	}
	if (done.type == LM_MSG_FETCH && done.node == 0) {
		lm_relay_cache_page(h, done.agg, m);
		return;
	}
	if (done.type == LM_MSG_REGISTER) {
		for (uint32_t i = 0; i < m->nnotices; i++)
			lm_notice_set_put(&h->epoch_set, &m->notices[i]);
		lm_split_register_acked(h, done.agg, m);
		lm_held_release(h);
		return;
	}
	if (done.type == LM_MSG_LOCK)
		lm_notice_set_add(&h->epoch_set, m->notices, m->nnotices);
	if (done.type != LM_MSG_FLUSH) {
		h->out.reply(h->ctx, done.node, done.node_req, m);
		return;
	}
	if (m->status != 0)
		lm_log_error("home: node %u refused diffs of ours: %s", from,
			     lm_strerror(m->status));
	for (uint32_t i = 0; i < m->nnotices; i++)
		lm_notice_set_put(&h->epoch_set, &m->notices[i]);
	lm_held_release(h);
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
			lm_log_info("home: run %llu replaces %llu",
				    (unsigned long long)m->run,
				    (unsigned long long)h->run);
		run_reset(h);
		h->run = m->run;
	}
	if (kind == LM_REL_REPLY) {
		from_reply(h, from, req_id, m); /* checks it answers us */
		return;
	}
	want = ci >= 0 ? cluster_kind(m->type) : lm_route_kind(m->type);
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

void lm_home_peer_lost(lm_home *h, uint16_t node, const char *why)
{
	struct lm_msg a = msg_new(h, LM_MSG_ABORT);
	char reason[LM_NAME_MAX + 160];
	long ci, ri;

	if (!h || !h->run)
		return; /* no run: nobody to tell */
	ci = served_cluster(h, node);
	ri = ci < 0 ? peer_reflector(h, node) : -1;
	if (ci >= 0)
		snprintf(reason, sizeof(reason), "lemuriad %s lost%s%s",
			 h->layout->clusters[ci].name, why ? ": " : "",
			 why ? why : "");
	else if (ri >= 0)
		snprintf(reason, sizeof(reason), "reflector %s lost%s%s",
			 h->layout->reflectors[ri].name, why ? ": " : "",
			 why ? why : "");
	else
		return;
	a.rank = LM_HOME_ABORT_PEER;
	a.data = (const uint8_t *)reason;
	a.data_len = strlen(reason);
	/* the clusters of this reflector and, for a lost lemuriad, the
	 * other reflectors, which pass it on to theirs */
	spread_abort(h, node, &a, ci >= 0);
}
