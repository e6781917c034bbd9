/* Hand-made diffs for tests that need elements the encoders would never
 * emit (bad ones, overlapping writes): the element headers of
 * common/diff.h. */
#ifndef LM_TESTS_DIFF_UTIL_H
#define LM_TESTS_DIFF_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Writes v as a LEB128 varint; returns its size. */
static inline size_t test_varint(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

/* Writes a run header (gap from the end of the element before, length);
 * returns its size.  The run's bytes go right after it. */
static inline size_t test_run_header(uint8_t *out, uint64_t gap, uint64_t len)
{
	size_t n = test_varint(out, gap);

	return n + test_varint(out + n, 2 * len);
}

/* Writes the header of `groups` masked groups (each then a u64 bitmap,
 * little-endian, and 64 bytes); returns its size. */
static inline size_t test_masked_header(uint8_t *out, uint64_t gap,
					uint64_t groups)
{
	size_t n = test_varint(out, gap);

	return n + test_varint(out + n, 2 * groups + 1);
}

#endif
