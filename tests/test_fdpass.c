/* Descriptor hand-off (common/fdpass.c): a memfd reaches the listening
 * child and maps the same bytes; the wrong listener, a silent lemuriad,
 * an impostor and a message without exactly one descriptor are refused.
 * Every wait is bounded: receive timeouts, a deadline on waitpid, and an
 * alarm in each child. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "children.h"
#include "fdpass.h"
#include "lm_error.h"
#include "unit.h"

#define CHILD_ALARM_S 10   /* a forked child that hangs is killed */
#define CHILD_WAIT_MS 8000 /* the longest the parent waits for one */
#define PAGE	      4096

static const char pattern[] = "the cluster's shared copy";
static const char reply[] = "written by the child";

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What a listening child does once its name is out: its exit status. */
typedef int child_body(struct lm_fdpass_listener *l, pid_t parent);

/* Forks a child that listens, passes its socket name back in `name`
 * ("" when it could not listen) and runs `body`. */
static pid_t listening_child(child_body *body, char *name)
{
	struct pollfd p;
	pid_t parent = getpid(), pid;
	int fds[2];
	ssize_t n = 0;

	CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		struct lm_fdpass_listener l;
		char err[256];
		int rc;

		alarm(CHILD_ALARM_S);
		close(fds[0]);
		rc = lm_fdpass_listen(&l, err, sizeof(err));
		if (write(fds[1], l.name, sizeof(l.name)) !=
			(ssize_t)sizeof(l.name) ||
		    rc != 0)
			_exit(20);
		close(fds[1]);
		rc = body(&l, parent);
		lm_fdpass_close(&l);
		_exit(rc);
	}
	close(fds[1]);
	name[0] = '\0';
	p = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	if (poll(&p, 1, CHILD_WAIT_MS) == 1)
		n = read(fds[0], name, LM_FDPASS_NAME_MAX);
	close(fds[0]);
	CU_ASSERT_EQUAL(n, LM_FDPASS_NAME_MAX);
	name[LM_FDPASS_NAME_MAX - 1] = '\0';
	return pid;
}

/* A memfd of one page holding `pattern`, and its mapping in *map. */
static int pattern_memfd(char **map)
{
	int fd = memfd_create("test-fdpass", MFD_CLOEXEC);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(ftruncate(fd, PAGE), 0);
	*map = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CU_ASSERT_FATAL(*map != MAP_FAILED);
	memcpy(*map, pattern, sizeof(pattern));
	return fd;
}

/* A plain connection to abstract `name`, as anyone on the host could
 * make one. */
static int connect_abstract(const char *name)
{
	struct sockaddr_un sa;
	size_t n = strlen(name);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	CU_ASSERT_FATAL(s >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, name, n);
	if (connect(s, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				n)) != 0) {
		close(s);
		return -1;
	}
	return s;
}

