/* The lemuriad's cluster page cache (hash by page + LRU list), the diffs
 * the cluster writes taken into it and into the open deltas (a client's
 * FLUSH, a seal of the shared copy), and the table of its requests to the
 * reflector (by req_id, and FETCHes by page), apart from the protocol
 * logic (fetches.c, notices.c) that decides what is cached, dropped and
 * asked for. */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "deltas.h"
#include "diff.h"
#include "lm_error.h"
#include "log.h"

/* ---- page cache ---------------------------------------------------- */

/* Dropped copies kept for the next page cached: a release drops and
 * refetches hundreds of pages, and malloc and free of page-sized blocks
 * cost (docs/performance.md, "Figures behind the lemuriad's choices").
 * At most this many, and an eighth of the cache (I5). */
#define LM_LEMURIAD_SPARE_PAGES 1024

struct cpage *lm_cache_find(const lm_lemuriad *c, uint32_t page)
{
	return page < c->npages ? c->by_page[page] : NULL;
}

static void lru_unlink(lm_lemuriad *c, struct cpage *cp)
{
	if (cp->prev)
		cp->prev->next = cp->next;
	else
		c->lru_head = cp->next;
	if (cp->next)
		cp->next->prev = cp->prev;
	else
		c->lru_tail = cp->prev;
	cp->prev = cp->next = NULL;
}

static void lru_push(lm_lemuriad *c, struct cpage *cp)
{
	cp->prev = NULL;
	cp->next = c->lru_head;
	if (c->lru_head)
		c->lru_head->prev = cp;
	else
		c->lru_tail = cp;
	c->lru_head = cp;
}

void lm_cache_touch(lm_lemuriad *c, struct cpage *cp)
{
	if (c->lru_head != cp) {
		lru_unlink(c, cp);
		lru_push(c, cp);
	}
}

/* Drops a copy without any message: our changes to it are kept apart in
 * the cluster deltas (deltas.c), which go home on their own. */
void lm_cache_detach(lm_lemuriad *c, struct cpage *cp)
{
	c->by_page[cp->page] = NULL;
	lru_unlink(c, cp);
	c->ncached--;
	c->stats.cached_bytes = c->ncached * (size_t)c->page_size;
}

static void drop_tags(struct cpage *cp)
{
	free(cp->tags);
	cp->tags = NULL;
	cp->ntags = 0;
}

void lm_cache_keep_tags(struct cpage *cp, const uint8_t *tags,
			uint32_t ntags)
{
	size_t len = (size_t)ntags * LM_MSG_TAG_SIZE;

	drop_tags(cp);
	if (cp->ordered || !(cp->tags = malloc(len ? len : 1)))
		return;
	if (len)
		memcpy(cp->tags, tags, len);
	cp->ntags = ntags;
}

void lm_cache_recycle(lm_lemuriad *c, struct cpage *cp)
{
	drop_tags(cp);
	if (c->nspare < LM_LEMURIAD_SPARE_PAGES &&
	    c->nspare < c->cache_max / 8) {
		cp->next = c->spare;
		c->spare = cp;
		c->nspare++;
	} else {
		free(cp);
	}
}

void lm_cache_remove(lm_lemuriad *c, struct cpage *cp)
{
	lm_cache_detach(c, cp);
	lm_cache_recycle(c, cp);
}

void lm_cache_clear(lm_lemuriad *c)
{
	while (c->lru_head)
		lm_cache_remove(c, c->lru_head);
}

/* Stores data (page_size bytes, copied) as page at version.  A copy
 * already there is replaced only by one at least as new (I3). */
int lm_cache_take_diff(lm_lemuriad *c, uint32_t page, uint32_t rank,
		       struct lm_delta *w, const uint8_t *diff, size_t len)
{
	struct cpage *cp = lm_cache_find(c, page);
	struct lm_delta *open;

