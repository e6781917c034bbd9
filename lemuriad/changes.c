/* What this cluster's registrations changed, told to the other clusters
 * (docs/dsm.md "Eventual visibility", step 2).  Every page and version a
 * REGISTER_OK names waits here LM_LEMURIAD_CHANGED_DELAY_US; then the
 * whole list goes up as CHANGED, which our reflector passes to each of
 * its other clusters that keeps one copy and to every other reflector,
 * which passes it to each of its own.  A reader's lemuriad fetches the
 * pages its copy holds older and installs them together
 * (lemuriad/fetches.c).
 *
 * Why the writer tells and not each page's home: a home knows one page,
 * and a publish spans several homes, whose messages reached a reader at
 * different times; the reader installed each page as its own news came,
 * and a process that spins on a pointer saw it before the record it
 * points at (barnes's tree; splash2/patterns/publish.C).  One list from
 * the writer, sent in registration order and installed as one, keeps a
 * writer's changes in the order it published them.  The price: the
 * writer cannot know who holds what, so every one-copy cluster hears of
 * every change and drops the pages it lacks. */
#include "lemuriad_int.h"

#include <stdlib.h>

void lm_changes_note(lm_lemuriad *c, const struct lm_notice *n,
		     uint32_t count)
{
	if (c->layout->nclusters < 2)
		return;
	lm_order_heard(c, n, count); /* our own: in the copy already */
	if (!c->mine_version &&
	    (!(c->mine_version = calloc(c->npages, sizeof(*c->mine_version))) ||
	     !(c->mine_list = calloc(c->npages, sizeof(*c->mine_list))) ||
	     !(c->mine_out = calloc(LM_CHANGED_MAX, sizeof(*c->mine_out))))) {
		lm_changes_free(c);
		/* the readers then see these changes at their next barrier
		 * or acquire only */
		c->stats.changes_untold += count;
		return;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint32_t p = n[i].page;

		if (p >= c->npages || !n[i].version)
			continue;
		if (!c->mine_version[p]) {
			if (!c->nmine)
				c->mine_at = 0; /* the next pulse's clock */
			c->mine_list[c->nmine++] = p;
		}
		if (c->mine_version[p] < n[i].version)
			c->mine_version[p] = n[i].version;
	}
}

uint64_t lm_changes_send(lm_lemuriad *c, uint64_t now_us)
{
	struct lm_msg m;
	uint32_t n = 0, through;
	/* a page taken back from us named this registration (parking.c):
	 * its readers wait for the list, which goes as soon as it is done */
	bool owed = c->tell_owed && c->batch_done >= c->tell_owed;

	if (owed)
		c->tell_owed = 0;
	if (!c->nmine) {
		/* a reader waits for a registration that changed nothing it
		 * holds, or for what we were told: say how far we are */
		if ((now_us < c->hurry_until || owed) &&
		    c->layout->nclusters > 1 &&
		    (through = c->batch_done) > c->told_through) {
			msg_init(c, &m, LM_MSG_CHANGED);
			m.id = LM_CHANGED_ALL;
			lm_order_sign(c, &m, through);
			c->told_through = through;
			c->out.send(c->ctx, c->reflector, &m);
			c->stats.changes_told++;
		}
		return 0;
	}
	if (!c->mine_at)
		c->mine_at = now_us ? now_us : 1;
	/* a reader waits for the list (order.c): no delay */
	if (now_us - c->mine_at < LM_LEMURIAD_CHANGED_DELAY_US &&
	    now_us >= c->hurry_until && !owed)
		return c->mine_at + LM_LEMURIAD_CHANGED_DELAY_US;
	/* every registration (batch) through batch_done was answered, all
	 * its REGISTERs, and its pages noted: parking.c starts one only
	 * when none is out */
	through = c->batch_done;
	for (uint32_t i = 0; i < c->nmine; i++) {
		uint32_t p = c->mine_list[i];

		c->mine_out[n++] = (struct lm_notice){
			.page = p, .version = c->mine_version[p] };
		c->mine_version[p] = 0;
		if (n < LM_CHANGED_MAX && i + 1 < c->nmine)
			continue;
		msg_init(c, &m, LM_MSG_CHANGED);
		m.id = LM_CHANGED_ALL;
		/* the last of several says how far the lists go */
		lm_order_sign(c, &m, i + 1 < c->nmine ? c->told_through :
				     through);
		m.notices = c->mine_out;
		m.nnotices = n;
		c->out.send(c->ctx, c->reflector, &m);
		c->stats.changes_told++;
		c->stats.changes_told_pages += n;
		n = 0;
	}
	c->nmine = 0;
	c->told_through = through;
	return 0;
}

void lm_changes_clear(lm_lemuriad *c)
{
	for (uint32_t i = 0; i < c->nmine; i++)
		c->mine_version[c->mine_list[i]] = 0;
	c->nmine = 0;
}

void lm_changes_free(lm_lemuriad *c)
{
	free(c->mine_version);
	free(c->mine_list);
	free(c->mine_out);
	c->mine_version = c->mine_list = NULL;
	c->mine_out = NULL;
	c->nmine = 0;
}
