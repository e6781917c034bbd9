/*
 * SPLASH-2 Ocean, contiguous partitions: a wind-driven ocean basin on a
 * beta-plane, stepped in time with leapfrog, whose stream function comes
 * from a Poisson equation solved by parallel multigrid each step.  Every
 * process owns a square-ish block of the grid at every multigrid level,
 * stored contiguously in its own shared region.  Written for Lemuria in
 * PARMACS m4 macros: the same source builds ocean-pthread
 * (macros/pthread.m4) and ocean (macros/lemuria.m4).
 *
 * Note for editors: m4 expands macro names anywhere, comments and strings
 * included, so upper-case macro names appear here only as macro calls.
 */

MAIN_ENV

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "splash_util.h"

#define OCEAN_DEFAULT_N 258
#define OCEAN_DEFAULT_P 1
#define OCEAN_DEFAULT_TOL 1e-7
#define OCEAN_DEFAULT_RES 20000.0	/* metres between grid points */
#define OCEAN_DEFAULT_DT 28800.0	/* seconds per time step */
#define OCEAN_DEFAULT_STEPS 4
#define OCEAN_MAX_P 1024
#define OCEAN_MAX_N 4098
#define OCEAN_MAX_STEPS 100000
#define OCEAN_MAX_LEVELS 16
#define OCEAN_MAX_CYCLES 60	/* V-cycles per solve before giving up */
#define OCEAN_NU1 2		/* red-black sweeps before the coarse grid */
#define OCEAN_NU2 2		/* and after it */
#define OCEAN_COARSE_SIDE 16	/* coarsest grid: at most this per side */
#define OCEAN_COARSE_TOL 1e-6	/* coarsest grid, relative to its rhs */
#define OCEAN_COARSE_SWEEPS 2000
#define OCEAN_PAGE 4096
#define OCEAN_CHECK_SLACK 2.0	/* independent residual vs tolerance */

/* The physics (SI units): see docs/splash2-ocean.md. */
#define OCEAN_BETA 2.0e-11	/* df/dy, 1/(m s) */
#define OCEAN_FRICTION 1.0e-6	/* bottom friction, 1/s */
#define OCEAN_TAU0 0.1		/* wind stress amplitude, N/m^2 */
#define OCEAN_RHO 1000.0	/* density, kg/m^3 */
#define OCEAN_DEPTH 500.0	/* layer depth, m */

/* The arrays every process holds a block of.  psi of the current and the
 * previous time level take turns in fld_psi_a and fld_psi_b; the unknown
 * of the multigrid solve is the older one at level 0 and fld_u below. */
enum ocean_field {
	fld_psi_a,		/* stream function, one time level */
	fld_psi_b,		/* stream function, the other */
	fld_vort,		/* relative vorticity, Laplacian of psi */
	fld_rhs,		/* right-hand side of the solve, every level */
	fld_u,			/* correction on the coarser levels */
	fld_count
};

/* One phase of the computation: each process works on its own block,
 * then all meet at a barrier. */
enum ocean_phase {
	ph_init,		/* zero own blocks and halos */
	ph_laplace,		/* vorticity of psi and of the older psi */
	ph_forcing,		/* explicit step into the rhs, first guess */
	ph_smooth,		/* one red or black half-sweep on a level */
	ph_restrict,		/* residual of a level averaged onto the next */
	ph_coarse,		/* process 0 solves the coarsest level */
	ph_prolong_coarse,	/* coarsest solution added to the level above */
	ph_prolong,		/* a level's correction added to the one above */
	ph_check,		/* process 0 recomputes the residual (-t) */
	ph_count
};

/* How the ghost cells on the basin walls are filled when a block's ghost
 * ring is brought up to date.  psi = 0 lies on the wall, half-way between
 * the last interior point and its ghost. */
enum ocean_wall {
	wall_zero,	/* ghost 0: stencils add the wall term themselves */
	wall_odd	/* ghost = -interior: for interpolation, derivatives */
};

/* Per-process timings, microseconds; filled in at the end of the run. */
struct ocean_stats {
	double total;		/* time steps, start to finish */
	double explicit_part;	/* Laplacians, Jacobian, forcing */
	double relax;		/* red-black sweeps */
	double transfer;	/* restriction, coarse solve, prolongation */
	double barrier;		/* waiting at the barrier closing a phase */
};

/* What one multigrid solve achieved, one per time step. */
struct ocean_solve {
	long cycles;		/* V-cycles until the residual was small */
	double rmax;		/* final max |residual| seen by the solver */
	double fmax;		/* max |rhs| */
	double check_rmax;	/* same, recomputed independently (-t) */
	double check_fmax;
};

/* Shared state, allocated by main from shared memory. */
struct ocean_global {
	struct ocean_stats *stats;	/* one per process */
	unsigned long starttime;	/* main started */
	unsigned long rs;	/* process 0 began the time steps */
	unsigned long rf;	/* all processes finished */
	BARDEC(bar)
};

/*
 * Everything a process needs to run the simulation.  The geometry and the
 * pointers are set by main and the same everywhere; the control state
 * (which psi is current, which half of each halo was published last)
 * changes identically in every process, since all take the same path, so
 * each keeps its own copy.  The same structure drives the sequential
 * reference of the check, with private memory and parallel = 0.
 */
struct ocean_ctx {
	int parallel;		/* 1: one process each; 0: main runs all */
	long nprocs, prow, pcol;	/* process grid: prow x pcol */
	long m;			/* interior points per side of the basin */
	long coarse;		/* levels 0 (finest) .. coarse */
	long rows[OCEAN_MAX_LEVELS];	/* a block's interior at level l */
	long cols[OCEAN_MAX_LEVELS];
	double h[OCEAN_MAX_LEVELS];	/* grid spacing at level l, metres */
	size_t goff[fld_count][OCEAN_MAX_LEVELS];	/* in a grid region */
	size_t hoff[fld_count][OCEAN_MAX_LEVELS];	/* in a halo region */
	size_t grid_bytes, halo_bytes;	/* one process's regions */
	char **grid_region;	/* nprocs: blocks of every field and level */
	char **halo_region;	/* nprocs: published block edges */
	long gcr, gcc;		/* the coarsest level, whole basin */
	double *coarse_f;	/* its rhs, gcr x gcc */
	double *coarse_u;	/* its solution with the ghost ring */
	double *slots;		/* 2 per process: max |r|, max |f| at level 0 */
	struct ocean_solve *solves;	/* nsteps, written by process 0 */
	struct ocean_stats *stats;	/* this process's, or NULL */
	/* control state */
	int pub[fld_count][OCEAN_MAX_LEVELS];	/* halo half last published */
	int flip[fld_count][OCEAN_MAX_LEVELS];	/* published in this phase */
	int cur;		/* 0: psi is fld_psi_a, 1: fld_psi_b */
	long step;
	int check;		/* process 0 checks every solve */
};

