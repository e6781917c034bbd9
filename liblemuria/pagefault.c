/* The SIGSEGV handler and the fault service (DESIGN.md §2 "Faults",
 * docs/dsm.md 2-4 and "Neighbour pages"), under region.c: a fault on the
 * region fetches the page through the backend (and the pages it brings
 * along), twins a page about to be written and opens the view for the
 * access; any other fault goes to the handler installed before.
 *
 * Off x86-64 the fault's access kind is not decoded: a fault on an
 * invalid page is served as a read and the write, if it was one, faults
 * again on the read-only page and is served then.
 *
 * What the handler may call.  Its own work makes no malloc: twins come
 * from the pool of mmap'd chunks (mapping.c), the fault's lists live on
 * its stack, messages are written with write(2).  The backend
 * (client.c) does malloc and free (the request's encoding, the reply's
 * buffer).  That is safe because the handler never runs inside malloc:
 * SIGSEGV is synchronous, raised by the faulting access itself, and the
 * handler serves only accesses to the region, which malloc never makes
 * (the region is a fixed mapping of its own, not the heap); no other
 * signal handler may touch the region (region.h), so none can fault into
 * it from inside malloc either.  A thread of the program holding
 * malloc's lock while another faults makes the faulting thread wait in
 * malloc as any caller does; that thread does not wait for the region's
 * lock meanwhile (it takes it only in a fault, which is not in malloc,
 * or in an lm_region_* call, which it is not in while inside malloc), so
 * the wait ends.  The one condition left is the program's: an allocator
 * of its own that keeps its heap in the region would break this. */
#include "pagefault.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "lm_error.h"
#include "mapping.h"
#include "mem.h"
#include "reach.h"
#include "region_state.h"

enum fault_access {
	ACCESS_UNKNOWN, /* not decoded on this architecture */
	ACCESS_READ,
	ACCESS_WRITE,
	ACCESS_EXEC, /* instruction fetch: never ours to serve */
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

static struct stream streams[STREAMS];
static uint64_t fault_clock; /* read faults so far, to age the streams */
static struct sigaction old_action; /* restored by remove, chained to */

/* Messages from the signal handler: snprintf is not async-signal-safe,
 * so a fatal message is assembled by hand and written with write(2). */

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
	sigmsg_num(&m, R->base + lm_page_off(page), 16);
	sigmsg_str(&m, "): ");
	sigmsg_str(&m, why);
	sigmsg_str(&m, "\n");
	if (write(STDERR_FILENO, m.buf, m.len) < 0) {
		/* nothing left to report to */
	}
	abort();
}

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
	const struct sigaction *old = &old_action;
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
	if (lm_view_protect(first, n, prot) != 0)
		fault_fatal(first, "cannot open", errno == ENOMEM ?
			    "mprotect: out of memory (vm.max_map_count?)" :
			    "mprotect failed");
}

static void open_page(uint32_t page, int prot)
{
	open_pages(page, 1, prot);
}



/* Maps a page that a fault has just opened from no access into the
 * application's view, the first time, so that the access the fault
 * returns to finds it mapped: one system call instead of the page fault
 * that access would take, which costs more with its way back
 * (docs/performance.md, "Fault handling").  Once mapped, a page stays
 * mapped: its protection
 * changes, not its mapping.  Pages a fault opens besides its own are
 * marked as given without the call: most are read, and their first read
 * maps them. */
static void give_view(uint32_t page, bool write)
{
	void *p = R->view + lm_page_off(page);

	if (lm_bit_get(R->view_given, page))
		return;
	if (write)
		lm_mem_populate(p, R->page_size);
	else
		lm_mem_populate_read(p, R->page_size);
	lm_bit_put(R->view_given, page, true);
}

/* Maps a write fault's pages in the private mapping before they are
 * fetched, a run of adjacent pages to a call (mem.h): each is twinned
 * right after its copy, and a page the mapping holds takes both through
 * it without a fault, where one filled through the memory file would take
 * one at its twin (radix's write faults, which fetch their pages, are
 * slower so: docs/performance.md, "Fault handling"). */
