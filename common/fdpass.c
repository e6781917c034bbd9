/* Descriptor hand-off from the lemuriad to a client (see fdpass.h).
 * Written here because no packaged library does an SCM_RIGHTS hand-off
 * with peer-credential checks on both ends; it is a few syscalls.
 *
 * Protocol: the client binds an AF_UNIX stream socket to the abstract
 * name "lemuria-fd-<pid>-<32 random hex digits>" and listens (backlog 1).
 * The daemon, told that name, connects without blocking (a connect to a
 * listening unix socket completes at once while the backlog has room),
 * checks SO_PEERCRED (pid and uid of the listener), sends one byte with
 * SCM_RIGHTS carrying the descriptor and closes.  The client accepts,
 * checks SO_PEERCRED of the connecting side (the daemon's pid, our uid)
 * and takes exactly one descriptor.
 *
 * Abstract names are listed in /proc/net/unix for every local user, so
 * the random part only keeps names from colliding or being bound in
 * advance; who gets the descriptor is decided by the credential checks. */
#include "fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lm_error.h"

#define LM_FDPASS_PREFIX       "lemuria-fd-"
#define LM_FDPASS_RANDOM_BYTES 16

/* The address of abstract `name`: a NUL, then the name without its
 * terminator (the length, not a NUL, ends an abstract name). */
static socklen_t abstract_addr(const char *name, struct sockaddr_un *sa)
{
	size_t n = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Only names lm_fdpass_listen could have made: the daemon connects where
 * a client tells it, and must not be pointed at some other service. */
static int name_is_ours(const char *name)
{
	size_t n = strnlen(name, LM_FDPASS_NAME_MAX);
	size_t p = sizeof(LM_FDPASS_PREFIX) - 1;

	if (n == LM_FDPASS_NAME_MAX || n <= p ||
	    strncmp(name, LM_FDPASS_PREFIX, p) != 0)
		return 0;
	for (size_t i = p; i < n; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		      (name[i] >= 'a' && name[i] <= 'f') || name[i] == '-'))
			return 0;
	return 1;
}

static int peer_cred(int fd, struct ucred *cred, char *err, size_t errlen)
{
	socklen_t len = sizeof(*cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0 ||
	    len != sizeof(*cred)) {
		snprintf(err, errlen,
			 "cannot read the peer's credentials "
			 "(SO_PEERCRED): %s",
			 strerror(errno));
		return LM_EIO;
	}
	return 0;
}

/* pid 0 in expect_pid: any pid. */
static int cred_matches(const struct ucred *cred, uint32_t expect_pid)
{
	return (expect_pid == 0 || (uint32_t)cred->pid == expect_pid) &&
	       cred->uid == geteuid();
}

int lm_fdpass_listen(struct lm_fdpass_listener *l, char *err, size_t errlen)
{
	unsigned char rnd[LM_FDPASS_RANDOM_BYTES];
	struct sockaddr_un sa;
	socklen_t salen;
	ssize_t n;
	int len, fd;

	l->fd = -1;
	l->name[0] = '\0';
	do
		n = getrandom(rnd, sizeof(rnd), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(rnd)) {
		snprintf(err, errlen, "getrandom for a socket name: %s",
			 n < 0 ? strerror(errno) : "short read");
		return LM_EIO;
	}
	len = snprintf(l->name, sizeof(l->name), LM_FDPASS_PREFIX "%ld-",
		       (long)getpid());
	for (size_t i = 0; i < sizeof(rnd); i++)
		len += snprintf(l->name + len, sizeof(l->name) - (size_t)len,
				"%02x", rnd[i]);
	/* Non-blocking too: accept never waits, poll does (with a bound). */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "unix socket: %s", strerror(errno));
		goto err;
	}
	salen = abstract_addr(l->name, &sa);
	if (bind(fd, (struct sockaddr *)&sa, salen) != 0) {
		snprintf(err, errlen, "cannot bind unix socket @%s: %s",
			 l->name, strerror(errno));
		goto err;
	}
	if (listen(fd, 1) != 0) {
		snprintf(err, errlen, "cannot listen on unix socket @%s: %s",
			 l->name, strerror(errno));
		goto err;
	}
	l->fd = fd;
	return 0;
err:
	if (fd >= 0)
		close(fd);
	l->name[0] = '\0';
	return LM_EIO;
}

