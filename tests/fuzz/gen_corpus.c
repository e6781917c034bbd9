/* Writes the seed corpus of the libFuzzer harnesses (tests/fuzz/): a few
 * valid inputs per harness, so that mutations reach past the first length
 * check.  Test tooling; deterministic, so regenerating gives the same files.
 *
 *   gen_corpus LAYOUT OUTDIR     (make fuzz-corpus: conf/4+4.ini,
 *                                 tests/fuzz/corpus) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "auth.h"
#include "config.h"
#include "diff.h"
#include "fuzz_input.h"
#include "home.h"
#include "lm_error.h"
#include "proto.h"
#include "reliable.h"
#include "wire.h"

#define RUN 0x5eed0001u
#define SEQ_MAX (256 * 1024) /* bytes of one record sequence */
#define PAGE 4096

static const char *outdir;
static const struct lm_layout *layout;

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s\n", what);
	exit(1);
}

static void write_seed(const char *harness, const char *name,
		       const void *data, size_t len)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, harness);
	if (mkdir(outdir, 0755) < 0 && errno != EEXIST)
		die("cannot create the output directory");
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die("cannot create a harness directory");
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, harness, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
		die("cannot write a seed");
}

/* ---- messages --------------------------------------------------------- */

static struct lm_msg msg(uint16_t type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.run = RUN;
	return m;
}

/* Encodes m into out (cap bytes); any failure is a generator bug. */
static size_t encode(const struct lm_msg *m, uint8_t *out, size_t cap)
{
	int rc = lm_msg_encode(m, out, cap);

	if (rc < 0)
		die("a seed message does not encode");
	return (size_t)rc;
}

/* A diff of a page of `ps` bytes that writes a few short runs and,
 * where the page has a second 64-byte group, the low six bytes of its
 * doubles (a masked group, as LU's). */
static size_t make_diff(size_t ps, uint8_t seed, uint8_t *out, size_t cap)
{
	uint8_t twin[PAGE] = { 0 }, page[PAGE] = { 0 };
	size_t len;

	for (size_t i = 0; i < ps; i += 37)
		page[i] = (uint8_t)(seed + i);
	for (size_t i = 64; i < 128 && ps >= 128; i++)
		if (i % 8 < 6)
			page[i] = (uint8_t)(seed + i + 1);
	if (ps > 3)
		page[ps - 1] = 0xff;
	if (lm_diff_encode(twin, page, ps, out, cap, &len) != 0)
		die("diff");
	return len;
}

/* A FLUSH list with one diff for each page in pages[] (page size ps). */
static size_t make_diffs(const uint32_t *pages, size_t n, size_t ps,
			 uint8_t *out, size_t cap)
{
	static uint8_t diff[PAGE * 5];
	size_t len = 0, dlen;

	for (size_t i = 0; i < n; i++) {
		dlen = make_diff(ps, (uint8_t)(pages[i] * 3), diff,
				 sizeof(diff));
		if (lm_msg_diffs_append(out, cap, &len, pages[i], diff, dlen))
			die("diff list");
	}
	return len;
}

static void set_diffs(struct lm_msg *m, const uint8_t *list, size_t len,
		      uint32_t count)
{
	m->diffs.data = list;
	m->diffs.len = len;
	m->diffs.count = count;
}

/* Notices are built field by field only for page and version, the two
 * every notice has whatever else it carries. */
static void make_notices(struct lm_notice *n, size_t count, uint32_t first)
{
	memset(n, 0, count * sizeof(*n));
	for (size_t i = 0; i < count; i++) {
		n[i].page = first + (uint32_t)i;
		n[i].version = (uint32_t)i + 1;
	}
}

