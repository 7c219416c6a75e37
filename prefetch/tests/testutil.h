/*
 * testutil.h - a minimal test harness for the nvmprefetch tests: CHECK
 * macros that record failures without aborting, a runner that prints one
 * line per test, skip support, and the closing "N passed, M failed" line.
 */
#ifndef NVMPF_TESTUTIL_H
#define NVMPF_TESTUTIL_H

#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int t_passed, t_failed, t_skipped;
static int t_cur_failed, t_cur_skipped;
static char t_skip_reason[256];

#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "    %s:%d: CHECK failed: %s\n",        \
				__FILE__, __LINE__, #cond);                 \
			t_cur_failed = 1;                                   \
		}                                                           \
	} while (0)

/* Compare two integers, printing both values on failure. */
#define CHECK_EQ(a, b)                                                      \
	do {                                                                \
		long long _a = (long long)(a), _b = (long long)(b);         \
		if (_a != _b) {                                             \
			fprintf(stderr,                                     \
				"    %s:%d: CHECK_EQ failed: %s == %s "         \
				"(%lld != %lld)\n",                         \
				__FILE__, __LINE__, #a, #b, _a, _b);        \
			t_cur_failed = 1;                                   \
		}                                                           \
	} while (0)

/* Mark the current test skipped (not counted as passed or failed). */
#define SKIP(...)                                                           \
	do {                                                                \
		snprintf(t_skip_reason, sizeof t_skip_reason, __VA_ARGS__); \
		t_cur_skipped = 1;                                          \
		return;                                                     \
	} while (0)

/* Run one test function and print its outcome. */
static void t_run(const char *name, void (*fn)(void))
{
	t_cur_failed = 0;
	t_cur_skipped = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	fn();
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
	if (t_cur_failed) {
		t_failed++;
		printf("FAIL %s (%.0f ms)\n", name, ms);
	} else if (t_cur_skipped) {
		t_skipped++;
		printf("skip %s: %s\n", name, t_skip_reason);
	} else {
		t_passed++;
		printf("ok   %s (%.0f ms)\n", name, ms);
	}
	fflush(stdout);
}

#define RUN(fn) t_run(#fn, fn)

/* Print the closing line and return the process exit status. */
static int t_finish(void)
{
	if (t_skipped)
		printf("%d passed, %d failed, %d skipped\n", t_passed, t_failed,
		       t_skipped);
	else
		printf("%d passed, %d failed\n", t_passed, t_failed);
	return t_failed ? 1 : 0;
}

/* Number of CPUs the calling thread may run on. */
static inline int t_allowed_cpus(void)
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof s, &s) != 0)
		return 1;
	return CPU_COUNT(&s);
}

/* Monotonic time in ns. */
static inline unsigned long long t_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull +
	       (unsigned long long)ts.tv_nsec;
}

#endif /* NVMPF_TESTUTIL_H */
