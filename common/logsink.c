/* Log destinations of a daemon (logsink.h).  Logging is process-wide
 * (log.h), so is this state; the sinks run under log.c's mutex, and a
 * reopen swaps the descriptor with one dup3() so a concurrent line lands
 * in the old or the new file, never nowhere. */
#include "logsink.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "lm_error.h"

static struct {
	int fd;              /* the log file, or -1 */
	bool onto_stdio;     /* stdout and stderr follow the file */
	bool syslog;         /* openlog() done */
	char path[PATH_MAX];
	char ident[64];      /* the daemon's name, on every line */
	char prog[64];       /* syslog keeps a pointer to its ident */
} lm_logsink_state = { .fd = -1 };

static const char *const lm_logsink_level_names[LM_LOG_LEVEL_COUNT] = {
	"error", "warn", "info", "debug"
};

static void lm_logsink_file(void *ctx, enum lm_log_level level,
			    const char *msg)
{
	char stamp[32], line[1280];
	struct timespec ts;
	struct tm tm;
	size_t off = 0;
	int len;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
	len = snprintf(line, sizeof(line), "%s.%03ld %s: %s: %s\n", stamp,
		       ts.tv_nsec / 1000000, lm_logsink_state.ident,
		       lm_logsink_level_names[level], msg);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof(line)) { /* cut, but keep the newline */
		len = (int)sizeof(line) - 1;
		line[len - 1] = '\n';
	}
	/* One write per line: with O_APPEND the line is never split by the
	 * writes of another process sharing the file. */
	while (off < (size_t)len) {
		ssize_t n = write(lm_logsink_state.fd, line + off,
				  (size_t)len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* nowhere left to report it */
		off += (size_t)n;
	}
}

int lm_logsink_syslog_priority(enum lm_log_level level)
{
	switch (level) {
	case LM_LOG_ERROR:
		return LOG_ERR;
	case LM_LOG_WARN:
		return LOG_WARNING;
	case LM_LOG_INFO:
		return LOG_INFO;
	default:
		return LOG_DEBUG;
	}
}

static void lm_logsink_syslog(void *ctx, enum lm_log_level level,
			      const char *msg)
{
	(void)ctx;
	syslog(lm_logsink_syslog_priority(level), "%s: %s",
	       lm_logsink_state.ident, msg);
}

static int lm_logsink_open_file(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

int lm_logsink_to_file(const char *path, const char *ident, char *err,
		       size_t errlen)
{
	int fd;

	if (strlen(path) >= sizeof(lm_logsink_state.path)) {
		snprintf(err, errlen, "log file name too long");
		return LM_EIO;
	}
	fd = lm_logsink_open_file(path);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open log file %s: %s", path,
			 strerror(errno));
		return LM_EIO;
	}
	lm_logsink_close();
	lm_logsink_state.fd = fd;
	snprintf(lm_logsink_state.path, sizeof(lm_logsink_state.path), "%s", path);
	snprintf(lm_logsink_state.ident, sizeof(lm_logsink_state.ident), "%s",
		 ident);
	lm_log_set_sink(lm_logsink_file, NULL);
	return 0;
}

int lm_logsink_reopen(char *err, size_t errlen)
{
	int fd;

	if (lm_logsink_state.fd < 0)
		return LM_ENOENT;
	fd = lm_logsink_open_file(lm_logsink_state.path);
	if (fd < 0) {
		snprintf(err, errlen, "cannot reopen log file %s: %s",
			 lm_logsink_state.path, strerror(errno));
		return LM_EIO;
	}
	if (dup3(fd, lm_logsink_state.fd, O_CLOEXEC) < 0 ||
	    (lm_logsink_state.onto_stdio &&
	     (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0))) {
		snprintf(err, errlen, "cannot reopen log file %s: %s",
			 lm_logsink_state.path, strerror(errno));
		close(fd);
		return LM_EIO;
	}
	close(fd);
	return 0;
}

void lm_logsink_to_syslog(const char *prog, const char *name)
{
	lm_logsink_close();
	snprintf(lm_logsink_state.prog, sizeof(lm_logsink_state.prog), "%s", prog);
	snprintf(lm_logsink_state.ident, sizeof(lm_logsink_state.ident), "%s",
		 name);
	openlog(lm_logsink_state.prog, LOG_PID, LOG_DAEMON);
	lm_logsink_state.syslog = true;
	lm_log_set_sink(lm_logsink_syslog, NULL);
}

void lm_logsink_close(void)
{
	lm_log_set_sink(NULL, NULL);
	if (lm_logsink_state.fd >= 0)
		close(lm_logsink_state.fd);
	lm_logsink_state.fd = -1;
	lm_logsink_state.onto_stdio = false;
	if (lm_logsink_state.syslog)
		closelog();
	lm_logsink_state.syslog = false;
}

/* A detached daemon's stdin reads /dev/null; its stdout and stderr go to
 * the log file, so that whatever bypasses the logger (a sanitizer report,
 * a library's complaint) is kept, or to /dev/null without a file. */
int lm_logsink_capture_stdio(void)
{
	int null = open("/dev/null", O_RDWR);
	int out = lm_logsink_state.fd >= 0 ? lm_logsink_state.fd : null;
	int rc = 0;

	if (null < 0)
		return LM_EIO;
	if (dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
	    dup2(out, STDERR_FILENO) < 0)
		rc = LM_EIO;
	if (null > STDERR_FILENO)
		close(null);
	lm_logsink_state.onto_stdio = lm_logsink_state.fd >= 0;
	return rc;
}
