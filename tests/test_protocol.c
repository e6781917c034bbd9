/* The whole protocol in one process: the lemuriad machines (lemuriad/
 * cluster.c) and reflector machines (reflector/home.c) of a layout, wired
 * by a simulated network, and model clients written here that speak the
 * client protocol to their lemuriad (docs/dsm.md).
 *
 * The network has one FIFO queue per (sender, receiver): exactly once and
 * in order on each channel, as the transport promises, but which channel
 * delivers next, which client takes its next step and when a lemuriad
 * runs its background work are picked at random, so channels interleave
 * arbitrarily.  Each client runs a random data-race-free program: lock
 * episodes (several locks whose records share pages homed at different
 * reflectors, nested locks that make chains), writes to bytes of its own
 * on shared pages (false sharing), barriers, and in some runs the SPLASH-2
 * pattern (CREATE, WAIT_WORK, END, WAIT_END).  Vector clocks say which
 * write each read is entitled to: a read must return the last write to
 * its bytes whenever that write happens before the read (locks, barriers,
 * CREATE and END order them; release consistency is transitive); other
 * reads are races and unchecked.  The client keeps copies and applies
 * notices and updates by liblemuria's rules (region.c
 * lm_region_apply_release).  After some barriers the clients wait until
 * the network is quiet, and every valid copy must then be at its home's
 * version and hold exactly the reference bytes (I2, I3).
 *
 * Each run is determined by (layout, relay, seed).  Environment:
 * LM_PROTO_SEEDS (seeds per layout and relay mode, default 200, 50 under
 * ASan), LM_PROTO_FIRST (the first seed, default 1), LM_PROTO_SEED (that
 * seed alone), LM_PROTO_LAYOUT (a substring of the layout's path),
 * LM_PROTO_RELAY (lazy, adaptive or eager), LM_PROTO_SCALE (1-4: programs
 * up to that many times longer), LM_PROTO_TRACE=1 (print every event as
 * it happens), LM_PROTO_VERBOSE (a summary per layout and relay mode).
 * A failing seed is run again with its trace kept, and the trace's end is
 * printed. */
#include "unit.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lemuriad.h"
#include "config.h"
#include "diff.h"
#include "home.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "reliable.h"

#define RUN 0x5151u
#define SIM_PAGES 64u   /* the region, shrunk so that every table is small */
#define SIM_NODES 32u
#define SIM_PROCS 16u
#define SIM_DPAGES 6u   /* pages the programs use */
#define SIM_LOCKS 5u
#define SIM_SLOTS 48u
#define SIM_SCALE_MAX 4u
#define SIM_BARS (2u + 6u * SIM_SCALE_MAX)
#define SIM_NOTICES 4096u
#define SIM_STEPS_MAX 2000000u
#define SIM_FETCH_MAX 8u
#define SLOT_BYTES 8u
#define TRACE_RING 4096u
#define TRACE_LINE 320u
#define TRACE_SHOW 160u /* lines of a failing run's trace printed */

/* Seeds per layout and relay mode.  The sanitizer build (make asan,
 * several times slower) is there for memory errors, which fewer runs
 * find as well. */
#ifdef __SANITIZE_ADDRESS__
#define SIM_SEEDS 50
#else
#define SIM_SEEDS 200
#endif

/* ---- the simulated network ----------------------------------------- */

struct smsg {
	struct smsg *next;
	uint16_t src, dst;
	uint8_t kind;       /* enum lm_rel_msg_kind */
	uint32_t req_id;
	size_t len;
	uint8_t bytes[];    /* lm_msg_encode's, as a daemon would send it */
};

struct chan {
	struct smsg *head, *tail;
	uint32_t live;      /* index in S.live + 1, 0 when empty */
};

/* ---- the model ----------------------------------------------------- */

/* Eight bytes of a page that one lock guards, or that one rank owns. */
struct slot {
	uint32_t page, off;
	int lock;           /* index into S.lock; -1: owned by `owner` */
	uint32_t owner;
	bool written;
	uint64_t value;     /* the last write (in the simulation's order) */
	uint32_t wrank, wtime; /* its writer and the writer's clock */
};

struct mlock {
	uint32_t id;
	uint32_t slots[3], nslots;
	int holder;         /* rank, -1: free */
	uint32_t vc[SIM_PROCS]; /* its last releaser's clock */
};

struct bar {
	uint32_t id;
	bool gate;          /* the clients wait for a quiet network after it */
	uint32_t arrived, released;
	uint32_t vc[SIM_PROCS];
};

/* A client's copy of a page (liblemuria's region state, reduced to what
 * the protocol sees: valid or not, version, bytes, twin). */
struct pcopy {
	bool valid, dirty;
	uint32_t version;
	uint64_t since;     /* step it was installed or last kept */
	char how;           /* F fetched, K kept (sole writer), U updated */
	uint8_t *data, *twin;
};

enum act_type {
	A_JOIN, A_READ, A_WRITE, A_LOCK, A_UNLOCK, A_BARRIER, A_CREATE,
	A_WAIT_WORK, A_END, A_WAIT_END
};

static const char *const act_names[] = {
	"JOIN", "READ", "WRITE", "LOCK", "UNLOCK", "BARRIER", "CREATE",
	"WAIT_WORK", "END", "WAIT_END",
};

struct act {
	uint8_t type;
	uint16_t arg;       /* slot, lock index, barrier, rank or count */
};

struct proc {
	uint32_t rank, cluster;
	uint16_t node, lnode;
	struct pcopy copy[SIM_PAGES];
	uint32_t vc[SIM_PROCS];
	struct act *prog;
	size_t nprog, cap, pc;
	uint32_t next_req;
	bool wait_flush, wait_main;
	uint32_t flush_req, main_req;
	uint32_t ask[SIM_FETCH_MAX], nask; /* a fetch's pages */
	uint8_t stage;      /* CREATE, END: 1 flushing, 2 sent */
	uint32_t bar_seq;   /* barriers passed */
	bool held[SIM_LOCKS];
	bool gated, done;
};

static struct sim {
	/* the layout and its machines */
	struct lm_layout *layout;
	const char *path;
	enum lm_relay_mode relay;
	uint64_t seed;
	uint32_t nrefl, nclus, nprocs, nnodes, ps, npages;
	lm_home *home[SIM_NODES];
	lm_lemuriad *clus[SIM_NODES];
	uint16_t ctx[SIM_NODES];   /* each machine's ctx: its node id */
	bool bg[SIM_NODES];        /* background work asked for (later) */
	/* the network */
	struct chan chan[SIM_NODES * SIM_NODES];
	uint32_t live[SIM_NODES * SIM_NODES], nlive;
	struct lm_notice nbuf[SIM_NOTICES];
	uint8_t *flushbuf, *diffbuf;
	size_t flushcap;
	/* the run's choices */
	bool create, tiny, updates;
	uint32_t prefetch, p_net;
	uint32_t scale;            /* programs this many times longer */
	/* the model */
	struct proc proc[SIM_PROCS];
	uint32_t dpage[SIM_DPAGES], ndpages;
	struct slot slot[SIM_SLOTS];
	uint32_t nslots;
	struct mlock lock[SIM_LOCKS];
	uint32_t nlocks;
	struct bar bar[SIM_BARS];
	uint32_t nbars;
	uint8_t *ref[SIM_PAGES];   /* every write, in order (NULL: zeros) */
	uint8_t *zero;
	uint32_t create_vc[SIM_PROCS][SIM_PROCS];
	bool created[SIM_PROCS];
	uint32_t end_vc[SIM_PROCS], ends;
	uint64_t step, wcount, reads_checked;
	uint32_t stuck;
	/* failure and trace */
	bool failed;
	char why[1024];
	bool tracing, trace_all;
	uint64_t ntrace;
} S;

static char trace_ring[TRACE_RING][TRACE_LINE];

