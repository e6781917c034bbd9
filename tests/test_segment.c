/* Tests of liblemuria/segment.c: the unit binary is itself the executable
 * whose data segment is described, captured and applied.  The globals
 * below are volatile so the compiler reloads them after lm_segment_apply
 * rewrote them behind its back. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lm_error.h"
#include "segment.h"
#include "unit.h"

static volatile int seg_int = 7;                 /* .data */
static const char *volatile seg_str = "alpha";   /* .data, relocated */
static volatile int *volatile seg_ptr = &seg_int; /* .data, relocated */
static volatile char seg_bss[256];                /* .bss */
static volatile long seg_private;                 /* excluded */
static volatile int seg_fn_called;
/* .bss that stays zero but for the words a test sets: not shipped */
static volatile uint64_t seg_zero[(4u << 20) / sizeof(uint64_t)];

static void seg_fn(void)
{
	seg_fn_called++;
}

static void set_globals(int v, const char *s)
{
	seg_int = v;
	seg_str = s;
	for (size_t i = 0; i < sizeof(seg_bss); i++)
		seg_bss[i] = (char)(v + (int)i);
}

static int globals_are(int v, const char *s)
{
	if (seg_int != v || strcmp(seg_str, s) != 0)
		return 0;
	for (size_t i = 0; i < sizeof(seg_bss); i++)
		if (seg_bss[i] != (char)(v + (int)i))
			return 0;
	return 1;
}

/* The image's copy of the segment's byte at `off` from its start, or NULL
 * when no run holds it (the byte is zero). */
static uint8_t *image_at(uint8_t *img, size_t len, uint64_t off)
{
	size_t pos = LM_SEGMENT_HEADER_BYTES;

	while (len - pos >= LM_SEGMENT_RUN_BYTES) {
		uint64_t o, n;

		memcpy(&o, img + pos, sizeof(o));
		memcpy(&n, img + pos + 8, sizeof(n));
		pos += LM_SEGMENT_RUN_BYTES;
		if (n > len - pos)
			return NULL;
		if (off >= o && off - o < n)
			return img + pos + (off - o);
		pos += n;
	}
	return NULL;
}

static void zero_all(void)
{
	for (size_t i = 0; i < sizeof(seg_zero) / sizeof(seg_zero[0]); i++)
		seg_zero[i] = 0;
}

static int excluded(const struct lm_segment_range *ex, size_t n, uintptr_t a,
		    size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (a >= ex[i].start && a + len <= ex[i].end)
			return 1;
	return 0;
}

static void test_layout_covers_globals(void)
{
	const struct lm_segment_range *ex;
	uintptr_t start, end;
	size_t n;
	char err[256];
	int local = 0;

	CU_ASSERT_EQUAL_FATAL(lm_segment_layout(&start, &end, &ex, &n, err,
						sizeof(err)), 0);
	CU_ASSERT(start < end);
	CU_ASSERT((uintptr_t)&seg_int >= start && (uintptr_t)&seg_int < end);
	CU_ASSERT((uintptr_t)seg_bss >= start &&
		  (uintptr_t)(seg_bss + sizeof(seg_bss)) <= end);
	for (size_t i = 0; i < n; i++) {
		CU_ASSERT(ex[i].start >= start && ex[i].end <= end);
		CU_ASSERT(ex[i].start < ex[i].end);
		if (i > 0)
			CU_ASSERT(ex[i - 1].end < ex[i].start);
	}
	/* stderr is copy-relocated into a PIE built by gcc on x86-64; if it
	 * is in our segment, it must be excluded. */
	if ((uintptr_t)&stderr >= start && (uintptr_t)&stderr < end)
		CU_ASSERT(excluded(ex, n, (uintptr_t)&stderr, sizeof(stderr)));
	CU_ASSERT_EQUAL(lm_segment_check_private((const void *)&seg_int),
			LM_EINVAL);
	CU_ASSERT_EQUAL(lm_segment_check_private(&local), 0);
}

