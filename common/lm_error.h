/* Error codes shared by every Lemuria module.
 *
 * Functions return 0 on success or a negative LM_E* code; lm_strerror()
 * turns a code into a short English phrase for messages. */
#ifndef LM_ERROR_H
#define LM_ERROR_H

enum lm_error {
	LM_OK = 0,
	LM_EINVAL = -1,     /* invalid argument */
	LM_ENOMEM = -2,     /* out of memory */
	LM_ETIMEDOUT = -3,  /* no answer within the time limit */
	LM_EUNREACH = -4,   /* peer declared unreachable (retry limit) */
	LM_ENOBUFS = -5,    /* a bounded queue or buffer is full */
	LM_EMSGSIZE = -6,   /* message larger than the configured limit */
	LM_EBADMSG = -7,    /* malformed or truncated datagram */
	LM_EAUTH = -8,      /* MAC check failed */
	LM_EREPLAY = -9,    /* datagram already seen or too old */
	LM_EVERSION = -10,  /* unknown protocol version */
	LM_ETYPE = -11,     /* unknown datagram or message type */
	LM_EIO = -12,       /* system call failed (see errno in the message) */
	LM_ECONFIG = -13,   /* layout file rejected */
	LM_ERESET = -14,    /* peer restarted; its session was reset */
	LM_ESTALE = -15,    /* duplicate or stale request dropped */
	LM_ECLOSED = -16,   /* endpoint is shutting down */
	LM_ENOENT = -17,    /* no such entry */
	LM_ERROR_COUNT_ = 17
};

/* Never NULL; unknown codes give "unknown error". */
const char *lm_strerror(int err);

#endif