/* fuzz_msg: one seed per message type. */
static void gen_msg(void)
{
	static uint8_t buf[PAGE * 6], list[PAGE * 6], page[PAGE];
	static const uint32_t flush_pages[] = { 0, 1, 2, 3, 4 };
	static const char reason[] = "rank 3 lost";
	struct lm_notice notices[3];
	struct lm_msg_pong pong;
	struct lm_msg m;
	size_t len;
	char name[64];

	/* PING and PONG are not DSM messages; fuzz_msg decodes PONG. */
	write_seed("fuzz_msg", "ping", buf,
		   (size_t)lm_msg_encode_ping(buf, sizeof(buf)));
	memset(&pong, 0, sizeof(pong));
	pong.role = LM_ROLE_LEMURIAD;
	strcpy(pong.name, "c0");
	pong.uptime_us = 123456;
	pong.peers = 5;
	write_seed("fuzz_msg", "pong", buf,
		   (size_t)lm_msg_encode_pong(&pong, buf, sizeof(buf)));

	for (uint16_t t = LM_MSG_JOIN; t < LM_MSG_TYPE_COUNT; t++) {
		/* a tool's counters have their own codec (common/stats.h) */
		if (t == LM_MSG_STATS || t == LM_MSG_STATS_REPLY)
			continue;
		m = msg(t);
		m.status = t % 3 ? 0 : LM_EINVAL;
		m.id = 7;
		m.rank = 2;
		m.page = 9;
		m.version = 4;
		m.pid = 4242;
		m.layout_hash = layout->hash;
		m.size = 10000;
		m.align = 64;
		m.offset = 4096;
		switch (t) {
		case LM_MSG_PAGE:
			for (size_t i = 0; i < PAGE; i++)
				page[i] = (uint8_t)(i * 13);
			m.data = page;
			m.data_len = PAGE;
			break;
		case LM_MSG_CREATE:
			m.data = (const uint8_t *)"data segment image";
			m.data_len = 18;
			break;
		case LM_MSG_ABORT:
			m.data = (const uint8_t *)reason;
			m.data_len = strlen(reason);
			break;
		case LM_MSG_FLUSH:
			/* fuzz_msg checks diff i against a page size that
			 * depends on the page number (4096, 256, 100, 1). */
			len = make_diffs(flush_pages, 1, PAGE, list,
					 sizeof(list));
			len += make_diffs(flush_pages + 1, 1, 256,
					  list + len, sizeof(list) - len);
			len += make_diffs(flush_pages + 2, 1, 100,
					  list + len, sizeof(list) - len);
			len += make_diffs(flush_pages + 3, 1, 1, list + len,
					  sizeof(list) - len);
			len += make_diffs(flush_pages + 4, 1, PAGE,
					  list + len, sizeof(list) - len);
			set_diffs(&m, list, len, 5);
			break;
		case LM_MSG_RELEASE:
		case LM_MSG_GRANT:
		case LM_MSG_END:
			make_notices(notices, 3, 10);
			m.notices = notices;
			m.nnotices = 3;
			break;
		}
		snprintf(name, sizeof(name), "%02u-%s", t, lm_msg_name(t));
		write_seed("fuzz_msg", name, buf, encode(&m, buf,
							  sizeof(buf)));
	}
}

/* ---- record sequences for the state machines ---------------------------- */

struct seq {
	uint8_t buf[SEQ_MAX];
	size_t len;
};

static void put_msg(struct seq *s, uint8_t from, uint8_t ctl,
		    const struct lm_msg *m)
{
	static uint8_t enc[PAGE * 6];
	size_t n = encode(m, enc, sizeof(enc));

	if (fz_put(s->buf, sizeof(s->buf), &s->len, from, ctl, enc, n))
		die("sequence too long");
}

#define K_ONEWAY LM_REL_ONEWAY
#define K_REQ LM_REL_REQUEST
/* A reply to the machine's newest request (fuzz_input.h). */
#define K_REPLY LM_REL_REPLY

static uint8_t fetch_data[PAGE];

/* fuzz_home: peers 0 and 1 are clusters c0 (ranks 0-3) and c1 (4-7);
 * 2 and up are ids the home must refuse. */
