/* Reliability engine (transport layer): ordered, exactly-once, authenticated
 * message channels per peer over unreliable datagrams, kept as plain state
 * that lm_rel_input and lm_rel_tick drive (contract in reliable.h).
 *
 * Rules that are easy to break, stated once:
 *
 * Sessions.  Every datagram names its sender's session and the receiver's
 * session as the sender knows it (0: not yet known).  On input, after the
 * MAC check, the sender's session is compared with the one we know:
 *   - none known yet: learn it (first contact; the channel starts at seq 1);
 *   - greater: the peer restarted.  All our state of it (both channels,
 *     early datagrams, partial message, reply cache, replay window) is
 *     dropped, LM_REL_PEER_RESET reported, and the datagram processed under
 *     the new session;
 *   - smaller: a leftover of a dead incarnation, drop_stale_session.
 * Then the receiver session it names must be 0 or ours, otherwise it was
 * meant for an earlier incarnation of us: drop_stale_session, and a pure
 * ACK goes back so the peer learns our session (the ACK carries the peer's
 * session we just checked, so it is accepted there and cannot ping-pong).
 *
 * Retransmission (RFC 6298 with TCP-style recovery).  One timer per peer,
 * restarted whenever the cumulative ack moves.  On expiry the oldest hole
 * is resent, the timeout doubles and every datagram sent before the expiry
 * is taken for lost: those are resent in sequence order as acks come back,
 * two per datagram newly acknowledged (slow start), not all at once, so a
 * receiver that had to drop them is not flooded again.  A hole with three
 * later datagrams selectively acked is resent at once (fast retransmit;
 * fewer suffice at the tail of a burst, see Tail losses).
 *
 * Tail losses.  Request/reply traffic sends a few datagrams and then goes
 * quiet, so a loss among the last of them has no three later datagrams to
 * reveal it and would wait a whole RTO, which under jitter sits near
 * rto_max.  Two rules from TCP repair such tails sooner:
 *   - early retransmit (RFC 5827): with fewer than four datagrams in flight
 *     and nothing queued behind them, the threshold of fast retransmit
 *     drops to (in flight - 1) later datagrams selectively acked, at least
 *     one;
 *   - tail loss probe (RFC 8985's TLP): once the last queued datagram is
 *     out, and again whenever the cumulative ack moves with nothing left to
 *     send, a probe timer is armed at PTO = max(2 * srtt + ack_delay,
 *     rto_min / 2) (rto_initial before any RTT sample), only if that
 *     comes before the RTO.  The floor is below rto_min because on a
 *     steady path the RTO sits at rto_min, and a probe no earlier would
 *     never come first: every lost request or reply would wait a whole
 *     RTO.  It is twice the longest delay a client may put on its acks
 *     (docs/dsm.md "Client acknowledgements"), so a reply is not probed
 *     for want of a delayed ack; a probe that was not needed costs one
 *     datagram.  When it fires, the highest datagram in flight not
 *     selectively acked is resent once (the lost tail itself, or the last
 *     hole when the tail got through) and the RTO restarts from then.  The
 *     ack the probe provokes either repairs the tail outright or carries
 *     the selective acks that let (early) fast retransmit fill the holes
 *     below it.
 * A probe is not a timeout: the RTO does not double and the backoff count
 * toward max_retries does not grow.  It is still a resend, so by Karn's
 * rule its datagram gives no RTT sample.  At most one probe goes out until
 * the cumulative ack moves again, and none after an RTO until then (nor
 * while recovering from one), so a dead peer still meets its timeouts at
 * the usual pace, delayed by one PTO at most.
 *
 * Spurious timeouts (the Eifel algorithm of RFC 3522 and its response,
 * RFC 4015, with a flag for TCP's timestamps).  On a loaded host a
 * receiver may not run for longer than the RTO, with our datagrams
 * waiting in its socket: the timeout is spurious, and going back N
 * would resend a whole window it already holds, loading the host more.
 * So every resend carries LM_DGF_RESENT, and a receiver whose rcv_next
 * a resend moved sets LM_DGF_ACK_RESENT on the next datagram it sends to
 * that peer.  The first ack to move after a timeout tells the two apart:
 * without the flag, the originals arrived, so the recovery is called off
 * (real losses among them are still found by fast retransmit, the probe
 * or the next timeout), the RTO is the one before the timeout, and the
 * original's round trip is sampled (Karn's rule has no doubt here);
 * with it, recovery goes on.  An ack lost in between can only hide the
 * flag, which costs a slower recovery, never data.
 *
 * Unreachable peers.  When the timer expires max_retries times in a row
 * without the cumulative ack moving (the same datagram resent that often)
 * and expires once more, the channel fails (peer_fail, also used for a
 * reassembly timeout): the peer's state is dropped as on a reset and
 * the session we show to that peer (only) is raised by one.  The peer sees
 * that as our restart and drops its state of us too, so both directions
 * start again from seq 1 and nobody waits for a hole that will never be
 * filled.  Session numbers are microseconds << 12, so a real restart still
 * produces a larger session than any number of such bumps.
 *
 * Sequence numbers run 1..2^32-1 and skip 0 on wrap (0 marks a pure ACK on
 * the wire); every comparison goes through seq_diff.  Rings are indexed by
 * seq & mask with a power-of-two size larger than the window, which keeps
 * the slots of one window distinct across the wrap.
 *
 * Acknowledgements.  Every datagram out carries ack = rcv_next and the
 * bitmap of the next 32; a pure ACK goes out at once for out-of-order and
 * duplicate data, and for in-order data when ack_delay_us is 0 or two
 * datagrams wait (RFC 1122's every-second-segment rule), otherwise when
 * the delay expires unless data to that peer carried it first.  Selective
 * acks are advisory: a sender frees datagrams only on the cumulative ack.
 * A receiver may drop early datagrams it has selectively acked (reassembly
 * timeout, or to make room for the message that blocks delivery); the
 * sender notices when the cumulative ack stops at a datagram it believed
 * acked, and retransmits.
 *
 * Reassembly.  An early datagram that belongs to the message being
 * reassembled is written straight into it (every fragment but the last
 * has the size of the first, so each has a fixed place) and only marked;
 * others are copied and count against reasm_bytes, as does each partial
 * message for its whole length.  A partial message untouched for
 * reasm_timeout_us cannot be completed: its first fragments were
 * acknowledged and will never come again.  Dropping it silently would
 * break I4, so the channel fails as for an unreachable peer: all state of
 * the peer is dropped, the session we show it is raised (both directions
 * restart, and the peer reports our "restart" when it next hears from
 * us) and LM_REL_PEER_RESET is reported.  Early datagrams alone, with no
 * partial message, are merely freed: they were never acknowledged
 * cumulatively, so the sender still holds them and sends them again.
 *
 * Exactly once (I4 of DESIGN.md): a datagram is consumed only at seq ==
 * rcv_next, each seq once; requests are additionally filtered by the reply
 * cache and the highest request id delivered per peer.
 *
 * Callbacks may call lm_rel_send/request/reply but not lm_rel_input,
 * lm_rel_tick or lm_rel_destroy.  Peer structures are never freed before
 * lm_rel_destroy, so pointers to them survive any callback. */
#include "reliable.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lm_error.h"
#include "mem.h"
#include "wire.h"

#define REL_SACK_BITS	32
#define REL_REPLAY_BITS 64
#define REL_WINDOW_MAX	4096
#define REL_MIN_MESSAGE (1u << 20)
#define REL_MAX_FRAGS	65535u
#define REL_SEQ_SPACE	0xffffffffu /* values 1..2^32-1 */
/* Where every channel starts.  Only tests change it, to cross the wrap. */
#ifndef LM_REL_FIRST_SEQ
#define LM_REL_FIRST_SEQ 1u
#endif

/* The probe's floor, as a share of rto_min (Tail losses above). */
#define REL_PTO_MIN_SHARE 2u

/* A queued message, already laid out as the datagrams that carry it:
 * fragment i lives at dg + i * stride as header | payload | room for the
 * MAC.  Retransmissions rewrite the header and MAC in place.  A reply
 * stays after it is acknowledged while the reply cache holds it: `refs`
 * counts the queue and the cache. */
struct tx_msg {
	struct tx_msg *next;
	uint32_t refs;
	uint32_t len;
	uint32_t req_id;
	uint32_t frag_payload; /* payload of every fragment but the last */
	uint32_t first_seq;    /* set when fragment 0 goes out */
	size_t stride;
	size_t charge;	     /* counted against send_queue_bytes */
	uint16_t kind_flags; /* LM_DGF_REQUEST or LM_DGF_REPLY or 0 */
	uint16_t nfrag;
	uint16_t ready;      /* fragments filled in (tx_queue) */
	uint8_t dg[];
};

static void tx_msg_put(struct tx_msg *m)
{
	if (--m->refs == 0)
		free(m);
}

/* One datagram in flight (seq in [snd_una, snd_nxt)). */
struct tx_slot {
	struct tx_msg *msg; /* NULL: free */
	uint64_t sent_at;   /* last transmission */
	uint32_t seq;
	uint32_t retries;
	uint16_t frag;
	bool sacked;	/* selectively acknowledged */
	bool fast_done; /* fast-retransmitted once already */
};

