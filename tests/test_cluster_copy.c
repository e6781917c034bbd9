/* The cluster's shared copy (common/cluster_copy.h): geometry, installs
 * whole and merged, twins, seals and the sole-cluster advance. */
#include "unit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cluster_copy.h"
#include "proto.h"
#include "diff.h"
#include "lm_error.h"

#define PS 4096u
#define NP 70u /* more than one word of twinned bits */

static uint8_t *map;
static struct lm_ccopy cc;
static uint8_t idle[NP];

static void make_copy(void)
{
	struct lm_ccopy_hdr g;

	CU_ASSERT_FATAL(lm_ccopy_geometry(NP, PS, &g) == 0);
	map = aligned_alloc(PS, g.size);
	CU_ASSERT_FATAL(map != NULL);
	memset(map, 0, g.size);
	lm_ccopy_format(map, &g, 42);
	memset(idle, 0, sizeof(idle));
	CU_ASSERT_FATAL(lm_ccopy_attach(&cc, map, g.size, NP, PS) == 0);
}

static void drop_copy(void)
{
	free(map);
	map = NULL;
}

struct seen {
	uint32_t pages[NP];
	uint8_t after[NP][PS]; /* each diff applied to a zero page */
	uint32_t n;
};

static int collect(void *ctx, uint32_t page, const uint8_t *diff, size_t len)
{
	struct seen *s = ctx;

	memset(s->after[s->n], 0, PS);
	CU_ASSERT(lm_diff_apply(s->after[s->n], PS, diff, len) == 0);
	s->pages[s->n++] = page;
	return 0;
}

/* The parts do not overlap, lie in page order and fit the size; a
 * header of another geometry is refused, leaving an empty view. */
static void test_geometry(void)
{
	struct lm_ccopy_hdr g;
	struct lm_ccopy other;

	CU_ASSERT(lm_ccopy_geometry(0, PS, &g) == LM_EINVAL);
	CU_ASSERT(lm_ccopy_geometry(NP, 3000, &g) == LM_EINVAL);
	CU_ASSERT_FATAL(lm_ccopy_geometry(NP, PS, &g) == 0);
	CU_ASSERT(g.table_off >= PS);
	CU_ASSERT(g.twinned_off >= g.table_off + NP * 8);
	CU_ASSERT(g.pages_off >= g.twinned_off + (NP + 63) / 64 * 8);
	CU_ASSERT(g.pages_off % PS == 0);
	CU_ASSERT(g.twins_off == g.pages_off + (uint64_t)NP * PS);
	CU_ASSERT(g.size == g.twins_off + (uint64_t)NP * PS);
	make_copy();
	CU_ASSERT(lm_ccopy_attach(&other, map, g.size, NP + 1, PS) ==
		  LM_EINVAL);
	CU_ASSERT(lm_ccopy_attach(&other, map, g.size - 1, NP, PS) ==
		  LM_EINVAL);
	/* a refused view holds no descriptor (0 would be stdin, and the
	 * lemuriad would take it for a copy made and close it) */
	CU_ASSERT(other.map == NULL && other.fd == -1);
	drop_copy();
}

/* Nothing held at first; an install is held at its version, and an older
 * or equal one leaves it alone. */
static void test_install_versions(void)
{
	uint8_t data[PS];
	uint32_t v;

	make_copy();
	CU_ASSERT(!lm_ccopy_holds(&cc, 3, 0));
	memset(data, 7, PS);
	CU_ASSERT(lm_ccopy_install(&cc, 3, 5, data) == 0);
	CU_ASSERT(lm_ccopy_holds(&cc, 3, 5));
	CU_ASSERT(!lm_ccopy_holds(&cc, 3, 6));
	CU_ASSERT(lm_ccopy_version(&cc, 3, &v) && v == 5);
	CU_ASSERT(memcmp(lm_ccopy_page(&cc, 3), data, PS) == 0);
	memset(data, 9, PS);
	CU_ASSERT(lm_ccopy_install(&cc, 3, 5, data) == 1);
	CU_ASSERT(lm_ccopy_install(&cc, 3, 4, data) == 1);
	CU_ASSERT(lm_ccopy_page(&cc, 3)[0] == 7);
	drop_copy();
}

