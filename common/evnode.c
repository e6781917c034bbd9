/* Transport driver for the daemons: runs a reliability engine on a UDP
 * socket from a libevent loop.  Reads are batched per wake-up, one timer
 * tracks the engine's (and the loss injector's) next deadline, and peer
 * addresses come from the layout or from the first authentic datagram.
 * Datagrams produced while one event is handled (a read burst, a timer, an
 * API call) leave together as one train: one sendmmsg for all of them,
 * whatever their destinations; a long one (LM_EVNODE_DIRECT_BYTES) leaves
 * at once on its own, uncopied, behind the train loaded before it.  Every
 * datagram refused here or by the engine is counted by cause and logged,
 * rate-limited (log.h), with the address it came from.
 *
 * Threading: everything here, the callbacks included, runs on the thread
 * of the event_base; call lm_evnode_* only from that thread. */
#include "evnode.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "loss.h"
#include "lm_error.h"
#include "log.h"
#include "refusals.h"
#include "udp.h"
#include "wire.h"

/* Datagrams read per wake-up: a flood must not starve the timers. */
#define LM_EVNODE_READ_BATCH 256
/* One buffer holds any IPv4 UDP payload; larger reads mean truncation. */
#define LM_EVNODE_BUF 65536
/* Datagrams taken per recvmmsg: a call that returns fewer found the
 * socket empty, so a wake-up for one datagram costs one call, not a
 * second that fails with EAGAIN. */
#define LM_EVNODE_RX_VLEN 8
/* Datagrams the loss injector may hold back at once. */
#define LM_EVNODE_FAULT_HOLD 4096
/* A train: at most this many datagrams and bytes, then it leaves. */
#define LM_EVNODE_TRAIN_DGS 64
#define LM_EVNODE_TRAIN_BYTES (256 * 1024)
/* A datagram this long leaves at once, from where the engine built it,
 * behind the train loaded so far: copying it into the train cost more
 * than the call it would share (a 64 KB memcpy against one sendto). */
#define LM_EVNODE_DIRECT_BYTES (16 * 1024)
/* Answers to datagrams that fail authentication: at most one per this
 * many microseconds (answer_unauthentic). */
#define LM_EVNODE_AUTH_ANSWER_US 100000u

enum lm_evnode_addr_state {
	LM_EVNODE_ADDR_NONE,     /* nothing known: transmissions are dropped */
	LM_EVNODE_ADDR_LEARNED,  /* source of its last authentic datagram */
	LM_EVNODE_ADDR_DECLARED, /* from lm_evnode_add_peer; never changes */
	LM_EVNODE_ADDR_STATE_COUNT
};

struct lm_evnode_peer {
	struct sockaddr_in addr;
	enum lm_evnode_addr_state state;
	/* ICMP port unreachable while never heard from (refusals.h): a
	 * reflector not started, a layout's wrong port */
	struct lm_refusals refused;
	/* datagrams from its address whose MAC failed, while none passed
	 * (`heard`): the other side has another secret */
	struct lm_auth_refusals unauthentic;
	bool give_up;           /* to be reported unreachable (report_refused) */
};