static void gen_home(void)
{
	static const uint64_t frees[] = { 128, 0, 256, 4096, 64 };
	static const uint32_t twice[] = { 3, 3 };
	static struct seq s;
	static uint8_t list[PAGE * 6];
	static const uint32_t pages[] = { 3, 4 };
	struct lm_notice notices[2];
	struct lm_msg m;

	/* Pages and a barrier. */
	s.len = 0;
	m = msg(LM_MSG_JOIN);
	put_msg(&s, 0, K_REQ, &m);
	put_msg(&s, 1, K_REQ, &m);
	m = msg(LM_MSG_FLUSH);
	m.rank = 1;
	set_diffs(&m, list, make_diffs(pages, 2, PAGE, list, sizeof(list)),
		  2);
	put_msg(&s, 0, K_ONEWAY, &m);
	m = msg(LM_MSG_FETCH);
	m.page = 3;
	put_msg(&s, 1, K_REQ, &m);
	m = msg(LM_MSG_FLUSH);
	m.rank = 5;
	set_diffs(&m, list, make_diffs(pages, 1, PAGE, list, sizeof(list)),
		  1);
	put_msg(&s, 1, K_ONEWAY, &m);
	m = msg(LM_MSG_BARRIER);
	m.id = 1;
	put_msg(&s, 0, K_ONEWAY, &m);
	put_msg(&s, 1, K_ONEWAY, &m);
	m = msg(LM_MSG_FETCH);
	m.page = 4;
	put_msg(&s, 0, K_REQ, &m);
	{	/* several pages at once, one of them outside the region */
		struct lm_notice want[3] = { { .page = 3 }, { .page = 4 },
					     { .page = 0xfffffff0u } };

		m = msg(LM_MSG_FETCHV);
		m.notices = want;
		m.nnotices = 3;
		put_msg(&s, 1, K_REQ, &m);
		/* c0's copy at the epoch's base: page 3 comes as the bytes
		 * c1 wrote (pages as diffs), page 4 whole */
		want[0] = (struct lm_notice){ .page = 3, .version = 2,
					      .base = 0 };
		want[1] = (struct lm_notice){ .page = 4, .base = LM_NO_BASE };
		m.nnotices = 2;
		put_msg(&s, 0, K_REQ, &m);
	}
	write_seed("fuzz_home", "pages-barrier", s.buf, s.len);

	/* Locks and the allocator. */
	s.len = 0;
	m = msg(LM_MSG_LOCK);
	m.id = 5;
	m.rank = 1;
	put_msg(&s, 0, K_REQ, &m);
	m.rank = 4;
	put_msg(&s, 1, K_REQ, &m);
	m = msg(LM_MSG_UNLOCK);
	m.id = 5;
	m.rank = 1;
	put_msg(&s, 0, K_ONEWAY, &m);
	m.rank = 4;
	put_msg(&s, 1, K_ONEWAY, &m);
	m = msg(LM_MSG_ALLOC);
	m.size = 10000;
	put_msg(&s, 0, K_REQ, &m);
	m.size = 100;
	m.align = 256;
	put_msg(&s, 1, K_REQ, &m);
	m = msg(LM_MSG_ALLOC);
	m.id = LM_ALLOC_KIND_LOCK;
	m.size = 4;
	put_msg(&s, 1, K_REQ, &m);
	m = msg(LM_MSG_FREE);
	m.offset = 0;
	put_msg(&s, 0, K_REQ, &m);
	m.offset = 12345;
	put_msg(&s, 0, K_REQ, &m);
	write_seed("fuzz_home", "locks-alloc", s.buf, s.len);

	/* CREATE and END routing, then an ABORT. */
	s.len = 0;
	m = msg(LM_MSG_CREATE);
	m.rank = 5;
	m.offset = 0x1234;
	m.data = (const uint8_t *)"image";
	m.data_len = 5;
	put_msg(&s, 0, K_ONEWAY, &m);
	m = msg(LM_MSG_FLUSH);
	m.rank = 5;
	set_diffs(&m, list, make_diffs(pages, 1, PAGE, list, sizeof(list)),
		  1);
	put_msg(&s, 1, K_ONEWAY, &m);
	m = msg(LM_MSG_END);
	m.rank = 5;
	put_msg(&s, 1, K_ONEWAY, &m);
	m = msg(LM_MSG_ABORT);
	m.rank = 6;
	m.data = (const uint8_t *)"rank 6 lost";
	m.data_len = 11;
	put_msg(&s, 1, K_ONEWAY, &m);
	write_seed("fuzz_home", "create-end-abort", s.buf, s.len);

	/* The allocator's free list (neighbours merged on FREE), barriers
	 * with several ids pending, a cluster arriving twice. */
	s.len = 0;
	for (uint32_t i = 0; i < 6; i++) {
		m = msg(LM_MSG_ALLOC);
		m.size = 100u + 5000u * (i % 2);
		put_msg(&s, (uint8_t)(i % 2), K_REQ, &m);
	}
	/* First fit gave 0, 4096, 128, 12288, 256, ...: freeing 128, 0,
	 * then 256 merges with the hole on each side; 64 is no allocation. */
	for (size_t i = 0; i < sizeof(frees) / sizeof(frees[0]); i++) {
		m = msg(LM_MSG_FREE);
		m.offset = frees[i];
		put_msg(&s, (uint8_t)(i % 2), K_REQ, &m);
	}
	/* One more barrier id than may be pending. */
	for (uint32_t id = 1; id <= LM_HOME_BARRIERS_MAX + 1; id++) {
		m = msg(LM_MSG_BARRIER);
		m.id = id;
		put_msg(&s, 0, K_ONEWAY, &m);
	}
	m.id = 3;
	put_msg(&s, 0, K_ONEWAY, &m);
	put_msg(&s, 1, K_ONEWAY, &m);
	/* A list that names a page twice raises its version once. */
	m = msg(LM_MSG_FLUSH);
	m.rank = 2;
	set_diffs(&m, list, make_diffs(twice, 2, PAGE, list, sizeof(list)),
		  2);
	put_msg(&s, 0, K_ONEWAY, &m);
	write_seed("fuzz_home", "alloc-barriers", s.buf, s.len);

	/* What must be refused: strangers, wrong kinds, foreign ranks,
	 * replies, old runs, then a newer run that resets everything. */
	s.len = 0;
	m = msg(LM_MSG_FETCH);
	m.page = 1;
	for (uint8_t p = 2; p < 8; p++)
		put_msg(&s, p, K_REQ, &m);
	put_msg(&s, 0, K_ONEWAY, &m);
	put_msg(&s, 0, K_REPLY, &m);
	m.page = 0xffffffffu;
	put_msg(&s, 0, K_REQ, &m);
	m = msg(LM_MSG_LOCK);
	m.rank = 6;
	put_msg(&s, 0, K_REQ, &m);
	m = msg(LM_MSG_RELEASE);
	make_notices(notices, 2, 1);
	m.notices = notices;
	m.nnotices = 2;
	put_msg(&s, 0, K_ONEWAY, &m);
	m = msg(LM_MSG_JOIN);
	m.run = RUN + 1;
	put_msg(&s, 1, K_REQ, &m);
	m.run = RUN;
	put_msg(&s, 0, K_REQ, &m);
	write_seed("fuzz_home", "refused", s.buf, s.len);
}

