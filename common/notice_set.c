/* A set of write notices, one per page (notice_set.h). */
#include "notice_set.h"

#include <stdlib.h>

#include "lm_error.h"

int lm_notice_set_init(struct lm_notice_set *s, uint32_t npages)
{
	s->n = 0;
	s->npages = npages;
	s->v = calloc(npages ? npages : 1, sizeof(*s->v));
	s->at = calloc(npages ? npages : 1, sizeof(*s->at));
	if (!s->v || !s->at) {
		lm_notice_set_free(s);
		return LM_ENOMEM;
	}
	return 0;
}

void lm_notice_set_free(struct lm_notice_set *s)
{
	free(s->v);
	free(s->at);
	s->v = NULL;
	s->at = NULL;
	s->n = 0;
	s->npages = 0;
}

void lm_notice_set_put(struct lm_notice_set *s, const struct lm_notice *n)
{
	uint32_t at;

	if (n->page >= s->npages)
		return;
	at = s->at[n->page];
	if (!at) {
		s->v[s->n] = *n;
		s->at[n->page] = ++s->n;
	} else if (n->version > s->v[at - 1].version) {
		s->v[at - 1] = *n;
	}
}

void lm_notice_set_add(struct lm_notice_set *s, const struct lm_notice *v,
		       uint32_t count)
{
	for (uint32_t i = 0; v && i < count; i++)
		lm_notice_set_put(s, &v[i]);
}

void lm_notice_set_clear(struct lm_notice_set *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		s->at[s->v[i].page] = 0;
	s->n = 0;
}
