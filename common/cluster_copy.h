/* One copy per cluster (DESIGN.md §2 "One copy per cluster", docs/dsm.md
 * "One copy per cluster"): the memory object a lemuriad creates per run
 * under `copy = cluster` and every client of its cluster maps, and the
 * few operations both sides make on it.  Pure memory, no messages.
 *
 * The object, in order, each part aligned to the page size:
 *   header    magic, geometry, run
 *   table     per page: the home version the copy reflects, whether it
 *             holds the page at all, a lock byte, the owned and watched
 *             bytes
 *   twinned   a bit per page: the page has a cluster twin
 *   pages     the cluster's copy of the region (clients map it at base)
 *   twins     per twinned page, the copy as the cluster last published it
 *
 * Who writes what.  The lemuriad installs pages (lm_ccopy_install) and
 * seals the cluster's writes into diffs (lm_ccopy_seal); clients write
 * the pages they hold open for writing and take a page's twin before
 * their first write to it (lm_ccopy_twin).  A page's lock orders the
 * three: install and twin never overlap, so a page is copied whole only
 * while nobody may write it (no twin: every client maps it read-only at
 * most), and a twinned page takes only the bytes another cluster changed
 * (fetched bytes that differ from the twin), byte by byte, so a
 * cluster-mate writing other bytes of it meanwhile loses nothing.
 *
 * A twin stays while the page is written: the page's clients keep it
 * writable, and every seal compares it (cheap for a clean page) instead
 * of write-protecting it again in every client.  One found unchanged at
 * several seals in a row is dropped at a barrier, where every client
 * waits and write-protects its view before it goes on. */
#ifndef LM_CLUSTER_COPY_H
#define LM_CLUSTER_COPY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LM_CCOPY_MAGIC 0x4c4d43434f505931ull /* "LMCCOPY1" */

/* How long a page lock may be waited for before the holder is taken for
 * dead (a client killed inside lm_ccopy_twin): the run is then lost. */
#define LM_CCOPY_LOCK_WAIT_US (10u * 1000u * 1000u)

struct lm_ccopy_hdr {
	uint64_t magic;
	uint64_t run;
	uint32_t page_size;
	uint32_t npages;
	uint64_t table_off, twinned_off, pages_off, twins_off, size;
	/* seals that dropped twins (lm_ccopy_seal): a client that sees it
	 * move write-protects its views of pages no longer twinned */
	_Atomic uint64_t drops;
};

/* Seals in a row at which a twinned page must be found unchanged before
 * a barrier's seal drops its twin (lm_ccopy_seal): LU writes a block in
 * one interval of a step and not in the next, and again a step later. */
#define LM_CCOPY_IDLE_SEALS 3

struct lm_ccopy_entry {
	_Atomic uint32_t version; /* home version the copy reflects */
	_Atomic uint8_t valid;    /* the copy holds the page */
	_Atomic uint8_t lock;
	/* the cluster owns the page (lm_ccopy_own): nobody else holds it,
	 * so its writes need no twin until a home recalls it */
	_Atomic uint8_t owned;
	/* a client samples whether the cluster reads the page, fetched
	 * ahead of one of its faults (liblemuria/reach.h): no client's run
	 * opens it, and the first client to fault on it clears the byte */
	_Atomic uint8_t watched;
};

/* One process's view of the object: `map` is the whole object mapped
 * read-write at some address of the process (the lemuriad's, or the
 * client's second mapping; clients map the pages part again at the
 * region's base). */
struct lm_ccopy {
	uint8_t *map;
	struct lm_ccopy_hdr *hdr;
	struct lm_ccopy_entry *table;
	_Atomic uint64_t *twinned;
	uint8_t *pages;
	uint8_t *twins;
	uint32_t page_size;
	uint32_t npages;
	uint64_t size;
	/* the object's descriptor where this process holds it (the
	 * lemuriad, which writes pages the copy lacks through it:
	 * lm_ccopy_install); -1 elsewhere (lm_ccopy_attach sets -1) */
	int fd;
};

/* Fills a header with the object's geometry for npages pages of
 * page_size bytes (a power of two of at least 4096).  LM_EINVAL when
 * they do not fit. */
int lm_ccopy_geometry(uint32_t npages, uint32_t page_size,
		      struct lm_ccopy_hdr *out);

/* Takes a view of an object mapped at `map` (`size` bytes): the header
 * is checked against the geometry expected (npages, page_size).
 * lm_ccopy_format writes a new header first (the lemuriad's side). */
void lm_ccopy_format(uint8_t *map, const struct lm_ccopy_hdr *geometry,
		     uint64_t run);
