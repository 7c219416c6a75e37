/*-------------------------------------------------------------------------
 *
 * nvm_wal.c
 *	  pgnvm: WAL segments written through libpmem2 mappings (nvm_wal = pmem).
 *
 * With nvm_wal = pmem, XLogWrite() (xlog.c, patch 0013) hands three things
 * to this file instead of doing them with system calls (libpmem2 itself is
 * reached through storage/file/nvm_pmem.c, the one seam to it):
 *
 *	1. When it opens a segment for writing (XLogFileInit() at a segment
 *	   switch, XLogFileOpen() otherwise), nvm_wal_open() maps the whole
 *	   segment with NvmPmemMapFile() (MAP_SHARED, MAP_SYNC where the file
 *	   system offers it).  The mapping lives as long as XLogWrite()'s
 *	   descriptor: XLogFileClose() unmaps it (segment switch,
 *	   XLogBackgroundFlush() of an idle segment).
 *
 *	2. Instead of pg_pwrite(), nvm_wal_write() first pre-faults, writable,
 *	   the pages of the copy this process has not pre-faulted yet
 *	   (MADV_POPULATE_WRITE, see "Pre-faulting" below), then copies the WAL
 *	   that is not in the file yet (from the write pointer to the end of the
 *	   request, not the whole pages write() is given) into the mapping with
 *	   NvmPmemCopy() (non-temporal stores, no flush, no drain per page) and
 *	   drains once: one fence per XLogWrite() copy, which covers all of it.
 *
 *	3. Where stock PostgreSQL calls issue_xlog_fsync() for the segment
 *	   (XLogWrite() finishing a segment, and its flush step, reached from
 *	   XLogFlush(), XLogBackgroundFlush() and every other flush),
 *	   nvm_wal_persist() makes the range written since the last flush
 *	   durable through this process's mapping: one NvmPmemPersist().
 *
 * Who makes which bytes durable when.  XLogWrite() runs under WALWriteLock,
 * and the bytes between the shared flush pointer and the shared write
 * pointer may have been copied by another process, through that process's
 * mapping, before this one persists them.  The persist covers them anyway:
 *
 *	- page granularity (tmpfs, a disk file system, DAX without MAP_SYNC):
 *	  the mapping maps the file's page-cache pages, so stores by any process
 *	  dirty the same pages; persist is msync(MS_SYNC) of the range, which on
 *	  Linux is vfs_fsync_range() of the file and writes back every dirty
 *	  page in it, whoever dirtied it (exactly what fdatasync() does for the
 *	  whole file).
 *	- cache-line granularity (DAX with MAP_SYNC): the persist flushes every
 *	  cache line of the range (CLWB/CLFLUSHOPT act on the line in whichever
 *	  cache holds it) and fences.  Non-temporal stores bypass the caches but
 *	  sit in the write-combining buffers of the CPU that issued them, which
 *	  no other CPU's fence drains; that is why each copy drains before
 *	  XLogWrite() returns and WALWriteLock is released.
 *	- byte granularity (eADR): caches are persistent; the fences suffice.
 *
 * Cache flushes make WAL durable only through a MAP_SYNC mapping (a DAX
 * file system keeps the file's metadata durable at each write fault).
 * PMEM2_FORCE_GRANULARITY makes libpmem2 report cache-line (or byte)
 * granularity for any file, MAP_SYNC or not: on a disk file system the
 * flushes would then leave committed WAL in the page cache, lost at the
 * next crash of the machine.  So when the probe at start finds a finer
 * granularity than page on a file without MAP_SYNC, every persist is also
 * an msync() of the range (nvm_wal_also_msync), except on tmpfs, whose
 * pages are the only copy there is (msync() writes nothing back there):
 * the emulation of PMem's flushes on tmpfs keeps its cost, and a forced
 * setting on a disk file system keeps WAL durable.
 *
 * Pre-faulting.  Every process that flushes WAL (any backend whose commit
 * finds its record not yet flushed, the WAL writer, the checkpointer) maps
 * each segment it writes into, and its first store to each OS page of the
 * mapping needs a page-table entry.  Those are made by MADV_POPULATE_WRITE,
 * which turns a page the file system cannot provide into an error code
 * instead of a SIGBUS (below), for exactly the pages of each copy that this
 * process has not populated yet: XLogWrite() writes a segment front to back
 * (a partial page is written again as it fills), so one interval
 * [populated_from, populated_upto) per mapping tracks them; a process that
 * writes on where its last copy ended (nobody wrote in between) pre-faults
 * ahead by a window that doubles up to 1 MB, so that alone it makes a few
 * dozen calls per segment (nvm_wal_populate()).  Pre-faulting the whole
 * rest of the segment at each mapping, as earlier versions did, made every
 * flushing process pay for all of a segment's pages (4,096 entries with
 * 4 kB pages, ~2.7 ms per segment and process on the 4 kB tmpfs of our
 * emulation) while holding WALWriteLock, although each of them stores to a
 * fraction of them: with 8 committing clients that was ~9% of the lock's
 * time (docs/results/oltp-wal-20261125).  With 2 MB pages (DAX with 2 MB
 * alignment, tmpfs with huge=always) one call maps 2 MB at once, and the
 * interval keeps the calls as rare.
 *
 * A committing backend pre-faults before it queues on WALWriteLock
 * (nvm_wal_prefault(), called by XLogFlush()): the range from its view of
 * the write pointer to what it will ask XLogWrite() to write, in the segment
 * it has mapped.  The copy under the lock then finds its pages done, and the
 * system call runs while another process holds the lock rather than adding
 * to every waiter's wait.  Under the lock, pre-faulting remains for the first
 * write of a process into a segment (the mapping is made there) and for the
 * WAL writer and the other writers that do not go through XLogFlush().
 * pgnvm_wal() counts the calls made under the lock and before it.
 *
 * Segment creation, recycling and removal are xlog.c's, unchanged: a new
 * segment is zero-filled (or, with wal_init_zero = off, has its last byte
 * written) and fsync'ed before it is renamed into place, exactly as with
 * nvm_wal = file; the pre-faulting then allocates any block still missing.
 *
 * Why a store into a mapping cannot raise SIGBUS.  A store through a
 * MAP_SHARED mapping faults with SIGBUS where write() would return an error:
 * beyond the end of the file, or in a hole the file system cannot fill.
 * (a) The mapping never extends past the end of the file: a WAL segment has
 * its full size from the moment it is renamed into place (XLogFileInit()),
 * and PostgreSQL never truncates one; it recycles (renames) or unlinks whole
 * segments, and only segments before the checkpoint's redo pointer, never
 * one being written (a descriptor on an unlinked or renamed file keeps the
 * file and its length).  (b) Every page this process stores to was
 * populated writable by MADV_POPULATE_WRITE just before the copy
 * (nvm_wal_write()); on a page the file system cannot provide (ENOSPC, I/O
 * error) that call fails with an error code instead of a signal, and that
 * copy and the rest of the segment are then written with pg_pwrite() as
 * with nvm_wal = file, whose error is PostgreSQL's own.
 * Only a file changed behind the server's back (truncated by hand,
 * copy-on-write file systems under space pressure) could still fault, and
 * so can a stock server's mmap of such a file.
 *
 * At server start (postmaster, single-user mode), NvmWalStartup() refuses
 * what cannot work: O_DIRECT WAL (debug_io_direct = wal) bypasses the page
 * cache the mappings share, and a pg_wal whose file system refuses a shared
 * writable mapping, or does not show through read() what was stored through
 * a mapping, is a FATAL naming the directory and the reason.  It logs the
 * store granularity pmem2 found there, which pgnvm_wal() (contrib/pgnvm)
 * reports along with the counters below.
 *
 * wal_sync_method does not matter with nvm_wal = pmem: the segment's data
 * are made durable by the persist, and the O_SYNC/O_DSYNC the descriptor may
 * carry only affects write(), which is not used.  fsync = off skips the
 * persists, as it skips issue_xlog_fsync().
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/access/transam/nvm_wal.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "access/nvm_wal.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "common/file_perm.h"
#include "common/file_utils.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/fd.h"
#include "storage/nvm_pmem.h"
#include "storage/shmem.h"
#include "utils/wait_event.h"

/* the descriptor of the mapped segment (see NvmWalIsMapped()), or -1 */
int			NvmWalMappedFd = -1;

