/*
 * internal.h - private data structures of the pool (nvmprefetch.c): the job
 * queue (a Concurrency Kit ck_ring with ThreadSanitizer annotations), helper
 * and pool state, and test-only hooks.  Includes the placement interface
 * (topology.h) and the vocabulary (mapping.h) below it.
 *
 * Not installed.  The test programs link the static library and may use the
 * nvmpf_internal_* functions declared at the end.
 */
#ifndef NVMPF_INTERNAL_H
#define NVMPF_INTERNAL_H

#include "topology.h"

#include <ck_ring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define NVMPF_CACHELINE 64
#define NVMPF_ALIGN __attribute__((aligned(2 * NVMPF_CACHELINE)))
#define NVMPF_LIKELY(x) __builtin_expect(!!(x), 1)
#define NVMPF_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* A job: the range to prefetch and its sequence number (order of
 * acceptance by nvmpf_enqueue, for nvmpf_retire).  Stored by value in the
 * ring (24 bytes). */
struct nvmpf_job {
	uintptr_t addr;
	size_t len;
	uint64_t seq;
};

/* Typed ck_ring operations on struct nvmpf_job (ck_ring_*_spmc_nvmpf_job,
 * ck_ring_*_spsc_nvmpf_job). */
CK_RING_PROTOTYPE(nvmpf_job, nvmpf_job)

/*
 * ThreadSanitizer cannot see ck_pr's inline-assembly atomics, so it reports
 * the ring's slot copies as races (measured: see README "Why ck_ring").
 * Under -fsanitize=thread we tell it what ck_ring guarantees: everything the
 * producer did before enqueueing a job happens-before everything the consumer
 * does after dequeueing it (__tsan_release/__tsan_acquire on the queue), and
 * the slot copies inside ck_ring itself are not checked.  All of the
 * library's own shared state (counters, sleep masks, futex words, flags) is
 * C11 atomics and stays fully checked.
 */
#if defined(__SANITIZE_THREAD__)
#define NVMPF_TSAN 1
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif

struct nvmpf_helper;

/* One job queue and the sleep state of its consumers. */
struct nvmpf_queue {
	ck_ring_t ring;                 /* ck pads producer/consumer lines */
	struct nvmpf_job *buf;          /* ring slots, power-of-two count */
	unsigned int capacity;          /* slots - 1 */
	bool spsc;                      /* single consumer: use spsc ops */
	unsigned int nconsumers;
	/* Bit i set: consumers[i] is (about to be) asleep on its futex word
	 * and has not been claimed by a waker yet. */
	_Atomic uint64_t sleep_mask NVMPF_ALIGN;
	struct nvmpf_helper *consumers[NVMPF_MAX_HELPERS];
};

/* One helper thread.  Counters have a single writer (the helper). */
struct nvmpf_helper {
	struct nvmpf_pool *pool;
	struct nvmpf_queue *in;         /* queue it consumes */
	struct nvmpf_queue *out;        /* M3 stage 1: hand-off queue */
	unsigned int index;             /* in pool->helpers */
	unsigned int stage;             /* 1 or 2 */
	uint64_t bit;                   /* its bit in in->sleep_mask */
	int cpu;                        /* -1 = unpinned */
	pthread_t thread;
	bool joinable;
	_Atomic int started;
	_Atomic pid_t tid;
	uint64_t t_active;              /* helper-private: start of current
					   activity, for busy_ns */

	/* Futex word: 0 = may sleep, 1 = woken (claimed) by a producer. */
	_Atomic uint32_t futex NVMPF_ALIGN;

	/* Statistics (written by this helper only, read by anyone). */
	_Atomic uint64_t jobs NVMPF_ALIGN; /* processed to the end */
	_Atomic uint64_t skipped;       /* retired: skipped or cut short */
	_Atomic uint64_t bytes;
	_Atomic uint64_t pages;
	_Atomic uint64_t lines;
	_Atomic uint64_t busy_ns;
	_Atomic uint64_t cpu_ns;        /* last self-published thread CPU time */
	_Atomic uint64_t sleeps;
	_Atomic uint64_t fault_errors;
	_Atomic uint64_t handoff_ok;
	_Atomic uint64_t handoff_dropped;
	_Atomic uint64_t wake_calls;    /* stage 1 waking stage 2 */
	_Atomic uint64_t fingerprint;   /* sum of job hashes (tests) */
	_Atomic uint64_t handoff_fp;    /* same, of jobs handed to stage 2 */
};

/* The pool.  The first line group is the producer's (owner's). */
struct nvmpf_pool {
	struct nvmpf_queue q1;          /* owner -> first-stage helpers */
	pthread_t owner;
	_Atomic uint64_t enqueued NVMPF_ALIGN; /* written by owner only */
	_Atomic uint64_t dropped;
	_Atomic uint64_t wake_calls;

	/* Jobs with seq < retired are stale (nvmpf_retire).  Written by the
	 * owner, read by helpers: its own cache line. */
	_Atomic uint64_t retired NVMPF_ALIGN;

	_Atomic int stop NVMPF_ALIGN;   /* destroy in progress */
	_Atomic int paused;             /* test hook: bit s-1 set = stage s
					   helpers do not dequeue */

	struct nvmpf_queue q2;          /* M3: stage 1 -> stage 2 (SPSC) */
	bool has_stage2;

	/* Immutable after create. */
	unsigned int mode;
	int locality;
	int stage2_locality;
	size_t page_size;
	size_t line_size;
	uint64_t spin_ns;
	nvmpf_job_fn job_hook;          /* host's hook before a job, or NULL */
	void *job_arg;
	pid_t pid;                      /* process that created the pool */
	bool restore_affinity;          /* PIN_CALLER: restore at destroy */
	cpu_set_t caller_orig_affinity;
	cpu_set_t allowed;              /* caller's allowed CPUs at create */
	nvmpf_info info;
	unsigned int nhelpers;
	struct nvmpf_helper *helpers;   /* nhelpers entries */
};

/* ---- test-only hooks (not part of the public API) ---- */

/* Pause dequeuing: stages = bit set (1 = stage 1, 2 = stage 2, 3 = both,
 * 0 = none).  Paused helpers idle as if their queue were empty. */
NVMPF_HIDDEN void nvmpf_internal_set_paused(nvmpf_pool *pool, int stages);
/* Start ring counters at v (to test 32-bit index wrap); queues must be
 * empty and helpers paused. */
NVMPF_HIDDEN void nvmpf_internal_preset_ring(nvmpf_pool *pool, unsigned int v);
/* Order-independent fingerprint of the jobs processed by stage 1 or 2, or
 * (stage 3) of the jobs stage 1 handed off to stage 2. */
NVMPF_HIDDEN uint64_t nvmpf_internal_fingerprint(const nvmpf_pool *pool,
						 int stage);
/* The hash summed into the fingerprints. */
NVMPF_HIDDEN uint64_t nvmpf_internal_job_hash(uintptr_t addr, size_t len);

#endif /* NVMPF_INTERNAL_H */
