/* Micro-benchmark of the datagram MAC (common/auth.c): the GMAC of one
 * datagram per call, by libsodium alone, OpenSSL alone and as Lemuria
 * computes it (gmac.c where the CPU has VPCLMULQDQ, else libsodium and
 * OpenSSL from LM_AUTH_BULK bytes on), against memcpy of the same bytes
 * measured in the same run.
 *
 * Each size is MACed over about 32 MB per round, the datagram hot in the
 * cache (this measures the hash, not memory); medians over ROUNDS rounds in
 * GB/s, with min and max, and the median of the per-round ratios.
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

static const size_t sizes[] = { 64, 1400, 4096, 16384, 65000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

enum way { WAY_MEMCPY, WAY_SODIUM, WAY_OPENSSL, WAY_LEMURIA, WAY_COUNT };
static const char *const way_names[WAY_COUNT] = { "memcpy", "libsodium",
						  "OpenSSL", "lemuria" };

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
static double run_way(enum way w, lm_auth *const auth[WAY_COUNT],
		      uint8_t *dg, uint8_t *copy, size_t len, unsigned calls)
{
	double t = now_s();

	for (unsigned i = 0; i < calls; i++) {
		lm_put64(dg + 28, i + 1); /* a fresh stamp, as on the wire */
		if (w == WAY_MEMCPY) {
			memcpy(copy, dg, len);
			__asm__ volatile("" : : "r"(copy) : "memory");
		} else {
			lm_auth_sign(auth[w], dg, len);
		}
	}
	t = now_s() - t;
	return (double)len * calls / t / 1e9;
}

int main(int argc, char **argv)
{
	static double gbs[NSIZES][WAY_COUNT][MAX_ROUNDS];
	static double ratio[NSIZES][MAX_ROUNDS];
	lm_auth *auth[WAY_COUNT] = { NULL };
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
	for (int w = WAY_SODIUM; w < WAY_COUNT; w++)
		auth[w] = lm_auth_create(bench_key);
	if (!dg || !copy || !auth[WAY_SODIUM] || !auth[WAY_OPENSSL] ||
	    !auth[WAY_LEMURIA]) {
		fprintf(stderr, "mac: out of memory\n");
		return 1;
	}
	lm_auth_set_engine(auth[WAY_SODIUM], LM_AUTH_SODIUM);
	if (!lm_auth_set_engine(auth[WAY_OPENSSL], LM_AUTH_OPENSSL))
		printf("(no AES-NI: the OpenSSL column is libsodium's)\n");
	for (size_t i = 0; i < LM_WIRE_MAX_DATAGRAM; i++)
		dg[i] = (uint8_t)(i * 13);
	for (int r = 0; r < rounds; r++) {
		for (size_t s = 0; s < NSIZES; s++) {
			unsigned calls = (unsigned)(BYTES_PER_ROUND / sizes[s]);

			for (int w = 0; w < WAY_COUNT; w++)
				gbs[s][w][r] = run_way((enum way)w, auth, dg,
						       copy, sizes[s], calls);
			ratio[s][r] = gbs[s][WAY_LEMURIA][r] /
				      gbs[s][WAY_SODIUM][r];
		}
	}
	printf("Datagram MAC (%s), GB/s: median (min-max) of %d rounds\n\n",
	       lm_auth_construction(auth[WAY_LEMURIA]), rounds);
	printf("| datagram | %s | %s | %s | %s | lemuria / libsodium |\n",
	       way_names[0], way_names[1], way_names[2], way_names[3]);
	printf("| --- | --- | --- | --- | --- | --- |\n");
	for (size_t s = 0; s < NSIZES; s++) {
		printf("| %zu B |", sizes[s]);
		for (int w = 0; w < WAY_COUNT; w++) {
			double *v = gbs[s][w];
			double m = median(v, rounds);

			printf(" %.2f (%.2f-%.2f) |", m, v[0], v[rounds - 1]);
		}
		printf(" %.2f |\n", median(ratio[s], rounds));
	}
	for (int w = WAY_SODIUM; w < WAY_COUNT; w++)
		lm_auth_destroy(auth[w]);
	free(dg);
	free(copy);
	return 0;
}
