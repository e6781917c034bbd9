/* The executable's writable data segment, shipped by lm_create so that
 * SPLASH-2 workers see the globals rank 0 set before CREATE (docs/dsm.md
 * step 14).
 *
 * The segment is [&__data_start, _end) of the main executable: its .data
 * and .bss.  Some ranges in it must stay per-process and are never copied
 * (they read as zero in an image): variables that shared libraries own
 * and the executable holds by copy relocation (stdout, environ, optarg
 * ...), pointer slots the dynamic linker fills with library addresses,
 * and whatever the caller excludes with lm_segment_exclude.  Pointers
 * into the executable itself that the dynamic linker relocated at start-up
 * are moved to the receiver's load base when the two differ (PIE + ASLR).
 * Safe to call from several threads; lm_segment_apply must not race with
 * threads that use the globals it overwrites. */
#ifndef LM_SEGMENT_H
#define LM_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

struct lm_segment_range {
	uintptr_t start, end; /* [start, end) */
};

/* An image is this header (magic, the sender's load base and the
 * segment's position and length) followed by runs: each a u64 offset
 * from the segment's start, a u64 length (not 0) and that many bytes of
 * the segment, in address order and apart.  Together the runs hold
 * every block of LM_SEGMENT_BLOCK bytes (aligned in memory) that has a
 * byte other than zero; the rest of the segment is zero, so that a
 * large .bss the program has not written costs nothing to ship.  Fields
 * are in the host's byte order (sender and receiver run one
 * executable). */
#define LM_SEGMENT_HEADER_BYTES 32
#define LM_SEGMENT_RUN_BYTES 16
#define LM_SEGMENT_BLOCK 4096

/* Describes the segment and its exclusions (sorted, disjoint, each inside
 * [start, end)).  Computed once and cached; *excl points into the cache
 * and stays valid until the next lm_segment_exclude.  Returns 0, or LM_EIO
 * (LM_ENOMEM) with the reason in err. */
int lm_segment_layout(uintptr_t *start, uintptr_t *end,
		      const struct lm_segment_range **excl, size_t *nexcl,
		      char *err, size_t errlen);

/* Keeps [addr, addr + len) out of every later image and apply (per-process
 * state that happens to be a global of the executable).  Returns 0,
 * LM_EINVAL when the range is not inside the segment, LM_ENOMEM, LM_EIO. */
int lm_segment_exclude(const void *addr, size_t len);

/* The whole pages of `page` bytes (a power of two, a multiple of the
 * system's) that hold the segment, [*lo, *hi): what globals.h shares.
 * Returns 0, LM_EINVAL when they reach beyond the executable's writable
 * segment (below it, into what the dynamic linker made read-only after
 * relocation, or above it), or LM_EIO; the reason in err. */
int lm_segment_pages(size_t page, uintptr_t *lo, uintptr_t *hi, char *err,
		     size_t errlen);

/* memcpy, and whether [a, a + n) holds a byte other than zero, for bytes
 * of the segment: AddressSanitizer does not see them (an instrumented
 * program's globals have redzones, which are the segment's bytes too). */
void lm_segment_bytes_copy(void *dst, const void *src, size_t n);
int lm_segment_bytes_nonzero(const void *a, size_t n);

/* Captures the image: header + runs, excluded ranges read as zero, so
 * two captures of unchanged memory are byte-identical.  On success *image
 * is malloc'd and owned by the caller (free it), *len its length.
 * Returns 0, LM_ENOMEM or LM_EIO (reason in err). */
int lm_segment_capture(uint8_t **image, size_t *len, char *err,
		       size_t errlen);

/* Makes this process's segment what the image says (borrowed; any
 * alignment): the runs' bytes, zero elsewhere, excluded ranges left as
 * they are.  The image is checked whole before anything is written.
 * Returns 0, LM_EINVAL when the image does not come from this executable
 * (magic, segment position or length differ) or its runs are malformed
 * (out of order, overlapping, beyond the segment or the image), LM_EIO
 * when the segment cannot be described. */
int lm_segment_apply(const uint8_t *image, size_t len);

/* A function of the executable as an offset from its load base (what
 * travels in CREATE), and back.  lm_segment_fn_from_offset returns NULL
 * when the offset does not fall in an executable segment of the main
 * program. */
uint64_t lm_segment_fn_offset(void (*fn)(void));
void (*lm_segment_fn_from_offset(uint64_t off))(void);

/* LM_EINVAL when `lib_global` (an address of the caller's own data) lies
 * inside the segment, i.e. the library was linked statically and an image
 * would overwrite its state; 0 otherwise; LM_EIO when the segment cannot
 * be described. */
int lm_segment_check_private(const void *lib_global);

#endif
