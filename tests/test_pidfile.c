/* Pidfiles (common/pidfile.c): live refused, stale replaced, foreign
 * content kept, removed at release. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lm_error.h"
#include "pidfile.h"
#include "tmpfiles.h"
#include "unit.h"

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

	tf_dir_create();
	tf_path(path, sizeof(path), "p");
	CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), LM_ENOENT);
	tf_put(path, "4242\n");
	CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), 0);
	CU_ASSERT_EQUAL(pid, 4242);
	tf_put(path, "77");
	CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), 0);
	CU_ASSERT_EQUAL(pid, 77);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tf_put(path, bad[i]);
		CU_ASSERT_EQUAL(lm_pidfile_read(path, &pid), LM_EBADMSG);
	}
	tf_dir_remove(names);
}

static void test_pidfile_acquire_writes_own_pid(void)
{
	static const char *const names[] = { "d.pid", NULL };
	char path[128], text[64], want[32], err[256] = "";
	pid_t owner = -1;

	tf_dir_create();
	tf_path(path, sizeof(path), "d.pid");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(owner, 0);
	tf_get(path, text, sizeof(text));
	snprintf(want, sizeof(want), "%ld\n", (long)getpid());
	CU_ASSERT_STRING_EQUAL(text, want);
	/* Taking it again (a restart within the same process) is fine. */
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	tf_dir_remove(names); /* fails if a temporary file was left behind */
}

static void test_pidfile_live_pid_refused(void)
{
	static const char *const names[] = { "d.pid", NULL };
	char path[128], text[64], want[32], err[256] = "";
	pid_t owner = 0;
	int hold;
	pid_t child = live_child(&hold);

	tf_dir_create();
	tf_path(path, sizeof(path), "d.pid");
	snprintf(want, sizeof(want), "%ld\n", (long)child);
	tf_put(path, want);
	CU_ASSERT_EQUAL(lm_pidfile_check(path, &owner, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL(owner, child);
	owner = 0;
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL(owner, child);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "running process"));
	tf_get(path, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, want); /* untouched */
	/* Nor does release remove another process's pidfile. */
	CU_ASSERT_EQUAL(lm_pidfile_release(path), LM_EINVAL);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	end_child(child, hold);
	tf_dir_remove(names);
}

static void test_pidfile_stale_replaced(void)
{
	static const char *const names[] = { "d.pid", NULL };
	char path[128], text[64], want[32], err[256] = "";
	pid_t owner = -1;

	tf_dir_create();
	tf_path(path, sizeof(path), "d.pid");
	snprintf(text, sizeof(text), "%ld\n", (long)dead_pid());
	tf_put(path, text);
	CU_ASSERT_EQUAL(lm_pidfile_check(path, &owner, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(owner, 0);
	tf_get(path, text, sizeof(text));
	snprintf(want, sizeof(want), "%ld\n", (long)getpid());
	CU_ASSERT_STRING_EQUAL(text, want);
	/* An empty file (a writer died before writing) is stale too. */
	tf_put(path, "");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	tf_get(path, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, want);
	tf_dir_remove(names);
}

static void test_pidfile_foreign_file_not_replaced(void)
{
	static const char *const names[] = { "passwd", NULL };
	char path[128], text[64], err[256] = "";
	pid_t owner = -1;

	tf_dir_create();
	tf_path(path, sizeof(path), "passwd");
	tf_put(path, "root:x:0:0:root:/root:/bin/sh\n");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL(owner, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not hold a pid"));
	tf_get(path, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, "root:x:0:0:root:/root:/bin/sh\n");
	CU_ASSERT_EQUAL(lm_pidfile_release(path), LM_EINVAL);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	tf_dir_remove(names);
}

static void test_pidfile_removed_at_release(void)
{
	static const char *const names[] = { NULL };
	char path[128], err[256] = "";
	pid_t owner;

	tf_dir_create();
	tf_path(path, sizeof(path), "d.pid");
	CU_ASSERT_EQUAL(lm_pidfile_acquire(path, &owner, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	CU_ASSERT_EQUAL(lm_pidfile_release(path), 0);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
	CU_ASSERT_EQUAL(lm_pidfile_release(path), 0); /* already gone */
	tf_dir_remove(names);
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

LM_TEST_SUITE("pidfile", LM_TEST(test_pidfile_read_accepts_only_a_pid),
	      LM_TEST(test_pidfile_acquire_writes_own_pid),
	      LM_TEST(test_pidfile_live_pid_refused),
	      LM_TEST(test_pidfile_stale_replaced),
	      LM_TEST(test_pidfile_foreign_file_not_replaced),
	      LM_TEST(test_pidfile_removed_at_release),
	      LM_TEST(test_pidfile_unwritable_directory))
