/* Message layer: encoding and decoding of Lemuria messages (proto.h),
 * between the transport below (whole messages as bytes) and the protocol
 * state machines above (struct lm_msg).  Knows nothing of sockets.
 *
 * DSM bodies.  After the 4-byte prefix every DSM message carries u64 run,
 * then the fields its type uses, always in this order (little-endian):
 *
 *   i32 status | u32 id | u32 rank | u32 page | u32 version | u32 pid |
 *   u32 epoch | u64 layout_hash | u64 size | u64 align | u64 offset |
 *   u32 data length | diffs: u32 count, u32 length |
 *   the data's bytes, or the diffs' (no type has both): {u32 page,
 *            u32 len, len bytes of diff (common/diff.h)} count times |
 *   notices: u32 count, count * {u32 page, u32 version, u32 base,
 *            u32 writer, u32 wcluster}
 *
 *   type       fields after run (the table msg_kinds below is the truth)
 *   JOIN       rank, pid, layout_hash, data (copy = cluster: the abstract
 *              socket name where the client takes the cluster's copy; else
 *              empty)
 *   FETCH      page, version (the oldest that may answer)
 *   PAGE       page, version, data (the page; empty: refused)
 *   FLUSH      rank (the writer), epoch (R -> home), diffs
 *   FLUSH_OK   status, notices (home -> R)
 *   BARRIER    id, epoch, notices (R -> manager: the epoch set)
 *   RELEASE    id, notices, diffs (L -> C: updates, docs/dsm.md)
 *   LOCK       id, rank, epoch (R -> manager)
 *   GRANT      id, notices
 *   UNLOCK     id, rank, epoch, notices (R -> manager: the epoch set)
 *   ALLOC      id (kind of id reservation, 0 for memory), size, align
 *   ALLOC_OK   status, offset
 *   FREE       offset
 *   CREATE     rank (target), offset (function), notices (empty unless R
 *              forwards it), data (data-segment image, liblemuria/segment.h)
 *   WAIT_WORK  (nothing)
 *   END        status, rank, notices (empty unless R forwards it)
 *   WAIT_END   id (the count)
 *   LEAVE      (nothing)
 *   ABORT      rank, data (reason, at most LM_MSG_REASON_MAX bytes)
 *   REGISTER   id (the cluster's registration number), epoch, notices (entries: page, writer, cluster, kind in
 *              base, version), diffs (the data of the entries that carry
 *              it, in entry order)
 *   REGISTER_OK status, notices, data (the pages the cluster now owns,
 *              u32 each: docs/dsm.md "Pages one cluster owns")
 *   PULL       id (the cluster), page, version
 *   DELTA      status, id (a whole page taken back from its owner: the
 *              owner's registration that holds what it wrote before;
 *              else 0), page, version, diffs (one entry)
 *   RECALL     id, rank
 *   FETCHV     notices (page, version = the oldest that may answer, base =
 *              the version of a copy the asker holds; the first entry's
 *              version from a client is its reach, lm_msg_fetchv)
 *   PAGES      notices (page, version, base), diffs (an entry a page),
 *              tags (of every page served)
 *   CHANGED    id (LM_CHANGED_ALL), rank (the writer's cluster), version
 *              (the writer's registrations told so far), notices (page,
 *              version), tags (what the writer was told so far); or id
 *              LM_CHANGED_HURRY and nothing else
 *   GONE       id (the cluster), rank (the last of it to leave)
 *   JOIN_OK, UNLOCK_OK, FREE_OK, CREATE_OK, END_OK, LEAVE_OK: status
 *   PING, PONG, STATS, STATS_REPLY: bodies of their own (below)
 *
 * The encoding is canonical (no padding, no optional parts), so a buffer
 * that decodes re-encodes to the same bytes.  Fields a type does not use
 * are neither encoded nor read, and decode as 0/NULL.  An empty data or
 * notice list decodes as NULL with length 0.  The decoder checks every
 * length against what is left before it reads and rejects trailing bytes;
 * it checks the diff list's entry headers (they must add up exactly to its
 * length and count) but not the diffs themselves, which the receiver
 * checks with lm_diff_validate against its page size. */
#include "proto.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"
#include "wire.h"

#define LM_PONG_BODY (1 + LM_NAME_MAX + 8 + 4 + 8 + 8 + 8)

