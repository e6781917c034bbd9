/* Diffs and cluster deltas (common/diff.c): exact round trips on random
 * pages, the "only changed bytes" rule that lets disjoint writers merge,
 * rejection of malformed diffs without touching the page, and delta
 * accumulation and merging. */
#include "unit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "diff_util.h"
#include "lm_error.h"
#include "wire.h"

#define PAGE 4096

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so a failure can be replayed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t rng_below(size_t n)
{
	return n ? (size_t)(rng() % n) : 0;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rng();
}

/* Makes byte i of page differ from the twin. */
static void change(uint8_t *page, const uint8_t *twin, size_t i)
{
	page[i] = (uint8_t)(twin[i] ^ (1 + rng_below(255)));
}

enum pattern {
	PAT_NONE,
	PAT_FIRST,
	PAT_LAST,
	PAT_WHOLE,
	PAT_SPARSE,
	PAT_RUNS,     /* random runs, many crossing word boundaries */
	PAT_ALTERNATE, /* every other byte: the most runs */
	PAT_DENSE,
	PAT_WORD_PER_64,
	PAT_LONG_RUNS, /* runs of up to 300 bytes, over several words */
	PAT_EDGES,    /* first and last 9 bytes */
	PAT_COUNT
};

static void make_change(uint8_t *page, const uint8_t *twin, size_t n,
			enum pattern pat)
{
	memcpy(page, twin, n);
	switch (pat) {
	case PAT_NONE:
		break;
	case PAT_FIRST:
		change(page, twin, 0);
		break;
	case PAT_LAST:
		change(page, twin, n - 1);
		break;
	case PAT_WHOLE:
		for (size_t i = 0; i < n; i++)
			change(page, twin, i);
		break;
	case PAT_SPARSE:
		for (size_t i = 0; i < n; i++)
			if (rng_below(40) == 0)
				change(page, twin, i);
		break;
	case PAT_RUNS:
		for (int r = 0; r < 12; r++) {
			size_t off = rng_below(n), len = 1 + rng_below(40);

			for (size_t i = off; i < n && i < off + len; i++)
				change(page, twin, i);
		}
		break;
	case PAT_LONG_RUNS:
		for (int r = 0; r < 4; r++) {
			size_t off = rng_below(n), len = 1 + rng_below(300);

			for (size_t i = off; i < n && i < off + len; i++)
				change(page, twin, i);
		}
		break;
	case PAT_ALTERNATE:
		for (size_t i = 0; i < n; i += 2)
			change(page, twin, i);
		break;
	case PAT_DENSE:
		for (size_t i = 0; i < n; i++)
			if (rng_below(2))
				change(page, twin, i);
		break;
	case PAT_WORD_PER_64:
		for (size_t i = 0; i + 8 <= n; i += 64)
			for (size_t k = 0; k < 8; k++)
				change(page, twin, i + k);
		break;
	case PAT_EDGES:
		for (size_t i = 0; i < n && i < 9; i++) {
			change(page, twin, i);
			change(page, twin, n - 1 - i);
		}
		break;
	case PAT_COUNT:
		break;
	}
}

/* Runs seen by lm_diff_foreach_run, for checks. */
struct runs {
	uint8_t *covered; /* 1 where a run wrote */
	uint8_t *into;    /* the runs' bytes written here, when not NULL */
	size_t count;
	size_t prev_end;
	int adjacent;     /* a run started right where the last ended, not
			     at a 64-byte boundary (where a masked group
			     begins or ends) */
	size_t first_off[4];
	size_t first_len[4];
};

static int note_run(void *ctx, size_t off, const uint8_t *bytes, size_t len)
{
	struct runs *r = ctx;

	if (r->into)
		memcpy(r->into + off, bytes, len);
	if (r->count > 0 && off == r->prev_end && off % 64 != 0)
		r->adjacent = 1;
	if (r->count < 4) {
		r->first_off[r->count] = off;
		r->first_len[r->count] = len;
	}
	if (r->covered)
		memset(r->covered + off, 1, len);
	r->prev_end = off + len;
	r->count++;
	return 0;
}

/* The diff holds exactly the changed bytes, in maximal runs, and turns a
 * copy of the twin into the page; written into two pages at once
 * (lm_diff_apply_checked), it turns the first into the page and writes
 * the same bytes, no others, into the second. */
static void check_exact_diff(const uint8_t *twin, const uint8_t *page,
			     size_t n, const uint8_t *diff, size_t len)
{
	uint8_t *covered = calloc(1, n);
	uint8_t *copy = malloc(n), *other = malloc(n);
	struct runs r = { .covered = covered, .into = copy };
	int exact = 1, both = 1;

	/* the runs cover the changed bytes alone and carry their values */
	memcpy(copy, twin, n);
	CU_ASSERT_EQUAL_FATAL(lm_diff_foreach_run(diff, len, n, note_run, &r),
			      0);
	for (size_t i = 0; i < n; i++)
		if (covered[i] != (twin[i] != page[i]))
			exact = 0;
	CU_ASSERT(exact);
	CU_ASSERT_EQUAL(memcmp(copy, page, n), 0);
	CU_ASSERT_FALSE(r.adjacent);
	CU_ASSERT(len <= lm_diff_bound(n));
	memcpy(copy, twin, n);
	CU_ASSERT_EQUAL(lm_diff_apply(copy, n, diff, len), 0);
	CU_ASSERT_EQUAL(memcmp(copy, page, n), 0);
	/* checked as it goes: the same bytes, alone and in two pages */
	memcpy(copy, twin, n);
	CU_ASSERT_EQUAL(lm_diff_apply_checked(copy, NULL, n, diff, len), 0);
	CU_ASSERT_EQUAL(memcmp(copy, page, n), 0);
	memcpy(copy, twin, n);
	for (size_t i = 0; i < n; i++)
		other[i] = (uint8_t)~twin[i];
	CU_ASSERT_EQUAL(lm_diff_apply_checked(copy, other, n, diff, len), 0);
	CU_ASSERT_EQUAL(memcmp(copy, page, n), 0);
	for (size_t i = 0; i < n; i++)
		if (other[i] != (covered[i] ? page[i] : (uint8_t)~twin[i]))
			both = 0;
	CU_ASSERT(both);
	free(covered);
	free(copy);
	free(other);
}

static void test_round_trip_random_patterns(void)
{
	static const size_t sizes[] = { PAGE, 8192, 1, 7, 8, 9, 63,
					64, 65, 100, 4097 };
	uint8_t *twin_buf = malloc(8192 + 8), *page_buf = malloc(8192 + 8);
	uint8_t *out = malloc(lm_diff_bound(8192));

	rng_seed(1);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];

		for (int pat = 0; pat < PAT_COUNT; pat++) {
			for (int trial = 0; trial < 4; trial++) {
				/* misaligned buffers on odd trials: the word
				 * loads must not depend on alignment */
				uint8_t *twin = twin_buf + (trial & 1) * 3;
				uint8_t *page = page_buf + (trial & 1) * 5;
				size_t len = 12345;

				fill_random(twin, n);
				make_change(page, twin, n, (enum pattern)pat);
				CU_ASSERT_EQUAL_FATAL(
					lm_diff_encode(twin, page, n, out,
						       lm_diff_bound(n), &len),
					0);
				check_exact_diff(twin, page, n, out, len);
				if (pat == PAT_NONE)
					CU_ASSERT_EQUAL(len, 0);
			}
		}
	}
	free(twin_buf);
	free(page_buf);
	free(out);
}

