/*-------------------------------------------------------------------------
 *
 * nvm_slots.c
 *	  pgnvm se2, the hybrid pool: DRAM slots apart from buffer descriptors.
 *
 * With nvm_storage_engine = se2 and nvm_buffer_descriptors set, NBuffers is
 * the number of buffer descriptors (that setting) and Buffer Blocks holds
 * only NvmNSlots slots of BLCKSZ (shared_buffers): a redirected buffer,
 * whose page is read in place from the relation file (nvm_buf.c), needs a
 * descriptor but no DRAM.  This file owns the assignment of slots to
 * descriptors (NvmSlotOf[], NvmSlotOwner[]), the free list of slots, and the
 * slot clock that takes a slot from a copied buffer when the free list is
 * empty.  The rules are H1-H9 of docs/storage-engines.md ("se2: descriptors
 * without DRAM"); in short:
 *
 * - A descriptor holds a slot while its page is in DRAM: valid and not
 *   redirected, or while a read, an extension, a zeroing or a copy-on-write
 *   puts bytes into it.  GetVictimBuffer() gives every victim a slot
 *   (NvmSlotEnsure()), so every miss, extension and RBM_ZERO_* has one
 *   before its bytes go in; a read that redirects gives it back when it
 *   completes (NvmRedirectDone()), a copy-on-write takes one before it
 *   copies (NvmBufferCow()), and invalidation or eviction gives it back
 *   (NvmBufferInvalidated()).
 * - Assignments change only under the descriptor's header spinlock, by the
 *   process that owns the buffer (its only pin, its I/O, its copy), or, for
 *   an unpinned buffer, by the slot clock.
 * - The slot clock passes over the slots' owners as the descriptor clock
 *   passes over descriptors: it skips pinned ones and those with I/O or a
 *   copy in progress, decrements usage counts, writes back a dirty owner
 *   first (as GetVictimBuffer() does, through NvmFlushUnpinnedBuffer() in
 *   bufmgr.c, with a conditional content lock), and then *demotes* an owner
 *   of a main-fork page of a permanent relation: it becomes redirected,
 *   keeping its descriptor, tag and usage, and its slot is free.  Other
 *   owners (FSM, VM, init forks, unlogged relations) and pages that are not
 *   the file's verified bytes (NVM_BUF_NO_DEMOTE: zeroed by
 *   zero_damaged_pages, or read ignoring a checksum failure) are evicted,
 *   clean only (NvmEvictCleanUnpinnedBuffer() takes no content lock: its
 *   holder may be waiting for one the clock's caller holds).
 * - The background writer cleans ahead of the slot clock (NvmSlotClean(),
 *   called from its main loop, patch 0025), as BgBufferSync() cleans ahead
 *   of the descriptor clock: from the hand on, it writes back dirty,
 *   unpinned owners with usage count 0 (the same NvmFlushUnpinnedBuffer())
 *   and demotes clean ones onto the free list, up to a small reserve, so
 *   that a backend's copy-on-write pops a free slot instead of running the
 *   clock and writing a page back itself.  It never decrements a usage
 *   count (stock's bgwriter does not either) and never evicts.  Its rounds
 *   run every bgwriter_delay and whenever a backend finds the free list
 *   empty (which wakes it: NvmSlotCleanerWait()); bgwriter_lru_maxpages
 *   bounds one round's writes, and 0 turns the pass off, as it does stock's.
 *
 * Without nvm_buffer_descriptors (and always in base and se1) NvmNSlots =
 * NBuffers, descriptor i owns slot i from start to shutdown, and nothing
 * here runs but the sizing; base and se1 do not even allocate the maps.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/storage/buffer/nvm_slots.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgwriter.h"
#include "postmaster/interrupt.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_slots.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc_tables.h"
#include "utils/nvm_guc.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* the sizes (NvmBufferPoolSizes()) */
int			NvmNSlots = 0;
bool		NvmHybridPool = false;

/* se2: descriptor -> slot and slot -> descriptor; NULL otherwise */
int32	   *NvmSlotOf = NULL;
int32	   *NvmSlotOwner = NULL;

/*
 * The hybrid pool's shared state: the free list of slots (a stack, under
 * its spinlock), the slot clock's hand, and counters.  A slot is either
 * on the free list, or held by a descriptor (NvmSlotOwner[slot] = buf_id),
 * or, for a moment, in the hands of one process (taken from the free list or
 * from its owner, not yet attached; NvmSlotOwner[slot] = NVM_NO_SLOT).
 */
