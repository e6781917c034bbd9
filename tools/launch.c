/* Launcher logic (tool side, above the transport): starts the daemons of a
 * layout and the client ranks of a run, the way mpirun does, and turns
 * what happens to them into one exit status.  Single-threaded; children
 * are polled with waitpid(pid, WNOHANG) so that only our own children are
 * ever reaped, during a run when SIGCHLD says one may have ended.
 *
 * Choices the brief left open (docs/operations.md has the user's view):
 *  - run ids grow with time (wall-clock microseconds * 1000 + a random
 *    part), so a daemon that keeps the newest run id sees later launches
 *    as newer; multi-host runs pass one id to every host (--run);
 *  - with --cluster, only those clusters' lemuriads are started; the
 *    reflectors run on their own hosts;
 *  - with --batch, the ranks run under SCHED_BATCH: woken (by their
 *    lemuriad's reply, say) they do not preempt what runs on their CPU,
 *    so a lemuriad sending a barrier's updates finishes before its
 *    clients apply them (docs/performance.md, "Placement");
 *  - with --pin, each cluster's lemuriad and ranks share a set of CPUs
 *    of their own, as if the cluster were a node: a client and its
 *    lemuriad then wake each other on the same core (cheap) and the
 *    update bytes one writes are still in that core's cache when the
 *    other reads them; reflectors are not placed (pinning one measured
 *    slower, docs/performance.md);
 *  - timeout gives status 124 (like timeout(1)), a signal to the launcher
 *    128 + N, a daemon that dies during the run or a rank that cannot be
 *    started 1. */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "hosts.h"
#include "link_config.h"
#include "lm_error.h"
#include "proto.h"
#include "rpc.h"
#include "stats.h"
#include "udp.h"

#define POLL_MS 10
/* How long a run's loop sleeps when no child ended: a child's end cuts
 * the sleep short (SIGCHLD, wake_on_child), so this bounds only how late
 * a stop signal, a daemon's end that came between the loop's look and
 * its sleep, or nothing at all is seen.  Looking every POLL_MS instead
 * cost a run of many ranks a waitpid per rank each time, on CPUs the
 * ranks and daemons share (docs/performance.md, "Where LU 8+8+8+8's time
 * goes on this host"). */
#define RUN_LOOK_MS 100

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL); /* an interrupting signal just ends it early */
}

static uint64_t now_ms(void)
{
	return lm_now_us() / 1000;
}

static void on_child(int sig)
{
	(void)sig; /* the signal's only work: it ends a nanosleep early */
}

/* Lets a child's end interrupt sleep_ms until restore_child_action. */
static void wake_on_child(struct sigaction *old)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_child;
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, old);
}

static void restore_child_action(const struct sigaction *old)
{
	sigaction(SIGCHLD, old, NULL);
}

/* A run's loop between two looks at its children (under wake_on_child):
 * RUN_LOOK_MS, or what is left of timeout_ms (0: none) since t0. */
static void await_children(uint64_t t0, unsigned timeout_ms)
{
	uint64_t waited = now_ms() - t0;

	if (timeout_ms && waited >= timeout_ms)
		return;
	sleep_ms(timeout_ms && timeout_ms - waited < RUN_LOOK_MS ?
			 (unsigned)(timeout_ms - waited) :
			 RUN_LOOK_MS);
}

/* "exited with status S" or "killed by signal N"; returns the exit status
 * the launcher reports for it. */
