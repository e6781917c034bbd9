divert(-1)
# PARMACS macros for SPLASH-2 programs on Lemuria.  Usage:
#     m4 splash2/macros/lemuria.m4 prog.C > prog.c
# then link with liblemuria as a shared library (CREATE ships the
# program variables as an image of the executable data segment, which must
# not contain the library own state).  Every SPLASH process is a process
# of the run started by lemuria-run; rank 0 runs main, the others wait in
# MAIN_INITENV for the CREATE that names them.  Locks and barriers are
# numbered objects of liblemuria; a LOCKDEC or BARDEC declares an int that
# holds the id, which LOCKINIT or BARINIT reserve (in shared memory, so
# every process reads the same id).
#
# The C text below must not contain backquotes or apostrophes (m4 quotes).
# Statement macros expand to a braced block.  A failing liblemuria call
# has been reported by the library, with the rank and the cause; the
# program then exits with status 1, since PARMACS has no error path.

define(`LM_M4_DECLS', `
#ifndef LM_M4_DECLS_DONE
#define LM_M4_DECLS_DONE 1
#include <lemuria.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The runtime fixes the number of processes; programs may consult it. */
#define LM_PROCS ((long)lm_nprocs())

/* The standard macro sets give programs a page size (some SPLASH-2 codes
 * align on it); one of their own wins. */
#ifndef PAGE_SIZE
#define PAGE_SIZE 4096
#endif

struct lm_m4_pause {
	int lock;
	volatile int flag;
};

struct lm_m4_gsub {
	int lock;
	long next;
	long exhausted;
};

void lm_m4_check(int rc, const char *what);
int lm_m4_id(long n);
void lm_m4_barrier(int id, long size);
void lm_m4_pause_wait(struct lm_m4_pause *p);
/* Workers never run main, as threads do not: a rank other than 0 serves
 * its CREATEs from here, before main (whose code before MAIN_INITENV may
 * read stdin or parse arguments only the first process should). */
__attribute__((constructor)) static void lm_m4_workers_start(void)
{
	lm_serve_workers_before_main();
}

long lm_m4_gsub_get(struct lm_m4_gsub *g, long max, long nprocs);
#endif
')

define(`LM_M4_RUNTIME', `
void lm_m4_check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "lemuria macros: rank %d: %s failed: %s\n",
			lm_rank(), what, lm_strerror(rc));
		exit(1);
	}
}

int lm_m4_id(long n)
{
	int id = lm_id_alloc((int)n);

	lm_m4_check(id, "reserving lock or barrier ids");
	return id;
}

/* Every process of the run takes part in a Lemuria barrier. */
void lm_m4_barrier(int id, long size)
{
	if (size > 0 && size != lm_nprocs()) {
		fprintf(stderr, "lemuria macros: barrier for %ld processes, "
			"but the run has %d\n", size, lm_nprocs());
		exit(1);
	}
	lm_m4_check(lm_barrier(id), "barrier");
}

/* A flag is read under its lock, so the setter writes are visible. */
void lm_m4_pause_wait(struct lm_m4_pause *p)
{
	for (;;) {
		int flag;

		lm_m4_check(lm_lock(p->lock), "lock");
		flag = p->flag;
		lm_m4_check(lm_unlock(p->lock), "unlock");
		if (flag)
			return;
		usleep(100);
	}
}

long lm_m4_gsub_get(struct lm_m4_gsub *g, long max, long nprocs)
{
	long sub;

	lm_m4_check(lm_lock(g->lock), "lock");
	if (g->next <= max) {
		sub = g->next++;
	} else {
		sub = -1;
		if (++g->exhausted >= nprocs) {
			g->next = 0;
			g->exhausted = 0;
		}
	}
	lm_m4_check(lm_unlock(g->lock), "unlock");
	return sub;
}
')

