/* Twin/diff and cluster-delta codec of the multiple-writer protocol: the
 * pure data plane under liblemuria (diffs at release) and lemuriad (deltas
 * per page and epoch).  The format and its rules are in diff.h.
 *
 * Both a diff and a delta are walked as a bitmap of changed bytes, 64
 * bytes per 64-bit word: a delta keeps that bitmap (its mask), a diff
 * computes it from twin and page one 64-byte group at a time (SSE2 on
 * x86-64, 64-bit words elsewhere).  Runs are then found with bit scans,
 * and bytes are never looked at one by one except in a short last group.
 * -DLM_DIFF_PORTABLE forces the word path, to test it on x86 too. */
#include "diff.h"

#include <stdlib.h>
#include <string.h>

#include "lm_error.h"
#include "wire.h"

#define GROUP 64 /* bytes per bitmap word */

/* The run walker is small and sits in every inner loop; inlining it lets
 * its state live in registers and its source (mask or pages) be known. */
#define HOT static inline __attribute__((always_inline))

#if defined(__SSE2__) && !defined(LM_DIFF_PORTABLE)
/* SSE2 is part of x86-64 itself, so no run-time dispatch is needed; it
 * halves the loads per byte compared with 64-bit words. */
#include <emmintrin.h>

HOT uint64_t eqmask16(const uint8_t *a, const uint8_t *b)
{
	__m128i x = _mm_loadu_si128((const __m128i *)a);
	__m128i y = _mm_loadu_si128((const __m128i *)b);

	return (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, y));
}

/* Bit k set when a[k] == b[k], for k < 64. */
HOT uint64_t eqmask64(const uint8_t *a, const uint8_t *b)
{
	return eqmask16(a, b) | eqmask16(a + 16, b + 16) << 16 |
	       eqmask16(a + 32, b + 32) << 32 | eqmask16(a + 48, b + 48) << 48;
}

#else /* portable: 64-bit words */

/* Loads 8 bytes so that memory byte k is bits 8k..8k+7 whatever the host. */
static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

/* Bit k set when a[k] == b[k], for k < 8. */
static inline uint64_t eqmask8(const uint8_t *a, const uint8_t *b)
{
	const uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
	uint64_t x = load64(a) ^ load64(b);
	/* high bit of each byte set when the byte is nonzero; no carry can
	 * cross a byte, so unlike the borrow trick every byte is exact */
	uint64_t nz = ((x & low7) + low7) | x;
	uint64_t eq = ~nz & ~low7;

	/* gather bit 8k+7 into bit 56+k, then move the byte down */
	return ((eq >> 7) * 0x0102040810204080ull) >> 56;
}

HOT uint64_t eqmask64(const uint8_t *a, const uint8_t *b)
{
	uint64_t m = 0;

	for (int k = 0; k < 8; k++)
		m |= eqmask8(a + 8 * k, b + 8 * k) << (8 * k);
	return m;
}
#endif

/* Bit k set when byte g + k differs, for the bytes of [g, min(g + 64, n)). */
HOT uint64_t diff_bits(const uint8_t *a, const uint8_t *b, size_t g, size_t n)
{
	uint64_t m = 0;

	if (g + GROUP <= n)
		return ~eqmask64(a + g, b + g);
	for (size_t k = 0; g + k < n; k++) /* only pages not a multiple of 64 */
		if (a[g + k] != b[g + k])
			m |= 1ull << k;
	return m;
}

/* Walks the maximal runs of set bits of a byte bitmap: a delta's mask, or
 * the bytes where page b differs from twin a. */
struct run_scan {
	const uint64_t *mask; /* delta source, or NULL for a diff source */
	const uint8_t *a, *b;
	size_t n;   /* bytes in the page */
	size_t g;   /* first byte of the current group */
	uint64_t m; /* bits of the current group not yet walked */
};

HOT uint64_t group_bits(const struct run_scan *s, size_t g)
{
	return s->mask ? s->mask[g / GROUP] : diff_bits(s->a, s->b, g, s->n);
}

