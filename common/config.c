/* Layout loading: the INI file that describes a whole installation.
 *
 * inih (ini_parse_stream with on_key as its handler) splits "key = value"
 * and "key: value" lines, trims blanks, drops " ;" comments after values
 * and reports its own syntax errors by line.  A reader of our own
 * (read_line) hands it the file one physical line at a time and keeps
 * the rest, because Debian's libinih 55 cannot:
 *  - its handler gets no line number (the library is built without
 *    INI_HANDLER_LINENO, and defining it here would break its ABI), and
 *    every error here is "PATH:LINE: reason", a duplicate key naming its
 *    first line too: the reader counts lines;
 *  - it never calls the handler at a section header, cuts section names
 *    at 50 characters and so neither sees empty, duplicate nor misspelt
 *    sections: the reader takes the headers (and the BOM before line 1's)
 *    itself and gives inih only key lines;
 *  - its options (ini_allow_multiline, ini_max_line,
 *    ini_stop_on_first_error) are globals of the shared library, and
 *    liblemuria loads layouts inside applications that may use inih
 *    themselves: instead of setting them, the reader strips leading blanks
 *    (no continuation lines), refuses a line longer than inih's buffer
 *    (which would split it silently) and a NUL byte (which would cut it),
 *    stops at the first error, and blanks comment lines itself, so that
 *    they may be of any length;
 *  - the layout hash covers every byte of the file.
 * Each value is parsed and range-checked when it is read; checks that
 * involve several keys run once the file is complete.  The first problem
 * wins. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "auth.h"
#include "lm_error.h"

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)

#define LM_CFG_SHARED_MAX (64ULL * GIB)
#define LM_CFG_PAGE_MAX (1ULL * MIB)
#define LM_CFG_PAGE_DEFAULT 4096u
#define LM_CFG_ADDR_END 0x800000000000ULL /* end of x86-64 user space */
#define LM_CFG_BASE_MIN 0x10000ULL        /* Linux mmap_min_addr */
#define LM_CFG_MTU_MIN 576u
#define LM_CFG_MTU_MAX 65507u
#define LM_CFG_RTO_MIN_US 100u
#define LM_CFG_RTO_MAX_US 60000000u
#define LM_CFG_RETRIES_MAX 1000u
#define LM_CFG_WINDOW_MAX 4096u
#define LM_CFG_ACK_DELAY_MAX_US 1000000u
#define LM_CFG_DELAY_MAX_US 10000000u
#define LM_CFG_CLIENTS_MAX 1024u
#define LM_CFG_NODE_IDS_MAX 65535u /* id 0 means "no node" */

#define RAW_MAX 80   /* how much of a value we keep for later messages */
#define KEYS_MAX 9   /* most keys in any section (checked below) */
#define WHY_MAX 512

/* ------------------------------------------------------------------ */
/* Value parsers shared by the file, LM_FAULTS and the public helpers. */

/* Decimal digits only: no sign, no blanks (strtoull accepts both). */
static int parse_decimal(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return LM_EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return LM_EINVAL;
		v = v * 10 + d;
	}
	*end = p;
	*out = v;
	return 0;
}

/* A whole unsigned integer: decimal, or hexadecimal with 0x. */
static int parse_uint(const char *s, uint64_t *out)
{
	const char *end;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		uint64_t v = 0;
		const char *p = s + 2;

		if (*p == '\0')
			return LM_EINVAL;
		for (; *p; p++) {
			unsigned d;

			if (*p >= '0' && *p <= '9')
				d = (unsigned)(*p - '0');
			else if (*p >= 'a' && *p <= 'f')
				d = (unsigned)(*p - 'a' + 10);
			else if (*p >= 'A' && *p <= 'F')
				d = (unsigned)(*p - 'A' + 10);
			else
				return LM_EINVAL;
			if (v >> 60)
				return LM_EINVAL;
			v = v << 4 | d;
		}
		*out = v;
		return 0;
	}
	if (parse_decimal(s, &end, out) < 0 || *end != '\0')
		return LM_EINVAL;
	return 0;
}

int lm_parse_size(const char *text, uint64_t *out)
{
	const char *end;
	uint64_t v, mult = 1;

	if (!text || parse_decimal(text, &end, &v) < 0)
		return LM_EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'K': case 'k':
		mult = KIB;
		break;
	case 'M': case 'm':
		mult = MIB;
		break;
	case 'G': case 'g':
		mult = GIB;
		break;
	default:
		return LM_EINVAL;
	}
	if (*end != '\0' && end[1] != '\0')
		return LM_EINVAL;
	if (v > UINT64_MAX / mult)
		return LM_EINVAL;
	*out = v * mult;
	return 0;
}

int lm_parse_duration(const char *text, uint64_t *out_us)
{
	const char *end;
	uint64_t v, mult;

	if (!text || parse_decimal(text, &end, &v) < 0)
		return LM_EINVAL;
	if (strcmp(end, "") == 0 || strcmp(end, "ms") == 0)
		mult = 1000;
	else if (strcmp(end, "us") == 0)
		mult = 1;
	else if (strcmp(end, "s") == 0)
		mult = 1000000;
	else
		return LM_EINVAL;
	if (v > UINT64_MAX / mult)
		return LM_EINVAL;
	*out_us = v * mult;
	return 0;
}

int lm_parse_addr(const char *text, struct sockaddr_in *out)
{
	char host[INET_ADDRSTRLEN];
	const char *colon, *end;
	struct in_addr ip;
	uint64_t port;

	if (!text || !(colon = strrchr(text, ':')))
		return LM_EINVAL;
	if ((size_t)(colon - text) >= sizeof(host))
		return LM_EINVAL;
	memcpy(host, text, (size_t)(colon - text));
	host[colon - text] = '\0';
	/* inet_pton takes exactly four dotted decimal parts, never a name. */
	if (inet_pton(AF_INET, host, &ip) != 1)
		return LM_EINVAL;
	if (parse_decimal(colon + 1, &end, &port) < 0 || *end != '\0' ||
	    port < 1 || port > 65535)
		return LM_EINVAL;
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_addr = ip;
	out->sin_port = htons((uint16_t)port);
	return 0;
}

