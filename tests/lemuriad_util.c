/* The harness of the lemuriad's unit tests (tests/lemuriad_util.h). */
#include "lemuriad_util.h"

#include <sys/mman.h>

#include "copy_set.h"

#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deltas.h"
#include "diff.h"
#include "diff_util.h"
#include "fdpass.h"
#include "lm_error.h"
#include "updates.h"

struct out outs[MAX_OUT];
size_t nouts;

void record(enum how how, uint16_t node, uint32_t req_id,
	    const struct lm_msg *m)
{
	struct out *o;

	CU_ASSERT_FATAL(nouts < MAX_OUT);
	o = &outs[nouts++];
	memset(o, 0, sizeof(*o));
	o->how = how;
	o->node = node;
	o->req_id = req_id;
	o->m = *m;
	if (m->data_len) {
		o->data = malloc(m->data_len);
		memcpy(o->data, m->data, m->data_len);
		o->m.data = o->data;
	}
	if (m->diffs.len) {
		o->diffs = malloc(m->diffs.len);
		memcpy(o->diffs, m->diffs.data, m->diffs.len);
		o->m.diffs.data = o->diffs;
	}
	if (m->nnotices) {
		o->notices = malloc(m->nnotices * sizeof(*o->notices));
		memcpy(o->notices, m->notices,
		       m->nnotices * sizeof(*o->notices));
		o->m.notices = o->notices;
	}
}

void out_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	(void)ctx;
	record(SENT, node, 0, m);
}

void out_request(void *ctx, uint16_t node, uint32_t req_id,
		 const struct lm_msg *m)
{
	(void)ctx;
	record(REQUESTED, node, req_id, m);
}

void out_reply(void *ctx, uint16_t node, uint32_t req_id,
	       const struct lm_msg *m)
{
	(void)ctx;
	record(REPLIED, node, req_id, m);
}

const struct lm_msg_out out_cbs = {
	.send = out_send, .request = out_request, .reply = out_reply,
};

/* The daemon's later(), counted: a test with it drives the cluster's
 * background work itself (lm_lemuriad_background). */
int laters;

void out_later(void *ctx)
{
	(void)ctx;
	laters++;
}

const struct lm_msg_out out_cbs_later = {
	.send = out_send, .request = out_request, .reply = out_reply,
	.later = out_later,
};

const struct lm_msg_out *out_now = &out_cbs; /* setup's */

void clear_outs(void)
{
	for (size_t i = 0; i < nouts; i++) {
		free(outs[i].data);
		free(outs[i].diffs);
		free(outs[i].notices);
	}
	nouts = 0;
}

struct lm_layout *layout;
uint16_t refl;   /* node id of r0 */

/* setup_path's copy mode for the clients it plays (setup_shared). */
static enum lm_copy_mode setup_copy = LM_COPY_CLIENT;