/*
 * What the probe at server start found in pg_wal; set in the postmaster (or
 * the single-user backend) and inherited by every child.
 */
static NvmPmemGranularity nvm_wal_granularity = NVM_PMEM_GRAN_NONE;

/*
 * Also msync() after the cache flushes: the granularity is finer than page
 * but pg_wal's files cannot be mapped with MAP_SYNC and do not live on tmpfs
 * (see the file header).  Set with nvm_wal_granularity.
 */
static bool nvm_wal_also_msync = false;

/* the mapping of this process's open WAL segment */
typedef struct NvmWalMapping
{
	int			fd;				/* XLogWrite()'s descriptor, -1 if none */
	XLogSegNo	segno;
	TimeLineID	tli;
	NvmPmemMap	pm;				/* libpmem2's mapping of the whole segment */
	size_t		populated_from; /* [from, upto): the pages this process */
	size_t		populated_upto; /* pre-faulted writable (OS page bounds) */
	size_t		populate_ahead; /* how far past a copy the next extension
								 * pre-faults (see nvm_wal_populate()) */
} NvmWalMapping;

static NvmWalMapping nvm_wal_seg = {.fd = -1};

/* a segment that could not be mapped is written with write(); say so once */
static bool nvm_wal_failure_logged = false;

/*
 * counters, summed over all processes (updated by the WALWriteLock holder,
 * except the pre-faulting of nvm_wal_prefault(), which runs before it)
 */
