/* A set of pages put into a cluster's copy as one (copy_set.h).  No
 * library does this: it is three kernel calls (fallocate, UFFDIO_COPY,
 * UFFDIO_WAKE) on our own memory object. */
#include "copy_set.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lm_error.h"

/* A userfaultfd whose missing pages in [addr, addr + len) wait, and with
 * `wp` whose write-protected ones too (0 or 1 with *fd_out, else LM_EIO
 * with err filled). */
static int make_waits(void *addr, size_t len, bool wp, int *fd_out,
		      char *err, size_t errlen)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = wp ? UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0,
	};
	struct uffdio_register reg = {
		.range = { (uintptr_t)addr, len },
		.mode = UFFDIO_REGISTER_MODE_MISSING |
			(wp ? UFFDIO_REGISTER_MODE_WP : 0),
	};
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	*fd_out = -1;
	if (fd < 0) {
		snprintf(err, errlen, "userfaultfd: %s%s", strerror(errno),
			 errno == EPERM ? " (for other users than root, "
			 "sysctl vm.unprivileged_userfaultfd=1)" : "");
		return LM_EIO;
	}
	if (ioctl(fd, UFFDIO_API, &api) != 0 ||
	    ioctl(fd, UFFDIO_REGISTER, &reg) != 0) {
		snprintf(err, errlen, "userfaultfd on shared memory: %s",
			 strerror(errno));
		close(fd);
		return LM_EIO;
	}
	*fd_out = fd;
	return 0;
}

int lm_copy_set_reader(void *addr, size_t len, int *fd_out, char *err,
		       size_t errlen)
{
	/* writes wait too where the kernel can (6.x): twinned pages then
	 * go in as one as well */
	if (make_waits(addr, len, true, fd_out, err, errlen) == 0)
		return 0;
	return make_waits(addr, len, false, fd_out, err, errlen);
}

int lm_copy_filler_open(struct lm_copy_filler *f, int memfd,
			uint64_t pages_off, size_t len, char *err,
			size_t errlen)
{
	f->memfd = memfd;
	f->pages_off = pages_off;
	f->len = len;
	f->uffd = -1;
	f->fill = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
		       (off_t)pages_off);
	if (f->fill == MAP_FAILED) {
		f->fill = NULL;
		snprintf(err, errlen, "second mapping of the copy: %s",
			 strerror(errno));
		return LM_EIO;
	}
	if (make_waits(f->fill, len, false, &f->uffd, err, errlen)) {
		munmap(f->fill, len);
		f->fill = NULL;
		return LM_EIO;
	}
	return 0;
}

void lm_copy_filler_close(struct lm_copy_filler *f)
{
	if (f->uffd >= 0)
		close(f->uffd);
	if (f->fill)
		munmap(f->fill, f->len);
	f->uffd = -1;
	f->fill = NULL;
}

/* Whether item `it` may be taken out and filled (its lock held): a page
 * the copy holds older, not owned; a twinned one only when its writers
 * wait (`writers_wait`). */
static bool takes_whole(const struct lm_ccopy *cc,
			const struct lm_copy_set_item *it, bool writers_wait)
{
	uint32_t have;

	return lm_ccopy_version(cc, it->page, &have) && have < it->version &&
	       (writers_wait || !lm_ccopy_is_twinned(cc, it->page)) &&
	       !lm_ccopy_is_owned(cc, it->page);
}

/* Write-protects (or not) `page` in every reader's view.  false when a
 * reader's kernel or registration refuses (none is then protected). */
static bool protect_all(const int *readers, uint32_t n_readers, uint64_t at,
			size_t len, bool on)
{
	for (uint32_t r = 0; r < n_readers; r++) {
		struct uffdio_writeprotect wp = {
			.range = { at, len },
			.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
		};

		if (readers[r] < 0 ||
		    ioctl(readers[r], UFFDIO_WRITEPROTECT, &wp) == 0)
			continue;
		if (!on)
			continue; /* a reader gone: nothing to undo */
		while (r-- > 0) {
			wp.mode = 0;
			if (readers[r] >= 0)
				(void)ioctl(readers[r], UFFDIO_WRITEPROTECT,
					    &wp);
		}
		return false;
	}
	return true;
}

bool lm_copy_set_stop_writers(const int *readers, uint32_t n_readers,
			      uint64_t view, uint64_t len, bool on)
{
	return protect_all(readers, n_readers, view, len, on);
}

/* Reads at most this many batches of fault messages a call: the
 * descriptor is level-triggered, so what is left is read next time. */
#define WAKE_READS 16

