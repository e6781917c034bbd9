/* The client's region under copy = cluster (liblemuria/region.h,
 * lm_region_init_shared; docs/dsm.md "One copy per cluster"), over a
 * cluster's copy made here as the lemuriad makes it, with a fake
 * fetch_shared that installs pages the way the lemuriad does: a page the
 * copy holds new enough is served without asking; notices close the view
 * only when the copy is too old for them (the sole-cluster rule keeps
 * it); a write takes the page's cluster twin; nothing is flushed.
 *
 * Real SIGSEGVs, which AddressSanitizer intercepts: skipped under ASan
 * like the region suite. */
#include "unit.h"

#if defined(__SANITIZE_ADDRESS__)

static void test_skipped_under_asan(void)
{
	CU_PASS("shared region tests need SIGSEGV; skipped under ASan");
}

LM_TEST_SUITE("region_shared", LM_TEST(test_skipped_under_asan))

#else

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cluster_copy.h"
#include "reach.h"
#include "lm_error.h"
#include "proto.h"
#include "region.h"

#define BASE 0x520000000000ull
#define PAGE 4096u
#define NPAGES 128u
#define OURS 1u   /* our cluster's index */
#define OTHER 2u  /* another cluster's */
#define PREFETCH 4u /* the layout's prefetch: how far a fault opens ahead */

static struct lm_ccopy lemuriad; /* the lemuriad's view of the copy */
static uint8_t home[NPAGES][PAGE];
static uint32_t home_version[NPAGES];
static unsigned nfetch;
static uint32_t last_after;  /* how far the last fetch let us fetch ahead */

/* The lemuriad's answer to a fault: the home's page into the copy. */
static int fake_fetch_shared(void *ctx, uint32_t page, uint32_t after,
			     uint32_t *version)
{
	(void)ctx;
	nfetch++;
	last_after = after;
	if (lm_ccopy_install(&lemuriad, page, home_version[page],
			     home[page]) < 0)
		return LM_EIO;
	*version = home_version[page];
	return 0;
}

static const struct lm_region_backend shared_backend = {
	.fetch_shared = fake_fetch_shared };

/* A copy as the lemuriad makes it, handed to the region (which closes
 * its descriptor at fini); the lemuriad's own mapping stays here. */
static void setup(void)
{
	struct lm_ccopy_hdr g;
	char err[256] = "";
	void *map;
	int fd;

	for (uint32_t p = 0; p < NPAGES; p++) {
		memset(home[p], (int)(p + 1), PAGE);
		home_version[p] = 4;
	}
	nfetch = 0;
	last_after = 0;
	CU_ASSERT_FATAL(lm_ccopy_geometry(NPAGES, PAGE, &g) == 0);
	fd = memfd_create("test-copy", MFD_CLOEXEC);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(ftruncate(fd, (off_t)g.size) == 0);
	map = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CU_ASSERT_FATAL(map != MAP_FAILED);
	lm_ccopy_format(map, &g, 1);
	CU_ASSERT_FATAL(lm_ccopy_attach(&lemuriad, map, g.size, NPAGES,
					PAGE) == 0);
	lm_region_set_prefetch(PREFETCH);
	CU_ASSERT_EQUAL_FATAL(lm_region_init_shared(BASE,
						    (uint64_t)NPAGES * PAGE,
						    PAGE, fd, OURS,
						    &shared_backend, NULL, err,
						    sizeof(err)),
			      0);
}

static void teardown(void)
{
	lm_region_fini();
	munmap(lemuriad.map, lemuriad.size);
	memset(&lemuriad, 0, sizeof(lemuriad));
}

static volatile uint8_t *pg(uint32_t page)
{
	return (volatile uint8_t *)(uintptr_t)(BASE + (uint64_t)page * PAGE);
}

/* A page the copy lacks is fetched once for the cluster; one it holds
 * (fetched for a cluster-mate) is served with no fetch at all. */
static void test_held_pages_need_no_fetch(void)
{
	setup();
	CU_ASSERT_EQUAL(pg(0)[0], 1);
	CU_ASSERT_EQUAL(nfetch, 1);
	CU_ASSERT(lm_ccopy_install(&lemuriad, 5, 4, home[5]) == 0);
	CU_ASSERT_EQUAL(pg(5)[10], 6);
	CU_ASSERT_EQUAL(nfetch, 1);
	teardown();
}

