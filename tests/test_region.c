/* The client's shared region (liblemuria/region.h: region.c,
 * pagefault.c, protect.c, mapping.c), driven through a fake backend that
 * serves pages from a local array: fetches on first access
 * only, twins on write, diffs holding exactly the changed bytes, notices
 * invalidating only older copies, and faults that are not the region's
 * (or fetches that fail) ending the process as they should.
 *
 * These tests take real SIGSEGVs, which AddressSanitizer intercepts, so
 * under ASan the suite holds one test that says it was skipped. */
#include "unit.h"

#if defined(__SANITIZE_ADDRESS__)

static void test_skipped_under_asan(void)
{
	CU_PASS("region tests need SIGSEGV; skipped under ASan");
}

LM_TEST_SUITE("region", LM_TEST(test_skipped_under_asan))

#else

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "diff.h"
#include "diff_util.h"
#include "lm_error.h"
#include "mem.h"
#include "proto.h"
#include "reach.h"
#include "region.h"
#include "region_state.h"

#define BASE 0x510000000000ull
#define PAGE 4096u
#define NPAGES 64u
#define HOME_VERSION 5u
#define CHILD_ALARM_S 10 /* a forked child that hangs is killed */
#define ME 3u            /* this process's rank, for sole-writer notices */
/* A notice of a page several ranks wrote: never keeps a copy. */
#define NOTE(p, v) { (p), (v), 0, LM_WRITER_MANY, LM_WRITER_MANY }

/* The fake home: page data and versions, what it was asked for. */
static uint8_t home[NPAGES][PAGE];
static uint32_t home_version[NPAGES];
static unsigned nfetch;
static unsigned bad_ctx;
static uint32_t fail_page = UINT32_MAX;
static int ctx_token;

/* Page faults the process took in the backend's copies into the private
 * view, when counting. */
static bool count_copy_faults;
static long copy_faults;

static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* A counter of the page faults this thread takes (exceptions only: a
 * page that MADV_POPULATE_WRITE gives counts in ru_minflt, not here), or
 * -1 where perf events are not allowed. */
static int fault_counter(void)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_PAGE_FAULTS;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static long faults_taken(int fd)
{
	uint64_t n = 0;

	if (fd < 0 || read(fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
		return -1;
	return (long)n;
}

static void copy_in(void *dst, const void *src)
{
	long before = count_copy_faults ? minor_faults() : 0;

	lm_region_fill(dst, src, PAGE);
	if (count_copy_faults)
		copy_faults += minor_faults() - before;
}

static uint8_t *fetch_view; /* the private view's start, seen by a fetch */

static int fake_fetch(void *ctx, uint32_t page, void *dst, uint32_t *version)
{
	if (ctx != &ctx_token)
		bad_ctx++;
	if (page >= NPAGES)
		return LM_EINVAL;
	if (page == fail_page)
		return LM_EIO;
	fetch_view = (uint8_t *)dst - (size_t)page * PAGE;
	copy_in(dst, home[page]);
	*version = home_version[page];
	nfetch++;
	return 0;
}

/* fetch_list of the fake home: brings along the listed pages whose
 * number is odd, so that some asked for stay behind; remembers what it
 * was asked. */
static unsigned nruns;
static uint32_t run_pages[LM_REGION_FETCH_MAX];
static uint32_t run_n;
static uint32_t run_after;

static int fake_fetch_list(void *ctx, const uint32_t *pages, uint32_t n,
			   uint32_t after, uint8_t *const *dst,
			   uint32_t *versions, uint8_t *got)
{
	int rc = fake_fetch(ctx, pages[0], dst[0], &versions[0]);

	nruns++;
	run_n = n;
	run_after = after;
	memcpy(run_pages, pages, n * sizeof(*pages));
	got[0] = rc == 0;
	for (uint32_t i = 1; rc == 0 && i < n; i++) {
		if (pages[i] % 2 == 0)
			continue;
		copy_in(dst[i], home[pages[i]]);
		versions[i] = home_version[pages[i]];
		got[i] = 1;
	}
	return rc;
}

/* Whether the last fetch_list asked for `page`. */
static bool run_asked(uint32_t page)
{
	for (uint32_t i = 0; i < run_n; i++)
		if (run_pages[i] == page)
			return true;
	return false;
}

static const struct lm_region_backend fake_backend = {
	.fetch = fake_fetch, .fetch_list = fake_fetch_list };

static volatile uint8_t *pg(uint32_t page)
{
	return (volatile uint8_t *)(uintptr_t)(BASE + (uint64_t)page * PAGE);
}

/* Also ends a region a failed (FATAL) assertion left behind, so that one
 * failure does not cascade into every later test. */
static void home_reset(void)
{
	lm_region_fini();
	for (uint32_t p = 0; p < NPAGES; p++) {
		for (uint32_t i = 0; i < PAGE; i++)
			home[p][i] = (uint8_t)(p * 31 + i * 7 + 1);
		home_version[p] = HOME_VERSION;
	}
	nfetch = 0;
	bad_ctx = 0;
	fail_page = UINT32_MAX;
}

/* Returns 0 when the region came up. */
static int setup(void)
{
	char err[256] = "";
	int rc;

	home_reset();
	rc = lm_region_init(BASE, (uint64_t)NPAGES * PAGE, PAGE,
			    &fake_backend, &ctx_token, err, sizeof(err));
	CU_ASSERT_EQUAL(rc, 0);
	if (rc)
		fprintf(stderr, "region init: %s\n", err);
	return rc;
}

static struct lm_region_stats stats(void)
{
	struct lm_region_stats s;

	lm_region_stats(&s);
	return s;
}

static int page_equals(uint32_t page, const uint8_t *want)
{
	return memcmp((const void *)pg(page), want, PAGE) == 0;
}

struct entry {
	uint32_t page;
	const uint8_t *diff;
	size_t len;
};

/* Flushes and decodes the list; returns the number of entries or -1. */
static int flush_entries(struct entry *e, size_t cap)
{
	const uint8_t *data = NULL;
	struct lm_msg_diffs list;
	size_t len = 0, pos = 0;
	uint32_t count = 0;
	size_t n = 0;
	int rc;

	if (lm_region_flush(&data, &len, &count) != 0)
		return -1;
	list = (struct lm_msg_diffs){ data, len, count };
	while ((rc = lm_msg_diffs_next(&list, &pos, &e[n].page, &e[n].diff,
				       &e[n].len)) == 1) {
		if (++n == cap)
			break;
	}
	if (rc < 0 || n != count)
		return -1;
	return (int)n;
}

static int sum_run(void *ctx, size_t offset, const uint8_t *bytes,
		   size_t len)
{
	(void)offset;
	(void)bytes;
	*(size_t *)ctx += len;
	return 0;
}

/* Bytes a diff writes. */
static size_t diff_bytes(const struct entry *e)
{
	size_t total = 0;

	if (lm_diff_foreach_run(e->diff, e->len, PAGE, sum_run, &total))
		return SIZE_MAX;
	return total;
}

static void test_read_fault_fetches_once(void)
{
	if (setup())
		return;
	CU_ASSERT_EQUAL(lm_region_page_version(3), UINT32_MAX);
	CU_ASSERT_EQUAL(pg(3)[10], home[3][10]);
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL(stats().read_faults, 1);
	CU_ASSERT_EQUAL(stats().fetches, 1);
	CU_ASSERT_TRUE(page_equals(3, home[3]));
	CU_ASSERT_EQUAL(pg(3)[PAGE - 1], home[3][PAGE - 1]);
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL(stats().read_faults, 1);
	CU_ASSERT_EQUAL(stats().write_faults, 0);
	CU_ASSERT_EQUAL(lm_region_page_version(3), HOME_VERSION);
	CU_ASSERT_EQUAL(lm_region_page_version(4), UINT32_MAX);
	CU_ASSERT_EQUAL(lm_region_page_version(NPAGES), UINT32_MAX);
	CU_ASSERT_EQUAL(bad_ctx, 0);
	CU_ASSERT_TRUE(lm_region_contains((const void *)pg(0)));
	CU_ASSERT_TRUE(lm_region_contains((const void *)(pg(NPAGES) - 1)));
	CU_ASSERT_FALSE(lm_region_contains((const void *)pg(NPAGES)));
	CU_ASSERT_FALSE(lm_region_contains((const void *)(pg(0) - 1)));
	lm_region_fini();
}

/* Neighbour pages (docs/dsm.md): a read fault asks for the invalid pages
 * after it; those that come are readable at once, with their versions,
 * in one mprotect a run; a valid page in the window is neither asked for
 * nor touched; prefetch 0 fetches one page. */
static void test_read_fault_brings_neighbours(void)
{
	uint64_t mprotects;
	uint8_t mine;

	if (setup())
		return;
	nruns = 0;
	lm_region_set_prefetch(0);
	CU_ASSERT_EQUAL(pg(1)[0], home[1][0]);
	CU_ASSERT_EQUAL(nruns, 0);
	pg(12)[0] = mine = (uint8_t)~home[12][0]; /* valid, and written */
	CU_ASSERT_EQUAL(nfetch, 2);
	lm_region_set_prefetch(4);
	mprotects = stats().mprotects;
	CU_ASSERT_EQUAL(pg(10)[5], home[10][5]);
	CU_ASSERT_EQUAL(nruns, 1);
	/* 10 opens with 11, 13 alone */
	CU_ASSERT_EQUAL(stats().mprotects, mprotects + 2);
	CU_ASSERT_EQUAL(run_n, 4);
	CU_ASSERT_EQUAL(run_after, 4); /* the backend is told how far */
	CU_ASSERT(run_pages[0] == 10 && run_pages[1] == 11 &&
		  run_pages[2] == 13 && run_pages[3] == 14);
	/* 11 and 13 came (odd), 14 did not */
	CU_ASSERT_EQUAL(stats().prefetched, 2);
	CU_ASSERT_EQUAL(lm_region_page_version(11), HOME_VERSION);
	CU_ASSERT_EQUAL(lm_region_page_version(13), HOME_VERSION);
	CU_ASSERT_EQUAL(lm_region_page_version(14), UINT32_MAX);
	CU_ASSERT_EQUAL(pg(12)[0], mine);
	CU_ASSERT_TRUE(page_equals(11, home[11]));
	CU_ASSERT_TRUE(page_equals(13, home[13]));
	CU_ASSERT_EQUAL(nfetch, 3);
	CU_ASSERT_EQUAL(stats().read_faults, 2);
	/* a write to a page that came along twins it, with no fetch */
	pg(13)[1] = 0x5a;
	CU_ASSERT_EQUAL(nfetch, 3);
	CU_ASSERT_EQUAL(stats().write_faults, 2);
	/* the last page of the region has no neighbours to ask for */
	CU_ASSERT_EQUAL(pg(NPAGES - 1)[0], home[NPAGES - 1][0]);
	CU_ASSERT_EQUAL(nruns, 1);
	lm_region_set_prefetch(0);
	lm_region_fini();
}

/* A write fault on an invalid page brings the pages after it along as a
 * read fault does (docs/dsm.md "Neighbour pages"), and opens them all
 * writable with their twins: the page itself over the home's data, and
 * those that came, so that writes to them take no fault; each flushes
 * only what was written, a neighbour left unchanged is closed by that
 * flush (its next write faults, with no fetch), and one that did not
 * come is still fetched when read. */
static void test_write_fault_brings_neighbours(void)
{
	struct entry e[4];
	uint8_t want[PAGE];
	uint64_t m;

	if (setup())
		return;
	nruns = 0;
	lm_region_set_prefetch(4);
	m = stats().mprotects;
	pg(20)[0] = (uint8_t)~home[20][0];
	CU_ASSERT_EQUAL(nruns, 1);
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL(run_n, 5);
	CU_ASSERT(run_asked(21) && run_asked(24));
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(stats().read_faults, 0);
	CU_ASSERT_EQUAL(stats().prefetched, 2); /* 21 and 23 */
	CU_ASSERT_EQUAL(stats().mprotects - m, 2); /* [20,21] and 23 */
	memcpy(want, home[20], PAGE);
	want[0] = (uint8_t)~home[20][0];
	CU_ASSERT_TRUE(page_equals(20, want));
	CU_ASSERT_TRUE(page_equals(21, home[21]));
	CU_ASSERT_TRUE(page_equals(23, home[23]));
	CU_ASSERT_EQUAL(lm_region_page_version(23), HOME_VERSION);
	pg(20)[1] = (uint8_t)~home[20][1];
	pg(23)[2] = (uint8_t)~home[23][2];
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 2);
	CU_ASSERT(e[0].page == 20 && diff_bytes(&e[0]) == 2);
	CU_ASSERT(e[1].page == 23 && diff_bytes(&e[1]) == 1);
	CU_ASSERT_EQUAL(pg(21)[0], home[21][0]);
	pg(21)[3] = (uint8_t)~home[21][3]; /* closed by the flush */
	CU_ASSERT_EQUAL(stats().write_faults, 2);
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL(lm_region_page_version(22), UINT32_MAX);
	CU_ASSERT_EQUAL(pg(22)[0], home[22][0]);
	CU_ASSERT_EQUAL(nfetch, 2);
	lm_region_set_prefetch(0);
	lm_region_fini();
}

/* A write fault on a valid read-only copy opens the valid read-only
 * copies right after it writable too, in the same mprotect, each with its
 * twin (docs/dsm.md "Neighbour pages"): writes to them take no fault and
 * flush what they changed, the run stops at an invalid page and goes no
 * further than the prefetch, one left unchanged is closed by the flush,
 * and with prefetch 0 the page opens alone. */
static void test_write_fault_opens_the_copies_after_it(void)
{
	struct entry e[8];
	uint8_t want[PAGE];
	uint64_t m;

	if (setup())
		return;
	lm_region_set_prefetch(0);
	for (uint32_t p = 30; p <= 41; p++)
		if (p != 33)
			CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
	CU_ASSERT_EQUAL(nfetch, 11);
	pg(40)[0] = (uint8_t)~home[40][0]; /* prefetch 0: 40 alone */
	CU_ASSERT_EQUAL(stats().written_ahead, 0);
	pg(41)[0] = (uint8_t)~home[41][0];
	CU_ASSERT_EQUAL(stats().write_faults, 2);
	lm_region_set_prefetch(2);
	m = stats().mprotects;
	pg(30)[0] = (uint8_t)~home[30][0];
	CU_ASSERT_EQUAL(stats().write_faults, 3);
	CU_ASSERT_EQUAL(stats().written_ahead, 2); /* 31 and 32 */
	CU_ASSERT_EQUAL(stats().mprotects - m, 1);
	pg(31)[1] = (uint8_t)~home[31][1];
	CU_ASSERT_EQUAL(stats().write_faults, 3);
	pg(34)[2] = (uint8_t)~home[34][2]; /* 33 is invalid: 34 faults */
	CU_ASSERT_EQUAL(stats().write_faults, 4);
	CU_ASSERT_EQUAL(stats().written_ahead, 4); /* 35 and 36, not 37 */
	pg(36)[3] = (uint8_t)~home[36][3];
	pg(37)[4] = (uint8_t)~home[37][4];
	CU_ASSERT_EQUAL(stats().write_faults, 5);
	CU_ASSERT_EQUAL(stats().written_ahead, 6); /* 38 and 39 */
	CU_ASSERT_EQUAL(stats().read_faults, 11);
	CU_ASSERT_EQUAL(nfetch, 11);
	memcpy(want, home[31], PAGE);
	want[1] = (uint8_t)~home[31][1];
	CU_ASSERT_TRUE(page_equals(31, want));
	CU_ASSERT_TRUE(page_equals(32, home[32]));
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 8), 7);
	CU_ASSERT(e[0].page == 40 && e[1].page == 41);
	CU_ASSERT(e[2].page == 30 && diff_bytes(&e[2]) == 1);
	CU_ASSERT(e[3].page == 31 && diff_bytes(&e[3]) == 1);
	CU_ASSERT(e[4].page == 34 && diff_bytes(&e[4]) == 1);
	CU_ASSERT(e[5].page == 36 && diff_bytes(&e[5]) == 1);
	CU_ASSERT(e[6].page == 37 && diff_bytes(&e[6]) == 1);
	/* 32 and 35 were left unchanged: closed by the flush */
	pg(32)[5] = (uint8_t)~home[32][5];
	CU_ASSERT_EQUAL(stats().write_faults, 6);
	pg(35)[5] = (uint8_t)~home[35][5];
	CU_ASSERT_EQUAL(stats().write_faults, 7);
	CU_ASSERT_EQUAL(nfetch, 11);
	lm_region_set_prefetch(0);
	lm_region_fini();
}