int lm_ccopy_attach(struct lm_ccopy *cc, uint8_t *map, uint64_t size,
		    uint32_t npages, uint32_t page_size);

static inline uint8_t *lm_ccopy_page(const struct lm_ccopy *cc, uint32_t page)
{
	return cc->pages + (size_t)page * cc->page_size;
}

static inline uint8_t *lm_ccopy_twin_of(const struct lm_ccopy *cc,
					uint32_t page)
{
	return cc->twins + (size_t)page * cc->page_size;
}

static inline bool lm_ccopy_is_twinned(const struct lm_ccopy *cc,
				       uint32_t page)
{
	return atomic_load_explicit(&cc->twinned[page / 64],
				    memory_order_acquire) >> (page % 64) & 1;
}

static inline bool lm_ccopy_is_owned(const struct lm_ccopy *cc, uint32_t page)
{
	return atomic_load_explicit(&cc->table[page].owned,
				    memory_order_acquire);
}

/* A client's sample of whether the cluster reads `page`
 * (liblemuria/pagefault.c): lm_ccopy_watch marks it, lm_ccopy_seen
 * clears the mark and says whether it was there (a fault on the page),
 * lm_ccopy_watched reads it.  No lock: a byte each, atomic. */
static inline void lm_ccopy_watch(const struct lm_ccopy *cc, uint32_t page)
{
	atomic_store_explicit(&cc->table[page].watched, 1,
			      memory_order_relaxed);
}

static inline bool lm_ccopy_watched(const struct lm_ccopy *cc, uint32_t page)
{
	return atomic_load_explicit(&cc->table[page].watched,
				    memory_order_relaxed);
}

static inline bool lm_ccopy_seen(const struct lm_ccopy *cc, uint32_t page)
{
	return atomic_exchange_explicit(&cc->table[page].watched, 0,
					memory_order_relaxed);
}

/* Whether a client may hold `page` open for writing: it has a twin, or
 * the cluster owns it. */
static inline bool lm_ccopy_writable(const struct lm_ccopy *cc, uint32_t page)
{
	return lm_ccopy_is_twinned(cc, page) || lm_ccopy_is_owned(cc, page);
}

/* Whether the copy holds `page` at version `need` or newer (a client's
 * check before it opens its view of the page). */
bool lm_ccopy_holds(const struct lm_ccopy *cc, uint32_t page, uint32_t need);

struct lm_notice;
/* Whether the copy of cluster `cluster` reflects notice n already: it
 * holds the notice's version, or holds its base and `cluster` is the
 * only writer since (every such write was made in the copy).  A client
 * leaves its view alone for such a notice (liblemuria/region.c), and the
 * lemuriad leaves it out of its clients' lists (lemuriad/copy.c).
 * n->page must be below the copy's page count. */
bool lm_ccopy_covers(const struct lm_ccopy *cc, const struct lm_notice *n,
		     uint32_t cluster);

/* The copy's version of `page`, and whether it holds the page at all. */
bool lm_ccopy_version(const struct lm_ccopy *cc, uint32_t page,
		      uint32_t *version);

/* The page's lock, waited for at most LM_CCOPY_LOCK_WAIT_US: false when
 * that passed (the holder died).  Safe in a signal handler. */
bool lm_ccopy_lock(const struct lm_ccopy *cc, uint32_t page);
void lm_ccopy_unlock(const struct lm_ccopy *cc, uint32_t page);

/* A client's first write to `page` (held by the copy): its twin, taken
 * once for the cluster; none for a page the cluster owns.  LM_ETIMEDOUT
 * when the lock could not be had.  Safe in a signal handler (no
 * allocation). */
int lm_ccopy_twin(const struct lm_ccopy *cc, uint32_t page);

/* The lemuriad installs `data`, the page at home version `version` with
 * every delta of this cluster that the home lacked written on top: a
 * copy already at that version or newer, or an owned page, is left alone;
 * an untwinned page is copied whole, a twinned one takes the bytes where
 * data differs from the twin, into both.  LM_ETIMEDOUT when the lock could
 * not be had, else 0 (installed) or 1 (left alone). */
int lm_ccopy_install(const struct lm_ccopy *cc, uint32_t page,
		     uint32_t version, const uint8_t *data);