struct lm_evnode {
	struct event_base *base;
	int fd;
	lm_rel *rel;
	lm_loss *fault; /* NULL without fault injection */
	struct event *read_ev;
	struct event *timer_ev;
	uint64_t timer_at; /* absolute deadline armed, UINT64_MAX: none */
	struct lm_evnode_callbacks cbs;
	void *ctx;
	struct lm_evnode_peer *peers; /* indexed by node id */
	size_t npeers;     /* every id the engine allows: 65536 */
	unsigned give_ups; /* peers with give_up set: report_refused scans
			      the table only then, not at every event */
	/* While lm_rel_input runs: who sent the datagram and from where, so
	 * that an answer to a peer not yet learned can still go out. */
	bool in_input;
	uint16_t input_sender;
	struct sockaddr_in input_src;
	bool auth;         /* the engine requires a MAC */
	struct lm_evnode_drop_stats drops; /* refused before the engine */
	uint64_t tx_drops; /* sendto refused, or no address for the peer */
	uint64_t auth_answered_at; /* the last answer to a bad MAC */
	uint8_t *rxbuf;    /* the datagram being input: one of rxbufs */
	uint8_t *rxbufs;   /* LM_EVNODE_RX_VLEN buffers of LM_EVNODE_BUF */
	struct mmsghdr rxmsgs[LM_EVNODE_RX_VLEN];
	struct iovec rxiov[LM_EVNODE_RX_VLEN];
	struct sockaddr_in rxsrc[LM_EVNODE_RX_VLEN];
	uint8_t *fxbuf;    /* datagrams released by the loss injector */
	/* the train being loaded while an event is handled (depth > 0) */
	unsigned depth;
	uint8_t *train;    /* LM_EVNODE_TRAIN_BYTES */
	size_t train_len;
	unsigned ntrain;
	struct mmsghdr msgs[LM_EVNODE_TRAIN_DGS];
	struct iovec iov[LM_EVNODE_TRAIN_DGS];
	struct sockaddr_in to[LM_EVNODE_TRAIN_DGS];
	uint64_t trains, train_dgs;
	uint64_t rx_reads, rx_dgs; /* recvmmsg calls, datagrams they took */
};

static bool same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr &&
	       a->sin_port == b->sin_port;
}

static const struct sockaddr_in *peer_addr(const struct lm_evnode *node,
					   uint16_t peer)
{
	const struct lm_evnode_peer *p;

	if (peer >= node->npeers)
		return NULL;
	p = &node->peers[peer];
	if (p->state == LM_EVNODE_ADDR_DECLARED)
		return &p->addr;
	/* A reply produced while its request is being input goes where the
	 * request came from, even before the engine has accepted it. */
	if (node->in_input && node->input_sender == peer)
		return &node->input_src;
	if (p->state == LM_EVNODE_ADDR_LEARNED)
		return &p->addr;
	return NULL;
}

static void drain_errors(struct lm_evnode *node, uint64_t now);

/* A send that failed with an error an earlier datagram met (IP_RECVERR
 * reports ICMP errors on the next call): the errors are read, and the
 * datagram is worth sending again. */
static bool stale_error(struct lm_evnode *node)
{
	if (errno != ECONNREFUSED && errno != EHOSTUNREACH &&
	    errno != ENETUNREACH)
		return false;
	drain_errors(node, lm_now_us());
	return true;
}

/* Sends the loaded train: one sendmmsg (more only if the kernel takes
 * part of it).  A datagram refused (EAGAIN, ENOBUFS and the like) is
 * counted and left to the engine's retransmission. */
static void train_flush(struct lm_evnode *node)
{
	unsigned sent = 0;
	bool retried = false;

	if (!node->ntrain)
		return;
	for (unsigned i = 0; i < node->ntrain; i++) {
		memset(&node->msgs[i], 0, sizeof(node->msgs[i]));
		node->msgs[i].msg_hdr.msg_name = &node->to[i];
		node->msgs[i].msg_hdr.msg_namelen = sizeof(node->to[i]);
		node->msgs[i].msg_hdr.msg_iov = &node->iov[i];
		node->msgs[i].msg_hdr.msg_iovlen = 1;
	}
	node->trains++;
	node->train_dgs += node->ntrain;
	while (sent < node->ntrain) {
		int n = sendmmsg(node->fd, node->msgs + sent,
				 node->ntrain - sent, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && !retried && stale_error(node)) {
			retried = true;
			continue;
		}
		retried = false;
		if (n <= 0) {
			node->tx_drops++;
			sent++; /* skip the refused one, try the rest */
			continue;
		}
		sent += (unsigned)n;
	}
	node->ntrain = 0;
	node->train_len = 0;
}