/* Whether the application's view of `page` has no access, read off
 * /proc/self/maps; -1 when it cannot tell. */
static int view_closed(uint32_t page)
{
	uintptr_t at = (uintptr_t)pg(page), lo, hi;
	char perms[8], line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int closed = -1;

	if (!f)
		return -1;
	while (closed < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    lo <= at && at < hi)
			closed = strncmp(perms, "---", 3) == 0;
	fclose(f);
	return closed;
}

/* A sample among the copies after a write fault's page stops its run
 * (docs/dsm.md "Neighbour pages"): the reach must see the sample's first
 * access, so the sample stays closed and its first write faults. */
static void test_write_run_stops_at_a_sample(void)
{
	uint32_t sample = 0, w;
	uint64_t ahead, faults;

	if (setup())
		return;
	lm_region_set_prefetch(4);
	/* two faults, one of which samples: 11, 13, 21 and 23 come along */
	for (uint32_t f = 0; f < LM_REACH_EVERY; f++)
		CU_ASSERT_EQUAL(pg(10 + 10 * f)[0], home[10 + 10 * f][0]);
	for (uint32_t p = 11; p <= 23; p += 2)
		if (p != 15 && p != 17 && p != 19 && view_closed(p) == 1)
			sample = p;
	CU_ASSERT_NOT_EQUAL_FATAL(sample, 0);
	/* the page before it valid too (10 and 20 are), read one at a time */
	lm_region_set_prefetch(0);
	w = sample - 1;
	CU_ASSERT_EQUAL(pg(w)[0], home[w][0]);
	lm_region_set_prefetch(4);
	ahead = stats().written_ahead;
	faults = stats().write_faults;
	pg(w)[1] = (uint8_t)~home[w][1];
	CU_ASSERT_EQUAL(stats().written_ahead, ahead);
	CU_ASSERT_EQUAL(view_closed(sample), 1);
	pg(sample)[1] = (uint8_t)~home[sample][1];
	CU_ASSERT_EQUAL(stats().write_faults, faults + 2);
	CU_ASSERT_EQUAL(pg(sample)[1], (uint8_t)~home[sample][1]);
	lm_region_set_prefetch(0);
	lm_region_fini();
}

/* Read faults a fixed number of pages apart (docs/dsm.md "Neighbour
 * pages"): the third fault of a stride asks for `prefetch` pages along
 * it besides those after it, and the stream goes on from the last page
 * asked for; a fault on a page asked for that did not come keeps the
 * stream; a stride may go down. */
static void test_read_faults_along_a_stride_bring_the_next(void)
{
	if (setup())
		return;
	lm_region_set_prefetch(2);
	nruns = 0;
	/* stride 6 from an odd page: every page along it comes */
	CU_ASSERT_EQUAL(pg(1)[0], home[1][0]);
	CU_ASSERT_EQUAL(pg(7)[0], home[7][0]);
	CU_ASSERT_FALSE(run_asked(13)); /* one step is no stride yet */
	CU_ASSERT_EQUAL(stats().strided, 0);
	CU_ASSERT_EQUAL(pg(13)[0], home[13][0]);
	CU_ASSERT(run_n == 5 && run_asked(14) && run_asked(15) &&
		  run_asked(19) && run_asked(25));
	CU_ASSERT_EQUAL(stats().strided, 2);
	CU_ASSERT_EQUAL(nruns, 3);
	CU_ASSERT_TRUE(page_equals(19, home[19]));
	CU_ASSERT_TRUE(page_equals(25, home[25]));
	CU_ASSERT_EQUAL(nruns, 3); /* 19 and 25 came along: no fault */
	CU_ASSERT_EQUAL(lm_region_page_version(25), HOME_VERSION);
	CU_ASSERT_EQUAL(pg(31)[0], home[31][0]);
	CU_ASSERT(run_asked(37) && run_asked(43));
	CU_ASSERT_EQUAL(stats().read_faults, 4);
	lm_region_fini();

	/* stride 3: 10, an even page along it, does not come; its fault
	 * goes on along the stream */
	if (setup())
		return;
	lm_region_set_prefetch(2);
	CU_ASSERT_EQUAL(pg(1)[0], home[1][0]);
	CU_ASSERT_EQUAL(pg(4)[0], home[4][0]);
	CU_ASSERT_EQUAL(pg(7)[0], home[7][0]);
	CU_ASSERT(run_asked(10) && run_asked(13));
	CU_ASSERT_EQUAL(lm_region_page_version(10), UINT32_MAX);
	CU_ASSERT_EQUAL(pg(10)[0], home[10][0]);
	CU_ASSERT(run_asked(16) && !run_asked(13)); /* 13 came before */
	lm_region_fini();

	/* down by 6 */
	if (setup())
		return;
	lm_region_set_prefetch(2);
	CU_ASSERT_EQUAL(pg(40)[0], home[40][0]);
	CU_ASSERT_EQUAL(pg(34)[0], home[34][0]);
	CU_ASSERT_EQUAL(pg(28)[0], home[28][0]);
	CU_ASSERT(run_asked(22) && run_asked(16) && !run_asked(27));
	lm_region_set_prefetch(0);
	lm_region_fini();
}

/* A newer version of pages[0..n) at the home, and the notices of it
 * applied (a release: the reach's samples are answered); a copy left
 * readable would show the old first byte. */
static void home_moves_on_list(const uint32_t *pages, uint32_t n)
{
	struct lm_notice notes[NPAGES];

	CU_ASSERT_FATAL(n <= NPAGES);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t p = pages[i];

		home[p][0]++;
		notes[i] = (struct lm_notice)NOTE(p, ++home_version[p]);
	}
	CU_ASSERT_EQUAL(lm_region_apply_notices(notes, n, ME), 0);
}

/* ... of pages [first, first + n). */
static void home_moves_on(uint32_t first, uint32_t n)
{
	uint32_t pages[NPAGES];

	CU_ASSERT_FATAL(n <= NPAGES);
	for (uint32_t i = 0; i < n; i++)
		pages[i] = first + i;
	home_moves_on_list(pages, n);
}

/* Samples of how far faults reach (reach.h): of the pages that come
 * along on LM_REACH_EVERY read faults, one stays closed; its first read
 * is served without a fetch, by one mprotect, and the next release counts
 * it read; one left unread is counted so, and a notice invalidates it like
 * any copy; a write to one twins it without a fetch. */
