/* The daemon object (see daemon.h): the transport endpoint of a daemon's
 * section, the messages it receives (control requests to control.c, layout
 * hashes to handshake.c, DSM messages to the protocol), the peers it loses,
 * the ABORTs it makes up for the protocol, and the protocol's put-off
 * work.  It sits above the other files of the shell, which never call
 * it. */
#include "daemon.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "clock.h"
#include "control.h"
#include "daemon_state.h"
#include "emit.h"
#include "handshake.h"
#include "keepalive.h"
#include "link_config.h"
#include "lm_error.h"
#include "log.h"
#include "loss.h"
#include "mem.h"
#include "stats.h"

static void lm_daemon_on_abort_ev(evutil_socket_t fd, short what, void *arg)
{
	lm_daemon *d = arg;
	char reason[LM_MSG_REASON_MAX], who[LM_NAME_MAX + 32];

	(void)fd;
	(void)what;
	for (uint16_t node = 1; node <= d->ndaemons; node++) {
		struct lm_daemon_peer *p = &d->peers[node];
		struct lm_msg a = { .type = LM_MSG_ABORT,
				    .rank = UINT32_MAX };

		if (p->abort_pending <= p->aborted_run)
			continue;
		a.run = p->aborted_run = p->abort_pending;
		snprintf(reason, sizeof(reason),
			 "%s runs a different layout than %s %s (hash "
			 "%016llx, %s has %016llx)",
			 lm_daemon_node_name(d, node, who, sizeof(who)),
			 d->role == LM_ROLE_REFLECTOR ? "reflector"
						      : "lemuriad",
			 d->name, (unsigned long long)p->hash, d->name,
			 (unsigned long long)d->layout->hash);
		a.data = (const uint8_t *)reason;
		a.data_len = strlen(reason);
		lm_daemon_see_run(d, a.run);
		d->proto->handle(d->machine, node, LM_REL_ONEWAY, 0, &a);
	}
	if (d->lost_run > d->lost_aborted_run) {
		struct lm_msg a = { .type = LM_MSG_ABORT, .rank = UINT32_MAX };

		a.run = d->lost_aborted_run = d->lost_run;
		a.data = (const uint8_t *)d->lost_reason;
		a.data_len = strlen(d->lost_reason);
		d->proto->handle(d->machine, d->lost_node, LM_REL_ONEWAY, 0, &a);
	}
}

/* A zero timeout runs after the loop has polled the sockets again, so
 * put-off work never holds up a message (an active event would run
 * before them). */
static void lm_daemon_arm_background(lm_daemon *d)
{
	static const struct timeval now = { 0, 0 };

	if (!d->proto || !d->proto->background || d->background_armed)
		return;
	if (evtimer_add(d->background_ev, &now) == 0)
		d->background_armed = true;
}

static void lm_daemon_on_background(evutil_socket_t fd, short what,
				    void *arg)
{
	lm_daemon *d = arg;

	(void)fd;
	(void)what;
	d->background_armed = false;
	if (d->machine && d->proto->background(d->machine))
		lm_daemon_arm_background(d);
}

/* Runs the machine's clock and arms the timer for the time it names. */
static void lm_daemon_pulse(lm_daemon *d)
{
	uint64_t now, next;
	struct timeval in;

	if (!d->machine || !d->proto->pulse)
		return;
	now = lm_now_us();
	next = d->proto->pulse(d->machine, now);
	if (next == d->pulse_at)
		return;
	d->pulse_at = next;
	if (!next) {
		evtimer_del(d->pulse_ev);
		return;
	}
	next = next > now ? next - now : 0;
	in.tv_sec = (time_t)(next / 1000000);
	in.tv_usec = (suseconds_t)(next % 1000000);
	if (evtimer_add(d->pulse_ev, &in) < 0)
		lm_log_error("%s: cannot arm the pulse timer", d->name);
}

static void lm_daemon_on_pulse(evutil_socket_t fd, short what, void *arg)
{
	lm_daemon *d = arg;

	(void)fd;
	(void)what;
	d->pulse_at = 0;
	lm_daemon_pulse(d);
}

