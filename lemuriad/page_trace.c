/* A lemuriad's page trace (page_trace.h). */
#include "page_trace.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h" /* lm_now_us */
#include "log.h"

struct lm_page_trace {
	FILE *f;
	char *cluster; /* each line names it, for merging */
};

struct lm_page_trace *lm_page_trace_open(const char *cluster)
{
	const char *dir = getenv("LEMURIA_PAGE_TRACE");
	char path[PATH_MAX];
	struct lm_page_trace *t;
	int n;

	if (!dir || !*dir || !cluster)
		return NULL;
	n = snprintf(path, sizeof(path), "%s/%s.trace", dir, cluster);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		lm_log_warn("LEMURIA_PAGE_TRACE: the path under %s is too long;"
			    " no page trace", dir);
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->cluster = strdup(cluster)) ||
	    !(t->f = fopen(path, "w"))) {
		lm_log_warn("LEMURIA_PAGE_TRACE: cannot write %s: %s; no page"
			    " trace", path,
			    strerror(t && t->cluster ? errno : ENOMEM));
		if (t)
			free(t->cluster);
		free(t);
		return NULL;
	}
	return t;
}

void lm_page_trace_close(struct lm_page_trace *t)
{
	if (!t)
		return;
	if (fclose(t->f) != 0)
		lm_log_warn("LEMURIA_PAGE_TRACE: the trace is cut short: %s",
			    strerror(errno));
	free(t->cluster);
	free(t);
}

void lm_page_trace_event(struct lm_page_trace *t, const char *event,
			 uint32_t page, uint32_t version, uint32_t more)
{
	fprintf(t->f, "%llu %s %s %u %u %u\n",
		(unsigned long long)lm_now_us(), t->cluster, event, page,
		version, more);
}

void lm_page_trace_flush(struct lm_page_trace *t)
{
	if (t)
		fflush(t->f);
}
