/* The root cluster: several reflector state machines (reflector/dispatch.c)
 * wired together by a simulated network that delivers their messages to
 * each other in FIFO order, with the clusters driven by hand.  Checks
 * placement, routing to homes and managers, the four barrier steps, lock
 * notices across reflectors, I2 (synchronisation held for flush acks),
 * CREATE/END/ABORT routing and bad input between reflectors. */
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

static void msg_copy(struct net_msg *d, uint16_t src, uint16_t dst,
		     enum how how, uint32_t req_id, const struct lm_msg *m)
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

static void msg_free(struct net_msg *d)
{
	free(d->data);
	free(d->diffs);
	free(d->notices);
	memset(d, 0, sizeof(*d));
}

static bool is_reflector(uint16_t node)
{
	return node >= 1 && node <= net.nrefl;
}

static void emit(void *ctx, uint16_t node, enum how how, uint32_t req_id,
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

static void cb_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	emit(ctx, node, SEND, 0, m);
}

static void cb_request(void *ctx, uint16_t node, uint32_t req_id,
		       const struct lm_msg *m)
{
	emit(ctx, node, REQUEST, req_id, m);
}

static void cb_reply(void *ctx, uint16_t node, uint32_t req_id,
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
static void pump(void)
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

static void down_clear(void)
{
	for (size_t i = 0; i < net.ndown; i++)
		msg_free(&net.down[i]);
	net.ndown = 0;
}

static void setup(const char *path)
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

static void teardown(void)
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

static lm_home *refl_of(uint16_t cluster)
{
	for (size_t i = 0; i < net.layout->nclusters; i++)
		if (net.layout->clusters[i].id == cluster)
			return net.h[net.layout->clusters[i].reflector_index];
	CU_FAIL_FATAL("not a cluster");
	return NULL;
}

static struct lm_msg msg(enum lm_msg_type type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = (uint16_t)type;
	m.run = RUN;
	return m;
}

/* A cluster sends m to its reflector. */
static void from_cluster(uint16_t cluster, enum how how, uint32_t req_id,
			 const struct lm_msg *m)
{
	lm_home_handle(refl_of(cluster), cluster, kind_of[how], req_id, m);
}

struct dlist {
	uint8_t buf[4096];
	size_t len;
	uint32_t count;
};

static void dl_add(struct dlist *d, uint32_t page, uint32_t off,
		   const char *text)
{
	uint8_t diff[256];
	uint32_t n = (uint32_t)strlen(text);
	size_t hdr = test_run_header(diff, off, n);

	memcpy(diff + hdr, text, n);
	CU_ASSERT_FATAL(lm_msg_diffs_append(d->buf, sizeof(d->buf), &d->len,
					    page, diff, hdr + n) == 0);
	d->count++;
}

static void flush(uint16_t cluster, uint32_t rank, const struct dlist *d)
{
	struct lm_msg m = msg(LM_MSG_FLUSH);

	m.rank = rank;
	m.diffs.data = d->buf;
	m.diffs.len = d->len;
	m.diffs.count = d->count;
	from_cluster(cluster, SEND, 0, &m);
}

static void flush1(uint16_t cluster, uint32_t rank, uint32_t page,
		   uint32_t off, const char *text)
{
	struct dlist d = { .len = 0 };

	dl_add(&d, page, off, text);
	flush(cluster, rank, &d);
}

static void oneway(uint16_t cluster, enum lm_msg_type type, uint32_t id,
		   uint32_t rank)
{
	struct lm_msg m = msg(type);

	m.id = id;
	m.rank = rank;
	from_cluster(cluster, SEND, 0, &m);
}

/* The messages that reached `cluster`, of `type`: how many, and the last
 * one in *out. */
static size_t down_to(uint16_t cluster, enum lm_msg_type type,
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

static const struct lm_notice *notice_of(const struct net_msg *d,
					 uint32_t page)
{
	for (uint32_t i = 0; i < d->m.nnotices; i++)
		if (d->m.notices[i].page == page)
			return &d->m.notices[i];
	return NULL;
}

/* Page `page`'s master copy at its home. */
static const uint8_t *master(uint32_t page, uint32_t *version)
{
	const uint8_t *data = NULL;
	uint32_t home = lm_home_of_page(net.layout, page);

	CU_ASSERT_FATAL(lm_home_page(net.h[home], page, &data, version) == 0);
	return data;
}

static void barrier_all(uint32_t id)
{
	oneway(C0, LM_MSG_BARRIER, id, 0);
	oneway(C1, LM_MSG_BARRIER, id, 0);
	oneway(C2, LM_MSG_BARRIER, id, 0);
	oneway(C3, LM_MSG_BARRIER, id, 0);
	pump();
}

/* ---- tests ------------------------------------------------------------ */

static void test_placement(void)
{
	setup("conf/2x2-two-reflectors.ini");
	CU_ASSERT(lm_home_of_page(net.layout, 0) == 0);
	CU_ASSERT(lm_home_of_page(net.layout, LM_HOME_PAGE_BLOCK - 1) == 0);
	CU_ASSERT(lm_home_of_page(net.layout, LM_HOME_PAGE_BLOCK) == 1);
	CU_ASSERT(lm_home_of_page(net.layout, 2 * LM_HOME_PAGE_BLOCK) == 0);
	CU_ASSERT(lm_home_manager_of(net.layout, 1) == 1);
	CU_ASSERT(lm_home_manager_of(net.layout, 2) == 0);
	teardown();
}

/* A FETCH of a page homed at the other reflector goes there and back. */
static void test_fetch_routed_to_home(void)
{
	const struct net_msg *p = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);
	struct dlist d = { .len = 0 };

	setup("conf/2x2-two-reflectors.ini");
	dl_add(&d, 9, 4, "nine");
	flush(C1, 2, &d); /* page 9: home r1, the writer's own reflector */
	m.page = 9;
	from_cluster(C0, REQUEST, 41, &m);
	CU_ASSERT(net.ndown == 0); /* not answered before r1 does */
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->how == REPLY && p->req_id == 41);
	CU_ASSERT(p->m.page == 9 && p->m.version == 1);
	CU_ASSERT_FATAL(p->m.data_len == 4096);
	CU_ASSERT(memcmp(p->m.data + 4, "nine", 4) == 0);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_forwarded == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches == 1);
	teardown();
}

