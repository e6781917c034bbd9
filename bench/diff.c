/* Micro-benchmark of the diff codec (common/diff.c) against memcpy of a
 * page, the limit a page copy can reach (DESIGN.md §7).
 *
 * Each operation runs ITERS times per round on one hot 4 KiB page (twin,
 * page and output stay in L1: this measures the code, not memory).  The
 * median over ROUNDS rounds is printed in ns per page, and the median of
 * the per-round ratios to memcpy of a page.   usage: diff [--csv] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diff.h"

#define PAGE 4096
#define ROUNDS 11
#define ITERS 20000

struct ctx {
	uint8_t *twin, *clean, *sparse, *full, *doubles, *dst;
	uint8_t *out;
	size_t cap;
	uint8_t *diff_clean, *diff_sparse, *diff_full, *diff_doubles;
	size_t len_clean, len_sparse, len_full, len_doubles;
	struct lm_delta delta;
};

struct op {
	const char *name;
	void (*run)(struct ctx *c);
	enum lm_diff_path needs; /* skipped on a CPU without this path */
};

/* Keeps the compiler from dropping work whose result nobody reads. */
static inline void clobber(void *p)
{
	__asm__ __volatile__("" : : "g"(p) : "memory");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void encode(struct ctx *c, const uint8_t *page)
{
	size_t len;

	if (lm_diff_encode(c->twin, page, PAGE, c->out, c->cap, &len) != 0)
		abort();
	clobber(c->out);
}

static void apply(struct ctx *c, const uint8_t *diff, size_t len)
{
	if (lm_diff_apply(c->dst, PAGE, diff, len) != 0)
		abort();
	clobber(c->dst);
}

static void op_memcpy(struct ctx *c)
{
	memcpy(c->dst, c->sparse, PAGE);
	clobber(c->dst);
}

static void op_memcmp(struct ctx *c)
{
	if (memcmp(c->twin, c->clean, PAGE) != 0)
		abort();
	clobber(c->clean);
}

static void op_encode_clean(struct ctx *c)
{
	encode(c, c->clean);
}

static void op_encode_sparse(struct ctx *c)
{
	encode(c, c->sparse);
}

static void op_encode_full(struct ctx *c)
{
	encode(c, c->full);
}

static void op_apply_clean(struct ctx *c)
{
	apply(c, c->diff_clean, c->len_clean);
}

static void op_apply_sparse(struct ctx *c)
{
	apply(c, c->diff_sparse, c->len_sparse);
}

static void op_apply_full(struct ctx *c)
{
	apply(c, c->diff_full, c->len_full);
}

/* LU's pages: the low six bytes of every double change, so the diff is
 * masked groups.  Each runs on the CPU's best path and again, as *_avx2
 * and *_narrow, on the paths below it (common/diff.h). */
static void op_encode_doubles(struct ctx *c)
{
	encode(c, c->doubles);
}

static void op_apply_doubles(struct ctx *c)
{
	apply(c, c->diff_doubles, c->len_doubles);
}

/* As a client takes an update: checked as it is written. */
static void op_apply_checked_doubles(struct ctx *c)
{
	if (lm_diff_apply_checked(c->dst, NULL, PAGE, c->diff_doubles,
				  c->len_doubles) != 0)
		abort();
	clobber(c->dst);
}

static void delta_add_doubles(struct ctx *c)
{
	lm_delta_reset(&c->delta);
	lm_delta_add_valid_diff(&c->delta, c->diff_doubles, c->len_doubles);
	clobber(c->delta.bytes);
}

static void op_delta_add_doubles(struct ctx *c)
{
	delta_add_doubles(c);
}

static void op_delta_encode_doubles(struct ctx *c)
{
	size_t len;

	/* the delta holds the doubles' diff from the op before */
	if (lm_delta_encode(&c->delta, c->out, c->cap, &len) != 0)
		abort();
	clobber(c->out);
}

/* fn on the given path, the CPU's best restored after it. */
static void on_path(struct ctx *c, enum lm_diff_path path,
		    void (*fn)(struct ctx *c))
{
	lm_diff_set_path(path);
	fn(c);
	lm_diff_set_path(LM_DIFF_AVX512);
}

#define LOWER_PATHS(op)                                        \
	static void op##_avx2(struct ctx *c)                   \
	{                                                      \
		on_path(c, LM_DIFF_AVX2, op);                  \
	}                                                      \
	static void op##_narrow(struct ctx *c)                 \
	{                                                      \
		on_path(c, LM_DIFF_NARROW, op);                \
	}
LOWER_PATHS(op_encode_doubles)
LOWER_PATHS(op_apply_doubles)
LOWER_PATHS(op_delta_add_doubles)
LOWER_PATHS(op_delta_encode_doubles)

static void op_delta_add_sparse(struct ctx *c)
{
	lm_delta_reset(&c->delta);
	if (lm_delta_add_diff(&c->delta, c->diff_sparse, c->len_sparse) != 0)
		abort();
	clobber(c->delta.bytes);
}

static void op_delta_encode_sparse(struct ctx *c)
{
	size_t len;

	/* the delta holds the sparse diff from the op before */
	if (lm_delta_encode(&c->delta, c->out, c->cap, &len) != 0)
		abort();
	clobber(c->out);
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

/* ns per call of op, averaged over ITERS calls. */
static double time_op(struct ctx *c, const struct op *op)
{
	uint64_t t0 = now_ns();

	for (int i = 0; i < ITERS; i++)
		op->run(c);
	return (double)(now_ns() - t0) / ITERS;
}

static uint8_t *page_alloc(void)
{
	uint8_t *p = aligned_alloc(PAGE, PAGE);

	if (!p) {
		fprintf(stderr, "bench/diff: out of memory\n");
		exit(1);
	}
	return p;
}

static uint8_t *make_diff(struct ctx *c, const uint8_t *page, size_t *len)
{
	uint8_t *d = malloc(c->cap);

	if (!d || lm_diff_encode(c->twin, page, PAGE, d, c->cap, len) != 0) {
		fprintf(stderr, "bench/diff: cannot build a diff\n");
		exit(1);
	}
	return d;
}

#define ANY LM_DIFF_NARROW
#define AVX2 LM_DIFF_AVX2

int main(int argc, char **argv)
{
	static const struct op ops[] = {
		{ "memcpy", op_memcpy, ANY },
		{ "memcmp_equal", op_memcmp, ANY },
		{ "encode_clean", op_encode_clean, ANY },
		{ "encode_1word_per_64B", op_encode_sparse, ANY },
		{ "encode_whole_page", op_encode_full, ANY },
		{ "apply_clean", op_apply_clean, ANY },
		{ "apply_1word_per_64B", op_apply_sparse, ANY },
		{ "apply_whole_page", op_apply_full, ANY },
		{ "encode_doubles", op_encode_doubles, ANY },
		{ "encode_doubles_avx2", op_encode_doubles_avx2, AVX2 },
		{ "encode_doubles_narrow", op_encode_doubles_narrow, ANY },
		{ "apply_doubles", op_apply_doubles, ANY },
		{ "apply_doubles_avx2", op_apply_doubles_avx2, AVX2 },
		{ "apply_doubles_narrow", op_apply_doubles_narrow, ANY },
		{ "apply_checked_doubles", op_apply_checked_doubles, ANY },
		{ "delta_add_doubles", op_delta_add_doubles, ANY },
		{ "delta_add_doubles_avx2", op_delta_add_doubles_avx2, AVX2 },
		{ "delta_add_doubles_narrow", op_delta_add_doubles_narrow, ANY },
		{ "delta_encode_doubles", op_delta_encode_doubles, ANY },
		{ "delta_encode_doubles_avx2", op_delta_encode_doubles_avx2,
		  AVX2 },
		{ "delta_encode_doubles_narrow",
		  op_delta_encode_doubles_narrow, ANY },
		{ "delta_add_1word_per_64B", op_delta_add_sparse, ANY },
		{ "delta_encode_1word_per_64B", op_delta_encode_sparse, ANY },
	};
	enum { NOPS = sizeof(ops) / sizeof(ops[0]) };
	int csv = argc > 1 && strcmp(argv[1], "--csv") == 0;
	double ns[NOPS][ROUNDS];
	enum lm_diff_path best = lm_diff_current_path();
	struct ctx c;
	uint32_t seed = 12345;

	c.twin = page_alloc();
	c.clean = page_alloc();
	c.sparse = page_alloc();
	c.full = page_alloc();
	c.doubles = page_alloc();
	c.dst = page_alloc();
	c.cap = lm_diff_bound(PAGE);
	c.out = malloc(c.cap);
	if (!c.out || lm_delta_init(&c.delta, PAGE) != 0) {
		fprintf(stderr, "bench/diff: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < PAGE; i++) {
		seed = seed * 1103515245u + 12345u;
		c.twin[i] = (uint8_t)(seed >> 16);
	}
	memcpy(c.clean, c.twin, PAGE);
	memcpy(c.sparse, c.twin, PAGE);
	for (size_t i = 0; i < PAGE; i += 64)
		for (size_t k = 0; k < 8; k++)
			c.sparse[i + k] = (uint8_t)~c.twin[i + k];
	for (size_t i = 0; i < PAGE; i++)
		c.full[i] = (uint8_t)~c.twin[i];
	for (size_t i = 0; i < PAGE; i++)
		c.doubles[i] = i % 8 < 6 ? (uint8_t)~c.twin[i] : c.twin[i];
	memcpy(c.dst, c.twin, PAGE);
	c.diff_clean = make_diff(&c, c.clean, &c.len_clean);
	c.diff_sparse = make_diff(&c, c.sparse, &c.len_sparse);
	c.diff_full = make_diff(&c, c.full, &c.len_full);
	c.diff_doubles = make_diff(&c, c.doubles, &c.len_doubles);

	/* Rounds go over every op in turn, and each ratio is taken within a
	 * round, so that a change of clock speed or a noisy neighbour during
	 * the run shifts memcpy and the op alike. */
	for (size_t i = 0; i < NOPS; i++)
		for (int k = 0; ops[i].needs <= best && k < ITERS / 10; k++)
			ops[i].run(&c); /* warm caches, branches */
	for (int r = 0; r < ROUNDS; r++)
		for (size_t i = 0; i < NOPS; i++)
			if (ops[i].needs <= best)
				ns[i][r] = time_op(&c, &ops[i]);
	if (csv)
		printf("op,ns_per_page,ratio_to_memcpy\n");
	else
		printf("%-28s %12s %10s   (4 KiB page, median of %d x %d)\n",
		       "op", "ns/page", "x memcpy", ROUNDS, ITERS);
	for (size_t i = 0; i < NOPS; i++) {
		double ratio[ROUNDS], med;

		if (ops[i].needs > best)
			continue;
		for (int r = 0; r < ROUNDS; r++)
			ratio[r] = ns[i][r] / ns[0][r];
		med = median(ratio, ROUNDS);
		if (csv)
			printf("%s,%.1f,%.2f\n", ops[i].name,
			       median(ns[i], ROUNDS), med);
		else
			printf("%-28s %12.1f %10.2f\n", ops[i].name,
			       median(ns[i], ROUNDS), med);
	}
	if (!csv)
		printf("diff sizes: clean %zu, 1 word/64 B %zu, whole %zu "
		       "bytes\n",
		       c.len_clean, c.len_sparse, c.len_full);
	lm_delta_free(&c.delta);
	free(c.diff_clean);
	free(c.diff_sparse);
	free(c.diff_full);
	free(c.out);
	free(c.twin);
	free(c.clean);
	free(c.sparse);
	free(c.full);
	free(c.dst);
	return 0;
}
