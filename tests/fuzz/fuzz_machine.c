/* Driver of the state machine harnesses (fuzz_home.c, fuzz_cluster.c):
 * input records (fuzz_input.h) become decoded messages from chosen peers,
 * handed one by one to a fresh machine, and what it emits is checked. */
#include "fuzz_machine.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lm_error.h"
#include "log.h"

/* Each message is decoded from its own heap copy that is freed after the
 * call, so a machine that keeps a borrowed pointer is caught by ASan.
 * What the machine emits is encoded, as the daemon glue would, and decoded
 * back; a message that does not survive that, a message to a node that is
 * not the machine's peer, or a request id that does not grow is a failure
 * (trap).  FZ_TRACE=1 in the environment prints the traffic, to check
 * what a seed does. */

#define NOTICE_WIRE_MIN 20 /* bytes of one notice on the wire, at least */

static struct lm_layout *layout;
static uint16_t peers[FZ_PEERS_MAX];
static size_t npeers, nvalid;
static bool trace;
static int ctx_token; /* its address is the machines' callback ctx */

/* State of one input. */
static struct {
	uint32_t ring[FZ_REQ_RING]; /* the machine's latest request ids */
	size_t nreq;                /* requests it made */
	uint32_t in_req;            /* last req id of the input's requests */
	uint8_t *buf;               /* encoding of an emitted message */
	size_t cap;
	bool later;                 /* the machine asked for background */
} st;

/* A machine whose background work never ends would hang its daemon. */
#define FZ_BACKGROUND_MAX 100000

static void noop_sink(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
}

void fz_machine_init(const struct fz_machine *fm)
{
	const char *path = getenv("LM_FUZZ_LAYOUT");
	char err[512];

	if (!path)
		path = fm->role == FZ_ROLE_HOME ? FZ_HOME_LAYOUT_DEFAULT :
		       FZ_LAYOUT_DEFAULT;
	if (lm_layout_load(path, &layout, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz: cannot load layout: %s\n"
			"fuzz: run from the repository root or set "
			"LM_FUZZ_LAYOUT\n", err);
		abort();
	}
	npeers = fz_peers(layout, fm->role, peers, &nvalid);
	trace = getenv("FZ_TRACE") != NULL;
	/* Debug level, so that every log statement formats its arguments. */
	lm_log_set_sink(noop_sink, NULL);
	lm_log_set_level(LM_LOG_DEBUG);
}

static const char *how_name[] = { "send", "request", "reply" };

/* Encodes m as the daemon glue would and decodes it back. */
static void check_emitted(void *ctx, int how, uint16_t node,
			  uint32_t req_id, const struct lm_msg *m)
{
	struct lm_notice *notices;
	struct lm_msg back;
	size_t need, i;
	int rc;

	if (ctx != &ctx_token)
		__builtin_trap();
	for (i = 0; i < nvalid && peers[i] != node; i++)
		;
	if (i == nvalid)
		__builtin_trap(); /* not a peer of this machine */
	need = lm_msg_encoded_len(m);
	if (need == 0)
		__builtin_trap(); /* not a DSM message */
	if (need > st.cap) {
		free(st.buf);
		st.buf = malloc(need);
		if (!st.buf)
			abort();
		st.cap = need;
	}
	rc = lm_msg_encode(m, st.buf, need);
	if (rc < 0 || (size_t)rc != need)
		__builtin_trap();
	notices = malloc((need / NOTICE_WIRE_MIN + 1) * sizeof(*notices));
	if (!notices)
		abort();
	rc = lm_msg_decode(st.buf, need, &back, notices,
			   need / NOTICE_WIRE_MIN + 1);
	if (rc != 0 || back.type != m->type || back.nnotices != m->nnotices ||
	    back.data_len != m->data_len || back.diffs.len != m->diffs.len)
		__builtin_trap();
	free(notices);
	if (trace)
		fprintf(stderr, "fuzz:   %s %s to %u (req %u, %zu bytes): "
			"status %d id %u rank %u page %u version %u "
			"offset %llu, %u notices\n", how_name[how],
			lm_msg_name(m->type), node, req_id, need, m->status,
			m->id, m->rank, m->page, m->version,
			(unsigned long long)m->offset, m->nnotices);
}

