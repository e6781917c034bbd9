/* dsmtest: SPMD programs that check the DSM's promises end to end, run by
 * tests/run-dsm.sh under lemuria-run on several layouts.
 *
 *   dsmtest counter K          every process adds 1 to a shared counter K
 *                              times under a lock; the total must be exact
 *   dsmtest barriers N         N barrier rounds; in each, every process
 *                              writes its slot and must then read every
 *                              other process's value of that round
 *   dsmtest die RANK           after a first barrier, process RANK kills
 *                              itself (SIGKILL); the others wait in a
 *                              second barrier that can never complete
 *   dsmtest stress R PAGES S   R rounds over a PAGES-page buffer: each
 *                              process writes random disjoint byte ranges
 *                              (from seed S), then a barrier (even rounds)
 *                              or a lock hand-off in rank order (odd
 *                              rounds); every process checks the whole
 *                              buffer against a reference model
 *   dsmtest compute MS         rank 0 writes 16 pages; after a barrier
 *                              every other process reads them (read
 *                              faults) and computes MS milliseconds
 *                              without calling the library, then all
 *                              meet at a barrier (the acks of the last
 *                              replies must leave meanwhile: docs/dsm.md
 *                              "Client acknowledgements")
 *   dsmtest lastread MS        every process fills a page of its own
 *                              (its cluster comes to own it), and after
 *                              a barrier all but rank 0 leave; rank 0
 *                              reads every page MS milliseconds later,
 *                              which only the writers' lemuriads hold
 *                              (a launcher on each host must keep its
 *                              lemuriad until the run is over)
 *   dsmtest lockbar RANK       rank 0 takes lock 1 and waits in a barrier;
 *                              rank RANK asks for lock 1 meanwhile: it
 *                              can never have it, nor the others pass
 *                              the barrier (the run must end at once)
 *   dsmtest lockcycle A B      rank A takes lock 1 and rank B lock 2;
 *                              after a barrier A asks for lock 2 and B
 *                              for lock 1: neither can go on (the run
 *                              must end naming the cycle)
 *   dsmtest sleep S            a barrier, then rank 0 sleeps S seconds
 *                              while the others wait in a second barrier
 *                              with nothing to send (for liveness tests)
 *   dsmtest misuse 1           API misuse (issue 6): lm_unlock of a lock
 *                              not held, lm_lock of a lock held (issue
 *                              42), lm_free of memory lm_malloc did
 *                              not return (a stack address, and a shared
 *                              address freed twice), lm_malloc beyond the
 *                              region: each must fail with an error, and
 *                              the run must go on working after them
 *   dsmtest early 1            calls before lm_init (lm_lock, lm_unlock,
 *                              lm_barrier, lm_malloc, lm_free,
 *                              lm_distribute) and a second lm_init must
 *                              each fail, named by the library (issue
 *                              42); the run then works
 *   dsmtest ids 1              lock and barrier ids out of range (issue
 *                              38): lm_lock, lm_unlock and lm_barrier of
 *                              0, negative ids and the runtime's own must
 *                              each fail with LM_EINVAL; then the ends of
 *                              the range, lm_id_alloc's ids and
 *                              lm_distribute (the runtime's barrier)
 *                              must still work
 *   dsmtest numbering 1        the SPLASH-2 start: rank 0 CREATEs every
 *                              other process, then each (rank 0 last)
 *                              takes a number under a lock; each
 *                              cluster's processes must have consecutive
 *                              numbers (docs/dsm.md "Locks": a recalled
 *                              token waits for the fresh clients)
 *   dsmtest counters K GAP     two counters GAP bytes apart (GAP 8: one
 *                              page), each under a lock of its own; every
 *                              process adds 1 to each K times, checking
 *                              that the value it finds under the lock
 *                              never goes back; then the totals must be
 *                              exact (lost releases across reflectors)
 *   dsmtest chain ROUNDS       visibility through a chain of two locks:
 *                              a writer sets x under lock A; a second
 *                              process, in another cluster, sees it
 *                              under A and then sets y under lock B; a
 *                              third (another cluster in even rounds,
 *                              the second's own cluster in odd ones)
 *                              sees y under B and must then see x,
 *                              though every process held a copy of x's
 *                              page from before
 *   dsmtest created PAGES      rank 0 writes PAGES pages (every home) and
 *                              a global, then CREATEs every other rank,
 *                              each of which must read them all without
 *                              any barrier in between (CREATE's data)
 *   dsmtest exit0 serve        rank 0 exits with exit(0) before any CREATE
 *                              and without lm_finalize, as a SPLASH-2
 *                              main does on bad input; the others wait
 *                              for work (lm_worker_serve) and must be
 *                              released at once
 *   dsmtest exit0 MS           the same exit of rank 0 while the others
 *                              run SPMD: they compute MS milliseconds,
 *                              then take and release a lock, and must not
 *                              be stopped meanwhile
 *   dsmtest chaos R SEED [PAGES]
 *                              R rounds of a random race-free program
 *                              from SEED over a PAGES-page area (40):
 *                              records of 8 locks side by side on
 *                              shared pages, lock phases several in a
 *                              row between barriers, barrier phases
 *                              with false sharing, chains of locks,
 *                              data written before CREATE; checked
 *                              under the locks and against a model
 *                              after each barrier (below, "chaos")
 *   dsmtest visible R PAGES S  R rounds (seed S): every process owns a few
 *                              words at random places in PAGES pages
 *                              (shared with other processes' words) and
 *                              raises them step by step, plainly, under
 *                              a lock, or followed by an unrelated
 *                              lock's release, while it reads every
 *                              other process's words with no
 *                              synchronisation: a word must never go
 *                              back, and every final value must be seen
 *                              within VISIBLE_LIMIT_US (docs/dsm.md
 *                              "Eventual visibility"); a barrier ends
 *                              each round, after which all must hold;
 *                              in one round in two (seeded, when PAGES
 *                              >= clusters) each cluster's words lie
 *                              in pages of its own
 *   dsmtest owners E PAGES S   E eras over PAGES pages (seed S): in each
 *                              era every page has one writer rank (or
 *                              none) that rewrites it whole for 3 to 7
 *                              barrier rounds; after each barrier it
 *                              checks the page, another process now and
 *                              then, every process at the era's end, so
 *                              pages
 *                              come to be owned by one cluster, are
 *                              taken back by readers and move on to the
 *                              next era's writer (docs/dsm.md "Pages one
 *                              cluster owns"); each era ends with a
 *                              token handed on in rank order under a
 *                              lock, each holder checking and rewriting
 *                              a page its predecessor wrote
 *   dsmtest leave RANK [LAST]  process RANK (or RANK..LAST, a whole
 *                              cluster say) finishes (lm_finalize) at
 *                              once; the others wait in a barrier that
 *                              can therefore never complete: the run
 *                              must end saying so (issue 42), never hang
 *   dsmtest nofinal RANK       process RANK exits (status 0) without
 *                              lm_finalize while the others wait in a
 *                              barrier: it is named, and the run ends
 *                              at once (issue 42)
 *   dsmtest split 1|2          even ranks (2: the ranks of even clusters)
 *                              wait in barrier 1, the others in barrier
 *                              2: neither can complete, and the run must
 *                              end saying so (issue 42)
 *   dsmtest low 1              shared memory lies below 4 GiB, as the
 *                              project's layouts put it (issue 41): a
 *                              pointer from lm_malloc kept in a 32-bit
 *                              int, as four of the original SPLASH-2
 *                              codes keep theirs, still points to it
 *   dsmtest private R BYTES    R barrier rounds; each process rewrites
 *                              BYTES bytes of a slice of its own that no
 *                              other process ever reads, and checks them
 *                              (with lazy relay, none of it leaves its
 *                              cluster: tests/run-dsm.sh checks counters)
 *
 * Exit status 0 and "PASSED" when every check held; 1 and the first
 * difference otherwise. */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lemuria.h"

static int rank, nprocs;

/* Processes a program that gives each its own byte of a page takes. */
#define LM_DSM_MAX_PROCS 64

static void die(const char *what, int rc)
{
	fprintf(stderr, "dsmtest: rank %d: %s: %s\n", rank, what,
		lm_strerror(rc));
	exit(1);
}

static void check(int rc, const char *what)
{
	if (rc < 0)
		die(what, rc);
}

/* A counter and its lock in shared memory, rank 0's, known to all. */
struct counter {
	int lock;
	long counter;
};

static struct counter *shared_counter(void)
{
	struct counter *s = NULL;

	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s)
			die("lm_malloc", -2);
		s->lock = lm_id_alloc(1);
		check(s->lock, "lm_id_alloc");
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	return s;
}

static int run_counter(long k)
{
	struct counter *s = shared_counter();

	for (long i = 0; i < k; i++) {
		check(lm_lock(s->lock), "lm_lock");
		s->counter++;
		check(lm_unlock(s->lock), "lm_unlock");
	}
	check(lm_barrier(1), "lm_barrier");
	if (s->counter != k * nprocs) {
		fprintf(stderr, "dsmtest: rank %d: counter is %ld, expected "
			"%ld\n", rank, s->counter, k * nprocs);
		return 1;
	}
	return 0;
}

/* counters: two counters `gap` bytes apart, lock ids alternate. */
static int run_counters(long k, long gap)
{
	struct shared {
		int lock[2];
		unsigned char *area;
	} *s = NULL;
	long last[2] = { -1, -1 };

	if (gap < 8 || gap > 65536 || gap % 8) {
		fprintf(stderr, "dsmtest: GAP must be a multiple of 8 in "
			"8..65536\n");
		return 2;
	}
	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s || !(s->area = lm_malloc((size_t)gap + 8)))
			die("lm_malloc", -2);
		s->lock[0] = lm_id_alloc(2);
		check(s->lock[0], "lm_id_alloc");
		s->lock[1] = s->lock[0] + 1;
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	for (long i = 0; i < k; i++) {
		for (int c = 0; c < 2; c++) {
			long *ctr = (long *)(s->area + c * gap);

			check(lm_lock(s->lock[c]), "lm_lock");
			/* equal is fine: nobody took the lock in between */
			if (*ctr < last[c]) {
				fprintf(stderr, "dsmtest: rank %d: counter %d "
					"went backwards under its lock: %ld "
					"after %ld\n", rank, c, *ctr, last[c]);
				return 1;
			}
			last[c] = ++*ctr;
			check(lm_unlock(s->lock[c]), "lm_unlock");
		}
	}
	check(lm_barrier(13), "lm_barrier");
	for (int c = 0; c < 2; c++) {
		long v = *(long *)(s->area + c * gap);

		if (v != k * nprocs) {
			fprintf(stderr, "dsmtest: rank %d: counter %d is %ld, "
				"expected %ld\n", rank, c, v, k * nprocs);
			return 1;
		}
	}
	return 0;
}

/* The first rank after `from` (cyclically) whose cluster is not `a` or
 * `b` (-1: any); `from` itself when there is none. */
static int rank_after(const int *cluster, int from, int a, int b)
{
	for (int k = 1; k < nprocs; k++) {
		int q = (from + k) % nprocs;

		if (cluster[q] != a && cluster[q] != b)
			return q;
	}
	return from;
}

/* Spins on lock `id` until *word == want: at most `limit_us`. */
static int await_under(int id, volatile long *word, long want, long r,
		       const char *what)
{
	uint64_t end = lm_clock_us() + 20u * 1000 * 1000;

	for (;;) {
		long v;

		check(lm_lock(id), "lm_lock");
		v = *word;
		if (v == want)
			return 0; /* still holding the lock */
		check(lm_unlock(id), "lm_unlock");
		if (lm_clock_us() > end) {
			fprintf(stderr, "dsmtest: rank %d, round %ld: %s "
				"still %ld after 20 s, expected %ld\n", rank,
				r, what, v, want);
			return 1;
		}
		usleep(200);
	}
}

