/* The client runtime: lemuria.h's calls over one blocking transport
 * endpoint to this cluster's lemuriad (docs/dsm.md).  Memory faults are
 * handled by the region (region.h), which asks us for pages through a
 * backend callback; releases flush the region's diffs, acquires apply
 * the write notices that come back. */
#include "lemuria.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "copy_set.h"
#include "fdpass.h"
#include "globals.h"
#include "launcher_env.h"
#include "link_config.h"
#include "lm_error.h"
#include "log.h"
#include "loss.h"
#include "mem.h"
#include "proto.h"
#include "region.h"
#include "rpc.h"
#include "segment.h"
#include "udp.h"

/* A FLUSH request carries at most this many bytes of diffs. */
#define LM_CLIENT_FLUSH_CHUNK (1u << 20)
/* How long a client of a copy = cluster cluster waits, after its JOIN is
 * answered, for the copy the lemuriad sent before answering. */
#define LM_CLIENT_COPY_WAIT_MS 5000
/* Locks one process may hold at once (nesting depth). */
#define LM_CLIENT_MAX_HELD 64
/* The most LEMURIA_ACK_DELAY_US may ask a reply's ack to wait for the
 * next request (it is capped by a quarter of rto_min as well). */
#define LM_CLIENT_ACK_DELAY_MAX_US 1000000

/* Where a process's time went (LEMURIA_PROFILE, docs/performance.md):
 * each item is a count and the microseconds spent in it. */
struct lm_profile_item {
	uint64_t n, us;
};

struct lm_client_profile {
	uint64_t start_us;
	struct lm_profile_item fetch, flush, barrier, lock, unlock, other,
		apply;
};

struct lm_client {
	int ready;
	struct lm_layout *layout;
	const struct lm_cluster_cfg *cluster;
	uint32_t rank;
	uint64_t run;
	lm_auth *auth;
	lm_rpc *rpc;
	struct lm_notice *notices; /* decoding buffer, one per page */
	size_t notice_cap;
	uint32_t next_create;      /* rank 0: next rank lm_create starts */
	/* rank 0: its globals sent as an image at each CREATE (0), to be
	 * shared from the first (1, lm_share_globals), shared (2: desc is
	 * what CREATE carries), sent as an image as sharing failed (-1) */
	int globals;
	uint8_t globals_desc[LM_GLOBALS_DESC_BYTES];
	int held[LM_CLIENT_MAX_HELD];
	int nheld;
	pid_t pid;                 /* the process that joined, not a fork */
	bool lost;                 /* a call failed: the run is over for us */
	struct lm_client_profile prof;
};

static struct lm_client lm_self;

/* Every reply buffer goes back to the endpoint, which keeps the big ones
 * (a RELEASE's updates, a PAGES) for the next replies: a buffer malloc'd
 * afresh costs a page fault a page when its reply is copied in. */
static void lm_client_buf_free(void *buf)
{
	lm_rpc_buf_free(lm_self.rpc, buf);
}

static void lm_profile_add(struct lm_profile_item *it, uint64_t since)
{
	it->n++;
	it->us += lm_clock_us() - since;
}

/* Logs "rank R: what: cause (lemuriad NAME at ADDR)". */
static int lm_client_fail(const char *what, int rc)
{
	char addr[32] = "?";

	if (lm_self.cluster)
		lm_addr_str(&lm_self.cluster->addr, addr, sizeof(addr));
	if (rc == LM_EAUTH) {
		lm_log_error("rank %u: %s: lemuriad %s at %s answers, but "
			     "its datagrams fail authentication: this "
			     "layout's secret_file differs from the one the "
			     "daemons were started with (every host needs "
			     "the same secret)",
			     lm_self.rank, what,
			     lm_self.cluster ? lm_self.cluster->name : "?",
			     addr);
		return rc;
	}
	lm_log_error("rank %u: %s: %s (lemuriad %s at %s)", lm_self.rank, what,
		     lm_strerror(rc),
		     lm_self.cluster ? lm_self.cluster->name : "?", addr);
	return rc;
}

/* Sends a request to the lemuriad without waiting for its reply
 * (lm_client_finish waits). */
static int lm_client_start(const struct lm_msg *req,
			   struct lm_rpc_pending *call)
{
	size_t len = lm_msg_split_len(req);
	uint8_t *out = malloc(len ? len : 1);
	struct lm_msg_split split;
	int rc;

	if (!out)
		return LM_ENOMEM;
	/* a FLUSH's diff list goes to the transport as it is, uncopied */
	rc = lm_msg_encode_split(req, out, len, &split);
	if (rc >= 0) {
		const struct lm_rel_part parts[3] = {
			{ out, split.head_len },
			{ split.blob, split.blob_len },
			{ out + split.head_len, split.tail_len },
		};

		rc = lm_rpc_start_parts(lm_self.rpc, parts, 3, call);
	}
	free(out);
	return rc;
}

/* Waits for a started request's reply.  On success *reply is decoded
 * (borrowing *buf, which the caller frees) and of type `want` or `also`. */
static int lm_client_finish(struct lm_rpc_pending *call, uint16_t want,
			    uint16_t also, struct lm_msg *reply, void **buf)
{
	size_t rlen = 0;
	int rc;

	*buf = NULL;
	rc = lm_rpc_finish(lm_self.rpc, call, buf, &rlen, -1);
	if (rc)
		return rc;
	rc = lm_msg_decode(*buf, rlen, reply, lm_self.notices,
			   lm_self.notice_cap);
	if (rc == 0 && reply->type == LM_MSG_ABORT) {
		/* a daemon's ABORT names no rank (LM_WRITER_MANY) */
		if (reply->rank < lm_self.layout->nprocs)
			lm_log_error("rank %u: the run was aborted: %.*s "
				     "(rank %u)", lm_self.rank,
				     (int)reply->data_len,
				     (const char *)reply->data, reply->rank);
		else
			lm_log_error("rank %u: the run was aborted: %.*s",
				     lm_self.rank, (int)reply->data_len,
				     (const char *)reply->data);
		rc = LM_ECLOSED;
	} else if (rc == 0 && reply->type != want && reply->type != also) {
		rc = LM_EBADMSG;
	}
	if (rc) {
		lm_client_buf_free(*buf);
		*buf = NULL;
		lm_self.lost = true;
	}
	return rc;
}

