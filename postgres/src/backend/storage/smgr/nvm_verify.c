/*-------------------------------------------------------------------------
 *
 * nvm_verify.c
 *	  pgnvm se2: verification of redirected pages by the prefetch helpers --
 *	  the write generation, the verdict table and the verdict epoch.
 *
 * With data checksums on, a prefetch helper (nvm_prefetch.c) that faults in
 * the blocks of a job also verifies them: NvmVerifyJob(), the job hook of
 * libnvmprefetch, copies the job's blocks through the mapping under the
 * thread's fault guard (which takes the page faults and brings the bytes
 * into the caches), runs the checksum and the header checks of
 * PageIsVerified() on the copy, and publishes a verdict per block in the
 * job's slot of this process's verdict table (Verdicts[]).  The read's
 * completion in the buffer manager (nvm_buf.c) asks here whether such a
 * verdict covers exactly the bytes it reads (NvmVerdictLookup()) and
 * verifies the page itself when there is none: a missing, unfinished or
 * failed verdict is never trusted.  A verdict stands only if
 *
 * - its job is one of the current *verdict epoch* (the same top-level
 *	 statement and transaction, and the same scan: see EpochFirstSeq);
 * - its mapping was not let go since the job was enqueued (the storage
 *	 manager says so: NvmVerifyForget());
 * - no write into relation files through the storage manager started since
 *	 the job was enqueued: the *write generation* (NvmVerifyShared) is the
 *	 number of writes (nvm_writev(), nvm_truncate()) started so far by all
 *	 processes, taken only while none was in progress
 *	 (NvmVerifyWriteGeneration());
 * - the page shows the pd_lsn and pd_checksum of the bytes checked.
 *
 * Why a verdict is then never stale is argued in docs/storage-engines.md
 * (V1-V6) and at each step below; it is one file so that the argument can
 * be read in one place.  This file calls nothing above it: the buffer
 * manager, the storage manager and prefetching call it (see
 * storage/nvm_verify.h), and the only code of it that runs in helper
 * threads is NvmVerifyJob() (with nvm_page_ok()): the guarded copy, then
 * pure computation on it (no elog, no palloc, no shared memory).
 *
 * For tests, nvm_verify_wait_for_helper makes a read whose block is in an
 * unfinished job of the epoch wait for the helper's verdict (bounded, see
 * nvm_verdict_wait()) instead of verifying at once, so that a check can
 * rely on a helper's verdict being there; it changes who verifies, never
 * what is trusted.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/storage/smgr/nvm_verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <nvmprefetch.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/bufpage.h"
#include "storage/checksum.h"
#include "storage/ipc.h"
#include "storage/nvm_fault.h"
#include "storage/nvm_verify.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/nvm_guc.h"

/*
 * Writes into relation files through the storage manager (nvm_smgr.c), all
 * processes: a write increments writes_started before it changes a byte and
 * writes_done after its last byte (both full barriers).  See
 * NvmVerifyWriteGeneration().  Counted only where they are read: se2 with
 * data checksums on (both fixed at server start, so every process agrees).
 */
typedef struct NvmVerifyShared
{
	pg_atomic_uint64 writes_started;
	pg_atomic_uint64 writes_done;
} NvmVerifyShared;

static NvmVerifyShared *VerifyShared = NULL;

/* this process has counted a write in writes_started, not yet in writes_done */
static bool WriteInProgress = false;

/*
 * Verdicts of the helpers (data checksums on), one slot per job, slot
 * seq % NVM_VERDICT_SLOTS for job number seq of this process's pool.
 *
 * state is the only field both sides write: the job's number and its
 * phase, ((seq + 1) << 2) | phase.  The backend claims a slot for the job it
 * is about to enqueue (any phase but RUNNING -> seq QUEUED, compare-and-
 * swap), then fills addr .. wgen and enqueues the job (the queue's release
 * makes them visible to the helper that dequeues it).  That helper moves the
 * slot from seq QUEUED to seq RUNNING (compare-and-swap: it fails if the
 * slot has been claimed for a later job meanwhile, or the backend cancelled
 * the job -- seq QUEUED -> seq FREE, compare-and-swap, when it has read the
 * job's last block before any helper started it -- and then nothing is
 * written), writes blocks[], and publishes seq DONE with a release barrier.
 * The backend reads blocks[] only after reading seq DONE (then a read
 * barrier): nobody writes them again until the backend itself claims the
 * slot for another job.  live is the backend's own: false once the mapping the job
 * points into has been let go (NvmVerifyForget()), so that a verdict
 * about whatever is mapped at that address later is never looked at.
 * Slot seq % NVM_VERDICT_SLOTS can hold no other job than seq while seq is
 * one of the last NVM_VERDICT_SLOTS numbers given out (a slot is claimed
 * only for job NextSeq), so the lookup goes by job number (see
 * EpochFirstSeq).
 */
