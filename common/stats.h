/* Counters a daemon reports to the tools: named uint64 values grouped by
 * the level of the hierarchy they belong to, and the STATS / STATS_REPLY
 * messages that carry them (docs/protocol.md, docs/operations.md
 * "Counters").
 *
 * A set keeps its counters in the order they were first added, so that a
 * report lists them the way the daemon grouped them.  The codec knows
 * nothing of sockets: the daemon shell answers STATS with
 * lm_stats_encode_reply, tools decode with lm_stats_decode_reply. */
#ifndef LM_STATS_H
#define LM_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "proto.h"

/* Most counters in a set (and in a STATS_REPLY). */
#define LM_STATS_MAX 256
/* A counter's name: 1..LM_STAT_NAME_MAX - 1 characters of [A-Za-z0-9_.-]. */
#define LM_STAT_NAME_MAX 32
/* lm_stats_info.clients of a daemon that does not know. */
#define LM_STATS_CLIENTS_UNKNOWN 0xffffffffu

/* Where a counter belongs; the first three are the links of enum
 * lm_level and have the same values. */
enum lm_stat_level {
	LM_STAT_CLIENT = LM_LEVEL_CLIENT,   /* client <-> lemuriad */
	LM_STAT_CLUSTER = LM_LEVEL_CLUSTER, /* lemuriad <-> reflector */
	LM_STAT_ROOT = LM_LEVEL_ROOT,       /* reflector <-> reflector */
	LM_STAT_NONE,                       /* no link ("-"): cached bytes... */
	LM_STAT_LEVEL_COUNT
};

struct lm_stat {
	char name[LM_STAT_NAME_MAX];
	uint8_t level; /* enum lm_stat_level */
	uint64_t value;
};

/* Who answered, carried in front of the counters. */
struct lm_stats_info {
	uint8_t role;           /* enum lm_role */
	char name[LM_NAME_MAX]; /* its section name */
	uint64_t uptime_us;
	uint64_t run;           /* newest run id seen, 0 before any */
	uint32_t clients;       /* attached clients, or
				   LM_STATS_CLIENTS_UNKNOWN */
};

typedef struct lm_stats_set lm_stats_set;

/* An empty set (info zeroed, clients unknown); NULL when out of memory. */
lm_stats_set *lm_stats_create(void);
/* Accepts NULL. */
void lm_stats_destroy(lm_stats_set *s);
/* Drops every counter and resets the info. */
void lm_stats_clear(lm_stats_set *s);
/* Makes dst a copy of src.  0 or LM_ENOMEM (dst unchanged). */
int lm_stats_copy(lm_stats_set *dst, const lm_stats_set *src);

/* Adds `value` to the counter (level, name), creating it (at the end)
 * when absent; the sum wraps like the counters it adds.  0; LM_EINVAL for
 * a bad level or name; LM_ENOBUFS when a new counter would exceed
 * LM_STATS_MAX; LM_ENOMEM.  The set is unchanged on failure. */
int lm_stats_add(lm_stats_set *s, enum lm_stat_level level, const char *name,
		 uint64_t value);
/* The counter's value in *value: 0, or LM_ENOENT. */
int lm_stats_get(const lm_stats_set *s, enum lm_stat_level level,
		 const char *name, uint64_t *value);
size_t lm_stats_count(const lm_stats_set *s);
/* The i-th counter (i < lm_stats_count), borrowed until the set changes. */
const struct lm_stat *lm_stats_at(const lm_stats_set *s, size_t i);
const struct lm_stats_info *lm_stats_info(const lm_stats_set *s);
/* Copies *info into the set. */
void lm_stats_set_info(lm_stats_set *s, const struct lm_stats_info *info);

/* A protocol's counters struct described field by field, so that its
 * fields map to named counters with one table line each:
 *   LM_STATS_FIELD(struct lm_lemuriad_stats, LM_STAT_CLIENT, fetch_hits)
 * Fields are unsigned integers of 1, 2, 4 or 8 bytes; the counter takes
 * the field's name. */
struct lm_stats_field {
	const char *name;
	enum lm_stat_level level;
	size_t offset, size;
};
#define LM_STATS_FIELD(type, lvl, field)                                   \
	{ .name = #field, .level = (lvl), .offset = offsetof(type, field), \
	  .size = sizeof(((type *)0)->field) }

/* Adds the n fields of the struct at `base` to s (lm_stats_add; a field
 * that does not fit is left out).  Returns how many were added. */
size_t lm_stats_add_fields(lm_stats_set *s, const void *base,
			   const struct lm_stats_field *fields, size_t n);

/* "client", "cluster", "root", "-"; "?" when out of range. */
const char *lm_stats_level_name(int level);
/* 1 when `name` may name a counter. */
int lm_stats_name_valid(const char *name);

/* Level of the link between nodes a and b of layout l (node ids of
 * docs/protocol.md): the lower of the two ends, so a client's link is
 * "client" and a lemuriad's link to its reflector "cluster".  LM_ENOENT
 * when either is not a node of the layout (0, control tools). */
int lm_stats_link_level(const struct lm_layout *l, uint16_t a, uint16_t b);

/* Node ids control tools take: the top LM_STATS_TOOL_IDS ids of the id
 * space that no node of the layout uses, LM_NODE_CONTROL among them. */
#define LM_STATS_TOOL_IDS 64u
/* A tool's node id for this invocation, picked by `salt` (its pid, say)
 * so that two tools at once rarely share an id and reset each other's
 * sessions.  LM_NODE_CONTROL when the layout leaves no other id free. */
uint16_t lm_stats_tool_id(const struct lm_layout *l, uint32_t salt);

/* ---- messages ----------------------------------------------------------
 *
 * STATS (tool -> daemon request): the 4-byte prefix, nothing else.
 * STATS_REPLY: prefix, u8 role, name (LM_NAME_MAX bytes, NUL-padded),
 * u64 uptime_us, u64 run, u32 clients, u32 count, then count times
 * {u8 level, u8 name length, the name (no NUL), u64 value}.
 *
 * Encoders write into out (capacity cap) and return the length, or
 * LM_ENOBUFS.  Decoders return 0 or LM_EBADMSG. */
int lm_stats_encode_request(uint8_t *out, size_t cap);
int lm_stats_decode_request(const uint8_t *buf, size_t len);
/* Bytes lm_stats_encode_reply needs for s (exact). */
size_t lm_stats_reply_len(const lm_stats_set *s);
int lm_stats_encode_reply(const lm_stats_set *s, uint8_t *out, size_t cap);
/* Replaces the contents of s with the decoded reply.  LM_EBADMSG for a
 * reply that is truncated, has bytes after its counters, a role, level or
 * name out of range, more than LM_STATS_MAX counters or the same counter
 * twice (s is then cleared); LM_ENOMEM. */
int lm_stats_decode_reply(const uint8_t *buf, size_t len, lm_stats_set *s);

#endif
