/* Tests of tools/launch.c: rank selection, environment, program lookup,
 * and the supervision of ranks and daemons with /bin/sh programs.  Every
 * child is bounded (sleep 30 at most, always killed) and every test
 * asserts how long the launcher took. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "../tools/launch.h"
#include "lm_error.h"
#include "unit.h"

extern char **environ;

static char tmpdir[64];

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/lm-launch-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
}

static void tmp_path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmpdir, name);
}

static void write_file(const char *name, const char *text, mode_t mode)
{
	char path[128];
	FILE *f;

	tmp_path(path, sizeof(path), name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

/* Removes the files the tests create, then the directory. */
static void remove_tmpdir(void)
{
	static const char *const names[] = {
		"reflector", "lemuriad", "plain", "sleeper", "layout.ini",
		"out.0", "out.1", "out.2", "out.3"
	};
	char path[128];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		tmp_path(path, sizeof(path), names[i]);
		unlink(path);
	}
	rmdir(tmpdir);
}

static int run_sh(const char *script, const uint32_t *ranks, size_t n,
		  unsigned timeout_ms, unsigned grace_ms,
		  struct lm_launch_result *res, double *secs)
{
	char *argv[] = { "/bin/sh", "-c", (char *)script, tmpdir, NULL };
	struct lm_launch o = {
		.argv = argv, .environ_base = environ, .ranks = ranks,
		.nranks = n, .layout_abs = "/etc/lemuria/test.ini",
		.run = 1234567890123ull, .timeout_ms = timeout_ms,
		.grace_ms = grace_ms,
	};
	uint64_t t0 = lm_now_us();
	int st = lm_launch_run(&o, res);

	*secs = (double)(lm_now_us() - t0) / 1e6;
	return st;
}

/* The CPUs of a set as "a b c", for messages. */
static const char *cpus_str(const cpu_set_t *s, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE && at < len; c++)
		if (CPU_ISSET(c, s))
			at += (size_t)snprintf(buf + at, len - at, "%s%d",
					       at ? " " : "", c);
	return buf;
}

/* Places the clusters of `layout` (or the named ones) on the CPUs listed
 * in `allowed` and checks each cluster's set against want[i] ("" for
 * none). */
static void check_placement(const char *layout, const char *const *names,
			    size_t nnames, const int *allowed, size_t nallowed,
			    const char *const *want)
{
	struct lm_layout *l = NULL;
	cpu_set_t a, sets[8];
	char err[256], buf[128];

	CU_ASSERT_EQUAL_FATAL(lm_layout_load(layout, &l, err, sizeof(err)), 0);
	CU_ASSERT_FATAL(l->nclusters <= 8);
	CPU_ZERO(&a);
	for (size_t i = 0; i < nallowed; i++)
		CPU_SET(allowed[i], &a);
	CU_ASSERT_EQUAL(lm_launch_placement(l, names, nnames, &a, sets, err,
					    sizeof(err)), 0);
	for (size_t c = 0; c < l->nclusters; c++) {
		cpus_str(&sets[c], buf, sizeof(buf));
		if (strcmp(buf, want[c]) != 0)
			fprintf(stderr, "%s cluster %zu: CPUs \"%s\", wanted "
					"\"%s\"\n", layout, c, buf, want[c]);
		CU_ASSERT_STRING_EQUAL(buf, want[c]);
	}
	lm_layout_free(l);
}

static void test_placement_shares_out_the_cpus(void)
{
	const int two[] = { 0, 1 }, eight[] = { 0, 1, 2, 3, 4, 5, 6, 7 },
		  sparse[] = { 3, 5, 9 }, one[] = { 2 };
	const char *c1[] = { "c1" }, *c9[] = { "c9" };
	struct lm_layout *l = NULL;
	cpu_set_t none, sets[2];
	char err[256];

	/* one CPU per cluster, as on the 2-core machines */
	check_placement("conf/4+4.ini", NULL, 0, two, 2,
			(const char *[]){ "0", "1" });
	/* more CPUs than clusters: every other one */
	check_placement("conf/4+4.ini", NULL, 0, eight, 8,
			(const char *[]){ "0 2 4 6", "1 3 5 7" });
	/* the launcher's own CPUs, whatever their numbers */
	check_placement("conf/4+4.ini", NULL, 0, sparse, 3,
			(const char *[]){ "3 9", "5" });
	check_placement("conf/4+4.ini", NULL, 0, one, 1,
			(const char *[]){ "2", "2" });
	/* fewer CPUs than clusters: round robin */
	check_placement("conf/8+8+8+8.ini", NULL, 0, two, 2,
			(const char *[]){ "0", "1", "0", "1" });
	/* only the clusters started here count */
	check_placement("conf/4+4.ini", c1, 1, two, 2,
			(const char *[]){ "", "0 1" });

	CU_ASSERT_EQUAL_FATAL(lm_layout_load("conf/4+4.ini", &l, err,
					     sizeof(err)), 0);
	CPU_ZERO(&none);
	CU_ASSERT_EQUAL(lm_launch_placement(l, NULL, 0, &none, sets, err,
					    sizeof(err)), LM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no CPU"));
	CU_ASSERT_EQUAL(lm_launch_placement(l, c9, 1, &sets[0], sets, err,
					    sizeof(err)), LM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "c9"));
	lm_layout_free(l);
}