/* A write lands in the shared copy after the page's twin was taken, so
 * the lemuriad's seal finds it; nothing is left to flush. */
static void test_write_twins_and_lands_in_the_copy(void)
{
	const uint8_t *diffs;
	size_t len = 1;
	uint32_t count = 1;

	setup();
	pg(3)[7] = 0xee;
	CU_ASSERT(lm_ccopy_is_twinned(&lemuriad, 3));
	CU_ASSERT_EQUAL(lm_ccopy_page(&lemuriad, 3)[7], 0xee);
	CU_ASSERT_EQUAL(lm_ccopy_twin_of(&lemuriad, 3)[7], 4);
	CU_ASSERT_EQUAL(lm_region_flush(&diffs, &len, &count), 0);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(count, 0);
	teardown();
}

/* A notice the copy is too old for closes the view, and the next access
 * waits for the lemuriad; one the copy holds, or one whose writes were
 * all our cluster's since the copy's version, leaves the view open. */
static void test_notices_close_only_stale_views(void)
{
	struct lm_notice n[3] = {
		{ .page = 1, .version = 9, .base = 4, .writer = LM_WRITER_MANY,
		  .wcluster = OTHER },
		{ .page = 2, .version = 9, .base = 4, .writer = LM_WRITER_MANY,
		  .wcluster = OURS },
		{ .page = 6, .version = 3, .base = 2, .writer = LM_WRITER_MANY,
		  .wcluster = OTHER },
	};

	setup();
	CU_ASSERT_EQUAL(pg(1)[0], 2);
	CU_ASSERT_EQUAL(pg(2)[0], 3);
	CU_ASSERT_EQUAL(pg(6)[0], 7);
	CU_ASSERT_EQUAL(nfetch, 3);
	memset(home[1], 0x55, PAGE);
	home_version[1] = 9;
	CU_ASSERT_EQUAL(lm_region_apply_notices(n, 3, 0), 0);
	CU_ASSERT_EQUAL(pg(2)[0], 3); /* sole cluster: kept */
	CU_ASSERT_EQUAL(pg(6)[0], 7); /* older notice: kept */
	CU_ASSERT_EQUAL(nfetch, 3);
	CU_ASSERT_EQUAL(pg(1)[0], 0x55); /* stale: fetched again */
	CU_ASSERT_EQUAL(nfetch, 4);
	teardown();
}

/* A stale view whose page a cluster-mate brought up to date meanwhile
 * opens without asking the lemuriad. */
static void test_stale_view_opens_once_the_copy_caught_up(void)
{
	struct lm_notice n = { .page = 8, .version = 7, .base = 4,
			       .writer = LM_WRITER_MANY, .wcluster = OTHER };

	setup();
	CU_ASSERT_EQUAL(pg(8)[0], 9);
	CU_ASSERT_EQUAL(lm_region_apply_notices(&n, 1, 0), 0);
	memset(home[8], 0x77, PAGE);
	CU_ASSERT(lm_ccopy_install(&lemuriad, 8, 7, home[8]) == 0);
	CU_ASSERT_EQUAL(pg(8)[0], 0x77);
	CU_ASSERT_EQUAL(nfetch, 1);
	teardown();
}

/* A twin the lemuriad dropped at a barrier: the view of the page goes
 * read-only at the RELEASE, so the next write takes the twin again and
 * the lemuriad's next seal finds it. */
static void test_dropped_twin_is_taken_again(void)
{
	setup();
	pg(4)[0] = 0x11;
	CU_ASSERT_FATAL(lm_ccopy_is_twinned(&lemuriad, 4));
	/* the lemuriad's barrier seal found it idle and dropped it */
	memcpy(lm_ccopy_twin_of(&lemuriad, 4), lm_ccopy_page(&lemuriad, 4),
	       PAGE);
	atomic_fetch_and(&lemuriad.twinned[0], ~((uint64_t)1 << 4));
	atomic_fetch_add(&lemuriad.hdr->drops, 1);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, 0), 0);
	CU_ASSERT(!lm_ccopy_is_twinned(&lemuriad, 4));
	pg(4)[1] = 0x22; /* faults: twinned again before the write */
	CU_ASSERT(lm_ccopy_is_twinned(&lemuriad, 4));
	CU_ASSERT_EQUAL(lm_ccopy_twin_of(&lemuriad, 4)[1], 5);
	CU_ASSERT_EQUAL(lm_ccopy_page(&lemuriad, 4)[1], 0x22);
	teardown();
}

