/* Shared by the libFuzzer harnesses and tests/fuzz/gen_corpus.c: the input
 * formats the harnesses parse, the peers they pick from, and the engine
 * configuration, so that the generator writes seeds the harnesses read the
 * way it meant them.  Test code only; never linked into the programs.
 *
 * State machine harnesses (fuzz_home, fuzz_cluster): a sequence of
 *
 *   u8 from | u8 ctl | u16 len (little-endian) | len bytes of a message
 *
 * `from` picks the sender from fz_peers() (modulo its size).  ctl & 3 is
 * the transport kind (3: fuzz_cluster reports the sender lost instead; the
 * bytes are skipped).  For a REPLY, ctl >> 2 picks the request it answers
 * among the machine's latest ones (0 = the newest); a REQUEST gets a fresh
 * req id.  A message that does not decode is skipped.
 *
 * Engine harness (fuzz_engine): one mode byte (FZ_MODE_*), then records
 *
 *   u8 op | u8 dt | u16 len | len bytes
 *
 * The clock advances by dt milliseconds (dt 255: ten seconds, so that
 * timers fire) before the record is acted on; op & 3 is FZ_OP_*. */
#ifndef LM_FUZZ_INPUT_H
#define LM_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "reliable.h"

/* libFuzzer's entry points (the harnesses define them). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The layout every state machine harness runs: its path relative to the
 * repository, unless LM_FUZZ_LAYOUT names another file. */
#define FZ_LAYOUT_DEFAULT "conf/4+4.ini"
/* The home runs as r0 of a root of two reflectors, so that messages
 * between reflectors are fuzzed too. */
#define FZ_HOME_LAYOUT_DEFAULT "conf/2x2-two-reflectors.ini"
#define FZ_CLUSTER_NAME "c0"

#define FZ_REC_HDR 4
#define FZ_KIND_PEER_LOST 3
/* A FZ_KIND_PEER_LOST record with this bit of its control byte set is a
 * tick of the daemon's clock instead, for machines that have one. */
#define FZ_TICK 4
#define FZ_REQ_RING 16

/* ---- reading records ------------------------------------------------ */

struct fz_reader {
	const uint8_t *p;
	size_t left;
};

struct fz_record {
	uint8_t a, b; /* from/ctl or op/dt */
	const uint8_t *data;
	size_t len;
};

/* Returns 1 with *r filled, 0 at the end.  A last record shorter than its
 * length field takes what is left, so that every input means something. */
static inline int fz_next(struct fz_reader *rd, struct fz_record *r)
{
	size_t n;

	if (rd->left < FZ_REC_HDR)
		return 0;
	r->a = rd->p[0];
	r->b = rd->p[1];
	n = (size_t)rd->p[2] | ((size_t)rd->p[3] << 8);
	rd->p += FZ_REC_HDR;
	rd->left -= FZ_REC_HDR;
	if (n > rd->left)
		n = rd->left;
	r->data = rd->p;
	r->len = n;
	rd->p += n;
	rd->left -= n;
	return 1;
}

/* Appends a record to buf (cap bytes, *len used); 0 or -1 when full. */
static inline int fz_put(uint8_t *buf, size_t cap, size_t *len, uint8_t a,
			 uint8_t b, const void *data, size_t n)
{
	if (n > 0xffff || cap - *len < FZ_REC_HDR + n)
		return -1;
	buf[*len] = a;
	buf[*len + 1] = b;
	buf[*len + 2] = (uint8_t)n;
	buf[*len + 3] = (uint8_t)(n >> 8);
	if (n)
		memcpy(buf + *len + FZ_REC_HDR, data, n);
	*len += FZ_REC_HDR + n;
	return 0;
}

/* ---- peers of the state machine harnesses -------------------------- */

enum fz_role {
	FZ_ROLE_HOME,    /* reflector r0 of the layout */
	FZ_ROLE_CLUSTER, /* cluster FZ_CLUSTER_NAME */
};

#define FZ_PEERS_MAX 32

/* Fills ids (FZ_PEERS_MAX entries) with the machine's *nvalid valid
 * peers first (for the home: the clusters it serves; for the cluster: its
 * reflector, then its clients by rank), then ids it must refuse: 0,
 * itself, a client it does not serve (for the home: any client; for the
 * cluster: one of another cluster, and that cluster's daemon), a node
 * beyond the layout, and the control tool's id.  Returns how many; the
 * generator relies on this order. */