/* A twinned page takes only the bytes another cluster changed: a
 * cluster-mate's unpublished writes to other bytes stay, and the next
 * seal sends those writes alone. */
static void test_install_merges_into_twinned(void)
{
	uint8_t data[PS];
	struct seen *s = calloc(1, sizeof(*s));
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint8_t *live;

	make_copy();
	memset(data, 1, PS);
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 10, 1, data) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 10) == 0);
	CU_ASSERT(lm_ccopy_is_twinned(&cc, 10));
	live = lm_ccopy_page(&cc, 10);
	live[100] = 0xaa; /* a cluster-mate writes, not sealed yet */
	data[200] = 0xbb; /* another cluster wrote byte 200 */
	CU_ASSERT(lm_ccopy_install(&cc, 10, 2, data) == 0);
	CU_ASSERT(live[100] == 0xaa);
	CU_ASSERT(live[200] == 0xbb);
	CU_ASSERT(live[0] == 1);
	CU_ASSERT_FATAL(lm_ccopy_seal(&cc, buf, idle, NULL, collect, s) == 0);
	CU_ASSERT_FATAL(s->n == 1);
	CU_ASSERT(s->pages[0] == 10);
	/* the diff writes byte 100 and nothing else: 200 came from home */
	for (uint32_t i = 0; i < PS; i++)
		if (i != 100 && s->after[0][i] != 0) {
			CU_FAIL("seal sent a byte it did not write");
			break;
		}
	CU_ASSERT(s->after[0][100] == 0xaa);
	free(buf);
	free(s);
	drop_copy();
}

/* An untwinned page is copied whole. */
static void test_install_whole_untwinned(void)
{
	uint8_t data[PS];

	make_copy();
	memset(data, 1, PS);
	CU_ASSERT(lm_ccopy_install(&cc, 0, 1, data) == 0);
	memset(data, 2, PS);
	CU_ASSERT(lm_ccopy_install(&cc, 0, 3, data) == 0);
	CU_ASSERT(memcmp(lm_ccopy_page(&cc, 0), data, PS) == 0);
	drop_copy();
}

static long minor_faults(void)
{
	struct rusage ru;

	CU_ASSERT_FATAL(getrusage(RUSAGE_SELF, &ru) == 0);
	return ru.ru_minflt;
}

/* The lemuriad's installs go through the object's descriptor: a whole
 * page its mapping lacks goes in with no page fault (docs/performance.md,
 * "Installs without page faults"), and reads back through the mapping as
 * sent; a twinned page is still merged in place. */