/* A page the cluster owns (docs/dsm.md "Pages one cluster owns") is
 * written with no twin; its view stays writable across a RELEASE that
 * sees the drops count move (no second write fault). */
static void test_owned_page_written_without_twin(void)
{
	struct lm_region_stats rs;
	uint64_t faults;

	setup();
	CU_ASSERT(lm_ccopy_install(&lemuriad, 6, 4, home[6]) == 0);
	CU_ASSERT(lm_ccopy_own(&lemuriad, 6) == 0);
	pg(6)[0] = 0x33;
	CU_ASSERT(!lm_ccopy_is_twinned(&lemuriad, 6));
	CU_ASSERT_EQUAL(lm_ccopy_page(&lemuriad, 6)[0], 0x33);
	lm_region_stats(&rs);
	faults = rs.write_faults;
	atomic_fetch_add(&lemuriad.hdr->drops, 1);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, 0), 0);
	pg(6)[1] = 0x44;
	lm_region_stats(&rs);
	CU_ASSERT_EQUAL(rs.write_faults, faults);
	CU_ASSERT_EQUAL(lm_ccopy_page(&lemuriad, 6)[1], 0x44);
	teardown();
}

/* A page the lemuriad let go at a barrier (stale, nobody here wrote
 * it): the RELEASE that sees the drops count move closes the view, and
 * the next read fetches the page again. */
static void test_forgotten_page_view_closes(void)
{
	setup();
	CU_ASSERT_EQUAL(pg(7)[0], 8);
	CU_ASSERT_EQUAL(nfetch, 1);
	memset(home[7], 0x77, PAGE);
	home_version[7] = 6; /* another cluster wrote it */
	CU_ASSERT(lm_ccopy_forget(&lemuriad, 7) == 0);
	atomic_fetch_add(&lemuriad.hdr->drops, 1);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, 0), 0);
	CU_ASSERT_EQUAL(pg(7)[0], 0x77);
	CU_ASSERT_EQUAL(nfetch, 2);
	teardown();
}

/* A read fault opens, in the same mprotect, the run of pages after its
 * own that the copy holds new enough for this process, up to the
 * prefetch: their reads take no fault.  The run stops at a page a notice
 * says the copy is too old for, and never goes past the prefetch. */
static void test_read_fault_opens_the_held_run(void)
{
	struct lm_notice n = { .page = 4, .version = 9, .base = 4,
			       .writer = LM_WRITER_MANY, .wcluster = OTHER };
	struct lm_region_stats before, after;

	setup();
	for (uint32_t p = 1; p <= 10; p++)
		CU_ASSERT(lm_ccopy_install(&lemuriad, p, 4, home[p]) == 0);
	CU_ASSERT_EQUAL(lm_region_apply_notices(&n, 1, 0), 0);
	lm_region_stats(&before);
	CU_ASSERT_EQUAL(pg(1)[0], 2);
	CU_ASSERT_EQUAL(pg(2)[0], 3);
	CU_ASSERT_EQUAL(pg(3)[0], 4);
	lm_region_stats(&after);
	CU_ASSERT_EQUAL(after.read_faults - before.read_faults, 1);
	CU_ASSERT_EQUAL(after.mprotects - before.mprotects, 1);
	CU_ASSERT_EQUAL(after.written_ahead - before.written_ahead, 2);
	CU_ASSERT_EQUAL(nfetch, 0);
	/* page 4: the copy is too old for our notice, so it asks */
	memset(home[4], 0x44, PAGE);
	home_version[4] = 9;
	CU_ASSERT_EQUAL(pg(4)[0], 0x44);
	CU_ASSERT_EQUAL(nfetch, 1);
	/* that fault opened 5..8 with it (prefetch 4), not 9 */
	lm_region_stats(&before);
	CU_ASSERT_EQUAL(pg(8)[0], 9);
	CU_ASSERT_EQUAL(pg(9)[0], 10);
	lm_region_stats(&after);
	CU_ASSERT_EQUAL(after.read_faults - before.read_faults, 1);
	teardown();
}

