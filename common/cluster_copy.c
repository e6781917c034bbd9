/* One copy per cluster: the shared object's geometry and the operations
 * of cluster_copy.h. */
#include "cluster_copy.h"

#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "diff.h"
#include "proto.h"
#include "lm_error.h"

static uint64_t round_up(uint64_t n, uint64_t to)
{
	return (n + to - 1) / to * to;
}

int lm_ccopy_geometry(uint32_t npages, uint32_t page_size,
		      struct lm_ccopy_hdr *out)
{
	uint64_t table, bits, region;

	if (npages == 0 || page_size < 4096 ||
	    (page_size & (page_size - 1)) != 0)
		return LM_EINVAL;
	memset(out, 0, sizeof(*out));
	out->magic = LM_CCOPY_MAGIC;
	out->page_size = page_size;
	out->npages = npages;
	table = round_up((uint64_t)npages * sizeof(struct lm_ccopy_entry),
			 page_size);
	bits = round_up(((uint64_t)npages + 63) / 64 * 8, page_size);
	region = (uint64_t)npages * page_size;
	out->table_off = page_size; /* after the header's page */
	out->twinned_off = out->table_off + table;
	out->pages_off = out->twinned_off + bits;
	out->twins_off = out->pages_off + region;
	out->size = out->twins_off + region;
	return 0;
}

void lm_ccopy_format(uint8_t *map, const struct lm_ccopy_hdr *geometry,
		     uint64_t run)
{
	struct lm_ccopy_hdr *h = (struct lm_ccopy_hdr *)map;

	/* the geometry is every field before the atomic one */
	memcpy(h, geometry, offsetof(struct lm_ccopy_hdr, drops));
	h->run = run;
	atomic_store(&h->drops, 0);
}

int lm_ccopy_attach(struct lm_ccopy *cc, uint8_t *map, uint64_t size,
		    uint32_t npages, uint32_t page_size)
{
	const struct lm_ccopy_hdr *h = (const struct lm_ccopy_hdr *)map;
	struct lm_ccopy_hdr want;

	memset(cc, 0, sizeof(*cc));
	cc->fd = -1; /* also when refused: the caller closes what it holds */
	if (lm_ccopy_geometry(npages, page_size, &want) ||
	    size < want.size || h->magic != LM_CCOPY_MAGIC ||
	    h->npages != npages || h->page_size != page_size ||
	    h->table_off != want.table_off ||
	    h->twinned_off != want.twinned_off ||
	    h->pages_off != want.pages_off ||
	    h->twins_off != want.twins_off || h->size != want.size)
		return LM_EINVAL;
	cc->map = map;
	cc->hdr = (struct lm_ccopy_hdr *)map;
	cc->table = (struct lm_ccopy_entry *)(map + h->table_off);
	cc->twinned = (_Atomic uint64_t *)(map + h->twinned_off);
	cc->pages = map + h->pages_off;
	cc->twins = map + h->twins_off;
	cc->page_size = page_size;
	cc->npages = npages;
	cc->size = h->size;
	return 0;
}

bool lm_ccopy_version(const struct lm_ccopy *cc, uint32_t page,
		      uint32_t *version)
{
	const struct lm_ccopy_entry *e = &cc->table[page];

	/* valid is set after the version and the data (release) */
	if (!atomic_load_explicit(&e->valid, memory_order_acquire))
		return false;
	*version = atomic_load_explicit(&e->version, memory_order_acquire);
	return true;
}

bool lm_ccopy_holds(const struct lm_ccopy *cc, uint32_t page, uint32_t need)
{
	uint32_t v;

	return lm_ccopy_version(cc, page, &v) && v >= need;
}

bool lm_ccopy_covers(const struct lm_ccopy *cc, const struct lm_notice *n,
		     uint32_t cluster)
{
	return lm_ccopy_holds(cc, n->page, n->version) ||
	       (n->wcluster == cluster && lm_ccopy_holds(cc, n->page, n->base));
}

