/* Twin/diff and cluster-delta codec of the multiple-writer protocol: the
 * pure data plane under liblemuria (diffs at release) and lemuriad (deltas
 * per page and epoch).  The format and its rules are in diff.h.
 *
 * Both a diff and a delta are walked as a bitmap of changed bytes, 64
 * bytes per 64-bit word: a delta keeps that bitmap (its mask), a diff
 * computes it from twin and page one 64-byte group at a time.  Runs are
 * then found with bit scans; dense groups go as their bitmap and the
 * bytes it selects, packed, and are merged with masked stores.  Each
 * walker is compiled for three paths, chosen at run time from the CPU's
 * features (diff.h, "paths" below): AVX-512BW with VBMI2, AVX2, and the
 * narrow one (SSE2 on x86-64, 64-bit words elsewhere; packing 64-bit
 * words where it can).  -DLM_DIFF_PORTABLE forces the word path, to test
 * it on x86 too. */
#include "diff.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"

#define GROUP 64 /* bytes per bitmap word */

/* The run walker is small and sits in every inner loop; inlining it lets
 * its state live in registers and its source (mask or pages) be known. */
#define HOT static inline __attribute__((always_inline))

/* Loads 8 bytes so that memory byte k is bits 8k..8k+7 whatever the host
 * (the wire's little-endian u64, and the portable compare's words). */
HOT uint64_t get64le(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

/* Byte k: how many bits bytes 0..k of m have set (byte 7: all of them). */
HOT uint64_t byte_counts_upto(uint64_t m)
{
	uint64_t x = m - (m >> 1 & 0x5555555555555555ull);

	x = (x & 0x3333333333333333ull) + (x >> 2 & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return x * 0x0101010101010101ull;
}

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

/* Bit k set when a[k] == b[k], for k < 8. */
static inline uint64_t eqmask8(const uint8_t *a, const uint8_t *b)
{
	const uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
	uint64_t x = get64le(a) ^ get64le(b);
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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(LM_DIFF_PORTABLE)
/* The AVX2 and AVX-512 paths, taken where the CPU has them (chosen at
 * run time, see "paths" below).  Their primitives are not always_inline:
 * they may only be inlined into code compiled for them, the walkers'
 * *_avx2 and *_avx512 instances. */
#define LM_DIFF_X86 1
#include <immintrin.h>

#define AVX512_ISA "avx512bw,avx512vbmi2,popcnt"
#define AVX2_ISA "avx2,bmi,popcnt"

/* AVX-512BW and VBMI2: one compare gives a group's bitmap, one masked
 * byte store merges a group, and one compress or expand packs or unpacks
 * a masked group's bytes. */
static inline __attribute__((target(AVX512_ISA))) void
blend64_avx512(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	_mm512_mask_storeu_epi8(dst, (__mmask64)m, _mm512_loadu_si512(src));
}

/* Writes the popcount(m) bytes at src into the bytes of dst that m
 * selects, in order (a masked group's packed bytes into a page); reads
 * no byte of src beyond them. */
static inline __attribute__((target(AVX512_ISA))) void
expand64_avx512(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	_mm512_mask_storeu_epi8(dst, (__mmask64)m,
				_mm512_maskz_expandloadu_epi8((__mmask64)m, src));
}

/* Writes the bytes of src that m selects, packed, to dst: n, which is
 * popcount(m), bytes and no more. */
static inline __attribute__((target(AVX512_ISA))) void
compress64_avx512(uint8_t *dst, const uint8_t *src, uint64_t m, size_t n)
{
	__m512i c = _mm512_maskz_compress_epi8((__mmask64)m,
					       _mm512_loadu_si512(src));

	_mm512_mask_storeu_epi8(dst, n == 64 ? ~0ull : (1ull << n) - 1, c);
}

/* Bit k set when a[k] == b[k], for k < 64: one compare. */
static inline __attribute__((target(AVX512_ISA))) uint64_t
eqmask64_avx512(const uint8_t *a, const uint8_t *b)
{
	return _mm512_cmpeq_epi8_mask(_mm512_loadu_si512(a),
				      _mm512_loadu_si512(b));
}

/* Where a and b (n bytes) first differ, rounded down to a group; the end
 * of n's whole groups when they all agree.  Four groups a step while they
 * agree: a page's clean start costs what memcmp's would, and the encoder
 * starts after it instead of comparing it again. */
static inline __attribute__((target(AVX512_ISA))) size_t
same_prefix_avx512(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t g = 0;

	for (; g + 4 * GROUP <= n; g += 4 * GROUP) {
		__m512i x = _mm512_setzero_si512();

		for (size_t k = 0; k < 4 * GROUP; k += GROUP)
			x = _mm512_or_si512(
				x, _mm512_xor_si512(
					   _mm512_loadu_si512(a + g + k),
					   _mm512_loadu_si512(b + g + k)));
		if (_mm512_test_epi64_mask(x, x))
			break;
	}
	while (g + GROUP <= n && eqmask64_avx512(a + g, b + g) == ~0ull)
		g += GROUP;
	return g;
}

/* AVX2: two compares give a group's bitmap and two byte blends merge
 * it.  A masked group's bytes are packed and unpacked eight at a time by
 * byte shuffles, whose controls come from the tables below, indexed by
 * the byte of the bitmap that selects those eight. */
static inline __attribute__((target(AVX2_ISA))) uint64_t
eqmask64_avx2(const uint8_t *a, const uint8_t *b)
{
	uint64_t m = 0;

	for (int k = 0; k < 2; k++) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(a + 32 * k));
		__m256i y = _mm256_loadu_si256((const __m256i *)(b + 32 * k));

		m |= (uint64_t)(uint32_t)_mm256_movemask_epi8(
			     _mm256_cmpeq_epi8(x, y))
		     << 32 * k;
	}
	return m;
}

/* same_prefix_avx512 with 32-byte compares. */
static inline __attribute__((target(AVX2_ISA))) size_t
same_prefix_avx2(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t g = 0;

	for (; g + 4 * GROUP <= n; g += 4 * GROUP) {
		__m256i x = _mm256_setzero_si256();

		for (size_t k = 0; k < 4 * GROUP; k += 32) {
			const __m256i *p = (const __m256i *)(a + g + k);
			const __m256i *q = (const __m256i *)(b + g + k);

			x = _mm256_or_si256(
				x, _mm256_xor_si256(_mm256_loadu_si256(p),
						    _mm256_loadu_si256(q)));
		}
		if (!_mm256_testz_si256(x, x))
			break;
	}
	while (g + GROUP <= n && eqmask64_avx2(a + g, b + g) == ~0ull)
		g += GROUP;
	return g;
}

/* Copies the bytes of src that m selects into dst, 64 bytes: each byte
 * of a 32-bit half of m is spread over eight lanes, which test one bit
 * each. */
static inline __attribute__((target(AVX2_ISA))) void
blend64_avx2(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	const __m256i spread = _mm256_setr_epi8(
		0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, /* lane 0 */
		2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3); /* lane 1 */
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);

	for (int k = 0; k < 2; k++) {
		uint32_t half = (uint32_t)(m >> 32 * k);
		__m256i v, e, d, x;

		if (!half)
			continue;
		v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)half), spread);
		e = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
		d = _mm256_loadu_si256((const __m256i *)(dst + 32 * k));
		x = _mm256_loadu_si256((const __m256i *)(src + 32 * k));
		_mm256_storeu_si256((__m256i *)(dst + 32 * k),
				    _mm256_blendv_epi8(d, x, e));
	}
}