static void test_install_whole_through_descriptor(void)
{
	struct lm_ccopy_hdr g;
	struct lm_ccopy fcc;
	uint8_t data[PS];
	uint32_t have = 0;
	uint8_t *m;
	long before, after;
	int fd = memfd_create("test-ccopy", MFD_CLOEXEC);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(lm_ccopy_geometry(NP, PS, &g) == 0);
	CU_ASSERT_FATAL(ftruncate(fd, (off_t)g.size) == 0);
	m = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CU_ASSERT_FATAL(m != MAP_FAILED);
	lm_ccopy_format(m, &g, 42);
	CU_ASSERT_FATAL(lm_ccopy_attach(&fcc, m, g.size, NP, PS) == 0);
	CU_ASSERT_EQUAL(fcc.fd, -1);
	fcc.fd = fd;
	/* the table and the twinned bits are in the mapping already */
	CU_ASSERT(!lm_ccopy_version(&fcc, 5, &have));
	CU_ASSERT(!lm_ccopy_is_twinned(&fcc, 5));
	CU_ASSERT_FATAL(lm_ccopy_lock(&fcc, 5));
	lm_ccopy_unlock(&fcc, 5);
	memset(data, 7, PS);
	data[PS - 1] = 9;
	before = minor_faults();
	CU_ASSERT(lm_ccopy_install(&fcc, 5, 2, data) == 0);
	after = minor_faults();
	CU_ASSERT_EQUAL(after, before);
	CU_ASSERT(memcmp(lm_ccopy_page(&fcc, 5), data, PS) == 0);
	CU_ASSERT(lm_ccopy_version(&fcc, 5, &have) && have == 2);
	/* twinned: only the bytes another cluster changed, in place */
	CU_ASSERT(lm_ccopy_twin(&fcc, 5) == 0);
	lm_ccopy_page(&fcc, 5)[0] = 1; /* a cluster-mate's unsealed byte */
	data[PS - 1] = 4;
	CU_ASSERT(lm_ccopy_install(&fcc, 5, 3, data) == 0);
	CU_ASSERT_EQUAL(lm_ccopy_page(&fcc, 5)[0], 1);
	CU_ASSERT_EQUAL(lm_ccopy_page(&fcc, 5)[PS - 1], 4);
	munmap(m, g.size);
	close(fd);
}

/* A seal finds writes on every twinned page (across words of the bitmap),
 * takes them into the twin, and a second seal with nothing new sends
 * nothing; a write after the seal goes with the next. */
static void test_seal_each_write_once(void)
{
	struct seen *s = calloc(1, sizeof(*s));
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint8_t zero[PS] = { 0 };

	make_copy();
	for (uint32_t p = 0; p < NP; p++)
		CU_ASSERT_FATAL(lm_ccopy_install(&cc, p, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 2) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 65) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 66) == 0); /* twinned, never written */
	lm_ccopy_page(&cc, 2)[5] = 3;
	lm_ccopy_page(&cc, 65)[PS - 1] = 4;
	lm_ccopy_page(&cc, 30)[0] = 9; /* untwinned: a misuse, not seen */
	CU_ASSERT_FATAL(lm_ccopy_seal(&cc, buf, idle, NULL, collect, s) == 0);
	CU_ASSERT_FATAL(s->n == 2);
	CU_ASSERT(s->pages[0] == 2 && s->after[0][5] == 3);
	CU_ASSERT(s->pages[1] == 65 && s->after[1][PS - 1] == 4);
	s->n = 0;
	CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, NULL, collect, s) == 0);
	CU_ASSERT(s->n == 0);
	lm_ccopy_page(&cc, 2)[6] = 8;
	CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, NULL, collect, s) == 0);
	CU_ASSERT_FATAL(s->n == 1);
	CU_ASSERT(s->after[0][5] == 0 && s->after[0][6] == 8);
	free(buf);
	free(s);
	drop_copy();
}

/* The sole-cluster advance moves a copy that holds `base` or newer, as
 * lm_ccopy_covers counts it (a copy at 31 covered a notice from 30 to
 * 32, its clients were not told, and it stayed at 31: fmm's readers then
 * missed every later change); never a copy older than `base`, never
 * down. */
static void test_advance_as_covers_counts(void)
{
	uint8_t zero[PS] = { 0 };
	struct lm_notice n = { .page = 1, .version = 5, .base = 2,
			       .wcluster = 0 };
	uint32_t v;

	make_copy();
	lm_ccopy_advance(&cc, 1, 0, 4); /* not held: nothing */
	CU_ASSERT(!lm_ccopy_holds(&cc, 1, 0));
	CU_ASSERT(lm_ccopy_install(&cc, 1, 3, zero) == 0);
	lm_ccopy_advance(&cc, 1, 4, 5); /* older than base: nothing */
	CU_ASSERT(lm_ccopy_version(&cc, 1, &v) && v == 3);
	CU_ASSERT(lm_ccopy_covers(&cc, &n, 0));
	lm_ccopy_advance(&cc, 1, n.base, n.version);
	CU_ASSERT(lm_ccopy_version(&cc, 1, &v) && v == 5);
	CU_ASSERT(lm_ccopy_holds(&cc, 1, n.version));
	lm_ccopy_advance(&cc, 1, 1, 4); /* never down */
	CU_ASSERT(lm_ccopy_version(&cc, 1, &v) && v == 5);
	lm_ccopy_advance(&cc, 1, 5, 6);
	CU_ASSERT(lm_ccopy_version(&cc, 1, &v) && v == 6);
	drop_copy();
}

