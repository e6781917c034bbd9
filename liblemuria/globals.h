/* The program's globals shared through the region, as threads share them
 * (docs/dsm.md "Globals"; issue 41): the whole pages that hold the main
 * executable's data and bss (segment.h) become region pages, mapped over
 * the executable's own in every process that runs CREATE's work, so a
 * global written after CREATE is seen under the same memory model as
 * G_MALLOC'd memory.  Rank 0 sets it up at its first lm_create and tells
 * the workers where in the CREATE (a descriptor instead of an image).
 * Ranks that run SPMD (no CREATE) keep their globals private.  Set
 * LEMURIA_GLOBALS=copy to ship the globals at CREATE only (segment.h).
 *
 * Library variables that the executable holds by copy relocation
 * (stdout, environ) lie in those pages too: they are shared, which is
 * right only when they are the same in every rank; a worker checks that
 * at its CREATE and fails naming the variable otherwise. */
#ifndef LM_GLOBALS_H
#define LM_GLOBALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What travels in CREATE instead of an image (common/globals_desc.h). */
#include "globals_desc.h"

/* Whether this process should share its globals: not when
 * LEMURIA_GLOBALS=copy. */
bool lm_globals_wanted(void);

/* Rank 0: how many bytes of region (whole pages of `page` bytes) the
 * globals need, or LM_EINVAL/LM_EIO with the reason in err. */
int lm_globals_span(size_t page, size_t *bytes, char *err, size_t errlen);

/* Rank 0: copies the globals into `pages` (the region's, as many bytes
 * as lm_globals_span said, from lm_malloc) and maps those pages over
 * them; desc is what CREATE carries.  0 or LM_E* with the reason in err
 * (the globals are then still the process's own). */
int lm_globals_share(void *pages, size_t page,
		     uint8_t desc[LM_GLOBALS_DESC_BYTES], char *err,
		     size_t errlen);

/* Whether a CREATE's data is a descriptor (else a segment image). */
bool lm_globals_is_desc(const uint8_t *data, size_t len);

/* A worker: maps the region's pages the descriptor names over its own
 * globals, keeping aside the copied library variables among them for
 * lm_globals_check.  LM_EINVAL when its executable's data lies elsewhere
 * than rank 0's (the reason in err). */
int lm_globals_join(const uint8_t *desc, size_t len, size_t page,
		    char *err, size_t errlen);

/* A worker, once CREATE's notices are applied: LM_EINVAL (naming the
 * variable in err) when a library variable among the shared pages holds
 * another value here than in rank 0. */
int lm_globals_check(char *err, size_t errlen);

/* Before the process leaves the run: each shared page read once, so that
 * what the globals keep after lm_finalize is what this process last
 * acquired (its faults bring what it lacks). */
void lm_globals_settle(void);

#endif
