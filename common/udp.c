/* Socket layer of the transport: the few UDP calls both drivers (evnode
 * for the daemons, rpc for the client library) share.  Failures are
 * written into the caller's buffer; nothing here logs. */
#include "udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Large enough to absorb a burst of 64 KiB messages from many peers while
 * the event loop is busy; the kernel caps it at net.core.[rw]mem_max. */
#define LM_UDP_SOCKBUF (4 << 20)

static void udp_error(char *err, size_t errlen, const char *what,
		      const struct sockaddr_in *addr, int errnum)
{
	char a[32];

	if (!err || !errlen)
		return;
	snprintf(err, errlen, "%s %s: %s", what,
		 lm_addr_str(addr, a, sizeof(a)), strerror(errnum));
}

int lm_udp_bind(struct sockaddr_in *addr, char *err, size_t errlen)
{
	int size = LM_UDP_SOCKBUF;
	socklen_t alen = sizeof(*addr);
	int fd, errnum;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		udp_error(err, errlen, "socket for", addr, errno);
		return -1;
	}
	/* Best effort: a smaller buffer only means more drops, which the
	 * reliability engine repairs. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	if (bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
		errnum = errno;
		udp_error(err, errlen, "bind", addr, errnum);
		goto err;
	}
	if (getsockname(fd, (struct sockaddr *)addr, &alen) < 0) {
		errnum = errno;
		udp_error(err, errlen, "getsockname", addr, errnum);
		goto err;
	}
	return fd;
err:
	close(fd);
	return -1;
}

const char *lm_addr_str(const struct sockaddr_in *addr, char *buf,
			size_t len)
{
	char ip[INET_ADDRSTRLEN];

	if (!len)
		return buf;
	if (!addr || !inet_ntop(AF_INET, &addr->sin_addr, ip, sizeof(ip))) {
		snprintf(buf, len, "?");
		return buf;
	}
	snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(addr->sin_port));
	return buf;
}
