/* Barrier updates (lemuriad/updates.c) at their limits: the encoded
 * updates of one release stay within the budget, a page whose update
 * would pass it is left out (its holders invalidate), one client's
 * list stops at LM_UPDATES_CLIENT_MAX, and a copy its client does not
 * use stops getting updates after LM_UPDATES_IDLE_MAX. */
#include "unit.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "proto.h"
#include "updates.h"

#define PAGE 4096u
#define WRITER 0u /* slot and rank of the client that writes */
#define HOLDER 1u /* slot and rank of the client that holds copies */

/* What the lemuriad does with a flushed diff, for the masks alone. */
static int note_diff(lm_updates *u, uint32_t page, uint32_t slot,
		     const uint8_t *diff, size_t len)
{
	struct lm_delta *w = lm_updates_writer_mask(u, page, slot);

	if (!w)
		return -1;
	lm_delta_mark_valid_diff(w, diff, len);
	return 0;
}

/* The update of a page written whole, encoded as the module does: one
 * run of the page's bytes. */
static size_t whole_page_update_len(void)
{
	static uint8_t twin[PAGE], page[PAGE], out[2 * PAGE];
	size_t len = 0;

	memset(page, 0xa5, sizeof(page));
	CU_ASSERT_FATAL(lm_diff_encode(twin, page, PAGE, out, sizeof(out),
				       &len) == 0);
	return len;
}

/* `npages` pages written whole by WRITER and held by HOLDER; returns
 * HOLDER's update list of the release (n and copies filled in). */
static lm_updates *epoch_of_whole_pages(uint32_t npages, size_t budget,
					struct lm_notice *n,
					const uint8_t **copies,
					uint8_t *data)
{
	static uint8_t twin[PAGE], diff[2 * PAGE];
	lm_updates *u = lm_updates_create(PAGE, npages, 2, budget);
	size_t dlen;

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	for (uint32_t p = 0; p < npages; p++) {
		uint8_t *copy = data + (size_t)p * PAGE;

		memset(copy, (int)(p % 250 + 1), PAGE);
		CU_ASSERT_FATAL(lm_diff_encode(twin, copy, PAGE, diff,
					       sizeof(diff), &dlen) == 0);
		lm_updates_hold(u, HOLDER, p);
		CU_ASSERT_FATAL(note_diff(u, p, WRITER, diff, dlen) == 0);
		n[p] = (struct lm_notice){ .page = p, .version = 2, .base = 1,
					   .writer = WRITER, .wcluster = 0 };
		copies[p] = copy;
	}
	CU_ASSERT_FATAL(lm_updates_prepare(u, n, npages, copies, NULL,
					   NULL, NULL) == 0);
	return u;
}

/* The bytes of each update equal the writer's page. */
static void check_list(const struct lm_msg_diffs *list,
		       const uint8_t *data)
{
	static uint8_t page[PAGE];
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t p, k = 0;

	while (lm_msg_diffs_next(list, &pos, &p, &diff, &len) == 1) {
		CU_ASSERT_EQUAL(p, k++);
		memset(page, 0, sizeof(page));
		CU_ASSERT_EQUAL(lm_diff_apply(page, PAGE, diff, len), 0);
		CU_ASSERT_EQUAL(memcmp(page, data + (size_t)p * PAGE, PAGE),
				0);
	}
	CU_ASSERT_EQUAL(k, list->count);
}

/* A budget of exactly three updates: three go, the fourth page is left
 * out and counted. */
static void test_updates_fill_the_budget_exactly(void)
{
	static uint8_t data[4 * PAGE];
	const uint8_t *copies[4];
	struct lm_notice n[4];
	struct lm_msg_diffs list;
	size_t len = whole_page_update_len();
	lm_updates *u = epoch_of_whole_pages(4, 3 * len, n, copies, data);

	lm_updates_for_client(u, HOLDER, HOLDER, n, 4, &list);
	CU_ASSERT_EQUAL(list.count, 3);
	CU_ASSERT_EQUAL(list.len, 3 * (LM_MSG_DIFFS_ENTRY_HDR + len));
	check_list(&list, data);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_sent, 3);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->update_bytes, 3 * len);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_capped, 1);
	/* the writer keeps its own copies: nothing for it */
	lm_updates_for_client(u, WRITER, WRITER, n, 4, &list);
	CU_ASSERT_EQUAL(list.count, 0);
	lm_updates_destroy(u);

	/* one byte less: the third no longer fits */
	u = epoch_of_whole_pages(4, 3 * len - 1, n, copies, data);
	lm_updates_for_client(u, HOLDER, HOLDER, n, 4, &list);
	CU_ASSERT_EQUAL(list.count, 2);
	check_list(&list, data);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_capped, 2);
	lm_updates_destroy(u);
}

