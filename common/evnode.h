/* A transport endpoint driven by libevent, for the daemons.
 *
 * Owns a UDP socket (EV_READ|EV_PERSIST, recvfrom until EAGAIN), a
 * reliability engine and its timer, an optional loss injector on the
 * transmit path, and the table of peer addresses.  Peers are either
 * declared (lm_evnode_add_peer) or learned from their first authentic
 * datagram (clients bind ephemeral ports). */
#ifndef LM_EVNODE_H
#define LM_EVNODE_H

#include <event2/event.h>
#include <netinet/in.h>

#include "reliable.h"

typedef struct lm_evnode lm_evnode;

struct lm_evnode_callbacks {
	void (*deliver)(void *ctx, const struct lm_rel_msg *msg);
	void (*peer_event)(void *ctx, uint16_t peer,
			   enum lm_rel_peer_event event); /* optional */
};

/* Binds `addr` (port 0: any; written back) and registers with `base`.
 * `faults` may be NULL.  Returns NULL with the reason in err. */
lm_evnode *lm_evnode_create(struct event_base *base, struct sockaddr_in *addr,
			    const struct lm_rel_config *rcfg,
			    const struct lm_fault_cfg *faults,
			    const struct lm_evnode_callbacks *cbs, void *ctx,
			    char *err, size_t errlen);
/* Accepts NULL. */
void lm_evnode_destroy(lm_evnode *node);

/* Declares where `peer` listens.  Returns 0 or LM_EINVAL. */
int lm_evnode_add_peer(lm_evnode *node, uint16_t peer,
		       const struct sockaddr_in *addr);

/* Why a declared peer was given up, for the message that names it: "its
 * datagrams fail authentication..." when datagrams came from its
 * address and none carried a valid MAC (the two layouts name different
 * secrets), else NULL.  Such a peer is given up as a refused one is
 * (refusals.h): LM_REFUSED_MIN bad datagrams over LM_REFUSED_US. */
const char *lm_evnode_peer_trouble(const lm_evnode *node, uint16_t peer);

/* As lm_rel_send/request/reply, with the current time. */
int lm_evnode_send(lm_evnode *node, uint16_t peer, const void *msg,
		   size_t len);
int lm_evnode_request(lm_evnode *node, uint16_t peer, uint32_t req_id,
		      const void *msg, size_t len);
int lm_evnode_reply(lm_evnode *node, uint16_t peer, uint32_t req_id,
		    const void *msg, size_t len);
/* Any of the three for a message in parts (lm_rel_queue). */
int lm_evnode_queue(lm_evnode *node, uint16_t peer, enum lm_rel_msg_kind kind,
		    uint32_t req_id, const struct lm_rel_part *parts,
		    size_t nparts);

lm_rel *lm_evnode_engine(lm_evnode *node);
/* Datagrams the socket layer refused before the engine saw them, by
 * cause; each is logged too, rate-limited (log.h).  The engine counts
 * the rest (struct lm_rel_stats). */
struct lm_evnode_drop_stats {
	uint64_t wrong_addr;  /* source is not where the layout puts the
				 node the header names */
	uint64_t oversized;   /* more than 64 KiB */
	uint64_t recv_errors; /* recvfrom failed, or not an IPv4 source */
};
void lm_evnode_drop_stats(const lm_evnode *node,
			  struct lm_evnode_drop_stats *out);
/* Their sum. */
uint64_t lm_evnode_drops(const lm_evnode *node);
/* Datagrams the engine handed over that could not be sent (socket buffer
 * full, no address known for the peer); the engine retransmits them. */
uint64_t lm_evnode_tx_drops(const lm_evnode *node);

/* Datagrams produced between cork and uncork (they nest) leave together,
 * as one train (sendmmsg), at the outermost uncork.  Every event the node
 * handles itself is corked this way; these let a caller group several
 * sends of its own. */
void lm_evnode_cork(lm_evnode *node);
void lm_evnode_uncork(lm_evnode *node);
/* Trains sent, and the datagrams they carried. */
void lm_evnode_train_stats(const lm_evnode *node, uint64_t *trains,
			   uint64_t *datagrams);
/* Receive calls made (one per wake-up when up to eight datagrams wait,
 * none that finds the socket empty after a shorter batch), and the
 * datagrams they took. */
void lm_evnode_rx_stats(const lm_evnode *node, uint64_t *reads,
			uint64_t *datagrams);

#endif
