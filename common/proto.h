/* Lemuria messages: what travels inside a reliable transport message.
 *
 * Every message starts with a 4-byte prefix: u16 type (enum lm_msg_type),
 * u16 reserved (zero).  Bodies are little-endian, decoded with bounds
 * checks; a message that does not decode is dropped and counted by the
 * receiver.  This is the one place where message numbers are assigned. */
#ifndef LM_PROTO_H
#define LM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define LM_MSG_PREFIX 4

/* Node id of lemuriactl and other control tools (never in a layout). */
#define LM_NODE_CONTROL 0xffffu

enum lm_msg_type {
	LM_MSG_PING = 1,        /* tool -> daemon request: are you up? */
	LM_MSG_PONG = 2,        /* reply to PING: struct lm_msg_pong */
	/* DSM messages (docs/dsm.md): every body starts with the u64 run id. */
	LM_MSG_JOIN = 3,        /* C->L req: rank, pid, layout hash, socket */
	LM_MSG_JOIN_OK = 4,     /* L->C reply, R->L reply: status */
	LM_MSG_FETCH = 5,       /* C->L, L->R req: page; id = how many
				   pages after it the home may pull
				   ahead (L->R, R->R) */
	LM_MSG_PAGE = 6,        /* reply to FETCH: page, version, data,
				   tags */
	LM_MSG_FLUSH = 7,       /* C->L req, L->R one-way: rank, diffs */
	LM_MSG_FLUSH_OK = 8,    /* L->C reply: status */
	LM_MSG_BARRIER = 9,     /* C->L req, L->R one-way (ARRIVE): id */
	LM_MSG_RELEASE = 10,    /* R->L one-way, L->C reply: id, notices */
	LM_MSG_LOCK = 11,       /* C->L req, L->R req: id, rank */
	LM_MSG_GRANT = 12,      /* reply to LOCK: id, notices */
	LM_MSG_UNLOCK = 13,     /* C->L req, L->R one-way: id, rank */
	LM_MSG_UNLOCK_OK = 14,  /* L->C reply: status */
	LM_MSG_ALLOC = 15,      /* C->L req, L->R req: size, align, kind */
	LM_MSG_ALLOC_OK = 16,   /* reply to ALLOC: status, offset */
	LM_MSG_FREE = 17,       /* C->L req, L->R req: offset */
	LM_MSG_FREE_OK = 18,    /* reply to FREE: status */
	LM_MSG_CREATE = 19,     /* C->L req, L->R, R->L one-way: target rank,
				   function offset, data-segment image */
	LM_MSG_CREATE_OK = 20,  /* L->C reply to CREATE: status */
	LM_MSG_WAIT_WORK = 21,  /* C->L req: a worker waits for its CREATE;
				   answered by a CREATE */
	LM_MSG_END = 22,        /* C->L req, L->R, R->L one-way: rank, status */
	LM_MSG_END_OK = 23,     /* L->C reply to END */
	LM_MSG_WAIT_END = 24,   /* C->L req: count; answered by RELEASE
				   (id 0) when `count` ENDs arrived */
	LM_MSG_LEAVE = 25,      /* C->L req: the client finishes */
	LM_MSG_LEAVE_OK = 26,
	LM_MSG_ABORT = 27,      /* any direction, one-way: the run failed;
				   rank and reason */
	LM_MSG_STATS = 28,      /* tool -> daemon request: your counters
				   (common/stats.h) */
	LM_MSG_STATS_REPLY = 29, /* reply to STATS (common/stats.h) */
	LM_MSG_REGISTER = 30,   /* L->R, R->home req: a cluster's deltas of
				   an interval, as entries (notices) and
				   data (diffs); see LM_REG_* */
	LM_MSG_REGISTER_OK = 31, /* reply: status, the pages' notices */
	LM_MSG_PULL = 32,       /* home->R, R->L req: page, version, id =
				   layout index of the cluster */
	LM_MSG_DELTA = 33,      /* reply to PULL: status, id, page,
				   version, diffs (one entry) */
	LM_MSG_RECALL = 34,     /* lock manager -> R -> L one-way: give the
				   lock's token back (id, rank it was
				   granted to; epoch: the earliest round
				   of the waiters of other clusters) */
	LM_MSG_FETCHV = 35,     /* C->L and L->R req: several pages
				   (notices: page, version = oldest that
				   may answer; from C, the first carries
				   the fault's reach) */
	LM_MSG_PAGES = 36,      /* reply to FETCHV: the pages R could serve
				   at once (notices: page, version; diffs:
				   the data, an entry each, in that order) */
	LM_MSG_CHANGED = 37,    /* L -> R (-> R) -> L one-way: pages the
				   sending cluster's registrations changed
				   (notices: page, version); id =
				   LM_CHANGED_ALL: every other cluster that
				   keeps one copy (docs/dsm.md "Eventual
				   visibility") */
	LM_MSG_GONE = 38,       /* L -> R -> every other R one-way: every
				   rank of the cluster left the run; rank:
				   the last to leave; id: the cluster's
				   layout index (its reflector sets it):
				   barriers it never reached can never
				   complete (docs/operations.md) */
	LM_MSG_WAITING = 39,    /* R -> every other R one-way: every
				   cluster of the sender waits in barrier
				   id; epoch: the barriers it released to
				   its clusters before (barriers.c) */
	LM_MSG_PROBE = 40,      /* L -> R -> lock id's manager -> the
				   holder's L one-way: does a cycle of lock
				   waits come back to the rank that started
				   it?  id: the lock chased; rank: from the
				   manager, the rank it granted the lock to;
				   version: the starting wait's request id;
				   data: the chain so far, (rank, lock it
				   waits for) as two u32 LE each
				   (lemuriad/locks.c) */
	LM_MSG_TYPE_COUNT
};