/* Control data for one descriptor, aligned for its header. */
union fd_control {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

/* A message of the one byte *byte with room for one descriptor's
 * control data in *ctl (both zeroed). */
static void one_byte_msg(struct msghdr *msg, struct iovec *iov, char *byte,
			 union fd_control *ctl)
{
	memset(ctl, 0, sizeof(*ctl));
	memset(msg, 0, sizeof(*msg));
	iov->iov_base = byte;
	iov->iov_len = 1;
	msg->msg_iov = iov;
	msg->msg_iovlen = 1;
	msg->msg_control = ctl->buf;
	msg->msg_controllen = sizeof(ctl->buf);
}

/* Sends `fd` as the one message of the connected socket s: 0, or LM_EIO
 * with err filled (`to` names the peer). */
static int send_one(int s, int fd, const char *to, char *err, size_t errlen)
{
	union fd_control ctl;
	struct msghdr msg;
	struct cmsghdr *cm;
	struct iovec iov;
	char byte = 'F';
	ssize_t n;

	one_byte_msg(&msg, &iov, &byte, &ctl);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	do
		n = sendmsg(s, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n != 1) {
		snprintf(err, errlen, "cannot send the descriptor to %s: %s",
			 to, n < 0 ? strerror(errno) : "nothing sent");
		return LM_EIO;
	}
	return 0;
}

int lm_fdpass_send(const char *name, uint32_t expect_pid, int fd, char *err,
		   size_t errlen)
{
	return lm_fdpass_send_keep(name, expect_pid, fd, NULL, err, errlen);
}

int lm_fdpass_send_keep(const char *name, uint32_t expect_pid, int fd,
			int *keep, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	socklen_t salen;
	struct ucred cred;
	char to[LM_FDPASS_NAME_MAX + 48];
	int s, rc;

	if (keep)
		*keep = -1;

	if (!name || !name_is_ours(name)) {
		snprintf(err, errlen, "'%.*s' is not a lemuria-fd socket name",
			 LM_FDPASS_NAME_MAX, name ? name : "(null)");
		return LM_EINVAL;
	}
	if (fd < 0 || expect_pid == 0) {
		snprintf(err, errlen, "%s for @%s",
			 fd < 0 ? "no descriptor to send"
				: "no client pid to check the listener against",
			 name);
		return LM_EINVAL;
	}
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(err, errlen, "unix socket: %s", strerror(errno));
		return LM_EIO;
	}
	salen = abstract_addr(name, &sa);
	if (connect(s, (struct sockaddr *)&sa, salen) != 0) {
		if (errno == EAGAIN) {
			snprintf(err, errlen,
				 "client pid %lu is not accepting on @%s "
				 "(its backlog is full); descriptor not sent",
				 (unsigned long)expect_pid, name);
			rc = LM_ENOBUFS;
		} else {
			snprintf(err, errlen,
				 "cannot connect to client pid %lu at @%s: %s",
				 (unsigned long)expect_pid, name,
				 strerror(errno));
			rc = LM_EIO;
		}
		goto out;
	}
	rc = peer_cred(s, &cred, err, errlen);
	if (rc)
		goto out;
	if (!cred_matches(&cred, expect_pid)) {
		snprintf(err, errlen,
			 "@%s is held by pid %ld uid %lu, not the client "
			 "(pid %lu uid %lu); descriptor not sent",
			 name, (long)cred.pid, (unsigned long)cred.uid,
			 (unsigned long)expect_pid, (unsigned long)geteuid());
		rc = LM_EAUTH;
		goto out;
	}
	snprintf(to, sizeof(to), "client pid %lu at @%s",
		 (unsigned long)expect_pid, name);
	rc = send_one(s, fd, to, err, errlen);
	if (rc == 0 && keep) {
		*keep = s;
		return 0;
	}
out:
	close(s);
	return rc;
}

int lm_fdpass_answer(int conn, int fd, char *err, size_t errlen)
{
	if (conn < 0 || fd < 0) {
		snprintf(err, errlen, "%s", conn < 0 ? "no connection kept"
						     : "no descriptor to send");
		return LM_EINVAL;
	}
	return send_one(conn, fd, "the lemuriad", err, errlen);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until `fd` is readable or `deadline` (now_ms) passes: 1 readable,
 * 0 timed out, LM_EIO with err filled. */
static int wait_readable(int fd, long long deadline, const char *what,
			 char *err, size_t errlen)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (;;) {
		long long left = deadline - now_ms();
		int n;

		if (left < 0)
			left = 0;
		n = poll(&p, 1, (int)left);
		if (n > 0)
			return 1;
		if (n == 0)
			return 0;
		if (errno != EINTR) {
			snprintf(err, errlen, "poll on %s: %s", what,
				 strerror(errno));
			return LM_EIO;
		}
	}
}

/* Reads the one message of an accepted connection `c` from the expected
 * peer: 0 with *fd_out, LM_EBADMSG (anything received closed), LM_EIO,
 * or 1 when nothing came before the deadline. */
