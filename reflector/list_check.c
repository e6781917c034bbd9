/* FLUSH and REGISTER lists checked whole before any part of them is
 * used, by the splitting of our clusters' lists and by the page homes:
 * all or nothing (docs/dsm.md, "Several reflectors").  Calls route.c
 * only. */
#include "reflector_int.h"

#include <stdbool.h>

#include "diff.h"
#include "lm_error.h"

/* Checks a whole diff list (and, for a home, that every page is ours);
 * returns the number of entries or a negative count - 1 of entries seen
 * before the first bad one. */
long lm_list_check_flush(const lm_home *h, const struct lm_msg_diffs *d,
			 bool as_home)
{
	size_t pos = 0;
	long n = 0;
	uint32_t page;
	const uint8_t *diff;
	size_t len;
	int r;

	while ((r = lm_msg_diffs_next(d, &pos, &page, &diff, &len)) == 1) {
		if (page >= h->npages ||
		    (as_home &&
		     lm_home_of_page(h->layout, page) != h->self_index) ||
		    lm_diff_validate(diff, len, h->page_size) < 0)
			return -(n + 1);
		n++;
	}
	if (r < 0)
		return -(n + 1);
	return n;
}

/* Walks a REGISTER's entries with their data: checks everything
 * (as_home: that every page is ours; ci: the registering cluster) and
 * returns 0 or LM_EBADMSG. */
int lm_list_check_register(const lm_home *h, const struct lm_msg *m,
			   uint32_t ci, bool as_home)
{
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t page;

	for (uint32_t i = 0; i < m->nnotices; i++) {
		const struct lm_notice *e = &m->notices[i];
		const struct lm_cluster_cfg *wc;

		if (e->page >= h->npages || e->base >= LM_REG_KINDS ||
		    e->wcluster != ci ||
		    (as_home &&
		     lm_home_of_page(h->layout, e->page) != h->self_index))
			return LM_EBADMSG;
		if (e->writer != LM_WRITER_MANY) {
			wc = lm_layout_cluster_of_rank(h->layout, e->writer);
			if (!wc || wc != &h->layout->clusters[ci])
				return LM_EBADMSG;
		}
		if (!lm_reg_has_data(e->base))
			continue;
		if (lm_msg_diffs_next(&m->diffs, &pos, &page, &diff,
				      &len) != 1 || page != e->page ||
		    lm_diff_validate(diff, len, h->page_size) < 0)
			return LM_EBADMSG;
	}
	return lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) == 0 ?
	       0 : LM_EBADMSG;
}