static int describe_status(int st, char *buf, size_t len)
{
	if (WIFSIGNALED(st)) {
		snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
	return WEXITSTATUS(st);
}

/* Writes msg to stderr from a forked child (no stdio buffers). */
static void child_say(const char *what, const char *prog)
{
	char m[512];
	int n = snprintf(m, sizeof(m), "lemuria-run: %s %s: %s\n", what, prog,
			 strerror(errno));

	if (n > 0 && write(2, m, (size_t)n) < 0)
		_exit(127);
}

/* How a child runs besides its program and environment. */
struct spawn_how {
	bool null_stdin;
	int stdin_fd;          /* > 0: the child's stdin (a pipe's end) */
	bool search_path;      /* argv[0] through PATH (an agent: ssh) */
	const cpu_set_t *cpus; /* NULL: where the launcher may */
	bool batch;            /* SCHED_BATCH */
	bool fixed_layout;     /* no address randomisation (a rank) */
};

/* fork + exec in a new process group, as `how` says.  `envp` NULL:
 * inherit and run the program at `argv[0]` as a path; else search PATH
 * (execvpe).
 *
 * The child dies with the launcher (PR_SET_PDEATHSIG, kept across exec):
 * a launcher killed by SIGKILL runs none of its clean-up, and a rank or
 * daemon it leaves behind would wait for ever, or hold its port against
 * the next run.  SIGKILL, since nobody is left to follow a SIGTERM up. */
static pid_t spawn(char *const *argv, char *const *envp,
		   const struct spawn_how *how)
{
	static const struct sched_param batch_param = { 0 };
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid != 0) {
		if (pid > 0)
			setpgid(pid, pid); /* also in the child: no race */
		return pid;
	}
	/* a launcher that died before the prctl took effect sends nothing:
	 * the child has been adopted by then */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(127);
	setpgid(0, 0);
	/* a placement or policy that cannot be had costs speed, not the
	 * run */
	if (how->cpus && sched_setaffinity(0, sizeof(*how->cpus),
					   how->cpus) != 0)
		child_say("cannot place on its CPUs", argv[0]);
	if (how->batch && sched_setscheduler(0, SCHED_BATCH, &batch_param))
		child_say("cannot run as SCHED_BATCH", argv[0]);
	/* every rank loads the program and its libraries at the same
	 * addresses, as threads share them: a function or string pointer
	 * one rank stores in shared memory works in the others (SPLASH-2's
	 * raytrace does so; docs/operations.md).  Kept across exec. */
	if (how->fixed_layout &&
	    personality((unsigned long)personality(0xffffffff) |
			ADDR_NO_RANDOMIZE) == -1)
		child_say("cannot turn address randomisation off for",
			  argv[0]);
	if (how->null_stdin) {
		int fd = open("/dev/null", O_RDONLY);

		if (fd >= 0 && fd != 0) {
			dup2(fd, 0);
			close(fd);
		}
	}
	if (how->stdin_fd > 0) {
		dup2(how->stdin_fd, 0);
		close(how->stdin_fd);
	}
	if (envp)
		execvpe(argv[0], argv, envp);
	else if (how->search_path)
		execvp(argv[0], argv);
	else
		execv(argv[0], argv);
	child_say("cannot run", argv[0]);
	_exit(127);
}

/* Polls `pid` until it is reaped or `ms` passed; 1 when reaped. */
static int reap_within(pid_t pid, int *status, unsigned ms)
{
	uint64_t until = now_ms() + ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD))
			return 1;
		if (now_ms() >= until)
			return 0;
		sleep_ms(POLL_MS);
	}
}

/* ---- ranks, environment, programs ------------------------------------- */

/* Whether this launcher starts cluster `name`: every cluster when n is 0,
 * else the named ones. */
static bool started_here(const char *name, const char *const *clusters,
			 size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(clusters[i], name) == 0)
			return true;
	return n == 0;
}

int lm_launch_ranks(const struct lm_layout *l, const char *const *clusters,
		    size_t nclusters, uint32_t **ranks, size_t *nranks,
		    char *err, size_t errlen)
{
	uint32_t *r;
	size_t n = 0;

	for (size_t i = 0; i < nclusters; i++) {
		if (!lm_layout_cluster(l, clusters[i])) {
			snprintf(err, errlen, "no cluster \"%s\" in %s",
				 clusters[i], l->path);
			return LM_EINVAL;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(clusters[i], clusters[j]) == 0) {
				snprintf(err, errlen,
					 "cluster \"%s\" named twice",
					 clusters[i]);
				return LM_EINVAL;
			}
	}
	r = malloc((l->nprocs ? l->nprocs : 1) * sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return LM_ENOMEM;
	}
	for (size_t c = 0; c < l->nclusters; c++) {
		const struct lm_cluster_cfg *cc = &l->clusters[c];
		bool wanted = started_here(cc->name, clusters, nclusters);

		for (uint32_t k = 0; wanted && k < cc->clients; k++)
			r[n++] = cc->first_rank + k;
	}
	*ranks = r;
	*nranks = n;
	return 0;
}

