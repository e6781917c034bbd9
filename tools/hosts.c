/* The host file and the agents' command lines (hosts.h). */
#include "hosts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"

/* Whether `name` is a daemon of the layout; its kind in *what. */
static bool layout_daemon(const struct lm_layout *l, const char *name,
			  const char **what)
{
	for (size_t i = 0; i < l->nreflectors; i++)
		if (strcmp(l->reflectors[i].name, name) == 0) {
			*what = "reflector";
			return true;
		}
	for (size_t i = 0; i < l->nclusters; i++)
		if (strcmp(l->clusters[i].name, name) == 0) {
			*what = "cluster";
			return true;
		}
	return false;
}

/* One line of the file, comments and the newline cut off: 0 when it
 * holds nothing or an entry (added), else LM_EINVAL with err set. */
static int parse_line(char *line, const char *path, int lineno,
		      const struct lm_layout *l, struct lm_hosts *h,
		      char *err, size_t errlen)
{
	const char *sep = " \t\r";
	char *save = NULL, *name, *host, *extra;
	const char *what;

	line[strcspn(line, "#")] = '\0';
	name = strtok_r(line, sep, &save);
	if (!name)
		return 0;
	host = strtok_r(NULL, sep, &save);
	extra = host ? strtok_r(NULL, sep, &save) : NULL;
	if (!host || extra) {
		snprintf(err, errlen, "%s:%d: \"%s%s%s\": a line is NAME HOST "
			 "(a reflector or cluster of the layout and where it "
			 "runs)", path, lineno, name, extra ? " ... " : "",
			 extra ? extra : "");
		return LM_EINVAL;
	}
	if (!layout_daemon(l, name, &what)) {
		snprintf(err, errlen, "%s:%d: \"%s\" is no reflector or "
			 "cluster of the layout", path, lineno, name);
		return LM_EINVAL;
	}
	if (lm_hosts_of(h, name)) {
		snprintf(err, errlen, "%s:%d: %s %s has a host already (%s)",
			 path, lineno, what, name, lm_hosts_of(h, name));
		return LM_EINVAL;
	}
	if (strlen(host) >= LM_HOST_MAX) {
		snprintf(err, errlen, "%s:%d: host of %s longer than %d "
			 "characters", path, lineno, name, LM_HOST_MAX - 1);
		return LM_EINVAL;
	}
	snprintf(h->e[h->n].name, sizeof(h->e[h->n].name), "%s", name);
	snprintf(h->e[h->n].host, sizeof(h->e[h->n].host), "%s", host);
	h->n++;
	return 0;
}

int lm_hosts_load(const char *path, const struct lm_layout *l,
		  bool need_reflectors, struct lm_hosts **out, char *err,
		  size_t errlen)
{
	struct lm_hosts *h = calloc(1, sizeof(*h));
	char line[1024];
	int lineno = 0, rc = 0;
	FILE *f;

	*out = NULL;
	if (!h || !(h->e = calloc(l->nreflectors + l->nclusters + 1,
				  sizeof(*h->e)))) {
		lm_hosts_free(h);
		snprintf(err, errlen, "out of memory");
		return LM_ENOMEM;
	}
	if (!(f = fopen(path, "r"))) {
		snprintf(err, errlen, "host file %s: %s", path,
			 strerror(errno));
		lm_hosts_free(h);
		return LM_EIO;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line longer than %zu "
				 "characters", path, lineno, sizeof(line) - 2);
			rc = LM_EINVAL;
			break;
		}
		line[strcspn(line, "\n")] = '\0';
		rc = parse_line(line, path, lineno, l, h, err, errlen);
	}
	fclose(f);
	for (size_t i = 0; rc == 0 && i < l->nclusters; i++)
		if (!lm_hosts_of(h, l->clusters[i].name)) {
			snprintf(err, errlen, "%s: cluster %s has no host "
				 "(a line \"%s HOST\")", path,
				 l->clusters[i].name, l->clusters[i].name);
			rc = LM_EINVAL;
		}
	for (size_t i = 0; rc == 0 && need_reflectors && i < l->nreflectors;
	     i++)
		if (!lm_hosts_of(h, l->reflectors[i].name)) {
			snprintf(err, errlen, "%s: reflector %s has no host, "
				 "and --start-daemons starts it on one (a "
				 "line \"%s HOST\")", path,
				 l->reflectors[i].name,
				 l->reflectors[i].name);
			rc = LM_EINVAL;
		}
	if (rc) {
		lm_hosts_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

const char *lm_hosts_of(const struct lm_hosts *h, const char *name)
{
	for (size_t i = 0; h && i < h->n; i++)
		if (strcmp(h->e[i].name, name) == 0)
			return h->e[i].host;
	return NULL;
}

void lm_hosts_free(struct lm_hosts *h)
{
	if (!h)
		return;
	free(h->e);
	free(h);
}

static bool shell_safe(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("@%+=:,./_-", c);
}

size_t lm_hosts_quote(const char *word, char *out, size_t outlen)
{
	size_t need = 0;
	bool safe = word[0] != '\0';

	/* one pass to size it, one to write it: both through put() */
#define put(ch)                                                               \
	do {                                                                  \
		if (need + 1 < outlen)                                        \
			out[need] = (ch);                                     \
		need++;                                                       \
	} while (0)
	for (const char *p = word; *p && safe; p++)
		safe = shell_safe(*p);
	if (safe) {
		for (const char *p = word; *p; p++)
			put(*p);
	} else {
		put('\'');
		for (const char *p = word; *p; p++) {
			if (*p == '\'') {
				put('\'');
				put('\\');
				put('\'');
			}
			put(*p);
		}
		put('\'');
	}
#undef put
	if (outlen)
		out[need < outlen ? need : outlen - 1] = '\0';
	return need;
}

void lm_hosts_argv_free(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

/* Whether the agent's program hands its words to a remote shell. */
static bool through_shell(const char *program)
{
	size_t n = strlen(program);

	return n >= 3 && (strcmp(program + n - 3, "ssh") == 0 ||
			  strcmp(program + n - 3, "rsh") == 0);
}

char **lm_hosts_command(const char *agent, const char *host,
			char *const *cmd)
{
	size_t nagent = 0, ncmd = 0, k = 0;
	char *words = strdup(agent), *save = NULL, *w;
	char **argv = NULL;
	bool quote;

	if (!words)
		return NULL;
	for (const char *p = agent; *p;) {
		p += strspn(p, " \t");
		if (*p)
			nagent++;
		p += strcspn(p, " \t");
	}
	while (cmd[ncmd])
		ncmd++;
	if (nagent == 0 ||
	    !(argv = calloc(nagent + 1 + ncmd + 1, sizeof(*argv))))
		goto fail;
	for (w = strtok_r(words, " \t", &save); w;
	     w = strtok_r(NULL, " \t", &save))
		if (!(argv[k++] = strdup(w)))
			goto fail;
	quote = through_shell(argv[0]);
	if (!(argv[k++] = strdup(host)))
		goto fail;
	for (size_t i = 0; i < ncmd; i++) {
		size_t len = quote ? lm_hosts_quote(cmd[i], NULL, 0) :
				     strlen(cmd[i]);

		if (!(argv[k] = malloc(len + 1)))
			goto fail;
		if (quote)
			lm_hosts_quote(cmd[i], argv[k], len + 1);
		else
			memcpy(argv[k], cmd[i], len + 1);
		k++;
	}
	free(words);
	return argv;
fail:
	free(words);
	lm_hosts_argv_free(argv);
	return NULL;
}
