/* A blocking transport endpoint for the client library.
 *
 * Talks to exactly one server (the cluster's lemuriad).  Safe to call from
 * several threads: whichever thread is waiting drives the socket (poll,
 * lm_rel_input, lm_rel_tick) and hands replies to the other waiters, so a
 * single-threaded caller pays no thread wake-up.  Data the server sends
 * unasked is queued for lm_rpc_recv. */
#ifndef LM_RPC_H
#define LM_RPC_H

#include <netinet/in.h>
#include <stdbool.h>

#include "reliable.h"

typedef struct lm_rpc lm_rpc;

/* Binds an ephemeral port on the server's address family and declares the
 * server.  `faults` may be NULL.  Returns NULL with the reason in err. */
lm_rpc *lm_rpc_create(const struct sockaddr_in *server, uint16_t server_id,
		      const struct lm_rel_config *rcfg,
		      const struct lm_fault_cfg *faults, char *err,
		      size_t errlen);
/* Accepts NULL. */
void lm_rpc_destroy(lm_rpc *rpc);

/* Sends a request and waits for its reply.  On success *reply is a
 * malloc'd buffer owned by the caller (free it) of *reply_len bytes.
 * timeout_ms < 0 waits for ever (still failing with LM_EUNREACH when the
 * transport gives up).  Returns 0, LM_ETIMEDOUT, LM_EUNREACH, LM_ERESET,
 * LM_EMSGSIZE, LM_ENOBUFS, LM_ENOMEM.  On LM_ETIMEDOUT the reply, should
 * it come later, is discarded. */
int lm_rpc_call(lm_rpc *rpc, const void *req, size_t len, void **reply,
		size_t *reply_len, int timeout_ms);
/* The same for a request given as parts that follow one another (copied
 * into the datagrams, so the caller need not join them). */
int lm_rpc_call_parts(lm_rpc *rpc, const struct lm_rel_part *parts,
		      size_t nparts, void **reply, size_t *reply_len,
		      int timeout_ms);

/* A call in two halves, so that requests can follow one another without
 * waiting for each reply (the server takes them in order: the transport
 * is FIFO).  The caller owns the storage; its fields are the endpoint's
 * until lm_rpc_finish, which every started call must get. */
struct lm_rpc_pending {
	struct lm_rpc_pending *next;
	uint32_t req_id;
	bool started;
	bool done;
	int rc;
	void *reply; /* malloc'd; handed to the caller on success */
	size_t len;
};
/* Queues the request (its parts are copied) and returns: 0 or the
 * errors of lm_rpc_call_parts that come before waiting. */
int lm_rpc_start_parts(lm_rpc *rpc, const struct lm_rel_part *parts,
		       size_t nparts, struct lm_rpc_pending *call);
/* Waits for a started call's reply, as lm_rpc_call_parts does, and
 * forgets the call. */
int lm_rpc_finish(lm_rpc *rpc, struct lm_rpc_pending *call, void **reply,
		  size_t *reply_len, int timeout_ms);

/* With rcfg->transport.ack_delay_us > 0, replies are acknowledged late:
 * by the next request when it comes within the delay, else by a thread
 * of the endpoint's own that a POSIX timer wakes with the signal
 * SIGRTMIN + LM_RPC_ACK_SIGNAL_OFFSET, directed at that thread alone
 * (the application's threads never receive it).  When the thread or the
 * timer cannot be made, the endpoint acks at once.  True when rpc's acks
 * are delayed. */
#define LM_RPC_ACK_SIGNAL_OFFSET 5
bool lm_rpc_acks_delayed(const lm_rpc *rpc);

/* What an endpoint counted (LEMURIA_PROFILE, tests). */
struct lm_rpc_counters {
	/* Times the timer woke the ack thread: once per ack that no
	 * request carried in time, and at most once per delay while calls
	 * follow each other (a request that carries the acks owed leaves
	 * the timer armed; the thread re-arms it for an ack owed but not
	 * yet due). */
	uint64_t ack_wakeups;
	/* Times the ack timer was set: not once per call in a run of
	 * calls. */
	uint64_t ack_arms;
	/* Receive calls made on the socket: a call whose reply is one
	 * datagram takes one (reading stops at a reply, without the read
	 * that would find the socket empty). */
	uint64_t reads;
	/* The most calls that were in flight at once. */
	unsigned pending_max;
};

/* The endpoint's counters so far (all 0 for rpc NULL). */
struct lm_rpc_counters lm_rpc_counters(lm_rpc *rpc);

/* Gives back a reply or message buffer the endpoint handed out (or any
 * malloc'd buffer) once the caller is done with it, instead of free():
 * a big one is kept to reassemble a later message in (lm_rel_buf_put).
 * The endpoint owns buf afterwards; NULL is accepted. */
void lm_rpc_buf_free(lm_rpc *rpc, void *buf);

/* One-way message to the server, delivered in order with the calls.
 * The caller may compute afterwards without calling again: the
 * endpoint's thread (started with the first one-way message when the
 * acks are not delayed) resends it if it is lost.  LM_ENOMEM, nothing
 * sent, when that thread cannot be started. */
int lm_rpc_send(lm_rpc *rpc, const void *msg, size_t len);

/* Waits for a message the server sent unasked; ownership as lm_rpc_call. */
int lm_rpc_recv(lm_rpc *rpc, void **msg, size_t *len, int timeout_ms);

/* Copies the engine's counters (taken under the endpoint's lock). */
void lm_rpc_stats(lm_rpc *rpc, struct lm_rel_stats *out);

/* While calls wait with nothing of ours in flight, a PING goes to the
 * server every `interval_us` (0: never), so that a server that died after
 * acking a request is found (its calls fail with LM_EUNREACH after the
 * transport's retries) instead of waited for ever.  The PONGs are
 * dropped. */
#define LM_RPC_KEEPALIVE_US 1000000u
void lm_rpc_set_keepalive(lm_rpc *rpc, uint64_t interval_us);
/* PINGs sent so far. */
uint64_t lm_rpc_probes(lm_rpc *rpc);

#endif
