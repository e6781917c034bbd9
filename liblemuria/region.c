/* The client's view of shared memory, top of the region's files
 * (region_state.h): set-up and tear-down, and the page states that
 * releases and acquires change (docs/dsm.md 2-4 and 9): the diffs of the
 * written pages at a flush, the pages left open or closed after it, and
 * the copies write notices invalidate or updates bring up to date.
 * Faults are served by pagefault.c, protections changed by protect.c.
 *
 * Choices left open by the spec:
 * - A notice blocks (LM_EINVAL, nothing done) only when it would
 *   invalidate a dirty page; a notice no newer than a dirty page's copy
 *   changes nothing and is accepted.  A notice for a page outside the
 *   region is LM_EINVAL too: it can only come from a broken peer.
 * - Several application threads are allowed: a spinlock guards the page
 *   table, and a fault that finds its page already opened by another
 *   thread gives it its state's protection again and returns, so the
 *   access is retried. */
#include "region.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "diff.h"
#include "lm_error.h"
#include "mapping.h"
#include "pagefault.h"
#include "protect.h"
#include "reach.h"
#include "region_state.h"

#define DIFFS_ENTRY_HDR 8   /* u32 page + u32 length in a diff list */
#define OUT_MIN_CAP 65536   /* first size of the flush buffer */
/* Flushes in a row that may find an open page unchanged before it
 * closes: LU writes a block in one interval of a step and not in the
 * other, and writes it again in the next step. */
#define OPEN_IDLE_MAX 3

static int region_init(uint64_t base, uint64_t size, uint32_t page_size,
		       const struct lm_region_backend *be, void *ctx,
		       char *err, size_t errlen);

int lm_region_init(uint64_t base, uint64_t size, uint32_t page_size,
		   const struct lm_region_backend *be, void *ctx, char *err,
		   size_t errlen)
{
	if (!atomic_load(&R->active))
		R->shared = false;
	return region_init(base, size, page_size, be, ctx, err, errlen);
}

int lm_region_init_shared(uint64_t base, uint64_t size, uint32_t page_size,
			  int fd, uint32_t cluster,
			  const struct lm_region_backend *be, void *ctx,
			  char *err, size_t errlen)
{
	int rc;

	if (atomic_load(&R->active) || !be || !be->fetch_shared || fd < 0) {
		if (err)
			snprintf(err, errlen, "the shared region is already "
				 "initialised, or has no copy or fetch");
		if (fd >= 0)
			close(fd); /* ours from the call on, as on success */
		return LM_EINVAL;
	}
	R->shared = true;
	R->fd = fd;
	R->cluster = cluster;
	R->drops = 0;
	rc = region_init(base, size, page_size, be, ctx, err, errlen);
	if (rc)
		R->shared = false;
	return rc;
}

static int region_init(uint64_t base, uint64_t size, uint32_t page_size,
		       const struct lm_region_backend *be, void *ctx,
		       char *err, size_t errlen)
{
	char scratch_err[8];
	int rc;

	if (!err) {
		err = scratch_err;
		errlen = sizeof(scratch_err);
	}
	if (atomic_load(&R->active)) {
		snprintf(err, errlen, "the shared region is already "
			 "initialised");
		return LM_EINVAL;
	}
	if (!be || (!be->fetch && !R->shared)) {
		snprintf(err, errlen, "no fetch function for the region");
		return LM_EINVAL;
	}
	rc = lm_mapping_check(base, size, page_size, err, errlen);
	if (rc)
		return rc;

	memset(&R->stats, 0, sizeof(R->stats));
	lm_reach_init(&R->reach, R->prefetch);
	R->be = *be;
	R->ctx = ctx;
	rc = lm_mapping_init(base, size, page_size, err, errlen);
	if (rc)
		goto fail;
	rc = lm_pagefault_install(err, errlen);
	if (rc)
		goto fail;
	atomic_store(&R->active, 1);
	return 0;
fail:
	lm_mapping_fini();
	return rc;
}

