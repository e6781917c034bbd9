/* When to give up a peer that never answered while the kernel reports
 * that nothing listens at its address (ICMP port unreachable): the
 * client's connected socket sees ECONNREFUSED (rpc.c), a daemon's
 * unconnected one the IP_RECVERR queue (evnode.c).  A peer heard from
 * once is left to the keepalives; one never heard is given up after
 * LM_REFUSED_MIN refusals over at least LM_REFUSED_US, so a daemon
 * started a moment after its peers still answers in time. */
#ifndef LM_REFUSALS_H
#define LM_REFUSALS_H

#include <stdbool.h>
#include <stdint.h>

#include "lm_error.h"

#define LM_REFUSED_MIN 3
#define LM_REFUSED_US 1000000u

struct lm_refusals {
	bool heard;      /* a datagram came from the peer's address */
	uint32_t count;  /* refusals since the first of this series */
	uint64_t since;  /* when that first one came */
};

/* One refusal at `now`: true when the peer is to be given up (the
 * series starts again). */
static inline bool lm_refusals_note(struct lm_refusals *r, uint64_t now)
{
	if (r->heard)
		return false;
	if (r->count++ == 0)
		r->since = now;
	if (r->count < LM_REFUSED_MIN || now - r->since < LM_REFUSED_US)
		return false;
	r->count = 0;
	return true;
}

/* The same rule for a peer whose datagrams come but all fail
 * authentication (its layout names another secret_file): `bad` when one
 * came and no authentic one yet. */
struct lm_auth_refusals {
	struct lm_refusals r;
	bool bad;
};

/* A datagram from the peer went through the engine with `rc` at `now`:
 * true when the peer is to be given up (evnode.c for declared daemons,
 * rpc.c for a client's server). */
static inline bool lm_refusals_auth(struct lm_auth_refusals *a, int rc,
				    uint64_t now)
{
	if (rc == 0) {
		a->r.heard = true;
		a->bad = false;
		return false;
	}
	if (rc != LM_EAUTH || a->r.heard)
		return false;
	a->bad = true;
	return lm_refusals_note(&a->r, now);
}

#endif
