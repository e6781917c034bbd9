/*
 * SPLASH-2 FFT: the six-step 1-D complex FFT of n = 2^m points, the points
 * seen as a sqrt(n) x sqrt(n) matrix whose rows are owned by processes in
 * contiguous chunks; all communication is in three blocked transposes.
 * Written for Lemuria in PARMACS m4 macros: the same source builds
 * fft-pthread (macros/pthread.m4) and fft (macros/lemuria.m4).
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

#define FFT_DEFAULT_M 16
#define FFT_DEFAULT_P 1
#define FFT_DEFAULT_CACHE_LINES 65536
#define FFT_DEFAULT_LOG2_LINE 4	/* 16-byte lines: one complex number */
#define FFT_MIN_LOG2_LINE 4
#define FFT_MAX_LOG2_LINE 16
#define FFT_MAX_M 30
#define FFT_MAX_P 1024
#define FFT_PAGE 4096		/* arrays start on a page boundary */
#define FFT_TOLERANCE 1e-9	/* relative, on both checks */
#define FFT_SAMPLES 8		/* outputs checked against a direct DFT */
#define FFT_SEED 0x46465431443030ULL

struct fft_complex {
	double re;
	double im;
};

/* Per-process timings of the forward transform, microseconds. */
struct fft_stats {
	double total;		/* transform, start to finish */
	double transpose;	/* the three transposes */
	double compute;		/* row FFTs and the twiddle multiply */
	double barrier;		/* waiting in the two inner barriers */
};

/* Shared state, allocated by main from shared memory. */
struct fft_global {
	struct fft_stats *stats;	/* one per process */
	unsigned long starttime;	/* main started */
	unsigned long rs;	/* process 0 began the transform */
	unsigned long done;	/* process 0 finished its own share */
	unsigned long rf;	/* all processes finished */
	double dft_error;	/* sample check of the forward result */
	BARDEC(start)
};

/*
 * Set by main before the workers start and only read afterwards: plain
 * globals, as in the SPLASH-2 original, so the runtime must give every
 * process main's values.  The arrays are in shared memory.
 */
static long m = FFT_DEFAULT_M;
static long P = FFT_DEFAULT_P;
static long num_cache_lines = FFT_DEFAULT_CACHE_LINES;
static long log2_line_size = FFT_DEFAULT_LOG2_LINE;
static long npoints;		/* 2^m */
static long rootn;		/* 2^(m/2): rows, and points per row */
static long log2_rootn;
static long rows_per_proc;
static long line;		/* complex numbers per cache line */
static long stride;		/* complex numbers from one row to the next */
static struct fft_complex *x;	/* the data, rootn rows of stride */
static struct fft_complex *trans;	/* transpose partner, shaped as x */
static struct fft_complex *twiddle;	/* w_n^(r c) at row r, column c */
static struct fft_complex *roots;	/* w_rootn^k, k < rootn / 2 */
static int dostats;
static int test_result;
static int doprint;
static struct fft_global *Global;

static long min_long(long a, long b)
{
	return a < b ? a : b;
}