#define NVM_VERDICT_FREE	0	/* with the job's number: cancelled */
#define NVM_VERDICT_QUEUED	1
#define NVM_VERDICT_RUNNING	2
#define NVM_VERDICT_DONE	3
/* seq + 1: state 0 (an unused slot) names no job, not even job 0 */
#define NVM_VERDICT_STATE(seq, phase)	((((seq) + 1) << 2) | (phase))

typedef struct NvmVerdictBlock
{
	bool		checked;		/* the helper could read the block */
	bool		ok;				/* it passed the checksum and header checks */
	uint16		checksum;		/* pd_checksum of the bytes checked */
	uint64		lsn;			/* pd_lsn of the bytes checked */
} NvmVerdictBlock;

typedef struct NvmVerdict
{
	pg_atomic_uint64 state;
	/* set by the backend before the job is enqueued */
	char	   *addr;			/* first block, in this process's mapping */
	BlockNumber blkno;			/* its block number in the relation */
	int			nblocks;
	uint64		seq;
	uint64		wgen;			/* the write generation then */
	bool		live;			/* the backend's own, see above */
	/* written by the helper holding the slot RUNNING, published by DONE */
	NvmVerdictBlock blocks[NVM_VERIFY_JOB_BLOCKS];
} NvmVerdict;

static NvmVerdict *Verdicts = NULL; /* this pool's, or NULL */
static uint64 NextSeq = 0;		/* number the pool gives the next job */

/*
 * Where the lookup finds a block's job: by the block's address in the
 * mapping (Fibonacci hashing of the block's address, so that the same block
 * numbers of mappings 1 GB apart do not share entries), the number (+ 1;
 * 0 = none) of the latest job claimed for it.
 * The backend's own (claims and lookups are the backend's); only a hint:
 * every test of NvmVerdictLookup() is made on the slot itself, so an
 * entry overwritten by another block's job (a collision) or left by a job
 * whose slot was reused costs a verification by the backend, never a wrong
 * verdict.  More entries than the blocks of the jobs a queue can hold
 * (255 x NVM_VERIFY_JOB_BLOCKS).
 */
#define NVM_VERDICT_INDEX	4096
#define NVM_VERDICT_HASH(addr) \
	((uint32) (((uint64) (uintptr_t) (addr) / BLCKSZ * \
				UINT64CONST(0x9E3779B97F4A7C15)) >> 52))
static uint64 VerdictIndex[NVM_VERDICT_INDEX];

/*
 * The verdict epoch: a verdict is used only in the epoch its job was issued
 * in, i.e. only for jobs numbered [EpochFirstSeq, NextSeq).  A new epoch
 * starts (EpochFirstSeq = NextSeq, so no earlier job's slot is looked at
 * again):
 *
 * - when this process runs another top-level statement (client message:
 *	 GetCurrentStatementStartTimestamp(), set for each one by postgres.c) or
 *	 another transaction (MyProc's lxid) than the epoch was started in;
 *	 nvm_verdict_epoch() notices it at the next claim or lookup, before any
 *	 slot is read;
 * - when a read stream's read does not continue forward in the mapping the
 *	 previous one read (a new stream, a rescan, another relation or segment:
 *	 nvm_prefetch.c's NvmPrefetchRedirected() calls NvmVerdictNewEpoch()).
 *
 * So a helper's verdict is trusted only by the statement, and within it only
 * by the scan, that asked for it; bytes changed behind PostgreSQL's back
 * after a helper checked them are caught by every later statement, and by
 * every later scan, as in stock (docs/storage-engines.md, V6).  The check
 * costs the lookup two comparisons, and bounds its walk to the epoch's jobs.
 */
static uint64 EpochFirstSeq = 0;
static TimestampTz EpochStmtStart = 0;
static LocalTransactionId EpochLxid = InvalidLocalTransactionId;

