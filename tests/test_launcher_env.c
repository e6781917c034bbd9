/* A rank's identity from its launcher (liblemuria/launcher_env.c):
 * lemuria-run's LM_RANK and LM_RUN first, else Slurm's, Open MPI's or
 * PMI's variables, so that srun and mpirun can start the ranks (issue
 * 42); what is not a number is refused, naming the variable; run ids
 * grow as the daemons want them to. */
#include "unit.h"

#include <stdlib.h>

#include "launcher_env.h"
#include "lm_error.h"

static const char *const all[] = { "LM_RANK", "SLURM_PROCID",
	"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "LM_RUN",
	"SLURM_JOB_START_TIME", "SLURM_STEP_ID", "PMIX_NAMESPACE", NULL };

static void clear(void)
{
	for (const char *const *n = all; *n; n++)
		unsetenv(*n);
}

static void test_rank_from_each_launcher(void)
{
	const char *var, *value;
	uint32_t r = 99;

	clear();
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), LM_ENOENT);
	setenv("PMI_RANK", "7", 1);
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), 0);
	CU_ASSERT_EQUAL(r, 7);
	CU_ASSERT_STRING_EQUAL(var, "PMI_RANK");
	setenv("OMPI_COMM_WORLD_RANK", "5", 1);
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), 0);
	CU_ASSERT_EQUAL(r, 5);
	setenv("SLURM_PROCID", "3", 1);
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), 0);
	CU_ASSERT_EQUAL(r, 3);
	CU_ASSERT_STRING_EQUAL(var, "SLURM_PROCID");
	/* lemuria-run's own comes first */
	setenv("LM_RANK", "0", 1);
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), 0);
	CU_ASSERT_EQUAL(r, 0);
	CU_ASSERT_STRING_EQUAL(var, "LM_RANK");
	setenv("LM_RANK", "2x", 1);
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), LM_EINVAL);
	CU_ASSERT_STRING_EQUAL(var, "LM_RANK");
	CU_ASSERT_STRING_EQUAL(value, "2x");
	setenv("LM_RANK", "-1", 1);
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), LM_EINVAL);
	setenv("LM_RANK", "4294967296", 1);
	CU_ASSERT_EQUAL(lm_launcher_rank(&r, &var, &value), LM_EINVAL);
	clear();
}

static void test_run_the_same_in_every_rank(void)
{
	const char *var, *value;
	uint64_t a = 0, b = 0, c = 0;

	clear();
	CU_ASSERT_EQUAL(lm_launcher_run(&a, &var, &value), LM_ENOENT);
	/* mpirun gives no time to make one of */
	setenv("PMIX_NAMESPACE", "prterun-host-1234@1", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&a, &var, &value), LM_ENOENT);
	/* srun: the job's start and the step, in lemuria-run's scale;
	 * a later step, and a later job, are larger */
	setenv("SLURM_JOB_START_TIME", "1796500000", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&a, &var, &value), 0);
	CU_ASSERT_STRING_EQUAL(var, "SLURM_JOB_START_TIME");
	CU_ASSERT_EQUAL(lm_launcher_run(&b, &var, &value), 0);
	CU_ASSERT_EQUAL(a, b);
	CU_ASSERT(a / 1000000000u == 1796500000u);
	setenv("SLURM_STEP_ID", "1", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&b, &var, &value), 0);
	CU_ASSERT(b > a);
	setenv("SLURM_JOB_START_TIME", "1796500001", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&c, &var, &value), 0);
	CU_ASSERT(c > b);
	setenv("SLURM_STEP_ID", "x", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&b, &var, &value), LM_EINVAL);
	setenv("SLURM_STEP_ID", "0", 1);
	setenv("SLURM_JOB_START_TIME", "99999999999999999", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&b, &var, &value), LM_EINVAL);
	/* LM_RUN first; 0 and words refused */
	setenv("LM_RUN", "42", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&a, &var, &value), 0);
	CU_ASSERT_EQUAL(a, 42);
	setenv("LM_RUN", "0", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&a, &var, &value), LM_EINVAL);
	setenv("LM_RUN", "soon", 1);
	CU_ASSERT_EQUAL(lm_launcher_run(&a, &var, &value), LM_EINVAL);
	CU_ASSERT_STRING_EQUAL(var, "LM_RUN");
	clear();
}

LM_TEST_SUITE("launcher_env",
	      LM_TEST(test_rank_from_each_launcher),
	      LM_TEST(test_run_the_same_in_every_rank))
