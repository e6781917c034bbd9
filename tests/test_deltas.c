/* lemuriad/deltas.c on its own: a page's delta from open through
 * registering to sealed, the merge of a new registration into the sealed
 * delta or the push of the older one (I1), PULLs, the overlay of what
 * the home lacks on a fetched page, data sent with the registration
 * (eager relay, adaptive after a PULL), and the buffers kept for reuse. */
#include "unit.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "deltas.h"
#include "diff.h"
#include "diff_util.h"
#include "lm_error.h"
#include "proto.h"

#define DPAGE 4096u
#define DPAGES 64u
#define CLUSTER 3u

/* The REGISTERs a lm_deltas emitted, copied. */
#define REGS_MAX 8
#define REG_NOTES_MAX 16
static struct {
	struct lm_notice notes[REG_NOTES_MAX];
	uint32_t nnotes;
	uint32_t ndiffs;
} regs[REGS_MAX];
static int nregs;

static void capture_register(void *ctx, const struct lm_msg *reg)
{
	(void)ctx;
	CU_ASSERT_EQUAL(reg->type, LM_MSG_REGISTER);
	if (nregs >= REGS_MAX || reg->nnotices > REG_NOTES_MAX) {
		CU_FAIL("more REGISTERs than the test expects");
		return;
	}
	memcpy(regs[nregs].notes, reg->notices,
	       reg->nnotices * sizeof(*reg->notices));
	regs[nregs].nnotes = reg->nnotices;
	regs[nregs].ndiffs = reg->diffs.count;
	nregs++;
}

static void ignore_register(void *ctx, const struct lm_msg *reg)
{
	(void)ctx;
	(void)reg;
}

static lm_deltas *deltas(bool adaptive)
{
	lm_deltas *d = lm_deltas_create(DPAGE, DPAGES, CLUSTER, adaptive,
					capture_register, NULL);

	nregs = 0;
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	return d;
}

/* Client `rank` wrote n bytes `val` at `off` of `page`. */
static void write_bytes(lm_deltas *d, uint32_t page, uint32_t rank,
			size_t off, size_t n, uint8_t val)
{
	uint8_t diff[16 + DPAGE];
	size_t dl = test_run_header(diff, off, n);
	struct lm_delta *x = lm_deltas_open(d, page, rank);

	CU_ASSERT_PTR_NOT_NULL_FATAL(x);
	memset(diff + dl, val, n);
	lm_delta_add_valid_diff(x, diff, dl + n);
}

/* The home's answer to REGISTER i: each of its pages at `version`. */
static void answer(lm_deltas *d, int i, uint32_t version)
{
	struct lm_notice n[REG_NOTES_MAX];

	for (uint32_t k = 0; k < regs[i].nnotes; k++) {
		n[k] = regs[i].notes[k];
		n[k].version = version;
	}
	lm_deltas_registered(d, n, regs[i].nnotes);
}

/* Client `rank`'s bytes of `page` registered and sealed at `version`. */
static void write_sealed(lm_deltas *d, uint32_t page, uint32_t rank,
			 size_t off, size_t n, uint8_t val, uint32_t version)
{
	int i = nregs;

	write_bytes(d, page, rank, off, n, val);
	lm_deltas_seal(d, false, false);
	CU_ASSERT_EQUAL_FATAL(nregs, i + 1);
	answer(d, i, version);
}

/* The PULL of `page` at `version` applied to a zeroed page; its status. */
static int pull_into(lm_deltas *d, uint32_t page, uint32_t version,
		     uint8_t *pg)
{
	uint8_t out[2 * DPAGE];
	size_t len = 0;
	int rc = lm_deltas_pull(d, page, version, out, sizeof(out), &len);

	memset(pg, 0, DPAGE);
	if (rc == 0)
		lm_diff_apply_valid(pg, out, len);
	return rc;
}

/* Lazy relay: sealing registers each open delta as an entry naming the
 * writer and our cluster, without data; the answer seals it at the
 * version the home gave, from which a PULL takes it, once. */
