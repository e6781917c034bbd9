/* Internals of the lemuriad's state machine (lemuriad/lemuriad.h), shared
 * by its parts, each of which calls only those below it:
 *
 *   lemuriad.c  dispatch: runs, clients (JOIN, LEAVE, FLUSH, BARRIER,
 *               CREATE, END, ABORT), routing of every message
 *   release.c   a barrier RELEASE held for its updates, and the messages
 *               put off while it goes out
 *   locks.c     lock tokens: every LOCK, UNLOCK, RECALL and GRANT
 *   fetches.c   FETCH, FETCHV, their replies, pages fetched ahead
 *   parking.c   registration of our deltas, PULL, and the messages parked
 *               behind a registration
 *   notices.c   write notices applied to the cache, kept for local GRANTs
 *   changes.c   what our registrations changed, told to the other
 *               clusters (CHANGED)
 *   order.c     what other clusters' changes we were told of, so that
 *               fetches.c puts them into the copy in order
 *   copy.c      copy = cluster: the cluster's one copy, shared with the
 *               clients (installs, seals)
 *   cache.c     the page cache, the diffs our cluster writes into it and
 *               the open deltas, and the table of our requests to R
 *   deltas.c, updates.c  (their own headers)
 *
 * Where a lower part must tell a higher one something it goes through
 * struct lm_lemuriad_hooks, filled in by lm_lemuriad_create.  Nothing here
 * is for use outside lemuriad/. */
#ifndef LM_LEMURIAD_LEMURIAD_INT_H
#define LM_LEMURIAD_LEMURIAD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lemuriad.h"
#include "cluster_copy.h"
#include "copy_set.h"
#include "deltas.h"
#include "log.h"
#include "notice_set.h"
#include "page_trace.h"
#include "updates.h"

/* One cached copy of a page.  `version` is the home version it reflects
 * (I3); the data may hold more than that version: exactly the home's page
 * at `version` plus every delta of ours the home lacked then (see
 * reply_page and handle_flush). */
struct cpage {
	uint32_t page;
	uint32_t version;
	uint64_t tag;                   /* new whenever data changes (the
					   updates encoded ahead check it) */
	bool ordered;                   /* its reply's registrations were
					   all told us (order.c): it may go
					   into the copy with the lists
					   heard */
	uint8_t *tags;                  /* not ordered: its reply's tags
					   (LM_MSG_TAG_SIZE bytes each), so
					   that it becomes ordered when they
					   are told (lm_order_cached); NULL:
					   not known, fetched again */
	uint32_t ntags;
	struct cpage *prev, *next;      /* LRU list, head = most recent;
					   next links the spares */
	uint8_t data[];                 /* page_size bytes */
};

/* Pages in a client's FETCHV: the one it faulted on, those after it and
 * as many along a stride (LM_CFG_PREFETCH_MAX each). */
#define LM_LEMURIAD_FETCHV_MAX (2 * LM_CFG_PREFETCH_MAX + 1)

/* A client request waiting for a reply from the reflector. */
struct waiter {
	uint16_t node;
	uint32_t req_id;
	uint32_t need;     /* FETCH: oldest version that may answer it */
	/* a FETCHV's: the pages it asked for after the first, which its
	 * PAGES brings when we hold them by then */
	uint32_t more[LM_LEMURIAD_FETCHV_MAX - 1];
	uint32_t nmore;
	uint32_t reach;    /* a FETCHV's: how many pages after the first the
			      client's fault reaches (at most prefetch) */
	struct waiter *next;
};

enum up_kind {
	UP_FETCH, /* one per page; every waiter answered from the reply */
	UP_LOCK,  /* relayed; the GRANT is passed down */
	UP_ALLOC, /* relayed */
	UP_FREE,  /* relayed */
	UP_REGISTER, /* ours: a batch of deltas registered at their homes */
	UP_PUSH,  /* ours: sealed deltas pushed home */
	UP_FETCHV, /* ours: pages of a held RELEASE asked for together; each
		      has its UP_FETCH, not sent on its own unless the
		      PAGES reply leaves it out */
	UP_KIND_COUNT
};

/* A request of ours to the reflector, matched with its reply by req_id. */
struct upreq {
	uint32_t req_id;
	enum up_kind kind;
	uint32_t page;          /* UP_FETCH */
	uint32_t min_version;   /* UP_FETCH: newest notice seen meanwhile */
	uint32_t left;          /* UP_FETCH: data of the page that left us
				   while it was pending is in the home's
				   copy from this version on (UINT32_MAX:
				   not known); an older reply is not cached.
				   0: nothing left */
	uint32_t pre;           /* UP_FETCH for the held RELEASE: its
				   notice's index + 1 (0: none) */
	bool batched;           /* UP_FETCH: asked in an UP_FETCHV, no FETCH
				   of its own sent yet */
	bool rebuilt;           /* UP_FETCH: its reply being handled is our
				   saved copy with a PAGES diff applied
				   (fetches.c, for release.c) */
	bool ahead;             /* UP_FETCH: a client's FETCHV miss; its reply
				   sends for the pages after it.  UP_FETCHV:
				   such pages, each fetched alone when left
				   out only if someone waits for it */
	bool refresh;           /* UP_FETCH: for a CHANGED (fetches.c): asked
				   again until a reply goes into the copy */
	bool grouped;           /* ... one of a set that goes into the copy
				   together, once all came */
	bool gated;             /* UP_FETCH: answered (the page is cached at
				   gated_version), but the answer waits
				   until it may go into the copy in order
				   (order.c); nothing on its way */
	uint32_t gated_version;
	uint32_t *batch;        /* UP_FETCHV: its pages (owned) */
	uint32_t nbatch;
	uint32_t lock_id;       /* UP_LOCK */
	uint32_t rank;          /* UP_LOCK: who will hold it */
	struct waiter *waiters;
	struct upreq *next, *prev;  /* every request, newest first */
	struct upreq *id_next;      /* hash chain by req_id */
	struct upreq *page_next;    /* UP_FETCH: hash chain by page */
};