/* The fields of a DATA datagram the receive side needs. */
struct rx_frag {
	uint32_t seq;
	uint32_t req_id;
	uint32_t msg_len;
	uint16_t flags;
	uint16_t frag_index;
	uint16_t frag_count;
	uint16_t len;
	const uint8_t *data;
};

/* A datagram that arrived before its turn; owns a copy of the payload. */
struct rx_early {
	struct rx_frag f;
	uint8_t payload[];
};

struct rx_partial {
	uint8_t *buf; /* NULL: no message being reassembled */
	uint32_t len;
	uint32_t filled;    /* bytes of the fragments before next_frag */
	uint32_t frag_size; /* payload of every fragment but the last */
	uint32_t req_id;
	uint16_t flags;
	uint16_t frag_count;
	uint16_t next_frag;
};

struct reply_entry {
	struct reply_entry *next;
	uint32_t req_id;
	size_t len;
	struct tx_msg *msg; /* the reply as it was queued */
};

struct peer {
	uint16_t id;
	bool active; /* on the engine's list of peers with timers */
	struct peer *act_prev, *act_next;
	uint64_t my_session;  /* our session as this peer must see it */
	uint64_t session;     /* the peer's session, 0 until known */
	uint64_t replay_hi;   /* highest stamp seen (auth only) */
	uint64_t replay_bits; /* bit i: stamp replay_hi - i seen */

	/* Send channel. */
	struct tx_msg *q_head, *q_tail;
	struct tx_msg *q_send; /* first message with fragments not yet sent */
	uint16_t q_send_frag;
	size_t q_bytes;	 /* payload bytes queued or in flight */
	size_t q_charge; /* the same plus one header per message */
	struct tx_slot *ring;
	uint32_t ring_mask;
	uint32_t snd_una;	 /* oldest unacknowledged seq */
	uint32_t snd_nxt;	 /* next seq to assign */
	uint64_t rtx_at;	 /* retransmission timer, 0: not armed */
	uint64_t recover_before; /* after a timeout: older sends are lost */
	uint32_t recover_next;	 /* next seq to consider resending */
	uint32_t recover_end;	 /* snd_nxt at the timeout */
	uint32_t backoff;	 /* timeouts since the cumulative ack moved */
	uint64_t undo_rto;	 /* the RTO before this run of timeouts, 0:
				    none since the cumulative ack moved */
	uint64_t undo_sent_at;	 /* first send of the datagram it resent */
	uint64_t probe_at;	 /* tail loss probe due, 0: not armed */
	bool probe_used; /* a probe went out since the cumulative ack moved */
	uint64_t srtt, rttvar, rto;
	bool rtt_valid;
	uint64_t retransmits; /* resends to this peer, kept across resets */

	/* Receive channel. */
	uint32_t rcv_next;
	struct rx_early **early; /* copies of early datagrams, by seq */
	uint64_t *placed; /* early fragments already in the partial message */
	uint32_t early_mask;
	uint32_t early_count;  /* entries in early */
	uint32_t placed_count; /* bits set in placed */
	struct rx_partial partial;
	uint64_t rcv_touch; /* last accepted DATA, for the reassembly timeout */
	uint32_t ack_pending; /* datagrams taken in since our last ack */
	bool ack_resent;      /* a resent datagram moved rcv_next since */
	uint64_t ack_at;      /* delayed ack due, 0: none */

	/* Reply cache, oldest first. */
	struct reply_entry *rc_head, *rc_tail;
	size_t rc_count, rc_bytes;
	uint32_t rc_max; /* highest request id put since the cache was
			  * emptied: none above it is cached, and requests
			  * come in rising, so most looks need no walk */
	uint32_t req_hi; /* highest request id delivered */
};

struct lm_rel {
	struct lm_rel_config cfg;
	struct lm_rel_callbacks cbs;
	void *ctx;
	struct lm_rel_stats stats;
	uint64_t session;
	uint64_t stamp;	   /* last stamp used */
	uint64_t now;	   /* latest time seen; never goes back */
	uint64_t deadline; /* never later than the earliest peer deadline */
	size_t mac_len;
	size_t frag_payload;
	size_t reasm_held;
	uint32_t ring_size;  /* power of two > window */
	struct peer **peers; /* max_peer_id + 1 entries */
	struct peer *act_head, *act_tail;
	uint8_t ackbuf[LM_WIRE_HDR_SIZE + LM_WIRE_MAC_SIZE];
	/* big buffers given back (lm_rel_buf_put), for the next messages */
	struct spare {
		uint8_t *buf;
		size_t cap;
	} spares[LM_REL_SPARES];
	size_t spare_bytes;
};

/* ---- sequence arithmetic ------------------------------------------- */

static uint32_t seq_next(uint32_t s)
{
	return s == UINT32_MAX ? 1 : s + 1;
}

static uint32_t seq_prev(uint32_t s)
{
	return s == 1 ? UINT32_MAX : s - 1;
}

static uint32_t seq_add(uint32_t s, uint32_t n)
{
	return (uint32_t)(((uint64_t)s - 1 + n) % REL_SEQ_SPACE) + 1;
}

/* Signed distance from a to b. */
static int64_t seq_diff(uint32_t a, uint32_t b)
{
	int64_t d = (int64_t)b - (int64_t)a;

	if (d > (int64_t)(REL_SEQ_SPACE / 2))
		d -= REL_SEQ_SPACE;
	else if (d < -(int64_t)(REL_SEQ_SPACE / 2))
		d += REL_SEQ_SPACE;
	return d;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* ---- configuration ------------------------------------------------- */

void lm_rel_config_default(struct lm_rel_config *cfg, uint16_t self_id)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->self_id = self_id;
	cfg->max_peer_id = UINT16_MAX;
	cfg->transport.mtu = 65000;
	if (cfg->transport.mtu > LM_WIRE_MAX_DATAGRAM)
		cfg->transport.mtu = LM_WIRE_MAX_DATAGRAM;
	cfg->transport.rto_initial_us = 20000;
	cfg->transport.rto_min_us = 2000;
	cfg->transport.rto_max_us = 1000000;
	cfg->transport.max_retries = 15;
	cfg->transport.window = 256;
	cfg->transport.ack_delay_us = 0;
	cfg->auth = NULL;
	cfg->session = 0;
	cfg->max_message = 16u << 20;
	cfg->send_queue_bytes = 32u << 20;
	cfg->reasm_bytes = 64u << 20;
	cfg->reasm_timeout_us = 10000000;
	cfg->reply_cache_entries = 64;
	/* small: a lemuriad's RELEASE to a client carries megabytes of
	 * updates, which no request is ever sent again for (lm_rpc gives
	 * each call a new id), and k clients' worth would sit here */
	cfg->reply_cache_bytes = 512u << 10;
}

static bool config_valid(const struct lm_rel_config *c, size_t frag_payload)
{
	const struct lm_transport_cfg *t = &c->transport;

	if (c->self_id == 0 || c->max_peer_id == 0)
		return false;
	if (t->window < 1 || t->window > REL_WINDOW_MAX)
		return false;
	if (t->rto_min_us == 0 || t->rto_min_us > t->rto_max_us ||
	    t->rto_initial_us < t->rto_min_us ||
	    t->rto_initial_us > t->rto_max_us)
		return false;
	if (c->max_message < REL_MIN_MESSAGE || c->max_message > UINT32_MAX)
		return false;
	if ((c->max_message + frag_payload - 1) / frag_payload > REL_MAX_FRAGS)
		return false;
	/* A message that can never fit could never be delivered. */
	if (c->reasm_bytes < c->max_message || c->reasm_timeout_us == 0)
		return false;
	if (c->spares > LM_REL_SPARES)
		return false;
	return true;
}

static uint64_t pick_session(void)
{
	struct timespec ts;
	uint16_t rnd = 0;
	uint64_t us;

	clock_gettime(CLOCK_REALTIME, &ts);
	us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint16_t)(ts.tv_nsec ^ (ts.tv_nsec >> 16));
	return (us << 12) | (rnd & 0xfffu);
}

static uint32_t pow2_above(uint32_t n)
{
	uint32_t r = 1;

	while (r <= n)
		r <<= 1;
	return r;
}

lm_rel *lm_rel_create(const struct lm_rel_config *cfg,
		      const struct lm_rel_callbacks *cbs, void *ctx)
{
	struct lm_rel *rel;
	struct lm_rel_config c;
	size_t overhead;

	if (!cfg || !cbs || !cbs->transmit || !cbs->deliver)
		return NULL;
	c = *cfg;
	if (c.transport.mtu > LM_WIRE_MAX_DATAGRAM)
		c.transport.mtu = LM_WIRE_MAX_DATAGRAM;
	overhead = LM_WIRE_HDR_SIZE + (c.auth ? LM_WIRE_MAC_SIZE : 0);
	if (c.transport.mtu < overhead + 1)
		return NULL;
	if (!config_valid(&c, c.transport.mtu - overhead))
		return NULL;

	rel = calloc(1, sizeof(*rel));
	if (!rel)
		return NULL;
	rel->peers = calloc((size_t)c.max_peer_id + 1, sizeof(*rel->peers));
	if (!rel->peers) {
		free(rel);
		return NULL;
	}
	rel->cfg = c;
	rel->cbs = *cbs;
	rel->ctx = ctx;
	rel->session = c.session ? c.session : pick_session();
	rel->deadline = UINT64_MAX;
	rel->mac_len = c.auth ? LM_WIRE_MAC_SIZE : 0;
	rel->frag_payload = c.transport.mtu - overhead;
	rel->ring_size = pow2_above(c.transport.window);
	return rel;
}