static void lm_daemon_on_watch(evutil_socket_t fd, short what, void *arg)
{
	lm_daemon *d = arg;

	(void)fd;
	(void)what;
	if (d->machine)
		d->proto->readable(d->machine);
}

static void lm_daemon_deliver(void *ctx, const struct lm_rel_msg *m)
{
	lm_daemon *d = ctx;
	int type = lm_msg_type(m->data, m->len);
	struct lm_msg msg;
	uint64_t hash;
	char who[LM_NAME_MAX + 32];
	int rc;

	lm_daemon_count(d, m->peer, false, m->len);
	if (type == LM_MSG_PING && m->kind == LM_REL_REQUEST) {
		lm_daemon_on_ping(d, m);
		return;
	}
	if (type == LM_MSG_STATS && m->kind == LM_REL_REQUEST) {
		lm_daemon_on_stats(d, m);
		return;
	}
	if (type == LM_MSG_PING && m->kind == LM_REL_ONEWAY) {
		/* a keepalive (the transport's ack was the answer), with the
		 * peer daemon's layout hash */
		if (lm_msg_decode_ping(m->data, m->len, &hash) == 0)
			lm_daemon_check_layout(d, m->peer, hash);
		return;
	}
	if (lm_daemon_refused(d, m->peer)) {
		const struct lm_daemon_peer *p = &d->peers[m->peer];

		d->stats.msgs_refused_layout++;
		lm_log_limited("messages refused from daemons with a "
			       "different layout", LM_LOG_WARN,
			       "%s: refused %s from %s: it runs a different "
			       "layout (hash %016llx, ours %016llx)",
			       d->name, lm_msg_name(type),
			       lm_daemon_node_name(d, m->peer, who,
						   sizeof(who)),
			       (unsigned long long)p->hash,
			       (unsigned long long)d->layout->hash);
		if (lm_msg_decode(m->data, m->len, &msg, d->notices,
				  d->notice_cap) == 0)
			lm_daemon_mismatch_abort(d, m->peer, msg.run);
		return;
	}
	if (!d->machine) {
		d->stats.msgs_undecodable++;
		lm_log_limited("messages before the protocol ran",
			       LM_LOG_DEBUG,
			       "%s: %s from node %u: no protocol running",
			       d->name, lm_msg_name(type), m->peer);
		return;
	}
	rc = lm_msg_decode(m->data, m->len, &msg, d->notices, d->notice_cap);
	if (rc) {
		/* Dropped and counted; the sender authenticated, so this is
		 * a bug or a version mismatch, not noise. */
		d->stats.msgs_undecodable++;
		lm_log_limited("undecodable messages", LM_LOG_WARN,
			       "%s: dropped undecodable message (type %d, %zu "
			       "bytes) from %s: %s",
			       d->name, type, m->len,
			       lm_daemon_node_name(d, m->peer, who,
						   sizeof(who)),
			       lm_strerror(rc));
		return;
	}
	d->stats.msgs_handled++;
	lm_daemon_see_run(d, msg.run);
	if (msg.type == LM_MSG_LEAVE)
		lm_daemon_attach(d, m->peer, false);
	d->proto->handle(d->machine, m->peer, m->kind, m->req_id, &msg);
	lm_daemon_pulse(d);
	lm_mem_follow_heap(); /* what the heap gained, before it is used */
}

static void lm_daemon_peer_event(void *ctx, uint16_t peer,
				 enum lm_rel_peer_event ev)
{
	lm_daemon *d = ctx;
	const char *why;

