/* Helpers every SPLASH-2 program of ours shares: option parsing, the
 * per-process statistics table and the timing report in the SPLASH-2
 * format that bench/splash.sh reads.  Plain C, included after m4 has
 * expanded the program (not an m4 file), and after MAIN_ENV, whose macro
 * file may define LM_PROCS.  Nothing here exits: a helper that finds an
 * error says so and returns the exit status, which the program passes to
 * MAIN_END so that the runtime can shut down. */
#ifndef LM_SPLASH_UTIL_H
#define LM_SPLASH_UTIL_H

/* Both our macro files mark their declarations as done; a program that
 * includes this first would silently miss the runtime's LM_PROCS. */
#if !defined(LM_M4_DECLS_DONE) && !defined(LM_PT_DECLS_DONE)
#error "include splash_util.h after MAIN_ENV"
#endif

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The larger of a and b, and NaN when either is: fmax drops a NaN, so a
 * result check folded with it passes an all-NaN solution (what a zero
 * pivot from a lost write gives) with an error of exactly 0. */
static inline double lm_splash_max(double a, double b)
{
	return isnan(a) || a >= b ? a : b;
}

/* Columns of the statistics table, at the most. */
#define LM_SPLASH_STATS_MAX 8

/* "N" with lo <= N <= hi into *out; returns 0, or -1 for anything else
 * (*out is then left alone). */
static inline int lm_splash_parse_range(const char *text, long lo, long hi,
					long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* "N" with 1 <= N <= max into *out; returns 0, or -1 for anything else. */
static inline int lm_splash_parse_positive(const char *text, long max,
					   long *out)
{
	return lm_splash_parse_range(text, 1, max, out);
}

/*
 * The flags every program has: -s (per-process statistics), -t (test the
 * result) and -o (print the data) set *stats, *test or *print; -h is
 * lm_splash_option_done's.  Returns 0, or 1 when ch is none of these
 * (getopt's '?' for an unknown option included), for the program's bad.
 */
static inline int lm_splash_flag_option(int ch, int *stats, int *test,
					int *print)
{
	switch (ch) {
	case 's':
		*stats = 1;
		return 0;
	case 't':
		*test = 1;
		return 0;
	case 'o':
		*print = 1;
		return 0;
	case 'h':
		return 0;
	default:
		return 1;
	}
}

/*
 * The end of one turn of the getopt loop, after the program's switch has
 * taken option ch (bad: its value, optarg, was bad, or ch is unknown).
 * -h prints usage on stdout: exit status 0.  A bad option is named
 * (getopt has already spoken for '?', an unknown option or a missing
 * value) and usage goes to stderr: status 2.  Returns -1 when the loop
 * goes on, else the status for MAIN_END.
 */
static inline int lm_splash_option_done(const char *prog, int ch, int bad,
					void (*usage)(FILE *))
{
	if (bad) {
		if (ch != '?')
			fprintf(stderr, "%s: bad value for -%c: %s\n", prog, ch,
				optarg);
		usage(stderr);
		return 2;
	}
	if (ch == 'h') {
		usage(stdout);
		return 0;
	}
	return -1;
}

/*
 * Once getopt is done: an argument left over is an error, and where the
 * macro file's runtime fixes the number of processes (LM_PROCS; Lemuria:
 * the layout), that number is the default of *procs and an explicit -p
 * (p_given) must agree with it.  Returns 0, or 2 after saying why.
 */
static inline int lm_splash_end_options(const char *prog, int argc,
					char *argv[], void (*usage)(FILE *),
					int p_given, long *procs)
{
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument %s\n", prog,
			argv[optind]);
		usage(stderr);
		return 2;
	}
#ifdef LM_PROCS
	if (!p_given) {
		*procs = LM_PROCS;
	} else if (*procs != LM_PROCS) {
		fprintf(stderr, "%s: -p%ld, but the run has %ld processes\n",
			prog, *procs, LM_PROCS);
		return 2;
	}
#else
	(void)p_given;
	(void)procs;
#endif
	return 0;
}

/* One line of the statistics table: label, then each column in
 * microseconds. */
static inline void lm_splash_stats_row(const char *label, const double *v,
				       int ncols)
{
	int c;

	printf("%s", label);
	for (c = 0; c < ncols; c++)
		printf("    %10.0f", v[c]);
	printf("\n");
}

/*
 * The PROCESS STATISTICS table of -s: an empty line, head (the title and
 * column heads, each line ending in a newline), one row per process, then
 * the average, minimum and maximum of each column.  Process p's entries
 * are doubles (microseconds) at the byte offsets cols[0 .. ncols - 1] of
 * the p-th record of size bytes at stats.  nprocs is at least 1; columns
 * past LM_SPLASH_STATS_MAX are left out.
 */
static inline void lm_splash_print_stats(const char *head, const void *stats,
					 size_t size, const size_t *cols,
					 int ncols, long nprocs)
{
	double v[LM_SPLASH_STATS_MAX], avg[LM_SPLASH_STATS_MAX];
	double lo[LM_SPLASH_STATS_MAX], hi[LM_SPLASH_STATS_MAX];
	const char *base = (const char *)stats;
	char label[24];
	long p;
	int c;

	if (ncols > LM_SPLASH_STATS_MAX)
		ncols = LM_SPLASH_STATS_MAX;
	printf("\n%s", head);
	for (p = 0; p < nprocs; p++) {
		for (c = 0; c < ncols; c++) {
			memcpy(&v[c], base + (size_t)p * size + cols[c],
			       sizeof(v[c]));
			if (p == 0) {
				avg[c] = 0.0;
				lo[c] = hi[c] = v[c];
			}
			avg[c] += v[c] / (double)nprocs;
			lo[c] = fmin(lo[c], v[c]);
			hi[c] = fmax(hi[c], v[c]);
		}
		snprintf(label, sizeof(label), " %4ld", p);
		lm_splash_stats_row(label, v, ncols);
	}
	lm_splash_stats_row("  Avg", avg, ncols);
	lm_splash_stats_row("  Min", lo, ncols);
	lm_splash_stats_row("  Max", hi, ncols);
}

static inline void lm_splash_print_time(const char *label, unsigned long us)
{
	printf("%-34s: %16lu us (%.6f s)\n", label, us, (double)us / 1e6);
}

/* The TIMING INFORMATION block: start of main, end of initialisation
 * (the timed part begins) and end of the run, in microseconds. */
static inline void lm_splash_print_times(unsigned long start,
					 unsigned long init_done,
					 unsigned long finish)
{
	printf("                            TIMING INFORMATION\n");
	lm_splash_print_time("Overall start time", start);
	lm_splash_print_time("Initialization finish time", init_done);
	lm_splash_print_time("Overall finish time", finish);
	lm_splash_print_time("Total time with initialization", finish - start);
	lm_splash_print_time("Total time without initialization",
			     finish - init_done);
	printf("\n");
}

#endif
