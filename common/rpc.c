/* Transport driver for the client library: a blocking request/reply
 * endpoint on top of the reliability engine, talking to one server.
 *
 * There is no I/O thread (the ack thread below only sends acks).  A
 * thread that waits (in lm_rpc_call or lm_rpc_recv) becomes the "driver"
 * when nobody else is: it polls the socket, feeds the engine and ticks
 * it, and wakes the others through one condition variable when their
 * replies are in.  A lone caller thus gets its reply without any thread
 * switch.  When the driver leaves it hands the role to whoever still
 * waits; an eventfd pulls the driver out of its poll when another
 * thread's send moves the engine's deadline earlier.
 *
 * Liveness: while calls wait and nothing of ours is in flight to the
 * server (it acked our request and works on it, or waits for others), the
 * driver sends a PING every keepalive interval.  A server that died stops
 * acking it, the engine gives up after its retries, and the waiting calls
 * fail with LM_EUNREACH instead of waiting for ever.  Sooner when the
 * server never answered and the kernel keeps reporting that nothing
 * listens at its address (ICMP port unreachable, ECONNREFUSED on the
 * connected socket): after a second of that with no datagram from it
 * (refusals.h), the calls fail with LM_EUNREACH at once instead of after
 * every retry (a client started before its lemuriad, a layout with the
 * wrong port).
 *
 * Delayed acks (ack_delay_us > 0): the ack of a reply rides on the next
 * request when that comes soon, as it does in a run of read faults, which
 * spares a datagram and a wake-up of the server per call.  Nothing drives
 * the socket while the application computes, so a POSIX timer, armed on
 * the way out of a call that leaves an ack owed, wakes a thread of the
 * endpoint's own when the delay runs out, which sends the acks owed.  The
 * timer's signal goes to that thread alone, which blocks it and takes it
 * with sigwaitinfo: the application's threads are never interrupted, and
 * the helper sleeps except when an ack would otherwise be late.
 *
 * One-way messages (lm_rpc_send) need the same thread: the caller goes on
 * computing, and a datagram of theirs that is lost would wait for its
 * retransmission until the next call drove the engine (a one-way UNLOCK
 * lost so held its lock for as long).  While one is unacknowledged the
 * timer also fires at the engine's next deadline; the thread then reads
 * the socket and ticks the engine, unless a waiting call drives it. */
#include "rpc.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "loss.h"
#include "lm_error.h"
#include "proto.h"
#include "refusals.h"
#include "udp.h"

/* Datagrams read per poll round before the engine is ticked. */
#define LM_RPC_READ_BATCH 256
#define LM_RPC_BUF 65536
#define LM_RPC_FAULT_HOLD 4096
/* Bounds on messages the server sent unasked and nobody has read yet.
 * Beyond them new ones are dropped (and counted): memory stays bounded
 * (I5) even when the application never calls lm_rpc_recv. */
#define LM_RPC_QUEUE_MSGS 1024
#define LM_RPC_QUEUE_BYTES (16u << 20)
/* Stack of the ack thread: it sends acks, reads the socket and ticks
 * the engine (authenticating datagrams on the way). */
#define LM_RPC_ACK_STACK (256u << 10)

struct lm_rpc_queued {
	struct lm_rpc_queued *next;
	void *data; /* malloc'd; handed to the lm_rpc_recv caller */
	size_t len;
};

