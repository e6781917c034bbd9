/* Thin helpers over UDP sockets.  Errors go into the caller's buffer. */
#ifndef LM_UDP_H
#define LM_UDP_H

#include <netinet/in.h>
#include <stddef.h>

/* Non-blocking, close-on-exec UDP socket bound to addr (port 0 picks a free
 * one; the bound address is written back).  Socket buffers are enlarged to
 * hold a few MiB.  Returns the fd, or -1 with the reason in err. */
int lm_udp_bind(struct sockaddr_in *addr, char *err, size_t errlen);

/* "a.b.c.d:port" into buf (at least 22 bytes); returns buf. */
const char *lm_addr_str(const struct sockaddr_in *addr, char *buf,
			size_t len);

#endif
