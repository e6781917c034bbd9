/* Two daemons in this process for the shell's tests (daemon_pair.h). */
#include "daemon_pair.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "udp.h"
#include "unit.h"

struct dp_stub dp_stubs[2];

void *dp_stub_create(const struct lm_layout *layout, const char *name,
		     uint16_t self_id, const struct lm_msg_out *out,
		     void *out_ctx, char *err, size_t errlen)
{
	struct dp_stub *st = &dp_stubs[self_id == 1 ? 0 : 1];

	(void)layout;
	(void)name;
	(void)err;
	(void)errlen;
	memset(st, 0, sizeof(*st));
	st->out = *out;
	st->ctx = out_ctx;
	return st;
}

void dp_stub_destroy(void *machine)
{
	(void)machine;
}

void dp_stub_handle(void *machine, uint16_t from,
		    enum lm_rel_msg_kind kind, uint32_t req_id,
		    const struct lm_msg *m)
{
	struct dp_stub *st = machine;

	(void)kind;
	(void)req_id;
	st->handled++;
	st->last_type = m->type;
	st->last_from = from;
	if (m->type == LM_MSG_ABORT) {
		st->aborts++;
		snprintf(st->reason, sizeof(st->reason), "%.*s",
			 (int)m->data_len, (const char *)m->data);
	}
}

const struct lm_daemon_protocol dp_stub_proto = {
	.create = dp_stub_create,
	.destroy = dp_stub_destroy,
	.handle = dp_stub_handle,
};

uint16_t dp_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char err[128];
	int fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = lm_udp_bind(&a, err, sizeof(err));
	if (fd < 0)
		return 0;
	close(fd);
	return ntohs(a.sin_port);
}

int dp_write_layout(const char *path, uint16_t pr, uint16_t pc,
		    int c1_clients)
{
	char key[PATH_MAX];
	FILE *f = fopen(path, "w");

	if (!f || !realpath("conf/demo.key", key)) {
		if (f)
			fclose(f);
		return -1;
	}
	fprintf(f,
		"[lemuria]\nshared_size = 1M\npage_size = 4096\n"
		"base = 0x500000000000\nsecret_file = %s\n"
		"[reflector r0]\nlisten = 127.0.0.1:%u\n"
		"[cluster c0]\nreflector = r0\nlisten = 127.0.0.1:%u\n"
		"clients = 2\ncache = 1M\n"
		"[cluster c1]\nreflector = r0\nlisten = 127.0.0.1:%u\n"
		"clients = %d\ncache = 1M\n",
		key, pr, pc, (unsigned)(pc + 1), c1_clients);
	return fclose(f) ? -1 : 0;
}

struct dp_log dp_log;

void dp_log_sink(void *ctx, enum lm_log_level level, const char *msg)
{
	(void)ctx;
	if (dp_log.n < 64) {
		snprintf(dp_log.line[dp_log.n], sizeof(dp_log.line[0]), "%s",
			 msg);
		dp_log.level[dp_log.n] = level;
		dp_log.n++;
	}
}

const char *dp_log_error(const char *s)
{
	for (size_t i = 0; i < dp_log.n; i++)
		if (dp_log.level[i] == LM_LOG_ERROR &&
		    strstr(dp_log.line[i], s))
			return dp_log.line[i];
	return NULL;
}

void dp_spin_until(struct event_base *base, const unsigned *count,
		   unsigned want)
{
	for (int i = 0; i < 400 && *count < want; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(5000);
	}
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Reflector r0 of layout la with protocol pr, lemuriad c0 of lb with
 * dp_stub_proto, both on base. */
void dp_daemons(struct event_base *base, const struct lm_layout *la,
		const struct lm_layout *lb,
		const struct lm_daemon_protocol *pr, lm_daemon **r,
		lm_daemon **c)
{
	char err[256];

	*r = lm_daemon_create(base, la, LM_ROLE_REFLECTOR, "r0", err,
			      sizeof(err));
	*c = lm_daemon_create(base, lb, LM_ROLE_LEMURIAD, "c0", err,
			      sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(*r);
	CU_ASSERT_PTR_NOT_NULL_FATAL(*c);
	CU_ASSERT_FATAL(lm_daemon_start_protocol(*r, pr, err,
						 sizeof(err)) == 0 &&
			lm_daemon_start_protocol(*c, &dp_stub_proto, err,
						 sizeof(err)) == 0);
}

/* Reflector from layout A; lemuriad c0 from layout B (A, or A with c1
 * one client smaller).  c0 sends r0 a FETCH of run 7, twice. */

void dp_pair_open(struct dp_pair *hp,
		  const struct lm_daemon_protocol *pr)
{
	uint16_t preflector = dp_free_port(), pcluster = dp_free_port();
	char err[256];

	memset(hp, 0, sizeof(*hp));
	snprintf(hp->tdir, sizeof(hp->tdir), "/tmp/lm-hooks-XXXXXX");
	hp->base = event_base_new();
	CU_ASSERT_FATAL(preflector && pcluster && pcluster + 1 != preflector &&
			hp->base && mkdtemp(hp->tdir));
	snprintf(hp->path, sizeof(hp->path), "%s/a.ini", hp->tdir);
	CU_ASSERT_FATAL(dp_write_layout(hp->path, preflector, pcluster, 2) == 0);
	CU_ASSERT_FATAL(lm_layout_load(hp->path, &hp->l, err,
				       sizeof(err)) == 0);
	dp_daemons(hp->base, hp->l, hp->l, pr, &hp->r, &hp->c);
}

void dp_pair_close(struct dp_pair *hp)
{
	lm_daemon_destroy(hp->c);
	lm_daemon_destroy(hp->r);
	event_base_free(hp->base);
	lm_layout_free(hp->l);
	unlink(hp->path);
	rmdir(hp->tdir);
}

void dp_loop_until(struct event_base *base, const unsigned *count,
		   unsigned want, int secs)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		event_base_loop(base, EVLOOP_ONCE);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (*count < want && t.tv_sec - t0.tv_sec < secs);
}