/* One request/reply with the lemuriad (see lm_client_finish). */
static int lm_client_call2(const struct lm_msg *req, uint16_t want,
			   uint16_t also, struct lm_msg *reply, void **buf)
{
	struct lm_rpc_pending call;
	int rc;

	*buf = NULL;
	rc = lm_client_start(req, &call);
	if (rc)
		return rc;
	return lm_client_finish(&call, want, also, reply, buf);
}

static int lm_client_call(const struct lm_msg *req, uint16_t want,
			  struct lm_msg *reply, void **buf)
{
	return lm_client_call2(req, want, want, reply, buf);
}

static struct lm_msg lm_client_msg(uint16_t type)
{
	struct lm_msg m = { .type = type, .run = lm_self.run,
			    .rank = lm_self.rank };
	return m;
}

/* the region's backend: runs in the SIGSEGV handler of the faulting thread,
 * which is blocked in an access to the region, so plain calls are safe. */
/* Takes page `page` out of a PAGE reply: 0 or LM_EBADMSG. */
static int lm_client_take_page(const struct lm_msg *reply, uint32_t page,
			       void *dst, uint32_t *version)
{
	if (reply->page != page ||
	    reply->data_len != lm_self.layout->page_size)
		return LM_EBADMSG;
	lm_region_fill(dst, reply->data, reply->data_len);
	*version = reply->version;
	return 0;
}

static int lm_client_fetch(void *ctx, uint32_t page, void *dst,
			   uint32_t *version)
{
	struct lm_msg req = lm_client_msg(LM_MSG_FETCH), reply;
	uint64_t t0 = lm_clock_us();
	void *buf;
	int rc;

	(void)ctx;
	req.page = page;
	rc = lm_client_call(&req, LM_MSG_PAGE, &reply, &buf);
	lm_profile_add(&lm_self.prof.fetch, t0);
	if (rc)
		return rc;
	rc = lm_client_take_page(&reply, page, dst, version);
	lm_client_buf_free(buf);
	return rc;
}

/* The region's fetch_shared (copy = cluster): a FETCHV of the page alone,
 * `after` saying how far the lemuriad may fetch ahead; it answers once
 * the page is in the cluster's copy, with a PAGE (or PAGES) that carries
 * no data. */
static int lm_client_fetch_shared(void *ctx, uint32_t page, uint32_t after,
				  uint32_t *version)
{
	struct lm_notice ask[1];
	struct lm_msg req = lm_client_msg(LM_MSG_FETCHV), reply;
	uint64_t t0 = lm_clock_us();
	void *buf;
	int rc;

	(void)ctx;
	lm_msg_fetchv(&req, ask, &page, 1, after);
	rc = lm_client_call2(&req, LM_MSG_PAGE, LM_MSG_PAGES, &reply, &buf);
	lm_profile_add(&lm_self.prof.fetch, t0);
	if (rc)
		return rc;
	if (reply.type == LM_MSG_PAGE && reply.page == page)
		*version = reply.version;
	else if (reply.type == LM_MSG_PAGES && reply.nnotices > 0 &&
		 reply.notices[0].page == page)
		*version = reply.notices[0].version;
	else
		rc = LM_EBADMSG;
	lm_client_buf_free(buf);
	return rc;
}

_Static_assert(LM_CFG_PREFETCH_MAX <= LM_REGION_PREFETCH_MAX,
	       "a layout's prefetch must fit the region's window");

/* The region's fetch_list (docs/dsm.md, "Neighbour pages"): a FETCHV of
 * the pages, the faulting one first.  The lemuriad answers with PAGES
 * (the first page, then those of the others it holds, in the order
 * asked) or, when it must fetch the first page itself, with its PAGE
 * alone. */
static int lm_client_fetch_list(void *ctx, const uint32_t *pages,
				uint32_t n, uint32_t after,
				uint8_t *const *dst, uint32_t *versions,
				uint8_t *got)
{
	struct lm_notice ask[LM_REGION_FETCH_MAX];
	struct lm_msg req = lm_client_msg(LM_MSG_FETCHV), reply;
	size_t ps = lm_self.layout->page_size, pos = 0, len;
	uint64_t t0 = lm_clock_us();
	const uint8_t *data;
	uint32_t pg, next = 0;
	void *buf;
	int rc;

	(void)ctx;
	if (n == 0 || n > LM_REGION_FETCH_MAX)
		return LM_EINVAL;
	/* `after`: how far the lemuriad fetches ahead on a miss */
	lm_msg_fetchv(&req, ask, pages, n, after);
	rc = lm_client_call2(&req, LM_MSG_PAGES, LM_MSG_PAGE, &reply, &buf);
	lm_profile_add(&lm_self.prof.fetch, t0);
	if (rc)
		return rc;
	if (reply.type == LM_MSG_PAGE) {
		rc = lm_client_take_page(&reply, pages[0], dst[0], &versions[0]);
		got[0] = rc == 0;
		lm_client_buf_free(buf);
		return rc;
	}
	/* PAGES: the first page, then some of the others, in order */
	for (uint32_t i = 0; i < reply.nnotices; i++) {
		if (lm_msg_diffs_next(&reply.diffs, &pos, &pg, &data, &len) != 1 ||
		    pg != reply.notices[i].page || len != ps) {
			rc = LM_EBADMSG;
			break;
		}
		if (i > 0) /* the others follow in the order asked */
			while (next < n && pages[next] != pg)
				next++;
		if (next == n || pages[next] != pg) {
			rc = LM_EBADMSG; /* not asked for, or out of order */
			break;
		}
		lm_region_fill(dst[next], data, ps);
		versions[next] = reply.notices[i].version;
		got[next++] = 1;
	}
	if (rc == 0 && reply.nnotices == 0)
		rc = LM_EBADMSG;
	lm_client_buf_free(buf);
	return rc;
}

/* Release: publish every write since the last release.  The last FLUSH
 * is only started (last->started is then true), so that the
 * synchronisation message can follow it at once: lm_client_flush_end
 * waits for its FLUSH_OK. */