int lm_launch_placement(const struct lm_layout *l,
			const char *const *clusters, size_t nclusters,
			const cpu_set_t *allowed, cpu_set_t *sets, char *err,
			size_t errlen)
{
	int cpu[CPU_SETSIZE];
	size_t ncpus = 0, n = nclusters ? nclusters : l->nclusters, k = 0;

	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, allowed))
			cpu[ncpus++] = c;
	if (ncpus == 0) {
		snprintf(err, errlen, "no CPU to place the clusters on");
		return LM_EINVAL;
	}
	for (size_t i = 0; i < nclusters; i++)
		if (!lm_layout_cluster(l, clusters[i])) {
			snprintf(err, errlen, "no cluster \"%s\" in %s",
				 clusters[i], l->path);
			return LM_EINVAL;
		}
	for (size_t c = 0; c < l->nclusters; c++) {
		CPU_ZERO(&sets[c]);
		if (!started_here(l->clusters[c].name, clusters, nclusters))
			continue;
		if (ncpus < n)
			CPU_SET(cpu[k % ncpus], &sets[c]);
		for (size_t j = k; ncpus >= n && j < ncpus; j += n)
			CPU_SET(cpu[j], &sets[c]);
		k++;
	}
	return 0;
}

uint64_t lm_launch_run_id(void)
{
	struct timeval tv;
	uint32_t rnd = 0;

	gettimeofday(&tv, NULL);
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint32_t)getpid() * 2654435761u ^ (uint32_t)lm_now_us();
	return ((uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec) * 1000u +
	       rnd % 1000u;
}

