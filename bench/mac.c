/* Micro-benchmark of the datagram MAC (common/auth.c): lm_auth_sign of
 * one datagram per call, against memcpy of the same bytes measured in the
 * same rounds.
 *
 * Each size is MACed over about 32 MB per round, the datagram hot in the
 * cache (this measures the hash, not memory); medians over ROUNDS rounds in
 * GB/s and ns per datagram, with min and max, and the median of the
 * per-round ratios.
 *   usage: mac [-r ROUNDS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "wire.h"

#define BYTES_PER_ROUND (32u << 20)
#define MAX_ROUNDS 64

static const size_t sizes[] = { 64, 1024, 1400, 4096, 16384, 65000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

enum way { WAY_MEMCPY, WAY_MAC, WAY_COUNT };

static const uint8_t bench_key[LM_KEY_BYTES] = "lemuria mac bench key 0123456";

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One round of one way: GB/s over `calls` datagrams of `len` bytes. */
static double run_way(enum way w, lm_auth *auth, uint8_t *dg, uint8_t *copy,
		      size_t len, unsigned calls)
{
	double t = now_s();

	for (unsigned i = 0; i < calls; i++) {
		lm_put64(dg + 28, i + 1); /* a fresh stamp, as on the wire */
		if (w == WAY_MEMCPY) {
			memcpy(copy, dg, len);
			__asm__ volatile("" : : "r"(copy) : "memory");
		} else {
			lm_auth_sign(auth, dg, len);
		}
	}
	t = now_s() - t;
	return (double)len * calls / t / 1e9;
}

int main(int argc, char **argv)
{
	static double gbs[NSIZES][WAY_COUNT][MAX_ROUNDS];
	static double ratio[NSIZES][MAX_ROUNDS];
	lm_auth *auth;
	uint8_t *dg, *copy;
	int rounds = 7, opt;

	while ((opt = getopt(argc, argv, "r:h")) != -1) {
		if (opt == 'r' && atoi(optarg) >= 1 && atoi(optarg) <= MAX_ROUNDS) {
			rounds = atoi(optarg);
		} else {
			fprintf(opt == 'h' ? stdout : stderr,
				"usage: mac [-r ROUNDS (1..%d)]\n", MAX_ROUNDS);
			return opt == 'h' ? 0 : 2;
		}
	}
	dg = calloc(1, LM_WIRE_MAX_DATAGRAM + LM_WIRE_MAC_SIZE);
	copy = malloc(LM_WIRE_MAX_DATAGRAM + LM_WIRE_MAC_SIZE);
	auth = lm_auth_create(bench_key);
	if (!dg || !copy || !auth) {
		fprintf(stderr, "mac: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < LM_WIRE_MAX_DATAGRAM; i++)
		dg[i] = (uint8_t)(i * 13);
	for (int r = 0; r < rounds; r++) {
		for (size_t s = 0; s < NSIZES; s++) {
			unsigned calls = (unsigned)(BYTES_PER_ROUND / sizes[s]);

			for (int w = 0; w < WAY_COUNT; w++)
				gbs[s][w][r] = run_way((enum way)w, auth, dg,
						       copy, sizes[s], calls);
			ratio[s][r] = gbs[s][WAY_MEMCPY][r] /
				      gbs[s][WAY_MAC][r];
		}
	}
	printf("Datagram MAC (%s): median (min-max) of %d rounds\n\n",
	       lm_auth_construction(auth), rounds);
	printf("| datagram | memcpy, GB/s | MAC, GB/s | MAC, ns a datagram "
	       "| MAC / memcpy (time) |\n");
	printf("| --- | --- | --- | --- | --- |\n");
	for (size_t s = 0; s < NSIZES; s++) {
		double *v;
		double m;

		printf("| %zu B |", sizes[s]);
		for (int w = 0; w < WAY_COUNT; w++) {
			v = gbs[s][w];
			m = median(v, rounds);
			printf(" %.2f (%.2f-%.2f) |", m, v[0], v[rounds - 1]);
		}
		/* v is the MAC's, sorted: the fastest round first */
		printf(" %.0f (%.0f-%.0f) |", (double)sizes[s] / m,
		       (double)sizes[s] / v[rounds - 1],
		       (double)sizes[s] / v[0]);
		printf(" %.1f |\n", median(ratio[s], rounds));
	}
	lm_auth_destroy(auth);
	free(dg);
	free(copy);
	return 0;
}
