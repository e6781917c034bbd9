/*
 * The smallest Lemuria program, written against lemuria.h alone: every
 * rank adds its number plus one to a counter in shared memory under a
 * lock, all meet at a barrier, and rank 0 checks the sum.
 *
 *   cc $(pkg-config --cflags lemuria) -o hello hello.c \
 *      $(pkg-config --libs lemuria)
 *   lemuria-run -n 4 -- ./hello
 *
 * Prints "hello: 4 ranks, sum 10: PASSED" and exits 0, or names what
 * failed and exits 1.
 */
#include <stdio.h>
#include <lemuria.h>
#include <lemuria_error.h>

static int fail(const char *call, int rc)
{
	fprintf(stderr, "hello: %s: %s\n", call, lm_strerror(rc));
	lm_finalize();
	return 1;
}

int main(int argc, char **argv)
{
	long *sum = NULL;
	int ids = 0, rc, me, n;

	if ((rc = lm_init(&argc, &argv)) != 0)
		return fail("lm_init", rc);
	me = lm_rank();
	n = lm_nprocs();
	/* rank 0 allocates; lm_distribute gives every rank its values */
	if (me == 0) {
		sum = lm_malloc(sizeof(*sum));
		ids = lm_id_alloc(2); /* a lock and a barrier */
		if (!sum || ids < 0)
			return fail("lm_malloc or lm_id_alloc", ids < 0 ? ids :
				    LM_ENOMEM);
	}
	if ((rc = lm_distribute(&sum, sizeof(sum))) != 0 ||
	    (rc = lm_distribute(&ids, sizeof(ids))) != 0)
		return fail("lm_distribute", rc);
	if ((rc = lm_lock(ids)) != 0)
		return fail("lm_lock", rc);
	*sum += me + 1;
	if ((rc = lm_unlock(ids)) != 0)
		return fail("lm_unlock", rc);
	if ((rc = lm_barrier(ids + 1)) != 0)
		return fail("lm_barrier", rc);
	if (me == 0) {
		long want = (long)n * (n + 1) / 2;

		if (*sum != want) {
			fprintf(stderr, "hello: sum %ld, want %ld\n", *sum,
				want);
			lm_finalize();
			return 1;
		}
		printf("hello: %d ranks, sum %ld: PASSED\n", n, *sum);
	}
	lm_finalize();
	return 0;
}