/* ---- peers and timers ---------------------------------------------- */

static struct peer *peer_get(struct lm_rel *rel, uint16_t id)
{
	struct peer *p = rel->peers[id];

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->id = id;
	p->my_session = rel->session;
	p->snd_una = p->snd_nxt = LM_REL_FIRST_SEQ;
	p->rcv_next = LM_REL_FIRST_SEQ;
	p->rto = rel->cfg.transport.rto_initial_us;
	rel->peers[id] = p;
	return p;
}

static uint64_t peer_deadline(const struct lm_rel *rel, const struct peer *p)
{
	uint64_t d = UINT64_MAX;

	if (p->rtx_at)
		d = p->rtx_at;
	if (p->probe_at)
		d = min_u64(d, p->probe_at);
	if (p->ack_at)
		d = min_u64(d, p->ack_at);
	if (p->partial.buf || p->early_count)
		d = min_u64(d, p->rcv_touch + rel->cfg.reasm_timeout_us);
	return d;
}

/* Called after anything that may have moved a peer's deadline earlier. */
static void peer_arm(struct lm_rel *rel, struct peer *p)
{
	uint64_t d = peer_deadline(rel, p);

	if (d == UINT64_MAX)
		return;
	if (!p->active) {
		p->active = true;
		p->act_next = NULL;
		p->act_prev = rel->act_tail;
		if (rel->act_tail)
			rel->act_tail->act_next = p;
		else
			rel->act_head = p;
		rel->act_tail = p;
	}
	if (d < rel->deadline)
		rel->deadline = d;
}

static void peer_deactivate(struct lm_rel *rel, struct peer *p)
{
	if (p->act_prev)
		p->act_prev->act_next = p->act_next;
	else
		rel->act_head = p->act_next;
	if (p->act_next)
		p->act_next->act_prev = p->act_prev;
	else
		rel->act_tail = p->act_prev;
	p->act_prev = p->act_next = NULL;
	p->active = false;
}

static void peer_event(struct lm_rel *rel, struct peer *p,
		       enum lm_rel_peer_event ev)
{
	if (rel->cbs.peer_event)
		rel->cbs.peer_event(rel->ctx, p->id, ev);
}

/* ---- state release ------------------------------------------------- */

static void tx_free_all(struct lm_rel *rel, struct peer *p)
{
	struct tx_msg *m, *next;

	for (m = p->q_head; m; m = next) {
		next = m->next;
		tx_msg_put(m);
	}
	p->q_head = p->q_tail = p->q_send = NULL;
	p->q_send_frag = 0;
	p->q_bytes = p->q_charge = 0;
	if (p->ring)
		memset(p->ring, 0, rel->ring_size * sizeof(*p->ring));
	p->rtx_at = p->recover_before = 0;
	p->probe_at = 0;
	p->probe_used = false;
	p->backoff = 0;
	p->undo_rto = p->undo_sent_at = 0;
	p->snd_una = p->snd_nxt = LM_REL_FIRST_SEQ;
	p->rtt_valid = false;
	p->srtt = p->rttvar = 0;
	p->rto = rel->cfg.transport.rto_initial_us;
}

static void rx_free_partial(struct lm_rel *rel, struct peer *p)
{
	if (p->placed_count) {
		memset(p->placed, 0, (rel->ring_size + 63) / 64 * 8);
		p->placed_count = 0;
	}
	if (!p->partial.buf)
		return;
	rel->reasm_held -= p->partial.len;
	lm_rel_buf_put(rel, p->partial.buf);
	memset(&p->partial, 0, sizeof(p->partial));
}

static void rx_free_early(struct lm_rel *rel, struct peer *p)
{
	if (!p->early_count)
		return;
	for (uint32_t i = 0; i <= p->early_mask; i++) {
		struct rx_early *e = p->early[i];

		if (!e)
			continue;
		rel->reasm_held -= e->f.len;
		free(e);
		p->early[i] = NULL;
	}
	p->early_count = 0;
}

static void reply_cache_free(struct peer *p)
{
	struct reply_entry *e, *next;

	for (e = p->rc_head; e; e = next) {
		next = e->next;
		tx_msg_put(e->msg);
		free(e);
	}
	p->rc_head = p->rc_tail = NULL;
	p->rc_count = p->rc_bytes = 0;
	p->rc_max = 0;
	p->req_hi = 0;
}

/* Forgets everything about the peer's channels; its session is the
 * caller's business. */
static void peer_reset(struct lm_rel *rel, struct peer *p)
{
	tx_free_all(rel, p);
	rx_free_partial(rel, p);
	rx_free_early(rel, p);
	p->rcv_next = LM_REL_FIRST_SEQ;
	p->ack_pending = 0;
	p->ack_at = 0;
	p->ack_resent = false;
	reply_cache_free(p);
	p->replay_hi = p->replay_bits = 0;
}

void lm_rel_destroy(lm_rel *rel)
{
	if (!rel)
		return;
	for (size_t i = 0; i <= rel->cfg.max_peer_id; i++) {
		struct peer *p = rel->peers[i];

		if (!p)
			continue;
		peer_reset(rel, p);
		free(p->ring);
		free(p->early);
		free(p->placed);
		free(p);
	}
	for (size_t i = 0; i < LM_REL_SPARES; i++)
		free(rel->spares[i].buf);
	free(rel->peers);
	free(rel);
}

/* ---- big buffers ----------------------------------------------------
 * A message of many datagrams is reassembled in a buffer of its own.  A
 * big one malloc'd afresh is a fresh mapping, and copying the fragments
 * in faults on each of its pages (mem.h); a receiver that gives it back
 * lets the next message reuse it, its pages present. */

/* malloc for a buffer filled at once: a big one gets its pages now
 * rather than a fault each as it is written (it is likely a fresh
 * mapping). */
static void *malloc_filled(size_t len)
{
	void *buf = malloc(len ? len : 1);

	if (buf && len >= LM_MEM_POPULATE_MIN)
		lm_mem_populate(buf, len);
	return buf;
}

/* A buffer for a message of len bytes: the smallest spare that holds it,
 * else a new one.  NULL when out of memory. */
static uint8_t *buf_get(struct lm_rel *rel, size_t len)
{
	struct spare *best = NULL;
	uint8_t *buf;

	for (struct spare *s = rel->spares; s < rel->spares + rel->cfg.spares;
	     s++)
		if (s->buf && s->cap >= len && (!best || s->cap < best->cap))
			best = s;
	if (best) {
		buf = best->buf;
		rel->spare_bytes -= best->cap;
		*best = (struct spare){ NULL, 0 };
		return buf;
	}
	return malloc_filled(len);
}

/* What the spares may hold in all: a quarter of the reassembly budget
 * (16 MiB by default), so that a client keeps no more than a few of its
 * largest replies. */
static size_t spare_budget(const struct lm_rel *rel)
{
	return rel->cfg.reasm_bytes / 4;
}

void lm_rel_buf_put(lm_rel *rel, void *buf)
{
	struct spare *slot = NULL;
	size_t cap;

	if (!buf)
		return;
	cap = malloc_usable_size(buf);
	if (!rel || !rel->cfg.spares || cap < LM_MEM_POPULATE_MIN ||
	    cap > spare_budget(rel)) {
		free(buf);
		return;
	}
	/* an empty slot, else the smallest spare if this one is larger */
	for (struct spare *s = rel->spares; s < rel->spares + rel->cfg.spares;
	     s++) {
		if (!s->buf) {
			slot = s;
			break;
		}
		if (!slot || s->cap < slot->cap)
			slot = s;
	}
	if (slot->buf) {
		if (slot->cap >= cap) {
			free(buf);
			return;
		}
		rel->spare_bytes -= slot->cap;
		free(slot->buf);
	}
	*slot = (struct spare){ buf, cap };
	rel->spare_bytes += cap;
	/* the budget bounds what is kept, largest out first */
	while (rel->spare_bytes > spare_budget(rel)) {
		struct spare *big = rel->spares;

		for (struct spare *s = rel->spares;
		     s < rel->spares + rel->cfg.spares; s++)
			if (s->cap > big->cap)
				big = s;
		rel->spare_bytes -= big->cap;
		free(big->buf);
		*big = (struct spare){ NULL, 0 };
	}
}

size_t lm_rel_spare_bytes(const lm_rel *rel)
{
	return rel ? rel->spare_bytes : 0;
}

/* ---- output -------------------------------------------------------- */

static bool rx_placed(const struct peer *p, uint32_t seq)
{
	uint32_t i = seq & p->early_mask;

	return p->placed_count && (p->placed[i / 64] >> (i % 64) & 1);
}

