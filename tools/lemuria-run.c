/* lemuria-run: starts the client ranks of a layout, like mpirun.
 *
 *   lemuria-run -c LAYOUT [--start-daemons] [--cluster NAME]... [--run ID]
 *               [--timeout SEC] [--stats] [-v] -- PROGRAM ARGS...
 *   lemuria-run -n N [--clusters A+B... | --per-cluster K] [--shared-size S]
 *               [options] -- PROGRAM ARGS...
 *   lemuria-run -c LAYOUT --hosts FILE [--agent CMD] [options] -- PROGRAM ...
 *
 * Thin main over tools/launch.c (tools/runstats.c for --stats,
 * tools/quick_layout.c for -n); the user's guide is docs/operations.md.
 * Exit status: 0 when every rank exits 0; a failed rank's exit status (128
 * + N for signal N); 124 on --timeout; 2 on a usage or layout error; 1 when
 * the daemons cannot be started or one of them dies. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "hosts.h"
#include "launch.h"
#include "lm_error.h"
#include "quick_layout.h"
#include "rankprofile.h"
#include "runstats.h"
#include "stats.h"
#include "version.h"

#define MAX_CLUSTERS 256

/* Long options without a short form. */
enum {
	LM_OPT_CLUSTERS = 256,
	LM_OPT_PER_CLUSTER,
	LM_OPT_SHARED_SIZE,
	LM_OPT_HOSTS,
	LM_OPT_AGENT,
	LM_OPT_STOP_ON_EOF,
};
#define DEFAULT_AGENT "ssh"
#define STATS_TIMEOUT_MS 2000 /* per daemon, for --stats */

extern char **environ;

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t stdin_closed; /* --stop-on-eof saw EOF */
static volatile sig_atomic_t run_over; /* --stop-on-eof read a line */

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
		"      --hosts FILE      every cluster's ranks (and its "
		"lemuriad, with -d) on\n"
		"                        its host, and with -d each reflector "
		"on its host:\n"
		"                        lines NAME HOST; one run id for all\n"
		"      --agent CMD       how --hosts runs a command on a host: "
		"CMD HOST COMMAND\n"
		"                        (default $LEMURIA_AGENT, else "
		"\"" DEFAULT_AGENT "\")\n"
		"      --stop-on-eof     stop the run when standard input "
		"closes; a line on it\n"
		"                        says rank 0's cluster is done "
		"(--hosts starts the\n"
		"                        other hosts' launchers so)\n"
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

/* The run's stops: SIGINT, SIGTERM and SIGHUP end it (after stopping
 * what it started), a closed stdout or stderr does not. */
static void catch_signals(void)
{
	struct sigaction sa;

	/* No SA_RESTART: the supervision loop's sleep must end early. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_sigpipe;
	sigaction(SIGPIPE, &sa, NULL);
}

/* Starts the layout's daemons here, or with `hosts` its reflectors on
 * their hosts through `agent` (each cluster's launcher starts its
 * lemuriad there). */
static int start_daemons(const struct lm_layout *l, const char *layout_abs,
			 const char *const *clusters, size_t nclusters,
			 const cpu_set_t *cluster_cpus, int verbose,
			 const struct lm_hosts *hosts, const char *agent,
			 lm_launch_daemons **out)
{
	char refl[LM_PATH_MAX], lemd[LM_PATH_MAX], err[512];
	struct lm_launch_daemon_opts o = {
		.reflector = refl, .lemuriad = lemd, .clusters = clusters,
		.nclusters = nclusters, .log_level = verbose ? NULL : "warn",
		.cluster_cpus = cluster_cpus,
		.verbose = verbose ? stderr : NULL,
		.hosts = hosts, .agent = agent,
	};

	if ((nclusters == 0 && find_daemon("reflector", refl, sizeof(refl))) ||
	    (!hosts && find_daemon("lemuriad", lemd, sizeof(lemd))))
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
	/* --hosts: where each daemon runs (hosts.h), through `agent` */
	const char *hosts_path, *agent;
	int stop_on_eof;
};

/* --stop-on-eof: our ranks are done, but rank 0 may still read pages
 * only our lemuriad holds; the launcher that started us (--hosts) writes
 * LM_LAUNCH_RUN_OVER once rank 0's cluster is done, or closes our stdin
 * when it stops. */
static void hold_daemons(const struct run_opts *o, bool daemons)
{
	uint64_t waited = 0;

	if (o->verbose)
		fprintf(stderr, "lemuria-run: our ranks are done; %s until "
				"the launcher that started us is done\n",
			daemons ? "keeping our lemuriad" : "waiting");
	while (!stop_signal && !run_over &&
	       (!o->timeout_ms || waited < o->timeout_ms)) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		waited += 10;
	}
}

