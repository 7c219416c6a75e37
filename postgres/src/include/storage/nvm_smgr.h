/*-------------------------------------------------------------------------
 *
 * nvm_smgr.h
 *	  pgnvm: storage manager that reads and writes relation data through
 *	  memory mappings of the segment files (persistent memory, DAX, tmpfs).
 *
 * The storage engine is chosen at server start with nvm_storage_engine:
 *
 *	base	stock PostgreSQL: every relation uses md.c (read()/write(), AIO).
 *	se1		"MemMapped layer": the main fork of permanent relations is read
 *			and written with memcpy() through a per-process MAP_SHARED
 *			mapping of each 1 GB segment; everything else is md.c's.
 *	se2		"PtrRedirection layer": as se1, but a read-only buffer miss
 *			copies nothing; the buffer points into the mapping (nvm_buf.c).
 *
 * See docs/storage-engines.md in the pgnvm repository for the invariants.
 *
 * src/include/storage/nvm_smgr.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_SMGR_H
#define NVM_SMGR_H

#include "storage/aio_types.h"
#include "storage/block.h"
#include "storage/relfilelocator.h"
#include "storage/smgr.h"
#include "utils/nvm_guc.h"		/* nvm_storage_engine and its kin */

/*
 * The storage managers' entries in smgr.c's smgrsw[] table, which an
 * SMgrRelation's smgr_which indexes: md.c's (stock PostgreSQL's only one)
 * and nvm_smgr.c's.  smgr.c's table puts our entry at NVM_SMGR_WHICH, and
 * smgropen() picks it with nvm_smgr_handles().
 */
#define MD_SMGR_WHICH		0
#define NVM_SMGR_WHICH		1

/* Does smgropen() give this relation to nvm_smgr.c rather than md.c? */
static inline bool
nvm_smgr_handles(ProcNumber backend)
{
	/* temporary relations live in local buffers: always md.c */
	return nvm_storage_engine != NVM_ENGINE_BASE &&
		backend == INVALID_PROC_NUMBER;
}

/* this process's mappings of one segment of a main fork (nvm_smgr.c) */
struct NvmMapping;
typedef struct NvmSegMap
{
	struct NvmMapping *rw;		/* read-write: for copies (se1, write-back) */
	struct NvmMapping *ro;		/* read-only: for redirected buffers (se2) */
} NvmSegMap;

/*
 * For the buffer manager (nvm_buf.c), which calls us and never the reverse:
 * the read-only mapped address of a buffer's block in this process (NULL if
 * its segment cannot be mapped), and the views it holds into the mappings (a
 * mapping is never unmapped while a view of it is held: pointers into a
 * redirected page stay valid under the pin).  A view names its mapping by
 * a handle, NvmViewMap: an index into this process's table of read-only
 * mappings, so that releasing a view looks nothing up.  nvm_view_pin()
 * finds the mapping of a buffer's block from its tag through a small cache
 * of segments, whose entries are good only while their mapping was not let
 * go (docs/storage-engines.md, H4g).
 */
typedef int32 NvmViewMap;

#define NVM_NO_VIEW_MAP		(-1)

extern char *nvm_view_pin(RelFileLocator rlocator, ForkNumber forknum,
						  BlockNumber blocknum, NvmViewMap *map);
extern void nvm_view_release(NvmViewMap map);

/*
 * The read-only mapped addresses of blocks [blocknum, blocknum + nblocks)
 * of one segment of a main fork, faulted in; returns how many are readable
 * (-1: the segment cannot be mapped).
 */
extern int	nvm_map_blocks(SMgrRelation reln, ForkNumber forknum,
						   BlockNumber blocknum, BlockNumber nblocks,
						   char **pages);

/* index scans' look-ahead: blocknum will be fetched soon (advice) */
extern void nvm_prefetch_block(SMgrRelation reln, BlockNumber blocknum);

/* f_smgr callbacks; those not listed are md.c's own */
extern void nvm_init(void);
extern void nvm_open(SMgrRelation reln);
extern void nvm_close(SMgrRelation reln, ForkNumber forknum);
extern void nvm_readv(SMgrRelation reln, ForkNumber forknum,
					  BlockNumber blocknum, void **buffers, BlockNumber nblocks);
extern void nvm_startreadv(PgAioHandle *ioh,
						   SMgrRelation reln, ForkNumber forknum,
						   BlockNumber blocknum,
						   void **buffers, BlockNumber nblocks);
extern void nvm_writev(SMgrRelation reln, ForkNumber forknum,
					   BlockNumber blocknum,
					   const void **buffers, BlockNumber nblocks,
					   bool skipFsync);
extern void nvm_truncate(SMgrRelation reln, ForkNumber forknum,
						 BlockNumber curnblk, BlockNumber nblocks);

#endif							/* NVM_SMGR_H */
