/*
 * test_api.c - unit tests of libnvmprefetch's API: argument and
 * configuration errors, queue capacity and drops, drain, statistics (exact
 * page/line/byte counts), page faults really taken off the caller, the
 * sleep/wake protocol's system-call behaviour, destroy with pending jobs,
 * placement and fallback reporting (with fake sysfs topologies and
 * restricted affinity), signal blocking, no allocation in enqueue, and use
 * across fork().
 *
 * Linked against the static library so it can use the internal test hooks.
 * Needs 2 CPUs for the placement tests (they are skipped otherwise).
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "internal.h"
#include "nvmprefetch.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------ */
/* malloc interposition: counts allocations made by the current thread  */
/* while counting is on (glibc exports the __libc_* entry points).      */
/* ------------------------------------------------------------------ */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static __thread volatile int count_allocs;
static __thread volatile unsigned long nallocs;

void *malloc(size_t n)
{
	if (count_allocs)
		nallocs++;
	return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
	if (count_allocs)
		nallocs++;
	return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
	if (count_allocs)
		nallocs++;
	return __libc_realloc(p, n);
}
void free(void *p)
{
	__libc_free(p);
}
int posix_memalign(void **out, size_t align, size_t n)
{
	if (count_allocs)
		nallocs++;
	void *p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
void *aligned_alloc(size_t align, size_t n)
{
	if (count_allocs)
		nallocs++;
	return __libc_memalign(align, n);
}

/* ------------------------------------------------------------------ */
/* Fixtures                                                             */
/* ------------------------------------------------------------------ */

static cpu_set_t orig_affinity;

/* Restrict the calling thread to the given CPUs. */
static int pin_self_set(const int *cpus, int n)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	for (int i = 0; i < n; i++)
		CPU_SET(cpus[i], &s);
	return sched_setaffinity(0, sizeof s, &s);
}

static void restore_affinity(void)
{
	sched_setaffinity(0, sizeof orig_affinity, &orig_affinity);
}

/* Log sink that records messages. */
struct logcap {
	int count;
	char last[512];
};
static void log_capture(void *arg, const char *msg)
{
	struct logcap *lc = arg;
	lc->count++;
	snprintf(lc->last, sizeof lc->last, "%s", msg);
}

/* Create a pool or fail the test; returns NULL on failure. */
static nvmpf_pool *mkpool(const nvmpf_config *cfg)
{
	nvmpf_pool *p = NULL;
	int rc = nvmpf_create(cfg, &p);
	CHECK_EQ(rc, NVMPF_OK);
	return p;
}

static char *fake_dirs[32];
static int nfake;

static int rm_cb(const char *path, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Write a file under a fake sysfs tree. */
static void put_file(const char *dir, const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return;
	}
	fputs(text, f);
	fputc('\n', f);
	fclose(f);
}

/*
 * Build a fake /sys/devices/system/cpu: ncpu CPUs; siblings[c] is cpu c's
 * thread_siblings_list (NULL: file omitted), core[c] its core_id.
 */
static const char *fake_sysfs(int ncpu, const char *const *siblings,
			      const int *core)
{
	char tmpl[] = "/tmp/nvmpf-sysfs-XXXXXX";
	char *dir = mkdtemp(tmpl);
	if (!dir)
		return NULL;
	dir = strdup(dir);
	fake_dirs[nfake++] = dir;
	char online[32];
	snprintf(online, sizeof online, "0-%d", ncpu - 1);
	put_file(dir, "online", online);
	for (int c = 0; c < ncpu; c++) {
		char rel[128], num[16];
		snprintf(rel, sizeof rel, "%s/cpu%d", dir, c);
		mkdir(rel, 0755);
		snprintf(rel, sizeof rel, "%s/cpu%d/topology", dir, c);
		mkdir(rel, 0755);
		if (siblings && siblings[c]) {
			snprintf(rel, sizeof rel, "cpu%d/topology/thread_siblings_list", c);
			put_file(dir, rel, siblings[c]);
		}
		snprintf(rel, sizeof rel, "cpu%d/topology/core_id", c);
		snprintf(num, sizeof num, "%d", core[c]);
		put_file(dir, rel, num);
		snprintf(rel, sizeof rel, "cpu%d/topology/physical_package_id", c);
		put_file(dir, rel, "0");
	}
	return dir;
}

/* The CPU a kernel thread is allowed on if exactly one, -1 if several. */
static int thread_single_cpu(pid_t tid, int *count)
{
	cpu_set_t s;
	if (sched_getaffinity(tid, sizeof s, &s) != 0)
		return -2;
	*count = CPU_COUNT(&s);
	if (*count != 1)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s))
			return c;
	return -1;
}

/* Check that each helper's real affinity matches what info says. */
static void check_helper_affinity(const nvmpf_info *in)
{
	for (unsigned int i = 0; i < in->nhelpers; i++) {
		int cnt = 0;
		int c = thread_single_cpu(in->helper_tid[i], &cnt);
		if (in->helper_cpu[i] >= 0)
			CHECK_EQ(c, in->helper_cpu[i]);
		else
			CHECK(cnt >= 1);
	}
}

/* Page-aligned buffer of n bytes, filled so pages exist. */
static unsigned char *page_buf(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n) != 0)
		return NULL;
	memset(p, 1, n);
	return p;
}

/* Expected distinct units of size u overlapping [a, a+len). */
static uint64_t units(uintptr_t a, size_t len, size_t u)
{
	return (a + len - 1) / u - a / u + 1;
}

/* ------------------------------------------------------------------ */
/* Tests: configuration and arguments                                   */
/* ------------------------------------------------------------------ */

static void test_config_defaults(void)
{
	nvmpf_config c;
	memset(&c, 0xab, sizeof c);
	nvmpf_config_init(&c);
	CHECK_EQ(c.scheme, NVMPF_SCHEME_M1);
	CHECK_EQ(c.nhelpers, 0);
	CHECK_EQ(c.queue_len, 1023);
	CHECK_EQ(c.mode, NVMPF_MODE_BOTH);
	CHECK_EQ(c.locality, 3);
	CHECK_EQ(c.stage2_locality, 3);
	CHECK_EQ(c.flags, 0);
	CHECK(c.cpus == NULL);
	CHECK_EQ(c.ncpus, 0);
	CHECK_EQ(c.spin_ns, 50000);
	CHECK_EQ(c.page_size, 0);
	CHECK(c.log == NULL);
	CHECK(c.sysfs_cpu_dir == NULL);
	nvmpf_config_init(NULL); /* must not crash */
}

