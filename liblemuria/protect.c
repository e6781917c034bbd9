/* Protection changes in batches, under region.c: a flush or a list of
 * notices gives many pages the same protection, often adjacent ones in
 * any order (LU's notices name thousands of pages, in runs).  Marked in a
 * bitmap, they are walked in address order and changed run by run, or a
 * window at a time with one TLB flush (protect_window), whichever costs
 * less (docs/dsm.md "Pages and versions"). */
#include "protect.h"

#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "lm_error.h"
#include "mapping.h"
#include "region_state.h"

/* A protection change of more pages than this flushes the whole TLB, of
 * fewer a page at a time (x86's tlb_single_page_flush_ceiling, 33 by
 * default; protect_window) */
#define FLUSH_CEILING 33
/* Marked pages further apart than this take TLB flushes of their own:
 * closing and opening the pages between costs more than a flush */
#define WINDOW_GAP 256
/* What an mprotect call costs, in flushes of one page (window_pays) */
#define CALL_FLUSHES 4

/* false: one mprotect per page, as before batching (bench/region.c) */
static bool batching = true;

void lm_protect_mark(uint32_t page)
{
	lm_bit_put(R->marks, page, true);
	if (page < R->mark_lo)
		R->mark_lo = page;
	if (page >= R->mark_hi)
		R->mark_hi = page + 1;
}

/* The first page in [from, end) whose mark is `set`, or end. */
static uint32_t next_mark(uint32_t from, uint32_t end, bool set)
{
	uint64_t p = from; /* 64 bits: rounding up may pass UINT32_MAX */

	while (p < end) {
		uint64_t w = R->marks[p / 64];

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

void lm_protect_clear_marks(void)
{
	uint32_t lo = R->mark_lo, hi = R->mark_hi;

	if (lo < hi)
		memset(&R->marks[lo / 64], 0,
		       ((hi - 1) / 64 - lo / 64 + 1) * sizeof(*R->marks));
	R->mark_lo = UINT32_MAX;
	R->mark_hi = 0;
}

static bool is_marked(uint32_t page)
{
	return lm_bit_get(R->marks, page);
}

/* The protection a page's state gives it in the view: none for an
 * invalid page or a closed sample, read-only for a clean copy in the
 * open, read-write for a page with a twin or a private one. */
static int state_prot(uint32_t page)
{
	switch (R->state[page]) {
	case PAGE_INVALID:
		return PROT_NONE;
	case PAGE_READ:
		return lm_page_closed(page) ? PROT_NONE : PROT_READ;
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
		if (end - first > 1 && lm_view_protect(i, 1, want) == 0)
			continue;
		if (!is_marked(i)) {
			if (R->state[i] == PAGE_READ)
				R->state[i] = PAGE_INVALID;
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

		if (lm_view_protect(p, end - p, prot) != 0 &&
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
		if (lm_view_protect(p, end - p, want) != 0 &&
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
	if (*whi > R->npages) {
		*whi = R->npages;
		*wlo = R->npages > FLUSH_CEILING ? R->npages - FLUSH_CEILING - 1
						: 0;
	}
}

/* Whether protect_window costs less than protect_runs for the marked
 * pages of [lo, hi), in units of a page's flush: a call costs about as
 * much as four of them, and so does a whole flush (CALL_FLUSHES;
 * docs/performance.md, "Fault handling").  Runs: a call each, and a
 * flush a changed page up to the ceiling, one whole flush beyond.  A
 * window: the call that closes it, its flush, and a call per run opened
 * again.  LU closes runs of 20-30 pages (a window pays); Ocean
 * invalidates a few pages among many that stay (runs pay). */
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
 * hypercall on a virtual machine (docs/performance.md, "Fault
 * handling"), and the whole TLB beyond, for about as much as one page.
 * So the window,
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
	done = lm_view_protect(wlo, whi - wlo, PROT_NONE) != 0;
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
int lm_protect_marked(int prot, void (*failed)(uint32_t page))
{
	uint32_t hi = R->mark_hi, p = R->mark_lo;
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
	lm_protect_clear_marks();
	return rc;
}

void lm_region_set_batching(int on)
{
	lm_region_lock();
	batching = on != 0;
	lm_region_unlock();
}