/* Buckets of the request tables: thousands of FETCHes may be in flight
 * at a held RELEASE, and each reply and notice looks one up. */
#define LM_LEMURIAD_UP_BUCKETS 4096u

/* What we know of one client slot (local rank) in the current run. */
struct client {
	bool joined;
	bool left;              /* it joined this run and LEFT it */
	uint32_t pid;
	bool at_barrier;        /* its BARRIER waits for RELEASE */
	uint32_t barrier_id;
	uint32_t barrier_req;
	bool wants_work;        /* its WAIT_WORK waits for a CREATE */
	uint32_t work_req;
	bool has_work;          /* a CREATE came first and is kept */
	uint64_t work_offset;
	int32_t work_status;
	uint8_t *work_data;     /* owned copy of the image */
	size_t work_len;
	struct lm_notice *work_notices; /* what rank 0 published (owned) */
	uint32_t work_nnotices;
	bool wants_end;         /* its WAIT_END waits for `end_count` ENDs */
	uint32_t end_count;
	uint32_t end_req;
	bool fresh;             /* started or created work and has not
				   synchronised since (locks.c) */
	bool active;            /* sent a request other than WAIT_WORK
				   in this run */
};

/* A client waiting for a lock whose token is (or is coming) here. */
struct lwaiter {
	uint16_t node;
	uint32_t req_id;
	uint32_t rank;
	uint32_t ticks; /* lm_lemuriad_tick's since it asked */
};

/* A lock as this cluster sees it (DESIGN.md §2, Locks): its token stays
 * here between local holders until the manager recalls it. */
struct token {
	uint32_t id;
	bool here;          /* the token is in this cluster */
	bool busy;          /* ... and local client `holder` has the lock */
	bool asked;         /* LOCK sent up, its GRANT not back yet */
	bool recalled;      /* the manager wants the token back */
	uint32_t recall_round; /* ... for a rank of another cluster that
				  asked in this round (RECALL's epoch) */
	uint32_t holder;
	uint32_t granted;   /* the rank the manager granted it to: the
			       UNLOCK that returns it names that rank */
	uint32_t handoffs;  /* local hand-offs since the recall */
	bool waited;        /* recalled, kept for a fresh client */
	uint32_t wait_ticks; /* ticks it has waited (LM_LEMURIAD_FRESH_TICKS) */
	struct lwaiter *q;  /* local clients waiting, FIFO */
	size_t nq, qcap;
};

/* A message parked until the deltas it publishes are registered at their
 * homes (I2): batch `need` must be done (parking.c).  All but GRANT go up
 * to the reflector; GRANT is a local hand-off of lock `id` to client
 * `node`, answering its LOCK `req_id`. */
struct parked {
	uint16_t type;      /* BARRIER, UNLOCK, END, CREATE or GRANT */
	uint32_t need;
	uint32_t id;        /* BARRIER, UNLOCK, GRANT */
	uint32_t rank;      /* UNLOCK, END, CREATE */
	int32_t status;     /* END, CREATE */
	uint64_t offset;    /* CREATE */
	uint8_t *data;      /* CREATE's image, owned */
	size_t data_len;
	uint16_t node;      /* GRANT */
	uint32_t req_id;    /* GRANT */
};

/* A PULL of a page we own, answered once the messages at hand are
 * (parking.c, lm_park_send_recalls): the page as it was, DELTA's entry. */
struct recall {
	uint32_t req_id;
	uint32_t page, version;
	uint8_t *data;      /* owned */
	size_t len;
	bool unwritten;     /* lm_copy_recall's: no seal needed */
};

/* A barrier RELEASE held while the pages other clusters changed, which
 * our clients hold, are fetched, so that it can bring those copies up
 * to date too (docs/dsm.md "Updates"). */
enum rel_kind {
	REL_NONE,  /* invalidate */
	REL_KEEP,  /* our copy kept by the sole-cluster rule: the source */
	REL_FETCH, /* our copy at base saved in `old`, the page fetched */
};

struct held_release {
	bool active;
	uint32_t id;
	struct lm_notice *notices; /* owned copy of the RELEASE's */
	uint32_t nnotices;
	uint8_t *kind;             /* enum rel_kind, per notice */
	struct cpage **saved;      /* REL_FETCH: our copy at base, taken
				      out of the cache (owned) */
	uint8_t **old;             /* REL_FETCH: saved[i]->data */
	bool *arrived;             /* REL_FETCH: the page came, into the
				      cache, where the updates read it */
	uint32_t *slot;            /* REL_FETCH: its mask in known_block */
	uint64_t **known;          /* REL_FETCH: the other clusters' bytes
				      when the page came as a diff, else
				      NULL; in known_block */
	uint64_t *known_block;     /* a byte mask per fetch, owned */
	uint32_t pending;          /* fetches not answered yet */
	/* The RELEASE going out a client at a time (release.c, staged):
	 * between two clients the daemon reads the socket, so a released
	 * client's fault and another cluster's PULL are answered, while
	 * whatever would change the epoch's state waits in `deferred`. */
	bool staging;
	bool updates;              /* the staged RELEASE carries updates */
	uint32_t next_slot;        /* the next client to consider */
};

