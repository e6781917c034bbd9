/* The lemuriad's locks (DESIGN.md §2, Locks): a lock's token stays in
 * the cluster between local holders until its manager recalls it, so
 * that LOCKs among our own clients need no message to the reflector.
 * Every path of a lock is here: a client's LOCK and UNLOCK, the
 * manager's GRANT and RECALL, the local GRANT (parked behind the
 * registration of what the last holder wrote: parking.c calls back
 * lm_locks_grant_local), a token going back, a holder that left.
 *
 * Readings of docs/dsm.md where it leaves a choice:
 *  - An UNLOCK of a lock not granted to that rank through us is answered
 *    UNLOCK_OK{LM_EINVAL} and not forwarded.
 *  - A lock token whose clients all left stays here, free, until the
 *    manager recalls it, so the lock is not lost. */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"
#include "log.h"
#include "wire.h"

static struct token *token_find(lm_lemuriad *c, uint32_t id)
{
	for (size_t i = 0; i < c->ntokens; i++)
		if (c->tokens[i].id == id)
			return &c->tokens[i];
	return NULL;
}

static struct token *token_get(lm_lemuriad *c, uint32_t id)
{
	struct token *t = token_find(c, id);

	if (t)
		return t;
	if (c->ntokens == c->tokens_cap) {
		size_t cap = c->tokens_cap ? c->tokens_cap * 2 : 8;
		struct token *nt = realloc(c->tokens, cap * sizeof(*nt));

		if (!nt)
			return NULL;
		c->tokens = nt;
		c->tokens_cap = cap;
	}
	t = &c->tokens[c->ntokens++];
	memset(t, 0, sizeof(*t));
	t->id = id;
	return t;
}

static void token_free(struct token *t)
{
	free(t->q);
	t->q = NULL;
	t->nq = t->qcap = 0;
}

void lm_locks_clear(lm_lemuriad *c)
{
	for (size_t i = 0; i < c->ntokens; i++)
		token_free(&c->tokens[i]);
	c->ntokens = 0;
}

/* Drops the entry of a lock nobody here holds, wants or has the token of. */
static void token_tidy(lm_lemuriad *c, struct token *t)
{
	if (t->here || t->asked || t->nq)
		return;
	token_free(t);
	*t = c->tokens[--c->ntokens];
}

static int token_enqueue(struct token *t, uint16_t node, uint32_t req_id,
		     uint32_t rank)
{
	if (t->nq == t->qcap) {
		size_t cap = t->qcap ? t->qcap * 2 : 4;
		struct lwaiter *nq = realloc(t->q, cap * sizeof(*nq));

		if (!nq)
			return LM_ENOMEM;
		t->q = nq;
		t->qcap = cap;
	}
	t->q[t->nq].node = node;
	t->q[t->nq].req_id = req_id;
	t->q[t->nq].rank = rank;
	t->q[t->nq].ticks = 0;
	t->nq++;
	return 0;
}

static struct lwaiter token_pop(struct token *t)
{
	struct lwaiter w = t->q[0];

	memmove(t->q, t->q + 1, (t->nq - 1) * sizeof(*t->q));
	t->nq--;
	return w;
}

/* Asks the manager for the token, for the first local waiter. */
static void token_ask(lm_lemuriad *c, struct token *t)
{
	struct upreq *up;
	struct lm_msg r;

	if (t->here || t->asked || !t->nq)
		return;
	up = lm_upreq_new(c, UP_LOCK);
	if (!up) {
		lm_log_error("cluster %s: no memory to ask for lock %u",
			     c->cfg->name, t->id);
		return;
	}
	up->lock_id = t->id;
	up->rank = t->q[0].rank;
	t->asked = true;
	msg_init(c, &r, LM_MSG_LOCK);
	r.id = t->id;
	r.rank = up->rank;
	c->out.request(c->ctx, c->reflector, up->req_id, &r);
}

/* Gives the token back to its manager, behind the registration of what
 * its holders wrote (I2). */
static void token_return(lm_lemuriad *c, struct token *t)
{
	LM_PAGE_TRACE(c->trace, "return", t->id, 0, t->granted);
	lm_park_unlock(c, t->id, t->granted);
	t->here = false;
	t->busy = false;
	t->recalled = false;
	t->waited = false;
	t->wait_ticks = 0;
	c->stats.tokens_returned++;
}

static bool any_fresh(const lm_lemuriad *c)
{
	for (uint32_t i = 0; i < c->nclients; i++)
		if (client_fresh(&c->clients[i]))
			return true;
	return false;
}

