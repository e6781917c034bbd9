/* Tests of the layout loader (common/config.c): the value parsers, the
 * example layouts in conf/, and one case per rejection rule, each checked
 * for LM_ECONFIG and a "PATH:LINE: reason" message. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "lm_error.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* A private directory per test holding layout.ini and two secrets. */

static char tmp_dir[64];
static char tmp_layout[128];
static char *saved_faults;

static void write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fwrite(text, 1, len, f), len);
	fclose(f);
}

static void tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmp_dir, name);
}

static void tmp_setup(void)
{
	char path[128];
	const char *env = getenv("LM_FAULTS");

	strcpy(tmp_dir, "/tmp/lm-cfg-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp_dir));
	tmp_path(tmp_layout, sizeof(tmp_layout), "layout.ini");
	tmp_path(path, sizeof(path), "a.key");
	write_file(path, "0123456789abcdef0123456789abcdef\n", 33);
	tmp_path(path, sizeof(path), "b.key");
	write_file(path, "fedcba9876543210fedcba9876543210\n", 33);
	tmp_path(path, sizeof(path), "short.key");
	write_file(path, "tiny", 4);
	/* The variable would override every [faults] section under test. */
	free(saved_faults);
	saved_faults = env ? strdup(env) : NULL;
	unsetenv("LM_FAULTS");
}

static void tmp_teardown(void)
{
	static const char *const names[] = { "layout.ini", "a.key", "b.key",
					     "short.key" };
	char path[128];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		tmp_path(path, sizeof(path), names[i]);
		unlink(path);
	}
	rmdir(tmp_dir);
	if (saved_faults)
		setenv("LM_FAULTS", saved_faults, 1);
	else
		unsetenv("LM_FAULTS");
	free(saved_faults);
	saved_faults = NULL;
}

static int load_text(const char *text, struct lm_layout **l, char *err,
		     size_t errlen)
{
	write_file(tmp_layout, text, strlen(text));
	return lm_layout_load(tmp_layout, l, err, errlen);
}

/* Loads text and checks rejection at `line` (0: no line) with `reason`
 * somewhere in the message. */
static void expect_reject(const char *text, int line, const char *reason)
{
	struct lm_layout *l = (struct lm_layout *)1;
	char err[1024] = "", prefix[256];
	int rc = load_text(text, &l, err, sizeof(err));

	if (line > 0)
		snprintf(prefix, sizeof(prefix), "%s:%d: ", tmp_layout, line);
	else
		snprintf(prefix, sizeof(prefix), "%s: ", tmp_layout);
	CU_ASSERT_EQUAL(rc, LM_ECONFIG);
	CU_ASSERT_PTR_NULL(l);
	if (strncmp(err, prefix, strlen(prefix)) != 0 ||
	    !strstr(err, reason)) {
		fprintf(stderr, "\n  want %s...%s\n  got  %s\n", prefix,
			reason, err);
		CU_FAIL("wrong rejection message");
	}
	if (rc == 0)
		lm_layout_free(l);
}

/* [lemuria] on lines 1-4, then [reflector r0] on 5-6. */
#define LEM "[lemuria]\nshared_size = 64M\nbase = 0x500000000000\n" \
	    "auth = off\n"
#define REF "[reflector r0]\nlisten = 127.0.0.1:7400\n"
/* A cluster of two clients; 4 lines. */
#define CL(name, port) "[cluster " name "]\nreflector = r0\n" \
		       "listen = 127.0.0.1:" port "\nclients = 2\n"

/* ------------------------------------------------------------------ */
/* Value parsers. */

static void test_parse_size(void)
{
	static const struct { const char *text; uint64_t bytes; } good[] = {
		{ "4096", 4096 }, { "4K", 4096 }, { "4k", 4096 },
		{ "64M", 64ULL << 20 }, { "1G", 1ULL << 30 }, { "0", 0 },
		{ "17179869183G", 17179869183ULL << 30 },
	};
	static const char *const bad[] = {
		"12Q", "-1", "", "99999999999G", "99999999999999999999",
		"4 K", " 4", "4KB", "K", "0x1000", "+5", "4.5M",
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 7;
		CU_ASSERT_EQUAL(lm_parse_size(good[i].text, &v), 0);
		CU_ASSERT_EQUAL(v, good[i].bytes);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		CU_ASSERT_EQUAL(lm_parse_size(bad[i], &v), LM_EINVAL);
		CU_ASSERT_EQUAL(v, 7);
	}
}