static int run_chain(long rounds)
{
	struct shared {
		int lock_a, lock_b;
		int cluster[1024];
		volatile long *x, *y; /* a page each, apart */
	} *s = NULL;

	if (nprocs < 3 || nprocs > 1024) {
		fprintf(stderr, "dsmtest: chain needs 3..1024 processes\n");
		return 2;
	}
	if (rank == 0) {
		unsigned char *area = lm_malloc(3 * 4096);

		s = lm_malloc(sizeof(*s));
		if (!s || !area)
			die("lm_malloc", -2);
		s->x = (volatile long *)area;
		s->y = (volatile long *)(area + 2 * 4096);
		s->lock_a = lm_id_alloc(2);
		check(s->lock_a, "lm_id_alloc");
		s->lock_b = s->lock_a + 1;
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	s->cluster[rank] = lm_cluster();
	check(lm_barrier(14), "lm_barrier");
	for (long r = 1; r <= rounds; r++) {
		int w = (int)(r % nprocs);
		int m = rank_after(s->cluster, w, s->cluster[w], -1);
		int z = r % 2 ? rank_after(s->cluster, m, s->cluster[w], -2)
			      : rank_after(s->cluster, m, s->cluster[w],
					   s->cluster[m]);
		long seen;

		if (r % 2 && s->cluster[z] != s->cluster[m])
			for (int k = 1; k < nprocs; k++) /* m's cluster-mate */
				if (s->cluster[(m + k) % nprocs] ==
				    s->cluster[m] && (m + k) % nprocs != w) {
					z = (m + k) % nprocs;
					break;
				}
		/* every process caches both pages as of the last round */
		seen = *s->x + *s->y;
		if (seen != 2 * (r - 1)) {
			fprintf(stderr, "dsmtest: rank %d, round %ld: x + y "
				"is %ld after the barrier, expected %ld\n",
				rank, r, seen, 2 * (r - 1));
			return 1;
		}
		check(lm_barrier(15), "lm_barrier");
		if (w == m || m == z || z == w) {
			/* one cluster: no chain to test this round */
		} else if (rank == w) {
			check(lm_lock(s->lock_a), "lm_lock");
			*s->x = r;
			check(lm_unlock(s->lock_a), "lm_unlock");
		} else if (rank == m) {
			if (await_under(s->lock_a, s->x, r, r, "x"))
				return 1;
			check(lm_lock(s->lock_b), "lm_lock");
			*s->y = r;
			check(lm_unlock(s->lock_b), "lm_unlock");
			check(lm_unlock(s->lock_a), "lm_unlock");
		} else if (rank == z) {
			if (await_under(s->lock_b, s->y, r, r, "y"))
				return 1;
			seen = *s->x; /* ordered by the chain: no race */
			check(lm_unlock(s->lock_b), "lm_unlock");
			if (seen != r) {
				fprintf(stderr, "dsmtest: rank %d (cluster %d), "
					"round %ld: x is %ld after y, expected "
					"%ld (written by rank %d of cluster %d, "
					"passed on by rank %d of cluster %d)\n",
					rank, s->cluster[rank], r, seen, r, w,
					s->cluster[w], m, s->cluster[m]);
				return 1;
			}
		}
		check(lm_barrier(16), "lm_barrier");
		if (rank == 0 && (*s->x != r || *s->y != r)) {
			/* a round without a chain sets both too, so that
			 * the next round's check holds */
			check(lm_lock(s->lock_a), "lm_lock");
			*s->x = r;
			check(lm_unlock(s->lock_a), "lm_unlock");
			check(lm_lock(s->lock_b), "lm_lock");
			*s->y = r;
			check(lm_unlock(s->lock_b), "lm_unlock");
		}
		check(lm_barrier(17), "lm_barrier");
	}
	return 0;
}

/* created: what rank 0 writes before CREATE, and the workers read. */
static struct created {
	long pages;
	uint64_t *data;
	int failed;
} created;

static uint64_t created_word(long p, long w)
{
	return 0x9e3779b97f4a7c15ull * (uint64_t)(p * 512 + w + 1);
}

static void check_created(void)
{
	for (long p = 0; p < created.pages; p++)
		for (long w = 0; w < 512; w += 61) {
			uint64_t v = created.data[p * 512 + w];

			if (v != created_word(p, w)) {
				fprintf(stderr, "dsmtest: rank %d: page %ld "
					"word %ld is %#" PRIx64 ", expected %#"
					PRIx64 " (written before CREATE)\n",
					lm_rank(), p, w, v, created_word(p, w));
				exit(1);
			}
		}
}

static int run_created(long pages)
{
	if (pages < 1 || pages > 4096) {
		fprintf(stderr, "dsmtest: PAGES must be 1..4096\n");
		return 2;
	}
	created.pages = pages;
	created.data = lm_malloc((size_t)pages * 4096);
	if (!created.data)
		die("lm_malloc", -2);
	for (long p = 0; p < pages; p++)
		for (long w = 0; w < 512; w++)
			created.data[p * 512 + w] = created_word(p, w);
	for (int p = 1; p < nprocs; p++)
		check(lm_create(check_created), "lm_create");
	check(lm_wait_for_end(nprocs - 1), "lm_wait_for_end");
	return 0;
}

/* numbering: what the created processes see (shipped with CREATE). */
static struct numbering {
	int lock;
	int next;
	int cluster_of[1024]; /* by number */
} *numbers;

static void take_number(void)
{
	int n;

	check(lm_lock(numbers->lock), "lm_lock");
	n = numbers->next++;
	check(lm_unlock(numbers->lock), "lm_unlock");
	if (n >= 0 && n < 1024)
		numbers->cluster_of[n] = lm_cluster();
}

static int run_numbering(void)
{
	int seen[1024] = { 0 }, bad = 0;

	if (nprocs > 1024)
		return 2;
	numbers = lm_malloc(sizeof(*numbers));
	if (!numbers)
		die("lm_malloc", -2);
	numbers->lock = lm_id_alloc(1);
	check(numbers->lock, "lm_id_alloc");
	for (int p = 1; p < nprocs; p++)
		check(lm_create(take_number), "lm_create");
	take_number();
	check(lm_wait_for_end(nprocs - 1), "lm_wait_for_end");
	/* a cluster seen before must be the one just seen */
	for (int n = 0; n < nprocs; n++) {
		int c = numbers->cluster_of[n];

		printf("%d%c", c, n + 1 < nprocs ? ' ' : '\n');
		if (c < 0 || c >= 1024)
			return 1;
		if (n > 0 && c != numbers->cluster_of[n - 1] && seen[c])
			bad++;
		seen[c] = 1;
	}
	if (bad || numbers->next != nprocs) {
		fprintf(stderr, "dsmtest: numbering: a cluster's processes "
			"got numbers apart (clusters by number above)\n");
		return 1;
	}
	return 0;
}

static int run_barriers(long rounds)
{
	long *slots = NULL;

	if (rank == 0 && !(slots = lm_malloc(sizeof(long) * (size_t)nprocs)))
		die("lm_malloc", -2);
	check(lm_distribute(&slots, sizeof(slots)), "lm_distribute");
	for (long r = 1; r <= rounds; r++) {
		slots[rank] = r * 1000 + rank;
		check(lm_barrier(2), "lm_barrier");
		for (int p = 0; p < nprocs; p++) {
			if (slots[p] != r * 1000 + p) {
				fprintf(stderr, "dsmtest: rank %d, round %ld: "
					"slot %d holds %ld, expected %ld\n",
					rank, r, p, slots[p], r * 1000 + p);
				return 1;
			}
		}
		check(lm_barrier(3), "lm_barrier");
	}
	return 0;
}

/* splitmix64: the same sequence in every process. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Round r: owner[i] is the rank that writes byte i (or -1), value[i] what
 * it writes.  Ranges of random length up to a page, so pages are written
 * by several processes at once (false sharing). */
static void plan_round(uint64_t seed, long r, size_t len, int *owner,
		       uint8_t *value)
{
	uint64_t s = seed * 1000003u + (uint64_t)r;
	size_t i = 0;

	while (i < len) {
		size_t run = 1 + next_rand(&s) % 4096;
		int who = (int)(next_rand(&s) % (uint64_t)(nprocs + 1)) - 1;

		for (size_t j = i; j < len && j < i + run; j++) {
			owner[j] = who;
			value[j] = (uint8_t)next_rand(&s);
		}
		i += run;
	}
}

static int compare(const uint8_t *buf, const uint8_t *model, size_t len,
		   long r, const char *when)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != model[i]) {
			fprintf(stderr, "dsmtest: rank %d, round %ld (%s): "
				"byte %zu is %u, expected %u\n",
				rank, r, when, i, buf[i], model[i]);
			return 1;
		}
	}
	return 0;
}

static int run_stress(long rounds, long pages, uint64_t seed)
{
	struct shared {
		int lock;
		int turn;
		uint8_t *buf;
	} *s = NULL;
	size_t len = (size_t)pages * 4096;
	uint8_t *model = calloc(len, 1), *value = malloc(len);
	int *owner = malloc(len * sizeof(int));

	if (!model || !value || !owner)
		die("malloc", -2);
	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s || !(s->buf = lm_malloc(len)))
			die("lm_malloc", -2);
		s->lock = lm_id_alloc(1);
		check(s->lock, "lm_id_alloc");
		s->turn = 0;
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	for (long r = 0; r < rounds; r++) {
		plan_round(seed, r, len, owner, value);
		if (r % 2 == 0) {
			for (size_t i = 0; i < len; i++)
				if (owner[i] == rank)
					s->buf[i] = value[i];
			check(lm_barrier(4), "lm_barrier");
		} else {
			/* Hand the lock on in rank order; each process must
			 * see the writes of every rank before it. */
			for (;;) {
				check(lm_lock(s->lock), "lm_lock");
				if (s->turn == rank)
					break;
				check(lm_unlock(s->lock), "lm_unlock");
			}
			for (size_t i = 0; i < len; i++)
				if (owner[i] >= 0 && owner[i] < rank)
					model[i] = value[i];
			if (compare(s->buf, model, len, r, "after lock"))
				return 1;
			for (size_t i = 0; i < len; i++)
				if (owner[i] == rank)
					s->buf[i] = value[i];
			s->turn = (rank + 1) % nprocs;
			check(lm_unlock(s->lock), "lm_unlock");
			check(lm_barrier(4), "lm_barrier");
		}
		for (size_t i = 0; i < len; i++)
			if (owner[i] >= 0)
				model[i] = value[i];
		if (compare(s->buf, model, len, r, "after barrier"))
			return 1;
		check(lm_barrier(5), "lm_barrier");
	}
	free(model);
	free(value);
	free(owner);
	return 0;
}

/* visible: words per process, steps per round, and how long a reader
 * may wait for a final value (the promise is 0.15 s to 1.1 s; loss and a
 * loaded host stretch it). */
#define VISIBLE_WORDS 3
#define VISIBLE_STEPS 4
#define VISIBLE_LIMIT_US 10000000ull

/* Reads every other process's words once: none may go back. */
static int visible_scan(volatile uint64_t *buf, const size_t *slot,
			uint64_t *seen, long r, size_t *left, uint64_t final)
{
	for (int p = 0; p < nprocs; p++) {
		for (int j = 0; p != rank && j < VISIBLE_WORDS; j++) {
			size_t k = (size_t)p * VISIBLE_WORDS + (size_t)j;
			uint64_t v = buf[slot[k]];

			if (v < seen[k]) {
				fprintf(stderr, "dsmtest: rank %d, round %ld: "
					"rank %d's word %d went back from %"
					PRIu64 " to %" PRIu64 "\n", rank, r,
					p, j, seen[k], v);
				return 1;
			}
			if (v == final && seen[k] != final)
				(*left)--;
			seen[k] = v;
		}
	}
	return 0;
}