/* The token is here and free: the next local waiter gets it (a recalled
 * token only LM_LEMURIAD_HANDOFFS_MAX more times), else it goes back if
 * recalled, else it stays.  A recalled token nobody here waits for also
 * stays while a client is fresh: SPLASH-2 programs number their
 * processes in the order they take a lock right after CREATE (rank 0
 * after its last CREATE), and a token that left between two of a
 * cluster's processes shifted every later cluster's numbers into the
 * next one's, and the program's data with them (docs/performance.md,
 * "Figures behind the lemuriad's choices").  The wait ends when no
 * client here is fresh (lm_locks_recheck). */
static void token_next(lm_lemuriad *c, struct token *t)
{
	if (!t->here || t->busy)
		return;
	if (t->recalled && !t->nq && t->wait_ticks < LM_LEMURIAD_FRESH_TICKS &&
	    any_fresh(c)) {
		if (!t->waited)
			c->stats.recalls_waited++;
		t->waited = true;
		return;
	}
	if (t->nq && (!t->recalled || t->handoffs < LM_LEMURIAD_HANDOFFS_MAX)) {
		struct lwaiter w = token_pop(t);

		if (t->recalled)
			t->handoffs++;
		t->busy = true;
		t->holder = w.rank;
		LM_PAGE_TRACE(c->trace, "grant", t->id, 0, w.rank);
		/* copy = cluster: the next holder reads the copy the last one
		 * wrote; the registration of our deltas is for other
		 * clusters, which a token leaving waits for (docs/dsm.md "One
		 * copy per cluster") */
		if (c->shared)
			lm_locks_grant_local(c, t->id, w.node, w.req_id);
		else
			lm_park_grant(c, t->id, w.node, w.req_id);
		return;
	}
	if (t->recalled || t->nq) {
		token_return(c, t);
		token_ask(c, t); /* local clients still wait: queue again */
	}
	token_tidy(c, t);
}

/* token_next for each token `due` picks.  A token tidied away moves
 * another into its entry, which is then looked at in turn. */
static void next_each(lm_lemuriad *c,
		      bool (*due)(lm_lemuriad *c, struct token *t))
{
	for (size_t i = 0; i < c->ntokens;) {
		struct token *t = &c->tokens[i];
		size_t n = c->ntokens;

		if (due(c, t))
			token_next(c, t);
		if (c->ntokens == n)
			i++; /* else entry i, tidied, holds another token */
	}
}

static bool is_recalled(lm_lemuriad *c, struct token *t)
{
	(void)c;
	return t->recalled;
}

/* A client stopped being fresh: once nobody here is, the recalled
 * tokens that waited go (or serve who waits). */
void lm_locks_recheck(lm_lemuriad *c)
{
	if (!any_fresh(c))
		next_each(c, is_recalled);
}

/* Counts a tick of a token kept, free and unasked, for a fresh client;
 * true when that ends its wait. */
static bool tick_ends_wait(lm_lemuriad *c, struct token *t)
{
	if (!t->waited || !t->here || t->busy || t->nq ||
	    ++t->wait_ticks < LM_LEMURIAD_FRESH_TICKS)
		return false;
	c->stats.recall_waits_ended++;
	return true;
}

/* ---- cycles ---------------------------------------------------------
 * Ranks that each hold a lock the next one waits for, the last waiting
 * for the first's, wait for ever (issue 42: until --timeout).  A rank
 * that has waited LM_LEMURIAD_PROBE_TICKS starts a PROBE that follows
 * the chain (Chandy, Misra and Haas's edge chasing): from a lock to the
 * rank that holds it (the token is here and busy; else the lock's
 * manager passes the PROBE to the cluster it granted the token to), and
 * from that rank to the lock it waits for.  A rank that holds a lock and
 * waits cannot release it, so a chain whose every rank was waiting when
 * the PROBE passed, and that comes back to a first rank still in the
 * same wait, will never move: the run ends, naming each wait.  A chain
 * that meets a free lock, a lock on its way, or a holder that does not
 * wait is dropped; the next tick tries again. */

/* The lock local rank `rank` waits for, and the entry of its wait. */
static const struct lwaiter *waiting_for(const lm_lemuriad *c, uint32_t rank,
					 uint32_t *lock)
{
	for (size_t i = 0; i < c->ntokens; i++)
		for (size_t k = 0; k < c->tokens[i].nq; k++)
			if (c->tokens[i].q[k].rank == rank) {
				*lock = c->tokens[i].id;
				return &c->tokens[i].q[k];
			}
	return NULL;
}

/* The chain (rank, lock it waits for), n links, comes back to its first
 * rank, which holds the last link's lock: the run ends naming each. */
