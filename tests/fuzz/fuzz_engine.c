/* libFuzzer harness for the reliability engine (common/reliable.c): fuzzed
 * datagrams go to an engine that talks to a well-behaved second engine,
 * under a fake clock; with auth off, or on with a fixed key. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "fuzz_input.h"
#include "lm_error.h"
#include "reliable.h"

/* Engine A is under test; B is wired to it through in-memory queues.  The
 * input (fuzz_input.h) is mostly datagrams fed straight to A, mixed with
 * messages A and B send each other; timers run at every step and are
 * driven to quiescence at the end.  With auth on, most fuzzed datagrams
 * fail the MAC, which is the point of that mode.  Crashes, leaks
 * (LeakSanitizer after each input) and reassembly or send queues beyond
 * their limits (I5) are failures.  FZ_TRACE=1 in the environment prints
 * what A delivered and dropped, to check a seed. */

#define QUEUE_MAX 512   /* datagrams in flight on one link; more are lost */
#define PUMP_MAX 4096   /* datagrams moved per step */
#define DRAIN_STEPS 64  /* timer rounds at the end of an input */
#define REPLY_MAX 2048  /* bytes of an echoed reply */

struct dgram {
	uint8_t *data;
	size_t len;
};

/* A FIFO of datagrams (owned copies) on its way to one engine. */
struct link {
	struct dgram q[QUEUE_MAX];
	size_t head, n;
};

struct world {
	lm_rel *a, *b;
	struct lm_rel_config cfg_a;
	struct link to_a, to_b;
	uint64_t now;
	uint32_t next_req;
	uint64_t sink; /* bytes of every delivery are read into this */
};

static struct world w;
static lm_auth *auth;
static int trace;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	auth = lm_auth_create(fz_key);
	if (!auth)
		abort();
	trace = getenv("FZ_TRACE") != NULL;
	return 0;
}

static void link_push(struct link *l, const uint8_t *dg, size_t len)
{
	struct dgram *d;

	if (l->n == QUEUE_MAX)
		return;
	d = &l->q[(l->head + l->n) % QUEUE_MAX];
	d->data = malloc(len ? len : 1);
	if (!d->data)
		abort();
	memcpy(d->data, dg, len);
	d->len = len;
	l->n++;
}

/* Hands the oldest datagram of l to rel; returns 0 when l was empty. */
static int link_deliver(struct link *l, lm_rel *rel)
{
	struct dgram d;
	int rc;

	if (l->n == 0)
		return 0;
	d = l->q[l->head];
	l->head = (l->head + 1) % QUEUE_MAX;
	l->n--;
	rc = lm_rel_input(rel, d.data, d.len, w.now);
	if (rc > 0 || rc < -LM_ERROR_COUNT_)
		__builtin_trap();
	free(d.data);
	return 1;
}

static void link_clear(struct link *l)
{
	while (l->n) {
		free(l->q[l->head].data);
		l->head = (l->head + 1) % QUEUE_MAX;
		l->n--;
	}
	l->head = 0;
}

/* ctx tells the engines apart; A's datagrams to anyone but B are lost. */
static void transmit(void *ctx, uint16_t peer, const uint8_t *dg, size_t len)
{
	if (ctx == &w.to_b && peer == FZ_NODE_B)
		link_push(&w.to_b, dg, len);
	else if (ctx == &w.to_a && peer == FZ_NODE_A)
		link_push(&w.to_a, dg, len);
}

/* Reads every delivered byte (so ASan sees a bad pointer) and answers
 * requests with the start of the request. */
static void deliver(void *ctx, const struct lm_rel_msg *msg)
{
	lm_rel *self = ctx == &w.to_b ? w.a : w.b;

	for (size_t i = 0; i < msg->len; i++)
		w.sink += msg->data[i];
	if (msg->kind >= LM_REL_MSG_KIND_COUNT)
		__builtin_trap();
	if (trace)
		fprintf(stderr, "fuzz: %c got kind %d req %u, %zu bytes "
			"from %u\n", ctx == &w.to_b ? 'A' : 'B', msg->kind,
			msg->req_id, msg->len, msg->peer);
	if (msg->kind == LM_REL_REQUEST)
		(void)lm_rel_reply(self, msg->peer, msg->req_id, msg->data,
				   msg->len < REPLY_MAX ? msg->len : REPLY_MAX,
				   w.now);
}

