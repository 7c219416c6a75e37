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
 * instead of only prefetching them and publishes a verdict per block, which
 * the read's completion may use instead of verifying the page again: the
 * verdict table, the write generation and the verdict epoch are
 * nvm_verify.c's.  This file makes and drops the table with the pool
 * (NvmVerdictsCreate(), NvmVerdictsDestroy()), claims a slot for each job
 * it enqueues (NvmVerdictClaim()), hands the helpers the job hook
 * (NvmVerifyJob()) and starts a new verdict epoch when a read does not
 * continue forward (NvmVerdictNewEpoch()).  With nvm_verify_wait_for_helper
 * (for tests) it retires no job: a read then waits for its job's verdict.
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

#include "storage/ipc.h"
#include "storage/nvm_fault.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_stats.h"
#include "storage/nvm_verify.h"
#include "utils/memutils.h"
#include "utils/nvm_guc.h"

/* nvm_prefetch_mapping, parsed by its check hook */
typedef struct NvmPrefetchMapping
{
	nvmpf_scheme scheme;
	int			ncpus;
	int			cpus[NVMPF_MAX_HELPERS];
} NvmPrefetchMapping;

static const NvmPrefetchMapping *CurrentMapping = NULL;
static uint64 MappingGeneration = 1;

/*
 * a job covers at most this many blocks, so that retiring is fine-grained
 * (and a verified job has a verdict per block: nvm_verify.h)
 */
#define NVM_PREFETCH_JOB_BLOCKS		16
StaticAssertDecl(NVM_PREFETCH_JOB_BLOCKS <= NVM_VERIFY_JOB_BLOCKS,
				 "a prefetch job has more blocks than a verdict");
/* ... and, running ahead of a sequential scan, at least this many */
#define NVM_PREFETCH_MIN_JOB_BLOCKS	8

/* jobs a helper queue holds: fewer than verdict slots (nvm_verify.h) */
#define NVM_PREFETCH_QUEUE_LEN		255
StaticAssertDecl(NVM_PREFETCH_QUEUE_LEN < NVM_VERDICT_SLOTS,
				 "a queue holds more jobs than there are verdict slots");

/* this process's helper pool */
static nvmpf_pool *HelperPool = NULL;
static uint64 PoolGeneration = 0;	/* MappingGeneration it was made for */
static uint64 FailedGeneration = 0; /* creation failed for this one */
static bool ExitHookRegistered = false;
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
	NvmVerdictsDestroy();
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
 * nvm_enqueue_one -- enqueue one job of nblocks blocks at addr (block
 * blkno), verified by the helper when wgen allows it (NvmVerdictClaim());
 * the job's number in *seq.  NVMPF_OK or NVMPF_EFULL.
 */
static int
nvm_enqueue_one(nvmpf_pool *pool, char *addr, BlockNumber blkno,
				BlockNumber nblocks, uint64 wgen, uint64 *seq)
{
	bool		claimed = NvmVerdictClaim(addr, blkno, (int) nblocks, wgen);
	int			rc;

	rc = nvmpf_enqueue_seq(pool, addr, (size_t) nblocks * BLCKSZ, seq);
	if (rc == NVMPF_OK)
		NvmVerdictJobEnqueued(*seq);
	else if (claimed)
		NvmVerdictJobDropped();
	return rc;
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
	cfg.queue_len = NVM_PREFETCH_QUEUE_LEN;
	cfg.log = nvm_prefetch_log;
	cfg.log_arg = NULL;
	PoolMessage[0] = '\0';

	/*
	 * The helpers' verdicts (used only while data checksums are on), in a new
	 * table, unless this process's helpers cannot verify (nvm_verify.c).
	 */
	cfg.job_arg = NvmVerdictsCreate();
	if (cfg.job_arg != NULL)
		cfg.job_hook = NvmVerifyJob;

	rc = nvmpf_create(&cfg, &HelperPool);
	if (rc != NVMPF_OK)
	{
		HelperPool = NULL;
		NvmVerdictsDestroy();
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
 * those of another mapping, and those ending at or before upto.  Not with
 * nvm_verify_wait_for_helper (for tests): a read then waits for its job's
 * verdict (nvm_verify.c), which a retired job would never give.
 */
static void
nvm_prefetch_retire(char *map, BlockNumber upto)
{
	uint64		retire_below = 0;

	if (unlikely(nvm_verify_wait_for_helper))
		return;
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
	if (unlikely(!GuardLostLogged) && NvmVerdictsActive() &&
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
 * the write generation (nvm_verify.c), or 0 if the helpers must not verify.
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
	 * relation or segment): it uses no verdict of the jobs issued so far (a
	 * new verdict epoch, nvm_verify.c).  Reads of one stream go forward.
	 */
	if (LastMap != NULL && (segmap != LastMap || segblock < LastReadEnd))
		NvmVerdictNewEpoch();
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
