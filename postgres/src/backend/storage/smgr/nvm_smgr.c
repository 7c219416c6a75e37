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
 * and the buffer manager holds a "view" of a mapping (nvm_view_acquire())
 * for as long as one of its pinned buffers points into it.
 *
 * Durability.  Blocks written through a MAP_SHARED mapping are the same
 * page-cache (or, with DAX, device) pages that write() would have
 * modified, and fsync() on any descriptor of the file writes back pages
 * dirtied through any shared mapping (and on DAX flushes the CPU caches for
 * them).  So md.c's sync machinery is reused unchanged: after a write we
 * register the segment for the next checkpoint's fsync exactly as mdwritev()
 * does.  See docs/storage-engines.md.
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

#include <sys/mman.h>

#include "common/relpath.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pgstat.h"
#include "port/pg_iovec.h"
#include "storage/aio.h"
#include "storage/aio_internal.h"
#include "storage/md.h"
#include "storage/nvm_fault.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_smgr.h"
#include "storage/nvm_stats.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

/* GUC: the storage engine, fixed at server start */
int			nvm_storage_engine = NVM_ENGINE_BASE;

const struct config_enum_entry nvm_storage_engine_options[] = {
	{"base", NVM_ENGINE_BASE, false},
	{"se1", NVM_ENGINE_SE1, false},
	{"se2", NVM_ENGINE_SE2, false},
	{NULL, 0, false}
};

/* bytes spanned by the mapping of one segment */
#define NVM_SEGMENT_BYTES	((size_t) RELSEG_SIZE * BLCKSZ)

/* memory for the per-relation arrays of mapping addresses */
static MemoryContext NvmCxt = NULL;

/*
 * Views: pinned redirected buffers of this process whose pages it reads
 * through a read-only mapping (counted by the buffer manager, see
 * nvm_view_acquire()).  While there are any, read-only mappings closed
 * meanwhile are retired instead of unmapped.
 */
static int	nvm_live_views = 0;

static void nvm_release_retired_mappings(void);

/*
 * nvm_map_segment -- map the segment holding blocknum into this process.
 *
 * md.c opens the segment, with the same rules as for a read or a write
 * (including creation of missing segments during recovery); we map the
 * whole RELSEG_SIZE span of it, read-write for copies or read-only for
 * redirected buffers, and remember the address in reln.
 */
static pg_noinline char *
nvm_map_segment(SMgrRelation reln, BlockNumber blocknum, bool skipFsync,
				bool readonly)
{
	BlockNumber segno = blocknum / ((BlockNumber) RELSEG_SIZE);
	const char *path;
	int			fd;
	void	   *addr;

	nvm_fault_init();

	if (NvmCxt == NULL)
		NvmCxt = AllocSetContextCreate(TopMemoryContext, "NvmSmgr",
									   ALLOCSET_SMALL_SIZES);

	/* make room in the array of mappings */
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

	fd = mdsegfd(reln, MAIN_FORKNUM, blocknum, skipFsync, &path);

	addr = mmap(NULL, NVM_SEGMENT_BYTES,
				readonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
				fd, 0);
	if (addr == MAP_FAILED)
	{
		bool		nomem = (errno == ENOMEM);

		ereport(ERROR,
				(errcode(nomem ? ERRCODE_OUT_OF_MEMORY : ERRCODE_IO_ERROR),
				 errmsg("could not map file \"%s\": %m", path),
				 nomem ? errhint("Each process maps every relation segment it reads; "
								 "raise vm.max_map_count or use nvm_storage_engine = base.") : 0));
	}

	if (readonly)
		reln->nvm_maps[segno].ro = (char *) addr;
	else
		reln->nvm_maps[segno].rw = (char *) addr;
	return (char *) addr;
}

/*
 * nvm_block_address -- address of blocknum in this process's read-write
 * mapping of its segment, mapping the segment if needed.
 */
