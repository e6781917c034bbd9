/* The root cluster for the reflector's module tests: several reflector
 * state machines wired together by a simulated network that delivers
 * their messages to each other in FIFO order, with the clusters driven
 * by hand.  Header-only, like diff_util.h: each test file has its own
 * copy. */
#ifndef LM_TESTS_ROOT_UTIL_H
#define LM_TESTS_ROOT_UTIL_H

#include "unit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "diff_util.h"
#include "home.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "reflector_util.h"
#include "wire.h"

#define RUN 0x2000
#define QMAX 512
#define RMAX 4

enum how { SEND, REQUEST, REPLY };

/* A message in flight, deep-copied (the machines lend theirs). */
struct net_msg {
	uint16_t src, dst;
	enum how how;
	uint32_t req_id;
	struct lm_msg m;
	uint8_t *data, *diffs;
	struct lm_notice *notices;
};

static struct net {
	struct lm_layout *layout;
	lm_home *h[RMAX];
	uint16_t id[RMAX];  /* ctx of each machine: its node id */
	size_t nrefl;
	struct net_msg q[QMAX]; /* between reflectors, not yet delivered */
	size_t qhead, qn;
	struct net_msg down[QMAX]; /* to clusters */
	size_t ndown;
} net;

static inline void msg_copy(struct net_msg *d, uint16_t src, uint16_t dst,
			    enum how how, uint32_t req_id,
			    const struct lm_msg *m)
{
	memset(d, 0, sizeof(*d));
	d->src = src;
	d->dst = dst;
	d->how = how;
	d->req_id = req_id;
	d->m = *m;
	if (m->data_len) {
		d->data = malloc(m->data_len);
		memcpy(d->data, m->data, m->data_len);
	}
	if (m->diffs.len) {
		d->diffs = malloc(m->diffs.len);
		memcpy(d->diffs, m->diffs.data, m->diffs.len);
	}
	if (m->nnotices) {
		d->notices = malloc(m->nnotices * sizeof(*m->notices));
		memcpy(d->notices, m->notices,
		       m->nnotices * sizeof(*m->notices));
	}
	d->m.data = d->data;
	d->m.diffs.data = d->diffs;
	d->m.notices = d->notices;
}

static inline void msg_free(struct net_msg *d)
{
	free(d->data);
	free(d->diffs);
	free(d->notices);
	memset(d, 0, sizeof(*d));
}

static inline bool is_reflector(uint16_t node)
{
	return node >= 1 && node <= net.nrefl;
}

static inline void emit(void *ctx, uint16_t node, enum how how, uint32_t req_id,
			const struct lm_msg *m)
{
	uint16_t src = *(uint16_t *)ctx;

	if (is_reflector(node)) {
		CU_ASSERT_FATAL(net.qhead + net.qn < QMAX);
		msg_copy(&net.q[net.qhead + net.qn++], src, node, how, req_id,
			 m);
	} else {
		CU_ASSERT_FATAL(net.ndown < QMAX);
		msg_copy(&net.down[net.ndown++], src, node, how, req_id, m);
	}
}

static inline void cb_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	emit(ctx, node, SEND, 0, m);
}

static inline void cb_request(void *ctx, uint16_t node, uint32_t req_id,
			      const struct lm_msg *m)
{
	emit(ctx, node, REQUEST, req_id, m);
}

static inline void cb_reply(void *ctx, uint16_t node, uint32_t req_id,
			    const struct lm_msg *m)
{
	emit(ctx, node, REPLY, req_id, m);
}

static const struct lm_msg_out out_cbs = { cb_send, cb_request, cb_reply,
					   NULL };

static const enum lm_rel_msg_kind kind_of[] = {
	[SEND] = LM_REL_ONEWAY, [REQUEST] = LM_REL_REQUEST,
	[REPLY] = LM_REL_REPLY,
};

/* Delivers messages between reflectors, in order, until none is left
 * (bounded: a loop would fill the queue and fail). */
