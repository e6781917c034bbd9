/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: main reads its parameters from stdin before MAIN_INITENV, as
 * water reads its input deck.  Only the first process may run main: the
 * others are threads CREATEd later, and under lemuria-run ranks other
 * than the first read /dev/null.  Each process adds its number to a sum
 * under a lock; after WAIT_FOR_END it must be 1 + 2 + ... + P.
 *
 *   echo P | stdinput
 *
 * Prints "stdinput: P processes: PASSED" and exits 0, or says what
 * differed and exits 1 (2 when stdin holds no process count).
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>

struct stdinput_global {
	LOCKDEC(lock)
	long next;
	long sum;
};

static struct stdinput_global *gl;

static void work(void)
{
	LOCK(gl->lock)
	gl->sum += ++gl->next;
	UNLOCK(gl->lock)
}

int main(void)
{
	long p, want;

	if (scanf("%ld", &p) != 1 || p < 1) {
		fprintf(stderr, "stdinput: reads the process count from "
			"stdin\n");
		return 2;
	}
	MAIN_INITENV
	gl = (struct stdinput_global *)G_MALLOC(sizeof(*gl));
	if (!gl) {
		fprintf(stderr, "stdinput: G_MALLOC failed\n");
		MAIN_END(1)
	}
	LOCKINIT(gl->lock)
	gl->next = 0;
	gl->sum = 0;
	for (long i = 1; i < p; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(p - 1)
	want = p * (p + 1) / 2;
	if (gl->sum != want) {
		fprintf(stderr, "stdinput: sum %ld, expected %ld\n", gl->sum,
			want);
		MAIN_END(1)
	}
	printf("stdinput: %ld processes: PASSED\n", p);
	MAIN_END(0)
}
