/* Barrier updates: copysets, epoch masks and the per-client lists (see
 * updates.h and docs/dsm.md "Updates"). */
#include "updates.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "lm_error.h"

/* The bytes one client slot wrote to a page in the epoch. */
struct wmask {
	struct wmask *next;
	uint32_t slot;
	struct lm_delta d;  /* mask and dirty only; bytes NULL */
	size_t ahead_off, ahead_len; /* its update encoded ahead, when its
					page's ahead.ok */
};

/* A page whose writers' updates were encoded ahead of the release, from
 * the copy `copy` while its tag was `tag`. */
struct ahead {
	const uint8_t *copy;
	uint64_t tag;
	bool ok; /* cleared by a FLUSH of the page after it */
};

/* A writer of a prepared page, its slot beside it: a release looks up
 * each client among a page's writers, and scanning slots in a row beats
 * chasing the list's nodes, a cache miss each. */
struct writer {
	const struct wmask *w;
	uint32_t slot;
};

/* One page's prepared update: the bytes every writer wrote, encoded at
 * [off, off + len) of the arena, and what a writer needs to leave its
 * own bytes out. */
struct prepared {
	size_t off, len;
	const uint8_t *copy;    /* the lemuriad's copy: the values */
	uint32_t wfirst, nw;    /* the page's writers here: writers[wfirst..
				   wfirst + nw) */
	const uint64_t *foreign; /* bytes other clusters changed, or NULL */
	bool ok;
	bool ahead; /* the writers' updates encoded ahead still hold */
};

struct lm_updates {
	uint32_t page_size, npages, nclients;
	size_t mask_words;        /* per page mask */
	size_t held_words;        /* per client bitmap */
	uint64_t *held;           /* nclients bitmaps of npages bits */
	uint8_t *idle;            /* per client and page: updates in a row
				     the client took without using the page */
	struct wmask **masks;     /* per page, its writers; NULL if none */
	uint64_t *wfilter;        /* per page, bit slot % 64 set for each
				     writer: most FLUSHes find their slot
				     new and skip the walk */
	struct wmask *spare;      /* masks of past epochs, for reuse (no
				     more than the budget allowed) */
	uint32_t *written;        /* pages with a mask, in order */
	size_t nwritten;
	size_t mask_budget, mask_bytes;
	size_t arena_budget;      /* bytes of encoded updates per release */
	size_t list_max;          /* bytes of one client's list */
	bool overflow;            /* a mask was refused this epoch */
	uint8_t *arena;           /* encoded updates of the release */
	size_t arena_cap, arena_len;
	struct prepared *prep;    /* per notice of the release */
	size_t prep_cap;
	uint64_t *foreign;        /* masks of the release's fetched pages */
	size_t foreign_cap;       /* in masks */
	uint32_t nprep;
	struct writer *writers;   /* the prepared pages' writers */
	size_t nwriters, writers_cap;
	struct writer *gather;    /* one page's writers, ahead (nclients
				     entries) */
	uint8_t *list;            /* one client's list */
	size_t list_cap;
	struct ahead *ahead;      /* per page */
	uint8_t *ahead_arena;     /* the updates encoded ahead (no more
				     than arena_budget) */
	size_t ahead_cap, ahead_len;
	size_t ahead_next;        /* in written: the next page to encode */
	struct lm_delta others;   /* the other writers' bytes, for one */
	struct lm_updates_stats stats;
};

static size_t page_mask_words(uint32_t page_size)
{
	return ((size_t)page_size + 63) / 64;
}

