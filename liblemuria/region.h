/* The client's view of shared memory (DESIGN.md §2 "Faults", docs/dsm.md
 * 2-4 and 9): the region mapped at a fixed address, accesses caught with
 * mprotect + SIGSEGV, pages fetched through a backend, twins kept for
 * written pages, diffs built at release and copies invalidated by write
 * notices.  It sends no messages: the client runtime supplies the backend
 * and sends what the region builds.  Four files, each calling only those
 * below it: region.c (releases, acquires, set-up), pagefault.c (the
 * handler) and protect.c (protection changes in batches), mapping.c (the
 * memory); region_state.h holds what they share.
 *
 * One region per process (the SIGSEGV handler needs a global).
 *
 * Threads: the page table is guarded by a spinlock, so several
 * application threads may touch the region; faults are served one at a
 * time (a thread faulting while another fetches spins until it is done).
 * The backend must not touch the region or call lm_region_* itself (but
 * lm_region_fill, for the pages it fetches), and no signal handler other
 * than the region's may touch the region.
 *
 * Memory: besides the region itself, a page table of about 27 bytes and
 * four bits per page, one twin per page written in the current interval
 * or left open by a flush (twins are recycled through a free list, never
 * returned to the system before lm_region_fini) and the flush buffer (as
 * large as the largest diff list built so far).  The region holds in
 * memory the pages it fetched, and no other. */
#ifndef LM_REGION_H
#define LM_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct lm_region_backend {
	/* Fetch page `page` into dst (page_size bytes) and its version.
	 * Called from the SIGSEGV handler of the faulting thread, with the
	 * region's lock held, so it must be safe there: no lm_region_*
	 * call but lm_region_fill, no access to the region.  dst is the
	 * region's private mapping of the page, invisible to the
	 * application until fetch returns; lm_region_fill is the way to
	 * write it.  Returns 0 or LM_E*; a failure is fatal: the handler
	 * writes a message naming the page and the error and aborts. */
	int (*fetch)(void *ctx, uint32_t page, void *dst, uint32_t *version);
	/* Optional (NULL: every fault fetches one page): fetch pages[0]
	 * like fetch, into dst[0], and bring along what it cheaply can of
	 * pages[1..n) (each invalid here, none listed twice): pages[i]
	 * goes to dst[i] (its page of the private mapping), its version to
	 * versions[i], and got[i] is set; got[0] is set on success.
	 * Nothing else may be written.  `after`: how many pages after
	 * pages[0] the fault reaches (those of them it lacks come first
	 * in pages[1..n)), which the backend may fetch ahead. */
	int (*fetch_list)(void *ctx, const uint32_t *pages, uint32_t n,
			  uint32_t after, uint8_t *const *dst,
			  uint32_t *versions, uint8_t *got);
	/* copy = cluster (lm_region_init_shared) instead of both: have the
	 * lemuriad put `page` into the cluster's copy, bringing along what
	 * it can of the `after` pages after it; *version: the version it
	 * answered with, which the copy then holds.  Called like fetch. */
	int (*fetch_shared)(void *ctx, uint32_t page, uint32_t after,
			    uint32_t *version);
};

/* Pages after a faulting one that a fault may bring along, and as many
 * again along a stride (fetch_list; docs/dsm.md "Neighbour pages"). */
#define LM_REGION_PREFETCH_MAX 31u
#define LM_REGION_FETCH_MAX (1 + 2 * LM_REGION_PREFETCH_MAX)

/* Most pages between two faults on invalid pages that make a stride. */
#define LM_REGION_STRIDE_MAX 256

/* For the backend: copies a fetched page (len bytes, the page size) from
 * src to dst, its page of the private mapping as fetch or fetch_list gave
 * it.  A page the mapping never touched is written through the region's
 * memory file (pwrite), which allocates it with the data in it; copied
 * through the mapping it would be cleared first and then cost a fault at
 * the copy, or after MADV_POPULATE_WRITE the host's first touch of the
 * mapping (docs/performance.md, "Page faults").  A page the mapping has
 * touched already, one the write fails for, and any dst or len that is
 * not a whole page of the mapping are copied with memcpy.  Safe in the
 * SIGSEGV handler. */
