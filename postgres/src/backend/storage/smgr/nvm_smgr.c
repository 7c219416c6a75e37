/*-------------------------------------------------------------------------
 *
 * nvm_smgr.c
 *	  pgnvm: a storage manager that moves relation data with memcpy()
 *	  through memory mappings of the segment files.
 *
 * This is the "MemMapped layer" (storage engine se1) of the pgnvm design:
 * when the relation files live on byte-addressable storage (persistent
 * memory behind a DAX file system, CXL memory, or tmpfs as an emulation of
 * either), a buffer miss need not go through read() and the kernel's copy:
 * the process maps the segment file once and copies the block straight from
 * the mapping into the shared buffer.  Writing a dirty buffer back is the
 * opposite memcpy().
 *
 * Only the main fork of permanent relations is handled here.  Temporary
 * relations live in backend-local buffers and the small FSM, visibility map
 * and init forks are almost always cached; they keep md.c's path, which this
 * file also reuses for everything that does not move block contents
 * (creating, extending, truncating, unlinking and syncing files, counting
 * blocks).  md.c therefore stays the owner of the files: this file only adds
 * per-process mappings of the segments md.c opens.
 *
 * Mappings.  Each process maps a segment the first time it copies a block
 * of it, MAP_SHARED and for the full RELSEG_SIZE span, so that the mapping
 * stays valid however the file grows: extension (done by md.c with write()
 * or fallocate(), which reserves the space) needs no remap.  Only bytes
 * below the file's length are ever touched.  A mapping lives as long as
 * md.c's handle on the relation: it is removed when the fork is closed
 * (smgrclose/smgrrelease/smgrdestroy, which is what relcache and smgr
 * invalidation, DROP, and the SMGRRELEASE barrier do) and, for whole
 * segments cut off, when the relation is truncated.  md.c never unlinks or
 * replaces a segment file while any process may still use the relation
 * (see the comments at the top of md.c), so a mapping always refers to the
 * file md.c would open.
 *
 * Faults.  A load or store through a mapping beyond the end of the file, or
 * a store into a hole of a full file system, raises SIGBUS instead of
 * returning an error code.  Every copy through a mapping therefore runs
 * under the SIGBUS guard of nvm_fault.c: the fault is turned into a short
 * copy, and the remaining blocks are handed to md.c, whose read()/write()
 * reports exactly the error stock PostgreSQL reports ("read only 0 of 8192
 * bytes", "No space left on device").  The server never dies of such a
 * fault.
 *
 * Reads left in place (se2).  When the buffer manager says that the issuer
 * of a read only reads the blocks (PGAIO_HF_IN_PLACE_OK on the AIO handle),
 * nvm_startreadv() copies nothing: it faults the blocks in through a
 * read-only mapping, points the handle's iovecs at them and marks the
 * handle PGAIO_HF_IN_PLACE; the buffer manager's completion callback then
 * verifies the pages there and redirects the buffers (nvm_buf.c).  This
 * file knows nothing of buffers: the addresses travel with the IO handle,
 * and the buffer manager holds a "view" of a mapping (nvm_view_pin()) for as
 * long as one of its pinned buffers points into it.  A view names its
 * mapping by a handle (NvmViewMap), an index into this process's table of
 * read-only mappings, so that releasing a view needs no look-up; the first
 * view of a pin finds its mapping from the buffer's tag through a small
 * cache of segments (relation, segment -> handle and the handle's epoch):
 * letting go of a mapping (retiring or unmapping it) changes the epoch, so
 * a cache entry never reaches a mapping that has gone
 * (docs/storage-engines.md, H4b, H4g).
 *
 * Verification by prefetch helpers (se2, nvm_prefetch = helper, data
 * checksums on).  Helpers that prefetch redirected blocks also verify them,
 * and a verdict is used only if no write into relation files through this
 * storage manager has started since its job was enqueued and its mapping
 * was not let go since (nvm_verify.c, docs/storage-engines.md, V1-V6).  So
 * this file counts its writes (nvm_writev(), nvm_truncate():
 * NvmVerifyWriteBegins(), NvmVerifyWriteEnds()), hands the write generation
 * with the blocks it gives to prefetching, and forgets the verdicts of a
 * mapping it lets go (nvm_let_go(): NvmVerifyForget()).
 *
 * Durability.  Blocks written through a MAP_SHARED mapping are the same
 * page-cache (or, with DAX, device) pages that write() would have
 * modified, and fsync() on any descriptor of the file writes back pages
 * dirtied through any shared mapping (and on DAX flushes the CPU caches for
 * them).  So with nvm_data_persist = fsync (the default) md.c's sync
 * machinery is reused unchanged: after a write we register the segment for
 * the next checkpoint's fsync exactly as mdwritev() does.
 *
 * With nvm_data_persist = pmem a block written back is made durable before
 * nvm_writev() returns, and nothing is registered: the checkpoint has no
 * fsync left to do for it.  How depends on what libpmem2 finds for the file
 * (asked once per read-write mapping, NvmPmemProbe()): at page
 * granularity (tmpfs, a disk file system, DAX without MAP_SYNC) we call
 * msync(MS_SYNC) on the block's pages ourselves, so that a failure is an
 * error of ours (PANIC, as a failed checkpoint fsync) rather than libpmem2's
 * abort(); at cache-line or byte granularity (DAX with MAP_SYNC, or forced
 * with PMEM2_FORCE_GRANULARITY for emulation) libpmem2's persist function
 * for our own mapping (NvmPmemAdopt()) flushes the block's cache
 * lines and fences.  WAL-before-data is the buffer manager's, unchanged: it
 * flushes WAL up to the page's LSN before it calls us.  Writes the caller
 * will sync itself (skipFsync: bulk writes followed by smgrimmedsync()) are
 * only copied.  See docs/storage-engines.md.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 * Portions Copyright (c) 1996-2025, PostgreSQL Global Development Group
 *
 * IDENTIFICATION
 *	  src/backend/storage/smgr/nvm_smgr.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "common/file_perm.h"
#include "common/file_utils.h"
#include "common/relpath.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "port/pg_iovec.h"
#include "storage/aio.h"
#include "storage/aio_internal.h"
#include "storage/bufmgr.h"		/* track_io_timing */
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/md.h"
#include "storage/nvm_fault.h"
#include "storage/nvm_pmem.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_smgr.h"
#include "storage/nvm_stats.h"
#include "storage/nvm_verify.h"
#include "utils/nvm_guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