lm_lemuriad *setup_path(const char *path)
{
	char err[256];
	lm_lemuriad *c;

	clear_outs();
	layout = NULL;
	if (lm_layout_load(path, &layout, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		CU_FAIL_FATAL("layout does not load");
	}
	/* the clients these tests play keep copies of their own: they send
	 * FLUSHes and take pages as data (copy = client; copy = cluster's
	 * are tests/test_region_shared.c and the DSM runs) */
	layout->copy = setup_copy;
	for (size_t i = 0; i < layout->nclusters; i++)
		layout->clusters[i].copy = setup_copy;
	refl = lm_layout_reflector(layout, "r0")->id;
	c = lm_lemuriad_create(layout, "c0", HASH, out_now, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	return c;
}

/* conf/4+4.ini with the lazy relay these tests describe (the layout's
 * default is adaptive), and the fetch ahead of `prefetch = 7`. */
const char lazy_layout[] =
	"[lemuria]\n"
	"prefetch = 7\n"
	"shared_size = 64M\n"
	"page_size = 4096\n"
	"base = 0x500000000000\n"
	"auth = off\n"
	"relay = lazy\n"
	"[reflector r0]\n"
	"listen = 127.0.0.1:17500\n"
	"[cluster c0]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17510\n"
	"clients = 4\n"
	"cache = 64M\n"
	"[cluster c1]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17511\n"
	"clients = 4\n"
	"cache = 64M\n";

lm_lemuriad *setup(void)
{
	return setup_text(lazy_layout);
}

void lazy_layout_with(char *out, size_t cap, const char *line,
		      const char *instead)
{
	const char *at = strstr(lazy_layout, line);
	int len;

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	len = snprintf(out, cap, "%.*s%s%s", (int)(at - lazy_layout),
		       lazy_layout, instead, at + strlen(line));
	CU_ASSERT_FATAL(len > 0 && (size_t)len < cap);
}

void teardown(lm_lemuriad *c)
{
	lm_lemuriad_destroy(c);
	lm_layout_free(layout);
	layout = NULL;
	clear_outs();
}

uint16_t node_of(uint32_t rank)
{
	return lm_layout_client_id(layout, rank);
}

struct lm_msg msg(uint16_t type, uint64_t run)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.run = run;
	return m;
}

/* A request from client `rank`. */
void creq(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
	  const struct lm_msg *m)
{
	lm_lemuriad_handle(c, node_of(rank), LM_REL_REQUEST, req_id, m);
}

void join(lm_lemuriad *c, uint32_t rank, uint64_t run)
{
	struct lm_msg m = msg(LM_MSG_JOIN, run);

	m.rank = rank;
	m.pid = 1000 + rank;
	m.layout_hash = HASH;
	creq(c, rank, 1, &m);
}

void join_all(lm_lemuriad *c, uint64_t run)
{
	for (uint32_t r = 0; r < 4; r++)
		join(c, r, run);
	CU_ASSERT_EQUAL(nouts, 4);
	for (size_t i = 0; i < nouts; i++)
		CU_ASSERT_EQUAL(outs[i].m.status, 0);
	clear_outs();
}

void fetch(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
	   uint32_t page)
{
	struct lm_msg m = msg(LM_MSG_FETCH, RUN);

	m.page = page;
	creq(c, rank, req_id, &m);
}

/* The reflector answers request req_id with page at version, filled with
 * byte `fill`. */
void r_page_poked(lm_lemuriad *c, uint32_t req_id, uint32_t page,
		  uint32_t version, uint8_t fill, size_t at, size_t n,
		  uint8_t val)
{
	static uint8_t buf[65536];
	struct lm_msg m = msg(LM_MSG_PAGE, RUN);

	memset(buf, fill, layout->page_size);
	memset(buf + at, val, n);
	m.page = page;
	m.version = version;
	m.data = buf;
	m.data_len = layout->page_size;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, &m);
}

void r_page(lm_lemuriad *c, uint32_t req_id, uint32_t page,
	    uint32_t version, uint8_t fill)
{
	r_page_poked(c, req_id, page, version, fill, 0, 0, 0);
}

/* The reflector answers FETCHV req_id with PAGES holding one entry,
 * `entry` (len bytes) under `note`, or none when note is NULL. */
void r_pages_one(lm_lemuriad *c, uint32_t req_id,
		 const struct lm_notice *note, const uint8_t *entry,
		 size_t len)
{
	static uint8_t list[65536 + 64];
	struct lm_msg m = msg(LM_MSG_PAGES, RUN);
	size_t used = 0;

	if (note) {
		CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(list, sizeof(list),
							  &used, note->page,
							  entry, len),
				      0);
		m.notices = note;
		m.nnotices = 1;
		m.diffs = (struct lm_msg_diffs){ list, used, 1 };
	}
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, &m);
}

/* The reflector answers FETCHV req_id with PAGES holding `page` at
 * version, filled with `fill` but n bytes of `val` at `at`; page
 * UINT32_MAX: with no page at all. */
void r_pages_poked(lm_lemuriad *c, uint32_t req_id, uint32_t page,
		   uint32_t version, uint8_t fill, size_t at, size_t n,
		   uint8_t val)
{
	static uint8_t buf[65536];
	struct lm_notice note = { .page = page, .version = version,
				  .base = LM_NO_BASE };

	memset(buf, fill, layout->page_size);
	memset(buf + at, val, n);
	r_pages_one(c, req_id, page != UINT32_MAX ? &note : NULL, buf,
		    layout->page_size);
}

/* The reflector answers FETCHV req_id with PAGES holding, for `page`,
 * a diff against our copy at `base`: n bytes of `val` at `at`. */
