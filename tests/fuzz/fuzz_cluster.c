/* libFuzzer harness for the lemuriad's state machine (lemuriad/cluster.c)
 * as cluster c0 of conf/4+4.ini: any message sequence from any node, with
 * peers reported lost in between (driver and checks: fuzz_machine.c). */
#include <stddef.h>
#include <stdint.h>

#include "lemuriad.h"
#include "fuzz_machine.h"

static void *cluster_create(const struct lm_layout *l,
			    const struct lm_msg_out *out, void *ctx)
{
	return lm_lemuriad_create(l, FZ_CLUSTER_NAME, l->hash, out, ctx);
}

static void cluster_destroy(void *c)
{
	lm_lemuriad_destroy(c);
}

static void cluster_handle(void *c, uint16_t from, enum lm_rel_msg_kind kind,
			   uint32_t req_id, const struct lm_msg *m)
{
	lm_lemuriad_handle(c, from, kind, req_id, m);
}

static void cluster_peer_lost(void *c, uint16_t node)
{
	lm_lemuriad_peer_lost(c, node, NULL);
}

static bool cluster_background(void *c)
{
	return lm_lemuriad_background(c);
}

static void cluster_tick(void *c)
{
	lm_lemuriad_tick(c);
}

static const struct fz_machine cluster = {
	.role = FZ_ROLE_CLUSTER,
	.create = cluster_create,
	.destroy = cluster_destroy,
	.handle = cluster_handle,
	.peer_lost = cluster_peer_lost,
	.background = cluster_background,
	.tick = cluster_tick,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_machine_init(&cluster);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_machine_run(&cluster, data, size);
	return 0;
}