/* FETCH{page, need} from a cluster. */
static void fetch_from(uint16_t cluster, uint32_t req_id, uint32_t page,
		       uint32_t need)
{
	struct lm_msg m = msg(LM_MSG_FETCH);

	m.page = page;
	m.version = need;
	from_cluster(cluster, REQUEST, req_id, &m);
}

/* Fetches of one remote page by two clusters of r0 make one FETCH to
 * its home; the copy r0 keeps answers later FETCHes that need no newer
 * version, and a FETCH that needs a newer one goes to the home again. */
static void test_router_coalesces_and_caches_pages(void)
{
	const struct net_msg *p = NULL;

	setup("conf/2x2-two-reflectors.ini");
	flush1(C1, 2, 8, 0, "v1"); /* page 8: home r1, now at version 1 */
	fetch_from(C0, 11, 8, 0);
	fetch_from(C2, 12, 8, 1);
	CU_ASSERT_EQUAL(net.qn, 1); /* one FETCH to r1 */
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->req_id == 11 && p->m.version == 1);
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->req_id == 12 && p->m.version == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_forwarded == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_coalesced == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches == 1);
	down_clear();

	fetch_from(C0, 13, 8, 1); /* from r0's cache: no message */
	CU_ASSERT_EQUAL(net.qn, 0);
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->req_id == 13 && p->m.version == 1);
	CU_ASSERT(memcmp(p->m.data, "v1", 2) == 0);
	CU_ASSERT(lm_home_stats(net.h[0])->fetch_cache_hits == 1);
	down_clear();

	flush1(C3, 6, 8, 0, "v2");
	pump();
	fetch_from(C2, 14, 8, 2); /* needs what the cache lacks */
	pump();
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_PAGE, &p) == 1);
	CU_ASSERT(p->m.version == 2 && memcmp(p->m.data, "v2", 2) == 0);
	CU_ASSERT(lm_home_stats(net.h[0])->fetches_forwarded == 2);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches == 2);
	teardown();
}

/* One list over pages of both homes is split; the barrier's RELEASE, sent
 * by barrier 1's manager (r1) through both reflectors, names every page
 * written in the epoch, also false sharing of a page by two clusters. */
