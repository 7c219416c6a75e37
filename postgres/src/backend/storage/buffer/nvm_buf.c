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
 * - NvmBufferFlags[] is changed only under the buffer header spinlock; the
 *   copy itself is done outside it, by the one process that set
 *   NVM_BUF_COW_RUNNING; others wait on the buffer's I/O condition variable.
 *   While a buffer is redirected nobody writes its slot and nobody can
 *   write the file's page (the buffer is clean, and only write-back of
 *   dirty buffers writes relation files), so the copy needs no content lock.
 * - A process's NvmBufferPages[] address is valid only while it holds a pin:
 *   it is cleared when its last pin goes.  A page pointer obtained while the
 *   buffer was redirected stays valid, and shows the page as it was when
 *   copied, as long as the pin is held (mappings are never unmapped while
 *   this process has such pins: each counts as a view of the mapping,
 *   nvm_view_acquire()/nvm_view_release()).  Under a content lock
 *   BufferGetBlock() always returns the current version.
 * - What the last unpin keeps (H4): the buffer's generation when the view
 *   was taken (NvmBufferGen[], bumped under the header spinlock at every
 *   change of what the buffer shows) and the mapping's handle and epoch.
 *   The next pin's first BufferGetBlock() takes the view again from them if
 *   the generation (read under the pin) and the epoch (nvm_smgr.c changes
 *   it when it lets the mapping go) are still those, with no look-up of the
 *   page; else it looks it up as a first pin does.  A kept view holds no
 *   count on its mapping, so it never keeps one from being retired or
 *   unmapped, and its address is never used but through
 *   nvm_view_reacquire(), under a pin, with both matching.
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

#include <unistd.h>

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
#include "utils/memutils.h"
#include "utils/nvm_guc.h"
#include "utils/wait_event.h"

volatile uint8 *NvmBufferFlags = NULL;
volatile uint32 *NvmBufferGen = NULL;

/* the descriptors' state words, for BufferGetBlock() (nvm_buf.h) */
char	   *NvmBufferStates = NULL;

StaticAssertDecl(NVM_BM_REDIRECTED == BM_NVM_REDIRECTED,
				 "nvm_buf.h's NVM_BM_REDIRECTED must be BM_NVM_REDIRECTED");

/* the pinned view looked at last (nvm_buf.h), InvalidBuffer: none */
Buffer		NvmLastViewBuffer = InvalidBuffer;
char	   *NvmLastViewPage = NULL;

/* EXPERIMENT: this process uses the kept views of before (nvm_buf.h) */
bool		NvmHitKeptViews = false;

/*
 * Per process, the views (NvmView, nvm_buf.h): for each redirected buffer
 * whose page this process reads in place, the page's address in this
 * process's mapping while pinned, and what was kept of it after the last
 * pin.  In chunks of NVM_VIEW_CHUNK buffers, a chunk allocated when one of
 * its buffers first gets a view, so that a backend's memory follows what it
 * has read in place, not shared_buffers; at most nvm_view_memory of them
 * (nvm_view_chunk_ready() drops the least recently used chunk without a
 * pinned view to make room).  NvmBufferPages (the table of chunks) is NULL
 * unless nvm_storage_engine = se2.
 */
NvmView   **NvmBufferPages = NULL;
static uint16 *NvmViewCount = NULL; /* pinned views per chunk */
static uint64 *NvmViewUsed = NULL;	/* per chunk: NvmViewClock at last use */
static uint64 NvmViewClock = 0;
static int	NvmViewChunks = 0;	/* chunks allocated */
static MemoryContext NvmViewCxt = NULL;

/* se2 only: the generations, 4 bytes per buffer */
static Size
nvm_gen_size(void)
{
	if (nvm_storage_engine != NVM_ENGINE_SE2)
		return 0;
	return mul_size(NBuffers, sizeof(uint32));
}

