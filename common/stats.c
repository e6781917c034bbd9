/* Counter sets and the STATS / STATS_REPLY codec (stats.h).  The codec
 * layer: bytes in, structs out, nothing of sockets.  Counter names and
 * daemon names are restricted to [A-Za-z0-9_.-] so that every report
 * (tables, JSON) can print them without escaping; the decoder enforces
 * it, since the bytes come from the network. */
#include "stats.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"
#include "wire.h"

/* role, name, uptime, run, clients, count */
#define LM_STATS_HEAD (1 + LM_NAME_MAX + 8 + 8 + 4 + 4)
/* level, name length, value; the name's bytes come on top */
#define LM_STATS_ENTRY_FIXED (1 + 1 + 8)

struct lm_stats_set {
	struct lm_stats_info info;
	struct lm_stat *v;
	size_t n, cap;
};

static const char lm_stats_name_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";

static bool lm_stats_chars_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(lm_stats_name_chars, s[i]))
			return false;
	return true;
}

int lm_stats_name_valid(const char *name)
{
	size_t n;

	if (!name)
		return 0;
	n = strnlen(name, LM_STAT_NAME_MAX);
	return n >= 1 && n < LM_STAT_NAME_MAX && lm_stats_chars_ok(name, n);
}

const char *lm_stats_level_name(int level)
{
	static const char *const names[LM_STAT_LEVEL_COUNT] = {
		[LM_STAT_CLIENT] = "client",
		[LM_STAT_CLUSTER] = "cluster",
		[LM_STAT_ROOT] = "root",
		[LM_STAT_NONE] = "-",
	};

	return level >= 0 && level < LM_STAT_LEVEL_COUNT ? names[level] : "?";
}

static void lm_stats_info_reset(struct lm_stats_info *info)
{
	memset(info, 0, sizeof(*info));
	info->clients = LM_STATS_CLIENTS_UNKNOWN;
}

lm_stats_set *lm_stats_create(void)
{
	lm_stats_set *s = calloc(1, sizeof(*s));

	if (s)
		lm_stats_info_reset(&s->info);
	return s;
}

void lm_stats_destroy(lm_stats_set *s)
{
	if (!s)
		return;
	free(s->v);
	free(s);
}

void lm_stats_clear(lm_stats_set *s)
{
	s->n = 0;
	lm_stats_info_reset(&s->info);
}

static int lm_stats_reserve(lm_stats_set *s, size_t want)
{
	struct lm_stat *grown;
	size_t cap = s->cap ? s->cap : 16;

	if (want <= s->cap)
		return 0;
	while (cap < want)
		cap *= 2;
	grown = realloc(s->v, cap * sizeof(*grown));
	if (!grown)
		return LM_ENOMEM;
	s->v = grown;
	s->cap = cap;
	return 0;
}

int lm_stats_copy(lm_stats_set *dst, const lm_stats_set *src)
{
	if (lm_stats_reserve(dst, src->n))
		return LM_ENOMEM;
	if (src->n)
		memcpy(dst->v, src->v, src->n * sizeof(*src->v));
	dst->n = src->n;
	dst->info = src->info;
	return 0;
}

static struct lm_stat *lm_stats_find(const lm_stats_set *s, int level,
				     const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].level == level &&
		    strcmp(s->v[i].name, name) == 0)
			return &s->v[i];
	return NULL;
}

int lm_stats_add(lm_stats_set *s, enum lm_stat_level level, const char *name,
		 uint64_t value)
{
	struct lm_stat *st;

	if ((int)level < 0 || level >= LM_STAT_LEVEL_COUNT ||
	    !lm_stats_name_valid(name))
		return LM_EINVAL;
	st = lm_stats_find(s, level, name);
	if (st) {
		st->value += value;
		return 0;
	}
	if (s->n == LM_STATS_MAX)
		return LM_ENOBUFS;
	if (lm_stats_reserve(s, s->n + 1))
		return LM_ENOMEM;
	st = &s->v[s->n++];
	memset(st, 0, sizeof(*st));
	strcpy(st->name, name); /* length checked above */
	st->level = (uint8_t)level;
	st->value = value;
	return 0;
}