/* fuzz_cluster: peer 0 is the reflector, 1..4 the clients of ranks 0-3;
 * 5 and up are ids the cluster must refuse. */
static void cluster_join(struct seq *s)
{
	struct lm_msg m;

	for (uint8_t i = 0; i < 4; i++) {
		m = msg(LM_MSG_JOIN);
		m.rank = i;
		m.pid = 1000u + i;
		m.layout_hash = layout->hash;
		put_msg(s, (uint8_t)(1 + i), K_REQ, &m);
	}
}

/* Rank 0 (node 1) takes lock 3, R grants it with `notices`, rank 0
 * gives it back: the token stays at the lemuriad, free. */
static void put_lock_cycle(struct seq *s, struct lm_notice *notices,
			   uint32_t nnotices)
{
	struct lm_msg m = msg(LM_MSG_LOCK);

	m.id = 3;
	m.rank = 0;
	put_msg(s, 1, K_REQ, &m);
	m = msg(LM_MSG_GRANT);
	m.id = 3;
	m.notices = notices;
	m.nnotices = nnotices;
	put_msg(s, 0, K_REPLY, &m);
	m = msg(LM_MSG_UNLOCK);
	m.id = 3;
	m.rank = 0;
	put_msg(s, 1, K_REQ, &m);
}

/* Rank 1 (node 2) waits for work; rank 0 creates it, and R passes the
 * CREATE down. */
