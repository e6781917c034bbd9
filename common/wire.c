/* Datagram header codec (layout in wire.h).  Bytes in, struct out: every
 * field is read with explicit little-endian loads after the whole length
 * has been checked, never by casting a struct over the buffer. */
#include "wire.h"

#include <string.h>

#include "lm_error.h"

void lm_wire_encode_header(const struct lm_dg_header *h, uint8_t *buf)
{
	lm_put16(buf + 0, LM_WIRE_MAGIC);
	buf[2] = LM_WIRE_VERSION;
	buf[3] = h->type;
	lm_put16(buf + 4, h->flags);
	lm_put16(buf + 6, h->sender);
	lm_put16(buf + 8, h->receiver);
	lm_put16(buf + 10, h->payload_len);
	lm_put64(buf + 12, h->session);
	lm_put64(buf + 20, h->peer_session);
	lm_put64(buf + 28, h->stamp);
	lm_put32(buf + 36, h->seq);
	lm_put32(buf + 40, h->ack);
	lm_put32(buf + 44, h->sack);
	lm_put32(buf + 48, h->req_id);
	lm_put32(buf + 52, h->msg_len);
	lm_put16(buf + 56, h->frag_index);
	lm_put16(buf + 58, h->frag_count);
	lm_put32(buf + 60, 0);
}

/* lm_wire_decode, saying in *why what is wrong (a phrase for logs). */
static int wire_parse(const uint8_t *dg, size_t len, struct lm_dg_header *h,
		      const uint8_t **payload, const char **why)
{
	size_t expect;

	if (!dg || len < LM_WIRE_HDR_SIZE) {
		*why = "shorter than the header";
		return LM_EBADMSG;
	}
	if (len > LM_WIRE_MAX_DATAGRAM) {
		*why = "longer than any UDP datagram";
		return LM_EBADMSG;
	}
	if (lm_get16(dg) != LM_WIRE_MAGIC) {
		*why = "not a Lemuria datagram (bad magic)";
		return LM_EBADMSG;
	}
	if (dg[2] != LM_WIRE_VERSION) {
		*why = "unknown protocol version";
		return LM_EVERSION;
	}
	if (dg[3] == 0 || dg[3] >= LM_DG_TYPE_COUNT) {
		*why = "unknown datagram type";
		return LM_ETYPE;
	}

	memset(h, 0, sizeof(*h));
	h->version = dg[2];
	h->type = dg[3];
	h->flags = lm_get16(dg + 4);
	h->sender = lm_get16(dg + 6);
	h->receiver = lm_get16(dg + 8);
	h->payload_len = lm_get16(dg + 10);
	h->session = lm_get64(dg + 12);
	h->peer_session = lm_get64(dg + 20);
	h->stamp = lm_get64(dg + 28);
	h->seq = lm_get32(dg + 36);
	h->ack = lm_get32(dg + 40);
	h->sack = lm_get32(dg + 44);
	h->req_id = lm_get32(dg + 48);
	h->msg_len = lm_get32(dg + 52);
	h->frag_index = lm_get16(dg + 56);
	h->frag_count = lm_get16(dg + 58);

	if (lm_get32(dg + 60) != 0 || (h->flags & ~LM_DGF_KNOWN)) {
		*why = "reserved bits set";
		return LM_EBADMSG;
	}
	expect = LM_WIRE_HDR_SIZE + (size_t)h->payload_len +
		 ((h->flags & LM_DGF_MAC) ? LM_WIRE_MAC_SIZE : 0);
	if (expect != len) {
		*why = len < expect ? "truncated (shorter than its header says)"
				    : "longer than its header says";
		return LM_EBADMSG;
	}
	if (h->type == LM_DG_ACK) {
		/* An acknowledgement carries nothing but the ack fields. */
		if (h->payload_len || h->seq || h->msg_len || h->frag_count ||
		    h->frag_index || h->req_id ||
		    (h->flags &
		     (LM_DGF_REQUEST | LM_DGF_REPLY | LM_DGF_RESENT))) {
			*why = "acknowledgement with data fields set";
			return LM_EBADMSG;
		}
	} else {
		if (h->seq == 0 || h->frag_count == 0 ||
		    h->frag_index >= h->frag_count ||
		    h->payload_len > h->msg_len ||
		    ((h->flags & LM_DGF_REQUEST) && (h->flags & LM_DGF_REPLY)) ||
		    (!!(h->flags & (LM_DGF_REQUEST | LM_DGF_REPLY)) !=
		     (h->req_id != 0))) {
			*why = "inconsistent sequence or fragment fields";
			return LM_EBADMSG;
		}
	}
	*payload = dg + LM_WIRE_HDR_SIZE;
	*why = NULL;
	return 0;
}

int lm_wire_decode(const uint8_t *dg, size_t len, struct lm_dg_header *h,
		   const uint8_t **payload)
{
	const char *why;

	return wire_parse(dg, len, h, payload, &why);
}

const char *lm_wire_problem(const uint8_t *dg, size_t len)
{
	struct lm_dg_header h;
	const uint8_t *payload;
	const char *why;

	wire_parse(dg, len, &h, &payload, &why);
	return why;
}