static void test_flush_split_and_barrier_notices(void)
{
	const struct net_msg *r = NULL;
	const struct lm_notice *n;
	struct dlist d = { .len = 0 };
	uint32_t v;

	setup("conf/2x2-two-reflectors.ini");
	dl_add(&d, 0, 0, "zero");
	dl_add(&d, 8, 0, "eight");
	flush(C0, 0, &d);
	flush1(C1, 2, 8, 100, "other"); /* same page, other bytes */
	flush1(C2, 4, 16, 0, "sixteen");
	oneway(C0, LM_MSG_BARRIER, 1, 0);
	oneway(C1, LM_MSG_BARRIER, 1, 0);
	oneway(C2, LM_MSG_BARRIER, 1, 0);
	pump();
	CU_ASSERT(net.ndown == 0); /* c3 has not arrived */
	oneway(C3, LM_MSG_BARRIER, 1, 0);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT(down_to(C1, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT(down_to(C2, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_RELEASE, &r) == 1);
	CU_ASSERT(r->m.id == 1 && r->m.nnotices == 3);
	n = notice_of(r, 0);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->base == 0 && n->writer == 0 &&
		  n->wcluster == 0);
	n = notice_of(r, 8);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 2 && n->base == 0 &&
		  n->writer == LM_WRITER_MANY && n->wcluster == LM_WRITER_MANY);
	n = notice_of(r, 16);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->writer == 4 && n->wcluster == 2);
	CU_ASSERT(memcmp(master(8, &v), "eight", 5) == 0);
	CU_ASSERT(memcmp(master(8, &v) + 100, "other", 5) == 0 && v == 2);
	CU_ASSERT(memcmp(master(0, &v), "zero", 4) == 0 && v == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->barriers == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->barriers == 0);
	/* the next epoch starts empty, with a new base */
	down_clear();
	flush1(C3, 6, 8, 200, "late");
	barrier_all(2);
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_RELEASE, &r) == 1);
	CU_ASSERT(r->m.nnotices == 1);
	n = notice_of(r, 8);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 3 && n->base == 2 && n->writer == 6);
	teardown();
}

/* I2: a reflector's barrier arrival waits until the other home has acked
 * the diffs its clusters sent before it. */
static void test_arrival_held_until_flush_acked(void)
{
	setup("conf/2x2-two-reflectors.ini");
	flush1(C0, 1, 8, 0, "x"); /* home r1: a FLUSH request r0 -> r1 */
	oneway(C0, LM_MSG_BARRIER, 2, 0);
	oneway(C2, LM_MSG_BARRIER, 2, 0);
	/* barrier 2 is managed by r0 itself: nothing may have gone to it,
	 * so the only message in flight is the FLUSH */
	CU_ASSERT_FATAL(net.qn == 1);
	CU_ASSERT(net.q[net.qhead].m.type == LM_MSG_FLUSH);
	CU_ASSERT(lm_home_stats(net.h[0])->held == 1);
	oneway(C1, LM_MSG_BARRIER, 2, 0);
	oneway(C3, LM_MSG_BARRIER, 2, 0);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_RELEASE, NULL) == 1);
	CU_ASSERT(down_to(C3, LM_MSG_RELEASE, NULL) == 1);
	teardown();
}

/* A lock managed by r1, handed from a client of r0 to one of r1: the
 * GRANT names what the first holder wrote under it. */
static void test_lock_across_reflectors_carries_notices(void)
{
	const struct net_msg *g = NULL;
	const struct lm_notice *n;
	struct lm_msg m = msg(LM_MSG_LOCK);

	setup("conf/2x2-two-reflectors.ini");
	m.id = 1;
	m.rank = 0;
	from_cluster(C0, REQUEST, 5, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_GRANT, &g) == 1);
	CU_ASSERT(g->req_id == 5 && g->m.nnotices == 0);
	m.rank = 6;
	from_cluster(C3, REQUEST, 6, &m);
	pump();
	CU_ASSERT(down_to(C3, LM_MSG_GRANT, NULL) == 0); /* waits */
	flush1(C0, 0, 16, 0, "mine"); /* home r0 */
	flush1(C0, 0, 24, 0, "also"); /* home r1 */
	oneway(C0, LM_MSG_UNLOCK, 1, 0);
	pump();
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_GRANT, &g) == 1);
	CU_ASSERT(g->req_id == 6);
	n = notice_of(g, 16);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->writer == 0);
	n = notice_of(g, 24);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT(n->version == 1 && n->writer == 0);
	teardown();
}

/* A chain of locks across reflectors: c0 (under r0) writes page 24
 * under lock 1; c1 (under r1) takes lock 1, then releases lock 2; c3
 * (under r1 too) and c2 (under r0), taking lock 2 after it, must learn
 * of page 24 although neither r1's clusters nor lock 2's releases
 * wrote it: r1 passes on what its clusters were sent (dsmtest chain). */
static void test_lock_chain_passes_notices_on(void)
{
	const struct net_msg *g = NULL;
	struct lm_msg m = msg(LM_MSG_LOCK);

	setup("conf/2x2-two-reflectors.ini");
	m.id = 1; /* managed by r1 */
	m.rank = 0;
	from_cluster(C0, REQUEST, 5, &m);
	pump();
	flush1(C0, 0, 24, 0, "data"); /* home r1 */
	oneway(C0, LM_MSG_UNLOCK, 1, 0);
	pump();
	m.rank = 2;
	from_cluster(C1, REQUEST, 6, &m); /* c1 takes lock 1 ... */
	m.id = 2; /* managed by r0 */
	from_cluster(C1, REQUEST, 7, &m); /* ... and lock 2 */
	pump();
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_GRANT, &g) == 2);
	oneway(C1, LM_MSG_UNLOCK, 2, 2);
	pump();
	m.rank = 4;
	from_cluster(C2, REQUEST, 8, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_GRANT, &g) == 1);
	CU_ASSERT(notice_of(g, 24) != NULL);
	teardown();
}