static bool is_lm_var(const char *entry)
{
	static const char *const names[] = { "LM_LAYOUT=", "LM_RANK=",
					     "LM_RUN=" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strncmp(entry, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

char **lm_launch_env(char *const *base, const char *layout_abs,
		     uint32_t rank, uint64_t run)
{
	size_t n = 0, k = 0;
	char **env;

	while (base && base[n])
		n++;
	env = calloc(n + 4, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (is_lm_var(base[i]))
			continue;
		if (!(env[k++] = strdup(base[i])))
			goto fail;
	}
	if (asprintf(&env[k++], "LM_LAYOUT=%s", layout_abs) < 0 ||
	    asprintf(&env[k++], "LM_RANK=%u", rank) < 0 ||
	    asprintf(&env[k++], "LM_RUN=%llu", (unsigned long long)run) < 0)
		goto fail;
	return env;
fail:
	env[k - 1] = NULL; /* asprintf leaves it undefined on failure */
	lm_launch_env_free(env);
	return NULL;
}

void lm_launch_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

static bool executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

int lm_launch_find_program(const char *name, const char *self_dir,
			   const char *path, char *out, size_t outlen)
{
	const char *p = path;

	if (self_dir) {
		if ((size_t)snprintf(out, outlen, "%s/%s", self_dir, name) >=
		    outlen)
			return LM_ENOBUFS;
		if (executable_file(out))
			return 0;
	}
	while (p) {
		const char *colon = strchr(p, ':');
		size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
		int w = dlen ? snprintf(out, outlen, "%.*s/%s", (int)dlen, p,
					name)
			     : snprintf(out, outlen, "%s", name);

		if (w >= 0 && (size_t)w < outlen && executable_file(out))
			return 0;
		p = colon ? colon + 1 : NULL;
	}
	return LM_ENOENT;
}

int lm_launch_self_dir(char *out, size_t outlen)
{
	ssize_t n = readlink("/proc/self/exe", out, outlen);
	char *slash;

	if (n <= 0 || (size_t)n >= outlen)
		return LM_EIO;
	out[n] = '\0';
	slash = strrchr(out, '/');
	if (!slash)
		return LM_EIO;
	*slash = '\0';
	if (out[0] == '\0')
		strcpy(out, "/");
	return 0;
}

/* ---- daemons ------------------------------------------------------------ */

struct daemon_proc {
	char label[LM_NAME_MAX + 16]; /* "reflector r0" */
	char name[LM_NAME_MAX];
	enum lm_role role;
	uint16_t id;
	struct sockaddr_in addr;
	pid_t pid;
	bool reaped;
	int status;
	int eof_fd;   /* the write end of its stdin (--stop-on-eof), or -1 */
};

struct lm_launch_daemons {
	struct daemon_proc *p;
	size_t n;
};

/* One PING through a fresh endpoint: 0, LM_EBADMSG (someone else
 * answers), or a transport error. */
static int ping_once(const struct lm_layout *l, const lm_auth *auth,
		     const struct daemon_proc *d, int timeout_ms)
{
	struct lm_rel_config rcfg;
	struct lm_msg_pong pong;
	uint8_t req[16];
	void *reply = NULL;
	size_t rlen = 0;
	char err[256];
	int rc, len = lm_msg_encode_ping(req, sizeof(req));
	lm_rpc *rpc;

	/* a daemon not up yet: given up on fast */
	lm_link_tool_config(l, lm_stats_tool_id(l, (uint32_t)getpid()), auth,
			    &rcfg);
	if (len < 0)
		return len;
	rpc = lm_rpc_create(&d->addr, d->id, &rcfg, NULL, err, sizeof(err));
	if (!rpc)
		return LM_EIO;
	rc = lm_rpc_call(rpc, req, (size_t)len, &reply, &rlen, timeout_ms);
	if (rc == 0 && (lm_msg_decode_pong(reply, rlen, &pong) != 0 ||
			pong.role != d->role ||
			strncmp(pong.name, d->name, sizeof(pong.name)) != 0))
		rc = LM_EBADMSG;
	free(reply);
	lm_rpc_destroy(rpc);
	return rc;
}

/* A pipe whose read end (fds[0]) becomes a child's stdin; both ends
 * close on exec, so that no other child holds the write end open. */
static int eof_pipe(int fds[2])
{
	return pipe2(fds, O_CLOEXEC);
}

/* Starts one daemon: here, or on `host` through `agent` (hosts.h) with
 * --stop-on-eof and a pipe as its stdin, whose write end we keep: closing
 * it stops the daemon wherever it runs, even where the agent would not
 * pass a signal on (ssh). */
static int add_daemon(lm_launch_daemons *ds, const char *prog,
		      const char *layout_abs, const char *log_level,
		      enum lm_role role, const char *name, uint16_t id,
		      const struct sockaddr_in *addr, const cpu_set_t *cpus,
		      const char *agent, const char *host, FILE *verbose)
{
	struct daemon_proc *d = &ds->p[ds->n];
	struct spawn_how how = { .null_stdin = true, .cpus = cpus };
	char *argv[10], **run = argv;
	int k = 0, fds[2] = { -1, -1 };

	*d = (struct daemon_proc){ .role = role, .id = id, .addr = *addr,
				   .eof_fd = -1 };
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->label, sizeof(d->label), "%s %s", lm_role_name(role),
		 name);
	argv[k++] = (char *)prog;
	argv[k++] = "-c";
	argv[k++] = (char *)layout_abs;
	argv[k++] = "-n";
	argv[k++] = d->name;
	if (log_level) {
		argv[k++] = "-l";
		argv[k++] = (char *)log_level;
	}
	if (host) {
		argv[k++] = "--stop-on-eof";
		argv[k] = NULL;
		if (!(run = lm_hosts_command(agent, host, argv))) {
			errno = ENOMEM;
			return LM_ENOMEM;
		}
		if (eof_pipe(fds) != 0) {
			lm_hosts_argv_free(run);
			return LM_EIO;
		}
		how = (struct spawn_how){ .stdin_fd = fds[0],
					  .search_path = true };
	}
	argv[k] = NULL;
	d->pid = spawn(run, NULL, &how);
	if (run != argv)
		lm_hosts_argv_free(run);
	if (fds[0] >= 0)
		close(fds[0]);
	if (d->pid < 0) {
		if (fds[1] >= 0)
			close(fds[1]);
		return LM_EIO;
	}
	d->eof_fd = fds[1];
	ds->n++;
	if (verbose && host)
		fprintf(verbose, "lemuria-run: started %s on %s through "
				 "\"%s\" (pid %d)\n",
			d->label, host, agent, (int)d->pid);
	else if (verbose)
		fprintf(verbose, "lemuria-run: started %s (pid %d)\n",
			d->label, (int)d->pid);
	return 0;
}

/* 1 when d has exited (reaped now or earlier). */
static int daemon_exited(struct daemon_proc *d)
{
	if (!d->reaped && waitpid(d->pid, &d->status, WNOHANG) == d->pid)
		d->reaped = true;
	return d->reaped;
}

static int wait_answers(const struct lm_layout *l, lm_launch_daemons *ds,
			unsigned ping_ms, char *err, size_t errlen)
{
	uint64_t deadline = now_ms() + ping_ms;
	lm_auth *auth = NULL;
	char how[64], abuf[32];
	int rc = 0;

	if (l->auth && !(auth = lm_auth_create(l->key))) {
		snprintf(err, errlen, "cannot initialise authentication");
		return LM_ENOMEM;
	}
	for (size_t i = 0; i < ds->n && rc == 0; i++) {
		struct daemon_proc *d = &ds->p[i];

		for (;;) {
			uint64_t t = now_ms();
			int r;

			if (daemon_exited(d)) {
				describe_status(d->status, how, sizeof(how));
				snprintf(err, errlen,
					 "%s (pid %d) %s before answering",
					 d->label, (int)d->pid, how);
				rc = LM_EIO;
				break;
			}
			if (t >= deadline) {
				lm_addr_str(&d->addr, abuf, sizeof(abuf));
				snprintf(err, errlen,
					 "%s (pid %d) did not answer at %s "
					 "within %u ms",
					 d->label, (int)d->pid, abuf, ping_ms);
				rc = LM_ETIMEDOUT;
				break;
			}
			r = ping_once(l, auth, d,
				      (int)(deadline - t < 300 ? deadline - t
							       : 300));
			if (r == 0)
				break;
			if (r == LM_EBADMSG) {
				lm_addr_str(&d->addr, abuf, sizeof(abuf));
				snprintf(err, errlen,
					 "%s: another daemon answers at %s",
					 d->label, abuf);
				rc = LM_EIO;
				break;
			}
			sleep_ms(50);
		}
	}
	/* A daemon that could not bind may exit while an older instance at
	 * the same address answered for it. */
	for (size_t i = 0; i < ds->n && rc == 0; i++)
		if (daemon_exited(&ds->p[i])) {
			describe_status(ds->p[i].status, how, sizeof(how));
			snprintf(err, errlen, "%s (pid %d) %s at start-up",
				 ds->p[i].label, (int)ds->p[i].pid, how);
			rc = LM_EIO;
		}
	lm_auth_destroy(auth);
	return rc;
}

int lm_launch_daemons_start(const struct lm_layout *l, const char *layout_abs,
			    const struct lm_launch_daemon_opts *o,
			    lm_launch_daemons **out, char *err,
			    size_t errlen)
{
	lm_launch_daemons *ds = calloc(1, sizeof(*ds));
	int rc = 0;

	*out = NULL;
	if (ds)
		ds->p = calloc(l->nreflectors + l->nclusters + 1,
			       sizeof(*ds->p));
	if (!ds || !ds->p) {
		snprintf(err, errlen, "out of memory");
		rc = LM_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; o->nclusters == 0 && i < l->nreflectors; i++) {
		const struct lm_reflector_cfg *r = &l->reflectors[i];

		rc = add_daemon(ds, o->reflector, layout_abs, o->log_level,
				LM_ROLE_REFLECTOR, r->name, r->id, &r->addr,
				NULL, o->agent,
				o->hosts ? lm_hosts_of(o->hosts, r->name) :
					   NULL,
				o->verbose);
		if (rc) {
			snprintf(err, errlen, "cannot start reflector %s: %s",
				 r->name, strerror(errno));
			goto fail;
		}
	}
	for (size_t i = 0; i < l->nclusters; i++) {
		const struct lm_cluster_cfg *c = &l->clusters[i];

		/* on several hosts, each cluster's launcher starts its own */
		if (o->hosts ||
		    !started_here(c->name, o->clusters, o->nclusters))
			continue;
		rc = add_daemon(ds, o->lemuriad, layout_abs, o->log_level,
				LM_ROLE_LEMURIAD, c->name, c->id, &c->addr,
				o->cluster_cpus ? &o->cluster_cpus[i] : NULL,
				NULL, NULL, o->verbose);
		if (rc) {
			snprintf(err, errlen, "cannot start lemuriad %s: %s",
				 c->name, strerror(errno));
			goto fail;
		}
	}
	rc = wait_answers(l, ds, o->ping_ms ? o->ping_ms : LM_LAUNCH_PING_MS,
			  err, errlen);
	if (rc)
		goto fail;
	*out = ds;
	return 0;
fail:
	lm_launch_daemons_stop(ds, LM_LAUNCH_GRACE_MS);
	return rc;
}

int lm_launch_daemons_check(lm_launch_daemons *ds, char *msg, size_t msglen)
{
	char how[64];

	for (size_t i = 0; ds && i < ds->n; i++) {
		struct daemon_proc *d = &ds->p[i];

		if (d->reaped || !daemon_exited(d))
			continue;
		describe_status(d->status, how, sizeof(how));
		snprintf(msg, msglen, "%s (pid %d) %s during the run",
			 d->label, (int)d->pid, how);
		return 1;
	}
	return 0;
}

void lm_launch_daemons_stop(lm_launch_daemons *ds, unsigned grace_ms)
{
	uint64_t until = now_ms() + grace_ms;

	if (!ds)
		return;
	for (size_t i = 0; i < ds->n; i++) {
		if (ds->p[i].eof_fd >= 0)
			close(ds->p[i].eof_fd); /* a remote one: its EOF */
		if (!daemon_exited(&ds->p[i]))
			kill(-ds->p[i].pid, SIGTERM);
	}
	for (size_t i = 0; i < ds->n; i++) {
		struct daemon_proc *d = &ds->p[i];
		uint64_t t = now_ms();

		if (d->reaped)
			continue;
		if (reap_within(d->pid, &d->status,
				(unsigned)(until > t ? until - t : 0))) {
			d->reaped = true;
			continue;
		}
		kill(-d->pid, SIGKILL);
		d->reaped = reap_within(d->pid, &d->status, 1000);
	}
	free(ds->p);
	free(ds);
}

/* ---- ranks -------------------------------------------------------------- */

struct rank_proc {
	uint32_t rank;
	pid_t pid;
	bool reaped;
	int status;
};

/* SIGTERM to the process group of every rank, SIGKILL to those still
 * running after grace_ms; reaps them. */
static void stop_ranks(struct rank_proc *p, size_t n, unsigned grace_ms)
{
	uint64_t until = now_ms() + grace_ms;

	for (size_t i = 0; i < n; i++)
		if (p[i].pid > 0)
			kill(-p[i].pid, SIGTERM); /* its children too */
	for (size_t i = 0; i < n; i++) {
		uint64_t t = now_ms();

		if (p[i].pid <= 0 || p[i].reaped)
			continue;
		if (reap_within(p[i].pid, &p[i].status,
				(unsigned)(until > t ? until - t : 0))) {
			p[i].reaped = true;
			continue;
		}
		kill(-p[i].pid, SIGKILL);
		p[i].reaped = reap_within(p[i].pid, &p[i].status, 1000);
	}
}

static int start_ranks(const struct lm_launch *o, struct rank_proc *p,
		       struct lm_launch_result *res)
{
	uint32_t first = UINT32_MAX;

	for (size_t i = 0; i < o->nranks; i++)
		if (o->ranks[i] < first)
			first = o->ranks[i];
	for (size_t i = 0; i < o->nranks; i++) {
		char **env = lm_launch_env(o->environ_base, o->layout_abs,
					   o->ranks[i], o->run);
		struct spawn_how how = {
			.null_stdin = o->ranks[i] != first,
			.cpus = o->rank_cpus ? &o->rank_cpus[i] : NULL,
			.batch = o->batch,
			.fixed_layout = true,
		};

		p[i].rank = o->ranks[i];
		p[i].pid = env ? spawn(o->argv, env, &how) : -1;
		lm_launch_env_free(env);
		if (p[i].pid < 0) {
			snprintf(res->msg, sizeof(res->msg),
				 "cannot start rank %u: %s", o->ranks[i],
				 env ? strerror(errno) : "out of memory");
			res->failed_rank = (int)o->ranks[i];
			res->status = 1;
			return -1;
		}
		if (o->verbose)
			fprintf(o->verbose, "lemuria-run: rank %u is pid %d\n",
				o->ranks[i], (int)p[i].pid);
	}
	return 0;
}

int lm_launch_run(const struct lm_launch *o, struct lm_launch_result *res)
{
	struct rank_proc *p = calloc(o->nranks ? o->nranks : 1, sizeof(*p));
	unsigned grace = o->grace_ms ? o->grace_ms : LM_LAUNCH_GRACE_MS;
	uint64_t t0 = now_ms();
	size_t running = o->nranks;
	bool stop_seen = false;
	struct sigaction old_child;
	char how[64];

	*res = (struct lm_launch_result){ .status = 0, .failed_rank = -1 };
	if (!p) {
		snprintf(res->msg, sizeof(res->msg), "out of memory");
		return res->status = 1;
	}
	wake_on_child(&old_child);
	if (start_ranks(o, p, res) != 0)
		goto stop;
	while (running > 0) {
		for (size_t i = 0; i < o->nranks; i++) {
			struct rank_proc *r = &p[i];
			int st;

			if (r->reaped || waitpid(r->pid, &r->status,
						 WNOHANG) != r->pid)
				continue;
			r->reaped = true;
			running--;
			st = r->status;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				if (o->verbose)
					fprintf(o->verbose,
						"lemuria-run: rank %u exited "
						"with status 0\n", r->rank);
				continue;
			}
			res->status = describe_status(st, how, sizeof(how));
			res->failed_rank = (int)r->rank;
			snprintf(res->msg, sizeof(res->msg),
				 "rank %u (pid %d) %s", r->rank, (int)r->pid,
				 how);
			goto stop;
		}
		if (running == 0)
			break;
		/* one more look first: ranks that ended while the stop came
		 * (a --stop-on-eof launcher told the run is over as its last
		 * ranks exit) ended well */
		if (o->stop && *o->stop && !stop_seen) {
			stop_seen = true;
			continue;
		}
		if (o->stop && *o->stop) {
			res->status = 128 + (int)*o->stop;
			snprintf(res->msg, sizeof(res->msg),
				 "interrupted by signal %d; stopping the run",
				 (int)*o->stop);
			goto stop;
		}
		if (o->timeout_ms && now_ms() - t0 >= o->timeout_ms) {
			res->status = LM_LAUNCH_TIMEOUT_STATUS;
			snprintf(res->msg, sizeof(res->msg),
				 "timed out after %.1f s; stopping %zu ranks",
				 o->timeout_ms / 1000.0, running);
			goto stop;
		}
		if (lm_launch_daemons_check(o->daemons, res->msg,
					    sizeof(res->msg))) {
			res->status = 1;
			goto stop;
		}
		await_children(t0, o->timeout_ms);
	}
	restore_child_action(&old_child);
	free(p);
	return res->status;
stop:
	restore_child_action(&old_child);
	stop_ranks(p, o->nranks, grace);
	free(p);
	return res->status;
}

/* ---- launchers on other hosts --------------------------------------------- */

static void close_eof_fds(int *eof_fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (eof_fds[i] >= 0) {
			close(eof_fds[i]);
			eof_fds[i] = -1;
		}
}

/* Writes LM_LAUNCH_RUN_OVER into every stop pipe.  A launcher that has
 * exited already needs no telling: its EPIPE (SIGPIPE is caught) is
 * ignored. */
static void tell_run_over(const int *eof_fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ssize_t w;

		if (eof_fds[i] < 0)
			continue;
		w = write(eof_fds[i], LM_LAUNCH_RUN_OVER,
			  sizeof(LM_LAUNCH_RUN_OVER) - 1);
		(void)w;
	}
}

