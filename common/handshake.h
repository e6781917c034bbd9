/* The layout check between daemons (handshake.c). */
#ifndef LM_HANDSHAKE_H
#define LM_HANDSHAKE_H

#include "daemon_state.h"

/* Messages to and from `node` are refused: it runs another layout. */
bool lm_daemon_refused(const lm_daemon *d, uint16_t node);
void lm_daemon_send_hash(lm_daemon *d, uint16_t peer);
/* Asks for run `run` to be aborted because of `peer` (once per run). */
void lm_daemon_mismatch_abort(lm_daemon *d, uint16_t peer, uint64_t run);
/* A PING from `peer` showed its layout hash. */
void lm_daemon_check_layout(lm_daemon *d, uint16_t peer, uint64_t hash);

#endif
