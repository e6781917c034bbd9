/* The harness of the lemuriad's unit tests (tests/test_lemuriad.c,
 * test_fetches.c, test_locks.c, test_release.c, test_cache.c,
 * test_notices.c, test_parking.c): a state machine of cluster c0 in
 * conf/4+4.ini (ranks 0..3) or of a layout given as text, decoded
 * messages put in as if from its clients or its reflector, and every
 * message it emits captured (outs[]) to be checked. */
#ifndef LM_TESTS_LEMURIAD_UTIL_H
#define LM_TESTS_LEMURIAD_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "lemuriad.h"
#include "log.h"
#include "proto.h"

#define HASH 0x1234abcd5678ef00ull
#define RUN 100u
#define MAX_OUT 64

/* A notice of a page written by several ranks of several clusters: it
 * keeps no copy, whatever the copy's version. */
#define NOTE(p, v) { (p), (v), 0, LM_WRITER_MANY, LM_WRITER_MANY }

enum how { SENT, REQUESTED, REPLIED };

/* One captured message, deep-copied so it outlives the callback. */
struct out {
	enum how how;
	uint16_t node;
	uint32_t req_id;
	struct lm_msg m;
	uint8_t *data;
	uint8_t *diffs;
	struct lm_notice *notices;
};

enum fresh_how { FRESH_WORKER, FRESH_CREATOR, FRESH_KEPT };

/* The update a RELEASE to `rank` carries for `page`: its runs as
 * (offset, length, first byte) triples in *runs (at most 4); -1 when it
 * carries none for the page. */
struct run_list {
	uint32_t (*runs)[3];
	int n;
};

extern struct out outs[MAX_OUT];

extern size_t nouts;

void record(enum how how, uint16_t node, uint32_t req_id,
	    const struct lm_msg *m);

void out_send(void *ctx, uint16_t node, const struct lm_msg *m);

void out_request(void *ctx, uint16_t node, uint32_t req_id,
		 const struct lm_msg *m);

void out_reply(void *ctx, uint16_t node, uint32_t req_id,
	       const struct lm_msg *m);

extern const struct lm_msg_out out_cbs;

/* The daemon's later(), counted: a test with it drives the cluster's
 * background work itself (lm_lemuriad_background). */
extern int laters;

void out_later(void *ctx);

extern const struct lm_msg_out out_cbs_later;

extern const struct lm_msg_out *out_now;

void clear_outs(void);

extern struct lm_layout *layout;

extern uint16_t refl; /* node id of r0 */

lm_lemuriad *setup_path(const char *path);

/* conf/4+4.ini with the lazy relay these tests describe (the layout's
 * default is adaptive), and the fetch ahead of `prefetch = 7`. */
extern const char lazy_layout[];
/* lazy_layout with its first `line` (which it must hold) made `instead`,
 * into out (which it must fit). */
void lazy_layout_with(char *out, size_t cap, const char *line,
		      const char *instead);

lm_lemuriad *setup(void);

/* setup() under copy = cluster: the lemuriad makes the cluster's copy at
 * the first JOIN and hands it to each client; join_all_shared joins the
 * four clients as this process, taking (and closing) each copy handed. */
lm_lemuriad *setup_shared(void);
lm_lemuriad *setup_shared_text(const char *text);
void join_all_shared(lm_lemuriad *c, uint64_t run);
/* ... each client handing the lemuriad a userfaultfd (common/copy_set.h)
 * registered on one view of the copy's pages, which it returns (NULL
 * when this kernel has no userfaultfd for us).  With `ufd` not NULL the
 * test keeps that userfaultfd there (-1 with NULL returned). */
uint8_t *join_all_shared_waiting(lm_lemuriad *c, uint64_t run, int *ufd);

void teardown(lm_lemuriad *c);

uint16_t node_of(uint32_t rank);

struct lm_msg msg(uint16_t type, uint64_t run);

/* A request from client `rank`. */
void creq(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
	  const struct lm_msg *m);

void join(lm_lemuriad *c, uint32_t rank, uint64_t run);

void join_all(lm_lemuriad *c, uint64_t run);

void fetch(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
	   uint32_t page);

/* The reflector answers request req_id with page at version, filled with
 * byte `fill`. */
void r_page_poked(lm_lemuriad *c, uint32_t req_id, uint32_t page,
		  uint32_t version, uint8_t fill, size_t at, size_t n,
		  uint8_t val);

void r_page(lm_lemuriad *c, uint32_t req_id, uint32_t page,
	    uint32_t version, uint8_t fill);

/* The reflector answers FETCHV req_id with PAGES holding one entry,
 * `entry` (len bytes) under `note`, or none when note is NULL. */
