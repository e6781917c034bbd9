/* What a daemon's protocol (lemuriad/lemuriad.c, reflector/dispatch.c)
 * and the daemon shell (daemon.h) agree on: the hooks the protocol gives, the
 * shell's limits that the protocols and the documentation count on, and
 * the shell's own counters.  Below every file of the shell. */
#ifndef LM_DAEMON_PROTOCOL_H
#define LM_DAEMON_PROTOCOL_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "proto.h"
#include "reliable.h"
#include "stats.h"

typedef struct lm_daemon lm_daemon;

/* The protocol a daemon runs (lemuriad/lemuriad.c, reflector/dispatch.c): a
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
	/* A peer is unreachable or restarted (optional); `why`, when not
	 * NULL, says what the transport saw of it (lm_evnode_peer_trouble). */
	void (*peer_lost)(void *machine, uint16_t node, const char *why);
	/* Adds the protocol's own counters to a STATS reply (optional;
	 * reflector/home_stats.c, lemuriad/lemuriad_stats.c). */
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
	/* The clock (optional), for what must happen within a bound that
	 * no message starts (docs/dsm.md "Eventual visibility"): does what
	 * is due at now_us and returns the clock time at which it must run
	 * again, 0 for never.  The shell calls it after every message the
	 * machine handled and at that time, so a machine that keeps pushing
	 * its time on (a seal at each of LU's barriers) is never woken. */
	uint64_t (*pulse)(void *machine, uint64_t now_us);
	/* A descriptor of the machine's own (optional; -1 for none), asked
	 * for once after create and watched for reading until destroy:
	 * `readable` runs whenever it is.  For kernel events that no
	 * message brings (lemuriad/copy.c: a client's fault whose wake the
	 * kernel lost). */
	int (*watch_fd)(void *machine);
	void (*readable)(void *machine);
};

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

#endif