/* bytes spanned by the mapping of one segment */
#define NVM_SEGMENT_BYTES	((size_t) RELSEG_SIZE * BLCKSZ)

/*
 * One mapping of one segment in this process.
 *
 * A mapping is *owned* by the SMgrRelation that made it (reln->nvm_maps)
 * and sits in NvmLru, most recently used first.  When its owner lets go of
 * it (relation closed or truncated, or the mapping evicted to respect
 * nvm_max_mappings) it is unmapped at once, unless the buffer manager holds
 * views of it (pinned redirected buffers of this process whose pages it
 * reads through it, see nvm_view_pin()): then it is *retired* (owner
 * NULL, in NvmRetired) and unmapped when its last view goes.  Letting go
 * never allocates, so it is safe in critical sections (RelationTruncate()).
 */
typedef struct NvmMapping
{
	dlist_node	node;			/* in NvmLru (owned) or NvmRetired */
	SMgrRelation reln;			/* owner, NULL once retired */
	BlockNumber segno;
	bool		readonly;		/* PROT_READ, for redirected buffers (se2) */
	char	   *addr;
	int			views;			/* views the buffer manager holds */
	NvmViewMap	view_map;		/* read-only: its entry of NvmViewMaps */
	BlockNumber known_blocks;	/* the segment has at least this many */

	/*
	 * nvm_data_persist = pmem, read-write mappings: how a written block is
	 * persisted.  pm is libpmem2's view of this very mapping at cache-line or
	 * byte granularity, zeroed at page granularity (NvmPmemPersist() then
	 * msync()s).  also_fsync: cache flushes were forced
	 * (PMEM2_FORCE_GRANULARITY) on a mapping without MAP_SYNC, where they
	 * make nothing durable: the block is also registered for the checkpoint's
	 * fsync.
	 */
	bool		persists;
	bool		also_fsync;
	NvmPmemMap	pm;
} NvmMapping;

static MemoryContext NvmCxt = NULL;
static dlist_head NvmLru = DLIST_STATIC_INIT(NvmLru);
static dlist_head NvmRetired = DLIST_STATIC_INIT(NvmRetired);
static int	NvmNumMappings = 0; /* owned and retired */

/*
 * The handles of the read-only mappings (owned and retired), for the views:
 * NvmViewMap is an index into this table, stable while its mapping lives.
 * An entry's epoch changes when its mapping is let go (retired or unmapped
 * at once) and when the entry is given to a new mapping: a segment-cache
 * entry made with another epoch is stale (nvm_view_pin()).  Epochs are
 * never 0, which marks an empty cache entry.  The table only grows (it
 * is reserved before mapping, nvm_viewmap_reserve(): letting go and views
 * never allocate); free entries are chained through next_free.
 */
typedef struct NvmViewMapEntry
{
	NvmMapping *m;				/* the mapping, NULL while the entry is free */
	uint32		epoch;			/* cache entries with another are stale */
	NvmViewMap	next_free;		/* free entries' chain */
} NvmViewMapEntry;

static NvmViewMapEntry *NvmViewMaps = NULL;
static int	NvmViewMapsLen = 0;	/* entries ever used */
static int	NvmViewMapsCap = 0;
static NvmViewMap NvmViewMapsFree = NVM_NO_VIEW_MAP;

/* a failed mmap() is logged once per process */
static bool NvmFallbackLogged = false;

/*
 * The segment cache (the hit path, issue 22 item 3; docs/storage-engines.md
 * H4g): for the first BufferGetBlock() under a pin of a redirected buffer,
 * which segment's read-only mapping, from the buffer's tag, without a
 * look-up of the relation (smgropen()'s hash) or of the buffer (nothing
 * indexed by buffer).  Direct-mapped, NVM_SEG_CACHE entries keyed by
 * relation and segment (only main forks are read in place); an entry holds
 * the mapping's handle and its epoch then: it is good only while the
 * handle's epoch is that one, i.e. while the mapping was not let go
 * (nvm_let_go() changes the epoch).  A relfilenumber given to a new
 * relation is therefore never served from an old entry: the old relation's
 * mappings were let go when the process absorbed its invalidation
 * (nvm_close()), before it could lock the new one, as md.c's file
 * descriptors are closed.  A query touches a few dozen segments: the cache
 * (1.5 kB) stays in L1.
 */
#define NVM_SEG_CACHE_BITS	6
#define NVM_SEG_CACHE		(1 << NVM_SEG_CACHE_BITS)

typedef struct NvmSegCacheEntry
{
	RelFileLocator rlocator;
	BlockNumber segno;
	NvmViewMap	map;			/* the mapping's handle */
	uint32		epoch;			/* its epoch when cached; 0: empty */
} NvmSegCacheEntry;

static NvmSegCacheEntry NvmSegCache[NVM_SEG_CACHE];

/* the entry of the segment cache for segment segno of rlocator */
static inline NvmSegCacheEntry *
nvm_seg_cache_entry(RelFileLocator rlocator, BlockNumber segno)
{
	uint32		h = (rlocator.relNumber ^ (rlocator.dbOid << 7) ^
					 (segno * 0x9E3779B1U)) * 0x9E3779B1U;

	return &NvmSegCache[h >> (32 - NVM_SEG_CACHE_BITS)];
}

/* the next epoch of a view map entry: any value but 0 */
static inline uint32
nvm_epoch_next(uint32 epoch)
{
	return epoch + 1 == 0 ? 1 : epoch + 1;
}

