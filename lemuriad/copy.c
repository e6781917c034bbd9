/* The cluster's one copy under `copy = cluster` (DESIGN.md §2 "One copy
 * per cluster", docs/dsm.md "One copy per cluster"): a memory object made
 * per run, handed to each client that joins, pages installed in it as
 * they are fetched, and the cluster's writes sealed from it into the
 * open deltas where a client's FLUSH would have put them.  The object's
 * own rules are in common/cluster_copy.h. */
#include "lemuriad_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy_set.h"
#include "diff.h"
#include "globals_desc.h"
#include "fdpass.h"
#include "lm_error.h"
#include "wire.h"

/* Client `slot`'s userfaultfd, out of the watched set and closed. */
static void drop_uffd(lm_lemuriad *c, uint32_t slot)
{
	if (c->set_uffd[slot] < 0)
		return;
	(void)epoll_ctl(c->uffd_watch, EPOLL_CTL_DEL, c->set_uffd[slot],
			NULL);
	close(c->set_uffd[slot]);
	c->set_uffd[slot] = -1;
}

/* The clients' userfaultfds, and the connections they come on. */
static void sets_close(lm_lemuriad *c)
{
	for (uint32_t i = 0; c->set_conn && i < c->nclients; i++) {
		if (c->set_conn[i] >= 0)
			close(c->set_conn[i]);
		c->set_conn[i] = -1;
		drop_uffd(c, i);
	}
	lm_copy_filler_close(&c->filler);
}

void lm_copy_wake_waiting(lm_lemuriad *c)
{
	struct epoll_event ev[16];
	int n = epoll_wait(c->uffd_watch, ev, 16, 0);

	for (int i = 0; i < n; i++) {
		uint32_t slot = ev[i].data.u32;

		if (slot < c->nclients && c->set_uffd[slot] >= 0)
			c->stats.copy_late_wakes += lm_copy_set_wake_waiting(
				c->set_uffd[slot], c->layout->base,
				(uint64_t)c->npages * c->page_size);
	}
}

void lm_copy_stop(lm_lemuriad *c)
{
	sets_close(c);
	free(c->copy_idle);
	c->copy_idle = NULL;
	c->copy_kept = 0;
	c->copy_keep_spent = 0;
	free(c->copy_pulled);
	c->copy_pulled = NULL;
	free(c->copy_stale);
	c->copy_stale = NULL;
	free(c->copy_stale_on);
	c->copy_stale_on = NULL;
	c->ncopy_stale = 0;
	free(c->copy_notes);
	c->copy_notes = NULL;
	c->copy_notes_cap = 0;
	if (c->copy.map)
		munmap(c->copy.map, c->copy.size);
	if (c->copy.fd >= 0)
		close(c->copy.fd);
	memset(&c->copy, 0, sizeof(c->copy));
	c->copy.fd = -1;
}

void lm_copy_end_run(lm_lemuriad *c)
{
	lm_copy_stop(c);
	free(c->aliased);
	c->aliased = NULL;
}

int lm_copy_start(lm_lemuriad *c)
{
	struct lm_ccopy_hdr g;
	char name[LM_NAME_MAX + 32];
	void *map;
	int fd;

	lm_copy_stop(c);
	if (!c->shared)
		return 0;
	if (lm_ccopy_geometry((uint32_t)c->npages, c->page_size, &g))
		return LM_EINVAL;
	snprintf(name, sizeof(name), "lemuria-copy-%s", c->cfg->name);
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	/* only our user may open it again (through /proc/PID/fd) */
	if (fd < 0 || fchmod(fd, 0600) != 0 ||
	    ftruncate(fd, (off_t)g.size) != 0 ||
	    /* a client cannot shrink it under the others (SIGBUS) */
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		lm_log_error("cluster %s: cannot make the cluster's copy "
			     "(%llu bytes): %s", c->cfg->name,
			     (unsigned long long)g.size, strerror(errno));
		if (fd >= 0)
			close(fd);
		return LM_EIO;
	}
	map = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		lm_log_error("cluster %s: cannot map the cluster's copy: %s",
			     c->cfg->name, strerror(errno));
		close(fd);
		return LM_EIO;
	}
	lm_ccopy_format(map, &g, c->run);
	if (lm_ccopy_attach(&c->copy, map, g.size, (uint32_t)c->npages,
			    c->page_size)) {
		munmap(map, g.size);
		close(fd);
		return LM_EINVAL;
	}
	c->copy.fd = fd;
	/* sets of pages go in as one (common/copy_set.h) when the kernel
	 * lets us; else page by page, as the log says once */
	if (lm_copy_filler_open(&c->filler, fd, g.pages_off,
				(size_t)c->npages * c->page_size, name,
				sizeof(name)))
		lm_log_info("cluster %s: pages of other clusters go into the "
			    "copy one by one: %s", c->cfg->name, name);
	return 0;
}

