/* Tests of the daemon shell's service side (common/daemon.c,
 * common/pidfile.c): the command line with its service options and
 * messages, pidfiles (live refused, stale replaced, foreign content
 * kept), the log file that SIGHUP reopens, and the layout check
 * between daemons (a peer daemon with another layout file is refused). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "daemon_opts.h"
#include "lm_error.h"
#include "logsink.h"
#include "pidfile.h"
#include "udp.h"
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
	rc = lm_daemon_parse_args(argc, argv, "lemuriad", opts, out);
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
}

/* ------------------------------------------------------------------ */
/* Files in a private directory. */

static char dir[64];

static void dir_create(void)
{
	snprintf(dir, sizeof(dir), "/tmp/lm-daemon-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
}

static void dir_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Removes the files named (NULL-terminated) and the directory; the
 * rmdir fails, and the test with it, if anything else was left. */
static void dir_remove(const char *const *names)
{
	char path[128];

	for (; *names; names++) {
		dir_path(path, sizeof(path), *names);
		unlink(path);
	}
	CU_ASSERT_EQUAL(rmdir(dir), 0);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/* The whole file (at most len - 1 bytes), "" when missing. */
static void get(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}

/* A child that lives until `*hold` is closed (or 10 s at most). */
static pid_t live_child(int *hold)
{
	int p[2];
	pid_t pid;
	char c;

	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(p[1]);
		alarm(10);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	*hold = p[1];
	return pid;
}

static void end_child(pid_t pid, int hold)
{
	close(hold);
	CU_ASSERT_EQUAL(waitpid(pid, NULL, 0), pid);
}

/* The pid of a process that has exited and been reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		_exit(0);
	CU_ASSERT_EQUAL(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* ------------------------------------------------------------------ */
/* Pidfiles. */

static void test_pidfile_read_accepts_only_a_pid(void)
{
	static const char *const bad[] = { "12abc\n", "-5\n", "0\n",
					   "123\n\n", " 42\n",
					   "99999999999999999999\n" };
	static const char *const names[] = { "p", NULL };
	char path[128];
	pid_t pid = 0;

	dir_create();
	dir_path(path, sizeof(path), "p");
	CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), LM_ENOENT);
	put(path, "4242\n");
	CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), 0);
	CU_ASSERT_EQUAL(pid, 4242);
	put(path, "77");
	CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), 0);
	CU_ASSERT_EQUAL(pid, 77);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(path, bad[i]);
		CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), LM_EBADMSG);
	}
	dir_remove(names);
}

static void test_pidfile_acquire_writes_own_pid(void)
{
	static const char *const names[] = { "d.pid", NULL };
	char path[128], text[64], want[32], err[256] = "";
	pid_t owner = -1;

	dir_create();
	dir_path(path, sizeof(path), "d.pid");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(owner, 0);
	get(path, text, sizeof(text));
	snprintf(want, sizeof(want), "%ld\n", (long)getpid());
	CU_ASSERT_STRING_EQUAL(text, want);
	/* Taking it again (a restart within the same process) is fine. */
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	dir_remove(names); /* fails if a temporary file was left behind */
}

static void test_pidfile_live_pid_refused(void)
{
	static const char *const names[] = { "d.pid", NULL };
	char path[128], text[64], want[32], err[256] = "";
	pid_t owner = 0;
	int hold;
	pid_t child = live_child(&hold);

	dir_create();
	dir_path(path, sizeof(path), "d.pid");
	snprintf(want, sizeof(want), "%ld\n", (long)child);
	put(path, want);
	CU_ASSERT_EQUAL(lm_pidfile_check(path, &owner, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL(owner, child);
	owner = 0;
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL(owner, child);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "running process"));
	get(path, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, want); /* untouched */
	/* Nor does release remove another process's pidfile. */
	CU_ASSERT_EQUAL(lm_pidfile_release(path), LM_EINVAL);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	end_child(child, hold);
	dir_remove(names);
}