static void cycle_found(lm_lemuriad *c, const uint8_t *chain, uint32_t n)
{
	char why[512];
	size_t len = 0;

	len += (size_t)snprintf(why, sizeof(why), "locks taken in a cycle: ");
	for (uint32_t i = 0; i < n && len < sizeof(why); i++)
		len += (size_t)snprintf(why + len, sizeof(why) - len,
					"%srank %u waits for lock %u, held by "
					"rank %u", i ? "; " : "",
					lm_get32(chain + 8 * i),
					lm_get32(chain + 8 * i + 4),
					lm_get32(chain + 8 * ((i + 1) % n)));
	if (len < sizeof(why))
		snprintf(why + len, sizeof(why) - len,
			 ": none of them can go on");
	c->hooks.lose(c, why);
}

/* Follows the chain (n links in `chain`, room for
 * LM_LEMURIAD_PROBE_HOPS) from lock `lock`: through the tokens here, up
 * to the lock's manager when its token is elsewhere (unless `from_mgr`:
 * the manager sent it here and the token has moved on).  `req`: the
 * first wait's request id. */
static void chase(lm_lemuriad *c, uint32_t lock, uint32_t req,
		  uint8_t *chain, uint32_t n, bool from_mgr)
{
	for (;;) {
		const struct token *t = token_find(c, lock);
		const struct lwaiter *w;
		uint32_t holder, next, first = lm_get32(chain);
		struct lm_msg m;

		if (!t || !t->here) {
			if (from_mgr)
				return; /* on its way: no lasting wait */
			msg_init(c, &m, LM_MSG_PROBE);
			m.id = lock;
			m.version = req;
			m.data = chain;
			m.data_len = 8 * (size_t)n;
			c->out.send(c->ctx, c->reflector, &m);
			c->stats.lock_probes++;
			return;
		}
		from_mgr = false;
		if (!t->busy)
			return; /* free: it goes to a waiter */
		holder = t->holder;
		if (holder == first) {
			w = waiting_for(c, first, &next);
			if (w && w->req_id == req &&
			    next == lm_get32(chain + 4))
				cycle_found(c, chain, n);
			return;
		}
		for (uint32_t i = 1; i < n; i++)
			if (lm_get32(chain + 8 * i) == holder)
				return; /* a cycle without the first rank:
					   its own ranks find it */
		if (!waiting_for(c, holder, &next) ||
		    n == LM_LEMURIAD_PROBE_HOPS)
			return;
		lm_put32(chain + 8 * n, holder);
		lm_put32(chain + 8 * n + 4, next);
		n++;
		lock = next;
	}
}

void lm_locks_probe(lm_lemuriad *c, const struct lm_msg *m)
{
	uint8_t chain[8 * LM_LEMURIAD_PROBE_HOPS];
	uint32_t n = (uint32_t)(m->data_len / 8);

	if (!m->data || m->data_len % 8 || !n ||
	    n > LM_LEMURIAD_PROBE_HOPS) {
		count_bad(c, c->reflector, m, "PROBE without a chain");
		return;
	}
	memcpy(chain, m->data, m->data_len);
	chase(c, m->id, m->version, chain, n, true);
}

/* Each wait of LM_LEMURIAD_PROBE_TICKS ticks or more starts a chase. */
static void probe_waits(lm_lemuriad *c)
{
	uint8_t chain[8 * LM_LEMURIAD_PROBE_HOPS];

	for (size_t i = 0; i < c->ntokens && !c->aborted; i++) {
		for (size_t k = 0; k < c->tokens[i].nq && !c->aborted; k++) {
			struct lwaiter *w = &c->tokens[i].q[k];
			uint32_t lock = c->tokens[i].id;

			if (++w->ticks < LM_LEMURIAD_PROBE_TICKS)
				continue;
			lm_put32(chain, w->rank);
			lm_put32(chain + 4, lock);
			/* the chase may end the run, whose state goes */
			chase(c, lock, w->req_id, chain, 1, false);
		}
	}
}

/* A recalled token kept for a fresh client stays LM_LEMURIAD_FRESH_TICKS
 * ticks at most, then goes as if nobody here were fresh. */
void lm_locks_tick(lm_lemuriad *c)
{
	next_each(c, tick_ends_wait);
	probe_waits(c);
}

/* Answers a local LOCK with every notice of the epoch we know of: our
 * registrations (what earlier holders here wrote) and every notice we
 * applied (the GRANTs that brought tokens here, the ENDs and CREATEs).
 * The token's own notices are not enough: a holder here may have taken
 * another lock first, whose GRANT named a change that its release of
 * this one now passes on (release consistency is transitive), and the
 * next holder's copy of that page may be older. */
void lm_locks_grant_local(lm_lemuriad *c, uint32_t id, uint16_t node,
			  uint32_t req_id)
{
	struct lm_msg r;

	msg_init(c, &r, LM_MSG_GRANT);
	r.id = id;
	r.notices = lm_copy_client_notices(c, c->epoch_notes.v,
					   c->epoch_notes.n, &r.nnotices);
	c->stats.locks++;
	c->out.reply(c->ctx, node, req_id, &r);
}

