/* Keepalive and start-up PINGs to the daemons a daemon talks to
 * (docs/operations.md, "Liveness" and "A restarted daemon"). */
#include "keepalive.h"

#include "log.h"

/* Liveness (docs/operations.md, "Failures"): a daemon that waits for its
 * reflector (or a reflector for its peers) may have nothing in flight to
 * it for a long time, e.g. during a barrier.  A one-way PING then keeps
 * one datagram in flight; a peer that died stops acking it, and the
 * transport reports it unreachable after its retries, which aborts the
 * run with the peer's name instead of leaving everyone waiting.
 * `announce`: the PING that starts a session (lm_daemon_announce), sent
 * whatever is in flight and not counted as a keepalive. */
static void lm_daemon_ping(lm_daemon *d, uint16_t peer, const uint8_t *ping,
			   size_t len, bool announce)
{
	if (peer == d->id ||
	    (!announce && lm_rel_pending(lm_evnode_engine(d->node), peer)))
		return; /* in flight already: it will tell */
	if (lm_evnode_send(d->node, peer, ping, len) == 0) {
		if (!announce)
			d->keepalives++;
		if (lm_daemon_is_peer_daemon(d, peer))
			d->peers[peer].hash_sent = true;
	}
}

/* The PING, with the layout hash (see "Layout check"), to every daemon
 * this one talks to: a lemuriad's reflector; a reflector's other
 * reflectors and its own lemuriads. */
static void lm_daemon_ping_peers(lm_daemon *d, bool announce)
{
	const struct lm_layout *l = d->layout;
	uint8_t ping[16];
	int len = lm_msg_encode_ping_hash(l->hash, ping, sizeof(ping));

	if (len < 0)
		return;
	if (d->role == LM_ROLE_LEMURIAD) {
		const struct lm_cluster_cfg *c = lm_layout_cluster(l, d->name);

		lm_daemon_ping(d, l->reflectors[c->reflector_index].id, ping,
			       (size_t)len, announce);
		return;
	}
	for (size_t i = 0; i < l->nreflectors; i++)
		lm_daemon_ping(d, l->reflectors[i].id, ping, (size_t)len,
			       announce);
	for (size_t i = 0; i < l->nclusters; i++)
		if (l->reflectors[l->clusters[i].reflector_index].id == d->id)
			lm_daemon_ping(d, l->clusters[i].id, ping, (size_t)len,
				       announce);
}

void lm_daemon_keepalive(evutil_socket_t fd, short what, void *arg)
{
	lm_daemon *d = arg;

	(void)fd;
	(void)what;
	/* Summaries of rate-limited lines come out within a second of the
	 * end of their interval. */
	lm_log_limit_flush();
	if (!d->machine || !d->run)
		return; /* no run yet: nobody waits */
	if (d->proto->tick)
		d->proto->tick(d->machine);
	lm_daemon_ping_peers(d, false);
}

/* A restarted daemon's peers learn of its new session from its first
 * datagram, a PING sent as it starts (docs/operations.md, "A restarted
 * daemon").  A peer that still keeps the transport state of the dead
 * incarnation drops it then, and ends the run it had with it, which is
 * over by then.  Left to the first message of the next run, the reset
 * came during that run and ended it (what the peer had sent of it to the
 * dead session was lost, too).  A peer that is not up yet takes the PING
 * when it comes, within the transport's retries (else it is logged
 * unreachable, and with no run nothing else follows). */
void lm_daemon_announce(lm_daemon *d)
{
	lm_daemon_ping_peers(d, true);
}