/* One client's list stops at LM_UPDATES_CLIENT_MAX (the budget is
 * larger); the pages after it are counted as capped. */
static void test_client_list_stops_at_its_maximum(void)
{
	enum { NP = 2200 };
	uint8_t *data = malloc((size_t)NP * PAGE);
	const uint8_t **copies = calloc(NP, sizeof(*copies));
	struct lm_notice *n = calloc(NP, sizeof(*n));
	size_t entry = LM_MSG_DIFFS_ENTRY_HDR + whole_page_update_len();
	uint32_t fit = (uint32_t)(LM_UPDATES_CLIENT_MAX / entry);
	struct lm_msg_diffs list;
	lm_updates *u;

	CU_ASSERT_FATAL(data && copies && n);
	CU_ASSERT_FATAL(fit < NP);
	u = epoch_of_whole_pages(NP, 2 * (size_t)NP * PAGE, n, copies, data);
	lm_updates_for_client(u, HOLDER, HOLDER, n, NP, &list);
	CU_ASSERT_EQUAL(list.count, fit);
	CU_ASSERT_EQUAL(list.len, fit * entry);
	check_list(&list, data);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_capped, NP - fit);
	lm_updates_destroy(u);
	free(data);
	free(copies);
	free(n);
}

/* A client's list is as large as the mask budget (an eighth of the
 * cache), within LM_UPDATES_CLIENT_MIN..MAX. */
static void test_list_limit_follows_the_budget(void)
{
	const size_t budgets[] = { 4096, LM_UPDATES_CLIENT_MIN,
				   3u << 20, LM_UPDATES_CLIENT_MAX,
				   64u << 20 };
	const size_t want[] = { LM_UPDATES_CLIENT_MIN, LM_UPDATES_CLIENT_MIN,
				3u << 20, LM_UPDATES_CLIENT_MAX,
				LM_UPDATES_CLIENT_MAX };

	for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
		lm_updates *u = lm_updates_create(PAGE, 4, 2, budgets[i]);

		CU_ASSERT_PTR_NOT_NULL_FATAL(u);
		CU_ASSERT_EQUAL(lm_updates_list_max(u), want[i]);
		lm_updates_destroy(u);
	}
}

/* One release of page 0 written by WRITER (a byte that changes each
 * time): the pages of HOLDER's and WRITER's lists. */
static void release_of_page0(lm_updates *u, uint8_t *copy, uint32_t epoch,
			     struct lm_msg_diffs *holder,
			     struct lm_msg_diffs *writer)
{
	static uint8_t twin[PAGE], diff[2 * PAGE];
	struct lm_notice n = { .page = 0, .version = epoch + 1,
			       .base = epoch, .writer = WRITER,
			       .wcluster = 0 };
	const uint8_t *copies[1] = { copy };
	size_t dlen;

	memcpy(twin, copy, PAGE);
	copy[epoch % PAGE] ^= 0x5a;
	CU_ASSERT_FATAL(lm_diff_encode(twin, copy, PAGE, diff, sizeof(diff),
				       &dlen) == 0);
	lm_updates_hold(u, WRITER, 0); /* the lemuriad got its FLUSH */
	CU_ASSERT_FATAL(note_diff(u, 0, WRITER, diff, dlen) == 0);
	CU_ASSERT_FATAL(lm_updates_prepare(u, &n, 1, copies, NULL, NULL,
					   NULL) == 0);
	lm_updates_for_client(u, HOLDER, HOLDER, &n, 1, holder);
	/* WRITER's own copy is kept; a third client wrote nothing either */
	lm_updates_for_client(u, 2, 2, &n, 1, writer);
	lm_updates_epoch_end(u);
}

/* A copy that takes LM_UPDATES_IDLE_MAX updates in a row without its
 * client fetching or writing the page is left out of the next release
 * (the client invalidates it) and no longer counts as held; a fetch
 * makes it a holder again with a fresh count.  The writer's copy is
 * never dropped. */
