/*-------------------------------------------------------------------------
 *
 * nvm_stats.h
 *	  pgnvm: the counters of the storage engines, one definition.
 *
 * NVM_STATS_COUNTERS() is the only list of the counters: the per-process
 * slot below, contrib/pgnvm's pgnvm_stats() and pgnvm_counters(), and the
 * Python readers of the pgnvm repository (which parse the X(...) lines of
 * this file) all derive from it.  Keep one counter per line, in the form
 * X(name, "description"): the order is the column order of pgnvm_stats.
 *
 * Each process counts into its own slot of a shared array (one slot per
 * PGPROC, padded to a cache line, written only by its process); readers sum
 * the slots, or read one process's slot (NvmStatsOfProc()).  A process
 * without a slot (the postmaster, a standalone backend before InitProcess())
 * counts into a private slot nobody reads.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_STATS_H
#define NVM_STATS_H

#include "storage/procnumber.h"

#define NVM_STATS_COUNTERS(X) \
	X(mapped_reads, "blocks copied from a relation file mapping into a buffer (se1, se2)") \
	X(mapped_writes, "blocks copied from a buffer into a relation file mapping (se1, se2)") \
	X(persisted_writes, "of those, blocks made durable at once, with nothing left for the checkpoint to fsync (nvm_data_persist = pmem; se1, se2)") \
	X(redirects, "buffer misses served in place: the buffer points into the mapping (se2)") \
	X(cow_copies, "redirected pages copied into their buffer before a change (se2)") \
	X(hints_skipped, "hint bits not set because the tuple was on a redirected page (se2)") \
	X(prefetch_jobs, "ranges of redirected blocks handed to prefetching (se2)") \
	X(prefetch_bytes, "bytes of those ranges (se2)") \
	X(prefetch_dropped, "prefetch jobs dropped because the helper queue was full (se2)") \
	X(verified_by_helper, "redirected pages whose verification a prefetch helper had done: its verdict was used (se2)") \
	X(verified_by_backend, "redirected pages the backend verified itself in the read's completion (se2)") \
	X(helper_verify_failed, "redirected pages a prefetch helper found invalid: never trusted, the backend verified them itself (se2)") \
	X(mappings_created, "segment mappings made (se1, se2)") \
	X(mappings_evicted, "segment mappings given up to stay within nvm_max_mappings (se1, se2)") \
	X(mapping_fallbacks, "reads and writes done with read()/write() because a segment could not be mapped (se1, se2)") \
	X(views_kept, "pins of a redirected buffer whose view came from the buffer's tag through this process's cache of segment mappings: no look-up (se2)") \
	X(views_resolved, "pins of a redirected buffer that looked its segment's mapping up (no usable entry in the segment cache) (se2)") \
	X(views_stale, "segment-cache entries found stale at a pin (their mapping was let go) and looked up again (se2)") \
	X(view_mismatches, "segment-cache entries whose epoch matched but whose mapping was not of the tag's segment: not used; must be 0 (se2)") \
	X(prunes_deferred, "on-access prunes a read-only heap fetch left to the page's next change because the page was read in place: not copied to be pruned (se2)")

/* one process's counters */
typedef struct NvmStatsSlot
{
#define NVM_STATS_FIELD(name, description) uint64 name;
	NVM_STATS_COUNTERS(NVM_STATS_FIELD)
#undef NVM_STATS_FIELD
} NvmStatsSlot;

/* ... padded, so that processes never write into each other's cache lines */
typedef union NvmStatsSlotPadded
{
	NvmStatsSlot slot;
	char		pad[CACHELINEALIGN(sizeof(NvmStatsSlot))];
} NvmStatsSlotPadded;

/* a counter's name and description, in NVM_STATS_COUNTERS() order */
typedef struct NvmStatsCounterInfo
{
	const char *name;
	const char *description;
	size_t		offset;			/* in NvmStatsSlot */
} NvmStatsCounterInfo;

extern PGDLLIMPORT const NvmStatsCounterInfo NvmStatsCounters[];
extern PGDLLIMPORT const int NvmStatsNumCounters;

/* this process's slot; counting is MyNvmStats->name++ */
extern PGDLLIMPORT NvmStatsSlot *MyNvmStats;

extern Size NvmStatsShmemSize(void);
extern void NvmStatsShmemInit(void);
extern void NvmStatsAttach(void);
extern void NvmStatsSum(uint64 *sums);
extern bool NvmStatsOfProc(ProcNumber procno, uint64 *values);

#endif							/* NVM_STATS_H */
