/* The reflector's protocol state machine (docs/dsm.md, role R).  Each
 * reflector of the root cluster plays three parts:
 *  - router for its own clusters: forwards what they send to the page's
 *    home, the lock's or barrier's manager or the allocator (itself or
 *    another reflector), collects the write notices of its clusters'
 *    changes in the epoch and holds synchronisation messages until the
 *    homes have applied the changes before them (I2);
 *  - home of its share of the pages: master copies and versions (I1, I3);
 *  - manager of its share of barriers and locks, and the allocator when
 *    it is the layout's first reflector.
 *
 * Decoded messages go in through lm_home_handle; messages come out through
 * the struct lm_msg_out callbacks during that call.  No sockets, no clock,
 * no threads. */
#ifndef LM_REFLECTOR_HOME_H
#define LM_REFLECTOR_HOME_H

#include <stdint.h>

#include "config.h"
#include "proto.h"
#include "reliable.h"

typedef struct lm_home lm_home;

/* ALLOC with align == 0 and id != 0 reserves `size` consecutive ids of the
 * kind given in id (LM_ALLOC_KIND_*, common/proto.h) instead of memory;
 * ALLOC_OK.offset is the first id.  Each kind has its own counter,
 * starting at 1 (0 is never handed out).  Kinds 1..LM_HOME_ID_KINDS - 1
 * are accepted. */
#define LM_HOME_ID_KINDS 8u

/* Default alignment of shared allocations, bytes; allocations of a page or
 * more are page aligned. */
#define LM_HOME_ALIGN 64u

/* Barriers that may be pending (some cluster arrived, not all) at once. */
#define LM_HOME_BARRIERS_MAX 16u

/* Pages are homed in blocks of this many pages, dealt round-robin over
 * the reflectors in layout order; lock and barrier `id` are managed by
 * reflector id % nreflectors; the first reflector is the allocator. */
#define LM_HOME_PAGE_BLOCK 8u

/* Index into layout->reflectors of the home of `page`, the manager of
 * lock or barrier `id`. */
uint32_t lm_home_of_page(const struct lm_layout *l, uint32_t page);
uint32_t lm_home_manager_of(const struct lm_layout *l, uint32_t id);

/* Creates the state of reflector `self_id` of `layout`.  The layout is
 * borrowed and must outlive it; *out is copied; ctx is passed to every
 * callback.  Serves the clusters whose reflector is self_id and talks to
 * the other reflectors.  NULL when self_id is not a reflector of the
 * layout or memory runs out. */
lm_home *lm_home_create(const struct lm_layout *layout, uint16_t self_id,
			const struct lm_msg_out *out, void *ctx);
/* Frees everything; accepts NULL. */
void lm_home_destroy(lm_home *h);

/* Executes one message from node `from`.  m and what it points to are
 * borrowed for the call.  Bad input is dropped and counted, never fatal. */
void lm_home_handle(lm_home *h, uint16_t from, enum lm_rel_msg_kind kind,
		    uint32_t req_id, const struct lm_msg *m);

/* Rank carried by the ABORT a reflector sends when a peer is lost. */
#define LM_HOME_ABORT_PEER 0xffffffffu

/* The transport says `node` is unreachable or restarted.  During a run:
 * one of our lemuriads, "lemuriad NAME lost" goes as ABORT to our other
 * clusters and the other reflectors (which pass it on); another
 * reflector, "reflector NAME lost" to our clusters.  Their lemuriads
 * abort the run for their clients.  `why`, when not NULL, follows "lost"
 * in the reason. */
void lm_home_peer_lost(lm_home *h, uint16_t node, const char *why);

struct lm_home_stats {
	uint64_t fetches;          /* FETCH requests answered with a page */
	uint64_t fetches_forwarded; /* FETCHes of our clusters sent to
				       another reflector's home */
	uint64_t fetch_cache_hits; /* ... answered from our cache instead */
	uint64_t fetches_coalesced; /* ... joined to one already in flight */
	uint64_t flushes;          /* FLUSH lists applied here as home */
	uint64_t flushes_forwarded; /* (parts of) lists sent to another
				       reflector's home */
	uint64_t held;             /* messages held until the homes had
				      applied the changes before them */
	uint64_t releases;         /* barrier releases passed to clusters */
	uint64_t regs_entered; /* cluster deltas registered here */
	uint64_t regs_merged;    /* ... folded into the one the cluster
				      held already */
	uint64_t pulls_sent;    /* PULLs sent to clusters */
	uint64_t pulls_ahead;   /* of those, for pages after a FETCH's */
	uint64_t pushes_received;    /* registered deltas whose data a cluster
				      pushed */
	uint64_t owned_granted;  /* pages a cluster was made the owner of
				    (docs/dsm.md "Pages one cluster owns") */
	uint64_t holder_drops;   /* pages a cluster's copy gave up */
	uint64_t versions_skipped; /* NEW entries that could not be merged
				      into their cluster's latest delta */
	uint64_t changed_sent;   /* CHANGED messages sent or passed on */
	uint64_t changed_pages;  /* pages they named */
	uint64_t fetches_waited;   /* FETCHes that waited for deltas */
	uint64_t page_diffs;       /* FETCHV pages sent as the bytes other
				      clusters changed, not whole */
	uint64_t registers_forwarded; /* REGISTER parts sent to other homes */
	uint64_t diffs_applied;    /* page diffs applied */
	uint64_t diffs_rejected;   /* diffs of FLUSH lists rejected whole */
	uint64_t barriers;         /* barriers completed as manager */
	uint64_t lock_grants;
	uint64_t lock_recalls;     /* tokens asked back from a cluster */
	uint64_t allocs;           /* successful ALLOCs (memory or ids) */
	uint64_t dropped_stale_run; /* messages of an older run */
	uint64_t dropped_bad;      /* bad sender, kind, type or content */
};

/* Counters since creation (a new run does not clear them). */
const struct lm_home_stats *lm_home_stats(const lm_home *h);

/* The master copy of `page`: *data points to page_size bytes owned by the
 * home (valid until the next lm_home_handle), or NULL for a page never
 * written (all zeros); *version is its version.  Returns 0 or LM_EINVAL
 * for a page outside the region. */
int lm_home_page(const lm_home *h, uint32_t page, const uint8_t **data,
		 uint32_t *version);

#endif
