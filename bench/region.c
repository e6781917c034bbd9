/* Micro-benchmark of write notices in the client's region
 * (liblemuria/region.c, protect.c): lm_region_apply_notices invalidating 2048 valid
 * pages, with one mprotect per page (as before batching) and with one per
 * run of adjacent pages, for page sets of different shapes.
 *
 * Each round makes the pages valid again (read faults, not timed) and
 * times one call per set and mode; the two modes take turns within a
 * round.  The median over ROUNDS rounds is printed in µs per call, with
 * the median of the per-round ratios.   usage: region [--csv] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lm_error.h"
#include "proto.h"
#include "region.h"

#define BASE 0x520000000000ull
#define PAGE 4096u
#define NPAGES 4096u  /* a 16 MiB region */
#define NOTICES 2048u /* pages each notice list invalidates */
#define ROUNDS 21
#define MODES 2 /* 0: one mprotect per page, 1: batched */

struct shape {
	const char *name;
	void (*pages)(uint32_t *out); /* fills NOTICES distinct pages */
};

static uint32_t cur_version = 1; /* what the fake home serves */

static int fake_fetch(void *ctx, uint32_t page, void *dst, uint32_t *version)
{
	(void)ctx;
	(void)page;
	((uint8_t *)dst)[0] = (uint8_t)cur_version;
	*version = cur_version;
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t seed = 12345;

static void shuffle(uint32_t *v, uint32_t n)
{
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t j, t;

		seed = seed * 1103515245u + 12345u;
		j = (seed >> 8) % (i + 1);
		t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static void contiguous(uint32_t *out)
{
	for (uint32_t i = 0; i < NOTICES; i++)
		out[i] = i;
}

static void contiguous_shuffled(uint32_t *out)
{
	contiguous(out);
	shuffle(out, NOTICES);
}

/* 128 runs of 16 pages, 16 apart: blocks of a matrix */
static void runs_of_16(uint32_t *out)
{
	for (uint32_t i = 0; i < NOTICES; i++)
		out[i] = (i / 16) * 32 + i % 16;
}

/* every other page, in random order: no two adjacent */
static void scattered(uint32_t *out)
{
	for (uint32_t i = 0; i < NOTICES; i++)
		out[i] = 2 * i;
	shuffle(out, NOTICES);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	return v[n / 2];
}

static struct lm_region_stats stats(void)
{
	struct lm_region_stats s;

	lm_region_stats(&s);
	return s;
}

/* Makes the pages valid, then times one notice list over them; *calls
 * gets the mprotect calls it made.  Returns ns. */
static double time_apply(const uint32_t *pages, struct lm_notice *n,
			 int batched, uint64_t *calls)
{
	struct lm_region_stats s0, s1;
	uint64_t t0, t1;
	uint32_t sum = 0;
	int rc;

	for (uint32_t i = 0; i < NOTICES; i++) {
		uintptr_t addr = (uintptr_t)(BASE + (uint64_t)pages[i] * PAGE);

		sum += *(const volatile uint8_t *)addr;
		n[i] = (struct lm_notice){ pages[i], cur_version + 1,
					   cur_version, LM_WRITER_MANY,
					   LM_WRITER_MANY };
	}
	if (sum != (uint8_t)cur_version * NOTICES) {
		fprintf(stderr, "bench/region: pages not fetched\n");
		exit(1);
	}
	lm_region_set_batching(batched);
	s0 = stats();
	t0 = now_ns();
	rc = lm_region_apply_notices(n, NOTICES, 0);
	t1 = now_ns();
	s1 = stats();
	cur_version++;
	if (rc != 0 || s1.invalidations - s0.invalidations != NOTICES) {
		fprintf(stderr, "bench/region: notices not applied: %s\n",
			lm_strerror(rc));
		exit(1);
	}
	*calls = s1.mprotects - s0.mprotects;
	return (double)(t1 - t0);
}

int main(int argc, char **argv)
{
	static const struct shape shapes[] = {
		{ "contiguous", contiguous },
		{ "contiguous_shuffled", contiguous_shuffled },
		{ "runs_of_16", runs_of_16 },
		{ "scattered", scattered },
	};
	enum { NSHAPES = sizeof(shapes) / sizeof(shapes[0]) };
	const struct lm_region_backend be = { .fetch = fake_fetch };
	int csv = argc > 1 && strcmp(argv[1], "--csv") == 0;
	static uint32_t pages[NSHAPES][NOTICES];
	static struct lm_notice n[NOTICES];
	static double ns[NSHAPES][MODES][ROUNDS];
	uint64_t calls[NSHAPES][MODES];
	char err[256];

	if (lm_region_init(BASE, (uint64_t)NPAGES * PAGE, PAGE, &be, NULL,
			   err, sizeof(err)) != 0) {
		fprintf(stderr, "bench/region: %s\n", err);
		return 1;
	}
	for (int s = 0; s < NSHAPES; s++)
		shapes[s].pages(pages[s]);
	for (int s = 0; s < NSHAPES; s++) /* warm up: page tables, caches */
		for (int m = 0; m < MODES; m++)
			time_apply(pages[s], n, m, &calls[s][m]);
	for (int r = 0; r < ROUNDS; r++)
		for (int s = 0; s < NSHAPES; s++)
			for (int k = 0; k < MODES; k++) {
				int m = (r + k) % MODES; /* who goes first */

				ns[s][m][r] = time_apply(pages[s], n, m,
							 &calls[s][m]);
			}
	lm_region_set_batching(1);
	lm_region_fini();

	if (csv)
		printf("pages,per_page_us,per_page_calls,batched_us,"
		       "batched_calls,ratio\n");
	else
		printf("%-20s %12s %6s %12s %6s %7s   (%u notices, median "
		       "of %d)\n", "pages", "per page µs", "calls",
		       "batched µs", "calls", "ratio", NOTICES, ROUNDS);
	for (int s = 0; s < NSHAPES; s++) {
		double ratio[ROUNDS], before, after;

		for (int r = 0; r < ROUNDS; r++)
			ratio[r] = ns[s][0][r] / ns[s][1][r];
		before = median(ns[s][0], ROUNDS) / 1000;
		after = median(ns[s][1], ROUNDS) / 1000;
		printf(csv ? "%s,%.1f,%llu,%.1f,%llu,%.2f\n" :
			     "%-20s %12.1f %6llu %12.1f %6llu %7.2f\n",
		       shapes[s].name, before, (unsigned long long)calls[s][0],
		       after, (unsigned long long)calls[s][1],
		       median(ratio, ROUNDS));
	}
	return 0;
}
