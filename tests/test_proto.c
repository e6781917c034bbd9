/* Message layer: the prefix, PING/PONG, and the DSM codec (round trips,
 * the wire layout, and rejection of every malformed body without reading
 * out of bounds: buffers are malloc'd at their exact size so that ASan sees
 * any overread). */
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diff.h"
#include "lemuria.h"
#include "lm_error.h"
#include "proto.h"
#include "wire.h"

static void test_pong_round_trip(void)
{
	struct lm_msg_pong p = { .role = LM_ROLE_LEMURIAD, .uptime_us = 123,
				 .peers = 4, .dg_received = 5, .dg_sent = 6,
				 .drops = 7 }, q;
	uint8_t buf[256];
	int len;

	strcpy(p.name, "c0");
	len = lm_msg_encode_pong(&p, buf, sizeof(buf));
	CU_ASSERT_FATAL(len > 0);
	CU_ASSERT_EQUAL(lm_msg_type(buf, (size_t)len), LM_MSG_PONG);
	CU_ASSERT_EQUAL(lm_msg_decode_pong(buf, (size_t)len, &q), 0);
	CU_ASSERT_STRING_EQUAL(q.name, "c0");
	CU_ASSERT_EQUAL(q.role, LM_ROLE_LEMURIAD);
	CU_ASSERT_EQUAL(q.uptime_us, 123);
	CU_ASSERT_EQUAL(q.peers, 4);
	CU_ASSERT_EQUAL(q.drops, 7);
	for (int cut = 0; cut < len; cut++)
		CU_ASSERT_EQUAL(lm_msg_decode_pong(buf, (size_t)cut, &q),
				LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_msg_encode_pong(&p, buf, 10), LM_ENOBUFS);
}

static void test_prefix_checked(void)
{
	uint8_t buf[8];

	CU_ASSERT_EQUAL(lm_msg_encode_ping(buf, sizeof(buf)), LM_MSG_PREFIX);
	CU_ASSERT_EQUAL(lm_msg_type(buf, 4), LM_MSG_PING);
	CU_ASSERT_EQUAL(lm_msg_type(buf, 3), LM_EBADMSG);
	buf[3] = 1; /* reserved */
	CU_ASSERT_EQUAL(lm_msg_type(buf, 4), LM_EBADMSG);
	buf[3] = 0;
	buf[0] = LM_MSG_TYPE_COUNT;
	CU_ASSERT_EQUAL(lm_msg_type(buf, 4), LM_ETYPE);
	CU_ASSERT_EQUAL(lm_msg_encode_ping(buf, 2), LM_ENOBUFS);
}

static void test_public_version(void)
{
	CU_ASSERT_STRING_EQUAL(lm_version(), "0.1");
	CU_ASSERT(lm_clock_us() > 0);
}

/* ---- DSM messages ------------------------------------------------------ */

#define RUN 0x0123456789abcdefull
#define NSAMPLES 64

static const uint8_t page_data[64] = { 1, 2, 3, 4, 5, 6, 7, 8, 250 };
static const uint8_t image[40] = { 0x7f, 'E', 'L', 'F', 9, 9, 9 };
static const struct lm_notice notices5[5] = {
	{ 0, 1, 0, 4, 1 },
	{ 7, 2, 1, 3, 0 },
	{ 1000, 3, 1, LM_WRITER_MANY, 2 },
	{ 0xfffffffeu, 0xffffffffu, 0xfffffff0u, LM_WRITER_MANY,
	  LM_WRITER_MANY },
	{ 9, 9, 8, 0, 0 }
};
static uint8_t reason_max[LM_MSG_REASON_MAX];
/* Two entries: page 3 with one run of 2 bytes, page 5 with an empty diff. */
static const uint8_t diff_list[] = {
	3, 0, 0, 0, 10, 0, 0, 0, /* page 3, 10 bytes of diff */
	16, 0, 0, 0, 2, 0, 0, 0, 0xaa, 0xbb,
	5, 0, 0, 0, 0, 0, 0, 0,  /* page 5, empty diff */
};

/* Representative messages of every DSM type, including empty lists. */
static void test_notices_merge_keeps_latest_per_page(void)
{
	struct lm_notice v[] = {
		{ .page = 9, .version = 3, .base = 1, .writer = 4 },
		{ .page = 2, .version = 5, .base = 4, .writer = 1 },
		{ .page = 9, .version = 7, .base = 1, .writer = LM_WRITER_MANY },
		{ .page = 2, .version = 4, .base = 4, .writer = 1 },
		{ .page = 5, .version = 1, .base = 0, .writer = 0 },
		{ .page = 9, .version = 5, .base = 1, .writer = 4 },
	};
	size_t n = lm_notices_merge(v, 6);

	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(v[0].page, 2);
	CU_ASSERT_EQUAL(v[0].version, 5);
	CU_ASSERT_EQUAL(v[1].page, 5);
	CU_ASSERT_EQUAL(v[2].page, 9);
	CU_ASSERT_EQUAL(v[2].version, 7);
	CU_ASSERT_EQUAL(v[2].writer, LM_WRITER_MANY);
	CU_ASSERT_EQUAL(lm_notices_merge(v, 1), 1);
	CU_ASSERT_EQUAL(lm_notices_merge(v, 0), 0);
}

/* DSM types are those lm_msg_encoded_len knows (STATS and PING are not). */
static bool is_dsm_type(int t)
{
	struct lm_msg m = { .type = (uint16_t)t };

	return lm_msg_encoded_len(&m) != 0;
}

