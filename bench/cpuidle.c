/* The machine's idle share over time, for the benchmarks: every INTERVAL
 * ms, one line "MICROSECONDS IDLE BUSY" with the monotonic clock (the
 * clock of SPLASH-2's CLOCK under Lemuria and pthreads alike) and the
 * idle and busy ticks of all CPUs so far (/proc/stat's first line: idle
 * and iowait against user, nice, system, irq, softirq and steal).  A
 * benchmark runs it beside a program and keeps the share of idle ticks
 * between the program's own timestamps (bench/lib.sh, idle_share).
 *
 * Why not perf: on the PVM guests of these machines `perf record -a`
 * puts one CPU's samples taken with interrupts off on the user code that
 * runs next and shows that CPU never idle (docs/performance.md).
 *
 *   cpuidle [-i MS] [-t SECONDS]
 *
 * Stops at SIGTERM or SIGINT, when its output closes, or after SECONDS
 * (default 900).  Exit status 0, 1 when /proc/stat cannot be read, 2 on
 * a usage error. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static unsigned long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ull +
	       (unsigned long long)ts.tv_nsec / 1000ull;
}

/* The idle and busy ticks of all CPUs; 0, or -1 after a message. */
static int read_ticks(unsigned long long *idle, unsigned long long *busy)
{
	unsigned long long v[8] = { 0 };
	char line[512];
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f) {
		fprintf(stderr, "cpuidle: /proc/stat: %s\n", strerror(errno));
		return -1;
	}
	n = fgets(line, sizeof(line), f) ?
		sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
		       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) :
		0;
	fclose(f);
	if (n < 4) {
		fprintf(stderr, "cpuidle: /proc/stat: no \"cpu\" line\n");
		return -1;
	}
	*idle = v[3] + v[4];
	*busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	return 0;
}

/* A whole number in [lo, hi] from OPTARG, or -1 after a message. */
static long number(const char *what, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "cpuidle: %s wants a number from %ld to %ld, "
				"not '%s'\n", what, lo, hi, s);
		return -1;
	}
	return v;
}

int main(int argc, char **argv)
{
	long interval_ms = 10, limit_s = 900;
	unsigned long long idle, busy, end_us;
	struct sigaction sa;
	int opt;

	while ((opt = getopt(argc, argv, "i:t:")) != -1) {
		switch (opt) {
		case 'i':
			interval_ms = number("-i", optarg, 1, 10000);
			break;
		case 't':
			limit_s = number("-t", optarg, 1, 86400);
			break;
		default:
			interval_ms = -1;
		}
		if (interval_ms < 0 || limit_s < 0)
			break;
	}
	if (interval_ms < 0 || limit_s < 0 || optind != argc) {
		fprintf(stderr, "usage: cpuidle [-i MS] [-t SECONDS]\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed output ends the loop instead */
	end_us = now_us() + (unsigned long long)limit_s * 1000000ull;
	while (!stop) {
		unsigned long long t = now_us();
		struct timespec pause = { interval_ms / 1000,
					  (interval_ms % 1000) * 1000000L };

		if (read_ticks(&idle, &busy) != 0)
			return 1;
		if (printf("%llu %llu %llu\n", t, idle, busy) < 0 ||
		    fflush(stdout) != 0 || t >= end_us)
			break;
		nanosleep(&pause, NULL); /* a signal ends it early */
	}
	return 0;
}
