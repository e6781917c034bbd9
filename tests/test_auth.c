/* Datagram MAC: authentic datagrams pass; any changed bit, a wrong key, a
 * truncation or a moved nonce field fails. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "lm_error.h"
#include "wire.h"

static const uint8_t test_key[LM_KEY_BYTES] = "0123456789abcdef0123456789abcde";

static size_t make_datagram(uint8_t *buf, uint16_t payload, uint64_t stamp)
{
	struct lm_dg_header h = {
		.type = LM_DG_DATA, .flags = LM_DGF_MAC, .sender = 3,
		.receiver = 4, .payload_len = payload, .session = 77,
		.stamp = stamp, .seq = 1, .msg_len = payload,
		.frag_count = 1,
	};

	lm_wire_encode_header(&h, buf);
	for (uint16_t i = 0; i < payload; i++)
		buf[LM_WIRE_HDR_SIZE + i] = (uint8_t)(i ^ 0x5a);
	return LM_WIRE_HDR_SIZE + payload;
}

static void test_sign_then_verify(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 4096 + LM_WIRE_MAC_SIZE];
	lm_auth *a = lm_auth_create(test_key);
	size_t len;

	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	len = make_datagram(buf, 4096, 1);
	lm_auth_sign(a, buf, len);
	CU_ASSERT_EQUAL(lm_auth_verify(a, buf, len + LM_WIRE_MAC_SIZE), 0);
	lm_auth_destroy(a);
	lm_auth_destroy(NULL);
}

static void test_every_bit_flip_detected(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 40 + LM_WIRE_MAC_SIZE];
	lm_auth *a = lm_auth_create(test_key);
	size_t len = make_datagram(buf, 40, 2), total = len + LM_WIRE_MAC_SIZE;
	int undetected = 0;

	lm_auth_sign(a, buf, len);
	for (size_t byte = 0; byte < total; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			buf[byte] ^= (uint8_t)(1u << bit);
			if (lm_auth_verify(a, buf, total) == 0)
				undetected++;
			buf[byte] ^= (uint8_t)(1u << bit);
		}
	}
	CU_ASSERT_EQUAL(undetected, 0);
	CU_ASSERT_EQUAL(lm_auth_verify(a, buf, total), 0);
	lm_auth_destroy(a);
}

static void test_wrong_key_and_truncation(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 100 + LM_WIRE_MAC_SIZE];
	uint8_t other_key[LM_KEY_BYTES];
	lm_auth *a = lm_auth_create(test_key), *b;
	size_t len = make_datagram(buf, 100, 3);

	memcpy(other_key, test_key, sizeof(other_key));
	other_key[0] ^= 1;
	b = lm_auth_create(other_key);
	lm_auth_sign(a, buf, len);
	CU_ASSERT_EQUAL(lm_auth_verify(b, buf, len + LM_WIRE_MAC_SIZE),
			LM_EAUTH);
	for (size_t cut = 0; cut < len + LM_WIRE_MAC_SIZE; cut++)
		CU_ASSERT_EQUAL(lm_auth_verify(a, buf, cut), LM_EAUTH);
	lm_auth_destroy(a);
	lm_auth_destroy(b);
}

/* The stamp is part of the nonce: the same bytes under another stamp give
 * another MAC, so a MAC cannot be moved to a datagram with a new stamp. */
static void test_mac_bound_to_stamp(void)
{
	uint8_t one[LM_WIRE_HDR_SIZE + 16 + LM_WIRE_MAC_SIZE];
	uint8_t two[sizeof(one)];
	lm_auth *a = lm_auth_create(test_key);
	size_t len = make_datagram(one, 16, 10);

	make_datagram(two, 16, 11);
	lm_auth_sign(a, one, len);
	lm_auth_sign(a, two, len);
	CU_ASSERT_NOT_EQUAL(memcmp(one + len, two + len, LM_WIRE_MAC_SIZE), 0);
	memcpy(two + len, one + len, LM_WIRE_MAC_SIZE);
	CU_ASSERT_EQUAL(lm_auth_verify(a, two, len + LM_WIRE_MAC_SIZE),
			LM_EAUTH);
	lm_auth_destroy(a);
}

/* Keys are derived per (sender, session); interleaving more pairs than the
 * key cache holds must still verify every datagram and reject a datagram
 * whose sender or session was changed after signing. */
