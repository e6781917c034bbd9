/* Client shared-memory machinery, under the client runtime: the region at
 * its fixed address, page states driven by SIGSEGV, twins, diffs at
 * release and invalidation by write notices (docs/dsm.md 2-4 and 9).
 *
 * The region's memory is a memfd mapped twice: the application's view at
 * `base` (protections follow the page states) and a private read-write
 * mapping.  Fetched pages and twins go through the private one, so a page
 * is complete before the view opens (no thread sees half a page), and the
 * flush never touches the view, so it cannot fault while holding the lock.
 * A flush or a list of notices changes the protection of many pages at
 * once: those are walked in address order and changed run by run, or a
 * window at a time with one TLB flush (protect_window), whichever costs
 * less.
 *
 * Choices left open by the spec:
 * - A notice blocks (LM_EINVAL, nothing done) only when it would
 *   invalidate a dirty page; a notice no newer than a dirty page's copy
 *   changes nothing and is accepted.  A notice for a page outside the
 *   region is LM_EINVAL too: it can only come from a broken peer.
 * - Several application threads are allowed: a spinlock guards the page
 *   table, and a fault that finds its page already opened by another
 *   thread gives it its state's protection again and returns, so the
 *   access is retried.
 * - Off x86-64 the fault's access kind is not decoded: a fault on an
 *   invalid page is served as a read and the write, if it was one, faults
 *   again on the read-only page and is served then. */
#include "region.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "diff.h"
#include "lm_error.h"
#include "mem.h"
#include "reach.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define TWIN_CHUNK_PAGES 32 /* twins mapped at once when the pool is dry */
#define DIFFS_ENTRY_HDR 8   /* u32 page + u32 length in a diff list */
#define OUT_MIN_CAP 65536   /* first size of the flush buffer */
/* Flushes in a row that may find an open page unchanged before it
 * closes: LU writes a block in one interval of a step and not in the
 * other, and writes it again in the next step. */
#define OPEN_IDLE_MAX 3
/* A protection change of more pages than this flushes the whole TLB, of
 * fewer a page at a time (x86's tlb_single_page_flush_ceiling, 33 by
 * default; protect_window) */
#define FLUSH_CEILING 33
/* Marked pages further apart than this take TLB flushes of their own:
 * closing and opening the pages between costs more than a flush */
#define WINDOW_GAP 256
/* What an mprotect call costs, in flushes of one page (window_pays) */
#define CALL_FLUSHES 4

enum page_state {
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

enum fault_access {
	ACCESS_UNKNOWN, /* not decoded on this architecture */
	ACCESS_READ,
	ACCESS_WRITE,
	ACCESS_EXEC, /* instruction fetch: never ours to serve */
};

/* A free twin holds the link to the next one in its first bytes. */
struct twin_free {
	struct twin_free *next;
};

/* Read faults that step through the region by a fixed number of pages
 * (the rows of a column-major matrix, a column of blocks): each stream is
 * where its last fault was, or the last page asked for along it, and its
 * stride once two faults have shown one. */
#define STREAMS 4

struct stream {
	int64_t last, stride;
	uint64_t used; /* fault_clock when it last served */
};

struct region {
	atomic_int active;  /* read by the handler before the lock */
	atomic_int locked;  /* the page-table spinlock */
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
	uint8_t *state;     /* enum page_state, per page */
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
	struct twin_free *free_twins;
	uint8_t **chunks;   /* mapped twin chunks, max_chunks slots */
	uint32_t nchunks, max_chunks, chunk_pages;
	uint8_t *scratch;   /* one page's diff, lm_diff_bound bytes */
	size_t scratch_cap;
	uint8_t *out;       /* the flush buffer, handed to the caller */
	size_t out_cap;
	struct sigaction old_action; /* restored by fini, chained to */
	struct stream streams[STREAMS];
	uint64_t fault_clock; /* read faults so far, to age the streams */
	struct lm_reach reach;
	struct lm_region_stats stats;
};

_Static_assert(LM_REACH_KINDS == 2, "lm_region_stats has two reaches");

static struct region R = { .fd = -1, .mark_lo = UINT32_MAX };

/* false: one mprotect per page, as before batching (bench/region.c) */
static bool batching = true;
/* pages after a read fault's page it may bring along, and pages along
 * its stream's stride (fetch_list) */
static uint32_t prefetch_pages;

static void lock(void)
{
	while (atomic_exchange_explicit(&R.locked, 1, memory_order_acquire))
		sched_yield();
}

static void unlock(void)
{
	atomic_store_explicit(&R.locked, 0, memory_order_release);
}

static size_t page_off(uint32_t page)
{
	return (size_t)page << R.page_shift;
}

/* Every change of the view's protection goes through here, so that the
 * statistics count them. */
static int view_protect(uint32_t first, uint32_t n, int prot)
{
	R.stats.mprotects++;
	return mprotect(R.view + page_off(first), page_off(n), prot);
}

/* ---- messages from the signal handler --------------------------------
 * snprintf is not async-signal-safe, so a fatal message is assembled by
 * hand and written with write(2). */

struct sigmsg {
	char buf[256];
	size_t len;
};

static void sigmsg_str(struct sigmsg *m, const char *s)
{
	while (*s && m->len < sizeof(m->buf) - 1)
		m->buf[m->len++] = *s++;
}

static void sigmsg_num(struct sigmsg *m, uint64_t v, unsigned radix)
{
	char digits[24];
	size_t n = 0;

	do {
		digits[n++] = "0123456789abcdef"[v % radix];
		v /= radix;
	} while (v);
	while (n && m->len < sizeof(m->buf) - 1)
		m->buf[m->len++] = digits[--n];
}

__attribute__((noreturn)) static void fault_fatal(uint32_t page,
						  const char *what,
						  const char *why)
{
	struct sigmsg m = { .len = 0 };

	sigmsg_str(&m, "lemuria: ");
	sigmsg_str(&m, what);
	sigmsg_str(&m, " page ");
	sigmsg_num(&m, page, 10);
	sigmsg_str(&m, " (address 0x");
	sigmsg_num(&m, R.base + page_off(page), 16);
	sigmsg_str(&m, "): ");
	sigmsg_str(&m, why);
	sigmsg_str(&m, "\n");
	if (write(STDERR_FILENO, m.buf, m.len) < 0) {
		/* nothing left to report to */
	}
	abort();
}

/* ---- the twin pool ---------------------------------------------------
 * Twins come from chunks mapped with mmap (a system call, so usable from
 * the handler, unlike malloc) and go back to a free list at flush.  At
 * most npages twins exist at once, which bounds the chunks. */

static int twin_chunk_add(void)
{
	size_t bytes = (size_t)R.chunk_pages * R.page_size;
	uint8_t *c;

	if (R.nchunks == R.max_chunks)
		return LM_ENOMEM;
	c = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return LM_ENOMEM;
	/* the free list's links write every twin of the chunk below: one
	 * call gives them all, instead of a fault per page (mem.h) */
	lm_mem_populate(c, bytes);
	R.chunks[R.nchunks++] = c;
	for (uint32_t i = R.chunk_pages; i-- > 0;) {
		struct twin_free *t = (struct twin_free *)(c + page_off(i));

		t->next = R.free_twins;
		R.free_twins = t;
	}
	return 0;
}

static uint8_t *twin_get(void)
{
	struct twin_free *t;

	if (!R.free_twins && twin_chunk_add() != 0)
		return NULL;
	t = R.free_twins;
	R.free_twins = t->next;
	return (uint8_t *)t;
}

static void twin_put(uint8_t *twin)
{
	struct twin_free *t = (struct twin_free *)twin;

	t->next = R.free_twins;
	R.free_twins = t;
}

/* ---- the fault handler ----------------------------------------------- */

static enum fault_access fault_access(const void *uctx)
{
#if defined(__x86_64__)
	/* The page-fault error code: bit 1 write, bit 4 instruction fetch. */
	const ucontext_t *uc = uctx;
	greg_t err = uc->uc_mcontext.gregs[REG_ERR];

