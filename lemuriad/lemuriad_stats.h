/* The lemuriad's protocol counters (struct lm_lemuriad_stats) as named
 * counters of a STATS reply (docs/operations.md, "Counters"). */
#ifndef LM_LEMURIAD_LEMURIAD_STATS_H
#define LM_LEMURIAD_LEMURIAD_STATS_H

#include "lemuriad.h"
#include "stats.h"

/* Adds every field of c's counters to out, one counter per field. */
void lm_lemuriad_stats_add(const lm_lemuriad *c, lm_stats_set *out);

#endif
