/* Sets of pages put into a cluster's copy as one (common/copy_set.h),
 * and the seal of one instant (lm_ccopy_seal_at_once), with threads of
 * this process as the clients: a reader that follows a pointer on one
 * page to a record on another, a cluster-mate that writes a twinned
 * page meanwhile.  A waker thread plays the lemuriad's watch of the
 * reader's descriptor (lemuriad/copy.c): without it a writer whose wake
 * the kernel lost waits for ever. */
#include "unit.h"

#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cluster_copy.h"
#include "copy_set.h"
#include "lm_error.h"

#define PS 4096u
#define NP 8u
#define ROUNDS 3000u

static struct lm_ccopy cc;
static struct lm_copy_filler filler = { .uffd = -1 };
static uint8_t *map, *view;
static size_t map_len;
static int memfd = -1, reader = -1;
static atomic_bool stop, waker_stop;
static atomic_ulong mixes, reads, mate_last, late_wakes;
static pthread_t waker;
static bool waker_on;

/* What the lemuriad does when a reader's descriptor is readable. */
static void *wake_late(void *arg)
{
	struct pollfd p = { .fd = reader, .events = POLLIN };

	(void)arg;
	while (!atomic_load(&waker_stop))
		if (poll(&p, 1, 10) == 1)
			atomic_fetch_add(&late_wakes,
					 lm_copy_set_wake_waiting(
						 reader, (uintptr_t)view,
						 NP * PS));
	return NULL;
}

/* The object in a memfd, its pages mapped again as a client's view
 * (`view`, registered as a reader), and the filler; false when this
 * kernel has no userfaultfd for us (the test is then skipped). */
static bool make_shared_copy_watched(bool watched)
{
	struct lm_ccopy_hdr g;
	char err[256];

	CU_ASSERT_FATAL(lm_ccopy_geometry(NP, PS, &g) == 0);
	memfd = memfd_create("lm-test-copy-set", MFD_CLOEXEC);
	CU_ASSERT_FATAL(memfd >= 0 && ftruncate(memfd, (off_t)g.size) == 0);
	map_len = g.size;
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
		   0);
	view = mmap(NULL, NP * PS, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
		    (off_t)g.pages_off);
	CU_ASSERT_FATAL(map != MAP_FAILED && view != MAP_FAILED);
	lm_ccopy_format(map, &g, 7);
	CU_ASSERT_FATAL(lm_ccopy_attach(&cc, map, g.size, NP, PS) == 0);
	if (lm_copy_set_reader(view, NP * PS, &reader, err, sizeof(err)) ||
	    lm_copy_filler_open(&filler, memfd, g.pages_off, NP * PS, err,
				sizeof(err))) {
		fprintf(stderr, "(skipped: %s) ", err);
		return false;
	}
	atomic_store(&waker_stop, false);
	waker_on = watched &&
		   pthread_create(&waker, NULL, wake_late, NULL) == 0;
	CU_ASSERT_FATAL(waker_on == watched);
	return true;
}

static bool make_shared_copy(void)
{
	return make_shared_copy_watched(true);
}

static void drop_shared_copy(void)
{
	if (waker_on) {
		atomic_store(&waker_stop, true);
		pthread_join(waker, NULL);
		waker_on = false;
	}
	lm_copy_filler_close(&filler);
	if (reader >= 0)
		close(reader);
	reader = -1;
	munmap(view, NP * PS);
	munmap(map, map_len);
	close(memfd);
	memfd = -1;
}

/* A client spinning on a pointer (word 0 of page 0: the round it was
 * set in) and reading the record it points at (word 0 of page 1): the
 * record is never older than the pointer. */
/* Waits (at most a second) until the reader has read: a loaded host
 * may start it late, and a test it never ran in would prove nothing. */
static void reader_running(void)
{
	for (int i = 0; i < 1000 && atomic_load(&reads) == 0; i++)
		usleep(1000);
}

static void *follow(void *arg)
{
	volatile uint64_t *ptr = (volatile uint64_t *)view;
	volatile uint64_t *rec = (volatile uint64_t *)(view + PS);

	(void)arg;
	while (!atomic_load(&stop)) {
		uint64_t p = *ptr;

		if (*rec < p)
			atomic_fetch_add(&mixes, 1);
		atomic_fetch_add(&reads, 1);
	}
	return NULL;
}

/* A cluster-mate writing its own word of the twinned page 1 (word 100)
 * all the time. */
static void *mate(void *arg)
{
	volatile uint64_t *mine = (volatile uint64_t *)(view + PS) + 100;
	unsigned long k = 0;

	(void)arg;
	while (!atomic_load(&stop)) {
		*mine = ++k;
		atomic_store(&mate_last, k);
	}
	return NULL;
}

