/*
 * plog.h - an append-only log on libpmem2 (our replacement for PMDK's
 * libpmemlog, deprecated upstream and gone in PMDK 2.0).
 *
 * File layout: a 4 KiB header, then `capacity` bytes of log.  The header's
 * first cache line holds the magic "SBPLOG01", the version and the capacity;
 * the tail offset (bytes of log in use) has a cache line of its own at byte
 * 64.  Like libpmemlog the log is a byte stream: entries have no framing,
 * a reader walks it in chunks of the entry size.
 *
 * Append: the entry is copied to data + tail with the mapping's memcpy_fn
 * (which persists it), then the new tail is stored (one aligned 8-byte store,
 * failure atomic) and persisted.  A crash between the two leaves the old
 * tail: the entry is not in the log, nothing torn ever is.
 */
#ifndef SB_PLOG_H
#define SB_PLOG_H

#include "pager.h"

#include <libpmem2.h>
#include <stddef.h>
#include <stdint.h>

#define PLOG_MAGIC "SBPLOG01"
#define PLOG_VERSION 1
#define PLOG_HEADER 4096

struct plog_header {
    char magic[8];
    uint64_t version;
    uint64_t capacity;
    uint64_t pad0[5];
    uint64_t tail;        /* at byte 64: a cache line of its own */
    uint64_t pad1[7];
};

struct plog {
    int fd;
    struct sb_pmem2 pm;
    struct plog_header *hdr;
    char *data;
    uint64_t capacity;
    uint64_t tail;        /* DRAM copy of hdr->tail */
    pmem2_memcpy_fn memcpy_fn;
    pmem2_persist_fn persist_fn;
};

/* Create `path` (replacing it) with room for `capacity` bytes of log; every
 * byte of it is written once (so later appends overwrite allocated, written
 * blocks: a recycled log), the tail is 0. */
int plog_create(const char *path, uint64_t capacity, char *err, size_t errlen);
/* Open an existing log; -1 with a message if it is not one. */
int plog_open(struct plog *l, const char *path, char *err, size_t errlen);
/* Append n bytes; -1 with errno ENOSPC when they do not fit. */
int plog_append(struct plog *l, const void *buf, size_t n);
/* Empty the log (tail 0, persisted). */
void plog_reset(struct plog *l);
/* Call cb on consecutive chunks of `chunk` bytes (the last may be shorter)
 * from the start to the tail; stops when cb returns non-zero. */
void plog_walk(struct plog *l, size_t chunk, int (*cb)(const void *, size_t, void *), void *arg);
int plog_close(struct plog *l);

#endif