typedef struct NvmWalShared
{
	pg_atomic_uint64 bytes_written;
	pg_atomic_uint64 copies;
	pg_atomic_uint64 persists;
	pg_atomic_uint64 mappings;
	pg_atomic_uint64 mapping_failures;
	pg_atomic_uint64 populate_usec;
	pg_atomic_uint64 populates_locked;
	pg_atomic_uint64 populates_unlocked;
	pg_atomic_uint64 populate_locked_usec;
} NvmWalShared;

static NvmWalShared *NvmWalCounters = NULL;

#define NVM_WAL_COUNT(field, n) \
	do { \
		if (NvmWalCounters != NULL) \
			pg_atomic_fetch_add_u64(&NvmWalCounters->field, (n)); \
	} while (0)

/* the probe file, created and removed in pg_wal at server start */
#define NVM_WAL_PROBE_FILE	"pgnvm_probe"

/*
 * nvm_wal_persist_method -- how a persist is done at granularity g, for the
 * start-up LOG line.
 */
static const char *
nvm_wal_persist_method(NvmPmemGranularity g, bool also_msync)
{
	if (!NvmPmemFlushes(g))
		return NvmPmemPersistMethod(g);
	return psprintf("%s, %s", NvmPmemPersistMethod(g),
					also_msync ?
					"then msync(): the files cannot be mapped with MAP_SYNC, so flushes alone would not make WAL durable" :
					"no system call");
}

/*
 * NvmWalStartup -- at server start (postmaster, single-user backend), refuse
 * settings that cannot work and find out what pg_wal's file system gives.
 *
 * With nvm_wal = pmem: debug_io_direct = wal is refused; a probe file in
 * pg_wal is created, zero-filled, mapped with libpmem2, written through the
 * mapping, persisted, read back with pread() and removed.  Any failure is a
 * FATAL that names the directory and the reason, so that a pg_wal that
 * cannot be mapped stops the server before it writes any WAL.  Success logs
 * the store granularity (one LOG line).
 */
