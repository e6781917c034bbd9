/*
 * SPLASH-2 Radix: parallel least-significant-digit radix sort of integer
 * keys.  Each process owns a slice of the keys and, per digit, counts its
 * digits, takes part in a prefix sum over all processes and moves its keys
 * to their sorted places.  Written for Lemuria in PARMACS m4 macros: the
 * same source builds radix-pthread (macros/pthread.m4) and radix
 * (macros/lemuria.m4).
 *
 * Note for editors: m4 expands macro names anywhere, comments and strings
 * included, so upper-case macro names appear here only as macro calls.
 */

MAIN_ENV

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "splash_util.h"

#define RADIX_DEFAULT_N 262144
#define RADIX_DEFAULT_P 1
#define RADIX_DEFAULT_R 1024
#define RADIX_DEFAULT_M 524288
#define RADIX_MAX_P 1024
#define RADIX_MAX_N (1L << 28)
#define RADIX_MAX_R (1L << 20)
#define RADIX_MAX_M (1L << 31)	/* keys are 32-bit */
#define RADIX_ROW_ALIGN 4096	/* bytes: a process's row starts a page */
#define RADIX_SEED 0x52414449584b4559ULL

/* Four bytes per key, as on the machines SPLASH-2 was written for. */
typedef uint32_t radix_key;

/* Per-process timings, microseconds; filled in at the end of the run. */
struct radix_stats {
	double total;		/* sorting, start to finish */
	double histogram;	/* counting the digits of its own keys */
	double prefix;		/* its share of the prefix sums */
	double permute;		/* moving its keys to their new places */
	double barrier;		/* waiting in barriers between phases */
};

/* Shared state, allocated by main from shared memory. */
struct radix_global {
	struct radix_stats *stats;	/* one per process */
	unsigned long starttime;	/* main started */
	unsigned long rs;	/* process 0 began sorting */
	unsigned long done;	/* process 0 finished its own share */
	unsigned long rf;	/* all processes finished */
	BARDEC(start)
};

/*
 * Set by main before the workers start and only read afterwards: plain
 * globals, as in the SPLASH-2 original, so the runtime must give every
 * process main's values.  The arrays are in shared memory; a row of
 * counts or ranks is row_len longs, padded so that each process's row
 * starts on its own page.
 */
static long num_keys = RADIX_DEFAULT_N;
static long P = RADIX_DEFAULT_P;
static long radix = RADIX_DEFAULT_R;
static long max_key = RADIX_DEFAULT_M;
static long log2_radix;
static long num_digits;		/* passes: digits of the largest key */
static long row_len;
static radix_key *keys[2];	/* pass d: keys[d % 2] to the other */
static long *counts;	/* P rows: keys of each digit value a process has */
static long *ranks;	/* P rows: same value, held by lower processes */
static long *totals;	/* radix: keys of each digit value overall */
static int dostats;
static int test_result;
static int doprint;
static struct radix_global *Global;

/* First key (or digit value) of process p when count items are split as
 * evenly as possible; process p has first(p) .. first(p + 1) - 1. */
static long share_first(long p, long count)
{
	return p * count / P;
}

/* Key i of the input: a stateless hash of i reduced to 0 .. max_key - 1,
 * so each process writes its own keys and the check can regenerate the
 * input instead of keeping a copy. */
static radix_key key_value(long i)
{
	uint64_t z = RADIX_SEED + ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (radix_key)(z % (uint64_t)max_key);
}

/* The array holding the result: each pass moves the keys to the other. */
static radix_key *sorted_keys(void)
{
	return keys[num_digits % 2];
}

static void print_keys(const char *title, const radix_key *k)
{
	long i;

	printf("%s\n", title);
	for (i = 0; i < num_keys; i++)
		printf("%10lu%s", (unsigned long)k[i],
		       i % 8 == 7 || i == num_keys - 1 ? "\n" : "");
}

