/* Tests of bad-input logging: the rate limiter of common/log.c (driven by
 * a fake clock), the phrases the codec gives for bad datagrams, the layout
 * hash in a daemon's PING, and the users of the limiter: a flood of bad
 * datagrams at a live transport endpoint (common/evnode.c) and of bad
 * messages at the reflector's and the lemuriad's machines is counted in
 * full and logged at most LM_LOG_LIMIT_BURST times per cause. */
#include <arpa/inet.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "lemuriad.h"
#include "evnode.h"
#include "home.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "unit.h"
#include "wire.h"

/* ------------------------------------------------------------------ */
/* A sink that keeps the lines, and a clock the test moves. */

#define CAP_LINES 256

static struct {
	char line[CAP_LINES][512];
	enum lm_log_level level[CAP_LINES];
	size_t n;
} cap;

static uint64_t fake_now;

static void cap_sink(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	if (cap.n < CAP_LINES) {
		snprintf(cap.line[cap.n], sizeof(cap.line[0]), "%s", msg);
		cap.level[cap.n] = level;
	}
	cap.n++;
}

static uint64_t fake_clock(void)
{
	return fake_now;
}

static enum lm_log_level saved_level;

/* Captures at `level`, on the fake clock at 1000 s, limiters empty. */
static void cap_begin(enum lm_log_level level)
{
	memset(&cap, 0, sizeof(cap));
	saved_level = lm_log_get_level();
	lm_log_set_level(level);
	lm_log_set_sink(cap_sink, NULL);
	fake_now = 1000 * 1000000ull;
	lm_log_set_clock(fake_clock);
	lm_log_limit_reset();
}

static void cap_end(void)
{
	lm_log_set_sink(NULL, NULL);
	lm_log_set_clock(NULL);
	lm_log_limit_reset();
	lm_log_set_level(saved_level);
}

/* Lines captured that contain `s`. */
static size_t cap_count(const char *s)
{
	size_t k = 0;

	for (size_t i = 0; i < cap.n && i < CAP_LINES; i++)
		if (strstr(cap.line[i], s))
			k++;
	return k;
}

/* ------------------------------------------------------------------ */
/* The limiter. */

static void test_burst_passes_then_suppresses(void)
{
	cap_begin(LM_LOG_WARN);
	for (int i = 0; i < 25; i++) {
		lm_log_limited("bad things", LM_LOG_WARN, "bad thing %d", i);
		fake_now += 1000; /* 25 ms in all: one interval */
	}
	CU_ASSERT_EQUAL(cap.n, LM_LOG_LIMIT_BURST);
	CU_ASSERT_STRING_EQUAL(cap.line[0], "bad thing 0");
	CU_ASSERT_STRING_EQUAL(cap.line[9], "bad thing 9");
	/* Still inside the interval: nothing more, not even by flush. */
	fake_now += LM_LOG_LIMIT_INTERVAL_US / 2;
	lm_log_limit_flush();
	lm_log_limited("bad things", LM_LOG_WARN, "bad thing late");
	CU_ASSERT_EQUAL(cap.n, LM_LOG_LIMIT_BURST);
	cap_end();
}

static void test_summary_with_next_line_after_interval(void)
{
	cap_begin(LM_LOG_WARN);
	for (int i = 0; i < 25; i++)
		lm_log_limited("bad things", LM_LOG_WARN, "bad thing %d", i);
	fake_now += LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limited("bad things", LM_LOG_WARN, "bad thing again");
	CU_ASSERT_EQUAL_FATAL(cap.n, LM_LOG_LIMIT_BURST + 2);
	CU_ASSERT_STRING_EQUAL(cap.line[10], "15 more bad things suppressed "
					     "in the last 10 s");
	CU_ASSERT_EQUAL(cap.level[10], LM_LOG_WARN);
	/* A new interval: the line that ended the old one is its first. */
	CU_ASSERT_STRING_EQUAL(cap.line[11], "bad thing again");
	for (int i = 0; i < 20; i++)
		lm_log_limited("bad things", LM_LOG_WARN, "more %d", i);
	CU_ASSERT_EQUAL(cap.n, 2 * LM_LOG_LIMIT_BURST + 1);
	cap_end();
}

