/* Levelled logging: one global level and sink, guarded by a mutex so
 * that lines from several threads never interleave. */
#include "log.h"
#include "lm_error.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static pthread_mutex_t lm_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static enum lm_log_level lm_log_level_cur = LM_LOG_WARN;
static lm_log_sink lm_log_sink_cur;
static void *lm_log_sink_ctx;
static char lm_log_ident[64] = "lemuria";

static const char *const lm_log_level_names[LM_LOG_LEVEL_COUNT] = {
	"error", "warn", "info", "debug"
};

void lm_log_set_level(enum lm_log_level level)
{
	if (level < LM_LOG_LEVEL_COUNT)
		__atomic_store_n(&lm_log_level_cur, level, __ATOMIC_RELAXED);
}

enum lm_log_level lm_log_get_level(void)
{
	return __atomic_load_n(&lm_log_level_cur, __ATOMIC_RELAXED);
}

int lm_log_parse_level(const char *name, enum lm_log_level *out)
{
	for (int i = 0; i < LM_LOG_LEVEL_COUNT; i++) {
		if (strcasecmp(name, lm_log_level_names[i]) == 0) {
			*out = (enum lm_log_level)i;
			return 0;
		}
	}
	return LM_EINVAL;
}

void lm_log_set_sink(lm_log_sink sink, void *ctx)
{
	pthread_mutex_lock(&lm_log_mutex);
	lm_log_sink_cur = sink;
	lm_log_sink_ctx = ctx;
	pthread_mutex_unlock(&lm_log_mutex);
}

void lm_log_set_ident(const char *ident)
{
	pthread_mutex_lock(&lm_log_mutex);
	snprintf(lm_log_ident, sizeof(lm_log_ident), "%s", ident);
	pthread_mutex_unlock(&lm_log_mutex);
}

void lm_vlog(enum lm_log_level level, const char *fmt, va_list ap)
{
	char line[1024];

	if (level > lm_log_get_level())
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	pthread_mutex_lock(&lm_log_mutex);
	if (lm_log_sink_cur)
		lm_log_sink_cur(lm_log_sink_ctx, level, line);
	else
		fprintf(stderr, "%s: %s: %s\n", lm_log_ident,
			lm_log_level_names[level], line);
	pthread_mutex_unlock(&lm_log_mutex);
}

void lm_log(enum lm_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	lm_vlog(level, fmt, ap);
	va_end(ap);
}