static void test_capture_apply_restores_globals(void)
{
	const struct lm_segment_range *ex;
	uintptr_t start, end;
	uint8_t *img = NULL, *img2 = NULL;
	size_t len = 0, len2 = 0, n;
	char err[256];

	CU_ASSERT_EQUAL_FATAL(lm_segment_exclude((const void *)&seg_private,
						 sizeof(seg_private)), 0);
	CU_ASSERT_EQUAL_FATAL(lm_segment_layout(&start, &end, &ex, &n, err,
						sizeof(err)), 0);
	CU_ASSERT(excluded(ex, n, (uintptr_t)&seg_private,
			   sizeof(seg_private)));

	set_globals(11, "before");
	seg_private = 1;
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&img, &len, err, sizeof(err)),
			      0);
	CU_ASSERT(len > LM_SEGMENT_HEADER_BYTES &&
		  len < LM_SEGMENT_HEADER_BYTES + (end - start));
	/* Deterministic: excluded bytes are zero, nothing else moved. */
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&img2, &len2, err,
						 sizeof(err)), 0);
	CU_ASSERT(len == len2 && memcmp(img, img2, len) == 0);
	{
		const uint8_t *b = image_at(img, len, (uintptr_t)&seg_private -
							      start);
		long zero = 0;

		CU_ASSERT(!b || memcmp(b, &zero, sizeof(zero)) == 0);
		b = image_at(img, len, (uintptr_t)&seg_int - start);
		CU_ASSERT(b && memcmp(b, (const void *)&seg_int,
				      sizeof(seg_int)) == 0);
	}

	set_globals(22, "after");
	seg_private = 2;
	CU_ASSERT(globals_are(22, "after"));
	CU_ASSERT_EQUAL(lm_segment_apply(img, len), 0);
	CU_ASSERT(globals_are(11, "before"));
	CU_ASSERT(strcmp(seg_str, "before") == 0);
	CU_ASSERT_EQUAL(seg_private, 2); /* excluded: untouched */
	/* stdio still works: its pointers were not overwritten. */
	CU_ASSERT(fprintf(stderr, "%s", "") == 0);
	free(img);
	free(img2);
}

static void test_apply_rejects_other_images(void)
{
	uint8_t *img = NULL;
	size_t len = 0;
	char err[256];

	set_globals(5, "kept");
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&img, &len, err, sizeof(err)),
			      0);
	set_globals(6, "now");
	CU_ASSERT_EQUAL(lm_segment_apply(img, len - 1), LM_EINVAL);
	CU_ASSERT_EQUAL(lm_segment_apply(img, len + 0), 0);
	set_globals(6, "now");
	CU_ASSERT_EQUAL(lm_segment_apply(NULL, len), LM_EINVAL);
	img[0] ^= 0xff; /* magic */
	CU_ASSERT_EQUAL(lm_segment_apply(img, len), LM_EINVAL);
	img[0] ^= 0xff;
	img[16] ^= 0x40; /* segment offset: another executable */
	CU_ASSERT_EQUAL(lm_segment_apply(img, len), LM_EINVAL);
	CU_ASSERT(globals_are(6, "now"));
	free(img);
}

/* A sender loaded elsewhere: pointers into its executable are moved to
 * ours, other values are kept. */
static void test_apply_moves_relocated_pointers(void)
{
	const uint64_t shift = 1ull << 40;
	uintptr_t start, end, base, v;
	const struct lm_segment_range *ex;
	uint8_t *img = NULL, *slot;
	size_t len = 0, n;
	char err[256];

	CU_ASSERT_EQUAL_FATAL(lm_segment_layout(&start, &end, &ex, &n, err,
						sizeof(err)), 0);
	base = (uintptr_t)seg_fn - (uintptr_t)lm_segment_fn_offset(seg_fn);
	if (base == 0)
		return; /* not a PIE: no relocation to exercise */
	set_globals(31, "moved");
	seg_ptr = NULL;
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&img, &len, err, sizeof(err)),
			      0);
	memcpy(&v, img + 8, sizeof(v));
	CU_ASSERT_EQUAL(v, base);
	v += shift;
	memcpy(img + 8, &v, sizeof(v));
	slot = image_at(img, len, (uintptr_t)&seg_str - start);
	CU_ASSERT_PTR_NOT_NULL_FATAL(slot);
	memcpy(&v, slot, sizeof(v));
	v += shift;
	memcpy(slot, &v, sizeof(v));
	set_globals(32, "other");
	seg_ptr = &seg_int;
	CU_ASSERT_EQUAL(lm_segment_apply(img, len), 0);
	CU_ASSERT(globals_are(31, "moved"));
	CU_ASSERT_PTR_NULL(seg_ptr);
	seg_ptr = &seg_int;
	free(img);
}

/* A zero .bss travels as nothing; the words set in it travel in runs of
 * whole blocks, and the receiver gets them with everything else zero. */