struct lm_rpc {
	pthread_mutex_t lock; /* guards everything below but the fds */
	pthread_cond_t cond;  /* "something a waiter may want happened" */
	int fd;               /* connected to the server */
	int wake_fd;          /* eventfd: interrupts the driver's poll */
	uint16_t server_id;
	lm_rel *rel;
	lm_loss *fault;      /* NULL without fault injection */
	uint32_t last_req_id;
	bool driving;         /* a thread is driving the socket */
	uint64_t driver_until; /* end of the driver's poll; 0: not polling */
	bool progress;        /* waiters should re-check their condition */
	struct lm_rpc_pending *pending;
	struct lm_rpc_queued *q_head, **q_tail;
	size_t q_count, q_bytes;
	uint64_t q_drops, tx_drops;
	uint64_t events;      /* peer events so far (wakes lm_rpc_recv) */
	int last_event_rc;    /* LM_EUNREACH or LM_ERESET */
	uint64_t keepalive_us; /* 0: no PINGs while calls wait */
	uint64_t last_probe;  /* when the last PING (or request) left */
	uint64_t probes;      /* PINGs sent */
	uint8_t *rxbuf;       /* used by the driver only */
	uint8_t *fxbuf;       /* datagrams released by the loss injector */
	bool helper;          /* the ack thread and its timer run */
	bool acks_delayed;    /* ... and replies' acks wait for them */
	timer_t ack_timer;    /* signals the ack thread alone */
	pthread_t ack_thread;
	_Atomic pid_t ack_tid;
	sem_t ack_started;
	_Atomic uint64_t ack_armed; /* when the timer fires, 0: disarmed */
	uint64_t ack_delay_us;      /* the engine's, 0 without the timer */
	_Atomic uint64_t ack_wakeups; /* of the ack thread, by the timer */
	_Atomic uint64_t ack_arms;    /* timer_settime calls */
	uint64_t reads;       /* recv calls on the socket */
	struct lm_refusals refused; /* ECONNREFUSED of a server never heard */
	/* datagrams from the server whose MAC failed while none passed: its
	 * answer to ours, keyed with another secret (evnode.c) */
	struct lm_auth_refusals unauthentic;
	unsigned npending, pending_max; /* calls in flight, most at once */
};

static uint64_t next_wake_locked(const struct lm_rpc *rpc)
{
	uint64_t when = lm_rel_next_deadline(rpc->rel);

	if (rpc->fault) {
		uint64_t f = lm_loss_next_deadline(rpc->fault);

		if (f < when)
			when = f;
	}
	return when;
}

/* Called after this thread changed the engine while another drives: the
 * driver's poll must end no later than the engine now needs a tick. */
static void kick_driver_locked(struct lm_rpc *rpc)
{
	uint64_t one = 1;

	if (!rpc->driving || !rpc->driver_until ||
	    next_wake_locked(rpc) >= rpc->driver_until)
		return;
	rpc->driver_until = 0;
	if (write(rpc->wake_fd, &one, sizeof(one)) < 0) {
		/* The counter is saturated: a wake-up is pending anyway. */
	}
}

static void on_peer_event(void *ctx, uint16_t peer,
			  enum lm_rel_peer_event event);

/* The kernel said nothing listens at the server's address (an earlier
 * send met ICMP port unreachable).  Once a server that never answered
 * was refused often enough for long enough, the calls waiting fail as if
 * the engine had given it up. */
static void note_refused_locked(struct lm_rpc *rpc, uint64_t now)
{
	if (lm_refusals_note(&rpc->refused, now))
		on_peer_event(rpc, rpc->server_id, LM_REL_PEER_UNREACHABLE);
}

static void send_now(struct lm_rpc *rpc, const uint8_t *dg, size_t len)
{
	ssize_t n;

	do {
		n = send(rpc->fd, dg, len, 0);
	} while (n < 0 && errno == EINTR);
	/* EAGAIN, ENOBUFS, ECONNREFUSED: the engine retransmits or, in the
	 * end, declares the server unreachable. */
	if (n < 0)
		rpc->tx_drops++;
	if (n < 0 && errno == ECONNREFUSED)
		note_refused_locked(rpc, lm_now_us());
}

static void drain_faults_locked(struct lm_rpc *rpc, uint64_t now)
{
	uint32_t peer;
	size_t len;

	if (!rpc->fault)
		return;
	while (lm_loss_pop(rpc->fault, now, &peer, rpc->fxbuf, LM_RPC_BUF,
			    &len))
		send_now(rpc, rpc->fxbuf, len);
}

/* Engine callbacks: all run with rpc->lock held. */

static void on_transmit(void *ctx, uint16_t peer, const uint8_t *dg,
			size_t len)
{
	struct lm_rpc *rpc = ctx;
	uint64_t now;

	if (peer != rpc->server_id) {
		rpc->tx_drops++;
		return;
	}
	if (!rpc->fault) {
		send_now(rpc, dg, len);
		return;
	}
	now = lm_now_us();
	lm_loss_push(rpc->fault, peer, dg, len, now);
	drain_faults_locked(rpc, now);
}

static struct lm_rpc_pending *find_pending(struct lm_rpc *rpc, uint32_t id)
{
	for (struct lm_rpc_pending *p = rpc->pending; p; p = p->next)
		if (p->req_id == id)
			return p;
	return NULL;
}