typedef struct NvmSlotCtl
{
	slock_t		lock;			/* protects nfree and free[] */
	int32		nfree;
	pg_atomic_uint32 hand;		/* the slot clock's next slot */
	pg_atomic_uint32 in_use;	/* slots held by descriptors */
	pg_atomic_uint32 in_use_peak;
	pg_atomic_uint64 demotions; /* by the clock and the cleaner */
	pg_atomic_uint64 evictions;
	pg_atomic_uint64 writes;	/* write-backs by the clock's callers */
	pg_atomic_uint64 taken;		/* slots handed out (NvmSlotGet/TryGet) */
	/* the background writer's pass ahead of the clock (NvmSlotClean()) */
	pg_atomic_uint64 cleaner_writes;
	pg_atomic_uint64 cleaner_demotions;
	pg_atomic_uint32 cleaner_proc;	/* its ProcNumber + 1, 0 if none */
	pg_atomic_uint32 cleaner_wanted;	/* a backend found no free slot */
	int32		free[FLEXIBLE_ARRAY_MEMBER];	/* [NvmNSlots] */
} NvmSlotCtl;

static NvmSlotCtl *SlotCtl = NULL;

static const char *nvm_show_shared_buffers(void);
static bool nvm_check_shared_buffers(int *newval, void **extra,
									 GucSource source);


/*
 * NvmBufferPoolSizes -- decide NBuffers and NvmNSlots, before anything is
 * sized from them (first thing in CalculateShmemSize(), patch 0015).
 *
 * Without nvm_buffer_descriptors the slots are the descriptors.  With it
 * (se2 only: H9), shared_buffers becomes the number of slots and NBuffers
 * the number of descriptors; so that SHOW shared_buffers and pg_settings go
 * on showing the DRAM for pages, and a configuration reload does not take the
 * setting for a change, shared_buffers gets a show and a check hook
 * translating between the two.  Called again (the postmaster sizes shared
 * memory more than once, and again after a crash), it changes nothing.
 */
void
NvmBufferPoolSizes(void)
{
	static bool decided = false;
	struct config_generic *record;

	if (decided)
		return;

	NvmNSlots = NBuffers;
	if (nvm_buffer_descriptors == 0)
	{
		decided = true;
		return;
	}
	if (nvm_storage_engine != NVM_ENGINE_SE2)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"nvm_buffer_descriptors\" requires \"nvm_storage_engine\" = se2"),
				 errdetail("Only se2 reads pages in place, so only se2 can have more buffer descriptors than \"shared_buffers\"."),
				 errhint("Set \"nvm_storage_engine\" to se2, or \"nvm_buffer_descriptors\" to 0.")));
	if (nvm_buffer_descriptors < NBuffers)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"nvm_buffer_descriptors\" (%d) must not be less than \"shared_buffers\" (%d)",
						nvm_buffer_descriptors, NBuffers),
				 errdetail("\"shared_buffers\" is the DRAM for copied pages, each of which needs a descriptor.")));

	NBuffers = nvm_buffer_descriptors;
	NvmHybridPool = true;
	decided = true;

	record = find_option("shared_buffers", false, false, ERROR);
	Assert(record->vartype == PGC_INT);
	((struct config_int *) record)->show_hook = nvm_show_shared_buffers;
	((struct config_int *) record)->check_hook = nvm_check_shared_buffers;
}

/*
 * SHOW shared_buffers (and pg_settings.setting) in the hybrid pool: the
 * number of slots, in the setting's unit of blocks.  A show hook serves both,
 * so it cannot add a unit for one only: a bare number of 8 kB blocks is what
 * pg_settings shows, and a valid value of the setting.
 */
static const char *
nvm_show_shared_buffers(void)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "%d", NvmNSlots);
	return buf;
}

/*
 * shared_buffers set again (a reload) in the hybrid pool: the configured
 * number of slots is the value in effect, which the variable, NBuffers,
 * holds as the number of descriptors.
 */
static bool
nvm_check_shared_buffers(int *newval, void **extra, GucSource source)
{
	if (*newval == NvmNSlots)
		*newval = NBuffers;
	return true;
}

