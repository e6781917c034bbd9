/* Barriers (docs/dsm.md, "Barriers"; DESIGN.md §2): the arrivals of our
 * clusters, gathered into one that goes to the barrier's manager; for the
 * barriers whose id maps to us, the arrivals of the reflectors, merged
 * into the RELEASE that goes back down; and the waits that can never
 * end (a cluster gone, clusters apart in two barriers, here or across
 * reflectors: docs/operations.md "Liveness").  A role: calls route.c
 * only. */
#include "reflector_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"

int lm_barriers_init(lm_home *h)
{
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		/* +1: calloc(0) may be NULL */
		h->barriers[i].seen = calloc(h->layout->nclusters + 1, 1);
		h->mbarriers[i].seen = calloc(h->nrefl + 1, 1);
		if (!h->barriers[i].seen || !h->mbarriers[i].seen)
			return LM_ENOMEM;
	}
	h->gone = calloc(h->layout->nclusters + 1, sizeof(*h->gone));
	h->gone_rank = calloc(h->layout->nclusters + 1,
			      sizeof(*h->gone_rank));
	h->waits = calloc(h->nrefl + 1, sizeof(*h->waits));
	return h->gone && h->gone_rank && h->waits ? 0 : LM_ENOMEM;
}

void lm_barriers_clear(lm_home *h)
{
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		h->barriers[i].pending = false;
		h->barriers[i].arrived = 0;
		memset(h->barriers[i].seen, 0, h->layout->nclusters);
		h->mbarriers[i].pending = false;
		h->mbarriers[i].arrived = 0;
		h->mbarriers[i].nnotices = 0;
		memset(h->mbarriers[i].seen, 0, h->nrefl);
	}
	memset(h->gone, 0, h->layout->nclusters * sizeof(*h->gone));
	h->gone_told = false;
	h->waiting = false;
	memset(h->waits, 0, h->nrefl * sizeof(*h->waits));
}

void lm_barriers_destroy(lm_home *h)
{
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		free(h->barriers[i].seen);
		free(h->mbarriers[i].seen);
		free(h->mbarriers[i].notices);
	}
	free(h->gone);
	free(h->gone_rank);
	free(h->waits);
}

/* Barrier `id` waits for cluster ci, whose ranks all left: the run ends,
 * once, naming both. */
static void never_completes(lm_home *h, uint32_t id, uint32_t ci)
{
	char why[LM_NAME_MAX + 160];

	if (h->gone_told)
		return;
	h->gone_told = true;
	snprintf(why, sizeof(why), "barrier %u can never complete: every "
		 "rank of cluster %s left the run (the last, rank %u) before "
		 "reaching it, and others wait in it", id,
		 h->layout->clusters[ci].name, h->gone_rank[ci]);
	lose_run(h, why);
}

/* A cluster gone that pending barrier b of table `mine` (our clusters'
 * gathering) or of the managers' table still waits for; -1 if none. */
static long waits_for_gone(const lm_home *h, const struct barrier_entry *b,
			   bool mine)
{
	const struct lm_layout *l = h->layout;

	for (size_t ci = 0; ci < l->nclusters; ci++) {
		uint32_t ri = (uint32_t)l->clusters[ci].reflector_index;

		if (!h->gone[ci])
			continue;
		if (mine ? ri == h->self_index && !b->seen[ci] : !b->seen[ri])
			return (long)ci;
	}
	return -1;
}

void lm_barriers_gone(lm_home *h, uint32_t ci, uint32_t rank)
{
	long g;

	if (ci >= h->layout->nclusters)
		return;
	h->gone[ci] = true;
	h->gone_rank[ci] = rank;
	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		if (h->barriers[i].pending &&
		    (g = waits_for_gone(h, &h->barriers[i], true)) >= 0)
			never_completes(h, h->barriers[i].id, (uint32_t)g);
		if (h->mbarriers[i].pending &&
		    (g = waits_for_gone(h, &h->mbarriers[i], false)) >= 0)
			never_completes(h, h->mbarriers[i].id, (uint32_t)g);
	}
}

