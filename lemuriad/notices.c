/* What the lemuriad knows of the pages' versions: write notices applied
 * to the cluster cache and to our FETCHes on their way (I3), and kept,
 * with our own registrations, until the next barrier so that a local
 * GRANT can pass them on (docs/dsm.md "Lost writes found outside"). */
#include "lemuriad_int.h"

#include <stdbool.h>
#include <stdint.h>

/* Write notices (I3): a copy is dropped only when older than its notice.
 * A pending FETCH remembers the notice so that its reply, if older, is
 * not cached and does not answer clients that asked after the notice.
 *
 * Sole cluster (docs/dsm.md "Sole writers"): when every diff of the
 * epoch for the page came through us (wcluster) and our copy is at the
 * notice's base, the copy is the home's page at base plus those very
 * diffs, applied as we forwarded them; no diff forwarded before the copy
 * was cached can be missing, since such a copy is never cached (the
 * `left` rule) or is newer than base.  So it equals the home's page at
 * the notice's version and only its version moves. */
void lm_notices_apply(lm_lemuriad *c, const struct lm_notice *n,
		      uint32_t count)
{
	for (uint32_t i = 0; n && i < count; i++) {
		struct cpage *cp = lm_cache_find(c, n[i].page);

		LM_PAGE_TRACE(c->trace, "notice", n[i].page, n[i].version,
			      n[i].wcluster);
		if (n[i].page < c->npages && c->known[n[i].page] < n[i].version)
			c->known[n[i].page] = n[i].version;
		if (cp && cp->version < n[i].version) {
			if (n[i].wcluster == c->index &&
			    cp->version == n[i].base) {
				cp->version = n[i].version;
				c->stats.kept++;
			} else {
				lm_cache_remove(c, cp);
				c->stats.invalidations++;
			}
		}
	}
	lm_copy_advance(c, n, count);
	for (uint32_t i = 0; n && i < count; i++)
		lm_copy_note_known(c, n[i].page);
	/* what we learn, our clients may learn from us: local GRANTs pass
	 * it on; and our FETCHes on their way remember it (notices_note) */
	lm_notices_note(c, n, count);
}

void lm_notices_epoch_end(lm_lemuriad *c)
{
	lm_notice_set_clear(&c->epoch_notes);
}

void lm_notices_note(lm_lemuriad *c, const struct lm_notice *n,
		     uint32_t count)
{
	lm_notice_set_add(&c->epoch_notes, n, count);
	/* a client that joins a FETCH of ours from now on may hold a GRANT
	 * naming these versions: an older reply is not for it (I3) */
	for (uint32_t i = 0; n && i < count; i++) {
		struct upreq *up = lm_upreq_fetch_of(c, n[i].page);

		if (up && up->min_version < n[i].version)
			up->min_version = n[i].version;
	}
}
