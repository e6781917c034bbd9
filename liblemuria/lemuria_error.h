/* lemuria_error.h: the error codes of liblemuria, part of its public
 * interface (lemuria.h includes it).  A header of its own so that the
 * daemons, which share the codes, need not see the client's API.
 *
 * Every int-returning call of the library returns 0 or a negative LM_E*
 * code; lm_strerror turns one into a short English phrase. */
#ifndef LEMURIA_ERROR_H
#define LEMURIA_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what is marked LM_API is
 * its whole interface, the rest is internal. */
#if defined(__GNUC__)
#define LM_API __attribute__((visibility("default")))
#else
#define LM_API
#endif

/* Error codes: every int-returning call returns 0 or one of these. */
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
	LM_ECLOSED = -16,   /* endpoint is shutting down, or the run ended */
	LM_ENOENT = -17,    /* no such entry */
	LM_ERROR_COUNT_ = 17 /* not a code: how many there are */
};

/* A short English phrase for an error code (0 or negative).  Never NULL;
 * unknown codes give "unknown error". */
LM_API const char *lm_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