static void queue_message(struct lm_rpc *rpc, const struct lm_rel_msg *msg)
{
	struct lm_rpc_queued *q;

	if (rpc->q_count >= LM_RPC_QUEUE_MSGS ||
	    rpc->q_bytes + msg->len > LM_RPC_QUEUE_BYTES)
		goto drop;
	q = malloc(sizeof(*q));
	if (!q)
		goto drop;
	q->data = lm_rel_msg_keep(msg);
	if (!q->data) {
		free(q);
		goto drop;
	}
	q->len = msg->len;
	q->next = NULL;
	*rpc->q_tail = q;
	rpc->q_tail = &q->next;
	rpc->q_count++;
	rpc->q_bytes += msg->len;
	rpc->progress = true;
	return;
drop:
	rpc->q_drops++;
}

static void on_deliver(void *ctx, const struct lm_rel_msg *msg)
{
	struct lm_rpc *rpc = ctx;
	struct lm_rpc_pending *p;

	if (msg->kind != LM_REL_REPLY) {
		/* The API has no way to answer the server, so a request
		 * from it is handed over like a one-way message. */
		queue_message(rpc, msg);
		return;
	}
	p = find_pending(rpc, msg->req_id);
	if (!p || p->done)
		return; /* its caller gave up: the late reply is dropped */
	p->reply = lm_rel_msg_keep(msg);
	if (p->reply) {
		p->len = msg->len;
		p->rc = 0;
	} else {
		p->rc = LM_ENOMEM;
	}
	p->done = true;
	rpc->progress = true;
}

/* Every call in progress ends with rc. */
static void fail_calls_locked(struct lm_rpc *rpc, int rc)
{
	for (struct lm_rpc_pending *p = rpc->pending; p; p = p->next) {
		if (!p->done) {
			p->done = true;
			p->rc = rc;
		}
	}
	rpc->events++;
	rpc->last_event_rc = rc;
	rpc->progress = true;
}

static void on_peer_event(void *ctx, uint16_t peer,
			  enum lm_rel_peer_event event)
{
	struct lm_rpc *rpc = ctx;

	if (peer != rpc->server_id)
		return;
	/* The engine dropped what it had queued: nothing will answer the
	 * calls in progress. */
	fail_calls_locked(rpc, event == LM_REL_PEER_RESET ? LM_ERESET :
							     LM_EUNREACH);
}

/* What the engine made of a datagram from the server (the socket is
 * connected to it): one whose MAC fails while none ever passed is the
 * server's answer keyed with another secret (evnode.c,
 * answer_unauthentic); after a few over a second the calls fail with
 * LM_EAUTH instead of waiting out the retries. */
static void note_authenticity_locked(struct lm_rpc *rpc, int rc,
				     uint64_t now)
{
	if (lm_refusals_auth(&rpc->unauthentic, rc, now))
		fail_calls_locked(rpc, LM_EAUTH);
}

/* Reads what the socket holds and feeds it to the engine. */
static void read_socket_locked(struct lm_rpc *rpc, uint64_t now)
{
	ssize_t n;

	for (int i = 0; i < LM_RPC_READ_BATCH; i++) {
		n = recv(rpc->fd, rpc->rxbuf, LM_RPC_BUF, MSG_TRUNC);
		rpc->reads++;
		if (n < 0) {
			/* ECONNREFUSED reports an earlier send; go on. */
			if (errno == ECONNREFUSED)
				note_refused_locked(rpc, now);
			if (errno == EINTR || errno == ECONNREFUSED)
				continue;
			break;
		}
		rpc->refused.heard = true;
		if ((size_t)n > LM_RPC_BUF)
			continue; /* truncated: cannot be one of ours */
		note_authenticity_locked(rpc, lm_rel_input(rpc->rel,
							   rpc->rxbuf,
							   (size_t)n, now),
					 now);
		/* a reply or message is in: its waiter goes on without the
		 * read that would find the socket empty (a syscall on every
		 * call); what else came stays for the next poll */
		if (rpc->progress)
			break;
	}
}

/* One round of driving: poll until data, the engine's next deadline or
 * `deadline`, whichever comes first, then input, tick and wake waiters.
 * Entered and left with the lock held; the poll runs without it. */
