/* lemuria-run: starts the client ranks of a layout, like mpirun.
 *
 *   lemuria-run -c LAYOUT [--start-daemons] [--cluster NAME]... [--run ID]
 *               [--timeout SEC] [--stats] [-v] -- PROGRAM ARGS...
 *   lemuria-run -n N [--clusters A+B... | --per-cluster K] [--shared-size S]
 *               [options] -- PROGRAM ARGS...
 *
 * Thin main over tools/launch.c (tools/runstats.c for --stats,
 * tools/quick_layout.c for -n); the user's guide is docs/operations.md.
 * Exit status: 0 when every rank exits 0; a failed rank's exit status (128
 * + N for signal N); 124 on --timeout; 2 on a usage or layout error; 1 when
 * the daemons cannot be started or one of them dies. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "launch.h"
#include "lm_error.h"
#include "quick_layout.h"
#include "rankprofile.h"
#include "runstats.h"
#include "stats.h"
#include "version.h"

#define MAX_CLUSTERS 256

/* Long options without a short form. */
enum { LM_OPT_CLUSTERS = 256, LM_OPT_PER_CLUSTER, LM_OPT_SHARED_SIZE };
#define STATS_TIMEOUT_MS 2000 /* per daemon, for --stats */

extern char **environ;

static volatile sig_atomic_t stop_signal;

/* A closed stdout or stderr must not kill the launcher before it stops the
 * daemons it started.  A handler rather than SIG_IGN, since an ignored
 * signal would stay ignored in the ranks and daemons after exec. */
static void on_sigpipe(int sig)
{
	(void)sig;
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: lemuria-run -c LAYOUT [options] -- PROGRAM [ARGS...]\n"
		"       lemuria-run -n N [--clusters A+B... | --per-cluster K]\n"
		"                   [--shared-size SIZE] [options] -- PROGRAM "
		"[ARGS...]\n"
		"  -c, --config LAYOUT   the layout (INI) every rank joins\n"
		"  -n, --np N            N ranks on this host, on a layout made "
		"for the run\n"
		"                        (fresh secret, free loopback ports, "
		"removed after)\n"
		"                        and its daemons: one cluster of N, "
		"or as given by\n"
		"      --clusters A+B... the ranks of each cluster (-n may then "
		"be left out)\n"
		"      --per-cluster K   clusters of K ranks, the last what is "
		"left\n"
		"      --shared-size SIZE  the region for -n (default 64M)\n"
		"  -d, --start-daemons   start the layout's reflectors and "
		"lemuriads first,\n"
		"                        stop them at the end\n"
		"  -C, --cluster NAME    start only this cluster's ranks "
		"(repeatable)\n"
		"  -r, --run ID          run id (decimal); the same on every "
		"host of a run\n"
		"  -t, --timeout SEC     stop everything after SEC seconds "
		"(status 124)\n"
		"  -b, --batch           run the ranks under SCHED_BATCH (no "
		"wake-up\n"
		"                        preemption of their lemuriad)\n"
		"  -p, --pin             run each cluster's lemuriad and ranks "
		"on CPUs of\n"
		"                        their own (one cluster per CPU on "
		"small hosts)\n"
		"  -s, --stats           print what the run changed in the "
		"daemons' main\n"
		"                        counters (messages, bytes, "
		"retransmissions per level)\n"
		"  -a, --all-stats       the same with every counter of every "
		"daemon\n"
		"  -v, --verbose         say what is started and how it "
		"ends\n"
		"  -V, --version         print the version and exit\n"
		"  -h, --help            print this and exit\n");
}

static int find_daemon(const char *name, char *out, size_t outlen)
{
	char self[LM_PATH_MAX];
	int rc = lm_launch_find_program(
		name, lm_launch_self_dir(self, sizeof(self)) == 0 ? self : NULL,
		getenv("PATH"), out, outlen);

	if (rc)
		fprintf(stderr, "lemuria-run: cannot find the %s program "
				"next to lemuria-run or in PATH\n", name);
	return rc;
}

/* The daemons' counters now (--stats); NULL when out of memory. */
static lm_runstats *stats_snapshot(const struct lm_layout *l,
				   const char *when)
{
	size_t down = 0;
	lm_runstats *rs = lm_runstats_snapshot(
		l, lm_stats_tool_id(l, (uint32_t)getpid()), STATS_TIMEOUT_MS,
		&down);

	if (!rs)
		fprintf(stderr, "lemuria-run: --stats: out of memory\n");
	else if (down)
		fprintf(stderr, "lemuria-run: --stats: %zu of %zu daemons did "
				"not answer %s the run\n",
			down, lm_runstats_count(rs), when);
	return rs;
}