static size_t make_samples(struct lm_msg *s)
{
	size_t n = 0;

	memset(s, 0, NSAMPLES * sizeof(*s));
	memset(reason_max, 'r', sizeof(reason_max));
#define ADD(...) (s[n++] = (struct lm_msg){ .run = RUN, __VA_ARGS__ })
	ADD(.type = LM_MSG_JOIN, .rank = 17, .pid = 4242,
	    .layout_hash = 0xfedcba9876543210ull);
	ADD(.type = LM_MSG_JOIN_OK, .status = LM_ECONFIG);
	ADD(.type = LM_MSG_FETCH, .page = 0xfffffff0u);
	ADD(.type = LM_MSG_FETCH, .page = 3, .version = 9);
	ADD(.type = LM_MSG_PAGE, .page = 12, .version = 7, .data = page_data,
	    .data_len = sizeof(page_data));
	ADD(.type = LM_MSG_PAGE, .page = 0, .version = 0);
	ADD(.type = LM_MSG_FLUSH, .rank = 6,
	    .diffs = { diff_list, sizeof(diff_list), 2 });
	ADD(.type = LM_MSG_FLUSH);
	ADD(.type = LM_MSG_FLUSH, .rank = 0xfffffffeu, .epoch = 77);
	ADD(.type = LM_MSG_FLUSH_OK, .status = 0);
	ADD(.type = LM_MSG_BARRIER, .id = 3);
	ADD(.type = LM_MSG_BARRIER, .id = 3, .epoch = 12, .notices = notices5,
	    .nnotices = 3);
	ADD(.type = LM_MSG_FLUSH_OK, .status = 0, .notices = notices5,
	    .nnotices = 5);
	ADD(.type = LM_MSG_RELEASE, .id = 3, .notices = notices5,
	    .nnotices = 5);
	ADD(.type = LM_MSG_RELEASE, .id = 0);
	ADD(.type = LM_MSG_LOCK, .id = 9, .rank = 2);
	ADD(.type = LM_MSG_GRANT, .id = 9, .notices = notices5 + 1,
	    .nnotices = 2);
	ADD(.type = LM_MSG_GRANT, .id = 9);
	ADD(.type = LM_MSG_UNLOCK, .id = 9, .rank = 2);
	ADD(.type = LM_MSG_UNLOCK, .id = 9, .rank = 2, .epoch = 4,
	    .notices = notices5 + 2, .nnotices = 3);
	ADD(.type = LM_MSG_LOCK, .id = 9, .rank = 2, .epoch = 0xfffffff0u);
	ADD(.type = LM_MSG_UNLOCK_OK, .status = LM_EINVAL);
	ADD(.type = LM_MSG_ALLOC, .size = 1ull << 33, .align = 4096, .id = 2);
	ADD(.type = LM_MSG_ALLOC_OK, .status = 0, .offset = 0x100000040ull);
	ADD(.type = LM_MSG_ALLOC_OK, .status = LM_ENOMEM);
	ADD(.type = LM_MSG_FREE, .offset = 64);
	ADD(.type = LM_MSG_FREE_OK, .status = LM_EINVAL);
	ADD(.type = LM_MSG_CREATE, .rank = 3, .offset = 0x1234,
	    .data = image, .data_len = sizeof(image));
	ADD(.type = LM_MSG_CREATE, .rank = 1, .offset = 8);
	ADD(.type = LM_MSG_CREATE, .rank = 2, .offset = 8, .notices = notices5,
	    .nnotices = 4, .data = image, .data_len = sizeof(image));
	ADD(.type = LM_MSG_CREATE_OK, .status = 0);
	ADD(.type = LM_MSG_WAIT_WORK);
	ADD(.type = LM_MSG_END, .rank = 5, .status = LM_EIO);
	ADD(.type = LM_MSG_END, .rank = 5, .status = 0, .notices = notices5,
	    .nnotices = 4);
	ADD(.type = LM_MSG_END_OK);
	ADD(.type = LM_MSG_WAIT_END, .id = 7);
	ADD(.type = LM_MSG_LEAVE);
	ADD(.type = LM_MSG_REGISTER, .epoch = 3, .notices = notices5,
	    .nnotices = 2, .diffs = { diff_list, sizeof(diff_list), 2 });
	ADD(.type = LM_MSG_REGISTER_OK, .status = 0, .notices = notices5,
	    .nnotices = 5, .data = (const uint8_t *)"\x05\0\0\0\x09\0\0\0",
	    .data_len = 8);
	ADD(.type = LM_MSG_PULL, .id = 1, .page = 77, .version = 4);
	ADD(.type = LM_MSG_RECALL, .id = 12, .rank = 5, .epoch = 3);
	ADD(.type = LM_MSG_FETCHV, .notices = notices5, .nnotices = 5);
	ADD(.type = LM_MSG_CHANGED, .id = LM_CHANGED_ALL, .notices = notices5,
	    .nnotices = 3);
	ADD(.type = LM_MSG_GONE, .id = 1, .rank = 7);
	ADD(.type = LM_MSG_WAITING, .id = 4, .epoch = 9);
	ADD(.type = LM_MSG_PROBE, .id = 2, .rank = 5, .version = 61,
	    .data = (const uint8_t *)"\x05\0\0\0\x01\0\0\0", .data_len = 8);
	ADD(.type = LM_MSG_PAGES, .notices = notices5, .nnotices = 2,
	    .diffs = { diff_list, sizeof(diff_list), 2 });
	ADD(.type = LM_MSG_DELTA, .status = LM_ENOENT, .page = 77,
	    .version = 4, .diffs = { diff_list, sizeof(diff_list), 2 });
	ADD(.type = LM_MSG_LEAVE_OK, .status = 0);
	ADD(.type = LM_MSG_ABORT, .rank = 6,
	    .data = (const uint8_t *)"rank 6 lost", .data_len = 11);
	ADD(.type = LM_MSG_ABORT, .rank = 0);
	ADD(.type = LM_MSG_ABORT, .rank = 1, .data = reason_max,
	    .data_len = sizeof(reason_max));
#undef ADD
	CU_ASSERT_FATAL(n <= NSAMPLES);
	return n;
}