static void describe_run(void);
static void sim_start(void);
static uint64_t env_u64(const char *name, uint64_t def);

static uint64_t rng_state;

/* Out of memory in a test: nothing sensible is left to check. */
static void *must(void *p)
{
	if (!p) {
		fprintf(stderr, "protocol: out of memory\n");
		abort();
	}
	return p;
}

/* splitmix64: small, fast, and every seed gives its own stream */
static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rnd(uint32_t n)
{
	return n ? (uint32_t)(rng_next() % n) : 0;
}

static void tracef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void tracef(const char *fmt, ...)
{
	char *line = trace_ring[S.ntrace % TRACE_RING];
	va_list ap;

	if (!S.tracing)
		return;
	va_start(ap, fmt);
	vsnprintf(line, TRACE_LINE, fmt, ap);
	va_end(ap);
	S.ntrace++;
	if (S.trace_all)
		fprintf(stderr, "  %s\n", line);
}

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void failf(const char *fmt, ...)
{
	int n;
	va_list ap;

	if (S.failed)
		return;
	S.failed = true;
	n = snprintf(S.why, sizeof(S.why), "step %llu: ",
		     (unsigned long long)S.step);
	va_start(ap, fmt);
	vsnprintf(S.why + n, sizeof(S.why) - (size_t)n, fmt, ap);
	va_end(ap);
	tracef("FAIL %s", S.why);
}

/* Errors a machine logs are failures; warnings go to the trace. */
static void log_sink(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	if (level == LM_LOG_ERROR)
		failf("logged: %s", msg);
	else
		tracef("%6llu   log: %s", (unsigned long long)S.step, msg);
}

/* ---- nodes ---------------------------------------------------------- */

static bool is_refl(uint16_t n)
{
	return n >= 1 && n <= S.nrefl;
}

static bool is_clus(uint16_t n)
{
	return n > S.nrefl && n <= S.nrefl + S.nclus;
}

static struct proc *proc_of(uint16_t n)
{
	if (n <= S.nrefl + S.nclus || n >= S.nnodes)
		return NULL;
	return &S.proc[n - S.nrefl - S.nclus - 1];
}

static const char *node_name(uint16_t n, char *buf, size_t cap)
{
	if (is_refl(n))
		snprintf(buf, cap, "%s", S.layout->reflectors[n - 1].name);
	else if (is_clus(n))
		snprintf(buf, cap, "%s",
			 S.layout->clusters[n - S.nrefl - 1].name);
	else if (proc_of(n))
		snprintf(buf, cap, "rank%u", proc_of(n)->rank);
	else
		snprintf(buf, cap, "node%u", n);
	return buf;
}

/* ---- messages -------------------------------------------------------- */

static void fmt_msg(char *buf, size_t cap, const struct lm_msg *m)
{
	size_t n = 0;

#define PUT(...)                                                             \
	do {                                                                 \
		if (n < cap)                                                 \
			n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__); \
	} while (0)
	PUT("%s", lm_msg_name(m->type));
	if (m->id)
		PUT(" id=%u", m->id);
	if (m->rank && m->type != LM_MSG_FLUSH)
		PUT(" rank=%u", m->rank);
	if (m->type == LM_MSG_FETCH || m->type == LM_MSG_PAGE ||
	    m->type == LM_MSG_PULL || m->type == LM_MSG_DELTA)
		PUT(" page=%u v=%u", m->page, m->version);
	if (m->status)
		PUT(" status=%d", m->status);
	if (m->epoch)
		PUT(" epoch=%u", m->epoch);
	if (m->type == LM_MSG_FLUSH)
		PUT(" rank=%u", m->rank);
	if (m->nnotices) {
		PUT(" [");
		for (uint32_t i = 0; i < m->nnotices && i < 12; i++) {
			const struct lm_notice *x = &m->notices[i];

			PUT("%s%u@%u", i ? " " : "", x->page, x->version);
			if (m->type == LM_MSG_FETCHV || m->type == LM_MSG_PAGES)
				continue;
			PUT("/b%d/w%d/c%d", (int)x->base, (int)x->writer,
			    (int)x->wcluster);
		}
		PUT("%s]", m->nnotices > 12 ? " ..." : "");
	}
	if (m->diffs.count) {
		size_t pos = 0, len;
		uint32_t page, k = 0;
		const uint8_t *d;

		PUT(" d{");
		while (k < 12 && lm_msg_diffs_next(&m->diffs, &pos, &page, &d,
						   &len) == 1)
			PUT("%s%u:%zu", k++ ? " " : "", page, len);
		PUT("}");
	}
	if (m->data_len && m->type != LM_MSG_ABORT)
		PUT(" data=%zu", m->data_len);
	if (m->type == LM_MSG_ABORT)
		PUT(" \"%.*s\"", (int)m->data_len,
		    m->data ? (const char *)m->data : "");
#undef PUT
}

static const char *const kind_names[] = { "send", "req", "reply" };

static void chan_push(uint16_t src, uint16_t dst, struct smsg *x)
{
	struct chan *ch = &S.chan[src * SIM_NODES + dst];

	if (ch->tail)
		ch->tail->next = x;
	else
		ch->head = x;
	ch->tail = x;
	if (!ch->live) {
		S.live[S.nlive++] = src * SIM_NODES + dst;
		ch->live = S.nlive;
	}
}

static struct smsg *chan_pop(uint32_t ci)
{
	struct chan *ch = &S.chan[ci];
	struct smsg *x = ch->head;

	ch->head = x->next;
	if (!ch->head) {
		uint32_t at = ch->live - 1, last = S.live[--S.nlive];

		ch->tail = NULL;
		ch->live = 0;
		if (at != S.nlive) {
			S.live[at] = last;
			S.chan[last].live = at + 1;
		}
	}
	return x;
}

/* Encodes m as a daemon would and queues it on the channel src -> dst. */
static void sim_send(uint16_t src, uint16_t dst, enum lm_rel_msg_kind kind,
		     uint32_t req_id, const struct lm_msg *m)
{
	size_t len = lm_msg_encoded_len(m);
	struct smsg *x;
	char a[LM_NAME_MAX], b[LM_NAME_MAX];
	int rc;

	if (dst == 0 || dst >= S.nnodes || dst == src) {
		failf("%s sent %s to node %u", node_name(src, a, sizeof(a)),
		      lm_msg_name(m->type), dst);
		return;
	}
	x = must(malloc(sizeof(*x) + len));
	rc = lm_msg_encode(m, x->bytes, len);
	if (rc < 0 || (size_t)rc != len) {
		failf("%s's %s to %s does not encode: %s",
		      node_name(src, a, sizeof(a)), lm_msg_name(m->type),
		      node_name(dst, b, sizeof(b)), lm_strerror(rc));
		free(x);
		return;
	}
	x->next = NULL;
	x->src = src;
	x->dst = dst;
	x->kind = (uint8_t)kind;
	x->req_id = req_id;
	x->len = len;
	chan_push(src, dst, x);
}

static void cb_send(void *ctx, uint16_t node, const struct lm_msg *m)
{
	sim_send(*(uint16_t *)ctx, node, LM_REL_ONEWAY, 0, m);
}

static void cb_request(void *ctx, uint16_t node, uint32_t req_id,
		       const struct lm_msg *m)
{
	sim_send(*(uint16_t *)ctx, node, LM_REL_REQUEST, req_id, m);
}

static void cb_reply(void *ctx, uint16_t node, uint32_t req_id,
		     const struct lm_msg *m)
{
	sim_send(*(uint16_t *)ctx, node, LM_REL_REPLY, req_id, m);
}

static void cb_later(void *ctx)
{
	S.bg[*(uint16_t *)ctx] = true;
}

static const struct lm_msg_out out_cbs = { cb_send, cb_request, cb_reply,
					   cb_later };

static struct lm_msg msg(uint16_t type)
{
	struct lm_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.run = RUN;
	return m;
}