static int run_visible(long rounds, long pages, uint64_t seed)
{
	const size_t words = (size_t)pages * 4096 / sizeof(uint64_t);
	const size_t nslots = (size_t)nprocs * VISIBLE_WORDS;
	struct shared {
		int lock[2];
		uint64_t *buf;
		int cluster[256]; /* each rank's */
	} *s = NULL;
	int nclusters = 0;
	size_t *slot = malloc(nslots * sizeof(*slot));
	uint64_t *seen = malloc(nslots * sizeof(*seen));
	uint64_t worst = 0;

	if (!slot || !seen || words < nslots)
		die("visible: malloc, or fewer words than processes' words",
		    -2);
	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s || !(s->buf = lm_malloc((size_t)pages * 4096)))
			die("lm_malloc", -2);
		s->lock[0] = lm_id_alloc(1);
		s->lock[1] = lm_id_alloc(1);
		check(s->lock[0], "lm_id_alloc");
		check(s->lock[1], "lm_id_alloc");
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	s->cluster[rank] = lm_cluster();
	check(lm_barrier(4), "lm_barrier");
	for (int p = 0; p < nprocs; p++)
		if (s->cluster[p] >= nclusters)
			nclusters = s->cluster[p] + 1;
	for (long r = 0; r < rounds; r++) {
		volatile uint64_t *buf = s->buf;
		uint64_t z = seed ^ ((uint64_t)r << 40), final, start;
		size_t left = nslots - VISIBLE_WORDS;
		/* one round in two (when there are pages enough), each
		 * cluster's words lie in pages of its own: a page one cluster
		 * writes, published several times in the round, then written
		 * by others in the next while its writers spin on it (a copy
		 * kept behind a notice it covered missed such changes) */
		int apart = nclusters > 1 && pages >= nclusters &&
			    next_rand(&z) % 2 == 0;

		/* distinct words, drawn anywhere in the pages: several
		 * processes' words share a page */
		for (size_t k = 0; k < nslots; k++) {
			size_t w;
			int again;

			do {
				w = (size_t)(next_rand(&z) % words);
				if (apart) { /* into a page of its cluster's:
					      * pages c, c + n, c + 2n ... */
					size_t n = (size_t)nclusters, c =
						(size_t)s->cluster[k /
							VISIBLE_WORDS],
					       own = ((size_t)pages - c + n -
						      1) / n;

					w = (w / 512 % own * n + c) * 512 +
					    w % 512;
				}
				again = 0;
				for (size_t q = 0; q < k; q++)
					again |= slot[q] == w;
			} while (again);
			slot[k] = w;
		}
		for (size_t k = 0; k < nslots; k++)
			seen[k] = 0; /* a word may hold an older round's value */
		final = (uint64_t)(r + 1) * VISIBLE_STEPS;
		start = lm_clock_us();
		for (uint64_t step = 1; step <= VISIBLE_STEPS; step++) {
			uint64_t mine = (uint64_t)r * VISIBLE_STEPS + step;
			uint64_t h = seed ^ ((uint64_t)r << 24) ^
				     ((uint64_t)rank << 8) ^ step;
			uint64_t pause = next_rand(&h) % 3000, t0;
			int how = (int)(next_rand(&h) % 3);

			if (how == 1)
				check(lm_lock(s->lock[0]), "lm_lock");
			for (int j = 0; j < VISIBLE_WORDS; j++)
				buf[slot[(size_t)rank * VISIBLE_WORDS +
					 (size_t)j]] = mine;
			if (how == 1)
				check(lm_unlock(s->lock[0]), "lm_unlock");
			if (how == 2) {
				check(lm_lock(s->lock[1]), "lm_lock");
				check(lm_unlock(s->lock[1]), "lm_unlock");
			}
			/* read the others for a while before the next step */
			t0 = lm_clock_us();
			do {
				if (visible_scan(buf, slot, seen, r, &left,
						 final))
					return 1;
			} while (lm_clock_us() - t0 < pause);
		}
		while (left) {
			if (visible_scan(buf, slot, seen, r, &left, final))
				return 1;
			if (lm_clock_us() - start > VISIBLE_LIMIT_US) {
				for (size_t k = 0; k < nslots; k++)
					if (k / VISIBLE_WORDS != (size_t)rank &&
					    seen[k] != final)
						fprintf(stderr, "dsmtest: rank "
							"%d, round %ld: rank "
							"%zu's word %zu still "
							"reads %" PRIu64 ", "
							"not %" PRIu64 " after "
							"%llu s\n", rank, r,
							k / VISIBLE_WORDS,
							k % VISIBLE_WORDS,
							seen[k], final,
							VISIBLE_LIMIT_US /
							1000000);
				return 1;
			}
		}
		if (lm_clock_us() - start > worst)
			worst = lm_clock_us() - start;
		check(lm_barrier(4), "lm_barrier");
		for (size_t k = 0; k < nslots; k++)
			if (buf[slot[k]] != final) {
				fprintf(stderr, "dsmtest: rank %d, round %ld: "
					"after the barrier rank %zu's word "
					"reads %" PRIu64 ", not %" PRIu64 "\n",
					rank, r, k / VISIBLE_WORDS,
					buf[slot[k]], final);
				return 1;
			}
		check(lm_barrier(5), "lm_barrier");
	}
	printf("dsmtest visible: rank %d saw every final value within %.1f ms "
	       "of its round's start\n", rank, (double)worst / 1000.0);
	free(slot);
	free(seen);
	return 0;
}

static int run_leave(int leaver, int last)
{
	if (rank >= leaver && rank <= last) {
		/* after the others are in the barrier, most often */
		usleep(300 * 1000);
		return 0; /* main's lm_finalize: LEAVE */
	}
	check(lm_barrier(1), "lm_barrier");
	fprintf(stderr, "dsmtest: rank %d passed a barrier ranks %d-%d left "
		"before\n", rank, leaver, last);
	return 1;
}

static int run_nofinal(int quitter)
{
	if (rank == quitter) {
		usleep(300 * 1000);
		exit(0); /* no lm_finalize: the library names it */
	}
	check(lm_barrier(1), "lm_barrier");
	fprintf(stderr, "dsmtest: rank %d passed a barrier rank %d never "
		"reached\n", rank, quitter);
	return 1;
}

static int run_split(int by_cluster)
{
	int id = 1 + (by_cluster ? lm_cluster() : rank) % 2;

	check(lm_barrier(id), "lm_barrier");
	fprintf(stderr, "dsmtest: rank %d passed barrier %d, which the other "
		"half of the ranks never called\n", rank, id);
	return 1;
}

static int run_low(void)
{
	long *p = NULL;

	if (rank == 0) {
		p = lm_malloc(3 * sizeof(long));
		if (!p)
			die("lm_malloc", -2);
		p[2] = 41;
	}
	check(lm_distribute(&p, sizeof(p)), "lm_distribute");
	{
		unsigned int low = (unsigned int)(uintptr_t)p;
		long *back = (long *)(uintptr_t)low;

		if ((uintptr_t)p > UINT32_MAX || back[2] != 41) {
			fprintf(stderr, "dsmtest: rank %d: shared memory at %p "
				"does not fit in 32 bits\n", rank, (void *)p);
			return 1;
		}
	}
	return 0;
}

/* owners: the value of word i of page p written in era e, round k. */
static uint64_t owners_word(uint64_t seed, long e, long k, long p, size_t i)
{
	uint64_t z = seed ^ ((uint64_t)e << 48) ^ ((uint64_t)k << 40) ^
		     ((uint64_t)p << 20) ^ i;

	return next_rand(&z) | 1; /* never the zero of a page never written */
}

static int run_owners(long eras, long pages, uint64_t seed)
{
	const size_t words = 4096 / sizeof(uint64_t);
	struct shared {
		int lock;
		int turn;
		uint64_t *buf;  /* pages * words */
		uint64_t *token; /* a page of its own */
	} *s = NULL;
	uint64_t *model = calloc((size_t)pages * words, sizeof(uint64_t));
	int *writer = malloc((size_t)pages * sizeof(int));

	if (!model || !writer)
		die("malloc", -2);
	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s || !(s->buf = lm_malloc((size_t)pages * 4096)) ||
		    !(s->token = lm_malloc(4096)))
			die("lm_malloc", -2);
		s->lock = lm_id_alloc(1);
		check(s->lock, "lm_id_alloc");
		s->turn = 0;
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	for (long e = 0; e < eras; e++) {
		uint64_t z = seed ^ ((uint64_t)e << 32);
		long rounds = 3 + (long)(next_rand(&z) % 5);

		for (long p = 0; p < pages; p++) {
			uint64_t w = next_rand(&z) % ((uint64_t)nprocs + 1);

			writer[p] = w == (uint64_t)nprocs ? -1 : (int)w;
		}
		for (long k = 0; k < rounds; k++) {
			for (long p = 0; p < pages; p++) {
				uint64_t *pg = s->buf + (size_t)p * words;

				if (writer[p] < 0)
					continue;
				for (size_t i = 0; i < words; i++) {
					uint64_t v = owners_word(seed, e, k,
								 p, i);

					if (writer[p] == rank)
						pg[i] = v;
					model[(size_t)p * words + i] = v;
				}
			}
			check(lm_barrier(4), "lm_barrier");
			/* a page's own writer reads it; another rank now and
			 * then (taking it back from its owner), every rank at
			 * the era's end */
			for (size_t i = 0; i < (size_t)pages * words; i++) {
				long p = (long)(i / words);
				uint64_t h = owners_word(seed, e, k, p,
							 (size_t)rank);

				if (writer[p] != rank && k + 1 < rounds &&
				    h % 8 != 0) {
					i += words - 1;
					continue;
				}
				if (s->buf[i] != model[i]) {
					fprintf(stderr, "dsmtest: rank %d, era "
						"%ld round %ld: page %zu word "
						"%zu is %" PRIx64 ", expected "
						"%" PRIx64 " (writer %d)\n",
						rank, e, k, i / words,
						i % words, s->buf[i], model[i],
						writer[i / words]);
					return 1;
				}
			}
			check(lm_barrier(5), "lm_barrier");
		}
		/* the token goes round in rank order under the lock: each
		 * holder must see what the one before wrote */
		for (;;) {
			check(lm_lock(s->lock), "lm_lock");
			if (s->turn == rank)
				break;
			check(lm_unlock(s->lock), "lm_unlock");
		}
		if (rank > 0 && (s->token[0] != (uint64_t)(e * nprocs + rank) ||
				 s->token[words - 1] != (uint64_t)e)) {
			fprintf(stderr, "dsmtest: rank %d, era %ld: the token "
				"page holds %" PRIu64 "/%" PRIu64 ", expected "
				"%ld/%ld\n", rank, e, s->token[0],
				s->token[words - 1], e * nprocs + rank, e);
			return 1;
		}
		s->token[0] = (uint64_t)(e * nprocs + rank + 1);
		s->token[words - 1] = (uint64_t)e;
		s->turn = (rank + 1) % nprocs;
		check(lm_unlock(s->lock), "lm_unlock");
		check(lm_barrier(4), "lm_barrier");
	}
	free(model);
	free(writer);
	return 0;
}

/* chaos: a randomized race-free program that every process derives from
 * one seed, checked against a reference model of the shared area.  The
 * area holds records of CH_LOCKS locks packed next to each other (so
 * records of different locks share pages, on every home), with gaps
 * between them that every rank writes with false sharing.  Rounds are
 * lock phases, several in a row between two barriers, or barrier
 * phases; updates commute (sums, a rank's own slot), so the model does
 * not depend on the order in which processes take the locks, and what
 * only that order decides (a log's entries) is checked for what it
 * cannot change.  Under a lock a process checks what it sees against
 * what it saw before (never older) and each record's own consistency;
 * after each barrier every process compares the whole area with the
 * model.  Rank 0 writes the area and ordinary globals before it CREATEs
 * the workers, which check them first.
 * Records:
 *   counter  w0 counts updates (never goes back under its lock), w1 sums
 *            their values, w2.. follow w1 (a torn update shows)
 *   vector   a slot per rank, written only by that rank (it knows its
 *            value exactly); grows
 *   shadow   a slot per rank: the rank's vector slot as it published it
 *            under another lock (chains V -> S1 [-> S2]), so V >= S1 >= S2
 *   log      per lock: a count and a ring of (round, rank, ordinal), one
 *            entry per critical section of the lock */
#define CH_LOCKS 8
#define CH_OPS_MAX 24
#define CH_STEPS (3 * CH_OPS_MAX + 3) /* an op takes up to 3 sections */
#define CH_MAGIC UINT64_C(0x736f616863) /* "chaos" */
#define CH_NOBODY 0xff
#define CH_PAGE 4096

enum { CH_COUNTER, CH_VECTOR, CH_SHADOW, CH_LOG };
static const char *const ch_kind[] = { "counter", "vector", "shadow", "log" };
enum { CH_ADD, CH_VADD, CH_SET, CH_VER };
/* hash tags: each draw of the plan has its own */
enum { T_LAYOUT = 1, T_INIT, T_KIND, T_LOCK, T_CHAIN, T_HOT, T_GAP, T_STEPS,
       T_BW, T_BV, T_VA, T_VP, T_GLOBAL, T_CMUL, T_CCONST, T_EXTRA };

struct ch_rec {
	size_t off, size; /* in the area, 8-aligned */
	int kind;
	int vec;  /* vector, shadow: the chain's vector */
	int next; /* vector, shadow: the chain's next shadow, or -1 */
	int lock; /* log: its lock for good */
};

struct ch_act {
	int what, rec;
	uint64_t v;
};

/* A critical section (lock[1] >= 0: nested) or, lock[0] < 0, a chunk of
 * this rank's gap bytes. */
struct ch_step {
	int lock[2];
	int nact;
	struct ch_act act[3];
	int chunk, chunks;
	int verify; /* a chain check starts here */
	int spin_us;
	int unlock_first;
};

/* What rank 0 sets before CREATE and the workers get with it. */
static struct chaos_globals {
	uint64_t magic, seed;
	long rounds, pages;
	int lock0;
	uint8_t *area;
	uint64_t pattern[256];
} chaos_g;
static uint64_t chaos_word = 1; /* .data, not .bss */