static void test_encoding_layout(void)
{
	uint8_t twin[32] = { 0 }, page[32] = { 0 }, out[64];
	size_t len = 0;

	page[0] = 0xaa;
	for (int i = 7; i <= 17; i++) /* crosses two word boundaries */
		page[i] = (uint8_t)i;
	page[31] = 0x55;
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, page, 32, out, sizeof(out),
					     &len),
			      0);
	/* gap 0 run 1; gap 6 (7 - 1) run 11; gap 13 (31 - 18) run 1: the
	 * size varint is twice the length (bit 0 clear: a run) */
	CU_ASSERT_EQUAL_FATAL(len, 3 * 2 + 1 + 11 + 1);
	CU_ASSERT_EQUAL(out[0], 0);
	CU_ASSERT_EQUAL(out[1], 2);
	CU_ASSERT_EQUAL(out[2], 0xaa);
	CU_ASSERT_EQUAL(out[3], 6);
	CU_ASSERT_EQUAL(out[4], 22);
	CU_ASSERT_EQUAL(memcmp(out + 5, page + 7, 11), 0);
	CU_ASSERT_EQUAL(out[16], 13);
	CU_ASSERT_EQUAL(out[17], 2);
	CU_ASSERT_EQUAL(out[18], 0x55);
}

static void test_clean_page_gives_empty_diff(void)
{
	uint8_t *twin = malloc(PAGE), *page = malloc(PAGE);
	uint8_t out[1];
	size_t len = 99;

	rng_seed(2);
	fill_random(twin, PAGE);
	memcpy(page, twin, PAGE);
	/* writing a byte with the value it had is no change */
	page[100] = twin[100];
	CU_ASSERT_EQUAL(lm_diff_encode(twin, page, PAGE, out, 0, &len), 0);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT(lm_diff_is_empty(len));
	CU_ASSERT_EQUAL(lm_diff_apply(page, PAGE, out, 0), 0);
	CU_ASSERT_EQUAL(memcmp(page, twin, PAGE), 0);
	free(twin);
	free(page);
}

/* The encoder may skip a page's clean start (the wide one does, four
 * groups a step): one changed byte anywhere, in a whole group or in the
 * tail of a page that is no multiple of 64, gives exactly one run with
 * the right gap on every path up to the current one; clean pages of
 * those sizes give none. */
static void test_clean_start_skipped_exactly(void)
{
	static const size_t sizes[] = { PAGE, PAGE + 1, 100, 320 };
	uint8_t *twin = malloc(PAGE + 1), *page = malloc(PAGE + 1);
	uint8_t *out = malloc(lm_diff_bound(PAGE + 1));
	enum lm_diff_path was = lm_diff_current_path();
	int bad = 0;

	rng_seed(21);
	for (int path = LM_DIFF_NARROW; path <= (int)was; path++) {
		lm_diff_set_path((enum lm_diff_path)path);
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s], len = 99;

			fill_random(twin, n);
			memcpy(page, twin, n);
			if (lm_diff_encode(twin, page, n, out,
					   lm_diff_bound(n), &len) != 0 ||
			    len != 0)
				bad++;
			for (size_t at = 0; at < n; at++) {
				uint8_t hdr[16];
				size_t hl = test_run_header(hdr, at, 1);

				page[at] = (uint8_t)~twin[at];
				if (lm_diff_encode(twin, page, n, out,
						   lm_diff_bound(n), &len) != 0 ||
				    len != hl + 1 || memcmp(out, hdr, hl) != 0 ||
				    out[hl] != page[at])
					bad++;
				page[at] = twin[at];
			}
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	lm_diff_set_path(was);
	free(twin);
	free(page);
	free(out);
}

/* Offsets and lengths are u32; a larger page is refused before any byte
 * is read (the NULL pages would crash otherwise). */
static void test_oversized_page_rejected(void)
{
	size_t huge = LM_DIFF_MAX_PAGE + 1, len = 0;
	struct lm_delta d;
	uint8_t out[16];

	if (huge == 0) /* 32-bit size_t: no page can be too large */
		return;
	CU_ASSERT_EQUAL(lm_diff_encode(NULL, NULL, huge, out, sizeof(out),
				       &len),
			LM_EINVAL);
	CU_ASSERT_EQUAL(lm_delta_init(&d, huge), LM_EINVAL);
	CU_ASSERT_PTR_NULL(d.bytes);
	lm_delta_free(&d);
}

/* Two writers of one interval change disjoint (often neighbouring) bytes
 * of the same page; their diffs must commute. */
static void test_disjoint_writers_commute(void)
{
	uint8_t *twin = malloc(PAGE), *a = malloc(PAGE), *b = malloc(PAGE);
	uint8_t *want = malloc(PAGE), *c = malloc(PAGE);
	size_t cap = lm_diff_bound(PAGE);
	uint8_t *da = malloc(cap), *db = malloc(cap);

	rng_seed(3);
	for (int trial = 0; trial < 20; trial++) {
		size_t la, lb;

		fill_random(twin, PAGE);
		memcpy(a, twin, PAGE);
		memcpy(b, twin, PAGE);
		memcpy(want, twin, PAGE);
		for (size_t i = 0; i < PAGE; i++) {
			/* owner changes in short stretches, so A's and B's
			 * bytes interleave inside words */
			size_t who = rng_below(trial % 2 ? 3 : 8);

			if (who == 1) {
				change(a, twin, i);
				want[i] = a[i];
			} else if (who == 2) {
				change(b, twin, i);
				want[i] = b[i];
			}
		}
		CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, a, PAGE, da, cap,
						     &la),
				      0);
		CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, b, PAGE, db, cap,
						     &lb),
				      0);
		memcpy(c, twin, PAGE);
		CU_ASSERT_EQUAL(lm_diff_apply(c, PAGE, da, la), 0);
		CU_ASSERT_EQUAL(lm_diff_apply(c, PAGE, db, lb), 0);
		CU_ASSERT_EQUAL(memcmp(c, want, PAGE), 0);
		memcpy(c, twin, PAGE);
		CU_ASSERT_EQUAL(lm_diff_apply(c, PAGE, db, lb), 0);
		CU_ASSERT_EQUAL(lm_diff_apply(c, PAGE, da, la), 0);
		CU_ASSERT_EQUAL(memcmp(c, want, PAGE), 0);
	}
	free(twin);
	free(a);
	free(b);
	free(want);
	free(c);
	free(da);
	free(db);
}

