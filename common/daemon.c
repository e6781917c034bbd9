/* The daemon shell (see daemon.h): everything reflector and lemuriad share
 * before their own protocols come in. */
#include "daemon.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "clock.h"
#include "fault.h"
#include "lm_error.h"
#include "udp.h"

struct lm_daemon {
	const struct lm_layout *layout;
	const struct lm_daemon_protocol *proto;
	void *machine;
	struct lm_msg_out out;
	uint8_t *scratch;         /* encoding buffer, grown on demand */
	size_t scratch_cap;
	struct lm_notice *notices; /* decoding buffer: one per page */
	size_t notice_cap;
	struct lm_daemon_stats stats;
	enum lm_role role;
	char name[LM_NAME_MAX];
	uint16_t id;
	struct sockaddr_in addr;
	uint64_t started_us;
	lm_auth *auth;
	lm_evnode *node;
};

int lm_daemon_parse_args(int argc, char **argv, const char *prog,
			 struct lm_daemon_opts *opts, FILE *out)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	memset(opts, 0, sizeof(*opts));
	opts->level = LM_LOG_INFO;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:n:l:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			opts->layout = optarg;
			break;
		case 'n':
			opts->name = optarg;
			break;
		case 'l':
			if (lm_log_parse_level(optarg, &opts->level)) {
				fprintf(out,
					"%s: log level \"%s\" is not one of "
					"error, warn, info, debug\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'h':
			fprintf(out,
				"usage: %s -c LAYOUT -n NAME [-l LEVEL]\n"
				"  -c, --config FILE     the layout (INI)\n"
				"  -n, --name NAME       this daemon's section "
				"name in the layout\n"
				"  -l, --log-level LEVEL error|warn|info|debug "
				"(default info)\n",
				prog);
			return 1;
		default:
			fprintf(out, "%s: try '%s --help'\n", prog, prog);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(out, "%s: unexpected argument \"%s\"\n", prog,
			argv[optind]);
		return 2;
	}
	if (!opts->layout || !opts->name) {
		fprintf(out, "%s: both -c LAYOUT and -n NAME are required\n",
			prog);
		return 2;
	}
	return 0;
}

void lm_daemon_rel_config(const struct lm_layout *layout, enum lm_level level,
			  uint16_t self_id, const lm_auth *auth,
			  struct lm_rel_config *cfg)
{
	lm_rel_config_default(cfg, self_id);
	cfg->transport = layout->transport[level];
	cfg->auth = auth;
}

static void lm_daemon_on_ping(lm_daemon *d, const struct lm_rel_msg *m)
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

static void lm_daemon_deliver(void *ctx, const struct lm_rel_msg *m)
{
	lm_daemon *d = ctx;
	int type = lm_msg_type(m->data, m->len);
	struct lm_msg msg;
	int rc;

	if (type == LM_MSG_PING && m->kind == LM_REL_REQUEST) {
		lm_daemon_on_ping(d, m);
		return;
	}
	if (!d->machine) {
		d->stats.msgs_undecodable++;
		lm_log_debug("%s: %s from node %u: no protocol running",
			     d->name, lm_msg_name(type), m->peer);
		return;
	}
	rc = lm_msg_decode(m->data, m->len, &msg, d->notices, d->notice_cap);
	if (rc) {
		/* Dropped and counted; the sender authenticated, so this is
		 * a bug or a version mismatch, not noise. */
		d->stats.msgs_undecodable++;
		lm_log_warn("%s: undecodable message (type %d, %zu bytes) "
			    "from node %u: %s",
			    d->name, type, m->len, m->peer, lm_strerror(rc));
		return;
	}
	d->stats.msgs_handled++;
	d->proto->handle(d->machine, m->peer, m->kind, m->req_id, &msg);
}

static void lm_daemon_peer_event(void *ctx, uint16_t peer,
				 enum lm_rel_peer_event ev)
{
	lm_daemon *d = ctx;

	if (peer == LM_NODE_CONTROL) /* every lemuriactl run is a restart */
		return;
	lm_log_info("%s: node %u %s", d->name, peer,
		    ev == LM_REL_PEER_UNREACHABLE ? "is unreachable"
						  : "restarted");
	if (d->machine && d->proto->peer_lost)
		d->proto->peer_lost(d->machine, peer);
}

/* Encodes m into the scratch buffer; NULL on failure (counted). */
static const uint8_t *lm_daemon_encode(lm_daemon *d, const struct lm_msg *m,
				       size_t *len)
{
	size_t need = lm_msg_encoded_len(m);
	int rc;

	if (need > d->scratch_cap) {
		uint8_t *grown = realloc(d->scratch, need);

		if (!grown) {
			d->stats.sends_failed++;
			return NULL;
		}
		d->scratch = grown;
		d->scratch_cap = need;
	}
	rc = lm_msg_encode(m, d->scratch, d->scratch_cap);
	if (rc < 0) {
		d->stats.sends_failed++;
		lm_log_error("%s: cannot encode %s: %s", d->name,
			     lm_msg_name(m->type), lm_strerror(rc));
		return NULL;
	}
	*len = (size_t)rc;
	return d->scratch;
}

/* Encodes m and hands it to the transport as `kind`; failures are
 * logged and counted (the protocol's own time-outs take it from there). */