enum lm_role {
	LM_ROLE_REFLECTOR, /* root-cluster daemon */
	LM_ROLE_LEMURIAD,  /* cluster daemon */
	LM_ROLE_COUNT
};

struct lm_msg_pong {
	uint8_t role;               /* enum lm_role */
	char name[LM_NAME_MAX];     /* its section name */
	uint64_t uptime_us;
	uint32_t peers;             /* peers it has exchanged data with */
	uint64_t dg_received, dg_sent, drops; /* transport counters */
};

/* Returns the message type of buf, or LM_EBADMSG when buf is shorter than
 * the prefix or its reserved bits are set. */
int lm_msg_type(const uint8_t *buf, size_t len);

/* Encoders write into out (capacity cap) and return the length, or
 * LM_ENOBUFS.  Decoders return 0 or LM_EBADMSG. */
int lm_msg_encode_ping(uint8_t *out, size_t cap);
/* A daemon's one-way PING to a peer daemon (keepalive, and the first
 * message of every session) carries the hash of its layout file:
 * prefix, u64 layout_hash.  The decoder gives 0 and the hash, LM_ENOENT
 * for a PING without one (a tool's), or LM_EBADMSG. */
int lm_msg_encode_ping_hash(uint64_t layout_hash, uint8_t *out, size_t cap);
int lm_msg_decode_ping(const uint8_t *buf, size_t len, uint64_t *layout_hash);
int lm_msg_encode_pong(const struct lm_msg_pong *p, uint8_t *out, size_t cap);
int lm_msg_decode_pong(const uint8_t *buf, size_t len, struct lm_msg_pong *p);

const char *lm_role_name(enum lm_role role);

/* ---- DSM messages (docs/dsm.md) ---------------------------------------
 *
 * One decoded form for all of them: struct lm_msg.  Variable-length parts
 * (page data, diffs, notices, images) are borrowed pointers: into the
 * received buffer after lm_msg_decode (valid while it is), into the
 * caller's memory for lm_msg_encode. */

