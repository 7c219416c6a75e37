/*
 * nvmprefetch.h - public API of libnvmprefetch, pgnvm's helper-thread
 * prefetching library (paper 002, sections 7 and 8).
 *
 * A computation thread creates a pool of helper threads bound to itself and
 * hands them jobs "(address, length)": memory it will read soon, typically
 * pages of a file mapped from (emulated) persistent memory.  A helper takes
 * the page faults of the range off the computation thread (one read per OS
 * page) and issues software prefetches for every cache line, so the data is
 * mapped and close to the core when the computation thread gets there.
 *
 * Threading contract:
 *   - nvmpf_enqueue() may only be called by the thread that created the pool
 *     (the "owner"; the queue is single-producer).  It never blocks, never
 *     allocates and makes no system call unless a helper is asleep.
 *   - nvmpf_drain(), nvmpf_get_stats() and nvmpf_get_info() may be called by
 *     any thread, but not concurrently with nvmpf_destroy().
 *   - Helpers are born with every signal blocked, never allocate and never
 *     use stdio.  They call into the host program only through
 *     nvmpf_config.job_hook, if it is set: before they take a job's faults
 *     (see nvmpf_job_fn for what such a hook may do, including unblocking
 *     SIGSEGV and SIGBUS in its thread for a fault guard of its own).
 *   - The library has no global state, installs no signal handlers and no
 *     atexit handlers, so it can be used in processes that fork (create the
 *     pool after fork, in the process that uses it).
 *
 * Memory contract: every byte of an enqueued range must stay mapped and
 * readable until the job has been processed (nvmpf_drain() waits for that).
 * A helper that touches an unmapped page, or a page of a shared file mapping
 * beyond the end of the file, gets SIGSEGV/SIGBUS like any other thread and
 * the process dies.  NVMPF_MODE_POPULATE takes the faults with
 * madvise(MADV_POPULATE_READ) instead, which reports such ranges as errors
 * (counted in nvmpf_stats.fault_errors) instead of crashing.
 */
#ifndef NVMPREFETCH_H
#define NVMPREFETCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NVMPF_API __attribute__((visibility("default")))
#else
#define NVMPF_API
#endif

#define NVMPF_VERSION_MAJOR 0
#define NVMPF_VERSION_MINOR 3	/* 0.2: nvmpf_config.job_done, job_arg (soname .so.1);
				   0.3: the hook is job_hook, called before the
				   faults, returns int (soname .so.2) */

/* Upper bound on helper threads per pool (and size of per-helper arrays). */
#define NVMPF_MAX_HELPERS 32

/* Return codes: 0 on success, a negative NVMPF_E* value on failure. */
enum nvmpf_error {
	NVMPF_OK = 0,
	NVMPF_EINVAL = -1,    /* bad argument or configuration */
	NVMPF_ENOMEM = -2,    /* allocation failed (nvmpf_create only) */
	NVMPF_EFULL = -3,     /* queue full: the job was dropped and counted */
	NVMPF_ETIMEDOUT = -4, /* nvmpf_drain: timeout before the queue drained */
	NVMPF_ETHREAD = -5,   /* pthread_create failed */
	NVMPF_ENOTOWNER = -6, /* nvmpf_enqueue from a thread other than the owner */
	NVMPF_EFORKED = -7    /* pool used in a child process after fork() */
};

/*
 * Mapping schemes: where helper threads run relative to the computation
 * thread's CPU ("home CPU", see nvmpf_info.caller_cpu).
 */