/* the slot maps (se2) and the hybrid pool's control (with it only) */
static Size
nvm_slot_maps_size(void)
{
	if (nvm_storage_engine != NVM_ENGINE_SE2)
		return 0;
	return add_size(mul_size(NBuffers, sizeof(int32)),
					mul_size(NvmNSlots, sizeof(int32)));
}

static Size
nvm_slot_ctl_size(void)
{
	if (!NvmHybridPool)
		return 0;
	return add_size(offsetof(NvmSlotCtl, free),
					mul_size(NvmNSlots, sizeof(int32)));
}

/*
 * NvmSlotsShmemSize -- shared memory of the slot maps (se2: 4 B per
 * descriptor and 4 B per slot) and of the free list (hybrid pool: 4 B per
 * slot); nvm_shmem.c adds it up with pgnvm's other parts.
 */
Size
NvmSlotsShmemSize(void)
{
	return add_size(nvm_slot_maps_size(), nvm_slot_ctl_size());
}

/*
 * NvmSlotsShmemInit -- allocate or attach the slot maps (from nvm_shmem.c).
 * Without the hybrid pool every descriptor owns its own slot (the identity
 * map); with it every slot starts on the free list.
 */
void
NvmSlotsShmemInit(void)
{
	bool		found;

	Assert(NvmNSlots > 0);
	if (nvm_slot_maps_size() == 0)
		return;

	NvmSlotOf = ShmemInitStruct("pgnvm slot maps", nvm_slot_maps_size(),
								&found);
	NvmSlotOwner = NvmSlotOf + NBuffers;
	if (!found)
	{
		if (!NvmHybridPool)
		{
			for (int i = 0; i < NBuffers; i++)
				NvmSlotOf[i] = NvmSlotOwner[i] = i;
		}
		else
		{
			for (int i = 0; i < NBuffers; i++)
				NvmSlotOf[i] = NVM_NO_SLOT;
			for (int s = 0; s < NvmNSlots; s++)
				NvmSlotOwner[s] = NVM_NO_SLOT;
		}
	}

	if (!NvmHybridPool)
		return;
	SlotCtl = ShmemInitStruct("pgnvm slot free list", nvm_slot_ctl_size(),
							  &found);
	if (!found)
	{
		SpinLockInit(&SlotCtl->lock);
		pg_atomic_init_u32(&SlotCtl->hand, 0);
		pg_atomic_init_u32(&SlotCtl->in_use, 0);
		pg_atomic_init_u32(&SlotCtl->in_use_peak, 0);
		pg_atomic_init_u64(&SlotCtl->demotions, 0);
		pg_atomic_init_u64(&SlotCtl->evictions, 0);
		pg_atomic_init_u64(&SlotCtl->writes, 0);
		pg_atomic_init_u64(&SlotCtl->taken, 0);
		pg_atomic_init_u64(&SlotCtl->cleaner_writes, 0);
		pg_atomic_init_u64(&SlotCtl->cleaner_demotions, 0);
		pg_atomic_init_u32(&SlotCtl->cleaner_proc, 0);
		pg_atomic_init_u32(&SlotCtl->cleaner_wanted, 0);
		/* popped from the end: hand out the lowest slots first */
		SlotCtl->nfree = NvmNSlots;
		for (int s = 0; s < NvmNSlots; s++)
			SlotCtl->free[s] = NvmNSlots - 1 - s;
	}
}

/*
 * NvmSlotFree -- put a slot that nobody holds on the free list.  May be
 * called with a buffer header spinlock held (the free list's spinlock is
 * only ever taken after one, never before).
 */
void
NvmSlotFree(int32 slot)
{
	Assert(NvmHybridPool);
	Assert(slot >= 0 && slot < NvmNSlots);
	Assert(NvmSlotOwner[slot] == NVM_NO_SLOT);

	SpinLockAcquire(&SlotCtl->lock);
	Assert(SlotCtl->nfree < NvmNSlots);
	SlotCtl->free[SlotCtl->nfree++] = slot;
	SpinLockRelease(&SlotCtl->lock);
}

