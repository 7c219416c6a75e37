/*-------------------------------------------------------------------------
 *
 * nvm_buf.c
 *	  pgnvm se2: redirected shared buffers ("PtrRedirection layer").
 *
 * With nvm_storage_engine = se2, a buffer miss of a read-only access to the
 * main fork of a permanent relation copies nothing: the buffer becomes
 * *redirected*, i.e. its page is read in place from the relation file
 * through the process's read-only mapping of the segment (nvm_smgr.c), and
 * BufferGetBlock() returns that address instead of the buffer's slot.  Any
 * change to the page first copies it into the slot and undoes the
 * redirection (copy-on-write).  The rules, in the style of
 * src/backend/storage/buffer/README, are in docs/storage-engines.md; in
 * short:
 *
 * - Only reads that the caller declares read-only (READ_BUFFERS_NVM_REDIRECT:
 *   sequential, bitmap and sampling scans of heap pages through read streams,
 *   and the heap fetches of index scans through RBM_NVM_READONLY) redirect.
 *   The buffer manager asks for it on the read's AIO handle
 *   (PGAIO_HF_IN_PLACE_OK); the storage manager (nvm_smgr.c) answers by
 *   leaving the blocks in its mapping and pointing the handle's iovecs at
 *   them (PGAIO_HF_IN_PLACE), and the completion callback verifies each page
 *   there, unless a prefetch helper verified those very bytes already
 *   (NvmInPlaceVerified()), and records the redirection (NvmInPlacePage(),
 *   NvmRedirectDone()).
 *   Data flows one way: this file calls the storage manager, never the
 *   reverse.  Every other pin of a redirected buffer copies it into the slot
 *   first (at pin time, before the caller can obtain a page pointer it might
 *   write through), and so does an exclusive content lock taken by a
 *   read-only user (e.g. opportunistic pruning during a scan).
 * - The redirection is the descriptor's BM_NVM_REDIRECTED, and nothing else:
 *   set with BM_VALID by the read that redirects (TerminateBufferIO()) or by
 *   the slot clock's demotion, cleared by a copy-on-write that succeeds or
 *   with the other flags at invalidation, always under the buffer header
 *   spinlock.  NvmBufferFlags[] (the copy-on-write and hybrid-pool state) is
 *   changed only under it too; the copy itself is done outside it, by the
 *   one process that set NVM_BUF_COW_RUNNING; others wait on the buffer's
 *   I/O condition variable.
 *   While a buffer is redirected nobody writes its slot and nobody can
 *   write the file's page (the buffer is clean, and only write-back of
 *   dirty buffers writes relation files), so the copy needs no content lock.
 * - A process's address of a redirected page is valid only while it holds a
 *   pin: it is computed by the first BufferGetBlock() under the pin from the
 *   buffer's tag, through the process's cache of segment mappings
 *   (NvmBufferPinView(), nvm_smgr.c's nvm_view_pin()), kept in the pin's
 *   PrivateRefCountEntry (bufmgr.c, patch 0026) and released with the last
 *   pin.  A page pointer obtained while the buffer was redirected stays
 *   valid, and shows the page as it was when copied, as long as the pin is
 *   held (mappings are never unmapped while this process has such pins: each
 *   counts as a view of the mapping).  Under a content lock BufferGetBlock()
 *   always returns the current version.  Nothing is kept per buffer after
 *   the pin, and nothing indexed by buffer is read on a hit: the redirection
 *   is the descriptor's BM_NVM_REDIRECTED, in the line the pin loaded (H4g).
 * - Nothing ever writes through a redirection: the mappings handed out are
 *   PROT_READ, hint bits are not set on redirected pages (SetHintBits()
 *   checks NvmSkipHintInMapping()), MarkBufferDirtyHint() ignores redirected
 *   buffers, and MarkBufferDirty() requires the exclusive lock that
 *   un-redirects.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 * Portions Copyright (c) 1996-2025, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *	  src/backend/storage/buffer/nvm_buf.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/aio_internal.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/condition_variable.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_fault.h"
#include "storage/nvm_smgr.h"
#include "storage/nvm_stats.h"
#include "storage/nvm_verify.h"
#include "storage/shmem.h"
#include "utils/nvm_guc.h"
#include "utils/wait_event.h"

volatile uint8 *NvmBufferFlags = NULL;
bool		NvmSe2On = false;

/* the descriptors' state words, for BufferGetBlock() (nvm_buf.h) */
char	   *NvmBufferStates = NULL;