size_t lm_stats_add_fields(lm_stats_set *s, const void *base,
			   const struct lm_stats_field *fields, size_t n)
{
	const unsigned char *p = base;
	size_t added = 0;

	for (size_t i = 0; i < n; i++) {
		const unsigned char *f = p + fields[i].offset;
		uint64_t v64 = 0;
		uint32_t v32;
		uint16_t v16;

		switch (fields[i].size) { /* memcpy: no alignment assumed */
		case 8:
			memcpy(&v64, f, 8);
			break;
		case 4:
			memcpy(&v32, f, 4);
			v64 = v32;
			break;
		case 2:
			memcpy(&v16, f, 2);
			v64 = v16;
			break;
		case 1:
			v64 = f[0];
			break;
		default:
			continue;
		}
		if (lm_stats_add(s, fields[i].level, fields[i].name, v64) == 0)
			added++;
	}
	return added;
}

int lm_stats_get(const lm_stats_set *s, enum lm_stat_level level,
		 const char *name, uint64_t *value)
{
	const struct lm_stat *st = name ? lm_stats_find(s, level, name) : NULL;

	if (!st)
		return LM_ENOENT;
	*value = st->value;
	return 0;
}

size_t lm_stats_count(const lm_stats_set *s)
{
	return s->n;
}

const struct lm_stat *lm_stats_at(const lm_stats_set *s, size_t i)
{
	return i < s->n ? &s->v[i] : NULL;
}

const struct lm_stats_info *lm_stats_info(const lm_stats_set *s)
{
	return &s->info;
}

void lm_stats_set_info(lm_stats_set *s, const struct lm_stats_info *info)
{
	s->info = *info;
	s->info.name[LM_NAME_MAX - 1] = '\0';
}

/* 0 client, 1 cluster, 2 reflector: the link level of a pair is the
 * lower kind, which is also its enum lm_level. */
static int lm_stats_node_kind(const struct lm_layout *l, uint16_t node)
{
	size_t r = l->nreflectors, c = l->nclusters;

	if (node == 0)
		return LM_ENOENT;
	if (node <= r)
		return LM_LEVEL_ROOT;
	if (node <= r + c)
		return LM_LEVEL_CLUSTER;
	if (node <= r + c + l->nprocs && node != LM_NODE_CONTROL)
		return LM_LEVEL_CLIENT;
	return LM_ENOENT;
}

int lm_stats_link_level(const struct lm_layout *l, uint16_t a, uint16_t b)
{
	int ka = lm_stats_node_kind(l, a), kb = lm_stats_node_kind(l, b);

	if (ka < 0 || kb < 0)
		return LM_ENOENT;
	return ka < kb ? ka : kb;
}

uint16_t lm_stats_tool_id(const struct lm_layout *l, uint32_t salt)
{
	uint64_t last = (uint64_t)l->nreflectors + l->nclusters + l->nprocs;
	uint64_t first = LM_NODE_CONTROL + 1u - LM_STATS_TOOL_IDS;

	if (first <= last)
		first = last + 1;
	if (first >= LM_NODE_CONTROL)
		return LM_NODE_CONTROL;
	return (uint16_t)(first + salt % (LM_NODE_CONTROL + 1u - first));
}

/* ---- messages ---------------------------------------------------------- */

static void lm_stats_prefix(uint8_t *out, enum lm_msg_type type)
{
	lm_put16(out, (uint16_t)type);
	lm_put16(out + 2, 0);
}

int lm_stats_encode_request(uint8_t *out, size_t cap)
{
	if (cap < LM_MSG_PREFIX)
		return LM_ENOBUFS;
	lm_stats_prefix(out, LM_MSG_STATS);
	return LM_MSG_PREFIX;
}

int lm_stats_decode_request(const uint8_t *buf, size_t len)
{
	if (len != LM_MSG_PREFIX || lm_msg_type(buf, len) != LM_MSG_STATS)
		return LM_EBADMSG;
	return 0;
}

size_t lm_stats_reply_len(const lm_stats_set *s)
{
	size_t len = LM_MSG_PREFIX + LM_STATS_HEAD;

	for (size_t i = 0; i < s->n; i++)
		len += LM_STATS_ENTRY_FIXED + strlen(s->v[i].name);
	return len;
}