# Environment.  MAIN_INITENV joins the run and has the program's ordinary
# globals shared from the first CREATE on, as threads share them
# (lm_share_globals; LEMURIA_GLOBALS=copy ships them at CREATE only).
# Ranks other than 0 serve
# their CREATEs from a constructor MAIN_ENV adds, and never run main
# (should one get there, MAIN_INITENV serves and exits too).  It needs no
# argc or argv in scope: barnes calls it inside a function of its own,
# radiosity names them ac and av.
# MAIN_END(status) finalizes and exits.
define(`MAIN_ENV', `LM_M4_DECLS`'LM_M4_RUNTIME')
define(`EXTERN_ENV', `LM_M4_DECLS')
define(`MAIN_INITENV', `{ if (lm_init(NULL, NULL) != 0) exit(1);
	if (lm_rank() != 0) exit(lm_worker_serve());
	lm_m4_check(lm_share_globals(), "share the globals"); }')
define(`MAIN_END', `{ lm_finalize(); exit(ifelse(`$1', `', `0', `$1')); }')

# Memory: shared, at the same address in every process.
# G_MALLOC and NU_MALLOC end their statement themselves, as in the
# distribution's null macros: several original codes write no semicolon
# after them (radix, LU contiguous, cholesky, fmm).  Use them only as
# the right-hand side of an assignment statement.
define(`G_MALLOC', `lm_malloc($1);')
define(`G_MALLOC_F', `lm_malloc($1)')
define(`NU_MALLOC', `lm_malloc($1);')
define(`NU_MALLOC_F', `lm_malloc($1)')
define(`G_FREE', `{ lm_free($1); }')
define(`G_FREE_F', `{ lm_free($1); }')
define(`NU_FREE', `{ lm_free($1); }')
define(`NU_FREE_F', `{ lm_free($1); }')

# Processes.
define(`CREATE', `ifelse(`$2', `', `{ lm_m4_check(lm_create($1), "create"); }',
`{ long lm_m4_i_; for (lm_m4_i_ = 0; lm_m4_i_ < ($2); lm_m4_i_++)
	lm_m4_check(lm_create($1), "create"); }')')
define(`WAIT_FOR_END', `{ lm_m4_check(lm_wait_for_end($1), "wait for end"); }')
define(`GET_PID', `{ ($1) = lm_rank(); }')
define(`GET_HOME', `{ ($1) = lm_cluster(); }')

# Locks.
define(`LOCKDEC', `int $1;')
define(`LOCKINIT', `{ ($1) = lm_m4_id(1); }')
define(`LOCK', `{ lm_m4_check(lm_lock($1), "lock"); }')
define(`UNLOCK', `{ lm_m4_check(lm_unlock($1), "unlock"); }')
# NLOCKDEC and friends are a second name for plain locks in the
# original macro set; they lock for real here.
define(`NLOCKDEC', `LOCKDEC($@)')
define(`NLOCKINIT', `LOCKINIT($@)')
define(`NLOCK', `LOCK($@)')
define(`NUNLOCK', `UNLOCK($@)')
define(`ALOCKDEC', `int $1[$2];')
define(`ALOCKINIT', `{ long lm_m4_i_; int lm_m4_first_ = lm_m4_id($2);
	for (lm_m4_i_ = 0; lm_m4_i_ < ($2); lm_m4_i_++)
		($1)[lm_m4_i_] = lm_m4_first_ + (int)lm_m4_i_; }')
define(`ALOCK', `{ lm_m4_check(lm_lock(($1)[$2]), "lock"); }')
define(`AULOCK', `{ lm_m4_check(lm_unlock(($1)[$2]), "unlock"); }')

# Barriers: BARINIT(b) and BARINIT(b, n) both reserve an id.
define(`BARDEC', `int $1;')
define(`LM_M4_COUNT', `ifelse(`$1', `', `0', `($1)')')
define(`BARINIT', `{ ($1) = lm_m4_id(1); }')
define(`BARRIER', `{ lm_m4_barrier($1, LM_M4_COUNT(`$2')); }')
# BARINCLUDE(b) and BAREXCLUDE(b) told the original runtimes which
# processes take part in a barrier; the count given to BARRIER is
# what counts here, so they are no-ops.
define(`BARINCLUDE', `{ ; }')
define(`BAREXCLUDE', `{ ; }')

# Pause flags.
define(`PAUSEDEC', `struct lm_m4_pause $1`'ifelse(`$2', `', `', `[$2]');')
define(`PAUSEINIT', `ifelse(`$2', `',
`{ ($1).lock = lm_m4_id(1); ($1).flag = 0; }',
`{ long lm_m4_i_; int lm_m4_first_ = lm_m4_id($2);
	for (lm_m4_i_ = 0; lm_m4_i_ < ($2); lm_m4_i_++) {
		($1)[lm_m4_i_].lock = lm_m4_first_ + (int)lm_m4_i_;
		($1)[lm_m4_i_].flag = 0; } }')')
define(`SETPAUSE', `{ lm_m4_check(lm_lock(($1).lock), "lock"); ($1).flag = 1;
	lm_m4_check(lm_unlock(($1).lock), "unlock"); }')
define(`CLEARPAUSE', `{ lm_m4_check(lm_lock(($1).lock), "lock"); ($1).flag = 0;
	lm_m4_check(lm_unlock(($1).lock), "unlock"); }')
define(`WAITPAUSE', `{ lm_m4_pause_wait(&($1)); }')
define(`EVENT', `')
define(`PAUSE', `{ ; }')

# Self-scheduling subscripts: GETSUB(g, sub, max, nprocs).
define(`GSDEC', `struct lm_m4_gsub $1;')
define(`GSINIT', `{ ($1).lock = lm_m4_id(1); ($1).next = 0; ($1).exhausted = 0; }')
define(`GETSUB', `{ ($2) = lm_m4_gsub_get(&($1), ($3), ($4)); }')
define(`NU_GSDEC', `GSDEC($@)')
define(`NU_GSINIT', `GSINIT($@)')
define(`NU_GETSUB', `GETSUB($@)')

# Time in microseconds, as an unsigned long.
define(`CLOCK', `{ ($1) = (unsigned long)lm_clock_us(); }')

# Simulator and tracing hooks of the original environment: no-ops.
define(`ENV', `')
define(`AUG_ON', `')
define(`AUG_OFF', `')
define(`TRACE_ON', `')
define(`TRACE_OFF', `')
define(`REF_TRACE_ON', `')
define(`REF_TRACE_OFF', `')
define(`DYN_TRACE_ON', `;')
define(`DYN_TRACE_OFF', `;')
define(`DYN_REF_TRACE_ON', `;')
define(`DYN_REF_TRACE_OFF', `;')
define(`DYN_SIM_ON', `;')
define(`DYN_SIM_OFF', `;')
define(`DYN_SCHED_ON', `;')
define(`DYN_SCHED_OFF', `;')
define(`AUG_SET_LOLIMIT', `;')
define(`AUG_SET_HILIMIT', `;')
define(`AUG_DELAY', `{ sleep($1); }')
define(`MENTER', `{ ; }')
define(`MEXIT', `{ ; }')
define(`MONINIT', `{ ; }')
define(`DELAY', `{ ; }')
define(`CONTINUE', `{ ; }')
define(`ST_LOG', `{ ; }')
define(`SET_HOME', `{ ; }')
define(`NOTE', `')
define(`NEWPROC', `')
define(`ADEC', `long $1;')
define(`AINIT', `{ ; }')
define(`PROBEND', `{ ; }')
divert(0)dnl