/* Most messages put off while a RELEASE is staged: this many per client
 * and for the reflector; more are dropped and counted as bad. */
#define LM_RELEASE_DEFER_PER_CLIENT 8
#define LM_RELEASE_DEFER_REFLECTOR 64

/* A message put off while a RELEASE is staged, kept as it was decoded
 * (m's notices, data and diffs point into `mem`, owned), handled after
 * it in the order it came. */
struct deferred_msg {
	uint16_t from;
	enum lm_rel_msg_kind kind;
	uint32_t req_id;
	struct lm_msg m;
	void *mem;
};

/* How a lower part tells a higher one (see the top of this file). */
struct lm_lemuriad_hooks {
	/* parking.c -> lemuriad.c: something of the run was lost; the run
	 * ends everywhere, naming `why` */
	void (*lose)(lm_lemuriad *c, const char *why);
	/* parking.c -> locks.c: a parked local hand-off may go now */
	void (*grant)(lm_lemuriad *c, uint32_t id, uint16_t node,
		      uint32_t req_id);
	/* fetches.c -> release.c: the reply to the held RELEASE's fetch
	 * `up` came (data NULL: it failed) */
	void (*arrived)(lm_lemuriad *c, struct upreq *up, const uint8_t *data,
			uint32_t version);
	/* fetches.c -> release.c: the page a PAGES diff entry `n` brings
	 * for the held RELEASE's fetch `up`, or NULL */
	const uint8_t *(*rebuild)(lm_lemuriad *c, const struct upreq *up,
				  const struct lm_notice *n,
				  const uint8_t *data, size_t len);
};

struct lm_lemuriad {
	const struct lm_layout *layout;
	const struct lm_cluster_cfg *cfg;
	struct lm_msg_out out;
	void *ctx;
	struct lm_lemuriad_hooks hooks;
	uint64_t layout_hash;
	uint16_t reflector;     /* node id of our reflector */
	uint32_t index;         /* our cluster's index in the layout, as
				   notices name it (wcluster) */
	uint16_t first_node;    /* node id of local rank 0 */
	uint32_t nclients;
	uint32_t page_size;
	uint64_t npages;

	uint64_t run;
	bool active;            /* some client joined this run */
	bool aborted;           /* the run failed; its messages are dropped */
	struct client *clients; /* nclients slots */

	/* page cache: indexed by page (npages entries) + LRU list; copies
	 * dropped are kept for reuse (cache.c, LM_LEMURIAD_SPARE_PAGES) */
	struct cpage **by_page;
	struct cpage *lru_head, *lru_tail;
	struct cpage *spare;
	size_t nspare;
	size_t ncached, cache_max;

	struct upreq *ups;
	struct upreq **up_by_id;   /* LM_LEMURIAD_UP_BUCKETS chains */
	struct upreq **up_by_page; /* UP_FETCH only */
	uint32_t next_req;
	size_t nwaits, max_waits;

	bool barrier_up;        /* BARRIER{barrier_up_id} sent, no RELEASE */
	bool someone_left;      /* a client of the run LEFT it (left_rank): a */
	uint32_t left_rank;     /* barrier after that can never complete */
	bool gathering;         /* clients wait at barrier gathering_id, */
	uint32_t gathering_id;  /* not all of them arrived yet */
	uint32_t barrier_up_id;
	uint32_t rounds;        /* RELEASEs of this run taken so far */

	uint32_t ends;          /* ENDs received, not yet consumed */
	struct lm_notice *end_notices; /* merged from the ENDs (owned) */
	uint32_t end_nnotices;

	struct token *tokens;   /* locks our clients hold or want */
	size_t ntokens, tokens_cap;
	struct lm_notice_set epoch_notes; /* since the last barrier: the
					     notices of our registrations
					     and every notice we applied */

	/* cluster deltas (docs/dsm.md "Lazy, adaptive and eager relay") */
	lm_deltas *deltas;
	bool eager;             /* relay = eager: deltas go with the data */
	uint32_t batch_started; /* registrations started ... */
	uint32_t batch_done;    /* ... and answered */
	uint32_t batch_parts;   /* REGISTERs of the current one unanswered */
	bool batch_owed;        /* the next one must start after it: a
				   recalled page's answer named it */
	struct recall *recalls; /* owned pages pulled, answers waiting */
	size_t nrecalls, recalls_cap;
	bool sealing;           /* emitting a batch (not pushes) */
	struct parked *parked;
	size_t nparked, parked_cap;
	uint8_t *pagebuf;       /* a fetched page with our deltas on top */
	uint32_t *known;        /* per page: the newest version a copy
				   here must reflect (notices seen, our own
				   registrations), which a FETCH asks the
				   reflector's cache for */
	uint32_t *told_all;     /* per page: the newest version a barrier's
				   RELEASE told every client of (a client
				   whose view was older closed it then) */
	uint8_t *leaving;       /* per page: 1 while data of ours is on its
				   way up with a registration whose version
				   we do not know yet */
	uint8_t *deltabuf;      /* one encoded delta, for PULL */
	uint8_t *fetchv_buf;    /* the pages of a PAGES to a client */
	size_t fetchv_cap;
	lm_updates *updates;    /* barrier updates; NULL when off */
	uint64_t next_tag;      /* for struct cpage's tag */
	bool ahead;             /* updates to encode before the RELEASE */
	struct held_release rel;
	struct deferred_msg *deferred;
	size_t ndeferred, deferred_cap;
	bool replaying;         /* lemuriad.c is handling the deferred */