void lm_region_fill(void *dst, const void *src, size_t len);

/* Maps `size` bytes at the fixed address `base`, cut into pages of
 * `page_size` bytes (a power of two, a multiple of the OS page size; base
 * and size multiples of it), every page invalid, and installs the SIGSEGV
 * handler.  be is copied; ctx is passed to be->fetch and must live until
 * lm_region_fini.  Statistics restart from zero.  Returns 0, LM_EINVAL
 * (already initialised, bad geometry, no fetch function), LM_ENOMEM, or
 * LM_EIO (a system call failed, e.g. the address range is in use); on
 * error a message naming the cause (and the address) is written to err
 * (errlen bytes, may be NULL) and nothing stays mapped or installed. */
int lm_region_init(uint64_t base, uint64_t size, uint32_t page_size,
		   const struct lm_region_backend *be, void *ctx, char *err,
		   size_t errlen);

/* lm_region_init under copy = cluster (docs/dsm.md "One copy per
 * cluster"): the region is the cluster's copy, the memory object `fd`
 * (common/cluster_copy.h; owned from now on, closed at fini) that the
 * lemuriad handed over, mapped at base.  A fault maps a page the copy
 * holds, new enough for what this process acquired, or has be->fetch_shared
 * put it there first; a write fault takes the page's cluster twin
 * (lm_ccopy_twin).  Nothing is flushed: the lemuriad finds the writes in
 * the copy.  `cluster`: our cluster's layout index (notices whose pages
 * only it wrote leave the copy valid). */
int lm_region_init_shared(uint64_t base, uint64_t size, uint32_t page_size,
			  int fd, uint32_t cluster,
			  const struct lm_region_backend *be, void *ctx,
			  char *err, size_t errlen);

/* Unmaps the region, restores the SIGSEGV action found by lm_region_init,
 * frees twins and buffers.  Unflushed writes are lost.  Safe when not
 * initialised.  Statistics stay readable until the next init. */
void lm_region_fini(void);

/* Maps the region's whole pages [pages, pages + len) a second time at
 * addr, over what is there (the program's globals: globals.h), closed:
 * the two addresses are one memory under one protection, faults at addr
 * are served as the region's.  lm_region_fini makes addr private memory
 * again with the pages' last bytes.  One alias per region.  Returns 0,
 * LM_EINVAL (not whole pages of the region, addr not page-aligned, an
 * alias exists) or LM_EIO, with the reason in err. */
int lm_region_alias(void *addr, const void *pages, size_t len, char *err,
		    size_t errlen);

/* 1 when addr lies in the initialised region, else 0. */
int lm_region_contains(const void *addr);

/* Builds the diff list of every page written since the last flush, in
 * the packed format of lm_msg_diffs_append (common/proto.h), the pages
 * the last flush left open first, then the others in the order they were
 * first written, into a
 * buffer the region owns (valid until the next lm_region_flush or
 * lm_region_fini; *diffs may be NULL when *len is 0).  The copies stay
 * valid, their versions unchanged.  A page that changed stays *open*:
 * writable, its twin now what was sent, so that writing it again takes
 * no fault; the next flushes compare it, and the third in a row that
 * finds it unchanged makes it read-only and drops its twin (a page
 * faulted in and left unchanged, at once).  *count = number of entries;
 * pages whose diff is empty are omitted.  Pages that stay open keep
 * their protection: a write another thread makes meanwhile is in the
 * diff or differs from the twin after (the twin takes the diff, not the
 * page), so the next flush finds it.  Pages that close are write-protected
 * run by run or a window at a time, whichever costs less (docs/dsm.md
 * "Pages and versions"), and compared once more, so that a write racing
 * the flush goes with it; one that cannot be protected (vm.max_map_count)
 * stays open.  Returns 0, LM_EINVAL (not
 * initialised), LM_ENOMEM (no memory) or LM_ENOBUFS (the list would
 * exceed the 4 GiB a FLUSH can carry); on error nothing changed and the
 * pages stay dirty and writable. */
int lm_region_flush(const uint8_t **diffs, size_t *len, uint32_t *count);

