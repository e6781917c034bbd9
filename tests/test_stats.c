/* Tests of the counters (common/stats.c): the set, the STATS and
 * STATS_REPLY codec (round trip, truncation at every length, every
 * rejected field), link levels and tool ids; the engine's per-peer
 * retransmission counts; the daemon shell answering STATS over
 * 127.0.0.1 with its per-level counts and a protocol's hook; and the
 * protocol adapters (reflector/home_stats.c, lemuriad/lemuriad_stats.c). */
#include "unit.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/runstats.h"
#include "auth.h"
#include "clock.h"
#include "lemuriad_stats.h"
#include "daemon.h"
#include "daemon_pair.h"
#include "deltas.h"
#include "home_stats.h"
#include "link_config.h"
#include "lm_error.h"
#include "reliable.h"
#include "rpc.h"
#include "stats.h"
#include "udp.h"
#include "updates.h"
#include "wire.h"

/* ------------------------------------------------------------------ */
/* The set */

static void test_set_add_merges_same_name_and_level(void)
{
	lm_stats_set *s = lm_stats_create();
	uint64_t v = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, "msgs_sent", 3), 0);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLUSTER, "msgs_sent", 5), 0);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_NONE, "cached_bytes", 9), 0);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, "msgs_sent", 4), 0);
	CU_ASSERT_EQUAL(lm_stats_count(s), 3);
	CU_ASSERT_EQUAL(lm_stats_get(s, LM_STAT_CLIENT, "msgs_sent", &v), 0);
	CU_ASSERT_EQUAL(v, 7);
	CU_ASSERT_EQUAL(lm_stats_get(s, LM_STAT_CLUSTER, "msgs_sent", &v), 0);
	CU_ASSERT_EQUAL(v, 5);
	CU_ASSERT_EQUAL(lm_stats_get(s, LM_STAT_ROOT, "msgs_sent", &v),
			LM_ENOENT);
	/* First-seen order is kept. */
	CU_ASSERT_STRING_EQUAL(lm_stats_at(s, 0)->name, "msgs_sent");
	CU_ASSERT_EQUAL(lm_stats_at(s, 0)->level, LM_STAT_CLIENT);
	CU_ASSERT_EQUAL(lm_stats_at(s, 1)->level, LM_STAT_CLUSTER);
	CU_ASSERT_STRING_EQUAL(lm_stats_at(s, 2)->name, "cached_bytes");
	CU_ASSERT_PTR_NULL(lm_stats_at(s, 3));
	/* A fresh set does not know its clients. */
	CU_ASSERT_EQUAL(lm_stats_info(s)->clients, LM_STATS_CLIENTS_UNKNOWN);
	lm_stats_destroy(s);
	lm_stats_destroy(NULL);
}

static void test_set_rejects_bad_names_and_levels(void)
{
	lm_stats_set *s = lm_stats_create();
	char longest[LM_STAT_NAME_MAX], too_long[LM_STAT_NAME_MAX + 1];

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	memset(longest, 'a', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	memset(too_long, 'b', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, longest, 1), 0);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, too_long, 1),
			LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, "", 1), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, NULL, 1), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, "a b", 1), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, "say\"hi", 1),
			LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, "x\n", 1), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_LEVEL_COUNT, "ok", 1),
			LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, (enum lm_stat_level)-1, "ok", 1),
			LM_EINVAL);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_ROOT, "Ok.name-2_x", 1), 0);
	CU_ASSERT_EQUAL(lm_stats_count(s), 2);
	lm_stats_destroy(s);
}

static void test_set_holds_at_most_256(void)
{
	lm_stats_set *s = lm_stats_create();
	char name[16];
	uint64_t v = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	for (int i = 0; i < LM_STATS_MAX; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, name, 1), 0);
	}
	CU_ASSERT_EQUAL(lm_stats_count(s), LM_STATS_MAX);
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLUSTER, "c0", 1), LM_ENOBUFS);
	CU_ASSERT_EQUAL(lm_stats_count(s), LM_STATS_MAX);
	/* Adding into an existing counter still works when full. */
	CU_ASSERT_EQUAL(lm_stats_add(s, LM_STAT_CLIENT, "c255", 41), 0);
	CU_ASSERT_EQUAL(lm_stats_get(s, LM_STAT_CLIENT, "c255", &v), 0);
	CU_ASSERT_EQUAL(v, 42);
	lm_stats_destroy(s);
}

static void test_set_copy_and_clear(void)
{
	lm_stats_set *a = lm_stats_create(), *b = lm_stats_create();
	struct lm_stats_info info = { .role = LM_ROLE_LEMURIAD,
				      .uptime_us = 5,
				      .run = 9,
				      .clients = 2 };
	uint64_t v = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	snprintf(info.name, sizeof(info.name), "c0");
	lm_stats_set_info(a, &info);
	for (int i = 0; i < 40; i++) { /* past the first allocation */
		char name[16];

		snprintf(name, sizeof(name), "n%d", i);
		CU_ASSERT_EQUAL(lm_stats_add(a, LM_STAT_NONE, name, (uint64_t)i),
				0);
	}
	CU_ASSERT_EQUAL(lm_stats_add(b, LM_STAT_ROOT, "old", 1), 0);
	CU_ASSERT_EQUAL(lm_stats_copy(b, a), 0);
	CU_ASSERT_EQUAL(lm_stats_count(b), 40);
	CU_ASSERT_EQUAL(lm_stats_get(b, LM_STAT_NONE, "n39", &v), 0);
	CU_ASSERT_EQUAL(v, 39);
	CU_ASSERT_EQUAL(lm_stats_get(b, LM_STAT_ROOT, "old", &v), LM_ENOENT);
	CU_ASSERT_STRING_EQUAL(lm_stats_info(b)->name, "c0");
	CU_ASSERT_EQUAL(lm_stats_info(b)->clients, 2);
	lm_stats_clear(b);
	CU_ASSERT_EQUAL(lm_stats_count(b), 0);
	CU_ASSERT_EQUAL(lm_stats_info(b)->run, 0);
	CU_ASSERT_EQUAL(lm_stats_info(b)->clients, LM_STATS_CLIENTS_UNKNOWN);
	lm_stats_destroy(a);
	lm_stats_destroy(b);
}