/* A barrier's seal drops the twin of a page found unchanged at
 * LM_CCOPY_IDLE_SEALS seals in a row, and says so in hdr->drops; a seal
 * that may not drop (a lock's) keeps it, and a write resets the count. */
static void test_idle_twins_dropped_at_barriers(void)
{
	struct seen *s = calloc(1, sizeof(*s));
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint8_t zero[PS] = { 0 };
	struct lm_ccopy_drop all = { .all = true };

	make_copy();
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 9, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 9) == 0);
	for (int k = 0; k < LM_CCOPY_IDLE_SEALS + 1; k++)
		CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, NULL, collect, s) ==
			  0);
	CU_ASSERT(lm_ccopy_is_twinned(&cc, 9));
	lm_ccopy_page(&cc, 9)[1] = 5; /* written: the count starts again */
	CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, &all, collect, s) == 0);
	CU_ASSERT(s->n == 1);
	for (int k = 0; k < LM_CCOPY_IDLE_SEALS; k++) {
		CU_ASSERT(lm_ccopy_is_twinned(&cc, 9));
		CU_ASSERT(atomic_load(&cc.hdr->drops) == 0);
		s->n = 0;
		CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, &all, collect, s) ==
			  0);
	}
	CU_ASSERT(!lm_ccopy_is_twinned(&cc, 9));
	CU_ASSERT(atomic_load(&cc.hdr->drops) == 1);
	/* twinned again at the next write, from the page as it is */
	CU_ASSERT(lm_ccopy_twin(&cc, 9) == 0);
	CU_ASSERT(lm_ccopy_twin_of(&cc, 9)[1] == 5);
	free(buf);
	free(s);
	drop_copy();
}

/* Without `all`, a barrier's seal drops only the idle twins of pages
 * marked stale, and counts the idle ones it kept; a kept twin still
 * seals a later write, with no fault in between. */
static void test_idle_twins_kept_unless_stale(void)
{
	struct seen *s = calloc(1, sizeof(*s));
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint8_t zero[PS] = { 0 }, stale[NP] = { 0 };
	struct lm_ccopy_drop some = { .stale = stale };

	make_copy();
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 4, 1, zero) == 0);
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 6, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 4) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 6) == 0);
	stale[6] = 1;
	for (int k = 0; k < LM_CCOPY_IDLE_SEALS; k++) {
		some.kept = 0;
		CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, &some, collect, s) ==
			  0);
	}
	CU_ASSERT(lm_ccopy_is_twinned(&cc, 4));
	CU_ASSERT(!lm_ccopy_is_twinned(&cc, 6));
	CU_ASSERT(some.kept == 1);
	CU_ASSERT(atomic_load(&cc.hdr->drops) == 1);
	/* the kept twin seals the next write as any twin does */
	lm_ccopy_page(&cc, 4)[7] = 3;
	some.kept = 0;
	CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, &some, collect, s) == 0);
	CU_ASSERT_FATAL(s->n == 1);
	CU_ASSERT(s->pages[0] == 4 && s->after[0][7] == 3);
	CU_ASSERT(some.kept == 0);
	CU_ASSERT(atomic_load(&cc.hdr->drops) == 1);
	free(buf);
	free(s);
	drop_copy();
}