/* Round k's set: page 0 (the pointer, written last by its writer) and
 * page 1 (the record) at version k + 1.  The pages go in together;
 * page by page in this order, a reader sees the pointer first. */
static void install_round(uint32_t k, bool as_one)
{
	static uint8_t data[2][PS];
	struct lm_copy_set_item items[2] = {
		{ 0, k + 1, data[0] }, { 1, k + 1, data[1] },
	};

	memcpy(data[0], &(uint64_t){ k }, 8);
	memcpy(data[1], &(uint64_t){ k }, 8);
	if (!as_one) {
		CU_ASSERT(lm_ccopy_install(&cc, 0, k + 1, data[0]) == 0);
		CU_ASSERT(lm_ccopy_install(&cc, 1, k + 1, data[1]) == 0);
		return;
	}
	CU_ASSERT(lm_copy_set_install(&cc, &filler, items, 2, &reader, 1,
				      (uintptr_t)view, NP * PS) == 2);
}

/* Untwinned pages: thousands of sets while a reader follows the pointer:
 * never a record older than its pointer. */
static void test_set_goes_in_as_one(void)
{
	static const uint8_t zero[PS];
	pthread_t t;

	if (!make_shared_copy()) {
		drop_shared_copy();
		return;
	}
	CU_ASSERT(lm_ccopy_install(&cc, 0, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_install(&cc, 1, 1, zero) == 0);
	atomic_store(&stop, false);
	atomic_store(&mixes, 0);
	atomic_store(&reads, 0);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, follow, NULL) == 0);
	reader_running();
	for (uint32_t k = 1; k <= ROUNDS; k++)
		install_round(k, true);
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	CU_ASSERT(atomic_load(&reads) > 0);
	CU_ASSERT_EQUAL(atomic_load(&mixes), 0);
	CU_ASSERT(*(uint64_t *)(view + PS) == ROUNDS);
	CU_ASSERT(lm_ccopy_holds(&cc, 0, ROUNDS + 1));
	drop_shared_copy();
}

/* A twinned page (a cluster-mate writes other bytes of it) goes in as
 * one as well: the mate waits while it is read, merged and put back, and
 * none of its writes is lost; the twin takes the bytes that came. */
static void test_twinned_page_writers_wait(void)
{
	static const uint8_t zero[PS];
	pthread_t t, w;

	if (!make_shared_copy()) {
		drop_shared_copy();
		return;
	}
	CU_ASSERT(lm_ccopy_install(&cc, 0, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_install(&cc, 1, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 1) == 0);
	atomic_store(&stop, false);
	atomic_store(&mixes, 0);
	atomic_store(&reads, 0);
	atomic_store(&mate_last, 0);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, follow, NULL) == 0);
	CU_ASSERT_FATAL(pthread_create(&w, NULL, mate, NULL) == 0);
	reader_running();
	for (uint32_t k = 1; k <= ROUNDS / 3; k++)
		install_round(k, true);
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	pthread_join(w, NULL);
	CU_ASSERT_EQUAL(atomic_load(&mixes), 0);
	/* the mate's last write is there: nothing it wrote was put back */
	CU_ASSERT_EQUAL(((uint64_t *)(view + PS))[100], atomic_load(&mate_last));
	CU_ASSERT(*(uint64_t *)lm_ccopy_twin_of(&cc, 1) == ROUNDS / 3);
	drop_shared_copy();
}

/* A cluster-mate's record and pointer written while the seal reads: the
 * seal of one instant never registers the pointer without the record
 * (page 0 holds the record and is read first; page 1 the pointer). */
static int take(void *ctx, uint32_t page, const uint8_t *diff, size_t len)
{
	uint64_t *last = ctx;

	(void)diff;
	(void)len;
	last[page]++;
	return 0;
}

struct pair_writer {
	volatile uint64_t *rec, *ptr;
};

static void *write_pairs(void *arg)
{
	struct pair_writer *p = arg;

	for (uint64_t k = 1; !atomic_load(&stop); k++) {
		*p->rec = k;
		*p->ptr = k;
	}
	return NULL;
}

static bool stop_view(void *ctx, bool on)
{
	(void)ctx;
	return lm_copy_set_stop_writers(&reader, 1, (uintptr_t)view, NP * PS,
					on);
}