static void test_bound_is_tight(void)
{
	static const size_t sizes[] = { 1, 2, 3, 8, 9, 63, 64, PAGE, 4097 };

	rng_seed(4);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s], bound = lm_diff_bound(n), len = 0;
		uint8_t *twin = malloc(n), *page = malloc(n);
		uint8_t *out = malloc(bound);

		/* one-byte runs with one-byte gaps, the last run 2 long
		 * when n is even: the most header bytes possible as runs */
		fill_random(twin, n);
		make_change(page, twin, n, PAT_ALTERNATE);
		change(page, twin, n - 1);
		CU_ASSERT_EQUAL(lm_diff_encode(twin, page, n, out, bound, &len),
				0);
		if (n < 64) {
			/* no whole group to send masked: the bound is met */
			CU_ASSERT_EQUAL(len, bound);
			CU_ASSERT_EQUAL(lm_diff_encode(twin, page, n, out,
						       bound - 1, &len),
					LM_ENOBUFS);
		} else {
			CU_ASSERT(len < bound);
		}
		if (n == PAGE) { /* 64 masked groups in two elements, 63 +
				    1, each its bitmap and changed bytes */
			size_t changed = 0;

			for (size_t i = 0; i < n; i++)
				changed += page[i] != twin[i];
			CU_ASSERT_EQUAL(len, 2 * 2 + 64 * 8 + changed);
		}
		free(twin);
		free(page);
		free(out);
	}
	CU_ASSERT_EQUAL(lm_diff_bound(0), 0);
}

/* Groups with many short runs (changed doubles whose exponent stays) go
 * masked: their bitmap, then the bytes it selects packed in order; every
 * decoder writes those bytes alone, and a group's length follows from
 * its bitmap. */
static void expect_rejected(const uint8_t *diff, size_t len, size_t n);

static void test_masked_groups(void)
{
	uint8_t *twin = malloc(PAGE), *page = malloc(PAGE);
	uint8_t *out = malloc(lm_diff_bound(PAGE)), *copy = malloc(PAGE);
	uint8_t hand[2 + 72 + 3], target[PAGE];
	struct lm_delta d, marks;
	struct runs r = { 0 };
	size_t len = 0;
	uint64_t m = 0;

	rng_seed(11);
	fill_random(twin, PAGE);
	memcpy(page, twin, PAGE);
	/* bytes 0-5 of every double of group 2 (128..191), then a sparse
	 * change and a long run */
	for (size_t i = 128; i < 192; i++)
		if (i % 8 < 6)
			change(page, twin, i);
	change(page, twin, 300);
	for (size_t i = 1000; i < 1200; i++)
		change(page, twin, i);
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, page, PAGE, out,
					     lm_diff_bound(PAGE), &len),
			      0);
	/* masked: gap 128, 2 * 1 + 1, bitmap, the 48 bytes it selects */
	CU_ASSERT_EQUAL(out[0], 0x80);
	CU_ASSERT_EQUAL(out[1], 0x01);
	CU_ASSERT_EQUAL(out[2], 3);
	for (int k = 7; k >= 0; k--)
		m = m << 8 | out[3 + k];
	CU_ASSERT_EQUAL(m, 0x3f3f3f3f3f3f3f3full);
	for (size_t i = 128, k = 11; i < 192; i++)
		if (i % 8 < 6)
			CU_ASSERT_EQUAL(out[k++], page[i]);
	/* then runs: gap 108 (300 - 192) of 1, gap 699 of 200 */
	CU_ASSERT_EQUAL(out[59], 108);
	CU_ASSERT_EQUAL(out[60], 2);
	CU_ASSERT_EQUAL(len, 3 + 8 + 48 + 3 + (2 + 2 + 200));
	check_exact_diff(twin, page, PAGE, out, len);
	CU_ASSERT_EQUAL(lm_diff_foreach_run(out, len, PAGE, note_run, &r), 0);
	CU_ASSERT_EQUAL(r.count, 8 + 2);
	CU_ASSERT_EQUAL(r.first_off[1], 136);
	CU_ASSERT_EQUAL(r.first_len[1], 6);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d, PAGE), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&marks, PAGE), 0);
	CU_ASSERT_EQUAL(lm_delta_add_diff(&d, out, len), 0);
	CU_ASSERT_EQUAL(d.dirty, 48 + 1 + 200);
	lm_delta_mark_valid_diff(&marks, out, len);
	CU_ASSERT_EQUAL(marks.dirty, d.dirty);
	CU_ASSERT_EQUAL(marks.mask[2], 0x3f3f3f3f3f3f3f3full);
	memcpy(copy, twin, PAGE);
	lm_delta_apply_to(&d, copy);
	CU_ASSERT_EQUAL(memcmp(copy, page, PAGE), 0);

	/* a hand-made group of bytes 0, 9 and 63: their three bytes come
	 * after the bitmap, in that order, and land there alone */
	memset(target, 0x11, sizeof(target));
	len = test_masked_header(hand, 64, 1);
	m = 1ull | 1ull << 9 | 1ull << 63;
	for (int k = 0; k < 8; k++)
		hand[len + k] = (uint8_t)(m >> 8 * k);
	hand[len + 8] = 0xe0;
	hand[len + 9] = 0xe9;
	hand[len + 10] = 0xef;
	len += 8 + 3;
	CU_ASSERT_EQUAL(lm_diff_apply(target, PAGE, hand, len), 0);
	CU_ASSERT_EQUAL(target[64], 0xe0);
	CU_ASSERT_EQUAL(target[73], 0xe9);
	CU_ASSERT_EQUAL(target[127], 0xef);
	CU_ASSERT_EQUAL(target[65], 0x11);
	CU_ASSERT_EQUAL(target[126], 0x11);
	lm_delta_reset(&d);
	CU_ASSERT_EQUAL(lm_delta_add_diff(&d, hand, len), 0);
	CU_ASSERT_EQUAL(d.dirty, 3);
	CU_ASSERT_EQUAL(d.bytes[73], 0xe9);
	memset(&r, 0, sizeof(r));
	memset(copy, 0x11, PAGE);
	r.into = copy;
	CU_ASSERT_EQUAL(lm_diff_foreach_run(hand, len, PAGE, note_run, &r), 0);
	CU_ASSERT_EQUAL(r.count, 3);
	CU_ASSERT_EQUAL(memcmp(copy, target, PAGE), 0);
	/* its bytes cut short, or one byte more than the bitmap selects
	 * (the start of an element that is not there), are refused */
	expect_rejected(hand, len - 1, PAGE);
	hand[len] = 0xee;
	expect_rejected(hand, len + 1, PAGE);
	/* refused: not at a group's start, past the page, cut short in its
	 * bytes or in its bitmap, none */
	len = test_masked_header(hand, 65, 1);
	memset(hand + len, 0xff, 72);
	expect_rejected(hand, len + 72, PAGE);
	len = test_masked_header(hand, 64, 1);
	expect_rejected(hand, len + 72, 64);
	expect_rejected(hand, len + 71, PAGE);
	expect_rejected(hand, len + 7, PAGE);
	len = test_masked_header(hand, 0, 0);
	expect_rejected(hand, len, PAGE);
	lm_delta_free(&d);
	lm_delta_free(&marks);
	free(twin);
	free(page);
	free(out);
	free(copy);
}