/*
 * Set by main before the workers start and only read afterwards: plain
 * globals, as in the SPLASH-2 original, so the runtime must give every
 * process main's values.
 */
static long n = OCEAN_DEFAULT_N;
static long P = OCEAN_DEFAULT_P;
static double tolerance = OCEAN_DEFAULT_TOL;
static double res = OCEAN_DEFAULT_RES;
static double dtau = OCEAN_DEFAULT_DT;
static long nsteps = OCEAN_DEFAULT_STEPS;
static int dostats;
static int test_result;
static int doprint;
static struct ocean_ctx template_ctx;	/* pointers into shared memory */
static struct ocean_global *Global;

/* ------------------------------------------------------------------ */
/* Geometry */

/* acc, or |v| when larger; a NaN makes it infinite, so it fails every
 * bound from then on. */
static double max_abs(double acc, double v)
{
	if (isnan(v) || isnan(acc))
		return INFINITY;
	return fabs(v) > acc ? fabs(v) : acc;
}

/* The larger of a and b, inline (fmax is a library call); NaNs are the
 * caller's business. */
static inline double bigger(double a, double b)
{
	return a > b ? a : b;
}

/* Columns of the process grid for nprocs (a power of 2): the squarest
 * grid, with columns >= rows. */
static long grid_cols(long nprocs)
{
	long k = 0;

	while ((1L << k) < nprocs)
		k++;
	return nprocs >> (k / 2);
}

static double *grid_at(const struct ocean_ctx *c, int f, long l, long q)
{
	return (double *)(c->grid_region[q] + c->goff[f][l]);
}

static double *halo_at(const struct ocean_ctx *c, int f, long l, long q,
		       int half)
{
	const long len = 2 * (c->rows[l] + c->cols[l]);

	return (double *)(c->halo_region[q] + c->hoff[f][l]) + half * len;
}

/* The unknown of the solve at level l. */
static int unknown_field(const struct ocean_ctx *c, long l)
{
	if (l > 0)
		return fld_u;
	return c->cur ? fld_psi_a : fld_psi_b;	/* the older psi */
}

static int psi_field(const struct ocean_ctx *c)
{
	return c->cur ? fld_psi_b : fld_psi_a;
}

/* Neighbours of process q in the process grid, -1 at a basin wall.  Rows
 * (index i) run along y, northward; columns (j) along x, eastward. */
static long nb_south(const struct ocean_ctx *c, long q)
{
	return q / c->pcol > 0 ? q - c->pcol : -1;
}

static long nb_north(const struct ocean_ctx *c, long q)
{
	return q / c->pcol < c->prow - 1 ? q + c->pcol : -1;
}

static long nb_west(const struct ocean_ctx *c, long q)
{
	return q % c->pcol > 0 ? q - 1 : -1;
}

static long nb_east(const struct ocean_ctx *c, long q)
{
	return q % c->pcol < c->pcol - 1 ? q + 1 : -1;
}

/* Global row and column (1-based, 1 .. m at level 0) of local (0, 0). */
static long row0(const struct ocean_ctx *c, long l, long q)
{
	return (q / c->pcol) * c->rows[l];
}

static long col0(const struct ocean_ctx *c, long l, long q)
{
	return (q % c->pcol) * c->cols[l];
}

/*
 * Lays out one process's regions: a block of (rows + 2) x (cols + 2)
 * doubles (interior and ghost ring) for each field at each level it is
 * used on, and for each exchanged field two halves of published edges
 * (south row, north row, west column, east column).  Every process's
 * layout is the same, so offsets are kept once.
 */
static void layout_regions(struct ocean_ctx *c)
{
	size_t g = 0, hb = 0;
	long l;
	int f;

	for (f = 0; f < fld_count; f++) {
		for (l = 0; l <= c->coarse; l++) {
			const size_t cells = (size_t)((c->rows[l] + 2) *
						      (c->cols[l] + 2));
			const size_t edges = (size_t)(4 * (c->rows[l] +
							   c->cols[l]));
			int has_grid, has_halo;

			switch (f) {
			case fld_rhs:
				has_grid = l < c->coarse;
				has_halo = 0;
				break;
			case fld_u:
				has_grid = l > 0;
				has_halo = l > 0 && l < c->coarse;
				break;
			default:
				has_grid = l == 0;
				has_halo = l == 0;
				break;
			}
			c->goff[f][l] = (size_t)-1;
			c->hoff[f][l] = (size_t)-1;
			if (has_grid) {
				c->goff[f][l] = g;
				g += (cells * sizeof(double) + 63) & ~(size_t)63;
			}
			if (has_halo) {
				c->hoff[f][l] = hb;
				hb += (edges * sizeof(double) + 63) & ~(size_t)63;
			}
		}
	}
	/* Whole pages: a region of a page or more starts a page on
	 * Lemuria, so no two processes' blocks share one. */
	c->grid_bytes = (g + OCEAN_PAGE - 1) & ~(size_t)(OCEAN_PAGE - 1);
	c->halo_bytes = (hb + OCEAN_PAGE - 1) & ~(size_t)(OCEAN_PAGE - 1);
}

/*
 * Fills in the geometry for nprocs processes (a power of 2) on an m x m
 * basin (m a power of 2, at least twice the columns of the process grid)
 * and allocates the regions, from shared memory when shared, else
 * privately.  Returns 0, or -1 when memory runs out.
 */