/* The layout at `path`, and its absolute path in abs (LM_PATH_MAX):
 * 0, or 2 after a message (nothing loaded). */
static int load_layout(const char *path, struct lm_layout **l, char *abs)
{
	char err[512];

	if (lm_layout_load(path, l, err, sizeof(err))) {
		fprintf(stderr, "lemuria-run: %s\n", err);
		return 2;
	}
	if (!realpath(path, abs)) {
		fprintf(stderr, "lemuria-run: %s: %s\n", path,
			strerror(errno));
		lm_layout_free(*l);
		*l = NULL;
		return 2;
	}
	return 0;
}

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

	if (load_layout(o->layout_path, &l, layout_abs))
		return 2;
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

	catch_signals();
	if (o->daemons && start_daemons(l, layout_abs, clusters, nclusters,
					cluster_cpus, o->verbose, NULL, NULL,
					&ds)) {
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
		if (status == 0 && o->stop_on_eof)
			hold_daemons(o, ds != NULL);
		if (profile > 0)
			lm_rankprofile_end(pdir, ranks, nranks, stderr);
		if (res.msg[0] && stdin_closed)
			fprintf(stderr, "lemuria-run: standard input closed "
					"(--stop-on-eof: the launcher that "
					"started us ended the run) while our "
					"ranks ran\n");
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

/* The words a cluster's launcher runs on its host (--hosts): this
 * program, in the directory we run in, with the variables of ours that
 * start with LEMURIA_ (ssh passes none), the same layout and run id, and
 * only that cluster.  NULL when out of memory; the strings are borrowed
 * from o, `self`, `run`, `secs` and environ. */
static char **cluster_command(const struct run_opts *o, const char *self,
			     const char *cwd, const char *layout_abs,
			     const char *cluster, const char *run,
			     const char *secs, const char *program,
			     bool keep_stdin)
{
	size_t nenv = 0, nargs = 0, k = 0;
	char **cmd;

	for (char **e = environ; *e; e++)
		nenv += strncmp(*e, "LEMURIA_", 8) == 0;
	while (o->argv[nargs])
		nargs++;
	cmd = calloc(4 + nenv + 16 + nargs + 1, sizeof(*cmd));
	if (!cmd)
		return NULL;
	cmd[k++] = "env";
	cmd[k++] = "-C";
	cmd[k++] = (char *)cwd;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "LEMURIA_", 8) == 0)
			cmd[k++] = *e;
	cmd[k++] = (char *)self;
	cmd[k++] = "-c";
	cmd[k++] = (char *)layout_abs;
	cmd[k++] = "--cluster";
	cmd[k++] = (char *)cluster;
	cmd[k++] = "--run";
	cmd[k++] = (char *)run;
	if (o->daemons)
		cmd[k++] = "--start-daemons";
	if (secs) {
		cmd[k++] = "--timeout";
		cmd[k++] = (char *)secs;
	}
	if (o->pin)
		cmd[k++] = "--pin";
	if (o->batch)
		cmd[k++] = "--batch";
	if (o->verbose)
		cmd[k++] = "--verbose";
	if (!keep_stdin)
		cmd[k++] = "--stop-on-eof";
	cmd[k++] = "--";
	cmd[k++] = (char *)program;
	for (size_t i = 1; i < nargs; i++)
		cmd[k++] = o->argv[i];
	cmd[k] = NULL;
	return cmd;
}

