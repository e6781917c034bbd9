/* Datagram MAC: authentic datagrams pass; any changed bit, a wrong key, a
 * truncation or a moved nonce field fails; the tag is the standard
 * AES-256-GCM one and the key derivation the one auth.h states. */
#include "unit.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "children.h"
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
	CU_ASSERT_PTR_NOT_NULL(strstr(lm_auth_construction(signer), "GCM"));
	lm_auth_destroy(signer);
	lm_auth_destroy(checker);
}

static void from_hex(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		CU_ASSERT_FATAL(sscanf(hex + 2 * i, "%2x", &v) == 1);
		out[i] = (uint8_t)v;
	}
}

/* The GMAC is the standard one: NIST CAVP's AES-GCM test vectors
 * (gcmtestvectors.zip, gcmEncryptExtIV256.rsp), the groups with no
 * plaintext, a 96-bit IV and a 128-bit tag, Count = 0 of AADlen 0, 128,
 * 160, 384 and 720 (no block, one, a partial one, three, five and a
 * half), and a changed bit of key, nonce or data changes the tag. */
static void test_gmac_nist_vectors(void)
{
	static const struct {
		const char *key, *iv, *aad, *tag;
	} v[] = {
		{ "b52c505a37d78eda5dd34f20c22540ea"
		  "1b58963cf8e5bf8ffa85f9f2492505b4",
		  "516c33929df5a3284ff463d7", "",
		  "bdc1ac884d332457a1d2664f168c76f0" },
		{ "78dc4e0aaf52d935c3c01eea57428f00"
		  "ca1fd475f5da86a49c8dd73d68c8e223",
		  "d79cf22d504cc793c3fb6c8a",
		  "b96baa8c1c75a671bfb2d08d06be5f36",
		  "3e5d486aa2e30b22e040b85723a06e76" },
		{ "886cff5f3e6b8d0e1ad0a38fcdb26de9"
		  "7e8acbe79f6bed66959a598fa5047d65",
		  "3a8efa1cd74bbab5448f9945",
		  "519fee519d25c7a304d6c6aa1897ee1eb8c59655",
		  "f6d47505ec96c98a42dc3ae719877b87" },
		{ "f4069bb739d07d0cafdcbc609ca01597"
		  "f985c43db63bbaaa0debbb04d384e49c",
		  "d25ff30fdc3d464fe173e805",
		  "3e1449c4837f0892f9d55127c75c4b25"
		  "d69be334baf5f19394d2d8bb460cbf21"
		  "20e14736d0f634aa792feca20e455f11",
		  "805ec2931c2181e5bfb74fa0a975f0cf" },
		{ "03ccb7dbc7b8425465c2c3fc39ed0593"
		  "929ffd02a45ff583bd89b79c6f646fe9",
		  "fd119985533bd5520b301d12",
		  "98e68c10bf4b5ae62d434928fc640514"
		  "7c6301417303ef3a703dcfd2c0c339a4"
		  "d0a89bd29fe61fecf1066ab06d7a5c31"
		  "a48ffbfed22f749b17e9bd0dc1c6f8fb"
		  "d6fd4587184db964d5456132106d7823"
		  "38c3f117ec05229b0899",
		  "cf54e7141349b66f248154427810c87a" },
	};
	uint8_t key[32], iv[12], aad[90], want[16], got[16], other[16];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = strlen(v[i].aad) / 2;

		from_hex(v[i].key, key, sizeof(key));
		from_hex(v[i].iv, iv, sizeof(iv));
		from_hex(v[i].aad, aad, n);
		from_hex(v[i].tag, want, sizeof(want));
		CU_ASSERT_EQUAL_FATAL(lm_auth_gmac(key, iv, aad, n, got), 0);
		CU_ASSERT_EQUAL(memcmp(got, want, sizeof(want)), 0);
		key[31] ^= 1;
		CU_ASSERT_EQUAL(lm_auth_gmac(key, iv, aad, n, other), 0);
		CU_ASSERT_NOT_EQUAL(memcmp(other, want, sizeof(want)), 0);
		key[31] ^= 1;
		iv[0] ^= 0x80;
		CU_ASSERT_EQUAL(lm_auth_gmac(key, iv, aad, n, other), 0);
		CU_ASSERT_NOT_EQUAL(memcmp(other, want, sizeof(want)), 0);
		iv[0] ^= 0x80;
		if (n == 0)
			continue;
		aad[n - 1] ^= 1;
		CU_ASSERT_EQUAL(lm_auth_gmac(key, iv, aad, n, other), 0);
		CU_ASSERT_NOT_EQUAL(memcmp(other, want, sizeof(want)), 0);
	}
}

/* The whole construction of auth.h, pinned: the layout key of a secret
 * file and the MACs of datagrams of 64 B, 1 KiB, 4 KiB and the largest,
 * and of one from another sender and session (both fields' byte order).
 * The values were computed apart from this code, with Python's
 * cryptography 48 (HKDF-Extract as HMAC-SHA256 by hand, HKDFExpand,
 * AESGCM), and the tags checked with a second AES-GCM library under the
 * same keys.  An auth whose key cache has been churned by 300 other senders
 * (every slot keyed again, some several times) gives the same tags. */