struct fields_probe {
	uint64_t big;
	uint8_t small;
	uint32_t mid;
	uint16_t half;
	size_t size;
};

static void test_add_fields_reads_each_width(void)
{
	static const struct lm_stats_field f[] = {
		LM_STATS_FIELD(struct fields_probe, LM_STAT_CLIENT, big),
		LM_STATS_FIELD(struct fields_probe, LM_STAT_CLUSTER, small),
		LM_STATS_FIELD(struct fields_probe, LM_STAT_ROOT, mid),
		LM_STATS_FIELD(struct fields_probe, LM_STAT_NONE, half),
		LM_STATS_FIELD(struct fields_probe, LM_STAT_NONE, size),
	};
	struct fields_probe p = { .big = 1ull << 40, .small = 200,
				  .mid = 70000, .half = 65000, .size = 12 };
	lm_stats_set *s = lm_stats_create();
	uint64_t v = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(lm_stats_add_fields(s, &p, f, 5), 5);
	CU_ASSERT(lm_stats_get(s, LM_STAT_CLIENT, "big", &v) == 0 &&
		  v == 1ull << 40);
	CU_ASSERT(lm_stats_get(s, LM_STAT_CLUSTER, "small", &v) == 0 &&
		  v == 200);
	CU_ASSERT(lm_stats_get(s, LM_STAT_ROOT, "mid", &v) == 0 && v == 70000);
	CU_ASSERT(lm_stats_get(s, LM_STAT_NONE, "half", &v) == 0 &&
		  v == 65000);
	CU_ASSERT(lm_stats_get(s, LM_STAT_NONE, "size", &v) == 0 && v == 12);
	lm_stats_destroy(s);
}

/* ------------------------------------------------------------------ */
/* The codec */