	if (err & 0x10)
		return ACCESS_EXEC;
	return (err & 2) ? ACCESS_WRITE : ACCESS_READ;
#else
	(void)uctx;
	return ACCESS_UNKNOWN;
#endif
}

/* Hands a fault that is not ours to whoever had SIGSEGV before.  With no
 * handler before, SIGSEGV goes back to its default and the faulting
 * instruction runs again on return: the process dies of SIGSEGV as it
 * would have without Lemuria. */
static void chain(int sig, siginfo_t *si, void *uctx)
{
	const struct sigaction *old = &R.old_action;
	struct sigaction dfl;

	if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, si, uctx);
		return;
	}
	if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
		return;
	}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
}

static void open_pages(uint32_t first, uint32_t n, int prot)
{
	if (view_protect(first, n, prot) != 0)
		fault_fatal(first, "cannot open", errno == ENOMEM ?
			    "mprotect: out of memory (vm.max_map_count?)" :
			    "mprotect failed");
}

static void open_page(uint32_t page, int prot)
{
	open_pages(page, 1, prot);
}

/* The page bitmaps (marks, rw_mapped, view_given, closed): a bit per
 * page. */
static size_t bitmap_words(uint32_t npages)
{
	return ((size_t)npages + 63) / 64;
}

static bool bit_get(const uint64_t *bits, uint32_t page)
{
	return bits[page / 64] >> (page % 64) & 1;
}

static void bit_put(uint64_t *bits, uint32_t page, bool on)
{
	if (on)
		bits[page / 64] |= (uint64_t)1 << (page % 64);
	else
		bits[page / 64] &= ~((uint64_t)1 << (page % 64));
}

/* A page about to be touched through the private mapping. */
static void rw_touch(uint32_t page)
{
	bit_put(R.rw_mapped, page, true);
}

void lm_region_fill(void *dst, const void *src, size_t len)
{
	uintptr_t off = (uintptr_t)dst - (uintptr_t)R.rw;
	uint32_t page;

	/* a dst below the mapping wraps around to a huge offset */
	if (!R.rw || off >= R.size || off % R.page_size ||
	    len != R.page_size) {
		memcpy(dst, src, len);
		return;
	}
	page = (uint32_t)(off >> R.page_shift);
	if (!bit_get(R.rw_mapped, page) &&
	    pwrite(R.fd, src, len, (off_t)off) == (ssize_t)len)
		return;
	/* mapped already, or the write failed: the mapping takes it */
	rw_touch(page);
	memcpy(dst, src, len);
}

/* Maps a page that a fault has just opened from no access into the
 * application's view, the first time, so that the access the fault
 * returns to finds it mapped: one system call (6.5 us on the hosts of
 * 2026-11-28) instead of the page fault that access would take (10-16 us
 * with its way back).  Once mapped, a page stays mapped: its protection
 * changes, not its mapping.  Pages a fault opens besides its own are
 * marked as given without the call: most are read, and their first read
 * maps them. */
static void give_view(uint32_t page, bool write)
{
	void *p = R.view + page_off(page);

	if (bit_get(R.view_given, page))
		return;
	if (write)
		lm_mem_populate(p, R.page_size);
	else
		lm_mem_populate_read(p, R.page_size);
	bit_put(R.view_given, page, true);
}

static bool is_closed(uint32_t page)
{
	return bit_get(R.closed, page);
}

static void set_closed(uint32_t page, bool on)
{
	bit_put(R.closed, page, on);
}

/* Maps a write fault's pages in the private mapping before they are
 * fetched, a run of adjacent pages to a call (mem.h): each is twinned
 * right after its copy, and a page the mapping holds takes both through
 * it without a fault, where one filled through the memory file would take
 * one at its twin (radix's write faults, which fetch their pages: 7 %
 * slower so). */
static void map_for_twins(const uint32_t *pages, uint32_t n)
{
	for (uint32_t i = 0, k = 0; i < n; i++) {
		if (i + 1 < n && pages[i + 1] == pages[i] + 1)
			continue;
		/* pages[k..i] are adjacent: given from the first unmapped on */
		while (k <= i && bit_get(R.rw_mapped, pages[k]))
			k++;
		if (k <= i)
			lm_mem_populate(R.rw + page_off(pages[k]),
					page_off(pages[i] - pages[k] + 1));
		for (; k <= i; k++)
			rw_touch(pages[k]);
	}
}

/* The page is written into the private mapping while the view is still
 * closed. */
static void fetch_page(uint32_t page, bool write)
{
	uint32_t version = 0;
	int rc;

	if (write)
		map_for_twins(&page, 1);
	rc = R.be.fetch(R.ctx, page, R.rw + page_off(page), &version);
	if (rc != 0)
		fault_fatal(page, "cannot fetch", lm_strerror(rc));
	R.version[page] = version;
	R.stats.fetches++;
}

/* The stream a read fault at `page` continues, or NULL.  It continues a
 * stream when it lies a whole number of strides from the stream's last
 * page, at most one stride past it and not before the pages the last
 * fault asked for along it (one of those may not have come).  Else the
 * nearest stream (within LM_REGION_STRIDE_MAX pages) takes the step from
 * its last page as the stride to try next, and failing that the oldest
 * starts again at the page. */
static struct stream *stream_of(uint32_t page)
{
	struct stream *near = NULL, *old = &R.streams[0];
	int64_t best = LM_REGION_STRIDE_MAX + 1;

	R.fault_clock++;
	for (struct stream *s = R.streams; s < R.streams + STREAMS; s++) {
		int64_t d = (int64_t)page - s->last;

		if (!s->used) {
			old = s;
			continue;
		}
		if (s->stride && d % s->stride == 0 && d / s->stride <= 1 &&
		    d / s->stride > -(int64_t)prefetch_pages) {
			s->used = R.fault_clock;
			return s;
		}
		if (d && llabs(d) < best) {
			best = llabs(d);
			near = s;
		}
		if (old->used && s->used < old->used)
			old = s;
	}
	if (near) {
		near->stride = (int64_t)page - near->last;
		near->last = page;
		near->used = R.fault_clock;
	} else {
		*old = (struct stream){ page, 0, R.fault_clock };
	}
	return NULL;
}