static void send_now(struct lm_evnode *node, uint16_t peer, const uint8_t *dg,
		     size_t len)
{
	const struct sockaddr_in *to = peer_addr(node, peer);
	unsigned i;

	if (!to) {
		node->tx_drops++;
		return;
	}
	if (len >= LM_EVNODE_DIRECT_BYTES) {
		ssize_t n;

		train_flush(node); /* what came before goes first */
		node->trains++;
		node->train_dgs++;
		for (int tries = 0; tries < 2; tries++) {
			do {
				n = sendto(node->fd, dg, len, 0,
					   (const struct sockaddr *)to,
					   sizeof(*to));
			} while (n < 0 && errno == EINTR);
			if (n >= 0 || !stale_error(node))
				break;
		}
		if (n < 0)
			node->tx_drops++; /* the engine retransmits */
		return;
	}
	if (node->ntrain == LM_EVNODE_TRAIN_DGS ||
	    node->train_len + len > LM_EVNODE_TRAIN_BYTES)
		train_flush(node);
	i = node->ntrain++;
	memcpy(node->train + node->train_len, dg, len);
	node->iov[i].iov_base = node->train + node->train_len;
	node->iov[i].iov_len = len;
	node->to[i] = *to;
	node->train_len += len;
	if (!node->depth)
		train_flush(node); /* not inside an event: it leaves now */
}

/* Brackets the handling of one event: the datagrams it produces leave as
 * one train when the outermost bracket closes. */
static void train_begin(struct lm_evnode *node)
{
	node->depth++;
}

static void train_end(struct lm_evnode *node)
{
	if (--node->depth == 0)
		train_flush(node);
}

static void drain_faults(struct lm_evnode *node, uint64_t now)
{
	uint32_t peer;
	size_t len;

	if (!node->fault)
		return;
	while (lm_loss_pop(node->fault, now, &peer, node->fxbuf,
			    LM_EVNODE_BUF, &len))
		send_now(node, (uint16_t)peer, node->fxbuf, len);
}

static void arm_timer(struct lm_evnode *node)
{
	uint64_t when = lm_rel_next_deadline(node->rel);
	uint64_t now, delta;
	struct timeval tv;

	if (node->fault) {
		uint64_t f = lm_loss_next_deadline(node->fault);

		if (f < when)
			when = f;
	}
	if (when == node->timer_at)
		return;
	node->timer_at = when;
	if (when == UINT64_MAX) {
		event_del(node->timer_ev);
		return;
	}
	now = lm_now_us();
	delta = when > now ? when - now : 0;
	tv.tv_sec = (time_t)(delta / 1000000u);
	tv.tv_usec = (suseconds_t)(delta % 1000000u);
	event_add(node->timer_ev, &tv);
}

static void on_transmit(void *ctx, uint16_t peer, const uint8_t *dg,
			size_t len)
{
	struct lm_evnode *node = ctx;
	uint64_t now;

	if (!node->fault) {
		send_now(node, peer, dg, len);
		return;
	}
	now = lm_now_us();
	lm_loss_push(node->fault, peer, dg, len, now);
	drain_faults(node, now);
}

static void on_deliver(void *ctx, const struct lm_rel_msg *msg)
{
	struct lm_evnode *node = ctx;

	node->cbs.deliver(node->ctx, msg);
}

static void on_peer_event(void *ctx, uint16_t peer,
			  enum lm_rel_peer_event event)
{
	struct lm_evnode *node = ctx;

	if (node->cbs.peer_event)
		node->cbs.peer_event(node->ctx, peer, event);
}

/* Says why the engine refused a datagram from `src` (its counters have
 * the number): one rate-limited line per cause, naming the sender by
 * address and, once the header decodes, by the node id it claims.
 * Stale sessions and resource limits are part of normal operation and
 * not logged; replays are, at debug level, since the loss injector and
 * the network duplicate datagrams too. */