void lm_region_fini(void)
{
	if (!atomic_load(&R->active))
		return;
	lm_region_lock();
	lm_pagefault_remove();
	atomic_store(&R->active, 0);
	lm_mapping_fini();
	lm_region_unlock();
}

int lm_region_alias(void *addr, const void *pages, size_t len, char *err,
		    size_t errlen)
{
	uintptr_t off = (uintptr_t)pages - R->base;
	int rc;

	if (!atomic_load(&R->active) || off >= R->size ||
	    off % R->page_size || len == 0 || len % R->page_size ||
	    len > R->size - off || (uintptr_t)addr % R->page_size) {
		snprintf(err, errlen, "%zu bytes at %p are not whole pages of "
			 "the region, or %p is not page-aligned", len, pages,
			 addr);
		return LM_EINVAL;
	}
	lm_region_lock();
	rc = lm_mapping_alias(addr, (uint32_t)(off >> R->page_shift),
			      (uint32_t)(len >> R->page_shift), err, errlen);
	lm_region_unlock();
	return rc;
}

/* The pages a flush looks at: those the last one left open, then those
 * written since (the dirty list).  written(i, &page) gives the i-th, i <
 * R->nopen + R->ndirty, or false for an open entry whose page was closed
 * since (invalidated; if it was written again, its dirty entry comes
 * later, so a page is looked at once). */
static bool written(uint32_t i, uint32_t *page)
{
	if (i >= R->nopen) {
		*page = R->dirty[i - R->nopen];
		return true;
	}
	*page = R->open[i];
	return R->state[*page] == PAGE_OPEN;
}