StaticAssertDecl(NVM_BM_REDIRECTED == BM_NVM_REDIRECTED,
				 "nvm_buf.h's NVM_BM_REDIRECTED must be BM_NVM_REDIRECTED");

/* the pinned view looked at last (nvm_buf.h), InvalidBuffer: none */
Buffer		NvmLastViewBuffer = InvalidBuffer;
char	   *NvmLastViewPage = NULL;

/*
 * NvmBufShmemSize -- shared memory of the copy-on-write and hybrid-pool
 * flags, a byte per shared buffer (nvm_shmem.c adds it up with pgnvm's other
 * parts).
 */
Size
NvmBufShmemSize(void)
{
	return mul_size(NBuffers, sizeof(uint8));
}

/*
 * NvmBufShmemInit -- allocate or attach the copy-on-write and hybrid-pool
 * flags (from nvm_shmem.c).
 */
void
NvmBufShmemInit(void)
{
	bool		found;

	NvmBufferFlags = (volatile uint8 *)
		ShmemInitStruct("pgnvm buffer flags", NBuffers * sizeof(uint8), &found);
	if (!found)
		memset((void *) NvmBufferFlags, 0, NBuffers * sizeof(uint8));
}

/*
 * NvmBufInitAccess -- per-process setup, from InitBufferManagerAccess().
 *
 * In se2, turns the redirection checks of BufferGetBlock() and the buffer
 * manager on (NvmSe2Active()) and records where the descriptors' state
 * words are, for BufferGetBlock()'s test of BM_NVM_REDIRECTED.
 */
void
NvmBufInitAccess(void)
{
	NvmStatsAttach();

	if (nvm_storage_engine != NVM_ENGINE_SE2 || NvmSe2Active())
		return;
	StaticAssertStmt(sizeof(BufferDescPadded) == NVM_BUFFERDESC_SIZE,
					 "descriptors must be NVM_BUFFERDESC_SIZE apart");
	NvmBufferStates = (char *) &GetBufferDescriptor(0)->state;
	NvmSe2On = true;
}

/*
 * NvmBufferGetBlockSlow -- BufferGetBlock() of a redirected buffer pinned by
 * this process, when it is not the one looked at last.
 *
 * The address of the page in this process's read-only mapping of the
 * segment, kept with the pin (NvmPinnedView(): taken from the tag by the
 * first call under the pin), and remembered as the one looked at last.  If
 * this process cannot map the segment (nvm_max_mappings, address space),
 * the page is copied into its slot instead, from the file, as before a
 * change, and the slot is returned.
 */
void *
NvmBufferGetBlockSlow(Buffer buffer)
{
	char	   *page;

	Assert(NvmSe2Active());

	page = NvmPinnedView(buffer, true);
	if (page == NULL)
	{
		NvmBufferCow(buffer);
		return NvmSlotBlock(buffer - 1);
	}
	NvmLastViewBuffer = buffer;
	NvmLastViewPage = page;
	return page;
}

/*
 * NvmBufferPinView -- the first BufferGetBlock() under this process's pin of
 * a redirected buffer (NvmPinnedView()): the page's address in this
 * process's read-only mapping of its segment, with the view counted on the
 * mapping (its handle in *map), or NULL if the segment cannot be mapped.
 * From the buffer's tag, which the pin keeps stable and has just loaded,
 * through the process's cache of segments (nvm_view_pin()): no table
 * indexed by buffer is read.
 */
char *
NvmBufferPinView(Buffer buffer, int32 *map)
{
	BufferDesc *buf = GetBufferDescriptor(buffer - 1);

	return nvm_view_pin(BufTagGetRelFileLocator(&buf->tag),
						BufTagGetForkNum(&buf->tag), buf->tag.blockNum, map);
}

/*
 * NvmBufferUnpinView -- this process's last pin of the buffer goes, with
 * the view of mapping "map" it held (NvmPinnedView()): the address may not
 * be used any more, and the mapping may go.
 */