	/* copy = cluster (copy.c): the run's object, shared with the
	 * clients; copy.map NULL and copy.fd -1 when none */
	bool shared;
	struct lm_ccopy copy;
	struct lm_copy_filler filler; /* sets put in as one (copy_set.h) */
	uint8_t *aliased;       /* per page: also mapped at the executable's
				   globals in the clients (NULL: none); the
				   run's, kept from a CREATE that came before
				   the copy was made */
	int *set_conn;          /* per client: the connection its copy went
				   on, until its userfaultfd comes back */
	int *set_uffd;          /* ... that userfaultfd (-1: none yet) */
	int uffd_watch;         /* an epoll set of those userfaultfds, for
				   the faults whose wake the kernel lost
				   (lm_copy_wake_waiting) */
	uint8_t *sealbuf;
	uint8_t *copy_idle;     /* per page: seals in a row it was clean */
	uint32_t copy_kept;     /* twins idle long enough that the last
				   barrier's seal kept (lm_ccopy_drop) */
	uint64_t copy_keep_spent; /* comparisons of kept twins since the
				     last seal that dropped them all */
	uint32_t *copy_pulled;  /* per page: the batch during which a home
				   last pulled a delta of it (lm_copy_own) */
	uint32_t *copy_stale;   /* pages the copy may hold older than known
				   (lm_copy_note_known), each once */
	uint8_t *copy_stale_on; /* per page: listed there */
	uint32_t ncopy_stale;
	struct lm_notice *copy_notes; /* lm_copy_client_notices' answer */
	uint32_t copy_notes_cap;
	bool check_copy;        /* LEMURIA_CHECK_COPY: compare it with our
				   cached copies at every barrier */
	struct lm_page_trace *trace; /* LEMURIA_PAGE_TRACE, or NULL */
	uint64_t now_us;        /* the clock at the last lm_lemuriad_pulse */
	uint64_t sealed_us;     /* ... after the last seal */
	bool sealed;            /* lm_copy_seal ran since the last pulse */
	uint64_t released_us;   /* ... after the last barrier RELEASE */
	bool released;          /* one came since the last pulse */
	uint64_t client_us;     /* ... after a client's last message */
	bool client_spoke;      /* one came since the last pulse */
	/* pages CHANGED named, waiting for a quiet cluster (fetches.c):
	 * per page the version wanted (0: none), and the list of them */
	uint32_t *chg_want, *chg_list;
	uint32_t nchg;
	/* ... the pages being fetched to go into the copy together
	 * (fetches.c): none of them goes in before all came */
	uint32_t *grp_list;
	uint32_t ngrp;
	uint8_t *grp_on;        /* per page: in grp_list */
	/* the order of other clusters' changes (order.c): per page the
	 * newest version a list we were told of names (a CHANGED, a GRANT's
	 * or CREATE's notices, our own registrations; NULL but under copy =
	 * cluster), and the pages whose fetch answers wait for it */
	uint32_t *heard;
	uint32_t *gated_list;
	uint32_t ngated;
	uint32_t *heard_reg;    /* per cluster: its registrations told us
				   (CHANGED's version) */
	uint32_t *need_reg;     /* ... that must be told before anything
				   waiting goes in: the tags of its
				   replies, and what the writers of the
				   lists heard had been told */
	uint8_t *tagout;        /* our CHANGED's tags (heard_reg) */
	uint32_t told_through;  /* ... told to the others so far */
	uint64_t order_since;   /* when the wait began (0: none waits) */
	uint64_t hurry_sent_us; /* our last CHANGED LM_CHANGED_HURRY */
	uint64_t hurry_until;   /* a reader asked us: tell at once till then */
	uint32_t tell_owed;     /* a registration a page taken back from us
				 * named: its list goes at once when done */
	bool committing;        /* fetches.c puts a waiting set in */
	uint32_t set_rounds;    /* ... lists it took in while it waited */
	struct lm_copy_set_item *set_items; /* ... its pages */
	uint32_t set_cap;
	/* pages our registrations changed, not yet told to the other
	 * clusters (changes.c): per page the newest version (0: none), the
	 * list, the time the first was queued (0: at the next pulse) */
	uint32_t *mine_version, *mine_list;
	uint32_t nmine;
	uint64_t mine_at;
	struct lm_notice *mine_out; /* LM_CHANGED_MAX: one CHANGED's list */

	struct lm_lemuriad_stats stats;
};

/* ---- helpers shared by the parts ---- */

