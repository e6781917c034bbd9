/* Barrier updates (docs/dsm.md "Updates"): instead of invalidating a
 * client's copy of a page that only this cluster wrote in the epoch, the
 * lemuriad sends the client, with the RELEASE, the bytes its clients
 * wrote, so the copy stays valid and no fault and refetch follow.
 *
 * This module keeps what that needs and nothing else:
 *  - which client slots hold a copy of which page (a hint: a client that
 *    dropped its copy ignores an update; one with a copy we forgot gets
 *    none and invalidates, as without updates);
 *  - per page written in the current epoch, the mask of the bytes the
 *    cluster's clients wrote (their values are in the lemuriad's cached
 *    copy, which the flushes were applied to);
 *  - at the release, each eligible page's update encoded once, and per
 *    client the list of those it holds.
 * The cluster state machine decides which pages are eligible (its copy
 * kept by the sole-cluster rule) and sends the lists; no I/O here. */
#ifndef LM_UPDATES_H
#define LM_UPDATES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Largest update list one client gets with one RELEASE: the mask budget
 * (an eighth of the cache), within these bounds; pages beyond it are
 * invalidated as without updates.  The RELEASEs of a barrier are queued
 * to every client at once, so this bounds what waits in the send queues
 * (I5; docs/performance.md, "Figures behind the lemuriad's choices"). */
#define LM_UPDATES_CLIENT_MIN (1u << 20)
#define LM_UPDATES_CLIENT_MAX (8u << 20)

/* Updates in a row a client may take for a page it neither writes nor
 * fetches again; at the next its copy is dropped instead (docs/dsm.md
 * "Updates", idle copies). */
#define LM_UPDATES_IDLE_MAX 4

/* The same for a page another cluster wrote, which the lemuriad would
 * fetch for the copy, unless the client fetched the page again after
 * its copy was dropped (then LM_UPDATES_IDLE_MAX). */
#define LM_UPDATES_FETCH_IDLE_MAX 1

typedef struct lm_updates lm_updates;

struct lm_updates_stats {
	uint64_t updates_sent;   /* pages sent to clients as updates */
	uint64_t update_bytes;   /* their encoded bytes */
	uint64_t updates_capped; /* pages left out by the list's limit */
	uint64_t updates_ahead;  /* of updates_sent, those encoded before
				    the release (lm_updates_encode_ahead) */
	uint64_t updates_idle;   /* copies dropped as idle (_IDLE_MAX,
				    _FETCH_IDLE_MAX) */
	uint64_t mask_overflows; /* epochs whose masks outgrew the budget:
				    no updates at their release */
};

/* mask_budget: bytes the epoch's masks may take (one bit per page byte
 * per page and writer); beyond it the epoch gets no updates.  The
 * updates encoded at a release take as much at most, and so does one
 * client's list (within LM_UPDATES_CLIENT_MIN..MAX); beyond them the
 * pages left are invalidated.  NULL on bad arguments or no memory. */
lm_updates *lm_updates_create(uint32_t page_size, uint32_t npages,
			      uint32_t nclients, size_t mask_budget);
void lm_updates_destroy(lm_updates *u);

/* The largest list a client gets (see LM_UPDATES_CLIENT_MAX). */
size_t lm_updates_list_max(const lm_updates *u);

/* A new run: nobody holds anything, no epoch writes. */
void lm_updates_reset(lm_updates *u);

/* Client `slot` has a valid copy of `page` (it was sent one, or flushed
 * writes to it). */
void lm_updates_hold(lm_updates *u, uint32_t slot, uint32_t page);

/* The mask of the bytes client `slot` wrote to `page` this epoch, for
 * the caller to mark each flushed diff in (lm_delta_mark_valid_diff or
 * lm_delta_add_valid_diff_also; only the mask may be written): the
 * epoch's writes are kept per writer so that a writer's update leaves
 * out what it wrote itself.  NULL for a page out of range, or for a
 * slot out of range or when the masks would exceed the budget (the
 * epoch then gets no updates). */
struct lm_delta *lm_updates_writer_mask(lm_updates *u, uint32_t page,
					uint32_t slot);

/* At the barrier release, after the cache applied the notices: copies[i]
 * is the lemuriad's copy of n[i].page when it is at n[i].version and
 * holds every byte of the epoch, else NULL.  Such a copy is either the
 * one the sole-cluster rule kept (olds[i] NULL), or the page fetched
 * anew after another cluster wrote it, olds[i] then being our copy at
 * the notice's base, which held our clients' writes of the epoch: the
 * bytes where the two differ are the other clusters' writes, unless
 * known[i] gives them already (a mask of page_size / 64 words, borrowed
 * until the updates are sent: the page came as a diff).  olds and known
 * may be NULL.  tags[i] is copies[i]'s tag as lm_updates_copy_fn gives
 * it (tags may be NULL: nothing encoded ahead is used).  Prepares the
 * update of every such page.  Returns 0 or LM_ENOMEM (no updates this
 * time). */
int lm_updates_prepare(lm_updates *u, const struct lm_notice *n,
		       uint32_t count, const uint8_t *const *copies,
		       const uint8_t *const *olds,
		       const uint64_t *const *known, const uint64_t *tags);

/* The lemuriad's copy of `page` and its tag, a number that changes
 * whenever the copy's bytes do (NULL: no copy). */
typedef const uint8_t *(*lm_updates_copy_fn)(void *ctx, uint32_t page,
					     uint64_t *tag);

/* Encodes ahead of the release, for up to max_pages more of the pages
 * written this epoch by two clients or more, each writer's update (the
 * others' bytes, values from copy_of's copy), while the lemuriad waits
 * for the RELEASE.  The release sends one instead of encoding it when
 * no FLUSH of the page came since, no other cluster wrote the page, and
 * its copy is the same one with the same tag.  Takes at most the
 * arena's budget (I5).  Returns true while pages are left. */
bool lm_updates_encode_ahead(lm_updates *u, lm_updates_copy_fn copy_of,
			     void *ctx, uint32_t max_pages);

/* True when some client slot holds a copy of `page` that the next
 * release would update after a fetch from another cluster (one
 * LM_UPDATES_FETCH_IDLE_MAX updates idle is dropped instead, so fetching
 * the page for it would be wasted). */
bool lm_updates_wanted(const lm_updates *u, uint32_t page);

/* The update list for client `slot` of rank `rank` (a diff list in the
 * order of the notices), valid until the next call; also forgets the
 * pages the client will drop.  Call after lm_updates_prepare with the
 * same notices.  *out may be NULL when *len is 0. */
void lm_updates_for_client(lm_updates *u, uint32_t slot, uint32_t rank,
			   const struct lm_notice *n, uint32_t count,
			   struct lm_msg_diffs *out);

/* The epoch is over: forget its masks and prepared updates. */
void lm_updates_epoch_end(lm_updates *u);

const struct lm_updates_stats *lm_updates_stats(const lm_updates *u);

#endif
