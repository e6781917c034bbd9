/* The shell shared by the reflector and lemuriad programs: layout,
 * transport endpoint, control requests (PING, STATS), the layout check,
 * keepalives, emission with its backlog, signals and the event loop, and
 * what a service needs: detaching, a pidfile, a log file or syslog.
 *
 * A daemon finds its own section of the layout by name, binds the address
 * given there, declares the peers it may talk to and answers control tools.
 * The role-specific protocol plugs in through lm_daemon_start_protocol.
 *
 * Files, each calling only those below it: daemon_main.c (the program);
 * daemon.c (the object, receiving); emit.c; handshake.c, keepalive.c and
 * control.c; daemon_state.c (the object's state, daemon_state.h).  The
 * protocol's hooks, the limits and the counters are daemon_protocol.h.
 * Beside them daemon_opts.c, detach.c, logsink.c and link_config.c know
 * nothing of the object. */
#ifndef LM_DAEMON_H
#define LM_DAEMON_H

#include <event2/event.h>
#include <stdbool.h>

#include "config.h"
#include "evnode.h"
#include "log.h"
#include "proto.h"
#include "daemon_protocol.h"
#include "stats.h"

/* Creates the daemon of `role` named `name` in `layout` (borrowed; must
 * outlive the daemon).  NULL with the reason in err. */
lm_daemon *lm_daemon_create(struct event_base *base,
			    const struct lm_layout *layout, enum lm_role role,
			    const char *name, char *err, size_t errlen);
/* Accepts NULL. */
void lm_daemon_destroy(lm_daemon *d);

/* The endpoint, for the role's protocol code. */
lm_evnode *lm_daemon_node(lm_daemon *d);
/* The bound address (useful when the layout says port 0 in tests). */
const struct sockaddr_in *lm_daemon_addr(const lm_daemon *d);

/* Creates the protocol machine and routes every DSM message to it. */
int lm_daemon_start_protocol(lm_daemon *d,
			     const struct lm_daemon_protocol *proto,
			     char *err, size_t errlen);

const struct lm_daemon_stats *lm_daemon_stats(const lm_daemon *d);

/* The whole program: parse, load, create, detach when asked, run until
 * SIGTERM/SIGINT (SIGHUP reopens the log file), destroy.  `proto` may be
 * NULL (control requests only).  Returns the process exit status (2 for
 * usage and layout errors, 1 for run-time failures).  With -d the
 * calling process exits inside, once the daemon has reported that it
 * runs (0) or why it could not start (1, message on stderr). */
int lm_daemon_main(int argc, char **argv, enum lm_role role,
		   const struct lm_daemon_protocol *proto);

#endif