/* Adds `page` to a fault's list when it is in the region, invalid and
 * not listed yet. */
static void list_add(uint32_t *pages, uint32_t *n, int64_t page)
{
	if (page < 0 || page >= R.npages || R.state[page] != PAGE_INVALID)
		return;
	for (uint32_t i = 0; i < *n; i++)
		if (pages[i] == (uint32_t)page)
			return;
	pages[(*n)++] = (uint32_t)page;
}

/* Of the n pages of a fault's list that came (got), those from `from` to
 * `to` are of one kind: when the fault samples that kind, one of them,
 * picked by the reach, stays closed (reach.h).  Returns its index, or n. */
static uint32_t pick_sample(const uint32_t *pages, const uint8_t *got,
			    uint32_t from, uint32_t to, uint32_t n,
			    enum lm_reach_kind kind)
{
	uint32_t came = 0, pick;

	for (uint32_t i = from; i < to; i++)
		came += got[i];
	if (!lm_reach_sample(&R.reach, kind, came, &pick))
		return n;
	for (uint32_t i = from; i < to; i++)
		if (got[i] && pick-- == 0) {
			lm_reach_add(&R.reach, pages[i], kind);
			return i;
		}
	return n;
}

/* A copy about to be written: its twin taken, in the dirty list; false
 * when no twin could be had.  The caller opens it writable. */
static bool twin_page(uint32_t page)
{
	uint8_t *twin = twin_get();

	if (!twin)
		return false;
	rw_touch(page);
	memcpy(twin, R.rw + page_off(page), R.page_size);
	R.twin[page] = twin;
	R.dirty[R.ndirty++] = page;
	R.state[page] = PAGE_WRITE;
	return true;
}

static void twin_or_die(uint32_t page)
{
	if (!twin_page(page))
		fault_fatal(page, "cannot twin", "out of memory");
}

/* A fault's fetch of an invalid page, which may bring along the invalid
 * pages after it and those along the stride its faults follow, as deep as
 * the reach says for each (docs/dsm.md "Neighbour pages"); opens the page
 * and those that came but the samples, a run of pages to an mprotect.  A
 * write fault opens them all writable, each with its twin: a program
 * that writes into an invalid page writes its neighbours next (radix's
 * buckets, an array being filled), and a page opened writable from no
 * access takes no TLB flush, where one opened readable would take a
 * SIGSEGV and a flush at its first write; one left unchanged closes at
 * the next flush. */
static void fetch_with_neighbours(uint32_t page, enum fault_access access)
{
	uint32_t pages[LM_REGION_FETCH_MAX], versions[LM_REGION_FETCH_MAX];
	uint8_t *dst[LM_REGION_FETCH_MAX], got[LM_REGION_FETCH_MAX];
	uint32_t n = 1, along, opened = 0, after = 0, sample[2];
	bool write = access == ACCESS_WRITE;
	int prot = write ? PROT_READ | PROT_WRITE : PROT_READ;
	struct stream *s = NULL;
	int rc;

	if (prefetch_pages) {
		after = lm_reach_depth(&R.reach, LM_REACH_AFTER);
		s = stream_of(page);
	}
	pages[0] = page;
	for (uint32_t k = 1; k <= after; k++)
		list_add(pages, &n, (int64_t)page + k);
	along = n;
	if (s) {
		uint32_t deep = lm_reach_depth(&R.reach, LM_REACH_STRIDE);

		/* the stream goes on from the last page asked for, whether
		 * it was listed or is valid here already */
		for (uint32_t k = 1; k <= deep; k++)
			list_add(pages, &n, (int64_t)page + k * s->stride);
		s->last = (int64_t)page + deep * s->stride;
	}
	if (!R.be.fetch_list || n == 1) {
		fetch_page(page, write);
		R.state[page] = PAGE_READ;
		if (write)
			twin_or_die(page);
		open_page(page, prot);
		give_view(page, write);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		dst[i] = R.rw + page_off(pages[i]);
	if (write)
		map_for_twins(pages, n);
	memset(got, 0, n);
	rc = R.be.fetch_list(R.ctx, pages, n, after, dst, versions, got);
	if (rc == 0 && !got[0])
		rc = LM_EBADMSG;
	if (rc != 0)
		fault_fatal(page, "cannot fetch", lm_strerror(rc));
	R.stats.fetches++;
	sample[0] = pick_sample(pages, got, 1, along, n, LM_REACH_AFTER);
	sample[1] = pick_sample(pages, got, along, n, n, LM_REACH_STRIDE);
	for (uint32_t i = 0; i < n; i++) {
		if (!got[i])
			continue;
		R.version[pages[i]] = versions[i];
		R.state[pages[i]] = PAGE_READ;
		if (i) {
			R.stats.prefetched++;
			R.stats.strided += i >= along;
		}
		if (i == sample[0] || i == sample[1]) {
			set_closed(pages[i], true);
			continue;
		}
		if (write && i == 0)
			twin_or_die(page);
		else if (write && !twin_page(pages[i])) {
			/* no twin to spare: in place but closed, as a sample
			 * is, for its first access to open */
			set_closed(pages[i], true);
			continue;
		}
		pages[opened++] = pages[i];
	}
	/* in address order (insertion sort: qsort is no signal handler's
	 * call), a run of pages to an mprotect */
	for (uint32_t i = 1; i < opened; i++) {
		uint32_t p = pages[i], j = i;

		for (; j > 0 && pages[j - 1] > p; j--)
			pages[j] = pages[j - 1];
		pages[j] = p;
	}
	for (uint32_t i = 0, first = 0; i < opened; i++)
		if (i + 1 == opened || pages[i + 1] != pages[i] + 1) {
			open_pages(pages[first], i + 1 - first, prot);
			first = i + 1;
		}
	give_view(page, write);
	/* the program maps those it reads by their first access */
	for (uint32_t i = 0; i < opened; i++)
		bit_put(R.view_given, pages[i], true);
}

/* A write fault on a valid read-only copy: twins it and opens it
 * writable, and with it, in the same mprotect, the run of valid read-only
 * copies right after it, up to the layout's prefetch, each with its twin
 * (docs/dsm.md "Neighbour pages").  A program that writes a page it holds
 * to read writes the next ones soon (LU its block columns, FFT its rows,
 * which its read faults brought along read-only), and each would take a
 * SIGSEGV and an mprotect of its own: 21-23 us on the hosts of 2026-11-28,
 * against about 4 us a page (its twin included) in a run of 32.  The run
 * ends at the first page that is no such copy, or a sample (the reach must
 * see its first access), or when no twin is left; a page opened so and
 * left unchanged closes at the next flush. */
static void open_written(uint32_t page)
{
	uint32_t end = page + 1;
	uint64_t last = (uint64_t)page + prefetch_pages;

	twin_or_die(page);
	while (end < R.npages && end <= last && R.state[end] == PAGE_READ &&
	       !is_closed(end) && twin_page(end))
		end++;
	open_pages(page, end - page, PROT_READ | PROT_WRITE);
	R.stats.write_faults++;
	R.stats.written_ahead += end - page - 1;
}

/* Called with the lock held.  A fault that finds the page's state open
 * for its access was raced by another thread, or hit a page whose view
 * a protection change left closed when it could not open it again
 * (protect_window): the page is given its state's protection again (no
 * change in the first case) and the access retried. */
static void serve_fault(uint32_t page, enum fault_access access)
{
	bool sample;

	switch (R.state[page]) {
	case PAGE_INVALID:
		fetch_with_neighbours(page, access);
		if (access == ACCESS_WRITE)
			R.stats.write_faults++;
		else
			R.stats.read_faults++;
		return;
	case PAGE_READ:
		sample = is_closed(page);
		if (sample) {
			/* a sample's first touch: the data is here */
			set_closed(page, false);
			lm_reach_touched(&R.reach, page);
			if (access == ACCESS_READ) {
				open_page(page, PROT_READ);
				give_view(page, false);
				return;
			}
		}
		if (access != ACCESS_READ) {
			open_written(page);
			if (sample)
				give_view(page, true);
		} else {
			open_page(page, PROT_READ);
		}
		return;
	default:
		open_page(page, PROT_READ | PROT_WRITE);
		return;
	}
}

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t addr = (uintptr_t)si->si_addr;
	enum fault_access access;
	int saved_errno = errno;

	/* addr below base wraps around to a huge offset */
	if (!atomic_load_explicit(&R.active, memory_order_acquire) ||
	    addr - R.base >= R.size) {
		chain(sig, si, uctx);
		errno = saved_errno;
		return;
	}
	access = fault_access(uctx);
	if (access == ACCESS_EXEC) {
		chain(sig, si, uctx);
		errno = saved_errno;
		return;
	}
	lock();
	serve_fault((uint32_t)((addr - R.base) >> R.page_shift), access);
	unlock();
	errno = saved_errno;
}

