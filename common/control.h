/* What a daemon answers control tools (control.c). */
#ifndef LM_CONTROL_H
#define LM_CONTROL_H

#include "daemon_state.h"

/* Replaces the contents of `out` with what the daemon answers to STATS
 * (docs/operations.md, "Counters"): who it is, then per link level the
 * messages and bytes the protocol sent and received and the datagrams
 * the transport resent, then the shell's and the protocol's counters.
 * Control tools (node ids outside the layout) are not counted. */
void lm_daemon_collect_stats(lm_daemon *d, lm_stats_set *out);
void lm_daemon_on_ping(lm_daemon *d, const struct lm_rel_msg *m);
void lm_daemon_on_stats(lm_daemon *d, const struct lm_rel_msg *m);

#endif