static void test_flush_ends_interval_once(void)
{
	cap_begin(LM_LOG_WARN);
	for (int i = 0; i < 1234 + LM_LOG_LIMIT_BURST; i++)
		lm_log_limited("dropped messages", LM_LOG_WARN, "dropped");
	fake_now += LM_LOG_LIMIT_INTERVAL_US + 400000; /* 10.4 s */
	lm_log_limit_flush();
	CU_ASSERT_EQUAL_FATAL(cap.n, LM_LOG_LIMIT_BURST + 1);
	CU_ASSERT_STRING_EQUAL(cap.line[10], "1234 more dropped messages "
					     "suppressed in the last 10 s");
	lm_log_limit_flush();
	fake_now += 3 * LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limit_flush();
	CU_ASSERT_EQUAL(cap.n, LM_LOG_LIMIT_BURST + 1);
	/* and the burst is available again */
	lm_log_limited("dropped messages", LM_LOG_WARN, "dropped again");
	CU_ASSERT_STRING_EQUAL(cap.line[11], "dropped again");
	cap_end();
}

static void test_no_summary_when_nothing_suppressed(void)
{
	cap_begin(LM_LOG_WARN);
	for (int i = 0; i < LM_LOG_LIMIT_BURST; i++)
		lm_log_limited("rare things", LM_LOG_WARN, "rare %d", i);
	fake_now += 2 * LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limit_flush();
	lm_log_limited("rare things", LM_LOG_WARN, "rare again");
	CU_ASSERT_EQUAL(cap.n, LM_LOG_LIMIT_BURST + 1);
	CU_ASSERT_EQUAL(cap_count("suppressed"), 0);
	cap_end();
}

static void test_keys_are_independent(void)
{
	char key[32];

	cap_begin(LM_LOG_WARN);
	for (int i = 0; i < 30; i++) {
		lm_log_limited("things A", LM_LOG_WARN, "A %d", i);
		lm_log_limited("things B", LM_LOG_WARN, "B %d", i);
	}
	CU_ASSERT_EQUAL(cap_count("A "), LM_LOG_LIMIT_BURST);
	CU_ASSERT_EQUAL(cap_count("B "), LM_LOG_LIMIT_BURST);
	/* A key is compared by content, not by address. */
	snprintf(key, sizeof(key), "things %c", 'A');
	lm_log_limited(key, LM_LOG_WARN, "A copy");
	CU_ASSERT_EQUAL(cap_count("A copy"), 0);
	fake_now += LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limit_flush();
	CU_ASSERT_EQUAL(cap_count("21 more things A suppressed"), 1);
	CU_ASSERT_EQUAL(cap_count("20 more things B suppressed"), 1);
	cap_end();
}

static void test_lines_above_level_not_counted(void)
{
	cap_begin(LM_LOG_WARN);
	for (int i = 0; i < 50; i++)
		lm_log_limited("chatter", LM_LOG_DEBUG, "debug %d", i);
	CU_ASSERT_EQUAL(cap.n, 0);
	/* The debug lines took nothing from the burst of the key. */
	for (int i = 0; i < LM_LOG_LIMIT_BURST; i++)
		lm_log_limited("chatter", LM_LOG_WARN, "warn %d", i);
	CU_ASSERT_EQUAL(cap.n, LM_LOG_LIMIT_BURST);
	fake_now += LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limit_flush();
	CU_ASSERT_EQUAL(cap_count("suppressed"), 0);
	cap_end();
}

static void test_summary_takes_most_severe_level(void)
{
	cap_begin(LM_LOG_INFO);
	for (int i = 0; i < LM_LOG_LIMIT_BURST + 3; i++)
		lm_log_limited("mixed", i == LM_LOG_LIMIT_BURST + 1 ?
				       LM_LOG_ERROR : LM_LOG_INFO,
			       "line %d", i);
	fake_now += LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limit_flush();
	CU_ASSERT_EQUAL_FATAL(cap.n, LM_LOG_LIMIT_BURST + 1);
	CU_ASSERT_STRING_EQUAL(cap.line[10], "3 more mixed suppressed in the "
					     "last 10 s");
	CU_ASSERT_EQUAL(cap.level[10], LM_LOG_ERROR);
	cap_end();
}