/* The shuffle controls.  A byte b of a bitmap selects POP8(b) of eight
 * bytes; packed, they are read and written as the eight bytes that END
 * with them, so that no access goes past a group's packed bytes (nor,
 * since a group starts with its 8-byte bitmap, before the group).  In
 * those eight, bit i's byte is at SLOT(b, i): after 8 - POP8(b) others,
 * and after the selected bytes below it. */
#define BIT(b, i) ((b) >> (i) & 1)
#define POP8(b)                                                          \
	(BIT(b, 0) + BIT(b, 1) + BIT(b, 2) + BIT(b, 3) + BIT(b, 4) +     \
	 BIT(b, 5) + BIT(b, 6) + BIT(b, 7))
#define SLOT(b, i) (8 - POP8(b) + POP8((b) & ((1u << (i)) - 1)))
/* unpacking: byte i takes byte SLOT(b, i), or is zeroed (0x80) */
#define EXPAND_BYTE(b, i)                                                \
	((uint64_t)(BIT(b, i) ? SLOT(b, i) : 0x80) << 8 * (i))
/* packing: byte SLOT(b, i) takes byte i; the bytes before the packed
 * ones take byte 0, and are overwritten */
#define COMPRESS_BYTE(b, i)                                              \
	(BIT(b, i) ? (uint64_t)(i) << 8 * (SLOT(b, i) & 7) : 0)
#define CTRL(F, b)                                                       \
	(F(b, 0) | F(b, 1) | F(b, 2) | F(b, 3) | F(b, 4) | F(b, 5) |     \
	 F(b, 6) | F(b, 7))
#define CTRL4(F, b)                                                      \
	CTRL(F, b), CTRL(F, (b) + 1), CTRL(F, (b) + 2), CTRL(F, (b) + 3)
#define CTRL16(F, b)                                                     \
	CTRL4(F, b), CTRL4(F, (b) + 4), CTRL4(F, (b) + 8),               \
		CTRL4(F, (b) + 12)
#define CTRL64(F, b)                                                     \
	CTRL16(F, b), CTRL16(F, (b) + 16), CTRL16(F, (b) + 32),          \
		CTRL16(F, (b) + 48)
#define CTRL256(F)                                                       \
	CTRL64(F, 0u), CTRL64(F, 64u), CTRL64(F, 128u), CTRL64(F, 192u)

static const uint64_t expand_ctrl[256] = { CTRL256(EXPAND_BYTE) };
static const uint64_t compress_ctrl[256] = { CTRL256(COMPRESS_BYTE) };

/* expand64_avx512 eight bytes at a time: the eight that end with chunk
 * k's packed bytes are shuffled into place and blended into dst. */
static inline __attribute__((target(AVX2_ISA))) void
expand64_avx2(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	uint64_t ends = byte_counts_upto(m);

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++) {
		const uint8_t *at = src + (ends >> 8 * k & 0xff) - 8;
		__m128i c = _mm_loadl_epi64(
			(const __m128i *)&expand_ctrl[m >> 8 * k & 0xff]);
		__m128i x = _mm_loadl_epi64((const __m128i *)at);
		__m128i d = _mm_loadl_epi64((const __m128i *)(dst + 8 * k));

		/* dst's byte where the control's high bit is set */
		_mm_storel_epi64((__m128i *)(dst + 8 * k),
				 _mm_blendv_epi8(_mm_shuffle_epi8(x, c), d, c));
	}
}

/* compress64_avx512 eight bytes at a time, last chunk first: each chunk
 * is stored as the eight bytes ending with its packed bytes, the chunk
 * before then overwriting what lies before them.  Writes the 8 bytes
 * before dst too (the group's bitmap, written after). */
static inline __attribute__((target(AVX2_ISA))) void
compress64_avx2(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	uint64_t ends = byte_counts_upto(m);

#pragma GCC unroll 8
	for (int k = 7; k >= 0; k--) {
		__m128i c = _mm_loadl_epi64(
			(const __m128i *)&compress_ctrl[m >> 8 * k & 0xff]);
		__m128i x = _mm_loadl_epi64((const __m128i *)(src + 8 * k));

		_mm_storel_epi64((__m128i *)(dst + (ends >> 8 * k & 0xff) - 8),
				 _mm_shuffle_epi8(x, c));
	}
}
#endif