/* --hosts: every cluster's launcher on its host, and with
 * --start-daemons every reflector on its host first, all through the
 * agent, with one run id; the exit status as run_layout's. */
static int run_hosts(const struct run_opts *o)
{
	char layout_abs[LM_PATH_MAX], self[LM_PATH_MAX], cwd[LM_PATH_MAX];
	char program[LM_PATH_MAX], run[32], secs[32], err[512];
	struct lm_launch_remote *jobs = NULL;
	char **cmds[MAX_CLUSTERS] = { NULL };
	char labels[MAX_CLUSTERS][LM_NAME_MAX + LM_HOST_MAX + 16];
	struct lm_launch_result res = { .status = 1 };
	struct lm_layout *l = NULL;
	struct lm_hosts *hosts = NULL;
	lm_launch_daemons *ds = NULL;
	lm_runstats *before = NULL;
	uint64_t run_id = o->run ? o->run : lm_launch_run_id();
	ssize_t n;
	int status = 2;

	if (o->nclusters) {
		fprintf(stderr, "lemuria-run: --hosts starts every cluster "
				"and goes without --cluster\n");
		return 2;
	}
	/* the counters are read after the ranks ended, from here: the
	 * daemons must still be up then, which those that each cluster's
	 * launcher started are not */
	if (o->stats && o->daemons) {
		fprintf(stderr, "lemuria-run: --stats with --hosts needs "
				"daemons that outlive the run: each "
				"cluster's launcher stops the lemuriad it "
				"started with its ranks, before the counters "
				"could be read.  Start the daemons as services "
				"(docs/operations.md) and leave out "
				"--start-daemons, or ask them with lemuriactl "
				"stats before and after\n");
		return 2;
	}
	/* every host runs the same paths: ours, made absolute */
	if (load_layout(o->layout_path, &l, layout_abs))
		return 2;
	if (strchr(o->argv[0], '/') && !realpath(o->argv[0], program)) {
		fprintf(stderr, "lemuria-run: %s: %s\n", o->argv[0],
			strerror(errno));
		goto out;
	}
	if (!strchr(o->argv[0], '/'))
		snprintf(program, sizeof(program), "%s", o->argv[0]);
	if (!getcwd(cwd, sizeof(cwd)) ||
	    (n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0) {
		fprintf(stderr, "lemuria-run: --hosts: cannot tell this "
				"directory or this program's path: %s\n",
			strerror(errno));
		status = 1;
		goto out;
	}
	self[n] = '\0';
	if (lm_hosts_load(o->hosts_path, l, o->daemons != 0, &hosts, err,
			  sizeof(err))) {
		fprintf(stderr, "lemuria-run: %s\n", err);
		goto out;
	}
	if (l->nclusters > MAX_CLUSTERS ||
	    !(jobs = calloc(l->nclusters, sizeof(*jobs)))) {
		fprintf(stderr, "lemuria-run: --hosts: out of memory\n");
		status = 1;
		goto out;
	}
	snprintf(run, sizeof(run), "%llu", (unsigned long long)run_id);
	/* each launcher times out by itself; ours waits a grace longer, so
	 * that theirs say why */
	snprintf(secs, sizeof(secs), "%.3f", o->timeout_ms / 1000.0);
	for (size_t i = 0; i < l->nclusters; i++) {
		const struct lm_cluster_cfg *c = &l->clusters[i];
		const char *host = lm_hosts_of(hosts, c->name);
		bool keep = c->clients > 0 && c->first_rank == 0;
		char **cmd = cluster_command(o, self, cwd, layout_abs,
					     c->name, run,
					     o->timeout_ms ? secs : NULL,
					     program, keep);

		cmds[i] = cmd ? lm_hosts_command(o->agent, host, cmd) : NULL;
		free(cmd);
		if (!cmds[i]) {
			fprintf(stderr, "lemuria-run: --hosts: out of "
					"memory\n");
			status = 1;
			goto out;
		}
		snprintf(labels[i], sizeof(labels[i]), "cluster %s on %s",
			 c->name, host);
		jobs[i] = (struct lm_launch_remote){ .label = labels[i],
						     .argv = cmds[i],
						     .keep_stdin = keep };
	}
	if (o->verbose)
		fprintf(stderr, "lemuria-run: run %s on %zu hosts through "
				"\"%s\", layout %s\n",
			run, l->nclusters, o->agent, layout_abs);
	catch_signals();
	if (o->daemons && start_daemons(l, layout_abs, NULL, 0, NULL,
					o->verbose, hosts, o->agent, &ds)) {
		status = 1;
		goto out;
	}
	before = o->stats ? stats_snapshot(l, "before") : NULL;
	status = lm_launch_remote_run(jobs, l->nclusters,
				      o->timeout_ms ? o->timeout_ms +
							      2 * LM_LAUNCH_GRACE_MS :
						      0,
				      0, ds, &stop_signal,
				      o->verbose ? stderr : NULL, &res);
	if (res.msg[0])
		fprintf(stderr, "lemuria-run: %s\n", res.msg);
	if (o->stats)
		stats_report(l, before, o->stats == 2);
out:
	lm_runstats_destroy(before);
	lm_launch_daemons_stop(ds, LM_LAUNCH_GRACE_MS);
	for (size_t i = 0; i < MAX_CLUSTERS; i++)
		lm_hosts_argv_free(cmds[i]);
	free(jobs);
	lm_hosts_free(hosts);
	lm_layout_free(l);
	return status;
}

/* --stop-on-eof: reads standard input (moved to fd `arg`; the ranks read
 * /dev/null) until it ends, then stops the run as a hang-up would.  What
 * it reads before (LM_LAUNCH_RUN_OVER) says rank 0's cluster is done: our
 * ranks finish by themselves, and then we need not keep our lemuriad. */
static void *watch_stdin(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0 ||
	       (n < 0 && errno == EINTR))
		if (n > 0)
			run_over = 1;
	stdin_closed = 1;
	stop_signal = SIGHUP; /* as a hang-up: 128 + 1 */
	return NULL;
}

