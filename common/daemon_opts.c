/* Command-line options of the daemons (daemon_opts.h), with messages that
 * quote the bad word; nothing else of the daemon is needed to test them. */
#include "daemon_opts.h"

#include <getopt.h>
#include <string.h>

#include "version.h"

/* Long options without a short form. */
enum { LM_OPT_SYSLOG = 256, LM_OPT_LOG_FILE, LM_OPT_STOP_ON_EOF };

static void lm_daemon_usage(const char *prog, FILE *out)
{
	fprintf(out,
		"usage: %s -c LAYOUT -n NAME [-l LEVEL] [-d] [-p PIDFILE]\n"
		"       %*s [--syslog | --log-file FILE] [--stop-on-eof]\n"
		"  -c, --config FILE     the layout (INI)\n"
		"  -n, --name NAME       this daemon's section name in the "
		"layout\n"
		"  -l, --log-level LEVEL error|warn|info|debug (default info)\n"
		"  -d, --daemon          detach once bound; logs to syslog "
		"unless\n"
		"                        --log-file is given\n"
		"  -p, --pidfile FILE    write the daemon's pid to FILE "
		"(removed\n"
		"                        at exit; refused while FILE names a "
		"live\n"
		"                        process)\n"
		"      --syslog          log to syslog, facility daemon\n"
		"      --log-file FILE   append the log to FILE; SIGHUP "
		"reopens it\n"
		"      --stop-on-eof     stop when standard input closes (a "
		"launcher that\n"
		"                        started the daemon for one run holds "
		"it)\n"
		"  -V, --version         print the version and exit\n"
		"  -h, --help            print this and exit\n",
		prog, (int)strlen(prog), "");
}

/* The option getopt stopped at, as the user typed it: "-x" for a short
 * one, else the whole word (a long option, maybe with "=value"). */
static const char *lm_daemon_optname(char **argv, int optchar, char *buf)
{
	const char *word = argv[optind - 1];

	if (optchar > 0 && optchar < 256 && strncmp(word, "--", 2) != 0) {
		buf[0] = '-';
		buf[1] = (char)optchar;
		buf[2] = '\0';
		return buf;
	}
	return word;
}

static int lm_daemon_parse(int argc, char **argv, const char *prog,
			   struct lm_daemon_opts *opts, FILE *info, FILE *out)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "daemon", no_argument, NULL, 'd' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "syslog", no_argument, NULL, LM_OPT_SYSLOG },
		{ "log-file", required_argument, NULL, LM_OPT_LOG_FILE },
		{ "stop-on-eof", no_argument, NULL, LM_OPT_STOP_ON_EOF },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	char sopt[3];
	int c;

	memset(opts, 0, sizeof(*opts));
	opts->level = LM_LOG_INFO;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":c:n:l:dp:hV", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c':
			opts->layout = optarg;
			break;
		case 'n':
			opts->name = optarg;
			break;
		case 'l':
			if (lm_log_parse_level(optarg, &opts->level)) {
				fprintf(out,
					"%s: log level \"%s\" is not one of "
					"error, warn, info, debug\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'd':
			opts->detach = true;
			break;
		case 'p':
			opts->pidfile = optarg;
			break;
		case LM_OPT_SYSLOG:
			opts->syslog = true;
			break;
		case LM_OPT_LOG_FILE:
			opts->log_file = optarg;
			break;
		case LM_OPT_STOP_ON_EOF:
			opts->stop_on_eof = true;
			break;
		case 'h':
			lm_daemon_usage(prog, info);
			return 1;
		case 'V':
			fprintf(info, "%s (Lemuria) %s\n", prog,
				LM_VERSION_STRING);
			return 1;
		case ':':
			fprintf(out, "%s: option %s needs a value; try '%s "
				"--help'\n",
				prog, lm_daemon_optname(argv, optopt, sopt),
				prog);
			return 2;
		default:
			fprintf(out, "%s: unknown option %s; try '%s --help'\n",
				prog, lm_daemon_optname(argv, optopt, sopt),
				prog);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(out, "%s: unexpected argument \"%s\"\n", prog,
			argv[optind]);
		return 2;
	}
	if (!opts->layout || !opts->name) {
		fprintf(out, "%s: both -c LAYOUT and -n NAME are required\n",
			prog);
		return 2;
	}
	if (opts->pidfile && !opts->pidfile[0]) {
		fprintf(out, "%s: -p needs a file name, not \"\"\n", prog);
		return 2;
	}
	if (opts->log_file && !opts->log_file[0]) {
		fprintf(out, "%s: --log-file needs a file name, not \"\"\n",
			prog);
		return 2;
	}
	if (opts->syslog && opts->log_file) {
		fprintf(out,
			"%s: --syslog and --log-file \"%s\" exclude each "
			"other\n",
			prog, opts->log_file);
		return 2;
	}
	if (opts->stop_on_eof && opts->detach) {
		fprintf(out, "%s: --stop-on-eof and -d exclude each other (a "
			     "detached daemon has no standard input)\n",
			prog);
		return 2;
	}
	/* A detached daemon has no stderr: its log must go somewhere. */
	if (opts->detach && !opts->log_file)
		opts->syslog = true;
	return 0;
}

int lm_daemon_parse_args(int argc, char **argv, const char *prog,
			 struct lm_daemon_opts *opts, FILE *info, FILE *out)
{
	int saved = opterr;
	int rc;

	opterr = 0; /* our own messages, on `out` */
	rc = lm_daemon_parse(argc, argv, prog, opts, info, out);
	opterr = saved;
	return rc;
}
