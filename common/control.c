/* What a daemon answers control tools (lemuriactl, lemuria-run): PING with
 * who it is and its transport's totals, STATS with its counters
 * (docs/operations.md, "Counters"). */
#include "control.h"

#include <stdio.h>

#include "clock.h"
#include "stats.h"

static const char *const lm_daemon_link_names[LM_DAEMON_LINK_COUNTER_COUNT] = {
	[LM_DAEMON_MSGS_SENT] = "msgs_sent",
	[LM_DAEMON_MSGS_RECEIVED] = "msgs_received",
	[LM_DAEMON_BYTES_SENT] = "bytes_sent",
	[LM_DAEMON_BYTES_RECEIVED] = "bytes_received",
};

void lm_daemon_on_ping(lm_daemon *d, const struct lm_rel_msg *m)
{
	const struct lm_rel_stats *st = lm_rel_stats(lm_evnode_engine(d->node));
	struct lm_msg_pong pong = {
		.role = (uint8_t)d->role,
		.uptime_us = lm_now_us() - d->started_us,
		.dg_received = st->dg_received,
		.dg_sent = st->dg_sent,
		.drops = st->drop_malformed + st->drop_version +
			 st->drop_type + st->drop_auth + st->drop_replay +
			 st->drop_unknown_peer + st->drop_misaddressed +
			 lm_evnode_drops(d->node),
	};
	uint8_t buf[256];
	int len;

	snprintf(pong.name, sizeof(pong.name), "%s", d->name);
	len = lm_msg_encode_pong(&pong, buf, sizeof(buf));
	if (len > 0)
		lm_evnode_reply(d->node, m->peer, m->req_id, buf, (size_t)len);
}