/* A process's own state, made afresh in every process. */
static struct ch {
	long r; /* round; -1 at CREATE, rounds at the end */
	const char *phase;
	int step;
	size_t len;
	uint8_t *area, *model;
	uint64_t *seen;  /* per word: the newest value seen under its lock */
	uint8_t *gapw;   /* per word: 1 between records */
	struct ch_rec *rec;
	int nrec, ncounters, nchain, *counters, *chains;
	int log[CH_LOCKS];
	size_t cap;      /* entries of a log's ring */
	int loggroup;    /* logs side by side */
	uint64_t *own;   /* per record: this rank's slot (vector, shadow) */
	uint64_t *logcopy; /* [lock][cap]: the ring as this rank last saw it */
	uint64_t logn[CH_LOCKS];
	uint64_t *ord, *ord0; /* [lock][rank]: sections so far, at the barrier */
	uint64_t myord[CH_LOCKS];
	uint64_t *need;  /* [rank]: a chain check's slots at the later link */
	/* this segment (rounds seg0..seg1 since the last barrier) and round */
	long seg0, seg1;
	int lockphase;
	int *lockof, *bylock[CH_LOCKS], nbylock[CH_LOCKS];
	int *cbylock[CH_LOCKS], ncbylock[CH_LOCKS], *hot, nhot;
	unsigned focus; /* the locks this round's sections take */
	int *pool, npool, *fchains, nfchain, maxops;
	int uneven;     /* 0 to maxops operations a rank, not maxops / 2 up */
	uint8_t *gowner, *gvalue;
	struct ch_step steps[CH_STEPS];
	int nsteps;
	long sections, lockrounds, barriers;
} ch;

static uint64_t ch_mix(uint64_t x)
{
	return next_rand(&x);
}

static uint64_t ch_h(int tag, uint64_t a, uint64_t b)
{
	return ch_mix(ch_mix(ch_mix(chaos_g.seed ^ (uint64_t)tag << 56) ^ a) ^
		      b);
}

static void ch_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
							 noreturn));
static void ch_fail(const char *fmt, ...)
{
	char msg[1024], nth[48] = "", step[24] = "";
	long k = ch.r - ch.seg0 + 1;
	size_t n;
	va_list ap;

	if (k > 1)
		snprintf(nth, sizeof(nth), ", the %ld%s since the barrier", k,
			 k == 2 ? "nd" : k == 3 ? "rd" : "th");
	if (ch.step >= 0)
		snprintf(step, sizeof(step), ", step %d", ch.step);
	n = (size_t)snprintf(msg, sizeof(msg), "dsmtest chaos: seed %" PRIu64
			     ": rank %d, ", chaos_g.seed, lm_rank());
	if (ch.r < 0)
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "at CREATE: ");
	else if (ch.r >= chaos_g.rounds)
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "at the end: ");
	else
		n += (size_t)snprintf(msg + n, sizeof(msg) - n,
				      "round %ld (%s%s%s): ", ch.r, ch.phase,
				      nth, step);
	va_start(ap, fmt);
	if (n < sizeof(msg))
		vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
	va_end(ap);
	/* one write, so that ranks failing at once do not mix their lines */
	fprintf(stderr, "%s\ndsmtest chaos: replay with: dsmtest chaos %ld %"
		PRIu64 " %ld\n", msg, chaos_g.rounds, chaos_g.seed,
		chaos_g.pages);
	exit(1);
}

static uint64_t *ch_word(uint8_t *mem, int rec, size_t i)
{
	return (uint64_t *)(mem + ch.rec[rec].off) + i;
}

/* "record 12 (counter, 48 bytes at area offset 4072, pages 0-1 of the
 * area, 0x..., lock 3)" */
static const char *ch_where(int rec)
{
	static char buf[2][192];
	static int which;
	const struct ch_rec *rc = &ch.rec[rec];
	char *b = buf[which ^= 1], pages[48], lock[24] = "";
	size_t p0 = rc->off / CH_PAGE, p1 = (rc->off + rc->size - 1) / CH_PAGE;

	if (p0 == p1)
		snprintf(pages, sizeof(pages), "page %zu", p0);
	else
		snprintf(pages, sizeof(pages), "pages %zu-%zu", p0, p1);
	if (rc->kind == CH_LOG || ch.r >= 0)
		snprintf(lock, sizeof(lock), ", lock %d",
			 rc->kind == CH_LOG ? rc->lock : ch.lockof[rec]);
	snprintf(b, sizeof(buf[0]), "record %d (%s, %zu bytes at area offset "
		 "%zu, %s of the area, %p%s)", rec, ch_kind[rc->kind],
		 rc->size, rc->off, pages, (void *)(ch.area + rc->off), lock);
	return b;
}

static uint64_t ch_cmul(int rec, size_t i)
{
	return ch_h(T_CMUL, (uint64_t)rec, i) | 1;
}

static uint64_t ch_cconst(int rec, size_t i)
{
	return ch_h(T_CCONST, (uint64_t)rec, i);
}

/* counter update: the same arithmetic on the area and on the model */
static void ch_counter_add(uint8_t *mem, int rec, uint64_t v)
{
	uint64_t *w = ch_word(mem, rec, 0);
	size_t n = ch.rec[rec].size / 8;

	w[0]++;
	if (n < 2)
		return;
	w[1] += v;
	for (size_t i = 2; i < n; i++)
		w[i] = ch_cconst(rec, i) + ch_cmul(rec, i) * w[1];
}

static int ch_add_record(size_t off, size_t size, int kind)
{
	struct ch_rec *rc = &ch.rec[ch.nrec];

	rc->off = off;
	rc->size = size;
	rc->kind = kind;
	rc->vec = rc->next = rc->lock = -1;
	for (size_t w = off / 8; w < (off + size) / 8; w++)
		ch.gapw[w] = 0;
	if (kind == CH_COUNTER)
		ch.counters[ch.ncounters++] = ch.nrec;
	return ch.nrec++;
}

static size_t ch_gap(uint64_t *s)
{
	unsigned k = (unsigned)(next_rand(s) % 32);

	if (k < 14)
		return 0;
	if (k < 22)
		return 8;
	if (k < 27)
		return 16;
	if (k < 30)
		return 8 * (3 + next_rand(s) % 6);
	if (k < 31)
		return 8 * (16 + next_rand(s) % 112);
	return 8 * (128 + next_rand(s) % 640); /* pages that only barriers write */
}

static size_t ch_counter_size(uint64_t *s)
{
	switch (next_rand(s) % 3) {
	case 0:
		return 8;
	case 1:
		return 8 * (2 + next_rand(s) % 7);
	default:
		return 8 * (9 + next_rand(s) % 40);
	}
}

/* Places the logs, the chains and the counters over the area, the
 * special records at random among the counters. */
static void ch_layout(void)
{
	struct spec {
		int kind, lock, chain, link, logs;
		size_t size;
	} *sp;
	uint64_t s = ch_h(T_LAYOUT, 0, 0);
	size_t vsize = 8 * (size_t)nprocs, lsize = 8 + 8 * ch.cap;
	size_t need = 0, off = 0;
	int nsp = 0, *order, *recof, *placed, si = 0;
	long guard = 0;

	ch.nchain = CH_LOCKS + (int)(next_rand(&s) % CH_LOCKS);
	sp = calloc((size_t)(CH_LOCKS + 3 * ch.nchain), sizeof(*sp));
	order = calloc((size_t)(CH_LOCKS + 3 * ch.nchain), sizeof(int));
	recof = calloc((size_t)(CH_LOCKS + 3 * ch.nchain), sizeof(int));
	ch.chains = calloc((size_t)ch.nchain, sizeof(int));
	placed = calloc((size_t)ch.nchain * 3, sizeof(int));
	if (!sp || !order || !recof || !ch.chains || !placed)
		die("malloc", -2);
	/* the logs of 1, 2, 4 or 8 locks side by side (a lock table):
	 * every section then writes a page other locks' sections write */
	ch.loggroup = 1 << (next_rand(&s) % 4);
	for (int l = 0; l < CH_LOCKS; l += ch.loggroup)
		sp[nsp++] = (struct spec){ CH_LOG, l, -1, 0, ch.loggroup,
					   (size_t)ch.loggroup * lsize };
	for (int c = 0; c < ch.nchain; c++) {
		int links = 2 + (int)(next_rand(&s) % 2);

		for (int k = 0; k < links; k++)
			sp[nsp++] = (struct spec){ k ? CH_SHADOW : CH_VECTOR, -1,
						   c, k, 0, vsize };
	}
	for (int i = 0; i < nsp; i++) {
		int j = (int)(next_rand(&s) % (uint64_t)(i + 1));

		order[i] = order[j];
		order[j] = i;
		need += sp[i].size;
	}
	if (need > ch.len / 2) {
		fprintf(stderr, "dsmtest chaos: %zu bytes of logs and chains "
			"do not fit in half of %ld pages\n", need,
			chaos_g.pages);
		exit(2);
	}
	while (off < ch.len) {
		size_t g = ch_gap(&s), left = ch.len - off;
		int left_sp = nsp - si;

		if (++guard > 10000000)
			die("chaos layout", -5);
		if (left_sp &&
		    (left <= need + g + 400 ||
		     next_rand(&s) % (left / 150 + 1) < (uint64_t)left_sp)) {
			struct spec *p = &sp[order[si]];

			if (off + g + need > ch.len)
				g = 0; /* the others must still fit */
			for (int q = 0; q < p->logs; q++) {
				int rl = ch_add_record(off + g + (size_t)q * lsize,
						       lsize, CH_LOG);

				ch.rec[rl].lock = p->lock + q;
				ch.log[p->lock + q] = rl;
			}
			if (p->kind != CH_LOG)
				recof[order[si]] = ch_add_record(off + g,
								 p->size,
								 p->kind);
			si++;
			need -= p->size;
			off += g + p->size;
		} else {
			size_t size = ch_counter_size(&s);

			if (off + g + size + need > ch.len) {
				if (!left_sp)
					break;
				continue;
			}
			ch_add_record(off + g, size, CH_COUNTER);
			off += g + size;
		}
	}
	if (si < nsp)
		die("chaos layout", -5);
	/* link the chains */
	for (int i = 0; i < nsp; i++)
		if (sp[i].kind != CH_LOG)
			placed[sp[i].chain * 3 + sp[i].link] = recof[i] + 1;
	for (int c = 0; c < ch.nchain; c++) {
		int v = placed[c * 3] - 1;

		ch.chains[c] = v;
		for (int k = 0; k < 3 && placed[c * 3 + k]; k++) {
			int me = placed[c * 3 + k] - 1;

			ch.rec[me].vec = v;
			ch.rec[me].next = k < 2 && placed[c * 3 + k + 1] ?
						  placed[c * 3 + k + 1] - 1 : -1;
		}
	}
	free(sp);
	free(order);
	free(recof);
	free(placed);
}

/* The area as rank 0 writes it before CREATE. */
static void ch_initial(void)
{
	uint64_t s = ch_h(T_INIT, 0, 0);

	for (size_t i = 0; i < ch.len; i++)
		ch.model[i] = (uint8_t)next_rand(&s);
	for (int i = 0; i < ch.nrec; i++) {
		const struct ch_rec *rc = &ch.rec[i];
		uint64_t *w = ch_word(ch.model, i, 0);
		size_t n = rc->size / 8;

		switch (rc->kind) {
		case CH_COUNTER:
			w[0] = next_rand(&s) >> 24;
			if (n > 1)
				w[1] = next_rand(&s);
			for (size_t k = 2; k < n; k++)
				w[k] = ch_cconst(i, k) + ch_cmul(i, k) * w[1];
			break;
		case CH_VECTOR:
			for (size_t k = 0; k < n; k++)
				w[k] = 2000 + (next_rand(&s) >> 24);
			break;
		case CH_LOG:
			w[0] = next_rand(&s) % 100000;
			break;
		}
	}
	/* shadows below their vector, link after link */
	for (int c = 0; c < ch.nchain; c++) {
		int prev = ch.chains[c];

		for (int sh = ch.rec[prev].next; sh >= 0;
		     prev = sh, sh = ch.rec[sh].next)
			for (int x = 0; x < nprocs; x++)
				*ch_word(ch.model, sh, (size_t)x) =
					*ch_word(ch.model, prev, (size_t)x) -
					next_rand(&s) % 1000;
	}
}