bool lm_ccopy_lock(const struct lm_ccopy *cc, uint32_t page)
{
	struct lm_ccopy_entry *e = &cc->table[page];
	uint64_t start = 0;

	for (unsigned spins = 0;; spins++) {
		if (!atomic_exchange_explicit(&e->lock, 1,
					      memory_order_acquire))
			return true;
		if (spins < 64)
			continue;
		/* held across a copy of a page at most: yield, and give up
		 * only when its holder is surely gone */
		if (start == 0)
			start = lm_now_us();
		else if (lm_now_us() - start > LM_CCOPY_LOCK_WAIT_US)
			return false;
		sched_yield();
	}
}

void lm_ccopy_unlock(const struct lm_ccopy *cc, uint32_t page)
{
	atomic_store_explicit(&cc->table[page].lock, 0, memory_order_release);
}

static void set_twinned(const struct lm_ccopy *cc, uint32_t page, bool on)
{
	uint64_t bit = (uint64_t)1 << (page % 64);

	if (on)
		atomic_fetch_or_explicit(&cc->twinned[page / 64], bit,
					 memory_order_release);
	else
		atomic_fetch_and_explicit(&cc->twinned[page / 64], ~bit,
					  memory_order_release);
}

int lm_ccopy_twin(const struct lm_ccopy *cc, uint32_t page)
{
	if (lm_ccopy_writable(cc, page))
		return 0;
	if (!lm_ccopy_lock(cc, page))
		return LM_ETIMEDOUT;
	/* owned is set and cleared under the lock (lm_ccopy_own, _recall) */
	if (!lm_ccopy_writable(cc, page)) {
		memcpy(lm_ccopy_twin_of(cc, page), lm_ccopy_page(cc, page),
		       cc->page_size);
		/* the twin before the bit: the seal reads it after the bit */
		set_twinned(cc, page, true);
	}
	lm_ccopy_unlock(cc, page);
	return 0;
}

int lm_ccopy_own(const struct lm_ccopy *cc, uint32_t page)
{
	if (!lm_ccopy_lock(cc, page))
		return LM_ETIMEDOUT;
	/* no client writes an untwinned page, and each of its bytes came
	 * from a seal or an install: kept as a twin would be, for the recall
	 * to compare (a twinned page's twin is what its last seal read) */
	if (!lm_ccopy_is_twinned(cc, page))
		memcpy(lm_ccopy_twin_of(cc, page), lm_ccopy_page(cc, page),
		       cc->page_size);
	/* owned first: a client between its check and its lock (lm_ccopy_twin)
	 * then finds it and takes no twin the seal would compare */
	atomic_store_explicit(&cc->table[page].owned, 1, memory_order_release);
	set_twinned(cc, page, false);
	lm_ccopy_unlock(cc, page);
	return 0;
}

int lm_ccopy_recall(const struct lm_ccopy *cc, uint32_t page, uint8_t *snap,
		    bool *unwritten)
{
	int rc = 1;

	if (!lm_ccopy_lock(cc, page))
		return LM_ETIMEDOUT;
	if (lm_ccopy_is_owned(cc, page)) {
		/* one read of the live page: what is sent is what the twin
		 * holds, so a write made meanwhile goes with the next seal */
		memcpy(snap, lm_ccopy_page(cc, page), cc->page_size);
		*unwritten = memcmp(snap, lm_ccopy_twin_of(cc, page),
				    cc->page_size) == 0;
		if (!*unwritten)
			memcpy(lm_ccopy_twin_of(cc, page), snap,
			       cc->page_size);
		set_twinned(cc, page, true);
		atomic_store_explicit(&cc->table[page].owned, 0,
				      memory_order_release);
		rc = 0;
	}
	lm_ccopy_unlock(cc, page);
	return rc;
}

int lm_ccopy_forget(const struct lm_ccopy *cc, uint32_t page)
{
	if (!lm_ccopy_lock(cc, page))
		return LM_ETIMEDOUT;
	atomic_store_explicit(&cc->table[page].valid, 0, memory_order_release);
	set_twinned(cc, page, false);
	lm_ccopy_unlock(cc, page);
	return 0;
}

