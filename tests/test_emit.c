/* Emission (common/emit.c): messages the transport has no room for wait
 * in the backlog, in order; beyond its bound the run is aborted. */
#include <stdlib.h>
#include <string.h>

#include "daemon_pair.h"
#include "log.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Backlog: messages the transport has no room for wait, in order. */

#define BL_MAX 128
static struct {
	unsigned n;                /* CREATEs and ENDs r0 handled */
	uint32_t rank[BL_MAX];     /* in the order they came */
	int intact[BL_MAX];
} bl;

static void bl_handle(void *machine, uint16_t from,
		      enum lm_rel_msg_kind kind, uint32_t req_id,
		      const struct lm_msg *m)
{
	dp_stub_handle(machine, from, kind, req_id, m);
	if ((m->type != LM_MSG_CREATE && m->type != LM_MSG_END) ||
	    bl.n >= BL_MAX)
		return;
	bl.rank[bl.n] = m->rank;
	bl.intact[bl.n] = m->type == LM_MSG_END ||
			  (m->data_len && m->data[0] == (uint8_t)m->rank &&
			   m->data[m->data_len - 1] == (uint8_t)(m->rank + 1));
	bl.n++;
}

static const struct lm_daemon_protocol bl_proto = {
	.create = dp_stub_create,
	.destroy = dp_stub_destroy,
	.handle = bl_handle,
};

/* c0 sends r0 a CREATE of `len` bytes for rank `rank`, run 7. */
static void bl_send_create(uint8_t *buf, size_t len, uint32_t rank)
{
	struct lm_msg m = { .type = LM_MSG_CREATE, .run = 7, .rank = rank,
			    .offset = 64, .data = buf, .data_len = len };

	buf[0] = (uint8_t)rank;
	buf[len - 1] = (uint8_t)(rank + 1);
	dp_stubs[1].out.send(dp_stubs[1].ctx, 1, &m);
}

/* Six CREATEs of 7 MiB in a row, more than the 32 MiB send queue takes,
 * then an END: the last two CREATEs wait in c0's backlog, the END behind
 * them, and r0 gets all seven whole and in order (issue 38: the fifth
 * and sixth were dropped with a log line). */
static void test_backlog_keeps_order_when_queue_full(void)
{
	const size_t len = 7u << 20;
	struct lm_msg end = { .type = LM_MSG_END, .run = 7, .rank = 6 };
	struct dp_pair hp;
	uint8_t *buf = calloc(1, len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	memset(&bl, 0, sizeof(bl));
	dp_pair_open(&hp, &bl_proto);
	for (uint32_t r = 0; r < 6; r++)
		bl_send_create(buf, len, r);
	dp_stubs[1].out.send(dp_stubs[1].ctx, 1, &end);
	CU_ASSERT(lm_daemon_stats(hp.c)->sends_backlogged >= 2);
	CU_ASSERT(lm_daemon_stats(hp.c)->backlog_peak_bytes >= len);
	dp_loop_until(hp.base, &bl.n, 7, 30);
	CU_ASSERT_EQUAL(bl.n, 7);
	for (unsigned i = 0; i < bl.n; i++) {
		CU_ASSERT_EQUAL(bl.rank[i], i);
		CU_ASSERT(bl.intact[i]);
	}
	CU_ASSERT_EQUAL(lm_daemon_stats(hp.c)->sends_failed, 0);
	CU_ASSERT_EQUAL(dp_stubs[1].aborts, 0);
	dp_pair_close(&hp);
	free(buf);
}

/* Beyond the backlog's bound a message is not sent and its run is
 * aborted at the sender, naming the message, the peer and the cause. */
static void test_backlog_bound_aborts_the_run(void)
{
	const size_t len = 1u << 20;
	const unsigned total = (32u + LM_DAEMON_BACKLOG_BYTES / len) + 4;
	enum lm_log_level saved = lm_log_get_level();
	struct dp_pair hp;
	uint8_t *buf = calloc(1, len);
	uint64_t failed;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	memset(&bl, 0, sizeof(bl));
	memset(&dp_log, 0, sizeof(dp_log));
	lm_log_set_level(LM_LOG_WARN);
	lm_log_set_sink(dp_log_sink, NULL);
	lm_log_limit_reset();
	dp_pair_open(&hp, &bl_proto);
	for (uint32_t r = 0; r < total; r++)
		bl_send_create(buf, len, r);
	failed = lm_daemon_stats(hp.c)->sends_failed;
	CU_ASSERT(failed >= 1 && failed < total);
	CU_ASSERT(lm_daemon_stats(hp.c)->backlog_peak_bytes <=
		  LM_DAEMON_BACKLOG_BYTES);
	dp_loop_until(hp.base, &dp_stubs[1].aborts, 1, 5);
	CU_ASSERT_EQUAL(dp_stubs[1].aborts, 1);
	CU_ASSERT_EQUAL(dp_stubs[1].last_from, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(dp_stubs[1].reason,
				      "lemuriad c0: CREATE to reflector r0 "
				      "(node 1) not sent: its send queue is "
				      "full"));
	CU_ASSERT_PTR_NOT_NULL(dp_log_error("CREATE to reflector r0 (node 1) "
					"not sent"));
	dp_pair_close(&hp);
	lm_log_set_sink(NULL, NULL);
	lm_log_limit_reset();
	lm_log_set_level(saved);
	free(buf);
}

LM_TEST_SUITE("emit", LM_TEST(test_backlog_keeps_order_when_queue_full),
	      LM_TEST(test_backlog_bound_aborts_the_run))