static long gcd_long(long a, long b)
{
	while (b != 0) {
		long t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Input point j: re and im uniform in [-1, 1) from a hash of j, so the
 * checks can regenerate the input instead of keeping a copy. */
static struct fft_complex input_point(long j)
{
	struct fft_complex v;
	uint64_t z = FFT_SEED + ((uint64_t)j + 1) * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	/* 26 bits each keeps the two parts independent. */
	v.re = (double)(z >> 38) * (2.0 / 67108864.0) - 1.0;
	v.im = (double)((z >> 6) & 0x3ffffff) * (2.0 / 67108864.0) - 1.0;
	return v;
}

/* exp(-2 pi i num / den), computed directly rather than by recurrence so
 * that every root is accurate to the last bit or two. */
static struct fft_complex unit_root(unsigned long num, unsigned long den)
{
	const double angle = -2.0 * M_PI * (double)(num % den) / (double)den;
	struct fft_complex w;

	w.re = cos(angle);
	w.im = sin(angle);
	return w;
}

/* Element k of the 1-D sequence stored in a matrix of this shape. */
static struct fft_complex *point(struct fft_complex *a, long k)
{
	return &a[(k >> log2_rootn) * stride + (k & (rootn - 1))];
}

/*
 * Rows are padded by one cache line when the line-sized tile of a
 * transpose would not fit in distinct sets of a direct-mapped cache of
 * num_cache_lines lines: then walking a column of the tile evicts what the
 * next column needs.  Without padding, rows (and each process's chunk of
 * rows) stay page-aligned, which a page-based DSM prefers.
 */
static long row_padding(void)
{
	const long row_lines = (rootn + line - 1) / line;
	const long sets = num_cache_lines / gcd_long(row_lines,
						     num_cache_lines);

	return sets < line ? line : 0;
}

static void init_data(void)
{
	long j, k;

	for (j = 0; j < npoints; j++)
		*point(x, j) = input_point(j);
	for (k = 0; k < rootn / 2; k++)
		roots[k] = unit_root((unsigned long)k, (unsigned long)rootn);
}

static void print_points(struct fft_complex *a)
{
	long k;

	for (k = 0; k < npoints; k++) {
		const struct fft_complex *v = point(a, k);

		printf(" %6ld: %12.6f %12.6f%s", k, v->re, v->im,
		       k % 2 == 1 ? "\n" : "   ");
	}
	if (npoints % 2 == 1)
		printf("\n");
}

/*
 * In-place radix-2 FFT of one row of rootn points, forward for dir = 1
 * (roots w^k), inverse without the 1/rootn for dir = -1 (conjugate roots).
 * Bit-reversal first, then butterflies of growing span; the roots of span
 * 2h are every (rootn / 2h)-th of the full table.
 */
static void fft_row(struct fft_complex *restrict a, double dir)
{
	long i, j, half, step, start, k;

	for (i = 0, j = 0; i < rootn; i++) {
		long bit = rootn >> 1;

		if (i < j) {
			struct fft_complex t = a[i];

			a[i] = a[j];
			a[j] = t;
		}
		while (bit > 0 && (j & bit)) {
			j ^= bit;
			bit >>= 1;
		}
		j |= bit;
	}
	for (half = 1, step = rootn / 2; half < rootn; half *= 2, step /= 2) {
		for (start = 0; start < rootn; start += 2 * half) {
			struct fft_complex *lo = &a[start];
			struct fft_complex *hi = &a[start + half];

			for (k = 0; k < half; k++) {
				const double wr = roots[k * step].re;
				const double wi = dir * roots[k * step].im;
				const double vr = hi[k].re * wr - hi[k].im * wi;
				const double vi = hi[k].re * wi + hi[k].im * wr;

				hi[k].re = lo[k].re - vr;
				hi[k].im = lo[k].im - vi;
				lo[k].re += vr;
				lo[k].im += vi;
			}
		}
	}
}

/* Row r of a, times row r of the twiddle matrix (conjugated for the
 * inverse). */
static void twiddle_row(struct fft_complex *restrict a,
			const struct fft_complex *restrict w, double dir)
{
	long c;

	for (c = 0; c < rootn; c++) {
		const double wr = w[c].re, wi = dir * w[c].im;
		const double re = a[c].re * wr - a[c].im * wi;

		a[c].im = a[c].re * wi + a[c].im * wr;
		a[c].re = re;
	}
}

/*
 * dst = src transposed, for this process's rows of dst.  Those rows take
 * one square patch from each process's rows of src; patches are taken in
 * staggered order (process p starts with p + 1's, ends with its own) so
 * that processes do not all read from the same one at once, and each
 * patch is copied in line x line tiles so that every cache line read from
 * src is used whole.
 */
static void transpose(const struct fft_complex *restrict src,
		      struct fft_complex *restrict dst, long my_id)
{
	const long first = my_id * rows_per_proc;
	long q, ib, jb, i, j;

	for (q = 1; q <= P; q++) {
		const long col0 = ((my_id + q) % P) * rows_per_proc;

		for (ib = 0; ib < rows_per_proc; ib += line) {
			const long iend = min_long(ib + line, rows_per_proc);

			for (jb = 0; jb < rows_per_proc; jb += line) {
				const long jend = min_long(jb + line,
							   rows_per_proc);

				for (i = ib; i < iend; i++) {
					struct fft_complex *d =
						&dst[(first + i) * stride +
						     col0];
					const struct fft_complex *s =
						&src[col0 * stride + first + i];

					for (j = jb; j < jend; j++)
						d[j] = s[j * stride];
				}
			}
		}
	}
}

/* Row FFTs on this process's rows of a, then the twiddle multiply if
 * asked. */
static void fft_rows(struct fft_complex *a, long my_id, double dir,
		     int with_twiddle)
{
	const long first = my_id * rows_per_proc;
	long r;

	for (r = first; r < first + rows_per_proc; r++) {
		fft_row(&a[r * stride], dir);
		if (with_twiddle)
			twiddle_row(&a[r * stride], &twiddle[r * stride], dir);
	}
}

/*
 * The six steps, for data whose every row is final (the caller has passed
 * a barrier since the last write to it).  With j = rootn j1 + j2 and
 * k = k1 + rootn k2, the DFT splits into a length-rootn DFT over j1, a
 * twiddle w_n^(j2 k1), and a length-rootn DFT over j2:
 *
 *   work = data^T;  FFT rows of work (over j1), times the twiddles;
 *   data = work^T;  FFT rows of data (over j2);  work = data^T.
 *
 * The result, in natural order, is in work; data is overwritten.  Each
 * transpose reads other processes' rows, so it follows a barrier, and that
 * barrier also keeps it from overwriting rows another process is still
 * reading in the transpose before.  The row FFTs touch only own rows.
 */
static void six_step(struct fft_complex *data, struct fft_complex *work,
		     long my_id, double dir, struct fft_stats *st)
{
	const int timed = my_id == 0 || dostats;
	unsigned long t[8] = { 0 };

	if (timed)
		CLOCK(t[0])
	transpose(data, work, my_id);
	if (timed)
		CLOCK(t[1])
	fft_rows(work, my_id, dir, 1);
	if (timed)
		CLOCK(t[2])

	BARRIER(Global->start, P)

	if (timed)
		CLOCK(t[3])
	transpose(work, data, my_id);
	if (timed)
		CLOCK(t[4])
	fft_rows(data, my_id, dir, 0);
	if (timed)
		CLOCK(t[5])

	BARRIER(Global->start, P)

	if (timed)
		CLOCK(t[6])
	transpose(data, work, my_id);
	if (timed) {
		CLOCK(t[7])
		st->transpose += (double)(t[1] - t[0]) +
				 (double)(t[4] - t[3]) + (double)(t[7] - t[6]);
		st->compute += (double)(t[2] - t[1]) + (double)(t[5] - t[4]);
		st->barrier += (double)(t[3] - t[2]) + (double)(t[6] - t[5]);
	}
}

/* Computes this process's rows of the twiddle matrix (only their owner
 * reads them) and reads its rows of both arrays, so that the timed part
 * starts warm (and, on a DSM, with the pages already fetched). */
static double prepare_rows(long my_id)
{
	const long first = my_id * rows_per_proc;
	double sum = 0.0;
	long r, c;

	for (r = first; r < first + rows_per_proc; r++) {
		for (c = 0; c < rootn; c++) {
			twiddle[r * stride + c] =
				unit_root((unsigned long)r * (unsigned long)c,
					  (unsigned long)npoints);
			sum += x[r * stride + c].re + trans[r * stride + c].re;
		}
	}
	return sum;
}

/*
 * Compares FFT_SAMPLES outputs of the forward transform, spread over the
 * spectrum, with a direct O(n) DFT of the regenerated input; the round
 * trip alone would pass a wrong but invertible transform.  Returns the
 * largest error relative to sum |x_j|, which bounds every output.
 */
static double check_samples(void)
{
	double norm = 0.0, worst = 0.0;
	long s, j;

	for (j = 0; j < npoints; j++) {
		struct fft_complex v = input_point(j);

		norm += hypot(v.re, v.im);
	}
	for (s = 0; s < FFT_SAMPLES; s++) {
		const long k = (s * (npoints / FFT_SAMPLES) + s * s) %
			       npoints;
		const struct fft_complex *got = point(trans, k);
		double re = 0.0, im = 0.0;

		for (j = 0; j < npoints; j++) {
			struct fft_complex v = input_point(j);
			struct fft_complex w =
				unit_root((unsigned long)j * (unsigned long)k,
					  (unsigned long)npoints);

			re += v.re * w.re - v.im * w.im;
			im += v.re * w.im + v.im * w.re;
		}
		/* fmax drops a NaN: keep it so that it fails. */
		re = hypot(got->re - re, got->im - im) / norm;
		worst = isnan(re) ? re : fmax(worst, re);
		if (isnan(worst))
			break;
	}
	return worst;
}

static void one_transform(long my_id)
{
	struct fft_stats st;
	unsigned long myrs = 0, mydone = 0, myrf = 0;
	volatile double sink;

	memset(&st, 0, sizeof(st));
	/* Everyone waits for main to finish initialising, then warms up. */
	BARRIER(Global->start, P)
	sink = prepare_rows(my_id);
	(void)sink;
	BARRIER(Global->start, P)

	if (my_id == 0 || dostats)
		CLOCK(myrs)
	six_step(x, trans, my_id, 1.0, &st);
	if (my_id == 0 || dostats)
		CLOCK(mydone)

	BARRIER(Global->start, P)

	if (my_id == 0 || dostats) {
		st.total = (double)(mydone - myrs);
		Global->stats[my_id] = st;
	}
	if (my_id == 0) {
		CLOCK(myrf)
		Global->rs = myrs;
		Global->done = mydone;
		Global->rf = myrf;
		if (doprint) {
			printf("Data after the forward transform:\n");
			print_points(trans);
		}
		if (test_result)
			Global->dft_error = check_samples();
	}
	/* No barrier needed while process 0 checks: until the inverse's
	 * first barrier, which process 0 reaches only after its check, the
	 * others only read trans and write their own rows of x. */
	if (test_result)
		six_step(trans, x, my_id, -1.0, &st);
}

/* Entry point of every process, main included.  Its number is its rank:
 * SPLASH-2 hands numbers out in arrival order under a lock, an order that
 * changes from run to run, and with it which cluster of a DSM holds which
 * share of the data (docs/splash2.md, "Process numbers"). */
static void slave_start(void)
{
	long my_id;

	GET_PID(my_id)

	one_transform(my_id);
}

/*
 * After forward and inverse, x holds n times the input (the inverse is
 * not normalised).  Returns 0 when both that and the sample check are
 * within FFT_TOLERANCE.
 */
static int check_result(void)
{
	double max_err = 0.0, max_in = 0.0;
	long k;
	int ok;

	for (k = 0; k < npoints; k++) {
		const struct fft_complex in = input_point(k);
		const struct fft_complex *out = point(x, k);
		const double err = hypot(out->re / (double)npoints - in.re,
					 out->im / (double)npoints - in.im);

		max_err = isnan(err) ? err : fmax(max_err, err);
		max_in = fmax(max_in, hypot(in.re, in.im));
		if (isnan(max_err))
			break;
	}
	max_err /= max_in;
	/* Written so that a NaN anywhere fails. */
	ok = max_err <= FFT_TOLERANCE && Global->dft_error <= FFT_TOLERANCE;
	printf("Max sampled DFT error (relative)  : %16.3e\n",
	       Global->dft_error);
	printf("Max round-trip error (relative)   : %16.3e\n", max_err);
	if (ok)
		printf("TEST PASSED\n");
	else
		printf("TEST FAILED: tolerance %.1e\n", FFT_TOLERANCE);
	return ok ? 0 : -1;
}

static void print_stats(void)
{
	static const size_t cols[] = {
		offsetof(struct fft_stats, total),
		offsetof(struct fft_stats, transpose),
		offsetof(struct fft_stats, compute),
		offsetof(struct fft_stats, barrier),
	};

	lm_splash_print_stats(
		"                 PROCESS STATISTICS (forward transform)\n"
		"              Total     Transpose      Compute       "
		"Barrier\n"
		" Proc         Time         Time          Time          "
		"Time\n",
		Global->stats, sizeof(struct fft_stats), cols,
		(int)(sizeof(cols) / sizeof(cols[0])), P);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: fft <options>\n"
		"options:\n"
		"  -mM : M = even number; 2^M complex points are "
		"transformed\n"
		"        (default %d, at most %d).\n"
		"  -pP : P = number of processors; a power of 2 dividing "
		"2^(M/2) (default %d).\n"
		"  -nN : N = number of cache lines (default %d).\n"
		"  -lL : L = log base 2 of the cache line length in bytes "
		"(default %d, %d .. %d).\n"
		"  -s  : Print individual processor timing statistics.\n"
		"  -t  : Test output (check sampled outputs against a direct "
		"DFT, run the\n"
		"        inverse transform and compare with the input).\n"
		"  -o  : Print out complex data points.\n"
		"  -h  : Print out command line options.\n",
		FFT_DEFAULT_M, FFT_MAX_M, FFT_DEFAULT_P,
		FFT_DEFAULT_CACHE_LINES, FFT_DEFAULT_LOG2_LINE,
		FFT_MIN_LOG2_LINE, FFT_MAX_LOG2_LINE);
}

/* Shared memory for count complex numbers, starting on a page boundary
 * so that a chunk of whole rows is a run of whole pages.  Never freed. */
static struct fft_complex *alloc_points(long count)
{
	char *raw = (char *)G_MALLOC((size_t)count *
				     sizeof(struct fft_complex) + FFT_PAGE);
	uintptr_t a = (uintptr_t)raw;

	if (raw == NULL)
		return NULL;
	return (struct fft_complex *)(raw + (FFT_PAGE - a % FFT_PAGE) %
					    FFT_PAGE);
}

int main(int argc, char *argv[])
{
	unsigned long start;
	int ch, failed = 0, p_given = 0, status;
	long p;

	MAIN_INITENV
	CLOCK(start)

	while ((ch = getopt(argc, argv, "m:p:n:l:stoh")) != -1) {
		int bad = 0;

		switch (ch) {
		case 'm':
			bad = lm_splash_parse_range(optarg, 2, FFT_MAX_M, &m) ||
			      m % 2 != 0;
			break;
		case 'p':
			bad = lm_splash_parse_positive(optarg, FFT_MAX_P, &P);
			p_given = 1;
			break;
		case 'n':
			bad = lm_splash_parse_positive(optarg, 1L << 30,
						       &num_cache_lines);
			break;
		case 'l':
			bad = lm_splash_parse_range(optarg, FFT_MIN_LOG2_LINE,
						    FFT_MAX_LOG2_LINE,
						    &log2_line_size);
			break;
		default:
			bad = lm_splash_flag_option(ch, &dostats, &test_result,
						    &doprint);
			break;
		}
		status = lm_splash_option_done("fft", ch, bad, usage);
		if (status >= 0)
			MAIN_END(status)
	}
	status = lm_splash_end_options("fft", argc, argv, usage,
				       p_given, &P);
	if (status != 0)
		MAIN_END(status)

	npoints = 1L << m;
	log2_rootn = m / 2;
	rootn = 1L << log2_rootn;
	/* Every process owns the same number of whole rows, and a patch of
	 * each transpose is square. */
	if ((P & (P - 1)) != 0 || rootn % P != 0) {
		fprintf(stderr, "fft: %ld processes: the count must be a power "
			"of 2 dividing 2^(m/2) = %ld\n", P, rootn);
		MAIN_END(2)
	}
	rows_per_proc = rootn / P;
	line = (1L << log2_line_size) / (long)sizeof(struct fft_complex);
	stride = rootn + row_padding();

	printf("\n");
	printf("FFT with Blocking Transpose\n");
	printf("   %ld Complex Doubles\n", npoints);
	printf("   %ld Processors\n", P);
	printf("   %ld Cache lines\n", num_cache_lines);
	printf("   %ld Byte line size\n", 1L << log2_line_size);
	printf("   %ld Complex Doubles of row padding\n", stride - rootn);
	printf("\n");
	printf("\n");

	x = alloc_points(rootn * stride);
	trans = alloc_points(rootn * stride);
	twiddle = alloc_points(rootn * stride);
	roots = alloc_points(rootn / 2);
	Global = (struct fft_global *)G_MALLOC(sizeof(struct fft_global));
	if (x == NULL || trans == NULL || twiddle == NULL || roots == NULL ||
	    Global == NULL) {
		fprintf(stderr, "fft: cannot allocate shared memory for m = "
			"%ld\n", m);
		MAIN_END(1)
	}
	Global->stats = (struct fft_stats *)G_MALLOC((size_t)P *
						     sizeof(struct fft_stats));
	if (Global->stats == NULL) {
		fprintf(stderr, "fft: cannot allocate shared memory\n");
		MAIN_END(1)
	}
	memset(Global->stats, 0, (size_t)P * sizeof(struct fft_stats));
	Global->starttime = start;
	Global->dft_error = 0.0;
	BARINIT(Global->start, P)

	init_data();
	if (doprint) {
		printf("Original data values:\n");
		print_points(x);
	}

	/* Process 0 is main itself. */
	for (p = 1; p < P; p++)
		CREATE(slave_start)
	slave_start();
	WAIT_FOR_END(P - 1)

	if (doprint && test_result) {
		printf("Data after the inverse transform (times n):\n");
		print_points(x);
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
