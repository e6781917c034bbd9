/* The layout of `lemuria-run -n N` (tools/quick_layout.c): how ranks are
 * split into clusters, and a layout that loads, with a private secret,
 * distinct loopback ports, and nothing left once removed. */
#include <arpa/inet.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "lm_error.h"
#include "quick_layout.h"
#include "tmpfiles.h"
#include "unit.h"

static int split(unsigned n, const char *spec, unsigned per, unsigned *sizes,
		 char *err)
{
	return lm_quick_split(n, spec, per, sizes, LM_QUICK_MAX_CLUSTERS, err,
			      256);
}

static void test_split(void)
{
	unsigned s[LM_QUICK_MAX_CLUSTERS];
	char err[256];

	CU_ASSERT_EQUAL(split(8, NULL, 0, s, err), 1); /* one cluster */
	CU_ASSERT_EQUAL(s[0], 8);
	CU_ASSERT_EQUAL(split(5, NULL, 2, s, err), 3);
	CU_ASSERT(s[0] == 2 && s[1] == 2 && s[2] == 1);
	CU_ASSERT_EQUAL(split(4, NULL, 9, s, err), 1); /* per above n */
	CU_ASSERT_EQUAL(s[0], 4);
	CU_ASSERT_EQUAL(split(0, "4+2", 0, s, err), 2); /* n from the sizes */
	CU_ASSERT(s[0] == 4 && s[1] == 2);
	CU_ASSERT_EQUAL(split(6, "4+2", 0, s, err), 2);
	CU_ASSERT_EQUAL(split(2048, NULL, 0, s, err), 2); /* 1024 at most */
	CU_ASSERT(s[0] == 1024 && s[1] == 1024);
}

static void test_split_refuses_bad_input(void)
{
	unsigned s[LM_QUICK_MAX_CLUSTERS];
	static const char *const bad[] = { "", "4+", "+4", "4++4", "4+0",
					   "4+-1", " 4", "4+x", "2000" };
	char err[256];

	CU_ASSERT_EQUAL(split(6, "4+4", 0, s, err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "holds 8 ranks, but -n asks for 6"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(split(0, bad[i], 0, s, err), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "--clusters"));
	}
	CU_ASSERT_EQUAL(split(0, NULL, 0, s, err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "-n"));
	CU_ASSERT_EQUAL(lm_quick_split(300, NULL, 1, s, 4, err, sizeof(err)),
			-1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "more than 4 clusters"));
	CU_ASSERT_EQUAL(split(3000, NULL, 2000, s, err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "at most 1024"));
}

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_layout_loads_and_goes(void)
{
	static const unsigned sizes[] = { 4, 2, 3 };
	struct lm_quick_layout q;
	struct lm_layout *l = NULL;
	struct stat st;
	char err[512] = "", *old = getenv("TMPDIR");

	tf_dir_create();
	setenv("TMPDIR", tf_dir, 1);
	CU_ASSERT_EQUAL_FATAL(lm_quick_layout_make(&q, sizes, 3, "32M", err,
						   sizeof(err)),
			      0);
	CU_ASSERT_EQUAL(strncmp(q.dir, tf_dir, strlen(tf_dir)), 0);
	CU_ASSERT(stat(q.dir, &st) == 0 && (st.st_mode & 0777) == 0700);
	CU_ASSERT(stat(q.key, &st) == 0 && (st.st_mode & 0777) == 0600 &&
		  st.st_size == 32);
	CU_ASSERT_EQUAL_FATAL(lm_layout_load(q.path, &l, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(l->nreflectors, 1);
	CU_ASSERT_EQUAL_FATAL(l->nclusters, 3);
	CU_ASSERT_EQUAL(l->nprocs, 9);
	CU_ASSERT_EQUAL(l->shared_size, 32u << 20);
	/* below 4 GiB: pointers kept in 32-bit ints work (issue 41) */
	CU_ASSERT_EQUAL(l->base, LM_LOW_BASE);
	for (size_t i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(l->clusters[i].clients, sizes[i]);
		CU_ASSERT_EQUAL(ntohl(l->clusters[i].addr.sin_addr.s_addr),
				0x7f000001u);
		CU_ASSERT_NOT_EQUAL(l->clusters[i].addr.sin_port,
				    l->reflectors[0].addr.sin_port);
		for (size_t j = 0; j < i; j++)
			CU_ASSERT_NOT_EQUAL(l->clusters[i].addr.sin_port,
					    l->clusters[j].addr.sin_port);
	}
	lm_layout_free(l);
	lm_quick_layout_remove(&q);
	lm_quick_layout_remove(&q); /* twice: nothing */
	CU_ASSERT_EQUAL(entries(tf_dir), 0);
	/* a bad size leaves nothing behind either */
	CU_ASSERT_EQUAL(lm_quick_layout_make(&q, sizes, 3, "12Q", err,
					     sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"12Q\""));
	CU_ASSERT_EQUAL(entries(tf_dir), 0);
	if (old)
		setenv("TMPDIR", old, 1);
	else
		unsetenv("TMPDIR");
	tf_dir_remove((const char *const[]){ NULL });
}

/* Two layouts made one after the other hold no port in common. */
static void test_two_layouts_apart(void)
{
	static const unsigned sizes[] = { 2, 2 };
	struct lm_quick_layout a, b;
	struct lm_layout *la = NULL, *lb = NULL;
	char err[512] = "";

	CU_ASSERT_EQUAL_FATAL(lm_quick_layout_make(&a, sizes, 2, "1M", err,
						   sizeof(err)),
			      0);
	CU_ASSERT_EQUAL_FATAL(lm_quick_layout_make(&b, sizes, 2, "1M", err,
						   sizeof(err)),
			      0);
	CU_ASSERT_STRING_NOT_EQUAL(a.dir, b.dir);
	CU_ASSERT_EQUAL_FATAL(lm_layout_load(a.path, &la, err, sizeof(err)),
			      0);
	CU_ASSERT_EQUAL_FATAL(lm_layout_load(b.path, &lb, err, sizeof(err)),
			      0);
	CU_ASSERT_NOT_EQUAL(la->hash, lb->hash);
	lm_layout_free(la);
	lm_layout_free(lb);
	lm_quick_layout_remove(&a);
	lm_quick_layout_remove(&b);
}

/* The region ends below 4 GiB while it fits there, else goes high. */
static void test_base_below_4g_while_it_fits(void)
{
	CU_ASSERT_EQUAL(lm_quick_layout_base(64u << 20), LM_LOW_BASE);
	CU_ASSERT_EQUAL(lm_quick_layout_base(3ull << 30), LM_LOW_BASE);
	CU_ASSERT(lm_quick_layout_base(3ull << 30) + (3ull << 30) <=
		  LM_LOW_BASE_MAX);
	CU_ASSERT_EQUAL(lm_quick_layout_base((3ull << 30) + 4096),
			LM_HIGH_BASE);
}

LM_TEST_SUITE("quick_layout", LM_TEST(test_base_below_4g_while_it_fits), LM_TEST(test_split),
	      LM_TEST(test_split_refuses_bad_input),
	      LM_TEST(test_layout_loads_and_goes),
	      LM_TEST(test_two_layouts_apart))
