/* Every host from one command (tools/hosts.c): the host file, with a
 * message naming FILE:LINE for each kind of bad line and each daemon
 * left without a host, and the words an agent gets, quoted for a shell
 * only where one would read them otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hosts.h"
#include "lm_error.h"
#include "tmpfiles.h"
#include "unit.h"

static struct lm_layout *layout;
static char layout_path[128], hosts_path[128];

static void setup(void)
{
	char err[512] = "", key[128];

	tf_dir_create();
	tf_path(key, sizeof(key), "key");
	tf_path(layout_path, sizeof(layout_path), "layout.ini");
	tf_path(hosts_path, sizeof(hosts_path), "hosts");
	tf_put(key, "hosts test secret, not a real one\n");
	tf_put(layout_path,
	       "[lemuria]\nshared_size = 1M\nbase = 0x500000000000\n"
	       "secret_file = key\n"
	       "[reflector r0]\nlisten = 127.0.0.1:7901\n"
	       "[cluster c0]\nreflector = r0\nlisten = 127.0.0.1:7902\n"
	       "clients = 1\n"
	       "[cluster c1]\nreflector = r0\nlisten = 127.0.0.1:7903\n"
	       "clients = 1\n");
	if (lm_layout_load(layout_path, &layout, err, sizeof(err)))
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(layout);
}

static void teardown(void)
{
	static const char *const names[] = { "key", "layout.ini", "hosts",
					     NULL };

	lm_layout_free(layout);
	layout = NULL;
	tf_dir_remove(names);
}

/* Loads `text` as the host file: its result, the message in err. */
static int load(const char *text, bool need_reflectors,
		struct lm_hosts **h, char *err, size_t errlen)
{
	tf_put(hosts_path, text);
	err[0] = '\0';
	return lm_hosts_load(hosts_path, layout, need_reflectors, h, err,
			     errlen);
}

static void test_host_file_read(void)
{
	struct lm_hosts *h = NULL;
	char err[512];

	setup();
	CU_ASSERT_EQUAL(load("# where they run\n\nr0 node0\n"
			     "  c0\tnode1   # tabs, spaces\nc1 lm-ns-1\n",
			     true, &h, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_STRING_EQUAL(lm_hosts_of(h, "r0"), "node0");
	CU_ASSERT_STRING_EQUAL(lm_hosts_of(h, "c0"), "node1");
	CU_ASSERT_STRING_EQUAL(lm_hosts_of(h, "c1"), "lm-ns-1");
	CU_ASSERT_PTR_NULL(lm_hosts_of(h, "c2"));
	lm_hosts_free(h);
	/* a reflector may go unnamed when nobody starts it */
	CU_ASSERT_EQUAL(load("c0 a\nc1 b\n", false, &h, err, sizeof(err)), 0);
	lm_hosts_free(h);
	lm_hosts_free(NULL);
	teardown();
}

static void test_bad_host_files_named(void)
{
	static const struct {
		const char *text;
		bool need_reflectors;
		const char *says;
	} cases[] = {
		{ "r0 a\nc0 b\nc9 c\n", false, "hosts:3: \"c9\" is no "
					       "reflector or cluster" },
		{ "c0 b\nc1 c\nc0 d\n", false, "hosts:3: cluster c0 has a "
					       "host already (b)" },
		{ "c0\nc1 c\n", false, "hosts:1: \"c0\": a line is NAME "
				       "HOST" },
		{ "c0 b x\nc1 c\n", false, "hosts:1: \"c0 ... x\"" },
		{ "c0 b\n", false, "cluster c1 has no host" },
		{ "c0 b\nc1 c\n", true, "reflector r0 has no host, and "
					"--start-daemons" },
	};
	struct lm_hosts *h;
	char err[512];

	setup();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		h = (struct lm_hosts *)1;
		CU_ASSERT_EQUAL(load(cases[i].text, cases[i].need_reflectors,
				     &h, err, sizeof(err)), LM_EINVAL);
		CU_ASSERT_PTR_NULL(h);
		if (!strstr(err, cases[i].says))
			fprintf(stderr, "case %zu: %s\n", i, err);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].says));
	}
	CU_ASSERT_EQUAL(lm_hosts_load("/nonexistent/hosts", layout, false, &h,
				      err, sizeof(err)), LM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/hosts"));
	teardown();
}

static void test_words_quoted_only_where_needed(void)
{
	static const struct {
		const char *word, *quoted;
	} cases[] = {
		{ "/usr/bin/lemuria-run", "/usr/bin/lemuria-run" },
		{ "-n1024", "-n1024" },
		{ "LEMURIA_PROFILE=1", "LEMURIA_PROFILE=1" },
		{ "a b", "'a b'" },
		{ "it's", "'it'\\''s'" },
		{ "$HOME", "'$HOME'" },
		{ "", "''" },
		{ "x;rm", "'x;rm'" },
	};
	char out[64], small[4];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t need = lm_hosts_quote(cases[i].word, out, sizeof(out));

		CU_ASSERT_STRING_EQUAL(out, cases[i].quoted);
		CU_ASSERT_EQUAL(need, strlen(cases[i].quoted));
		CU_ASSERT_EQUAL(lm_hosts_quote(cases[i].word, NULL, 0), need);
	}
	/* cut short, still terminated */
	CU_ASSERT_EQUAL(lm_hosts_quote("a b c", small, sizeof(small)), 7);
	CU_ASSERT_STRING_EQUAL(small, "'a ");
}

/* argv equals the NULL-terminated want. */
static void same_words(char **argv, const char *const *want)
{
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(argv);
	for (i = 0; want[i] && argv[i]; i++)
		CU_ASSERT_STRING_EQUAL(argv[i], want[i]);
	CU_ASSERT_PTR_NULL(argv[i]);
	CU_ASSERT_PTR_NULL(want[i]);
	lm_hosts_argv_free(argv);
}

/* ssh joins its words for the remote shell: each is quoted; an agent
 * that runs its words itself gets them as they are. */
static void test_agent_command(void)
{
	char *const cmd[] = { "lemuria-run", "--", "echo", "a b", NULL };
	static const char *const by_ssh[] = { "ssh", "-o", "BatchMode=yes",
					      "node1", "lemuria-run", "--",
					      "echo", "'a b'", NULL };
	static const char *const by_rsh[] = { "/usr/bin/rsh", "node1",
					      "lemuria-run", "--", "echo",
					      "'a b'", NULL };
	static const char *const by_netns[] = { "ip", "netns", "exec",
						"lm-c0", "lemuria-run", "--",
						"echo", "a b", NULL };

	same_words(lm_hosts_command("ssh -o BatchMode=yes", "node1", cmd),
		   by_ssh);
	same_words(lm_hosts_command("/usr/bin/rsh", "node1", cmd), by_rsh);
	same_words(lm_hosts_command("  ip netns\texec ", "lm-c0", cmd),
		   by_netns);
	CU_ASSERT_PTR_NULL(lm_hosts_command(" \t", "h", cmd));
	lm_hosts_argv_free(NULL);
}

LM_TEST_SUITE("hosts", LM_TEST(test_host_file_read),
	      LM_TEST(test_bad_host_files_named),
	      LM_TEST(test_words_quoted_only_where_needed),
	      LM_TEST(test_agent_command))
