/*
 * test_stress.c - stress tests of libnvmprefetch: millions of jobs through
 * small rings with several consumers (every job processed exactly once,
 * checked with order-independent fingerprints), 32-bit ring index
 * wrap-around, the M3 two-stage pipeline, sleep/wake bursts that would hang
 * on a lost wake-up, concurrent statistics readers, and create/destroy
 * cycles with pending jobs.
 *
 * Built twice: normally (make test) and with -fsanitize=thread
 * (make tsan-test), where the job counts are scaled down.
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "internal.h"
#include "nvmprefetch.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define SCALE 2 /* TSan is ~10-20x slower; keep the run ~10 s */
#else
#define SCALE 1
#endif

#define BUF_SIZE (1u << 16)
static unsigned char *buf;
static cpu_set_t orig_affinity;

/* xorshift64* PRNG: cheap, deterministic per seed. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* The i-th job of a stream: small, inside buf, varied addresses/lengths. */
static void job_of(uint64_t i, unsigned char **addr, size_t *len)
{
	*addr = buf + (i * 64 + i / 7) % 60000;
	*len = 1 + (size_t)(i % 1000);
}

/* Concurrent reader of stats/info while a stress test runs. */
struct reader {
	nvmpf_pool *pool;
	atomic_int stop;
	uint64_t reads;
	int monotonic_ok;
};
static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint64_t last_done = 0;
	r->monotonic_ok = 1;
	while (!atomic_load(&r->stop)) {
		nvmpf_stats st;
		nvmpf_info in;
		nvmpf_get_stats(r->pool, &st);
		nvmpf_get_info(r->pool, &in);
		if (st.jobs_done < last_done)
			r->monotonic_ok = 0;
		last_done = st.jobs_done;
		r->reads++;
		sched_yield();
	}
	return NULL;
}

/* Yield while a queue is full; false once it has been full for 10 s (a
 * lost wake-up would otherwise hang the test instead of failing it). */
static int stuck_wait(uint64_t *since)
{
	uint64_t now = t_now_ns();
	if (*since == 0)
		*since = now;
	else if (now - *since > 10000000000ull)
		return 0;
	sched_yield();
	return 1;
}

/*
 * Push n jobs through a pool.  lossless: retry on EFULL (the retries are
 * counted as drops by the library); else give up on the job.  Returns the
 * fingerprint of the accepted jobs and their count in *accepted, and the
 * number of EFULL returns in *full.
 */
static uint64_t push_jobs(nvmpf_pool *p, uint64_t n, int lossless,
			  uint64_t *accepted, uint64_t *full)
{
	uint64_t fp = 0, acc = 0, fulls = 0;
	for (uint64_t i = 0; i < n; i++) {
		unsigned char *a;
		size_t l;
		job_of(i, &a, &l);
		int rc;
		uint64_t stuck_since = 0;
		while ((rc = nvmpf_enqueue(p, a, l)) == NVMPF_EFULL) {
			fulls++;
			if (!lossless)
				break;
			if (!stuck_wait(&stuck_since)) {
				CHECK(!"queue stayed full for 10 s: helpers not running");
				*accepted = acc;
				*full = fulls;
				return fp;
			}
		}
		if (rc == NVMPF_OK) {
			acc++;
			fp += nvmpf_internal_job_hash((uintptr_t)a, l);
		} else if (rc != NVMPF_EFULL) {
			CHECK_EQ(rc, NVMPF_OK);
			break;
		}
	}
	*accepted = acc;
	*full = fulls;
	return fp;
}

/* Common checks after a stream: counts and exactly-once fingerprint. */
static void check_stream(nvmpf_pool *p, uint64_t fp, uint64_t acc,
			 uint64_t fulls)
{
	CHECK_EQ(nvmpf_drain(p, 30000000000ll), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.enqueued, acc);
	CHECK_EQ(st.dropped, fulls);
	CHECK_EQ(st.jobs_done, acc);
	CHECK_EQ(st.jobs_skipped, 0);
	CHECK_EQ(nvmpf_internal_fingerprint(p, 1), fp);
	uint64_t per = 0;
	for (unsigned int i = 0; i < st.nhelpers; i++)
		if (i < NVMPF_MAX_HELPERS)
			per += st.helper[i].jobs;
	CHECK_EQ(per, st.jobs_done + st.stage2_jobs_done);
}