	/* Control tools (ids outside the layout) come and go: each
	 * lemuriactl run is a restart, and one that exits before acking
	 * its reply becomes unreachable. */
	if (lm_stats_link_level(d->layout, d->id, peer) < 0)
		return;
	/* Its next session shows its layout again. */
	if (lm_daemon_is_peer_daemon(d, peer))
		memset(&d->peers[peer], 0, sizeof(d->peers[peer]));
	lm_daemon_backlog_drop(d, peer);
	lm_daemon_attach(d, peer, false);
	why = ev == LM_REL_PEER_UNREACHABLE ?
	      lm_evnode_peer_trouble(d->node, peer) : NULL;
	lm_log_info("%s: node %u %s%s%s", d->name, peer,
		    ev == LM_REL_PEER_UNREACHABLE ? "is unreachable"
						  : "restarted",
		    why ? ": " : "", why ? why : "");
	if (d->machine && d->proto->peer_lost)
		d->proto->peer_lost(d->machine, peer, why);
}

static void lm_daemon_out_later(void *ctx)
{
	lm_daemon_arm_background(ctx);
}

int lm_daemon_start_protocol(lm_daemon *d,
			     const struct lm_daemon_protocol *proto,
			     char *err, size_t errlen)
{
	int fd;

	d->notice_cap = (size_t)(d->layout->shared_size /
				 d->layout->page_size);
	d->notices = calloc(d->notice_cap, sizeof(*d->notices));
	if (d->role == LM_ROLE_LEMURIAD && d->layout->nprocs)
		d->attached = calloc(d->layout->nprocs, 1);
	if (!d->notices ||
	    (d->role == LM_ROLE_LEMURIAD && d->layout->nprocs &&
	     !d->attached)) {
		snprintf(err, errlen, "out of memory");
		return LM_ENOMEM;
	}
	d->out = (struct lm_msg_out){ lm_daemon_out_send,
				      lm_daemon_out_request,
				      lm_daemon_out_reply,
				      lm_daemon_out_later };
	d->proto = proto;
	d->machine = proto->create(d->layout, d->name, d->id, &d->out, d,
				   err, errlen);
	if (!d->machine)
		return LM_EINVAL;
	if (proto->watch_fd && proto->readable &&
	    (fd = proto->watch_fd(d->machine)) >= 0) {
		d->watch_ev = event_new(event_get_base(d->pulse_ev), fd,
					EV_READ | EV_PERSIST,
					lm_daemon_on_watch, d);
		if (!d->watch_ev || event_add(d->watch_ev, NULL) < 0) {
			snprintf(err, errlen, "cannot watch the protocol's "
				 "descriptor");
			return LM_ENOMEM;
		}
	}
	return 0;
}

const struct lm_daemon_stats *lm_daemon_stats(const lm_daemon *d)
{
	return &d->stats;
}

/* Finds the section and the peers this daemon may talk to. */
static int lm_daemon_find_self(lm_daemon *d, const char *name, char *err,
			       size_t errlen)
{
	const struct lm_layout *l = d->layout;

	if (d->role == LM_ROLE_REFLECTOR) {
		const struct lm_reflector_cfg *r = lm_layout_reflector(l, name);

		if (!r)
			goto missing;
		d->id = r->id;
		d->addr = r->addr;
	} else {
		const struct lm_cluster_cfg *c = lm_layout_cluster(l, name);

		if (!c)
			goto missing;
		d->id = c->id;
		d->addr = c->addr;
	}
	snprintf(d->name, sizeof(d->name), "%s", name);
	return 0;
missing:
	snprintf(err, errlen, "%s: no [%s %s] section in the layout",
		 l->path, d->role == LM_ROLE_REFLECTOR ? "reflector" : "cluster",
		 name);
	return LM_ENOENT;
}

static int lm_daemon_declare_peers(lm_daemon *d)
{
	const struct lm_layout *l = d->layout;
	int rc = 0;

	if (d->role == LM_ROLE_REFLECTOR) {
		for (size_t i = 0; i < l->nreflectors; i++)
			if (l->reflectors[i].id != d->id)
				rc |= lm_evnode_add_peer(d->node,
							 l->reflectors[i].id,
							 &l->reflectors[i].addr);
		for (size_t i = 0; i < l->nclusters; i++)
			if (strcmp(l->reflectors[l->clusters[i].reflector_index]
					   .name,
				   d->name) == 0)
				rc |= lm_evnode_add_peer(d->node,
							 l->clusters[i].id,
							 &l->clusters[i].addr);
	} else {
		const struct lm_cluster_cfg *c = lm_layout_cluster(l, d->name);
		const struct lm_reflector_cfg *r =
			&l->reflectors[c->reflector_index];

		rc = lm_evnode_add_peer(d->node, r->id, &r->addr);
	}
	return rc;
}