void r_pages_diff(lm_lemuriad *c, uint32_t req_id, uint32_t page,
		  uint32_t version, uint32_t base, size_t at, size_t n,
		  uint8_t val)
{
	uint8_t diff[64];
	struct lm_notice note = { .page = page, .version = version,
				  .base = base };
	size_t hdr = test_run_header(diff, at, n);

	memset(diff + hdr, val, n);
	r_pages_one(c, req_id, &note, diff, hdr + n);
}

/* Puts page into the cache at version (filled with `fill`). */
void cache_page(lm_lemuriad *c, uint32_t page, uint32_t version,
		uint8_t fill)
{
	uint32_t up;

	clear_outs();
	fetch(c, 0, 900 + page, page);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	up = outs[0].req_id;
	clear_outs();
	r_page(c, up, page, version, fill);
	CU_ASSERT_EQUAL(nouts, 1);
	clear_outs();
}

/* True when a FETCH of page is answered from the cache (and then the
 * output is cleared; a miss's upstream FETCH is left for the caller). */
bool is_cached(lm_lemuriad *c, uint32_t page)
{
	bool hit;

	clear_outs();
	fetch(c, 3, 800 + page, page);
	hit = nouts == 1 && outs[0].how == REPLIED &&
	      outs[0].m.type == LM_MSG_PAGE;
	if (hit)
		clear_outs();
	return hit;
}

struct out *find_out(enum how how, uint16_t node, uint16_t type)
{
	for (size_t i = 0; i < nouts; i++)
		if (outs[i].how == how && outs[i].node == node &&
		    outs[i].m.type == type)
			return &outs[i];
	return NULL;
}

struct out *find_fetch_up(uint16_t type, uint32_t page)
{
	for (size_t i = 0; i < nouts; i++) {
		const struct out *o = &outs[i];

		if (o->how != REQUESTED || o->node != refl || o->m.type != type)
			continue;
		if (type == LM_MSG_FETCHV ? o->m.nnotices > 0 &&
						    o->notices[0].page == page :
					    o->m.page == page)
			return &outs[i];
	}
	return NULL;
}

/* A client's FETCHV of pages[0..n) (rank, req_id) whose fault reached
 * `reach` pages after the first (the first notice's version). */
void creq_fetchv_reach(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
		       const uint32_t *pages, uint32_t n, uint32_t reach)
{
	struct lm_notice ask[LM_CFG_PREFETCH_MAX * 2 + 2];
	struct lm_msg m = msg(LM_MSG_FETCHV, RUN);

	CU_ASSERT_FATAL(n <= LM_CFG_PREFETCH_MAX * 2 + 2);
	lm_msg_fetchv(&m, ask, pages, n, reach);
	creq(c, rank, req_id, &m);
}

/* ... reaching as far as the layout lets it. */
void creq_fetchv(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
		 const uint32_t *pages, uint32_t n)
{
	creq_fetchv_reach(c, rank, req_id, pages, n, layout->prefetch);
}

/* A client's FETCHV of pages[0..n) (rank 0, req_id 31). */
void fetchv(lm_lemuriad *c, const uint32_t *pages, uint32_t n)
{
	creq_fetchv(c, 0, 31, pages, n);
}

/* The one message out, a client's read miss on `page` sent up as a
 * FETCH, is answered by the reflector; returns the FETCHV ahead that the
 * lemuriad sends then (NULL: none). */
struct out *miss_answered(lm_lemuriad *c, uint32_t page, uint8_t fill)
{
	uint32_t fetch;

	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCH);
	fetch = outs[0].req_id;
	clear_outs();
	r_page(c, fetch, page, 4, fill);
	return find_out(REQUESTED, refl, LM_MSG_FETCHV);
}

/* The reflector answers FETCHV req_id with PAGES holding whole pages
 * pages[0..n), each at version and filled with its own number. */
void r_pages_whole(lm_lemuriad *c, uint32_t req_id,
		   const uint32_t *pages, uint32_t n, uint32_t version)
{
	r_pages_tagged(c, req_id, pages, n, version, NULL, 0);
}

void r_pages_tagged(lm_lemuriad *c, uint32_t req_id, const uint32_t *pages,
		    uint32_t n, uint32_t version, uint8_t *tags,
		    uint32_t ntags)
{
	static uint8_t list[4 * (65536 + 16)];
	static uint8_t buf[65536];
	struct lm_notice notes[4];
	struct lm_msg m = msg(LM_MSG_PAGES, RUN);
	size_t used = 0;

	CU_ASSERT_FATAL(n <= 4);
	for (uint32_t i = 0; i < n; i++) {
		memset(buf, (int)pages[i], layout->page_size);
		notes[i] = (struct lm_notice){ .page = pages[i],
			.version = version, .base = LM_NO_BASE };
		CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(list, sizeof(list),
							  &used, pages[i], buf,
							  layout->page_size),
				      0);
	}
	m.notices = notes;
	m.nnotices = n;
	m.diffs = (struct lm_msg_diffs){ list, used, n };
	m.tags = tags;
	m.ntags = ntags;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, req_id, &m);
}