static void log_refused(const struct lm_evnode *node, int rc,
			const struct sockaddr_in *src, size_t len,
			const struct lm_dg_header *h, bool decoded)
{
	char from[32];
	const char *why;

	lm_addr_str(src, from, sizeof(from));
	switch (rc) {
	case LM_EBADMSG:
	case LM_EVERSION:
	case LM_ETYPE:
		why = lm_wire_problem(node->rxbuf, len);
		if (rc == LM_EVERSION)
			lm_log_limited("datagrams of another protocol version",
				       LM_LOG_WARN,
				       "dropped datagram from %s: protocol "
				       "version %u, this build speaks %u (a "
				       "different Lemuria release?)",
				       from, node->rxbuf[2], LM_WIRE_VERSION);
		else if (decoded)
			lm_log_limited("malformed datagrams", LM_LOG_WARN,
				       "dropped malformed datagram (%zu bytes) "
				       "from %s (node %u): zero stamp or "
				       "session",
				       len, from, h->sender);
		else
			lm_log_limited("malformed datagrams", LM_LOG_WARN,
				       "dropped malformed datagram (%zu bytes) "
				       "from %s: %s",
				       len, from, why ? why : "unknown reason");
		break;
	case LM_EAUTH:
		if (!node->auth)
			lm_log_limited("datagrams with an unexpected MAC",
				       LM_LOG_WARN,
				       "dropped datagram from %s (node %u): it "
				       "carries a MAC but this layout has no "
				       "secret (the sender's layout has one?)",
				       from, h->sender);
		else if (!(h->flags & LM_DGF_MAC))
			lm_log_limited("datagrams without a MAC", LM_LOG_WARN,
				       "dropped datagram from %s (node %u): no "
				       "MAC, and this layout has a secret (the "
				       "sender's layout has none?)",
				       from, h->sender);
		else
			lm_log_limited("datagrams with a bad MAC", LM_LOG_WARN,
				       "dropped datagram from %s (node %u): "
				       "bad MAC (a different secret, or "
				       "damaged in transit)",
				       from, h->sender);
		break;
	case LM_EINVAL:
		lm_log_limited("misaddressed datagrams", LM_LOG_WARN,
			       "dropped datagram from %s (node %u): addressed "
			       "to node %u, not to this one (the sender uses "
			       "a different layout?)",
			       from, h->sender, h->receiver);
		break;
	case LM_ENOENT:
		lm_log_limited("datagrams from unknown nodes", LM_LOG_WARN,
			       "dropped datagram from %s: sender node %u is "
			       "not in the layout",
			       from, h->sender);
		break;
	case LM_EREPLAY:
		lm_log_limited("replayed datagrams", LM_LOG_DEBUG,
			       "dropped datagram from %s (node %u): stamp "
			       "%llu seen before (a duplicate or a replay)",
			       from, h->sender,
			       (unsigned long long)h->stamp);
		break;
	default:
		break;
	}
}

/* A datagram from a declared peer's own address went through the
 * engine with `rc`: one whose MAC fails while none ever passed counts
 * towards giving the peer up (a layout with another secret answers
 * every time, so the retries would take their whole time to say only
 * that it is lost). */
static void note_authenticity(struct lm_evnode *node,
			      struct lm_evnode_peer *p, int rc, uint64_t now)
{
	if (lm_refusals_auth(&p->unauthentic, rc, now) && !p->give_up) {
		p->give_up = true;
		node->give_ups++;
	}
}

const char *lm_evnode_peer_trouble(const lm_evnode *node, uint16_t peer)
{
	if (!node || peer >= node->npeers ||
	    !node->peers[peer].unauthentic.bad)
		return NULL;
	return node->auth ? "its datagrams fail authentication: the two "
			    "layouts' secret_file keys differ" :
			    "its datagrams carry a MAC and this layout has "
			    "no secret: the two layouts differ in auth";
}

/* A client or tool (no address in the layout) whose datagram failed
 * authentication gets a signed ACK back, so that it learns the secrets
 * differ within a second or two (common/rpc.c) instead of retrying for
 * its whole give-up time: declared peers learn it from each other's
 * greetings (note_authenticity).  At most one answer per
 * LM_EVNODE_AUTH_ANSWER_US, each no larger than what it answers: no
 * flood and no amplification for a forged source address. */
