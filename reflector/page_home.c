/* The home of a share of the pages (docs/dsm.md, "Pages and versions",
 * "Lazy, adaptive and eager relay"): master copies and versions, the
 * epoch's entry of each page, deltas registered and pulled, FETCHes that
 * wait for them.  A role: calls route.c only. */
#include "reflector_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "log.h"
#include "lm_error.h"

/* ---- pages as diffs (docs/dsm.md "Pages as diffs") -------------------- */

static size_t em_words(const lm_home *h)
{
	return (h->page_size + 63) / 64;
}

/* The page's epoch entry just began: its masks start empty.  Without
 * memory (or budget) the page simply has none, and goes whole. */
static void em_begin(lm_home *h, uint32_t page)
{
	struct epoch_masks *e = h->em[page];

	if (!e) {
		if (h->em_bytes + sizeof(*e) > h->em_budget ||
		    !(e = calloc(1, sizeof(*e))))
			return;
		h->em_bytes += sizeof(*e);
		h->em[page] = e;
	}
	e->epoch1 = h->pe[page].epoch1;
	e->base = h->pe[page].base;
	e->broken = false;
	e->n = 0;
}

/* Records that cluster `ci` changed the bytes of diff in the page, after
 * the change was applied and its notice taken (note_change). */
static void em_mark(lm_home *h, uint32_t page, uint32_t ci,
		    const uint8_t *diff, size_t len)
{
	struct epoch_masks *e = h->em[page];
	size_t bytes = em_words(h) * sizeof(uint64_t);
	struct lm_delta view;
	uint32_t i;

	if (!e || e->broken || e->epoch1 != h->pe[page].epoch1 ||
	    e->base != h->pe[page].base)
		return; /* not this entry's: never served (em_usable) */
	for (i = 0; i < e->n && e->cluster[i] != ci; i++)
		;
	if (i == e->n) {
		if (i == LM_HOME_EM_CLUSTERS) {
			e->broken = true;
			return;
		}
		if (!e->bits[i]) {
			if (h->em_bytes + bytes > h->em_budget ||
			    !(e->bits[i] = malloc(bytes))) {
				e->broken = true;
				return;
			}
			h->em_bytes += bytes;
		}
		memset(e->bits[i], 0, bytes);
		e->cluster[i] = ci;
		e->n++;
	}
	view = (struct lm_delta){ .page_size = h->page_size,
				  .mask = e->bits[i] };
	lm_delta_mark_valid_diff(&view, diff, len);
}

/* The masks of `page` when they cover every change since `base`. */
static const struct epoch_masks *em_usable(const lm_home *h, uint32_t page,
					   uint32_t base)
{
	const struct epoch_masks *e = h->em[page];
	const struct page_epoch *pe = &h->pe[page];

	if (!e || e->broken || pe->epoch1 == 0 || e->epoch1 != pe->epoch1 ||
	    e->base != pe->base || base != pe->base ||
	    h->versions[page] <= base)
		return NULL;
	return e;
}

/* Appends to a PAGES list the bytes of `page` that clusters other than
 * `ci` changed since `base`; false (nothing appended) when that cannot
 * be told or the diff would not be smaller than the page. */
static bool append_page_diff(lm_home *h, uint8_t *data, size_t cap,
			     size_t *len, uint32_t page, uint32_t ci,
			     uint32_t base)
{
	const struct epoch_masks *e = em_usable(h, page, base);
	size_t words = em_words(h), dlen;
	struct lm_delta view;

	if (!e || !h->pages[page] ||
	    cap - *len < LM_MSG_DIFFS_ENTRY_HDR + h->page_size)
		return false;
	memset(h->em_union, 0, words * sizeof(uint64_t));
	for (uint32_t i = 0; i < e->n; i++)
		if (e->cluster[i] != ci)
			for (size_t w = 0; w < words; w++)
				h->em_union[w] |= e->bits[i][w];
	view = (struct lm_delta){ .page_size = h->page_size,
				  .bytes = h->pages[page],
				  .mask = h->em_union };
	/* encoded in place after the entry header; one that would not be
	 * smaller than the page goes whole instead */
	if (lm_delta_encode(&view, data + *len + LM_MSG_DIFFS_ENTRY_HDR,
			    h->page_size - 1, &dlen) < 0)
		return false;
	lm_msg_diffs_put_header(data + *len, page, dlen);
	*len += LM_MSG_DIFFS_ENTRY_HDR + dlen;
	return true;
}

