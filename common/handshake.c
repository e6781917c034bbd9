/* Layout check.  Every process of a run must read the same layout file:
 * node ids, page numbers and cluster sizes all come from it.  Clients
 * show its hash in JOIN; daemons show it to each other in their one-way
 * PINGs.  A daemon sends one to a peer daemon before its first message
 * to each session of the peer, and answers the first one it gets with
 * its own, so both ends know before any DSM message is handled (a
 * channel delivers in order).  A peer whose hash differs is logged (an
 * error), counted, and its messages are refused both ways until a new
 * session of it shows the same hash; the run in progress, and each later
 * run that needs the peer, is aborted (by the shell, daemon.c, from
 * abort_ev) as though the peer had sent ABORT, so the clients fail with
 * that reason instead of waiting. */
#include "handshake.h"

#include "log.h"
#include "udp.h"

bool lm_daemon_refused(const lm_daemon *d, uint16_t node)
{
	return lm_daemon_is_peer_daemon(d, node) &&
	       d->peers[node].layout == LM_DAEMON_LAYOUT_DIFFERENT;
}

void lm_daemon_send_hash(lm_daemon *d, uint16_t peer)
{
	uint8_t ping[LM_MSG_PREFIX + 8];
	int len = lm_msg_encode_ping_hash(d->layout->hash, ping, sizeof(ping));

	if (len > 0 && lm_evnode_send(d->node, peer, ping, (size_t)len) == 0)
		d->peers[peer].hash_sent = true;
}

/* Asks for run `run` to be aborted because of `peer` (once per run).  The
 * ABORT goes to the protocol from an event of its own: this may be called
 * while the protocol is in the middle of handling a message. */
void lm_daemon_mismatch_abort(lm_daemon *d, uint16_t peer,
			      uint64_t run)
{
	struct lm_daemon_peer *p = &d->peers[peer];

	if (!d->machine || run == 0 || run <= p->aborted_run ||
	    run <= p->abort_pending)
		return;
	p->abort_pending = run;
	event_active(d->abort_ev, 0, 0);
}

void lm_daemon_check_layout(lm_daemon *d, uint16_t peer,
			    uint64_t hash)
{
	struct lm_daemon_peer *p;
	char who[LM_NAME_MAX + 32], where[32];

	if (!lm_daemon_is_peer_daemon(d, peer))
		return;
	p = &d->peers[peer];
	if (!p->hash_sent)
		lm_daemon_send_hash(d, peer); /* so that it knows too */
	p->hash = hash;
	if (hash == d->layout->hash) {
		p->layout = LM_DAEMON_LAYOUT_SAME;
		return;
	}
	if (p->layout == LM_DAEMON_LAYOUT_DIFFERENT)
		return; /* said already */
	p->layout = LM_DAEMON_LAYOUT_DIFFERENT;
	d->stats.layout_mismatches++;
	lm_log_limited("daemons with a different layout", LM_LOG_ERROR,
		       "%s: layout mismatch: %s at %s runs a different layout "
		       "file (hash %016llx, ours %016llx from %s); its "
		       "messages are refused until it restarts with the same "
		       "file",
		       d->name, lm_daemon_node_name(d, peer, who, sizeof(who)),
		       lm_addr_str(lm_daemon_peer_addr(d, peer), where,
				   sizeof(where)),
		       (unsigned long long)hash,
		       (unsigned long long)d->layout->hash, d->layout->path);
	/* What we sent it will never be answered.  (A run it sends us is
	 * aborted when its message is refused: our own newest run may be
	 * one that ended long ago.) */
	lm_daemon_mismatch_abort(d, peer, p->sent_run);
}
