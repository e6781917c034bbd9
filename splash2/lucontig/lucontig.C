/*
 * SPLASH-2 LU, contiguous blocks: the blocked LU factorisation of lu.C, but
 * every B x B block is stored contiguously and all blocks of one process
 * sit together in that process's own shared region.  Written for Lemuria
 * in PARMACS m4 macros: the same source builds lucontig-pthread
 * (macros/pthread.m4) and lucontig (macros/lemuria.m4).
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

#define LU_DEFAULT_N 128
#define LU_DEFAULT_P 1
#define LU_DEFAULT_B 16
#define LU_MAX_P 1024
#define LU_TOLERANCE 1e-8	/* on max |x - 1| and the scaled residual */
#define LU_SEED 0x4c454d55524941ULL

/* Per-process timings, microseconds; filled in at the end of the run. */
struct lu_stats {
	double total;		/* factorisation, start to finish */
	double diag;		/* factoring diagonal blocks */
	double perim;		/* perimeter blocks (row and column k) */
	double interior;	/* interior block updates */
	double barrier;		/* waiting in the two barriers of each step */
};

/* Shared state, allocated by main from shared memory. */
struct lu_global {
	struct lu_stats *stats;	/* one per process */
	unsigned long starttime;	/* main started */
	unsigned long rs;	/* process 0 began factoring */
	unsigned long done;	/* process 0 finished its own share */
	unsigned long rf;	/* all processes finished */
	BARDEC(start)
};

/*
 * Set by main before the workers start and only read afterwards: plain
 * globals, as in the SPLASH-2 original, so the runtime must give every
 * process main's values.  a and rhs point into shared memory, and so do
 * the block pointers a holds.
 */
static long n = LU_DEFAULT_N;
static long P = LU_DEFAULT_P;
static long block_size = LU_DEFAULT_B;
static long nblocks;
static long num_rows;		/* process grid: num_rows x num_cols == P */
static long num_cols;
static double **a;		/* nblocks * nblocks block pointers */
static double *rhs;		/* n, chosen so that the solution is all ones */
static int dostats;
static int test_result;
static int doprint;
static struct lu_global *Global;

static long min_long(long x, long y)
{
	return x < y ? x : y;
}

/*
 * 2-D scatter as in SPLASH-2: block row I goes to grid column I % num_cols,
 * block column J to grid row J % num_rows, so every process gets a share of
 * each step and the num_cols processes of one grid row share each block
 * column (consecutive ranks, hence one cluster when clusters hold whole
 * grid rows).
 */
static long block_owner(long I, long J)
{
	return (I % num_cols) + (J % num_rows) * num_cols;
}

/* Rows of block row I (or columns of block column I): B but for the last,
 * which is what is left of n. */
static long block_dim(long I)
{
	return min_long(block_size, n - I * block_size);
}

/* Block (I, J), column-major with block_dim(I) rows: the pointer array
 * is column-major over blocks too, as in SPLASH-2. */
static double *block_at(long I, long J)
{
	return a[I + J * nblocks];
}

/* Element (i, j) of the matrix, found through its block. */
static double *element(long i, long j)
{
	const long I = i / block_size;
	const long J = j / block_size;

	return &block_at(I, J)[(i - I * block_size) +
			       (j - J * block_size) * block_dim(I)];
}

/* A well-conditioned, reproducible entry, the same as lu.C's: uniform
 * [0, 1) off the diagonal and n added on it, so rows and columns are
 * diagonally dominant and elimination without pivoting is stable.
 * Stateless so the check can regenerate the matrix instead of keeping a
 * copy. */
static double matrix_entry(long i, long j)
{
	uint64_t z = LU_SEED + ((uint64_t)i * (uint64_t)n + (uint64_t)j + 1) *
			       0x9e3779b97f4a7c15ULL;
	double v;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	v = (double)(z >> 11) * (1.0 / 9007199254740992.0);
	return i == j ? v + (double)n : v;
}