/* When the next keepalive PING is due (UINT64_MAX: none). */
static uint64_t probe_due_locked(const struct lm_rpc *rpc)
{
	if (!rpc->keepalive_us || !rpc->pending)
		return UINT64_MAX;
	return rpc->last_probe + rpc->keepalive_us;
}

/* A PING whose PONG nobody waits for (on_deliver drops it): what matters
 * is that the server acks it, or the engine finds it gone. */
static void probe_locked(struct lm_rpc *rpc, uint64_t now)
{
	uint8_t ping[16];
	int len;

	if (now < probe_due_locked(rpc))
		return;
	rpc->last_probe = now;
	if (lm_rel_pending(rpc->rel, rpc->server_id))
		return; /* something is in flight already: it will tell */
	len = lm_msg_encode_ping(ping, sizeof(ping));
	if (++rpc->last_req_id == 0)
		rpc->last_req_id = 1;
	if (len > 0 && lm_rel_request(rpc->rel, rpc->server_id,
				      rpc->last_req_id, ping, (size_t)len,
				      now) == 0)
		rpc->probes++;
}

static void drive_locked(struct lm_rpc *rpc, uint64_t deadline)
{
	struct pollfd pfd[2] = {
		{ .fd = rpc->fd, .events = POLLIN },
		{ .fd = rpc->wake_fd, .events = POLLIN },
	};
	uint64_t until = next_wake_locked(rpc);
	uint64_t now = lm_now_us(), delta, count;
	struct timespec ts, *tsp = NULL;

	if (deadline < until)
		until = deadline;
	if (probe_due_locked(rpc) < until)
		until = probe_due_locked(rpc);
	if (until != UINT64_MAX) {
		delta = until > now ? until - now : 0;
		ts.tv_sec = (time_t)(delta / 1000000u);
		ts.tv_nsec = (long)(delta % 1000000u) * 1000;
		tsp = &ts;
	}
	rpc->driver_until = until ? until : 1;
	pthread_mutex_unlock(&rpc->lock);
	if (ppoll(pfd, 2, tsp, NULL) > 0 && (pfd[1].revents & POLLIN)) {
		if (read(rpc->wake_fd, &count, sizeof(count)) < 0) {
			/* Already drained: nothing to do. */
		}
	}
	pthread_mutex_lock(&rpc->lock);
	rpc->driver_until = 0;
	now = lm_now_us();
	if (pfd[0].revents)
		read_socket_locked(rpc, now);
	probe_locked(rpc, now);
	lm_rel_tick(rpc->rel, now);
	drain_faults_locked(rpc, now);
	if (rpc->progress) {
		rpc->progress = false;
		pthread_cond_broadcast(&rpc->cond);
	}
}

static void cond_wait_until(struct lm_rpc *rpc, uint64_t deadline)
{
	struct timespec ts;

	if (deadline == UINT64_MAX) {
		pthread_cond_wait(&rpc->cond, &rpc->lock);
		return;
	}
	ts.tv_sec = (time_t)(deadline / 1000000u);
	ts.tv_nsec = (long)(deadline % 1000000u) * 1000;
	pthread_cond_timedwait(&rpc->cond, &rpc->lock, &ts);
}

typedef bool (*lm_rpc_ready_fn)(const struct lm_rpc *rpc, const void *arg);

/* Waits, lock held, until ready() or the deadline; drives the socket
 * whenever nobody else does. */
static void wait_locked(struct lm_rpc *rpc, lm_rpc_ready_fn ready,
			const void *arg, uint64_t deadline)
{
	while (!ready(rpc, arg) && lm_now_us() < deadline) {
		if (rpc->driving) {
			cond_wait_until(rpc, deadline);
			continue;
		}
		rpc->driving = true;
		while (!ready(rpc, arg) && lm_now_us() < deadline)
			drive_locked(rpc, deadline);
		rpc->driving = false;
		/* Hand the role over to any thread still waiting. */
		pthread_cond_broadcast(&rpc->cond);
	}
}

static uint64_t deadline_from_ms(int timeout_ms)
{
	if (timeout_ms < 0)
		return UINT64_MAX;
	return lm_now_us() + (uint64_t)timeout_ms * 1000u;
}

static bool call_ready(const struct lm_rpc *rpc, const void *arg)
{
	const struct lm_rpc_pending *p = arg;

	(void)rpc;
	return p->done;
}

struct lm_rpc_recv_wait {
	uint64_t events_at_start;
};

