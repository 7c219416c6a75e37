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
 * the page in its own mapping (NvmBufferPages) for the buffers it has pinned,
 * and keeps after the last pin the buffer's generation (NvmBufferGen,
 * shared) and the mapping's handle, from which the next pin gets the address
 * back without looking the page up if neither changed.  BufferGetBlock()
 * consults the flag and the address.  See docs/storage-engines.md (R1-R8,
 * H4).
 *
 * src/include/storage/nvm_buf.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_BUF_H
#define NVM_BUF_H

#include "port/atomics.h"
#include "storage/aio_types.h"
#include "storage/block.h"
#include "storage/buf.h"
#include "storage/nvm_slots.h"

/* bits of NvmBufferFlags[] */
#define NVM_BUF_REDIRECTED		0x01	/* page is read in place from the file */
#define NVM_BUF_COW_RUNNING		0x02	/* a process is copying it into the
										 * slot */
#define NVM_BUF_NO_DEMOTE		0x04	/* hybrid pool: the slot's page is not
										 * the file's verified page (zeroed or
										 * unverified on read): never demote */

/* shared: one byte per shared buffer; NULL in processes not attached */
extern PGDLLIMPORT volatile uint8 *NvmBufferFlags;

/*
 * shared, se2 only (NULL in base and se1): each buffer's generation, bumped
 * at every change of what the buffer shows -- invalidation or eviction,
 * copy-on-write, demotion by the slot clock, a read that redirects -- under
 * its header spinlock (the read: while its I/O is in progress, published
 * with the flag by BM_VALID).  A view kept with another generation is stale
 * (H4).
 */
extern PGDLLIMPORT volatile uint32 *NvmBufferGen;

/*
 * per process: this process's view of a redirected buffer's page.  page is
 * the address in this process's mapping while the process pins the buffer
 * and has resolved it (what BufferGetBlock() returns), else NULL.  After the
 * last pin the rest is kept: the buffer's generation when the view was
 * taken, the mapping's handle and epoch (nvm_smgr.c's NvmViewMap); a later
 * pin takes the view again, without looking the page up, if the generation
 * and the epoch are still those (NvmBufferGetBlockSlow()).  map_epoch 0:
 * nothing kept.  24 bytes.
 */
typedef struct NvmView
{
	char	   *page;			/* while pinned and resolved: the page */
	uint32		gen;			/* NvmBufferGen[] when the view was taken */
	int32		map;			/* the mapping's handle (NvmViewMap) */
	uint32		map_epoch;		/* its epoch then; 0: nothing kept */
} NvmView;

/*
 * The views, in chunks of NVM_VIEW_CHUNK buffers, a chunk allocated when one
 * of its buffers first gets a view and kept while nvm_view_memory allows
 * (beyond, the least recently used chunk without a pinned view is dropped,
 * kept views and all).  The table of chunks is NULL unless
 * nvm_storage_engine = se2, which keeps BufferGetBlock() to one test of a
 * global in the other engines.
 */
#define NVM_VIEW_CHUNK_BITS		10
#define NVM_VIEW_CHUNK			(1 << NVM_VIEW_CHUNK_BITS)
extern PGDLLIMPORT NvmView **NvmBufferPages;

/*
 * NvmSe2Active -- is se2 on in this process?  True once a process of a
 * server with nvm_storage_engine = se2 has set up its views
 * (NvmBufInitAccess(), from InitBufferManagerAccess()): from then on it may
 * meet redirected buffers.  False in base and se1, and in processes that
 * have no buffer manager access (the postmaster).  The one test of "se2 is
 * on" of the buffer manager and its callers: a load of a global, so that
 * the other engines pay no more than that on the hot paths
 * (BufferGetBlock()).
 */
static inline bool
NvmSe2Active(void)
{
	return NvmBufferPages != NULL;
}

/*
 * this process's view of a pinned shared buffer's page, or NULL (se2 only):
 * only a view resolved under the pin, never a kept one
 */
static inline void *
NvmBufferView(Buffer buffer)
{
	NvmView    *chunk = NvmBufferPages[(buffer - 1) >> NVM_VIEW_CHUNK_BITS];

	return chunk ? chunk[(buffer - 1) & (NVM_VIEW_CHUNK - 1)].page : NULL;
}

/*
 * EXPERIMENT (hit path, issue 22 item 3): true in a process that uses the
 * kept views of before (per-buffer tables NvmBufferFlags, NvmBufferPages,
 * NvmBufferGen on every first pin), false in one that uses the descriptor's
 * BM_NVM_REDIRECTED and the pin's view (NvmPinnedView()); chosen at process
 * start (NvmBufInitAccess()).  For the A/B only.
 */
extern PGDLLIMPORT bool NvmHitKeptViews;

/*
 * The redirection as the descriptor's state bit BM_NVM_REDIRECTED
 * (buf_internals.h, patch 0026; nvm_buf.c asserts that the two agree), for
 * BufferGetBlock(), which cannot include buf_internals.h: NvmBufferStates is
 * the address of the first descriptor's state, descriptors are
 * NVM_BUFFERDESC_SIZE apart.  The pin has just loaded that line.
 */
