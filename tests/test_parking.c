/* The lemuriad state machine driven by hand (tests/lemuriad_util.h):
 * lemuriad/parking.c: registrations of our deltas (lazy, adaptive,
 * eager, spills), PULLs, and the messages parked behind them (I2). */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deltas.h"
#include "diff.h"
#include "diff_util.h"
#include "lemuriad_util.h"
#include "lm_error.h"
#include "log.h"
#include "proto.h"
#include "updates.h"

/* Lazy relay: the cluster's arrival goes right behind the registration
 * of its deltas (I2: R enters it first), which carries no data, and the
 * home pulls the delta later, exactly once. */
static void test_barrier_waits_for_registration_then_pull(void)
{
	lm_lemuriad *c = setup();
	const struct out *d;

	join_all(c, RUN);
	flush_page(c, 1, 9, 100, 8, 0x77);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 2); /* not waiting for the answer */
	CU_ASSERT_EQUAL(outs[0].how, REQUESTED);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].how, SENT);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[0].notices[0].page, 9);
	CU_ASSERT_EQUAL(outs[0].notices[0].base, LM_REG_NEW);
	CU_ASSERT_EQUAL(outs[0].notices[0].version, 0);
	CU_ASSERT_EQUAL(outs[0].notices[0].writer, 1);
	CU_ASSERT_EQUAL(outs[0].notices[0].wcluster, 0);
	CU_ASSERT_EQUAL(outs[0].m.diffs.len, 0);
	CU_ASSERT_EQUAL(answer_registers(c, true, 5), 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].how, SENT);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	d = pull(c, 9, 5);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 100, 0), 0x77);
	CU_ASSERT_EQUAL(delta_byte(d, 108, 0), 0);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_pulled, 1);
	d = pull(c, 9, 5);
	CU_ASSERT_EQUAL(d->m.status, LM_ENOENT);
	teardown(c);
}

/* A PULL of a delta the cluster no longer holds (it crossed the PUSH of
 * the same version, or was pulled before) is answered LM_ENOENT without
 * a warning: the home ignores the answer when the data reached it, and
 * logs the loss itself when not, so a line here only alarmed users of
 * runs that were fine. */
static void test_pull_of_delta_not_held_is_quiet(void)
{
	lm_lemuriad *c = setup();
	enum lm_log_level saved = lm_log_get_level();

	join_all(c, RUN);
	lm_log_set_level(LM_LOG_DEBUG);
	loud_lines = 0;
	lm_log_set_sink(count_loud, NULL);
	CU_ASSERT_EQUAL(pull(c, 9, 5)->m.status, LM_ENOENT);
	CU_ASSERT_EQUAL(pull(c, 9, 6)->m.status, LM_ENOENT);
	lm_log_set_sink(NULL, NULL);
	lm_log_set_level(saved);
	CU_ASSERT_EQUAL(loud_lines, 0);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_pull_missing, 2);
	teardown(c);
}

/* A second delta of a page whose first is still here: merged when the
 * home says nobody wrote between (version + 1), else the first is pushed
 * and the two stay apart (I1). */
static void test_next_delta_merged_or_older_pushed(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice none[1] = { NOTE(500, 1) };
	const struct out *d;

	join_all(c, RUN);
	flush_page(c, 1, 9, 0, 4, 0x11);
	barrier_release(c, 1, none, 1); /* registered at 40 */
	flush_page(c, 2, 9, 8, 4, 0x22);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].notices[0].version, 40); /* held: merge? */
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	answer_registers(c, true, 0);                    /* yes: 41 */
	release(c, 2);
	d = pull(c, 9, 41);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 0, 0), 0x11);
	CU_ASSERT_EQUAL(delta_byte(d, 8, 0), 0x22);

	/* again, but another cluster wrote the page in between */
	flush_page(c, 1, 9, 0, 4, 0x33);
	barrier_release(c, 3, none, 1); /* 40 again */
	flush_page(c, 3, 9, 8, 4, 0x44);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 4);
	answer_registers(c, false, 0); /* 42: not merged */
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_REGISTER); /* the push */
	CU_ASSERT_EQUAL_FATAL(outs[1].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[1].notices[0].base, LM_REG_PUSH);
	CU_ASSERT_EQUAL(outs[1].notices[0].version, 40);
	CU_ASSERT_EQUAL(outs[1].m.diffs.count, 1);
	d = pull(c, 9, 42);
	CU_ASSERT_EQUAL(d->m.status, 0);
	CU_ASSERT_EQUAL(delta_byte(d, 0, 0), 0);    /* not the pushed one */
	CU_ASSERT_EQUAL(delta_byte(d, 8, 0), 0x44);
	CU_ASSERT_EQUAL(pull(c, 9, 40)->m.status, LM_ENOENT);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_merged, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_pushed, 1);
	teardown(c);
}

/* The token's UNLOCK goes up right behind the registration of what was
 * written under the lock, not after its answer (R holds it until every
 * home entered its part); the client is answered at once.  The answer
 * changes nothing that was sent. */
