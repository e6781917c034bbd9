/* Keepalives (common/keepalive.c): the protocol's tick runs about once a
 * second, and only while a run is on. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_pair.h"
#include "unit.h"

/* A machine that counts the ticks of the daemon's clock. */
static unsigned tick_calls;

static void stub_tick(void *machine)
{
	(void)machine;
	tick_calls++;
}

static const struct lm_daemon_protocol tick_proto = {
	.create = dp_stub_create,
	.destroy = dp_stub_destroy,
	.handle = dp_stub_handle,
	.tick = stub_tick,
};

/* Runs base's loop for `ms` milliseconds of the clock. */
static void spin_for(struct event_base *base, long ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(5000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 +
		 (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* The tick hook runs about once a second (the keepalive timer), and only
 * while a run is on: before any message of a run, nobody can wait. */
static void test_tick_runs_while_a_run_is_on(void)
{
	struct dp_pair hp;
	struct event_base *base;
	struct lm_msg fetch = { .type = LM_MSG_FETCH, .run = 7, .page = 4 };

	dp_pair_open(&hp, &tick_proto);
	base = hp.base;
	tick_calls = 0;
	/* 1.2 s without a run: the timer fires, the hook does not run */
	for (int i = 0; i < 240; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(5000);
	}
	CU_ASSERT_EQUAL(tick_calls, 0);
	dp_stubs[1].out.request(dp_stubs[1].ctx, 1, 1, &fetch);
	dp_spin_until(base, &dp_stubs[0].handled, 1);
	CU_ASSERT_EQUAL_FATAL(dp_stubs[0].handled, 1);
	dp_spin_until(base, &tick_calls, 1); /* at most 2 s: a tick is due */
	CU_ASSERT(tick_calls >= 1);
	/* 2 s more by the clock (a count of loops stretches on a loaded
	 * host): one or two ticks, not a stream of them */
	spin_for(base, 2000);
	CU_ASSERT(tick_calls >= 2 && tick_calls <= 4);
	dp_pair_close(&hp);
}

LM_TEST_SUITE("keepalive", LM_TEST(test_tick_runs_while_a_run_is_on))
