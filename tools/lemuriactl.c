/* lemuriactl: asks the daemons of a layout how they are.
 *
 *   lemuriactl -c LAYOUT status        one line per daemon: up or down,
 *                                      uptime, clients attached, run
 *   lemuriactl -c LAYOUT -n N ping     round-trip times through the transport
 *   lemuriactl -c LAYOUT stats [--json]  every daemon's counters
 *                                      (tools/runstats.c)
 *
 * Exit status: 0 when every daemon answered, 1 when some did not, 2 on a
 * usage or layout error. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "config.h"
#include "link_config.h"
#include "lm_error.h"
#include "proto.h"
#include "rpc.h"
#include "runstats.h"
#include "stats.h"
#include "udp.h"
#include "version.h"

struct lm_ctl_target {
	const char *name;
	enum lm_role role;
	uint16_t id;
	const struct sockaddr_in *addr;
};

static int lm_ctl_ping_one(const struct lm_layout *l, const lm_auth *auth,
			   uint16_t self, const struct lm_ctl_target *t,
			   int count, int timeout_ms, struct lm_msg_pong *pong,
			   double *median_us, const char **why)
{
	struct lm_rel_config rcfg;
	double *rtts = calloc((size_t)count, sizeof(double));
	uint8_t req[16];
	char err[256];
	lm_rpc *rpc;
	int rc = 0, len = lm_msg_encode_ping(req, sizeof(req));

	lm_link_tool_config(l, self, auth, &rcfg);
	rpc = lm_rpc_create(t->addr, t->id, &rcfg, NULL, err, sizeof(err));
	if (!rpc || !rtts || len < 0) {
		*why = "cannot open a socket";
		rc = LM_EIO;
		goto out;
	}
	for (int i = 0; i < count && rc == 0; i++) {
		uint64_t t0 = lm_now_us();
		void *reply = NULL;
		size_t rlen = 0;

		rc = lm_rpc_call(rpc, req, (size_t)len, &reply, &rlen,
				 timeout_ms);
		rtts[i] = (double)(lm_now_us() - t0);
		if (rc == 0 && lm_msg_decode_pong(reply, rlen, pong) != 0)
			rc = LM_EBADMSG;
		free(reply);
	}
	if (rc == LM_EAUTH) {
		*why = "its answers fail authentication: another secret_file "
		       "than the daemon's";
	} else if (rc) {
		*why = lm_strerror(rc);
	} else {
		for (int i = 1; i < count; i++) /* insertion sort: count is small */
			for (int j = i; j > 0 && rtts[j] < rtts[j - 1]; j--) {
				double x = rtts[j];

				rtts[j] = rtts[j - 1];
				rtts[j - 1] = x;
			}
		*median_us = rtts[count / 2];
	}
out:
	lm_rpc_destroy(rpc);
	free(rtts);
	return rc;
}

/* One daemon's round trips, on a thread of its own (lm_ctl_ping_all). */
struct lm_ctl_ping_job {
	const struct lm_layout *l;
	const lm_auth *auth;
	uint16_t self;
	const struct lm_ctl_target *t;
	int count, timeout_ms;
	bool skip; /* down already: its STATS went unanswered */
	struct lm_msg_pong pong;
	double rtt;
	const char *why;
	int rc;
};

static void *lm_ctl_ping_run(void *arg)
{
	struct lm_ctl_ping_job *j = arg;

	if (!j->skip)
		j->rc = lm_ctl_ping_one(j->l, j->auth, j->self, j->t, j->count,
					j->timeout_ms, &j->pong, &j->rtt,
					&j->why);
	return NULL;
}

/* Every job at once, so that daemons that are down cost the timeout
 * once, not once each.  Several round trips each (-n) are timed one
 * daemon after the other, so that they do not share the CPUs. */
static void lm_ctl_ping_all(struct lm_ctl_ping_job *jobs, size_t n)
{
	if (n && jobs[0].count > 1) {
		for (size_t i = 0; i < n; i++)
			lm_ctl_ping_run(&jobs[i]);
		return;
	}
	lm_runstats_each_at_once(lm_ctl_ping_run, jobs, sizeof(*jobs), n);
}