int lm_stats_encode_reply(const lm_stats_set *s, uint8_t *out, size_t cap)
{
	size_t need = lm_stats_reply_len(s);
	uint8_t *b = out + LM_MSG_PREFIX;

	if (cap < need)
		return LM_ENOBUFS;
	lm_stats_prefix(out, LM_MSG_STATS_REPLY);
	b[0] = s->info.role;
	memset(b + 1, 0, LM_NAME_MAX);
	memcpy(b + 1, s->info.name, strnlen(s->info.name, LM_NAME_MAX - 1));
	b += 1 + LM_NAME_MAX;
	lm_put64(b, s->info.uptime_us);
	lm_put64(b + 8, s->info.run);
	lm_put32(b + 16, s->info.clients);
	lm_put32(b + 20, (uint32_t)s->n);
	b += 24;
	for (size_t i = 0; i < s->n; i++) {
		size_t nlen = strlen(s->v[i].name);

		b[0] = s->v[i].level;
		b[1] = (uint8_t)nlen;
		memcpy(b + 2, s->v[i].name, nlen);
		lm_put64(b + 2 + nlen, s->v[i].value);
		b += LM_STATS_ENTRY_FIXED + nlen;
	}
	return (int)need;
}

static int lm_stats_decode_body(const uint8_t *buf, size_t len,
				lm_stats_set *s)
{
	const uint8_t *b = buf + LM_MSG_PREFIX, *end = buf + len;
	size_t nlen;
	uint32_t count;

	if (len < LM_MSG_PREFIX + LM_STATS_HEAD ||
	    lm_msg_type(buf, len) != LM_MSG_STATS_REPLY)
		return LM_EBADMSG;
	nlen = strnlen((const char *)b + 1, LM_NAME_MAX);
	/* NUL-terminated, padded with NULs, of the layout's characters. */
	if (b[0] >= LM_ROLE_COUNT || nlen == LM_NAME_MAX ||
	    !lm_stats_chars_ok((const char *)b + 1, nlen))
		return LM_EBADMSG;
	for (size_t i = nlen; i < LM_NAME_MAX; i++)
		if (b[1 + i] != 0)
			return LM_EBADMSG;
	s->info.role = b[0];
	memcpy(s->info.name, b + 1, LM_NAME_MAX);
	b += 1 + LM_NAME_MAX;
	s->info.uptime_us = lm_get64(b);
	s->info.run = lm_get64(b + 8);
	s->info.clients = lm_get32(b + 16);
	count = lm_get32(b + 20);
	b += 24;
	if (count > LM_STATS_MAX)
		return LM_EBADMSG;
	for (uint32_t i = 0; i < count; i++) {
		char name[LM_STAT_NAME_MAX];
		int rc;

		if ((size_t)(end - b) < LM_STATS_ENTRY_FIXED)
			return LM_EBADMSG;
		nlen = b[1];
		if (b[0] >= LM_STAT_LEVEL_COUNT || nlen == 0 ||
		    nlen >= LM_STAT_NAME_MAX ||
		    (size_t)(end - b) < LM_STATS_ENTRY_FIXED + nlen)
			return LM_EBADMSG;
		if (!lm_stats_chars_ok((const char *)b + 2, nlen))
			return LM_EBADMSG; /* a NUL inside too */
		memcpy(name, b + 2, nlen);
		name[nlen] = '\0';
		if (lm_stats_find(s, b[0], name))
			return LM_EBADMSG; /* a repeat would not re-encode */
		rc = lm_stats_add(s, b[0], name, lm_get64(b + 2 + nlen));
		if (rc)
			return rc == LM_ENOMEM ? LM_ENOMEM : LM_EBADMSG;
		b += LM_STATS_ENTRY_FIXED + nlen;
	}
	return b == end ? 0 : LM_EBADMSG;
}

int lm_stats_decode_reply(const uint8_t *buf, size_t len, lm_stats_set *s)
{
	int rc;

	lm_stats_clear(s);
	if (!buf)
		return LM_EBADMSG;
	rc = lm_stats_decode_body(buf, len, s);
	if (rc)
		lm_stats_clear(s);
	return rc;
}
