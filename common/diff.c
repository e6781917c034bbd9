/* Twin/diff and cluster-delta codec of the multiple-writer protocol: the
 * pure data plane under liblemuria (diffs at release) and lemuriad (deltas
 * per page and epoch).  The format and its rules are in diff.h.
 *
 * Both a diff and a delta are walked as a bitmap of changed bytes, 64
 * bytes per 64-bit word: a delta keeps that bitmap (its mask), a diff
 * computes it from twin and page one 64-byte group at a time (SSE2 on
 * x86-64, 64-bit words elsewhere).  Runs are then found with bit scans,
 * dense groups are sent whole with their bitmap and merged with masked
 * stores (AVX-512BW where the CPU has it, SSE2 or words otherwise), and
 * bytes are never looked at one by one except in a short last group.
 * -DLM_DIFF_PORTABLE forces the word path, to test it on x86 too. */
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
/* AVX-512BW and VBMI2, where the CPU has them (chosen at run time: "the
 * wide path" below): one compare gives a group's bitmap, one masked byte
 * store merges a group, where SSE2 needs four masks built from the
 * bitmap and four blends, and one compress or expand packs or unpacks a
 * masked group's bytes, where the narrow path takes them one by one.
 * Not always_inline: these may only be inlined into code compiled for
 * them, the *_wide callers below. */
#define LM_DIFF_WIDE 1
#include <immintrin.h>

static inline __attribute__((target("avx512bw"))) void
blend64_wide(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	_mm512_mask_storeu_epi8(dst, (__mmask64)m, _mm512_loadu_si512(src));
}

/* Writes the popcount(m) bytes at src into the bytes of dst that m
 * selects, in order (a masked group's packed bytes into a page); reads
 * no byte of src beyond them. */
static inline __attribute__((target("avx512bw,avx512vbmi2"))) void
expand64_wide(uint8_t *dst, const uint8_t *src, uint64_t m)
{
	_mm512_mask_storeu_epi8(dst, (__mmask64)m,
				_mm512_maskz_expandloadu_epi8((__mmask64)m, src));
}

/* Writes the bytes of src that m selects, packed, to dst: n, which is
 * popcount(m), bytes and no more. */
static inline __attribute__((target("avx512bw,avx512vbmi2"))) void
compress64_wide(uint8_t *dst, const uint8_t *src, uint64_t m, size_t n)
{
	__m512i c = _mm512_maskz_compress_epi8((__mmask64)m,
					       _mm512_loadu_si512(src));

	_mm512_mask_storeu_epi8(dst, n == 64 ? ~0ull : (1ull << n) - 1, c);
}

/* Bit k set when a[k] == b[k], for k < 64: one compare. */
static inline __attribute__((target("avx512bw"))) uint64_t
eqmask64_wide(const uint8_t *a, const uint8_t *b)
{
	return _mm512_cmpeq_epi8_mask(_mm512_loadu_si512(a),
				      _mm512_loadu_si512(b));
}

/* Where a and b (n bytes) first differ, rounded down to a group; the end
 * of n's whole groups when they all agree.  Four groups a step while they
 * agree: a page's clean start costs what memcmp's would, and the encoder
 * starts after it instead of comparing it again. */
static inline __attribute__((target("avx512bw"))) size_t
same_prefix_wide(const uint8_t *a, const uint8_t *b, size_t n)
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
	while (g + GROUP <= n && eqmask64_wide(a + g, b + g) == ~0ull)
		g += GROUP;
	return g;
}
#endif

/* same_prefix_wide where the build has it; 0 (no clean start known)
 * elsewhere, where lm_diff_encode's memcmp has looked for a clean page. */
HOT size_t same_prefix(const uint8_t *a, const uint8_t *b, size_t n,
		       bool wide)
{
#ifdef LM_DIFF_WIDE
	if (wide)
		return same_prefix_wide(a, b, n);
#endif
	(void)a;
	(void)b;
	(void)n;
	(void)wide;
	return 0;
}

/* Bit k set when byte g + k differs, for the bytes of [g, min(g + 64, n));
 * `wide` in callers compiled for AVX-512BW (see eqmask64_wide). */
HOT uint64_t diff_bits(const uint8_t *a, const uint8_t *b, size_t g, size_t n,
		       bool wide)
{
	uint64_t m = 0;

#ifdef LM_DIFF_WIDE
	if (wide && g + GROUP <= n)
		return ~eqmask64_wide(a + g, b + g);
#endif
	(void)wide;
	if (g + GROUP <= n)
		return ~eqmask64(a + g, b + g);
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
	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (size_t)((x * 0x0101010101010101ull) >> 56);
#endif
}