/* ---- reference and clocks ------------------------------------------ */

static const uint8_t *ref_page(uint32_t page)
{
	return S.ref[page] ? S.ref[page] : S.zero;
}

static void vc_join(uint32_t *to, const uint32_t *from)
{
	for (uint32_t i = 0; i < S.nprocs; i++)
		if (to[i] < from[i])
			to[i] = from[i];
}

/* The slot whose bytes hold offset `off` of `page`, or -1. */
static int slot_at(uint32_t page, uint32_t off)
{
	for (uint32_t i = 0; i < S.nslots; i++)
		if (S.slot[i].page == page && off >= S.slot[i].off &&
		    off < S.slot[i].off + SLOT_BYTES)
			return (int)i;
	return -1;
}

static uint32_t home_version(uint32_t page)
{
	const uint8_t *data;
	uint32_t v = 0;

	lm_home_page(S.home[lm_home_of_page(S.layout, page) + 1], page, &data,
		     &v);
	return v;
}

/* ---- model clients -------------------------------------------------- */

static void copy_alloc(struct pcopy *c)
{
	if (c->data)
		return;
	c->data = must(malloc(2 * (size_t)S.ps));
	c->twin = c->data + S.ps;
}

static void install(struct proc *p, uint32_t page, uint32_t version,
		    const uint8_t *data)
{
	struct pcopy *c = &p->copy[page];

	copy_alloc(c);
	memcpy(c->data, data, S.ps);
	memcpy(c->twin, data, S.ps);
	c->valid = true;
	c->dirty = false;
	c->version = version;
	c->since = S.step;
	c->how = 'F';
}

static uint32_t proc_req(struct proc *p)
{
	return ++p->next_req;
}

/* A client's message: its rank in it, as client.c's lm_client_msg. */
static struct lm_msg cmsg(const struct proc *p, uint16_t type)
{
	struct lm_msg m = msg(type);

	m.rank = p->rank;
	return m;
}

/* A request to the client's lemuriad; the reply is awaited as `main`. */
static void proc_call(struct proc *p, const struct lm_msg *m)
{
	p->main_req = proc_req(p);
	p->wait_main = true;
	sim_send(p->node, p->lnode, LM_REL_REQUEST, p->main_req, m);
}

/* Release: the diff of every page written since the last one goes in one
 * FLUSH (region.c keeps the twin as what was sent); true when one went. */
static bool proc_flush(struct proc *p)
{
	struct lm_msg m = cmsg(p, LM_MSG_FLUSH);
	size_t len = 0, dlen;
	uint32_t count = 0;

	for (uint32_t pg = 0; pg < S.npages; pg++) {
		struct pcopy *c = &p->copy[pg];

		if (!c->valid || !c->dirty)
			continue;
		c->dirty = false;
		if (lm_diff_encode(c->twin, c->data, S.ps, S.diffbuf,
				   lm_diff_bound(S.ps), &dlen) != 0) {
			failf("rank %u: diff of page %u does not encode",
			      p->rank, pg);
			return false;
		}
		memcpy(c->twin, c->data, S.ps);
		if (dlen == 0)
			continue;
		if (lm_msg_diffs_append(S.flushbuf, S.flushcap, &len, pg,
					S.diffbuf, dlen) != 0) {
			failf("rank %u: flush list full", p->rank);
			return false;
		}
		count++;
	}
	if (!count)
		return false;
	m.diffs = (struct lm_msg_diffs){ S.flushbuf, len, count };
	p->flush_req = proc_req(p);
	p->wait_flush = true;
	tracef("%6llu rank%u flushes %u pages", (unsigned long long)S.step,
	       p->rank, count);
	sim_send(p->node, p->lnode, LM_REL_REQUEST, p->flush_req, &m);
	return true;
}

/* A fault on an invalid page: FETCH, or FETCHV with the invalid pages
 * after it, as region.c's fetch_with_neighbours asks (n == 1: FETCH). */
static void proc_fetch(struct proc *p, uint32_t page)
{
	struct lm_notice ask[SIM_FETCH_MAX];
	struct lm_msg m;
	uint32_t after = 0;

	p->ask[0] = page;
	p->nask = 1;
	if (S.prefetch && rnd(3)) {
		after = 1 + rnd(S.prefetch < SIM_FETCH_MAX - 1 ?
				 S.prefetch : SIM_FETCH_MAX - 1);
		for (uint32_t k = 1; k <= after; k++)
			if (page + k < S.npages && !p->copy[page + k].valid)
				p->ask[p->nask++] = page + k;
	}
	if (p->nask == 1) {
		m = cmsg(p, LM_MSG_FETCH);
		m.page = page;
	} else {
		m = cmsg(p, LM_MSG_FETCHV);
		lm_msg_fetchv(&m, ask, p->ask, p->nask, after);
	}
	proc_call(p, &m);
}

/* lm_region_apply_release: a copy goes only when older than its notice,
 * unless we are the page's sole writer since the notice's base, or an
 * update brings our copy at base up to the notice (docs/dsm.md "Sole
 * writers", "Updates"). */
static void proc_apply(struct proc *p, const struct lm_msg *m, bool updates)
{
	size_t upos = 0;

	for (uint32_t i = 0; i < m->nnotices; i++) {
		uint32_t page = m->notices[i].page;

		if (page >= S.npages) {
			failf("rank %u: notice of page %u outside the region",
			      p->rank, page);
			return;
		}
		if (p->copy[page].valid && p->copy[page].dirty) {
			failf("rank %u: notice of page %u on an unflushed "
			      "copy", p->rank, page);
			return;
		}
	}
	for (uint32_t i = 0; i < m->nnotices; i++) {
		const struct lm_notice *n = &m->notices[i];
		struct pcopy *c = &p->copy[n->page];
		const uint8_t *update = NULL;
		size_t at = upos, ulen = 0;
		uint32_t upage;

		if (updates && lm_msg_diffs_next(&m->diffs, &at, &upage,
						 &update, &ulen) == 1 &&
		    upage == n->page)
			upos = at;
		else
			update = NULL;
		if (!c->valid || c->version >= n->version)
			continue;
		if (n->writer == p->rank && c->version == n->base) {
			c->version = n->version;
			c->since = S.step;
			c->how = 'K';
			continue;
		}
		if (update && c->version == n->base &&
		    lm_diff_apply_checked(c->data, c->twin, S.ps, update,
					  ulen) == 0) {
			c->version = n->version;
			c->since = S.step;
			c->how = 'U';
			continue;
		}
		c->valid = false;
	}
}

static const char *slot_desc(uint32_t s, char *buf, size_t cap)
{
	const struct slot *x = &S.slot[s];

	if (x->lock >= 0)
		snprintf(buf, cap, "slot %u (lock %u, page %u +%u)", s,
			 S.lock[x->lock].id, x->page, x->off);
	else
		snprintf(buf, cap, "slot %u (rank %u's, page %u +%u)", s,
			 x->owner, x->page, x->off);
	return buf;
}

static void do_read(struct proc *p, uint32_t s)
{
	const struct slot *x = &S.slot[s];
	const struct pcopy *c = &p->copy[x->page];
	uint64_t v, want = x->written ? x->value : 0;
	bool entitled = !x->written || x->wrank == p->rank ||
			p->vc[x->wrank] >= x->wtime;
	char d[96];

	memcpy(&v, c->data + x->off, sizeof(v));
	tracef("%6llu rank%u reads %s = %llx%s", (unsigned long long)S.step,
	       p->rank, slot_desc(s, d, sizeof(d)), (unsigned long long)v,
	       entitled ? (v == want ? " ok" : " WRONG") : " (race)");
	if (!entitled)
		return;
	S.reads_checked++;
	if (v != want)
		failf("rank %u (cluster %u) read %s = write %llu of rank %u, "
		      "expected write %llu of rank %u (its clock %u, the "
		      "reader's clock of it %u); the copy is at version %u "
		      "(%s at step %llu), the home at %u",
		      p->rank, p->cluster, slot_desc(s, d, sizeof(d)),
		      (unsigned long long)(v >> 8), (unsigned)(v & 0xff),
		      (unsigned long long)(want >> 8), (unsigned)(want & 0xff),
		      x->wtime, x->written ? p->vc[x->wrank] : 0, c->version,
		      c->how == 'F' ? "fetched" : c->how == 'K' ? "kept" :
		      "updated", (unsigned long long)c->since,
		      home_version(x->page));
}

