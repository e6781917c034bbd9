/* The daemons' command line (common/daemon_opts.c): service options and
 * the messages that name the bad word. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_opts.h"
#include "version.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Parsing: argv from a NULL-terminated list, the message in `msg`. */

static int parse(const char *const *args, struct lm_daemon_opts *opts,
		 char *msg, size_t msglen)
{
	char *argv[16];
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	int argc = 0, rc;

	argv[argc++] = (char *)"lemuriad";
	while (*args && argc < 15)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	rc = lm_daemon_parse_args(argc, argv, "lemuriad", opts, out, out);
	fclose(out);
	snprintf(msg, msglen, "%s", text ? text : "");
	free(text);
	return rc;
}

static void test_parse_defaults_stay_in_foreground(void)
{
	const char *args[] = { "-c", "l.ini", "-n", "c0", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(args, &o, msg, sizeof(msg)), 0);
	CU_ASSERT_STRING_EQUAL(msg, "");
	CU_ASSERT_STRING_EQUAL(o.layout, "l.ini");
	CU_ASSERT_STRING_EQUAL(o.name, "c0");
	CU_ASSERT_EQUAL(o.level, LM_LOG_INFO);
	CU_ASSERT_FALSE(o.detach);
	CU_ASSERT_FALSE(o.syslog);
	CU_ASSERT_PTR_NULL(o.pidfile);
	CU_ASSERT_PTR_NULL(o.log_file);
	CU_ASSERT_FALSE(o.stop_on_eof);
}

/* --stop-on-eof (lemuria-run --hosts): parsed, and refused with -d,
 * which leaves the daemon no standard input to watch. */
static void test_parse_stop_on_eof(void)
{
	const char *args[] = { "-c", "l.ini", "-n", "r0", "--stop-on-eof",
			       NULL };
	const char *detached[] = { "-c", "l.ini", "-n", "r0", "-d",
				   "--stop-on-eof", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(args, &o, msg, sizeof(msg)), 0);
	CU_ASSERT_TRUE(o.stop_on_eof);
	CU_ASSERT_EQUAL(parse(detached, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--stop-on-eof and -d exclude "
					   "each other"));
}

static void test_parse_short_service_options(void)
{
	const char *args[] = { "-d", "-p", "/run/c0.pid", "-c", "l.ini",
			       "-n", "c0", "--log-file", "/var/log/c0.log",
			       "-l", "debug", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(args, &o, msg, sizeof(msg)), 0);
	CU_ASSERT_TRUE(o.detach);
	CU_ASSERT_STRING_EQUAL(o.pidfile, "/run/c0.pid");
	CU_ASSERT_STRING_EQUAL(o.log_file, "/var/log/c0.log");
	CU_ASSERT_FALSE(o.syslog); /* the file is where the log goes */
	CU_ASSERT_EQUAL(o.level, LM_LOG_DEBUG);
}

static void test_parse_long_service_options(void)
{
	const char *args[] = { "--config=l.ini", "--name", "r0", "--daemon",
			       "--pidfile=/run/r0.pid", "--syslog", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(args, &o, msg, sizeof(msg)), 0);
	CU_ASSERT_TRUE(o.detach);
	CU_ASSERT_TRUE(o.syslog);
	CU_ASSERT_STRING_EQUAL(o.pidfile, "/run/r0.pid");
	CU_ASSERT_PTR_NULL(o.log_file);
}

static void test_parse_detach_alone_logs_to_syslog(void)
{
	const char *args[] = { "-c", "l.ini", "-n", "c0", "-d", NULL };
	const char *fg[] = { "-c", "l.ini", "-n", "c0", "--syslog", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(args, &o, msg, sizeof(msg)), 0);
	CU_ASSERT_TRUE(o.detach);
	CU_ASSERT_TRUE(o.syslog);
	/* --syslog does not detach by itself. */
	CU_ASSERT_EQUAL(parse(fg, &o, msg, sizeof(msg)), 0);
	CU_ASSERT_FALSE(o.detach);
	CU_ASSERT_TRUE(o.syslog);
}