static void ch_setup(void)
{
	memset(&ch, 0, sizeof(ch));
	ch.r = -1;
	ch.step = -1;
	ch.phase = "CREATE";
	ch.area = chaos_g.area;
	ch.len = (size_t)chaos_g.pages * CH_PAGE;
	ch.cap = 4 * (size_t)nprocs < 16 ? 16 : 4 * (size_t)nprocs;
	ch.model = malloc(ch.len);
	ch.seen = malloc(ch.len);
	ch.gapw = malloc(ch.len / 8);
	ch.rec = calloc(ch.len / 8 + 4 * CH_LOCKS, sizeof(*ch.rec));
	ch.counters = calloc(ch.len / 8, sizeof(int));
	ch.own = calloc(ch.len / 8 + 4 * CH_LOCKS, sizeof(uint64_t));
	ch.logcopy = calloc(CH_LOCKS * ch.cap, sizeof(uint64_t));
	ch.ord = calloc(CH_LOCKS * (size_t)nprocs, sizeof(uint64_t));
	ch.ord0 = calloc(CH_LOCKS * (size_t)nprocs, sizeof(uint64_t));
	ch.need = calloc((size_t)nprocs, sizeof(uint64_t));
	ch.lockof = calloc(ch.len / 8 + 4 * CH_LOCKS, sizeof(int));
	ch.hot = calloc(ch.len / 8, sizeof(int));
	ch.pool = calloc(ch.len / 8, sizeof(int));
	ch.fchains = calloc(ch.len / 8, sizeof(int));
	ch.gowner = malloc(ch.len);
	ch.gvalue = malloc(ch.len);
	if (!ch.model || !ch.seen || !ch.gapw || !ch.rec || !ch.counters ||
	    !ch.own || !ch.logcopy || !ch.ord || !ch.ord0 || !ch.need ||
	    !ch.lockof || !ch.hot || !ch.pool || !ch.fchains || !ch.gowner ||
	    !ch.gvalue)
		die("malloc", -2);
	for (int l = 0; l < CH_LOCKS; l++) {
		ch.bylock[l] = calloc(ch.len / 8 + 4 * CH_LOCKS, sizeof(int));
		ch.cbylock[l] = calloc(ch.len / 8, sizeof(int));
		if (!ch.bylock[l] || !ch.cbylock[l])
			die("malloc", -2);
	}
	memset(ch.gapw, 1, ch.len / 8);
	memset(ch.gowner, CH_NOBODY, ch.len);
	ch_layout();
	ch_initial();
}

/* After a check passed: what this rank has seen is the model. */
static void ch_sync_from_model(void)
{
	memcpy(ch.seen, ch.model, ch.len);
	for (int i = 0; i < ch.nrec; i++)
		if (ch.rec[i].kind == CH_VECTOR || ch.rec[i].kind == CH_SHADOW)
			ch.own[i] = *ch_word(ch.model, i, (size_t)rank);
	for (int l = 0; l < CH_LOCKS; l++) {
		ch.logn[l] = *ch_word(ch.model, ch.log[l], 0);
		memcpy(&ch.logcopy[l * ch.cap], ch_word(ch.model, ch.log[l], 1),
		       ch.cap * 8);
		ch.myord[l] = ch.ord[l * nprocs + rank];
	}
}

/* Every difference between the area and the model; fails on the first,
 * naming what the byte belongs to and the pages that differ (a page
 * stale whole, or a few records on it). */
static void ch_compare(const char *when)
{
	size_t first = ch.len, count = 0, n = 0, run = 0, npages = 0;
	char pages[160] = "", diff[224];

	for (size_t pg = 0; pg <= ch.len / CH_PAGE; pg++) {
		size_t d = 0;

		for (size_t i = pg * CH_PAGE; i < (pg + 1) * CH_PAGE &&
					      i < ch.len; i++)
			if (ch.area[i] != ch.model[i] && d++ == 0 && !count)
				first = i;
		count += d;
		npages += d > 0;
		if (d && run++ == 0 && n < sizeof(pages) - 32)
			n += (size_t)snprintf(pages + n, sizeof(pages) - n,
					      "%s%zu", n ? ", " : "", pg);
		if (!d && run > 1 && n < sizeof(pages) - 32)
			n += (size_t)snprintf(pages + n, sizeof(pages) - n,
					      "-%zu", pg - 1);
		if (!d)
			run = 0;
	}
	if (!count)
		return;
	snprintf(diff, sizeof(diff), "%zu byte%s of the area differ%s, on "
		 "page%s %s", count, count == 1 ? "" : "s",
		 count == 1 ? "s" : "", npages == 1 ? "" : "s", pages);
	if (!ch.gapw[first / 8]) {
		int lo = 0, hi = ch.nrec - 1;
		size_t k;
		const char *role;

		while (lo < hi) { /* the last record at or before first */
			int mid = (lo + hi + 1) / 2;

			if (ch.rec[mid].off <= first)
				lo = mid;
			else
				hi = mid - 1;
		}
		k = (first - ch.rec[lo].off) / 8;
		switch (ch.rec[lo].kind) {
		case CH_COUNTER:
			role = k == 0 ? "updates" : k == 1 ? "sum" :
							     "follows the sum";
			break;
		case CH_LOG:
			role = k == 0 ? "count" : "ring entry";
			break;
		default:
			role = "a rank's slot";
		}
		ch_fail("%s: %s word %zu (%s) is %#" PRIx64 ", expected %#"
			PRIx64 " (%s)", when, ch_where(lo), k, role,
			*ch_word(ch.area, lo, k), *ch_word(ch.model, lo, k),
			diff);
	}
	ch_fail("%s: gap byte at area offset %zu (page %zu of the area, %p) "
		"is %u, expected %u, %s (%s)", when, first, first / CH_PAGE,
		(void *)(ch.area + first), ch.area[first], ch.model[first],
		ch.r < 0 ? "written before CREATE" :
		ch.gowner[first] == CH_NOBODY ? "not written since the barrier"
					       : "written since the barrier",
		diff);
}

/* A segment: the rounds between two barriers, either one barrier phase
 * or 1 to 8 lock phases in a row (lost lock releases grew with the
 * length of the epoch: dsmtest counters 60 8 on 3-reflectors, eager,
 * lost updates in 7 runs of 8, and in none of 8 with a barrier every
 * 10 sections).  Records take their locks for a segment (they change
 * locks only across a barrier), and the gap bytes their writers. */
static void ch_plan_segment(long r)
{
	uint64_t s = ch_h(T_KIND, (uint64_t)r, 0);
	size_t i = 0;
	int k;

	ch.seg0 = r;
	ch.lockphase = next_rand(&s) % 3 != 0;
	ch.seg1 = r + (ch.lockphase ? (long)(next_rand(&s) % 8) : 0);
	if (ch.seg1 >= chaos_g.rounds)
		ch.seg1 = chaos_g.rounds - 1;
	ch.phase = ch.lockphase ? "lock phase" : "barrier phase";
	memset(ch.nbylock, 0, sizeof(ch.nbylock));
	memset(ch.ncbylock, 0, sizeof(ch.ncbylock));
	for (k = 0; k < ch.nrec; k++)
		if (ch.rec[k].kind == CH_COUNTER)
			ch.lockof[k] = (int)(ch_h(T_LOCK, (uint64_t)k,
						  (uint64_t)r) % CH_LOCKS);
		else if (ch.rec[k].kind == CH_LOG)
			ch.lockof[k] = ch.rec[k].lock;
	/* a chain's links under distinct locks */
	for (int c = 0; c < ch.nchain; c++) {
		int v = ch.chains[c], prev = -1, prev2 = -1;

		for (k = v; k >= 0; k = ch.rec[k].next) {
			int l = (int)(ch_h(T_CHAIN, (uint64_t)k, (uint64_t)r) %
				      CH_LOCKS);

			while (l == prev || l == prev2)
				l = (l + 1) % CH_LOCKS;
			ch.lockof[k] = l;
			prev2 = prev;
			prev = l;
		}
	}
	for (k = 0; k < ch.nrec; k++) {
		int l = ch.lockof[k];

		if (ch.rec[k].kind == CH_LOG)
			continue;
		ch.bylock[l][ch.nbylock[l]++] = k;
		if (ch.rec[k].kind == CH_COUNTER)
			ch.cbylock[l][ch.ncbylock[l]++] = k;
	}
	/* gap bytes: runs of one writer each (or none), as in stress */
	s = ch_h(T_GAP, (uint64_t)r, 0);
	while (i < ch.len) {
		size_t run = 1 + next_rand(&s) % 1024;
		int who = (int)(next_rand(&s) % (uint64_t)(nprocs + 1)) - 1;

		for (size_t j = i; j < ch.len && j < i + run; j++) {
			ch.gowner[j] = who < 0 || !ch.gapw[j / 8] ?
					       CH_NOBODY : (uint8_t)who;
			ch.gvalue[j] = (uint8_t)next_rand(&s);
		}
		i += run;
	}
	memcpy(ch.ord0, ch.ord, CH_LOCKS * (size_t)nprocs * sizeof(uint64_t));
}

/* A lock phase's contention varies: its sections take 1 to 8 of the
 * locks (two, like dsmtest counters, one time in three); each rank
 * runs from half the phase's most (4 to CH_OPS_MAX) up to it, or from
 * none one phase in four (on 3-reflectors, eager, 12 seeds: updates
 * lost in 6 runs with 0 to the most always, in 10 with half up); they
 * go mostly to 2 to 16 records of one to three pages, records of
 * different locks on one page, now and then across a home's boundary.
 * The locks and those records stay for the segment, or three phases in
 * four, so that a page's writes pile up in one epoch (two 8-byte
 * records of two locks on one page, 20 phases without a barrier, on
 * 3-reflectors, eager: 2 runs of 8 lost updates when each phase took
 * another page, 5 of 8 when the page stayed). */
static void ch_plan_phase(long r)
{
	uint64_t s = ch_h(T_HOT, (uint64_t)r, 0);
	size_t hot0, hot1;
	int k;

	ch.r = r;
	ch.maxops = 4 + (int)(next_rand(&s) % (CH_OPS_MAX - 3));
	ch.uneven = next_rand(&s) % 4 == 0;
	if (r != ch.seg0 && next_rand(&s) % 4)
		return;
	k = next_rand(&s) % 3 ? 1 + (int)(next_rand(&s) % CH_LOCKS) : 2;
	for (ch.focus = 0; k > 0; k--) {
		int l = (int)(next_rand(&s) % CH_LOCKS);

		while (ch.focus & 1u << l)
			l = (l + 1) % CH_LOCKS;
		ch.focus |= 1u << l;
	}
	hot0 = (size_t)(next_rand(&s) % (uint64_t)chaos_g.pages) * CH_PAGE;
	hot1 = hot0 + (1 + next_rand(&s) % 3) * CH_PAGE;
	ch.nhot = ch.npool = ch.nfchain = 0;
	for (k = 0; k < ch.ncounters; k++) {
		const struct ch_rec *rc = &ch.rec[ch.counters[k]];

		if (!(ch.focus & 1u << ch.lockof[ch.counters[k]]))
			continue;
		ch.pool[ch.npool++] = ch.counters[k];
		if (rc->off < hot1 && rc->off + rc->size > hot0)
			ch.hot[ch.nhot++] = ch.counters[k];
	}
	for (int n = 2 + (int)(next_rand(&s) % 15); ch.nhot > n; ch.nhot--)
		ch.hot[next_rand(&s) % (uint64_t)ch.nhot] = ch.hot[ch.nhot - 1];
	for (int c = 0; c < ch.nchain; c++) {
		int in = 1;

		for (k = ch.chains[c]; k >= 0; k = ch.rec[k].next)
			in &= !!(ch.focus & 1u << ch.lockof[k]);
		if (in)
			ch.fchains[ch.nfchain++] = ch.chains[c];
	}
}

/* A counter, most often one of the hot ones, of lock `lock` (-1: any
 * of the round's). */
static int ch_pick(uint64_t *s, int lock)
{
	if (lock < 0) {
		if (ch.nhot && next_rand(s) % 8)
			return ch.hot[next_rand(s) % (uint64_t)ch.nhot];
		return ch.pool[next_rand(s) % (uint64_t)ch.npool];
	}
	if (!ch.ncbylock[lock])
		return -1;
	for (int t = 0; t < 8 && ch.nhot; t++) {
		int c = ch.hot[next_rand(s) % (uint64_t)ch.nhot];

		if (ch.lockof[c] == lock)
			return c;
	}
	return ch.cbylock[lock][next_rand(s) % (uint64_t)ch.ncbylock[lock]];
}

static struct ch_step *ch_new_step(int l0, int l1)
{
	struct ch_step *st = &ch.steps[ch.nsteps++];

	memset(st, 0, sizeof(*st));
	st->lock[0] = l0;
	st->lock[1] = l1;
	return st;
}

static void ch_act(struct ch_step *st, int what, int rec, uint64_t v)
{
	st->act[st->nact++] = (struct ch_act){ what, rec, v };
}

