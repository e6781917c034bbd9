/* Loss injector (transport layer, tests only): sits on the transmit path
 * and drops, duplicates, reorders or delays datagrams with seeded
 * probabilities, so that a failing run can be replayed from its seed.
 *
 * Datagrams that pass go to a FIFO of ready ones; held ones (reordered or
 * delayed) wait in a bounded array until their time comes.  A reordered
 * datagram is released after 1 to 3 later datagrams have passed it, or
 * after LM_LOSS_REORDER_US, whichever is first.  Buffers are recycled
 * through a short free list. */
#include "loss.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LM_LOSS_REORDER_US 2000
#define LM_LOSS_FREE_MAX   64

struct loss_dg {
	struct loss_dg *next; /* ready FIFO or free list */
	uint64_t due;	       /* held: released at this time */
	uint32_t peer;
	uint32_t after; /* reordered: later datagrams still to pass it */
	size_t len, cap;
	uint8_t *data;
};

struct lm_loss {
	struct lm_fault_cfg cfg;
	uint64_t rng;
	size_t capacity;
	struct loss_dg **held; /* capacity entries, nheld in use */
	size_t nheld;
	uint64_t held_due; /* earliest due among held, UINT64_MAX: none */
	struct loss_dg *ready, *ready_tail;
	struct loss_dg *free_list;
	size_t nfree;
	struct lm_loss_stats stats;
};

/* splitmix64: small, fast, and good enough for loss decisions. */
static uint64_t splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_next(struct lm_loss *f)
{
	return splitmix(&f->rng);
}

/* True with probability p; draws nothing when p is 0. */
static bool chance(struct lm_loss *f, double p)
{
	if (p <= 0)
		return false;
	return (double)(rng_next(f) >> 11) * 0x1.0p-53 < p;
}

uint32_t lm_loss_start_delay_us(const struct lm_fault_cfg *cfg,
				uint32_t cluster)
{
	uint64_t state;

	if (!cfg || cfg->start_max_us == 0)
		return 0;
	/* not the clock even for seed 0: a cluster's processes must agree */
	state = cfg->seed ^ ((uint64_t)cluster + 1) * 0x2545f4914f6cdd1dull;
	return (uint32_t)(splitmix(&state) %
			  ((uint64_t)cfg->start_max_us + 1));
}

int lm_loss_active(const struct lm_fault_cfg *cfg)
{
	return cfg && (cfg->drop > 0 || cfg->dup > 0 || cfg->reorder > 0 ||
		       (cfg->delay > 0 && cfg->delay_max_us > 0));
}

lm_loss *lm_loss_create(const struct lm_fault_cfg *cfg, size_t capacity)
{
	struct lm_loss *f;
	struct timespec ts;

	if (!cfg)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->held = calloc(capacity ? capacity : 1, sizeof(*f->held));
	if (!f->held) {
		free(f);
		return NULL;
	}
	f->cfg = *cfg;
	f->capacity = capacity;
	f->held_due = UINT64_MAX;
	f->rng = cfg->seed;
	if (!f->rng) {
		clock_gettime(CLOCK_REALTIME, &ts);
		f->rng =
		    (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		f->rng ^= (uint64_t)(uintptr_t)f;
	}
	return f;
}

static void dg_free_chain(struct loss_dg *d)
{
	while (d) {
		struct loss_dg *next = d->next;

		free(d->data);
		free(d);
		d = next;
	}
}

void lm_loss_destroy(lm_loss *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nheld; i++) {
		f->held[i]->next = NULL;
		dg_free_chain(f->held[i]);
	}
	dg_free_chain(f->ready);
	dg_free_chain(f->free_list);
	free(f->held);
	free(f);
}

static struct loss_dg *dg_new(struct lm_loss *f, uint32_t peer,
			       const void *data, size_t len)
{
	struct loss_dg *d = f->free_list;

	if (d) {
		f->free_list = d->next;
		f->nfree--;
	} else {
		d = calloc(1, sizeof(*d));
		if (!d)
			return NULL;
	}
	if (d->cap < len || !d->data) {
		uint8_t *buf = malloc(len ? len : 1);

		if (!buf) {
			free(d->data);
			free(d);
			return NULL;
		}
		free(d->data);
		d->data = buf;
		d->cap = len ? len : 1;
	}
	if (len)
		memcpy(d->data, data, len);
	d->len = len;
	d->peer = peer;
	d->next = NULL;
	d->after = 0;
	d->due = 0;
	return d;
}