/* Field-by-field equality; borrowed parts compared by content. */
static int msg_equal(const struct lm_msg *a, const struct lm_msg *b)
{
	if (a->type != b->type || a->run != b->run ||
	    a->status != b->status || a->rank != b->rank || a->id != b->id ||
	    a->page != b->page || a->version != b->version ||
	    a->pid != b->pid || a->epoch != b->epoch ||
	    a->layout_hash != b->layout_hash ||
	    a->size != b->size || a->align != b->align ||
	    a->offset != b->offset)
		return 0;
	if (a->data_len != b->data_len || !a->data != !b->data ||
	    (a->data_len && memcmp(a->data, b->data, a->data_len)))
		return 0;
	if (a->diffs.len != b->diffs.len || a->diffs.count != b->diffs.count ||
	    !a->diffs.data != !b->diffs.data ||
	    (a->diffs.len &&
	     memcmp(a->diffs.data, b->diffs.data, a->diffs.len)))
		return 0;
	if (a->nnotices != b->nnotices || !a->notices != !b->notices ||
	    (a->nnotices && memcmp(a->notices, b->notices,
				   a->nnotices * sizeof(*a->notices))))
		return 0;
	return 1;
}

/* Decodes a private copy of exactly len bytes, so ASan sees overreads. */
static int decode_exact(const uint8_t *buf, size_t len, struct lm_msg *m,
			struct lm_notice *nb, size_t cap)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	CU_ASSERT_FATAL(copy != NULL);
	if (len)
		memcpy(copy, buf, len);
	rc = lm_msg_decode(copy, len, m, nb, cap);
	free(copy);
	return rc;
}

