/* Twins, diffs and cluster deltas: the data-plane codec of the
 * multiple-writer protocol (DESIGN.md §2).  Pure computation, no I/O.
 *
 * A writer keeps a twin (a copy of the page taken at its first write in an
 * interval).  At release it encodes a diff: the byte runs where the page now
 * differs from the twin.  Diffs of one interval touch disjoint bytes in a
 * race-free program, so a diff must write ONLY bytes that changed: a byte
 * that was left as it was would, when applied, overwrite what another
 * writer put there.
 *
 * Diff encoding: a sequence of zero or more elements with nothing
 * before, between or after them, each
 *
 *   varint gap | varint size | payload
 *
 * where a varint is LEB128 (7 bits a byte, low group first, the high bit
 * set on every byte but the last, at most 5 bytes) and gap is the
 * element's offset minus the end of the element before (the offset itself
 * for the first).  Elements are therefore in ascending order and never
 * overlap.  size even: a run of size / 2 > 0 bytes, which follow.  size
 * odd: (size - 1) / 2 > 0 masked groups, at an offset that is a multiple
 * of 64, each a u64 bitmap (little-endian; bit k selects byte k) and then
 * the selected bytes, in order: as many as the bitmap has bits set, so a
 * group's length follows from its bitmap (an element of masked groups is
 * read group by group).  Every element ends inside the page and inside
 * the diff (computed without overflow).  The encoders below send a
 * 64-byte group masked when it holds three runs or more whose bytes and
 * headers take 64 bytes or more; they never emit two adjacent runs.  The
 * empty diff (length 0) means "nothing changed".
 *
 * A cluster delta is what a lemuriad accumulates for one page over an
 * epoch: the newest value of every byte any diff wrote (bytes) and which
 * bytes those are (mask, one bit per byte).  It encodes to the same
 * format, so a delta travels and applies like one big diff. */
#ifndef LM_DIFF_H
#define LM_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest page a diff can describe (gaps and lengths are u32 varints). */
#define LM_DIFF_MAX_PAGE ((size_t)UINT32_MAX)

/* Worst-case encoded size of a diff or delta of a page of page_size bytes
 * (about 1.5 bytes per page byte, when every other byte changed; reached
 * by pages under 64 bytes, whose groups never go masked): enough for any
 * output buffer. */
size_t lm_diff_bound(size_t page_size);

/* Encodes the diff between twin (before) and page (now), both page_size
 * bytes, into out (cap bytes, caller-owned).  On success sets *out_len
 * (0 when nothing changed) and returns 0.  Returns LM_ENOBUFS when the
 * diff does not fit in cap (out then holds a partial encoding and must not
 * be used; lm_diff_bound(page_size) bytes are always enough) or LM_EINVAL
 * when page_size exceeds LM_DIFF_MAX_PAGE.  A clean page costs one scan
 * at memcmp's speed; a dirty one is compared 64 bytes at a time from its
 * first changed group on (its clean start is read once).  twin and page
 * are only read and need no particular alignment. */
int lm_diff_encode(const void *twin, const void *page, size_t page_size,
		   uint8_t *out, size_t cap, size_t *out_len);

/* The diff that writes every byte of the page: one run of page_size
 * bytes (what a cluster sends of a page it owned, whose writes nobody
 * tracked).  0, LM_ENOBUFS or LM_EINVAL as lm_diff_encode. */
int lm_diff_encode_whole(const void *page, size_t page_size, uint8_t *out,
			 size_t cap, size_t *out_len);

/* Checks that diff (len bytes) is well formed for a page of page_size
 * bytes (see the top of this file).  Returns 0 or LM_EBADMSG. */
int lm_diff_validate(const uint8_t *diff, size_t len, size_t page_size);

/* Writes the bytes of diff into page.  The whole diff is validated first:
 * on LM_EBADMSG the page is untouched, never half-applied, so a malformed
 * diff from the network cannot write out of bounds.  The diff is only
 * read. */
int lm_diff_apply(void *page, size_t page_size, const uint8_t *diff,
		  size_t len);

/* Writes the bytes of diff into page and, when copy is not NULL, into
 * copy too, checking each element (each group of a masked one) just
 * before it writes it: the diff is read once.  On LM_EBADMSG what came
 * before the malformed part is written (never a byte outside the
 * pages), so it suits only a caller that then drops the page: a client
 * taking an update invalidates the copy on a bad one. */
int lm_diff_apply_checked(void *page, void *copy, size_t page_size,
			  const uint8_t *diff, size_t len);
/* (page and copy must not overlap; the diff is decoded once for both) */

/* True when the diff changes nothing. */
static inline bool lm_diff_is_empty(size_t len)
{
	return len == 0;
}

/* Called once per run; `bytes` points into the diff (borrowed, valid
 * during the call).  A nonzero return stops the walk. */
typedef int (*lm_diff_run_fn)(void *ctx, size_t offset, const uint8_t *bytes,
			      size_t len);