static void test_zero_bss_not_shipped(void)
{
	const size_t words = sizeof(seg_zero) / sizeof(seg_zero[0]);
	const size_t set[3] = { 0, words / 4 + 1, words - 1 };
	const struct lm_segment_range *ex;
	uintptr_t start, end, z = (uintptr_t)seg_zero;
	uint8_t *a = NULL, *b = NULL;
	size_t la = 0, lb = 0, n;
	char err[256];

	CU_ASSERT_EQUAL_FATAL(lm_segment_layout(&start, &end, &ex, &n, err,
						sizeof(err)), 0);
	zero_all();
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&a, &la, err, sizeof(err)),
			      0);
	/* at most the blocks the array shares with its neighbours */
	CU_ASSERT(la + sizeof(seg_zero) - 2 * LM_SEGMENT_BLOCK <=
		  LM_SEGMENT_HEADER_BYTES + (end - start));
	CU_ASSERT_PTR_NULL(image_at(a, la, z + sizeof(seg_zero) / 2 - start));
	for (size_t i = 0; i < 3; i++)
		seg_zero[set[i]] = 0x1234567890abcdefull + i;
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&b, &lb, err, sizeof(err)),
			      0);
	CU_ASSERT(lb > la &&
		  lb - la <= 3 * (LM_SEGMENT_BLOCK + LM_SEGMENT_RUN_BYTES));
	for (size_t i = 0; i < 3; i++) {
		const uint8_t *w = image_at(b, lb, z + set[i] * 8 - start);
		uint64_t v = 0;

		CU_ASSERT_PTR_NOT_NULL_FATAL(w);
		memcpy(&v, w, sizeof(v));
		CU_ASSERT_EQUAL(v, 0x1234567890abcdefull + i);
	}
	/* the receiver's own values in the gaps are zeroed */
	for (size_t i = 0; i < 3; i++)
		seg_zero[set[i]] = 7;
	seg_zero[words / 2] = 9;
	CU_ASSERT_EQUAL(lm_segment_apply(b, lb), 0);
	for (size_t i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(seg_zero[set[i]], 0x1234567890abcdefull + i);
	CU_ASSERT_EQUAL(seg_zero[words / 2], 0);
	CU_ASSERT_EQUAL(seg_zero[1], 0);
	CU_ASSERT_EQUAL(lm_segment_apply(a, la), 0);
	for (size_t i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(seg_zero[set[i]], 0);
	free(a);
	free(b);
}

/* Runs are whole blocks aligned in memory (but at the segment's ends),
 * in order and apart, and cover the image exactly. */
static void test_runs_are_aligned_blocks(void)
{
	const struct lm_segment_range *ex;
	uintptr_t start, end;
	uint64_t at = 0;
	size_t len = 0, pos = LM_SEGMENT_HEADER_BYTES, n, runs = 0;
	uint8_t *img = NULL;
	char err[256];

	CU_ASSERT_EQUAL_FATAL(lm_segment_layout(&start, &end, &ex, &n, err,
						sizeof(err)), 0);
	set_globals(3, "runs");
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&img, &len, err, sizeof(err)),
			      0);
	while (pos < len) {
		uint64_t o, l;

		CU_ASSERT_FATAL(len - pos >= LM_SEGMENT_RUN_BYTES);
		memcpy(&o, img + pos, sizeof(o));
		memcpy(&l, img + pos + 8, sizeof(l));
		pos += LM_SEGMENT_RUN_BYTES;
		CU_ASSERT_FATAL(l > 0 && l <= len - pos);
		CU_ASSERT(o == 0 || (start + o) % LM_SEGMENT_BLOCK == 0);
		CU_ASSERT(o + l == end - start ||
			  (start + o + l) % LM_SEGMENT_BLOCK == 0);
		CU_ASSERT(runs == 0 || o > at); /* neighbours are merged */
		at = o + l;
		pos += l;
		runs++;
	}
	CU_ASSERT(runs > 0 && pos == len);
	free(img);
}

/* Writes header `hdr` and then `nruns` runs {off, len} of filler bytes
 * (at most 64 each) into buf; returns the image's length. */
static size_t make_image(uint8_t *buf, const uint8_t *hdr,
			 const uint64_t (*runs)[2], size_t nruns)
{
	size_t pos = LM_SEGMENT_HEADER_BYTES;

	memcpy(buf, hdr, LM_SEGMENT_HEADER_BYTES);
	for (size_t i = 0; i < nruns; i++) {
		memcpy(buf + pos, runs[i], LM_SEGMENT_RUN_BYTES);
		pos += LM_SEGMENT_RUN_BYTES;
		memset(buf + pos, 0x5a, runs[i][1] < 64 ? runs[i][1] : 64);
		pos += runs[i][1] < 64 ? runs[i][1] : 64;
	}
	return pos;
}

