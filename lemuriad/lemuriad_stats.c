/* Names and levels of struct lm_lemuriad_stats (lemuriad/lemuriad.h).  A
 * field added there gets one line in the table below: "client" for what
 * the clients asked, "cluster" for what went up to the reflector, "-" for
 * what belongs to no link (the cache, drops). */
#include "lemuriad_stats.h"

#include "deltas.h"
#include "updates.h"

#define F(level, field) LM_STATS_FIELD(struct lm_lemuriad_stats, level, field)

static const struct lm_stats_field lm_lemuriad_stat_fields[] = {
	F(LM_STAT_CLIENT, fetch_hits),
	F(LM_STAT_CLIENT, fetch_neighbours),
	F(LM_STAT_CLUSTER, fetch_misses),
	F(LM_STAT_CLUSTER, fetch_ahead),
	F(LM_STAT_CLIENT, fetch_coalesced),
	F(LM_STAT_CLIENT, flushes),
	F(LM_STAT_NONE, evictions),
	F(LM_STAT_NONE, invalidations),
	F(LM_STAT_NONE, kept),
	F(LM_STAT_CLUSTER, barriers),
	F(LM_STAT_CLIENT, locks),
	F(LM_STAT_NONE, dropped_stale_run),
	F(LM_STAT_NONE, dropped_bad),
	F(LM_STAT_CLUSTER, registrations),
	F(LM_STAT_CLUSTER, spills),
	F(LM_STAT_CLUSTER, recalls),
	F(LM_STAT_CLUSTER, recalls_waited),
	F(LM_STAT_CLUSTER, recall_waits_ended),
	F(LM_STAT_CLUSTER, lock_probes),
	F(LM_STAT_CLUSTER, tokens_returned),
	F(LM_STAT_CLIENT, local_handoffs),
	F(LM_STAT_NONE, cached_bytes),
	F(LM_STAT_NONE, copy_installs),
	F(LM_STAT_NONE, copy_seals),
	F(LM_STAT_NONE, copy_sealed_bytes),
	F(LM_STAT_NONE, copy_seal_reads),
	F(LM_STAT_NONE, copy_drops),
	F(LM_STAT_NONE, copy_checked),
	F(LM_STAT_NONE, copy_sets),
	F(LM_STAT_NONE, copy_set_pages),
	F(LM_STAT_NONE, copy_sets_split),
	F(LM_STAT_NONE, copy_late_wakes),
	F(LM_STAT_CLIENT, copy_notices_held),
	F(LM_STAT_CLUSTER, copy_owned),
	F(LM_STAT_NONE, copy_own_refused),
	F(LM_STAT_CLUSTER, copy_recalls),
	F(LM_STAT_CLUSTER, copy_recalls_unwritten),
	F(LM_STAT_CLUSTER, copy_forgotten),
	F(LM_STAT_CLUSTER, copy_published),
	F(LM_STAT_CLUSTER, changed_heard),
	F(LM_STAT_CLUSTER, changed_fetches),
	F(LM_STAT_CLUSTER, changed_groups),
	F(LM_STAT_CLUSTER, changed_again),
	F(LM_STAT_CLUSTER, changes_told),
	F(LM_STAT_CLUSTER, changes_told_pages),
	F(LM_STAT_NONE, changes_untold),
	F(LM_STAT_CLUSTER, order_waits),
	F(LM_STAT_CLUSTER, order_hurries),
	F(LM_STAT_NONE, order_hurried),
	F(LM_STAT_NONE, order_late),
	F(LM_STAT_NONE, order_cut),
};

#undef F
#define F(level, field) LM_STATS_FIELD(struct lm_deltas_stats, level, field)

/* The cluster deltas (lemuriad/deltas.h): all about the reflector link. */
static const struct lm_stats_field lm_delta_stat_fields[] = {
	F(LM_STAT_CLUSTER, deltas_registered),
	F(LM_STAT_CLUSTER, deltas_merged),
	F(LM_STAT_CLUSTER, deltas_sent_data),
	F(LM_STAT_CLUSTER, deltas_pushed),
	F(LM_STAT_CLUSTER, deltas_pulled),
	F(LM_STAT_CLUSTER, deltas_pull_missing),
	F(LM_STAT_CLUSTER, delta_bytes_sent),
	F(LM_STAT_CLUSTER, deltas_sent_shared),
	F(LM_STAT_NONE, deltas_forgotten),
};

#undef F
#define F(level, field) LM_STATS_FIELD(struct lm_updates_stats, level, field)

/* Barrier updates (lemuriad/updates.h): sent to clients. */
static const struct lm_stats_field lm_updates_stat_fields[] = {
	F(LM_STAT_CLIENT, updates_sent),
	F(LM_STAT_CLIENT, update_bytes),
	F(LM_STAT_CLIENT, updates_capped),
	F(LM_STAT_CLIENT, updates_ahead),
	F(LM_STAT_CLIENT, updates_idle),
	F(LM_STAT_NONE, mask_overflows),
};

#undef F

void lm_lemuriad_stats_add(const lm_lemuriad *c, lm_stats_set *out)
{
	lm_stats_add_fields(out, lm_lemuriad_stats(c), lm_lemuriad_stat_fields,
			    sizeof(lm_lemuriad_stat_fields) /
				    sizeof(lm_lemuriad_stat_fields[0]));
	lm_stats_add_fields(out, lm_lemuriad_delta_stats(c),
			    lm_delta_stat_fields,
			    sizeof(lm_delta_stat_fields) /
				    sizeof(lm_delta_stat_fields[0]));
	lm_stats_add_fields(out, lm_lemuriad_updates_stats(c),
			    lm_updates_stat_fields,
			    sizeof(lm_updates_stat_fields) /
				    sizeof(lm_updates_stat_fields[0]));
}