/* A write fault takes the cluster twin of each page of its run that this
 * process reads already and opens them writable with its own: the writes
 * that follow take no fault, and the lemuriad's next seal finds them
 * against their twins.  A held page nobody writes yet and this process
 * never opened is left alone: its twin would cost every seal. */
static void test_write_fault_twins_its_read_run(void)
{
	struct lm_region_stats before, after;

	setup();
	for (uint32_t p = 8; p <= 13; p++)
		if (p != 11)
			CU_ASSERT(lm_ccopy_install(&lemuriad, p, 4,
						   home[p]) == 0);
	CU_ASSERT_EQUAL(pg(9)[0], 10); /* opens 9 and 10 to read */
	lm_region_stats(&before);
	pg(8)[0] = 0xa8;
	for (uint32_t p = 9; p <= 10; p++) {
		CU_ASSERT(lm_ccopy_is_twinned(&lemuriad, p));
		pg(p)[5] = 0xa0;
		CU_ASSERT_EQUAL(lm_ccopy_page(&lemuriad, p)[5], 0xa0);
		CU_ASSERT_EQUAL(lm_ccopy_twin_of(&lemuriad, p)[5], p + 1);
	}
	lm_region_stats(&after);
	CU_ASSERT_EQUAL(after.write_faults - before.write_faults, 1);
	CU_ASSERT_EQUAL(after.written_ahead - before.written_ahead, 2);
	/* 13: held, never opened here, no twin: not taken along by 12 */
	pg(12)[0] = 0xac;
	CU_ASSERT(!lm_ccopy_is_twinned(&lemuriad, 13));
	lm_region_stats(&before);
	pg(13)[0] = 0xad;
	lm_region_stats(&after);
	CU_ASSERT_EQUAL(after.write_faults - before.write_faults, 1);
	CU_ASSERT(lm_ccopy_is_twinned(&lemuriad, 13));
	CU_ASSERT_EQUAL(nfetch, 0);
	teardown();
}

/* The pages the copy marks watched now (cluster_copy.h). */
static unsigned watched_pages(void)
{
	unsigned n = 0;

	for (uint32_t q = 0; q < NPAGES; q++)
		n += lm_ccopy_watched(&lemuriad, q);
	return n;
}

/* How far the lemuriad fetches ahead of this process's faults follows
 * what its cluster reads (reach.h; docs/dsm.md "Neighbour pages"): a
 * fetch now and then watches one of the pages it asked for ahead, whose
 * view stays closed while the runs around it open.  A window of watched
 * pages unread by the next acquire halves the reach (4 -> 2); read ones,
 * by this process or (the mark cleared) a cluster-mate, deepen it again,
 * up to the prefetch.  A page taken ahead from the cluster that owns it
 * costs that cluster its twin-free writes, so the reach matters beyond
 * the bytes. */