static void put_created_worker(struct seq *s)
{
	struct lm_msg m = msg(LM_MSG_WAIT_WORK);

	put_msg(s, 2, K_REQ, &m);
	m = msg(LM_MSG_CREATE);
	m.rank = 1;
	m.offset = 0x4000;
	m.data = (const uint8_t *)"image";
	m.data_len = 5;
	put_msg(s, 1, K_REQ, &m);
	put_msg(s, 0, K_ONEWAY, &m);
}

static void gen_cluster(void)
{
	static struct seq s;
	static uint8_t list[PAGE * 6];
	static const uint32_t pages[] = { 7, 8 };
	struct lm_notice notices[2];
	struct lm_msg m;

	/* Fetches: a miss, a coalesced one, the reply, a hit. */
	s.len = 0;
	cluster_join(&s);
	m = msg(LM_MSG_FETCH);
	m.page = 7;
	put_msg(&s, 1, K_REQ, &m);
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_PAGE);
	m.page = 7;
	m.version = 1;
	for (size_t i = 0; i < PAGE; i++)
		fetch_data[i] = (uint8_t)(i ^ 0x5a);
	m.data = fetch_data;
	m.data_len = PAGE;
	put_msg(&s, 0, K_REPLY, &m);
	m = msg(LM_MSG_FETCH);
	m.page = 7;
	put_msg(&s, 3, K_REQ, &m);
	m.page = 0xffffffffu;
	put_msg(&s, 4, K_REQ, &m);
	{	/* neighbour pages: a hit with one outside the region, then a
		 * miss that goes up as a FETCH */
		struct lm_notice want[3] = {
			{ .page = 7, .base = LM_NO_BASE },
			{ .page = 8, .base = LM_NO_BASE },
			{ .page = 0xfffffff0u, .base = LM_NO_BASE } };

		m = msg(LM_MSG_FETCHV);
		m.notices = want;
		m.nnotices = 3;
		put_msg(&s, 2, K_REQ, &m);
		m.notices = want + 1;
		m.nnotices = 1;
		put_msg(&s, 3, K_REQ, &m);
	}
	write_seed("fuzz_cluster", "fetch", s.buf, s.len);

	/* A flush and a whole barrier. */
	s.len = 0;
	cluster_join(&s);
	m = msg(LM_MSG_FLUSH);
	m.rank = 0;
	set_diffs(&m, list, make_diffs(pages, 2, PAGE, list, sizeof(list)),
		  2);
	put_msg(&s, 1, K_REQ, &m);
	m = msg(LM_MSG_BARRIER);
	m.id = 1;
	for (uint8_t i = 1; i <= 4; i++)
		put_msg(&s, i, K_REQ, &m);
	m = msg(LM_MSG_RELEASE);
	m.id = 1;
	make_notices(notices, 2, 7);
	m.notices = notices;
	m.nnotices = 2;
	put_msg(&s, 0, K_ONEWAY, &m);
	write_seed("fuzz_cluster", "flush-barrier", s.buf, s.len);

	/* A lock, then the allocator, with R's replies. */
	s.len = 0;
	cluster_join(&s);
	make_notices(notices, 1, 7);
	put_lock_cycle(&s, notices, 1);
	m = msg(LM_MSG_UNLOCK);
	m.id = 3;
	m.rank = 1;
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_ALLOC);
	m.size = 8192;
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_ALLOC_OK);
	m.offset = 4096;
	put_msg(&s, 0, K_REPLY, &m);
	m = msg(LM_MSG_FREE);
	m.offset = 4096;
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_FREE_OK);
	put_msg(&s, 0, K_REPLY, &m);
	write_seed("fuzz_cluster", "lock-alloc", s.buf, s.len);

	/* A token recalled while a created worker has not synchronised:
	 * it waits, and two ticks of the clock let it go. */
	s.len = 0;
	cluster_join(&s);
	put_lock_cycle(&s, NULL, 0);
	put_created_worker(&s);
	m = msg(LM_MSG_RECALL);
	m.id = 3;
	put_msg(&s, 0, K_ONEWAY, &m);
	put_msg(&s, 0, FZ_KIND_PEER_LOST | FZ_TICK, &m);
	put_msg(&s, 0, FZ_KIND_PEER_LOST | FZ_TICK, &m);
	write_seed("fuzz_cluster", "recall-fresh-tick", s.buf, s.len);

	/* CREATE/END routing, WAIT_END, LEAVE, a lost client and an
	 * ABORT from the reflector. */
	s.len = 0;
	cluster_join(&s);
	put_created_worker(&s);
	m = msg(LM_MSG_END);
	m.rank = 1;
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_WAIT_END);
	m.id = 1;
	put_msg(&s, 1, K_REQ, &m);
	m = msg(LM_MSG_END);
	m.rank = 1;
	make_notices(notices, 2, 7);
	m.notices = notices;
	m.nnotices = 2;
	put_msg(&s, 0, K_ONEWAY, &m);
	m = msg(LM_MSG_LEAVE);
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_FETCH);
	put_msg(&s, 3, FZ_KIND_PEER_LOST, &m);
	put_msg(&s, 4, K_REQ, &m);
	m = msg(LM_MSG_ABORT);
	m.rank = 9;
	m.data = (const uint8_t *)"reflector says no";
	m.data_len = 17;
	put_msg(&s, 0, K_ONEWAY, &m);
	m = msg(LM_MSG_JOIN);
	m.run = RUN + 1;
	m.layout_hash = layout->hash;
	put_msg(&s, 1, K_REQ, &m);
	write_seed("fuzz_cluster", "create-end-lost", s.buf, s.len);

	/* The cache: two pages fetched (replies in the other order), a
	 * FLUSH onto both copies, notices for cached pages and for one whose
	 * FETCH is still pending (its reply is then too old), a GRANT that
	 * arrives after its client left. */
	s.len = 0;
	cluster_join(&s);
	m = msg(LM_MSG_FETCH);
	m.page = 7;
	put_msg(&s, 1, K_REQ, &m);
	m.page = 8;
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_PAGE);
	m.page = 8;
	m.version = 1;
	m.data = fetch_data;
	m.data_len = PAGE;
	put_msg(&s, 0, K_REPLY, &m);
	m.page = 7;
	put_msg(&s, 0, K_REPLY | (1 << 2), &m);
	m = msg(LM_MSG_FLUSH);
	m.rank = 2;
	set_diffs(&m, list, make_diffs(pages, 2, PAGE, list, sizeof(list)),
		  2);
	put_msg(&s, 3, K_REQ, &m);
	m = msg(LM_MSG_FETCH);
	m.page = 9;
	put_msg(&s, 4, K_REQ, &m);
	m = msg(LM_MSG_RELEASE);
	m.id = 4;
	make_notices(notices, 2, 8);
	m.notices = notices;
	m.nnotices = 2;
	put_msg(&s, 0, K_ONEWAY, &m);
	m = msg(LM_MSG_PAGE);
	m.page = 9;
	m.version = 0;
	m.data = fetch_data;
	m.data_len = PAGE;
	put_msg(&s, 0, K_REPLY, &m);
	m.version = 2;
	put_msg(&s, 0, K_REPLY, &m);
	m = msg(LM_MSG_LOCK);
	m.id = 2;
	m.rank = 1;
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_LEAVE);
	put_msg(&s, 2, K_REQ, &m);
	m = msg(LM_MSG_GRANT);
	m.id = 2;
	make_notices(notices, 2, 7);
	m.notices = notices;
	m.nnotices = 2;
	put_msg(&s, 0, K_REPLY, &m);
	write_seed("fuzz_cluster", "cache-notices", s.buf, s.len);

	/* What must be refused: strangers, wrong kinds, a bad hash, a
	 * foreign rank, replies nobody asked for. */
	s.len = 0;
	m = msg(LM_MSG_JOIN);
	m.rank = 0;
	m.layout_hash = layout->hash ^ 1;
	put_msg(&s, 1, K_REQ, &m);
	m.rank = 6;
	m.layout_hash = layout->hash;
	put_msg(&s, 2, K_REQ, &m);
	for (uint8_t p = 5; p < 11; p++)
		put_msg(&s, p, K_REQ, &m);
	cluster_join(&s);
	m = msg(LM_MSG_FETCH);
	m.page = 1;
	put_msg(&s, 1, K_ONEWAY, &m);
	put_msg(&s, 0, K_REQ, &m);
	m = msg(LM_MSG_PAGE);
	m.page = 1;
	m.data = fetch_data;
	m.data_len = 100;
	put_msg(&s, 0, K_REPLY | (5 << 2), &m);
	m = msg(LM_MSG_FETCH);
	m.page = 1;
	put_msg(&s, 1, K_REQ, &m);
	put_msg(&s, 0, K_REPLY, &m);
	write_seed("fuzz_cluster", "refused", s.buf, s.len);
}

