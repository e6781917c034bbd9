/* The daemon shell (see daemon.h): everything reflector and lemuriad share
 * before their own protocols come in, running as a service included
 * (detaching, pidfile, log file or syslog, SIGHUP). */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "loss.h"
#include "lm_error.h"
#include "mem.h"
#include "pidfile.h"
#include "stats.h"
#include "udp.h"

/* Per link level: what the protocol path moved, in whole messages. */
enum lm_daemon_link_counter {
	LM_DAEMON_MSGS_SENT,
	LM_DAEMON_MSGS_RECEIVED,
	LM_DAEMON_BYTES_SENT,
	LM_DAEMON_BYTES_RECEIVED,
	LM_DAEMON_LINK_COUNTER_COUNT
};

static const char *const lm_daemon_link_names[LM_DAEMON_LINK_COUNTER_COUNT] = {
	[LM_DAEMON_MSGS_SENT] = "msgs_sent",
	[LM_DAEMON_MSGS_RECEIVED] = "msgs_received",
	[LM_DAEMON_BYTES_SENT] = "bytes_sent",
	[LM_DAEMON_BYTES_RECEIVED] = "bytes_received",
};

/* What a daemon knows of a peer daemon's layout (see "Layout check"). */
enum lm_daemon_layout_state {
	LM_DAEMON_LAYOUT_UNKNOWN,   /* no hash from this session of it yet */
	LM_DAEMON_LAYOUT_SAME,      /* its hash is ours */
	LM_DAEMON_LAYOUT_DIFFERENT, /* its messages are refused */
	LM_DAEMON_LAYOUT_STATE_COUNT
};

/* A message waiting for room in its peer's send queue (the backlog,
 * daemon.h), encoded. */
struct lm_daemon_held {
	struct lm_daemon_held *next;
	uint16_t node;
	uint16_t type;
	enum lm_rel_msg_kind kind;
	uint32_t req_id;
	uint64_t run;
	size_t len;
	uint8_t data[];
};

struct lm_daemon_peer {
	bool hash_sent;       /* ours went to this session of it */
	enum lm_daemon_layout_state layout;
	uint64_t hash;        /* its hash, once known */
	uint64_t sent_run;    /* run of our last message to it */
	uint64_t aborted_run; /* newest run aborted because of it */
	uint64_t abort_pending; /* run to abort from abort_ev */
};

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
	uint64_t link[LM_LEVEL_COUNT][LM_DAEMON_LINK_COUNTER_COUNT];
	uint64_t run;             /* newest run id seen in a DSM message */
	/* Clients of the run that were let in (JOIN_OK 0) and have not left
	 * or been lost: one byte per rank (lemuriad only). */
	uint8_t *attached;
	uint32_t nattached;
	lm_stats_set *reply_set;  /* built for each STATS request */
	enum lm_role role;
	char name[LM_NAME_MAX];
	uint16_t id;
	struct sockaddr_in addr;
	uint64_t started_us;
	lm_auth *auth;
	lm_evnode *node;
	struct event *keepalive_ev;
	uint64_t keepalives;      /* keepalive PINGs sent */
	/* Daemons are nodes 1 .. ndaemons; indexed by node id. */
	struct lm_daemon_peer *peers;
	size_t ndaemons;
	struct event *abort_ev;   /* runs lm_daemon_on_abort_ev */
	/* The backlog, oldest first, and per node id (up to the last
	 * client's) how many of its messages are in it. */
	struct lm_daemon_held *held, *held_tail;
	size_t held_bytes;
	uint32_t *held_of;
	size_t held_nodes;        /* entries of held_of */
	size_t held_peers;        /* nodes with messages in the backlog */
	struct event *held_ev;    /* retries the backlog */
	/* A message that could not be sent aborts its run (daemon.h): the
	 * run, the node it was for and why, for abort_ev. */
	uint64_t lost_run, lost_aborted_run;
	uint16_t lost_node;
	char lost_reason[LM_MSG_REASON_MAX];
	struct event *background_ev; /* runs proto->background */
	bool background_armed;
};

