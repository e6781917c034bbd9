/* The reliability engine: reliable, ordered, authenticated messages over
 * unreliable datagrams, written as plain state.
 *
 * Datagrams and the time go in (lm_rel_input, lm_rel_tick); datagrams to
 * transmit, delivered messages and peer events come out through callbacks;
 * lm_rel_next_deadline says when to call lm_rel_tick next.  No sockets, no
 * clock reads, no threads: a unit test drives two engines by hand.
 *
 * Per peer (node id) the engine keeps one channel in each direction:
 *  - messages are split into fragments of at most mtu - header - MAC bytes,
 *    each fragment a DATA datagram with its own sequence number;
 *  - the receiver acknowledges cumulatively plus a 32-bit selective bitmap,
 *    piggybacked on DATA or in a pure ACK (at once, or after ack_delay_us);
 *  - the sender keeps at most `window` datagrams in flight and retransmits
 *    on an adaptive timeout (RFC 6298 estimator, Karn's rule, exponential
 *    backoff) or when three later datagrams were selectively acknowledged
 *    (fewer at the tail of a burst); a lost tail is probed for after about
 *    two round trips rather than a whole timeout;
 *    after max_retries the peer is reported unreachable and its queues freed;
 *  - the receiver buffers datagrams that arrive early (within the window),
 *    suppresses duplicates, reassembles fragments and delivers each message
 *    exactly once and in the order it was sent (I4 of DESIGN.md);
 *  - every datagram carries a fresh stamp; with authentication on, the MAC
 *    is checked and stamps already seen (or older than a 64-stamp window)
 *    are dropped as replays;
 *  - requests carry a req id; the reply to a request is kept in a bounded
 *    per-peer cache so that a request that arrives again (re-sent by the
 *    caller with the same id) is answered from the cache, not re-executed.
 *
 * Sessions: each engine picks a session number at creation (time-based, so
 * it grows across restarts).  A datagram from a peer with a newer session
 * means the peer restarted: its old state is dropped and LM_REL_PEER_RESET
 * reported.  Datagrams addressed to an older session of ours are answered
 * with a pure ACK that tells the peer our current session.  A channel that
 * cannot go on (peer unreachable, or a partial message that timed out) is
 * restarted the same way: we drop our state, report the event and show
 * the peer a new session, so the peer sees our restart. */
#ifndef LM_RELIABLE_H
#define LM_RELIABLE_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "config.h"

typedef struct lm_rel lm_rel;

enum lm_rel_msg_kind {
	LM_REL_ONEWAY,  /* no reply expected */
	LM_REL_REQUEST, /* the receiver answers with lm_rel_reply(req_id) */
	LM_REL_REPLY,   /* answers the request with the same req_id */
	LM_REL_MSG_KIND_COUNT
};

/* A delivered message.  `data` is borrowed: valid only during the deliver
 * callback.  A message reassembled from several datagrams sits in a heap
 * buffer of its own, and then `take` is not NULL: a receiver that keeps
 * the message takes the buffer (data, to be freed with free()) by setting
 * *take to NULL, instead of copying it. */
struct lm_rel_msg {
	uint16_t peer;
	enum lm_rel_msg_kind kind;
	uint32_t req_id;
	const uint8_t *data;
	size_t len;
	uint8_t **take;
};

/* Gives the receiver msg's bytes to keep: the reassembly buffer when it
 * may take it, else a copy.  NULL when out of memory. */
uint8_t *lm_rel_msg_keep(const struct lm_rel_msg *msg);

/* Gives back a buffer the receiver kept (lm_rel_msg_keep), or any
 * malloc'd buffer, once done with it: an engine configured with spares
 * keeps the big ones (at most cfg.spares, each of LM_MEM_POPULATE_MIN
 * bytes or more and all of them within a quarter of reasm_bytes) to
 * reassemble the next messages in, whose pages are then present
 * already, and frees the rest.  A client wants that: its malloc maps
 * each big buffer afresh.  The engine owns buf afterwards, whatever it
 * does with it; NULL is accepted. */
#define LM_REL_SPARES 4
void lm_rel_buf_put(lm_rel *rel, void *buf);
/* Bytes of the buffers kept so far (0 for NULL). */
size_t lm_rel_spare_bytes(const lm_rel *rel);

enum lm_rel_peer_event {
	LM_REL_PEER_UNREACHABLE, /* retry limit reached; queued messages lost */
	LM_REL_PEER_RESET,       /* peer restarted (new session), or a
				  * partial message from it timed out:
				  * messages both ways may be lost */
	LM_REL_PEER_EVENT_COUNT
};

struct lm_rel_callbacks {
	/* Send one datagram to `peer` now.  `dg` is borrowed. */
	void (*transmit)(void *ctx, uint16_t peer, const uint8_t *dg,
			 size_t len);
	/* A whole message arrived.  May call lm_rel_send/request/reply. */
	void (*deliver)(void *ctx, const struct lm_rel_msg *msg);
	/* Optional. */
	void (*peer_event)(void *ctx, uint16_t peer,
			   enum lm_rel_peer_event event);
};

struct lm_rel_config {
	uint16_t self_id;
	uint16_t max_peer_id;         /* datagrams from higher ids are dropped */
	struct lm_transport_cfg transport;
	const lm_auth *auth;          /* NULL: no MAC sent or required */
	uint64_t session;             /* 0: chosen by the engine */
	size_t max_message;           /* largest message, bytes (>= 1 MiB) */
	size_t send_queue_bytes;      /* per peer, queued + in flight */
	size_t reasm_bytes;           /* all peers: early datagrams + partial
					 messages held for reassembly */
	uint64_t reasm_timeout_us;    /* a partial message untouched this
					 long resets the peer's channel */
	size_t reply_cache_entries;   /* per peer */
	size_t reply_cache_bytes;     /* per peer */
	unsigned spares;              /* big buffers kept for reuse
					 (lm_rel_buf_put), at most
					 LM_REL_SPARES; 0: none */
};

