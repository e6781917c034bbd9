/* The layout of `lemuria-run -n N` (quick_layout.h). */
#include "quick_layout.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lm_error.h"
#include "udp.h"

/* Ports are taken from here: below 32768, where Linux hands out the
 * ephemeral ports of the clients' own sockets, so that no client can hold
 * a daemon's port before the daemon binds it. */
#define LM_QUICK_PORT_LOW 20000u
#define LM_QUICK_PORT_SPAN 12000u
#define LM_QUICK_SECRET_BYTES 32

int lm_quick_split(unsigned n, const char *spec, unsigned per,
		   unsigned *sizes, size_t max, char *err, size_t errlen)
{
	size_t k = 0;
	unsigned long sum = 0;

	if (spec) {
		const char *s = spec;

		for (;;) {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(s, &end, 10);
			if (!isdigit((unsigned char)*s) || errno || v == 0 ||
			    v > 1024 || (*end && *end != '+')) {
				snprintf(err, errlen,
					 "--clusters \"%s\": give the sizes of "
					 "the clusters joined by +, each 1 to "
					 "1024 (4+4)", spec);
				return -1;
			}
			if (k == max) {
				snprintf(err, errlen,
					 "--clusters \"%s\": at most %zu "
					 "clusters", spec, max);
				return -1;
			}
			sizes[k++] = (unsigned)v;
			sum += v;
			if (!*end)
				break;
			s = end + 1;
		}
		if (n && sum != n) {
			snprintf(err, errlen,
				 "--clusters \"%s\" holds %lu ranks, but -n "
				 "asks for %u", spec, sum, n);
			return -1;
		}
		return (int)k;
	}
	if (n == 0) {
		snprintf(err, errlen, "-n needs a number of ranks above 0");
		return -1;
	}
	if (per > 1024) {
		snprintf(err, errlen, "--per-cluster %u: a cluster holds at "
			 "most 1024 ranks", per);
		return -1;
	}
	if (per == 0 || per > n) /* one cluster, or as few as may be */
		per = n < 1024 ? n : 1024;
	while (sum < n) {
		unsigned size = n - sum < per ? (unsigned)(n - sum) : per;

		if (k == max) {
			snprintf(err, errlen,
				 "%u ranks need more than %zu clusters of at "
				 "most 1024 (--per-cluster)", n, max);
			return -1;
		}
		sizes[k++] = size;
		sum += size;
	}
	return (int)k;
}

/* `count` UDP ports free on 127.0.0.1 now, each held bound until all are
 * found (so that no two are the same), from a random place in the span. */
static int free_ports(unsigned *ports, size_t count, char *err, size_t errlen)
{
	int fds[LM_QUICK_MAX_CLUSTERS + 1];
	size_t got = 0;
	uint32_t start = 0;

	if (getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = (uint32_t)getpid();
	for (unsigned i = 0; i < LM_QUICK_PORT_SPAN && got < count; i++) {
		unsigned port = LM_QUICK_PORT_LOW +
				(start + i) % LM_QUICK_PORT_SPAN;
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons((uint16_t)port) };
		char why[128];
		int fd;

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = lm_udp_bind(&a, why, sizeof(why));
		if (fd < 0)
			continue; /* taken */
		fds[got] = fd;
		ports[got++] = port;
	}
	for (size_t i = 0; i < got; i++)
		close(fds[i]);
	if (got < count) {
		snprintf(err, errlen, "found only %zu free UDP ports of %zu on "
			 "127.0.0.1 between %u and %u", got, count,
			 LM_QUICK_PORT_LOW,
			 LM_QUICK_PORT_LOW + LM_QUICK_PORT_SPAN - 1);
		return LM_EIO;
	}
	return 0;
}

