/*-------------------------------------------------------------------------
 *
 * nvm_slots.h
 *	  pgnvm se2, the hybrid pool: buffer descriptors apart from the DRAM
 *	  slots that hold their pages.
 *
 * In se2 a shared buffer's page, when it is in DRAM, lives in a *slot* of
 * Buffer Blocks, NvmSlotOf[buf_id]; NvmSlotOwner[slot] is the inverse.  With
 * nvm_buffer_descriptors set (the hybrid pool) there are NBuffers
 * descriptors (that setting) but only NvmNSlots slots (shared_buffers): a
 * redirected buffer, whose page is read in place from the relation file,
 * holds none, and a slot is taken when a page must be copied into DRAM (a
 * miss that copies, an extension, a zeroed page, a copy-on-write) and given
 * back when its buffer leaves the pool or is demoted to redirected by the
 * slot clock (or, ahead of it, by the background writer's pass over the
 * slots, which also writes dirty owners back: NvmSlotClean()).  Without
 * it (and always in base and se1) NvmNSlots = NBuffers and descriptor i
 * owns slot i from start to shutdown, as in stock PostgreSQL; in base
 * and se1 the maps are not even allocated.  The invariants (H1-H9, H5a)
 * are in docs/storage-engines.md, "se2: descriptors without DRAM".
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_slots.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_SLOTS_H
#define NVM_SLOTS_H

/* the buffer pool (bufmgr.h), for NvmSlotBlock() */
extern PGDLLIMPORT char *BufferBlocks;

#define NVM_NO_SLOT		(-1)

/* number of slots in Buffer Blocks (= NBuffers unless the pool is hybrid) */
extern PGDLLIMPORT int NvmNSlots;

/* se2 with nvm_buffer_descriptors: slots are assigned and given back */
extern PGDLLIMPORT bool NvmHybridPool;

/* the number of buffer descriptors (miscadmin.h, bufmgr.h) */
extern PGDLLIMPORT int NBuffers;

/*
 * NvmSharedBuffers -- shared_buffers as the user set it: the DRAM slots.
 *
 * What PostgreSQL sizes or autotunes from shared_buffers for pages in DRAM
 * (the checkpointer's request queue, the subtransaction and commit timestamp
 * SLRUs (the commit log's follows NBuffers: patch 0028), wal_buffers,
 * io_max_concurrency, the hash index build's sort threshold) follows this,
 * not NBuffers, which counts descriptors in the hybrid pool (H8 of
 * docs/storage-engines.md).  Without the hybrid pool it is NBuffers, as
 * stock; so it is before NvmBufferPoolSizes() decided, when NBuffers still
 * holds shared_buffers: callers may run at any time.
 */
static inline int
NvmSharedBuffers(void)
{
	return NvmHybridPool ? NvmNSlots : NBuffers;
}

/* shared, se2 only (NULL in base and se1) */
extern PGDLLIMPORT int32 *NvmSlotOf;	/* [NBuffers]: slot or NVM_NO_SLOT */
extern PGDLLIMPORT int32 *NvmSlotOwner; /* [NvmNSlots]: buf_id or NVM_NO_SLOT */

/*
 * NvmSlotBlock -- the slot's memory of the buffer with descriptor buf_id.
 *
 * The buffer must hold a slot: only a process that may touch the page's
 * bytes asks (a pin, or the buffer's I/O or copy in progress), and such a
 * buffer holds one unless it is redirected (H1, H3); check builds assert it.
 */
static inline char *
NvmSlotBlock(int buf_id)
{
	int32		slot = likely(NvmSlotOf == NULL) ? buf_id : NvmSlotOf[buf_id];

	Assert(slot != NVM_NO_SLOT);
	Assert(NvmSlotOf == NULL || NvmSlotOwner[slot] == buf_id);
	return BufferBlocks + (Size) slot * BLCKSZ;
}

/* counters and a consistency scan of the pool, for contrib/pgnvm */
typedef struct NvmPoolReport
{
	bool		hybrid;			/* nvm_buffer_descriptors in effect */
	int64		descriptors;	/* NBuffers */
	int64		descriptors_in_use; /* with a valid tag */
	int64		redirected;		/* read in place */
	int64		copied;			/* valid, in a slot */
	int64		slots;			/* the budget, NvmNSlots */
	int64		slots_in_use;	/* held by a descriptor (the counter) */
	int64		slots_in_use_peak;	/* the counter's highest value */
	int64		slots_free;		/* on the free list */
	int64		slots_held;		/* descriptors found holding a slot */
	int64		redirected_with_slot;	/* H1 broken: must be 0 */
	int64		slot_map_mismatches;	/* NvmSlotOwner disagrees: must be 0 */
	int64		demotions;		/* slot clock: copies made redirected */
	int64		slot_evictions; /* slot clock: copies evicted */
	int64		slot_writes;	/* slot clock: dirty copies written back */
	int64		cleaner_writes; /* bgwriter ahead of the clock: written back */
	int64		cleaner_demotions;	/* bgwriter: demoted onto the free list */
} NvmPoolReport;

extern void NvmBufferPoolSizes(void);
extern Size NvmSlotsShmemSize(void);
extern void NvmSlotsShmemInit(void);

/*
 * the hybrid pool's assignments (NvmHybridPool only); Attach and Detach with
 * the descriptor's header spinlock held
 */
extern int32 NvmSlotGet(void);
extern int32 NvmSlotTryGet(void);
extern void NvmSlotAttach(int buf_id, int32 slot);
extern int32 NvmSlotDetach(int buf_id);
extern void NvmSlotFree(int32 slot);
extern void NvmSlotEnsure(int buf_id);
extern void NvmSlotInvalidated(int buf_id);

extern void NvmPoolScan(NvmPoolReport *report);

/* the background writer's pass ahead of the slot clock (patch 0025) */
extern bool NvmSlotClean(void);
extern int	NvmSlotCleanerWait(long delay_ms);

/*
 * bufmgr.c (patch 0015), for the slot clock: write back a dirty unpinned
 * buffer (conditional content lock), evict a clean unpinned one (no lock)
 */
extern bool NvmFlushUnpinnedBuffer(int buf_id);
extern bool NvmEvictCleanUnpinnedBuffer(int buf_id);

#endif							/* NVM_SLOTS_H */