static void answer_unauthentic(struct lm_evnode *node, uint16_t sender,
			       const struct sockaddr_in *src, size_t got,
			       uint64_t now)
{
	uint8_t dg[LM_WIRE_HDR_SIZE + LM_WIRE_MAC_SIZE];
	size_t len;

	if (got < sizeof(dg) ||
	    now - node->auth_answered_at < LM_EVNODE_AUTH_ANSWER_US)
		return;
	node->auth_answered_at = now;
	len = lm_rel_auth_answer(node->rel, sender, dg);
	if (len && sendto(node->fd, dg, len, 0, (const struct sockaddr *)src,
			  sizeof(*src)) < 0)
		node->tx_drops++;
}

/* One datagram from `src`.  The header is peeked only to learn who claims
 * to have sent it; authenticity is the engine's business. */
static void input_one(struct lm_evnode *node, size_t len,
		      const struct sockaddr_in *src, uint64_t now)
{
	const struct lm_rel_stats *st = lm_rel_stats(node->rel);
	uint64_t malformed = st->drop_malformed;
	struct lm_dg_header h;
	const uint8_t *payload;
	struct lm_evnode_peer *p = NULL;
	bool decoded;
	int rc;

	decoded = lm_wire_decode(node->rxbuf, len, &h, &payload) == 0;
	if (decoded && h.sender < node->npeers) {
		p = &node->peers[h.sender];
		if (p->state == LM_EVNODE_ADDR_DECLARED &&
		    !same_addr(&p->addr, src)) {
			char from[32], want[32];

			node->drops.wrong_addr++;
			lm_log_limited("datagrams from unexpected addresses",
				       LM_LOG_WARN,
				       "dropped datagram from %s: it claims "
				       "to come from node %u, which the "
				       "layout puts at %s",
				       lm_addr_str(src, from, sizeof(from)),
				       h.sender,
				       lm_addr_str(&p->addr, want,
						   sizeof(want)));
			return;
		}
		node->in_input = true;
		node->input_sender = h.sender;
		node->input_src = *src;
		if (p->state == LM_EVNODE_ADDR_DECLARED)
			p->refused.heard = true;
	}
	/* Undecodable datagrams still go in, to be counted by reason. */
	rc = lm_rel_input(node->rel, node->rxbuf, len, now);
	node->in_input = false;
	if (p && p->state == LM_EVNODE_ADDR_DECLARED)
		note_authenticity(node, p, rc, now);
	else if (rc == LM_EAUTH && decoded)
		answer_unauthentic(node, h.sender, src, len, now);
	if (rc)
		log_refused(node, rc, src, len, &h, decoded);
	else if (st->drop_malformed != malformed) {
		char from[32];

		/* authentic, but its message cannot be reassembled */
		lm_log_limited("malformed messages", LM_LOG_WARN,
			       "dropped message from node %u (%s): larger "
			       "than the limit, or fragments that do not "
			       "fit together",
			       h.sender, lm_addr_str(src, from, sizeof(from)));
	}
	if (rc == 0 && p && p->state != LM_EVNODE_ADDR_DECLARED) {
		p->addr = *src;
		p->state = LM_EVNODE_ADDR_LEARNED;
	}
}

/* Checks one datagram that recvmmsg took and inputs it. */
static void take_datagram(struct lm_evnode *node, unsigned k, uint64_t now)
{
	const struct sockaddr_in *src = &node->rxsrc[k];
	size_t n = node->rxmsgs[k].msg_len;

	if (node->rxmsgs[k].msg_hdr.msg_namelen != sizeof(*src) ||
	    src->sin_family != AF_INET) {
		node->drops.recv_errors++;
		return;
	}
	if (n > LM_EVNODE_BUF) { /* MSG_TRUNC: the length it had */
		char from[32];

		node->drops.oversized++;
		lm_log_limited("oversized datagrams", LM_LOG_WARN,
			       "dropped datagram of %zu bytes from %s: larger "
			       "than any Lemuria datagram",
			       n, lm_addr_str(src, from, sizeof(from)));
		return;
	}
	node->rxbuf = node->rxbufs + (size_t)k * LM_EVNODE_BUF;
	input_one(node, n, src, now);
}

