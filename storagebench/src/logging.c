/*
 * logging.c - the logging workload of paper 004 §3.5: small durable appends,
 * each thread into a log of its own (no locking measured).  Every append
 * changes one random byte of the thread's entry buffer, then appends it:
 *
 *   new       write(2) + fdatasync(2) per entry to a file created (O_APPEND)
 *             before the repetition: every append allocates and extends
 *   recycled  write(2) + fdatasync(2) per entry from offset 0 of a file
 *             written in full before (kept across repetitions and runs, as a
 *             database recycles its log segments): blocks exist, size stays
 *   pmemlog   PMDK's libpmemlog (pmemlog_append persists the entry, then the
 *             write offset); the pool is filled once when created, then
 *             rewound before each repetition, so it is recycled too
 *   pmem2log  our log on libpmem2 (plog.c): memcpy_fn + persist of the entry,
 *             then a persisted tail offset; created filled, reset per
 *             repetition
 *
 * Log files: <dir>/sb-log-<path>-<thread>.dat, file_size bytes of log each; a
 * repetition appends work_bytes/entry_size entries per thread (default: the
 * log's capacity) or stops at the deadline.  Only the appends are timed.
 */
#define _GNU_SOURCE
#include "pager.h"
#include "plog.h"
#include "sb.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <libpmem.h>
#include <libpmemlog.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const KIND[SB_PATH_COUNT] = {
    [SB_PATH_NEW] = "log-new",
    [SB_PATH_RECYCLED] = "log-recycled",
    [SB_PATH_PMEMLOG] = "log-pmemlog",
    [SB_PATH_PMEM2LOG] = "log-pmem2log",
};

struct log_thread {
    char path[4096];
    char *entry;
    uint64_t rng;
    int fd;
    PMEMlogpool *plp;
    struct plog plog;
};

/* libpmemlog's pool for `cap` bytes of log: PMEMLOG_MIN_POOL at least, plus
 * its headers (pmemlog_nbyte is checked after creation). */
static size_t pmemlog_pool_size(uint64_t cap)
{
    uint64_t s = cap + (1u << 20);
    return s < PMEMLOG_MIN_POOL ? PMEMLOG_MIN_POOL : (size_t)s;
}

/* Write every byte of a new pool once (appends of zeros until full), then
 * rewind: later appends overwrite written blocks, as in a recycled log. */
static int fill_pmemlog(PMEMlogpool *plp, char *err, size_t errlen)
{
    const size_t chunk = 1 << 20;
    char *zero = calloc(1, chunk);
    if (!zero) {
        sb_failf(err, errlen, "out of memory");
        return -1;
    }
    size_t left = pmemlog_nbyte(plp);
    while (left > 0) {
        size_t n = left < chunk ? left : chunk;
        if (pmemlog_append(plp, zero, n) != 0) {
            sb_failf(err, errlen, "pmemlog_append (fill): %s", pmemlog_errormsg());
            free(zero);
            return -1;
        }
        left -= n;
    }
    free(zero);
    pmemlog_rewind(plp);
    return 0;
}

/* The pmemlog pool of one thread: reused when it opens and is big enough,
 * else created and filled once. */
static int prepare_pmemlog(const char *path, uint64_t cap, bool *reused, char *err,
                           size_t errlen)
{
    PMEMlogpool *plp = pmemlog_open(path);
    if (plp && pmemlog_nbyte(plp) >= cap) {
        pmemlog_close(plp);
        *reused = true;
        return 0;
    }
    if (plp)
        pmemlog_close(plp);
    *reused = false;
    unlink(path);
    plp = pmemlog_create(path, pmemlog_pool_size(cap), 0644);
    if (!plp) {
        sb_failf(err, errlen, "pmemlog_create %s: %s", path, pmemlog_errormsg());
        return -1;
    }
    if (pmemlog_nbyte(plp) < cap) {
        sb_failf(err, errlen, "pmemlog pool %s holds %zu bytes, %llu needed", path,
                 pmemlog_nbyte(plp), (unsigned long long)cap);
        pmemlog_close(plp);
        return -1;
    }
    int rc = fill_pmemlog(plp, err, errlen);
    pmemlog_close(plp);
    return rc;
}

/* Whether libpmem takes the file for persistent memory (it honours
 * PMEM_IS_PMEM_FORCE): then libpmemlog flushes cache lines, else it msyncs. */
static int libpmem_is_pmem(const char *path)
{
    size_t len;
    int is_pmem = -1;
    void *a = pmem_map_file(path, 0, 0, 0, &len, &is_pmem);
    if (!a)
        return -1;
    pmem_unmap(a, len);
    return is_pmem;
}

static int prepare_pmem2log(const char *path, uint64_t cap, bool *reused, char *err,
                            size_t errlen)
{
    struct plog l;
    char ignored[SB_ERRLEN];
    if (access(path, F_OK) == 0 && plog_open(&l, path, ignored, sizeof ignored) == 0) {
        bool fits = l.capacity >= cap;
        plog_close(&l);
        if (fits) {
            *reused = true;
            return 0;
        }
    }
    *reused = false;
    return plog_create(path, cap, err, errlen);
}

/* Once: each thread's entry buffer and its log as the path wants it (none
 * for new; written in full for recycled; created and filled, or reused, for
 * pmemlog and pmem2log). */
