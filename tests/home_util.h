/* One reflector (conf/4+4.ini) driven by hand for the reflector's module
 * tests: every message it emits is captured (deep-copied) and inspected.
 * Header-only, like diff_util.h: each test file has its own copy. */
#ifndef LM_TESTS_HOME_UTIL_H
#define LM_TESTS_HOME_UTIL_H

#include "unit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "diff.h"
#include "diff_util.h"
#include "home.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "reflector_util.h"
#include "wire.h"

#define CAP_MAX 32

enum how { HOW_SEND, HOW_REQUEST, HOW_REPLY };

struct captured {
	enum how how;
	uint16_t node;
	uint32_t req_id;
	struct lm_msg m;         /* pointers below replace m's borrowed ones */
	struct lm_notice *notices;
	uint8_t *data;
	uint8_t *diffs;
};

static struct capture {
	size_t n;
	struct captured v[CAP_MAX];
} cap;

static inline void cap_clear(void)
{
	for (size_t i = 0; i < cap.n; i++) {
		free(cap.v[i].notices);
		free(cap.v[i].data);
		free(cap.v[i].diffs);
	}
	memset(&cap, 0, sizeof(cap));
}

static inline void cap_add(enum how how, uint16_t node, uint32_t req_id,
			   const struct lm_msg *m)
{
	struct captured *c;

	CU_ASSERT_FATAL(cap.n < CAP_MAX);
	c = &cap.v[cap.n++];
	c->how = how;
	c->node = node;
	c->req_id = req_id;
	c->m = *m;
	if (m->nnotices) {
		c->notices = malloc(m->nnotices * sizeof(*m->notices));
		memcpy(c->notices, m->notices,
		       m->nnotices * sizeof(*m->notices));
	}
	if (m->data_len) {
		c->data = malloc(m->data_len);
		memcpy(c->data, m->data, m->data_len);
	}
	if (m->diffs.len) {
		c->diffs = malloc(m->diffs.len);
		memcpy(c->diffs, m->diffs.data, m->diffs.len);
	}
	c->m.notices = c->notices;
	c->m.data = c->data;
	c->m.diffs.data = c->diffs;
}

static inline void cb_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	CU_ASSERT_PTR_EQUAL(ctx, &cap);
	cap_add(HOW_SEND, node, 0, m);
}

static inline void cb_request(void *ctx, uint16_t node, uint32_t req_id,
			      const struct lm_msg *m)
{
	CU_ASSERT_PTR_EQUAL(ctx, &cap);
	cap_add(HOW_REQUEST, node, req_id, m);
}

static inline void cb_reply(void *ctx, uint16_t node, uint32_t req_id,
			    const struct lm_msg *m)
{
	CU_ASSERT_PTR_EQUAL(ctx, &cap);
	cap_add(HOW_REPLY, node, req_id, m);
}

static const struct lm_msg_out out_cbs = { cb_send, cb_request, cb_reply,
					   NULL };

/* conf/4+4.ini: reflector r0 = node 1, c0 = node 2 (ranks 0..3), c1 =
 * node 3 (ranks 4..7); 64 MiB of 4 KiB pages. */
#define R0 1
#define C0 2
#define C1 3
#define RUN 0x1000
#define PAGE 4096u
#define NPAGES (64u * 1024 * 1024 / PAGE)

static struct lm_layout *layout;

static inline lm_home *setup(const char *path)
{
	char err[256];
	lm_home *h;

	cap_clear();
	layout = NULL;
	lm_log_set_level(LM_LOG_ERROR); /* expected drops log warnings */
	CU_ASSERT_FATAL(lm_layout_load(path, &layout, err, sizeof(err)) ==
			0);
	h = lm_home_create(layout, R0, &out_cbs, &cap);
	CU_ASSERT_FATAL(h != NULL);
	return h;
}

static inline void teardown(lm_home *h)
{
	lm_home_destroy(h);
	lm_layout_free(layout);
	layout = NULL;
	cap_clear();
}

static inline struct lm_msg msg(enum lm_msg_type type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (uint16_t)type;
	m.run = RUN;
	return m;
}

/* Sends FETCH and returns the captured PAGE reply. */
static inline const struct captured *fetch(lm_home *h, uint16_t from,
					   uint32_t req, uint32_t page)
{
	struct lm_msg m = msg(LM_MSG_FETCH);

	cap_clear();
	m.page = page;
	lm_home_handle(h, from, LM_REL_REQUEST, req, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY);
	CU_ASSERT(cap.v[0].node == from);
	CU_ASSERT(cap.v[0].req_id == req);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_PAGE);
	CU_ASSERT(cap.v[0].m.page == page);
	return &cap.v[0];
}