void lm_daemon_collect_stats(lm_daemon *d, lm_stats_set *out)
{
	const struct lm_layout *l = d->layout;
	lm_rel *rel = lm_evnode_engine(d->node);
	uint64_t rtx[LM_LEVEL_COUNT] = { 0 };
	size_t last = l->nreflectors + l->nclusters + l->nprocs;
	struct lm_stats_info info = {
		.role = (uint8_t)d->role,
		.uptime_us = lm_now_us() - d->started_us,
		.run = d->run,
		.clients = d->attached ? d->nattached
				       : LM_STATS_CLIENTS_UNKNOWN,
	};
	/* The links a role has: a lemuriad has no root link, a reflector
	 * no client link. */
	int lo = d->role == LM_ROLE_REFLECTOR ? LM_LEVEL_CLUSTER
					      : LM_LEVEL_CLIENT;
	int hi = d->role == LM_ROLE_REFLECTOR ? LM_LEVEL_ROOT
					      : LM_LEVEL_CLUSTER;

	lm_stats_clear(out);
	snprintf(info.name, sizeof(info.name), "%s", d->name);
	lm_stats_set_info(out, &info);
	for (size_t node = 1; node <= last && node < LM_NODE_CONTROL; node++) {
		int level = lm_stats_link_level(l, d->id, (uint16_t)node);

		if (level >= 0)
			rtx[level] +=
				lm_rel_peer_retransmits(rel, (uint16_t)node);
	}
	for (int level = lo; level <= hi; level++) {
		for (int c = 0; c < LM_DAEMON_LINK_COUNTER_COUNT; c++)
			lm_stats_add(out, level, lm_daemon_link_names[c],
				     d->link[level][c]);
		lm_stats_add(out, level, "retransmits", rtx[level]);
	}
	lm_stats_add(out, LM_STAT_NONE, "msgs_undecodable",
		     d->stats.msgs_undecodable);
	lm_stats_add(out, LM_STAT_NONE, "sends_failed", d->stats.sends_failed);
	lm_stats_add(out, LM_STAT_NONE, "sends_backlogged",
		     d->stats.sends_backlogged);
	lm_stats_add(out, LM_STAT_NONE, "backlog_peak_bytes",
		     d->stats.backlog_peak_bytes);
	{
		const struct lm_rel_stats *st = lm_rel_stats(rel);
		struct lm_evnode_drop_stats ev;

		/* bad input, by cause (docs/operations.md) */
		lm_evnode_drop_stats(d->node, &ev);
		lm_stats_add(out, LM_STAT_NONE, "dropped_malformed",
			     st->drop_malformed);
		lm_stats_add(out, LM_STAT_NONE, "dropped_version",
			     st->drop_version);
		lm_stats_add(out, LM_STAT_NONE, "dropped_type", st->drop_type);
		lm_stats_add(out, LM_STAT_NONE, "dropped_auth", st->drop_auth);
		lm_stats_add(out, LM_STAT_NONE, "dropped_replay",
			     st->drop_replay);
		lm_stats_add(out, LM_STAT_NONE, "dropped_unknown_node",
			     st->drop_unknown_peer);
		lm_stats_add(out, LM_STAT_NONE, "dropped_misaddressed",
			     st->drop_misaddressed);
		lm_stats_add(out, LM_STAT_NONE, "dropped_stale_session",
			     st->drop_stale_session);
		lm_stats_add(out, LM_STAT_NONE, "dropped_wrong_address",
			     ev.wrong_addr);
		lm_stats_add(out, LM_STAT_NONE, "dropped_oversized",
			     ev.oversized);
		lm_stats_add(out, LM_STAT_NONE, "recv_errors", ev.recv_errors);
		lm_stats_add(out, LM_STAT_NONE, "layout_mismatches",
			     d->stats.layout_mismatches);
		lm_stats_add(out, LM_STAT_NONE, "msgs_refused_layout",
			     d->stats.msgs_refused_layout);
		/* why datagrams went again (retransmits, by level, above) */
		lm_stats_add(out, LM_STAT_NONE, "rtx_timeouts", st->timeouts);
		lm_stats_add(out, LM_STAT_NONE, "rtx_fast",
			     st->fast_retransmits);
		lm_stats_add(out, LM_STAT_NONE, "rtx_early",
			     st->early_retransmits);
		lm_stats_add(out, LM_STAT_NONE, "rtx_probes", st->tail_probes);
		lm_stats_add(out, LM_STAT_NONE, "rtx_spurious",
			     st->spurious_timeouts);
		lm_stats_add(out, LM_STAT_NONE, "dg_duplicates",
			     st->drop_duplicate);
		lm_stats_add(out, LM_STAT_NONE, "dg_send_refused",
			     lm_evnode_tx_drops(d->node));
		lm_stats_add(out, LM_STAT_NONE, "dg_dropped_window",
			     st->drop_window);
		lm_stats_add(out, LM_STAT_NONE, "dg_dropped_reasm",
			     st->drop_reasm_limit);
	}
	{
		uint64_t trains, dgs, reads, taken;

		/* datagrams per train: how much sending one event batched */
		lm_evnode_train_stats(d->node, &trains, &dgs);
		lm_stats_add(out, LM_STAT_NONE, "tx_trains", trains);
		lm_stats_add(out, LM_STAT_NONE, "tx_train_datagrams", dgs);
		/* datagrams per receive call: how much reading batched */
		lm_evnode_rx_stats(d->node, &reads, &taken);
		lm_stats_add(out, LM_STAT_NONE, "rx_reads", reads);
		lm_stats_add(out, LM_STAT_NONE, "rx_datagrams", taken);
	}
	lm_stats_add(out, LM_STAT_NONE, "keepalives", d->keepalives);
	if (d->machine && d->proto->stats)
		d->proto->stats(d->machine, out);
}

void lm_daemon_on_stats(lm_daemon *d, const struct lm_rel_msg *m)
{
	uint8_t *buf;
	int len;

	if (lm_stats_decode_request(m->data, m->len)) {
		d->stats.msgs_undecodable++;
		return;
	}
	if (!d->reply_set && !(d->reply_set = lm_stats_create())) {
		d->stats.sends_failed++;
		return;
	}
	lm_daemon_collect_stats(d, d->reply_set);
	buf = lm_daemon_scratch(d, lm_stats_reply_len(d->reply_set));
	if (!buf) {
		d->stats.sends_failed++;
		return;
	}
	len = lm_stats_encode_reply(d->reply_set, buf, d->scratch_cap);
	if (len < 0 ||
	    lm_evnode_reply(d->node, m->peer, m->req_id, buf, (size_t)len))
		d->stats.sends_failed++;
}
