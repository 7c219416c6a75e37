/*-------------------------------------------------------------------------
 *
 * nvm_index_ahead.c
 *	  pgnvm se2: announce the heap blocks an index scan will fetch next.
 *
 * An index scan fetches its heap tuples one at a time, with ReadBuffer()
 * calls nobody knows in advance: in se2 each fetch of a block not in shared
 * buffers faults its page in and reads it in place on the spot, and the
 * prefetch helpers (nvm_prefetch.c), which run ahead of read streams, cannot
 * help.  But a btree scan holds the whole batch of TIDs of its current leaf
 * page (BTScanOpaque->currPos.items[]) before it returns the first: the heap
 * blocks of the TIDs after the current one are known.  index_fetch_heap()
 * calls NvmIndexFetchAhead() before each fetch, and the blocks of the next
 * items of the batch (up to nvm_prefetch_distance of them) are handed to
 * prefetching through the storage manager (nvm_prefetch_block()): the
 * helpers fault them in, bring them into the caches and, with data
 * checksums on, verify them while the backend works on the current tuple
 * (nvm_prefetch = helper), or the backend prefetches what is already mapped
 * (inline).
 *
 * Point lookups must not pay: nothing is announced until a scan has fetched
 * from NVM_AHEAD_AFTER_BLOCKS different heap blocks since it started or was
 * rescanned (a nested loop's inner index scan is rescanned for every outer
 * row), so a lookup of one row or of a few rows on one page costs one
 * comparison per fetch.  Index-only scans fetch heap blocks only for pages
 * not all-visible, so they are not announced; other index AMs neither (only
 * btree exposes its batch).  Scans of system catalogs are not announced
 * either: they are the lookups of the catalog caches (many of them when a
 * backend starts), each a few blocks, and announcing them would start
 * helper threads in every backend for nothing.  Blocks announced recently
 * are not announced again (TIDs of a leaf often share heap blocks).
 *
 * Announcing is advice only: it reads no page, pins no buffer, takes no
 * lock, and a wrong announcement (a block the scan then does not fetch)
 * only costs helper time.  Correctness does not depend on it: the fetch
 * reads and redirects the block exactly as without it, and verifies it
 * itself unless a helper's verdict covers exactly the bytes it reads.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/access/index/nvm_index_ahead.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/nvm_index_ahead.h"
#include "catalog/catalog.h"
#include "catalog/pg_am_d.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_smgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* a scan announces once it has fetched from this many heap blocks */
#define NVM_AHEAD_AFTER_BLOCKS	4
/* blocks recently announced by a scan, not announced again */
#define NVM_AHEAD_RECENT		64

struct NvmIndexAhead
{
	bool		never;			/* this scan never announces (see above) */
	BlockNumber last_block;		/* heap block of the previous fetch */
	int			blocks_seen;	/* heap blocks fetched since (re)start */
	BlockNumber leaf;			/* index page whose items were announced */
	int			next_item;		/* next items[] entry to announce */
	int			recent_pos;		/* next slot of recent[] */
	BlockNumber recent[NVM_AHEAD_RECENT];
};

/*
 * NvmIndexAheadReset -- the scan starts over (index_rescan()): it has to
 * show again that it is more than a point lookup.
 */
void
NvmIndexAheadReset(IndexScanDesc scan)
{
	NvmIndexAhead *a = scan->xs_nvm_ahead;

	if (a == NULL)
		return;
	a->last_block = InvalidBlockNumber;
	a->blocks_seen = 0;
	a->leaf = InvalidBlockNumber;
	a->next_item = 0;
}

/* was blk announced recently?  If not, remember it */
static bool
nvm_ahead_recent(NvmIndexAhead *a, BlockNumber blk)
{
	for (int i = 0; i < NVM_AHEAD_RECENT; i++)
		if (a->recent[i] == blk)
			return true;
	a->recent[a->recent_pos] = blk;
	a->recent_pos = (a->recent_pos + 1) % NVM_AHEAD_RECENT;
	return false;
}

/*
 * NvmIndexFetchAhead -- before index_fetch_heap() fetches scan->xs_heaptid:
 * announce the heap blocks of the next items of the btree batch.
 */
void
NvmIndexFetchAhead(IndexScanDesc scan)
{
	NvmIndexAhead *a = scan->xs_nvm_ahead;
	BlockNumber blk = ItemPointerGetBlockNumber(&scan->xs_heaptid);
	BTScanOpaque so;
	SMgrRelation reln;
	int			step;
	int			cur;
	int			last;
	int			window = nvm_prefetch_distance;

	if (nvm_prefetch == NVM_PREFETCH_OFF || window == 0)
		return;

	if (a == NULL)
	{
		/* what cannot change during the scan is decided once */
		a = MemoryContextAllocZero(GetMemoryChunkContext(scan),
								   sizeof(NvmIndexAhead));
		a->never = scan->xs_want_itup ||
			scan->indexRelation->rd_rel->relam != BTREE_AM_OID ||
			RelationUsesLocalBuffers(scan->heapRelation) ||
			IsCatalogRelation(scan->heapRelation);
		for (int i = 0; i < NVM_AHEAD_RECENT; i++)
			a->recent[i] = InvalidBlockNumber;
		scan->xs_nvm_ahead = a;
		NvmIndexAheadReset(scan);
	}
	if (a->never)
		return;
	if (blk != a->last_block)
	{
		a->last_block = blk;
		a->blocks_seen++;
	}
	if (a->blocks_seen < NVM_AHEAD_AFTER_BLOCKS)
		return;

	so = (BTScanOpaque) scan->opaque;
	if (!BTScanPosIsValid(so->currPos))
		return;
	step = ScanDirectionIsForward(so->currPos.dir) ? 1 : -1;
	cur = so->currPos.itemIndex;

	/* a new leaf page, or the scan went back (mark/restore): from here */
	if (so->currPos.currPage != a->leaf ||
		(step > 0 ? a->next_item <= cur : a->next_item >= cur))
	{
		a->leaf = so->currPos.currPage;
		a->next_item = cur + step;
	}
	last = step > 0 ? Min(so->currPos.lastItem, cur + window) :
		Max(so->currPos.firstItem, cur - window);

	reln = RelationGetSmgr(scan->heapRelation);
	for (; step > 0 ? a->next_item <= last : a->next_item >= last;
		 a->next_item += step)
	{
		BlockNumber next =
			ItemPointerGetBlockNumber(&so->currPos.items[a->next_item].heapTid);

		if (next == blk || nvm_ahead_recent(a, next))
			continue;
		nvm_prefetch_block(reln, next);
	}
}
