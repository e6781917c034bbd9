/* Changes to our pages that a cluster holding the page may not have
 * heard of (docs/dsm.md "Eventual visibility"): release consistency
 * tells a cluster of another's writes only when it synchronises, and
 * SPLASH-2 programs wait in loops on flags and counters that they read
 * without.  Every change to a page that a cluster other than its writer
 * holds waits here LM_HOME_CHANGED_DELAY_US, and then that cluster's
 * lemuriad is sent its page and version (CHANGED); it fetches the page
 * into its copy if the copy is older.  A holder we cannot name (one that
 * fetched through another reflector) is told through that reflector,
 * which passes the message to every cluster of its own.  A change that
 * two barriers released to our clusters have passed since needs no
 * CHANGED: every process took its notice at the barrier (the change
 * was registered before its writer's arrival, which the barrier
 * waited for), and each whose copy was older closed its view, so its
 * next read fetches.  Programs that synchronise as often as LU hear of
 * nearly every change so.  Below the roles: page_home.c notes the
 * changes, dispatch.c sends them. */
#include "reflector_int.h"

#include <stdlib.h>

#include "lm_error.h"

int lm_changes_init(lm_home *h)
{
	h->chg_version = calloc(h->npages, sizeof(*h->chg_version));
	h->chg_writer = calloc(h->npages, sizeof(*h->chg_writer));
	h->chg_queue = calloc(h->npages, sizeof(*h->chg_queue));
	h->chg_at = calloc(h->npages, sizeof(*h->chg_at));
	h->chg_epoch = calloc(h->npages, sizeof(*h->chg_epoch));
	h->chg_out = calloc(LM_CHANGED_MAX, sizeof(*h->chg_out));
	if (!h->chg_version || !h->chg_writer || !h->chg_queue ||
	    !h->chg_at || !h->chg_epoch || !h->chg_out)
		return LM_ENOMEM;
	return 0;
}

void lm_changes_clear(lm_home *h)
{
	for (uint32_t i = 0; i < h->chg_len; i++)
		h->chg_version[h->chg_queue[(h->chg_head + i) % h->npages]] = 0;
	h->chg_head = h->chg_len = 0;
}

void lm_changes_destroy(lm_home *h)
{
	free(h->chg_version);
	free(h->chg_writer);
	free(h->chg_queue);
	free(h->chg_at);
	free(h->chg_epoch);
	free(h->chg_out);
}

void lm_changes_note(lm_home *h, uint32_t page, uint32_t version,
		     uint32_t wcluster)
{
	if (h->chg_version[page]) {
		/* queued: told with its newest version, at the time of the
		 * first change nobody was told of */
		h->chg_version[page] = version;
		h->chg_epoch[page] = h->epoch;
		if (h->chg_writer[page] != wcluster)
			h->chg_writer[page] = LM_WRITER_MANY;
		return;
	}
	if (!(h->holders[page] & ~lm_holder_bit(wcluster)) ||
	    h->chg_len == h->npages || version == 0)
		return;
	h->chg_version[page] = version;
	h->chg_writer[page] = wcluster;
	h->chg_at[page] = 0; /* the clock of the pulse after this message */
	h->chg_epoch[page] = h->epoch;
	h->chg_queue[(h->chg_head + h->chg_len++) % h->npages] = page;
}

static void send_list(lm_home *h, uint16_t to, uint32_t id, uint32_t n)
{
	struct lm_msg m = msg_new(h, LM_MSG_CHANGED);

	m.id = id;
	m.notices = h->chg_out;
	m.nnotices = n;
	h->stats.changed_sent++;
	h->stats.changed_pages += n;
	h->out.send(h->ctx, to, &m);
}

/* Tells node `to` (for cluster `id`) of the first `due` queued changes
 * whose pages have a holder in `mask` (one cluster's bit, or the bit of
 * the holders we cannot name), unless that one cluster is their writer
 * or two barriers passed since. */
static void tell(lm_home *h, uint32_t due, uint64_t mask, uint16_t to,
		 uint32_t id)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < due; i++) {
		uint32_t page = h->chg_queue[(h->chg_head + i) % h->npages];

		if (!(h->holders[page] & mask) ||
		    h->epoch - h->chg_epoch[page] >= 2 ||
		    (mask != LM_HOLDER_UNNAMED &&
		     lm_holder_bit(h->chg_writer[page]) == mask))
			continue;
		h->chg_out[n++] = (struct lm_notice){
			.page = page, .version = h->chg_version[page] };
		if (n == LM_CHANGED_MAX) {
			send_list(h, to, id, n);
			n = 0;
		}
	}
	if (n)
		send_list(h, to, id, n);
}

uint64_t lm_changes_send(lm_home *h)
{
	const struct lm_layout *l = h->layout;
	uint32_t due = 0;
	bool unnamed = false;

	/* the newest, at the tail, take the clock now */
	for (uint32_t i = h->chg_len; i-- > 0;) {
		uint32_t page = h->chg_queue[(h->chg_head + i) % h->npages];

		if (h->chg_at[page])
			break;
		h->chg_at[page] = h->now_us ? h->now_us : 1;
	}
	while (due < h->chg_len) {
		uint32_t page = h->chg_queue[(h->chg_head + due) % h->npages];

		if (h->now_us - h->chg_at[page] < LM_HOME_CHANGED_DELAY_US)
			break;
		unnamed |= (h->holders[page] & LM_HOLDER_UNNAMED) != 0 &&
			   h->epoch - h->chg_epoch[page] < 2;
		due++;
	}
	if (!due)
		goto next;
	/* a cluster whose clients keep copies of their own (copy = client)
	 * has no copy its lemuriad could bring up to date */
	for (size_t ci = 0; ci < l->nclusters && ci < 63; ci++)
		if (l->clusters[ci].copy == LM_COPY_CLUSTER)
			tell(h, due, lm_holder_bit((uint32_t)ci),
			     cluster_via(h, &l->clusters[ci]), (uint32_t)ci);
	if (unnamed)
		for (uint32_t k = 0; k < h->nrefl; k++)
			if (k != h->self_index && serves_clusters(h, k))
				tell(h, due, LM_HOLDER_UNNAMED, refl_node(h, k),
				     LM_CHANGED_ALL);
	for (uint32_t i = 0; i < due; i++)
		h->chg_version[h->chg_queue[(h->chg_head + i) % h->npages]] = 0;
	h->chg_head = (h->chg_head + due) % h->npages;
	h->chg_len -= due;
next:
	return h->chg_len ? h->chg_at[h->chg_queue[h->chg_head]] +
			    LM_HOME_CHANGED_DELAY_US : 0;
}