static nvmpf_pool *mk(nvmpf_scheme s, unsigned int nh, unsigned int qlen,
		      uint64_t spin_ns, const int *cpus, unsigned int ncpus)
{
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = s;
	c.nhelpers = nh;
	c.queue_len = qlen;
	c.spin_ns = spin_ns;
	c.cpus = cpus;
	c.ncpus = ncpus;
	c.log = nvmpf_log_discard;
	nvmpf_pool *p = NULL;
	CHECK_EQ(nvmpf_create(&c, &p), NVMPF_OK);
	return p;
}

static void test_spmc_lossless_exactly_once(void)
{
	nvmpf_pool *p = mk(NVMPF_SCHEME_NONE, 4, 63, 20000, NULL, 0);
	if (!p)
		return;
	struct reader r = { .pool = p };
	pthread_t rt;
	pthread_create(&rt, NULL, reader_main, &r);
	uint64_t acc, fulls;
	uint64_t fp = push_jobs(p, 1000000 / SCALE, 1, &acc, &fulls);
	CHECK_EQ(acc, 1000000 / SCALE);
	check_stream(p, fp, acc, fulls);
	atomic_store(&r.stop, 1);
	pthread_join(rt, NULL);
	CHECK(r.reads > 0);
	CHECK(r.monotonic_ok);
	/* every helper took part */
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	for (unsigned int i = 0; i < st.nhelpers; i++)
		CHECK(st.helper[i].jobs > 0);
	nvmpf_destroy(p);
}

static void test_spmc_lossy_sleepy(void)
{
	/* spin 0: helpers sleep whenever the ring is empty */
	nvmpf_pool *p = mk(NVMPF_SCHEME_NONE, 3, 15, 0, NULL, 0);
	if (!p)
		return;
	uint64_t acc, fulls;
	uint64_t fp = push_jobs(p, 1000000 / SCALE, 0, &acc, &fulls);
	CHECK_EQ(acc + fulls, 1000000 / SCALE);
	check_stream(p, fp, acc, fulls);
	nvmpf_destroy(p);
}

static void test_ring_index_wraparound(void)
{
	/* Single-stage: 2 consumers, ring of 16 slots, counters start just
	 * below UINT_MAX so they wrap to 0 during the run. */
	nvmpf_pool *p = mk(NVMPF_SCHEME_NONE, 2, 15, 20000, NULL, 0);
	if (!p)
		return;
	nvmpf_internal_set_paused(p, 3);
	nvmpf_internal_preset_ring(p, UINT_MAX - 3000);
	nvmpf_internal_set_paused(p, 0);
	uint64_t acc, fulls;
	uint64_t fp = push_jobs(p, 200000 / SCALE, 1, &acc, &fulls);
	check_stream(p, fp, acc, fulls);
	nvmpf_destroy(p);

	/* Two-stage (both rings wrap). */
	int cpus[2] = { 0, 0 };
	if (CPU_ISSET(1, &orig_affinity))
		cpus[0] = 1;
	p = mk(NVMPF_SCHEME_M3, 0, 15, 20000, cpus, 2);
	if (!p)
		return;
	nvmpf_internal_set_paused(p, 3);
	nvmpf_internal_preset_ring(p, UINT_MAX - 3000);
	nvmpf_internal_set_paused(p, 0);
	fp = push_jobs(p, 200000 / SCALE, 1, &acc, &fulls);
	check_stream(p, fp, acc, fulls);
	CHECK_EQ(nvmpf_internal_fingerprint(p, 2), nvmpf_internal_fingerprint(p, 3));
	nvmpf_destroy(p);
}

