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
 *   dsmtest sleep S            a barrier, then rank 0 sleeps S seconds
 *                              while the others wait in a second barrier
 *                              with nothing to send (for liveness tests)
 *   dsmtest misuse 1           API misuse (issue 6): lm_unlock of a lock
 *                              not held, lm_free of memory lm_malloc did
 *                              not return (a stack address, and a shared
 *                              address freed twice), lm_malloc beyond the
 *                              region: each must fail with an error, and
 *                              the run must go on working after them
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lemuria.h"

static int rank, nprocs;

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

static int run_counter(long k)
{
	struct shared {
		int lock;
		long counter;
	} *s = NULL;

	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s)
			die("lm_malloc", -2);
		s->lock = lm_id_alloc(1);
		check(s->lock, "lm_id_alloc");
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
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
	check(lm_unlock(3), "lm_unlock");
	check(lm_barrier(12), "lm_barrier");
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
	struct shared {
		int lock;
		long counter;
	} *s = NULL;

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
	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s)
			die("lm_malloc", -2);
		s->lock = lm_id_alloc(1);
		check(s->lock, "lm_id_alloc");
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
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
				"private ROUNDS BYTES | sleep SECONDS | "
				"misuse 1 | ids 1 | numbering 1 | "
				"counters K GAP | created PAGES | "
				"chain ROUNDS | exit0 serve|MS\n");
		return 2;
	}
	check(lm_init(&argc, &argv), "lm_init");
	rank = lm_rank();
	nprocs = lm_nprocs();
	if (strcmp(argv[1], "exit0") == 0 && rank == 0) {
		printf("dsmtest exit0: rank 0 exits\n");
		exit(0); /* no lm_finalize */
	}
	if (strcmp(argv[1], "exit0") == 0 && strcmp(argv[2], "serve") == 0)
		return lm_worker_serve(); /* finalizes */
	if ((strcmp(argv[1], "numbering") == 0 ||
	     strcmp(argv[1], "created") == 0) && rank != 0)
		return lm_worker_serve(); /* finalizes */
	if (strcmp(argv[1], "numbering") == 0)
		failed = run_numbering();
	else if (strcmp(argv[1], "created") == 0)
		failed = run_created(atol(argv[2]));
	else if (strcmp(argv[1], "chain") == 0)
		failed = run_chain(atol(argv[2]));
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
	else if (strcmp(argv[1], "misuse") == 0)
		failed = run_misuse();
	else if (strcmp(argv[1], "ids") == 0)
		failed = run_ids();
	else if (strcmp(argv[1], "private") == 0 && argc == 4)
		failed = run_private(atol(argv[2]), atol(argv[3]));
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