/*
 * One pass of the sort on digit d: keys move from src to dst, ordered by
 * that digit and, within a digit value, kept in their order in src (so
 * that the passes together sort).  Three phases, each closed by a barrier
 * except the last, whose barrier the caller supplies:
 *
 * 1. each process counts the digit values of its own keys into its row of
 *    counts;
 * 2. each process takes a slice of the digit values and, for each of
 *    them, sums the counts over the processes in rank order: ranks[q][v]
 *    is the number of keys with value v held by processes below q, and
 *    totals[v] the number held by all;
 * 3. each process adds up totals below each value (where that value starts
 *    in dst) and its own ranks, and so knows where its first key of every
 *    value goes; it then moves its keys in order.
 *
 * The prefix sum is split by digit value rather than done by one process,
 * so every process does radix / P of it.
 */
static void sort_pass(long my_id, long d, long *offsets, int timed,
		      struct radix_stats *st)
{
	const radix_key *src = keys[d % 2];
	radix_key *dst = keys[(d + 1) % 2];
	const unsigned shift = (unsigned)(d * log2_radix);
	const radix_key mask = (radix_key)(radix - 1);
	const long first = share_first(my_id, num_keys);
	const long last = share_first(my_id + 1, num_keys);
	const long vfirst = share_first(my_id, radix);
	const long vlast = share_first(my_id + 1, radix);
	long *my_counts = &counts[my_id * row_len];
	const long *my_ranks = &ranks[my_id * row_len];
	unsigned long t1 = 0, t2 = 0, t3 = 0, t4 = 0, t5 = 0;
	long i, v, q, base;

	if (timed)
		CLOCK(t1)
	memset(my_counts, 0, (size_t)radix * sizeof(*my_counts));
	for (i = first; i < last; i++)
		my_counts[(src[i] >> shift) & mask]++;
	if (timed)
		CLOCK(t2)

	BARRIER(Global->start, P)

	if (timed)
		CLOCK(t3)
	for (v = vfirst; v < vlast; v++) {
		long below = 0;

		for (q = 0; q < P; q++) {
			ranks[q * row_len + v] = below;
			below += counts[q * row_len + v];
		}
		totals[v] = below;
	}
	if (timed)
		CLOCK(t4)

	BARRIER(Global->start, P)

	if (timed)
		CLOCK(t5)
	base = 0;
	for (v = 0; v < radix; v++) {
		offsets[v] = base + my_ranks[v];
		base += totals[v];
	}
	for (i = first; i < last; i++) {
		const radix_key k = src[i];

		dst[offsets[(k >> shift) & mask]++] = k;
	}
	if (timed) {
		unsigned long t6;

		CLOCK(t6)
		st->histogram += (double)(t2 - t1);
		st->prefix += (double)(t4 - t3);
		st->permute += (double)(t6 - t5);
		st->barrier += (double)(t3 - t2) + (double)(t5 - t4);
	}
}

static void one_sort(long my_id)
{
	struct radix_stats st;
	const int timed = my_id == 0 || dostats;
	const long first = share_first(my_id, num_keys);
	const long last = share_first(my_id + 1, num_keys);
	unsigned long myrs = 0, mydone = 0, myrf = 0;
	long *offsets;
	long i, d;

	memset(&st, 0, sizeof(st));
	/* Private: where this process puts its next key of each value. */
	offsets = malloc((size_t)radix * sizeof(*offsets));
	if (offsets == NULL) {
		fprintf(stderr, "radix: process %ld: out of memory\n", my_id);
		exit(1);
	}

	/* Everyone waits for main to finish initialising, then makes its
	 * own keys, as in SPLASH-2 (on a DSM: its own pages). */
	BARRIER(Global->start, P)
	for (i = first; i < last; i++)
		keys[0][i] = key_value(i);
	BARRIER(Global->start, P)

	if (timed)
		CLOCK(myrs)
	for (d = 0; d < num_digits; d++) {
		/* The next pass reads what every process wrote in this one. */
		if (d > 0) {
			unsigned long t1 = 0, t2 = 0;

			if (timed)
				CLOCK(t1)
			BARRIER(Global->start, P)
			if (timed) {
				CLOCK(t2)
				st.barrier += (double)(t2 - t1);
			}
		}
		sort_pass(my_id, d, offsets, timed, &st);
	}
	if (timed)
		CLOCK(mydone)

	BARRIER(Global->start, P)

	if (timed) {
		st.total = (double)(mydone - myrs);
		Global->stats[my_id] = st;
	}
	if (my_id == 0) {
		CLOCK(myrf)
		Global->rs = myrs;
		Global->done = mydone;
		Global->rf = myrf;
	}
	free(offsets);
}