/* Layout index of the cluster at node id `node`, or LM_WRITER_MANY. */
static uint32_t cluster_of_node(const lm_home *h, uint16_t node)
{
	for (size_t i = 0; i < h->layout->nclusters; i++)
		if (h->layout->clusters[i].id == node)
			return (uint32_t)i;
	return LM_WRITER_MANY;
}

/* ---- holders and owners (docs/dsm.md "Pages one cluster owns") -------- */

static uint64_t holder_bit(uint32_t ci)
{
	return lm_holder_bit(ci);
}

/* `node` got the page or wrote it: a cluster of ours by its index; a
 * reflector (a relay, whose clusters we cannot tell) for good. */
static void hold(lm_home *h, uint32_t page, uint16_t node)
{
	h->holders[page] |= holder_bit(cluster_of_node(h, node));
}

/* Whether cluster ci may own the page: it alone holds it, it keeps one
 * copy for its clients (its lemuriad answers for all their writes), and
 * it is one of ours, so that nothing of the page passes a relay's cache
 * between us. */
static bool may_own(const lm_home *h, uint32_t page, uint32_t ci)
{
	const struct lm_cluster_cfg *c;

	if (ci >= h->layout->nclusters || h->holders[page] != holder_bit(ci))
		return false;
	c = &h->layout->clusters[ci];
	return c->copy == LM_COPY_CLUSTER &&
	       (uint32_t)c->reflector_index == h->self_index;
}

/* The tags of `page` into h->tagbuf (or the greatest of them and those
 * already there, `more`): how many. */
static uint32_t page_tags(lm_home *h, uint32_t page, uint32_t have)
{
	const uint32_t nc = (uint32_t)h->layout->nclusters;
	const uint32_t *t = h->tags + (size_t)page * nc;
	uint32_t n = have;

	for (uint32_t c = 0; c < nc; c++) {
		uint32_t k;
		struct lm_msg m = { .tags = h->tagbuf, .ntags = n };

		if (!t[c])
			continue;
		for (k = 0; k < n; k++) {
			uint32_t tc, tr;

			lm_msg_tag(&m, k, &tc, &tr);
			if (tc == c) {
				if (tr < t[c])
					lm_msg_tag_put(h->tagbuf, k, c, t[c]);
				break;
			}
		}
		if (k == n)
			lm_msg_tag_put(h->tagbuf, n++, c, t[c]);
	}
	return n;
}

static void serve_page(lm_home *h, uint16_t node, uint32_t req_id,
		       uint32_t page)
{
	struct lm_msg r = msg_new(h, LM_MSG_PAGE);

	r.tags = h->tagbuf;
	r.ntags = page_tags(h, page, 0);
	r.page = page;
	r.version = h->versions[page];
	r.data = h->pages[page] ? h->pages[page] : h->zero;
	r.data_len = h->page_size;
	h->stats.fetches++;
	hold(h, page, node);
	h->out.reply(h->ctx, node, req_id, &r);
}