/* Where a and b (n bytes) first differ, rounded down to a group, on the
 * paths that have a fast scan; 0 (no clean start known) on the narrow
 * one, where encode_page's memcmp has looked for a clean page. */
HOT size_t same_prefix(const uint8_t *a, const uint8_t *b, size_t n,
		       enum lm_diff_path path)
{
#ifdef LM_DIFF_X86
	if (path == LM_DIFF_AVX512)
		return same_prefix_avx512(a, b, n);
	if (path == LM_DIFF_AVX2)
		return same_prefix_avx2(a, b, n);
#endif
	(void)a;
	(void)b;
	(void)n;
	(void)path;
	return 0;
}

/* Bit k set when byte g + k differs, for the bytes of [g, min(g + 64, n)). */
HOT uint64_t diff_bits(const uint8_t *a, const uint8_t *b, size_t g, size_t n,
		       enum lm_diff_path path)
{
	uint64_t m = 0;

	if (g + GROUP <= n) {
#ifdef LM_DIFF_X86
		if (path == LM_DIFF_AVX512)
			return ~eqmask64_avx512(a + g, b + g);
		if (path == LM_DIFF_AVX2)
			return ~eqmask64_avx2(a + g, b + g);
#endif
		(void)path;
		return ~eqmask64(a + g, b + g);
	}
	for (size_t k = 0; g + k < n; k++) /* only pages not a multiple of 64 */
		if (a[g + k] != b[g + k])
			m |= 1ull << k;
	return m;
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

/* Without -mpopcnt the builtin is a call into libgcc; this is inline. */
HOT size_t popcount64(uint64_t x)
{
#ifdef __POPCNT__
	return (size_t)__builtin_popcountll(x);
#else
	return (size_t)(byte_counts_upto(x) >> 56);
#endif
}

/* popcount64, or one instruction in the callers compiled for AVX2 or
 * AVX-512 (whose CPUs all have POPCNT): a masked group's length is its
 * bitmap's count, on the critical path of every decoder. */
HOT size_t popcount_p(uint64_t x, enum lm_diff_path path)
{
	if (path != LM_DIFF_NARROW)
		return (size_t)__builtin_popcountll(x);
	return popcount64(x);
}

/* ---- elements ------------------------------------------------------------
 *
 * An element header is two LEB128 varints (7 bits a byte, low group first,
 * high bit set on every byte but the last): the gap since the end of the
 * element before (the offset, for the first), then the kind and size.
 * Changed doubles and pointers leave their high bytes alone, so diffs are
 * mostly runs of a few bytes a few bytes apart: two header bytes instead
 * of the eight of a fixed u32 pair halve what such a diff weighs, and a
 * 64-byte group holding many such runs goes whole with its bitmap, which
 * every decoder takes a machine word at a time instead of run by run. */
#define VARINT_MAX 5	 /* bytes of a u32 */
#define BITMAP 8	 /* a masked group's u64 bitmap, before its bytes */
#define MASKED_MAX 63	 /* groups in one masked element: a 1-byte varint */

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

	if (left && p[0] < 0x80) { /* nearly every gap and size */
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

HOT void put64le(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, sizeof(v));
}

/* One element of a diff already validated. */
struct element {
	size_t off;    /* first byte of the page it covers */
	size_t len;    /* run: bytes; masked: groups */
	bool masked;
	const uint8_t *data; /* run: its bytes; masked: the first group */
};

/* The element headed (gap, x) whose bytes start at data, the one before
 * it having ended at *end; moves *end past it.  A run's data takes
 * el->len bytes of the diff; masked groups as many as their bitmaps
 * say, which the walker over them finds as it goes. */
HOT void element_of(size_t gap, size_t x, const uint8_t *data, size_t *end,
		    struct element *el)
{
	el->off = *end + gap;
	el->masked = x & 1;
	el->len = x >> 1;
	el->data = data;
	*end = el->off + (el->masked ? el->len * GROUP : el->len);
}

/* Reads the header of the element at pos of a valid diff (end: where the
 * one before ended) into el; its data is at el->data. */
HOT void next_element(const uint8_t *diff, size_t pos, size_t *end,
		      struct element *el)
{
	size_t gap, x;

