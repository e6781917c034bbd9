/* Transport benchmark: request/reply round trip of the reliable transport
 * (lm_rpc client -> lm_evnode echo server) against bare UDP on loopback,
 * with and without the MAC, all measured in one run so that the ratios
 * compare like with like (DESIGN.md section 7).  The bare round trip is
 * measured twice: to an echo thread where the scheduler puts it, and to
 * an echo process sharing one CPU with the caller, as a client and its
 * lemuriad do under lemuria-run --pin (the baseline of bench/micro's
 * placed read faults; on the 2-vCPU hosts the unplaced figure moves
 * between a same-CPU and a cross-CPU round trip from run to run).
 *
 *   transport [-n ITER] [-r ROUNDS] [-o FILE.csv] */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "evnode.h"
#include "lm_error.h"
#include "rpc.h"
#include "udp.h"

#define SERVER_ID 1
#define CLIENT_ID 100
#define BENCH_MTU 65000
#define WARMUP 200
#define CALL_TIMEOUT_MS 5000

static const size_t payloads[] = { 64, 4096, 8192 };
#define NPAYLOADS (sizeof(payloads) / sizeof(payloads[0]))

enum mode {
	MODE_BARE,    /* blocking send + recv on a connected UDP socket */
	MODE_ONE_CPU, /* the same to an echo process on the caller's CPU */
	MODE_AUTH,    /* lm_rpc, MAC on every datagram */
	MODE_NOAUTH,  /* lm_rpc, no MAC */
	MODE_COUNT
};

static const char *const mode_names[MODE_COUNT] = { "bare_udp",
						    "bare_udp_one_cpu",
						    "transport_auth",
						    "transport_noauth" };

