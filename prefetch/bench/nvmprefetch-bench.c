/*
 * nvmprefetch-bench.c - microbenchmark of libnvmprefetch: one pass over a
 * large file on tmpfs (the emulated NVM), freshly mapped for each run
 * (MAP_SHARED, not populated: every page must be faulted into the page
 * table again, the file's pages stay in tmpfs), doing a little work per
 * cache line.  Compares:
 *
 *   none       no prefetching
 *   inline     __builtin_prefetch(distance bytes ahead) in the loop
 *   m1         helper on another core (faults + prefetch), jobs `ahead`
 *              chunks in front of the computation; a chunk's job is
 *              retired (nvmpf_retire) when the computation reaches it
 *   m1-fault   the same helper, fault-only mode
 *   m1-noretire  m1 without retiring: a lagging helper works on data the
 *              computation has already passed
 *   m2, m3     SMT-sibling / tandem helpers, when the topology allows
 *              (else "not available" with the library's reason)
 *   populate   mmap(MAP_POPULATE)
 *   madvise    madvise(MADV_POPULATE_READ) of the whole range first
 *   premapped  reference, not a strategy: the same madvise done before the
 *              clock starts, i.e. the pass with no page faults at all (a
 *              floor for what taking faults off the thread can give)
 *
 * Reported per variant: ns per cache line (median of --runs, min, max), the
 * ratio of the median to no-prefetch, the computation thread's own CPU time
 * per line (differs from wall time when the machine is shared), its
 * context switches per run (blocked in the kernel / preempted), and the
 * helpers' CPU time per run (not included in ns/line; the producer's
 * enqueue time is).  Runs are
 * interleaved across variants so drift affects all alike.  Every run's
 * checksum must match or the benchmark fails.
 */
#define _GNU_SOURCE
#include "nvmprefetch.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#define LINE 64u
#define MAX_RUNS 101

enum kind { K_NONE, K_INLINE, K_HELPER, K_POPULATE, K_MADVISE, K_PREMAPPED };

struct variant {
	const char *name;
	enum kind kind;
	nvmpf_scheme scheme;      /* K_HELPER */
	unsigned int mode;        /* K_HELPER */
	int retire;               /* K_HELPER: nvmpf_retire jobs reached */
	int enabled;
	int available;
	char reason[400];
	nvmpf_pool *pool;
	double ns_line[MAX_RUNS];
	double cpu_ns_line[MAX_RUNS]; /* computation thread's CPU time */
	double vcsw[MAX_RUNS], ivcsw[MAX_RUNS]; /* its context switches */
	double helper_cpu_ms[MAX_RUNS];
	uint64_t jobs[MAX_RUNS], dropped[MAX_RUNS], skipped[MAX_RUNS];
	char effective[64];
};

#define V(n, k, ...) { .name = n, .kind = k, .enabled = 1, .available = 1, __VA_ARGS__ }
#define V_OFF(n, k, ...) { .name = n, .kind = k, .enabled = 0, .available = 1, __VA_ARGS__ }
static struct variant variants[] = {
	V("none", K_NONE),
	V("inline", K_INLINE),
	V("m1", K_HELPER, .scheme = NVMPF_SCHEME_M1, .mode = NVMPF_MODE_BOTH, .retire = 1),
	V("m1-fault", K_HELPER, .scheme = NVMPF_SCHEME_M1, .mode = NVMPF_MODE_FAULT, .retire = 1),
	V("m1-noretire", K_HELPER, .scheme = NVMPF_SCHEME_M1, .mode = NVMPF_MODE_BOTH),
	V_OFF("m1-prefetch", K_HELPER, .scheme = NVMPF_SCHEME_M1, .mode = NVMPF_MODE_PREFETCH,
	      .retire = 1),
	V("m2", K_HELPER, .scheme = NVMPF_SCHEME_M2, .mode = NVMPF_MODE_BOTH, .retire = 1),
	V("m3", K_HELPER, .scheme = NVMPF_SCHEME_M3, .mode = NVMPF_MODE_BOTH, .retire = 1),
	V("populate", K_POPULATE),
	V("madvise", K_MADVISE),
	V("premapped", K_PREMAPPED),
};
#define NVARIANTS (sizeof variants / sizeof variants[0])