static int ctx_setup(struct ocean_ctx *c, long nprocs, int shared)
{
	long l, q;

	memset(c, 0, sizeof(*c));
	c->nprocs = nprocs;
	c->pcol = grid_cols(nprocs);
	c->prow = nprocs / c->pcol;
	c->m = n - 2;
	c->rows[0] = c->m / c->prow;
	c->cols[0] = c->m / c->pcol;
	c->h[0] = res;
	/* Halve while a block still has two points each way (cols <= rows)
	 * and the basin more than OCEAN_COARSE_SIDE: every level costs a
	 * dozen barriers a cycle, a small grid solved by one process one. */
	for (l = 0; c->cols[l] >= 2 && l + 1 < OCEAN_MAX_LEVELS &&
		    (l == 0 || (c->m >> l) > OCEAN_COARSE_SIDE); l++) {
		c->rows[l + 1] = c->rows[l] / 2;
		c->cols[l + 1] = c->cols[l] / 2;
		c->h[l + 1] = 2.0 * c->h[l];
	}
	c->coarse = l;
	c->gcr = c->rows[l] * c->prow;
	c->gcc = c->cols[l] * c->pcol;
	layout_regions(c);

	if (shared) {
		c->grid_region = (char **)G_MALLOC((size_t)nprocs * sizeof(char *));
		c->halo_region = (char **)G_MALLOC((size_t)nprocs * sizeof(char *));
		c->coarse_f = (double *)G_MALLOC((size_t)(c->gcr * c->gcc) *
						 sizeof(double));
		c->coarse_u = (double *)G_MALLOC((size_t)((c->gcr + 2) *
						  (c->gcc + 2)) * sizeof(double));
		c->slots = (double *)G_MALLOC((size_t)(2 * nprocs) *
					      sizeof(double));
		c->solves = (struct ocean_solve *)G_MALLOC((size_t)nsteps *
						sizeof(struct ocean_solve));
	} else {
		c->grid_region = malloc((size_t)nprocs * sizeof(char *));
		c->halo_region = malloc((size_t)nprocs * sizeof(char *));
		c->coarse_f = malloc((size_t)(c->gcr * c->gcc) * sizeof(double));
		c->coarse_u = malloc((size_t)((c->gcr + 2) * (c->gcc + 2)) *
				     sizeof(double));
		c->slots = malloc((size_t)(2 * nprocs) * sizeof(double));
		c->solves = malloc((size_t)nsteps * sizeof(struct ocean_solve));
	}
	if (c->grid_region == NULL || c->halo_region == NULL ||
	    c->coarse_f == NULL || c->coarse_u == NULL || c->slots == NULL ||
	    c->solves == NULL)
		return -1;
	memset(c->solves, 0, (size_t)nsteps * sizeof(struct ocean_solve));
	/* One allocation per process and kind, so that each process's
	 * blocks lie together (its "4-D array" slice). */
	for (q = 0; q < nprocs; q++) {
		if (shared) {
			c->grid_region[q] = (char *)G_MALLOC(c->grid_bytes);
			c->halo_region[q] = (char *)G_MALLOC(c->halo_bytes);
		} else {
			c->grid_region[q] = aligned_alloc(OCEAN_PAGE,
							  c->grid_bytes);
			c->halo_region[q] = aligned_alloc(OCEAN_PAGE,
							  c->halo_bytes);
		}
		if (c->grid_region[q] == NULL || c->halo_region[q] == NULL)
			return -1;
	}
	return 0;
}

/* Releases what ctx_setup allocated privately. */
static void ctx_free_private(struct ocean_ctx *c)
{
	long q;

	if (c->grid_region != NULL)
		for (q = 0; q < c->nprocs; q++)
			free(c->grid_region[q]);
	if (c->halo_region != NULL)
		for (q = 0; q < c->nprocs; q++)
			free(c->halo_region[q]);
	free(c->grid_region);
	free(c->halo_region);
	free(c->coarse_f);
	free(c->coarse_u);
	free(c->slots);
	free(c->solves);
}

/* ------------------------------------------------------------------ */
/* Edge exchange */

/*
 * Copies process q's edge rows and columns of field f at level l into the
 * half of its halo not published last, for the neighbours to read after
 * the barrier.  Two halves, because a neighbour may still be reading the
 * previous edges during the phase that writes the new ones.
 */
static void publish(struct ocean_ctx *c, long q, int f, long l)
{
	const long rows = c->rows[l], cols = c->cols[l], stride = cols + 2;
	const double *g = grid_at(c, f, l, q);
	double *e = halo_at(c, f, l, q, c->pub[f][l] ^ 1);
	long i;

	memcpy(e, &g[stride + 1], (size_t)cols * sizeof(double));
	memcpy(e + cols, &g[rows * stride + 1], (size_t)cols * sizeof(double));
	for (i = 1; i <= rows; i++) {
		e[2 * cols + i - 1] = g[i * stride + 1];
		e[2 * cols + rows + i - 1] = g[i * stride + cols];
	}
	c->flip[f][l] = 1;
}

/* Fills process q's ghost ring of field f at level l (corners excepted)
 * from the edges its neighbours published last, or per the wall rule. */
static void pull(struct ocean_ctx *c, long q, int f, long l,
		 enum ocean_wall wall)
{
	const long rows = c->rows[l], cols = c->cols[l], stride = cols + 2;
	const int half = c->pub[f][l];
	const long s = nb_south(c, q), no = nb_north(c, q);
	const long w = nb_west(c, q), e = nb_east(c, q);
	double *g = grid_at(c, f, l, q);
	long i, j;

	if (s >= 0) {
		memcpy(&g[1], halo_at(c, f, l, s, half) + cols,
		       (size_t)cols * sizeof(double));
	} else {
		for (j = 1; j <= cols; j++)
			g[j] = wall == wall_odd ? -g[stride + j] : 0.0;
	}
	if (no >= 0) {
		memcpy(&g[(rows + 1) * stride + 1], halo_at(c, f, l, no, half),
		       (size_t)cols * sizeof(double));
	} else {
		for (j = 1; j <= cols; j++)
			g[(rows + 1) * stride + j] =
				wall == wall_odd ? -g[rows * stride + j] : 0.0;
	}
	if (w >= 0) {
		const double *src = halo_at(c, f, l, w, half) + 2 * cols + rows;

		for (i = 1; i <= rows; i++)
			g[i * stride] = src[i - 1];
	} else {
		for (i = 1; i <= rows; i++)
			g[i * stride] = wall == wall_odd ? -g[i * stride + 1]
							 : 0.0;
	}
	if (e >= 0) {
		const double *src = halo_at(c, f, l, e, half) + 2 * cols;

		for (i = 1; i <= rows; i++)
			g[i * stride + cols + 1] = src[i - 1];
	} else {
		for (i = 1; i <= rows; i++)
			g[i * stride + cols + 1] =
				wall == wall_odd ? -g[i * stride + cols] : 0.0;
	}
}

/* ------------------------------------------------------------------ */
/* Kernels on one process's block */

/*
 * The discrete Laplacian is the 5-point one, with Dirichlet psi = 0 on the
 * walls half a cell outside the outermost points.  With wall_zero ghosts
 * the stencil's centre weight is 4 plus one per adjacent wall; these give
 * it for a row and for a point of that row.
 */
static double wall_rows(const struct ocean_ctx *c, long l, long q, long i)
{
	double w = 0.0;

	if (i == 1 && nb_south(c, q) < 0)
		w += 1.0;
	if (i == c->rows[l] && nb_north(c, q) < 0)
		w += 1.0;
	return w;
}