static inline size_t fz_peers(const struct lm_layout *l, enum fz_role role,
			      uint16_t *ids, size_t *nvalid)
{
	const struct lm_cluster_cfg *c = lm_layout_cluster(l, FZ_CLUSTER_NAME);
	uint16_t last = lm_layout_client_id(l, l->nprocs - 1);
	size_t n = 0;

	if (role == FZ_ROLE_HOME) {
		for (size_t i = 0; i < l->nclusters && n < 16; i++)
			if (l->clusters[i].reflector_index == 0)
				ids[n++] = l->clusters[i].id;
		for (size_t i = 1; i < l->nreflectors && n < 24; i++)
			ids[n++] = l->reflectors[i].id;
		*nvalid = n;
		ids[n++] = 0;
		ids[n++] = l->reflectors[0].id;
		ids[n++] = lm_layout_client_id(l, 0);
	} else {
		ids[n++] = l->reflectors[c->reflector_index].id;
		for (uint32_t i = 0; i < c->clients && n < 17; i++)
			ids[n++] = lm_layout_client_id(l, c->first_rank + i);
		*nvalid = n;
		ids[n++] = 0;
		ids[n++] = c->id;
		ids[n++] = lm_layout_cluster_of_rank(l, l->nprocs - 1)->id;
	}
	ids[n++] = last;
	ids[n++] = (uint16_t)(last + 1);
	ids[n++] = 0xffff;
	return n;
}

/* ---- the engine harness --------------------------------------------- */

/* Node ids: A is under test, B its well-behaved peer; the generator's
 * seeds come from a third engine G that A has never heard of. */
#define FZ_NODE_A 1
#define FZ_NODE_B 2
#define FZ_NODE_G 3
#define FZ_MAX_PEER 8 /* A drops datagrams from higher ids */

/* Bits of the engine harness's mode byte. */
#define FZ_MODE_AUTH 1u        /* both engines MAC with fz_key */
#define FZ_MODE_ACK_DELAY 2u   /* acknowledgements are delayed */
#define FZ_MODE_SMALL_WIN 4u   /* a window of 4 datagrams instead of 16 */

enum fz_op {
	FZ_OP_INPUT,   /* the bytes are a datagram for A */
	FZ_OP_SEND,    /* A sends the bytes to B as a one-way message */
	FZ_OP_REQUEST, /* A sends them to B as a request */
	FZ_OP_B_SEND,  /* B sends them to A */
};

static const uint8_t fz_key[LM_KEY_BYTES] = "lemuria fuzz key, not a secret";

/* Small limits, so that windows, queues, fragmentation and reassembly
 * limits are reached by inputs of a few KiB; fixed sessions, so that a
 * seed's datagrams are addressed to A's current session. */
static inline void fz_engine_config(struct lm_rel_config *cfg, uint16_t self,
				    const lm_auth *auth, unsigned mode)
{
	lm_rel_config_default(cfg, self);
	cfg->max_peer_id = FZ_MAX_PEER;
	cfg->session = 0x1000 * (uint64_t)self;
	cfg->auth = (mode & FZ_MODE_AUTH) ? auth : NULL;
	cfg->transport.mtu = 600;
	cfg->transport.rto_initial_us = 20000;
	cfg->transport.rto_min_us = 5000;
	cfg->transport.rto_max_us = 200000;
	cfg->transport.max_retries = 4;
	cfg->transport.window = (mode & FZ_MODE_SMALL_WIN) ? 4 : 16;
	cfg->transport.ack_delay_us = (mode & FZ_MODE_ACK_DELAY) ? 3000 : 0;
	cfg->max_message = 1u << 20; /* the engine's smallest */
	cfg->send_queue_bytes = 256u << 10;
	cfg->reasm_bytes = 1u << 20;
	cfg->reasm_timeout_us = 2000000;
	cfg->reply_cache_entries = 4;
	cfg->reply_cache_bytes = 16u << 10;
}

static inline uint64_t fz_advance_us(uint8_t dt)
{
	return dt == 255 ? 10000000u : (uint64_t)dt * 1000u;
}

#endif