/* popcount64, or one instruction in the callers compiled for the wide
 * path (every CPU with AVX-512 has POPCNT): a masked group's length is
 * its bitmap's count, on the critical path of every decoder. */
HOT size_t popcount_w(uint64_t x, bool wide)
{
	if (wide)
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
 * meaningless).  Each test is written so that no sum can wrap. */
HOT size_t next_checked(const uint8_t *diff, size_t len, size_t pos,
			size_t *end, size_t page_size, struct element *el,
			bool wide)
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

		for (size_t k = 0; k < x >> 1; k++) {
			size_t c;

			if (left < BITMAP)
				return 0;
			c = BITMAP + popcount_w(get64le(diff + at), wide);
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


/* expand64_wide in the callers compiled for it, else byte by byte. */
HOT void expand_any(uint8_t *dst, const uint8_t *src, uint64_t m, bool wide)
{
#ifdef LM_DIFF_WIDE
	if (wide) {
		expand64_wide(dst, src, m);
		return;
	}
#endif
	(void)wide;
	while (m) {
		dst[__builtin_ctzll(m)] = *src++;
		m &= m - 1;
	}
}

/* compress64_wide in the callers compiled for it, else byte by byte:
 * the n (popcount(m)) bytes of src that m selects, packed, to dst. */
HOT void compress_any(uint8_t *dst, const uint8_t *src, uint64_t m, size_t n,
		      bool wide)
{
#ifdef LM_DIFF_WIDE
	if (wide) {
		compress64_wide(dst, src, m, n);
		return;
	}
#endif
	(void)wide;
	(void)n;
	while (m) {
		*dst++ = src[__builtin_ctzll(m)];
		m &= m - 1;
	}
}

/* blend64, or blend64_wide in the callers compiled for it. */
HOT void blend_any(uint8_t *dst, const uint8_t *src, uint64_t m, bool wide)
{
#ifdef LM_DIFF_WIDE
	if (wide) {
		blend64_wide(dst, src, m);
		return;
	}
#endif
	(void)wide;
	blend64(dst, src, m);
}

/* ---- the wide path ---------------------------------------------------
 *
 * The walkers that compare or merge whole groups (the diff encoder,
 * apply, a delta taking a diff, a delta merged) are compiled twice: as
 * they are, and for AVX-512BW with eqmask64_wide and blend64_wide.  The
 * second runs when the CPU has AVX-512BW, unless a test turned it off
 * (lm_diff_set_wide). */
static _Atomic int cpu_wide = -1; /* -1: not looked at yet */
static _Atomic bool wide_off;      /* a test forces the narrow path */

/* Whether the CPU has AVX-512BW, asked once. */
static bool cpu_has_wide(void)
{
	int w = atomic_load_explicit(&cpu_wide, memory_order_relaxed);

	if (w < 0) {
#ifdef LM_DIFF_WIDE
		__builtin_cpu_init();
		w = __builtin_cpu_supports("avx512bw") &&
				    __builtin_cpu_supports("avx512vbmi2")
			    ? 1
			    : 0;
#else
		w = 0;
#endif
		atomic_store_explicit(&cpu_wide, w, memory_order_relaxed);
	}
	return w == 1;
}

static bool use_wide(void)
{
	return cpu_has_wide() &&
	       !atomic_load_explicit(&wide_off, memory_order_relaxed);
}

bool lm_diff_set_wide(bool on)
{
	atomic_store_explicit(&wide_off, !on, memory_order_relaxed);
	return cpu_has_wide();
}

#ifdef LM_DIFF_WIDE
#define WIDE __attribute__((target("avx512bw,avx512vbmi2,popcnt"), noinline))
#else
#define WIDE __attribute__((noinline))
#endif

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
		     uint64_t m, bool wide)
{
	size_t pop = popcount_w(m, wide);

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
		put64le(e->out + e->pos, m);
		compress_any(e->out + e->pos + BITMAP, bytes + g, m, pop, wide);
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
			size_t *out_len, bool wide)
{
	struct enc e = { out, cap, 0, 0, 0, 0 };
	size_t open = SIZE_MAX; /* start of a run that reached a group's end */

	for (size_t g = start; g < n; g += GROUP) {
		uint64_t m = mask ? mask[g / GROUP]
				  : diff_bits(a, b, g, n, wide);
		uint64_t rest;

		if (g + GROUP <= n && dense(m)) {
			if (open != SIZE_MAX && !emit_run(&e, bytes, open, g))
				return LM_ENOBUFS;
			open = SIZE_MAX;
			if (!emit_masked(&e, bytes, g, m, wide))
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

static int encode_narrow(const uint8_t *twin, const uint8_t *page, size_t n,
			 uint8_t *out, size_t cap, size_t *out_len)
{
	return encode_elements(NULL, twin, page, page, n, 0, out, cap,
			       out_len, false);
}

static WIDE int encode_wide(const uint8_t *twin, const uint8_t *page,
			    size_t n, uint8_t *out, size_t cap,
			    size_t *out_len)
{
	return encode_elements(NULL, twin, page, page, n,
			       same_prefix(twin, page, n, true), out, cap,
			       out_len, true);
}

int lm_diff_encode(const void *twin, const void *page, size_t page_size,
		   uint8_t *out, size_t cap, size_t *out_len)
{
	if (page_size > LM_DIFF_MAX_PAGE)
		return LM_EINVAL;
	/* Every page written in an interval is compared at release and many
	 * end up clean (LU: 45 % of them).  The wide encoder skips the clean
	 * start itself; elsewhere libc's memcmp is the fastest scan of a
	 * clean page, and on a dirty one it stops at the first change. */
	if (use_wide())
		return encode_wide(twin, page, page_size, out, cap, out_len);
	if (memcmp(twin, page, page_size) == 0) {
		*out_len = 0;
		return 0;
	}
	return encode_narrow(twin, page, page_size, out, cap, out_len);
}

HOT int validate(const uint8_t *diff, size_t len, size_t page_size,
		 bool wide)
{
	size_t pos = 0, end = 0;
	struct element el;

	while (pos < len)
		if ((pos = next_checked(diff, len, pos, &end, page_size, &el,
					wide)) == 0)
			return LM_EBADMSG;
	return 0;
}

static int validate_narrow(const uint8_t *diff, size_t len,
			   size_t page_size)
{
	return validate(diff, len, page_size, false);
}

static WIDE int validate_wide(const uint8_t *diff, size_t len,
			      size_t page_size)
{
	return validate(diff, len, page_size, true);
}

int lm_diff_validate(const uint8_t *diff, size_t len, size_t page_size)
{
	if (use_wide())
		return validate_wide(diff, len, page_size);
	return validate_narrow(diff, len, page_size);
}

/* Writes one element into p and, when q is not NULL, into q too;
 * returns the end of its data in the diff. */
HOT const uint8_t *write_element(uint8_t *p, uint8_t *q,
				 const struct element *el, bool wide)
{
	if (!el->masked) {
		copy_run(p + el->off, el->data, el->len);
		if (q)
			copy_run(q + el->off, el->data, el->len);
		return el->data + el->len;
	}
	const uint8_t *g = el->data;

	for (size_t k = 0; k < el->len; k++) {
		uint64_t m = get64le(g);

		expand_any(p + el->off + k * GROUP, g + BITMAP, m, wide);
		if (q)
			expand_any(q + el->off + k * GROUP, g + BITMAP, m,
				   wide);
		g += BITMAP + popcount_w(m, wide);
	}
	return g;
}

/* Writes the diff into p and, when q is not NULL, into q too, decoding
 * it once. */
HOT void apply_valid(uint8_t *p, uint8_t *q, const uint8_t *diff, size_t len,
		     bool wide)
{
	size_t pos = 0, end = 0;
	struct element el;

	while (pos < len) {
		next_element(diff, pos, &end, &el);
		pos = (size_t)(write_element(p, q, &el, wide) - diff);
	}
}

/* apply_valid for a diff not checked yet: each element is checked just
 * before it is written, the diff's bytes read once. */
HOT int apply_checked(uint8_t *p, uint8_t *q, const uint8_t *diff,
		      size_t len, size_t page_size, bool wide)
{
	size_t pos = 0, end = 0;
	struct element el;

	while (pos < len) {
		pos = next_checked(diff, len, pos, &end, page_size, &el,
				   wide);
		if (pos == 0)
			return LM_EBADMSG;
		write_element(p, q, &el, wide);
	}
	return 0;
}

static void apply_narrow(uint8_t *p, uint8_t *q, const uint8_t *diff,
			 size_t len)
{
	apply_valid(p, q, diff, len, false);
}

static WIDE void apply_wide(uint8_t *p, uint8_t *q, const uint8_t *diff,
			    size_t len)
{
	apply_valid(p, q, diff, len, true);
}

static int checked_narrow(uint8_t *p, uint8_t *q, const uint8_t *diff,
			  size_t len, size_t page_size)
{
	return apply_checked(p, q, diff, len, page_size, false);
}

static WIDE int checked_wide(uint8_t *p, uint8_t *q, const uint8_t *diff,
			     size_t len, size_t page_size)
{
	return apply_checked(p, q, diff, len, page_size, true);
}

int lm_diff_apply_checked(void *page, void *copy, size_t page_size,
			  const uint8_t *diff, size_t len)
{
	if (use_wide())
		return checked_wide(page, copy, diff, len, page_size);
	return checked_narrow(page, copy, diff, len, page_size);
}

void lm_diff_apply_valid(void *page, const uint8_t *diff, size_t len)
{
	if (use_wide())
		apply_wide(page, NULL, diff, len);
	else
		apply_narrow(page, NULL, diff, len);
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
		    const uint8_t *diff, size_t len, bool bytes, bool wide)
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
					   wide);
			if (page)
				expand_any(page + off, g + BITMAP, m, wide);
			g += BITMAP + popcount_w(m, wide);
			mark_group(d, off / GROUP, m);
			if (w)
				mark_group(w, off / GROUP, m);
		}
		pos = (size_t)(g - diff);
	}
}

