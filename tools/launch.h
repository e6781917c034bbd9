/* The launcher's logic, kept out of tools/lemuria-run.c so that the unit
 * tests can drive it: which ranks run here, their environment, where the
 * daemons' programs are, starting and stopping the daemons, and the
 * supervision of the rank processes (docs/operations.md). */
#ifndef LM_LAUNCH_H
#define LM_LAUNCH_H

#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"
#include "hosts.h"

#define LM_LAUNCH_GRACE_MS 3000      /* SIGTERM, then SIGKILL after this */
#define LM_LAUNCH_PING_MS 5000       /* a daemon must answer PING by then */
#define LM_LAUNCH_TIMEOUT_STATUS 124 /* exit status after --timeout */

/* The ranks to start: every client of the layout when nclusters is 0,
 * else the clients of the named clusters, in rank order.  On success
 * *ranks is malloc'd (caller frees).  LM_EINVAL with a message in err for
 * an unknown or repeated cluster name; LM_ENOMEM. */
int lm_launch_ranks(const struct lm_layout *l, const char *const *clusters,
		    size_t nclusters, uint32_t **ranks, size_t *nranks,
		    char *err, size_t errlen);

/* Placement (--pin): the CPUs of each cluster's lemuriad and ranks.  The
 * clusters this launcher starts (every cluster of the layout when
 * nclusters is 0, else the named ones; in layout order) share out the
 * CPUs of `allowed`: with n clusters and at least n CPUs, the k-th gets
 * every n-th CPU from the k-th on; with fewer CPUs than clusters, the
 * k-th gets CPU k mod the number of CPUs.  sets[] has one entry per
 * cluster of the layout; those not started get an empty set.  Returns 0,
 * or LM_EINVAL with a message in err when `allowed` is empty or a name is
 * not in the layout. */
int lm_launch_placement(const struct lm_layout *l,
			const char *const *clusters, size_t nclusters,
			const cpu_set_t *allowed, cpu_set_t *sets, char *err,
			size_t errlen);

/* A fresh run id: microseconds of wall-clock time times 1000 plus a random
 * part, so that the ids of later launches compare greater. */
uint64_t lm_launch_run_id(void);

/* The environment of one rank: `base` (borrowed, NULL-terminated) without
 * any LM_LAYOUT, LM_RANK, LM_RUN, followed by those three.  Returns a
 * malloc'd NULL-terminated array (free with lm_launch_env_free), or NULL
 * when out of memory. */
char **lm_launch_env(char *const *base, const char *layout_abs,
		     uint32_t rank, uint64_t run);
/* Accepts NULL. */
void lm_launch_env_free(char **env);

/* Finds program `name`: in `self_dir` (the directory of lemuria-run itself;
 * may be NULL) first, else in the colon-separated `path` (may be NULL).
 * Writes the path of an executable file into out.  Returns 0, LM_ENOENT
 * or LM_ENOBUFS. */
int lm_launch_find_program(const char *name, const char *self_dir,
			   const char *path, char *out, size_t outlen);
/* The directory of the running executable (/proc/self/exe). */
int lm_launch_self_dir(char *out, size_t outlen);

/* ---- daemons ------------------------------------------------------------ */

typedef struct lm_launch_daemons lm_launch_daemons;

struct lm_launch_daemon_opts {
	const char *reflector;   /* program paths */
	const char *lemuriad;
	/* When nclusters > 0 only the lemuriads of these clusters are started
	 * (multi-host runs: reflectors are started on their own hosts). */
	const char *const *clusters;
	size_t nclusters;
	const char *log_level;   /* passed as -l; NULL: the daemons' default */
	/* One CPU set per cluster of the layout (lm_launch_placement): each
	 * lemuriad runs on its cluster's.  NULL: not placed. */
	const cpu_set_t *cluster_cpus;
	unsigned ping_ms;        /* 0: LM_LAUNCH_PING_MS */
	FILE *verbose;           /* progress lines, or NULL */
	/* Several hosts (lemuria-run --hosts): each reflector starts on its
	 * host through `agent` (hosts.h), with --stop-on-eof; no lemuriad
	 * starts here (each cluster's launcher starts its own).  NULL: every
	 * daemon here. */
	const struct lm_hosts *hosts;
	const char *agent;
};

/* Starts `reflector -c LAYOUT -n NAME` / `lemuriad -c LAYOUT -n NAME`, each
 * in its own process group and killed when the calling thread ends (as
 * the ranks are), and waits until every one answers a PING.  On
 * failure everything started is stopped, err names the daemon and the
 * cause, and the result is LM_ETIMEDOUT (no answer), LM_EIO (it exited or
 * could not be started) or LM_ENOMEM.  `l` and the strings in `o` are
 * borrowed for the call. */