/* What the run changed, after the statuses; never changes the exit
 * status. */
static void stats_report(const struct lm_layout *l, lm_runstats *before,
			 bool all)
{
	lm_runstats *after = before ? stats_snapshot(l, "after") : NULL;
	lm_runstats *diff = after ? lm_runstats_diff(before, after) : NULL;

	if (diff)
		(all ? lm_runstats_print_run :
		       lm_runstats_print_run_summary)(diff, stderr);
	else if (before && after)
		fprintf(stderr, "lemuria-run: --stats: out of memory\n");
	lm_runstats_destroy(diff);
	lm_runstats_destroy(after);
}

static int start_daemons(const struct lm_layout *l, const char *layout_abs,
			 const char *const *clusters, size_t nclusters,
			 const cpu_set_t *cluster_cpus, int verbose,
			 lm_launch_daemons **out)
{
	char refl[LM_PATH_MAX], lemd[LM_PATH_MAX], err[512];
	struct lm_launch_daemon_opts o = {
		.reflector = refl, .lemuriad = lemd, .clusters = clusters,
		.nclusters = nclusters, .log_level = verbose ? NULL : "warn",
		.cluster_cpus = cluster_cpus,
		.verbose = verbose ? stderr : NULL,
	};

	if ((nclusters == 0 && find_daemon("reflector", refl, sizeof(refl))) ||
	    find_daemon("lemuriad", lemd, sizeof(lemd)))
		return 1;
	if (lm_launch_daemons_start(l, layout_abs, &o, out, err, sizeof(err))) {
		fprintf(stderr, "lemuria-run: %s\n", err);
		return 1;
	}
	return 0;
}

/* --pin: the CPUs of each cluster and of each rank started here, from
 * the CPUs this launcher may use.  Returns 0, or 1 after a message. */
static int place(const struct lm_layout *l, const char *const *clusters,
		 size_t nclusters, const uint32_t *ranks, size_t nranks,
		 int verbose, cpu_set_t **cluster_cpus, cpu_set_t **rank_cpus)
{
	cpu_set_t allowed;
	char err[512];

	*cluster_cpus = calloc(l->nclusters ? l->nclusters : 1,
			       sizeof(**cluster_cpus));
	*rank_cpus = calloc(nranks ? nranks : 1, sizeof(**rank_cpus));
	if (!*cluster_cpus || !*rank_cpus) {
		fprintf(stderr, "lemuria-run: --pin: out of memory\n");
		return 1;
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
		fprintf(stderr, "lemuria-run: --pin: cannot read the CPUs "
				"this process may use: %s\n", strerror(errno));
		return 1;
	}
	if (lm_launch_placement(l, clusters, nclusters, &allowed,
				*cluster_cpus, err, sizeof(err))) {
		fprintf(stderr, "lemuria-run: --pin: %s\n", err);
		return 1;
	}
	for (size_t i = 0; i < nranks; i++) {
		const struct lm_cluster_cfg *c =
			lm_layout_cluster_of_rank(l, ranks[i]);

		(*rank_cpus)[i] = (*cluster_cpus)[c - l->clusters];
	}
	for (size_t c = 0; verbose && c < l->nclusters; c++) {
		if (CPU_COUNT(&(*cluster_cpus)[c]) == 0)
			continue;
		fprintf(stderr, "lemuria-run: cluster %s on CPUs",
			l->clusters[c].name);
		for (int k = 0; k < CPU_SETSIZE; k++)
			if (CPU_ISSET(k, &(*cluster_cpus)[c]))
				fprintf(stderr, " %d", k);
		fputc('\n', stderr);
	}
	return 0;
}

/* What the command line asked for. */
struct run_opts {
	const char *layout_path;
	const char *clusters[MAX_CLUSTERS];
	size_t nclusters;
	int daemons, verbose, stats, pin, batch; /* stats 2: -a */
	unsigned timeout_ms;
	uint64_t run;
	char **argv; /* the program and its arguments */
	/* -n: a layout of our own (quick_layout.h) */
	unsigned np, per_cluster;
	const char *cluster_sizes, *shared_size;
};

