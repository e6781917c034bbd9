/* A process that signs datagrams from an exit handler registered before
 * libcrypto was first used, as liblemuria's own handler is (it sends
 * rank 0's LEAVE when the program calls exit(0)).  libcrypto must not
 * have been torn down by then: the handler derives a key for a sender it
 * has not seen yet, which needs the HKDF and a digest fetched anew.
 * Prints "signed at exit" and exits 0 when it could; test_auth.c runs it.
 * A program of its own because the order of exit handlers is fixed once
 * per process, and the unit binary has used libcrypto long before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "wire.h"

static const uint8_t key[LM_KEY_BYTES] = "auth_at_exit: a key of 32 bytes";
static lm_auth *auth;

static int sign_from(uint16_t sender)
{
	uint8_t buf[LM_WIRE_HDR_SIZE + 64 + LM_WIRE_MAC_SIZE] = { 0 };
	struct lm_dg_header h = {
		.type = LM_DG_DATA, .flags = LM_DGF_MAC, .sender = sender,
		.receiver = 1, .payload_len = 64, .session = 5, .stamp = 1,
		.seq = 1, .msg_len = 64, .frag_count = 1,
	};
	size_t len = LM_WIRE_HDR_SIZE + 64;

	lm_wire_encode_header(&h, buf);
	lm_auth_sign(auth, buf, len);
	return lm_auth_verify(auth, buf, len + LM_WIRE_MAC_SIZE);
}

static void at_exit(int status, void *arg)
{
	(void)arg;
	if (status != 0 || !auth)
		return;
	if (sign_from(9) != 0) {
		fprintf(stderr, "auth_at_exit: a datagram signed at exit "
				"failed verification\n");
		_exit(1);
	}
	printf("signed at exit\n");
	fflush(stdout);
}

__attribute__((constructor)) static void hook_exit(void)
{
	on_exit(at_exit, NULL);
}

int main(void)
{
	auth = lm_auth_create(key);
	if (!auth || sign_from(3) != 0) {
		fprintf(stderr, "auth_at_exit: lm_auth_create or a first "
				"signature failed\n");
		return 1;
	}
	exit(0);
}