HOT void scan_start(struct run_scan *s, const uint64_t *mask, const uint8_t *a,
		    const uint8_t *b, size_t n)
{
	s->mask = mask;
	s->a = a;
	s->b = b;
	s->n = n;
	s->g = 0;
	s->m = n ? group_bits(s, 0) : 0;
}

/* The lowest set bit of x and every bit above it. */
HOT uint64_t from_lowest(uint64_t x)
{
	return x | -x;
}

/* Every bit above the lowest set bit of x. */
HOT uint64_t above_lowest(uint64_t x)
{
	return ~(x ^ (x - 1));
}

/* Sets [*start, *end) to the next run; false when there is none.  Bits
 * past n are never set (the last mask word is kept clean, diff_bits stops
 * at n), so a run ends at n at the latest. */
HOT bool scan_next(struct run_scan *s, size_t *start, size_t *end)
{
	uint64_t clear;

	while (!s->m) {
		s->g += GROUP;
		if (s->g >= s->n)
			return false;
		s->m = group_bits(s, s->g);
	}
	*start = s->g + (size_t)__builtin_ctzll(s->m);
	clear = ~s->m & from_lowest(s->m); /* clear bits above start */
	while (!clear) {
		s->g += GROUP;
		if (s->g >= s->n) {
			s->m = 0;
			*end = s->n;
			return true;
		}
		s->m = group_bits(s, s->g);
		clear = ~s->m;
	}
	*end = s->g + (size_t)__builtin_ctzll(clear);
	s->m &= above_lowest(clear);
	return true;
}

/* Copies a run between buffers that do not overlap.  Most runs are a few
 * bytes (a counter, a pointer), where a call to memcpy with a variable
 * length costs more than the copy: those are done as two fixed-size,
 * possibly overlapping moves. */
HOT void copy_run(uint8_t *dst, const uint8_t *src, size_t len)
{
	uint64_t x, y;
	uint32_t u, v;

	if (len >= 8 && len <= 16) {
		memcpy(&x, src, 8);
		memcpy(&y, src + len - 8, 8);
		memcpy(dst, &x, 8);
		memcpy(dst + len - 8, &y, 8);
	} else if (len >= 4 && len < 8) {
		memcpy(&u, src, 4);
		memcpy(&v, src + len - 4, 4);
		memcpy(dst, &u, 4);
		memcpy(dst + len - 4, &v, 4);
	} else if (len < 4) {
		for (size_t k = 0; k < len; k++)
			dst[k] = src[k];
	} else {
		memcpy(dst, src, len);
	}
}

/* Appends one run; the caller has checked the space. */
HOT size_t put_run(uint8_t *out, size_t offset, const uint8_t *bytes,
		   size_t len)
{
	/* the u32 offset then the u32 length, as one little-endian store */
	lm_put64(out, (uint64_t)offset | (uint64_t)len << 32);
	copy_run(out + LM_DIFF_RUN_HDR, bytes, len);
	return LM_DIFF_RUN_HDR + len;
}

HOT bool run_fits(size_t pos, size_t cap, size_t len)
{
	return cap - pos >= LM_DIFF_RUN_HDR &&
	       cap - pos - LM_DIFF_RUN_HDR >= len;
}

/* Encodes the runs of s, taking the bytes from `bytes`. */
HOT int encode_runs(struct run_scan *s, const uint8_t *bytes, uint8_t *out,
		    size_t cap, size_t *out_len)
{
	size_t pos = 0, start, end;

	while (scan_next(s, &start, &end)) {
		if (!run_fits(pos, cap, end - start))
			return LM_ENOBUFS;
		pos += put_run(out + pos, start, bytes + start, end - start);
	}
	*out_len = pos;
	return 0;
}

size_t lm_diff_bound(size_t page_size)
{
	/* Runs are separated by at least one unchanged byte, so r runs carry
	 * at most n - (r - 1) bytes: 8r + n - r + 1, largest at the most
	 * runs, r = ceil(n/2). */
	if (page_size == 0)
		return 0;
	return (page_size + 1) / 2 * (LM_DIFF_RUN_HDR - 1) + page_size + 1;
}