/* A FLUSH of one diff setting bytes [off, off + n) of page to val. */
size_t make_flush(uint8_t *list, size_t cap, uint32_t page,
		  size_t off, size_t n, uint8_t val)
{
	static uint8_t twin[4096], now[4096], diff[4096 * 5];
	size_t dlen = 0, len = 0;

	memset(twin, 0, sizeof(twin));
	memset(now, 0, sizeof(now));
	memset(now + off, val, n);
	CU_ASSERT_EQUAL_FATAL(lm_diff_encode(twin, now, sizeof(now), diff,
					     sizeof(diff), &dlen), 0);
	CU_ASSERT_EQUAL_FATAL(lm_msg_diffs_append(list, cap, &len, page, diff,
						  dlen), 0);
	return len;
}

void barrier(lm_lemuriad *c, uint32_t rank, uint32_t id)
{
	struct lm_msg b = msg(LM_MSG_BARRIER, RUN);

	b.id = id;
	creq(c, rank, 40 + rank, &b);
}

/* The lock's manager asks for the token back. */
void recall(lm_lemuriad *c, uint32_t id, uint32_t rank)
{
	struct lm_msg m = msg(LM_MSG_RECALL, RUN);

	m.id = id;
	m.rank = rank;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
}

/* A LOCK or UNLOCK of lock `id` from client `rank`. */
void lock_op(lm_lemuriad *c, uint16_t type, uint32_t rank,
	     uint32_t req_id, uint32_t id)
{
	struct lm_msg m = msg(type, RUN);

	m.id = id;
	m.rank = rank;
	creq(c, rank, req_id, &m);
}

/* How many messages of `type` went to the reflector. */
int ups_of(uint16_t type)
{
	int n = 0;

	for (size_t i = 0; i < nouts; i++)
		n += outs[i].node == refl && outs[i].m.type == type;
	return n;
}

/* Rank 2 holds lock 12's token here and has unlocked it; rank 1 has
 * just been given work (FRESH_WORKER), or rank 0 has just created some
 * (FRESH_CREATOR), or work waits here for rank 1, which has asked for
 * nothing yet (FRESH_KEPT); none has synchronised since. */
lm_lemuriad *token_with_fresh_client(enum fresh_how how)
{
	lm_lemuriad *c = setup();
	struct lm_msg m;

	join_all(c, RUN);
	m = msg(LM_MSG_CREATE, RUN);
	m.offset = 0x40;
	if (how == FRESH_CREATOR) {
		m.rank = 5;
		creq(c, 0, 70, &m);
	} else {
		struct lm_msg w = msg(LM_MSG_WAIT_WORK, RUN);

		if (how == FRESH_WORKER)
			creq(c, 1, 70, &w);
		m.rank = 1;
		lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &m);
	}
	clear_outs();
	lock_op(c, LM_MSG_LOCK, 2, 80, 12);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	m = msg(LM_MSG_GRANT, RUN);
	m.id = 12;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, outs[0].req_id, &m);
	lock_op(c, LM_MSG_UNLOCK, 2, 81, 12);
	clear_outs();
	return c;
}

/* token_with_fresh_client, recalled: the token must stay. */
lm_lemuriad *recalled_with_fresh_client(enum fresh_how how)
{
	lm_lemuriad *c = token_with_fresh_client(how);

	recall(c, 12, 2);
	CU_ASSERT_EQUAL(ups_of(LM_MSG_UNLOCK), 0);
	return c;
}

/* Rank `rank` takes lock 12 and gives it back; returns the UNLOCKs that
 * went up meanwhile. */
int lock_unlock(lm_lemuriad *c, uint32_t rank, uint32_t req_id)
{
	lock_op(c, LM_MSG_LOCK, rank, req_id, 12);
	lock_op(c, LM_MSG_UNLOCK, rank, req_id + 1, 12);
	return ups_of(LM_MSG_UNLOCK);
}