/* Long options without a short form. */
enum { LM_OPT_SYSLOG = 256, LM_OPT_LOG_FILE };

static void lm_daemon_usage(const char *prog, FILE *out)
{
	fprintf(out,
		"usage: %s -c LAYOUT -n NAME [-l LEVEL] [-d] [-p PIDFILE]\n"
		"       %*s [--syslog | --log-file FILE]\n"
		"  -c, --config FILE     the layout (INI)\n"
		"  -n, --name NAME       this daemon's section name in the "
		"layout\n"
		"  -l, --log-level LEVEL error|warn|info|debug (default info)\n"
		"  -d, --daemon          detach once bound; logs to syslog "
		"unless\n"
		"                        --log-file is given\n"
		"  -p, --pidfile FILE    write the daemon's pid to FILE "
		"(removed\n"
		"                        at exit; refused while FILE names a "
		"live\n"
		"                        process)\n"
		"      --syslog          log to syslog, facility daemon\n"
		"      --log-file FILE   append the log to FILE; SIGHUP "
		"reopens it\n",
		prog, (int)strlen(prog), "");
}

/* The option getopt stopped at, as the user typed it: "-x" for a short
 * one, else the whole word (a long option, maybe with "=value"). */
static const char *lm_daemon_optname(char **argv, int optchar, char *buf)
{
	const char *word = argv[optind - 1];

	if (optchar > 0 && optchar < 256 && strncmp(word, "--", 2) != 0) {
		buf[0] = '-';
		buf[1] = (char)optchar;
		buf[2] = '\0';
		return buf;
	}
	return word;
}

static int lm_daemon_parse(int argc, char **argv, const char *prog,
			   struct lm_daemon_opts *opts, FILE *out)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "daemon", no_argument, NULL, 'd' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "syslog", no_argument, NULL, LM_OPT_SYSLOG },
		{ "log-file", required_argument, NULL, LM_OPT_LOG_FILE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char sopt[3];
	int c;

	memset(opts, 0, sizeof(*opts));
	opts->level = LM_LOG_INFO;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":c:n:l:dp:h", longopts, NULL)) !=
	       -1) {
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
		case 'd':
			opts->detach = true;
			break;
		case 'p':
			opts->pidfile = optarg;
			break;
		case LM_OPT_SYSLOG:
			opts->syslog = true;
			break;
		case LM_OPT_LOG_FILE:
			opts->log_file = optarg;
			break;
		case 'h':
			lm_daemon_usage(prog, out);
			return 1;
		case ':':
			fprintf(out, "%s: option %s needs a value; try '%s "
				"--help'\n",
				prog, lm_daemon_optname(argv, optopt, sopt),
				prog);
			return 2;
		default:
			fprintf(out, "%s: unknown option %s; try '%s --help'\n",
				prog, lm_daemon_optname(argv, optopt, sopt),
				prog);
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
	if (opts->pidfile && !opts->pidfile[0]) {
		fprintf(out, "%s: -p needs a file name, not \"\"\n", prog);
		return 2;
	}
	if (opts->log_file && !opts->log_file[0]) {
		fprintf(out, "%s: --log-file needs a file name, not \"\"\n",
			prog);
		return 2;
	}
	if (opts->syslog && opts->log_file) {
		fprintf(out,
			"%s: --syslog and --log-file \"%s\" exclude each "
			"other\n",
			prog, opts->log_file);
		return 2;
	}
	/* A detached daemon has no stderr: its log must go somewhere. */
	if (opts->detach && !opts->log_file)
		opts->syslog = true;
	return 0;
}

int lm_daemon_parse_args(int argc, char **argv, const char *prog,
			 struct lm_daemon_opts *opts, FILE *out)
{
	int saved = opterr;
	int rc;

	opterr = 0; /* our own messages, on `out` */
	rc = lm_daemon_parse(argc, argv, prog, opts, out);
	opterr = saved;
	return rc;
}

