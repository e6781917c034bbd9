/* The layout `lemuria-run -n N` makes for a run on this host alone
 * (docs/operations.md, "A run without a layout file"): a private
 * directory holding a fresh secret and a layout of one reflector and the
 * clusters asked for, every daemon on 127.0.0.1 at a port found free,
 * removed when the run ends. */
#ifndef LM_QUICK_LAYOUT_H
#define LM_QUICK_LAYOUT_H

#include <stddef.h>

#include "config.h"

/* Clusters a layout of this file may have (a port and a section each). */
#define LM_QUICK_MAX_CLUSTERS 64

struct lm_quick_layout {
	char dir[LM_PATH_MAX - 32]; /* "" when nothing was made */
	char path[LM_PATH_MAX];     /* dir/layout.ini */
	char key[LM_PATH_MAX];      /* dir/secret.key */
};

/* How `n` ranks are split into clusters, into sizes[] (at most max):
 *  - spec ("4+4", "2+3+1") gives the sizes; their sum must be n, or n is
 *    0 and becomes the sum;
 *  - else per > 0 (at most 1024): clusters of `per` ranks, the last one
 *    what is left;
 *  - else one cluster of n, or clusters of 1024 above that.
 * Returns the number of clusters, or -1 with the cause in err. */
int lm_quick_split(unsigned n, const char *spec, unsigned per,
		   unsigned *sizes, size_t max, char *err, size_t errlen);

/* Makes the directory (under $TMPDIR, else /tmp), the secret (32 random
 * bytes, mode 0600) and the layout for `nclusters` clusters of sizes[]
 * ranks, with `shared_size` (the layout's syntax, e.g. "64M").  Returns 0,
 * or LM_EINVAL / LM_EIO with the cause in err (nothing left behind). */
int lm_quick_layout_make(struct lm_quick_layout *q, const unsigned *sizes,
			 size_t nclusters, const char *shared_size, char *err,
			 size_t errlen);

/* Removes what lm_quick_layout_make made; a second call does nothing. */
void lm_quick_layout_remove(struct lm_quick_layout *q);

/* The region's base in such a layout: LM_LOW_BASE (1 GiB) when the
 * region then ends by LM_LOW_BASE_MAX (4 GiB), else LM_HIGH_BASE. */
#define LM_LOW_BASE 0x40000000ull
#define LM_LOW_BASE_MAX 0x100000000ull
#define LM_HIGH_BASE 0x500000000000ull
uint64_t lm_quick_layout_base(uint64_t shared_size);

#endif