/* a slot from the free list, or NVM_NO_SLOT */
static int32
nvm_slot_pop(void)
{
	int32		slot = NVM_NO_SLOT;

	if (SlotCtl->nfree == 0)	/* unlocked peek: the common case is cheap */
		return NVM_NO_SLOT;
	SpinLockAcquire(&SlotCtl->lock);
	if (SlotCtl->nfree > 0)
		slot = SlotCtl->free[--SlotCtl->nfree];
	SpinLockRelease(&SlotCtl->lock);
	return slot;
}

/*
 * NvmSlotAttach -- give the slot (held by nobody) to descriptor buf_id,
 * which holds none, with its header spinlock held.  The caller owns the
 * buffer (its only pin, its I/O or its copy in progress).
 */
void
NvmSlotAttach(int buf_id, int32 slot)
{
	uint32		in_use;
	uint32		peak;

	Assert(NvmHybridPool);
	Assert(slot >= 0 && slot < NvmNSlots);
	Assert(NvmSlotOf[buf_id] == NVM_NO_SLOT);
	Assert(NvmSlotOwner[slot] == NVM_NO_SLOT);
	NvmSlotOf[buf_id] = slot;
	NvmSlotOwner[slot] = buf_id;

	in_use = pg_atomic_add_fetch_u32(&SlotCtl->in_use, 1);
	Assert(in_use <= (uint32) NvmNSlots);
	peak = pg_atomic_read_u32(&SlotCtl->in_use_peak);
	while (in_use > peak &&
		   !pg_atomic_compare_exchange_u32(&SlotCtl->in_use_peak, &peak, in_use))
		;
}

/*
 * NvmSlotDetach -- take descriptor buf_id's slot away from it, with its
 * header spinlock held; returns the slot (now held by nobody: the caller
 * frees or reuses it) or NVM_NO_SLOT if it held none.
 */
int32
NvmSlotDetach(int buf_id)
{
	int32		slot = NvmSlotOf[buf_id];

	Assert(NvmHybridPool);
	if (slot == NVM_NO_SLOT)
		return NVM_NO_SLOT;
	Assert(NvmSlotOwner[slot] == buf_id);
	NvmSlotOf[buf_id] = NVM_NO_SLOT;
	NvmSlotOwner[slot] = NVM_NO_SLOT;
	pg_atomic_sub_fetch_u32(&SlotCtl->in_use, 1);
	return slot;
}

/*
 * NvmSlotInvalidated -- descriptor buf_id (header spinlock held) lost its
 * page: its slot, if any, goes back on the free list (NvmBufferInvalidated()).
 */
void
NvmSlotInvalidated(int buf_id)
{
	int32		slot = NvmSlotDetach(buf_id);

	if (slot != NVM_NO_SLOT)
		NvmSlotFree(slot);
}

pg_noreturn static void
nvm_no_slot(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("no unpinned buffer slots available"),
			 errhint("Raise \"shared_buffers\", the DRAM for copied pages of the hybrid pool (%d slots).",
					 NvmNSlots)));
}

/*
 * nvm_slot_demote -- demote buf, the owner of slot, with its header spinlock
 * held (buf_state): unpinned, valid, clean, no I/O or copy in progress.  A
 * main-fork page of a permanent relation whose slot holds the file's verified
 * bytes (not NVM_BUF_NO_DEMOTE) becomes redirected (R2's state, H5): returns
 * true, with the slot detached (held by nobody) and the spinlock released.
 * Otherwise returns false with the spinlock still held: the page cannot be
 * read in place, and only eviction frees its slot.
 */
static bool
nvm_slot_demote(BufferDesc *buf, uint32 buf_state, int32 slot)
{
	int			buf_id = buf->buf_id;
	uint8		flags = NvmBufferFlags[buf_id];

	Assert(NvmSlotOf[buf_id] == slot);
	Assert(BUF_STATE_GET_REFCOUNT(buf_state) == 0);
	Assert((buf_state & BM_VALID) && !(buf_state & BM_DIRTY));
	if (!(buf_state & BM_PERMANENT) ||
		BufTagGetForkNum(&buf->tag) != MAIN_FORKNUM ||
		(flags & NVM_BUF_NO_DEMOTE))
		return false;

	/*
	 * Unpinned (and new pins wait for the header spinlock), clean and read
	 * verified, so the file holds exactly these bytes; the next pin reads
	 * them in place.
	 */
	Assert(flags == 0);
	Assert(!(buf_state & BM_NVM_REDIRECTED));
	NvmSlotDetach(buf_id);
	UnlockBufHdr(buf, buf_state | BM_NVM_REDIRECTED);
	pg_atomic_fetch_add_u64(&SlotCtl->demotions, 1);
	return true;
}