static void test_small_cap_gives_enobufs(void)
{
	uint8_t *twin = malloc(PAGE), *page = malloc(PAGE);
	uint8_t *out = malloc(lm_diff_bound(PAGE));
	size_t full = 0, len;
	int bad = 0;

	rng_seed(5);
	fill_random(twin, PAGE);
	make_change(page, twin, PAGE, PAT_RUNS);
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, page, PAGE, out,
					     lm_diff_bound(PAGE), &full),
			      0);
	CU_ASSERT_FATAL(full > 0);
	for (size_t cap = 0; cap < full; cap++) {
		len = 777;
		if (lm_diff_encode(twin, page, PAGE, out, cap, &len) !=
		    LM_ENOBUFS)
			bad++;
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(lm_diff_encode(twin, page, PAGE, out, full, &len), 0);
	CU_ASSERT_EQUAL(len, full);
	free(twin);
	free(page);
	free(out);
}

/* Builds a diff from (gap, length) pairs without any check, writing at
 * most data_cap fill bytes per run. */
static size_t raw_diff(uint8_t *out, const uint32_t (*runs)[2], size_t nruns,
		       size_t data_cap)
{
	size_t pos = 0;

	for (size_t r = 0; r < nruns; r++) {
		size_t len = runs[r][1] < data_cap ? runs[r][1] : data_cap;

		pos += test_run_header(out + pos, runs[r][0], runs[r][1]);
		memset(out + pos, 0xee, len);
		pos += len;
	}
	return pos;
}

#define GUARD 64

/* lm_diff_apply_checked refuses diff, writing nothing outside the page
 * nor its copy (guard bytes on both sides of each, the diff in a buffer
 * of exactly len bytes for ASan), on every path up to the current one. */
static void expect_checked_refused(const uint8_t *diff, size_t len, size_t n)
{
	uint8_t *a = malloc(n + 2 * GUARD), *b = malloc(n + 2 * GUARD);
	uint8_t *exact = malloc(len ? len : 1);
	enum lm_diff_path was = lm_diff_current_path();
	int outside = 0;

	memcpy(exact, diff, len);
	for (int path = LM_DIFF_NARROW; path <= (int)was; path++) {
		lm_diff_set_path((enum lm_diff_path)path);
		memset(a, 0x5a, n + 2 * GUARD);
		memset(b, 0xa5, n + 2 * GUARD);
		CU_ASSERT_EQUAL(lm_diff_apply_checked(a + GUARD, b + GUARD, n,
						      exact, len),
				LM_EBADMSG);
		for (size_t i = 0; i < GUARD; i++)
			if (a[i] != 0x5a || a[n + GUARD + i] != 0x5a ||
			    b[i] != 0xa5 || b[n + GUARD + i] != 0xa5)
				outside++;
	}
	CU_ASSERT_EQUAL(outside, 0);
	lm_diff_set_path(was);
	free(a);
	free(b);
	free(exact);
}

/* Applies diff to a random page and checks it is rejected with the page
 * left exactly as it was. */
static void expect_rejected(const uint8_t *diff, size_t len, size_t n)
{
	uint8_t *page = malloc(n), *before = malloc(n);
	struct lm_delta d;
	struct runs r = { 0 };

	expect_checked_refused(diff, len, n);

	fill_random(page, n);
	memcpy(before, page, n);
	CU_ASSERT_EQUAL(lm_diff_validate(diff, len, n), LM_EBADMSG);
	CU_ASSERT_EQUAL(lm_diff_apply(page, n, diff, len), LM_EBADMSG);
	CU_ASSERT_EQUAL(memcmp(page, before, n), 0);
	CU_ASSERT_EQUAL(lm_diff_foreach_run(diff, len, n, note_run, &r),
			LM_EBADMSG);
	CU_ASSERT_EQUAL(r.count, 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d, n), 0);
	CU_ASSERT_EQUAL(lm_delta_add_diff(&d, diff, len), LM_EBADMSG);
	CU_ASSERT_EQUAL(d.dirty, 0);
	CU_ASSERT_EQUAL(lm_delta_encoded_len(&d), 0);
	lm_delta_free(&d);
	free(page);
	free(before);
}

static void test_malformed_runs_rejected(void)
{
	/* each case: the last run is the bad one, earlier runs are valid so
	 * a half-applying decoder would be caught */
	static const uint32_t past_end[][2] = { { 0, 4 }, { PAGE - 8, 8 } };
	static const uint32_t at_end[][2] = { { PAGE, 1 } };
	static const uint32_t wrap[][2] = { { 0, 2 }, { 0xfffffff8u, 16 } };
	static const uint32_t huge_len[][2] = { { 8, 0xffffffffu } };
	static const uint32_t empty_run[][2] = { { 0, 1 }, { 10, 0 } };
	static const uint32_t two[][2] = { { 0, 10 }, { 9, 2 } };
	static const uint32_t descending[][2] = { { 100, 2 }, { 10, 2 } };
	uint8_t buf[256];
	size_t len;

	rng_seed(6);
	len = raw_diff(buf, past_end, 2, 64);
	expect_rejected(buf, len, PAGE);
	{ /* checked as it goes, the good run before the bad one is written */
		uint8_t page[PAGE];

		memset(page, 0, sizeof(page));
		CU_ASSERT_EQUAL(lm_diff_apply_checked(page, NULL, PAGE, buf,
						      len), LM_EBADMSG);
		CU_ASSERT_EQUAL(page[0], 0xee);
		CU_ASSERT_EQUAL(page[3], 0xee);
		CU_ASSERT_EQUAL(page[4], 0);
		CU_ASSERT_EQUAL(page[PAGE - 8], 0);
	}
	len = raw_diff(buf, at_end, 1, 64);
	expect_rejected(buf, len, PAGE);
	len = raw_diff(buf, wrap, 2, 64);
	expect_rejected(buf, len, PAGE);
	/* the data is short too, but the length alone must be refused */
	len = raw_diff(buf, huge_len, 1, 64);
	expect_rejected(buf, len, PAGE);
	len = raw_diff(buf, empty_run, 2, 64);
	expect_rejected(buf, len, PAGE);
	/* a run claiming more data than the diff holds */
	len = raw_diff(buf, two, 1, 64);
	expect_rejected(buf, len - 1, PAGE);
	/* a second run whose header is cut after its gap */
	len = raw_diff(buf, two, 1, 64);
	buf[len] = 3;
	expect_rejected(buf, len + 1, PAGE);
	/* a varint cut short, and one longer than five bytes */
	len = raw_diff(buf, two, 1, 64);
	buf[len] = 0x83;
	expect_rejected(buf, len + 1, PAGE);
	memcpy(buf, "\x80\x80\x80\x80\x80\x00\x01\xee", 8);
	expect_rejected(buf, 8, PAGE);
	/* gaps and lengths add up past the page over several runs */
	len = raw_diff(buf, two, 2, 64);
	CU_ASSERT_EQUAL(lm_diff_validate(buf, len, PAGE), 0);
	expect_rejected(buf, len, 20);
	/* a gap of 0 between runs is well formed (never emitted) */
	len = raw_diff(buf, descending, 2, 64);
	buf[len - 4] = 0;
	CU_ASSERT_EQUAL(lm_diff_validate(buf, len, PAGE), 0);
	/* valid for a big page, out of bounds for a small one */
	len = raw_diff(buf, descending, 1, 64);
	CU_ASSERT_EQUAL(lm_diff_validate(buf, len, PAGE), 0);
	expect_rejected(buf, len, 101);
}