static void test_create_bad_args(void)
{
	nvmpf_pool *p = (nvmpf_pool *)0x1;
	nvmpf_config c;
	int big = 5000, neg = -1, one = 1;
	CHECK_EQ(nvmpf_create(NULL, NULL), NVMPF_EINVAL);

#define BAD(stmt)                                                       \
	do {                                                            \
		nvmpf_config_init(&c);                                  \
		c.log = nvmpf_log_discard;                              \
		stmt;                                                   \
		p = (nvmpf_pool *)0x1;                                  \
		int rc_ = nvmpf_create(&c, &p);                         \
		if (rc_ != NVMPF_EINVAL)                                \
			fprintf(stderr, "    accepted: %s\n", #stmt);    \
		CHECK_EQ(rc_, NVMPF_EINVAL);                            \
		CHECK(p == NULL);                                       \
		if (rc_ == NVMPF_OK)                                    \
			nvmpf_destroy(p);                               \
	} while (0)

	BAD(c.scheme = (nvmpf_scheme)99);
	BAD(c.scheme = (nvmpf_scheme)-1);
	BAD(c.nhelpers = NVMPF_MAX_HELPERS + 1);
	BAD(c.scheme = NVMPF_SCHEME_M3; c.nhelpers = 3);
	BAD(c.scheme = NVMPF_SCHEME_M3; c.nhelpers = 1);
	BAD(c.queue_len = 1u << 24);
	BAD(c.mode = 0);
	BAD(c.mode = 8);
	BAD(c.mode = NVMPF_MODE_FAULT | NVMPF_MODE_POPULATE);
	BAD(c.locality = 4);
	BAD(c.locality = -1);
	BAD(c.stage2_locality = 7);
	BAD(c.flags = 0x10);
	BAD(c.page_size = 100);
	BAD(c.page_size = 32);
	BAD(c.ncpus = 1; c.cpus = NULL; c.scheme = NVMPF_SCHEME_CPUS);
	BAD(c.scheme = NVMPF_SCHEME_CPUS; c.ncpus = 0);
	BAD(c.scheme = NVMPF_SCHEME_CPUS; c.cpus = &neg; c.ncpus = 1);
	BAD(c.scheme = NVMPF_SCHEME_CPUS; c.cpus = &big; c.ncpus = 1);
	BAD(c.scheme = NVMPF_SCHEME_M1; c.cpus = &one; c.ncpus = 1);
	BAD(c.scheme = NVMPF_SCHEME_M3; c.cpus = &one; c.ncpus = 1);
#undef BAD
}

static void test_create_defaults(void)
{
	nvmpf_pool *p = mkpool(NULL);
	if (!p)
		return;
	nvmpf_info in;
	CHECK_EQ(nvmpf_get_info(p, &in), NVMPF_OK);
	CHECK_EQ(in.requested, NVMPF_SCHEME_M1);
	CHECK_EQ(in.nhelpers, 1);
	CHECK_EQ(in.queue_len, 1023);
	CHECK_EQ(in.stage2_queue_len, 0);
	CHECK_EQ(in.page_size, (size_t)sysconf(_SC_PAGESIZE));
	CHECK(in.helper_tid[0] > 0 && in.helper_tid[0] != getpid());
	CHECK_EQ(in.helper_stage[0], 1);
	check_helper_affinity(&in);
	CHECK_EQ(nvmpf_get_info(NULL, &in), NVMPF_EINVAL);
	CHECK_EQ(nvmpf_get_info(p, NULL), NVMPF_EINVAL);
	nvmpf_stats st;
	CHECK_EQ(nvmpf_get_stats(NULL, &st), NVMPF_EINVAL);
	CHECK_EQ(nvmpf_get_stats(p, NULL), NVMPF_EINVAL);
	CHECK_EQ(nvmpf_drain(NULL, 0), NVMPF_EINVAL);
	nvmpf_destroy(p);
	nvmpf_destroy(NULL);
}

static void test_queue_len_rounding(void)
{
	const unsigned int in[] = { 1, 2, 3, 4, 1000, 1023, 1024 };
	const unsigned int want[] = { 1, 3, 3, 7, 1023, 1023, 2047 };
	for (unsigned int i = 0; i < sizeof in / sizeof in[0]; i++) {
		nvmpf_config c;
		nvmpf_config_init(&c);
		c.scheme = NVMPF_SCHEME_NONE;
		c.queue_len = in[i];
		nvmpf_pool *p = mkpool(&c);
		if (!p)
			continue;
		nvmpf_info info;
		nvmpf_get_info(p, &info);
		CHECK_EQ(info.queue_len, want[i]);
		nvmpf_destroy(p);
	}
}

static nvmpf_pool *other_pool;
static int other_rc;
static void *enqueue_from_other(void *arg)
{
	other_rc = nvmpf_enqueue(other_pool, arg, 64);
	return NULL;
}

static void test_enqueue_bad_args(void)
{
	unsigned char *buf = page_buf(8192);
	nvmpf_pool *p = mkpool(NULL);
	if (!p || !buf)
		return;
	CHECK_EQ(nvmpf_enqueue(NULL, buf, 10), NVMPF_EINVAL);
	CHECK_EQ(nvmpf_enqueue(p, NULL, 10), NVMPF_EINVAL);
	CHECK_EQ(nvmpf_enqueue(p, buf, 0), NVMPF_EINVAL);
	CHECK_EQ(nvmpf_enqueue(p, (void *)(UINTPTR_MAX - 10), 100), NVMPF_EINVAL);
	other_pool = p;
	pthread_t t;
	pthread_create(&t, NULL, enqueue_from_other, buf);
	pthread_join(t, NULL);
	CHECK_EQ(other_rc, NVMPF_ENOTOWNER);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.enqueued, 0);
	CHECK_EQ(st.dropped, 0);
	CHECK_EQ(nvmpf_enqueue(p, buf, 10), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.enqueued, 1);
	CHECK_EQ(st.jobs_done, 1);
	nvmpf_destroy(p);
	free(buf);
}

static void test_strings(void)
{
	for (int e = NVMPF_EFORKED; e <= NVMPF_OK; e++)
		CHECK(strcmp(nvmpf_strerror(e), "unknown error") != 0);
	CHECK(strcmp(nvmpf_strerror(-100), "unknown error") == 0);
	CHECK(strcmp(nvmpf_scheme_name(NVMPF_SCHEME_M1), "M1") == 0);
	CHECK(strcmp(nvmpf_scheme_name(NVMPF_SCHEME_M2), "M2") == 0);
	CHECK(strcmp(nvmpf_scheme_name(NVMPF_SCHEME_M3), "M3") == 0);
	CHECK(strcmp(nvmpf_scheme_name(NVMPF_SCHEME_CPUS), "CPUS") == 0);
	CHECK(strcmp(nvmpf_scheme_name(NVMPF_SCHEME_NONE), "NONE") == 0);
}

static void test_cpulist_parser(void)
{
	cpu_set_t s;
	CHECK_EQ(nvmpf_parse_cpulist("0-3,8,10-11\n", &s), 0);
	CHECK_EQ(CPU_COUNT(&s), 7);
	CHECK(CPU_ISSET(0, &s) && CPU_ISSET(3, &s) && CPU_ISSET(8, &s) &&
	      CPU_ISSET(11, &s) && !CPU_ISSET(9, &s));
	CHECK_EQ(nvmpf_parse_cpulist("5", &s), 0);
	CHECK_EQ(CPU_COUNT(&s), 1);
	CHECK_EQ(nvmpf_parse_cpulist("", &s), 0);
	CHECK_EQ(CPU_COUNT(&s), 0);
	CHECK_EQ(nvmpf_parse_cpulist("3-1", &s), -1);
	CHECK_EQ(nvmpf_parse_cpulist("a", &s), -1);
	CHECK_EQ(nvmpf_parse_cpulist("1,,2", &s), -1);
	CHECK_EQ(nvmpf_parse_cpulist("99999", &s), -1);
}

/* ------------------------------------------------------------------ */
/* Tests: queue, drain, statistics                                      */
/* ------------------------------------------------------------------ */