static double centre_weight(const struct ocean_ctx *c, long l, long q,
			    double wrow, long j)
{
	double d = 4.0 + wrow;

	if (j == 1 && nb_west(c, q) < 0)
		d += 1.0;
	if (j == c->cols[l] && nb_east(c, q) < 0)
		d += 1.0;
	return d;
}

/* Gauss-Seidel on the points of one colour ((global i + j) % 2) of
 * Laplace(u) = f; the other colour and the ghosts are only read.  The
 * centre weight is 4 but at a wall, so the divisions are multiplications
 * by a row's inverse except at the two ends of a row. */
static void relax(struct ocean_ctx *c, long q, long l, int colour)
{
	const long rows = c->rows[l], cols = c->cols[l], stride = cols + 2;
	const long gi0 = row0(c, l, q), gj0 = col0(c, l, q);
	const double h2 = c->h[l] * c->h[l];
	double *restrict u = grid_at(c, unknown_field(c, l), l, q);
	const double *restrict f = grid_at(c, fld_rhs, l, q);
	long i, j;

	for (i = 1; i <= rows; i++) {
		const double wrow = wall_rows(c, l, q, i);
		const double inv = 1.0 / (4.0 + wrow);
		const double inv1 = 1.0 / centre_weight(c, l, q, wrow, 1);
		const double invn = 1.0 / centre_weight(c, l, q, wrow, cols);
		double *ui = &u[i * stride];
		const double *up = ui + stride, *dn = ui - stride;
		const double *fi = &f[i * stride];

		j = 1 + ((gi0 + i + gj0 + 1 + colour) & 1);
		for (; j <= cols; j += 2) {
			const double d = j == 1 ? inv1 : j == cols ? invn : inv;

			ui[j] = (ui[j - 1] + ui[j + 1] + up[j] + dn[j] -
				 h2 * fi[j]) * d;
		}
	}
}

/*
 * Residual f - Laplace(u) of level l, averaged over each 2 x 2 cell onto
 * level l + 1: into its rhs, or into the shared coarsest rhs when l + 1
 * is the coarsest level.  The coarse correction starts from zero.  At
 * level 0 the largest |residual| and |f| go to the process's slots.
 */
static void restrict_residual(struct ocean_ctx *c, long q, long l)
{
	const long rows = c->rows[l], cols = c->cols[l], stride = cols + 2;
	const long cstride = c->cols[l + 1] + 2;
	const double inv_h2 = 1.0 / (c->h[l] * c->h[l]);
	const double *u = grid_at(c, unknown_field(c, l), l, q);
	const double *f = grid_at(c, fld_rhs, l, q);
	const int to_coarsest = l + 1 == c->coarse;
	double rbig = 0.0, fbig = 0.0, nan_guard = 0.0;
	long i, j;

	for (i = 1; i <= rows; i += 2) {
		double d0[2], d1[2];	/* centre weights, rows i and i + 1 */
		double *dst;
		int k;

		for (k = 0; k < 2; k++) {
			const double w = wall_rows(c, l, q, i + k);

			(k ? d1 : d0)[0] = 4.0 + w;
			(k ? d1 : d0)[1] = 4.0 + w;
		}
		if (to_coarsest)
			dst = &c->coarse_f[(row0(c, l + 1, q) + i / 2) * c->gcc +
					   col0(c, l + 1, q) - 1];
		else
			dst = &grid_at(c, fld_rhs, l + 1, q)[(i / 2 + 1) *
							      cstride];
		for (j = 1; j <= cols; j += 2) {
			const long x = i * stride + j, y = x + stride;
			const int west = j == 1 && nb_west(c, q) < 0;
			const int east = j + 1 == cols && nb_east(c, q) < 0;
			const double a0 = d0[0] + west, a1 = d0[1] + east;
			const double b0 = d1[0] + west, b1 = d1[1] + east;
			const double r0 = f[x] - (u[x - 1] + u[x + 1] +
						  u[x - stride] + u[x + stride] -
						  a0 * u[x]) * inv_h2;
			const double r1 = f[x + 1] - (u[x] + u[x + 2] +
						      u[x + 1 - stride] +
						      u[x + 1 + stride] -
						      a1 * u[x + 1]) * inv_h2;
			const double r2 = f[y] - (u[y - 1] + u[y + 1] +
						  u[x] + u[y + stride] -
						  b0 * u[y]) * inv_h2;
			const double r3 = f[y + 1] - (u[y] + u[y + 2] +
						      u[x + 1] +
						      u[y + 1 + stride] -
						      b1 * u[y + 1]) * inv_h2;
			const double m01 = bigger(fabs(r0), fabs(r1));
			const double m23 = bigger(fabs(r2), fabs(r3));
			const double mf = bigger(bigger(fabs(f[x]), fabs(f[x + 1])),
					       bigger(fabs(f[y]), fabs(f[y + 1])));

			rbig = bigger(rbig, bigger(m01, m23));
			fbig = bigger(fbig, mf);
			nan_guard += (r0 + r1) + (r2 + r3);
			dst[j / 2 + 1] = 0.25 * ((r0 + r1) + (r2 + r3));
		}
	}
	if (isnan(nan_guard))	/* fmax ignores NaNs: make them fail */
		rbig = INFINITY;
	if (l == 0) {
		c->slots[2 * q] = rbig;
		c->slots[2 * q + 1] = fbig;
	}
	if (!to_coarsest) {
		memset(grid_at(c, fld_u, l + 1, q), 0,
		       (size_t)((c->rows[l + 1] + 2) * cstride) * sizeof(double));
		publish(c, q, fld_u, l + 1);
	}
}

/*
 * Adds the correction of level l + 1 (block uc, ghost ring filled with
 * wall_odd) to the unknown of level l.  Each fine point takes
 * (2 centre + nearer x neighbour + nearer y neighbour) / 4 of the coarse
 * values: linear interpolation, exact for linear functions.
 */
static void prolong(struct ocean_ctx *c, long q, long l, const double *uc)
{
	const long rc = c->rows[l + 1], cc = c->cols[l + 1];
	const long cs = cc + 2, fs = c->cols[l] + 2;
	double *uf = grid_at(c, unknown_field(c, l), l, q);
	long I, J;

	for (I = 1; I <= rc; I++) {
		for (J = 1; J <= cc; J++) {
			const double c0 = 2.0 * uc[I * cs + J];
			const double s = uc[(I - 1) * cs + J];
			const double no = uc[(I + 1) * cs + J];
			const double w = uc[I * cs + J - 1];
			const double e = uc[I * cs + J + 1];
			double *f0 = &uf[(2 * I - 1) * fs + 2 * J - 1];
			double *f1 = f0 + fs;

			f0[0] += 0.25 * (c0 + s + w);
			f0[1] += 0.25 * (c0 + s + e);
			f1[0] += 0.25 * (c0 + no + w);
			f1[1] += 0.25 * (c0 + no + e);
		}
	}
	publish(c, q, unknown_field(c, l), l);
}