/* `writer` and `wcluster` of a notice whose page was changed in its epoch
 * by more than one rank, or from more than one cluster. */
#define LM_WRITER_MANY 0xffffffffu

/* A write notice: the home holds `page` at `version` (I3).  The epoch's
 * diff lists for the page took it from `base` to `version`; all of them
 * came from rank `writer` (else LM_WRITER_MANY) through the cluster of
 * layout index `wcluster` (else LM_WRITER_MANY).  A copy at `base` that
 * already holds exactly those diffs equals the home's page at `version`
 * and may be kept (docs/dsm.md "Sole writers"). */
struct lm_notice {
	uint32_t page;
	uint32_t version;
	uint32_t base;
	uint32_t writer;
	uint32_t wcluster;
};

/* Diffs are carried as a packed list: repeated {u32 page, u32 len, len
 * bytes of common/diff.h run format}.  lm_msg_diffs_next walks it. */
struct lm_msg_diffs {
	const uint8_t *data;
	size_t len;
	uint32_t count;
};

struct lm_msg {
	uint16_t type;         /* enum lm_msg_type */
	uint64_t run;          /* run id, on every DSM message */
	int32_t status;        /* *_OK, JOIN_OK, ALLOC_OK, END: 0 or LM_E* */
	uint32_t rank;         /* JOIN, FLUSH (the writer), LOCK, UNLOCK,
				  CREATE (target), END, ABORT */
	uint32_t id;           /* BARRIER, RELEASE, LOCK, GRANT, UNLOCK: the
				  barrier or lock id; WAIT_END: count */
	uint32_t page;         /* FETCH, PAGE */
	uint32_t version;      /* PAGE; FETCH from L: the oldest version
				  that may answer it (the newest notice
				  L has seen for the page) */
	uint32_t pid;          /* JOIN */
	uint32_t epoch;        /* FLUSH, BARRIER, LOCK, UNLOCK between
				  reflectors: barriers completed in the run
				  so far at the sender (0 elsewhere) */
	uint64_t layout_hash;  /* JOIN */
	uint64_t size;         /* ALLOC: bytes */
	uint64_t align;        /* ALLOC: power of two; 0 = default */
	uint64_t offset;       /* ALLOC_OK, FREE: from the region's base;
				  CREATE: function offset from the
				  executable's load base */
	const uint8_t *data;   /* PAGE: page_size bytes; CREATE: image;
				  ABORT: reason text (not NUL-terminated) */
	size_t data_len;
	struct lm_msg_diffs diffs;          /* FLUSH, REGISTER, DELTA;
					       RELEASE from L to C: updates
					       of pages C holds */
	const struct lm_notice *notices;    /* RELEASE, GRANT, END; between
					       reflectors also FLUSH_OK,
					       BARRIER, UNLOCK */
	uint32_t nnotices;
	/* PAGE, PAGES: per cluster that registered a change of a page
	 * served, the number of its last such registration; CHANGED: per
	 * cluster, the registrations of it the writer was told of
	 * (docs/dsm.md "Order").  LM_MSG_TAG_SIZE bytes each, read with
	 * lm_msg_tag (borrowed, unaligned) */
	const uint8_t *tags;
	uint32_t ntags;
};

/* A tag: u32 cluster (layout index), u32 registration number. */
#define LM_MSG_TAG_SIZE 8u