static void test_ranks_all_or_by_cluster(void)
{
	struct lm_layout *l = NULL;
	const char *c1[] = { "c1" }, *bad[] = { "c9" }, *twice[] = { "c0",
								    "c0" };
	uint32_t *r = NULL;
	size_t n = 0;
	char err[256];

	CU_ASSERT_EQUAL_FATAL(lm_layout_load("conf/4+4.ini", &l, err,
					     sizeof(err)), 0);
	CU_ASSERT_EQUAL(lm_launch_ranks(l, NULL, 0, &r, &n, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(n, 8);
	for (size_t i = 0; r && i < n; i++)
		CU_ASSERT_EQUAL(r[i], i);
	free(r);
	r = NULL;
	CU_ASSERT_EQUAL(lm_launch_ranks(l, c1, 1, &r, &n, err, sizeof(err)),
			0);
	CU_ASSERT_EQUAL(n, 4);
	for (size_t i = 0; r && i < n; i++)
		CU_ASSERT_EQUAL(r[i], 4 + i);
	free(r);
	CU_ASSERT_EQUAL(lm_launch_ranks(l, bad, 1, &r, &n, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "c9"));
	CU_ASSERT_EQUAL(lm_launch_ranks(l, twice, 2, &r, &n, err,
					sizeof(err)), LM_EINVAL);
	lm_layout_free(l);
}

static void test_env_replaces_lm_variables(void)
{
	char *base[] = { "PATH=/bin", "LM_RANK=99", "HOME=/x",
			 "LM_RUN=1", "LM_RANKING=keep", NULL };
	char **env = lm_launch_env(base, "/abs/l.ini", 3, UINT64_MAX);
	int rank = 0, run = 0, layout = 0, path = 0, keep = 0, n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	for (; env[n]; n++) {
		rank += strcmp(env[n], "LM_RANK=3") == 0;
		run += strcmp(env[n], "LM_RUN=18446744073709551615") == 0;
		layout += strcmp(env[n], "LM_LAYOUT=/abs/l.ini") == 0;
		path += strcmp(env[n], "PATH=/bin") == 0;
		keep += strcmp(env[n], "LM_RANKING=keep") == 0;
	}
	CU_ASSERT(rank == 1 && run == 1 && layout == 1 && path == 1 &&
		  keep == 1);
	CU_ASSERT_EQUAL(n, 6); /* PATH HOME LM_RANKING + the three */
	lm_launch_env_free(env);
	lm_launch_env_free(NULL);
}

static void test_run_ids_grow(void)
{
	uint64_t a = lm_launch_run_id(), b;

	usleep(2000);
	b = lm_launch_run_id();
	CU_ASSERT(b > a);
	CU_ASSERT(a > 1600000000ull * 1000000ull * 1000ull); /* after 2020 */
}

static void test_find_program_prefers_own_dir(void)
{
	char out[256], path[256], want[256];

	make_tmpdir();
	write_file("reflector", "#!/bin/sh\n", 0755);
	write_file("plain", "not a program\n", 0644);
	tmp_path(want, sizeof(want), "reflector");
	CU_ASSERT_EQUAL(lm_launch_find_program("reflector", tmpdir, "/bin",
					       out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, want);
	/* not next to us: found through PATH */
	snprintf(path, sizeof(path), "/nonexistent:%s", tmpdir);
	CU_ASSERT_EQUAL(lm_launch_find_program("reflector", "/nonexistent",
					       path, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, want);
	CU_ASSERT_EQUAL(lm_launch_find_program("plain", tmpdir, NULL, out,
					       sizeof(out)), LM_ENOENT);
	CU_ASSERT_EQUAL(lm_launch_find_program("lemuriad", tmpdir, "/nope",
					       out, sizeof(out)), LM_ENOENT);
	CU_ASSERT_EQUAL(lm_launch_self_dir(out, sizeof(out)), 0);
	CU_ASSERT(out[0] == '/');
	remove_tmpdir();
}

static void test_all_ranks_succeed(void)
{
	const uint32_t ranks[] = { 0, 1, 2, 3 };
	struct lm_launch_result res;
	double secs;

	CU_ASSERT_EQUAL(run_sh("exit 0", ranks, 4, 0, 0, &res, &secs), 0);
	CU_ASSERT_EQUAL(res.status, 0);
	CU_ASSERT_EQUAL(res.failed_rank, -1);
	CU_ASSERT_STRING_EQUAL(res.msg, "");
	CU_ASSERT(secs < 5);
}

/* Each rank runs on the CPUs it was given: rank 0 on the last CPU this
 * process may use, rank 1 on the first (the same one on a 1-CPU host). */
static void test_ranks_run_on_their_cpus(void)
{
	const uint32_t ranks[] = { 0, 1 };
	cpu_set_t allowed, sets[2];
	int first = -1, last = -1;
	char script[512];
	char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct lm_launch o = {
		.argv = argv, .environ_base = environ, .ranks = ranks,
		.nranks = 2, .rank_cpus = sets,
		.layout_abs = "/etc/lemuria/test.ini", .run = 1,
		.timeout_ms = 10000,
	};
	struct lm_launch_result res;

	CU_ASSERT_EQUAL_FATAL(sched_getaffinity(0, sizeof(allowed), &allowed),
			      0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed)) {
			if (first < 0)
				first = c;
			last = c;
		}
	CU_ASSERT_FATAL(first >= 0);
	CPU_ZERO(&sets[0]);
	CPU_SET(last, &sets[0]);
	CPU_ZERO(&sets[1]);
	CPU_SET(first, &sets[1]);
	/* exit 0 only when /proc shows exactly the CPU this rank was given */
	snprintf(script, sizeof(script),
		 "case $LM_RANK in 0) w=%d ;; *) w=%d ;; esac; "
		 "got=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "
		 "/proc/self/status); [ \"$got\" = \"$w\" ] || "
		 "{ echo \"rank $LM_RANK on $got, wanted $w\" >&2; exit 5; }",
		 last, first);
	CU_ASSERT_EQUAL(lm_launch_run(&o, &res), 0);
	CU_ASSERT_STRING_EQUAL(res.msg, "");
}

/* With `batch` the ranks run under SCHED_BATCH (policy 3 in field 41 of
 * /proc/PID/stat); without it, under the launcher's own policy. */
static void test_ranks_run_as_batch(void)
{
	const uint32_t ranks[] = { 0, 1 };
	char script[256];
	char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct lm_launch o = {
		.argv = argv, .environ_base = environ, .ranks = ranks,
		.nranks = 2, .layout_abs = "/etc/lemuria/test.ini", .run = 1,
		.timeout_ms = 10000,
	};
	struct lm_launch_result res;
	int own = sched_getscheduler(0);

	CU_ASSERT_FATAL(own >= 0);
	for (int batch = 0; batch < 2; batch++) {
		snprintf(script, sizeof(script),
			 "p=$(awk '{ print $41 }' /proc/self/stat); "
			 "[ \"$p\" = %d ] || { echo \"rank $LM_RANK: policy "
			 "$p, wanted %d\" >&2; exit 5; }",
			 batch ? SCHED_BATCH : own, batch ? SCHED_BATCH : own);
		o.batch = batch;
		CU_ASSERT_EQUAL(lm_launch_run(&o, &res), 0);
		CU_ASSERT_STRING_EQUAL(res.msg, "");
	}
}

static void test_one_fails_others_stopped(void)
{
	const uint32_t ranks[] = { 0, 1, 2 };
	struct lm_launch_result res;
	double secs;
	int st = run_sh("[ \"$LM_RANK\" = 1 ] && exit 3; exec sleep 30",
			ranks, 3, 0, 0, &res, &secs);

	CU_ASSERT_EQUAL(st, 3);
	CU_ASSERT_EQUAL(res.failed_rank, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(res.msg, "rank 1 (pid "));
	CU_ASSERT_PTR_NOT_NULL(strstr(res.msg, ") exited with status 3"));
	CU_ASSERT(secs < 5);
}

static void test_signal_reported_as_128_plus(void)
{
	const uint32_t ranks[] = { 4, 5 };
	struct lm_launch_result res;
	double secs;
	int st = run_sh("[ \"$LM_RANK\" = 5 ] && kill -USR1 $$; sleep 30",
			ranks, 2, 0, 0, &res, &secs);

	CU_ASSERT_EQUAL(st, 128 + SIGUSR1);
	CU_ASSERT_EQUAL(res.failed_rank, 5);
	CU_ASSERT_PTR_NOT_NULL(strstr(res.msg, "rank 5 (pid "));
	CU_ASSERT_PTR_NOT_NULL(strstr(res.msg, "killed by signal 10"));
	CU_ASSERT(secs < 5);
}

/* A rank that ignores SIGTERM is killed after the grace period. */
static void test_sigterm_ignored_then_killed(void)
{
	const uint32_t ranks[] = { 0, 1 };
	struct lm_launch_result res;
	double secs;
	int st;

	/* Rank 0 fails only once rank 1 ignores SIGTERM (at most 5 s), or
	 * rank 1 could die of the SIGTERM before its trap is set. */
	make_tmpdir();
	st = run_sh("trap '' TERM; if [ \"$LM_RANK\" = 0 ]; then i=0; "
		    "while [ ! -e \"$0/ready\" ] && [ $i -lt 500 ]; do "
		    "sleep 0.01; i=$((i + 1)); done; exit 9; fi; "
		    ": > \"$0/ready\"; sleep 30; sleep 30",
		    ranks, 2, 0, 300, &res, &secs);
	remove_tmpdir();

	CU_ASSERT_EQUAL(st, 9);
	CU_ASSERT(secs >= 0.25 && secs < 5);
}

static void test_ranks_see_their_environment(void)
{
	const uint32_t ranks[] = { 2, 3 };
	struct lm_launch_result res;
	char path[128], line[256];
	double secs;

	make_tmpdir();
	CU_ASSERT_EQUAL(run_sh("printf '%s %s %s\\n' \"$LM_LAYOUT\" "
			       "\"$LM_RANK\" \"$LM_RUN\" > \"$0/out.$LM_RANK\"",
			       ranks, 2, 0, 0, &res, &secs), 0);
	for (int k = 2; k <= 3; k++) {
		char want[128];
		FILE *f;

		snprintf(path, sizeof(path), "%s/out.%d", tmpdir, k);
		snprintf(want, sizeof(want),
			 "/etc/lemuria/test.ini %d 1234567890123\n", k);
		f = fopen(path, "r");
		CU_ASSERT_PTR_NOT_NULL(f);
		if (!f)
			continue;
		CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof(line), f));
		CU_ASSERT_STRING_EQUAL(line, want);
		fclose(f);
	}
	remove_tmpdir();
}

static void test_timeout_stops_everything(void)
{
	const uint32_t ranks[] = { 0, 1 };
	struct lm_launch_result res;
	double secs;

	CU_ASSERT_EQUAL(run_sh("exec sleep 30", ranks, 2, 300, 0, &res,
			       &secs), LM_LAUNCH_TIMEOUT_STATUS);
	CU_ASSERT_PTR_NOT_NULL(strstr(res.msg, "timed out"));
	CU_ASSERT_EQUAL(res.failed_rank, -1);
	CU_ASSERT(secs >= 0.29 && secs < 5);
}

static void test_stop_request_ends_run(void)
{
	const uint32_t ranks[] = { 0 };
	char *argv[] = { "/bin/sleep", "30", NULL };
	volatile sig_atomic_t stop = SIGINT;
	struct lm_launch o = {
		.argv = argv, .environ_base = environ, .ranks = ranks,
		.nranks = 1, .layout_abs = "/x.ini", .run = 1, .stop = &stop,
	};
	struct lm_launch_result res;
	uint64_t t0 = lm_now_us();

	CU_ASSERT_EQUAL(lm_launch_run(&o, &res), 128 + SIGINT);
	CU_ASSERT_PTR_NOT_NULL(strstr(res.msg, "interrupted by signal 2"));
	CU_ASSERT(lm_now_us() - t0 < 5000000);
}

static void test_program_not_found_is_127(void)
{
	const uint32_t ranks[] = { 0 };
	char *argv[] = { "/nonexistent/lemuria-test-program", NULL };
	struct lm_launch o = {
		.argv = argv, .environ_base = environ, .ranks = ranks,
		.nranks = 1, .layout_abs = "/x.ini", .run = 1,
	};
	struct lm_launch_result res;

	CU_ASSERT_EQUAL(lm_launch_run(&o, &res), 127);
	CU_ASSERT_PTR_NOT_NULL(strstr(res.msg, "exited with status 127"));
}

/* A layout on ports no other test uses, with the demo key. */
static struct lm_layout *daemon_layout(void)
{
	struct lm_layout *l = NULL;
	char text[8192], path[128], key[4096 + 16], err[256];

	CU_ASSERT_PTR_NOT_NULL_FATAL(realpath("conf/demo.key", key));
	snprintf(text, sizeof(text),
		 "[lemuria]\nshared_size = 1M\npage_size = 4096\n"
		 "base = 0x500000000000\nsecret_file = %s\n"
		 "[reflector r0]\nlisten = 127.0.0.1:17971\n"
		 "[cluster c0]\nreflector = r0\nlisten = 127.0.0.1:17972\n"
		 "clients = 1\ncache = 1M\n", key);
	write_file("layout.ini", text, 0644);
	tmp_path(path, sizeof(path), "layout.ini");
	if (lm_layout_load(path, &l, err, sizeof(err)))
		fprintf(stderr, "daemon_layout: %s\n", err);
	return l;
}

static void test_daemon_exit_at_start_named(void)
{
	struct lm_launch_daemon_opts o = { .reflector = "/bin/false",
					   .lemuriad = "/bin/false" };
	lm_launch_daemons *ds = NULL;
	struct lm_layout *l;
	char err[256] = "";
	uint64_t t0;

	make_tmpdir();
	l = daemon_layout();
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	t0 = lm_now_us();
	CU_ASSERT_EQUAL(lm_launch_daemons_start(l, l->path, &o, &ds, err,
						sizeof(err)), LM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "reflector r0 (pid "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "exited with status 1"));
	CU_ASSERT(lm_now_us() - t0 < 5000000);
	lm_layout_free(l);
	remove_tmpdir();
}

