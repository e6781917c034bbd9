/* Emission: the protocol's messages, encoded and handed to the transport,
 * or to the backlog (daemon.h) while the transport's send queue to their
 * peer is full.  A channel delivers in order and the protocols count on
 * it, so once a message to a node waits, every later one to that node
 * waits behind it; messages to other nodes go on.  A message that cannot
 * be sent aborts its run, through the shell's abort_ev. */
#include "emit.h"

#include <stdlib.h>
#include <string.h>

#include "handshake.h"
#include "lm_error.h"
#include "log.h"

/* A message of `run` to `node` (of type `type`) is lost: counted, logged
 * and, when the run is the newest, the run is aborted (once). */
static void lm_daemon_send_lost(lm_daemon *d, uint16_t node, uint16_t type,
				uint64_t run, const char *why)
{
	char who[LM_NAME_MAX + 32];

	d->stats.sends_failed++;
	lm_daemon_node_name(d, node, who, sizeof(who));
	lm_log_limited("messages not sent", LM_LOG_ERROR,
		       "%s: %s to %s not sent: %s", d->name, lm_msg_name(type),
		       who, why);
	if (!d->machine || run == 0 || run < d->run ||
	    run <= d->lost_aborted_run || run <= d->lost_run)
		return;
	d->lost_run = run;
	d->lost_node = node;
	snprintf(d->lost_reason, sizeof(d->lost_reason),
		 "%s %s: %s to %s not sent: %s",
		 d->role == LM_ROLE_REFLECTOR ? "reflector" : "lemuriad",
		 d->name, lm_msg_name(type), who, why);
	event_active(d->abort_ev, 0, 0);
}

static bool lm_daemon_backlogged(const lm_daemon *d, uint16_t node)
{
	return node < d->held_nodes && d->held_of[node] > 0;
}

static void lm_daemon_arm_backlog(lm_daemon *d)
{
	static const struct timeval every = {
		LM_DAEMON_BACKLOG_RETRY_US / 1000000,
		LM_DAEMON_BACKLOG_RETRY_US % 1000000 };

	if (d->held && !evtimer_pending(d->held_ev, NULL))
		evtimer_add(d->held_ev, &every);
}

/* Puts the message (parts, len bytes) at the end of the backlog.
 * 0, or LM_ENOBUFS (no room within the bound) / LM_ENOMEM. */
static int lm_daemon_backlog_add(lm_daemon *d, uint16_t node,
				 enum lm_rel_msg_kind kind, uint32_t req_id,
				 const struct lm_msg *m,
				 const struct lm_rel_part parts[3], size_t len)
{
	const struct lm_layout *l = d->layout;
	struct lm_daemon_held *h;
	size_t at = 0;

	if (m->type != LM_MSG_ABORT &&
	    len > LM_DAEMON_BACKLOG_BYTES - d->held_bytes)
		return LM_ENOBUFS;
	if (!d->held_of) {
		d->held_nodes = l->nreflectors + l->nclusters + l->nprocs + 1;
		d->held_of = calloc(d->held_nodes, sizeof(*d->held_of));
		if (!d->held_of) {
			d->held_nodes = 0;
			return LM_ENOMEM;
		}
	}
	if (node >= d->held_nodes)
		return LM_ENOBUFS; /* not a node of the layout */
	h = malloc(sizeof(*h) + len);
	if (!h)
		return LM_ENOMEM;
	*h = (struct lm_daemon_held){ .node = node, .type = m->type,
				      .kind = kind, .req_id = req_id,
				      .run = m->run, .len = len };
	for (int i = 0; i < 3; i++) {
		if (parts[i].len)
			memcpy(h->data + at, parts[i].data, parts[i].len);
		at += parts[i].len;
	}
	if (d->held_tail)
		d->held_tail->next = h;
	else
		d->held = h;
	d->held_tail = h;
	d->held_bytes += len;
	if (d->held_bytes > d->stats.backlog_peak_bytes)
		d->stats.backlog_peak_bytes = d->held_bytes;
	if (d->held_of[node]++ == 0)
		d->held_peers++;
	d->stats.sends_backlogged++;
	lm_daemon_arm_backlog(d);
	return 0;
}

/* Takes h (whose predecessor's link is *pp) out of the backlog. */
static void lm_daemon_backlog_unlink(lm_daemon *d, struct lm_daemon_held **pp,
				     struct lm_daemon_held *prev,
				     struct lm_daemon_held *h)
{
	*pp = h->next;
	if (d->held_tail == h)
		d->held_tail = prev;
	d->held_bytes -= h->len;
	if (--d->held_of[h->node] == 0)
		d->held_peers--;
	free(h);
}

/* Hands the transport what it has room for now, oldest first, each
 * node's messages in order. */
void lm_daemon_backlog_retry(evutil_socket_t fd, short what, void *arg)
{
	lm_daemon *d = arg;
	uint8_t full[(UINT16_MAX + 1) / 8] = { 0 }; /* nodes still full */
	struct lm_daemon_held **pp = &d->held, *h, *prev = NULL;
	size_t nfull = 0;

	(void)fd;
	(void)what;
	lm_evnode_cork(d->node);
	while ((h = *pp) && nfull < d->held_peers) {
		struct lm_rel_part part = { h->data, h->len };
		int rc;

		if (full[h->node / 8] & (1u << (h->node % 8))) {
			prev = h;
			pp = &h->next;
			continue;
		}
		rc = lm_evnode_queue(d->node, h->node, h->kind, h->req_id,
				     &part, 1);
		if (rc == LM_ENOBUFS) {
			full[h->node / 8] |= (uint8_t)(1u << (h->node % 8));
			nfull++;
			prev = h;
			pp = &h->next;
			continue;
		}
		if (rc)
			lm_daemon_send_lost(d, h->node, h->type, h->run,
					    lm_strerror(rc));
		lm_daemon_backlog_unlink(d, pp, prev, h);
	}
	lm_evnode_uncork(d->node);
	lm_daemon_arm_backlog(d);
}

