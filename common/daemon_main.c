/* The daemon program (lm_daemon_main, daemon.h): options, layout, the
 * daemon object, detaching, pidfile, log destination, signals, the event
 * loop, and the clean-up, in that order.  The top of the shell. */
#include "daemon.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon_opts.h"
#include "daemon_state.h"
#include "detach.h"
#include "keepalive.h"
#include "lm_error.h"
#include "log.h"
#include "logsink.h"
#include "mem.h"
#include "pidfile.h"
#include "udp.h"

static void lm_daemon_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	lm_log_info("signal %d: shutting down", (int)sig);
	event_base_loopexit(arg, NULL);
}

static void lm_daemon_on_hup(evutil_socket_t sig, short what, void *arg)
{
	char err[PATH_MAX + 64];
	int rc = lm_logsink_reopen(err, sizeof(err));

	(void)sig;
	(void)what;
	(void)arg;
	if (rc == 0)
		lm_log_info("reopened logs");
	else if (rc == LM_ENOENT)
		lm_log_info("SIGHUP: no log file to reopen");
	else
		lm_log_error("%s", err);
}

/* --stop-on-eof: standard input readable.  End of file (or an error) is
 * the launcher gone, or done with the run: stop as on SIGTERM.  Anything
 * read is ignored. */
static void lm_daemon_on_stdin(evutil_socket_t fd, short what, void *arg)
{
	char buf[512];
	ssize_t n = read(fd, buf, sizeof(buf));

	(void)what;
	if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN)))
		return;
	lm_log_info("standard input closed (--stop-on-eof): the launcher "
		    "that started us is done; shutting down");
	event_base_loopexit(arg, NULL);
}

/* Paths used after chdir("/") must not be relative. */
static int lm_daemon_abspath(const char *prog, const char *path, char *out,
			     size_t outlen)
{
	char cwd[PATH_MAX];
	int n;

	if (path[0] == '/') {
		n = snprintf(out, outlen, "%s", path);
	} else if (getcwd(cwd, sizeof(cwd))) {
		n = snprintf(out, outlen, "%s/%s", cwd, path);
	} else {
		fprintf(stderr, "%s: cannot resolve \"%s\": getcwd: %s\n", prog,
			path, strerror(errno));
		return LM_EIO;
	}
	if (n < 0 || (size_t)n >= outlen) {
		fprintf(stderr, "%s: path \"%s\" is too long\n", prog, path);
		return LM_EINVAL;
	}
	return 0;
}

/* A start-up failure: to the terminal, or through the pipe once
 * detached (and then into the log too, for whoever reads it later). */
