/* A lemuriad's cluster deltas: see deltas.h and docs/dsm.md "Lazy,
 * adaptive and eager relay". */
#include "deltas.h"

#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "lm_error.h"
#include "log.h"

/* Entries of one REGISTER; the receiver decodes at most one notice per
 * page of the region. */
#define DELTAS_ENTRIES_MAX 8192u
/* Freed delta buffers kept for the next epoch's deltas, at most this many
 * (lm_deltas_keep_spares): taking a 4 KiB buffer and its mask from malloc
 * costs (docs/performance.md, "Figures behind the lemuriad's choices";
 * docs/dsm.md "Memory"). */
#define DELTAS_SPARE_MAX 1024u

struct pdelta {
	uint32_t page;
	struct pdelta *hnext;
	struct lm_delta open, reg, sealed;
	bool has_open, has_reg, has_sealed;
	uint32_t open_writer, reg_writer;
	uint32_t sealed_version;
	uint32_t pushed_version; /* last one pushed: a PULL of it is late */
};

struct lm_deltas {
	uint32_t page_size, npages, cluster;
	lm_deltas_emit_fn emit;
	void *ctx;
	struct pdelta **buckets;
	uint32_t bits;
	uint32_t *dirty;      /* pages with an open delta */
	size_t ndirty, dirty_cap;
	uint32_t *drops;      /* pages to name in LM_REG_DROP entries */
	size_t ndrops, drops_cap;
	size_t nbuf;          /* lm_delta buffers in use */
	struct lm_delta *spare; /* buffers kept for reuse (drop) */
	size_t nspare, spare_max;
	/* the REGISTER being built */
	struct lm_notice *entries;
	uint32_t nentries, entries_max;
	uint8_t *data;
	size_t data_len, data_cap;
	uint32_t data_count;
	uint8_t *enc;         /* one encoded delta */
	size_t enc_cap;
	bool adaptive;
	uint8_t *shared;      /* adaptive: per page, registrations left
				 that go with their data since a home
				 last pulled it (0: lazy) */
	int emitted;
	struct lm_deltas_stats stats;
};

static size_t bucket(const lm_deltas *d, uint32_t page)
{
	return (size_t)((page * 2654435761u) >> (32 - d->bits));
}

static struct pdelta *find(const lm_deltas *d, uint32_t page)
{
	struct pdelta *p = d->buckets[bucket(d, page)];

	while (p && p->page != page)
		p = p->hnext;
	return p;
}

static struct pdelta *find_or_add(lm_deltas *d, uint32_t page)
{
	struct pdelta *p = find(d, page);
	size_t b;

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->page = page;
	b = bucket(d, page);
	p->hnext = d->buckets[b];
	d->buckets[b] = p;
	return p;
}

static void drop(lm_deltas *d, struct lm_delta *x, bool *has)
{
	if (!*has)
		return;
	if (d->nspare < d->spare_max)
		d->spare[d->nspare++] = *x;
	else
		lm_delta_free(x);
	d->nbuf--;
	*has = false;
}

/* An empty delta in x: a kept buffer, emptied and zeroed as a new one
 * would be (no stale bytes on the wire), else a new one. */
static int take_buffer(lm_deltas *d, struct lm_delta *x)
{
	if (d->nspare == 0)
		return lm_delta_init(x, d->page_size);
	*x = d->spare[--d->nspare];
	lm_delta_reset(x);
	memset(x->bytes, 0, d->page_size);
	return 0;
}

/* Frees the page's entry once it holds nothing. */
static void tidy(lm_deltas *d, struct pdelta *p)
{
	struct pdelta **pp;

	if (p->has_open || p->has_reg || p->has_sealed)
		return;
	pp = &d->buckets[bucket(d, p->page)];
	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	free(p);
}