int lm_msg_type(const uint8_t *buf, size_t len)
{
	uint16_t type;

	if (!buf || len < LM_MSG_PREFIX || lm_get16(buf + 2) != 0)
		return LM_EBADMSG;
	type = lm_get16(buf);
	if (type == 0 || type >= LM_MSG_TYPE_COUNT)
		return LM_ETYPE;
	return type;
}

static void lm_msg_prefix(uint8_t *out, enum lm_msg_type type)
{
	lm_put16(out, (uint16_t)type);
	lm_put16(out + 2, 0);
}

int lm_msg_encode_ping(uint8_t *out, size_t cap)
{
	if (cap < LM_MSG_PREFIX)
		return LM_ENOBUFS;
	lm_msg_prefix(out, LM_MSG_PING);
	return LM_MSG_PREFIX;
}

int lm_msg_encode_ping_hash(uint64_t layout_hash, uint8_t *out, size_t cap)
{
	if (cap < LM_MSG_PREFIX + 8)
		return LM_ENOBUFS;
	lm_msg_prefix(out, LM_MSG_PING);
	lm_put64(out + LM_MSG_PREFIX, layout_hash);
	return LM_MSG_PREFIX + 8;
}

int lm_msg_decode_ping(const uint8_t *buf, size_t len, uint64_t *layout_hash)
{
	if (lm_msg_type(buf, len) != LM_MSG_PING)
		return LM_EBADMSG;
	if (len == LM_MSG_PREFIX)
		return LM_ENOENT;
	if (len != LM_MSG_PREFIX + 8)
		return LM_EBADMSG;
	*layout_hash = lm_get64(buf + LM_MSG_PREFIX);
	return 0;
}

int lm_msg_encode_pong(const struct lm_msg_pong *p, uint8_t *out, size_t cap)
{
	uint8_t *b = out + LM_MSG_PREFIX;

	if (cap < LM_MSG_PREFIX + LM_PONG_BODY)
		return LM_ENOBUFS;
	lm_msg_prefix(out, LM_MSG_PONG);
	b[0] = p->role;
	memset(b + 1, 0, LM_NAME_MAX);
	memcpy(b + 1, p->name, strnlen(p->name, LM_NAME_MAX - 1));
	b += 1 + LM_NAME_MAX;
	lm_put64(b, p->uptime_us);
	lm_put32(b + 8, p->peers);
	lm_put64(b + 12, p->dg_received);
	lm_put64(b + 20, p->dg_sent);
	lm_put64(b + 28, p->drops);
	return LM_MSG_PREFIX + LM_PONG_BODY;
}

int lm_msg_decode_pong(const uint8_t *buf, size_t len, struct lm_msg_pong *p)
{
	const uint8_t *b = buf + LM_MSG_PREFIX;

	if (len != LM_MSG_PREFIX + LM_PONG_BODY ||
	    lm_msg_type(buf, len) != LM_MSG_PONG)
		return LM_EBADMSG;
	if (b[0] >= LM_ROLE_COUNT || b[LM_NAME_MAX] != 0)
		return LM_EBADMSG; /* the name must be NUL-terminated */
	p->role = b[0];
	memcpy(p->name, b + 1, LM_NAME_MAX);
	b += 1 + LM_NAME_MAX;
	p->uptime_us = lm_get64(b);
	p->peers = lm_get32(b + 8);
	p->dg_received = lm_get64(b + 12);
	p->dg_sent = lm_get64(b + 20);
	p->drops = lm_get64(b + 28);
	return 0;
}

const char *lm_role_name(enum lm_role role)
{
	switch (role) {
	case LM_ROLE_REFLECTOR:
		return "reflector";
	case LM_ROLE_LEMURIAD:
		return "lemuriad";
	default:
		return "unknown";
	}
}

/* ---- DSM messages ----------------------------------------------------- */

enum {
	F_STATUS = 1u << 0,
	F_ID = 1u << 1,
	F_RANK = 1u << 2,
	F_PAGE = 1u << 3,
	F_VERSION = 1u << 4,
	F_PID = 1u << 5,
	F_HASH = 1u << 6,
	F_SIZE = 1u << 7,
	F_ALIGN = 1u << 8,
	F_OFFSET = 1u << 9,
	F_DATA = 1u << 10,
	F_DIFFS = 1u << 11,
	F_NOTICES = 1u << 12,
	F_EPOCH = 1u << 13,
	F_TAGS = 1u << 14,
};