/*
 * Gives every process one shared region holding all its blocks, column by
 * column of blocks, and points a at them, so that a process's blocks share
 * pages only with each other.  Returns 0, or -1 when shared memory runs
 * out.  Runs in main before any worker exists.
 */
static int alloc_blocks(void)
{
	long p, I, J;

	a = (double **)G_MALLOC((size_t)(nblocks * nblocks) * sizeof(*a));
	if (a == NULL)
		return -1;
	for (p = 0; p < P; p++) {
		size_t doubles = 0;
		double *region;

		for (J = 0; J < nblocks; J++)
			for (I = 0; I < nblocks; I++)
				if (block_owner(I, J) == p)
					doubles += (size_t)(block_dim(I) *
							    block_dim(J));
		if (doubles == 0)
			continue;	/* more processes than blocks */
		region = (double *)G_MALLOC(doubles * sizeof(double));
		if (region == NULL)
			return -1;
		for (J = 0; J < nblocks; J++) {
			for (I = 0; I < nblocks; I++) {
				if (block_owner(I, J) != p)
					continue;
				a[I + J * nblocks] = region;
				region += block_dim(I) * block_dim(J);
			}
		}
	}
	return 0;
}

static void init_matrix(void)
{
	long i, j;

	for (i = 0; i < n; i++)
		rhs[i] = 0.0;
	for (j = 0; j < n; j++) {
		for (i = 0; i < n; i++) {
			const double v = matrix_entry(i, j);

			*element(i, j) = v;
			rhs[i] += v;
		}
	}
}

static void print_matrix(void)
{
	long i, j;

	for (i = 0; i < n; i++) {
		for (j = 0; j < n; j++)
			printf(" %8.3f", *element(i, j));
		printf("\n");
	}
}

/*
 * Block kernels.  A block's leading dimension is its own row count, so
 * the three blocks a kernel touches may have three different ones; with
 * the default block size they are all B.  The work is all in daxpy on
 * short columns; restrict and the 4-wide body let gcc -O2 turn it into
 * vector code.
 */
static inline void daxpy(double *restrict y, const double *restrict x,
			 long count, double alpha)
{
	const long body = count & ~3L;
	long i;

	for (i = 0; i < body; i += 4) {
		y[i] += alpha * x[i];
		y[i + 1] += alpha * x[i + 1];
		y[i + 2] += alpha * x[i + 2];
		y[i + 3] += alpha * x[i + 3];
	}
	for (i = body; i < count; i++)
		y[i] += alpha * x[i];
}

/* Diagonal block d (dim x dim) = L U in place, L lower with its own
 * diagonal, U unit upper (stored above the diagonal). */
static void lu0(double *restrict d, long dim)
{
	long j, k;

	for (k = 0; k < dim; k++) {
		const double pivot = d[k + k * dim];

		for (j = k + 1; j < dim; j++) {
			double *col = &d[j * dim];

			col[k] /= pivot;
			daxpy(&col[k + 1], &d[k + 1 + k * dim], dim - k - 1,
			      -col[k]);
		}
	}
}

/* Column-k perimeter block (rows x dimk): blk = blk * U^-1, U the unit
 * upper part of the factored diagonal block (dimk x dimk). */
static void bdiv(double *restrict blk, const double *restrict diag,
		 long rows, long dimk)
{
	long j, k;

	for (j = 0; j < dimk; j++)
		for (k = 0; k < j; k++)
			daxpy(&blk[j * rows], &blk[k * rows], rows,
			      -diag[k + j * dimk]);
}

/* Row-k perimeter block (dimk x cols): blk = L^-1 * blk, L the lower part
 * (with diagonal) of the factored diagonal block. */
