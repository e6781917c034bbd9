/* A set of write notices, one per page, the latest version kept: what a
 * daemon learned in the current epoch, to pass on with its releases
 * (docs/dsm.md, "Notices along chains").  Sized for the whole region
 * when made, so that adding never allocates and never fails. */
#ifndef LM_NOTICE_SET_H
#define LM_NOTICE_SET_H

#include <stdint.h>

#include "proto.h"

struct lm_notice_set {
	struct lm_notice *v; /* n entries, in the order pages came */
	uint32_t n;
	uint32_t npages;
	uint32_t *at;        /* per page: index + 1 in v, 0 when absent */
};

/* 0, or LM_ENOMEM with the set empty (and safe to free). */
int lm_notice_set_init(struct lm_notice_set *s, uint32_t npages);
void lm_notice_set_free(struct lm_notice_set *s);

/* Keeps n unless the set holds a newer notice of its page; notices of
 * pages outside the region are ignored. */
void lm_notice_set_put(struct lm_notice_set *s, const struct lm_notice *n);
void lm_notice_set_add(struct lm_notice_set *s, const struct lm_notice *v,
		       uint32_t count);
void lm_notice_set_clear(struct lm_notice_set *s);

#endif