lm_updates *lm_updates_create(uint32_t page_size, uint32_t npages,
			      uint32_t nclients, size_t mask_budget)
{
	lm_updates *u;

	if (page_size == 0 || npages == 0)
		return NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->page_size = page_size;
	u->npages = npages;
	u->nclients = nclients;
	u->mask_words = page_mask_words(page_size);
	u->held_words = ((size_t)npages + 63) / 64;
	u->mask_budget = mask_budget;
	u->arena_budget = mask_budget;
	u->list_max = mask_budget < LM_UPDATES_CLIENT_MIN ? LM_UPDATES_CLIENT_MIN
		      : mask_budget > LM_UPDATES_CLIENT_MAX ? LM_UPDATES_CLIENT_MAX
							    : mask_budget;
	u->held = calloc(u->held_words * (nclients ? nclients : 1),
			 sizeof(*u->held));
	u->idle = calloc((size_t)npages * (nclients ? nclients : 1),
			 sizeof(*u->idle));
	u->masks = calloc(npages, sizeof(*u->masks));
	u->wfilter = calloc(npages, sizeof(*u->wfilter));
	u->gather = malloc((nclients ? nclients : 1) * sizeof(*u->gather));
	u->written = malloc(npages * sizeof(*u->written));
	u->ahead = calloc(npages, sizeof(*u->ahead));
	if (!u->held || !u->idle || !u->masks || !u->wfilter || !u->gather ||
	    !u->written || !u->ahead ||
	    lm_delta_init(&u->others, page_size) < 0) {
		lm_updates_destroy(u);
		return NULL;
	}
	return u;
}

void lm_updates_epoch_end(lm_updates *u)
{
	for (size_t i = 0; i < u->nwritten; i++) {
		struct wmask *w = u->masks[u->written[i]];

		while (w) {
			struct wmask *next = w->next;

			w->next = u->spare;
			u->spare = w;
			w = next;
		}
		u->masks[u->written[i]] = NULL;
		u->wfilter[u->written[i]] = 0;
		u->ahead[u->written[i]].ok = false;
	}
	u->nwritten = 0;
	u->ahead_len = 0;
	u->ahead_next = 0;
	u->mask_bytes = 0;
	u->overflow = false;
	u->nprep = 0;
	u->arena_len = 0;
}

void lm_updates_destroy(lm_updates *u)
{
	if (!u)
		return;
	if (u->masks && u->written)
		lm_updates_epoch_end(u);
	while (u->spare) {
		struct wmask *w = u->spare;

		u->spare = w->next;
		free(w);
	}
	free(u->held);
	free(u->idle);
	free(u->masks);
	free(u->wfilter);
	free(u->writers);
	free(u->gather);
	free(u->written);
	free(u->arena);
	free(u->prep);
	free(u->foreign);
	free(u->list);
	free(u->ahead);
	free(u->ahead_arena);
	lm_delta_free(&u->others);
	free(u);
}

void lm_updates_reset(lm_updates *u)
{
	lm_updates_epoch_end(u);
	memset(u->held, 0,
	       u->held_words * (u->nclients ? u->nclients : 1) *
		       sizeof(*u->held));
	memset(u->idle, 0,
	       (size_t)u->npages * (u->nclients ? u->nclients : 1) *
		       sizeof(*u->idle));
}

static uint64_t *held_word(const lm_updates *u, uint32_t slot, uint32_t page)
{
	return &u->held[(size_t)slot * u->held_words + page / 64];
}

/* Per client and page: the updates taken in a row without a FLUSH or
 * FETCH of the page (low bits), whether the copy was dropped for it, and
 * whether the client fetched the page again after such a drop: it reads
 * the page, and its copy may wait LM_UPDATES_IDLE_MAX updates for a
 * fetch from another cluster, not LM_UPDATES_FETCH_IDLE_MAX. */
#define IDLE_COUNT 0x3f
#define IDLE_READER 0x40
#define IDLE_DROPPED 0x80

static uint8_t *idle_of(const lm_updates *u, uint32_t slot, uint32_t page)
{
	return &u->idle[(size_t)slot * u->npages + page];
}

/* One more update taken idle; returns the count. */
static unsigned idle_more(uint8_t *idle)
{
	if ((*idle & IDLE_COUNT) < IDLE_COUNT)
		(*idle)++;
	return *idle & IDLE_COUNT;
}

/* How many idle updates a copy may take that another cluster's write
 * makes the lemuriad fetch. */
static unsigned fetch_idle_max(uint8_t idle)
{
	return idle & IDLE_READER ? LM_UPDATES_IDLE_MAX
				  : LM_UPDATES_FETCH_IDLE_MAX;
}