static void bmodd(const double *restrict diag, double *restrict blk,
		  long dimk, long cols)
{
	long j, k;

	for (j = 0; j < cols; j++) {
		double *col = &blk[j * dimk];

		for (k = 0; k < dimk; k++) {
			col[k] /= diag[k + k * dimk];
			daxpy(&col[k + 1], &diag[k + 1 + k * dimk],
			      dimk - k - 1, -col[k]);
		}
	}
}

/* Interior block c (rows x cols) -= lcol (rows x dimk, from column k) *
 * urow (dimk x cols, from row k). */
static void bmod(const double *restrict lcol, const double *restrict urow,
		 double *restrict c, long rows, long cols, long dimk)
{
	long j, k;

	for (j = 0; j < cols; j++) {
		double *restrict ccol = &c[j * rows];
		const double *ucol = &urow[j * dimk];

		/* A constant count for full blocks of the default size lets
		 * gcc drop the loop control, as in lu.C. */
		if (rows == LU_DEFAULT_B) {
			for (k = 0; k < dimk; k++)
				daxpy(ccol, &lcol[k * LU_DEFAULT_B],
				      LU_DEFAULT_B, -ucol[k]);
		} else {
			for (k = 0; k < dimk; k++)
				daxpy(ccol, &lcol[k * rows], rows, -ucol[k]);
		}
	}
}

/* Reads every element of the blocks this process owns so that the timed
 * part starts warm (and, on a DSM, with the pages already fetched). */
static double touch_blocks(long my_id)
{
	double sum = 0.0;
	long I, J, i;

	for (J = 0; J < nblocks; J++) {
		for (I = 0; I < nblocks; I++) {
			const double *blk = block_at(I, J);
			const long size = block_dim(I) * block_dim(J);

			if (block_owner(I, J) != my_id)
				continue;
			for (i = 0; i < size; i++)
				sum += blk[i];
		}
	}
	return sum;
}

/*
 * The factorisation, one step per diagonal block K: its owner factors it;
 * barrier; owners of blocks in column K and row K divide them by it;
 * barrier; owners of the trailing blocks subtract the outer product.  No
 * barrier closes a step: block (K+1, K+1) is updated and then factored by
 * the same process, and everything else the next step reads is behind its
 * first barrier.
 */
static void factor(long my_id, struct lu_stats *st)
{
	const int timed = my_id == 0 || dostats;
	long I, J, K;

	for (K = 0; K < nblocks; K++) {
		const long dimk = block_dim(K);
		double *diag = block_at(K, K);
		unsigned long t1 = 0, t11 = 0, t2 = 0, t22 = 0, t3 = 0, t4 = 0;

		if (timed)
			CLOCK(t1)
		if (block_owner(K, K) == my_id)
			lu0(diag, dimk);
		if (timed)
			CLOCK(t11)

		BARRIER(Global->start, P)

		if (timed)
			CLOCK(t2)
		for (I = K + 1; I < nblocks; I++)
			if (block_owner(I, K) == my_id)
				bdiv(block_at(I, K), diag, block_dim(I), dimk);
		for (J = K + 1; J < nblocks; J++)
			if (block_owner(K, J) == my_id)
				bmodd(diag, block_at(K, J), dimk,
				      block_dim(J));
		if (timed)
			CLOCK(t22)

		BARRIER(Global->start, P)

		if (timed)
			CLOCK(t3)
		for (J = K + 1; J < nblocks; J++) {
			const long cols = block_dim(J);
			const double *urow = block_at(K, J);

			for (I = K + 1; I < nblocks; I++) {
				if (block_owner(I, J) != my_id)
					continue;
				bmod(block_at(I, K), urow, block_at(I, J),
				     block_dim(I), cols, dimk);
			}
		}
		if (timed) {
			CLOCK(t4)
			st->diag += (double)(t11 - t1);
			st->perim += (double)(t22 - t2);
			st->interior += (double)(t4 - t3);
			st->barrier += (double)(t2 - t11) + (double)(t3 - t22);
		}
	}
}