/* ---- set-up and tear-down -------------------------------------------- */

/* Frees what init built; keeps the statistics and the lock word. */
static void release_all(void)
{
	struct lm_region_stats stats = R.stats;

	for (uint32_t i = 0; i < R.nchunks; i++)
		munmap(R.chunks[i], (size_t)R.chunk_pages * R.page_size);
	if (R.view)
		munmap(R.view, R.size);
	if (R.rw)
		munmap(R.rw, R.size);
	if (R.fd >= 0)
		close(R.fd);
	free(R.chunks);
	free(R.state);
	free(R.version);
	free(R.twin);
	free(R.dirty);
	free(R.open);
	free(R.next_open);
	free(R.changed);
	free(R.idle);
	free(R.marks);
	free(R.rw_mapped);
	free(R.view_given);
	free(R.closed);
	free(R.scratch);
	free(R.out);
	R.base = 0;
	R.size = 0;
	R.page_size = 0;
	R.page_shift = 0;
	R.npages = 0;
	R.fd = -1;
	R.view = NULL;
	R.rw = NULL;
	memset(&R.be, 0, sizeof(R.be));
	R.ctx = NULL;
	R.state = NULL;
	R.version = NULL;
	R.twin = NULL;
	R.dirty = NULL;
	R.ndirty = 0;
	R.open = NULL;
	R.nopen = 0;
	R.next_open = NULL;
	R.changed = NULL;
	R.idle = NULL;
	R.marks = NULL;
	R.rw_mapped = NULL;
	R.view_given = NULL;
	R.closed = NULL;
	R.mark_lo = UINT32_MAX;
	R.mark_hi = 0;
	R.free_twins = NULL;
	R.chunks = NULL;
	R.nchunks = R.max_chunks = R.chunk_pages = 0;
	R.scratch = NULL;
	R.scratch_cap = 0;
	R.out = NULL;
	R.out_cap = 0;
	memset(&R.old_action, 0, sizeof(R.old_action));
	R.stats = stats;
}

static int geometry_check(uint64_t base, uint64_t size, uint32_t page_size,
			  char *err, size_t errlen)
{
	long os_page = sysconf(_SC_PAGESIZE);

	if (os_page <= 0)
		os_page = 4096;
	if (page_size == 0 || (page_size & (page_size - 1)) != 0 ||
	    page_size % (uint64_t)os_page != 0) {
		snprintf(err, errlen, "page size %u is not a power-of-two "
			 "multiple of the system page size %ld", page_size,
			 os_page);
		return LM_EINVAL;
	}
	if (size == 0 || size % page_size != 0) {
		snprintf(err, errlen, "region size %llu is not a positive "
			 "multiple of the page size %u",
			 (unsigned long long)size, page_size);
		return LM_EINVAL;
	}
	if (size / page_size > UINT32_MAX) {
		snprintf(err, errlen, "region of %llu bytes has more than "
			 "2^32-1 pages", (unsigned long long)size);
		return LM_EINVAL;
	}
	if (base == 0 || base % page_size != 0) {
		snprintf(err, errlen, "region base 0x%llx is not a nonzero "
			 "multiple of the page size %u",
			 (unsigned long long)base, page_size);
		return LM_EINVAL;
	}
	if (base + size < base) {
		snprintf(err, errlen, "region 0x%llx + %llu bytes does not fit "
			 "the address space", (unsigned long long)base,
			 (unsigned long long)size);
		return LM_EINVAL;
	}
	return 0;
}

static int map_region(uint64_t base, uint64_t size, char *err, size_t errlen)
{
	void *view;

	R.fd = memfd_create("lemuria-region", MFD_CLOEXEC);
	if (R.fd < 0) {
		snprintf(err, errlen, "memfd_create: %s", strerror(errno));
		return LM_EIO;
	}
	if (ftruncate(R.fd, (off_t)size) != 0) {
		snprintf(err, errlen, "cannot size the region's memfd to %llu "
			 "bytes: %s", (unsigned long long)size,
			 strerror(errno));
		return LM_EIO;
	}
	view = mmap((void *)(uintptr_t)base, size, PROT_NONE,
		    MAP_SHARED | MAP_FIXED_NOREPLACE, R.fd, 0);
	if (view == MAP_FAILED) {
		snprintf(err, errlen, "cannot map the shared region at 0x%llx "
			 "(%llu bytes): %s", (unsigned long long)base,
			 (unsigned long long)size,
			 errno == EEXIST ? "address range already in use" :
					   strerror(errno));
		return LM_EIO;
	}
	if ((uintptr_t)view != base) {
		/* a kernel older than 4.17 takes the flag as a mere hint */
		munmap(view, size);
		snprintf(err, errlen, "cannot map the shared region at 0x%llx "
			 "(%llu bytes): the kernel placed it elsewhere",
			 (unsigned long long)base, (unsigned long long)size);
		return LM_EIO;
	}
	R.view = view;
	R.size = size;
	R.rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, R.fd, 0);
	if (R.rw == MAP_FAILED) {
		R.rw = NULL;
		snprintf(err, errlen, "cannot map the region's second view "
			 "(%llu bytes): %s", (unsigned long long)size,
			 strerror(errno));
		return LM_EIO;
	}
	return 0;
}