/*
 * nvm_viewmap_reserve -- room for one more handle (before mapping: may
 * ERROR).
 */
static void
nvm_viewmap_reserve(void)
{
	if (NvmViewMapsFree != NVM_NO_VIEW_MAP || NvmViewMapsLen < NvmViewMapsCap)
		return;
	NvmViewMapsCap = Max(16, NvmViewMapsCap * 2);
	if (NvmViewMaps == NULL)
		NvmViewMaps = MemoryContextAlloc(NvmCxt,
										 sizeof(NvmViewMapEntry) * NvmViewMapsCap);
	else
		NvmViewMaps = repalloc(NvmViewMaps,
							   sizeof(NvmViewMapEntry) * NvmViewMapsCap);
}

/* give the new read-only mapping m a handle (reserved: never fails) */
static void
nvm_viewmap_assign(NvmMapping *m)
{
	NvmViewMap	map;

	if (NvmViewMapsFree != NVM_NO_VIEW_MAP)
	{
		map = NvmViewMapsFree;
		NvmViewMapsFree = NvmViewMaps[map].next_free;
	}
	else
	{
		Assert(NvmViewMapsLen < NvmViewMapsCap);
		map = NvmViewMapsLen++;
		NvmViewMaps[map].m = NULL;
		NvmViewMaps[map].epoch = 0;
	}
	Assert(NvmViewMaps[map].m == NULL);
	NvmViewMaps[map].m = m;
	/* no cache entry of an earlier holder's is taken for this one */
	NvmViewMaps[map].epoch = nvm_epoch_next(NvmViewMaps[map].epoch);
	NvmViewMaps[map].next_free = NVM_NO_VIEW_MAP;
	m->view_map = map;
}

/* the read-only mapping m is unmapped: its handle is free */
static void
nvm_viewmap_free(NvmMapping *m)
{
	NvmViewMapEntry *e = &NvmViewMaps[m->view_map];

	Assert(e->m == m);
	e->m = NULL;
	e->epoch = nvm_epoch_next(e->epoch);
	e->next_free = NvmViewMapsFree;
	NvmViewMapsFree = m->view_map;
}

/*
 * nvm_unmap_mapping -- unmap and forget a mapping nobody uses any more.
 * Runs during error cleanup and in critical sections too: never throws.
 */
static void
nvm_unmap_mapping(NvmMapping *m)
{
	Assert(m->views == 0);
	/* libpmem2 forgets the range (it never unmaps what it did not map) */
	if (m->pm.map != NULL && NvmPmemRelease(&m->pm) != 0)
		elog(WARNING, "could not release libpmem2 mapping: %s",
			 NvmPmemErrorMessage());
	if (munmap(m->addr, NVM_SEGMENT_BYTES) != 0)
		elog(WARNING, "could not unmap relation segment: %m");
	if (m->readonly)
		nvm_viewmap_free(m);
	dlist_delete(&m->node);
	NvmNumMappings--;
	pfree(m);
}

/*
 * nvm_let_go -- the owner of a mapping no longer uses it (the caller clears
 * its reference): unmap it, or retire it while views of it remain.
 */
static void
nvm_let_go(NvmMapping *m)
{
	if (m == NULL)
		return;
	m->reln = NULL;
	if (m->readonly)
	{
		/* whatever is mapped at this address later, no verdict is about it */
		NvmVerifyForget(m->addr, NVM_SEGMENT_BYTES);

		/* it is not found through the segment cache again (nvm_view_pin()) */
		NvmViewMaps[m->view_map].epoch =
			nvm_epoch_next(NvmViewMaps[m->view_map].epoch);
	}
	if (m->views > 0)
	{
		dlist_delete(&m->node);
		dlist_push_head(&NvmRetired, &m->node);
	}
	else
		nvm_unmap_mapping(m);
}

/*
 * nvm_evict -- let go of the least recently used mappings that no view
 * holds, until at most "target" mappings remain (or none can go).
 */
static void
nvm_evict(int target)
{
	dlist_node *cur = dlist_is_empty(&NvmLru) ? NULL : dlist_tail_node(&NvmLru);

	while (cur != NULL && NvmNumMappings > target)
	{
		NvmMapping *m = dlist_container(NvmMapping, node, cur);

		cur = dlist_has_prev(&NvmLru, cur) ? dlist_prev_node(&NvmLru, cur) : NULL;
		if (m->views > 0)
			continue;
		if (m->readonly)
			m->reln->nvm_maps[m->segno].ro = NULL;
		else
			m->reln->nvm_maps[m->segno].rw = NULL;
		nvm_let_go(m);
		MyNvmStats->mappings_evicted++;
	}
}

/*
 * nvm_mmap -- mmap() a segment's full span.  Read-write mappings whose
 * writes we persist ourselves ask for MAP_SYNC first (a DAX file system then
 * keeps the file's metadata durable at every page fault, so that flushing
 * the cache lines of a store is enough); elsewhere MAP_SYNC is refused and a
 * plain shared mapping is made.
 */