typedef enum nvmpf_scheme {
	/* Helpers not pinned (they may run on any CPU the caller may use).
	 * Also the fallback of last resort of every other scheme. */
	NVMPF_SCHEME_NONE = 0,
	/* M1: helpers on a different physical core (prefetch into the LLC). */
	NVMPF_SCHEME_M1 = 1,
	/* M2: helpers on an SMT sibling of the home CPU (private caches). */
	NVMPF_SCHEME_M2 = 2,
	/* M3: two helpers in tandem: stage 1 on another core takes the page
	 * faults and brings the range towards the LLC, then hands the same job
	 * (SPSC queue) to stage 2 on the SMT sibling, which prefetches it into
	 * the private caches.  nvmpf_config.cpus may give {stage1, stage2}. */
	NVMPF_SCHEME_M3 = 3,
	/* Explicit list of CPUs (nvmpf_config.cpus): helper i runs on
	 * cpus[i % ncpus]. */
	NVMPF_SCHEME_CPUS = 4
} nvmpf_scheme;

/* What a helper does with each job (nvmpf_config.mode, a bit set). */
enum nvmpf_mode {
	/* Read one byte per page (page_size) of the range: takes the page
	 * faults.  The read is a real load, never optimised away. */
	NVMPF_MODE_FAULT = 1u << 0,
	/* __builtin_prefetch() every cache line of the range, hint
	 * nvmpf_config.locality. */
	NVMPF_MODE_PREFETCH = 1u << 1,
	/* Take the page faults with madvise(MADV_POPULATE_READ) (Linux >= 5.14)
	 * instead of loads: an unmapped range or a range past the end of a
	 * file is an error counted in fault_errors, not a SIGSEGV/SIGBUS.
	 * Mutually exclusive with NVMPF_MODE_FAULT. */
	NVMPF_MODE_POPULATE = 1u << 2,
	NVMPF_MODE_BOTH = NVMPF_MODE_FAULT | NVMPF_MODE_PREFETCH
};

/* nvmpf_config.flags */
enum nvmpf_flags {
	/* Pin the calling (computation) thread to its current CPU for the
	 * lifetime of the pool, so that "same core"/"other core" stay true.
	 * nvmpf_destroy() restores its previous affinity (when called by the
	 * owner).  Without it, the home CPU is the caller's only allowed CPU if
	 * it has one, else the CPU it runs on at nvmpf_create() time, and the
	 * kernel may later move the caller. */
	NVMPF_FLAG_PIN_CALLER = 1u << 0
};

/* Fallback reasons (nvmpf_info.fallback, a bit set). */
enum nvmpf_fallback {
	NVMPF_FB_NO_SMT = 1u << 0,         /* no allowed SMT sibling of home CPU */
	NVMPF_FB_NO_OTHER_CORE = 1u << 1,  /* no allowed CPU on another core */
	NVMPF_FB_CPU_NOT_ALLOWED = 1u << 2,/* explicit CPU(s) not online/allowed */
	NVMPF_FB_NO_TOPOLOGY = 1u << 3,    /* sysfs topology unreadable: every
					      CPU taken as its own core */
	NVMPF_FB_PIN_FAILED = 1u << 4      /* setting a helper's affinity
					      failed; it runs unpinned */
};

/*
 * Log callback: receives one complete message (no trailing newline).  Called
 * only from nvmpf_create(), in the calling thread, at most once per pool.
 */
typedef void (*nvmpf_log_fn)(void *arg, const char *msg);

/* A log callback that discards messages (for callers that read nvmpf_info). */
NVMPF_API void nvmpf_log_discard(void *arg, const char *msg);