/* Options. */
static const char *opt_file = "/dev/shm/nvmprefetch-bench.dat";
static size_t opt_size = 1ull << 30;
static int opt_runs = 5;
static size_t opt_distance = 1024;
static size_t opt_chunk = 256 * 1024;
static unsigned int opt_ahead = 16;
static unsigned int opt_queue = 1023;
static int opt_json;
static int opt_cpu = -1;
static unsigned int opt_work = 1;
static int opt_locality = 3;
static uint64_t opt_spin_ns = 50000;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Parse "123", "64K", "2M", "1G" (binary units). */
static size_t parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s) {
		fprintf(stderr, "bad size: %s\n", s);
		exit(2);
	}
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case '\0': break;
	default:
		fprintf(stderr, "bad size suffix: %s\n", s);
		exit(2);
	}
	return (size_t)v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: nvmprefetch-bench [options]\n"
		"  --file PATH      data file (created/filled if missing or short;\n"
		"                   default /dev/shm/nvmprefetch-bench.dat)\n"
		"  --size N[K|M|G]  bytes to scan (default 1G)\n"
		"  --runs N         runs per variant (default 5); median/min/max\n"
		"  --distance N     inline prefetch distance in bytes (default 1024)\n"
		"  --chunk N        helper job size in bytes (default 256K)\n"
		"  --ahead N        helper jobs kept in front of the computation,\n"
		"                   in chunks (default 16)\n"
		"  --queue N        helper queue length (default 1023)\n"
		"  --work N         mixing rounds per cache line (default 1)\n"
		"  --locality N     helper prefetch hint 0..3 (default 3)\n"
		"  --spin-ns N      helper idle spin before sleeping (default 50000)\n"
		"  --cpu N          CPU for the computation thread (default: current)\n"
		"  --variants LIST  comma list of: none,inline,m1,m1-fault,m1-noretire,\n"
		"                   m1-prefetch,m2,m3,populate,madvise,premapped\n"
		"                   (default all but m1-prefetch)\n"
		"  --json           machine-readable output\n");
	exit(2);
}

/* Enable exactly the variants named in a comma list. */
static void select_variants(const char *list)
{
	for (unsigned int i = 0; i < NVARIANTS; i++)
		variants[i].enabled = 0;
	char *dup = strdup(list), *save = NULL;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned int i;
		for (i = 0; i < NVARIANTS; i++)
			if (strcmp(variants[i].name, t) == 0)
				break;
		if (i == NVARIANTS) {
			fprintf(stderr, "unknown variant: %s\n", t);
			exit(2);
		}
		variants[i].enabled = 1;
	}
	free(dup);
	variants[0].enabled = 1; /* ratios need the baseline */
}

/*
 * Make sure the file holds at least `size` bytes of non-trivial data (so
 * tmpfs has real pages); write it with write(2) in 1 MB blocks.
 */
static int prepare_file(const char *path, size_t size)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		exit(1);
	}
	struct stat st;
	fstat(fd, &st);
	if ((size_t)st.st_size >= size)
		return fd;
	if (!opt_json)
		fprintf(stderr, "filling %s with %zu MiB ...\n", path, size >> 20);
	if (ftruncate(fd, 0) != 0) {
		perror("ftruncate");
		exit(1);
	}
	const size_t blk = 1 << 20;
	uint64_t *b = malloc(blk);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t off = 0; off < size; off += blk) {
		for (size_t i = 0; i < blk / 8; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			b[i] = x;
		}
		size_t n = size - off < blk ? size - off : blk;
		if (write(fd, b, n) != (ssize_t)n) {
			fprintf(stderr, "write %s: %s\n", path, strerror(errno));
			exit(1);
		}
	}
	free(b);
	return fd;
}

/* The per-cache-line work: sum the 8 words, mix into the accumulator. */
static inline uint64_t work_line(const uint64_t *w, uint64_t acc)
{
	uint64_t s = w[0] + w[1] + w[2] + w[3] + w[4] + w[5] + w[6] + w[7];
	for (unsigned int r = 0; r < opt_work; r++) {
		acc ^= s;
		acc = (acc << 5 | acc >> 59) * 0x9e3779b97f4a7c15ull;
	}
	return acc + s;
}