/* Validates diff like lm_diff_apply, then calls fn for each run in order
 * (the runs of a masked group one by one; a run that crosses from one
 * masked group into the next comes as two).  Returns LM_EBADMSG (fn never called), the first nonzero value fn
 * returned, or 0. */
int lm_diff_foreach_run(const uint8_t *diff, size_t len, size_t page_size,
			lm_diff_run_fn fn, void *ctx);

/* The instruction sets the codec runs on, chosen once from the CPU's:
 * every path gives the same bytes. */
enum lm_diff_path {
	LM_DIFF_NARROW, /* any CPU: SSE2 on x86-64, 64-bit words elsewhere */
	LM_DIFF_AVX2,	/* AVX2, with the POPCNT and BMI1 its CPUs all have */
	LM_DIFF_AVX512, /* AVX-512BW and VBMI2 */
};

/* For tests and benchmarks: the codec takes the best path the CPU has up
 * to max; returns the path it takes from now on.  Not to be called while
 * other threads use the codec. */
enum lm_diff_path lm_diff_set_path(enum lm_diff_path max);

/* The path the codec takes now. */
enum lm_diff_path lm_diff_current_path(void);

/* Accumulated writes to one page.  Fields are readable; change them only
 * through the functions below.  bytes[i] is meaningful only where bit i of
 * mask is set (bit i%64 of mask[i/64]); dirty counts the set bits. */
struct lm_delta {
	size_t page_size;
	uint8_t *bytes; /* page_size bytes, owned */
	uint64_t *mask; /* (page_size + 63) / 64 words, owned */
	size_t dirty;	/* bytes written so far */
};

/* Allocates an empty delta for pages of page_size bytes.  Returns 0,
 * LM_EINVAL (page_size 0 or above LM_DIFF_MAX_PAGE) or LM_ENOMEM; on error
 * *d owns nothing (lm_delta_free is still safe). */
int lm_delta_init(struct lm_delta *d, size_t page_size);

/* Empties the delta (the start of a new epoch); keeps the buffers. */
void lm_delta_reset(struct lm_delta *d);

/* Frees the buffers; accepts NULL and a delta already freed. */
void lm_delta_free(struct lm_delta *d);

static inline bool lm_delta_is_empty(const struct lm_delta *d)
{
	return d->dirty == 0;
}

/* Records the runs of diff (len bytes, only read) as newer than what the
 * delta holds: for a byte written twice, the later write wins.  Validated
 * first; on LM_EBADMSG the delta is unchanged. */
int lm_delta_add_diff(struct lm_delta *d, const uint8_t *diff, size_t len);

/* For a diff lm_diff_validate accepted for the page size (a lemuriad
 * checks a whole FLUSH before it applies any of it): the same as
 * lm_diff_apply and lm_delta_add_diff without checking again. */
void lm_diff_apply_valid(void *page, const uint8_t *diff, size_t len);
void lm_delta_add_valid_diff(struct lm_delta *d, const uint8_t *diff,
			     size_t len);
/* lm_delta_add_valid_diff(d), lm_delta_mark_valid_diff(w) and
 * lm_diff_apply_valid(page) at once, the diff decoded once (a lemuriad
 * takes each flushed diff into the page's delta, the writer's mask and
 * its cached copy).  w and page may be NULL; none may overlap. */
void lm_delta_add_valid_diff_also(struct lm_delta *d, struct lm_delta *w,
				  void *page, const uint8_t *diff, size_t len);
/* Like lm_delta_add_valid_diff for the mask (and dirty) only: bytes are
 * not read or written and may be NULL.  A lemuriad marks the bytes of an
 * epoch in a page whose values its cached copy holds, and points bytes
 * at that copy to encode them (docs/dsm.md "Updates"). */
void lm_delta_mark_valid_diff(struct lm_delta *d, const uint8_t *diff,
			      size_t len);
/* Exact size lm_delta_encode will produce. */
size_t lm_delta_encoded_len(const struct lm_delta *d);

/* Encodes the delta's masked bytes as a diff (dense groups masked, the
 * rest as maximal runs of set mask bits) into out (cap bytes, caller-owned).  Returns 0 with *out_len set,
 * or LM_ENOBUFS (out holds a partial encoding; see lm_delta_encoded_len). */
int lm_delta_encode(const struct lm_delta *d, uint8_t *out, size_t cap,
		    size_t *out_len);

/* Writes the masked bytes into page (d->page_size bytes); leaves every
 * other byte alone. */
void lm_delta_apply_to(const struct lm_delta *d, void *page);

/* Folds src into dst, src being the newer: where both wrote a byte, src's
 * value wins.  src is unchanged.  Returns 0, or LM_EINVAL when the page
 * sizes differ (dst unchanged). */
int lm_delta_merge(struct lm_delta *dst, const struct lm_delta *src);

#endif