int lm_region_init(uint64_t base, uint64_t size, uint32_t page_size,
		   const struct lm_region_backend *be, void *ctx, char *err,
		   size_t errlen)
{
	struct sigaction sa;
	char scratch_err[8];
	int rc;

	if (!err) {
		err = scratch_err;
		errlen = sizeof(scratch_err);
	}
	if (atomic_load(&R.active)) {
		snprintf(err, errlen, "the shared region is already "
			 "initialised");
		return LM_EINVAL;
	}
	if (!be || !be->fetch) {
		snprintf(err, errlen, "no fetch function for the region");
		return LM_EINVAL;
	}
	rc = geometry_check(base, size, page_size, err, errlen);
	if (rc)
		return rc;

	memset(&R.stats, 0, sizeof(R.stats));
	memset(R.streams, 0, sizeof(R.streams));
	R.fault_clock = 0;
	lm_reach_init(&R.reach, prefetch_pages);
	R.base = (uintptr_t)base;
	R.page_size = page_size;
	R.page_shift = (unsigned)__builtin_ctz(page_size);
	R.npages = (uint32_t)(size / page_size);
	R.be = *be;
	R.ctx = ctx;
	rc = map_region(base, size, err, errlen);
	if (rc)
		goto fail;

	rc = LM_ENOMEM;
	R.chunk_pages = R.npages < TWIN_CHUNK_PAGES ? R.npages
						     : TWIN_CHUNK_PAGES;
	R.max_chunks = (R.npages + R.chunk_pages - 1) / R.chunk_pages;
	R.chunks = calloc(R.max_chunks, sizeof(*R.chunks));
	R.state = calloc(R.npages, sizeof(*R.state));
	R.version = calloc(R.npages, sizeof(*R.version));
	R.twin = calloc(R.npages, sizeof(*R.twin));
	R.dirty = calloc(R.npages, sizeof(*R.dirty));
	R.open = calloc(R.npages, sizeof(*R.open));
	R.next_open = calloc(R.npages, sizeof(*R.next_open));
	R.changed = calloc(R.npages, sizeof(*R.changed));
	R.idle = calloc(R.npages, sizeof(*R.idle));
	R.marks = calloc(bitmap_words(R.npages), sizeof(*R.marks));
	R.rw_mapped = calloc(bitmap_words(R.npages), sizeof(*R.rw_mapped));
	R.view_given = calloc(bitmap_words(R.npages), sizeof(*R.view_given));
	R.closed = calloc(bitmap_words(R.npages), sizeof(*R.closed));
	R.scratch_cap = lm_diff_bound(page_size);
	R.scratch = malloc(R.scratch_cap);
	if (!R.chunks || !R.state || !R.version || !R.twin || !R.dirty ||
	    !R.open || !R.next_open || !R.changed || !R.idle || !R.marks ||
	    !R.rw_mapped || !R.view_given || !R.closed || !R.scratch) {
		snprintf(err, errlen, "no memory for the page table of %u "
			 "pages", R.npages);
		goto fail;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &R.old_action) != 0) {
		snprintf(err, errlen, "cannot install the SIGSEGV handler: %s",
			 strerror(errno));
		rc = LM_EIO;
		goto fail;
	}
	atomic_store(&R.active, 1);
	return 0;
fail:
	release_all();
	return rc;
}

void lm_region_fini(void)
{
	if (!atomic_load(&R.active))
		return;
	lock();
	sigaction(SIGSEGV, &R.old_action, NULL);
	atomic_store(&R.active, 0);
	release_all();
	unlock();
}

int lm_region_contains(const void *addr)
{
	return atomic_load(&R.active) && (uintptr_t)addr - R.base < R.size;
}

/* ---- protection changes in batches -----------------------------------
 * A flush or a list of notices gives many pages the same protection, often
 * adjacent ones in any order (LU's notices name thousands of pages, in
 * runs).  Marked in a bitmap, they are walked in address order and changed
 * with one mprotect per run of adjacent marked pages. */

static void mark(uint32_t page)
{
	bit_put(R.marks, page, true);
	if (page < R.mark_lo)
		R.mark_lo = page;
	if (page >= R.mark_hi)
		R.mark_hi = page + 1;
}

/* The first page in [from, end) whose mark is `set`, or end. */
static uint32_t next_mark(uint32_t from, uint32_t end, bool set)
{
	uint64_t p = from; /* 64 bits: rounding up may pass UINT32_MAX */

	while (p < end) {
		uint64_t w = R.marks[p / 64];

		if (!set)
			w = ~w;
		w &= ~(uint64_t)0 << (p % 64);
		if (w) {
			p = p - p % 64 + (uint64_t)__builtin_ctzll(w);
			return p < end ? (uint32_t)p : end;
		}
		p = p - p % 64 + 64;
	}
	return end;
}

static void clear_marks(void)
{
	uint32_t lo = R.mark_lo, hi = R.mark_hi;

	if (lo < hi)
		memset(&R.marks[lo / 64], 0,
		       ((hi - 1) / 64 - lo / 64 + 1) * sizeof(*R.marks));
	R.mark_lo = UINT32_MAX;
	R.mark_hi = 0;
}

static bool is_marked(uint32_t page)
{
	return bit_get(R.marks, page);
}

/* The protection a page's state gives it in the view: none for an
 * invalid page or a closed sample, read-only for a clean copy in the
 * open, read-write for a page with a twin or a private one. */
static int state_prot(uint32_t page)
{
	switch (R.state[page]) {
	case PAGE_INVALID:
		return PROT_NONE;
	case PAGE_READ:
		return is_closed(page) ? PROT_NONE : PROT_READ;
	default:
		return PROT_READ | PROT_WRITE;
	}
}

/* Whether the view gives an unmarked page prot already, so that a run may
 * take it in and leave it as it was. */
static bool view_has(uint32_t page, int prot)
{
	return state_prot(page) == prot;
}

/* The end of the run of marked pages from `first`, carried across every
 * gap whose pages the view gives prot already: fewer calls, each a TLB
 * flush (a page at a time up to 33 pages, then one whole flush), which a
 * host that shadows the guest's page tables charges dearly
 * (docs/performance.md, "Page faults"). */
