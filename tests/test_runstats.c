/* Tests of tools/runstats.c without daemons: snapshots filled by hand,
 * their difference (restarts, gauges, daemons down), sums per level,
 * and the three reports.  Asking real daemons is tested in test_stats.c
 * (an in-process daemon) and tests/run-integration.sh. */
#include "unit.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/runstats.h"
#include "config.h"
#include "lm_error.h"
#include "stats.h"

static struct lm_layout *layout_44(void)
{
	struct lm_layout *l = NULL;
	char err[512];

	if (lm_layout_load("conf/4+4.ini", &l, err, sizeof(err)))
		fprintf(stderr, "conf/4+4.ini: %s\n", err);
	return l;
}

/* A set as daemon `name` of `role` would answer, uptime in seconds;
 * counters from a list of {level, name, value}. */
struct c {
	enum lm_stat_level level;
	const char *name;
	uint64_t value;
};

static lm_stats_set *answer(enum lm_role role, const char *name,
			    double uptime_s, uint64_t run, uint32_t clients,
			    const struct c *cs, size_t n)
{
	lm_stats_set *s = lm_stats_create();
	struct lm_stats_info info = { .role = (uint8_t)role,
				      .uptime_us = (uint64_t)(uptime_s * 1e6),
				      .run = run,
				      .clients = clients };

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	snprintf(info.name, sizeof(info.name), "%s", name);
	lm_stats_set_info(s, &info);
	for (size_t i = 0; i < n; i++)
		CU_ASSERT_EQUAL(lm_stats_add(s, cs[i].level, cs[i].name,
					     cs[i].value),
				0);
	return s;
}

static void put(lm_runstats *rs, size_t i, lm_stats_set *s)
{
	CU_ASSERT_EQUAL(lm_runstats_put(rs, i, 0, NULL, s), 0);
	lm_stats_destroy(s);
}

static uint64_t val(const lm_stats_set *s, enum lm_stat_level level,
		    const char *name)
{
	uint64_t v = UINT64_MAX;

	lm_stats_get(s, level, name, &v);
	return v;
}

/* The report as a string (caller frees). */
static char *report(void (*print)(const lm_runstats *, FILE *),
		    const lm_runstats *rs)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	print(rs, f);
	fclose(f);
	return text;
}

/* Before: r0 and c0 answer, c1 is down.  After: all three answer. */
static void fill_before(lm_runstats *rs)
{
	const struct c r0[] = {
		{ LM_STAT_CLUSTER, "msgs_sent", 10 },
		{ LM_STAT_CLUSTER, "fetches", 2 },
		{ LM_STAT_ROOT, "msgs_sent", 0 },
	};
	const struct c c0[] = {
		{ LM_STAT_CLIENT, "msgs_received", 5 },
		{ LM_STAT_CLUSTER, "msgs_sent", 4 },
		{ LM_STAT_NONE, "cached_bytes", 4096 },
	};

	put(rs, 0, answer(LM_ROLE_REFLECTOR, "r0", 10, 1, 0xffffffffu, r0,
			  3));
	put(rs, 1, answer(LM_ROLE_LEMURIAD, "c0", 10, 1, 4, c0, 3));
	CU_ASSERT_EQUAL(lm_runstats_put(rs, 2, LM_ETIMEDOUT, NULL, NULL), 0);
}

static void fill_after(lm_runstats *rs)
{
	const struct c r0[] = {
		{ LM_STAT_CLUSTER, "msgs_sent", 25 },
		{ LM_STAT_CLUSTER, "fetches", 2 },
		{ LM_STAT_ROOT, "msgs_sent", 0 },
		{ LM_STAT_CLUSTER, "allocs", 1 }, /* new since */
	};
	const struct c c0[] = {
		{ LM_STAT_CLIENT, "msgs_received", 12 },
		{ LM_STAT_CLUSTER, "msgs_sent", 9 },
		{ LM_STAT_NONE, "cached_bytes", 8192 },
	};
	const struct c c1[] = {
		{ LM_STAT_CLIENT, "msgs_received", 100 },
	};

	put(rs, 0, answer(LM_ROLE_REFLECTOR, "r0", 12, 2, 0xffffffffu, r0,
			  4));
	put(rs, 1, answer(LM_ROLE_LEMURIAD, "c0", 12, 2, 0, c0, 3));
	put(rs, 2, answer(LM_ROLE_LEMURIAD, "c1", 12, 2, 0, c1, 1));
}