static inline void count_bad(lm_lemuriad *c, uint16_t from,
			     const struct lm_msg *m, const char *why)
{
	/* counted, and logged rate-limited (a peer controls how often) */
	c->stats.dropped_bad++;
	lm_log_limited("bad messages dropped by the lemuriad", LM_LOG_WARN,
		       "cluster %s: dropped %s from node %u: %s",
		       c->cfg->name, m ? lm_msg_name(m->type) : "message",
		       from, why);
}

static inline uint16_t slot_node(const lm_lemuriad *c, int slot)
{
	return (uint16_t)(c->first_node + slot);
}

static inline uint32_t slot_rank(const lm_lemuriad *c, int slot)
{
	return c->cfg->first_rank + (uint32_t)slot;
}

/* Local rank of a client node, or -1 when the node is not one of ours. */
static inline int client_slot(const lm_lemuriad *c, uint16_t node)
{
	if (node < c->first_node ||
	    (uint32_t)(node - c->first_node) >= c->nclients)
		return -1;
	return node - c->first_node;
}

static inline void msg_init(const lm_lemuriad *c, struct lm_msg *m,
			    uint16_t type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->run = c->run;
}

static inline void reply_status(lm_lemuriad *c, uint16_t node,
				uint32_t req_id, uint16_t type, int32_t status)
{
	struct lm_msg r;

	msg_init(c, &r, type);
	r.status = status;
	c->out.reply(c->ctx, node, req_id, &r);
}

/* Memory the deltas hold, in pages (a buffer is a page and a bit per
 * byte): they share the cluster's cache budget with the copies (I5). */
static inline size_t delta_pages(const lm_lemuriad *c)
{
	size_t n = lm_deltas_buffers(c->deltas);

	return n + (n + 7) / 8;
}

/* Whether a client takes a number soon: it was given created work (or,
 * rank 0, created some) and has not synchronised since, or its work is
 * kept for it and it has asked for nothing yet (a worker between JOIN
 * and WAIT_WORK; an SPMD rank that was sent work by mistake is active
 * and does not hold the token up).  Recalled tokens wait for it
 * (locks.c). */
static inline bool client_fresh(const struct client *cl)
{
	return cl->fresh || (cl->has_work && !cl->active);
}

/* ---- release.c: a barrier RELEASE held for its updates ---- */

void lm_release_handle(lm_lemuriad *c, const struct lm_msg *m);
/* A reply to a fetch of ours came: once every fetch of the held RELEASE
 * is answered, its updates are prepared and it goes out, a client at a
 * time (lm_release_step). */
void lm_release_fetched(lm_lemuriad *c);
/* Releases the next client of a staged RELEASE; true while some are
 * left (lm_lemuriad_background). */
bool lm_release_step(lm_lemuriad *c);
void lm_release_clear(lm_lemuriad *c);
/* hooks.arrived and hooks.rebuild */
void lm_release_arrived(lm_lemuriad *c, struct upreq *up,
			const uint8_t *data, uint32_t version);
const uint8_t *lm_release_rebuild(lm_lemuriad *c, const struct upreq *up,
				  const struct lm_notice *n,
				  const uint8_t *data, size_t len);
/* True when a RELEASE is staged and m must wait for it: m is then kept,
 * copied, for after it, or dropped and counted as bad when out of memory
 * or over the bound (LM_RELEASE_DEFER_*).  False: handle m now. */
bool lm_release_puts_off(lm_lemuriad *c, uint16_t from,
			 enum lm_rel_msg_kind kind, uint32_t req_id,
			 const struct lm_msg *m);
/* Takes the oldest message put off, once no RELEASE is staged; the
 * caller handles d->m and then frees d->mem.  False when none. */
bool lm_release_take_deferred(lm_lemuriad *c, struct deferred_msg *d);
/* Drops the messages put off by a staged RELEASE (a run ends). */
void lm_release_free_deferred(lm_lemuriad *c);

/* ---- locks.c: lock tokens ---- */

void lm_locks_lock(lm_lemuriad *c, int slot, uint16_t from, uint32_t req_id,
		   const struct lm_msg *m);
/* req_id NULL: a one-way UNLOCK (copy = cluster), not answered. */
void lm_locks_unlock(lm_lemuriad *c, int slot, uint16_t from,
		     const uint32_t *req_id, const struct lm_msg *m);
void lm_locks_recall(lm_lemuriad *c, const struct lm_msg *m);
/* The manager's PROBE m: whether the chain of lock waits it follows
 * comes back to the rank that started it (then the run ends). */
void lm_locks_probe(lm_lemuriad *c, const struct lm_msg *m);
/* The manager's GRANT m answering our LOCK `up` (freed). */
void lm_locks_granted(lm_lemuriad *c, struct upreq *up,
		      const struct lm_msg *m);
/* hooks.grant: answers a local LOCK (see locks.c). */
void lm_locks_grant_local(lm_lemuriad *c, uint32_t id, uint16_t node,
			  uint32_t req_id);
/* Client `rank` left: its waits go, a lock it held is free. */
void lm_locks_forget(lm_lemuriad *c, uint32_t rank);
/* Answers every local LOCK waiting for a token with m (an ABORT),
 * but those of node `skip`. */
void lm_locks_answer_waiting(lm_lemuriad *c, const struct lm_msg *m,
			     uint16_t skip);
/* A client stopped being fresh (client_fresh). */
void lm_locks_recheck(lm_lemuriad *c);
void lm_locks_tick(lm_lemuriad *c);
void lm_locks_clear(lm_lemuriad *c);