/*
 * nvm_verify_wait_for_helper (for tests): the verdict epoch (its
 * EpochFirstSeq) in which a wait for a helper ran out (nvm_verdict_wait()):
 * no read of that epoch waits again, so that helpers that fall behind, or
 * never finish a job, cost a scan one bound in all, not one per block.  An
 * epoch that starts later starts at a larger number (the one that ran out
 * had issued the job waited for), and a new table starts over.
 */
static uint64 WaitExpiredEpoch = PG_UINT64_MAX;

/* a process that cannot install the helpers' SIGSEGV handler says so once */
static bool GuardFailureLogged = false;


/*
 * NvmVerifyShmemSize, NvmVerifyShmemInit -- the write counters in shared
 * memory (from nvm_shmem.c).
 */
Size
NvmVerifyShmemSize(void)
{
	return sizeof(NvmVerifyShared);
}

void
NvmVerifyShmemInit(void)
{
	bool		found;

	VerifyShared = ShmemInitStruct("pgnvm smgr writes",
								   sizeof(NvmVerifyShared), &found);
	if (!found)
	{
		pg_atomic_init_u64(&VerifyShared->writes_started, 0);
		pg_atomic_init_u64(&VerifyShared->writes_done, 0);
	}
}

/* are writes counted (see NvmVerifyShared)? */
static inline bool
nvm_counts_writes(void)
{
	return VerifyShared != NULL && nvm_storage_engine == NVM_ENGINE_SE2 &&
		DataChecksumsEnabled();
}

/*
 * NvmVerifyWriteBegins, NvmVerifyWriteEnds -- the storage manager's write
 * into a relation file begins / has ended (see NvmVerifyShared).  A write
 * that ends in an ERROR is ended by its caller's PG_FINALLY; one that ends
 * the process (FATAL, proc_exit) by nvm_write_at_exit(): a write left
 * counted as in progress would turn the helpers' verification off until the
 * next restart.
 */
void
NvmVerifyWriteBegins(void)
{
	if (!nvm_counts_writes())
		return;
	Assert(!WriteInProgress);
	WriteInProgress = true;
	pg_atomic_fetch_add_u64(&VerifyShared->writes_started, 1);
}

void
NvmVerifyWriteEnds(void)
{
	if (!WriteInProgress)
		return;
	pg_atomic_fetch_add_u64(&VerifyShared->writes_done, 1);
	WriteInProgress = false;
}

/* before_shmem_exit callback: a write this process began has ended */
static void
nvm_write_at_exit(int code, Datum arg)
{
	NvmVerifyWriteEnds();
}

/*
 * NvmVerifyInitProcess -- from the storage manager's smgr_init, in every
 * process: with se2, make sure a write the process began is counted as
 * ended if the process exits in it (see NvmVerifyWriteBegins()).
 */
void
NvmVerifyInitProcess(void)
{
	if (nvm_storage_engine == NVM_ENGINE_SE2)
		before_shmem_exit(nvm_write_at_exit, (Datum) 0);
}

/*
 * NvmVerifyWriteGeneration -- for a prefetch job about to be enqueued: the
 * write generation (writes started so far, plus one), or 0 if its blocks
 * must not be verified by a helper: data checksums are off, or a write is
 * in progress (its bytes might be half copied when the helper reads them).
 *
 * writes_done is read first: if writes_started, read after it, has the same
 * value, then at that moment every write started had ended (done <= started
 * at all times, and done can only have grown).  A write that starts later
 * makes writes_started larger than the generation, which the completion
 * sees (NvmVerdictLookup()).
 */
uint64
NvmVerifyWriteGeneration(void)
{
	uint64		done;
	uint64		started;

	if (!nvm_counts_writes())
		return 0;
	done = pg_atomic_read_u64(&VerifyShared->writes_done);
	pg_read_barrier();
	started = pg_atomic_read_u64(&VerifyShared->writes_started);
	return started == done ? started + 1 : 0;
}

/*
 * nvm_page_ok -- what PageIsVerified() accepts without a word, for a page
 * that is not new: the checksum matches and the header is sane.  Runs in
 * helper threads: pure computation on the caller's copy of the page (no
 * elog, no palloc, no shared memory).  All-zero (new) pages are left to the
 * backend, which has stock's rules for them.
 */