void r_end(lm_lemuriad *c, uint32_t rank, const struct lm_notice *n,
	   uint32_t nn)
{
	struct lm_msg e = msg(LM_MSG_END, RUN);

	e.rank = rank;
	e.notices = n;
	e.nnotices = nn;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &e);
}

const char small_layout[] =
	"[lemuria]\n"
	"shared_size = 1M\n"
	"page_size = 4096\n"
	"base = 0x500000000000\n"
	"auth = off\n"
	"[reflector r0]\n"
	"listen = 127.0.0.1:17900\n"
	"[cluster c0]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17910\n"
	"clients = 4\n"
	"cache = 12K\n";

/* Loads `text` as the layout through a temporary file. */
lm_lemuriad *setup_text(const char *text)
{
	char path[64];
	FILE *f;
	lm_lemuriad *c;

	snprintf(path, sizeof(path), "/tmp/lm_test_cluster_%ld.ini",
		 (long)getpid());
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	c = setup_path(path);
	remove(path);
	return c;
}

lm_lemuriad *setup_shared_text(const char *text)
{
	lm_lemuriad *c;

	setup_copy = LM_COPY_CLUSTER;
	c = setup_text(text);
	setup_copy = LM_COPY_CLIENT;
	return c;
}

lm_lemuriad *setup_shared(void)
{
	return setup_shared_text(lazy_layout);
}

/* The four clients join, each taking the copy on our listener; with
 * `conn`, the connections it came on are kept there, else closed, and
 * so is every descriptor but the first, returned (or -1). */
static int join_shared(lm_lemuriad *c, uint64_t run, int conn[4])
{
	struct lm_fdpass_listener l;
	char err[256] = "";
	int first = -1;

	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&l, err, sizeof(err)), 0);
	for (uint32_t r = 0; r < 4; r++) {
		struct lm_msg m = msg(LM_MSG_JOIN, run);
		int fd = -1;

		m.rank = r;
		m.pid = (uint32_t)getpid();
		m.layout_hash = HASH;
		m.data = (const uint8_t *)l.name;
		m.data_len = strlen(l.name);
		creq(c, r, 1, &m);
		/* the copy came to our listener before the JOIN_OK */
		CU_ASSERT_EQUAL(lm_fdpass_receive_keep(&l, (uint32_t)getpid(),
						       1000, &fd,
						       conn ? &conn[r] : NULL,
						       err, sizeof(err)),
				0);
		if (first < 0)
			first = fd;
		else if (fd >= 0)
			close(fd);
	}
	lm_fdpass_close(&l);
	CU_ASSERT_EQUAL(nouts, 4);
	for (size_t i = 0; i < nouts; i++)
		CU_ASSERT_EQUAL(outs[i].m.status, 0);
	clear_outs();
	return first;
}

void join_all_shared(lm_lemuriad *c, uint64_t run)
{
	int fd = join_shared(c, run, NULL);

	if (fd >= 0)
		close(fd);
}

uint8_t *join_all_shared_waiting(lm_lemuriad *c, uint64_t run, int *keep)
{
	struct lm_ccopy_hdr g;
	int conn[4], memfd, ufd = -1;
	size_t len = layout->shared_size;
	char err[256] = "";
	uint8_t *view;

	memfd = join_shared(c, run, conn);
	CU_ASSERT_FATAL(memfd >= 0);
	CU_ASSERT_FATAL(lm_ccopy_geometry((uint32_t)(len / layout->page_size),
					  layout->page_size, &g) == 0);
	/* at the region's base, as a client maps it: the lemuriad wakes
	 * its clients' faults there */
	view = mmap((void *)(uintptr_t)layout->base, len,
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
		    memfd, (off_t)g.pages_off);
	CU_ASSERT_FATAL(view == (void *)(uintptr_t)layout->base);
	close(memfd);
	if (keep)
		*keep = -1;
	if (lm_copy_set_reader(view, len, &ufd, err, sizeof(err)) != 0) {
		for (uint32_t r = 0; r < 4; r++)
			close(conn[r]);
		munmap(view, len);
		return NULL; /* no userfaultfd here */
	}
	/* one process plays the four clients: the same descriptor each */
	for (uint32_t r = 0; r < 4; r++) {
		CU_ASSERT(lm_fdpass_answer(conn[r], ufd, err, sizeof(err)) == 0);
		close(conn[r]);
	}
	if (keep)
		*keep = ufd;
	else
		close(ufd);
	return view;
}

