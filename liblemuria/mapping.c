/* The region's memory, at the bottom of the region's files
 * (region_state.h): the memfd mapped twice, the application's view at
 * `base` (its protections follow the page states) and a private
 * read-write mapping, through which fetched pages, updates and twins are
 * written, so that a page is complete before the view opens (no thread
 * sees half a page) and a flush never touches the view (it cannot fault
 * holding the lock); the page table and the buffers; the twin pool. */
#include "mapping.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diff.h"
#include "lm_error.h"
#include "mem.h"
#include "region_state.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define TWIN_CHUNK_PAGES 32 /* twins mapped at once when the pool is dry */

/* A free twin holds the link to the next one in its first bytes. */
struct lm_twin_free {
	struct lm_twin_free *next;
};

struct lm_region_state lm_region_state = { .fd = -1,
					   .mark_lo = UINT32_MAX };

/* Every change of the view's protection goes through here, so that the
 * statistics count them. */
int lm_view_protect(uint32_t first, uint32_t n, int prot)
{
	uint32_t lo = first, hi = first + n;

	R->stats.mprotects++;
	if (mprotect(R->view + lm_page_off(first), lm_page_off(n), prot) != 0)
		return -1;
	if (lo < R->alias_first)
		lo = R->alias_first;
	if (hi > R->alias_first + R->alias_n)
		hi = R->alias_first + R->alias_n;
	if (lo >= hi)
		return 0;
	R->stats.mprotects++;
	return mprotect(R->alias + lm_page_off(lo - R->alias_first),
			lm_page_off(hi - lo), prot);
}

/* The offset in R->fd of the region's page `page`. */
static off_t fd_offset(uint32_t page)
{
	return (off_t)((R->shared ? R->ccopy.hdr->pages_off : 0) +
		       lm_page_off(page));
}

int lm_mapping_alias(uint8_t *addr, uint32_t first, uint32_t n, char *err,
		     size_t errlen)
{
	void *m;

	if (R->alias || n == 0 || first > R->npages ||
	    n > R->npages - first) {
		snprintf(err, errlen, "pages %u..%u are not a part of the "
			 "region of %u pages (or its globals are mapped "
			 "already)", first, first + n, R->npages);
		return LM_EINVAL;
	}
	m = mmap(addr, lm_page_off(n), PROT_NONE, MAP_SHARED | MAP_FIXED,
		 R->fd, fd_offset(first));
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "cannot map the region's pages over the "
			 "program's data at %p (%u pages): %s", (void *)addr,
			 n, strerror(errno));
		return LM_EIO;
	}
	R->alias = addr;
	R->alias_first = first;
	R->alias_n = n;
	/* the view's protection of these pages is its state's; closing
	 * both lets the next access decide it, for the view and the alias
	 * alike (a fault on a page whose state allows the access opens it) */
	R->stats.mprotects++;
	if (mprotect(R->view + lm_page_off(first), lm_page_off(n),
		     PROT_NONE) != 0) {
		snprintf(err, errlen, "mprotect of the region's pages %u..%u: "
			 "%s", first, first + n, strerror(errno));
		return LM_EIO;
	}
	return 0;
}

/* The program's data goes on after the region: its pages become private
 * memory again holding what the region held, at the same address. */
static void alias_restore(void)
{
	size_t len = lm_page_off(R->alias_n);
	uint8_t *tmp;

	if (!R->alias)
		return;
	tmp = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tmp != MAP_FAILED) {
		memcpy(tmp, R->rw + lm_page_off(R->alias_first), len);
		if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
			   R->alias) == MAP_FAILED) {
			munmap(tmp, len);
			tmp = MAP_FAILED;
		}
	}
	if (tmp == MAP_FAILED) {
		int e = errno;

		/* the mapping keeps the memory file after fini; opened
		 * first, as stderr itself may lie in these pages */
		mprotect(R->alias, len, PROT_READ | PROT_WRITE);
		fprintf(stderr, "lemuria: the program's data at %p cannot be "
			"made private again (%s): it stays the region's "
			"memory\n", (void *)R->alias, strerror(e));
	}
	R->alias = NULL;
	R->alias_first = R->alias_n = 0;
	R->alias_lent = false;
}