void
NvmBufferUnpinView(Buffer buffer, int32 map)
{
	if (NvmLastViewBuffer == buffer)
		NvmLastViewBuffer = InvalidBuffer;
	nvm_view_release(map);
}

/*
 * NvmBufferIsRedirected -- for callers outside the hot path (pg_buffercache
 * style reporting, assertions), in any engine and any process attached to
 * shared memory: the descriptor's BM_NVM_REDIRECTED (never set in base and
 * se1).  Read without the header spinlock: the assertions hold a pin and an
 * exclusive content lock, under which the bit cannot be set again (R5:
 * copy-on-write cleared it before the lock, and only unpinned or invalid
 * buffers get it); a report is a racy look at one buffer, as
 * pg_buffercache's without its lock would be.  Callers that need it exact
 * take the spinlock and test the state it returns.
 */
bool
NvmBufferIsRedirected(Buffer buffer)
{
	if (BufferIsLocal(buffer))
		return false;
	Assert(BufferIsValid(buffer));
	return (pg_atomic_read_u32(&GetBufferDescriptor(buffer - 1)->state) &
			BM_NVM_REDIRECTED) != 0;
}

/*
 * NvmPointerInMapping -- does ptr, a pointer into the page of a *shared*
 * buffer, point into a relation file mapping (a page read in place) rather
 * than into the buffer pool's slots?  Always false unless se2 is on.  No
 * side effect: also for assertions.  (Local buffers live elsewhere: callers
 * check BufferIsLocal() first.)
 */
bool
NvmPointerInMapping(const void *ptr)
{
	const char *p = (const char *) ptr;

	return NvmSe2Active() &&
		!(p >= BufferBlocks && p < BufferBlocks + (Size) NvmNSlots * BLCKSZ);
}

/*
 * NvmSkipHintInMapping -- NvmPointerInMapping(), and if so count the hint
 * bit the caller wanted to set there as skipped: a pointer into a
 * redirected page must never be written through.
 */
bool
NvmSkipHintInMapping(const void *ptr)
{
	if (!NvmPointerInMapping(ptr))
		return false;
	MyNvmStats->hints_skipped++;
	return true;
}

static bool nvm_buffer_cow(Buffer buffer, bool conditional);

/*
 * NvmBufferCow -- copy a redirected buffer's page into its slot and undo the
 * redirection (copy-on-write).
 *
 * Called with a pin, before the caller may modify the page: after pinning
 * for any access not declared read-only, and after taking an exclusive
 * content lock.  Exactly one process copies (it sets NVM_BUF_COW_RUNNING
 * under the header spinlock); others wait on the buffer's I/O condition
 * variable.  The source cannot change meanwhile: a redirected buffer is
 * clean, so nothing writes the file's page, and nobody writes the slot
 * until the redirection is gone.  A fault while copying (the file was cut
 * short behind our back) leaves the buffer redirected and raises the same
 * ERROR a short read would.
 *
 * Nothing between setting NVM_BUF_COW_RUNNING and clearing it may fail:
 * whatever can raise an ERROR (mapping the segment to find the source, the
 * SIGBUS handler's installation) is done before the flag is set, so that an
 * ERROR leaves the buffer exactly as it was and nobody waits for a copy that
 * will never end.  Callers hold no content lock (the buffer manager copies
 * before taking an exclusive lock, not after), so waiting for another
 * process's copy is interruptible.
 */
void
NvmBufferCow(Buffer buffer)
{
	(void) nvm_buffer_cow(buffer, false);
}

/*
 * NvmBufferConditionalCow -- NvmBufferCow() for ConditionalLockBuffer():
 * in the hybrid pool, when the slot clock finds no slot for the copy (every
 * owner pinned), return false, for the conditional lock to fail, instead of
 * raising "no unpinned buffer slots available".  Returns true when the
 * buffer is no longer redirected (copied by this process or another).
 * Other failures (the copy faults) still raise an ERROR.
 */
bool
NvmBufferConditionalCow(Buffer buffer)
{
	return nvm_buffer_cow(buffer, true);
}