void r_pages_one(lm_lemuriad *c, uint32_t req_id,
		 const struct lm_notice *note, const uint8_t *entry,
		 size_t len);

/* The reflector answers FETCHV req_id with PAGES holding `page` at
 * version, filled with `fill` but n bytes of `val` at `at`; page
 * UINT32_MAX: with no page at all. */
void r_pages_poked(lm_lemuriad *c, uint32_t req_id, uint32_t page,
		   uint32_t version, uint8_t fill, size_t at, size_t n,
		   uint8_t val);

/* The reflector answers FETCHV req_id with PAGES holding, for `page`,
 * a diff against our copy at `base`: n bytes of `val` at `at`. */
void r_pages_diff(lm_lemuriad *c, uint32_t req_id, uint32_t page,
		  uint32_t version, uint32_t base, size_t at, size_t n,
		  uint8_t val);

/* Puts page into the cache at version (filled with `fill`). */
void cache_page(lm_lemuriad *c, uint32_t page, uint32_t version,
		uint8_t fill);

/* True when a FETCH of page is answered from the cache (and then the
 * output is cleared; a miss's upstream FETCH is left for the caller). */
bool is_cached(lm_lemuriad *c, uint32_t page);

struct out *find_out(enum how how, uint16_t node, uint16_t type);
/* Our FETCH or FETCHV (`type`) up to the reflector whose first page is
 * `page`, or NULL. */
struct out *find_fetch_up(uint16_t type, uint32_t page);

/* A client's FETCHV of pages[0..n) (rank, req_id) whose fault reached
 * `reach` pages after the first (the first notice's version). */
void creq_fetchv_reach(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
		       const uint32_t *pages, uint32_t n, uint32_t reach);

/* ... reaching as far as the layout lets it. */
void creq_fetchv(lm_lemuriad *c, uint32_t rank, uint32_t req_id,
		 const uint32_t *pages, uint32_t n);

/* A client's FETCHV of pages[0..n) (rank 0, req_id 31). */
void fetchv(lm_lemuriad *c, const uint32_t *pages, uint32_t n);

/* The one message out, a client's read miss on `page` sent up as a
 * FETCH, is answered by the reflector; returns the FETCHV ahead that the
 * lemuriad sends then (NULL: none). */
struct out *miss_answered(lm_lemuriad *c, uint32_t page, uint8_t fill);

/* The reflector answers FETCHV req_id with PAGES holding whole pages
 * pages[0..n), each at version and filled with its own number. */
void r_pages_whole(lm_lemuriad *c, uint32_t req_id,
		   const uint32_t *pages, uint32_t n, uint32_t version);

/* ... the PAGES tagged with ntags registrations (lm_msg_tag_put). */
void r_pages_tagged(lm_lemuriad *c, uint32_t req_id, const uint32_t *pages,
		    uint32_t n, uint32_t version, uint8_t *tags,
		    uint32_t ntags);

/* A FLUSH of one diff setting bytes [off, off + n) of page to val. */
size_t make_flush(uint8_t *list, size_t cap, uint32_t page,
		  size_t off, size_t n, uint8_t val);

void barrier(lm_lemuriad *c, uint32_t rank, uint32_t id);

/* The lock's manager asks for the token back. */
void recall(lm_lemuriad *c, uint32_t id, uint32_t rank);

/* A LOCK or UNLOCK of lock `id` from client `rank`. */
void lock_op(lm_lemuriad *c, uint16_t type, uint32_t rank,
	     uint32_t req_id, uint32_t id);

/* How many messages of `type` went to the reflector. */
int ups_of(uint16_t type);

/* Rank 2 holds lock 12's token here and has unlocked it; rank 1 has
 * just been given work (FRESH_WORKER), or rank 0 has just created some
 * (FRESH_CREATOR), or work waits here for rank 1, which has asked for
 * nothing yet (FRESH_KEPT); none has synchronised since. */
lm_lemuriad *token_with_fresh_client(enum fresh_how how);

/* token_with_fresh_client, recalled: the token must stay. */
lm_lemuriad *recalled_with_fresh_client(enum fresh_how how);

/* Rank `rank` takes lock 12 and gives it back; returns the UNLOCKs that
 * went up meanwhile. */
int lock_unlock(lm_lemuriad *c, uint32_t rank, uint32_t req_id);

void r_end(lm_lemuriad *c, uint32_t rank, const struct lm_notice *n,
	   uint32_t nn);

extern const char small_layout[];

/* Loads `text` as the layout through a temporary file. */
lm_lemuriad *setup_text(const char *text);

