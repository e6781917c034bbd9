/*
 * A PARMACS pattern of the original SPLASH-2 codes (issue 41), in both
 * builds: a record filled with plain writes and then made reachable by
 * a pointer, read by processes that follow the pointer without any
 * synchronisation.  barnes builds its tree so (a cell's fields, then
 * the parent's link to it under the parent's lock, while other
 * processes walk the tree with no lock) and fmm links its boxes so.
 * Threads on one machine never see the pointer before the record's
 * contents; a DSM that shows each page's change on its own can.
 *
 * Each round every process fills its next record (a ring of records on
 * pages of their own, far from the pointers, so that with several
 * reflectors the two have different homes), then stores the record's
 * address in ptrs[round][self]: under a lock in even rounds, by a plain
 * write in odd ones.  Then it waits, reading with no lock, for every
 * other process's pointer of the round and checks the record it points
 * at word by word.  Every process has read the same pages in earlier
 * rounds, so its cluster holds them, stale, when the change comes.  A
 * barrier every GROUP rounds keeps a writer from refilling a record
 * somebody may still read.
 *
 * Threads pass it (splash2-check), and so does Lemuria under copy =
 * cluster since its sets go into the copy as one and in order
 * (docs/dsm.md "Order"; run-dsm, every layout).  The tree before read
 * thousands of words stale on 4+4.
 *
 *   publish P [ROUNDS [HOW]]   (under lemuria-run, P is the layout's count)
 *
 * HOW: alternate (the default), lock (every pointer under the lock) or
 * plain (no pointer under it).
 *
 * Prints "publish: P processes: PASSED" and exits 0, or says what it
 * saw (the first record seen before its contents) and exits 1.  A
 * pointer that never comes is reported after SPIN_LIMIT_US.
 */
MAIN_ENV
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPIN_LIMIT_US 30000000ul
#define PUB_MAXP 64
#define PUB_MAXROUNDS 64
#define PUB_GROUP 4
#define PUB_RING 8             /* > PUB_GROUP: no record reused in a group */
#define PUB_WORDS 127          /* with the round, 1 KiB: 4 records a page */
#define PUB_RING_STRIDE 12     /* pages between two rings: homes alternate */

struct pub_record {
	long round;
	long words[PUB_WORDS];
};

struct pub_shared {
	BARDEC(bar)
	LOCKDEC(lock)
	long next_id;
	long bad;
	long first_bad_writer, first_bad_round, first_bad_seen;
	long first_bad_word, first_bad_value, first_bad_reader;
	struct pub_record *volatile ptrs[PUB_MAXROUNDS][PUB_MAXP];
};

static struct pub_shared *ps;
static char *rings;            /* PUB_RING records per process, strided */
static long nprocs, rounds, page;
static int how; /* 0 alternate, 1 every pointer under the lock, 2 none */

static struct pub_record *record(long writer, long round)
{
	return (struct pub_record *)(rings + writer * PUB_RING_STRIDE * page) +
	       round % PUB_RING;
}

static long word_value(long writer, long round, long i)
{
	return (writer + 1) * 7919 + round * 1000003 + i;
}

/* Waits for writer's pointer of round r and checks what it points at. */
static long check(long self, long writer, long r)
{
	struct pub_record *volatile *slot = &ps->ptrs[r][writer];
	volatile struct pub_record *rec;
	unsigned long start, now, spins = 0;
	long bad = 0, round_seen = -2, first_word = -1, value = 0;

	CLOCK(start)
	while ((rec = *slot) == NULL) {
		if (++spins % 4096)
			continue;
		CLOCK(now)
		if (now - start > SPIN_LIMIT_US) {
			fprintf(stderr, "publish: process %ld waited %lu s for "
				"process %ld's pointer of round %ld\n", self,
				SPIN_LIMIT_US / 1000000, writer, r);
			exit(1);
		}
	}
	if (rec != record(writer, r)) {
		bad = PUB_WORDS + 1;
	} else {
		round_seen = rec->round;
		if (round_seen != r)
			bad++;
		for (long i = 0; i < PUB_WORDS; i++) {
			long v = rec->words[i];

			if (v == word_value(writer, r, i))
				continue;
			if (first_word < 0) {
				first_word = i;
				value = v;
			}
			bad++;
		}
	}
	if (bad) {
		LOCK(ps->lock)
		if (ps->bad == 0) {
			ps->first_bad_writer = writer;
			ps->first_bad_round = r;
			ps->first_bad_seen = round_seen;
			ps->first_bad_word = first_word;
			ps->first_bad_value = value;
			ps->first_bad_reader = self;
		}
		ps->bad += bad;
		UNLOCK(ps->lock)
	}
	return bad;
}

