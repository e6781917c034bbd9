/* The counters of a layout's daemons, for `lemuriactl stats` and
 * `lemuria-run --stats` (docs/operations.md, "Counters"): asking every
 * daemon with STATS, the difference of two snapshots (what one run did),
 * sums per level over all daemons, and the reports (table, JSON). */
#ifndef LM_RUNSTATS_H
#define LM_RUNSTATS_H

#include <netinet/in.h>
#include <stdio.h>

#include "auth.h"
#include "config.h"
#include "proto.h"
#include "stats.h"

typedef struct lm_runstats lm_runstats;

/* One daemon of the layout and what it answered. */
struct lm_runstats_daemon {
	char name[LM_NAME_MAX];
	enum lm_role role;
	uint16_t id;
	struct sockaddr_in addr;
	int rc;            /* 0 when it answered, else why not (LM_E*) */
	char why[128];     /* rc != 0: the reason in words */
	lm_stats_set *set; /* rc == 0: its info and counters */
};

/* The daemons of layout l (borrowed for the call), reflectors then
 * clusters, none asked yet (rc LM_ENOENT).  NULL when out of memory. */
lm_runstats *lm_runstats_create(const struct lm_layout *l);
/* Accepts NULL. */
void lm_runstats_destroy(lm_runstats *rs);
size_t lm_runstats_count(const lm_runstats *rs);
/* Daemon i (< lm_runstats_count), borrowed from rs. */
const struct lm_runstats_daemon *lm_runstats_daemon(const lm_runstats *rs,
						    size_t i);

/* Records what daemon i answered: rc 0 and a copy of `set`, or the
 * failure rc (< 0) with `why` (copied; NULL: lm_strerror(rc)).  0,
 * LM_EINVAL (no daemon i, or rc 0 without a set), LM_ENOMEM. */
int lm_runstats_put(lm_runstats *rs, size_t i, int rc, const char *why,
		    const lm_stats_set *set);

/* Runs fn on each of the n jobs (size bytes apart in `jobs`) at once, a
 * thread each, and returns when all are done; a job whose thread cannot
 * start runs in turn after. */
void lm_runstats_each_at_once(void *(*fn)(void *), void *jobs,
			      size_t size, size_t n);

/* Asks every daemon for its counters (STATS) through a transport
 * endpoint of node `self_id` with the client settings of l, all at once
 * (a thread each), waiting at most timeout_ms for each.  A daemon whose
 * answer names another role or section counts as down.  Returns how
 * many did not answer. */
size_t lm_runstats_query(lm_runstats *rs, const struct lm_layout *l,
			 const lm_auth *auth, uint16_t self_id,
			 int timeout_ms);

/* lm_runstats_create and lm_runstats_query in one, with the layout's
 * key for authentication.  *down (may be NULL) gets how many daemons did
 * not answer.  NULL when out of memory. */
lm_runstats *lm_runstats_snapshot(const struct lm_layout *l, uint16_t self_id,
				  int timeout_ms, size_t *down);

/* What happened between two snapshots of the same layout, daemon by
 * daemon: each counter of `after` minus the same counter of `before`
 * (0 when absent there).  A daemon that restarted in between (its uptime
 * went down) counts from zero; a gauge (cached_bytes,
 * backlog_peak_bytes) keeps its value after.  A daemon down in either snapshot is down in the result.
 * Returns a new object (caller destroys), or NULL when out of memory or
 * the snapshots are not of the same daemons. */
lm_runstats *lm_runstats_diff(const lm_runstats *before,
			      const lm_runstats *after);

/* The counters of every daemon that answered, summed per level and name
 * into out (cleared first).  0, LM_ENOBUFS (over LM_STATS_MAX distinct
 * counters), LM_ENOMEM. */
int lm_runstats_sum(const lm_runstats *rs, lm_stats_set *out);

/* `lemuriactl stats`: one block per daemon (role, name, address,
 * uptime, run, attached clients), a row per counter, a column per
 * level; a daemon that did not answer is one line "... down (why)". */
void lm_runstats_print_table(const lm_runstats *rs, FILE *out);
/* The same in short, what `lemuriactl stats` prints without -a: per
 * daemon its head line and the rows of lm_runstats_summary. */
void lm_runstats_print_summary(const lm_runstats *rs, FILE *out);
/* `lemuriactl stats --json`: {"daemons":[{"name":..,"role":..,
 * "address":..,"up":true,"uptime_s":..,"run":"DIGITS","clients":..,
 * "counters":{"client":{..},"cluster":{..},"root":{..},"-":{..}}},
 * {"name":..,"up":false,"error":".."}]} and a newline. */
void lm_runstats_print_json(const lm_runstats *rs, FILE *out);
/* `lemuria-run --stats`: the sum over all daemons of `diff`, then one
 * block per daemon, each line prefixed with "lemuria-run: ". */
void lm_runstats_print_run(const lm_runstats *diff, FILE *out);
/* `lemuria-run --stats` without -a: the summary rows of the sum, the
 * retransmissions explained when there were any, and one head line per
 * daemon. */
void lm_runstats_print_run_summary(const lm_runstats *diff, FILE *out);
/* The rows of a summary (issue 42: 75 counters a daemon hid the few
 * that say how a run went): messages, bytes and retransmissions per
 * level, the pages the lemuriads served from their cache or fetched,
 * barriers and locks, and every dropped_* counter summed as "dropped".
 * Into out (cleared first): 0, LM_ENOBUFS, LM_ENOMEM. */
int lm_runstats_summary(const lm_stats_set *s, lm_stats_set *out);


#endif
