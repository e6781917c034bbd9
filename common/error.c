/* Text for the LM_E* codes of lemuria.h. */
#include "lm_error.h"

static const char *const lm_error_text[] = {
	[0] = "success",
	[1] = "invalid argument",
	[2] = "out of memory",
	[3] = "timed out",
	[4] = "peer unreachable",
	[5] = "buffer or queue full",
	[6] = "message too large",
	[7] = "malformed datagram",
	[8] = "authentication failed",
	[9] = "replayed datagram",
	[10] = "unknown protocol version",
	[11] = "unknown type",
	[12] = "system call failed",
	[13] = "invalid layout",
	[14] = "peer restarted",
	[15] = "stale or duplicate request",
	[16] = "endpoint closed",
	[17] = "no such entry",
};

const char *lm_strerror(int err)
{
	int i = -err;

	if (i < 0 || i > LM_ERROR_COUNT_ || !lm_error_text[i])
		return "unknown error";
	return lm_error_text[i];
}