#define LM_MSG_RUN 8        /* u64 run id */
#define LM_DIFF_ENTRY_HDR LM_MSG_DIFFS_ENTRY_HDR /* u32 page, u32 len */
#define LM_NOTICE_SIZE 20   /* u32 page, version, base, writer, wcluster */

struct msg_kind {
	const char *name;
	unsigned fields; /* F_*; 0 for PING/PONG, which are not DSM */
	bool dsm;
};

static const struct msg_kind msg_kinds[LM_MSG_TYPE_COUNT] = {
	[LM_MSG_PING] = { "PING", 0, false },
	[LM_MSG_PONG] = { "PONG", 0, false },
	[LM_MSG_JOIN] = { "JOIN", F_RANK | F_PID | F_HASH | F_DATA, true },
	[LM_MSG_JOIN_OK] = { "JOIN_OK", F_STATUS, true },
	[LM_MSG_FETCH] = { "FETCH", F_ID | F_PAGE | F_VERSION, true },
	[LM_MSG_PAGE] = { "PAGE", F_PAGE | F_VERSION | F_DATA | F_TAGS, true },
	[LM_MSG_FLUSH] = { "FLUSH", F_RANK | F_EPOCH | F_DIFFS, true },
	[LM_MSG_FLUSH_OK] = { "FLUSH_OK", F_STATUS | F_NOTICES, true },
	[LM_MSG_BARRIER] = { "BARRIER", F_ID | F_EPOCH | F_NOTICES, true },
	[LM_MSG_RELEASE] = { "RELEASE", F_ID | F_NOTICES | F_DIFFS, true },
	[LM_MSG_LOCK] = { "LOCK", F_ID | F_RANK | F_EPOCH, true },
	[LM_MSG_GRANT] = { "GRANT", F_ID | F_NOTICES, true },
	[LM_MSG_UNLOCK] = { "UNLOCK", F_ID | F_RANK | F_EPOCH | F_NOTICES,
			    true },
	[LM_MSG_UNLOCK_OK] = { "UNLOCK_OK", F_STATUS, true },
	[LM_MSG_ALLOC] = { "ALLOC", F_ID | F_SIZE | F_ALIGN, true },
	[LM_MSG_ALLOC_OK] = { "ALLOC_OK", F_STATUS | F_OFFSET, true },
	[LM_MSG_FREE] = { "FREE", F_OFFSET, true },
	[LM_MSG_FREE_OK] = { "FREE_OK", F_STATUS, true },
	[LM_MSG_CREATE] = { "CREATE", F_RANK | F_OFFSET | F_NOTICES | F_DATA,
			    true },
	[LM_MSG_CREATE_OK] = { "CREATE_OK", F_STATUS, true },
	[LM_MSG_WAIT_WORK] = { "WAIT_WORK", 0, true },
	[LM_MSG_END] = { "END", F_STATUS | F_RANK | F_NOTICES, true },
	[LM_MSG_END_OK] = { "END_OK", F_STATUS, true },
	[LM_MSG_WAIT_END] = { "WAIT_END", F_ID, true },
	[LM_MSG_LEAVE] = { "LEAVE", 0, true },
	[LM_MSG_LEAVE_OK] = { "LEAVE_OK", F_STATUS, true },
	[LM_MSG_ABORT] = { "ABORT", F_RANK | F_DATA, true },
	[LM_MSG_STATS] = { "STATS", 0, false },
	[LM_MSG_STATS_REPLY] = { "STATS_REPLY", 0, false },
	[LM_MSG_REGISTER] = { "REGISTER", F_ID | F_EPOCH | F_NOTICES | F_DIFFS,
			       true },
	[LM_MSG_REGISTER_OK] = { "REGISTER_OK", F_STATUS | F_NOTICES | F_DATA,
				  true },
	[LM_MSG_PULL] = { "PULL", F_ID | F_PAGE | F_VERSION, true },
	[LM_MSG_DELTA] = { "DELTA", F_STATUS | F_ID | F_PAGE | F_VERSION |
				   F_DIFFS, true },
	[LM_MSG_RECALL] = { "RECALL", F_ID | F_RANK | F_EPOCH, true },
	[LM_MSG_FETCHV] = { "FETCHV", F_NOTICES, true },
	[LM_MSG_PAGES] = { "PAGES", F_NOTICES | F_DIFFS | F_TAGS, true },
	[LM_MSG_CHANGED] = { "CHANGED", F_ID | F_RANK | F_VERSION | F_NOTICES |
				       F_TAGS, true },
	[LM_MSG_GONE] = { "GONE", F_ID | F_RANK, true },
	[LM_MSG_WAITING] = { "WAITING", F_ID | F_EPOCH, true },
	[LM_MSG_PROBE] = { "PROBE", F_ID | F_RANK | F_VERSION | F_DATA, true },
};