void lm_page_home_fetchv(lm_home *h, uint16_t node, uint32_t req_id,
		    const struct lm_msg *m)
{
	struct lm_msg r = msg_new(h, LM_MSG_PAGES);
	uint32_t n = m->nnotices < LM_FETCHV_MAX ? m->nnotices : LM_FETCHV_MAX;
	struct lm_notice *served = calloc(n ? n : 1, sizeof(*served));
	size_t cap = (size_t)n * (LM_MSG_DIFFS_ENTRY_HDR + h->page_size);
	size_t len = 0;
	uint8_t *data = malloc(cap ? cap : 1);
	uint32_t count = 0, ci = cluster_of_node(h, node), ntags = 0;

	if (!served || !data) {
		lm_log_error("home: no memory to serve a FETCHV");
		n = 0; /* an empty PAGES: the lemuriad asks page by page */
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t page = m->notices[i].page, base = m->notices[i].base;

		if (page >= h->npages) {
			drop_bad(h, node, m, "page outside the region");
			continue;
		}
		/* ours and settled: served now; anything else the lemuriad
		 * asks for again with a FETCH, which may wait or go on */
		if (lm_home_of_page(h->layout, page) != h->self_index ||
		    h->pend[page])
			continue;
		hold(h, page, node);
		ntags = page_tags(h, page, ntags);
		served[count].page = page;
		served[count].version = h->versions[page];
		served[count].writer = LM_WRITER_MANY;
		served[count].wcluster = LM_WRITER_MANY;
		if (base != LM_NO_BASE && ci != LM_WRITER_MANY &&
		    append_page_diff(h, data, cap, &len, page, ci, base)) {
			served[count].base = base;
			h->stats.page_diffs++;
		} else {
			served[count].base = LM_NO_BASE;
			(void)lm_msg_diffs_append(data, cap, &len, page,
						  h->pages[page] ?
						  h->pages[page] : h->zero,
						  h->page_size);
		}
		count++;
	}
	h->stats.fetches += count;
	r.notices = served;
	r.nnotices = count;
	r.diffs = (struct lm_msg_diffs){ data, len, count };
	r.tags = h->tagbuf;
	r.ntags = ntags;
	h->out.reply(h->ctx, node, req_id, &r);
	free(served);
	free(data);
}

/* An empty PAGE: the requester fails instead of waiting forever. */
void lm_page_home_refuse_fetch(lm_home *h, uint16_t from, uint32_t req_id,
			  const struct lm_msg *m, const char *why)
{
	struct lm_msg r = msg_new(h, LM_MSG_PAGE);

	r.page = m->page;
	drop_bad(h, from, m, why);
	h->out.reply(h->ctx, from, req_id, &r);
}

/* Appends a pending delta of `page` at the next version; with data when
 * diff is not NULL.  0 or LM_ENOMEM. */
static int queue_delta(lm_home *h, uint32_t page, uint32_t cluster,
		       const uint8_t *diff, size_t len)
{
	struct pending *pd = calloc(1, sizeof(*pd)), **pp;

	if (!pd || (diff && len && !(pd->data = malloc(len)))) {
		free(pd);
		return LM_ENOMEM;
	}
	if (diff) {
		pd->has_data = true;
		pd->len = len;
		if (len)
			memcpy(pd->data, diff, len);
	}
	pd->cluster = cluster;
	pd->version = ++h->versions[page];
	for (pp = &h->pend[page]; *pp; pp = &(*pp)->next)
		;
	*pp = pd;
	return 0;
}

/* The page's version just went up by a change of rank `writer` (or
 * LM_WRITER_MANY) through cluster `wcluster`, sent in `epoch`: records it
 * in the page's epoch entry and returns the page's notice.  The notice is
 * exact: a copy at `base` plus exactly the epoch's changes is the page at
 * `version`, which lets a sole writer keep its copy (docs/dsm.md "Sole
 * writers"). */
static struct lm_notice note_change(lm_home *h, uint32_t page,
				    uint32_t epoch, uint32_t writer,
				    uint32_t wcluster)
{
	struct page_epoch *pe = &h->pe[page];
	struct lm_notice n;

	if (pe->epoch1 != epoch + 1) {
		pe->epoch1 = epoch + 1;
		pe->base = h->versions[page] - 1;
		pe->writer = writer;
		pe->wcluster = wcluster;
		em_begin(h, page);
	}
	if (pe->writer != writer)
		pe->writer = LM_WRITER_MANY;
	if (pe->wcluster != wcluster)
		pe->wcluster = LM_WRITER_MANY;
	n.page = page;
	n.version = h->versions[page];
	n.base = pe->base;
	n.writer = pe->writer;
	n.wcluster = pe->wcluster;
	return n;
}

/* Applies a list of rank `writer`, sent in `epoch`, to our master copies,
 * all or nothing.  A page's version goes up once per list (note_change).
 * The notices of the pages go to h->scratch; returns their count, or a
 * negative LM_E* with nothing applied. */