static void do_write(struct proc *p, uint32_t s)
{
	struct slot *x = &S.slot[s];
	struct pcopy *c = &p->copy[x->page];
	uint64_t v = (++S.wcount << 8) | p->rank;
	char d[96];

	if (x->lock >= 0 ? S.lock[x->lock].holder != (int)p->rank
			 : x->owner != p->rank) {
		failf("rank %u writes %s without holding it", p->rank,
		      slot_desc(s, d, sizeof(d)));
		return;
	}
	memcpy(c->data + x->off, &v, sizeof(v));
	c->dirty = true;
	if (!S.ref[x->page]) {
		S.ref[x->page] = must(calloc(1, S.ps));
	}
	memcpy(S.ref[x->page] + x->off, &v, sizeof(v));
	x->written = true;
	x->value = v;
	x->wrank = p->rank;
	x->wtime = ++p->vc[p->rank];
	tracef("%6llu rank%u writes %s = %llx", (unsigned long long)S.step,
	       p->rank, slot_desc(s, d, sizeof(d)), (unsigned long long)v);
}

/* The copies a PAGE or PAGES brings (client.c lm_client_fetch_list). */
static void take_pages(struct proc *p, const struct lm_msg *m)
{
	size_t pos = 0, len;
	uint32_t pg, next = 0;
	const uint8_t *data;

	if (m->type == LM_MSG_PAGE) {
		if (m->page != p->ask[0] || m->data_len != S.ps) {
			failf("rank %u asked for page %u, got PAGE %u of %zu "
			      "bytes", p->rank, p->ask[0], m->page,
			      m->data_len);
			return;
		}
		install(p, m->page, m->version, m->data);
		return;
	}
	if (m->type != LM_MSG_PAGES || m->nnotices == 0 ||
	    m->notices[0].page != p->ask[0]) {
		failf("rank %u: bad answer %s to its fetch of page %u",
		      p->rank, lm_msg_name(m->type), p->ask[0]);
		return;
	}
	for (uint32_t i = 0; i < m->nnotices; i++) {
		if (lm_msg_diffs_next(&m->diffs, &pos, &pg, &data, &len) != 1 ||
		    pg != m->notices[i].page || len != S.ps) {
			failf("rank %u: malformed PAGES", p->rank);
			return;
		}
		while (next < p->nask && p->ask[next] != pg)
			next++;
		if (next == p->nask) {
			failf("rank %u: PAGES brings page %u, not asked for or "
			      "out of order", p->rank, pg);
			return;
		}
		if (!p->copy[pg].valid)
			install(p, pg, m->notices[i].version, data);
		next++;
	}
}

static void proc_main_reply(struct proc *p, const struct lm_msg *m)
{
	const struct act *a = &p->prog[p->pc];
	struct mlock *l;
	struct bar *b;

	switch (a->type) {
	case A_JOIN:
		if (m->type != LM_MSG_JOIN_OK || m->status)
			failf("rank %u: JOIN answered %s %d", p->rank,
			      lm_msg_name(m->type), m->status);
		break;
	case A_READ:
	case A_WRITE:
		take_pages(p, m);
		break;
	case A_LOCK:
		l = &S.lock[a->arg];
		if (m->type != LM_MSG_GRANT || m->id != l->id) {
			failf("rank %u: LOCK %u answered %s %u", p->rank,
			      l->id, lm_msg_name(m->type), m->id);
			break;
		}
		if (l->holder >= 0) {
			failf("rank %u granted lock %u held by rank %d",
			      p->rank, l->id, l->holder);
			break;
		}
		l->holder = (int)p->rank;
		p->held[a->arg] = true;
		proc_apply(p, m, true);
		vc_join(p->vc, l->vc);
		break;
	case A_UNLOCK:
		if (m->type != LM_MSG_UNLOCK_OK || m->status)
			failf("rank %u: UNLOCK answered %s %d", p->rank,
			      lm_msg_name(m->type), m->status);
		break;
	case A_BARRIER:
		b = &S.bar[a->arg];
		if (m->type != LM_MSG_RELEASE || m->id != b->id) {
			failf("rank %u: BARRIER %u answered %s %u", p->rank,
			      b->id, lm_msg_name(m->type), m->id);
			break;
		}
		if (b->arrived < S.nprocs) {
			failf("rank %u released from barrier %u (#%u) with %u "
			      "of %u arrived", p->rank, b->id, a->arg,
			      b->arrived, S.nprocs);
			break;
		}
		proc_apply(p, m, true);
		vc_join(p->vc, b->vc);
		b->released++;
		p->bar_seq++;
		p->gated = b->gate;
		break;
	case A_CREATE:
		if (m->type != LM_MSG_CREATE_OK || m->status)
			failf("rank %u: CREATE answered %s %d", p->rank,
			      lm_msg_name(m->type), m->status);
		break;
	case A_WAIT_WORK:
		if (m->type != LM_MSG_CREATE || m->rank != p->rank ||
		    m->offset == LM_CREATE_NO_WORK || !S.created[p->rank]) {
			failf("rank %u: WAIT_WORK answered %s rank %u", p->rank,
			      lm_msg_name(m->type), m->rank);
			break;
		}
		/* client.c lm_worker_serve: notices, no updates */
		proc_apply(p, m, false);
		vc_join(p->vc, S.create_vc[p->rank]);
		break;
	case A_END:
		if (m->type != LM_MSG_END_OK || m->status)
			failf("rank %u: END answered %s %d", p->rank,
			      lm_msg_name(m->type), m->status);
		break;
	case A_WAIT_END:
		if (m->type != LM_MSG_RELEASE || m->id != 0) {
			failf("rank %u: WAIT_END answered %s %u", p->rank,
			      lm_msg_name(m->type), m->id);
			break;
		}
		if (S.ends < a->arg) {
			failf("rank %u: WAIT_END %u answered after %u ENDs",
			      p->rank, a->arg, S.ends);
			break;
		}
		proc_apply(p, m, true);
		vc_join(p->vc, S.end_vc);
		break;
	}
}

static void proc_next(struct proc *p)
{
	p->stage = 0;
	if (++p->pc == p->nprog)
		p->done = true;
}

/* Both replies of the step are in: it completes (a fault's access is
 * made now), or a CREATE or END whose flush is acked goes on. */
static void proc_settle(struct proc *p)
{
	const struct act *a = &p->prog[p->pc];

	if ((a->type == A_CREATE || a->type == A_END) && p->stage == 1)
		return; /* the next step sends it */
	if (a->type == A_READ && p->copy[S.slot[a->arg].page].valid)
		do_read(p, a->arg);
	else if (a->type == A_WRITE && p->copy[S.slot[a->arg].page].valid)
		do_write(p, a->arg);
	else if (a->type == A_READ || a->type == A_WRITE)
		return; /* (failed) */
	if (a->type == A_END)
		p->done = true;
	proc_next(p);
}