static uint32_t run_end(uint32_t first, uint32_t hi, int prot)
{
	uint32_t end = next_mark(first, hi, false);

	for (;;) {
		uint32_t next = next_mark(end, hi, true), gap = end;

		while (gap < next && view_has(gap, prot))
			gap++;
		if (next == hi || gap < next)
			return end;
		end = next_mark(next, hi, false);
	}
}

/* What a page of a window ends with: prot if marked, else its state's. */
static int wanted(uint32_t page, int prot)
{
	return is_marked(page) ? prot : state_prot(page);
}

/* Gives the pages of [first, end) want, one at a time after a call on
 * all of them failed (it may have changed some; a single page's call is
 * not made again): a page alone lies in one mapping, so its call changes
 * it or fails leaving it as it was.  A marked page that keeps its old
 * protection goes to failed.  Unmarked pages are done too when
 * `reopening` (protect_window closed them, so one that fails stays
 * closed: a clean copy is dropped, fetched again when read, a writable
 * page opens at its next fault, serve_fault); else they have want
 * already.  Returns 0 or LM_ENOMEM (a marked page failed). */
static int protect_each(uint32_t first, uint32_t end, int want,
			bool reopening, void (*failed)(uint32_t page))
{
	int rc = 0;

	for (uint32_t i = first; i < end; i++) {
		if (!reopening && !is_marked(i))
			continue;
		if (end - first > 1 && view_protect(i, 1, want) == 0)
			continue;
		if (!is_marked(i)) {
			if (R.state[i] == PAGE_READ)
				R.state[i] = PAGE_INVALID;
			continue;
		}
		rc = LM_ENOMEM;
		if (failed)
			failed(i);
	}
	return rc;
}

/* The marked pages of [lo, hi) with prot, one mprotect per run (per page
 * when batching is off).  A run whose call fails is retried a page at a
 * time; the pages of a gap had prot before and have it still. */
static int protect_runs(uint32_t lo, uint32_t hi, int prot,
			void (*failed)(uint32_t page))
{
	uint32_t p = lo;
	int rc = 0;

	while ((p = next_mark(p, hi, true)) < hi) {
		uint32_t end = batching ? run_end(p, hi, prot) : p + 1;

		if (view_protect(p, end - p, prot) != 0 &&
		    protect_each(p, end, prot, false, failed) != 0)
			rc = LM_ENOMEM;
		p = end;
	}
	return rc;
}

/* The pages of [lo, hi) that want some access given it again after
 * protect_window closed them: in pass 0 the writable ones, in pass 1 the
 * others; the marked ones too unless `marked_done`. */
static int reopen(uint32_t lo, uint32_t hi, int prot, int pass,
		  bool marked_done, void (*failed)(uint32_t page))
{
	int rc = 0;

	for (uint32_t p = lo, end; p < hi; p = end) {
		int want = wanted(p, prot);

		end = p + 1;
		if (marked_done && is_marked(p))
			continue;
		while (end < hi && wanted(end, prot) == want &&
		       !(marked_done && is_marked(end)))
			end++;
		if (want == PROT_NONE ||
		    (want == (PROT_READ | PROT_WRITE)) != (pass == 0))
			continue;
		if (view_protect(p, end - p, want) != 0 &&
		    protect_each(p, end, want, true, failed) != 0)
			rc = LM_ENOMEM;
	}
	return rc;
}

/* [*wlo, *whi): [lo, hi) widened past FLUSH_CEILING pages, inside the
 * region. */
static void widen(uint32_t lo, uint32_t hi, uint32_t *wlo, uint32_t *whi)
{
	*wlo = lo;
	*whi = hi;
	if (hi - lo > FLUSH_CEILING)
		return;
	*whi = lo + FLUSH_CEILING + 1;
	if (*whi > R.npages) {
		*whi = R.npages;
		*wlo = R.npages > FLUSH_CEILING ? R.npages - FLUSH_CEILING - 1
						: 0;
	}
}

/* Whether protect_window costs less than protect_runs for the marked
 * pages of [lo, hi), in units of a page's flush: in runs of LU and Ocean
 * on the hosts of 2026-11-28 a call costs about as much as four of them,
 * and so does a whole flush.  Runs: a call each, and a flush a changed
 * page up to the ceiling, one whole flush beyond.  A window: the call
 * that closes it, its flush, and a call per run opened again.  LU closes
 * runs of 20-30 pages (a window pays); Ocean invalidates a few pages
 * among many that stay (runs pay). */
static bool window_pays(uint32_t lo, uint32_t hi, int prot)
{
	uint32_t wlo, whi, p = lo;
	uint64_t runs = 0, window = 2 * CALL_FLUSHES;

	while ((p = next_mark(p, hi, true)) < hi) {
		uint32_t end = run_end(p, hi, prot), k = 0;

		for (uint32_t q = p; q < end; q++)
			k += is_marked(q);
		runs += CALL_FLUSHES + (k > FLUSH_CEILING ? CALL_FLUSHES : k);
		p = end;
	}
	widen(lo, hi, &wlo, &whi);
	for (p = wlo; p < whi && window < runs;) {
		int want = wanted(p, prot);

		for (p++; p < whi && wanted(p, prot) == want; p++)
			;
		if (want != PROT_NONE)
			window += CALL_FLUSHES;
	}
	return window < runs;
}

/* The marked pages of [lo, hi) with prot, in one TLB flush: the kernel
 * flushes a page at a time up to FLUSH_CEILING changed pages, each a
 * hypercall on the hosts of 2026-11-28 (15-100 us in a run of LU), and
 * the whole TLB beyond, for about as much as one page.  So the window,
 * widened past the ceiling, is closed by one call, and each run of its
 * pages that keep or take an access is opened again: from no access,
 * which takes no flush.  Closing merges the window's mappings into one,
 * so the writable runs, opened first, find the mappings they split off
 * again; a run that cannot be opened is handled as protect_each says.
 * When the closing call fails (a split at an end of the window), the
 * marked pages are done run by run, as without windows, and the others
 * opened again.  Returns 0 or LM_ENOMEM (a marked page failed). */
static int protect_window(uint32_t lo, uint32_t hi, int prot,
			  void (*failed)(uint32_t page))
{
	uint32_t wlo, whi;
	bool done;
	int rc = 0, r;

	widen(lo, hi, &wlo, &whi);
	/* when the call fails, it may have closed all but its last mapping */
	done = view_protect(wlo, whi - wlo, PROT_NONE) != 0;
	if (done)
		rc = protect_runs(lo, hi, prot, failed);
	for (int pass = 0; pass < 2; pass++)
		if ((r = reopen(wlo, whi, prot, pass, done, failed)) != 0)
			rc = r;
	return rc;
}

/* One past the last marked page of the window that starts at `first`:
 * marked pages at most WINDOW_GAP apart share one. */
static uint32_t window_end(uint32_t first, uint32_t hi)
{
	uint32_t last = first, next;

	while ((next = next_mark(last + 1, hi, true)) < hi &&
	       next - last <= WINDOW_GAP)
		last = next;
	return last + 1;
}