long lm_page_home_apply(lm_home *h, uint16_t from, uint32_t epoch,
		   uint32_t writer, const struct lm_msg_diffs *d)
{
	const struct lm_cluster_cfg *wc;
	uint32_t wcluster, page;
	size_t pos = 0, len;
	const uint8_t *diff;
	long n, count = 0;

	n = lm_list_check_flush(h, d, true);
	if (n < 0) {
		h->stats.diffs_rejected += (uint64_t)-n;
		lm_log_limited("FLUSH lists rejected by a home", LM_LOG_WARN,
			       "home: FLUSH from node %u rejected: malformed "
			       "diff list or page", from);
		return LM_EBADMSG;
	}
	wc = lm_layout_cluster_of_rank(h->layout, writer);
	wcluster = wc ? (uint32_t)(wc - h->layout->clusters) : LM_WRITER_MANY;
	/* Materialise every zero page first: running out of memory then
	 * still leaves the list unapplied rather than half-applied. */
	while (lm_msg_diffs_next(d, &pos, &page, &diff, &len) == 1) {
		if (h->pages[page])
			continue;
		h->pages[page] = calloc(1, h->page_size);
		if (!h->pages[page]) {
			h->stats.diffs_rejected += (uint64_t)n;
			lm_log_error("home: FLUSH from node %u rejected: out "
				     "of memory", from);
			return LM_ENOMEM;
		}
	}
	if (++h->flush_seq == 0) {
		memset(h->flush_mark, 0,
		       (size_t)h->npages * sizeof(*h->flush_mark));
		h->flush_seq = 1;
	}
	pos = 0;
	while (lm_msg_diffs_next(d, &pos, &page, &diff, &len) == 1) {
		if (h->pend[page]) {
			h->holders[page] |= holder_bit(wcluster);
			/* registered deltas come first (I1): this one waits
			 * behind them with its own version */
			if (queue_delta(h, page, wcluster == LM_WRITER_MANY ?
				0 : wcluster, diff, len) < 0)
				lm_log_error("home: no memory to queue a diff "
					     "of page %u: lost", page);
			h->flush_mark[page] = h->flush_seq;
			h->scratch[count++] = note_change(h, page, epoch,
							  writer, wcluster);
			continue;
		}
		h->holders[page] |= holder_bit(wcluster);
		/* checked whole by lm_list_check_flush above */
		lm_diff_apply_valid(h->pages[page], diff, len);
		h->stats.diffs_applied++;
		if (h->flush_mark[page] != h->flush_seq) {
			h->flush_mark[page] = h->flush_seq;
			h->versions[page]++;
			h->scratch[count++] = note_change(h, page, epoch,
							  writer, wcluster);
		}
		em_mark(h, page, wcluster, diff, len);
	}
	h->stats.flushes++;
	return count;
}

/* Asks the cluster holding `pd` for its data, through its reflector. */
static void send_pull(lm_home *h, uint32_t page, struct pending *pd)
{
	const struct lm_cluster_cfg *c = &h->layout->clusters[pd->cluster];
	struct lm_msg r = msg_new(h, LM_MSG_PULL);
	struct forward *f;

	f = lm_fwd_add(h, LM_MSG_PULL, cluster_via(h, c), 0, 0);
	if (!f) {
		lm_log_error("home: too many requests in flight; PULL of "
			     "page %u waits", page);
		return;
	}
	r.id = pd->cluster;
	r.page = page;
	r.version = pd->version;
	pd->pulling = true;
	h->stats.pulls_sent++;
	h->out.request(h->ctx, f->to, f->req_id, &r);
}

/* Applies the page's pending deltas that have their data, in version
 * order (I1); with none left, answers the FETCHes that waited; else pulls
 * what is missing for them. */
static void settle(lm_home *h, uint32_t page)
{
	struct pending *pd;

	while ((pd = h->pend[page]) && pd->has_data) {
		if (!h->pages[page] &&
		    !(h->pages[page] = calloc(1, h->page_size))) {
			lm_log_error("home: no memory for page %u", page);
			return;
		}
		/* pending data was checked when it came (REGISTER, DELTA) */
		if (pd->len) {
			lm_diff_apply_valid(h->pages[page], pd->data, pd->len);
			em_mark(h, page, pd->cluster, pd->data, pd->len);
		}
		h->stats.diffs_applied++;
		h->pend[page] = pd->next;
		free(pd->data);
		free(pd);
	}
	if (!h->pend[page]) {
		while (h->fwait[page]) {
			struct fetch_wait *w = h->fwait[page];

			h->fwait[page] = w->next;
			serve_page(h, w->node, w->req_id, page);
			free(w);
		}
		return;
	}
	if (!h->fwait[page])
		return;
	for (pd = h->pend[page]; pd; pd = pd->next)
		if (!pd->has_data && !pd->pulling)
			send_pull(h, page, pd);
}