static void test_create_lists_reflectors_then_clusters(void)
{
	struct lm_layout *l = layout_44();
	lm_runstats *rs;

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	rs = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	CU_ASSERT_EQUAL_FATAL(lm_runstats_count(rs), 3);
	CU_ASSERT_STRING_EQUAL(lm_runstats_daemon(rs, 0)->name, "r0");
	CU_ASSERT_EQUAL(lm_runstats_daemon(rs, 0)->role, LM_ROLE_REFLECTOR);
	CU_ASSERT_EQUAL(lm_runstats_daemon(rs, 0)->id, 1);
	CU_ASSERT_STRING_EQUAL(lm_runstats_daemon(rs, 2)->name, "c1");
	CU_ASSERT_EQUAL(lm_runstats_daemon(rs, 2)->role, LM_ROLE_LEMURIAD);
	CU_ASSERT_EQUAL(lm_runstats_daemon(rs, 1)->rc, LM_ENOENT);
	CU_ASSERT_PTR_NULL(lm_runstats_daemon(rs, 3));
	CU_ASSERT_EQUAL(lm_runstats_put(rs, 3, LM_ETIMEDOUT, NULL, NULL),
			LM_EINVAL);
	CU_ASSERT_EQUAL(lm_runstats_put(rs, 0, 0, NULL, NULL), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_runstats_put(rs, 0, LM_EUNREACH, "gone \"away\"",
					NULL),
			0);
	CU_ASSERT_STRING_EQUAL(lm_runstats_daemon(rs, 0)->why,
			       "gone \"away\"");
	lm_runstats_destroy(rs);
	lm_runstats_destroy(NULL);
	lm_layout_free(l);
}

static void test_diff_subtracts_per_daemon(void)
{
	struct lm_layout *l = layout_44();
	lm_runstats *before, *after, *d;
	const lm_stats_set *r0, *c0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	before = lm_runstats_create(l);
	after = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(before);
	CU_ASSERT_PTR_NOT_NULL_FATAL(after);
	fill_before(before);
	fill_after(after);
	d = lm_runstats_diff(before, after);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL_FATAL(lm_runstats_daemon(d, 0)->rc, 0);
	r0 = lm_runstats_daemon(d, 0)->set;
	CU_ASSERT_EQUAL(val(r0, LM_STAT_CLUSTER, "msgs_sent"), 15);
	CU_ASSERT_EQUAL(val(r0, LM_STAT_CLUSTER, "fetches"), 0);
	CU_ASSERT_EQUAL(val(r0, LM_STAT_CLUSTER, "allocs"), 1);
	CU_ASSERT_EQUAL(val(r0, LM_STAT_ROOT, "msgs_sent"), 0);
	CU_ASSERT_EQUAL(lm_stats_info(r0)->run, 2); /* the info of after */
	CU_ASSERT_EQUAL_FATAL(lm_runstats_daemon(d, 1)->rc, 0);
	c0 = lm_runstats_daemon(d, 1)->set;
	CU_ASSERT_EQUAL(val(c0, LM_STAT_CLIENT, "msgs_received"), 7);
	CU_ASSERT_EQUAL(val(c0, LM_STAT_CLUSTER, "msgs_sent"), 5);
	/* A gauge is what it is after the run, not a difference. */
	CU_ASSERT_EQUAL(val(c0, LM_STAT_NONE, "cached_bytes"), 8192);
	/* Down before the run: no difference to give. */
	CU_ASSERT_EQUAL(lm_runstats_daemon(d, 2)->rc, LM_ETIMEDOUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(lm_runstats_daemon(d, 2)->why,
				      "timed out"));
	lm_runstats_destroy(d);
	lm_runstats_destroy(before);
	lm_runstats_destroy(after);
	lm_layout_free(l);
}

