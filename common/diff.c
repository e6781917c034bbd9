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

/* A run header is two LEB128 varints (7 bits a byte, low group first,
 * high bit set on every byte but the last): the gap since the end of the
 * run before (the offset, for the first run), then the length.  Changed
 * doubles and pointers leave their high bytes alone, so diffs are mostly
 * runs of a few bytes a few bytes apart: two header bytes instead of the
 * eight of a fixed u32 pair halve what such a diff weighs. */
#define VARINT_MAX 5 /* bytes of a u32 */

HOT size_t varint_len(size_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

HOT size_t put_varint(uint8_t *out, size_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

/* Reads a varint of at most VARINT_MAX bytes from the `left` bytes at p;
 * returns the bytes it took, 0 when it is cut short or too long. */
HOT size_t get_varint(const uint8_t *p, size_t left, size_t *v)
{
	size_t x = 0;

	if (left && p[0] < 0x80) { /* nearly every gap and length */
		*v = p[0];
		return 1;
	}
	for (size_t n = 0; n < left && n < VARINT_MAX; n++) {
		x |= (size_t)(p[n] & 0x7f) << (7 * n);
		if (p[n] < 0x80) {
			*v = x;
			return n + 1;
		}
	}
	return 0;
}

/* Reads a varint already validated; returns the bytes it took. */
HOT size_t get_valid_varint(const uint8_t *p, size_t *v)
{
	size_t x = 0, n = 0;

	while (p[n] & 0x80) {
		x |= (size_t)(p[n] & 0x7f) << (7 * n);
		n++;
	}
	*v = x | (size_t)p[n] << (7 * n);
	return n + 1;
}

/* Steps over the header of a run of a diff already validated: its offset
 * (from the end of the run before, *end) and length; returns the position
 * of its bytes. */
HOT size_t next_valid_run(const uint8_t *diff, size_t pos, size_t *end,
			  size_t *off, size_t *len)
{
	size_t gap, rl;

	pos += get_valid_varint(diff + pos, &gap);
	pos += get_valid_varint(diff + pos, &rl);
	*off = *end + gap;
	*len = rl;
	*end = *off + rl;
	return pos;
}

HOT size_t run_size(size_t gap, size_t len)
{
	return varint_len(gap) + varint_len(len) + len;
}

/* Appends one run; the caller has checked the space. */
HOT size_t put_run(uint8_t *out, size_t gap, const uint8_t *bytes,
		   size_t len)
{
	size_t n = put_varint(out, gap);

	n += put_varint(out + n, len);
	copy_run(out + n, bytes, len);
	return n + len;
}

/* Encodes the runs of s, taking the bytes from `bytes`. */
HOT int encode_runs(struct run_scan *s, const uint8_t *bytes, uint8_t *out,
		    size_t cap, size_t *out_len)
{
	size_t pos = 0, start, end, prev = 0;

	while (scan_next(s, &start, &end)) {
		if (cap - pos < run_size(start - prev, end - start))
			return LM_ENOBUFS;
		pos += put_run(out + pos, start - prev, bytes + start,
			       end - start);
		prev = end;
	}
	*out_len = pos;
	return 0;
}

size_t lm_diff_bound(size_t page_size)
{
	/* Every other byte changed is the worst case: three bytes a run
	 * (gap, length, byte; the first gap 0), the last run two bytes long
	 * when page_size is even.  A varint of two bytes needs a gap or run
	 * of 128 bytes, which costs more than alternating over them. */
	if (page_size == 0)
		return 0;
	return page_size + (page_size + 1) / 2 + 1;
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
	size_t pos = 0, end = 0;

	while (pos < len) {
		size_t gap, rl, n;

		n = get_varint(diff + pos, len - pos, &gap);
		if (n == 0)
			return LM_EBADMSG;
		pos += n;
		n = get_varint(diff + pos, len - pos, &rl);
		if (n == 0)
			return LM_EBADMSG;
		pos += n;
		/* each test is written so that no sum can wrap */
		if (rl == 0 || gap > page_size - end ||
		    rl > page_size - end - gap || rl > len - pos)
			return LM_EBADMSG;
		pos += rl;
		end += gap + rl;
	}
	return 0;
}

void lm_diff_apply_valid(void *page, const uint8_t *diff, size_t len)
{
	uint8_t *p = page;
	size_t pos = 0, end = 0, off, rl;

	while (pos < len) {
		pos = next_valid_run(diff, pos, &end, &off, &rl);
		copy_run(p + off, diff + pos, rl);
		pos += rl;
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
	size_t pos = 0, end = 0;
	int rc;

	rc = lm_diff_validate(diff, len, page_size);
	if (rc < 0)
		return rc;
	while (pos < len) {
		size_t off, rl;

		pos = next_valid_run(diff, pos, &end, &off, &rl);
		rc = fn(ctx, off, diff + pos, rl);
		if (rc)
			return rc;
		pos += rl;
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
	size_t pos = 0, end = 0, off, rl;

	while (pos < len) {
		pos = next_valid_run(diff, pos, &end, &off, &rl);
		copy_run(d->bytes + off, diff + pos, rl);
		d->dirty += set_range(d->mask, off, rl);
		pos += rl;
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
	size_t pos = 0, end = 0, off, rl;

	while (pos < len) {
		pos = next_valid_run(diff, pos, &end, &off, &rl);
		d->dirty += set_range(d->mask, off, rl);
		pos += rl;
	}
}

size_t lm_delta_encoded_len(const struct lm_delta *d)
{
	struct run_scan s;
	size_t len = 0, start, end, prev = 0;

	scan_start(&s, d->mask, NULL, NULL, d->page_size);
	while (scan_next(&s, &start, &end)) {
		len += run_size(start - prev, end - start);
		prev = end;
	}
	return len;
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