/* Closes the stop pipes, then stops the agents as stop_ranks does. */
static void stop_remote(struct rank_proc *p, int *eof_fds, size_t n,
			unsigned grace_ms)
{
	close_eof_fds(eof_fds, n);
	/* a launcher that saw its stdin close stops its ranks and daemons
	 * and exits: the grace before the SIGTERM is its */
	uint64_t until = now_ms() + grace_ms;

	for (size_t i = 0; i < n; i++) {
		while (p[i].pid > 0 && !p[i].reaped && now_ms() < until) {
			if (waitpid(p[i].pid, &p[i].status, WNOHANG) ==
			    p[i].pid)
				p[i].reaped = true;
			else
				sleep_ms(POLL_MS);
		}
	}
	stop_ranks(p, n, grace_ms);
}

int lm_launch_remote_run(const struct lm_launch_remote *jobs, size_t n,
			 unsigned timeout_ms, unsigned grace_ms,
			 lm_launch_daemons *daemons,
			 volatile sig_atomic_t *stop, FILE *verbose,
			 struct lm_launch_result *res)
{
	struct rank_proc *p = calloc(n ? n : 1, sizeof(*p));
	int *eof_fds = calloc(n ? n : 1, sizeof(*eof_fds));
	uint64_t t0 = now_ms();
	size_t running = 0;
	struct sigaction old_child;
	char how[64];

