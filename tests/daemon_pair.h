/* Two daemons in this process, on one event loop, for the tests of the
 * daemon shell (daemon_pair.c): reflector r0 and lemuriad c0 of a layout
 * written to a private directory, each running a stub protocol that
 * records what it is given. */
#ifndef LM_TESTS_DAEMON_PAIR_H
#define LM_TESTS_DAEMON_PAIR_H

#include <event2/event.h>
#include <stdint.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "proto.h"

struct dp_stub {
	struct lm_msg_out out;
	void *ctx;
	unsigned handled, aborts;
	uint16_t last_type, last_from;
	char reason[LM_MSG_REASON_MAX + 1];
};

/* [0] reflector r0 (node 1), [1] lemuriad c0 */
extern struct dp_stub dp_stubs[2];

void *dp_stub_create(const struct lm_layout *layout, const char *name,
		     uint16_t self_id, const struct lm_msg_out *out,
		     void *out_ctx, char *err, size_t errlen);
void dp_stub_destroy(void *machine);
void dp_stub_handle(void *machine, uint16_t from, enum lm_rel_msg_kind kind,
		    uint32_t req_id, const struct lm_msg *m);
extern const struct lm_daemon_protocol dp_stub_proto;

/* A free UDP port on loopback, 0 when none. */
uint16_t dp_free_port(void);
/* Writes a one-reflector, two-cluster layout to `path`; c1 has
 * `c1_clients` clients. */
int dp_write_layout(const char *path, uint16_t pr, uint16_t pc,
		    int c1_clients);

/* Log lines captured by dp_log_sink (lm_log_set_sink). */
struct dp_log {
	char line[64][512];
	enum lm_log_level level[64];
	size_t n;
};
extern struct dp_log dp_log;
void dp_log_sink(void *ctx, enum lm_log_level level, const char *msg);
/* The error line that contains `s`, or NULL. */
const char *dp_log_error(const char *s);

/* Runs the loop until `*count` reaches `want` (at most 2 s). */
void dp_spin_until(struct event_base *base, const unsigned *count,
		   unsigned want);
/* Runs the loop until `*count` reaches `want`, at most `secs` seconds. */
void dp_loop_until(struct event_base *base, const unsigned *count,
		   unsigned want, int secs);

/* Reflector r0 of layout la with protocol pr, lemuriad c0 of lb with
 * dp_stub_proto, both on base. */
void dp_daemons(struct event_base *base, const struct lm_layout *la,
		const struct lm_layout *lb, const struct lm_daemon_protocol *pr,
		lm_daemon **r, lm_daemon **c);

/* A reflector running protocol `pr` and a stub lemuriad on one layout
 * in a directory of their own, for the tests of the daemon's hooks. */
struct dp_pair {
	char tdir[32], path[64];
	struct lm_layout *l;
	struct event_base *base;
	lm_daemon *r, *c;
};

void dp_pair_open(struct dp_pair *hp, const struct lm_daemon_protocol *pr);
void dp_pair_close(struct dp_pair *hp);

#endif