/* Fields of a DSM type, or NULL when type is not one. */
static const struct msg_kind *dsm_kind(unsigned type)
{
	if (type >= LM_MSG_TYPE_COUNT || !msg_kinds[type].dsm)
		return NULL;
	return &msg_kinds[type];
}

const char *lm_msg_name(int type)
{
	if (type <= 0 || type >= LM_MSG_TYPE_COUNT || !msg_kinds[type].name)
		return "?";
	return msg_kinds[type].name;
}

size_t lm_msg_encoded_len(const struct lm_msg *m)
{
	const struct msg_kind *k = dsm_kind(m->type);
	size_t n = LM_MSG_PREFIX + LM_MSG_RUN;
	unsigned f;

	if (!k)
		return 0;
	f = k->fields;
	n += 4 * !!(f & F_STATUS) + 4 * !!(f & F_ID) + 4 * !!(f & F_RANK) +
	     4 * !!(f & F_PAGE) + 4 * !!(f & F_VERSION) + 4 * !!(f & F_PID) +
	     4 * !!(f & F_EPOCH);
	n += 8 * !!(f & F_HASH) + 8 * !!(f & F_SIZE) + 8 * !!(f & F_ALIGN) +
	     8 * !!(f & F_OFFSET);
	if (f & F_DATA)
		n += 4 + m->data_len;
	if (f & F_DIFFS)
		n += 8 + m->diffs.len;
	if (f & F_NOTICES)
		n += 4 + (size_t)m->nnotices * LM_NOTICE_SIZE;
	if (f & F_TAGS)
		n += 4 + (size_t)m->ntags * LM_MSG_TAG_SIZE;
	return n;
}

/* Checks that a diff list holds exactly d->count well-formed entry headers
 * spanning exactly d->len bytes. */
static bool diffs_consistent(const struct lm_msg_diffs *d)
{
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t page, n = 0;
	int rc;

	while ((rc = lm_msg_diffs_next(d, &pos, &page, &diff, &len)) == 1) {
		if (n == d->count)
			return false;
		n++;
	}
	return rc == 0 && n == d->count;
}

/* Rejects what the wire cannot express or the decoder would refuse. */
static int check_encodable(const struct lm_msg *m, unsigned f)
{
	if ((f & F_DATA) &&
	    ((!m->data && m->data_len) || m->data_len > UINT32_MAX))
		return LM_EINVAL;
	if (m->type == LM_MSG_ABORT && m->data_len > LM_MSG_REASON_MAX)
		return LM_EINVAL;
	if ((f & F_NOTICES) && !m->notices && m->nnotices)
		return LM_EINVAL;
	if ((f & F_TAGS) && !m->tags && m->ntags)
		return LM_EINVAL;
	if ((f & F_DIFFS) &&
	    ((!m->diffs.data && m->diffs.len) || m->diffs.len > UINT32_MAX ||
	     !diffs_consistent(&m->diffs)))
		return LM_EINVAL;
	return 0;
}

/* Appends bytes at *p; the caller has checked the capacity. */
static void put_bytes(uint8_t **p, const void *src, size_t n)
{
	if (n)
		memcpy(*p, src, n);
	*p += n;
}

static void put32(uint8_t **p, uint32_t v)
{
	lm_put32(*p, v);
	*p += 4;
}

static void put64(uint8_t **p, uint64_t v)
{
	lm_put64(*p, v);
	*p += 8;
}

/* The bulk of m (its data or its diff list; no message has both). */
static size_t blob_of(const struct lm_msg *m, unsigned f, const uint8_t **at)
{
	*at = NULL;
	if (f & F_DATA) {
		*at = m->data;
		return m->data_len;
	}
	if (f & F_DIFFS) {
		*at = m->diffs.data;
		return m->diffs.len;
	}
	return 0;
}

