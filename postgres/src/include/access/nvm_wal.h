/*-------------------------------------------------------------------------
 *
 * nvm_wal.h
 *	  pgnvm: WAL segments written through libpmem2 mappings (nvm_wal = pmem).
 *
 * With nvm_wal = file (the default) nothing here is used and XLogWrite()
 * runs stock PostgreSQL's code: pg_pwrite() and issue_xlog_fsync().  With
 * nvm_wal = pmem, the segment a process opens for writing in XLogWrite() is
 * mapped with libpmem2, the WAL pages are copied into the mapping, and where
 * stock PostgreSQL would fsync/fdatasync the segment the written range is
 * persisted through the mapping instead (see nvm_wal.c for who makes which
 * bytes durable when).  The files, their names, their contents and every
 * reader of them (recovery, walsender, archiving, pg_waldump,
 * pg_basebackup) are unchanged.
 *
 * The hooks xlog.c calls are the static inline functions below: each is a
 * test of a global and nothing else unless nvm_wal = pmem.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/access/nvm_wal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_WAL_H
#define NVM_WAL_H

#include "access/xlogdefs.h"
#include "storage/nvm_pmem.h"
#include "utils/nvm_guc.h"		/* nvm_wal, NvmWalMode */

/* the descriptor of the WAL segment this process has mapped, or -1 */
extern PGDLLIMPORT int NvmWalMappedFd;

/* what pgnvm_wal() reports */
typedef struct NvmWalInfo
{
	NvmWalMode	mode;
	NvmPmemGranularity granularity; /* probed in pg_wal at server start; NONE
									 * with nvm_wal = file */
	const char *forced;			/* PMEM2_FORCE_GRANULARITY, or NULL */
	uint64		bytes_written;	/* copied into mappings */
	uint64		copies;			/* pmem2 memcpy calls (XLogWrite() writes) */
	uint64		persists;		/* persist calls (where stock would sync) */
	uint64		mappings;		/* segments mapped */
	uint64		mapping_failures;	/* segments written with write() instead */
	uint64		populate_usec;	/* time spent pre-faulting mappings */
	uint64		populates_locked;	/* pre-fault calls under WALWriteLock */
	uint64		populates_unlocked; /* pre-fault calls before it
									 * (nvm_wal_prefault()) */
	uint64		populate_locked_usec;	/* the part of populate_usec under
										 * WALWriteLock */
} NvmWalInfo;

extern void NvmWalStartup(void);
extern Size NvmWalShmemSize(void);
extern void NvmWalShmemInit(void);
extern void NvmWalGetInfo(NvmWalInfo *info);

extern void nvm_wal_open(int fd, XLogSegNo segno, TimeLineID tli);
extern void nvm_wal_close(int fd);
extern ssize_t nvm_wal_write(int fd, const char *from, size_t nbytes,
							 off_t offset, XLogRecPtr prev_write,
							 XLogRecPtr request);
extern void nvm_wal_persist(int fd, XLogRecPtr flushed, XLogRecPtr written);
extern void nvm_wal_prefault(XLogRecPtr from, XLogRecPtr upto,
							 TimeLineID tli);

/*
 * NvmWalIsMapped -- is fd the WAL segment this process writes through a
 * mapping?  Always false with nvm_wal = file.
 */
static inline bool
NvmWalIsMapped(int fd)
{
	return fd >= 0 && fd == NvmWalMappedFd;
}

/*
 * NvmWalOpened -- XLogWrite() has opened segment segno for writing: with
 * nvm_wal = pmem, map it.
 */
static inline void
NvmWalOpened(int fd, XLogSegNo segno, TimeLineID tli)
{
	if (nvm_wal == NVM_WAL_PMEM)
		nvm_wal_open(fd, segno, tli);
}

/*
 * NvmWalBeforeFlush -- XLogFlush() is about to wait for WALWriteLock to write
 * [from, upto) on timeline tli: with nvm_wal = pmem and a segment mapped,
 * pre-fault the pages of the range this process will store to, outside the
 * lock (nvm_wal_prefault()).
 */
static inline void
NvmWalBeforeFlush(XLogRecPtr from, XLogRecPtr upto, TimeLineID tli)
{
	if (NvmWalMappedFd >= 0)
		nvm_wal_prefault(from, upto, tli);
}

/* NvmWalClosing -- XLogFileClose() is about to close fd: unmap it */
static inline void
NvmWalClosing(int fd)
{
	if (NvmWalIsMapped(fd))
		nvm_wal_close(fd);
}

#endif							/* NVM_WAL_H */