/* FLUSH of rank `rank` from node `from`. */
static inline void flush_list_as(lm_home *h, uint16_t from, uint32_t rank,
				 const struct dlist *d)
{
	struct lm_msg m = msg(LM_MSG_FLUSH);

	m.rank = rank;
	m.diffs.data = d->buf;
	m.diffs.len = d->len;
	m.diffs.count = d->count;
	lm_home_handle(h, from, LM_REL_ONEWAY, 0, &m);
}

/* The first rank of the cluster at node `from` (0 when it is none). */
static inline uint32_t first_rank_of(uint16_t from)
{
	for (size_t i = 0; i < layout->nclusters; i++)
		if (layout->clusters[i].id == from)
			return layout->clusters[i].first_rank;
	return 0;
}

static inline void flush_list(lm_home *h, uint16_t from, const struct dlist *d)
{
	flush_list_as(h, from, first_rank_of(from), d);
}

static inline void flush1_as(lm_home *h, uint16_t from, uint32_t rank,
			     uint32_t page, uint32_t off, const char *text)
{
	struct dlist d = { .len = 0 };

	dl_add(&d, page, off, text, (uint32_t)strlen(text));
	flush_list_as(h, from, rank, &d);
}

static inline void flush1(lm_home *h, uint16_t from, uint32_t page,
			  uint32_t off, const char *text)
{
	flush1_as(h, from, first_rank_of(from), page, off, text);
}

static inline void oneway(lm_home *h, uint16_t from, enum lm_msg_type type,
			  uint32_t id, uint32_t rank)
{
	struct lm_msg m = msg(type);

	m.id = id;
	m.rank = rank;
	lm_home_handle(h, from, LM_REL_ONEWAY, 0, &m);
}

static inline void lock(lm_home *h, uint16_t from, uint32_t req, uint32_t id,
			uint32_t rank)
{
	struct lm_msg m = msg(LM_MSG_LOCK);

	m.id = id;
	m.rank = rank;
	lm_home_handle(h, from, LM_REL_REQUEST, req, &m);
}

/* Sends ALLOC; returns ALLOC_OK's status, offset in *off. */
static inline int alloc(lm_home *h, uint64_t size, uint64_t align,
			uint32_t kind, uint64_t *off)
{
	struct lm_msg m = msg(LM_MSG_ALLOC);

	cap_clear();
	m.size = size;
	m.align = align;
	m.id = kind;
	lm_home_handle(h, C0, LM_REL_REQUEST, 77, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].node == C0 &&
		  cap.v[0].req_id == 77);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_ALLOC_OK);
	CU_ASSERT(cap.v[0].m.run == RUN);
	*off = cap.v[0].m.offset;
	return cap.v[0].m.status;
}

static inline int free_off(lm_home *h, uint64_t off)
{
	struct lm_msg m = msg(LM_MSG_FREE);

	cap_clear();
	m.offset = off;
	lm_home_handle(h, C0, LM_REL_REQUEST, 78, &m);
	CU_ASSERT_FATAL(cap.n == 1);
	CU_ASSERT(cap.v[0].how == HOW_REPLY && cap.v[0].node == C0 &&
		  cap.v[0].req_id == 78);
	CU_ASSERT(cap.v[0].m.type == LM_MSG_FREE_OK);
	return cap.v[0].m.status;
}

static inline bool has_notice(const struct captured *c, uint32_t page,
			      uint32_t version)
{
	for (uint32_t i = 0; i < c->m.nnotices; i++)
		if (c->m.notices[i].page == page &&
		    c->m.notices[i].version == version)
			return true;
	return false;
}

/* The notice for `page` in a captured message, or NULL. */
static inline const struct lm_notice *notice_of(const struct captured *c,
						uint32_t page)
{
	return msg_notice(&c->m, page);
}

/* Completes barrier `id` on conf/4+4.ini; returns the RELEASE to C0. */
static inline const struct captured *barrier_44(lm_home *h, uint32_t id)
{
	cap_clear();
	oneway(h, C0, LM_MSG_BARRIER, id, 0);
	oneway(h, C1, LM_MSG_BARRIER, id, 0);
	CU_ASSERT_FATAL(cap.n == 2);
	CU_ASSERT_FATAL(cap.v[0].m.type == LM_MSG_RELEASE);
	return cap.v[0].node == C0 ? &cap.v[0] : &cap.v[1];
}

/* 64 MiB region less the runtime's last page (4 KiB pages). */
#define ARENA ((64ull << 20) - 4096)

#endif