	pos += get_valid_varint(diff + pos, &gap);
	pos += get_valid_varint(diff + pos, &x);
	element_of(gap, x, diff + pos, end, el);
}

/* next_element for a diff not validated: checks the element at pos
 * (pos < len) against the diff's and the page's bounds.  Returns the
 * position after it, or 0 when it is malformed (*end is then
 * meaningless).  Each test is written so that no sum can wrap.  Without
 * `groups`, the groups of a masked element are left for the caller to
 * check as it walks them (write_element) and the position returned is
 * that of the first. */
HOT size_t next_checked(const uint8_t *diff, size_t len, size_t pos,
			size_t *end, size_t page_size, struct element *el,
			bool groups, enum lm_diff_path path)
{
	size_t gap, x, n;

	n = get_varint(diff + pos, len - pos, &gap);
	if (n == 0)
		return 0;
	pos += n;
	n = get_varint(diff + pos, len - pos, &x);
	if (n == 0 || x >> 1 == 0 || gap > page_size - *end)
		return 0;
	pos += n;
	if (x & 1) {
		/* masked groups: each group's bitmap, then its bytes, must
		 * lie within the diff before the next bitmap is read */
		size_t at = pos, left = len - pos;

		for (size_t k = 0; groups && k < x >> 1; k++) {
			size_t c;

			if (left < BITMAP)
				return 0;
			c = BITMAP + popcount_p(get64le(diff + at), path);
			if (c > left)
				return 0;
			at += c;
			left -= c;
		}
		*el = (struct element){ .off = *end + gap, .len = x >> 1,
					.masked = true, .data = diff + pos };
		if (el->off % GROUP || el->len > (page_size - el->off) / GROUP)
			return 0;
		*end = el->off + el->len * GROUP;
		return at;
	}
	element_of(gap, x, diff + pos, end, el);
	if (el->len > page_size - el->off || el->len > len - pos)
		return 0;
	return pos + el->len;
}

#if defined(__SSE2__) && !defined(LM_DIFF_PORTABLE)
/* Copies the bytes of src that m selects into dst, 64 bytes: each 16-bit
 * slice of m becomes a byte mask by replicating its two bytes and testing
 * one bit per lane. */
HOT void blend64(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	const __m128i sel = _mm_set_epi8(-128, 64, 32, 16, 8, 4, 2, 1, -128,
					 64, 32, 16, 8, 4, 2, 1);

	if (m == ~0ull) {
		memcpy(dst, src, GROUP);
		return;
	}
	for (int k = 0; k < 4; k++, m >>= 16) {
		__m128i v, e, d, x;

		if (!(m & 0xffff))
			continue;
		v = _mm_unpacklo_epi64(_mm_set1_epi8((char)(m & 0xff)),
				       _mm_set1_epi8((char)(m >> 8 & 0xff)));
		e = _mm_cmpeq_epi8(_mm_and_si128(v, sel), sel);
		d = _mm_loadu_si128((const __m128i *)(dst + 16 * k));
		x = _mm_loadu_si128((const __m128i *)(src + 16 * k));
		d = _mm_or_si128(_mm_andnot_si128(e, d), _mm_and_si128(e, x));
		_mm_storeu_si128((__m128i *)(dst + 16 * k), d);
	}
}
#else
/* Byte k of the result is 0xff when bit k of m is set (k < 8). */
HOT uint64_t expand8(uint64_t m)
{
	const uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
	uint64_t e = ((m & 0xff) * 0x0101010101010101ull) &
		     0x8040201008040201ull; /* bit k of byte k */

	return ((((e & low7) + low7) | e) >> 7 & 0x0101010101010101ull) * 0xff;
}

/* Copies the bytes of src that m selects into dst, 64 bytes. */
HOT void blend64(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	if (m == ~0ull) {
		memcpy(dst, src, GROUP);
		return;
	}
	for (int k = 0; k < 8; k++, m >>= 8) {
		uint64_t e = expand8(m), d, s;

		if (!e)
			continue;
		memcpy(&d, dst + 8 * k, 8);
		memcpy(&s, src + 8 * k, 8);
		d = (d & ~e) | (s & e);
		memcpy(dst + 8 * k, &d, 8);
	}
}
#endif


/* The narrow path's packing, eight bytes at a time where a byte of the
 * bitmap selects a single run of bytes (as the low bytes of doubles or
 * integers do), one by one elsewhere.  As on the AVX2 path, a chunk's
 * packed bytes are read and written as the 8 bytes that end with them. */

/* Whether the set bits of b (not 0) are one run. */
HOT bool one_run(unsigned b)
{
	unsigned r = b >> __builtin_ctz(b);

	return (r & (r + 1)) == 0;
}

/* expand64_avx2 in 64-bit words. */
HOT void expand64_words(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	uint64_t ends = byte_counts_upto(m);
	size_t prev = 0;

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++) {
		unsigned b = m >> 8 * k & 0xff;
		size_t e = ends >> 8 * k & 0xff, c = e - prev;

		prev = e;
		if (!b)
			continue;
		if (one_run(b)) {
			unsigned s = (unsigned)__builtin_ctz(b);
			uint64_t span = ~0ull >> (64 - 8 * c) << 8 * s;
			uint64_t x = get64le(src + e - 8) >> (64 - 8 * c)
				     << 8 * s;

			put64le(dst + 8 * k,
				(get64le(dst + 8 * k) & ~span) | x);
			continue;
		}
		for (const uint8_t *p = src + e - c; b; b &= b - 1)
			dst[8 * k + __builtin_ctz(b)] = *p++;
	}
}

/* compress64_avx2 in 64-bit words, last chunk first. */
HOT void compress64_words(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	uint64_t ends = byte_counts_upto(m);

#pragma GCC unroll 8
	for (int k = 7; k >= 0; k--) {
		unsigned b = m >> 8 * k & 0xff;
		size_t e = ends >> 8 * k & 0xff;
		size_t c = e - (k ? (ends >> 8 * (k - 1) & 0xff) : 0);

		if (!b)
			continue;
		if (one_run(b)) {
			unsigned s = (unsigned)__builtin_ctz(b);

			put64le(dst + e - 8,
				get64le(src + 8 * k) >> 8 * s << (64 - 8 * c));
			continue;
		}
		for (uint8_t *p = dst + e - c; b; b &= b - 1)
			*p++ = src[8 * k + __builtin_ctz(b)];
	}
}

/* Writes the popcount(m) packed bytes at src into the bytes of dst
 * that m selects (64 bytes), on the path the caller was compiled for. */
HOT void expand_any(uint8_t *dst, const uint8_t *src, uint64_t m,
		    enum lm_diff_path path)
{
#ifdef LM_DIFF_X86
	if (path == LM_DIFF_AVX512) {
		expand64_avx512(dst, src, m);
		return;
	}
	if (path == LM_DIFF_AVX2) {
		expand64_avx2(dst, src, m);
		return;
	}
#endif
	(void)path;
	expand64_words(dst, src, m);
}

/* Writes the n (popcount(m)) bytes of src that m selects, packed, to
 * dst; the AVX2 and narrow paths write over the 8 bytes before dst as
 * well. */
HOT void compress_any(uint8_t *dst, const uint8_t *src, uint64_t m, size_t n,
		      enum lm_diff_path path)
{
#ifdef LM_DIFF_X86
	if (path == LM_DIFF_AVX512) {
		compress64_avx512(dst, src, m, n);
		return;
	}
	if (path == LM_DIFF_AVX2) {
		compress64_avx2(dst, src, m);
		return;
	}
#endif
	(void)path;
	(void)n;
	compress64_words(dst, src, m);
}

