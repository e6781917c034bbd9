/* The lemuriad's lock tokens (DESIGN.md §2, Locks): a lock's token stays
 * in the cluster between local holders until its manager recalls it, so
 * that LOCKs among our own clients need no message to the reflector. */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"
#include "log.h"

/* ---- lock tokens ---------------------------------------------------- */

struct token *lm_token_find(lm_lemuriad *c, uint32_t id)
{
	for (size_t i = 0; i < c->ntokens; i++)
		if (c->tokens[i].id == id)
			return &c->tokens[i];
	return NULL;
}

struct token *lm_token_get(lm_lemuriad *c, uint32_t id)
{
	struct token *t = lm_token_find(c, id);

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

void lm_tokens_clear(lm_lemuriad *c)
{
	for (size_t i = 0; i < c->ntokens; i++)
		token_free(&c->tokens[i]);
	c->ntokens = 0;
	lm_notice_set_clear(&c->epoch_notes);
}

/* Drops the entry of a lock nobody here holds, wants or has the token of. */
void lm_token_tidy(lm_lemuriad *c, struct token *t)
{
	if (t->here || t->asked || t->nq)
		return;
	token_free(t);
	*t = c->tokens[--c->ntokens];
}

int lm_token_enqueue(struct token *t, uint16_t node, uint32_t req_id,
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
void lm_token_ask(lm_lemuriad *c, struct token *t)
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
	lm_cluster_park(c, LM_MSG_UNLOCK, t->id, t->granted, 0, 0, NULL, 0);
	t->here = false;
	t->busy = false;
	t->recalled = false;
	t->waited = false;
	t->wait_ticks = 0;
	c->stats.tokens_returned++;
}

/* Whether a client takes a number soon: it was given created work (or,
 * rank 0, created some) and has not synchronised since, or its work is
 * kept for it and it has asked for nothing yet (a worker between JOIN
 * and WAIT_WORK; an SPMD rank that was sent work by mistake is active
 * and does not hold the token up). */
bool lm_client_fresh(const struct client *cl)
{
	return cl->fresh || (cl->has_work && !cl->active);
}

static bool any_fresh(const lm_lemuriad *c)
{
	for (uint32_t i = 0; i < c->nclients; i++)
		if (lm_client_fresh(&c->clients[i]))
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
 * next one's, and the program's data with them (LU on 8+8+8+8: a run in
 * three took 4.3 s instead of 3.1 s).  The wait ends when no client
 * here is fresh (lm_tokens_recheck). */
void lm_token_next(lm_lemuriad *c, struct token *t)
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
		lm_cluster_park_grant(c, t->id, &w);
		return;
	}
	if (t->recalled || t->nq) {
		token_return(c, t);
		lm_token_ask(c, t); /* local clients still wait: queue again */
	}
	lm_token_tidy(c, t);
}

/* lm_token_next for each token `due` picks.  A token tidied away moves
 * another into its entry, which is then looked at in turn. */
static void next_each(lm_lemuriad *c,
		      bool (*due)(lm_lemuriad *c, struct token *t))
{
	for (size_t i = 0; i < c->ntokens;) {
		struct token *t = &c->tokens[i];
		size_t n = c->ntokens;

		if (due(c, t))
			lm_token_next(c, t);
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
void lm_tokens_recheck(lm_lemuriad *c)
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

/* A recalled token kept for a fresh client stays LM_LEMURIAD_FRESH_TICKS
 * ticks at most, then goes as if nobody here were fresh. */
void lm_tokens_tick(lm_lemuriad *c)
{
	next_each(c, tick_ends_wait);
}

/* Answers a local LOCK with every notice of the epoch we know of: our
 * registrations (what earlier holders here wrote) and every notice we
 * applied (the GRANTs that brought tokens here, the ENDs and CREATEs).
 * The token's own notices are not enough: a holder here may have taken
 * another lock first, whose GRANT named a change that its release of
 * this one now passes on (release consistency is transitive), and the
 * next holder's copy of that page may be older. */
void lm_token_grant_local(lm_lemuriad *c, uint32_t id, uint16_t node,
			  uint32_t req_id)
{
	struct lm_msg r;

	msg_init(c, &r, LM_MSG_GRANT);
	r.id = id;
	r.notices = c->epoch_notes.v;
	r.nnotices = c->epoch_notes.n;
	c->stats.locks++;
	c->out.reply(c->ctx, node, req_id, &r);
}

/* Keeps notices of the epoch (the latest version of each page) for
 * local GRANTs. */
void lm_token_note_epoch(lm_lemuriad *c, const struct lm_notice *n,
			 uint32_t count)
{
	lm_notice_set_add(&c->epoch_notes, n, count);
	/* a client that joins a FETCH of ours from now on may hold a GRANT
	 * naming these versions: an older reply is not for it (I3) */
	for (uint32_t i = 0; n && i < count; i++) {
		struct upreq *up = lm_upreq_fetch_of(c, n[i].page);

		if (up && up->min_version < n[i].version)
			up->min_version = n[i].version;
	}
}
