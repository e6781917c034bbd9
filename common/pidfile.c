/* Pidfiles (see pidfile.h): part of the daemon shell, no I/O beyond the
 * file itself.  A new pidfile is written under a temporary name and then
 * linked (or, over a stale one, renamed) into place, so a reader never
 * sees it half-written. */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lm_error.h"

/* Longer than any pid plus a newline: a bigger file is not a pidfile. */
#define LM_PIDFILE_MAX_BYTES 24

int lm_pidfile_read(const char *path, pid_t *pid)
{
	char buf[LM_PIDFILE_MAX_BYTES + 1], *end;
	ssize_t n;
	long v;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? LM_ENOENT : LM_EIO;
	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int saved = errno; /* for the caller's message */

		close(fd);
		errno = saved;
		return LM_EIO;
	}
	close(fd);
	/* Empty: a writer died before writing; nothing of value to keep. */
	if (n == 0) {
		*pid = 0;
		return 0;
	}
	if ((size_t)n > LM_PIDFILE_MAX_BYTES)
		return LM_EBADMSG;
	buf[n] = '\0';
	if (buf[0] < '0' || buf[0] > '9')
		return LM_EBADMSG;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || v <= 0 || v != (pid_t)v ||
	    (*end != '\0' && strcmp(end, "\n") != 0))
		return LM_EBADMSG;
	*pid = (pid_t)v;
	return 0;
}

/* EPERM means the process exists but belongs to someone else. */
static int pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

int lm_pidfile_check(const char *path, pid_t *owner, char *err,
		     size_t errlen)
{
	pid_t pid = 0;
	int rc = lm_pidfile_read(path, &pid);

	*owner = 0;
	if (rc == LM_ENOENT)
		return 0;
	if (rc == LM_EIO) {
		snprintf(err, errlen, "cannot read pidfile %s: %s", path,
			 strerror(errno));
		return LM_EIO;
	}
	if (rc == LM_EBADMSG) {
		snprintf(err, errlen,
			 "%s exists and does not hold a pid; not replacing it",
			 path);
		return LM_EINVAL;
	}
	if (pid == 0 || pid == getpid() || !pid_alive(pid))
		return 0;
	*owner = pid;
	snprintf(err, errlen,
		 "pidfile %s names running process %ld; is the daemon "
		 "already running?",
		 path, (long)pid);
	return LM_EINVAL;
}

/* Writes our pid to `tmp`; messages name the pidfile `path`. */
static int write_tmp(const char *path, const char *tmp, char *err,
		     size_t errlen)
{
	char line[32];
	int len = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0) {
		snprintf(err, errlen, "cannot write pidfile %s: %s", path,
			 strerror(errno));
		return LM_EIO;
	}
	do
		n = write(fd, line, (size_t)len);
	while (n < 0 && errno == EINTR);
	if (n != len) {
		snprintf(err, errlen, "cannot write pidfile %s: %s", path,
			 n < 0 ? strerror(errno) : "short write");
		close(fd);
		unlink(tmp);
		return LM_EIO;
	}
	if (close(fd) != 0) {
		snprintf(err, errlen, "cannot write pidfile %s: %s", path,
			 strerror(errno));
		unlink(tmp);
		return LM_EIO;
	}
	return 0;
}

int lm_pidfile_acquire(const char *path, pid_t *owner, char *err,
		       size_t errlen)
{
	char tmp[4096];
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid()) >=
	    (int)sizeof(tmp)) {
		snprintf(err, errlen, "pidfile name too long");
		return LM_EINVAL;
	}
	rc = lm_pidfile_check(path, owner, err, errlen);
	if (rc)
		return rc;
	unlink(tmp); /* a leftover of an earlier process with our pid */
	rc = write_tmp(path, tmp, err, errlen);
	if (rc)
		return rc;
	/* link() fails if someone created the file since the check; then
	 * look again rather than overwrite a live daemon's pidfile. */
	if (link(tmp, path) == 0) {
		unlink(tmp);
		return 0;
	}
	if (errno == EEXIST) {
		rc = lm_pidfile_check(path, owner, err, errlen);
		if (rc) {
			unlink(tmp);
			return rc;
		}
	}
	/* Stale, or a file system without hard links: replace in one step.
	 * Two daemons replacing the same stale file at the same instant
	 * could both succeed; their shared UDP port stops the second. */
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "cannot write pidfile %s: %s", path,
			 strerror(errno));
		unlink(tmp);
		return LM_EIO;
	}
	return 0;
}

int lm_pidfile_release(const char *path)
{
	pid_t pid = 0;
	int rc = lm_pidfile_read(path, &pid);

	if (rc == LM_ENOENT)
		return 0;
	if (rc == LM_EIO)
		return LM_EIO;
	if (rc || pid != getpid())
		return LM_EINVAL;
	if (unlink(path) != 0 && errno != ENOENT)
		return LM_EIO;
	return 0;
}