static void *
nvm_mmap(int fd, bool readonly, bool persists, bool *map_sync)
{
	void	   *addr;

	*map_sync = false;
	if (persists)
	{
		addr = mmap(NULL, NVM_SEGMENT_BYTES, PROT_READ | PROT_WRITE,
					MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
		if (addr != MAP_FAILED)
			*map_sync = true;
		if (addr != MAP_FAILED || (errno != EOPNOTSUPP && errno != EINVAL))
			return addr;
	}
	return mmap(NULL, NVM_SEGMENT_BYTES,
				readonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
				fd, 0);
}

/*
 * nvm_persist_setup -- decide how writes through the new read-write mapping
 * m of the file open as fd are persisted (nvm_data_persist = pmem): at cache
 * line or byte granularity through libpmem2's view of our mapping, else
 * (page granularity, or libpmem2 cannot tell) with msync().
 *
 * libpmem2 reports cache-line granularity for any file when
 * PMEM2_FORCE_GRANULARITY says so.  Cache flushes make a store durable only
 * through a MAP_SYNC mapping (DAX); on any other mapping (tmpfs for the
 * emulation, or a disk file system by mistake) they are then done for their
 * cost alone, and the block is also registered for the checkpoint's fsync,
 * which is what keeps it durable there.
 */
static void
nvm_persist_setup(NvmMapping *m, int fd, bool map_sync)
{
	NvmPmemGranularity gran = NvmPmemProbe(fd, BLCKSZ);

	m->persists = true;
	if (NvmPmemFlushes(gran) &&
		NvmPmemAdopt(fd, m->addr, NVM_SEGMENT_BYTES, gran, &m->pm))
		m->also_fsync = !map_sync;
}

/*
 * nvm_map_segment -- map the segment segno of reln's main fork into this
 * process, read-write for copies or read-only for redirected buffers, and
 * remember it in reln.  NULL if the segment cannot be mapped (the caller
 * then uses md.c's read()/write() instead).
 *
 * md.c opens the segment, with the same rules as for a read or a write
 * (including creation of missing segments during recovery); we map the
 * whole RELSEG_SIZE span of it.  At most nvm_max_mappings mappings are
 * kept: the least recently used ones without views go first.  If mmap()
 * fails (no address space left, vm.max_map_count reached, a file system
 * that cannot map), every mapping that can go goes and it is tried once
 * more; then it is given up, logged once per process, and counted.
 */
static pg_noinline NvmMapping *
nvm_map_segment(SMgrRelation reln, BlockNumber segno, bool skipFsync,
				bool readonly)
{
	const char *path;
	int			fd;
	struct stat st;
	void	   *addr;
	NvmMapping *m;
	bool		persists = !readonly &&
		nvm_data_persist == NVM_DATA_PERSIST_PMEM;
	bool		map_sync;

	nvm_fault_init();

	if (NvmCxt == NULL)
		NvmCxt = AllocSetContextCreate(TopMemoryContext, "NvmSmgr",
									   ALLOCSET_SMALL_SIZES);

	/* everything that allocates, first: letting go must not */
	if (segno >= (BlockNumber) reln->nvm_num_maps)
	{
		int			newsize = Max(segno + 1, 4);

		if (reln->nvm_maps == NULL)
			reln->nvm_maps = MemoryContextAllocZero(NvmCxt,
													sizeof(NvmSegMap) * newsize);
		else
		{
			reln->nvm_maps = repalloc(reln->nvm_maps, sizeof(NvmSegMap) * newsize);
			memset(reln->nvm_maps + reln->nvm_num_maps, 0,
				   sizeof(NvmSegMap) * (newsize - reln->nvm_num_maps));
		}
		reln->nvm_num_maps = newsize;
	}
	if (readonly)
		nvm_viewmap_reserve();
	m = MemoryContextAllocZero(NvmCxt, sizeof(NvmMapping));

	if (NvmNumMappings >= nvm_max_mappings)
		nvm_evict(nvm_max_mappings - 1);

	fd = mdsegfd(reln, MAIN_FORKNUM, segno * ((BlockNumber) RELSEG_SIZE),
				 skipFsync, &path);
	if (fstat(fd, &st) == 0)
		m->known_blocks = (BlockNumber) Min(st.st_size / BLCKSZ, RELSEG_SIZE);
	if (unlikely(nvm_debug_fail_mappings))
	{
		addr = MAP_FAILED;
		errno = ENOMEM;
	}
	else
		addr = nvm_mmap(fd, readonly, persists, &map_sync);
	if (addr == MAP_FAILED && NvmNumMappings > 0 && !nvm_debug_fail_mappings)
	{
		nvm_evict(0);
		addr = nvm_mmap(fd, readonly, persists, &map_sync);
	}
	if (addr == MAP_FAILED)
	{
		int			save_errno = errno;

		pfree(m);
		MyNvmStats->mapping_fallbacks++;
		if (!NvmFallbackLogged)
		{
			NvmFallbackLogged = true;
			errno = save_errno;
			ereport(LOG,
					(errmsg("could not map file \"%s\": %m", path),
					 errdetail("This process reads and writes relation files it cannot map with read() and write(); it says so only once."),
					 errhint("Each process maps the relation segments it uses, at most nvm_max_mappings of them; check vm.max_map_count and the address-space limit (ulimit -v).")));
		}
		return NULL;
	}

	m->reln = reln;
	m->segno = segno;
	m->readonly = readonly;
	m->addr = (char *) addr;
	if (persists)
		nvm_persist_setup(m, fd, map_sync);
	dlist_push_head(&NvmLru, &m->node);
	NvmNumMappings++;
	if (readonly)
	{
		nvm_viewmap_assign(m);
		reln->nvm_maps[segno].ro = m;
	}
	else
		reln->nvm_maps[segno].rw = m;
	MyNvmStats->mappings_created++;
	return m;
}

/*
 * nvm_segment -- this process's mapping of segment segno, read-only or
 * read-write, mapping it if needed; marked most recently used.  NULL if it
 * cannot be mapped.
 */
static inline NvmMapping *
nvm_segment(SMgrRelation reln, BlockNumber segno, bool skipFsync,
			bool readonly)
{
	NvmMapping *m = NULL;

	if (segno < (BlockNumber) reln->nvm_num_maps)
		m = readonly ? reln->nvm_maps[segno].ro : reln->nvm_maps[segno].rw;
	if (m == NULL)
		return nvm_map_segment(reln, segno, skipFsync, readonly);
	if (dlist_head_node(&NvmLru) != &m->node)
	{
		dlist_delete(&m->node);
		dlist_push_head(&NvmLru, &m->node);
	}
	return m;
}

/*
 * nvm_block_address -- address of blocknum in this process's read-write
 * mapping of its segment (NULL if it cannot be mapped).
 */
static inline char *
nvm_block_address(SMgrRelation reln, BlockNumber blocknum, bool skipFsync,
				  NvmMapping **mapping)
{
	NvmMapping *m = nvm_segment(reln, blocknum / ((BlockNumber) RELSEG_SIZE),
								skipFsync, false);

	if (mapping)
		*mapping = m;
	if (m == NULL)
		return NULL;
	return m->addr + (size_t) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE));
}