static void test_sample_pages_stay_closed_until_touched(void)
{
	struct entry e[8];
	struct lm_region_stats before;
	uint64_t closed = 0;
	unsigned fetches;

	if (setup())
		return;
	lm_region_set_prefetch(4);
	/* pages 10 and 20: 11, 13 and 21, 23 come along (odd) */
	for (uint32_t f = 0; f < LM_REACH_EVERY; f++) {
		uint32_t p = 10 + 10 * f;
		uint64_t m;

		CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
		fetches = nfetch;
		m = stats().mprotects;
		CU_ASSERT_TRUE(page_equals(p + 1, home[p + 1]));
		CU_ASSERT_TRUE(page_equals(p + 3, home[p + 3]));
		CU_ASSERT_EQUAL(nfetch, fetches);
		closed += stats().mprotects - m;
	}
	CU_ASSERT_EQUAL(closed, 1);
	CU_ASSERT_EQUAL(stats().samples[0], 1); /* answered when read */
	CU_ASSERT_EQUAL(stats().samples_read[0], 1);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, ME), 0);
	CU_ASSERT_EQUAL(stats().samples[0], 1);

	/* 30 and 40, nothing read; the release invalidates them all */
	for (uint32_t f = 0; f < LM_REACH_EVERY; f++)
		CU_ASSERT_EQUAL(pg(30 + 10 * f)[0], home[30 + 10 * f][0]);
	home_moves_on(30, 14);
	CU_ASSERT_EQUAL(stats().samples[0], 2);
	CU_ASSERT_EQUAL(stats().samples_read[0], 1);
	fetches = nfetch;
	for (uint32_t p = 31; p <= 43; p += 2) {
		if (p == 35)
			p = 41;
		CU_ASSERT_TRUE(page_equals(p, home[p]));
	}
	CU_ASSERT(nfetch > fetches); /* refetched, the sample too */

	/* 50 and 60 (one of them samples), then written: a twin each, no
	 * fetch, the sample counted read */
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, ME), 0);
	before = stats();
	for (uint32_t f = 0; f < LM_REACH_EVERY; f++)
		CU_ASSERT_EQUAL(pg(50 + 10 * f)[0], home[50 + 10 * f][0]);
	fetches = nfetch;
	pg(51)[1] ^= 1;
	pg(53)[1] ^= 1;
	pg(61)[1] ^= 1;
	pg(63)[1] ^= 1;
	CU_ASSERT_EQUAL(nfetch, fetches);
	CU_ASSERT_EQUAL(stats().write_faults, before.write_faults + 4);
	CU_ASSERT_EQUAL(flush_entries(e, 8), 4);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, ME), 0);
	CU_ASSERT_EQUAL(stats().samples[0], before.samples[0] + 1);
	CU_ASSERT_EQUAL(stats().samples_read[0], before.samples_read[0] + 1);
	lm_region_set_prefetch(0);
	lm_region_fini();
}

/* The reach follows the program (reach.h): faults whose neighbours are
 * never read take the depth of the pages after them down to none (then
 * a probe of one page now and then), faults whose neighbours are all
 * read take it back up to `prefetch`. */
static void test_reach_follows_what_is_read(void)
{
	unsigned rounds, runs;

	if (setup())
		return;
	lm_region_set_prefetch(7);
	CU_ASSERT_EQUAL(stats().reach[0], 7);
	for (rounds = 0; rounds < 200 && stats().reach[0] > 0; rounds++) {
		CU_ASSERT_EQUAL(pg(0)[0], home[0][0]);
		home_moves_on(0, 8);
	}
	CU_ASSERT_EQUAL(stats().reach[0], 0);
	CU_ASSERT_EQUAL(stats().samples_read[0], 0);
	CU_ASSERT(stats().samples[0] >= 3 * LM_REACH_WINDOW);
	runs = nruns;
	for (unsigned i = 0; i < LM_REACH_PROBE; i++) {
		CU_ASSERT_EQUAL(pg(0)[0], home[0][0]);
		home_moves_on(0, 8);
	}
	CU_ASSERT_EQUAL(nruns - runs, 1); /* the probe */
	CU_ASSERT_EQUAL(run_after, 1);

	for (rounds = 0; rounds < 400 && stats().reach[0] < 7; rounds++) {
		CU_ASSERT_EQUAL(pg(0)[0], home[0][0]);
		for (uint32_t p = 1; p < 8; p++)
			if (lm_region_page_version(p) != UINT32_MAX)
				CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
		home_moves_on(0, 8);
	}
	CU_ASSERT_EQUAL(stats().reach[0], 7);
	CU_ASSERT(stats().samples_read[0] >= 2 * LM_REACH_WINDOW);
	CU_ASSERT_EQUAL(stats().reach[1], 7); /* no stride: untouched */
	lm_region_set_prefetch(0);
	lm_region_fini();
}

static void test_write_after_read_twins_without_fetch(void)
{
	struct entry e[4];
	uint8_t want[PAGE];

	if (setup())
		return;
	CU_ASSERT_EQUAL(pg(5)[100], home[5][100]);
	pg(5)[100] = (uint8_t)~home[5][100];
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL(stats().read_faults, 1);
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	pg(5)[200] = 0xaa;
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(pg(5)[100], (uint8_t)~home[5][100]);

	memcpy(want, home[5], PAGE);
	want[100] = (uint8_t)~home[5][100];
	want[200] = 0xaa;
	CU_ASSERT_TRUE(page_equals(5, want));
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 1);
	CU_ASSERT_EQUAL(e[0].page, 5);
	CU_ASSERT_EQUAL(diff_bytes(&e[0]), home[5][200] == 0xaa ? 1 : 2);
	CU_ASSERT_EQUAL(nfetch, 1);
	lm_region_fini();
}

static void test_write_to_invalid_page_fetches_then_twins(void)
{
	struct entry e[4];
	uint8_t want[PAGE];

	if (setup())
		return;
	pg(7)[0] = (uint8_t)~home[7][0];
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL(stats().fetches, 1);
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(stats().read_faults, 0);
	CU_ASSERT_EQUAL(lm_region_page_version(7), HOME_VERSION);
	/* the rest of the page is the home's data, fetched under the write */
	memcpy(want, home[7], PAGE);
	want[0] = (uint8_t)~home[7][0];
	CU_ASSERT_TRUE(page_equals(7, want));

	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 1);
	CU_ASSERT_EQUAL(e[0].page, 7);
	/* one run: gap 0, length 1, the new byte */
	CU_ASSERT_EQUAL(e[0].len, 2 + 1);
	CU_ASSERT_EQUAL(diff_bytes(&e[0]), 1);
	CU_ASSERT_EQUAL(e[0].diff[2], (uint8_t)~home[7][0]);
	lm_region_fini();
}

/* A fetch's pages are written through the region's memory file
 * (lm_region_fill) and a twin chunk's pages are given when it is mapped
 * (mem.h): the copies of a fetch with its neighbours and of a single page
 * take no page fault (ru_minflt around each copy); a write fault that
 * maps the first twin chunk takes one or two (counted by a perf event
 * where one may be opened): its own and the private mapping's first
 * touch of the page, for its twin, not one more per twin of the chunk
 * (34 without), nor the view's at the access it returns to (give_view);
 * and a read fault on another invalid page takes its own alone. */
static void test_fetches_and_twins_write_present_pages(void)
{
	int counter = fault_counter();
	long before, after, read_before, read_after;

	if (setup())
		goto out;
	lm_region_set_prefetch(3);
	nruns = 0;
	count_copy_faults = true;
	copy_faults = 0;
	CU_ASSERT_EQUAL(pg(20)[1], home[20][1]); /* brings 21 and 23 */
	CU_ASSERT_EQUAL(nruns, 1);
	lm_region_set_prefetch(0);
	before = faults_taken(counter);
	pg(40)[5] = 1; /* one page fetched, then the first twin */
	after = faults_taken(counter);
	read_before = faults_taken(counter);
	CU_ASSERT_EQUAL(pg(50)[5], home[50][5]);
	read_after = faults_taken(counter);
	count_copy_faults = false;
	CU_ASSERT_EQUAL(nfetch, 3);
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(copy_faults, 0);
	if (!lm_mem_populating()) {
		CU_PASS("a kernel without MADV_POPULATE_WRITE: faults allowed");
	} else {
		if (counter < 0) {
			CU_PASS("no perf events here: twin faults not counted");
		} else {
			CU_ASSERT(after - before >= 1 && after - before <= 2);
			CU_ASSERT_EQUAL(read_after - read_before, 1);
		}
	}
	lm_region_fini();
out:
	if (counter >= 0)
		close(counter);
}

/* A fetch fills the private view with the pages that came and no others
 * (lm_region_fill writes them through the memory file), with the home's
 * data; lm_region_fill copies anything that is not a page of the view. */
static void test_fetch_fills_only_its_pages(void)
{
	struct entry e[4];
	unsigned char held[16];
	uint8_t buf[PAGE / 2];

	if (setup())
		return;
	lm_region_set_prefetch(4);
	CU_ASSERT_EQUAL(pg(20)[0], home[20][0]); /* 21 and 23 come along */
	CU_ASSERT_FATAL(fetch_view != NULL);
	memset(held, 2, sizeof(held));
	CU_ASSERT_EQUAL_FATAL(mincore(fetch_view + (size_t)16 * PAGE,
				      sizeof(held) * PAGE, held), 0);
	for (uint32_t i = 0; i < sizeof(held); i++)
		CU_ASSERT_EQUAL(held[i] & 1, 16 + i == 20 || 16 + i == 21 ||
						     16 + i == 23);
	CU_ASSERT_TRUE(page_equals(21, home[21]));
	CU_ASSERT_TRUE(page_equals(23, home[23]));
	/* written (its twin taken through the mapping), then fetched again:
	 * copied through the mapping, the home's new bytes in */
	pg(21)[0] = (uint8_t)~home[21][0];
	CU_ASSERT_EQUAL(flush_entries(e, 4), 1);
	home_moves_on(21, 1);
	CU_ASSERT_TRUE(page_equals(21, home[21]));
	lm_region_fill(buf, home[3], sizeof(buf));
	CU_ASSERT_EQUAL(memcmp(buf, home[3], sizeof(buf)), 0);
	lm_region_set_prefetch(0);
	lm_region_fini();
}

static void test_flush_yields_exactly_the_changed_bytes(void)
{
	static const uint32_t offs[] = { 0, 1, 2, 63, 64, 65, 1000, 2047,
					 2048, 4000, PAGE - 1 };
	const size_t noffs = sizeof(offs) / sizeof(offs[0]);
	struct entry e[8];
	uint8_t copy[PAGE];
	struct lm_region_stats s;
	const uint8_t *data;
	size_t len;
	uint32_t count;
	int n;

	if (setup())
		return;
	/* page 1: scattered changes; page 2: rewritten with equal values
	 * only; page 40: a long run; page 9: only read */
	for (size_t i = 0; i < noffs; i++)
		pg(1)[offs[i]] = (uint8_t)(home[1][offs[i]] + 1);
	for (uint32_t i = 0; i < PAGE; i += 3)
		pg(2)[i] = home[2][i];
	for (uint32_t i = 100; i < 900; i++)
		pg(40)[i] = (uint8_t)(home[40][i] ^ 0x5a);
	CU_ASSERT_EQUAL(pg(9)[0], home[9][0]);

	n = flush_entries(e, 8);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(e[0].page, 1);
	CU_ASSERT_EQUAL(e[1].page, 40);
	CU_ASSERT_EQUAL(diff_bytes(&e[0]), noffs);
	CU_ASSERT_EQUAL(diff_bytes(&e[1]), 800);
	for (int i = 0; i < n; i++) {
		memcpy(copy, home[e[i].page], PAGE);
		CU_ASSERT_EQUAL(lm_diff_apply(copy, PAGE, e[i].diff,
					      e[i].len), 0);
		CU_ASSERT_TRUE(page_equals(e[i].page, copy));
	}
	s = stats();
	CU_ASSERT_EQUAL(s.flushed_pages, 2);
	CU_ASSERT_EQUAL(s.flushed_bytes, 2 * 8 + e[0].len + e[1].len);
	CU_ASSERT_EQUAL(s.write_faults, 3);
	CU_ASSERT_EQUAL(nfetch, 4);

	/* nothing written since: an empty list */
	CU_ASSERT_EQUAL(lm_region_flush(&data, &len, &count), 0);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(count, 0);
	CU_ASSERT_EQUAL(stats().flushed_pages, 2);
	lm_region_fini();
}