static void lm_ctl_usage(FILE *out)
{
	fprintf(out,
		"usage: lemuriactl -c LAYOUT [-t SECONDS] [-n COUNT] [-a] "
		"[--json] status|ping|stats\n"
		"  -t SECONDS  how long each daemon has to answer (default 2)\n"
		"  status  which daemons of the layout answer, their uptime,\n"
		"          clients attached and current run\n"
		"  ping    the same, with the median of COUNT round trips\n"
		"  stats   each daemon's main counters per level: messages,\n"
		"          bytes, retransmissions, pages served, barriers,\n"
		"          locks, drops; -a (--all): every counter; --json\n"
		"          (before or after the command): every counter as "
		"JSON\n"
		"  -V, --version  print the version and exit\n"
		"  -h, --help     print this and exit\n");
}

/* Daemon i's attached clients and current run (from its STATS answer),
 * or "-" where it did not say.  The targets are in lm_runstats order. */
static void status_info(const lm_runstats *rs, size_t i, char *clients,
			size_t clen, char *run, size_t rlen)
{
	const struct lm_runstats_daemon *d;
	const struct lm_stats_info *info;

	if (!rs || i >= lm_runstats_count(rs))
		return;
	d = lm_runstats_daemon(rs, i);
	if (d->rc || !d->set)
		return;
	info = lm_stats_info(d->set);
	if (info->clients != LM_STATS_CLIENTS_UNKNOWN)
		snprintf(clients, clen, "%u", info->clients);
	if (info->run)
		snprintf(run, rlen, "%llu", (unsigned long long)info->run);
	else
		snprintf(run, rlen, "none");
}

