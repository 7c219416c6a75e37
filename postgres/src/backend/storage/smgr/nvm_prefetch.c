/*-------------------------------------------------------------------------
 *
 * nvm_prefetch.c
 *	  pgnvm se2: bring redirected pages close to the core before the query
 *	  reads them.
 *
 * A redirected buffer (se2, see nvm_buf.c) points into the process's
 * read-only mapping of the relation file: nothing was copied, so nothing
 * was brought into the CPU caches either, and with 4 kB tmpfs pages the
 * page-table entries may not exist yet.  The query then stalls on page
 * faults and cache misses that a copy would have taken in one go (paper
 * 002, section 6.3).  This file hands the mapped ranges to somebody who
 * touches them before the query gets there:
 *
 *	nvm_prefetch = helper	helper threads of libnvmprefetch (prefetch/),
 *							placed by nvm_prefetch_mapping (m1: another
 *							physical core; m2: the SMT sibling; m3: both in
 *							tandem; or a list of CPUs).  They take the page
 *							faults with madvise(MADV_POPULATE_READ) and
 *							prefetch every cache line.
 *	nvm_prefetch = inline	the backend itself issues a prefetch instruction
 *							for every cache line of the blocks it has just
 *							redirected (the papers' ad-hoc scheme, with no
 *							thread; a page not faulted in yet cannot be
 *							prefetched, so it does not run further ahead).
 *
 * When.  A read stream starts reads ahead of use, so when nvm_smgr.c
 * redirects blocks of such a read (NvmPrefetchRedirected(), ahead = true),
 * the query will read them a little later; when reads follow each other
 * sequentially, the next nvm_prefetch_distance blocks are known too and are
 * handed out as well, so the helpers run that far ahead of the stream.  A
 * read made for immediate use (ReadBuffer(), e.g. an index scan's heap
 * fetch) is not prefetched: the backend reads it right away, a helper could
 * only compete with it; instead, an index scan announces the heap blocks of
 * its next TIDs before it fetches them (nvm_index_ahead.c,
 * NvmPrefetchAhead()).  Jobs the stream has overtaken are retired, so a
 * helper that fell behind does not waste time on them.
 *
 * Verification.  With data checksums on, a helper verifies a job's blocks
 * instead of only prefetching them (nvm_verify_job(): a copy of the job's
 * blocks, read through the mapping under the thread's fault guard, takes
 * the page faults and brings the bytes into the caches, then the checksum
 * and the header checks of PageIsVerified() run on the copy) and publishes
 * a verdict per block in the job's slot of this process's verdict table
 * (Verdicts[]); a backend
 * that reaches the last block of a job no helper has started yet cancels
 * it (the helper then skips it and catches up); the read's completion asks
 * for it through the storage manager (NvmPrefetchVerdict()) and verifies
 * the page itself when there is no finished, successful verdict for exactly
 * the bytes it reads, issued in the current verdict epoch (the same
 * top-level statement and transaction, and the same scan: see
 * EpochFirstSeq).  Why a verdict is never stale is argued in
 * docs/storage-engines.md (V1-V6) and at each step below.
 *
 * Safety.  Helper threads never store through a mapping, and load through
 * one only under their thread's fault guard (nvm_helper_copy(): SIGBUS and
 * SIGSEGV in the range copied make it stop short); otherwise they use
 * madvise(), which fails with an error code on a range that is not mapped
 * (any more) or lies beyond the end of the file, and prefetch instructions,
 * which never fault.  So a mapping may be unmapped at any moment (relation
 * closed, truncated, dropped) without waiting for the helpers, and a file
 * cut short cannot kill the process through a helper.  Helpers block every
 * signal but those two synchronous ones (so every signal sent to the
 * process is still delivered to the backend's own thread) and call into
 * PostgreSQL only for the verification above (the guarded copy, then pure
 * computation on it: no elog, no palloc, no shared memory); they are
 * created lazily, on the first redirected read that wants them, in the
 * process that reads (each parallel worker has its own), and joined when
 * the process exits or the settings change.  A backend never waits for
 * them: nvmpf_enqueue() drops a job when the queue is full.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/storage/smgr/nvm_prefetch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include <nvmprefetch.h>

#include "access/xact.h"
#include "port/atomics.h"
#include "storage/bufpage.h"
#include "storage/checksum.h"
#include "storage/ipc.h"
#include "storage/nvm_fault.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_stats.h"
#include "storage/proc.h"
#include "utils/memutils.h"

/* GUCs */
int			nvm_prefetch = NVM_PREFETCH_OFF;
char	   *nvm_prefetch_mapping = NULL;
int			nvm_prefetch_distance = 64;

