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
 * under a SIGBUS guard: the fault is turned into a short copy, and the
 * remaining blocks are handed to md.c, whose read()/write() reports exactly
 * the error stock PostgreSQL reports ("read only 0 of 8192 bytes", "No
 * space left on device").  The server never dies of such a fault.
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

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include "common/relpath.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/aio.h"
#include "storage/aio_internal.h"
#include "storage/bufmgr.h"
#include "storage/md.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_smgr.h"
#include "nodes/pg_list.h"
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
 * SIGBUS guard.  While a copy through a mapping is in progress, nvm_fault_jmp
 * points to where the copy resumes on a fault, and [nvm_fault_lo,
 * nvm_fault_hi) is the mapped range it touches.
 */
static sigjmp_buf *volatile nvm_fault_jmp = NULL;
static char *volatile nvm_fault_lo = NULL;
static char *volatile nvm_fault_hi = NULL;
static bool nvm_sigbus_installed = false;


/*
 * nvm_sigbus_handler -- turn a fault inside a guarded copy into a longjmp.
 *
 * Any other SIGBUS is not ours: restore the default action and let the
 * faulting instruction run again (or re-raise a SIGBUS sent with kill()), so
 * the process dies exactly as it would have without this handler.
 */
static void
nvm_sigbus_handler(int signo, siginfo_t *info, void *context)
{
	char	   *addr = (char *) info->si_addr;

	if (nvm_fault_jmp != NULL && info->si_code > 0 &&
		addr >= nvm_fault_lo && addr < nvm_fault_hi)
		siglongjmp(*nvm_fault_jmp, 1);

	signal(SIGBUS, SIG_DFL);
	if (info->si_code <= 0)
		raise(SIGBUS);
}

/*
 * nvm_install_sigbus_handler -- once per process, before its first mapping.
 *
 * SA_NODEFER keeps SIGBUS unblocked after siglongjmp() leaves the handler
 * (the guard uses sigsetjmp() without saving the signal mask, which would
 * cost a system call per copy).
 */
static void
nvm_install_sigbus_handler(void)
{
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_sigaction = nvm_sigbus_handler;
	act.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&act.sa_mask);
	if (sigaction(SIGBUS, &act, NULL) != 0)
		elog(ERROR, "could not install SIGBUS handler: %m");
	nvm_sigbus_installed = true;
}

/*
 * nvm_copy_guarded -- copy nblocks blocks between a mapped segment range and
 * buffers, under the SIGBUS guard.
 *
 * "map" is the mapped address of the first block; buffers[i] is the i-th
 * block's buffer.  to_map selects the direction.  Returns the number of
 * blocks copied completely: less than nblocks if the mapping faulted (the
 * file is shorter than expected, or the file system could not provide a
 * page).  A partially copied block is not counted.
 */
static BlockNumber
nvm_copy_guarded(char *map, void **buffers, BlockNumber nblocks, bool to_map)
{
	sigjmp_buf	jmp;
	volatile BlockNumber done = 0;

	Assert(nvm_sigbus_installed);
	Assert(nvm_fault_jmp == NULL);

	if (sigsetjmp(jmp, 0) == 0)
	{
		nvm_fault_lo = map;
		nvm_fault_hi = map + (size_t) nblocks * BLCKSZ;
		nvm_fault_jmp = &jmp;

		while (done < nblocks)
		{
			char	   *blk = map + (size_t) done * BLCKSZ;

			if (to_map)
				memcpy(blk, buffers[done], BLCKSZ);
			else
				memcpy(buffers[done], blk, BLCKSZ);
			done = done + 1;
		}
	}
	nvm_fault_jmp = NULL;

	return done;
}

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

	if (!nvm_sigbus_installed)
		nvm_install_sigbus_handler();

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
 * nvm_redirect_address -- for nvm_buf.c: this process's read-only mapped
 * address of a block of a permanent relation's main fork.
 */
char *
nvm_redirect_address(RelFileLocator rlocator, ForkNumber forknum,
					 BlockNumber blocknum)
{
	SMgrRelation reln = smgropen(rlocator, INVALID_PROC_NUMBER);

	Assert(forknum == MAIN_FORKNUM);
	Assert(reln->smgr_which == 1);
	return nvm_ro_block_address(reln, blocknum);
}

/*
 * nvm_copy_page_guarded -- copy one block from a mapping, under the SIGBUS
 * guard.  Returns false if the mapping faulted.
 */
bool
nvm_copy_page_guarded(char *dst, const char *src)
{
	void	   *buf = dst;

	if (!nvm_sigbus_installed)
		nvm_install_sigbus_handler();
	return nvm_copy_guarded((char *) src, &buf, 1, false) == 1;
}

/*
 * Read-only mappings that were closed while this process still had pinned
 * redirected buffers pointing into them.  Their pages may still be read
 * through pointers obtained under those pins, so they are unmapped only
 * when the last such pin is gone (nvm_release_retired_mappings(), called by
 * nvm_buf.c).  This happens when a relation is closed for a reason that
 * does not conflict with our pins, e.g. the SMGRRELEASE barrier of DROP
 * DATABASE, which makes every process close every relation.
 */
static List *nvm_retired_maps = NIL;

