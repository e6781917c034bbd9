/* The datagram codec: round trips, and every malformed or truncated
 * datagram is rejected before anything past its end is read. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "lm_error.h"
#include "wire.h"

static struct lm_dg_header sample_header(uint16_t payload_len)
{
	struct lm_dg_header h = {
		.type = LM_DG_DATA,
		.flags = LM_DGF_REQUEST,
		.sender = 0x1234,
		.receiver = 0xbeef,
		.payload_len = payload_len,
		.session = 0x0102030405060708ull,
		.peer_session = 0xf0e0d0c0b0a09080ull,
		.stamp = 0xdeadbeefcafef00dull,
		.seq = 0x11223344,
		.ack = 0x55667788,
		.sack = 0x99aabbcc,
		.req_id = 0x7,
		.msg_len = 100000,
		.frag_index = 3,
		.frag_count = 9,
	};
	return h;
}

static size_t build(uint8_t *buf, const struct lm_dg_header *h)
{
	lm_wire_encode_header(h, buf);
	for (size_t i = 0; i < h->payload_len; i++)
		buf[LM_WIRE_HDR_SIZE + i] = (uint8_t)(i * 31 + 7);
	return LM_WIRE_HDR_SIZE + h->payload_len +
	       ((h->flags & LM_DGF_MAC) ? LM_WIRE_MAC_SIZE : 0);
}

static void test_round_trip_every_field(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 300];
	struct lm_dg_header h = sample_header(300), d;
	const uint8_t *payload = NULL;
	size_t len = build(buf, &h);

	CU_ASSERT_EQUAL_FATAL(lm_wire_decode(buf, len, &d, &payload), 0);
	CU_ASSERT_EQUAL(d.version, LM_WIRE_VERSION);
	CU_ASSERT_EQUAL(d.type, h.type);
	CU_ASSERT_EQUAL(d.flags, h.flags);
	CU_ASSERT_EQUAL(d.sender, h.sender);
	CU_ASSERT_EQUAL(d.receiver, h.receiver);
	CU_ASSERT_EQUAL(d.payload_len, h.payload_len);
	CU_ASSERT_EQUAL(d.session, h.session);
	CU_ASSERT_EQUAL(d.peer_session, h.peer_session);
	CU_ASSERT_EQUAL(d.stamp, h.stamp);
	CU_ASSERT_EQUAL(d.seq, h.seq);
	CU_ASSERT_EQUAL(d.ack, h.ack);
	CU_ASSERT_EQUAL(d.sack, h.sack);
	CU_ASSERT_EQUAL(d.req_id, h.req_id);
	CU_ASSERT_EQUAL(d.msg_len, h.msg_len);
	CU_ASSERT_EQUAL(d.frag_index, h.frag_index);
	CU_ASSERT_EQUAL(d.frag_count, h.frag_count);
	CU_ASSERT_PTR_EQUAL(payload, buf + LM_WIRE_HDR_SIZE);
}

static void test_encoding_is_little_endian(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE];
	struct lm_dg_header h = sample_header(0);

	lm_wire_encode_header(&h, buf);
	CU_ASSERT_EQUAL(buf[0], 0x4c); /* 'L' */
	CU_ASSERT_EQUAL(buf[1], 0x4d); /* 'M' */
	CU_ASSERT_EQUAL(buf[6], 0x34);
	CU_ASSERT_EQUAL(buf[7], 0x12);
	CU_ASSERT_EQUAL(buf[12], 0x08);
	CU_ASSERT_EQUAL(buf[19], 0x01);
	CU_ASSERT_EQUAL(buf[36], 0x44);
	CU_ASSERT_EQUAL(buf[39], 0x11);
}

static void test_every_truncation_rejected(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 64 + LM_WIRE_MAC_SIZE];
	struct lm_dg_header h = sample_header(64), d;
	const uint8_t *payload;
	size_t len;

	h.flags |= LM_DGF_MAC;
	len = build(buf, &h);
	memset(buf + len - LM_WIRE_MAC_SIZE, 0xaa, LM_WIRE_MAC_SIZE);
	CU_ASSERT_EQUAL_FATAL(lm_wire_decode(buf, len, &d, &payload), 0);
	for (size_t cut = 0; cut < len; cut++) {
		/* A fresh heap copy of exactly `cut` bytes lets ASan catch a
		 * read past the end. */
		uint8_t *copy = malloc(cut ? cut : 1);

		memcpy(copy, buf, cut);
		CU_ASSERT_EQUAL(lm_wire_decode(copy, cut, &d, &payload),
				LM_EBADMSG);
		free(copy);
	}
	CU_ASSERT_EQUAL(lm_wire_decode(NULL, 0, &d, &payload), LM_EBADMSG);
}

static void test_extra_bytes_rejected(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 20];
	struct lm_dg_header h = sample_header(10), d;
	const uint8_t *payload;
	size_t len = build(buf, &h);

	CU_ASSERT_EQUAL(lm_wire_decode(buf, len + 1, &d, &payload),
			LM_EBADMSG);
}

