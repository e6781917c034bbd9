/* Pages given ahead of the writes (common/mem.c): what is present after
 * each call, read with mincore. */
#include "unit.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem.h"

/* Pages of [p, p + len) present in memory, by mincore. */
static size_t present_pages(void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = len / page, count = 0;
	unsigned char *vec = calloc(n ? n : 1, 1);

	CU_ASSERT_FATAL(vec != NULL);
	CU_ASSERT_FATAL(mincore(p, len, vec) == 0);
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	free(vec);
	return count;
}

/* Whether this kernel gives pages: a first call finds out (a kernel
 * before 5.14 refuses the advice, and population turns itself off). */
static bool kernel_populates(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *probe = mmap(NULL, page, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CU_ASSERT_FATAL(probe != MAP_FAILED);
	lm_mem_populate(probe, page);
	munmap(probe, page);
	return lm_mem_populating();
}

static void test_populate_gives_the_whole_pages_inside(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 16 * page;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CU_ASSERT_FATAL(p != MAP_FAILED);
	CU_ASSERT_EQUAL(present_pages(p, len), 0);
	if (!kernel_populates()) {
		/* a kernel before 5.14: nothing to check but the refusal */
		CU_ASSERT_FALSE(lm_mem_populate(p, len));
		munmap(p, len);
		return;
	}
	/* from the middle of page 1 to the middle of page 5: pages 2-4 */
	CU_ASSERT_TRUE(lm_mem_populate(p + page + page / 2, 4 * page));
	CU_ASSERT_EQUAL(present_pages(p, len), 3);
	CU_ASSERT_EQUAL(present_pages(p + 2 * page, 3 * page), 3);
	/* no whole page inside: nothing */
	CU_ASSERT_FALSE(lm_mem_populate(p + 8 * page + 1, page));
	CU_ASSERT_FALSE(lm_mem_populate(NULL, page));
	CU_ASSERT_FALSE(lm_mem_populate(p, 0));
	CU_ASSERT_EQUAL(present_pages(p, len), 3);
	CU_ASSERT_TRUE(lm_mem_populate(p, len));
	CU_ASSERT_EQUAL(present_pages(p, len), 16);
	munmap(p, len);
}

/* Pages the caller may only read are mapped by lm_mem_populate_read,
 * the whole pages inside as for writes. */
static void test_populate_read_maps_read_only_pages(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 8 * page;
	uint8_t *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);

	CU_ASSERT_FATAL(p != MAP_FAILED);
	if (!kernel_populates()) {
		CU_ASSERT_FALSE(lm_mem_populate_read(p, len));
		munmap(p, len);
		return;
	}
	CU_ASSERT_TRUE(lm_mem_populate_read(p + page / 2, 3 * page));
	CU_ASSERT_EQUAL(present_pages(p, len), 2);
	CU_ASSERT_EQUAL(present_pages(p + page, 2 * page), 2);
	CU_ASSERT_FALSE(lm_mem_populate_read(p, page / 2));
	CU_ASSERT_EQUAL(present_pages(p, len), 2);
	munmap(p, len);
}

/* Turned off (LEMURIA_POPULATE=0 does this), it leaves pages to their
 * faults. */
static void test_populate_off_gives_nothing(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 8 * page;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool was = lm_mem_populating();

	CU_ASSERT_FATAL(p != MAP_FAILED);
	setenv("LEMURIA_POPULATE", "0", 1);
	lm_mem_setup_from_env();
	unsetenv("LEMURIA_POPULATE");
	CU_ASSERT_FALSE(lm_mem_populating());
	CU_ASSERT_FALSE(lm_mem_populate(p, len));
	CU_ASSERT_EQUAL(present_pages(p, len), 0);
	lm_mem_set_populate(true);
	CU_ASSERT_EQUAL(lm_mem_populating(), was);
	munmap(p, len);
}

/* ASan's malloc does not take its memory from the heap's break: the
 * heap test runs in the plain build only. */
#if !defined(__SANITIZE_ADDRESS__)
/* With a top pad of 8 MiB the heap grows in steps of 8 MiB and more;
 * after lm_mem_follow_heap everything it gained is present, although
 * the program wrote only a chunk header of it. */
static void test_follow_heap_gives_what_the_heap_gained(void)
{
	enum { BLOCK = 256 * 1024, MAX_BLOCKS = 64 };
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	void *blocks[MAX_BLOCKS];
	uint8_t *before, *after;
	int n = 0;

	if (!kernel_populates()) {
		CU_PASS("a kernel without MADV_POPULATE_WRITE");
		return;
	}
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TOP_PAD, 8 << 20);
	lm_mem_follow_heap();
	before = sbrk(0);
	/* allocate until the heap moves its break (bounded) */
	while (n < MAX_BLOCKS && (uint8_t *)sbrk(0) == before)
		blocks[n++] = malloc(BLOCK);
	after = sbrk(0);
	CU_ASSERT_FATAL(after > before + page);
	lm_mem_follow_heap();
	/* the whole pages between the two breaks */
	before = (uint8_t *)(((uintptr_t)before + page - 1) & ~(page - 1));
	after = (uint8_t *)((uintptr_t)after & ~(page - 1));
	CU_ASSERT_EQUAL(present_pages(before, (size_t)(after - before)),
			(size_t)(after - before) / page);
	while (n > 0)
		free(blocks[--n]);
	/* glibc's defaults again */
	mallopt(M_TOP_PAD, 128 * 1024);
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

LM_TEST_SUITE("mem",
	      LM_TEST(test_populate_gives_the_whole_pages_inside),
	      LM_TEST(test_populate_read_maps_read_only_pages),
	      LM_TEST(test_populate_off_gives_nothing),
	      LM_TEST(test_follow_heap_gives_what_the_heap_gained))
#else
LM_TEST_SUITE("mem",
	      LM_TEST(test_populate_gives_the_whole_pages_inside),
	      LM_TEST(test_populate_read_maps_read_only_pages),
	      LM_TEST(test_populate_off_gives_nothing))
#endif
