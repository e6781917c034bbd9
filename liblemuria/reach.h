/* How far a fault on an invalid page reaches (docs/dsm.md "Neighbour
 * pages"): how many of the invalid pages after it, and how many along the
 * stride its faults follow, it brings along.  A page brought along and
 * read saves a fault and a round trip; one never read costs its bytes, its
 * installation and, held, its updates.  LU reads the pages after its
 * faults (a column of blocks), LU contiguous the pages along its stride
 * and not those after (docs/performance.md), so each kind keeps a depth of
 * its own and follows what the program does: now and then one page of a
 * kind, picked at random among those brought along, is installed closed,
 * so that its first access is seen (a sample, read or not by the next
 * release); a kind with half of its samples read or more goes deeper, up
 * to the layout's `prefetch`, one with over two thirds unread goes
 * shallower, down to none.  A kind at none brings a single page now and
 * then, as a probe.
 *
 * Pure bookkeeping: liblemuria/pagefault.c installs and watches the
 * samples, region.c settles them at releases and reports them.  Not
 * thread-safe (the region's lock guards it). */
#ifndef LM_REACH_H
#define LM_REACH_H

#include <stdbool.h>
#include <stdint.h>

enum lm_reach_kind {
	LM_REACH_AFTER,  /* the pages after the faulting one */
	LM_REACH_STRIDE, /* the pages along the fault's stream */
	LM_REACH_KINDS
};

/* A kind is judged after this many samples: deeper when at least half
 * of them were read, shallower when fewer than a third were (a page read
 * saves a round trip, one unread costs much less). */
#define LM_REACH_WINDOW 8
/* One fault in this many samples (each kind that brought pages along). */
#define LM_REACH_EVERY 2
/* A kind at depth 0 brings one page along on one fault in this many. */
#define LM_REACH_PROBE 8
/* Samples awaiting their answer at most. */
#define LM_REACH_PENDING 16

struct lm_reach_sample {
	uint32_t page;
	enum lm_reach_kind kind;
};

struct lm_reach_stats {
	uint64_t samples[LM_REACH_KINDS]; /* judged */
	uint64_t read[LM_REACH_KINDS];    /* of those, read in time */
	uint64_t deeper[LM_REACH_KINDS];  /* changes of depth */
	uint64_t shallower[LM_REACH_KINDS];
};

struct lm_reach {
	uint32_t max;                     /* the layout's prefetch */
	uint32_t depth[LM_REACH_KINDS];
	uint32_t seen[LM_REACH_KINDS];    /* judged since the last verdict */
	uint32_t read[LM_REACH_KINDS];
	uint32_t faults[LM_REACH_KINDS];  /* faults that asked for the kind */
	uint64_t rng;
	struct lm_reach_sample pending[LM_REACH_PENDING];
	uint32_t npending;
	struct lm_reach_stats stats;
};

/* Both depths start at max (at most 255), nothing pending. */
void lm_reach_init(struct lm_reach *r, uint32_t max);

/* The depth of `kind` for the fault being served: its depth, or 1 on a
 * probing fault when that is 0 (0 when max is 0).  Counts the fault. */
uint32_t lm_reach_depth(struct lm_reach *r, enum lm_reach_kind kind);

/* Whether this fault samples `kind`, of which it brought n pages along;
 * if so *pick is the index (< n) of the page to install closed, and the
 * caller must report it with lm_reach_add. */
bool lm_reach_sample(struct lm_reach *r, enum lm_reach_kind kind,
		     uint32_t n, uint32_t *pick);
void lm_reach_add(struct lm_reach *r, uint32_t page, enum lm_reach_kind kind);

/* A fault on `page`: when it is a pending sample, it was read.  Returns
 * whether it was one. */
bool lm_reach_touched(struct lm_reach *r, uint32_t page);

/* A release: every sample still pending was not read in its interval. */
void lm_reach_settle(struct lm_reach *r);

#endif