int lm_diff_encode(const void *twin, const void *page, size_t page_size,
		   uint8_t *out, size_t cap, size_t *out_len)
{
	struct run_scan s;

	if (page_size > LM_DIFF_MAX_PAGE)
		return LM_EINVAL;
	/* Every page written in an interval is compared at release and many
	 * end up clean; libc's memcmp is the fastest scan of a clean page, and
	 * on a dirty one it stops at the first change. */
	if (memcmp(twin, page, page_size) == 0) {
		*out_len = 0;
		return 0;
	}
	scan_start(&s, NULL, twin, page, page_size);
	return encode_runs(&s, page, out, cap, out_len);
}

int lm_diff_validate(const uint8_t *diff, size_t len, size_t page_size)
{
	size_t pos = 0, prev_end = 0;

	while (pos < len) {
		size_t off, rl;

		if (len - pos < LM_DIFF_RUN_HDR)
			return LM_EBADMSG;
		off = lm_get32(diff + pos);
		rl = lm_get32(diff + pos + 4);
		pos += LM_DIFF_RUN_HDR;
		/* each test is written so that no sum can wrap */
		if (rl == 0 || off < prev_end || off > page_size ||
		    rl > page_size - off || rl > len - pos)
			return LM_EBADMSG;
		pos += rl;
		prev_end = off + rl;
	}
	return 0;
}

void lm_diff_apply_valid(void *page, const uint8_t *diff, size_t len)
{
	uint8_t *p = page;
	size_t pos = 0;

	while (pos < len) {
		size_t off = lm_get32(diff + pos);
		size_t rl = lm_get32(diff + pos + 4);

		copy_run(p + off, diff + pos + LM_DIFF_RUN_HDR, rl);
		pos += LM_DIFF_RUN_HDR + rl;
	}
}

int lm_diff_apply(void *page, size_t page_size, const uint8_t *diff, size_t len)
{
	/* all or nothing: a bad run late in the diff must not leave the
	 * earlier runs written */
	int rc = lm_diff_validate(diff, len, page_size);

	if (rc < 0)
		return rc;
	lm_diff_apply_valid(page, diff, len);
	return 0;
}

int lm_diff_foreach_run(const uint8_t *diff, size_t len, size_t page_size,
			lm_diff_run_fn fn, void *ctx)
{
	size_t pos = 0;
	int rc;

	rc = lm_diff_validate(diff, len, page_size);
	if (rc < 0)
		return rc;
	while (pos < len) {
		size_t off = lm_get32(diff + pos);
		size_t rl = lm_get32(diff + pos + 4);

		rc = fn(ctx, off, diff + pos + LM_DIFF_RUN_HDR, rl);
		if (rc)
			return rc;
		pos += LM_DIFF_RUN_HDR + rl;
	}
	return 0;
}

/* ---- cluster deltas ---------------------------------------------------- */

/* Without -mpopcnt the builtin is a call into libgcc; this is inline. */
HOT size_t popcount64(uint64_t x)
{
#ifdef __POPCNT__
	return (size_t)__builtin_popcountll(x);
#else
	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (size_t)((x * 0x0101010101010101ull) >> 56);
#endif
}

static size_t mask_words(size_t page_size)
{
	return (page_size + GROUP - 1) / GROUP;
}

/* Bits [b, b + k) of one word, 0 < k, b + k <= 64. */
HOT uint64_t bit_span(size_t b, size_t k)
{
	return (k == GROUP ? ~0ull : (1ull << k) - 1) << b;
}

/* Sets bits [off, off + len) and returns how many were clear before. */
HOT size_t set_range(uint64_t *m, size_t off, size_t len)
{
	size_t w = off / GROUP, b = off % GROUP, added;
	uint64_t bits;

	if (b + len <= GROUP) { /* most runs are short */
		bits = bit_span(b, len);
		added = popcount64(bits & ~m[w]);
		m[w] |= bits;
		return added;
	}
	bits = bit_span(b, GROUP - b);
	added = popcount64(bits & ~m[w]);
	m[w++] |= bits;
	for (len -= GROUP - b; len >= GROUP; len -= GROUP, w++) {
		added += GROUP - popcount64(m[w]);
		m[w] = ~0ull;
	}
	if (len) {
		bits = bit_span(0, len);
		added += popcount64(bits & ~m[w]);
		m[w] |= bits;
	}
	return added;
}

