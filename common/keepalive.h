/* Keepalive and start-up PINGs (keepalive.c). */
#ifndef LM_KEEPALIVE_H
#define LM_KEEPALIVE_H

#include <event2/event.h>

#include "daemon_state.h"

/* The keepalive timer's callback (every LM_DAEMON_KEEPALIVE_US). */
void lm_daemon_keepalive(evutil_socket_t fd, short what, void *arg);
/* The PING that starts this daemon's session with each peer daemon. */
void lm_daemon_announce(lm_daemon *d);

#endif