/* What rank 0 wrote before CREATE reaches the worker's cluster as
 * notices, under its own reflector (whose cache may hold an old copy)
 * and under the other one. */
static void test_create_carries_what_rank0_wrote(void)
{
	const struct net_msg *d = NULL;
	struct lm_msg m;

	setup("conf/2x2-two-reflectors.ini");
	flush1(C0, 0, 8, 0, "init"); /* home r1 */
	flush1(C0, 0, 3, 0, "init"); /* home r0 */
	for (uint32_t rank = 4; rank <= 6; rank += 2) { /* c2, c3 */
		m = msg(LM_MSG_CREATE);
		m.rank = rank;
		m.offset = 0x40;
		from_cluster(C0, SEND, 0, &m);
	}
	pump();
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_CREATE, &d) == 1);
	CU_ASSERT(notice_of(d, 8) != NULL && notice_of(d, 3) != NULL);
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_CREATE, &d) == 1);
	CU_ASSERT(notice_of(d, 8) != NULL && notice_of(d, 3) != NULL);
	teardown();
}

/* The token of a lock managed by r1 and held in c0 (under r0) is
 * recalled through r0 when a client of c3 asks for it. */
static void test_recall_routed_to_holder_cluster(void)
{
	const struct net_msg *r = NULL;
	struct lm_msg m = msg(LM_MSG_LOCK);

	setup("conf/2x2-two-reflectors.ini");
	m.id = 3; /* managed by r1 */
	m.rank = 1;
	from_cluster(C0, REQUEST, 5, &m);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_GRANT, NULL) == 1);
	m.rank = 7;
	from_cluster(C3, REQUEST, 6, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_RECALL, &r) == 1);
	CU_ASSERT(r->m.id == 3 && r->m.rank == 1 && r->src == 1);
	CU_ASSERT(down_to(C3, LM_MSG_RECALL, NULL) == 0);
	oneway(C0, LM_MSG_UNLOCK, 3, 1);
	pump();
	CU_ASSERT(down_to(C3, LM_MSG_GRANT, NULL) == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->lock_recalls == 1);
	teardown();
}

/* The allocator is the first reflector, whoever asks. */
static void test_alloc_at_first_reflector(void)
{
	const struct net_msg *a = NULL, *b = NULL;
	struct lm_msg m = msg(LM_MSG_ALLOC);

	setup("conf/2x2-two-reflectors.ini");
	m.size = 100;
	from_cluster(C1, REQUEST, 9, &m);
	from_cluster(C0, REQUEST, 10, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_ALLOC_OK, &a) == 1);
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_ALLOC_OK, &b) == 1);
	CU_ASSERT(a->req_id == 9 && a->m.status == 0);
	CU_ASSERT(b->req_id == 10 && b->m.status == 0);
	CU_ASSERT(a->m.offset != b->m.offset);
	CU_ASSERT(lm_home_stats(net.h[0])->allocs == 2);
	CU_ASSERT(lm_home_stats(net.h[1])->allocs == 0);
	teardown();
}

/* CREATE reaches the worker's cluster under the other reflector; its END
 * comes back to rank 0's cluster with the notices of what it wrote. */
static void test_create_and_end_across_reflectors(void)
{
	const struct net_msg *d = NULL;
	struct lm_msg m = msg(LM_MSG_CREATE);
	static const uint8_t image[] = "image";

	setup("conf/2x2-two-reflectors.ini");
	m.rank = 7;
	m.offset = 0x40;
	m.data = image;
	m.data_len = sizeof(image);
	from_cluster(C0, SEND, 0, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C3, LM_MSG_CREATE, &d) == 1);
	CU_ASSERT(d->m.rank == 7 && d->m.offset == 0x40);
	CU_ASSERT(d->m.data_len == sizeof(image) &&
		  memcmp(d->m.data, image, sizeof(image)) == 0);
	flush1(C3, 7, 3, 0, "work"); /* home r0 */
	m = msg(LM_MSG_END);
	m.rank = 7;
	from_cluster(C3, SEND, 0, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_END, &d) == 1);
	CU_ASSERT(d->m.rank == 7);
	CU_ASSERT(notice_of(d, 3) != NULL);
	teardown();
}

