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
#include "port/atomics.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_slots.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc_tables.h"
#include "utils/nvm_guc.h"

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
	pg_atomic_uint64 demotions;
	pg_atomic_uint64 evictions;
	pg_atomic_uint64 writes;
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

	for (;;)
	{
		int32		slot = nvm_slot_pop();
		bool		tried_write = false;

		/* another process may have given one back meanwhile */
		if (slot != NVM_NO_SLOT)
			return slot;

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
			if ((buf_state & BM_PERMANENT) &&
				BufTagGetForkNum(&buf->tag) == MAIN_FORKNUM &&
				!(flags & NVM_BUF_NO_DEMOTE))
			{
				/*
				 * Demote: unpinned (and new pins wait for the header
				 * spinlock), clean and read verified, so the file holds
				 * exactly these bytes; the next pin reads them in place (R2's
				 * state, H5).
				 */
				Assert(flags == 0);
				NvmBufferFlags[buf_id] = NVM_BUF_REDIRECTED;
				/* it shows the mapping again: a change of what it shows (H4) */
				NvmBufferGen[buf_id]++;
				NvmSlotDetach(buf_id);
				UnlockBufHdr(buf, buf_state);
				pg_atomic_fetch_add_u64(&SlotCtl->demotions, 1);
				return slot;
			}

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
		if (flags & NVM_BUF_REDIRECTED)
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
	}
	else
	{
		/* every descriptor owns its slot, for good */
		r->slots_in_use = r->slots_in_use_peak = r->slots;
	}
}
