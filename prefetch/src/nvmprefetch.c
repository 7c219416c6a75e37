/*
 * nvmprefetch.c - helper-thread prefetching pool: job queues, helper
 * threads, sleep/wake protocol, statistics and the public API.
 *
 * Data flow: the owner (computation) thread enqueues (addr, len) jobs into
 * q1, a bounded single-producer/multi-consumer ck_ring whose consumers
 * claim slots with compare-and-swap.  First-stage helpers dequeue, take the
 * page faults (one load per page) and prefetch every cache line.  Under M3
 * the first-stage helper then enqueues the same job into q2, a
 * single-producer/single-consumer ck_ring read by the second-stage helper on
 * the computation thread's SMT sibling, which only prefetches.
 *
 * Sleep/wake protocol (per queue): an idle helper polls its queue for
 * spin_ns (yielding the CPU every few microseconds, in case the producer
 * runs on the same CPU), then sets its bit in queue->sleep_mask, re-checks the queue and
 * sleeps on its own futex word.  A producer, after publishing a job, issues
 * a full fence and reads sleep_mask; only if a bit is set does it claim that
 * helper (atomically clearing the bit), set the helper's futex word and make
 * the FUTEX_WAKE system call.  The two fences (helper: bit set then queue
 * read; producer: queue write then mask read) guarantee that either the
 * helper sees the job or the producer sees the helper asleep.  So enqueue
 * makes no system call while helpers are awake, and a sleeping helper is
 * woken by exactly one system call.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define DEFAULT_QUEUE_LEN 1023u
#define MAX_QUEUE_LEN ((1u << 24) - 1)
#define DEFAULT_SPIN_NS 50000u
#define STOP_CHECK_PAGES 256u     /* a job checks for destroy this often */
#define STALE_CHECK_PAGES 1u      /* ... and for retirement this often */
#define POPULATE_CHUNK (1u << 20) /* bytes per madvise call */
#define HELPER_STACK (256u * 1024u) /* > NVMPF_HOOK_STACK + the helper's own */

/* ------------------------------------------------------------------ */
/* Small utilities                                                      */
/* ------------------------------------------------------------------ */

/* Monotonic wall clock in ns (vDSO, no system call). */
static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread in ns (CLOCK_THREAD_CPUTIME_ID). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Increment a counter that has a single writer: plain load + store (no
 * locked instruction), atomic so that readers on other threads are safe. */
static inline void counter_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static inline uint64_t load_relaxed(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

/* Full memory barrier ordering our earlier stores before later loads (the
 * Dekker half of the sleep/wake protocol). */
static inline void full_fence(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}

/* Spin-wait hint to the CPU (PAUSE on x86, YIELD on arm64). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Block on *word while it equals val (private futex). */
static void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL,
		NULL, 0);
}

/* Wake up to n threads blocked on *word. */
static void futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL,
		0);
}

/* splitmix64 finaliser of (addr, len): order-independent job fingerprint
 * term used by the stress tests to check exactly-once processing. */
