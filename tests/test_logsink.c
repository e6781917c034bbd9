/* Log destinations of a daemon (common/logsink.c): the log file that
 * SIGHUP reopens, and syslog's priorities. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "lm_error.h"
#include "log.h"
#include "logsink.h"
#include "tmpfiles.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Log destinations. */

static void test_log_file_reopened_after_move(void)
{
	static const char *const names[] = { "d.log", "d.log.1", NULL };
	enum lm_log_level saved = lm_log_get_level();
	char path[128], moved[128], text[4096], err[256] = "";

	tf_dir_create();
	tf_path(path, sizeof(path), "d.log");
	tf_path(moved, sizeof(moved), "d.log.1");
	tf_put(path, "kept from before\n");
	lm_log_set_level(LM_LOG_INFO);
	CU_ASSERT_EQUAL_FATAL(lm_logsink_to_file(path, "t0", err,
						    sizeof(err)),
			      0);
	lm_log_info("first %d", 1);
	lm_log_debug("not at this level");
	CU_ASSERT_EQUAL(rename(path, moved), 0);
	lm_log_warn("still to the moved file");
	CU_ASSERT_EQUAL(lm_logsink_reopen(err, sizeof(err)), 0);
	lm_log_error("after the reopen");
	lm_logsink_close();
	lm_log_set_level(saved);

	tf_get(moved, text, sizeof(text));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "kept from before\n")); /* append */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " t0: info: first 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " t0: warn: still to the moved"));
	CU_ASSERT_PTR_NULL(strstr(text, "not at this level"));
	CU_ASSERT_PTR_NULL(strstr(text, "after the reopen"));
	tf_get(path, text, sizeof(text));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " t0: error: after the reopen\n"));
	CU_ASSERT_PTR_NULL(strstr(text, "first"));
	/* Lines start with a date: "YYYY-MM-DD HH:MM:SS.mmm ". */
	CU_ASSERT(strlen(text) > 24 && text[4] == '-' && text[10] == ' ' &&
		  text[19] == '.');
	tf_dir_remove(names);
}

static void test_log_reopen_without_file(void)
{
	char err[256] = "";

	lm_logsink_close();
	CU_ASSERT_EQUAL(lm_logsink_reopen(err, sizeof(err)), LM_ENOENT);
}

static void test_log_file_unopenable_named(void)
{
	char err[256] = "";

	CU_ASSERT_EQUAL(lm_logsink_to_file("/nonexistent-lm-dir/d.log",
					      "t0", err, sizeof(err)),
			LM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent-lm-dir/d.log"));
	CU_ASSERT_EQUAL(lm_logsink_reopen(err, sizeof(err)), LM_ENOENT);
}

static void test_syslog_priorities(void)
{
	CU_ASSERT_EQUAL(lm_logsink_syslog_priority(LM_LOG_ERROR), LOG_ERR);
	CU_ASSERT_EQUAL(lm_logsink_syslog_priority(LM_LOG_WARN), LOG_WARNING);
	CU_ASSERT_EQUAL(lm_logsink_syslog_priority(LM_LOG_INFO), LOG_INFO);
	CU_ASSERT_EQUAL(lm_logsink_syslog_priority(LM_LOG_DEBUG), LOG_DEBUG);
}

LM_TEST_SUITE("logsink", LM_TEST(test_log_file_reopened_after_move),
	      LM_TEST(test_log_reopen_without_file),
	      LM_TEST(test_log_file_unopenable_named),
	      LM_TEST(test_syslog_priorities))