static void test_unlock_right_behind_registration(void)
{
	lm_lemuriad *c = setup();

	unlock_recalled_lock(c);
	CU_ASSERT_EQUAL(outs[2].m.id, 3);
	CU_ASSERT_EQUAL(outs[2].m.rank, 1);
	clear_outs();
	answer_registers(c, true, 7);
	CU_ASSERT_EQUAL(nouts, 0);
	teardown(c);
}

/* Parked messages go in order, each right behind its own registration
 * when it may: an UNLOCK behind the first, then a BARRIER, whose
 * registration starts only once the first is answered, behind the
 * second. */
static void test_unlock_and_barrier_go_in_order(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice reg = { .page = 12, .version = 7, .base = 0,
				 .writer = 1, .wcluster = 0 };
	struct lm_msg m;
	uint32_t up;

	unlock_recalled_lock(c);
	up = outs[1].req_id;
	clear_outs();
	flush_page(c, 2, 13, 0, 4, 0x5b);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1);
	CU_ASSERT_EQUAL(nouts, 0); /* the next registration waits */
	m = msg(LM_MSG_REGISTER_OK, RUN);
	m.notices = &reg;
	m.nnotices = 1;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up, &m);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_REGISTER); /* page 13 */
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	teardown(c);
}

/* Deltas the homes refused are writes lost: the run cannot be right, so
 * it ends at once, at every client here and (through R) everywhere,
 * naming the cause, instead of a log line and a wrong answer. */
static void test_refused_deltas_abort_the_run(void)
{
	lm_lemuriad *c = setup();
	struct lm_notice v[4];
	struct lm_msg r = msg(LM_MSG_REGISTER_OK, RUN);
	struct out *up;
	int to_clients = 0;

	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x66);
	for (uint32_t k = 0; k < 4; k++)
		barrier(c, k, 1);
	up = find_out(REQUESTED, refl, LM_MSG_REGISTER);
	CU_ASSERT_PTR_NOT_NULL_FATAL(up);
	CU_ASSERT_FATAL(up->m.nnotices <= 4);
	memcpy(v, up->notices, up->m.nnotices * sizeof(*v));
	r.status = LM_EBADMSG;
	r.notices = v;
	r.nnotices = 0;
	lm_lemuriad_handle(c, refl, LM_REL_REPLY, up->req_id, &r);
	up = find_out(SENT, refl, LM_MSG_ABORT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(up);
	CU_ASSERT(up->m.data_len > 0 &&
		  memmem(up->m.data, up->m.data_len, "refused", 7) != NULL);
	for (size_t i = 0; i < nouts; i++)
		to_clients += outs[i].m.type == LM_MSG_ABORT &&
			      outs[i].node != refl;
	CU_ASSERT(to_clients >= 4); /* each waits in the barrier */
	teardown(c);
}

/* relay = eager: the deltas travel with the registration, merged per
 * page (two flushes of one page make one entry). */
static void test_eager_relay_sends_data(void)
{
	char text[1024];
	lm_lemuriad *c;
	const char *at = strstr(small_layout, "auth = off\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = eager\n%s",
		 (int)(at - small_layout), small_layout, at);
	c = setup_text(text);
	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x66);
	flush_page(c, 2, 5, 16, 4, 0x67);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
	CU_ASSERT_EQUAL(outs[0].notices[0].base, LM_REG_DATA);
	CU_ASSERT_EQUAL(outs[0].notices[0].writer, LM_WRITER_MANY);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.diffs.count, 1);
	CU_ASSERT_EQUAL(delta_byte(&outs[0], 0, 0), 0x66);
	CU_ASSERT_EQUAL(delta_byte(&outs[0], 16, 0), 0x67);
	answer_registers(c, true, 3);
	CU_ASSERT_EQUAL_FATAL(nouts, 1);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL(pull(c, 5, 3)->m.status, LM_ENOENT); /* it went */
	teardown(c);
}

/* relay = adaptive: lazy until a home pulls a page's delta; from then on
 * that page's deltas go with their data, the others stay lazy. */
static void test_adaptive_relay_sends_pulled_pages_data(void)
{
	char text[1024];
	lm_lemuriad *c;
	const char *at = strstr(small_layout, "auth = off\n");
	struct lm_notice none[1] = { NOTE(200, 1) };

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = adaptive\n%s",
		 (int)(at - small_layout), small_layout, at);
	/* room for the deltas: no spill may blur what is sent */
	CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(text, "cache = 12K"));
	memcpy(strstr(text, "cache = 12K"), "cache = 64K", 11);
	c = setup_text(text);
	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x11);
	flush_page(c, 1, 6, 0, 4, 0x12);
	barrier_release(c, 1, none, 1); /* both NEW (registered at 40) */
	CU_ASSERT_EQUAL(pull(c, 5, 40)->m.status, 0); /* 5 is shared */
	clear_outs();
	flush_page(c, 1, 5, 8, 4, 0x21);
	flush_page(c, 1, 6, 8, 4, 0x22);
	for (uint32_t r = 0; r < 4; r++)
		barrier(c, r, 2);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_BARRIER);
	CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 2);
	for (uint32_t i = 0; i < 2; i++) {
		const struct lm_notice *e = &outs[0].notices[i];

		if (e->page == 5) {
			CU_ASSERT_EQUAL(e->base, LM_REG_DATA);
		} else {
			CU_ASSERT(e->page == 6 && e->base == LM_REG_NEW &&
				  e->version == 40);
		}
	}
	CU_ASSERT_EQUAL(outs[0].m.diffs.count, 1);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_sent_shared, 1);
	teardown(c);
}