/* small_layout: a cache of three pages. */
lm_lemuriad *setup_small(void);

/* Client `rank` flushes one diff setting [off, off + n) of page to val;
 * the FLUSH and its FLUSH_OK are cleared. */
void flush_page(lm_lemuriad *c, uint32_t rank, uint32_t page,
		size_t off, size_t n, uint8_t val);

/* R releases barrier id without notices; the replies are cleared. */
void release(lm_lemuriad *c, uint32_t id);

/* The homes answer every REGISTER among the outputs: a NEW entry holding
 * version v gets v + 1 when `merge`, else v + 2 (someone wrote between);
 * one holding none gets `fresh`.  Returns how many were answered; the
 * answered requests are removed from the outputs. */
int answer_registers(lm_lemuriad *c, bool merge, uint32_t fresh);

/* Every client arrives at barrier id, the cluster's BARRIER goes up, and
 * R releases it with notices n; what that made is left in the outputs. */
void arrive_and_release(lm_lemuriad *c, uint32_t id,
			const struct lm_notice *n, uint32_t nn);

/* The same, every client answered at once; the outputs are cleared. */
void barrier_release(lm_lemuriad *c, uint32_t id,
		     const struct lm_notice *n, uint32_t nn);

/* Fetches page from the cache: its version, and byte `at` in *byte.
 * False on a miss (whose upstream FETCH is cleared). */
bool cached_version(lm_lemuriad *c, uint32_t page, size_t at,
		    uint32_t *version, uint8_t *byte);

/* Anything short of "our copy at base, every diff ours" invalidates:
 * another cluster wrote, several clusters wrote, or the copy is not at
 * the base (it missed some of the epoch's diffs, or is older). */
extern const char updates_off_layout[];

/* Like barrier_release, but the clients' RELEASE replies stay in the
 * outputs for the caller. */
void barrier_release_kept(lm_lemuriad *c, uint32_t id,
			  const struct lm_notice *n, uint32_t nn);

/* Like barrier_release_kept when the RELEASE is held for a fetch of
 * `page`: the FETCHV asking for it (alone) is outs[0] on return, and no
 * client has its RELEASE yet. */
void barrier_release_held(lm_lemuriad *c, uint32_t id,
			  const struct lm_notice *n, uint32_t nn,
			  uint32_t page);

int note_update_run(void *ctx, size_t offset, const uint8_t *bytes,
		    size_t len);

/* The first runs (offset, length, first byte) of the update of `page` in
 * the RELEASE rank got; their count. */
int update_runs(uint32_t rank, uint32_t page, uint32_t runs[4][3]);

/* How many of the outputs are of `type` to client `rank`. */
size_t count_outs(uint32_t rank, uint16_t type);

/* Sends PULL{page, version} from the reflector; returns the DELTA. */
const struct out *pull(lm_lemuriad *c, uint32_t page,
		       uint32_t version);

/* The byte at `off` of the one diff a DELTA carries, after applying it
 * to a page of `fill`. */
uint8_t delta_byte(const struct out *d, size_t off, uint8_t fill);

/* Log lines at warn or above, counted by a sink. */
extern size_t loud_lines;

void count_loud(void *ctx, enum lm_log_level level, const char *msg);

/* Rank 1 takes lock 3 from R, R recalls it, rank 1 writes page 12 and
 * unlocks: the outputs are then UNLOCK_OK, the REGISTER of page 12,
 * unanswered, and right behind it the token's UNLOCK to R. */
void unlock_recalled_lock(lm_lemuriad *c);

/* Rank `rank` asks for lock `id` (request req). */
void lock_req(lm_lemuriad *c, uint32_t rank, uint32_t req, uint32_t id);

void unlock_req(lm_lemuriad *c, uint32_t rank, uint32_t req,
		uint32_t id);

/* The first GRANT brings the token; rank 1 asked with request 300. */
void token_arrives(lm_lemuriad *c, uint32_t id);

/* Page traces (lemuriad/page_trace.h): the lines of cluster c0's trace
 * in dir, at most max of them, asserting that the clock never goes back;
 * the file is removed.  trace_line: where `what` ("set 9 3 2": event,
 * page, version, more, as many words as given) stands among them, -1
 * when absent. */
int trace_read(const char *dir, char lines[][96], int max);
int trace_line(char lines[][96], int n, const char *what);

/* Deltas sent with their data (eager relay) are no longer here to be
 * written on top of a copy: a FETCH must ask for their versions, so that
 * no reflector's cache answers with a copy from before them
 * (dsmtest counters on several reflectors). */
lm_lemuriad *setup_eager(void);


lm_lemuriad *staged_release(void);

#endif