/* Sends one byte with `nfds` descriptors (0: none) on `s`. */
static int send_fds(int s, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr msg;
	struct iovec iov;
	char byte = 'x';

	memset(&ctl, 0, sizeof(ctl));
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = &byte;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > 0) {
		struct cmsghdr *cm;

		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	return sendmsg(s, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* The lowest free descriptor number: unchanged when nothing leaked. */
static int lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	CU_ASSERT(fd >= 0);
	close(fd);
	return fd;
}

/* ------------------------------------------------------------------ */
/* Children. */

/* Takes the memfd from the parent, checks close-on-exec and the bytes,
 * answers through the same page. */
static int child_maps_memfd(struct lm_fdpass_listener *l, pid_t parent)
{
	char err[256], *map;
	int fd, flags;

	if (lm_fdpass_receive(l, (uint32_t)parent, 5000, &fd, err,
			      sizeof(err)) != 0)
		return 10;
	flags = fcntl(fd, F_GETFD);
	if (flags < 0 || !(flags & FD_CLOEXEC))
		return 11;
	map = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return 12;
	if (memcmp(map, pattern, sizeof(pattern)) != 0)
		return 13;
	memcpy(map + PAGE / 2, reply, sizeof(reply));
	munmap(map, PAGE);
	close(fd);
	return 0;
}

/* Expects no descriptor: an error (the parent hung up), never an fd. */
static int child_gets_nothing(struct lm_fdpass_listener *l, pid_t parent)
{
	char err[256];
	int fd = 12345;
	int rc =
	    lm_fdpass_receive(l, (uint32_t)parent, 500, &fd, err, sizeof(err));

	if (rc == 0)
		return 1;
	if (fd != -1)
		return 2;
	return rc == LM_EBADMSG || rc == LM_ETIMEDOUT ? 0 : 3;
}

/* ------------------------------------------------------------------ */
/* Tests. */

static void test_fdpass_child_maps_parents_memfd(void)
{
	char name[LM_FDPASS_NAME_MAX], err[256] = "", *map;
	pid_t child = listening_child(child_maps_memfd, name);
	/* Made after the fork: the child sees it only through the socket. */
	int fd = pattern_memfd(&map);

	CU_ASSERT_PTR_NOT_NULL(strstr(name, "lemuria-fd-"));
	CU_ASSERT_EQUAL(
	    lm_fdpass_send(name, (uint32_t)child, fd, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(tc_wait(child, CHILD_WAIT_MS), 0);
	CU_ASSERT_STRING_EQUAL(map + PAGE / 2, reply);
	munmap(map, PAGE);
	close(fd);
}

static void test_fdpass_send_refuses_another_listener(void)
{
	char name[LM_FDPASS_NAME_MAX], err[256] = "", want[64], *map;
	pid_t child = listening_child(child_gets_nothing, name);
	int fd = pattern_memfd(&map);

	/* The listener is the child; we claim to expect ourselves. */
	CU_ASSERT_EQUAL(
	    lm_fdpass_send(name, (uint32_t)getpid(), fd, err, sizeof(err)),
	    LM_EAUTH);
	snprintf(want, sizeof(want), "held by pid %ld uid %lu", (long)child,
		 (unsigned long)geteuid());
	CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
	snprintf(want, sizeof(want), "not the client (pid %ld uid %lu)",
		 (long)getpid(), (unsigned long)geteuid());
	CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not sent"));
	CU_ASSERT_EQUAL(tc_wait(child, CHILD_WAIT_MS), 0);
	munmap(map, PAGE);
	close(fd);
}

static void test_fdpass_receive_times_out(void)
{
	struct lm_fdpass_listener l;
	char err[256] = "", want[128];
	int fd = 12345;
	long long t0, waited;

	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&l, err, sizeof(err)), 0);
	t0 = now_ms();
	CU_ASSERT_EQUAL(lm_fdpass_receive(&l, 4242, 200, &fd, err, sizeof(err)),
			LM_ETIMEDOUT);
	waited = now_ms() - t0;
	CU_ASSERT(waited >= 190 && waited < 2000);
	CU_ASSERT_EQUAL(fd, -1);
	snprintf(want, sizeof(want),
		 "no file descriptor from the lemuriad (pid 4242) within "
		 "200 ms");
	CU_ASSERT_STRING_EQUAL(err, want);
	lm_fdpass_close(&l);
	lm_fdpass_close(&l); /* idempotent */
	CU_ASSERT_EQUAL(l.fd, -1);
	CU_ASSERT_EQUAL(lm_fdpass_receive(&l, 0, 10, &fd, err, sizeof(err)),
			LM_EINVAL);
}

static void test_fdpass_receive_refuses_a_byte_without_fd(void)
{
	struct lm_fdpass_listener l;
	char err[256] = "";
	int fd = 12345, s, free_fd;

	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&l, err, sizeof(err)), 0);
	s = connect_abstract(l.name);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT_EQUAL(send_fds(s, NULL, 0), 0);
	free_fd = lowest_free_fd();
	CU_ASSERT_EQUAL(lm_fdpass_receive(&l, (uint32_t)getpid(), 1000, &fd,
					  err, sizeof(err)),
			LM_EBADMSG);
	CU_ASSERT_EQUAL(fd, -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "sent 0 file descriptors"));
	CU_ASSERT_EQUAL(lowest_free_fd(), free_fd);
	close(s);
	/* Hanging up without a message is refused the same way. */
	s = connect_abstract(l.name);
	CU_ASSERT_FATAL(s >= 0);
	close(s);
	CU_ASSERT_EQUAL(lm_fdpass_receive(&l, (uint32_t)getpid(), 1000, &fd,
					  err, sizeof(err)),
			LM_EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "without sending"));
	lm_fdpass_close(&l);
}

