/* Tool side of the counters (runstats.h): one STATS request per daemon
 * through a short-lived transport endpoint, snapshots kept as counter
 * sets, and the arithmetic and printing the two tools share; JSON is
 * jansson's. */
#include "runstats.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "link_config.h"
#include "lm_error.h"
#include "rpc.h"
#include "udp.h"

struct lm_runstats {
	struct lm_runstats_daemon *d;
	size_t n;
};

/* Counters that say how much there is now, not how often something
 * happened: a run's difference shows their value after the run. */
static const char *const lm_runstats_gauges[] = { "cached_bytes",
						   "backlog_peak_bytes" };

static bool lm_runstats_is_gauge(const char *name)
{
	for (size_t i = 0; i < sizeof(lm_runstats_gauges) /
				       sizeof(lm_runstats_gauges[0]);
	     i++)
		if (strcmp(name, lm_runstats_gauges[i]) == 0)
			return true;
	return false;
}

static void lm_runstats_target(struct lm_runstats_daemon *d, const char *name,
			       enum lm_role role, uint16_t id,
			       const struct sockaddr_in *addr)
{
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->role = role;
	d->id = id;
	d->addr = *addr;
	d->rc = LM_ENOENT;
	snprintf(d->why, sizeof(d->why), "not asked");
}

lm_runstats *lm_runstats_create(const struct lm_layout *l)
{
	lm_runstats *rs = calloc(1, sizeof(*rs));
	size_t total = l->nreflectors + l->nclusters;

	if (!rs)
		return NULL;
	rs->d = calloc(total ? total : 1, sizeof(*rs->d));
	if (!rs->d) {
		free(rs);
		return NULL;
	}
	for (size_t i = 0; i < l->nreflectors; i++)
		lm_runstats_target(&rs->d[rs->n++], l->reflectors[i].name,
				   LM_ROLE_REFLECTOR, l->reflectors[i].id,
				   &l->reflectors[i].addr);
	for (size_t i = 0; i < l->nclusters; i++)
		lm_runstats_target(&rs->d[rs->n++], l->clusters[i].name,
				   LM_ROLE_LEMURIAD, l->clusters[i].id,
				   &l->clusters[i].addr);
	return rs;
}

void lm_runstats_destroy(lm_runstats *rs)
{
	if (!rs)
		return;
	for (size_t i = 0; i < rs->n; i++)
		lm_stats_destroy(rs->d[i].set);
	free(rs->d);
	free(rs);
}

size_t lm_runstats_count(const lm_runstats *rs)
{
	return rs->n;
}

const struct lm_runstats_daemon *lm_runstats_daemon(const lm_runstats *rs,
						    size_t i)
{
	return i < rs->n ? &rs->d[i] : NULL;
}

int lm_runstats_put(lm_runstats *rs, size_t i, int rc, const char *why,
		    const lm_stats_set *set)
{
	struct lm_runstats_daemon *d;

	if (i >= rs->n || (rc == 0 && !set))
		return LM_EINVAL;
	d = &rs->d[i];
	if (rc == 0) {
		if (!d->set && !(d->set = lm_stats_create()))
			return LM_ENOMEM;
		if (lm_stats_copy(d->set, set))
			return LM_ENOMEM;
		d->why[0] = '\0';
	} else {
		snprintf(d->why, sizeof(d->why), "%s",
			 why ? why : lm_strerror(rc));
	}
	d->rc = rc;
	return 0;
}

/* One STATS round trip to d; 0 with the answer in `set`, else the
 * reason in why. */
static int lm_runstats_ask(const struct lm_layout *l, const lm_auth *auth,
			   uint16_t self_id, int timeout_ms,
			   const struct lm_runstats_daemon *d,
			   lm_stats_set *set, const char **why)
{
	struct lm_rel_config rcfg;
	uint8_t req[16];
	void *reply = NULL;
	size_t rlen = 0;
	char err[256];
	lm_rpc *rpc;
	int rc, len = lm_stats_encode_request(req, sizeof(req));

	lm_link_tool_config(l, self_id, auth, &rcfg);
	rpc = lm_rpc_create(&d->addr, d->id, &rcfg, NULL, err, sizeof(err));
	if (!rpc || len < 0) {
		lm_rpc_destroy(rpc);
		*why = "cannot open a socket";
		return LM_EIO;
	}
	rc = lm_rpc_call(rpc, req, (size_t)len, &reply, &rlen, timeout_ms);
	if (rc) {
		*why = lm_strerror(rc);
	} else if (lm_stats_decode_reply(reply, rlen, set) != 0) {
		*why = "undecodable answer (an older daemon?)";
		rc = LM_EBADMSG;
	} else if (lm_stats_info(set)->role != d->role ||
		   strcmp(lm_stats_info(set)->name, d->name) != 0) {
		*why = "another daemon answers at this address";
		rc = LM_EBADMSG;
	}
	free(reply);
	lm_rpc_destroy(rpc);
	return rc;
}