void
NvmWalStartup(void)
{
	char		path[MAXPGPATH];
	char		walpath[MAXPGPATH];
	const char *forced;
	char		pattern[64];
	char		readback[sizeof(pattern)];
	NvmPmemMap	pm;
	int			fd;
	int			rc;

	if (nvm_wal != NVM_WAL_PMEM)
		return;

	if (io_direct_flags & IO_DIRECT_WAL)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"nvm_wal\" = pmem cannot be used with \"debug_io_direct\" = wal"),
				 errdetail("With nvm_wal = pmem, WAL is written through shared memory mappings of the segment files, which O_DIRECT cannot bypass."),
				 errhint("Remove \"wal\" from \"debug_io_direct\", or set \"nvm_wal\" to \"file\".")));

	/* the directory as the user knows it (pg_wal may be a symbolic link) */
	snprintf(walpath, sizeof(walpath), "%s/%s", DataDir, XLOGDIR);
	snprintf(path, sizeof(path), "%s/%s.%d", XLOGDIR, NVM_WAL_PROBE_FILE,
			 (int) getpid());

	(void) unlink(path);
	fd = BasicOpenFilePerm(path, O_RDWR | O_CREAT | O_EXCL | PG_BINARY,
						   pg_file_create_mode);
	if (fd < 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", path)));
	if (pg_pwrite_zeros(fd, XLOG_BLCKSZ, 0) < 0)
	{
		int			save_errno = errno;

		close(fd);
		(void) unlink(path);
		errno = save_errno;
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not write to file \"%s\": %m", path)));
	}

	rc = NvmPmemMapFile(fd, &pm);
	if (rc != 0)
	{
		char	   *reason = pstrdup(NvmPmemErrorMessage());

		close(fd);
		(void) unlink(path);
		ereport(FATAL,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"nvm_wal\" = pmem: WAL files in directory \"%s\" cannot be mapped with libpmem2: %s",
						walpath, reason),
				 errdetail("A probe file in that directory could not be mapped shared and writable (pmem2 error %d).",
						   rc),
				 errhint("Put pg_wal on a file system that supports shared writable memory mappings (a DAX file system on persistent memory, tmpfs, ext4, xfs), or set \"nvm_wal\" to \"file\".")));
	}

	/* a store through the mapping must be what read() sees */
	for (int i = 0; i < (int) sizeof(pattern); i++)
		pattern[i] = (char) (0xA5 ^ i);
	NvmPmemCopy(&pm, 0, pattern, sizeof(pattern));
	nvm_wal_granularity = pm.granularity;
	if (NvmPmemFlushes(nvm_wal_granularity))
		nvm_wal_also_msync = !NvmPmemMapSyncOk(fd, XLOG_BLCKSZ) &&
			!NvmPmemOnTmpfs(fd);
	if (NvmPmemPersist(&pm, pm.base, sizeof(pattern), nvm_wal_also_msync) != 0)
	{
		int			save_errno = errno;

		(void) NvmPmemRelease(&pm);
		close(fd);
		(void) unlink(path);
		errno = save_errno;
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not msync file \"%s\": %m", path)));
	}
	(void) NvmPmemRelease(&pm);

	if (pg_pread(fd, readback, sizeof(readback), 0) != sizeof(readback) ||
		memcmp(readback, pattern, sizeof(pattern)) != 0)
	{
		close(fd);
		(void) unlink(path);
		ereport(FATAL,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"nvm_wal\" = pmem: WAL files in directory \"%s\" cannot be mapped with libpmem2: bytes stored through a mapping are not what read() returns",
						walpath),
				 errhint("Put pg_wal on a file system whose shared mappings are coherent with read() and write(), or set \"nvm_wal\" to \"file\".")));
	}
	close(fd);
	if (unlink(path) != 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", path)));

	forced = NvmPmemForced();
	ereport(LOG,
			(errmsg("nvm_wal = pmem: WAL in \"%s\" is written through libpmem2 mappings, store granularity %s%s%s%s (persist: %s)",
					walpath, NvmPmemGranularityName(nvm_wal_granularity),
					forced ? " (forced by PMEM2_FORCE_GRANULARITY=" : "",
					forced ? forced : "",
					forced ? ")" : "",
					nvm_wal_persist_method(nvm_wal_granularity,
										   nvm_wal_also_msync))));
}

/*
 * NvmWalShmemSize, NvmWalShmemInit -- the counters, allocated in every mode
 * so that pgnvm_wal() always has something to read (from nvm_shmem.c).
 */
Size
NvmWalShmemSize(void)
{
	return sizeof(NvmWalShared);
}