const struct config_enum_entry nvm_prefetch_options[] = {
	{"off", NVM_PREFETCH_OFF, false},
	{"inline", NVM_PREFETCH_INLINE, false},
	{"helper", NVM_PREFETCH_HELPER, false},
	{NULL, 0, false}
};

/* nvm_prefetch_mapping, parsed by its check hook */
typedef struct NvmPrefetchMapping
{
	nvmpf_scheme scheme;
	int			ncpus;
	int			cpus[NVMPF_MAX_HELPERS];
} NvmPrefetchMapping;

static const NvmPrefetchMapping *CurrentMapping = NULL;
static uint64 MappingGeneration = 1;

/* a job covers at most this many blocks, so that retiring is fine-grained */
#define NVM_PREFETCH_JOB_BLOCKS		16
/* ... and, running ahead of a sequential scan, at least this many */
#define NVM_PREFETCH_MIN_JOB_BLOCKS	8

/* this process's helper pool */
static nvmpf_pool *HelperPool = NULL;
static uint64 PoolGeneration = 0;	/* MappingGeneration it was made for */
static uint64 FailedGeneration = 0; /* creation failed for this one */
static bool ExitHookRegistered = false;
static bool GuardFailureLogged = false;
static bool GuardLostLogged = false;
static char PoolMessage[320];

/* the access pattern: last redirected read and how far we handed out */
static char *LastMap = NULL;
static BlockNumber LastReadEnd = InvalidBlockNumber;
static BlockNumber PrefetchedEnd = 0;

/* jobs handed to the helpers and not yet retired, oldest first */
#define NVM_PENDING_JOBS	64
typedef struct NvmPendingJob
{
	uint64		seq;
	char	   *map;
	BlockNumber end;
} NvmPendingJob;
static NvmPendingJob Pending[NVM_PENDING_JOBS];
static int	PendingHead = 0;
static int	PendingCount = 0;

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
 * points into has been let go (NvmPrefetchForget()), so that a verdict
 * about whatever is mapped at that address later is never looked at.
 * Slot seq % NVM_VERDICT_SLOTS can hold no other job than seq while seq is
 * one of the last NVM_VERDICT_SLOTS numbers given out (a slot is claimed
 * only for job NextSeq), so the lookup goes by job number (see
 * EpochFirstSeq).
 */
#define NVM_VERDICT_SLOTS	256 /* more than the queue's 255 jobs */

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
	uint64		wgen;			/* nvm_smgr.c's write generation then */
	bool		live;			/* the backend's own, see above */
	/* written by the helper holding the slot RUNNING, published by DONE */
	NvmVerdictBlock blocks[NVM_PREFETCH_JOB_BLOCKS];
} NvmVerdict;

static NvmVerdict *Verdicts = NULL; /* this pool's, or NULL */
static uint64 NextSeq = 0;		/* number the pool gives the next job */