/* Runs the ranks of o->layout_path (and its daemons with
 * --start-daemons): the exit status. */
static int run_layout(const struct run_opts *o)
{
	const char *const *clusters = o->clusters;
	size_t nclusters = o->nclusters, nranks = 0;
	int status;
	cpu_set_t *cluster_cpus = NULL, *rank_cpus = NULL;
	uint64_t run = o->run;
	struct lm_layout *l = NULL;
	lm_launch_daemons *ds = NULL;
	uint32_t *ranks = NULL;
	char err[512], layout_abs[LM_PATH_MAX];
	struct lm_launch_result res;
	struct sigaction sa;

	if (lm_layout_load(o->layout_path, &l, err, sizeof(err))) {
		fprintf(stderr, "lemuria-run: %s\n", err);
		return 2;
	}
	if (!realpath(o->layout_path, layout_abs)) {
		fprintf(stderr, "lemuria-run: %s: %s\n", o->layout_path,
			strerror(errno));
		lm_layout_free(l);
		return 2;
	}
	if (lm_launch_ranks(l, clusters, nclusters, &ranks, &nranks, err,
			    sizeof(err))) {
		fprintf(stderr, "lemuria-run: %s\n", err);
		lm_layout_free(l);
		return 2;
	}
	if (o->pin && place(l, clusters, nclusters, ranks, nranks, o->verbose,
			    &cluster_cpus, &rank_cpus)) {
		free(cluster_cpus);
		free(rank_cpus);
		free(ranks);
		lm_layout_free(l);
		return 2;
	}
	if (run == 0)
		run = lm_launch_run_id();
	if (o->verbose)
		fprintf(stderr, "lemuria-run: run %llu, %zu ranks, layout %s\n",
			(unsigned long long)run, nranks, layout_abs);

	/* No SA_RESTART: the supervision loop's sleep must end early. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_sigpipe;
	sigaction(SIGPIPE, &sa, NULL);

	if (o->daemons && start_daemons(l, layout_abs, clusters, nclusters,
					cluster_cpus, o->verbose, &ds)) {
		status = 1;
	} else if (stop_signal) {
		status = 128 + stop_signal;
	} else {
		lm_runstats *before = o->stats ? stats_snapshot(l, "before")
					       : NULL;
		char pdir[4096], pwhy[4200];
		int profile = lm_rankprofile_begin(pdir, sizeof(pdir), pwhy,
						   sizeof(pwhy));
		struct lm_launch lo = {
			.argv = o->argv, .environ_base = environ,
			.ranks = ranks, .nranks = nranks,
			.rank_cpus = rank_cpus, .batch = o->batch != 0,
			.layout_abs = layout_abs, .run = run,
			.timeout_ms = o->timeout_ms, .daemons = ds,
			.stop = &stop_signal,
			.verbose = o->verbose ? stderr : NULL,
		};

		if (profile < 0)
			fprintf(stderr, "lemuria-run: LEMURIA_PROFILE: %s; "
					"the ranks write their lines to stderr\n",
				pwhy);
		status = lm_launch_run(&lo, &res);
		if (profile > 0)
			lm_rankprofile_end(pdir, ranks, nranks, stderr);
		if (res.msg[0])
			fprintf(stderr, "lemuria-run: %s\n", res.msg);
		else if (o->verbose)
			fprintf(stderr, "lemuria-run: all %zu ranks exited "
					"with status 0\n", nranks);
		stats_report(l, before, o->stats == 2);
		lm_runstats_destroy(before);
	}
	lm_launch_daemons_stop(ds, LM_LAUNCH_GRACE_MS);
	free(cluster_cpus);
	free(rank_cpus);
	free(ranks);
	lm_layout_free(l);
	return status;
}

/* -n N: the run on a layout of its own, made for it and removed after. */
static int run_quick(struct run_opts *o)
{
	unsigned sizes[LM_QUICK_MAX_CLUSTERS];
	struct lm_quick_layout q;
	char err[512];
	int n, rc, status;

	if (o->layout_path || o->nclusters) {
		fprintf(stderr, "lemuria-run: -n makes a layout of its own; "
				"it does not go with %s\n",
			o->layout_path ? "-c" : "--cluster");
		return 2;
	}
	n = lm_quick_split(o->np, o->cluster_sizes, o->per_cluster, sizes,
			   LM_QUICK_MAX_CLUSTERS, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "lemuria-run: %s\n", err);
		return 2;
	}
	rc = lm_quick_layout_make(&q, sizes, (size_t)n,
				  o->shared_size ? o->shared_size : "64M", err,
				  sizeof(err));
	if (rc) {
		fprintf(stderr, "lemuria-run: -n: %s\n", err);
		return rc == LM_EINVAL ? 2 : 1; /* a bad value, or the host */
	}
	o->layout_path = q.path;
	o->daemons = 1;
	status = run_layout(o);
	lm_quick_layout_remove(&q);
	return status;
}