static void test_deltas_register_seal_and_pull(void)
{
	lm_deltas *d = deltas(false);
	uint8_t pg[DPAGE];

	write_bytes(d, 5, 2, 100, 8, 0xab);
	CU_ASSERT_EQUAL(lm_deltas_dirty(d), 1);
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 1);
	CU_ASSERT_TRUE(lm_deltas_has(d, 5));
	CU_ASSERT_FALSE(lm_deltas_has(d, 6));
	CU_ASSERT_EQUAL(lm_deltas_seal(d, false, false), 1);
	CU_ASSERT_EQUAL(lm_deltas_dirty(d), 0);
	CU_ASSERT_EQUAL_FATAL(nregs, 1);
	CU_ASSERT_EQUAL_FATAL(regs[0].nnotes, 1);
	CU_ASSERT_EQUAL(regs[0].ndiffs, 0);
	CU_ASSERT_EQUAL(regs[0].notes[0].page, 5);
	CU_ASSERT_EQUAL(regs[0].notes[0].base, LM_REG_NEW);
	CU_ASSERT_EQUAL(regs[0].notes[0].writer, 2);
	CU_ASSERT_EQUAL(regs[0].notes[0].wcluster, CLUSTER);
	answer(d, 0, 7);
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_registered, 1);
	CU_ASSERT_EQUAL(pull_into(d, 5, 6, pg), LM_ENOENT); /* not that one */
	CU_ASSERT_EQUAL(pull_into(d, 5, 7, pg), 0);
	CU_ASSERT_EQUAL(pg[99], 0);
	CU_ASSERT_EQUAL(pg[100], 0xab);
	CU_ASSERT_EQUAL(pg[107], 0xab);
	CU_ASSERT_EQUAL(pg[108], 0);
	CU_ASSERT_FALSE(lm_deltas_has(d, 5));
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 0);
	CU_ASSERT_EQUAL(pull_into(d, 5, 7, pg), LM_ENOENT); /* pulled once */
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_pulled, 1);
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_pull_missing, 2);
	lm_deltas_destroy(d);
}

/* Page 9: rank 0's delta registered and sealed at version 3, then rank
 * 1's registered too (REGISTER 1), its answer not yet in. */
static void register_twice(lm_deltas *d)
{
	write_sealed(d, 9, 0, 0, 4, 0x11, 3);
	write_bytes(d, 9, 1, 10, 4, 0x22);
	lm_deltas_seal(d, false, false);
}

/* A second registration of a page whose sealed delta is unpulled names
 * the sealed version; an answer one above it means the home merged the
 * two (nobody wrote in between), and one PULL then takes both. */
static void test_deltas_merge_when_nobody_wrote_between(void)
{
	lm_deltas *d = deltas(false);
	uint8_t pg[DPAGE];

	register_twice(d);
	CU_ASSERT_EQUAL_FATAL(nregs, 2);
	CU_ASSERT_EQUAL(regs[1].notes[0].base, LM_REG_NEW);
	CU_ASSERT_EQUAL(regs[1].notes[0].version, 3); /* merge candidate */
	answer(d, 1, 4);
	CU_ASSERT_EQUAL(nregs, 2); /* nothing pushed */
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_merged, 1);
	CU_ASSERT_EQUAL(pull_into(d, 9, 3, pg), LM_ENOENT);
	CU_ASSERT_EQUAL(pull_into(d, 9, 4, pg), 0);
	CU_ASSERT_EQUAL(pg[0], 0x11);
	CU_ASSERT_EQUAL(pg[10], 0x22);
	lm_deltas_destroy(d);
}

/* I1: when another cluster wrote the page in between (the answer skips
 * a version), the older sealed delta is pushed home with its data and
 * the new one is sealed apart: at most one sealed delta per page. */