/*
 * nvm_slot_want_cleaner -- the free list is empty: wake the background
 * writer's pass (NvmSlotCleanerWait()), once until it has run a round.
 */
static inline void
nvm_slot_want_cleaner(void)
{
	uint32		proc = pg_atomic_read_u32(&SlotCtl->cleaner_proc);

	if (proc == 0 || pg_atomic_read_u32(&SlotCtl->cleaner_wanted) != 0)
		return;
	if (pg_atomic_exchange_u32(&SlotCtl->cleaner_wanted, 1) == 0)
		SetLatch(&GetPGProcByNumber(proc - 1)->procLatch);
}

/*
 * nvm_slot_clock -- take a slot from its owner (H5): the next owner that is
 * unpinned, has no I/O or copy in progress and has usage count 0 (the hand
 * decrements as it passes).  A dirty owner is written back first (it is
 * looked at again whether this process wrote it or not: another may have),
 * a clean owner of a main-fork page of a permanent relation is demoted (it
 * becomes redirected: its bytes are the file's) unless NVM_BUF_NO_DEMOTE,
 * any other clean owner is evicted.  The clock never waits for a content
 * lock: its caller may hold any.  Returns the slot, held by nobody: from the
 * free list if it has one (looked at again before every owner).  Never
 * takes the slot of a pinned buffer, so never that of a buffer its caller
 * serves.  When a whole round finds every owner pinned (or dirty and locked
 * by others), raises an ERROR, as the descriptor clock does, or with
 * missing_ok returns NVM_NO_SLOT.
 */
static int32
nvm_slot_clock(bool missing_ok)
{
	int			trycounter = NvmNSlots;

/* one more owner passed over; a whole round of them: no slot to be had */
#define NVM_CLOCK_PASSED_OVER() \
	do { \
		if (--trycounter == 0) \
		{ \
			if (missing_ok) \
				return NVM_NO_SLOT; \
			nvm_no_slot(); \
		} \
	} while (0)

	pg_atomic_fetch_add_u64(&SlotCtl->taken, 1);
	for (;;)
	{
		int32		slot = nvm_slot_pop();
		bool		tried_write = false;

		/* another process may have given one back meanwhile */
		if (slot != NVM_NO_SLOT)
			return slot;

		/* none free: the background writer should clean ahead (once) */
		nvm_slot_want_cleaner();

		slot = pg_atomic_fetch_add_u32(&SlotCtl->hand, 1) % (uint32) NvmNSlots;

		for (;;)				/* this slot, again after a write-back */
		{
			int32		buf_id = NvmSlotOwner[slot];
			BufferDesc *buf;
			uint32		buf_state;
			uint8		flags;

			if (buf_id == NVM_NO_SLOT)
			{
				/* free or changing hands: not ours to take */
				NVM_CLOCK_PASSED_OVER();
				break;
			}
			buf = GetBufferDescriptor(buf_id);
			buf_state = LockBufHdr(buf);
			if (NvmSlotOf[buf_id] != slot)
			{
				UnlockBufHdr(buf, buf_state);
				break;
			}
			flags = NvmBufferFlags[buf_id];
			if (BUF_STATE_GET_REFCOUNT(buf_state) > 0 ||
				(buf_state & BM_IO_IN_PROGRESS) ||
				(flags & NVM_BUF_COW_RUNNING) ||
				((buf_state & BM_TAG_VALID) && !(buf_state & BM_VALID)))
			{
				/* in use; or a failed read's, which its next reader needs */
				UnlockBufHdr(buf, buf_state);
				NVM_CLOCK_PASSED_OVER();
				break;
			}
			if (!(buf_state & BM_TAG_VALID))
			{
				/* a descriptor without a page (e.g. an unused victim) */
				NvmSlotDetach(buf_id);
				UnlockBufHdr(buf, buf_state);
				return slot;
			}
			if (BUF_STATE_GET_USAGECOUNT(buf_state) != 0)
			{
				buf_state -= BUF_USAGECOUNT_ONE;
				UnlockBufHdr(buf, buf_state);
				trycounter = NvmNSlots;
				break;
			}
			if (buf_state & BM_DIRTY)
			{
				UnlockBufHdr(buf, buf_state);
				if (tried_write)
				{
					/* dirtied again, or its content lock is held */
					NVM_CLOCK_PASSED_OVER();
					break;
				}
				tried_write = true;
				if (NvmFlushUnpinnedBuffer(buf_id))
					pg_atomic_fetch_add_u64(&SlotCtl->writes, 1);
				/* clean now (written by us or another), unless dirtied again */
				continue;
			}
			if (nvm_slot_demote(buf, buf_state, slot))
				return slot;

			/*
			 * Cannot be read in place: evict it (clean only: it is refused if
			 * dirtied or pinned meanwhile), which puts its slot on the free
			 * list (NvmBufferInvalidated()), for the next round to pop.
			 */
			UnlockBufHdr(buf, buf_state);
			if (NvmEvictCleanUnpinnedBuffer(buf_id))
				pg_atomic_fetch_add_u64(&SlotCtl->evictions, 1);
			else
				NVM_CLOCK_PASSED_OVER();
			break;
		}
	}
#undef NVM_CLOCK_PASSED_OVER
}