static void test_truncated_at_every_byte(void)
{
	uint8_t *twin = malloc(PAGE), *page = malloc(PAGE);
	uint8_t *base = malloc(PAGE), *copy = malloc(PAGE);
	uint8_t *other = malloc(PAGE);
	uint8_t *diff = malloc(lm_diff_bound(PAGE)), *cut;
	uint8_t *boundary;
	size_t len = 0, pos = 0;
	int wrong = 0, touched = 0;

	rng_seed(7);
	fill_random(twin, PAGE);
	fill_random(base, PAGE);
	memcpy(page, twin, PAGE);
	for (size_t i = 0; i < 5; i++) /* five runs of 3 bytes */
		for (size_t k = 0; k < 3; k++)
			change(page, twin, 700 * i + 13 + k);
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, page, PAGE, diff,
					     lm_diff_bound(PAGE), &len),
			      0);
	/* gaps 13 and 697 (two varint bytes), lengths 3 */
	CU_ASSERT_EQUAL_FATAL(len, (2 + 3) + 4 * (3 + 3));
	boundary = calloc(1, len + 1);
	while (pos <= len) { /* prefixes ending between runs are diffs too */
		boundary[pos] = 1;
		pos += pos == 0 ? 2 + 3 : 3 + 3;
	}
	for (size_t l = 0; l < len; l++) {
		int rc;

		/* a fresh allocation of exactly l bytes, so ASan catches a
		 * read past the end */
		cut = malloc(l ? l : 1);
		memcpy(cut, diff, l);
		memcpy(copy, base, PAGE);
		rc = lm_diff_apply(copy, PAGE, cut, l);
		if (boundary[l]) {
			if (rc != 0)
				wrong++;
		} else {
			if (rc != LM_EBADMSG)
				wrong++;
			if (memcmp(copy, base, PAGE) != 0)
				touched++;
		}
		/* checked as it goes: the same verdict at every cut */
		memcpy(other, base, PAGE);
		if (lm_diff_apply_checked(other, NULL, PAGE, cut, l) !=
		    (boundary[l] ? 0 : LM_EBADMSG))
			wrong++;
		else if (boundary[l] && memcmp(other, copy, PAGE) != 0)
			wrong++;
		free(cut);
	}
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT_EQUAL(touched, 0);
	free(boundary);
	free(twin);
	free(page);
	free(base);
	free(copy);
	free(other);
	free(diff);
}

static int stop_at_second(void *ctx, size_t off, const uint8_t *bytes,
			  size_t len)
{
	int *calls = ctx;

	(void)off;
	(void)bytes;
	(void)len;
	return ++*calls == 2 ? 42 : 0;
}

static void test_foreach_run_order_and_stop(void)
{
	uint8_t twin[64] = { 0 }, page[64] = { 0 }, out[128];
	struct runs r = { 0 };
	size_t len;
	int calls = 0;

	page[3] = 1;
	page[20] = page[21] = 2;
	page[63] = 3;
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, page, 64, out, sizeof(out),
					     &len),
			      0);
	CU_ASSERT_EQUAL(lm_diff_foreach_run(out, len, 64, note_run, &r), 0);
	CU_ASSERT_EQUAL(r.count, 3);
	CU_ASSERT_EQUAL(r.first_off[0], 3);
	CU_ASSERT_EQUAL(r.first_len[0], 1);
	CU_ASSERT_EQUAL(r.first_off[1], 20);
	CU_ASSERT_EQUAL(r.first_len[1], 2);
	CU_ASSERT_EQUAL(r.first_off[2], 63);
	CU_ASSERT_EQUAL(lm_diff_foreach_run(out, len, 64, stop_at_second,
					    &calls),
			42);
	CU_ASSERT_EQUAL(calls, 2);
}

/* ---- deltas ------------------------------------------------------------ */

#define VERSIONS 7

/* A page's history over one epoch: v[0] -> v[1] -> ... with one diff per
 * interval; intervals overwrite each other's bytes. */
struct history {
	size_t n;
	uint8_t *v[VERSIONS];
	uint8_t *diff[VERSIONS - 1];
	size_t len[VERSIONS - 1];
};

static void history_make(struct history *h, size_t n)
{
	h->n = n;
	for (int k = 0; k < VERSIONS; k++)
		h->v[k] = malloc(n);
	fill_random(h->v[0], n);
	for (int k = 1; k < VERSIONS; k++) {
		enum pattern pat = k == 1 ? PAT_EDGES
					  : (enum pattern)(PAT_SPARSE +
							   rng_below(6));

		make_change(h->v[k], h->v[k - 1], n, pat);
		h->diff[k - 1] = malloc(lm_diff_bound(n));
		CU_ASSERT_EQUAL_FATAL(lm_diff_encode(h->v[k - 1], h->v[k], n,
						     h->diff[k - 1],
						     lm_diff_bound(n),
						     &h->len[k - 1]),
				      0);
	}
}

static void history_free(struct history *h)
{
	for (int k = 0; k < VERSIONS; k++)
		free(h->v[k]);
	for (int k = 0; k < VERSIONS - 1; k++)
		free(h->diff[k]);
}