	if (cp)
		cp->tag = ++c->next_tag;
	/* the copy, the writer's mask and the delta from one pass over the
	 * diff */
	open = lm_deltas_open(c->deltas, page, rank);
	if (!open) {
		if (cp)
			lm_diff_apply_valid(cp->data, diff, len);
		if (w)
			lm_delta_mark_valid_diff(w, diff, len);
		return LM_ENOMEM;
	}
	lm_delta_add_valid_diff_also(open, w, cp ? cp->data : NULL, diff,
				     len);
	return 0;
}

/* Whether page's copy waits here to go into the cluster copy with a
 * set (fetches.c): a page of the CHANGED set out (grp_on), or a fault's
 * answer that waits for order (gated), which goes in with the next set. */
static bool kept_for_set(lm_lemuriad *c, uint32_t page)
{
	const struct upreq *up;

	if (c->grp_on && c->grp_on[page])
		return true;
	return c->ngated && (up = lm_upreq_fetch_of(c, page)) && up->gated;
}

/* The least recently used copy that may go: not one kept for a set, as
 * the set goes into the cluster copy from here all at once; NULL when
 * every copy is. */
static struct cpage *evictable(lm_lemuriad *c)
{
	for (struct cpage *cp = c->lru_tail; cp; cp = cp->prev)
		if (!kept_for_set(c, cp->page))
			return cp;
	return NULL;
}

bool lm_cache_evict_one(lm_lemuriad *c)
{
	struct cpage *cp = evictable(c);

	if (!cp)
		return false;
	lm_cache_remove(c, cp);
	c->stats.evictions++;
	return true;
}

void lm_cache_trim(lm_lemuriad *c, uint32_t room)
{
	while (c->ncached + delta_pages(c) + room > c->cache_max &&
	       lm_cache_evict_one(c))
		;
}

void lm_cache_put(lm_lemuriad *c, uint32_t page, uint32_t version,
		  const uint8_t *data)
{
	struct cpage *cp = lm_cache_find(c, page);

	if (cp) {
		if (version >= cp->version) {
			memcpy(cp->data, data, c->page_size);
			cp->version = version;
			cp->tag = ++c->next_tag;
			cp->ordered = false;
			drop_tags(cp);
		}
		lm_cache_touch(c, cp);
		return;
	}
	lm_cache_trim(c, 1);
	if (c->spare) {
		cp = c->spare;
		c->spare = cp->next;
		c->nspare--;
	} else {
		cp = malloc(sizeof(*cp) + c->page_size);
	}
	if (!cp) {
		lm_log_warn("cluster %s: no memory to cache page %u",
			    c->cfg->name, page);
		return;
	}
	cp->page = page;
	cp->version = version;
	cp->tag = ++c->next_tag;
	cp->ordered = false;
	cp->tags = NULL;
	cp->ntags = 0;
	memcpy(cp->data, data, c->page_size);
	c->by_page[page] = cp;
	lru_push(c, cp);
	c->ncached++;
	c->stats.cached_bytes = c->ncached * (size_t)c->page_size;
}

void lm_cache_free_spares(lm_lemuriad *c)
{
	while (c->spare) {
		struct cpage *cp = c->spare;

		c->spare = cp->next;
		free(cp);
	}
	c->nspare = 0;
}

/* ---- requests to the reflector ------------------------------------- */

void lm_upreq_free_waiters(lm_lemuriad *c, struct waiter *w)
{
	while (w) {
		struct waiter *next = w->next;

		free(w);
		c->nwaits--;
		w = next;
	}
}

static struct upreq **id_bucket(lm_lemuriad *c, uint32_t req_id)
{
	return &c->up_by_id[req_id % LM_LEMURIAD_UP_BUCKETS];
}

static struct upreq **page_bucket(lm_lemuriad *c, uint32_t page)
{
	return &c->up_by_page[page % LM_LEMURIAD_UP_BUCKETS];
}

static void up_hash_id(lm_lemuriad *c, struct upreq *up)
{
	struct upreq **b = id_bucket(c, up->req_id);

	up->id_next = *b;
	*b = up;
}

