/*-------------------------------------------------------------------------
 *
 * nvm_buf.h
 *	  pgnvm se2: shared buffers that point into memory mappings of the
 *	  relation files ("PtrRedirection layer").
 *
 * A shared buffer is *redirected* when its page is not in its slot of the
 * buffer pool but read in place from the relation file, through each
 * process's own read-only mapping of the segment.  The redirection is
 * recorded in shared memory (NvmBufferFlags, one byte per buffer, changed
 * only under the buffer header spinlock); each process caches the address of
 * the page in its own mapping (NvmBufferPages) for the buffers it has pinned.
 * BufferGetBlock() consults both.  See docs/storage-engines.md.
 *
 * src/include/storage/nvm_buf.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_BUF_H
#define NVM_BUF_H

#include "storage/block.h"
#include "storage/buf.h"

/* bits of NvmBufferFlags[] */
#define NVM_BUF_REDIRECTED		0x01	/* page is read in place from the file */
#define NVM_BUF_COW_RUNNING		0x02	/* a process is copying it into the
										 * slot */

/* shared: one byte per shared buffer; NULL in processes not attached */
extern PGDLLIMPORT volatile uint8 *NvmBufferFlags;

/*
 * per process: address of each pinned redirected buffer's page in this
 * process's mapping, or NULL.  The array itself is NULL unless
 * nvm_storage_engine = se2, which keeps BufferGetBlock() to one test of a
 * global in the other engines.
 */
extern PGDLLIMPORT void **NvmBufferPages;

/* per-process counters, summed over processes by pgnvm_stats() */
typedef struct NvmStatsSlot
{
	uint64		mapped_reads;	/* blocks copied from a mapping (se1, se2) */
	uint64		mapped_writes;	/* blocks copied into a mapping */
	uint64		redirects;		/* buffer misses served by redirection */
	uint64		cow_copies;		/* redirected pages copied into their slot */
	uint64		hints_skipped;	/* hint bits not set on a redirected page */
	uint64		prefetch_jobs;	/* ranges prefetched (nvm_prefetch.c) */
	uint64		prefetch_bytes; /* their bytes */
	uint64		prefetch_dropped;	/* jobs dropped: helper queue full */
} NvmStatsSlot;

extern PGDLLIMPORT NvmStatsSlot *NvmStats;
extern PGDLLIMPORT int NvmStatsSlots;
extern PGDLLIMPORT NvmStatsSlot *MyNvmStats;

/* set by the buffer manager around smgrstartreadv(): may this read redirect? */
extern PGDLLIMPORT bool NvmRedirectNextRead;

extern Size NvmBufShmemSize(void);
extern void NvmBufShmemInit(void);
extern void NvmBufInitAccess(void);

extern void *NvmBufferGetBlockSlow(Buffer buffer);
extern void NvmBufferForgetView(Buffer buffer);
extern void NvmBufferCow(Buffer buffer);
extern bool NvmBufferIsRedirected(Buffer buffer);
extern bool NvmPointerInMapping(const void *ptr);

/* the read redirection in progress in this process (see nvm_smgr.c) */
extern void NvmRedirectBegin(int n, Buffer *buffers, char **pages);
extern void NvmRedirectEnd(void);
extern char *NvmRedirectTarget(Buffer buffer);
extern void NvmRedirectDone(Buffer buffer, char *page);

extern bool NvmLiveViews(void);

#endif							/* NVM_BUF_H */