static void test_queue_full_drops(void)
{
	unsigned char *buf = page_buf(4096);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.queue_len = 7;
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	nvmpf_internal_set_paused(p, 3);
	for (int i = 0; i < 7; i++)
		CHECK_EQ(nvmpf_enqueue(p, buf + i, 1), NVMPF_OK);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(nvmpf_enqueue(p, buf, 1), NVMPF_EFULL);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.enqueued, 7);
	CHECK_EQ(st.dropped, 4);
	CHECK_EQ(st.jobs_done, 0);
	CHECK_EQ(nvmpf_drain(p, 20000000), NVMPF_ETIMEDOUT);
	nvmpf_internal_set_paused(p, 0);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done, 7);
	CHECK_EQ(st.bytes_done, 7);
	/* Space again after draining. */
	CHECK_EQ(nvmpf_enqueue(p, buf, 1), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_destroy(p);
	free(buf);
}

/* Run jobs with a given mode/page size and check exact counters. */
static void stats_case(unsigned int mode, size_t page_size, int locality)
{
	const size_t n = 1 << 20;
	unsigned char *buf = page_buf(n);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.mode = mode;
	c.page_size = page_size;
	c.locality = locality;
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	size_t ps = page_size ? page_size : (size_t)sysconf(_SC_PAGESIZE);
	const uintptr_t base = (uintptr_t)buf;
	const struct { size_t off, len; } jobs[] = {
		{ 100, 5000 }, { 0, 4096 }, { 4095, 2 }, { 63, 2 }, { 64, 64 },
		{ 1000, 300000 }, { 12345, 1 }, { 0, 1 << 20 },
	};
	uint64_t pages = 0, lines = 0, bytes = 0;
	for (unsigned int i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
		CHECK_EQ(nvmpf_enqueue(p, buf + jobs[i].off, jobs[i].len), NVMPF_OK);
		pages += units(base + jobs[i].off, jobs[i].len, ps);
		lines += units(base + jobs[i].off, jobs[i].len, 64);
		bytes += jobs[i].len;
	}
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done, sizeof jobs / sizeof jobs[0]);
	CHECK_EQ(st.bytes_done, bytes);
	CHECK_EQ(st.pages_touched, (mode & NVMPF_MODE_FAULT) ? pages : 0);
	CHECK_EQ(st.lines_prefetched, (mode & NVMPF_MODE_PREFETCH) ? lines : 0);
	CHECK_EQ(st.helper[0].jobs, st.jobs_done);
	CHECK_EQ(st.helper_busy_ns, st.helper[0].busy_ns);
	CHECK(st.helper_busy_ns > 0);
	CHECK(st.helper_cpu_ns > 0);
	CHECK_EQ(st.nhelpers, 1);
	CHECK_EQ(st.fault_errors, 0);
	nvmpf_destroy(p);
	free(buf);
}

static void test_stats_exact_counts(void)
{
	stats_case(NVMPF_MODE_BOTH, 0, 3);
	stats_case(NVMPF_MODE_FAULT, 0, 3);
	stats_case(NVMPF_MODE_PREFETCH, 0, 0);
	stats_case(NVMPF_MODE_BOTH, 8192, 1);
	stats_case(NVMPF_MODE_BOTH, 64, 2);
}

/* Minor faults taken by the calling thread while reading one byte per
 * page of [p, p+n). */
static long faults_reading(const unsigned char *p, size_t n)
{
	struct rusage a, b;
	getrusage(RUSAGE_THREAD, &a);
	unsigned long sum = 0;
	for (size_t i = 0; i < n; i += 4096)
		sum += ((const volatile unsigned char *)p)[i];
	getrusage(RUSAGE_THREAD, &b);
	(void)sum;
	return b.ru_minflt - a.ru_minflt;
}

/* Map n bytes of a fresh tmpfs-like file (memfd), not populated. */
static unsigned char *fresh_file_map(size_t n, int *fdp)
{
	int fd = memfd_create("nvmpf-test", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)n) != 0)
		return NULL;
	/* Give the file real pages (as a database file has). */
	unsigned char *w = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w == MAP_FAILED)
		return NULL;
	memset(w, 7, n);
	munmap(w, n);
	unsigned char *r = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED)
		return NULL;
	madvise(r, n, MADV_NOHUGEPAGE);
	*fdp = fd;
	return r;
}

/* The helper must take the page faults: afterwards the caller takes none. */
static void faults_case(unsigned int mode)
{
	const size_t n = 4u << 20;
	int fd1 = -1, fd2 = -1;
	unsigned char *ctl = fresh_file_map(n, &fd1);
	unsigned char *pre = fresh_file_map(n, &fd2);
	CHECK(ctl && pre);
	if (!ctl || !pre)
		return;
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.mode = mode;
	nvmpf_pool *p = mkpool(&c);
	if (!p)
		return;
	long f_ctl = faults_reading(ctl, n);
	for (size_t off = 0; off < n; off += 256 * 1024)
		CHECK_EQ(nvmpf_enqueue(p, pre + off, 256 * 1024), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	long f_pre = faults_reading(pre, n);
	/* Control: a fault at least every 16 pages (fault-around 64 KB). */
	CHECK(f_ctl >= (long)(n / 4096 / 16));
	CHECK(f_pre <= 2);
	if (f_pre > 2 || f_ctl < (long)(n / 4096 / 16))
		fprintf(stderr, "    mode %u: control faults %ld, after prefetch %ld\n",
			mode, f_ctl, f_pre);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.fault_errors, 0);
	CHECK_EQ(st.pages_touched, n / 4096);
	nvmpf_destroy(p);
	munmap(ctl, n);
	munmap(pre, n);
	close(fd1);
	close(fd2);
}

static void test_helper_takes_faults(void)
{
	faults_case(NVMPF_MODE_FAULT);
}

static void test_populate_mode(void)
{
	faults_case(NVMPF_MODE_POPULATE | NVMPF_MODE_PREFETCH);
	/* An unmapped range is an error, not a crash. */
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.mode = NVMPF_MODE_POPULATE;
	nvmpf_pool *p = mkpool(&c);
	if (!p)
		return;
	void *hole = mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	munmap(hole, 1 << 20);
	CHECK_EQ(nvmpf_enqueue(p, hole, 1 << 20), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.fault_errors, 1);
	CHECK_EQ(st.jobs_done, 1);
	nvmpf_destroy(p);
}

static nvmpf_pool *retire_pool;
static int retire_rc;
static void *retire_from_other(void *arg)
{
	(void)arg;
	retire_rc = nvmpf_retire(retire_pool, 100);
	return NULL;
}