void
NvmWalShmemInit(void)
{
	bool		found;

	NvmWalCounters = (NvmWalShared *)
		ShmemInitStruct("pgnvm WAL", sizeof(NvmWalShared), &found);
	if (!found)
	{
		pg_atomic_init_u64(&NvmWalCounters->bytes_written, 0);
		pg_atomic_init_u64(&NvmWalCounters->copies, 0);
		pg_atomic_init_u64(&NvmWalCounters->persists, 0);
		pg_atomic_init_u64(&NvmWalCounters->mappings, 0);
		pg_atomic_init_u64(&NvmWalCounters->mapping_failures, 0);
		pg_atomic_init_u64(&NvmWalCounters->populate_usec, 0);
		pg_atomic_init_u64(&NvmWalCounters->populates_locked, 0);
		pg_atomic_init_u64(&NvmWalCounters->populates_unlocked, 0);
		pg_atomic_init_u64(&NvmWalCounters->populate_locked_usec, 0);
	}
}

/*
 * NvmWalGetInfo -- the mode, the granularity found at start, the counters.
 */
void
NvmWalGetInfo(NvmWalInfo *info)
{
	memset(info, 0, sizeof(*info));
	info->mode = (NvmWalMode) nvm_wal;
	info->granularity = nvm_wal_granularity;
	info->forced = nvm_wal == NVM_WAL_PMEM ? NvmPmemForced() : NULL;
	if (NvmWalCounters == NULL)
		return;
	info->bytes_written = pg_atomic_read_u64(&NvmWalCounters->bytes_written);
	info->copies = pg_atomic_read_u64(&NvmWalCounters->copies);
	info->persists = pg_atomic_read_u64(&NvmWalCounters->persists);
	info->mappings = pg_atomic_read_u64(&NvmWalCounters->mappings);
	info->mapping_failures =
		pg_atomic_read_u64(&NvmWalCounters->mapping_failures);
	info->populate_usec = pg_atomic_read_u64(&NvmWalCounters->populate_usec);
	info->populates_locked =
		pg_atomic_read_u64(&NvmWalCounters->populates_locked);
	info->populates_unlocked =
		pg_atomic_read_u64(&NvmWalCounters->populates_unlocked);
	info->populate_locked_usec =
		pg_atomic_read_u64(&NvmWalCounters->populate_locked_usec);
}

/*
 * nvm_wal_open -- XLogWrite() opened segment segno (descriptor fd) for
 * writing: map the whole segment.  Its pages are pre-faulted as they are
 * written (nvm_wal_write()).
 *
 * A segment that cannot be mapped (address space, vm.max_map_count, a file
 * system that refuses) is written with pg_pwrite() and synced with
 * issue_xlog_fsync(), as with nvm_wal = file: the data are the same and the
 * sync covers stores other processes made through their mappings (see the
 * file header).  This process says so once.
 */
void
nvm_wal_open(int fd, XLogSegNo segno, TimeLineID tli)
{
	NvmPmemMap	pm;
	int			rc;

	Assert(nvm_wal == NVM_WAL_PMEM);
	Assert(fd >= 0);

	/* the previous descriptor was closed by XLogFileClose(), which unmaps */
	Assert(nvm_wal_seg.fd < 0);
	Assert(NvmWalMappedFd < 0);

	rc = NvmPmemMapFile(fd, &pm);
	if (rc != 0 || pm.size != (size_t) wal_segment_size)
	{
		const char *reason = rc != 0 ? NvmPmemErrorMessage() :
			"the file is not one segment long";

		if (!nvm_wal_failure_logged)
			ereport(LOG,
					(errmsg("nvm_wal = pmem: could not map WAL segment %X of timeline %u, writing it with write(): %s",
							(uint32) segno, tli, reason)));
		(void) NvmPmemRelease(&pm);
		nvm_wal_failure_logged = true;
		NVM_WAL_COUNT(mapping_failures, 1);
		return;
	}

	nvm_wal_seg.fd = fd;
	nvm_wal_seg.segno = segno;
	nvm_wal_seg.tli = tli;
	nvm_wal_seg.pm = pm;
	nvm_wal_seg.populated_from = 0;
	nvm_wal_seg.populated_upto = 0;
	nvm_wal_seg.populate_ahead = 0;
	NvmWalMappedFd = fd;

	NVM_WAL_COUNT(mappings, 1);
}

/* bounds of the window nvm_wal_populate() pre-faults ahead of a copy */
#define NVM_WAL_AHEAD_MIN	(16 * 1024)
#define NVM_WAL_AHEAD_MAX	(1024 * 1024)