/* One daemon's question, asked on a thread of its own. */
struct lm_runstats_job {
	const struct lm_layout *l;
	const lm_auth *auth;
	uint16_t self_id;
	int timeout_ms;
	const struct lm_runstats_daemon *d;
	lm_stats_set *set;
	const char *why;
	int rc;
};

static void *lm_runstats_job_run(void *arg)
{
	struct lm_runstats_job *j = arg;

	j->why = "out of memory";
	j->rc = j->set ? lm_runstats_ask(j->l, j->auth, j->self_id,
					 j->timeout_ms, j->d, j->set, &j->why)
		       : LM_ENOMEM;
	return NULL;
}

void lm_runstats_each_at_once(void *(*fn)(void *), void *jobs,
			      size_t size, size_t n)
{
	pthread_t *threads = calloc(n ? n : 1, sizeof(*threads));
	bool *started = calloc(n ? n : 1, sizeof(*started));

	for (size_t i = 0; threads && started && i < n; i++)
		started[i] = pthread_create(&threads[i], NULL, fn,
					    (char *)jobs + i * size) == 0;
	for (size_t i = 0; i < n; i++) {
		if (threads && started && started[i])
			pthread_join(threads[i], NULL);
		else
			fn((char *)jobs + i * size);
	}
	free(threads);
	free(started);
}

/* Every daemon at once: a daemon that is down costs the timeout once,
 * not once per daemon (each question has its own endpoint; lm_auth may
 * be shared). */
size_t lm_runstats_query(lm_runstats *rs, const struct lm_layout *l,
			 const lm_auth *auth, uint16_t self_id,
			 int timeout_ms)
{
	struct lm_runstats_job *jobs = calloc(rs->n ? rs->n : 1,
					      sizeof(*jobs));
	size_t down = 0;

	for (size_t i = 0; jobs && i < rs->n; i++)
		jobs[i] = (struct lm_runstats_job){ l, auth, self_id,
			timeout_ms, &rs->d[i], lm_stats_create(), NULL, 0 };
	if (jobs)
		lm_runstats_each_at_once(lm_runstats_job_run, jobs,
					 sizeof(*jobs), rs->n);
	for (size_t i = 0; i < rs->n; i++) {
		const char *why = jobs ? jobs[i].why : "out of memory";
		int rc = jobs ? jobs[i].rc : LM_ENOMEM;

		if (rc == 0 && lm_runstats_put(rs, i, 0, NULL, jobs[i].set)) {
			rc = LM_ENOMEM;
			why = "out of memory";
		}
		if (rc) {
			lm_runstats_put(rs, i, rc, why, NULL);
			down++;
		}
		if (jobs)
			lm_stats_destroy(jobs[i].set);
	}
	free(jobs);
	return down;
}

lm_runstats *lm_runstats_snapshot(const struct lm_layout *l, uint16_t self_id,
				  int timeout_ms, size_t *down)
{
	lm_runstats *rs = lm_runstats_create(l);
	lm_auth *auth = NULL;
	size_t n;

	if (!rs || (l->auth && !(auth = lm_auth_create(l->key)))) {
		lm_runstats_destroy(rs);
		return NULL;
	}
	n = lm_runstats_query(rs, l, auth, self_id, timeout_ms);
	if (down)
		*down = n;
	lm_auth_destroy(auth);
	return rs;
}