static void test_abort_reaches_every_cluster(void)
{
	struct lm_msg m = msg(LM_MSG_ABORT);

	setup("conf/2x2-two-reflectors.ini");
	m.rank = 3;
	m.data = (const uint8_t *)"gone";
	m.data_len = 4;
	from_cluster(C1, SEND, 0, &m);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C2, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C3, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C1, LM_MSG_ABORT, NULL) == 0);
	teardown();
}

/* A lost lemuriad is reported to every other cluster, through the other
 * reflector too; a lost reflector to the clusters of the one that saw it
 * go.  Before any run nothing is sent. */
static void test_peer_lost_aborts_the_run(void)
{
	const struct net_msg *a = NULL;

	setup("conf/2x2-two-reflectors.ini");
	lm_home_peer_lost(net.h[0], C0);
	CU_ASSERT_EQUAL(net.qn + net.ndown, 0);
	oneway(C0, LM_MSG_BARRIER, 1, 0); /* the run begins */
	lm_home_peer_lost(net.h[0], C0);
	pump();
	CU_ASSERT(down_to(C0, LM_MSG_ABORT, NULL) == 0);
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_ABORT, &a) == 1);
	CU_ASSERT(a->m.data_len == strlen("lemuriad c0 lost") &&
		  memcmp(a->m.data, "lemuriad c0 lost", a->m.data_len) == 0);
	CU_ASSERT(down_to(C1, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C3, LM_MSG_ABORT, NULL) == 1);
	down_clear();
	lm_home_peer_lost(net.h[0], 2); /* r1 */
	pump();
	CU_ASSERT_FATAL(down_to(C0, LM_MSG_ABORT, &a) == 1);
	CU_ASSERT(a->m.data_len == strlen("reflector r1 lost") &&
		  memcmp(a->m.data, "reflector r1 lost", a->m.data_len) == 0);
	CU_ASSERT(down_to(C2, LM_MSG_ABORT, NULL) == 1);
	CU_ASSERT(down_to(C1, LM_MSG_ABORT, NULL) == 0);
	teardown();
}

/* Between reflectors too, a writer or lock holder must be under the
 * sender, a RELEASE must come from the barrier's manager, a reply must
 * answer a request. */
static void test_bad_input_between_reflectors(void)
{
	struct dlist d = { .len = 0 };
	struct lm_msg m = msg(LM_MSG_FLUSH);
	uint32_t v = 9;

	setup("conf/2x2-two-reflectors.ini");
	dl_add(&d, 8, 0, "x");
	m.rank = 2; /* a rank of r1's cluster c1, claimed by r0 */
	m.diffs.data = d.buf;
	m.diffs.len = d.len;
	m.diffs.count = d.count;
	lm_home_handle(net.h[1], 1, LM_REL_REQUEST, 1, &m);
	CU_ASSERT(master(8, &v) == NULL && v == 0);
	m = msg(LM_MSG_RELEASE);
	m.id = 2; /* managed by r0: r1 may not release it */
	lm_home_handle(net.h[0], 2, LM_REL_ONEWAY, 0, &m);
	m = msg(LM_MSG_PAGE);
	lm_home_handle(net.h[0], 2, LM_REL_REPLY, 77, &m);
	m = msg(LM_MSG_FETCH);
	m.page = 0; /* homed at r0, asked of r1 */
	lm_home_handle(net.h[1], 1, LM_REL_REQUEST, 2, &m);
	CU_ASSERT(lm_home_stats(net.h[1])->dropped_bad == 2);
	CU_ASSERT(lm_home_stats(net.h[0])->dropped_bad == 2);
	CU_ASSERT(net.ndown == 0);
	pump(); /* the refused FETCH is answered with an empty PAGE */
	CU_ASSERT(lm_home_stats(net.h[0])->dropped_bad == 3);
	teardown();
}

/* Three reflectors (conf/3-reflectors.ini): every reflector's arrival is
 * needed, and the RELEASE reaches every cluster once. */
static void test_three_reflectors_barrier(void)
{
	const struct lm_layout *l;
	const struct net_msg *r = NULL;

	setup("conf/3-reflectors.ini");
	l = net.layout;
	CU_ASSERT_FATAL(l->nreflectors == 3);
	for (size_t i = 0; i < l->nclusters; i++) {
		struct dlist d = { .len = 0 };

		dl_add(&d, (uint32_t)(i * LM_HOME_PAGE_BLOCK), 0, "p");
		lm_home_handle(net.h[l->clusters[i].reflector_index],
			       l->clusters[i].id, LM_REL_ONEWAY, 0,
			       &(struct lm_msg){ .type = LM_MSG_FLUSH,
						 .run = RUN,
						 .rank = l->clusters[i].first_rank,
						 .diffs = { d.buf, d.len,
							    d.count } });
	}
	for (size_t i = 0; i < l->nclusters; i++) {
		CU_ASSERT(net.ndown == 0);
		lm_home_handle(net.h[l->clusters[i].reflector_index],
			       l->clusters[i].id, LM_REL_ONEWAY, 0,
			       &(struct lm_msg){ .type = LM_MSG_BARRIER,
						 .run = RUN, .id = 5 });
		pump();
	}
	for (size_t i = 0; i < l->nclusters; i++) {
		CU_ASSERT_FATAL(down_to(l->clusters[i].id, LM_MSG_RELEASE,
					&r) == 1);
		CU_ASSERT(r->m.nnotices == l->nclusters);
	}
	teardown();
}