/* Encodes m into out, or with s not NULL everything but its bulk, which
 * s points at (see lm_msg_encode_split).  Returns the bytes written. */
static int encode(const struct lm_msg *m, uint8_t *out, size_t cap,
		  struct lm_msg_split *s)
{
	const struct msg_kind *k = dsm_kind(m->type);
	const uint8_t *blob;
	uint8_t *p = out;
	size_t need, blob_len;
	unsigned f;
	int rc;

	if (!k)
		return LM_EINVAL;
	f = k->fields;
	rc = check_encodable(m, f);
	if (rc < 0)
		return rc;
	need = lm_msg_encoded_len(m);
	blob_len = blob_of(m, f, &blob);
	if (need > INT_MAX)
		return LM_EINVAL;
	if (s)
		need -= blob_len;
	if (need > cap)
		return LM_ENOBUFS;

	lm_msg_prefix(p, m->type);
	p += LM_MSG_PREFIX;
	put64(&p, m->run);
	if (f & F_STATUS)
		put32(&p, (uint32_t)m->status);
	if (f & F_ID)
		put32(&p, m->id);
	if (f & F_RANK)
		put32(&p, m->rank);
	if (f & F_PAGE)
		put32(&p, m->page);
	if (f & F_VERSION)
		put32(&p, m->version);
	if (f & F_PID)
		put32(&p, m->pid);
	if (f & F_EPOCH)
		put32(&p, m->epoch);
	if (f & F_HASH)
		put64(&p, m->layout_hash);
	if (f & F_SIZE)
		put64(&p, m->size);
	if (f & F_ALIGN)
		put64(&p, m->align);
	if (f & F_OFFSET)
		put64(&p, m->offset);
	if (f & F_DATA)
		put32(&p, (uint32_t)m->data_len);
	if (f & F_DIFFS) {
		put32(&p, m->diffs.count);
		put32(&p, (uint32_t)m->diffs.len);
	}
	if (s) {
		*s = (struct lm_msg_split){ (size_t)(p - out), blob, blob_len,
					    0 };
	} else {
		put_bytes(&p, blob, blob_len);
	}
	if (f & F_NOTICES) {
		put32(&p, m->nnotices);
		for (uint32_t i = 0; i < m->nnotices; i++) {
			put32(&p, m->notices[i].page);
			put32(&p, m->notices[i].version);
			put32(&p, m->notices[i].base);
			put32(&p, m->notices[i].writer);
			put32(&p, m->notices[i].wcluster);
		}
	}
	if (f & F_TAGS) {
		put32(&p, m->ntags);
		put_bytes(&p, m->tags, (size_t)m->ntags * LM_MSG_TAG_SIZE);
	}
	if (s)
		s->tail_len = (size_t)(p - out) - s->head_len;
	return (int)(p - out);
}

int lm_msg_encode(const struct lm_msg *m, uint8_t *out, size_t cap)
{
	return encode(m, out, cap, NULL);
}

int lm_msg_encode_split(const struct lm_msg *m, uint8_t *out, size_t cap,
			struct lm_msg_split *s)
{
	int rc = encode(m, out, cap, s);

	return rc < 0 ? rc : 0;
}

size_t lm_msg_split_len(const struct lm_msg *m)
{
	const struct msg_kind *k = dsm_kind(m->type);
	const uint8_t *blob;

	if (!k)
		return 0;
	return lm_msg_encoded_len(m) - blob_of(m, k->fields, &blob);
}

/* A read cursor over a received body: every take checks what is left. */
struct cursor {
	const uint8_t *p;
	size_t left;
};

static const uint8_t *take(struct cursor *c, size_t n)
{
	const uint8_t *at = c->p;

	if (n > c->left)
		return NULL;
	c->p += n;
	c->left -= n;
	return at;
}

static int get32(struct cursor *c, uint32_t *v)
{
	const uint8_t *at = take(c, 4);

	if (!at)
		return LM_EBADMSG;
	*v = lm_get32(at);
	return 0;
}

static int get64(struct cursor *c, uint64_t *v)
{
	const uint8_t *at = take(c, 8);

	if (!at)
		return LM_EBADMSG;
	*v = lm_get64(at);
	return 0;
}