static int lm_client_flush_begin(struct lm_rpc_pending *last)
{
	const uint8_t *diffs;
	size_t len, pos = 0, chunk_start = 0, chunk_end;
	uint32_t count, page;
	uint64_t t0 = lm_clock_us();
	int rc = lm_region_flush(&diffs, &len, &count);

	last->started = false;
	if (rc)
		return lm_client_fail("collecting diffs", rc);
	while (chunk_start < len) {
		struct lm_msg req = lm_client_msg(LM_MSG_FLUSH), reply;
		struct lm_msg_diffs all = { diffs, len, count };
		const uint8_t *diff;
		size_t dlen;
		uint32_t n = 0;
		void *buf;

		/* Cut the packed list at entry boundaries. */
		chunk_end = chunk_start;
		pos = chunk_start;
		while (pos < len) {
			size_t before = pos;

			if (lm_msg_diffs_next(&all, &pos, &page, &diff,
					      &dlen) != 1)
				return lm_client_fail("walking diffs",
						      LM_EBADMSG);
			if (n > 0 && pos - chunk_start > LM_CLIENT_FLUSH_CHUNK) {
				pos = before;
				break;
			}
			n++;
			chunk_end = pos;
		}
		req.diffs = (struct lm_msg_diffs){ diffs + chunk_start,
						   chunk_end - chunk_start, n };
		if (chunk_end == len) { /* the last: copied, not waited for */
			rc = lm_client_start(&req, last);
			if (rc)
				return lm_client_fail("publishing writes", rc);
			break;
		}
		rc = lm_client_call(&req, LM_MSG_FLUSH_OK, &reply, &buf);
		if (rc == 0)
			rc = reply.status;
		lm_client_buf_free(buf);
		if (rc)
			return lm_client_fail("publishing writes", rc);
		chunk_start = chunk_end;
	}
	lm_profile_add(&lm_self.prof.flush, t0);
	return 0;
}

/* The FLUSH_OK of the flush's last part, if it had one. */
static int lm_client_flush_end(struct lm_rpc_pending *last)
{
	struct lm_msg reply;
	void *buf;
	int rc;

	if (!last->started)
		return 0;
	rc = lm_client_finish(last, LM_MSG_FLUSH_OK, LM_MSG_FLUSH_OK, &reply,
			      &buf);
	if (rc == 0)
		rc = reply.status;
	lm_client_buf_free(buf);
	return rc ? lm_client_fail("publishing writes", rc) : 0;
}

static int lm_client_flush(void)
{
	struct lm_rpc_pending last;
	int rc = lm_client_flush_begin(&last);

	if (rc)
		return rc;
	return lm_client_flush_end(&last);
}

/* Our rank lets the region keep the pages the notices name us the only
 * writer of (docs/dsm.md "Sole writers"); a RELEASE's updates keep the
 * copies they bring up to date ("Updates"). */
static int lm_client_acquire(const struct lm_msg *reply)
{
	uint64_t t0 = lm_clock_us();
	int rc = lm_region_apply_release(reply->notices, reply->nnotices,
					 lm_self.rank, &reply->diffs);

	lm_profile_add(&lm_self.prof.apply, t0);
	return rc ? lm_client_fail("applying write notices", rc) : 0;
}

static int lm_client_env(const char *name, const char **out)
{
	*out = getenv(name);
	if (!*out || !**out) {
		lm_log_error("%s is not set: start the program with "
			     "lemuria-run -c LAYOUT -- PROGRAM",
			     name);
		return LM_EINVAL;
	}
	return 0;
}

/* LEMURIA_ACK_DELAY_US from the environment: how long a reply's ack may
 * wait for the next request, in microseconds; 0 (the default, and what a
 * value that is not a number of microseconds up to
 * LM_CLIENT_ACK_DELAY_MAX_US gives, with a warning) acks at once. */
static uint32_t lm_client_ack_delay_us(void)
{
	const char *v = getenv("LEMURIA_ACK_DELAY_US");
	unsigned long long us;
	char *end;

	if (!v || !*v)
		return 0;
	errno = 0;
	us = strtoull(v, &end, 10);
	if (errno || *end || *v == '-' || us > LM_CLIENT_ACK_DELAY_MAX_US) {
		lm_log_warn("rank %u: LEMURIA_ACK_DELAY_US=\"%s\" is not a "
			    "number of microseconds from 0 to %u: replies "
			    "are acknowledged at once",
			    lm_self.rank, v, LM_CLIENT_ACK_DELAY_MAX_US);
		return 0;
	}
	return (uint32_t)us;
}

/* copy = cluster: our reads of a page wait while the lemuriad puts a
 * set of pages into the cluster's copy (common/copy_set.h); the
 * userfaultfd that makes them wait goes back on the connection that
 * brought the copy.  Without it (the kernel refuses) the connection just
 * closes, and the lemuriad puts sets in page by page. */
static void hand_set_waits(int conn)
{
	char err[256];
	int ufd;

	if (conn < 0)
		return;
	if (lm_copy_set_reader((void *)(uintptr_t)lm_self.layout->base,
			       lm_self.layout->shared_size, &ufd, err,
			       sizeof(err)) == 0) {
		if (lm_fdpass_answer(conn, ufd, err, sizeof(err)))
			lm_log_info("rank %u: %s", lm_self.rank, err);
		close(ufd);
	} else {
		lm_log_info("rank %u: pages of other clusters go into the "
			    "copy one by one: %s", lm_self.rank, err);
	}
	close(conn);
}

/* copy = cluster and not alone in the run (alone, the process keeps its
 * region private: there is nobody to share a copy with): the process
 * maps the cluster's copy, and nothing of it is flushed at a release. */
static bool one_copy(void)
{
	return lm_self.cluster->copy == LM_COPY_CLUSTER &&
	       lm_self.layout->nprocs > 1;
}