/*
 * NvmSlotGet -- a slot held by nobody, for the caller to attach: from the
 * free list, else from the slot clock (which may write a buffer back, and
 * raise an ERROR: never call it in a critical section).
 */
int32
NvmSlotGet(void)
{
	Assert(NvmHybridPool);
	return nvm_slot_clock(false);	/* which pops the free list first */
}

/*
 * NvmSlotTryGet -- NvmSlotGet(), but NVM_NO_SLOT instead of an ERROR when the
 * slot clock finds every owner pinned (for a conditional lock's copy).
 */
int32
NvmSlotTryGet(void)
{
	Assert(NvmHybridPool);
	return nvm_slot_clock(true);
}

/*
 * NvmSlotEnsure -- GetVictimBuffer() is about to return buffer buf_id,
 * pinned only by this process and holding no page: give it a slot, so that
 * whatever the caller puts into it (a read, an extension, a zeroed page) has
 * one.  A read that ends redirected gives it back (NvmRedirectDone()).
 */
void
NvmSlotEnsure(int buf_id)
{
	Assert(NvmHybridPool);

	/* nobody else changes a pinned buffer's slot: no lock needed to look */
	if (NvmSlotOf[buf_id] == NVM_NO_SLOT)
	{
		int32		slot = NvmSlotGet();
		BufferDesc *buf = GetBufferDescriptor(buf_id);
		uint32		buf_state = LockBufHdr(buf);

		NvmSlotAttach(buf_id, slot);
		UnlockBufHdr(buf, buf_state);
	}
}

/*
 * The background writer's pass ahead of the slot clock.
 *
 * The slot clock runs in the process that needs a slot, mostly a backend
 * about to copy a redirected page it will change (copy-on-write); when the
 * owner under the hand is dirty, that backend writes it back first, and may
 * have to flush WAL up to the page's LSN.  Stock's bgwriter spares backends
 * that work ahead of the descriptor clock (BgBufferSync()), but the slot
 * clock takes its slots from other buffers than the descriptor clock does.
 * NvmSlotClean() is its counterpart for the slots: from the hand on, it
 * writes back dirty, unpinned owners with usage count 0 and demotes clean
 * ones onto the free list, until the reserve of free slots and the clean
 * owners found ahead of the hand cover the demand it expects for the next
 * round (the slots handed out per round, smoothed as BgBufferSync() smooths
 * its allocations, times bgwriter_lru_multiplier; the reserve at most
 * NvmNSlots / NVM_CLEAN_RESERVE_FRACTION), or it wrote bgwriter_lru_maxpages
 * pages, or it looked at every slot.  A slot pool is small (1/128 of the
 * data is 640 slots per 640 MB) and turned over many times a second by
 * copy-on-write, far faster than one round per bgwriter_delay can follow:
 * so a backend that finds the free list empty also wakes the writer for a
 * round (NvmSlotCleanerWait(), once per round), while its descriptor pass,
 * BgBufferSync(), whose feedback loop expects one call per bgwriter_delay,
 * keeps its pace.
 */
#define NVM_CLEAN_RESERVE_FRACTION 8