static void map_for_twins(const uint32_t *pages, uint32_t n)
{
	for (uint32_t i = 0, k = 0; i < n; i++) {
		if (i + 1 < n && pages[i + 1] == pages[i] + 1)
			continue;
		/* pages[k..i] are adjacent: given from the first unmapped on */
		while (k <= i && lm_bit_get(R->rw_mapped, pages[k]))
			k++;
		if (k <= i)
			lm_mem_populate(R->rw + lm_page_off(pages[k]),
					lm_page_off(pages[i] - pages[k] + 1));
		for (; k <= i; k++)
			lm_rw_touch(pages[k]);
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
	rc = R->be.fetch(R->ctx, page, R->rw + lm_page_off(page), &version);
	if (rc != 0)
		fault_fatal(page, "cannot fetch", lm_strerror(rc));
	R->version[page] = version;
	R->stats.fetches++;
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
	struct stream *near = NULL, *old = &streams[0];
	int64_t best = LM_REGION_STRIDE_MAX + 1;

	fault_clock++;
	for (struct stream *s = streams; s < streams + STREAMS; s++) {
		int64_t d = (int64_t)page - s->last;

		if (!s->used) {
			old = s;
			continue;
		}
		if (s->stride && d % s->stride == 0 && d / s->stride <= 1 &&
		    d / s->stride > -(int64_t)R->prefetch) {
			s->used = fault_clock;
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
		near->used = fault_clock;
	} else {
		*old = (struct stream){ page, 0, fault_clock };
	}
	return NULL;
}

/* Adds `page` to a fault's list when it is in the region, invalid and
 * not listed yet. */
static void list_add(uint32_t *pages, uint32_t *n, int64_t page)
{
	if (page < 0 || page >= R->npages || R->state[page] != PAGE_INVALID)
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
	if (!lm_reach_sample(&R->reach, kind, came, &pick))
		return n;
	for (uint32_t i = from; i < to; i++)
		if (got[i] && pick-- == 0) {
			lm_reach_add(&R->reach, pages[i], kind);
			return i;
		}
	return n;
}

/* A copy about to be written: its twin taken, in the dirty list; false
 * when no twin could be had.  The caller opens it writable. */
static bool twin_page(uint32_t page)
{
	uint8_t *twin = lm_twin_get();

	if (!twin)
		return false;
	lm_rw_touch(page);
	memcpy(twin, R->rw + lm_page_off(page), R->page_size);
	R->twin[page] = twin;
	R->dirty[R->ndirty++] = page;
	R->state[page] = PAGE_WRITE;
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

	if (R->prefetch) {
		after = lm_reach_depth(&R->reach, LM_REACH_AFTER);
		s = stream_of(page);
	}
	pages[0] = page;
	for (uint32_t k = 1; k <= after; k++)
		list_add(pages, &n, (int64_t)page + k);
	along = n;
	if (s) {
		uint32_t deep = lm_reach_depth(&R->reach, LM_REACH_STRIDE);

		/* the stream goes on from the last page asked for, whether
		 * it was listed or is valid here already */
		for (uint32_t k = 1; k <= deep; k++)
			list_add(pages, &n, (int64_t)page + k * s->stride);
		s->last = (int64_t)page + deep * s->stride;
	}
	if (!R->be.fetch_list || n == 1) {
		fetch_page(page, write);
		R->state[page] = PAGE_READ;
		if (write)
			twin_or_die(page);
		open_page(page, prot);
		give_view(page, write);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		dst[i] = R->rw + lm_page_off(pages[i]);
	if (write)
		map_for_twins(pages, n);
	memset(got, 0, n);
	rc = R->be.fetch_list(R->ctx, pages, n, after, dst, versions, got);
	if (rc == 0 && !got[0])
		rc = LM_EBADMSG;
	if (rc != 0)
		fault_fatal(page, "cannot fetch", lm_strerror(rc));
	R->stats.fetches++;
	sample[0] = pick_sample(pages, got, 1, along, n, LM_REACH_AFTER);
	sample[1] = pick_sample(pages, got, along, n, n, LM_REACH_STRIDE);
	for (uint32_t i = 0; i < n; i++) {
		if (!got[i])
			continue;
		R->version[pages[i]] = versions[i];
		R->state[pages[i]] = PAGE_READ;
		if (i) {
			R->stats.prefetched++;
			R->stats.strided += i >= along;
		}
		if (i == sample[0] || i == sample[1]) {
			lm_page_set_closed(pages[i], true);
			continue;
		}
		if (write && i == 0)
			twin_or_die(page);
		else if (write && !twin_page(pages[i])) {
			/* no twin to spare: in place but closed, as a sample
			 * is, for its first access to open */
			lm_page_set_closed(pages[i], true);
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
		lm_bit_put(R->view_given, pages[i], true);
}

/* A write fault on a valid read-only copy: twins it and opens it
 * writable, and with it, in the same mprotect, the run of valid read-only
 * copies right after it, up to the layout's prefetch, each with its twin
 * (docs/dsm.md "Neighbour pages").  A program that writes a page it holds
 * to read writes the next ones soon (LU its block columns, FFT its rows,
 * which its read faults brought along read-only), and each would take a
 * SIGSEGV and an mprotect of its own, five times what a page costs (its
 * twin included) in a run of 32 (docs/performance.md, "Fault
 * handling").  The run
 * ends at the first page that is no such copy, or a sample (the reach must
 * see its first access), or when no twin is left; a page opened so and
 * left unchanged closes at the next flush. */
static void open_written(uint32_t page)
{
	uint32_t end = page + 1;
	uint64_t last = (uint64_t)page + R->prefetch;

	twin_or_die(page);
	while (end < R->npages && end <= last && R->state[end] == PAGE_READ &&
	       !lm_page_closed(end) && twin_page(end))
		end++;
	open_pages(page, end - page, PROT_READ | PROT_WRITE);
	R->stats.write_faults++;
	R->stats.written_ahead += end - page - 1;
}

/* copy = cluster: whether page q may open ahead of a fault's page with
 * the fault's access.  For a read, a closed view of a page the copy
 * holds at the version this process's notices ask for: what a read
 * fault would find and open.  For a write, a read-only view, which takes
 * the page's cluster twin first as a write fault would (the process
 * reads the run it writes: LU its columns, Ocean its rows), or such a
 * closed view of a page already twinned or owned by the cluster; not a
 * page nobody writes yet, whose twin would cost a comparison at each of
 * several seals, then a drop and a write-protection in every client. */
static bool shared_opens_ahead(uint32_t q, bool write)
{
	bool current = R->state[q] == PAGE_INVALID &&
		       lm_ccopy_holds(&R->ccopy, q, R->version[q]);

	/* a sample, ours or a cluster-mate's, stays closed: its first
	 * access must be seen */
	if (lm_ccopy_watched(&R->ccopy, q))
		return false;
	if (!write)
		return current;
	if (R->state[q] == PAGE_READ)
		return lm_ccopy_twin(&R->ccopy, q) == 0;
	return current && lm_ccopy_writable(&R->ccopy, q);
}

/* copy = cluster: one of the `after` pages that a fetch asked the
 * lemuriad to bring ahead of `page`, and that the fault's run left
 * closed, is watched for the cluster (lm_ccopy_watch): its first access
 * by any process of the cluster faults anyway and clears the mark, which
 * tells, at this process's next acquire, whether the cluster read it
 * (region.c; reach.h), so that the reach, which the lemuriad and the
 * page's home follow, is as deep as the cluster reads: the copy is the
 * cluster's, and a page fetched ahead for one process is often read by a
 * cluster-mate (FFT's transpose).  A page taken ahead from the cluster
 * that owns it costs that cluster a twin and seals until it owns it again
 * (docs/dsm.md "Neighbour pages").  No process's run opens a watched page
 * (shared_opens_ahead). */
static void sample_ahead(uint32_t page, uint32_t after)
{
	uint32_t closed = 0, pick;
	uint64_t end = (uint64_t)page + after;

	if (end >= R->npages)
		end = R->npages - 1;
	for (uint64_t q = page + 1; q <= end; q++)
		closed += R->state[q] == PAGE_INVALID;
	if (!lm_reach_sample(&R->reach, LM_REACH_AFTER, closed, &pick))
		return;
	for (uint64_t q = page + 1; q <= end; q++)
		if (R->state[q] == PAGE_INVALID && pick-- == 0) {
			lm_reach_add(&R->reach, (uint32_t)q, LM_REACH_AFTER);
			lm_ccopy_watch(&R->ccopy, (uint32_t)q);
			return;
		}
}

/* copy = cluster: the page comes from the cluster's copy.  The copy
 * serves the fault itself when it holds the page at the version this
 * process's notices ask for (R->version); else the lemuriad puts it there
 * first, and its answer is the word that the copy is now new enough for
 * us.  A write takes the page's cluster twin before the view opens for
 * it, so that the lemuriad's next seal finds the write.
 * The view opens with the run of pages right after it, up to the
 * layout's prefetch, that the same fault would open (shared_opens_ahead),
 * in one mprotect, and is mapped in the same call that maps them
 * (MADV_POPULATE_*): a program that reads or writes one page of the copy
 * goes on to the next ones (LU its columns, FFT its rows; a fetch brings
 * the run into the copy), and each would take a SIGSEGV, an mprotect and
 * a page fault of its own. */
static void serve_shared(uint32_t page, enum fault_access access)
{
	bool write = access == ACCESS_WRITE ||
		     (access == ACCESS_UNKNOWN && R->state[page] == PAGE_READ);
	uint64_t last = (uint64_t)page + R->prefetch;
	uint32_t end = page + 1, after = 0;
	bool fetched = false;
	int prot;

	/* a watched page read: ours is answered now, a cluster-mate's at
	 * its next acquire */
	if (lm_ccopy_watched(&R->ccopy, page) &&
	    lm_ccopy_seen(&R->ccopy, page) && R->reach.npending)
		lm_reach_touched(&R->reach, page);
	if (R->state[page] == PAGE_INVALID &&
	    !lm_ccopy_holds(&R->ccopy, page, R->version[page])) {
		uint32_t version = 0;
		int rc;

		if (R->prefetch)
			after = lm_reach_depth(&R->reach, LM_REACH_AFTER);
		rc = R->be.fetch_shared(R->ctx, page, after, &version);

		if (rc != 0)
			fault_fatal(page, "cannot fetch", lm_strerror(rc));
		if (!lm_ccopy_holds(&R->ccopy, page, version)) {
			struct sigmsg w = { .len = 0 };
			uint32_t have = 0;
			bool held = lm_ccopy_version(&R->ccopy, page, &have);

			sigmsg_str(&w, "the lemuriad answered with version ");
			sigmsg_num(&w, version, 10);
			sigmsg_str(&w, " but the cluster's copy ");
			sigmsg_str(&w, held ? "holds version " :
				   "lacks the page");
			if (held)
				sigmsg_num(&w, have, 10);
			if (lm_ccopy_is_owned(&R->ccopy, page))
				sigmsg_str(&w, " (owned)");
			w.buf[w.len] = '\0'; /* sigmsg_str leaves room */
			fault_fatal(page, "cannot fetch", w.buf);
		}
		R->version[page] = 0;
		R->stats.fetches++;
		fetched = true;
	}
	if (write) {
		if (lm_ccopy_twin(&R->ccopy, page) != 0)
			fault_fatal(page, "cannot write", "the page of the "
				    "cluster's copy stayed locked (did the "
				    "lemuriad die?)");
		if (R->state[page] != PAGE_PRIVATE)
			R->stats.write_faults++;
		R->state[page] = PAGE_PRIVATE;
	} else if (R->state[page] == PAGE_INVALID) {
		R->stats.read_faults++;
		R->state[page] = PAGE_READ;
	}
	/* a write, or a read that finds the page written since (raced) */
	write = R->state[page] == PAGE_PRIVATE;
	prot = write ? PROT_READ | PROT_WRITE : PROT_READ;
	while (end < R->npages && end <= last &&
	       shared_opens_ahead(end, write)) {
		R->state[end] = write ? PAGE_PRIVATE : PAGE_READ;
		end++;
	}
	open_pages(page, end - page, prot);
	R->stats.written_ahead += end - page - 1;
	if (write)
		lm_mem_populate(R->view + lm_page_off(page),
				(size_t)(end - page) * R->page_size);
	else
		lm_mem_populate_read(R->view + lm_page_off(page),
				     (size_t)(end - page) * R->page_size);
	if (fetched && after)
		sample_ahead(page, after);
}

/* Called with the lock held.  A fault that finds the page's state open
 * for its access was raced by another thread, or hit a page whose view
 * a protection change left closed when it could not open it again
 * (protect_window): the page is given its state's protection again (no
 * change in the first case) and the access retried. */
static void serve_fault(uint32_t page, enum fault_access access)
{
	bool sample;

	if (R->shared) {
		serve_shared(page, access);
		return;
	}
	switch (R->state[page]) {
	case PAGE_INVALID:
		fetch_with_neighbours(page, access);
		if (access == ACCESS_WRITE)
			R->stats.write_faults++;
		else
			R->stats.read_faults++;
		return;
	case PAGE_READ:
		sample = lm_page_closed(page);
		if (sample) {
			/* a sample's first touch: the data is here */
			lm_page_set_closed(page, false);
			lm_reach_touched(&R->reach, page);
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

/* A fault on the alias (the program's globals, mapping.h) by the thread
 * that holds the lock: the library itself, reading a variable of a
 * library's that the executable holds by copy relocation (stderr) while
 * it works on the region.  It cannot be served (the lock is ours), so
 * the alias alone opens, showing what the memory holds, and the unlock
 * closes it again (region_state.h): such variables are the same in
 * every rank and nobody writes them. */
static void lend_alias(void)
{
	R->alias_lent = true;
	mprotect(R->alias, lm_page_off(R->alias_n), PROT_READ | PROT_WRITE);
}

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t addr = (uintptr_t)si->si_addr;
	enum fault_access access;
	int saved_errno = errno;
	uint32_t page;
	bool alias = false;

	/* an addr below base (alias) wraps around to a huge offset */
	if (!atomic_load_explicit(&R->active, memory_order_acquire))
		goto not_ours;
	if (addr - R->base < R->size)
		page = (uint32_t)((addr - R->base) >> R->page_shift);
	else if (R->alias &&
		 addr - (uintptr_t)R->alias < lm_page_off(R->alias_n)) {
		page = R->alias_first +
		       (uint32_t)((addr - (uintptr_t)R->alias) >> R->page_shift);
		alias = true;
	} else
		goto not_ours;
	access = fault_access(uctx);
	if (access == ACCESS_EXEC)
		goto not_ours;
	if (alias && lm_region_locked_here()) {
		lend_alias();
		errno = saved_errno;
		return;
	}
	lm_region_lock();
	serve_fault(page, access);
	lm_region_unlock();
	errno = saved_errno;
	return;
not_ours:
	chain(sig, si, uctx);
	errno = saved_errno;
}

int lm_pagefault_install(char *err, size_t errlen)
{
	struct sigaction sa;

	memset(streams, 0, sizeof(streams));
	fault_clock = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_action) != 0) {
		snprintf(err, errlen, "cannot install the SIGSEGV handler: %s",
			 strerror(errno));
		memset(&old_action, 0, sizeof(old_action));
		return LM_EIO;
	}
	return 0;
}

void lm_pagefault_remove(void)
{
	sigaction(SIGSEGV, &old_action, NULL);
	memset(&old_action, 0, sizeof(old_action));
}