static void test_dsm_round_trip_every_type(void)
{
	struct lm_msg s[NSAMPLES], d;
	struct lm_notice nb[8];
	uint8_t buf[1024];
	int seen[LM_MSG_TYPE_COUNT] = { 0 };
	size_t n = make_samples(s);

	for (size_t i = 0; i < n; i++) {
		int len = lm_msg_encode(&s[i], buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL((size_t)len, lm_msg_encoded_len(&s[i]));
		CU_ASSERT_EQUAL(lm_msg_type(buf, (size_t)len), s[i].type);
		CU_ASSERT_EQUAL(lm_msg_decode(buf, (size_t)len, &d, nb, 8), 0);
		CU_ASSERT(msg_equal(&s[i], &d));
		if (d.data) /* borrowed from the received buffer */
			CU_ASSERT(d.data > buf && d.data < buf + len);
		seen[s[i].type] = 1;
	}
	for (int t = LM_MSG_JOIN; t < LM_MSG_TYPE_COUNT; t++)
		if (is_dsm_type(t))
			CU_ASSERT(seen[t]);
}

/* Every sample encoded in three parts: head, the message's own bulk
 * (borrowed, not copied) and tail join into exactly lm_msg_encode's
 * bytes; out holds only head and tail (lm_msg_split_len), and one byte
 * less of room is refused. */
static void test_dsm_split_encoding_joins_into_the_whole(void)
{
	struct lm_msg s[NSAMPLES];
	uint8_t whole[1024], part[1024], joined[1024];
	size_t n = make_samples(s);
	int with_bulk = 0;

	for (size_t i = 0; i < n; i++) {
		struct lm_msg_split sp;
		int len = lm_msg_encode(&s[i], whole, sizeof(whole));
		size_t out = lm_msg_split_len(&s[i]);

		CU_ASSERT_FATAL(len > 0);
		memset(part, 0xee, sizeof(part));
		CU_ASSERT_EQUAL_FATAL(
		    lm_msg_encode_split(&s[i], part, out, &sp), 0);
		CU_ASSERT_EQUAL(sp.head_len + sp.tail_len, out);
		CU_ASSERT_EQUAL(sp.head_len + sp.blob_len + sp.tail_len,
				(size_t)len);
		CU_ASSERT_EQUAL(part[out], 0xee); /* nothing past out */
		if (sp.blob_len) {
			with_bulk++;
			CU_ASSERT(sp.blob == s[i].data ||
				  sp.blob == s[i].diffs.data);
		}
		memcpy(joined, part, sp.head_len);
		if (sp.blob_len)
			memcpy(joined + sp.head_len, sp.blob, sp.blob_len);
		memcpy(joined + sp.head_len + sp.blob_len, part + sp.head_len,
		       sp.tail_len);
		CU_ASSERT_EQUAL(memcmp(joined, whole, (size_t)len), 0);
		if (out)
			CU_ASSERT_EQUAL(lm_msg_encode_split(&s[i], part,
							    out - 1, &sp),
					LM_ENOBUFS);
	}
	CU_ASSERT(with_bulk >= 4); /* PAGE, FLUSH, RELEASE, ABORT, ... */
	CU_ASSERT_EQUAL(lm_msg_split_len(&(struct lm_msg){ .type = 0 }), 0);
}

/* Fields a type carries (docs/protocol.md "Messages"). */
enum { U_STATUS = 1, U_ID = 2, U_RANK = 4, U_PAGE = 8, U_VERSION = 16,
       U_PID = 32, U_HASH = 64, U_SIZE = 128, U_ALIGN = 256, U_OFFSET = 512,
       U_DATA = 1024, U_DIFFS = 2048, U_NOTICES = 4096,
       U_EPOCH = 8192, U_TAGS = 16384 };

static unsigned used_fields(int type)
{
	switch (type) {
	case LM_MSG_JOIN: return U_RANK | U_PID | U_HASH | U_DATA;
	case LM_MSG_FETCH: return U_ID | U_PAGE | U_VERSION;
	case LM_MSG_PAGE: return U_PAGE | U_VERSION | U_DATA | U_TAGS;
	case LM_MSG_FLUSH: return U_RANK | U_EPOCH | U_DIFFS;
	case LM_MSG_FLUSH_OK: return U_STATUS | U_NOTICES;
	case LM_MSG_BARRIER: return U_ID | U_EPOCH | U_NOTICES;
	case LM_MSG_RELEASE: return U_ID | U_NOTICES | U_DIFFS;
	case LM_MSG_LOCK: return U_ID | U_RANK | U_EPOCH;
	case LM_MSG_GRANT: return U_ID | U_NOTICES;
	case LM_MSG_UNLOCK: return U_ID | U_RANK | U_EPOCH | U_NOTICES;
	case LM_MSG_ALLOC: return U_ID | U_SIZE | U_ALIGN;
	case LM_MSG_ALLOC_OK: return U_STATUS | U_OFFSET;
	case LM_MSG_FREE: return U_OFFSET;
	case LM_MSG_CREATE: return U_RANK | U_OFFSET | U_NOTICES | U_DATA;
	case LM_MSG_WAIT_WORK: return 0;
	case LM_MSG_END: return U_STATUS | U_RANK | U_NOTICES;
	case LM_MSG_WAIT_END: return U_ID;
	case LM_MSG_LEAVE: return 0;
	case LM_MSG_ABORT: return U_RANK | U_DATA;
	case LM_MSG_REGISTER: return U_ID | U_EPOCH | U_NOTICES | U_DIFFS;
	case LM_MSG_REGISTER_OK: return U_STATUS | U_NOTICES | U_DATA;
	case LM_MSG_PULL: return U_ID | U_PAGE | U_VERSION;
	case LM_MSG_DELTA:
		return U_STATUS | U_ID | U_PAGE | U_VERSION | U_DIFFS;
	case LM_MSG_RECALL: return U_ID | U_RANK | U_EPOCH;
	case LM_MSG_FETCHV: return U_NOTICES;
	case LM_MSG_PAGES: return U_NOTICES | U_DIFFS | U_TAGS;
	case LM_MSG_CHANGED:
		return U_ID | U_RANK | U_VERSION | U_NOTICES | U_TAGS;
	case LM_MSG_GONE: return U_ID | U_RANK;
	case LM_MSG_WAITING: return U_ID | U_EPOCH;
	case LM_MSG_PROBE: return U_ID | U_RANK | U_VERSION | U_DATA;
	default: return U_STATUS; /* the *_OK replies */
	}
}

/* A message with every field set: only the type's own fields travel. */
static void test_dsm_unused_fields_decode_as_zero(void)
{
	struct lm_msg all = {
		.run = RUN, .status = -3, .rank = 11, .id = 12, .page = 13,
		.version = 14, .pid = 15, .epoch = 21, .layout_hash = 16,
		.size = 17,
		.align = 18, .offset = 19, .data = image, .data_len = 20,
		.diffs = { diff_list, sizeof(diff_list), 2 },
		.notices = notices5, .nnotices = 3
	}, d;
	struct lm_notice nb[8];
	uint8_t buf[512], tags[2 * LM_MSG_TAG_SIZE];

	lm_msg_tag_put(tags, 0, 3, 0x01020304u);
	lm_msg_tag_put(tags, 1, 0xffffffffu, 7);
	all.tags = tags;
	all.ntags = 2;

	for (int t = LM_MSG_JOIN; t < LM_MSG_TYPE_COUNT; t++) {
		if (!is_dsm_type(t))
			continue;
		unsigned u = used_fields(t);
		int len;

		all.type = (uint16_t)t;
		len = lm_msg_encode(&all, buf, sizeof(buf));
		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL_FATAL(lm_msg_decode(buf, (size_t)len, &d, nb,
						    8), 0);
		CU_ASSERT_EQUAL(d.type, t);
		CU_ASSERT_EQUAL(d.run, RUN);
		CU_ASSERT_EQUAL(d.status, u & U_STATUS ? -3 : 0);
		CU_ASSERT_EQUAL(d.id, u & U_ID ? 12u : 0u);
		CU_ASSERT_EQUAL(d.rank, u & U_RANK ? 11u : 0u);
		CU_ASSERT_EQUAL(d.page, u & U_PAGE ? 13u : 0u);
		CU_ASSERT_EQUAL(d.version, u & U_VERSION ? 14u : 0u);
		CU_ASSERT_EQUAL(d.pid, u & U_PID ? 15u : 0u);
		CU_ASSERT_EQUAL(d.epoch, u & U_EPOCH ? 21u : 0u);
		CU_ASSERT_EQUAL(d.layout_hash, u & U_HASH ? 16u : 0u);
		CU_ASSERT_EQUAL(d.size, u & U_SIZE ? 17u : 0u);
		CU_ASSERT_EQUAL(d.align, u & U_ALIGN ? 18u : 0u);
		CU_ASSERT_EQUAL(d.offset, u & U_OFFSET ? 19u : 0u);
		CU_ASSERT_EQUAL(d.data_len, u & U_DATA ? 20u : 0u);
		CU_ASSERT_EQUAL(d.data == NULL, !(u & U_DATA));
		CU_ASSERT_EQUAL(d.diffs.len,
				u & U_DIFFS ? sizeof(diff_list) : 0);
		CU_ASSERT_EQUAL(d.diffs.count, u & U_DIFFS ? 2u : 0u);
		CU_ASSERT_EQUAL(d.diffs.data == NULL, !(u & U_DIFFS));
		CU_ASSERT_EQUAL(d.nnotices, u & U_NOTICES ? 3u : 0u);
		CU_ASSERT_EQUAL(d.notices == NULL, !(u & U_NOTICES));
		CU_ASSERT_EQUAL(d.ntags, u & U_TAGS ? 2u : 0u);
		if (u & U_TAGS) {
			uint32_t cl, reg;

			lm_msg_tag(&d, 0, &cl, &reg);
			CU_ASSERT(cl == 3 && reg == 0x01020304u);
			lm_msg_tag(&d, 1, &cl, &reg);
			CU_ASSERT(cl == 0xffffffffu && reg == 7);
		}
		CU_ASSERT_EQUAL((size_t)len, lm_msg_encoded_len(&all));
	}
}

/* The layout in docs/protocol.md, pinned byte for byte. */
static void test_dsm_wire_layout(void)
{
	static const uint8_t lock[] = {
		11, 0, 0, 0, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01,
		9, 0, 0, 0, 2, 0, 0, 0, 6, 0, 0, 0
	};
	/* id 4, one notice {page 7, version 2, base 1, writer 3,
	 * wcluster 0} */
	static const uint8_t grant[] = {
		12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0,
		1, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0,
		3, 0, 0, 0, 0, 0, 0, 0
	};
	/* rank 5, epoch 0, then an empty diff list (count 0, length 0) */
	static const uint8_t flush[] = {
		7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
	};
	struct lm_msg m = { .type = LM_MSG_LOCK, .run = RUN, .id = 9,
			    .rank = 2, .epoch = 6 };
	uint8_t buf[64];

	CU_ASSERT_EQUAL_FATAL(lm_msg_encode(&m, buf, sizeof(buf)),
			      (int)sizeof(lock));
	CU_ASSERT(memcmp(buf, lock, sizeof(lock)) == 0);
	m = (struct lm_msg){ .type = LM_MSG_GRANT, .run = 1, .id = 4,
			     .notices = notices5 + 1, .nnotices = 1 };
	CU_ASSERT_EQUAL_FATAL(lm_msg_encode(&m, buf, sizeof(buf)),
			      (int)sizeof(grant));
	CU_ASSERT(memcmp(buf, grant, sizeof(grant)) == 0);
	m = (struct lm_msg){ .type = LM_MSG_FLUSH, .run = 1, .rank = 5 };
	CU_ASSERT_EQUAL_FATAL(lm_msg_encode(&m, buf, sizeof(buf)),
			      (int)sizeof(flush));
	CU_ASSERT(memcmp(buf, flush, sizeof(flush)) == 0);
}

/* Every field of a notice survives the trip, MANY included. */
static void test_dsm_notice_fields_round_trip(void)
{
	struct lm_msg m = { .type = LM_MSG_RELEASE, .run = RUN, .id = 2,
			    .notices = notices5, .nnotices = 5 }, d;
	struct lm_notice nb[5];
	uint8_t buf[256];
	int len = lm_msg_encode(&m, buf, sizeof(buf));

	/* run, id, empty diff list (count, length), notices */
	CU_ASSERT_EQUAL_FATAL(len, LM_MSG_PREFIX + 8 + 4 + 8 + 4 + 5 * 20);
	CU_ASSERT_EQUAL_FATAL(decode_exact(buf, (size_t)len, &d, nb, 5), 0);
	for (int i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(nb[i].page, notices5[i].page);
		CU_ASSERT_EQUAL(nb[i].version, notices5[i].version);
		CU_ASSERT_EQUAL(nb[i].base, notices5[i].base);
		CU_ASSERT_EQUAL(nb[i].writer, notices5[i].writer);
		CU_ASSERT_EQUAL(nb[i].wcluster, notices5[i].wcluster);
	}
	CU_ASSERT_EQUAL(nb[3].writer, LM_WRITER_MANY);
	CU_ASSERT_EQUAL(nb[3].wcluster, LM_WRITER_MANY);
	CU_ASSERT_EQUAL(nb[2].writer, LM_WRITER_MANY);
	CU_ASSERT_EQUAL(nb[2].wcluster, 2u);
}

/* A client's FETCHV carries its fault's reach in the first notice's
 * version, whatever it is, and every page with no base; decoded, the
 * reach reads back; no notice, no reach. */
static void test_fetchv_carries_the_reach(void)
{
	static const uint32_t pages[] = { 40, 41, 43, 56 };
	static const uint32_t reaches[] = { 0, 3, 31, UINT32_MAX };
	struct lm_notice ask[4], nb[4];
	struct lm_msg m, d;
	uint8_t buf[256];

	for (size_t k = 0; k < sizeof(reaches) / sizeof(reaches[0]); k++) {
		int len;

		m = (struct lm_msg){ .type = LM_MSG_FETCHV, .run = RUN };
		lm_msg_fetchv(&m, ask, pages, 4, reaches[k]);
		len = lm_msg_encode(&m, buf, sizeof(buf));
		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL_FATAL(decode_exact(buf, (size_t)len, &d, nb, 4),
				      0);
		CU_ASSERT_EQUAL_FATAL(d.nnotices, 4);
		CU_ASSERT_EQUAL(lm_msg_fetchv_reach(&d), reaches[k]);
		for (int i = 0; i < 4; i++) {
			CU_ASSERT_EQUAL(nb[i].page, pages[i]);
			CU_ASSERT_EQUAL(nb[i].base, LM_NO_BASE);
			if (i)
				CU_ASSERT_EQUAL(nb[i].version, 0);
		}
	}
	m = (struct lm_msg){ .type = LM_MSG_FETCHV, .run = RUN };
	lm_msg_fetchv(&m, ask, pages, 0, 7);
	CU_ASSERT_EQUAL(m.nnotices, 0);
	CU_ASSERT_EQUAL(lm_msg_fetchv_reach(&m), 0);
}

static void test_dsm_every_truncation_rejected(void)
{
	struct lm_msg s[NSAMPLES], d;
	struct lm_notice nb[8];
	uint8_t buf[1024];
	size_t n = make_samples(s);

	for (size_t i = 0; i < n; i++) {
		int len = lm_msg_encode(&s[i], buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		for (int cut = 0; cut < len; cut++) {
			d.type = 0xffff;
			CU_ASSERT_EQUAL(decode_exact(buf, (size_t)cut, &d,
						     nb, 8), LM_EBADMSG);
			CU_ASSERT_EQUAL(d.type, 0); /* cleared on error */
		}
		CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len, &d, nb, 8), 0);
	}
}