static lm_stats_set *sample_set(void)
{
	lm_stats_set *s = lm_stats_create();
	struct lm_stats_info info = { .role = LM_ROLE_REFLECTOR,
				      .uptime_us = 123456789,
				      .run = 0x0123456789abcdefull,
				      .clients = 7 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	snprintf(info.name, sizeof(info.name), "r0.west-1");
	lm_stats_set_info(s, &info);
	lm_stats_add(s, LM_STAT_CLIENT, "msgs_sent", 1);
	lm_stats_add(s, LM_STAT_CLUSTER, "msgs_sent", UINT64_MAX);
	lm_stats_add(s, LM_STAT_ROOT, "retransmits", 0);
	lm_stats_add(s, LM_STAT_NONE, "cached_bytes", 1ull << 33);
	lm_stats_add(s, LM_STAT_CLUSTER, "a", 2);
	return s;
}

static void test_request_codec(void)
{
	uint8_t buf[8];
	int len = lm_stats_encode_request(buf, sizeof(buf));

	CU_ASSERT_EQUAL_FATAL(len, LM_MSG_PREFIX);
	CU_ASSERT_EQUAL(lm_msg_type(buf, (size_t)len), LM_MSG_STATS);
	CU_ASSERT_EQUAL(lm_stats_decode_request(buf, (size_t)len), 0);
	for (size_t n = 0; n < (size_t)len; n++)
		CU_ASSERT_EQUAL(lm_stats_decode_request(buf, n), LM_EBADMSG);
	buf[len] = 0; /* a body, however short, is refused */
	CU_ASSERT_EQUAL(lm_stats_decode_request(buf, (size_t)len + 1),
			LM_EBADMSG);
	buf[2] = 1; /* reserved bits */
	CU_ASSERT_EQUAL(lm_stats_decode_request(buf, (size_t)len), LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_msg_encode_ping(buf, sizeof(buf)), LM_MSG_PREFIX);
	CU_ASSERT_EQUAL(lm_stats_decode_request(buf, LM_MSG_PREFIX),
			LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_stats_encode_request(buf, LM_MSG_PREFIX - 1),
			LM_ENOBUFS);
}

static void test_reply_round_trip(void)
{
	lm_stats_set *s = sample_set(), *d = lm_stats_create();
	size_t need = lm_stats_reply_len(s);
	uint8_t *buf = malloc(need), *again = malloc(need);

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_PTR_NOT_NULL_FATAL(again);
	CU_ASSERT_EQUAL_FATAL(lm_stats_encode_reply(s, buf, need), (int)need);
	CU_ASSERT_EQUAL(lm_msg_type(buf, need), LM_MSG_STATS_REPLY);
	CU_ASSERT_EQUAL_FATAL(lm_stats_decode_reply(buf, need, d), 0);
	CU_ASSERT_EQUAL(lm_stats_info(d)->role, LM_ROLE_REFLECTOR);
	CU_ASSERT_STRING_EQUAL(lm_stats_info(d)->name, "r0.west-1");
	CU_ASSERT_EQUAL(lm_stats_info(d)->uptime_us, 123456789);
	CU_ASSERT_EQUAL(lm_stats_info(d)->run, 0x0123456789abcdefull);
	CU_ASSERT_EQUAL(lm_stats_info(d)->clients, 7);
	CU_ASSERT_EQUAL_FATAL(lm_stats_count(d), lm_stats_count(s));
	for (size_t i = 0; i < lm_stats_count(s); i++) {
		CU_ASSERT_STRING_EQUAL(lm_stats_at(d, i)->name,
				       lm_stats_at(s, i)->name);
		CU_ASSERT_EQUAL(lm_stats_at(d, i)->level,
				lm_stats_at(s, i)->level);
		CU_ASSERT_EQUAL(lm_stats_at(d, i)->value,
				lm_stats_at(s, i)->value);
	}
	/* Canonical: what decodes re-encodes to the same bytes. */
	CU_ASSERT_EQUAL(lm_stats_encode_reply(d, again, need), (int)need);
	CU_ASSERT_EQUAL(memcmp(buf, again, need), 0);
	CU_ASSERT_EQUAL(lm_stats_encode_reply(s, buf, need - 1), LM_ENOBUFS);
	free(buf);
	free(again);
	lm_stats_destroy(s);
	lm_stats_destroy(d);
}

static void test_reply_full_set_round_trip(void)
{
	lm_stats_set *s = lm_stats_create(), *d = lm_stats_create();
	char name[LM_STAT_NAME_MAX];
	uint8_t *buf;
	size_t need;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	for (int i = 0; i < LM_STATS_MAX; i++) {
		snprintf(name, sizeof(name), "%031d", i); /* 31 characters */
		CU_ASSERT_EQUAL(lm_stats_add(s, (enum lm_stat_level)(i % 4),
					     name, (uint64_t)i * 1000003u),
				0);
	}
	need = lm_stats_reply_len(s);
	buf = malloc(need);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_EQUAL_FATAL(lm_stats_encode_reply(s, buf, need), (int)need);
	CU_ASSERT_EQUAL(lm_stats_decode_reply(buf, need, d), 0);
	CU_ASSERT_EQUAL(lm_stats_count(d), LM_STATS_MAX);
	CU_ASSERT_EQUAL(lm_stats_at(d, 255)->value, 255ull * 1000003u);
	free(buf);
	lm_stats_destroy(s);
	lm_stats_destroy(d);
}

/* Offsets in a reply: prefix, role, name, uptime, run, clients, count,
 * then the entries; sample_set()'s first is {level, 9, "msgs_sent",
 * value}. */
#define OFF_ROLE (LM_MSG_PREFIX)
#define OFF_NAME (OFF_ROLE + 1)
#define OFF_COUNT (OFF_NAME + LM_NAME_MAX + 8 + 8 + 4)
#define OFF_ENTRY (OFF_COUNT + 4)

/* 257 well-formed entries: one more than a set may hold. */
static void test_reply_over_256_counters_rejected(void)
{
	lm_stats_set *s = lm_stats_create(), *d = lm_stats_create();
	uint8_t *buf;
	size_t need, len;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	for (int i = 0; i < LM_STATS_MAX; i++) {
		char name[16];

		snprintf(name, sizeof(name), "k%d", i);
		lm_stats_add(s, LM_STAT_CLIENT, name, 1);
	}
	need = lm_stats_reply_len(s);
	buf = malloc(need + 16);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_EQUAL_FATAL(lm_stats_encode_reply(s, buf, need), (int)need);
	CU_ASSERT_EQUAL(lm_stats_decode_reply(buf, need, d), 0);
	/* Append {client, "zz", 1} and count it. */
	len = need;
	buf[len++] = LM_STAT_CLIENT;
	buf[len++] = 2;
	buf[len++] = 'z';
	buf[len++] = 'z';
	lm_put64(buf + len, 1);
	len += 8;
	lm_put32(buf + OFF_COUNT, LM_STATS_MAX + 1);
	CU_ASSERT_EQUAL(lm_stats_decode_reply(buf, len, d), LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_stats_count(d), 0);
	free(buf);
	lm_stats_destroy(s);
	lm_stats_destroy(d);
}

static void test_reply_truncated_at_every_length(void)
{
	lm_stats_set *s = sample_set(), *d = lm_stats_create();
	size_t need = lm_stats_reply_len(s);
	uint8_t *buf = malloc(need + 1);

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_EQUAL_FATAL(lm_stats_encode_reply(s, buf, need), (int)need);
	for (size_t n = 0; n < need; n++) {
		uint8_t *copy = malloc(n ? n : 1); /* ASan sees overreads */

		CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
		memcpy(copy, buf, n);
		lm_stats_add(d, LM_STAT_CLIENT, "stale", 1);
		CU_ASSERT_EQUAL(lm_stats_decode_reply(copy, n, d), LM_EBADMSG);
		CU_ASSERT_EQUAL(lm_stats_count(d), 0); /* cleared */
		free(copy);
	}
	buf[need] = 0; /* one byte after the counters */
	CU_ASSERT_EQUAL(lm_stats_decode_reply(buf, need + 1, d), LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_stats_decode_reply(NULL, 0, d), LM_EBADMSG);
	free(buf);
	lm_stats_destroy(s);
	lm_stats_destroy(d);
}

/* Encodes sample_set(), lets `edit` change the bytes, and returns what
 * the decoder says. */
static int decode_edited(void (*edit)(uint8_t *buf, size_t *len))
{
	lm_stats_set *s = sample_set(), *d = lm_stats_create();
	size_t need = lm_stats_reply_len(s), len = need;
	uint8_t *buf = calloc(1, need + 64);
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL_FATAL(lm_stats_encode_reply(s, buf, need), (int)need);
	edit(buf, &len);
	rc = lm_stats_decode_reply(buf, len, d);
	if (rc)
		CU_ASSERT_EQUAL(lm_stats_count(d), 0);
	free(buf);
	lm_stats_destroy(s);
	lm_stats_destroy(d);
	return rc;
}

static void edit_nothing(uint8_t *b, size_t *len) { (void)b; (void)len; }
static void edit_type(uint8_t *b, size_t *len) { (void)len; b[0] = LM_MSG_PONG; }
static void edit_reserved(uint8_t *b, size_t *len) { (void)len; b[3] = 0x80; }
static void edit_role(uint8_t *b, size_t *len) { (void)len; b[OFF_ROLE] = LM_ROLE_COUNT; }
static void edit_name_unterminated(uint8_t *b, size_t *len)
{
	(void)len;
	memset(b + OFF_NAME, 'x', LM_NAME_MAX);
}
static void edit_name_char(uint8_t *b, size_t *len) { (void)len; b[OFF_NAME] = '"'; }
static void edit_name_padding(uint8_t *b, size_t *len)
{
	(void)len;
	b[OFF_NAME + LM_NAME_MAX - 1] = 'z'; /* after the NUL */
}
static void edit_count_high(uint8_t *b, size_t *len)
{
	(void)len;
	lm_put32(b + OFF_COUNT, LM_STATS_MAX + 1);
}
static void edit_count_fewer(uint8_t *b, size_t *len)
{
	(void)len;
	lm_put32(b + OFF_COUNT, 4); /* leaves the last entry as trailing */
}
static void edit_level(uint8_t *b, size_t *len) { (void)len; b[OFF_ENTRY] = LM_STAT_LEVEL_COUNT; }
static void edit_name_len_zero(uint8_t *b, size_t *len) { (void)len; b[OFF_ENTRY + 1] = 0; }
static void edit_name_len_long(uint8_t *b, size_t *len)
{
	(void)len;
	b[OFF_ENTRY + 1] = LM_STAT_NAME_MAX;
}
static void edit_name_len_past_end(uint8_t *b, size_t *len)
{
	(void)len;
	b[OFF_ENTRY + 1] = 31; /* runs into the next entries, then past */
}
/* The last entry ("a") claims a name longer than what is left. */
static void edit_last_name_past_end(uint8_t *b, size_t *len)
{
	b[*len - (1 + 1 + 1 + 8) + 1] = 20;
}
static void edit_counter_char(uint8_t *b, size_t *len)
{
	(void)len;
	b[OFF_ENTRY + 2] = ' ';
}
static void edit_counter_nul(uint8_t *b, size_t *len)
{
	(void)len;
	b[OFF_ENTRY + 3] = '\0';
}
/* The second entry ("msgs_sent" at cluster) made a repeat of the first. */
static void edit_duplicate(uint8_t *b, size_t *len)
{
	(void)len;
	b[OFF_ENTRY + 2 + 9 + 8] = LM_STAT_CLIENT;
}

static void test_reply_rejects_bad_fields(void)
{
	CU_ASSERT_EQUAL(decode_edited(edit_nothing), 0);
	CU_ASSERT_EQUAL(decode_edited(edit_type), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_reserved), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_role), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_name_unterminated), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_name_char), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_name_padding), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_count_high), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_count_fewer), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_level), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_name_len_zero), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_name_len_long), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_name_len_past_end), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_last_name_past_end), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_counter_char), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_counter_nul), LM_EBADMSG);
	CU_ASSERT_EQUAL(decode_edited(edit_duplicate), LM_EBADMSG);
}