static void test_parse_duration(void)
{
	static const struct { const char *text; uint64_t us; } good[] = {
		{ "500us", 500 }, { "20ms", 20000 }, { "2s", 2000000 },
		{ "40", 40000 }, { "0", 0 }, { "0us", 0 },
	};
	static const char *const bad[] = {
		"", "1h", "-5", "5 ms", "ms", "1.5ms", "20MS",
		"99999999999999999999", "18446744073709551615s",
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 7;
		CU_ASSERT_EQUAL(lm_parse_duration(good[i].text, &v), 0);
		CU_ASSERT_EQUAL(v, good[i].us);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(lm_parse_duration(bad[i], &v), LM_EINVAL);
}

static void test_parse_addr(void)
{
	static const char *const bad[] = {
		"127.0.0.1", "1.2.3:80", "127.0.0.1:0", "127.0.0.1:70000",
		"host:80", "", ":80", "127.0.0.1:", "127.0.0.1:-1",
		"127.0.0.1: 80", "256.0.0.1:80", "::1:80", "127.0.0.1:80x",
	};
	struct sockaddr_in a;

	CU_ASSERT_EQUAL(lm_parse_addr("127.0.0.1:7400", &a), 0);
	CU_ASSERT_EQUAL(a.sin_family, AF_INET);
	CU_ASSERT_EQUAL(ntohs(a.sin_port), 7400);
	CU_ASSERT_EQUAL(ntohl(a.sin_addr.s_addr), 0x7f000001u);
	CU_ASSERT_EQUAL(lm_parse_addr("0.0.0.0:65535", &a), 0);
	CU_ASSERT_EQUAL(ntohs(a.sin_port), 65535);
	CU_ASSERT_EQUAL(a.sin_addr.s_addr, htonl(INADDR_ANY));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(lm_parse_addr(bad[i], &a), LM_EINVAL);
}

static void test_parse_faults(void)
{
	static const struct { const char *spec, *reason; } bad[] = {
		{ "drop=2", "drop \"2\" is not a probability" },
		{ "dup=x", "dup \"x\" is not a probability" },
		{ "drop=nan", "drop \"nan\"" },
		{ "drop=-0.1", "drop \"-0.1\"" },
		{ "loss=0.1", "unknown fault setting \"loss\"" },
		{ "drop", "\"drop\" is not name=value" },
		{ "drop=0.1,drop=0.2", "\"drop\" given twice" },
		{ "delay_max=5parsecs", "delay_max \"5parsecs\"" },
		{ "delay_max=11s", "delay_max \"11s\" is out of range" },
		{ "start_max=soon", "start_max \"soon\" is not a duration" },
		{ "start_max=11s", "start_max \"11s\" is out of range" },
		{ "seed=-1", "seed \"-1\"" },
		{ "drop=0.1,", "\"\" is not name=value" },
	};
	struct lm_fault_cfg f;
	char err[256];

	memset(&f, 0xff, sizeof(f));
	CU_ASSERT_EQUAL(lm_parse_faults("drop=0.1,dup=0.05,reorder=0.25,"
					"delay=0.5,delay_max=2ms,"
					"start_max=300ms,seed=7",
					&f, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(f.start_max_us, 300000);
	CU_ASSERT_DOUBLE_EQUAL(f.drop, 0.1, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(f.dup, 0.05, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(f.reorder, 0.25, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(f.delay, 0.5, 1e-12);
	CU_ASSERT_EQUAL(f.delay_max_us, 2000);
	CU_ASSERT_EQUAL(f.seed, 7);

	/* A subset leaves the rest off; blanks around items are allowed. */
	memset(&f, 0xff, sizeof(f));
	CU_ASSERT_EQUAL(lm_parse_faults(" dup = 1 , seed=0x10", &f, err,
					sizeof(err)), 0);
	CU_ASSERT_DOUBLE_EQUAL(f.dup, 1.0, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(f.drop, 0.0, 1e-12);
	CU_ASSERT_EQUAL(f.delay_max_us, 0);
	CU_ASSERT_EQUAL(f.seed, 16);

	memset(&f, 0xff, sizeof(f));
	CU_ASSERT_EQUAL(lm_parse_faults("", &f, err, sizeof(err)), 0);
	CU_ASSERT_DOUBLE_EQUAL(f.drop, 0.0, 1e-12);
	CU_ASSERT_EQUAL(f.seed, 0);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lm_fault_cfg before;

		memset(&f, 0x5a, sizeof(f));
		before = f;
		err[0] = '\0';
		CU_ASSERT_EQUAL(lm_parse_faults(bad[i].spec, &f, err,
						sizeof(err)), LM_EINVAL);
		CU_ASSERT(memcmp(&f, &before, sizeof(f)) == 0);
		if (!strstr(err, bad[i].reason)) {
			fprintf(stderr, "\n  %s: got \"%s\"\n", bad[i].spec,
				err);
			CU_FAIL("wrong LM_FAULTS message");
		}
	}
}

/* ------------------------------------------------------------------ */
/* The example layouts. */

/* Processes of one run compare layout hashes at JOIN: equal files give
 * equal hashes, and a one-byte change gives another. */
static void test_layout_hash_tracks_content(void)
{
	static const char text[] =
		"[lemuria]\nshared_size = 64M\nbase = 0x500000000000\n"
		"auth = off\n[reflector r0]\nlisten = 127.0.0.1:7400\n"
		"[cluster c0]\nreflector = r0\nlisten = 127.0.0.1:7410\n"
		"clients = 2\n";
	struct lm_layout *a = NULL, *b = NULL, *c = NULL;
	char err[512], path[] = "/tmp/lm-hash-XXXXXX";
	int fd = mkstemp(path);
	FILE *out;

	CU_ASSERT_FATAL(fd >= 0);
	out = fdopen(fd, "w");
	fputs(text, out);
	fclose(out);
	CU_ASSERT_EQUAL_FATAL(lm_layout_load(path, &a, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(lm_layout_load(path, &b, err, sizeof(err)), 0);
	out = fopen(path, "a");
	fputs("; one more comment\n", out);
	fclose(out);
	CU_ASSERT_EQUAL_FATAL(lm_layout_load(path, &c, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(a->hash, b->hash);
	CU_ASSERT_NOT_EQUAL(a->hash, c->hash);
	lm_layout_free(a);
	lm_layout_free(b);
	lm_layout_free(c);
	unlink(path);
}

static void test_examples_load(void)
{
	static const struct {
		const char *file;
		size_t nreflectors;
		uint32_t clients[4]; /* per cluster, 0-terminated */
		int refl_of[4];      /* reflector index of each cluster */
	} ex[] = {
		{ "1.ini", 1, { 1 }, { 0 } },
		{ "2.ini", 1, { 2 }, { 0 } },
		{ "4.ini", 1, { 4 }, { 0 } },
		{ "8.ini", 1, { 8 }, { 0 } },
		{ "16.ini", 1, { 16 }, { 0 } },
		{ "32.ini", 1, { 32 }, { 0 } },
		{ "4+4.ini", 1, { 4, 4 }, { 0, 0 } },
		{ "8+8.ini", 1, { 8, 8 }, { 0, 0 } },
		{ "4+4+4+4.ini", 1, { 4, 4, 4, 4 }, { 0, 0, 0, 0 } },
		{ "8+8+8+8.ini", 1, { 8, 8, 8, 8 }, { 0, 0, 0, 0 } },
		{ "2x2-two-reflectors.ini", 2, { 2, 2, 2, 2 }, { 0, 1, 0, 1 } },
		{ "3-reflectors.ini", 3, { 2, 2, 2 }, { 0, 1, 2 } },
	};
	uint8_t zero[LM_KEY_BYTES] = { 0 };

	unsetenv("LM_FAULTS");
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		struct lm_layout *l = NULL;
		char path[64], err[512] = "";
		size_t nc = 0;
		uint32_t rank = 0;
		uint16_t id;

		snprintf(path, sizeof(path), "conf/%s", ex[i].file);
		if (lm_layout_load(path, &l, err, sizeof(err)) != 0) {
			fprintf(stderr, "\n  %s\n", err);
			CU_FAIL("example layout rejected");
			continue;
		}
		while (nc < 4 && ex[i].clients[nc])
			nc++;
		CU_ASSERT_EQUAL(l->nreflectors, ex[i].nreflectors);
		CU_ASSERT_EQUAL(l->nclusters, nc);
		CU_ASSERT_EQUAL(l->shared_size, 64ULL << 20);
		CU_ASSERT_EQUAL(l->page_size, 4096);
		/* below 4 GiB: 32-bit pointers of the original SPLASH-2
		 * codes work (issue 41) */
		CU_ASSERT_EQUAL(l->base, 0x40000000ULL);
		CU_ASSERT(l->auth);
		CU_ASSERT_EQUAL(l->relay, LM_RELAY_ADAPTIVE);
		CU_ASSERT(l->updates);
		CU_ASSERT_STRING_EQUAL(l->secret_file, "conf/demo.key");
		CU_ASSERT(memcmp(l->key, zero, sizeof(zero)) != 0);
		for (size_t r = 0; r < l->nreflectors; r++)
			CU_ASSERT_EQUAL(l->reflectors[r].id, r + 1);
		for (size_t c = 0; c < nc; c++) {
			const struct lm_cluster_cfg *cc = &l->clusters[c];

			CU_ASSERT_EQUAL(cc->clients, ex[i].clients[c]);
			CU_ASSERT_EQUAL(cc->first_rank, rank);
			CU_ASSERT_EQUAL(cc->id, l->nreflectors + 1 + c);
			CU_ASSERT_EQUAL(cc->reflector_index, ex[i].refl_of[c]);
			CU_ASSERT_EQUAL(cc->cache_size, 64ULL << 20);
			CU_ASSERT_PTR_EQUAL(lm_layout_cluster(l, cc->name), cc);
			CU_ASSERT_PTR_EQUAL(
				lm_layout_cluster_of_rank(l, rank), cc);
			CU_ASSERT_PTR_EQUAL(lm_layout_cluster_of_rank(
				l, rank + cc->clients - 1), cc);
			rank += cc->clients;
		}
		CU_ASSERT_EQUAL(l->nprocs, rank);
		CU_ASSERT_PTR_NULL(lm_layout_cluster_of_rank(l, rank));
		id = (uint16_t)(l->nreflectors + nc + 1);
		CU_ASSERT_EQUAL(lm_layout_client_id(l, 0), id);
		CU_ASSERT_EQUAL(lm_layout_client_id(l, rank - 1),
				id + rank - 1);
		CU_ASSERT_EQUAL(lm_layout_client_id(l, rank), 0);
		CU_ASSERT_PTR_NOT_NULL(lm_layout_reflector(l, "r0"));
		CU_ASSERT_PTR_NULL(lm_layout_reflector(l, "r9"));
		CU_ASSERT_PTR_NULL(lm_layout_cluster(l, "r0"));
		lm_layout_free(l);
	}
}

/* Two example layouts can run at once only if no two share a port. */
static void test_examples_ports_distinct(void)
{
	static const char *const files[] = {
		"1.ini", "2.ini", "4.ini", "8.ini", "16.ini", "32.ini", "4+4.ini",
		"8+8.ini", "4+4+4+4.ini", "8+8+8+8.ini",
		"2x2-two-reflectors.ini", "3-reflectors.ini",
	};
	uint16_t ports[256];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct lm_layout *l = NULL;
		char path[64], err[512];

		snprintf(path, sizeof(path), "conf/%s", files[i]);
		CU_ASSERT_EQUAL_FATAL(lm_layout_load(path, &l, err,
						     sizeof(err)), 0);
		for (size_t r = 0; r < l->nreflectors && n < 256; r++)
			ports[n++] = ntohs(l->reflectors[r].addr.sin_port);
		for (size_t c = 0; c < l->nclusters && n < 256; c++)
			ports[n++] = ntohs(l->clusters[c].addr.sin_port);
		lm_layout_free(l);
	}
	CU_ASSERT(n > 20 && n < 256);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			CU_ASSERT_NOT_EQUAL(ports[i], ports[j]);
}

/* ------------------------------------------------------------------ */
/* Accepted layouts. */

static void test_defaults(void)
{
	struct lm_layout *l = NULL;
	char err[512] = "";

	tmp_setup();
	CU_ASSERT_EQUAL(load_text(LEM REF CL("c0", "7410"), &l, err,
				  sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_STRING_EQUAL(l->path, tmp_layout);
	CU_ASSERT_EQUAL(l->page_size, 4096);
	CU_ASSERT(!l->auth);
	CU_ASSERT_EQUAL(l->relay, LM_RELAY_ADAPTIVE);
	CU_ASSERT(l->updates);
	CU_ASSERT_EQUAL(l->prefetch, LM_CFG_PREFETCH_DEFAULT);
	CU_ASSERT_EQUAL(l->copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(l->clusters[0].copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(l->clusters[0].cache_size, 64ULL << 20);
	CU_ASSERT_EQUAL(l->reflectors[0].cache_size, 64ULL << 20);
	for (int lv = 0; lv < LM_LEVEL_COUNT; lv++) {
		const struct lm_transport_cfg *t = &l->transport[lv];

		CU_ASSERT_EQUAL(t->mtu, 65000);
		CU_ASSERT_EQUAL(t->rto_initial_us, 20000);
		CU_ASSERT_EQUAL(t->rto_min_us, 2000);
		CU_ASSERT_EQUAL(t->rto_max_us, 1000000);
		CU_ASSERT_EQUAL(t->max_retries, 15);
		CU_ASSERT_EQUAL(t->window, 256);
		CU_ASSERT_EQUAL(t->ack_delay_us,
				lv == LM_LEVEL_CLIENT ? 0 : 200);
	}
	CU_ASSERT_DOUBLE_EQUAL(l->faults.drop, 0.0, 1e-12);
	CU_ASSERT_EQUAL(l->faults.delay_max_us, 0);
	CU_ASSERT_EQUAL(l->faults.seed, 0);
	lm_layout_free(l);
	tmp_teardown();
}

/* Every key set; a cluster before the reflector it names; odd but legal
 * spelling (comments, blanks, CRLF, a UTF-8 BOM, "key: value"). */
static void test_every_key(void)
{
	static const char text[] =
		"\xEF\xBB\xBF; a full layout\r\n"
		"[cluster c.1]\r\n"
		"reflector = r-b   ; defined below\r\n"
		"listen = 10.1.2.3:7410\r\n"
		"clients = 3\r\n"
		"cache = 8K\r\n"
		"copy = Cluster\r\n"
		"\r\n"
		"  [lemuria]  ; indented header\r\n"
		"shared_size = 1G\r\n"
		"page_size = 8K\r\n"
		"base = 35184372088832\r\n"
		"secret_file = a.key\r\n"
		"auth = Yes\r\n"
		"relay = eager\r\n"
		"updates = Off\r\n"
		"prefetch = 15\r\n"
		"copy = client\r\n"
		"# hash comment\r\n"
		"[transport root]\r\n"
		"mtu = 1400\r\n"
		"rto_initial = 30ms\r\n"
		"rto_min = 500us\r\n"
		"rto_max = 2s\r\n"
		"retries: 1000\r\n"
		"window = 4096\r\n"
		"ack_delay = 1s\r\n"
		"[faults]\r\n"
		"drop = 0.5\r\n"
		"dup = 0\r\n"
		"reorder = 1\r\n"
		"delay = 0.125\r\n"
		"delay_max = 3ms\r\n"
		"seed = 0xfeed\r\n"
		"[reflector r-b]\r\n"
		"listen = 127.0.0.1:7411\r\n"
		"[reflector R_a]\r\n"
		"listen = 127.0.0.2:7411\r\n"
		"cache = 16K\r\n"
		"[cluster c2]\r\n"
		"reflector = R_a\r\n"
		"listen = 127.0.0.1:7412\r\n"
		"clients = 1024\r\n";
	const struct lm_transport_cfg *t;
	const struct lm_cluster_cfg *c;
	struct lm_layout *l = NULL;
	char err[512] = "", key_path[128];

	tmp_setup();
	if (load_text(text, &l, err, sizeof(err)) != 0)
		fprintf(stderr, "\n  %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(l->shared_size, 1ULL << 30);
	CU_ASSERT_EQUAL(l->page_size, 8192);
	CU_ASSERT_EQUAL(l->base, 0x200000000000ULL);
	CU_ASSERT(l->auth);
	CU_ASSERT_EQUAL(l->relay, LM_RELAY_EAGER);
	CU_ASSERT(!l->updates);
	CU_ASSERT_EQUAL(l->prefetch, 15);
	CU_ASSERT_EQUAL(l->copy, LM_COPY_CLIENT);
	tmp_path(key_path, sizeof(key_path), "a.key");
	CU_ASSERT_STRING_EQUAL(l->secret_file, key_path);

	t = &l->transport[LM_LEVEL_ROOT];
	CU_ASSERT_EQUAL(t->mtu, 1400);
	CU_ASSERT_EQUAL(t->rto_initial_us, 30000);
	CU_ASSERT_EQUAL(t->rto_min_us, 500);
	CU_ASSERT_EQUAL(t->rto_max_us, 2000000);
	CU_ASSERT_EQUAL(t->max_retries, 1000);
	CU_ASSERT_EQUAL(t->window, 4096);
	CU_ASSERT_EQUAL(t->ack_delay_us, 1000000);
	/* Other levels keep their defaults. */
	CU_ASSERT_EQUAL(l->transport[LM_LEVEL_CLIENT].mtu, 65000);

	CU_ASSERT_DOUBLE_EQUAL(l->faults.drop, 0.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(l->faults.reorder, 1.0, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(l->faults.delay, 0.125, 1e-12);
	CU_ASSERT_EQUAL(l->faults.delay_max_us, 3000);
	CU_ASSERT_EQUAL(l->faults.seed, 0xfeed);

	CU_ASSERT_EQUAL(l->nreflectors, 2);
	CU_ASSERT_STRING_EQUAL(l->reflectors[0].name, "r-b");
	CU_ASSERT_EQUAL(l->reflectors[0].line, 35);
	CU_ASSERT_EQUAL(l->reflectors[1].id, 2);
	CU_ASSERT_EQUAL(l->reflectors[0].cache_size,
			LM_REFLECTOR_CACHE_DEFAULT);
	CU_ASSERT_EQUAL(l->reflectors[1].cache_size, 16384);
	CU_ASSERT_EQUAL(l->nclusters, 2);
	c = lm_layout_cluster(l, "c.1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(c->line, 2);
	CU_ASSERT_EQUAL(c->reflector_index, 0);
	CU_ASSERT_STRING_EQUAL(c->reflector, "r-b");
	CU_ASSERT_EQUAL(ntohl(c->addr.sin_addr.s_addr), 0x0a010203u);
	CU_ASSERT_EQUAL(c->cache_size, 8192);
	CU_ASSERT_EQUAL(c->copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(c->id, 3);
	CU_ASSERT_EQUAL(c->first_rank, 0);
	c = lm_layout_cluster(l, "c2");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(c->reflector_index, 1);
	CU_ASSERT_EQUAL(c->first_rank, 3);
	CU_ASSERT_EQUAL(c->cache_size, 1ULL << 30);
	CU_ASSERT_EQUAL(c->copy, LM_COPY_CLIENT);
	CU_ASSERT_EQUAL(l->nprocs, 1027);
	CU_ASSERT_EQUAL(lm_layout_client_id(l, 1026), 4 + 1026 + 1);
	CU_ASSERT_PTR_EQUAL(lm_layout_cluster_of_rank(l, 3), c);
	lm_layout_free(l);
	tmp_teardown();
}

/* `copy`: [lemuria]'s applies to every cluster that sets none of its own,
 * wherever [lemuria] stands in the file; a cluster's own wins. */
static void test_copy(void)
{
	struct lm_layout *l = NULL;
	char err[512] = "";

	tmp_setup();
	CU_ASSERT_EQUAL(load_text(CL("c0", "7410") LEM "copy = cluster\n"
				  REF CL("c1", "7411"), &l, err,
				  sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(l->copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(l->clusters[0].copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(l->clusters[1].copy, LM_COPY_CLUSTER);
	lm_layout_free(l);

	CU_ASSERT_EQUAL(load_text(LEM "copy = cluster\n" REF
				  CL("c0", "7410") "copy = client\n"
				  CL("c1", "7411"), &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(l->copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(l->clusters[0].copy, LM_COPY_CLIENT);
	CU_ASSERT_EQUAL(l->clusters[1].copy, LM_COPY_CLUSTER);
	lm_layout_free(l);

	/* A cluster may choose client under the default [lemuria]. */
	CU_ASSERT_EQUAL(load_text(LEM REF CL("c0", "7410")
				  CL("c1", "7411") "copy = CLIENT\n", &l,
				  err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(l->copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(l->clusters[0].copy, LM_COPY_CLUSTER);
	CU_ASSERT_EQUAL(l->clusters[1].copy, LM_COPY_CLIENT);
	lm_layout_free(l);

	expect_reject(LEM "copy = shared\n", 5,
		      "copy \"shared\" is not cluster or client");
	expect_reject(LEM "copy =\n", 5, "copy \"\" is not cluster or client");
	expect_reject(LEM REF CL("c0", "7410") "copy = process\n", 11,
		      "copy \"process\" is not cluster or client");
	expect_reject(LEM "copy = client\ncopy = cluster\n", 6,
		      "duplicate key \"copy\" in [lemuria] (first on line 5)");
	expect_reject(LEM REF CL("c0", "7410") "copy = cluster\n"
		      "copy = cluster\n", 12,
		      "duplicate key \"copy\" in [cluster c0] (first on line "
		      "11)");
	expect_reject(LEM REF "copy = cluster\n", 7,
		      "unknown key \"copy\" in [reflector r0]");
	expect_reject(LEM "[transport client]\ncopy = cluster\n", 6,
		      "unknown key \"copy\" in [transport client]");
	expect_reject(LEM "[faults]\ncopy = cluster\n", 6,
		      "unknown key \"copy\" in [faults]");
	tmp_teardown();
}

/* Same port on different IPs is fine; the region may end just below the
 * top of user space. */
static void test_accepted_edges(void)
{
	struct lm_layout *l = NULL;
	char err[512] = "";

	tmp_setup();
	CU_ASSERT_EQUAL(load_text("[lemuria]\nshared_size = 64M\n"
				  "base = 0x7ffffb000000\nauth = 0\n"
				  "[reflector r0]\nlisten = 127.0.0.1:7400\n"
				  "[cluster c0]\nreflector = r0\n"
				  "listen = 127.0.0.2:7400\nclients = 1\n",
				  &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL(l);
	lm_layout_free(l);
	lm_layout_free(NULL);
	tmp_teardown();
}

/* ------------------------------------------------------------------ */
/* Rejections. */

static void test_reject_structure(void)
{
	static const char *const long_line =
		"[lemuria]\n; a long comment is fine: "
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"\nsecret_file = "
		"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
		"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
		"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
		"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
		"\n";

	tmp_setup();
	expect_reject("[lemuria]\nshred_size = 64M\n", 2,
		      "unknown key \"shred_size\" in [lemuria]");
	expect_reject(LEM REF "[cluster c0]\nreflector = r0\nlisten = "
		      "127.0.0.1:7410\nclients = 2\nport = 9\n", 11,
		      "unknown key \"port\" in [cluster c0]");
	expect_reject(LEM "[bogus]\n", 5, "unknown section [bogus]");
	expect_reject(LEM "[reflectors r0]\n", 5,
		      "unknown section [reflectors r0]");
	expect_reject(LEM "base = 0x600000000000\n", 5,
		      "duplicate key \"base\" in [lemuria] (first on line 3)");
	expect_reject(LEM REF CL("c0", "7410") CL("c0", "7411"), 11,
		      "duplicate section [cluster c0] (first on line 7)");
	expect_reject(LEM REF "[lemuria]\n", 7,
		      "duplicate section [lemuria] (first on line 1)");
	expect_reject(LEM "[transport client]\n[transport client]\n", 6,
		      "duplicate section [transport client]");
	expect_reject(REF CL("c0", "7410"), 0, "no [lemuria] section");
	expect_reject("", 0, "no [lemuria] section");
	expect_reject(LEM CL("c0", "7410"), 0, "no [reflector NAME] section");
	expect_reject(LEM REF, 0, "no [cluster NAME] section");
	expect_reject(LEM REF "[cluster c0]\nreflector = r0\n"
		      "listen = 127.0.0.1:7410\n", 7,
		      "[cluster c0] is missing required key \"clients\"");
	expect_reject(LEM "[reflector r0]\n" CL("c0", "7410"), 5,
		      "[reflector r0] is missing required key \"listen\"");
	expect_reject("[lemuria]\nbase = 0x500000000000\nauth = off\n"
		      REF CL("c0", "7410"), 1,
		      "[lemuria] is missing required key \"shared_size\"");
	expect_reject("[lemuria]\nshared_size = 64M\n"
		      "base = 0x500000000000\n" REF CL("c0", "7410"), 1,
		      "missing required key \"secret_file\" (needed when "
		      "auth is on)");
	expect_reject("shared_size = 64M\n[lemuria]\n", 1,
		      "key \"shared_size\" outside any section");
	expect_reject(LEM "just some words\n" REF CL("c0", "7410"), 5,
		      "expected \"key = value\"");
	/* inih's syntax error comes first even though a later line is bad
	 * too. */
	expect_reject(LEM "oops\nmtu = 5\n", 5, "expected \"key = value\"");
	expect_reject(LEM "[cluster c0\n", 5, "section header without ']'");
	expect_reject(LEM "[cluster c0] x\n", 5,
		      "unexpected text after section header");
	expect_reject(LEM "[lemuria main]\n", 5,
		      "section [lemuria] takes no name");
	expect_reject(LEM "[cluster]\n", 5, "section [cluster] needs a name");
	expect_reject(LEM "[transport]\n", 5,
		      "section [transport] needs a level");
	expect_reject(LEM "[transport wan]\n", 5,
		      "unknown transport level \"wan\"");
	expect_reject(LEM "[cluster bad/name]\n", 5,
		      "cluster name \"bad/name\" is invalid");
	expect_reject(LEM "[reflector a b]\n", 5,
		      "reflector name \"a b\" is invalid");
	expect_reject(LEM "[reflector "
		      "r123456789012345678901234567890123456789012345678901234"
		      "567890123]\n", 5, "is invalid");
	expect_reject(long_line, 3, "line is longer than");
	tmp_teardown();
}

static void test_reject_region(void)
{
	char reason[128];

	tmp_setup();
	snprintf(reason, sizeof(reason),
		 "page_size \"5000\" is not a multiple of the system page "
		 "size %ld", sysconf(_SC_PAGESIZE));
	expect_reject(LEM "page_size = 5000\n", 5, reason);
	if (sysconf(_SC_PAGESIZE) == 4096)
		expect_reject(LEM "page_size = 12288\n", 5,
			      "page_size \"12288\" is not a power of two");
	expect_reject(LEM "page_size = 2M\n", 5,
		      "page_size \"2M\" is larger than 1M");
	expect_reject(LEM "page_size = 0\n", 5, "page_size \"0\"");
	expect_reject("[lemuria]\nshared_size = 12Q\n", 2,
		      "shared_size \"12Q\" is not a size");
	expect_reject("[lemuria]\nshared_size = -1\n", 2,
		      "shared_size \"-1\" is not a size");
	expect_reject("[lemuria]\nshared_size =\n", 2,
		      "shared_size \"\" is not a size");
	expect_reject("[lemuria]\nshared_size = 99999999999G\n", 2,
		      "shared_size \"99999999999G\" is not a size");
	expect_reject("[lemuria]\nshared_size = 0\n", 2,
		      "shared_size \"0\" is out of range");
	expect_reject("[lemuria]\nshared_size = 65G\n", 2,
		      "shared_size \"65G\" is out of range");
	expect_reject("[lemuria]\nshared_size = 5000\n"
		      "base = 0x500000000000\nauth = off\n" REF
		      CL("c0", "7410"), 2,
		      "shared_size \"5000\" is not a multiple of page_size "
		      "4096");
	expect_reject("[lemuria]\nshared_size = 64M\n"
		      "base = 0x500000000100\nauth = off\n" REF
		      CL("c0", "7410"), 3,
		      "base \"0x500000000100\" is not a multiple of page_size");
	expect_reject("[lemuria]\nshared_size = 64M\n"
		      "base = 0x7ffffc000000\nauth = off\n" REF
		      CL("c0", "7410"), 3,
		      "plus shared_size \"64M\" reaches past the end of user "
		      "space");
	expect_reject("[lemuria]\nbase = 0xZZ\n", 2,
		      "base \"0xZZ\" is not an address");
	expect_reject("[lemuria]\nbase = 12abc\n", 2,
		      "base \"12abc\" is not an address");
	expect_reject("[lemuria]\nbase = 0\n", 2, "base \"0\" is outside");
	expect_reject("[lemuria]\nbase = 0x800000000000\n", 2,
		      "base \"0x800000000000\" is outside");
	expect_reject("[lemuria]\nauth = maybe\n", 2,
		      "auth \"maybe\" is not on or off");
	expect_reject("[lemuria]\nrelay = sometimes\n", 2,
		      "relay \"sometimes\" is not lazy, eager or adaptive");
	expect_reject("[lemuria]\nupdates = often\n", 2,
		      "updates \"often\" is not on or off");
	expect_reject("[lemuria]\nprefetch = 32\n", 2,
		      "prefetch \"32\" is not a page count from 0 to 31");
	expect_reject("[lemuria]\nprefetch = -1\n", 2,
		      "prefetch \"-1\" is not a page count");
	tmp_teardown();
}

static void test_reject_clusters(void)
{
	tmp_setup();
	expect_reject(LEM REF CL("c0", "7410")
		      "[cluster c1]\nreflector = r9\n"
		      "listen = 127.0.0.1:7411\nclients = 2\n", 12,
		      "cluster \"c1\" names reflector \"r9\", which is not "
		      "defined");
	expect_reject(LEM REF "[cluster c0]\nreflector = r 0\n", 8,
		      "reflector name \"r 0\" is invalid");
	expect_reject(LEM REF "[cluster c0]\nclients = 0\n", 8,
		      "clients \"0\" is out of range (1..1024)");
	expect_reject(LEM REF "[cluster c0]\nclients = 1025\n", 8,
		      "clients \"1025\" is out of range");
	expect_reject(LEM REF "[cluster c0]\nclients = four\n", 8,
		      "clients \"four\" is not an unsigned integer");
	expect_reject(LEM REF "[cluster c0]\ncache = lots\n", 8,
		      "cache \"lots\" is not a size");
	expect_reject(LEM REF CL("c0", "7410") "cache = 1K\n", 11,
		      "cache \"1K\" is smaller than one page (4096)");
	expect_reject(LEM REF "cache = lots\n" CL("c0", "7410"), 7,
		      "cache \"lots\" is not a size");
	expect_reject(LEM REF "cache = 2K\n" CL("c0", "7410"), 7,
		      "cache \"2K\" is smaller than one page (4096)");
	expect_reject(LEM "[reflector r0]\nlisten = 127.0.0.1\n", 6,
		      "listen \"127.0.0.1\" is not a numeric IPv4:port");
	expect_reject(LEM "[reflector r0]\nlisten = 1.2.3:80\n", 6,
		      "listen \"1.2.3:80\" is not");
	expect_reject(LEM "[reflector r0]\nlisten = 127.0.0.1:0\n", 6,
		      "listen \"127.0.0.1:0\" is not");
	expect_reject(LEM "[reflector r0]\nlisten = 127.0.0.1:70000\n", 6,
		      "listen \"127.0.0.1:70000\" is not");
	expect_reject(LEM "[reflector r0]\nlisten = host:80\n", 6,
		      "listen \"host:80\" is not");
	expect_reject(LEM REF CL("c0", "7400"), 9,
		      "listen \"127.0.0.1:7400\" overlaps the listen address "
		      "of [reflector r0] on line 6");
	/* the address peers send to: 0.0.0.0 cannot be one (issue 42) */
	expect_reject(LEM REF "[reflector r1]\nlisten = 0.0.0.0:7401\n"
		      CL("c0", "7410"), 8,
		      "listen \"0.0.0.0:7401\": 0.0.0.0 is no address to send "
		      "to");
	expect_reject(LEM REF CL("c0", "7410")
		      "[cluster c1]\nreflector = r0\nlisten = 0.0.0.0:7411\n"
		      "clients = 1\n", 13,
		      "give the daemon's own address on its host");
	tmp_teardown();
}

static void test_reject_transport_faults(void)
{
	tmp_setup();
	expect_reject(LEM "[transport client]\nmtu = 100\n", 6,
		      "mtu \"100\" is out of range (576..65507)");
	expect_reject(LEM "[transport client]\nmtu = 65508\n", 6,
		      "mtu \"65508\" is out of range");
	expect_reject(LEM "[transport cluster]\nretries = 0\n", 6,
		      "retries \"0\" is out of range (1..1000)");
	expect_reject(LEM "[transport root]\nwindow = 5000\n", 6,
		      "window \"5000\" is out of range (1..4096)");
	expect_reject(LEM "[transport root]\nack_delay = 2s\n", 6,
		      "ack_delay \"2s\" is out of range (0us..1s)");
	expect_reject(LEM "[transport root]\nrto_initial = fast\n", 6,
		      "rto_initial \"fast\" is not a duration");
	expect_reject(LEM "[transport root]\nrto_max = 61s\n", 6,
		      "rto_max \"61s\" is out of range");
	expect_reject(LEM REF CL("c0", "7410")
		      "[transport cluster]\nrto_max = 3s\n"
		      "rto_min = 50ms\nwindow = 8\n", 13,
		      "[transport cluster] needs rto_min <= rto_initial <= "
		      "rto_max (have 50ms, 20ms, 3s)");
	expect_reject(LEM REF CL("c0", "7410")
		      "[transport client]\nrto_max = 10ms\n", 12,
		      "(have 2ms, 20ms, 10ms)");
	expect_reject(LEM "[faults]\ndrop = 1.5\n", 6,
		      "drop \"1.5\" is not a probability between 0 and 1");
	expect_reject(LEM "[faults]\ndelay_max = soon\n", 6,
		      "delay_max \"soon\" is not a duration");
	expect_reject(LEM "[faults]\nseed = -3\n", 6,
		      "seed \"-3\" is not an unsigned integer");
	expect_reject(LEM "[faults]\nloss = 0.1\n", 6,
		      "unknown key \"loss\" in [faults]");
	tmp_teardown();
}

static void test_secret_file(void)
{
	static const char fmt[] =
		"[lemuria]\nshared_size = 64M\nbase = 0x500000000000\n"
		"secret_file = %s\n" REF CL("c0", "7410");
	uint8_t key_a[LM_KEY_BYTES];
	struct lm_layout *l = NULL;
	char text[512], err[512] = "", abs_b[128];

	tmp_setup();
	/* Relative names are found beside the layout, not in the cwd. */
	snprintf(text, sizeof(text), fmt, "a.key");
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	memcpy(key_a, l->key, sizeof(key_a));
	lm_layout_free(l);
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT(memcmp(key_a, l->key, sizeof(key_a)) == 0);
	lm_layout_free(l);

	/* Another secret gives another key; absolute paths are kept. */
	tmp_path(abs_b, sizeof(abs_b), "b.key");
	snprintf(text, sizeof(text), fmt, abs_b);
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_STRING_EQUAL(l->secret_file, abs_b);
	CU_ASSERT(memcmp(key_a, l->key, sizeof(key_a)) != 0);
	lm_layout_free(l);

	snprintf(text, sizeof(text), fmt, "missing.key");
	expect_reject(text, 4, "cannot use secret_file \"missing.key\"");
	snprintf(text, sizeof(text), fmt, "short.key");
	expect_reject(text, 4, "cannot use secret_file \"short.key\"");
	snprintf(text, sizeof(text), fmt, "");
	expect_reject(text, 4, "secret_file is empty");

	/* With auth off the secret is neither needed nor read. */
	CU_ASSERT_EQUAL(load_text("[lemuria]\nshared_size = 64M\n"
				  "base = 0x500000000000\nauth = off\n"
				  "secret_file = missing.key\n"
				  REF CL("c0", "7410"), &l, err,
				  sizeof(err)), 0);
	lm_layout_free(l);
	tmp_teardown();
}

static void test_missing_file(void)
{
	struct lm_layout *l = (struct lm_layout *)1;
	char err[512] = "";

	CU_ASSERT_EQUAL(lm_layout_load("/nonexistent/lm/x.ini", &l, err,
				       sizeof(err)), LM_ECONFIG);
	CU_ASSERT_PTR_NULL(l);
	CU_ASSERT(strncmp(err, "/nonexistent/lm/x.ini: cannot open", 34) == 0);
	/* No room for a message is not an error of its own. */
	CU_ASSERT_EQUAL(lm_layout_load("/nonexistent/lm/x.ini", &l, NULL, 0),
			LM_ECONFIG);
}

static void test_env_faults(void)
{
	static const char text[] = LEM REF CL("c0", "7410")
		"[faults]\ndrop = 0.5\nseed = 3\n";
	struct lm_layout *l = NULL;
	char err[512] = "";

	tmp_setup();
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_DOUBLE_EQUAL(l->faults.drop, 0.5, 1e-12);
	lm_layout_free(l);

	/* The variable replaces the whole section, not single keys. */
	setenv("LM_FAULTS", "dup=0.25,delay_max=4ms", 1);
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_DOUBLE_EQUAL(l->faults.drop, 0.0, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(l->faults.dup, 0.25, 1e-12);
	CU_ASSERT_EQUAL(l->faults.delay_max_us, 4000);
	CU_ASSERT_EQUAL(l->faults.seed, 0);
	lm_layout_free(l);

	/* Empty means unset. */
	setenv("LM_FAULTS", "", 1);
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(l->faults.seed, 3);
	lm_layout_free(l);

	setenv("LM_FAULTS", "drop=7", 1);
	l = (struct lm_layout *)1;
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), LM_ECONFIG);
	CU_ASSERT_PTR_NULL(l);
	CU_ASSERT(strncmp(err, "LM_FAULTS=\"drop=7\": ", 20) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "drop \"7\" is not a probability"));
	tmp_teardown();
}

/* Node ids are uint16 with 0 reserved: R + C + nprocs may reach 65535,
 * not more. */
static void test_node_id_limit(void)
{
	size_t cap = 64 * 1024, len = 0;
	char *text = malloc(cap);
	struct lm_layout *l = NULL;
	char err[512] = "";
	int line = 6, clients_line = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	tmp_setup();
	/* 1 reflector + 64 clusters: 63 of 1024 clients and one of 958. */
	len += (size_t)snprintf(text + len, cap - len, "%s", LEM REF);
	for (int i = 0; i < 64; i++) {
		len += (size_t)snprintf(text + len, cap - len,
					"[cluster c%d]\nreflector = r0\n"
					"listen = 127.0.0.1:%d\n"
					"clients = %d\n", i, 8000 + i,
					i < 63 ? 1024 : 958);
		line += 4;
	}
	clients_line = line;
	CU_ASSERT_EQUAL(load_text(text, &l, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(l->nprocs, 63 * 1024 + 958);
	CU_ASSERT_EQUAL(lm_layout_client_id(l, l->nprocs - 1), 65535);
	CU_ASSERT_EQUAL(l->clusters[63].first_rank, 63 * 1024);
	lm_layout_free(l);

	/* One client more does not fit. */
	text[len - 2] = '9';
	CU_ASSERT(strcmp(text + len - 14, "clients = 959\n") == 0);
	expect_reject(text, clients_line,
		      "clients \"959\" of cluster \"c63\" take the layout "
		      "past 65535 node ids");
	free(text);
	tmp_teardown();
}

LM_TEST_SUITE("config",
	      LM_TEST(test_parse_size),
	      LM_TEST(test_parse_duration),
	      LM_TEST(test_parse_addr),
	      LM_TEST(test_parse_faults),
	      LM_TEST(test_examples_load),
	      LM_TEST(test_layout_hash_tracks_content),
	      LM_TEST(test_examples_ports_distinct),
	      LM_TEST(test_defaults),
	      LM_TEST(test_every_key),
	      LM_TEST(test_copy),
	      LM_TEST(test_accepted_edges),
	      LM_TEST(test_reject_structure),
	      LM_TEST(test_reject_region),
	      LM_TEST(test_reject_clusters),
	      LM_TEST(test_reject_transport_faults),
	      LM_TEST(test_secret_file),
	      LM_TEST(test_missing_file),
	      LM_TEST(test_env_faults),
	      LM_TEST(test_node_id_limit))