/* Rank p's lock phase of this round, into ch.steps. */
static void ch_plan_steps(int p)
{
	uint64_t s = ch_h(T_STEPS, (uint64_t)ch.r, (uint64_t)p);
	int ops = ch.npool ? (int)(next_rand(&s) % (uint64_t)(ch.maxops + 1)) : 0;
	int chunks = 1 + (int)(next_rand(&s) % 3), chunk = 0;

	if (!ch.uneven) /* every rank busy: more hand-offs between clusters */
		ops = ch.maxops / 2 + ops / 2;
	ch.nsteps = 0;
	for (int o = 0; o <= ops; o++) {
		unsigned t = (unsigned)(next_rand(&s) % 100);
		int spin = next_rand(&s) % 8 ? 0 : 1 + (int)(next_rand(&s) % 100);
		int first, a, b = -1, c;
		uint64_t d = next_rand(&s);
		struct ch_step *st;

		while (chunk < chunks &&
		       (o == ops || next_rand(&s) % (uint64_t)(ops - o + 1) <
					    (uint64_t)(chunks - chunk))) {
			st = ch_new_step(-1, -1);
			st->chunk = chunk++;
			st->chunks = chunks;
		}
		if (o == ops)
			break;
		first = ch.nsteps;
		a = ch_pick(&s, -1);
		if (t >= 40 && t < 66) /* another lock's counter */
			for (int k = 0; k < 16 && b < 0; k++) {
				b = ch_pick(&s, -1);
				if (ch.lockof[b] == ch.lockof[a])
					b = -1;
			}
		if (t < 40 || (t < 66 && b < 0) || (t >= 66 && !ch.nfchain)) {
			/* one to three counters of one lock */
			st = ch_new_step(ch.lockof[a], -1);
			ch_act(st, CH_ADD, a, d);
			for (int k = (int)(next_rand(&s) % 3); k > 0; k--) {
				b = ch_pick(&s, ch.lockof[a]);
				if (b != a && b != st->act[st->nact - 1].rec)
					ch_act(st, CH_ADD, b, next_rand(&s));
			}
		} else if (t < 52) {
			/* move a value: under a's lock, then under b's */
			ch_act(ch_new_step(ch.lockof[a], -1), CH_ADD, a, -d);
			ch_act(ch_new_step(ch.lockof[b], -1), CH_ADD, b, d);
		} else if (t < 66) {
			/* the same, both locks held (taken in id order) */
			int lo = ch.lockof[a] < ch.lockof[b];

			st = ch_new_step(lo ? ch.lockof[a] : ch.lockof[b],
					 lo ? ch.lockof[b] : ch.lockof[a]);
			st->unlock_first = (int)(next_rand(&s) % 2);
			ch_act(st, CH_ADD, a, -d);
			ch_act(st, CH_ADD, b, d);
		} else if (t < 83 && ch.nfchain) {
			/* publish: grow my slot of a vector, then copy it
			 * into its shadows, each under its own lock */
			c = ch.fchains[next_rand(&s) % (uint64_t)ch.nfchain];
			ch_act(ch_new_step(ch.lockof[c], -1), CH_VADD, c,
			       1 + d % 1000);
			for (int k = ch.rec[c].next; k >= 0; k = ch.rec[k].next)
				ch_act(ch_new_step(ch.lockof[k], -1), CH_SET, k,
				       0);
		} else if (ch.nfchain) {
			/* check a chain from its last shadow back to the
			 * vector: each link at least what the later one
			 * showed (transitive visibility through locks) */
			int link[3], n = 0;

			c = ch.fchains[next_rand(&s) % (uint64_t)ch.nfchain];
			for (int k = c; k >= 0 && n < 3; k = ch.rec[k].next)
				link[n++] = k;
			while (n-- > 0)
				ch_act(ch_new_step(ch.lockof[link[n]], -1),
				       CH_VER, link[n], 0);
			ch.steps[first].verify = 1;
		}
		ch.steps[first].spin_us = spin;
	}
}

/* Rank p's effect on the model of a step (the same arithmetic). */
static void ch_model_step(const struct ch_step *st, int p)
{
	for (int i = 0; i < st->nact; i++) {
		const struct ch_act *a = &st->act[i];

		switch (a->what) {
		case CH_ADD:
			ch_counter_add(ch.model, a->rec, a->v);
			break;
		case CH_VADD:
			*ch_word(ch.model, a->rec, (size_t)p) += a->v;
			break;
		case CH_SET:
			*ch_word(ch.model, a->rec, (size_t)p) =
				*ch_word(ch.model, ch.rec[a->rec].vec,
					 (size_t)p);
			break;
		}
	}
	for (int k = 0; k < 2; k++)
		if (st->lock[k] >= 0) {
			++*ch_word(ch.model, ch.log[st->lock[k]], 0);
			ch.ord[st->lock[k] * nprocs + p]++;
		}
}

static void ch_check_rec(int rec, const char *what)
{
	const struct ch_rec *rc = &ch.rec[rec];
	uint64_t *w = ch_word(ch.area, rec, 0);
	uint64_t *seen = (uint64_t *)ch.seen + rc->off / 8;
	size_t n = rc->size / 8;

	switch (rc->kind) {
	case CH_COUNTER:
		if (w[0] < seen[0])
			ch_fail("%s: %s has %" PRIu64 " updates, fewer than "
				"the %" PRIu64 " this rank saw before", what,
				ch_where(rec), w[0], seen[0]);
		seen[0] = w[0];
		for (size_t k = 2; k < n; k++)
			if (w[k] != ch_cconst(rec, k) + ch_cmul(rec, k) * w[1])
				ch_fail("%s: %s word %zu is %#" PRIx64 ", not "
					"what its sum %#" PRIx64 " makes it "
					"(%#" PRIx64 "): a torn update", what,
					ch_where(rec), k, w[k], w[1],
					ch_cconst(rec, k) +
						ch_cmul(rec, k) * w[1]);
		break;
	case CH_VECTOR:
	case CH_SHADOW:
		if (w[rank] != ch.own[rec])
			ch_fail("%s: %s holds %" PRIu64 " in this rank's own "
				"slot, which it last set to %" PRIu64, what,
				ch_where(rec), w[rank], ch.own[rec]);
		for (int x = 0; x < nprocs; x++) {
			if (w[x] < seen[x])
				ch_fail("%s: %s slot of rank %d went back: "
					"%" PRIu64 " after %" PRIu64, what,
					ch_where(rec), x, w[x], seen[x]);
			seen[x] = w[x];
		}
		break;
	}
}

static uint64_t ch_entry(long r, int p, uint64_t ord)
{
	return ((uint64_t)r & 0xfffff) << 44 | (uint64_t)(p & 0xfff) << 32 |
	       (ord & 0xffffffff);
}

/* Under lock l: its log has not lost what this rank saw of it. */
static void ch_check_log(int l)
{
	uint64_t *w = ch_word(ch.area, ch.log[l], 0), n = w[0];
	uint64_t lo = n >= ch.cap ? n - ch.cap : 0;

	if (n < ch.logn[l])
		ch_fail("under lock %d: its log's count went back: %" PRIu64
			" after %" PRIu64 " (%s)", l, n, ch.logn[l],
			ch_where(ch.log[l]));
	if (ch.logn[l] >= ch.cap && ch.logn[l] - ch.cap > lo)
		lo = ch.logn[l] - ch.cap;
	for (uint64_t i = lo; i < ch.logn[l]; i++) {
		uint64_t e = w[1 + i % ch.cap],
			 was = ch.logcopy[l * ch.cap + i % ch.cap];

		if (e != was)
			ch_fail("under lock %d: entry %" PRIu64 " of its log "
				"changed from round %" PRIu64 " rank %" PRIu64
				" section %" PRIu64 " to round %" PRIu64 " rank "
				"%" PRIu64 " section %" PRIu64 " (%s)", l, i,
				was >> 44, was >> 32 & 0xfff, was & 0xffffffff,
				e >> 44, e >> 32 & 0xfff, e & 0xffffffff,
				ch_where(ch.log[l]));
	}
}

static void ch_append_log(int l)
{
	uint64_t *w = ch_word(ch.area, ch.log[l], 0), n = w[0];

	w[1 + n % ch.cap] = ch_entry(ch.r, rank, ch.myord[l]++);
	w[0] = n + 1;
	ch.logn[l] = n + 1;
	memcpy(&ch.logcopy[l * ch.cap], w + 1, ch.cap * 8);
}

static void ch_gap_write(size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (ch.gowner[i] == rank)
			ch.area[i] = ch.gvalue[i];
}

static void ch_run_step(const struct ch_step *st)
{
	uint64_t s = ch_h(T_EXTRA, (uint64_t)ch.r,
			  (uint64_t)(rank * CH_STEPS + ch.step));
	int held = st->lock[1] >= 0 ? 2 : 1;

	if (st->lock[0] < 0) {
		ch_gap_write(ch.len * (size_t)st->chunk / (size_t)st->chunks,
			     ch.len * (size_t)(st->chunk + 1) /
				     (size_t)st->chunks);
		return;
	}
	for (int k = 0; k < held; k++)
		check(lm_lock(chaos_g.lock0 + st->lock[k]), "lm_lock");
	ch.sections++;
	for (int k = 0; k < held; k++) {
		int l = st->lock[k];

		ch_check_log(l);
		/* two more records of the lock, at random */
		for (int e = 0; e < 2 && ch.nbylock[l]; e++)
			ch_check_rec(ch.bylock[l][next_rand(&s) %
						  (uint64_t)ch.nbylock[l]],
				     "under its lock");
	}
	if (st->verify)
		memset(ch.need, 0, (size_t)nprocs * sizeof(uint64_t));
	for (int i = 0; i < st->nact; i++) {
		const struct ch_act *a = &st->act[i];
		uint64_t *w = ch_word(ch.area, a->rec, 0);

		ch_check_rec(a->rec, "under its lock");
		switch (a->what) {
		case CH_ADD:
			ch_counter_add(ch.area, a->rec, a->v);
			break;
		case CH_VADD:
			w[rank] = ch.own[a->rec] += a->v;
			break;
		case CH_SET:
			w[rank] = ch.own[a->rec] = ch.own[ch.rec[a->rec].vec];
			break;
		case CH_VER:
			for (int x = 0; x < nprocs; x++) {
				if (w[x] < ch.need[x])
					ch_fail("chain check: %s holds %" PRIu64
						" for rank %d, but a later link "
						"of its chain, taken before "
						"under another lock, showed %"
						PRIu64, ch_where(a->rec), w[x],
						x, ch.need[x]);
				ch.need[x] = w[x];
			}
			break;
		}
	}
	for (int k = 0; k < held; k++)
		ch_append_log(st->lock[k]);
	if (st->spin_us) {
		uint64_t end = lm_clock_us() + (uint64_t)st->spin_us;

		while (lm_clock_us() < end)
			;
	}
	if (held == 2 && !st->unlock_first)
		check(lm_unlock(chaos_g.lock0 + st->lock[1]), "lm_unlock");
	check(lm_unlock(chaos_g.lock0 + st->lock[0]), "lm_unlock");
	if (held == 2 && st->unlock_first)
		check(lm_unlock(chaos_g.lock0 + st->lock[1]), "lm_unlock");
}

/* Rank p's record writes of a barrier phase, without locks (one rank
 * per counter, every rank its own slots), on the model or, real, on the
 * area (p is this rank). */
static void ch_unlocked(int p, int real)
{
	uint8_t *mem = real ? ch.area : ch.model;

	for (int k = 0; k < ch.ncounters; k++) {
		int c = ch.counters[k];

		if (ch_h(T_BW, (uint64_t)ch.r, (uint64_t)c) %
			    (uint64_t)(4 * nprocs) != (uint64_t)p)
			continue;
		if (real)
			ch_check_rec(c, "before its barrier-phase update");
		ch_counter_add(mem, c, ch_h(T_BV, (uint64_t)ch.r, (uint64_t)c));
	}
	for (int c = 0; c < ch.nchain; c++) {
		int v = ch.chains[c];
		uint64_t key = (uint64_t)c << 16 | (uint64_t)p;
		uint64_t grow = ch_h(T_VA, (uint64_t)ch.r, key);

		if (real && ch_word(ch.area, v, 0)[rank] != ch.own[v])
			ch_fail("%s holds %" PRIu64 " in this rank's own slot, "
				"which it last set to %" PRIu64, ch_where(v),
				ch_word(ch.area, v, 0)[rank], ch.own[v]);
		if (grow % 2) {
			if (real)
				ch.own[v] += 1 + grow / 2 % 1000;
			*ch_word(mem, v, (size_t)p) =
				real ? ch.own[v] :
				       *ch_word(mem, v, (size_t)p) + 1 +
					       grow / 2 % 1000;
		}
		if (ch_h(T_VP, (uint64_t)ch.r, key) % 3)
			continue;
		for (int k = ch.rec[v].next; k >= 0; k = ch.rec[k].next) {
			if (real)
				ch.own[k] = ch.own[v];
			*ch_word(mem, k, (size_t)p) = *ch_word(mem, v, (size_t)p);
		}
	}
}

