/*
 * pager.c - the page I/O paths of pager.h.
 *
 *   pread    pread(2) into the caller's buffer; a write is pwrite(2) and
 *            fdatasync(2) (the paper's Linux I/O path syncs every write)
 *   odirect  the same on a file opened O_DIRECT (buffers and offsets are
 *            page aligned; table scan only)
 *   mmap     memcpy from a MAP_SHARED mapping of the whole file; a write is
 *            memcpy into it and msync(MS_SYNC) of the page
 *   pmem2    a libpmem2 mapping: memcpy reads; a write is the mapping's
 *            pmem2_memcpy_fn with flags 0, which copies and persists: with
 *            page granularity (no DAX, e.g. tmpfs or a disk) it msyncs, with
 *            cache-line granularity (real PMem, or PMEM2_FORCE_GRANULARITY=
 *            CACHE_LINE) it flushes the lines (non-temporal stores or
 *            clwb/clflushopt) and fences
 *
 * Mappings are made in sb_pager_open, so the page faults of the first touch
 * fall into the timed part (the harness opens the pager per repetition).
 */
#define _GNU_SOURCE
#include "pager.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *sb_granularity_name(enum pmem2_granularity g)
{
    switch (g) {
    case PMEM2_GRANULARITY_BYTE: return "byte";
    case PMEM2_GRANULARITY_CACHE_LINE: return "cache-line";
    case PMEM2_GRANULARITY_PAGE: return "page";
    }
    return "unknown";
}

int sb_pmem2_map(struct sb_pmem2 *m, int fd, char *err, size_t errlen)
{
    if (pmem2_config_new(&m->cfg) != 0 || pmem2_source_from_fd(&m->src, fd) != 0 ||
        pmem2_config_set_required_store_granularity(m->cfg, PMEM2_GRANULARITY_PAGE) != 0 ||
        pmem2_map_new(&m->map, m->cfg, m->src) != 0) {
        sb_failf(err, errlen, "libpmem2: %s", pmem2_errormsg());
        return -1;
    }
    return 0;
}

int sb_pmem2_unmap(struct sb_pmem2 *m)
{
    int rc = 0;
    if (m->map)
        rc = pmem2_map_delete(&m->map);
    if (m->src)
        pmem2_source_delete(&m->src);
    if (m->cfg)
        pmem2_config_delete(&m->cfg);
    return rc ? -1 : 0;
}

/* Open `file` for the path (O_DIRECT for odirect) and map it for mmap and
 * pmem2; -1 with a message in err. */
int sb_pager_open(struct sb_pager *p, const char *file, enum sb_path path, size_t page_size,
                  bool writable, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->path = path;
    p->page_size = page_size;
    p->fd = -1;
    int flags = writable ? O_RDWR : O_RDONLY;
    if (path == SB_PATH_ODIRECT)
        flags |= O_DIRECT;
    p->fd = open(file, flags);
    if (p->fd < 0) {
        sb_failf(err, errlen, "open %s%s: %s", file, path == SB_PATH_ODIRECT ? " (O_DIRECT)" : "",
                 strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(p->fd, &st) != 0) {
        sb_failf(err, errlen, "fstat %s: %s", file, strerror(errno));
        goto fail;
    }
    p->file_size = (uint64_t)st.st_size;
    p->npages = p->file_size / page_size;
    if (p->npages == 0) {
        sb_failf(err, errlen, "%s is smaller than one page", file);
        goto fail;
    }
    if (path == SB_PATH_MMAP) {
        int prot = PROT_READ | (writable ? PROT_WRITE : 0);
        void *m = mmap(NULL, p->file_size, prot, MAP_SHARED, p->fd, 0);
        if (m == MAP_FAILED) {
            sb_failf(err, errlen, "mmap %s: %s", file, strerror(errno));
            goto fail;
        }
        p->map = m;
    } else if (path == SB_PATH_PMEM2) {
        if (sb_pmem2_map(&p->pm, p->fd, err, errlen) != 0)
            goto fail;
        p->map = pmem2_map_get_address(p->pm.map);
        p->pmem_memcpy = pmem2_get_memcpy_fn(p->pm.map);
    }
    return 0;
fail:
    sb_pager_close(p);
    return -1;
}

/* Read page `page` into dst (page_size bytes). */
int sb_pager_read(struct sb_pager *p, uint64_t page, void *dst)
{
    uint64_t off = page * p->page_size;
    if (p->map) {
        memcpy(dst, p->map + off, p->page_size);
        return 0;
    }
    ssize_t r = pread(p->fd, dst, p->page_size, (off_t)off);
    return r == (ssize_t)p->page_size ? 0 : -1;
}

/* Write page `page` from src and make it durable (see the file's header). */
int sb_pager_write(struct sb_pager *p, uint64_t page, const void *src)
{
    uint64_t off = page * p->page_size;
    switch (p->path) {
    case SB_PATH_MMAP:
        memcpy(p->map + off, src, p->page_size);
        return msync(p->map + off, p->page_size, MS_SYNC);   /* off is page aligned */
    case SB_PATH_PMEM2:
        p->pmem_memcpy(p->map + off, src, p->page_size, 0);
        return 0;
    default:
        if (pwrite(p->fd, src, p->page_size, (off_t)off) != (ssize_t)p->page_size)
            return -1;
        return fdatasync(p->fd);
    }
}

/* Unmap (munmap or the libpmem2 mapping) and close; 0 or -1. */
int sb_pager_close(struct sb_pager *p)
{
    int rc = 0;
    if (p->path == SB_PATH_PMEM2)
        rc |= sb_pmem2_unmap(&p->pm);
    else if (p->map)
        rc |= munmap(p->map, p->file_size);
    if (p->fd >= 0)
        rc |= close(p->fd);
    p->map = NULL;
    p->fd = -1;
    return rc ? -1 : 0;
}

int sb_pager_open_data(struct sb_ctx *c, int tid, bool writable)
{
    char path[4096], err[SB_ERRLEN];
    sb_file_path(path, sizeof path, c->o.dir, "data", tid);
    if (sb_pager_open((struct sb_pager *)c->state[tid], path, c->o.path, c->o.page_size, writable,
                      err, sizeof err) != 0) {
        sb_fail(c, "%s", err);
        return -1;
    }
    return 0;
}

int sb_pager_close_rep(struct sb_ctx *c, int tid)
{
    return sb_pager_close((struct sb_pager *)c->state[tid]);
}

const char *sb_pager_granularity(const struct sb_pager *p)
{
    if (!p->pm.map)
        return "";
    return sb_granularity_name(pmem2_map_get_store_granularity(p->pm.map));
}