/* small_layout: a cache of three pages. */
lm_lemuriad *setup_small(void)
{
	return setup_text(small_layout);
}

/* Client `rank` flushes one diff setting [off, off + n) of page to val;
 * the FLUSH and its FLUSH_OK are cleared. */
void flush_page(lm_lemuriad *c, uint32_t rank, uint32_t page,
		size_t off, size_t n, uint8_t val)
{
	static uint8_t list[4096 * 5 + 64];
	struct lm_msg f = msg(LM_MSG_FLUSH, RUN);

	clear_outs();
	f.diffs.data = list;
	f.diffs.len = make_flush(list, sizeof(list), page, off, n, val);
	f.diffs.count = 1;
	creq(c, rank, 70 + rank, &f);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FLUSH_OK);
	CU_ASSERT_EQUAL(outs[0].m.status, 0);
	clear_outs();
}

/* R releases barrier id without notices; the replies are cleared. */
void release(lm_lemuriad *c, uint32_t id)
{
	struct lm_msg rel = msg(LM_MSG_RELEASE, RUN);

	rel.id = id;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &rel);
	clear_outs();
}

/* The homes answer every REGISTER among the outputs: a NEW entry holding
 * version v gets v + 1 when `merge`, else v + 2 (someone wrote between);
 * one holding none gets `fresh`.  Returns how many were answered; the
 * answered requests are removed from the outputs. */
int answer_registers(lm_lemuriad *c, bool merge, uint32_t fresh)
{
	struct out pending[MAX_OUT];
	size_t n = 0, keep = 0;
	int answered = 0;

	for (size_t i = 0; i < nouts; i++) {
		if (outs[i].how == REQUESTED &&
		    outs[i].m.type == LM_MSG_REGISTER)
			pending[n++] = outs[i];
		else
			outs[keep++] = outs[i];
	}
	nouts = keep;
	for (size_t i = 0; i < n; i++) {
		struct lm_notice v[64];
		struct lm_msg r = msg(LM_MSG_REGISTER_OK, RUN);

		CU_ASSERT_FATAL(pending[i].m.nnotices <= 64);
		for (uint32_t k = 0; k < pending[i].m.nnotices; k++) {
			const struct lm_notice *e = &pending[i].notices[k];

			v[r.nnotices] = *e;
			v[r.nnotices].base = 0;
			v[r.nnotices].version = e->version ?
				e->version + (merge ? 1 : 2) : fresh;
			if (e->base == LM_REG_NEW || e->base == LM_REG_DATA)
				r.nnotices++;
		}
		r.notices = v;
		lm_lemuriad_handle(c, refl, LM_REL_REPLY, pending[i].req_id,
				   &r);
		free(pending[i].data);
		free(pending[i].diffs);
		free(pending[i].notices);
		answered++;
	}
	return answered;
}

/* Every client arrives at barrier id, the cluster's BARRIER goes up, and
 * R releases it with notices n; what that made is left in the outputs. */
void arrive_and_release(lm_lemuriad *c, uint32_t id,
			const struct lm_notice *n, uint32_t nn)
{
	struct lm_msg rel = msg(LM_MSG_RELEASE, RUN);

	clear_outs();
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, id);
	answer_registers(c, true, 40);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	clear_outs();
	rel.id = id;
	rel.notices = n;
	rel.nnotices = nn;
	lm_lemuriad_handle(c, refl, LM_REL_ONEWAY, 0, &rel);
}

/* The same, every client answered at once; the outputs are cleared. */
void barrier_release(lm_lemuriad *c, uint32_t id,
		     const struct lm_notice *n, uint32_t nn)
{
	arrive_and_release(c, id, n, nn);
	CU_ASSERT_EQUAL(nouts, 4);
	clear_outs();
}

/* Fetches page from the cache: its version, and byte `at` in *byte.
 * False on a miss (whose upstream FETCH is cleared). */
bool cached_version(lm_lemuriad *c, uint32_t page, size_t at,
		    uint32_t *version, uint8_t *byte)
{
	bool hit;

	clear_outs();
	fetch(c, 2, 700 + page, page);
	hit = nouts == 1 && outs[0].how == REPLIED && outs[0].data;
	if (hit) {
		*version = outs[0].m.version;
		*byte = outs[0].data[at];
	}
	clear_outs();
	return hit;
}