/* ---- datagrams -------------------------------------------------------- */

static lm_auth *auth;

static size_t datagram(struct lm_dg_header *h, const void *payload,
		       size_t plen, bool mac, uint8_t *out)
{
	h->payload_len = (uint16_t)plen;
	if (mac)
		h->flags |= LM_DGF_MAC;
	lm_wire_encode_header(h, out);
	memcpy(out + LM_WIRE_HDR_SIZE, payload, plen);
	if (!mac)
		return LM_WIRE_HDR_SIZE + plen;
	lm_auth_sign(auth, out, LM_WIRE_HDR_SIZE + plen);
	return LM_WIRE_HDR_SIZE + plen + LM_WIRE_MAC_SIZE;
}

static void gen_wire(void)
{
	static const char payload[] = "twenty bytes of data";
	uint8_t dg[256];
	struct lm_dg_header h;

	memset(&h, 0, sizeof(h));
	h.type = LM_DG_DATA;
	h.sender = FZ_NODE_G;
	h.receiver = FZ_NODE_A;
	h.session = 0x3000;
	h.peer_session = 0x1000;
	h.stamp = 1;
	h.seq = 1;
	h.msg_len = 20;
	h.frag_count = 1;
	write_seed("fuzz_wire", "data", dg, datagram(&h, payload, 20, false,
						      dg));
	h.stamp = 2;
	write_seed("fuzz_wire", "data-mac", dg, datagram(&h, payload, 20,
							  true, dg));
	h.flags = LM_DGF_REQUEST;
	h.req_id = 9;
	h.seq = 2;
	h.msg_len = 1000;
	h.frag_index = 1;
	h.frag_count = 3;
	write_seed("fuzz_wire", "fragment-request", dg,
		   datagram(&h, payload, 20, false, dg));
	h.flags = LM_DGF_REPLY;
	write_seed("fuzz_wire", "fragment-reply", dg,
		   datagram(&h, payload, 20, false, dg));
	memset(&h, 0, sizeof(h));
	h.type = LM_DG_ACK;
	h.sender = FZ_NODE_G;
	h.receiver = FZ_NODE_A;
	h.session = 0x3000;
	h.stamp = 3;
	h.ack = 5;
	h.sack = 0x5;
	write_seed("fuzz_wire", "ack", dg, datagram(&h, NULL, 0, false, dg));
}