void lm_daemon_rel_config(const struct lm_layout *layout, enum lm_level level,
			  uint16_t self_id, const lm_auth *auth,
			  struct lm_rel_config *cfg)
{
	lm_rel_config_default(cfg, self_id);
	cfg->transport = layout->transport[level];
	cfg->auth = auth;
}

void lm_daemon_tool_rel_config(const struct lm_layout *layout,
			       uint16_t self_id, const lm_auth *auth,
			       struct lm_rel_config *cfg)
{
	struct lm_transport_cfg *t = &cfg->transport;

	lm_daemon_rel_config(layout, LM_LEVEL_CLIENT, self_id, auth, cfg);
	t->max_retries = 4;
	t->rto_initial_us = 50000;
	if (t->rto_initial_us < t->rto_min_us)
		t->rto_initial_us = t->rto_min_us;
	if (t->rto_initial_us > t->rto_max_us)
		t->rto_initial_us = t->rto_max_us;
	t->ack_delay_us = 0;
}

/* Counts one message of `len` bytes to or from `peer` (`sent` or not);
 * control tools are not counted. */
static void lm_daemon_count(lm_daemon *d, uint16_t peer, bool sent,
			    size_t len)
{
	int level = lm_stats_link_level(d->layout, d->id, peer);
	uint64_t *c;

	if (level < 0)
		return;
	c = d->link[level];
	c[sent ? LM_DAEMON_MSGS_SENT : LM_DAEMON_MSGS_RECEIVED]++;
	c[sent ? LM_DAEMON_BYTES_SENT : LM_DAEMON_BYTES_RECEIVED] += len;
}

/* The rank of client node `node`, or -1 when it is not a client. */
static int64_t lm_daemon_client_rank(const lm_daemon *d, uint16_t node)
{
	const struct lm_layout *l = d->layout;
	uint32_t first = (uint32_t)(l->nreflectors + l->nclusters + 1);

	if (node < first || node - first >= l->nprocs)
		return -1;
	return node - first;
}

static void lm_daemon_attach(lm_daemon *d, uint16_t node, bool on)
{
	int64_t rank = lm_daemon_client_rank(d, node);

	if (!d->attached || rank < 0 || d->attached[rank] == on)
		return;
	d->attached[rank] = on;
	if (on)
		d->nattached++;
	else
		d->nattached--;
}

/* A newer run makes the daemon forget the previous one (docs/dsm.md),
 * and with it who was attached. */
static void lm_daemon_see_run(lm_daemon *d, uint64_t run)
{
	if (run <= d->run)
		return;
	d->run = run;
	if (d->attached)
		memset(d->attached, 0, d->layout->nprocs);
	d->nattached = 0;
}

/* ------------------------------------------------------------------ */
/* Layout check.  Every process of a run must read the same layout file:
 * node ids, page numbers and cluster sizes all come from it.  Clients
 * show its hash in JOIN; daemons show it to each other in their one-way
 * PINGs.  A daemon sends one to a peer daemon before its first message
 * to each session of the peer, and answers the first one it gets with
 * its own, so both ends know before any DSM message is handled (a
 * channel delivers in order).  A peer whose hash differs is logged (an
 * error), counted, and its messages are refused both ways until a new
 * session of it shows the same hash; the run in progress, and each later
 * run that needs the peer, is aborted here as though the peer had sent
 * ABORT, so the clients fail with that reason instead of waiting. */

/* `node` is one of the daemons this one exchanges messages with. */
static bool lm_daemon_is_peer_daemon(const lm_daemon *d, uint16_t node)
{
	return d->peers && node >= 1 && node <= d->ndaemons && node != d->id;
}

static bool lm_daemon_refused(const lm_daemon *d, uint16_t node)
{
	return lm_daemon_is_peer_daemon(d, node) &&
	       d->peers[node].layout == LM_DAEMON_LAYOUT_DIFFERENT;
}

/* Where the layout puts daemon `node`. */
static const struct sockaddr_in *lm_daemon_peer_addr(const lm_daemon *d,
						     uint16_t node)
{
	const struct lm_layout *l = d->layout;

	if (node <= l->nreflectors)
		return &l->reflectors[node - 1].addr;
	return &l->clusters[node - 1 - l->nreflectors].addr;
}

