/* Wire format of a Lemuria datagram: header codec.
 *
 * Every datagram is  header (LM_WIRE_HDR_SIZE) | payload | MAC (optional).
 * All integers are little-endian whatever the host.  The codec knows nothing
 * of sockets or peers; lm_wire_decode checks every length against the
 * datagram before it reads.
 *
 *  off size field
 *   0   2  magic 0x4d4c ("LM")
 *   2   1  version (LM_WIRE_VERSION)
 *   3   1  type (enum lm_dg_type)
 *   4   2  flags (LM_DGF_*)
 *   6   2  sender node id
 *   8   2  receiver node id
 *  10   2  payload length
 *  12   8  sender session (random, chosen at start, increasing over restarts)
 *  20   8  receiver session as the sender knows it (0 = not yet known)
 *  28   8  stamp: per-sender datagram counter (MAC nonce, replay window)
 *  36   4  seq (DATA: channel sequence number, from 1)
 *  40   4  ack (cumulative: every seq below it was received)
 *  44   4  sack (bit i set: seq ack+1+i was received)
 *  48   4  req id (request/reply matching, 0 for one-way messages)
 *  52   4  message length (whole message, over all fragments)
 *  56   2  fragment index
 *  58   2  fragment count
 *  60   4  reserved, must be zero
 */
#ifndef LM_WIRE_H
#define LM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define LM_WIRE_MAGIC 0x4d4cu
#define LM_WIRE_VERSION 8
#define LM_WIRE_HDR_SIZE 64
#define LM_WIRE_MAC_SIZE 16
#define LM_WIRE_MAX_DATAGRAM 65507 /* largest UDP payload over IPv4 */

enum lm_dg_type {
	LM_DG_DATA = 1, /* carries a fragment of a message; acknowledged */
	LM_DG_ACK = 2,  /* acknowledgement only; never acknowledged */
	LM_DG_TYPE_COUNT
};

enum lm_dg_flags {
	LM_DGF_MAC = 1u << 0,     /* a MAC trailer follows the payload */
	LM_DGF_REQUEST = 1u << 1, /* message is a request (req id set) */
	LM_DGF_REPLY = 1u << 2,   /* message is the reply to req id */
	/* DATA only: this datagram went out before (a retransmission) */
	LM_DGF_RESENT = 1u << 3,
	/* a datagram marked LM_DGF_RESENT moved the cumulative ack since
	 * the sender's previous datagram to this peer (spurious timeout
	 * detection, common/reliable.c) */
	LM_DGF_ACK_RESENT = 1u << 4,
	LM_DGF_KNOWN = LM_DGF_MAC | LM_DGF_REQUEST | LM_DGF_REPLY |
		       LM_DGF_RESENT | LM_DGF_ACK_RESENT
};

struct lm_dg_header {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint16_t sender;
	uint16_t receiver;
	uint16_t payload_len;
	uint64_t session;
	uint64_t peer_session;
	uint64_t stamp;
	uint32_t seq;
	uint32_t ack;
	uint32_t sack;
	uint32_t req_id;
	uint32_t msg_len;
	uint16_t frag_index;
	uint16_t frag_count;
};

/* Writes the header into buf (at least LM_WIRE_HDR_SIZE bytes).  The
 * version and magic are written from the constants, not from h. */
void lm_wire_encode_header(const struct lm_dg_header *h, uint8_t *buf);

/* Parses a whole datagram of `len` bytes.  On success fills *h, points
 * *payload into dg (borrowed, valid as long as dg) and returns 0.  Returns
 * LM_EBADMSG (bad magic, truncated, lengths that do not add up to `len`,
 * unknown flags, reserved bits set, inconsistent fragment fields),
 * LM_EVERSION or LM_ETYPE.  Does not check the MAC. */
int lm_wire_decode(const uint8_t *dg, size_t len, struct lm_dg_header *h,
		   const uint8_t **payload);
/* What lm_wire_decode finds wrong with a datagram, as a phrase for a log
 * line ("truncated (shorter than its header says)"), or NULL when it
 * decodes.  The phrase is a string constant. */
const char *lm_wire_problem(const uint8_t *dg, size_t len);

/* Little-endian helpers for message bodies built on top of the header. */
static inline void lm_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static inline void lm_put32(uint8_t *p, uint32_t v)
{
	lm_put16(p, (uint16_t)v);
	lm_put16(p + 2, (uint16_t)(v >> 16));
}
static inline void lm_put64(uint8_t *p, uint64_t v)
{
	lm_put32(p, (uint32_t)v);
	lm_put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint16_t lm_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t lm_get32(const uint8_t *p)
{
	return (uint32_t)lm_get16(p) | ((uint32_t)lm_get16(p + 2) << 16);
}
static inline uint64_t lm_get64(const uint8_t *p)
{
	return (uint64_t)lm_get32(p) | ((uint64_t)lm_get32(p + 4) << 32);
}

#endif
