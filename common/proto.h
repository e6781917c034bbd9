/* Lemuria messages: what travels inside a reliable transport message.
 *
 * Every message starts with a 4-byte prefix: u16 type (enum lm_msg_type),
 * u16 reserved (zero).  Bodies are little-endian, decoded with bounds
 * checks; a message that does not decode is dropped and counted by the
 * receiver.  This is the one place where message numbers are assigned. */
#ifndef LM_PROTO_H
#define LM_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define LM_MSG_PREFIX 4

/* Node id of lemuriactl and other control tools (never in a layout). */
#define LM_NODE_CONTROL 0xffffu

enum lm_msg_type {
	LM_MSG_PING = 1, /* request: are you up?  body: none */
	LM_MSG_PONG = 2, /* reply to PING: struct lm_msg_pong */
	LM_MSG_TYPE_COUNT
};

enum lm_role {
	LM_ROLE_REFLECTOR, /* root-cluster daemon */
	LM_ROLE_LEMURIAD,  /* cluster daemon */
	LM_ROLE_COUNT
};

struct lm_msg_pong {
	uint8_t role;               /* enum lm_role */
	char name[LM_NAME_MAX];     /* its section name */
	uint64_t uptime_us;
	uint32_t peers;             /* peers it has exchanged data with */
	uint64_t dg_received, dg_sent, drops; /* transport counters */
};

/* Returns the message type of buf, or LM_EBADMSG when buf is shorter than
 * the prefix or its reserved bits are set. */
int lm_msg_type(const uint8_t *buf, size_t len);

/* Encoders write into out (capacity cap) and return the length, or
 * LM_ENOBUFS.  Decoders return 0 or LM_EBADMSG. */
int lm_msg_encode_ping(uint8_t *out, size_t cap);
int lm_msg_encode_pong(const struct lm_msg_pong *p, uint8_t *out, size_t cap);
int lm_msg_decode_pong(const uint8_t *buf, size_t len, struct lm_msg_pong *p);

const char *lm_role_name(enum lm_role role);

#endif
