/* Detaching a daemon from its terminal (detach.c): a double fork with
 * setsid() between, stdio to the log (logsink.h), and a pipe through which
 * the daemon tells the waiting command that it runs, or why not. */
#ifndef LM_DETACH_H
#define LM_DETACH_H

#include <stddef.h>

/* Double fork: the first child leaves the terminal's session with
 * setsid(), the second is no session leader and so can never acquire a
 * controlling terminal again.  Returns 0 in the daemon with *ready_fd to
 * report through; the original process does not return: it exits with 0
 * once the daemon reports that it runs, else 1 with the daemon's message
 * on stderr.  LM_EIO with the reason in err if nothing could be forked. */
int lm_detach(const char *prog, int *ready_fd, char *err, size_t errlen);

/* Sends the outcome of the start-up to the waiting process: NULL for
 * "running", else the message.  Closes *fd; nothing when *fd < 0. */
void lm_detach_report(int *fd, const char *msg);

#endif