static int write_secret(const char *path, char *err, size_t errlen)
{
	uint8_t secret[LM_QUICK_SECRET_BYTES];
	int fd, ok;

	if (getrandom(secret, sizeof(secret), 0) != sizeof(secret)) {
		snprintf(err, errlen, "no random bytes for the secret: %s",
			 strerror(errno));
		return LM_EIO;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ok = fd >= 0 && write(fd, secret, sizeof(secret)) ==
				(ssize_t)sizeof(secret);
	if (fd >= 0 && close(fd) != 0)
		ok = 0;
	memset(secret, 0, sizeof(secret));
	if (!ok) {
		snprintf(err, errlen, "cannot write %s: %s", path,
			 strerror(errno));
		return LM_EIO;
	}
	return 0;
}

/* Where the region goes: at 1 GiB, so that it ends below 4 GiB and a
 * program that keeps its pointers in 32-bit ints works (four of the
 * original SPLASH-2 codes do; docs/layout.md, `base`), unless it is too
 * large for that. */
uint64_t lm_quick_layout_base(uint64_t shared_size)
{
	return shared_size <= LM_LOW_BASE_MAX - LM_LOW_BASE ? LM_LOW_BASE :
							   LM_HIGH_BASE;
}

static int write_layout(const struct lm_quick_layout *q,
			const unsigned *sizes, size_t n,
			const char *shared_size, uint64_t base,
			const unsigned *ports, char *err, size_t errlen)
{
	FILE *f = fopen(q->path, "wx");
	int ok;

	if (!f) {
		snprintf(err, errlen, "cannot write %s: %s", q->path,
			 strerror(errno));
		return LM_EIO;
	}
	fprintf(f,
		"; made by lemuria-run -n for one run on this host; removed "
		"when it ends\n"
		"[lemuria]\nshared_size = %s\npage_size = 4096\n"
		"base = 0x%llx\nsecret_file = %s\n\n"
		"[reflector r0]\nlisten = 127.0.0.1:%u\n",
		shared_size, (unsigned long long)base, q->key, ports[0]);
	for (size_t i = 0; i < n; i++)
		fprintf(f,
			"\n[cluster c%zu]\nreflector = r0\n"
			"listen = 127.0.0.1:%u\nclients = %u\n",
			i, ports[i + 1], sizes[i]);
	ok = !ferror(f);
	if (fclose(f) != 0)
		ok = 0;
	if (!ok) {
		snprintf(err, errlen, "cannot write %s: %s", q->path,
			 strerror(errno));
		return LM_EIO;
	}
	return 0;
}

int lm_quick_layout_make(struct lm_quick_layout *q, const unsigned *sizes,
			 size_t nclusters, const char *shared_size, char *err,
			 size_t errlen)
{
	unsigned ports[LM_QUICK_MAX_CLUSTERS + 1];
	const char *tmp = getenv("TMPDIR");
	uint64_t bytes;
	int rc;

	memset(q, 0, sizeof(*q));
	if (nclusters == 0 || nclusters > LM_QUICK_MAX_CLUSTERS) {
		snprintf(err, errlen, "1 to %d clusters, not %zu",
			 LM_QUICK_MAX_CLUSTERS, nclusters);
		return LM_EINVAL;
	}
	if (lm_parse_size(shared_size, &bytes) != 0 || bytes == 0) {
		snprintf(err, errlen, "--shared-size \"%s\" is not a size "
			 "(64M, 1G)", shared_size);
		return LM_EINVAL;
	}
	if (!tmp || !*tmp)
		tmp = "/tmp";
	if (snprintf(q->dir, sizeof(q->dir), "%s/lemuria-run.XXXXXX", tmp) >=
		    (int)sizeof(q->dir) ||
	    !mkdtemp(q->dir)) {
		snprintf(err, errlen, "cannot make a directory in %s: %s", tmp,
			 strerror(errno));
		q->dir[0] = '\0';
		return LM_EIO;
	}
	snprintf(q->path, sizeof(q->path), "%s/layout.ini", q->dir);
	snprintf(q->key, sizeof(q->key), "%s/secret.key", q->dir);
	rc = write_secret(q->key, err, errlen);
	if (!rc)
		rc = free_ports(ports, nclusters + 1, err, errlen);
	if (!rc)
		rc = write_layout(q, sizes, nclusters, shared_size,
				  lm_quick_layout_base(bytes), ports, err,
				  errlen);
	if (rc)
		lm_quick_layout_remove(q);
	return rc;
}

void lm_quick_layout_remove(struct lm_quick_layout *q)
{
	if (!q->dir[0])
		return;
	unlink(q->path);
	unlink(q->key);
	rmdir(q->dir);
	q->dir[0] = '\0';
}
