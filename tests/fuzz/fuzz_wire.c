/* libFuzzer harness for the datagram header codec (common/wire.c): any
 * bytes go to lm_wire_decode; what decodes must match the datagram and
 * re-encode to the same header.  Claimed MACs go to lm_auth_verify. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "fuzz_input.h"
#include "lm_error.h"
#include "wire.h"

static lm_auth *auth;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	auth = lm_auth_create(fz_key);
	if (!auth)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lm_dg_header h;
	const uint8_t *payload = NULL;
	uint8_t again[LM_WIRE_HDR_SIZE];
	size_t mac;
	int rc;

	rc = lm_wire_decode(data, size, &h, &payload);
	if (rc != 0) {
		if (rc != LM_EBADMSG && rc != LM_EVERSION && rc != LM_ETYPE)
			__builtin_trap();
		return 0;
	}
	mac = (h.flags & LM_DGF_MAC) ? LM_WIRE_MAC_SIZE : 0;
	if (payload != data + LM_WIRE_HDR_SIZE ||
	    LM_WIRE_HDR_SIZE + (size_t)h.payload_len + mac != size)
		__builtin_trap();
	if ((h.flags & ~LM_DGF_KNOWN) || h.version != LM_WIRE_VERSION ||
	    h.type == 0 || h.type >= LM_DG_TYPE_COUNT)
		__builtin_trap();
	if (h.type == LM_DG_DATA &&
	    (h.seq == 0 || h.frag_index >= h.frag_count ||
	     h.payload_len > h.msg_len))
		__builtin_trap();

	/* The header encoding is canonical: nothing decoded is lost. */
	lm_wire_encode_header(&h, again);
	if (memcmp(again, data, LM_WIRE_HDR_SIZE) != 0)
		__builtin_trap();

	/* Fuzzed bytes almost never carry a valid MAC; verification must
	 * still run to completion on exactly `size` bytes. */
	if (mac)
		(void)lm_auth_verify(auth, data, size);
	return 0;
}
