/* Registration of CUnit suites: each tests/test_<module>.c declares its
 * suite with LM_TEST_SUITE and is picked up at start-up, so adding a test
 * file needs no edit elsewhere. */
#ifndef LM_TESTS_UNIT_H
#define LM_TESTS_UNIT_H

#include <CUnit/CUnit.h>
#include <stddef.h>

struct lm_test {
	const char *name;
	void (*fn)(void);
};

void lm_test_suite_add(const char *suite, const struct lm_test *tests,
		       size_t ntests);

#define LM_TEST(fn) { #fn, fn }
#define LM_TEST_SUITE(suite_name, ...)                                       \
	static const struct lm_test lm_suite_tests_[] = { __VA_ARGS__ };     \
	__attribute__((constructor)) static void lm_suite_register_(void)    \
	{                                                                    \
		lm_test_suite_add(suite_name, lm_suite_tests_,               \
				  sizeof(lm_suite_tests_) /                  \
					  sizeof(lm_suite_tests_[0]));       \
	}

#endif