static void test_dsm_trailing_byte_rejected(void)
{
	struct lm_msg s[NSAMPLES], d;
	struct lm_notice nb[8];
	uint8_t buf[1024];
	size_t n = make_samples(s);

	for (size_t i = 0; i < n; i++) {
		int len = lm_msg_encode(&s[i], buf, sizeof(buf) - 1);

		CU_ASSERT_FATAL(len > 0);
		buf[len] = 0;
		CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len + 1, &d, nb, 8),
				LM_EBADMSG);
	}
}

static size_t flush_header(uint8_t *b, uint32_t count, uint32_t list_len)
{
	lm_put16(b, LM_MSG_FLUSH);
	lm_put16(b + 2, 0);
	lm_put64(b + 4, RUN);
	lm_put32(b + 12, 3); /* rank */
	lm_put32(b + 16, 0); /* epoch */
	lm_put32(b + 20, count);
	lm_put32(b + 24, list_len);
	return 28;
}

static void test_dsm_flush_bad_lengths_rejected(void)
{
	uint8_t b[72];
	struct lm_msg d;
	size_t n;

	/* Entry length that wraps a 32-bit end offset. */
	n = flush_header(b, 1, 12);
	lm_put32(b + n, 3);
	lm_put32(b + n + 4, 0xfffffffcu);
	memset(b + n + 8, 0, 4);
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	lm_put32(b + n + 4, 0xffffffffu);
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	lm_put32(b + n + 4, 5); /* one past the list */
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	lm_put32(b + n + 4, 4); /* exact: accepted */
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), 0);
	CU_ASSERT_EQUAL(d.diffs.count, 1);
	CU_ASSERT_EQUAL(d.rank, 3);
	/* List length beyond the message, and a wrapping one. */
	flush_header(b, 1, 13);
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	flush_header(b, 1, 0xffffffffu);
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	/* Count that disagrees with the entries. */
	flush_header(b, 2, 12);
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	flush_header(b, 0, 12);
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	flush_header(b, 0xffffffffu, 12);
	CU_ASSERT_EQUAL(decode_exact(b, n + 12, &d, NULL, 0), LM_EBADMSG);
	/* Stray bytes after the last entry, inside the list. */
	flush_header(b, 1, 15);
	memset(b + n + 12, 0, 3);
	CU_ASSERT_EQUAL(decode_exact(b, n + 15, &d, NULL, 0), LM_EBADMSG);
	/* The encoder refuses what the decoder would. */
	d = (struct lm_msg){ .type = LM_MSG_FLUSH,
			     .diffs = { diff_list, sizeof(diff_list), 3 } };
	CU_ASSERT_EQUAL(lm_msg_encode(&d, b, sizeof(b)), LM_EINVAL);
	d.diffs.count = 2;
	d.diffs.len = sizeof(diff_list) - 1;
	CU_ASSERT_EQUAL(lm_msg_encode(&d, b, sizeof(b)), LM_EINVAL);
}