/*
 * The coarsest level, whole basin, solved by one process: red-black SOR
 * from zero until the residual is OCEAN_COARSE_TOL of the rhs, then the
 * ghost ring set per wall_odd for the interpolation.
 */
static void coarse_solve(struct ocean_ctx *c)
{
	const long R = c->gcr, C = c->gcc, s = C + 2;
	const double h2 = c->h[c->coarse] * c->h[c->coarse];
	const long big = R > C ? R : C;
	const double omega = 2.0 / (1.0 + sin(M_PI / (double)(big + 1)));
	double *u = c->coarse_u;
	const double *f = c->coarse_f;
	double fmax = 0.0;
	long i, j, sweep;

	memset(u, 0, (size_t)((R + 2) * s) * sizeof(double));
	for (i = 0; i < R * C; i++)
		fmax = fmax > fabs(f[i]) ? fmax : fabs(f[i]);
	for (sweep = 0; sweep < OCEAN_COARSE_SWEEPS && fmax > 0.0; sweep++) {
		double rmax = 0.0;
		int colour;

		for (colour = 0; colour < 2; colour++) {
			for (i = 1; i <= R; i++) {
				for (j = 1 + ((i + 1 + colour) & 1); j <= C;
				     j += 2) {
					const double d = 4.0 + (i == 1) +
							 (i == R) + (j == 1) +
							 (j == C);
					const long x = i * s + j;
					const double gs =
						(u[x - 1] + u[x + 1] + u[x - s] +
						 u[x + s] -
						 h2 * f[(i - 1) * C + j - 1]) / d;

					u[x] += omega * (gs - u[x]);
				}
			}
		}
		for (i = 1; i <= R; i++) {
			for (j = 1; j <= C; j++) {
				const double d = 4.0 + (i == 1) + (i == R) +
						 (j == 1) + (j == C);
				const long x = i * s + j;
				const double r = f[(i - 1) * C + j - 1] -
						 (u[x - 1] + u[x + 1] + u[x - s] +
						  u[x + s] - d * u[x]) / h2;

				rmax = rmax > fabs(r) ? rmax : fabs(r);
			}
		}
		if (rmax <= OCEAN_COARSE_TOL * fmax)
			break;
	}
	for (j = 1; j <= C; j++) {
		u[j] = -u[s + j];
		u[(R + 1) * s + j] = -u[R * s + j];
	}
	for (i = 1; i <= R; i++) {
		u[i * s] = -u[i * s + 1];
		u[i * s + C + 1] = -u[i * s + C];
	}
}

/* Wind stress curl over rho H at global row gi: a single gyre. */
static double wind_forcing(const struct ocean_ctx *c, long gi)
{
	const double basin = (double)c->m * c->h[0];
	const double y = ((double)gi - 0.5) * c->h[0];

	return -(OCEAN_TAU0 * M_PI / (OCEAN_RHO * OCEAN_DEPTH * basin)) *
	       sin(M_PI * y / basin);
}

/* vort = Laplace(psi), and the rhs starts as the vorticity of the older
 * time level (or, on the first step, of the current one). */
static void laplace_phase(struct ocean_ctx *c, long q)
{
	const long rows = c->rows[0], cols = c->cols[0], stride = cols + 2;
	const double h2 = c->h[0] * c->h[0];
	const int fp = psi_field(c), fo = unknown_field(c, 0);
	const double *psi = grid_at(c, fp, 0, q);
	const double *old = grid_at(c, fo, 0, q);
	double *vort = grid_at(c, fld_vort, 0, q);
	double *f = grid_at(c, fld_rhs, 0, q);
	long i, j;

	pull(c, q, fp, 0, wall_odd);
	pull(c, q, fo, 0, wall_odd);
	for (i = 1; i <= rows; i++) {
		for (j = 1; j <= cols; j++) {
			const long x = i * stride + j;

			vort[x] = (psi[x - 1] + psi[x + 1] + psi[x - stride] +
				   psi[x + stride] - 4.0 * psi[x]) / h2;
			f[x] = c->step == 0 ? vort[x]
				: (old[x - 1] + old[x + 1] + old[x - stride] +
				   old[x + stride] - 4.0 * old[x]) / h2;
		}
	}
	publish(c, q, fld_vort, 0);
}

/*
 * The explicit part of the leapfrog step (forward Euler on the first):
 * rhs = vort_old + a (-J(psi, vort) - beta dpsi/dx + wind - r vort_old),
 * a = 2 dt (dt), with the Jacobian in centred differences.  The older
 * psi becomes the solver's first guess, 2 psi - psi_old (psi).
 */
static void forcing_phase(struct ocean_ctx *c, long q)
{
	const long rows = c->rows[0], cols = c->cols[0], stride = cols + 2;
	const double h = c->h[0];
	const double a = c->step == 0 ? dtau : 2.0 * dtau;
	const double inv4h2 = 1.0 / (4.0 * h * h);
	const long gi0 = row0(c, 0, q);
	const double *psi = grid_at(c, psi_field(c), 0, q);
	const double *vort = grid_at(c, fld_vort, 0, q);
	double *guess = grid_at(c, unknown_field(c, 0), 0, q);
	double *f = grid_at(c, fld_rhs, 0, q);
	long i, j;

	pull(c, q, fld_vort, 0, wall_odd);
	for (i = 1; i <= rows; i++) {
		const double wind = wind_forcing(c, gi0 + i);

		for (j = 1; j <= cols; j++) {
			const long x = i * stride + j;
			const double px = psi[x + 1] - psi[x - 1];
			const double py = psi[x + stride] - psi[x - stride];
			const double vx = vort[x + 1] - vort[x - 1];
			const double vy = vort[x + stride] - vort[x - stride];
			const double jac = (px * vy - py * vx) * inv4h2;
			const double base = f[x];

			f[x] = base + a * (-jac - OCEAN_BETA * px / (2.0 * h) +
					   wind - OCEAN_FRICTION * base);
			guess[x] = c->step == 0 ? psi[x]
						: 2.0 * psi[x] - guess[x];
		}
	}
	publish(c, q, unknown_field(c, 0), 0);
}

/* Value of field f (level 0) at global point (gi, gj), found through the
 * owner's block; used only by the independent check and the printout. */
static double global_value(const struct ocean_ctx *c, int f, long gi,
			   long gj)
{
	const long pr = (gi - 1) / c->rows[0], pc = (gj - 1) / c->cols[0];
	const long i = gi - pr * c->rows[0], j = gj - pc * c->cols[0];

	return grid_at(c, f, 0, pr * c->pcol + pc)[i * (c->cols[0] + 2) + j];
}