/* Same mask, same dirty count and the same bytes under the mask. */
static int deltas_equal(const struct lm_delta *a, const struct lm_delta *b)
{
	size_t n = a->page_size;

	if (n != b->page_size || a->dirty != b->dirty)
		return 0;
	if (memcmp(a->mask, b->mask, (n + 63) / 64 * 8) != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((a->mask[i / 64] >> (i % 64) & 1) &&
		    a->bytes[i] != b->bytes[i])
			return 0;
	return 1;
}

static void test_delta_accumulates_like_diffs_in_order(void)
{
	static const size_t sizes[] = { PAGE, 100, 4097, 64, 1 };

	rng_seed(8);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s], written = 0;
		struct history h;
		struct lm_delta d;
		uint8_t *x = malloc(n), *y = malloc(n), *z = malloc(n);
		uint8_t *covered = calloc(1, n);
		int mask_ok = 1;

		history_make(&h, n);
		CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d, n), 0);
		CU_ASSERT(lm_delta_is_empty(&d));
		/* apply to an unrelated base: the delta must carry exactly
		 * the written bytes, not v[last] wholesale */
		fill_random(x, n);
		memcpy(y, x, n);
		for (int k = 0; k < VERSIONS - 1; k++) {
			struct runs r = { .covered = covered };

			CU_ASSERT_EQUAL(lm_delta_add_diff(&d, h.diff[k],
							  h.len[k]),
					0);
			CU_ASSERT_EQUAL(lm_diff_apply(y, n, h.diff[k],
						      h.len[k]),
					0);
			lm_diff_foreach_run(h.diff[k], h.len[k], n, note_run,
					    &r);
		}
		memcpy(z, x, n);
		lm_delta_apply_to(&d, z);
		CU_ASSERT_EQUAL(memcmp(y, z, n), 0);
		memcpy(z, h.v[0], n);
		lm_delta_apply_to(&d, z);
		CU_ASSERT_EQUAL(memcmp(z, h.v[VERSIONS - 1], n), 0);
		for (size_t i = 0; i < n; i++) {
			written += covered[i];
			if ((d.mask[i / 64] >> (i % 64) & 1) != covered[i])
				mask_ok = 0;
		}
		CU_ASSERT(mask_ok);
		CU_ASSERT_EQUAL(d.dirty, written);
		CU_ASSERT_FALSE(lm_delta_is_empty(&d));
		lm_delta_free(&d);
		history_free(&h);
		free(x);
		free(y);
		free(z);
		free(covered);
	}
}

/* A lemuriad takes each flushed diff into three places at once; each must
 * end as the separate calls leave it, the writer's mask whatever marks it
 * held before, with any of the other two left out. */
static void test_one_pass_equals_the_three_calls(void)
{
	static const size_t sizes[] = { PAGE, 4097, 100 };

	rng_seed(21);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s], mw = (n + 63) / 64 * sizeof(uint64_t);
		struct history h;

		history_make(&h, n);
		for (int variant = 0; variant < 4; variant++) {
			bool with_w = variant & 1, with_page = variant & 2;
			struct lm_delta d1, d2, w1, w2;
			uint8_t *p1 = malloc(n), *p2 = malloc(n);

			CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d1, n), 0);
			CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d2, n), 0);
			CU_ASSERT_EQUAL_FATAL(lm_delta_init(&w1, n), 0);
			CU_ASSERT_EQUAL_FATAL(lm_delta_init(&w2, n), 0);
			fill_random(p1, n);
			memcpy(p2, p1, n);
			/* the writer's mask already marked by another diff */
			lm_delta_mark_valid_diff(&w1, h.diff[0], h.len[0]);
			lm_delta_mark_valid_diff(&w2, h.diff[0], h.len[0]);
			for (int k = 1; k < VERSIONS - 1; k++) {
				lm_delta_add_valid_diff(&d1, h.diff[k],
							h.len[k]);
				if (with_w)
					lm_delta_mark_valid_diff(&w1, h.diff[k],
								 h.len[k]);
				if (with_page)
					lm_diff_apply_valid(p1, h.diff[k],
							    h.len[k]);
				lm_delta_add_valid_diff_also(
				    &d2, with_w ? &w2 : NULL,
				    with_page ? p2 : NULL, h.diff[k],
				    h.len[k]);
			}
			CU_ASSERT_EQUAL(memcmp(p1, p2, n), 0);
			CU_ASSERT_EQUAL(memcmp(d1.mask, d2.mask, mw), 0);
			CU_ASSERT_EQUAL(d1.dirty, d2.dirty);
			CU_ASSERT_EQUAL(memcmp(w1.mask, w2.mask, mw), 0);
			CU_ASSERT_EQUAL(w1.dirty, w2.dirty);
			for (size_t i = 0; i < n; i++)
				if (d1.mask[i / 64] >> (i % 64) & 1 &&
				    d1.bytes[i] != d2.bytes[i]) {
					CU_FAIL("delta bytes differ");
					break;
				}
			CU_ASSERT(!lm_delta_is_empty(&d2));
			lm_delta_free(&d1);
			lm_delta_free(&d2);
			lm_delta_free(&w1);
			lm_delta_free(&w2);
			free(p1);
			free(p2);
		}
		history_free(&h);
	}
}

/* One history taken by one path: pages written with each diff (alone
 * and two at once), a delta taking each with a writer's mask, and a
 * delta merged into another. */
struct taken {
	uint8_t *page, *twin, *merged_bytes;
	struct lm_delta d, w, m;
};

static void take_history(struct taken *t, const struct history *h,
			 const uint8_t *start)
{
	size_t n = h->n;

	t->page = malloc(n);
	t->twin = malloc(n);
	memcpy(t->page, start, n);
	memcpy(t->twin, start, n);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&t->d, n), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&t->w, n), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&t->m, n), 0);
	for (int k = 0; k < VERSIONS - 1; k++) {
		if (k % 2)
			lm_diff_apply_valid(t->page, h->diff[k], h->len[k]);
		else
			CU_ASSERT_EQUAL(lm_diff_apply_checked(t->twin, t->page,
							      n, h->diff[k],
							      h->len[k]), 0);
		lm_delta_add_valid_diff_also(&t->d, &t->w, t->twin,
					     h->diff[k], h->len[k]);
		if (k == VERSIONS / 2)
			CU_ASSERT_EQUAL(lm_delta_merge(&t->m, &t->d), 0);
	}
	CU_ASSERT_EQUAL(lm_delta_merge(&t->m, &t->d), 0);
	t->merged_bytes = malloc(n);
	memcpy(t->merged_bytes, start, n);
	lm_delta_apply_to(&t->m, t->merged_bytes);
}

static void taken_free(struct taken *t)
{
	free(t->page);
	free(t->twin);
	free(t->merged_bytes);
	lm_delta_free(&t->d);
	lm_delta_free(&t->w);
	lm_delta_free(&t->m);
}

/* The AVX2 and AVX-512 paths (those the CPU has, up to the current one)
 * give, on random histories, the narrow path's diffs, pages, deltas,
 * masks and delta encodings, byte for byte. */