/* Copies the bytes of src that m selects into dst, 64 bytes. */
HOT void blend_any(uint8_t *dst, const uint8_t *src, uint64_t m,
		   enum lm_diff_path path)
{
#ifdef LM_DIFF_X86
	if (path == LM_DIFF_AVX512) {
		blend64_avx512(dst, src, m);
		return;
	}
	if (path == LM_DIFF_AVX2) {
		blend64_avx2(dst, src, m);
		return;
	}
#endif
	(void)path;
	blend64(dst, src, m);
}

/* ---- paths ---------------------------------------------------------------
 *
 * The walkers over a page, a diff or a delta are compiled once for each
 * path, the primitives above inlined into each instance; a table of the
 * instances per path is chosen from the CPU's features, once, or capped
 * by a test (lm_diff_set_path). */
static _Atomic int cpu_best = -1;		   /* -1: not asked yet */
static _Atomic int path_cap = LM_DIFF_AVX512;	   /* a test's limit */

static enum lm_diff_path cpu_path(void)
{
	int best = atomic_load_explicit(&cpu_best, memory_order_relaxed);

	if (best < 0) {
		best = LM_DIFF_NARROW;
#ifdef LM_DIFF_X86
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vbmi2"))
			best = LM_DIFF_AVX512;
		else if (__builtin_cpu_supports("avx2") &&
			 __builtin_cpu_supports("bmi") &&
			 __builtin_cpu_supports("popcnt"))
			best = LM_DIFF_AVX2;
#endif
		atomic_store_explicit(&cpu_best, best, memory_order_relaxed);
	}
	return (enum lm_diff_path)best;
}

static enum lm_diff_path path_now(void)
{
	enum lm_diff_path best = cpu_path();
	int cap = atomic_load_explicit(&path_cap, memory_order_relaxed);

	return (int)best < cap ? best : (enum lm_diff_path)cap;
}

enum lm_diff_path lm_diff_set_path(enum lm_diff_path max)
{
	atomic_store_explicit(&path_cap, (int)max, memory_order_relaxed);
	return path_now();
}

enum lm_diff_path lm_diff_current_path(void)
{
	return path_now();
}

#ifdef LM_DIFF_X86
#define ON_AVX512 __attribute__((target(AVX512_ISA), noinline))
#define ON_AVX2 __attribute__((target(AVX2_ISA), noinline))
#else
#define ON_AVX512 __attribute__((noinline))
#define ON_AVX2 __attribute__((noinline))
#endif
#define ON_NARROW __attribute__((noinline))

#define ARGS(...) __VA_ARGS__
/* Walker `name`'s instances: name_narrow, name_avx2 and name_avx512. */
#define INSTANCES(ret, name, params, args)                                 \
	static ON_NARROW ret name##_narrow params                          \
	{                                                                  \
		return name(ARGS args, LM_DIFF_NARROW);                    \
	}                                                                  \
	static ON_AVX2 ret name##_avx2 params                              \
	{                                                                  \
		return name(ARGS args, LM_DIFF_AVX2);                      \
	}                                                                  \
	static ON_AVX512 ret name##_avx512 params                          \
	{                                                                  \
		return name(ARGS args, LM_DIFF_AVX512);                    \
	}
#define VOID_INSTANCES(name, params, args)                                 \
	static ON_NARROW void name##_narrow params                         \
	{                                                                  \
		name(ARGS args, LM_DIFF_NARROW);                           \
	}                                                                  \
	static ON_AVX2 void name##_avx2 params                             \
	{                                                                  \
		name(ARGS args, LM_DIFF_AVX2);                             \
	}                                                                  \
	static ON_AVX512 void name##_avx512 params                         \
	{                                                                  \
		name(ARGS args, LM_DIFF_AVX512);                           \
	}

/* One instance of each walker, all for the same path. */
struct codec {
	int (*encode)(const uint8_t *twin, const uint8_t *page, size_t n,
		      uint8_t *out, size_t cap, size_t *out_len);
	int (*validate)(const uint8_t *diff, size_t len, size_t page_size);
	void (*apply_valid)(uint8_t *p, const uint8_t *diff, size_t len);
	int (*apply_checked_to)(uint8_t *p, uint8_t *q, const uint8_t *diff,
				size_t len, size_t page_size);
	void (*delta_take)(struct lm_delta *d, struct lm_delta *w,
			   uint8_t *page, const uint8_t *diff, size_t len,
			   bool bytes);
	int (*delta_encode)(const struct lm_delta *d, uint8_t *out, size_t cap,
			    size_t *out_len);
	void (*blend_page)(uint8_t *page, const struct lm_delta *src);
};

/* The instances for the path taken (the table ends the file). */
static const struct codec *codec(void);

/* A group worth sending masked: three runs or more that would cost, with
 * their headers, at least 64 bytes.  The threshold dates from groups
 * sent whole; packed, a masked group costs less still, and the rule is
 * kept so that the same groups go masked as before. */
HOT bool dense(uint64_t m)
{
	uint64_t starts = m & ~(m << 1), s = starts;

	/* most groups are clean, whole or one run: two bit clears tell
	 * without counting */
	s &= s - 1;
	s &= s - 1;
	return s && 2 * popcount64(starts) + popcount64(m) >= GROUP;
}

/* Output of the encoder; out NULL counts the size only. */
struct enc {
	uint8_t *out;
	size_t cap, pos;
	size_t prev;	  /* end of the last element */
	size_t masked_at; /* position of the open masked element's size */
	size_t ngroups;	  /* groups in it, 0: none open */
};

