/* lemuria.h: the public interface of liblemuria.
 *
 * Lemuria is a hierarchical software distributed shared memory: processes
 * linked with liblemuria share one region of memory at the same address in
 * every process, across clusters of machines (README.md, docs/dsm.md).
 *
 * Memory model: release consistency.  Programs are data-race-free and
 * synchronise with locks and barriers; a write made before a release
 * (lm_unlock, lm_barrier, lm_create, the end of a created function) is
 * visible to every read after an acquire that follows it (lm_lock of the
 * same lock, the same barrier, the start of the created function,
 * lm_wait_for_end).
 *
 * Processes are started by lemuria-run, which gives each its rank, the
 * layout and the run id through the environment (LM_LAYOUT, LM_RANK,
 * LM_RUN).  The runtime is single-threaded per process: call it from one
 * thread (it starts one of its own, which sleeps except to send an
 * acknowledgement the lemuriad waits for, or to resend a lost one-way
 * message, while the program computes).  Every int-returning call returns 0 or a negative error code
 * (lm_strerror); errors are also logged to stderr naming the rank, the
 * peer and the cause.
 *
 * Signals: the library handles SIGSEGV on the shared region (others go
 * to the handler installed before lm_init); its own thread takes
 * SIGRTMIN + 5 from a timer directed at it alone (docs/dsm.md, "Client
 * acknowledgements"). */
#ifndef LEMURIA_H
#define LEMURIA_H

#include <stddef.h>
#include <stdint.h>

#include "lemuria_error.h" /* LM_API, the LM_E* codes, lm_strerror */

#ifdef __cplusplus
extern "C" {
#endif

#define LEMURIA_VERSION_MAJOR 0
#define LEMURIA_VERSION_MINOR 1

/* "MAJOR.MINOR" of the library actually linked. */
LM_API const char *lm_version(void);

/* Monotonic time in microseconds (SPLASH-2's CLOCK). */
LM_API uint64_t lm_clock_us(void);

/* Joins the run: reads the layout, connects to this cluster's lemuriad
 * and maps the shared region.  argc/argv may be NULL (they are not
 * consumed today).  Returns 0, LM_EINVAL (environment or layout missing or
 * wrong, or a second call: the first stands), LM_EUNREACH (lemuriad does
 * not answer), LM_EIO.  The other calls made before it succeeds, or
 * after lm_finalize, fail (LM_EINVAL, or NULL) naming themselves. */
LM_API int lm_init(int *argc, char ***argv);

/* Publishes this process's last writes, leaves the run and unmaps the
 * region.  Safe to call when lm_init failed or was not called.  Rank 0
 * that exits with status 0 without calling it is finalized on its way
 * out, so that the ranks it never created stop waiting for work. */
LM_API void lm_finalize(void);

/* 0 .. lm_nprocs() - 1; -1 before lm_init */
LM_API int lm_rank(void);
LM_API int lm_nprocs(void);
/* index of this process's cluster in the layout */
LM_API int lm_cluster(void);

/* Shared memory: the same address in every process.  NULL when the region
 * is exhausted (logged).  Memory is zero-filled the first time it is
 * used. */
LM_API void *lm_malloc(size_t size);
/* Returns 0, or LM_EINVAL for a pointer lm_malloc did not return. */
LM_API int lm_free(void *p);

/* SPMD programs: every process calls it with the same len; afterwards
 * every process's `var` holds rank 0's bytes.  It includes a barrier.
 * Uses the region's last page, which the allocator never hands out. */
LM_API int lm_distribute(void *var, size_t len);

/* Lock and barrier ids are LM_ID_MIN..LM_ID_MAX (1..2147483391), for
 * locks and barriers alike; ids from LM_RUNTIME_BARRIER up are the
 * runtime's own (lm_distribute's barrier).  lm_lock, lm_unlock and
 * lm_barrier refuse an id outside the range (0 used by accident, say)
 * with LM_EINVAL, logged with the id, the range and the rank, and the
 * run goes on. */
#define LM_RUNTIME_BARRIER 0x7fffff00
#define LM_ID_MIN 1
#define LM_ID_MAX (LM_RUNTIME_BARRIER - 1)

/* Reserves `n` consecutive ids for locks or barriers, unique in the run
 * and within the range above (the first reserved is 1); returns the
 * first or a negative error (LM_ENOBUFS when the range is used up). */
LM_API int lm_id_alloc(int n);

/* Locks: acquire and release; not recursive.  lm_lock of a lock this
 * process holds, and lm_unlock of one it does not hold, return LM_EINVAL,
 * logged with the rank and the id, and change nothing. */
LM_API int lm_lock(int id);
LM_API int lm_unlock(int id);

/* Barrier `id`: every process of the run takes part. */
LM_API int lm_barrier(int id);

/* SPLASH-2 CREATE: starts fn on the next idle rank (1, 2, ...), which sees
 * this process's ordinary global variables as they are now and the shared
 * memory as published by this call.  Only rank 0 creates.  Needs liblemuria
 * linked as a shared library (the variables travel as an image of the
 * executable's data segment).  Returns the rank started, or an error. */
LM_API int lm_create(void (*fn)(void));

/* Rank 0, before its first lm_create: from that CREATE on, the program's
 * ordinary globals (the executable's data and bss) are shared by rank 0
 * and the ranks it creates as threads share them, under the memory model
 * of lm_malloc'd memory, instead of copied at each CREATE: a global one
 * process writes after CREATE is seen by the others after their next
 * acquire (docs/dsm.md "Globals").  The SPLASH-2 macros call it.  Other
 * ranks (and LEMURIA_GLOBALS=copy in the environment) make it a no-op
 * returning 0.  LM_EINVAL after a CREATE, or before lm_init. */
LM_API int lm_share_globals(void);

/* SPLASH-2 WAIT_FOR_END: waits until n created functions have returned;
 * their writes are then visible. */
LM_API int lm_wait_for_end(int n);

/* Worker side of lm_create, for ranks other than 0: waits for the CREATE
 * addressed to this rank, runs the function, publishes its writes, reports
 * its end and finalizes.  Returns the process exit status to use (0 on
 * success).  SPLASH-2's MAIN_INITENV calls it and exits. */
LM_API int lm_worker_serve(void);

/* Before main, in a rank other than 0 of a run (lemuria-run's
 * environment): joins, serves the CREATEs addressed to this rank and
 * exits with lm_worker_serve's status, so that a SPLASH-2 worker never
 * runs main, as a thread does not (the macros' MAIN_ENV calls it from a
 * constructor of the program's).  Anywhere else it returns at once. */
LM_API void lm_serve_workers_before_main(void);

#ifdef __cplusplus
}
#endif

#endif