static void test_seal_of_one_instant(void)
{
	const struct lm_ccopy_writers writers = { stop_view, NULL, NULL };
	static const uint8_t zero[PS];
	uint8_t *buf = malloc(lm_ccopy_seal_buf_size(PS));
	uint8_t idle[NP] = { 0 };
	struct pair_writer pw;
	uint64_t counts[NP];
	uint32_t bad = 0;
	pthread_t w;

	if (!make_shared_copy()) {
		drop_shared_copy();
		free(buf);
		return;
	}
	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT(lm_ccopy_install(&cc, 0, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_install(&cc, 1, 1, zero) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 0) == 0);
	CU_ASSERT(lm_ccopy_twin(&cc, 1) == 0);
	/* the client writes through its view, which the seal may stop */
	pw.rec = (volatile uint64_t *)view;
	pw.ptr = (volatile uint64_t *)(view + PS);
	atomic_store(&stop, false);
	CU_ASSERT_FATAL(pthread_create(&w, NULL, write_pairs, &pw) == 0);
	for (uint32_t i = 0; i < 2000; i++) {
		memset(counts, 0, sizeof(counts));
		CU_ASSERT(lm_ccopy_seal_at_once(&cc, buf, idle, take, counts,
						&writers) == 0);
		/* the twins are what was registered: record never behind */
		if (*(uint64_t *)lm_ccopy_twin_of(&cc, 0) <
		    *(uint64_t *)lm_ccopy_twin_of(&cc, 1))
			bad++;
	}
	atomic_store(&stop, true);
	pthread_join(w, NULL);
	CU_ASSERT_EQUAL(bad, 0);
	free(buf);
	drop_shared_copy();
}

/* The kernel's lost wake, made on purpose: a write waits on a
 * write-protected page, the protection goes without a wake (what the
 * kernel does when the write queues just after the wake went by).  The
 * writer waits on; lm_copy_set_wake_waiting finds its fault on the
 * reader's descriptor and wakes it. */
static atomic_bool wrote;

static void *write_once(void *arg)
{
	(void)arg;
	((volatile uint64_t *)view)[3] = 42;
	atomic_store(&wrote, true);
	return NULL;
}

/* Whether `flag` became true within `ms` milliseconds. */
static bool became_true(atomic_bool *flag, int ms)
{
	for (int i = 0; i < ms && !atomic_load(flag); i++)
		usleep(1000);
	return atomic_load(flag);
}

static void test_lost_wake_woken_again(void)
{
	static const uint8_t zero[PS];
	struct uffdio_writeprotect off = {
		.range = { 0, PS },
		.mode = UFFDIO_WRITEPROTECT_MODE_DONTWAKE,
	};
	struct uffdio_range all;
	struct pollfd p;
	pthread_t w;

	if (!make_shared_copy_watched(false)) {
		drop_shared_copy();
		return;
	}
	CU_ASSERT(lm_ccopy_install(&cc, 0, 1, zero) == 0);
	((volatile uint64_t *)view)[0] = 1; /* mapped in this process */
	atomic_store(&wrote, false);
	atomic_store(&late_wakes, 0);
	if (!lm_copy_set_stop_writers(&reader, 1, (uintptr_t)view, PS,
				      true)) {
		fprintf(stderr, "(skipped: no write-protection here) ");
		drop_shared_copy();
		return;
	}
	CU_ASSERT_FATAL(pthread_create(&w, NULL, write_once, NULL) == 0);
	p = (struct pollfd){ .fd = reader, .events = POLLIN };
	CU_ASSERT_EQUAL(poll(&p, 1, 2000), 1); /* its fault waits */
	off.range.start = (uintptr_t)view;
	CU_ASSERT(ioctl(reader, UFFDIO_WRITEPROTECT, &off) == 0);
	CU_ASSERT_FALSE(became_true(&wrote, 50)); /* no wake came */
	CU_ASSERT(lm_copy_set_wake_waiting(reader, (uintptr_t)view,
					   NP * PS) >= 1);
	CU_ASSERT_TRUE(became_true(&wrote, 2000));
	CU_ASSERT_EQUAL(((volatile uint64_t *)view)[3], 42);
	if (!atomic_load(&wrote)) { /* let the thread end all the same */
		all = (struct uffdio_range){ (uintptr_t)view, NP * PS };
		(void)ioctl(reader, UFFDIO_WAKE, &all);
	}
	pthread_join(w, NULL);
	/* nothing waits: the descriptor has nothing to read */
	CU_ASSERT_EQUAL(lm_copy_set_wake_waiting(reader, (uintptr_t)view,
						 NP * PS), 0);
	drop_shared_copy();
}

LM_TEST_SUITE("copy_set", LM_TEST(test_set_goes_in_as_one),
	      LM_TEST(test_twinned_page_writers_wait),
	      LM_TEST(test_seal_of_one_instant),
	      LM_TEST(test_lost_wake_woken_again))