static void test_parse_syslog_and_log_file_exclude(void)
{
	const char *args[] = { "-c", "l.ini", "-n", "c0", "--syslog",
			       "--log-file", "x.log", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(args, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--syslog and --log-file"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "\"x.log\""));
}

static void test_parse_empty_file_names_refused(void)
{
	const char *pid[] = { "-c", "l.ini", "-n", "c0", "-p", "", NULL };
	const char *log[] = { "-c", "l.ini", "-n", "c0", "--log-file=",
			      NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(pid, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "-p needs a file name"));
	CU_ASSERT_EQUAL(parse(log, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--log-file needs a file name"));
}

static void test_parse_missing_value_names_option(void)
{
	const char *shortp[] = { "-c", "l.ini", "-n", "c0", "-p", NULL };
	const char *longl[] = { "-c", "l.ini", "-n", "c0", "--log-file",
				NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(shortp, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "option -p needs a value"));
	CU_ASSERT_EQUAL(parse(longl, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "option --log-file needs a value"));
}

static void test_parse_unknown_option_named(void)
{
	const char *longo[] = { "-c", "l.ini", "-n", "c0", "--detach", NULL };
	const char *shorto[] = { "-c", "l.ini", "-n", "c0", "-dx", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(longo, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "unknown option --detach"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--help"));
	CU_ASSERT_EQUAL(parse(shorto, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "unknown option -x"));
}

static void test_parse_old_errors_kept(void)
{
	const char *level[] = { "-c", "l.ini", "-n", "c0", "-l", "loud",
				NULL };
	const char *noname[] = { "-c", "l.ini", "-d", NULL };
	const char *extra[] = { "-c", "l.ini", "-n", "c0", "stray", NULL };
	struct lm_daemon_opts o;
	char msg[1024];

	CU_ASSERT_EQUAL(parse(level, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "\"loud\""));
	CU_ASSERT_EQUAL(parse(noname, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "-n NAME"));
	CU_ASSERT_EQUAL(parse(extra, &o, msg, sizeof(msg)), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "\"stray\""));
}

static void test_parse_help_lists_service_options(void)
{
	const char *args[] = { "--help", NULL };
	struct lm_daemon_opts o;
	char msg[2048];

	CU_ASSERT_EQUAL(parse(args, &o, msg, sizeof(msg)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--daemon"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--pidfile FILE"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--syslog"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--log-file FILE"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--version"));
}

static void test_parse_version(void)
{
	const char *lng[] = { "--version", NULL }, *shrt[] = { "-V", NULL };
	struct lm_daemon_opts o;
	char msg[256];

	CU_ASSERT_EQUAL(parse(lng, &o, msg, sizeof(msg)), 1);
	CU_ASSERT_STRING_EQUAL(msg, "lemuriad (Lemuria) " LM_VERSION_STRING
				    "\n");
	CU_ASSERT_EQUAL(parse(shrt, &o, msg, sizeof(msg)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "(Lemuria)"));
}

LM_TEST_SUITE("daemon_opts", LM_TEST(test_parse_defaults_stay_in_foreground),
	      LM_TEST(test_parse_stop_on_eof),
	      LM_TEST(test_parse_short_service_options),
	      LM_TEST(test_parse_long_service_options),
	      LM_TEST(test_parse_detach_alone_logs_to_syslog),
	      LM_TEST(test_parse_syslog_and_log_file_exclude),
	      LM_TEST(test_parse_empty_file_names_refused),
	      LM_TEST(test_parse_missing_value_names_option),
	      LM_TEST(test_parse_unknown_option_named),
	      LM_TEST(test_parse_old_errors_kept),
	      LM_TEST(test_parse_help_lists_service_options),
	      LM_TEST(test_parse_version))