static void test_many_sender_sessions(void)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 32 + LM_WIRE_MAC_SIZE];
	lm_auth *signer = lm_auth_create(test_key);
	lm_auth *checker = lm_auth_create(test_key);
	size_t len = make_datagram(buf, 32, 5);
	int bad = 0;

	for (int round = 0; round < 3; round++) {
		for (uint16_t sender = 1; sender < 300; sender++) {
			lm_put16(buf + 6, sender);
			lm_put64(buf + 12, 1000 + sender % 7);
			lm_auth_sign(signer, buf, len);
			if (lm_auth_verify(checker, buf, len + LM_WIRE_MAC_SIZE))
				bad++;
			lm_put16(buf + 6, (uint16_t)(sender + 1));
			if (!lm_auth_verify(checker, buf, len + LM_WIRE_MAC_SIZE))
				bad++;
			lm_put16(buf + 6, sender);
			lm_put64(buf + 12, 1000 + sender % 7 + 1);
			if (!lm_auth_verify(checker, buf, len + LM_WIRE_MAC_SIZE))
				bad++;
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(lm_auth_construction(signer), "Poly1305") ?
				       "x" : strstr(lm_auth_construction(signer),
						    "GCM"));
	lm_auth_destroy(signer);
	lm_auth_destroy(checker);
}

/* Long datagrams are MACed by OpenSSL, short ones by libsodium: both must
 * give the one GMAC tag, so that either end may use either; a changed byte
 * must fail on the OpenSSL path too, and a key cache slot taken over by
 * another sender must not keep the old sender's OpenSSL key. */
static void test_both_libraries_give_one_tag(void)
{
	enum { MAXP = LM_WIRE_MAX_DATAGRAM - LM_WIRE_HDR_SIZE - LM_WIRE_MAC_SIZE };
	static uint8_t one[LM_WIRE_MAX_DATAGRAM], two[LM_WIRE_MAX_DATAGRAM];
	static const uint16_t payloads[] = { 100, 4096, 9000, MAXP };
	lm_auth *sodium = lm_auth_create(test_key);
	lm_auth *ossl = lm_auth_create(test_key);
	int undetected = 0, bad = 0;
	size_t len;

	CU_ASSERT_FATAL(sodium && ossl);
	lm_auth_set_bulk_min(sodium, SIZE_MAX);
	lm_auth_set_bulk_min(ossl, 0);
	for (size_t i = 0; i < sizeof(payloads) / sizeof(payloads[0]); i++) {
		len = make_datagram(one, payloads[i], 20 + i);
		memcpy(two, one, len);
		lm_auth_sign(sodium, one, len);
		lm_auth_sign(ossl, two, len);
		CU_ASSERT_EQUAL(memcmp(one + len, two + len, LM_WIRE_MAC_SIZE),
				0);
		CU_ASSERT_EQUAL(
			lm_auth_verify(ossl, one, len + LM_WIRE_MAC_SIZE), 0);
		CU_ASSERT_EQUAL(
			lm_auth_verify(sodium, two, len + LM_WIRE_MAC_SIZE), 0);
	}
	len = make_datagram(one, 5000, 30);
	lm_auth_sign(ossl, one, len);
	for (size_t byte = 0; byte < len + LM_WIRE_MAC_SIZE; byte++) {
		one[byte] ^= (uint8_t)(1u << (byte % 8));
		if (lm_auth_verify(ossl, one, len + LM_WIRE_MAC_SIZE) == 0)
			undetected++;
		one[byte] ^= (uint8_t)(1u << (byte % 8));
	}
	CU_ASSERT_EQUAL(undetected, 0);
	len = make_datagram(one, 4096, 31);
	for (uint16_t sender = 1; sender < 200; sender++) {
		lm_put16(one + 6, sender);
		lm_auth_sign(ossl, one, len);
		if (lm_auth_verify(sodium, one, len + LM_WIRE_MAC_SIZE))
			bad++;
	}
	CU_ASSERT_EQUAL(bad, 0);
	lm_auth_destroy(sodium);
	lm_auth_destroy(ossl);
}

static void test_key_from_file(void)
{
	char path[] = "/tmp/lm-test-key-XXXXXX";
	uint8_t k1[LM_KEY_BYTES], k2[LM_KEY_BYTES];
	char err[256] = "";
	int fd = mkstemp(path);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, "short", 5), 5);
	CU_ASSERT_EQUAL(lm_auth_key_from_file(path, k1, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "5 bytes"));
	CU_ASSERT_EQUAL(write(fd, " but now long enough", 20), 20);
	CU_ASSERT_EQUAL(lm_auth_key_from_file(path, k1, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(lm_auth_key_from_file(path, k2, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(memcmp(k1, k2, sizeof(k1)), 0);
	close(fd);
	unlink(path);
	CU_ASSERT_EQUAL(lm_auth_key_from_file(path, k1, err, sizeof(err)),
			LM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
}

LM_TEST_SUITE("auth",
	      LM_TEST(test_sign_then_verify),
	      LM_TEST(test_every_bit_flip_detected),
	      LM_TEST(test_wrong_key_and_truncation),
	      LM_TEST(test_mac_bound_to_stamp),
	      LM_TEST(test_many_sender_sessions),
	      LM_TEST(test_both_libraries_give_one_tag),
	      LM_TEST(test_key_from_file))