int lm_delta_init(struct lm_delta *d, size_t page_size)
{
	memset(d, 0, sizeof(*d));
	if (page_size == 0 || page_size > LM_DIFF_MAX_PAGE)
		return LM_EINVAL;
	d->bytes = malloc(page_size);
	d->mask = calloc(mask_words(page_size), sizeof(*d->mask));
	if (!d->bytes || !d->mask) {
		lm_delta_free(d);
		return LM_ENOMEM;
	}
	d->page_size = page_size;
	return 0;
}

void lm_delta_reset(struct lm_delta *d)
{
	/* bytes may keep stale values: nothing reads them unmasked */
	if (d->mask)
		memset(d->mask, 0, mask_words(d->page_size) * sizeof(*d->mask));
	d->dirty = 0;
}

void lm_delta_free(struct lm_delta *d)
{
	if (!d)
		return;
	free(d->bytes);
	free(d->mask);
	d->bytes = NULL;
	d->mask = NULL;
	d->page_size = 0;
	d->dirty = 0;
}

void lm_delta_add_valid_diff(struct lm_delta *d, const uint8_t *diff,
			     size_t len)
{
	size_t pos = 0;

	while (pos < len) {
		size_t off = lm_get32(diff + pos);
		size_t rl = lm_get32(diff + pos + 4);

		copy_run(d->bytes + off, diff + pos + LM_DIFF_RUN_HDR, rl);
		d->dirty += set_range(d->mask, off, rl);
		pos += LM_DIFF_RUN_HDR + rl;
	}
}

int lm_delta_add_diff(struct lm_delta *d, const uint8_t *diff, size_t len)
{
	int rc = lm_diff_validate(diff, len, d->page_size);

	if (rc < 0)
		return rc;
	lm_delta_add_valid_diff(d, diff, len);
	return 0;
}

void lm_delta_mark_valid_diff(struct lm_delta *d, const uint8_t *diff,
			      size_t len)
{
	size_t pos = 0;

	while (pos < len) {
		size_t off = lm_get32(diff + pos);
		size_t rl = lm_get32(diff + pos + 4);

		d->dirty += set_range(d->mask, off, rl);
		pos += LM_DIFF_RUN_HDR + rl;
	}
}

size_t lm_delta_encoded_len(const struct lm_delta *d)
{
	size_t runs = 0, nw = mask_words(d->page_size);
	uint64_t carry = 0;

	/* a run starts at each set bit whose lower neighbour is clear */
	for (size_t w = 0; w < nw; w++) {
		uint64_t x = d->mask[w];

		runs += popcount64(x & ~((x << 1) | carry));
		carry = x >> 63;
	}
	return runs * LM_DIFF_RUN_HDR + d->dirty;
}

int lm_delta_encode(const struct lm_delta *d, uint8_t *out, size_t cap,
		    size_t *out_len)
{
	struct run_scan s;

	scan_start(&s, d->mask, NULL, NULL, d->page_size);
	return encode_runs(&s, d->bytes, out, cap, out_len);
}

void lm_delta_apply_to(const struct lm_delta *d, void *page)
{
	struct run_scan s;
	size_t start, end;

	scan_start(&s, d->mask, NULL, NULL, d->page_size);
	while (scan_next(&s, &start, &end))
		copy_run((uint8_t *)page + start, d->bytes + start,
			 end - start);
}

int lm_delta_merge(struct lm_delta *dst, const struct lm_delta *src)
{
	struct run_scan s;
	size_t start, end;

	if (dst->page_size != src->page_size)
		return LM_EINVAL;
	scan_start(&s, src->mask, NULL, NULL, src->page_size);
	while (scan_next(&s, &start, &end)) {
		copy_run(dst->bytes + start, src->bytes + start, end - start);
		dst->dirty += set_range(dst->mask, start, end - start);
	}
	return 0;
}
