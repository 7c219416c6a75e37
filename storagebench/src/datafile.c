/*
 * datafile.c - files and helpers the workloads share: the per-thread data
 * files (random contents, written once and reused while their size fits),
 * file names, random numbers, aligned allocation and error messages.
 */
#define _GNU_SOURCE
#include "sb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sb_failf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Record the first failure of a run (any thread); later ones are dropped. */
void sb_fail(struct sb_ctx *c, const char *fmt, ...)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&c->failed, &expected, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    atomic_store(&c->stop, true);   /* the other threads stop early */
}

/* <dir>/sb-<kind>-<tid>.dat */
void sb_file_path(char *out, size_t len, const char *dir, const char *kind, int tid)
{
    snprintf(out, len, "%s/sb-%s-%d.dat", dir, kind, tid);
}

/* splitmix64: turns (seed, thread, repetition) into independent streams. */
static uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

uint64_t sb_seed(uint64_t seed, int tid, int rep)
{
    uint64_t s = splitmix(seed ^ splitmix((uint64_t)tid * 1000003u + (uint64_t)rep));
    return s ? s : 1;   /* xorshift must not start at 0 */
}

void sb_fill_random(void *buf, size_t len, uint64_t *state)
{
    uint64_t *w = buf;
    size_t n = len / 8;
    for (size_t i = 0; i < n; i++)
        w[i] = sb_rand(state);
    for (size_t i = n * 8; i < len; i++)
        ((unsigned char *)buf)[i] = (unsigned char)sb_rand(state);
}

void *sb_alloc(size_t align, size_t size)
{
    void *p = NULL;
    size_t rounded = (size + align - 1) / align * align;
    if (posix_memalign(&p, align, rounded ? rounded : align) != 0)
        return NULL;
    return p;
}

/*
 * Write bytes [0, size) of the open file fd in 1 MiB chunks, random from
 * *rng (NULL: zeros), then fdatasync it.  0, or -1 with errno.
 */
int sb_fill_fd(int fd, uint64_t size, uint64_t *rng)
{
    const size_t chunk = 1 << 20;
    char *buf = sb_alloc(4096, chunk);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    memset(buf, 0, chunk);
    for (uint64_t off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
        if (rng)
            sb_fill_random(buf, n, rng);
        for (size_t done = 0; done < n;) {
            ssize_t w = pwrite(fd, buf + done, n - done, (off_t)(off + done));
            if (w <= 0) {
                if (w == 0)
                    errno = EIO;
                free(buf);
                return -1;
            }
            done += (size_t)w;
        }
    }
    free(buf);
    return fdatasync(fd);
}

/*
 * A data file of exactly `size` bytes of random contents (the paper
 * initialises its files randomly).  An existing regular file of that size is
 * reused as it is (*reused = true); otherwise it is written anew
 * (sb_fill_fd).  Not timed.
 */
int sb_data_file(const char *path, uint64_t size, uint64_t seed, bool *reused,
                 char *err, size_t errlen)
{
    struct stat st;
    *reused = false;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size) {
        *reused = true;
        return 0;
    }
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) {
        sb_failf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    uint64_t s = seed ? seed : 1;
    int rc = sb_fill_fd(fd, size, &s);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        sb_failf(err, errlen, "writing %s: %s", path, strerror(e));
        unlink(path);
        return -1;
    }
    return 0;
}

/* Free each thread's state (c->state[t]) and the one buffer it owns, the
 * pointer at byte buf_offset of it. */
void sb_free_states(struct sb_ctx *c, size_t buf_offset)
{
    for (int t = 0; t < c->o.threads; t++) {
        char *st = c->state[t];
        if (st)
            free(*(void **)(st + buf_offset));
        free(st);
        c->state[t] = NULL;
    }
}

/* The data files of the table scan and the buffer manager: sb-data-<t>.dat,
 * one per thread, file_size bytes each (created or reused, not timed). */
int sb_prepare_data(struct sb_ctx *c)
{
    char path[4096], err[SB_ERRLEN];
    c->files_reused = true;
    for (int t = 0; t < c->o.threads; t++) {
        bool reused;
        sb_file_path(path, sizeof path, c->o.dir, "data", t);
        if (sb_data_file(path, c->o.file_size, sb_seed(c->o.seed, t, -1), &reused, err,
                         sizeof err) != 0) {
            sb_fail(c, "%s", err);
            return -1;
        }
        c->files_reused &= reused;
    }
    return 0;
}