static inline void pump(void)
{
	while (net.qn) {
		struct net_msg m = net.q[net.qhead];

		net.qhead++;
		net.qn--;
		lm_home_handle(net.h[m.dst - 1], m.src, kind_of[m.how],
			       m.req_id, &m.m);
		msg_free(&m);
		if (net.qn == 0)
			net.qhead = 0;
		if (net.qhead > QMAX / 2) {
			memmove(net.q, net.q + net.qhead,
				net.qn * sizeof(net.q[0]));
			net.qhead = 0;
		}
	}
}

static inline void down_clear(void)
{
	for (size_t i = 0; i < net.ndown; i++)
		msg_free(&net.down[i]);
	net.ndown = 0;
}

static inline void setup(const char *path)
{
	char err[256];

	memset(&net, 0, sizeof(net));
	lm_log_set_level(LM_LOG_ERROR); /* expected drops log warnings */
	CU_ASSERT_FATAL(lm_layout_load(path, &net.layout, err,
				       sizeof(err)) == 0);
	net.nrefl = net.layout->nreflectors;
	CU_ASSERT_FATAL(net.nrefl <= RMAX);
	for (size_t i = 0; i < net.nrefl; i++) {
		net.id[i] = net.layout->reflectors[i].id;
		CU_ASSERT_FATAL(net.id[i] == i + 1);
		net.h[i] = lm_home_create(net.layout, net.id[i], &out_cbs,
					  &net.id[i]);
		CU_ASSERT_FATAL(net.h[i] != NULL);
	}
}

static inline void teardown(void)
{
	pump();
	down_clear();
	for (size_t i = 0; i < net.nrefl; i++)
		lm_home_destroy(net.h[i]);
	lm_layout_free(net.layout);
	memset(&net, 0, sizeof(net));
}

/* conf/2x2-two-reflectors.ini: r0 = 1, r1 = 2; c0 = 3 (ranks 0-1) and
 * c2 = 5 (ranks 4-5) under r0, c1 = 4 (ranks 2-3) and c3 = 6 (ranks 6-7)
 * under r1.  Pages 0-7 are homed at r0, 8-15 at r1, 16-23 at r0 ... */
#define C0 3
#define C1 4
#define C2 5
#define C3 6

static inline lm_home *refl_of(uint16_t cluster)
{
	for (size_t i = 0; i < net.layout->nclusters; i++)
		if (net.layout->clusters[i].id == cluster)
			return net.h[net.layout->clusters[i].reflector_index];
	CU_FAIL_FATAL("not a cluster");
	return NULL;
}

static inline struct lm_msg msg(enum lm_msg_type type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (uint16_t)type;
	m.run = RUN;
	return m;
}

/* A cluster sends m to its reflector. */
static inline void from_cluster(uint16_t cluster, enum how how, uint32_t req_id,
				const struct lm_msg *m)
{
	lm_home_handle(refl_of(cluster), cluster, kind_of[how], req_id, m);
}

static inline void flush(uint16_t cluster, uint32_t rank, const struct dlist *d)
{
	struct lm_msg m = msg(LM_MSG_FLUSH);

	m.rank = rank;
	m.diffs.data = d->buf;
	m.diffs.len = d->len;
	m.diffs.count = d->count;
	from_cluster(cluster, SEND, 0, &m);
}

static inline void flush1(uint16_t cluster, uint32_t rank, uint32_t page,
			  uint32_t off, const char *text)
{
	struct dlist d = { .len = 0 };

	dl_text(&d, page, off, text);
	flush(cluster, rank, &d);
}

static inline void oneway(uint16_t cluster, enum lm_msg_type type, uint32_t id,
			  uint32_t rank)
{
	struct lm_msg m = msg(type);

	m.id = id;
	m.rank = rank;
	from_cluster(cluster, SEND, 0, &m);
}

/* The messages that reached `cluster`, of `type`: how many, and the last
 * one in *out. */
static inline size_t down_to(uint16_t cluster, enum lm_msg_type type,
			     const struct net_msg **out)
{
	size_t n = 0;

	for (size_t i = 0; i < net.ndown; i++) {
		if (net.down[i].dst != cluster || net.down[i].m.type != type)
			continue;
		n++;
		if (out)
			*out = &net.down[i];
	}
	return n;
}

