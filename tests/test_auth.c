/* Datagram MAC: authentic datagrams pass; any changed bit, a wrong key, a
 * truncation or a moved nonce field fails. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "auth.h"
#include "gmac.h"
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

/* libsodium, OpenSSL and gmac.c (where the CPU runs it) give the one GMAC
 * tag, so that either end may use any; a changed byte must fail on every
 * engine, and a key cache slot taken over by another sender must not keep
 * the old sender's key in any of them. */
static void test_every_engine_gives_one_tag(void)
{
	enum { MAXP = LM_WIRE_MAX_DATAGRAM - LM_WIRE_HDR_SIZE - LM_WIRE_MAC_SIZE };
	static const enum lm_auth_engine engines[] = {
		LM_AUTH_SODIUM, LM_AUTH_OPENSSL, LM_AUTH_OWN, LM_AUTH_AUTO
	};
	enum { N = sizeof(engines) / sizeof(engines[0]) };
	static uint8_t dg[N][LM_WIRE_MAX_DATAGRAM];
	static const uint16_t payloads[] = { 0, 100, 4096, 9000, MAXP };
	lm_auth *auth[N];
	int undetected = 0, bad = 0, ran = 0;
	size_t len;

	for (int e = 0; e < N; e++) {
		auth[e] = lm_auth_create(test_key);
		CU_ASSERT_FATAL(auth[e] != NULL);
		if (!lm_auth_set_engine(auth[e], engines[e])) {
			/* only gmac.c may be missing (no VPCLMULQDQ) */
			CU_ASSERT_EQUAL(engines[e], LM_AUTH_OWN);
			CU_ASSERT_FALSE(lm_gmac_available());
			lm_auth_set_engine(auth[e], LM_AUTH_SODIUM);
		}
	}
	for (size_t i = 0; i < sizeof(payloads) / sizeof(payloads[0]); i++) {
		for (int e = 0; e < N; e++) {
			len = make_datagram(dg[e], payloads[i], 20 + i);
			lm_auth_sign(auth[e], dg[e], len);
		}
		for (int e = 1; e < N; e++) {
			CU_ASSERT_EQUAL(memcmp(dg[0] + len, dg[e] + len,
					       LM_WIRE_MAC_SIZE), 0);
			CU_ASSERT_EQUAL(lm_auth_verify(auth[e], dg[e - 1],
						       len + LM_WIRE_MAC_SIZE), 0);
		}
	}
	for (int e = 0; e < N; e++) {
		len = make_datagram(dg[0], 5000, 30);
		lm_auth_sign(auth[(e + 1) % N], dg[0], len);
		for (size_t byte = 0; byte < len + LM_WIRE_MAC_SIZE; byte++) {
			dg[0][byte] ^= (uint8_t)(1u << (byte % 8));
			if (lm_auth_verify(auth[e], dg[0],
					   len + LM_WIRE_MAC_SIZE) == 0)
				undetected++;
			dg[0][byte] ^= (uint8_t)(1u << (byte % 8));
			ran++;
		}
		len = make_datagram(dg[0], 4096, 31);
		for (uint16_t sender = 1; sender < 200; sender++) {
			lm_put16(dg[0] + 6, sender);
			lm_auth_sign(auth[e], dg[0], len);
			if (lm_auth_verify(auth[(e + 1) % N], dg[0],
					   len + LM_WIRE_MAC_SIZE))
				bad++;
		}
	}
	CU_ASSERT_EQUAL(undetected, 0);
	CU_ASSERT_EQUAL(ran, N * (LM_WIRE_HDR_SIZE + 5000 + LM_WIRE_MAC_SIZE));
	CU_ASSERT_EQUAL(bad, 0);
	for (int e = 0; e < N; e++)
		lm_auth_destroy(auth[e]);
}

/* gmac.c against libsodium's AES-256-GCM over every length that takes a
 * different path through it (no block, a partial one, the blocks of one
 * reduction and one more, whole chunks with and without a tail that
 * spills into a second reduction), at every alignment mod 16, with
 * fresh keys and nonces; and AES-256-GCM's test case 13 (McGrew and
 * Viega's GCM specification: zero key, zero nonce, nothing to hash). */
#define GMAC_CHUNK (16 * LM_GMAC_POWERS)

static void test_own_gmac_matches_libsodium(void)
{
	static const uint8_t case13[16] = { 0x53, 0x0f, 0x8a, 0xfb, 0xc7, 0x45,
					    0x36, 0xb9, 0xa9, 0x63, 0xb4, 0xf1,
					    0xc4, 0xcb, 0x73, 0x8b };
	static uint8_t data[3 * GMAC_CHUNK + 64];
	uint8_t key[32] = { 0 }, nonce[12] = { 0 }, want[16], got[16];
	unsigned long long maclen;
	struct lm_gmac_key k;
	int differ = 0, compared = 0;
	uint8_t none = 0;

	CU_ASSERT_FATAL(sodium_init() >= 0);
	if (!lm_gmac_available()) { /* then the engine must be refused */
		lm_auth *auth = lm_auth_create(test_key);

		CU_ASSERT_FATAL(auth != NULL);
		CU_ASSERT_FALSE(lm_auth_set_engine(auth, LM_AUTH_OWN));
		lm_auth_destroy(auth);
		return;
	}
	lm_gmac_init(&k, key);
	lm_gmac_tag(&k, nonce, data, 0, got);
	CU_ASSERT_EQUAL(memcmp(got, case13, 16), 0);
	randombytes_buf(data, sizeof(data));
	for (int trial = 0; trial < 8; trial++) {
		randombytes_buf(key, sizeof(key));
		randombytes_buf(nonce, sizeof(nonce));
		lm_gmac_init(&k, key);
		for (size_t len = 0; len <= 3 * GMAC_CHUNK + 17; len++) {
			size_t at = (len + (size_t)trial) % 16;

			if (len > 40 && len % 16 != 0 && len % 16 != 1 &&
			    len % 16 != 15 && len % GMAC_CHUNK > 16 &&
			    len % GMAC_CHUNK < GMAC_CHUNK - 16)
				continue; /* the paths repeat in between */
			crypto_aead_aes256gcm_encrypt_detached(
				&none, want, &maclen, &none, 0, data + at, len,
				NULL, nonce, key);
			lm_gmac_tag(&k, nonce, data + at, len, got);
			differ += memcmp(want, got, 16) != 0;
			compared++;
		}
	}
	CU_ASSERT_EQUAL(differ, 0);
	CU_ASSERT(compared > 8 * 150);
	lm_gmac_clear(&k);
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
	      LM_TEST(test_every_engine_gives_one_tag),
	      LM_TEST(test_own_gmac_matches_libsodium),
	      LM_TEST(test_key_from_file))
