/* lm_strerror and the log level parser. */
#include "unit.h"

#include <string.h>

#include "lm_error.h"
#include "log.h"

static void test_strerror_every_code_has_text(void)
{
	for (int e = 0; e >= -LM_ERROR_COUNT_; e--)
		CU_ASSERT_STRING_NOT_EQUAL(lm_strerror(e), "unknown error");
	CU_ASSERT_STRING_EQUAL(lm_strerror(1), "unknown error");
	CU_ASSERT_STRING_EQUAL(lm_strerror(-1000), "unknown error");
	CU_ASSERT_STRING_EQUAL(lm_strerror(LM_EAUTH), "authentication failed");
}

static void test_log_level_parse(void)
{
	enum lm_log_level l;

	CU_ASSERT_EQUAL(lm_log_parse_level("debug", &l), 0);
	CU_ASSERT_EQUAL(l, LM_LOG_DEBUG);
	CU_ASSERT_EQUAL(lm_log_parse_level("WARN", &l), 0);
	CU_ASSERT_EQUAL(l, LM_LOG_WARN);
	CU_ASSERT_EQUAL(lm_log_parse_level("loud", &l), LM_EINVAL);
}

struct captured {
	int calls;
	char last[128];
};

static void capture_sink(void *ctx, enum lm_log_level level, const char *msg)
{
	struct captured *c = ctx;

	(void)level;
	c->calls++;
	strncpy(c->last, msg, sizeof(c->last) - 1);
}

static void test_log_sink_and_level_filter(void)
{
	struct captured c = { 0 };
	enum lm_log_level saved = lm_log_get_level();

	lm_log_set_sink(capture_sink, &c);
	lm_log_set_level(LM_LOG_WARN);
	lm_log_debug("hidden %d", 1);
	lm_log_warn("shown %d", 2);
	lm_log_set_sink(NULL, NULL);
	lm_log_set_level(saved);
	CU_ASSERT_EQUAL(c.calls, 1);
	CU_ASSERT_STRING_EQUAL(c.last, "shown 2");
}

LM_TEST_SUITE("error",
	      LM_TEST(test_strerror_every_code_has_text),
	      LM_TEST(test_log_level_parse),
	      LM_TEST(test_log_sink_and_level_filter))