lm_deltas *lm_deltas_create(uint32_t page_size, uint32_t npages,
			    uint32_t cluster, bool adaptive,
			    lm_deltas_emit_fn emit, void *ctx)
{
	lm_deltas *d = calloc(1, sizeof(*d));
	uint32_t want = npages < 65536 ? npages : 65536;

	if (!d || !emit || page_size == 0)
		goto err;
	d->page_size = page_size;
	d->npages = npages;
	d->cluster = cluster;
	d->emit = emit;
	d->ctx = ctx;
	d->adaptive = adaptive;
	d->bits = 4;
	while ((1u << d->bits) < want)
		d->bits++;
	d->entries_max = npages < DELTAS_ENTRIES_MAX ? npages :
			 DELTAS_ENTRIES_MAX;
	if (d->entries_max == 0)
		d->entries_max = 1;
	d->spare = calloc(DELTAS_SPARE_MAX, sizeof(*d->spare));
	d->enc_cap = lm_diff_bound(page_size);
	d->buckets = calloc((size_t)1 << d->bits, sizeof(*d->buckets));
	d->entries = calloc(d->entries_max, sizeof(*d->entries));
	d->enc = malloc(d->enc_cap);
	d->shared = calloc(npages ? npages : 1, 1);
	if (!d->spare || !d->buckets || !d->entries || !d->enc || !d->shared)
		goto err;
	return d;
err:
	lm_deltas_destroy(d);
	return NULL;
}

void lm_deltas_reset(lm_deltas *d)
{
	for (size_t b = 0; b < ((size_t)1 << d->bits); b++) {
		while (d->buckets[b]) {
			struct pdelta *p = d->buckets[b];

			d->buckets[b] = p->hnext;
			drop(d, &p->open, &p->has_open);
			drop(d, &p->reg, &p->has_reg);
			drop(d, &p->sealed, &p->has_sealed);
			free(p);
		}
	}
	d->ndirty = 0;
	d->ndrops = 0;
	d->nentries = 0;
	d->data_len = 0;
	d->data_count = 0;
	memset(d->shared, 0, d->npages);
}

void lm_deltas_destroy(lm_deltas *d)
{
	if (!d)
		return;
	if (d->buckets)
		lm_deltas_reset(d);
	while (d->spare && d->nspare)
		lm_delta_free(&d->spare[--d->nspare]);
	free(d->spare);
	free(d->buckets);
	free(d->dirty);
	free(d->drops);
	free(d->entries);
	free(d->data);
	free(d->enc);
	free(d->shared);
	free(d);
}

struct lm_delta *lm_deltas_open(lm_deltas *d, uint32_t page, uint32_t rank)
{
	struct pdelta *p = find_or_add(d, page);

	if (!p)
		return NULL;
	if (!p->has_open) {
		if (d->ndirty == d->dirty_cap) {
			size_t cap = d->dirty_cap ? d->dirty_cap * 2 : 64;
			uint32_t *nd = realloc(d->dirty, cap * sizeof(*nd));

			if (!nd) {
				tidy(d, p);
				return NULL;
			}
			d->dirty = nd;
			d->dirty_cap = cap;
		}
		if (take_buffer(d, &p->open) < 0) {
			tidy(d, p);
			return NULL;
		}
		d->nbuf++;
		p->has_open = true;
		p->open_writer = rank;
		d->dirty[d->ndirty++] = page;
	}
	if (p->open_writer != rank)
		p->open_writer = LM_WRITER_MANY;
	return &p->open;
}

void lm_deltas_keep_spares(lm_deltas *d, size_t n)
{
	d->spare_max = n < DELTAS_SPARE_MAX ? n : DELTAS_SPARE_MAX;
	while (d->nspare > d->spare_max)
		lm_delta_free(&d->spare[--d->nspare]);
}

size_t lm_deltas_spares(const lm_deltas *d)
{
	return d->nspare;
}

size_t lm_deltas_dirty(const lm_deltas *d)
{
	return d->ndirty + d->ndrops;
}

void lm_deltas_forget(lm_deltas *d, uint32_t page)
{
	struct pdelta *p = find(d, page);

	if (!p)
		return;
	/* an open delta stays listed in dirty; the seal skips it */
	drop(d, &p->open, &p->has_open);
	drop(d, &p->reg, &p->has_reg);
	drop(d, &p->sealed, &p->has_sealed);
	tidy(d, p);
	d->stats.deltas_forgotten++;
}