/* Copies into live and twin the bytes where data differs from the twin,
 * writing no other byte of live: a cluster-mate may be writing those.
 * A word's changed bytes go in with one compare-and-swap, so a reader
 * never sees half of a pointer that changed, and a cluster-mate's write
 * to the word's other bytes meanwhile is kept. */
static void merge_changed(uint8_t *live, uint8_t *twin, const uint8_t *data,
			  size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t a, b, mask = 0, old, want;
		uint64_t *word = (uint64_t *)(void *)(live + i);

		memcpy(&a, data + i, 8);
		memcpy(&b, twin + i, 8);
		if (a == b)
			continue;
		for (int k = 0; k < 8; k++)
			if ((uint8_t)(a >> (8 * k)) != (uint8_t)(b >> (8 * k)))
				mask |= (uint64_t)0xff << (8 * k);
		old = __atomic_load_n(word, __ATOMIC_RELAXED);
		do
			want = (old & ~mask) | (a & mask);
		while (!__atomic_compare_exchange_n(word, &old, want, true,
						    __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED));
		b = (b & ~mask) | (a & mask);
		memcpy(twin + i, &b, 8);
	}
}

/* A page the copy does not hold goes in through the object's descriptor
 * where there is one (the lemuriad's): the kernel copies it into the
 * object, where a copy through the mapping would first take a page fault,
 * and for a page new to the run clear the page it maps.  A page the copy
 * holds is mostly mapped already, and its copy needs no system call. */
static void copy_whole(const struct lm_ccopy *cc, uint32_t page,
		       const uint8_t *data)
{
	uint8_t *to = lm_ccopy_page(cc, page);

	if (cc->fd >= 0 &&
	    !atomic_load_explicit(&cc->table[page].valid,
				  memory_order_relaxed) &&
	    pwrite(cc->fd, data, cc->page_size, (off_t)(to - cc->map)) ==
		    (ssize_t)cc->page_size)
		return;
	memcpy(to, data, cc->page_size);
}

int lm_ccopy_install(const struct lm_ccopy *cc, uint32_t page,
		     uint32_t version, const uint8_t *data)
{
	struct lm_ccopy_entry *e = &cc->table[page];
	uint32_t have;

	if ((lm_ccopy_version(cc, page, &have) && have >= version) ||
	    lm_ccopy_is_owned(cc, page))
		return 1;
	if (!lm_ccopy_lock(cc, page))
		return LM_ETIMEDOUT;
	if (lm_ccopy_is_owned(cc, page)) {
		/* its writes are tracked by nobody: never copied over */
		lm_ccopy_unlock(cc, page);
		return 1;
	}
	if (lm_ccopy_is_twinned(cc, page))
		merge_changed(lm_ccopy_page(cc, page),
			      lm_ccopy_twin_of(cc, page), data, cc->page_size);
	else
		copy_whole(cc, page, data);
	atomic_store_explicit(&e->version, version, memory_order_release);
	atomic_store_explicit(&e->valid, 1, memory_order_release);
	lm_ccopy_unlock(cc, page);
	return 0;
}

void lm_ccopy_advance(const struct lm_ccopy *cc, uint32_t page,
		      uint32_t base, uint32_t version)
{
	uint32_t have;

	if (lm_ccopy_version(cc, page, &have) && have >= base &&
	    version > have)
		atomic_store_explicit(&cc->table[page].version, version,
				      memory_order_release);
}

size_t lm_ccopy_seal_buf_size(uint32_t page_size)
{
	return page_size + lm_diff_bound(page_size);
}

/* Where the seal of one instant reads the copy: every page's number
 * (list, dirty: room for all), and the bytes of nsnaps dirty ones. */
struct seal_room {
	uint32_t *list;
	bool *dirty;
	uint8_t *snaps;
	uint32_t nsnaps;
};

/* The twinned pages into room->list, each dirty one's bytes read into
 * room->snaps (in order; dirty[i] says which): one pass; how many.
 * *ndirty: how many were dirty, more than room->nsnaps when clients
 * wrote pages faster than the room grew (then only the list is whole). */