/* A FETCH that waits for a PULL is likely the first of a run of reads:
 * the deltas of the `ahead` pages after it (the reach of the fault behind
 * it, which the reader's lemuriad fetches next; never beyond the
 * layout's `prefetch`) that are ours and that other clusters than the
 * reader's hold are pulled now, so that those FETCHes find the data here
 * or on its way instead of paying for a PULL each.  The reader's own
 * deltas stay where they are: pulled, their pages would go with their
 * data from then on (adaptive relay) though nobody else may read them.
 * A page another cluster owns is pulled too (taken back from it: the
 * reader goes on to the next pages as it did to this one), which is why
 * the window is the reader's reach and not more: a page taken back and
 * never read costs its owner a twin and seals until it owns it again
 * (LU contiguous, whose faults read few pages after them).  A FETCH
 * that another reflector forwards names no reader (reader is then
 * LM_WRITER_MANY), and every unpulled delta in its window is pulled. */
static void pull_ahead(lm_home *h, uint32_t page, uint32_t reader,
		       uint32_t ahead)
{
	uint64_t end = (uint64_t)page + 1 +
		       (ahead < h->layout->prefetch ? ahead :
						      h->layout->prefetch);

	if (end > h->npages)
		end = h->npages;
	for (uint32_t p = page + 1; p < end; p++) {
		struct pending *pd;

		if (lm_home_of_page(h->layout, p) != h->self_index)
			continue;
		for (pd = h->pend[p]; pd; pd = pd->next)
			if (!pd->has_data && !pd->pulling &&
			    pd->cluster != reader) {
				send_pull(h, p, pd);
				h->stats.pulls_ahead++;
			}
	}
}

/* A FETCH at the page's home: served once its deltas are in. */
void lm_page_home_fetch(lm_home *h, uint16_t node, uint32_t req_id,
		   uint32_t page, uint32_t ahead)
{
	struct fetch_wait *w;

	if (!h->pend[page]) {
		serve_page(h, node, req_id, page);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		lm_log_error("home: no memory to wait for page %u", page);
		return;
	}
	w->node = node;
	w->req_id = req_id;
	w->next = h->fwait[page];
	h->fwait[page] = w;
	h->stats.fetches_waited++;
	settle(h, page);
	pull_ahead(h, page, cluster_of_node(h, node), ahead);
}

/* The data of a pulled delta (or the cluster's word that it has none). */
void lm_page_home_pulled(lm_home *h, const struct lm_msg *m)
{
	struct pending *pd;
	const uint8_t *diff = NULL;
	uint32_t page;
	size_t pos = 0, len = 0;

	if (m->page >= h->npages)
		return;
	for (pd = h->pend[m->page]; pd; pd = pd->next)
		if (pd->version == m->version)
			break;
	if (!pd || pd->has_data)
		return; /* pushed meanwhile */
	if (m->status != 0 || m->diffs.count != 1 ||
	    lm_msg_diffs_next(&m->diffs, &pos, &page, &diff, &len) != 1 ||
	    page != m->page ||
	    lm_diff_validate(diff, len, h->page_size) < 0) {
		/* nothing better to do than go on without it, loudly */
		lm_log_error("home: delta of page %u version %u lost at "
			     "cluster %u (%s)", m->page, m->version,
			     pd->cluster, m->status ? lm_strerror(m->status) :
			     "bad data");
		len = 0;
	} else if (len && !(pd->data = malloc(len))) {
		lm_log_error("home: no memory for a delta of page %u",
			     m->page);
		pd->pulling = false;
		return;
	}
	if (len)
		memcpy(pd->data, diff, len);
	pd->len = len;
	pd->has_data = true;
	/* a page taken back whole from its owner holds what it wrote up to
	 * that registration of its (docs/dsm.md "Order") */
	if (m->id && pd->cluster < h->layout->nclusters) {
		uint32_t *t = &h->tags[(size_t)m->page * h->layout->nclusters +
				       pd->cluster];

		if (*t < m->id)
			*t = m->id;
	}
	settle(h, m->page);
}