void lm_updates_hold(lm_updates *u, uint32_t slot, uint32_t page)
{
	if (slot < u->nclients && page < u->npages) {
		uint8_t *idle = idle_of(u, slot, page);

		*held_word(u, slot, page) |= 1ull << (page % 64);
		*idle = *idle & (IDLE_READER | IDLE_DROPPED) ? IDLE_READER : 0;
	}
}

static bool holds(const lm_updates *u, uint32_t slot, uint32_t page)
{
	return (*held_word(u, slot, page) >> (page % 64)) & 1;
}

static void forget(lm_updates *u, uint32_t slot, uint32_t page)
{
	*held_word(u, slot, page) &= ~(1ull << (page % 64));
}

/* An empty mask, from the spares when there are some. */
static struct wmask *new_wmask(lm_updates *u, size_t bytes)
{
	struct wmask *w = u->spare;

	if (!w)
		return calloc(1, bytes);
	u->spare = w->next;
	memset(w, 0, bytes);
	return w;
}

struct lm_delta *lm_updates_writer_mask(lm_updates *u, uint32_t page,
					uint32_t slot)
{
	struct wmask *w = NULL;
	size_t bytes = sizeof(*w) + u->mask_words * sizeof(uint64_t);
	uint64_t bit = 1ull << (slot % 64);

	if (page >= u->npages || u->overflow)
		return NULL;
	if (slot >= u->nclients) {
		u->overflow = true; /* its bytes would be missing: no updates */
		return NULL;
	}
	u->ahead[page].ok = false; /* a FLUSH changes what the others get */
	if (u->wfilter[page] & bit)
		for (w = u->masks[page]; w && w->slot != slot; w = w->next)
			;
	if (!w) {
		if (u->mask_bytes + bytes > u->mask_budget ||
		    !(w = new_wmask(u, bytes))) {
			u->overflow = true;
			u->stats.mask_overflows++;
			return NULL;
		}
		w->slot = slot;
		w->d.page_size = u->page_size;
		w->d.mask = (uint64_t *)(w + 1);
		if (!u->masks[page])
			u->written[u->nwritten++] = page;
		w->next = u->masks[page];
		u->masks[page] = w;
		u->wfilter[page] |= bit;
		u->mask_bytes += bytes;
	}
	return &w->d;
}

/* into = the bytes other clusters changed (foreign, may be NULL) and
 * those of the nw writers ws other than `skip` (may be NULL); into is
 * u->others (or a copy of its header).  Only the mask is set: into feeds
 * lm_delta_encode, which reads nothing else, and counting its bits cost
 * more than the union (it runs per client and page at every release). */
static void union_of(lm_updates *u, struct lm_delta *into,
		     const uint64_t *foreign, const struct writer *ws,
		     uint32_t nw, const struct wmask *skip)
{
	uint64_t *m = into->mask;
	size_t n = u->mask_words;
	bool empty = !foreign;

	if (foreign)
		memcpy(m, foreign, n * sizeof(*m));
	for (uint32_t i = 0; i < nw; i++) {
		const uint64_t *wm = ws[i].w->d.mask;

		if (ws[i].w == skip)
			continue;
		if (empty) {
			memcpy(m, wm, n * sizeof(*m));
			empty = false;
			continue;
		}
		for (size_t k = 0; k < n; k++)
			m[k] |= wm[k];
	}
	if (empty)
		memset(m, 0, n * sizeof(*m));
}

/* One bit per byte of two 8-byte words (bit k: byte k in memory order,
 * little-endian) that is set where the bytes differ. */