/* Reads u32 length + bytes; the bytes stay in the received buffer. */
static int get_data(struct cursor *c, const uint8_t **data, size_t *len)
{
	uint32_t n;

	if (get32(c, &n) < 0 || !(*data = take(c, n)))
		return LM_EBADMSG;
	*len = n;
	if (n == 0)
		*data = NULL;
	return 0;
}

static int get_diffs(struct cursor *c, struct lm_msg_diffs *d)
{
	uint32_t count, len;

	if (get32(c, &count) < 0 || get32(c, &len) < 0 ||
	    !(d->data = take(c, len)))
		return LM_EBADMSG;
	d->len = len;
	d->count = count;
	if (len == 0)
		d->data = NULL;
	return diffs_consistent(d) ? 0 : LM_EBADMSG;
}

/* Notices are copied out since their wire form is not aligned.  Returns
 * LM_ENOBUFS only for a well-formed list longer than cap, so that the
 * caller can still tell a malformed message from a small buffer. */
static int get_notices(struct cursor *c, struct lm_msg *m,
		       struct lm_notice *buf, size_t cap)
{
	const uint8_t *at;
	uint32_t n;

	if (get32(c, &n) < 0 || (size_t)n > c->left / LM_NOTICE_SIZE)
		return LM_EBADMSG;
	at = take(c, (size_t)n * LM_NOTICE_SIZE);
	if (n == 0)
		return 0;
	if (n > cap || !buf)
		return LM_ENOBUFS;
	for (uint32_t i = 0; i < n; i++, at += LM_NOTICE_SIZE) {
		buf[i].page = lm_get32(at);
		buf[i].version = lm_get32(at + 4);
		buf[i].base = lm_get32(at + 8);
		buf[i].writer = lm_get32(at + 12);
		buf[i].wcluster = lm_get32(at + 16);
	}
	m->notices = buf;
	m->nnotices = n;
	return 0;
}

/* Reads the fields f of a DSM body after the run id, in wire order.
 * A notice list longer than cap sets *nobufs and is skipped, so that the
 * caller still checks the rest of the message. */
static int decode_fields(struct cursor *c, struct lm_msg *m, unsigned f,
			 struct lm_notice *notice_buf, size_t notice_cap,
			 bool *nobufs)
{
	uint32_t status = 0;
	int rc;

	if ((f & F_STATUS) && get32(c, &status) < 0)
		return LM_EBADMSG;
	m->status = (int32_t)status;
	if (((f & F_ID) && get32(c, &m->id) < 0) ||
	    ((f & F_RANK) && get32(c, &m->rank) < 0) ||
	    ((f & F_PAGE) && get32(c, &m->page) < 0) ||
	    ((f & F_VERSION) && get32(c, &m->version) < 0) ||
	    ((f & F_PID) && get32(c, &m->pid) < 0) ||
	    ((f & F_EPOCH) && get32(c, &m->epoch) < 0) ||
	    ((f & F_HASH) && get64(c, &m->layout_hash) < 0) ||
	    ((f & F_SIZE) && get64(c, &m->size) < 0) ||
	    ((f & F_ALIGN) && get64(c, &m->align) < 0) ||
	    ((f & F_OFFSET) && get64(c, &m->offset) < 0))
		return LM_EBADMSG;
	if ((f & F_DATA) && get_data(c, &m->data, &m->data_len) < 0)
		return LM_EBADMSG;
	if (m->type == LM_MSG_ABORT && m->data_len > LM_MSG_REASON_MAX)
		return LM_EBADMSG;
	if ((f & F_DIFFS) && get_diffs(c, &m->diffs) < 0)
		return LM_EBADMSG;
	if (f & F_NOTICES) {
		rc = get_notices(c, m, notice_buf, notice_cap);
		if (rc == LM_ENOBUFS)
			*nobufs = true;
		else if (rc < 0)
			return rc;
	}
	if (f & F_TAGS) {
		uint32_t n;

		if (get32(c, &n) < 0 || (size_t)n > c->left / LM_MSG_TAG_SIZE)
			return LM_EBADMSG;
		m->tags = take(c, (size_t)n * LM_MSG_TAG_SIZE);
		m->ntags = n;
		if (n == 0)
			m->tags = NULL;
	}
	return 0;
}