HOT bool emit_run(struct enc *e, const uint8_t *bytes, size_t start,
		  size_t end)
{
	size_t gap = start - e->prev, len = end - start;
	size_t need = varint_len(gap) + varint_len(2 * len) + len;

	if (e->out) {
		uint8_t *p;

		if (e->cap - e->pos < need)
			return false;
		p = e->out + e->pos;
		p += put_varint(p, gap);
		p += put_varint(p, 2 * len);
		copy_run(p, bytes + start, len);
	}
	e->pos += need;
	e->prev = end;
	return true;
}

HOT void close_masked(struct enc *e)
{
	if (e->ngroups && e->out)
		e->out[e->masked_at] = (uint8_t)(2 * e->ngroups + 1);
	e->ngroups = 0;
}

HOT bool emit_masked(struct enc *e, const uint8_t *bytes, size_t g,
		     uint64_t m, enum lm_diff_path path)
{
	size_t pop = popcount_p(m, path);

	if (e->ngroups == MASKED_MAX)
		close_masked(e);
	if (e->ngroups == 0) {
		size_t gap = g - e->prev, need = varint_len(gap) + 1;

		if (e->out) {
			if (e->cap - e->pos < need)
				return false;
			put_varint(e->out + e->pos, gap);
		}
		e->pos += need;
		e->masked_at = e->pos - 1;
	}
	if (e->out) {
		if (e->cap - e->pos < BITMAP + pop)
			return false;
		/* the bytes first: the AVX2 and narrow packings write over
		 * the bitmap */
		compress_any(e->out + e->pos + BITMAP, bytes + g, m, pop, path);
		put64le(e->out + e->pos, m);
	}
	e->pos += BITMAP + pop;
	e->ngroups++;
	e->prev = g + GROUP;
	return true;
}

/* Encodes the bytes a bitmap selects: the bitmap is `mask` (a delta's),
 * or where page b differs from twin a; the bytes come from `bytes`.
 * Dense groups go masked, the rest as maximal runs, which may go on
 * across groups.  Returns 0 or LM_ENOBUFS; *out_len is the size. */
HOT int encode_elements(const uint64_t *mask, const uint8_t *a,
			const uint8_t *b, const uint8_t *bytes, size_t n,
			size_t start, uint8_t *out, size_t cap,
			size_t *out_len, enum lm_diff_path path)
{
	struct enc e = { out, cap, 0, 0, 0, 0 };
	size_t open = SIZE_MAX; /* start of a run that reached a group's end */

	for (size_t g = start; g < n; g += GROUP) {
		uint64_t m = mask ? mask[g / GROUP]
				  : diff_bits(a, b, g, n, path);
		uint64_t rest;

		if (g + GROUP <= n && dense(m)) {
			if (open != SIZE_MAX && !emit_run(&e, bytes, open, g))
				return LM_ENOBUFS;
			open = SIZE_MAX;
			if (!emit_masked(&e, bytes, g, m, path))
				return LM_ENOBUFS;
			continue;
		}
		close_masked(&e);
		if (open != SIZE_MAX) {
			if (m & 1) {
				rest = ~m;
				if (!rest)
					continue; /* the run goes on */
				if (!emit_run(&e, bytes, open,
					      g + (size_t)__builtin_ctzll(rest)))
					return LM_ENOBUFS;
				m &= ~0ull << __builtin_ctzll(rest);
			} else if (!emit_run(&e, bytes, open, g)) {
				return LM_ENOBUFS;
			}
			open = SIZE_MAX;
		}
		while (m) {
			size_t s = (size_t)__builtin_ctzll(m), t;

			rest = ~m & (~0ull << s); /* clear bits from s up */
			if (!rest) {
				open = g + s;
				break;
			}
			t = (size_t)__builtin_ctzll(rest);
			if (!emit_run(&e, bytes, g + s, g + t))
				return LM_ENOBUFS;
			m &= ~0ull << t;
		}
	}
	close_masked(&e);
	if (open != SIZE_MAX && !emit_run(&e, bytes, open, n))
		return LM_ENOBUFS;
	*out_len = e.pos;
	return 0;
}

size_t lm_diff_bound(size_t page_size)
{
	/* Every other byte changed is the worst case for runs: three bytes
	 * a run (gap, size, byte; the first gap 0), the last run two bytes
	 * long when page_size is even.  A varint of two bytes needs a gap or
	 * run of 64 bytes or more, which costs more than alternating over
	 * them; a masked group costs 72 bytes and a header where its 64
	 * bytes alternating would cost 96. */
	if (page_size == 0)
		return 0;
	return page_size + (page_size + 1) / 2 + 1;
}

HOT int encode_page(const uint8_t *twin, const uint8_t *page, size_t n,
		    uint8_t *out, size_t cap, size_t *out_len,
		    enum lm_diff_path path)
{
	/* Every page written in an interval is compared at release and many
	 * end up clean (LU: 45 % of them).  The AVX2 and AVX-512 encoders
	 * skip a clean start themselves; on the narrow path libc's memcmp is
	 * the fastest scan of a clean page, and on a dirty one it stops at
	 * the first change. */
	if (path == LM_DIFF_NARROW && memcmp(twin, page, n) == 0) {
		*out_len = 0;
		return 0;
	}
	return encode_elements(NULL, twin, page, page, n,
			       same_prefix(twin, page, n, path), out, cap,
			       out_len, path);
}
INSTANCES(int, encode_page,
	  (const uint8_t *twin, const uint8_t *page, size_t n, uint8_t *out,
	   size_t cap, size_t *out_len),
	  (twin, page, n, out, cap, out_len))

int lm_diff_encode(const void *twin, const void *page, size_t page_size,
		   uint8_t *out, size_t cap, size_t *out_len)
{
	if (page_size > LM_DIFF_MAX_PAGE)
		return LM_EINVAL;
	return codec()->encode(twin, page, page_size, out, cap, out_len);
}