int lm_launch_daemons_start(const struct lm_layout *l, const char *layout_abs,
			    const struct lm_launch_daemon_opts *o,
			    lm_launch_daemons **out, char *err,
			    size_t errlen);
/* 1 (message in msg) when a daemon has exited since it was started, else
 * 0.  Does not block. */
int lm_launch_daemons_check(lm_launch_daemons *d, char *msg, size_t msglen);
/* SIGTERM to every daemon, SIGKILL to those still running after
 * grace_ms; reaps them and frees d.  Accepts NULL. */
void lm_launch_daemons_stop(lm_launch_daemons *d, unsigned grace_ms);

/* ---- ranks -------------------------------------------------------------- */

struct lm_launch {
	char *const *argv;          /* PROGRAM ARGS..., NULL-terminated */
	char *const *environ_base;  /* environment the ranks inherit */
	const uint32_t *ranks;
	size_t nranks;
	const cpu_set_t *rank_cpus; /* nranks sets, one per rank; NULL: the
				       ranks run where the launcher may */
	bool batch;                 /* ranks under SCHED_BATCH (--batch) */
	const char *layout_abs;
	uint64_t run;
	unsigned timeout_ms;        /* 0: no time limit */
	unsigned grace_ms;          /* 0: LM_LAUNCH_GRACE_MS */
	lm_launch_daemons *daemons; /* watched: one exiting fails the run */
	/* Set to a signal number by the caller's handler: stop the run. */
	volatile sig_atomic_t *stop;
	FILE *verbose;              /* progress lines, or NULL */
};

struct lm_launch_result {
	int status;       /* what lemuria-run exits with */
	int failed_rank;  /* the rank that failed first, or -1 */
	char msg[256];    /* why the run failed ("" on success) */
};

/* Starts every rank as PROGRAM ARGS in its own process group, with the
 * environment of lm_launch_env, to be killed (SIGKILL) when the calling
 * thread ends (PR_SET_PDEATHSIG); the lowest rank keeps stdin, the others
 * read /dev/null.  Waits for all of them.  The first rank that exits with
 * a non-zero status or by a signal fails the run: the others get SIGTERM,
 * then SIGKILL after grace_ms, and the status is the rank's exit status,
 * or 128 + the signal.  Timeout: LM_LAUNCH_TIMEOUT_STATUS; *stop: 128 +
 * the signal; a watched daemon exiting, or a rank that cannot be started:
 * 1.  Returns the status (also in res). */
int lm_launch_run(const struct lm_launch *o, struct lm_launch_result *res);

/* ---- launchers on other hosts (--hosts) ---------------------------------- */

/* One cluster's launcher, run on its host through an agent. */
struct lm_launch_remote {
	const char *label;   /* "cluster c0 on node1", for messages */
	char *const *argv;   /* the agent's command (lm_hosts_command) */
	bool keep_stdin;     /* ours (the cluster of rank 0, whose main may
				read it); else a pipe (its lemuria-run has
				--stop-on-eof) into which we write
				LM_LAUNCH_RUN_OVER when that one has exited 0
				(it keeps its lemuriad, which may hold pages
				rank 0 reads, until then and until its own
				ranks are done), and whose end we close to
				stop the run */
};

/* What a --stop-on-eof launcher reads when rank 0's cluster is done. */
#define LM_LAUNCH_RUN_OVER "run over\n"

/* Starts every launcher and waits for all, as lm_launch_run does for
 * ranks: the first that exits with a non-zero status or by a signal
 * fails the run, and its status is ours (128 + N for signal N); the
 * others are told to stop (their stdin closes), then get SIGTERM and
 * SIGKILL after grace_ms.  The keep_stdin launcher exiting 0 tells the
 * others the run is over (they exit once their own ranks are done).
 * Timeout: LM_LAUNCH_TIMEOUT_STATUS; *stop: 128 + the signal; a watched
 * daemon exiting, or a launcher that cannot be started: 1.  Returns the
 * status (also in res; failed_rank is the failed launcher's index). */
int lm_launch_remote_run(const struct lm_launch_remote *jobs, size_t n,
			 unsigned timeout_ms, unsigned grace_ms,
			 lm_launch_daemons *daemons,
			 volatile sig_atomic_t *stop, FILE *verbose,
			 struct lm_launch_result *res);

#endif
