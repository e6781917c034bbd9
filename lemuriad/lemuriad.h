/* The lemuriad's protocol state machine (docs/dsm.md, role L): client
 * registration, the cluster page cache, FETCH coalescing, the cluster
 * deltas and their registration (lazy, eager or adaptive relay), the
 * cluster barrier, lock tokens, alloc relays, CREATE/END routing, run ids
 * and aborts.
 *
 * Decoded messages go in through lm_lemuriad_handle; messages come out
 * through the struct lm_msg_out callbacks during that call.  No sockets,
 * no clock, no threads. */
#ifndef LM_LEMURIAD_LEMURIAD_H
#define LM_LEMURIAD_LEMURIAD_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "proto.h"
#include "reliable.h"

typedef struct lm_lemuriad lm_lemuriad;

/* Rank carried by the ABORT sent when the reflector is lost. */
#define LM_LEMURIAD_ABORT_REFLECTOR 0xffffffffu

/* Local hand-offs a recalled token may still make before it goes back to
 * its manager, so that no cluster starves the others.  Cohort locks pass
 * locally up to a bound for the same reason; 16 serves a cluster of up to
 * 16 waiting clients before the token moves (SPLASH-2 programs number
 * their processes under a lock at the start: with 4, the clusters of
 * 8+8+8+8 got their numbers in runs of five and LU's block columns,
 * which go to consecutive numbers, spread over two clusters). */
#define LM_LEMURIAD_HANDOFFS_MAX 16u

/* Ticks (lm_lemuriad_tick, about a second each) a recalled token may stay
 * for a client that has just started work (locks.c, "fresh"): the first
 * tick after the wait began starts it, the second ends it, so the wait
 * lasts one to two seconds.  Numbering takes milliseconds; a worker that
 * computes for minutes before it first synchronises must not hold other
 * clusters' LOCKs for as long. */
#define LM_LEMURIAD_FRESH_TICKS 2u

/* Ticks a rank waits for a lock before its lemuriad asks whether the
 * wait is part of a cycle (locks.c, "Cycles"), and again each tick
 * after; the ranks of a chain followed at most. */
#define LM_LEMURIAD_PROBE_TICKS 2u
#define LM_LEMURIAD_PROBE_HOPS 32u

/* Under copy = cluster, writes the cluster made go up by themselves when
 * no barrier, lock release, CREATE or END sealed the copy for this long
 * (docs/dsm.md "Eventual visibility"): a seal and a registration, as a
 * release would, with nothing behind them. */
#define LM_LEMURIAD_PUBLISH_US 30000u

/* ... and only when the cluster is quiet, nor are the pages of the
 * others' CHANGED fetched before: no barrier RELEASE and no message from
 * a client for LM_LEMURIAD_QUIET_US (a client that spins sends nothing;
 * a cluster that passes barriers has no client that spins, as every
 * rank takes part in every barrier, and the next barrier seals and tells
 * it all anyway), or no barrier for LM_LEMURIAD_QUIET_MAX_US (a client
 * may spin while a cluster-mate keeps asking for pages). */
#define LM_LEMURIAD_QUIET_US 50000u
#define LM_LEMURIAD_QUIET_MAX_US 1000000u

/* What our registrations changed is told to the other clusters (CHANGED)
 * this long after the first of them (docs/dsm.md "Eventual
 * visibility"): a program that synchronises hears of it first, and the
 * changes of a busy cluster go in one list. */
#define LM_LEMURIAD_CHANGED_DELAY_US 20000u

/* A page newer than every change this cluster was told of waits before
 * it goes into the copy (docs/dsm.md "Eventual visibility", "Order"):
 * the other clusters are asked to tell what they changed at once
 * (CHANGED LM_CHANGED_HURRY), again every LM_LEMURIAD_HURRY_GAP_US while
 * it waits; one so asked tells what it registers for LM_LEMURIAD_HURRY_US
 * without the delay above.  After LM_LEMURIAD_ORDER_WAIT_MAX_US the page
 * goes in anyway (counted: order_late): a list may never come (a
 * writer's memory ran out: changes_untold).  Long enough for a writer's
 * registration to be answered through 5 % loss on a loaded host (1 s
 * was not, once, in make check). */
#define LM_LEMURIAD_HURRY_GAP_US 5000u
#define LM_LEMURIAD_HURRY_US 50000u
#define LM_LEMURIAD_ORDER_WAIT_MAX_US 5000000u

/* A set going into the copy takes in the lists heard while its pages
 * came (a page may be newer than its list said) this many times at
 * most; then it goes in as it is (counted: order_cut), or a page that
 * changes all the time would keep it out for ever. */