static void test_more_keys_than_slots_still_limited(void)
{
	static char keys[LM_LOG_LIMIT_KEYS + 8][24];

	cap_begin(LM_LOG_WARN);
	for (int k = 0; k < LM_LOG_LIMIT_KEYS + 8; k++)
		snprintf(keys[k], sizeof(keys[k]), "kind %d", k);
	for (int i = 0; i < 100; i++)
		for (int k = 0; k < LM_LOG_LIMIT_KEYS + 8; k++)
			lm_log_limited(keys[k], LM_LOG_WARN, "k%d", k);
	/* LM_LOG_LIMIT_KEYS slots, each LM_LOG_LIMIT_BURST lines at most */
	CU_ASSERT(cap.n <= (size_t)LM_LOG_LIMIT_KEYS * LM_LOG_LIMIT_BURST);
	CU_ASSERT(cap.n >= (size_t)(LM_LOG_LIMIT_KEYS - 1) *
			   LM_LOG_LIMIT_BURST);
	cap_end();
}

/* ------------------------------------------------------------------ */
/* Codec pieces the logs use. */

static void test_wire_problem_phrases(void)
{
	struct lm_dg_header h = { .type = LM_DG_ACK };
	uint8_t dg[LM_WIRE_HDR_SIZE + 8];

	memset(dg, 0, sizeof(dg));
	CU_ASSERT_STRING_EQUAL(lm_wire_problem(dg, 10),
			       "shorter than the header");
	CU_ASSERT_PTR_NOT_NULL(strstr(lm_wire_problem(dg, LM_WIRE_HDR_SIZE),
				      "bad magic"));
	lm_wire_encode_header(&h, dg);
	CU_ASSERT_PTR_NULL(lm_wire_problem(dg, LM_WIRE_HDR_SIZE));
	CU_ASSERT_STRING_EQUAL(lm_wire_problem(dg, LM_WIRE_HDR_SIZE + 8),
			       "longer than its header says");
	dg[2] = LM_WIRE_VERSION + 1;
	CU_ASSERT_STRING_EQUAL(lm_wire_problem(dg, LM_WIRE_HDR_SIZE),
			       "unknown protocol version");
	dg[2] = LM_WIRE_VERSION;
	dg[3] = 0x7f;
	CU_ASSERT_STRING_EQUAL(lm_wire_problem(dg, LM_WIRE_HDR_SIZE),
			       "unknown datagram type");
}

static void test_ping_carries_layout_hash(void)
{
	uint8_t buf[32];
	uint64_t hash = 0;
	int len = lm_msg_encode_ping_hash(0x0123456789abcdefull, buf,
					  sizeof(buf));

	CU_ASSERT_EQUAL_FATAL(len, LM_MSG_PREFIX + 8);
	CU_ASSERT_EQUAL(lm_msg_type(buf, (size_t)len), LM_MSG_PING);
	CU_ASSERT_EQUAL(lm_msg_decode_ping(buf, (size_t)len, &hash), 0);
	CU_ASSERT_EQUAL(hash, 0x0123456789abcdefull);
	CU_ASSERT_EQUAL(buf[LM_MSG_PREFIX], 0xef); /* little-endian */
	/* a tool's PING has none */
	len = lm_msg_encode_ping(buf, sizeof(buf));
	CU_ASSERT_EQUAL(lm_msg_decode_ping(buf, (size_t)len, &hash),
			LM_ENOENT);
	CU_ASSERT_EQUAL(lm_msg_decode_ping(buf, LM_MSG_PREFIX + 3, &hash),
			LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_msg_encode_ping_hash(1, buf, LM_MSG_PREFIX + 7),
			LM_ENOBUFS);
	buf[0] = LM_MSG_PONG; /* not a PING at all */
	CU_ASSERT_EQUAL(lm_msg_decode_ping(buf, LM_MSG_PREFIX + 8, &hash),
			LM_EBADMSG);
}

/* ------------------------------------------------------------------ */
/* A flood at a live endpoint: node 1, with a secret, node 2 declared. */

