/* Protection changes of the region's view in batches (protect.c), for
 * region.c's flushes and notices.  The caller holds the region's lock. */
#ifndef LM_PROTECT_H
#define LM_PROTECT_H

#include <stdint.h>

/* Marks `page` for the next lm_protect_marked. */
void lm_protect_mark(uint32_t page);

/* Forgets every mark. */
void lm_protect_clear_marks(void);

/* Gives every marked page prot and clears the marks: each window of
 * marked pages by one TLB flush when that costs less, else run by run
 * (one mprotect per page when batching is off,
 * lm_region_set_batching).  Each marked page that keeps its old
 * protection is passed to failed (may be NULL).  Pages around them keep
 * the protection their state gives them (a clean copy whose view cannot
 * be opened again is made invalid).  Returns 0 or LM_ENOMEM (a page
 * failed). */
int lm_protect_marked(int prot, void (*failed)(uint32_t page));

#endif
