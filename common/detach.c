/* Detaching (detach.h).  The original process waits on a pipe until the
 * daemon says it runs (one '+') or why it cannot ('-' and the message), so
 * errors found after the fork (the pidfile, say) still reach the terminal
 * and the exit status, and a script that starts the daemon finds the
 * pidfile written when the command returns. */
#include "detach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "lm_error.h"
#include "logsink.h"

#define LM_DETACH_READY_TIMEOUT_MS 10000

static int lm_detach_await_ready(const char *prog, pid_t child, int fd)
{
	char msg[1024];
	size_t len = 0;
	uint64_t deadline = lm_now_us() + LM_DETACH_READY_TIMEOUT_MS * 1000ULL;

	while (len < sizeof(msg) - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = lm_now_us();
		ssize_t n;

		if (now >= deadline ||
		    poll(&p, 1, (int)((deadline - now) / 1000) + 1) == 0) {
			fprintf(stderr,
				"%s: the daemon did not report within %d s\n",
				prog, LM_DETACH_READY_TIMEOUT_MS / 1000);
			return 1;
		}
		n = read(fd, msg + len, sizeof(msg) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	waitpid(child, NULL, 0); /* the intermediate child, gone by now */
	msg[len] = '\0';
	if (len > 0 && msg[0] == '+')
		return 0;
	if (len > 1 && msg[0] == '-')
		fprintf(stderr, "%s\n", msg + 1);
	else
		fprintf(stderr, "%s: the daemon exited during start-up\n",
			prog);
	return 1;
}

void lm_detach_report(int *fd, const char *msg)
{
	char buf[1024];
	int len = snprintf(buf, sizeof(buf), "%c%s", msg ? '-' : '+',
			   msg ? msg : "");
	ssize_t n;

	if (*fd < 0)
		return;
	if (len >= (int)sizeof(buf))
		len = (int)sizeof(buf) - 1;
	do
		n = write(*fd, buf, (size_t)len);
	while (n < 0 && errno == EINTR);
	close(*fd);
	*fd = -1;
}

int lm_detach(const char *prog, int *ready_fd, char *err, size_t errlen)
{
	char why[256];
	int p[2];
	pid_t pid;

	fflush(NULL); /* or buffered output would be written twice */
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot detach: pipe: %s",
			 strerror(errno));
		return LM_EIO;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot detach: fork: %s",
			 strerror(errno));
		close(p[0]);
		close(p[1]);
		return LM_EIO;
	}
	if (pid > 0) {
		close(p[1]);
		/* _exit: the daemon owns the socket, the pidfile and the
		 * log now; nothing here may clean them up. */
		_exit(lm_detach_await_ready(prog, pid, p[0]));
	}
	close(p[0]);
	*ready_fd = p[1];
	if (setsid() < 0) {
		snprintf(why, sizeof(why), "%s: cannot detach: setsid: %s",
			 prog, strerror(errno));
		lm_detach_report(ready_fd, why);
		_exit(1);
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, sizeof(why), "%s: cannot detach: fork: %s",
			 prog, strerror(errno));
		lm_detach_report(ready_fd, why);
		_exit(1);
	}
	if (pid > 0)
		_exit(0);
	/* Keep no directory busy (the layout and log paths are absolute). */
	if (chdir("/") || lm_logsink_capture_stdio()) {
		snprintf(why, sizeof(why), "%s: cannot detach: %s", prog,
			 strerror(errno));
		lm_detach_report(ready_fd, why);
		_exit(1);
	}
	return 0;
}