/* On any error *m is left zeroed, so nothing half-decoded is acted on. */
int lm_msg_decode(const uint8_t *buf, size_t len, struct lm_msg *m,
		  struct lm_notice *notice_buf, size_t notice_cap)
{
	const struct msg_kind *k;
	struct cursor c;
	bool nobufs = false;
	int type, rc;

	memset(m, 0, sizeof(*m));
	type = lm_msg_type(buf, len);
	if (type < 0)
		return type;
	k = dsm_kind((unsigned)type);
	if (!k)
		return LM_ETYPE;
	m->type = (uint16_t)type;
	c.p = buf + LM_MSG_PREFIX;
	c.left = len - LM_MSG_PREFIX;

	rc = get64(&c, &m->run);
	if (!rc)
		rc = decode_fields(&c, m, k->fields, notice_buf, notice_cap,
				   &nobufs);
	if (!rc && c.left != 0)
		rc = LM_EBADMSG; /* trailing bytes */
	if (!rc && nobufs)
		rc = LM_ENOBUFS;
	if (rc < 0)
		memset(m, 0, sizeof(*m));
	return rc;
}

int lm_msg_diffs_next(const struct lm_msg_diffs *d, size_t *pos,
		      uint32_t *page, const uint8_t **diff, size_t *len)
{
	size_t left;
	uint32_t n;

	if (*pos == d->len)
		return 0;
	if (*pos > d->len || !d->data)
		return LM_EBADMSG;
	left = d->len - *pos;
	if (left < LM_DIFF_ENTRY_HDR)
		return LM_EBADMSG;
	n = lm_get32(d->data + *pos + 4);
	if (n > left - LM_DIFF_ENTRY_HDR)
		return LM_EBADMSG;
	*page = lm_get32(d->data + *pos);
	*diff = n ? d->data + *pos + LM_DIFF_ENTRY_HDR : NULL;
	*len = n;
	*pos += LM_DIFF_ENTRY_HDR + n;
	return 1;
}

void lm_msg_diffs_put_header(uint8_t *buf, uint32_t page, size_t diff_len)
{
	lm_put32(buf, page);
	lm_put32(buf + 4, (uint32_t)diff_len);
}

int lm_msg_diffs_append(uint8_t *buf, size_t cap, size_t *len,
			uint32_t page, const uint8_t *diff, size_t diff_len)
{
	size_t room;

	/* A list must stay expressible in FLUSH's u32 length. */
	if (*len > cap || diff_len > UINT32_MAX - LM_DIFF_ENTRY_HDR)
		return LM_ENOBUFS;
	room = cap - *len;
	if (room < LM_DIFF_ENTRY_HDR || diff_len > room - LM_DIFF_ENTRY_HDR ||
	    *len + LM_DIFF_ENTRY_HDR + diff_len > UINT32_MAX)
		return LM_ENOBUFS;
	lm_msg_diffs_put_header(buf + *len, page, diff_len);
	if (diff_len)
		memcpy(buf + *len + LM_DIFF_ENTRY_HDR, diff, diff_len);
	*len += LM_DIFF_ENTRY_HDR + diff_len;
	return 0;
}

static int notice_order(const void *a, const void *b)
{
	const struct lm_notice *x = a, *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	if (x->version != y->version) /* highest version first */
		return x->version > y->version ? -1 : 1;
	return 0;
}

size_t lm_notices_merge(struct lm_notice *v, size_t n)
{
	size_t out = 0;

	if (n < 2)
		return n;
	qsort(v, n, sizeof(*v), notice_order);
	for (size_t i = 0; i < n; i++)
		if (out == 0 || v[out - 1].page != v[i].page)
			v[out++] = v[i];
	return out;
}

void lm_msg_fetchv(struct lm_msg *m, struct lm_notice *ask,
		   const uint32_t *pages, uint32_t n, uint32_t reach)
{
	for (uint32_t i = 0; i < n; i++)
		ask[i] = (struct lm_notice){ .page = pages[i],
					     .base = LM_NO_BASE };
	if (n)
		ask[0].version = reach;
	m->notices = ask;
	m->nnotices = n;
}

uint32_t lm_msg_fetchv_reach(const struct lm_msg *m)
{
	return m->nnotices && m->notices ? m->notices[0].version : 0;
}