int lm_copy_give(lm_lemuriad *c, int slot, uint32_t pid,
		 const uint8_t *name, size_t len)
{
	char sock[LM_FDPASS_NAME_MAX], err[256];

	if (c->copy.fd < 0)
		return LM_EIO;
	if (len == 0 || len >= sizeof(sock) || memchr(name, '\0', len)) {
		lm_log_error("cluster %s: a JOIN under copy = cluster names "
			     "no socket for the copy", c->cfg->name);
		return LM_EINVAL;
	}
	memcpy(sock, name, len);
	sock[len] = '\0';
	if (c->set_conn[slot] >= 0)
		close(c->set_conn[slot]);
	drop_uffd(c, (uint32_t)slot);
	if (lm_fdpass_send_keep(sock, pid, c->copy.fd,
				c->filler.uffd >= 0 ? &c->set_conn[slot] : NULL,
				err, sizeof(err))) {
		lm_log_error("cluster %s: cannot hand the cluster's copy to "
			     "pid %u: %s", c->cfg->name, pid, err);
		return LM_EUNREACH;
	}
	return 0;
}

/* A page's lock stayed taken past LM_CCOPY_LOCK_WAIT_US: its holder, a
 * client, died inside its fault, and the run is lost. */
static void lose_locked(lm_lemuriad *c, uint32_t page)
{
	char why[96];

	snprintf(why, sizeof(why), "page %u of the cluster's copy stayed "
		 "locked (a client died inside its fault?)", page);
	c->hooks.lose(c, why);
}

/* Client `slot`'s userfaultfd goes into the watched set: a fault of
 * its whose wake the kernel lost is woken again (lm_copy_wake_waiting).
 * Should the kernel refuse, such a fault waits for the next set or
 * stop's wake instead. */
static void watch_uffd(lm_lemuriad *c, uint32_t slot)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = slot };

	if (epoll_ctl(c->uffd_watch, EPOLL_CTL_ADD, c->set_uffd[slot], &ev))
		lm_log_limited("userfaultfds not watched", LM_LOG_WARN,
			       "cluster %s: rank %u: its userfaultfd is not "
			       "watched: %s", c->cfg->name,
			       slot_rank(c, (int)slot), strerror(errno));
}

/* Whether every client of the run handed us its userfaultfd, so that a
 * set can go in as one; those that came since the last look are taken
 * now.  A client that closed without one (its kernel refused) leaves
 * the run's sets page by page, said once. */
static bool sets_ready(lm_lemuriad *c)
{
	bool ready = c->filler.uffd >= 0;
	char err[256];

	for (uint32_t i = 0; ready && i < c->nclients; i++) {
		int rc;

		if (!c->clients[i].joined || c->clients[i].left ||
		    c->set_uffd[i] >= 0)
			continue;
		if (c->set_conn[i] < 0)
			return false;
		rc = lm_fdpass_take(c->set_conn[i], &c->set_uffd[i], err,
				    sizeof(err));
		if (rc == 1)
			return false;
		if (rc == 0)
			watch_uffd(c, i);
		close(c->set_conn[i]);
		c->set_conn[i] = -1;
		if (rc != 0) {
			lm_log_info("cluster %s: rank %u: %s; pages of other "
				    "clusters go into the copy one by one",
				    c->cfg->name, slot_rank(c, (int)i), err);
			return false;
		}
	}
	return ready;
}

static int item_cmp(const void *a, const void *b)
{
	const struct lm_copy_set_item *x = a, *y = b;

	return x->page < y->page ? -1 : x->page > y->page;
}

void lm_copy_note_aliases(lm_lemuriad *c, const uint8_t *data, size_t len)
{
	struct lm_globals_desc d;
	uint64_t first, n;

	/* the copy may not exist yet: a worker's CREATE can come before
	 * the first JOIN makes it, and sets must still leave these pages
	 * alone once it does */
	if (!c->shared || !lm_globals_desc_get(data, len, &d) ||
	    d.pages < c->layout->base)
		return;
	first = (d.pages - c->layout->base) / c->page_size;
	n = (d.hi - d.lo + c->page_size - 1) / c->page_size;
	if (first >= c->npages)
		return;
	if (!c->aliased && !(c->aliased = calloc(c->npages, 1)))
		return; /* sets then punch them: readers there see holes */
	for (uint64_t p = first; p < first + n && p < c->npages; p++)
		c->aliased[p] = 1;
}