/* relay = adaptive: a pulled page sends its data with its next
 * LM_DELTAS_SHARED_SENDS registrations, then goes lazy again until a
 * home pulls it anew (another cluster that stopped reading it costs no
 * more bytes). */
static void test_adaptive_page_goes_lazy_again(void)
{
	char text[1024];
	lm_lemuriad *c;
	const char *at = strstr(small_layout, "auth = off\n");
	struct lm_notice none[1] = { NOTE(200, 1) };
	uint32_t id = 2;

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	snprintf(text, sizeof(text), "%.*srelay = adaptive\n%s",
		 (int)(at - small_layout), small_layout, at);
	memcpy(strstr(text, "cache = 12K"), "cache = 64K", 11);
	c = setup_text(text);
	join_all(c, RUN);
	flush_page(c, 1, 5, 0, 4, 0x11);
	barrier_release(c, 1, none, 1); /* NEW, registered at 40 */
	CU_ASSERT_EQUAL(pull(c, 5, 40)->m.status, 0);
	for (uint32_t e = 0; e <= LM_DELTAS_SHARED_SENDS + 1; e++, id++) {
		uint32_t want = e < LM_DELTAS_SHARED_SENDS ? LM_REG_DATA
							   : LM_REG_NEW;

		if (e == LM_DELTAS_SHARED_SENDS + 1) {
			/* pulled anew: its data goes with it again */
			CU_ASSERT_EQUAL(pull(c, 5, 60 + e - 1)->m.status, 0);
			want = LM_REG_DATA;
		}
		flush_page(c, 1, 5, 8, 4, (uint8_t)(0x20 + e));
		for (uint32_t r = 0; r < 4; r++)
			barrier(c, r, id);
		CU_ASSERT_EQUAL_FATAL(outs[0].m.type, LM_MSG_REGISTER);
		CU_ASSERT_EQUAL_FATAL(outs[0].m.nnotices, 1);
		CU_ASSERT_EQUAL(outs[0].notices[0].base, want);
		answer_registers(c, true, 60 + e);
		release(c, id);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_sent_shared,
			LM_DELTAS_SHARED_SENDS + 1);
	teardown(c);
}

/* Deltas share the cache size with the copies (I5): beyond it they go
 * home with their data, so the lemuriad's memory stays bounded. */
static void test_deltas_stay_within_cache(void)
{
	lm_lemuriad *c = setup_small(); /* a cache of three pages */

	join_all(c, RUN);
	flush_page(c, 1, 1, 0, 4, 1);
	flush_page(c, 1, 2, 0, 4, 2);
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->spills, 0);
	clear_outs();
	{
		static uint8_t list[256];
		struct lm_msg f = msg(LM_MSG_FLUSH, RUN);

		f.diffs.data = list;
		f.diffs.len = make_flush(list, sizeof(list), 3, 0, 4, 3);
		f.diffs.count = 1;
		creq(c, 1, 99, &f);
	}
	CU_ASSERT_EQUAL(lm_lemuriad_stats(c)->spills, 1);
	CU_ASSERT_EQUAL_FATAL(nouts, 2);
	CU_ASSERT_EQUAL(outs[0].m.type, LM_MSG_FLUSH_OK);
	CU_ASSERT_EQUAL(outs[1].m.type, LM_MSG_REGISTER);
	CU_ASSERT_EQUAL(outs[1].m.nnotices, 3);
	CU_ASSERT_EQUAL(outs[1].m.diffs.count, 3);
	CU_ASSERT_EQUAL(lm_lemuriad_delta_stats(c)->deltas_sent_data, 3);
	teardown(c);
}

LM_TEST_SUITE("parking",
	LM_TEST(test_refused_deltas_abort_the_run),
	LM_TEST(test_barrier_waits_for_registration_then_pull),
	LM_TEST(test_pull_of_delta_not_held_is_quiet),
	LM_TEST(test_next_delta_merged_or_older_pushed),
	LM_TEST(test_unlock_right_behind_registration),
	LM_TEST(test_unlock_and_barrier_go_in_order),
	LM_TEST(test_eager_relay_sends_data),
	LM_TEST(test_adaptive_relay_sends_pulled_pages_data),
	LM_TEST(test_adaptive_page_goes_lazy_again),
	LM_TEST(test_deltas_stay_within_cache))