static unsigned bytes_differ(uint64_t x, uint64_t y)
{
	uint64_t t;

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
	y = __builtin_bswap64(y);
#endif
	t = x ^ y;
	/* the top bit of each byte: set when the byte is not zero */
	uint64_t m = (((t & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) |
		      t) & 0x8080808080808080ull;

	/* gathers the eight top bits into the top byte, byte 0 lowest */
	return (unsigned)(((m >> 7) * 0x0102040810204080ull) >> 56);
}

/* Sets in mask the bytes where a and b differ (page_size bytes each, a
 * multiple of 8 as every page size is). */
static void mark_changes(uint64_t *mask, const uint8_t *a, const uint8_t *b,
			 size_t page_size)
{
	for (size_t off = 0; off + 8 <= page_size; off += 8) {
		uint64_t x, y;

		memcpy(&x, a + off, 8);
		memcpy(&y, b + off, 8);
		if (x != y)
			mask[off / 64] |= (uint64_t)bytes_differ(x, y)
					  << (off % 64);
	}
}

/* The entry of `slot` among p's writers, or NULL. */
static const struct wmask *writer_of(const lm_updates *u,
				     const struct prepared *p, uint32_t slot)
{
	for (uint32_t i = p->wfirst; i < p->wfirst + p->nw; i++)
		if (u->writers[i].slot == slot)
			return u->writers[i].w;
	return NULL;
}

/* Bytes to offer an encoding at `used` of a buffer limited to `limit`:
 * its worst case `bound`, or less near the limit (0: none left). */
static size_t room(size_t bound, size_t used, size_t limit)
{
	if (used >= limit)
		return 0;
	return limit - used < bound ? limit - used : bound;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
	size_t ncap = *cap ? *cap : 65536;
	uint8_t *nb;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	nb = realloc(*buf, ncap);
	if (!nb)
		return LM_ENOMEM;
	*buf = nb;
	*cap = ncap;
	return 0;
}

bool lm_updates_encode_ahead(lm_updates *u, lm_updates_copy_fn copy_of,
			     void *ctx, uint32_t max_pages)
{
	for (uint32_t done = 0; done < max_pages && !u->overflow &&
				u->ahead_next < u->nwritten;
	     done++) {
		uint32_t page = u->written[u->ahead_next++];
		struct wmask *first = u->masks[page];
		size_t start = u->ahead_len, nw = 0;
		const uint8_t *copy;
		uint64_t tag;

		/* a sole writer here gets other clusters' bytes at most,
		 * which only the release tells */
		if (!first || !first->next ||
		    !(copy = copy_of(ctx, page, &tag)))
			continue;
		for (struct wmask *w = first; w; w = w->next)
			u->gather[nw++] = (struct writer){ w, w->slot };
		for (struct wmask *w = first; w; w = w->next) {
			struct lm_delta view = u->others;
			size_t len, bound = room(lm_diff_bound(u->page_size),
						 u->ahead_len,
						 u->arena_budget);

			union_of(u, &view, NULL, u->gather, (uint32_t)nw, w);
			view.bytes = (uint8_t *)copy;
			if (!bound ||
			    reserve(&u->ahead_arena, &u->ahead_cap,
				    u->ahead_len + bound) < 0 ||
			    lm_delta_encode(&view,
					    u->ahead_arena + u->ahead_len,
					    bound, &len) < 0) {
				/* full: the rest waits for the release */
				u->ahead_len = start;
				u->ahead_next = u->nwritten;
				return false;
			}
			w->ahead_off = u->ahead_len;
			w->ahead_len = len;
			u->ahead_len += len;
		}
		u->ahead[page] = (struct ahead){ copy, tag, true };
	}
	return !u->overflow && u->ahead_next < u->nwritten;
}

/* Appends w to the prepared pages' writers. */
static int add_writer(lm_updates *u, const struct wmask *w)
{
	if (u->nwriters == u->writers_cap) {
		size_t ncap = u->writers_cap ? 2 * u->writers_cap : 256;
		struct writer *nw = realloc(u->writers, ncap * sizeof(*nw));

		if (!nw)
			return LM_ENOMEM;
		u->writers = nw;
		u->writers_cap = ncap;
	}
	u->writers[u->nwriters++] = (struct writer){ w, w->slot };
	return 0;
}

int lm_updates_prepare(lm_updates *u, const struct lm_notice *n,
		       uint32_t count, const uint8_t *const *copies,
		       const uint8_t *const *olds,
		       const uint64_t *const *known, const uint64_t *tags)
{
	size_t nforeign = 0;

	u->nprep = 0;
	u->arena_len = 0;
	if (u->overflow || count == 0)
		return 0;
	if (count > u->prep_cap) {
		struct prepared *np = realloc(u->prep, count * sizeof(*np));

		if (!np)
			return LM_ENOMEM;
		u->prep = np;
		u->prep_cap = count;
	}
	for (uint32_t i = 0; olds && i < count; i++)
		nforeign += copies[i] && olds[i];
	if (nforeign > u->foreign_cap) {
		uint64_t *nf = realloc(u->foreign, nforeign * u->mask_words *
							   sizeof(uint64_t));

		if (!nf)
			return LM_ENOMEM;
		u->foreign = nf;
		u->foreign_cap = nforeign;
	}
	nforeign = 0;
	u->nwriters = 0;
	for (uint32_t i = 0; i < count; i++) {
		struct prepared *p = &u->prep[i];
		uint32_t page = n[i].page;

		p->ok = false;
		p->foreign = NULL;
		if (!copies[i] || page >= u->npages ||
		    (!u->masks[page] && !(olds && olds[i])))
			continue;
		/* every writer's bytes, with the values of our copy; for a
		 * page fetched anew, also what changed since our old copy
		 * (the other clusters' writes) */
		p->copy = copies[i];
		p->wfirst = (uint32_t)u->nwriters;
		p->nw = 0;
		for (const struct wmask *w = u->masks[page]; w; w = w->next) {
			if (add_writer(u, w) < 0)
				return LM_ENOMEM;
			p->nw++;
		}
		if (olds && olds[i] && known && known[i]) {
			p->foreign = known[i];
		} else if (olds && olds[i]) {
			uint64_t *f = u->foreign + nforeign++ * u->mask_words;

			memset(f, 0, u->mask_words * sizeof(uint64_t));
			mark_changes(f, olds[i], copies[i], u->page_size);
			p->foreign = f;
		}
		p->off = SIZE_MAX; /* encoded when a client first needs it */
		/* the updates encoded ahead hold if no FLUSH came since, and
		 * the copy and its bytes are the ones they were made from */
		p->ahead = tags && !p->foreign && u->ahead[page].ok &&
			   u->ahead[page].copy == copies[i] &&
			   u->ahead[page].tag == tags[i];
		p->ok = true;
	}
	u->nprep = count;
	return 0;
}

/* The update of p's page for a client that wrote none of it: every
 * writer's bytes, encoded once into the arena; false when the arena is
 * full (I5: an eighth of the cache) or out of memory. */
static bool encode_all(lm_updates *u, struct prepared *p)
{
	struct lm_delta view;
	size_t len, bound;

	if (p->off != SIZE_MAX)
		return true;
	if (p->nw == 1 && !p->foreign) {
		view = u->writers[p->wfirst].w->d;
	} else {
		view = u->others;
		union_of(u, &view, p->foreign, u->writers + p->wfirst, p->nw,
			 NULL);
	}
	view.bytes = (uint8_t *)p->copy;
	/* encoded in one pass into room for the worst case, up to the
	 * budget: a diff that does not fit fails the encoding */
	bound = room(lm_diff_bound(u->page_size), u->arena_len,
		     u->arena_budget);
	if (!bound ||
	    reserve(&u->arena, &u->arena_cap, u->arena_len + bound) < 0 ||
	    lm_delta_encode(&view, u->arena + u->arena_len, bound, &len) < 0) {
		p->ok = false;
		return false;
	}
	p->off = u->arena_len;
	p->len = len;
	u->arena_len += len;
	return true;
}

/* Appends to the list the bytes of p's page that writers other than
 * `me` (one of p's writers) wrote: its own are in its copy.  Returns
 * their encoded length, or SIZE_MAX when they do not fit (nothing
 * appended). */
static size_t append_others(lm_updates *u, const struct prepared *p,
			    const struct wmask *me, uint32_t page,
			    size_t *len)
{
	struct lm_delta view = u->others;
	size_t ulen, bound, at = *len + LM_MSG_DIFFS_ENTRY_HDR;

	if (p->ahead) {
		ulen = me->ahead_len;
		if (at + ulen > u->list_max ||
		    reserve(&u->list, &u->list_cap, at + ulen) < 0 ||
		    lm_msg_diffs_append(u->list, u->list_cap, len, page,
					u->ahead_arena + me->ahead_off,
					ulen) < 0)
			return SIZE_MAX;
		u->stats.updates_ahead++;
		return ulen;
	}

	bound = room(lm_diff_bound(u->page_size), at, u->list_max);
	union_of(u, &view, p->foreign, u->writers + p->wfirst, p->nw, me);
	view.bytes = (uint8_t *)p->copy;
	if (!bound || reserve(&u->list, &u->list_cap, at + bound) < 0 ||
	    lm_delta_encode(&view, u->list + at, bound, &ulen) < 0)
		return SIZE_MAX;
	lm_msg_diffs_put_header(u->list + *len, page, ulen);
	*len = at + ulen;
	return ulen;
}

/* Appends to the list the update of p's page for a client that wrote
 * none of it.  Returns its encoded length, or SIZE_MAX when it does not
 * fit (nothing appended). */
static size_t append_all(lm_updates *u, struct prepared *p, uint32_t page,
			 size_t *len)
{
	size_t need;

	if (!encode_all(u, p))
		return SIZE_MAX;
	need = *len + LM_MSG_DIFFS_ENTRY_HDR + p->len;
	if (need > u->list_max ||
	    reserve(&u->list, &u->list_cap, need) < 0 ||
	    lm_msg_diffs_append(u->list, u->list_cap, len, page,
				u->arena + p->off, p->len) < 0)
		return SIZE_MAX;
	return p->len;
}

void lm_updates_for_client(lm_updates *u, uint32_t slot, uint32_t rank,
			   const struct lm_notice *n, uint32_t count,
			   struct lm_msg_diffs *out)
{
	size_t len = 0;
	uint32_t entries = 0;

	*out = (struct lm_msg_diffs){ NULL, 0, 0 };
	if (slot >= u->nclients)
		return;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t page = n[i].page;
		struct prepared *p = i < u->nprep ? &u->prep[i] : NULL;

		if (page >= u->npages || !holds(u, slot, page) ||
		    n[i].writer == rank)
			continue; /* nothing held, or its own copy kept */
		if (p && p->ok) {
			const struct wmask *me = writer_of(u, p, slot);
			size_t ulen;

			/* a copy its client neither wrote nor fetched again
			 * over LM_UPDATES_IDLE_MAX updates is likely unused:
			 * dropped, it stops costing updates here and fetches
			 * from other clusters (a read refetches it) */
			if (!me && idle_more(idle_of(u, slot, page)) >
					   LM_UPDATES_IDLE_MAX) {
				u->stats.updates_idle++;
				*idle_of(u, slot, page) |= IDLE_DROPPED;
				forget(u, slot, page);
				continue;
			}
			if (me)
				ulen = append_others(u, p, me, page, &len);
			else
				ulen = append_all(u, p, page, &len);
			if (ulen != SIZE_MAX) {
				entries++;
				u->stats.updates_sent++;
				u->stats.update_bytes += ulen;
				continue;
			}
			u->stats.updates_capped++;
		} else {
			uint8_t *idle = idle_of(u, slot, page);

			/* idle: the page was not fetched for it (wanted) */
			if ((*idle & IDLE_COUNT) >= fetch_idle_max(*idle)) {
				u->stats.updates_idle++;
				*idle |= IDLE_DROPPED;
			}
		}
		forget(u, slot, page); /* the client drops its copy */
	}
	*out = (struct lm_msg_diffs){ u->list, len, entries };
}

size_t lm_updates_list_max(const lm_updates *u)
{
	return u->list_max;
}

bool lm_updates_wanted(const lm_updates *u, uint32_t page)
{
	for (uint32_t s = 0; page < u->npages && s < u->nclients; s++)
		if (holds(u, s, page)) {
			uint8_t idle = *idle_of(u, s, page);

			if ((idle & IDLE_COUNT) < fetch_idle_max(idle))
				return true;
		}
	return false;
}

const struct lm_updates_stats *lm_updates_stats(const lm_updates *u)
{
	return &u->stats;
}