/* Malformed runs are refused before anything is written. */
static void test_apply_refuses_malformed_runs(void)
{
	const struct lm_segment_range *ex;
	uintptr_t start, end;
	uint8_t *img = NULL, buf[512];
	size_t len = 0, n;
	uint64_t seglen;
	char err[256];

	CU_ASSERT_EQUAL_FATAL(lm_segment_layout(&start, &end, &ex, &n, err,
						sizeof(err)), 0);
	seglen = end - start;
	set_globals(51, "kept");
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&img, &len, err, sizeof(err)),
			      0);
	{
		const uint64_t beyond[][2] = { { seglen - 4, 8 } };
		const uint64_t overlap[][2] = { { 0, 16 }, { 8, 16 } };
		const uint64_t backwards[][2] = { { 64, 8 }, { 0, 8 } };
		const uint64_t empty[][2] = { { 0, 0 } };
		const uint64_t past_image[][2] = { { 0, 100 } }; /* 64 given */
		const uint64_t far[][2] = { { UINT64_MAX - 4, 8 } };

		CU_ASSERT_EQUAL(lm_segment_apply(buf, make_image(buf, img,
								 beyond, 1)),
				LM_EINVAL);
		CU_ASSERT_EQUAL(lm_segment_apply(buf, make_image(buf, img,
								 overlap, 2)),
				LM_EINVAL);
		CU_ASSERT_EQUAL(lm_segment_apply(buf,
						 make_image(buf, img,
							    backwards, 2)),
				LM_EINVAL);
		CU_ASSERT_EQUAL(lm_segment_apply(buf, make_image(buf, img,
								 empty, 1)),
				LM_EINVAL);
		CU_ASSERT_EQUAL(lm_segment_apply(buf,
						 make_image(buf, img,
							    past_image, 1)),
				LM_EINVAL);
		CU_ASSERT_EQUAL(lm_segment_apply(buf, make_image(buf, img,
								 far, 1)),
				LM_EINVAL);
		/* half a run header */
		CU_ASSERT_EQUAL(lm_segment_apply(buf, LM_SEGMENT_HEADER_BYTES +
							      8),
				LM_EINVAL);
		CU_ASSERT_EQUAL(lm_segment_apply(img, LM_SEGMENT_HEADER_BYTES -
							      1),
				LM_EINVAL);
	}
	CU_ASSERT(globals_are(51, "kept"));
	free(img);
}

static void test_fn_offset_round_trip(void)
{
	uint64_t off = lm_segment_fn_offset(seg_fn);
	void (*fn)(void) = lm_segment_fn_from_offset(off);
	uintptr_t start, end;
	const struct lm_segment_range *ex;
	size_t n;
	char err[256];

	CU_ASSERT_PTR_EQUAL(fn, seg_fn);
	seg_fn_called = 0;
	if (fn)
		fn();
	CU_ASSERT_EQUAL(seg_fn_called, 1);
	CU_ASSERT_PTR_NULL(lm_segment_fn_from_offset(UINT64_MAX));
	CU_ASSERT_PTR_NULL(lm_segment_fn_from_offset(0)); /* ELF header */
	CU_ASSERT_EQUAL_FATAL(lm_segment_layout(&start, &end, &ex, &n, err,
						sizeof(err)), 0);
	/* data, not text */
	CU_ASSERT_PTR_NULL(lm_segment_fn_from_offset(
		off + ((uintptr_t)&seg_int - (uintptr_t)seg_fn)));
}

static void test_forked_child_sees_parent_globals(void)
{
	uint8_t *img = NULL;
	size_t len = 0;
	char err[256], got[300] = { 0 }, want[300];
	int fds[2], status = -1, wlen;
	ssize_t r, total = 0;
	pid_t pid;

	set_globals(41, "from the parent");
	CU_ASSERT_EQUAL_FATAL(lm_segment_capture(&img, &len, err, sizeof(err)),
			      0);
	set_globals(42, "stale");
	CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		char out[300];
		int n, rc = lm_segment_apply(img, len);

		n = snprintf(out, sizeof(out), "%d %d %s %d %d", rc, seg_int,
			     seg_str, seg_bss[0], seg_bss[255]);
		if (write(fds[1], out, (size_t)n) != n)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	for (int i = 0; i < 50 && total < (ssize_t)sizeof(got) - 1; i++) {
		struct pollfd p = { fds[0], POLLIN, 0 };

		if (poll(&p, 1, 100) <= 0)
			continue;
		r = read(fds[0], got + total, sizeof(got) - 1 - (size_t)total);
		if (r <= 0)
			break;
		total += r;
	}
	close(fds[0]);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	wlen = snprintf(want, sizeof(want), "0 41 from the parent %d %d",
			(char)41, (char)(41 + 255));
	CU_ASSERT(wlen > 0 && strcmp(got, want) == 0);
	CU_ASSERT(globals_are(42, "stale")); /* the parent is untouched */
	free(img);
}

LM_TEST_SUITE("segment", LM_TEST(test_layout_covers_globals),
	      LM_TEST(test_capture_apply_restores_globals),
	      LM_TEST(test_apply_rejects_other_images),
	      LM_TEST(test_apply_moves_relocated_pointers),
	      LM_TEST(test_zero_bss_not_shipped),
	      LM_TEST(test_runs_are_aligned_blocks),
	      LM_TEST(test_apply_refuses_malformed_runs),
	      LM_TEST(test_fn_offset_round_trip),
	      LM_TEST(test_forked_child_sees_parent_globals))