/* A page a flush found written stays open (writable, its twin now what
 * was sent): the next write takes no fault and the next flush sends only
 * the new bytes.  Three flushes in a row that find it unchanged close
 * it: the write after that faults again. */
static void test_written_pages_stay_open_until_clean(void)
{
	struct entry e[4];

	if (setup())
		return;
	pg(2)[0] = (uint8_t)~home[2][0];
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 1);
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	/* the copy stays valid and unchanged in version */
	CU_ASSERT_EQUAL(lm_region_page_version(2), HOME_VERSION);
	CU_ASSERT_EQUAL(pg(2)[0], (uint8_t)~home[2][0]);
	CU_ASSERT_EQUAL(stats().read_faults, 0);

	pg(2)[1] = (uint8_t)~home[2][1];
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(nfetch, 1);
	/* the twin holds the first write: only the second is sent */
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 1);
	CU_ASSERT_EQUAL(e[0].len, 2 + 1);
	CU_ASSERT_EQUAL(e[0].diff[0], 1); /* offset 1: the first gap */
	/* nothing written since: nothing sent; still open after two such
	 * flushes, closed after the third */
	CU_ASSERT_EQUAL(flush_entries(e, 4), 0);
	CU_ASSERT_EQUAL(flush_entries(e, 4), 0);
	pg(2)[3] = (uint8_t)~home[2][3];
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 1);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(flush_entries(e, 4), 0);
	pg(2)[2] = (uint8_t)~home[2][2];
	CU_ASSERT_EQUAL(stats().write_faults, 2);
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 1);
	CU_ASSERT_EQUAL(e[0].diff[0], 2);
	lm_region_fini();
}

/* Every page dirty at once needs more than one chunk of twins, and the
 * second round reuses them; adjacent pages are protected together. */
static void test_every_page_dirty_then_again(void)
{
	static struct entry e[NPAGES + 1];

	if (setup())
		return;
	for (int round = 0; round < 2; round++) {
		for (uint32_t p = 0; p < NPAGES; p++)
			pg(p)[p] = (uint8_t)(home[p][p] + 1 + round);
		/* the second round finds them open */
		CU_ASSERT_EQUAL(stats().write_faults, (uint64_t)NPAGES);
		CU_ASSERT_EQUAL_FATAL(flush_entries(e, NPAGES + 1),
				      (int)NPAGES);
		for (uint32_t p = 0; p < NPAGES; p++) {
			CU_ASSERT_EQUAL(e[p].page, p);
			CU_ASSERT_EQUAL(diff_bytes(&e[p]), 1);
		}
	}
	CU_ASSERT_EQUAL(nfetch, NPAGES);
	lm_region_fini();
}

static void test_notices_invalidate_only_older_copies(void)
{
	const struct lm_notice notices[] = {
		NOTE(0, HOME_VERSION - 1), /* older than the copy */
		NOTE(1, HOME_VERSION),     /* the copy's own version */
		NOTE(2, HOME_VERSION + 1), /* newer */
		NOTE(3, HOME_VERSION + 4), /* page never fetched */
	};

	if (setup())
		return;
	for (uint32_t p = 0; p < 3; p++)
		CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
	home[2][0] ^= 0xff;
	home_version[2] = HOME_VERSION + 1;

	CU_ASSERT_EQUAL(lm_region_apply_notices(notices, 4, ME), 0);
	CU_ASSERT_EQUAL(stats().invalidations, 1);
	CU_ASSERT_EQUAL(lm_region_page_version(0), HOME_VERSION);
	CU_ASSERT_EQUAL(lm_region_page_version(1), HOME_VERSION);
	CU_ASSERT_EQUAL(lm_region_page_version(2), UINT32_MAX);
	CU_ASSERT_EQUAL(lm_region_page_version(3), UINT32_MAX);

	CU_ASSERT_EQUAL(nfetch, 3);
	CU_ASSERT_EQUAL(pg(2)[0], home[2][0]);
	CU_ASSERT_EQUAL(nfetch, 4);
	CU_ASSERT_EQUAL(lm_region_page_version(2), HOME_VERSION + 1);
	CU_ASSERT_EQUAL(pg(0)[0], home[0][0]);
	CU_ASSERT_EQUAL(nfetch, 4);

	/* applied again, the same notices change nothing (I3) */
	CU_ASSERT_EQUAL(lm_region_apply_notices(notices, 4, ME), 0);
	CU_ASSERT_EQUAL(stats().invalidations, 1);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, ME), 0);
	lm_region_fini();
}

static void test_notice_for_dirty_page_is_refused(void)
{
	const struct lm_notice newer[] = { NOTE(0, HOME_VERSION + 1),
					   NOTE(3, HOME_VERSION + 1) };
	const struct lm_notice same = NOTE(3, HOME_VERSION);
	const struct lm_notice outside = NOTE(NPAGES, 1);
	struct entry e[2];

	if (setup())
		return;
	CU_ASSERT_EQUAL(pg(0)[0], home[0][0]);
	pg(3)[0] = (uint8_t)~home[3][0];
	CU_ASSERT_EQUAL(lm_region_apply_notices(newer, 2, ME), LM_EINVAL);
	/* nothing changed: page 0 still valid, page 3 still writable */
	CU_ASSERT_EQUAL(lm_region_page_version(0), HOME_VERSION);
	CU_ASSERT_EQUAL(lm_region_page_version(3), HOME_VERSION);
	pg(3)[1] = (uint8_t)~home[3][1];
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(stats().invalidations, 0);

	CU_ASSERT_EQUAL(lm_region_apply_notices(&same, 1, ME), 0);
	CU_ASSERT_EQUAL(lm_region_apply_notices(&outside, 1, ME), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 1, ME), LM_EINVAL);

	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 2), 1);
	CU_ASSERT_EQUAL(lm_region_apply_notices(newer, 2, ME), 0);
	CU_ASSERT_EQUAL(stats().invalidations, 2);
	CU_ASSERT_EQUAL(lm_region_page_version(3), UINT32_MAX);
	lm_region_fini();
}

/* Writes `text` at off of page, flushes it (one entry expected) and
 * applies the diff to the fake home, whose version goes up by one. */
static void write_flush_home(uint32_t page, size_t off, const char *text)
{
	struct entry e[2];

	memcpy((void *)(pg(page) + off), text, strlen(text));
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 2), 1);
	CU_ASSERT_EQUAL(e[0].page, page);
	CU_ASSERT_EQUAL(lm_diff_apply(home[page], PAGE, e[0].diff, e[0].len),
			0);
	home_version[page]++;
}

/* Sole writer: the home applied only our diffs since our copy's version,
 * so the copy is the home's page at the notice's version: it stays valid
 * with that version, nothing is fetched, and applying it again is a
 * no-op. */
static void test_sole_writer_keeps_own_copy(void)
{
	const struct lm_notice n[] = {
		{ 4, HOME_VERSION + 1, HOME_VERSION, ME, 0 },
		{ 5, HOME_VERSION + 2, HOME_VERSION, ME, 0 },
	};

	if (setup())
		return;
	write_flush_home(4, 10, "mine");
	write_flush_home(5, 0, "one");
	write_flush_home(5, 100, "two"); /* two lists, one epoch */
	CU_ASSERT_EQUAL(nfetch, 2);
	CU_ASSERT_EQUAL(lm_region_apply_notices(n, 2, ME), 0);
	CU_ASSERT_EQUAL(stats().kept, 2);
	CU_ASSERT_EQUAL(stats().invalidations, 0);
	CU_ASSERT_EQUAL(lm_region_page_version(4), HOME_VERSION + 1);
	CU_ASSERT_EQUAL(lm_region_page_version(5), HOME_VERSION + 2);
	CU_ASSERT_TRUE(page_equals(4, home[4]));
	CU_ASSERT_TRUE(page_equals(5, home[5]));
	CU_ASSERT_EQUAL(nfetch, 2);
	/* both are open: page 5 took its second write without a fault,
	 * and so does page 4 now; nothing is fetched */
	CU_ASSERT_EQUAL(stats().write_faults, 2);
	pg(4)[20] = 1;
	CU_ASSERT_EQUAL(stats().write_faults, 2);
	CU_ASSERT_EQUAL(nfetch, 2);
	write_flush_home(4, 30, "x");
	CU_ASSERT_EQUAL(lm_region_apply_notices(n, 2, ME), 0);
	CU_ASSERT_EQUAL(stats().kept, 2);
	CU_ASSERT_EQUAL(lm_region_page_version(4), HOME_VERSION + 1);
	lm_region_fini();
}

/* Every other notice newer than the copy invalidates it: another writer,
 * several writers, or a copy not at the epoch's base (it lacks some of
 * the changes, or holds a later one the notice does not cover). */
static void test_sole_writer_rule_needs_every_condition(void)
{
	const struct lm_notice n[] = {
		{ 0, HOME_VERSION + 1, HOME_VERSION, ME + 1, 0 },
		{ 1, HOME_VERSION + 1, HOME_VERSION, LM_WRITER_MANY, 0 },
		{ 2, HOME_VERSION + 1, HOME_VERSION - 1, ME, 0 },
		{ 3, HOME_VERSION + 2, HOME_VERSION + 1, ME, 0 },
	};

	if (setup())
		return;
	for (uint32_t p = 0; p < 4; p++)
		write_flush_home(p, 0, "w");
	CU_ASSERT_EQUAL(lm_region_apply_notices(n, 4, ME), 0);
	CU_ASSERT_EQUAL(stats().kept, 0);
	CU_ASSERT_EQUAL(stats().invalidations, 4);
	for (uint32_t p = 0; p < 4; p++)
		CU_ASSERT_EQUAL(lm_region_page_version(p), UINT32_MAX);
	/* a notice naming ME is not ours when we are another rank */
	write_flush_home(7, 0, "w");
	{
		const struct lm_notice mine = { 7, HOME_VERSION + 1,
						HOME_VERSION, ME, 0 };

		CU_ASSERT_EQUAL(lm_region_apply_notices(&mine, 1, ME + 1), 0);
	}
	CU_ASSERT_EQUAL(stats().kept, 0);
	CU_ASSERT_EQUAL(stats().invalidations, 5);
	CU_ASSERT_EQUAL(lm_region_page_version(7), UINT32_MAX);
	lm_region_fini();
}

/* Builds a diff list of one-run updates: page p[i] gets `len` bytes of
 * value val[i] at offset off[i] (a malformed run when len[i] is 0). */
static size_t update_list(uint8_t *buf, size_t cap, const uint32_t *p,
			  const uint32_t *off, const uint32_t *len,
			  const uint8_t *val, int n)
{
	size_t used = 0;

	for (int i = 0; i < n; i++) {
		uint8_t d[10 + 64];
		size_t hdr = test_run_header(d, off[i], len[i]);

		memset(d + hdr, val[i], len[i]);
		CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(buf, cap, &used, p[i],
							  d, hdr + len[i]), 0);
	}
	return used;
}