static void work(void)
{
	long id;

	LOCK(ps->lock)
	id = ps->next_id++;
	UNLOCK(ps->lock)
	for (long r = 0; r < rounds; r++) {
		struct pub_record *mine = record(id, r);

		for (long i = 0; i < PUB_WORDS; i++)
			mine->words[i] = word_value(id, r, i);
		mine->round = r;
		/* the record before the pointer, as the source order says
		 * (what a compiler may move a plain store past) */
		__asm__ volatile("" ::: "memory");
		if (how == 1 || (how == 0 && r % 2 == 0)) {
			LOCK(ps->lock)
			ps->ptrs[r][id] = mine;
			UNLOCK(ps->lock)
		} else {
			ps->ptrs[r][id] = mine;
		}
		for (long k = 1; k < nprocs; k++)
			check(id, (id + k) % nprocs, r);
		if (r % PUB_GROUP == PUB_GROUP - 1)
			BARRIER(ps->bar, nprocs)
	}
}

int main(int argc, char **argv)
{
	nprocs = argc > 1 ? atol(argv[1]) : 0;
	rounds = argc > 2 ? atol(argv[2]) : 16;
	how = argc <= 3 ? 0 : !strcmp(argv[3], "lock") ? 1 :
	      !strcmp(argv[3], "plain") ? 2 :
	      !strcmp(argv[3], "alternate") ? 0 : -1;
	if (nprocs < 1 || nprocs > PUB_MAXP || rounds < 1 ||
	    rounds > PUB_MAXROUNDS || how < 0) {
		fprintf(stderr, "usage: publish P [ROUNDS [alternate|lock|"
			"plain]]  (P <= %d, ROUNDS <= %d)\n", PUB_MAXP,
			PUB_MAXROUNDS);
		return 2;
	}
	MAIN_INITENV
	page = 4096;
	ps = (struct pub_shared *)G_MALLOC(sizeof(*ps));
	rings = (char *)G_MALLOC(nprocs * PUB_RING_STRIDE * page);
	if (!ps || !rings) {
		fprintf(stderr, "publish: G_MALLOC failed\n");
		MAIN_END(1)
	}
	BARINIT(ps->bar, nprocs)
	LOCKINIT(ps->lock)
	ps->next_id = 0;
	ps->bad = 0;
	for (long r = 0; r < PUB_MAXROUNDS; r++)
		for (long p = 0; p < PUB_MAXP; p++)
			ps->ptrs[r][p] = NULL;
	for (long p = 0; p < nprocs; p++)
		for (long k = 0; k < PUB_RING; k++)
			((struct pub_record *)(rings + p * PUB_RING_STRIDE *
					       page))[k].round = -1;
	for (long i = 1; i < nprocs; i++)
		CREATE(work)
	work();
	WAIT_FOR_END(nprocs - 1)
	if (ps->bad) {
		fprintf(stderr, "publish: %ld words read wrong through pointers "
			"already seen; first: process %ld read process %ld's "
			"record of round %ld: round %ld, word %ld %ld (want "
			"%ld)\n", ps->bad, ps->first_bad_reader,
			ps->first_bad_writer, ps->first_bad_round,
			ps->first_bad_seen, ps->first_bad_word,
			ps->first_bad_value,
			ps->first_bad_word < 0 ? 0 :
			word_value(ps->first_bad_writer, ps->first_bad_round,
				   ps->first_bad_word));
		MAIN_END(1)
	}
	printf("publish: %ld processes: PASSED (%ld rounds)\n", nprocs,
	       rounds);
	MAIN_END(0)
}