static void rx_place_mark(struct peer *p, uint32_t seq, bool on)
{
	uint32_t i = seq & p->early_mask;

	if (on) {
		p->placed[i / 64] |= 1ull << (i % 64);
		p->placed_count++;
	} else {
		p->placed[i / 64] &= ~(1ull << (i % 64));
		p->placed_count--;
	}
}

/* Is the early datagram `seq` held, copied or placed? */
static bool rx_held(const struct peer *p, uint32_t seq)
{
	const struct rx_early *e;

	if (!p->early)
		return false;
	e = p->early[seq & p->early_mask];
	return (e && e->f.seq == seq) || rx_placed(p, seq);
}

static uint32_t rx_sack(const struct lm_rel *rel, const struct peer *p)
{
	uint32_t sack = 0, seq = p->rcv_next;
	uint32_t n = rel->cfg.transport.window - 1;

	if (!p->early_count && !p->placed_count)
		return 0;
	if (n > REL_SACK_BITS)
		n = REL_SACK_BITS;
	for (uint32_t i = 0; i < n; i++) {
		seq = seq_next(seq);
		if (rx_held(p, seq))
			sack |= 1u << i;
	}
	return sack;
}

/* Fields every outgoing datagram carries.  Whatever goes out acknowledges
 * what we hold, so a pending or delayed ack is settled here. */
static void fill_common(struct lm_rel *rel, struct peer *p,
			struct lm_dg_header *h)
{
	h->flags |= rel->cfg.auth ? LM_DGF_MAC : 0;
	h->sender = rel->cfg.self_id;
	h->receiver = p->id;
	h->session = p->my_session;
	h->peer_session = p->session;
	h->stamp = ++rel->stamp;
	h->ack = p->rcv_next;
	h->sack = rx_sack(rel, p);
	if (p->ack_resent)
		h->flags |= LM_DGF_ACK_RESENT;
	p->ack_resent = false;
	p->ack_pending = 0;
	p->ack_at = 0;
}

/* dg holds header and payload (len bytes) and room for the MAC. */
static void emit(struct lm_rel *rel, struct peer *p, uint8_t *dg, size_t len)
{
	if (rel->cfg.auth) {
		lm_auth_sign(rel->cfg.auth, dg, len);
		len += LM_WIRE_MAC_SIZE;
	}
	rel->stats.dg_sent++;
	rel->stats.bytes_sent += len;
	rel->cbs.transmit(rel->ctx, p->id, dg, len);
}

static void send_ack(struct lm_rel *rel, struct peer *p)
{
	struct lm_dg_header h = {.type = LM_DG_ACK};

	fill_common(rel, p, &h);
	lm_wire_encode_header(&h, rel->ackbuf);
	rel->stats.acks_sent++;
	emit(rel, p, rel->ackbuf, LM_WIRE_HDR_SIZE);
}

size_t lm_rel_auth_answer(lm_rel *rel, uint16_t to, uint8_t *dg)
{
	struct lm_dg_header h = {
		.type = LM_DG_ACK, .flags = LM_DGF_MAC,
		.sender = rel->cfg.self_id, .receiver = to,
		.session = rel->session,
		.stamp = ++rel->stamp, /* a fresh nonce, as every MAC needs */
	};

	if (!rel->cfg.auth)
		return 0;
	lm_wire_encode_header(&h, dg);
	lm_auth_sign(rel->cfg.auth, dg, LM_WIRE_HDR_SIZE);
	rel->stats.dg_sent++;
	rel->stats.bytes_sent += LM_WIRE_HDR_SIZE + LM_WIRE_MAC_SIZE;
	return LM_WIRE_HDR_SIZE + LM_WIRE_MAC_SIZE;
}

static uint32_t frag_len(const struct tx_msg *m, uint16_t frag)
{
	if (frag + 1u < m->nfrag)
		return m->frag_payload;
	return m->len - (uint32_t)frag * m->frag_payload;
}

/* (Re)transmits one in-flight datagram with fresh stamp, acks and MAC. */
static void tx_emit(struct lm_rel *rel, struct peer *p, struct tx_slot *s)
{
	struct tx_msg *m = s->msg;
	uint8_t *dg = m->dg + (size_t)s->frag * m->stride;
	uint32_t plen = frag_len(m, s->frag);
	struct lm_dg_header h = {
	    .type = LM_DG_DATA,
	    .flags = m->kind_flags | (s->retries ? LM_DGF_RESENT : 0),
	    .payload_len = (uint16_t)plen,
	    .seq = s->seq,
	    .req_id = m->req_id,
	    .msg_len = m->len,
	    .frag_index = s->frag,
	    .frag_count = m->nfrag,
	};

	fill_common(rel, p, &h);
	lm_wire_encode_header(&h, dg);
	s->sent_at = rel->now;
	emit(rel, p, dg, LM_WIRE_HDR_SIZE + plen);
}

/* Arms the tail loss probe (Tail losses in the file comment) when the
 * datagrams in flight are the last ones queued, or disarms it.  Called
 * after new data went out and after the cumulative ack moved, with
 * rtx_at already restarted. */
static void tx_arm_probe(struct lm_rel *rel, struct peer *p)
{
	const struct lm_transport_cfg *t = &rel->cfg.transport;
	uint64_t pto;

	p->probe_at = 0;
	if (p->snd_una == p->snd_nxt || p->q_send || p->probe_used ||
	    p->backoff || p->recover_before || !p->rtx_at)
		return;
	/* Two round trips, plus the receiver's ack delay: a datagram alone
	 * may be acknowledged only when that expires.  Unmeasured, the path
	 * may be as slow as rto_initial says, and a probe sent earlier would
	 * cost the first RTT sample (Karn); so then it only comes before an
	 * RTO that Karn's rule left backed off. */
	pto = p->rtt_valid ? 2 * p->srtt : t->rto_initial_us;
	pto += t->ack_delay_us;
	if (pto < t->rto_min_us / REL_PTO_MIN_SHARE)
		pto = t->rto_min_us / REL_PTO_MIN_SHARE;
	if (rel->now + pto < p->rtx_at)
		p->probe_at = rel->now + pto;
}

/* Sends queued fragments while the window allows. */
static void tx_pump(struct lm_rel *rel, struct peer *p)
{
	uint32_t window = rel->cfg.transport.window;
	bool sent = false;

	while (p->q_send && seq_diff(p->snd_una, p->snd_nxt) < window) {
		struct tx_msg *m = p->q_send;
		uint32_t seq = p->snd_nxt;
		struct tx_slot *s = &p->ring[seq & p->ring_mask];

		if (p->q_send_frag >= m->ready)
			break; /* tx_queue is still filling it in */
		if (p->q_send_frag == 0)
			m->first_seq = seq;
		memset(s, 0, sizeof(*s));
		s->msg = m;
		s->seq = seq;
		s->frag = p->q_send_frag;
		p->snd_nxt = seq_next(seq);
		if (++p->q_send_frag == m->nfrag) {
			p->q_send = m->next;
			p->q_send_frag = 0;
		}
		tx_emit(rel, p, s);
		sent = true;
	}
	if (!p->rtx_at && p->snd_una != p->snd_nxt)
		p->rtx_at = rel->now + p->rto;
	if (sent)
		tx_arm_probe(rel, p);
	peer_arm(rel, p);
}

static void tx_retransmit(struct lm_rel *rel, struct peer *p, struct tx_slot *s)
{
	s->retries++;
	rel->stats.retransmits++;
	p->retransmits++;
	tx_emit(rel, p, s);
}

/* Frees the messages at the head of the queue that are fully acked. */
static void tx_release(struct peer *p)
{
	struct tx_msg *m;

	while ((m = p->q_head) && m != p->q_send &&
	       seq_diff(seq_add(m->first_seq, m->nfrag - 1u), p->snd_una) > 0) {
		p->q_head = m->next;
		if (!p->q_head)
			p->q_tail = NULL;
		p->q_bytes -= m->len;
		p->q_charge -= m->charge;
		tx_msg_put(m);
	}
}

/* Queues the message made of parts[0..nparts); *queued (may be NULL) is
 * set to it on success. */
