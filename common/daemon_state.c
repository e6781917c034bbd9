/* The daemon object's state (daemon_state.h), and what a daemon knows of
 * the nodes it talks to: which are daemons and where, their names in log
 * lines, the clients attached to the run, the newest run, the traffic per
 * link level, and the scratch buffer everything above encodes into.  The
 * bottom of the shell: it calls none of the shell's other files. */
#include "daemon_state.h"

#include <stdlib.h>
#include <string.h>

#include "stats.h"

void lm_daemon_count(lm_daemon *d, uint16_t peer, bool sent,
		     size_t len)
{
	int level = lm_stats_link_level(d->layout, d->id, peer);
	uint64_t *c;

	if (level < 0)
		return;
	c = d->link[level];
	c[sent ? LM_DAEMON_MSGS_SENT : LM_DAEMON_MSGS_RECEIVED]++;
	c[sent ? LM_DAEMON_BYTES_SENT : LM_DAEMON_BYTES_RECEIVED] += len;
}

int64_t lm_daemon_client_rank(const lm_daemon *d, uint16_t node)
{
	const struct lm_layout *l = d->layout;
	uint32_t first = (uint32_t)(l->nreflectors + l->nclusters + 1);

	if (node < first || node - first >= l->nprocs)
		return -1;
	return node - first;
}

void lm_daemon_attach(lm_daemon *d, uint16_t node, bool on)
{
	int64_t rank = lm_daemon_client_rank(d, node);

	if (!d->attached || rank < 0 || d->attached[rank] == on)
		return;
	d->attached[rank] = on;
	if (on)
		d->nattached++;
	else
		d->nattached--;
}

void lm_daemon_see_run(lm_daemon *d, uint64_t run)
{
	if (run <= d->run)
		return;
	d->run = run;
	if (d->attached)
		memset(d->attached, 0, d->layout->nprocs);
	d->nattached = 0;
}

bool lm_daemon_is_peer_daemon(const lm_daemon *d, uint16_t node)
{
	return d->peers && node >= 1 && node <= d->ndaemons && node != d->id;
}

const struct sockaddr_in *lm_daemon_peer_addr(const lm_daemon *d,
					      uint16_t node)
{
	const struct lm_layout *l = d->layout;

	if (node <= l->nreflectors)
		return &l->reflectors[node - 1].addr;
	return &l->clusters[node - 1 - l->nreflectors].addr;
}

const char *lm_daemon_node_name(const lm_daemon *d, uint16_t node,
				char *buf, size_t len)
{
	const struct lm_layout *l = d->layout;

	if (node >= 1 && node <= l->nreflectors)
		snprintf(buf, len, "reflector %s (node %u)",
			 l->reflectors[node - 1].name, node);
	else if (node > l->nreflectors && node <= d->ndaemons)
		snprintf(buf, len, "lemuriad %s (node %u)",
			 l->clusters[node - 1 - l->nreflectors].name, node);
	else if (lm_daemon_client_rank(d, node) >= 0)
		snprintf(buf, len, "rank %lld (node %u)",
			 (long long)lm_daemon_client_rank(d, node), node);
	else
		snprintf(buf, len, "node %u", node);
	return buf;
}

uint8_t *lm_daemon_scratch(lm_daemon *d, size_t need)
{
	if (need > d->scratch_cap) {
		uint8_t *grown = realloc(d->scratch, need);

		if (!grown)
			return NULL;
		d->scratch = grown;
		d->scratch_cap = need;
	}
	return d->scratch;
}
