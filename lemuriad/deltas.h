/* A lemuriad's cluster deltas (DESIGN.md §2, docs/dsm.md "Lazy, adaptive
 * and eager relay"):
 * what its clients wrote to each page and the homes do not hold yet.
 *
 * A page's delta goes through three states:
 *  - open: clients' diffs merged since the last registration;
 *  - registering: sealed into a REGISTER whose reply (the page's new
 *    version) has not come back;
 *  - sealed: registered at its home at a known version, kept here until
 *    the home pulls it (PULL) or we push it.
 * With a sealed delta still unpulled, the next one is registered as a
 * candidate to merge into it: the home merges when nobody wrote the page in
 * between, and both sides see it from the version the home answers (the
 * sealed version + 1).  Otherwise the older one is pushed, so that this
 * cluster holds at most one sealed delta per page and the home applies
 * every cluster's deltas in version order (I1).
 *
 * No messages go out by themselves: lm_deltas_seal and lm_deltas_registered
 * hand REGISTER messages to `emit`, which sends them as requests. */
#ifndef LM_LEMURIAD_DELTAS_H
#define LM_LEMURIAD_DELTAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

typedef struct lm_deltas lm_deltas;

/* Called with each REGISTER built (borrowed for the call). */
typedef void (*lm_deltas_emit_fn)(void *ctx, const struct lm_msg *reg);

/* Largest data of one REGISTER, bytes: a batch larger than this goes out
 * as several. */
#define LM_DELTAS_MSG_DATA (1u << 20)

/* With relay = adaptive, the registrations of a page that go with their
 * data after a home pulled its delta; the next is lazy again unless the
 * page was pulled since (docs/dsm.md "Lazy, adaptive and eager relay"). */
#define LM_DELTAS_SHARED_SENDS 4

/* Deltas of pages of page_size bytes, npages of them, for the cluster of
 * layout index `cluster`.  `adaptive` (relay = adaptive): a page whose
 * delta a home pulled is registered with its data, as in eager relay,
 * since another cluster reads it, LM_DELTAS_SHARED_SENDS times.  NULL
 * when memory runs out. */
lm_deltas *lm_deltas_create(uint32_t page_size, uint32_t npages,
			    uint32_t cluster, bool adaptive,
			    lm_deltas_emit_fn emit, void *ctx);
void lm_deltas_destroy(lm_deltas *d);
/* Keeps up to n (at most 1024) of the buffers the deltas free for the
 * next ones, instead of returning them to malloc; 0, the default, keeps
 * none.  Kept buffers are not in lm_deltas_buffers: the caller bounds n
 * by its memory budget.  lm_deltas_spares: how many are kept now. */
void lm_deltas_keep_spares(lm_deltas *d, size_t n);
size_t lm_deltas_spares(const lm_deltas *d);
/* Drops every delta (a new run). */
void lm_deltas_reset(lm_deltas *d);

/* The open delta of `page`, made if need be, for a client's diff
 * (validated) by `rank` that the caller records in it at once
 * (lm_delta_add_valid_diff_also): later writes win.  NULL when memory
 * runs out (nothing changed). */
struct lm_delta *lm_deltas_open(lm_deltas *d, uint32_t page, uint32_t rank);

/* Pages with an open delta, and pages whose DROP waits for the next
 * seal: what the next registration would carry. */
size_t lm_deltas_dirty(const lm_deltas *d);

/* copy = cluster (docs/dsm.md "Pages one cluster owns").
 * lm_deltas_forget: every delta of `page` is let go: the cluster owns
 * the page now, and what the home may pull of it is the whole page.
 * lm_deltas_drop: the next seal's registration says the cluster's copy
 * no longer holds `page` (an LM_REG_DROP entry). */
void lm_deltas_forget(lm_deltas *d, uint32_t page);
int lm_deltas_drop(lm_deltas *d, uint32_t page);
/* Delta buffers held (each page_size bytes plus a bit per byte). */
size_t lm_deltas_buffers(const lm_deltas *d);

/* Seals every open delta and registers it: as entries only (lazy), or
 * with the data (eager relay; memory pressure), in which case sealed
 * deltas are pushed too (`all_sealed`: every one; else those of the pages
 * being registered).  Emits one or more REGISTERs; returns how many (0
 * when nothing was open and nothing pushed). */
int lm_deltas_seal(lm_deltas *d, bool with_data, bool all_sealed);

/* The reply to a REGISTER of ours: the pages' new versions.  Decides for
 * each registering delta whether the home merged it into the sealed one;
 * pushes a sealed one it did not (emits a REGISTER of pushes). */
void lm_deltas_registered(lm_deltas *d, const struct lm_notice *n,
			  uint32_t count);

/* A PULL of `page` at `version`: encodes the delta into out (cap bytes,
 * lm_diff_bound(page_size) is enough) and forgets it.  0 with *len set;
 * LM_ENOENT when we hold no delta of that version (it was pushed). */
int lm_deltas_pull(lm_deltas *d, uint32_t page, uint32_t version,
		   uint8_t *out, size_t cap, size_t *len);

/* Writes our deltas the home's copy at `version` lacks into page_data. */
void lm_deltas_overlay(const lm_deltas *d, uint32_t page, uint32_t version,
		       uint8_t *page_data);

/* Whether any delta of `page` is held here. */
bool lm_deltas_has(const lm_deltas *d, uint32_t page);

struct lm_deltas_stats {
	uint64_t deltas_registered;   /* deltas registered (entries) */
	uint64_t deltas_merged;       /* registered deltas the home merged */
	uint64_t deltas_sent_data;    /* deltas whose data went with a
					 REGISTER (eager, spill) */
	uint64_t deltas_pushed;       /* sealed deltas pushed */
	uint64_t deltas_pulled;       /* PULLs answered with data */
	uint64_t deltas_pull_missing; /* PULLs of a delta no longer here */
	uint64_t delta_bytes_sent;    /* delta bytes in REGISTERs and PULL
					 answers */
	uint64_t deltas_sent_shared;  /* adaptive: sent with their data
					 because the page was pulled before */
	uint64_t deltas_forgotten;    /* pages whose deltas went when the
					 cluster came to own them */
};
const struct lm_deltas_stats *lm_deltas_stats(const lm_deltas *d);

#endif
