/* The region's memory (mapping.c): its two mappings, the page table and
 * the twin pool, all in region_state.h's R.  Callers hold the region's
 * lock, or are init and fini. */
#ifndef LM_MAPPING_H
#define LM_MAPPING_H

#include <stddef.h>
#include <stdint.h>

/* Whether base, size and page_size make a region (lm_region_init's
 * rules): 0 or LM_EINVAL, with the reason in err. */
int lm_mapping_check(uint64_t base, uint64_t size, uint32_t page_size,
		     char *err, size_t errlen);

/* Maps the region checked by lm_mapping_check (both mappings, every page
 * of the view PROT_NONE) and allocates the page table and buffers.
 * Returns 0, LM_EIO or LM_ENOMEM with the reason in err; on error the
 * caller undoes it with lm_mapping_fini. */
int lm_mapping_init(uint64_t base, uint64_t size, uint32_t page_size,
		    char *err, size_t errlen);

/* Unmaps and frees what init built, whatever of it was built; keeps the
 * statistics, the lock word and the prefetch setting. */
void lm_mapping_fini(void);

/* mprotect of pages [first, first + n) of the view, and of the alias
 * where they overlap it (lm_mapping_alias), counted in the statistics:
 * every change of the view's protection goes through it. */
int lm_view_protect(uint32_t first, uint32_t n, int prot);

/* Maps pages [first, first + n) of the region a second time at addr
 * (MAP_FIXED: over whatever is there, the program's data), closed, and
 * closes their view too: from now on every protection change of those
 * pages applies to both, and a fault at addr is a fault on the region's
 * page.  fini makes addr private memory again, holding the pages' last
 * bytes.  Returns 0, LM_EINVAL (pages outside the region, or an alias
 * mapped already) or LM_EIO, with the reason in err. */
int lm_mapping_alias(uint8_t *addr, uint32_t first, uint32_t n, char *err,
		     size_t errlen);

/* A twin (a page of memory) from the pool, NULL when none can be mapped;
 * no malloc, so the fault handler may call it.  lm_twin_put gives one
 * back. */
uint8_t *lm_twin_get(void);
void lm_twin_put(uint8_t *twin);

#endif