/* ---- lazy relay -------------------------------------------------------- */

/* A REGISTER from `cluster` (layout index ci) with entries e and the
 * data in d; returns the REGISTER_OK (after pumping). */
static const struct net_msg *reg(uint16_t cluster, uint32_t ci,
				 struct lm_notice *e, uint32_t n,
				 const struct dlist *d, uint32_t req_id)
{
	struct lm_msg m = msg(LM_MSG_REGISTER);
	const struct net_msg *r = NULL;

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
static const struct net_msg *pull_to(uint16_t cluster, uint32_t version)
{
	for (size_t i = 0; i < net.ndown; i++)
		if (net.down[i].dst == cluster && net.down[i].how == REQUEST &&
		    net.down[i].m.type == LM_MSG_PULL &&
		    net.down[i].m.version == version)
			return &net.down[i];
	return NULL;
}

/* The cluster answers a PULL with one diff of `text` at `off`. */
static void answer_pull(const struct net_msg *p, uint32_t off,
			const char *text)
{
	struct lm_msg m = msg(LM_MSG_DELTA);
	struct dlist d = { .len = 0 };
	uint16_t cluster = p->dst;
	uint32_t req_id = p->req_id;

	dl_add(&d, p->m.page, off, text);
	m.page = p->m.page;
	m.version = p->m.version;
	m.diffs.data = d.buf;
	m.diffs.len = d.len;
	m.diffs.count = d.count;
	lm_home_handle(refl_of(cluster), cluster, LM_REL_REPLY, req_id, &m);
	pump();
}

/* Lazy relay end to end through two reflectors: a registration carries
 * no data; a FETCH from another cluster makes the home pull the delta
 * from the cluster that holds it, then the page is served with it. */
static void test_lazy_fetch_pulls_delta(void)
{
	struct lm_notice e[1] = { { .page = 8, .writer = 0 } };
	const struct net_msg *r, *p, *pg = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);

	setup("conf/2x2-two-reflectors.ini");
	r = reg(C0, 0, e, 1, NULL, 50);
	CU_ASSERT_EQUAL(r->m.status, 0);
	CU_ASSERT_FATAL(r->m.nnotices == 1);
	CU_ASSERT(r->m.notices[0].page == 8 && r->m.notices[0].version == 1 &&
		  r->m.notices[0].writer == 0 && r->m.notices[0].wcluster == 0);
	down_clear();
	m.page = 8;
	from_cluster(C1, REQUEST, 51, &m);
	pump();
	CU_ASSERT(down_to(C1, LM_MSG_PAGE, NULL) == 0); /* waits */
	p = pull_to(C0, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(p->m.page == 8 && p->m.id == 0);
	answer_pull(p, 0, "lazy");
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_PAGE, &pg) == 1);
	CU_ASSERT(pg->req_id == 51 && pg->m.version == 1);
	CU_ASSERT(memcmp(pg->m.data, "lazy", 4) == 0);
	CU_ASSERT(lm_home_stats(net.h[1])->pulls_sent == 1);
	CU_ASSERT(lm_home_stats(net.h[1])->fetches_waited == 1);
	teardown();
}

/* PULLs of `page` that reached `cluster`: their count, the last in
 * *last. */