static int take_fd(int c, long long deadline, const char *peer, int *fd_out,
		   char *err, size_t errlen)
{
	union fd_control ctl;
	struct msghdr msg;
	struct cmsghdr *cm;
	struct iovec iov;
	int got[8], ngot = 0, more = 0;
	char byte;
	ssize_t n;

	for (;;) {
		int rc = wait_readable(c, deadline, "the accepted connection",
				       err, errlen);

		if (rc <= 0)
			return rc == 0 ? 1 : rc;
		one_byte_msg(&msg, &iov, &byte, &ctl);
		n = recvmsg(c, &msg, MSG_CMSG_CLOEXEC);
		if (n >= 0)
			break;
		if (errno != EINTR && errno != EAGAIN) {
			snprintf(err, errlen, "recvmsg from %s: %s", peer,
				 strerror(errno));
			return LM_EIO;
		}
	}
	/* Collect every descriptor that arrived, to close them all when the
	 * message is not exactly one. */
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(int));
			if (ngot < (int)(sizeof(got) / sizeof(got[0])))
				got[ngot++] = fd;
			else {
				close(fd);
				more++;
			}
		}
	}
	if (n > 0 && ngot == 1 && !more && !(msg.msg_flags & MSG_CTRUNC)) {
		*fd_out = got[0];
		return 0;
	}
	for (int i = 0; i < ngot; i++)
		close(got[i]);
	if (n == 0)
		snprintf(err, errlen,
			 "%s closed the connection without sending a file "
			 "descriptor",
			 peer);
	else if (msg.msg_flags & MSG_CTRUNC)
		snprintf(err, errlen,
			 "%s sent more control data than one file descriptor "
			 "(truncated); refused",
			 peer);
	else
		snprintf(err, errlen,
			 "%s sent %d file descriptors, not one; refused", peer,
			 ngot + more);
	return LM_EBADMSG;
}

int lm_fdpass_take(int conn, int *fd_out, char *err, size_t errlen)
{
	*fd_out = -1;
	if (conn < 0) {
		snprintf(err, errlen, "no connection kept");
		return LM_EINVAL;
	}
	return take_fd(conn, now_ms(), "the client", fd_out, err, errlen);
}

int lm_fdpass_receive(struct lm_fdpass_listener *l, uint32_t expect_pid,
		      int timeout_ms, int *fd_out, char *err, size_t errlen)
{
	return lm_fdpass_receive_keep(l, expect_pid, timeout_ms, fd_out, NULL,
				      err, errlen);
}

int lm_fdpass_receive_keep(struct lm_fdpass_listener *l, uint32_t expect_pid,
			   int timeout_ms, int *fd_out, int *keep, char *err,
			   size_t errlen)
{
	long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	char peer[64], refused[128] = "";
	int rc;

	*fd_out = -1;
	if (keep)
		*keep = -1;
	if (l->fd < 0 || timeout_ms < 0) {
		snprintf(err, errlen, "%s",
			 l->fd < 0 ? "fd-passing socket is closed"
				   : "negative timeout");
		return LM_EINVAL;
	}
	if (expect_pid)
		snprintf(peer, sizeof(peer), "the lemuriad (pid %lu)",
			 (unsigned long)expect_pid);
	else
		snprintf(peer, sizeof(peer), "the lemuriad");
	for (;;) {
		struct ucred cred;
		int c;

		rc = wait_readable(l->fd, deadline, "the fd-passing socket",
				   err, errlen);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
		c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == ECONNABORTED)
				continue;
			snprintf(err, errlen, "accept on @%s: %s", l->name,
				 strerror(errno));
			return LM_EIO;
		}
		rc = peer_cred(c, &cred, err, errlen);
		if (rc) {
			close(c);
			return rc;
		}
		if (!cred_matches(&cred, expect_pid)) {
			/* Anyone on the host can read the name from
			 * /proc/net/unix and connect: drop it unread and keep
			 * waiting for the lemuriad. */
			snprintf(refused, sizeof(refused),
				 " (refused a connection from pid %ld uid %lu; "
				 "expected uid %lu)",
				 (long)cred.pid, (unsigned long)cred.uid,
				 (unsigned long)geteuid());
			close(c);
			continue;
		}
		rc = take_fd(c, deadline, peer, fd_out, err, errlen);
		if (rc == 0 && keep)
			*keep = c;
		else
			close(c);
		if (rc <= 0)
			return rc;
		break; /* connected, but sent nothing in time */
	}
	snprintf(err, errlen, "no file descriptor from %s within %d ms%s", peer,
		 timeout_ms, refused);
	return LM_ETIMEDOUT;
}

void lm_fdpass_close(struct lm_fdpass_listener *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