/*
 * NvmBufShmemSize -- shared memory of the redirection flags, a byte per
 * shared buffer, and in se2 of the generations, 4 bytes per shared buffer
 * (nvm_shmem.c adds it up with pgnvm's other parts).
 */
Size
NvmBufShmemSize(void)
{
	return add_size(mul_size(NBuffers, sizeof(uint8)), nvm_gen_size());
}

/*
 * NvmBufShmemInit -- allocate or attach the redirection flags, and in se2
 * the generations (from nvm_shmem.c).  base and se1 allocate exactly what
 * they did before generations.
 */
void
NvmBufShmemInit(void)
{
	bool		found;

	NvmBufferFlags = (volatile uint8 *)
		ShmemInitStruct("pgnvm buffer flags", NBuffers * sizeof(uint8), &found);
	if (!found)
		memset((void *) NvmBufferFlags, 0, NBuffers * sizeof(uint8));

	if (nvm_gen_size() == 0)
		return;
	NvmBufferGen = (volatile uint32 *)
		ShmemInitStruct("pgnvm buffer generations", nvm_gen_size(), &found);
	if (!found)
		memset((void *) NvmBufferGen, 0, nvm_gen_size());
}

/*
 * NvmBufInitAccess -- per-process setup, from InitBufferManagerAccess().
 *
 * Only se2 allocates NvmBufferPages: its being non-NULL is what enables the
 * redirection checks in BufferGetBlock() and the buffer manager
 * (NvmSe2Active()).
 */
void
NvmBufInitAccess(void)
{
	int			nchunks = (NBuffers + NVM_VIEW_CHUNK - 1) / NVM_VIEW_CHUNK;

	NvmStatsAttach();

	if (nvm_storage_engine != NVM_ENGINE_SE2 || NvmSe2Active())
		return;
	Assert(NvmBufferGen != NULL);
	StaticAssertStmt(sizeof(BufferDescPadded) == NVM_BUFFERDESC_SIZE,
					 "descriptors must be NVM_BUFFERDESC_SIZE apart");
	NvmBufferStates = (char *) &GetBufferDescriptor(0)->state;
	/* EXPERIMENT: the A/B's switch, read once per process */
	NvmHitKeptViews = access("/tmp/pgnvm-hitpath3-kept-views", F_OK) == 0;
	NvmViewCxt = AllocSetContextCreate(TopMemoryContext, "NvmBufViews",
									   ALLOCSET_SMALL_SIZES);
	NvmViewCount = MemoryContextAllocZero(NvmViewCxt, sizeof(uint16) * nchunks);
	NvmViewUsed = MemoryContextAllocZero(NvmViewCxt, sizeof(uint64) * nchunks);
	NvmBufferPages = MemoryContextAllocZero(NvmViewCxt, sizeof(NvmView *) * nchunks);
}

/*
 * the chunks nvm_view_memory allows (its minimum, 128 kB, allows 5; at least
 * 2 whatever it says)
 */
static int
nvm_view_chunks_max(void)
{
	Size		per_chunk = sizeof(NvmView) * NVM_VIEW_CHUNK;

	return Max(2, (int) Min((Size) nvm_view_memory * 1024 / per_chunk,
							(Size) INT_MAX));
}

/*
 * nvm_view_coldest_chunk -- the least recently used chunk without a pinned
 * view and not used since the stamp "keep_from" (NvmViewClock), or -1 if
 * there is none.
 */
static int
nvm_view_coldest_chunk(uint64 keep_from)
{
	int			nchunks = (NBuffers + NVM_VIEW_CHUNK - 1) / NVM_VIEW_CHUNK;
	int			coldest = -1;

	for (int c = 0; c < nchunks; c++)
	{
		if (NvmBufferPages[c] == NULL || NvmViewCount[c] > 0 ||
			NvmViewUsed[c] >= keep_from)
			continue;
		if (coldest < 0 || NvmViewUsed[c] < NvmViewUsed[coldest])
			coldest = c;
	}
	return coldest;
}