static int out_reserve(size_t need)
{
	size_t cap = R->out_cap ? R->out_cap : OUT_MIN_CAP;
	uint8_t *p;

	if (need <= R->out_cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(R->out, cap);
	if (!p)
		return LM_ENOMEM;
	R->out = p;
	R->out_cap = cap;
	return 0;
}

/* Encodes the written pages into R->out and notes in R->changed which had
 * a diff.  The pages stay writable: a byte another thread writes meanwhile
 * is either in the diff or differs from the twin afterwards (the twin
 * takes the diff, not the page), so the next flush finds it. */
static int encode_written(size_t *used, uint32_t *count)
{
	uint32_t page;

	*used = 0;
	*count = 0;
	for (uint32_t i = 0; i < R->nopen + R->ndirty; i++) {
		size_t dlen;
		int rc;

		if (!written(i, &page))
			continue;
		rc = lm_diff_encode(R->twin[page], R->rw + lm_page_off(page),
				    R->page_size, R->scratch, R->scratch_cap,
				    &dlen);
		if (rc)
			return rc;
		R->changed[page] = dlen != 0;
		if (dlen == 0)
			continue;
		rc = out_reserve(*used + DIFFS_ENTRY_HDR + dlen);
		if (rc)
			return rc;
		rc = lm_msg_diffs_append(R->out, R->out_cap, used, page,
					 R->scratch, dlen);
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
	lm_twin_put(R->twin[page]);
	R->twin[page] = NULL;
	R->state[page] = PAGE_READ;
}

/* The i-th entry of the lists a flush walks, stale or not. */
static uint32_t written_entry(uint32_t i)
{
	return i < R->nopen ? R->open[i] : R->dirty[i - R->nopen];
}

/* A page the flush meant to close but could not write-protect: it stays
 * open, twin and all, for the next flush. */
static uint32_t nnext_open;

static void stay_open(uint32_t page)
{
	R->state[page] = PAGE_OPEN;
	R->next_open[nnext_open++] = page;
}

/* The pages in PAGE_CLOSING, read-only now: a write another thread made
 * since their encoding (none, single-threaded) goes out with this flush,
 * then each drops its twin.  Room in R->out was reserved. */
static void close_unchanged(size_t *used, uint32_t *count)
{
	for (uint32_t i = 0; i < R->nopen + R->ndirty; i++) {
		uint32_t page = written_entry(i);
		size_t dlen = 0;

		if (R->state[page] != PAGE_CLOSING)
			continue;
		if (lm_diff_encode(R->twin[page], R->rw + lm_page_off(page),
				   R->page_size, R->scratch, R->scratch_cap,
				   &dlen) == 0 && dlen &&
		    lm_msg_diffs_append(R->out, R->out_cap, used, page,
					R->scratch, dlen) == 0)
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

	if (!atomic_load(&R->active))
		return LM_EINVAL;
	if (R->shared) { /* the lemuriad finds the writes in the copy */
		*diffs = NULL;
		*len = 0;
		*count = 0;
		return 0;
	}
	lm_region_lock();
	rc = encode_written(&used, &n);
	if (rc != 0) {
		lm_region_unlock(); /* nothing changed: the next flush sends it all */
		return rc;
	}
	/* A page that changed is likely written again soon (LU's blocks
	 * are, step after step): it stays open, its twin now what was sent,
	 * and costs a comparison at each flush instead of a write fault and
	 * two mprotects.  It closes and drops its twin after OPEN_IDLE_MAX
	 * flushes in a row found it unchanged (at once if it was faulted in
	 * and not changed).  Each page is looked at once (see written), so
	 * the new list has no page twice. */
	sent = (struct lm_msg_diffs){ R->out, used, n };
	nnext_open = 0;
	for (uint32_t i = 0; i < R->nopen + R->ndirty; i++) {
		uint32_t page;

		if (!written(i, &page))
			continue;
		if (R->changed[page] &&
		    lm_msg_diffs_next(&sent, &pos, &dpage, &diff, &dlen) == 1 &&
		    dpage == page) {
			R->idle[page] = 0;
			lm_diff_apply_valid(R->twin[page], diff, dlen);
		} else if (R->state[page] != PAGE_OPEN ||
			   ++R->idle[page] >= OPEN_IDLE_MAX) {
			R->state[page] = PAGE_CLOSING;
			closing++;
			lm_protect_mark(page);
			continue;
		}
		R->state[page] = PAGE_OPEN;
		R->next_open[nnext_open++] = page;
	}
	/* Closing pages are write-protected before their last look, so no
	 * write slips between it and the twin's end; without room for what
	 * such a write would add, they all stay open. */
	if (closing && out_reserve(used + (size_t)closing *
				   (DIFFS_ENTRY_HDR + R->scratch_cap)) != 0) {
		for (uint32_t i = 0; i < R->nopen + R->ndirty; i++) {
			uint32_t page = written_entry(i);

			if (R->state[page] == PAGE_CLOSING)
				stay_open(page);
		}
		lm_protect_clear_marks();
	} else {
		lm_protect_marked(PROT_READ, stay_open);
		close_unchanged(&used, &n);
	}
	{
		uint32_t *t = R->open;

		R->open = R->next_open;
		R->next_open = t;
	}
	R->nopen = nnext_open;
	R->ndirty = 0;
	R->stats.flushed_pages += n;
	R->stats.flushed_bytes += used;
	*diffs = R->out;
	*len = used;
	*count = n;
	lm_region_unlock();
	return 0;
}

/* A page its notice invalidated but mprotect could not close: it is still
 * accessible, so it stays valid at its version (and open, if it was: it
 * still has its twin). */
static void keep_unclosed(uint32_t page)
{
	R->state[page] = R->twin[page] ? PAGE_OPEN : PAGE_READ;
	R->stats.invalidations--;
}

/* A clean copy: read-only, or left open by the last flush. */
static bool is_clean(uint32_t page)
{
	return R->state[page] == PAGE_READ || R->state[page] == PAGE_OPEN;
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
	lm_rw_touch(page);
	return lm_diff_apply_checked(R->rw + lm_page_off(page),
				     R->state[page] == PAGE_OPEN ? R->twin[page]
								: NULL,
				     R->page_size, update, len) == 0;
}

/* copy = cluster: the samples of this process that a cluster-mate's
 * fault answered (its mark cleared) were read; the others were not, and
 * their marks go (liblemuria/pagefault.c, sample_ahead). */
static void settle_watched(void)
{
	struct lm_reach_sample s[LM_REACH_PENDING];
	uint32_t n = R->reach.npending;

	memcpy(s, R->reach.pending, n * sizeof(*s));
	for (uint32_t i = 0; i < n; i++)
		if (!lm_ccopy_seen(&R->ccopy, s[i].page))
			lm_reach_touched(&R->reach, s[i].page);
	lm_reach_settle(&R->reach);
}

/* Notices under copy = cluster: the copy is the cluster's, so a notice
 * only asks whether it is new enough for this process.  It is when it
 * holds the notice's version, or its base and the notice names our
 * cluster the only one that wrote the page since (the sole-cluster
 * rule: those writes were made in the copy itself).  Else our view of
 * the page closes and the next access waits until the copy reaches the
 * version (pagefault.c); a cluster-mate's view stays as it is until it
 * acquires the notice itself. */
static int apply_shared(const struct lm_notice *n, uint32_t count)
{
	uint64_t drops;
	int rc = 0;

	for (uint32_t i = 0; i < count; i++)
		if (n[i].page >= R->npages)
			return LM_EINVAL;
	lm_region_lock();
	settle_watched();
	/* Twins, and stale pages, the lemuriad dropped at a barrier while
	 * we waited in it: our views of pages with neither twin nor owner go
	 * read-only before we go on, so that the next write takes a twin
	 * again, and views of pages the copy no longer holds close
	 * (cluster_copy.h) */
	drops = atomic_load_explicit(&R->ccopy.hdr->drops,
				     memory_order_acquire);
	if (drops != R->drops) {
		uint32_t v;

		R->drops = drops;
		for (uint32_t p = 0; p < R->npages; p++) {
			if (R->state[p] == PAGE_INVALID)
				continue;
			if (!lm_ccopy_version(&R->ccopy, p, &v)) {
				R->state[p] = PAGE_INVALID;
				lm_protect_mark(p);
			}
		}
		if (lm_protect_marked(PROT_NONE, NULL) != 0)
			rc = LM_ENOMEM;
		for (uint32_t p = 0; p < R->npages; p++)
			if (R->state[p] == PAGE_PRIVATE &&
			    !lm_ccopy_writable(&R->ccopy, p)) {
				R->state[p] = PAGE_READ;
				lm_protect_mark(p);
			}
		if (lm_protect_marked(PROT_READ, NULL) != 0)
			rc = LM_ENOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint32_t page = n[i].page;

		if (lm_ccopy_covers(&R->ccopy, &n[i], R->cluster))
			continue;
		if (R->version[page] < n[i].version)
			R->version[page] = n[i].version;
		if (R->state[page] == PAGE_INVALID)
			continue;
		R->state[page] = PAGE_INVALID;
		R->stats.invalidations++;
		lm_protect_mark(page);
	}
	if (lm_protect_marked(PROT_NONE, NULL) != 0)
		rc = LM_ENOMEM;
	lm_region_unlock();
	return rc;
}

int lm_region_apply_release(const struct lm_notice *n, uint32_t count,
			    uint32_t self_rank,
			    const struct lm_msg_diffs *updates)
{
	size_t upos = 0;
	int rc = 0;

	if (!atomic_load(&R->active) || (count && !n))
		return LM_EINVAL;
	if (R->shared)
		return apply_shared(n, count);
	lm_region_lock();
	/* the samples the program did not read by now went unread */
	lm_reach_settle(&R->reach);
	/* Check everything first so that a refused list changes nothing. */
	for (uint32_t i = 0; i < count; i++) {
		uint32_t page = n[i].page;

		if (page >= R->npages ||
		    (R->state[page] == PAGE_WRITE &&
		     R->version[page] < n[i].version)) {
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
		if (R->state[page] == PAGE_INVALID ||
		    R->state[page] == PAGE_PRIVATE ||
		    R->version[page] >= n[i].version)
			continue;
		if (is_clean(page) && n[i].writer == self_rank &&
		    R->version[page] == n[i].base) {
			R->version[page] = n[i].version;
			R->stats.kept++;
			continue;
		}
		/* Update: the lemuriad's copy at the notice's version with
		 * every byte its clients wrote in the epoch; our clean copy
		 * at base differs from it in those bytes only (docs/dsm.md
		 * "Updates").  Written through the private mapping. */
		if (update && is_clean(page) && R->version[page] == n[i].base &&
		    apply_update(page, update, ulen)) {
			/* (an open page's twin takes it too: not ours to
			 * send at the next flush) */
			R->version[page] = n[i].version;
			R->stats.updated++;
			continue;
		}
		/* no update, or a malformed one, part of which may be
		 * written by now: the copy goes (a sample's view is closed
		 * already) */
		R->state[page] = PAGE_INVALID;
		R->stats.invalidations++;
		if (lm_page_closed(page))
			lm_page_set_closed(page, false);
		else
			lm_protect_mark(page);
	}
	rc = lm_protect_marked(PROT_NONE, keep_unclosed);
	/* open pages now closed give their twins back */
	for (uint32_t i = 0; i < count; i++) {
		uint32_t page = n[i].page;

		if (R->state[page] == PAGE_INVALID && R->twin[page]) {
			lm_twin_put(R->twin[page]);
			R->twin[page] = NULL;
		}
	}
out:
	lm_region_unlock();
	return rc;
}

int lm_region_make_private(void)
{
	int rc = 0;

	if (!atomic_load(&R->active))
		return LM_EINVAL;
	lm_region_lock();
	/* Only untouched: every page invalid, so the memory holds zeros,
	 * which is what the homes hold at the start of a run. */
	for (uint32_t p = 0; p < R->npages; p++)
		if (R->state[p] != PAGE_INVALID) {
			rc = LM_EINVAL;
			goto out;
		}
	if (mprotect(R->view, R->size, PROT_READ | PROT_WRITE) != 0) {
		rc = errno == ENOMEM ? LM_ENOMEM : LM_EIO;
		goto out;
	}
	R->stats.mprotects++;
	memset(R->state, PAGE_PRIVATE, R->npages);
out:
	lm_region_unlock();
	return rc;
}

void lm_region_stats(struct lm_region_stats *out)
{
	lm_region_lock();
	*out = R->stats;
	for (int k = 0; k < LM_REACH_KINDS; k++) {
		out->reach[k] = R->reach.depth[k];
		out->samples[k] = R->reach.stats.samples[k];
		out->samples_read[k] = R->reach.stats.read[k];
		out->reach_changes[k] = R->reach.stats.deeper[k] +
					R->reach.stats.shallower[k];
	}
	lm_region_unlock();
}

void lm_region_set_prefetch(uint32_t pages)
{
	lm_region_lock();
	R->prefetch = pages < LM_REGION_PREFETCH_MAX ?
			 pages : LM_REGION_PREFETCH_MAX;
	lm_reach_init(&R->reach, R->prefetch);
	lm_region_unlock();
}



uint32_t lm_region_page_version(uint32_t page)
{
	uint32_t v = UINT32_MAX;

	if (!atomic_load(&R->active))
		return v;
	lm_region_lock();
	if (page < R->npages && R->state[page] != PAGE_INVALID)
		v = R->version[page];
	lm_region_unlock();
	return v;
}