static bool
nvm_page_ok(const char *page, BlockNumber blkno)
{
	const PageHeaderData *p = (const PageHeaderData *) page;

	if (PageIsNew((Page) page))
		return false;
	if (pg_checksum_page_readonly(page, blkno) != p->pd_checksum)
		return false;
	return (p->pd_flags & ~PD_VALID_FLAG_BITS) == 0 &&
		p->pd_lower <= p->pd_upper &&
		p->pd_upper <= p->pd_special &&
		p->pd_special <= BLCKSZ &&
		p->pd_special == MAXALIGN(p->pd_special);
}

/*
 * NvmVerifyJob -- libnvmprefetch's job hook (nvmpf_config.job_hook), in a
 * helper thread, before the helper faults job seq's range in: if the job
 * is to be verified (its slot is still the job's, queued), read its blocks,
 * verify them and publish the verdicts in its slot (see NvmVerdict).
 * Returns NVMPF_HOOK_DONE if the range was read whole (the reads took the
 * page faults and brought the bytes into the caches: nothing more to do),
 * NVMPF_HOOK_SKIP if the backend cancelled the job (it has read the blocks
 * already), NVMPF_HOOK_PASS to let the helper fault and prefetch the range
 * (a job that is not verified, or a range that could not be read whole).
 *
 * Each block is copied through the mapping with nvm_helper_copy(), which
 * catches SIGBUS (file cut short) and SIGSEGV (range unmapped): the backend
 * may unmap the range at any moment (P2), and the copy then stops short
 * instead of killing the process.  Nothing is loaded through the mapping if
 * the fault guard's handlers are not ours any more
 * (nvm_helper_guard_intact()).  The checksum is computed on the copy, so a
 * write-back racing with the copy shows as a failed block, and the header
 * fields recorded are those of the very bytes checked.
 */
int
NvmVerifyJob(void *arg, const void *addr, size_t len, uint64 seq)
{
	NvmVerdict *v = &((NvmVerdict *) arg)[seq % NVM_VERDICT_SLOTS];
	uint64		expected = NVM_VERDICT_STATE(seq, NVM_VERDICT_QUEUED);
	PGAlignedBlock copy;
	bool		whole;

	/* the slot is the job's, and now ours (a full barrier) */
	if (!pg_atomic_compare_exchange_u64(&v->state, &expected,
										NVM_VERDICT_STATE(seq, NVM_VERDICT_RUNNING)))
	{
		/* cancelled by the backend: it is past the job's blocks */
		if (expected == NVM_VERDICT_STATE(seq, NVM_VERDICT_FREE))
			return NVMPF_HOOK_SKIP;
		/* not a job to verify, or its slot went to a later job */
		return NVMPF_HOOK_PASS;
	}

	whole = v->addr == (const char *) addr &&
		(size_t) v->nblocks * BLCKSZ == len &&
		nvm_helper_guard_intact();
	for (int i = 0; i < v->nblocks; i++)
	{
		NvmVerdictBlock *b = &v->blocks[i];

		b->checked = b->ok = false;
		/* only blocks copied whole (a copy stops short at a fault) */
		if (!whole || nvm_helper_copy(copy.data, v->addr + (size_t) i * BLCKSZ,
									  1) != 1)
		{
			whole = false;
			continue;
		}
		/* all-zero (new) pages are valid; the backend has stock's rules */
		if (PageIsNew((Page) copy.data))
			continue;
		b->checked = true;
		b->ok = nvm_page_ok(copy.data, v->blkno + i);
		b->lsn = PageXLogRecPtrGet(((const PageHeaderData *) copy.data)->pd_lsn);
		b->checksum = ((const PageHeaderData *) copy.data)->pd_checksum;
	}

	/* publish: the verdicts before the phase (pairs with the lookup) */
	pg_write_barrier();
	pg_atomic_write_u64(&v->state, NVM_VERDICT_STATE(seq, NVM_VERDICT_DONE));
	return whole ? NVMPF_HOOK_DONE : NVMPF_HOOK_PASS;
}

/*
 * nvm_verdict_epoch -- start a new verdict epoch (see EpochFirstSeq) if this
 * process runs another top-level statement or transaction than the current
 * epoch was started in.  Called before any slot is claimed or looked at;
 * two comparisons, no allocation, no error (it runs in a read's completion).
 */