static int tx_queue(struct lm_rel *rel, uint16_t peer, uint16_t kind_flags,
		    uint32_t req_id, const struct lm_rel_part *parts,
		    size_t nparts, struct tx_msg **queued)
{
	size_t fp = rel->frag_payload, stride, size, charge, len = 0;
	size_t part = 0, off = 0;
	struct tx_msg *m;
	struct peer *p;
	uint32_t nfrag;

	if (peer == 0 || peer == rel->cfg.self_id ||
	    peer > rel->cfg.max_peer_id || (!parts && nparts))
		return LM_EINVAL;
	for (size_t i = 0; i < nparts; i++) {
		if (!parts[i].data && parts[i].len)
			return LM_EINVAL;
		if (parts[i].len > rel->cfg.max_message - len)
			return LM_EMSGSIZE;
		len += parts[i].len;
	}
	p = peer_get(rel, peer);
	if (!p)
		return LM_ENOMEM;
	charge = len + LM_WIRE_HDR_SIZE;
	if (p->q_charge + charge > rel->cfg.send_queue_bytes)
		return LM_ENOBUFS;
	if (!p->ring) {
		p->ring = calloc(rel->ring_size, sizeof(*p->ring));
		if (!p->ring)
			return LM_ENOMEM;
		p->ring_mask = rel->ring_size - 1;
	}
	nfrag = len ? (uint32_t)((len + fp - 1) / fp) : 1;
	stride = LM_WIRE_HDR_SIZE + fp + rel->mac_len;
	size = sizeof(*m) + (size_t)(nfrag - 1) * stride + LM_WIRE_HDR_SIZE +
	       (len - (size_t)(nfrag - 1) * fp) + rel->mac_len;
	m = malloc_filled(size); /* filled at once, below */
	if (!m)
		return LM_ENOMEM;
	m->next = NULL;
	m->refs = 1;
	m->len = (uint32_t)len;
	m->req_id = req_id;
	m->frag_payload = (uint32_t)fp;
	m->first_seq = 0;
	m->stride = stride;
	m->charge = charge;
	m->kind_flags = kind_flags;
	m->nfrag = (uint16_t)nfrag;
	m->ready = len ? 0 : 1;
	if (p->q_tail)
		p->q_tail->next = m;
	else
		p->q_head = m;
	p->q_tail = m;
	if (!p->q_send) {
		p->q_send = m;
		p->q_send_frag = 0;
	}
	p->q_bytes += len;
	p->q_charge += charge;
	rel->stats.msgs_sent++;
	if (queued)
		*queued = m;
	/* The only copy of the message: straight into its datagrams, the
	 * parts one after the other whatever their lengths.  Each datagram
	 * the window lets go is signed and sent as soon as it is filled
	 * in, while its bytes are still in cache (a 600 KB update list
	 * filled in whole was signed at a third of the MAC's speed). */
	for (uint32_t i = 0; len && i < nfrag; i++) {
		uint8_t *dst = m->dg + (size_t)i * stride + LM_WIRE_HDR_SIZE;
		size_t want = frag_len(m, (uint16_t)i);

		while (want) {
			size_t n = parts[part].len - off;

			if (n == 0) {
				part++;
				off = 0;
				continue;
			}
			if (n > want)
				n = want;
			memcpy(dst, (const uint8_t *)parts[part].data + off, n);
			dst += n;
			off += n;
			want -= n;
		}
		m->ready = (uint16_t)(i + 1);
		if (i + 1 < nfrag)
			tx_pump(rel, p);
	}
	tx_pump(rel, p);
	return 0;
}

static void rel_advance(struct lm_rel *rel, uint64_t now)
{
	if (now > rel->now)
		rel->now = now;
}

int lm_rel_send(lm_rel *rel, uint16_t peer, const void *msg, size_t len,
		uint64_t now_us)
{
	struct lm_rel_part one = { msg, len };

	return lm_rel_queue(rel, peer, LM_REL_ONEWAY, 0, &one, 1, now_us);
}

int lm_rel_request(lm_rel *rel, uint16_t peer, uint32_t req_id, const void *msg,
		   size_t len, uint64_t now_us)
{
	struct lm_rel_part one = { msg, len };

	return lm_rel_queue(rel, peer, LM_REL_REQUEST, req_id, &one, 1,
			    now_us);
}

/* Keeps a reply (a reference to its queued datagrams, no copy); the
 * oldest entries make room.  A reply larger than the whole cache, or a
 * failed allocation, is simply not cached. */
static void reply_cache_put(struct lm_rel *rel, struct peer *p, uint32_t req_id,
			    struct tx_msg *m)
{
	struct reply_entry *e, **pp;
	size_t len = m->len;

	if (rel->cfg.reply_cache_entries == 0 ||
	    len > rel->cfg.reply_cache_bytes)
		return;
	for (pp = &p->rc_head; req_id <= p->rc_max && *pp;
	     pp = &(*pp)->next) {
		if ((*pp)->req_id != req_id)
			continue;
		e = *pp;
		*pp = e->next;
		if (p->rc_tail == e) {
			p->rc_tail = NULL;
			for (struct reply_entry *t = p->rc_head; t; t = t->next)
				p->rc_tail = t;
		}
		p->rc_count--;
		p->rc_bytes -= e->len;
		tx_msg_put(e->msg);
		free(e);
		break;
	}
	while (p->rc_head && (p->rc_count >= rel->cfg.reply_cache_entries ||
			      p->rc_bytes + len > rel->cfg.reply_cache_bytes)) {
		e = p->rc_head;
		p->rc_head = e->next;
		if (!p->rc_head)
			p->rc_tail = NULL;
		p->rc_count--;
		p->rc_bytes -= e->len;
		tx_msg_put(e->msg);
		free(e);
	}
	e = malloc(sizeof(*e));
	if (!e)
		return;
	e->next = NULL;
	e->req_id = req_id;
	e->len = len;
	e->msg = m;
	m->refs++;
	if (p->rc_tail)
		p->rc_tail->next = e;
	else
		p->rc_head = e;
	p->rc_tail = e;
	p->rc_count++;
	p->rc_bytes += len;
	if (req_id > p->rc_max)
		p->rc_max = req_id;
}

static const struct reply_entry *reply_cache_find(const struct peer *p,
						  uint32_t req_id)
{
	if (req_id > p->rc_max)
		return NULL;
	for (const struct reply_entry *e = p->rc_head; e; e = e->next)
		if (e->req_id == req_id)
			return e;
	return NULL;
}

int lm_rel_reply(lm_rel *rel, uint16_t peer, uint32_t req_id, const void *msg,
		 size_t len, uint64_t now_us)
{
	struct lm_rel_part one = { msg, len };

	return lm_rel_queue(rel, peer, LM_REL_REPLY, req_id, &one, 1, now_us);
}

int lm_rel_queue(lm_rel *rel, uint16_t peer, enum lm_rel_msg_kind kind,
		 uint32_t req_id, const struct lm_rel_part *parts,
		 size_t nparts, uint64_t now_us)
{
	struct tx_msg *m;
	int rc;

	if (!rel || (kind != LM_REL_ONEWAY && req_id == 0))
		return LM_EINVAL;
	rel_advance(rel, now_us);
	switch (kind) {
	case LM_REL_ONEWAY:
		return tx_queue(rel, peer, 0, 0, parts, nparts, NULL);
	case LM_REL_REQUEST:
		return tx_queue(rel, peer, LM_DGF_REQUEST, req_id, parts,
				nparts, NULL);
	case LM_REL_REPLY:
		rc = tx_queue(rel, peer, LM_DGF_REPLY, req_id, parts, nparts,
			      &m);
		if (rc == 0)
			reply_cache_put(rel, rel->peers[peer], req_id, m);
		return rc;
	default:
		return LM_EINVAL;
	}
}

/* ---- acknowledgements in ------------------------------------------- */

static void rtt_sample(struct lm_rel *rel, struct peer *p, uint64_t r)
{
	const struct lm_transport_cfg *t = &rel->cfg.transport;
	uint64_t rto;

	/* RFC 6298, section 2, in microseconds. */
	if (!p->rtt_valid) {
		p->srtt = r;
		p->rttvar = r / 2;
		p->rtt_valid = true;
	} else {
		uint64_t err = p->srtt > r ? p->srtt - r : r - p->srtt;

		p->rttvar = (3 * p->rttvar + err) / 4;
		p->srtt = (7 * p->srtt + r) / 8;
	}
	rto = p->srtt + (p->rttvar ? 4 * p->rttvar : 1);
	if (rto < t->rto_min_us)
		rto = t->rto_min_us;
	if (rto > t->rto_max_us)
		rto = t->rto_max_us;
	p->rto = rto;
	rel->stats.rtt_samples++;
}

static struct tx_slot *tx_slot_of(struct peer *p, uint32_t seq)
{
	return &p->ring[seq & p->ring_mask];
}

static bool tx_in_flight(const struct peer *p, uint32_t seq)
{
	int64_t d = seq_diff(p->snd_una, seq);

	return d >= 0 && d < seq_diff(p->snd_una, p->snd_nxt);
}

/* The receiver dropped datagrams it had selectively acked (it says so by
 * stopping its cumulative ack at one of them): resend those this ack shows
 * missing. */
static void tx_renege(struct lm_rel *rel, struct peer *p, uint32_t ack,
		      uint32_t sack)
{
	uint32_t seq = ack;

	for (int i = -1; i < REL_SACK_BITS; i++) {
		struct tx_slot *s;

		if (i >= 0)
			seq = seq_next(seq);
		if (!tx_in_flight(p, seq))
			break;
		s = tx_slot_of(p, seq);
		if (!s->sacked || (i >= 0 && (sack & (1u << i))))
			continue;
		s->sacked = false;
		tx_retransmit(rel, p, s);
	}
}

/* A hole with three later datagrams selectively acked is resent at once,
 * once per datagram; with fewer than four in flight and nothing queued,
 * one less than in flight suffices (early retransmit, RFC 5827).  Only
 * the range the ack describes is looked at. */