/* Semantic check of lock l's log after the round, then the model takes
 * its entries (their order is the run's). */
static void ch_check_log_round(int l)
{
	uint64_t *w = ch_word(ch.area, ch.log[l], 0),
		 *m = ch_word(ch.model, ch.log[l], 0);
	uint64_t n = w[0], all = 0, window;
	uint64_t *last = ch.need; /* scratch: a rank's last ordinal + 1 */

	if (n != m[0])
		ch_fail("after the barrier: the log of lock %d counts %" PRIu64
			" sections, expected %" PRIu64 " (%s)", l, n, m[0],
			ch_where(ch.log[l]));
	for (int p = 0; p < nprocs; p++) {
		all += ch.ord[l * nprocs + p] - ch.ord0[l * nprocs + p];
		last[p] = 0;
	}
	window = all < ch.cap ? all : ch.cap;
	for (uint64_t i = n - window; i < n; i++) {
		uint64_t e = w[1 + i % ch.cap], o = e & 0xffffffff;
		int p = (int)(e >> 32 & 0xfff);

		if ((e >> 44) - ((uint64_t)ch.seg0 & 0xfffff) >
			    (uint64_t)(ch.r - ch.seg0) ||
		    p >= nprocs ||
		    o < ch.ord0[l * nprocs + p] ||
		    o >= ch.ord[l * nprocs + p] ||
		    (last[p] ? o != last[p] : all <= ch.cap &&
					      o != ch.ord0[l * nprocs + p]))
			ch_fail("after the barrier: entry %" PRIu64 " of the "
				"log of lock %d is %#" PRIx64 " (round %" PRIu64
				", rank %d, section %" PRIu64 "): not the next "
				"of a section taken since the barrier (%s)", i, l, e,
				e >> 44, p, o, ch_where(ch.log[l]));
		last[p] = o + 1;
	}
	for (int p = 0; p < nprocs; p++)
		if (last[p] ? last[p] != ch.ord[l * nprocs + p] :
			      all <= ch.cap && ch.ord[l * nprocs + p] !=
						       ch.ord0[l * nprocs + p])
			ch_fail("after the barrier: the log of lock %d lacks "
				"sections of rank %d: it ends at %" PRIu64
				", expected %" PRIu64 " (%s)", l, p,
				last[p] ? last[p] : ch.ord0[l * nprocs + p],
				ch.ord[l * nprocs + p], ch_where(ch.log[l]));
	memcpy(m + 1, w + 1, ch.cap * 8);
}

static void ch_round(long r)
{
	if (r == 0 || r > ch.seg1)
		ch_plan_segment(r);
	ch.r = r;
	if (ch.lockphase)
		ch_plan_phase(r);
	/* the model: every rank's round, in any order */
	for (int p = 0; p < nprocs; p++) {
		if (!ch.lockphase) {
			ch_unlocked(p, 0);
			continue;
		}
		ch_plan_steps(p);
		for (int i = 0; i < ch.nsteps; i++)
			ch_model_step(&ch.steps[i], p);
	}
	for (size_t i = 0; i < ch.len; i++)
		if (ch.gowner[i] != CH_NOBODY)
			ch.model[i] = ch.gvalue[i];
	/* this rank's round */
	if (ch.lockphase) {
		ch.lockrounds++;
		ch_plan_steps(rank);
		for (ch.step = 0; ch.step < ch.nsteps; ch.step++)
			ch_run_step(&ch.steps[ch.step]);
		ch.step = -1;
	} else {
		ch_gap_write(0, ch.len / 2);
		ch_unlocked(rank, 1);
		ch_gap_write(ch.len / 2, ch.len);
	}
	if (r < ch.seg1)
		return;
	ch.barriers++;
	check(lm_barrier(20), "lm_barrier");
	for (int l = 0; l < CH_LOCKS; l++)
		ch_check_log_round(l);
	ch_compare("after the barrier");
	ch_sync_from_model();
	check(lm_barrier(21), "lm_barrier");
}

static void chaos_body(void)
{
	rank = lm_rank(); /* the globals came from rank 0 */
	nprocs = lm_nprocs();
	if (rank != 0) {
		ch.r = -1;
		ch.step = -1;
		if (chaos_g.magic != CH_MAGIC ||
		    chaos_word != ch_h(T_GLOBAL, 1u << 20, 0))
			ch_fail("ordinary globals set before CREATE: magic %#"
				PRIx64 ", word %#" PRIx64 ", expected %#" PRIx64
				", %#" PRIx64, chaos_g.magic, chaos_word,
				CH_MAGIC, ch_h(T_GLOBAL, 1u << 20, 0));
		for (int i = 0; i < 256; i++)
			if (chaos_g.pattern[i] != ch_h(T_GLOBAL, (uint64_t)i, 0))
				ch_fail("global word %d set before CREATE is "
					"%#" PRIx64 ", expected %#" PRIx64, i,
					chaos_g.pattern[i],
					ch_h(T_GLOBAL, (uint64_t)i, 0));
		ch_setup();
		ch_compare("written by rank 0 before CREATE");
	}
	ch_sync_from_model();
	check(lm_barrier(21), "lm_barrier"); /* all checked before rank 0 writes */
	for (long r = 0; r < chaos_g.rounds; r++)
		ch_round(r);
	/* gap bytes written after the last barrier reach rank 0 through
	 * the END of each worker (and its own WAIT_FOR_END) */
	ch_plan_segment(chaos_g.rounds);
	ch.r = chaos_g.rounds;
	ch_gap_write(0, ch.len);
	for (size_t i = 0; i < ch.len; i++)
		if (ch.gowner[i] != CH_NOBODY)
			ch.model[i] = ch.gvalue[i];
}

static int run_chaos(long rounds, uint64_t seed, long pages)
{
	if (rounds < 1 || rounds > 100000 || pages < 8 || pages > 4096 ||
	    nprocs > 254) {
		fprintf(stderr, "dsmtest: chaos needs ROUNDS 1..100000, PAGES "
			"8..4096 and at most 254 processes\n");
		return 2;
	}
	chaos_g.magic = CH_MAGIC;
	chaos_g.seed = seed;
	chaos_g.rounds = rounds;
	chaos_g.pages = pages;
	chaos_g.area = lm_malloc((size_t)pages * CH_PAGE);
	if (!chaos_g.area)
		die("lm_malloc", -2);
	chaos_g.lock0 = lm_id_alloc(CH_LOCKS);
	check(chaos_g.lock0, "lm_id_alloc");
	for (int i = 0; i < 256; i++)
		chaos_g.pattern[i] = ch_h(T_GLOBAL, (uint64_t)i, 0);
	chaos_word = ch_h(T_GLOBAL, 1u << 20, 0);
	ch_setup();
	memcpy(chaos_g.area, ch.model, ch.len);
	for (int p = 1; p < nprocs; p++)
		check(lm_create(chaos_body), "lm_create");
	chaos_body();
	check(lm_wait_for_end(nprocs - 1), "lm_wait_for_end");
	ch_compare("after WAIT_FOR_END");
	printf("dsmtest chaos: seed %" PRIu64 ": %ld rounds (%ld with locks, "
	       "%ld checked barriers), "
	       "%d records (%d counters, %d chains, %d logs in groups of %d) "
	       "on %ld pages, %d locks; rank 0 took %ld sections\n", seed,
	       rounds, ch.lockrounds, ch.barriers, ch.nrec, ch.ncounters,
	       ch.nchain, CH_LOCKS, ch.loggroup, pages, CH_LOCKS,
	       ch.sections);
	return 0;
}

/* Slices are page aligned and apart, so that no page is shared. */
#define PRIVATE_SLICE (64 * 1024)

static int run_private(long rounds, long bytes)
{
	unsigned char *base = NULL, *mine;

	if (bytes <= 0 || bytes > PRIVATE_SLICE) {
		fprintf(stderr, "dsmtest: BYTES must be 1..%d\n",
			PRIVATE_SLICE);
		return 2;
	}
	if (rank == 0) {
		base = lm_malloc((size_t)nprocs * PRIVATE_SLICE);
		if (!base)
			die("lm_malloc", -2);
	}
	check(lm_distribute(&base, sizeof(base)), "lm_distribute");
	mine = base + (size_t)rank * PRIVATE_SLICE;
	for (long r = 0; r < rounds; r++) {
		for (long i = 0; i < bytes; i++)
			mine[i] = (unsigned char)(rank * 7 + r + i);
		check(lm_barrier(8), "lm_barrier");
		for (long i = 0; i < bytes; i++) {
			if (mine[i] != (unsigned char)(rank * 7 + r + i)) {
				fprintf(stderr, "dsmtest: rank %d: byte %ld "
					"of round %ld lost\n", rank, i, r);
				return 1;
			}
		}
	}
	return 0;
}

#define COMPUTE_PAGES 16
#define COMPUTE_PAGE 4096

static int run_compute(long ms)
{
	uint8_t (*pages)[COMPUTE_PAGE] = NULL;
	volatile unsigned sum = 0;
	uint64_t end;

	if (rank == 0) {
		pages = lm_malloc(COMPUTE_PAGES * COMPUTE_PAGE);
		if (!pages)
			die("lm_malloc", -2);
		for (int p = 0; p < COMPUTE_PAGES; p++)
			memset(pages[p], p + 1, COMPUTE_PAGE);
	}
	check(lm_distribute(&pages, sizeof(pages)), "lm_distribute");
	check(lm_barrier(11), "lm_barrier");
	if (rank != 0) {
		for (int p = COMPUTE_PAGES - 1; p >= 0; p--)
			if (pages[p][p] != p + 1) {
				fprintf(stderr, "dsmtest: rank %d: page %d holds "
					"%d, expected %d\n", rank, p,
					pages[p][p], p + 1);
				return 1;
			}
		end = lm_clock_us() + (uint64_t)ms * 1000u;
		while (lm_clock_us() < end)
			sum++;
	}
	check(lm_barrier(12), "lm_barrier");
	return 0;
}

static int run_lockbar(int waiter)
{
	struct timespec ts = { 0, 200 * 1000 * 1000 };

	if (rank == 0)
		check(lm_lock(1), "lm_lock");
	check(lm_barrier(14), "lm_barrier"); /* the lock is held now */
	if (rank == waiter) {
		nanosleep(&ts, NULL); /* rank 0 waits in the barrier first */
		check(lm_lock(1), "lm_lock");
	}
	check(lm_barrier(15), "lm_barrier");
	fprintf(stderr, "dsmtest: rank %d passed a barrier rank %d could "
		"never reach\n", rank, waiter);
	return 1;
}

static int run_lockcycle(int a, int b)
{
	if (a == b || a < 0 || b < 0 || a >= nprocs || b >= nprocs) {
		fprintf(stderr, "dsmtest: lockcycle takes two ranks below %d\n",
			nprocs);
		return 2;
	}
	if (rank == a)
		check(lm_lock(1), "lm_lock");
	if (rank == b)
		check(lm_lock(2), "lm_lock");
	check(lm_barrier(16), "lm_barrier"); /* both held now */
	if (rank == a)
		check(lm_lock(2), "lm_lock");
	if (rank == b)
		check(lm_lock(1), "lm_lock");
	if (rank == a || rank == b) {
		fprintf(stderr, "dsmtest: rank %d took a lock of the cycle\n",
			rank);
		return 1;
	}
	check(lm_barrier(17), "lm_barrier");
	return 1;
}

static int run_lastread(long ms)
{
	uint8_t (*pages)[COMPUTE_PAGE] = NULL;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	if (rank == 0 && !(pages = lm_malloc((size_t)nprocs * COMPUTE_PAGE)))
		die("lm_malloc", -2);
	check(lm_distribute(&pages, sizeof(pages)), "lm_distribute");
	memset(pages[rank], rank + 1, COMPUTE_PAGE);
	check(lm_barrier(13), "lm_barrier");
	if (rank != 0)
		return 0;
	nanosleep(&ts, NULL);
	for (int r = 0; r < nprocs; r++)
		if (pages[r][COMPUTE_PAGE - 1] != (uint8_t)(r + 1)) {
			fprintf(stderr, "dsmtest: rank 0: rank %d's page holds "
				"%d, expected %d\n", r,
				pages[r][COMPUTE_PAGE - 1], r + 1);
			return 1;
		}
	printf("dsmtest lastread: PASSED (%d pages read after their "
	       "writers left)\n", nprocs);
	return 0;
}

static int run_sleep(int seconds)
{
	check(lm_barrier(9), "lm_barrier");
	if (rank == 0)
		sleep((unsigned)seconds);
	check(lm_barrier(10), "lm_barrier");
	return 0;
}