int lm_diff_encode_whole(const void *page, size_t page_size, uint8_t *out,
			 size_t cap, size_t *out_len)
{
	size_t n;

	if (page_size == 0 || page_size > LM_DIFF_MAX_PAGE)
		return LM_EINVAL;
	if (cap < varint_len(0) + varint_len(2 * page_size) + page_size)
		return LM_ENOBUFS;
	n = put_varint(out, 0);
	n += put_varint(out + n, 2 * page_size);
	memcpy(out + n, page, page_size);
	*out_len = n + page_size;
	return 0;
}

HOT int validate(const uint8_t *diff, size_t len, size_t page_size,
		 enum lm_diff_path path)
{
	size_t pos = 0, end = 0;
	struct element el;

	while (pos < len)
		if ((pos = next_checked(diff, len, pos, &end, page_size, &el,
					true, path)) == 0)
			return LM_EBADMSG;
	return 0;
}

INSTANCES(int, validate,
	  (const uint8_t *diff, size_t len, size_t page_size),
	  (diff, len, page_size))

int lm_diff_validate(const uint8_t *diff, size_t len, size_t page_size)
{
	return codec()->validate(diff, len, page_size);
}

/* Writes one element into p and, when q is not NULL, into q too;
 * returns the end of its data in the diff.  With stop (the diff's end),
 * each masked group's bitmap and bytes are checked to lie before it
 * before the group is written: NULL when one does not (the groups before
 * it are written). */
HOT const uint8_t *write_element(uint8_t *p, uint8_t *q,
				 const struct element *el,
				 const uint8_t *stop, enum lm_diff_path path)
{
	if (!el->masked) {
		copy_run(p + el->off, el->data, el->len);
		if (q)
			copy_run(q + el->off, el->data, el->len);
		return el->data + el->len;
	}
	const uint8_t *g = el->data;

	for (size_t k = 0; k < el->len; k++) {
		uint64_t m;

		if (stop && ((size_t)(stop - g) < BITMAP ||
			     (size_t)(stop - g) - BITMAP <
				     popcount_p(get64le(g), path)))
			return NULL;
		m = get64le(g);
		expand_any(p + el->off + k * GROUP, g + BITMAP, m, path);
		if (q)
			expand_any(q + el->off + k * GROUP, g + BITMAP, m,
				   path);
		g += BITMAP + popcount_p(m, path);
	}
	return g;
}

/* Writes a valid diff into p. */
HOT void apply_valid(uint8_t *p, const uint8_t *diff, size_t len,
		     enum lm_diff_path path)
{
	size_t pos = 0, end = 0;
	struct element el;

	while (pos < len) {
		next_element(diff, pos, &end, &el);
		pos = (size_t)(write_element(p, NULL, &el, NULL, path) - diff);
	}
}

/* apply_valid for a diff not checked yet, into p and, when q is not
 * NULL, into q too: each element's header is checked before it is
 * written and each masked group before it is written, the diff's bytes
 * read once. */
HOT int apply_checked(uint8_t *p, uint8_t *q, const uint8_t *diff,
		      size_t len, size_t page_size, enum lm_diff_path path)
{
	size_t pos = 0, end = 0;
	struct element el;

	while (pos < len) {
		const uint8_t *next;

		pos = next_checked(diff, len, pos, &end, page_size, &el, false,
				   path);
		if (pos == 0)
			return LM_EBADMSG;
		next = write_element(p, q, &el, diff + len, path);
		if (!next)
			return LM_EBADMSG;
		pos = (size_t)(next - diff);
	}
	return 0;
}

VOID_INSTANCES(apply_valid, (uint8_t *p, const uint8_t *diff, size_t len),
	       (p, diff, len))
/* apply_checked compiled apart for a copy and for none: a decoder that
 * may have to write twice keeps less in registers (an LU page without
 * a copy: 0.25 instead of 0.31 us). */
HOT int apply_checked_to(uint8_t *p, uint8_t *q, const uint8_t *diff,
			 size_t len, size_t page_size, enum lm_diff_path path)
{
	if (q)
		return apply_checked(p, q, diff, len, page_size, path);
	return apply_checked(p, NULL, diff, len, page_size, path);
}
INSTANCES(int, apply_checked_to,
	  (uint8_t *p, uint8_t *q, const uint8_t *diff, size_t len,
	   size_t page_size),
	  (p, q, diff, len, page_size))

int lm_diff_apply_checked(void *page, void *copy, size_t page_size,
			  const uint8_t *diff, size_t len)
{
	return codec()->apply_checked_to(page, copy, diff, len, page_size);
}

void lm_diff_apply_valid(void *page, const uint8_t *diff, size_t len)
{
	codec()->apply_valid(page, diff, len);
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
	struct element el;
	int rc;

	rc = lm_diff_validate(diff, len, page_size);
	if (rc < 0)
		return rc;
	while (pos < len) {
		next_element(diff, pos, &end, &el);
		if (!el.masked) {
			rc = fn(ctx, el.off, el.data, el.len);
			if (rc)
				return rc;
			pos = (size_t)(el.data + el.len - diff);
			continue;
		}
		const uint8_t *g = el.data;

		for (size_t k = 0; k < el.len; k++) {
			uint64_t all = get64le(g), m = all;

			while (m) {
				size_t s = (size_t)__builtin_ctzll(m);
				uint64_t rest = ~m & (~0ull << s);
				size_t t = rest ? (size_t)__builtin_ctzll(rest)
						: GROUP;

				/* the run's bytes follow the packed bytes
				 * of the bits below it */
				rc = fn(ctx, el.off + k * GROUP + s,
					g + BITMAP +
						popcount64(all &
							   ((1ull << s) - 1)),
					t - s);
				if (rc)
					return rc;
				m = t < GROUP ? m & (~0ull << t) : 0;
			}
			g += BITMAP + popcount64(all);
		}
		pos = (size_t)(g - diff);
	}
	return 0;
}

/* ---- cluster deltas ---------------------------------------------------- */

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