/* Updates (docs/dsm.md "Updates"): a clean copy at the notice's base with
 * an update takes the bytes and the notice's version and stays readable
 * without a fetch; no update, a copy not at base, or a malformed update
 * invalidates as before. */
static void test_release_updates_keep_copies(void)
{
	const struct lm_notice n[] = {
		{ 1, HOME_VERSION + 1, HOME_VERSION, LM_WRITER_MANY, 0 },
		{ 2, HOME_VERSION + 1, HOME_VERSION, LM_WRITER_MANY, 0 },
		{ 3, HOME_VERSION + 1, HOME_VERSION - 1, LM_WRITER_MANY, 0 },
		{ 4, HOME_VERSION + 1, HOME_VERSION, LM_WRITER_MANY, 0 },
		{ 5, HOME_VERSION + 1, HOME_VERSION, LM_WRITER_MANY, 0 },
	};
	/* updates for 1, 3 (wrong base), 4 (malformed: empty run); none
	 * for 2; 5 is not held */
	const uint32_t up[] = { 1, 3, 4 }, off[] = { 200, 0, 0 },
		       len[] = { 16, 4, 0 };
	const uint8_t val[] = { 0xab, 0xcd, 0xef };
	uint8_t buf[512], want[PAGE];
	struct lm_msg_diffs u = { buf, 0, 3 };
	volatile uint8_t sink;

	if (setup())
		return;
	u.len = update_list(buf, sizeof(buf), up, off, len, val, 3);
	for (uint32_t p = 1; p <= 4; p++)
		sink = pg(p)[0];
	(void)sink;
	CU_ASSERT_EQUAL(stats().fetches, 4);
	memcpy(want, home[1], PAGE);
	memset(want + 200, 0xab, 16);
	CU_ASSERT_EQUAL(lm_region_apply_release(n, 5, ME, &u), 0);
	CU_ASSERT_EQUAL(stats().updated, 1);
	CU_ASSERT_EQUAL(stats().invalidations, 3);
	CU_ASSERT_EQUAL(lm_region_page_version(1), HOME_VERSION + 1);
	CU_ASSERT_TRUE(page_equals(1, want));
	CU_ASSERT_EQUAL(stats().fetches, 4);
	for (uint32_t p = 2; p <= 4; p++)
		CU_ASSERT_EQUAL(lm_region_page_version(p), UINT32_MAX);
	/* still read-only: a write twins without a fetch */
	pg(1)[0] = 7;
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	CU_ASSERT_EQUAL(stats().fetches, 4);
	lm_region_fini();
}

/* An update that goes bad after a good run (the client checks each run
 * as it writes it) leaves the copy invalid: the next read fetches the
 * page whole, none of the good run's bytes are left.  Both a read-only
 * copy and an open one (its twin written too) are dropped. */
static void test_update_bad_after_good_run_drops_copy(void)
{
	const struct lm_notice n[] = {
		{ 1, HOME_VERSION + 1, HOME_VERSION, LM_WRITER_MANY, 0 },
		{ 2, HOME_VERSION + 1, HOME_VERSION, LM_WRITER_MANY, 0 },
	};
	uint8_t d[64], buf[256];
	size_t dl = 0, used = 0;
	struct lm_msg_diffs u = { buf, 0, 2 };
	struct entry e[2];
	volatile uint8_t sink;

	if (setup())
		return;
	/* 16 bytes of 0xef at 0, then a run past the page's end */
	dl = test_run_header(d, 0, 16);
	memset(d + dl, 0xef, 16);
	dl += 16;
	dl += test_run_header(d + dl, PAGE, 8);
	memset(d + dl, 0xef, 8);
	dl += 8;
	for (uint32_t p = 1; p <= 2; p++)
		CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(buf, sizeof(buf),
							  &used, p, d, dl), 0);
	u.len = used;
	sink = pg(1)[0];
	(void)sink;
	pg(2)[100] = (uint8_t)~home[2][100];
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 2), 1); /* page 2 open */
	CU_ASSERT_EQUAL(lm_region_apply_release(n, 2, ME, &u), 0);
	CU_ASSERT_EQUAL(stats().updated, 0);
	CU_ASSERT_EQUAL(stats().invalidations, 2);
	CU_ASSERT_EQUAL(lm_region_page_version(1), UINT32_MAX);
	CU_ASSERT_EQUAL(lm_region_page_version(2), UINT32_MAX);
	CU_ASSERT_TRUE(page_equals(1, home[1]));
	CU_ASSERT_EQUAL(flush_entries(e, 2), 0); /* nothing of it is ours */
	lm_region_fini();
}

/* An open page (left writable by a flush) that takes an update takes it
 * in its twin too: the next flush sends only what this process wrote,
 * never the update's bytes as its own.  A notice without an update
 * closes it like any copy, and its next access fetches. */
static void test_open_pages_take_updates_and_notices(void)
{
	const struct lm_notice n = { 3, HOME_VERSION + 1, HOME_VERSION,
				     LM_WRITER_MANY, 0 };
	const struct lm_notice later = NOTE(3, HOME_VERSION + 2);
	const uint32_t up = 3, off = 200, len = 16;
	const uint8_t val = 0xab;
	uint8_t buf[256];
	struct lm_msg_diffs u = { buf, 0, 1 };
	struct entry e[2];

	if (setup())
		return;
	u.len = update_list(buf, sizeof(buf), &up, &off, &len, &val, 1);
	pg(3)[0] = (uint8_t)~home[3][0];
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 2), 1); /* page 3 open */
	CU_ASSERT_EQUAL(lm_region_apply_release(&n, 1, ME, &u), 0);
	CU_ASSERT_EQUAL(stats().updated, 1);
	CU_ASSERT_EQUAL(pg(3)[200], 0xab);
	CU_ASSERT_EQUAL(flush_entries(e, 2), 0); /* the update is not ours */
	pg(3)[1] = (uint8_t)~home[3][1];
	CU_ASSERT_EQUAL(stats().write_faults, 1); /* still open */
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 2), 1);
	CU_ASSERT_EQUAL(e[0].len, 2 + 1);
	CU_ASSERT_EQUAL(e[0].diff[0], 1);
	/* open again; another writer's notice closes it */
	CU_ASSERT_EQUAL(lm_region_apply_notices(&later, 1, ME), 0);
	CU_ASSERT_EQUAL(lm_region_page_version(3), UINT32_MAX);
	CU_ASSERT_EQUAL(stats().fetches, 1);
	CU_ASSERT_EQUAL(pg(3)[5], home[3][5]);
	CU_ASSERT_EQUAL(stats().fetches, 2);
	/* written again in the same interval: one entry, not two */
	pg(3)[6] = (uint8_t)~home[3][6];
	CU_ASSERT_EQUAL(flush_entries(e, 2), 1);
	CU_ASSERT_EQUAL(flush_entries(e, 2), 0);
	lm_region_fini();
}

/* A run of one process: after lm_region_make_private the pages read as
 * zeros and take writes without a fault, a fetch or a twin; a flush has
 * nothing to send and notices change nothing.  Only an untouched region
 * can be made private. */
static void test_private_region_tracks_nothing(void)
{
	const struct lm_notice n = NOTE(2, HOME_VERSION + 1);
	const uint8_t *data = NULL;
	size_t len = 1;
	uint32_t count = 1;

	if (setup())
		return;
	CU_ASSERT_EQUAL(lm_region_make_private(), 0);
	CU_ASSERT_EQUAL(pg(2)[5], 0);
	pg(2)[5] = 42;
	pg(NPAGES - 1)[PAGE - 1] = 7;
	CU_ASSERT_EQUAL(pg(2)[5], 42);
	CU_ASSERT_EQUAL(stats().read_faults + stats().write_faults, 0);
	CU_ASSERT_EQUAL(stats().fetches, 0);
	CU_ASSERT_EQUAL(lm_region_flush(&data, &len, &count), 0);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(count, 0);
	CU_ASSERT_EQUAL(lm_region_apply_notices(&n, 1, ME), 0);
	CU_ASSERT_EQUAL(pg(2)[5], 42);
	CU_ASSERT_EQUAL(stats().invalidations, 0);
	lm_region_fini();

	if (setup())
		return;
	CU_ASSERT_EQUAL(pg(3)[0], home[3][0]); /* fetched: no longer new */
	CU_ASSERT_EQUAL(lm_region_make_private(), LM_EINVAL);
	lm_region_fini();
	CU_ASSERT_EQUAL(lm_region_make_private(), LM_EINVAL);
}

/* A dirty page holds writes the home has not seen: even a notice naming
 * us is refused, and nothing changes. */
static void test_sole_writer_dirty_page_refused(void)
{
	const struct lm_notice n = { 6, HOME_VERSION + 1, HOME_VERSION, ME,
				     0 };

	if (setup())
		return;
	pg(6)[0] = 9;
	CU_ASSERT_EQUAL(lm_region_apply_notices(&n, 1, ME), LM_EINVAL);
	CU_ASSERT_EQUAL(stats().kept, 0);
	CU_ASSERT_EQUAL(lm_region_page_version(6), HOME_VERSION);
	pg(6)[1] = 9; /* still writable */
	CU_ASSERT_EQUAL(stats().write_faults, 1);
	lm_region_fini();
}

/* ---- protection changes in batches ------------------------------------ */

static uint64_t mprotects(void)
{
	return stats().mprotects;
}

/* Reads every page of [first, end) so that each holds a valid copy. */
static void read_pages(uint32_t first, uint32_t end)
{
	for (uint32_t p = first; p < end; p++)
		CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
}

/* Notices for every page of the region, newest page first, each newer
 * than the copy; the home's pages change under them. */
static void notices_for_every_page(struct lm_notice *n, uint32_t version)
{
	for (uint32_t i = 0; i < NPAGES; i++) {
		uint32_t p = NPAGES - 1 - i;

		n[i] = (struct lm_notice)NOTE(p, version);
		home[p][0] ^= 0xff;
		home_version[p] = version;
	}
}

/* LU's notices name long runs of pages: 64 adjacent ones, listed in
 * descending order, are closed by one mprotect, and every one of them
 * faults afterwards and gets the home's new data (a page left readable
 * would show the old byte without a fault). */
static void test_contiguous_notices_close_pages_in_one_mprotect(void)
{
	static struct lm_notice n[NPAGES];
	uint64_t before;

	if (setup())
		return;
	read_pages(0, NPAGES);
	notices_for_every_page(n, HOME_VERSION + 1);
	before = mprotects();
	CU_ASSERT_EQUAL(lm_region_apply_notices(n, NPAGES, ME), 0);
	CU_ASSERT_EQUAL(mprotects() - before, 1);
	CU_ASSERT_EQUAL(stats().invalidations, NPAGES);
	for (uint32_t p = 0; p < NPAGES; p++) {
		CU_ASSERT_EQUAL(lm_region_page_version(p), UINT32_MAX);
		CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
		CU_ASSERT_EQUAL(stats().read_faults, (uint64_t)NPAGES + p + 1);
		CU_ASSERT_EQUAL(lm_region_page_version(p), HOME_VERSION + 1);
	}
	CU_ASSERT_EQUAL(nfetch, 2 * NPAGES);

	/* the benchmark's baseline: one mprotect per page */
	notices_for_every_page(n, HOME_VERSION + 2);
	lm_region_set_batching(0);
	before = mprotects();
	CU_ASSERT_EQUAL(lm_region_apply_notices(n, NPAGES, ME), 0);
	lm_region_set_batching(1);
	CU_ASSERT_EQUAL(mprotects() - before, NPAGES);
	CU_ASSERT_EQUAL(stats().invalidations, 2 * NPAGES);
	CU_ASSERT_EQUAL(pg(NPAGES / 2)[0], home[NPAGES / 2][0]);
	CU_ASSERT_EQUAL(nfetch, 2 * NPAGES + 1);
	lm_region_fini();
}

