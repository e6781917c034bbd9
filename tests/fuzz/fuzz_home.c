/* libFuzzer harness for the reflector's state machine (reflector/dispatch.c)
 * as r0 of conf/4+4.ini: any message sequence from any node, as any
 * transport kind (driver and checks: fuzz_machine.c). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_machine.h"
#include "home.h"

/* The home walks all 16384 pages of the layout when it is created, reset
 * and destroyed, and ASan records a stack for each of those free()s, which
 * halves the speed; a crash found this way is re-run with
 * ASAN_OPTIONS=malloc_context_size=30 for the full allocation stacks. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "malloc_context_size=0";
}

static void *home_create(const struct lm_layout *l,
			 const struct lm_msg_out *out, void *ctx)
{
	return lm_home_create(l, l->reflectors[0].id, out, ctx);
}

static void home_destroy(void *h)
{
	lm_home_destroy(h);
}

static void home_handle(void *h, uint16_t from, enum lm_rel_msg_kind kind,
			uint32_t req_id, const struct lm_msg *m)
{
	lm_home_handle(h, from, kind, req_id, m);
}

static const struct fz_machine home = {
	.role = FZ_ROLE_HOME,
	.create = home_create,
	.destroy = home_destroy,
	.handle = home_handle,
	.peer_lost = NULL,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_machine_init(&home);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_machine_run(&home, data, size);
	return 0;
}