/* Gives every marked page prot and clears the marks: each window of
 * marked pages by protect_window's single flush when that costs less
 * (window_pays), else run by run.  Each marked page that keeps its old
 * protection is passed to failed (may be NULL).  Returns 0 or LM_ENOMEM
 * (a page failed). */
static int protect_marked(int prot, void (*failed)(uint32_t page))
{
	uint32_t hi = R.mark_hi, p = R.mark_lo;
	int rc = 0, r;

	while ((p = next_mark(p, hi, true)) < hi) {
		uint32_t end = window_end(p, hi);

		if (batching && window_pays(p, end, prot))
			r = protect_window(p, end, prot, failed);
		else
			r = protect_runs(p, end, prot, failed);
		if (r)
			rc = r;
		p = end;
	}
	clear_marks();
	return rc;
}

/* ---- release and acquire --------------------------------------------- */

/* The pages a flush looks at: those the last one left open, then those
 * written since (the dirty list).  written(i, &page) gives the i-th, i <
 * R.nopen + R.ndirty, or false for an open entry whose page was closed
 * since (invalidated; if it was written again, its dirty entry comes
 * later, so a page is looked at once). */
static bool written(uint32_t i, uint32_t *page)
{
	if (i >= R.nopen) {
		*page = R.dirty[i - R.nopen];
		return true;
	}
	*page = R.open[i];
	return R.state[*page] == PAGE_OPEN;
}

