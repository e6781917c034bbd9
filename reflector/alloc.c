/* The allocator of the shared region and of lock and barrier ids
 * (docs/dsm.md, "Allocation"); the layout's first reflector runs it.  A
 * role: calls nothing else of reflector/. */
#include "reflector_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"

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

long lm_alloc_request(lm_home *h, uint16_t from, uint32_t req_id,
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
	return 0;
}

long lm_alloc_free(lm_home *h, uint16_t from, uint32_t req_id,
		   const struct lm_msg *m)
{
	struct lm_msg r = msg_new(h, LM_MSG_FREE_OK);

	r.status = free_mem(h, m->offset);
	h->out.reply(h->ctx, from, req_id, &r);
	return 0;
}

int lm_alloc_init(lm_home *h)
{
	if (vec_reserve(&h->free_list, 16) < 0 ||
	    vec_reserve(&h->used, 16) < 0)
		return LM_ENOMEM;
	return 0;
}

/* Cannot fail: the free list's room for one extent was reserved by
 * lm_alloc_init. */
void lm_alloc_reset(lm_home *h)
{
	h->used.n = 0;
	h->free_list.n = 1;
	h->free_list.v[0].off = 0;
	/* The last page is the runtime's (lm_distribute), never handed out. */
	h->free_list.v[0].len = h->layout->shared_size - h->layout->page_size;
	for (size_t k = 0; k < LM_HOME_ID_KINDS; k++)
		h->next_id[k] = 1;
}

void lm_alloc_destroy(lm_home *h)
{
	free(h->free_list.v);
	free(h->used.v);
}