/* ---- fetches.c: FETCH, FETCHV and their replies ---- */

/* A client's FETCH and FETCHV. */
void lm_fetch_handle(lm_lemuriad *c, uint16_t from, uint32_t req_id,
		     const struct lm_msg *m);
void lm_fetch_handle_v(lm_lemuriad *c, uint16_t from, uint32_t req_id,
		       const struct lm_msg *m);
/* R's answer m to our FETCH `up`: cached, passed to its waiters and to a
 * held RELEASE (hooks.arrived), or asked again when too old; a client's
 * FETCHV miss then fetches the pages after it. */
void lm_fetch_answer(lm_lemuriad *c, struct upreq *up, const struct lm_msg *m);
/* The PAGES answering our FETCHV `batch` (freed). */
void lm_fetch_pages(lm_lemuriad *c, struct upreq *batch,
		    const struct lm_msg *m);
/* One FETCHV to R for the n pages of `pages` (`want` their notices),
 * each with its UP_FETCH in the table; `ahead`: fetched ahead of faults,
 * so a page nobody waits for is not asked again alone. */
void lm_fetch_batch(lm_lemuriad *c, const struct lm_notice *want,
		    const uint32_t *pages, uint32_t n, bool ahead);
/* Sends FETCH `up` (again) under a new req_id, asking for a version no
 * older than the newest notice of its page. */
void lm_fetch_again(lm_lemuriad *c, struct upreq *up);
/* Another cluster's CHANGED (docs/dsm.md "Eventual visibility"): the pages it
 * names wait, and lm_fetch_changed_due fetches into the copy each that
 * the copy still holds older (called once the cluster is quiet). */
void lm_fetch_changed(lm_lemuriad *c, const struct lm_msg *m);
void lm_fetch_changed_due(lm_lemuriad *c);
/* Installs the fetched set when none of its pages is still on its way
 * (called after each of their replies, and at every pulse). */
void lm_fetch_group_check(lm_lemuriad *c);
void lm_fetch_group_clear(lm_lemuriad *c);

/* Another cluster's CHANGED, or the notices of a GRANT, CREATE or END:
 * heard (order.c), and the pages named wait like a CHANGED's. */
void lm_fetch_heard(lm_lemuriad *c, const struct lm_notice *n,
		    uint32_t count);

/* ---- changes.c: what our registrations changed, told to the others ---- */

/* A REGISTER_OK's pages and versions, queued for the CHANGED to the
 * other clusters (nothing in a layout of one cluster). */
void lm_changes_note(lm_lemuriad *c, const struct lm_notice *n,
		     uint32_t count);
/* Sends what waited LM_LEMURIAD_CHANGED_DELAY_US; returns when it must
 * look again (0: nothing waits). */
uint64_t lm_changes_send(lm_lemuriad *c, uint64_t now_us);
void lm_changes_clear(lm_lemuriad *c);
void lm_changes_free(lm_lemuriad *c);

/* ---- order.c: other clusters' changes put into the copy in order ---- */

/* The versions a list we were told of names. */
void lm_order_heard(lm_lemuriad *c, const struct lm_notice *n,
		    uint32_t count);
/* The oldest version of `page` that may go into the copy: the newest a
 * list we were told of names (0: any). */
uint32_t lm_order_least(const lm_lemuriad *c, uint32_t page);
/* Whether `page` at `version` may go into the copy on its own: the copy
 * holds it, or a barrier told every client of it and either the copy
 * holds the page (older) or the registrations its home tagged it with
 * were told us (`told`) and no set waits to go in, or the copy lacks it,
 * `told`, and every list heard went in (always, but under copy =
 * cluster). */
bool lm_order_free(const lm_lemuriad *c, uint32_t page, uint32_t version,
		   bool told);
/* Another cluster's CHANGED: what it says its writer registered and
 * was told. */
void lm_order_told(lm_lemuriad *c, const struct lm_msg *m);
/* Whether every registration the tags of reply m name was told us. */
bool lm_order_tags_told(const lm_lemuriad *c, const struct lm_msg *m);
/* ... they must be, before what waits goes in. */
void lm_order_need(lm_lemuriad *c, const struct lm_msg *m);
/* Whether cached copy cp is ordered: its reply's registrations were
 * told when it came, or were since (its tags kept: then it becomes so). */
bool lm_order_cached(lm_lemuriad *c, struct cpage *cp);
/* cp waits for the registrations its kept tags name (lm_order_need). */
void lm_order_need_cached(lm_lemuriad *c, const struct cpage *cp);
/* Whether a registration that must be told before what waits goes in
 * was not yet. */
bool lm_order_untold(const lm_lemuriad *c);
/* Our CHANGED's writer fields: rank, version and tags. */
void lm_order_sign(lm_lemuriad *c, struct lm_msg *m, uint32_t through);
/* A page waits for a list not heard yet: the clock starts, and every
 * other cluster is asked to tell what it changed now (at most once per
 * LM_LEMURIAD_HURRY_GAP_US). */
