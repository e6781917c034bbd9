/* The client region's state, shared by its files, each of which calls
 * only those below it: region.c (releases, acquires, set-up) over
 * pagefault.c (the SIGSEGV handler and the fault service) and protect.c
 * (protection changes in batches), over mapping.c (the memory: the two
 * mappings, the page table, the twins), which defines it.  Not part of
 * region.h's interface.
 *
 * Locking: the page table is guarded by a spinlock (lm_region_lock); the
 * fault handler takes it, so it is never held by code that can fault on
 * the region. */
#ifndef LM_REGION_STATE_H
#define LM_REGION_STATE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "cluster_copy.h"
#include "reach.h"
#include "region.h"

enum lm_page_state {
	PAGE_INVALID, /* no valid copy: PROT_NONE */
	PAGE_READ,    /* valid, clean copy: PROT_READ */
	PAGE_WRITE,   /* valid copy with a twin, in the dirty list: RW */
	PAGE_PRIVATE, /* valid, writes not tracked (a run of one): RW */
	PAGE_OPEN,    /* valid, written before the last flush and left
			 open: its twin holds what that flush sent, so
			 the next flush finds new writes by comparing: RW */
	PAGE_CLOSING, /* inside a flush only: being closed */
	PAGE_STATE_COUNT
};

struct lm_region_state {
	atomic_int active;  /* read by the handler before the lock */
	atomic_int locked;  /* the page-table spinlock */
	/* the thread holding it (pthread_self), 0 when free: the handler's
	 * test for a fault under the lock (pagefault.c, on_segv) */
	_Atomic uintptr_t owner;
	uintptr_t base;
	uint64_t size;
	uint32_t page_size;
	unsigned page_shift;
	uint32_t npages;
	int fd;
	uint8_t *view; /* the application's mapping, at base */
	uint8_t *rw;   /* the region's own read-write mapping */
	struct lm_region_backend be;
	void *ctx;
	uint8_t *state;     /* enum lm_page_state, per page */
	uint32_t *version;  /* per page, meaningful when valid */
	uint8_t **twin;     /* per page, set in PAGE_WRITE */
	uint32_t *dirty;    /* PAGE_WRITE pages, in order of first write */
	uint32_t ndirty;
	uint32_t *open;     /* PAGE_OPEN pages (and stale entries of pages
			       that left that state since the last flush) */
	uint32_t nopen;
	uint32_t *next_open; /* the next flush's list, built beside it */
	uint8_t *changed;   /* per page, during a flush: its diff is not
			       empty */
	uint8_t *idle;      /* per open page: flushes in a row that found
			       it unchanged */
	uint64_t *marks;    /* a bit per page: protection change pending */
	uint64_t *rw_mapped; /* a bit per page: touched through the private
			       mapping (a twin taken, an update applied, a
			       page copied in), so mapped there: it stays */
	uint64_t *view_given; /* a bit per page: mapped in the application's
			       view by a fault that opened it (it stays
			       mapped: protection changes keep it) */
	uint64_t *closed;   /* a bit per page: valid (PAGE_READ) with its
			       view still closed, a sample of how far the
			       faults reach (reach.h) until first touched */
	uint32_t mark_lo, mark_hi; /* marked pages lie in [lo, hi) */
	struct lm_twin_free *free_twins;
	uint8_t **chunks;   /* mapped twin chunks, max_chunks slots */
	uint32_t nchunks, max_chunks, chunk_pages;
	uint8_t *scratch;   /* one page's diff, lm_diff_bound bytes */
	size_t scratch_cap;
	uint8_t *out;       /* the flush buffer, handed to the caller */
	size_t out_cap;
	struct lm_reach reach;
	struct lm_region_stats stats;
	/* pages after a read fault's page it may bring along, and pages
	 * along its stream's stride (fetch_list); kept across init and
	 * fini */
	uint32_t prefetch;
	/* copy = cluster (lm_region_init_shared): the cluster's copy, mapped
	 * whole (its pages are `rw`, and the view maps them at base); no
	 * twins, dirty or open lists of our own.  `version` holds, per
	 * page, the version a notice told us the copy must reach before we
	 * may use it (0: any) */
	bool shared;
	struct lm_ccopy ccopy;
	uint32_t cluster; /* our cluster's index, as notices name it */
	uint64_t drops;   /* ccopy's hdr->drops when last looked at */
	/* The program's globals (globals.h): pages [alias_first, alias_first
	 * + alias_n) of the region mapped a second time at `alias`, over the
	 * executable's data, with the view's protection (lm_view_protect).
	 * A fault there under the lock (the library reading a variable of
	 * the C library's that lies in the executable) opens the alias alone
	 * and sets alias_lent; the unlock closes it again. */
	uint8_t *alias;
	uint32_t alias_first, alias_n;
	volatile bool alias_lent; /* set by the handler */
};

_Static_assert(LM_REACH_KINDS == 2, "lm_region_stats has two reaches");

/* The process's one region (the SIGSEGV handler needs a global), defined
 * in mapping.c; R in the region's files. */
extern struct lm_region_state lm_region_state;
static struct lm_region_state *const R = &lm_region_state;

static inline void lm_region_lock(void)
{
	while (atomic_exchange_explicit(&R->locked, 1, memory_order_acquire))
		sched_yield();
	atomic_store_explicit(&R->owner, (uintptr_t)pthread_self(),
			      memory_order_relaxed);
}

static inline void lm_region_unlock(void)
{
	/* the handler's write is seen: no load of it moves above an access
	 * that faulted */
	atomic_signal_fence(memory_order_seq_cst);
	if (R->alias_lent) {
		/* what the alias lent under the lock may be older than what
		 * this process acquired: faults decide again */
		mprotect(R->alias, (size_t)R->alias_n << R->page_shift,
			 PROT_NONE);
		R->alias_lent = false;
	}
	atomic_store_explicit(&R->owner, 0, memory_order_relaxed);
	atomic_store_explicit(&R->locked, 0, memory_order_release);
}

/* Whether the calling thread holds the lock (the handler asks). */
static inline bool lm_region_locked_here(void)
{
	return atomic_load_explicit(&R->locked, memory_order_acquire) &&
	       atomic_load_explicit(&R->owner, memory_order_relaxed) ==
		       (uintptr_t)pthread_self();
}

static inline size_t lm_page_off(uint32_t page)
{
	return (size_t)page << R->page_shift;
}

/* The page bitmaps (marks, rw_mapped, view_given, closed): a bit per
 * page. */
static inline size_t lm_bitmap_words(uint32_t npages)
{
	return ((size_t)npages + 63) / 64;
}

static inline bool lm_bit_get(const uint64_t *bits, uint32_t page)
{
	return bits[page / 64] >> (page % 64) & 1;
}

static inline void lm_bit_put(uint64_t *bits, uint32_t page, bool on)
{
	if (on)
		bits[page / 64] |= (uint64_t)1 << (page % 64);
	else
		bits[page / 64] &= ~((uint64_t)1 << (page % 64));
}

/* A page about to be touched through the private mapping. */
static inline void lm_rw_touch(uint32_t page)
{
	lm_bit_put(R->rw_mapped, page, true);
}

static inline bool lm_page_closed(uint32_t page)
{
	return lm_bit_get(R->closed, page);
}

static inline void lm_page_set_closed(uint32_t page, bool on)
{
	lm_bit_put(R->closed, page, on);
}

#endif