static void proc_receive(struct proc *p, uint16_t from,
			 enum lm_rel_msg_kind kind, uint32_t req_id,
			 const struct lm_msg *m)
{
	if (m->type == LM_MSG_ABORT) {
		failf("rank %u got ABORT: %.*s", p->rank, (int)m->data_len,
		      m->data ? (const char *)m->data : "");
		return;
	}
	if (from != p->lnode || kind != LM_REL_REPLY || m->run != RUN) {
		failf("rank %u: unexpected %s from node %u", p->rank,
		      lm_msg_name(m->type), from);
		return;
	}
	if (p->wait_flush && req_id == p->flush_req) {
		if (m->type != LM_MSG_FLUSH_OK || m->status)
			failf("rank %u: FLUSH answered %s %d", p->rank,
			      lm_msg_name(m->type), m->status);
		p->wait_flush = false;
	} else if (p->wait_main && req_id == p->main_req) {
		p->wait_main = false;
		proc_main_reply(p, m);
	} else {
		failf("rank %u: %s answers no request of its (%u)", p->rank,
		      lm_msg_name(m->type), req_id);
		return;
	}
	if (!p->wait_flush && !p->wait_main && !S.failed)
		proc_settle(p);
}

static void trace_act(const struct proc *p, const struct act *a)
{
	char d[96] = "";

	if (a->type == A_READ || a->type == A_WRITE)
		slot_desc(a->arg, d, sizeof(d));
	else if (a->type == A_LOCK || a->type == A_UNLOCK)
		snprintf(d, sizeof(d), "%u", S.lock[a->arg].id);
	else if (a->type == A_BARRIER)
		snprintf(d, sizeof(d), "%u (#%u)", S.bar[a->arg].id, a->arg);
	else if (a->type != A_JOIN && a->type != A_WAIT_WORK)
		snprintf(d, sizeof(d), "%u", a->arg);
	tracef("%6llu rank%u %s %s%s", (unsigned long long)S.step, p->rank,
	       act_names[a->type], d, p->stage == 1 ? " (flushed)" : "");
}

/* One step of a client's program. */
static void proc_step(struct proc *p)
{
	const struct act *a = &p->prog[p->pc];
	struct lm_msg m;
	struct mlock *l;
	struct bar *b;
	uint32_t page;

	if (S.tracing)
		trace_act(p, a);
	switch (a->type) {
	case A_JOIN:
		m = cmsg(p, LM_MSG_JOIN);
		m.pid = 1000 + p->rank;
		m.layout_hash = S.layout->hash;
		proc_call(p, &m);
		break;
	case A_READ:
	case A_WRITE:
		page = S.slot[a->arg].page;
		if (!p->copy[page].valid) {
			proc_fetch(p, page);
			break;
		}
		if (a->type == A_READ)
			do_read(p, a->arg);
		else
			do_write(p, a->arg);
		proc_next(p);
		break;
	case A_LOCK:
		/* client.c: flush, then LOCK right behind it */
		proc_flush(p);
		m = cmsg(p, LM_MSG_LOCK);
		m.id = S.lock[a->arg].id;
		proc_call(p, &m);
		break;
	case A_UNLOCK:
		l = &S.lock[a->arg];
		if (l->holder != (int)p->rank) {
			failf("rank %u unlocks lock %u held by %d", p->rank,
			      l->id, l->holder);
			break;
		}
		p->vc[p->rank]++;
		memcpy(l->vc, p->vc, sizeof(l->vc));
		l->holder = -1;
		p->held[a->arg] = false;
		proc_flush(p);
		m = cmsg(p, LM_MSG_UNLOCK);
		m.id = l->id;
		proc_call(p, &m);
		break;
	case A_BARRIER:
		b = &S.bar[a->arg];
		p->vc[p->rank]++;
		vc_join(b->vc, p->vc);
		b->arrived++;
		proc_flush(p);
		m = cmsg(p, LM_MSG_BARRIER);
		m.id = b->id;
		proc_call(p, &m);
		break;
	case A_CREATE:
	case A_END:
		/* client.c: lm_client_flush (acked), then the request */
		if (p->stage == 0) {
			p->stage = 1;
			if (proc_flush(p))
				break;
		}
		p->stage = 2;
		p->vc[p->rank]++;
		if (a->type == A_CREATE) {
			memcpy(S.create_vc[a->arg], p->vc, sizeof(p->vc));
			S.created[a->arg] = true;
			m = msg(LM_MSG_CREATE);
			m.rank = a->arg; /* the worker */
			m.offset = 0x40;
			m.data = (const uint8_t *)"image";
			m.data_len = 5;
			proc_call(p, &m);
		} else {
			vc_join(S.end_vc, p->vc);
			S.ends++;
			m = cmsg(p, LM_MSG_END);
			proc_call(p, &m);
		}
		break;
	case A_WAIT_WORK:
		m = cmsg(p, LM_MSG_WAIT_WORK);
		proc_call(p, &m);
		break;
	case A_WAIT_END:
		proc_flush(p);
		m = cmsg(p, LM_MSG_WAIT_END);
		m.id = a->arg;
		proc_call(p, &m);
		break;
	}
}

/* ---- programs ---------------------------------------------------- */

static void emit(struct proc *p, uint8_t type, uint32_t arg)
{
	if (p->nprog == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->prog = must(realloc(p->prog, p->cap * sizeof(*p->prog)));
	}
	p->prog[p->nprog++] = (struct act){ type, (uint16_t)arg };
}

static void emit_reads(struct proc *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		emit(p, A_READ, rnd(S.nslots));
}

static void emit_lock_slots(struct proc *p, uint8_t type, uint32_t l,
			    uint32_t pct)
{
	for (uint32_t i = 0; i < S.lock[l].nslots; i++)
		if (rnd(100) < pct)
			emit(p, type, S.lock[l].slots[i]);
}

static void emit_own(struct proc *p, uint8_t type)
{
	for (uint32_t i = 0; i < S.nslots; i++)
		if (S.slot[i].lock < 0 && S.slot[i].owner == p->rank)
			emit(p, type, i);
}

/* A lock episode (alone, or a chain of two nested locks taken in index
 * order, so that no program deadlocks), writes to the client's own
 * bytes, or reads anywhere (races included: they go unchecked). */
static void emit_episode(struct proc *p)
{
	uint32_t k = rnd(100), a, b;

	if (k < 65) {
		a = rnd(S.nlocks);
		emit(p, A_LOCK, a);
		emit_lock_slots(p, A_READ, a, 100);
		emit_reads(p, rnd(3));
		if (a + 1 < S.nlocks && rnd(2)) {
			b = a + 1 + rnd(S.nlocks - a - 1);
			emit(p, A_LOCK, b);
			emit_lock_slots(p, A_READ, b, 100);
			emit_reads(p, rnd(3));
			emit_lock_slots(p, A_WRITE, b, 80);
			if (rnd(2))
				emit_lock_slots(p, A_WRITE, a, 70);
			if (rnd(2)) {
				emit(p, A_UNLOCK, b);
				emit_reads(p, rnd(2));
				emit(p, A_UNLOCK, a);
			} else {
				emit(p, A_UNLOCK, a);
				emit_reads(p, rnd(2));
				emit(p, A_UNLOCK, b);
			}
		} else {
			emit_lock_slots(p, A_WRITE, a, 75);
			emit(p, A_UNLOCK, a);
		}
		emit_reads(p, rnd(3));
	} else if (k < 85) {
		emit_own(p, A_WRITE);
		emit_reads(p, rnd(3));
	} else {
		emit_reads(p, 1 + rnd(4));
	}
}

/* A barrier, then every slot read (after the barrier every write of the
 * epoch is the reader's to see). */