/* ---- the twin pool ---------------------------------------------------
 * Twins come from chunks mapped with mmap (a system call, so usable from
 * the handler, unlike malloc) and go back to a free list at flush.  At
 * most npages twins exist at once, which bounds the chunks, and the
 * chunks' table is allocated at init. */

static int twin_chunk_add(void)
{
	size_t bytes = (size_t)R->chunk_pages * R->page_size;
	uint8_t *c;

	if (R->nchunks == R->max_chunks)
		return LM_ENOMEM;
	c = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return LM_ENOMEM;
	/* the free list's links write every twin of the chunk below: one
	 * call gives them all, instead of a fault per page (mem.h) */
	lm_mem_populate(c, bytes);
	R->chunks[R->nchunks++] = c;
	for (uint32_t i = R->chunk_pages; i-- > 0;) {
		struct lm_twin_free *t = (struct lm_twin_free *)(c + lm_page_off(i));

		t->next = R->free_twins;
		R->free_twins = t;
	}
	return 0;
}

uint8_t *lm_twin_get(void)
{
	struct lm_twin_free *t;

	if (!R->free_twins && twin_chunk_add() != 0)
		return NULL;
	t = R->free_twins;
	R->free_twins = t->next;
	return (uint8_t *)t;
}

void lm_twin_put(uint8_t *twin)
{
	struct lm_twin_free *t = (struct lm_twin_free *)twin;

	t->next = R->free_twins;
	R->free_twins = t;
}

void lm_region_fill(void *dst, const void *src, size_t len)
{
	uintptr_t off = (uintptr_t)dst - (uintptr_t)R->rw;
	uint32_t page;

	/* a dst below the mapping wraps around to a huge offset */
	if (!R->rw || off >= R->size || off % R->page_size ||
	    len != R->page_size) {
		memcpy(dst, src, len);
		return;
	}
	page = (uint32_t)(off >> R->page_shift);
	if (!lm_bit_get(R->rw_mapped, page) &&
	    pwrite(R->fd, src, len, (off_t)off) == (ssize_t)len)
		return;
	/* mapped already, or the write failed: the mapping takes it */
	lm_rw_touch(page);
	memcpy(dst, src, len);
}

/* ---- set-up and tear-down -------------------------------------------- */

void lm_mapping_fini(void)
{
	struct lm_region_stats stats = R->stats;

	alias_restore();
	for (uint32_t i = 0; i < R->nchunks; i++)
		munmap(R->chunks[i], (size_t)R->chunk_pages * R->page_size);
	if (R->view)
		munmap(R->view, R->size);
	if (R->ccopy.map)
		munmap(R->ccopy.map, R->ccopy.size);
	else if (R->rw)
		munmap(R->rw, R->size);
	memset(&R->ccopy, 0, sizeof(R->ccopy));
	if (R->fd >= 0)
		close(R->fd);
	free(R->chunks);
	free(R->state);
	free(R->version);
	free(R->twin);
	free(R->dirty);
	free(R->open);
	free(R->next_open);
	free(R->changed);
	free(R->idle);
	free(R->marks);
	free(R->rw_mapped);
	free(R->view_given);
	free(R->closed);
	free(R->scratch);
	free(R->out);
	R->base = 0;
	R->size = 0;
	R->page_size = 0;
	R->page_shift = 0;
	R->npages = 0;
	R->fd = -1;
	R->view = NULL;
	R->rw = NULL;
	memset(&R->be, 0, sizeof(R->be));
	R->ctx = NULL;
	R->state = NULL;
	R->version = NULL;
	R->twin = NULL;
	R->dirty = NULL;
	R->ndirty = 0;
	R->open = NULL;
	R->nopen = 0;
	R->next_open = NULL;
	R->changed = NULL;
	R->idle = NULL;
	R->marks = NULL;
	R->rw_mapped = NULL;
	R->view_given = NULL;
	R->closed = NULL;
	R->mark_lo = UINT32_MAX;
	R->mark_hi = 0;
	R->free_twins = NULL;
	R->chunks = NULL;
	R->nchunks = R->max_chunks = R->chunk_pages = 0;
	R->scratch = NULL;
	R->scratch_cap = 0;
	R->out = NULL;
	R->out_cap = 0;
	R->stats = stats;
}

