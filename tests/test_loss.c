/* The loss injector: rates, determinism, reordering, delay bounds and the
 * capacity bound. */
#include "unit.h"

#include <stdbool.h>
#include <string.h>

#include "loss.h"

static void push_index(lm_loss *f, uint32_t i, uint64_t now)
{
	uint8_t dg[8] = {0};

	memcpy(dg, &i, sizeof(i));
	lm_loss_push(f, i % 3, dg, sizeof(dg), now);
}

/* Pops everything due; returns how many, indices into out. */
static size_t pop_all(lm_loss *f, uint64_t now, uint32_t *out, size_t max)
{
	uint8_t buf[64];
	uint32_t peer, i;
	size_t n = 0, len;

	while (lm_loss_pop(f, now, &peer, buf, sizeof(buf), &len)) {
		CU_ASSERT_EQUAL(len, 8);
		memcpy(&i, buf, sizeof(i));
		CU_ASSERT_EQUAL(peer, i % 3);
		if (n < max)
			out[n] = i;
		n++;
	}
	return n;
}

static void test_cfg_active(void)
{
	struct lm_fault_cfg c = {0};

	CU_ASSERT_FALSE(lm_loss_active(&c));
	CU_ASSERT_FALSE(lm_loss_active(NULL));
	c.seed = 5;
	CU_ASSERT_FALSE(lm_loss_active(&c));
	c.delay = 0.5; /* no delay_max: nothing to do */
	CU_ASSERT_FALSE(lm_loss_active(&c));
	c.delay_max_us = 10;
	CU_ASSERT_TRUE(lm_loss_active(&c));
	c = (struct lm_fault_cfg){.dup = 0.01};
	CU_ASSERT_TRUE(lm_loss_active(&c));
}

/* start_max: one draw per cluster, the same for every process of it
 * (they compute it apart), within the bound, and not the same for all
 * clusters (else no cluster would be later than another). */
static void test_start_delay_per_cluster(void)
{
	struct lm_fault_cfg c = { .seed = 11, .start_max_us = 300000 };
	uint32_t d[8], differ = 0;

	CU_ASSERT_EQUAL(lm_loss_start_delay_us(NULL, 0), 0);
	for (uint32_t k = 0; k < 8; k++) {
		d[k] = lm_loss_start_delay_us(&c, k);
		CU_ASSERT(d[k] <= c.start_max_us);
		CU_ASSERT_EQUAL(lm_loss_start_delay_us(&c, k), d[k]);
		differ += k && d[k] != d[0];
	}
	CU_ASSERT(differ > 0);
	CU_ASSERT_FALSE(lm_loss_active(&c)); /* no datagram is touched */
	c.start_max_us = 0;
	CU_ASSERT_EQUAL(lm_loss_start_delay_us(&c, 3), 0);
}