static int log_prepare(struct sb_ctx *c)
{
    char err[SB_ERRLEN];
    c->files_reused = true;
    for (int t = 0; t < c->o.threads; t++) {
        struct log_thread *lt = calloc(1, sizeof *lt);
        if (!lt || !(lt->entry = sb_alloc(64, c->o.entry_size))) {
            free(lt);
            sb_fail(c, "out of memory");
            return -1;
        }
        c->state[t] = lt;
        lt->fd = -1;
        uint64_t s = sb_seed(c->o.seed, t, -3);
        sb_fill_random(lt->entry, c->o.entry_size, &s);
        sb_file_path(lt->path, sizeof lt->path, c->o.dir, KIND[c->o.path], t);
        bool reused = false;
        int rc = 0;
        switch (c->o.path) {
        case SB_PATH_NEW:
            unlink(lt->path);
            reused = false;
            break;
        case SB_PATH_RECYCLED:
            rc = sb_data_file(lt->path, c->o.file_size, s, &reused, err, sizeof err);
            break;
        case SB_PATH_PMEMLOG:
            rc = prepare_pmemlog(lt->path, c->o.file_size, &reused, err, sizeof err);
            if (rc == 0 && t == 0)
                c->is_pmem = libpmem_is_pmem(lt->path);
            break;
        case SB_PATH_PMEM2LOG:
            rc = prepare_pmem2log(lt->path, c->o.file_size, &reused, err, sizeof err);
            break;
        default:
            sb_failf(err, sizeof err, "not a logging path");
            rc = -1;
        }
        if (rc != 0) {
            sb_fail(c, "%s", err);
            return -1;
        }
        c->files_reused &= reused;
    }
    return 0;
}

/* fsync the directory holding `path` (a new file's name must be durable). */
static int fsync_dir(const char *path)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int d = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (d < 0)
        return -1;
    int rc = fsync(d);
    close(d);
    return rc;
}

/* Per repetition, not timed: a new empty file (and its name made durable),
 * the recycled file at offset 0, or the library log opened and emptied. */
static int log_open(struct sb_ctx *c, int tid, int rep)
{
    struct log_thread *lt = c->state[tid];
    char err[SB_ERRLEN];
    lt->rng = sb_seed(c->o.seed, tid, rep);
    switch (c->o.path) {
    case SB_PATH_NEW:
        unlink(lt->path);
        lt->fd = open(lt->path, O_CREAT | O_EXCL | O_WRONLY | O_APPEND, 0644);
        if (lt->fd < 0 || fsync_dir(lt->path) != 0) {
            sb_fail(c, "creating %s: %s", lt->path, strerror(errno));
            return -1;
        }
        return 0;
    case SB_PATH_RECYCLED:
        lt->fd = open(lt->path, O_WRONLY);   /* offset 0, size kept */
        if (lt->fd < 0) {
            sb_fail(c, "open %s: %s", lt->path, strerror(errno));
            return -1;
        }
        return 0;
    case SB_PATH_PMEMLOG:
        lt->plp = pmemlog_open(lt->path);
        if (!lt->plp) {
            sb_fail(c, "pmemlog_open %s: %s", lt->path, pmemlog_errormsg());
            return -1;
        }
        pmemlog_rewind(lt->plp);
        return 0;
    case SB_PATH_PMEM2LOG:
        if (plog_open(&lt->plog, lt->path, err, sizeof err) != 0) {
            sb_fail(c, "%s", err);
            return -1;
        }
        plog_reset(&lt->plog);
        if (tid == 0)
            snprintf(c->granularity, sizeof c->granularity, "%s",
                     sb_granularity_name(pmem2_map_get_store_granularity(lt->plog.pm.map)));
        return 0;
    default:
        return -1;
    }
}

/* Timed: the appends. */
static int log_run(struct sb_ctx *c, int tid, struct sb_thread_result *r)
{
    struct log_thread *lt = c->state[tid];
    size_t E = c->o.entry_size;
    uint64_t n = (c->o.work_bytes ? c->o.work_bytes : c->o.file_size) / E;
    for (uint64_t i = 0; i < n; i++) {
        if (sb_stopped(c))
            break;
        uint64_t x = sb_rand(&lt->rng);
        lt->entry[x % E] = (char)(x >> 40);
        int rc;
        switch (c->o.path) {
        case SB_PATH_PMEMLOG:
            rc = pmemlog_append(lt->plp, lt->entry, E);
            break;
        case SB_PATH_PMEM2LOG:
            rc = plog_append(&lt->plog, lt->entry, E);
            break;
        default:
            rc = write(lt->fd, lt->entry, E) == (ssize_t)E ? fdatasync(lt->fd) : -1;
        }
        if (rc != 0) {
            sb_fail(c, "thread %d: append %llu failed: %s", tid, (unsigned long long)i,
                    strerror(errno));
            return -1;
        }
        r->ops++;
        r->writes++;
    }
    r->bytes = r->ops * E;
    return 0;
}

/* Close the log; the new file is removed (the next repetition makes it anew). */
static int log_close(struct sb_ctx *c, int tid)
{
    struct log_thread *lt = c->state[tid];
    int rc = 0;
    switch (c->o.path) {
    case SB_PATH_PMEMLOG:
        if (lt->plp)
            pmemlog_close(lt->plp);
        lt->plp = NULL;
        break;
    case SB_PATH_PMEM2LOG:
        rc = plog_close(&lt->plog);
        break;
    default:
        if (lt->fd >= 0)
            rc = close(lt->fd);
        lt->fd = -1;
        if (c->o.path == SB_PATH_NEW)
            unlink(lt->path);
    }
    return rc;
}

static void log_finish(struct sb_ctx *c)
{
    sb_free_states(c, offsetof(struct log_thread, entry));
}

const struct sb_workload sb_logging = {
    .prepare = log_prepare,
    .open_rep = log_open,
    .run = log_run,
    .close_rep = log_close,
    .finish = log_finish,
};