static uint32_t collect(const struct lm_ccopy *cc, struct seal_room *room,
			uint64_t *bits_seen, uint32_t *ndirty)
{
	uint32_t words = (cc->npages + 63) / 64, n = 0, nd = 0;

	for (uint32_t w = 0; w < words; w++) {
		uint64_t bits = atomic_load_explicit(&cc->twinned[w],
						     memory_order_acquire);

		bits_seen[w] = bits;
		while (bits) {
			uint32_t page = w * 64 + (uint32_t)__builtin_ctzll(bits);
			uint8_t *live = lm_ccopy_page(cc, page);

			bits &= bits - 1;
			room->list[n] = page;
			room->dirty[n] = memcmp(live, lm_ccopy_twin_of(cc, page),
						cc->page_size) != 0;
			if (room->dirty[n] && nd < room->nsnaps)
				memcpy(room->snaps + (size_t)nd * cc->page_size,
				       live, cc->page_size);
			nd += room->dirty[n];
			n++;
		}
	}
	*ndirty = nd;
	return n;
}

/* Whether nothing changed since collect: the same pages twinned, each
 * as it was read (a clean one still equal to its twin). */
static bool unchanged(const struct lm_ccopy *cc, const struct seal_room *room,
		      uint32_t n, const uint64_t *bits_seen, uint64_t *reads)
{
	uint32_t words = (cc->npages + 63) / 64, nd = 0;

	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *live = lm_ccopy_page(cc, room->list[i]);
		const uint8_t *was = room->dirty[i] ?
			room->snaps + (size_t)nd++ * cc->page_size :
			lm_ccopy_twin_of(cc, room->list[i]);

		(*reads)++;
		if (memcmp(live, was, cc->page_size) != 0)
			return false;
	}
	for (uint32_t w = 0; w < words; w++)
		if (atomic_load_explicit(&cc->twinned[w],
					 memory_order_acquire) != bits_seen[w])
			return false;
	return true;
}

/* Room for `want` snapshots (at most one per page); false without
 * memory. */
static bool grow_snaps(const struct lm_ccopy *cc, struct seal_room *room,
		       uint32_t want)
{
	uint8_t *t;

	if (want > cc->npages)
		want = cc->npages;
	if (want <= room->nsnaps)
		return true;
	if (!(t = realloc(room->snaps, (size_t)want * cc->page_size)))
		return false;
	room->snaps = t;
	room->nsnaps = want;
	return true;
}

int lm_ccopy_seal_at_once(const struct lm_ccopy *cc, uint8_t *buf,
			  uint8_t *idle,
			  int (*emit)(void *ctx, uint32_t page,
				      const uint8_t *diff, size_t len),
			  void *ctx, const struct lm_ccopy_writers *writers)
{
	bool stopped = false;
	uint32_t words = (cc->npages + 63) / 64, ntwinned = 0, ndirty = 0;
	uint32_t nd = 0, twinned = 0;
	size_t cap = lm_diff_bound(cc->page_size);
	uint64_t *bits = calloc(words, sizeof(*bits));
	struct seal_room room = {
		.list = malloc(cc->npages * sizeof(*room.list)),
		.dirty = malloc(cc->npages * sizeof(*room.dirty)),
	};
	uint8_t *diff = buf + cc->page_size;
	uint64_t reads = 0;
	int rc = 0;

	for (uint32_t w = 0; w < words; w++)
		twinned += (uint32_t)__builtin_popcountll(atomic_load_explicit(
			&cc->twinned[w], memory_order_acquire));
	/* room for a few pages dirtied meanwhile; more make it grow */
	if (!bits || !room.list || !room.dirty ||
	    !grow_snaps(cc, &room, twinned + 64)) {
		free(bits);
		free(room.list);
		free(room.dirty);
		free(room.snaps);
		return lm_ccopy_seal(cc, buf, idle, NULL, emit, ctx);
	}
	/* a read that found more dirty pages than the room held does not
	 * count as a round: the room grows (to one page each at most, so
	 * this ends) and the pages are read again */
	for (int round = 0; round < LM_CCOPY_SEAL_ROUNDS;) {
		ntwinned = collect(cc, &room, bits, &ndirty);
		reads += ntwinned;
		if (ndirty > room.nsnaps) {
			if (grow_snaps(cc, &room, ndirty + 64))
				continue;
			/* no memory: the pages go as one pass reads them */
			rc = lm_ccopy_seal(cc, buf, idle, NULL, emit, ctx);
			ntwinned = 0;
			break;
		}
		/* every page as its twin: the read is of one instant, the
		 * twins' (a write made during it changes a page read before,
		 * and goes with the next seal, as do those after it), and
		 * no page read is ahead of another.  Most seals of a recall
		 * or a lock's release find so, and each pass reads every
		 * twin (docs/performance.md, "The seal of one instant") */
		if (ndirty == 0 || unchanged(cc, &room, ntwinned, bits, &reads))
			break;
		/* a client writes all the time: it waits for one read */
		if (round == LM_CCOPY_SEAL_ROUNDS - 2 && writers &&
		    writers->stop && writers->stop(writers->ctx, true))
			stopped = true;
		round++;
	}
	if (stopped)
		writers->stop(writers->ctx, false);
	if (writers && writers->reads)
		*writers->reads += reads;
	for (uint32_t i = 0; i < ntwinned && rc == 0; i++) {
		uint32_t page = room.list[i];
		uint8_t *twin = lm_ccopy_twin_of(cc, page), *snap;
		size_t len;

		if (!room.dirty[i]) {
			if (idle[page] < UINT8_MAX)
				idle[page]++;
			continue;
		}
		idle[page] = 0;
		snap = room.snaps + (size_t)nd++ * cc->page_size;
		rc = lm_diff_encode(twin, snap, cc->page_size, diff, cap, &len);
		if (rc == 0 && len > 0) {
			memcpy(twin, snap, cc->page_size);
			rc = emit(ctx, page, diff, len);
		}
	}
	free(bits);
	free(room.list);
	free(room.dirty);
	free(room.snaps);
	return rc;
}

