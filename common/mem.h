/* Pages given ahead of the writes that would fault them in.
 *
 * A process's first touch of a page it has not used yet is a page fault.
 * On a VM whose page tables the host shadows (the machines of
 * 2026-11-27), a fault costs 10-13 us, while one system call that asks
 * for many pages at once costs under 1 us a page (docs/performance.md,
 * "Page faults"); elsewhere the call still saves the fault's entry and
 * exit.  The runtime knows when it is about to fill memory that may be
 * fresh (a fetched page's private view, a new twin chunk, a big message
 * buffer, a daemon's heap) and asks for its pages first. */
#ifndef LM_MEM_H
#define LM_MEM_H

#include <stdbool.h>
#include <stddef.h>

/* Buffers at least this long are worth a call: below it a malloc'd buffer
 * is most likely heap the process has touched already. */
#define LM_MEM_POPULATE_MIN (64 * 1024)

/* Makes the whole pages inside [p, p + len) present and writable in the
 * calling process (MADV_POPULATE_WRITE), so that writing them takes no
 * fault.  Best effort: false when nothing was done (population off, a
 * range without a whole page, a kernel older than 5.14, memory short);
 * the pages then come by faults as they would have.  Safe in a signal
 * handler (one system call). */
bool lm_mem_populate(void *p, size_t len);

/* The same for pages the caller may only read (MADV_POPULATE_READ): maps
 * them, so that reading them takes no fault.  A shared mapping's page
 * comes from its file; a private one's that was never written maps the
 * zero page. */
bool lm_mem_populate_read(void *p, size_t len);

/* Population on or off for the whole process (on by default; the
 * environment variable LEMURIA_POPULATE=0 turns it off where
 * lm_mem_setup_from_env is called: lm_init and the daemons' start), so
 * that benchmarks can compare the two with one build. */
void lm_mem_set_populate(bool on);
bool lm_mem_populating(void);
void lm_mem_setup_from_env(void);

/* For a single-threaded process whose heap grows by brk in large steps
 * (a daemon: M_TOP_PAD of megabytes): gives the pages the heap gained
 * since the last call, so that the allocations that carve them up take
 * no fault.  The first call only notes where the heap ends.  Cheap when
 * the heap did not grow (no system call). */
void lm_mem_follow_heap(void);

#endif