int lm_init(int *argc, char ***argv)
{
	const char *layout_path, *var, *value;
	struct lm_region_backend be = { .fetch = lm_client_fetch,
					.fetch_list = lm_client_fetch_list };
	struct lm_rel_config rcfg;
	struct lm_fdpass_listener listener = { .fd = -1 };
	struct lm_msg req, reply;
	char err[512];
	int copy_fd = -1, copy_conn = -1;
	uint32_t join_late;
	bool shared, no_copy;
	void *buf;
	int rc;

	(void)argc;
	(void)argv;
	if (lm_self.ready) {
		lm_log_error("rank %d: lm_init: called again; the first call "
			     "stands", lm_rank());
		return LM_EINVAL;
	}
	lm_mem_setup_from_env();
	if (lm_client_env("LM_LAYOUT", &layout_path))
		return LM_EINVAL;
	rc = lm_launcher_rank(&lm_self.rank, &var, &value);
	if (rc == LM_ENOENT) {
		lm_log_error("LM_RANK is not set (nor SLURM_PROCID, "
			     "OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK): "
			     "start the program with lemuria-run -c LAYOUT -- "
			     "PROGRAM, or under srun or mpirun with LM_LAYOUT "
			     "set");
		return LM_EINVAL;
	}
	if (rc) {
		lm_log_error("%s=\"%s\" is not a rank", var, value);
		return LM_EINVAL;
	}
	rc = lm_launcher_run(&lm_self.run, &var, &value);
	if (rc == LM_ENOENT) {
		lm_log_error("LM_RUN is not set (nor SLURM_JOB_START_TIME): "
			     "start the program with lemuria-run, or give "
			     "every rank the same LM_RUN, larger than the "
			     "last run's (export LM_RUN=$(date +%%s%%N) before "
			     "mpirun)");
		return LM_EINVAL;
	}
	if (rc) {
		lm_log_error("%s=\"%s\" is not a run id", var, value);
		return LM_EINVAL;
	}
	if (lm_layout_load(layout_path, &lm_self.layout, err, sizeof(err))) {
		lm_log_error("%s", err);
		return LM_EINVAL;
	}
	lm_self.cluster = lm_layout_cluster_of_rank(lm_self.layout,
						    lm_self.rank);
	if (!lm_self.cluster) {
		lm_log_error("LM_RANK=%u, but %s has %u processes", lm_self.rank,
			     layout_path, lm_self.layout->nprocs);
		rc = LM_EINVAL;
		goto fail;
	}
	lm_self.notice_cap = (size_t)(lm_self.layout->shared_size /
				      lm_self.layout->page_size);
	lm_self.notices = calloc(lm_self.notice_cap, sizeof(struct lm_notice));
	if (lm_self.layout->auth &&
	    !(lm_self.auth = lm_auth_create(lm_self.layout->key))) {
		rc = LM_ENOMEM;
		goto fail;
	}
	lm_link_config(lm_self.layout, LM_LEVEL_CLIENT,
		       lm_layout_client_id(lm_self.layout, lm_self.rank),
		       lm_self.auth, &rcfg);
	/* Replies are acked at once unless LEMURIA_ACK_DELAY_US asks them to
	 * ride on the next request within that delay, with the endpoint's
	 * timer thread sending those that none carries, well before the
	 * lemuriad would retransmit: at most a quarter of the layout's
	 * rto_min (common/rpc.h; docs/dsm.md, "Client acknowledgements"). */
	rcfg.spares = LM_REL_SPARES; /* lm_client_buf_free */
	rcfg.transport.ack_delay_us = lm_client_ack_delay_us();
	if (rcfg.transport.rto_min_us / 4 < rcfg.transport.ack_delay_us)
		rcfg.transport.ack_delay_us = rcfg.transport.rto_min_us / 4;
	lm_self.rpc = lm_rpc_create(
		&lm_self.cluster->addr, lm_self.cluster->id, &rcfg,
		lm_loss_active(&lm_self.layout->faults)
			? &lm_self.layout->faults
			: NULL,
		err, sizeof(err));
	if (!lm_self.notices || !lm_self.rpc) {
		lm_log_error("rank %u: %s", lm_self.rank,
			     lm_self.rpc ? "out of memory" : err);
		rc = LM_EIO;
		goto fail;
	}
	shared = one_copy();
	if (shared && lm_fdpass_listen(&listener, err, sizeof(err))) {
		lm_log_error("rank %u: copy = cluster: %s", lm_self.rank, err);
		rc = LM_EIO;
		goto fail;
	}
	/* LM_FAULTS start_max (tests): this cluster joins late */
	join_late = lm_loss_start_delay_us(&lm_self.layout->faults,
					   lm_self.cluster->id);
	if (join_late)
		usleep(join_late);
	req = lm_client_msg(LM_MSG_JOIN);
	req.pid = (uint32_t)getpid();
	req.layout_hash = lm_self.layout->hash;
	if (shared) { /* where the lemuriad hands us the cluster's copy */
		req.data = (const uint8_t *)listener.name;
		req.data_len = strlen(listener.name);
	}
	rc = lm_client_call(&req, LM_MSG_JOIN_OK, &reply, &buf);
	/* the lemuriad answers LM_EUNREACH when it cannot hand us the copy */
	no_copy = rc == 0 && shared && reply.status == LM_EUNREACH;
	if (rc == 0)
		rc = reply.status;
	lm_client_buf_free(buf);
	if (rc == 0 && shared) {
		rc = lm_fdpass_receive_keep(&listener, 0,
					    LM_CLIENT_COPY_WAIT_MS, &copy_fd,
					    &copy_conn, err, sizeof(err));
		no_copy = rc != 0;
	}
	lm_fdpass_close(&listener);
	if (no_copy) {
		lm_log_error("rank %u: cannot map cluster %s's copy (copy = "
			     "cluster in %s): %s.  The clients of a cluster "
			     "with copy = cluster must run on its lemuriad's "
			     "host (%s), in its pid namespace; elsewhere set "
			     "copy = client in its "
			     "[cluster %s] section", lm_self.rank,
			     lm_self.cluster->name, layout_path,
			     rc == LM_EUNREACH ? "the lemuriad could not "
						 "reach this process" : err,
			     inet_ntoa(lm_self.cluster->addr.sin_addr),
			     lm_self.cluster->name);
		goto fail;
	}
	if (rc) {
		lm_client_fail("joining the run", rc);
		goto fail;
	}
	lm_region_set_prefetch(lm_self.layout->prefetch);
	if (shared) {
		be.fetch_shared = lm_client_fetch_shared;
		rc = lm_region_init_shared(
			lm_self.layout->base, lm_self.layout->shared_size,
			lm_self.layout->page_size, copy_fd,
			(uint32_t)(lm_self.cluster - lm_self.layout->clusters),
			&be, NULL, err, sizeof(err));
	} else {
		rc = lm_region_init(lm_self.layout->base,
				    lm_self.layout->shared_size,
				    lm_self.layout->page_size, &be, NULL, err,
				    sizeof(err));
	}
	if (rc) {
		lm_log_error("rank %u: %s", lm_self.rank, err);
		if (copy_conn >= 0)
			close(copy_conn);
		goto fail;
	}
	if (shared)
		hand_set_waits(copy_conn);
	/* alone in the run, nobody reads our writes: no need to track them
	 * (docs/dsm.md "A run of one process") */
	if (lm_self.layout->nprocs == 1 && !shared &&
	    (rc = lm_region_make_private())) {
		lm_client_fail("opening the region", rc);
		lm_region_fini();
		goto fail;
	}
	lm_self.next_create = 1;
	lm_self.pid = getpid();
	lm_self.ready = 1;
	lm_self.prof.start_us = lm_clock_us();
	return 0;
fail:
	lm_rpc_destroy(lm_self.rpc);
	lm_auth_destroy(lm_self.auth);
	free(lm_self.notices);
	lm_layout_free(lm_self.layout);
	memset(&lm_self, 0, sizeof(lm_self));
	return rc;
}