/* An owned page (docs/dsm.md "Pages one cluster owns"): a write takes
 * no twin and no seal sees it; a fetched page is not copied over it; a
 * recall hands over the page as it is, which becomes the twin, so the
 * next seal sends only what was written after it. */
static void test_owned_untracked_until_recalled(void)
{
	struct seen *s = calloc(1, sizeof(*s));
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint8_t zero[PS] = { 0 }, other[PS], snap[PS];
	struct lm_ccopy_drop all = { .all = true };
	bool unwritten;

	make_copy();
	memset(other, 7, sizeof(other));
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 3, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 3) == 0);
	CU_ASSERT(lm_ccopy_own(&cc, 3) == 0);
	CU_ASSERT(lm_ccopy_is_owned(&cc, 3) && !lm_ccopy_is_twinned(&cc, 3));
	CU_ASSERT(lm_ccopy_writable(&cc, 3));
	CU_ASSERT(lm_ccopy_twin(&cc, 3) == 0);
	CU_ASSERT(!lm_ccopy_is_twinned(&cc, 3)); /* owned: no twin */
	lm_ccopy_page(&cc, 3)[10] = 1;
	CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, &all, collect, s) == 0);
	CU_ASSERT(s->n == 0);
	CU_ASSERT(lm_ccopy_install(&cc, 3, 9, other) == 1);
	CU_ASSERT(lm_ccopy_page(&cc, 3)[0] == 0);
	CU_ASSERT(lm_ccopy_page(&cc, 3)[10] == 1);
	/* a page not owned is not recalled */
	CU_ASSERT(lm_ccopy_recall(&cc, 4, snap, &unwritten) == 1);
	unwritten = true;
	CU_ASSERT(lm_ccopy_recall(&cc, 3, snap, &unwritten) == 0);
	CU_ASSERT(snap[10] == 1 && snap[0] == 0);
	CU_ASSERT(!unwritten); /* byte 10 was written while owned */
	CU_ASSERT(!lm_ccopy_is_owned(&cc, 3) && lm_ccopy_is_twinned(&cc, 3));
	CU_ASSERT(memcmp(lm_ccopy_twin_of(&cc, 3), snap, PS) == 0);
	lm_ccopy_page(&cc, 3)[11] = 2;
	CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, NULL, collect, s) == 0);
	CU_ASSERT_FATAL(s->n == 1);
	CU_ASSERT(s->after[0][11] == 2 && s->after[0][10] == 0);
	free(buf);
	free(s);
	drop_copy();
}

/* A recall says whether anybody wrote the page since the cluster came
 * to own it: the page against the bytes its last seal read (a twinned
 * page's twin at lm_ccopy_own), or, for a page owned with no twin, the
 * bytes it held then.  A write that puts back what was there counts as
 * none: what leaves is what a seal read. */