static void up_unhash_id(lm_lemuriad *c, struct upreq *up)
{
	struct upreq **pp = id_bucket(c, up->req_id);

	while (*pp && *pp != up)
		pp = &(*pp)->id_next;
	if (*pp)
		*pp = up->id_next;
}

struct upreq *lm_upreq_new(lm_lemuriad *c, enum up_kind kind)
{
	struct upreq *up = calloc(1, sizeof(*up));

	if (!up)
		return NULL;
	up->kind = kind;
	up->req_id = c->next_req++;
	up->next = c->ups;
	if (c->ups)
		c->ups->prev = up;
	c->ups = up;
	up_hash_id(c, up);
	return up;
}

/* The request's next FETCH gets a new id (req_id must grow). */
void lm_upreq_renumber(lm_lemuriad *c, struct upreq *up)
{
	up_unhash_id(c, up);
	up->req_id = c->next_req++;
	up_hash_id(c, up);
}

/* Makes up the FETCH of `page`, found by lm_upreq_fetch_of. */
void lm_upreq_set_page(lm_lemuriad *c, struct upreq *up, uint32_t page)
{
	struct upreq **b = page_bucket(c, page);

	up->page = page;
	up->page_next = *b;
	*b = up;
	/* data of ours on its way up: a reply may predate it (the `left`
	 * rule of reply_page in fetches.c) */
	if (page < c->npages && c->leaving[page])
		up->left = UINT32_MAX;
}

/* The FETCH of `page` on its way to the reflector, or NULL. */
struct upreq *lm_upreq_fetch_of(lm_lemuriad *c, uint32_t page)
{
	struct upreq *up = *page_bucket(c, page);

	while (up && up->page != page)
		up = up->page_next;
	return up;
}

struct upreq *lm_upreq_find(lm_lemuriad *c, uint32_t req_id)
{
	struct upreq *up = *id_bucket(c, req_id);

	while (up && up->req_id != req_id)
		up = up->id_next;
	return up;
}

void lm_upreq_free(lm_lemuriad *c, struct upreq *up)
{
	if (up->prev)
		up->prev->next = up->next;
	else
		c->ups = up->next;
	if (up->next)
		up->next->prev = up->prev;
	up_unhash_id(c, up);
	if (up->kind == UP_FETCH) {
		struct upreq **pp = page_bucket(c, up->page);

		while (*pp && *pp != up)
			pp = &(*pp)->page_next;
		if (*pp)
			*pp = up->page_next;
	}
	lm_upreq_free_waiters(c, up->waiters);
	free(up->batch);
	free(up);
}

/* Appends a waiter (kept in arrival order).  0 or LM_ENOBUFS/LM_ENOMEM. */
int lm_upreq_wait(lm_lemuriad *c, struct upreq *up, uint16_t node,
		  uint32_t req_id, uint32_t need)
{
	struct waiter *w, **pp;

	if (c->nwaits >= c->max_waits)
		return LM_ENOBUFS;
	w = calloc(1, sizeof(*w));
	if (!w)
		return LM_ENOMEM;
	w->node = node;
	w->req_id = req_id;
	w->need = need;
	for (pp = &up->waiters; *pp; pp = &(*pp)->next)
		;
	*pp = w;
	c->nwaits++;
	return 0;
}

/* Creates an upstream request with one waiter.  0 or a negative code
 * (nothing created). */
int lm_upreq_start(lm_lemuriad *c, enum up_kind kind, uint16_t node,
		   uint32_t req_id, struct upreq **out)
{
	struct upreq *up;

	if (c->nwaits >= c->max_waits)
		return LM_ENOBUFS;
	up = lm_upreq_new(c, kind);
	if (!up)
		return LM_ENOMEM;
	if (lm_upreq_wait(c, up, node, req_id, 0) < 0) {
		lm_upreq_free(c, up);
		return LM_ENOMEM;
	}
	*out = up;
	return 0;
}