static void test_idle_copies_stop_getting_updates(void)
{
	static uint8_t copy[PAGE];
	struct lm_msg_diffs holder, other;
	lm_updates *u = lm_updates_create(PAGE, 4, 3, 1u << 20);
	uint32_t epoch = 1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	lm_updates_hold(u, HOLDER, 0);
	for (uint32_t i = 0; i < LM_UPDATES_IDLE_MAX; i++, epoch++) {
		release_of_page0(u, copy, epoch, &holder, &other);
		CU_ASSERT_EQUAL(holder.count, 1);
		CU_ASSERT_EQUAL(other.count, 0); /* holds nothing */
		CU_ASSERT_TRUE(lm_updates_wanted(u, 0));
	}
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_idle, 0);
	release_of_page0(u, copy, epoch++, &holder, &other);
	CU_ASSERT_EQUAL(holder.count, 0);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_idle, 1);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_sent,
			LM_UPDATES_IDLE_MAX);
	/* only the writer holds it now: its copy is kept, not updated */
	CU_ASSERT_TRUE(lm_updates_wanted(u, 0));
	release_of_page0(u, copy, epoch++, &holder, &other);
	CU_ASSERT_EQUAL(holder.count, 0);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_idle, 1);

	/* the client reads the page again: a PAGE makes it a holder */
	lm_updates_hold(u, HOLDER, 0);
	for (uint32_t i = 0; i < LM_UPDATES_IDLE_MAX; i++, epoch++) {
		release_of_page0(u, copy, epoch, &holder, &other);
		CU_ASSERT_EQUAL(holder.count, 1);
	}
	/* and a fetch in between starts the count afresh */
	lm_updates_hold(u, HOLDER, 0);
	release_of_page0(u, copy, epoch++, &holder, &other);
	CU_ASSERT_EQUAL(holder.count, 1);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_idle, 1);
	lm_updates_destroy(u);
}

/* Releases of page 1, written by another cluster, while HOLDER keeps its
 * copy and does nothing with it; returns how many went before the page
 * was no longer wanted (fetched for the copy), at most `most`. */
static uint32_t fetched_for_idle_copy(lm_updates *u, uint8_t *old,
				      uint8_t *copy, uint32_t *epoch,
				      uint32_t most)
{
	const uint8_t *copies[1] = { copy }, *olds[1] = { old };
	struct lm_msg_diffs list;
	uint32_t sent = 0;

	while (sent < most && lm_updates_wanted(u, 1)) {
		struct lm_notice n = { .page = 1, .version = *epoch + 1,
				       .base = *epoch, .writer = 7,
				       .wcluster = 1 };

		memcpy(old, copy, PAGE);
		copy[*epoch % PAGE] ^= 0x44; /* the other cluster's write */
		CU_ASSERT_FATAL(lm_updates_prepare(u, &n, 1, copies, olds,
						   NULL, NULL) == 0);
		lm_updates_for_client(u, HOLDER, HOLDER, &n, 1, &list);
		CU_ASSERT_EQUAL(list.count, 1);
		lm_updates_epoch_end(u);
		(*epoch)++;
		sent++;
	}
	return sent;
}

/* The release of page 1 when it was not fetched: the holder drops its
 * copy, as an idle one. */
static void release_without_copy(lm_updates *u, uint32_t *epoch)
{
	struct lm_notice n = { .page = 1, .version = *epoch + 1,
			       .base = *epoch, .writer = 7, .wcluster = 1 };
	const uint8_t *none[1] = { NULL };
	struct lm_msg_diffs list;

	CU_ASSERT_FATAL(lm_updates_prepare(u, &n, 1, none, NULL, NULL,
					   NULL) == 0);
	lm_updates_for_client(u, HOLDER, HOLDER, &n, 1, &list);
	CU_ASSERT_EQUAL(list.count, 0);
	lm_updates_epoch_end(u);
	(*epoch)++;
}

/* A page another cluster wrote, held here by one client that does not
 * touch it: the lemuriad fetches it for LM_UPDATES_FETCH_IDLE_MAX
 * updates only, then the copy is dropped.  A client that fetches the
 * page again after that reads it: from then on the page is fetched for
 * its copy over LM_UPDATES_IDLE_MAX updates. */
