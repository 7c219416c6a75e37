/*-------------------------------------------------------------------------
 *
 * nvm_buf.h
 *	  pgnvm se2: shared buffers that point into memory mappings of the
 *	  relation files ("PtrRedirection layer").
 *
 * A shared buffer is *redirected* when its page is not in its slot of the
 * buffer pool but read in place from the relation file, through each
 * process's own read-only mapping of the segment.  The redirection is
 * recorded in the buffer's descriptor only (BM_NVM_REDIRECTED, patch 0005),
 * changed under the buffer header spinlock or with BM_VALID at the end of
 * the read that redirects; NvmBufferFlags (one byte per buffer) holds the
 * copy-on-write and hybrid-pool state beside it, never the redirection.  A
 * process that pins a redirected buffer keeps the address of the page in its
 * own mapping with the pin (its PrivateRefCountEntry), computed by the first
 * BufferGetBlock() under the pin from the buffer's tag through the process's
 * cache of segment mappings: nothing indexed by buffer is read on a hit.
 * See docs/storage-engines.md (R1-R8, H4g).
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

/*
 * bits of NvmBufferFlags[], changed under the buffer header spinlock.  Whether
 * the buffer is redirected is not among them: that is the descriptor's
 * BM_NVM_REDIRECTED (NvmBufferRedirectedNow(), NvmBufferIsRedirected()).
 */
#define NVM_BUF_COW_RUNNING		0x01	/* a process is copying it into the
										 * slot */
#define NVM_BUF_NO_DEMOTE		0x02	/* hybrid pool: the slot's page is not
										 * the file's verified page (zeroed or
										 * unverified on read): never demote */

/* shared: one byte per shared buffer; NULL in processes not attached */
extern PGDLLIMPORT volatile uint8 *NvmBufferFlags;

/*
 * Is se2 on in this process?  Set once a process of a server with
 * nvm_storage_engine = se2 has set up its buffer manager access
 * (NvmBufInitAccess(), from InitBufferManagerAccess()): from then on it may
 * meet redirected buffers.  False in base and se1, and in processes that
 * have no buffer manager access (the postmaster).
 */
extern PGDLLIMPORT bool NvmSe2On;

/*
 * NvmSe2Active -- the one test of "se2 is on" of the buffer manager and its
 * callers: a load of a global, so that the other engines pay no more than
 * that on the hot paths (BufferGetBlock()).
 */
static inline bool
NvmSe2Active(void)
{
	return NvmSe2On;
}

/*
 * The redirection as the descriptor's state bit BM_NVM_REDIRECTED
 * (buf_internals.h, patch 0005; nvm_buf.c asserts that the two agree), for
 * BufferGetBlock() and the buffer manager's other tests, which cannot include
 * buf_internals.h (bufmgr.h): NvmBufferStates is the address of the first
 * descriptor's state, descriptors are NVM_BUFFERDESC_SIZE apart.  The pin has
 * just loaded that line.  Only while se2 is on (NvmSe2Active()).
 *
 * NvmBufferRedirectedNow() reads the bit without the header spinlock: its
 * callers pin the buffer, and a pinned valid buffer that is not redirected
 * never becomes redirected again (only a read that finds it invalid, or the
 * slot clock's demotion of an unpinned one, set the bit), while a set bit
 * may be cleared meanwhile by another process's copy-on-write, after which
 * the caller's copy-on-write finds nothing to copy (nvm_buffer_cow() looks
 * again under the spinlock) and BufferGetBlock()'s pointer into the mapping
 * stays valid under the pin (R5).  So a racy read is enough for them.
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
 * holds, no longer holds a page (InvalidateBuffer(), InvalidateVictimBuffer(),
 * which clear BM_NVM_REDIRECTED with the descriptor's other flags): its
 * NVM_BUF_NO_DEMOTE goes with the page, and in the hybrid pool it gives its
 * slot back.
 */
static inline void
NvmBufferInvalidated(int buf_id)
{
	NvmBufferFlags[buf_id] = 0;
	if (NvmHybridPool)
		NvmSlotInvalidated(buf_id);
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
	if (unlikely(NvmSe2Active()) && buffer > 0 &&
		!NvmBufferRedirectedNow(buffer))
	{
		char	   *view = buffer == NvmLastViewBuffer ? NvmLastViewPage :
			NvmPinnedView(buffer, false);
		uintptr_t	off = (uintptr_t) ((char *) *ptr - view);

		if (view != NULL && off < BLCKSZ)
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
extern void NvmBufferCow(Buffer buffer);
extern bool NvmBufferConditionalCow(Buffer buffer);
extern bool NvmBufferIsRedirected(Buffer buffer);
extern bool NvmPointerInMapping(const void *ptr);
extern bool NvmSkipHintInMapping(const void *ptr);

/* completion of a read whose blocks the storage manager left in place */
extern char *NvmInPlacePage(PgAioHandle *ioh, uint8 buf_off);
extern bool NvmInPlaceVerified(const char *page, BlockNumber blkno);
extern void NvmRedirectDone(Buffer buffer);

#endif							/* NVM_BUF_H */