static void dg_recycle(struct lm_loss *f, struct loss_dg *d)
{
	if (f->nfree >= LM_LOSS_FREE_MAX) {
		free(d->data);
		free(d);
		return;
	}
	d->next = f->free_list;
	f->free_list = d;
	f->nfree++;
}

static void ready_append(struct lm_loss *f, struct loss_dg *d)
{
	d->next = NULL;
	if (f->ready_tail)
		f->ready_tail->next = d;
	else
		f->ready = d;
	f->ready_tail = d;
}

static void hold(struct lm_loss *f, struct loss_dg *d)
{
	f->held[f->nheld++] = d;
	if (f->nheld > f->stats.held_max)
		f->stats.held_max = f->nheld;
	if (d->due < f->held_due)
		f->held_due = d->due;
}

/* Moves held[i] to the ready FIFO; the caller revisits index i. */
static void release(struct lm_loss *f, size_t i)
{
	struct loss_dg *d = f->held[i];

	f->held[i] = f->held[--f->nheld];
	ready_append(f, d);
}

static void recompute_due(struct lm_loss *f)
{
	f->held_due = UINT64_MAX;
	for (size_t i = 0; i < f->nheld; i++)
		if (f->held[i]->due < f->held_due)
			f->held_due = f->held[i]->due;
}

/* A datagram went straight through: reordered ones count it. */
static void passed_one(struct lm_loss *f)
{
	bool released = false;

	for (size_t i = 0; i < f->nheld;) {
		struct loss_dg *d = f->held[i];

		if (d->after && --d->after == 0) {
			release(f, i);
			released = true;
			continue;
		}
		i++;
	}
	if (released)
		recompute_due(f);
}

void lm_loss_push(lm_loss *f, uint32_t peer, const void *dg, size_t len,
		   uint64_t now_us)
{
	int copies = 1;

	if (!f || (!dg && len))
		return;
	f->stats.pushed++;
	if (chance(f, f->cfg.drop)) {
		f->stats.dropped++;
		return;
	}
	if (chance(f, f->cfg.dup)) {
		f->stats.duplicated++;
		copies = 2;
	}
	for (int c = 0; c < copies; c++) {
		struct loss_dg *d = dg_new(f, peer, dg, len);

		if (!d) {
			f->stats.dropped++;
			continue;
		}
		if (f->nheld < f->capacity && chance(f, f->cfg.reorder)) {
			d->after = 1 + (uint32_t)(rng_next(f) % 3);
			d->due = now_us + LM_LOSS_REORDER_US;
			f->stats.reordered++;
			hold(f, d);
		} else if (f->nheld < f->capacity && chance(f, f->cfg.delay) &&
			   f->cfg.delay_max_us) {
			d->due =
			    now_us +
			    rng_next(f) % ((uint64_t)f->cfg.delay_max_us + 1);
			f->stats.delayed++;
			hold(f, d);
		} else {
			ready_append(f, d);
			passed_one(f);
		}
	}
}

int lm_loss_pop(lm_loss *f, uint64_t now_us, uint32_t *peer, void *buf,
		 size_t cap, size_t *len)
{
	struct loss_dg *d;

	if (!f)
		return 0;
	if (f->held_due <= now_us) {
		for (size_t i = 0; i < f->nheld;) {
			if (f->held[i]->due <= now_us) {
				release(f, i);
				continue;
			}
			i++;
		}
		recompute_due(f);
	}
	while ((d = f->ready)) {
		f->ready = d->next;
		if (!f->ready)
			f->ready_tail = NULL;
		if (d->len > cap) {
			f->stats.dropped++;
			dg_recycle(f, d);
			continue;
		}
		memcpy(buf, d->data, d->len);
		*len = d->len;
		*peer = d->peer;
		dg_recycle(f, d);
		return 1;
	}
	return 0;
}

uint64_t lm_loss_next_deadline(const lm_loss *f)
{
	if (!f)
		return UINT64_MAX;
	if (f->ready)
		return 0; /* due now */
	return f->held_due;
}

const struct lm_loss_stats *lm_loss_stats(const lm_loss *f)
{
	return &f->stats;
}