static void test_idle_copy_is_not_fetched_for(void)
{
	static uint8_t old[PAGE], copy[PAGE];
	lm_updates *u = lm_updates_create(PAGE, 2, 2, 1u << 20);
	uint32_t epoch = 1, idle, read;

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	lm_updates_hold(u, HOLDER, 1);
	idle = fetched_for_idle_copy(u, old, copy, &epoch, 10);
	CU_ASSERT_EQUAL(idle, LM_UPDATES_FETCH_IDLE_MAX);
	CU_ASSERT_FALSE(lm_updates_wanted(u, 1));
	CU_ASSERT_FALSE(lm_updates_wanted(u, 0)); /* never held */
	release_without_copy(u, &epoch);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_idle, 1);

	lm_updates_hold(u, HOLDER, 1); /* read again: a reader */
	read = fetched_for_idle_copy(u, old, copy, &epoch, 10);
	CU_ASSERT_EQUAL(read, LM_UPDATES_IDLE_MAX);
	CU_ASSERT(idle < read);
	CU_ASSERT_FALSE(lm_updates_wanted(u, 1));
	release_without_copy(u, &epoch);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_idle, 2);
	lm_updates_hold(u, HOLDER, 1); /* and it stays one */
	CU_ASSERT_EQUAL(fetched_for_idle_copy(u, old, copy, &epoch, 10),
			LM_UPDATES_IDLE_MAX);
	lm_updates_destroy(u);
}

/* A client that writes the page (its FLUSH makes it a holder) gets the
 * other writers' bytes at every release, however many: writing is use. */
static void test_writers_copies_are_never_idle(void)
{
	static uint8_t twin[PAGE], copy[PAGE], diff[2 * PAGE];
	lm_updates *u = lm_updates_create(PAGE, 1, 2, 1u << 20);
	struct lm_msg_diffs list;
	size_t dlen;

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	for (uint32_t e = 1; e <= 3 * LM_UPDATES_IDLE_MAX; e++) {
		struct lm_notice n = { .page = 0, .version = e + 1, .base = e,
				       .writer = LM_WRITER_MANY,
				       .wcluster = 0 };
		const uint8_t *copies[1] = { copy };

		/* both write a byte of their own */
		for (uint32_t s = 0; s < 2; s++) {
			memcpy(twin, copy, PAGE);
			copy[s * 64 + e % 64] ^= 0x33;
			CU_ASSERT_FATAL(lm_diff_encode(twin, copy, PAGE, diff,
						       sizeof(diff),
						       &dlen) == 0);
			lm_updates_hold(u, s, 0);
			CU_ASSERT_FATAL(note_diff(u, 0, s, diff, dlen) == 0);
		}
		CU_ASSERT_FATAL(lm_updates_prepare(u, &n, 1, copies, NULL,
						   NULL, NULL) == 0);
		lm_updates_for_client(u, 1, 1, &n, 1, &list);
		CU_ASSERT_EQUAL(list.count, 1);
		lm_updates_epoch_end(u);
	}
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_idle, 0);
	lm_updates_destroy(u);
}

/* lm_updates_encode_ahead's view of the lemuriad's copy. */
struct ahead_copy {
	const uint8_t *data;
	uint64_t tag;
};

static const uint8_t *ahead_copy_of(void *ctx, uint32_t page, uint64_t *tag)
{
	const struct ahead_copy *a = ctx;

	(void)page;
	*tag = a->tag;
	return a->data;
}

/* Writers 0 and 1 each change every other byte of alternate groups of
 * page 0 (both also hold it); copy gets both.  Returns the updates. */
static lm_updates *two_writers(uint8_t *twin, uint8_t mine[2][PAGE],
			       uint8_t *copy)
{
	static uint8_t diff[2 * PAGE];
	lm_updates *u = lm_updates_create(PAGE, 2, 2, 1u << 20);

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	for (size_t i = 0; i < PAGE; i++)
		twin[i] = (uint8_t)(i * 5);
	memcpy(copy, twin, PAGE);
	for (uint32_t w = 0; w < 2; w++) {
		size_t dlen;

		memcpy(mine[w], twin, PAGE);
		for (size_t i = w * 64; i < PAGE; i += 128)
			for (size_t k = i; k < i + 64; k += 2)
				copy[k] = mine[w][k] ^= 0x5a;
		CU_ASSERT_FATAL(lm_diff_encode(twin, mine[w], PAGE, diff,
					       sizeof(diff), &dlen) == 0);
		lm_updates_hold(u, w, 0);
		CU_ASSERT_FATAL(note_diff(u, 0, w, diff, dlen) == 0);
	}
	return u;
}