static void test_retire_skips_stale_jobs(void)
{
	unsigned char *buf = page_buf(1 << 20);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	CHECK_EQ(nvmpf_retire(NULL, 1), NVMPF_EINVAL);
	retire_pool = p;
	pthread_t t;
	pthread_create(&t, NULL, retire_from_other, NULL);
	pthread_join(t, NULL);
	CHECK_EQ(retire_rc, NVMPF_ENOTOWNER);

	nvmpf_internal_set_paused(p, 3);
	for (uint64_t i = 0; i < 10; i++) {
		uint64_t seq = 99;
		CHECK_EQ(nvmpf_enqueue_seq(p, buf + i * 4096, 4096, &seq), NVMPF_OK);
		CHECK_EQ(seq, i);
	}
	CHECK_EQ(nvmpf_retire(p, 6), NVMPF_OK);
	CHECK_EQ(nvmpf_retire(p, 2), NVMPF_OK); /* lower: ignored */
	nvmpf_internal_set_paused(p, 0);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done, 4);
	CHECK_EQ(st.jobs_skipped, 6);
	CHECK_EQ(st.bytes_done, 4 * 4096);
	CHECK_EQ(st.pages_touched, 4);
	CHECK_EQ(st.helper[0].skipped, 6);
	nvmpf_destroy(p);

	/* A job in progress is cut short once retired. */
	const size_t hn = 16ull << 30;
	unsigned char *huge = mmap(NULL, hn, PROT_READ,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(huge != MAP_FAILED);
	if (huge == MAP_FAILED)
		return;
	madvise(huge, hn, MADV_NOHUGEPAGE);
	c.mode = NVMPF_MODE_FAULT;
	p = mkpool(&c);
	if (p) {
		CHECK_EQ(nvmpf_enqueue(p, huge, hn), NVMPF_OK);
		struct timespec ts = { 0, 20000000 };
		nanosleep(&ts, NULL);
		CHECK_EQ(nvmpf_retire(p, 1), NVMPF_OK);
		CHECK_EQ(nvmpf_drain(p, 1000000000), NVMPF_OK);
		nvmpf_get_stats(p, &st);
		CHECK_EQ(st.jobs_done, 0);
		CHECK_EQ(st.jobs_skipped, 1);
		CHECK(st.pages_touched > 0 && st.pages_touched < hn / 4096);
		nvmpf_destroy(p);
	}
	munmap(huge, hn);

	/* M3: a retired job is not handed to stage 2. */
	int m3[] = { 0, 0 };
	if (CPU_ISSET(1, &orig_affinity))
		m3[0] = 1;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_M3;
	c.cpus = m3;
	c.ncpus = 2;
	p = mkpool(&c);
	if (p) {
		nvmpf_internal_set_paused(p, 3);
		for (int i = 0; i < 4; i++)
			CHECK_EQ(nvmpf_enqueue(p, buf + i * 4096, 4096), NVMPF_OK);
		nvmpf_retire(p, 3);
		nvmpf_internal_set_paused(p, 0);
		CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
		nvmpf_get_stats(p, &st);
		CHECK_EQ(st.jobs_done, 1);
		CHECK_EQ(st.jobs_skipped, 3);
		CHECK_EQ(st.handoff_enqueued, 1);
		CHECK_EQ(st.stage2_jobs_done, 1);
		nvmpf_destroy(p);
	}
	free(buf);
}

/* The job hook: called once per job about to be processed (not retired),
 * with the job's range and number, in a helper thread, BEFORE the helper
 * takes the faults (the hook sees the range's pages not resident yet); its
 * release store is what the owner acquires.  What it returns decides what
 * the helper does next: PASS = fault and prefetch as configured, DONE =
 * nothing more (counted done), SKIP = drop (counted skipped).  The range is
 * a tmpfs file (memfd) with holes, mapped read-only: a page is resident
 * (mincore) only once somebody faulted it. */
static pthread_t main_thread;

#define HOOK_JOBS 16
struct hook_seen {
	_Atomic uint64_t calls;
	_Atomic uint64_t seq_mask;      /* bit seq set when called for seq */
	_Atomic int wrong;              /* called with a range not enqueued */
	_Atomic int resident;           /* a page was resident in the hook */
	_Atomic int result;             /* what the hook returns */
	const unsigned char *addr[HOOK_JOBS]; /* job seq's range, as enqueued */
	size_t len[HOOK_JOBS];
	const unsigned char *file;      /* the memfd's mapping, file_len bytes */
	size_t file_len;
};

static bool any_resident(const void *addr, size_t len)
{
	unsigned char vec[64];
	size_t pages = (len + 4095) / 4096;
	if (pages > sizeof(vec) || mincore((void *)addr, len, vec) != 0)
		return true;
	for (size_t i = 0; i < pages; i++)
		if (vec[i] & 1)
			return true;
	return false;
}

static int job_hook(void *arg, const void *addr, size_t len, uint64_t seq)
{
	struct hook_seen *h = arg;
	if (seq >= HOOK_JOBS || addr != h->addr[seq] || len != h->len[seq] ||
	    pthread_equal(pthread_self(), main_thread))
		atomic_store(&h->wrong, 1);
	else if ((const unsigned char *)addr >= h->file &&
		 (const unsigned char *)addr < h->file + h->file_len &&
		 any_resident(addr, len))
		atomic_store(&h->resident, 1);
	atomic_fetch_or_explicit(&h->seq_mask, 1ull << seq,
				 memory_order_relaxed);
	atomic_fetch_add_explicit(&h->calls, 1, memory_order_release);
	return atomic_load(&h->result);
}

static void hook_enqueue(nvmpf_pool *p, struct hook_seen *h,
			 const unsigned char *addr, size_t len)
{
	uint64_t seq = 0;
	CHECK_EQ(nvmpf_enqueue_seq(p, addr, len, &seq), NVMPF_OK);
	if (seq < HOOK_JOBS) {
		h->addr[seq] = addr;
		h->len[seq] = len;
	}
}

static void test_job_hook(void)
{
	struct hook_seen seen = { .result = NVMPF_HOOK_PASS };
	nvmpf_stats st0, st1;
	size_t size = 1 << 20;
	int fd = (int)syscall(SYS_memfd_create, "nvmpf-hook", 0);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
		SKIP("no memfd");
	const unsigned char *buf = mmap(NULL, size, PROT_READ, MAP_SHARED,
					fd, 0);
	CHECK(buf != MAP_FAILED);
	if (buf == MAP_FAILED)
		return;
	CHECK(!any_resident(buf, size / 16)); /* mincore sees holes */
	seen.file = buf;
	seen.file_len = size;

	main_thread = pthread_self();
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.mode = NVMPF_MODE_POPULATE | NVMPF_MODE_PREFETCH;
	c.job_hook = job_hook;
	c.job_arg = &seen;
	nvmpf_pool *p = mkpool(&c);
	if (!p)
		return;
	nvmpf_internal_set_paused(p, 3);
	for (uint64_t i = 0; i < 10; i++)
		hook_enqueue(p, &seen, buf + i * 4096, 4096);
	CHECK_EQ(nvmpf_retire(p, 4), NVMPF_OK);     /* jobs 0-3: no hook */
	nvmpf_internal_set_paused(p, 0);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	CHECK_EQ(atomic_load_explicit(&seen.calls, memory_order_acquire), 6);
	CHECK_EQ(atomic_load(&seen.seq_mask), 0x3f0ull);
	/* PASS: the hook ran before the faults, then the helper populated
	 * and prefetched every page (which mincore now sees) */
	CHECK_EQ(atomic_load(&seen.resident), 0);
	CHECK(any_resident(buf + 4 * 4096, 6 * 4096));
	CHECK(!any_resident(buf, 4 * 4096));        /* retired: untouched */
	nvmpf_get_stats(p, &st0);
	CHECK_EQ(st0.pages_touched, 6);
	CHECK(st0.lines_prefetched >= 6 * (4096 / 64));

	/* a range madvise() refuses (unmapped): the hook is called first (it
	 * is the one that must read safely), then the helper counts the error */
	void *hole = mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	munmap(hole, 1 << 20);
	hook_enqueue(p, &seen, hole, 4096);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	CHECK_EQ(atomic_load_explicit(&seen.calls, memory_order_acquire), 7);
	nvmpf_get_stats(p, &st1);
	CHECK_EQ(st1.fault_errors, st0.fault_errors + 1);

	/* DONE: the hook brought the range in itself; the helper neither
	 * populates nor prefetches it, and counts its pages and the job */
	atomic_store(&seen.result, NVMPF_HOOK_DONE);
	nvmpf_get_stats(p, &st0);
	hook_enqueue(p, &seen, buf + 32 * 4096, 3 * 4096);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	CHECK_EQ(atomic_load_explicit(&seen.calls, memory_order_acquire), 8);
	nvmpf_get_stats(p, &st1);
	CHECK_EQ(st1.lines_prefetched, st0.lines_prefetched);
	CHECK_EQ(st1.pages_touched, st0.pages_touched + 3);
	CHECK_EQ(st1.jobs_done, st0.jobs_done + 1);
	CHECK_EQ(st1.jobs_skipped, st0.jobs_skipped);
	CHECK(!any_resident(buf + 32 * 4096, 3 * 4096));

	/* SKIP: the job is dropped, counted as skipped, nothing touched */
	atomic_store(&seen.result, NVMPF_HOOK_SKIP);
	nvmpf_get_stats(p, &st0);
	hook_enqueue(p, &seen, buf + 48 * 4096, 2 * 4096);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	CHECK_EQ(atomic_load_explicit(&seen.calls, memory_order_acquire), 9);
	nvmpf_get_stats(p, &st1);
	CHECK_EQ(st1.jobs_skipped, st0.jobs_skipped + 1);
	CHECK_EQ(st1.jobs_done, st0.jobs_done);
	CHECK_EQ(st1.pages_touched, st0.pages_touched);
	CHECK_EQ(st1.lines_prefetched, st0.lines_prefetched);
	CHECK(!any_resident(buf + 48 * 4096, 2 * 4096));

	CHECK_EQ(atomic_load(&seen.wrong), 0);
	CHECK_EQ(atomic_load(&seen.resident), 0);
	nvmpf_destroy(p);
	munmap((void *)buf, size);
	close(fd);
}