/* The kernel reports that nothing listens where a datagram of ours went
 * (ICMP port unreachable, IP_RECVERR).  Only declared peers count:
 * clients come and go, and their ports close with them.  The peer is
 * given up later, at the top of an event (report_refused): this may run
 * inside a send. */
static void note_refused(struct lm_evnode *node,
			 const struct sockaddr_in *dst, uint64_t now)
{
	for (size_t i = 0; i < node->npeers; i++) {
		struct lm_evnode_peer *p = &node->peers[i];

		if (p->state != LM_EVNODE_ADDR_DECLARED ||
		    !same_addr(&p->addr, dst))
			continue;
		if (lm_refusals_note(&p->refused, now) && !p->give_up) {
			p->give_up = true;
			node->give_ups++;
		}
		return;
	}
}

static void report_refused(struct lm_evnode *node)
{
	for (size_t i = 0; node->give_ups && i < node->npeers; i++) {
		struct lm_evnode_peer *p = &node->peers[i];
		char at[32];

		if (!p->give_up)
			continue;
		p->give_up = false;
		node->give_ups--;
		if (p->unauthentic.bad)
			lm_log_limited("unauthentic peers", LM_LOG_WARN,
				       "node %zu at %s: %s",
				       i, lm_addr_str(&p->addr, at, sizeof(at)),
				       lm_evnode_peer_trouble(node,
							      (uint16_t)i));
		else
			lm_log_limited("refused peers", LM_LOG_WARN,
				       "node %zu at %s: nothing listens there "
				       "(port unreachable)",
				       i, lm_addr_str(&p->addr, at, sizeof(at)));
		on_peer_event(node, (uint16_t)i, LM_REL_PEER_UNREACHABLE);
	}
}

/* Takes the errors the socket queued (IP_RECVERR): each names, in
 * msg_name, where the datagram that met it was going. */