void lm_copy_install_set(lm_lemuriad *c, struct lm_copy_set_item *items,
			 uint32_t n)
{
	uint32_t whole = n;
	int rc = 0;

	if (!c->copy.map || n == 0)
		return;
	qsort(items, n, sizeof(*items), item_cmp);
	/* pages the clients also map at their globals go in place, after */
	if (c->aliased) {
		whole = 0;
		for (uint32_t i = 0; i < n; i++)
			if (!c->aliased[items[i].page]) {
				struct lm_copy_set_item t = items[whole];

				items[whole++] = items[i];
				items[i] = t;
			}
		qsort(items, whole, sizeof(*items), item_cmp);
	}
	if (whole && !sets_ready(c)) {
		if (whole > 1)
			c->stats.copy_sets_split++;
	} else if (whole) {
		rc = lm_copy_set_install(&c->copy, &c->filler, items, whole,
					 c->set_uffd, c->nclients,
					 c->layout->base,
					 (uint64_t)c->npages * c->page_size);
		if (rc == LM_ETIMEDOUT) {
			lose_locked(c, items[0].page);
			return;
		}
		if (rc > 0) {
			c->stats.copy_sets++;
			c->stats.copy_set_pages += (uint64_t)rc;
			c->stats.copy_installs += (uint64_t)rc;
		}
	}
	/* the rest (twinned pages, byte by byte) after: a no-op for those
	 * in already */
	for (uint32_t i = 0; i < n; i++) {
		LM_PAGE_TRACE(c->trace, "set", items[i].page,
			      items[i].version, n);
		lm_copy_install(c, items[i].page, items[i].version,
				items[i].data);
	}
}

void lm_copy_install(lm_lemuriad *c, uint32_t page, uint32_t version,
		     const uint8_t *data)
{
	if (!c->copy.map || page >= c->npages)
		return;
	int rc = lm_ccopy_install(&c->copy, page, version, data);

	if (rc == 0) {
		c->stats.copy_installs++;
		LM_PAGE_TRACE(c->trace, "install", page, version, 0);
	}
	if (rc >= 0)
		return;
	lose_locked(c, page);
}

void lm_copy_advance(lm_lemuriad *c, const struct lm_notice *n,
		     uint32_t count)
{
	if (!c->copy.map)
		return;
	for (uint32_t i = 0; n && i < count; i++)
		if (n[i].wcluster == c->index && n[i].page < c->npages)
			lm_ccopy_advance(&c->copy, n[i].page, n[i].base,
					 n[i].version);
}

const struct lm_notice *lm_copy_client_notices(lm_lemuriad *c,
					       const struct lm_notice *n,
					       uint32_t count, uint32_t *kept)
{
	uint32_t k = 0;

	*kept = count;
	if (!c->copy.map || count == 0)
		return n;
	if (count > c->copy_notes_cap) {
		struct lm_notice *v = realloc(c->copy_notes,
					      count * sizeof(*v));

		if (!v)
			return n; /* the clients apply the same rule */
		c->copy_notes = v;
		c->copy_notes_cap = count;
	}
	for (uint32_t i = 0; i < count; i++) {
		if (n[i].page < c->npages &&
		    lm_ccopy_covers(&c->copy, &n[i], c->index))
			continue;
		c->copy_notes[k++] = n[i];
	}
	c->stats.copy_notices_held += count - k;
	*kept = k;
	return c->copy_notes;
}

/* ---- pages the cluster owns (docs/dsm.md "Pages one cluster owns") -- */

void lm_copy_own(lm_lemuriad *c, const struct lm_msg *ok)
{
	if (!c->copy.map)
		return;
	for (size_t off = 0; off + 4 <= ok->data_len; off += 4) {
		uint32_t page = lm_get32(ok->data + off), have, want = 0;
		bool named = false;
		struct cpage *cp;

		if (page >= c->npages)
			continue;
		for (uint32_t i = 0; i < ok->nnotices; i++)
			if (ok->notices[i].page == page) {
				want = ok->notices[i].version;
				named = true;
			}
		/* the copy must hold every change the home has: else another
		 * cluster's, not here yet, would be lost under our page.  And
		 * the entry the grant marked must still be there: a PULL that
		 * came before this answer took it as a delta (the home's
		 * answer and its PULL cross, the answer waiting for the other
		 * homes), and from then on the home expects our writes in
		 * deltas again */
		if (!named || !lm_ccopy_version(&c->copy, page, &have) ||
		    have != want ||
		    (c->copy_pulled &&
		     c->copy_pulled[page] == c->batch_started)) {
			c->stats.copy_own_refused++;
			continue;
		}
		if (lm_ccopy_own(&c->copy, page) != 0) {
			lose_locked(c, page);
			return;
		}
		/* the home pulls the whole page now; our cached copy would
		 * go stale under the clients' writes */
		lm_deltas_forget(c->deltas, page);
		cp = lm_cache_find(c, page);
		if (cp)
			lm_cache_remove(c, cp);
		if (c->copy_idle)
			c->copy_idle[page] = 0;
		c->stats.copy_owned++;
	}
}

