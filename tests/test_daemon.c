/* The daemon object (common/daemon.c): the protocol's put-off work runs
 * when asked, between messages. */
#include <stdbool.h>
#include <string.h>

#include "daemon_pair.h"
#include "unit.h"

/* A machine that puts work off: a FETCH of page 3 asks for three
 * background calls. */
static unsigned bg_calls, bg_left;

static bool stub_background(void *machine)
{
	(void)machine;
	bg_calls++;
	return bg_left && --bg_left > 0;
}

static void bg_handle(void *machine, uint16_t from,
		      enum lm_rel_msg_kind kind, uint32_t req_id,
		      const struct lm_msg *m)
{
	struct dp_stub *st = machine;

	dp_stub_handle(machine, from, kind, req_id, m);
	if (m->type == LM_MSG_FETCH && m->page == 3) {
		bg_left = 3;
		st->out.later(st->ctx);
	}
}

static const struct lm_daemon_protocol bg_proto = {
	.create = dp_stub_create,
	.destroy = dp_stub_destroy,
	.handle = bg_handle,
	.background = stub_background,
};

/* The background hook runs when the machine asked for it, again while
 * it says there is more, and not otherwise; messages are still served
 * in between. */
static void test_background_runs_when_asked(void)
{
	struct dp_pair hp;
	struct event_base *base;
	struct lm_msg fetch = { .type = LM_MSG_FETCH, .run = 7, .page = 4 };

	dp_pair_open(&hp, &bg_proto);
	base = hp.base;
	bg_calls = bg_left = 0;
	/* page 4: nothing put off, no call */
	dp_stubs[1].out.request(dp_stubs[1].ctx, 1, 1, &fetch);
	dp_spin_until(base, &dp_stubs[0].handled, 1);
	CU_ASSERT_EQUAL(dp_stubs[0].handled, 1);
	CU_ASSERT_EQUAL(bg_calls, 0);
	/* page 3: three calls, the last saying it is done */
	fetch.page = 3;
	dp_stubs[1].out.request(dp_stubs[1].ctx, 1, 2, &fetch);
	dp_spin_until(base, &bg_calls, 3);
	CU_ASSERT_EQUAL(dp_stubs[0].handled, 2);
	CU_ASSERT_EQUAL(bg_calls, 3);
	fetch.page = 4;
	dp_stubs[1].out.request(dp_stubs[1].ctx, 1, 3, &fetch);
	dp_spin_until(base, &dp_stubs[0].handled, 3);
	CU_ASSERT_EQUAL(dp_stubs[0].handled, 3);
	CU_ASSERT_EQUAL(bg_calls, 3);
	dp_pair_close(&hp);
}

LM_TEST_SUITE("daemon", LM_TEST(test_background_runs_when_asked))
