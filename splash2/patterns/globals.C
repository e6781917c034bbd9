/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: ordinary globals written after CREATE and read by the others,
 * as threads share them.  fmm keeps its tree's root in box *Grid, which
 * one process sets during the run; volrend's Select_View writes the view
 * into plain globals that every process then renders with.  Each round:
 *
 *   - one process (a different one each round) points root at a cell
 *     of shared memory and fills it, and writes the round's view into
 *     view[]; every process writes its own slot of slots[], a .bss
 *     array several pages long (each page written by several processes
 *     of several clusters in one round);
 *   - BARRIER; every process checks root, *root, view[] and every slot,
 *     and adds one to hits under a lock;
 *   - BARRIER.
 *
 * After WAIT_FOR_END main checks the globals the workers wrote last.
 *
 *   globals P [ROUNDS]     (under lemuria-run, P is the layout's count)
 *
 * Prints "globals: P processes: PASSED" and exits 0, or says what it saw
 * and exits 1.
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>

#define GLOBALS_MAXP 64
#define GLOBALS_VIEW 8
#define GLOBALS_SLOT_LONGS 300 /* 2400 bytes: a page holds one or two */

struct globals_shared {
	BARDEC(bar)
	LOCKDEC(lock)
	long next_id;
	long bad;
	long cells[1024];
};

static struct globals_shared *gs;  /* set before CREATE */
static long nprocs, rounds;        /* set before CREATE */
static long *root;                 /* fmm's Grid: set by one, during the run */
static long view[GLOBALS_VIEW];    /* volrend's view: rewritten each round */
static long hits;                  /* under gs->lock */
static long slots[GLOBALS_MAXP][GLOBALS_SLOT_LONGS]; /* one per process */

static long slot_value(long id, long round, long i)
{
	return (id + 1) * 1000003 + round * 101 + i;
}

static void check_round(long id, long r)
{
	long bad = 0;

	if (root != &gs->cells[r] || *root != r * 7 + 1)
		bad++;
	for (long k = 0; k < GLOBALS_VIEW; k++)
		if (view[k] != r * 10 + k)
			bad++;
	for (long p = 0; p < nprocs; p++)
		for (long i = 0; i < GLOBALS_SLOT_LONGS; i += 37)
			if (slots[p][i] != slot_value(p, r, i))
				bad++;
	LOCK(gs->lock)
	hits++;
	if (bad) {
		if (gs->bad == 0)
			fprintf(stderr, "globals: process %ld, round %ld: "
				"root %p (want %p) -> %ld, view[0] %ld, "
				"%ld values wrong\n", id, r, (void *)root,
				(void *)&gs->cells[r], root ? *root : -1,
				view[0], bad);
		gs->bad += bad;
	}
	UNLOCK(gs->lock)
}

static void work(void)
{
	long id;

	LOCK(gs->lock)
	id = gs->next_id++;
	UNLOCK(gs->lock)
	for (long r = 1; r <= rounds; r++) {
		if (id == r % nprocs) {
			gs->cells[r] = r * 7 + 1;
			root = &gs->cells[r];
			for (long k = 0; k < GLOBALS_VIEW; k++)
				view[k] = r * 10 + k;
		}
		for (long i = 0; i < GLOBALS_SLOT_LONGS; i++)
			slots[id][i] = slot_value(id, r, i);
		BARRIER(gs->bar, nprocs)
		check_round(id, r);
		BARRIER(gs->bar, nprocs)
	}
}

int main(int argc, char **argv)
{
	long bad = 0;

	nprocs = argc > 1 ? atol(argv[1]) : 0;
	rounds = argc > 2 ? atol(argv[2]) : 5;
	if (nprocs < 1 || nprocs > GLOBALS_MAXP || rounds < 1 ||
	    rounds > 1000) {
		fprintf(stderr, "usage: globals P [ROUNDS]  (P <= %d, ROUNDS "
			"<= 1000)\n", GLOBALS_MAXP);
		return 2;
	}
	MAIN_INITENV
	gs = (struct globals_shared *)G_MALLOC(sizeof(*gs));
	if (!gs) {
		fprintf(stderr, "globals: G_MALLOC failed\n");
		MAIN_END(1)
	}
	BARINIT(gs->bar, nprocs)
	LOCKINIT(gs->lock)
	gs->next_id = 0;
	gs->bad = 0;
	for (long i = 1; i < nprocs; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(nprocs - 1)
	/* what the last round left, written by others after CREATE */
	if (root != &gs->cells[rounds] || hits != nprocs * rounds ||
	    view[GLOBALS_VIEW - 1] != rounds * 10 + GLOBALS_VIEW - 1)
		bad++;
	for (long p = 0; p < nprocs; p++)
		if (slots[p][GLOBALS_SLOT_LONGS - 1] !=
		    slot_value(p, rounds, GLOBALS_SLOT_LONGS - 1))
			bad++;
	if (bad || gs->bad) {
		fprintf(stderr, "globals: after the run root %p (want %p), "
			"hits %ld (want %ld), %ld values wrong in the rounds, "
			"%ld at the end\n", (void *)root,
			(void *)&gs->cells[rounds], hits, nprocs * rounds,
			gs->bad, bad);
		MAIN_END(1)
	}
	printf("globals: %ld processes: PASSED\n", nprocs);
	MAIN_END(0)
}