static void test_pidfile_stale_replaced(void)
{
	static const char *const names[] = { "d.pid", NULL };
	char path[128], text[64], want[32], err[256] = "";
	pid_t owner = -1;

	dir_create();
	dir_path(path, sizeof(path), "d.pid");
	snprintf(text, sizeof(text), "%ld\n", (long)dead_pid());
	put(path, text);
	CU_ASSERT_EQUAL(lm_pidfile_check(path, &owner, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(owner, 0);
	get(path, text, sizeof(text));
	snprintf(want, sizeof(want), "%ld\n", (long)getpid());
	CU_ASSERT_STRING_EQUAL(text, want);
	/* An empty file (a writer died before writing) is stale too. */
	put(path, "");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	get(path, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, want);
	dir_remove(names);
}

static void test_pidfile_foreign_file_not_replaced(void)
{
	static const char *const names[] = { "passwd", NULL };
	char path[128], text[64], err[256] = "";
	pid_t owner = -1;

	dir_create();
	dir_path(path, sizeof(path), "passwd");
	put(path, "root:x:0:0:root:/root:/bin/sh\n");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL(owner, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not hold a pid"));
	get(path, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, "root:x:0:0:root:/root:/bin/sh\n");
	CU_ASSERT_EQUAL(lm_pidfile_release(path), LM_EINVAL);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	dir_remove(names);
}

static void test_pidfile_removed_at_release(void)
{
	static const char *const names[] = { NULL };
	char path[128], err[256] = "";
	pid_t owner;

	dir_create();
	dir_path(path, sizeof(path), "d.pid");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	CU_ASSERT_EQUAL(lm_pidfile_release(path), 0);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
	CU_ASSERT_EQUAL(lm_pidfile_release(path), 0); /* already gone */
	dir_remove(names);
}

static void test_pidfile_unwritable_directory(void)
{
	char err[256] = "";
	pid_t owner;

	CU_ASSERT_EQUAL(lm_pidfile_acquire("/nonexistent-lm-dir/d.pid",
					   &owner, err, sizeof(err)),
			LM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent-lm-dir/d.pid"));
}

/* ------------------------------------------------------------------ */
/* Log destinations. */

static void test_log_file_reopened_after_move(void)
{
	static const char *const names[] = { "d.log", "d.log.1", NULL };
	enum lm_log_level saved = lm_log_get_level();
	char path[128], moved[128], text[4096], err[256] = "";

	dir_create();
	dir_path(path, sizeof(path), "d.log");
	dir_path(moved, sizeof(moved), "d.log.1");
	put(path, "kept from before\n");
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

	get(moved, text, sizeof(text));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "kept from before\n")); /* append */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " t0: info: first 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " t0: warn: still to the moved"));
	CU_ASSERT_PTR_NULL(strstr(text, "not at this level"));
	CU_ASSERT_PTR_NULL(strstr(text, "after the reopen"));
	get(path, text, sizeof(text));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " t0: error: after the reopen\n"));
	CU_ASSERT_PTR_NULL(strstr(text, "first"));
	/* Lines start with a date: "YYYY-MM-DD HH:MM:SS.mmm ". */
	CU_ASSERT(strlen(text) > 24 && text[4] == '-' && text[10] == ' ' &&
		  text[19] == '.');
	dir_remove(names);
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

/* ------------------------------------------------------------------ */
/* Layout check between daemons: a reflector and a lemuriad in this
 * process, on one event loop, each with a stub protocol. */

struct stub {
	struct lm_msg_out out;
	void *ctx;
	unsigned handled, aborts;
	uint16_t last_type, last_from;
	char reason[LM_MSG_REASON_MAX + 1];
};

static struct stub stubs[2]; /* [0] reflector r0 (node 1), [1] c0 */

static void *stub_create(const struct lm_layout *layout, const char *name,
			 uint16_t self_id, const struct lm_msg_out *out,
			 void *out_ctx, char *err, size_t errlen)
{
	struct stub *st = &stubs[self_id == 1 ? 0 : 1];

	(void)layout;
	(void)name;
	(void)err;
	(void)errlen;
	memset(st, 0, sizeof(*st));
	st->out = *out;
	st->ctx = out_ctx;
	return st;
}

static void stub_destroy(void *machine)
{
	(void)machine;
}

static void stub_handle(void *machine, uint16_t from,
			enum lm_rel_msg_kind kind, uint32_t req_id,
			const struct lm_msg *m)
{
	struct stub *st = machine;

	(void)kind;
	(void)req_id;
	st->handled++;
	st->last_type = m->type;
	st->last_from = from;
	if (m->type == LM_MSG_ABORT) {
		st->aborts++;
		snprintf(st->reason, sizeof(st->reason), "%.*s",
			 (int)m->data_len, (const char *)m->data);
	}
}

static const struct lm_daemon_protocol stub_proto = {
	.create = stub_create,
	.destroy = stub_destroy,
	.handle = stub_handle,
};

static uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char err[128];
	int fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = lm_udp_bind(&a, err, sizeof(err));
	if (fd < 0)
		return 0;
	close(fd);
	return ntohs(a.sin_port);
}