static void test_deltas_older_pushed_when_another_wrote(void)
{
	lm_deltas *d = deltas(false);
	uint8_t pg[DPAGE];

	register_twice(d);
	answer(d, 1, 6);
	CU_ASSERT_EQUAL_FATAL(nregs, 3);
	CU_ASSERT_EQUAL_FATAL(regs[2].nnotes, 1);
	CU_ASSERT_EQUAL(regs[2].notes[0].base, LM_REG_PUSH);
	CU_ASSERT_EQUAL(regs[2].notes[0].version, 3);
	CU_ASSERT_EQUAL(regs[2].ndiffs, 1);
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_pushed, 1);
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_merged, 0);
	CU_ASSERT_EQUAL(pull_into(d, 9, 3, pg), LM_ENOENT); /* pushed */
	CU_ASSERT_EQUAL(pull_into(d, 9, 6, pg), 0);
	CU_ASSERT_EQUAL(pg[0], 0); /* the newer delta alone */
	CU_ASSERT_EQUAL(pg[10], 0x22);
	lm_deltas_destroy(d);
}

/* A fetched page gets what the home's copy at its version lacks: the
 * open delta always, a sealed one only on a copy older than it. */
static void test_deltas_overlay_what_the_home_lacks(void)
{
	lm_deltas *d = deltas(false);
	uint8_t pg[DPAGE];

	write_sealed(d, 4, 0, 0, 2, 0x11, 5);
	write_bytes(d, 4, 1, 20, 2, 0x22);
	memset(pg, 0, sizeof(pg));
	lm_deltas_overlay(d, 4, 4, pg);
	CU_ASSERT_EQUAL(pg[0], 0x11);
	CU_ASSERT_EQUAL(pg[20], 0x22);
	memset(pg, 0, sizeof(pg));
	lm_deltas_overlay(d, 4, 5, pg); /* the home has the sealed one */
	CU_ASSERT_EQUAL(pg[0], 0);
	CU_ASSERT_EQUAL(pg[20], 0x22);
	memset(pg, 0, sizeof(pg));
	lm_deltas_overlay(d, 3, 0, pg); /* no delta of that page */
	CU_ASSERT_EQUAL(pg[0], 0);
	lm_deltas_destroy(d);
}

/* Eager relay (or a spill): the data goes with the registration, which
 * keeps nothing here; with all_sealed, sealed deltas are pushed too. */
static void test_deltas_seal_with_data(void)
{
	lm_deltas *d = deltas(false);
	uint8_t pg[DPAGE];

	write_sealed(d, 1, 0, 0, 2, 0x11, 2);
	write_bytes(d, 7, 3, 0, 2, 0x33);
	CU_ASSERT_TRUE(lm_deltas_seal(d, true, true) >= 1);
	CU_ASSERT_EQUAL_FATAL(nregs, 2);
	CU_ASSERT_EQUAL_FATAL(regs[1].nnotes, 2);
	CU_ASSERT_EQUAL(regs[1].ndiffs, 2);
	CU_ASSERT_EQUAL(regs[1].notes[0].page, 7);
	CU_ASSERT_EQUAL(regs[1].notes[0].base, LM_REG_DATA);
	CU_ASSERT_EQUAL(regs[1].notes[1].page, 1);
	CU_ASSERT_EQUAL(regs[1].notes[1].base, LM_REG_PUSH);
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_sent_data, 1);
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_pushed, 1);
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 0);
	CU_ASSERT_EQUAL(pull_into(d, 1, 2, pg), LM_ENOENT);
	lm_deltas_destroy(d);
}

/* Adaptive relay: once a home pulled a page's delta (another cluster
 * reads it), its next LM_DELTAS_SHARED_SENDS registrations carry their
 * data; then it goes lazy again. */
static void test_deltas_adaptive_after_a_pull(void)
{
	lm_deltas *d = deltas(true);
	uint8_t pg[DPAGE];
	int i;

	write_sealed(d, 2, 0, 0, 2, 0x11, 1);
	CU_ASSERT_EQUAL(pull_into(d, 2, 1, pg), 0);
	for (i = 0; i < LM_DELTAS_SHARED_SENDS; i++) {
		write_bytes(d, 2, 0, 0, 2, (uint8_t)i);
		nregs = 0;
		lm_deltas_seal(d, false, false);
		CU_ASSERT_EQUAL_FATAL(nregs, 1);
		CU_ASSERT_EQUAL(regs[0].notes[0].base, LM_REG_DATA);
	}
	write_bytes(d, 2, 0, 0, 2, 0x55);
	nregs = 0;
	lm_deltas_seal(d, false, false);
	CU_ASSERT_EQUAL_FATAL(nregs, 1);
	CU_ASSERT_EQUAL(regs[0].notes[0].base, LM_REG_NEW);
	CU_ASSERT_EQUAL(lm_deltas_stats(d)->deltas_sent_shared,
			LM_DELTAS_SHARED_SENDS);
	lm_deltas_destroy(d);
}