lm_daemon *lm_daemon_create(struct event_base *base,
			    const struct lm_layout *layout, enum lm_role role,
			    const char *name, char *err, size_t errlen)
{
	struct timeval every = { LM_DAEMON_KEEPALIVE_US / 1000000,
				 LM_DAEMON_KEEPALIVE_US % 1000000 };
	struct lm_evnode_callbacks cbs = {
		.deliver = lm_daemon_deliver,
		.peer_event = lm_daemon_peer_event,
	};
	struct lm_rel_config rcfg;
	lm_daemon *d = calloc(1, sizeof(*d));

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->layout = layout;
	d->role = role;
	d->started_us = lm_now_us();
	d->ndaemons = layout->nreflectors + layout->nclusters;
	d->peers = calloc(d->ndaemons + 1, sizeof(*d->peers));
	d->abort_ev = event_new(base, -1, 0, lm_daemon_on_abort_ev, d);
	d->background_ev = evtimer_new(base, lm_daemon_on_background, d);
	d->held_ev = evtimer_new(base, lm_daemon_backlog_retry, d);
	d->pulse_ev = evtimer_new(base, lm_daemon_on_pulse, d);
	if (!d->peers || !d->abort_ev || !d->background_ev || !d->held_ev ||
	    !d->pulse_ev) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (lm_daemon_find_self(d, name, err, errlen))
		goto fail;
	if (layout->auth && !(d->auth = lm_auth_create(layout->key))) {
		snprintf(err, errlen, "cannot initialise authentication");
		goto fail;
	}
	lm_link_config(layout,
		       role == LM_ROLE_REFLECTOR ? LM_LEVEL_CLUSTER
						 : LM_LEVEL_CLIENT,
		       d->id, d->auth, &rcfg);
	d->node = lm_evnode_create(base, &d->addr, &rcfg,
				   lm_loss_active(&layout->faults)
					   ? &layout->faults
					   : NULL,
				   &cbs, d, err, errlen);
	if (!d->node)
		goto fail;
	if (lm_daemon_declare_peers(d)) {
		snprintf(err, errlen, "cannot declare the layout's peers");
		goto fail;
	}
	d->keepalive_ev = event_new(base, -1, EV_PERSIST, lm_daemon_keepalive,
				    d);
	if (!d->keepalive_ev || event_add(d->keepalive_ev, &every) < 0) {
		snprintf(err, errlen, "cannot arm the keepalive timer");
		goto fail;
	}
	return d;
fail:
	lm_daemon_destroy(d);
	return NULL;
}

void lm_daemon_destroy(lm_daemon *d)
{
	if (!d)
		return;
	if (d->keepalive_ev)
		event_free(d->keepalive_ev);
	if (d->abort_ev)
		event_free(d->abort_ev);
	if (d->background_ev)
		event_free(d->background_ev);
	if (d->held_ev)
		event_free(d->held_ev);
	if (d->pulse_ev)
		event_free(d->pulse_ev);
	if (d->watch_ev)
		event_free(d->watch_ev);
	lm_daemon_backlog_free(d);
	if (d->machine)
		d->proto->destroy(d->machine);
	free(d->scratch);
	free(d->notices);
	free(d->attached);
	free(d->peers);
	lm_stats_destroy(d->reply_set);
	lm_evnode_destroy(d->node);
	lm_auth_destroy(d->auth);
	free(d);
}

lm_evnode *lm_daemon_node(lm_daemon *d)
{
	return d->node;
}

const struct sockaddr_in *lm_daemon_addr(const lm_daemon *d)
{
	return &d->addr;
}