static int pulls_of_page(uint16_t cluster, uint32_t page,
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

static int pulls_of(uint16_t cluster, uint32_t page)
{
	return pulls_of_page(cluster, page, NULL);
}

/* A FETCH that waits for a PULL has the home pull the unpulled deltas of
 * the `prefetch` pages after it too, from every cluster but the reader's;
 * the reader's next FETCH then finds its page settled.  Pages beyond the
 * window are left. */
static void test_fetch_pulls_the_next_pages_ahead(void)
{
	struct lm_notice e[6];
	const struct net_msg *pg = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);
	/* the last page just beyond the window: 24 or 40 with 15 or 31 */
	const uint32_t beyond = 8 + LM_CFG_PREFETCH_DEFAULT + 1;
	const uint32_t c0_pages[6] = { 8, 9, 10, 12, 15, beyond };
	uint64_t waited;

	/* 8-15, 24-31, 40-47 ... at r1, 16-23, 32-39 ... at r0 */
	setup("conf/2x2-two-reflectors.ini");
	CU_ASSERT_EQUAL_FATAL(net.layout->prefetch, LM_CFG_PREFETCH_DEFAULT);
	CU_ASSERT_EQUAL_FATAL(beyond / 8 % 2, 1); /* r1's */
	for (int i = 0; i < 6; i++)
		e[i] = (struct lm_notice){ .page = c0_pages[i], .writer = 0 };
	CU_ASSERT(reg(C0, 0, e, 5, NULL, 1)->m.nnotices == 5);
	CU_ASSERT(reg(C0, 0, e + 5, 1, NULL, 2)->m.nnotices == 1);
	e[0] = (struct lm_notice){ .page = 10, .writer = 2 };
	e[1] = (struct lm_notice){ .page = 11, .writer = 2 };
	CU_ASSERT(reg(C1, 1, e, 2, NULL, 3)->m.nnotices == 2);

	down_clear();
	m.page = 8;
	from_cluster(C1, REQUEST, 80, &m);
	pump();
	CU_ASSERT(down_to(C1, LM_MSG_PAGE, NULL) == 0); /* waits for 8 */
	CU_ASSERT_EQUAL(pulls_of(C0, 8), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 9), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 10), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 12), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, 15), 1);
	CU_ASSERT_EQUAL(pulls_of(C0, beyond), 0); /* beyond the window */
	CU_ASSERT_EQUAL(pulls_of(C1, 10), 0); /* the reader's own */
	CU_ASSERT_EQUAL(pulls_of(C1, 11), 0);
	CU_ASSERT_EQUAL(lm_home_stats(net.h[1])->pulls_ahead, 4);

	/* the data of 9 comes; C1's fault on it is served at once */
	CU_ASSERT_FATAL(pulls_of_page(C0, 9, &pg) == 1);
	answer_pull(pg, 0, "ahead");
	waited = lm_home_stats(net.h[1])->fetches_waited;
	down_clear();
	m.page = 9;
	from_cluster(C1, REQUEST, 81, &m);
	pump();
	CU_ASSERT_FATAL(down_to(C1, LM_MSG_PAGE, &pg) == 1);
	CU_ASSERT(pg->req_id == 81 && memcmp(pg->m.data, "ahead", 5) == 0);
	CU_ASSERT_EQUAL(lm_home_stats(net.h[1])->fetches_waited, waited);
	CU_ASSERT_EQUAL(pulls_of(C0, 9), 0); /* no second PULL */
	teardown();
}

/* I1 at the home: a cluster's next delta merges into the one it holds
 * only when nobody wrote the page in between; pulled deltas are applied
 * in version order whatever order their data arrives in. */
static void test_lazy_deltas_applied_in_version_order(void)
{
	struct lm_notice e[1];
	const struct net_msg *r, *pg = NULL;
	const struct net_msg *p2, *p3, *p4;
	struct lm_msg m = msg(LM_MSG_FETCH);
	uint32_t v;

	setup("conf/2x2-two-reflectors.ini");
	e[0] = (struct lm_notice){ .page = 8, .writer = 0 };
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 1)->m.notices[0].version == 1);
	e[0] = (struct lm_notice){ .page = 8, .version = 1, .writer = 1 };
	r = reg(C0, 0, e, 1, NULL, 2); /* holds 1: merged into 2 */
	CU_ASSERT(r->m.notices[0].version == 2);
	CU_ASSERT(r->m.notices[0].writer == LM_WRITER_MANY);
	CU_ASSERT(lm_home_stats(net.h[1])->regs_merged == 1);
	e[0] = (struct lm_notice){ .page = 8, .writer = 2 };
	CU_ASSERT(reg(C1, 1, e, 1, NULL, 3)->m.notices[0].version == 3);
	e[0] = (struct lm_notice){ .page = 8, .version = 2, .writer = 0 };
	r = reg(C0, 0, e, 1, NULL, 4); /* c1 wrote in between: apart */
	CU_ASSERT(r->m.notices[0].version == 4);
	CU_ASSERT(r->m.notices[0].wcluster == LM_WRITER_MANY);
	CU_ASSERT(lm_home_stats(net.h[1])->regs_merged == 1);

	down_clear();
	m.page = 8;
	from_cluster(C2, REQUEST, 60, &m);
	pump();
	p2 = pull_to(C0, 2);
	p3 = pull_to(C1, 3);
	p4 = pull_to(C0, 4);
	CU_ASSERT_FATAL(p2 && p3 && p4 && !pull_to(C0, 1));
	answer_pull(p4, 0, "C");
	answer_pull(p3, 0, "BB");
	CU_ASSERT(down_to(C2, LM_MSG_PAGE, NULL) == 0);
	CU_ASSERT(master(8, &v) == NULL); /* nothing applied out of order */
	answer_pull(p2, 0, "AAAA");
	CU_ASSERT_FATAL(down_to(C2, LM_MSG_PAGE, &pg) == 1);
	CU_ASSERT(pg->m.version == 4);
	CU_ASSERT(memcmp(pg->m.data, "CBAA", 4) == 0);
	teardown();
}

