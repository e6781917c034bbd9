/* Handing one file descriptor (the memfd of a cluster's shared copy of
 * memory) from the lemuriad to one client process on the same host, and
 * to no other process; and one back on the same connection (the
 * client's userfaultfd, docs/dsm.md "Order").
 *
 * The client listens on an AF_UNIX abstract name of its own and tells
 * the daemon that name inside an authenticated message; the daemon
 * connects, checks that the listener is the client it expects (pid and
 * uid, SO_PEERCRED) and sends the descriptor with SCM_RIGHTS.  The client
 * in turn takes the descriptor only from the daemon's pid and our uid.
 * The daemon never blocks: it connects, never accepts. */
#ifndef LM_FDPASS_H
#define LM_FDPASS_H

#include <stddef.h>
#include <stdint.h>

/* Room for "lemuria-fd-<pid>-<32 hex digits>" and its NUL. */
#define LM_FDPASS_NAME_MAX 64

/* A client's listening socket.  `name` is the abstract socket name
 * without its leading NUL (a C string), what the daemon is told. */
struct lm_fdpass_listener {
	int fd; /* listening socket, -1 when closed */
	char name[LM_FDPASS_NAME_MAX];
};

/* Client side: binds a new listening socket to an unguessable abstract
 * name ("lemuria-fd-" <pid> "-" 16 random bytes in hex) and fills *l.
 * Returns 0, or LM_EIO with the cause in err.  After a failure l->fd is
 * -1, so lm_fdpass_close(l) is safe after any call. */
int lm_fdpass_listen(struct lm_fdpass_listener *l, char *err, size_t errlen);

/* Daemon side: connects to the abstract `name` (as lm_fdpass_listen made
 * it) without blocking, checks that the listening process has pid
 * `expect_pid` and our effective uid, and sends it a duplicate of `fd`.
 * The caller keeps `fd` in every case.  Returns 0; LM_EINVAL for a name
 * that is not one of ours, fd < 0 or expect_pid 0; LM_EAUTH when the
 * listener is another process or user (nothing is sent); LM_ENOBUFS when
 * the listener's backlog is full; LM_EIO when a call fails (nobody
 * listens, say).  The cause goes to err.  Never raises SIGPIPE. */
int lm_fdpass_send(const char *name, uint32_t expect_pid, int fd, char *err,
		   size_t errlen);

/* ... and keeps the connection open in *keep (non-blocking, the caller's
 * to close; -1 on failure), on which the client may send one descriptor
 * back (lm_fdpass_answer, lm_fdpass_take). */
int lm_fdpass_send_keep(const char *name, uint32_t expect_pid, int fd,
			int *keep, char *err, size_t errlen);

/* Daemon side: takes the one descriptor the client sent back on a kept
 * connection, without waiting.  0 with *fd_out; 1 when nothing came yet;
 * LM_EBADMSG (the client closed it, or sent other than one descriptor),
 * LM_EIO or LM_EINVAL with err filled. */
int lm_fdpass_take(int conn, int *fd_out, char *err, size_t errlen);

/* Client side: waits at most timeout_ms (>= 0) for a connection from
 * the process `expect_pid` (0: any pid) running as our effective uid and
 * takes the one descriptor it sends, close-on-exec, into *fd_out (the
 * caller's to close).  A connection from anyone else is closed unread and
 * the wait goes on.  Returns 0; LM_ETIMEDOUT when nothing came in time;
 * LM_EBADMSG when the expected peer sent no descriptor, more than one or
 * control data that did not fit (whatever it sent is closed); LM_EINVAL
 * for a closed listener or a negative timeout; LM_EIO when a call fails.
 * On failure *fd_out is -1 and err says why.  The listener stays open
 * either way. */
int lm_fdpass_receive(struct lm_fdpass_listener *l, uint32_t expect_pid,
		      int timeout_ms, int *fd_out, char *err, size_t errlen);

/* ... and keeps the accepted connection in *keep (the caller's to close;
 * -1 on failure). */
int lm_fdpass_receive_keep(struct lm_fdpass_listener *l, uint32_t expect_pid,
			   int timeout_ms, int *fd_out, int *keep, char *err,
			   size_t errlen);

/* Client side: sends `fd` back to the daemon on the kept connection.
 * 0, LM_EINVAL or LM_EIO with err filled. */
int lm_fdpass_answer(int conn, int fd, char *err, size_t errlen);

/* Closes the listening socket; a second call does nothing. */
void lm_fdpass_close(struct lm_fdpass_listener *l);

#endif
