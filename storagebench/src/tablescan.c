/*
 * tablescan.c - the table scan of paper 004 §3.3: every thread reads its own
 * data file sequentially, page by page, into ONE page-sized DRAM buffer (it
 * stays in the L1/L2 cache, as PostgreSQL's ring buffer of a sequential scan
 * does).  Paths: pread, O_DIRECT pread, mmap + memcpy.  A repetition reads
 * work_bytes per thread (default: the whole file once; past the end it wraps
 * around) or stops at the deadline.
 */
#include "pager.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct scan_thread {
    struct sb_pager pager;   /* first: sb_pager_close_rep */
    char *buf;
};

/* The data files (one per thread, random contents, reused when present) and
 * each thread's one page buffer. */
static int scan_prepare(struct sb_ctx *c)
{
    if (sb_prepare_data(c) != 0)
        return -1;
    for (int t = 0; t < c->o.threads; t++) {
        struct scan_thread *st = calloc(1, sizeof *st);
        if (!st || !(st->buf = sb_alloc(4096, c->o.page_size))) {
            free(st);
            sb_fail(c, "out of memory");
            return -1;
        }
        memset(st->buf, 0, c->o.page_size);   /* touched: no fault while timed */
        c->state[t] = st;
    }
    return 0;
}

static int scan_open(struct sb_ctx *c, int tid, int rep)
{
    (void)rep;
    return sb_pager_open_data(c, tid, false);
}

/* Timed: page after page into the one buffer. */
static int scan_run(struct sb_ctx *c, int tid, struct sb_thread_result *r)
{
    struct scan_thread *st = c->state[tid];
    uint64_t pages = (c->o.work_bytes ? c->o.work_bytes : c->o.file_size) / c->o.page_size;
    uint64_t npages = st->pager.npages;
    uint64_t sink = 0;
    for (uint64_t i = 0; i < pages; i++) {
        if (sb_stopped(c))
            break;
        if (sb_pager_read(&st->pager, i % npages, st->buf) != 0) {
            sb_fail(c, "thread %d: reading page %llu failed", tid, (unsigned long long)(i % npages));
            return -1;
        }
        sink ^= *(volatile uint64_t *)st->buf;
        r->ops++;
        r->reads++;
    }
    r->bytes = r->ops * c->o.page_size;
    r->sink = sink;
    return 0;
}

static void scan_finish(struct sb_ctx *c)
{
    sb_free_states(c, offsetof(struct scan_thread, buf));
}

const struct sb_workload sb_tablescan = {
    .prepare = scan_prepare,
    .open_rep = scan_open,
    .run = scan_run,
    .close_rep = sb_pager_close_rep,
    .finish = scan_finish,
};
