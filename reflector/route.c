/* Who owns what, and the one choice between serving a message here and
 * sending it to the reflector that owns it (docs/dsm.md, "Several
 * reflectors").  The bottom layer of reflector/: the roles above call it,
 * it calls no role; a message served here goes to the handler that the
 * dispatcher installed in h->serve. */
#include "reflector_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"

uint32_t lm_home_of_page(const struct lm_layout *l, uint32_t page)
{
	return (uint32_t)((page / LM_HOME_PAGE_BLOCK) % l->nreflectors);
}

uint32_t lm_home_manager_of(const struct lm_layout *l, uint32_t id)
{
	return (uint32_t)(id % l->nreflectors);
}

int lm_route_kind(uint16_t type)
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
	case LM_MSG_CHANGED:
	case LM_MSG_GONE:
	case LM_MSG_WAITING:
	case LM_MSG_PROBE:
	case LM_MSG_CREATE:
	case LM_MSG_END:
	case LM_MSG_ABORT:
		return LM_REL_ONEWAY;
	default:
		return -1;
	}
}

struct forward *lm_fwd_add(lm_home *h, uint16_t type, uint16_t to,
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

bool lm_fwd_take(lm_home *h, uint16_t from, uint32_t req_id,
		 struct forward *out)
{
	for (size_t i = 0; i < h->nfwd; i++) {
		if (h->fwd[i].req_id != req_id)
			continue;
		if (h->fwd[i].to != from)
			return false;
		*out = h->fwd[i];
		h->fwd[i] = h->fwd[--h->nfwd];
		return true;
	}
	return false;
}

bool lm_fwd_flush_pending(const lm_home *h, uint64_t mark)
{
	for (size_t i = 0; i < h->nfwd; i++)
		if (h->fwd[i].seq && h->fwd[i].seq <= mark)
			return true;
	return false;
}

int lm_route(lm_home *h, uint32_t owner, const struct lm_msg *m,
	     uint16_t node, uint32_t node_req, long *served,
	     struct forward **fwd)
{
	struct forward *f;

	if (fwd)
		*fwd = NULL;
	if (owner == h->self_index) {
		long r = h->serve[m->type](h, node ? node : h->self_id,
					   node_req, m);

		if (served)
			*served = r;
		return 1;
	}
	if (lm_route_kind(m->type) != LM_REL_REQUEST) {
		h->out.send(h->ctx, refl_node(h, owner), m);
		return 0;
	}
	f = lm_fwd_add(h, m->type, refl_node(h, owner), node, node_req);
	if (!f)
		return LM_ENOBUFS;
	if (fwd)
		*fwd = f;
	h->out.request(h->ctx, f->to, f->req_id, m);
	return 0;
}