/* ------------------------------------------------------------------ */
/* Levels and tool ids */

static struct lm_layout *load(const char *path)
{
	struct lm_layout *l = NULL;
	char err[512];

	if (lm_layout_load(path, &l, err, sizeof(err)))
		fprintf(stderr, "load %s: %s\n", path, err);
	return l;
}

static void test_link_level_from_node_ids(void)
{
	struct lm_layout *l = load("conf/4+4.ini"); /* r0=1 c0=2 c1=3 4..11 */

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 2, 4), LM_STAT_CLIENT);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 3, 11), LM_STAT_CLIENT);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 2, 1), LM_STAT_CLUSTER);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 1, 3), LM_STAT_CLUSTER);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 1, 1), LM_STAT_ROOT);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 2, 12), LM_ENOENT);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 2, 0), LM_ENOENT);
	CU_ASSERT_EQUAL(lm_stats_link_level(l, 2, LM_NODE_CONTROL), LM_ENOENT);
	CU_ASSERT_STRING_EQUAL(lm_stats_level_name(LM_STAT_CLIENT), "client");
	CU_ASSERT_STRING_EQUAL(lm_stats_level_name(LM_STAT_CLUSTER),
			       "cluster");
	CU_ASSERT_STRING_EQUAL(lm_stats_level_name(LM_STAT_ROOT), "root");
	CU_ASSERT_STRING_EQUAL(lm_stats_level_name(LM_STAT_NONE), "-");
	CU_ASSERT_STRING_EQUAL(lm_stats_level_name(9), "?");
	lm_layout_free(l);
}