static void one_solve(long my_id)
{
	struct lu_stats st;
	unsigned long myrs = 0, mydone = 0, myrf = 0;
	volatile double sink;

	memset(&st, 0, sizeof(st));
	/* Everyone waits for main to finish initialising, then warms up. */
	BARRIER(Global->start, P)
	sink = touch_blocks(my_id);
	(void)sink;
	BARRIER(Global->start, P)

	if (my_id == 0 || dostats)
		CLOCK(myrs)
	factor(my_id, &st);
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
	}
}

/* Entry point of every process, main included.  Its number is its rank:
 * SPLASH-2 hands numbers out in arrival order under a lock, an order that
 * changes from run to run, and with it which cluster of a DSM holds which
 * share of the data (docs/splash2.md, "Process numbers"). */
static void slave_start(void)
{
	long my_id;

	GET_PID(my_id)

	one_solve(my_id);
}

/*
 * Solves L U x = rhs sequentially with the factored blocks and checks x
 * against the all-ones solution and the residual against the regenerated
 * original matrix.  Returns 0 when both are within LU_TOLERANCE.
 */
static int check_result(void)
{
	double *x = malloc((size_t)n * sizeof(*x));
	double *r = malloc((size_t)n * sizeof(*r));
	double *rowsum = malloc((size_t)n * sizeof(*rowsum));
	double max_err = 0.0, max_r = 0.0, anorm = 0.0, xnorm = 0.0;
	double bnorm = 0.0, scaled;
	long i, j;
	int ok;

	if (x == NULL || r == NULL || rowsum == NULL) {
		fprintf(stderr, "lucontig: out of memory for the check\n");
		free(x);
		free(r);
		free(rowsum);
		return -1;
	}
	for (i = 0; i < n; i++)
		x[i] = rhs[i];
	/* Forward with L (its own diagonal), backward with unit U. */
	for (j = 0; j < n; j++) {
		x[j] /= *element(j, j);
		for (i = j + 1; i < n; i++)
			x[i] -= *element(i, j) * x[j];
	}
	for (j = n - 1; j > 0; j--)
		for (i = 0; i < j; i++)
			x[i] -= *element(i, j) * x[j];

	for (i = 0; i < n; i++) {
		r[i] = rhs[i];
		rowsum[i] = 0.0;
		max_err = lm_splash_max(max_err, fabs(x[i] - 1.0));
		xnorm = lm_splash_max(xnorm, fabs(x[i]));
		bnorm = lm_splash_max(bnorm, fabs(rhs[i]));
	}
	for (j = 0; j < n; j++) {
		for (i = 0; i < n; i++) {
			double aij = matrix_entry(i, j);

			r[i] -= aij * x[j];
			rowsum[i] += fabs(aij);
		}
	}
	for (i = 0; i < n; i++) {
		max_r = lm_splash_max(max_r, fabs(r[i]));
		anorm = lm_splash_max(anorm, rowsum[i]);
	}
	scaled = max_r / (anorm * xnorm + bnorm);
	/* Written so that a NaN anywhere fails. */
	ok = max_err <= LU_TOLERANCE && scaled <= LU_TOLERANCE;
	printf("Max error |x - 1|                 : %16.3e\n", max_err);
	printf("Scaled residual                   : %16.3e\n", scaled);
	if (ok)
		printf("TEST PASSED\n");
	else
		printf("TEST FAILED: tolerance %.1e\n", LU_TOLERANCE);
	free(x);
	free(r);
	free(rowsum);
	return ok ? 0 : -1;
}

