/* Runner for every CUnit suite linked into the test binary.
 *
 * Usage: unit [SUITE...]   (no argument: all suites)
 * Exits 1 when any assertion failed, 2 on a CUnit error, 3 when the run
 * outlives LM_TEST_DEADLINE_S. */
#include "unit.h"

#include <CUnit/Basic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LM_TEST_MAX_SUITES 64
/* A test that loops (a page the region tests never open, say) fails the
 * run instead of holding `make check` until CI gives up. */
#define LM_TEST_DEADLINE_S 600

struct lm_suite_entry {
	const char *name;
	const struct lm_test *tests;
	size_t ntests;
};

static struct lm_suite_entry lm_suites[LM_TEST_MAX_SUITES];
static size_t lm_nsuites;

void lm_test_suite_add(const char *suite, const struct lm_test *tests,
		       size_t ntests)
{
	if (lm_nsuites == LM_TEST_MAX_SUITES) {
		fprintf(stderr, "unit: too many suites, %s ignored\n", suite);
		return;
	}
	lm_suites[lm_nsuites++] = (struct lm_suite_entry){ suite, tests, ntests };
}

static int lm_suite_wanted(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

static void lm_test_deadline(int sig)
{
	static const char msg[] = "\nunit: still running after the deadline "
				  "(a test loops or hangs); the test named "
				  "last above did not finish\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

/* The failed assertions again, after the summary: a log cut to its last
 * lines (a CI job's) still names them. */
static void lm_list_failures(void)
{
	CU_pFailureRecord f = CU_get_failure_list();

	if (!f)
		return;
	fprintf(stderr, "\nunit: %u failed assertion(s):\n",
		CU_get_number_of_failure_records());
	for (; f; f = f->pNext)
		fprintf(stderr, "unit:   %s / %s: %s:%u: %s\n",
			f->pSuite ? f->pSuite->pName : "?",
			f->pTest ? f->pTest->pName : "?",
			f->strFileName ? f->strFileName : "?", f->uiLineNumber,
			f->strCondition ? f->strCondition : "?");
}

int main(int argc, char **argv)
{
	unsigned failures;

	signal(SIGALRM, lm_test_deadline);
	alarm(LM_TEST_DEADLINE_S);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	for (size_t i = 0; i < lm_nsuites; i++) {
		CU_pSuite s;

		if (!lm_suite_wanted(lm_suites[i].name, argc, argv))
			continue;
		s = CU_add_suite(lm_suites[i].name, NULL, NULL);
		if (!s)
			return 2;
		for (size_t t = 0; t < lm_suites[i].ntests; t++)
			if (!CU_add_test(s, lm_suites[i].tests[t].name,
					 lm_suites[i].tests[t].fn))
				return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (CU_basic_run_tests() != CUE_SUCCESS)
		return 2;
	failures = CU_get_number_of_failures() +
		   CU_get_number_of_suites_failed() +
		   CU_get_number_of_tests_failed();
	lm_list_failures();
	CU_cleanup_registry();
	return failures ? 1 : 0;
}