static bool recv_ready(const struct lm_rpc *rpc, const void *arg)
{
	const struct lm_rpc_recv_wait *w = arg;

	return rpc->q_head || rpc->events != w->events_at_start;
}

/* ---- delayed acks: their timer and thread ------------------------------ */

static int ack_signal(void)
{
	return SIGRTMIN + LM_RPC_ACK_SIGNAL_OFFSET;
}

static void arm_at(struct lm_rpc *rpc, uint64_t when)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(when / 1000000u);
	its.it_value.tv_nsec = (long)(when % 1000000u) * 1000;
	atomic_fetch_add(&rpc->ack_arms, 1);
	if (timer_settime(rpc->ack_timer, TIMER_ABSTIME, &its, NULL) == 0)
		atomic_store(&rpc->ack_armed, when);
}

/* On the way out of a call, lock held: the timer must fire no later
 * than the engine's delayed ack falls due.  A request that carries the
 * acks owed leaves the timer armed (two timer_settime calls per call
 * cost 2-4 us on these machines: the timer is the CPU's next, so each
 * reprograms it) until it would fire half a delay or more before the
 * ack now owed falls due; then the call moves it to that time.  So while
 * calls follow each other the timer is set once per half a delay and
 * never fires: a wake-up of the ack thread that finds nothing due cost
 * two context switches and often a wait for this lock, 15-25 us, and
 * came once per delay. */
static void arm_ack_timer_locked(struct lm_rpc *rpc)
{
	uint64_t due, armed;

	if (!rpc->acks_delayed)
		return;
	due = lm_rel_ack_due(rpc->rel);
	armed = atomic_load(&rpc->ack_armed);
	if (due == UINT64_MAX ||
	    (armed && armed <= due && due - armed < rpc->ack_delay_us / 2))
		return;
	arm_at(rpc, due);
}

/* While a one-way message of ours is unacknowledged and no call drives
 * the engine, the timer fires no later than the engine's next deadline
 * (a retransmission, or a datagram the loss injector holds). */
static void arm_send_timer_locked(struct lm_rpc *rpc)
{
	uint64_t when, armed;

	/* a call in flight drives the engine; the last one out arms */
	if (!rpc->helper || rpc->pending ||
	    !lm_rel_pending(rpc->rel, rpc->server_id))
		return;
	when = next_wake_locked(rpc);
	armed = atomic_load(&rpc->ack_armed);
	if (when != UINT64_MAX && (!armed || when < armed))
		arm_at(rpc, when);
}

/* One round of driving that does not wait, by a thread that drives
 * nothing otherwise (a one-way send, the ack thread): what the socket
 * holds in (acks that open the window), the engine ticked (resends
 * out). */
static void drive_now_locked(struct lm_rpc *rpc)
{
	rpc->driving = true;
	drive_locked(rpc, lm_now_us());
	rpc->driving = false;
	pthread_cond_broadcast(&rpc->cond);
}

/* Waits for the timer's signal (blocked here, so it queues for
 * sigwaitinfo) and sends the acks owed; a signal without the endpoint
 * in its value, from lm_rpc_destroy, ends it. */
static void *ack_thread_main(void *arg)
{
	struct lm_rpc *rpc = arg;
	uint64_t now, due;
	sigset_t set;
	siginfo_t si;

	atomic_store(&rpc->ack_tid, gettid());
	sem_post(&rpc->ack_started);
	sigemptyset(&set);
	sigaddset(&set, ack_signal());
	for (;;) {
		if (sigwaitinfo(&set, &si) < 0)
			continue; /* EINTR (a stop and continue) */
		if (si.si_value.sival_ptr != rpc)
			break;
		atomic_fetch_add(&rpc->ack_wakeups, 1);
		pthread_mutex_lock(&rpc->lock);
		atomic_store(&rpc->ack_armed, 0);
		now = lm_now_us();
		if (!rpc->driving && !rpc->pending &&
		    lm_rel_pending(rpc->rel, rpc->server_id))
			drive_now_locked(rpc);
		due = rpc->acks_delayed ? lm_rel_ack_due(rpc->rel) : UINT64_MAX;
		/* requests since the arming carried the acks it was for; one
		 * owed now may not be due yet: no ack goes early */
		if (due != UINT64_MAX && due <= now) {
			lm_rel_flush_acks(rpc->rel, now);
			due = UINT64_MAX;
		}
		if (due != UINT64_MAX)
			arm_at(rpc, due);
		arm_send_timer_locked(rpc);
		pthread_mutex_unlock(&rpc->lock);
	}
	return NULL;
}