static void test_recall_tells_unwritten(void)
{
	struct seen *s = calloc(1, sizeof(*s));
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint8_t zero[PS] = { 0 }, other[PS], snap[PS];
	bool unwritten = false;

	make_copy();
	memset(other, 7, sizeof(other));
	/* twinned, written, sealed, written again after the seal: the seal
	 * read byte 9, not byte 11 */
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 3, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 3) == 0);
	lm_ccopy_page(&cc, 3)[9] = 5;
	CU_ASSERT(lm_ccopy_seal(&cc, buf, idle, NULL, collect, s) == 0);
	CU_ASSERT_FATAL(s->n == 1);
	lm_ccopy_page(&cc, 3)[11] = 6;
	CU_ASSERT(lm_ccopy_own(&cc, 3) == 0);
	CU_ASSERT(lm_ccopy_recall(&cc, 3, snap, &unwritten) == 0);
	CU_ASSERT(!unwritten);
	CU_ASSERT(snap[9] == 5 && snap[11] == 6);
	/* owned again (its twin is what the recall sent), nobody writes */
	CU_ASSERT(lm_ccopy_own(&cc, 3) == 0);
	CU_ASSERT(lm_ccopy_recall(&cc, 3, snap, &unwritten) == 0);
	CU_ASSERT(unwritten);
	CU_ASSERT(snap[9] == 5 && snap[11] == 6);
	/* written and written back while owned: what leaves was sealed */
	CU_ASSERT(lm_ccopy_own(&cc, 3) == 0);
	lm_ccopy_page(&cc, 3)[100] = 9;
	lm_ccopy_page(&cc, 3)[100] = 0;
	CU_ASSERT(lm_ccopy_recall(&cc, 3, snap, &unwritten) == 0);
	CU_ASSERT(unwritten);
	/* owned with no twin: the twin's room held another page's bytes
	 * once (page 5 twinned, sealed and dropped, then installed over);
	 * own keeps the bytes the page holds, so the recall compares with
	 * them and not with what the room held */
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 5, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 5) == 0);
	CU_ASSERT(lm_ccopy_forget(&cc, 5) == 0); /* twin gone, room kept */
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 5, 2, other) == 0);
	CU_ASSERT(!lm_ccopy_is_twinned(&cc, 5));
	CU_ASSERT(lm_ccopy_own(&cc, 5) == 0);
	CU_ASSERT(lm_ccopy_recall(&cc, 5, snap, &unwritten) == 0);
	CU_ASSERT(unwritten);
	CU_ASSERT(snap[0] == 7);
	CU_ASSERT(lm_ccopy_own(&cc, 5) == 0);
	lm_ccopy_page(&cc, 5)[1] = 8;
	CU_ASSERT(lm_ccopy_recall(&cc, 5, snap, &unwritten) == 0);
	CU_ASSERT(!unwritten);
	free(buf);
	free(s);
	drop_copy();
}

/* A forgotten page is no longer held: the clients' next access asks the
 * lemuriad, whose install copies it whole. */
static void test_forget(void)
{
	uint8_t zero[PS] = { 0 }, other[PS];

	make_copy();
	memset(other, 5, sizeof(other));
	CU_ASSERT_FATAL(lm_ccopy_install(&cc, 6, 2, zero) == 0);
	CU_ASSERT(lm_ccopy_forget(&cc, 6) == 0);
	CU_ASSERT(!lm_ccopy_holds(&cc, 6, 0));
	CU_ASSERT(lm_ccopy_install(&cc, 6, 4, other) == 0);
	CU_ASSERT(lm_ccopy_holds(&cc, 6, 4));
	CU_ASSERT(lm_ccopy_page(&cc, 6)[0] == 5);
	drop_copy();
}

/* A cluster-mate twins and writes pages while the seal of one instant
 * reads them: more dirty pages than the seal first made room for (every
 * page, from none) must neither run past its room (the sanitizer build
 * sees that) nor be left out of the seal. */
static atomic_bool churn_stop;

static void *churn(void *arg)
{
	static const uint8_t zero[PS];

	(void)arg;
	for (uint32_t k = 1; !atomic_load(&churn_stop); k++) {
		for (uint32_t p = 0; p < NP; p++) {
			if (lm_ccopy_install(&cc, p, k, zero) < 0 ||
			    lm_ccopy_twin(&cc, p) != 0)
				return NULL;
			lm_ccopy_page(&cc, p)[p % PS] = (uint8_t)k | 1;
		}
		for (uint32_t p = 0; p < NP; p++)
			(void)lm_ccopy_forget(&cc, p);
	}
	return NULL;
}

static int count_emits(void *ctx, uint32_t page, const uint8_t *diff,
		       size_t len)
{
	uint32_t *n = ctx;

	(void)page;
	(void)diff;
	(void)len;
	(*n)++;
	return 0;
}

