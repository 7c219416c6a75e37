/*
 * plog.c - the append-only log of plog.h on libpmem2.
 */
#define _GNU_SOURCE
#include "plog.h"

#include "sb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Map the open file l->fd with libpmem2 (any granularity). */
static int map_fd(struct plog *l, char *err, size_t errlen)
{
    if (sb_pmem2_map(&l->pm, l->fd, err, errlen) != 0)
        return -1;
    l->hdr = pmem2_map_get_address(l->pm.map);
    l->data = (char *)l->hdr + PLOG_HEADER;
    l->memcpy_fn = pmem2_get_memcpy_fn(l->pm.map);
    l->persist_fn = pmem2_get_persist_fn(l->pm.map);
    return 0;
}

int plog_create(const char *path, uint64_t capacity, char *err, size_t errlen)
{
    unlink(path);
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0644);
    if (fd < 0) {
        sb_failf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    /* write every byte once, zeros (a recycled log has written blocks) */
    if (sb_fill_fd(fd, PLOG_HEADER + capacity, NULL) != 0) {
        sb_failf(err, errlen, "writing %s: %s", path, strerror(errno));
        close(fd);
        unlink(path);
        return -1;
    }
    struct plog l = {.fd = fd};
    if (map_fd(&l, err, errlen) != 0) {
        plog_close(&l);
        unlink(path);
        return -1;
    }
    struct plog_header h = {.version = PLOG_VERSION, .capacity = capacity, .tail = 0};
    memcpy(h.magic, PLOG_MAGIC, 8);
    /* the magic last: a header without it is not a log */
    l.memcpy_fn((char *)l.hdr + 8, (char *)&h + 8, sizeof h - 8, 0);
    l.memcpy_fn(l.hdr->magic, h.magic, 8, 0);
    return plog_close(&l);
}

int plog_open(struct plog *l, const char *path, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    l->fd = open(path, O_RDWR);
    if (l->fd < 0) {
        sb_failf(err, errlen, "open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(l->fd, &st) != 0 || (uint64_t)st.st_size < PLOG_HEADER) {
        sb_failf(err, errlen, "%s: not a log (too small)", path);
        goto fail;
    }
    if (map_fd(l, err, errlen) != 0)
        goto fail;
    if (memcmp(l->hdr->magic, PLOG_MAGIC, 8) != 0 || l->hdr->version != PLOG_VERSION) {
        sb_failf(err, errlen, "%s: not a log (bad magic or version)", path);
        goto fail;
    }
    l->capacity = l->hdr->capacity;
    l->tail = l->hdr->tail;
    if (PLOG_HEADER + l->capacity > (uint64_t)st.st_size || l->tail > l->capacity) {
        sb_failf(err, errlen, "%s: damaged header (capacity %llu, tail %llu, file %lld bytes)",
                 path, (unsigned long long)l->capacity, (unsigned long long)l->tail,
                 (long long)st.st_size);
        goto fail;
    }
    return 0;
fail:
    plog_close(l);
    return -1;
}

int plog_append(struct plog *l, const void *buf, size_t n)
{
    if (n > l->capacity - l->tail) {
        errno = ENOSPC;
        return -1;
    }
    l->memcpy_fn(l->data + l->tail, buf, n, 0);   /* the entry, persisted */
    l->tail += n;
    l->hdr->tail = l->tail;                       /* then the tail */
    l->persist_fn(&l->hdr->tail, sizeof l->hdr->tail);
    return 0;
}

void plog_reset(struct plog *l)
{
    l->tail = 0;
    l->hdr->tail = 0;
    l->persist_fn(&l->hdr->tail, sizeof l->hdr->tail);
}

void plog_walk(struct plog *l, size_t chunk, int (*cb)(const void *, size_t, void *), void *arg)
{
    for (uint64_t off = 0; off < l->tail; off += chunk) {
        size_t n = l->tail - off < chunk ? (size_t)(l->tail - off) : chunk;
        if (cb(l->data + off, n, arg) != 0)
            break;
    }
}

int plog_close(struct plog *l)
{
    int rc = sb_pmem2_unmap(&l->pm);
    if (l->fd >= 0)
        rc |= close(l->fd);
    l->fd = -1;
    l->hdr = NULL;
    return rc ? -1 : 0;
}