static void lm_daemon_emit(lm_daemon *d, uint16_t node,
			   enum lm_rel_msg_kind kind, uint32_t req_id,
			   const struct lm_msg *m)
{
	size_t len;
	const uint8_t *buf = lm_daemon_encode(d, m, &len);
	int rc;

	if (!buf)
		return;
	if (kind == LM_REL_REQUEST)
		rc = lm_evnode_request(d->node, node, req_id, buf, len);
	else if (kind == LM_REL_REPLY)
		rc = lm_evnode_reply(d->node, node, req_id, buf, len);
	else
		rc = lm_evnode_send(d->node, node, buf, len);
	if (rc) {
		d->stats.sends_failed++;
		lm_log_error("%s: %s to node %u not sent: %s", d->name,
			     lm_msg_name(m->type), node, lm_strerror(rc));
	}
}

static void lm_daemon_out_send(void *ctx, uint16_t node,
			       const struct lm_msg *m)
{
	lm_daemon_emit(ctx, node, LM_REL_ONEWAY, 0, m);
}

static void lm_daemon_out_request(void *ctx, uint16_t node, uint32_t req_id,
				  const struct lm_msg *m)
{
	lm_daemon_emit(ctx, node, LM_REL_REQUEST, req_id, m);
}

static void lm_daemon_out_reply(void *ctx, uint16_t node, uint32_t req_id,
				const struct lm_msg *m)
{
	lm_daemon_emit(ctx, node, LM_REL_REPLY, req_id, m);
}

int lm_daemon_start_protocol(lm_daemon *d,
			     const struct lm_daemon_protocol *proto,
			     char *err, size_t errlen)
{
	d->notice_cap = (size_t)(d->layout->shared_size /
				 d->layout->page_size);
	d->notices = calloc(d->notice_cap, sizeof(*d->notices));
	if (!d->notices) {
		snprintf(err, errlen, "out of memory");
		return LM_ENOMEM;
	}
	d->out = (struct lm_msg_out){ lm_daemon_out_send,
				      lm_daemon_out_request,
				      lm_daemon_out_reply };
	d->proto = proto;
	d->machine = proto->create(d->layout, d->name, d->id, &d->out, d,
				   err, errlen);
	return d->machine ? 0 : LM_EINVAL;
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
	if (lm_daemon_find_self(d, name, err, errlen))
		goto fail;
	if (layout->auth && !(d->auth = lm_auth_create(layout->key))) {
		snprintf(err, errlen, "cannot initialise authentication");
		goto fail;
	}
	lm_daemon_rel_config(layout,
			     role == LM_ROLE_REFLECTOR ? LM_LEVEL_CLUSTER
						       : LM_LEVEL_CLIENT,
			     d->id, d->auth, &rcfg);
	d->node = lm_evnode_create(base, &d->addr, &rcfg,
				   lm_fault_cfg_active(&layout->faults)
					   ? &layout->faults
					   : NULL,
				   &cbs, d, err, errlen);
	if (!d->node)
		goto fail;
	if (lm_daemon_declare_peers(d)) {
		snprintf(err, errlen, "cannot declare the layout's peers");
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
	if (d->machine)
		d->proto->destroy(d->machine);
	free(d->scratch);
	free(d->notices);
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

static void lm_daemon_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	lm_log_info("signal %d: shutting down", (int)sig);
	event_base_loopexit(arg, NULL);
}

int lm_daemon_main(int argc, char **argv, enum lm_role role,
		   const struct lm_daemon_protocol *proto)
{
	const char *prog = role == LM_ROLE_REFLECTOR ? "reflector" : "lemuriad";
	struct lm_daemon_opts opts;
	struct lm_layout *layout = NULL;
	struct event_base *base = NULL;
	struct event *sigterm = NULL, *sigint = NULL;
	lm_daemon *d = NULL;
	char err[512], where[32];
	int rc;

	rc = lm_daemon_parse_args(argc, argv, prog, &opts,
				  stderr);
	if (rc)
		return rc == 1 ? 0 : 2;
	lm_log_set_ident(prog);
	lm_log_set_level(opts.level);
	if (lm_layout_load(opts.layout, &layout, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	rc = 1;
	base = event_base_new();
	if (!base) {
		fprintf(stderr, "%s: cannot create the event loop\n", prog);
		goto out;
	}
	d = lm_daemon_create(base, layout, role, opts.name, err, sizeof(err));
	if (!d) {
		fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
		rc = strstr(err, "no [") ? 2 : 1;
		goto out;
	}
	if (proto && lm_daemon_start_protocol(d, proto, err, sizeof(err))) {
		fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
		goto out;
	}
	lm_log_set_ident(opts.name);
	lm_log_info("%s %s listening on %s (node %u)", prog, opts.name,
		    lm_addr_str(&d->addr, where, sizeof(where)), d->id);
	sigterm = evsignal_new(base, SIGTERM, lm_daemon_on_signal, base);
	sigint = evsignal_new(base, SIGINT, lm_daemon_on_signal, base);
	if (!sigterm || !sigint || evsignal_add(sigterm, NULL) ||
	    evsignal_add(sigint, NULL)) {
		fprintf(stderr, "%s: cannot install signal handlers\n", prog);
		goto out;
	}
	rc = event_base_dispatch(base) < 0 ? 1 : 0;
	lm_log_info("stopped");
out:
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	lm_daemon_destroy(d);
	if (base)
		event_base_free(base);
	lm_layout_free(layout);
	return rc;
}