static void tx_fast_retransmit(struct lm_rel *rel, struct peer *p, uint32_t ack)
{
	uint32_t seq = ack, later = 0, thresh = 3;
	int64_t flight = seq_diff(p->snd_una, p->snd_nxt);
	int n = 0;

	if (!p->q_send && flight < 4)
		thresh = flight > 1 ? (uint32_t)flight - 1 : 1;

	/* ack itself and the REL_SACK_BITS after it, as far as in flight. */
	while (n <= REL_SACK_BITS && tx_in_flight(p, seq)) {
		later += tx_slot_of(p, seq)->sacked;
		seq = seq_next(seq);
		n++;
	}
	seq = ack;
	for (int i = 0; i < n && later >= thresh; i++, seq = seq_next(seq)) {
		struct tx_slot *s = tx_slot_of(p, seq);

		if (s->sacked) {
			later--;
		} else if (!s->fast_done) {
			s->fast_done = true;
			if (later >= 3)
				rel->stats.fast_retransmits++;
			else
				rel->stats.early_retransmits++;
			tx_retransmit(rel, p, s);
		}
	}
}

/* After a timeout, every datagram sent before it and still unacked is
 * taken for lost and resent in sequence order as acks come back, `budget`
 * at a time, like TCP's slow start after a retransmission timeout (RFC
 * 5681, 3.1).  Sequence order matters: the receiver may be unable to
 * buffer anything but the datagram it waits for. */
static void tx_recover(struct lm_rel *rel, struct peer *p, uint32_t budget)
{
	uint32_t seq = p->recover_next;

	if (seq_diff(seq, p->snd_una) > 0)
		seq = p->snd_una;
	while (budget && seq_diff(seq, p->recover_end) > 0) {
		struct tx_slot *s = tx_slot_of(p, seq);

		if (!s->sacked && s->sent_at < p->recover_before) {
			tx_retransmit(rel, p, s);
			budget--;
		}
		seq = seq_next(seq);
	}
	p->recover_next = seq;
	if (seq_diff(seq, p->recover_end) <= 0)
		p->recover_before = 0;
}

static void tx_ack(struct lm_rel *rel, struct peer *p, uint32_t ack,
		   uint32_t sack, bool by_resent)
{
	uint64_t newest = 0; /* latest send time among newly acked originals */
	uint32_t newly = 0;
	bool sample = false;
	int64_t adv;

	if (!p->ring || p->snd_una == p->snd_nxt || ack == 0)
		return;
	adv = seq_diff(p->snd_una, ack);
	/* Older than what we know (reordered ack) or beyond what we sent. */
	if (adv < 0 || adv > seq_diff(p->snd_una, p->snd_nxt))
		return;
	while (p->snd_una != ack) {
		struct tx_slot *s = tx_slot_of(p, p->snd_una);

		if (!s->sacked) {
			newly++;
			if (s->retries == 0 && s->sent_at >= newest) {
				newest = s->sent_at;
				sample = true;
			}
		}
		s->msg = NULL;
		p->snd_una = seq_next(p->snd_una);
	}
	tx_release(p);
	for (uint32_t i = 0, seq = ack; sack && i < REL_SACK_BITS; i++) {
		struct tx_slot *s;

		seq = seq_next(seq);
		if (!tx_in_flight(p, seq))
			break;
		s = tx_slot_of(p, seq);
		if (!(sack & (1u << i)) || s->sacked)
			continue;
		s->sacked = true;
		newly++;
		if (s->retries == 0 && s->sent_at >= newest) {
			newest = s->sent_at;
			sample = true;
		}
	}
	if (adv > 0 && p->undo_rto) {
		/* The first ack to move since a timeout (Spurious timeouts in
		 * the file comment).  Not moved by a resend: the datagrams
		 * sent before the timeout arrived, none needs resending, and
		 * the timeout was too short, so it comes back and learns the
		 * first send's round trip. */
		if (!by_resent) {
			rel->stats.spurious_timeouts++;
			p->recover_before = 0;
			p->rto = p->undo_rto;
			if (!sample && p->undo_sent_at) {
				newest = p->undo_sent_at;
				sample = true;
			}
		}
		p->undo_rto = 0;
	}
	/* Karn: only datagrams sent once give samples. */
	if (sample)
		rtt_sample(rel, p, rel->now - newest);
	if (adv > 0) {
		/* RFC 6298, 5.3: new data acked, restart the timer. */
		p->backoff = 0;
		p->rtx_at = p->snd_una != p->snd_nxt ? rel->now + p->rto : 0;
		p->probe_used = false;
	}
	if (p->snd_una == p->snd_nxt) {
		p->recover_before = 0;
		p->probe_at = 0;
		return;
	}
	if (tx_slot_of(p, p->snd_una)->sacked)
		tx_renege(rel, p, ack, sack);
	else if (sack)
		tx_fast_retransmit(rel, p, ack);
	if (newly && p->recover_before)
		tx_recover(rel, p, 2 * newly);
	if (adv > 0)
		tx_arm_probe(rel, p);
}

/* ---- receive side -------------------------------------------------- */

/* Queues a cached reply again, its payload gathered from the datagrams
 * it went out in (rare: its request came again with a new sequence
 * number). */
static void resend_reply(struct lm_rel *rel, struct peer *p,
			 const struct reply_entry *e)
{
	const struct tx_msg *m = e->msg;
	uint8_t *buf = malloc(m->len ? m->len : 1);
	struct lm_rel_part all = { buf, m->len };

	if (!buf)
		return; /* as if lost: the peer asks again */
	for (uint16_t i = 0; m->len && i < m->nfrag; i++)
		memcpy(buf + (size_t)i * m->frag_payload,
		       m->dg + (size_t)i * m->stride + LM_WIRE_HDR_SIZE,
		       frag_len(m, i));
	tx_queue(rel, p->id, LM_DGF_REPLY, m->req_id, &all, 1, NULL);
	free(buf);
}

/* Hands a whole message to the deliver callback; *take (NULL when the
 * bytes are the datagram's) is the heap buffer holding them, set to NULL
 * if the callback kept it. */
static void rx_deliver(struct lm_rel *rel, struct peer *p, uint16_t flags,
		       uint32_t req_id, const uint8_t *data, uint32_t len,
		       uint8_t **take)
{
	struct lm_rel_msg msg = {
	    .peer = p->id,
	    .kind = LM_REL_ONEWAY,
	    .req_id = req_id,
	    .data = data,
	    .len = len,
	    .take = take,
	};

	if (flags & LM_DGF_REPLY) {
		msg.kind = LM_REL_REPLY;
	} else if (flags & LM_DGF_REQUEST) {
		const struct reply_entry *e = reply_cache_find(p, req_id);

		msg.kind = LM_REL_REQUEST;
		if (e) {
			/* Answered already: send the same answer again
			 * rather than execute the request twice (I4). */
			rel->stats.reply_cache_hits++;
			resend_reply(rel, p, e);
			return;
		}
		if (req_id <= p->req_hi) {
			/* Still executing, or its reply was evicted. */
			rel->stats.reply_cache_stale++;
			return;
		}
		p->req_hi = req_id;
	}
	rel->stats.msgs_delivered++;
	rel->cbs.deliver(rel->ctx, &msg);
}

static void rx_advance(struct lm_rel *rel, struct peer *p)
{
	p->rcv_next = seq_next(p->rcv_next);
	p->ack_pending++;
	p->rcv_touch = rel->now;
}

/* Makes room for `need` reassembly bytes, if necessary by dropping this
 * peer's early datagrams, latest first: the message that blocks delivery
 * goes before anything queued behind it. */
static bool rx_reserve(struct lm_rel *rel, struct peer *p, size_t need)
{
	uint32_t seq;

	if (rel->reasm_held + need <= rel->cfg.reasm_bytes)
		return true;
	seq = seq_add(p->rcv_next, rel->cfg.transport.window - 1);
	while (p->early_count && seq != p->rcv_next &&
	       rel->reasm_held + need > rel->cfg.reasm_bytes) {
		struct rx_early **slot = &p->early[seq & p->early_mask];

		if (*slot && (*slot)->f.seq == seq) {
			rel->reasm_held -= (*slot)->f.len;
			free(*slot);
			*slot = NULL;
			p->early_count--;
			rel->stats.drop_reasm_limit++;
		}
		seq = seq_prev(seq);
	}
	return rel->reasm_held + need <= rel->cfg.reasm_bytes;
}

/* The fragment at rcv_next is in the partial message (copied just now or
 * placed there early): account for it, deliver the message when whole. */
static void rx_progress(struct lm_rel *rel, struct peer *p, uint32_t len)
{
	struct rx_partial *pm = &p->partial;
	uint8_t *buf = pm->buf;
	uint32_t mlen = pm->len, req_id = pm->req_id;
	uint16_t kind = pm->flags;

	pm->filled += len;
	pm->next_frag++;
	rx_advance(rel, p);
	if (pm->next_frag < pm->frag_count)
		return;
	/* Detach first: the deliver callback may send, even to this peer. */
	memset(pm, 0, sizeof(*pm));
	rel->reasm_held -= mlen;
	rx_deliver(rel, p, kind, req_id, buf, mlen, &buf);
	lm_rel_buf_put(rel, buf); /* NULL if the receiver kept it */
}

/* Does fragment f fit the partial message at fragment index `index`?
 * Every fragment but the last carries frag_size bytes, so each has a
 * fixed place in the buffer. */