/* Runs of invalidated pages broken by a kept sole writer's copy, a copy
 * the notice is not newer than, a page with no notice and pages never
 * fetched: one window closed by one call (one TLB flush) whatever the
 * order of the notices, the copies that stay opened again, and every
 * page ends as the rules of docs/dsm.md say. */
static void test_mixed_notices_close_one_window(void)
{
	enum { SPAN = 24 };
	/* runs [0,3] [5,7] [9,11]+[16,19] [21,23] */
	static const uint8_t closed[SPAN] = {
		1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1,
		0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1,
	};
	struct lm_notice n[SPAN];
	uint32_t count = 0;
	uint64_t before, faults;

	if (setup())
		return;
	read_pages(0, 12);
	read_pages(16, SPAN);
	write_flush_home(4, 0, "mine"); /* page 4: our own, kept */
	for (uint32_t i = 0; i < SPAN; i++) {
		uint32_t p = i * 7 % SPAN; /* a permutation of the span */

		if (p == 4)
			n[count++] = (struct lm_notice){ 4, HOME_VERSION + 1,
							 HOME_VERSION, ME, 0 };
		else if (p == 8) /* not newer than the copy */
			n[count++] = (struct lm_notice)NOTE(8, HOME_VERSION);
		else if (p == 13 || closed[p]) /* 13: never fetched */
			n[count++] = (struct lm_notice)NOTE(p,
							    HOME_VERSION + 1);
		if (closed[p]) {
			home[p][0] ^= 0xff;
			home_version[p] = HOME_VERSION + 1;
		}
	}
	/* [0,34) closed by one call; the copies that stay, 4, 8 and 20,
	 * opened again by one each */
	before = mprotects();
	CU_ASSERT_EQUAL(lm_region_apply_notices(n, count, ME), 0);
	CU_ASSERT_EQUAL(mprotects() - before, 4);
	CU_ASSERT_EQUAL(stats().invalidations, 17);
	CU_ASSERT_EQUAL(stats().kept, 1);
	CU_ASSERT_EQUAL(lm_region_page_version(4), HOME_VERSION + 1);
	CU_ASSERT_EQUAL(lm_region_page_version(8), HOME_VERSION);
	CU_ASSERT_EQUAL(lm_region_page_version(20), HOME_VERSION);
	for (uint32_t p = 12; p < 16; p++)
		CU_ASSERT_EQUAL(lm_region_page_version(p), UINT32_MAX);
	for (uint32_t p = 0; p < SPAN; p++) {
		if (p >= 12 && p < 16)
			continue;
		faults = stats().read_faults;
		CU_ASSERT_EQUAL(lm_region_page_version(p) == UINT32_MAX,
				closed[p]);
		CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
		CU_ASSERT_EQUAL(stats().read_faults - faults, closed[p]);
	}
	lm_region_fini();
}

/* A flush changes no protection of the pages it leaves open (they stay
 * writable: the twin takes what was sent), and closes the ones it drops:
 * a long run in one window (one call closes it whole, one TLB flush, and
 * one opens the run read-only), a few pages far apart run by run. */
static void test_flush_leaves_open_pages_alone_and_closes_runs(void)
{
	static const uint32_t two_runs[] = { 1, 50, 2, 51, 3 };
	static struct entry e[NPAGES + 1];
	uint64_t before;

	if (setup())
		return;
	for (uint32_t p = 40; p >= 9; p--)
		pg(p)[1] = (uint8_t)(home[p][1] + 1);
	before = mprotects();
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, NPAGES + 1), 32);
	CU_ASSERT_EQUAL(mprotects() - before, 0);
	for (uint32_t i = 0; i < 32; i++)
		CU_ASSERT_EQUAL(e[i].page, 40 - i); /* still in write order */
	/* every page is open now: writes take no fault, nothing fetched */
	for (uint32_t p = 9; p <= 40; p++)
		pg(p)[2] = (uint8_t)(home[p][2] + 1);
	CU_ASSERT_EQUAL(stats().write_faults, 32);
	CU_ASSERT_EQUAL(nfetch, 32);
	before = mprotects();
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, NPAGES + 1), 32);
	CU_ASSERT_EQUAL(mprotects() - before, 0);
	for (uint32_t i = 0; i < 32; i++) /* only what is new since */
		CU_ASSERT_EQUAL(diff_bytes(&e[i]), 1);
	/* the third flush in a row that finds them unchanged closes them,
	 * written downwards but one run: the window [9,43) (widened past
	 * the kernel's ceiling of 33 pages) closed, [9,41) opened read-only */
	CU_ASSERT_EQUAL(flush_entries(e, NPAGES + 1), 0);
	CU_ASSERT_EQUAL(flush_entries(e, NPAGES + 1), 0);
	before = mprotects();
	CU_ASSERT_EQUAL(flush_entries(e, NPAGES + 1), 0);
	CU_ASSERT_EQUAL(mprotects() - before, 2);
	pg(20)[3] = 0; /* closed: a write faults again */
	CU_ASSERT_EQUAL(stats().write_faults, 33);
	CU_ASSERT_EQUAL(flush_entries(e, NPAGES + 1), 1);

	/* pages faulted in and left unchanged close at the next flush: two
	 * runs written in turn take two calls (a window [1,52) would take
	 * one and five to open [1,4), [9,20), 20, [21,41) and [50,52) again:
	 * more calls than the five pages' flushes it saves) */
	for (size_t i = 0; i < sizeof(two_runs) / sizeof(two_runs[0]); i++)
		pg(two_runs[i])[0] = home[two_runs[i]][0];
	CU_ASSERT_EQUAL(stats().write_faults, 33 + 5);
	before = mprotects();
	CU_ASSERT_EQUAL(flush_entries(e, NPAGES + 1), 0);
	CU_ASSERT_EQUAL(mprotects() - before, 2);
	pg(50)[1] = 0;
	CU_ASSERT_EQUAL(stats().write_faults, 33 + 6);
	lm_region_fini();
}

/* A run of pages to protect goes on across pages the view already gives
 * that protection, and only across those: closing written pages takes
 * the read-only copies between them along, invalidating copies takes
 * the invalid pages between them along; a writable page, or an invalid
 * one between pages to close, keeps two runs apart.  The pages taken
 * along stay as they were: read-only copies read without a fault,
 * invalid pages fault and fetch, a writable page takes writes. */
static void test_runs_join_across_pages_protected_so(void)
{
	static const uint32_t mid[] = { 2, 3 }, sides[] = { 0, 1, 4, 5 },
			      apart[] = { 8, 10 };
	static struct entry e[NPAGES + 1];
	uint64_t before, faults;

	if (setup())
		return;
	read_pages(0, 6); /* 6 and 7 never read: invalid */
	read_pages(8, 12);
	for (uint32_t p = 0; p < 11; p++) /* 2, 3 stay read-only */
		if (p != 2 && p != 3 && p != 6 && p != 7)
			pg(p)[0] = (uint8_t)~home[p][0];
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, NPAGES + 1), 7);
	for (int i = 0; i < 2; i++) { /* 9 written at every flush */
		pg(9)[1] = (uint8_t)(pg(9)[1] + 1);
		CU_ASSERT_EQUAL(flush_entries(e, NPAGES + 1), 1);
	}
	before = mprotects();
	pg(9)[1] = (uint8_t)(pg(9)[1] + 1);
	CU_ASSERT_EQUAL(flush_entries(e, NPAGES + 1), 1);
	/* the third quiet flush closes [0,5] in one call, 8 and 10 apart */
	CU_ASSERT_EQUAL(mprotects() - before, 3);
	faults = stats().read_faults;
	CU_ASSERT_EQUAL(pg(2)[0] + pg(3)[0], home[2][0] + home[3][0]);
	CU_ASSERT_EQUAL(stats().read_faults, faults);
	CU_ASSERT_EQUAL(pg(6)[0] + pg(7)[0], home[6][0] + home[7][0]);
	CU_ASSERT_EQUAL(stats().read_faults, faults + 2);
	faults = stats().write_faults;
	pg(9)[2] = 1;
	CU_ASSERT_EQUAL(stats().write_faults, faults);
	for (uint32_t p = 0; p < 6; p++)
		pg(p)[2] = (uint8_t)~home[p][2];
	CU_ASSERT_EQUAL(stats().write_faults - faults, 6);
	lm_region_fini();

	if (setup())
		return;
	read_pages(0, 12);
	before = mprotects();
	home_moves_on_list(mid, 2);
	CU_ASSERT_EQUAL(mprotects() - before, 1);
	before = mprotects();
	home_moves_on_list(sides, 4); /* across 2 and 3 */
	CU_ASSERT_EQUAL(mprotects() - before, 1);
	before = mprotects();
	home_moves_on_list(apart, 2); /* 9 a copy between */
	CU_ASSERT_EQUAL(mprotects() - before, 2);
	for (uint32_t p = 0; p < 12; p++) {
		bool invalid = p < 6 || p == 8 || p == 10;

		CU_ASSERT_EQUAL(lm_region_page_version(p) == UINT32_MAX,
				invalid);
		faults = stats().read_faults;
		CU_ASSERT_EQUAL(pg(p)[0], home[p][0]);
		CU_ASSERT_EQUAL(stats().read_faults - faults, invalid);
	}
	lm_region_fini();
}

/* A thread keeps writing while another flushes, pages going quiet and
 * busy again so that some close under its hands: every write reaches the
 * flushed diffs, none is lost between a page's encoding and its twin's
 * update or its closing.  A burst of 500 rounds lasts microseconds, too
 * short for the three quiet flushes that close a page, so between bursts
 * the writer waits for a few flushes (up to 1 s, should the flusher not
 * get the CPU): the pages that went quiet close whatever the timing,
 * while within a burst writes and flushes still race. */
#define RACE_PAGES 8u
#define RACE_ROUNDS 20000u
#define RACE_BURST 500u

static volatile int race_done;
static unsigned race_flushes; /* atomic: flushes finished */

static void wait_for_flushes(unsigned n)
{
	unsigned target = __atomic_load_n(&race_flushes, __ATOMIC_ACQUIRE) + n;
	uint64_t end = lm_now_us() + 1000000u;

	while (__atomic_load_n(&race_flushes, __ATOMIC_ACQUIRE) < target &&
	       lm_now_us() < end)
		sched_yield();
}

static void *write_in_bursts(void *arg)
{
	(void)arg;
	for (uint32_t r = 1; r <= RACE_ROUNDS; r++) {
		if (r % RACE_BURST == 0)
			wait_for_flushes(5);
		for (uint32_t p = 0; p < RACE_PAGES; p++)
			if ((r / RACE_BURST + p) % 2 == 0)
				pg(p)[(r * 13 + p) % PAGE] = (uint8_t)r;
	}
	race_done = 1;
	return NULL;
}

