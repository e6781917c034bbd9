/* How far a read fault reaches (reach.h). */
#include "reach.h"

#include <string.h>

void lm_reach_init(struct lm_reach *r, uint32_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max > 255 ? 255 : max;
	for (int k = 0; k < LM_REACH_KINDS; k++)
		r->depth[k] = r->max;
	r->rng = 0x9e3779b97f4a7c15ull;
}

uint32_t lm_reach_depth(struct lm_reach *r, enum lm_reach_kind kind)
{
	r->faults[kind]++;
	if (r->depth[kind] || !r->max)
		return r->depth[kind];
	return r->faults[kind] % LM_REACH_PROBE == 0;
}

/* xorshift64: which page of a fault's is sampled, so that every depth is
 * seen alike whatever the program's pattern */
static uint64_t next_random(struct lm_reach *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return r->rng;
}

bool lm_reach_sample(struct lm_reach *r, enum lm_reach_kind kind,
		     uint32_t n, uint32_t *pick)
{
	/* a probe is always a sample: it is what a probe is for */
	bool probe = r->depth[kind] == 0;

	if (n == 0 || r->npending == LM_REACH_PENDING ||
	    (!probe && r->faults[kind] % LM_REACH_EVERY != 0))
		return false;
	*pick = (uint32_t)(next_random(r) % n);
	return true;
}

void lm_reach_add(struct lm_reach *r, uint32_t page, enum lm_reach_kind kind)
{
	if (r->npending < LM_REACH_PENDING)
		r->pending[r->npending++] =
			(struct lm_reach_sample){ page, kind };
}

/* A verdict once a kind has LM_REACH_WINDOW answers. */
static void judge(struct lm_reach *r, enum lm_reach_kind kind, bool read)
{
	uint32_t *depth = &r->depth[kind];

	r->stats.samples[kind]++;
	r->stats.read[kind] += read;
	r->seen[kind]++;
	r->read[kind] += read;
	if (r->seen[kind] < LM_REACH_WINDOW)
		return;
	if (2 * r->read[kind] >= r->seen[kind] && *depth < r->max) {
		*depth = *depth ? 2 * *depth + 1 : 1;
		if (*depth > r->max)
			*depth = r->max;
		r->stats.deeper[kind]++;
	} else if (3 * r->read[kind] < r->seen[kind] && *depth) {
		*depth /= 2;
		r->stats.shallower[kind]++;
	}
	r->seen[kind] = r->read[kind] = 0;
}

bool lm_reach_touched(struct lm_reach *r, uint32_t page)
{
	for (uint32_t i = 0; i < r->npending; i++)
		if (r->pending[i].page == page) {
			judge(r, r->pending[i].kind, true);
			r->pending[i] = r->pending[--r->npending];
			return true;
		}
	return false;
}

void lm_reach_settle(struct lm_reach *r)
{
	for (uint32_t i = 0; i < r->npending; i++)
		judge(r, r->pending[i].kind, false);
	r->npending = 0;
}