/* Every daemon's counters, reflectors first.  Returns the exit status. */
static int lm_ctl_stats(const struct lm_layout *l, const lm_auth *auth,
			uint16_t self, int timeout_ms, int json, int all)
{
	lm_runstats *rs = lm_runstats_create(l);
	size_t down;

	if (!rs) {
		fprintf(stderr, "lemuriactl: out of memory\n");
		return 1;
	}
	down = lm_runstats_query(rs, l, auth, self, timeout_ms);
	if (json)
		lm_runstats_print_json(rs, stdout);
	else if (all)
		lm_runstats_print_table(rs, stdout);
	else
		lm_runstats_print_summary(rs, stdout);
	lm_runstats_destroy(rs);
	return down ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *layout_path = NULL, *cmd;
	struct lm_layout *l = NULL;
	struct lm_ctl_target *targets;
	struct lm_ctl_ping_job *jobs;
	lm_runstats *rs = NULL;
	lm_auth *auth = NULL;
	int timeout_ms = 2000, count = 1, c, down = 0, json = 0, all = 0;
	size_t ntargets = 0;
	uint16_t self;
	char err[512], abuf[32];

	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};

	while ((c = getopt_long(argc, argv, "+c:t:n:ahV", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c':
			layout_path = optarg;
			break;
		case 't': {
			/* seconds, as lemuria-run's --timeout */
			char *end;
			double sec = strtod(optarg, &end);

			if (*end || end == optarg || !(sec >= 0.001) ||
			    sec > 3600) {
				fprintf(stderr, "lemuriactl: -t takes seconds "
						"(0.001 to 3600), not \"%s\"\n",
					optarg);
				return 2;
			}
			timeout_ms = (int)(sec * 1000 + 0.5);
			break;
		}
		case 'n':
			count = atoi(optarg);
			if (count <= 0 || count > 100000) {
				fprintf(stderr, "lemuriactl: -n takes a count "
						"from 1 to 100000, not \"%s\"\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			lm_ctl_usage(stdout);
			return 0;
		case 'V':
			printf("lemuriactl (Lemuria) %s\n", LM_VERSION_STRING);
			return 0;
		case 'j': /* before the command, or after stats (below) */
			json = 1;
			break;
		case 'a': /* before the command, or after stats (below) */
			all = 1;
			break;
		default:
			lm_ctl_usage(stderr);
			return 2;
		}
	}
	if (!layout_path || optind >= argc || timeout_ms <= 0) {
		lm_ctl_usage(stderr);
		return 2;
	}
	cmd = argv[optind++];
	for (; optind < argc; optind++) {
		if (strcmp(argv[optind], "--json") == 0)
			json = 1;
		else if (strcmp(argv[optind], "-a") == 0 ||
			 strcmp(argv[optind], "--all") == 0)
			all = 1;
		else
			break;
	}
	if ((json || all) && strcmp(cmd, "stats") != 0) {
		fprintf(stderr, "lemuriactl: %s goes with stats only, not "
				"with %s\n", json ? "--json" : "-a", cmd);
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "lemuriactl: unexpected argument \"%s\"\n",
			argv[optind]);
		lm_ctl_usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "ping") && strcmp(cmd, "status") &&
	    strcmp(cmd, "stats")) {
		fprintf(stderr, "lemuriactl: unknown command \"%s\"\n", cmd);
		lm_ctl_usage(stderr);
		return 2;
	}
	if (lm_layout_load(layout_path, &l, err, sizeof(err))) {
		fprintf(stderr, "lemuriactl: %s\n", err);
		return 2;
	}
	if (l->auth && !(auth = lm_auth_create(l->key))) {
		fprintf(stderr, "lemuriactl: cannot initialise authentication\n");
		lm_layout_free(l);
		return 1;
	}
	/* Our own node id, so that two tools at once keep their sessions. */
	self = lm_stats_tool_id(l, (uint32_t)getpid());
	if (strcmp(cmd, "stats") == 0) {
		down = lm_ctl_stats(l, auth, self, timeout_ms, json, all);
		lm_auth_destroy(auth);
		lm_layout_free(l);
		return down;
	}
	targets = calloc(l->nreflectors + l->nclusters, sizeof(*targets));
	for (size_t i = 0; targets && i < l->nreflectors; i++)
		targets[ntargets++] = (struct lm_ctl_target){
			l->reflectors[i].name, LM_ROLE_REFLECTOR,
			l->reflectors[i].id, &l->reflectors[i].addr };
	for (size_t i = 0; targets && i < l->nclusters; i++)
		targets[ntargets++] = (struct lm_ctl_target){
			l->clusters[i].name, LM_ROLE_LEMURIAD,
			l->clusters[i].id, &l->clusters[i].addr };

	/* clients attached and the current run come with the counters */
	rs = strcmp(cmd, "status") == 0 ? lm_runstats_create(l) : NULL;
	if (rs)
		lm_runstats_query(rs, l, auth, self, timeout_ms);
	jobs = calloc(ntargets ? ntargets : 1, sizeof(*jobs));
	if (!targets || !jobs) {
		fprintf(stderr, "lemuriactl: out of memory\n");
		free(targets);
		free(jobs);
		lm_runstats_destroy(rs);
		lm_auth_destroy(auth);
		lm_layout_free(l);
		return 1;
	}
	for (size_t i = 0; i < ntargets; i++) {
		const struct lm_runstats_daemon *d =
			rs ? lm_runstats_daemon(rs, i) : NULL;

		jobs[i] = (struct lm_ctl_ping_job){ .l = l, .auth = auth,
			.self = self, .t = &targets[i], .count = count,
			.timeout_ms = timeout_ms };
		/* a daemon that did not answer STATS in time is down: no
		 * second wait for its PING */
		if (d && d->rc == LM_ETIMEDOUT) {
			jobs[i].skip = true;
			jobs[i].rc = d->rc;
			jobs[i].why = d->why;
		}
	}
	lm_ctl_ping_all(jobs, ntargets);
	printf("%-10s %-16s %-22s %-5s %12s %12s %7s  %s\n", "role", "name",
	       "address", "state", "uptime_s", "rtt_us", "clients", "run");
	for (size_t i = 0; i < ntargets; i++) {
		const struct lm_ctl_target *t = &targets[i];
		const struct lm_msg_pong *pong = &jobs[i].pong;
		const char *why = jobs[i].why;
		int rc = jobs[i].rc;

		lm_addr_str(t->addr, abuf, sizeof(abuf));
		if (rc == 0 && (pong->role != t->role ||
				strcmp(pong->name, t->name) != 0)) {
			rc = LM_EBADMSG;
			why = "another daemon answers at this address";
		}
		if (rc) {
			down++;
			printf("%-10s %-16s %-22s %-5s %12s %12s  (%s)\n",
			       lm_role_name(t->role), t->name, abuf, "down",
			       "-", "-", why);
		} else {
			char clients[16] = "-", run[24] = "-";

			status_info(rs, i, clients, sizeof(clients), run,
				    sizeof(run));
			printf("%-10s %-16s %-22s %-5s %12.1f %12.1f %7s  %s\n",
			       lm_role_name(t->role), t->name, abuf, "up",
			       (double)pong->uptime_us / 1e6, jobs[i].rtt,
			       clients, run);
		}
	}
	free(jobs);
	free(targets);
	lm_runstats_destroy(rs);
	lm_auth_destroy(auth);
	lm_layout_free(l);
	return down ? 1 : 0;
}
