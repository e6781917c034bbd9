/* The driver shared by the state machine harnesses (fuzz_home.c,
 * fuzz_cluster.c): it loads the layout, decodes the input's records into
 * messages and hands each to the machine, and checks what comes out. */
#ifndef LM_FUZZ_MACHINE_H
#define LM_FUZZ_MACHINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuzz_input.h"
#include "proto.h"
#include "reliable.h"

struct fz_machine {
	enum fz_role role;
	/* Creates the machine on the layout with fz_out; NULL is fatal. */
	void *(*create)(const struct lm_layout *l, const struct lm_msg_out *out,
			void *ctx);
	void (*destroy)(void *machine);
	void (*handle)(void *machine, uint16_t from, enum lm_rel_msg_kind kind,
		       uint32_t req_id, const struct lm_msg *m);
	/* NULL when the machine has no such entry point. */
	void (*peer_lost)(void *machine, uint16_t node);
	/* The work the machine puts off through out->later (NULL: none):
	 * one call after each input record while asked for, as the daemon
	 * makes between reads of its socket, the rest after the input. */
	bool (*background)(void *machine);
	/* The daemon's clock (NULL: none), fed by FZ_TICK records. */
	void (*tick)(void *machine);
};

/* Loads the layout (LM_FUZZ_LAYOUT or FZ_LAYOUT_DEFAULT) once and mutes
 * the log; aborts with a message when the layout cannot be loaded. */
void fz_machine_init(const struct fz_machine *fm);

/* Runs one input against a fresh machine, then destroys it. */
void fz_machine_run(const struct fz_machine *fm, const uint8_t *data,
		    size_t size);

#endif
