/*-------------------------------------------------------------------------
 *
 * nvm_verify.h
 *	  pgnvm se2: verification of redirected pages by the prefetch helpers --
 *	  the write generation, the verdict table and the verdict epoch.
 *
 * Everything that decides whether a helper's verdict may stand for a page
 * lives in nvm_verify.c, below the storage manager and beside prefetching;
 * its callers, from the top (calls go down only):
 *
 *	nvm_buf.c		in a read's completion: is there a verdict for exactly
 *					these bytes (NvmVerdictLookup())?
 *	nvm_smgr.c		counts its writes into relation files (the write
 *					generation), takes the generation for the jobs it hands
 *					to prefetching, and forgets the verdicts of a mapping it
 *					lets go
 *	nvm_prefetch.c	makes and drops the table with its helper pool, claims
 *					a slot for each job it enqueues, starts a new epoch when a
 *					read does not continue forward, and gives the helpers the
 *					job hook (NvmVerifyJob())
 *
 * See docs/storage-engines.md, V1-V6.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_verify.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_VERIFY_H
#define NVM_VERIFY_H

#include "storage/block.h"

/* a verified job covers at most this many blocks (one verdict each) */
#define NVM_VERIFY_JOB_BLOCKS	16

/* verdict slots, one per job: more than a helper queue's jobs */
#define NVM_VERDICT_SLOTS		256

/* what a helper's verdict says about the bytes of one page */
typedef enum NvmVerifyResult
{
	NVM_VERIFY_NONE = 0,		/* no finished verdict for these bytes */
	NVM_VERIFY_OK,				/* a helper verified exactly these bytes */
	NVM_VERIFY_FAILED,			/* a helper found them invalid */
} NvmVerifyResult;

/* shared memory: the write counters behind the write generation */
extern Size NvmVerifyShmemSize(void);
extern void NvmVerifyShmemInit(void);

/* the storage manager (nvm_smgr.c) */
extern void NvmVerifyInitProcess(void);
extern void NvmVerifyWriteBegins(void);
extern void NvmVerifyWriteEnds(void);
extern uint64 NvmVerifyWriteGeneration(void);
extern void NvmVerifyForget(const char *addr, size_t len);

/* prefetching (nvm_prefetch.c) */
extern void *NvmVerdictsCreate(void);
extern void NvmVerdictsDestroy(void);
extern bool NvmVerdictsActive(void);
extern bool NvmVerdictClaim(char *addr, BlockNumber blkno, int nblocks,
							uint64 wgen);
extern void NvmVerdictJobEnqueued(uint64 seq);
extern void NvmVerdictJobDropped(void);
extern void NvmVerdictNewEpoch(void);
extern int	NvmVerifyJob(void *arg, const void *addr, size_t len, uint64 seq);

/* the buffer manager (nvm_buf.c), in a read's completion */
extern NvmVerifyResult NvmVerdictLookup(const char *page, BlockNumber blkno);

#endif							/* NVM_VERIFY_H */