/* Process [p, p+n): the computation the prefetching tries to speed up. */
static uint64_t compute(const unsigned char *p, size_t n, uint64_t acc,
			int inline_pf)
{
	if (inline_pf) {
		const unsigned char *end = p + n;
		for (const unsigned char *q = p; q < end; q += LINE) {
			__builtin_prefetch(q + opt_distance, 0, 3);
			acc = work_line((const uint64_t *)q, acc);
		}
	} else {
		for (size_t off = 0; off < n; off += LINE)
			acc = work_line((const uint64_t *)(p + off), acc);
	}
	return acc;
}

static uint64_t *chunk_seq; /* per chunk: accepted job's seq + 1, or 0 */

/* One timed run of variant v; returns ns per cache line, sets *sum. */
static double run_once(struct variant *v, int fd, uint64_t *sum, int r)
{
	nvmpf_stats s0, s1;
	if (v->pool)
		nvmpf_get_stats(v->pool, &s0);
	int flags = MAP_SHARED | (v->kind == K_POPULATE ? MAP_POPULATE : 0);
	unsigned char *m = NULL;
	if (v->kind == K_PREMAPPED) {
		m = mmap(NULL, opt_size, PROT_READ, flags, fd, 0);
		if (m != MAP_FAILED)
			madvise(m, opt_size, MADV_POPULATE_READ);
	}
	struct rusage ru0, ru1;
	getrusage(RUSAGE_THREAD, &ru0);
	double c0 = thread_cpu_s();
	double t0 = now_s();
	if (v->kind != K_PREMAPPED)
		m = mmap(NULL, opt_size, PROT_READ, flags, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	if (v->kind == K_MADVISE && madvise(m, opt_size, MADV_POPULATE_READ) != 0) {
		perror("madvise(MADV_POPULATE_READ)");
		exit(1);
	}
	uint64_t acc = 0;
	if (v->kind == K_HELPER) {
		/* Chunk k+ahead is requested while chunk k is processed; when
		 * the computation reaches chunk k, its job (and older ones) are
		 * retired so a lagging helper skips to data still ahead. */
		const size_t nchunks = (opt_size + opt_chunk - 1) / opt_chunk;
		for (size_t k = 0; k < nchunks + opt_ahead; k++) {
			if (k < nchunks) {
				size_t off = k * opt_chunk;
				size_t n = opt_size - off < opt_chunk ? opt_size - off : opt_chunk;
				uint64_t seq;
				if (nvmpf_enqueue_seq(v->pool, m + off, n, &seq) == NVMPF_OK)
					chunk_seq[k] = seq + 1;
				else
					chunk_seq[k] = 0;
			}
			if (k < opt_ahead)
				continue;
			size_t c = k - opt_ahead; /* chunk to process now */
			if (v->retire && chunk_seq[c])
				nvmpf_retire(v->pool, chunk_seq[c]);
			size_t off = c * opt_chunk;
			size_t n = opt_size - off < opt_chunk ? opt_size - off : opt_chunk;
			acc = compute(m + off, n, acc, 0);
		}
	} else {
		acc = compute(m, opt_size, acc, v->kind == K_INLINE);
	}
	double t1 = now_s();
	v->cpu_ns_line[r] = (thread_cpu_s() - c0) * 1e9 / (double)(opt_size / LINE);
	getrusage(RUSAGE_THREAD, &ru1);
	v->vcsw[r] = (double)(ru1.ru_nvcsw - ru0.ru_nvcsw);
	v->ivcsw[r] = (double)(ru1.ru_nivcsw - ru0.ru_nivcsw);
	if (v->pool) {
		/* The mapping must outlive queued jobs (memory contract). */
		nvmpf_drain(v->pool, -1);
		nvmpf_get_stats(v->pool, &s1);
		v->helper_cpu_ms[r] = (double)(s1.helper_cpu_ns - s0.helper_cpu_ns) / 1e6;
		v->jobs[r] = s1.jobs_done - s0.jobs_done;
		v->dropped[r] = s1.dropped - s0.dropped;
		v->skipped[r] = s1.jobs_skipped - s0.jobs_skipped;
	}
	munmap(m, opt_size);
	*sum = acc;
	return (t1 - t0) * 1e9 / (double)(opt_size / LINE);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median of n values (n >= 1). */
static double median(const double *v, int n)
{
	double t[MAX_RUNS];
	memcpy(t, v, sizeof(double) * (size_t)n);
	qsort(t, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static double minv(const double *v, int n)
{
	double m = v[0];
	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

static double maxv(const double *v, int n)
{
	double m = v[0];
	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* kB of the mapping at addr mapped with PMDs (huge pages), from smaps. */
static long pmd_mapped_kb(const void *addr, long *size_kb)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	int in = 0;
	long pmd = -1;
	*size_kb = -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (!in)
			continue;
		long v;
		if (sscanf(line, "Size: %ld kB", &v) == 1)
			*size_kb = v;
		else if (sscanf(line, "FilePmdMapped: %ld kB", &v) == 1 ||
			 sscanf(line, "ShmemPmdMapped: %ld kB", &v) == 1)
			pmd = (pmd < 0 ? 0 : pmd) + v;
	}
	fclose(f);
	return pmd;
}

/* Describe the file system and whether the file maps with huge pages. */
static void describe_backing(int fd, char *out, size_t n, double *pmd_pct)
{
	struct statfs sf;
	const char *fs = "?";
	if (fstatfs(fd, &sf) == 0)
		fs = sf.f_type == 0x01021994 ? "tmpfs" : "not tmpfs";
	unsigned char *m = mmap(NULL, opt_size, PROT_READ, MAP_SHARED | MAP_POPULATE,
				fd, 0);
	long size_kb = 0, pmd = -1;
	if (m != MAP_FAILED) {
		pmd = pmd_mapped_kb(m, &size_kb);
		munmap(m, opt_size);
	}
	*pmd_pct = (pmd >= 0 && size_kb > 0) ? 100.0 * (double)pmd / (double)size_kb : 0;
	snprintf(out, n, "%s, %.0f%% of the mapping PMD-mapped (2 MB pages)", fs,
		 *pmd_pct);
}

/* The 1-minute load average and runnable count from /proc/loadavg ("?"
 * if unreadable): the benchmark shares the machine with whatever runs. */
static void read_loadavg(char *out, size_t n)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double l1 = 0;
	char run[32] = "?";
	if (!f || fscanf(f, "%lf %*f %*f %31s", &l1, run) != 2)
		snprintf(out, n, "?");
	else
		snprintf(out, n, "%.2f (runnable/total %s)", l1, run);
	if (f)
		fclose(f);
}

/* Create the pool of a helper variant, or mark it unavailable. */
static void setup_helper(struct variant *v)
{
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = v->scheme;
	c.mode = v->mode;
	c.locality = opt_locality;
	c.spin_ns = opt_spin_ns;
	c.queue_len = opt_queue;
	c.log = nvmpf_log_discard;
	int rc = nvmpf_create(&c, &v->pool);
	if (rc != NVMPF_OK) {
		v->available = 0;
		snprintf(v->reason, sizeof v->reason, "nvmpf_create: %s",
			 nvmpf_strerror(rc));
		return;
	}
	nvmpf_info in;
	nvmpf_get_info(v->pool, &in);
	char cpus[64] = "";
	size_t off = 0;
	for (unsigned int i = 0; i < in.nhelpers && off < sizeof cpus - 8; i++)
		off += (size_t)snprintf(cpus + off, sizeof cpus - off, "%s%d",
					i ? "," : "", in.helper_cpu[i]);
	snprintf(v->effective, sizeof v->effective, "%s on CPU %s",
		 nvmpf_scheme_name(in.effective), cpus);
	if (in.effective != v->scheme) {
		v->available = 0;
		snprintf(v->reason, sizeof v->reason, "%s", in.message);
		nvmpf_destroy(v->pool);
		v->pool = NULL;
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "size", required_argument, NULL, 's' },
		{ "runs", required_argument, NULL, 'r' },
		{ "distance", required_argument, NULL, 'd' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "ahead", required_argument, NULL, 'a' },
		{ "queue", required_argument, NULL, 'q' },
		{ "work", required_argument, NULL, 'w' },
		{ "locality", required_argument, NULL, 'l' },
		{ "spin-ns", required_argument, NULL, 'S' },
		{ "cpu", required_argument, NULL, 'C' },
		{ "variants", required_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'f': opt_file = optarg; break;
		case 's': opt_size = parse_size(optarg); break;
		case 'r': opt_runs = atoi(optarg); break;
		case 'd': opt_distance = parse_size(optarg); break;
		case 'c': opt_chunk = parse_size(optarg); break;
		case 'a': opt_ahead = (unsigned int)atoi(optarg); break;
		case 'q': opt_queue = (unsigned int)atoi(optarg); break;
		case 'w': opt_work = (unsigned int)atoi(optarg); break;
		case 'l': opt_locality = atoi(optarg); break;
		case 'S': opt_spin_ns = parse_size(optarg); break;
		case 'C': opt_cpu = atoi(optarg); break;
		case 'v': select_variants(optarg); break;
		case 'j': opt_json = 1; break;
		default: usage();
		}
	}
	if (opt_runs < 1 || opt_runs > MAX_RUNS || opt_size < LINE ||
	    opt_chunk < LINE || opt_ahead < 1 || opt_locality < 0 || opt_locality > 3 ||
	    opt_queue < 1 || opt_queue >= (1u << 24))
		usage();
	opt_size &= ~(size_t)(LINE - 1);

	/* The computation thread runs on `cpu`.  Helper pools are created
	 * while we sit on `cpu` with the full CPU mask (so the library may
	 * place helpers on other CPUs, relative to `cpu`); then we pin
	 * ourselves to `cpu` for the measurements. */
	int cpu = opt_cpu >= 0 ? opt_cpu : sched_getcpu();
	cpu_set_t one, all;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_getaffinity(0, sizeof all, &all) != 0 ||
	    sched_setaffinity(0, sizeof one, &one) != 0) {
		perror("sched_setaffinity");
		return 1;
	}

	int fd = prepare_file(opt_file, opt_size);
	chunk_seq = calloc(opt_size / opt_chunk + 2, sizeof *chunk_seq);
	char backing[160];
	double pmd_pct = 0;
	describe_backing(fd, backing, sizeof backing, &pmd_pct);

	for (unsigned int i = 0; i < NVARIANTS; i++) {
		struct variant *v = &variants[i];
		if (!v->enabled || v->kind != K_HELPER)
			continue;
		for (int attempt = 0; attempt < 100; attempt++) {
			sched_setaffinity(0, sizeof one, &one); /* move to cpu */
			sched_setaffinity(0, sizeof all, &all); /* full mask */
			setup_helper(v);
			nvmpf_info in;
			if (!v->pool || (nvmpf_get_info(v->pool, &in) == 0 &&
					 in.caller_cpu == cpu))
				break;
			nvmpf_destroy(v->pool); /* migrated meanwhile: retry */
			v->pool = NULL;
		}
	}
	sched_setaffinity(0, sizeof one, &one);

	char load0[64], load1[64];
	read_loadavg(load0, sizeof load0);
	uint64_t ref = 0;
	int have_ref = 0, bad_sum = 0;
	for (int r = 0; r < opt_runs; r++) {
		for (unsigned int i = 0; i < NVARIANTS; i++) {
			struct variant *v = &variants[i];
			if (!v->enabled || !v->available)
				continue;
			uint64_t sum;
			v->ns_line[r] = run_once(v, fd, &sum, r);
			if (!have_ref) {
				ref = sum;
				have_ref = 1;
			} else if (sum != ref) {
				bad_sum = 1;
			}
		}
	}

	read_loadavg(load1, sizeof load1);
	double base = median(variants[0].ns_line, opt_runs);
	if (opt_json) {
		printf("{\n  \"file\": \"%s\",\n  \"size\": %zu,\n  \"runs\": %d,\n"
		       "  \"chunk\": %zu,\n  \"ahead\": %u,\n  \"queue\": %u,\n  \"distance\": %zu,\n"
		       "  \"work\": %u,\n  \"cpu\": %d,\n  \"pmd_mapped_pct\": %.1f,\n"
		       "  \"backing\": \"%s\",\n  \"loadavg_before\": \"%s\",\n"
		       "  \"loadavg_after\": \"%s\",\n  \"checksum_ok\": %s,\n  \"results\": [\n",
		       opt_file, opt_size, opt_runs, opt_chunk, opt_ahead, opt_queue, opt_distance,
		       opt_work, cpu, pmd_pct, backing, load0, load1,
		       bad_sum ? "false" : "true");
		int first = 1;
		for (unsigned int i = 0; i < NVARIANTS; i++) {
			struct variant *v = &variants[i];
			if (!v->enabled)
				continue;
			printf("%s    {\"variant\": \"%s\", \"available\": %s", first ? "" : ",\n",
			       v->name, v->available ? "true" : "false");
			first = 0;
			if (!v->available) {
				printf(", \"reason\": \"");
				for (const char *c = v->reason; *c; c++)
					printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
				printf("\"}");
				continue;
			}
			double med = median(v->ns_line, opt_runs);
			printf(", \"ns_per_line_median\": %.4f, \"ns_per_line_min\": %.4f, "
			       "\"ns_per_line_max\": %.4f, \"ratio_to_none\": %.4f, "
			       "\"cpu_ns_per_line_median\": %.4f, \"blocked_csw_median\": %.0f, "
			       "\"preempted_csw_median\": %.0f, \"runs_ns_per_line\": [",
			       med, minv(v->ns_line, opt_runs), maxv(v->ns_line, opt_runs), med / base,
			       median(v->cpu_ns_line, opt_runs), median(v->vcsw, opt_runs),
			       median(v->ivcsw, opt_runs));
			for (int r = 0; r < opt_runs; r++)
				printf("%s%.4f", r ? ", " : "", v->ns_line[r]);
			printf("]");
			if (v->kind == K_HELPER)
				printf(", \"helper\": \"%s\", \"helper_cpu_ms_median\": %.3f, "
				       "\"jobs_done_run1\": %llu, \"jobs_skipped_run1\": %llu, "
				       "\"jobs_dropped_run1\": %llu, \"retire\": %s",
				       v->effective, median(v->helper_cpu_ms, opt_runs),
				       (unsigned long long)v->jobs[0],
				       (unsigned long long)v->skipped[0],
				       (unsigned long long)v->dropped[0],
				       v->retire ? "true" : "false");
			printf("}");
		}
		printf("\n  ]\n}\n");
	} else {
		printf("file %s: %zu MiB, %s\n", opt_file, opt_size >> 20, backing);
		printf("computation on CPU %d; %d runs per variant, fresh mapping each run; "
		       "chunk %zu KiB, ahead %u chunks, queue %u, inline distance %zu B, work %u\n",
		       cpu, opt_runs, opt_chunk >> 10, opt_ahead, opt_queue, opt_distance, opt_work);
		printf("load average before %s, after %s\n", load0, load1);
		printf("%-12s %8s %8s %8s %6s %8s %9s %11s  %s\n", "variant", "ns/line", "min",
		       "max", "ratio", "cpu/line", "csw b/p", "helper CPU", "notes");
		for (unsigned int i = 0; i < NVARIANTS; i++) {
			struct variant *v = &variants[i];
			if (!v->enabled)
				continue;
			if (!v->available) {
				printf("%-12s not available: %s\n", v->name, v->reason);
				continue;
			}
			double med = median(v->ns_line, opt_runs);
			char cpu_s[32] = "-";
			char notes[160] = "";
			if (v->kind == K_HELPER) {
				snprintf(cpu_s, sizeof cpu_s, "%.1f ms",
					 median(v->helper_cpu_ms, opt_runs));
				snprintf(notes, sizeof notes,
					 "%s; run 1: %llu done, %llu skipped, %llu dropped",
					 v->effective, (unsigned long long)v->jobs[0],
					 (unsigned long long)v->skipped[0],
					 (unsigned long long)v->dropped[0]);
			}
			char csw[32];
			snprintf(csw, sizeof csw, "%.0f/%.0f", median(v->vcsw, opt_runs),
				 median(v->ivcsw, opt_runs));
			printf("%-12s %8.2f %8.2f %8.2f %6.2f %8.2f %9s %11s  %s\n", v->name, med,
			       minv(v->ns_line, opt_runs), maxv(v->ns_line, opt_runs),
			       med / base, median(v->cpu_ns_line, opt_runs), csw, cpu_s, notes);
		}
		if (bad_sum)
			printf("ERROR: checksums differ between runs\n");
	}
	for (unsigned int i = 0; i < NVARIANTS; i++)
		nvmpf_destroy(variants[i].pool);
	close(fd);
	return bad_sum ? 1 : 0;
}
