/* The layout check between daemons (common/handshake.c): a peer daemon
 * with another layout file is logged, counted and refused, and the run
 * that needs it is aborted. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_pair.h"
#include "unit.h"

/* Reflector from layout A; lemuriad c0 from layout B (A, or A with c1
 * one client smaller).  c0 sends r0 a FETCH of run 7, twice. */
static void layout_pair(bool differ)
{
	char tdir[] = "/tmp/lm-layoutcheck-XXXXXX", a[64], b[64], err[256];
	uint16_t pr = dp_free_port(), pc = dp_free_port();
	struct lm_layout *la = NULL, *lb = NULL;
	struct event_base *base = event_base_new();
	lm_daemon *r = NULL, *c = NULL;
	struct lm_msg fetch = { .type = LM_MSG_FETCH, .run = 7, .page = 3 };
	enum lm_log_level saved = lm_log_get_level();

	CU_ASSERT_FATAL(pr && pc && pc + 1 != pr && base && mkdtemp(tdir));
	snprintf(a, sizeof(a), "%s/a.ini", tdir);
	snprintf(b, sizeof(b), "%s/b.ini", tdir);
	CU_ASSERT_FATAL(dp_write_layout(a, pr, pc, 2) == 0);
	CU_ASSERT_FATAL(dp_write_layout(b, pr, pc, differ ? 1 : 2) == 0);
	CU_ASSERT_FATAL(lm_layout_load(a, &la, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(lm_layout_load(b, &lb, err, sizeof(err)) == 0);
	CU_ASSERT_EQUAL(la->hash == lb->hash, !differ);
	memset(&dp_log, 0, sizeof(dp_log));
	lm_log_set_level(LM_LOG_WARN);
	lm_log_set_sink(dp_log_sink, NULL);
	lm_log_limit_reset();
	dp_daemons(base, la, lb, &dp_stub_proto, &r, &c);

	dp_stubs[1].out.request(dp_stubs[1].ctx, 1, 1, &fetch);
	dp_spin_until(base, &dp_stubs[0].handled, 1);
	if (!differ) {
		/* delivered as sent; nothing refused, nothing logged */
		CU_ASSERT_EQUAL(dp_stubs[0].handled, 1);
		CU_ASSERT_EQUAL(dp_stubs[0].last_type, LM_MSG_FETCH);
		CU_ASSERT_EQUAL(dp_stubs[0].last_from, 2);
		CU_ASSERT_EQUAL(lm_daemon_stats(r)->layout_mismatches, 0);
		CU_ASSERT_EQUAL(lm_daemon_stats(c)->layout_mismatches, 0);
		CU_ASSERT_EQUAL(dp_log.n, 0);
		goto out;
	}
	/* r0 refused the FETCH and aborted run 7 in its protocol. */
	CU_ASSERT_EQUAL(dp_stubs[0].handled, 1);
	CU_ASSERT_EQUAL(dp_stubs[0].aborts, 1);
	CU_ASSERT_EQUAL(dp_stubs[0].last_from, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(dp_stubs[0].reason,
				      "lemuriad c0 (node 2) runs a "
				      "different layout than reflector r0"));
	CU_ASSERT_EQUAL(lm_daemon_stats(r)->layout_mismatches, 1);
	CU_ASSERT_EQUAL(lm_daemon_stats(r)->msgs_refused_layout, 1);
	CU_ASSERT_PTR_NOT_NULL(dp_log_error("layout mismatch: lemuriad c0 "
					"(node 2)"));
	/* r0's answering PING told c0 too. */
	CU_ASSERT_EQUAL(lm_daemon_stats(c)->layout_mismatches, 1);
	CU_ASSERT_PTR_NOT_NULL(dp_log_error("layout mismatch: reflector r0 "
					"(node 1)"));
	{
		char want[128];

		snprintf(want, sizeof(want), "(hash %016llx, ours %016llx",
			 (unsigned long long)la->hash,
			 (unsigned long long)lb->hash);
		CU_ASSERT_PTR_NOT_NULL(dp_log_error(want));
	}
	/* c0 does not send to r0 again; its own protocol gets the ABORT. */
	dp_stubs[1].out.request(dp_stubs[1].ctx, 1, 2, &fetch);
	dp_spin_until(base, &dp_stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(dp_stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(dp_stubs[1].last_from, 1);
	CU_ASSERT_EQUAL(lm_daemon_stats(c)->msgs_refused_layout, 1);
	CU_ASSERT_EQUAL(dp_stubs[0].handled, 1);
	/* once per run */
	dp_stubs[1].out.request(dp_stubs[1].ctx, 1, 3, &fetch);
	dp_spin_until(base, &dp_stubs[1].aborts, 2);
	CU_ASSERT_EQUAL(dp_stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(lm_daemon_stats(r)->layout_mismatches, 1);
out:
	lm_daemon_destroy(c);
	lm_daemon_destroy(r);
	event_base_free(base);
	lm_log_set_sink(NULL, NULL);
	lm_log_limit_reset();
	lm_log_set_level(saved);
	lm_layout_free(la);
	lm_layout_free(lb);
	unlink(a);
	unlink(b);
	rmdir(tdir);
}

static void test_layout_same_passes(void)
{
	layout_pair(false);
}

static void test_layout_mismatch_refused_and_aborts(void)
{
	layout_pair(true);
}

LM_TEST_SUITE("handshake", LM_TEST(test_layout_same_passes),
	      LM_TEST(test_layout_mismatch_refused_and_aborts))