static void take_narrow(struct lm_delta *d, struct lm_delta *w, uint8_t *page,
			const uint8_t *diff, size_t len, bool bytes)
{
	delta_take(d, w, page, diff, len, bytes, false);
}

static WIDE void take_wide(struct lm_delta *d, struct lm_delta *w,
			   uint8_t *page, const uint8_t *diff, size_t len,
			   bool bytes)
{
	delta_take(d, w, page, diff, len, bytes, true);
}

static void take(struct lm_delta *d, struct lm_delta *w, uint8_t *page,
		 const uint8_t *diff, size_t len, bool bytes)
{
	if (use_wide())
		take_wide(d, w, page, diff, len, bytes);
	else
		take_narrow(d, w, page, diff, len, bytes);
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
			      NULL, 0, &len, false);
	return len;
}

static int delta_encode_narrow(const struct lm_delta *d, uint8_t *out,
			       size_t cap, size_t *out_len)
{
	return encode_elements(d->mask, NULL, NULL, d->bytes, d->page_size, 0,
			       out, cap, out_len, false);
}

/* The mask path compares nothing; compiled wide, its 64-byte copies of
 * masked groups are one load and one store each. */
static WIDE int delta_encode_wide(const struct lm_delta *d, uint8_t *out,
				  size_t cap, size_t *out_len)
{
	return encode_elements(d->mask, NULL, NULL, d->bytes, d->page_size, 0,
			       out, cap, out_len, true);
}