int lm_mapping_check(uint64_t base, uint64_t size, uint32_t page_size,
		     char *err, size_t errlen)
{
	long os_page = sysconf(_SC_PAGESIZE);

	if (os_page <= 0)
		os_page = 4096;
	if (page_size == 0 || (page_size & (page_size - 1)) != 0 ||
	    page_size % (uint64_t)os_page != 0) {
		snprintf(err, errlen, "page size %u is not a power-of-two "
			 "multiple of the system page size %ld", page_size,
			 os_page);
		return LM_EINVAL;
	}
	if (size == 0 || size % page_size != 0) {
		snprintf(err, errlen, "region size %llu is not a positive "
			 "multiple of the page size %u",
			 (unsigned long long)size, page_size);
		return LM_EINVAL;
	}
	if (size / page_size > UINT32_MAX) {
		snprintf(err, errlen, "region of %llu bytes has more than "
			 "2^32-1 pages", (unsigned long long)size);
		return LM_EINVAL;
	}
	if (base == 0 || base % page_size != 0) {
		snprintf(err, errlen, "region base 0x%llx is not a nonzero "
			 "multiple of the page size %u",
			 (unsigned long long)base, page_size);
		return LM_EINVAL;
	}
	if (base + size < base) {
		snprintf(err, errlen, "region 0x%llx + %llu bytes does not fit "
			 "the address space", (unsigned long long)base,
			 (unsigned long long)size);
		return LM_EINVAL;
	}
	return 0;
}

/* The view at base, from offset `off` of R->fd. */
static int map_view(uint64_t base, uint64_t size, off_t off, char *err,
		    size_t errlen)
{
	void *view = mmap((void *)(uintptr_t)base, size, PROT_NONE,
			  MAP_SHARED | MAP_FIXED_NOREPLACE, R->fd, off);

	if (view == MAP_FAILED) {
		snprintf(err, errlen, "cannot map the shared region at 0x%llx "
			 "(%llu bytes): %s", (unsigned long long)base,
			 (unsigned long long)size,
			 errno == EEXIST ? "address range already in use" :
					   strerror(errno));
		return LM_EIO;
	}
	if ((uintptr_t)view != base) {
		/* a kernel older than 4.17 takes the flag as a mere hint */
		munmap(view, size);
		snprintf(err, errlen, "cannot map the shared region at 0x%llx "
			 "(%llu bytes): the kernel placed it elsewhere",
			 (unsigned long long)base, (unsigned long long)size);
		return LM_EIO;
	}
	R->view = view;
	R->size = size;
	return 0;
}

/* copy = cluster: the lemuriad's object R->fd, whole, and its pages
 * again at base as the view. */