uint64_t nvmpf_internal_job_hash(uintptr_t addr, size_t len)
{
	uint64_t z = (uint64_t)addr ^ ((uint64_t)len * 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------------ */
/* Queues (ck_ring wrappers)                                            */
/* ------------------------------------------------------------------ */

/* Allocate a queue holding at least len jobs (slots = next power of two
 * above len; ck_ring keeps one slot free). */
static int queue_init(struct nvmpf_queue *q, unsigned int len, bool spsc)
{
	unsigned int slots = 2;
	while (slots - 1 < len)
		slots <<= 1;
	void *buf = NULL;
	if (posix_memalign(&buf, NVMPF_CACHELINE,
			   (size_t)slots * sizeof(struct nvmpf_job)) != 0)
		return NVMPF_ENOMEM;
	memset(buf, 0, (size_t)slots * sizeof(struct nvmpf_job));
	q->buf = buf;
	q->capacity = slots - 1;
	q->spsc = spsc;
	ck_ring_init(&q->ring, slots);
	atomic_init(&q->sleep_mask, 0);
	return NVMPF_OK;
}

/* Publish one job (single producer).  false if the queue is full. */
static inline bool queue_put(struct nvmpf_queue *q, struct nvmpf_job *job)
{
	bool ok;
#ifdef NVMPF_TSAN
	__tsan_release(q);
	AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
	if (q->spsc)
		ok = ck_ring_enqueue_spsc_nvmpf_job(&q->ring, q->buf, job);
	else
		ok = ck_ring_enqueue_spmc_nvmpf_job(&q->ring, q->buf, job);
#ifdef NVMPF_TSAN
	AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
	return ok;
}

/* Take one job (any consumer; CAS-claimed on the SPMC queue).  false if
 * the queue was empty. */
static inline bool queue_get(struct nvmpf_queue *q, struct nvmpf_job *job)
{
	bool ok;
#ifdef NVMPF_TSAN
	AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
	if (q->spsc)
		ok = ck_ring_dequeue_spsc_nvmpf_job(&q->ring, q->buf, job);
	else
		ok = ck_ring_dequeue_spmc_nvmpf_job(&q->ring, q->buf, job);
#ifdef NVMPF_TSAN
	AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
	if (ok)
		__tsan_acquire(q);
#endif
	return ok;
}

/* Non-blocking emptiness test used while spinning/before sleeping. */
static inline bool queue_nonempty(struct nvmpf_queue *q)
{
	return ck_ring_size(&q->ring) != 0;
}

/*
 * Wake one sleeping consumer of q, given a non-zero snapshot of its sleep
 * mask: claim a sleeper by clearing its bit (only the claimer wakes it), set
 * its futex word and wake it.  Returns true if a wake system call was made.
 */
static bool wake_one(struct nvmpf_queue *q, uint64_t mask)
{
	while (mask) {
		unsigned int b = (unsigned int)__builtin_ctzll(mask);
		uint64_t bit = 1ull << b;
		uint64_t old = atomic_fetch_and(&q->sleep_mask, ~bit);
		if (old & bit) {
			struct nvmpf_helper *h = q->consumers[b];
			atomic_store_explicit(&h->futex, 1, memory_order_release);
			futex_wake(&h->futex, 1);
			return true;
		}
		mask = old & ~bit;
	}
	return false;
}

/* Wake every consumer of q regardless of its sleep bit (destroy/resume). */
static void wake_all(struct nvmpf_queue *q)
{
	for (unsigned int i = 0; i < q->nconsumers; i++) {
		struct nvmpf_helper *h = q->consumers[i];
		atomic_fetch_and(&q->sleep_mask, ~h->bit);
		atomic_store_explicit(&h->futex, 1, memory_order_release);
		futex_wake(&h->futex, 1);
	}
}

/* ------------------------------------------------------------------ */
/* Helper threads                                                       */
/* ------------------------------------------------------------------ */

/* Load one byte at addr for real (takes the page fault).  Inline assembly
 * so the compiler cannot drop it and ThreadSanitizer does not track a read
 * of the host's memory that may legitimately race with host writes. */
static inline void touch_byte(uintptr_t addr)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned char v;
	__asm__ __volatile__("movb (%1), %0" : "=q"(v) : "r"(addr));
	(void)v;
#elif defined(__aarch64__)
	uint32_t v;
	__asm__ __volatile__("ldrb %w0, [%1]" : "=r"(v) : "r"(addr));
	(void)v;
#else
	(void)*(const volatile unsigned char *)addr;
#endif
}

#define PREFETCH_LOOP(LOC)                                                 \
	for (uintptr_t a = s; a < e; a += line)                            \
		__builtin_prefetch((const void *)a, 0, LOC)

/* Prefetch every cache line overlapping [s, e) with hint loc; returns the
 * number of lines.  __builtin_prefetch needs a constant hint, hence four
 * loops. */
static uint64_t prefetch_range(uintptr_t s, uintptr_t e, size_t line, int loc)
{
	if (s >= e)
		return 0;
	s &= ~(uintptr_t)(line - 1);
	uint64_t n = (e - s + line - 1) / line;
	switch (loc) {
	case 0: PREFETCH_LOOP(0); break;
	case 1: PREFETCH_LOOP(1); break;
	case 2: PREFETCH_LOOP(2); break;
	default: PREFETCH_LOOP(3); break;
	}
	return n;
}

/* Has the owner retired this job (nvmpf_retire) since it was queued? */
static inline bool is_stale(struct nvmpf_pool *p, const struct nvmpf_job *job)
{
	return job->seq < atomic_load_explicit(&p->retired, memory_order_relaxed);
}

/*
 * Process one job on a helper: stage 1 takes the faults (loads or
 * MADV_POPULATE_READ) and/or prefetches page by page; stage 2 only
 * prefetches.  Abandons the job early if the pool is being destroyed.
 */
static void run_job(struct nvmpf_helper *h, const struct nvmpf_job *job)
{
	struct nvmpf_pool *p = h->pool;
	const uintptr_t s = job->addr, e = job->addr + job->len;
	const size_t ps = p->page_size, ls = p->line_size;
	uint64_t pages = 0, lines = 0, errors = 0;
	bool cut = is_stale(p, job);

	/* The host's hook first: it may bring the range in, or drop the job. */
	bool hooked = false;
	if (!cut && p->job_hook && h->stage == 1 &&
	    !atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		int r = p->job_hook(p->job_arg, (const void *)s, job->len,
				    job->seq);
		if (r == NVMPF_HOOK_SKIP) {
			cut = true;
		} else if (r == NVMPF_HOOK_DONE) {
			hooked = true;
			pages = ((e + ps - 1) & ~(uintptr_t)(ps - 1)) / ps -
				(s & ~(uintptr_t)(ps - 1)) / ps;
		}
	}

	if (cut || hooked) {
		/* retired before we started, or done by the hook */
	} else if (h->stage == 2) {
		lines = prefetch_range(s, e, ls, p->stage2_locality);
	} else if (p->mode & NVMPF_MODE_POPULATE) {
		uintptr_t a = s & ~(uintptr_t)(ps - 1);
		const uintptr_t pe = e;
		while (a < pe) {
			size_t chunk = POPULATE_CHUNK > ps ? POPULATE_CHUNK : ps;
			uintptr_t b = (pe - a > chunk) ? a + chunk : pe;
			size_t mlen = ((b - a) + ps - 1) & ~(ps - 1);
			if (madvise((void *)a, mlen, MADV_POPULATE_READ) != 0) {
				errors++;
				break;
			}
			pages += mlen / ps;
			if (p->mode & NVMPF_MODE_PREFETCH)
				lines += prefetch_range(a < s ? s : a, b, ls,
							p->locality);
			a = b;
			if (atomic_load_explicit(&p->stop, memory_order_relaxed))
				break;
			if (is_stale(p, job)) {
				cut = true;
				break;
			}
		}
	} else {
		const bool fault = p->mode & NVMPF_MODE_FAULT;
		const bool pf = p->mode & NVMPF_MODE_PREFETCH;
		uintptr_t a = s;
		for (unsigned int n = 1; a < e; n++) {
			uintptr_t next = (a & ~(uintptr_t)(ps - 1)) + ps;
			uintptr_t b = (next < e && next > a) ? next : e;
			if (fault) {
				touch_byte(a);
				pages++;
			}
			if (pf)
				lines += prefetch_range(a, b, ls, p->locality);
			a = b;
			if ((n % STALE_CHECK_PAGES) == 0 && a < e) {
				if (is_stale(p, job)) {
					cut = true;
					break;
				}
				if ((n % STOP_CHECK_PAGES) == 0 &&
				    atomic_load_explicit(&p->stop,
							 memory_order_relaxed))
					break;
			}
		}
	}

	/* M3 hand-off: same job to the stage-2 helper; dropped if full. */
	if (h->out && !cut) {
		struct nvmpf_job j2 = *job;
		if (queue_put(h->out, &j2)) {
			counter_add(&h->handoff_fp,
				    nvmpf_internal_job_hash(s, job->len));
			counter_add(&h->handoff_ok, 1);
			full_fence();
			uint64_t m = atomic_load_explicit(&h->out->sleep_mask,
							  memory_order_relaxed);
			if (m && wake_one(h->out, m))
				counter_add(&h->wake_calls, 1);
		} else {
			counter_add(&h->handoff_dropped, 1);
		}
	}

	if (!cut)
		counter_add(&h->bytes, job->len);
	counter_add(&h->pages, pages);
	counter_add(&h->lines, lines);
	counter_add(&h->fault_errors, errors);
	/* One clock read per job: the job began when the previous one ended
	 * or when the helper left idle (h->t_active). */
	uint64_t t1 = now_ns();
	counter_add(&h->busy_ns, t1 - h->t_active);
	h->t_active = t1;
	counter_add(&h->fingerprint, nvmpf_internal_job_hash(s, job->len));
	/* Last: nvmpf_drain() acquires this, then reads handoff_ok. */
	_Atomic uint64_t *done = cut ? &h->skipped : &h->jobs;
	atomic_store_explicit(done, load_relaxed(done) + 1, memory_order_release);
}

/* Test hook state: is this helper's stage paused? */
static inline bool is_paused(const struct nvmpf_helper *h)
{
	return (atomic_load_explicit(&h->pool->paused, memory_order_acquire) >>
		(h->stage - 1)) & 1;
}

/* True if the helper should look at its queue again (work or shutdown). */
static inline bool has_work(struct nvmpf_helper *h)
{
	struct nvmpf_pool *p = h->pool;
	if (atomic_load_explicit(&p->stop, memory_order_relaxed))
		return true;
	return !is_paused(h) && queue_nonempty(h->in);
}

/*
 * Idle phase of a helper: poll for spin_ns (cheap reaction to a steady job
 * stream, no system calls on either side), then announce sleep in the
 * queue's mask, re-check, and block on the helper's futex until a producer
 * claims it.  Returns when there may be work or the pool is stopping.
 */
static void helper_idle(struct nvmpf_helper *h)
{
	struct nvmpf_pool *p = h->pool;
	if (p->spin_ns) {
		uint64_t end = now_ns() + p->spin_ns;
		for (unsigned int i = 1;; i++) {
			if (has_work(h))
				return;
			cpu_relax();
			if ((i % 64) == 0) {
				if (now_ns() >= end)
					break;
				/* If the producer shares our CPU (unpinned or
				 * explicit placement), let it run: without this
				 * the spin would delay the very enqueue it is
				 * waiting for by a whole spin period. */
				sched_yield();
			}
		}
	}
	atomic_store_explicit(&h->cpu_ns, thread_cpu_ns(), memory_order_relaxed);

	atomic_store_explicit(&h->futex, 0, memory_order_relaxed);
	atomic_fetch_or(&h->in->sleep_mask, h->bit);
	full_fence();
	if (has_work(h)) {
		atomic_fetch_and(&h->in->sleep_mask, ~h->bit);
		return;
	}
	counter_add(&h->sleeps, 1);
	futex_wait(&h->futex, 0);
	/* Normally a producer cleared our bit when it claimed us; clear it
	 * ourselves after a spurious wake-up. */
	atomic_fetch_and(&h->in->sleep_mask, ~h->bit);
}

/* Thread body of a helper: block signals, then dequeue and process jobs,
 * idling in between, until the pool stops. */
static void *helper_main(void *arg)
{
	struct nvmpf_helper *h = arg;
	struct nvmpf_pool *p = h->pool;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	atomic_store_explicit(&h->tid, (pid_t)syscall(SYS_gettid),
			      memory_order_relaxed);
	atomic_store_explicit(&h->started, 1, memory_order_release);

	struct nvmpf_job job;
	h->t_active = now_ns();
	for (;;) {
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		if (!is_paused(h) && queue_get(h->in, &job)) {
			run_job(h, &job);
			continue;
		}
		helper_idle(h);
		h->t_active = now_ns();
	}
	atomic_store_explicit(&h->cpu_ns, thread_cpu_ns(), memory_order_relaxed);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Public API                                                           */
/* ------------------------------------------------------------------ */

void nvmpf_log_discard(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* Default log sink: one write(2) of "msg\n" to stderr (no stdio). */
static void log_stderr(void *arg, const char *msg)
{
	(void)arg;
	struct iovec iov[2] = {
		{ .iov_base = (void *)msg, .iov_len = strlen(msg) },
		{ .iov_base = (void *)"\n", .iov_len = 1 },
	};
	ssize_t r = writev(STDERR_FILENO, iov, 2);
	(void)r;
}

void nvmpf_config_init(nvmpf_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof *cfg);
	cfg->scheme = NVMPF_SCHEME_M1;
	cfg->queue_len = DEFAULT_QUEUE_LEN;
	cfg->mode = NVMPF_MODE_BOTH;
	cfg->locality = 3;
	cfg->stage2_locality = 3;
	cfg->spin_ns = DEFAULT_SPIN_NS;
}

const char *nvmpf_strerror(int err)
{
	switch (err) {
	case NVMPF_OK: return "success";
	case NVMPF_EINVAL: return "invalid argument";
	case NVMPF_ENOMEM: return "out of memory";
	case NVMPF_EFULL: return "queue full, job dropped";
	case NVMPF_ETIMEDOUT: return "timed out";
	case NVMPF_ETHREAD: return "cannot create helper thread";
	case NVMPF_ENOTOWNER: return "caller is not the pool's owner thread";
	case NVMPF_EFORKED: return "pool belongs to the parent process";
	default: return "unknown error";
	}
}

/* Check a configuration; NVMPF_OK or NVMPF_EINVAL. */
static int validate_config(const nvmpf_config *c)
{
	if (c->scheme < NVMPF_SCHEME_NONE || c->scheme > NVMPF_SCHEME_CPUS)
		return NVMPF_EINVAL;
	if (c->nhelpers > NVMPF_MAX_HELPERS)
		return NVMPF_EINVAL;
	if (c->scheme == NVMPF_SCHEME_M3 && c->nhelpers != 0 && c->nhelpers != 2)
		return NVMPF_EINVAL;
	if (c->queue_len > MAX_QUEUE_LEN)
		return NVMPF_EINVAL;
	const unsigned int known = NVMPF_MODE_FAULT | NVMPF_MODE_PREFETCH |
				   NVMPF_MODE_POPULATE;
	if (c->mode == 0 || (c->mode & ~known) ||
	    ((c->mode & NVMPF_MODE_FAULT) && (c->mode & NVMPF_MODE_POPULATE)))
		return NVMPF_EINVAL;
	if (c->locality < 0 || c->locality > 3 || c->stage2_locality < 0 ||
	    c->stage2_locality > 3)
		return NVMPF_EINVAL;
	if (c->flags & ~(unsigned int)NVMPF_FLAG_PIN_CALLER)
		return NVMPF_EINVAL;
	if (c->page_size && (c->page_size < 64 ||
			     (c->page_size & (c->page_size - 1))))
		return NVMPF_EINVAL;
	if (c->ncpus && !c->cpus)
		return NVMPF_EINVAL;
	if (c->scheme == NVMPF_SCHEME_CPUS &&
	    (c->ncpus == 0 || c->ncpus > 4 * NVMPF_MAX_HELPERS))
		return NVMPF_EINVAL;
	if (c->scheme == NVMPF_SCHEME_M3 && c->ncpus != 0 && c->ncpus != 2)
		return NVMPF_EINVAL;
	if ((c->scheme == NVMPF_SCHEME_M1 || c->scheme == NVMPF_SCHEME_M2 ||
	     c->scheme == NVMPF_SCHEME_NONE) && c->ncpus != 0)
		return NVMPF_EINVAL;
	for (unsigned int i = 0; i < c->ncpus; i++)
		if (c->cpus[i] < 0 || c->cpus[i] >= CPU_SETSIZE)
			return NVMPF_EINVAL;
	return NVMPF_OK;
}

/* Free a pool's memory (threads already joined or nonexistent). */
static void pool_free(struct nvmpf_pool *p)
{
	free(p->q1.buf);
	free(p->q2.buf);
	free(p->helpers);
	free(p);
}

/* Stop, wake and join the helpers that were started. */
static void stop_helpers(struct nvmpf_pool *p)
{
	atomic_store(&p->stop, 1);
	wake_all(&p->q1);
	if (p->has_stage2)
		wake_all(&p->q2);
	for (unsigned int i = 0; i < p->nhelpers; i++) {
		if (p->helpers[i].joinable) {
			pthread_join(p->helpers[i].thread, NULL);
			p->helpers[i].joinable = false;
		}
	}
}

/*
 * Start helper i pinned to its CPU (or unpinned), with a small stack.  If
 * the kernel refuses the affinity (e.g. a cpuset changed under us), start
 * it unpinned and record NVMPF_FB_PIN_FAILED.  Signals are already blocked
 * in the creating thread, so the helper inherits a full mask from birth.
 */
static int start_helper(struct nvmpf_pool *p, struct nvmpf_helper *h)
{
	pthread_attr_t attr;
	if (pthread_attr_init(&attr) != 0)
		return NVMPF_ETHREAD;
	pthread_attr_setstacksize(&attr, HELPER_STACK > PTHREAD_STACK_MIN ?
					  HELPER_STACK : PTHREAD_STACK_MIN);
	if (h->cpu >= 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(h->cpu, &one);
		pthread_attr_setaffinity_np(&attr, sizeof one, &one);
	}
	int rc = pthread_create(&h->thread, &attr, helper_main, h);
	if (rc != 0 && h->cpu >= 0) {
		pthread_attr_destroy(&attr);
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, HELPER_STACK > PTHREAD_STACK_MIN ?
						  HELPER_STACK : PTHREAD_STACK_MIN);
		rc = pthread_create(&h->thread, &attr, helper_main, h);
		if (rc == 0) {
			p->info.fallback |= NVMPF_FB_PIN_FAILED;
			h->cpu = -1;
		}
	}
	pthread_attr_destroy(&attr);
	if (rc != 0)
		return NVMPF_ETHREAD;
	h->joinable = true;
	char name[16];
	snprintf(name, sizeof name, "nvmpf-h%u", h->index);
	pthread_setname_np(h->thread, name);
	return NVMPF_OK;
}

/*
 * Public: validate cfg, read the caller's affinity and home CPU, place the
 * helpers (topology.c), allocate the queues, start the helpers with all
 * signals blocked, wait until they run, optionally pin the caller, and log
 * the fallback message (once) if the scheme was not honoured.
 */
int nvmpf_create(const nvmpf_config *cfg_in, nvmpf_pool **out)
{
	if (!out)
		return NVMPF_EINVAL;
	*out = NULL;
	nvmpf_config cfg;
	if (cfg_in)
		cfg = *cfg_in;
	else
		nvmpf_config_init(&cfg);
	int rc = validate_config(&cfg);
	if (rc)
		return rc;

	struct nvmpf_pool *p = NULL;
	if (posix_memalign((void **)&p, 2 * NVMPF_CACHELINE, sizeof *p) != 0)
		return NVMPF_ENOMEM;
	memset(p, 0, sizeof *p);
	p->owner = pthread_self();
	p->pid = getpid();
	p->mode = cfg.mode;
	p->locality = cfg.locality;
	p->stage2_locality = cfg.stage2_locality;
	p->spin_ns = cfg.spin_ns;
	p->job_hook = cfg.job_hook;
	p->job_arg = cfg.job_arg;
	long sys_ps = sysconf(_SC_PAGESIZE);
	p->page_size = cfg.page_size ? cfg.page_size :
				       (size_t)(sys_ps > 0 ? sys_ps : 4096);
	long ls = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
	p->line_size = (ls >= 16 && ls <= 1024 && !(ls & (ls - 1))) ?
			       (size_t)ls : NVMPF_CACHELINE;

	/* Where may the caller run, and where does it run now? */
	nvmpf_caller_affinity(&p->allowed);
	int pinned = 0;
	int home = nvmpf_home_cpu(&p->allowed, &pinned);

	struct nvmpf_placement pl;
	rc = nvmpf_place(&cfg, &p->allowed, home, &pl);
	if (rc) {
		pool_free(p);
		return rc;
	}
	p->nhelpers = pl.nhelpers;
	p->info.requested = cfg.scheme;
	p->info.effective = pl.effective;
	p->info.fallback = pl.fallback;
	p->info.nhelpers = pl.nhelpers;
	p->info.caller_cpu = pl.caller_cpu;
	p->info.smt_siblings = pl.smt_siblings;
	p->info.cpus_allowed = pl.cpus_allowed;
	p->info.page_size = p->page_size;

	unsigned int qlen = cfg.queue_len ? cfg.queue_len : DEFAULT_QUEUE_LEN;
	p->has_stage2 = pl.effective == NVMPF_SCHEME_M3;
	if (queue_init(&p->q1, qlen, false) != 0 ||
	    (p->has_stage2 && queue_init(&p->q2, qlen, true) != 0) ||
	    posix_memalign((void **)&p->helpers, 2 * NVMPF_CACHELINE,
			   sizeof(struct nvmpf_helper) * p->nhelpers) != 0) {
		p->helpers = NULL;
		pool_free(p);
		return NVMPF_ENOMEM;
	}
	memset(p->helpers, 0, sizeof(struct nvmpf_helper) * p->nhelpers);
	p->info.queue_len = p->q1.capacity;
	p->info.stage2_queue_len = p->has_stage2 ? p->q2.capacity : 0;

	for (unsigned int i = 0; i < p->nhelpers; i++) {
		struct nvmpf_helper *h = &p->helpers[i];
		h->pool = p;
		h->index = i;
		h->cpu = pl.cpu[i];
		h->stage = (unsigned int)pl.stage[i];
		struct nvmpf_queue *q = h->stage == 2 ? &p->q2 : &p->q1;
		h->in = q;
		h->out = (p->has_stage2 && h->stage == 1) ? &p->q2 : NULL;
		h->bit = 1ull << q->nconsumers;
		q->consumers[q->nconsumers++] = h;
	}

	/* Start helpers with every signal blocked (inherited mask). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned int i = 0; i < p->nhelpers; i++) {
		rc = start_helper(p, &p->helpers[i]);
		if (rc)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		stop_helpers(p);
		pool_free(p);
		return rc;
	}

	/* Wait until every helper runs (so tids and affinity are final). */
	for (unsigned int i = 0; i < p->nhelpers; i++) {
		while (!atomic_load_explicit(&p->helpers[i].started,
					     memory_order_acquire)) {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
		p->info.helper_cpu[i] = p->helpers[i].cpu;
		p->info.helper_stage[i] = (int)p->helpers[i].stage;
		p->info.helper_tid[i] = atomic_load_explicit(
			&p->helpers[i].tid, memory_order_relaxed);
	}

	/* Pin the caller last, so unpinned helpers keep its original mask. */
	if ((cfg.flags & NVMPF_FLAG_PIN_CALLER) && !pinned && home >= 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(home, &one);
		if (sched_setaffinity(0, sizeof one, &one) == 0) {
			p->caller_orig_affinity = p->allowed;
			p->restore_affinity = true;
			pinned = 1;
		}
	}
	p->info.caller_pinned = pinned;

	/* One message, once, if the scheme was not honoured as asked. */
	char msg[sizeof p->info.message];
	snprintf(msg, sizeof msg, "%s", pl.message);
	if (p->info.fallback & NVMPF_FB_PIN_FAILED) {
		size_t l = strlen(msg);
		snprintf(msg + l, sizeof msg - l, "%snvmprefetch: setting a "
			 "helper's CPU affinity failed; it runs unpinned",
			 l ? "; " : "");
	}
	if (msg[0]) {
		memcpy(p->info.message, msg, sizeof msg);
		(cfg.log ? cfg.log : log_stderr)(cfg.log_arg, msg);
	}
	*out = p;
	return NVMPF_OK;
}

/* Public: nvmpf_enqueue_seq without the sequence number. */
int nvmpf_enqueue(nvmpf_pool *p, const void *addr, size_t len)
{
	return nvmpf_enqueue_seq(p, addr, len, NULL);
}

/* Public: raise the retirement horizon (owner only; one relaxed store, read
 * by helpers before each job and each page). */
int nvmpf_retire(nvmpf_pool *p, uint64_t seq)
{
	if (!p)
		return NVMPF_EINVAL;
	if (!pthread_equal(pthread_self(), p->owner))
		return NVMPF_ENOTOWNER;
	if (seq > load_relaxed(&p->retired))
		atomic_store_explicit(&p->retired, seq, memory_order_relaxed);
	return NVMPF_OK;
}

/*
 * Public hot path: check arguments and owner, publish the job in q1
 * (lock-free, no allocation), count it, then one fence and a read of the
 * sleep mask; a system call only if a helper sleeps.
 */
int nvmpf_enqueue_seq(nvmpf_pool *p, const void *addr, size_t len,
		      uint64_t *seq_out)
{
	if (NVMPF_UNLIKELY(!p || !addr || len == 0 ||
			   (uintptr_t)addr + len < (uintptr_t)addr))
		return NVMPF_EINVAL;
	if (NVMPF_UNLIKELY(!pthread_equal(pthread_self(), p->owner)))
		return NVMPF_ENOTOWNER;
	uint64_t seq = load_relaxed(&p->enqueued);
	struct nvmpf_job job = { (uintptr_t)addr, len, seq };
	if (NVMPF_UNLIKELY(!queue_put(&p->q1, &job))) {
		counter_add(&p->dropped, 1);
		return NVMPF_EFULL;
	}
	atomic_store_explicit(&p->enqueued, seq + 1, memory_order_relaxed);
	if (seq_out)
		*seq_out = seq;
	/* Job visible before we look for sleepers (pairs with helper_idle). */
	full_fence();
	uint64_t m = atomic_load_explicit(&p->q1.sleep_mask,
					  memory_order_relaxed);
	if (NVMPF_UNLIKELY(m != 0) && wake_one(&p->q1, m))
		counter_add(&p->wake_calls, 1);
	return NVMPF_OK;
}

/* True when every accepted job is complete (both stages for M3). */
static bool drained(const struct nvmpf_pool *p)
{
	uint64_t target = load_relaxed(&p->enqueued);
	uint64_t done1 = 0, handed = 0, done2 = 0;
	for (unsigned int i = 0; i < p->nhelpers; i++) {
		const struct nvmpf_helper *h = &p->helpers[i];
		uint64_t j = atomic_load_explicit(&h->jobs, memory_order_acquire) +
			     atomic_load_explicit(&h->skipped, memory_order_acquire);
		if (h->stage == 1) {
			done1 += j;
			handed += load_relaxed(&h->handoff_ok);
		} else {
			done2 += j;
		}
	}
	return done1 >= target && done2 >= handed;
}

/* Public: poll drained() with back-off (spin, yield, 50 us sleeps) until
 * done or timed out.  Helpers are not slowed down by a waiting drainer. */
int nvmpf_drain(nvmpf_pool *p, int64_t timeout_ns)
{
	if (!p)
		return NVMPF_EINVAL;
	if (getpid() != p->pid)
		return NVMPF_EFORKED;
	uint64_t start = now_ns();
	for (unsigned int i = 0;; i++) {
		if (drained(p))
			return NVMPF_OK;
		if (timeout_ns >= 0 && now_ns() - start >= (uint64_t)timeout_ns)
			return NVMPF_ETIMEDOUT;
		if (i < 200) {
			cpu_relax();
		} else if (i < 400) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 50000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* Public: sum the single-writer counters of the pool and its helpers. */
int nvmpf_get_stats(const nvmpf_pool *p, nvmpf_stats *st)
{
	if (!p || !st)
		return NVMPF_EINVAL;
	memset(st, 0, sizeof *st);
	st->enqueued = load_relaxed(&p->enqueued);
	st->dropped = load_relaxed(&p->dropped);
	st->wake_calls = load_relaxed(&p->wake_calls);
	st->nhelpers = p->nhelpers;
	bool live = getpid() == p->pid;
	for (unsigned int i = 0; i < p->nhelpers; i++) {
		const struct nvmpf_helper *h = &p->helpers[i];
		nvmpf_helper_stats *hs = &st->helper[i];
		hs->jobs = atomic_load_explicit(&h->jobs, memory_order_acquire);
		hs->skipped = atomic_load_explicit(&h->skipped, memory_order_acquire);
		hs->bytes = load_relaxed(&h->bytes);
		hs->pages = load_relaxed(&h->pages);
		hs->lines = load_relaxed(&h->lines);
		hs->busy_ns = load_relaxed(&h->busy_ns);
		hs->sleeps = load_relaxed(&h->sleeps);
		hs->cpu_ns = load_relaxed(&h->cpu_ns);
		/* Live helper: read its CPU clock now (same clock as its own
		 * CLOCK_THREAD_CPUTIME_ID, but current, not last published). */
		clockid_t cid;
		struct timespec ts;
		if (live && h->joinable &&
		    pthread_getcpuclockid(h->thread, &cid) == 0 &&
		    clock_gettime(cid, &ts) == 0)
			hs->cpu_ns = (uint64_t)ts.tv_sec * 1000000000u +
				     (uint64_t)ts.tv_nsec;
		st->jobs_skipped += hs->skipped;
		if (h->stage == 1) {
			st->jobs_done += hs->jobs;
			st->bytes_done += hs->bytes;
			st->handoff_enqueued += load_relaxed(&h->handoff_ok);
			st->handoff_dropped += load_relaxed(&h->handoff_dropped);
		} else {
			st->stage2_jobs_done += hs->jobs;
		}
		st->pages_touched += hs->pages;
		st->lines_prefetched += hs->lines;
		st->fault_errors += load_relaxed(&h->fault_errors);
		st->wake_calls += load_relaxed(&h->wake_calls);
		st->helper_sleeps += hs->sleeps;
		st->helper_busy_ns += hs->busy_ns;
		st->helper_cpu_ns += hs->cpu_ns;
	}
	return NVMPF_OK;
}

int nvmpf_get_info(const nvmpf_pool *p, nvmpf_info *info)
{
	if (!p || !info)
		return NVMPF_EINVAL;
	*info = p->info;
	return NVMPF_OK;
}

/* Public: stop and join helpers (unless in a forked child, where they do
 * not exist), restore the caller's affinity if we pinned it, free. */
void nvmpf_destroy(nvmpf_pool *p)
{
	if (!p)
		return;
	if (getpid() == p->pid) {
		stop_helpers(p);
		if (p->restore_affinity && pthread_equal(pthread_self(), p->owner))
			sched_setaffinity(0, sizeof p->caller_orig_affinity,
					  &p->caller_orig_affinity);
	}
	/* else: forked child; the helpers exist only in the parent. */
	pool_free(p);
}

/* ------------------------------------------------------------------ */
/* Test hooks                                                           */
/* ------------------------------------------------------------------ */

void nvmpf_internal_set_paused(nvmpf_pool *p, int stages)
{
	atomic_store(&p->paused, stages & 3);
	if (stages != 3) {
		wake_all(&p->q1);
		if (p->has_stage2)
			wake_all(&p->q2);
	}
}

void nvmpf_internal_preset_ring(nvmpf_pool *p, unsigned int v)
{
	struct nvmpf_queue *qs[2] = { &p->q1, p->has_stage2 ? &p->q2 : NULL };
	for (int i = 0; i < 2; i++) {
		if (!qs[i])
			continue;
		ck_pr_store_uint(&qs[i]->ring.c_head, v);
		ck_pr_store_uint(&qs[i]->ring.p_head, v);
		ck_pr_store_uint(&qs[i]->ring.p_tail, v);
	}
	ck_pr_fence_memory();
}

uint64_t nvmpf_internal_fingerprint(const nvmpf_pool *p, int stage)
{
	uint64_t f = 0;
	for (unsigned int i = 0; i < p->nhelpers; i++) {
		const struct nvmpf_helper *h = &p->helpers[i];
		uint64_t jobs = atomic_load_explicit(&h->jobs,
						     memory_order_acquire);
		(void)jobs; /* orders the loads below after the job count */
		if (stage == 3 && h->stage == 1)
			f += load_relaxed(&h->handoff_fp);
		else if ((int)h->stage == stage)
			f += load_relaxed(&h->fingerprint);
	}
	return f;
}