/*
 * Where the lookup finds a block's job: by the block's address in the
 * mapping (Fibonacci hashing of the block's address, so that the same block
 * numbers of mappings 1 GB apart do not share entries), the number (+ 1;
 * 0 = none) of the latest job claimed for it.
 * The backend's own (claims and lookups are the backend's); only a hint:
 * every test of NvmPrefetchVerdict() is made on the slot itself, so an
 * entry overwritten by another block's job (a collision) or left by a job
 * whose slot was reused costs a verification by the backend, never a wrong
 * verdict.  More entries than the blocks of the jobs a queue can hold
 * (255 x 16).
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
 *	 NvmPrefetchRedirected()).
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
 * check_nvm_prefetch_mapping -- GUC check hook: parse into *extra.
 *
 * "m1", "m2", "m3" or a list of CPU numbers and ranges ("3", "2,3",
 * "4-7,9"), as libnvmprefetch's nvmpf_parse_mapping() reads it (its error
 * text becomes the detail).  Whether the scheme can be honoured on this
 * machine (SMT siblings, CPUs allowed) is only known when a process creates
 * its helpers; the library then falls back and we log what it did (see
 * nvm_prefetch_pool()).
 */
bool
check_nvm_prefetch_mapping(char **newval, void **extra, GucSource source)
{
	NvmPrefetchMapping m;
	NvmPrefetchMapping *copy;
	char		err[256];

	memset(&m, 0, sizeof(m));
	if (nvmpf_parse_mapping(*newval, &m.scheme, m.cpus, lengthof(m.cpus),
							&m.ncpus, err, sizeof(err)) != NVMPF_OK)
	{
		GUC_check_errdetail("%s", err);
		return false;
	}
	copy = guc_malloc(LOG, sizeof(NvmPrefetchMapping));
	if (copy == NULL)
		return false;
	*copy = m;
	*extra = copy;
	return true;
}

/*
 * assign_nvm_prefetch_mapping -- GUC assign hook.  A pool made for another
 * mapping is replaced at the next redirected read (never here: an assign
 * hook must not fail, and it also runs in processes without a pool).
 */
void
assign_nvm_prefetch_mapping(const char *newval, void *extra)
{
	CurrentMapping = (const NvmPrefetchMapping *) extra;
	MappingGeneration++;
}

/* library log callback: keep the (single) message for nvm_prefetch_pool() */
static void
nvm_prefetch_log(void *arg, const char *msg)
{
	strlcpy(PoolMessage, msg, sizeof(PoolMessage));
}

/*
 * nvm_prefetch_stop -- join this process's helpers and forget the access
 * pattern.  Jobs still queued are abandoned.
 */
static void
nvm_prefetch_stop(void)
{
	if (HelperPool != NULL)
	{
		nvmpf_pool *pool = HelperPool;

		HelperPool = NULL;
		nvmpf_destroy(pool);
	}
	/* the helpers are joined: no verdict of theirs is written or read now */
	if (Verdicts != NULL)
	{
		pfree(Verdicts);
		Verdicts = NULL;
	}
	NextSeq = 0;
	memset(VerdictIndex, 0, sizeof(VerdictIndex));
	EpochFirstSeq = 0;
	PendingHead = PendingCount = 0;
	LastMap = NULL;
	LastReadEnd = InvalidBlockNumber;
	PrefetchedEnd = 0;
}

