/* The shell shared by the reflector and lemuriad programs: options, layout,
 * transport endpoint, control requests (PING), signals and the event loop,
 * and what a service needs: detaching, a pidfile, a log file or syslog.
 *
 * A daemon finds its own section of the layout by name, binds the address
 * given there, declares the peers it may talk to and answers control tools.
 * The role-specific protocol plugs in through lm_daemon_set_handler. */
#ifndef LM_DAEMON_H
#define LM_DAEMON_H

#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "evnode.h"
#include "log.h"
#include "proto.h"
#include "stats.h"

typedef struct lm_daemon lm_daemon;

/* The strings point into argv. */
struct lm_daemon_opts {
	const char *layout;        /* -c FILE */
	const char *name;          /* -n NAME */
	enum lm_log_level level;   /* -l LEVEL (default info) */
	bool detach;               /* -d: run in the background */
	const char *pidfile;       /* -p FILE, or NULL */
	const char *log_file;      /* --log-file FILE, or NULL */
	bool syslog;               /* --syslog (implied by -d without
				    * --log-file) */
};

/* Parses argv for `prog`.  Returns 0 when the daemon should run, 1 when
 * help was printed to `out`, 2 on a usage error (message on `out`). */
int lm_daemon_parse_args(int argc, char **argv, const char *prog,
			 struct lm_daemon_opts *opts, FILE *out);

/* Log destinations of a daemon; they replace the default stderr sink of
 * log.h for the whole process.  Each line names `ident` (copied).
 *
 * Appends to `path` (created 0644), one timestamped line per message.
 * `path` is copied and should be absolute, since lm_daemon_log_reopen
 * opens it again after a detached daemon has changed to "/" (where its
 * stdout and stderr follow the file).  0 or LM_EIO with the reason in
 * err (the previous destination stays). */
int lm_daemon_log_to_file(const char *path, const char *ident, char *err,
			  size_t errlen);
/* Opens the file of lm_daemon_log_to_file again (after logrotate has
 * moved it away).  0; LM_EIO with the reason in err (logging goes on to
 * the old file); LM_ENOENT when not logging to a file. */
int lm_daemon_log_reopen(char *err, size_t errlen);
/* Sends messages to syslog(3), facility daemon, ident `prog` (copied),
 * each prefixed with `name` as on stderr. */
void lm_daemon_log_to_syslog(const char *prog, const char *name);
/* The syslog priority of a level. */
int lm_daemon_syslog_priority(enum lm_log_level level);
/* Closes the file or syslog and restores the stderr sink. */
void lm_daemon_log_close(void);

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

/* The protocol a daemon runs (lemuriad/cluster.c, reflector/dispatch.c): a
 * state machine fed with decoded DSM messages, emitting through `out`. */
struct lm_daemon_protocol {
	/* Returns the machine, or NULL with the reason in err. */
	void *(*create)(const struct lm_layout *layout, const char *name,
			uint16_t self_id, const struct lm_msg_out *out,
			void *out_ctx, char *err, size_t errlen);
	void (*destroy)(void *machine);
	void (*handle)(void *machine, uint16_t from,
		       enum lm_rel_msg_kind kind, uint32_t req_id,
		       const struct lm_msg *m);
	/* A peer is unreachable or restarted (optional). */
	void (*peer_lost)(void *machine, uint16_t node);
	/* Adds the protocol's own counters to a STATS reply (optional;
	 * reflector/home_stats.c, lemuriad/cluster_stats.c). */
	void (*stats)(void *machine, lm_stats_set *out);
	/* Does a bounded piece of work the machine put off (optional):
	 * called, once the machine asked for it through its out->later,
	 * after the messages of that wake-up were handled and their answers
	 * sent; again while it returns true, with the socket read in
	 * between. */
	bool (*background)(void *machine);
	/* The keepalive timer's tick, about once a second while a run is
	 * on (optional): for waits that no message ends. */
	void (*tick)(void *machine);
};