int lm_deltas_drop(lm_deltas *d, uint32_t page)
{
	if (d->ndrops == d->drops_cap) {
		size_t cap = d->drops_cap ? d->drops_cap * 2 : 64;
		uint32_t *nd = realloc(d->drops, cap * sizeof(*nd));

		if (!nd)
			return LM_ENOMEM;
		d->drops = nd;
		d->drops_cap = cap;
	}
	d->drops[d->ndrops++] = page;
	return 0;
}

size_t lm_deltas_buffers(const lm_deltas *d)
{
	return d->nbuf;
}

bool lm_deltas_has(const lm_deltas *d, uint32_t page)
{
	return find(d, page) != NULL;
}

const struct lm_deltas_stats *lm_deltas_stats(const lm_deltas *d)
{
	return &d->stats;
}

/* ---- building REGISTERs ----------------------------------------------- */

static void flush_msg(lm_deltas *d)
{
	struct lm_msg m;

	if (!d->nentries)
		return;
	memset(&m, 0, sizeof(m));
	m.type = LM_MSG_REGISTER;
	m.notices = d->entries;
	m.nnotices = d->nentries;
	m.diffs.data = d->data;
	m.diffs.len = d->data_len;
	m.diffs.count = d->data_count;
	d->emit(d->ctx, &m);
	d->emitted++;
	d->nentries = 0;
	d->data_len = 0;
	d->data_count = 0;
}

/* Adds an entry, with x's data unless x is NULL.  Cannot fail but for
 * memory, which is logged: the data would be lost, so say which. */
static void add_entry(lm_deltas *d, uint32_t page, uint32_t kind,
		      uint32_t version, uint32_t writer,
		      const struct lm_delta *x)
{
	struct lm_notice *e;

	if (x) {
		size_t len = 0, need;

		(void)lm_delta_encode(x, d->enc, d->enc_cap, &len);
		need = d->data_len + 8 + len;
		if (need > d->data_cap) {
			size_t cap = need + LM_DELTAS_MSG_DATA / 4;
			uint8_t *nd = realloc(d->data, cap);

			if (!nd) {
				lm_log_error("deltas: no memory to send the "
					     "delta of page %u", page);
				return;
			}
			d->data = nd;
			d->data_cap = cap;
		}
		(void)lm_msg_diffs_append(d->data, d->data_cap, &d->data_len,
					  page, d->enc, len);
		d->data_count++;
		d->stats.delta_bytes_sent += len;
	}
	e = &d->entries[d->nentries++];
	e->page = page;
	e->version = version;
	e->base = kind;
	e->writer = writer;
	e->wcluster = d->cluster;
	if (d->nentries == d->entries_max ||
	    d->data_len >= LM_DELTAS_MSG_DATA)
		flush_msg(d);
}

static void push_sealed(lm_deltas *d, struct pdelta *p)
{
	add_entry(d, p->page, LM_REG_PUSH, p->sealed_version, LM_WRITER_MANY,
		  &p->sealed);
	p->pushed_version = p->sealed_version;
	drop(d, &p->sealed, &p->has_sealed);
	d->stats.deltas_pushed++;
}

