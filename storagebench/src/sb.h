/*
 * sb.h - storagebench: what the units share.
 *
 * storagebench reproduces the three storage microbenchmarks of paper 004 §3
 * (table scan, buffer management, logging) on one directory (a tmpfs that
 * emulates persistent memory, or a disk).  One invocation measures one
 * configuration: a benchmark, an I/O path, its sizes and a thread count; it
 * runs warm-up and measured repetitions and prints one JSON document.
 *
 * Units (calls go down this list only):
 *   main.c       command line, validation, the JSON document
 *   tablescan.c, bufman.c, logging.c   the workloads (struct sb_workload)
 *   harness.c    threads, start barrier, deadline, repetitions, cache drops
 *   pager.c      page-sized reads/writes over pread/O_DIRECT/mmap/libpmem2
 *   plog.c       our append-only log on libpmem2
 *   datafile.c   data files, random numbers, error messages
 *   json.c       the JSON writer
 */
#ifndef SB_H
#define SB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Version of the JSON document printed per invocation (README.md: "Output"). */
#define SB_SCHEMA_VERSION 1
#define SB_MAX_THREADS 256
#define SB_ERRLEN 512

enum sb_bench { SB_TABLESCAN, SB_BUFMAN, SB_LOGGING };

/* The I/O paths.  Which benchmark takes which: main.c (sb_path_allowed). */
enum sb_path {
    SB_PATH_PREAD,     /* pread (bufman: pread / pwrite + fdatasync per write) */
    SB_PATH_ODIRECT,   /* pread with O_DIRECT (table scan) */
    SB_PATH_MMAP,      /* mmap + memcpy (bufman: + msync(MS_SYNC) per write) */
    SB_PATH_PMEM2,     /* libpmem2 mapping: memcpy reads, pmem2 memcpy_fn writes */
    SB_PATH_NEW,       /* logging: write + fdatasync, appending to a new file */
    SB_PATH_RECYCLED,  /* logging: write + fdatasync into a pre-written file */
    SB_PATH_PMEMLOG,   /* logging: PMDK libpmemlog (pmemlog_append) */
    SB_PATH_PMEM2LOG,  /* logging: our log on libpmem2 (plog.c) */
    SB_PATH_COUNT
};

struct sb_opts {
    enum sb_bench bench;
    enum sb_path path;
    const char *dir;      /* where the files live */
    int threads;
    size_t page_size;     /* table scan, bufman */
    uint64_t file_size;   /* per thread: data file, or log capacity */
    uint64_t work_bytes;  /* per thread and repetition (0: file_size) */
    double write_ratio;   /* bufman, 0..1 */
    uint64_t pool_size;   /* bufman: DRAM frames of all threads together */
    size_t entry_size;    /* logging */
    int warmup, reps;
    double max_seconds;   /* per repetition; 0: no limit */
    uint64_t seed;
    bool drop_caches;     /* sync + drop dir's files from the page cache before every rep */
};

/* What one thread did in one repetition. */
struct sb_thread_result {
    uint64_t bytes;   /* payload moved: pages read/written, log entry bytes */
    uint64_t ops;     /* page operations or log appends */
    uint64_t reads, writes;
    double seconds;   /* from the start barrier to this thread's end */
    uint64_t sink;    /* folded from what was read, so no copy is dead code */
};

/* One repetition (warm-up or measured). */
struct sb_rep {
    bool warmup;
    bool stopped;          /* the deadline ended it before the work was done */
    int caches_dropped;    /* 1 done, 0 not asked, -1 failed (see cache_error) */
    double seconds;        /* first thread start .. last thread end */
    double user_s, sys_s;  /* CPU time of the process (getrusage) */
    struct sb_thread_result thr[SB_MAX_THREADS];
};

struct sb_ctx;

/*
 * A workload: prepare runs once (files), open_rep/close_rep around every
 * repetition in the main thread (not timed: open, map, reset a log), run in
 * each worker thread between the start barrier and its end (timed).  Every
 * function returns 0, or -1 with sb_fail() called.
 */
struct sb_workload {
    int (*prepare)(struct sb_ctx *);
    int (*open_rep)(struct sb_ctx *, int tid, int rep);
    int (*run)(struct sb_ctx *, int tid, struct sb_thread_result *);
    int (*close_rep)(struct sb_ctx *, int tid);
    void (*finish)(struct sb_ctx *);
};

struct sb_ctx {
    struct sb_opts o;
    const struct sb_workload *w;
    void *state[SB_MAX_THREADS];     /* the workload's per-thread state */
    void *shared;                    /* the workload's shared state */
    atomic_bool stop;                /* set by the harness at the deadline */
    char error[SB_ERRLEN];           /* the first failure */
    atomic_int failed;
    char cache_error[128];
    /* reported in the document's "env" (set by the workloads) */
    char granularity[32];            /* libpmem2's store granularity, "" if none */
    int is_pmem;                     /* libpmem's pmem_is_pmem of a log, -1 n/a */
    bool files_reused;               /* data files / logs were there already */
    double prepare_seconds;
    struct sb_rep *reps;             /* warmup + reps */
    int nreps;
};

/* harness.c */
int sb_run(struct sb_ctx *c);
static inline bool sb_stopped(struct sb_ctx *c)
{
    return atomic_load_explicit(&c->stop, memory_order_relaxed);
}
double sb_now(void);
int sb_drop_caches(const char *dir, char *err, size_t errlen);

/* datafile.c */
void sb_fail(struct sb_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sb_failf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sb_file_path(char *out, size_t len, const char *dir, const char *kind, int tid);
int sb_data_file(const char *path, uint64_t size, uint64_t seed, bool *reused,
                 char *err, size_t errlen);
void sb_fill_random(void *buf, size_t len, uint64_t *state);
void *sb_alloc(size_t align, size_t size);
int sb_prepare_data(struct sb_ctx *c);
int sb_fill_fd(int fd, uint64_t size, uint64_t *rng);
void sb_free_states(struct sb_ctx *c, size_t buf_offset);

/* xorshift64*: the workloads' random numbers (seeded per thread). */
static inline uint64_t sb_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}
uint64_t sb_seed(uint64_t seed, int tid, int rep);

/* the workloads */
extern const struct sb_workload sb_tablescan, sb_bufman, sb_logging;

#endif