uint32_t lm_copy_set_wake_waiting(int reader, uint64_t view, uint64_t len)
{
	struct uffdio_range all = { view, len };
	struct uffd_msg msgs[16];
	uint32_t faults = 0;

	if (reader < 0)
		return 0;
	for (int i = 0; i < WAKE_READS; i++) {
		ssize_t got = read(reader, msgs, sizeof(msgs));

		if (got <= 0)
			break; /* EAGAIN: none left (the fd is non-blocking) */
		for (size_t k = 0; k < (size_t)got / sizeof(msgs[0]); k++)
			faults += msgs[k].event == UFFD_EVENT_PAGEFAULT;
	}
	(void)ioctl(reader, UFFDIO_WAKE, &all);
	return faults;
}

int lm_copy_set_install(const struct lm_ccopy *cc,
			const struct lm_copy_filler *f,
			const struct lm_copy_set_item *items, uint32_t n,
			const int *readers, uint32_t n_readers, uint64_t view,
			uint64_t view_len)
{
	uint32_t locked = 0, done = 0, nmerged = 0;
	size_t ps = cc->page_size;
	uint8_t *merged = NULL;
	bool *stopped = NULL;
	int rc = 0;

	if (!f || f->uffd < 0 || n == 0)
		return 0;
	stopped = calloc(n, sizeof(*stopped));
	if (!stopped)
		return 0; /* page by page, by the caller */
	/* ascending: a client takes one page's lock at a time (its twin),
	 * so no order of ours can deadlock with it; the caller sorts */
	for (; locked < n; locked++)
		if (!lm_ccopy_lock(cc, items[locked].page)) {
			rc = LM_ETIMEDOUT;
			goto unlock;
		}
	/* a twinned page's writers (clients that hold it open) wait while
	 * it is read, merged and put back: nothing they write is lost */
	for (uint32_t i = 0; i < n; i++)
		if (takes_whole(cc, &items[i], true) &&
		    lm_ccopy_is_twinned(cc, items[i].page)) {
			if (!merged && !(merged = malloc(n * ps)))
				break;
			stopped[i] = protect_all(
				readers, n_readers,
				view + (uint64_t)items[i].page * ps, ps, true);
		}
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *live, *twin, *m;

		if (!stopped[i])
			continue;
		live = lm_ccopy_page(cc, items[i].page);
		twin = lm_ccopy_twin_of(cc, items[i].page);
		m = merged + (size_t)nmerged++ * ps;
		/* what lm_ccopy_install would write in place */
		memcpy(m, live, ps);
		for (size_t k = 0; k < ps; k++)
			if (items[i].data[k] != twin[k])
				m[k] = twin[k] = items[i].data[k];
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!takes_whole(cc, &items[i], stopped[i]))
			continue;
		if (fallocate(f->memfd, FALLOC_FL_PUNCH_HOLE |
			      FALLOC_FL_KEEP_SIZE,
			      (off_t)(f->pages_off + (uint64_t)items[i].page * ps),
			      (off_t)ps) != 0) {
			if (done == 0) {
				rc = LM_EIO; /* nothing out yet: nothing lost */
				goto unlock;
			}
			/* pages out already go back in below; this one stays
			 * for lm_ccopy_install */
			break;
		}
		done = i + 1;
	}
	nmerged = 0;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *src = stopped[i] ?
			merged + (size_t)nmerged++ * ps : items[i].data;
		struct uffdio_copy cp = {
			.dst = (uintptr_t)(f->fill + (size_t)items[i].page * ps),
			.src = (uintptr_t)src,
			.len = ps,
			.mode = UFFDIO_COPY_MODE_DONTWAKE,
		};

		if (i >= done || !takes_whole(cc, &items[i], stopped[i]))
			continue;
		/* a page appears whole or not at all; should the kernel
		 * refuse, a plain copy fills the hole (readers may then see
		 * it being written, as before sets existed) */
		if (ioctl(f->uffd, UFFDIO_COPY, &cp) != 0 ||
		    cp.copy != (int64_t)ps)
			memcpy(lm_ccopy_page(cc, items[i].page), src, ps);
		atomic_store_explicit(&cc->table[items[i].page].version,
				      items[i].version, memory_order_release);
		rc++;
	}
	for (uint32_t r = 0; r < n_readers; r++) {
		struct uffdio_range all = { view, view_len };

		if (readers[r] >= 0)
			(void)ioctl(readers[r], UFFDIO_WAKE, &all);
	}
unlock:
	/* writers go on (a page not put in after all takes its merge in
	 * place, from lm_ccopy_install: its twin took the bytes already,
	 * so the merge finds nothing new: it must be written here) */
	nmerged = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!stopped[i])
			continue;
		if (i >= done || rc < 0)
			memcpy(lm_ccopy_page(cc, items[i].page),
			       merged + (size_t)nmerged * ps, ps);
		nmerged++;
		protect_all(readers, n_readers,
			    view + (uint64_t)items[i].page * ps, ps, false);
	}
	while (locked-- > 0)
		lm_ccopy_unlock(cc, items[locked].page);
	free(merged);
	free(stopped);
	return rc;
}