/* The transport dropped what it had for `node` (lost, or restarted):
 * what waits for it goes too. */
void lm_daemon_backlog_drop(lm_daemon *d, uint16_t node)
{
	struct lm_daemon_held **pp = &d->held, *h, *prev = NULL;

	while (lm_daemon_backlogged(d, node) && (h = *pp)) {
		if (h->node != node) {
			prev = h;
			pp = &h->next;
			continue;
		}
		lm_daemon_backlog_unlink(d, pp, prev, h);
	}
}

void lm_daemon_backlog_free(lm_daemon *d)
{
	while (d->held) {
		struct lm_daemon_held *h = d->held;

		d->held = h->next;
		free(h);
	}
	free(d->held_of);
	d->held_of = NULL;
}

/* Encodes m as head, bulk and tail (*parts, total *len): the head and
 * tail in the scratch buffer, the bulk (a PAGE's data, a RELEASE's
 * updates) left where it is, so that the transport's copy into the
 * datagrams is its only one.  False on failure (logged when m does not
 * encode). */
static bool lm_daemon_encode(lm_daemon *d, const struct lm_msg *m,
			     struct lm_rel_part parts[3], size_t *len)
{
	struct lm_msg_split s;
	int rc;

	if (!lm_daemon_scratch(d, lm_msg_split_len(m)))
		return false;
	rc = lm_msg_encode_split(m, d->scratch, d->scratch_cap, &s);
	if (rc < 0) {
		lm_log_error("%s: cannot encode %s: %s", d->name,
			     lm_msg_name(m->type), lm_strerror(rc));
		return false;
	}
	parts[0] = (struct lm_rel_part){ d->scratch, s.head_len };
	parts[1] = (struct lm_rel_part){ s.blob, s.blob_len };
	parts[2] = (struct lm_rel_part){ d->scratch + s.head_len, s.tail_len };
	*len = s.head_len + s.blob_len + s.tail_len;
	return true;
}

/* Encodes m and hands it to the transport as `kind`, or to the backlog
 * while the transport has no room for it; a message that cannot be sent
 * aborts its run (lm_daemon_send_lost). */
static void lm_daemon_emit(lm_daemon *d, uint16_t node,
			   enum lm_rel_msg_kind kind, uint32_t req_id,
			   const struct lm_msg *m)
{
	struct lm_rel_part parts[3];
	size_t len;
	int rc;

	if (!lm_daemon_encode(d, m, parts, &len)) {
		lm_daemon_send_lost(d, node, m->type, m->run,
				    "cannot encode it");
		return;
	}
	if (lm_daemon_refused(d, node)) {
		/* the peer would refuse it: the run cannot go on */
		d->stats.msgs_refused_layout++;
		lm_daemon_mismatch_abort(d, node, m->run);
		return;
	}
	/* The hash goes first: a channel delivers in order. */
	if (lm_daemon_is_peer_daemon(d, node)) {
		if (!d->peers[node].hash_sent)
			lm_daemon_send_hash(d, node);
		d->peers[node].sent_run = m->run;
	}
	rc = lm_daemon_backlogged(d, node)
		     ? LM_ENOBUFS
		     : lm_evnode_queue(d->node, node, kind, req_id, parts, 3);
	if (rc == LM_ENOBUFS) {
		rc = lm_daemon_backlog_add(d, node, kind, req_id, m, parts,
					   len);
		if (rc == LM_ENOBUFS) {
			char why[96];

			snprintf(why, sizeof(why),
				 "its send queue is full and %zu bytes wait "
				 "already (at most %u)",
				 d->held_bytes, LM_DAEMON_BACKLOG_BYTES);
			lm_daemon_send_lost(d, node, m->type, m->run, why);
			return;
		}
	}
	if (rc) {
		lm_daemon_send_lost(d, node, m->type, m->run, lm_strerror(rc));
		return;
	}
	lm_daemon_count(d, node, true, len);
	/* Who is attached follows from what the protocol told the clients:
	 * let in by JOIN_OK 0, out by ABORT. */
	if (m->type == LM_MSG_JOIN_OK && m->status == 0 && m->run == d->run)
		lm_daemon_attach(d, node, true);
	else if (m->type == LM_MSG_ABORT)
		lm_daemon_attach(d, node, false);
}

void lm_daemon_out_send(void *ctx, uint16_t node,
			const struct lm_msg *m)
{
	lm_daemon_emit(ctx, node, LM_REL_ONEWAY, 0, m);
}

void lm_daemon_out_request(void *ctx, uint16_t node, uint32_t req_id,
			   const struct lm_msg *m)
{
	lm_daemon_emit(ctx, node, LM_REL_REQUEST, req_id, m);
}

void lm_daemon_out_reply(void *ctx, uint16_t node, uint32_t req_id,
			 const struct lm_msg *m)
{
	lm_daemon_emit(ctx, node, LM_REL_REPLY, req_id, m);
}