static void test_every_path_agrees_with_the_narrow_one(void)
{
	static const size_t sizes[] = { PAGE, 8192, 4097, 100, 64 };
	enum lm_diff_path was = lm_diff_current_path();

	rng_seed(33);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s], bound = lm_diff_bound(n);
		uint8_t *ea = malloc(bound), *eb = malloc(bound);

		for (int trial = 0; trial < 8; trial++) {
			struct history h;
			struct taken a, b;
			size_t la = 0, lb = 1;

			lm_diff_set_path(LM_DIFF_NARROW);
			history_make(&h, n);
			take_history(&a, &h, h.v[0]);
			CU_ASSERT_EQUAL(memcmp(a.page, h.v[VERSIONS - 1], n),
					0);
			CU_ASSERT_EQUAL(lm_delta_encode(&a.m, ea, bound, &la),
					0);
			for (int path = LM_DIFF_AVX2; path <= (int)was;
			     path++) {
				lm_diff_set_path((enum lm_diff_path)path);
				for (int k = 0; k < VERSIONS - 1; k++) {
					size_t len = 0;

					CU_ASSERT_EQUAL(
						lm_diff_encode(h.v[k],
							       h.v[k + 1], n,
							       eb, bound,
							       &len),
						0);
					CU_ASSERT(len == h.len[k] &&
						  memcmp(eb, h.diff[k], len) ==
							  0);
				}
				take_history(&b, &h, h.v[0]);
				CU_ASSERT_EQUAL(memcmp(a.page, b.page, n), 0);
				CU_ASSERT_EQUAL(memcmp(a.twin, b.twin, n), 0);
				CU_ASSERT_EQUAL(memcmp(a.merged_bytes,
						       b.merged_bytes, n),
						0);
				CU_ASSERT(deltas_equal(&a.d, &b.d));
				CU_ASSERT(deltas_equal(&a.m, &b.m));
				/* a writer's mask has no bytes */
				CU_ASSERT_EQUAL(a.w.dirty, b.w.dirty);
				CU_ASSERT_EQUAL(memcmp(a.w.mask, b.w.mask,
						       (n + 63) / 64 * 8),
						0);
				/* a masked group carries only the bytes its
				 * bitmap selects: the encodings are equal */
				CU_ASSERT_EQUAL(lm_delta_encode(&b.m, eb,
								bound, &lb),
						0);
				CU_ASSERT(la == lb && memcmp(ea, eb, la) == 0);
				taken_free(&b);
			}
			taken_free(&a);
			history_free(&h);
		}
		free(ea);
		free(eb);
	}
	lm_diff_set_path(was);
}

/* A new delta encodes the bytes written into it and nothing of what the
 * heap held before (the block is dirtied and freed first, so a delta
 * that took it unzeroed and sent a byte outside its mask would show
 * 0xa5; ASan fills fresh blocks as well). */
static void test_new_delta_sends_no_heap_garbage(void)
{
	uint8_t twin[PAGE] = { 0 }, page[PAGE] = { 0 }, diff[2 * PAGE];
	uint8_t out[2 * PAGE];
	uint8_t *junk = malloc(PAGE);
	struct lm_delta d;
	size_t len = 0, elen = 0;
	int clean = 1;

	CU_ASSERT_FATAL(junk != NULL);
	memset(junk, 0xa5, PAGE);
	free(junk);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d, PAGE), 0);
	for (size_t i = 0; i < 64; i += 2) /* every other byte: dense */
		page[i] = 1;
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, page, PAGE, diff,
					     sizeof(diff), &len), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_add_diff(&d, diff, len), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_encode(&d, out, sizeof(out), &elen),
			      0);
	/* gap 0, one masked group, its bitmap, its 32 bytes */
	CU_ASSERT_EQUAL_FATAL(elen, 2 + 8 + 32);
	CU_ASSERT_EQUAL(out[0], 0);
	CU_ASSERT_EQUAL(out[1], 2 * 1 + 1);
	for (size_t i = 0; i < 32; i++)
		if (out[10 + i] != 1)
			clean = 0;
	CU_ASSERT(clean);
	lm_delta_free(&d);
}

static void test_delta_encode_round_trip(void)
{
	static const size_t sizes[] = { PAGE, 100, 4097, 65 };

	rng_seed(9);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s], len = 0, want;
		struct history h;
		struct lm_delta d, back;
		uint8_t *out = malloc(lm_diff_bound(n));
		uint8_t *y = malloc(n), *z = malloc(n);
		struct runs r = { 0 };

		history_make(&h, n);
		CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d, n), 0);
		CU_ASSERT_EQUAL_FATAL(lm_delta_init(&back, n), 0);
		for (int k = 0; k < VERSIONS - 1; k++)
			lm_delta_add_diff(&d, h.diff[k], h.len[k]);
		want = lm_delta_encoded_len(&d);
		CU_ASSERT(want <= lm_diff_bound(n));
		CU_ASSERT_EQUAL(lm_delta_encode(&d, out, want - 1, &len),
				LM_ENOBUFS);
		CU_ASSERT_EQUAL_FATAL(lm_delta_encode(&d, out,
						      lm_diff_bound(n), &len),
				      0);
		CU_ASSERT_EQUAL(len, want);
		/* maximal runs, accepted by every diff consumer */
		CU_ASSERT_EQUAL(lm_diff_foreach_run(out, len, n, note_run, &r),
				0);
		CU_ASSERT_FALSE(r.adjacent);
		fill_random(y, n);
		memcpy(z, y, n);
		CU_ASSERT_EQUAL(lm_diff_apply(y, n, out, len), 0);
		lm_delta_apply_to(&d, z);
		CU_ASSERT_EQUAL(memcmp(y, z, n), 0);
		CU_ASSERT_EQUAL(lm_delta_add_diff(&back, out, len), 0);
		CU_ASSERT(deltas_equal(&d, &back));
		lm_delta_free(&d);
		lm_delta_free(&back);
		history_free(&h);
		free(out);
		free(y);
		free(z);
	}
}

static void test_delta_merge_newer_wins(void)
{
	struct history h;
	struct lm_delta older, newer, all, copy, other;
	uint8_t d1[16], d2[16];
	size_t dirty;

	rng_seed(10);
	history_make(&h, PAGE);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&older, PAGE), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&newer, PAGE), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&all, PAGE), 0);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&copy, PAGE), 0);
	for (int k = 0; k < VERSIONS - 1; k++) {
		lm_delta_add_diff(k < 3 ? &older : &newer, h.diff[k],
				  h.len[k]);
		lm_delta_add_diff(&all, h.diff[k], h.len[k]);
	}
	lm_delta_merge(&copy, &newer); /* into an empty delta: a copy */
	CU_ASSERT(deltas_equal(&copy, &newer));
	CU_ASSERT_EQUAL(lm_delta_merge(&older, &newer), 0);
	CU_ASSERT(deltas_equal(&older, &all));
	CU_ASSERT(deltas_equal(&copy, &newer)); /* src untouched */
	dirty = older.dirty;
	lm_delta_reset(&copy);
	CU_ASSERT_EQUAL(lm_delta_merge(&older, &copy), 0); /* empty src */
	CU_ASSERT(deltas_equal(&older, &all));
	CU_ASSERT_EQUAL(older.dirty, dirty);

	/* the same byte in both: the src value wins, either orientation */
	lm_delta_reset(&older);
	lm_delta_reset(&newer);
	test_run_header(d1, 10, 2);
	d1[2] = 'a';
	d1[3] = 'a';
	test_run_header(d2, 11, 2);
	d2[2] = 'b';
	d2[3] = 'b';
	lm_delta_add_diff(&older, d1, 4);
	lm_delta_add_diff(&newer, d2, 4);
	lm_delta_reset(&copy);
	lm_delta_merge(&copy, &newer);
	lm_delta_merge(&older, &newer);
	CU_ASSERT_EQUAL(older.dirty, 3);
	CU_ASSERT_EQUAL(older.bytes[10], 'a');
	CU_ASSERT_EQUAL(older.bytes[11], 'b');
	CU_ASSERT_EQUAL(older.bytes[12], 'b');
	lm_delta_reset(&older);
	lm_delta_add_diff(&older, d1, 4);
	lm_delta_merge(&copy, &older);
	CU_ASSERT_EQUAL(copy.dirty, 3);
	CU_ASSERT_EQUAL(copy.bytes[11], 'a');
	CU_ASSERT_EQUAL(copy.bytes[12], 'b');

	/* mismatched page sizes leave dst alone */
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&other, PAGE / 2), 0);
	lm_delta_add_diff(&other, d2, 4);
	CU_ASSERT_EQUAL(lm_delta_merge(&older, &other), LM_EINVAL);
	CU_ASSERT_EQUAL(older.dirty, 2);
	CU_ASSERT_EQUAL(older.bytes[11], 'a');

	lm_delta_free(&older);
	lm_delta_free(&newer);
	lm_delta_free(&all);
	lm_delta_free(&copy);
	lm_delta_free(&other);
	history_free(&h);
}

