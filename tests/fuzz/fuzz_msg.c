/* libFuzzer harness for the message codec (common/proto.c) and, through
 * FLUSH diff lists, the diff codec (common/diff.c): any bytes go to
 * lm_msg_decode, and what decodes must be exactly what re-encodes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "fuzz_input.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"

/* Properties checked (a failure traps):
 *  - a message that decodes re-encodes to exactly the same bytes, and
 *    lm_msg_encoded_len predicts that length;
 *  - a message that does not decode leaves struct lm_msg zeroed;
 *  - a small notice buffer changes the result only to LM_ENOBUFS, and only
 *    for a well-formed message with more notices than fit;
 *  - every diff of a FLUSH is walked; lm_diff_apply accepts exactly what
 *    lm_diff_validate accepts and leaves the page untouched otherwise; a
 *    valid diff gives the same page applied directly, through a cluster
 *    delta, and re-encoded with lm_diff_encode;
 *  - every path of the codec below the CPU's best (AVX2, narrow) takes
 *    and refuses the same diffs, writes the same pages and encodes the
 *    same bytes. */

#define NOTICES_MAX 4096
#define MSG_MAX 65536 /* larger inputs could hold more than NOTICES_MAX */
#define PAGE_MAX 4096

static struct lm_notice notices[NOTICES_MAX];
static struct lm_notice few[2];

static void noop_sink(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	lm_log_set_sink(noop_sink, NULL);
	return 0;
}

static void check_zeroed(const struct lm_msg *m)
{
	static const struct lm_msg zero;

	if (memcmp(m, &zero, sizeof(*m)) != 0)
		__builtin_trap();
}

/* Page sizes vary with the diff's page number so that diffs near the
 * end of small and odd-sized pages are tried too. */
static size_t page_size_for(uint32_t page)
{
	static const size_t sizes[] = { PAGE_MAX, 256, 100, 1 };

	return sizes[page % (sizeof(sizes) / sizeof(sizes[0]))];
}

/* The paths below the CPU's best against what it gave: v (0 or
 * LM_EBADMSG), the page after (a, from before) and its re-encoding. */
static void check_lower_paths(const uint8_t *diff, size_t len, size_t ps,
			      int v, const uint8_t *before, const uint8_t *a,
			      const uint8_t *enc, size_t n)
{
	static uint8_t b[PAGE_MAX], c[PAGE_MAX], again[PAGE_MAX * 5];
	enum lm_diff_path best = lm_diff_current_path();
	size_t m;

	for (int path = LM_DIFF_NARROW; path < (int)best; path++) {
		lm_diff_set_path((enum lm_diff_path)path);
		if (lm_diff_validate(diff, len, ps) != v)
			__builtin_trap();
		memcpy(b, before, ps);
		memcpy(c, before, ps);
		if (lm_diff_apply_checked(b, c, ps, diff, len) != v)
			__builtin_trap();
		if (v != 0)
			continue;
		if (memcmp(a, b, ps) != 0 || memcmp(a, c, ps) != 0)
			__builtin_trap();
		if (lm_diff_encode(before, a, ps, again, sizeof(again), &m) !=
			    0 ||
		    m != n || memcmp(again, enc, n) != 0)
			__builtin_trap();
	}
	lm_diff_set_path(best);
}

static void check_diff(uint32_t page, const uint8_t *diff, size_t len)
{
	static uint8_t before[PAGE_MAX], a[PAGE_MAX], b[PAGE_MAX];
	static uint8_t enc[PAGE_MAX * 5];
	size_t ps = page_size_for(page), n;
	struct lm_delta d;
	int v, rc;

	for (size_t i = 0; i < ps; i++)
		before[i] = (uint8_t)(i * 7 + page);
	memcpy(a, before, ps);
	v = lm_diff_validate(diff, len, ps);
	rc = lm_diff_apply(a, ps, diff, len);
	if (v != rc || (v != 0 && v != LM_EBADMSG))
		__builtin_trap();
	if (v != 0) {
		if (memcmp(a, before, ps) != 0)
			__builtin_trap(); /* half-applied */
		check_lower_paths(diff, len, ps, v, before, a, NULL, 0);
		return;
	}

	/* The same writes through a delta, onto the same page. */
	if (lm_delta_init(&d, ps) != 0)
		abort();
	if (lm_delta_add_diff(&d, diff, len) != 0)
		__builtin_trap();
	memcpy(b, before, ps);
	lm_delta_apply_to(&d, b);
	if (memcmp(a, b, ps) != 0)
		__builtin_trap();
	if (lm_delta_encode(&d, enc, sizeof(enc), &n) != 0 ||
	    n != lm_delta_encoded_len(&d) ||
	    lm_diff_validate(enc, n, ps) != 0)
		__builtin_trap();
	memcpy(b, before, ps);
	if (lm_diff_apply(b, ps, enc, n) != 0 || memcmp(a, b, ps) != 0)
		__builtin_trap();
	lm_delta_free(&d);

	/* Re-encoding the result against the old page reproduces it. */
	if (lm_diff_encode(before, a, ps, enc, sizeof(enc), &n) != 0 ||
	    n > lm_diff_bound(ps) || lm_diff_validate(enc, n, ps) != 0)
		__builtin_trap();
	memcpy(b, before, ps);
	if (lm_diff_apply(b, ps, enc, n) != 0 || memcmp(a, b, ps) != 0)
		__builtin_trap();
	check_lower_paths(diff, len, ps, v, before, a, enc, n);
}

static void walk_diffs(const struct lm_msg *m)
{
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t page, count = 0;
	int rc;

	while ((rc = lm_msg_diffs_next(&m->diffs, &pos, &page, &diff,
				       &len)) == 1) {
		if (len && (diff < m->diffs.data ||
			    diff + len > m->diffs.data + m->diffs.len))
			__builtin_trap();
		check_diff(page, diff, len);
		count++;
	}
	/* The decoder already checked the list's entry headers. */
	if (rc != 0 || count != m->diffs.count)
		__builtin_trap();
}

static void check_round_trip(const uint8_t *data, size_t size,
			     const struct lm_msg *m)
{
	uint8_t *out;
	int rc;

	if (lm_msg_encoded_len(m) != size)
		__builtin_trap();
	out = malloc(size);
	if (!out)
		abort();
	rc = lm_msg_encode(m, out, size);
	if (rc < 0 || (size_t)rc != size || memcmp(out, data, size) != 0)
		__builtin_trap();
	if (lm_msg_encode(m, out, size - 1) != LM_ENOBUFS)
		__builtin_trap();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lm_msg m, small;
	struct lm_msg_pong pong;
	int rc, rc_small, type;

	if (size > MSG_MAX)
		return 0;
	type = lm_msg_type(data, size);
	(void)lm_msg_name(type);
	if (type == LM_MSG_PONG)
		(void)lm_msg_decode_pong(data, size, &pong);

	rc = lm_msg_decode(data, size, &m, notices, NOTICES_MAX);
	rc_small = lm_msg_decode(data, size, &small, few, 1);
	if (rc == 0 && m.nnotices > 1) {
		if (rc_small != LM_ENOBUFS)
			__builtin_trap();
	} else if (rc_small != rc) {
		__builtin_trap();
	}
	if (rc_small != 0)
		check_zeroed(&small);
	if (rc != 0) {
		if (rc != LM_EBADMSG && rc != LM_ETYPE)
			__builtin_trap();
		check_zeroed(&m);
		return 0;
	}
	check_round_trip(data, size, &m);
	if (m.type == LM_MSG_FLUSH)
		walk_diffs(&m);
	return 0;
}