/* Creates the protocol machine and routes every DSM message to it. */
int lm_daemon_start_protocol(lm_daemon *d,
			     const struct lm_daemon_protocol *proto,
			     char *err, size_t errlen);

/* While a run is on, a daemon sends a one-way PING this often to each
 * daemon it depends on (a lemuriad's reflector; a reflector's peers and
 * its own lemuriads) when nothing else is in flight to it, so that a dead
 * one is found.  Each carries the layout hash, which a daemon also sends
 * before its first message to each session of a peer daemon: a peer with
 * another layout file is logged, counted and refused, and the runs that
 * need it are aborted (docs/protocol.md, "Layout check").  The same timer
 * ends the intervals of the rate-limited log lines (log.h). */
#define LM_DAEMON_KEEPALIVE_US 1000000u

/* How far a daemon's heap grows beyond each need (M_TOP_PAD); the pages
 * it gains are given at once (mem.h), so the pad is resident memory
 * (tests/run-memory.sh counts it). */
#define LM_DAEMON_HEAP_PAD (4u << 20)

/* A message the protocol emits while the transport's send queue to its
 * peer is full (a burst of large CREATEs, say) waits, with every later
 * one to that peer, in the daemon's backlog until the queue has room
 * (tried again every LM_DAEMON_BACKLOG_RETRY_US).  The backlog holds at
 * most LM_DAEMON_BACKLOG_BYTES in all (I5); a message that would go
 * beyond it, or that the transport refuses for good, is not sent, and
 * the run it belongs to is aborted, with a reason that names the
 * message, the peer and the cause, as though the peer had sent ABORT:
 * never dropped silently.  ABORTs themselves always wait. */
#define LM_DAEMON_BACKLOG_BYTES (64u << 20)
#define LM_DAEMON_BACKLOG_RETRY_US 1000u

/* Counters of the shell itself. */
struct lm_daemon_stats {
	uint64_t msgs_handled, msgs_undecodable, sends_failed;
	/* Messages that waited in the backlog, and its largest size. */
	uint64_t sends_backlogged, backlog_peak_bytes;
	/* Peer daemons found running a different layout (one per session
	 * of the peer), and messages to or from them refused. */
	uint64_t layout_mismatches, msgs_refused_layout;
};
const struct lm_daemon_stats *lm_daemon_stats(const lm_daemon *d);

/* Replaces the contents of `out` with what the daemon answers to STATS
 * (docs/operations.md, "Counters"): who it is, then per link level the
 * messages and bytes the protocol sent and received and the datagrams
 * the transport resent, then the shell's and the protocol's counters.
 * Control tools (node ids outside the layout) are not counted. */
void lm_daemon_collect_stats(lm_daemon *d, lm_stats_set *out);

/* The whole program: parse, load, create, detach when asked, run until
 * SIGTERM/SIGINT (SIGHUP reopens the log file), destroy.  `proto` may be
 * NULL (control requests only).  Returns the process exit status (2 for
 * usage and layout errors, 1 for run-time failures).  With -d the
 * calling process exits inside, once the daemon has reported that it
 * runs (0) or why it could not start (1, message on stderr). */
int lm_daemon_main(int argc, char **argv, enum lm_role role,
		   const struct lm_daemon_protocol *proto);

/* Transport settings of `level` from the layout for node `self_id`. */
void lm_daemon_rel_config(const struct lm_layout *layout, enum lm_level level,
			  uint16_t self_id, const lm_auth *auth,
			  struct lm_rel_config *cfg);

/* Transport settings for a control tool (lemuriactl, lemuria-run) at the
 * client level: a silent daemon is given up on quickly (4 retries, a first
 * timeout of 50 ms kept within the layout's rto_min..rto_max, which the
 * transport insists on), acks sent at once. */
void lm_daemon_tool_rel_config(const struct lm_layout *layout,
			       uint16_t self_id, const lm_auth *auth,
			       struct lm_rel_config *cfg);

#endif