static void test_tool_ids_stay_out_of_the_layout(void)
{
	struct lm_layout *l = load("conf/4+4.ini");
	struct lm_layout full = { .nreflectors = 1, .nclusters = 64,
				  .nprocs = 65535 - 65 };
	bool seen[LM_STATS_TOOL_IDS] = { false };
	size_t distinct = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	for (uint32_t salt = 0; salt < 1000; salt++) {
		uint16_t id = lm_stats_tool_id(l, salt);

		CU_ASSERT_FATAL(id > LM_NODE_CONTROL - LM_STATS_TOOL_IDS);
		CU_ASSERT(lm_stats_link_level(l, 2, id) == LM_ENOENT);
		if (!seen[LM_NODE_CONTROL - id]) {
			seen[LM_NODE_CONTROL - id] = true;
			distinct++;
		}
	}
	CU_ASSERT_EQUAL(distinct, LM_STATS_TOOL_IDS);
	CU_ASSERT_NOT_EQUAL(lm_stats_tool_id(l, 1), lm_stats_tool_id(l, 2));
	/* A layout that takes every id leaves only the reserved one. */
	CU_ASSERT_EQUAL(lm_stats_tool_id(&full, 12345), LM_NODE_CONTROL);
	full.nprocs -= 2; /* 65534 and 65535 free */
	CU_ASSERT(lm_stats_tool_id(&full, 0) >= 65534);
	CU_ASSERT(lm_stats_tool_id(&full, 0) != lm_stats_tool_id(&full, 1));
	lm_layout_free(l);
}

/* ------------------------------------------------------------------ */
/* The engine counts retransmissions per peer */

static void blackhole(void *ctx, uint16_t peer, const uint8_t *dg,
		      size_t len)
{
	(void)ctx;
	(void)peer;
	(void)dg;
	(void)len;
}

static void ignore_msg(void *ctx, const struct lm_rel_msg *m)
{
	(void)ctx;
	(void)m;
}

/* Runs the engine's timers until peer has been resent to `want` times
 * (at most 1000 ticks); returns the clock. */
static uint64_t tick_until(lm_rel *rel, uint64_t now, uint16_t peer,
			   uint64_t want)
{
	for (int i = 0; i < 1000 && lm_rel_peer_retransmits(rel, peer) < want;
	     i++) {
		uint64_t d = lm_rel_next_deadline(rel);

		if (d == UINT64_MAX)
			break;
		now = d > now ? d : now;
		lm_rel_tick(rel, now);
	}
	return now;
}

static void test_engine_counts_retransmits_per_peer(void)
{
	struct lm_rel_callbacks cbs = { .transmit = blackhole,
					.deliver = ignore_msg };
	struct lm_rel_config cfg;
	lm_rel *rel;
	uint64_t now = 1000000;
	const struct lm_rel_stats *st;

	lm_rel_config_default(&cfg, 1);
	cfg.max_peer_id = 10;
	cfg.transport.max_retries = 6;
	rel = lm_rel_create(&cfg, &cbs, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rel);
	st = lm_rel_stats(rel);
	CU_ASSERT_EQUAL(lm_rel_send(rel, 2, "to two", 6, now), 0);
	now = tick_until(rel, now, 2, 3);
	CU_ASSERT(lm_rel_peer_retransmits(rel, 2) >= 3);
	CU_ASSERT_EQUAL(lm_rel_peer_retransmits(rel, 3), 0);
	CU_ASSERT_EQUAL(lm_rel_peer_retransmits(rel, 2), st->retransmits);
	CU_ASSERT_EQUAL(lm_rel_send(rel, 3, "to three", 8, now), 0);
	now = tick_until(rel, now, 3, 2);
	CU_ASSERT(lm_rel_peer_retransmits(rel, 3) >= 2);
	CU_ASSERT_EQUAL(lm_rel_peer_retransmits(rel, 2) +
				lm_rel_peer_retransmits(rel, 3),
			st->retransmits);
	/* Run until both are given up: the counts outlive the channels. */
	for (int i = 0; i < 1000 && st->peers_unreachable < 2; i++) {
		uint64_t d = lm_rel_next_deadline(rel);

		if (d == UINT64_MAX)
			break;
		now = d > now ? d : now;
		lm_rel_tick(rel, now);
	}
	CU_ASSERT_EQUAL(st->peers_unreachable, 2);
	CU_ASSERT(lm_rel_peer_retransmits(rel, 2) >= 3);
	CU_ASSERT_EQUAL(lm_rel_peer_retransmits(rel, 2) +
				lm_rel_peer_retransmits(rel, 3),
			st->retransmits);
	CU_ASSERT_EQUAL(lm_rel_peer_retransmits(rel, 9), 0);  /* never seen */
	CU_ASSERT_EQUAL(lm_rel_peer_retransmits(rel, 11), 0); /* beyond max */
	CU_ASSERT_EQUAL(lm_rel_peer_retransmits(NULL, 2), 0);
	lm_rel_destroy(rel);
}

/* ------------------------------------------------------------------ */
/* The daemon shell answers STATS, over 127.0.0.1 */

/* A protocol that answers JOIN and LEAVE, and on JOIN also sends one
 * message to its reflector, which is not running. */
struct probe {
	struct lm_msg_out out;
	void *ctx;
	uint64_t handled;
	uint16_t reflector;
};

static void *probe_create(const struct lm_layout *layout, const char *name,
			 uint16_t self_id, const struct lm_msg_out *out,
			 void *out_ctx, char *err, size_t errlen)
{
	struct probe *s = calloc(1, sizeof(*s));

	(void)name;
	(void)self_id;
	(void)err;
	(void)errlen;
	if (!s)
		return NULL;
	s->out = *out;
	s->ctx = out_ctx;
	s->reflector = layout->reflectors[0].id;
	return s;
}

static void probe_destroy(void *machine)
{
	free(machine);
}

static void probe_handle(void *machine, uint16_t from,
			enum lm_rel_msg_kind kind, uint32_t req_id,
			const struct lm_msg *m)
{
	struct probe *s = machine;
	struct lm_msg r = { .run = m->run };

	s->handled++;
	if (kind != LM_REL_REQUEST)
		return;
	if (m->type == LM_MSG_JOIN) {
		struct lm_msg up = { .type = LM_MSG_BARRIER, .run = m->run,
				     .id = 1 };

		r.type = LM_MSG_JOIN_OK;
		s->out.send(s->ctx, s->reflector, &up);
	} else {
		r.type = LM_MSG_LEAVE_OK;
	}
	s->out.reply(s->ctx, from, req_id, &r);
}