/*
 * Job hook (nvmpf_config.job_hook): called by a first-stage helper for job
 * number seq, [addr, addr + len), when it is about to process it (not for
 * jobs retired before, nor while the pool stops), before it takes the
 * range's faults.  Returns what the helper does with the job next:
 *
 *   NVMPF_HOOK_PASS     nothing was done: the helper faults and prefetches
 *                       the range as configured (pool mode);
 *   NVMPF_HOOK_DONE     the hook brought the range in itself (took its
 *                       faults and read it): the helper neither faults nor
 *                       prefetches it again, and counts the job as done;
 *   NVMPF_HOOK_SKIP     the job is not worth doing (e.g. the owner has gone
 *                       past it): the helper drops it, counted as skipped,
 *                       like a retired job.
 *
 * Runs in the helper thread, born with every signal blocked, possibly in
 * several helpers at once (for different jobs): it must be thread-safe,
 * must not allocate, log, take locks the owner may hold or block, and may
 * use at most NVMPF_HOOK_STACK bytes of stack.  The owner may unmap the
 * range at any moment, so the hook may load through it only if it survives
 * that: read it with a system call that reports an unmapped range as an
 * error (process_vm_readv()), or under a fault guard of the host's own, for
 * which it may unblock the synchronous signals SIGSEGV and SIGBUS in its
 * thread (and only those: every other signal must keep going to the
 * owner's threads).  Its results travel back to the owner through memory
 * the owner gave it (job_arg), published with release semantics.
 */
typedef int (*nvmpf_job_fn)(void *arg, const void *addr, size_t len,
			    uint64_t seq);

/* What a job hook returns (see nvmpf_job_fn). */
enum nvmpf_hook_result {
	NVMPF_HOOK_PASS = 0,
	NVMPF_HOOK_DONE = 1,
	NVMPF_HOOK_SKIP = 2
};

/* Stack a job hook may use (helpers are created with more than this). */
#define NVMPF_HOOK_STACK (64u * 1024u)

/* Pool configuration.  Always initialise with nvmpf_config_init(). */
typedef struct nvmpf_config {
	nvmpf_scheme scheme;      /* default NVMPF_SCHEME_M1 */
	unsigned int nhelpers;    /* 0 = default: 1 (M1, M2, NONE), 2 (M3),
				     ncpus (CPUS).  M3 accepts only 0 or 2. */
	unsigned int queue_len;   /* max pending jobs, rounded up to 2^k-1;
				     0 = default 1023; at most 2^24-1 */
	unsigned int mode;        /* enum nvmpf_mode bits; default BOTH */
	int locality;             /* prefetch hint 0..3 as __builtin_prefetch
				     (3 = all levels/T0, 2 = T1, 1 = T2,
				     0 = non-temporal); default 3 */
	int stage2_locality;      /* M3 stage-2 helper's hint; default 3 */
	unsigned int flags;       /* enum nvmpf_flags bits; default 0 */
	const int *cpus;          /* SCHEME_CPUS: helper CPUs; SCHEME_M3:
				     optional {stage1 CPU, stage2 CPU} */
	unsigned int ncpus;       /* entries in cpus */
	uint64_t spin_ns;         /* how long an idle helper polls the queue
				     before sleeping on a futex; default
				     50000 (50 us); 0 = sleep at once */
	size_t page_size;         /* fault granularity; 0 = sysconf page size;
				     power of two >= 64 */
	nvmpf_log_fn log;         /* NULL = write to stderr */
	void *log_arg;
	const char *sysfs_cpu_dir;/* NULL = "/sys/devices/system/cpu" (tests
				     point this at a fake topology) */
	nvmpf_job_fn job_hook;    /* NULL = none; see nvmpf_job_fn */
	void *job_arg;            /* its first argument */
} nvmpf_config;

/* Information about a pool: what was asked, what was done. */
typedef struct nvmpf_info {
	nvmpf_scheme requested;   /* cfg.scheme */
	nvmpf_scheme effective;   /* what the placement actually implements */
	unsigned int fallback;    /* enum nvmpf_fallback bits; 0 if honoured */
	unsigned int nhelpers;
	int caller_cpu;           /* home CPU used for placement, -1 unknown */
	int caller_pinned;        /* 1 if the caller is pinned to caller_cpu */
	int smt_siblings;         /* allowed SMT siblings of caller_cpu */
	int cpus_allowed;         /* CPUs in the caller's affinity mask */
	unsigned int queue_len;   /* effective queue capacity */
	unsigned int stage2_queue_len; /* M3 hand-off queue capacity, else 0 */
	size_t page_size;
	int helper_cpu[NVMPF_MAX_HELPERS];   /* pinned CPU, -1 = unpinned */
	int helper_stage[NVMPF_MAX_HELPERS]; /* 1, or 2 for M3's second helper */
	pid_t helper_tid[NVMPF_MAX_HELPERS]; /* kernel thread ids */
	char message[320];        /* the fallback message logged, "" if none */
} nvmpf_info;