static inline void lm_msg_tag(const struct lm_msg *m, uint32_t i,
			      uint32_t *cluster, uint32_t *reg)
{
	const uint8_t *t = m->tags + (size_t)i * LM_MSG_TAG_SIZE;

	*cluster = (uint32_t)t[0] | (uint32_t)t[1] << 8 |
		   (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
	*reg = (uint32_t)t[4] | (uint32_t)t[5] << 8 | (uint32_t)t[6] << 16 |
	       (uint32_t)t[7] << 24;
}

/* Writes tag i of a list being built in buf. */
static inline void lm_msg_tag_put(uint8_t *buf, uint32_t i, uint32_t cluster,
				  uint32_t reg)
{
	uint8_t *t = buf + (size_t)i * LM_MSG_TAG_SIZE;

	for (int k = 0; k < 4; k++) {
		t[k] = (uint8_t)(cluster >> (8 * k));
		t[4 + k] = (uint8_t)(reg >> (8 * k));
	}
}

/* REGISTER entries are notices: `page`, `writer` (rank, or
 * LM_WRITER_MANY), `wcluster` (the cluster's layout index), `base` one of
 * the kinds below, `version` as the kind says.  Entries with data take,
 * in order, the next entry of the message's diff list, which must be for
 * the same page (docs/dsm.md "Lazy, adaptive and eager relay"). */
#define LM_REG_NEW 0u  /* the cluster keeps the delta; `version`: its
			  unpulled delta of this page (0: none), which the
			  home may merge the new one into */
#define LM_REG_DATA 1u /* the delta travels now (eager relay, or memory
			  pressure at the lemuriad) */
