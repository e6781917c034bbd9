/* Levelled logging with a replaceable sink.
 *
 * Daemons log to stderr (or syslog, later); the client library routes
 * messages through the same sink so an application can capture them. */
#ifndef LM_LOG_H
#define LM_LOG_H

#include <stdarg.h>

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

#define lm_log_error(...) lm_log(LM_LOG_ERROR, __VA_ARGS__)
#define lm_log_warn(...) lm_log(LM_LOG_WARN, __VA_ARGS__)
#define lm_log_info(...) lm_log(LM_LOG_INFO, __VA_ARGS__)
#define lm_log_debug(...) lm_log(LM_LOG_DEBUG, __VA_ARGS__)

#endif