static void test_seal_at_once_room_grows(void)
{
	static const uint8_t zero[PS];
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	struct timespec t0, t;
	uint32_t emitted = 0, failed = 0;
	pthread_t w;

	CU_ASSERT_FATAL(buf != NULL);
	make_copy();
	atomic_store(&churn_stop, false);
	CU_ASSERT_FATAL(pthread_create(&w, NULL, churn, NULL) == 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint32_t i = 0; i < 5000; i++) {
		if (lm_ccopy_seal_at_once(&cc, buf, idle, count_emits,
					  &emitted, NULL) != 0)
			failed++;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 2)
			break;
	}
	atomic_store(&churn_stop, true);
	pthread_join(w, NULL);
	CU_ASSERT_EQUAL(failed, 0);
	/* all of them dirty at once, none twinned when the seal counted:
	 * each goes with this seal */
	for (uint32_t p = 0; p < NP; p++)
		(void)lm_ccopy_forget(&cc, p);
	for (uint32_t p = 0; p < NP; p++) {
		CU_ASSERT_FATAL(lm_ccopy_install(&cc, p, 1u << 20, zero) == 0);
		CU_ASSERT_FATAL(lm_ccopy_twin(&cc, p) == 0);
		lm_ccopy_page(&cc, p)[7] = 9;
	}
	emitted = 0;
	CU_ASSERT(lm_ccopy_seal_at_once(&cc, buf, idle, count_emits, &emitted,
					NULL) == 0);
	CU_ASSERT_EQUAL(emitted, NP);
	for (uint32_t p = 0; p < NP; p++)
		CU_ASSERT(lm_ccopy_twin_of(&cc, p)[7] == 9);
	free(buf);
	drop_copy();
}

/* A seal of one instant that finds every twinned page clean reads each
 * once: the twins are the instant.  One dirty page makes it read them
 * all again, to see that nothing changed between. */
static void test_seal_at_once_clean_reads_once(void)
{
	static const uint8_t zero[PS];
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint64_t reads = 0;
	const struct lm_ccopy_writers count = { .reads = &reads };
	uint32_t emitted = 0;

	CU_ASSERT_FATAL(buf != NULL);
	make_copy();
	for (uint32_t p = 0; p < NP; p++) {
		CU_ASSERT_FATAL(lm_ccopy_install(&cc, p, 1, zero) == 0);
		CU_ASSERT_FATAL(lm_ccopy_twin(&cc, p) == 0);
	}
	CU_ASSERT(lm_ccopy_seal_at_once(&cc, buf, idle, count_emits, &emitted,
					&count) == 0);
	CU_ASSERT_EQUAL(emitted, 0);
	CU_ASSERT_EQUAL(reads, NP);
	CU_ASSERT_EQUAL(idle[NP - 1], 1);
	lm_ccopy_page(&cc, NP - 1)[5] = 3;
	reads = 0;
	CU_ASSERT(lm_ccopy_seal_at_once(&cc, buf, idle, count_emits, &emitted,
					&count) == 0);
	CU_ASSERT_EQUAL(emitted, 1);
	CU_ASSERT_EQUAL(reads, 2 * NP);
	CU_ASSERT(lm_ccopy_twin_of(&cc, NP - 1)[5] == 3);
	CU_ASSERT_EQUAL(idle[NP - 1], 0);
	free(buf);
	drop_copy();
}

LM_TEST_SUITE("cluster_copy", LM_TEST(test_geometry),
	      LM_TEST(test_install_versions),
	      LM_TEST(test_install_merges_into_twinned),
	      LM_TEST(test_install_whole_untwinned),
	      LM_TEST(test_install_whole_through_descriptor),
	      LM_TEST(test_seal_each_write_once),
	      LM_TEST(test_advance_as_covers_counts),
	      LM_TEST(test_idle_twins_dropped_at_barriers),
	      LM_TEST(test_idle_twins_kept_unless_stale),
	      LM_TEST(test_owned_untracked_until_recalled),
	      LM_TEST(test_recall_tells_unwritten),
	      LM_TEST(test_forget),
	      LM_TEST(test_seal_at_once_room_grows),
	      LM_TEST(test_seal_at_once_clean_reads_once))