static void test_m3_tandem_stream(void)
{
	int cpus[2] = { 0, 0 };
	if (CPU_ISSET(1, &orig_affinity))
		cpus[0] = 1;
	for (int spin = 0; spin < 2; spin++) {
		nvmpf_pool *p = mk(NVMPF_SCHEME_M3, 2, 31, spin ? 20000 : 0, cpus, 2);
		if (!p)
			return;
		nvmpf_info in;
		nvmpf_get_info(p, &in);
		CHECK_EQ(in.effective, NVMPF_SCHEME_M3);
		uint64_t acc, fulls;
		uint64_t fp = push_jobs(p, 500000 / SCALE, 1, &acc, &fulls);
		check_stream(p, fp, acc, fulls);
		nvmpf_stats st;
		nvmpf_get_stats(p, &st);
		CHECK_EQ(st.handoff_enqueued + st.handoff_dropped, st.jobs_done);
		CHECK_EQ(st.stage2_jobs_done, st.handoff_enqueued);
		CHECK(st.stage2_jobs_done > 0);
		CHECK_EQ(nvmpf_internal_fingerprint(p, 2),
			 nvmpf_internal_fingerprint(p, 3));
		nvmpf_destroy(p);
	}
}

/* Short busy wait (ns) to vary the producer's pace without a syscall. */
static void pause_ns(uint64_t ns)
{
	unsigned long long end = t_now_ns() + ns;
	while (t_now_ns() < end)
		;
}

static void test_sleep_wake_bursts(void)
{
	const uint64_t spins[] = { 0, 3000 };
	uint64_t seed = 0x1234567;
	for (unsigned int k = 0; k < 2; k++) {
		nvmpf_pool *p = mk(NVMPF_SCHEME_NONE, 2, 31, spins[k], NULL, 0);
		if (!p)
			return;
		uint64_t fp = 0, acc = 0, i = 0, fulls = 0;
		int hung = 0;
		for (int b = 0; b < 20000 / SCALE && !hung; b++) {
			int n = 1 + (int)(rnd(&seed) % 8);
			for (int j = 0; j < n; j++, i++) {
				unsigned char *a;
				size_t l;
				job_of(i, &a, &l);
				uint64_t since = 0;
				while (nvmpf_enqueue(p, a, l) == NVMPF_EFULL) {
					fulls++;
					if (!stuck_wait(&since)) {
						hung = 1;
						CHECK(!"queue full for 10 s: lost wake-up");
						break;
					}
				}
				acc++;
				fp += nvmpf_internal_job_hash((uintptr_t)a, l);
			}
			uint64_t r = rnd(&seed) % 4;
			if (r == 0) {
				/* A lost wake-up leaves jobs queued forever. */
				if (nvmpf_drain(p, 5000000000ll) != NVMPF_OK) {
					hung = 1;
					CHECK(!"drain timed out: lost wake-up");
				}
			} else if (r == 1) {
				pause_ns(rnd(&seed) % 20000);
			}
		}
		nvmpf_stats st;
		if (!hung) {
			check_stream(p, fp, acc, fulls);
			nvmpf_get_stats(p, &st);
			if (spins[k] == 0)
				CHECK(st.wake_calls > 0 && st.helper_sleeps > 0);
		}
		nvmpf_destroy(p);
	}
}

/* Producer retires jobs as it goes (like a scan reaching prefetched
 * data); every job is still accounted exactly once, done or skipped. */