static void no_deliver(void *ctx, const struct lm_rel_msg *msg)
{
	(void)ctx;
	(void)msg;
}

/* A DATA datagram claiming `sender`, with a MAC of zeros. */
static size_t forged(uint8_t *dg, uint16_t sender)
{
	struct lm_dg_header h = {
		.type = LM_DG_DATA, .flags = LM_DGF_MAC, .sender = sender,
		.receiver = 1, .payload_len = 4, .session = 1, .stamp = 1,
		.seq = 1, .msg_len = 4, .frag_count = 1,
	};

	memset(dg, 0, LM_WIRE_HDR_SIZE + 4 + LM_WIRE_MAC_SIZE);
	lm_wire_encode_header(&h, dg);
	return LM_WIRE_HDR_SIZE + 4 + LM_WIRE_MAC_SIZE;
}

static void test_evnode_flood_counted_and_limited(void)
{
	struct event_base *base = event_base_new();
	struct sockaddr_in addr = { .sin_family = AF_INET }, elsewhere;
	struct lm_evnode_callbacks cbs = { .deliver = no_deliver };
	struct lm_evnode_drop_stats ev;
	struct lm_rel_config rcfg;
	const struct lm_rel_stats *st;
	uint8_t key[LM_KEY_BYTES], dg[128];
	lm_auth *auth;
	lm_evnode *node;
	char err[256];
	uint64_t deadline;
	int fd;

	memset(key, 7, sizeof(key));
	auth = lm_auth_create(key);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	elsewhere = addr;
	elsewhere.sin_port = htons(9); /* where "node 2" is said to be */
	lm_rel_config_default(&rcfg, 1);
	rcfg.max_peer_id = 10;
	rcfg.auth = auth;
	CU_ASSERT_PTR_NOT_NULL_FATAL(base);
	CU_ASSERT_PTR_NOT_NULL_FATAL(auth);
	node = lm_evnode_create(base, &addr, &rcfg, NULL, &cbs, NULL, err,
				sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(node);
	CU_ASSERT_EQUAL(lm_evnode_add_peer(node, 2, &elsewhere), 0);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	CU_ASSERT_FATAL(fd >= 0);

	cap_begin(LM_LOG_WARN);
	for (int i = 0; i < 40; i++) {
		size_t n;

		sendto(fd, "junk", 4, 0, (struct sockaddr *)&addr,
		       sizeof(addr));
		n = forged(dg, 5); /* a client id: address learned */
		sendto(fd, dg, n, 0, (struct sockaddr *)&addr, sizeof(addr));
		n = forged(dg, 2); /* declared elsewhere */
		sendto(fd, dg, n, 0, (struct sockaddr *)&addr, sizeof(addr));
		n = forged(dg, 40); /* beyond max_peer_id, with a good MAC */
		lm_auth_sign(auth, dg, n - LM_WIRE_MAC_SIZE);
		sendto(fd, dg, n, 0, (struct sockaddr *)&addr, sizeof(addr));
	}
	st = lm_rel_stats(lm_evnode_engine(node));
	deadline = lm_now_us() + 3000000;
	do {
		event_base_loop(base, EVLOOP_NONBLOCK);
		lm_evnode_drop_stats(node, &ev);
	} while ((st->drop_malformed + st->drop_auth + st->drop_unknown_peer +
		  ev.wrong_addr) < 160 && lm_now_us() < deadline);

	CU_ASSERT_EQUAL(st->drop_malformed, 40);
	CU_ASSERT_EQUAL(st->drop_auth, 40);
	CU_ASSERT_EQUAL(st->drop_unknown_peer, 40);
	CU_ASSERT_EQUAL(ev.wrong_addr, 40);
	CU_ASSERT_EQUAL(lm_evnode_drops(node), 40);
	CU_ASSERT_EQUAL(cap.n, 4 * LM_LOG_LIMIT_BURST);
	CU_ASSERT_EQUAL(cap_count("dropped malformed datagram (4 bytes) from "
				  "127.0.0.1:"),
			LM_LOG_LIMIT_BURST);
	CU_ASSERT_EQUAL(cap_count("(node 5): bad MAC"), LM_LOG_LIMIT_BURST);
	CU_ASSERT_EQUAL(cap_count("node 2, which the layout puts at "
				  "127.0.0.1:9"),
			LM_LOG_LIMIT_BURST);
	CU_ASSERT_EQUAL(cap_count("sender node 40 is not in the layout"),
			LM_LOG_LIMIT_BURST);
	fake_now += LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limit_flush();
	CU_ASSERT_EQUAL(cap_count("30 more malformed datagrams suppressed"),
			1);
	CU_ASSERT_EQUAL(cap_count("30 more datagrams with a bad MAC "
				  "suppressed"),
			1);
	cap_end();
	close(fd);
	lm_evnode_destroy(node);
	lm_auth_destroy(auth);
	event_base_free(base);
}

/* ------------------------------------------------------------------ */
/* Protocol-level drops (reflector drop_bad, lemuriad count_bad). */

static void out_nothing(void *ctx, uint16_t node, const struct lm_msg *m)
{
	(void)ctx;
	(void)node;
	(void)m;
}

static void out_req_nothing(void *ctx, uint16_t node, uint32_t req_id,
			    const struct lm_msg *m)
{
	(void)ctx;
	(void)node;
	(void)req_id;
	(void)m;
}

static const struct lm_msg_out quiet_out = { out_nothing, out_req_nothing,
					     out_req_nothing, NULL };

static void test_protocol_drops_counted_and_limited(void)
{
	struct lm_layout *l = NULL;
	struct lm_msg m = { .type = LM_MSG_FETCH, .run = 5 };
	char err[256];
	lm_home *h;
	lm_lemuriad *c;

	CU_ASSERT_FATAL(lm_layout_load("conf/4+4.ini", &l, err,
				       sizeof(err)) == 0);
	h = lm_home_create(l, 1, &quiet_out, NULL);
	c = lm_lemuriad_create(l, "c0", l->hash, &quiet_out, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	cap_begin(LM_LOG_WARN);
	/* node 99 is in no role of conf/4+4.ini */
	for (int i = 0; i < 500; i++) {
		lm_home_handle(h, 99, LM_REL_REQUEST, (uint32_t)i + 1, &m);
		lm_lemuriad_handle(c, 99, LM_REL_REQUEST, (uint32_t)i + 1, &m);
	}
	CU_ASSERT_EQUAL(lm_home_stats(h)->dropped_bad, 500);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->dropped_bad, 500);
	CU_ASSERT_EQUAL(cap_count("home: FETCH from node 99 dropped"),
			LM_LOG_LIMIT_BURST);
	CU_ASSERT_EQUAL(cap_count("cluster c0: dropped FETCH from node 99"),
			LM_LOG_LIMIT_BURST);
	CU_ASSERT_EQUAL(cap.n, 2 * LM_LOG_LIMIT_BURST);
	fake_now += LM_LOG_LIMIT_INTERVAL_US;
	lm_log_limit_flush();
	CU_ASSERT_EQUAL(cap_count("490 more bad messages dropped by the "
				  "reflector suppressed"),
			1);
	CU_ASSERT_EQUAL(cap_count("490 more bad messages dropped by the "
				  "lemuriad suppressed"),
			1);
	cap_end();
	lm_lemuriad_destroy(c);
	lm_home_destroy(h);
	lm_layout_free(l);
}

LM_TEST_SUITE("ratelog", LM_TEST(test_burst_passes_then_suppresses),
	      LM_TEST(test_summary_with_next_line_after_interval),
	      LM_TEST(test_flush_ends_interval_once),
	      LM_TEST(test_no_summary_when_nothing_suppressed),
	      LM_TEST(test_keys_are_independent),
	      LM_TEST(test_lines_above_level_not_counted),
	      LM_TEST(test_summary_takes_most_severe_level),
	      LM_TEST(test_more_keys_than_slots_still_limited),
	      LM_TEST(test_wire_problem_phrases),
	      LM_TEST(test_ping_carries_layout_hash),
	      LM_TEST(test_evnode_flood_counted_and_limited),
	      LM_TEST(test_protocol_drops_counted_and_limited))