/* NvmBufferCow(), or with conditional, NvmBufferConditionalCow() */
static bool
nvm_buffer_cow(Buffer buffer, bool conditional)
{
	BufferDesc *buf = GetBufferDescriptor(buffer - 1);
	ConditionVariable *cv = BufferDescriptorGetIOCV(buf);
	bool		slept = false;
	PGIOAlignedBlock from_file;
	char	   *src = NULL;
	int32		slot = NVM_NO_SLOT; /* hybrid pool: the copy's destination */

	Assert(NvmSe2Active());

	/*
	 * The source, while the buffer is (still) redirected: a pinned valid
	 * buffer never becomes redirected again, so if it is not redirected now,
	 * there is nothing to copy.  It is the page in this process's mapping; if
	 * the segment cannot be mapped here, a copy of it read from the file (the
	 * page is clean: the file holds exactly what the buffer shows).  The bit
	 * is read without the header spinlock: if another process's copy clears
	 * it meanwhile, the source goes unused (the loop below looks again under
	 * the spinlock), and mapping or reading must not run under it.
	 */
	if (pg_atomic_read_u32(&buf->state) & BM_NVM_REDIRECTED)
	{
		src = NvmPinnedView(buffer, true);
		if (src == NULL)
		{
			BufferTag	tag = buf->tag;

			smgrread(smgropen(BufTagGetRelFileLocator(&tag),
							  INVALID_PROC_NUMBER),
					 BufTagGetForkNum(&tag), tag.blockNum, from_file.data);
			src = from_file.data;
		}
	}
	nvm_fault_init();

	for (;;)
	{
		uint32		buf_state = LockBufHdr(buf);
		uint8		flags = NvmBufferFlags[buffer - 1];
		void	   *dst;
		bool		ok;

		/* exact, under the header spinlock: copied by another process? */
		if (!(buf_state & BM_NVM_REDIRECTED))
		{
			UnlockBufHdr(buf, buf_state);
			break;
		}
		if (flags & NVM_BUF_COW_RUNNING)
		{
			UnlockBufHdr(buf, buf_state);
			/* no slot of ours may be lost if the wait is interrupted */
			if (slot != NVM_NO_SLOT)
			{
				NvmSlotFree(slot);
				slot = NVM_NO_SLOT;
			}
			ConditionVariableSleep(cv, WAIT_EVENT_BUFFER_IO);
			slept = true;
			continue;
		}
		if (NvmHybridPool && slot == NVM_NO_SLOT)
		{
			/*
			 * Hybrid pool: a redirected buffer holds no slot; take one now,
			 * while failing is still allowed (the slot clock may write a
			 * buffer back, or find none), and look again.
			 */
			UnlockBufHdr(buf, buf_state);
			slot = conditional ? NvmSlotTryGet() : NvmSlotGet();
			if (slot == NVM_NO_SLOT)
			{
				Assert(conditional);
				if (slept)
					ConditionVariableCancelSleep();
				return false;
			}
			continue;
		}
		Assert(src != NULL);
		NvmBufferFlags[buffer - 1] = flags | NVM_BUF_COW_RUNNING;
		if (NvmHybridPool)
		{
			/* the copier owns the buffer's slot from here (H1, H2) */
			Assert(slot != NVM_NO_SLOT);
			NvmSlotAttach(buffer - 1, slot);
			slot = NVM_NO_SLOT;
		}
		UnlockBufHdr(buf, buf_state);

		/* from here to clearing the flag, nothing may fail */
		dst = NvmSlotBlock(buffer - 1);
		ok = nvm_copy_from_mapping(&dst, src, 1) == 1;

		buf_state = LockBufHdr(buf);
		Assert(buf_state & BM_NVM_REDIRECTED);
		NvmBufferFlags[buffer - 1] &= ~NVM_BUF_COW_RUNNING;
		if (ok)
		{
			/* BufferGetBlock() returns the slot from now on (R5) */
			buf_state &= ~BM_NVM_REDIRECTED;
		}
		else
		{
			/* still redirected (the bit stays): no slot (H1) */
			if (NvmHybridPool)
				slot = NvmSlotDetach(buffer - 1);
		}
		UnlockBufHdr(buf, buf_state);
		ConditionVariableBroadcast(cv);
		if (slot != NVM_NO_SLOT)
		{
			NvmSlotFree(slot);
			slot = NVM_NO_SLOT;
		}

		if (!ok)
		{
			if (slept)
				ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("could not read block %u in file \"%s\": read only 0 of %d bytes",
							buf->tag.blockNum,
							relpathperm(BufTagGetRelFileLocator(&buf->tag),
										BufTagGetForkNum(&buf->tag)).str,
							BLCKSZ)));
		}
		MyNvmStats->cow_copies++;
		break;
	}
	if (slept)
		ConditionVariableCancelSleep();
	/* another process copied it: the slot taken for the copy is not needed */
	if (slot != NVM_NO_SLOT)
		NvmSlotFree(slot);

	/*
	 * From now on BufferGetBlock() returns the slot.  This process's cached
	 * address stays until its last pin goes: pointers the caller obtained
	 * while the buffer was redirected still point into the mapping (showing
	 * the page as it was copied), and the mapping must not go away under
	 * them.
	 */
	return true;
}

