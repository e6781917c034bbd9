/* The SPLASH-2 programs' shared helpers (splash2/common/splash_util.h)
 * that their result checks rest on. */
#include "unit.h"

#include <math.h>

/* splash_util.h wants the runtime's declarations first; it needs none
 * of them for what is tested here. */
#define LM_PT_DECLS_DONE 1
#include "../splash2/common/splash_util.h"

/* LU's check folds |x - 1| and the residual with lm_splash_max: a NaN
 * anywhere must come out NaN, so that the check fails (fmax would drop
 * it and report an error of 0). */
static void test_max_keeps_a_nan(void)
{
	const double v[] = { 1.0, NAN, 3.0 };
	double m = 0.0;

	CU_ASSERT_EQUAL(lm_splash_max(1.0, 2.0), 2.0);
	CU_ASSERT_EQUAL(lm_splash_max(2.0, 1.0), 2.0);
	CU_ASSERT_EQUAL(lm_splash_max(-0.5, -1.0), -0.5);
	CU_ASSERT_TRUE(isnan(lm_splash_max(NAN, 1.0)));
	CU_ASSERT_TRUE(isnan(lm_splash_max(1.0, NAN)));
	for (int i = 0; i < 3; i++)
		m = lm_splash_max(m, v[i]);
	CU_ASSERT_TRUE(isnan(m));
	CU_ASSERT_FALSE(m <= 1e-8); /* what the checks test */
}

LM_TEST_SUITE("splash", LM_TEST(test_max_keeps_a_nan))