/*
 * Process 0 recomputes the residual of the solve just finished from the
 * final psi and the rhs, over the whole basin, with its own reading of the
 * boundary condition (psi mirrored to minus itself across a wall), and
 * records it next to what the solver saw.
 */
static void check_solve(struct ocean_ctx *c)
{
	const int fu = unknown_field(c, 0);
	const double h2 = c->h[0] * c->h[0];
	const long m = c->m;
	double rmax = 0.0, fmax = 0.0;
	long gi, gj;

	for (gi = 1; gi <= m; gi++) {
		for (gj = 1; gj <= m; gj++) {
			const double p = global_value(c, fu, gi, gj);
			const double s = gi > 1 ? global_value(c, fu, gi - 1, gj) : -p;
			const double no = gi < m ? global_value(c, fu, gi + 1, gj) : -p;
			const double w = gj > 1 ? global_value(c, fu, gi, gj - 1) : -p;
			const double e = gj < m ? global_value(c, fu, gi, gj + 1) : -p;
			const double f = global_value(c, fld_rhs, gi, gj);
			const double r = f - ((s + no) + (w + e) - 4.0 * p) / h2;

			rmax = max_abs(rmax, r);
			fmax = max_abs(fmax, f);
		}
	}
	c->solves[c->step].check_rmax = rmax;
	c->solves[c->step].check_fmax = fmax;
}

/* ------------------------------------------------------------------ */
/* Phases and the solver */

static void work(struct ocean_ctx *c, long q, enum ocean_phase kind,
		 long l, int colour)
{
	switch (kind) {
	case ph_init: {
		memset(c->grid_region[q], 0, c->grid_bytes);
		memset(c->halo_region[q], 0, c->halo_bytes);
		break;
	}
	case ph_laplace:
		laplace_phase(c, q);
		break;
	case ph_forcing:
		forcing_phase(c, q);
		break;
	case ph_smooth:
		pull(c, q, unknown_field(c, l), l, wall_zero);
		relax(c, q, l, colour);
		publish(c, q, unknown_field(c, l), l);
		break;
	case ph_restrict:
		pull(c, q, unknown_field(c, l), l, wall_zero);
		restrict_residual(c, q, l);
		break;
	case ph_coarse:
		if (q == 0)
			coarse_solve(c);
		break;
	case ph_prolong_coarse: {
		/* This process's piece of the coarsest solution, ghost ring
		 * included, then into the level above. */
		const long rc = c->rows[l], cc = c->cols[l];
		const long gs = c->gcc + 2;
		const long r0 = row0(c, l, q), c0 = col0(c, l, q);
		double *uc = grid_at(c, fld_u, l, q);
		long i;

		for (i = 0; i <= rc + 1; i++)
			memcpy(&uc[i * (cc + 2)], &c->coarse_u[(r0 + i) * gs + c0],
			       (size_t)(cc + 2) * sizeof(double));
		prolong(c, q, l - 1, uc);
		break;
	}
	case ph_prolong:
		pull(c, q, fld_u, l, wall_odd);
		prolong(c, q, l - 1, grid_at(c, fld_u, l, q));
		break;
	case ph_check:
		if (q == 0)
			check_solve(c);
		break;
	case ph_count:
		break;
	}
}

/* Which column of the statistics a phase's work counts in. */
static double *stat_slot(struct ocean_stats *st, enum ocean_phase kind)
{
	switch (kind) {
	case ph_laplace:
	case ph_forcing:
		return &st->explicit_part;
	case ph_smooth:
		return &st->relax;
	case ph_restrict:
	case ph_coarse:
	case ph_prolong_coarse:
	case ph_prolong:
		return &st->transfer;
	default:
		return NULL;
	}
}

/*
 * Runs one phase: in parallel, this process's share and then the barrier
 * that makes it visible to all; in the sequential reference, every
 * process's share in turn.  A phase reads only what earlier phases wrote,
 * so the two orders compute the same numbers.  Publications of the phase
 * then become the halves neighbours read.
 */
static void phase(struct ocean_ctx *c, long my_id, enum ocean_phase kind,
		  long l, int colour)
{
	long q;
	int f;

	if (c->parallel) {
		unsigned long t0 = 0, t1 = 0, t2 = 0;

		if (c->stats != NULL)
			CLOCK(t0)
		work(c, my_id, kind, l, colour);
		if (c->stats != NULL)
			CLOCK(t1)
		BARRIER(Global->bar, P)
		if (c->stats != NULL) {
			double *slot = stat_slot(c->stats, kind);

			CLOCK(t2)
			if (slot != NULL)
				*slot += (double)(t1 - t0);
			c->stats->barrier += (double)(t2 - t1);
		}
	} else {
		for (q = 0; q < c->nprocs; q++)
			work(c, q, kind, l, colour);
	}
	for (f = 0; f < fld_count; f++) {
		for (q = 0; q <= c->coarse; q++) {
			if (c->flip[f][q]) {
				c->pub[f][q] ^= 1;
				c->flip[f][q] = 0;
			}
		}
	}
}

static void smooth(struct ocean_ctx *c, long my_id, long l, int sweeps)
{
	int s, k;

	for (s = 0; s < sweeps; s++)
		for (k = 0; k < 2; k++)
			phase(c, my_id, ph_smooth, l, k);	/* red, black */
}

/*
 * Multigrid for Laplace(psi_new) = rhs at level 0, psi_new starting from
 * the guess of the forcing phase.  Each cycle: pre-smoothing, the residual
 * (whose maximum decides, the same in every process, whether to stop),
 * restriction down to the coarsest level, its solve, and back up with
 * prolongation and post-smoothing: a V-cycle.
 */
static void solve(struct ocean_ctx *c, long my_id)
{
	struct ocean_solve *rec = &c->solves[c->step];
	long cycle, l, q;

	for (cycle = 0;; cycle++) {
		double rmax = 0.0, fmax = 0.0;

		smooth(c, my_id, 0, OCEAN_NU1);
		phase(c, my_id, ph_restrict, 0, 0);
		for (q = 0; q < c->nprocs; q++) {
			rmax = max_abs(rmax, c->slots[2 * q]);
			fmax = max_abs(fmax, c->slots[2 * q + 1]);
		}
		if (rmax <= tolerance * fmax || cycle >= OCEAN_MAX_CYCLES) {
			if (my_id == 0 && c->parallel &&
			    !(rmax <= tolerance * fmax))
				fprintf(stderr, "ocean: step %ld: multigrid gave up "
					"after %ld V-cycles at max |residual| %.3e, "
					"max |rhs| %.3e\n", c->step, cycle, rmax,
					fmax);
			if (my_id == 0) {
				rec->cycles = cycle;
				rec->rmax = rmax;
				rec->fmax = fmax;
			}
			return;
		}
		for (l = 1; l < c->coarse; l++) {
			smooth(c, my_id, l, OCEAN_NU1);
			phase(c, my_id, ph_restrict, l, 0);
		}
		phase(c, my_id, ph_coarse, c->coarse, 0);
		phase(c, my_id, ph_prolong_coarse, c->coarse, 0);
		for (l = c->coarse - 1; l >= 1; l--) {
			smooth(c, my_id, l, OCEAN_NU2);
			phase(c, my_id, ph_prolong, l, 0);
		}
		smooth(c, my_id, 0, OCEAN_NU2);
	}
}