/*
 * nvm_ro_block_address -- the same in the read-only mapping, used for
 * redirected buffers: a stray write through a redirected page faults
 * instead of bypassing the buffer manager and the WAL.
 */
static inline char *
nvm_ro_block_address(SMgrRelation reln, BlockNumber blocknum)
{
	NvmMapping *m = nvm_segment(reln, blocknum / ((BlockNumber) RELSEG_SIZE),
								false, true);

	if (m == NULL)
		return NULL;
	return m->addr + (size_t) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE));
}

/*
 * nvm_mapped_block -- this process's read-only mapped address of a block of
 * a permanent relation's main fork (to read a redirected buffer's page in
 * place), and the handle of its mapping in *map, or NULL if its segment
 * cannot be mapped: nvm_view_pin()'s look-up when its cache has no entry.
 */
static char *
nvm_mapped_block(RelFileLocator rlocator, ForkNumber forknum,
				 BlockNumber blocknum, NvmViewMap *map)
{
	SMgrRelation reln = smgropen(rlocator, INVALID_PROC_NUMBER);
	NvmMapping *m;

	Assert(forknum == MAIN_FORKNUM);
	Assert(reln->smgr_which == NVM_SMGR_WHICH);
	m = nvm_segment(reln, blocknum / ((BlockNumber) RELSEG_SIZE), false, true);
	if (m == NULL)
		return NULL;
	*map = m->view_map;
	return m->addr + (size_t) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE));
}

/*
 * nvm_prefetch_block -- for index scans' look-ahead (nvm_index_ahead.c):
 * blocknum of reln will be fetched soon; hand it to prefetching (and to the
 * helpers' verification).  Advice only: nothing is faulted in here; nothing
 * happens if the relation is not ours (e.g. temporary) or its segment
 * cannot be mapped.
 */
void
nvm_prefetch_block(SMgrRelation reln, BlockNumber blocknum)
{
	char	   *addr;

	if (reln->smgr_which != NVM_SMGR_WHICH)
		return;
	addr = nvm_ro_block_address(reln, blocknum);
	if (addr != NULL)
		NvmPrefetchAhead(addr, blocknum, 1, NvmVerifyWriteGeneration());
}

/*
 * nvm_map_blocks -- the read-only mapped addresses of blocks [blocknum,
 * blocknum + nblocks) of a main fork, which must lie in one segment, in
 * pages[]; the blocks are faulted in, under the SIGBUS guard.  Returns how
 * many of them are readable: fewer than nblocks if the file ends early (the
 * caller treats the rest as a short read), -1 if the segment cannot be
 * mapped.
 */
int
nvm_map_blocks(SMgrRelation reln, ForkNumber forknum, BlockNumber blocknum,
			   BlockNumber nblocks, char **pages)
{
	char	   *src;
	BlockNumber done;

	Assert(forknum == MAIN_FORKNUM);
	Assert(blocknum % ((BlockNumber) RELSEG_SIZE) + nblocks <= RELSEG_SIZE);

	src = nvm_ro_block_address(reln, blocknum);
	if (src == NULL)
		return -1;
	pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_READ);
	done = nvm_touch_mapping(src, nblocks);
	pgstat_report_wait_end();

	for (BlockNumber i = 0; i < done; i++)
		pages[i] = src + (size_t) i * BLCKSZ;
	return (int) done;
}

/*
 * nvm_view_release -- the buffer manager stops reading a page of the
 * read-only mapping "map" of this process through a pinned redirected
 * buffer (a view nvm_view_pin() counted).  While a mapping has views, it is
 * not unmapped (a mapping let go meanwhile is retired, and unmapped at its
 * last view's release).  Called at the last unpin, also in error cleanup:
 * must not fail or allocate.
 */
void
nvm_view_release(NvmViewMap map)
{
	NvmMapping *m;

	Assert(map >= 0 && map < NvmViewMapsLen);
	m = NvmViewMaps[map].m;
	Assert(m != NULL && m->views > 0);
	if (--m->views == 0 && m->reln == NULL)
		nvm_unmap_mapping(m);
}

/*
 * nvm_view_pin -- for the first BufferGetBlock() under a pin of a redirected
 * buffer (nvm_buf.c): the address of block blocknum of the relation and
 * fork of the buffer's tag in this process's read-only mapping of its
 * segment, with a view counted on the mapping (its handle in *map, for
 * nvm_view_release() at the last unpin); NULL if the segment cannot be
 * mapped here.  From the segment cache when its entry is good (views_kept),
 * else looked up and mapped as for a read (views_resolved, after
 * views_stale if the entry's mapping was let go).  The entry is checked
 * against the mapping it names (relation, segment, owned): a 32-bit epoch
 * that came round could name another (view_mismatches, which must stay 0).
 */
char *
nvm_view_pin(RelFileLocator rlocator, ForkNumber forknum,
			 BlockNumber blocknum, NvmViewMap *map)
{
	BlockNumber segno = blocknum / ((BlockNumber) RELSEG_SIZE);
	NvmSegCacheEntry *c = nvm_seg_cache_entry(rlocator, segno);
	NvmMapping *m;
	char	   *page;

	Assert(forknum == MAIN_FORKNUM);
	if (c->epoch != 0 && c->segno == segno &&
		RelFileLocatorEquals(c->rlocator, rlocator))
	{
		NvmViewMapEntry *e = &NvmViewMaps[c->map];

		if (likely(e->epoch == c->epoch))
		{
			m = e->m;
			if (likely(m != NULL && m->reln != NULL && m->segno == segno &&
					   RelFileLocatorEquals(m->reln->smgr_rlocator.locator,
											rlocator)))
			{
				m->views++;
				/* used: most recently (as nvm_segment() would) */
				if (dlist_head_node(&NvmLru) != &m->node)
				{
					dlist_delete(&m->node);
					dlist_push_head(&NvmLru, &m->node);
				}
				*map = c->map;
				MyNvmStats->views_kept++;
				return m->addr +
					(size_t) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE));
			}
			MyNvmStats->view_mismatches++;
		}
		else
			MyNvmStats->views_stale++;
		c->epoch = 0;
	}

	page = nvm_mapped_block(rlocator, forknum, blocknum, map);
	if (page == NULL)
		return NULL;
	m = NvmViewMaps[*map].m;
	Assert(m != NULL && m->reln != NULL);
	m->views++;
	c->rlocator = rlocator;
	c->segno = segno;
	c->map = *map;
	c->epoch = NvmViewMaps[*map].epoch;
	MyNvmStats->views_resolved++;
	return page;
}

