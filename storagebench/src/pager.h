/*
 * pager.h - page-sized reads and writes of one file over one I/O path:
 * pread/pwrite (+ fdatasync), O_DIRECT, mmap + memcpy (+ msync), or a
 * libpmem2 mapping (memcpy reads, pmem2 memcpy_fn writes that persist).
 * A write includes its persistence step, so its cost is in the time.
 */
#ifndef SB_PAGER_H
#define SB_PAGER_H

#include "sb.h"

#include <libpmem2.h>

/* A libpmem2 mapping of a whole open file and what it was made from. */
struct sb_pmem2 {
    struct pmem2_config *cfg;
    struct pmem2_source *src;
    struct pmem2_map *map;
};

/* Map the open file fd with libpmem2, accepting any store granularity (PAGE
 * is the weakest requirement; the one the mapping reports decides how its
 * memcpy/persist functions persist).  -1 with libpmem2's message. */
int sb_pmem2_map(struct sb_pmem2 *m, int fd, char *err, size_t errlen);
/* Undo sb_pmem2_map (also a partial one); 0 or -1. */
int sb_pmem2_unmap(struct sb_pmem2 *m);

struct sb_pager {
    enum sb_path path;
    int fd;
    size_t page_size;
    uint64_t npages;
    uint64_t file_size;
    char *map;                   /* mmap / libpmem2 */
    struct sb_pmem2 pm;
    pmem2_memcpy_fn pmem_memcpy;
};

int sb_pager_open(struct sb_pager *p, const char *file, enum sb_path path, size_t page_size,
                  bool writable, char *err, size_t errlen);
int sb_pager_read(struct sb_pager *p, uint64_t page, void *dst);
int sb_pager_write(struct sb_pager *p, uint64_t page, const void *src);
int sb_pager_close(struct sb_pager *p);
/* Open thread tid's data file (sb-data-<tid>.dat) over the run's path into
 * the pager its per-thread state starts with; 0, or -1 with sb_fail. */
int sb_pager_open_data(struct sb_ctx *c, int tid, bool writable);
/* close_rep of a workload whose per-thread state starts with its pager. */
int sb_pager_close_rep(struct sb_ctx *c, int tid);
/* libpmem2's store granularity of the mapping ("byte", "cache-line",
 * "page"), "" for the other paths. */
const char *sb_pager_granularity(const struct sb_pager *p);
const char *sb_granularity_name(enum pmem2_granularity g);

#endif