static void emit_barrier(struct proc *p, uint32_t k)
{
	uint32_t order[SIM_SLOTS];

	emit(p, A_BARRIER, k);
	for (uint32_t i = 0; i < S.nslots; i++)
		order[i] = i;
	for (uint32_t i = S.nslots; i > 1; i--) {
		uint32_t j = rnd(i), t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	for (uint32_t i = 0; i < S.nslots; i++)
		emit(p, A_READ, order[i]);
}

static void emit_phases(struct proc *p, uint32_t maxep)
{
	for (uint32_t k = 0; k < S.nbars; k++) {
		uint32_t n = rnd(maxep + 1);

		for (uint32_t e = 0; e < n; e++)
			emit_episode(p);
		emit_barrier(p, k);
	}
}

/* ---- the layout's data ---------------------------------------------- */

static bool dpage_has(uint32_t page)
{
	for (uint32_t i = 0; i < S.ndpages; i++)
		if (S.dpage[i] == page)
			return true;
	return false;
}

/* A free 8-byte cell of `page`: near the start in dense runs (the
 * clients' diffs then touch each other), anywhere else. */
static uint32_t free_off(uint32_t page, bool dense)
{
	for (;;) {
		uint32_t off = SLOT_BYTES * rnd(dense ? 24 : S.ps / SLOT_BYTES);

		if (slot_at(page, off) < 0)
			return off;
	}
}

static void add_slot(uint32_t page, int lock, uint32_t owner, bool dense)
{
	struct slot *x = &S.slot[S.nslots++];

	memset(x, 0, sizeof(*x));
	x->page = page;
	x->off = free_off(page, dense);
	x->lock = lock;
	x->owner = owner;
}

static void gen_data(void)
{
	bool dense = rnd(2);

	/* pages near each other (a FETCHV brings neighbours along) and
	 * apart, over the homes */
	S.ndpages = 3 + rnd(SIM_DPAGES - 2);
	for (uint32_t i = 0; i < S.ndpages; i++) {
		uint32_t pg;

		do {
			if (i && rnd(10) < 4)
				pg = S.dpage[rnd(i)] + 1;
			else
				pg = rnd(S.npages - 1);
		} while (pg >= S.npages - 1 || dpage_has(pg));
		S.dpage[i] = pg;
	}
	if (S.nrefl > 1 && lm_home_of_page(S.layout, S.dpage[0]) ==
			   lm_home_of_page(S.layout, S.dpage[1])) {
		uint32_t pg = (S.dpage[1] + LM_HOME_PAGE_BLOCK) %
			      (S.npages - 1);

		while (dpage_has(pg))
			pg = (pg + 1) % (S.npages - 1);
		S.dpage[1] = pg;
	}
	S.nslots = 0;
	S.nlocks = 2 + rnd(SIM_LOCKS - 1);
	for (uint32_t l = 0; l < S.nlocks; l++) {
		struct mlock *x = &S.lock[l];
		bool taken;

		memset(x, 0, sizeof(*x));
		x->holder = -1;
		do { /* ids spread the locks over the managers */
			x->id = 1 + rnd(16);
			taken = false;
			for (uint32_t k = 0; k < l; k++)
				taken |= S.lock[k].id == x->id;
		} while (taken);
		x->nslots = 1 + rnd(3);
		for (uint32_t i = 0; i < x->nslots; i++) {
			/* a lock's slots lie on different pages */
			uint32_t first = rnd(S.ndpages);
			uint32_t pg = S.dpage[(first + i) % S.ndpages];

			x->slots[i] = S.nslots;
			add_slot(pg, (int)l, 0, dense);
		}
	}
	for (uint32_t r = 0; r < S.nprocs; r++)
		add_slot(S.dpage[rnd(S.ndpages)], -1, r, dense);
}

static void gen_programs(void)
{
	uint32_t maxep = 1 + rnd(6 * S.scale);

	S.nbars = 2 + rnd(6 * S.scale);
	for (uint32_t k = 0; k < S.nbars; k++) {
		memset(&S.bar[k], 0, sizeof(S.bar[k]));
		S.bar[k].id = 1 + rnd(6);
		S.bar[k].gate = k == S.nbars - 1 || rnd(3) == 0;
	}
	for (uint32_t r = 0; r < S.nprocs; r++) {
		struct proc *p = &S.proc[r];

		emit(p, A_JOIN, 0);
		if (!S.create) {
			emit_phases(p, maxep);
			continue;
		}
		/* the SPLASH-2 pattern: rank 0 works, creates every
		 * worker (more work between), everyone computes with
		 * barriers, the workers end and rank 0 waits for them */
		if (r == 0) {
			for (uint32_t w = 1; w < S.nprocs; w++) {
				uint32_t n = rnd(3);

				for (uint32_t e = 0; e < n; e++)
					emit_episode(p);
				emit(p, A_CREATE, w);
			}
		} else {
			emit(p, A_WAIT_WORK, 0);
		}
		emit_phases(p, maxep);
		if (r == 0) {
			emit(p, A_WAIT_END, S.nprocs - 1);
			for (uint32_t i = 0; i < S.nslots; i++)
				emit(p, A_READ, i);
		} else {
			for (uint32_t n = rnd(3), e = 0; e < n; e++)
				emit_episode(p);
			emit(p, A_END, 0);
		}
	}
}

/* ---- quiescent checks ------------------------------------------------ */

/* The first offset where `page`'s bytes differ from the writes, and the
 * slot there, for a message. */
static const char *first_diff(uint32_t page, const uint8_t *data,
			      char *buf, size_t cap)
{
	uint32_t off = 0;
	char d[96];
	int s;

	while (data[off] == ref_page(page)[off])
		off++;
	s = slot_at(page, off);
	snprintf(buf, cap, "+%u (%s)", off,
		 s >= 0 ? slot_desc((uint32_t)s, d, sizeof(d)) : "no slot");
	return buf;
}

/* The network is quiet after a barrier every client passed and none has
 * gone on from.  Each valid copy must be at its home's version (the
 * barrier's notices reached every copy, I3) and hold every write (I2:
 * the data of each is at its home or pulled from where it is pending).
 * With eager relay every registration carried its data, so each home's
 * own copy must hold every write too. */
static void check_quiet(uint32_t k)
{
	char d[160];

	for (uint32_t pg = 0; pg < S.npages && S.relay == LM_RELAY_EAGER;
	     pg++) {
		const uint8_t *data;
		uint32_t v;

		lm_home_page(S.home[lm_home_of_page(S.layout, pg) + 1], pg,
			     &data, &v);
		if (memcmp(data ? data : S.zero, ref_page(pg), S.ps)) {
			failf("after barrier #%u page %u at its home (version "
			      "%u) differs from the writes at %s", k, pg, v,
			      first_diff(pg, data ? data : S.zero, d,
					 sizeof(d)));
			return;
		}
	}
	for (uint32_t r = 0; r < S.nprocs && !S.failed; r++) {
		struct proc *p = &S.proc[r];

		if (p->done)
			continue;
		for (uint32_t pg = 0; pg < S.npages; pg++) {
			const struct pcopy *c = &p->copy[pg];
			uint32_t v;

			if (!c->valid)
				continue;
			v = home_version(pg);
			if (c->version != v) {
				failf("after barrier #%u rank %u holds page "
				      "%u at version %u (%c at step %llu), "
				      "its home at %u", k, r, pg, c->version,
				      c->how, (unsigned long long)c->since, v);
				return;
			}
			if (memcmp(c->data, ref_page(pg), S.ps)) {
				failf("after barrier #%u rank %u's copy of "
				      "page %u at version %u (%c at step %llu) "
				      "differs from the writes at %s", k, r, pg,
				      c->version, c->how,
				      (unsigned long long)c->since,
				      first_diff(pg, c->data, d, sizeof(d)));
				return;
			}
		}
	}
	tracef("%6llu quiet after barrier #%u: every copy checked",
	       (unsigned long long)S.step, k);
}

/* ---- running ---------------------------------------------------------- */

static void deliver(uint32_t ci)
{
	struct smsg *x = chan_pop(ci);
	struct lm_msg m;
	char a[LM_NAME_MAX], b[LM_NAME_MAX], t[TRACE_LINE];
	int rc = lm_msg_decode(x->bytes, x->len, &m, S.nbuf, SIM_NOTICES);

	if (rc) {
		failf("%s's message to %s does not decode: %s",
		      node_name(x->src, a, sizeof(a)),
		      node_name(x->dst, b, sizeof(b)), lm_strerror(rc));
		free(x);
		return;
	}
	if (S.tracing) {
		fmt_msg(t, sizeof(t), &m);
		tracef("%6llu %s -> %s %s#%u %s", (unsigned long long)S.step,
		       node_name(x->src, a, sizeof(a)),
		       node_name(x->dst, b, sizeof(b)), kind_names[x->kind],
		       x->req_id, t);
	}
	if (is_refl(x->dst))
		lm_home_handle(S.home[x->dst], x->src,
			       (enum lm_rel_msg_kind)x->kind, x->req_id, &m);
	else if (is_clus(x->dst))
		lm_lemuriad_handle(S.clus[x->dst], x->src,
				  (enum lm_rel_msg_kind)x->kind, x->req_id, &m);
	else
		proc_receive(proc_of(x->dst), x->src,
			     (enum lm_rel_msg_kind)x->kind, x->req_id, &m);
	free(x);
}

static bool runnable(const struct proc *p)
{
	return !p->done && !p->gated && !p->wait_flush && !p->wait_main;
}

/* The gated clients go on once every client has passed the barrier and
 * the network is quiet. */
static bool open_gate(void)
{
	uint32_t k = UINT32_MAX;

	for (uint32_t r = 0; r < S.nprocs; r++)
		if (S.proc[r].gated)
			k = S.proc[r].bar_seq - 1;
	if (k == UINT32_MAX || S.bar[k].released < S.nprocs)
		return false;
	check_quiet(k);
	for (uint32_t r = 0; r < S.nprocs; r++)
		S.proc[r].gated = false;
	return true;
}

static void tick_all(void)
{
	for (uint32_t i = 0; i < S.nclus; i++)
		lm_lemuriad_tick(S.clus[S.nrefl + 1 + i]);
}

static void run_loop(void)
{
	struct proc *run[SIM_PROCS];
	uint16_t bgs[SIM_NODES];

	while (!S.failed) {
		uint32_t nrun = 0, nbg = 0, pick;

		for (uint32_t r = 0; r < S.nprocs; r++)
			if (runnable(&S.proc[r]))
				run[nrun++] = &S.proc[r];
		for (uint16_t n = 1; n < S.nnodes; n++)
			if (S.bg[n])
				bgs[nbg++] = n;
		if (S.nlive + nrun + nbg == 0) {
			bool done = true;

			for (uint32_t r = 0; r < S.nprocs; r++)
				done &= S.proc[r].done;
			if (done)
				return;
			if (open_gate())
				continue;
			/* only time can help: a recalled token waits for
			 * a fresh client at most two ticks */
			if (++S.stuck > 4) {
				failf("deadlock: no message in flight, no "
				      "client can go on");
				return;
			}
			tracef("%6llu tick", (unsigned long long)S.step);
			tick_all();
			continue;
		}
		S.stuck = 0;
		if (++S.step > SIM_STEPS_MAX) {
			failf("no end after %u steps", SIM_STEPS_MAX);
			return;
		}
		if (rnd(4096) == 0) { /* a second passes now and then */
			tracef("%6llu tick", (unsigned long long)S.step);
			tick_all();
		}
		if (S.nlive && (nrun + nbg == 0 || rnd(100) < S.p_net)) {
			deliver(S.live[rnd(S.nlive)]);
			continue;
		}
		pick = rnd(nrun + nbg);
		if (pick < nrun) {
			proc_step(run[pick]);
		} else {
			uint16_t n = bgs[pick - nrun];

			S.bg[n] = false;
			tracef("%6llu %s background",
			       (unsigned long long)S.step,
			       S.layout->clusters[n - S.nrefl - 1].name);
			if (lm_lemuriad_background(S.clus[n]))
				S.bg[n] = true;
		}
	}
}

struct saved_layout {
	uint64_t shared_size;
	uint64_t ccache[SIM_NODES], rcache[SIM_NODES];
};

static void sim_free(void)
{
	for (uint32_t i = 0; i < S.nlive; i++) {
		struct chan *ch = &S.chan[S.live[i]];

		while (ch->head) {
			struct smsg *x = ch->head;

			ch->head = x->next;
			free(x);
		}
		ch->tail = NULL;
		ch->live = 0;
	}
	S.nlive = 0;
	for (uint16_t n = 1; n < S.nnodes; n++) {
		if (is_refl(n))
			lm_home_destroy(S.home[n]);
		else if (is_clus(n))
			lm_lemuriad_destroy(S.clus[n]);
		S.home[n] = NULL;
		S.clus[n] = NULL;
	}
	for (uint32_t r = 0; r < S.nprocs; r++) {
		for (uint32_t pg = 0; pg < SIM_PAGES; pg++)
			free(S.proc[r].copy[pg].data);
		free(S.proc[r].prog);
	}
	for (uint32_t pg = 0; pg < SIM_PAGES; pg++)
		free(S.ref[pg]);
	free(S.zero);
	free(S.flushbuf);
	free(S.diffbuf);
}

/* One run: true when it passed (S.why says why not). */
static bool sim_run(struct lm_layout *l, const struct saved_layout *orig,
		    enum lm_relay_mode relay, uint64_t seed, bool tracing)
{
	struct lm_layout *layout = l;
	bool ok;

	memset(&S, 0, sizeof(S));
	S.layout = layout;
	S.path = layout->path;
	S.relay = relay;
	S.seed = seed;
	S.tracing = tracing;
	S.trace_all = tracing && getenv("LM_PROTO_TRACE") &&
		      strcmp(getenv("LM_PROTO_TRACE"), "1") == 0;
	rng_state = seed * 0x2545f4914f6cdd1dull + relay;
	S.scale = (uint32_t)env_u64("LM_PROTO_SCALE", 1);
	if (S.scale < 1 || S.scale > SIM_SCALE_MAX)
		S.scale = 1;
	S.nrefl = (uint32_t)layout->nreflectors;
	S.nclus = (uint32_t)layout->nclusters;
	S.nprocs = layout->nprocs;
	S.nnodes = S.nrefl + S.nclus + S.nprocs + 1;
	S.ps = layout->page_size;
	S.npages = SIM_PAGES;
	CU_ASSERT_FATAL(S.nnodes <= SIM_NODES && S.nprocs <= SIM_PROCS);

	/* this run's layout: the region shrunk, the relay, and choices */
	layout->shared_size = (uint64_t)SIM_PAGES * S.ps;
	layout->relay = relay;
	/* the simulated clients keep copies of their own (copy = client) */
	layout->copy = LM_COPY_CLIENT;
	for (size_t i = 0; i < layout->nclusters; i++)
		layout->clusters[i].copy = LM_COPY_CLIENT;
	S.updates = rnd(2);
	layout->updates = S.updates;
	S.prefetch = (uint32_t[]){ 0, 3, 31 }[rnd(3)];
	layout->prefetch = S.prefetch;
	/* a layout whose caches are smaller than its region keeps them so */
	S.tiny = orig->ccache[0] < orig->shared_size || rnd(5) == 0;
	for (uint32_t i = 0; i < S.nclus; i++)
		layout->clusters[i].cache_size =
			S.tiny ? (uint64_t)(2 + rnd(5)) * S.ps
			       : orig->ccache[i];
	for (uint32_t i = 0; i < S.nrefl; i++)
		layout->reflectors[i].cache_size =
			S.tiny ? (uint64_t)(1 + rnd(4)) * S.ps
			       : orig->rcache[i];
	S.create = S.nprocs >= 3 && rnd(10) < 3;
	S.p_net = (uint32_t[]){ 25, 50, 80 }[rnd(3)];

	sim_start();
	gen_data();
	gen_programs();
	if (S.trace_all)
		describe_run();

	lm_log_set_sink(log_sink, NULL);
	lm_log_set_level(S.tracing ? LM_LOG_WARN : LM_LOG_ERROR);
	run_loop();
	lm_log_set_sink(NULL, NULL);
	lm_log_set_level(LM_LOG_ERROR);
	ok = !S.failed;
	sim_free();
	return ok;
}

/* The machines and the clients of S.layout as it is set now. */
static void sim_start(void)
{
	const struct lm_layout *layout = S.layout;

	S.zero = calloc(1, S.ps);
	S.flushcap = (size_t)SIM_PAGES *
		     (lm_diff_bound(S.ps) + LM_MSG_DIFFS_ENTRY_HDR);
	S.flushbuf = malloc(S.flushcap);
	S.diffbuf = malloc(lm_diff_bound(S.ps));
	CU_ASSERT_FATAL(S.zero && S.flushbuf && S.diffbuf);
	for (uint16_t n = 1; n < S.nnodes; n++) {
		S.ctx[n] = n;
		if (is_refl(n)) {
			S.home[n] = lm_home_create(layout, n, &out_cbs,
						   &S.ctx[n]);
			CU_ASSERT_PTR_NOT_NULL_FATAL(S.home[n]);
		} else if (is_clus(n)) {
			const struct lm_cluster_cfg *c =
				&layout->clusters[n - S.nrefl - 1];

			CU_ASSERT_FATAL(c->id == n);
			S.clus[n] = lm_lemuriad_create(layout, c->name,
						      layout->hash, &out_cbs,
						      &S.ctx[n]);
			CU_ASSERT_PTR_NOT_NULL_FATAL(S.clus[n]);
		}
	}
	for (uint32_t r = 0; r < S.nprocs; r++) {
		const struct lm_cluster_cfg *c =
			lm_layout_cluster_of_rank(layout, r);
		struct proc *p = &S.proc[r];

		p->rank = r;
		p->node = lm_layout_client_id(layout, r);
		p->lnode = c->id;
		p->cluster = (uint32_t)(c - layout->clusters);
		CU_ASSERT_FATAL(proc_of(p->node) == p);
	}
}

static const char *relay_name(enum lm_relay_mode r)
{
	return r == LM_RELAY_LAZY ? "lazy" :
	       r == LM_RELAY_EAGER ? "eager" : "adaptive";
}

/* What the run was: its choices and its data (still in S after it). */
static void describe_run(void)
{
	char d[96];

	fprintf(stderr, "  seed %llu, %s, relay %s, updates %s, prefetch %u, "
		"%s caches, %s, %u%% deliveries\n",
		(unsigned long long)S.seed, S.path, relay_name(S.relay),
		S.updates ? "on" : "off", S.prefetch,
		S.tiny ? "tiny" : "large", S.create ? "CREATE" : "SPMD",
		S.p_net);
	for (uint32_t i = 0; i < S.nslots; i++)
		fprintf(stderr, "  %s\n", slot_desc(i, d, sizeof(d)));
	for (uint32_t k = 0; k < S.nbars; k++)
		fprintf(stderr, "  barrier #%u: id %u%s\n", k, S.bar[k].id,
			S.bar[k].gate ? ", quiet check" : "");
}

static void print_trace(void)
{
	uint64_t from = S.ntrace > TRACE_SHOW ? S.ntrace - TRACE_SHOW : 0;

	describe_run();
	if (S.trace_all)
		return;
	for (uint64_t i = from; i < S.ntrace; i++)
		fprintf(stderr, "  %s\n", trace_ring[i % TRACE_RING]);
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 10) : def;
}