void
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
	if (readonly && NvmLiveViews())
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
		done = nvm_copy_guarded(src, buffers, nthis, false);
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
 * nvm_probe_guarded -- fault in the pages of nblocks mapped blocks (one load
 * per OS page), under the SIGBUS guard.  Returns how many blocks are
 * readable: fewer if the file ends early.
 */
static BlockNumber
nvm_probe_guarded(const char *map, BlockNumber nblocks)
{
	sigjmp_buf	jmp;
	volatile BlockNumber done = 0;
	size_t		pagesz = 4096;

	Assert(nvm_fault_jmp == NULL);

	if (sigsetjmp(jmp, 0) == 0)
	{
		nvm_fault_lo = (char *) map;
		nvm_fault_hi = (char *) map + (size_t) nblocks * BLCKSZ;
		nvm_fault_jmp = &jmp;

		while (done < nblocks)
		{
			const volatile char *blk = map + (size_t) done * BLCKSZ;

			for (size_t off = 0; off < BLCKSZ; off += pagesz)
				(void) blk[off];
			done = done + 1;
		}
	}
	nvm_fault_jmp = NULL;

	return done;
}

/*
 * nvm_startreadv -- "asynchronous" read, as used by the buffer manager.
 *
 * se1, and se2 for reads that may not redirect: the copy is done right
 * here, then the IO handle is staged as a read that has already transferred
 * its bytes (pgaio_io_start_readv_copied()), so it completes synchronously
 * without a system call or an IO worker, and the usual completion callbacks
 * run: md.c's short-read check and error report, then the buffer manager's
 * checksum verification and buffer state update.  A fault in the mapping
 * shows up as a short read, reported exactly like a short read() by md.c.
 *
 * se2, for reads the buffer manager declared read-only
 * (NvmRedirectNextRead): nothing is copied.  The blocks are faulted in
 * through the read-only mapping, and while the handle completes, the buffer
 * manager's completion callback verifies each page in the mapping
 * (NvmRedirectTarget()) and marks the buffer redirected (NvmRedirectDone()).
 */
void
nvm_startreadv(PgAioHandle *ioh,
			   SMgrRelation reln, ForkNumber forknum, BlockNumber blocknum,
			   void **buffers, BlockNumber nblocks)
{
	struct iovec *iov;
	int			iovcnt;
	BlockNumber done;
	bool		redirect;

	if (forknum != MAIN_FORKNUM)
	{
		mdstartreadv(ioh, reln, forknum, blocknum, buffers, nblocks);
		return;
	}

	if (blocknum % ((BlockNumber) RELSEG_SIZE) + nblocks > RELSEG_SIZE)
		elog(ERROR, "read crossing segment boundary");

	redirect = NvmRedirectNextRead && NvmBufferPages != NULL;

	if (redirect)
	{
		char	   *src = nvm_ro_block_address(reln, blocknum);
		Buffer		bufs[MAX_IO_COMBINE_LIMIT];
		char	   *pages[MAX_IO_COMBINE_LIMIT];

		Assert(nblocks <= MAX_IO_COMBINE_LIMIT);

		pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_READ);
		done = nvm_probe_guarded(src, nblocks);
		pgstat_report_wait_end();

		/*
		 * Prefetch (nvm_prefetch.c; also with nvm_prefetch = off, which stops
		 * helpers started earlier).  A read the buffer manager will wait for
		 * at once (ReadBuffer()) is flagged synchronous; a read stream's
		 * reads are started ahead of use.
		 */
		NvmPrefetchRedirected(src - (size_t) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE)),
							  blocknum % ((BlockNumber) RELSEG_SIZE), done,
							  (ioh->flags & PGAIO_HF_SYNCHRONOUS) == 0);

		for (BlockNumber i = 0; i < done; i++)
		{
			/* the buffers are shared buffer slots: find their numbers */
			bufs[i] = (Buffer) (((char *) buffers[i] - BufferBlocks) / BLCKSZ) + 1;
			pages[i] = src + (size_t) i * BLCKSZ;
		}
		NvmRedirectBegin(done, bufs, pages);
	}
	else
	{
		char	   *src = nvm_block_address(reln, blocknum, false);

		pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_READ);
		done = nvm_copy_guarded(src, buffers, nblocks, false);
		pgstat_report_wait_end();
		MyNvmStats->mapped_reads += done;
	}

	/* describe the buffers, as a read() would have used them */
	iovcnt = pgaio_io_get_iovec(ioh, &iov);
	Assert(nblocks <= iovcnt);
	for (iovcnt = 0; iovcnt < (int) nblocks; iovcnt++)
	{
		iov[iovcnt].iov_base = buffers[iovcnt];
		iov[iovcnt].iov_len = BLCKSZ;
	}

	pgaio_io_set_target_smgr(ioh, reln, forknum, blocknum, nblocks, false);
	pgaio_io_register_callbacks(ioh, PGAIO_HCB_MD_READV, 0);

	PG_TRY();
	{
		pgaio_io_start_readv_copied(ioh, iovcnt,
									(uint64) BLCKSZ * (blocknum % ((BlockNumber) RELSEG_SIZE)),
									(uint32) done * BLCKSZ);
	}
	PG_FINALLY();
	{
		if (redirect)
			NvmRedirectEnd();
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
		done = nvm_copy_guarded(dst, (void **) buffers, nthis, true);
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
