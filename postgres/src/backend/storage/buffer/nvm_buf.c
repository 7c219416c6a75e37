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
 *   sequential, bitmap and sampling scans of heap pages) redirect.  Every
 *   other pin of a redirected buffer copies it into the slot first (at pin
 *   time, before the caller can obtain a page pointer it might write
 *   through), and so does an exclusive content lock taken by a read-only
 *   user (e.g. opportunistic pruning during a scan).
 * - NvmBufferFlags[] is changed only under the buffer header spinlock; the
 *   copy itself is done outside it, by the one process that set
 *   NVM_BUF_COW_RUNNING; others wait on the buffer's I/O condition variable.
 *   While a buffer is redirected nobody writes its slot and nobody can
 *   write the file's page (the buffer is clean, and only write-back of
 *   dirty buffers writes relation files), so the copy needs no content lock.
 * - A process's NvmBufferPages[] entry is valid only while it holds a pin:
 *   it is cleared when its last pin goes.  A page pointer obtained while the
 *   buffer was redirected stays valid, and shows the page as it was when
 *   copied, as long as the pin is held (mappings are never unmapped while
 *   this process has such pins, see nvm_smgr.c).  Under a content lock
 *   BufferGetBlock() always returns the current version.
 * - Nothing ever writes through a redirection: the mappings handed out are
 *   PROT_READ, hint bits are not set on redirected pages (SetHintBits()
 *   checks NvmPointerInMapping()), MarkBufferDirtyHint() ignores redirected
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

#include "access/twophase.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/condition_variable.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_smgr.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

volatile uint8 *NvmBufferFlags = NULL;
void	  **NvmBufferPages = NULL;
NvmStatsSlot *NvmStats = NULL;
int			NvmStatsSlots = 0;
bool		NvmRedirectNextRead = false;

/* one cache line per slot: processes never write into each other's lines */
StaticAssertDecl(sizeof(NvmStatsSlot) == 64, "NvmStatsSlot must fill one cache line");

/* a process without a stats slot (e.g. the postmaster) counts here */
static NvmStatsSlot NvmLocalStats;
NvmStatsSlot *MyNvmStats = &NvmLocalStats;

/* number of non-NULL entries of NvmBufferPages */
static int	nvm_live_views = 0;

/* the read redirection in progress in this process, see NvmRedirectBegin() */
static int	nvm_redirect_n = 0;
static Buffer nvm_redirect_bufs[MAX_IO_COMBINE_LIMIT];
static char *nvm_redirect_pages[MAX_IO_COMBINE_LIMIT];


static int
nvm_stats_slots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/*
 * NvmBufShmemSize -- shared memory for the redirection flags and counters.
 */
Size
NvmBufShmemSize(void)
{
	Size		size = 0;

	size = add_size(size, mul_size(NBuffers, sizeof(uint8)));
	size = add_size(size, mul_size(nvm_stats_slots(), sizeof(NvmStatsSlot)));
	return size;
}

/*
 * NvmBufShmemInit -- allocate or attach; called with the buffer pool's own
 * initialization.
 */
void
NvmBufShmemInit(void)
{
	bool		found1,
				found2;

	NvmStatsSlots = nvm_stats_slots();
	NvmBufferFlags = (volatile uint8 *)
		ShmemInitStruct("pgnvm buffer flags", NBuffers * sizeof(uint8), &found1);
	NvmStats = (NvmStatsSlot *)
		ShmemInitStruct("pgnvm statistics",
						mul_size(NvmStatsSlots, sizeof(NvmStatsSlot)), &found2);
	if (!found1)
		memset((void *) NvmBufferFlags, 0, NBuffers * sizeof(uint8));
	if (!found2)
		memset(NvmStats, 0, mul_size(NvmStatsSlots, sizeof(NvmStatsSlot)));
}

/*
 * NvmBufInitAccess -- per-process setup, from InitBufferManagerAccess().
 *
 * Only se2 allocates NvmBufferPages: its being non-NULL is what enables the
 * redirection checks in BufferGetBlock() and the buffer manager.
 */
void
NvmBufInitAccess(void)
{
	if (MyProcNumber != INVALID_PROC_NUMBER && MyProcNumber < NvmStatsSlots)
		MyNvmStats = &NvmStats[MyProcNumber];
	else
		MyNvmStats = &NvmLocalStats;

	if (nvm_storage_engine == NVM_ENGINE_SE2 && NvmBufferPages == NULL)
		NvmBufferPages = (void **)
			MemoryContextAllocZero(TopMemoryContext, NBuffers * sizeof(void *));
}

/*
 * NvmBufferGetBlockSlow -- resolve a redirected buffer in this process.
 *
 * Called by BufferGetBlock() the first time this process looks at a
 * redirected buffer it has pinned: the address of the page in this
 * process's read-only mapping of the segment, remembered until the last pin
 * goes.  The buffer's tag cannot change while we hold the pin.
 */
void *
NvmBufferGetBlockSlow(Buffer buffer)
{
	BufferDesc *buf = GetBufferDescriptor(buffer - 1);
	BufferTag	tag = buf->tag;
	char	   *page;

	Assert(NvmBufferPages != NULL);
	Assert(NvmBufferPages[buffer - 1] == NULL);

	page = nvm_redirect_address(BufTagGetRelFileLocator(&tag),
								BufTagGetForkNum(&tag), tag.blockNum);
	NvmBufferPages[buffer - 1] = page;
	nvm_live_views++;
	return page;
}