/* A count for -n or --per-cluster: 1..LM_QUICK_MAX_CLUSTERS * 1024. */
static int parse_count(const char *opt, const char *v, unsigned *out)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n == 0 ||
	    n > LM_QUICK_MAX_CLUSTERS * 1024ul) {
		fprintf(stderr, "lemuria-run: %s takes a number of ranks from "
				"1 to %lu, not \"%s\"\n",
			opt, LM_QUICK_MAX_CLUSTERS * 1024ul, v);
		return 2;
	}
	*out = (unsigned)n;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "start-daemons", no_argument, NULL, 'd' },
		{ "cluster", required_argument, NULL, 'C' },
		{ "run", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "batch", no_argument, NULL, 'b' },
		{ "pin", no_argument, NULL, 'p' },
		{ "stats", no_argument, NULL, 's' },
		{ "all-stats", no_argument, NULL, 'a' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "np", required_argument, NULL, 'n' },
		{ "clusters", required_argument, NULL, LM_OPT_CLUSTERS },
		{ "per-cluster", required_argument, NULL, LM_OPT_PER_CLUSTER },
		{ "shared-size", required_argument, NULL, LM_OPT_SHARED_SIZE },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o = { 0 };
	int c;
	char *end;

	while ((c = getopt_long(argc, argv, "+c:dC:r:t:bpsavhVn:", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'c':
			o.layout_path = optarg;
			break;
		case 'd':
			o.daemons = 1;
			break;
		case 'C':
			if (o.nclusters == MAX_CLUSTERS) {
				fprintf(stderr, "lemuria-run: too many "
						"--cluster options\n");
				return 2;
			}
			o.clusters[o.nclusters++] = optarg;
			break;
		case 'r':
			errno = 0;
			o.run = strtoull(optarg, &end, 10);
			if (errno || *end || end == optarg || o.run == 0) {
				fprintf(stderr, "lemuria-run: --run takes a "
						"non-zero decimal number, not "
						"\"%s\"\n", optarg);
				return 2;
			}
			break;
		case 't': {
			double sec = strtod(optarg, &end);

			if (*end || end == optarg || !(sec > 0) ||
			    sec > 4e6) {
				fprintf(stderr, "lemuria-run: --timeout takes "
						"seconds, not \"%s\"\n",
					optarg);
				return 2;
			}
			o.timeout_ms = (unsigned)(sec * 1000 + 0.5);
			break;
		}
		case 'b':
			o.batch = 1;
			break;
		case 'p':
			o.pin = 1;
			break;
		case 'a':
			o.stats = 2;
			break;
		case 's':
			o.stats = o.stats ? o.stats : 1;
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'n':
			if (parse_count("-n", optarg, &o.np))
				return 2;
			break;
		case LM_OPT_CLUSTERS:
			o.cluster_sizes = optarg;
			break;
		case LM_OPT_PER_CLUSTER:
			if (parse_count("--per-cluster", optarg,
					&o.per_cluster))
				return 2;
			break;
		case LM_OPT_SHARED_SIZE:
			o.shared_size = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("lemuria-run (Lemuria) %s\n", LM_VERSION_STRING);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	o.argv = argv + optind;
	if (o.np || o.cluster_sizes || o.per_cluster || o.shared_size) {
		if (o.cluster_sizes && o.per_cluster) {
			fprintf(stderr, "lemuria-run: --clusters and "
					"--per-cluster exclude each other\n");
			return 2;
		}
		if (!o.np && !o.cluster_sizes) {
			fprintf(stderr, "lemuria-run: --per-cluster and "
					"--shared-size go with -n N\n");
			return 2;
		}
		return run_quick(&o);
	}
	if (!o.layout_path) {
		usage(stderr);
		return 2;
	}
	return run_layout(&o);
}
