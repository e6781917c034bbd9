/* Names and levels of struct lm_home_stats (reflector/home.h).  A field
 * added there gets one line in the table below: "cluster" for what the
 * lemuriads asked of this home, "root" for what other reflectors asked,
 * "-" for what belongs to no link. */
#include "home_stats.h"

#define F(level, field) LM_STATS_FIELD(struct lm_home_stats, level, field)

static const struct lm_stats_field lm_home_stat_fields[] = {
	F(LM_STAT_CLUSTER, fetches),
	F(LM_STAT_ROOT, fetches_forwarded),
	F(LM_STAT_CLUSTER, fetch_cache_hits),
	F(LM_STAT_CLUSTER, fetches_coalesced),
	F(LM_STAT_CLUSTER, flushes),
	F(LM_STAT_ROOT, flushes_forwarded),
	F(LM_STAT_NONE, held),
	F(LM_STAT_CLUSTER, releases),
	F(LM_STAT_CLUSTER, regs_entered),
	F(LM_STAT_CLUSTER, regs_merged),
	F(LM_STAT_CLUSTER, pulls_sent),
	F(LM_STAT_CLUSTER, pulls_ahead),
	F(LM_STAT_CLUSTER, pushes_received),
	F(LM_STAT_CLUSTER, owned_granted),
	F(LM_STAT_CLUSTER, holder_drops),
	F(LM_STAT_CLUSTER, versions_skipped),
	F(LM_STAT_CLUSTER, changed_sent),
	F(LM_STAT_CLUSTER, changed_pages),
	F(LM_STAT_CLUSTER, fetches_waited),
	F(LM_STAT_CLUSTER, page_diffs),
	F(LM_STAT_ROOT, registers_forwarded),
	F(LM_STAT_CLUSTER, diffs_applied),
	F(LM_STAT_CLUSTER, diffs_rejected),
	F(LM_STAT_CLUSTER, barriers),
	F(LM_STAT_CLUSTER, lock_grants),
	F(LM_STAT_CLUSTER, lock_recalls),
	F(LM_STAT_CLUSTER, allocs),
	F(LM_STAT_NONE, dropped_stale_run),
	F(LM_STAT_NONE, dropped_bad),
};

#undef F

void lm_home_stats_add(const lm_home *h, lm_stats_set *out)
{
	lm_stats_add_fields(out, lm_home_stats(h), lm_home_stat_fields,
			    sizeof(lm_home_stat_fields) /
				    sizeof(lm_home_stat_fields[0]));
}