/* Rank 0 is the only creator: once it finishes, a rank it never gave
 * work will never get any, and must not wait for it for ever (a SPLASH
 * program that stops early, after -h say).  Such ranks are sent a CREATE
 * with no work; a rank that runs without waiting for work (SPMD) keeps
 * it at its lemuriad unread until the run ends. */
static void lm_client_release_idle(void)
{
	while (lm_self.next_create < lm_self.layout->nprocs) {
		struct lm_msg req = lm_client_msg(LM_MSG_CREATE), reply;
		char what[64];
		void *buf;
		int rc;

		req.rank = lm_self.next_create++;
		req.offset = LM_CREATE_NO_WORK;
		rc = lm_client_call(&req, LM_MSG_CREATE_OK, &reply, &buf);
		if (rc) {
			/* the ranks left wait until lemuria-run stops them */
			snprintf(what, sizeof(what),
				 "releasing ranks %u.. that got no work",
				 req.rank);
			lm_client_fail(what, rc);
			return;
		}
		lm_client_buf_free(buf);
	}
}

/* Whether the lemuriad sent an ABORT that nobody has read (it came while
 * no call waited), or the endpoint found it gone: an aborted run's
 * requests are dropped unanswered, and a call would wait for ever. */
static bool lm_client_run_over(void)
{
	void *m;
	size_t len;

	/* the queue is bounded; so is this */
	for (int i = 0; i < 64; i++) {
		int rc = lm_rpc_recv(lm_self.rpc, &m, &len, 1);
		bool aborted;

		if (rc)
			return rc != LM_ETIMEDOUT;
		aborted = lm_msg_type(m, len) == LM_MSG_ABORT;
		lm_client_buf_free(m);
		if (aborted)
			return true;
	}
	return false;
}

/* Rank 0 exits with status 0 without lm_finalize (exit(0) or a return
 * from main; a SPLASH-2 main that stops on bad input): the ranks it never
 * created would wait for work for ever, so it finalizes here, which
 * releases them (lm_client_release_idle).  Only rank 0's process knows
 * which ranks it never created: lemuria-run cannot tell a worker waiting
 * for work from an SPMD rank still computing, and is not the parent of
 * other hosts' ranks; a lemuriad knows its waiting workers, but nothing
 * tells it that rank 0's process exited.  Not for a failed run (others
 * end it) nor in a forked child of rank 0.  Any other rank that exits so
 * is named (issue 42) and finalized too: its LEAVE tells its lemuriad at
 * once, and a barrier the others wait in then ends the run naming it,
 * where they used to wait for the keepalives to find the rank gone. */
static void lm_client_at_exit(int status, void *arg)
{
	(void)arg;
	if (!lm_self.ready || status != 0 || lm_self.pid != getpid() ||
	    lm_self.lost || lm_client_run_over())
		return;
	if (lm_self.rank != 0)
		lm_log_warn("rank %u exits without lm_finalize: it leaves the "
			    "run now", lm_self.rank);
	lm_finalize();
}

/* Installed as the library loads, before main runs, so that it runs after
 * every exit handler of the program's (those may still use the region).
 * libcrypto is started first and without its own exit handler, which
 * would otherwise run before this one (auth.h), even when the program
 * uses libcrypto before lm_init. */
__attribute__((constructor)) static void lm_client_hook_exit(void)
{
	(void)lm_auth_init_library(); /* lm_init reports a failure */
	on_exit(lm_client_at_exit, NULL);
}

/* One line of key=value pairs: the process's time in the calls that
 * wait (docs/operations.md, LEMURIA_PROFILE).  To LM_PROFILE_DIR/RANK
 * when lemuria-run set it (it prints the lines in rank order once the
 * ranks ended), else to stderr. */
static void lm_client_profile_report(void)
{
	const struct lm_client_profile *p = &lm_self.prof;
	struct lm_region_stats rs;
	struct lm_rpc_counters rc;
	uint64_t total = lm_clock_us() - p->start_us;
	const char *env = getenv("LEMURIA_PROFILE");
	const char *dir = getenv("LM_PROFILE_DIR");
	char line[1536], path[4096];
	int len, fd = -1;

	if (!env || !*env || strcmp(env, "0") == 0)
		return;
	lm_region_stats(&rs);
	rc = lm_rpc_counters(lm_self.rpc);
	len = snprintf(line, sizeof(line),
		"lemuria-profile rank=%u seconds=%.6f "
		"fetches=%llu fetch_s=%.6f flushes=%llu flush_s=%.6f "
		"barriers=%llu barrier_wait_s=%.6f locks=%llu "
		"lock_wait_s=%.6f unlocks=%llu unlock_s=%.6f "
		"other_waits=%llu other_wait_s=%.6f apply_s=%.6f "
		"read_faults=%llu write_faults=%llu opened_ahead=%llu "
		"mprotects=%llu brought_after=%llu brought_stride=%llu "
		"reach_after=%u reach_after_samples=%llu "
		"reach_after_read=%llu reach_after_changes=%llu "
		"reach_stride=%u reach_stride_samples=%llu "
		"reach_stride_read=%llu reach_stride_changes=%llu "
		"ack_wakeups=%llu in_flight_max=%u\n",
		lm_self.rank, total / 1e6,
		(unsigned long long)p->fetch.n, p->fetch.us / 1e6,
		(unsigned long long)p->flush.n, p->flush.us / 1e6,
		(unsigned long long)p->barrier.n, p->barrier.us / 1e6,
		(unsigned long long)p->lock.n, p->lock.us / 1e6,
		(unsigned long long)p->unlock.n, p->unlock.us / 1e6,
		(unsigned long long)p->other.n, p->other.us / 1e6,
		p->apply.us / 1e6,
		(unsigned long long)rs.read_faults,
		(unsigned long long)rs.write_faults,
		(unsigned long long)rs.written_ahead,
		(unsigned long long)rs.mprotects,
		(unsigned long long)(rs.prefetched - rs.strided),
		(unsigned long long)rs.strided, rs.reach[0],
		(unsigned long long)rs.samples[0],
		(unsigned long long)rs.samples_read[0],
		(unsigned long long)rs.reach_changes[0], rs.reach[1],
		(unsigned long long)rs.samples[1],
		(unsigned long long)rs.samples_read[1],
		(unsigned long long)rs.reach_changes[1],
		(unsigned long long)rc.ack_wakeups, rc.pending_max);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof(line))
		len = (int)sizeof(line) - 1;
	if (dir && *dir &&
	    snprintf(path, sizeof(path), "%s/%u", dir, lm_self.rank) <
		    (int)sizeof(path))
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			  0600);
	if (fd >= 0) {
		if (write(fd, line, (size_t)len) == len) {
			close(fd);
			return;
		}
		close(fd);
	}
	fputs(line, stderr);
}