#define NVM_BM_REDIRECTED		(1U << 21)
#define NVM_BUFFERDESC_SIZE		64
extern PGDLLIMPORT char *NvmBufferStates;

static inline bool
NvmBufferRedirectedNow(Buffer buffer)
{
	pg_atomic_uint32 *state = (pg_atomic_uint32 *)
		(NvmBufferStates + (Size) (buffer - 1) * NVM_BUFFERDESC_SIZE);

	return (pg_atomic_read_u32(state) & NVM_BM_REDIRECTED) != 0;
}

/*
 * The pinned view a process looked at last: BufferGetBlock() calls on the
 * same buffer in a row (several per page) need not search the pin's
 * refcount entry.  Cleared when that view is released (its last pin).
 */
extern PGDLLIMPORT Buffer NvmLastViewBuffer;
extern PGDLLIMPORT char *NvmLastViewPage;

extern char *NvmPinnedView(Buffer buffer, bool resolve);	/* bufmgr.c */
extern void *NvmBufferGetBlockSlow(Buffer buffer);

/*
 * NvmBufferPinnedPage -- BufferGetBlock() of a pinned redirected buffer:
 * the address of its page in this process's mapping, kept with the pin
 * (resolved by the first call under the pin from the buffer's tag and the
 * segment's mapping, NvmBufferGetBlockSlow()).
 */
static inline void *
NvmBufferPinnedPage(Buffer buffer)
{
	if (likely(buffer == NvmLastViewBuffer))
		return NvmLastViewPage;
	return NvmBufferGetBlockSlow(buffer);
}

/*
 * NvmBufferInvalidated -- the buffer buf_id, whose header spinlock the caller
 * holds, no longer holds a page (InvalidateBuffer(), InvalidateVictimBuffer()):
 * it is not redirected, in se2 its generation changes (views kept of it are
 * stale), and in the hybrid pool it gives its slot back.  base and se1 take
 * one branch here, as before generations (NvmHybridPool implies se2).
 */
static inline void
NvmBufferInvalidated(int buf_id)
{
	NvmBufferFlags[buf_id] = 0;
	if (NvmBufferGen != NULL)
	{
		NvmBufferGen[buf_id]++;
		if (NvmHybridPool)
			NvmSlotInvalidated(buf_id);
	}
}

/*
 * NvmFollowCopy -- *ptr points into the page of the pinned shared buffer
 * "buffer".  If this process found that page in place (the buffer was
 * redirected) and the page has since been copied into its slot (by any
 * process, before changing it: copy-on-write), point *ptr at the same byte
 * of the slot, which is the current version; else leave it.
 *
 * For code that keeps a pointer into a page across lock releases and reads
 * it again under a content lock (tuple visibility checks): the copy does not
 * move pointers other processes, or this one, took earlier (see R5 in
 * docs/storage-engines.md).  A no-op unless nvm_storage_engine = se2.
 */
static inline void
NvmFollowCopy(void **ptr, Buffer buffer)
{
	if (unlikely(NvmSe2Active()) && buffer > 0)
	{
		char	   *view;
		uintptr_t	off;

		if (unlikely(NvmHitKeptViews))	/* EXPERIMENT */
			view = (char *) NvmBufferView(buffer);
		else if (buffer == NvmLastViewBuffer)
			view = NvmLastViewPage;
		else
			view = NvmPinnedView(buffer, false);
		off = (uintptr_t) ((char *) *ptr - view);

		if (view != NULL && off < BLCKSZ &&
			!(NvmHitKeptViews ?
			  (NvmBufferFlags[buffer - 1] & NVM_BUF_REDIRECTED) != 0 :
			  NvmBufferRedirectedNow(buffer)))
		{
			/* see the copy's bytes, not older ones: pairs with its release */
			pg_read_barrier();
			*ptr = NvmSlotBlock(buffer - 1) + off;
		}
	}
}

extern Size NvmBufShmemSize(void);
extern void NvmBufShmemInit(void);
extern void NvmBufInitAccess(void);

extern char *NvmBufferPinView(Buffer buffer, int32 *map);
extern void NvmBufferUnpinView(Buffer buffer, int32 map);
extern void NvmBufferForgetView(Buffer buffer);
extern void NvmBufferCow(Buffer buffer);
extern bool NvmBufferConditionalCow(Buffer buffer);
extern bool NvmBufferIsRedirected(Buffer buffer);
extern bool NvmSkipHintInMapping(const void *ptr);

/* completion of a read whose blocks the storage manager left in place */
extern void NvmPrepareRedirect(const Buffer *buffers, int nbuffers);
extern char *NvmInPlacePage(PgAioHandle *ioh, uint8 buf_off);
extern bool NvmInPlaceVerified(const char *page, BlockNumber blkno);
extern bool NvmRedirectDone(Buffer buffer, char *page);

#endif							/* NVM_BUF_H */