/* The buffer a seal or a recall snapshots a page into (and a seal
 * encodes its diff into), made at the first use. */
static uint8_t *seal_buf(lm_lemuriad *c)
{
	if (!c->sealbuf)
		c->sealbuf = malloc(lm_ccopy_seal_buf_size(c->page_size));
	return c->sealbuf;
}

void lm_copy_pulled(lm_lemuriad *c, uint32_t page)
{
	if (!c->copy.map || page >= c->npages)
		return;
	if (!c->copy_pulled &&
	    !(c->copy_pulled = calloc(c->npages, sizeof(*c->copy_pulled)))) {
		/* no memory to remember it: no grant is taken from now on */
		c->hooks.lose(c, "no memory for the cluster copy's table of "
			      "pulled pages");
		return;
	}
	c->copy_pulled[page] = c->batch_started;
}

int lm_copy_recall(lm_lemuriad *c, uint32_t page, uint8_t *out, size_t cap,
		   size_t *len, bool *unwritten)
{
	int rc;

	if (!c->copy.map || page >= c->npages ||
	    !lm_ccopy_is_owned(&c->copy, page))
		return 1;
	if (!seal_buf(c))
		return LM_ENOMEM;
	rc = lm_ccopy_recall(&c->copy, page, c->sealbuf, unwritten);
	if (rc == LM_ETIMEDOUT) {
		lose_locked(c, page);
		return rc;
	}
	if (rc)
		return rc;
	if (c->copy_idle)
		c->copy_idle[page] = 0;
	c->stats.copy_recalls++;
	c->stats.copy_recalls_unwritten += *unwritten;
	return lm_diff_encode_whole(c->sealbuf, c->page_size, out, cap, len);
}

void lm_copy_note_known(lm_lemuriad *c, uint32_t page)
{
	uint32_t v;

	if (!c->copy.map || page >= c->npages ||
	    !lm_ccopy_version(&c->copy, page, &v) || v >= c->known[page])
		return;
	if (!c->copy_stale &&
	    (!(c->copy_stale = calloc(c->npages, sizeof(*c->copy_stale))) ||
	     !(c->copy_stale_on = calloc(c->npages, 1)))) {
		free(c->copy_stale); /* the pages stay held: nothing lost */
		c->copy_stale = NULL;
		return;
	}
	if (c->copy_stale_on[page])
		return;
	c->copy_stale_on[page] = 1;
	c->copy_stale[c->ncopy_stale++] = page;
}

/* At a barrier, with every client waiting: pages the copy holds older
 * than a notice we applied, that nobody here wrote since (no twin) and
 * that we neither cache nor fetch, leave the copy, and the next
 * registration tells their homes, so that a cluster that writes one of
 * them alone may come to own it.  The clients closed their views of
 * them when they took the notices; the drops count makes sure.  Only the
 * pages listed by lm_copy_note_known are looked at; those that may go
 * later (twinned, cached, fetched now) stay listed. */
static int forget_stale(lm_lemuriad *c)
{
	uint32_t v, forgotten = 0, keep = 0;

	for (uint32_t i = 0; i < c->ncopy_stale; i++) {
		uint32_t p = c->copy_stale[i];

		if (!lm_ccopy_version(&c->copy, p, &v) || v >= c->known[p] ||
		    lm_ccopy_is_owned(&c->copy, p)) {
			c->copy_stale_on[p] = 0; /* stale no more */
			continue;
		}
		if (lm_ccopy_is_twinned(&c->copy, p) || lm_cache_find(c, p) ||
		    lm_upreq_fetch_of(c, p) ||
		    lm_deltas_drop(c->deltas, p) != 0) {
			c->copy_stale[keep++] = p; /* perhaps next time */
			continue;
		}
		c->copy_stale_on[p] = 0;
		if (lm_ccopy_forget(&c->copy, p) != 0) {
			lose_locked(c, p);
			return LM_ETIMEDOUT;
		}
		forgotten++;
	}
	c->ncopy_stale = keep;
	if (forgotten) {
		atomic_fetch_add_explicit(&c->copy.hdr->drops, 1,
					  memory_order_release);
		c->stats.copy_forgotten += forgotten;
	}
	return 0;
}

