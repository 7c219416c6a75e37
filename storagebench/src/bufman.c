/*
 * bufman.c - the buffer management workload of paper 004 §3.4: random page
 * reads and writes against each thread's data file, through a DRAM buffer
 * pool that cannot hold the data.
 *
 * The pool (pool_size bytes for all threads, each owning pool_size/threads of
 * its frames; the paper: 1 GiB per thread) is where pages are read into, the
 * next frame in turn, so reads land in DRAM, not in a cache-resident buffer.
 * Operation i picks a random page of the file; it is a write iff
 * floor((i+1)·w) > floor(i·w) for the write ratio w (so 20% is exactly every
 * fifth operation, as the paper says).  A write takes one of 16 random pages
 * of the thread's write pool, changes one random byte of it and pages it out
 * to the chosen page, with the path's persistence step (pager.c).  A
 * repetition does work_bytes/page_size operations per thread (default: as
 * many pages as the file has) or stops at the deadline.
 */
#include "pager.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_POOL_PAGES 16

struct bm_thread {
    struct sb_pager pager;   /* first: sb_pager_close_rep */
    char *frames;          /* this thread's part of the pool */
    uint64_t nframes, next_frame;
    char *wpool;           /* WRITE_POOL_PAGES random pages */
    uint64_t rng;
};

struct bm_shared {
    char *pool;
};

/* The data files, the buffer pool (allocated and touched, so no first-touch
 * fault is timed), each thread's frames and random write pool. */
static int bm_prepare(struct sb_ctx *c)
{
    if (sb_prepare_data(c) != 0)
        return -1;
    size_t P = c->o.page_size;
    uint64_t per_thread = c->o.pool_size / (uint64_t)c->o.threads / P;
    if (per_thread == 0) {
        sb_fail(c, "the pool (%llu bytes) has less than one page per thread",
                (unsigned long long)c->o.pool_size);
        return -1;
    }
    struct bm_shared *sh = calloc(1, sizeof *sh);
    c->shared = sh;
    if (!sh || !(sh->pool = sb_alloc(2u << 20, per_thread * P * (uint64_t)c->o.threads))) {
        sb_fail(c, "cannot allocate the buffer pool (%llu bytes)",
                (unsigned long long)c->o.pool_size);
        return -1;
    }
    memset(sh->pool, 0, per_thread * P * (uint64_t)c->o.threads);   /* no first-touch faults */
    for (int t = 0; t < c->o.threads; t++) {
        struct bm_thread *bt = calloc(1, sizeof *bt);
        if (!bt || !(bt->wpool = sb_alloc(4096, WRITE_POOL_PAGES * P))) {
            free(bt);
            sb_fail(c, "out of memory");
            return -1;
        }
        uint64_t s = sb_seed(c->o.seed, t, -2);
        sb_fill_random(bt->wpool, WRITE_POOL_PAGES * P, &s);
        bt->frames = sh->pool + (uint64_t)t * per_thread * P;
        bt->nframes = per_thread;
        c->state[t] = bt;
    }
    return 0;
}

/* Per repetition: the pager over the run's path (a fresh mapping), the
 * granularity libpmem2 reports, the thread's random stream for this rep. */
static int bm_open(struct sb_ctx *c, int tid, int rep)
{
    struct bm_thread *bt = c->state[tid];
    if (sb_pager_open_data(c, tid, true) != 0)
        return -1;
    if (tid == 0)
        snprintf(c->granularity, sizeof c->granularity, "%s", sb_pager_granularity(&bt->pager));
    bt->rng = sb_seed(c->o.seed, tid, rep);
    return 0;
}

/* Timed: the operations (see the file's header). */
static int bm_run(struct sb_ctx *c, int tid, struct sb_thread_result *r)
{
    struct bm_thread *bt = c->state[tid];
    size_t P = c->o.page_size;
    uint64_t ops = (c->o.work_bytes ? c->o.work_bytes : c->o.file_size) / P;
    uint64_t w = (uint64_t)(c->o.write_ratio * 1000.0 + 0.5);   /* per mille */
    uint64_t npages = bt->pager.npages;
    uint64_t sink = 0;
    for (uint64_t i = 0; i < ops; i++) {
        if (sb_stopped(c))
            break;
        uint64_t page = sb_rand(&bt->rng) % npages;
        if ((i + 1) * w / 1000 > i * w / 1000) {
            uint64_t x = sb_rand(&bt->rng);
            char *src = bt->wpool + (x % WRITE_POOL_PAGES) * P;
            src[(x >> 8) % P] ^= (char)((x >> 40) | 1);   /* one byte changes */
            if (sb_pager_write(&bt->pager, page, src) != 0) {
                sb_fail(c, "thread %d: writing page %llu failed", tid, (unsigned long long)page);
                return -1;
            }
            r->writes++;
        } else {
            char *dst = bt->frames + (bt->next_frame++ % bt->nframes) * P;
            if (sb_pager_read(&bt->pager, page, dst) != 0) {
                sb_fail(c, "thread %d: reading page %llu failed", tid, (unsigned long long)page);
                return -1;
            }
            sink ^= *(volatile uint64_t *)dst;
            r->reads++;
        }
        r->ops++;
    }
    r->bytes = r->ops * P;
    r->sink = sink;
    return 0;
}

static void bm_finish(struct sb_ctx *c)
{
    sb_free_states(c, offsetof(struct bm_thread, wpool));
    struct bm_shared *sh = c->shared;
    if (sh)
        free(sh->pool);
    free(sh);
    c->shared = NULL;
}

const struct sb_workload sb_bufman = {
    .prepare = bm_prepare,
    .open_rep = bm_open,
    .run = bm_run,
    .close_rep = sb_pager_close_rep,
    .finish = bm_finish,
};