static int watch_stdin_start(void)
{
	int fd = fcntl(0, F_DUPFD_CLOEXEC, 3), null = open("/dev/null",
							     O_RDONLY);
	pthread_t t;

	if (fd < 0 || null < 0 || dup2(null, 0) < 0 ||
	    pthread_create(&t, NULL, watch_stdin, (void *)(intptr_t)fd)) {
		fprintf(stderr, "lemuria-run: --stop-on-eof: cannot watch "
				"standard input: %s\n", strerror(errno));
		return 1;
	}
	close(null);
	pthread_detach(t);
	return 0;
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
		{ "hosts", required_argument, NULL, LM_OPT_HOSTS },
		{ "agent", required_argument, NULL, LM_OPT_AGENT },
		{ "stop-on-eof", no_argument, NULL, LM_OPT_STOP_ON_EOF },
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
		case LM_OPT_HOSTS:
			o.hosts_path = optarg;
			break;
		case LM_OPT_AGENT:
			o.agent = optarg;
			break;
		case LM_OPT_STOP_ON_EOF:
			o.stop_on_eof = 1;
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
	if (o.stop_on_eof && watch_stdin_start())
		return 1;
	if (o.agent && !o.hosts_path) {
		fprintf(stderr, "lemuria-run: --agent goes with --hosts\n");
		return 2;
	}
	if (o.hosts_path) {
		if (!o.agent)
			o.agent = getenv("LEMURIA_AGENT") ?
					  getenv("LEMURIA_AGENT") :
					  DEFAULT_AGENT;
		if (!o.agent[strspn(o.agent, " \t")]) {
			fprintf(stderr, "lemuria-run: --agent (or "
					"LEMURIA_AGENT) names no command\n");
			return 2;
		}
		if (o.np || o.cluster_sizes || !o.layout_path) {
			fprintf(stderr, "lemuria-run: --hosts takes the "
					"layout of -c (its addresses are the "
					"hosts'), not -n\n");
			return 2;
		}
		return run_hosts(&o);
	}
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