/* Applies write notices (I3): every page whose copy is valid and whose
 * version is older than its notice becomes invalid (PROT_NONE) and is
 * fetched again at its next access, except a sole writer's own copy: a
 * clean copy at the notice's base whose writer is `self_rank` (this
 * process's rank) holds exactly the home's page at the notice's version,
 * so it stays valid and takes that version (docs/dsm.md "Sole writers").
 * The runtime flushes first: a notice that would invalidate a dirty page
 * (written since the last flush), or that names a page outside the
 * region, makes the call return LM_EINVAL without changing anything.  n (count
 * entries) is only read.  The pages invalidated are closed as
 * lm_region_flush closes pages, whatever the order of the notices; a
 * clean copy in a window that cannot be opened again is dropped.
 * Returns 0, LM_EINVAL (also when not initialised) or LM_ENOMEM (mprotect
 * failed: the pages it could not close stay valid at their version, every
 * other notice is applied). */
int lm_region_apply_notices(const struct lm_notice *n, uint32_t count,
			    uint32_t self_rank);

/* lm_region_apply_notices with the updates of a barrier RELEASE
 * (docs/dsm.md "Updates"): a diff list in the order of the notices, at
 * most one entry per notice.  A clean copy at the notice's base that has
 * an update takes it (written through the private mapping, the view's
 * protection unchanged) and the notice's version instead of being
 * invalidated.  A malformed entry, or one out of notice order, is
 * ignored (and a malformed list from there on): those pages are
 * invalidated as without updates.  updates may be NULL. */
int lm_region_apply_release(const struct lm_notice *n, uint32_t count,
			    uint32_t self_rank,
			    const struct lm_msg_diffs *updates);

/* For a run of one process, whose writes no other process can read:
 * every page becomes valid and writable and writes are no longer
 * tracked (no faults, twins, diffs or refetches; lm_region_flush then
 * has nothing to send and notices leave the pages alone).  Pages start
 * as zeros, as the homes' pages do at the start of a run, so it must
 * come before any access: LM_EINVAL when a page is valid already (or
 * not initialised), LM_ENOMEM / LM_EIO when mprotect fails. */
int lm_region_make_private(void);

struct lm_region_stats {
	uint64_t read_faults;   /* faults served as reads */
	uint64_t write_faults;  /* faults served as writes (twin made) */
	uint64_t fetches;       /* backend fetches */
	uint64_t prefetched;    /* pages a fault brought along (fetch_list) */
	uint64_t strided;       /* of those, pages along a stride */
	uint64_t written_ahead; /* valid copies a write fault opened with its
				 * own page (open_written) */
	uint64_t invalidations; /* copies invalidated by notices */
	uint64_t kept;          /* own copies kept by a sole-writer notice */
	uint64_t updated;       /* copies kept by applying an update */
	uint64_t flushed_pages; /* diff-list entries built */
	uint64_t flushed_bytes; /* diff-list bytes built (headers included) */
	uint64_t mprotects;     /* mprotect calls on the application's view */
	/* how far faults on invalid pages reach now, after and along a stride
	 * (lm_reach_kind order), and the samples that set it: judged, and
	 * of those read before the next release (reach.h) */
	uint32_t reach[2];
	uint64_t samples[2], samples_read[2], reach_changes[2];
};

void lm_region_stats(struct lm_region_stats *out);

/* How many pages after a faulting one a fault on an invalid page asks for
 * along with it at most, and how many along a stride its faults follow (at
 * most LM_REGION_PREFETCH_MAX; 0, the default, none).  Each kind starts
 * there and then follows how many of the pages it brings the program reads
 * (reach.h).  A write fault on a valid read-only copy opens as many of the
 * valid read-only copies right after it writable with it.  Kept across
 * init and fini; starts the depths again. */
void lm_region_set_prefetch(uint32_t pages);

/* For bench/region.c: 0 makes every protection change of a flush or of
 * notices one mprotect per page, as before they were batched; 1 (the
 * default) changes them run by run or a window at a time.  Kept across
 * init and fini. */
void lm_region_set_batching(int on);

/* Version of the valid copy of `page`; UINT32_MAX when the page is
 * invalid, out of range, or the region is not initialised.  For tests. */
uint32_t lm_region_page_version(uint32_t page);

#endif
