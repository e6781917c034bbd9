/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: MAIN_INITENV called inside a function of the program's own,
 * with no argc or argv in scope (barnes calls it in ANLinit, radiosity's
 * main names them ac and av), and PAGE_SIZE used with no definition of
 * the program's.  Each of the P processes takes a number under a lock and
 * adds it to a sum; after a barrier the sum must be 1 + 2 + ... + P.
 *
 *   initenv P     (under lemuria-run, P is the layout's process count)
 *
 * Prints "initenv: PASSED" and exits 0, or says what differed and exits 1.
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>

struct initenv_global {
	LOCKDEC(lock)
	BARDEC(bar)
	long next;
	long sum;
};

static struct initenv_global *gl;
static char *aligned;
static long nprocs_wanted;

static void start_env(void)
{
	MAIN_INITENV
}

static void work(void)
{
	LOCK(gl->lock)
	gl->sum += ++gl->next;
	UNLOCK(gl->lock)
	BARRIER(gl->bar, nprocs_wanted)
	/* every process sees every other's number after the barrier */
	if (gl->sum != nprocs_wanted * (nprocs_wanted + 1) / 2)
		fprintf(stderr, "initenv: a process sees sum %ld after the "
			"barrier\n", gl->sum);
	aligned[PAGE_SIZE - 1] = 1; /* the page PAGE_SIZE says is ours */
}

int main(int ac, char **av)
{
	long want;

	nprocs_wanted = ac > 1 ? atol(av[1]) : 0;
	if (nprocs_wanted < 1) {
		fprintf(stderr, "usage: initenv P\n");
		return 2;
	}
	start_env();
	gl = (struct initenv_global *)G_MALLOC(sizeof(*gl));
	aligned = (char *)G_MALLOC(2 * PAGE_SIZE);
	if (!gl || !aligned) {
		fprintf(stderr, "initenv: G_MALLOC failed\n");
		MAIN_END(1)
	}
	LOCKINIT(gl->lock)
	BARINIT(gl->bar, nprocs_wanted)
	gl->next = 0;
	gl->sum = 0;
	for (long i = 1; i < nprocs_wanted; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(nprocs_wanted - 1)
	want = nprocs_wanted * (nprocs_wanted + 1) / 2;
	if (gl->sum != want || PAGE_SIZE < 4096) {
		fprintf(stderr, "initenv: sum %ld, expected %ld (PAGE_SIZE "
			"%d)\n", gl->sum, want, (int)PAGE_SIZE);
		MAIN_END(1)
	}
	printf("initenv: %ld processes: PASSED\n", nprocs_wanted);
	MAIN_END(0)
}