/*
 * NvmInPlacePage -- completion of a read: if the storage manager left its
 * blocks in place (PGAIO_HF_IN_PLACE), the address of block buf_off of the
 * read in this process's mapping, to verify the page there and redirect the
 * buffer to it; else NULL (the block was copied into the buffer).
 *
 * The addresses are the issuing process's: such a read completes
 * synchronously in that process (PGAIO_HF_COPIED implies
 * PGAIO_HF_SYNCHRONOUS), and it must stay so.
 */
char *
NvmInPlacePage(PgAioHandle *ioh, uint8 buf_off)
{
	struct iovec *iov;
	int			iovcnt PG_USED_FOR_ASSERTS_ONLY;

	if (!(ioh->flags & PGAIO_HF_IN_PLACE))
		return NULL;
	if (unlikely(pgaio_io_get_owner(ioh) != MyProcNumber))
		elog(PANIC, "read left in place completed outside its issuing process");

	iovcnt = pgaio_io_get_iovec_length(ioh, &iov);
	Assert(buf_off < iovcnt);
	return (char *) iov[buf_off].iov_base;
}

/*
 * NvmInPlaceVerified -- completion of a read left in place, before the page
 * at page (block blkno, in this process's mapping) is verified: true if a
 * prefetch helper of this process verified exactly these bytes already (a
 * finished job's successful verdict; nvm_verify.c decides whether it still
 * holds, see NvmVerdictLookup()), and then the caller does not
 * verify them again.  Otherwise the caller verifies them itself, with
 * stock's checks, messages and settings (ignore_checksum_failure,
 * zero_damaged_pages): a missing, unfinished or failed verdict is never
 * trusted.  Counted either way.  Runs in a critical section.
 */
bool
NvmInPlaceVerified(const char *page, BlockNumber blkno)
{
	switch (NvmVerdictLookup(page, blkno))
	{
		case NVM_VERIFY_OK:
			MyNvmStats->verified_by_helper++;
			return true;
		case NVM_VERIFY_FAILED:
			MyNvmStats->helper_verify_failed++;
			break;
		case NVM_VERIFY_NONE:
			break;
	}
	MyNvmStats->verified_by_backend++;
	return false;
}

/*
 * NvmRedirectDone -- the page passed verification in the mapping: the
 * buffer is about to be redirected.  Called while the buffer's I/O is still
 * in progress (so no other process looks at it yet); the caller's
 * TerminateBufferIO() records and publishes the redirection, setting
 * BM_NVM_REDIRECTED with BM_VALID under the header spinlock.
 * The reader's view of the page is taken by the first BufferGetBlock()
 * under its pin, as any other process's.
 */
void
NvmRedirectDone(Buffer buffer)
{
	Assert(NvmSe2Active());

	if (NvmHybridPool)
	{
		/*
		 * Hybrid pool: the read did not use the slot GetVictimBuffer() gave
		 * the buffer; a redirected buffer holds none (H1).  Nobody else looks
		 * at it while our I/O is in progress.
		 */
		BufferDesc *buf = GetBufferDescriptor(buffer - 1);
		uint32		buf_state = LockBufHdr(buf);
		int32		slot = NvmSlotDetach(buffer - 1);

		UnlockBufHdr(buf, buf_state);
		if (slot != NVM_NO_SLOT)
			NvmSlotFree(slot);
	}
	MyNvmStats->redirects++;
}