/* The same, every writer's update then encoded ahead from a's copy. */
static lm_updates *two_writers_ahead(uint8_t *twin, uint8_t mine[2][PAGE],
				     uint8_t *copy, struct ahead_copy *a)
{
	lm_updates *u = two_writers(twin, mine, copy);

	CU_ASSERT_FALSE(lm_updates_encode_ahead(u, ahead_copy_of, a, 8));
	return u;
}

/* The one update of page n[0] in `slot`'s list. */
static void only_update(lm_updates *u, uint32_t slot,
			const struct lm_notice *n, const uint8_t **upd,
			size_t *ulen)
{
	struct lm_msg_diffs list;
	size_t pos = 0;
	uint32_t p;

	lm_updates_for_client(u, slot, slot, n, 1, &list);
	CU_ASSERT_EQUAL_FATAL(list.count, 1);
	CU_ASSERT_FATAL(lm_msg_diffs_next(&list, &pos, &p, upd, ulen) == 1);
	CU_ASSERT_EQUAL(p, n[0].page);
}

/* Each writer's update applied to its own page gives `want` (writers
 * from `first` on). */
static void check_writers_get(lm_updates *u, const struct lm_notice *n,
			      uint8_t mine[2][PAGE], const uint8_t *want,
			      uint32_t first)
{
	static uint8_t page[PAGE];

	for (uint32_t s = first; s < 2; s++) {
		const uint8_t *upd;
		size_t ulen;

		only_update(u, s, n, &upd, &ulen);
		memcpy(page, mine[s], PAGE);
		CU_ASSERT_EQUAL(lm_diff_apply(page, PAGE, upd, ulen), 0);
		CU_ASSERT_EQUAL(memcmp(page, want, PAGE), 0);
	}
}

/* Prepares the release of page 0 with `tags`, checks the writers'
 * updates (from `first` on) against copies[0], and that `ahead` updates
 * went as encoded ahead. */
static void release_two_writers(lm_updates *u, const struct lm_notice *n,
				const uint8_t *const *copies,
				const uint64_t *tags, uint8_t mine[2][PAGE],
				uint32_t first, uint64_t ahead)
{
	CU_ASSERT_FATAL(lm_updates_prepare(u, n, 1, copies, NULL, NULL,
					   tags) == 0);
	check_writers_get(u, n, mine, copies[0], first);
	CU_ASSERT_EQUAL(lm_updates_stats(u)->updates_ahead, ahead);
}

/* Updates encoded ahead of the release are sent when nothing changed
 * since: no FLUSH of the page, the same copy with the same tag, no other
 * cluster's bytes.  Otherwise the release encodes them again from what
 * it has then. */
static void test_updates_encoded_ahead(void)
{
	static uint8_t twin[PAGE], mine[2][PAGE], copy[PAGE], diff[2 * PAGE];
	struct lm_notice n = { .page = 0, .version = 2, .base = 1,
			       .writer = LM_WRITER_MANY, .wcluster = 0 };
	const uint8_t *copies[1] = { copy };
	struct ahead_copy a = { copy, 7 };
	uint64_t tags[1] = { 7 };
	lm_updates *u;
	size_t dlen;

	/* nothing changed: both updates go as encoded ahead */
	u = two_writers_ahead(twin, mine, copy, &a);
	release_two_writers(u, &n, copies, tags, mine, 0, 2);
	/* a new epoch forgets them */
	lm_updates_epoch_end(u);
	CU_ASSERT_FALSE(lm_updates_encode_ahead(u, ahead_copy_of, &a, 8));
	lm_updates_destroy(u);

	/* the copy changed (a new tag): encoded again from the new bytes */
	u = two_writers_ahead(twin, mine, copy, &a);
	copy[0] ^= 0x11; /* writer 0's byte: writer 1 must see the change */
	tags[0] = 8;
	release_two_writers(u, &n, copies, tags, mine, 1, 0);
	lm_updates_destroy(u);

	/* a FLUSH after: writer 0 wrote more, which writer 1 must get */
	tags[0] = 7;
	u = two_writers_ahead(twin, mine, copy, &a);
	memcpy(twin, mine[0], PAGE);
	copy[1] = mine[0][1] ^= 0x77;
	CU_ASSERT_FATAL(lm_diff_encode(twin, mine[0], PAGE, diff,
				       sizeof(diff), &dlen) == 0);
	CU_ASSERT_FATAL(note_diff(u, 0, 0, diff, dlen) == 0);
	release_two_writers(u, &n, copies, tags, mine, 0, 0);
	lm_updates_destroy(u);

	/* without tags (or with another copy) nothing ahead is used */
	u = two_writers_ahead(twin, mine, copy, &a);
	release_two_writers(u, &n, copies, NULL, mine, 0, 0);
	lm_updates_destroy(u);
}

