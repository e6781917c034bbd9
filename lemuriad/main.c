/* lemuriad: the cluster daemon.  Thin main: the shell (common/daemon.c)
 * runs the transport and the event loop, lemuriad/lemuriad.c the protocol. */
#include <stdio.h>

#include "lemuriad.h"
#include "lemuriad_stats.h"
#include "daemon.h"

static void *lemuriad_create(const struct lm_layout *layout,
			     const char *name, uint16_t self_id,
			     const struct lm_msg_out *out, void *out_ctx,
			     char *err, size_t errlen)
{
	lm_lemuriad *c =
		lm_lemuriad_create(layout, name, layout->hash, out, out_ctx);

	(void)self_id;
	if (!c)
		snprintf(err, errlen, "cannot create the cluster state");
	return c;
}

static void lemuriad_destroy(void *machine)
{
	lm_lemuriad_destroy(machine);
}

static void lemuriad_handle(void *machine, uint16_t from,
			    enum lm_rel_msg_kind kind, uint32_t req_id,
			    const struct lm_msg *m)
{
	lm_lemuriad_handle(machine, from, kind, req_id, m);
}

static void lemuriad_peer_lost(void *machine, uint16_t node,
			       const char *why)
{
	lm_lemuriad_peer_lost(machine, node, why);
}

static void lemuriad_stats(void *machine, lm_stats_set *out)
{
	lm_lemuriad_stats_add(machine, out);
}

static bool lemuriad_background(void *machine)
{
	return lm_lemuriad_background(machine);
}

static void lemuriad_tick(void *machine)
{
	lm_lemuriad_tick(machine);
}

static uint64_t lemuriad_pulse(void *machine, uint64_t now_us)
{
	return lm_lemuriad_pulse(machine, now_us);
}

static int lemuriad_watch_fd(void *machine)
{
	return lm_lemuriad_wait_fd(machine);
}

static void lemuriad_readable(void *machine)
{
	lm_lemuriad_readable(machine);
}

int main(int argc, char **argv)
{
	static const struct lm_daemon_protocol proto = {
		.create = lemuriad_create,
		.destroy = lemuriad_destroy,
		.handle = lemuriad_handle,
		.peer_lost = lemuriad_peer_lost,
		.stats = lemuriad_stats,
		.background = lemuriad_background,
		.tick = lemuriad_tick,
		.pulse = lemuriad_pulse,
		.watch_fd = lemuriad_watch_fd,
		.readable = lemuriad_readable,
	};

	return lm_daemon_main(argc, argv, LM_ROLE_LEMURIAD, &proto);
}