static void probe_stats(void *machine, lm_stats_set *out)
{
	struct probe *s = machine;

	lm_stats_add(out, LM_STAT_CLIENT, "probe_handled", s->handled);
}

static const struct lm_daemon_protocol probe_proto = {
	.create = probe_create,
	.destroy = probe_destroy,
	.handle = probe_handle,
	.stats = probe_stats,
};

struct live {
	char dir[64], path[128];
	struct lm_layout *l;
	lm_auth *auth;
	struct event_base *base;
	lm_daemon *d;
	struct event *stop_ev;
	int stop_pipe[2];
	pthread_t thread;
	bool running;
};

static void live_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

static void *live_main(void *arg)
{
	event_base_dispatch(((struct live *)arg)->base);
	return NULL;
}

/* Lemuriad c0 of a one-reflector layout with two clients, running the
 * probe protocol in its own thread. */
static int live_start(struct live *lv)
{
	char key[4096], err[512];
	uint16_t pr = dp_free_port(), pc = dp_free_port();
	FILE *f;

	memset(lv, 0, sizeof(*lv));
	lv->stop_pipe[0] = lv->stop_pipe[1] = -1;
	snprintf(lv->dir, sizeof(lv->dir), "/tmp/lm-stats-XXXXXX");
	if (!pr || !pc || !realpath("conf/demo.key", key) ||
	    !mkdtemp(lv->dir))
		return -1;
	snprintf(lv->path, sizeof(lv->path), "%s/layout.ini", lv->dir);
	f = fopen(lv->path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"[lemuria]\nshared_size = 1M\npage_size = 4096\n"
		"base = 0x500000000000\nsecret_file = %s\n"
		"[transport cluster]\nrto_initial = 5ms\nrto_min = 2ms\n"
		/* no resend at client level on a slow host: the test
		 * wants none there; the tools' own 50 ms first timeout
		 * must rise to this rto_min */
		"[transport client]\nrto_initial = 500ms\nrto_min = 200ms\n"
		"[reflector r0]\nlisten = 127.0.0.1:%u\n"
		"[cluster c0]\nreflector = r0\nlisten = 127.0.0.1:%u\n"
		"clients = 2\ncache = 1M\n",
		key, pr, pc);
	fclose(f);
	if (lm_layout_load(lv->path, &lv->l, err, sizeof(err))) {
		fprintf(stderr, "live: %s\n", err);
		return -1;
	}
	lv->auth = lm_auth_create(lv->l->key);
	lv->base = event_base_new();
	if (!lv->auth || !lv->base)
		return -1;
	lv->d = lm_daemon_create(lv->base, lv->l, LM_ROLE_LEMURIAD, "c0", err,
				 sizeof(err));
	if (!lv->d || lm_daemon_start_protocol(lv->d, &probe_proto, err,
					       sizeof(err))) {
		fprintf(stderr, "live: %s\n", err);
		return -1;
	}
	if (pipe(lv->stop_pipe) < 0)
		return -1;
	lv->stop_ev = event_new(lv->base, lv->stop_pipe[0], EV_READ,
				live_stop_cb, lv->base);
	if (!lv->stop_ev || event_add(lv->stop_ev, NULL) < 0 ||
	    pthread_create(&lv->thread, NULL, live_main, lv))
		return -1;
	lv->running = true;
	return 0;
}

static void live_free(struct live *lv)
{
	if (lv->running && write(lv->stop_pipe[1], "x", 1) == 1)
		pthread_join(lv->thread, NULL);
	lm_daemon_destroy(lv->d);
	if (lv->stop_ev)
		event_free(lv->stop_ev);
	if (lv->base)
		event_base_free(lv->base);
	for (int i = 0; i < 2; i++)
		if (lv->stop_pipe[i] >= 0)
			close(lv->stop_pipe[i]);
	lm_auth_destroy(lv->auth);
	lm_layout_free(lv->l);
	if (lv->path[0])
		unlink(lv->path);
	if (lv->dir[0])
		rmdir(lv->dir);
}

static lm_rpc *live_rpc(struct live *lv, uint16_t self)
{
	const struct lm_cluster_cfg *c = &lv->l->clusters[0];
	struct lm_rel_config rcfg;
	char err[256];

	lm_link_config(lv->l, LM_LEVEL_CLIENT, self, lv->auth, &rcfg);
	return lm_rpc_create(&c->addr, c->id, &rcfg, NULL, err, sizeof(err));
}

/* A DSM request from a client; returns the reply's length or -1. */
static int live_call(lm_rpc *rpc, const struct lm_msg *m, size_t *sent)
{
	uint8_t buf[256];
	void *reply = NULL;
	size_t rlen = 0;
	int len = lm_msg_encode(m, buf, sizeof(buf));

	if (len < 0 || lm_rpc_call(rpc, buf, (size_t)len, &reply, &rlen,
				   2000) != 0)
		return -1;
	free(reply);
	*sent = (size_t)len;
	return (int)rlen;
}

/* The daemon's answer to STATS, 0 or the error. */
static int live_stats(lm_rpc *ctl, lm_stats_set *out)
{
	uint8_t req[8];
	void *reply = NULL;
	size_t rlen = 0;
	int rc = lm_rpc_call(ctl, req,
			     (size_t)lm_stats_encode_request(req, sizeof(req)),
			     &reply, &rlen, 2000);

	if (rc == 0)
		rc = lm_stats_decode_reply(reply, rlen, out);
	free(reply);
	return rc;
}

