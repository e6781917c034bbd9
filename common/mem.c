/* Pages given ahead of the writes that would fault them in (mem.h). */
#include "mem.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Off by the caller's choice, or for good once the kernel refused the
 * advice as unknown. */
static atomic_bool populate_off;
static atomic_bool populate_unsupported;

bool lm_mem_populating(void)
{
	return !atomic_load_explicit(&populate_off, memory_order_relaxed) &&
	       !atomic_load_explicit(&populate_unsupported,
				     memory_order_relaxed);
}

static bool populate(void *p, size_t len, int advice)
{
	static size_t page; /* a race here writes the same value twice */
	uintptr_t start, end;
	int saved_errno;

	if (!lm_mem_populating())
		return false;
	if (!page)
		page = (size_t)sysconf(_SC_PAGESIZE);
	start = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
	end = ((uintptr_t)p + len) & ~(uintptr_t)(page - 1);
	if (!p || len == 0 || end <= start)
		return false;
	saved_errno = errno;
	if (madvise((void *)start, end - start, advice) == 0) {
		errno = saved_errno;
		return true;
	}
	/* EINVAL: a kernel without the advice; anything else (ENOMEM,
	 * EFAULT on a range the caller got wrong) leaves the pages to their
	 * faults, which report it as they always did. */
	if (errno == EINVAL)
		atomic_store_explicit(&populate_unsupported, true,
				      memory_order_relaxed);
	errno = saved_errno;
	return false;
}

bool lm_mem_populate(void *p, size_t len)
{
	return populate(p, len, MADV_POPULATE_WRITE);
}

bool lm_mem_populate_read(void *p, size_t len)
{
	return populate(p, len, MADV_POPULATE_READ);
}

void lm_mem_set_populate(bool on)
{
	atomic_store_explicit(&populate_off, !on, memory_order_relaxed);
}

void lm_mem_setup_from_env(void)
{
	const char *v = getenv("LEMURIA_POPULATE");

	if (v && strcmp(v, "0") == 0)
		lm_mem_set_populate(false);
}

/* Where the heap's pages are present up to (lm_mem_follow_heap). */
static uintptr_t heap_given;

void lm_mem_follow_heap(void)
{
	uintptr_t brk = (uintptr_t)sbrk(0); /* glibc: no system call */

	if (brk == (uintptr_t)-1)
		return;
	if (brk > heap_given && heap_given)
		lm_mem_populate((void *)heap_given, brk - heap_given);
	heap_given = brk; /* the first call, or a heap trimmed below it */
}