/* Writes a one-reflector, two-cluster layout to `path`; c1 has
 * `c1_clients` clients. */
static int write_layout(const char *path, uint16_t pr, uint16_t pc,
			int c1_clients)
{
	char key[PATH_MAX];
	FILE *f = fopen(path, "w");

	if (!f || !realpath("conf/demo.key", key)) {
		if (f)
			fclose(f);
		return -1;
	}
	fprintf(f,
		"[lemuria]\nshared_size = 1M\npage_size = 4096\n"
		"base = 0x500000000000\nsecret_file = %s\n"
		"[reflector r0]\nlisten = 127.0.0.1:%u\n"
		"[cluster c0]\nreflector = r0\nlisten = 127.0.0.1:%u\n"
		"clients = 2\ncache = 1M\n"
		"[cluster c1]\nreflector = r0\nlisten = 127.0.0.1:%u\n"
		"clients = %d\ncache = 1M\n",
		key, pr, pc, (unsigned)(pc + 1), c1_clients);
	return fclose(f) ? -1 : 0;
}

static struct {
	char line[64][512];
	enum lm_log_level level[64];
	size_t n;
} lc_cap;

static void lc_sink(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	if (lc_cap.n < 64) {
		snprintf(lc_cap.line[lc_cap.n], sizeof(lc_cap.line[0]), "%s",
			 msg);
		lc_cap.level[lc_cap.n] = level;
		lc_cap.n++;
	}
}

/* The error line that contains `s`, or NULL. */
static const char *lc_error(const char *s)
{
	for (size_t i = 0; i < lc_cap.n; i++)
		if (lc_cap.level[i] == LM_LOG_ERROR &&
		    strstr(lc_cap.line[i], s))
			return lc_cap.line[i];
	return NULL;
}