/* Starts the ack thread and a timer that signals it alone; leaves
 * acks_delayed false when either fails.  The thread starts with every
 * signal blocked: the timer's waits for sigwaitinfo, and the program's
 * own signals keep going to the program's threads. */
static void ack_timer_setup(struct lm_rpc *rpc)
{
	sigset_t block, old;
	pthread_attr_t attr;
	struct sigevent sev;
	int rc;

	if (sem_init(&rpc->ack_started, 0, 0) != 0)
		return;
	sigfillset(&block);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, LM_RPC_ACK_STACK);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = pthread_create(&rpc->ack_thread, &attr, ack_thread_main, rpc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		sem_destroy(&rpc->ack_started);
		return;
	}
	while (sem_wait(&rpc->ack_started) != 0)
		; /* EINTR */
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = ack_signal();
	sev.sigev_value.sival_ptr = rpc;
	sev._sigev_un._tid = atomic_load(&rpc->ack_tid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &rpc->ack_timer) != 0) {
		pthread_sigqueue(rpc->ack_thread, ack_signal(),
				 (union sigval){ .sival_ptr = NULL });
		pthread_join(rpc->ack_thread, NULL);
		sem_destroy(&rpc->ack_started);
		return;
	}
	rpc->helper = true;
}

static void ack_timer_stop(struct lm_rpc *rpc)
{
	if (!rpc->helper)
		return;
	timer_delete(rpc->ack_timer);
	pthread_sigqueue(rpc->ack_thread, ack_signal(),
			 (union sigval){ .sival_ptr = NULL });
	pthread_join(rpc->ack_thread, NULL);
	sem_destroy(&rpc->ack_started);
	rpc->helper = false;
	rpc->acks_delayed = false;
}

bool lm_rpc_acks_delayed(const lm_rpc *rpc)
{
	return rpc && rpc->acks_delayed;
}

struct lm_rpc_counters lm_rpc_counters(lm_rpc *rpc)
{
	struct lm_rpc_counters n = { 0, 0, 0, 0 };

	if (!rpc)
		return n;
	n.ack_wakeups = atomic_load(&rpc->ack_wakeups);
	n.ack_arms = atomic_load(&rpc->ack_arms);
	pthread_mutex_lock(&rpc->lock);
	n.reads = rpc->reads;
	n.pending_max = rpc->pending_max;
	pthread_mutex_unlock(&rpc->lock);
	return n;
}

lm_rpc *lm_rpc_create(const struct sockaddr_in *server, uint16_t server_id,
		      const struct lm_rel_config *rcfg,
		      const struct lm_fault_cfg *faults, char *err,
		      size_t errlen)
{
	struct lm_rel_callbacks rcbs = {
		.transmit = on_transmit,
		.deliver = on_deliver,
		.peer_event = on_peer_event,
	};
	struct sockaddr_in local;
	struct lm_rel_config cfg;
	pthread_condattr_t ca;
	struct lm_rpc *rpc;
	char a[32];

	if (!server || !rcfg || server->sin_family != AF_INET) {
		snprintf(err, errlen, "rpc: missing or non-IPv4 server");
		return NULL;
	}
	rpc = calloc(1, sizeof(*rpc));
	if (!rpc) {
		snprintf(err, errlen, "rpc: out of memory");
		return NULL;
	}
	rpc->fd = -1;
	rpc->wake_fd = -1;
	rpc->server_id = server_id;
	rpc->q_tail = &rpc->q_head;
	rpc->keepalive_us = LM_RPC_KEEPALIVE_US;
	pthread_mutex_init(&rpc->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rpc->cond, &ca);
	pthread_condattr_destroy(&ca);
	rpc->rxbuf = malloc(LM_RPC_BUF);
	rpc->fxbuf = malloc(LM_RPC_BUF);
	if (!rpc->rxbuf || !rpc->fxbuf)
		goto nomem;
	if (faults && lm_loss_active(faults)) {
		rpc->fault = lm_loss_create(faults, LM_RPC_FAULT_HOLD);
		if (!rpc->fault)
			goto nomem;
	}
	/* delayed acks only with a timer to send them */
	cfg = *rcfg;
	if (cfg.transport.ack_delay_us)
		ack_timer_setup(rpc);
	rpc->acks_delayed = rpc->helper;
	if (!rpc->acks_delayed)
		cfg.transport.ack_delay_us = 0;
	rpc->ack_delay_us = cfg.transport.ack_delay_us;
	rpc->rel = lm_rel_create(&cfg, &rcbs, rpc);
	if (!rpc->rel) {
		snprintf(err, errlen, "rpc: invalid transport settings");
		goto err;
	}
	rpc->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (rpc->wake_fd < 0) {
		snprintf(err, errlen, "rpc: eventfd: %s", strerror(errno));
		goto err;
	}
	memset(&local, 0, sizeof(local));
	local.sin_family = AF_INET;
	rpc->fd = lm_udp_bind(&local, err, errlen);
	if (rpc->fd < 0)
		goto err;
	/* Connected: the kernel drops datagrams from anyone but the
	 * server, and send() needs no address. */
	if (connect(rpc->fd, (const struct sockaddr *)server,
		    sizeof(*server)) < 0) {
		snprintf(err, errlen, "rpc: connect %s: %s",
			 lm_addr_str(server, a, sizeof(a)), strerror(errno));
		goto err;
	}
	return rpc;
nomem:
	snprintf(err, errlen, "rpc: out of memory");
err:
	lm_rpc_destroy(rpc);
	return NULL;
}