static void test_silent_daemon_times_out(void)
{
	struct lm_launch_daemon_opts o = { .ping_ms = 400 };
	lm_launch_daemons *ds = NULL;
	struct lm_layout *l;
	char err[256] = "", sleeper[128];
	uint64_t t0;

	make_tmpdir();
	write_file("sleeper", "#!/bin/sh\nexec sleep 30\n", 0755);
	tmp_path(sleeper, sizeof(sleeper), "sleeper");
	o.reflector = o.lemuriad = sleeper;
	l = daemon_layout();
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	t0 = lm_now_us();
	CU_ASSERT_EQUAL(lm_launch_daemons_start(l, l->path, &o, &ds, err,
						sizeof(err)), LM_ETIMEDOUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "reflector r0 (pid "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "did not answer"));
	CU_ASSERT(lm_now_us() - t0 < 5000000);
	lm_layout_free(l);
	remove_tmpdir();
}

LM_TEST_SUITE("launch", LM_TEST(test_ranks_all_or_by_cluster),
	      LM_TEST(test_placement_shares_out_the_cpus),
	      LM_TEST(test_ranks_run_on_their_cpus),
	      LM_TEST(test_ranks_run_as_batch),
	      LM_TEST(test_env_replaces_lm_variables),
	      LM_TEST(test_run_ids_grow),
	      LM_TEST(test_find_program_prefers_own_dir),
	      LM_TEST(test_all_ranks_succeed),
	      LM_TEST(test_one_fails_others_stopped),
	      LM_TEST(test_signal_reported_as_128_plus),
	      LM_TEST(test_sigterm_ignored_then_killed),
	      LM_TEST(test_ranks_see_their_environment),
	      LM_TEST(test_timeout_stops_everything),
	      LM_TEST(test_stop_request_ends_run),
	      LM_TEST(test_program_not_found_is_127),
	      LM_TEST(test_daemon_exit_at_start_named),
	      LM_TEST(test_silent_daemon_times_out))