/* "reflector r0 (node 1)", "lemuriad c1 (node 3)", "node 9". */
static const char *lm_daemon_node_name(const lm_daemon *d, uint16_t node,
				       char *buf, size_t len)
{
	const struct lm_layout *l = d->layout;

	if (node >= 1 && node <= l->nreflectors)
		snprintf(buf, len, "reflector %s (node %u)",
			 l->reflectors[node - 1].name, node);
	else if (node > l->nreflectors && node <= d->ndaemons)
		snprintf(buf, len, "lemuriad %s (node %u)",
			 l->clusters[node - 1 - l->nreflectors].name, node);
	else if (lm_daemon_client_rank(d, node) >= 0)
		snprintf(buf, len, "rank %lld (node %u)",
			 (long long)lm_daemon_client_rank(d, node), node);
	else
		snprintf(buf, len, "node %u", node);
	return buf;
}

static void lm_daemon_send_hash(lm_daemon *d, uint16_t peer)
{
	uint8_t ping[LM_MSG_PREFIX + 8];
	int len = lm_msg_encode_ping_hash(d->layout->hash, ping, sizeof(ping));

	if (len > 0 && lm_evnode_send(d->node, peer, ping, (size_t)len) == 0)
		d->peers[peer].hash_sent = true;
}

/* Asks for run `run` to be aborted because of `peer` (once per run).  The
 * ABORT goes to the protocol from an event of its own: this may be called
 * while the protocol is in the middle of handling a message. */
static void lm_daemon_mismatch_abort(lm_daemon *d, uint16_t peer,
				     uint64_t run)
{
	struct lm_daemon_peer *p = &d->peers[peer];

	if (!d->machine || run == 0 || run <= p->aborted_run ||
	    run <= p->abort_pending)
		return;
	p->abort_pending = run;
	event_active(d->abort_ev, 0, 0);
}

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