static void test_writes_during_flushes_are_never_lost(void)
{
	static uint8_t model[RACE_PAGES][PAGE];
	static struct entry e[NPAGES + 1];
	unsigned flushes = 0, closed = 0;
	pthread_t th;
	int n;

	if (setup())
		return;
	memcpy(model, home, sizeof(model));
	race_done = 0;
	race_flushes = 0;
	CU_ASSERT_FATAL(pthread_create(&th, NULL, write_in_bursts, NULL) ==
			0);
	do {
		uint64_t before = mprotects();
		int done = race_done; /* a flush after the last write */

		n = flush_entries(e, NPAGES + 1);
		CU_ASSERT_FATAL(n >= 0);
		closed += mprotects() != before;
		for (int i = 0; i < n; i++) {
			CU_ASSERT_FATAL(e[i].page < RACE_PAGES);
			CU_ASSERT_FATAL(lm_diff_apply(model[e[i].page], PAGE,
						      e[i].diff,
						      e[i].len) == 0);
		}
		flushes++;
		__atomic_store_n(&race_flushes, flushes, __ATOMIC_RELEASE);
		if (done)
			break;
	} while (flushes < 10000000u);
	pthread_join(th, NULL);
	CU_ASSERT_TRUE(race_done);
	/* on a loaded host the writer can outlast the loop's bound (seen:
	 * ten million flushes while it waited for a core): its last
	 * writes go in one more flush */
	n = flush_entries(e, NPAGES + 1);
	CU_ASSERT_FATAL(n >= 0);
	for (int i = 0; i < n; i++) {
		CU_ASSERT_FATAL(e[i].page < RACE_PAGES);
		CU_ASSERT_FATAL(lm_diff_apply(model[e[i].page], PAGE,
					      e[i].diff, e[i].len) == 0);
	}
	for (uint32_t p = 0; p < RACE_PAGES; p++)
		CU_ASSERT_EQUAL(memcmp(model[p], (const void *)pg(p), PAGE), 0);
	/* the race was run: pages closed between bursts */
	CU_ASSERT_TRUE(closed > 0);
	lm_region_fini();
}

/* Two threads write different bytes of the same pages: each page is
 * fetched and twinned once, whichever thread faults first, and the diff
 * holds both writes. */
static void *write_every_page(void *arg)
{
	uint32_t t = (uint32_t)(uintptr_t)arg;

	for (uint32_t p = 0; p < NPAGES; p++)
		pg(p)[t * 8] = (uint8_t)(home[p][t * 8] + 1);
	return NULL;
}

static void test_two_threads_share_faults(void)
{
	static struct entry e[NPAGES + 1];
	pthread_t th[2];

	if (setup())
		return;
	for (uintptr_t t = 0; t < 2; t++)
		CU_ASSERT_FATAL(pthread_create(&th[t], NULL, write_every_page,
					       (void *)t) == 0);
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	CU_ASSERT_EQUAL(nfetch, NPAGES);
	CU_ASSERT_EQUAL(stats().write_faults, NPAGES);
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, NPAGES + 1), (int)NPAGES);
	for (uint32_t i = 0; i < NPAGES; i++)
		CU_ASSERT_EQUAL(diff_bytes(&e[i]), 2);
	lm_region_fini();
}

/* ---- faults that end the process (in forked children) ---------------- */

/* volatile, so the compiler neither sees nor warns about a null-ish
 * pointer */
static volatile uintptr_t outside_addr = 0x10;

static void child_start(void)
{
	struct rlimit none = { 0, 0 };

	setrlimit(RLIMIT_CORE, &none);
	alarm(CHILD_ALARM_S);
}

static int wait_child(pid_t pid)
{
	int status = 0;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/* Runs body in a child under the alarm: its exit status, or -1 when it
 * did not exit (a signal, the alarm). */
static int child_exit_status(int (*body)(void))
{
	pid_t pid = fork();
	int status;

	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		child_start();
		_exit(body());
	}
	status = wait_child(pid);
	CU_ASSERT_TRUE(WIFEXITED(status));
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Reads what the child writes until it closes the pipe. */
static void read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
}

static void test_fault_outside_region_kills_like_a_normal_program(void)
{
	pid_t pid = fork();
	int status;

	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		child_start();
		if (setup() != 0)
			_exit(2);
		if (pg(1)[0] != home[1][0]) /* the handler is live */
			_exit(3);
		*(volatile int *)outside_addr = 1;
		_exit(0);
	}
	status = wait_child(pid);
	CU_ASSERT_TRUE(WIFSIGNALED(status));
	CU_ASSERT_EQUAL(WTERMSIG(status), SIGSEGV);
}

static void exit_42_if_at_0x10(int sig, siginfo_t *si, void *uctx)
{
	(void)sig;
	(void)uctx;
	_exit(si->si_addr == (void *)0x10 ? 42 : 1);
}

static void exit_43(int sig)
{
	(void)sig;
	_exit(43);
}

static void test_fault_outside_region_goes_to_previous_handler(void)
{
	for (int mode = 0; mode < 2; mode++) {
		pid_t pid = fork();
		int status;

		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			struct sigaction sa;

			child_start();
			memset(&sa, 0, sizeof(sa));
			sigemptyset(&sa.sa_mask);
			if (mode == 0) {
				sa.sa_sigaction = exit_42_if_at_0x10;
				sa.sa_flags = SA_SIGINFO;
			} else {
				sa.sa_handler = exit_43;
			}
			sigaction(SIGSEGV, &sa, NULL);
			if (setup() != 0)
				_exit(2);
			if (pg(1)[0] != home[1][0])
				_exit(3);
			*(volatile int *)outside_addr = 1;
			_exit(0);
		}
		status = wait_child(pid);
		CU_ASSERT_TRUE(WIFEXITED(status));
		CU_ASSERT_EQUAL(WEXITSTATUS(status), mode == 0 ? 42 : 43);
	}
}

static void test_fetch_error_aborts_naming_the_page(void)
{
	char out[1024];
	int fds[2];
	pid_t pid;
	int status;

	CU_ASSERT_FATAL(pipe(fds) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDERR_FILENO);
		child_start();
		if (setup() != 0)
			_exit(2);
		fail_page = 11;
		if (pg(11)[0] == 0x77)
			_exit(4);
		_exit(0);
	}
	close(fds[1]);
	read_all(fds[0], out, sizeof(out));
	close(fds[0]);
	status = wait_child(pid);
	CU_ASSERT_TRUE(WIFSIGNALED(status));
	CU_ASSERT_EQUAL(WTERMSIG(status), SIGABRT);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "page 11 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "0x51000000b000"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, lm_strerror(LM_EIO)));
}

/* Maps single pages of alternating protection (so that none merge) until
 * the process reaches vm.max_map_count; returns how many, 0 if it never
 * did within the limit plus some slack. */