/* The simulation: every process (or, in the reference, main for all of
 * them) runs this with the same control flow. */
static void simulate(struct ocean_ctx *c, long my_id, unsigned long *rs)
{
	phase(c, my_id, ph_init, 0, 0);
	if (rs != NULL)
		CLOCK(*rs)
	if (c->stats != NULL)
		memset(c->stats, 0, sizeof(*c->stats));	/* timed part only */
	for (c->step = 0; c->step < nsteps; c->step++) {
		phase(c, my_id, ph_laplace, 0, 0);
		phase(c, my_id, ph_forcing, 0, 0);
		solve(c, my_id);
		if (c->check)
			phase(c, my_id, ph_check, 0, 0);
		c->cur ^= 1;
	}
}

/* Entry point of every process, main included.  Its number is its rank:
 * SPLASH-2 hands numbers out in arrival order under a lock, an order that
 * changes from run to run, and with it which cluster of a DSM holds which
 * share of the data (docs/splash2.md, "Process numbers"). */
static void slave_start(void)
{
	struct ocean_ctx c = template_ctx;
	struct ocean_stats st;
	unsigned long myrs = 0, myrf = 0;
	long my_id;

	GET_PID(my_id)

	memset(&st, 0, sizeof(st));
	c.parallel = 1;
	c.check = test_result;
	c.stats = my_id == 0 || dostats ? &st : NULL;
	/* Everyone waits for main to finish setting up. */
	BARRIER(Global->bar, P)
	simulate(&c, my_id, c.stats != NULL ? &myrs : NULL);
	if (c.stats != NULL) {
		CLOCK(myrf)
		st.total = (double)(myrf - myrs);
		Global->stats[my_id] = st;
	}
	if (my_id == 0) {
		Global->rs = myrs;
		Global->rf = myrf;
	}
}

/* ------------------------------------------------------------------ */
/* Check and report */

/*
 * Compares the parallel run with the sequential reference (both time
 * levels of psi, bit for bit, and the V-cycle counts) and every
 * solve's independent residual with the tolerance.  Prints the figures
 * and the verdict; returns 0 when the test passed.
 */
static int check_result(const struct ocean_ctx *par,
			const struct ocean_ctx *ref)
{
	double maxdiff = 0.0, maxpsi = 0.0, worst_check = 0.0, worst_solver = 0.0;
	long identical = 1, gi, gj, k, cycles_match = 1, total_cycles = 0;
	int f;

	for (f = fld_psi_a; f <= fld_psi_b; f++) {
		for (gi = 1; gi <= par->m; gi++) {
			for (gj = 1; gj <= par->m; gj++) {
				const double a = global_value(par, f, gi, gj);
				const double b = global_value(ref, f, gi, gj);

				if (memcmp(&a, &b, sizeof(a)) != 0)
					identical = 0;
				maxdiff = max_abs(maxdiff, a - b);
				maxpsi = max_abs(maxpsi, b);
			}
		}
	}
	for (k = 0; k < nsteps; k++) {
		const struct ocean_solve *s = &par->solves[k];
		const double rel = s->check_fmax > 0.0 ? s->check_rmax / s->check_fmax
						       : s->check_rmax;
		const double srel = s->fmax > 0.0 ? s->rmax / s->fmax : s->rmax;

		worst_check = max_abs(worst_check, rel);
		worst_solver = max_abs(worst_solver, srel);
		if (s->cycles != ref->solves[k].cycles)
			cycles_match = 0;
		total_cycles += s->cycles;
	}
	printf("Multigrid V-cycles, all solves    : %16ld\n", total_cycles);
	printf("Max relative residual (solver)    : %16.3e\n", worst_solver);
	printf("Max relative residual (recomputed): %16.3e\n", worst_check);
	printf("Max |psi|                         : %16.3e\n", maxpsi);
	printf("Max |psi - sequential| / max|psi| : %16.3e\n",
	       maxpsi > 0.0 ? maxdiff / maxpsi : maxdiff);
	printf("Bit-identical to sequential run   : %16s\n",
	       identical ? "yes" : "no");
	/* Written so that a NaN anywhere fails. */
	if (!(worst_check <= OCEAN_CHECK_SLACK * tolerance)) {
		printf("TEST FAILED: residual above %.1e of max |rhs|\n",
		       OCEAN_CHECK_SLACK * tolerance);
		return -1;
	}
	if (!identical || !cycles_match) {
		printf("TEST FAILED: differs from the sequential run\n");
		return -1;
	}
	if (!(maxpsi > 0.0 && maxpsi < DBL_MAX)) {
		printf("TEST FAILED: psi is zero or not finite\n");
		return -1;
	}
	printf("TEST PASSED\n");
	return 0;
}

static void print_solves(const struct ocean_ctx *c)
{
	long k;

	printf("\n Step   V-cycles   max|residual|/max|rhs|\n");
	for (k = 0; k < nsteps; k++) {
		const struct ocean_solve *s = &c->solves[k];

		printf(" %4ld   %8ld   %22.3e\n", k, s->cycles,
		       s->fmax > 0.0 ? s->rmax / s->fmax : s->rmax);
	}
}

static void print_psi(const struct ocean_ctx *c)
{
	long gi, gj;

	/* Northernmost row first, as on a map. */
	printf("\nStream function psi (m^2/s) after %ld steps:\n", nsteps);
	for (gi = c->m; gi >= 1; gi--) {
		for (gj = 1; gj <= c->m; gj++)
			printf(" %10.3e", global_value(c, psi_field(c), gi, gj));
		printf("\n");
	}
}

