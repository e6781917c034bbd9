/* The layout: one INI file describing a whole Lemuria installation.
 *
 * Every program (reflector, lemuriad, client, tools) loads the same file and
 * picks its own section by name.  Loading validates everything it can; a
 * rejected file yields a message "FILE:LINE: reason" and LM_ECONFIG.  The
 * syntax is documented in docs/layout.md. */
#ifndef LM_CONFIG_H
#define LM_CONFIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LM_NAME_MAX 64
#define LM_PATH_MAX 4096
#define LM_KEY_BYTES 32

enum lm_relay_mode {
	LM_RELAY_LAZY,  /* lemuriads send write notices; homes pull deltas */
	LM_RELAY_EAGER, /* deltas pushed with the barrier, batched per home */
	LM_RELAY_ADAPTIVE, /* lazy, but a page another cluster pulled goes
			      with its data from then on */
	LM_RELAY_MODE_COUNT
};

/* How the clients of a cluster hold the shared region: the layout's
 * `copy`, set in [lemuria] and per [cluster NAME]. */
enum lm_copy_mode {
	LM_COPY_CLIENT,  /* each client process keeps its own copy and talks
			    to the lemuriad over UDP only (for clients on
			    other hosts than their lemuriad) */
	LM_COPY_CLUSTER, /* the cluster's clients run on their lemuriad's
			    host and share one copy of the region, a memory
			    object of the lemuriad mapped by every client: no
			    client twins, diffs, FLUSHes or updates inside
			    the cluster */
	LM_COPY_MODE_COUNT
};

/* `copy` when neither [lemuria] nor the cluster's section sets it. */
#define LM_COPY_DEFAULT LM_COPY_CLUSTER

/* Transport levels of the hierarchy; each has its own settings. */
enum lm_level {
	LM_LEVEL_CLIENT,  /* client <-> lemuriad */
	LM_LEVEL_CLUSTER, /* lemuriad <-> reflector */
	LM_LEVEL_ROOT,    /* reflector <-> reflector */
	LM_LEVEL_COUNT
};

struct lm_transport_cfg {
	uint32_t mtu;            /* largest datagram, bytes (576..65507) */
	uint32_t rto_initial_us; /* retransmission timeout before any RTT sample */
	uint32_t rto_min_us;
	uint32_t rto_max_us;
	uint32_t max_retries;    /* per datagram, then the peer is unreachable */
	uint32_t window;         /* datagrams in flight per peer */
	uint32_t ack_delay_us;   /* 0: acknowledge at once */
};

/* Loss injection on the transmit path (loss.h; tests only; all zero =
 * off): the layout's [faults] section, or LM_FAULTS. */
struct lm_fault_cfg {
	double drop;         /* probability a datagram is dropped */
	double dup;          /* probability it is sent twice */
	double reorder;      /* probability it is held back behind later ones */
	double delay;        /* probability it is delayed by up to delay_max_us */
	uint32_t delay_max_us;
	uint32_t start_max_us; /* each cluster's processes join up to this
				  late (one draw per cluster): a run's first
				  messages then reach lemuriads before
				  their clients do */
	uint64_t seed;       /* 0: seed from the clock */
};

/* Pages a reflector caches of those it relays from other reflectors'
 * homes, when its section sets no `cache`. */
#define LM_REFLECTOR_CACHE_DEFAULT (64ull << 20)

struct lm_reflector_cfg {
	char name[LM_NAME_MAX];
	struct sockaddr_in addr;
	uint64_t cache_size;  /* bytes of relayed pages it caches */
	uint16_t id;  /* transport node id */
	int line;     /* where its section starts, for messages */
};

struct lm_cluster_cfg {
	char name[LM_NAME_MAX];
	char reflector[LM_NAME_MAX];
	int reflector_index;      /* into lm_layout.reflectors */
	struct sockaddr_in addr;
	uint32_t clients;         /* client processes in this cluster */
	uint32_t first_rank;      /* global rank of its first client */
	uint64_t cache_size;      /* bytes of page cache in the lemuriad */
	enum lm_copy_mode copy;   /* its own `copy`, else [lemuria]'s */
	uint16_t id;
	int line;
};

/* Most pages a read fault may bring along (liblemuria/region.h agrees). */
#define LM_CFG_PREFETCH_MAX 31u
#define LM_CFG_PREFETCH_DEFAULT 31u

struct lm_layout {
	char path[LM_PATH_MAX];
	/* [lemuria] */
	uint64_t shared_size;     /* bytes, a multiple of page_size */
	uint32_t page_size;       /* a multiple of the OS page size */
	uint64_t base;            /* fixed virtual address of the region */
	char secret_file[LM_PATH_MAX]; /* resolved against the layout's dir */
	bool auth;                /* MAC every datagram (default on) */
	bool updates;             /* lemuriads send barrier updates
				     (docs/dsm.md "Updates"; default on) */
	uint32_t prefetch;        /* pages after a read fault's page that
				     its fetch may bring along (docs/dsm.md
				     "Neighbour pages"), 0..LM_CFG_PREFETCH_MAX */
	uint8_t key[LM_KEY_BYTES]; /* derived from the secret file */
	enum lm_relay_mode relay;
	enum lm_copy_mode copy;   /* [lemuria]'s; each cluster's own is in
				     lm_cluster_cfg.copy */
	/* [transport LEVEL] */
	struct lm_transport_cfg transport[LM_LEVEL_COUNT];
	/* [faults] (optional) */
	struct lm_fault_cfg faults;
	/* [reflector NAME] and [cluster NAME], in file order */
	struct lm_reflector_cfg *reflectors;
	size_t nreflectors;
	struct lm_cluster_cfg *clusters;
	size_t nclusters;
	uint32_t nprocs;          /* sum of clients over clusters */
	uint64_t hash;            /* FNV-1a of the file: every process of a
				     run must load the same layout */
};

/* Loads and validates PATH.  On success *out owns a new layout (free with
 * lm_layout_free).  On failure returns LM_ECONFIG (or LM_ENOMEM) and writes
 * "PATH:LINE: reason" into err. */
int lm_layout_load(const char *path, struct lm_layout **out, char *err,
		   size_t errlen);
void lm_layout_free(struct lm_layout *layout);

/* Lookups by section name; NULL when absent. */
const struct lm_reflector_cfg *lm_layout_reflector(const struct lm_layout *l,
						   const char *name);
const struct lm_cluster_cfg *lm_layout_cluster(const struct lm_layout *l,
					       const char *name);
/* The cluster that holds global rank `rank`, or NULL. */
const struct lm_cluster_cfg *lm_layout_cluster_of_rank(
	const struct lm_layout *l, uint32_t rank);
/* Transport node id of a client process, from its global rank. */
uint16_t lm_layout_client_id(const struct lm_layout *l, uint32_t rank);

/* "64M", "1G", "4096", "4K" -> bytes.  Returns 0 or LM_EINVAL. */
int lm_parse_size(const char *text, uint64_t *out);
/* "250ms", "2s", "500us", "40" (ms) -> microseconds. */
int lm_parse_duration(const char *text, uint64_t *out_us);
/* "127.0.0.1:7400" -> sockaddr_in (numeric IPv4 and port 1..65535). */
int lm_parse_addr(const char *text, struct sockaddr_in *out);
/* Fault specification "drop=0.1,dup=0.05,reorder=0.05,delay=0.1,
 * delay_max=2ms,seed=7" (any subset) as found in LM_FAULTS. */
int lm_parse_faults(const char *spec, struct lm_fault_cfg *out, char *err,
		    size_t errlen);

#endif