int lm_delta_encode(const struct lm_delta *d, uint8_t *out, size_t cap,
		    size_t *out_len)
{
	if (use_wide())
		return delta_encode_wide(d, out, cap, out_len);
	return delta_encode_narrow(d, out, cap, out_len);
}

/* Copies the bytes src's bitmap selects into page (64 bytes at a time;
 * the last group of a page that is not a multiple of 64 byte by byte). */
HOT void blend_page(uint8_t *page, const struct lm_delta *src, bool wide)
{
	size_t n = src->page_size, w = 0, g = 0;

	for (; g + GROUP <= n; g += GROUP, w++)
		if (src->mask[w])
			blend_any(page + g, src->bytes + g, src->mask[w],
				  wide);
	for (size_t k = 0; g + k < n; k++)
		if (src->mask[w] >> k & 1)
			page[g + k] = src->bytes[g + k];
}

static void blend_page_narrow(uint8_t *page, const struct lm_delta *src)
{
	blend_page(page, src, false);
}

static WIDE void blend_page_wide(uint8_t *page, const struct lm_delta *src)
{
	blend_page(page, src, true);
}

static void blend_page_any(uint8_t *page, const struct lm_delta *src)
{
	if (use_wide())
		blend_page_wide(page, src);
	else
		blend_page_narrow(page, src);
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