/* A cluster whose NEW entry names the page's latest version holds that
 * version's delta, and takes the version right after it in our answer
 * for a merge of the two (lemuriad/deltas.c).  When we cannot merge (the
 * delta is being pulled, was pushed, or is owned), the new entry skips a
 * version, so that the cluster pushes or keeps the older delta for the
 * PULL that comes for it: read as a merge, the PULL found nothing (the
 * lost deltas the SPLASH-2 suite showed once other clusters fetched
 * pages soon after each registration, docs/dsm.md "Eventual
 * visibility").  Nobody asks for a version that never was: FETCHes are
 * answered with the latest. */
static void skip_version(lm_home *h, const struct lm_notice *e)
{
	if (e->base == LM_REG_NEW && e->version &&
	    h->versions[e->page] == e->version) {
		h->versions[e->page]++;
		h->stats.versions_skipped++;
	}
}

/* Registers a cluster's deltas at their home (docs/dsm.md "Lazy
 * relay"): each NEW or DATA entry takes the page to a new version, held
 * by the cluster (NEW) or here (DATA); a NEW entry whose cluster still
 * holds the page's latest delta, unpulled, is merged into it; PUSH
 * brings the data of one registered before.  The notices go to
 * h->scratch; returns their count or LM_EBADMSG. */
long lm_page_home_register(lm_home *h, uint16_t from, uint32_t ci,
		      uint32_t epoch, const struct lm_msg *m)
{
	size_t pos = 0, len;
	const uint8_t *diff;
	uint32_t page;
	long count = 0;

	if (lm_list_check_register(h, m, ci, true) < 0) {
		lm_log_limited("REGISTERs rejected by a home", LM_LOG_WARN,
			       "home: REGISTER from node %u rejected: "
			       "malformed entries or data", from);
		h->stats.dropped_bad++;
		return LM_EBADMSG;
	}
	h->ngranted = 0;
	for (uint32_t i = 0; i < m->nnotices; i++) {
		const struct lm_notice *e = &m->notices[i];
		struct pending *pd, *last = NULL;

		diff = NULL;
		len = 0;
		if (lm_reg_has_data(e->base))
			(void)lm_msg_diffs_next(&m->diffs, &pos, &page, &diff,
						&len);
		if (e->base == LM_REG_DROP) {
			/* its data stays with us or with it (pending) */
			h->holders[e->page] &= ~holder_bit(ci);
			h->stats.holder_drops++;
			continue;
		}
		h->holders[e->page] |= holder_bit(ci);
		for (pd = h->pend[e->page]; pd; pd = pd->next)
			last = pd;
		if (e->base == LM_REG_PUSH) {
			for (pd = h->pend[e->page]; pd; pd = pd->next)
				if (pd->version == e->version &&
				    pd->cluster == ci && !pd->has_data)
					break;
			if (pd && (!len || (pd->data = malloc(len)))) {
				if (len)
					memcpy(pd->data, diff, len);
				pd->len = len;
				pd->has_data = true;
				h->stats.pushes_received++;
			}
			continue;
		}
		if (e->base == LM_REG_NEW && e->version && last &&
		    last->cluster == ci && last->version == e->version &&
		    !last->has_data && !last->pulling && !last->owned &&
		    h->versions[e->page] == e->version) {
			/* the cluster folds the new delta into the one it
			 * holds: nobody wrote the page in between (I1) */
			last->version = ++h->versions[e->page];
			h->stats.regs_merged++;
		} else if ((skip_version(h, e),
			    queue_delta(h, e->page, ci, diff, len)) < 0) {
			lm_log_error("home: no memory to register page %u",
				     e->page);
			continue;
		} else {
			for (last = h->pend[e->page]; last->next;
			     last = last->next)
				;
		}
		/* the cluster alone holds the page, and its delta, unpulled,
		 * is the last change: it may own the page, and this entry
		 * then stands for every write it makes until we pull it */
		if (e->base == LM_REG_NEW && !last->has_data &&
		    !last->pulling && h->ngranted < h->npages &&
		    may_own(h, e->page, ci)) {
			last->owned = true;
			h->granted[h->ngranted++] = e->page;
			h->stats.owned_granted++;
		}
		h->stats.regs_entered++;
		if (m->id)
			h->tags[(size_t)e->page * h->layout->nclusters + ci] =
				m->id;
		h->scratch[count++] = note_change(h, e->page, epoch, e->writer,
						  ci);
	}
	for (uint32_t i = 0; i < m->nnotices; i++)
		settle(h, m->notices[i].page);
	return count;
}