static inline void
nvm_verdict_epoch(void)
{
	TimestampTz stmt = GetCurrentStatementStartTimestamp();
	LocalTransactionId lxid = MyProc != NULL ? MyProc->vxid.lxid :
		InvalidLocalTransactionId;

	if (unlikely(stmt != EpochStmtStart || lxid != EpochLxid))
	{
		EpochStmtStart = stmt;
		EpochLxid = lxid;
		EpochFirstSeq = NextSeq;
	}
}

/*
 * NvmVerdictClaim -- the backend is about to enqueue a job for nblocks
 * blocks at addr, the first being blkno: claim the job's verdict slot.
 * Returns false (the job is only prefetched, not verified) if wgen is 0
 * (checksums off, or a write through a mapping was in progress) or a helper
 * still works in the slot for an older job.
 */
bool
NvmVerdictClaim(char *addr, BlockNumber blkno, int nblocks, uint64 wgen)
{
	uint64		seq = NextSeq;
	NvmVerdict *v = &Verdicts[seq % NVM_VERDICT_SLOTS];
	uint64		old;

	Assert(nblocks > 0 && nblocks <= NVM_VERIFY_JOB_BLOCKS);
	if (wgen == 0 || Verdicts == NULL)
		return false;
	/* a job of this statement: verdicts of earlier ones are never used */
	nvm_verdict_epoch();
	Assert(seq >= EpochFirstSeq);
	old = pg_atomic_read_u64(&v->state);
	if ((old & 3) == NVM_VERDICT_RUNNING ||
		!pg_atomic_compare_exchange_u64(&v->state, &old,
										NVM_VERDICT_STATE(seq, NVM_VERDICT_QUEUED)))
		return false;
	/* no helper reads these before the job is enqueued */
	v->addr = addr;
	v->blkno = blkno;
	v->nblocks = nblocks;
	v->seq = seq;
	v->wgen = wgen;
	v->live = true;
	for (int i = 0; i < nblocks; i++)
		VerdictIndex[NVM_VERDICT_HASH(addr + (size_t) i * BLCKSZ)] = seq + 1;
	return true;
}

/*
 * NvmVerdictJobEnqueued -- the pool took the job NvmVerdictClaim() was
 * asked about (claimed or not), as number seq: the next job gets the next
 * number.
 */
void
NvmVerdictJobEnqueued(uint64 seq)
{
	Assert(seq == NextSeq);
	NextSeq++;
}

/*
 * NvmVerdictJobDropped -- the pool dropped the job whose slot
 * NvmVerdictClaim() claimed (the queue was full): the slot names a job that
 * will never run (the next job gets the same number); no helper holds it,
 * so it can be freed.
 */
void
NvmVerdictJobDropped(void)
{
	NvmVerdict *v = &Verdicts[NextSeq % NVM_VERDICT_SLOTS];

	Assert(Verdicts != NULL);
	v->live = false;
	pg_atomic_write_u64(&v->state, NVM_VERDICT_FREE);
}

/*
 * NvmVerdictNewEpoch -- a read does not continue forward in the mapping the
 * previous one read (another scan: nvm_prefetch.c decides): no verdict of
 * the jobs issued so far is used any more (see EpochFirstSeq).
 */
void
NvmVerdictNewEpoch(void)
{
	EpochFirstSeq = NextSeq;
}

/*
 * NvmVerdictsCreate -- a new helper pool is about to be made: a new table,
 * every slot free, the job numbers starting at 0 again.  Returns the table,
 * to hand to the helpers with NvmVerifyJob() (nvmpf_config.job_arg), or
 * NULL if the helpers of this process must not verify: where 64-bit atomics
 * are simulated (those take spinlocks, whose stuck-lock report is an
 * elog(PANIC), which a helper thread must never reach), or where the
 * helpers' fault guard cannot be installed (said once, as a LOG line).
 * Then the helpers only prefetch, and the backend verifies.
 */
void *
NvmVerdictsCreate(void)
{
	Assert(Verdicts == NULL);
	NextSeq = 0;
	memset(VerdictIndex, 0, sizeof(VerdictIndex));
	EpochFirstSeq = 0;			/* a new table: every slot is of a later job */
	WaitExpiredEpoch = PG_UINT64_MAX;
#ifndef PG_HAVE_ATOMIC_U64_SIMULATION
	if (nvm_fault_init_helpers())
	{
		Verdicts = MemoryContextAllocZero(TopMemoryContext,
										  sizeof(NvmVerdict) * NVM_VERDICT_SLOTS);
		for (int i = 0; i < NVM_VERDICT_SLOTS; i++)
			pg_atomic_init_u64(&Verdicts[i].state, NVM_VERDICT_FREE);
	}
	else if (!GuardFailureLogged)
	{
		GuardFailureLogged = true;
		ereport(LOG,
				(errmsg("could not install the prefetch helpers' SIGSEGV handler: %m"),
				 errdetail("Helpers prefetch but verify nothing: the backend verifies every block itself.")));
	}
#endif
	return Verdicts;
}

