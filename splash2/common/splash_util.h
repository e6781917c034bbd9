/* Helpers every SPLASH-2 program of ours shares: option parsing and the
 * timing report in the SPLASH-2 format that bench/splash.sh reads.  Plain
 * C, included after m4 has expanded the program (not an m4 file). */
#ifndef LM_SPLASH_UTIL_H
#define LM_SPLASH_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* "N" with 1 <= N <= max into *out; returns 0, or -1 for anything else. */
static inline int lm_splash_parse_positive(const char *text, long max,
					   long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
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
