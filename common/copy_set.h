/* Pages put into a cluster's copy as one (docs/dsm.md "Eventual
 * visibility", "Order").  The copy is shared memory that the clients
 * read with plain loads while the lemuriad writes other clusters'
 * changes into it; written page after page, a client that reads a
 * writer's pointer on one page could find the record it points at, on
 * another page (or further on the same one), not yet written.  So a set
 * goes in as one: its pages are taken out of the memory object at once
 * (a hole punched in it unmaps them from every process), each is filled
 * whole from a second mapping with userfaultfd (a page appears complete
 * or not at all), and only then are the clients that touched one
 * meanwhile woken: a client may wait, never see a mix.
 *
 * Each client registers its view of the pages with a userfaultfd of its
 * own (missing pages make it wait) and hands the descriptor to the
 * lemuriad; nobody reads their events, the lemuriad only wakes them.
 * Only pages nobody writes may be taken out (untwinned, not owned: no
 * client holds them open for writing); a twinned page is written in
 * place, byte-masked, by lm_ccopy_install. */
#ifndef LM_COPY_SET_H
#define LM_COPY_SET_H

#include <stddef.h>
#include <stdint.h>

#include "cluster_copy.h"

/* A client's side: accesses of this process to [addr, addr + len), its
 * view of the copy's pages (page aligned), wait while a page there is
 * missing from the object.  *fd_out: the userfaultfd that does it, for
 * the lemuriad (the process may close its own once handed over).
 * LM_EIO with the cause in err when the kernel refuses (userfaultfd for
 * unprivileged users is off: sysctl vm.unprivileged_userfaultfd). */
int lm_copy_set_reader(void *addr, size_t len, int *fd_out, char *err,
		       size_t errlen);

/* The lemuriad's side: a second mapping of the object's pages part,
 * registered with a userfaultfd of its own, through which pages are
 * filled. */
struct lm_copy_filler {
	int memfd;          /* the object (borrowed) */
	uint64_t pages_off; /* where its pages part starts */
	uint8_t *fill;      /* the second mapping of that part */
	size_t len;
	int uffd;
};

/* 0, or LM_EIO with the cause in err (f->uffd is then -1 and every
 * other call does nothing). */
int lm_copy_filler_open(struct lm_copy_filler *f, int memfd,
			uint64_t pages_off, size_t len, char *err,
			size_t errlen);
void lm_copy_filler_close(struct lm_copy_filler *f);

/* Write-protects [view, view + len) in every reader's process (on), or
 * lets their writes go on and wakes them (off): a seal of one instant
 * (lm_ccopy_seal_at_once).  true when every reader's writes wait (a
 * reader whose kernel cannot: none does). */
bool lm_copy_set_stop_writers(const int *readers, uint32_t n_readers,
			      uint64_t view, uint64_t len, bool on);

/* Wakes every thread whose fault waits on `reader` (the faults pending
 * there are read off it first, so the descriptor stops being readable):
 * the kernel can lose the wake that ends a stop or a set.  A write that
 * found its page write-protected and queued just after the wake went by
 * keeps waiting, its page no longer protected (seen on 6.18: one run in
 * a hundred of a test that seals 2,000 times under a writer that never
 * pauses; most likely the kernel's must-wait check reads the entry's
 * write bit, which the unprotect leaves clear).  The lemuriad calls this
 * whenever a reader's descriptor is readable; a thread woken while its
 * page is still protected or missing faults and waits again.  Returns
 * how many faults were read. */
uint32_t lm_copy_set_wake_waiting(int reader, uint64_t view, uint64_t len);

struct lm_copy_set_item {
	uint32_t page;
	uint32_t version;
	const uint8_t *data; /* page_size bytes */
};

/* Puts the items that may go in as one into the copy together: pages
 * the copy holds, untwinned, not owned, older than the item (checked
 * under each page's lock, all held throughout); the others are left for
 * lm_ccopy_install, after.  Readers' userfaultfds (n_readers, -1 for
 * none) are woken over [view, view + view_len) in their processes.
 * Returns how many pages went in, LM_ETIMEDOUT when a page's lock could
 * not be had (nothing done), or LM_EIO when the hole could not be
 * punched (nothing changed). */
int lm_copy_set_install(const struct lm_ccopy *cc,
			const struct lm_copy_filler *f,
			const struct lm_copy_set_item *items, uint32_t n,
			const int *readers, uint32_t n_readers, uint64_t view,
			uint64_t view_len);

#endif