	*res = (struct lm_launch_result){ .status = 0, .failed_rank = -1 };
	if (!grace_ms)
		grace_ms = LM_LAUNCH_GRACE_MS;
	if (!p || !eof_fds) {
		free(p);
		free(eof_fds);
		snprintf(res->msg, sizeof(res->msg), "out of memory");
		return res->status = 1;
	}
	for (size_t i = 0; i < n; i++)
		eof_fds[i] = -1;
	wake_on_child(&old_child);
	for (size_t i = 0; i < n; i++) {
		struct spawn_how sh = { .search_path = true };
		int fds[2] = { -1, -1 };

		p[i].rank = (uint32_t)i;
		if (!jobs[i].keep_stdin && eof_pipe(fds) == 0)
			sh.stdin_fd = fds[0];
		p[i].pid = jobs[i].keep_stdin || fds[0] >= 0 ?
				   spawn(jobs[i].argv, NULL, &sh) : -1;
		if (fds[0] >= 0)
			close(fds[0]);
		eof_fds[i] = fds[1];
		if (p[i].pid < 0) {
			snprintf(res->msg, sizeof(res->msg),
				 "cannot start %s through \"%s\": %s",
				 jobs[i].label, jobs[i].argv[0],
				 strerror(errno));
			res->failed_rank = (int)i;
			res->status = 1;
			goto stop;
		}
		running++;
		if (verbose)
			fprintf(verbose, "lemuria-run: started %s (pid %d)\n",
				jobs[i].label, (int)p[i].pid);
	}
	while (running > 0) {
		for (size_t i = 0; i < n; i++) {
			struct rank_proc *r = &p[i];

			if (r->reaped || waitpid(r->pid, &r->status,
						 WNOHANG) != r->pid)
				continue;
			r->reaped = true;
			running--;
			if (WIFEXITED(r->status) &&
			    WEXITSTATUS(r->status) == 0) {
				if (verbose)
					fprintf(verbose, "lemuria-run: %s "
						"exited with status 0\n",
						jobs[i].label);
				/* rank 0's host is done: the others may
				 * stop their daemons once their own ranks
				 * are done (not before: a rank still
				 * running there ends by itself) */
				if (jobs[i].keep_stdin)
					tell_run_over(eof_fds, n);
				continue;
			}
			res->status = describe_status(r->status, how,
						      sizeof(how));
			res->failed_rank = (int)i;
			snprintf(res->msg, sizeof(res->msg), "%s %s",
				 jobs[i].label, how);
			goto stop;
		}
		if (running == 0)
			break;
		if (stop && *stop) {
			res->status = 128 + (int)*stop;
			snprintf(res->msg, sizeof(res->msg),
				 "interrupted by signal %d; stopping every "
				 "host's launcher", (int)*stop);
			goto stop;
		}
		if (timeout_ms && now_ms() - t0 >= timeout_ms) {
			res->status = LM_LAUNCH_TIMEOUT_STATUS;
			snprintf(res->msg, sizeof(res->msg),
				 "timed out after %.1f s; stopping %zu hosts' "
				 "launchers", timeout_ms / 1000.0, running);
			goto stop;
		}
		if (lm_launch_daemons_check(daemons, res->msg,
					    sizeof(res->msg))) {
			res->status = 1;
			goto stop;
		}
		await_children(t0, timeout_ms);
	}
	restore_child_action(&old_child);
	stop_remote(p, eof_fds, n, grace_ms);
	free(p);
	free(eof_fds);
	return res->status;
stop:
	restore_child_action(&old_child);
	stop_remote(p, eof_fds, n, grace_ms);
	free(p);
	free(eof_fds);
	return res->status;
}