static bool rx_fits(const struct rx_partial *pm, const struct rx_frag *f,
		    uint32_t index)
{
	uint16_t kind = f->flags & (LM_DGF_REQUEST | LM_DGF_REPLY);
	uint64_t off = (uint64_t)index * pm->frag_size;

	if (f->frag_index != index || f->frag_count != pm->frag_count ||
	    f->msg_len != pm->len || kind != pm->flags ||
	    f->req_id != pm->req_id)
		return false;
	if (index + 1u == pm->frag_count)
		return off + f->len == pm->len;
	return f->len == pm->frag_size && off + f->len <= pm->len;
}

/* Takes the fragment at rcv_next.  Returns 0 when consumed (rcv_next has
 * moved on, whatever became of the bytes), otherwise the datagram must
 * come again. */
static int rx_consume(struct lm_rel *rel, struct peer *p,
		      const struct rx_frag *f)
{
	struct rx_partial *pm = &p->partial;
	uint16_t kind = f->flags & (LM_DGF_REQUEST | LM_DGF_REPLY);

	if (f->frag_index == 0) {
		if (pm->buf) {
			/* The sender gave up the previous message. */
			rel->stats.drop_malformed++;
			rx_free_partial(rel, p);
		}
		if (f->msg_len > rel->cfg.max_message) {
			rel->stats.drop_malformed++;
			goto skip;
		}
		if (f->frag_count == 1) {
			if (f->len != f->msg_len) {
				rel->stats.drop_malformed++;
				goto skip;
			}
			/* Whole message in one datagram: no copy. */
			rx_advance(rel, p);
			rx_deliver(rel, p, kind, f->req_id, f->data, f->len,
				   NULL);
			return 0;
		}
		if (!rx_reserve(rel, p, f->msg_len))
			return LM_ENOBUFS;
		pm->buf = buf_get(rel, f->msg_len);
		if (!pm->buf)
			return LM_ENOMEM;
		pm->len = f->msg_len;
		pm->filled = 0;
		pm->frag_size = f->len;
		pm->req_id = f->req_id;
		pm->flags = kind;
		pm->frag_count = f->frag_count;
		pm->next_frag = 0;
		rel->reasm_held += pm->len;
	} else if (!pm->buf) {
		/* The rest of a message dropped as malformed. */
		goto skip;
	}
	if (!rx_fits(pm, f, pm->next_frag)) {
		rel->stats.drop_malformed++;
		rx_free_partial(rel, p);
		goto skip;
	}
	memcpy(pm->buf + pm->filled, f->data, f->len);
	rx_progress(rel, p, f->len);
	return 0;
skip:
	rx_advance(rel, p);
	return 0;
}

/* Consumes the early datagrams that are now in order. */
static void rx_drain(struct lm_rel *rel, struct peer *p)
{
	while (p->early_count || p->placed_count) {
		struct rx_early **slot = &p->early[p->rcv_next & p->early_mask];
		struct rx_partial *pm = &p->partial;
		struct rx_early *e = *slot;

		if (rx_placed(p, p->rcv_next)) {
			rx_place_mark(p, p->rcv_next, false);
			rx_progress(rel, p,
				    pm->next_frag + 1u == pm->frag_count
					? pm->len - pm->filled
					: pm->frag_size);
			continue;
		}
		if (!e || e->f.seq != p->rcv_next)
			return;
		*slot = NULL;
		p->early_count--;
		rel->reasm_held -= e->f.len;
		if (rx_consume(rel, p, &e->f) != 0) {
			/* No room for its message yet: keep it. */
			*slot = e;
			p->early_count++;
			rel->reasm_held += e->f.len;
			return;
		}
		free(e);
	}
}

static int rx_early(struct lm_rel *rel, struct peer *p, const struct rx_frag *f,
		    uint32_t d)
{
	struct rx_partial *pm = &p->partial;
	struct rx_early *e, **slot;

	if (!p->early) {
		p->early = calloc(rel->ring_size, sizeof(*p->early));
		p->placed = calloc((rel->ring_size + 63) / 64, 8);
		if (!p->early || !p->placed) {
			free(p->early);
			free(p->placed);
			p->early = NULL;
			p->placed = NULL;
			return LM_ENOMEM;
		}
		p->early_mask = rel->ring_size - 1;
	}
	slot = &p->early[f->seq & p->early_mask];
	if (*slot || rx_placed(p, f->seq)) {
		rel->stats.drop_duplicate++;
		send_ack(rel, p);
		return 0;
	}
	if (pm->buf && rx_fits(pm, f, pm->next_frag + d)) {
		/* Part of the message being reassembled: its bytes are
		 * already paid for, write them where they belong. */
		memcpy(pm->buf + (size_t)f->frag_index * pm->frag_size, f->data,
		       f->len);
		rx_place_mark(p, f->seq, true);
	} else {
		if (rel->reasm_held + f->len > rel->cfg.reasm_bytes) {
			/* Not acknowledged: the sender will try again. */
			rel->stats.drop_reasm_limit++;
			return LM_ENOBUFS;
		}
		e = malloc(sizeof(*e) + f->len);
		if (!e)
			return LM_ENOMEM;
		e->f = *f;
		memcpy(e->payload, f->data, f->len);
		e->f.data = e->payload;
		*slot = e;
		p->early_count++;
		rel->reasm_held += f->len;
	}
	p->rcv_touch = rel->now;
	/* Out of order: tell the sender at once (selective ack). */
	send_ack(rel, p);
	return 0;
}

static int rx_data(struct lm_rel *rel, struct peer *p,
		   const struct lm_dg_header *h, const uint8_t *payload)
{
	int64_t d = seq_diff(p->rcv_next, h->seq);
	struct rx_frag f = {
	    .seq = h->seq,
	    .req_id = h->req_id,
	    .msg_len = h->msg_len,
	    .flags = h->flags,
	    .frag_index = h->frag_index,
	    .frag_count = h->frag_count,
	    .len = h->payload_len,
	    .data = payload,
	};
	bool had_early = p->early_count || p->placed_count;
	bool resent_before;
	int rc;

	if (d < 0) {
		rel->stats.drop_duplicate++;
		send_ack(rel, p);
		return 0;
	}
	if (d >= rel->cfg.transport.window) {
		rel->stats.drop_window++;
		return LM_ENOBUFS;
	}
	if (d > 0)
		return rx_early(rel, p, &f, (uint32_t)d);
	/* Flagged before the message is delivered: a reply sent from the
	 * callback carries the first ack this resend moves, and without
	 * the flag the sender would take its timeout for spurious and call
	 * off the recovery (Spurious timeouts in the file comment). */
	resent_before = p->ack_resent;
	if (h->flags & LM_DGF_RESENT)
		p->ack_resent = true;
	rc = rx_consume(rel, p, &f);
	if (rc) {
		p->ack_resent = resent_before;
		rel->stats.drop_reasm_limit++;
		return rc;
	}
	rx_drain(rel, p);
	if (!p->ack_pending)
		return 0; /* a reply sent from the callback carried the ack */
	/* Delayed or not, every second datagram is acknowledged at once
	 * (as TCP does, RFC 1122 4.2.3.2), or a small window would stall. */
	if (rel->cfg.transport.ack_delay_us == 0 || had_early ||
	    p->ack_pending >= 2)
		send_ack(rel, p);
	else if (!p->ack_at)
		p->ack_at = rel->now + rel->cfg.transport.ack_delay_us;
	return 0;
}

/* Session rules of the file comment.  Returns 0 to go on. */
static int rx_session(struct lm_rel *rel, struct peer *p,
		      const struct lm_dg_header *h)
{
	if (p->session == 0) {
		p->session = h->session;
	} else if (h->session > p->session) {
		peer_reset(rel, p);
		p->session = h->session;
		rel->stats.peers_reset++;
		peer_event(rel, p, LM_REL_PEER_RESET);
	} else if (h->session < p->session) {
		rel->stats.drop_stale_session++;
		return LM_ESTALE;
	}
	if (h->peer_session != 0 && h->peer_session != p->my_session) {
		rel->stats.drop_stale_session++;
		send_ack(rel, p);
		return LM_ESTALE;
	}
	return 0;
}

/* Sliding window over stamps: each authentic datagram is accepted once. */
static bool rx_replay_ok(struct peer *p, uint64_t stamp)
{
	uint64_t d;

	if (stamp > p->replay_hi) {
		d = stamp - p->replay_hi;
		p->replay_bits = d >= REL_REPLAY_BITS ? 0 : p->replay_bits << d;
		p->replay_bits |= 1;
		p->replay_hi = stamp;
		return true;
	}
	d = p->replay_hi - stamp;
	if (d >= REL_REPLAY_BITS || (p->replay_bits & (1ull << d)))
		return false;
	p->replay_bits |= 1ull << d;
	return true;
}

static int count_decode_error(struct lm_rel *rel, int rc)
{
	if (rc == LM_EVERSION)
		rel->stats.drop_version++;
	else if (rc == LM_ETYPE)
		rel->stats.drop_type++;
	else
		rel->stats.drop_malformed++;
	return rc;
}