/* Every seed on `path` with each relay mode. */
static void run_layout(const char *path)
{
	static const enum lm_relay_mode relays[] = {
		LM_RELAY_LAZY, LM_RELAY_ADAPTIVE, LM_RELAY_EAGER,
	};
	const char *want_layout = getenv("LM_PROTO_LAYOUT");
	const char *want_relay = getenv("LM_PROTO_RELAY");
	uint64_t nseeds = env_u64("LM_PROTO_SEEDS", SIM_SEEDS);
	uint64_t first = env_u64("LM_PROTO_FIRST", 1);
	struct lm_layout *l = NULL;
	struct saved_layout orig;
	enum lm_log_level level = lm_log_get_level();
	char err[256];

	if (want_layout && *want_layout && !strstr(path, want_layout))
		return;
	if (getenv("LM_PROTO_SEED") && *getenv("LM_PROTO_SEED")) {
		first = env_u64("LM_PROTO_SEED", 1);
		nseeds = 1;
	}
	if (lm_layout_load(path, &l, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		CU_FAIL_FATAL("layout does not load");
	}
	orig.shared_size = l->shared_size;
	for (size_t i = 0; i < l->nclusters && i < SIM_NODES; i++)
		orig.ccache[i] = l->clusters[i].cache_size;
	for (size_t i = 0; i < l->nreflectors && i < SIM_NODES; i++)
		orig.rcache[i] = l->reflectors[i].cache_size;
	for (size_t ri = 0; ri < sizeof(relays) / sizeof(relays[0]); ri++) {
		uint64_t failed = 0, checked = 0, steps = 0;
		bool traced = false;
		clock_t t0 = clock();

		if (want_relay && *want_relay &&
		    strcmp(want_relay, relay_name(relays[ri])))
			continue;
		for (uint64_t s = first; s < first + nseeds; s++) {
			bool trace = nseeds == 1;

			if (sim_run(l, &orig, relays[ri], s, trace)) {
				checked += S.reads_checked;
				steps += S.step;
				continue;
			}
			failed++;
			fprintf(stderr, "\nprotocol: %s, relay %s, seed %llu "
				"(updates %s, prefetch %u, %s caches, %s): "
				"%s\n", path, relay_name(relays[ri]),
				(unsigned long long)s, S.updates ? "on" : "off",
				S.prefetch, S.tiny ? "tiny" : "large",
				S.create ? "CREATE" : "SPMD", S.why);
			if (traced)
				continue;
			traced = true;
			if (!trace) {
				char why[sizeof(S.why)];

				memcpy(why, S.why, sizeof(why));
				sim_run(l, &orig, relays[ri], s, true);
				if (strcmp(why, S.why))
					fprintf(stderr, "protocol: not the "
						"same again: %s\n", S.why);
			}
			fprintf(stderr, "protocol: the end of its trace "
				"(LM_PROTO_LAYOUT=%s LM_PROTO_RELAY=%s "
				"LM_PROTO_SEED=%llu LM_PROTO_SCALE=%u "
				"LM_PROTO_TRACE=1 for all of it):\n", path,
				relay_name(relays[ri]), (unsigned long long)s,
				S.scale);
			print_trace();
		}
		if (failed || getenv("LM_PROTO_VERBOSE"))
			fprintf(stderr, "protocol: %s, relay %s: %llu of %llu "
				"seeds failed (%llu steps, %llu reads checked, "
				"%.2f s)\n", path, relay_name(relays[ri]),
				(unsigned long long)failed,
				(unsigned long long)nseeds,
				(unsigned long long)steps,
				(unsigned long long)checked,
				(double)(clock() - t0) / CLOCKS_PER_SEC);
		CU_ASSERT_EQUAL(failed, 0);
	}
	lm_log_set_level(level);
	l->shared_size = orig.shared_size;
	lm_layout_free(l);
}

static void test_two_reflectors(void)
{
	run_layout("conf/2x2-two-reflectors.ini");
}

static void test_three_reflectors(void)
{
	run_layout("conf/3-reflectors.ini");
}

static void test_one_reflector(void)
{
	run_layout("conf/4+4.ini");
}

static void test_small_cache(void)
{
	run_layout("conf/4+4-small-cache.ini");
}

LM_TEST_SUITE("protocol",
	      LM_TEST(test_two_reflectors),
	      LM_TEST(test_three_reflectors),
	      LM_TEST(test_one_reflector),
	      LM_TEST(test_small_cache))