/* Encoding ahead goes max_pages pages a call, skips pages with one
 * writer here, and stops within the budget (the rest at the release). */
static void test_encode_ahead_is_bounded(void)
{
	static uint8_t copy[PAGE], diff[2 * PAGE], page[PAGE];
	struct ahead_copy a = { copy, 1 };
	lm_updates *u = lm_updates_create(PAGE, 3, 2, 1u << 20);
	size_t dlen;

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	/* pages 0 and 1 written by both clients, page 2 by one */
	for (uint32_t p = 0; p < 3; p++)
		for (uint32_t s = 0; s < (p < 2 ? 2u : 1u); s++) {
			memset(page, 0, sizeof(page));
			page[s] = 1;
			CU_ASSERT_FATAL(lm_diff_encode(copy, page, PAGE, diff,
						       sizeof(diff),
						       &dlen) == 0);
			CU_ASSERT_FATAL(note_diff(u, p, s, diff, dlen) == 0);
		}
	CU_ASSERT_TRUE(lm_updates_encode_ahead(u, ahead_copy_of, &a, 1));
	CU_ASSERT_TRUE(lm_updates_encode_ahead(u, ahead_copy_of, &a, 1));
	CU_ASSERT_FALSE(lm_updates_encode_ahead(u, ahead_copy_of, &a, 1));
	lm_updates_destroy(u);

	/* a budget for the masks and less than one page's updates: none
	 * fits, and it says it is done */
	u = lm_updates_create(PAGE, 3, 2, 2 * (PAGE / 8 + 64) + 4);
	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	for (uint32_t s = 0; s < 2; s++) {
		memset(page, 0xff, sizeof(page));
		CU_ASSERT_FATAL(lm_diff_encode(copy, page, PAGE, diff,
					       sizeof(diff), &dlen) == 0);
		CU_ASSERT_FATAL(note_diff(u, 0, s, diff, dlen) == 0);
	}
	CU_ASSERT_FALSE(lm_updates_encode_ahead(u, ahead_copy_of, &a, 8));
	lm_updates_destroy(u);
}

/* Pages written by `writers` clients each (at most WRITERS), and held by
 * one more that wrote nothing: writer w changes the bytes i with i %
 * writers == w, and writers 0 and 1 both changed bytes 64..127 (ordered
 * by a lock: the copy has the last writer's value).  Every client's
 * update applied to its own page must give the copy: writer 0 needs
 * writer 1's bytes 64..127 although it wrote them too.  Then a writer
 * flushes again, bytes others wrote among them, before the lists are
 * made again.  Five writers with room for everything; then three with a
 * budget that the holder's updates soon fill (the writers' go into their
 * own lists and must all be there). */
#define WRITERS 5u
#define MPAGES 8u

static void write_as(uint8_t *mine, uint8_t *copy, uint32_t w,
		     uint32_t writers, uint8_t salt)
{
	for (size_t i = w; i < PAGE; i += writers)
		copy[i] = mine[i] ^= salt;
	if (w < 2) /* both change these, writer 1 after writer 0 */
		for (size_t i = 64; i < 128; i++)
			copy[i] = mine[i] ^= (uint8_t)(0x40 + w);
}

static void flush_as(lm_updates *u, uint32_t page, uint32_t w,
		     const uint8_t *twin, const uint8_t *mine)
{
	static uint8_t diff[2 * PAGE];
	size_t dlen;

	CU_ASSERT_FATAL(lm_diff_encode(twin, mine, PAGE, diff, sizeof(diff),
				       &dlen) == 0);
	CU_ASSERT_FATAL(note_diff(u, page, w, diff, dlen) == 0);
}

/* Each client's list applied to its pages gives the copies; returns how
 * many pages disagreed. */
