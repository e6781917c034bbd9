/* The daemon object's state (daemon_state.c), shared by the files of the
 * daemon shell (daemon.h lists them) and by nobody else, and what each of
 * them asks of it: node names, the clients attached to the run, the run,
 * the link counters and the scratch buffer.  The bottom of the shell. */
#ifndef LM_DAEMON_STATE_H
#define LM_DAEMON_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon_protocol.h"
#include "evnode.h"

/* Per link level: what the protocol path moved, in whole messages. */
enum lm_daemon_link_counter {
	LM_DAEMON_MSGS_SENT,
	LM_DAEMON_MSGS_RECEIVED,
	LM_DAEMON_BYTES_SENT,
	LM_DAEMON_BYTES_RECEIVED,
	LM_DAEMON_LINK_COUNTER_COUNT
};

/* What a daemon knows of a peer daemon's layout (see "Layout check"). */
enum lm_daemon_layout_state {
	LM_DAEMON_LAYOUT_UNKNOWN,   /* no hash from this session of it yet */
	LM_DAEMON_LAYOUT_SAME,      /* its hash is ours */
	LM_DAEMON_LAYOUT_DIFFERENT, /* its messages are refused */
	LM_DAEMON_LAYOUT_STATE_COUNT
};

/* A message waiting for room in its peer's send queue (the backlog,
 * daemon.h), encoded. */
struct lm_daemon_held {
	struct lm_daemon_held *next;
	uint16_t node;
	uint16_t type;
	enum lm_rel_msg_kind kind;
	uint32_t req_id;
	uint64_t run;
	size_t len;
	uint8_t data[];
};

struct lm_daemon_peer {
	bool hash_sent;       /* ours went to this session of it */
	enum lm_daemon_layout_state layout;
	uint64_t hash;        /* its hash, once known */
	uint64_t sent_run;    /* run of our last message to it */
	uint64_t aborted_run; /* newest run aborted because of it */
	uint64_t abort_pending; /* run to abort from abort_ev */
};

struct lm_daemon {
	const struct lm_layout *layout;
	const struct lm_daemon_protocol *proto;
	void *machine;
	struct lm_msg_out out;
	uint8_t *scratch;         /* encoding buffer, grown on demand */
	size_t scratch_cap;
	struct lm_notice *notices; /* decoding buffer: one per page */
	size_t notice_cap;
	struct lm_daemon_stats stats;
	uint64_t link[LM_LEVEL_COUNT][LM_DAEMON_LINK_COUNTER_COUNT];
	uint64_t run;             /* newest run id seen in a DSM message */
	/* Clients of the run that were let in (JOIN_OK 0) and have not left
	 * or been lost: one byte per rank (lemuriad only). */
	uint8_t *attached;
	uint32_t nattached;
	lm_stats_set *reply_set;  /* built for each STATS request */
	enum lm_role role;
	char name[LM_NAME_MAX];
	uint16_t id;
	struct sockaddr_in addr;
	uint64_t started_us;
	lm_auth *auth;
	lm_evnode *node;
	struct event *keepalive_ev;
	uint64_t keepalives;      /* keepalive PINGs sent */
	/* Daemons are nodes 1 .. ndaemons; indexed by node id. */
	struct lm_daemon_peer *peers;
	size_t ndaemons;
	struct event *abort_ev;   /* runs lm_daemon_on_abort_ev */
	/* The backlog, oldest first, and per node id (up to the last
	 * client's) how many of its messages are in it. */
	struct lm_daemon_held *held, *held_tail;
	size_t held_bytes;
	uint32_t *held_of;
	size_t held_nodes;        /* entries of held_of */
	size_t held_peers;        /* nodes with messages in the backlog */
	struct event *held_ev;    /* retries the backlog */
	/* A message that could not be sent aborts its run (daemon.h): the
	 * run, the node it was for and why, for abort_ev. */
	uint64_t lost_run, lost_aborted_run;
	uint16_t lost_node;
	char lost_reason[LM_MSG_REASON_MAX];
	struct event *background_ev; /* runs proto->background */
	bool background_armed;
	struct event *watch_ev;   /* runs proto->readable (NULL: none) */
	struct event *pulse_ev;   /* runs proto->pulse ... */
	uint64_t pulse_at;        /* ... at this clock time (0: not armed) */
};

/* Counts one message of `len` bytes to or from `peer` (`sent` or not);
 * control tools are not counted. */
void lm_daemon_count(lm_daemon *d, uint16_t peer, bool sent, size_t len);
/* The rank of client node `node`, or -1 when it is not a client. */
int64_t lm_daemon_client_rank(const lm_daemon *d, uint16_t node);
void lm_daemon_attach(lm_daemon *d, uint16_t node, bool on);
/* A newer run makes the daemon forget the previous one (docs/dsm.md),
 * and with it who was attached. */
void lm_daemon_see_run(lm_daemon *d, uint64_t run);
/* `node` is one of the daemons this one exchanges messages with. */
bool lm_daemon_is_peer_daemon(const lm_daemon *d, uint16_t node);
/* Where the layout puts daemon `node`. */
const struct sockaddr_in *lm_daemon_peer_addr(const lm_daemon *d,
					      uint16_t node);
/* "reflector r0 (node 1)", "lemuriad c1 (node 3)", "node 9". */
const char *lm_daemon_node_name(const lm_daemon *d, uint16_t node, char *buf,
				size_t len);
/* Grows the scratch buffer to `need` bytes; NULL when out of memory. */
uint8_t *lm_daemon_scratch(lm_daemon *d, size_t need);

#endif
