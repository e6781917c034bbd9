/* Log destinations of a daemon (logsink.c): a log file that SIGHUP
 * reopens, or syslog. */
#ifndef LM_LOGSINK_H
#define LM_LOGSINK_H

#include <stddef.h>

#include "log.h"

/* Log destinations of a daemon; they replace the default stderr sink of
 * log.h for the whole process.  Each line names `ident` (copied).
 *
 * Appends to `path` (created 0644), one timestamped line per message.
 * `path` is copied and should be absolute, since lm_logsink_reopen
 * opens it again after a detached daemon has changed to "/" (where its
 * stdout and stderr follow the file).  0 or LM_EIO with the reason in
 * err (the previous destination stays). */
int lm_logsink_to_file(const char *path, const char *ident, char *err,
			  size_t errlen);
/* Opens the file of lm_logsink_to_file again (after logrotate has
 * moved it away).  0; LM_EIO with the reason in err (logging goes on to
 * the old file); LM_ENOENT when not logging to a file. */
int lm_logsink_reopen(char *err, size_t errlen);
/* Sends messages to syslog(3), facility daemon, ident `prog` (copied),
 * each prefixed with `name` as on stderr. */
void lm_logsink_to_syslog(const char *prog, const char *name);
/* The syslog priority of a level. */
int lm_logsink_syslog_priority(enum lm_log_level level);
/* Closes the file or syslog and restores the stderr sink. */
void lm_logsink_close(void);

/* A detached daemon's stdin reads /dev/null; stdout and stderr go to the
 * log file (so that what bypasses the logger is kept), or to /dev/null
 * without one.  0 or LM_EIO. */
int lm_logsink_capture_stdio(void);

#endif