static void test_diff_of_restarted_daemon_counts_from_zero(void)
{
	struct lm_layout *l = layout_44();
	lm_runstats *before, *after, *d;
	const struct c old[] = { { LM_STAT_CLIENT, "msgs_sent", 500 } };
	const struct c few[] = { { LM_STAT_CLIENT, "msgs_sent", 20 } };
	const struct c now[] = { { LM_STAT_CLIENT, "msgs_sent", 30 } };
	const struct c grew[] = { { LM_STAT_CLIENT, "msgs_sent", 530 } };

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	before = lm_runstats_create(l);
	after = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(before);
	CU_ASSERT_PTR_NOT_NULL_FATAL(after);
	/* c0 restarted (uptime went down): all 30 are the run's, even
	 * though it had sent 20 before. */
	put(before, 1, answer(LM_ROLE_LEMURIAD, "c0", 100, 1, 0, few, 1));
	put(after, 1, answer(LM_ROLE_LEMURIAD, "c0", 2, 2, 0, now, 1));
	put(before, 2, answer(LM_ROLE_LEMURIAD, "c1", 100, 1, 0, old, 1));
	put(after, 2, answer(LM_ROLE_LEMURIAD, "c1", 102, 2, 0, grew, 1));
	/* r0 down after the run */
	put(before, 0, answer(LM_ROLE_REFLECTOR, "r0", 100, 1, 0, old, 1));
	lm_runstats_put(after, 0, LM_EUNREACH, NULL, NULL);
	d = lm_runstats_diff(before, after);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL(val(lm_runstats_daemon(d, 1)->set, LM_STAT_CLIENT,
			    "msgs_sent"),
			30);
	CU_ASSERT_EQUAL(val(lm_runstats_daemon(d, 2)->set, LM_STAT_CLIENT,
			    "msgs_sent"),
			30);
	CU_ASSERT_EQUAL(lm_runstats_daemon(d, 0)->rc, LM_EUNREACH);
	lm_runstats_destroy(d);
	lm_runstats_destroy(before);
	lm_runstats_destroy(after);
	lm_layout_free(l);
}

static void test_diff_refuses_other_daemons(void)
{
	struct lm_layout *l = layout_44(), *one = NULL;
	lm_runstats *a, *b;
	char err[512];

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL_FATAL(lm_layout_load("conf/1.ini", &one, err,
					     sizeof(err)),
			      0);
	a = lm_runstats_create(l);
	b = lm_runstats_create(one);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_PTR_NULL(lm_runstats_diff(a, b));
	lm_runstats_destroy(a);
	lm_runstats_destroy(b);
	lm_layout_free(one);
	lm_layout_free(l);
}

static void test_sum_adds_per_level_over_answering_daemons(void)
{
	struct lm_layout *l = layout_44();
	lm_runstats *rs;
	lm_stats_set *sum = lm_stats_create();

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
	rs = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	fill_after(rs);
	CU_ASSERT_EQUAL(lm_runstats_sum(rs, sum), 0);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_CLUSTER, "msgs_sent"), 25 + 9);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_CLIENT, "msgs_received"), 12 + 100);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_ROOT, "msgs_sent"), 0);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_NONE, "cached_bytes"), 8192);
	/* A daemon that is down adds nothing. */
	lm_runstats_put(rs, 2, LM_ETIMEDOUT, NULL, NULL);
	CU_ASSERT_EQUAL(lm_runstats_sum(rs, sum), 0);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_CLIENT, "msgs_received"), 12);
	lm_stats_destroy(sum);
	lm_runstats_destroy(rs);
	lm_layout_free(l);
}

static void test_table_has_a_block_per_daemon(void)
{
	struct lm_layout *l = layout_44();
	lm_runstats *rs;
	char *t, want[256];

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	rs = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	fill_before(rs);
	t = report(lm_runstats_print_table, rs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "reflector r0 (127.0.0.1:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "): up 10.0 s, run 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "run 1, 4 clients attached\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "lemuriad c1 (127.0.0.1:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "): down (timed out"));
	/* r0 has cluster and root columns; a missing cell is "." */
	CU_ASSERT_PTR_NOT_NULL(strstr(
		t, "  counter          cluster           root\n"
		   "  msgs_sent             10              0\n"
		   "  fetches                2              .\n"));
	/* c0: its own columns, in level order; names as wide as the
	 * longest */
	snprintf(want, sizeof(want),
		 "  %-13s %14s %14s %14s\n  %-13s %14s %14s %14s\n",
		 "counter", "client", "cluster", "-", "msgs_received", "5", ".",
		 ".");
	CU_ASSERT_PTR_NOT_NULL(strstr(t, want));
	free(t);
	lm_runstats_destroy(rs);
	lm_layout_free(l);
}

/* Brackets and braces balance outside strings, strings close. */
static int json_balanced(const char *s)
{
	int depth = 0, in_str = 0;

	for (; *s; s++) {
		if (in_str) {
			if (*s == '\\' && s[1])
				s++;
			else if (*s == '"')
				in_str = 0;
			continue;
		}
		if (*s == '"')
			in_str = 1;
		else if (*s == '{' || *s == '[')
			depth++;
		else if (*s == '}' || *s == ']')
			if (--depth < 0)
				return 0;
	}
	return depth == 0 && !in_str;
}

