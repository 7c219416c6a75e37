/*-------------------------------------------------------------------------
 *
 * nvm_prefetch.h
 *	  pgnvm se2: bringing redirected pages close to the core before the
 *	  query reads them (helper threads of libnvmprefetch, or the backend
 *	  itself).
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_prefetch.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_PREFETCH_H
#define NVM_PREFETCH_H

#include "storage/block.h"
#include "utils/nvm_guc.h"		/* nvm_prefetch and its kin */

/*
 * Called by nvm_smgr.c when blocks [segblock, segblock + nblocks) of the
 * segment mapped read-only at segmap (its first block: segbase) are
 * redirected; the segment has at least seglimit blocks (nothing beyond is
 * prefetched).  ahead: the read was started ahead of use (by a read
 * stream), so prefetching can still help.  wgen: the write generation
 * (nvm_verify.c), 0 if the helpers must not verify what they prefetch.
 */
extern void NvmPrefetchRedirected(char *segmap, BlockNumber segbase,
								  BlockNumber segblock, BlockNumber nblocks,
								  BlockNumber seglimit, bool ahead,
								  uint64 wgen);

/*
 * Called (through nvm_smgr.c) with blocks an index scan will fetch soon:
 * nblocks blocks at addr in a read-only mapping, the first being blkno, not
 * faulted in yet; wgen as above.
 */
extern void NvmPrefetchAhead(char *addr, BlockNumber blkno,
							 BlockNumber nblocks, uint64 wgen);

/* this process's helper pool, for contrib/pgnvm (NULL if none) */
struct nvmpf_pool;
extern struct nvmpf_pool *NvmPrefetchPool(void);

#endif							/* NVM_PREFETCH_H */
