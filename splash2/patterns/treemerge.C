/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: fmm's tree merge (MergeLocalGrid), with the leaf's type
 * checked under the lock as the compatibility set has it.  Every round
 * each process inserts its share of the particles into one quadtree all
 * of them share.  It walks down reading each slot under the parent's
 * lock (a lock that boxes of every heap share); at a leaf it marks the
 * leaf busy in that critical section, adds the particle with no lock
 * held, splitting the leaf into a parent with new leaves from its own
 * heap when it is full, and clears the mark under the same lock; an
 * empty slot takes a new leaf.  (fmm takes the leaf out of the tree
 * instead, and walks down with no lock: a process may follow a pointer
 * into a leaf another one took out and split, and add to a box no longer
 * in the tree, a race of fmm's own that a DSM's slower locks widen.)  So a box is written, between two critical sections of a lock,
 * by processes of every cluster in turn, and each reads what the one
 * before wrote.  Which process inserts which particle changes every
 * round.  After a barrier every process walks the whole tree: every
 * particle in exactly one leaf, inside the leaf's square, no leaf over
 * its capacity, no particle left in a parent.
 *
 * A DSM that loses a write made between two critical sections, or lets
 * a process see a box older than the release it acquired, loses or
 * doubles particles (fmm's wrong positions were this pattern without the
 * type check: docs/splash2.md, "fmm's races").
 *
 *   treemerge P [ROUNDS]   (under lemuria-run, P is the layout's count)
 *
 * Prints "treemerge: P processes: PASSED (R rounds)" and exits 0, or
 * says what it found first wrong and exits 1.
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define TM_MAXP 64
#define TM_PARTICLES 768
#define TM_CAP 6      /* particles a leaf holds */
#define TM_DEPTH 40   /* a leaf this deep holds more rather than split */
#define TM_HEAP 1024  /* boxes a process may take in one round */
#define TM_LOCKS 61   /* box k of a heap: lock k % TM_LOCKS */
#define TM_WAIT_US 30000000ul /* a busy leaf that never comes free */

enum { TM_LEAF = 1, TM_PARENT = 2 };

struct tm_box {
	long type;
	long level;
	double x, y, half;  /* the square: centre and half side */
	long lock;
	long np;
	long p[TM_DEPTH + TM_CAP + 1];
	struct tm_box *child[4];
	long busy;          /* a process fills it, with no lock held */
	long fill[80];      /* a box is about 1 KB: boxes straddle pages */
};

struct tm_shared {
	BARDEC(bar)
	LOCKDEC(lock)
	ALOCKDEC(locks, TM_LOCKS)
	long next_id;
	struct tm_box *heaps[TM_MAXP];
	long pids[TM_MAXP];
	long used[TM_MAXP];  /* boxes of each heap taken this round */
	struct tm_box root;  /* always a parent: its slots are the quadrants */
	long bad, first_reader, first_round, first_particle, first_seen;
	long first_what;
};

/* Globals are shared in both builds (threads; lm_share_globals): what
 * is a process's own is indexed by its id. */
static struct tm_shared *ts;
static long nprocs, rounds;

static unsigned long mix(unsigned long z)
{
	z += 0x9e3779b97f4a7c15ul;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ul;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebul;
	return z ^ (z >> 31);
}

/* Particle i's position in round r, in [0, 1): clustered in two places,
 * as fmm's two-cluster input, so that leaves split deep. */
static double coord(long r, long i, long axis)
{
	double u = (double)(mix((unsigned long)(r * 1000003 + i * 2 + axis)) >>
			    11) / 9007199254740992.0;
	double centre = (i % 2) ? 0.3 : 0.7;

	return centre + (u - 0.5) * ((i % 5) ? 0.08 : 0.6);
}

static long quadrant(const struct tm_box *b, long r, long i)
{
	return (coord(r, i, 0) > b->x) + 2 * (coord(r, i, 1) > b->y);
}

static void fail(const char *what)
{
	fprintf(stderr, "treemerge: process %d: %s\n", (int)getpid(), what);
	exit(1);
}

static struct tm_box *new_box(long id, const struct tm_box *parent, long q)
{
	struct tm_box *b;

	if (ts->used[id] == TM_HEAP)
		fail("its heap of boxes ran out");
	b = ts->heaps[id] + ts->used[id]++;
	b->lock = (b - ts->heaps[id]) % TM_LOCKS;
	b->busy = 0;
	b->type = TM_LEAF;
	b->level = parent->level + 1;
	b->half = parent->half / 2;
	b->x = parent->x + ((q & 1) ? b->half : -b->half);
	b->y = parent->y + ((q & 2) ? b->half : -b->half);
	b->np = 0;
	for (long c = 0; c < 4; c++)
		b->child[c] = NULL;
	return b;
}

/* Adds particle i to box b, a leaf we marked busy (nobody else reads
 * or writes it until we clear the mark): a full leaf becomes a parent
 * of new leaves, as fmm's SubdivideBox. */
static void add_to_busy(long id, struct tm_box *b, long r, long i)
{
	while (b->type == TM_PARENT) {
		long q = quadrant(b, r, i);

		if (!b->child[q])
			b->child[q] = new_box(id, b, q);
		b = b->child[q];
	}
	if (b->np == TM_DEPTH + TM_CAP + 1)
		fail("a leaf of the deepest level is full");
	b->p[b->np++] = i;
	if (b->np <= TM_CAP || b->level >= TM_DEPTH)
		return;
	b->type = TM_PARENT;
	for (long k = 0; k < b->np; k++)
		add_to_busy(id, b, r, b->p[k]);
	b->np = 0;
}

static void insert(long id, long r, long i)
{
	struct tm_box *parent = &ts->root;
	unsigned long start, now;

	CLOCK(start)
	for (;;) {
		long q = quadrant(parent, r, i);
		struct tm_box *b;

		ALOCK(ts->locks, parent->lock)
		b = parent->child[q];
		if (!b) {
			/* an empty slot: a new leaf of ours */
			b = new_box(id, parent, q);
			b->p[b->np++] = i;
			parent->child[q] = b;
			AULOCK(ts->locks, parent->lock)
			return;
		}
		if (b->busy) {
			/* another process fills it (and may be splitting it):
			 * read the slot again */
			AULOCK(ts->locks, parent->lock)
			CLOCK(now)
			if (now - start > TM_WAIT_US)
				fail("a leaf stayed busy for 30 s");
			usleep(50);
			continue;
		}
		if (b->type == TM_PARENT) {
			AULOCK(ts->locks, parent->lock)
			parent = b;
			continue;
		}
		/* a leaf: ours to fill until we clear busy under the lock */
		b->busy = 1;
		AULOCK(ts->locks, parent->lock)
		add_to_busy(id, b, r, i);
		ALOCK(ts->locks, parent->lock)
		b->busy = 0;
		AULOCK(ts->locks, parent->lock)
		return;
	}
}

/* The first fault any process finds is kept for the report. */
static void note_bad(long self, long r, long particle, long seen, long what)
{
	LOCK(ts->lock)
	if (ts->bad++ == 0) {
		ts->first_reader = self;
		ts->first_round = r;
		ts->first_particle = particle;
		ts->first_seen = seen;
		ts->first_what = what;
	}
	UNLOCK(ts->lock)
}

/* Counts, in count[], the leaves under b that hold each particle; a
 * particle outside its leaf's square, a leaf over its capacity or a
 * parent holding particles is a fault. */
static void walk(long self, long r, const struct tm_box *b, long *count)
{
	if (b->type == TM_PARENT) {
		if (b->np != 0)
			note_bad(self, r, b->p[0], b->np, 3);
		for (long c = 0; c < 4; c++)
			if (b->child[c])
				walk(self, r, b->child[c], count);
		return;
	}
	if (b->np > TM_CAP && b->level < TM_DEPTH)
		note_bad(self, r, b->p[0], b->np, 2);
	for (long k = 0; k < b->np && k < TM_DEPTH + TM_CAP + 1; k++) {
		long i = b->p[k];
		double dx = coord(r, i, 0) - b->x, dy = coord(r, i, 1) - b->y;

		if (i < 0 || i >= TM_PARTICLES) {
			note_bad(self, r, i, 0, 4);
			continue;
		}
		count[i]++;
		if (dx < -b->half || dx > b->half || dy < -b->half ||
		    dy > b->half)
			note_bad(self, r, i, 1, 1);
	}
}

static void work(void)
{
	long id, *count = malloc(TM_PARTICLES * sizeof(*count));

	LOCK(ts->lock)
	id = ts->next_id++;
	ts->pids[id] = (long)getpid();
	ts->heaps[id] = (struct tm_box *)G_MALLOC(TM_HEAP *
						  sizeof(struct tm_box));
	UNLOCK(ts->lock)
	if (!ts->heaps[id] || !count)
		fail("out of memory");
	for (long r = 0; r < rounds; r++) {
		BARRIER(ts->bar, nprocs)
		ts->used[id] = 0;
		/* a new partition every round, as fmm's cost zones */
		for (long i = 0; i < TM_PARTICLES; i++)
			if ((i / 8 + r * 5) % nprocs == id)
				insert(id, r, i);
		BARRIER(ts->bar, nprocs)
		for (long i = 0; i < TM_PARTICLES; i++)
			count[i] = 0;
		walk(id, r, &ts->root, count);
		for (long i = 0; i < TM_PARTICLES; i++)
			if (count[i] != 1)
				note_bad(id, r, i, count[i], 0);
		BARRIER(ts->bar, nprocs)
		if (id == 0)
			for (long c = 0; c < 4; c++)
				ts->root.child[c] = NULL;
	}
	free(count);
}

int main(int argc, char **argv)
{
	static const char *what[] = {
		"in that many leaves", "in a leaf whose square does not hold it",
		"in a leaf over its capacity", "in a parent's own list",
		"an index out of range",
	};

	nprocs = argc > 1 ? atol(argv[1]) : 0;
	rounds = argc > 2 ? atol(argv[2]) : 4;
	if (nprocs < 1 || nprocs > TM_MAXP || rounds < 1 || rounds > 100000) {
		fprintf(stderr, "usage: treemerge P [ROUNDS]  (P <= %d)\n",
			TM_MAXP);
		return 2;
	}
	MAIN_INITENV
	ts = (struct tm_shared *)G_MALLOC(sizeof(*ts));
	if (!ts) {
		fprintf(stderr, "treemerge: G_MALLOC failed\n");
		MAIN_END(1)
	}
	BARINIT(ts->bar, nprocs)
	LOCKINIT(ts->lock)
	ALOCKINIT(ts->locks, TM_LOCKS)
	ts->next_id = 0;
	ts->bad = 0;
	ts->root.type = TM_PARENT;
	ts->root.level = 0;
	ts->root.x = ts->root.y = ts->root.half = 0.5;
	ts->root.lock = TM_LOCKS - 1;
	ts->root.np = 0;
	for (long c = 0; c < 4; c++)
		ts->root.child[c] = NULL;
	for (long i = 1; i < nprocs; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(nprocs - 1)
	if (ts->bad) {
		fprintf(stderr, "treemerge: %ld faults; first: process %ld "
			"(pid %ld) found particle %ld %s (%ld) after round "
			"%ld\n", ts->bad, ts->first_reader,
			ts->pids[ts->first_reader], ts->first_particle,
			what[ts->first_what], ts->first_seen,
			ts->first_round);
		MAIN_END(1)
	}
	printf("treemerge: %ld processes: PASSED (%ld rounds)\n", nprocs,
	       rounds);
	MAIN_END(0)
}