/* Anything short of "our copy at base, every diff ours" invalidates:
 * another cluster wrote, several clusters wrote, or the copy is not at
 * the base (it missed some of the epoch's diffs, or is older). */
const char updates_off_layout[] =
	"[lemuria]\n"
	"shared_size = 1M\n"
	"page_size = 4096\n"
	"base = 0x500000000000\n"
	"auth = off\n"
	"updates = off\n"
	"[reflector r0]\n"
	"listen = 127.0.0.1:17900\n"
	"[cluster c0]\n"
	"reflector = r0\n"
	"listen = 127.0.0.1:17910\n"
	"clients = 4\n";

/* Like barrier_release, but the clients' RELEASE replies stay in the
 * outputs for the caller. */
void barrier_release_kept(lm_lemuriad *c, uint32_t id,
			  const struct lm_notice *n, uint32_t nn)
{
	arrive_and_release(c, id, n, nn);
	CU_ASSERT_EQUAL_FATAL(nouts, 4);
}

/* Like barrier_release_kept when the RELEASE is held for a fetch of
 * `page`: the FETCHV asking for it (alone) is outs[0] on return, and no
 * client has its RELEASE yet. */
void barrier_release_held(lm_lemuriad *c, uint32_t id,
			  const struct lm_notice *n, uint32_t nn,
			  uint32_t page)
{
	arrive_and_release(c, id, n, nn);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FETCHV);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[0].m.notices[0].page, page);
}

int note_update_run(void *ctx, size_t offset, const uint8_t *bytes,
		    size_t len)
{
	struct run_list *l = ctx;

	if (l->n == 4)
		return 1;
	l->runs[l->n][0] = (uint32_t)offset;
	l->runs[l->n][1] = (uint32_t)len;
	l->runs[l->n][2] = bytes[0];
	l->n++;
	return 0;
}

/* The first runs (offset, length, first byte) of the update of `page` in
 * the RELEASE rank got; their count. */
int update_runs(uint32_t rank, uint32_t page, uint32_t runs[4][3])
{
	struct out *o = find_out(REPLIED, node_of(rank), LM_MSG_RELEASE);
	struct run_list l = { runs, 0 };
	size_t pos = 0, len;
	uint32_t pg;
	const uint8_t *d;

	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	while (lm_msg_diffs_next(&o->m.diffs, &pos, &pg, &d, &len) == 1) {
		if (pg != page)
			continue;
		CU_ASSERT(lm_diff_foreach_run(d, len, 4096, note_update_run,
					      &l) >= 0);
		return l.n;
	}
	return -1;
}

/* How many of the outputs are of `type` to client `rank`. */
size_t count_outs(uint32_t rank, uint16_t type)
{
	size_t n = 0;

	for (size_t i = 0; i < nouts; i++)
		if (outs[i].m.type == type && outs[i].node == node_of(rank))
			n++;
	return n;
}

/* A cluster whose clients 0-2 hold page 9, 1 and 2 wrote it, and whose
 * RELEASE with updates is staged: rank 0 has it, the others wait. */
lm_lemuriad *staged_release(void)
{
	static struct lm_notice n[1] = { { 9, 6, 4, LM_WRITER_MANY, 0 } };
	lm_lemuriad *c;

	out_now = &out_cbs_later;
	laters = 0;
	c = setup();
	out_now = &out_cbs;
	join_all(c, RUN);
	cache_page(c, 9, 4, 0x11); /* rank 0 holds it */
	fetch(c, 1, 31, 9);
	fetch(c, 2, 32, 9);
	clear_outs();
	flush_page(c, 1, 9, 100, 8, 0x77);
	flush_page(c, 2, 9, 300, 8, 0x78);
	arrive_and_release(c, 1, n, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(count_outs(0, LM_MSG_RELEASE), 1);
	CU_ASSERT_EQUAL(laters, 2); /* the updates ahead, and this */
	clear_outs();
	return c;
}

/* Sends PULL{page, version} from the reflector; returns the DELTA. */
const struct out *pull(lm_lemuriad *c, uint32_t page,
		       uint32_t version)
{
	struct lm_msg m = msg(LM_MSG_PULL, RUN);

	clear_outs();
	m.page = page;
	m.version = version;
	lm_lemuriad_handle(c, refl, LM_REL_REQUEST, 555, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, REPLIED);
	CU_ASSERT_EQUAL(outs[0].req_id, 555);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_DELTA);
	return &outs[0];
}