static int clients_get_copies(lm_updates *u, const struct lm_notice *n,
			      uint8_t (*mine)[WRITERS + 1][PAGE],
			      uint8_t (*copy)[PAGE], uint32_t writers,
			      bool roomy)
{
	static uint8_t page[PAGE];
	int wrong = 0;

	for (uint32_t s = 0; s <= writers; s++) {
		struct lm_msg_diffs list;
		const uint8_t *upd;
		size_t pos = 0, ulen;
		uint32_t p;

		lm_updates_for_client(u, s, s, n, MPAGES, &list);
		/* the writers' updates go straight into their lists; the
		 * holder's come from the release's arena, which a small
		 * budget fills after a few pages (the rest invalidated) */
		if (s < writers || roomy)
			CU_ASSERT_EQUAL(list.count, MPAGES);
		while (lm_msg_diffs_next(&list, &pos, &p, &upd, &ulen) == 1) {
			CU_ASSERT_FATAL(p < MPAGES);
			memcpy(page, mine[p][s], PAGE);
			CU_ASSERT_EQUAL(lm_diff_apply(page, PAGE, upd, ulen),
					0);
			wrong += memcmp(page, copy[p], PAGE) != 0;
			memcpy(mine[p][s], page, PAGE);
		}
	}
	return wrong;
}

static void test_many_writers_get_each_others_bytes(void)
{
	static uint8_t twin[MPAGES][WRITERS + 1][PAGE];
	static uint8_t mine[MPAGES][WRITERS + 1][PAGE], copy[MPAGES][PAGE];
	/* 8 pages of 3 masks of 576 bytes fit 16000 */
	static const size_t budgets[] = { 1u << 20, 16000 };
	static const uint32_t nwriters[] = { WRITERS, 3 };
	struct lm_notice n[MPAGES];
	const uint8_t *copies[MPAGES];

	for (size_t b = 0; b < 2; b++) {
		uint32_t writers = nwriters[b];
		lm_updates *u = lm_updates_create(PAGE, MPAGES, writers + 1,
						  budgets[b]);

		CU_ASSERT_PTR_NOT_NULL_FATAL(u);
		for (uint32_t p = 0; p < MPAGES; p++) {
			for (size_t i = 0; i < PAGE; i++)
				copy[p][i] = (uint8_t)(i * 7 + p);
			for (uint32_t s = 0; s <= writers; s++) {
				memcpy(mine[p][s], copy[p], PAGE);
				memcpy(twin[p][s], copy[p], PAGE);
				lm_updates_hold(u, s, p);
			}
			for (uint32_t w = 0; w < writers; w++)
				write_as(mine[p][w], copy[p], w, writers, 0x5a);
			for (uint32_t w = 0; w < writers; w++)
				flush_as(u, p, w, twin[p][w], mine[p][w]);
			n[p] = (struct lm_notice){ .page = p, .version = 2,
						   .base = 1,
						   .writer = LM_WRITER_MANY,
						   .wcluster = 0 };
			copies[p] = copy[p];
		}
		CU_ASSERT_FATAL(lm_updates_prepare(u, n, MPAGES, copies, NULL,
						   NULL, NULL) == 0);
		CU_ASSERT_EQUAL(clients_get_copies(u, n, mine, copy, writers,
						   b == 0),
				0);

		/* writer 2 then changes bytes 200..263, the others' too
		 * (after them, under a lock) and flushes again: the others
		 * must get them, what was known of the page's writers
		 * renewed */
		for (uint32_t p = 0; p < MPAGES; p++) {
			memcpy(twin[p][2], mine[p][2], PAGE);
			for (size_t i = 200; i < 264; i++)
				copy[p][i] = mine[p][2][i] ^= 0x0f;
			flush_as(u, p, 2, twin[p][2], mine[p][2]);
		}
		CU_ASSERT_FATAL(lm_updates_prepare(u, n, MPAGES, copies, NULL,
						   NULL, NULL) == 0);
		CU_ASSERT_EQUAL(clients_get_copies(u, n, mine, copy, writers,
						   b == 0),
				0);
		CU_ASSERT_EQUAL(lm_updates_stats(u)->mask_overflows, 0);
		lm_updates_destroy(u);
	}
}

/* Applies `slot`'s update of page 0 to a page of 0xee bytes and checks
 * that exactly [lo, hi) and [lo2, hi2) came, with copy's values. */
