/* Network loss injection on the transmit path: drop, duplicate, reorder,
 * delay datagrams (not page faults: those are liblemuria's).
 *
 * Plain state, like the reliability engine: push outgoing datagrams with the
 * current time, pop those that are due.  Seeded, so a failing test can be
 * replayed.  Machines here have no traffic shaper; tests use this instead.
 * Configured by the layout's [faults] section or LM_FAULTS (struct
 * lm_fault_cfg, config.h): those names stay, since layouts and scripts
 * use them. */
#ifndef LM_LOSS_H
#define LM_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct lm_loss lm_loss;

struct lm_loss_stats {
	uint64_t pushed, dropped, duplicated, reordered, delayed, held_max;
};

/* Copies cfg.  `capacity` bounds the datagrams held back at once (beyond it
 * new ones pass straight through).  NULL on allocation failure. */
lm_loss *lm_loss_create(const struct lm_fault_cfg *cfg, size_t capacity);
void lm_loss_destroy(lm_loss *f);

/* True when cfg injects anything at all. */
int lm_loss_active(const struct lm_fault_cfg *cfg);

/* How long the processes of cluster `cluster` wait before they join
 * (start_max): one draw per cluster from cfg's seed, the same in each of
 * its processes, 0..start_max_us. */
uint32_t lm_loss_start_delay_us(const struct lm_fault_cfg *cfg,
				uint32_t cluster);

/* Hands an outgoing datagram to the injector; the bytes are copied.
 * `peer` is opaque to the injector and returned by lm_loss_pop. */
void lm_loss_push(lm_loss *f, uint32_t peer, const void *dg, size_t len,
		   uint64_t now_us);

/* Takes the next datagram due at `now_us`.  Returns 1 and fills peer, len
 * and buf (capacity cap; larger datagrams are dropped and counted) or 0 when
 * nothing is due. */
int lm_loss_pop(lm_loss *f, uint64_t now_us, uint32_t *peer, void *buf,
		 size_t cap, size_t *len);

/* Earliest time a held datagram becomes due, UINT64_MAX when none. */
uint64_t lm_loss_next_deadline(const lm_loss *f);

const struct lm_loss_stats *lm_loss_stats(const lm_loss *f);

#endif
