/* A lemuriad's page trace: what happened to which page and lock and
 * when, for finding how a page went into the cluster's copy out of order
 * and what a fault or a lock waited for.
 *
 * With LEMURIA_PAGE_TRACE=DIR in its environment (lemuria-run passes it
 * on to the daemons it starts) a lemuriad writes one line per event to
 * DIR/<cluster>.trace, replacing that file:
 *
 *     <CLOCK_MONOTONIC in µs> <cluster> <event> <page> <version> <more>
 *
 * The events, each with what <more> holds:
 *   heard    a list of changes (CHANGED, or one a grant or barrier
 *            brought) named the page at version                (0)
 *   fetch    a client asked for the page, at least version    (client node)
 *   answer   the home's answer came, at version               (least the
 *                                                              fetch wants)
 *   gated    that answer waits for the lists it depends on    (0)
 *   again    the page is asked for again with the next set    (0)
 *   set      the page goes into the copy with a set of pages  (set size)
 *   install  the page went into the copy                      (0)
 *   reply    a client's fetch was answered at version         (client node)
 *   notice   a write notice of a barrier or a grant           (writer's
 *                                                              cluster)
 *
 * and a lock's way through the cluster, the lock's id in the page column:
 *   lock     a client asked for the lock                      (its rank)
 *   token    the token came from the lock's manager, with     (the rank
 *            <version> notices                                 asked for)
 *   grant    a client got the lock                            (its rank)
 *   unlock   it let the lock go                               (its rank)
 *   recall   the manager asked for the token back             (0)
 *   return   the token went back to the manager               (the rank
 *                                                              it came for)
 *
 * A set's pages go in at once (its `set` lines) where every client's
 * view can be closed for them; a page that went in on its own after all
 * (no such views, or a twinned page merged byte by byte) has an
 * `install` line after its `set` line.
 *
 * Lines are buffered and written out at every tick (about a second) and
 * when the lemuriad ends; a lemuriad that is killed loses its last
 * second.  The lemuriads of a host share the clock: `sort -n` of all the
 * files of DIR is the run's history.
 *
 * Why not LTTng-UST or USDT probes (sys/sdt.h): their events are read by
 * a session daemon (lttng-sessiond) or a privileged consumer (bpftrace,
 * perf) started beside the run, and decoded by another tool; a user's
 * run on its cluster rarely has them.  What the order bugs of docs/dsm.md
 * "Order" were found with is a text file per lemuriad that sort and grep
 * read, a few lines per page that a set or a fault moves. */
#ifndef LM_PAGE_TRACE_H
#define LM_PAGE_TRACE_H

#include <stdint.h>

struct lm_page_trace;

/* Opens DIR/<cluster>.trace for `cluster` when the environment names a
 * DIR; NULL without one, or (after a warning naming the file and the
 * cause) when it cannot be opened: the lemuriad runs on untraced. */
struct lm_page_trace *lm_page_trace_open(const char *cluster);
/* Writes out what is buffered and closes; NULL is fine. */
void lm_page_trace_close(struct lm_page_trace *t);
/* One line; `event` one of the names above (borrowed). */
void lm_page_trace_event(struct lm_page_trace *t, const char *event,
			 uint32_t page, uint32_t version, uint32_t more);
/* Writes out what is buffered. */
void lm_page_trace_flush(struct lm_page_trace *t);

/* The call sites' form: nothing but a test when tracing is off. */
#define LM_PAGE_TRACE(t, event, page, version, more)                      \
	do {                                                               \
		if (t)                                                     \
			lm_page_trace_event((t), (event), (page), (version),\
					    (more));                       \
	} while (0)

#endif