#define LM_REG_PUSH 2u /* the data of the delta registered at `version` */
#define LM_REG_DROP 3u /* no data, no new version: the cluster's copy no
			  longer holds the page (docs/dsm.md "Pages one
			  cluster owns") */
#define LM_REG_KINDS 4u

/* Whether a REGISTER entry of this kind takes the next diff of the list. */
static inline bool lm_reg_has_data(uint32_t kind)
{
	return kind == LM_REG_DATA || kind == LM_REG_PUSH;
}

/* CREATE's offset when rank 0 has finished without giving the rank any
 * work (it never called CREATE for it): the worker ends at once. */
#define LM_CREATE_NO_WORK UINT64_MAX

/* CHANGED's id for "every cluster under the reflector that passes it
 * on": the home knows only that one of that reflector's clusters holds
 * the page (it fetched through a relay). */
#define LM_CHANGED_ALL 0xffffffffu

/* CHANGED's id for "send what you changed now": a reader's lemuriad
 * holds a page newer than any change it was told of and waits for the
 * list that names it (docs/dsm.md "Eventual visibility", "Order").  No
 * notices; every cluster, whatever its copy mode, hears it. */
#define LM_CHANGED_HURRY 0xfffffffeu

/* Most pages a CHANGED names; a home sends several for more. */
#define LM_CHANGED_MAX 256u

/* Most pages a FETCHV asks for; a reflector serves no more. */
#define LM_FETCHV_MAX 64u

/* A FETCHV notice's `base` is the version of the copy the lemuriad
 * holds, or LM_NO_BASE; a PAGES notice's `base` says what its entry is:
 * LM_NO_BASE the whole page (page_size bytes), else a diff that takes the
 * requester's copy at that base to `version` (docs/dsm.md "Pages as
 * diffs"). */
#define LM_NO_BASE 0xffffffffu

/* ALLOC with align 0 reserves ids of kind `id` instead of memory. */
#define LM_ALLOC_KIND_LOCK 1u
#define LM_ALLOC_KIND_BARRIER 2u

/* Longest ABORT reason text, in bytes. */
#define LM_MSG_REASON_MAX 256

/* Bytes lm_msg_encode needs for m (exact); 0 when m->type is not a DSM
 * message. */
size_t lm_msg_encoded_len(const struct lm_msg *m);
/* Encodes m into out.  Returns the length or LM_ENOBUFS / LM_EINVAL
 * (type not a DSM message, or fields inconsistent). */
int lm_msg_encode(const struct lm_msg *m, uint8_t *out, size_t cap);

/* m encoded in three parts, so that its bulk (data or diff list) reaches
 * the transport without a copy of its own: head, then blob (m's own
 * bytes, borrowed), then tail; head and tail are written to out, the
 * tail right after the head.  Their concatenation is exactly what
 * lm_msg_encode writes.  Returns 0 or lm_msg_encode's errors. */
struct lm_msg_split {
	size_t head_len;
	const uint8_t *blob; /* NULL when m has no bulk */
	size_t blob_len;
	size_t tail_len;
};
int lm_msg_encode_split(const struct lm_msg *m, uint8_t *out, size_t cap,
			struct lm_msg_split *s);
/* Bytes lm_msg_encode_split writes to out for m (0: not a DSM type). */
size_t lm_msg_split_len(const struct lm_msg *m);
/* Decodes buf.  Returns 0, LM_EBADMSG (truncated, trailing bytes, a
 * length that does not fit) or LM_ETYPE.  Notices are decoded into
 * `notice_buf` (capacity `notice_cap` entries; LM_ENOBUFS if more) since
 * their wire form is not aligned. */
int lm_msg_decode(const uint8_t *buf, size_t len, struct lm_msg *m,
		  struct lm_notice *notice_buf, size_t notice_cap);

/* Iterates a diff list: *pos starts at 0.  Returns 1 with page, diff and
 * len filled, 0 at the end, LM_EBADMSG when the list is malformed. */
int lm_msg_diffs_next(const struct lm_msg_diffs *d, size_t *pos,
		      uint32_t *page, const uint8_t **diff, size_t *len);
/* Appends one entry to a diff list being built in buf (capacity cap,
 * current length *len).  Returns 0 or LM_ENOBUFS. */
int lm_msg_diffs_append(uint8_t *buf, size_t cap, size_t *len,
			uint32_t page, const uint8_t *diff, size_t diff_len);

/* Bytes before an entry's diff in a diff list. */
#define LM_MSG_DIFFS_ENTRY_HDR 8u

/* Writes the header of an entry whose diff_len bytes of diff the caller
 * puts right after it (encoded in place, with no copy): at buf,
 * LM_MSG_DIFFS_ENTRY_HDR bytes.  diff_len must fit in a u32. */
void lm_msg_diffs_put_header(uint8_t *buf, uint32_t page, size_t diff_len);

/* Keeps one notice per page, the one with the highest version (the
 * home's latest word on the page: later notices of an epoch include what
 * earlier ones said), sorted by page.  Returns the new count.  Merging two
 * lists is appending one to the other and calling this. */
size_t lm_notices_merge(struct lm_notice *v, size_t n);

/* A client's FETCHV (docs/protocol.md): sets m's notices to ask[0..n),
 * pages[0] (the faulting page) first, each with base LM_NO_BASE, and
 * `reach`, how many pages after pages[0] the fault reached, in the first
 * notice's version.  m's type and header are the caller's. */
void lm_msg_fetchv(struct lm_msg *m, struct lm_notice *ask,
		   const uint32_t *pages, uint32_t n, uint32_t reach);

/* The reach a client's FETCHV carries (0 when it has no notice). */
uint32_t lm_msg_fetchv_reach(const struct lm_msg *m);

/* How a protocol state machine (lemuriad/lemuriad.c, reflector/dispatch.c)
 * emits messages.  The daemon glue encodes each message during the call,
 * so borrowed pointers in m need only live until the callback returns. */
struct lm_msg_out {
	/* One-way message to `node`. */
	void (*send)(void *ctx, uint16_t node, const struct lm_msg *m);
	/* Request to `node`; its reply comes back through the state
	 * machine's handle function as kind LM_REL_REPLY with this req_id.
	 * req_id must grow with every request (one counter per machine). */
	void (*request)(void *ctx, uint16_t node, uint32_t req_id,
			const struct lm_msg *m);
	/* Reply to a request received earlier (possibly much later). */
	void (*reply)(void *ctx, uint16_t node, uint32_t req_id,
		      const struct lm_msg *m);
	/* The machine put work off: its protocol's background hook is to
	 * be called once the messages at hand are answered (common/
	 * daemon.h).  May be NULL (tests that drive a machine by hand). */
	void (*later)(void *ctx);
};

/* Name of a message type for logs ("FETCH"), "?" when unknown. */
const char *lm_msg_name(int type);

#endif