#define LM_LEMURIAD_SET_ROUNDS_MAX 64u

/* Under copy = cluster, a barrier's seal drops the idle twins of pages
 * another cluster wrote since and keeps the others (common/cluster_copy.h
 * lm_ccopy_drop; docs/dsm.md "Twins dropped"): each kept twin costs a
 * comparison at every seal, a drop every client a protection change.
 * Once the comparisons spent on kept twins since the last drop of them
 * all reach this many per client of the cluster, the next barrier drops
 * them all. */
#define LM_LEMURIAD_KEEP_COMPARES_PER_CLIENT 1024u

/* Creates the state machine of cluster `name` of `layout`.  The layout is
 * borrowed and must outlive the machine; *out is copied; ctx is passed to
 * every callback.  layout_hash is what every JOIN must carry.  NULL when
 * the layout has no cluster `name` or memory runs out. */
lm_lemuriad *lm_lemuriad_create(const struct lm_layout *layout,
			      const char *name, uint64_t layout_hash,
			      const struct lm_msg_out *out, void *ctx);
/* Frees everything; accepts NULL. */
void lm_lemuriad_destroy(lm_lemuriad *c);

/* Executes one message from node `from` (a client of this cluster or its
 * reflector; anything else is dropped and counted).  m and what it points
 * to are borrowed for the call; what must outlive it is copied. */
void lm_lemuriad_handle(lm_lemuriad *c, uint16_t from,
		       enum lm_rel_msg_kind kind, uint32_t req_id,
		       const struct lm_msg *m);

/* Work put off until the messages at hand are answered: the updates of
 * a barrier all our clients reached, encoded while the RELEASE is on its
 * way (lm_updates_encode_ahead), a few pages a call.  Returns true while
 * some is left. */
bool lm_lemuriad_background(lm_lemuriad *c);

/* A descriptor the daemon watches for reading (-1: none): readable when
 * a client's fault waits on the cluster's copy with no wake to come
 * (common/copy_set.h, lm_copy_set_wake_waiting); then
 * lm_lemuriad_readable wakes it. */
int lm_lemuriad_wait_fd(const lm_lemuriad *c);
void lm_lemuriad_readable(lm_lemuriad *c);

/* The daemon's clock, about once a second while a run is on: ends the
 * waits no message would end (LM_LEMURIAD_FRESH_TICKS). */
void lm_lemuriad_tick(lm_lemuriad *c);

/* The daemon's clock, after each message and when asked: publishes what
 * the cluster wrote when nothing did for LM_LEMURIAD_PUBLISH_US; returns
 * when to ask next (0: never, no client of a run with one copy). */
uint64_t lm_lemuriad_pulse(lm_lemuriad *c, uint64_t now_us);

/* The transport says `node` is unreachable or restarted.  A joined client
 * of the run: every other joined client gets ABORT{rank, "rank N lost"}
 * (one-way) and the run's state is dropped.  The reflector: ABORT{
 * LM_LEMURIAD_ABORT_REFLECTOR, "reflector NAME at ADDR lost"} to every
 * joined client,
 * state dropped.  Until a JOIN with a newer run, the aborted run's
 * messages are dropped (JOIN gets JOIN_OK{LM_ECLOSED}, LEAVE is still
 * answered).  `why`, when not NULL, follows "lost" in the reason (what
 * the transport saw: a different secret). */
void lm_lemuriad_peer_lost(lm_lemuriad *c, uint16_t node, const char *why);