/* A PING from `peer` showed its layout hash. */
static void lm_daemon_check_layout(lm_daemon *d, uint16_t peer,
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

/* Grows the scratch buffer to `need` bytes; NULL when out of memory. */
static uint8_t *lm_daemon_scratch(lm_daemon *d, size_t need)
{
	if (need > d->scratch_cap) {
		uint8_t *grown = realloc(d->scratch, need);

		if (!grown)
			return NULL;
		d->scratch = grown;
		d->scratch_cap = need;
	}
	return d->scratch;
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

static void lm_daemon_on_stats(lm_daemon *d, const struct lm_rel_msg *m)
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
	lm_mem_follow_heap(); /* what the heap gained, before it is used */
}

/* ------------------------------------------------------------------ */
/* Backlog (daemon.h).  A channel delivers in order and the protocols
 * count on it, so once a message to a node waits, every later one to
 * that node waits behind it; messages to other nodes go on. */

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
static void lm_daemon_backlog_retry(evutil_socket_t fd, short what, void *arg)
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
static void lm_daemon_backlog_drop(lm_daemon *d, uint16_t node)
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

static void lm_daemon_peer_event(void *ctx, uint16_t peer,
				 enum lm_rel_peer_event ev)
{
	lm_daemon *d = ctx;

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
	lm_log_info("%s: node %u %s", d->name, peer,
		    ev == LM_REL_PEER_UNREACHABLE ? "is unreachable"
						  : "restarted");
	if (d->machine && d->proto->peer_lost)
		d->proto->peer_lost(d->machine, peer);
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

static void lm_daemon_out_later(void *ctx)
{
	lm_daemon_arm_background(ctx);
}

int lm_daemon_start_protocol(lm_daemon *d,
			     const struct lm_daemon_protocol *proto,
			     char *err, size_t errlen)
{
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

static void lm_daemon_keepalive(evutil_socket_t fd, short what, void *arg)
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
static void lm_daemon_announce(lm_daemon *d)
{
	lm_daemon_ping_peers(d, true);
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
	if (!d->peers || !d->abort_ev || !d->background_ev || !d->held_ev) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
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
	while (d->held) {
		struct lm_daemon_held *h = d->held;

		d->held = h->next;
		free(h);
	}
	free(d->held_of);
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

/* ------------------------------------------------------------------ */
/* Log destinations.  Logging is process-wide (log.h), so is this state;
 * the sinks run under log.c's mutex, and a reopen swaps the descriptor
 * with one dup3() so a concurrent line lands in the old or the new file,
 * never nowhere. */

static struct {
	int fd;              /* the log file, or -1 */
	bool onto_stdio;     /* stdout and stderr follow the file */
	bool syslog;         /* openlog() done */
	char path[PATH_MAX];
	char ident[64];      /* the daemon's name, on every line */
	char prog[64];       /* syslog keeps a pointer to its ident */
} lm_daemon_log = { .fd = -1 };

static const char *const lm_daemon_level_names[LM_LOG_LEVEL_COUNT] = {
	"error", "warn", "info", "debug"
};

static void lm_daemon_file_sink(void *ctx, enum lm_log_level level,
				const char *msg)
{
	char stamp[32], line[1280];
	struct timespec ts;
	struct tm tm;
	size_t off = 0;
	int len;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
	len = snprintf(line, sizeof(line), "%s.%03ld %s: %s: %s\n", stamp,
		       ts.tv_nsec / 1000000, lm_daemon_log.ident,
		       lm_daemon_level_names[level], msg);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof(line)) { /* cut, but keep the newline */
		len = (int)sizeof(line) - 1;
		line[len - 1] = '\n';
	}
	/* One write per line: with O_APPEND the line is never split by the
	 * writes of another process sharing the file. */
	while (off < (size_t)len) {
		ssize_t n = write(lm_daemon_log.fd, line + off,
				  (size_t)len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* nowhere left to report it */
		off += (size_t)n;
	}
}

int lm_daemon_syslog_priority(enum lm_log_level level)
{
	switch (level) {
	case LM_LOG_ERROR:
		return LOG_ERR;
	case LM_LOG_WARN:
		return LOG_WARNING;
	case LM_LOG_INFO:
		return LOG_INFO;
	default:
		return LOG_DEBUG;
	}
}

static void lm_daemon_syslog_sink(void *ctx, enum lm_log_level level,
				  const char *msg)
{
	(void)ctx;
	syslog(lm_daemon_syslog_priority(level), "%s: %s",
	       lm_daemon_log.ident, msg);
}

static int lm_daemon_log_open_file(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

int lm_daemon_log_to_file(const char *path, const char *ident, char *err,
			  size_t errlen)
{
	int fd;

	if (strlen(path) >= sizeof(lm_daemon_log.path)) {
		snprintf(err, errlen, "log file name too long");
		return LM_EIO;
	}
	fd = lm_daemon_log_open_file(path);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open log file %s: %s", path,
			 strerror(errno));
		return LM_EIO;
	}
	lm_daemon_log_close();
	lm_daemon_log.fd = fd;
	snprintf(lm_daemon_log.path, sizeof(lm_daemon_log.path), "%s", path);
	snprintf(lm_daemon_log.ident, sizeof(lm_daemon_log.ident), "%s",
		 ident);
	lm_log_set_sink(lm_daemon_file_sink, NULL);
	return 0;
}

int lm_daemon_log_reopen(char *err, size_t errlen)
{
	int fd;

	if (lm_daemon_log.fd < 0)
		return LM_ENOENT;
	fd = lm_daemon_log_open_file(lm_daemon_log.path);
	if (fd < 0) {
		snprintf(err, errlen, "cannot reopen log file %s: %s",
			 lm_daemon_log.path, strerror(errno));
		return LM_EIO;
	}
	if (dup3(fd, lm_daemon_log.fd, O_CLOEXEC) < 0 ||
	    (lm_daemon_log.onto_stdio &&
	     (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0))) {
		snprintf(err, errlen, "cannot reopen log file %s: %s",
			 lm_daemon_log.path, strerror(errno));
		close(fd);
		return LM_EIO;
	}
	close(fd);
	return 0;
}

void lm_daemon_log_to_syslog(const char *prog, const char *name)
{
	lm_daemon_log_close();
	snprintf(lm_daemon_log.prog, sizeof(lm_daemon_log.prog), "%s", prog);
	snprintf(lm_daemon_log.ident, sizeof(lm_daemon_log.ident), "%s",
		 name);
	openlog(lm_daemon_log.prog, LOG_PID, LOG_DAEMON);
	lm_daemon_log.syslog = true;
	lm_log_set_sink(lm_daemon_syslog_sink, NULL);
}

void lm_daemon_log_close(void)
{
	lm_log_set_sink(NULL, NULL);
	if (lm_daemon_log.fd >= 0)
		close(lm_daemon_log.fd);
	lm_daemon_log.fd = -1;
	lm_daemon_log.onto_stdio = false;
	if (lm_daemon_log.syslog)
		closelog();
	lm_daemon_log.syslog = false;
}

/* A detached daemon's stdin reads /dev/null; its stdout and stderr go to
 * the log file, so that whatever bypasses the logger (a sanitizer report,
 * a library's complaint) is kept, or to /dev/null without a file. */
static int lm_daemon_log_capture_stdio(void)
{
	int null = open("/dev/null", O_RDWR);
	int out = lm_daemon_log.fd >= 0 ? lm_daemon_log.fd : null;
	int rc = 0;

	if (null < 0)
		return LM_EIO;
	if (dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
	    dup2(out, STDERR_FILENO) < 0)
		rc = LM_EIO;
	if (null > STDERR_FILENO)
		close(null);
	lm_daemon_log.onto_stdio = lm_daemon_log.fd >= 0;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Detaching.  The original process waits on a pipe until the daemon
 * says it runs (one '+') or why it cannot ('-' and the message), so
 * errors found after the fork (the pidfile, say) still reach the
 * terminal and the exit status, and a script that starts the daemon
 * finds the pidfile written when the command returns. */

#define LM_DAEMON_READY_TIMEOUT_MS 10000

static int lm_daemon_await_ready(const char *prog, pid_t child, int fd)
{
	char msg[1024];
	size_t len = 0;
	uint64_t deadline = lm_now_us() + LM_DAEMON_READY_TIMEOUT_MS * 1000ULL;

	while (len < sizeof(msg) - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = lm_now_us();
		ssize_t n;

		if (now >= deadline ||
		    poll(&p, 1, (int)((deadline - now) / 1000) + 1) == 0) {
			fprintf(stderr,
				"%s: the daemon did not report within %d s\n",
				prog, LM_DAEMON_READY_TIMEOUT_MS / 1000);
			return 1;
		}
		n = read(fd, msg + len, sizeof(msg) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	waitpid(child, NULL, 0); /* the intermediate child, gone by now */
	msg[len] = '\0';
	if (len > 0 && msg[0] == '+')
		return 0;
	if (len > 1 && msg[0] == '-')
		fprintf(stderr, "%s\n", msg + 1);
	else
		fprintf(stderr, "%s: the daemon exited during start-up\n",
			prog);
	return 1;
}

/* Sends the outcome of the start-up to the waiting process: NULL for
 * "running", else the message.  Closes *fd. */
static void lm_daemon_report(int *fd, const char *msg)
{
	char buf[1024];
	int len = snprintf(buf, sizeof(buf), "%c%s", msg ? '-' : '+',
			   msg ? msg : "");
	ssize_t n;

	if (*fd < 0)
		return;
	if (len >= (int)sizeof(buf))
		len = (int)sizeof(buf) - 1;
	do
		n = write(*fd, buf, (size_t)len);
	while (n < 0 && errno == EINTR);
	close(*fd);
	*fd = -1;
}

/* Double fork: the first child leaves the terminal's session with
 * setsid(), the second is no session leader and so can never acquire a
 * controlling terminal again.  Returns 0 in the daemon with *ready_fd to
 * report through; the original process does not return.  LM_EIO with
 * the reason in err if nothing could be forked. */
static int lm_daemon_detach(const char *prog, int *ready_fd, char *err,
			    size_t errlen)
{
	char why[256];
	int p[2];
	pid_t pid;

	fflush(NULL); /* or buffered output would be written twice */
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot detach: pipe: %s",
			 strerror(errno));
		return LM_EIO;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot detach: fork: %s",
			 strerror(errno));
		close(p[0]);
		close(p[1]);
		return LM_EIO;
	}
	if (pid > 0) {
		close(p[1]);
		/* _exit: the daemon owns the socket, the pidfile and the
		 * log now; nothing here may clean them up. */
		_exit(lm_daemon_await_ready(prog, pid, p[0]));
	}
	close(p[0]);
	*ready_fd = p[1];
	if (setsid() < 0) {
		snprintf(why, sizeof(why), "%s: cannot detach: setsid: %s",
			 prog, strerror(errno));
		lm_daemon_report(ready_fd, why);
		_exit(1);
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, sizeof(why), "%s: cannot detach: fork: %s",
			 prog, strerror(errno));
		lm_daemon_report(ready_fd, why);
		_exit(1);
	}
	if (pid > 0)
		_exit(0);
	/* Keep no directory busy (the layout and log paths are absolute). */
	if (chdir("/") || lm_daemon_log_capture_stdio()) {
		snprintf(why, sizeof(why), "%s: cannot detach: %s", prog,
			 strerror(errno));
		lm_daemon_report(ready_fd, why);
		_exit(1);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The program. */

static void lm_daemon_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	lm_log_info("signal %d: shutting down", (int)sig);
	event_base_loopexit(arg, NULL);
}

static void lm_daemon_on_hup(evutil_socket_t sig, short what, void *arg)
{
	char err[PATH_MAX + 64];
	int rc = lm_daemon_log_reopen(err, sizeof(err));

	(void)sig;
	(void)what;
	(void)arg;
	if (rc == 0)
		lm_log_info("reopened logs");
	else if (rc == LM_ENOENT)
		lm_log_info("SIGHUP: no log file to reopen");
	else
		lm_log_error("%s", err);
}

/* Paths used after chdir("/") must not be relative. */
static int lm_daemon_abspath(const char *prog, const char *path, char *out,
			     size_t outlen)
{
	char cwd[PATH_MAX];
	int n;

	if (path[0] == '/') {
		n = snprintf(out, outlen, "%s", path);
	} else if (getcwd(cwd, sizeof(cwd))) {
		n = snprintf(out, outlen, "%s/%s", cwd, path);
	} else {
		fprintf(stderr, "%s: cannot resolve \"%s\": getcwd: %s\n", prog,
			path, strerror(errno));
		return LM_EIO;
	}
	if (n < 0 || (size_t)n >= outlen) {
		fprintf(stderr, "%s: path \"%s\" is too long\n", prog, path);
		return LM_EINVAL;
	}
	return 0;
}

/* A start-up failure: to the terminal, or through the pipe once
 * detached (and then into the log too, for whoever reads it later). */
static void lm_daemon_start_failed(int *ready_fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void lm_daemon_start_failed(int *ready_fd, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (*ready_fd < 0) {
		fprintf(stderr, "%s\n", msg);
		return;
	}
	lm_log_error("%s", msg);
	lm_daemon_report(ready_fd, msg);
}

int lm_daemon_main(int argc, char **argv, enum lm_role role,
		   const struct lm_daemon_protocol *proto)
{
	static const int stop_signals[] = { SIGTERM, SIGINT };
	const char *prog = role == LM_ROLE_REFLECTOR ? "reflector" : "lemuriad";
	struct lm_daemon_opts opts;
	struct lm_layout *layout = NULL;
	struct event_base *base = NULL;
	struct event *sigs[3] = { NULL, NULL, NULL };
	lm_daemon *d = NULL;
	char err[PATH_MAX + 512], where[32];
	char pidfile[PATH_MAX] = "", log_file[PATH_MAX] = "";
	bool own_pidfile = false, logging = false;
	int ready_fd = -1, rc;
	pid_t owner;

	/* A daemon allocates and frees megabytes per barrier (messages,
	 * reassembly, deltas).  glibc would map each large block afresh
	 * and return freed heap tops, so every barrier paid page faults on
	 * zeroed memory; keeping it costs no more than the peak, which I5
	 * bounds anyway (docs/performance.md).  The heap grows
	 * LM_DAEMON_HEAP_PAD beyond each need, and each message handled
	 * gives the pages it gained (lm_mem_follow_heap): a page then costs
	 * part of one system call instead of a fault. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_TOP_PAD, LM_DAEMON_HEAP_PAD);
	lm_mem_setup_from_env();
	lm_mem_follow_heap();
	rc = lm_daemon_parse_args(argc, argv, prog, &opts,
				  stderr);
	if (rc)
		return rc == 1 ? 0 : 2;
	lm_log_set_ident(prog);
	lm_log_set_level(opts.level);
	if ((opts.pidfile && lm_daemon_abspath(prog, opts.pidfile, pidfile,
					       sizeof(pidfile))) ||
	    (opts.log_file && lm_daemon_abspath(prog, opts.log_file, log_file,
						sizeof(log_file))))
		return 2;
	if (lm_layout_load(opts.layout, &layout, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	rc = 1;
	/* Before binding, so that a second copy is told about the pidfile
	 * and not about a busy port. */
	if (pidfile[0] &&
	    lm_pidfile_check(pidfile, &owner, err, sizeof(err))) {
		fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
		goto out;
	}
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
	if (log_file[0]) {
		if (lm_daemon_log_to_file(log_file, opts.name, err,
					  sizeof(err))) {
			fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
			goto out;
		}
		logging = true;
	} else if (opts.syslog) {
		lm_daemon_log_to_syslog(prog, opts.name);
		logging = true;
	}
	if (opts.detach) {
		if (lm_daemon_detach(prog, &ready_fd, err, sizeof(err))) {
			fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
			goto out;
		}
		/* The kernel's event queue (epoll) is shared with the
		 * parent until libevent makes its own. */
		if (event_reinit(base)) {
			lm_daemon_start_failed(&ready_fd,
					       "%s %s: cannot reinitialise the "
					       "event loop after fork",
					       prog, opts.name);
			goto out;
		}
	}
	if (pidfile[0]) {
		if (lm_pidfile_acquire(pidfile, &owner, err, sizeof(err))) {
			lm_daemon_start_failed(&ready_fd, "%s %s: %s", prog,
					       opts.name, err);
			goto out;
		}
		own_pidfile = true;
	}
	for (size_t i = 0; i < 3; i++) {
		if (i < 2)
			sigs[i] = evsignal_new(base, stop_signals[i],
					       lm_daemon_on_signal, base);
		else
			sigs[i] = evsignal_new(base, SIGHUP, lm_daemon_on_hup,
					       NULL);
		if (!sigs[i] || evsignal_add(sigs[i], NULL)) {
			lm_daemon_start_failed(&ready_fd,
					       "%s %s: cannot install signal "
					       "handlers",
					       prog, opts.name);
			goto out;
		}
	}
	lm_log_info("%s %s listening on %s (node %u)%s", prog, opts.name,
		    lm_addr_str(&d->addr, where, sizeof(where)), d->id,
		    opts.detach ? ", detached" : "");
	lm_daemon_announce(d);
	lm_daemon_report(&ready_fd, NULL);
	rc = event_base_dispatch(base) < 0 ? 1 : 0;
	lm_log_info("stopped");
out:
	for (size_t i = 0; i < 3; i++)
		if (sigs[i])
			event_free(sigs[i]);
	lm_daemon_destroy(d);
	if (base)
		event_base_free(base);
	if (own_pidfile)
		lm_pidfile_release(pidfile);
	if (logging)
		lm_daemon_log_close();
	lm_layout_free(layout);
	return rc;
}