static void test_dsm_notices_beyond_cap(void)
{
	struct lm_msg m = { .type = LM_MSG_RELEASE, .run = RUN, .id = 1,
			    .notices = notices5, .nnotices = 5 }, d;
	struct lm_notice nb[5];
	uint8_t buf[160];
	int len = lm_msg_encode(&m, buf, sizeof(buf) - 1);

	CU_ASSERT_FATAL(len > 0);
	CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len, &d, nb, 4),
			LM_ENOBUFS);
	CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len, &d, NULL, 0),
			LM_ENOBUFS);
	CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len, &d, nb, 5), 0);
	CU_ASSERT(msg_equal(&m, &d));
	CU_ASSERT(d.notices == nb);
	/* A malformed list is malformed whatever the capacity. */
	buf[len] = 0;
	CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len + 1, &d, nb, 4),
			LM_EBADMSG);
	lm_put32(buf + 16, 0x0ccccccdu); /* count * 20 wraps 32 bits */
	CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len, &d, nb, 5),
			LM_EBADMSG);
}

static void test_dsm_abort_reason_bounded(void)
{
	uint8_t reason[LM_MSG_REASON_MAX + 1], buf[512];
	struct lm_msg m = { .type = LM_MSG_ABORT, .run = RUN, .rank = 2,
			    .data = reason, .data_len = sizeof(reason) }, d;
	int len;

	memset(reason, 'x', sizeof(reason));
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
	m.data_len = LM_MSG_REASON_MAX;
	len = lm_msg_encode(&m, buf, sizeof(buf));
	CU_ASSERT_FATAL(len > 0);
	/* The same body, stretched by hand to 257 bytes of reason. */
	lm_put32(buf + 16, LM_MSG_REASON_MAX + 1);
	buf[len] = 'x';
	CU_ASSERT_EQUAL(decode_exact(buf, (size_t)len + 1, &d, NULL, 0),
			LM_EBADMSG);
}

static void test_dsm_encode_errors(void)
{
	struct lm_msg s[NSAMPLES], m;
	uint8_t buf[1024];
	size_t n = make_samples(s);

	for (size_t i = 0; i < n; i++) {
		size_t need = lm_msg_encoded_len(&s[i]);

		for (size_t cap = 0; cap < need; cap++)
			CU_ASSERT_EQUAL(lm_msg_encode(&s[i], buf, cap),
					LM_ENOBUFS);
	}
	m = (struct lm_msg){ .type = LM_MSG_PING };
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_msg_encoded_len(&m), 0);
	m.type = LM_MSG_PONG;
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
	m.type = 0;
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
	m.type = LM_MSG_TYPE_COUNT;
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
	m = (struct lm_msg){ .type = LM_MSG_PAGE, .data_len = 4 };
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
	m = (struct lm_msg){ .type = LM_MSG_GRANT, .nnotices = 1 };
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
	m = (struct lm_msg){ .type = LM_MSG_FLUSH, .diffs = { NULL, 8, 1 } };
	CU_ASSERT_EQUAL(lm_msg_encode(&m, buf, sizeof(buf)), LM_EINVAL);
}