static void test_reach_follows_what_the_cluster_reads(void)
{
	struct lm_region_stats st;
	uint64_t judged;
	uint32_t p;

	const uint32_t faults = LM_REACH_WINDOW * LM_REACH_EVERY;

	CU_ASSERT_FATAL(16 + (faults + 1) * 5 < NPAGES);
	setup();
	/* faults 5 pages apart: a watched page is never read */
	for (p = 16; p < 16 + faults * 5; p += 5) {
		CU_ASSERT_EQUAL(pg(p)[0], (uint8_t)(p + 1));
		CU_ASSERT_EQUAL(last_after, PREFETCH);
	}
	CU_ASSERT_EQUAL(nfetch, faults);
	CU_ASSERT_EQUAL(watched_pages(), LM_REACH_WINDOW);
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, 0), 0);
	CU_ASSERT_EQUAL(watched_pages(), 0); /* settled, marks gone */
	lm_region_stats(&st);
	CU_ASSERT_EQUAL(st.samples[0], LM_REACH_WINDOW);
	CU_ASSERT_EQUAL(st.samples_read[0], 0);
	CU_ASSERT_EQUAL(st.reach[0], PREFETCH / 2);
	CU_ASSERT_EQUAL(pg(p)[0], (uint8_t)(p + 1));
	CU_ASSERT_EQUAL(last_after, PREFETCH / 2);

	/* now the pages after each fetch come (after its answer, as the
	 * lemuriad's fetch ahead does) and are read: the watched one faults
	 * on the copy, with no fetch, and counts as read */
	for (p = 0; p < 100;) {
		unsigned fetched = nfetch;
		uint32_t a;

		CU_ASSERT_EQUAL(pg(p)[0], (uint8_t)(p + 1));
		a = nfetch > fetched ? last_after : 0;
		for (uint32_t k = 1; k <= a && p + k < NPAGES; k++)
			CU_ASSERT(lm_ccopy_install(&lemuriad, p + k,
						   home_version[p + k],
						   home[p + k]) >= 0);
		fetched = nfetch;
		for (uint32_t k = 1; k <= a && p + k < NPAGES; k++)
			CU_ASSERT_EQUAL(pg(p + k)[0], (uint8_t)(p + k + 1));
		CU_ASSERT_EQUAL(nfetch, fetched); /* all from the copy */
		p += a + 1;
	}
	lm_region_stats(&st);
	CU_ASSERT(st.samples[0] >= 2 * LM_REACH_WINDOW);
	CU_ASSERT_EQUAL(st.samples_read[0],
			st.samples[0] - LM_REACH_WINDOW);
	CU_ASSERT_EQUAL(st.reach[0], PREFETCH);
	teardown();

	/* a cluster-mate reads them: its fault clears the mark (done here
	 * from the lemuriad's mapping), and our next acquire counts it */
	setup();
	for (p = 16; p < 16 + faults * 5; p += 5) {
		uint32_t q, marked = 0;

		CU_ASSERT_EQUAL(pg(p)[0], (uint8_t)(p + 1));
		for (q = p + 1; q <= p + PREFETCH; q++)
			if (lm_ccopy_seen(&lemuriad, q))
				marked++;
		CU_ASSERT(marked <= 1);
	}
	lm_region_stats(&st);
	judged = st.samples[0];
	CU_ASSERT_EQUAL(lm_region_apply_notices(NULL, 0, 0), 0);
	lm_region_stats(&st);
	CU_ASSERT_EQUAL(st.samples[0] - judged, LM_REACH_WINDOW);
	CU_ASSERT_EQUAL(st.samples_read[0], st.samples[0]);
	CU_ASSERT_EQUAL(st.reach[0], PREFETCH);
	teardown();
}

/* No process's run opens a page a cluster-mate watches: a fault on the
 * page before it opens the held pages up to it, and the watched one
 * faults at its first access, which answers the cluster-mate. */
static void test_watched_page_stays_closed(void)
{
	struct lm_region_stats before, after;

	setup();
	for (uint32_t p = 1; p <= 4; p++)
		CU_ASSERT(lm_ccopy_install(&lemuriad, p, 4, home[p]) == 0);
	lm_ccopy_watch(&lemuriad, 3);
	lm_region_stats(&before);
	CU_ASSERT_EQUAL(pg(1)[0], 2);
	CU_ASSERT_EQUAL(pg(2)[0], 3);
	lm_region_stats(&after);
	CU_ASSERT_EQUAL(after.read_faults - before.read_faults, 1);
	CU_ASSERT_TRUE(lm_ccopy_watched(&lemuriad, 3));
	CU_ASSERT_EQUAL(pg(3)[0], 4); /* faults: the run stopped before it */
	lm_region_stats(&after);
	CU_ASSERT_EQUAL(after.read_faults - before.read_faults, 2);
	CU_ASSERT_FALSE(lm_ccopy_watched(&lemuriad, 3));
	CU_ASSERT_EQUAL(pg(4)[0], 5); /* opened with 3 */
	lm_region_stats(&after);
	CU_ASSERT_EQUAL(after.read_faults - before.read_faults, 2);
	CU_ASSERT_EQUAL(nfetch, 0);
	teardown();
}

LM_TEST_SUITE("region_shared", LM_TEST(test_held_pages_need_no_fetch),
	      LM_TEST(test_write_twins_and_lands_in_the_copy),
	      LM_TEST(test_notices_close_only_stale_views),
	      LM_TEST(test_stale_view_opens_once_the_copy_caught_up),
	      LM_TEST(test_dropped_twin_is_taken_again),
	      LM_TEST(test_owned_page_written_without_twin),
	      LM_TEST(test_forgotten_page_view_closes),
	      LM_TEST(test_read_fault_opens_the_held_run),
	      LM_TEST(test_write_fault_twins_its_read_run),
	      LM_TEST(test_reach_follows_what_the_cluster_reads),
	      LM_TEST(test_watched_page_stays_closed))

#endif