static int map_shared(uint64_t base, uint64_t size, char *err, size_t errlen)
{
	struct stat st;
	void *map;

	if (fstat(R->fd, &st) != 0) {
		snprintf(err, errlen, "the cluster's copy: %s", strerror(errno));
		return LM_EIO;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		   MAP_SHARED, R->fd, 0);
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "cannot map the cluster's copy (%llu "
			 "bytes): %s", (unsigned long long)st.st_size,
			 strerror(errno));
		return LM_EIO;
	}
	if (lm_ccopy_attach(&R->ccopy, map, (uint64_t)st.st_size,
			    (uint32_t)(size / R->page_size), R->page_size)) {
		munmap(map, (size_t)st.st_size);
		memset(&R->ccopy, 0, sizeof(R->ccopy));
		snprintf(err, errlen, "the cluster's copy the lemuriad handed "
			 "over does not fit this layout's region");
		return LM_EINVAL;
	}
	R->rw = R->ccopy.pages;
	return map_view(base, size, (off_t)R->ccopy.hdr->pages_off, err,
			errlen);
}

static int map_region(uint64_t base, uint64_t size, char *err, size_t errlen)
{
	int rc;

	if (R->shared)
		return map_shared(base, size, err, errlen);
	R->fd = memfd_create("lemuria-region", MFD_CLOEXEC);
	if (R->fd < 0) {
		snprintf(err, errlen, "memfd_create: %s", strerror(errno));
		return LM_EIO;
	}
	if (ftruncate(R->fd, (off_t)size) != 0) {
		snprintf(err, errlen, "cannot size the region's memfd to %llu "
			 "bytes: %s", (unsigned long long)size,
			 strerror(errno));
		return LM_EIO;
	}
	rc = map_view(base, size, 0, err, errlen);
	if (rc)
		return rc;
	R->rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, R->fd, 0);
	if (R->rw == MAP_FAILED) {
		R->rw = NULL;
		snprintf(err, errlen, "cannot map the region's second view "
			 "(%llu bytes): %s", (unsigned long long)size,
			 strerror(errno));
		return LM_EIO;
	}
	return 0;
}

int lm_mapping_init(uint64_t base, uint64_t size, uint32_t page_size,
		    char *err, size_t errlen)
{
	size_t words = lm_bitmap_words((uint32_t)(size / page_size));
	int rc;

	R->base = (uintptr_t)base;
	R->page_size = page_size;
	R->page_shift = (unsigned)__builtin_ctz(page_size);
	R->npages = (uint32_t)(size / page_size);
	rc = map_region(base, size, err, errlen);
	if (rc)
		return rc;

	rc = LM_ENOMEM;
	R->chunk_pages = R->npages < TWIN_CHUNK_PAGES ? R->npages
						      : TWIN_CHUNK_PAGES;
	R->max_chunks = (R->npages + R->chunk_pages - 1) / R->chunk_pages;
	R->chunks = calloc(R->max_chunks, sizeof(*R->chunks));
	R->state = calloc(R->npages, sizeof(*R->state));
	R->version = calloc(R->npages, sizeof(*R->version));
	R->twin = calloc(R->npages, sizeof(*R->twin));
	R->dirty = calloc(R->npages, sizeof(*R->dirty));
	R->open = calloc(R->npages, sizeof(*R->open));
	R->next_open = calloc(R->npages, sizeof(*R->next_open));
	R->changed = calloc(R->npages, sizeof(*R->changed));
	R->idle = calloc(R->npages, sizeof(*R->idle));
	R->marks = calloc(words, sizeof(*R->marks));
	R->rw_mapped = calloc(words, sizeof(*R->rw_mapped));
	R->view_given = calloc(words, sizeof(*R->view_given));
	R->closed = calloc(words, sizeof(*R->closed));
	R->scratch_cap = lm_diff_bound(page_size);
	R->scratch = malloc(R->scratch_cap);
	if (!R->chunks || !R->state || !R->version || !R->twin || !R->dirty ||
	    !R->open || !R->next_open || !R->changed || !R->idle || !R->marks ||
	    !R->rw_mapped || !R->view_given || !R->closed || !R->scratch) {
		snprintf(err, errlen, "no memory for the page table of %u "
			 "pages", R->npages);
		return rc;
	}
	return 0;
}

int lm_region_contains(const void *addr)
{
	return atomic_load(&R->active) && (uintptr_t)addr - R->base < R->size;
}