void lm_order_wait(lm_lemuriad *c);
/* The wait has lasted LM_LEMURIAD_ORDER_WAIT_MAX_US: go in anyway. */
bool lm_order_late(const lm_lemuriad *c);
/* What waited went in. */
void lm_order_done(lm_lemuriad *c);
/* When the pulse must look again for a wait (0: none). */
uint64_t lm_order_next(const lm_lemuriad *c);
/* A reader asked us to hurry: what we register is told at once for
 * LM_LEMURIAD_HURRY_US. */
void lm_order_hurried(lm_lemuriad *c);
void lm_order_clear(lm_lemuriad *c);

/* ---- parking.c: our deltas' registrations, and what waits for them ---- */

/* Parks a message behind the registration of every delta our clients
 * flushed so far (I2); the run is lost (hooks.lose) when out of memory. */
void lm_park_barrier(lm_lemuriad *c, uint32_t id);
void lm_park_unlock(lm_lemuriad *c, uint32_t id, uint32_t rank);
void lm_park_end(lm_lemuriad *c, uint32_t rank, int32_t status);
void lm_park_create(lm_lemuriad *c, uint32_t rank, int32_t status,
		    uint64_t offset, const uint8_t *data, size_t data_len);
/* A local hand-off of lock `id`, behind the registration of what the
 * previous holder wrote, so that its GRANT names exact versions; it goes
 * through hooks.grant. */
void lm_park_grant(lm_lemuriad *c, uint32_t id, uint16_t node,
		   uint32_t req_id);
/* The answer m to our REGISTER or PUSH `up` (freed): 0, or the status
 * with which the homes refused our deltas (the run is then lost). */
int lm_park_answer(lm_lemuriad *c, struct upreq *up, const struct lm_msg *m);
/* A home's PULL of a delta of ours. */
void lm_park_pull(lm_lemuriad *c, uint32_t req_id, const struct lm_msg *m);
/* Keeps copies and deltas within the cache size (after a FLUSH). */
void lm_park_keep_budget(lm_lemuriad *c);
/* Seals and registers the cluster's copy when nothing did for
 * LM_LEMURIAD_PUBLISH_US (c->now_us). */
void lm_park_publish(lm_lemuriad *c);
/* lm_deltas' way out: every REGISTER goes up as a request. */
void lm_park_emit(void *ctx, const struct lm_msg *reg);
/* Answers every parked local GRANT with m (an ABORT), but node skip's. */
void lm_park_answer_waiting(lm_lemuriad *c, const struct lm_msg *m,
			    uint16_t skip);
void lm_park_clear(lm_lemuriad *c);
/* Answers the PULLs of owned pages kept since the last call, after one
 * seal of the copy (docs/dsm.md "Order"). */
void lm_park_send_recalls(lm_lemuriad *c);

/* ---- notices.c: what we know of the pages' versions ---- */

/* Applies write notices to the cache and our FETCHes (I3), and keeps
 * them for local GRANTs. */
void lm_notices_apply(lm_lemuriad *c, const struct lm_notice *n,
		      uint32_t count);
/* Keeps notices of the epoch (the latest version of each page) for local
 * GRANTs. */
void lm_notices_note(lm_lemuriad *c, const struct lm_notice *n,
		     uint32_t count);
/* Every process passed a barrier (or the run ends): the epoch's notices
 * are known to all and need not ride on local GRANTs any more. */
void lm_notices_epoch_end(lm_lemuriad *c);

/* ---- copy.c: the cluster's one copy (copy = cluster) ---- */

/* A new run: the object of the last one goes, a new one is made (when
 * the cluster shares one).  0, or LM_E* after logging why. */
int lm_copy_start(lm_lemuriad *c);
/* The object goes; what the run's CREATEs said (lm_copy_note_aliases)
 * stays for the run's next object. */
void lm_copy_stop(lm_lemuriad *c);
/* The run ends: the object and the notes of its CREATEs go. */
void lm_copy_end_run(lm_lemuriad *c);
/* Wakes the clients' faults pending on their userfaultfds (the
 * lemuriad's wait descriptor was readable; common/copy_set.h). */
void lm_copy_wake_waiting(lm_lemuriad *c);
/* Hands the object to client `pid`, which listens on the abstract socket
 * `name` (len bytes, the JOIN's data).  0, or LM_E* after logging why. */
int lm_copy_give(lm_lemuriad *c, int slot, uint32_t pid,
		 const uint8_t *name, size_t len);
/* A CREATE's data: when it describes rank 0's shared globals
 * (common/globals_desc.h), the region pages they are mapped at twice in
 * every client are noted: sets put them in place, not as one (a client
 * reading them at their second address could not be made to wait). */
void lm_copy_note_aliases(lm_lemuriad *c, const uint8_t *data, size_t len);
/* Pages that go into the copy together (common/copy_set.h): as one when
 * every client handed us its userfaultfd, then each that could not
 * (twinned: byte by byte) as lm_copy_install.  `items` is sorted. */
void lm_copy_install_set(lm_lemuriad *c, struct lm_copy_set_item *items,
			 uint32_t n);
/* A page fetched for the cluster goes into the copy (a newer one there
 * is kept); the run is lost (hooks.lose) when its lock stays taken. */
void lm_copy_install(lm_lemuriad *c, uint32_t page, uint32_t version,
		     const uint8_t *data);
/* Notices of pages only we wrote move the copy's versions along (the
 * sole-cluster rule of lm_notices_apply). */
void lm_copy_advance(lm_lemuriad *c, const struct lm_notice *n,
		     uint32_t count);