static inline char *
nvm_block_address(SMgrRelation reln, BlockNumber blocknum, bool skipFsync)
{
	BlockNumber segno = blocknum / ((BlockNumber) RELSEG_SIZE);
	char	   *map;

	if (segno < (BlockNumber) reln->nvm_num_maps &&
		reln->nvm_maps[segno].rw != NULL)
		map = reln->nvm_maps[segno].rw;
	else
		map = nvm_map_segment(reln, blocknum, skipFsync, false);

	return map + (size_t) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE));
}

/*
 * nvm_ro_block_address -- the same in the read-only mapping, used for
 * redirected buffers: a stray write through a redirected page faults
 * instead of bypassing the buffer manager and the WAL.
 */
static inline char *
nvm_ro_block_address(SMgrRelation reln, BlockNumber blocknum)
{
	BlockNumber segno = blocknum / ((BlockNumber) RELSEG_SIZE);
	char	   *map;

	if (segno < (BlockNumber) reln->nvm_num_maps &&
		reln->nvm_maps[segno].ro != NULL)
		map = reln->nvm_maps[segno].ro;
	else
		map = nvm_map_segment(reln, blocknum, false, true);

	return map + (size_t) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE));
}

/*
 * nvm_mapped_block -- for the buffer manager: this process's read-only
 * mapped address of a block of a permanent relation's main fork (to read a
 * redirected buffer's page in place).
 */
char *
nvm_mapped_block(RelFileLocator rlocator, ForkNumber forknum,
				 BlockNumber blocknum)
{
	SMgrRelation reln = smgropen(rlocator, INVALID_PROC_NUMBER);

	Assert(forknum == MAIN_FORKNUM);
	Assert(reln->smgr_which == 1);
	return nvm_ro_block_address(reln, blocknum);
}

/*
 * nvm_map_blocks -- the read-only mapped addresses of blocks [blocknum,
 * blocknum + nblocks) of a main fork, which must lie in one segment, in
 * pages[]; the blocks are faulted in, under the SIGBUS guard.  Returns how
 * many of them are readable: fewer than nblocks if the file ends early (the
 * caller treats the rest as a short read).
 */
BlockNumber
nvm_map_blocks(SMgrRelation reln, ForkNumber forknum, BlockNumber blocknum,
			   BlockNumber nblocks, char **pages)
{
	char	   *src;
	BlockNumber done;

	Assert(forknum == MAIN_FORKNUM);
	Assert(blocknum % ((BlockNumber) RELSEG_SIZE) + nblocks <= RELSEG_SIZE);

	src = nvm_ro_block_address(reln, blocknum);
	pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_READ);
	done = nvm_touch_mapping(src, nblocks);
	pgstat_report_wait_end();

	for (BlockNumber i = 0; i < done; i++)
		pages[i] = src + (size_t) i * BLCKSZ;
	return done;
}

/*
 * nvm_view_acquire/nvm_view_release -- the buffer manager starts or stops
 * reading the page at this address (in a read-only mapping of this
 * process) through a pinned redirected buffer.  Called in critical sections
 * too (the completion of a read): must not fail.
 */
void
nvm_view_acquire(const char *page)
{
	nvm_live_views++;
}

void
nvm_view_release(const char *page)
{
	Assert(nvm_live_views > 0);
	if (--nvm_live_views == 0)
		nvm_release_retired_mappings();
}

/*
 * Read-only mappings that were closed while this process still had pinned
 * redirected buffers pointing into them.  Their pages may still be read
 * through pointers obtained under those pins, so they are unmapped only
 * when the last such pin is gone (nvm_view_release()).  This happens when a relation is closed for a reason that
 * does not conflict with our pins, e.g. the SMGRRELEASE barrier of DROP
 * DATABASE, which makes every process close every relation.
 */
static List *nvm_retired_maps = NIL;

static void
nvm_release_retired_mappings(void)
{
	ListCell   *lc;

	if (nvm_retired_maps == NIL)
		return;
	foreach(lc, nvm_retired_maps)
	{
		if (munmap(lfirst(lc), NVM_SEGMENT_BYTES) != 0)
			elog(WARNING, "could not unmap retired relation segment: %m");
	}
	list_free(nvm_retired_maps);
	nvm_retired_maps = NIL;
}

/*
 * nvm_unmap -- remove one mapping, or retire it if pinned redirected
 * buffers of this process may still point into it.
 */