/* M3: only the first stage calls the hook; a job it drops (SKIP) is not
 * handed to the second stage, one it brought in (DONE) is */
static int hook_m3(void *arg, const void *addr, size_t len, uint64_t seq)
{
	_Atomic uint64_t *calls = arg;
	(void)addr;
	(void)len;
	atomic_fetch_add(calls, 1);
	return (seq % 2) ? NVMPF_HOOK_SKIP : NVMPF_HOOK_DONE;
}

static void test_job_hook_m3(void)
{
	if (t_allowed_cpus() < 2)
		SKIP("needs 2 CPUs for M3's two stages");
	unsigned char *buf = page_buf(64 * 4096);
	_Atomic uint64_t calls = 0;
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_M3;
	c.log = nvmpf_log_discard;
	c.job_hook = hook_m3;
	c.job_arg = &calls;
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	nvmpf_info info;
	CHECK_EQ(nvmpf_get_info(p, &info), NVMPF_OK);
	if (info.effective != NVMPF_SCHEME_M3) {
		nvmpf_destroy(p);
		free(buf);
		SKIP("M3 not available here (no SMT sibling)");
	}
	for (int i = 0; i < 8; i++)
		CHECK_EQ(nvmpf_enqueue(p, buf + i * 4096, 4096), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(atomic_load(&calls), 8);   /* stage 1 only, once per job */
	CHECK_EQ(st.jobs_skipped, 4);
	CHECK_EQ(st.stage2_jobs_done, 4);
	nvmpf_destroy(p);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Tests: sleep/wake system-call behaviour                              */
/* ------------------------------------------------------------------ */

static void test_wake_only_when_sleeping(void)
{
	if (t_allowed_cpus() < 2)
		SKIP("needs 2 CPUs (a spinning helper would starve the test)");
	unsigned char *buf = page_buf(4096);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_M1;
	c.log = nvmpf_log_discard;
	c.spin_ns = 10ull * 1000000000ull; /* helper stays awake (spinning) */
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	for (int i = 0; i < 20000; i++) {
		while (nvmpf_enqueue(p, buf + (i % 4096), 1) == NVMPF_EFULL)
			;
		if (i % 1000 == 999)
			CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	}
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.wake_calls, 0);
	CHECK_EQ(st.helper_sleeps, 0);
	CHECK_EQ(st.jobs_done, st.enqueued);
	nvmpf_destroy(p);

	/* spin_ns = 0: the helper sleeps as soon as the queue is empty, so a
	 * paced producer has to wake it (one system call per wake-up). */
	c.spin_ns = 0;
	p = mkpool(&c);
	if (!p)
		return;
	for (int i = 0; i < 50; i++) {
		CHECK_EQ(nvmpf_enqueue(p, buf, 64), NVMPF_OK);
		CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
		/* give the helper time to go to sleep */
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done, 50);
	CHECK(st.helper_sleeps >= 25);
	CHECK(st.wake_calls >= 25);
	CHECK(st.wake_calls <= 50);
	nvmpf_destroy(p);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Tests: destroy                                                       */
/* ------------------------------------------------------------------ */

static void test_destroy_with_pending_jobs(void)
{
	const size_t n = 64u << 20;
	unsigned char *big = mmap(NULL, n, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(big != MAP_FAILED);
	if (big == MAP_FAILED)
		return;
	memset(big, 1, n);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.nhelpers = 2;
	/* (a) paused helpers, full queue */
	nvmpf_pool *p = mkpool(&c);
	if (!p)
		return;
	nvmpf_internal_set_paused(p, 3);
	int accepted = 0;
	while (nvmpf_enqueue(p, big, n) == NVMPF_OK)
		accepted++;
	CHECK_EQ(accepted, 1023);
	unsigned long long t0 = t_now_ns();
	nvmpf_destroy(p);
	unsigned long long dt = t_now_ns() - t0;
	CHECK(dt < 1000000000ull);

	/* (b) running helpers inside huge jobs: 16 GB of never-touched
	 * anonymous memory per job (each read maps the zero page, ~4M faults,
	 * seconds of work), queue full of them.  destroy must abandon the
	 * queue and stop inside the running jobs. */
	const size_t hn = 16ull << 30;
	unsigned char *huge = mmap(NULL, hn, PROT_READ,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(huge != MAP_FAILED);
	if (huge != MAP_FAILED) {
		madvise(huge, hn, MADV_NOHUGEPAGE);
		c.mode = NVMPF_MODE_FAULT;
		p = mkpool(&c);
		if (p) {
			while (nvmpf_enqueue(p, huge, hn) == NVMPF_OK)
				;
			struct timespec ts = { 0, 20000000 };
			nanosleep(&ts, NULL);
			nvmpf_stats st;
			nvmpf_get_stats(p, &st);
			CHECK(st.jobs_done == 0); /* really inside the first jobs */
			t0 = t_now_ns();
			nvmpf_destroy(p);
			dt = t_now_ns() - t0;
			CHECK(dt < 1000000000ull);
			if (dt >= 1000000000ull)
				fprintf(stderr, "    destroy took %llu ms\n", dt / 1000000);
		}
		munmap(huge, hn);
		c.mode = NVMPF_MODE_BOTH;
	}

	/* (c) destroy right after create (helpers may still be starting) */
	for (int i = 0; i < 20; i++) {
		p = mkpool(&c);
		if (p) {
			nvmpf_enqueue(p, big, 4096);
			nvmpf_destroy(p);
		}
	}
	munmap(big, n);
}

/* ------------------------------------------------------------------ */
/* Tests: placement and fallback reporting                              */
/* ------------------------------------------------------------------ */

/* Create with scheme on a (fake) topology; fills info and log capture. */
static nvmpf_pool *place(nvmpf_scheme s, const char *sysfs, const int *cpus,
			 unsigned int ncpus, nvmpf_info *in, struct logcap *lc)
{
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = s;
	c.sysfs_cpu_dir = sysfs;
	c.cpus = cpus;
	c.ncpus = ncpus;
	c.log = log_capture;
	c.log_arg = lc;
	memset(lc, 0, sizeof *lc);
	nvmpf_pool *p = mkpool(&c);
	if (p) {
		nvmpf_get_info(p, in);
		check_helper_affinity(in);
	}
	return p;
}

/* Expect one fallback message (equal to info.message) containing all of
 * the given fragments. */
static void expect_message(const struct logcap *lc, const nvmpf_info *in,
			   const char *a, const char *b)
{
	CHECK_EQ(lc->count, 1);
	CHECK(strcmp(lc->last, in->message) == 0);
	CHECK(strstr(lc->last, a) != NULL);
	if (b)
		CHECK(strstr(lc->last, b) != NULL);
	if ((a && !strstr(lc->last, a)) || (b && !strstr(lc->last, b)))
		fprintf(stderr, "    message was: %s\n", lc->last);
}

static void test_fallback_no_smt(void)
{
	if (t_allowed_cpus() < 2 || !CPU_ISSET(0, &orig_affinity) ||
	    !CPU_ISSET(1, &orig_affinity))
		SKIP("needs CPUs 0 and 1");
	static const char *const sib[] = { "0", "1" };
	static const int core[] = { 0, 1 };
	const char *dir = fake_sysfs(2, sib, core);
	int c01[] = { 0, 1 };
	pin_self_set(c01, 2);
	/* Make CPU 0 home: pin ourselves there only while creating. */
	int c0 = 0;
	pin_self_set(&c0, 1);
	nvmpf_info in;
	struct logcap lc;
	/* With a single allowed CPU, M1 has nowhere to go: NONE. */
	nvmpf_pool *p = place(NVMPF_SCHEME_M1, dir, NULL, 0, &in, &lc);
	if (p) {
		CHECK_EQ(in.effective, NVMPF_SCHEME_NONE);
		CHECK(in.fallback & NVMPF_FB_NO_OTHER_CORE);
		CHECK_EQ(in.helper_cpu[0], -1);
		CHECK_EQ(in.caller_cpu, 0);
		CHECK_EQ(in.caller_pinned, 1);
		expect_message(&lc, &in, "scheme M1 cannot be honoured",
			       "falling back to NONE");
		nvmpf_destroy(p);
	}
	/* Allowed {0,1}; the caller is on CPU 0 thanks to PIN_CALLER below. */
	pin_self_set(c01, 2);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.sysfs_cpu_dir = dir;
	c.flags = NVMPF_FLAG_PIN_CALLER;
	c.log = log_capture;
	c.log_arg = &lc;
	for (int s = NVMPF_SCHEME_M1; s <= NVMPF_SCHEME_M3; s++) {
		memset(&lc, 0, sizeof lc);
		c.scheme = (nvmpf_scheme)s;
		p = mkpool(&c);
		if (!p)
			continue;
		nvmpf_get_info(p, &in);
		check_helper_affinity(&in);
		int other = in.caller_cpu == 0 ? 1 : 0;
		CHECK_EQ(in.caller_pinned, 1);
		CHECK_EQ(in.smt_siblings, 0);
		CHECK_EQ(in.cpus_allowed, 2);
		CHECK_EQ(in.effective, NVMPF_SCHEME_M1);
		CHECK_EQ(in.nhelpers, 1);
		CHECK_EQ(in.helper_cpu[0], other);
		if (s == NVMPF_SCHEME_M1) {
			CHECK_EQ(in.fallback, 0);
			CHECK_EQ(lc.count, 0);
			CHECK_EQ(in.message[0], '\0');
		} else {
			CHECK(in.fallback & NVMPF_FB_NO_SMT);
			expect_message(&lc, &in, s == NVMPF_SCHEME_M2 ?
				       "scheme M2 cannot be honoured" :
				       "scheme M3 cannot be honoured",
				       "falling back to M1");
			CHECK(strstr(lc.last, "no SMT sibling") != NULL);
		}
		/* Caller pinned while the pool lives ... */
		cpu_set_t now;
		sched_getaffinity(0, sizeof now, &now);
		CHECK_EQ(CPU_COUNT(&now), 1);
		CHECK(CPU_ISSET(in.caller_cpu, &now));
		nvmpf_destroy(p);
		/* ... and restored after. */
		sched_getaffinity(0, sizeof now, &now);
		CHECK_EQ(CPU_COUNT(&now), 2);
	}
	restore_affinity();
}

static void test_fallback_smt_only(void)
{
	if (!CPU_ISSET(0, &orig_affinity) || !CPU_ISSET(1, &orig_affinity))
		SKIP("needs CPUs 0 and 1");
	/* Fake: CPUs 0 and 1 are SMT siblings of one core. */
	static const char *const sib[] = { "0-1", "0-1" };
	static const int core[] = { 0, 0 };
	const char *dir = fake_sysfs(2, sib, core);
	int c01[] = { 0, 1 };
	pin_self_set(c01, 2);
	nvmpf_info in;
	struct logcap lc;
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.sysfs_cpu_dir = dir;
	c.flags = NVMPF_FLAG_PIN_CALLER;
	c.log = log_capture;
	c.log_arg = &lc;
	for (int s = NVMPF_SCHEME_M1; s <= NVMPF_SCHEME_M3; s++) {
		memset(&lc, 0, sizeof lc);
		c.scheme = (nvmpf_scheme)s;
		nvmpf_pool *p = mkpool(&c);
		if (!p)
			continue;
		nvmpf_get_info(p, &in);
		check_helper_affinity(&in);
		int other = in.caller_cpu == 0 ? 1 : 0;
		CHECK_EQ(in.smt_siblings, 1);
		CHECK_EQ(in.effective, NVMPF_SCHEME_M2);
		CHECK_EQ(in.nhelpers, 1);
		CHECK_EQ(in.helper_cpu[0], other);
		if (s == NVMPF_SCHEME_M2) {
			CHECK_EQ(in.fallback, 0);
			CHECK_EQ(lc.count, 0);
		} else {
			CHECK(in.fallback & NVMPF_FB_NO_OTHER_CORE);
			expect_message(&lc, &in, "cannot be honoured",
				       "falling back to M2");
		}
		nvmpf_destroy(p);
	}
	restore_affinity();
}

static void test_fallback_sibling_not_allowed(void)
{
	if (!CPU_ISSET(0, &orig_affinity) || !CPU_ISSET(1, &orig_affinity))
		SKIP("needs CPUs 0 and 1");
	/* Fake 4 CPUs, 2 cores: {0,2} and {1,3}; we may only use {0,1}. */
	static const char *const sib[] = { "0,2", "1,3", "0,2", "1,3" };
	static const int core[] = { 0, 1, 0, 1 };
	const char *dir = fake_sysfs(4, sib, core);
	int c0 = 0;
	pin_self_set(&c0, 1);
	/* caller on 0, allowed {0,1}: create from a thread pinned to {0,1}
	 * but currently on CPU 0 (PIN_CALLER after pinning to 0 first). */
	int c01[] = { 0, 1 };
	pin_self_set(c01, 2);
	nvmpf_info in;
	struct logcap lc;
	memset(&lc, 0, sizeof lc);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.sysfs_cpu_dir = dir;
	c.flags = NVMPF_FLAG_PIN_CALLER;
	c.log = log_capture;
	c.log_arg = &lc;
	c.scheme = NVMPF_SCHEME_M2;
	nvmpf_pool *p = mkpool(&c);
	if (p) {
		nvmpf_get_info(p, &in);
		CHECK_EQ(in.cpus_allowed, 2);
		CHECK_EQ(in.effective, NVMPF_SCHEME_M1);
		CHECK(in.fallback & NVMPF_FB_NO_SMT);
		expect_message(&lc, &in, "allowed CPU set 0-1",
			       "falling back to M1");
		nvmpf_destroy(p);
	}
	/* Key by core_id when thread_siblings_list is missing. */
	static const int core2[] = { 0, 0 };
	const char *dir2 = fake_sysfs(2, NULL, core2);
	c.sysfs_cpu_dir = dir2;
	memset(&lc, 0, sizeof lc);
	p = mkpool(&c);
	if (p) {
		nvmpf_get_info(p, &in);
		CHECK_EQ(in.effective, NVMPF_SCHEME_M2);
		CHECK_EQ(in.smt_siblings, 1);
		CHECK_EQ(lc.count, 0);
		nvmpf_destroy(p);
	}
	restore_affinity();
}

static void test_fallback_restricted_affinity(void)
{
	int c0 = 0;
	if (!CPU_ISSET(0, &orig_affinity))
		SKIP("needs CPU 0");
	pin_self_set(&c0, 1);
	nvmpf_info in;
	struct logcap lc;
	for (int s = NVMPF_SCHEME_M1; s <= NVMPF_SCHEME_M3; s++) {
		nvmpf_pool *p = place((nvmpf_scheme)s, NULL, NULL, 0, &in, &lc);
		if (!p)
			continue;
		CHECK_EQ(in.effective, NVMPF_SCHEME_NONE);
		CHECK_EQ(in.cpus_allowed, 1);
		CHECK_EQ(in.helper_cpu[0], -1);
		CHECK_EQ(in.nhelpers, 1);
		CHECK(in.fallback & NVMPF_FB_NO_OTHER_CORE);
		expect_message(&lc, &in, "cannot be honoured",
			       "falling back to NONE");
		/* unpinned helper inherits the caller's mask {0} */
		int cnt = 0;
		CHECK_EQ(thread_single_cpu(in.helper_tid[0], &cnt), 0);
		nvmpf_destroy(p);
	}
	restore_affinity();
}

static void test_fallback_no_topology(void)
{
	nvmpf_info in;
	struct logcap lc;
	nvmpf_pool *p = place(NVMPF_SCHEME_M1, "/nonexistent/nvmpf", NULL, 0,
			      &in, &lc);
	if (!p)
		return;
	CHECK(in.fallback & NVMPF_FB_NO_TOPOLOGY);
	CHECK_EQ(lc.count, 1);
	CHECK(strstr(lc.last, "unreadable") != NULL);
	if (t_allowed_cpus() >= 2)
		CHECK_EQ(in.effective, NVMPF_SCHEME_M1);
	nvmpf_destroy(p);
}

static void test_explicit_cpus(void)
{
	if (!CPU_ISSET(0, &orig_affinity) || !CPU_ISSET(1, &orig_affinity))
		SKIP("needs CPUs 0 and 1");
	nvmpf_info in;
	struct logcap lc;
	int l1[] = { 1, 0, 1 };
	nvmpf_pool *p = place(NVMPF_SCHEME_CPUS, NULL, l1, 3, &in, &lc);
	if (p) {
		CHECK_EQ(in.effective, NVMPF_SCHEME_CPUS);
		CHECK_EQ(in.nhelpers, 3);
		CHECK_EQ(in.helper_cpu[0], 1);
		CHECK_EQ(in.helper_cpu[1], 0);
		CHECK_EQ(in.helper_cpu[2], 1);
		CHECK_EQ(lc.count, 0);
		nvmpf_destroy(p);
	}
	int l2[] = { 1, 900 };
	p = place(NVMPF_SCHEME_CPUS, NULL, l2, 2, &in, &lc);
	if (p) {
		CHECK_EQ(in.effective, NVMPF_SCHEME_CPUS);
		CHECK_EQ(in.nhelpers, 1);
		CHECK_EQ(in.helper_cpu[0], 1);
		CHECK(in.fallback & NVMPF_FB_CPU_NOT_ALLOWED);
		expect_message(&lc, &in, "900", "using the others");
		nvmpf_destroy(p);
	}
	int l3[] = { 900 };
	p = place(NVMPF_SCHEME_CPUS, NULL, l3, 1, &in, &lc);
	if (p) {
		CHECK_EQ(in.effective, NVMPF_SCHEME_NONE);
		CHECK_EQ(in.helper_cpu[0], -1);
		expect_message(&lc, &in, "900", "falling back to NONE");
		nvmpf_destroy(p);
	}
	/* M3 with explicit {stage1, stage2}: tandem even without SMT. */
	int m3[] = { 1, 0 };
	p = place(NVMPF_SCHEME_M3, NULL, m3, 2, &in, &lc);
	if (p) {
		CHECK_EQ(in.effective, NVMPF_SCHEME_M3);
		CHECK_EQ(in.nhelpers, 2);
		CHECK_EQ(in.helper_cpu[0], 1);
		CHECK_EQ(in.helper_stage[0], 1);
		CHECK_EQ(in.helper_cpu[1], 0);
		CHECK_EQ(in.helper_stage[1], 2);
		CHECK_EQ(in.stage2_queue_len, in.queue_len);
		CHECK_EQ(lc.count, 0);
		nvmpf_destroy(p);
	}
}

static void test_default_log_to_stderr(void)
{
	int pfd[2];
	if (pipe(pfd) != 0)
		return;
	fflush(stderr);
	int saved = dup(2);
	dup2(pfd[1], 2);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.sysfs_cpu_dir = "/nonexistent/nvmpf"; /* forces a message */
	nvmpf_pool *p = NULL;
	int rc = nvmpf_create(&c, &p);
	dup2(saved, 2);
	close(saved);
	close(pfd[1]);
	CHECK_EQ(rc, NVMPF_OK);
	char buf[1024];
	ssize_t n = read(pfd[0], buf, sizeof buf - 1);
	close(pfd[0]);
	CHECK(n > 0);
	if (n > 0) {
		buf[n] = '\0';
		CHECK(strncmp(buf, "nvmprefetch: ", 13) == 0);
		CHECK(buf[n - 1] == '\n');
		CHECK(strchr(buf, '\n') == buf + n - 1); /* one line */
	}
	nvmpf_destroy(p);
}

/* ------------------------------------------------------------------ */
/* Tests: M3 pipeline                                                   */
/* ------------------------------------------------------------------ */

static void test_m3_pipeline_and_handoff_drops(void)
{
	unsigned char *buf = page_buf(1 << 20);
	int m3[] = { 0, 0 };
	if (CPU_ISSET(1, &orig_affinity))
		m3[0] = 1;
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_M3;
	c.cpus = m3;
	c.ncpus = 2;
	c.queue_len = 7;
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	for (int i = 0; i < 5; i++)
		CHECK_EQ(nvmpf_enqueue(p, buf + i * 4096, 4096), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done, 5);
	CHECK_EQ(st.handoff_enqueued, 5);
	CHECK_EQ(st.stage2_jobs_done, 5);
	CHECK_EQ(st.handoff_dropped, 0);
	CHECK_EQ(st.lines_prefetched, 2 * 5 * 64); /* both stages */
	CHECK_EQ(st.pages_touched, 5);
	CHECK_EQ(nvmpf_internal_fingerprint(p, 2), nvmpf_internal_fingerprint(p, 3));
	CHECK_EQ(nvmpf_internal_fingerprint(p, 1), nvmpf_internal_fingerprint(p, 2));

	/* Stage 2 paused: the hand-off queue (7) fills, the rest is dropped. */
	nvmpf_internal_set_paused(p, 2);
	for (int i = 0; i < 20; i++) {
		while (nvmpf_enqueue(p, buf, 64) != NVMPF_OK)
			;
		/* let stage 1 keep up so nothing is dropped at q1 */
		unsigned long long t0 = t_now_ns();
		do
			nvmpf_get_stats(p, &st);
		while (st.jobs_done < st.enqueued && t_now_ns() - t0 < 2000000000ull);
	}
	CHECK_EQ(nvmpf_drain(p, 10000000), NVMPF_ETIMEDOUT); /* stage 2 waits */
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done, 25);
	CHECK_EQ(st.handoff_enqueued, 5 + 7);
	CHECK_EQ(st.handoff_dropped, 13);
	nvmpf_internal_set_paused(p, 0);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.stage2_jobs_done, 12);
	CHECK_EQ(nvmpf_internal_fingerprint(p, 2), nvmpf_internal_fingerprint(p, 3));
	nvmpf_destroy(p);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Tests: embedding rules (signals, allocation, fork)                   */
/* ------------------------------------------------------------------ */

/* Read SigBlk of a thread from /proc as a 64-bit mask. */
static unsigned long long sigblk_of(pid_t tid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *s = strstr(buf, "SigBlk:");
	return s ? strtoull(s + 7, NULL, 16) : 0;
}

static volatile sig_atomic_t got_usr1;
static volatile pid_t usr1_tid;
static void on_usr1(int sig)
{
	(void)sig;
	got_usr1 = 1;
	usr1_tid = (pid_t)syscall(SYS_gettid);
}

static void test_helpers_block_signals(void)
{
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.nhelpers = 3;
	nvmpf_pool *p = mkpool(&c);
	if (!p)
		return;
	nvmpf_info in;
	nvmpf_get_info(p, &in);
	const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE,
			     SIGALRM, SIGTERM, SIGCHLD, SIGIO, SIGURG, SIGWINCH };
	for (unsigned int i = 0; i < in.nhelpers; i++) {
		unsigned long long m = sigblk_of(in.helper_tid[i]);
		for (unsigned int k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
			CHECK(m & (1ull << (sigs[k] - 1)));
	}
	/* A process-directed signal blocked in this thread must not be
	 * delivered to a helper: it stays pending until we unblock it. */
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, &old);
	sigset_t one, prev;
	sigemptyset(&one);
	sigaddset(&one, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &one, &prev);
	got_usr1 = 0;
	kill(getpid(), SIGUSR1);
	struct timespec ts = { 0, 20000000 };
	nanosleep(&ts, NULL);
	CHECK_EQ(got_usr1, 0);
	sigset_t pend;
	sigpending(&pend);
	CHECK(sigismember(&pend, SIGUSR1));
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	CHECK_EQ(got_usr1, 1);
	CHECK_EQ(usr1_tid, (pid_t)syscall(SYS_gettid));
	sigaction(SIGUSR1, &old, NULL);
	/* The caller's own mask is unchanged by create. */
	sigset_t cur;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	CHECK(!sigismember(&cur, SIGUSR1));
	nvmpf_destroy(p);
}

static void test_enqueue_does_not_allocate(void)
{
	unsigned char *buf = page_buf(1 << 16);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	c.spin_ns = 0; /* exercise the wake path too */
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	/* sanity: the counter works */
	count_allocs = 1;
	nallocs = 0;
	void *volatile x = malloc(10);
	count_allocs = 0;
	free(x);
	CHECK_EQ(nallocs, 1);
	nallocs = 0;
	count_allocs = 1;
	for (int i = 0; i < 100000; i++)
		nvmpf_enqueue(p, buf + (i % 65536), 1);
	count_allocs = 0;
	CHECK_EQ(nallocs, 0);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK(st.wake_calls > 0 || st.helper_sleeps == 0);
	nvmpf_destroy(p);
	free(buf);
}

static void test_fork(void)
{
	unsigned char *buf = page_buf(1 << 16);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	nvmpf_pool *p = mkpool(&c);
	if (!p || !buf)
		return;
	CHECK_EQ(nvmpf_enqueue(p, buf, 4096), NVMPF_OK);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		/* Child: the inherited pool has no helpers here. */
		int bad = 0;
		if (nvmpf_drain(p, 1000000) != NVMPF_EFORKED)
			bad |= 1;
		nvmpf_destroy(p); /* frees memory only, must not hang */
		/* A pool created after fork works normally. */
		nvmpf_pool *q = NULL;
		if (nvmpf_create(&c, &q) != NVMPF_OK)
			_exit(2);
		for (int i = 0; i < 100; i++)
			if (nvmpf_enqueue(q, buf + i * 64, 64) != NVMPF_OK)
				bad |= 4;
		if (nvmpf_drain(q, 5000000000) != NVMPF_OK)
			bad |= 8;
		nvmpf_stats st;
		nvmpf_get_stats(q, &st);
		if (st.jobs_done != 100)
			bad |= 16;
		nvmpf_destroy(q);
		_exit(bad);
	}
	CHECK(pid > 0);
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	/* Parent's pool is unaffected. */
	CHECK_EQ(nvmpf_enqueue(p, buf, 4096), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done, 2);
	nvmpf_destroy(p);
	free(buf);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	sched_getaffinity(0, sizeof orig_affinity, &orig_affinity);
	RUN(test_config_defaults);
	RUN(test_create_bad_args);
	RUN(test_create_defaults);
	RUN(test_queue_len_rounding);
	RUN(test_enqueue_bad_args);
	RUN(test_strings);
	RUN(test_cpulist_parser);
	RUN(test_queue_full_drops);
	RUN(test_stats_exact_counts);
	RUN(test_helper_takes_faults);
	RUN(test_populate_mode);
	RUN(test_retire_skips_stale_jobs);
	RUN(test_job_hook);
	RUN(test_job_hook_m3);
	RUN(test_wake_only_when_sleeping);
	RUN(test_destroy_with_pending_jobs);
	RUN(test_fallback_no_smt);
	RUN(test_fallback_smt_only);
	RUN(test_fallback_sibling_not_allowed);
	RUN(test_fallback_restricted_affinity);
	RUN(test_fallback_no_topology);
	RUN(test_explicit_cpus);
	RUN(test_default_log_to_stderr);
	RUN(test_m3_pipeline_and_handoff_drops);
	RUN(test_helpers_block_signals);
	RUN(test_enqueue_does_not_allocate);
	RUN(test_fork);
	for (int i = 0; i < nfake; i++) {
		nftw(fake_dirs[i], rm_cb, 8, FTW_DEPTH | FTW_PHYS);
		free(fake_dirs[i]);
	}
	return t_finish();
}