int lm_rel_input(lm_rel *rel, const uint8_t *dg, size_t len, uint64_t now_us)
{
	struct lm_dg_header h;
	const uint8_t *payload;
	struct peer *p;
	int rc;

	if (!rel || !dg)
		return LM_EINVAL;
	rel_advance(rel, now_us);
	rel->stats.dg_received++;
	rel->stats.bytes_received += len;
	rc = lm_wire_decode(dg, len, &h, &payload);
	if (rc)
		return count_decode_error(rel, rc);
	if (rel->cfg.auth ? !(h.flags & LM_DGF_MAC) ||
				lm_auth_verify(rel->cfg.auth, dg, len)
			  : (h.flags & LM_DGF_MAC) != 0) {
		rel->stats.drop_auth++;
		return LM_EAUTH;
	}
	if (h.receiver != rel->cfg.self_id) {
		rel->stats.drop_misaddressed++;
		return LM_EINVAL;
	}
	if (h.sender == 0 || h.sender == rel->cfg.self_id ||
	    h.sender > rel->cfg.max_peer_id) {
		rel->stats.drop_unknown_peer++;
		return LM_ENOENT;
	}
	if (h.stamp == 0 || h.session == 0) {
		rel->stats.drop_malformed++;
		return LM_EBADMSG;
	}
	p = peer_get(rel, h.sender);
	if (!p)
		return LM_ENOMEM;
	rc = rx_session(rel, p, &h);
	if (rc == 0 && rel->cfg.auth && !rx_replay_ok(p, h.stamp)) {
		rel->stats.drop_replay++;
		rc = LM_EREPLAY;
	}
	if (rc == 0) {
		tx_ack(rel, p, h.ack, h.sack,
		       (h.flags & LM_DGF_ACK_RESENT) != 0);
		if (h.type == LM_DG_ACK)
			rel->stats.acks_received++;
		else
			rc = rx_data(rel, p, &h, payload);
		/* Acks may have opened the window; replies may be queued. */
		if (p->q_send)
			tx_pump(rel, p);
	}
	peer_arm(rel, p);
	return rc;
}

/* ---- timers -------------------------------------------------------- */

/* The channel with p cannot go on (Unreachable peers in the file
 * comment): drop its state and restart both directions, then tell the
 * caller what was lost.  The caller has counted the cause. */
static void peer_fail(struct lm_rel *rel, struct peer *p,
		      enum lm_rel_peer_event ev)
{
	peer_reset(rel, p);
	/* Restart both channels: the peer takes this for our restart. */
	p->my_session++;
	peer_event(rel, p, ev);
}

/* RFC 6298, 5.4-5.6: resend the oldest hole, back off, restart the timer.
 * The other datagrams sent before now follow as acks come back
 * (tx_recover).  Reaching max_retries means max_retries timeouts in a row
 * without the cumulative ack moving: the same datagram resent that often. */
static void tx_timeout(struct lm_rel *rel, struct peer *p)
{
	const struct lm_transport_cfg *t = &rel->cfg.transport;
	uint32_t seq = p->snd_una;
	struct tx_slot *s;

	rel->stats.timeouts++;
	if (p->backoff >= t->max_retries) {
		rel->stats.peers_unreachable++;
		peer_fail(rel, p, LM_REL_PEER_UNREACHABLE);
		return;
	}
	p->backoff++;
	while (tx_slot_of(p, seq)->sacked && tx_in_flight(p, seq_next(seq)))
		seq = seq_next(seq);
	s = tx_slot_of(p, seq);
	if (s->sacked) {
		/* Everything in flight is selectively acked, yet the
		 * cumulative ack stays: the receiver let go of them. */
		s = tx_slot_of(p, p->snd_una);
		s->sacked = false;
	}
	if (!p->undo_rto) {
		p->undo_rto = p->rto;
		p->undo_sent_at = s->retries ? 0 : s->sent_at;
	}
	tx_retransmit(rel, p, s);
	p->rto = min_u64(2 * p->rto, t->rto_max_us);
	p->rtx_at = rel->now + p->rto;
	p->probe_at = 0; /* none until the cumulative ack moves */
	p->recover_before = rel->now;
	p->recover_next = p->snd_una;
	p->recover_end = p->snd_nxt;
}

/* The tail loss probe fired (Tail losses in the file comment): resend the
 * highest datagram in flight that the receiver has not shown it holds,
 * once, without backing off, and restart the RTO from now. */
static void tx_probe(struct lm_rel *rel, struct peer *p)
{
	uint32_t seq = seq_prev(p->snd_nxt);

	p->probe_at = 0;
	if (p->snd_una == p->snd_nxt)
		return;
	while (seq != p->snd_una && tx_slot_of(p, seq)->sacked)
		seq = seq_prev(seq);
	p->probe_used = true;
	rel->stats.tail_probes++;
	/* Counts as a resend, so Karn's rule keeps it from sampling. */
	tx_retransmit(rel, p, tx_slot_of(p, seq));
	p->rtx_at = rel->now + p->rto;
}

static void peer_tick(struct lm_rel *rel, struct peer *p)
{
	uint64_t now = rel->now;

	if ((p->partial.buf || p->early_count) &&
	    p->rcv_touch + rel->cfg.reasm_timeout_us <= now) {
		rel->stats.reasm_timeouts++;
		if (p->partial.buf) {
			/* A message we acknowledged in part is lost (I4). */
			peer_fail(rel, p, LM_REL_PEER_RESET);
			return;
		}
		rx_free_early(rel, p);
	}
	if (p->ack_at && p->ack_at <= now)
		send_ack(rel, p);
	if (p->rtx_at && p->rtx_at <= now)
		tx_timeout(rel, p); /* disarms the probe */
	if (p->probe_at && p->probe_at <= now)
		tx_probe(rel, p);
}

void lm_rel_tick(lm_rel *rel, uint64_t now_us)
{
	struct peer *p, *next;

	if (!rel)
		return;
	rel_advance(rel, now_us);
	if (rel->now < rel->deadline)
		return;
	/* Recomputed exactly below; callbacks may lower it meanwhile. */
	rel->deadline = UINT64_MAX;
	for (p = rel->act_head; p; p = next) {
		uint64_t d;

		if (peer_deadline(rel, p) <= rel->now)
			peer_tick(rel, p);
		/* Only this loop unlinks peers, so p is still listed. */
		next = p->act_next;
		d = peer_deadline(rel, p);
		if (d == UINT64_MAX)
			peer_deactivate(rel, p);
		else if (d < rel->deadline)
			rel->deadline = d;
	}
}

/* Exact, over the peers with timers (a few even on a busy daemon); the
 * cached lower bound only spares lm_rel_tick the scan. */
uint64_t lm_rel_next_deadline(const lm_rel *rel)
{
	uint64_t d = UINT64_MAX;

	if (!rel || rel->deadline == UINT64_MAX)
		return UINT64_MAX;
	for (const struct peer *p = rel->act_head; p; p = p->act_next)
		d = min_u64(d, peer_deadline(rel, p));
	return d;
}

uint64_t lm_rel_ack_due(const lm_rel *rel)
{
	uint64_t d = UINT64_MAX;

	if (!rel)
		return UINT64_MAX;
	for (const struct peer *p = rel->act_head; p; p = p->act_next)
		if (p->ack_at)
			d = min_u64(d, p->ack_at);
	return d;
}

/* Sends nothing but acks: lm_rpc's ack thread calls it when a delayed
 * ack falls due with nobody driving the socket. */
void lm_rel_flush_acks(lm_rel *rel, uint64_t now_us)
{
	if (!rel)
		return;
	rel_advance(rel, now_us);
	for (struct peer *p = rel->act_head; p; p = p->act_next)
		if (p->ack_pending || p->ack_at)
			send_ack(rel, p);
}

uint8_t *lm_rel_msg_keep(const struct lm_rel_msg *msg)
{
	uint8_t *kept;

	if (msg->take && *msg->take) {
		kept = *msg->take;
		*msg->take = NULL;
		return kept;
	}
	kept = malloc(msg->len ? msg->len : 1);
	if (kept)
		memcpy(kept, msg->data, msg->len);
	return kept;
}

/* ---- queries ------------------------------------------------------- */

size_t lm_rel_pending(const lm_rel *rel, uint16_t peer)
{
	if (!rel || peer > rel->cfg.max_peer_id || !rel->peers[peer])
		return 0;
	return rel->peers[peer]->q_bytes;
}

uint64_t lm_rel_rto(const lm_rel *rel, uint16_t peer)
{
	if (!rel)
		return 0;
	if (peer > rel->cfg.max_peer_id || !rel->peers[peer])
		return rel->cfg.transport.rto_initial_us;
	return rel->peers[peer]->rto;
}

uint64_t lm_rel_peer_retransmits(const lm_rel *rel, uint16_t peer)
{
	if (!rel || peer > rel->cfg.max_peer_id || !rel->peers[peer])
		return 0;
	return rel->peers[peer]->retransmits;
}

size_t lm_rel_reasm_held(const lm_rel *rel)
{
	return rel ? rel->reasm_held : 0;
}

uint64_t lm_rel_session(const lm_rel *rel)
{
	return rel ? rel->session : 0;
}

const struct lm_rel_stats *lm_rel_stats(const lm_rel *rel)
{
	return &rel->stats;
}
