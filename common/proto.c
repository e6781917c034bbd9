/* Encoding and decoding of Lemuria messages (see proto.h). */
#include "proto.h"

#include <string.h>

#include "lm_error.h"
#include "wire.h"

#define LM_PONG_BODY (1 + LM_NAME_MAX + 8 + 4 + 8 + 8 + 8)

int lm_msg_type(const uint8_t *buf, size_t len)
{
	uint16_t type;

	if (!buf || len < LM_MSG_PREFIX || lm_get16(buf + 2) != 0)
		return LM_EBADMSG;
	type = lm_get16(buf);
	if (type == 0 || type >= LM_MSG_TYPE_COUNT)
		return LM_ETYPE;
	return type;
}

static void lm_msg_prefix(uint8_t *out, enum lm_msg_type type)
{
	lm_put16(out, (uint16_t)type);
	lm_put16(out + 2, 0);
}

int lm_msg_encode_ping(uint8_t *out, size_t cap)
{
	if (cap < LM_MSG_PREFIX)
		return LM_ENOBUFS;
	lm_msg_prefix(out, LM_MSG_PING);
	return LM_MSG_PREFIX;
}

int lm_msg_encode_pong(const struct lm_msg_pong *p, uint8_t *out, size_t cap)
{
	uint8_t *b = out + LM_MSG_PREFIX;

	if (cap < LM_MSG_PREFIX + LM_PONG_BODY)
		return LM_ENOBUFS;
	lm_msg_prefix(out, LM_MSG_PONG);
	b[0] = p->role;
	memset(b + 1, 0, LM_NAME_MAX);
	memcpy(b + 1, p->name, strnlen(p->name, LM_NAME_MAX - 1));
	b += 1 + LM_NAME_MAX;
	lm_put64(b, p->uptime_us);
	lm_put32(b + 8, p->peers);
	lm_put64(b + 12, p->dg_received);
	lm_put64(b + 20, p->dg_sent);
	lm_put64(b + 28, p->drops);
	return LM_MSG_PREFIX + LM_PONG_BODY;
}

int lm_msg_decode_pong(const uint8_t *buf, size_t len, struct lm_msg_pong *p)
{
	const uint8_t *b = buf + LM_MSG_PREFIX;

	if (len != LM_MSG_PREFIX + LM_PONG_BODY ||
	    lm_msg_type(buf, len) != LM_MSG_PONG)
		return LM_EBADMSG;
	if (b[0] >= LM_ROLE_COUNT || b[LM_NAME_MAX] != 0)
		return LM_EBADMSG; /* the name must be NUL-terminated */
	p->role = b[0];
	memcpy(p->name, b + 1, LM_NAME_MAX);
	b += 1 + LM_NAME_MAX;
	p->uptime_us = lm_get64(b);
	p->peers = lm_get32(b + 8);
	p->dg_received = lm_get64(b + 12);
	p->dg_sent = lm_get64(b + 20);
	p->drops = lm_get64(b + 28);
	return 0;
}

const char *lm_role_name(enum lm_role role)
{
	switch (role) {
	case LM_ROLE_REFLECTOR:
		return "reflector";
	case LM_ROLE_LEMURIAD:
		return "lemuriad";
	default:
		return "unknown";
	}
}