/* after - before for one daemon that answered both times. */
static int lm_runstats_diff_set(const lm_stats_set *before,
				const lm_stats_set *after, lm_stats_set *out)
{
	bool restarted = lm_stats_info(after)->uptime_us <
			 lm_stats_info(before)->uptime_us;

	lm_stats_clear(out);
	lm_stats_set_info(out, lm_stats_info(after));
	for (size_t i = 0; i < lm_stats_count(after); i++) {
		const struct lm_stat *a = lm_stats_at(after, i);
		uint64_t b = 0, v = a->value;
		int rc;

		if (!restarted && !lm_runstats_is_gauge(a->name) &&
		    lm_stats_get(before, a->level, a->name, &b) == 0)
			v = a->value >= b ? a->value - b : a->value;
		rc = lm_stats_add(out, a->level, a->name, v);
		if (rc)
			return rc;
	}
	return 0;
}

lm_runstats *lm_runstats_diff(const lm_runstats *before,
			      const lm_runstats *after)
{
	lm_runstats *rs = calloc(1, sizeof(*rs));
	lm_stats_set *tmp = lm_stats_create();

	if (!rs || !tmp || before->n != after->n)
		goto fail;
	rs->d = calloc(after->n ? after->n : 1, sizeof(*rs->d));
	if (!rs->d)
		goto fail;
	for (size_t i = 0; i < after->n; i++) {
		const struct lm_runstats_daemon *b = &before->d[i],
						*a = &after->d[i];
		struct lm_runstats_daemon *d = &rs->d[rs->n++];

		if (a->id != b->id || a->role != b->role ||
		    strcmp(a->name, b->name) != 0)
			goto fail;
		lm_runstats_target(d, a->name, a->role, a->id, &a->addr);
		if (a->rc || b->rc) {
			lm_runstats_put(rs, i, a->rc ? a->rc : b->rc,
					a->rc ? a->why : b->why, NULL);
			continue;
		}
		if (lm_runstats_diff_set(b->set, a->set, tmp) ||
		    lm_runstats_put(rs, i, 0, NULL, tmp))
			goto fail;
	}
	lm_stats_destroy(tmp);
	return rs;
fail:
	lm_stats_destroy(tmp);
	lm_runstats_destroy(rs);
	return NULL;
}