static uint64_t val(const lm_stats_set *s, enum lm_stat_level level,
		    const char *name)
{
	uint64_t v = UINT64_MAX; /* absent: never what a test expects */

	lm_stats_get(s, level, name, &v);
	return v;
}

static void test_daemon_answers_stats_per_level(void)
{
	enum lm_log_level saved = lm_log_get_level();
	struct live lv;
	lm_rpc *client = NULL, *ctl = NULL;
	lm_stats_set *s = lm_stats_create();
	struct lm_msg join = { .type = LM_MSG_JOIN, .run = 77, .rank = 1,
			       .pid = 42 };
	struct lm_msg leave = { .type = LM_MSG_LEAVE, .run = 77 };
	size_t join_len = 0, leave_len = 0;
	int ok_len, left_len;

	lm_log_set_level(LM_LOG_ERROR);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	if (live_start(&lv) != 0) {
		CU_FAIL("cannot start the daemon");
		goto out;
	}
	client = live_rpc(&lv, lm_layout_client_id(lv.l, 1));
	ctl = live_rpc(&lv, lm_stats_tool_id(lv.l, 7));
	CU_ASSERT_PTR_NOT_NULL_FATAL(client);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctl);

	/* Before anything: the links of a lemuriad, all zero. */
	CU_ASSERT_EQUAL_FATAL(live_stats(ctl, s), 0);
	CU_ASSERT_EQUAL(lm_stats_info(s)->role, LM_ROLE_LEMURIAD);
	CU_ASSERT_STRING_EQUAL(lm_stats_info(s)->name, "c0");
	CU_ASSERT_EQUAL(lm_stats_info(s)->run, 0);
	CU_ASSERT_EQUAL(lm_stats_info(s)->clients, 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "msgs_received"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "msgs_sent"), 0);
	/* A lemuriad has no root link. */
	CU_ASSERT_EQUAL(val(s, LM_STAT_ROOT, "msgs_sent"), UINT64_MAX);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "probe_handled"), 0);

	ok_len = live_call(client, &join, &join_len);
	CU_ASSERT_FATAL(ok_len > 0);
	CU_ASSERT_EQUAL_FATAL(live_stats(ctl, s), 0);
	CU_ASSERT_EQUAL(lm_stats_info(s)->run, 77);
	CU_ASSERT_EQUAL(lm_stats_info(s)->clients, 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "msgs_received"), 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "bytes_received"), join_len);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "msgs_sent"), 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "bytes_sent"), (uint64_t)ok_len);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "msgs_sent"), 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "msgs_received"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "probe_handled"), 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_NONE, "msgs_undecodable"), 0);

	/* Asking again: control traffic is not counted. */
	CU_ASSERT_EQUAL_FATAL(live_stats(ctl, s), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "msgs_received"), 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "msgs_sent"), 1);

	/* The reflector does not answer: the resends count at cluster
	 * level (5 ms timeouts; up to 3 s), and, no ack ever coming, none
	 * of the timeouts can have been spurious. */
	for (int i = 0; i < 60; i++) {
		CU_ASSERT_EQUAL_FATAL(live_stats(ctl, s), 0);
		if (val(s, LM_STAT_CLUSTER, "retransmits") > 0 &&
		    val(s, LM_STAT_NONE, "rtx_timeouts") > 0)
			break;
		usleep(50000);
	}
	CU_ASSERT(val(s, LM_STAT_CLUSTER, "retransmits") > 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "retransmits"), 0);
	CU_ASSERT(val(s, LM_STAT_NONE, "rtx_timeouts") > 0);
	CU_ASSERT(val(s, LM_STAT_NONE, "rtx_timeouts") <=
		  val(s, LM_STAT_CLUSTER, "retransmits"));
	CU_ASSERT_EQUAL(val(s, LM_STAT_NONE, "rtx_spurious"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_NONE, "dg_duplicates"), 0);

	left_len = live_call(client, &leave, &leave_len);
	CU_ASSERT_FATAL(left_len > 0);
	CU_ASSERT_EQUAL_FATAL(live_stats(ctl, s), 0);
	CU_ASSERT_EQUAL(lm_stats_info(s)->clients, 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "msgs_received"), 2);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "bytes_received"),
			join_len + leave_len);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "bytes_sent"),
			(uint64_t)(ok_len + left_len));
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "probe_handled"), 2);

	/* A STATS with a body is dropped and counted, not answered. */
	{
		uint8_t bad[LM_MSG_PREFIX + 1] = { 0 };
		void *reply = NULL;
		size_t rlen = 0;

		lm_stats_encode_request(bad, sizeof(bad));
		CU_ASSERT_EQUAL(lm_rpc_call(ctl, bad, sizeof(bad), &reply,
					    &rlen, 300),
				LM_ETIMEDOUT);
		free(reply);
		CU_ASSERT_EQUAL_FATAL(live_stats(ctl, s), 0);
		CU_ASSERT_EQUAL(val(s, LM_STAT_NONE, "msgs_undecodable"), 1);
	}
out:
	lm_rpc_destroy(client);
	lm_rpc_destroy(ctl);
	lm_stats_destroy(s);
	live_free(&lv);
	lm_log_set_level(saved);
}

/* tools/runstats.c against the same daemon: c0 answers with its
 * counters, r0 (not running) is down, within the time limit. */