/*
 * nvm_view_chunk_ready -- make sure the chunk holding buffer's view exists,
 * and mark it used (allocates: never in a critical section).
 *
 * At most nvm_view_memory of chunks are kept: a new one beyond takes the
 * memory of the least recently used chunk that has no pinned view, whose
 * kept views are dropped (they hold nothing: a kept view counts on no
 * mapping), and that was not used since the stamp keep_from: the chunks a
 * caller readied for the same read (NvmPrepareRedirect()) have no pinned
 * view yet, and must still be there when the read completes.  If no chunk
 * can go (each has a pinned view or serves the read: a few chunks, a tiny
 * nvm_view_memory), one more is allocated.
 */
static void
nvm_view_chunk_ready(Buffer buffer, uint64 keep_from)
{
	int			c = (buffer - 1) >> NVM_VIEW_CHUNK_BITS;

	if (NvmBufferPages[c] == NULL)
	{
		NvmView    *chunk = NULL;

		if (NvmViewChunks >= nvm_view_chunks_max())
		{
			int			victim = nvm_view_coldest_chunk(keep_from);

			if (victim >= 0)
			{
				chunk = NvmBufferPages[victim];
				NvmBufferPages[victim] = NULL;
				memset(chunk, 0, sizeof(NvmView) * NVM_VIEW_CHUNK);
				NvmViewChunks--;
				MyNvmStats->view_chunks_dropped++;
			}
		}
		if (chunk == NULL)
			chunk = MemoryContextAllocZero(NvmViewCxt,
										   sizeof(NvmView) * NVM_VIEW_CHUNK);
		NvmBufferPages[c] = chunk;
		NvmViewChunks++;
	}
	NvmViewUsed[c] = ++NvmViewClock;
}

/* this process's view entry of a buffer whose chunk exists */
static inline NvmView *
nvm_view_entry(Buffer buffer)
{
	NvmView    *chunk = NvmBufferPages[(buffer - 1) >> NVM_VIEW_CHUNK_BITS];

	Assert(chunk != NULL);
	return &chunk[(buffer - 1) & (NVM_VIEW_CHUNK - 1)];
}

/*
 * nvm_view_set -- record this process's view of a redirected buffer's page,
 * in mapping "map", taken at generation gen, and declare it to the storage
 * manager, which says the epoch to keep it with.  The chunk must be ready:
 * this runs in the completion of a read, a critical section.
 */
static void
nvm_view_set(Buffer buffer, char *page, NvmViewMap map, uint32 gen)
{
	NvmView    *v = nvm_view_entry(buffer);

	Assert(v->page == NULL);
	v->page = page;
	v->gen = gen;
	v->map = map;
	v->map_epoch = nvm_view_acquire(map);
	NvmViewCount[(buffer - 1) >> NVM_VIEW_CHUNK_BITS]++;
}

/*
 * nvm_view_resolve -- this process's view of the pinned buffer, which is
 * redirected (or was, when the caller looked) and has no view resolved
 * under this pin: the kept view taken again if it is still good, else the
 * page looked up in this process's mapping.  NULL if the segment cannot be
 * mapped here.  The buffer's tag cannot change while we hold the pin.
 *
 * The kept view is good if the buffer's generation is the one it was kept
 * with -- no invalidation, copy-on-write, demotion or new redirection since
 * -- and its mapping's epoch too -- the mapping was not let go since.  The
 * generation is read under our pin, so nothing can evict, demote or
 * redirect the buffer anew meanwhile (each needs it unpinned, or its I/O);
 * a copy-on-write may bump it at any time, which is harmless: the view
 * shows the page the copy is made from, as under any pin (R5, R6).  The
 * storage manager checks as well that the mapping is of the tag's block,
 * and that an epoch that matched is an owned mapping's (view_mismatches
 * counts a generation or an epoch that said yes wrongly: must be 0).
 */