static int run_misuse(void)
{
	int local = 0, *shared;

	if (lm_unlock(3) == 0) {
		fprintf(stderr, "dsmtest: lm_unlock of a lock not held "
			"succeeded\n");
		return 1;
	}
	if (lm_free(&local) == 0) {
		fprintf(stderr, "dsmtest: lm_free of a stack address "
			"succeeded\n");
		return 1;
	}
	if (lm_malloc((size_t)1 << 40) != NULL) {
		fprintf(stderr, "dsmtest: lm_malloc of 1 TiB succeeded\n");
		return 1;
	}
	/* the blocks of all ranks are live at once, and all freed before
	 * any second free, so no rank frees a block another was given */
	shared = lm_malloc(sizeof(*shared));
	if (!shared)
		die("lm_malloc", -2);
	check(lm_barrier(11), "lm_barrier");
	check(lm_free(shared), "lm_free");
	check(lm_barrier(11), "lm_barrier");
	if (lm_free(shared) == 0) {
		fprintf(stderr, "dsmtest: lm_free twice succeeded\n");
		return 1;
	}
	/* and the run goes on */
	check(lm_lock(3), "lm_lock");
	/* a lock this process holds: refused, not a wait for ever */
	if (lm_lock(3) != LM_EINVAL) {
		fprintf(stderr, "dsmtest: lm_lock of a lock held was not "
			"refused\n");
		return 1;
	}
	check(lm_unlock(3), "lm_unlock");
	check(lm_barrier(12), "lm_barrier");
	return 0;
}

/* "early": the calls a program may make before lm_init must each fail,
 * named on stderr by the library, and leave nothing behind. */
static int run_early_calls(void)
{
	int local = 0;

	if (lm_lock(1) != LM_EINVAL || lm_unlock(1) != LM_EINVAL ||
	    lm_barrier(1) != LM_EINVAL || lm_malloc(8) != NULL ||
	    lm_free(&local) != LM_EINVAL ||
	    lm_distribute(&local, sizeof(local)) != LM_EINVAL) {
		fprintf(stderr, "dsmtest: a call before lm_init did not "
			"fail\n");
		return 1;
	}
	return 0;
}

/* The others of "exit0 MS", after rank 0 has exited: locks need no
 * rank 0. */
static int run_exit0_spmd(long ms)
{
	uint64_t end = lm_clock_us() + (uint64_t)ms * 1000u;
	volatile unsigned sum = 0;

	while (lm_clock_us() < end)
		sum++;
	check(lm_lock(5), "lm_lock");
	check(lm_unlock(5), "lm_unlock");
	return 0;
}

static int run_ids(void)
{
	static const int bad[] = { 0, -1, INT32_MIN, LM_RUNTIME_BARRIER,
				   LM_RUNTIME_BARRIER + 5, INT32_MAX };
	static const char *const name[] = { "lm_lock", "lm_unlock",
					    "lm_barrier" };
	struct counter *s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc[3];

		rc[0] = lm_lock(bad[i]);
		rc[1] = lm_unlock(bad[i]);
		rc[2] = lm_barrier(bad[i]);
		for (int k = 0; k < 3; k++)
			if (rc[k] != LM_EINVAL) {
				fprintf(stderr, "dsmtest: rank %d: %s(%d) "
					"returned %d, not LM_EINVAL\n", rank,
					name[k], bad[i], rc[k]);
				return 1;
			}
	}
	/* the run goes on: the ends of the range, allocated ids, and
	 * lm_distribute's barrier of the runtime's own range */
	check(lm_lock(LM_ID_MIN), "lm_lock(LM_ID_MIN)");
	check(lm_unlock(LM_ID_MIN), "lm_unlock(LM_ID_MIN)");
	check(lm_lock(LM_ID_MAX), "lm_lock(LM_ID_MAX)");
	check(lm_unlock(LM_ID_MAX), "lm_unlock(LM_ID_MAX)");
	check(lm_barrier(LM_ID_MAX), "lm_barrier(LM_ID_MAX)");
	s = shared_counter();
	check(lm_lock(s->lock), "lm_lock");
	s->counter++;
	check(lm_unlock(s->lock), "lm_unlock");
	check(lm_barrier(LM_ID_MIN), "lm_barrier(LM_ID_MIN)");
	if (s->counter != nprocs) {
		fprintf(stderr, "dsmtest: rank %d: counter is %ld, expected "
			"%d\n", rank, s->counter, nprocs);
		return 1;
	}
	return 0;
}

/* Bytes of one page written by every rank in every epoch, cluster-mates
 * and other clusters alike (issue 40): byte `rank` of array a under
 * barriers; byte `rank` of array b under the rank's own lock, several
 * times an epoch, while the others do the same; and a counter on the same
 * page under one lock that every rank takes.  After each barrier every
 * rank checks every byte and the count.  A cluster's copy that took
 * another cluster's changes by the page instead of by the byte, or a seal
 * that missed a write made between two releases, shows as a wrong byte. */
static int run_bytes(long rounds)
{
	struct shared {
		long count;
		int lock_count, lock0;
		unsigned char a[LM_DSM_MAX_PROCS], b[LM_DSM_MAX_PROCS];
	} *s = NULL;

	if (nprocs > LM_DSM_MAX_PROCS) {
		fprintf(stderr, "dsmtest: bytes takes %d processes at most\n",
			LM_DSM_MAX_PROCS);
		return 2;
	}
	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s)
			die("lm_malloc", -2);
		s->lock_count = lm_id_alloc(nprocs + 1);
		check(s->lock_count, "lm_id_alloc");
		s->lock0 = s->lock_count + 1;
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	for (long r = 0; r < rounds; r++) {
		s->a[rank] = (unsigned char)(r * 7 + rank + 1);
		check(lm_barrier(40), "lm_barrier");
		for (int q = 0; q < nprocs; q++)
			if (s->a[q] != (unsigned char)(r * 7 + q + 1)) {
				fprintf(stderr, "dsmtest: rank %d, round %ld: "
					"a[%d] is %u, expected %u\n", rank, r,
					q, s->a[q],
					(unsigned char)(r * 7 + q + 1));
				return 1;
			}
		for (int k = 0; k < 4; k++) {
			check(lm_lock(s->lock0 + rank), "lm_lock");
			s->b[rank] = (unsigned char)(r * 13 + k * 3 + rank);
			check(lm_unlock(s->lock0 + rank), "lm_unlock");
		}
		check(lm_lock(s->lock_count), "lm_lock");
		s->count++;
		check(lm_unlock(s->lock_count), "lm_unlock");
		check(lm_barrier(41), "lm_barrier");
		for (int q = 0; q < nprocs; q++)
			if (s->b[q] != (unsigned char)(r * 13 + 9 + q)) {
				fprintf(stderr, "dsmtest: rank %d, round %ld: "
					"b[%d] is %u, expected %u\n", rank, r,
					q, s->b[q],
					(unsigned char)(r * 13 + 9 + q));
				return 1;
			}
		if (s->count != (r + 1) * nprocs) {
			fprintf(stderr, "dsmtest: rank %d, round %ld: count "
				"%ld, expected %ld\n", rank, r, s->count,
				(r + 1) * nprocs);
			return 1;
		}
	}
	return 0;
}

static int run_die(int victim)
{
	check(lm_barrier(6), "lm_barrier");
	if (rank == victim)
		raise(SIGKILL);
	check(lm_barrier(7), "lm_barrier");
	fprintf(stderr, "dsmtest: rank %d passed a barrier rank %d never "
		"reached\n", rank, victim);
	return 1;
}

int main(int argc, char **argv)
{
	int failed;

	if (argc < 3) {
		fprintf(stderr, "usage: dsmtest counter K | barriers N | "
				"die RANK | stress ROUNDS PAGES SEED | "
				"owners ERAS PAGES SEED | low 1 | leave RANK [LAST] | nofinal RANK | split 1|2 | "
				"private ROUNDS BYTES | sleep SECONDS | "
				"lastread MS | lockbar RANK | lockcycle A B | "
				"misuse 1 | early 1 | ids 1 | numbering 1 | "
				"counters K GAP | created PAGES | "
				"chain ROUNDS | bytes ROUNDS | "
				"exit0 serve|MS | "
				"chaos ROUNDS SEED [PAGES]\n");
		return 2;
	}
	if (strcmp(argv[1], "early") == 0 && run_early_calls() != 0)
		return 1;
	check(lm_init(&argc, &argv), "lm_init");
	rank = lm_rank();
	nprocs = lm_nprocs();
	if (strcmp(argv[1], "early") == 0 && lm_init(&argc, &argv) != LM_EINVAL) {
		fprintf(stderr, "dsmtest: a second lm_init was not refused\n");
		return 1;
	}
	if (strcmp(argv[1], "exit0") == 0 && rank == 0) {
		printf("dsmtest exit0: rank 0 exits\n");
		exit(0); /* no lm_finalize */
	}
	if (strcmp(argv[1], "exit0") == 0 && strcmp(argv[2], "serve") == 0)
		return lm_worker_serve(); /* finalizes */
	if ((strcmp(argv[1], "numbering") == 0 ||
	     strcmp(argv[1], "created") == 0 ||
	     strcmp(argv[1], "chaos") == 0) && rank != 0)
		return lm_worker_serve(); /* finalizes */
	if (strcmp(argv[1], "numbering") == 0)
		failed = run_numbering();
	else if (strcmp(argv[1], "created") == 0)
		failed = run_created(atol(argv[2]));
	else if (strcmp(argv[1], "chain") == 0)
		failed = run_chain(atol(argv[2]));
	else if (strcmp(argv[1], "chaos") == 0 && (argc == 4 || argc == 5))
		failed = run_chaos(atol(argv[2]), strtoull(argv[3], NULL, 10),
				   argc == 5 ? atol(argv[4]) : 40);
	else if (strcmp(argv[1], "bytes") == 0)
		failed = run_bytes(atol(argv[2]));
	else if (strcmp(argv[1], "counters") == 0 && argc == 4)
		failed = run_counters(atol(argv[2]), atol(argv[3]));
	else if (strcmp(argv[1], "exit0") == 0)
		failed = run_exit0_spmd(atol(argv[2]));
	else if (strcmp(argv[1], "counter") == 0)
		failed = run_counter(atol(argv[2]));
	else if (strcmp(argv[1], "barriers") == 0)
		failed = run_barriers(atol(argv[2]));
	else if (strcmp(argv[1], "die") == 0)
		failed = run_die(atoi(argv[2]));
	else if (strcmp(argv[1], "compute") == 0)
		failed = run_compute(atol(argv[2]));
	else if (strcmp(argv[1], "sleep") == 0)
		failed = run_sleep(atoi(argv[2]));
	else if (strcmp(argv[1], "lastread") == 0)
		failed = run_lastread(atol(argv[2]));
	else if (strcmp(argv[1], "lockbar") == 0)
		failed = run_lockbar(atoi(argv[2]));
	else if (strcmp(argv[1], "lockcycle") == 0 && argc == 4)
		failed = run_lockcycle(atoi(argv[2]), atoi(argv[3]));
	else if (strcmp(argv[1], "misuse") == 0)
		failed = run_misuse();
	else if (strcmp(argv[1], "early") == 0) {
		check(lm_barrier(1), "lm_barrier"); /* the run works */
		failed = 0;
	}
	else if (strcmp(argv[1], "ids") == 0)
		failed = run_ids();
	else if (strcmp(argv[1], "private") == 0 && argc == 4)
		failed = run_private(atol(argv[2]), atol(argv[3]));
	else if (strcmp(argv[1], "leave") == 0)
		failed = run_leave(atoi(argv[2]),
				   argc > 3 ? atoi(argv[3]) : atoi(argv[2]));
	else if (strcmp(argv[1], "nofinal") == 0)
		failed = run_nofinal(atoi(argv[2]));
	else if (strcmp(argv[1], "split") == 0)
		failed = run_split(atoi(argv[2]) == 2);
	else if (strcmp(argv[1], "low") == 0)
		failed = run_low();
	else if (strcmp(argv[1], "owners") == 0 && argc == 5)
		failed = run_owners(atol(argv[2]), atol(argv[3]),
				    strtoull(argv[4], NULL, 10));
	else if (strcmp(argv[1], "visible") == 0 && argc == 5)
		failed = run_visible(atol(argv[2]), atol(argv[3]),
				     strtoull(argv[4], NULL, 10));
	else if (strcmp(argv[1], "stress") == 0 && argc == 5)
		failed = run_stress(atol(argv[2]), atol(argv[3]),
				    strtoull(argv[4], NULL, 10));
	else {
		fprintf(stderr, "dsmtest: unknown test %s\n", argv[1]);
		failed = 2;
	}
	lm_finalize();
	if (!failed)
		printf("dsmtest %s: rank %d PASSED\n", argv[1], rank);
	return failed;
}