/* Ownership (docs/dsm.md "Pages one cluster owns"), the lemuriad's side.
 * lm_ccopy_own: the home made the cluster the page's only holder; the
 * page drops its twin, and from now on its writes are tracked by nobody
 * (the home gets the whole page when someone else wants it).  The twin's
 * bytes stay where they are, unused while the page is owned: the page as
 * the cluster's seals last read it (an untwinned page's bytes are put
 * there), which the recall compares.
 * lm_ccopy_recall: a home wants the page for another cluster: its bytes
 * go to `snap` (page_size bytes), which also becomes its twin, so that
 * writes from now on are sealed as any twinned page's; *unwritten says
 * whether they equal the bytes kept at lm_ccopy_own, that is, whether
 * nobody wrote the page since it was owned (or wrote back what was
 * there): then every byte sent was read by a seal already.  1 when the
 * page is not owned (nothing done).  lm_ccopy_forget: the copy no longer
 * holds the page (it was stale and nobody here had it open).  All three
 * take the page's lock: LM_ETIMEDOUT when it could not be had. */
int lm_ccopy_own(const struct lm_ccopy *cc, uint32_t page);
int lm_ccopy_recall(const struct lm_ccopy *cc, uint32_t page, uint8_t *snap,
		    bool *unwritten);
int lm_ccopy_forget(const struct lm_ccopy *cc, uint32_t page);

/* Moves the copy's version up to `version` when it holds `base` or
 * newer (the sole-cluster rule: every write between them was ours, and
 * is in the copy), as lm_ccopy_covers counts it: a notice the clients
 * were not sent because the copy covered it must leave the copy at its
 * version, or a later CHANGED is taken as told already (fmm hung so). */
void lm_ccopy_advance(const struct lm_ccopy *cc, uint32_t page,
		      uint32_t base, uint32_t version);

/* Which twins a barrier's seal drops (lm_ccopy_seal).  A twin found
 * unchanged at LM_CCOPY_IDLE_SEALS seals in a row goes when `all` is
 * set, or when `stale` (npages bytes, or NULL) marks its page: another
 * cluster wrote it since the copy's version, and without the twin the
 * copy may forget the page and its writer come to own it.  The others
 * stay: a dropped twin costs every client of the cluster a protection
 * change at its RELEASE (and the next write a fault), a kept one a
 * comparison at every seal.  `kept` (out): the twins idle that long
 * that stayed. */
struct lm_ccopy_drop {
	bool all;
	const uint8_t *stale;
	uint32_t kept;
};

/* The lemuriad's seal: for every twinned page, the diff (common/diff.h)
 * from its twin to a snapshot of the page, which becomes the twin; each
 * non-empty diff goes to emit(ctx, page, diff, len), which returns 0 or
 * stops the seal with its error.  `buf` holds a snapshot and a diff
 * (page_size + lm_diff_bound(page_size) bytes).  `idle` (npages bytes,
 * the caller's, zero at first) counts the seals in a row that found each
 * page unchanged; with `drop` (NULL: none), twins idle long enough go as
 * it says and hdr->drops moves on.  Only when no client can write before
 * it has seen `drops` move: at a barrier every client of the cluster
 * waits in, before its RELEASE.  0 or emit's error. */
int lm_ccopy_seal(const struct lm_ccopy *cc, uint8_t *buf, uint8_t *idle,
		  struct lm_ccopy_drop *drop,
		  int (*emit)(void *ctx, uint32_t page, const uint8_t *diff,
			      size_t len),
		  void *ctx);

/* The same while clients may write (a lock's release, a publish): the
 * diffs are of one instant's copy, so that no registration holds a
 * pointer whose record a cluster-mate wrote first and the seal read
 * before it (docs/dsm.md "Order").  Every twinned page is read; when
 * one differs from its twin, all are read again until nothing changed
 * between (a read that finds every page equal to its twin is an instant
 * already: the twins); when that failed twice and
 * `writers` can, the clients' writes wait for the last read (a client
 * that writes all the time); else after LM_CCOPY_SEAL_ROUNDS reads the
 * pages go as last read.  Twins are never dropped.  Falls back to lm_ccopy_seal
 * without memory for the copies. */
struct lm_ccopy_writers {
	/* Makes every client's write to the copy wait (on) or go on again
	 * (off); true when they wait (common/copy_set.h). */
	bool (*stop)(void *ctx, bool on);
	void *ctx;
	/* when not NULL, the pages the seal read are added to it */
	uint64_t *reads;
};
int lm_ccopy_seal_at_once(const struct lm_ccopy *cc, uint8_t *buf,
			  uint8_t *idle,
			  int (*emit)(void *ctx, uint32_t page,
				      const uint8_t *diff, size_t len),
			  void *ctx, const struct lm_ccopy_writers *writers);
#define LM_CCOPY_SEAL_ROUNDS 4

/* Bytes of `buf` lm_ccopy_seal needs. */
size_t lm_ccopy_seal_buf_size(uint32_t page_size);

#endif
