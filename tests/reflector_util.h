/* Helpers of the reflector's tests on one reflector (home_util.h) and
 * on the simulated root cluster (root_util.h): a FLUSH list under
 * construction and the notice of a page in a message. */
#ifndef LM_TESTS_REFLECTOR_UTIL_H
#define LM_TESTS_REFLECTOR_UTIL_H

#include "unit.h"

#include <stdint.h>
#include <string.h>

#include "diff_util.h"
#include "proto.h"
#include "wire.h"

/* A diff list under construction. */
struct dlist {
	uint8_t buf[4096];
	size_t len;
	uint32_t count;
};

/* Appends one diff entry of a single run: `n` bytes at `off` of `page`. */
static inline void dl_add(struct dlist *d, uint32_t page, uint32_t off,
			  const void *bytes, uint32_t n)
{
	uint8_t diff[512];
	size_t hdr;

	CU_ASSERT_FATAL(n + 10 <= sizeof(diff));
	hdr = test_run_header(diff, off, n);
	memcpy(diff + hdr, bytes, n);
	CU_ASSERT_FATAL(lm_msg_diffs_append(d->buf, sizeof(d->buf), &d->len,
					    page, diff, hdr + n) == 0);
	d->count++;
}

/* The same with the bytes of a string. */
static inline void dl_text(struct dlist *d, uint32_t page, uint32_t off,
			   const char *text)
{
	dl_add(d, page, off, text, (uint32_t)strlen(text));
}

/* The notice for `page` in m, or NULL. */
static inline const struct lm_notice *msg_notice(const struct lm_msg *m,
						 uint32_t page)
{
	for (uint32_t i = 0; i < m->nnotices; i++)
		if (m->notices[i].page == page)
			return &m->notices[i];
	return NULL;
}

#endif