void lm_finalize(void)
{
	struct lm_msg req, reply;
	void *buf;

	if (!lm_self.ready)
		return;
	lm_client_profile_report();
	if (lm_client_flush() == 0) {
		lm_globals_settle();
		if (lm_self.rank == 0)
			lm_client_release_idle();
		req = lm_client_msg(LM_MSG_LEAVE);
		if (lm_client_call(&req, LM_MSG_LEAVE_OK, &reply, &buf) == 0)
			lm_client_buf_free(buf);
	}
	lm_region_fini();
	lm_rpc_destroy(lm_self.rpc);
	lm_auth_destroy(lm_self.auth);
	free(lm_self.notices);
	lm_layout_free(lm_self.layout);
	memset(&lm_self, 0, sizeof(lm_self));
}

int lm_rank(void)
{
	return lm_self.ready ? (int)lm_self.rank : -1;
}

int lm_nprocs(void)
{
	return lm_self.ready ? (int)lm_self.layout->nprocs : -1;
}

int lm_cluster(void)
{
	return lm_self.ready ? (int)(lm_self.cluster - lm_self.layout->clusters)
			     : -1;
}

/* Whether lm_init succeeded and lm_finalize has not run; a call made
 * outside that is named (issue 42: the call failed with no word). */
static bool lm_client_ready(const char *call)
{
	if (lm_self.ready)
		return true;
	lm_log_error("%s: called before lm_init succeeded, or after "
		     "lm_finalize; the call does nothing", call);
	return false;
}

/* ALLOC/FREE relayed to the allocator; `reply` decoded into *out. */
static int lm_client_alloc_call(const struct lm_msg *req, uint16_t want,
				struct lm_msg *out)
{
	void *buf;
	int rc;

	if (!lm_self.ready)
		return LM_EINVAL;
	rc = lm_client_call(req, want, out, &buf);
	if (rc == 0)
		rc = out->status;
	lm_client_buf_free(buf);
	return rc;
}

void *lm_malloc(size_t size)
{
	struct lm_msg req = lm_client_msg(LM_MSG_ALLOC), reply;
	int rc;

	req.size = size ? size : 1;
	req.align = 64;
	if (!lm_client_ready("lm_malloc"))
		return NULL;
	if (size > lm_self.layout->shared_size) {
		lm_log_error("rank %d: lm_malloc(%zu): larger than the whole "
			     "shared region (shared_size %llu bytes in %s)",
			     lm_rank(), size,
			     (unsigned long long)lm_self.layout->shared_size,
			     lm_self.layout->path);
		return NULL;
	}
	rc = lm_client_alloc_call(&req, LM_MSG_ALLOC_OK, &reply);
	if (rc) {
		lm_log_error("rank %d: lm_malloc(%zu): %s", lm_rank(), size,
			     rc == LM_ENOMEM ? "no free block that large left "
			     "in the shared region" : lm_strerror(rc));
		return NULL;
	}
	return (void *)(uintptr_t)(lm_self.layout->base + reply.offset);
}

int lm_free(void *p)
{
	struct lm_msg req = lm_client_msg(LM_MSG_FREE), reply;
	uintptr_t a = (uintptr_t)p;
	int rc;

	if (!p)
		return 0;
	if (!lm_client_ready("lm_free"))
		return LM_EINVAL;
	if (a < lm_self.layout->base ||
	    a - lm_self.layout->base >= lm_self.layout->shared_size) {
		lm_log_error("rank %d: lm_free(%p): not shared memory",
			     lm_rank(), p);
		return LM_EINVAL;
	}
	req.offset = a - lm_self.layout->base;
	rc = lm_client_alloc_call(&req, LM_MSG_FREE_OK, &reply);
	if (rc)
		lm_log_error("rank %d: lm_free(%p): %s", lm_rank(), p,
			     rc == LM_EINVAL ? "not a block lm_malloc returned, "
			     "or freed already" : lm_strerror(rc));
	return rc;
}

int lm_id_alloc(int n)
{
	struct lm_msg req = lm_client_msg(LM_MSG_ALLOC), reply;
	int rc;

	if (n <= 0)
		return LM_EINVAL;
	req.size = (uint64_t)n;
	req.align = 0; /* ids, not memory; locks and barriers share them */
	req.id = LM_ALLOC_KIND_LOCK;
	rc = lm_client_alloc_call(&req, LM_MSG_ALLOC_OK, &reply);
	if (rc)
		return rc;
	if (reply.offset < LM_ID_MIN ||
	    reply.offset > (uint64_t)LM_ID_MAX - (uint64_t)(n - 1)) {
		lm_log_error("rank %d: lm_id_alloc(%d): the run's lock and "
			     "barrier ids (%d..%d) are used up", lm_rank(), n,
			     LM_ID_MIN, LM_ID_MAX);
		return LM_ENOBUFS;
	}
	return (int)reply.offset;
}

/* Whether `id` is a lock or barrier id a program may use (lemuria.h);
 * else logged ("rank R: lm_lock(0): lock ids are 1..N; 0 is not one"). */