/* One sealed diff, taken as a client's FLUSH is (lemuriad.c), with no
 * writer rank: the cluster's processes wrote it together. */
static int take_diff(void *ctx, uint32_t page, const uint8_t *diff,
		     size_t len)
{
	lm_lemuriad *c = ctx;
	int rc = lm_cache_take_diff(c, page, LM_WRITER_MANY, NULL, diff, len);

	if (rc == 0)
		c->stats.copy_sealed_bytes += len;
	return rc;
}

static void check_copy(lm_lemuriad *c);

/* lm_ccopy_writers' stop: every client's writes wait, or go on. */
static bool stop_writers(void *ctx, bool on)
{
	lm_lemuriad *c = ctx;

	return (!on || sets_ready(c)) &&
	       lm_copy_set_stop_writers(c->set_uffd, c->nclients,
					c->layout->base,
					(uint64_t)c->npages * c->page_size,
					on);
}

/* A barrier's seal: idle twins go as LM_LEMURIAD_KEEP_COMPARES_PER_CLIENT
 * says (lemuriad.h). */
static int seal_at_barrier(lm_lemuriad *c)
{
	struct lm_ccopy_drop drop = {
		.all = c->copy_keep_spent >=
		       (uint64_t)LM_LEMURIAD_KEEP_COMPARES_PER_CLIENT *
			       c->nclients,
		.stale = c->copy_stale_on,
	};
	int rc = lm_ccopy_seal(&c->copy, c->sealbuf, c->copy_idle, &drop,
			       take_diff, c);

	c->copy_kept = drop.kept;
	if (drop.all)
		c->copy_keep_spent = 0;
	return rc;
}

int lm_copy_seal(lm_lemuriad *c, bool barrier)
{
	uint64_t drops;
	int rc;

	if (!c->copy.map)
		return 0;
	if (!seal_buf(c))
		return LM_ENOMEM;
	if (!c->copy_idle && !(c->copy_idle = calloc(c->npages, 1)))
		return LM_ENOMEM;
	drops = atomic_load(&c->copy.hdr->drops);
	/* the twins kept at the last barrier are compared again: once at a
	 * barrier, twice in a seal of one instant (counted so also when one
	 * read found every page clean: the budget was set so) */
	c->copy_keep_spent += (uint64_t)c->copy_kept * (barrier ? 1 : 2);
	/* at a barrier every client waits: one read is one instant */
	rc = barrier ? seal_at_barrier(c) :
		       lm_ccopy_seal_at_once(&c->copy, c->sealbuf,
					     c->copy_idle, take_diff, c,
					     &(struct lm_ccopy_writers){
						     stop_writers, c,
						     &c->stats.copy_seal_reads });
	c->sealed = true; /* the pulse after this message takes the time */
	if (rc == 0 && barrier)
		rc = forget_stale(c);
	c->stats.copy_seals++;
	if (atomic_load(&c->copy.hdr->drops) != drops)
		c->stats.copy_drops++;
	if (rc == 0 && barrier && c->check_copy)
		check_copy(c);
	return rc;
}

/* LEMURIA_CHECK_COPY (docs/dsm.md "One copy per cluster"): at a barrier,
 * once its seal has put every write of the cluster into our cached
 * copies, each page the shared copy holds at the version of our cached
 * copy must equal it byte for byte; the first that differs ends the run,
 * naming the page and the first byte. */
static void check_copy(lm_lemuriad *c)
{
	char why[160];

	for (struct cpage *cp = c->lru_head; cp; cp = cp->next) {
		const uint8_t *live;
		uint32_t v;

		if (!lm_ccopy_version(&c->copy, cp->page, &v) ||
		    v != cp->version)
			continue;
		live = lm_ccopy_page(&c->copy, cp->page);
		c->stats.copy_checked++;
		if (memcmp(live, cp->data, c->page_size) == 0)
			continue;
		for (uint32_t i = 0; i < c->page_size; i++)
			if (live[i] != cp->data[i]) {
				snprintf(why, sizeof(why),
					 "LEMURIA_CHECK_COPY: page %u of the "
					 "cluster's copy differs from our copy "
					 "of version %u at byte %u (%u, not %u)",
					 cp->page, v, i, live[i], cp->data[i]);
				break;
			}
		c->hooks.lose(c, why);
		return;
	}
}