static int out_reserve(size_t need)
{
	size_t cap = R.out_cap ? R.out_cap : OUT_MIN_CAP;
	uint8_t *p;

	if (need <= R.out_cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(R.out, cap);
	if (!p)
		return LM_ENOMEM;
	R.out = p;
	R.out_cap = cap;
	return 0;
}

/* Encodes the written pages into R.out and notes in R.changed which had
 * a diff.  The pages stay writable: a byte another thread writes meanwhile
 * is either in the diff or differs from the twin afterwards (the twin
 * takes the diff, not the page), so the next flush finds it. */
static int encode_written(size_t *used, uint32_t *count)
{
	uint32_t page;

	*used = 0;
	*count = 0;
	for (uint32_t i = 0; i < R.nopen + R.ndirty; i++) {
		size_t dlen;
		int rc;

		if (!written(i, &page))
			continue;
		rc = lm_diff_encode(R.twin[page], R.rw + page_off(page),
				    R.page_size, R.scratch, R.scratch_cap,
				    &dlen);
		if (rc)
			return rc;
		R.changed[page] = dlen != 0;
		if (dlen == 0)
			continue;
		rc = out_reserve(*used + DIFFS_ENTRY_HDR + dlen);
		if (rc)
			return rc;
		rc = lm_msg_diffs_append(R.out, R.out_cap, used, page,
					 R.scratch, dlen);
		if (rc)
			return rc;
		(*count)++;
	}
	return 0;
}

/* A page a flush leaves read-only (unchanged for long enough, or it
 * could not be opened again): a clean copy without a twin. */
static void close_copy(uint32_t page)
{
	twin_put(R.twin[page]);
	R.twin[page] = NULL;
	R.state[page] = PAGE_READ;
}

/* The i-th entry of the lists a flush walks, stale or not. */
static uint32_t written_entry(uint32_t i)
{
	return i < R.nopen ? R.open[i] : R.dirty[i - R.nopen];
}

/* A page the flush meant to close but could not write-protect: it stays
 * open, twin and all, for the next flush. */
static uint32_t nnext_open;

static void stay_open(uint32_t page)
{
	R.state[page] = PAGE_OPEN;
	R.next_open[nnext_open++] = page;
}

/* The pages in PAGE_CLOSING, read-only now: a write another thread made
 * since their encoding (none, single-threaded) goes out with this flush,
 * then each drops its twin.  Room in R.out was reserved. */
static void close_unchanged(size_t *used, uint32_t *count)
{
	for (uint32_t i = 0; i < R.nopen + R.ndirty; i++) {
		uint32_t page = written_entry(i);
		size_t dlen = 0;

		if (R.state[page] != PAGE_CLOSING)
			continue;
		if (lm_diff_encode(R.twin[page], R.rw + page_off(page),
				   R.page_size, R.scratch, R.scratch_cap,
				   &dlen) == 0 && dlen &&
		    lm_msg_diffs_append(R.out, R.out_cap, used, page,
					R.scratch, dlen) == 0)
			(*count)++;
		close_copy(page);
	}
}

int lm_region_flush(const uint8_t **diffs, size_t *len, uint32_t *count)
{
	struct lm_msg_diffs sent;
	size_t used, pos = 0, dlen;
	uint32_t n, closing = 0, dpage;
	const uint8_t *diff;
	int rc;

	if (!atomic_load(&R.active))
		return LM_EINVAL;
	lock();
	rc = encode_written(&used, &n);
	if (rc != 0) {
		unlock(); /* nothing changed: the next flush sends it all */
		return rc;
	}
	/* A page that changed is likely written again soon (LU's blocks
	 * are, step after step): it stays open, its twin now what was sent,
	 * and costs a comparison at each flush instead of a write fault and
	 * two mprotects.  It closes and drops its twin after OPEN_IDLE_MAX
	 * flushes in a row found it unchanged (at once if it was faulted in
	 * and not changed).  Each page is looked at once (see written), so
	 * the new list has no page twice. */
	sent = (struct lm_msg_diffs){ R.out, used, n };
	nnext_open = 0;
	for (uint32_t i = 0; i < R.nopen + R.ndirty; i++) {
		uint32_t page;

		if (!written(i, &page))
			continue;
		if (R.changed[page] &&
		    lm_msg_diffs_next(&sent, &pos, &dpage, &diff, &dlen) == 1 &&
		    dpage == page) {
			R.idle[page] = 0;
			lm_diff_apply_valid(R.twin[page], diff, dlen);
		} else if (R.state[page] != PAGE_OPEN ||
			   ++R.idle[page] >= OPEN_IDLE_MAX) {
			R.state[page] = PAGE_CLOSING;
			closing++;
			mark(page);
			continue;
		}
		R.state[page] = PAGE_OPEN;
		R.next_open[nnext_open++] = page;
	}
	/* Closing pages are write-protected before their last look, so no
	 * write slips between it and the twin's end; without room for what
	 * such a write would add, they all stay open. */
	if (closing && out_reserve(used + (size_t)closing *
				   (DIFFS_ENTRY_HDR + R.scratch_cap)) != 0) {
		for (uint32_t i = 0; i < R.nopen + R.ndirty; i++) {
			uint32_t page = written_entry(i);

			if (R.state[page] == PAGE_CLOSING)
				stay_open(page);
		}
		clear_marks();
	} else {
		protect_marked(PROT_READ, stay_open);
		close_unchanged(&used, &n);
	}
	{
		uint32_t *t = R.open;

		R.open = R.next_open;
		R.next_open = t;
	}
	R.nopen = nnext_open;
	R.ndirty = 0;
	R.stats.flushed_pages += n;
	R.stats.flushed_bytes += used;
	*diffs = R.out;
	*len = used;
	*count = n;
	unlock();
	return 0;
}

/* A page its notice invalidated but mprotect could not close: it is still
 * accessible, so it stays valid at its version (and open, if it was: it
 * still has its twin). */
static void keep_unclosed(uint32_t page)
{
	R.state[page] = R.twin[page] ? PAGE_OPEN : PAGE_READ;
	R.stats.invalidations--;
}

/* A clean copy: read-only, or left open by the last flush. */
static bool is_clean(uint32_t page)
{
	return R.state[page] == PAGE_READ || R.state[page] == PAGE_OPEN;
}

/* The update for n->page, when the next entry of the list (walked in
 * notice order from *pos) is for that page and well formed; else NULL. */
static const uint8_t *next_update(const struct lm_msg_diffs *u, size_t *pos,
				  uint32_t page, size_t *len)
{
	size_t at = *pos;
	uint32_t upage;
	const uint8_t *diff;

	if (!u || lm_msg_diffs_next(u, &at, &upage, &diff, len) != 1 ||
	    upage != page)
		return NULL;
	*pos = at;
	return diff; /* checked as it is applied */
}

int lm_region_apply_notices(const struct lm_notice *n, uint32_t count,
			    uint32_t self_rank)
{
	return lm_region_apply_release(n, count, self_rank, NULL);
}

/* An update written into a clean copy through the private mapping (and
 * into an open page's twin): false when it is malformed. */
static bool apply_update(uint32_t page, const uint8_t *update, size_t len)
{
	rw_touch(page);
	return lm_diff_apply_checked(R.rw + page_off(page),
				     R.state[page] == PAGE_OPEN ? R.twin[page]
								: NULL,
				     R.page_size, update, len) == 0;
}

int lm_region_apply_release(const struct lm_notice *n, uint32_t count,
			    uint32_t self_rank,
			    const struct lm_msg_diffs *updates)
{
	size_t upos = 0;
	int rc = 0;

	if (!atomic_load(&R.active) || (count && !n))
		return LM_EINVAL;
	lock();
	/* the samples the program did not read by now went unread */
	lm_reach_settle(&R.reach);
	/* Check everything first so that a refused list changes nothing. */
	for (uint32_t i = 0; i < count; i++) {
		uint32_t page = n[i].page;

		if (page >= R.npages ||
		    (R.state[page] == PAGE_WRITE &&
		     R.version[page] < n[i].version)) {
			rc = LM_EINVAL;
			goto out;
		}
	}
	/* I3: only a copy older than the notice goes, so a notice applied
	 * twice, or after a newer fetch, does nothing.
	 * Sole writer: a clean copy at base is the home's page at base plus
	 * our own writes, all flushed; the home applied our lists and no one
	 * else's from base to the notice's version, so the copy holds that
	 * version, plus at most our lists applied after it (as after any
	 * flush).  A copy the lemuriad gave us at base may hold other ranks'
	 * diffs too, but those reached the home after base and before our
	 * first list, so the writer would be LM_WRITER_MANY.
	 * The pages are closed after the loop, in runs: the lock keeps every
	 * fault waiting until then. */
	for (uint32_t i = 0; i < count; i++) {
		uint32_t page = n[i].page;
		const uint8_t *update;
		size_t ulen;

		update = next_update(updates, &upos, page, &ulen);
		if (R.state[page] == PAGE_INVALID ||
		    R.state[page] == PAGE_PRIVATE ||
		    R.version[page] >= n[i].version)
			continue;
		if (is_clean(page) && n[i].writer == self_rank &&
		    R.version[page] == n[i].base) {
			R.version[page] = n[i].version;
			R.stats.kept++;
			continue;
		}
		/* Update: the lemuriad's copy at the notice's version with
		 * every byte its clients wrote in the epoch; our clean copy
		 * at base differs from it in those bytes only (docs/dsm.md
		 * "Updates").  Written through the private mapping. */
		if (update && is_clean(page) && R.version[page] == n[i].base &&
		    apply_update(page, update, ulen)) {
			/* (an open page's twin takes it too: not ours to
			 * send at the next flush) */
			R.version[page] = n[i].version;
			R.stats.updated++;
			continue;
		}
		/* no update, or a malformed one, part of which may be
		 * written by now: the copy goes (a sample's view is closed
		 * already) */
		R.state[page] = PAGE_INVALID;
		R.stats.invalidations++;
		if (is_closed(page))
			set_closed(page, false);
		else
			mark(page);
	}
	rc = protect_marked(PROT_NONE, keep_unclosed);
	/* open pages now closed give their twins back */
	for (uint32_t i = 0; i < count; i++) {
		uint32_t page = n[i].page;

		if (R.state[page] == PAGE_INVALID && R.twin[page]) {
			twin_put(R.twin[page]);
			R.twin[page] = NULL;
		}
	}
out:
	unlock();
	return rc;
}

int lm_region_make_private(void)
{
	int rc = 0;

	if (!atomic_load(&R.active))
		return LM_EINVAL;
	lock();
	/* Only untouched: every page invalid, so the memory holds zeros,
	 * which is what the homes hold at the start of a run. */
	for (uint32_t p = 0; p < R.npages; p++)
		if (R.state[p] != PAGE_INVALID) {
			rc = LM_EINVAL;
			goto out;
		}
	if (mprotect(R.view, R.size, PROT_READ | PROT_WRITE) != 0) {
		rc = errno == ENOMEM ? LM_ENOMEM : LM_EIO;
		goto out;
	}
	R.stats.mprotects++;
	memset(R.state, PAGE_PRIVATE, R.npages);
out:
	unlock();
	return rc;
}

void lm_region_stats(struct lm_region_stats *out)
{
	lock();
	*out = R.stats;
	for (int k = 0; k < LM_REACH_KINDS; k++) {
		out->reach[k] = R.reach.depth[k];
		out->samples[k] = R.reach.stats.samples[k];
		out->samples_read[k] = R.reach.stats.read[k];
		out->reach_changes[k] = R.reach.stats.deeper[k] +
					R.reach.stats.shallower[k];
	}
	unlock();
}

void lm_region_set_prefetch(uint32_t pages)
{
	lock();
	prefetch_pages = pages < LM_REGION_PREFETCH_MAX ?
			 pages : LM_REGION_PREFETCH_MAX;
	lm_reach_init(&R.reach, prefetch_pages);
	unlock();
}

void lm_region_set_batching(int on)
{
	lock();
	batching = on != 0;
	unlock();
}

uint32_t lm_region_page_version(uint32_t page)
{
	uint32_t v = UINT32_MAX;

	if (!atomic_load(&R.active))
		return v;
	lock();
	if (page < R.npages && R.state[page] != PAGE_INVALID)
		v = R.version[page];
	unlock();
	return v;
}
