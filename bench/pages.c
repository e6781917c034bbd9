/* What this machine charges for the memory operations the client and the
 * daemons do per page (docs/performance.md, "Page faults"): a first touch
 * of fresh anonymous memory (a page fault), the same pages given by one
 * MADV_POPULATE_WRITE (common/mem.h) in bulk and a page per call, a fault
 * that maps a memfd page already there through a second view (a page
 * installed by the client, then read by the application), and mprotect of
 * one mapped page each way (a write fault opening a page, a flush closing
 * it), in microseconds per page beside a memcpy of a page measured in the
 * same run.  Medians of ROUNDS rounds of 512 pages, with min and max.
 *   usage: pages [-r ROUNDS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"

#define PAGES 512
#define MAX_ROUNDS 64

enum op {
	OP_MEMCPY,
	OP_TOUCH,
	OP_POPULATE,
	OP_POPULATE_EACH,
	OP_VIEW_FAULT,
	OP_PROTECT_WRITE,
	OP_PROTECT_READ,
	OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"memcpy of a page",
	"first touch (page fault)",
	"populate, 512 pages a call",
	"populate, a page a call",
	"fault through a second view",
	"mprotect R -> RW, a page",
	"mprotect RW -> R, a page",
};

static size_t page;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint8_t *fresh(void)
{
	uint8_t *p = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("pages: mmap");
		exit(1);
	}
	return p;
}

/* One round of op over PAGES pages: microseconds per page. */
static double round_of(enum op op)
{
	static uint8_t src[1 << 16];
	volatile uint8_t sink = 0;
	uint8_t *p = NULL, *view;
	double t0, t;
	int fd;

	switch (op) {
	case OP_MEMCPY:
		p = fresh();
		memset(p, 1, PAGES * page);
		t0 = now_us();
		for (size_t i = 0; i < PAGES; i++)
			memcpy(p + i * page, src, page);
		t = now_us() - t0;
		break;
	case OP_TOUCH:
		p = fresh();
		t0 = now_us();
		for (size_t i = 0; i < PAGES; i++)
			p[i * page] = 1;
		t = now_us() - t0;
		break;
	case OP_POPULATE:
	case OP_POPULATE_EACH:
		p = fresh();
		t0 = now_us();
		if (op == OP_POPULATE)
			lm_mem_populate(p, PAGES * page);
		else
			for (size_t i = 0; i < PAGES; i++)
				lm_mem_populate(p + i * page, page);
		t = now_us() - t0;
		break;
	case OP_VIEW_FAULT:
		fd = memfd_create("bench-pages", 0);
		if (fd < 0 || ftruncate(fd, (off_t)(PAGES * page)) != 0) {
			perror("pages: memfd");
			exit(1);
		}
		p = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);
		view = mmap(NULL, PAGES * page, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (p == MAP_FAILED || view == MAP_FAILED) {
			perror("pages: mmap of the memfd");
			exit(1);
		}
		memset(p, 1, PAGES * page);
		t0 = now_us();
		for (size_t i = 0; i < PAGES; i++)
			sink ^= view[i * page];
		t = now_us() - t0;
		munmap(view, PAGES * page);
		break;
	case OP_PROTECT_WRITE:
	case OP_PROTECT_READ:
		p = fresh();
		memset(p, 1, PAGES * page);
		for (size_t i = 0; op == OP_PROTECT_WRITE && i < PAGES; i += 2)
			mprotect(p + i * page, page, PROT_READ);
		t0 = now_us();
		/* every other page, so that no two calls merge their areas */
		for (size_t i = 0; i < PAGES; i += 2)
			mprotect(p + i * page, page,
				 op == OP_PROTECT_WRITE ?
					 PROT_READ | PROT_WRITE : PROT_READ);
		t = (now_us() - t0) * 2;
		break;
	default:
		t = 0;
	}
	(void)sink;
	munmap(p, PAGES * page);
	return t / PAGES;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	double v[OP_COUNT][MAX_ROUNDS], med[OP_COUNT];
	int rounds = 9, opt;
	uint8_t *probe;

	while ((opt = getopt(argc, argv, "r:")) != -1) {
		if (opt == 'r' && atoi(optarg) > 0 &&
		    atoi(optarg) <= MAX_ROUNDS) {
			rounds = atoi(optarg);
			continue;
		}
		fprintf(stderr, "usage: pages [-r ROUNDS (1..%d)]\n",
			MAX_ROUNDS);
		return 2;
	}
	page = (size_t)sysconf(_SC_PAGESIZE);
	probe = fresh();
	if (!lm_mem_populate(probe, PAGES * page))
		printf("pages: MADV_POPULATE_WRITE is not available here: the "
		       "populate rows measure a refused call\n");
	munmap(probe, PAGES * page);
	/* the operations take turns within each round */
	for (int r = 0; r < rounds; r++)
		for (int op = 0; op < OP_COUNT; op++)
			v[op][r] = round_of((enum op)op);
	printf("%-30s %10s %10s %10s %10s\n", "per page", "median us",
	       "min", "max", "x memcpy");
	for (int op = 0; op < OP_COUNT; op++) {
		qsort(v[op], (size_t)rounds, sizeof(double), cmp_double);
		med[op] = v[op][rounds / 2];
		printf("%-30s %10.3f %10.3f %10.3f %10.1f\n", op_names[op],
		       med[op], v[op][0], v[op][rounds - 1],
		       med[op] / med[OP_MEMCPY]);
	}
	return 0;
}