/*
 * nvm_let_go_from -- let go of this process's mappings of segments >= first
 * (retiring those that views still hold).
 */
static void
nvm_let_go_from(SMgrRelation reln, int first)
{
	for (int segno = first; segno < reln->nvm_num_maps; segno++)
	{
		nvm_let_go(reln->nvm_maps[segno].rw);
		nvm_let_go(reln->nvm_maps[segno].ro);
		reln->nvm_maps[segno].rw = NULL;
		reln->nvm_maps[segno].ro = NULL;
	}

	if (first == 0 && reln->nvm_maps != NULL)
	{
		pfree(reln->nvm_maps);
		reln->nvm_maps = NULL;
		reln->nvm_num_maps = 0;
	}
}

/*
 * nvm_init -- smgr_init, in every process: with se2, make sure a write the
 * process began is counted as ended if the process exits in it (see
 * NvmVerifyWriteBegins()).  At each server start (the startup process, or a
 * single-user backend), check nvm_data_persist.
 *
 * nvm_data_persist = pmem needs an engine that writes through mappings: with
 * base it would silently do nothing, so it is a FATAL.  Otherwise a probe
 * file in base/ (the default tablespace) is mapped with libpmem2, and the
 * granularity it gives is logged (one LOG line), or the reason it cannot be
 * mapped is a FATAL naming the directory, before any block is written.
 * Tablespaces elsewhere get what their own file system gives: each
 * read-write mapping asks for itself (nvm_persist_setup()).
 */
void
nvm_init(void)
{
	char		path[MAXPGPATH];
	const char *forced = NvmPmemForced();
	int			fd;
	NvmPmemGranularity gran;
	bool		map_sync = false;

	/* every process: a write it began is ended if it exits (FATAL) */
	NvmVerifyInitProcess();

	if (IsUnderPostmaster && MyBackendType != B_STARTUP)
		return;
	if (nvm_data_persist != NVM_DATA_PERSIST_PMEM)
		return;
	if (nvm_storage_engine == NVM_ENGINE_BASE)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"nvm_data_persist\" = pmem requires \"nvm_storage_engine\" se1 or se2"),
				 errdetail("With nvm_storage_engine = base, relation blocks are written with write() and made durable by the checkpoint's fsync."),
				 errhint("Set \"nvm_storage_engine\" to se1 or se2, or \"nvm_data_persist\" to fsync.")));

	/* one name: a probe left by a killed start is removed by the next */
	snprintf(path, sizeof(path), "base/pgnvm_persist_probe");
	(void) unlink(path);
	fd = BasicOpenFilePerm(path, O_RDWR | O_CREAT | O_EXCL | PG_BINARY,
						   pg_file_create_mode);
	if (fd < 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", path)));
	if (pg_pwrite_zeros(fd, BLCKSZ, 0) < 0)
	{
		int			save_errno = errno;

		close(fd);
		(void) unlink(path);
		errno = save_errno;
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not write to file \"%s\": %m", path)));
	}
	gran = NvmPmemProbe(fd, BLCKSZ);
	/* would our mappings get MAP_SYNC here?  (see nvm_persist_setup) */
	if (NvmPmemFlushes(gran))
		map_sync = NvmPmemMapSyncOk(fd, BLCKSZ);
	close(fd);
	(void) unlink(path);
	if (gran == NVM_PMEM_GRAN_NONE)
		ereport(FATAL,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"nvm_data_persist\" = pmem: relation files in directory \"%s/base\" cannot be mapped with libpmem2: %s",
						DataDir, NvmPmemErrorMessage()),
				 errhint("Put the data directory on a file system that supports shared writable memory mappings, or set \"nvm_data_persist\" to fsync.")));
	ereport(LOG,
			(errmsg("nvm_data_persist = pmem: relation blocks in \"%s/base\" are persisted when written, at %s granularity (%s)%s%s",
					DataDir, NvmPmemGranularityName(gran),
					NvmPmemPersistMethod(gran),
					forced ? psprintf(", forced by PMEM2_FORCE_GRANULARITY=%s", forced) : "",
					NvmPmemFlushes(gran) && !map_sync ?
					"; not a MAP_SYNC mapping, so checkpoints still fsync them" : "")));
}

/*
 * nvm_open -- initialize a newly opened relation: no mappings yet.
 */
void
nvm_open(SMgrRelation reln)
{
	reln->nvm_num_maps = 0;
	reln->nvm_maps = NULL;
	mdopen(reln);
}

/*
 * nvm_close -- close a fork: drop our mappings along with md.c's handles.
 *
 * This is what makes invalidation work: every path that removes or replaces
 * a relation's files (DROP, TRUNCATE's new relfilenumber, rewrites, DROP
 * DATABASE) makes every process close the relation before the files can be
 * reused.
 */
void
nvm_close(SMgrRelation reln, ForkNumber forknum)
{
	if (forknum == MAIN_FORKNUM)
		nvm_let_go_from(reln, 0);
	mdclose(reln, forknum);
}

/*
 * nvm_readv -- synchronous read: copy the blocks from the mapping.
 *
 * Blocks the mapping cannot provide (beyond the end of the file) are read
 * with mdreadv(), so the caller sees exactly md.c's behaviour and errors.
 */