/* Data pushed (or sent eagerly) needs no PULL. */
static void test_pushed_and_eager_data_need_no_pull(void)
{
	struct lm_notice e[2];
	struct dlist d = { .len = 0 };
	const struct net_msg *pg = NULL;
	struct lm_msg m = msg(LM_MSG_FETCH);

	setup("conf/2x2-two-reflectors.ini");
	e[0] = (struct lm_notice){ .page = 16, .writer = 1 };
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 1)->m.notices[0].version == 1);
	e[0] = (struct lm_notice){ .page = 16, .version = 1,
				   .base = LM_REG_PUSH, .writer = 1 };
	e[1] = (struct lm_notice){ .page = 24, .base = LM_REG_DATA,
				   .writer = 1 };
	dl_add(&d, 16, 0, "pushed");
	dl_add(&d, 24, 0, "eager");
	CU_ASSERT(reg(C0, 0, e, 2, &d, 2)->m.nnotices == 1);
	CU_ASSERT(lm_home_stats(net.h[0])->pushes_received == 1);
	down_clear();
	m.page = 16;
	from_cluster(C3, REQUEST, 70, &m);
	m.page = 24;
	from_cluster(C3, REQUEST, 71, &m);
	pump();
	CU_ASSERT(!pull_to(C0, 1));
	CU_ASSERT_EQUAL_FATAL(down_to(C3, LM_MSG_PAGE, &pg), 2);
	for (size_t i = 0; i < net.ndown; i++) {
		pg = &net.down[i];
		CU_ASSERT_FATAL(pg->m.data_len == 4096);
		if (pg->req_id == 70) {
			CU_ASSERT(memcmp(pg->m.data, "pushed", 6) == 0);
		} else {
			CU_ASSERT(pg->req_id == 71 &&
				  memcmp(pg->m.data, "eager", 5) == 0);
		}
	}
	teardown();
}

/* A registration naming another cluster, or data that does not match
 * its entries, is refused whole. */
static void test_bad_registration_refused(void)
{
	struct lm_notice e[1] = { { .page = 8, .writer = 0 } };
	struct dlist d = { .len = 0 };
	uint32_t v = 7;

	setup("conf/2x2-two-reflectors.ini");
	CU_ASSERT(reg(C0, 1, e, 1, NULL, 1)->m.status == LM_EBADMSG);
	e[0] = (struct lm_notice){ .page = 8, .base = LM_REG_DATA,
				   .writer = 0 };
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 2)->m.status == LM_EBADMSG);
	dl_add(&d, 9, 0, "x"); /* data for another page */
	CU_ASSERT(reg(C0, 0, e, 1, &d, 3)->m.status == LM_EBADMSG);
	e[0] = (struct lm_notice){ .page = 8, .writer = 2 }; /* c1's rank */
	CU_ASSERT(reg(C0, 0, e, 1, NULL, 4)->m.status == LM_EBADMSG);
	CU_ASSERT(master(8, &v) == NULL && v == 0);
	teardown();
}

LM_TEST_SUITE("root",
	      LM_TEST(test_placement),
	      LM_TEST(test_fetch_routed_to_home),
	      LM_TEST(test_router_coalesces_and_caches_pages),
	      LM_TEST(test_flush_split_and_barrier_notices),
	      LM_TEST(test_arrival_held_until_flush_acked),
	      LM_TEST(test_lock_across_reflectors_carries_notices),
	LM_TEST(test_lock_chain_passes_notices_on),
	LM_TEST(test_create_carries_what_rank0_wrote),
	      LM_TEST(test_recall_routed_to_holder_cluster),
	      LM_TEST(test_alloc_at_first_reflector),
	      LM_TEST(test_create_and_end_across_reflectors),
	      LM_TEST(test_abort_reaches_every_cluster),
	      LM_TEST(test_bad_input_between_reflectors),
	      LM_TEST(test_peer_lost_aborts_the_run),
	      LM_TEST(test_three_reflectors_barrier),
	      LM_TEST(test_lazy_fetch_pulls_delta),
	      LM_TEST(test_fetch_pulls_the_next_pages_ahead),
	      LM_TEST(test_lazy_deltas_applied_in_version_order),
	      LM_TEST(test_pushed_and_eager_data_need_no_pull),
	      LM_TEST(test_bad_registration_refused))