static char *
nvm_view_resolve(Buffer buffer)
{
	BufferDesc *buf = GetBufferDescriptor(buffer - 1);
	BufferTag	tag = buf->tag;
	NvmView    *chunk = NvmBufferPages[(buffer - 1) >> NVM_VIEW_CHUNK_BITS];
	uint32		gen = NvmBufferGen[buffer - 1];
	NvmViewMap	map;
	char	   *page;

	if (chunk != NULL)
	{
		NvmView    *v = &chunk[(buffer - 1) & (NVM_VIEW_CHUNK - 1)];

		Assert(v->page == NULL);
		if (v->map_epoch != 0)
		{
			bool		mismatch = false;

			page = v->gen != gen ? NULL :
				nvm_view_reacquire(v->map, v->map_epoch,
								   BufTagGetRelFileLocator(&tag),
								   BufTagGetForkNum(&tag), tag.blockNum,
								   &mismatch);
			if (page != NULL)
			{
				v->page = page;
				NvmViewCount[(buffer - 1) >> NVM_VIEW_CHUNK_BITS]++;
				NvmViewUsed[(buffer - 1) >> NVM_VIEW_CHUNK_BITS] = ++NvmViewClock;
				MyNvmStats->views_kept++;
				return page;
			}
			if (mismatch)
				MyNvmStats->view_mismatches++;
			else
				MyNvmStats->views_stale++;
			v->map_epoch = 0;	/* stale for good */
		}
	}

	page = nvm_mapped_block(BufTagGetRelFileLocator(&tag),
							BufTagGetForkNum(&tag), tag.blockNum, &map);
	if (page == NULL)
		return NULL;
	/* nothing else of this process waits for a chunk: any may go */
	nvm_view_chunk_ready(buffer, NvmViewClock + 1);
	nvm_view_set(buffer, page, map, gen);
	MyNvmStats->views_resolved++;
	return page;
}

/*
 * NvmPrepareRedirect -- the buffer manager is about to read these buffers,
 * and they may be redirected when the read completes: get their views'
 * chunks ready now, outside the completion's critical section.
 *
 * The buffers of one read are victims taken wherever the clock found them,
 * so up to io_combine_limit of them may lie in as many chunks; none of the
 * chunks readied here may be taken for another one of the same read (they
 * have no pinned view yet): a buffer whose chunk was gone at completion
 * would be copied instead of redirected (NvmRedirectDone()).  So only
 * chunks not used since this call began may go, and beyond them
 * nvm_view_memory is exceeded, by at most the read's chunks, as it is for
 * pinned views.
 */
void
NvmPrepareRedirect(const Buffer *buffers, int nbuffers)
{
	uint64		keep_from = NvmViewClock + 1;

	/* the pin's view needs no chunk */
	if (!NvmHitKeptViews)
		return;
	for (int i = 0; i < nbuffers; i++)
		nvm_view_chunk_ready(buffers[i], keep_from);
}

/*
 * NvmBufferGetBlockSlow -- resolve a redirected buffer in this process.
 *
 * Called by BufferGetBlock() the first time under a pin that this process
 * looks at a redirected buffer: the address of the page in this process's
 * read-only mapping of the segment, remembered until the last pin goes and
 * kept after it (nvm_view_resolve(): a kept view that is still good is
 * taken again without a look-up).  If this process cannot map the segment
 * (nvm_max_mappings, address space), the page is copied into its slot
 * instead, from the file, as before a change, and the slot is returned.
 */