struct lm_lemuriad_stats {
	uint64_t fetch_hits;        /* FETCH answered from the cache */
	uint64_t fetch_neighbours;  /* pages after it that a client's
				       FETCHV got along, from the cache */
	uint64_t fetch_misses;      /* FETCH forwarded to the reflector */
	uint64_t fetch_ahead;       /* pages asked after a client's miss */
	uint64_t fetch_coalesced;   /* FETCH joined one already forwarded */
	uint64_t flushes;           /* FLUSH lists applied to the cache and
				       the deltas */
	uint64_t evictions;         /* copies dropped to stay in the cache */
	uint64_t invalidations;     /* copies dropped by a newer notice */
	uint64_t kept;              /* copies kept by a newer notice that
				       names this cluster the only writer */
	uint64_t barriers;          /* cluster barriers sent upward */
	uint64_t locks;             /* GRANTs relayed to clients */
	uint64_t dropped_stale_run; /* messages of an older (or aborted) run */
	uint64_t dropped_bad;       /* bad sender, kind, type or content */
	uint64_t registrations;     /* batches of deltas registered */
	uint64_t spills;            /* batches sent with their data to stay
				       within the cache size */
	uint64_t recalls;           /* RECALLs of a token held here */
	uint64_t lock_probes;       /* PROBEs sent up: a lock waited for
				       two ticks or more (locks.c) */
	uint64_t recalls_waited;    /* ... kept for a client that had just
				       started work (locks.c) */
	uint64_t recall_waits_ended; /* ... of which LM_LEMURIAD_FRESH_TICKS
					ended the wait */
	uint64_t tokens_returned;   /* lock tokens given back upward */
	uint64_t local_handoffs;    /* lock grants made from a token here
				       (the first after it came included) */
	size_t cached_bytes;        /* page bytes held now (<= cache size) */
	uint64_t copy_installs;     /* copy = cluster: pages put into the
				       cluster's copy */
	uint64_t copy_seals;        /* ... seals of its writes */
	uint64_t copy_sealed_bytes; /* ... and the diff bytes they found */
	uint64_t copy_seal_reads;   /* ... pages the seals of one instant
				       read (each pass counts) */
	uint64_t copy_drops;        /* ... barrier seals that dropped idle
				       pages' twins */
	uint64_t copy_checked;      /* ... pages LEMURIA_CHECK_COPY compared */
	uint64_t copy_sets;         /* ... sets of pages put in as one
				       (common/copy_set.h) */
	uint64_t copy_set_pages;    /* ... their pages */
	uint64_t copy_sets_split;   /* ... sets put in page by page: a
				       client gave no userfaultfd */
	uint64_t copy_late_wakes;   /* ... clients' faults woken again:
				       the kernel lost their wake */
	uint64_t copy_notices_held; /* ... notices left out of a list for
				       the clients (RELEASE, GRANT, CREATE;
				       once a list): the copy held them */
	uint64_t copy_owned;        /* ... pages the cluster came to own
				       (docs/dsm.md "Pages one cluster
				       owns") */
	uint64_t copy_own_refused;  /* ... grants refused: the copy lacked
				       another cluster's change */
	uint64_t copy_recalls;      /* ... owned pages a home took back */
	uint64_t copy_recalls_unwritten; /* ... of them unwritten since */
	uint64_t copy_forgotten;    /* ... stale pages the copy gave up */
	uint64_t copy_published;    /* ... seals of a cluster that sealed
				       nothing for LM_LEMURIAD_PUBLISH_US
				       (docs/dsm.md "Eventual visibility") */
	uint64_t changed_heard;     /* pages CHANGED named */
	uint64_t changed_fetches;   /* ... that the copy held older and were
				       fetched into it */
	uint64_t changed_groups;    /* ... sets of them installed together */
	uint64_t changed_again;     /* ... pages of a set whose answer was
				       not cached at the newest version
				       heard when the set went in (a bad
				       reply, no memory, a notice dropped
				       it), asked for again in the next set */
	uint64_t changes_told;      /* CHANGED sent: our registrations'
				       pages, for the other clusters */
	uint64_t changes_told_pages; /* ... pages they named */
	uint64_t changes_untold;    /* ... pages not told (no memory) */
	uint64_t order_waits;       /* fetch answers that waited for the
				       list naming their page (order.c) */
	uint64_t order_hurries;     /* ... CHANGED HURRY sent for them */
	uint64_t order_hurried;     /* ... received */
	uint64_t order_late;        /* ... waits given up after
				       LM_LEMURIAD_ORDER_WAIT_MAX_US */
	uint64_t order_cut;         /* ... sets put in without the lists
				       heard last (LM_LEMURIAD_SET_ROUNDS_MAX) */
};

/* Counters since creation (a new run does not clear them). */
const struct lm_lemuriad_stats *lm_lemuriad_stats(const lm_lemuriad *c);

struct lm_updates_stats;
/* Counters of the barrier updates (lemuriad/updates.h; zero when off). */
const struct lm_updates_stats *
lm_lemuriad_updates_stats(const lm_lemuriad *c);

struct lm_deltas_stats;
/* Counters of the cluster deltas (lemuriad/deltas.h). */
const struct lm_deltas_stats *lm_lemuriad_delta_stats(const lm_lemuriad *c);

struct lm_ccopy;
/* The cluster's one copy under copy = cluster, as the lemuriad sees it
 * (common/cluster_copy.h); NULL when the cluster has none.  What a test
 * reads and writes in place of the clients. */
const struct lm_ccopy *lm_lemuriad_copy(const lm_lemuriad *c);

#endif
