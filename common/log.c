/* Levelled logging: one global level and sink, guarded by a mutex so
 * that lines from several threads never interleave; and the rate limiters
 * of log.h, with a mutex of their own (a line is decided under it and
 * written after it is released). */
#include "log.h"
#include "clock.h"
#include "lm_error.h"

#include <pthread.h>
#include <stdbool.h>
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

/* ---- Rate-limited lines ------------------------------------------- */

struct lm_log_limit {
	const char *key;        /* NULL: free slot */
	uint64_t start_us;      /* the current interval began here */
	unsigned passed;        /* lines let through in it */
	uint64_t suppressed;    /* lines held back in it */
	enum lm_log_level level; /* most severe of those held back */
};

static pthread_mutex_t lm_log_limit_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct lm_log_limit lm_log_limits[LM_LOG_LIMIT_KEYS];
static uint64_t (*lm_log_clock)(void);

static uint64_t lm_log_now(void)
{
	return lm_log_clock ? lm_log_clock() : lm_now_us();
}

void lm_log_set_clock(uint64_t (*now_us)(void))
{
	pthread_mutex_lock(&lm_log_limit_mutex);
	lm_log_clock = now_us;
	pthread_mutex_unlock(&lm_log_limit_mutex);
}

void lm_log_limit_reset(void)
{
	pthread_mutex_lock(&lm_log_limit_mutex);
	memset(lm_log_limits, 0, sizeof(lm_log_limits));
	pthread_mutex_unlock(&lm_log_limit_mutex);
}

/* The slot of `key`, taken on first use; once all are taken, the last
 * one serves every further key. */
static struct lm_log_limit *lm_log_limit_find(const char *key)
{
	size_t i;

	for (i = 0; i < LM_LOG_LIMIT_KEYS && lm_log_limits[i].key; i++)
		if (lm_log_limits[i].key == key ||
		    strcmp(lm_log_limits[i].key, key) == 0)
			return &lm_log_limits[i];
	if (i == LM_LOG_LIMIT_KEYS)
		return &lm_log_limits[LM_LOG_LIMIT_KEYS - 1];
	lm_log_limits[i].key = key;
	return &lm_log_limits[i];
}

/* When the interval of `l` is over at `now`: writes its summary into
 * `sum` (returns true when there is one) and starts none; the next line
 * starts the next interval. */
static bool lm_log_limit_end(struct lm_log_limit *l, uint64_t now,
			     char *sum, size_t sumlen,
			     enum lm_log_level *level)
{
	bool any;

	if (!l->passed && !l->suppressed)
		return false; /* no interval running */
	if (now - l->start_us < LM_LOG_LIMIT_INTERVAL_US)
		return false;
	any = l->suppressed > 0;
	if (any) {
		snprintf(sum, sumlen,
			 "%llu more %s suppressed in the last %llu s",
			 (unsigned long long)l->suppressed, l->key,
			 (unsigned long long)((now - l->start_us + 500000) /
					      1000000));
		*level = l->level;
	}
	l->passed = 0;
	l->suppressed = 0;
	return any;
}

void lm_log_limited(const char *key, enum lm_log_level level,
		    const char *fmt, ...)
{
	struct lm_log_limit *l;
	char sum[256];
	enum lm_log_level sum_level = level;
	bool summary, pass;
	uint64_t now;
	va_list ap;

	if (level > lm_log_get_level() || !key)
		return;
	pthread_mutex_lock(&lm_log_limit_mutex);
	now = lm_log_now();
	l = lm_log_limit_find(key);
	summary = lm_log_limit_end(l, now, sum, sizeof(sum), &sum_level);
	if (!l->passed && !l->suppressed)
		l->start_us = now;
	pass = l->passed < LM_LOG_LIMIT_BURST;
	if (pass) {
		l->passed++;
	} else {
		if (!l->suppressed || level < l->level)
			l->level = level;
		l->suppressed++;
	}
	pthread_mutex_unlock(&lm_log_limit_mutex);
	if (summary)
		lm_log(sum_level, "%s", sum);
	if (pass) {
		va_start(ap, fmt);
		lm_vlog(level, fmt, ap);
		va_end(ap);
	}
}

void lm_log_limit_flush(void)
{
	char sum[LM_LOG_LIMIT_KEYS][256];
	enum lm_log_level level[LM_LOG_LIMIT_KEYS];
	bool any[LM_LOG_LIMIT_KEYS];
	uint64_t now;

	pthread_mutex_lock(&lm_log_limit_mutex);
	now = lm_log_now();
	for (size_t i = 0; i < LM_LOG_LIMIT_KEYS; i++)
		any[i] = lm_log_limits[i].key &&
			 lm_log_limit_end(&lm_log_limits[i], now, sum[i],
					  sizeof(sum[i]), &level[i]);
	pthread_mutex_unlock(&lm_log_limit_mutex);
	for (size_t i = 0; i < LM_LOG_LIMIT_KEYS; i++)
		if (any[i])
			lm_log(level[i], "%s", sum[i]);
}