static void test_json_lists_every_daemon(void)
{
	struct lm_layout *l = layout_44();
	lm_runstats *rs;
	char *j;

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	rs = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	fill_before(rs);
	lm_runstats_put(rs, 2, LM_ETIMEDOUT, "said \"no\"\n", NULL);
	j = report(lm_runstats_print_json, rs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT(json_balanced(j));
	CU_ASSERT_EQUAL(strncmp(j, "{\"daemons\":[{\"name\":\"r0\","
				   "\"role\":\"reflector\",",
				strlen("{\"daemons\":[{\"name\":\"r0\","
				       "\"role\":\"reflector\",")),
			0);
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"up\":true,\"uptime_s\":10.0,"
					 "\"run\":\"1\",\"clients\":null,"));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"counters\":{\"client\":{},"
					 "\"cluster\":{\"msgs_sent\":10,"
					 "\"fetches\":2},\"root\":{"
					 "\"msgs_sent\":0},\"-\":{}}}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"clients\":4,"));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"name\":\"c1\",\"role\":"
					 "\"lemuriad\",\"address\":\"127.0.0.1:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"up\":false,\"error\":"
					 "\"said \\\"no\\\"\\n\"}]}\n"));
	free(j);
	lm_runstats_destroy(rs);
	lm_layout_free(l);
}

/* JSON numbers are doubles to most readers, exact only to 2^53: a run
 * id comes out as a string that keeps every digit, and the whole report
 * parses. */
static void test_json_run_id_is_an_exact_string(void)
{
	struct lm_layout *l = layout_44();
	const uint64_t run = (1ull << 63) + 1;
	json_t *root, *d0;
	json_error_t jerr;
	lm_runstats *rs;
	char *j;

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	rs = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	put(rs, 0, answer(LM_ROLE_REFLECTOR, "r0", 1.5, run, 0xffffffffu,
			  NULL, 0));
	j = report(lm_runstats_print_json, rs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	root = json_loads(j, 0, &jerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	d0 = json_array_get(json_object_get(root, "daemons"), 0);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d0, "run")),
			       "9223372036854775809");
	CU_ASSERT_DOUBLE_EQUAL(
		json_real_value(json_object_get(d0, "uptime_s")), 1.5, 1e-9);
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"uptime_s\":1.5,"));
	CU_ASSERT_EQUAL(json_array_size(json_object_get(root, "daemons")),
			lm_runstats_count(rs));
	json_decref(root);
	free(j);
	lm_runstats_destroy(rs);
	lm_layout_free(l);
}

static void test_run_report_sums_then_lists(void)
{
	struct lm_layout *l = layout_44();
	lm_runstats *before, *after, *d;
	char *t, *total, *r0, want[256];

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	before = lm_runstats_create(l);
	after = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(before);
	CU_ASSERT_PTR_NOT_NULL_FATAL(after);
	fill_before(before);
	fill_after(after);
	d = lm_runstats_diff(before, after);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	t = report(lm_runstats_print_run, d);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	total = strstr(t, "lemuria-run: total of the 2 daemons that answered "
			  "(of 3)\n");
	r0 = strstr(t, "lemuria-run: reflector r0 (");
	CU_ASSERT_PTR_NOT_NULL_FATAL(total);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r0);
	CU_ASSERT(total < r0);
	/* The total: r0's 15 and c0's 5 messages at cluster level. */
	snprintf(want, sizeof(want),
		 "lemuria-run:   %-13s %14s %14s %14s %14s\n"
		 "lemuria-run:   %-13s %14s %14s %14s %14s\n",
		 "counter", "client", "cluster", "root", "-", "msgs_sent", ".",
		 "20", "0", ".");
	CU_ASSERT_PTR_NOT_NULL(strstr(total, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "lemuria-run: lemuriad c1 ("));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "down (timed out"));
	/* Every line carries the prefix. */
	for (char *p = t; *p; p = strchr(p, '\n') + 1) {
		CU_ASSERT_EQUAL(strncmp(p, "lemuria-run: ", 13), 0);
		if (!strchr(p, '\n'))
			break;
	}
	free(t);
	lm_runstats_destroy(d);
	lm_runstats_destroy(before);
	lm_runstats_destroy(after);
	lm_layout_free(l);
}

/* issue 42: the summary keeps the few rows that say how a run went, per
 * level, with every dropped_* counter summed as one; the short run report
 * is that sum, the retransmissions explained when there were any, and a
 * head line per daemon (no per-daemon rows), every line prefixed. */