static void print_stats(void)
{
	static const size_t cols[] = {
		offsetof(struct lu_stats, total),
		offsetof(struct lu_stats, diag),
		offsetof(struct lu_stats, perim),
		offsetof(struct lu_stats, interior),
		offsetof(struct lu_stats, barrier),
	};

	lm_splash_print_stats(
		"                            PROCESS STATISTICS\n"
		"              Total      Diagonal     Perimeter      "
		"Interior       Barrier\n"
		" Proc         Time         Time         Time           "
		"Time          Time\n",
		Global->stats, sizeof(struct lu_stats), cols,
		(int)(sizeof(cols) / sizeof(cols[0])), P);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: lucontig <options>\n"
		"options:\n"
		"  -nN : Decompose NxN matrix (default %d).\n"
		"  -pP : P = number of processors (default %d, at most %d).\n"
		"  -bB : Use a block size of B (default %d).\n"
		"  -s  : Print individual processor timing statistics.\n"
		"  -t  : Test output (solve and check the residual).\n"
		"  -o  : Print out matrix values.\n"
		"  -h  : Print out command line options.\n",
		LU_DEFAULT_N, LU_DEFAULT_P, LU_MAX_P, LU_DEFAULT_B);
}

int main(int argc, char *argv[])
{
	unsigned long start;
	int ch, failed = 0, p_given = 0, status;
	long p;

	MAIN_INITENV
	CLOCK(start)

	while ((ch = getopt(argc, argv, "n:p:b:stoh")) != -1) {
		int bad = 0;

		switch (ch) {
		case 'n':
			bad = lm_splash_parse_positive(optarg, 1L << 20, &n);
			break;
		case 'p':
			bad = lm_splash_parse_positive(optarg, LU_MAX_P, &P);
			p_given = 1;
			break;
		case 'b':
			bad = lm_splash_parse_positive(optarg, 1L << 20, &block_size);
			break;
		default:
			bad = lm_splash_flag_option(ch, &dostats, &test_result,
						    &doprint);
			break;
		}
		status = lm_splash_option_done("lucontig", ch, bad, usage);
		if (status >= 0)
			MAIN_END(status)
	}
	status = lm_splash_end_options("lucontig", argc, argv, usage,
				       p_given, &P);
	if (status != 0)
		MAIN_END(status)

	printf("\n");
	printf("Blocked Dense LU Factorization, Contiguous Blocks\n");
	printf("     %ld by %ld Matrix\n", n, n);
	printf("     %ld Processors\n", P);
	printf("     %ld by %ld Element Blocks\n", block_size, block_size);
	printf("\n");
	printf("\n");

	/* The squarest grid: the largest divisor of P not above sqrt(P). */
	num_rows = (long)sqrt((double)P);
	while ((num_rows + 1) * (num_rows + 1) <= P)
		num_rows++;
	while (num_rows * num_rows > P)
		num_rows--;
	while (P % num_rows != 0)
		num_rows--;
	num_cols = P / num_rows;
	nblocks = (n + block_size - 1) / block_size;

	rhs = (double *)G_MALLOC((size_t)n * sizeof(double));
	Global = (struct lu_global *)G_MALLOC(sizeof(struct lu_global));
	if (rhs == NULL || Global == NULL || alloc_blocks() != 0) {
		fprintf(stderr, "lucontig: cannot allocate shared memory for "
			"n = %ld\n", n);
		MAIN_END(1)
	}
	Global->stats = (struct lu_stats *)G_MALLOC((size_t)P *
						    sizeof(struct lu_stats));
	if (Global->stats == NULL) {
		fprintf(stderr, "lucontig: cannot allocate shared memory\n");
		MAIN_END(1)
	}
	memset(Global->stats, 0, (size_t)P * sizeof(struct lu_stats));
	Global->starttime = start;
	BARINIT(Global->start, P)

	init_matrix();
	if (doprint) {
		printf("Matrix before decomposition:\n");
		print_matrix();
	}

	/* Process 0 is main itself. */
	for (p = 1; p < P; p++)
		CREATE(slave_start)
	slave_start();
	WAIT_FOR_END(P - 1)

	if (doprint) {
		printf("\nMatrix after decomposition:\n");
		print_matrix();
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
