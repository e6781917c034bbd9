/* Every host of a run from one command (lemuria-run --hosts,
 * docs/operations.md "Every host from one command"): the host file that
 * says where each daemon of the layout runs, and the command lines a
 * launch agent (ssh by default, `ip netns exec` in the tests) is given to
 * run there.  Pure text work; tools/launch.c starts and watches the
 * agents. */
#ifndef LM_HOSTS_H
#define LM_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define LM_HOST_MAX 256 /* a host name, address or namespace */

struct lm_host_entry {
	char name[LM_NAME_MAX]; /* a reflector or cluster of the layout */
	char host[LM_HOST_MAX]; /* what the agent is given */
};

struct lm_hosts {
	struct lm_host_entry *e;
	size_t n;
};

/* Reads a host file: one `NAME HOST` a line, NAME a reflector or cluster
 * of `l`, each at most once; `#` starts a comment, blank lines are
 * skipped.  Every cluster must have a line, and every reflector too when
 * `need_reflectors` (lemuria-run --start-daemons starts them there).
 * Returns 0 and *out (free with lm_hosts_free), or LM_EINVAL / LM_EIO /
 * LM_ENOMEM with a message in err that names FILE:LINE where there is
 * one. */
int lm_hosts_load(const char *path, const struct lm_layout *l,
		  bool need_reflectors, struct lm_hosts **out, char *err,
		  size_t errlen);
/* The host of daemon `name`, or NULL when the file has none. */
const char *lm_hosts_of(const struct lm_hosts *h, const char *name);
/* Accepts NULL. */
void lm_hosts_free(struct lm_hosts *h);

/* `word` as a POSIX shell reads it back: unchanged when it holds only
 * characters no shell treats specially (letters, digits, and
 * `@%+=:,./_-`), else in single quotes (a quote inside as '\''), an empty
 * word as ''.  Returns the length it needs; writes at most outlen bytes
 * (NUL-terminated when outlen > 0). */
size_t lm_hosts_quote(const char *word, char *out, size_t outlen);

/* The argv an agent runs `cmd` on `host` with: the agent's words (split
 * at spaces: "ssh -o BatchMode=yes"), the host, then the words of cmd.
 * ssh and rsh join their words into a line for the remote shell, so for
 * an agent whose program's name ends in "ssh" or "rsh" each word is
 * quoted with lm_hosts_quote; any other agent (`ip netns exec`, `srun
 * -w`) runs them as they are.  malloc'd, NULL-terminated (free with
 * lm_hosts_argv_free); NULL when out of memory or the agent has no
 * word. */
char **lm_hosts_command(const char *agent, const char *host,
			char *const *cmd);
/* Accepts NULL. */
void lm_hosts_argv_free(char **argv);

#endif