static void test_retire_while_streaming(void)
{
	nvmpf_pool *p = mk(NVMPF_SCHEME_NONE, 2, 63, 20000, NULL, 0);
	if (!p)
		return;
	uint64_t fp = 0, acc = 0, since = 0, fulls = 0;
	const uint64_t n = 500000 / SCALE;
	for (uint64_t i = 0; i < n; i++) {
		unsigned char *a;
		size_t l;
		job_of(i, &a, &l);
		uint64_t seq;
		int rc;
		while ((rc = nvmpf_enqueue_seq(p, a, l, &seq)) == NVMPF_EFULL) {
			fulls++;
			if (!stuck_wait(&since)) {
				CHECK(!"queue full for 10 s");
				nvmpf_destroy(p);
				return;
			}
		}
		since = 0;
		CHECK_EQ(seq, acc);
		acc++;
		fp += nvmpf_internal_job_hash((uintptr_t)a, l);
		if (i % 16 == 15 && acc > 20)
			nvmpf_retire(p, acc - 20); /* keep the last 20 */
	}
	CHECK_EQ(nvmpf_drain(p, 30000000000ll), NVMPF_OK);
	nvmpf_stats st;
	nvmpf_get_stats(p, &st);
	CHECK_EQ(st.jobs_done + st.jobs_skipped, acc);
	CHECK_EQ(st.enqueued, acc);
	CHECK_EQ(st.dropped, fulls);
	CHECK_EQ(nvmpf_internal_fingerprint(p, 1), fp);
	nvmpf_destroy(p);
}

static void test_create_destroy_cycles(void)
{
	uint64_t seed = 42;
	int cpus[3] = { 0, 0, 0 };
	if (CPU_ISSET(1, &orig_affinity))
		cpus[1] = 1;
	for (int i = 0; i < 300 / SCALE; i++) {
		nvmpf_config c;
		nvmpf_config_init(&c);
		c.log = nvmpf_log_discard;
		c.scheme = (nvmpf_scheme)(rnd(&seed) % 5);
		if (c.scheme == NVMPF_SCHEME_CPUS) {
			c.cpus = cpus;
			c.ncpus = 1 + (unsigned int)(rnd(&seed) % 3);
		} else if (c.scheme == NVMPF_SCHEME_M3 && (rnd(&seed) & 1)) {
			c.cpus = cpus + 1; /* {1, 0} */
			c.ncpus = 2;
		} else if (c.scheme != NVMPF_SCHEME_M3) {
			c.nhelpers = (unsigned int)(rnd(&seed) % 4);
		}
		const uint64_t spins[] = { 0, 1000, 50000 };
		c.spin_ns = spins[rnd(&seed) % 3];
		c.queue_len = 1 + (unsigned int)(rnd(&seed) % 100);
		nvmpf_pool *p = NULL;
		int rc = nvmpf_create(&c, &p);
		CHECK_EQ(rc, NVMPF_OK);
		if (rc)
			return;
		int n = (int)(rnd(&seed) % 200);
		for (int j = 0; j < n; j++) {
			unsigned char *a;
			size_t l;
			job_of((uint64_t)j, &a, &l);
			nvmpf_enqueue(p, a, l);
		}
		if (rnd(&seed) % 3 == 0) {
			int drc = nvmpf_drain(p, 5000000000ll);
			CHECK_EQ(drc, NVMPF_OK);
			if (drc != NVMPF_OK) {
				nvmpf_destroy(p);
				return;
			}
			nvmpf_stats st;
			nvmpf_get_stats(p, &st);
			CHECK_EQ(st.jobs_done, st.enqueued);
			CHECK_EQ(st.enqueued + st.dropped, (uint64_t)n);
		}
		nvmpf_destroy(p); /* often with jobs pending */
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	sched_getaffinity(0, sizeof orig_affinity, &orig_affinity);
	void *b = NULL;
	if (posix_memalign(&b, 4096, BUF_SIZE) != 0)
		return 1;
	buf = b;
	memset(buf, 3, BUF_SIZE);
	RUN(test_spmc_lossless_exactly_once);
	RUN(test_spmc_lossy_sleepy);
	RUN(test_ring_index_wraparound);
	RUN(test_m3_tandem_stream);
	RUN(test_sleep_wake_bursts);
	RUN(test_retire_while_streaming);
	RUN(test_create_destroy_cycles);
	free(buf);
	return t_finish();
}