/* Per-helper counters. */
typedef struct nvmpf_helper_stats {
	uint64_t jobs;            /* jobs completed */
	uint64_t skipped;         /* jobs retired before or while processed */
	uint64_t bytes;           /* sum of their lengths (completed jobs) */
	uint64_t pages;           /* pages touched (FAULT) or populated, or
				     brought in by the job hook */
	uint64_t lines;           /* cache lines prefetched */
	uint64_t busy_ns;         /* wall time spent inside jobs */
	uint64_t cpu_ns;          /* CPU time (CLOCK_THREAD_CPUTIME_ID of the
				     helper), including idle spinning */
	uint64_t sleeps;          /* times it went to sleep on its futex */
} nvmpf_helper_stats;

/* Pool statistics (a snapshot; counters only grow). */
typedef struct nvmpf_stats {
	uint64_t enqueued;        /* jobs accepted by nvmpf_enqueue */
	uint64_t dropped;         /* jobs refused because the queue was full */
	uint64_t jobs_done;       /* jobs completed by first-stage helpers */
	uint64_t jobs_skipped;    /* jobs retired (nvmpf_retire) before or
				     while a helper processed them, all stages */
	uint64_t bytes_done;      /* their bytes */
	uint64_t pages_touched;
	uint64_t lines_prefetched;/* all stages */
	uint64_t fault_errors;    /* POPULATE mode: ranges madvise refused */
	uint64_t handoff_enqueued;/* M3: jobs handed to stage 2 */
	uint64_t handoff_dropped; /* M3: hand-offs dropped (stage-2 queue full) */
	uint64_t stage2_jobs_done;/* M3: jobs completed by stage 2 */
	uint64_t wake_calls;      /* futex wake system calls by producers */
	uint64_t helper_sleeps;
	uint64_t helper_busy_ns;  /* sum over helpers */
	uint64_t helper_cpu_ns;   /* sum over helpers */
	unsigned int nhelpers;
	nvmpf_helper_stats helper[NVMPF_MAX_HELPERS];
} nvmpf_stats;

typedef struct nvmpf_pool nvmpf_pool;

/* Fill *cfg with the defaults documented in nvmpf_config. */
NVMPF_API void nvmpf_config_init(nvmpf_config *cfg);

/*
 * Create a helper pool bound to the calling thread.  Reads the CPU topology
 * and the caller's affinity, places the helpers per cfg->scheme (falling back
 * and logging once when the scheme cannot be honoured), starts them and
 * returns after all of them run.  cfg may be NULL for the defaults.
 * Returns NVMPF_OK and *out, or NVMPF_EINVAL / NVMPF_ENOMEM / NVMPF_ETHREAD.
 */
NVMPF_API int nvmpf_create(const nvmpf_config *cfg, nvmpf_pool **out);

/*
 * Queue a prefetch of [addr, addr + len).  Owner thread only; never blocks.
 * Returns NVMPF_OK, NVMPF_EFULL (queue full: job dropped, counted in
 * stats.dropped), NVMPF_EINVAL (NULL pool/addr, len 0, range wraps) or
 * NVMPF_ENOTOWNER.
 */
NVMPF_API int nvmpf_enqueue(nvmpf_pool *pool, const void *addr, size_t len);

/*
 * As nvmpf_enqueue; on success also stores the job's sequence number in
 * *seq (if not NULL).  Jobs are numbered 0, 1, 2, ... in the order they are
 * accepted (the pool's stats.enqueued before the call).
 */