static void test_passthrough_keeps_order(void)
{
	struct lm_fault_cfg c = {.seed = 1};
	lm_loss *f = lm_loss_create(&c, 8);
	uint32_t out[100];

	for (uint32_t i = 0; i < 100; i++)
		push_index(f, i, 10);
	CU_ASSERT_EQUAL(lm_loss_next_deadline(f), 0);
	CU_ASSERT_EQUAL(pop_all(f, 10, out, 100), 100);
	for (uint32_t i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(out[i], i);
	CU_ASSERT_EQUAL(lm_loss_next_deadline(f), UINT64_MAX);
	CU_ASSERT_EQUAL(lm_loss_stats(f)->pushed, 100);
	lm_loss_destroy(f);
}

static void test_drop_all_and_rate(void)
{
	struct lm_fault_cfg c = {.drop = 1, .seed = 3};
	lm_loss *f = lm_loss_create(&c, 8);
	uint32_t out[1];
	size_t n;

	for (uint32_t i = 0; i < 100; i++)
		push_index(f, i, 0);
	CU_ASSERT_EQUAL(pop_all(f, 1000000, out, 1), 0);
	CU_ASSERT_EQUAL(lm_loss_stats(f)->dropped, 100);
	lm_loss_destroy(f);

	c.drop = 0.1;
	f = lm_loss_create(&c, 8);
	for (uint32_t i = 0; i < 10000; i++)
		push_index(f, i, 0);
	n = pop_all(f, 0, out, 1);
	CU_ASSERT(n >= 8700 && n <= 9300);
	CU_ASSERT_EQUAL(lm_loss_stats(f)->dropped + n, 10000);
	lm_loss_destroy(f);
}

static void test_dup_rate(void)
{
	struct lm_fault_cfg c = {.dup = 0.2, .seed = 4};
	lm_loss *f = lm_loss_create(&c, 8);
	uint32_t out[1];
	size_t n;

	for (uint32_t i = 0; i < 5000; i++)
		push_index(f, i, 0);
	n = pop_all(f, 0, out, 1);
	CU_ASSERT_EQUAL(n, 5000 + lm_loss_stats(f)->duplicated);
	CU_ASSERT(lm_loss_stats(f)->duplicated >= 800 &&
		  lm_loss_stats(f)->duplicated <= 1200);
	lm_loss_destroy(f);
}

/* Pushes and pops on a fixed schedule; fills out with what came out. */
static size_t run_schedule(uint64_t seed, uint32_t *out, size_t max)
{
	struct lm_fault_cfg c = {
	    .drop = 0.2,
	    .dup = 0.2,
	    .reorder = 0.2,
	    .delay = 0.2,
	    .delay_max_us = 500,
	    .seed = seed,
	};
	lm_loss *f = lm_loss_create(&c, 32);
	size_t n = 0;

	for (uint32_t i = 0; i < 1000; i++) {
		push_index(f, i, (uint64_t)i * 10);
		n += pop_all(f, (uint64_t)i * 10, out + (n < max ? n : max),
			     n < max ? max - n : 0);
	}
	n += pop_all(f, 1000000, out + (n < max ? n : max),
		     n < max ? max - n : 0);
	lm_loss_destroy(f);
	return n;
}

static void test_same_seed_same_sequence(void)
{
	static uint32_t a[4000], b[4000], c[4000];
	size_t na = run_schedule(42, a, 4000);
	size_t nb = run_schedule(42, b, 4000);
	size_t nc = run_schedule(43, c, 4000);

	CU_ASSERT(na > 0 && na <= 4000);
	CU_ASSERT_EQUAL(na, nb);
	CU_ASSERT(memcmp(a, b, na * sizeof(a[0])) == 0);
	CU_ASSERT(na != nc || memcmp(a, c, na * sizeof(a[0])) != 0);
}

static void test_reorder_reorders(void)
{
	struct lm_fault_cfg c = {.reorder = 0.3, .seed = 7};
	lm_loss *f = lm_loss_create(&c, 64);
	uint32_t out[200];
	bool seen[200] = {false};
	size_t n, inversions = 0;

	for (uint32_t i = 0; i < 200; i++)
		push_index(f, i, 100);
	n = pop_all(f, 100, out, 200);
	CU_ASSERT(n < 200);
	/* The rest leaves after the 2 ms bound. */
	CU_ASSERT(lm_loss_next_deadline(f) <= 2100);
	n += pop_all(f, 2100, out + n, 200 - n);
	CU_ASSERT_EQUAL_FATAL(n, 200);
	for (size_t i = 0; i < n; i++) {
		CU_ASSERT_FALSE(seen[out[i]]);
		seen[out[i]] = true;
		if (i && out[i] < out[i - 1])
			inversions++;
	}
	CU_ASSERT(inversions > 10);
	CU_ASSERT(lm_loss_stats(f)->reordered > 30);
	lm_loss_destroy(f);
}

static void test_delay_within_bound(void)
{
	struct lm_fault_cfg c = {.delay = 1, .delay_max_us = 5000, .seed = 8};
	lm_loss *f = lm_loss_create(&c, 256);
	uint32_t out[100];
	size_t total = 0, early = 0;

	for (uint32_t i = 0; i < 100; i++)
		push_index(f, i, 1000);
	CU_ASSERT_EQUAL(lm_loss_stats(f)->delayed, 100);
	for (uint64_t t = 1000; t <= 6000; t += 100) {
		size_t n = pop_all(f, t, out, 100);

		if (t < 3500)
			early += n;
		total += n;
		CU_ASSERT(lm_loss_next_deadline(f) >= t);
	}
	CU_ASSERT_EQUAL(total, 100);
	/* Spread over the interval, not all at either end. */
	CU_ASSERT(early > 20 && early < 80);
	CU_ASSERT_EQUAL(lm_loss_next_deadline(f), UINT64_MAX);
	lm_loss_destroy(f);
}

static void test_capacity_bound(void)
{
	struct lm_fault_cfg c = {
	    .delay = 1,
	    .delay_max_us = 1000000,
	    .seed = 9,
	};
	lm_loss *f = lm_loss_create(&c, 10);
	uint32_t out[100];
	uint8_t small[4];
	uint32_t peer;
	size_t len;

	for (uint32_t i = 0; i < 100; i++)
		push_index(f, i, 0);
	CU_ASSERT_EQUAL(lm_loss_stats(f)->held_max, 10);
	CU_ASSERT_EQUAL(lm_loss_stats(f)->delayed, 10);
	/* Beyond the bound they went straight through. */
	CU_ASSERT_EQUAL(pop_all(f, 0, out, 100), 90);
	CU_ASSERT_EQUAL(pop_all(f, 1000000, out, 100), 10);
	/* A datagram larger than the caller's buffer is dropped. */
	c = (struct lm_fault_cfg){.seed = 1};
	lm_loss_destroy(f);
	f = lm_loss_create(&c, 10);
	push_index(f, 1, 0);
	CU_ASSERT_EQUAL(lm_loss_pop(f, 0, &peer, small, sizeof(small), &len),
			0);
	CU_ASSERT_EQUAL(lm_loss_stats(f)->dropped, 1);
	/* Held datagrams are freed on destroy (ASan checks). */
	c = (struct lm_fault_cfg){.delay = 1, .delay_max_us = 100, .seed = 2};
	lm_loss_destroy(f);
	f = lm_loss_create(&c, 10);
	for (uint32_t i = 0; i < 20; i++)
		push_index(f, i, 0);
	lm_loss_destroy(f);
	lm_loss_destroy(NULL);
}

LM_TEST_SUITE("loss", LM_TEST(test_cfg_active),
	      LM_TEST(test_start_delay_per_cluster),
	      LM_TEST(test_passthrough_keeps_order),
	      LM_TEST(test_drop_all_and_rate), LM_TEST(test_dup_rate),
	      LM_TEST(test_same_seed_same_sequence),
	      LM_TEST(test_reorder_reorders), LM_TEST(test_delay_within_bound),
	      LM_TEST(test_capacity_bound))