void lm_rpc_buf_free(lm_rpc *rpc, void *buf)
{
	if (!buf)
		return;
	if (!rpc) {
		free(buf);
		return;
	}
	pthread_mutex_lock(&rpc->lock);
	lm_rel_buf_put(rpc->rel, buf);
	pthread_mutex_unlock(&rpc->lock);
}

void lm_rpc_destroy(lm_rpc *rpc)
{
	struct lm_rpc_queued *q, *next;

	if (!rpc)
		return;
	if (rpc->rel && rpc->fd >= 0) { /* what the timer would have sent */
		pthread_mutex_lock(&rpc->lock);
		lm_rel_flush_acks(rpc->rel, lm_now_us());
		pthread_mutex_unlock(&rpc->lock);
	}
	ack_timer_stop(rpc);
	lm_rel_destroy(rpc->rel);
	lm_loss_destroy(rpc->fault);
	for (q = rpc->q_head; q; q = next) {
		next = q->next;
		free(q->data);
		free(q);
	}
	if (rpc->fd >= 0)
		close(rpc->fd);
	if (rpc->wake_fd >= 0)
		close(rpc->wake_fd);
	pthread_cond_destroy(&rpc->cond);
	pthread_mutex_destroy(&rpc->lock);
	free(rpc->rxbuf);
	free(rpc->fxbuf);
	free(rpc);
}

int lm_rpc_call(lm_rpc *rpc, const void *req, size_t len, void **reply,
		size_t *reply_len, int timeout_ms)
{
	struct lm_rel_part part = { req, len };

	/* a part with no data to give is refused by the transport */
	return lm_rpc_call_parts(rpc, &part, 1, reply, reply_len, timeout_ms);
}

int lm_rpc_start_parts(lm_rpc *rpc, const struct lm_rel_part *parts,
		       size_t nparts, struct lm_rpc_pending *call)
{
	int rc;

	if (!rpc || !call)
		return LM_EINVAL;
	*call = (struct lm_rpc_pending){ 0 };
	pthread_mutex_lock(&rpc->lock);
	if (++rpc->last_req_id == 0)
		rpc->last_req_id = 1;
	call->req_id = rpc->last_req_id;
	rpc->last_probe = lm_now_us();
	rc = lm_rel_queue(rpc->rel, rpc->server_id, LM_REL_REQUEST,
			  call->req_id, parts, nparts, rpc->last_probe);
	if (rc == 0) {
		kick_driver_locked(rpc);
		call->next = rpc->pending;
		rpc->pending = call;
		call->started = true;
		if (++rpc->npending > rpc->pending_max)
			rpc->pending_max = rpc->npending;
	}
	pthread_mutex_unlock(&rpc->lock);
	return rc;
}