/* Runs the loop until `*count` reaches `want` (at most 2 s). */
static void spin_until(struct event_base *base, const unsigned *count,
		       unsigned want)
{
	for (int i = 0; i < 400 && *count < want; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(5000);
	}
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Reflector r0 of layout la with protocol pr, lemuriad c0 of lb with
 * stub_proto, both on base. */
static void daemon_pair(struct event_base *base, const struct lm_layout *la,
			const struct lm_layout *lb,
			const struct lm_daemon_protocol *pr, lm_daemon **r,
			lm_daemon **c)
{
	char err[256];

	*r = lm_daemon_create(base, la, LM_ROLE_REFLECTOR, "r0", err,
			      sizeof(err));
	*c = lm_daemon_create(base, lb, LM_ROLE_LEMURIAD, "c0", err,
			      sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(*r);
	CU_ASSERT_PTR_NOT_NULL_FATAL(*c);
	CU_ASSERT_FATAL(lm_daemon_start_protocol(*r, pr, err,
						 sizeof(err)) == 0 &&
			lm_daemon_start_protocol(*c, &stub_proto, err,
						 sizeof(err)) == 0);
}

/* Reflector from layout A; lemuriad c0 from layout B (A, or A with c1
 * one client smaller).  c0 sends r0 a FETCH of run 7, twice. */
static void layout_pair(bool differ)
{
	char tdir[] = "/tmp/lm-layoutcheck-XXXXXX", a[64], b[64], err[256];
	uint16_t pr = free_port(), pc = free_port();
	struct lm_layout *la = NULL, *lb = NULL;
	struct event_base *base = event_base_new();
	lm_daemon *r = NULL, *c = NULL;
	struct lm_msg fetch = { .type = LM_MSG_FETCH, .run = 7, .page = 3 };
	enum lm_log_level saved = lm_log_get_level();

	CU_ASSERT_FATAL(pr && pc && pc + 1 != pr && base && mkdtemp(tdir));
	snprintf(a, sizeof(a), "%s/a.ini", tdir);
	snprintf(b, sizeof(b), "%s/b.ini", tdir);
	CU_ASSERT_FATAL(write_layout(a, pr, pc, 2) == 0);
	CU_ASSERT_FATAL(write_layout(b, pr, pc, differ ? 1 : 2) == 0);
	CU_ASSERT_FATAL(lm_layout_load(a, &la, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(lm_layout_load(b, &lb, err, sizeof(err)) == 0);
	CU_ASSERT_EQUAL(la->hash == lb->hash, !differ);
	memset(&lc_cap, 0, sizeof(lc_cap));
	lm_log_set_level(LM_LOG_WARN);
	lm_log_set_sink(lc_sink, NULL);
	lm_log_limit_reset();
	daemon_pair(base, la, lb, &stub_proto, &r, &c);

	stubs[1].out.request(stubs[1].ctx, 1, 1, &fetch);
	spin_until(base, &stubs[0].handled, 1);
	if (!differ) {
		/* delivered as sent; nothing refused, nothing logged */
		CU_ASSERT_EQUAL(stubs[0].handled, 1);
		CU_ASSERT_EQUAL(stubs[0].last_type, LM_MSG_FETCH);
		CU_ASSERT_EQUAL(stubs[0].last_from, 2);
		CU_ASSERT_EQUAL(lm_daemon_stats(r)->layout_mismatches, 0);
		CU_ASSERT_EQUAL(lm_daemon_stats(c)->layout_mismatches, 0);
		CU_ASSERT_EQUAL(lc_cap.n, 0);
		goto out;
	}
	/* r0 refused the FETCH and aborted run 7 in its protocol. */
	CU_ASSERT_EQUAL(stubs[0].handled, 1);
	CU_ASSERT_EQUAL(stubs[0].aborts, 1);
	CU_ASSERT_EQUAL(stubs[0].last_from, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(stubs[0].reason,
				      "lemuriad c0 (node 2) runs a "
				      "different layout than reflector r0"));
	CU_ASSERT_EQUAL(lm_daemon_stats(r)->layout_mismatches, 1);
	CU_ASSERT_EQUAL(lm_daemon_stats(r)->msgs_refused_layout, 1);
	CU_ASSERT_PTR_NOT_NULL(lc_error("layout mismatch: lemuriad c0 "
					"(node 2)"));
	/* r0's answering PING told c0 too. */
	CU_ASSERT_EQUAL(lm_daemon_stats(c)->layout_mismatches, 1);
	CU_ASSERT_PTR_NOT_NULL(lc_error("layout mismatch: reflector r0 "
					"(node 1)"));
	{
		char want[128];

		snprintf(want, sizeof(want), "(hash %016llx, ours %016llx",
			 (unsigned long long)la->hash,
			 (unsigned long long)lb->hash);
		CU_ASSERT_PTR_NOT_NULL(lc_error(want));
	}
	/* c0 does not send to r0 again; its own protocol gets the ABORT. */
	stubs[1].out.request(stubs[1].ctx, 1, 2, &fetch);
	spin_until(base, &stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(stubs[1].last_from, 1);
	CU_ASSERT_EQUAL(lm_daemon_stats(c)->msgs_refused_layout, 1);
	CU_ASSERT_EQUAL(stubs[0].handled, 1);
	/* once per run */
	stubs[1].out.request(stubs[1].ctx, 1, 3, &fetch);
	spin_until(base, &stubs[1].aborts, 2);
	CU_ASSERT_EQUAL(stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(lm_daemon_stats(r)->layout_mismatches, 1);
out:
	lm_daemon_destroy(c);
	lm_daemon_destroy(r);
	event_base_free(base);
	lm_log_set_sink(NULL, NULL);
	lm_log_limit_reset();
	lm_log_set_level(saved);
	lm_layout_free(la);
	lm_layout_free(lb);
	unlink(a);
	unlink(b);
	rmdir(tdir);
}

static void test_layout_same_passes(void)
{
	layout_pair(false);
}

static void test_layout_mismatch_refused_and_aborts(void)
{
	layout_pair(true);
}

/* A reflector running protocol `pr` and a stub lemuriad on one layout
 * in a directory of their own, for the tests of the daemon's hooks. */
struct hook_pair {
	char tdir[32], path[64];
	struct lm_layout *l;
	struct event_base *base;
	lm_daemon *r, *c;
};

static void hook_pair_open(struct hook_pair *hp,
			   const struct lm_daemon_protocol *pr)
{
	uint16_t preflector = free_port(), pcluster = free_port();
	char err[256];

	memset(hp, 0, sizeof(*hp));
	snprintf(hp->tdir, sizeof(hp->tdir), "/tmp/lm-hooks-XXXXXX");
	hp->base = event_base_new();
	CU_ASSERT_FATAL(preflector && pcluster && pcluster + 1 != preflector &&
			hp->base && mkdtemp(hp->tdir));
	snprintf(hp->path, sizeof(hp->path), "%s/a.ini", hp->tdir);
	CU_ASSERT_FATAL(write_layout(hp->path, preflector, pcluster, 2) == 0);
	CU_ASSERT_FATAL(lm_layout_load(hp->path, &hp->l, err,
				       sizeof(err)) == 0);
	daemon_pair(hp->base, hp->l, hp->l, pr, &hp->r, &hp->c);
}

static void hook_pair_close(struct hook_pair *hp)
{
	lm_daemon_destroy(hp->c);
	lm_daemon_destroy(hp->r);
	event_base_free(hp->base);
	lm_layout_free(hp->l);
	unlink(hp->path);
	rmdir(hp->tdir);
}

/* A machine that puts work off: a FETCH of page 3 asks for three
 * background calls. */
static unsigned bg_calls, bg_left;

static bool stub_background(void *machine)
{
	(void)machine;
	bg_calls++;
	return bg_left && --bg_left > 0;
}

static void bg_handle(void *machine, uint16_t from,
		      enum lm_rel_msg_kind kind, uint32_t req_id,
		      const struct lm_msg *m)
{
	struct stub *st = machine;

	stub_handle(machine, from, kind, req_id, m);
	if (m->type == LM_MSG_FETCH && m->page == 3) {
		bg_left = 3;
		st->out.later(st->ctx);
	}
}

static const struct lm_daemon_protocol bg_proto = {
	.create = stub_create,
	.destroy = stub_destroy,
	.handle = bg_handle,
	.background = stub_background,
};

/* The background hook runs when the machine asked for it, again while
 * it says there is more, and not otherwise; messages are still served
 * in between. */
static void test_background_runs_when_asked(void)
{
	struct hook_pair hp;
	struct event_base *base;
	struct lm_msg fetch = { .type = LM_MSG_FETCH, .run = 7, .page = 4 };

	hook_pair_open(&hp, &bg_proto);
	base = hp.base;
	bg_calls = bg_left = 0;
	/* page 4: nothing put off, no call */
	stubs[1].out.request(stubs[1].ctx, 1, 1, &fetch);
	spin_until(base, &stubs[0].handled, 1);
	CU_ASSERT_EQUAL(stubs[0].handled, 1);
	CU_ASSERT_EQUAL(bg_calls, 0);
	/* page 3: three calls, the last saying it is done */
	fetch.page = 3;
	stubs[1].out.request(stubs[1].ctx, 1, 2, &fetch);
	spin_until(base, &bg_calls, 3);
	CU_ASSERT_EQUAL(stubs[0].handled, 2);
	CU_ASSERT_EQUAL(bg_calls, 3);
	fetch.page = 4;
	stubs[1].out.request(stubs[1].ctx, 1, 3, &fetch);
	spin_until(base, &stubs[0].handled, 3);
	CU_ASSERT_EQUAL(stubs[0].handled, 3);
	CU_ASSERT_EQUAL(bg_calls, 3);
	hook_pair_close(&hp);
}

/* A machine that counts the ticks of the daemon's clock. */
static unsigned tick_calls;

static void stub_tick(void *machine)
{
	(void)machine;
	tick_calls++;
}

static const struct lm_daemon_protocol tick_proto = {
	.create = stub_create,
	.destroy = stub_destroy,
	.handle = stub_handle,
	.tick = stub_tick,
};

/* The tick hook runs about once a second (the keepalive timer), and only
 * while a run is on: before any message of a run, nobody can wait. */
static void test_tick_runs_while_a_run_is_on(void)
{
	struct hook_pair hp;
	struct event_base *base;
	struct lm_msg fetch = { .type = LM_MSG_FETCH, .run = 7, .page = 4 };
	unsigned never = 0;

	hook_pair_open(&hp, &tick_proto);
	base = hp.base;
	tick_calls = 0;
	/* 1.2 s without a run: the timer fires, the hook does not run */
	for (int i = 0; i < 240; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(5000);
	}
	CU_ASSERT_EQUAL(tick_calls, 0);
	stubs[1].out.request(stubs[1].ctx, 1, 1, &fetch);
	spin_until(base, &stubs[0].handled, 1);
	CU_ASSERT_EQUAL_FATAL(stubs[0].handled, 1);
	spin_until(base, &tick_calls, 1); /* at most 2 s: a tick is due */
	CU_ASSERT(tick_calls >= 1);
	spin_until(base, &never, 1); /* 2 s more: one or two ticks, not a
					stream of them */
	CU_ASSERT(tick_calls >= 2 && tick_calls <= 4);
	hook_pair_close(&hp);
}

/* ------------------------------------------------------------------ */
/* Backlog: messages the transport has no room for wait, in order. */

#define BL_MAX 128
static struct {
	unsigned n;                /* CREATEs and ENDs r0 handled */
	uint32_t rank[BL_MAX];     /* in the order they came */
	int intact[BL_MAX];
} bl;

static void bl_handle(void *machine, uint16_t from,
		      enum lm_rel_msg_kind kind, uint32_t req_id,
		      const struct lm_msg *m)
{
	stub_handle(machine, from, kind, req_id, m);
	if ((m->type != LM_MSG_CREATE && m->type != LM_MSG_END) ||
	    bl.n >= BL_MAX)
		return;
	bl.rank[bl.n] = m->rank;
	bl.intact[bl.n] = m->type == LM_MSG_END ||
			  (m->data_len && m->data[0] == (uint8_t)m->rank &&
			   m->data[m->data_len - 1] == (uint8_t)(m->rank + 1));
	bl.n++;
}

static const struct lm_daemon_protocol bl_proto = {
	.create = stub_create,
	.destroy = stub_destroy,
	.handle = bl_handle,
};

/* c0 sends r0 a CREATE of `len` bytes for rank `rank`, run 7. */
static void bl_send_create(uint8_t *buf, size_t len, uint32_t rank)
{
	struct lm_msg m = { .type = LM_MSG_CREATE, .run = 7, .rank = rank,
			    .offset = 64, .data = buf, .data_len = len };

	buf[0] = (uint8_t)rank;
	buf[len - 1] = (uint8_t)(rank + 1);
	stubs[1].out.send(stubs[1].ctx, 1, &m);
}

/* Runs the loop until `*count` reaches `want`, at most `secs` seconds. */
static void loop_until(struct event_base *base, const unsigned *count,
		       unsigned want, int secs)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		event_base_loop(base, EVLOOP_ONCE);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (*count < want && t.tv_sec - t0.tv_sec < secs);
}

/* Six CREATEs of 7 MiB in a row, more than the 32 MiB send queue takes,
 * then an END: the last two CREATEs wait in c0's backlog, the END behind
 * them, and r0 gets all seven whole and in order (issue 38: the fifth
 * and sixth were dropped with a log line). */
static void test_backlog_keeps_order_when_queue_full(void)
{
	const size_t len = 7u << 20;
	struct lm_msg end = { .type = LM_MSG_END, .run = 7, .rank = 6 };
	struct hook_pair hp;
	uint8_t *buf = calloc(1, len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	memset(&bl, 0, sizeof(bl));
	hook_pair_open(&hp, &bl_proto);
	for (uint32_t r = 0; r < 6; r++)
		bl_send_create(buf, len, r);
	stubs[1].out.send(stubs[1].ctx, 1, &end);
	CU_ASSERT(lm_daemon_stats(hp.c)->sends_backlogged >= 2);
	CU_ASSERT(lm_daemon_stats(hp.c)->backlog_peak_bytes >= len);
	loop_until(hp.base, &bl.n, 7, 30);
	CU_ASSERT_EQUAL(bl.n, 7);
	for (unsigned i = 0; i < bl.n; i++) {
		CU_ASSERT_EQUAL(bl.rank[i], i);
		CU_ASSERT(bl.intact[i]);
	}
	CU_ASSERT_EQUAL(lm_daemon_stats(hp.c)->sends_failed, 0);
	CU_ASSERT_EQUAL(stubs[1].aborts, 0);
	hook_pair_close(&hp);
	free(buf);
}

/* Beyond the backlog's bound a message is not sent and its run is
 * aborted at the sender, naming the message, the peer and the cause. */
static void test_backlog_bound_aborts_the_run(void)
{
	const size_t len = 1u << 20;
	const unsigned total = (32u + LM_DAEMON_BACKLOG_BYTES / len) + 4;
	enum lm_log_level saved = lm_log_get_level();
	struct hook_pair hp;
	uint8_t *buf = calloc(1, len);
	uint64_t failed;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	memset(&bl, 0, sizeof(bl));
	memset(&lc_cap, 0, sizeof(lc_cap));
	lm_log_set_level(LM_LOG_WARN);
	lm_log_set_sink(lc_sink, NULL);
	lm_log_limit_reset();
	hook_pair_open(&hp, &bl_proto);
	for (uint32_t r = 0; r < total; r++)
		bl_send_create(buf, len, r);
	failed = lm_daemon_stats(hp.c)->sends_failed;
	CU_ASSERT(failed >= 1 && failed < total);
	CU_ASSERT(lm_daemon_stats(hp.c)->backlog_peak_bytes <=
		  LM_DAEMON_BACKLOG_BYTES);
	loop_until(hp.base, &stubs[1].aborts, 1, 5);
	CU_ASSERT_EQUAL(stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(stubs[1].last_from, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(stubs[1].reason,
				      "lemuriad c0: CREATE to reflector r0 "
				      "(node 1) not sent: its send queue is "
				      "full"));
	CU_ASSERT_PTR_NOT_NULL(lc_error("CREATE to reflector r0 (node 1) "
					"not sent"));
	hook_pair_close(&hp);
	lm_log_set_sink(NULL, NULL);
	lm_log_limit_reset();
	lm_log_set_level(saved);
	free(buf);
}

LM_TEST_SUITE("daemon", LM_TEST(test_parse_defaults_stay_in_foreground),
	      LM_TEST(test_parse_short_service_options),
	      LM_TEST(test_parse_long_service_options),
	      LM_TEST(test_parse_detach_alone_logs_to_syslog),
	      LM_TEST(test_parse_syslog_and_log_file_exclude),
	      LM_TEST(test_parse_empty_file_names_refused),
	      LM_TEST(test_parse_missing_value_names_option),
	      LM_TEST(test_parse_unknown_option_named),
	      LM_TEST(test_parse_old_errors_kept),
	      LM_TEST(test_parse_help_lists_service_options),
	      LM_TEST(test_pidfile_read_accepts_only_a_pid),
	      LM_TEST(test_pidfile_acquire_writes_own_pid),
	      LM_TEST(test_pidfile_live_pid_refused),
	      LM_TEST(test_pidfile_stale_replaced),
	      LM_TEST(test_pidfile_foreign_file_not_replaced),
	      LM_TEST(test_pidfile_removed_at_release),
	      LM_TEST(test_pidfile_unwritable_directory),
	      LM_TEST(test_log_file_reopened_after_move),
	      LM_TEST(test_log_reopen_without_file),
	      LM_TEST(test_log_file_unopenable_named),
	      LM_TEST(test_syslog_priorities),
	      LM_TEST(test_layout_same_passes),
	      LM_TEST(test_layout_mismatch_refused_and_aborts),
	      LM_TEST(test_background_runs_when_asked),
	      LM_TEST(test_tick_runs_while_a_run_is_on),
	      LM_TEST(test_backlog_keeps_order_when_queue_full),
	      LM_TEST(test_backlog_bound_aborts_the_run))
