/* reflector: the root-cluster daemon.  Thin main: the shell (common/daemon.c)
 * runs the transport and the event loop, reflector/dispatch.c the protocol. */
#include <stdio.h>

#include "daemon.h"
#include "home.h"
#include "home_stats.h"

static void *reflector_create(const struct lm_layout *layout,
			      const char *name, uint16_t self_id,
			      const struct lm_msg_out *out, void *out_ctx,
			      char *err, size_t errlen)
{
	lm_home *h = lm_home_create(layout, self_id, out, out_ctx);

	(void)name;
	if (!h)
		snprintf(err, errlen, "cannot create the home state");
	return h;
}

static void reflector_destroy(void *machine)
{
	lm_home_destroy(machine);
}

static void reflector_handle(void *machine, uint16_t from,
			     enum lm_rel_msg_kind kind, uint32_t req_id,
			     const struct lm_msg *m)
{
	lm_home_handle(machine, from, kind, req_id, m);
}

static void reflector_peer_lost(void *machine, uint16_t node,
				const char *why)
{
	lm_home_peer_lost(machine, node, why);
}

static void reflector_stats(void *machine, lm_stats_set *out)
{
	lm_home_stats_add(machine, out);
}

int main(int argc, char **argv)
{
	static const struct lm_daemon_protocol proto = {
		.create = reflector_create,
		.destroy = reflector_destroy,
		.handle = reflector_handle,
		.peer_lost = reflector_peer_lost,
		.stats = reflector_stats,
	};

	return lm_daemon_main(argc, argv, LM_ROLE_REFLECTOR, &proto);
}