static size_t fill_map_count(void **maps, size_t cap)
{
	for (size_t i = 0; i < cap; i++) {
		maps[i] = mmap(NULL, PAGE, (i & 1) ? PROT_READ :
			       PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (maps[i] == MAP_FAILED)
			return i;
	}
	return 0;
}

/* The child of the test below: exit status 0 when every check held, the
 * number of the first one that failed, or 77 when the limit was never
 * reached. */
static int notices_at_map_count_limit(void)
{
	struct lm_notice n[14], note50 = NOTE(50, HOME_VERSION + 1);
	uint32_t count = 0;
	uint64_t reads;
	uint8_t old50;
	size_t cap = 70000, nmaps;
	void **maps;
	int rc;

	if (setup() != 0)
		return 1;
	/* mappings: [0,9) readable, page 9 never fetched, [10,64) readable */
	for (uint32_t p = 0; p < NPAGES; p++)
		if (p != 9 && pg(p)[0] != home[p][0])
			return 2;
	for (uint32_t p = 5; p < 30; p++) { /* notices for [5,9), [20,30) */
		if (p >= 9 && p < 20)
			continue;
		n[count++] = (struct lm_notice)NOTE(p, HOME_VERSION + 1);
		home[p][0] ^= 0xff;
		home_version[p] = HOME_VERSION + 1;
	}
	maps = mmap(NULL, cap * sizeof(*maps), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (maps == MAP_FAILED)
		return 3;
	nmaps = fill_map_count(maps, cap);
	if (nmaps < 16)
		return 77;

	/* The window [5,39) closes in one call (its mappings merge: no
	 * split); opening [10,20) again would split it, so those clean
	 * copies are dropped, while [30,39) joins the mapping after it. */
	rc = lm_region_apply_notices(n, count, ME);
	if (rc != 0)
		return 4;
	if (stats().invalidations != 14)
		return 5;
	for (uint32_t p = 0; p < NPAGES; p++) {
		bool noticed = (p >= 5 && p < 9) || (p >= 20 && p < 30);
		uint64_t faults = stats().read_faults;

		if (noticed || (p >= 9 && p < 20)) {
			if (lm_region_page_version(p) != UINT32_MAX)
				return 6; /* dropped or invalidated */
			continue;
		}
		/* a copy that stays is readable, no fault (a fault would
		 * need a split and abort here) */
		if (lm_region_page_version(p) != HOME_VERSION ||
		    pg(p)[0] != home[p][0] || stats().read_faults != faults)
			return 7;
	}
	/* A notice for page 50 alone goes run by run (a window would cost
	 * more), and closing it would split [30,64): the call fails and
	 * the copy stays valid at its version, readable without a fault. */
	old50 = home[50][0];
	home[50][0] ^= 0xff;
	home_version[50] = HOME_VERSION + 1;
	if (lm_region_apply_notices(&note50, 1, ME) != LM_ENOMEM ||
	    stats().invalidations != 14 ||
	    lm_region_page_version(50) != HOME_VERSION)
		return 8;
	reads = stats().read_faults;
	if (pg(50)[0] != old50 || stats().read_faults != reads)
		return 9;
	for (size_t i = nmaps - 16; i < nmaps; i++)
		munmap(maps[i], PAGE);
	/* with room again, the same notice closes it, and the invalid
	 * pages fetch the home's data */
	if (lm_region_apply_notices(&note50, 1, ME) != 0 ||
	    stats().invalidations != 15)
		return 10;
	for (uint32_t p = 5; p < 51; p++)
		if ((p < 30 || p == 50) &&
		    (pg(p)[0] != home[p][0] ||
		     lm_region_page_version(p) != home_version[p]))
			return 11;
	lm_region_fini();
	return 0;
}

/* At vm.max_map_count, mprotect cannot split a mapping.  No page may be
 * left readable with a stale copy (it would be read without a fault):
 * a window closes whole, since closing merges its mappings, and clean
 * copies that cannot be opened again without a split are dropped, to be
 * fetched again; those that can stay readable.  A page that cannot be
 * closed run by run stays valid at its version (LM_ENOMEM). */
static void test_notices_at_map_count_limit_keep_open_pages_valid(void)
{
	int status = child_exit_status(notices_at_map_count_limit);

	if (status == 77) {
		CU_PASS("vm.max_map_count not reached; skipped");
		return;
	}
	CU_ASSERT_EQUAL(status, 0);
}

/* The child of the test below: 0 when every check held, else the number
 * of the first that failed.  Without the fault's opening, its first
 * access would fault for ever, until the alarm. */
static int valid_page_left_closed(void)
{
	uint64_t reads, writes;
	unsigned fetched;
	uint8_t mine;

	if (setup() != 0)
		return 1;
	if (pg(0)[0] != home[0][0] || pg(1)[0] != home[1][0])
		return 2;
	mine = (uint8_t)~home[1][0];
	pg(1)[0] = mine; /* writable, in the dirty list */
	if (mprotect((void *)pg(0), 2 * PAGE, PROT_NONE) != 0)
		return 3;
	reads = stats().read_faults;
	writes = stats().write_faults;
	fetched = nfetch;
	if (pg(0)[0] != home[0][0] || pg(1)[0] != mine)
		return 4;
	pg(1)[1] = 7;
	if (nfetch != fetched || stats().read_faults != reads ||
	    stats().write_faults != writes ||
	    lm_region_page_version(0) != HOME_VERSION)
		return 5;
	lm_region_fini();
	return 0;
}

/* A page whose view a window left closed (opening it again failed) while
 * its state keeps it valid opens at its next fault, from the copy it
 * has: a read-only copy reads, a writable one takes writes, nothing is
 * fetched. */
static void test_fault_on_a_valid_page_left_closed_opens_it(void)
{
	CU_ASSERT_EQUAL(child_exit_status(valid_page_left_closed), 0);
}

/* The program's globals (liblemuria/globals.h): region pages mapped a
 * second time over other memory are those pages under one protection: a
 * read there fetches them, a write there is flushed as theirs, a notice
 * closes both; a read under the region's lock (the library's own) is lent
 * the bytes without a fetch and closed again at the unlock; fini leaves
 * private memory holding the pages' last bytes. */
static void test_alias_is_the_region_pages(void)
{
	const struct lm_notice newer[] = { NOTE(11, HOME_VERSION + 1) };
	const struct lm_notice newest[] = { NOTE(11, HOME_VERSION + 2) };
	struct entry e[4];
	char err[256] = "";
	uint8_t *data, lent;
	unsigned fetched;

	if (setup())
		return;
	data = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(data != MAP_FAILED);
	memset(data, 0xaa, 3 * PAGE);
	CU_ASSERT_EQUAL(lm_region_alias(data + 1, (void *)pg(10), PAGE, err,
					sizeof(err)), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_region_alias(data, (void *)pg(NPAGES - 1),
					2 * PAGE, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL_FATAL(lm_region_alias(data, (void *)pg(10), 2 * PAGE,
					      err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(lm_region_alias(data + 2 * PAGE, (void *)pg(20),
					PAGE, err, sizeof(err)), LM_EINVAL);
	CU_ASSERT_EQUAL(data[2 * PAGE], 0xaa); /* beyond it: untouched */

	CU_ASSERT_EQUAL(data[5], home[10][5]);
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT_EQUAL(lm_region_page_version(10), HOME_VERSION);
	CU_ASSERT_EQUAL(pg(10)[5], home[10][5]);
	CU_ASSERT_EQUAL(stats().read_faults, 1);

	data[7] = (uint8_t)~home[10][7];
	CU_ASSERT_EQUAL(pg(10)[7], (uint8_t)~home[10][7]);
	CU_ASSERT_EQUAL_FATAL(flush_entries(e, 4), 1);
	CU_ASSERT_EQUAL(e[0].page, 10);
	CU_ASSERT_EQUAL(diff_bytes(&e[0]), 1);

	CU_ASSERT_EQUAL(data[PAGE], home[11][0]);
	home[11][0] ^= 0xff;
	home_version[11] = HOME_VERSION + 1;
	CU_ASSERT_EQUAL(lm_region_apply_notices(newer, 1, ME), 0);
	fetched = nfetch;
	CU_ASSERT_EQUAL(data[PAGE], home[11][0]);
	CU_ASSERT_EQUAL(nfetch, fetched + 1);

	home[11][0] ^= 0x0f;
	home_version[11] = HOME_VERSION + 2;
	CU_ASSERT_EQUAL(lm_region_apply_notices(newest, 1, ME), 0);
	fetched = nfetch;
	lm_region_lock();
	lent = *(volatile uint8_t *)&data[PAGE];
	lm_region_unlock();

	CU_ASSERT_EQUAL(lent, (uint8_t)(home[11][0] ^ 0x0f)); /* as held */
	CU_ASSERT_EQUAL(nfetch, fetched);
	CU_ASSERT_EQUAL(data[PAGE], home[11][0]); /* closed again: fetched */
	CU_ASSERT_EQUAL(nfetch, fetched + 1);

	lm_region_fini();
	CU_ASSERT_EQUAL(data[7], (uint8_t)~home[10][7]);
	CU_ASSERT_EQUAL(data[PAGE], home[11][0]);
	data[PAGE + 1] = 1; /* private and writable: no fault */
	CU_ASSERT_EQUAL(data[PAGE + 1], 1);
	munmap(data, 3 * PAGE);
}

/* ---- set-up and tear-down --------------------------------------------- */

static void test_init_twice_is_einval(void)
{
	char err[256] = "";

	if (setup())
		return;
	CU_ASSERT_EQUAL(lm_region_init(BASE + 0x100000000ull, PAGE, PAGE,
				       &fake_backend, &ctx_token, err,
				       sizeof(err)), LM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "already"));
	/* the first region still works */
	CU_ASSERT_EQUAL(pg(1)[1], home[1][1]);
	CU_ASSERT_EQUAL(nfetch, 1);
	lm_region_fini();
}

static void test_init_rejects_bad_geometry(void)
{
	const struct lm_region_backend no_fetch = { NULL };
	const uint64_t size = (uint64_t)NPAGES * PAGE;
	char err[256];

	home_reset();
	err[0] = '\0';
	CU_ASSERT_EQUAL(lm_region_init(BASE, size, 1000, &fake_backend, NULL,
				       err, sizeof(err)), LM_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "1000"));
	CU_ASSERT_EQUAL(lm_region_init(BASE, size + 1, PAGE, &fake_backend,
				       NULL, err, sizeof(err)), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_region_init(BASE, 0, PAGE, &fake_backend, NULL,
				       err, sizeof(err)), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_region_init(BASE + 1, size, PAGE, &fake_backend,
				       NULL, err, sizeof(err)), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_region_init(BASE, size, PAGE, NULL, NULL, err,
				       sizeof(err)), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_region_init(BASE, size, PAGE, &no_fetch, NULL,
				       NULL, 0), LM_EINVAL);
	CU_ASSERT_FALSE(lm_region_contains((const void *)pg(0)));
	/* nothing was left behind: a good init still works */
	if (setup())
		return;
	CU_ASSERT_EQUAL(pg(0)[0], home[0][0]);
	lm_region_fini();
}

static void test_init_at_used_address_is_eio_naming_it(void)
{
	struct sigaction before, after;
	char err[256] = "";
	void *blocker;

	home_reset();
	blocker = mmap((void *)(uintptr_t)(BASE + 4 * PAGE), PAGE, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
		       0);
	CU_ASSERT_FATAL(blocker == (void *)(uintptr_t)(BASE + 4 * PAGE));
	sigaction(SIGSEGV, NULL, &before);
	CU_ASSERT_EQUAL(lm_region_init(BASE, (uint64_t)NPAGES * PAGE, PAGE,
				       &fake_backend, &ctx_token, err,
				       sizeof(err)), LM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "0x510000000000"));
	CU_ASSERT_FALSE(lm_region_contains((const void *)pg(0)));
	sigaction(SIGSEGV, NULL, &after);
	CU_ASSERT_TRUE(after.sa_handler == before.sa_handler);
	munmap(blocker, PAGE);

	if (setup())
		return;
	CU_ASSERT_EQUAL(pg(4)[0], home[4][0]);
	lm_region_fini();
}

static void marker_handler(int sig, siginfo_t *si, void *uctx)
{
	(void)sig;
	(void)si;
	(void)uctx;
	_exit(99);
}

static void test_fini_restores_handler_and_unmaps(void)
{
	struct sigaction mine, saved, cur;
	const uint8_t *data;
	size_t len;
	uint32_t count;
	void *probe;

	memset(&mine, 0, sizeof(mine));
	mine.sa_sigaction = marker_handler;
	mine.sa_flags = SA_SIGINFO;
	sigemptyset(&mine.sa_mask);
	CU_ASSERT_FATAL(sigaction(SIGSEGV, &mine, &saved) == 0);
	if (setup() == 0) {
		sigaction(SIGSEGV, NULL, &cur);
		CU_ASSERT_TRUE(cur.sa_sigaction != marker_handler);
		CU_ASSERT_EQUAL(pg(6)[0], home[6][0]);
		lm_region_fini();
		sigaction(SIGSEGV, NULL, &cur);
		CU_ASSERT_TRUE(cur.sa_sigaction == marker_handler);
		CU_ASSERT_TRUE(cur.sa_flags & SA_SIGINFO);
	}
	sigaction(SIGSEGV, &saved, NULL);

	/* the address range is free again */
	probe = mmap((void *)(uintptr_t)BASE, (size_t)NPAGES * PAGE,
		     PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		     MAP_FIXED_NOREPLACE, -1, 0);
	CU_ASSERT(probe == (void *)(uintptr_t)BASE);
	if (probe != MAP_FAILED)
		munmap(probe, (size_t)NPAGES * PAGE);

	/* the statistics of the run stay readable; nothing else works */
	CU_ASSERT_EQUAL(stats().read_faults, 1);
	CU_ASSERT_FALSE(lm_region_contains((const void *)pg(6)));
	CU_ASSERT_EQUAL(lm_region_page_version(6), UINT32_MAX);
	CU_ASSERT_EQUAL(lm_region_flush(&data, &len, &count), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, ME), LM_EINVAL);
	lm_region_fini();
}

LM_TEST_SUITE("region",
	      LM_TEST(test_read_fault_fetches_once),
	      LM_TEST(test_read_fault_brings_neighbours),
	      LM_TEST(test_write_fault_brings_neighbours),
	      LM_TEST(test_write_fault_opens_the_copies_after_it),
	      LM_TEST(test_write_run_stops_at_a_sample),
	      LM_TEST(test_read_faults_along_a_stride_bring_the_next),
	      LM_TEST(test_sample_pages_stay_closed_until_touched),
	      LM_TEST(test_reach_follows_what_is_read),
	      LM_TEST(test_write_after_read_twins_without_fetch),
	      LM_TEST(test_write_to_invalid_page_fetches_then_twins),
	      LM_TEST(test_fetches_and_twins_write_present_pages),
	      LM_TEST(test_fetch_fills_only_its_pages),
	      LM_TEST(test_flush_yields_exactly_the_changed_bytes),
	      LM_TEST(test_written_pages_stay_open_until_clean),
	      LM_TEST(test_every_page_dirty_then_again),
	      LM_TEST(test_notices_invalidate_only_older_copies),
	      LM_TEST(test_notice_for_dirty_page_is_refused),
	      LM_TEST(test_sole_writer_keeps_own_copy),
	      LM_TEST(test_release_updates_keep_copies),
	      LM_TEST(test_private_region_tracks_nothing),
	      LM_TEST(test_update_bad_after_good_run_drops_copy),
	      LM_TEST(test_open_pages_take_updates_and_notices),
	      LM_TEST(test_sole_writer_rule_needs_every_condition),
	      LM_TEST(test_sole_writer_dirty_page_refused),
	      LM_TEST(test_contiguous_notices_close_pages_in_one_mprotect),
	      LM_TEST(test_mixed_notices_close_one_window),
	      LM_TEST(test_flush_leaves_open_pages_alone_and_closes_runs),
	      LM_TEST(test_runs_join_across_pages_protected_so),
	      LM_TEST(test_writes_during_flushes_are_never_lost),
	      LM_TEST(test_notices_at_map_count_limit_keep_open_pages_valid),
	      LM_TEST(test_fault_on_a_valid_page_left_closed_opens_it),
	      LM_TEST(test_alias_is_the_region_pages),
	      LM_TEST(test_two_threads_share_faults),
	      LM_TEST(test_fault_outside_region_kills_like_a_normal_program),
	      LM_TEST(test_fault_outside_region_goes_to_previous_handler),
	      LM_TEST(test_fetch_error_aborts_naming_the_page),
	      LM_TEST(test_init_twice_is_einval),
	      LM_TEST(test_init_rejects_bad_geometry),
	      LM_TEST(test_init_at_used_address_is_eio_naming_it),
	      LM_TEST(test_fini_restores_handler_and_unmaps))

#endif