/* The notices of n[0..count) that a client of the copy must apply: those
 * the copy is too old for, the only ones that change a client's view
 * (lm_ccopy_covers, the rule the client applies too).  The copy's
 * versions only grow, so a notice it holds now it holds when the client
 * applies it.  n itself when the cluster has no copy (or no memory for
 * the list); else a list valid until the next call.  *kept: its length. */
const struct lm_notice *lm_copy_client_notices(lm_lemuriad *c,
					       const struct lm_notice *n,
					       uint32_t count, uint32_t *kept);
/* What the cluster wrote since the last seal goes into the open deltas,
 * as a client's FLUSH would: 0 or LM_E*.  `barrier`: every client waits
 * at a barrier, so twins of pages idle for a while may go
 * (LM_CCOPY_IDLE_SEALS). */
int lm_copy_seal(lm_lemuriad *c, bool barrier);
/* Pages the cluster owns (docs/dsm.md "Pages one cluster owns").
 * lm_copy_own: a REGISTER_OK's grants (its data), each taken when the
 * copy holds the version its notice names.  lm_copy_recall: a home's
 * PULL of a page we own: its whole page into out (a diff), and the page
 * is tracked again; *unwritten: nobody wrote it since it was owned
 * (lm_ccopy_recall), so no seal need follow.  1 when we do not own it,
 * else 0 or LM_E* (the run is lost when its lock stayed taken). */
void lm_copy_own(lm_lemuriad *c, const struct lm_msg *ok);
/* A home pulled a delta of `page`: a grant that comes with the answer to
 * the registration now out is refused (the entry it marked is gone). */
void lm_copy_pulled(lm_lemuriad *c, uint32_t page);
/* known[page] just went up: a copy older now is a candidate for
 * letting go at the next barrier (forget_stale). */
void lm_copy_note_known(lm_lemuriad *c, uint32_t page);
int lm_copy_recall(lm_lemuriad *c, uint32_t page, uint8_t *out, size_t cap,
		   size_t *len, bool *unwritten);

/* ---- cache.c: the page cache and the table of our requests to R ---- */

struct cpage *lm_cache_find(const lm_lemuriad *c, uint32_t page);
void lm_cache_touch(lm_lemuriad *c, struct cpage *cp);
void lm_cache_remove(lm_lemuriad *c, struct cpage *cp);
/* Frees the copies kept for reuse (lm_cache_remove keeps some). */
void lm_cache_free_spares(lm_lemuriad *c);
/* Takes a copy out of the cache without freeing it; the caller gives it
 * back with lm_cache_recycle. */
void lm_cache_detach(lm_lemuriad *c, struct cpage *cp);
void lm_cache_recycle(lm_lemuriad *c, struct cpage *cp);
void lm_cache_clear(lm_lemuriad *c);
/* A diff our cluster wrote to `page` (validated), by `rank`
 * (LM_WRITER_MANY: the cluster's processes together): into the page's
 * open delta, which goes up before anything published later (I2), our
 * cached copy (which keeps its version: it now holds more than that
 * version, I3) and, when not NULL, the writer's mask w, in one pass.
 * LM_ENOMEM when no delta could be opened; the copy and the mask take
 * the diff all the same. */
int lm_cache_take_diff(lm_lemuriad *c, uint32_t page, uint32_t rank,
		       struct lm_delta *w, const uint8_t *diff, size_t len);
void lm_cache_put(lm_lemuriad *c, uint32_t page, uint32_t version,
		  const uint8_t *data);
/* Keeps the tags of the reply that brought cp (not ordered when it came),
 * so that it may go in once they are told without being fetched again;
 * without memory it is fetched again, as before tags were kept. */
void lm_cache_keep_tags(struct cpage *cp, const uint8_t *tags,
			uint32_t ntags);
/* Evicts copies, least recently used first, until `room` more fit in
 * `cache` with the open deltas (I5).  The pages of the CHANGED set out,
 * and the faults' answers that wait for order, stay until they go into
 * the copy with their set, beyond `cache` if need be (by at most the
 * set, pages of the region): a set that lost one would go in without
 * it, and show a spinning reader a page of a list before the pages of
 * an earlier list (docs/dsm.md "Order"). */
void lm_cache_trim(lm_lemuriad *c, uint32_t room);
/* Evicts the least recently used copy that may go (as lm_cache_trim);
 * false when none may. */
bool lm_cache_evict_one(lm_lemuriad *c);
void lm_upreq_free_waiters(lm_lemuriad *c, struct waiter *w);
struct upreq *lm_upreq_new(lm_lemuriad *c, enum up_kind kind);
void lm_upreq_renumber(lm_lemuriad *c, struct upreq *up);
void lm_upreq_set_page(lm_lemuriad *c, struct upreq *up, uint32_t page);
struct upreq *lm_upreq_fetch_of(lm_lemuriad *c, uint32_t page);
struct upreq *lm_upreq_find(lm_lemuriad *c, uint32_t req_id);
void lm_upreq_free(lm_lemuriad *c, struct upreq *up);
int lm_upreq_wait(lm_lemuriad *c, struct upreq *up, uint16_t node,
		  uint32_t req_id, uint32_t need);
int lm_upreq_start(lm_lemuriad *c, enum up_kind kind, uint16_t node,
		   uint32_t req_id, struct upreq **out);

#endif
