/* Message prefix and the PING/PONG control messages. */
#include "unit.h"

#include <string.h>

#include "lemuria.h"
#include "lm_error.h"
#include "proto.h"

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

LM_TEST_SUITE("proto",
	      LM_TEST(test_pong_round_trip),
	      LM_TEST(test_prefix_checked),
	      LM_TEST(test_public_version))
