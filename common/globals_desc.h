/* The descriptor a CREATE carries instead of a data-segment image when
 * rank 0 shares its globals (liblemuria/globals.c, docs/dsm.md
 * "Globals"): the executable's range [lo, hi) that every rank maps over
 * the region's pages at `pages`.  The lemuriad reads it too: those
 * region pages are also mapped at lo in every client of the cluster,
 * where a set going in as one cannot make a reader wait
 * (common/copy_set.h). */
#ifndef LM_GLOBALS_DESC_H
#define LM_GLOBALS_DESC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LM_GLOBALS_DESC_BYTES 32
#define LM_GLOBALS_MAGIC 0x314c424f4c474d4cull /* "LMGLOBL1" little-endian */

struct lm_globals_desc {
	uint64_t lo, hi;   /* the executable's pages */
	uint64_t pages;    /* the region's pages mapped over them */
};

static inline void lm_globals_desc_put(uint8_t out[LM_GLOBALS_DESC_BYTES],
				       const struct lm_globals_desc *d)
{
	uint64_t w[4] = { LM_GLOBALS_MAGIC, d->lo, d->hi, d->pages };

	memcpy(out, w, sizeof(w));
}

/* Whether data (len bytes) is a descriptor, and then *d. */
static inline bool lm_globals_desc_get(const uint8_t *data, size_t len,
				       struct lm_globals_desc *d)
{
	uint64_t w[4];

	if (!data || len != LM_GLOBALS_DESC_BYTES)
		return false;
	memcpy(w, data, sizeof(w));
	if (w[0] != LM_GLOBALS_MAGIC || w[2] < w[1])
		return false;
	d->lo = w[1];
	d->hi = w[2];
	d->pages = w[3];
	return true;
}

#endif