/* The entry of table t pending for barrier m->id, or a free one taken
 * for it; NULL (dropped and counted) when all are pending. */
static struct barrier_entry *entry(lm_home *h, struct barrier_entry *t,
				   uint16_t from, const struct lm_msg *m)
{
	struct barrier_entry *spare = NULL;

	for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
		if (t[i].pending && t[i].id == m->id)
			return &t[i];
		if (!t[i].pending && !spare)
			spare = &t[i];
	}
	if (!spare) {
		drop_bad(h, from, m, "too many barriers pending");
		return NULL;
	}
	spare->pending = true;
	spare->id = m->id;
	return spare;
}

/* Every cluster of ours waits in a barrier, and not all in b: the
 * barriers can never complete (every rank takes part in every barrier),
 * so the run ends naming two of them (issue 42). */
static void check_apart(lm_home *h, const struct barrier_entry *b)
{
	const struct lm_layout *l = h->layout;
	const struct barrier_entry *other = NULL;
	long in_b = -1, in_other = -1;
	char why[2 * LM_NAME_MAX + 160];

	for (size_t ci = 0; ci < l->nclusters; ci++) {
		bool waits = false;

		if ((uint32_t)l->clusters[ci].reflector_index != h->self_index)
			continue;
		for (size_t i = 0; i < LM_HOME_BARRIERS_MAX; i++) {
			const struct barrier_entry *e = &h->barriers[i];

			if (!e->pending || !e->seen[ci])
				continue;
			waits = true;
			if (e == b)
				in_b = (long)ci;
			else if (!other)
				other = e, in_other = (long)ci;
		}
		if (!waits)
			return;
	}
	if (!other || in_b < 0 || h->gone_told)
		return;
	h->gone_told = true;
	snprintf(why, sizeof(why), "barriers %u and %u are waited in at once "
		 "(cluster %s in %u, cluster %s in %u): every rank takes part "
		 "in every barrier, so neither can complete", b->id, other->id,
		 l->clusters[in_b].name, b->id, l->clusters[in_other].name,
		 other->id);
	lose_run(h, why);
}

/* Every cluster of ours waits in barrier waiting_in, and reflector ri's
 * in another, both since the same number of releases: neither barrier
 * can complete (each needs the other's clusters), so the run ends naming
 * both (issue 42).  Sound without a timeout: a reflector whose clusters
 * all wait in a barrier leaves it only by its RELEASE, and no other
 * barrier can be released meanwhile (all clusters take part in each),
 * so two such reports of the same round are true at once.  One of an
 * earlier round (overtaken by the RELEASE that ended it) counts
 * differently and is passed over. */
static void check_split(lm_home *h)
{
	const struct lm_layout *l = h->layout;
	char why[2 * LM_NAME_MAX + 200];

	for (uint32_t ri = 0; ri < h->nrefl && h->waiting; ri++) {
		const struct refl_waiting *w = &h->waits[ri];

		if (ri == h->self_index || !w->valid ||
		    w->epoch != h->epoch || w->id == h->waiting_in ||
		    h->gone_told)
			continue;
		h->gone_told = true;
		snprintf(why, sizeof(why), "barriers %u and %u are waited in "
			 "at once (the clusters of reflector %s in %u, those "
			 "of reflector %s in %u): every rank takes part in "
			 "every barrier, so neither can complete",
			 h->waiting_in, w->id,
			 l->reflectors[h->self_index].name, h->waiting_in,
			 l->reflectors[ri].name, w->id);
		lose_run(h, why);
	}
}

/* Every cluster of ours arrived at barrier id: the other reflectors that
 * serve clusters are told (WAITING), and what they told us is checked. */
static void all_waiting(lm_home *h, uint32_t id)
{
	struct lm_msg r = msg_new(h, LM_MSG_WAITING);

	h->waiting = true;
	h->waiting_in = id;
	r.id = id;
	r.epoch = h->epoch;
	for (uint32_t k = 0; k < h->nrefl; k++)
		if (k != h->self_index && serves_clusters(h, k))
			(void)lm_route(h, k, &r, 0, 0, NULL, NULL);
	check_split(h);
}