/* Two descriptors fit the one-descriptor control buffer (its padding,
 * on 64-bit), four do not (MSG_CTRUNC): both refused, none left open. */
static void test_fdpass_receive_refuses_several_fds_and_closes_them(void)
{
	/* (on 32-bit, two descriptors are truncated too) */
	static const char *const why[] = { "refused", "truncated" };
	struct lm_fdpass_listener l;
	char err[256] = "";
	int fd = 12345, s, p[2], fds[4], free_fd;

	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&l, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	fds[0] = fds[2] = p[0];
	fds[1] = fds[3] = p[1];
	for (int round = 0; round < 2; round++) {
		int nfds = round == 0 ? 2 : 4;

		s = connect_abstract(l.name);
		CU_ASSERT_FATAL(s >= 0);
		CU_ASSERT_EQUAL(send_fds(s, fds, nfds), 0);
		free_fd = lowest_free_fd();
		CU_ASSERT_EQUAL(lm_fdpass_receive(&l, (uint32_t)getpid(), 1000,
						  &fd, err, sizeof(err)),
				LM_EBADMSG);
		CU_ASSERT_EQUAL(fd, -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, why[round]));
		CU_ASSERT_EQUAL(lowest_free_fd(), free_fd); /* all closed */
		close(s);
	}
	close(p[0]);
	close(p[1]);
	lm_fdpass_close(&l);
}

/* An impostor (here a child: another pid) that connects first and sends
 * a descriptor is dropped unread; the real sender's arrives after it. */
static void test_fdpass_receive_skips_an_impostor(void)
{
	struct lm_fdpass_listener l;
	struct stat want, got;
	struct pollfd p;
	char err[256] = "", *map;
	int fd = -1, mine, ready[2];
	pid_t child;

	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&l, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(pipe(ready), 0);
	child = fork();
	CU_ASSERT_FATAL(child >= 0);
	if (child == 0) {
		int s, bait = memfd_create("bait", MFD_CLOEXEC);

		alarm(CHILD_ALARM_S);
		s = connect_abstract(l.name);
		if (s < 0 || bait < 0 || send_fds(s, &bait, 1) != 0)
			_exit(1);
		_exit(write(ready[1], "r", 1) == 1 ? 0 : 1);
	}
	close(ready[1]);
	p = (struct pollfd){ .fd = ready[0], .events = POLLIN };
	CU_ASSERT_EQUAL(poll(&p, 1, CHILD_WAIT_MS), 1);
	close(ready[0]);
	CU_ASSERT_EQUAL(tc_wait(child, CHILD_WAIT_MS), 0);
	mine = pattern_memfd(&map);
	/* We are the listener here, so we send to ourselves. */
	CU_ASSERT_EQUAL(
	    lm_fdpass_send(l.name, (uint32_t)getpid(), mine, err, sizeof(err)),
	    0);
	CU_ASSERT_EQUAL(lm_fdpass_receive(&l, (uint32_t)getpid(), 2000, &fd,
					  err, sizeof(err)),
			0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(fstat(mine, &want), 0);
	CU_ASSERT_EQUAL(fstat(fd, &got), 0);
	CU_ASSERT_EQUAL(got.st_ino, want.st_ino);
	close(fd);
	munmap(map, PAGE);
	close(mine);
	lm_fdpass_close(&l);
}

static void test_fdpass_send_never_blocks_on_a_full_backlog(void)
{
	struct lm_fdpass_listener l;
	char err[256] = "", *map;
	int s[3], n = 0, fd;
	long long t0;

	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&l, err, sizeof(err)), 0);
	/* Fill the backlog (Linux queues backlog + 1 connections). */
	while (n < 3 && (s[n] = connect_abstract(l.name)) >= 0)
		n++;
	CU_ASSERT(n >= 1 && n < 3);
	fd = pattern_memfd(&map);
	t0 = now_ms();
	CU_ASSERT_EQUAL(
	    lm_fdpass_send(l.name, (uint32_t)getpid(), fd, err, sizeof(err)),
	    LM_ENOBUFS);
	CU_ASSERT(now_ms() - t0 < 1000);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backlog is full"));
	while (n > 0)
		close(s[--n]);
	munmap(map, PAGE);
	close(fd);
	lm_fdpass_close(&l);
}