static void test_bad_magic_version_type(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 8];
	struct lm_dg_header h = sample_header(0), d;
	const uint8_t *payload;

	size_t len;

	h.msg_len = 0;
	len = build(buf, &h);
	CU_ASSERT_EQUAL(lm_wire_decode(buf, len, &d, &payload), 0);
	buf[0] ^= 1;
	CU_ASSERT_EQUAL(lm_wire_decode(buf, len, &d, &payload), LM_EBADMSG);
	buf[0] ^= 1;
	buf[2] = LM_WIRE_VERSION + 1;
	CU_ASSERT_EQUAL(lm_wire_decode(buf, len, &d, &payload), LM_EVERSION);
	buf[2] = LM_WIRE_VERSION;
	buf[3] = LM_DG_TYPE_COUNT;
	CU_ASSERT_EQUAL(lm_wire_decode(buf, len, &d, &payload), LM_ETYPE);
	buf[3] = 0;
	CU_ASSERT_EQUAL(lm_wire_decode(buf, len, &d, &payload), LM_ETYPE);
}

/* Each inconsistent header is refused, so that the engine above never
 * sees a fragment index past the count or a payload longer than its
 * message. */
static void test_inconsistent_fields_rejected(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 8];
	struct lm_dg_header base = sample_header(8), h, d;
	const uint8_t *payload;
	size_t len;

	struct lm_dg_header bad[11];
	int n = 0;

	h = base; h.flags |= 0x80; bad[n++] = h;             /* unknown flag */
	h = base; h.seq = 0; bad[n++] = h;                   /* DATA seq 0 */
	h = base; h.frag_count = 0; h.frag_index = 0; bad[n++] = h;
	h = base; h.frag_index = h.frag_count; bad[n++] = h;
	h = base; h.msg_len = 4; bad[n++] = h;               /* payload > msg */
	h = base; h.flags |= LM_DGF_REPLY; bad[n++] = h;     /* both kinds */
	h = base; h.req_id = 0; bad[n++] = h;                /* request, no id */
	h = base; h.flags = 0; bad[n++] = h;                 /* one-way with id */
	h = base; h.type = LM_DG_ACK; bad[n++] = h;          /* ack w/ payload */
	h = (struct lm_dg_header){ .type = LM_DG_ACK, .flags = LM_DGF_RESENT,
				   .ack = 5 };
	bad[n++] = h;					     /* resent ack */
	for (int i = 0; i < n; i++) {
		len = build(buf, &bad[i]);
		CU_ASSERT_EQUAL(lm_wire_decode(buf, len, &d, &payload),
				LM_EBADMSG);
	}
	/* Reserved bytes must be zero. */
	len = build(buf, &base);
	buf[62] = 1;
	CU_ASSERT_EQUAL(lm_wire_decode(buf, len, &d, &payload), LM_EBADMSG);
}

static void test_pure_ack_accepted(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE];
	struct lm_dg_header h = { .type = LM_DG_ACK, .sender = 1,
				  .receiver = 2, .session = 5, .stamp = 9,
				  .ack = 17, .sack = 3 }, d;
	const uint8_t *payload;

	lm_wire_encode_header(&h, buf);
	CU_ASSERT_EQUAL_FATAL(lm_wire_decode(buf, sizeof(buf), &d, &payload),
			      0);
	CU_ASSERT_EQUAL(d.type, LM_DG_ACK);
	CU_ASSERT_EQUAL(d.ack, 17);
	CU_ASSERT_EQUAL(d.sack, 3);
	/* an ack may say a resend moved it; only DATA is resent */
	h.flags = LM_DGF_ACK_RESENT;
	lm_wire_encode_header(&h, buf);
	CU_ASSERT_EQUAL_FATAL(lm_wire_decode(buf, sizeof(buf), &d, &payload),
			      0);
	CU_ASSERT_EQUAL(d.flags, LM_DGF_ACK_RESENT);
}

/* A resend says so, and so does the ack it moved (spurious timeout
 * detection in common/reliable.c). */
static void test_resent_flags_round_trip(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 16];
	struct lm_dg_header h = sample_header(16), d;
	const uint8_t *payload;
	size_t len;

	h.flags |= LM_DGF_RESENT | LM_DGF_ACK_RESENT;
	len = build(buf, &h);
	CU_ASSERT_EQUAL_FATAL(lm_wire_decode(buf, len, &d, &payload), 0);
	CU_ASSERT_EQUAL(d.flags, h.flags);
}

static void test_random_bytes_never_crash(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 32];
	struct lm_dg_header d;
	const uint8_t *payload;
	unsigned seed = 12345;
	int accepted = 0;

	for (int i = 0; i < 20000; i++) {
		size_t len = (size_t)(rand_r(&seed) % (int)sizeof(buf));

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rand_r(&seed);
		if (len >= 4 && (i & 1)) { /* valid prefix, random rest */
			lm_put16(buf, LM_WIRE_MAGIC);
			buf[2] = LM_WIRE_VERSION;
			buf[3] = LM_DG_DATA;
		}
		if (lm_wire_decode(buf, len, &d, &payload) == 0) {
			accepted++;
			CU_ASSERT((size_t)LM_WIRE_HDR_SIZE + d.payload_len <= len);
		}
	}
	CU_ASSERT(accepted < 20000);
}

LM_TEST_SUITE("wire",
	      LM_TEST(test_round_trip_every_field),
	      LM_TEST(test_encoding_is_little_endian),
	      LM_TEST(test_every_truncation_rejected),
	      LM_TEST(test_extra_bytes_rejected),
	      LM_TEST(test_bad_magic_version_type),
	      LM_TEST(test_inconsistent_fields_rejected),
	      LM_TEST(test_pure_ack_accepted),
	      LM_TEST(test_resent_flags_round_trip),
	      LM_TEST(test_random_bytes_never_crash))