/*
 * NvmVerdictsDestroy -- the helper pool is gone (its helpers joined: no
 * verdict of theirs is written or read now), or was never made: free the
 * table and forget the job numbers.
 */
void
NvmVerdictsDestroy(void)
{
	if (Verdicts != NULL)
	{
		pfree(Verdicts);
		Verdicts = NULL;
	}
	NextSeq = 0;
	memset(VerdictIndex, 0, sizeof(VerdictIndex));
	EpochFirstSeq = 0;
	WaitExpiredEpoch = PG_UINT64_MAX;
}

/* NvmVerdictsActive -- do this process's helpers verify? */
bool
NvmVerdictsActive(void)
{
	return Verdicts != NULL;
}

/*
 * nvm_verdict_wait -- nvm_verify_wait_for_helper (for tests): job seq, of
 * the current epoch and the current write generation, still queued or
 * running in slot v (whose state was state): wait until a helper has
 * finished it, polling, for at most NVM_VERDICT_WAIT_US.  Returns the
 * slot's state then (DONE, or what it still is after the wait).
 *
 * The job is not retired (nvm_prefetch.c retires nothing while the setting
 * is on), so the pool's helpers get to it unless they lag behind by more
 * than the bound; the backend then verifies the page itself, as always, and
 * no read of this epoch waits again (WaitExpiredEpoch): a statement waits
 * at most one bound for helpers that do not keep up, not one per block.
 * Sleeps in a read's completion (a critical section, interrupts held off):
 * pg_usleep() and the clock only, no error, no allocation, no lock, no
 * interrupt processing, hence the bound.
 */
#define NVM_VERDICT_WAIT_US		1000000
#define NVM_VERDICT_POLL_US		50

static uint64
nvm_verdict_wait(NvmVerdict *v, uint64 seq, uint64 state)
{
	instr_time	start;
	instr_time	waited;

	INSTR_TIME_SET_CURRENT(start);
	while (state == NVM_VERDICT_STATE(seq, NVM_VERDICT_QUEUED) ||
		   state == NVM_VERDICT_STATE(seq, NVM_VERDICT_RUNNING))
	{
		INSTR_TIME_SET_CURRENT(waited);
		INSTR_TIME_SUBTRACT(waited, start);
		if (INSTR_TIME_GET_MICROSEC(waited) >= NVM_VERDICT_WAIT_US)
			break;
		pg_usleep(NVM_VERDICT_POLL_US);
		state = pg_atomic_read_u64(&v->state);
	}
	if (state == NVM_VERDICT_STATE(seq, NVM_VERDICT_QUEUED) ||
		state == NVM_VERDICT_STATE(seq, NVM_VERDICT_RUNNING))
		WaitExpiredEpoch = EpochFirstSeq;
	return state;
}

/*
 * NvmVerdictLookup -- for the buffer manager, in the completion of a read
 * left in place (a critical section): did a prefetch helper of this process
 * verify the page at addr (block blkno, in this process's read-only
 * mapping), and do the verdict's bytes stay those of the page?
 * NVM_VERIFY_OK only for a finished job (DONE) of the current verdict epoch
 * (this statement and transaction, this scan: see EpochFirstSeq), of a
 * mapping not let go since, enqueued in the write generation of now (so no
 * write through the storage manager started since, nor was in progress
 * then), whose verdict for the block is OK and whose pd_lsn and pd_checksum
 * are those the page shows now.  NVM_VERIFY_FAILED if such a
 * job found the block invalid (for counting only: the caller verifies it,
 * as with NVM_VERIFY_NONE).  Runs in a critical section: no allocation, no
 * error.
 *
 * The block's job is found through VerdictIndex (one probe, no walk); a
 * job of the current epoch that no helper has started yet and whose last
 * block this is gets cancelled: the backend verifies the page itself, and a
 * helper behind it skips the job instead of doing work nobody will use.
 * With nvm_verify_wait_for_helper (for tests) an unfinished job of the
 * epoch and of the current write generation that covers this very block is
 * waited for first (nvm_verdict_wait(); no more once a wait of the epoch
 * ran out).
 *
 * With data checksums off no helper verifies anything: no lookup at all.
 * A write of this very block by another process must have ended before our
 * read could start (the block had to leave its old buffer, under the
 * buffer manager's locks), so writes_started, read here, counts it.
 */