static bool lm_client_id_ok(const char *call, const char *kind, int id)
{
	if (id >= LM_ID_MIN && id <= LM_ID_MAX)
		return true;
	lm_log_error("rank %d: %s(%d): %s ids are %d..%d; %d is %s", lm_rank(),
		     call, id, kind, LM_ID_MIN, LM_ID_MAX, id,
		     id >= LM_RUNTIME_BARRIER ? "the runtime's own"
					      : "not one");
	return false;
}

static int lm_client_sync(uint16_t type, uint16_t want, int id,
			  const char *what)
{
	struct lm_msg req = lm_client_msg(type), reply;
	struct lm_rpc_pending last, call;
	char label[64];
	uint64_t t0;
	void *buf = NULL;
	int rc, frc;

	snprintf(label, sizeof(label), "%s %d", what, id);
	if (!lm_self.ready)
		return LM_EINVAL;
	/* the message follows the flush's last FLUSH without waiting for
	 * its FLUSH_OK: the lemuriad takes the two in order; the FLUSH_OK
	 * is taken first (both decode into the client's notice list) */
	rc = lm_client_flush_begin(&last);
	if (rc)
		return rc;
	req.id = (uint32_t)id;
	t0 = lm_clock_us();
	rc = lm_client_start(&req, &call);
	frc = lm_client_flush_end(&last);
	if (rc == 0)
		rc = lm_client_finish(&call, want, want, &reply, &buf);
	lm_profile_add(type == LM_MSG_BARRIER ? &lm_self.prof.barrier :
		       type == LM_MSG_LOCK ? &lm_self.prof.lock :
		       type == LM_MSG_UNLOCK ? &lm_self.prof.unlock :
		       &lm_self.prof.other, t0);
	if (frc) {
		lm_client_buf_free(buf);
		return frc;
	}
	if (rc == 0 && (want == LM_MSG_RELEASE || want == LM_MSG_GRANT))
		rc = lm_client_acquire(&reply);
	else if (rc == 0)
		rc = reply.status;
	lm_client_buf_free(buf);
	return rc ? lm_client_fail(label, rc) : 0;
}

/* Any barrier id, the runtime's own included. */
static int lm_client_barrier(int id)
{
	/* alone in the run, every process has arrived: nothing to wait for
	 * and, the region being private, nothing to publish */
	if (lm_self.ready && lm_self.layout->nprocs == 1)
		return 0;
	return lm_client_sync(LM_MSG_BARRIER, LM_MSG_RELEASE, id, "barrier");
}

int lm_barrier(int id)
{
	if (!lm_client_ready("lm_barrier") ||
	    !lm_client_id_ok("lm_barrier", "barrier", id))
		return LM_EINVAL;
	return lm_client_barrier(id);
}

int lm_lock(int id)
{
	int rc;

	if (!lm_client_ready("lm_lock") ||
	    !lm_client_id_ok("lm_lock", "lock", id))
		return LM_EINVAL;
	/* locks are not recursive: the second would wait for the first */
	for (int i = 0; i < lm_self.nheld; i++)
		if (lm_self.held[i] == id) {
			lm_log_error("rank %d: lm_lock(%d): this process holds "
				     "lock %d already; it would wait for "
				     "itself for ever",
				     lm_rank(), id, id);
			return LM_EINVAL;
		}
	if (lm_self.nheld == LM_CLIENT_MAX_HELD) {
		lm_log_error("rank %d: lm_lock(%d): more than %d locks held",
			     lm_rank(), id, LM_CLIENT_MAX_HELD);
		return LM_ENOBUFS;
	}
	rc = lm_client_sync(LM_MSG_LOCK, LM_MSG_GRANT, id, "lock");
	if (rc == 0)
		lm_self.held[lm_self.nheld++] = id;
	return rc;
}

/* copy = cluster: what the holder wrote is in the cluster's copy
 * already, so nothing waits on the lemuriad's answer; the UNLOCK goes
 * one-way, ahead of anything this process sends next (the transport
 * keeps order), and the process goes on at once. */
static int lm_client_unlock_oneway(int id)
{
	struct lm_msg req = lm_client_msg(LM_MSG_UNLOCK);
	uint64_t t0 = lm_clock_us();
	uint8_t out[128];
	int rc;

	req.id = (uint32_t)id;
	rc = lm_msg_encode(&req, out, sizeof(out));
	if (rc >= 0)
		rc = lm_rpc_send(lm_self.rpc, out, (size_t)rc);
	lm_profile_add(&lm_self.prof.unlock, t0);
	if (rc == LM_ENOMEM)
		return rc; /* not sent: the caller asks instead */
	if (rc) {
		char label[64];

		snprintf(label, sizeof(label), "unlock %d", id);
		return lm_client_fail(label, rc);
	}
	return 0;
}

int lm_unlock(int id)
{
	int rc;

	if (!lm_client_ready("lm_unlock") ||
	    !lm_client_id_ok("lm_unlock", "lock", id))
		return LM_EINVAL;
	for (int i = 0; i < lm_self.nheld; i++) {
		if (lm_self.held[i] != id)
			continue;
		lm_self.held[i] = lm_self.held[--lm_self.nheld];
		/* LM_ENOMEM: no thread to resend it; a request then */
		if (one_copy() &&
		    (rc = lm_client_unlock_oneway(id)) != LM_ENOMEM)
			return rc;
		return lm_client_sync(LM_MSG_UNLOCK, LM_MSG_UNLOCK_OK, id,
				      "unlock");
	}
	lm_log_error("rank %d: lm_unlock(%d): this process does not hold "
		     "lock %d",
		     lm_rank(), id, id);
	return LM_EINVAL;
}

/* Rank 0, at its first lm_create: its globals into the region, mapped
 * over its own (globals.h); a failure leaves them sent as an image at
 * each CREATE, as LEMURIA_GLOBALS=copy asks. */
static void lm_client_share_globals(void)
{
	size_t page = lm_self.layout->page_size, bytes;
	char err[320];
	void *pages;

	lm_self.globals = -1;
	if (lm_globals_span(page, &bytes, err, sizeof(err)) == 0) {
		pages = lm_malloc(bytes);
		if (!pages)
			snprintf(err, sizeof(err), "no room for %zu bytes in "
				 "the shared region", bytes);
		else if (lm_globals_share(pages, page, lm_self.globals_desc,
					  err, sizeof(err)) == 0)
			lm_self.globals = 2;
		else
			lm_free(pages);
	}
	if (lm_self.globals < 0)
		lm_log_warn("rank 0: the program's globals are copied to "
			    "each worker at CREATE, not shared: %s", err);
}

