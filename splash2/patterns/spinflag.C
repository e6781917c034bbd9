/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: processes wait in loops on shared words that others change,
 * and never synchronise while they wait, as radiosity's own barrier,
 * volrend's "while (Global->Counter);" and cholesky's task queues do.
 * Release consistency alone never shows them the change; Lemuria
 * promises it within a bound (docs/dsm.md "Eventual visibility").
 *
 *   1. a counter every process increments under a lock and then waits
 *      on without one until all did (radiosity);
 *   2. a token passed round ROUNDS times by plain writes: each process
 *      waits for its turn, reading the word with no lock, and writes the
 *      next turn into it with none;
 *   3. a word the last process sets under a lock, spun on without one
 *      by the others (cholesky's queues).
 *
 * The words are read through volatile pointers: the pattern is about
 * the memory, not about a compiler that may keep a plain word in a
 * register.  A process that waits SPIN_LIMIT_US for one change says so
 * and exits 1 rather than hang.
 *
 *   spinflag P [ROUNDS]   (under lemuria-run, P is the layout's count)
 *
 * Prints "spinflag: P processes: PASSED" with the mean time a token
 * hand-off took, and exits 0, or says what it waited for and exits 1.
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>

#define SPIN_LIMIT_US 30000000ul

struct spinflag_global {
	LOCKDEC(lock)
	long next;
	long arrived;
	long turn;
	long task;
	long bad;
};

static struct spinflag_global *gl;
static long nprocs, rounds;

/* Waits until *word is at least want. */
static void wait_for(volatile long *word, long want, long id,
		     const char *what)
{
	unsigned long start, now;
	unsigned long spins = 0;

	CLOCK(start)
	while (*word < want) {
		if (++spins % 4096)
			continue;
		CLOCK(now)
		if (now - start > SPIN_LIMIT_US) {
			fprintf(stderr, "spinflag: process %ld waited %lu s "
				"for %s to reach %ld; it reads %ld\n", id,
				SPIN_LIMIT_US / 1000000, what, want, *word);
			exit(1);
		}
	}
}

static void work(void)
{
	volatile struct spinflag_global *g = gl;
	long id;

	LOCK(gl->lock)
	id = gl->next++;
	gl->arrived++;
	UNLOCK(gl->lock)
	wait_for(&g->arrived, nprocs, id, "the count of arrivals");
	for (long r = 0; r < rounds; r++) {
		wait_for(&g->turn, r * nprocs + id, id, "the token");
		if (g->turn != r * nprocs + id)
			g->bad++; /* the token went past without us */
		g->turn = r * nprocs + id + 1;
	}
	if (id == nprocs - 1) {
		wait_for(&g->turn, rounds * nprocs, id, "the last turn");
		LOCK(gl->lock)
		gl->task = 1;
		UNLOCK(gl->lock)
	} else {
		wait_for(&g->task, 1, id, "the task word");
	}
}

int main(int argc, char **argv)
{
	unsigned long start, end;

	nprocs = argc > 1 ? atol(argv[1]) : 0;
	rounds = argc > 2 ? atol(argv[2]) : 3;
	if (nprocs < 1 || rounds < 0) {
		fprintf(stderr, "usage: spinflag P [ROUNDS]\n");
		return 2;
	}
	MAIN_INITENV
	gl = (struct spinflag_global *)G_MALLOC(sizeof(*gl));
	if (!gl) {
		fprintf(stderr, "spinflag: G_MALLOC failed\n");
		MAIN_END(1)
	}
	LOCKINIT(gl->lock)
	gl->next = 0;
	gl->arrived = 0;
	gl->turn = 0;
	gl->task = 0;
	gl->bad = 0;
	CLOCK(start)
	for (long i = 1; i < nprocs; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(nprocs - 1)
	CLOCK(end)
	if (gl->bad || gl->turn != rounds * nprocs) {
		fprintf(stderr, "spinflag: the token ended at %ld, not %ld; "
			"%ld turns were missed\n", gl->turn, rounds * nprocs,
			gl->bad);
		MAIN_END(1)
	}
	printf("spinflag: %ld processes: PASSED (%ld hand-offs, %.1f ms "
	       "each on average)\n", nprocs, rounds * nprocs,
	       rounds ? (double)(end - start) / 1000.0 /
			(double)(rounds * nprocs) : 0.0);
	MAIN_END(0)
}