static int parse_probability(const char *s, double *out)
{
	char *end;
	double v;

	/* strtod also takes "inf", "nan" and hex floats; only plain decimals
	 * are meant here. */
	if (*s == '\0' || strspn(s, "0123456789.") != strlen(s))
		return LM_EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end != '\0' || !(v >= 0.0 && v <= 1.0))
		return LM_EINVAL;
	*out = v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "on", "true", "yes", "1" };
	static const char *const no[] = { "off", "false", "no", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return LM_EINVAL;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n < LM_NAME_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789_.-") == n;
}

/* The largest unit that divides the value exactly, for messages. */
static const char *fmt_duration(uint64_t us, char *buf, size_t len)
{
	if (us && us % 1000000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(us / 1000000));
	else if (us && us % 1000 == 0)
		snprintf(buf, len, "%llums", (unsigned long long)(us / 1000));
	else
		snprintf(buf, len, "%lluus", (unsigned long long)us);
	return buf;
}

/* ------------------------------------------------------------------ */
/* Fault settings: the [faults] section and LM_FAULTS share one setter. */

enum fault_key { FK_DROP, FK_DUP, FK_REORDER, FK_DELAY, FK_DELAY_MAX,
		 FK_START_MAX, FK_SEED, FK_COUNT };

static const char *const fault_keys[] = {
	"drop", "dup", "reorder", "delay", "delay_max", "start_max", "seed",
	NULL
};

/* Writes a location-free reason into why on failure. */
static int fault_set(struct lm_fault_cfg *f, int key, const char *value,
		     char *why, size_t whylen)
{
	uint64_t v;
	double *prob = NULL;
	char a[32];

	switch (key) {
	case FK_DROP:
		prob = &f->drop;
		break;
	case FK_DUP:
		prob = &f->dup;
		break;
	case FK_REORDER:
		prob = &f->reorder;
		break;
	case FK_DELAY:
		prob = &f->delay;
		break;
	case FK_DELAY_MAX:
	case FK_START_MAX:
		if (lm_parse_duration(value, &v) < 0) {
			snprintf(why, whylen,
				 "%s \"%s\" is not a duration "
				 "(e.g. 500us, 20ms, 2s)", fault_keys[key],
				 value);
			return LM_EINVAL;
		}
		if (v > LM_CFG_DELAY_MAX_US) {
			snprintf(why, whylen,
				 "%s \"%s\" is out of range (0..%s)",
				 fault_keys[key], value,
				 fmt_duration(LM_CFG_DELAY_MAX_US, a,
					      sizeof(a)));
			return LM_EINVAL;
		}
		if (key == FK_DELAY_MAX)
			f->delay_max_us = (uint32_t)v;
		else
			f->start_max_us = (uint32_t)v;
		return 0;
	case FK_SEED:
		if (parse_uint(value, &f->seed) < 0) {
			snprintf(why, whylen,
				 "seed \"%s\" is not an unsigned integer",
				 value);
			return LM_EINVAL;
		}
		return 0;
	}
	if (parse_probability(value, prob) < 0) {
		snprintf(why, whylen,
			 "%s \"%s\" is not a probability between 0 and 1",
			 fault_keys[key], value);
		return LM_EINVAL;
	}
	return 0;
}

static int key_index(const char *const *keys, const char *name)
{
	for (int i = 0; keys[i]; i++)
		if (strcmp(keys[i], name) == 0)
			return i;
	return -1;
}

