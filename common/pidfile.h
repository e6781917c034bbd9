/* Pidfiles for the daemons: one decimal pid and a newline.
 *
 * A pidfile is refused while it names a live process, replaced when the
 * process it names is gone (stale), and never replaced when its content
 * is not a pid (a mistyped -p must not clobber some other file).  The
 * real guard against two copies of one daemon is the UDP port they bind;
 * the pidfile is for init scripts and people. */
#ifndef LM_PIDFILE_H
#define LM_PIDFILE_H

#include <stddef.h>
#include <sys/types.h>

/* Reads the pid recorded in `path`.  Returns 0 with *pid set, LM_ENOENT
 * when there is no such file, LM_EBADMSG when the content is not a pid,
 * LM_EIO when the file cannot be read. */
int lm_pidfile_read(const char *path, pid_t *pid);

/* Whether `path` may be taken by the calling process: 0 when it is
 * absent, stale or already names the caller; LM_EINVAL when it names a
 * live process (its pid in *owner, else *owner is 0) or is not a pidfile;
 * LM_EIO when it cannot be read.  The reason goes to err. */
int lm_pidfile_check(const char *path, pid_t *owner, char *err,
		     size_t errlen);

/* Writes getpid() to `path` after lm_pidfile_check, replacing a stale
 * file atomically (the content is never seen half-written).  Returns 0,
 * or the error of lm_pidfile_check, or LM_EIO when writing fails. */
int lm_pidfile_acquire(const char *path, pid_t *owner, char *err,
		       size_t errlen);

/* Removes `path` if it still names the caller.  Returns 0 when removed
 * or already absent, LM_EINVAL when it names another process (left
 * alone), LM_EIO when it cannot be removed. */
int lm_pidfile_release(const char *path);

#endif