static void test_fdpass_send_refuses_names_not_ours(void)
{
	char err[256] = "";
	char *map;
	int fd = pattern_memfd(&map);

	/* The daemon connects only where lm_fdpass_listen could listen. */
	CU_ASSERT_EQUAL(
	    lm_fdpass_send("/tmp/.X11-unix/X0", 1, fd, err, sizeof(err)),
	    LM_EINVAL);
	CU_ASSERT_EQUAL(lm_fdpass_send("lemuria-fd-", 1, fd, err, sizeof(err)),
			LM_EINVAL);
	CU_ASSERT_EQUAL(
	    lm_fdpass_send("lemuria-fd-1/x", 1, fd, err, sizeof(err)),
	    LM_EINVAL);
	CU_ASSERT_EQUAL(
	    lm_fdpass_send("lemuria-fd-1-ab", 0, fd, err, sizeof(err)),
	    LM_EINVAL);
	CU_ASSERT_EQUAL(
	    lm_fdpass_send("lemuria-fd-1-ab", 1, -1, err, sizeof(err)),
	    LM_EINVAL);
	/* Well formed, but nobody listens there. */
	CU_ASSERT_EQUAL(
	    lm_fdpass_send("lemuria-fd-1-00", 1, fd, err, sizeof(err)), LM_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, strerror(ECONNREFUSED)));
	munmap(map, PAGE);
	close(fd);
}

static void test_fdpass_names_differ(void)
{
	struct lm_fdpass_listener a, b;
	char err[256] = "", prefix[32];

	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&a, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(lm_fdpass_listen(&b, err, sizeof(err)), 0);
	snprintf(prefix, sizeof(prefix), "lemuria-fd-%ld-", (long)getpid());
	CU_ASSERT_EQUAL(strncmp(a.name, prefix, strlen(prefix)), 0);
	CU_ASSERT_EQUAL(strlen(a.name), strlen(prefix) + 32);
	CU_ASSERT_STRING_NOT_EQUAL(a.name, b.name);
	lm_fdpass_close(&a);
	lm_fdpass_close(&b);
}

LM_TEST_SUITE("fdpass", LM_TEST(test_fdpass_child_maps_parents_memfd),
	      LM_TEST(test_fdpass_send_refuses_another_listener),
	      LM_TEST(test_fdpass_receive_times_out),
	      LM_TEST(test_fdpass_receive_refuses_a_byte_without_fd),
	      LM_TEST(test_fdpass_receive_refuses_several_fds_and_closes_them),
	      LM_TEST(test_fdpass_receive_skips_an_impostor),
	      LM_TEST(test_fdpass_send_never_blocks_on_a_full_backlog),
	      LM_TEST(test_fdpass_send_refuses_names_not_ours),
	      LM_TEST(test_fdpass_names_differ))