NVMPF_API int nvmpf_enqueue_seq(nvmpf_pool *pool, const void *addr,
				size_t len, uint64_t *seq);

/*
 * Declare every job with sequence number < seq stale (owner thread only):
 * typically the computation thread has reached that data itself, so
 * prefetching it would only compete with it.  Helpers skip such jobs, or
 * stop one in progress before its next page, and they count as done for
 * nvmpf_drain (stats.jobs_skipped).  Lower values than an earlier call are
 * ignored.  Costs one store; returns NVMPF_OK, NVMPF_EINVAL or
 * NVMPF_ENOTOWNER.
 */
NVMPF_API int nvmpf_retire(nvmpf_pool *pool, uint64_t seq);

/*
 * Wait until every accepted job has been completed, or skipped because it
 * was retired (for M3: by both stages, or dropped at the hand-off).  timeout_ns < 0 waits forever.  Returns
 * NVMPF_OK, NVMPF_ETIMEDOUT, NVMPF_EINVAL or NVMPF_EFORKED.
 */
NVMPF_API int nvmpf_drain(nvmpf_pool *pool, int64_t timeout_ns);

/* Snapshot the statistics.  Returns NVMPF_OK or NVMPF_EINVAL. */
NVMPF_API int nvmpf_get_stats(const nvmpf_pool *pool, nvmpf_stats *st);

/* Copy the placement information.  Returns NVMPF_OK or NVMPF_EINVAL. */
NVMPF_API int nvmpf_get_info(const nvmpf_pool *pool, nvmpf_info *info);

/*
 * Stop and join the helpers and free the pool.  Safe with jobs pending (they
 * are abandoned; a job in progress stops at the next page batch).  NULL is a
 * no-op.  In a child process after fork() it only frees memory (the helpers
 * do not exist there).
 */
NVMPF_API void nvmpf_destroy(nvmpf_pool *pool);

/* Human-readable text of an NVMPF_E* code. */
NVMPF_API const char *nvmpf_strerror(int err);

/* "M1", "M2", "M3", "CPUS", "NONE". */
NVMPF_API const char *nvmpf_scheme_name(nvmpf_scheme scheme);

/*
 * Parse a mapping, the text form of a scheme (PostgreSQL's
 * nvm_prefetch_mapping, nvmpf-topology's arguments):
 *
 *   "m1", "m2", "m3"   (any case, nothing around them)  -> that scheme
 *   a CPU list          -> NVMPF_SCHEME_CPUS and the CPUs in order
 *
 * A CPU list is one or more items separated by commas, each a CPU number
 * or an ascending range "lo-hi" ("3", "2,3", "4-7, 9"); blanks are allowed
 * around items, not inside them; CPU numbers are below CPU_SETSIZE (1024);
 * ranges are expanded, repeats kept.  At most NVMPF_MAX_HELPERS CPUs, and
 * at most maxcpus when cpus is given.
 *
 * scheme and ncpus must not be NULL.  cpus receives up to maxcpus CPUs;
 * NULL only checks and counts them.  err (errlen bytes, may be NULL)
 * receives "" on success, else one of:
 *   expected m1, m2, m3 or a list of CPU numbers such as "1", "2,3" or "4-7"
 *   a CPU range needs an upper bound, as in "4-7"
 *   CPU numbers must be ascending within a range and below 1024
 *   at most 32 helper CPUs can be listed       (32: the limit that applied)
 * The first thing wrong, from the left, is reported.
 *
 * Returns NVMPF_OK, or NVMPF_EINVAL with *scheme = NVMPF_SCHEME_NONE and
 * *ncpus = 0.  Whether the scheme can be honoured on this machine is only
 * known when helpers are placed (nvmpf_create, nvmpf-topology).
 */
NVMPF_API int nvmpf_parse_mapping(const char *text, nvmpf_scheme *scheme,
				  int *cpus, int maxcpus, int *ncpus,
				  char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVMPREFETCH_H */