static void test_runstats_query_live_daemon(void)
{
	enum lm_log_level saved = lm_log_get_level();
	struct live lv;
	lm_runstats *rs = NULL;
	const struct lm_runstats_daemon *r0, *c0;
	uint64_t t0;

	lm_log_set_level(LM_LOG_ERROR);
	if (live_start(&lv) != 0) {
		CU_FAIL("cannot start the daemon");
		goto out;
	}
	rs = lm_runstats_create(lv.l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	t0 = lm_now_us();
	CU_ASSERT_EQUAL(lm_runstats_query(rs, lv.l, lv.auth,
					  lm_stats_tool_id(lv.l, 3), 300),
			1);
	CU_ASSERT(lm_now_us() - t0 < 3000000);
	CU_ASSERT_EQUAL_FATAL(lm_runstats_count(rs), 2);
	r0 = lm_runstats_daemon(rs, 0);
	c0 = lm_runstats_daemon(rs, 1);
	CU_ASSERT_STRING_EQUAL(r0->name, "r0");
	CU_ASSERT_NOT_EQUAL(r0->rc, 0);
	CU_ASSERT(r0->why[0] != '\0');
	CU_ASSERT_STRING_EQUAL(c0->name, "c0");
	CU_ASSERT_EQUAL_FATAL(c0->rc, 0);
	CU_ASSERT_EQUAL(val(c0->set, LM_STAT_CLIENT, "probe_handled"), 0);
	CU_ASSERT_EQUAL(val(c0->set, LM_STAT_CLIENT, "msgs_sent"), 0);
out:
	lm_runstats_destroy(rs);
	live_free(&lv);
	lm_log_set_level(saved);
}

/* ------------------------------------------------------------------ */
/* The protocol adapters */

static void capture_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	(void)ctx;
	(void)node;
	(void)m;
}

static void capture_req(void *ctx, uint16_t node, uint32_t req_id,
			const struct lm_msg *m)
{
	(void)ctx;
	(void)node;
	(void)req_id;
	(void)m;
}

static const struct lm_msg_out quiet_out = { capture_send, capture_req,
					     capture_req, NULL };

static void test_home_adapter_maps_every_field(void)
{
	enum lm_log_level saved = lm_log_get_level();
	struct lm_layout *l = load("conf/4+4.ini");
	lm_home *h;
	lm_stats_set *s = lm_stats_create();
	struct lm_msg m = { .type = LM_MSG_FETCH, .run = 1 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	h = lm_home_create(l, l->reflectors[0].id, &quiet_out, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	/* A FETCH from a client is not for the home: dropped as bad. */
	lm_log_set_level(LM_LOG_ERROR);
	lm_home_handle(h, lm_layout_client_id(l, 0), LM_REL_REQUEST, 1, &m);
	lm_log_set_level(saved);
	CU_ASSERT_EQUAL_FATAL(lm_home_stats(h)->dropped_bad, 1);
	lm_home_stats_add(h, s);
	/* Every field (all 8 bytes wide) has its line in the table. */
	CU_ASSERT_EQUAL(lm_stats_count(s) * sizeof(uint64_t),
			sizeof(struct lm_home_stats));
	CU_ASSERT_EQUAL(val(s, LM_STAT_NONE, "dropped_bad"), 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "fetches"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "barriers"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "lock_grants"), 0);
	lm_home_destroy(h);
	lm_stats_destroy(s);
	lm_layout_free(l);
}

static void test_cluster_adapter_maps_every_field(void)
{
	struct lm_layout *l = load("conf/4+4.ini");
	lm_lemuriad *c;
	lm_stats_set *s = lm_stats_create();
	struct lm_msg m = { .type = LM_MSG_FETCH, .run = 1 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	c = lm_lemuriad_create(l, "c0", l->hash, &quiet_out, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	/* Rank 0 never joined: its FETCH is dropped as bad. */
	lm_lemuriad_handle(c, lm_layout_client_id(l, 0), LM_REL_REQUEST, 1,
			  &m);
	CU_ASSERT_EQUAL_FATAL(lm_lemuriad_stats(c)->dropped_bad, 1);
	lm_lemuriad_stats_add(c, s);
	CU_ASSERT_EQUAL(lm_stats_count(s) * sizeof(uint64_t),
			sizeof(struct lm_lemuriad_stats) +
			sizeof(struct lm_deltas_stats) +
			sizeof(struct lm_updates_stats));
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "delta_bytes_sent"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_NONE, "dropped_bad"), 1);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLIENT, "fetch_hits"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_CLUSTER, "fetch_misses"), 0);
	CU_ASSERT_EQUAL(val(s, LM_STAT_NONE, "cached_bytes"), 0);
	lm_lemuriad_destroy(c);
	lm_stats_destroy(s);
	lm_layout_free(l);
}

LM_TEST_SUITE("stats", LM_TEST(test_set_add_merges_same_name_and_level),
	      LM_TEST(test_set_rejects_bad_names_and_levels),
	      LM_TEST(test_set_holds_at_most_256),
	      LM_TEST(test_set_copy_and_clear),
	      LM_TEST(test_add_fields_reads_each_width),
	      LM_TEST(test_request_codec),
	      LM_TEST(test_reply_round_trip),
	      LM_TEST(test_reply_full_set_round_trip),
	      LM_TEST(test_reply_over_256_counters_rejected),
	      LM_TEST(test_reply_truncated_at_every_length),
	      LM_TEST(test_reply_rejects_bad_fields),
	      LM_TEST(test_link_level_from_node_ids),
	      LM_TEST(test_tool_ids_stay_out_of_the_layout),
	      LM_TEST(test_engine_counts_retransmits_per_peer),
	      LM_TEST(test_daemon_answers_stats_per_level),
	      LM_TEST(test_runstats_query_live_daemon),
	      LM_TEST(test_home_adapter_maps_every_field),
	      LM_TEST(test_cluster_adapter_maps_every_field))