static void test_dsm_decode_type_checked(void)
{
	uint8_t buf[64];
	struct lm_msg m = { .type = LM_MSG_WAIT_WORK, .run = RUN }, d;
	int len;

	CU_ASSERT_EQUAL(lm_msg_encode_ping(buf, sizeof(buf)), LM_MSG_PREFIX);
	CU_ASSERT_EQUAL(lm_msg_decode(buf, LM_MSG_PREFIX, &d, NULL, 0),
			LM_ETYPE);
	len = lm_msg_encode(&m, buf, sizeof(buf));
	CU_ASSERT_EQUAL_FATAL(len, LM_MSG_PREFIX + 8);
	CU_ASSERT_EQUAL(lm_msg_decode(buf, (size_t)len, &d, NULL, 0), 0);
	lm_put16(buf, 200);
	CU_ASSERT_EQUAL(lm_msg_decode(buf, (size_t)len, &d, NULL, 0),
			LM_ETYPE);
	lm_put16(buf, LM_MSG_WAIT_WORK);
	buf[2] = 1; /* reserved */
	CU_ASSERT_EQUAL(lm_msg_decode(buf, (size_t)len, &d, NULL, 0),
			LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_msg_decode(NULL, 0, &d, NULL, 0), LM_EBADMSG);
}

#define PAGE_SIZE_T 4096
#define NPAGES_T 4

/* Real diffs from lm_diff_encode travel in a FLUSH and apply remotely. */
static void test_dsm_diffs_append_next_round_trip(void)
{
	static uint8_t twin[NPAGES_T][PAGE_SIZE_T], page[NPAGES_T][PAGE_SIZE_T];
	static uint8_t list[NPAGES_T * (8 + 4 * PAGE_SIZE_T + 64)];
	static uint8_t wire[sizeof(list) + 64], copy[PAGE_SIZE_T];
	size_t bound = lm_diff_bound(PAGE_SIZE_T), len = 0, pos = 0, dl;
	uint8_t *diff = malloc(bound);
	const uint8_t *dp;
	struct lm_msg m = { .type = LM_MSG_FLUSH, .run = RUN }, d;
	uint32_t pg;
	int rc, wlen, k = 0;

	CU_ASSERT_FATAL(diff != NULL);
	for (int p = 0; p < NPAGES_T; p++) {
		for (int i = 0; i < PAGE_SIZE_T; i++)
			twin[p][i] = (uint8_t)(i * 7 + p);
		memcpy(page[p], twin[p], PAGE_SIZE_T);
		if (p == 1)
			continue; /* clean page: empty diff */
		for (int i = p; i < PAGE_SIZE_T; i += 97 + p)
			page[p][i] ^= 0x5a;
		memset(page[p] + 100 * p, 0xee, 30);
	}
	for (int p = 0; p < NPAGES_T; p++) {
		CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin[p], page[p],
						     PAGE_SIZE_T, diff, bound,
						     &dl), 0);
		CU_ASSERT_EQUAL(dl == 0, p == 1);
		CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(list, sizeof(list),
							  &len, 100 + p, diff,
							  dl), 0);
		m.diffs.count++;
	}
	free(diff);
	m.diffs.data = list;
	m.diffs.len = len;
	wlen = lm_msg_encode(&m, wire, sizeof(wire));
	CU_ASSERT_FATAL(wlen > 0);
	CU_ASSERT_EQUAL_FATAL(lm_msg_decode(wire, (size_t)wlen, &d, NULL, 0),
			      0);
	CU_ASSERT_EQUAL(d.diffs.count, NPAGES_T);
	while ((rc = lm_msg_diffs_next(&d.diffs, &pos, &pg, &dp, &dl)) == 1) {
		CU_ASSERT_FATAL(k < NPAGES_T);
		CU_ASSERT_EQUAL(pg, 100u + (uint32_t)k);
		CU_ASSERT_EQUAL(lm_diff_validate(dp, dl, PAGE_SIZE_T), 0);
		memcpy(copy, twin[k], PAGE_SIZE_T);
		CU_ASSERT_EQUAL(lm_diff_apply(copy, PAGE_SIZE_T, dp, dl), 0);
		CU_ASSERT(memcmp(copy, page[k], PAGE_SIZE_T) == 0);
		k++;
	}
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(k, NPAGES_T);
	CU_ASSERT_EQUAL(pos, d.diffs.len);
}