/* fuzz_engine: engine G (a peer A has never met) talks to a copy of A,
 * and every datagram G sends becomes an input record; a few records of
 * the other operations follow. */
#define QMAX 4096

static struct {
	lm_rel *a, *g;
	uint64_t now;
	struct seq s;
	uint8_t *q[2][QMAX]; /* [0]: to A, [1]: to G */
	size_t qlen[2][QMAX], n[2];
} eng;

static void eng_transmit(void *ctx, uint16_t peer, const uint8_t *dg,
			 size_t len)
{
	int to_g = ctx == (void *)&eng.a;
	size_t i = eng.n[to_g];

	if ((to_g && peer != FZ_NODE_G) || (!to_g && peer != FZ_NODE_A))
		return;
	if (i == QMAX)
		die("engine queue");
	eng.q[to_g][i] = malloc(len);
	if (!eng.q[to_g][i])
		die("memory");
	memcpy(eng.q[to_g][i], dg, len);
	eng.qlen[to_g][i] = len;
	eng.n[to_g]++;
	if (!to_g && fz_put(eng.s.buf, sizeof(eng.s.buf), &eng.s.len,
			    FZ_OP_INPUT, 1, dg, len))
		die("sequence too long");
}

static void eng_deliver(void *ctx, const struct lm_rel_msg *msg)
{
	if (ctx == (void *)&eng.a && msg->kind == LM_REL_REQUEST)
		lm_rel_reply(eng.a, msg->peer, msg->req_id, msg->data,
			     msg->len, eng.now);
}

