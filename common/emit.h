/* Emission of the protocol's messages, and the backlog (emit.c). */
#ifndef LM_EMIT_H
#define LM_EMIT_H

#include <event2/event.h>

#include "daemon_state.h"

/* Retries the backlog (the held_ev timer's callback). */
void lm_daemon_backlog_retry(evutil_socket_t fd, short what, void *arg);
/* The transport dropped what it had for `node`: what waits goes too. */
void lm_daemon_backlog_drop(lm_daemon *d, uint16_t node);
/* Frees the whole backlog (at destruction). */
void lm_daemon_backlog_free(lm_daemon *d);
/* The protocol's emission callbacks (struct lm_msg_out); ctx is d. */
void lm_daemon_out_send(void *ctx, uint16_t node, const struct lm_msg *m);
void lm_daemon_out_request(void *ctx, uint16_t node, uint32_t req_id,
			   const struct lm_msg *m);
void lm_daemon_out_reply(void *ctx, uint16_t node, uint32_t req_id,
			 const struct lm_msg *m);

#endif