/*
 * NvmSlotClean -- one round of the background writer's pass ahead of the
 * slot clock (see above); called by the background writer only, never in a
 * critical section (it writes buffers back).  Returns whether the pool was
 * idle (no slot handed out since the last round, nothing written), for the
 * writer's hibernation, as BgBufferSync() does.
 */
bool
NvmSlotClean(void)
{
	static uint64 prev_taken = 0;
	static float smoothed_taken = 0;
	uint64		taken;
	uint32		recent;
	int			upcoming;
	int			reserve;
	int			reusable = 0;
	int			written = 0;
	uint32		hand;

	Assert(NvmHybridPool);
	Assert(CritSectionCount == 0);
	if (bgwriter_lru_maxpages <= 0)
	{
		/* off (maybe since a reload): no wakes either */
		pg_atomic_write_u32(&SlotCtl->cleaner_proc, 0);
		return true;
	}

	/* ask the backends to wake this process when they run out of slots */
	if (pg_atomic_read_u32(&SlotCtl->cleaner_proc) != MyProcNumber + 1)
		pg_atomic_write_u32(&SlotCtl->cleaner_proc, MyProcNumber + 1);
	pg_atomic_write_u32(&SlotCtl->cleaner_wanted, 0);

	/* the demand: slots handed out since the last round, smoothed */
	taken = pg_atomic_read_u64(&SlotCtl->taken);
	recent = (uint32) Min(taken - prev_taken, (uint64) PG_UINT32_MAX);
	prev_taken = taken;
	if (smoothed_taken <= (float) recent)
		smoothed_taken = recent;
	else
		smoothed_taken += ((float) recent - smoothed_taken) / 16;
	upcoming = (int) Min(smoothed_taken * bgwriter_lru_multiplier,
						 (float) NvmNSlots);
	if (upcoming == 0)
		return true;			/* nothing handed out for a while */
	reserve = Min(upcoming, NvmNSlots / NVM_CLEAN_RESERVE_FRACTION);

	hand = pg_atomic_read_u32(&SlotCtl->hand);
	for (int i = 0; i < NvmNSlots; i++)
	{
		int32		slot = (int32) ((hand + (uint32) i) % (uint32) NvmNSlots);
		int32		buf_id = NvmSlotOwner[slot];
		int			nfree = SlotCtl->nfree; /* unlocked: a hint */
		BufferDesc *buf;
		uint32		buf_state;

		if (nfree >= reserve && nfree + reusable >= upcoming)
			break;
		if (buf_id == NVM_NO_SLOT)
			continue;			/* free or changing hands */
		buf = GetBufferDescriptor(buf_id);

		/* a look without the spinlock first, as SyncOneBuffer() would */
		buf_state = pg_atomic_read_u32(&buf->state);
		if (BUF_STATE_GET_REFCOUNT(buf_state) > 0 ||
			BUF_STATE_GET_USAGECOUNT(buf_state) > 0 ||
			!(buf_state & BM_VALID) || (buf_state & BM_IO_IN_PROGRESS))
			continue;
		if (buf_state & BM_DIRTY)
		{
			if (written >= bgwriter_lru_maxpages)
				break;
			if (!NvmFlushUnpinnedBuffer(buf_id))
				continue;		/* pinned, or its content lock is held */
			written++;
			pg_atomic_fetch_add_u64(&SlotCtl->cleaner_writes, 1);
			/* pg_stat_bgwriter's cleaning writes, as BgBufferSync()'s */
			PendingBgWriterStats.buf_written_clean++;
		}

		/* clean now: free its slot if the reserve is short, else keep it */
		if (SlotCtl->nfree >= reserve)
		{
			reusable++;
			continue;
		}
		buf_state = LockBufHdr(buf);
		if (NvmSlotOf[buf_id] == slot &&
			BUF_STATE_GET_REFCOUNT(buf_state) == 0 &&
			BUF_STATE_GET_USAGECOUNT(buf_state) == 0 &&
			(buf_state & BM_VALID) && !(buf_state & BM_DIRTY) &&
			!(buf_state & BM_IO_IN_PROGRESS) &&
			!(NvmBufferFlags[buf_id] & NVM_BUF_COW_RUNNING) &&
			nvm_slot_demote(buf, buf_state, slot))
		{
			NvmSlotFree(slot);
			pg_atomic_fetch_add_u64(&SlotCtl->cleaner_demotions, 1);
		}
		else
			UnlockBufHdr(buf, buf_state);
	}

	return recent == 0 && written == 0;
}