static void peer_event(void *ctx, uint16_t peer, enum lm_rel_peer_event ev)
{
	if (ev >= LM_REL_PEER_EVENT_COUNT)
		__builtin_trap();
	if (trace)
		fprintf(stderr, "fuzz: %c: peer %u %s\n",
			ctx == &w.to_b ? 'A' : 'B', peer,
			ev == LM_REL_PEER_RESET ? "reset" : "unreachable");
}

static const struct lm_rel_callbacks cbs = { transmit, deliver, peer_event };

static void pump(void)
{
	for (int i = 0; i < PUMP_MAX; i++) {
		int moved = link_deliver(&w.to_a, w.a);

		moved += link_deliver(&w.to_b, w.b);
		if (!moved)
			break;
	}
}

static void tick(void)
{
	lm_rel_tick(w.a, w.now);
	lm_rel_tick(w.b, w.now);
	pump();
}

/* I5: what A holds for reassembly and to send stays within its limits. */
static void check_bounds(void)
{
	if (lm_rel_reasm_held(w.a) > w.cfg_a.reasm_bytes)
		__builtin_trap();
	for (uint16_t p = 0; p <= FZ_MAX_PEER; p++)
		if (lm_rel_pending(w.a, p) > w.cfg_a.send_queue_bytes)
			__builtin_trap();
}

/* A's peer for op: B unless the op's upper bits name another id, which
 * may be unknown, out of range or A itself. */
static uint16_t op_peer(uint8_t op)
{
	unsigned sel = op >> 2;

	return sel == 0 ? FZ_NODE_B : (uint16_t)(sel % (FZ_MAX_PEER + 3));
}

static void step(const struct fz_record *r)
{
	uint8_t op = r->a;

	w.now += fz_advance_us(r->b);
	tick();
	switch (op & 3) {
	case FZ_OP_INPUT:
		(void)lm_rel_input(w.a, r->data, r->len, w.now);
		break;
	case FZ_OP_SEND:
		(void)lm_rel_send(w.a, op_peer(op), r->data, r->len, w.now);
		break;
	case FZ_OP_REQUEST:
		(void)lm_rel_request(w.a, op_peer(op), ++w.next_req, r->data,
				     r->len, w.now);
		break;
	case FZ_OP_B_SEND:
		(void)lm_rel_send(w.b, FZ_NODE_A, r->data, r->len, w.now);
		break;
	}
	pump();
	check_bounds();
}

static void drain(void)
{
	for (int i = 0; i < DRAIN_STEPS; i++) {
		uint64_t da = lm_rel_next_deadline(w.a);
		uint64_t db = lm_rel_next_deadline(w.b);
		uint64_t d = da < db ? da : db;

		if (d == UINT64_MAX)
			break;
		if (d > w.now)
			w.now = d;
		tick();
		check_bounds();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_reader rd = { data, size };
	struct lm_rel_config cfg_b;
	struct fz_record r;
	unsigned mode;

	if (size < 1)
		return 0;
	mode = data[0];
	rd.p++;
	rd.left--;

	memset(&w, 0, sizeof(w));
	w.now = 1000000;
	fz_engine_config(&w.cfg_a, FZ_NODE_A, auth, mode);
	fz_engine_config(&cfg_b, FZ_NODE_B, auth, mode);
	w.a = lm_rel_create(&w.cfg_a, &cbs, &w.to_b);
	w.b = lm_rel_create(&cfg_b, &cbs, &w.to_a);
	if (!w.a || !w.b)
		abort();

	while (fz_next(&rd, &r))
		step(&r);
	drain();
	if (trace) {
		const struct lm_rel_stats *st = lm_rel_stats(w.a);

		fprintf(stderr, "fuzz: A: %llu datagrams in, %llu messages "
			"delivered, %llu malformed, %llu auth, %llu replay, "
			"%llu duplicate, %llu stale session\n",
			(unsigned long long)st->dg_received,
			(unsigned long long)st->msgs_delivered,
			(unsigned long long)st->drop_malformed,
			(unsigned long long)st->drop_auth,
			(unsigned long long)st->drop_replay,
			(unsigned long long)st->drop_duplicate,
			(unsigned long long)st->drop_stale_session);
	}

	lm_rel_destroy(w.a);
	lm_rel_destroy(w.b);
	link_clear(&w.to_a);
	link_clear(&w.to_b);
	return 0;
}
