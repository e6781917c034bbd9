/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: fmm's ConstructGridLists.  Each box's list is built from its
 * parent's; the process that finished the parent raises a flag in each
 * child box with a plain write, and the child's process, which wrote
 * into the child box already, spins on that flag with no lock, then
 * reads the parent's list.  The boxes sit in heaps each process
 * allocated and filled itself (so at first only its cluster holds
 * them), the boxes straddle pages, and which process handles a box
 * changes every round, as fmm's cost zones move the partitions.  After
 * the round a barrier, then every process reads boxes across the tree
 * (fmm's ConstructInteractionLists), then another.  Then fmm's upward
 * pass (UpwardPass, ComputeSubTreeCosts): each child adds its subtree's
 * sum into its parent under the parent's lock, a lock boxes of other
 * heaps share, and counts itself in; the parent's process waits for the
 * count with no lock and reads the sum.  And its downward pass: a box's
 * process waits with no lock until its parent's count goes back to
 * zero, set so under the parent's lock once the parent's value is final,
 * and reads that value.
 *
 * Threads never see a flag or a count before what it announces, nor,
 * after a barrier, any box older than the round; a DSM that shows one
 * page of a change before another, or misses a change across a barrier,
 * can (fmm's boxes on 4+4+4+4 read such a list and overflowed a w_list:
 * docs/splash2.md).
 *
 *   treewave P [ROUNDS]   (under lemuria-run, P is the layout's count)
 *
 * Prints "treewave: P processes: PASSED (R rounds)" and exits 0, or
 * says what it read first wrong and exits 1.  A flag that never comes
 * is reported after SPIN_LIMIT_US.
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SPIN_LIMIT_US 30000000ul
#define TW_MAXP 64
#define TW_FANOUT 4
#define TW_BOXES 341 /* five levels: 1 + 4 + 16 + 64 + 256 */
#define TW_WORDS 180 /* a box is 1,512 bytes: boxes straddle pages */
#define TW_LOCKS 61  /* box k's lock: k % TW_LOCKS, shared by boxes of all heaps */

struct tw_box {
	volatile long flag; /* raised by the parent's process */
	long round;         /* of list[] and count */
	long count;
	long mark;          /* the box's process, before it waits */
	long list[TW_WORDS];
	long sum;           /* its children's subtree sums, added under its lock */
	volatile long counted; /* children that added theirs, under the lock */
	long down;          /* what it passes down, read by its children */
	long total;         /* its own subtree's sum, once complete */
};

struct tw_shared {
	BARDEC(bar)
	LOCKDEC(lock)
	ALOCKDEC(locks, TW_LOCKS)
	long next_id;
	struct tw_box *heaps[TW_MAXP];
	long pids[TW_MAXP];   /* which process each id is, for what it says */
	long bad;
	long first_reader, first_box, first_round, first_seen, first_word;
	long first_value, first_after_barrier;
	unsigned long first_at;
	long bad_sums, first_sum_box, first_sum_round, first_sum_seen, first_sum_want;
};

static struct tw_shared *ts;
static long nprocs, rounds;

static long per_heap(void)
{
	return (TW_BOXES + nprocs - 1) / nprocs;
}

/* Box k lives in process k % P's heap. */
static struct tw_box *box(long k)
{
	return ts->heaps[k % nprocs] + k / nprocs;
}

static long word_value(long round, long k, long i)
{
	return (k + 1) * 7919 + round * 1000003 + i;
}

static long count_value(long round, long k)
{
	return round * 31 + k;
}

/* Who handles box k in round r: a new partition every round. */
static long handler(long r, long k)
{
	unsigned long h = (unsigned long)k * 2654435761ul + (unsigned long)r * 40503ul;

	return (long)((h >> 7) % (unsigned long)nprocs);
}

static void note_bad(long self, long k, long r, long seen, long word,
		     long value, long after_barrier, long bad)
{
	unsigned long now;

	CLOCK(now)
	LOCK(ts->lock)
	if (ts->bad == 0) {
		ts->first_reader = self;
		ts->first_box = k;
		ts->first_round = r;
		ts->first_seen = seen;
		ts->first_word = word;
		ts->first_value = value;
		ts->first_after_barrier = after_barrier;
		ts->first_at = now;
	}
	ts->bad += bad;
	UNLOCK(ts->lock)
}

/* Box k as round r left it; how many words differ. */
static long check_box(long self, long k, long r, long after_barrier)
{
	volatile struct tw_box *b = box(k);
	long bad = 0, word = -1, value = 0, seen = b->round;

	if (seen != r)
		bad++;
	if (b->count != count_value(r, k)) {
		bad++;
		word = -2;
		value = b->count;
	}
	for (long i = 0; i < TW_WORDS; i++) {
		long v = b->list[i];

		if (v == word_value(r, k, i))
			continue;
		if (word == -1) {
			word = i;
			value = v;
		}
		bad++;
	}
	if (bad)
		note_bad(self, k, r, seen, word, value, after_barrier, bad);
	return bad;
}

/* Waits, reading with no lock, until *word is want (what: whose word,
 * for the message when it never comes).  A word written under one of
 * the locks (lock: its number; -1: none) is read again under it when the
 * wait gives up: a value right there was not shown in time, a value
 * wrong there too was lost. */
static void wait_word(volatile long *word, long want, long self,
		      const char *what, long k, long r, long lock)
{
	unsigned long start, now, spins = 0;

	CLOCK(start)
	while (*word != want) {
		if (++spins % 4096)
			continue;
		CLOCK(now)
		if (now - start > SPIN_LIMIT_US) {
			long seen = *word, locked = seen;

			if (lock >= 0) {
				ALOCK(ts->locks, lock)
				locked = *word;
				AULOCK(ts->locks, lock)
			}
			fprintf(stderr, "treewave: process %ld waited %lu s "
				"for %s of box %ld in round %ld: it reads "
				"%ld, not %ld (at %p)", self,
				SPIN_LIMIT_US / 1000000, what, k, r, seen,
				want, (void *)word);
			if (lock >= 0)
				fprintf(stderr, "; under its lock %ld: %ld (%s)",
					lock, locked, locked == want ?
					"written, not shown" : "the write lost");
			fprintf(stderr, "\n");
			exit(1);
		}
	}
}

/* A sum or a value passed down that box k read wrong in round r. */
static void note_bad_value(long k, long r, long seen, long want)
{
	if (seen == want)
		return;
	LOCK(ts->lock)
	if (ts->bad_sums++ == 0) {
		ts->first_sum_box = k;
		ts->first_sum_round = r;
		ts->first_sum_seen = seen;
		ts->first_sum_want = want;
	}
	UNLOCK(ts->lock)
}

/* What box k adds to its parent in round r: its own value plus its
 * children's; what the subtree under k sums to. */
static long own_value(long r, long k)
{
	return (k + 1) * 1009 + r * 7;
}

static long subtree_value(long r, long k)
{
	long v = own_value(r, k);

	for (long c = 1; c <= TW_FANOUT; c++)
		if (k * TW_FANOUT + c < TW_BOXES)
			v += subtree_value(r, k * TW_FANOUT + c);
	return v;
}

static long nchildren(long k)
{
	long n = 0;

	for (long c = 1; c <= TW_FANOUT; c++)
		n += k * TW_FANOUT + c < TW_BOXES;
	return n;
}

/* fmm's UpwardPass and ComputeSubTreeCosts: a box waits, reading with no
 * lock, until every child counted itself in under the box's lock, then
 * reads what they added under that lock and adds its own total to its
 * parent's, under the parent's lock (a lock other boxes share). */
static void upward(long self, long k, long r)
{
	volatile struct tw_box *b = box(k);
	long total;

	wait_word(&b->counted, nchildren(k), self, "the children's count",
		  k, r, k % TW_LOCKS);
	total = b->sum + own_value(r, k);
	note_bad_value(k, r, total, subtree_value(r, k));
	b->total = total;
	if (k > 0) {
		volatile struct tw_box *pb = box((k - 1) / TW_FANOUT);

		ALOCK(ts->locks, ((k - 1) / TW_FANOUT) % TW_LOCKS)
		pb->sum += total;
		pb->counted += 1;
		AULOCK(ts->locks, ((k - 1) / TW_FANOUT) % TW_LOCKS)
	}
}

static long down_value(long r, long k)
{
	return (k + 3) * 7717 + r * 131;
}

/* fmm's DownwardPass: a box waits, reading with no lock, until its
 * parent's count goes back to zero (the parent sets it so under its
 * lock once its own value is final), reads that value, and passes its
 * own on the same way. */
static void downward(long self, long k, long r)
{
	volatile struct tw_box *b = box(k);

	if (k > 0) {
		long parent = (k - 1) / TW_FANOUT;
		volatile struct tw_box *pb = box(parent);

		wait_word(&pb->counted, 0, self, "the parent's count", k, r,
			  parent % TW_LOCKS);
		note_bad_value(parent, r, pb->down, down_value(r, parent));
	}
	b->down = down_value(r, k);
	if (nchildren(k)) {
		ALOCK(ts->locks, k % TW_LOCKS)
		b->counted = 0;
		AULOCK(ts->locks, k % TW_LOCKS)
	}
}

static void wait_flag(long self, long k, long r)
{
	wait_word(&box(k)->flag, 1, self, "the flag", k, r, -1);
	box(k)->flag = 0;
}

static void work(void)
{
	long id;

	LOCK(ts->lock)
	id = ts->next_id++;
	ts->pids[id] = (long)getpid();
	ts->heaps[id] = (struct tw_box *)G_MALLOC(per_heap() *
						  sizeof(struct tw_box));
	UNLOCK(ts->lock)
	if (!ts->heaps[id]) {
		fprintf(stderr, "treewave: G_MALLOC failed\n");
		exit(1);
	}
	for (long j = 0; j < per_heap(); j++) {
		struct tw_box *b = ts->heaps[id] + j;

		b->flag = 0;
		b->sum = 0;
		b->counted = 0;
		b->round = -1;
		b->count = 0;
		b->mark = -1;
		for (long i = 0; i < TW_WORDS; i++)
			b->list[i] = 0;
	}
	BARRIER(ts->bar, nprocs)
	for (long r = 0; r < rounds; r++) {
		/* boxes in level order: a parent's process never waits for a
		 * deeper box, so the wave cannot deadlock */
		for (long k = 0; k < TW_BOXES; k++) {
			struct tw_box *b = box(k);

			if (handler(r, k) != id)
				continue;
			b->mark = r;
			if (k > 0) {
				wait_flag(id, k, r);
				check_box(id, (k - 1) / TW_FANOUT, r, 0);
			}
			b->round = r;
			b->count = count_value(r, k);
			for (long i = 0; i < TW_WORDS; i++)
				b->list[i] = word_value(r, k, i);
			/* the list before the flags, as the source says */
			__asm__ volatile("" ::: "memory");
			for (long c = 1; c <= TW_FANOUT; c++)
				if (k * TW_FANOUT + c < TW_BOXES)
					box(k * TW_FANOUT + c)->flag = 1;
		}
		BARRIER(ts->bar, nprocs)
		for (long k = id % 3; k < TW_BOXES; k += 3)
			check_box(id, k, r, 1);
		BARRIER(ts->bar, nprocs)
		/* the upward pass, deepest boxes first (a box waits only for
		 * deeper ones), then the sums go back to zero for the next */
		for (long k = TW_BOXES - 1; k >= 0; k--)
			if (handler(r + 1, k) == id)
				upward(id, k, r);
		BARRIER(ts->bar, nprocs)
		/* and down again, top first */
		for (long k = 0; k < TW_BOXES; k++)
			if (handler(r + 2, k) == id)
				downward(id, k, r);
		BARRIER(ts->bar, nprocs)
		for (long k = 0; k < TW_BOXES; k++)
			if (handler(r + 1, k) == id) {
				box(k)->sum = 0;
				box(k)->counted = 0;
			}
		BARRIER(ts->bar, nprocs)
	}
}

int main(int argc, char **argv)
{
	nprocs = argc > 1 ? atol(argv[1]) : 0;
	rounds = argc > 2 ? atol(argv[2]) : 8;
	if (nprocs < 1 || nprocs > TW_MAXP || rounds < 1 || rounds > 100000) {
		fprintf(stderr, "usage: treewave P [ROUNDS]  (P <= %d)\n",
			TW_MAXP);
		return 2;
	}
	MAIN_INITENV
	ts = (struct tw_shared *)G_MALLOC(sizeof(*ts));
	if (!ts) {
		fprintf(stderr, "treewave: G_MALLOC failed\n");
		MAIN_END(1)
	}
	BARINIT(ts->bar, nprocs)
	LOCKINIT(ts->lock)
	ts->next_id = 0;
	ts->bad = 0;
	ts->bad_sums = 0;
	ALOCKINIT(ts->locks, TW_LOCKS)
	for (long i = 1; i < nprocs; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(nprocs - 1)
	if (ts->bad_sums) {
		fprintf(stderr, "treewave: %ld sums or values passed down read "
			"wrong; first: box %ld in round %ld: %ld (want %ld)\n",
			ts->bad_sums, ts->first_sum_box, ts->first_sum_round,
			ts->first_sum_seen, ts->first_sum_want);
		if (!ts->bad)
			MAIN_END(1)
	}
	if (ts->bad) {
		long fw = ts->first_word, fr = ts->first_round;
		long fb = ts->first_box;

		fprintf(stderr, "treewave: %ld words read wrong; first: process "
			"%ld read box %ld (at %p) %s in round %ld: it held "
			"round %ld", ts->bad, ts->first_reader, fb,
			(void *)box(fb), ts->first_after_barrier ?
			"after the barrier" : "behind its child's flag", fr,
			ts->first_seen);
		if (fw == -2)
			fprintf(stderr, ", count %ld (want %ld)",
				ts->first_value, count_value(fr, fb));
		else if (fw >= 0)
			fprintf(stderr, ", word %ld %ld (want %ld)", fw,
				ts->first_value, word_value(fr, fb, fw));
		fprintf(stderr, ", at %lu us (reader pid %ld, writer pid "
			"%ld)\n", ts->first_at, ts->pids[ts->first_reader],
			ts->pids[handler(fr, fb)]);
		MAIN_END(1)
	}
	printf("treewave: %ld processes: PASSED (%ld rounds)\n", nprocs,
	       rounds);
	MAIN_END(0)
}
