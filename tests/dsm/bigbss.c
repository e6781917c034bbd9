/* bigbss: CREATE of a program whose .bss is large and mostly zero (issue
 * 38, finding 3), run by tests/run-dsm.sh under lemuria-run.
 *
 *   bigbss [DENSE_MIB]
 *
 * Rank 0 sets a few words of a BIGBSS_MIB-MiB static array (32 by
 * default) that is otherwise zero, and a word of .data, then CREATEs
 * every other process.  Each worker first writes words of its own into
 * the array and the .data word, then serves its CREATE: it must find
 * rank 0's words, its own words gone and the rest of the array zero.
 * The data-segment image carries only the blocks that are not zero, so
 * each CREATE is small (run-dsm.sh checks the bytes the daemons sent);
 * a whole-segment image was larger than the transport's largest message.
 * With DENSE_MIB (below 16), rank 0 also fills the array's last
 * DENSE_MIB MiB, so that every CREATE is that large: a burst of them
 * overfills the daemons' send queues, and must still arrive.
 *
 * Exit status 0 and "PASSED" (rank 0) when every worker's checks held. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "lemuria.h"

#ifndef BIGBSS_MIB
#define BIGBSS_MIB 32
#endif
#define WORDS ((size_t)BIGBSS_MIB << 17) /* of 8 bytes */
#define SPOTS 16

static uint64_t big[WORDS];
static long data_word = 1;
static size_t dense_from = WORDS; /* rank 0's: the filled words' start */

/* Where rank 0's words go: spread over the array, off block boundaries. */
static size_t spot(int i)
{
	return (size_t)i * (WORDS / SPOTS) + 3 * (size_t)i + 1;
}

static uint64_t value(int i)
{
	return 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
}

static uint64_t dense_value(size_t w)
{
	return 0xbf58476d1ce4e5b9ull * (uint64_t)(w + 1);
}

static void fail(const char *what, size_t w, uint64_t v)
{
	fprintf(stderr, "bigbss: rank %d: %s: word %zu is %#" PRIx64 "\n",
		lm_rank(), what, w, v);
	exit(1);
}

static void check_image(void)
{
	int s = 0;

	if (data_word != 42)
		fail(".data word not rank 0's", 0, (uint64_t)data_word);
	for (size_t w = 0; w < WORDS; w++) {
		if (w >= dense_from) {
			if (big[w] != dense_value(w))
				fail("word of the filled part", w, big[w]);
		} else if (s < SPOTS && w == spot(s)) {
			if (big[w] != value(s))
				fail("word rank 0 set before CREATE", w,
				     big[w]);
			s++;
		} else if (big[w] != 0) {
			fail("word that should be zero", w, big[w]);
		}
	}
}

int main(int argc, char **argv)
{
	long dense = argc > 1 ? atol(argv[1]) : 0;
	int rc, nprocs;

	if (dense < 0 || dense >= 16 || dense > BIGBSS_MIB / 2) {
		fprintf(stderr, "bigbss: DENSE_MIB must be 0..%d\n",
			BIGBSS_MIB / 2 < 15 ? BIGBSS_MIB / 2 : 15);
		return 2;
	}
	if (lm_init(&argc, &argv) != 0)
		return 1;
	nprocs = lm_nprocs();
	if (lm_rank() != 0) {
		/* what the image must overwrite: set before the CREATE */
		big[spot(1)] = 5;
		big[spot(2) + 1] = 6;
		big[WORDS / 2 + 7] = 7;
		data_word = 8;
		return lm_worker_serve(); /* finalizes */
	}
	dense_from = WORDS - ((size_t)dense << 17);
	for (int s = 0; s < SPOTS; s++)
		if (spot(s) < dense_from)
			big[spot(s)] = value(s);
	for (size_t w = dense_from; w < WORDS; w++)
		big[w] = dense_value(w);
	data_word = 42;
	for (int p = 1; p < nprocs; p++) {
		rc = lm_create(check_image);
		if (rc < 0) {
			fprintf(stderr, "bigbss: lm_create: %s\n",
				lm_strerror(rc));
			return 1;
		}
	}
	rc = lm_wait_for_end(nprocs - 1);
	if (rc < 0) {
		fprintf(stderr, "bigbss: lm_wait_for_end: %s\n",
			lm_strerror(rc));
		return 1;
	}
	lm_finalize();
	printf("bigbss: %d workers found %d words and %ld MiB filled in %d "
	       "MiB of .bss: PASSED\n", nprocs - 1, SPOTS, dense, BIGBSS_MIB);
	return 0;
}