static void test_delta_later_write_wins_in_add(void)
{
	struct lm_delta d;
	uint8_t diff[16], page[8] = { 0 };

	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d, 8), 0);
	test_run_header(diff, 0, 8);
	memset(diff + 2, 1, 8);
	CU_ASSERT_EQUAL(lm_delta_add_diff(&d, diff, 10), 0);
	test_run_header(diff, 7, 1);
	diff[2] = 2;
	CU_ASSERT_EQUAL(lm_delta_add_diff(&d, diff, 3), 0);
	CU_ASSERT_EQUAL(d.dirty, 8);
	lm_delta_apply_to(&d, page);
	CU_ASSERT_EQUAL(page[0], 1);
	CU_ASSERT_EQUAL(page[6], 1);
	CU_ASSERT_EQUAL(page[7], 2);
	lm_delta_free(&d);
}

static void test_delta_reset_init_free(void)
{
	struct lm_delta d;
	uint8_t diff[9], page[PAGE], out[1];
	size_t len = 5;

	CU_ASSERT_EQUAL(lm_delta_init(&d, 0), LM_EINVAL);
	lm_delta_free(&d);
	lm_delta_free(NULL);
	CU_ASSERT_EQUAL_FATAL(lm_delta_init(&d, PAGE), 0);
	len = test_run_header(diff, PAGE - 1, 1); /* a two-byte gap */
	diff[len] = 0x77;
	CU_ASSERT_EQUAL(lm_delta_add_diff(&d, diff, len + 1), 0);
	CU_ASSERT_EQUAL(d.dirty, 1);
	CU_ASSERT_EQUAL(lm_delta_encoded_len(&d), 4);
	len = 5;
	lm_delta_reset(&d);
	CU_ASSERT(lm_delta_is_empty(&d));
	CU_ASSERT_EQUAL(lm_delta_encoded_len(&d), 0);
	CU_ASSERT_EQUAL(lm_delta_encode(&d, out, 0, &len), 0);
	CU_ASSERT_EQUAL(len, 0);
	memset(page, 0x11, PAGE);
	lm_delta_apply_to(&d, page);
	CU_ASSERT_EQUAL(page[PAGE - 1], 0x11);
	/* usable again after the reset */
	CU_ASSERT_EQUAL(lm_delta_add_diff(&d, diff, 4), 0);
	lm_delta_apply_to(&d, page);
	CU_ASSERT_EQUAL(page[PAGE - 1], 0x77);
	CU_ASSERT_EQUAL(page[PAGE - 2], 0x11);
	lm_delta_free(&d);
	lm_delta_free(&d); /* a second free is harmless */
	CU_ASSERT_PTR_NULL(d.bytes);
}

/* The tests of the codec's behaviour (those that do not themselves go
 * over the paths) once on each path below the current one, which the
 * suite's own run covers; a failure names the path on stderr. */
static void test_lower_paths_pass_the_same_tests(void)
{
	static void (*const tests[])(void) = {
		test_round_trip_random_patterns,
		test_encoding_layout,
		test_clean_page_gives_empty_diff,
		test_disjoint_writers_commute,
		test_bound_is_tight,
		test_masked_groups,
		test_small_cap_gives_enobufs,
		test_truncated_at_every_byte,
		test_foreach_run_order_and_stop,
		test_delta_accumulates_like_diffs_in_order,
		test_one_pass_equals_the_three_calls,
		test_delta_encode_round_trip,
		test_delta_merge_newer_wins,
		test_delta_later_write_wins_in_add,
	};
	static const char *const names[] = { "narrow", "AVX2", "AVX-512" };
	enum lm_diff_path was = lm_diff_current_path();
	unsigned runs = 0;

	for (int path = LM_DIFF_NARROW; path < (int)was; path++) {
		unsigned before = CU_get_number_of_failures();

		CU_ASSERT_EQUAL(lm_diff_set_path((enum lm_diff_path)path),
				path);
		for (size_t t = 0; t < sizeof(tests) / sizeof(tests[0]); t++)
			tests[t]();
		if (CU_get_number_of_failures() != before)
			fprintf(stderr, "test_diff: failures on the %s path\n",
				names[path]);
		runs++;
	}
	lm_diff_set_path(was);
	CU_ASSERT_EQUAL(lm_diff_current_path(), was);
	CU_ASSERT_EQUAL(runs, (unsigned)was);
}

LM_TEST_SUITE("diff",
	      LM_TEST(test_round_trip_random_patterns),
	      LM_TEST(test_encoding_layout),
	      LM_TEST(test_clean_page_gives_empty_diff),
	      LM_TEST(test_clean_start_skipped_exactly),
	      LM_TEST(test_oversized_page_rejected),
	      LM_TEST(test_disjoint_writers_commute),
	      LM_TEST(test_bound_is_tight),
	      LM_TEST(test_masked_groups),
	      LM_TEST(test_small_cap_gives_enobufs),
	      LM_TEST(test_malformed_runs_rejected),
	      LM_TEST(test_truncated_at_every_byte),
	      LM_TEST(test_foreach_run_order_and_stop),
	      LM_TEST(test_delta_accumulates_like_diffs_in_order),
	      LM_TEST(test_one_pass_equals_the_three_calls),
	      LM_TEST(test_every_path_agrees_with_the_narrow_one),
	      LM_TEST(test_lower_paths_pass_the_same_tests),
	      LM_TEST(test_new_delta_sends_no_heap_garbage),
	      LM_TEST(test_delta_encode_round_trip),
	      LM_TEST(test_delta_merge_newer_wins),
	      LM_TEST(test_delta_later_write_wins_in_add),
	      LM_TEST(test_delta_reset_init_free))
