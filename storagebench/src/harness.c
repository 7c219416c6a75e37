/*
 * harness.c - runs a workload: its preparation, then warm-up and measured
 * repetitions.  Each repetition: (optionally) sync + drop the page cache of
 * the benchmark's files,
 * open_rep for every thread, start the worker threads together (a gate),
 * stop them at the deadline (max_seconds) if they have not finished their
 * work, join them, close_rep.  Times come from CLOCK_MONOTONIC; the
 * repetition's time is first start to last end, the CPU time from getrusage
 * (the whole process; the main thread sleeps meanwhile).
 */
#define _GNU_SOURCE
#include "sb.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double sb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Make the page cache cold for this benchmark's own files only: sync, then
 * posix_fadvise(POSIX_FADV_DONTNEED) on every regular file directly in dir
 * (symlinks not followed).  Not `echo 3 > /proc/sys/vm/drop_caches`: that is
 * global, and on tmpfs, where it cannot drop the emulated NVM's pages (they
 * are the files), it leaves them such that the kernel's fault-around skips
 * them afterwards -- every later 4 kB page of a mapping then costs a page
 * fault, slowing down whatever maps those files next (README: the caveat of
 * 2026-11-23; bench/core/results.py drop_os_caches() does the same as this
 * for PostgreSQL's data directories).  Needs no privilege.
 */
int sb_drop_caches(const char *dir, char *err, size_t errlen)
{
    sync();
    DIR *d = opendir(dir);
    if (!d) {
        sb_failf(err, errlen, "cannot drop the page cache of %s: %s", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW);
        int adv = fd < 0 ? errno : posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if (fd >= 0)
            close(fd);
        if (adv != 0) {
            sb_failf(err, errlen, "cannot drop the page cache of %s/%s: %s", dir, e->d_name,
                     strerror(adv));
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

/* What the main thread and the workers of one repetition share. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* "ready" and "done" changes, and "go" */
    int ready, done;
    bool go;
};

struct worker {
    struct sb_ctx *c;
    int tid;
    struct gate *g;
    double t_start, t_end;
    struct sb_thread_result res;
};

/* A worker: wait until every worker is ready and the main thread says go,
 * run the workload's timed part, report. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct gate *g = w->g;
    pthread_mutex_lock(&g->mu);
    g->ready++;
    pthread_cond_broadcast(&g->cv);
    while (!g->go)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    w->t_start = sb_now();
    if (w->c->w->run(w->c, w->tid, &w->res) != 0 && !atomic_load(&w->c->failed))
        sb_fail(w->c, "thread %d failed", w->tid);
    w->t_end = sb_now();
    w->res.seconds = w->t_end - w->t_start;
    pthread_mutex_lock(&g->mu);
    g->done++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

/*
 * One repetition with all threads: the main thread waits until every worker
 * is ready, lets them go together and sleeps until every worker is done or
 * the deadline has passed, when it raises the stop flag the workers poll once
 * per operation.
 */
static int one_rep(struct sb_ctx *c, int rep, struct sb_rep *r)
{
    int n = c->o.threads;
    memset(r, 0, sizeof *r);
    r->warmup = rep < c->o.warmup;
    if (c->o.drop_caches)
        r->caches_dropped =
            sb_drop_caches(c->o.dir, c->cache_error, sizeof c->cache_error) == 0 ? 1 : -1;
    for (int t = 0; t < n; t++)
        if (c->w->open_rep(c, t, rep) != 0) {
            for (int u = 0; u < t; u++)
                c->w->close_rep(c, u);
            return -1;
        }

    struct gate g = {.ready = 0, .done = 0, .go = false};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g.cv, &ca);
    pthread_mutex_init(&g.mu, NULL);
    struct worker *ws = calloc(SB_MAX_THREADS, sizeof *ws);   /* n <= SB_MAX_THREADS */
    pthread_t *tids = calloc(SB_MAX_THREADS, sizeof *tids);
    atomic_store(&c->stop, false);
    int started = 0;
    if (!ws || !tids)
        sb_fail(c, "out of memory");
    for (int t = 0; ws && tids && t < n; t++) {
        ws[t] = (struct worker){.c = c, .tid = t, .g = &g};
        int e = pthread_create(&tids[t], NULL, worker_main, &ws[t]);
        if (e != 0) {
            sb_fail(c, "pthread_create: %s", strerror(e));
            break;
        }
        started++;
    }
    struct rusage ru0, ru1;
    pthread_mutex_lock(&g.mu);
    while (g.ready < started)
        pthread_cond_wait(&g.cv, &g.mu);
    getrusage(RUSAGE_SELF, &ru0);
    g.go = true;
    pthread_cond_broadcast(&g.cv);
    if (c->o.max_seconds > 0) {
        double deadline = sb_now() + c->o.max_seconds;
        struct timespec ts = {.tv_sec = (time_t)deadline,
                              .tv_nsec = (long)((deadline - (double)(time_t)deadline) * 1e9)};
        while (g.done < started)
            if (pthread_cond_timedwait(&g.cv, &g.mu, &ts) == ETIMEDOUT)
                break;
        if (g.done < started) {
            atomic_store(&c->stop, true);
            r->stopped = true;
        }
    }
    pthread_mutex_unlock(&g.mu);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    getrusage(RUSAGE_SELF, &ru1);

    double first = 0, last = 0;
    for (int t = 0; t < started; t++) {
        r->thr[t] = ws[t].res;
        if (t == 0 || ws[t].t_start < first)
            first = ws[t].t_start;
        if (t == 0 || ws[t].t_end > last)
            last = ws[t].t_end;
    }
    r->seconds = last - first;
    r->user_s = tv(ru1.ru_utime) - tv(ru0.ru_utime);
    r->sys_s = tv(ru1.ru_stime) - tv(ru0.ru_stime);
    free(ws);
    free(tids);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    for (int t = 0; t < n; t++)
        if (c->w->close_rep(c, t) != 0)
            rc = -1;
    return atomic_load(&c->failed) ? -1 : rc;
}

int sb_run(struct sb_ctx *c)
{
    c->nreps = c->o.warmup + c->o.reps;
    c->reps = calloc((size_t)c->nreps, sizeof *c->reps);
    if (!c->reps) {
        sb_fail(c, "out of memory");
        return -1;
    }
    double t0 = sb_now();
    if (c->w->prepare(c) != 0) {
        c->w->finish(c);
        return -1;
    }
    c->prepare_seconds = sb_now() - t0;
    int rc = 0;
    for (int rep = 0; rep < c->nreps && rc == 0; rep++)
        rc = one_rep(c, rep, &c->reps[rep]);
    c->w->finish(c);
    return rc;
}