static const uint8_t bench_key[LM_KEY_BYTES] = {
	'l', 'e', 'm', 'u', 'r', 'i', 'a', '-', 'b', 'e', 'n', 'c', 'h', 0, 0, 1,
	2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* --- bare UDP echoes: a thread, and a process on the caller's CPU ------ */

/* Bounds every blocking receive, so that a lost datagram cannot hang the
 * benchmark. */
static int set_recv_timeout(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* An echo's socket: bound to a free loopback port (*addr), its receives
 * timing out every 200 ms.  Returns the descriptor or -1. */
static int echo_socket(struct sockaddr_in *addr)
{
	socklen_t alen = sizeof(*addr);
	int fd;

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0 ||
	    set_recv_timeout(fd, 200) < 0 ||
	    getsockname(fd, (struct sockaddr *)addr, &alen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Echoes every datagram on fd back to its sender until an empty one
 * comes, or until gone(ctx) says so when a receive times out (the empty
 * datagram may be lost). */
static void echo_loop(int fd, bool (*gone)(void *ctx), void *ctx)
{
	static uint8_t buf[65536];
	struct sockaddr_in src;
	socklen_t slen;
	ssize_t n;

	for (;;) {
		slen = sizeof(src);
		n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&src,
			     &slen);
		if (n == 0 || (n < 0 && gone(ctx)))
			return;
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return;
		sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&src, slen);
	}
}

/* A client of the echo at addr: a connected socket whose receives time
 * out after 1 s.  Returns the descriptor, or -1 with errno set. */
static int echo_client(const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err;

	if (fd < 0)
		return -1;
	if (set_recv_timeout(fd, 1000) < 0 ||
	    connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/* The empty datagram that ends the echo at addr. */
static void echo_send_stop(const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0) {
		sendto(fd, "", 0, 0, (const struct sockaddr *)addr,
		       sizeof(*addr));
		close(fd);
	}
}

struct bare_echo {
	int fd;
	struct sockaddr_in addr;
	pthread_t thread;
	bool stop; /* atomic */
};

static bool bare_echo_stopped(void *arg)
{
	struct bare_echo *b = arg;

	return __atomic_load_n(&b->stop, __ATOMIC_RELAXED);
}

static void *bare_echo_main(void *arg)
{
	struct bare_echo *b = arg;

	echo_loop(b->fd, bare_echo_stopped, b);
	return NULL;
}

static int bare_echo_start(struct bare_echo *b)
{
	memset(b, 0, sizeof(*b));
	b->fd = echo_socket(&b->addr);
	if (b->fd < 0)
		return -1;
	return pthread_create(&b->thread, NULL, bare_echo_main, b) ? -1 : 0;
}

static void bare_echo_stop(struct bare_echo *b)
{
	__atomic_store_n(&b->stop, true, __ATOMIC_RELAXED);
	echo_send_stop(&b->addr);
	pthread_join(b->thread, NULL);
	close(b->fd);
}

struct one_cpu_echo {
	pid_t pid;
	struct sockaddr_in addr;
	cpu_set_t cpu;  /* the one CPU of both */
	cpu_set_t mine; /* the caller's own set, outside MODE_ONE_CPU */
};

/* The child's parent, to see it gone. */
static pid_t one_cpu_parent;

static bool one_cpu_orphaned(void *ctx)
{
	(void)ctx;
	return getppid() != one_cpu_parent;
}

/* Forks the echo onto the lowest CPU the caller may run on. */
static int one_cpu_echo_start(struct one_cpu_echo *e)
{
	int fd, cpu = 0;

	memset(e, 0, sizeof(*e));
	e->pid = -1;
	if (sched_getaffinity(0, sizeof(e->mine), &e->mine) < 0)
		return -1;
	while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &e->mine))
		cpu++;
	CPU_ZERO(&e->cpu);
	CPU_SET(cpu < CPU_SETSIZE ? cpu : 0, &e->cpu);
	fd = echo_socket(&e->addr);
	if (fd < 0)
		return -1;
	one_cpu_parent = getpid();
	fflush(NULL);
	e->pid = fork();
	if (e->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (sched_setaffinity(0, sizeof(e->cpu), &e->cpu) < 0)
			_exit(1);
		echo_loop(fd, one_cpu_orphaned, NULL);
		_exit(0);
	}
	close(fd);
	return e->pid < 0 ? -1 : 0;
}

/* Puts the caller on the echo's CPU (on) or back on its own set. */
static int one_cpu_place(const struct one_cpu_echo *e, bool on)
{
	const cpu_set_t *set = on ? &e->cpu : &e->mine;

	return sched_setaffinity(0, sizeof(*set), set);
}

static void one_cpu_echo_stop(struct one_cpu_echo *e)
{
	if (e->pid <= 0)
		return;
	echo_send_stop(&e->addr);
	/* it ends within one receive timeout; then it is killed */
	for (int i = 0; i < 50; i++) {
		if (waitpid(e->pid, NULL, WNOHANG) == e->pid)
			return;
		usleep(10000);
	}
	kill(e->pid, SIGKILL);
	waitpid(e->pid, NULL, 0);
}

/* --- transport echo servers (auth and no auth) on one loop thread ------ */

struct echo_servers {
	struct event_base *base;
	lm_evnode *node[2]; /* [0]: auth on, [1]: auth off */
	struct sockaddr_in addr[2];
	struct event *stop_ev;
	int stop_pipe[2];
	pthread_t thread;
};

static void echo_deliver(void *ctx, const struct lm_rel_msg *msg)
{
	lm_evnode **node = ctx;

	if (msg->kind == LM_REL_REQUEST)
		lm_evnode_reply(*node, msg->peer, msg->req_id, msg->data,
				msg->len);
}

static void stop_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

static void *servers_main(void *arg)
{
	struct echo_servers *s = arg;

	event_base_dispatch(s->base);
	return NULL;
}

static void server_config(struct lm_rel_config *cfg, uint16_t self,
			  const lm_auth *auth)
{
	lm_rel_config_default(cfg, self);
	cfg->max_peer_id = CLIENT_ID;
	cfg->auth = auth;
	cfg->transport.mtu = BENCH_MTU;
}

static int servers_start(struct echo_servers *s, const lm_auth *auth)
{
	struct lm_evnode_callbacks cbs = { .deliver = echo_deliver };
	struct lm_rel_config cfg;
	char err[256];

	/* A plain base, as the daemons create it. */
	s->base = event_base_new();
	if (!s->base)
		return -1;
	for (int i = 0; i < 2; i++) {
		server_config(&cfg, SERVER_ID, i == 0 ? auth : NULL);
		memset(&s->addr[i], 0, sizeof(s->addr[i]));
		s->addr[i].sin_family = AF_INET;
		s->addr[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		s->node[i] = lm_evnode_create(s->base, &s->addr[i], &cfg, NULL,
					      &cbs, &s->node[i], err,
					      sizeof(err));
		if (!s->node[i]) {
			fprintf(stderr, "transport: server: %s\n", err);
			return -1;
		}
	}
	if (pipe(s->stop_pipe) < 0)
		return -1;
	s->stop_ev = event_new(s->base, s->stop_pipe[0], EV_READ, stop_cb,
			       s->base);
	if (!s->stop_ev || event_add(s->stop_ev, NULL) < 0)
		return -1;
	return pthread_create(&s->thread, NULL, servers_main, s) ? -1 : 0;
}

static void servers_stop(struct echo_servers *s)
{
	if (write(s->stop_pipe[1], "x", 1) == 1)
		pthread_join(s->thread, NULL);
	for (int i = 0; i < 2; i++)
		lm_evnode_destroy(s->node[i]);
	event_free(s->stop_ev);
	event_base_free(s->base);
	close(s->stop_pipe[0]);
	close(s->stop_pipe[1]);
}

/* --- clients and measurement ------------------------------------------- */

struct clients {
	int bare_fd;
	int one_cpu_fd; /* connected to the one_cpu_echo */
	const struct one_cpu_echo *one_cpu;
	lm_rpc *rpc[2]; /* [0]: auth, [1]: no auth */
	uint8_t *buf;
	uint8_t *rbuf;
};

/* One round trip; returns 0 or an LM_E* code / -1 for bare UDP errors. */
static int round_trip(struct clients *c, enum mode m, size_t size)
{
	void *rep;
	size_t rlen;
	ssize_t n;
	int rc;

	if (m == MODE_BARE || m == MODE_ONE_CPU) {
		int fd = m == MODE_BARE ? c->bare_fd : c->one_cpu_fd;

		/* A receive timeout (1 s) ends the run with an error. */
		if (send(fd, c->buf, size, 0) != (ssize_t)size)
			return -1;
		do {
			n = recv(fd, c->rbuf, 65536, 0);
		} while (n < 0 && errno == EINTR);
		return n == (ssize_t)size ? 0 : -1;
	}
	rc = lm_rpc_call(c->rpc[m == MODE_AUTH ? 0 : 1], c->buf, size, &rep,
			 &rlen, CALL_TIMEOUT_MS);
	if (rc)
		return rc;
	free(rep);
	return rlen == size ? 0 : LM_EBADMSG;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct result {
	double round_median[64]; /* per round, microseconds */
	double median, min, max;
};

/* The one-CPU round trips run with the caller on the echo's CPU, the
 * others where the scheduler puts it.  Returns 0 or -1 (errno). */
static int place(const struct clients *c, enum mode m, bool on)
{
	return m == MODE_ONE_CPU ? one_cpu_place(c->one_cpu, on) : 0;
}

static int run(struct clients *c, int iters, int rounds,
	       struct result res[NPAYLOADS][MODE_COUNT])
{
	double *samples = malloc((size_t)iters * sizeof(*samples));
	int rc = 0;

	if (!samples)
		return LM_ENOMEM;
	for (size_t p = 0; p < NPAYLOADS; p++) {
		for (int m = 0; m < MODE_COUNT && !rc; m++) {
			rc = place(c, (enum mode)m, true);
			for (int i = 0; i < WARMUP && !rc; i++)
				rc = round_trip(c, (enum mode)m, payloads[p]);
			if (place(c, (enum mode)m, false) && !rc)
				rc = -1;
		}
	}
	/* Rounds interleave the modes, so slow drift of the machine shows
	 * in every column alike. */
	for (int r = 0; r < rounds && !rc; r++) {
		for (size_t p = 0; p < NPAYLOADS && !rc; p++) {
			for (int m = 0; m < MODE_COUNT && !rc; m++) {
				rc = place(c, (enum mode)m, true);
				for (int i = 0; i < iters && !rc; i++) {
					double t0 = now_us();

					rc = round_trip(c, (enum mode)m,
							payloads[p]);
					samples[i] = now_us() - t0;
				}
				if (place(c, (enum mode)m, false) && !rc)
					rc = -1;
				res[p][m].round_median[r] =
					median(samples, (size_t)iters);
			}
		}
	}
	free(samples);
	if (rc)
		return rc;
	for (size_t p = 0; p < NPAYLOADS; p++) {
		for (int m = 0; m < MODE_COUNT; m++) {
			struct result *x = &res[p][m];
			double sorted[64];

			memcpy(sorted, x->round_median,
			       (size_t)rounds * sizeof(double));
			x->median = median(sorted, (size_t)rounds);
			x->min = sorted[0];
			x->max = sorted[rounds - 1];
		}
	}
	return 0;
}

static void print_table(struct result res[NPAYLOADS][MODE_COUNT], int iters,
			int rounds)
{
	printf("Round trip on 127.0.0.1, microseconds: median of %d round "
	       "medians (%d round trips each) [min-max of round medians]\n\n",
	       rounds, iters);
	printf("%8s  %-22s %-22s %-22s %-22s %8s %8s %9s\n", "payload",
	       "bare UDP", "bare UDP, one CPU", "transport, auth",
	       "transport, no auth", "auth/", "noauth/", "MAC cost");
	printf("%8s  %-22s %-22s %-22s %-22s %8s %8s %9s\n", "", "", "", "",
	       "", "bare", "bare", "");
	for (size_t p = 0; p < NPAYLOADS; p++) {
		char cell[MODE_COUNT][32];
		double bare = res[p][MODE_BARE].median;
		double a = res[p][MODE_AUTH].median;
		double na = res[p][MODE_NOAUTH].median;

		for (int m = 0; m < MODE_COUNT; m++)
			snprintf(cell[m], sizeof(cell[m]), "%7.2f [%.2f-%.2f]",
				 res[p][m].median, res[p][m].min,
				 res[p][m].max);
		printf("%6zu B  %-22s %-22s %-22s %-22s %7.2fx %7.2fx "
		       "%8.1f%%\n",
		       payloads[p], cell[MODE_BARE], cell[MODE_ONE_CPU],
		       cell[MODE_AUTH], cell[MODE_NOAUTH], a / bare, na / bare,
		       100.0 * (a - na) / a);
	}
	printf("\nbare UDP: to an echo thread placed by the scheduler; one "
	       "CPU: to an echo process,\nboth pinned to one CPU (a client "
	       "and its lemuriad under lemuria-run --pin).\n"
	       "MAC cost = (auth - no auth) / auth: the share of a round "
	       "trip spent on authentication.\n");
}

static int write_csv(const char *path,
		     struct result res[NPAYLOADS][MODE_COUNT], int iters,
		     int rounds)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "transport: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "payload_bytes,mode,iters,rounds,median_us,round_min_us,"
		   "round_max_us,ratio_to_bare,ratio_to_noauth\n");
	for (size_t p = 0; p < NPAYLOADS; p++)
		for (int m = 0; m < MODE_COUNT; m++)
			fprintf(f, "%zu,%s,%d,%d,%.3f,%.3f,%.3f,%.4f,%.4f\n",
				payloads[p], mode_names[m], iters, rounds,
				res[p][m].median, res[p][m].min,
				res[p][m].max,
				res[p][m].median / res[p][MODE_BARE].median,
				res[p][m].median /
					res[p][MODE_NOAUTH].median);
	if (fclose(f) != 0) {
		fprintf(stderr, "transport: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: transport [-n ITER] [-r ROUNDS] [-o FILE.csv]\n"
		     "  -n ITER    round trips per round (default 2000)\n"
		     "  -r ROUNDS  rounds (default 5, at most 64)\n"
		     "  -o FILE    also write the results as CSV\n");
}

static int parse_count(const char *s, int max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	static struct result res[NPAYLOADS][MODE_COUNT];
	struct lm_rel_config cfg;
	struct echo_servers srv = { 0 };
	struct bare_echo bare = { .fd = -1 };
	struct one_cpu_echo one_cpu = { .pid = -1 };
	struct clients c = { .bare_fd = -1, .one_cpu_fd = -1,
			     .one_cpu = &one_cpu };
	const char *csv = NULL;
	int iters = 2000, rounds = 5, opt, rc, status = 1;
	lm_auth *auth;
	char err[256];

	while ((opt = getopt(argc, argv, "n:r:o:h")) != -1) {
		switch (opt) {
		case 'n':
			if (parse_count(optarg, 10000000, &iters) < 0) {
				fprintf(stderr, "transport: bad -n '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'r':
			if (parse_count(optarg, 64, &rounds) < 0) {
				fprintf(stderr, "transport: bad -r '%s' "
						"(1..64)\n", optarg);
				return 2;
			}
			break;
		case 'o':
			csv = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	auth = lm_auth_create(bench_key);
	c.buf = calloc(1, 65536);
	c.rbuf = malloc(65536);
	if (!auth || !c.buf || !c.rbuf) {
		fprintf(stderr, "transport: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < 65536; i++)
		c.buf[i] = (uint8_t)(i * 7);
	if (one_cpu_echo_start(&one_cpu) < 0 || bare_echo_start(&bare) < 0 ||
	    servers_start(&srv, auth) < 0) {
		fprintf(stderr, "transport: cannot start the echo servers: "
				"%s\n", strerror(errno));
		return 1;
	}
	c.bare_fd = echo_client(&bare.addr);
	if (c.bare_fd < 0) {
		fprintf(stderr, "transport: bare client: %s\n",
			strerror(errno));
		goto out;
	}
	c.one_cpu_fd = echo_client(&one_cpu.addr);
	if (c.one_cpu_fd < 0) {
		fprintf(stderr, "transport: one-CPU client: %s\n",
			strerror(errno));
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		lm_rel_config_default(&cfg, CLIENT_ID);
		cfg.max_peer_id = CLIENT_ID;
		cfg.auth = i == 0 ? auth : NULL;
		cfg.transport.mtu = BENCH_MTU;
		cfg.transport.ack_delay_us = 0;
		c.rpc[i] = lm_rpc_create(&srv.addr[i], SERVER_ID, &cfg, NULL,
					 err, sizeof(err));
		if (!c.rpc[i]) {
			fprintf(stderr, "transport: client: %s\n", err);
			goto out;
		}
	}
	rc = run(&c, iters, rounds, res);
	if (rc) {
		fprintf(stderr, "transport: round trip failed: %s\n",
			rc == -1 ? strerror(errno) : lm_strerror(rc));
		goto out;
	}
	print_table(res, iters, rounds);
	if (csv && write_csv(csv, res, iters, rounds) < 0)
		goto out;
	status = 0;
out:
	if (c.bare_fd >= 0)
		close(c.bare_fd);
	if (c.one_cpu_fd >= 0)
		close(c.one_cpu_fd);
	one_cpu_echo_stop(&one_cpu);
	bare_echo_stop(&bare);
	for (int i = 0; i < 2; i++)
		lm_rpc_destroy(c.rpc[i]);
	servers_stop(&srv);
	lm_auth_destroy(auth);
	free(c.buf);
	free(c.rbuf);
	return status;
}
