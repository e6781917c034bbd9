/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: main stores pointers into the program (a function of its own,
 * a string constant) in shared memory before it CREATEs the others, who
 * call and read through them, as raytrace does with its object methods.
 * Threads share one address space; the ranks of a Lemuria run share it
 * only if each loads the program at the same address (lemuria-run turns
 * address randomisation off for them).  Each process adds op(number) to
 * a sum under a lock; after WAIT_FOR_END the sum must be 3 (1 + ... + P).
 *
 *   funcptr P     (under lemuria-run, P is the layout's process count)
 *
 * Prints "funcptr: P processes: PASSED" and exits 0, or says what
 * differed and exits 1.
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct funcptr_global {
	LOCKDEC(lock)
	long (*op)(long);
	const char *name;
	long next;
	long sum;
	long bad;
};

static struct funcptr_global *gl;
static long nprocs_wanted;

static long triple(long x)
{
	return 3 * x;
}

static void work(void)
{
	LOCK(gl->lock)
	if (strcmp(gl->name, "triple") != 0)
		gl->bad++;
	gl->next++;
	gl->sum += gl->op(gl->next);
	UNLOCK(gl->lock)
}

int main(int argc, char **argv)
{
	long want;

	nprocs_wanted = argc > 1 ? atol(argv[1]) : 0;
	if (nprocs_wanted < 1) {
		fprintf(stderr, "usage: funcptr P\n");
		return 2;
	}
	MAIN_INITENV
	gl = (struct funcptr_global *)G_MALLOC(sizeof(*gl));
	if (!gl) {
		fprintf(stderr, "funcptr: G_MALLOC failed\n");
		MAIN_END(1)
	}
	LOCKINIT(gl->lock)
	gl->op = triple;
	gl->name = "triple";
	gl->next = 0;
	gl->sum = 0;
	gl->bad = 0;
	for (long i = 1; i < nprocs_wanted; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(nprocs_wanted - 1)
	want = 3 * nprocs_wanted * (nprocs_wanted + 1) / 2;
	if (gl->sum != want || gl->bad) {
		fprintf(stderr, "funcptr: sum %ld, expected %ld; %ld processes "
			"read another name\n", gl->sum, want, gl->bad);
		MAIN_END(1)
	}
	printf("funcptr: %ld processes: PASSED\n", nprocs_wanted);
	MAIN_END(0)
}
