/* Levelled logging with a replaceable sink.
 *
 * Daemons log to stderr (or syslog, later); the client library routes
 * messages through the same sink so an application can capture them. */
#ifndef LM_LOG_H
#define LM_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum lm_log_level {
	LM_LOG_ERROR, /* something failed and was reported */
	LM_LOG_WARN,  /* unexpected input dropped, degraded operation */
	LM_LOG_INFO,  /* start, stop, peers joining and leaving */
	LM_LOG_DEBUG, /* per-message tracing */
	LM_LOG_LEVEL_COUNT
};

typedef void (*lm_log_sink)(void *ctx, enum lm_log_level level,
			    const char *msg);

/* Messages above `level` are discarded before formatting. */
void lm_log_set_level(enum lm_log_level level);
enum lm_log_level lm_log_get_level(void);
/* Parses "error", "warn", "info" or "debug"; returns 0 or LM_EINVAL. */
int lm_log_parse_level(const char *name, enum lm_log_level *out);
/* NULL restores the default sink: "<ident>: <level>: msg" on stderr. */
void lm_log_set_sink(lm_log_sink sink, void *ctx);
/* The ident is copied; it prefixes every line of the default sink. */
void lm_log_set_ident(const char *ident);

void lm_log(enum lm_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void lm_vlog(enum lm_log_level level, const char *fmt, va_list ap);

/* ---- Rate-limited lines ---------------------------------------------
 *
 * For events a peer (or anyone who can send us a datagram) controls: bad
 * input dropped by a daemon.  A flood of it must not flood the log, and
 * the first lines of a burst must still say what is wrong.
 *
 * Each limiter is named by a key, a string naming the kind of event in
 * the plural ("datagrams with a bad MAC").  Per key, at most
 * LM_LOG_LIMIT_BURST lines pass in an interval of LM_LOG_LIMIT_INTERVAL_US
 * that starts at the first line; the rest are counted, and when the
 * interval is over one line says how many were suppressed:
 *
 *     1234 more datagrams with a bad MAC suppressed in the last 10 s
 *
 * at the level of the lines it stands for.  The summary comes with the
 * first line of the key after the interval, or from lm_log_limit_flush,
 * which the daemons call every second.  Limiters live in this module
 * (process-wide, LM_LOG_LIMIT_KEYS of them; further keys share the last
 * one), so that code holding no state of its own can use them and no
 * limiter outlives the object that used it.  Thread-safe. */
#define LM_LOG_LIMIT_BURST 10
#define LM_LOG_LIMIT_INTERVAL_US 10000000ull
#define LM_LOG_LIMIT_KEYS 32

/* Like lm_log, under the limiter of `key` (borrowed: a string constant,
 * compared by content).  Lines above the current level are discarded and
 * not counted. */
void lm_log_limited(const char *key, enum lm_log_level level,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Ends every interval that is over: logs the summary lines now. */
void lm_log_limit_flush(void);
/* The limiters' clock, microseconds (NULL: the monotonic clock of
 * clock.h).  For tests. */
void lm_log_set_clock(uint64_t (*now_us)(void));
/* Forgets every limiter and what it counted.  For tests. */
void lm_log_limit_reset(void);

#define lm_log_error(...) lm_log(LM_LOG_ERROR, __VA_ARGS__)
#define lm_log_warn(...) lm_log(LM_LOG_WARN, __VA_ARGS__)
#define lm_log_info(...) lm_log(LM_LOG_INFO, __VA_ARGS__)
#define lm_log_debug(...) lm_log(LM_LOG_DEBUG, __VA_ARGS__)

#endif
