/* The lemuriad's protocol counters (struct lm_cluster_stats) as named
 * counters of a STATS reply (docs/operations.md, "Counters"). */
#ifndef LM_LEMURIAD_CLUSTER_STATS_H
#define LM_LEMURIAD_CLUSTER_STATS_H

#include "cluster.h"
#include "stats.h"

/* Adds every field of c's counters to out, one counter per field. */
void lm_cluster_stats_add(const lm_cluster *c, lm_stats_set *out);

#endif