void
nvm_readv(SMgrRelation reln, ForkNumber forknum, BlockNumber blocknum,
		  void **buffers, BlockNumber nblocks)
{
	BlockNumber done;

	if (forknum != MAIN_FORKNUM)
	{
		mdreadv(reln, forknum, blocknum, buffers, nblocks);
		return;
	}

	while (nblocks > 0)
	{
		BlockNumber nthis = Min(nblocks,
								RELSEG_SIZE - blocknum % ((BlockNumber) RELSEG_SIZE));
		char	   *src = nvm_block_address(reln, blocknum, false, NULL);

		if (src == NULL)
		{
			/* cannot be mapped: read() it */
			done = 0;
		}
		else
		{
			pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_READ);
			done = nvm_copy_from_mapping(buffers, src, nthis);
			pgstat_report_wait_end();
			MyNvmStats->mapped_reads += done;
		}

		if (done < nthis)
		{
			mdreadv(reln, forknum, blocknum + done, buffers + done,
					nthis - done);
		}

		nblocks -= nthis;
		buffers += nthis;
		blocknum += nthis;
	}
}

/*
 * nvm_startreadv -- "asynchronous" read, as used by the buffer manager.
 *
 * The blocks are made available right here, then the IO handle is staged
 * as a read that has already transferred its bytes
 * (pgaio_io_start_readv_copied()), so it completes synchronously, in this
 * process, without a system call or an IO worker, and the usual completion
 * callbacks run: md.c's short-read check and error report, then the buffer
 * manager's checksum verification and buffer state update.  A fault in the
 * mapping shows up as a short read, reported exactly like a short read() by
 * md.c.
 *
 * se1, and se2 for reads whose issuer may write: the blocks are copied into
 * the buffers.  se2, for reads whose issuer only reads (PGAIO_HF_IN_PLACE_OK,
 * set by the buffer manager): nothing is copied; the iovecs point at the
 * blocks in the read-only mapping (PGAIO_HF_IN_PLACE), where the completion
 * callback verifies them and redirects the buffers.
 */
void
nvm_startreadv(PgAioHandle *ioh,
			   SMgrRelation reln, ForkNumber forknum, BlockNumber blocknum,
			   void **buffers, BlockNumber nblocks)
{
	struct iovec *iov;
	int			iovcnt PG_USED_FOR_ASSERTS_ONLY;
	char	   *pages[PG_IOV_MAX];
	char	   *src;
	int			ndone;
	BlockNumber done;
	BlockNumber segblock = blocknum % ((BlockNumber) RELSEG_SIZE);

	if (forknum != MAIN_FORKNUM)
	{
		mdstartreadv(ioh, reln, forknum, blocknum, buffers, nblocks);
		return;
	}

	if (segblock + nblocks > RELSEG_SIZE)
		elog(ERROR, "read crossing segment boundary");

	iovcnt = pgaio_io_get_iovec(ioh, &iov);
	Assert(nblocks <= iovcnt);

	if ((ioh->flags & PGAIO_HF_IN_PLACE_OK) &&
		nvm_storage_engine == NVM_ENGINE_SE2 &&
		(ndone = nvm_map_blocks(reln, forknum, blocknum, nblocks, pages)) >= 0)
	{
		NvmMapping *m = reln->nvm_maps[blocknum / ((BlockNumber) RELSEG_SIZE)].ro;

		done = (BlockNumber) ndone;
		m->known_blocks = Max(m->known_blocks, segblock + done);

		/*
		 * Prefetch (nvm_prefetch.c; also with nvm_prefetch = off, which stops
		 * helpers started earlier).  A read the buffer manager will wait for
		 * at once (ReadBuffer()) is flagged synchronous; a read stream's
		 * reads are started ahead of use.
		 */
		NvmPrefetchRedirected(m->addr, blocknum - segblock, segblock, done,
							  m->known_blocks,
							  (ioh->flags & PGAIO_HF_SYNCHRONOUS) == 0,
							  NvmVerifyWriteGeneration());

		/* the blocks stay where they are; those past the end: nowhere */
		for (BlockNumber i = 0; i < nblocks; i++)
		{
			iov[i].iov_base = i < done ? pages[i] : NULL;
			iov[i].iov_len = BLCKSZ;
		}
		pgaio_io_set_flag(ioh, PGAIO_HF_IN_PLACE);
	}
	else if ((src = nvm_block_address(reln, blocknum, false, NULL)) != NULL)
	{
		pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_READ);
		done = nvm_copy_from_mapping(buffers, src, nblocks);
		pgstat_report_wait_end();
		MyNvmStats->mapped_reads += done;

		/* describe the buffers, as a read() would have used them */
		for (BlockNumber i = 0; i < nblocks; i++)
		{
			iov[i].iov_base = buffers[i];
			iov[i].iov_len = BLCKSZ;
		}
	}
	else
	{
		/* the segment cannot be mapped: a real read, by md.c */
		mdstartreadv(ioh, reln, forknum, blocknum, buffers, nblocks);
		return;
	}

	pgaio_io_set_target_smgr(ioh, reln, forknum, blocknum, nblocks, false);
	pgaio_io_register_callbacks(ioh, PGAIO_HCB_MD_READV, 0);
	pgaio_io_start_readv_copied(ioh, (int) nblocks,
								(uint64) BLCKSZ * segblock,
								(uint32) done * BLCKSZ);
}

/*
 * nvm_persist_blocks -- make nblocks blocks just copied to dst, in the
 * read-write mapping m, durable (nvm_data_persist = pmem).
 *
 * A failed msync() means the kernel could not write the pages back and may
 * already consider them clean: as for a failed fsync() at a checkpoint, the
 * only safe answer is data_sync_elevel() (PANIC unless data_sync_retry), so
 * that recovery replays the WAL that still describes these blocks.
 *
 * Counted (and timed, with track_io_timing) in pg_stat_io as the fsync it
 * stands for, by the process that writes, as md.c counts a backend's own
 * fsync of a segment: the checkpoint has nothing left to fsync for these
 * blocks, so without it pg_stat_io would show durable writes as costing no
 * sync at all.
 */