/*
 * nvm_wal_populate -- pre-fault, writable, the OS pages of [offset, offset +
 * nbytes) of the mapped segment that this process has not pre-faulted yet.
 * Returns false, errno set, if the file system cannot provide one of them
 * (the caller then writes with pg_pwrite(), which reports the error as
 * PostgreSQL does).  locked: the caller holds WALWriteLock (nvm_wal_write());
 * false from nvm_wal_prefault(), before the lock.  Only counted separately.
 *
 * One interval of pre-faulted pages is kept per mapping: XLogWrite() writes
 * a segment front to back, rewriting at most the partial page it ended on,
 * so a copy of this process starts either inside its interval or at its
 * end (nobody else wrote since this process's last copy: it writes the
 * segment alone, e.g. with one committing client), or beyond it (other
 * processes wrote in between, as with many committing clients).
 *
 * The first kind extends the interval past the copy by a window that
 * doubles with each such extension (NVM_WAL_AHEAD_MIN up to _MAX), so a
 * process that writes the segment alone makes a few dozen calls per segment
 * rather than one per commit.  The second kind starts a new interval with
 * exactly the copy's pages and resets the window: when processes take turns,
 * each pre-faults only the pages it stores to, not the pages the others
 * will write (which is what pre-faulting ahead would cost each of them).
 */
static bool
nvm_wal_populate(size_t offset, size_t nbytes, bool locked)
{
	static size_t page_size = 0;
	NvmWalMapping *seg = &nvm_wal_seg;
	size_t		lo;
	size_t		hi;
	instr_time	start;
	instr_time	elapsed;

	if (page_size == 0)
		page_size = (size_t) sysconf(_SC_PAGESIZE);
	lo = TYPEALIGN_DOWN(page_size, offset);
	hi = TYPEALIGN(page_size, offset + nbytes);
	Assert(hi <= seg->pm.size);

	if (lo >= seg->populated_from && hi <= seg->populated_upto)
		return true;			/* the common case: nothing to do */
	if (lo >= seg->populated_from && lo <= seg->populated_upto)
	{
		/* extend the interval, and pre-fault ahead */
		seg->populate_ahead = Min(Max(seg->populate_ahead * 2,
									  NVM_WAL_AHEAD_MIN),
								  NVM_WAL_AHEAD_MAX);
		lo = seg->populated_upto;
		hi = Min(Max(hi, TYPEALIGN(page_size, lo + seg->populate_ahead)),
				 seg->pm.size);
	}
	else
	{
		/* start a new interval with this copy's pages */
		seg->populate_ahead = 0;
		seg->populated_from = lo;
	}

	INSTR_TIME_SET_CURRENT(start);
#ifdef MADV_POPULATE_WRITE
	if (madvise(seg->pm.base + lo, hi - lo, MADV_POPULATE_WRITE) != 0 &&
		errno != EINVAL)		/* EINVAL: kernel < 5.14, faults it is */
	{
		seg->populated_upto = seg->populated_from = 0;
		return false;
	}
#endif
	seg->populated_upto = hi;
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	NVM_WAL_COUNT(populate_usec, INSTR_TIME_GET_MICROSEC(elapsed));
	if (locked)
	{
		NVM_WAL_COUNT(populates_locked, 1);
		NVM_WAL_COUNT(populate_locked_usec, INSTR_TIME_GET_MICROSEC(elapsed));
	}
	else
		NVM_WAL_COUNT(populates_unlocked, 1);
	return true;
}

/*
 * nvm_wal_prefault -- XLogFlush() is about to queue on WALWriteLock to write
 * the WAL from `from` (its view of the shared write pointer) up to `upto`
 * (what it will ask XLogWrite() to write) on timeline tli: pre-fault, now,
 * the pages of that range this process has not pre-faulted yet in its
 * mapping, so that the copy under the lock finds them done (W10 in
 * docs/storage-engines.md).
 *
 * Page-table entries are per process: whoever holds the lock must have them
 * for the pages it stores to, and with many committers each flush starts on
 * the partial page another process wrote.  Made here, the ~1-2 us of each
 * flush's MADV_POPULATE_WRITE run while the lock's holder copies and
 * persists, instead of being added to the time every waiter waits.
 *
 * Only the segment this process has mapped already is pre-faulted (it maps
 * one when XLogWrite() first writes into it, under the lock: once per
 * segment and process); the range is clamped to it.  Nothing is stored and
 * nothing made durable here, so which WAL is durable when is untouched
 * (W3, W4): this only builds this process's page tables.  If the lock's
 * holder writes the range first (group commit), the pages were pre-faulted
 * for nothing; the next flush of this process may still find some of them.
 * A failure (a page the file system cannot provide) is left for the copy
 * to meet again and report (W6): here it only forgets the interval.
 *
 * Runs in XLogFlush()'s critical section: no palloc, no ereport.
 */