/* on_proc_exit callback: no helper thread outlives its backend's exit */
static void
nvm_prefetch_at_exit(int code, Datum arg)
{
	nvm_prefetch_stop();
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
 * nvm_verify_job -- libnvmprefetch's job hook (nvmpf_config.job_hook), in a
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
static int
nvm_verify_job(void *arg, const void *addr, size_t len, uint64 seq)
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
 * nvm_verdict_claim -- the backend is about to enqueue a job for nblocks
 * blocks at addr, the first being blkno: claim the job's verdict slot.
 * Returns false (the job is only prefetched, not verified) if wgen is 0
 * (checksums off, or a write through a mapping was in progress) or a helper
 * still works in the slot for an older job.
 */
static bool
nvm_verdict_claim(char *addr, BlockNumber blkno, int nblocks, uint64 wgen)
{
	uint64		seq = NextSeq;
	NvmVerdict *v = &Verdicts[seq % NVM_VERDICT_SLOTS];
	uint64		old;

	Assert(nblocks > 0 && nblocks <= NVM_PREFETCH_JOB_BLOCKS);
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
 * nvm_enqueue_one -- enqueue one job of nblocks blocks at addr (block
 * blkno), verified by the helper when wgen allows it (nvm_verdict_claim());
 * the job's number in *seq.  NVMPF_OK or NVMPF_EFULL.
 */
static int
nvm_enqueue_one(nvmpf_pool *pool, char *addr, BlockNumber blkno,
				BlockNumber nblocks, uint64 wgen, uint64 *seq)
{
	bool		claimed = nvm_verdict_claim(addr, blkno, (int) nblocks, wgen);
	int			rc;

	rc = nvmpf_enqueue_seq(pool, addr, (size_t) nblocks * BLCKSZ, seq);
	if (rc == NVMPF_OK)
	{
		Assert(*seq == NextSeq);
		NextSeq++;
	}
	else if (claimed)
	{
		/*
		 * Dropped: the slot names a job that will never run (the next job
		 * gets the same number); no helper holds it, so it can be freed.
		 */
		NvmVerdict *v = &Verdicts[NextSeq % NVM_VERDICT_SLOTS];

		v->live = false;
		pg_atomic_write_u64(&v->state, NVM_VERDICT_FREE);
	}
	return rc;
}

/*
 * NvmPrefetchVerdict -- the read's completion (through nvm_smgr.c) asks
 * whether a helper verified the page at addr, block blkno, in this
 * process's mapping.  NVM_VERIFY_OK only for a finished job (DONE) of the
 * current verdict epoch (this statement and transaction, this scan: see
 * EpochFirstSeq), of a mapping not let go since, enqueued in write
 * generation wgen (so no write through a mapping started since, nor was in
 * progress then), whose verdict for the block is OK and whose pd_lsn and
 * pd_checksum are those the page shows now.  NVM_VERIFY_FAILED if such a
 * job found the block invalid (for counting only: the caller verifies it,
 * as with NVM_VERIFY_NONE).  Runs in a critical section: no allocation, no
 * error.
 *
 * The block's job is found through VerdictIndex (one probe, no walk); a
 * job of the current epoch that no helper has started yet and whose last
 * block this is gets cancelled: the backend verifies the page itself, and a
 * helper behind it skips the job instead of doing work nobody will use.
 */
NvmVerifyResult
NvmPrefetchVerdict(const char *addr, BlockNumber blkno, uint64 wgen)
{
	uint64		lo;
	uint64		seq;
	uint64		state;
	NvmVerdict *v;
	const NvmVerdictBlock *b;
	const PageHeaderData *p;
	size_t		off;

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
 * NvmPrefetchForget -- the mapping at [addr, addr + len) is let go (to be
 * unmapped, now or when its last view goes): verdicts about it are never
 * looked at again, whatever is mapped there later.
 */
void
NvmPrefetchForget(const char *addr, size_t len)
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

/*
 * nvm_prefetch_pool -- this process's helper pool for the current mapping,
 * created on first use.  NULL if the helpers could not be started (said
 * once, as a WARNING; retried only after the settings change).
 */
static nvmpf_pool *
nvm_prefetch_pool(void)
{
	nvmpf_config cfg;
	nvmpf_info	info;
	int			rc;

	if (HelperPool != NULL && PoolGeneration == MappingGeneration)
		return HelperPool;
	if (HelperPool != NULL)
		nvm_prefetch_stop();	/* the mapping changed */
	if (FailedGeneration == MappingGeneration)
		return NULL;

	if (!ExitHookRegistered)
	{
		on_proc_exit(nvm_prefetch_at_exit, (Datum) 0);
		ExitHookRegistered = true;
	}

	nvmpf_config_init(&cfg);
	if (CurrentMapping != NULL)
	{
		cfg.scheme = CurrentMapping->scheme;
		if (CurrentMapping->ncpus > 0)
		{
			cfg.cpus = CurrentMapping->cpus;
			cfg.ncpus = CurrentMapping->ncpus;
		}
	}

	/*
	 * Fault with madvise() and prefetch: the library itself never loads
	 * through a mapping (the verifying hook does, under its fault guard).
	 */
	cfg.mode = NVMPF_MODE_POPULATE | NVMPF_MODE_PREFETCH;
	cfg.queue_len = 255;
	cfg.log = nvm_prefetch_log;
	cfg.log_arg = NULL;
	PoolMessage[0] = '\0';

	/*
	 * The helpers' verdicts (used only while data checksums are on).  Not
	 * where 64-bit atomics are simulated: those take spinlocks, whose
	 * stuck-lock report is an elog(PANIC), which a helper thread must never
	 * reach.  There the helpers only prefetch, and the backend verifies. Nor
	 * where the helpers' fault guard cannot be installed (said once).
	 */
	NextSeq = 0;
	memset(VerdictIndex, 0, sizeof(VerdictIndex));
	EpochFirstSeq = 0;			/* a new table: every slot is of a later job */
#ifndef PG_HAVE_ATOMIC_U64_SIMULATION
	if (nvm_fault_init_helpers())
	{
		Verdicts = MemoryContextAllocZero(TopMemoryContext,
										  sizeof(NvmVerdict) * NVM_VERDICT_SLOTS);
		for (int i = 0; i < NVM_VERDICT_SLOTS; i++)
			pg_atomic_init_u64(&Verdicts[i].state, NVM_VERDICT_FREE);
		cfg.job_hook = nvm_verify_job;
		cfg.job_arg = Verdicts;
	}
	else if (!GuardFailureLogged)
	{
		GuardFailureLogged = true;
		ereport(LOG,
				(errmsg("could not install the prefetch helpers' SIGSEGV handler: %m"),
				 errdetail("Helpers prefetch but verify nothing: the backend verifies every block itself.")));
	}
#endif

	rc = nvmpf_create(&cfg, &HelperPool);
	if (rc != NVMPF_OK)
	{
		HelperPool = NULL;
		if (Verdicts != NULL)
			pfree(Verdicts);
		Verdicts = NULL;
		FailedGeneration = MappingGeneration;
		ereport(WARNING,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start prefetch helper threads: %s",
						nvmpf_strerror(rc)),
				 errdetail("Redirected pages are not prefetched in this process until nvm_prefetch_mapping changes.")));
		return NULL;
	}
	PoolGeneration = MappingGeneration;

	/* the library falls back when the scheme cannot be honoured: say so */
	if (PoolMessage[0] != '\0' && nvmpf_get_info(HelperPool, &info) == NVMPF_OK)
		ereport(LOG,
				(errmsg("nvm_prefetch_mapping \"%s\" runs as %s: %s",
						nvm_prefetch_mapping,
						nvmpf_scheme_name(info.effective), PoolMessage)));
	return HelperPool;
}

/*
 * nvm_prefetch_retire -- declare stale the jobs the stream has overtaken:
 * those of another mapping, and those ending at or before upto.
 */
static void
nvm_prefetch_retire(char *map, BlockNumber upto)
{
	uint64		retire_below = 0;

	while (PendingCount > 0)
	{
		NvmPendingJob *job = &Pending[PendingHead];

		if (job->map == map && job->end > upto)
			break;
		retire_below = job->seq + 1;
		PendingHead = (PendingHead + 1) % NVM_PENDING_JOBS;
		PendingCount--;
	}
	if (retire_below > 0)
		(void) nvmpf_retire(HelperPool, retire_below);
}

/*
 * nvm_prefetch_enqueue -- hand [start, end) of map, the segment whose first
 * block is segbase, to the helpers, in jobs of at most
 * NVM_PREFETCH_JOB_BLOCKS blocks (verified too, in write generation wgen if
 * not 0).
 */
static void
nvm_prefetch_enqueue(nvmpf_pool *pool, char *map, BlockNumber segbase,
					 BlockNumber start, BlockNumber end, uint64 wgen)
{
	if (unlikely(!GuardLostLogged) && Verdicts != NULL &&
		nvm_fault_helpers_lost())
	{
		GuardLostLogged = true;
		ereport(LOG,
				(errmsg("prefetch helpers found their fault guard replaced by another SIGSEGV or SIGBUS handler, so they verify nothing"),
				 errdetail("The backend verifies every block itself.")));
	}
	while (start < end)
	{
		BlockNumber n = Min(end - start, NVM_PREFETCH_JOB_BLOCKS);
		NvmPendingJob *job;
		uint64		seq;
		int			rc;

		rc = nvm_enqueue_one(pool, map + (size_t) start * BLCKSZ,
							 segbase + start, n, wgen, &seq);
		if (rc == NVMPF_OK)
		{
			MyNvmStats->prefetch_jobs++;
			MyNvmStats->prefetch_bytes += (uint64) n * BLCKSZ;
			if (PendingCount == NVM_PENDING_JOBS)
			{
				/* forget the oldest: it is retired with the next ones */
				PendingHead = (PendingHead + 1) % NVM_PENDING_JOBS;
				PendingCount--;
			}
			job = &Pending[(PendingHead + PendingCount) % NVM_PENDING_JOBS];
			job->seq = seq;
			job->map = map;
			job->end = start + n;
			PendingCount++;
		}
		else
		{
			Assert(rc == NVMPF_EFULL);
			MyNvmStats->prefetch_dropped++;
		}
		start += n;
	}
}

/*
 * nvm_prefetch_inline -- the backend prefetches [start, end) of map itself:
 * one prefetch instruction per cache line.  Lines of pages not faulted in
 * yet are silently dropped by the CPU (a prefetch never faults).
 */
static void
nvm_prefetch_inline(char *map, BlockNumber start, BlockNumber end)
{
	const char *p = map + (size_t) start * BLCKSZ;
	const char *stop = map + (size_t) end * BLCKSZ;

	for (; p < stop; p += PG_CACHE_LINE_SIZE)
		__builtin_prefetch(p, 0, 3);
	MyNvmStats->prefetch_jobs++;
	MyNvmStats->prefetch_bytes += (uint64) (end - start) * BLCKSZ;
}

/*
 * NvmPrefetchRedirected -- blocks [segblock, segblock + nblocks) of the
 * segment mapped read-only at segmap, whose first block is segbase, were
 * just redirected (see the file header comment for what is prefetched
 * when).  The segment has at least seglimit blocks: nothing beyond is
 * handed out (a helper's madvise() there would fail: the file ends).  wgen:
 * nvm_smgr.c's write generation, or 0 if the helpers must not verify.
 */
void
NvmPrefetchRedirected(char *segmap, BlockNumber segbase, BlockNumber segblock,
					  BlockNumber nblocks, BlockNumber seglimit, bool ahead,
					  uint64 wgen)
{
	BlockNumber start;
	BlockNumber end;
	bool		sequential;
	nvmpf_pool *pool;

	if (nvm_prefetch != NVM_PREFETCH_HELPER && HelperPool != NULL)
		nvm_prefetch_stop();
	if (nvm_prefetch == NVM_PREFETCH_OFF || !ahead || nblocks == 0)
		return;
	if (nvm_prefetch == NVM_PREFETCH_INLINE)
	{
		/*
		 * Only the blocks just faulted in by nvm_smgr.c: a prefetch of a page
		 * not mapped yet would be dropped.
		 */
		nvm_prefetch_inline(segmap, segblock, segblock + nblocks);
		return;
	}
	pool = nvm_prefetch_pool();
	if (pool == NULL)
		return;

	/*
	 * A read that does not continue forward in the mapping the previous one
	 * read belongs to another scan (a new read stream, a rescan, another
	 * relation or segment): it uses no verdict of the jobs issued so far (see
	 * EpochFirstSeq).  Reads of one stream go forward.
	 */
	if (LastMap != NULL && (segmap != LastMap || segblock < LastReadEnd))
		EpochFirstSeq = NextSeq;
	nvm_prefetch_retire(segmap, segblock + nblocks);

	/* reads following each other: prefetch the distance beyond as well */
	sequential = (segmap == LastMap && segblock == LastReadEnd);
	end = segblock + nblocks;
	if (sequential)
		end = Min(end + (BlockNumber) nvm_prefetch_distance,
				  Max(seglimit, segblock + nblocks));

	/* moving forward inside what was handed out already: only the rest */
	if (segmap == LastMap && LastReadEnd != InvalidBlockNumber &&
		segblock >= LastReadEnd && segblock < PrefetchedEnd)
		start = PrefetchedEnd;
	else
	{
		start = segblock;
		PrefetchedEnd = segblock;
	}
	LastMap = segmap;
	LastReadEnd = segblock + nblocks;

	if (start >= end)
		return;

	/*
	 * Small reads (a read stream's look-ahead is limited by the pins a
	 * backend may hold) would make small jobs, each with its own madvise()
	 * call: ahead of a sequential scan, wait until a few blocks add up.
	 */
	if (sequential && end - start < NVM_PREFETCH_MIN_JOB_BLOCKS &&
		end < seglimit)
		return;
	nvm_prefetch_enqueue(pool, segmap, segbase, start, end, wgen);
	PrefetchedEnd = end;
}

/*
 * NvmPrefetchAhead -- an index scan will fetch the nblocks blocks at addr,
 * the first being blkno, soon (nvm_index_ahead.c, through nvm_smgr.c): a
 * helper faults them in, prefetches them and (wgen not 0) verifies them;
 * inline, the backend prefetches the first lines of each (its header and
 * line pointers), which helps only if the page is mapped already (a prefetch
 * of an unmapped page is dropped by the CPU).  Such jobs are not tracked for
 * retiring: nothing overtakes them but the fetch itself.
 */
void
NvmPrefetchAhead(char *addr, BlockNumber blkno, BlockNumber nblocks,
				 uint64 wgen)
{
	nvmpf_pool *pool;
	uint64		seq;

	if (nvm_prefetch != NVM_PREFETCH_HELPER && HelperPool != NULL)
		nvm_prefetch_stop();
	if (nvm_prefetch == NVM_PREFETCH_OFF || nblocks == 0)
		return;
	if (nvm_prefetch == NVM_PREFETCH_INLINE)
	{
		for (BlockNumber i = 0; i < nblocks; i++)
		{
			__builtin_prefetch(addr + (size_t) i * BLCKSZ, 0, 3);
			__builtin_prefetch(addr + (size_t) i * BLCKSZ + PG_CACHE_LINE_SIZE, 0, 3);
		}
		MyNvmStats->prefetch_jobs++;
		MyNvmStats->prefetch_bytes += (uint64) nblocks * BLCKSZ;
		return;
	}
	pool = nvm_prefetch_pool();
	if (pool == NULL)
		return;
	Assert(nblocks <= NVM_PREFETCH_JOB_BLOCKS);
	if (nvm_enqueue_one(pool, addr, blkno, nblocks, wgen, &seq) == NVMPF_OK)
	{
		MyNvmStats->prefetch_jobs++;
		MyNvmStats->prefetch_bytes += (uint64) nblocks * BLCKSZ;
	}
	else
		MyNvmStats->prefetch_dropped++;
}

/*
 * NvmPrefetchPool -- this process's helper pool, or NULL (for
 * contrib/pgnvm's pgnvm_prefetch()).
 */
struct nvmpf_pool *
NvmPrefetchPool(void)
{
	return HelperPool;
}