int lm_share_globals(void)
{
	if (!lm_client_ready("lm_share_globals"))
		return LM_EINVAL;
	if (lm_self.rank != 0 || !lm_globals_wanted())
		return 0;
	if (lm_self.next_create > 1) {
		lm_log_error("lm_share_globals: rank 0 created ranks already, "
			     "with copies of its globals; call it before the "
			     "first lm_create");
		return LM_EINVAL;
	}
	if (lm_self.globals == 0)
		lm_self.globals = 1;
	return 0;
}

/* The library's own state must not travel with the data segment. */
int lm_create(void (*fn)(void))
{
	struct lm_msg req = lm_client_msg(LM_MSG_CREATE), reply;
	uint8_t *image = NULL;
	size_t len = 0;
	char err[256];
	void *buf;
	int rc;

	if (!lm_client_ready("lm_create") || lm_self.rank != 0 || !fn)
		return LM_EINVAL;
	if (lm_self.next_create >= lm_self.layout->nprocs) {
		lm_log_error("lm_create: all %u processes are already busy",
			     lm_self.layout->nprocs);
		return LM_ENOBUFS;
	}
	if (lm_segment_check_private(&lm_self)) {
		lm_log_error("lm_create needs liblemuria linked as a shared "
			     "library (its own state would travel with the "
			     "program's variables)");
		return LM_EINVAL;
	}
	if (lm_self.globals == 1)
		lm_client_share_globals();
	rc = lm_client_flush();
	if (rc)
		return rc;
	if (lm_self.globals == 2) {
		req.data = lm_self.globals_desc;
		req.data_len = sizeof(lm_self.globals_desc);
	} else {
		rc = lm_segment_capture(&image, &len, err, sizeof(err));
		if (rc) {
			lm_log_error("lm_create: %s", err);
			return rc;
		}
		req.data = image;
		req.data_len = len;
	}
	req.rank = lm_self.next_create;
	req.offset = lm_segment_fn_offset(fn);
	rc = lm_client_call(&req, LM_MSG_CREATE_OK, &reply, &buf);
	if (rc == 0)
		rc = reply.status;
	lm_client_buf_free(buf);
	free(image);
	if (rc)
		return lm_client_fail("create", rc);
	return (int)lm_self.next_create++;
}

int lm_wait_for_end(int n)
{
	return lm_client_sync(LM_MSG_WAIT_END, LM_MSG_RELEASE, n,
			      "wait for end");
}

void lm_serve_workers_before_main(void)
{
	const char *var, *value;
	uint32_t rank;

	if (lm_self.ready || !getenv("LM_LAYOUT") ||
	    lm_launcher_rank(&rank, &var, &value) != 0 || rank == 0)
		return; /* rank 0 runs main; lm_init names a bad rank */
	if (lm_init(NULL, NULL) != 0)
		exit(1);
	exit(lm_worker_serve());
}

int lm_worker_serve(void)
{
	struct lm_msg req, reply;
	void (*fn)(void);
	char err[400];
	bool shared;
	void *buf;
	int rc;

	if (!lm_client_ready("lm_worker_serve") || lm_self.rank == 0)
		return 1;
	req = lm_client_msg(LM_MSG_WAIT_WORK);
	rc = lm_client_call(&req, LM_MSG_CREATE, &reply, &buf);
	if (rc) {
		lm_client_fail("waiting for work", rc);
		lm_finalize();
		return 1;
	}
	if (reply.offset == LM_CREATE_NO_WORK) {
		/* rank 0 finished without work for us: nothing to do */
		lm_client_buf_free(buf);
		lm_finalize();
		return 0;
	}
	fn = lm_segment_fn_from_offset(reply.offset);
	shared = lm_globals_is_desc(reply.data, reply.data_len);
	err[0] = '\0';
	if (!fn)
		rc = LM_EINVAL;
	else if (shared)
		rc = lm_globals_join(reply.data, reply.data_len,
				     lm_self.layout->page_size, err,
				     sizeof(err));
	else
		rc = lm_segment_apply(reply.data, reply.data_len);
	/* what rank 0 published before CREATE: copies older go (I3) */
	if (rc == 0)
		rc = lm_region_apply_notices(reply.notices, reply.nnotices,
					     (uint32_t)lm_self.rank);
	lm_client_buf_free(buf);
	if (rc == 0 && shared)
		rc = lm_globals_check(err, sizeof(err));
	if (rc) {
		if (err[0])
			lm_log_error("rank %u: %s", lm_self.rank, err);
		lm_client_fail("installing the creator's variables", rc);
		lm_finalize();
		return 1;
	}
	fn();
	rc = lm_client_flush();
	if (rc == 0) {
		req = lm_client_msg(LM_MSG_END);
		req.status = 0;
		rc = lm_client_call(&req, LM_MSG_END_OK, &reply, &buf);
		lm_client_buf_free(buf);
	}
	if (rc)
		lm_client_fail("reporting the end", rc);
	lm_finalize();
	return rc ? 1 : 0;
}

int lm_distribute(void *var, size_t len)
{
	uint32_t page = lm_self.ready ? lm_self.layout->page_size : 0;
	uint8_t *slot;
	int rc = 0;

	if (!lm_client_ready("lm_distribute") || (!var && len))
		return LM_EINVAL;
	slot = (uint8_t *)(uintptr_t)(lm_self.layout->base +
				      lm_self.layout->shared_size - page);
	for (size_t done = 0; done < len && rc == 0; done += page) {
		size_t n = len - done < page ? len - done : page;

		if (lm_self.rank == 0)
			memcpy(slot, (uint8_t *)var + done, n);
		rc = lm_client_barrier(LM_RUNTIME_BARRIER);
		if (rc == 0 && lm_self.rank != 0)
			memcpy((uint8_t *)var + done, slot, n);
		/* Nobody overwrites the slot before everyone has read it. */
		if (rc == 0)
			rc = lm_client_barrier(LM_RUNTIME_BARRIER);
	}
	return rc;
}