void
nvm_wal_prefault(XLogRecPtr from, XLogRecPtr upto, TimeLineID tli)
{
	XLogRecPtr	segstart;
	size_t		lo;
	size_t		hi;

	Assert(nvm_wal == NVM_WAL_PMEM);

	if (nvm_wal_seg.fd < 0 || nvm_wal_seg.tli != tli || upto <= from)
		return;
	XLogSegNoOffsetToRecPtr(nvm_wal_seg.segno, 0, wal_segment_size, segstart);
	if (from < segstart || from >= segstart + (XLogRecPtr) wal_segment_size)
		return;					/* not this process's segment (yet) */
	lo = (size_t) (from - segstart);
	hi = (size_t) Min(upto - segstart, (XLogRecPtr) wal_segment_size);

	(void) nvm_wal_populate(lo, hi - lo, false);
}

/*
 * nvm_wal_close -- XLogFileClose() closes the mapped segment: unmap it.
 *
 * Nothing is lost: stores already made stay in the file's pages (page
 * granularity) or reached the persistence domain or the CPU caches (cache
 * line), where a later persist through another mapping of the same file
 * finds them; the copies drained their non-temporal stores.
 */
void
nvm_wal_close(int fd)
{
	Assert(fd == nvm_wal_seg.fd);

	if (NvmPmemRelease(&nvm_wal_seg.pm) != 0)
		elog(PANIC, "could not unmap WAL segment: %s", NvmPmemErrorMessage());
	nvm_wal_seg.fd = -1;
	NvmWalMappedFd = -1;
}

/*
 * nvm_wal_write -- pg_pwrite() of XLogWrite() through the mapping: the
 * nbytes of WAL buffer pages at `from` belong at segment offset `offset`;
 * return nbytes.
 *
 * Only the bytes that are not in the file yet are copied: those from
 * prev_write (the shared write pointer when XLogWrite() began: everything
 * before it was written by some process, and WAL before the write pointer
 * never changes) up to request (WriteRqst.Write: everything before it is
 * inserted, WaitXLogInsertionsToFinish()).  XLogWrite() hands over whole
 * pages, so with write() the partial page a flush starts on is written again
 * from its first byte, and its last page to its end, whatever the buffer
 * holds beyond the request (rewritten by a later flush).  A copy of those
 * bytes too would cost a pre-faulted page and non-temporal stores of up to
 * 8 kB per flush that make nothing more durable: the persist covers
 * [flush pointer, write pointer) only (nvm_wal_persist()).  The tail of the
 * last page beyond the request keeps what the file held (zeros, or older WAL
 * of a recycled segment), as whole pages beyond the write pointer do with
 * write() too: recovery stops at the first record whose header, xl_prev or
 * CRC does not follow.
 *
 * The pages are pre-faulted first (nvm_wal_populate()).  If the file system
 * cannot provide one, the mapping is given up for the rest of the segment
 * and this copy is a pg_pwrite(), whose result XLogWrite() checks as with
 * nvm_wal = file; NvmWalIsMapped() is then false, so the segment's syncs are
 * issue_xlog_fsync(), which also covers what was copied through mappings
 * (see the file header).
 *
 * NvmPmemCopy(): non-temporal stores, no flush (the persist flushes the
 * whole range once), one drain for the whole copy, so that this CPU's
 * write-combining buffers are empty before WALWriteLock is released (see
 * the file header).  A store into a pre-faulted page cannot fail.
 */
