divert(-1)
# PARMACS macros for SPLASH-2 programs on POSIX threads: the shared-memory
# baseline Lemuria is measured against.  Usage:
#     m4 splash2/macros/pthread.m4 prog.C > prog.c
# Every process of the program is a thread of one Unix process, G_MALLOC is
# plain (cache-line aligned) malloc, locks are mutexes and barriers a mutex +
# condition variable with a generation counter.  The runtime helpers are
# emitted by MAIN_ENV (definitions) and EXTERN_ENV (declarations only), so a
# program split over several files links once.
#
# The C text below must not contain backquotes or apostrophes: they are the
# m4 quote characters and the text is quoted.  Statement macros expand to a
# braced block so a SPLASH source may write them with or without a trailing
# semicolon; G_MALLOC and friends expand to an expression.

# ------------------------------------------------------------------
# Declarations shared by MAIN_ENV and EXTERN_ENV.  The include guard lets a
# translation unit expand both without redefinitions.
define(`LM_PT_DECLS', `
#ifndef LM_PT_DECLS_DONE
#define LM_PT_DECLS_DONE 1
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The standard macro sets give programs a page size (some SPLASH-2 codes
 * align on it); one of their own wins. */
#ifndef PAGE_SIZE
#define PAGE_SIZE 4096
#endif

/* Barrier whose size may be given at init time or at each wait. */
struct lm_pt_barrier {
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	unsigned long arrived;		/* arrivals in this generation */
	unsigned long generation;	/* bumped when a barrier completes */
	long size;			/* given at init, 0 when not */
};

/* A flag processes can wait on until another sets it. */
struct lm_pt_pause {
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	int flag;
};

/* Self-scheduling subscript counter shared by all processes. */
struct lm_pt_gsub {
	pthread_mutex_t mutex;
	long next;		/* next subscript to hand out */
	long exhausted;		/* processes told -1 since the last reset */
};

/* SPLASH process number of the calling thread: 0 for main. */
extern __thread long lm_pt_self;

void *lm_pt_malloc(size_t size);
void lm_pt_free(void *p);
void lm_pt_create(void (*fn)(void));
void lm_pt_wait_for_end(long n);
unsigned long lm_pt_clock_us(void);
void lm_pt_lock_init(pthread_mutex_t *m);
void lm_pt_barrier_init(struct lm_pt_barrier *b, long size);
void lm_pt_barrier_wait(struct lm_pt_barrier *b, long size);
void lm_pt_pause_init(struct lm_pt_pause *p);
void lm_pt_pause_set(struct lm_pt_pause *p);
void lm_pt_pause_clear(struct lm_pt_pause *p);
void lm_pt_pause_wait(struct lm_pt_pause *p);
void lm_pt_gsub_init(struct lm_pt_gsub *g);
long lm_pt_gsub_get(struct lm_pt_gsub *g, long max, long nprocs);
#endif
')

# ------------------------------------------------------------------
# The runtime.  A failure here leaves the SPLASH program nothing sensible to
# do (its macros have no error path), so it is reported and the program
# exits with status 1.
define(`LM_PT_RUNTIME', `
#include <errno.h>
#include <string.h>
#include <time.h>

__thread long lm_pt_self;

/* Threads started so far, oldest first, and how many were joined. */
static pthread_mutex_t lm_pt_table_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_t *lm_pt_table;
static long lm_pt_table_cap;
static long lm_pt_created;
static long lm_pt_joined;

struct lm_pt_start {
	void (*fn)(void);
	long id;
};

static void lm_pt_die(const char *what, int err)
{
	fprintf(stderr, "pthread macros: %s: %s\n", what, strerror(err));
	exit(1);
}

void *lm_pt_malloc(size_t size)
{
	void *p = NULL;

	/* Cache-line alignment keeps the shared blocks of different
	 * processes from sharing lines more than the program asks for. */
	if (posix_memalign(&p, 64, size ? size : 1) != 0)
		return NULL;
	return p;
}

void lm_pt_free(void *p)
{
	free(p);
}

/* Takes ownership of arg (a struct lm_pt_start from lm_pt_create). */
static void *lm_pt_trampoline(void *arg)
{
	struct lm_pt_start start = *(struct lm_pt_start *)arg;

	free(arg);
	lm_pt_self = start.id;
	start.fn();
	return NULL;
}

void lm_pt_create(void (*fn)(void))
{
	struct lm_pt_start *start;
	int rc;

	start = malloc(sizeof(*start));
	if (start == NULL)
		lm_pt_die("create", ENOMEM);
	start->fn = fn;
	pthread_mutex_lock(&lm_pt_table_mutex);
	if (lm_pt_created == lm_pt_table_cap) {
		long cap = lm_pt_table_cap ? 2 * lm_pt_table_cap : 16;
		pthread_t *t = realloc(lm_pt_table, cap * sizeof(*t));

		if (t == NULL)
			lm_pt_die("create", ENOMEM);
		lm_pt_table = t;
		lm_pt_table_cap = cap;
	}
	start->id = lm_pt_created + 1;
	rc = pthread_create(&lm_pt_table[lm_pt_created], NULL,
			    lm_pt_trampoline, start);
	if (rc != 0)
		lm_pt_die("create: pthread_create", rc);
	lm_pt_created++;
	pthread_mutex_unlock(&lm_pt_table_mutex);
}

/* Joins up to n threads not joined yet, oldest first. */
void lm_pt_wait_for_end(long n)
{
	while (n-- > 0) {
		pthread_t t;
		int rc;

		pthread_mutex_lock(&lm_pt_table_mutex);
		if (lm_pt_joined == lm_pt_created) {
			pthread_mutex_unlock(&lm_pt_table_mutex);
			return;
		}
		t = lm_pt_table[lm_pt_joined++];
		pthread_mutex_unlock(&lm_pt_table_mutex);
		/* Joined outside the table lock: the thread may still
		 * start others. */
		rc = pthread_join(t, NULL);
		if (rc != 0)
			lm_pt_die("wait for end: pthread_join", rc);
	}
}

unsigned long lm_pt_clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_sec * 1000000UL +
	       (unsigned long)ts.tv_nsec / 1000UL;
}

void lm_pt_lock_init(pthread_mutex_t *m)
{
	int rc = pthread_mutex_init(m, NULL);

	if (rc != 0)
		lm_pt_die("lock init", rc);
}

void lm_pt_barrier_init(struct lm_pt_barrier *b, long size)
{
	lm_pt_lock_init(&b->mutex);
	if (pthread_cond_init(&b->cond, NULL) != 0)
		lm_pt_die("barrier init", ENOMEM);
	b->arrived = 0;
	b->generation = 0;
	b->size = size;
}

/* size <= 0 means the size given at init.  Sleeping rather than
 * spinning keeps runs with more processes than cores honest. */
void lm_pt_barrier_wait(struct lm_pt_barrier *b, long size)
{
	unsigned long gen;

	if (size <= 0)
		size = b->size;
	if (size <= 0)
		lm_pt_die("barrier without a process count", EINVAL);
	pthread_mutex_lock(&b->mutex);
	gen = b->generation;
	if (++b->arrived >= (unsigned long)size) {
		b->arrived = 0;
		b->generation++;
		pthread_cond_broadcast(&b->cond);
	} else {
		while (gen == b->generation)
			pthread_cond_wait(&b->cond, &b->mutex);
	}
	pthread_mutex_unlock(&b->mutex);
}

void lm_pt_pause_init(struct lm_pt_pause *p)
{
	lm_pt_lock_init(&p->mutex);
	if (pthread_cond_init(&p->cond, NULL) != 0)
		lm_pt_die("pause init", ENOMEM);
	p->flag = 0;
}

void lm_pt_pause_set(struct lm_pt_pause *p)
{
	pthread_mutex_lock(&p->mutex);
	p->flag = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mutex);
}