static void test_summary_keeps_the_main_rows(void)
{
	const struct c r0[] = {
		{ LM_STAT_CLUSTER, "msgs_sent", 25 },
		{ LM_STAT_CLUSTER, "retransmits", 3 },
		{ LM_STAT_CLUSTER, "allocs", 1 },
		{ LM_STAT_NONE, "dropped_auth", 2 },
		{ LM_STAT_NONE, "dropped_type", 5 },
		{ LM_STAT_CLUSTER, "barriers", 7 },
	};
	const struct c quiet[] = {
		{ LM_STAT_CLIENT, "msgs_sent", 4 },
		{ LM_STAT_CLIENT, "retransmits", 0 },
	};
	struct lm_layout *l = layout_44();
	lm_stats_set *sum = lm_stats_create();
	lm_runstats *rs;
	char *t;
	size_t lines = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
	rs = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
	put(rs, 0, answer(LM_ROLE_REFLECTOR, "r0", 12, 2, 0xffffffffu, r0,
			  6));
	put(rs, 1, answer(LM_ROLE_LEMURIAD, "c0", 12, 2, 0, quiet, 2));
	CU_ASSERT_EQUAL(lm_runstats_put(rs, 2, LM_ETIMEDOUT, NULL, NULL), 0);
	CU_ASSERT_EQUAL(lm_runstats_summary(lm_runstats_daemon(rs, 0)->set,
					    sum), 0);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_CLUSTER, "msgs_sent"), 25);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_CLUSTER, "barriers"), 7);
	CU_ASSERT_EQUAL(val(sum, LM_STAT_NONE, "dropped"), 7);
	CU_ASSERT_EQUAL(lm_stats_count(sum), 4); /* allocs left out */

	t = report(lm_runstats_print_run_summary, rs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "summed over the 2 daemons that "
					 "answered (of 3; every counter "
					 "with -a)\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "lemuria-run:   dropped "));
	CU_ASSERT_PTR_NULL(strstr(t, "allocs"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "lemuria-run: retransmits: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "lemuria-run: lemuriad c1 ("));
	for (char *p = t; *p; p = strchr(p, '\n') + 1) {
		CU_ASSERT_EQUAL(strncmp(p, "lemuria-run: ", 13), 0);
		lines++;
		if (!strchr(p, '\n'))
			break;
	}
	/* title, header, 4 rows (msgs_sent, retransmits, barriers,
	 * dropped), the note, 3 daemons */
	CU_ASSERT_EQUAL(lines, 10);
	free(t);

	/* per daemon: the note only where that daemon retransmitted */
	t = report(lm_runstats_print_summary, rs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "retransmits: datagrams sent "
					 "again"));
	CU_ASSERT_PTR_NULL(strstr(strstr(t, "lemuriad c0 ("), "retransmits: "));
	free(t);
	lm_stats_destroy(sum);
	lm_runstats_destroy(rs);
	lm_layout_free(l);
}

/* The backlog's peak (common/daemon.h) is a high-water mark: a run that
 * came near it shows it, even when an earlier run went as high. */
static void test_diff_keeps_backlog_peak(void)
{
	const struct c peak[] = {
		{ LM_STAT_NONE, "backlog_peak_bytes", 4096 },
	};
	struct lm_layout *l = layout_44();
	lm_runstats *before, *after, *d;

	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	before = lm_runstats_create(l);
	after = lm_runstats_create(l);
	CU_ASSERT_PTR_NOT_NULL_FATAL(before);
	CU_ASSERT_PTR_NOT_NULL_FATAL(after);
	put(before, 0, answer(LM_ROLE_REFLECTOR, "r0", 10, 1, 0xffffffffu,
			      peak, 1));
	put(after, 0, answer(LM_ROLE_REFLECTOR, "r0", 12, 2, 0xffffffffu,
			     peak, 1));
	d = lm_runstats_diff(before, after);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL_FATAL(lm_runstats_daemon(d, 0)->rc, 0);
	CU_ASSERT_EQUAL(val(lm_runstats_daemon(d, 0)->set, LM_STAT_NONE,
			    "backlog_peak_bytes"),
			4096);
	lm_runstats_destroy(d);
	lm_runstats_destroy(before);
	lm_runstats_destroy(after);
	lm_layout_free(l);
}

LM_TEST_SUITE("runstats", LM_TEST(test_create_lists_reflectors_then_clusters),
	      LM_TEST(test_diff_subtracts_per_daemon),
	      LM_TEST(test_diff_keeps_backlog_peak),
	      LM_TEST(test_diff_of_restarted_daemon_counts_from_zero),
	      LM_TEST(test_diff_refuses_other_daemons),
	      LM_TEST(test_sum_adds_per_level_over_answering_daemons),
	      LM_TEST(test_table_has_a_block_per_daemon),
	      LM_TEST(test_json_lists_every_daemon),
	      LM_TEST(test_json_run_id_is_an_exact_string),
	      LM_TEST(test_run_report_sums_then_lists),
	      LM_TEST(test_summary_keeps_the_main_rows))