static const struct lm_rel_callbacks eng_cbs = { eng_transmit, eng_deliver,
						 NULL };

/* Delivers queued datagrams both ways until both queues are empty. */
static void eng_pump(void)
{
	while (eng.n[0] || eng.n[1]) {
		for (int d = 0; d < 2; d++) {
			size_t n = eng.n[d];

			eng.n[d] = 0;
			for (size_t i = 0; i < n; i++) {
				eng.now += 100;
				lm_rel_input(d ? eng.g : eng.a, eng.q[d][i],
					     eng.qlen[d][i], eng.now);
				free(eng.q[d][i]);
			}
		}
	}
}

static void gen_engine_one(const char *name, uint8_t mode)
{
	static uint8_t big[3000];
	struct lm_rel_config ca, cg;

	memset(&eng, 0, sizeof(eng));
	eng.now = 1000000;
	fz_engine_config(&ca, FZ_NODE_A, auth, mode);
	fz_engine_config(&cg, FZ_NODE_G, auth, mode);
	eng.a = lm_rel_create(&ca, &eng_cbs, &eng.a);
	eng.g = lm_rel_create(&cg, &eng_cbs, &eng.g);
	if (!eng.a || !eng.g)
		die("engine");
	eng.s.buf[0] = mode;
	eng.s.len = 1;

	lm_rel_send(eng.g, FZ_NODE_A, "one", 3, eng.now);
	lm_rel_send(eng.g, FZ_NODE_A, "two", 3, eng.now);
	eng_pump();
	lm_rel_request(eng.g, FZ_NODE_A, 1, "request", 7, eng.now);
	eng_pump();
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 31);
	lm_rel_send(eng.g, FZ_NODE_A, big, sizeof(big), eng.now);
	eng_pump();
	lm_rel_request(eng.g, FZ_NODE_A, 1, "request", 7, eng.now);
	eng_pump();

	/* The other operations of the harness, then a long pause so that
	 * timers fire. */
	fz_put(eng.s.buf, sizeof(eng.s.buf), &eng.s.len, FZ_OP_SEND, 2,
	       "to B", 4);
	fz_put(eng.s.buf, sizeof(eng.s.buf), &eng.s.len, FZ_OP_REQUEST, 2,
	       "ask B", 5);
	fz_put(eng.s.buf, sizeof(eng.s.buf), &eng.s.len, FZ_OP_B_SEND, 2,
	       big, 1500);
	fz_put(eng.s.buf, sizeof(eng.s.buf), &eng.s.len,
	       FZ_OP_SEND | (5 << 2), 2, "to 5", 4);
	fz_put(eng.s.buf, sizeof(eng.s.buf), &eng.s.len, FZ_OP_INPUT, 255,
	       NULL, 0);
	write_seed("fuzz_engine", name, eng.s.buf, eng.s.len);
	lm_rel_destroy(eng.a);
	lm_rel_destroy(eng.g);
}

int main(int argc, char **argv)
{
	struct lm_layout *l;
	char err[512];

	if (argc != 3) {
		fprintf(stderr, "usage: gen_corpus LAYOUT OUTDIR\n");
		return 2;
	}
	if (lm_layout_load(argv[1], &l, err, sizeof(err)) != 0) {
		fprintf(stderr, "gen_corpus: %s\n", err);
		return 1;
	}
	layout = l;
	outdir = argv[2];
	auth = lm_auth_create(fz_key);
	if (!auth)
		die("auth");

	gen_msg();
	gen_home();
	gen_cluster();
	gen_wire();
	gen_engine_one("plain", 0);
	gen_engine_one("auth", FZ_MODE_AUTH);
	gen_engine_one("delayed-ack-small-window",
		       FZ_MODE_ACK_DELAY | FZ_MODE_SMALL_WIN);

	lm_auth_destroy(auth);
	lm_layout_free(l);
	return 0;
}
