/* Command-line options of reflector and lemuriad (daemon_opts.c). */
#ifndef LM_DAEMON_OPTS_H
#define LM_DAEMON_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "log.h"

/* The strings point into argv. */
struct lm_daemon_opts {
	const char *layout;        /* -c FILE */
	const char *name;          /* -n NAME */
	enum lm_log_level level;   /* -l LEVEL (default info) */
	bool detach;               /* -d: run in the background */
	const char *pidfile;       /* -p FILE, or NULL */
	const char *log_file;      /* --log-file FILE, or NULL */
	bool syslog;               /* --syslog (implied by -d without
				    * --log-file) */
	bool stop_on_eof;          /* --stop-on-eof: stop when stdin closes
				    * (started for one run through an agent,
				    * lemuria-run --hosts) */
};

/* Parses argv for `prog`.  Returns 0 when the daemon should run, 1 when
 * help or the version was printed to `info` (the daemon exits 0), 2 on a
 * usage error (message on `out`). */
int lm_daemon_parse_args(int argc, char **argv, const char *prog,
			 struct lm_daemon_opts *opts, FILE *info, FILE *out);

#endif