int lm_runstats_sum(const lm_runstats *rs, lm_stats_set *out)
{
	lm_stats_clear(out);
	for (size_t i = 0; i < rs->n; i++) {
		const lm_stats_set *s = rs->d[i].set;

		if (rs->d[i].rc)
			continue;
		for (size_t k = 0; k < lm_stats_count(s); k++) {
			const struct lm_stat *st = lm_stats_at(s, k);
			int rc = lm_stats_add(out, st->level, st->name,
					      st->value);

			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- reports ------------------------------------------------------------ */

/* The counters of s as rows, one column per level that has any;
 * every line starts with `prefix`. */
static void lm_runstats_print_set(FILE *out, const char *prefix,
				  const lm_stats_set *s)
{
	bool used[LM_STAT_LEVEL_COUNT] = { false };
	size_t n = lm_stats_count(s);
	int width = 7; /* strlen("counter") */

	for (size_t i = 0; i < n; i++) {
		const struct lm_stat *st = lm_stats_at(s, i);
		int len = (int)strlen(st->name);

		used[st->level] = true;
		if (len > width)
			width = len;
	}
	fprintf(out, "%s  %-*s", prefix, width, "counter");
	for (int l = 0; l < LM_STAT_LEVEL_COUNT; l++)
		if (used[l])
			fprintf(out, " %14s", lm_stats_level_name(l));
	fputc('\n', out);
	for (size_t i = 0; i < n; i++) {
		const char *name = lm_stats_at(s, i)->name;
		bool seen = false;

		/* One row per name, where it first appears. */
		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(lm_stats_at(s, j)->name, name) == 0;
		if (seen)
			continue;
		fprintf(out, "%s  %-*s", prefix, width, name);
		for (int l = 0; l < LM_STAT_LEVEL_COUNT; l++) {
			uint64_t v;

			if (!used[l])
				continue;
			if (lm_stats_get(s, l, name, &v) == 0)
				fprintf(out, " %14" PRIu64, v);
			else
				fprintf(out, " %14s", ".");
		}
		fputc('\n', out);
	}
}

static const char *const summary_names[] = {
	"msgs_sent", "bytes_sent", "retransmits", "fetch_hits",
	"fetch_misses", "barriers", "locks", "lock_grants",
};

int lm_runstats_summary(const lm_stats_set *s, lm_stats_set *out)
{
	lm_stats_clear(out);
	for (size_t k = 0; k < sizeof(summary_names) / sizeof(*summary_names);
	     k++)
		for (size_t i = 0; i < lm_stats_count(s); i++) {
			const struct lm_stat *st = lm_stats_at(s, i);
			int rc;

			if (strcmp(st->name, summary_names[k]) == 0 &&
			    (rc = lm_stats_add(out, st->level, st->name,
					       st->value)))
				return rc;
		}
	for (size_t i = 0; i < lm_stats_count(s); i++) {
		const struct lm_stat *st = lm_stats_at(s, i);
		int rc;

		if (strncmp(st->name, "dropped_", 8) == 0 &&
		    (rc = lm_stats_add(out, st->level, "dropped", st->value)))
			return rc;
	}
	return 0;
}

/* The summary rows of s (lm_runstats_summary). */
static void lm_runstats_print_short(FILE *out, const char *prefix,
				    const lm_stats_set *s)
{
	lm_stats_set *sum = lm_stats_create();

	if (!sum || lm_runstats_summary(s, sum) != 0)
		fprintf(out, "%scannot make the summary (out of memory)\n",
			prefix);
	else
		lm_runstats_print_set(out, prefix, sum);
	lm_stats_destroy(sum);
}

/* Retransmissions on loopback puzzle users: say what they are. */
static void lm_runstats_explain(FILE *out, const char *prefix,
				const lm_stats_set *s)
{
	uint64_t total = 0, v;

	for (int l = 0; l < LM_STAT_LEVEL_COUNT; l++)
		if (lm_stats_get(s, l, "retransmits", &v) == 0)
			total += v;
	if (total)
		fprintf(out, "%sretransmits: datagrams sent again when no "
			"ack came in time; on one host nothing is lost on the "
			"way: a receiver that was not scheduled in time (a "
			"loaded host) or a full socket buffer delays the ack "
			"(docs/operations.md \"Counters\")\n", prefix);
}

/* "reflector r0 (127.0.0.1:7400)" */
static void lm_runstats_print_label(FILE *out, const char *prefix,
				    const struct lm_runstats_daemon *d)
{
	char abuf[32];

	fprintf(out, "%s%s %s (%s)", prefix, lm_role_name(d->role), d->name,
		lm_addr_str(&d->addr, abuf, sizeof(abuf)));
}

static void lm_runstats_print_head(FILE *out, const char *prefix,
				   const struct lm_runstats_daemon *d)
{
	const struct lm_stats_info *info;

	lm_runstats_print_label(out, prefix, d);
	if (d->rc) {
		fprintf(out, ": down (%s)\n", d->why);
		return;
	}
	info = lm_stats_info(d->set);
	fprintf(out, ": up %.1f s, run %" PRIu64,
		(double)info->uptime_us / 1e6, info->run);
	if (info->clients != LM_STATS_CLIENTS_UNKNOWN)
		fprintf(out, ", %" PRIu32 " clients attached", info->clients);
	fputc('\n', out);
}

void lm_runstats_print_table(const lm_runstats *rs, FILE *out)
{
	for (size_t i = 0; i < rs->n; i++) {
		if (i > 0)
			fputc('\n', out);
		lm_runstats_print_head(out, "", &rs->d[i]);
		if (rs->d[i].rc == 0)
			lm_runstats_print_set(out, "", rs->d[i].set);
	}
}

void lm_runstats_print_summary(const lm_runstats *rs, FILE *out)
{
	for (size_t i = 0; i < rs->n; i++) {
		if (i > 0)
			fputc('\n', out);
		lm_runstats_print_head(out, "", &rs->d[i]);
		if (rs->d[i].rc == 0) {
			lm_runstats_print_short(out, "", rs->d[i].set);
			lm_runstats_explain(out, "", rs->d[i].set);
		}
	}
}

/* One daemon as a JSON object; NULL when out of memory.  The run id is a
 * string: JSON readers keep numbers as doubles, exact only to 2^53, and
 * run ids are 64-bit.  Counters are numbers (no count comes near 2^53). */
static json_t *lm_runstats_json_daemon(const struct lm_runstats_daemon *d)
{
	const struct lm_stats_info *info;
	json_t *o = json_object(), *counters, *level;
	char abuf[32], run[24];
	int bad = 0;

	if (!o)
		return NULL;
	bad |= json_object_set_new(o, "name", json_string(d->name));
	bad |= json_object_set_new(o, "role",
				   json_string(lm_role_name(d->role)));
	bad |= json_object_set_new(o, "address",
				   json_string(lm_addr_str(&d->addr, abuf,
							   sizeof(abuf))));
	if (d->rc) {
		bad |= json_object_set_new(o, "up", json_false());
		bad |= json_object_set_new(o, "error", json_string(d->why));
		goto out;
	}
	info = lm_stats_info(d->set);
	snprintf(run, sizeof(run), "%" PRIu64, info->run);
	bad |= json_object_set_new(o, "up", json_true());
	/* whole milliseconds, printed as such (JSON_REAL_PRECISION below) */
	bad |= json_object_set_new(
		o, "uptime_s",
		json_real((double)(info->uptime_us / 1000) / 1e3));
	bad |= json_object_set_new(o, "run", json_string(run));
	bad |= json_object_set_new(
		o, "clients",
		info->clients != LM_STATS_CLIENTS_UNKNOWN
			? json_integer(info->clients)
			: json_null());
	counters = json_object();
	bad |= json_object_set_new(o, "counters", counters);
	for (int l = 0; counters && l < LM_STAT_LEVEL_COUNT; l++) {
		level = json_object();
		bad |= json_object_set_new(counters, lm_stats_level_name(l),
					   level);
		for (size_t i = 0; level && i < lm_stats_count(d->set); i++) {
			const struct lm_stat *st = lm_stats_at(d->set, i);

			if (st->level == l)
				bad |= json_object_set_new(
					level, st->name,
					json_integer((json_int_t)st->value));
		}
	}
out:
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

void lm_runstats_print_json(const lm_runstats *rs, FILE *out)
{
	json_t *root = json_object(), *daemons = json_array();
	int bad = !root || !daemons;

	for (size_t i = 0; !bad && i < rs->n; i++)
		bad = json_array_append_new(daemons,
					    lm_runstats_json_daemon(&rs->d[i]));
	if (!bad)
		bad = json_object_set(root, "daemons", daemons);
	if (bad)
		fputs("{\"error\":\"out of memory\"}", out);
	else
		json_dumpf(root, out, JSON_COMPACT | JSON_REAL_PRECISION(15));
	fputc('\n', out);
	json_decref(daemons);
	json_decref(root);
}

/* lemuria-run --stats: the total over the daemons that answered, then a
 * line per daemon; every counter of each (`all`) or the summary of the
 * total only. */
static void lm_runstats_print_diff(const lm_runstats *diff, FILE *out,
				   bool all)
{
	static const char prefix[] = "lemuria-run: ";
	lm_stats_set *total = lm_stats_create();
	size_t up = 0;

	for (size_t i = 0; i < diff->n; i++)
		up += diff->d[i].rc == 0;
	if (!total || lm_runstats_sum(diff, total) != 0) {
		fprintf(out, "%scannot sum the counters\n", prefix);
	} else if (all) {
		fprintf(out, "%scounters of the run (after minus before)\n",
			prefix);
		fprintf(out, "%stotal of the %zu daemons that answered (of "
			     "%zu)\n",
			prefix, up, diff->n);
		lm_runstats_print_set(out, prefix, total);
	} else {
		fprintf(out, "%swhat the run did, summed over the %zu daemons "
			"that answered (of %zu; every counter with -a)\n",
			prefix, up, diff->n);
		lm_runstats_print_short(out, prefix, total);
		lm_runstats_explain(out, prefix, total);
	}
	for (size_t i = 0; i < diff->n; i++) {
		lm_runstats_print_head(out, prefix, &diff->d[i]);
		if (all && diff->d[i].rc == 0)
			lm_runstats_print_set(out, prefix, diff->d[i].set);
	}
	lm_stats_destroy(total);
}

void lm_runstats_print_run(const lm_runstats *diff, FILE *out)
{
	lm_runstats_print_diff(diff, out, true);
}

void lm_runstats_print_run_summary(const lm_runstats *diff, FILE *out)
{
	lm_runstats_print_diff(diff, out, false);
}
