/* Fault injection on the transmit path: drop, duplicate, reorder, delay.
 *
 * Plain state, like the reliability engine: push outgoing datagrams with the
 * current time, pop those that are due.  Seeded, so a failing test can be
 * replayed.  Machines here have no traffic shaper; tests use this instead. */
#ifndef LM_FAULT_H
#define LM_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct lm_fault lm_fault;

struct lm_fault_stats {
	uint64_t pushed, dropped, duplicated, reordered, delayed, held_max;
};

/* Copies cfg.  `capacity` bounds the datagrams held back at once (beyond it
 * new ones pass straight through).  NULL on allocation failure. */
lm_fault *lm_fault_create(const struct lm_fault_cfg *cfg, size_t capacity);
void lm_fault_destroy(lm_fault *f);

/* True when cfg injects anything at all. */
int lm_fault_cfg_active(const struct lm_fault_cfg *cfg);

/* Hands an outgoing datagram to the injector; the bytes are copied.
 * `peer` is opaque to the injector and returned by lm_fault_pop. */
void lm_fault_push(lm_fault *f, uint32_t peer, const void *dg, size_t len,
		   uint64_t now_us);

/* Takes the next datagram due at `now_us`.  Returns 1 and fills peer, len
 * and buf (capacity cap; larger datagrams are dropped and counted) or 0 when
 * nothing is due. */
int lm_fault_pop(lm_fault *f, uint64_t now_us, uint32_t *peer, void *buf,
		 size_t cap, size_t *len);

/* Earliest time a held datagram becomes due, UINT64_MAX when none. */
uint64_t lm_fault_next_deadline(const lm_fault *f);

const struct lm_fault_stats *lm_fault_stats(const lm_fault *f);

#endif