int lm_ccopy_seal(const struct lm_ccopy *cc, uint8_t *buf, uint8_t *idle,
		  struct lm_ccopy_drop *drop,
		  int (*emit)(void *ctx, uint32_t page, const uint8_t *diff,
			      size_t len),
		  void *ctx)
{
	uint8_t *snap = buf, *diff = buf + cc->page_size;
	size_t cap = lm_diff_bound(cc->page_size);
	uint32_t words = (cc->npages + 63) / 64;
	bool dropped = false;
	int rc = 0;

	for (uint32_t w = 0; w < words; w++) {
		uint64_t bits = atomic_load_explicit(&cc->twinned[w],
						     memory_order_acquire);

		while (bits) {
			uint32_t page = w * 64 + (uint32_t)__builtin_ctzll(bits);
			uint8_t *twin = lm_ccopy_twin_of(cc, page);
			size_t len;

			bits &= bits - 1;
			/* most twinned pages are clean at most seals */
			if (memcmp(lm_ccopy_page(cc, page), twin,
				   cc->page_size) == 0) {
				if (idle[page] < UINT8_MAX)
					idle[page]++;
				if (!drop || idle[page] < LM_CCOPY_IDLE_SEALS)
					continue;
				if (!drop->all &&
				    !(drop->stale && drop->stale[page])) {
					drop->kept++;
					continue;
				}
				atomic_fetch_and_explicit(
					&cc->twinned[w],
					~((uint64_t)1 << (page % 64)),
					memory_order_release);
				idle[page] = 0;
				dropped = true;
				continue;
			}
			idle[page] = 0;
			/* one read of the live page: a byte written after it
			 * differs from the new twin and goes next time.  No
			 * lock: only we touch a twin once it is taken. */
			memcpy(snap, lm_ccopy_page(cc, page), cc->page_size);
			rc = lm_diff_encode(twin, snap, cc->page_size, diff,
					    cap, &len);
			if (rc == 0 && len > 0) {
				memcpy(twin, snap, cc->page_size);
				rc = emit(ctx, page, diff, len);
			}
			if (rc)
				goto out;
		}
	}
out:
	if (dropped) /* after the bits: a client reads them after it */
		atomic_fetch_add_explicit(&cc->hdr->drops, 1,
					  memory_order_release);
	return rc;
}