void *
NvmBufferGetBlockSlow(Buffer buffer)
{
	char	   *page;

	Assert(NvmSe2Active());

	if (NvmHitKeptViews)
	{
		/* EXPERIMENT: the kept views of before */
		Assert(NvmBufferView(buffer) == NULL);
		page = nvm_view_resolve(buffer);
	}
	else
		page = NvmPinnedView(buffer, true);
	if (page == NULL)
	{
		NvmBufferCow(buffer);
		return NvmSlotBlock(buffer - 1);
	}
	if (!NvmHitKeptViews)
	{
		NvmLastViewBuffer = buffer;
		NvmLastViewPage = page;
	}
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
 * NvmBufferForgetView -- this process released its last pin on the buffer:
 * its address may not be used any more (the buffer may be evicted and
 * reused for another page), and its count on the mapping goes.  The rest is
 * kept (generation, mapping handle and epoch) for the next pin to take the
 * view again if nothing changed meanwhile (nvm_view_resolve()).
 */
void
NvmBufferForgetView(Buffer buffer)
{
	int			c = (buffer - 1) >> NVM_VIEW_CHUNK_BITS;
	NvmView    *v = nvm_view_entry(buffer);

	Assert(v->page != NULL);
	Assert(NvmViewCount[c] > 0);
	v->page = NULL;
	NvmViewCount[c]--;
	nvm_view_release(v->map);
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
 * NvmSkipHintInMapping -- does ptr, a pointer into the page of a *shared*
 * buffer, point into a relation file mapping rather than into the buffer
 * pool?  Then the hint bit the caller wanted to set there is skipped, and
 * counted: a pointer into a redirected page must never be written through.
 * (Local buffers live elsewhere: callers check BufferIsLocal() first.)
 */
bool
NvmSkipHintInMapping(const void *ptr)
{
	const char *p = (const char *) ptr;

	if (!NvmSe2Active() ||
		(p >= BufferBlocks && p < BufferBlocks + (Size) NvmNSlots * BLCKSZ))
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
	 * page is clean: the file holds exactly what the buffer shows).
	 */
	if (NvmBufferFlags[buffer - 1] & NVM_BUF_REDIRECTED)
	{
		if (NvmHitKeptViews)
		{
			/* EXPERIMENT: the kept views of before */
			src = NvmBufferView(buffer);
			if (src == NULL)
				src = nvm_view_resolve(buffer);
		}
		else
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

		if (!(flags & NVM_BUF_REDIRECTED))
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
		if (ok)
		{
			NvmBufferFlags[buffer - 1] = 0;
			buf_state &= ~BM_NVM_REDIRECTED;
			/* it shows the slot now: views kept of the mapping are stale */
			NvmBufferGen[buffer - 1]++;
		}
		else
		{
			NvmBufferFlags[buffer - 1] = NVM_BUF_REDIRECTED;
			/* still redirected: no slot (H1) */
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
 * NvmRedirectDone -- the page passed verification in the mapping: record the
 * redirection.  Called while the buffer's I/O is still in progress (so no
 * other process looks at the flags yet); TerminateBufferIO(), which sets
 * BM_VALID under the header spinlock, publishes it.
 */
bool
NvmRedirectDone(Buffer buffer, char *page)
{
	Assert(NvmSe2Active());

	if (NvmHitKeptViews &&
		unlikely(NvmBufferPages[(buffer - 1) >> NVM_VIEW_CHUNK_BITS] == NULL))
	{
		/*
		 * Not prepared (NvmPrepareRedirect()), and a view cannot be recorded
		 * without allocating, which a critical section forbids: keep a copy
		 * of the page (just verified, so faulted in) instead.
		 */
		memcpy(NvmSlotBlock(buffer - 1), page, BLCKSZ);
		MyNvmStats->mapped_reads++;
		return false;
	}
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
	NvmBufferFlags[buffer - 1] = NVM_BUF_REDIRECTED;

	/*
	 * A new redirection: views kept of this buffer are stale (the buffer was
	 * invalidated before this read, which bumped the generation already; this
	 * makes it so by itself).  Nobody else changes the generation while our
	 * I/O is in progress, and BM_VALID publishes it with the flag.
	 */
	NvmBufferGen[buffer - 1]++;
	/* the pin's view is taken by its first BufferGetBlock() */
	if (NvmHitKeptViews)
		nvm_view_set(buffer, page, nvm_view_map_of(page),
					 NvmBufferGen[buffer - 1]);
	MyNvmStats->redirects++;
	return true;
}