/*
 * NvmSlotCleanerWait -- the background writer's sleep between two of its
 * rounds (bgwriter_delay ms) in the hybrid pool: a wake by a backend that
 * found no free slot (nvm_slot_want_cleaner()) runs a round of the slot pass
 * and sleeps again for the rest of the delay, after handling interrupts as
 * the writer's main loop does (ProcessMainLoopInterrupts(): a shutdown
 * request exits, a reload or a barrier is not kept waiting for the delay);
 * any other wake returns WL_LATCH_SET with the latch reset, the delay's end
 * WL_TIMEOUT, as WaitLatch() would.
 */
int
NvmSlotCleanerWait(long delay_ms)
{
	TimestampTz start = GetCurrentTimestamp();

	Assert(NvmHybridPool);
	for (;;)
	{
		long		remaining;
		int			rc;

		remaining = delay_ms -
			TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
		if (remaining <= 0)
			return WL_TIMEOUT;
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   remaining, WAIT_EVENT_BGWRITER_MAIN);
		if (rc & WL_TIMEOUT)
			return WL_TIMEOUT;
		ResetLatch(MyLatch);
		ProcessMainLoopInterrupts();
		if (pg_atomic_read_u32(&SlotCtl->cleaner_wanted) == 0)
			return rc;
		(void) NvmSlotClean();
	}
}

/*
 * NvmPoolScan -- the pool's counters, and a scan of every descriptor (each
 * under its header spinlock, so that what it says of one descriptor is
 * exact: H1's and the maps' checks hold at any time; totals over the scan
 * are not a snapshot under concurrent changes).  For pgnvm_pool().
 */
void
NvmPoolScan(NvmPoolReport *r)
{
	memset(r, 0, sizeof(*r));
	r->hybrid = NvmHybridPool;
	r->descriptors = NBuffers;
	r->slots = NvmNSlots > 0 ? NvmNSlots : NBuffers;

	for (int b = 0; b < NBuffers; b++)
	{
		BufferDesc *buf = GetBufferDescriptor(b);
		uint32		buf_state = LockBufHdr(buf);
		uint8		flags = NvmBufferFlags ? NvmBufferFlags[b] : 0;
		int32		slot = NvmSlotOf ? NvmSlotOf[b] : b;
		bool		mismatch = NvmSlotOf != NULL && slot != NVM_NO_SLOT &&
			NvmSlotOwner[slot] != b;

		UnlockBufHdr(buf, buf_state);

		if (buf_state & BM_TAG_VALID)
			r->descriptors_in_use++;
		/* the descriptor's bit, read under the header spinlock: exact */
		if (buf_state & BM_NVM_REDIRECTED)
		{
			r->redirected++;
			/* a copy-on-write in progress holds its destination (H1) */
			if (NvmHybridPool && slot != NVM_NO_SLOT &&
				!(flags & NVM_BUF_COW_RUNNING))
				r->redirected_with_slot++;
		}
		else if (buf_state & BM_VALID)
			r->copied++;
		if (slot != NVM_NO_SLOT)
			r->slots_held++;
		if (mismatch)
			r->slot_map_mismatches++;
	}

	if (NvmHybridPool)
	{
		r->slots_in_use = pg_atomic_read_u32(&SlotCtl->in_use);
		r->slots_in_use_peak = pg_atomic_read_u32(&SlotCtl->in_use_peak);
		SpinLockAcquire(&SlotCtl->lock);
		r->slots_free = SlotCtl->nfree;
		SpinLockRelease(&SlotCtl->lock);
		r->demotions = pg_atomic_read_u64(&SlotCtl->demotions);
		r->slot_evictions = pg_atomic_read_u64(&SlotCtl->evictions);
		r->slot_writes = pg_atomic_read_u64(&SlotCtl->writes);
		r->cleaner_writes = pg_atomic_read_u64(&SlotCtl->cleaner_writes);
		r->cleaner_demotions = pg_atomic_read_u64(&SlotCtl->cleaner_demotions);
	}
	else
	{
		/* every descriptor owns its slot, for good */
		r->slots_in_use = r->slots_in_use_peak = r->slots;
	}
}