static void trim(char **s, char **e)
{
	while (*s < *e && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
		(*e)--;
}

int lm_parse_faults(const char *spec, struct lm_fault_cfg *out, char *err,
		    size_t errlen)
{
	struct lm_fault_cfg f = { 0 };
	char why[WHY_MAX] = "";
	unsigned seen = 0;
	char *copy, *item, *next;
	int rc = 0;

	if (!spec) {
		snprintf(err, err ? errlen : 0, "no fault specification");
		return LM_EINVAL;
	}
	copy = strdup(spec);
	if (!copy) {
		snprintf(err, err ? errlen : 0, "out of memory");
		return LM_ENOMEM;
	}
	for (item = copy; item && rc == 0; item = next) {
		char *eq, *end, *k, *v;
		int key;

		next = strchr(item, ',');
		if (next)
			*next++ = '\0';
		k = item;
		end = item + strlen(item);
		trim(&k, &end);
		if (k == end && !next && item == copy)
			break; /* an empty spec: everything off */
		eq = memchr(k, '=', (size_t)(end - k));
		if (!eq) {
			*end = '\0';
			snprintf(why, sizeof(why),
				 "fault setting \"%s\" is not name=value", k);
			rc = LM_EINVAL;
			break;
		}
		v = eq + 1;
		*end = '\0';
		trim(&k, &eq);
		*eq = '\0';
		end = v + strlen(v);
		trim(&v, &end);
		*end = '\0';
		key = key_index(fault_keys, k);
		if (key < 0) {
			snprintf(why, sizeof(why),
				 "unknown fault setting \"%s\" (expected drop, "
				 "dup, reorder, delay, delay_max, start_max or "
				 "seed)", k);
			rc = LM_EINVAL;
		} else if (seen & 1u << key) {
			snprintf(why, sizeof(why),
				 "fault setting \"%s\" given twice", k);
			rc = LM_EINVAL;
		} else {
			seen |= 1u << key;
			rc = fault_set(&f, key, v, why, sizeof(why));
		}
	}
	free(copy);
	if (rc < 0) {
		if (err && errlen)
			snprintf(err, errlen, "%s", why);
		return LM_EINVAL;
	}
	*out = f;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The file parser. */

enum sect_kind {
	SECT_LEMURIA,   /* [lemuria] */
	SECT_TRANSPORT, /* [transport LEVEL] */
	SECT_FAULTS,    /* [faults] */
	SECT_REFLECTOR, /* [reflector NAME] */
	SECT_CLUSTER,   /* [cluster NAME] */
	SECT_KIND_COUNT
};

enum lemuria_key { LK_SHARED_SIZE, LK_PAGE_SIZE, LK_BASE, LK_SECRET_FILE,
		   LK_AUTH, LK_RELAY, LK_UPDATES, LK_PREFETCH, LK_COPY };
enum transport_key { TK_MTU, TK_RTO_INITIAL, TK_RTO_MIN, TK_RTO_MAX,
		     TK_RETRIES, TK_WINDOW, TK_ACK_DELAY };
enum reflector_key { RK_LISTEN, RK_CACHE };
enum cluster_key { CK_REFLECTOR, CK_LISTEN, CK_CLIENTS, CK_CACHE, CK_COPY };

static const char *const lemuria_keys[] = {
	"shared_size", "page_size", "base", "secret_file", "auth", "relay",
	"updates", "prefetch", "copy", NULL
};
static const char *const transport_keys[] = {
	"mtu", "rto_initial", "rto_min", "rto_max", "retries", "window",
	"ack_delay", NULL
};
static const char *const reflector_keys[] = { "listen", "cache", NULL };
static const char *const cluster_keys[] = {
	"reflector", "listen", "clients", "cache", "copy", NULL
};

/* struct section keeps a line and a value per key: a key beyond KEYS_MAX
 * would write past them. */
#define NKEYS(keys) (sizeof(keys) / sizeof((keys)[0]) - 1)
_Static_assert(NKEYS(lemuria_keys) <= KEYS_MAX, "raise KEYS_MAX");
_Static_assert(NKEYS(transport_keys) <= KEYS_MAX, "raise KEYS_MAX");
_Static_assert(NKEYS(fault_keys) <= KEYS_MAX, "raise KEYS_MAX");
_Static_assert(NKEYS(reflector_keys) <= KEYS_MAX, "raise KEYS_MAX");
_Static_assert(NKEYS(cluster_keys) <= KEYS_MAX, "raise KEYS_MAX");

static const struct {
	const char *word;
	const char *const *keys;
	unsigned required;  /* bit per key */
	bool named;         /* [kind NAME] rather than [kind] */
} sect_kinds[SECT_KIND_COUNT] = {
	[SECT_LEMURIA] = { "lemuria", lemuria_keys,
			   1u << LK_SHARED_SIZE | 1u << LK_BASE, false },
	[SECT_TRANSPORT] = { "transport", transport_keys, 0, true },
	[SECT_FAULTS] = { "faults", fault_keys, 0, false },
	[SECT_REFLECTOR] = { "reflector", reflector_keys, 1u << RK_LISTEN,
			     true },
	[SECT_CLUSTER] = { "cluster", cluster_keys,
			   1u << CK_REFLECTOR | 1u << CK_LISTEN |
				   1u << CK_CLIENTS, true },
};

static const char *const level_names[LM_LEVEL_COUNT] = {
	[LM_LEVEL_CLIENT] = "client",
	[LM_LEVEL_CLUSTER] = "cluster",
	[LM_LEVEL_ROOT] = "root",
};

/* What we remember of every section for checks made after the whole file
 * has been read. */
struct section {
	enum sect_kind kind;
	char name[LM_NAME_MAX]; /* NAME, or the transport level */
	size_t index;           /* level, reflector or cluster index */
	int line;
	unsigned seen;          /* bit per key */
	int key_line[KEYS_MAX];
	char raw[KEYS_MAX][RAW_MAX]; /* value text, maybe cut short */
};

struct parser {
	const char *path;
	FILE *file;
	char *buf;          /* getline buffer */
	size_t bufcap;
	int line;           /* line last handed to inih */
	struct lm_layout *layout;
	struct section *sects;
	size_t nsects, capsects;
	struct section *cur; /* NULL before the first header */
	size_t capreflectors, capclusters;
	char *err;
	size_t errlen;
	int rc;             /* 0, or the first error */
	int err_line;
};

static void fail(struct parser *p, int line, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void fail(struct parser *p, int line, int rc, const char *fmt, ...)
{
	char why[WHY_MAX];
	va_list ap;

	if (p->rc)
		return;
	p->rc = rc;
	p->err_line = line;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!p->err || !p->errlen)
		return;
	if (line > 0)
		snprintf(p->err, p->errlen, "%s:%d: %s", p->path, line, why);
	else
		snprintf(p->err, p->errlen, "%s: %s", p->path, why);
}

static const char *sect_label(const struct section *s, char *buf, size_t len)
{
	if (sect_kinds[s->kind].named)
		snprintf(buf, len, "[%s %s]", sect_kinds[s->kind].word,
			 s->name);
	else
		snprintf(buf, len, "[%s]", sect_kinds[s->kind].word);
	return buf;
}

static void *grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *n;

	if (need <= *cap)
		return arr;
	ncap = *cap ? *cap * 2 : 4;
	n = realloc(arr, ncap * elem);
	if (!n)
		return NULL;
	memset((char *)n + *cap * elem, 0, (ncap - *cap) * elem);
	*cap = ncap;
	return n;
}

static struct section *find_section(struct parser *p, enum sect_kind kind,
				    const char *name)
{
	for (size_t i = 0; i < p->nsects; i++)
		if (p->sects[i].kind == kind &&
		    strcmp(p->sects[i].name, name) == 0)
			return &p->sects[i];
	return NULL;
}

/* Adds the reflector or cluster record a new section stands for. */
static int add_member(struct parser *p, struct section *s)
{
	struct lm_layout *l = p->layout;

	if (s->kind == SECT_REFLECTOR) {
		struct lm_reflector_cfg *r = grow(l->reflectors,
						  &p->capreflectors,
						  l->nreflectors + 1,
						  sizeof(*r));
		if (!r)
			return LM_ENOMEM;
		l->reflectors = r;
		s->index = l->nreflectors++;
		r += s->index;
		strcpy(r->name, s->name);
		r->line = s->line;
	} else if (s->kind == SECT_CLUSTER) {
		struct lm_cluster_cfg *c = grow(l->clusters, &p->capclusters,
						l->nclusters + 1, sizeof(*c));
		if (!c)
			return LM_ENOMEM;
		l->clusters = c;
		s->index = l->nclusters++;
		c += s->index;
		strcpy(c->name, s->name);
		c->reflector_index = -1;
		c->line = s->line;
	}
	return 0;
}

/* line points at '[' of a header, already known to be one. */
static void start_section(struct parser *p, char *line)
{
	char *close = strchr(line, ']'), *word, *name, *end, *rest;
	struct section *s, *dup;
	char label[LM_NAME_MAX + 32];
	int kind;

	if (!close) {
		fail(p, p->line, LM_ECONFIG, "section header without ']'");
		return;
	}
	rest = close + 1;
	rest += strspn(rest, " \t\r\n");
	if (*rest && *rest != ';' && *rest != '#') {
		fail(p, p->line, LM_ECONFIG,
		     "unexpected text after section header");
		return;
	}
	word = line + 1;
	end = close;
	trim(&word, &end);
	*end = '\0';
	name = word + strcspn(word, " \t");
	if (*name) {
		*name++ = '\0';
		name += strspn(name, " \t");
	}
	for (kind = 0; kind < SECT_KIND_COUNT; kind++)
		if (strcmp(word, sect_kinds[kind].word) == 0)
			break;
	if (kind == SECT_KIND_COUNT) {
		fail(p, p->line, LM_ECONFIG,
		     "unknown section [%s%s%s] (expected lemuria, transport, "
		     "faults, reflector or cluster)", word, *name ? " " : "",
		     name);
		return;
	}
	if (!sect_kinds[kind].named && *name) {
		fail(p, p->line, LM_ECONFIG, "section [%s] takes no name",
		     word);
		return;
	}
	if (sect_kinds[kind].named && !*name) {
		fail(p, p->line, LM_ECONFIG, "section [%s] needs a %s", word,
		     kind == SECT_TRANSPORT ? "level (client, cluster or root)"
					    : "name");
		return;
	}
	if (kind == SECT_TRANSPORT) {
		int lv;

		for (lv = 0; lv < LM_LEVEL_COUNT; lv++)
			if (strcmp(name, level_names[lv]) == 0)
				break;
		if (lv == LM_LEVEL_COUNT) {
			fail(p, p->line, LM_ECONFIG,
			     "unknown transport level \"%s\" (expected "
			     "client, cluster or root)", name);
			return;
		}
	} else if (sect_kinds[kind].named && !valid_name(name)) {
		fail(p, p->line, LM_ECONFIG,
		     "%s name \"%s\" is invalid (1-%d characters of "
		     "A-Z a-z 0-9 _ . -)", word, name, LM_NAME_MAX - 1);
		return;
	}
	dup = find_section(p, (enum sect_kind)kind, name);
	if (dup) {
		fail(p, p->line, LM_ECONFIG,
		     "duplicate section %s (first on line %d)",
		     sect_label(dup, label, sizeof(label)), dup->line);
		return;
	}
	s = grow(p->sects, &p->capsects, p->nsects + 1, sizeof(*s));
	if (!s) {
		fail(p, p->line, LM_ENOMEM, "out of memory");
		return;
	}
	p->sects = s;
	s += p->nsects++;
	s->kind = (enum sect_kind)kind;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->line = p->line;
	if (kind == SECT_TRANSPORT)
		s->index = (size_t)key_index(level_names, name);
	if (add_member(p, s) < 0) {
		fail(p, p->line, LM_ENOMEM, "out of memory");
		return;
	}
	p->cur = s;
}

/* Feeds inih one physical line per call, so inih's line count and ours
 * agree; headers, comments and blank lines are handed over as empty. */
static char *read_line(char *str, int num, void *stream)
{
	struct parser *p = stream;
	ssize_t n;
	char *s;

	if (p->rc)
		return NULL; /* stop at the first error */
	n = getline(&p->buf, &p->bufcap, p->file);
	if (n < 0)
		return NULL;
	p->line++;
	for (ssize_t i = 0; i < n; i++) /* FNV-1a over the file's bytes */
		p->layout->hash = (p->layout->hash ^ (uint8_t)p->buf[i]) *
				  0x100000001b3ull;
	s = p->buf;
	if (p->line == 1 && (unsigned char)s[0] == 0xEF &&
	    (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
		s += 3;
	/* No continuation lines: leading blanks never make a line part of
	 * the previous value. */
	s += strspn(s, " \t");
	if (strlen(s) != (size_t)n - (size_t)(s - p->buf)) {
		fail(p, p->line, LM_ECONFIG, "NUL byte in line");
		return NULL;
	}
	if (*s == '[') {
		start_section(p, s);
		s = "";
	} else if (*s == ';' || *s == '#') {
		s = "";
	}
	if (p->rc)
		return NULL;
	if (strlen(s) + 1 > (size_t)num) {
		fail(p, p->line, LM_ECONFIG,
		     "line is longer than %d characters", num - 2);
		return NULL;
	}
	strcpy(str, s);
	return str;
}

/* `copy`, in [lemuria] and in [cluster NAME]. */
static int get_copy(struct parser *p, const char *v, enum lm_copy_mode *out)
{
	if (strcasecmp(v, "cluster") == 0) {
		*out = LM_COPY_CLUSTER;
	} else if (strcasecmp(v, "client") == 0) {
		*out = LM_COPY_CLIENT;
	} else {
		fail(p, p->line, LM_ECONFIG,
		     "copy \"%s\" is not cluster or client", v);
		return -1;
	}
	return 0;
}

static int set_lemuria(struct parser *p, int key, const char *v)
{
	struct lm_layout *l = p->layout;
	uint64_t n;
	long os_page;

	switch (key) {
	case LK_SHARED_SIZE:
		if (lm_parse_size(v, &n) < 0)
			goto not_size;
		if (n == 0 || n > LM_CFG_SHARED_MAX) {
			fail(p, p->line, LM_ECONFIG,
			     "shared_size \"%s\" is out of range (1..64G)", v);
			return -1;
		}
		l->shared_size = n;
		return 0;
	case LK_PAGE_SIZE:
		if (lm_parse_size(v, &n) < 0)
			goto not_size;
		os_page = sysconf(_SC_PAGESIZE);
		if (n == 0 || n % (uint64_t)os_page) {
			fail(p, p->line, LM_ECONFIG,
			     "page_size \"%s\" is not a multiple of the "
			     "system page size %ld", v, os_page);
			return -1;
		}
		if (n & (n - 1)) {
			fail(p, p->line, LM_ECONFIG,
			     "page_size \"%s\" is not a power of two", v);
			return -1;
		}
		if (n > LM_CFG_PAGE_MAX) {
			fail(p, p->line, LM_ECONFIG,
			     "page_size \"%s\" is larger than 1M", v);
			return -1;
		}
		l->page_size = (uint32_t)n;
		return 0;
	case LK_BASE:
		if (parse_uint(v, &n) < 0) {
			fail(p, p->line, LM_ECONFIG,
			     "base \"%s\" is not an address (hex with 0x, "
			     "or decimal)", v);
			return -1;
		}
		if (n < LM_CFG_BASE_MIN || n >= LM_CFG_ADDR_END) {
			fail(p, p->line, LM_ECONFIG,
			     "base \"%s\" is outside user space "
			     "(0x%llx..0x%llx)", v, LM_CFG_BASE_MIN,
			     LM_CFG_ADDR_END);
			return -1;
		}
		l->base = n;
		return 0;
	case LK_SECRET_FILE:
		if (*v == '\0') {
			fail(p, p->line, LM_ECONFIG, "secret_file is empty");
			return -1;
		}
		/* Kept as written; resolved once the whole file is read. */
		if (strlen(v) >= LM_PATH_MAX) {
			fail(p, p->line, LM_ECONFIG,
			     "secret_file is longer than %d characters",
			     LM_PATH_MAX - 1);
			return -1;
		}
		strcpy(l->secret_file, v);
		return 0;
	case LK_AUTH:
		if (parse_bool(v, &l->auth) < 0) {
			fail(p, p->line, LM_ECONFIG,
			     "auth \"%s\" is not on or off", v);
			return -1;
		}
		return 0;
	case LK_UPDATES:
		if (parse_bool(v, &l->updates) < 0) {
			fail(p, p->line, LM_ECONFIG,
			     "updates \"%s\" is not on or off", v);
			return -1;
		}
		return 0;
	case LK_PREFETCH:
		if (parse_uint(v, &n) < 0 || n > LM_CFG_PREFETCH_MAX) {
			fail(p, p->line, LM_ECONFIG,
			     "prefetch \"%s\" is not a page count from 0 to "
			     "%u", v, LM_CFG_PREFETCH_MAX);
			return -1;
		}
		l->prefetch = (uint32_t)n;
		return 0;
	case LK_RELAY:
		if (strcasecmp(v, "lazy") == 0) {
			l->relay = LM_RELAY_LAZY;
		} else if (strcasecmp(v, "eager") == 0) {
			l->relay = LM_RELAY_EAGER;
		} else if (strcasecmp(v, "adaptive") == 0) {
			l->relay = LM_RELAY_ADAPTIVE;
		} else {
			fail(p, p->line, LM_ECONFIG,
			     "relay \"%s\" is not lazy, eager or adaptive",
			     v);
			return -1;
		}
		return 0;
	case LK_COPY:
		return get_copy(p, v, &l->copy);
	}
	return 0;
not_size:
	fail(p, p->line, LM_ECONFIG,
	     "%s \"%s\" is not a size (bytes, or with a K, M or G suffix)",
	     lemuria_keys[key], v);
	return -1;
}

/* An integer key with inclusive bounds; quotes the value on failure. */
static int get_uint(struct parser *p, const char *key, const char *v,
		    uint64_t lo, uint64_t hi, uint64_t *out)
{
	if (parse_uint(v, out) < 0) {
		fail(p, p->line, LM_ECONFIG,
		     "%s \"%s\" is not an unsigned integer", key, v);
		return -1;
	}
	if (*out < lo || *out > hi) {
		fail(p, p->line, LM_ECONFIG,
		     "%s \"%s\" is out of range (%llu..%llu)", key, v,
		     (unsigned long long)lo, (unsigned long long)hi);
		return -1;
	}
	return 0;
}

static int get_duration(struct parser *p, const char *key, const char *v,
			uint64_t lo, uint64_t hi, uint32_t *out)
{
	char a[32], b[32];
	uint64_t us;

	if (lm_parse_duration(v, &us) < 0) {
		fail(p, p->line, LM_ECONFIG,
		     "%s \"%s\" is not a duration (e.g. 500us, 20ms, 2s)",
		     key, v);
		return -1;
	}
	if (us < lo || us > hi) {
		fail(p, p->line, LM_ECONFIG,
		     "%s \"%s\" is out of range (%s..%s)", key, v,
		     fmt_duration(lo, a, sizeof(a)),
		     fmt_duration(hi, b, sizeof(b)));
		return -1;
	}
	*out = (uint32_t)us;
	return 0;
}

static int set_transport(struct parser *p, struct lm_transport_cfg *t,
			 int key, const char *v)
{
	const char *k = transport_keys[key];
	uint64_t n;

	switch (key) {
	case TK_MTU:
		if (get_uint(p, k, v, LM_CFG_MTU_MIN, LM_CFG_MTU_MAX, &n) < 0)
			return -1;
		t->mtu = (uint32_t)n;
		return 0;
	case TK_RTO_INITIAL:
		return get_duration(p, k, v, LM_CFG_RTO_MIN_US,
				    LM_CFG_RTO_MAX_US, &t->rto_initial_us);
	case TK_RTO_MIN:
		return get_duration(p, k, v, LM_CFG_RTO_MIN_US,
				    LM_CFG_RTO_MAX_US, &t->rto_min_us);
	case TK_RTO_MAX:
		return get_duration(p, k, v, LM_CFG_RTO_MIN_US,
				    LM_CFG_RTO_MAX_US, &t->rto_max_us);
	case TK_RETRIES:
		if (get_uint(p, k, v, 1, LM_CFG_RETRIES_MAX, &n) < 0)
			return -1;
		t->max_retries = (uint32_t)n;
		return 0;
	case TK_WINDOW:
		if (get_uint(p, k, v, 1, LM_CFG_WINDOW_MAX, &n) < 0)
			return -1;
		t->window = (uint32_t)n;
		return 0;
	case TK_ACK_DELAY:
		return get_duration(p, k, v, 0, LM_CFG_ACK_DELAY_MAX_US,
				    &t->ack_delay_us);
	}
	return 0;
}

static int get_listen(struct parser *p, const char *v,
		      struct sockaddr_in *out)
{
	if (lm_parse_addr(v, out) < 0) {
		fail(p, p->line, LM_ECONFIG,
		     "listen \"%s\" is not a numeric IPv4:port address "
		     "(port 1..65535)", v);
		return -1;
	}
	/* the same address is where the others send: a daemon listening on
	 * every interface would be sent nothing it can answer from */
	if (out->sin_addr.s_addr == htonl(INADDR_ANY)) {
		fail(p, p->line, LM_ECONFIG,
		     "listen \"%s\": 0.0.0.0 is no address to send to; "
		     "the other daemons and clients send to this address, so "
		     "give the daemon's own address on its host (127.0.0.1 "
		     "for one host)", v);
		return -1;
	}
	return 0;
}

static int set_cluster(struct parser *p, struct lm_cluster_cfg *c, int key,
		       const char *v)
{
	uint64_t n;

	switch (key) {
	case CK_REFLECTOR:
		if (!valid_name(v)) {
			fail(p, p->line, LM_ECONFIG,
			     "reflector name \"%s\" is invalid (1-%d "
			     "characters of A-Z a-z 0-9 _ . -)", v,
			     LM_NAME_MAX - 1);
			return -1;
		}
		strcpy(c->reflector, v);
		return 0;
	case CK_LISTEN:
		return get_listen(p, v, &c->addr);
	case CK_CLIENTS:
		if (get_uint(p, "clients", v, 1, LM_CFG_CLIENTS_MAX, &n) < 0)
			return -1;
		c->clients = (uint32_t)n;
		return 0;
	case CK_CACHE:
		if (lm_parse_size(v, &n) < 0) {
			fail(p, p->line, LM_ECONFIG,
			     "cache \"%s\" is not a size (bytes, or with a "
			     "K, M or G suffix)", v);
			return -1;
		}
		c->cache_size = n;
		return 0;
	case CK_COPY:
		return get_copy(p, v, &c->copy);
	}
	return 0;
}

static int on_key(void *user, const char *section, const char *name,
		  const char *value)
{
	struct parser *p = user;
	struct section *s = p->cur;
	char label[LM_NAME_MAX + 32], why[WHY_MAX];
	int key;

	(void)section; /* ours is in p->cur; inih never sees headers */
	if (p->rc)
		return 1;
	if (!s) {
		fail(p, p->line, LM_ECONFIG,
		     "key \"%s\" outside any section", name);
		return 1;
	}
	key = key_index(sect_kinds[s->kind].keys, name);
	if (key < 0) {
		fail(p, p->line, LM_ECONFIG, "unknown key \"%s\" in %s", name,
		     sect_label(s, label, sizeof(label)));
		return 1;
	}
	if (s->seen & 1u << key) {
		fail(p, p->line, LM_ECONFIG,
		     "duplicate key \"%s\" in %s (first on line %d)", name,
		     sect_label(s, label, sizeof(label)), s->key_line[key]);
		return 1;
	}
	s->seen |= 1u << key;
	s->key_line[key] = p->line;
	snprintf(s->raw[key], RAW_MAX, "%s", value);
	switch (s->kind) {
	case SECT_LEMURIA:
		set_lemuria(p, key, value);
		break;
	case SECT_TRANSPORT:
		set_transport(p, &p->layout->transport[s->index], key, value);
		break;
	case SECT_FAULTS:
		if (fault_set(&p->layout->faults, key, value, why,
			      sizeof(why)) < 0)
			fail(p, p->line, LM_ECONFIG, "%s", why);
		break;
	case SECT_REFLECTOR:
		if (key == RK_LISTEN)
			get_listen(p, value,
				   &p->layout->reflectors[s->index].addr);
		else if (lm_parse_size(value,
				       &p->layout->reflectors[s->index]
						.cache_size) < 0)
			fail(p, p->line, LM_ECONFIG,
			     "cache \"%s\" is not a size (bytes, or with a "
			     "K, M or G suffix)", value);
		break;
	case SECT_CLUSTER:
		set_cluster(p, &p->layout->clusters[s->index], key, value);
		break;
	case SECT_KIND_COUNT:
		break;
	}
	return 1;
}

/* ------------------------------------------------------------------ */
/* Checks that need the whole file. */

static int check_required(struct parser *p)
{
	char label[LM_NAME_MAX + 32];
	struct section *lem = NULL;

	for (size_t i = 0; i < p->nsects; i++) {
		struct section *s = &p->sects[i];
		unsigned missing = sect_kinds[s->kind].required & ~s->seen;

		if (s->kind == SECT_LEMURIA)
			lem = s;
		if (missing) {
			int key = __builtin_ctz(missing);

			fail(p, s->line, LM_ECONFIG,
			     "%s is missing required key \"%s\"",
			     sect_label(s, label, sizeof(label)),
			     sect_kinds[s->kind].keys[key]);
			return -1;
		}
	}
	if (!lem) {
		fail(p, 0, LM_ECONFIG, "no [lemuria] section");
		return -1;
	}
	if (p->layout->auth && !(lem->seen & 1u << LK_SECRET_FILE)) {
		fail(p, lem->line, LM_ECONFIG,
		     "[lemuria] is missing required key \"secret_file\" "
		     "(needed when auth is on)");
		return -1;
	}
	if (!p->layout->nreflectors) {
		fail(p, 0, LM_ECONFIG, "no [reflector NAME] section");
		return -1;
	}
	if (!p->layout->nclusters) {
		fail(p, 0, LM_ECONFIG, "no [cluster NAME] section");
		return -1;
	}
	return 0;
}

static int check_region(struct parser *p, const struct section *lem)
{
	struct lm_layout *l = p->layout;

	if (l->shared_size % l->page_size) {
		fail(p, lem->key_line[LK_SHARED_SIZE], LM_ECONFIG,
		     "shared_size \"%s\" is not a multiple of page_size %u",
		     lem->raw[LK_SHARED_SIZE], l->page_size);
		return -1;
	}
	if (l->base % l->page_size) {
		fail(p, lem->key_line[LK_BASE], LM_ECONFIG,
		     "base \"%s\" is not a multiple of page_size %u",
		     lem->raw[LK_BASE], l->page_size);
		return -1;
	}
	if (l->base + l->shared_size >= LM_CFG_ADDR_END) {
		fail(p, lem->key_line[LK_BASE], LM_ECONFIG,
		     "base \"%s\" plus shared_size \"%s\" reaches past the "
		     "end of user space 0x%llx", lem->raw[LK_BASE],
		     lem->raw[LK_SHARED_SIZE], LM_CFG_ADDR_END);
		return -1;
	}
	return 0;
}

/* Resolves secret_file against the layout's directory, in place. */
static int resolve_secret(struct parser *p, const struct section *lem)
{
	char *v = p->layout->secret_file, resolved[LM_PATH_MAX];
	const char *slash = strrchr(p->path, '/');
	int dirlen = 0, n;

	if (v[0] != '/' && slash)
		dirlen = (int)(slash - p->path) + 1;
	n = snprintf(resolved, sizeof(resolved), "%.*s%s", dirlen, p->path,
		     v);
	if (n < 0 || n >= LM_PATH_MAX) {
		fail(p, lem->key_line[LK_SECRET_FILE], LM_ECONFIG,
		     "secret_file \"%s\" makes a path that is too long",
		     lem->raw[LK_SECRET_FILE]);
		return -1;
	}
	memcpy(v, resolved, (size_t)n + 1);
	return 0;
}

static int link_clusters(struct parser *p)
{
	struct lm_layout *l = p->layout;
	uint64_t page = l->page_size;

	for (size_t i = 0; i < p->nsects; i++) {
		struct section *s = &p->sects[i];
		struct lm_reflector_cfg *rc;

		if (s->kind != SECT_REFLECTOR)
			continue;
		rc = &l->reflectors[s->index];
		if (!(s->seen & 1u << RK_CACHE))
			rc->cache_size = LM_REFLECTOR_CACHE_DEFAULT;
		if (rc->cache_size < page) {
			fail(p, s->key_line[RK_CACHE], LM_ECONFIG,
			     "cache \"%s\" is smaller than one page (%llu)",
			     s->raw[RK_CACHE], (unsigned long long)page);
			return -1;
		}
	}
	for (size_t i = 0; i < p->nsects; i++) {
		struct section *s = &p->sects[i];
		struct lm_cluster_cfg *c;
		const struct lm_reflector_cfg *r;

		if (s->kind != SECT_CLUSTER)
			continue;
		c = &l->clusters[s->index];
		r = lm_layout_reflector(l, c->reflector);
		if (!r) {
			fail(p, s->key_line[CK_REFLECTOR], LM_ECONFIG,
			     "cluster \"%s\" names reflector \"%s\", which is "
			     "not defined", c->name, c->reflector);
			return -1;
		}
		c->reflector_index = (int)(r - l->reflectors);
		if (!(s->seen & 1u << CK_CACHE))
			c->cache_size = l->shared_size;
		/* [lemuria] may come after the cluster: resolved here. */
		if (!(s->seen & 1u << CK_COPY))
			c->copy = l->copy;
		if (c->cache_size < page) {
			fail(p, s->key_line[CK_CACHE], LM_ECONFIG,
			     "cache \"%s\" is smaller than one page (%llu)",
			     s->raw[CK_CACHE], (unsigned long long)page);
			return -1;
		}
	}
	return 0;
}

static bool addr_overlap(const struct sockaddr_in *a,
			 const struct sockaddr_in *b)
{
	return a->sin_port == b->sin_port &&
	       a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static const struct sockaddr_in *section_addr(struct parser *p,
					      const struct section *s,
					      int *line)
{
	if (s->kind == SECT_REFLECTOR) {
		*line = s->key_line[RK_LISTEN];
		return &p->layout->reflectors[s->index].addr;
	}
	if (s->kind == SECT_CLUSTER) {
		*line = s->key_line[CK_LISTEN];
		return &p->layout->clusters[s->index].addr;
	}
	return NULL;
}

/* Quadratic, but layouts have at most a few hundred daemons. */
static int check_listen(struct parser *p)
{
	char label[LM_NAME_MAX + 32];

	for (size_t i = 0; i < p->nsects; i++) {
		const struct sockaddr_in *a, *b;
		int la, lb;

		a = section_addr(p, &p->sects[i], &la);
		if (!a)
			continue;
		for (size_t j = 0; j < i; j++) {
			b = section_addr(p, &p->sects[j], &lb);
			if (!b || !addr_overlap(a, b))
				continue;
			fail(p, la, LM_ECONFIG,
			     "listen \"%s\" overlaps the listen address of "
			     "%s on line %d", p->sects[i].raw[
				     p->sects[i].kind == SECT_CLUSTER ?
					     CK_LISTEN : RK_LISTEN],
			     sect_label(&p->sects[j], label, sizeof(label)),
			     lb);
			return -1;
		}
	}
	return 0;
}

static int check_transport(struct parser *p)
{
	char a[32], b[32], c[32];

	for (size_t i = 0; i < p->nsects; i++) {
		const struct section *s = &p->sects[i];
		const struct lm_transport_cfg *t;
		int line = s->line;

		if (s->kind != SECT_TRANSPORT)
			continue;
		t = &p->layout->transport[s->index];
		if (t->rto_min_us <= t->rto_initial_us &&
		    t->rto_initial_us <= t->rto_max_us)
			continue;
		for (int k = TK_RTO_INITIAL; k <= TK_RTO_MAX; k++)
			if (s->key_line[k] > line)
				line = s->key_line[k];
		fail(p, line, LM_ECONFIG,
		     "[transport %s] needs rto_min <= rto_initial <= rto_max "
		     "(have %s, %s, %s)", s->name,
		     fmt_duration(t->rto_min_us, a, sizeof(a)),
		     fmt_duration(t->rto_initial_us, b, sizeof(b)),
		     fmt_duration(t->rto_max_us, c, sizeof(c)));
		return -1;
	}
	return 0;
}

/* Node ids: reflectors 1..R, clusters R+1..R+C, then the clients by rank. */
static int assign_ids(struct parser *p)
{
	struct lm_layout *l = p->layout;
	uint64_t next = 1;
	uint32_t rank = 0;

	for (size_t i = 0; i < l->nreflectors; i++, next++) {
		if (next > LM_CFG_NODE_IDS_MAX)
			goto too_many_sections;
		l->reflectors[i].id = (uint16_t)next;
	}
	for (size_t i = 0; i < l->nclusters; i++, next++) {
		if (next > LM_CFG_NODE_IDS_MAX)
			goto too_many_sections;
		l->clusters[i].id = (uint16_t)next;
	}
	for (size_t i = 0; i < p->nsects; i++) {
		struct section *s = &p->sects[i];
		struct lm_cluster_cfg *c;

		if (s->kind != SECT_CLUSTER)
			continue;
		c = &l->clusters[s->index];
		c->first_rank = rank;
		rank += c->clients;
		if (next - 1 + rank > LM_CFG_NODE_IDS_MAX) {
			fail(p, s->key_line[CK_CLIENTS], LM_ECONFIG,
			     "clients \"%s\" of cluster \"%s\" take the "
			     "layout past %u node ids", s->raw[CK_CLIENTS],
			     c->name, LM_CFG_NODE_IDS_MAX);
			return -1;
		}
	}
	l->nprocs = rank;
	return 0;
too_many_sections:
	fail(p, 0, LM_ECONFIG,
	     "more than %u reflectors and clusters", LM_CFG_NODE_IDS_MAX);
	return -1;
}

static int apply_env_faults(struct parser *p)
{
	const char *spec = getenv("LM_FAULTS");
	char why[WHY_MAX];
	int rc;

	if (!spec || !*spec)
		return 0;
	rc = lm_parse_faults(spec, &p->layout->faults, why, sizeof(why));
	if (rc == LM_ENOMEM) {
		fail(p, 0, LM_ENOMEM, "out of memory");
		return -1;
	}
	if (rc < 0) {
		/* Not the file's fault: name the variable, not the file. */
		p->rc = LM_ECONFIG;
		if (p->err && p->errlen)
			snprintf(p->err, p->errlen, "LM_FAULTS=\"%s\": %s",
				 spec, why);
		return -1;
	}
	return 0;
}

/* The one place the key is derived, so tests can stub it. */
static int derive_key(struct parser *p, const struct section *lem)
{
	char why[WHY_MAX] = "";

	if (lm_auth_key_from_file(p->layout->secret_file, p->layout->key,
				  why, sizeof(why)) < 0) {
		fail(p, lem->key_line[LK_SECRET_FILE], LM_ECONFIG,
		     "cannot use secret_file \"%s\": %s",
		     lem->raw[LK_SECRET_FILE], why);
		return -1;
	}
	return 0;
}

static void set_defaults(struct lm_layout *l)
{
	l->page_size = LM_CFG_PAGE_DEFAULT;
	l->auth = true;
	l->relay = LM_RELAY_ADAPTIVE;
	l->copy = LM_COPY_DEFAULT;
	l->updates = true;
	l->prefetch = LM_CFG_PREFETCH_DEFAULT;
	for (int lv = 0; lv < LM_LEVEL_COUNT; lv++) {
		struct lm_transport_cfg *t = &l->transport[lv];

		t->mtu = 65000;
		t->rto_initial_us = 20000;
		t->rto_min_us = 2000;
		t->rto_max_us = 1000000;
		t->max_retries = 15;
		t->window = 256;
		/* Upper levels carry batched traffic; a short delay lets one
		 * ack cover several datagrams. */
		t->ack_delay_us = lv == LM_LEVEL_CLIENT ? 0 : 200;
	}
}

static int finish(struct parser *p)
{
	const struct section *lem;

	if (check_required(p) < 0)
		return -1;
	lem = find_section(p, SECT_LEMURIA, "");
	if (check_region(p, lem) < 0)
		return -1;
	if ((lem->seen & 1u << LK_SECRET_FILE) && resolve_secret(p, lem) < 0)
		return -1;
	if (link_clusters(p) < 0 || check_listen(p) < 0 ||
	    check_transport(p) < 0 || assign_ids(p) < 0 ||
	    apply_env_faults(p) < 0)
		return -1;
	if (p->layout->auth && derive_key(p, lem) < 0)
		return -1;
	return 0;
}

int lm_layout_load(const char *path, struct lm_layout **out, char *err,
		   size_t errlen)
{
	struct parser p = { .path = path ? path : "(null)", .err = err,
			    .errlen = errlen };
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (!path || strlen(path) >= LM_PATH_MAX) {
		fail(&p, 0, LM_ECONFIG, "layout path is missing or too long");
		return p.rc;
	}
	p.layout = calloc(1, sizeof(*p.layout));
	if (!p.layout) {
		fail(&p, 0, LM_ENOMEM, "out of memory");
		return p.rc;
	}
	strcpy(p.layout->path, path);
	p.layout->hash = 0xcbf29ce484222325ull;
	set_defaults(p.layout);
	p.file = fopen(path, "r");
	if (!p.file) {
		fail(&p, 0, LM_ECONFIG, "cannot open: %s", strerror(errno));
		goto out;
	}
	rc = ini_parse_stream(read_line, &p, on_key, &p);
	if (rc == -2)
		fail(&p, p.line, LM_ENOMEM, "out of memory");
	if (!p.rc && ferror(p.file))
		fail(&p, p.line, LM_ECONFIG, "read error");
	/* inih keeps going after a syntax error and reports its line at the
	 * end; it wins over a later error of ours. */
	if (rc > 0 && (!p.rc || rc < p.err_line)) {
		p.rc = 0;
		fail(&p, rc, LM_ECONFIG,
		     "expected \"key = value\", a [section] or a comment");
	}
	if (!p.rc)
		finish(&p);
out:
	if (p.file)
		fclose(p.file);
	free(p.buf);
	free(p.sects);
	if (p.rc) {
		lm_layout_free(p.layout);
		return p.rc;
	}
	*out = p.layout;
	return 0;
}

void lm_layout_free(struct lm_layout *layout)
{
	if (!layout)
		return;
	free(layout->reflectors);
	free(layout->clusters);
	free(layout);
}

const struct lm_reflector_cfg *lm_layout_reflector(const struct lm_layout *l,
						   const char *name)
{
	for (size_t i = 0; i < l->nreflectors; i++)
		if (strcmp(l->reflectors[i].name, name) == 0)
			return &l->reflectors[i];
	return NULL;
}

const struct lm_cluster_cfg *lm_layout_cluster(const struct lm_layout *l,
					       const char *name)
{
	for (size_t i = 0; i < l->nclusters; i++)
		if (strcmp(l->clusters[i].name, name) == 0)
			return &l->clusters[i];
	return NULL;
}

const struct lm_cluster_cfg *lm_layout_cluster_of_rank(
	const struct lm_layout *l, uint32_t rank)
{
	for (size_t i = 0; i < l->nclusters; i++) {
		const struct lm_cluster_cfg *c = &l->clusters[i];

		if (rank >= c->first_rank && rank - c->first_rank < c->clients)
			return c;
	}
	return NULL;
}

uint16_t lm_layout_client_id(const struct lm_layout *l, uint32_t rank)
{
	if (rank >= l->nprocs)
		return 0;
	return (uint16_t)(l->nreflectors + l->nclusters + 1 + rank);
}