/* ---- messages ------------------------------------------------------ */

void lm_locks_lock(lm_lemuriad *c, int slot, uint16_t from, uint32_t req_id,
		   const struct lm_msg *m)
{
	uint32_t rank = slot_rank(c, slot);
	struct token *t = token_get(c, m->id);

	if (!t) {
		count_bad(c, from, m, "no memory for the lock");
		return;
	}
	if (t->busy && t->holder == rank) {
		count_bad(c, from, m, "LOCK of a lock it holds");
		return;
	}
	for (size_t i = 0; i < t->nq; i++) {
		if (t->q[i].rank == rank) {
			count_bad(c, from, m, "second LOCK while waiting");
			return;
		}
	}
	if (token_enqueue(t, from, req_id, rank) < 0) {
		count_bad(c, from, m, "no memory for the lock");
		return;
	}
	LM_PAGE_TRACE(c->trace, "lock", m->id, 0, rank);
	if (t->here) {
		token_next(c, t); /* cached here: no message leaves */
		return;
	}
	token_ask(c, t);
}

void lm_locks_unlock(lm_lemuriad *c, int slot, uint16_t from,
		     const uint32_t *req_id, const struct lm_msg *m)
{
	uint32_t rank = slot_rank(c, slot);
	struct token *t = token_find(c, m->id);

	if (!t || !t->here || !t->busy || t->holder != rank) {
		if (req_id)
			reply_status(c, from, *req_id, LM_MSG_UNLOCK_OK,
				     LM_EINVAL);
		else
			count_bad(c, from, m, "UNLOCK of a lock it does not "
				  "hold");
		return;
	}
	t->busy = false;
	LM_PAGE_TRACE(c->trace, "unlock", m->id, 0, rank);
	if (req_id)
		reply_status(c, from, *req_id, LM_MSG_UNLOCK_OK, 0);
	token_next(c, t);
}

/* The manager wants the token back: at once when nobody here holds it,
 * else after at most LM_LEMURIAD_HANDOFFS_MAX more local hand-offs. */
void lm_locks_recall(lm_lemuriad *c, const struct lm_msg *m)
{
	struct token *t = token_find(c, m->id);

	if (!t || !t->here) {
		/* on its way back already */
		count_bad(c, c->reflector, m, "RECALL of a token not here");
		return;
	}
	c->stats.recalls++;
	LM_PAGE_TRACE(c->trace, "recall", t->id, 0, 0);
	t->recalled = true;
	t->recall_round = m->epoch;
	t->handoffs = 0;
	token_next(c, t);
}

void lm_locks_granted(lm_lemuriad *c, struct upreq *up,
		      const struct lm_msg *m)
{
	struct token *t = token_find(c, up->lock_id);
	struct lm_msg r;

	/* older copies go before the holder can read them (I3) */
	lm_notices_apply(c, m->notices, m->nnotices);
	lm_fetch_heard(c, m->notices, m->nnotices);
	if (!t || t->here) {
		/* nobody asked (a reset run?): hand it straight back
		 * so that the others do not wait for it forever */
		msg_init(c, &r, LM_MSG_UNLOCK);
		r.id = up->lock_id;
		r.rank = up->rank;
		c->out.send(c->ctx, c->reflector, &r);
		lm_upreq_free(c, up);
		return;
	}
	LM_PAGE_TRACE(c->trace, "token", t->id, m->nnotices, up->rank);
	t->asked = false;
	t->here = true;
	t->busy = false;
	t->recalled = false;
	t->handoffs = 0;
	t->granted = up->rank;
	lm_upreq_free(c, up);
	token_next(c, t);
}

void lm_locks_forget(lm_lemuriad *c, uint32_t rank)
{
	for (size_t i = c->ntokens; i-- > 0;) {
		struct token *t = &c->tokens[i];

		for (size_t k = t->nq; k-- > 0;)
			if (t->q[k].rank == rank) {
				memmove(&t->q[k], &t->q[k + 1],
					(t->nq - k - 1) * sizeof(*t->q));
				t->nq--;
			}
		if (t->busy && t->holder == rank) {
			t->busy = false;
			token_next(c, t);
		} else {
			token_tidy(c, t);
		}
	}
}

void lm_locks_answer_waiting(lm_lemuriad *c, const struct lm_msg *m,
			     uint16_t skip)
{
	for (size_t i = 0; i < c->ntokens; i++)
		for (size_t k = 0; k < c->tokens[i].nq; k++)
			if (c->tokens[i].q[k].node != skip)
				c->out.reply(c->ctx, c->tokens[i].q[k].node,
					     c->tokens[i].q[k].req_id, m);
}