/* Fills cfg with defaults for the given node (auth NULL). */
void lm_rel_config_default(struct lm_rel_config *cfg, uint16_t self_id);

/* Counters; every drop has a reason. */
struct lm_rel_stats {
	uint64_t dg_sent, dg_received, bytes_sent, bytes_received;
	uint64_t msgs_sent, msgs_delivered;
	uint64_t retransmits, fast_retransmits, timeouts;
	uint64_t acks_sent, acks_received;
	uint64_t drop_malformed, drop_version, drop_type, drop_auth,
		drop_replay, drop_duplicate, drop_window, drop_unknown_peer,
		drop_stale_session, drop_reasm_limit, drop_misaddressed;
	uint64_t reasm_timeouts;
	uint64_t reply_cache_hits, reply_cache_stale;
	uint64_t peers_unreachable, peers_reset;
	uint64_t rtt_samples;
	/* Why datagrams were resent: retransmits counts every resend, of
	 * which fast_retransmits (three later datagrams selectively acked),
	 * early_retransmits (fewer, with under four in flight) and
	 * tail_probes (the probe timer fired); the rest followed timeouts,
	 * or a receiver letting go of what it had selectively acked. */
	uint64_t early_retransmits;
	uint64_t tail_probes;
	/* Timeouts the first ack after them showed needless: what was sent
	 * before arrived (Spurious timeouts in reliable.c). */
	uint64_t spurious_timeouts;
};

/* Copies cfg.  NULL on invalid configuration or allocation failure. */
lm_rel *lm_rel_create(const struct lm_rel_config *cfg,
		      const struct lm_rel_callbacks *cbs, void *ctx);
void lm_rel_destroy(lm_rel *rel);

/* Queue a message for `peer`; the bytes are copied.  Datagrams go out
 * through `transmit` before the call returns, as far as the window allows.
 * Returns 0, LM_EMSGSIZE, LM_ENOBUFS (send queue full), LM_EINVAL.
 * lm_rel_request: req_id must be non-zero and, per peer, not smaller than
 * any earlier request's (re-sending a request uses the same id).
 * lm_rel_reply: answers a delivered request; the reply is cached. */
int lm_rel_send(lm_rel *rel, uint16_t peer, const void *msg, size_t len,
		uint64_t now_us);
int lm_rel_request(lm_rel *rel, uint16_t peer, uint32_t req_id,
		   const void *msg, size_t len, uint64_t now_us);
int lm_rel_reply(lm_rel *rel, uint16_t peer, uint32_t req_id, const void *msg,
		 size_t len, uint64_t now_us);

/* The three above, for a message given as parts that follow one another
 * (copied into its datagrams, so an encoder need not join them first):
 * kind LM_REL_ONEWAY (req_id ignored), LM_REL_REQUEST or LM_REL_REPLY. */
struct lm_rel_part {
	const void *data;
	size_t len;
};
int lm_rel_queue(lm_rel *rel, uint16_t peer, enum lm_rel_msg_kind kind,
		 uint32_t req_id, const struct lm_rel_part *parts,
		 size_t nparts, uint64_t now_us);

/* Feed one received datagram (borrowed).  Returns 0 when accepted (even a
 * duplicate that was only re-acknowledged) or the LM_E* reason it was
 * dropped; the matching counter is incremented either way. */
int lm_rel_input(lm_rel *rel, const uint8_t *dg, size_t len, uint64_t now_us);

/* A signed ACK to node `to`, whose datagram failed authentication: no
 * state of ours, nothing acknowledged.  A sender with another secret sees
 * its MAC fail in turn and can tell that the secrets differ, where
 * silence would look like a lost peer (common/rpc.c, evnode.c).  Writes
 * LM_WIRE_HDR_SIZE + LM_WIRE_MAC_SIZE bytes into dg and returns that
 * length; 0 (nothing written) without auth. */
size_t lm_rel_auth_answer(lm_rel *rel, uint16_t to, uint8_t *dg);

/* Run timers due at now_us: retransmissions, delayed acks, reassembly
 * timeouts. */
void lm_rel_tick(lm_rel *rel, uint64_t now_us);

/* When lm_rel_tick must next be called; UINT64_MAX when nothing is
 * pending. */
uint64_t lm_rel_next_deadline(const lm_rel *rel);

/* When the earliest delayed ack falls due; UINT64_MAX when none waits. */
uint64_t lm_rel_ack_due(const lm_rel *rel);

/* Sends at once every ack owed (delayed or not), and nothing else. */
void lm_rel_flush_acks(lm_rel *rel, uint64_t now_us);

/* Bytes queued or in flight to peer (0 when idle). */
size_t lm_rel_pending(const lm_rel *rel, uint16_t peer);
/* Current retransmission timeout towards peer, microseconds. */
uint64_t lm_rel_rto(const lm_rel *rel, uint16_t peer);
/* Datagrams resent to peer since the engine was created (the per-peer
 * share of lm_rel_stats.retransmits; a reset of the peer keeps it). */
uint64_t lm_rel_peer_retransmits(const lm_rel *rel, uint16_t peer);
/* Bytes currently held for reassembly (all peers). */
size_t lm_rel_reasm_held(const lm_rel *rel);

uint64_t lm_rel_session(const lm_rel *rel);
const struct lm_rel_stats *lm_rel_stats(const lm_rel *rel);

#endif