/* Entry point of every process, main included.  Its number is its rank:
 * SPLASH-2 hands numbers out in arrival order under a lock, an order that
 * changes from run to run, and with it which cluster of a DSM holds which
 * share of the data (docs/splash2.md, "Process numbers"). */
static void slave_start(void)
{
	long my_id;

	GET_PID(my_id)

	one_sort(my_id);
}

static int compare_keys(const void *x, const void *y)
{
	const radix_key kx = *(const radix_key *)x;
	const radix_key ky = *(const radix_key *)y;

	return (kx > ky) - (kx < ky);
}

/*
 * Checks that the result is in ascending order and holds exactly the
 * input keys: the input is regenerated and sorted privately with qsort,
 * and the two must be equal key for key.  Returns 0 when both hold.
 */
static int check_result(void)
{
	const radix_key *out = sorted_keys();
	radix_key *want = malloc((size_t)num_keys * sizeof(*want));
	long i, unordered = -1, differs = -1;

	if (want == NULL) {
		fprintf(stderr, "radix: out of memory for the check\n");
		return -1;
	}
	for (i = 0; i + 1 < num_keys && unordered < 0; i++)
		if (out[i] > out[i + 1])
			unordered = i;
	for (i = 0; i < num_keys; i++)
		want[i] = key_value(i);
	qsort(want, (size_t)num_keys, sizeof(*want), compare_keys);
	for (i = 0; i < num_keys && differs < 0; i++)
		if (out[i] != want[i])
			differs = i;

	if (unordered >= 0)
		printf("Keys out of order at %ld: %lu > %lu\n", unordered,
		       (unsigned long)out[unordered],
		       (unsigned long)out[unordered + 1]);
	if (differs >= 0)
		printf("Not a permutation of the input: key %ld is %lu, "
		       "expected %lu\n", differs, (unsigned long)out[differs],
		       (unsigned long)want[differs]);
	if (unordered < 0 && differs < 0)
		printf("TEST PASSED\n");
	else
		printf("TEST FAILED\n");
	free(want);
	return unordered < 0 && differs < 0 ? 0 : -1;
}

static void print_stats(void)
{
	static const size_t cols[] = {
		offsetof(struct radix_stats, total),
		offsetof(struct radix_stats, histogram),
		offsetof(struct radix_stats, prefix),
		offsetof(struct radix_stats, permute),
		offsetof(struct radix_stats, barrier),
	};

	lm_splash_print_stats(
		"                            PROCESS STATISTICS\n"
		"              Total     Histogram        Prefix       "
		"Permute       Barrier\n"
		" Proc          Time          Time          Time          "
		"Time          Time\n",
		Global->stats, sizeof(struct radix_stats), cols,
		(int)(sizeof(cols) / sizeof(cols[0])), P);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: radix <options>\n"
		"options:\n"
		"  -pP : P = number of processors (default %d, at most %d).\n"
		"  -nN : Sort N keys (default %ld).\n"
		"  -rR : Radix R, a power of 2 (default %d).\n"
		"  -mM : Keys are 0 .. M - 1 (default %ld, at most %ld).\n"
		"  -s  : Print individual processor timing statistics.\n"
		"  -t  : Test output (sorted, and a permutation of the "
		"input).\n"
		"  -o  : Print out the keys before and after sorting.\n"
		"  -h  : Print out command line options.\n",
		RADIX_DEFAULT_P, RADIX_MAX_P, (long)RADIX_DEFAULT_N,
		RADIX_DEFAULT_R, (long)RADIX_DEFAULT_M, RADIX_MAX_M);
}

/* Digits of log2_radix bits needed for the largest key, at least one. */
static long count_digits(void)
{
	long bits = 0, digits;

	while (bits < 63 && ((max_key - 1) >> bits) != 0)
		bits++;
	digits = (bits + log2_radix - 1) / log2_radix;
	return digits > 0 ? digits : 1;
}