/* The byte at `off` of the one diff a DELTA carries, after applying it
 * to a page of `fill`. */
uint8_t delta_byte(const struct out *d, size_t off, uint8_t fill)
{
	static uint8_t page[4096];
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t pg;

	memset(page, fill, sizeof(page));
	CU_ASSERT_FATAL(lm_msg_diffs_next(&d->m.diffs, &pos, &pg, &diff,
					  &len) == 1);
	CU_ASSERT_FATAL(lm_diff_apply(page, sizeof(page), diff, len) == 0);
	return page[off];
}

/* Log lines at warn or above, counted by a sink. */
size_t loud_lines;

void count_loud(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	(void)msg;
	if (level <= LM_LOG_WARN)
		loud_lines++;
}

/* Rank 1 takes lock 3 from R, R recalls it, rank 1 writes page 12 and
 * unlocks: the outputs are then UNLOCK_OK and the REGISTER of page 12,
 * unanswered. */
void unlock_recalled_lock(lm_lemuriad *c)
{
	struct lm_msg m = msg(LM_MSG_LOCK, RUN);
	uint32_t up;

	join_all(c, RUN);
	m.id = 3;
	creq(c, 1, 60, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	up = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_GRANT, RUN);
	m.id = 3;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	clear_outs();
	recall(c, 3, 1); /* held: it goes back at the UNLOCK */
	CU_ASSERT_EQUAL(nouts, 0);
	flush_page(c, 1, 12, 0, 4, 0x5a);
	m = msg(LM_MSG_UNLOCK, RUN);
	m.id = 3;
	creq(c, 1, 61, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 3);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_UNLOCK_OK);
	CU_ASSERT_EQUAL(outs[0].req_id, 61);
	CU_ASSERT_EQUAL_FATAL(outs[1].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[2].how, SENT);
	CU_ASSERT_EQUAL_FATAL(outs[2].m.type, LM_MSG_UNLOCK);
}

/* Rank `rank` asks for lock `id` (request req). */
void lock_req(lm_lemuriad *c, uint32_t rank, uint32_t req, uint32_t id)
{
	struct lm_msg m = msg(LM_MSG_LOCK, RUN);

	m.id = id;
	creq(c, rank, req, &m);
}

void unlock_req(lm_lemuriad *c, uint32_t rank, uint32_t req,
		uint32_t id)
{
	struct lm_msg m = msg(LM_MSG_UNLOCK, RUN);

	m.id = id;
	creq(c, rank, req, &m);
}

/* The first GRANT brings the token; rank 1 asked with request 300. */
void token_arrives(lm_lemuriad *c, uint32_t id)
{
	struct lm_msg m;
	uint32_t up;

	clear_outs();
	lock_req(c, 1, 300, id);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_LOCK);
	up = outs[0].req_id;
	clear_outs();
	m = msg(LM_MSG_GRANT, RUN);
	m.id = id;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].req_id, 300);
	clear_outs();
}

/* Deltas sent with their data (eager relay) are no longer here to be
 * written on top of a copy: a FETCH must ask for their versions, so that
 * no reflector's cache answers with a copy from before them
 * (dsmtest counters on several reflectors). */
lm_lemuriad *setup_eager(void)
{
	char text[1024];
	const char *at = strstr(small_layout, "auth = off\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = eager\n%s",
		 (int)(at - small_layout), small_layout, at);
	return setup_text(text);
}

int trace_read(const char *dir, char lines[][96], int max)
{
	unsigned long long t, last = 0;
	char path[128];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/c0.trace", dir);
	f = fopen(path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	while (n < max && fgets(lines[n], sizeof(lines[n]), f)) {
		CU_ASSERT(sscanf(lines[n], "%llu", &t) == 1 && t >= last);
		last = t;
		n++;
	}
	fclose(f);
	remove(path);
	return n;
}

int trace_line(char lines[][96], int n, const char *what)
{
	size_t len = strlen(what);

	for (int i = 0; i < n; i++) {
		const char *ev = strstr(lines[i], " c0 ");

		if (ev && strncmp(ev + 4, what, len) == 0 &&
		    (ev[4 + len] == '\n' || ev[4 + len] == ' '))
			return i;
	}
	return -1;
}