/*
 * NvmBufferForgetView -- this process released its last pin on the buffer:
 * its cached address may not be used any more (the buffer may be evicted
 * and reused for another page).
 */
void
NvmBufferForgetView(Buffer buffer)
{
	Assert(NvmBufferPages[buffer - 1] != NULL);
	NvmBufferPages[buffer - 1] = NULL;
	if (--nvm_live_views == 0)
		nvm_release_retired_mappings();
}

/*
 * NvmLiveViews -- does this process hold pins on redirected buffers whose
 * pages it may be reading through a mapping?
 */
bool
NvmLiveViews(void)
{
	return nvm_live_views > 0;
}

/*
 * NvmBufferIsRedirected -- for callers outside the hot path (pg_buffercache
 * style reporting, assertions).
 */
bool
NvmBufferIsRedirected(Buffer buffer)
{
	if (BufferIsLocal(buffer) || NvmBufferFlags == NULL)
		return false;
	return (NvmBufferFlags[buffer - 1] & NVM_BUF_REDIRECTED) != 0;
}

/*
 * NvmPointerInMapping -- does ptr, a pointer into the page of a *shared*
 * buffer, point into a relation file mapping rather than into the buffer
 * pool?  Used by hint-bit setters: a pointer into a redirected page must
 * never be written through.  (Local buffers live elsewhere: callers check
 * BufferIsLocal() first.)
 */
bool
NvmPointerInMapping(const void *ptr)
{
	const char *p = (const char *) ptr;

	if (NvmBufferPages == NULL)
		return false;
	return !(p >= BufferBlocks && p < BufferBlocks + (Size) NBuffers * BLCKSZ);
}

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
 */
void
NvmBufferCow(Buffer buffer)
{
	BufferDesc *buf = GetBufferDescriptor(buffer - 1);
	ConditionVariable *cv = BufferDescriptorGetIOCV(buf);
	bool		slept = false;

	Assert(NvmBufferPages != NULL);

	for (;;)
	{
		uint32		buf_state = LockBufHdr(buf);
		uint8		flags = NvmBufferFlags[buffer - 1];
		char	   *src;
		bool		ok;

		if (!(flags & NVM_BUF_REDIRECTED))
		{
			UnlockBufHdr(buf, buf_state);
			break;
		}
		if (flags & NVM_BUF_COW_RUNNING)
		{
			UnlockBufHdr(buf, buf_state);
			ConditionVariableSleep(cv, WAIT_EVENT_BUFFER_IO);
			slept = true;
			continue;
		}
		NvmBufferFlags[buffer - 1] = flags | NVM_BUF_COW_RUNNING;
		UnlockBufHdr(buf, buf_state);

		src = NvmBufferPages[buffer - 1];
		if (src == NULL)
			src = NvmBufferGetBlockSlow(buffer);
		ok = nvm_copy_page_guarded(BufferBlocks + (Size) (buffer - 1) * BLCKSZ,
								   src);

		buf_state = LockBufHdr(buf);
		if (ok)
			NvmBufferFlags[buffer - 1] = 0;
		else
			NvmBufferFlags[buffer - 1] = NVM_BUF_REDIRECTED;
		UnlockBufHdr(buf, buf_state);
		ConditionVariableBroadcast(cv);

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

	/*
	 * From now on BufferGetBlock() returns the slot.  This process's cached
	 * address stays until its last pin goes: pointers the caller obtained
	 * while the buffer was redirected still point into the mapping (showing
	 * the page as it was copied), and the mapping must not go away under
	 * them.
	 */
}

/*
 * NvmRedirectBegin/End -- the read that nvm_startreadv() is completing in
 * this process: buffers and the mapped addresses of their pages.
 *
 * The completion callback (buffer_readv_complete_one()) runs synchronously
 * inside nvm_startreadv(), so a static array is enough.
 */
void
NvmRedirectBegin(int n, Buffer *buffers, char **pages)
{
	Assert(n <= MAX_IO_COMBINE_LIMIT);
	for (int i = 0; i < n; i++)
	{
		nvm_redirect_bufs[i] = buffers[i];
		nvm_redirect_pages[i] = pages[i];
	}
	nvm_redirect_n = n;
}

void
NvmRedirectEnd(void)
{
	nvm_redirect_n = 0;
}

/*
 * NvmRedirectTarget -- if the read being completed redirects this buffer,
 * the address of its page in the mapping (to verify it there), else NULL.
 */
char *
NvmRedirectTarget(Buffer buffer)
{
	for (int i = 0; i < nvm_redirect_n; i++)
		if (nvm_redirect_bufs[i] == buffer)
			return nvm_redirect_pages[i];
	return NULL;
}

/*
 * NvmRedirectDone -- the page passed verification in the mapping: record the
 * redirection.  Called while the buffer's I/O is still in progress (so no
 * other process looks at the flags yet); TerminateBufferIO(), which sets
 * BM_VALID under the header spinlock, publishes it.
 */
void
NvmRedirectDone(Buffer buffer, char *page)
{
	Assert(NvmBufferPages != NULL);
	Assert(NvmBufferPages[buffer - 1] == NULL);

	NvmBufferFlags[buffer - 1] = NVM_BUF_REDIRECTED;
	NvmBufferPages[buffer - 1] = page;
	nvm_live_views++;
	MyNvmStats->redirects++;
}