static void test_construction_known_answer(void)
{
	static const char secret[] =
		"lemuria known-answer secret, never a real key";
	static const char *const want_key = "81c73421e4b936bdca15fdf3bca0a804"
					    "b805fb2e3584c3a2e20d3fd9064be66b";
	static const struct {
		uint16_t payload, sender;
		uint64_t session;
		const char *tag;
	} v[] = {
		{ 0, 3, 77, "18364df0ed5c8461be51086a39a32563" },
		{ 960, 3, 77, "c3547828667c8a562817f7e420aa7ea9" },
		{ 4032, 3, 77, "c72d778b355ab3b3423622a7bedb2b6e" },
		{ LM_WIRE_MAX_DATAGRAM - LM_WIRE_HDR_SIZE - LM_WIRE_MAC_SIZE, 3,
		  77, "79fcd4ff7ba780b534a0b5bea99d08ff" },
		{ 0, 0xfffe, 0x0123456789abcdefull,
		  "d68bc1392ef6d91d8a3c82af91ebcd5b" },
	};
	static uint8_t dg[LM_WIRE_MAX_DATAGRAM];
	char path[] = "/tmp/lm-test-key-XXXXXX";
	uint8_t key[LM_KEY_BYTES], want[LM_KEY_BYTES], tag[16];
	char err[256] = "";
	int fd = mkstemp(path);
	lm_auth *fresh, *churned;
	size_t len;

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, secret, sizeof(secret) - 1),
			(ssize_t)sizeof(secret) - 1);
	close(fd);
	CU_ASSERT_EQUAL_FATAL(lm_auth_key_from_file(path, key, err,
						    sizeof(err)), 0);
	unlink(path);
	from_hex(want_key, want, sizeof(want));
	CU_ASSERT_EQUAL(memcmp(key, want, sizeof(want)), 0);
	fresh = lm_auth_create(key);
	churned = lm_auth_create(key);
	CU_ASSERT_FATAL(fresh && churned);
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			lm_auth *a = round ? churned : fresh;

			len = make_datagram(dg, v[i].payload,
					    0x0102030405060708ull + i);
			/* the vectors' header byte 2: wire version 4, the
			 * version of the day they were computed (the MAC
			 * covers the header as bytes, whatever they say) */
			dg[2] = 4;
			lm_put16(dg + 6, v[i].sender);
			lm_put64(dg + 12, v[i].session);
			lm_auth_sign(a, dg, len);
			from_hex(v[i].tag, tag, sizeof(tag));
			CU_ASSERT_EQUAL(memcmp(dg + len, tag, sizeof(tag)), 0);
			CU_ASSERT_EQUAL(
				lm_auth_verify(a, dg, len + LM_WIRE_MAC_SIZE),
				0);
		}
		len = make_datagram(dg, 8, 1);
		for (uint16_t sender = 1; sender <= 300; sender++) {
			lm_put16(dg + 6, sender);
			lm_auth_sign(churned, dg, len);
		}
	}
	lm_auth_destroy(fresh);
	lm_auth_destroy(churned);
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

/* An exit handler registered before libcrypto's first use still signs
 * (auth.h, lm_auth_init_library): tests/helpers/auth_at_exit.c, a program
 * of its own beside this one, must print "signed at exit" and exit 0.
 * With libcrypto's own exit handler it died of SIGSEGV every time. */
static void test_sign_in_exit_handler(void)
{
	char self[4096], helper[4200], out[64] = "";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int pipefd[2];
	pid_t pid;

	CU_ASSERT_FATAL(n > 0);
	self[n] = '\0';
	snprintf(helper, sizeof(helper), "%s/auth_at_exit", dirname(self));
	CU_ASSERT_FATAL(access(helper, X_OK) == 0);
	CU_ASSERT_FATAL(pipe(pipefd) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		close(pipefd[0]);
		close(pipefd[1]);
		execl(helper, helper, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	CU_ASSERT_EQUAL(tc_wait(pid, 10000), 0); /* -1: a signal, or hung */
	n = read(pipefd[0], out, sizeof(out) - 1);
	close(pipefd[0]);
	out[n > 0 ? n : 0] = '\0';
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "signed at exit"));
}

LM_TEST_SUITE("auth",
	      LM_TEST(test_sign_then_verify),
	      LM_TEST(test_every_bit_flip_detected),
	      LM_TEST(test_wrong_key_and_truncation),
	      LM_TEST(test_mac_bound_to_stamp),
	      LM_TEST(test_many_sender_sessions),
	      LM_TEST(test_gmac_nist_vectors),
	      LM_TEST(test_construction_known_answer),
	      LM_TEST(test_key_from_file),
	      LM_TEST(test_sign_in_exit_handler))