static void check_update_covers(lm_updates *u, uint32_t slot,
				const struct lm_notice *n,
				const uint8_t *copy, size_t lo, size_t hi,
				size_t lo2, size_t hi2)
{
	static uint8_t page[PAGE];
	const uint8_t *upd;
	size_t ulen;

	only_update(u, slot, n, &upd, &ulen);
	memset(page, 0xee, sizeof(page));
	CU_ASSERT_EQUAL_FATAL(lm_diff_apply(page, PAGE, upd, ulen), 0);
	for (size_t i = 0; i < PAGE; i++) {
		bool sent = (i >= lo && i < hi) || (i >= lo2 && i < hi2);

		if (page[i] != (sent ? copy[i] : 0xee)) {
			CU_FAIL("an update's bytes are not the other writer's");
			return;
		}
	}
}

/* Slots 64 apart share a bit of the page's writer filter: the second
 * FLUSH of one of them must still find its own mask, so that neither
 * gets its own bytes back nor loses the other's. */
static void test_writers_64_slots_apart_keep_their_masks(void)
{
	static uint8_t copy[PAGE], a[PAGE], b[PAGE], twin[PAGE];
	enum { A = 3, B = 67 };
	lm_updates *u = lm_updates_create(PAGE, 1, 70, 1u << 20);
	struct lm_notice n = { .page = 0, .version = 2, .base = 1,
			       .writer = LM_WRITER_MANY, .wcluster = 0 };
	const uint8_t *copies[1] = { copy };

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	for (size_t i = 0; i < PAGE; i++)
		copy[i] = (uint8_t)(i * 13 + 1);
	memcpy(twin, copy, PAGE);
	memcpy(a, copy, PAGE);
	memcpy(b, copy, PAGE);
	lm_updates_hold(u, A, 0);
	lm_updates_hold(u, B, 0);
	for (size_t i = 0; i < 100; i++)
		copy[i] = a[i] ^= 0x11;
	flush_as(u, 0, A, twin, a);
	for (size_t i = 1000; i < 1100; i++)
		copy[i] = b[i] ^= 0x22;
	flush_as(u, 0, B, twin, b);
	memcpy(twin, b, PAGE);
	for (size_t i = 2000; i < 2050; i++)
		copy[i] = b[i] ^= 0x33;
	flush_as(u, 0, B, twin, b);
	CU_ASSERT_FATAL(lm_updates_prepare(u, &n, 1, copies, NULL, NULL,
					   NULL) == 0);
	check_update_covers(u, A, &n, copy, 1000, 1100, 2000, 2050);
	check_update_covers(u, B, &n, copy, 0, 100, 0, 0);
	lm_updates_destroy(u);
}

/* A FLUSH from a slot past the cluster's clients gets no mask, and the
 * epoch no updates: the others' would lack its bytes. */
static void test_writer_slot_out_of_range_stops_updates(void)
{
	static uint8_t copy[PAGE], mine[PAGE], twin[PAGE];
	lm_updates *u = lm_updates_create(PAGE, 1, 2, 1u << 20);
	struct lm_notice n = { .page = 0, .version = 2, .base = 1,
			       .writer = LM_WRITER_MANY, .wcluster = 0 };
	const uint8_t *copies[1] = { copy };
	struct lm_msg_diffs list;

	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	lm_updates_hold(u, HOLDER, 0);
	memset(mine, 0x11, 100);
	memcpy(copy, mine, PAGE);
	flush_as(u, 0, WRITER, twin, mine);
	CU_ASSERT_PTR_NULL(lm_updates_writer_mask(u, 0, 2));
	CU_ASSERT_FATAL(lm_updates_prepare(u, &n, 1, copies, NULL, NULL,
					   NULL) == 0);
	lm_updates_for_client(u, HOLDER, HOLDER, &n, 1, &list);
	CU_ASSERT_EQUAL(list.count, 0);
	lm_updates_destroy(u);
}

LM_TEST_SUITE("updates", LM_TEST(test_updates_fill_the_budget_exactly),
	      LM_TEST(test_client_list_stops_at_its_maximum),
	      LM_TEST(test_list_limit_follows_the_budget),
	      LM_TEST(test_idle_copies_stop_getting_updates),
	      LM_TEST(test_idle_copy_is_not_fetched_for),
	      LM_TEST(test_writers_copies_are_never_idle),
	      LM_TEST(test_updates_encoded_ahead),
	      LM_TEST(test_encode_ahead_is_bounded),
	      LM_TEST(test_many_writers_get_each_others_bytes),
	      LM_TEST(test_writers_64_slots_apart_keep_their_masks),
	      LM_TEST(test_writer_slot_out_of_range_stops_updates))