static void drain_errors(struct lm_evnode *node, uint64_t now)
{
	for (int i = 0; i < LM_EVNODE_READ_BATCH; i++) {
		union {
			char buf[CMSG_SPACE(sizeof(struct sock_extended_err) +
					    sizeof(struct sockaddr_in))];
			struct cmsghdr align;
		} ctl;
		struct sockaddr_in dst;
		uint8_t head[32]; /* the datagram itself: not needed */
		struct iovec iov = { head, sizeof(head) };
		struct msghdr mh = {
			.msg_name = &dst, .msg_namelen = sizeof(dst),
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf,
			.msg_controllen = sizeof(ctl.buf),
		};

		if (recvmsg(node->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
		     c = CMSG_NXTHDR(&mh, c)) {
			const struct sock_extended_err *ee;

			if (c->cmsg_level != IPPROTO_IP ||
			    c->cmsg_type != IP_RECVERR)
				continue;
			ee = (const struct sock_extended_err *)CMSG_DATA(c);
			if (ee->ee_origin == SO_EE_ORIGIN_ICMP &&
			    ee->ee_type == ICMP_DEST_UNREACH &&
			    ee->ee_code == ICMP_PORT_UNREACH &&
			    mh.msg_namelen == sizeof(dst) &&
			    dst.sin_family == AF_INET)
				note_refused(node, &dst, now);
		}
	}
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct lm_evnode *node = arg;
	uint64_t now = 0;
	int n;

	(void)what;
	train_begin(node);
	/* bounded in calls too: an EINTR takes nothing */
	for (int taken = 0, calls = 0; taken < LM_EVNODE_READ_BATCH &&
				       calls < LM_EVNODE_READ_BATCH;
	     taken += n, calls++) {
		for (unsigned k = 0; k < LM_EVNODE_RX_VLEN; k++)
			node->rxmsgs[k].msg_hdr = (struct msghdr){
				.msg_name = &node->rxsrc[k],
				.msg_namelen = sizeof(node->rxsrc[k]),
				.msg_iov = &node->rxiov[k],
				.msg_iovlen = 1,
			};
		n = recvmmsg(fd, node->rxmsgs, LM_EVNODE_RX_VLEN, MSG_TRUNC,
			     NULL);
		node->rx_reads++;
		if (n < 0) {
			int e = errno;

			n = 0;
			if (e == EINTR)
				continue;
			/* an error queued by IP_RECVERR: read it, go on */
			if (e == ECONNREFUSED || e == EHOSTUNREACH ||
			    e == ENETUNREACH) {
				drain_errors(node, lm_now_us());
				continue;
			}
			if (e != EAGAIN && e != EWOULDBLOCK) {
				node->drops.recv_errors++;
				lm_log_limited("receive errors", LM_LOG_WARN,
					       "recvmmsg: %s", strerror(e));
			} else if (calls == 0) {
				/* woken with nothing to read: the error queue
				 * alone (EPOLLERR), readable until read */
				drain_errors(node, lm_now_us());
			}
			break;
		}
		now = lm_now_us();
		node->rx_dgs += (uint64_t)n;
		for (int k = 0; k < n; k++)
			take_datagram(node, (unsigned)k, now);
		if (n < LM_EVNODE_RX_VLEN)
			break; /* the socket was empty */
	}
	if (now)
		drain_faults(node, now);
	report_refused(node);
	arm_timer(node);
	train_end(node);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct lm_evnode *node = arg;
	uint64_t now = lm_now_us();

	(void)fd;
	(void)what;
	node->timer_at = UINT64_MAX; /* the event is no longer pending */
	train_begin(node);
	lm_rel_tick(node->rel, now);
	drain_faults(node, now);
	report_refused(node);
	arm_timer(node);
	train_end(node);
}

lm_evnode *lm_evnode_create(struct event_base *base, struct sockaddr_in *addr,
			    const struct lm_rel_config *rcfg,
			    const struct lm_fault_cfg *faults,
			    const struct lm_evnode_callbacks *cbs, void *ctx,
			    char *err, size_t errlen)
{
	struct lm_rel_callbacks rcbs = {
		.transmit = on_transmit,
		.deliver = on_deliver,
		.peer_event = on_peer_event,
	};
	struct lm_evnode *node;

	if (!base || !addr || !rcfg || !cbs || !cbs->deliver) {
		snprintf(err, errlen, "evnode: missing argument");
		return NULL;
	}
	node = calloc(1, sizeof(*node));
	if (!node)
		goto nomem;
	node->fd = -1;
	node->base = base;
	node->cbs = *cbs;
	node->ctx = ctx;
	node->timer_at = UINT64_MAX;
	node->auth = rcfg->auth != NULL;
	node->npeers = (size_t)rcfg->max_peer_id + 1;
	node->peers = calloc(node->npeers, sizeof(*node->peers));
	node->rxbufs = malloc((size_t)LM_EVNODE_RX_VLEN * LM_EVNODE_BUF);
	node->fxbuf = malloc(LM_EVNODE_BUF);
	node->train = malloc(LM_EVNODE_TRAIN_BYTES);
	if (!node->peers || !node->rxbufs || !node->fxbuf || !node->train)
		goto nomem;
	node->rxbuf = node->rxbufs;
	for (unsigned k = 0; k < LM_EVNODE_RX_VLEN; k++)
		node->rxiov[k] = (struct iovec){
			node->rxbufs + (size_t)k * LM_EVNODE_BUF, LM_EVNODE_BUF
		};
	if (faults && lm_loss_active(faults)) {
		node->fault = lm_loss_create(faults, LM_EVNODE_FAULT_HOLD);
		if (!node->fault)
			goto nomem;
	}
	node->rel = lm_rel_create(rcfg, &rcbs, node);
	if (!node->rel) {
		snprintf(err, errlen, "evnode: invalid transport settings");
		goto err;
	}
	node->fd = lm_udp_bind(addr, err, errlen);
	if (node->fd < 0)
		goto err;
	/* ICMP errors of an unconnected socket come only so (note_refused) */
	if (setsockopt(node->fd, IPPROTO_IP, IP_RECVERR, &(int){ 1 },
		       sizeof(int)) != 0)
		lm_log_warn("evnode: IP_RECVERR: %s; a peer that does not "
			    "listen is found by retries alone",
			    strerror(errno));
	node->read_ev = event_new(base, node->fd, EV_READ | EV_PERSIST,
				  on_readable, node);
	node->timer_ev = evtimer_new(base, on_timer, node);
	if (!node->read_ev || !node->timer_ev)
		goto nomem;
	if (event_add(node->read_ev, NULL) < 0) {
		snprintf(err, errlen, "evnode: cannot register the socket");
		goto err;
	}
	return node;
nomem:
	snprintf(err, errlen, "evnode: out of memory");
err:
	lm_evnode_destroy(node);
	return NULL;
}

void lm_evnode_destroy(lm_evnode *node)
{
	if (!node)
		return;
	if (node->read_ev)
		event_free(node->read_ev);
	if (node->timer_ev)
		event_free(node->timer_ev);
	/* The engine goes first: it may still call back into the node. */
	lm_rel_destroy(node->rel);
	lm_loss_destroy(node->fault);
	if (node->fd >= 0)
		close(node->fd);
	free(node->peers);
	free(node->rxbufs);
	free(node->fxbuf);
	free(node->train);
	free(node);
}

int lm_evnode_add_peer(lm_evnode *node, uint16_t peer,
		       const struct sockaddr_in *addr)
{
	if (!node || !addr || peer >= node->npeers ||
	    addr->sin_family != AF_INET)
		return LM_EINVAL;
	node->peers[peer].addr = *addr;
	node->peers[peer].state = LM_EVNODE_ADDR_DECLARED;
	return 0;
}

int lm_evnode_queue(lm_evnode *node, uint16_t peer, enum lm_rel_msg_kind kind,
		    uint32_t req_id, const struct lm_rel_part *parts,
		    size_t nparts)
{
	int rc;

	train_begin(node);
	rc = lm_rel_queue(node->rel, peer, kind, req_id, parts, nparts,
			  lm_now_us());
	arm_timer(node);
	train_end(node);
	return rc;
}

int lm_evnode_send(lm_evnode *node, uint16_t peer, const void *msg,
		   size_t len)
{
	struct lm_rel_part one = { msg, len };

	return lm_evnode_queue(node, peer, LM_REL_ONEWAY, 0, &one, 1);
}

int lm_evnode_request(lm_evnode *node, uint16_t peer, uint32_t req_id,
		      const void *msg, size_t len)
{
	struct lm_rel_part one = { msg, len };

	return lm_evnode_queue(node, peer, LM_REL_REQUEST, req_id, &one, 1);
}

int lm_evnode_reply(lm_evnode *node, uint16_t peer, uint32_t req_id,
		    const void *msg, size_t len)
{
	struct lm_rel_part one = { msg, len };

	return lm_evnode_queue(node, peer, LM_REL_REPLY, req_id, &one, 1);
}

void lm_evnode_cork(lm_evnode *node)
{
	train_begin(node);
}

void lm_evnode_uncork(lm_evnode *node)
{
	if (node->depth)
		train_end(node);
}

void lm_evnode_train_stats(const lm_evnode *node, uint64_t *trains,
			   uint64_t *datagrams)
{
	*trains = node->trains;
	*datagrams = node->train_dgs;
}

void lm_evnode_rx_stats(const lm_evnode *node, uint64_t *reads,
			uint64_t *datagrams)
{
	*reads = node->rx_reads;
	*datagrams = node->rx_dgs;
}

lm_rel *lm_evnode_engine(lm_evnode *node)
{
	return node->rel;
}

uint64_t lm_evnode_drops(const lm_evnode *node)
{
	return node->drops.wrong_addr + node->drops.oversized +
	       node->drops.recv_errors;
}

void lm_evnode_drop_stats(const lm_evnode *node,
			  struct lm_evnode_drop_stats *out)
{
	*out = node->drops;
}

uint64_t lm_evnode_tx_drops(const lm_evnode *node)
{
	return node->tx_drops;
}