static void lm_daemon_start_failed(int *ready_fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void lm_daemon_start_failed(int *ready_fd, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (*ready_fd < 0) {
		fprintf(stderr, "%s\n", msg);
		return;
	}
	lm_log_error("%s", msg);
	lm_detach_report(ready_fd, msg);
}

int lm_daemon_main(int argc, char **argv, enum lm_role role,
		   const struct lm_daemon_protocol *proto)
{
	static const int stop_signals[] = { SIGTERM, SIGINT };
	const char *prog = role == LM_ROLE_REFLECTOR ? "reflector" : "lemuriad";
	struct lm_daemon_opts opts;
	struct lm_layout *layout = NULL;
	struct event_base *base = NULL;
	struct event *sigs[3] = { NULL, NULL, NULL }, *eof = NULL;
	lm_daemon *d = NULL;
	char err[PATH_MAX + 512], where[32];
	char pidfile[PATH_MAX] = "", log_file[PATH_MAX] = "";
	bool own_pidfile = false, logging = false;
	int ready_fd = -1, rc;
	pid_t owner;

	/* A daemon allocates and frees megabytes per barrier (messages,
	 * reassembly, deltas).  glibc would map each large block afresh
	 * and return freed heap tops, so every barrier paid page faults on
	 * zeroed memory; keeping it costs no more than the peak, which I5
	 * bounds anyway (docs/performance.md).  The heap grows
	 * LM_DAEMON_HEAP_PAD beyond each need, and each message handled
	 * gives the pages it gained (lm_mem_follow_heap): a page then costs
	 * part of one system call instead of a fault. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_TOP_PAD, LM_DAEMON_HEAP_PAD);
	lm_mem_setup_from_env();
	lm_mem_follow_heap();
	rc = lm_daemon_parse_args(argc, argv, prog, &opts, stdout, stderr);
	if (rc)
		return rc == 1 ? 0 : 2;
	lm_log_set_ident(prog);
	lm_log_set_level(opts.level);
	if ((opts.pidfile && lm_daemon_abspath(prog, opts.pidfile, pidfile,
					       sizeof(pidfile))) ||
	    (opts.log_file && lm_daemon_abspath(prog, opts.log_file, log_file,
						sizeof(log_file))))
		return 2;
	if (lm_layout_load(opts.layout, &layout, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	rc = 1;
	/* Before binding, so that a second copy is told about the pidfile
	 * and not about a busy port. */
	if (pidfile[0] &&
	    lm_pidfile_check(pidfile, &owner, err, sizeof(err))) {
		fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
		goto out;
	}
	base = event_base_new();
	if (!base) {
		fprintf(stderr, "%s: cannot create the event loop\n", prog);
		goto out;
	}
	d = lm_daemon_create(base, layout, role, opts.name, err, sizeof(err));
	if (!d) {
		fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
		rc = strstr(err, "no [") ? 2 : 1;
		goto out;
	}
	if (proto && lm_daemon_start_protocol(d, proto, err, sizeof(err))) {
		fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
		goto out;
	}
	lm_log_set_ident(opts.name);
	if (log_file[0]) {
		if (lm_logsink_to_file(log_file, opts.name, err,
				       sizeof(err))) {
			fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
			goto out;
		}
		logging = true;
	} else if (opts.syslog) {
		lm_logsink_to_syslog(prog, opts.name);
		logging = true;
	}
	if (opts.detach) {
		if (lm_detach(prog, &ready_fd, err, sizeof(err))) {
			fprintf(stderr, "%s %s: %s\n", prog, opts.name, err);
			goto out;
		}
		/* The kernel's event queue (epoll) is shared with the
		 * parent until libevent makes its own. */
		if (event_reinit(base)) {
			lm_daemon_start_failed(&ready_fd,
					       "%s %s: cannot reinitialise the "
					       "event loop after fork",
					       prog, opts.name);
			goto out;
		}
	}
	if (pidfile[0]) {
		if (lm_pidfile_acquire(pidfile, &owner, err, sizeof(err))) {
			lm_daemon_start_failed(&ready_fd, "%s %s: %s", prog,
					       opts.name, err);
			goto out;
		}
		own_pidfile = true;
	}
	for (size_t i = 0; i < 3; i++) {
		if (i < 2)
			sigs[i] = evsignal_new(base, stop_signals[i],
					       lm_daemon_on_signal, base);
		else
			sigs[i] = evsignal_new(base, SIGHUP, lm_daemon_on_hup,
					       NULL);
		if (!sigs[i] || evsignal_add(sigs[i], NULL)) {
			lm_daemon_start_failed(&ready_fd,
					       "%s %s: cannot install signal "
					       "handlers",
					       prog, opts.name);
			goto out;
		}
	}
	if (opts.stop_on_eof &&
	    (!(eof = event_new(base, STDIN_FILENO, EV_READ | EV_PERSIST,
			       lm_daemon_on_stdin, base)) ||
	     event_add(eof, NULL))) {
		lm_daemon_start_failed(&ready_fd,
				       "%s %s: --stop-on-eof: cannot watch "
				       "standard input (a pipe, socket or "
				       "terminal; not a file)",
				       prog, opts.name);
		goto out;
	}
	lm_log_info("%s %s listening on %s (node %u)%s", prog, opts.name,
		    lm_addr_str(&d->addr, where, sizeof(where)), d->id,
		    opts.detach ? ", detached" : "");
	lm_daemon_announce(d);
	lm_detach_report(&ready_fd, NULL);
	rc = event_base_dispatch(base) < 0 ? 1 : 0;
	lm_log_info("stopped");
out:
	if (eof)
		event_free(eof);
	for (size_t i = 0; i < 3; i++)
		if (sigs[i])
			event_free(sigs[i]);
	lm_daemon_destroy(d);
	if (base)
		event_base_free(base);
	if (own_pidfile)
		lm_pidfile_release(pidfile);
	if (logging)
		lm_logsink_close();
	lm_layout_free(layout);
	return rc;
}
