/* micro: the DSM's basic operations, timed (run by bench/micro.sh under
 * lemuria-run on a layout).  Prints one "micro: NAME VALUE" line per
 * figure, from rank 0 (or the rank that measured it):
 *
 *   fault_cluster_us  read fault on a page the lemuriad holds (written by
 *                     a rank of the same cluster just before), one page
 *                     per fault: the median of the faults, each timed
 *                     alone, as bench/transport takes the median of its
 *                     round trips; fault_cluster_mean_us is their mean
 *   fault_warm_us     the same pages faulted again, each a page the
 *                     process had (its copy invalidated by the notices a
 *                     lock brought): what a DSM's read faults mostly are
 *                     once a program runs, without the first touches of
 *                     the process's memory that a first fault pays;
 *                     median, and fault_warm_mean_us
 *   fault_home_us     read fault on a page from another cluster: the
 *                     lemuriad fetches it through its reflector from the
 *                     page's home (which, with lazy relay, pulls it
 *                     first); median, and fault_home_mean_us
 *   barrier_us        one barrier of every process
 *   lock_local_us     one lock hand-off between two ranks of one cluster
 *   lock_remote_us    one lock hand-off between ranks of two clusters
 *
 * Figures that need two clusters (or two ranks in a cluster) are left out
 * when the layout has none. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lemuria.h"

#define PAGES 256
#define PAGE 4096
#define BARRIERS 1000
#define HANDOFFS 400

static int rank, nprocs;

static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "micro: rank %d: %s: %s\n", rank, what,
			lm_strerror(rc));
		exit(1);
	}
}

struct shared {
	int lock;
	volatile int turn;   /* whose turn to take the lock next */
	int first_other;     /* first rank of another cluster, or -1 */
	char pad[64];
	unsigned char pages[2][PAGES][PAGE];
	/* rank 0 wrote pages[0] again; after the pages, so that the page
	 * rank 1 reads it from is none of theirs */
	volatile int rewritten;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Reads one byte of each page, last page first, so that no fault finds
 * invalid pages after its own to bring along (docs/dsm.md, "Neighbour
 * pages"); the scripts run it with `prefetch = 0`, since a stride of
 * faults, this one of -1 page included, would bring pages along it.
 * Each read is timed alone; sets *mean and returns the median, in
 * microseconds. */
static double read_faults(unsigned char (*p)[PAGE], double *mean)
{
	static double us[PAGES];
	volatile unsigned sum = 0;
	double total = 0;

	for (int i = PAGES - 1; i >= 0; i--) {
		double t0 = now_us();

		sum += p[i][i];
		us[i] = now_us() - t0;
		total += us[i];
	}
	(void)sum;
	for (int i = 0; i < PAGES; i++)
		if (us[i] < 1.0) { /* no round trip takes under 1 us */
			fprintf(stderr, "micro: rank %d: reads that did not "
				"fault: pages came along (prefetch is not "
				"0)\n", rank);
			break;
		}
	*mean = total / PAGES;
	qsort(us, PAGES, sizeof(us[0]), by_value);
	return (us[PAGES / 2 - 1] + us[PAGES / 2]) / 2;
}

/* Rank 1 (of cluster 0, which read pages[0] once) waits, taking and
 * releasing the lock, until rank 0 has written every page again under
 * it; the lock brings it the pages' notices, so its copies go and its
 * reads fault on pages it had, each answered from the lemuriad's copy
 * that rank 0's release updated.  Returns the median as read_faults
 * does, or a negative value when the wait ran out or a page came back
 * without rank 0's write. */
static double warm_faults(struct shared *s, double *mean)
{
	double t0 = now_us(), t;
	int seen = 0, lock = s->lock; /* the lock's page is pages[0]'s too */

	for (int tries = 0; !seen && tries < 1000000 &&
			    now_us() - t0 < 30e6; tries++) {
		check(lm_lock(lock), "lm_lock");
		seen = s->rewritten;
		check(lm_unlock(lock), "lm_unlock");
	}
	if (!seen)
		return -1;
	t = read_faults(s->pages[0], mean);
	for (int i = 0; i < PAGES; i++)
		if (s->pages[0][i][i] != (unsigned char)(i + 2))
			return -2;
	return t;
}

/* Ranks a and b take the lock in turn, HANDOFFS times in all; returns the
 * time per hand-off seen by rank a. */
static double handoffs(struct shared *s, int a, int b)
{
	uint64_t t0 = lm_clock_us();

	for (int i = 0; i < HANDOFFS; i++) {
		int me = i % 2 ? b : a;

		if (rank != me)
			continue;
		/* wait for our turn: the other unlocks after setting it */
		for (;;) {
			check(lm_lock(s->lock), "lm_lock");
			if (s->turn == i)
				break;
			check(lm_unlock(s->lock), "lm_unlock");
		}
		s->turn = i + 1;
		check(lm_unlock(s->lock), "lm_unlock");
	}
	return (double)(lm_clock_us() - t0) / HANDOFFS;
}

int main(int argc, char **argv)
{
	struct shared *s = NULL;
	int my_cluster;
	double t, mean;

	check(lm_init(&argc, &argv), "lm_init");
	rank = lm_rank();
	nprocs = lm_nprocs();
	my_cluster = lm_cluster();
	if (rank == 0) {
		s = lm_malloc(sizeof(*s));
		if (!s)
			check(-2, "lm_malloc");
		s->lock = lm_id_alloc(1);
		check(s->lock, "lm_id_alloc");
		s->first_other = -1;
	}
	check(lm_distribute(&s, sizeof(s)), "lm_distribute");
	check(lm_barrier(1), "lm_barrier");
	/* the first rank of another cluster says who it is */
	if (my_cluster != 0) {
		check(lm_lock(s->lock), "lm_lock");
		if (s->first_other < 0 || rank < s->first_other)
			s->first_other = rank;
		check(lm_unlock(s->lock), "lm_unlock");
	}
	if (rank == 0)
		for (int k = 0; k < 2; k++)
			for (int i = 0; i < PAGES; i++)
				s->pages[k][i][i] = (unsigned char)(i + k);
	check(lm_barrier(2), "lm_barrier");

	/* rank 1 shares rank 0's cluster when rank 1's cluster is 0 */
	if (rank == 1 && my_cluster == 0) {
		t = read_faults(s->pages[0], &mean);
		printf("micro: fault_cluster_us %.1f\n", t);
		printf("micro: fault_cluster_mean_us %.1f\n", mean);
	}
	/* again, warm: rank 0 rewrites the pages rank 1 has just read */
	check(lm_barrier(10), "lm_barrier");
	if (nprocs > 1 && s->first_other != 1) {
		if (rank == 0) {
			check(lm_lock(s->lock), "lm_lock");
			for (int i = 0; i < PAGES; i++)
				s->pages[0][i][i] = (unsigned char)(i + 2);
			s->rewritten = 1;
			check(lm_unlock(s->lock), "lm_unlock");
		} else if (rank == 1) {
			t = warm_faults(s, &mean);
			if (t < 0) {
				fprintf(stderr, "micro: rank 1: warm faults: %s\n",
					t == -1 ? "rank 0's writes never came"
						: "a page without rank 0's write");
				exit(1);
			}
			printf("micro: fault_warm_us %.1f\n", t);
			printf("micro: fault_warm_mean_us %.1f\n", mean);
		}
	}
	/* one measurement at a time: the other's faults would share the
	 * two cores and the daemons with it */
	check(lm_barrier(9), "lm_barrier");
	if (s->first_other >= 0 && rank == s->first_other) {
		t = read_faults(s->pages[1], &mean);
		printf("micro: fault_home_us %.1f\n", t);
		printf("micro: fault_home_mean_us %.1f\n", mean);
	}
	check(lm_barrier(3), "lm_barrier");

	t = (double)lm_clock_us();
	for (int i = 0; i < BARRIERS; i++)
		check(lm_barrier(4), "lm_barrier");
	t = ((double)lm_clock_us() - t) / BARRIERS;
	if (rank == 0)
		printf("micro: barrier_us %.1f\n", t);

	if (nprocs > 1) {
		if (rank == 0)
			s->turn = 0;
		check(lm_barrier(5), "lm_barrier");
		/* ranks 0 and 1 share cluster 0 unless rank 1 is the first
		 * of another cluster */
		if (s->first_other != 1 && (rank == 0 || rank == 1)) {
			t = handoffs(s, 0, 1);
			if (rank == 0)
				printf("micro: lock_local_us %.1f\n", t);
		}
		check(lm_barrier(6), "lm_barrier");
		if (rank == 0)
			s->turn = 0;
		check(lm_barrier(7), "lm_barrier");
		if (s->first_other > 0 &&
		    (rank == 0 || rank == s->first_other)) {
			t = handoffs(s, 0, s->first_other);
			if (rank == 0)
				printf("micro: lock_remote_us %.1f\n", t);
		}
	}
	check(lm_barrier(8), "lm_barrier");
	lm_finalize();
	return 0;
}