static void
nvm_unmap(char *addr, bool readonly)
{
	if (addr == NULL)
		return;
	if (readonly && nvm_live_views > 0)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(NvmCxt);

		nvm_retired_maps = lappend(nvm_retired_maps, addr);
		MemoryContextSwitchTo(oldcxt);
		return;
	}
	/* runs during error cleanup too: never throw an ERROR from here */
	if (munmap(addr, NVM_SEGMENT_BYTES) != 0)
		elog(WARNING, "could not unmap relation segment: %m");
}

/*
 * nvm_unmap_from -- remove this process's mappings of segments >= first.
 */
static void
nvm_unmap_from(SMgrRelation reln, int first)
{
	for (int segno = first; segno < reln->nvm_num_maps; segno++)
	{
		nvm_unmap(reln->nvm_maps[segno].rw, false);
		nvm_unmap(reln->nvm_maps[segno].ro, true);
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
		nvm_unmap_from(reln, 0);
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
		char	   *src = nvm_block_address(reln, blocknum, false);

		pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_READ);
		done = nvm_copy_from_mapping(buffers, src, nthis);
		pgstat_report_wait_end();
		MyNvmStats->mapped_reads += done;

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
		nvm_storage_engine == NVM_ENGINE_SE2)
	{
		char	   *pages[PG_IOV_MAX];

		Assert(nblocks <= PG_IOV_MAX);
		done = nvm_map_blocks(reln, forknum, blocknum, nblocks, pages);

		/*
		 * Prefetch (nvm_prefetch.c; also with nvm_prefetch = off, which stops
		 * helpers started earlier).  A read the buffer manager will wait for
		 * at once (ReadBuffer()) is flagged synchronous; a read stream's
		 * reads are started ahead of use.
		 */
		NvmPrefetchRedirected(nvm_ro_block_address(reln, blocknum) -
							  (size_t) BLCKSZ * segblock,
							  segblock, done,
							  (ioh->flags & PGAIO_HF_SYNCHRONOUS) == 0);

		/* the blocks stay where they are; those past the end: nowhere */
		for (BlockNumber i = 0; i < nblocks; i++)
		{
			iov[i].iov_base = i < done ? pages[i] : NULL;
			iov[i].iov_len = BLCKSZ;
		}
		pgaio_io_set_flag(ioh, PGAIO_HF_IN_PLACE);
	}
	else
	{
		char	   *src = nvm_block_address(reln, blocknum, false);

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

	pgaio_io_set_target_smgr(ioh, reln, forknum, blocknum, nblocks, false);
	pgaio_io_register_callbacks(ioh, PGAIO_HCB_MD_READV, 0);
	pgaio_io_start_readv_copied(ioh, (int) nblocks,
								(uint64) BLCKSZ * segblock,
								(uint32) done * BLCKSZ);
}

/*
 * nvm_writev -- write blocks back: copy them into the mapping.
 *
 * Only existing blocks are written here (extension is md.c's, and reserves
 * the space), so the copy cannot need new space on the device; should it
 * fault nevertheless (a file with holes on a full file system, a file cut
 * short behind our back), the rest is written with mdwritev(), which
 * reports the error as stock PostgreSQL does.  Then the segment is
 * registered for fsync at the next checkpoint, as mdwritev() does.
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
		BlockNumber done;

		if (nthis != nblocks)
			elog(ERROR, "write crosses segment boundary");

		dst = nvm_block_address(reln, blocknum, skipFsync);

		pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_WRITE);
		done = nvm_copy_to_mapping(dst, buffers, nthis);
		pgstat_report_wait_end();
		MyNvmStats->mapped_writes += done;

		if (done < nthis)
			mdwritev(reln, forknum, blocknum + done, buffers + done,
					 nthis - done, skipFsync);
		else if (!skipFsync)
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
	mdtruncate(reln, forknum, curnblk, nblocks);

	if (forknum == MAIN_FORKNUM && reln->nvm_maps != NULL)
		nvm_unmap_from(reln, nblocks / ((BlockNumber) RELSEG_SIZE) + 1);
}