static void out_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	check_emitted(ctx, 0, node, 0, m);
}

static void out_request(void *ctx, uint16_t node, uint32_t req_id,
			const struct lm_msg *m)
{
	if (st.nreq && req_id <= st.ring[(st.nreq - 1) % FZ_REQ_RING])
		__builtin_trap(); /* req ids must grow */
	st.ring[st.nreq++ % FZ_REQ_RING] = req_id;
	check_emitted(ctx, 1, node, req_id, m);
}

static void out_reply(void *ctx, uint16_t node, uint32_t req_id,
		      const struct lm_msg *m)
{
	check_emitted(ctx, 2, node, req_id, m);
}

static void out_later(void *ctx)
{
	if (ctx != &ctx_token)
		__builtin_trap();
	st.later = true;
}

static const struct lm_msg_out fz_out = { out_send, out_request, out_reply,
					  out_later };

/* One step of the work put off, when asked for and the machine has it. */
static void background_step(const struct fz_machine *fm, void *mach)
{
	if (!st.later || !fm->background)
		return;
	st.later = false;
	if (fm->background(mach))
		st.later = true;
}

/* The req id a record's message travels with (fuzz_input.h). */
static uint32_t record_req_id(enum lm_rel_msg_kind kind, uint8_t ctl)
{
	size_t back = ctl >> 2;
	size_t held = st.nreq < FZ_REQ_RING ? st.nreq : FZ_REQ_RING;

	if (kind == LM_REL_REQUEST)
		return ++st.in_req;
	if (kind != LM_REL_REPLY)
		return 0;
	if (back < held)
		return st.ring[(st.nreq - 1 - back) % FZ_REQ_RING];
	return (uint32_t)back; /* answers nothing the machine asked */
}

static void feed(const struct fz_machine *fm, void *mach,
		 const struct fz_record *r)
{
	uint16_t from = peers[r->a % npeers];
	unsigned k = r->b & 3;
	enum lm_rel_msg_kind kind;
	struct lm_notice *notices;
	struct lm_msg m;
	uint32_t req_id;
	size_t cap = r->len / NOTICE_WIRE_MIN + 1;
	uint8_t *copy;

	if (k == FZ_KIND_PEER_LOST && (r->b & FZ_TICK) && fm->tick) {
		if (trace)
			fprintf(stderr, "fuzz: tick\n");
		fm->tick(mach);
		return;
	}
	if (k == FZ_KIND_PEER_LOST && fm->peer_lost) {
		if (trace)
			fprintf(stderr, "fuzz: peer %u lost\n", from);
		fm->peer_lost(mach, from);
		return;
	}
	kind = (enum lm_rel_msg_kind)(k % LM_REL_MSG_KIND_COUNT);
	req_id = record_req_id(kind, r->b);

	copy = malloc(r->len ? r->len : 1);
	notices = malloc(cap * sizeof(*notices));
	if (!copy || !notices)
		abort();
	if (r->len)
		memcpy(copy, r->data, r->len);
	if (lm_msg_decode(copy, r->len, &m, notices, cap) == 0) {
		if (trace)
			fprintf(stderr, "fuzz: %s %s from %u (req %u)\n",
				how_name[kind], lm_msg_name(m.type), from,
				req_id);
		fm->handle(mach, from, kind, req_id, &m);
	} else if (trace) {
		fprintf(stderr, "fuzz: undecodable record from %u\n", from);
	}
	free(notices);
	free(copy);
}

void fz_machine_run(const struct fz_machine *fm, const uint8_t *data,
		    size_t size)
{
	struct fz_reader rd = { data, size };
	struct fz_record r;
	void *mach;

	st.nreq = 0;
	st.in_req = 0;
	st.later = false;
	mach = fm->create(layout, &fz_out, &ctx_token);
	if (!mach)
		abort();
	while (fz_next(&rd, &r)) {
		feed(fm, mach, &r);
		background_step(fm, mach);
	}
	for (unsigned i = 0; st.later && fm->background; i++) {
		if (i == FZ_BACKGROUND_MAX)
			__builtin_trap();
		background_step(fm, mach);
	}
	fm->destroy(mach);
}