/* ORs m into word w of the delta's bitmap; counts the new bytes. */
HOT void mark_group(struct lm_delta *d, size_t w, uint64_t m)
{
	d->dirty += popcount64(m & ~d->mask[w]);
	d->mask[w] |= m;
}

int lm_delta_init(struct lm_delta *d, size_t page_size)
{
	memset(d, 0, sizeof(*d));
	if (page_size == 0 || page_size > LM_DIFF_MAX_PAGE)
		return LM_EINVAL;
	/* zeroed: a masked group sends all 64 bytes, those outside its
	 * bitmap included, and heap garbage must not go on the wire */
	d->bytes = calloc(1, page_size);
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

/* The work of add (bytes too) and mark (bitmap only): records diff in d
 * (its bytes too when `bytes`) and, when not NULL, in the mask of w and
 * the bytes of page, decoding it once. */
HOT void delta_take(struct lm_delta *d, struct lm_delta *w, uint8_t *page,
		    const uint8_t *diff, size_t len, bool bytes,
		    enum lm_diff_path path)
{
	size_t pos = 0, end = 0;
	struct element el;

	while (pos < len) {
		next_element(diff, pos, &end, &el);
		if (!el.masked) {
			if (bytes)
				copy_run(d->bytes + el.off, el.data, el.len);
			if (page)
				copy_run(page + el.off, el.data, el.len);
			d->dirty += set_range(d->mask, el.off, el.len);
			if (w)
				w->dirty += set_range(w->mask, el.off, el.len);
			pos = (size_t)(el.data + el.len - diff);
			continue;
		}
		const uint8_t *g = el.data;

		for (size_t k = 0; k < el.len; k++) {
			uint64_t m = get64le(g);
			size_t off = el.off + k * GROUP;

			if (bytes)
				expand_any(d->bytes + off, g + BITMAP, m,
					   path);
			if (page)
				expand_any(page + off, g + BITMAP, m, path);
			g += BITMAP + popcount_p(m, path);
			mark_group(d, off / GROUP, m);
			if (w)
				mark_group(w, off / GROUP, m);
		}
		pos = (size_t)(g - diff);
	}
}

VOID_INSTANCES(delta_take,
	       (struct lm_delta *d, struct lm_delta *w, uint8_t *page,
		const uint8_t *diff, size_t len, bool bytes),
	       (d, w, page, diff, len, bytes))

static void take(struct lm_delta *d, struct lm_delta *w, uint8_t *page,
		 const uint8_t *diff, size_t len, bool bytes)
{
	codec()->delta_take(d, w, page, diff, len, bytes);
}

void lm_delta_add_valid_diff(struct lm_delta *d, const uint8_t *diff,
			     size_t len)
{
	take(d, NULL, NULL, diff, len, true);
}

void lm_delta_add_valid_diff_also(struct lm_delta *d, struct lm_delta *w,
				  void *page, const uint8_t *diff, size_t len)
{
	take(d, w, page, diff, len, true);
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
	take(d, NULL, NULL, diff, len, false);
}

size_t lm_delta_encoded_len(const struct lm_delta *d)
{
	size_t len = 0;

	(void)encode_elements(d->mask, NULL, NULL, d->bytes, d->page_size, 0,
			      NULL, 0, &len, LM_DIFF_NARROW);
	return len;
}

/* The mask path compares nothing; compiled for AVX-512, its packing of
 * masked groups is one compress and one store each. */
HOT int delta_encode(const struct lm_delta *d, uint8_t *out, size_t cap,
		     size_t *out_len, enum lm_diff_path path)
{
	return encode_elements(d->mask, NULL, NULL, d->bytes, d->page_size, 0,
			       out, cap, out_len, path);
}
INSTANCES(int, delta_encode,
	  (const struct lm_delta *d, uint8_t *out, size_t cap,
	   size_t *out_len),
	  (d, out, cap, out_len))

int lm_delta_encode(const struct lm_delta *d, uint8_t *out, size_t cap,
		    size_t *out_len)
{
	return codec()->delta_encode(d, out, cap, out_len);
}

/* Copies the bytes src's bitmap selects into page (64 bytes at a time;
 * the last group of a page that is not a multiple of 64 byte by byte). */
HOT void blend_page(uint8_t *page, const struct lm_delta *src,
		    enum lm_diff_path path)
{
	size_t n = src->page_size, w = 0, g = 0;

	for (; g + GROUP <= n; g += GROUP, w++)
		if (src->mask[w])
			blend_any(page + g, src->bytes + g, src->mask[w],
				  path);
	for (size_t k = 0; g + k < n; k++)
		if (src->mask[w] >> k & 1)
			page[g + k] = src->bytes[g + k];
}

VOID_INSTANCES(blend_page, (uint8_t *page, const struct lm_delta *src),
	       (page, src))

static void blend_page_any(uint8_t *page, const struct lm_delta *src)
{
	codec()->blend_page(page, src);
}

void lm_delta_apply_to(const struct lm_delta *d, void *page)
{
	blend_page_any(page, d);
}

int lm_delta_merge(struct lm_delta *dst, const struct lm_delta *src)
{
	if (dst->page_size != src->page_size)
		return LM_EINVAL;
	blend_page_any(dst->bytes, src);
	for (size_t w = 0; w < mask_words(src->page_size); w++)
		if (src->mask[w])
			mark_group(dst, w, src->mask[w]);
	return 0;
}

#define CODEC(path)                                                        \
	{ encode_page_##path, validate_##path, apply_valid_##path,         \
	  apply_checked_to_##path, delta_take_##path, delta_encode_##path, \
	  blend_page_##path }

static const struct codec codecs[] = {
	[LM_DIFF_NARROW] = CODEC(narrow),
	[LM_DIFF_AVX2] = CODEC(avx2),
	[LM_DIFF_AVX512] = CODEC(avx512),
};

static const struct codec *codec(void)
{
	return &codecs[path_now()];
}