static void print_stats(void)
{
	static const size_t cols[] = {
		offsetof(struct ocean_stats, total),
		offsetof(struct ocean_stats, explicit_part),
		offsetof(struct ocean_stats, relax),
		offsetof(struct ocean_stats, transfer),
		offsetof(struct ocean_stats, barrier),
	};

	lm_splash_print_stats(
		"                            PROCESS STATISTICS\n"
		"              Total      Explicit     Relaxation    "
		"Transfer       Barrier\n"
		" Proc         Time         Time         Time          "
		"Time          Time\n",
		Global->stats, sizeof(struct ocean_stats), cols,
		(int)(sizeof(cols) / sizeof(cols[0])), P);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: ocean <options>\n"
		"options:\n"
		"  -nN : Simulate an NxN ocean, N = 2^k + 2 points per side "
		"including the border (default %d).\n"
		"  -pP : P = number of processors, a power of 2 (default %d, "
		"at most %d).\n"
		"  -eE : E = error tolerance of the multigrid solver "
		"(default %g).\n"
		"  -rR : R = distance between grid points in metres "
		"(default %g).\n"
		"  -tT : T = time step in seconds, value attached "
		"(default %g).\n"
		"  -kK : K = number of time steps (default %d).\n"
		"  -s  : Print individual processor timing statistics.\n"
		"  -t  : Test output (check every solve and compare with a "
		"sequential run).\n"
		"  -o  : Print the solver history and psi (small N only).\n"
		"  -h  : Print out command line options.\n",
		OCEAN_DEFAULT_N, OCEAN_DEFAULT_P, OCEAN_MAX_P, OCEAN_DEFAULT_TOL,
		OCEAN_DEFAULT_RES, OCEAN_DEFAULT_DT, OCEAN_DEFAULT_STEPS);
}

/* A finite positive number in *out; 0 on success, -1 otherwise. */
static int parse_positive_double(const char *text, double *out)
{
	char *end;
	double v = strtod(text, &end);

	if (end == text || *end != '\0' || !(v > 0.0) || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

static int is_power_of_2(long v)
{
	return v > 0 && (v & (v - 1)) == 0;
}

int main(int argc, char *argv[])
{
	struct ocean_ctx ref;
	unsigned long start;
	int ch, failed = 0, p_given = 0, status;
	long p;

	MAIN_INITENV
	CLOCK(start)

	/* -t alone asks for the test; -tT (value attached) is the time
	 * step, as in SPLASH-2. */
	while ((ch = getopt(argc, argv, "n:p:e:r:t::k:soh")) != -1) {
		int bad = 0;

		switch (ch) {
		case 'n':
			bad = lm_splash_parse_positive(optarg, OCEAN_MAX_N, &n);
			break;
		case 'p':
			bad = lm_splash_parse_positive(optarg, OCEAN_MAX_P, &P);
			p_given = 1;
			break;
		case 'e':
			bad = parse_positive_double(optarg, &tolerance) ||
			      tolerance >= 1.0;
			break;
		case 'r':
			bad = parse_positive_double(optarg, &res);
			break;
		case 't':
			if (optarg == NULL)
				test_result = 1;
			else
				bad = parse_positive_double(optarg, &dtau);
			break;
		case 'k':
			bad = lm_splash_parse_positive(optarg, OCEAN_MAX_STEPS,
						       &nsteps);
			break;
		default:
			bad = lm_splash_flag_option(ch, &dostats, &test_result,
						    &doprint);
			break;
		}
		status = lm_splash_option_done("ocean", ch, bad, usage);
		if (status >= 0)
			MAIN_END(status)
	}
	status = lm_splash_end_options("ocean", argc, argv, usage,
				       p_given, &P);
	if (status != 0)
		MAIN_END(status)
	if (n < 4 || !is_power_of_2(n - 2)) {
		fprintf(stderr, "ocean: -n%ld: the side must be 2^k + 2, "
			"k >= 1\n", n);
		usage(stderr);
		MAIN_END(2)
	}
	if (!is_power_of_2(P)) {
		fprintf(stderr, "ocean: -p%ld: the number of processes must be "
			"a power of 2\n", P);
		usage(stderr);
		MAIN_END(2)
	}
	if ((n - 2) / grid_cols(P) < 2) {
		fprintf(stderr, "ocean: -n%ld is too small for %ld processes: "
			"each needs at least 2 x 2 points\n", n, P);
		usage(stderr);
		MAIN_END(2)
	}
	if (ctx_setup(&template_ctx, P, 1) != 0) {
		fprintf(stderr, "ocean: cannot allocate shared memory for "
			"n = %ld\n", n);
		MAIN_END(1)
	}

	printf("\n");
	printf("Ocean simulation with V-cycle multigrid solver\n");
	printf("     Contiguous partitions\n");
	printf("     %ld by %ld grid\n", n, n);
	printf("     %ld processors\n", P);
	printf("     %.0f meters between grid points\n", res);
	printf("     %g seconds per time step, %ld time steps\n", dtau, nsteps);
	printf("     %g solver tolerance\n", tolerance);
	printf("     %ld multigrid levels, coarsest %ld by %ld\n",
	       template_ctx.coarse + 1, template_ctx.gcr, template_ctx.gcc);
	printf("\n");
	printf("\n");

	Global = (struct ocean_global *)G_MALLOC(sizeof(struct ocean_global));
	if (Global == NULL) {
		fprintf(stderr, "ocean: cannot allocate shared memory\n");
		MAIN_END(1)
	}
	Global->stats = (struct ocean_stats *)G_MALLOC((size_t)P *
						       sizeof(struct ocean_stats));
	if (Global->stats == NULL) {
		fprintf(stderr, "ocean: cannot allocate shared memory\n");
		MAIN_END(1)
	}
	memset(Global->stats, 0, (size_t)P * sizeof(struct ocean_stats));
	Global->starttime = start;
	BARINIT(Global->bar, P)

	/* Process 0 is main itself. */
	for (p = 1; p < P; p++)
		CREATE(slave_start)
	slave_start();
	WAIT_FOR_END(P - 1)
	template_ctx.cur = (int)(nsteps % 2);	/* where the last psi is */

	if (doprint) {
		print_solves(&template_ctx);
		print_psi(&template_ctx);
	}
	if (dostats)
		print_stats();

	printf("\n");
	lm_splash_print_times(Global->starttime, Global->rs, Global->rf);

	if (test_result) {
		printf("                             TESTING RESULTS\n");
		/* The same algorithm, same decomposition, run by main alone
		 * in private memory, process by process. */
		if (ctx_setup(&ref, P, 0) != 0) {
			fprintf(stderr, "ocean: out of memory for the check\n");
			ctx_free_private(&ref);
			MAIN_END(1)
		}
		ref.parallel = 0;
		simulate(&ref, 0, NULL);
		failed = check_result(&template_ctx, &ref) != 0;
		ctx_free_private(&ref);
	}
	MAIN_END(failed)
}