ssize_t
nvm_wal_write(int fd, const char *from, size_t nbytes, off_t offset,
			  XLogRecPtr prev_write, XLogRecPtr request)
{
	XLogRecPtr	segstart;
	size_t		lo = (size_t) offset;
	size_t		hi = (size_t) offset + nbytes;

	Assert(fd == nvm_wal_seg.fd);
	Assert(offset >= 0 && offset + nbytes <= (size_t) wal_segment_size);

	/* the part of [offset, offset + nbytes) not in the file yet */
	XLogSegNoOffsetToRecPtr(nvm_wal_seg.segno, 0, wal_segment_size, segstart);
	if (prev_write > segstart + lo)
		lo = Min(hi, (size_t) (prev_write - segstart));
	if (request < segstart + hi)
		hi = Max(lo, (size_t) (request - segstart));
	Assert(request > segstart + (size_t) offset);
	if (lo == hi)
		return (ssize_t) nbytes;

	if (!nvm_wal_populate(lo, hi - lo, true))
	{
		int			save_errno = errno;

		if (!nvm_wal_failure_logged)
		{
			errno = save_errno;
			ereport(LOG,
					(errmsg("nvm_wal = pmem: could not pre-fault WAL segment %X of timeline %u, writing it with write(): %m",
							(uint32) nvm_wal_seg.segno, nvm_wal_seg.tli),
					 save_errno == EFAULT ?
					 errdetail("The file system could not provide a page of the segment (out of space, or an I/O error); a store into it would have raised SIGBUS.") : 0));
		}
		nvm_wal_failure_logged = true;
		NVM_WAL_COUNT(mapping_failures, 1);
		nvm_wal_close(fd);
		return pg_pwrite(fd, from, nbytes, offset);
	}

	NvmPmemCopy(&nvm_wal_seg.pm, lo, from + (lo - (size_t) offset), hi - lo);

	NVM_WAL_COUNT(copies, 1);
	NVM_WAL_COUNT(bytes_written, hi - lo);
	return (ssize_t) nbytes;
}

/*
 * nvm_wal_persist -- issue_xlog_fsync() of XLogWrite() for the mapped
 * segment: make the WAL between `flushed` (the flush pointer) and `written`
 * (the write pointer) durable, whoever copied it.
 *
 * Everything before the segment was persisted when the previous segment was
 * finished (XLogWrite() syncs a segment as soon as it is full), so the range
 * lies in this segment.  NvmPmemPersist() msync()s at page granularity (a
 * failure is PostgreSQL's PANIC with the file's name, as for a failed
 * fdatasync()); a finer granularity flushes the cache lines, followed by
 * the same msync() when the mapping has no MAP_SYNC outside tmpfs
 * (nvm_wal_also_msync, see the file header).
 * Timed and counted in pg_stat_io as the fsync it replaces.
 */
void
nvm_wal_persist(int fd, XLogRecPtr flushed, XLogRecPtr written)
{
	XLogRecPtr	segstart;
	size_t		from;
	size_t		upto;
	instr_time	start;

	Assert(fd == nvm_wal_seg.fd);

	/* as issue_xlog_fsync(): fsync = off syncs nothing */
	if (!enableFsync)
		return;

	XLogSegNoOffsetToRecPtr(nvm_wal_seg.segno, 0, wal_segment_size, segstart);
	Assert(written > segstart &&
		   written <= segstart + (XLogRecPtr) wal_segment_size);
	Assert(flushed >= segstart);
	from = flushed > segstart ? (size_t) (flushed - segstart) : 0;
	upto = (size_t) (written - segstart);
	if (upto <= from)
		return;

	start = pgstat_prepare_io_time(track_wal_io_timing);
	pgstat_report_wait_start(WAIT_EVENT_WAL_SYNC);

	if (NvmPmemPersist(&nvm_wal_seg.pm, nvm_wal_seg.pm.base + from,
					   upto - from, nvm_wal_also_msync) != 0)
	{
		char		xlogfname[MAXFNAMELEN];
		int			save_errno = errno;

		XLogFileName(xlogfname, nvm_wal_seg.tli, nvm_wal_seg.segno,
					 wal_segment_size);
		errno = save_errno;
		ereport(PANIC,
				(errcode_for_file_access(),
				 errmsg("could not msync file \"%s\": %m", xlogfname)));
	}

	pgstat_report_wait_end();
	pgstat_count_io_op_time(IOOBJECT_WAL, IOCONTEXT_NORMAL, IOOP_FSYNC,
							start, 1, 0);
	NVM_WAL_COUNT(persists, 1);
}