int lm_deltas_seal(lm_deltas *d, bool with_data, bool all_sealed)
{
	d->emitted = 0;
	for (size_t i = 0; i < d->ndirty; i++) {
		struct pdelta *p = find(d, d->dirty[i]);

		if (!p || !p->has_open || p->has_reg)
			continue; /* cannot happen: one batch at a time */
		p->reg = p->open;
		p->has_reg = true;
		p->reg_writer = p->open_writer;
		memset(&p->open, 0, sizeof(p->open));
		p->has_open = false;
		d->stats.deltas_registered++;
		if (!with_data && d->adaptive && p->page < d->npages &&
		    d->shared[p->page]) {
			d->shared[p->page]--;
			d->stats.deltas_sent_shared++;
		} else if (!with_data) {
			add_entry(d, p->page, LM_REG_NEW,
				  p->has_sealed ? p->sealed_version : 0,
				  p->reg_writer, NULL);
			continue;
		}
		if (p->has_sealed)
			push_sealed(d, p);
		add_entry(d, p->page, LM_REG_DATA, 0, p->reg_writer, &p->reg);
		drop(d, &p->reg, &p->has_reg);
		d->stats.deltas_sent_data++;
		tidy(d, p);
	}
	d->ndirty = 0;
	for (size_t i = 0; i < d->ndrops; i++)
		add_entry(d, d->drops[i], LM_REG_DROP, 0, LM_WRITER_MANY, NULL);
	d->ndrops = 0;
	if (with_data && all_sealed) {
		for (size_t b = 0; b < ((size_t)1 << d->bits); b++) {
			struct pdelta *p = d->buckets[b], *next;

			for (; p; p = next) {
				next = p->hnext;
				if (!p->has_sealed)
					continue;
				push_sealed(d, p);
				tidy(d, p);
			}
		}
	}
	flush_msg(d);
	return d->emitted;
}

void lm_deltas_registered(lm_deltas *d, const struct lm_notice *n,
			  uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		struct pdelta *p = find(d, n[i].page);

		if (!p || !p->has_reg)
			continue; /* sent with its data, or pulled already */
		if (p->has_sealed && n[i].version == p->sealed_version + 1) {
			/* the home merged them: nobody wrote in between */
			(void)lm_delta_merge(&p->sealed, &p->reg);
			drop(d, &p->reg, &p->has_reg);
			p->sealed_version = n[i].version;
			d->stats.deltas_merged++;
			continue;
		}
		if (p->has_sealed)
			push_sealed(d, p); /* someone wrote in between (I1) */
		p->sealed = p->reg;
		p->has_sealed = true;
		p->sealed_version = n[i].version;
		memset(&p->reg, 0, sizeof(p->reg));
		p->has_reg = false;
	}
	d->emitted = 0;
	flush_msg(d);
}

int lm_deltas_pull(lm_deltas *d, uint32_t page, uint32_t version,
		   uint8_t *out, size_t cap, size_t *len)
{
	struct pdelta *p = find(d, page);
	struct lm_delta *x = NULL;

	if (p && p->has_sealed && p->sealed_version == version) {
		x = &p->sealed;
	} else if (p && p->has_sealed && p->has_reg &&
		   version == p->sealed_version + 1) {
		/* merged at the home; its answer is still on its way */
		(void)lm_delta_merge(&p->sealed, &p->reg);
		drop(d, &p->reg, &p->has_reg);
		x = &p->sealed;
	} else if (p && p->has_reg && version != p->pushed_version &&
		   (!p->has_sealed || version > p->sealed_version + 1)) {
		/* registered apart; its answer is still on its way */
		x = &p->reg;
	}
	if (!x) {
		d->stats.deltas_pull_missing++;
		return LM_ENOENT;
	}
	if (lm_delta_encode(x, out, cap, len) < 0)
		return LM_ENOBUFS;
	d->stats.delta_bytes_sent += *len;
	d->stats.deltas_pulled++;
	if (page < d->npages)
		d->shared[page] = LM_DELTAS_SHARED_SENDS;
	if (x == &p->sealed)
		drop(d, &p->sealed, &p->has_sealed);
	else
		drop(d, &p->reg, &p->has_reg);
	tidy(d, p);
	return 0;
}

void lm_deltas_overlay(const lm_deltas *d, uint32_t page, uint32_t version,
		       uint8_t *page_data)
{
	const struct pdelta *p = find(d, page);

	if (!p)
		return;
	if (p->has_sealed && p->sealed_version > version)
		lm_delta_apply_to(&p->sealed, page_data);
	if (p->has_reg)
		lm_delta_apply_to(&p->reg, page_data);
	if (p->has_open)
		lm_delta_apply_to(&p->open, page_data);
}
