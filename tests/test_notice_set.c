/* The notice set of a daemon's epoch (common/notice_set.h). */
#include "unit.h"

#include "notice_set.h"

static struct lm_notice note(uint32_t page, uint32_t version)
{
	struct lm_notice n = { page, version, 0, 1, 2 };

	return n;
}

static const struct lm_notice *find(const struct lm_notice_set *s,
				    uint32_t page)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->v[i].page == page)
			return &s->v[i];
	return NULL;
}

/* One entry per page, the latest version whatever the order; a notice
 * outside the region is ignored; clear empties it for the next epoch. */
static void test_latest_version_per_page(void)
{
	struct lm_notice_set s;
	struct lm_notice batch[3] = { note(7, 4), note(3, 9), note(7, 2) };
	struct lm_notice far = note(16, 1);

	CU_ASSERT_FATAL(lm_notice_set_init(&s, 16) == 0);
	lm_notice_set_add(&s, batch, 3);
	CU_ASSERT_EQUAL(s.n, 2);
	CU_ASSERT_EQUAL(find(&s, 7)->version, 4);
	CU_ASSERT_EQUAL(find(&s, 3)->version, 9);
	batch[0] = note(7, 5);
	lm_notice_set_put(&s, &batch[0]);
	CU_ASSERT_EQUAL(s.n, 2);
	CU_ASSERT_EQUAL(find(&s, 7)->version, 5);
	lm_notice_set_put(&s, &far);
	CU_ASSERT_EQUAL(s.n, 2);
	lm_notice_set_add(&s, NULL, 3);
	CU_ASSERT_EQUAL(s.n, 2);
	lm_notice_set_clear(&s);
	CU_ASSERT_EQUAL(s.n, 0);
	CU_ASSERT_PTR_NULL(find(&s, 7));
	lm_notice_set_put(&s, &batch[1]);
	CU_ASSERT_EQUAL(s.n, 1);
	CU_ASSERT_EQUAL(find(&s, 3)->version, 9);
	lm_notice_set_free(&s);
	lm_notice_set_free(&s); /* twice is safe */
}

LM_TEST_SUITE("notice_set",
	LM_TEST(test_latest_version_per_page))