void lm_pt_pause_clear(struct lm_pt_pause *p)
{
	pthread_mutex_lock(&p->mutex);
	p->flag = 0;
	pthread_mutex_unlock(&p->mutex);
}

void lm_pt_pause_wait(struct lm_pt_pause *p)
{
	pthread_mutex_lock(&p->mutex);
	while (!p->flag)
		pthread_cond_wait(&p->cond, &p->mutex);
	pthread_mutex_unlock(&p->mutex);
}

void lm_pt_gsub_init(struct lm_pt_gsub *g)
{
	lm_pt_lock_init(&g->mutex);
	g->next = 0;
	g->exhausted = 0;
}

/* Hands out 0..max, then -1; the counter restarts once all nprocs
 * processes have been told -1, so the loop it guards can run again. */
long lm_pt_gsub_get(struct lm_pt_gsub *g, long max, long nprocs)
{
	long sub;

	pthread_mutex_lock(&g->mutex);
	if (g->next <= max) {
		sub = g->next++;
	} else {
		sub = -1;
		if (++g->exhausted >= nprocs) {
			g->next = 0;
			g->exhausted = 0;
		}
	}
	pthread_mutex_unlock(&g->mutex);
	return sub;
}
')

# ------------------------------------------------------------------
# Environment.  MAIN_INITENV may be given arguments (old programs pass a
# shared-memory size); they are ignored.  MAIN_END(status) is our extension
# so a program can report failure; plain MAIN_END exits with 0.
define(`MAIN_ENV', `LM_PT_DECLS`'LM_PT_RUNTIME')
define(`EXTERN_ENV', `LM_PT_DECLS')
define(`MAIN_INITENV', `{ ; }')
define(`MAIN_END', `{ exit(ifelse(`$1', `', `0', `$1')); }')

# Memory.  The optional second argument (a node hint in some ports) is
# ignored.
# G_MALLOC and NU_MALLOC end their statement themselves, as in the
# distribution's null macros: several original codes write no semicolon
# after them (radix, LU contiguous, cholesky, fmm).  Use them only as
# the right-hand side of an assignment statement.
define(`G_MALLOC', `lm_pt_malloc($1);')
define(`G_MALLOC_F', `lm_pt_malloc($1)')
define(`NU_MALLOC', `lm_pt_malloc($1);')
define(`NU_MALLOC_F', `lm_pt_malloc($1)')
define(`G_FREE', `{ lm_pt_free($1); }')
define(`G_FREE_F', `{ lm_pt_free($1); }')
define(`NU_FREE', `{ lm_pt_free($1); }')
define(`NU_FREE_F', `{ lm_pt_free($1); }')

# Processes.  CREATE(fn) starts one process running void fn(void);
# CREATE(fn, n) starts n of them.
define(`CREATE', `ifelse(`$2', `', `{ lm_pt_create($1); }',
`{ long lm_pt_i_; for (lm_pt_i_ = 0; lm_pt_i_ < ($2); lm_pt_i_++)
	lm_pt_create($1); }')')
define(`WAIT_FOR_END', `{ lm_pt_wait_for_end($1); }')
define(`GET_PID', `{ ($1) = lm_pt_self; }')
define(`GET_HOME', `{ ($1) = 0; }')

# Locks.
define(`LOCKDEC', `pthread_mutex_t $1;')
define(`LOCKINIT', `{ lm_pt_lock_init(&($1)); }')
define(`LOCK', `{ pthread_mutex_lock(&($1)); }')
define(`UNLOCK', `{ pthread_mutex_unlock(&($1)); }')
# NLOCKDEC and friends are a second name for plain locks in the
# original macro set; they lock for real here.
define(`NLOCKDEC', `LOCKDEC($@)')
define(`NLOCKINIT', `LOCKINIT($@)')
define(`NLOCK', `LOCK($@)')
define(`NUNLOCK', `UNLOCK($@)')
define(`ALOCKDEC', `pthread_mutex_t $1[$2];')
define(`ALOCKINIT', `{ long lm_pt_i_; for (lm_pt_i_ = 0; lm_pt_i_ < ($2);
	lm_pt_i_++) lm_pt_lock_init(&($1)[lm_pt_i_]); }')
define(`ALOCK', `{ pthread_mutex_lock(&($1)[$2]); }')
define(`AULOCK', `{ pthread_mutex_unlock(&($1)[$2]); }')

# Barriers.  BARINIT(b) and BARINIT(b, n) are both in use; BARRIER(b, n)
# takes its count from the call, falling back to the one given at init.
define(`BARDEC', `struct lm_pt_barrier $1;')
define(`LM_PT_COUNT', `ifelse(`$1', `', `0', `($1)')')
define(`BARINIT', `{ lm_pt_barrier_init(&($1), LM_PT_COUNT(`$2')); }')
define(`BARRIER', `{ lm_pt_barrier_wait(&($1), LM_PT_COUNT(`$2')); }')
# BARINCLUDE(b) and BAREXCLUDE(b) told the original runtimes which
# processes take part in a barrier; the count given to BARRIER is
# what counts here, so they are no-ops.
define(`BARINCLUDE', `{ ; }')
define(`BAREXCLUDE', `{ ; }')

# Pause flags; PAUSEDEC(f, n) and PAUSEINIT(f, n) declare and initialise
# an array, the other three then take one element.
define(`PAUSEDEC', `struct lm_pt_pause $1`'ifelse(`$2', `', `', `[$2]');')
define(`PAUSEINIT', `ifelse(`$2', `', `{ lm_pt_pause_init(&($1)); }',
`{ long lm_pt_i_; for (lm_pt_i_ = 0; lm_pt_i_ < ($2); lm_pt_i_++)
	lm_pt_pause_init(&($1)[lm_pt_i_]); }')')
define(`SETPAUSE', `{ lm_pt_pause_set(&($1)); }')
define(`CLEARPAUSE', `{ lm_pt_pause_clear(&($1)); }')
define(`WAITPAUSE', `{ lm_pt_pause_wait(&($1)); }')
define(`EVENT', `')
define(`PAUSE', `{ ; }')

# Self-scheduling subscripts: GETSUB(g, sub, max, nprocs).
define(`GSDEC', `struct lm_pt_gsub $1;')
define(`GSINIT', `{ lm_pt_gsub_init(&($1)); }')
define(`GETSUB', `{ ($2) = lm_pt_gsub_get(&($1), ($3), ($4)); }')
define(`NU_GSDEC', `GSDEC($@)')
define(`NU_GSINIT', `GSINIT($@)')
define(`NU_GETSUB', `GETSUB($@)')

# Time in microseconds, as an unsigned long.
define(`CLOCK', `{ ($1) = lm_pt_clock_us(); }')

# Simulator and tracing hooks of the original environment: no-ops here.
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