int main(int argc, char *argv[])
{
	unsigned long start;
	int ch, failed = 0, p_given = 0, status;
	size_t key_bytes, row_bytes;
	long p;

	MAIN_INITENV
	CLOCK(start)

	while ((ch = getopt(argc, argv, "p:n:r:m:stoh")) != -1) {
		int bad = 0;

		switch (ch) {
		case 'p':
			bad = lm_splash_parse_positive(optarg, RADIX_MAX_P, &P);
			p_given = 1;
			break;
		case 'n':
			bad = lm_splash_parse_positive(optarg, RADIX_MAX_N, &num_keys);
			break;
		case 'r':
			bad = lm_splash_parse_positive(optarg, RADIX_MAX_R, &radix);
			/* Digits are bit fields: a power of 2, at least 2. */
			if (!bad && (radix < 2 || (radix & (radix - 1)) != 0))
				bad = 1;
			break;
		case 'm':
			bad = lm_splash_parse_positive(optarg, RADIX_MAX_M, &max_key);
			break;
		default:
			bad = lm_splash_flag_option(ch, &dostats, &test_result,
						    &doprint);
			break;
		}
		status = lm_splash_option_done("radix", ch, bad, usage);
		if (status >= 0)
			MAIN_END(status)
	}
	status = lm_splash_end_options("radix", argc, argv, usage,
				       p_given, &P);
	if (status != 0)
		MAIN_END(status)

	log2_radix = 0;
	while ((1L << log2_radix) < radix)
		log2_radix++;
	num_digits = count_digits();

	printf("\n");
	printf("Integer Radix Sort\n");
	printf("     %ld Keys\n", num_keys);
	printf("     %ld Processors\n", P);
	printf("     Radix = %ld\n", radix);
	printf("     Max key = %ld\n", max_key);
	printf("     %ld Digits\n", num_digits);
	printf("\n");
	printf("\n");

	key_bytes = (size_t)num_keys * sizeof(radix_key);
	row_bytes = ((size_t)radix * sizeof(long) + RADIX_ROW_ALIGN - 1) /
		    RADIX_ROW_ALIGN * RADIX_ROW_ALIGN;
	row_len = (long)(row_bytes / sizeof(long));
	keys[0] = (radix_key *)G_MALLOC(key_bytes);
	keys[1] = (radix_key *)G_MALLOC(key_bytes);
	counts = (long *)G_MALLOC((size_t)P * row_bytes);
	ranks = (long *)G_MALLOC((size_t)P * row_bytes);
	totals = (long *)G_MALLOC((size_t)radix * sizeof(long));
	Global = (struct radix_global *)G_MALLOC(sizeof(struct radix_global));
	if (keys[0] == NULL || keys[1] == NULL || counts == NULL ||
	    ranks == NULL || totals == NULL || Global == NULL) {
		fprintf(stderr, "radix: cannot allocate shared memory for "
			"%ld keys\n", num_keys);
		MAIN_END(1)
	}
	Global->stats = (struct radix_stats *)G_MALLOC((size_t)P *
						sizeof(struct radix_stats));
	if (Global->stats == NULL) {
		fprintf(stderr, "radix: cannot allocate shared memory\n");
		MAIN_END(1)
	}
	memset(Global->stats, 0, (size_t)P * sizeof(struct radix_stats));
	Global->starttime = start;
	BARINIT(Global->start, P)

	/* Process 0 is main itself. */
	for (p = 1; p < P; p++)
		CREATE(slave_start)
	slave_start();
	WAIT_FOR_END(P - 1)

	if (doprint) {
		/* The input is regenerated; the sort itself overwrote it. */
		radix_key *input = malloc(key_bytes);

		if (input != NULL) {
			for (p = 0; p < num_keys; p++)
				input[p] = key_value(p);
			print_keys("Keys before sorting:", input);
			free(input);
		}
		print_keys("Keys after sorting:", sorted_keys());
	}
	if (dostats)
		print_stats();

	printf("\n");
	lm_splash_print_times(Global->starttime, Global->rs, Global->rf);

	if (test_result) {
		printf("                             TESTING RESULTS\n");
		failed = check_result() != 0;
	}
	MAIN_END(failed)
}