/* A new run drops every delta; nothing is emitted for them. */
static void test_deltas_reset_drops_all(void)
{
	lm_deltas *d = deltas(false);

	write_bytes(d, 1, 0, 0, 2, 0x11);
	write_bytes(d, 2, 0, 0, 2, 0x22);
	lm_deltas_reset(d);
	CU_ASSERT_EQUAL(lm_deltas_dirty(d), 0);
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 0);
	CU_ASSERT_FALSE(lm_deltas_has(d, 1));
	CU_ASSERT_EQUAL(lm_deltas_seal(d, false, false), 0);
	CU_ASSERT_EQUAL(nregs, 0);
	lm_deltas_destroy(d);
	lm_deltas_destroy(NULL);
}

/* Freed delta buffers are kept up to the number asked for and taken by
 * the next deltas empty and zeroed, as new ones: nothing of a page's
 * earlier bytes goes out with another page's delta. */
static void test_delta_buffers_kept_for_reuse(void)
{
	lm_deltas *d = lm_deltas_create(DPAGE, 64, 0, false, ignore_register,
					NULL);
	uint8_t diff[16 + DPAGE], out[2 * DPAGE];
	size_t dl, ol = 1;
	struct lm_delta *x;
	int stale = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	lm_deltas_keep_spares(d, 2);
	dl = test_run_header(diff, 0, DPAGE);
	memset(diff + dl, 0xc3, DPAGE);
	for (uint32_t page = 1; page <= 3; page++) {
		x = lm_deltas_open(d, page, 0);
		CU_ASSERT_PTR_NOT_NULL_FATAL(x);
		lm_delta_add_valid_diff(x, diff, dl + DPAGE);
	}
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 3);
	lm_deltas_reset(d); /* all three freed: two kept */
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 0);
	CU_ASSERT_EQUAL(lm_deltas_spares(d), 2);
	x = lm_deltas_open(d, 9, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(x);
	CU_ASSERT_EQUAL(lm_deltas_spares(d), 1);
	CU_ASSERT_EQUAL(lm_deltas_buffers(d), 1);
	CU_ASSERT_EQUAL(x->dirty, 0);
	for (size_t i = 0; i < DPAGE; i++)
		stale += x->bytes[i] != 0;
	CU_ASSERT_EQUAL(stale, 0);
	/* one byte written: its group goes out with zeros, not 0xc3 */
	dl = test_run_header(diff, 100, 1);
	diff[dl] = 0x11;
	lm_delta_add_valid_diff(x, diff, dl + 1);
	CU_ASSERT_EQUAL(lm_delta_encode(x, out, sizeof(out), &ol), 0);
	for (size_t i = 0; i < ol; i++)
		stale += out[i] == 0xc3;
	CU_ASSERT_EQUAL(stale, 0);
	lm_deltas_keep_spares(d, 0); /* the last kept one is freed */
	CU_ASSERT_EQUAL(lm_deltas_spares(d), 0);
	lm_deltas_destroy(d); /* ASan: nothing leaks, nothing freed twice */
}

LM_TEST_SUITE("deltas",
	LM_TEST(test_deltas_register_seal_and_pull),
	LM_TEST(test_deltas_merge_when_nobody_wrote_between),
	LM_TEST(test_deltas_older_pushed_when_another_wrote),
	LM_TEST(test_deltas_overlay_what_the_home_lacks),
	LM_TEST(test_deltas_seal_with_data),
	LM_TEST(test_deltas_adaptive_after_a_pull),
	LM_TEST(test_deltas_reset_drops_all),
	LM_TEST(test_delta_buffers_kept_for_reuse))