void lm_barriers_waiting(lm_home *h, uint32_t ri, const struct lm_msg *m)
{
	if (ri >= h->nrefl)
		return;
	h->waits[ri] = (struct refl_waiting){ .valid = true, .id = m->id,
					      .epoch = m->epoch };
	check_split(h);
}

bool lm_barriers_gather(lm_home *h, uint16_t from, long ci,
			const struct lm_msg *m)
{
	struct barrier_entry *b = entry(h, h->barriers, from, m);

	if (!b)
		return false;
	if (b->seen[ci]) {
		drop_bad(h, from, m, "cluster arrived twice");
		return false;
	}
	b->seen[ci] = 1;
	if (++b->arrived < h->nserved) {
		long g = waits_for_gone(h, b, true);

		if (g >= 0)
			never_completes(h, b->id, (uint32_t)g);
		else
			check_apart(h, b);
		return false;
	}
	b->pending = false;
	b->arrived = 0;
	memset(b->seen, 0, h->layout->nclusters);
	all_waiting(h, m->id);
	return true;
}

/* Reflector `ri` (maybe us) arrived at barrier `id` with the notices of
 * its clusters' changes in the epoch.  With every reflector that serves
 * clusters in, the merged notices go back down (DESIGN.md §2, step 4). */
void lm_barriers_arrive(lm_home *h, uint16_t from, uint32_t ri,
			const struct lm_msg *m)
{
	struct barrier_entry *b = entry(h, h->mbarriers, from, m);
	struct lm_msg r;

	if (!b)
		return;
	if (b->seen[ri]) {
		drop_bad(h, from, m, "reflector arrived twice");
		return;
	}
	if (b->nnotices + m->nnotices > b->cap) {
		size_t cap = b->nnotices + m->nnotices;
		struct lm_notice *nv = realloc(b->notices,
					       cap * sizeof(*nv));

		if (!nv) {
			drop_bad(h, from, m, "out of memory");
			return;
		}
		b->notices = nv;
		b->cap = cap;
	}
	if (m->nnotices)
		memcpy(b->notices + b->nnotices, m->notices,
		       m->nnotices * sizeof(*m->notices));
	b->nnotices += m->nnotices;
	b->seen[ri] = 1;
	if (++b->arrived < h->nactive) {
		long g = waits_for_gone(h, b, false);

		if (g >= 0)
			never_completes(h, b->id, (uint32_t)g);
		return;
	}

	b->nnotices = lm_notices_merge(b->notices, b->nnotices);
	r = msg_new(h, LM_MSG_RELEASE);
	r.id = b->id;
	r.notices = b->notices;
	r.nnotices = (uint32_t)b->nnotices;
	h->stats.barriers++;
	for (uint32_t k = 0; k < h->nrefl; k++)
		if (serves_clusters(h, k))
			(void)lm_route(h, k, &r, 0, 0, NULL, NULL);
	b->pending = false;
	b->arrived = 0;
	b->nnotices = 0;
	memset(b->seen, 0, h->nrefl);
}

/* The barrier's RELEASE m (from its manager, maybe us) passes down to
 * our clusters; their next epoch begins. */
void lm_barriers_release(lm_home *h, const struct lm_msg *m)
{
	const struct lm_layout *l = h->layout;
	struct lm_msg r = msg_new(h, LM_MSG_RELEASE);

	r.id = m->id;
	r.notices = m->notices;
	r.nnotices = m->nnotices;
	for (size_t i = 0; i < l->nclusters; i++)
		if ((uint32_t)l->clusters[i].reflector_index == h->self_index)
			h->out.send(h->ctx, l->clusters[i].id, &r);
	h->epoch++;
	h->waiting = false;
	lm_notice_set_clear(&h->epoch_set);
	h->stats.releases++;
}
