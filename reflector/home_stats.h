/* The reflector's protocol counters (struct lm_home_stats) as named
 * counters of a STATS reply (docs/operations.md, "Counters"). */
#ifndef LM_REFLECTOR_HOME_STATS_H
#define LM_REFLECTOR_HOME_STATS_H

#include "home.h"
#include "stats.h"

/* Adds every field of h's counters to out, one counter per field. */
void lm_home_stats_add(const lm_home *h, lm_stats_set *out);

#endif