/* ---- state ------------------------------------------------------------ */

int lm_page_home_init(lm_home *h)
{
	size_t npages = h->npages;

	h->pages = calloc(npages, sizeof(*h->pages));
	h->versions = calloc(npages, sizeof(*h->versions));
	h->pe = calloc(npages, sizeof(*h->pe));
	h->em = calloc(npages, sizeof(*h->em));
	h->em_union = calloc((h->page_size + 63) / 64, sizeof(uint64_t));
	h->zero = calloc(1, h->page_size);
	h->flush_mark = calloc(npages, sizeof(*h->flush_mark));
	h->pend = calloc(npages, sizeof(*h->pend));
	h->fwait = calloc(npages, sizeof(*h->fwait));
	h->holders = calloc(npages, sizeof(*h->holders));
	h->granted = calloc(npages, sizeof(*h->granted));
	h->tags = calloc(npages * h->layout->nclusters, sizeof(*h->tags));
	h->tagbuf = calloc(h->layout->nclusters, LM_MSG_TAG_SIZE);
	/* I5: the masks take at most an eighth of the reflector's cache */
	h->em_budget = h->layout->reflectors[h->self_index].cache_size / 8;
	if (!h->pages || !h->versions || !h->pe || !h->em || !h->em_union ||
	    !h->zero || !h->flush_mark || !h->pend || !h->fwait ||
	    !h->holders || !h->granted || !h->tags || !h->tagbuf)
		return LM_ENOMEM;
	return 0;
}

static void em_free(lm_home *h, uint32_t p)
{
	struct epoch_masks *e = h->em[p];

	if (!e)
		return;
	for (size_t i = 0; i < LM_HOME_EM_CLUSTERS; i++)
		free(e->bits[i]);
	free(e);
	h->em[p] = NULL;
}

static void pending_clear(lm_home *h)
{
	for (uint32_t p = 0; p < h->npages; p++) {
		while (h->pend[p]) {
			struct pending *pd = h->pend[p];

			h->pend[p] = pd->next;
			free(pd->data);
			free(pd);
		}
		while (h->fwait[p]) {
			struct fetch_wait *w = h->fwait[p];

			h->fwait[p] = w->next;
			free(w);
		}
	}
}

void lm_page_home_clear(lm_home *h)
{
	for (uint32_t p = 0; p < h->npages; p++) {
		free(h->pages[p]);
		h->pages[p] = NULL;
		em_free(h, p);
	}
	h->em_bytes = 0;
	memset(h->versions, 0, (size_t)h->npages * sizeof(*h->versions));
	memset(h->tags, 0, (size_t)h->npages * h->layout->nclusters *
	       sizeof(*h->tags));
	memset(h->pe, 0, (size_t)h->npages * sizeof(*h->pe));
	memset(h->holders, 0, (size_t)h->npages * sizeof(*h->holders));
	h->ngranted = 0;
	pending_clear(h);
}

void lm_page_home_destroy(lm_home *h)
{
	if (h->pages)
		for (uint32_t p = 0; p < h->npages; p++)
			free(h->pages[p]);
	if (h->em)
		for (uint32_t p = 0; p < h->npages; p++)
			em_free(h, p);
	free(h->pages);
	free(h->versions);
	free(h->tags);
	free(h->tagbuf);
	free(h->pe);
	free(h->em);
	free(h->em_union);
	free(h->zero);
	free(h->flush_mark);
	if (h->pend && h->fwait)
		pending_clear(h);
	free(h->pend);
	free(h->fwait);
	free(h->holders);
	free(h->granted);
}