static void test_dsm_diffs_append_and_next_bounds(void)
{
	uint8_t buf[32], d4[4] = { 1, 2, 3, 4 };
	struct lm_msg_diffs l = { buf, 0, 0 };
	const uint8_t *dp;
	size_t len = 0, pos = 0, dl;
	uint32_t pg;

	CU_ASSERT_EQUAL(lm_msg_diffs_append(buf, 11, &len, 1, d4, 4),
			LM_ENOBUFS);
	CU_ASSERT_EQUAL(len, 0); /* untouched on failure */
	CU_ASSERT_EQUAL(lm_msg_diffs_append(buf, 12, &len, 1, d4, 4), 0);
	CU_ASSERT_EQUAL(len, 12);
	CU_ASSERT_EQUAL(lm_msg_diffs_append(buf, 19, &len, 2, NULL, 0),
			LM_ENOBUFS);
	CU_ASSERT_EQUAL(lm_msg_diffs_append(buf, 20, &len, 2, NULL, 0), 0);
	CU_ASSERT_EQUAL(len, 20);
	len = 33; /* beyond the capacity */
	CU_ASSERT_EQUAL(lm_msg_diffs_append(buf, 32, &len, 2, NULL, 0),
			LM_ENOBUFS);

	l.len = 20;
	CU_ASSERT_EQUAL(lm_msg_diffs_next(&l, &pos, &pg, &dp, &dl), 1);
	CU_ASSERT_EQUAL(pg, 1);
	CU_ASSERT_EQUAL(dl, 4);
	CU_ASSERT(memcmp(dp, d4, 4) == 0);
	CU_ASSERT_EQUAL(lm_msg_diffs_next(&l, &pos, &pg, &dp, &dl), 1);
	CU_ASSERT_EQUAL(pg, 2);
	CU_ASSERT_EQUAL(dl, 0);
	CU_ASSERT_EQUAL(lm_msg_diffs_next(&l, &pos, &pg, &dp, &dl), 0);
	/* Header cut short, entry longer than the list, position past it. */
	l.len = 19;
	pos = 12;
	CU_ASSERT_EQUAL(lm_msg_diffs_next(&l, &pos, &pg, &dp, &dl),
			LM_EBADMSG);
	l.len = 11;
	pos = 0;
	CU_ASSERT_EQUAL(lm_msg_diffs_next(&l, &pos, &pg, &dp, &dl),
			LM_EBADMSG);
	pos = 16;
	CU_ASSERT_EQUAL(lm_msg_diffs_next(&l, &pos, &pg, &dp, &dl),
			LM_EBADMSG);
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A decoded message re-encodes to the bytes it came from (canonical). */
static void check_fuzz_case(const uint8_t *buf, size_t len)
{
	struct lm_notice nb[8];
	struct lm_msg d;
	uint8_t again[1100];
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	CU_ASSERT_FATAL(copy != NULL);
	memcpy(copy, buf, len);
	rc = lm_msg_decode(copy, len, &d, nb, 8);
	CU_ASSERT(rc == 0 || rc == LM_EBADMSG || rc == LM_ETYPE ||
		  rc == LM_ENOBUFS);
	if (rc == 0) {
		CU_ASSERT_EQUAL(lm_msg_encode(&d, again, sizeof(again)),
				(int)len);
		CU_ASSERT(memcmp(again, buf, len) == 0);
	}
	free(copy);
}

static void test_dsm_fuzz_never_crashes(void)
{
	struct lm_msg s[NSAMPLES];
	uint8_t buf[1100];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t n = make_samples(s);
	time_t start = time(NULL);

	for (int it = 0; it < 40000 && time(NULL) - start < 5; it++) {
		uint64_t r = rng_next(&seed);
		size_t len;

		if (it & 1) { /* random body behind a valid prefix */
			len = r % 48;
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rng_next(&seed);
			if (len >= 4) {
				lm_put16(buf, (uint16_t)(r >> 8) %
						      (LM_MSG_TYPE_COUNT + 1));
				if (r & (1u << 20))
					lm_put16(buf + 2, 0);
			}
		} else { /* a valid message with a few bytes changed */
			const struct lm_msg *m = &s[(r >> 8) % n];
			int k = lm_msg_encode(m, buf, sizeof(buf) - 1);

			CU_ASSERT_FATAL(k > 0);
			len = (size_t)k;
			for (int j = 0; j < 1 + (int)(r % 3); j++) {
				uint64_t q = rng_next(&seed);
				buf[q % len] = (uint8_t)(q >> 16);
			}
			if (r & (1u << 21))
				len = (r >> 24) % (len + 2);
		}
		check_fuzz_case(buf, len);
	}
}

static void test_msg_names(void)
{
	CU_ASSERT_STRING_EQUAL(lm_msg_name(LM_MSG_FETCH), "FETCH");
	CU_ASSERT_STRING_EQUAL(lm_msg_name(LM_MSG_PING), "PING");
	CU_ASSERT_STRING_EQUAL(lm_msg_name(LM_MSG_ABORT), "ABORT");
	CU_ASSERT_STRING_EQUAL(lm_msg_name(0), "?");
	CU_ASSERT_STRING_EQUAL(lm_msg_name(-1), "?");
	CU_ASSERT_STRING_EQUAL(lm_msg_name(LM_MSG_TYPE_COUNT), "?");
	for (int a = 1; a < LM_MSG_TYPE_COUNT; a++) {
		CU_ASSERT_STRING_NOT_EQUAL(lm_msg_name(a), "?");
		for (int b = 1; b < a; b++)
			CU_ASSERT_STRING_NOT_EQUAL(lm_msg_name(a),
						   lm_msg_name(b));
	}
}

LM_TEST_SUITE("proto",
	      LM_TEST(test_dsm_split_encoding_joins_into_the_whole),
	      LM_TEST(test_pong_round_trip),
	      LM_TEST(test_prefix_checked),
	      LM_TEST(test_public_version),
	      LM_TEST(test_dsm_round_trip_every_type),
	      LM_TEST(test_dsm_unused_fields_decode_as_zero),
	      LM_TEST(test_dsm_wire_layout),
	      LM_TEST(test_dsm_notice_fields_round_trip),
	      LM_TEST(test_fetchv_carries_the_reach),
	      LM_TEST(test_dsm_every_truncation_rejected),
	      LM_TEST(test_dsm_trailing_byte_rejected),
	      LM_TEST(test_dsm_flush_bad_lengths_rejected),
	      LM_TEST(test_dsm_notices_beyond_cap),
	      LM_TEST(test_dsm_abort_reason_bounded),
	      LM_TEST(test_dsm_encode_errors),
	      LM_TEST(test_dsm_decode_type_checked),
	      LM_TEST(test_dsm_diffs_append_next_round_trip),
	      LM_TEST(test_dsm_diffs_append_and_next_bounds),
	      LM_TEST(test_dsm_fuzz_never_crashes),
	      LM_TEST(test_msg_names),
	      LM_TEST(test_notices_merge_keeps_latest_per_page))