static inline const struct lm_notice *notice_of(const struct net_msg *d,
						uint32_t page)
{
	return msg_notice(&d->m, page);
}

/* Page `page`'s master copy at its home. */
static inline const uint8_t *master(uint32_t page, uint32_t *version)
{
	const uint8_t *data = NULL;
	uint32_t home = lm_home_of_page(net.layout, page);

	CU_ASSERT_FATAL(lm_home_page(net.h[home], page, &data, version) == 0);
	return data;
}

static inline void barrier_all(uint32_t id)
{
	oneway(C0, LM_MSG_BARRIER, id, 0);
	oneway(C1, LM_MSG_BARRIER, id, 0);
	oneway(C2, LM_MSG_BARRIER, id, 0);
	oneway(C3, LM_MSG_BARRIER, id, 0);
	pump();
}

/* FETCH{page, need} from a cluster. */
static inline void fetch_from(uint16_t cluster, uint32_t req_id, uint32_t page,
			      uint32_t need)
{
	struct lm_msg m = msg(LM_MSG_FETCH);

	m.page = page;
	m.version = need;
	from_cluster(cluster, REQUEST, req_id, &m);
}

/* A REGISTER from `cluster` (layout index ci) with entries e and the
 * data in d, numbered req_id (its registration number, which the home
 * tags the pages with); returns the REGISTER_OK (after pumping). */
static inline const struct net_msg *reg(uint16_t cluster, uint32_t ci,
					struct lm_notice *e, uint32_t n,
					const struct dlist *d, uint32_t req_id)
{
	struct lm_msg m = msg(LM_MSG_REGISTER);
	const struct net_msg *r = NULL;

	m.id = req_id;
	for (uint32_t i = 0; i < n; i++)
		e[i].wcluster = ci;
	m.notices = e;
	m.nnotices = n;
	if (d) {
		m.diffs.data = d->buf;
		m.diffs.len = d->len;
		m.diffs.count = d->count;
	}
	down_clear();
	from_cluster(cluster, REQUEST, req_id, &m);
	pump();
	for (size_t i = 0; i < net.ndown; i++)
		if (net.down[i].dst == cluster &&
		    net.down[i].m.type == LM_MSG_REGISTER_OK &&
		    net.down[i].req_id == req_id)
			r = &net.down[i];
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	return r;
}

/* The PULL that reached `cluster`, or NULL. */
static inline const struct net_msg *pull_to(uint16_t cluster, uint32_t version)
{
	for (size_t i = 0; i < net.ndown; i++)
		if (net.down[i].dst == cluster && net.down[i].how == REQUEST &&
		    net.down[i].m.type == LM_MSG_PULL &&
		    net.down[i].m.version == version)
			return &net.down[i];
	return NULL;
}

/* The cluster answers a PULL with one diff of `text` at `off`. */
static inline void answer_pull(const struct net_msg *p, uint32_t off,
			       const char *text)
{
	struct lm_msg m = msg(LM_MSG_DELTA);
	struct dlist d = { .len = 0 };
	uint16_t cluster = p->dst;
	uint32_t req_id = p->req_id;

	dl_text(&d, p->m.page, off, text);
	m.page = p->m.page;
	m.version = p->m.version;
	m.diffs.data = d.buf;
	m.diffs.len = d.len;
	m.diffs.count = d.count;
	lm_home_handle(refl_of(cluster), cluster, LM_REL_REPLY, req_id, &m);
	pump();
}

/* PULLs of `page` that reached `cluster`: their count, the last in
 * *last. */
static inline int pulls_of_page(uint16_t cluster, uint32_t page,
				const struct net_msg **last)
{
	int n = 0;

	for (size_t i = 0; i < net.ndown; i++)
		if (net.down[i].dst == cluster && net.down[i].how == REQUEST &&
		    net.down[i].m.type == LM_MSG_PULL &&
		    net.down[i].m.page == page) {
			n++;
			if (last)
				*last = &net.down[i];
		}
	return n;
}

static inline int pulls_of(uint16_t cluster, uint32_t page)
{
	return pulls_of_page(cluster, page, NULL);
}

#endif