static void
nvm_persist_blocks(SMgrRelation reln, NvmMapping *m, char *dst,
				   BlockNumber blocknum, BlockNumber nblocks)
{
	size_t		len = (size_t) nblocks * BLCKSZ;
	instr_time	io_start;

	Assert(m->persists && !m->readonly);
	if (!enableFsync)
		return;					/* fsync = off: as the checkpoint's fsync */
	io_start = pgstat_prepare_io_time(track_io_timing);
	pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_SYNC);
	if (NvmPmemPersist(&m->pm, dst, len, false) != 0)
	{
		/* no file access here: it could fail and hide this error */
		RelPathStr	path = relpathperm(reln->smgr_rlocator.locator,
									   MAIN_FORKNUM);
		BlockNumber segno = blocknum / ((BlockNumber) RELSEG_SIZE);
		int			save_errno = errno;

		pgstat_report_wait_end();
		errno = save_errno;
		ereport(data_sync_elevel(ERROR),
				(errcode_for_file_access(),
				 errmsg("could not persist blocks %u to %u of file \"%s%s\": %m",
						blocknum % ((BlockNumber) RELSEG_SIZE),
						blocknum % ((BlockNumber) RELSEG_SIZE) + nblocks - 1,
						path.str,
						segno > 0 ? psprintf(".%u", segno) : "")));
		return;
	}
	pgstat_report_wait_end();
	pgstat_count_io_op_time(IOOBJECT_RELATION, IOCONTEXT_NORMAL, IOOP_FSYNC,
							io_start, 1, 0);
	MyNvmStats->persisted_writes += nblocks;
}

/*
 * nvm_md_writev -- nvm_writev()'s fallback: write blocks with mdwritev(),
 * counted as a write (nvm_verify.c) that ends also when mdwritev() raises
 * an ERROR.  A function of its own, so that no variable of nvm_writev()'s
 * loop lives across the setjmp() of PG_TRY.
 */
static void
nvm_md_writev(SMgrRelation reln, ForkNumber forknum, BlockNumber blocknum,
			  const void **buffers, BlockNumber nblocks, bool skipFsync)
{
	NvmVerifyWriteBegins();
	PG_TRY();
	{
		mdwritev(reln, forknum, blocknum, buffers, nblocks, skipFsync);
	}
	PG_FINALLY();
	{
		NvmVerifyWriteEnds();
	}
	PG_END_TRY();
}

/*
 * nvm_writev -- write blocks back: copy them into the mapping.
 *
 * Only existing blocks are written here (extension is md.c's, and reserves
 * the space), so the copy cannot need new space on the device; should it
 * fault nevertheless (a file with holes on a full file system, a file cut
 * short behind our back), the rest is written with mdwritev(), which
 * reports the error as stock PostgreSQL does.  Then the blocks are made
 * durable (nvm_data_persist = pmem) or the segment is registered for fsync
 * at the next checkpoint, as mdwritev() does.
 */
void
nvm_writev(SMgrRelation reln, ForkNumber forknum, BlockNumber blocknum,
		   const void **buffers, BlockNumber nblocks, bool skipFsync)
{
	if (forknum != MAIN_FORKNUM)
	{
		mdwritev(reln, forknum, blocknum, buffers, nblocks, skipFsync);
		return;
	}

	Assert(!SmgrIsTemp(reln));

	while (nblocks > 0)
	{
		BlockNumber nthis = Min(nblocks,
								RELSEG_SIZE - blocknum % ((BlockNumber) RELSEG_SIZE));
		char	   *dst;
		NvmMapping *m;
		BlockNumber done;

		if (nthis != nblocks)
			elog(ERROR, "write crosses segment boundary");

		dst = nvm_block_address(reln, blocknum, skipFsync, &m);

		if (dst == NULL)
		{
			/* cannot be mapped: write() it (which also registers the fsync) */
			done = 0;
		}
		else
		{
			/* the guarded copy cannot fail with an ERROR */
			NvmVerifyWriteBegins();
			pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_WRITE);
			done = nvm_copy_to_mapping(dst, buffers, nthis);
			pgstat_report_wait_end();
			NvmVerifyWriteEnds();
			MyNvmStats->mapped_writes += done;
		}

		if (done > 0 && !skipFsync && m->persists)
			nvm_persist_blocks(reln, m, dst, blocknum, done);
		if (done < nthis)
			nvm_md_writev(reln, forknum, blocknum + done, buffers + done,
						  nthis - done, skipFsync);
		else if (!skipFsync && (!m->persists || m->also_fsync))
			mdregisterdirty(reln, forknum, blocknum);

		nblocks -= nthis;
		buffers += nthis;
		blocknum += nthis;
	}
}

/*
 * nvm_truncate -- truncate with md.c, then drop our mappings of the
 * segments md.c closed (they are now empty, inactive segments).
 *
 * The segment that keeps the new end stays mapped: it is the same file,
 * and nothing beyond its new length will be touched.
 */
void
nvm_truncate(SMgrRelation reln, ForkNumber forknum,
			 BlockNumber curnblk, BlockNumber nblocks)
{
	/*
	 * Truncation changes what blocks a file holds: a write for the helpers'
	 * verdicts (callers hold a critical section, so an ERROR here is a PANIC
	 * and nothing is left half counted).
	 */
	if (forknum == MAIN_FORKNUM)
		NvmVerifyWriteBegins();
	mdtruncate(reln, forknum, curnblk, nblocks);
	if (forknum == MAIN_FORKNUM)
		NvmVerifyWriteEnds();

	if (forknum == MAIN_FORKNUM && reln->nvm_maps != NULL)
		nvm_let_go_from(reln, nblocks / ((BlockNumber) RELSEG_SIZE) + 1);
}