int lm_rpc_finish(lm_rpc *rpc, struct lm_rpc_pending *call, void **reply,
		  size_t *reply_len, int timeout_ms)
{
	uint64_t deadline = deadline_from_ms(timeout_ms);
	struct lm_rpc_pending **pp;
	bool bad_mac;

	if (!rpc || !call || !call->started || !reply || !reply_len)
		return LM_EINVAL;
	pthread_mutex_lock(&rpc->lock);
	wait_locked(rpc, call_ready, call, deadline);
	for (pp = &rpc->pending; *pp != call; pp = &(*pp)->next)
		;
	*pp = call->next;
	call->started = false;
	rpc->npending--;
	arm_ack_timer_locked(rpc);
	arm_send_timer_locked(rpc);
	bad_mac = rpc->unauthentic.bad;
	pthread_mutex_unlock(&rpc->lock);
	/* a call that found no authentic server, where the server answered
	 * with another key (a short timeout: lemuriactl's), says so */
	if (bad_mac && (!call->done || call->rc == LM_EUNREACH))
		return LM_EAUTH;
	if (!call->done)
		return LM_ETIMEDOUT;
	if (call->rc)
		return call->rc;
	*reply = call->reply;
	*reply_len = call->len;
	return 0;
}

int lm_rpc_call_parts(lm_rpc *rpc, const struct lm_rel_part *parts,
		      size_t nparts, void **reply, size_t *reply_len,
		      int timeout_ms)
{
	struct lm_rpc_pending call;
	int rc;

	if (!rpc || !reply || !reply_len)
		return LM_EINVAL;
	rc = lm_rpc_start_parts(rpc, parts, nparts, &call);
	if (rc)
		return rc;
	return lm_rpc_finish(rpc, &call, reply, reply_len, timeout_ms);
}

int lm_rpc_send(lm_rpc *rpc, const void *msg, size_t len)
{
	int rc;

	if (!rpc || (!msg && len))
		return LM_EINVAL;
	pthread_mutex_lock(&rpc->lock);
	/* the first one-way message starts the thread that keeps them
	 * going while the caller computes (above); without it nothing
	 * would, and the message is not sent */
	if (!rpc->helper)
		ack_timer_setup(rpc);
	if (!rpc->helper) {
		pthread_mutex_unlock(&rpc->lock);
		return LM_ENOMEM;
	}
	rc = lm_rel_send(rpc->rel, rpc->server_id, msg, len, lm_now_us());
	if (rpc->driving)
		kick_driver_locked(rpc);
	else
		drive_now_locked(rpc); /* nobody drives */
	arm_ack_timer_locked(rpc);
	arm_send_timer_locked(rpc);
	pthread_mutex_unlock(&rpc->lock);
	return rc;
}

int lm_rpc_recv(lm_rpc *rpc, void **msg, size_t *len, int timeout_ms)
{
	uint64_t deadline = deadline_from_ms(timeout_ms);
	struct lm_rpc_recv_wait w;
	struct lm_rpc_queued *q;
	int rc;

	if (!rpc || !msg || !len)
		return LM_EINVAL;
	pthread_mutex_lock(&rpc->lock);
	w.events_at_start = rpc->events;
	wait_locked(rpc, recv_ready, &w, deadline);
	q = rpc->q_head;
	if (q) {
		rpc->q_head = q->next;
		if (!rpc->q_head)
			rpc->q_tail = &rpc->q_head;
		rpc->q_count--;
		rpc->q_bytes -= q->len;
		rc = 0;
	} else {
		rc = rpc->events != w.events_at_start ? rpc->last_event_rc
						      : LM_ETIMEDOUT;
	}
	arm_ack_timer_locked(rpc);
	pthread_mutex_unlock(&rpc->lock);
	if (!q)
		return rc;
	*msg = q->data;
	*len = q->len;
	free(q);
	return 0;
}

void lm_rpc_stats(lm_rpc *rpc, struct lm_rel_stats *out)
{
	pthread_mutex_lock(&rpc->lock);
	*out = *lm_rel_stats(rpc->rel);
	pthread_mutex_unlock(&rpc->lock);
}

void lm_rpc_set_keepalive(lm_rpc *rpc, uint64_t interval_us)
{
	pthread_mutex_lock(&rpc->lock);
	rpc->keepalive_us = interval_us;
	pthread_mutex_unlock(&rpc->lock);
}

uint64_t lm_rpc_probes(lm_rpc *rpc)
{
	uint64_t n;

	pthread_mutex_lock(&rpc->lock);
	n = rpc->probes;
	pthread_mutex_unlock(&rpc->lock);
	return n;
}