NvmVerifyResult
NvmVerdictLookup(const char *addr, BlockNumber blkno)
{
	uint64		wgen;
	uint64		lo;
	uint64		seq;
	uint64		state;
	NvmVerdict *v;
	const NvmVerdictBlock *b;
	const PageHeaderData *p;
	size_t		off;

	if (!nvm_counts_writes())
		return NVM_VERIFY_NONE;
	wgen = pg_atomic_read_u64(&VerifyShared->writes_started) + 1;
	if (Verdicts == NULL || wgen == 0)
		return NVM_VERIFY_NONE;

	/* another statement, transaction: no job issued so far counts */
	nvm_verdict_epoch();
	lo = NextSeq > NVM_VERDICT_SLOTS ? NextSeq - NVM_VERDICT_SLOTS : 0;
	lo = Max(lo, EpochFirstSeq);
	seq = VerdictIndex[NVM_VERDICT_HASH(addr)];
	if (seq == 0)
		return NVM_VERIFY_NONE;
	seq--;
	if (seq < lo || seq >= NextSeq)
		return NVM_VERIFY_NONE;

	/* a slot not claimed for this job holds another one's */
	v = &Verdicts[seq % NVM_VERDICT_SLOTS];
	if (v->seq != seq || !v->live || addr < v->addr ||
		addr >= v->addr + (size_t) v->nblocks * BLCKSZ)
		return NVM_VERIFY_NONE;
	off = (size_t) (addr - v->addr);
	if (off % BLCKSZ != 0)
		return NVM_VERIFY_NONE;
	state = pg_atomic_read_u64(&v->state);
	/*
	 * For tests: a verdict that could still be used is waited for (once a
	 * wait of this epoch ran out, no more).
	 */
	if (unlikely(nvm_verify_wait_for_helper) &&
		state != NVM_VERDICT_STATE(seq, NVM_VERDICT_DONE) &&
		v->blkno + off / BLCKSZ == blkno && v->wgen == wgen &&
		EpochFirstSeq != WaitExpiredEpoch)
		state = nvm_verdict_wait(v, seq, state);
	if (state != NVM_VERDICT_STATE(seq, NVM_VERDICT_DONE))
	{
		/*
		 * Behind us: cancel it if nothing of it is left to read (always safe:
		 * a cancelled job only loses its verdicts, whatever its write
		 * generation).
		 */
		if (state == NVM_VERDICT_STATE(seq, NVM_VERDICT_QUEUED) &&
			off / BLCKSZ == v->nblocks - 1)
			(void) pg_atomic_compare_exchange_u64(&v->state, &state,
												  NVM_VERDICT_STATE(seq, NVM_VERDICT_FREE));
		return NVM_VERIFY_NONE;
	}
	if (v->blkno + off / BLCKSZ != blkno || v->wgen != wgen)
		return NVM_VERIFY_NONE;
	pg_read_barrier();			/* pairs with the helper's publish */
	b = &v->blocks[off / BLCKSZ];
	if (!b->checked)
		return NVM_VERIFY_NONE;
	if (!b->ok)
		return NVM_VERIFY_FAILED;
	p = (const PageHeaderData *) addr;
	if (b->checksum != p->pd_checksum ||
		b->lsn != PageXLogRecPtrGet(p->pd_lsn))
		return NVM_VERIFY_NONE;
	return NVM_VERIFY_OK;
}

/*
 * NvmVerifyForget -- the storage manager lets go of the mapping at [addr,
 * addr + len) (to be unmapped, now or when its last view goes): verdicts
 * about it are never looked at again, whatever is mapped there later.
 */
void
NvmVerifyForget(const char *addr, size_t len)
{
	if (Verdicts == NULL)
		return;
	for (int i = 0; i < NVM_VERDICT_SLOTS; i++)
	{
		NvmVerdict *v = &Verdicts[i];

		if (v->live && v->addr >= addr && v->addr < addr + len)
			v->live = false;
	}
}
