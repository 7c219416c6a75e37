/*-------------------------------------------------------------------------
 *
 * nvm_stats.c
 *	  pgnvm: per-process counters of the storage engines in shared memory.
 *
 * The counters are defined once, in storage/nvm_stats.h.  Every process
 * with a PGPROC counts into its own cache-line-sized slot of a shared array,
 * without locks or atomics: a slot has exactly one writer, and readers
 * (contrib/pgnvm) sum all slots, or read one process's, accepting that a
 * concurrent read may miss increments made a moment ago.  Slots are never
 * reset while the server runs, so the sums only grow; a slot is reused by the
 * next process with the same PGPROC and goes on from its predecessor's
 * counts, so one process's work is the difference of two readings taken
 * while it lives.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/storage/smgr/nvm_stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stddef.h>

#include "access/twophase.h"
#include "miscadmin.h"
#include "storage/nvm_stats.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#define NVM_STATS_INFO(name, description) \
	{#name, description, offsetof(NvmStatsSlot, name)},
const NvmStatsCounterInfo NvmStatsCounters[] = {
	NVM_STATS_COUNTERS(NVM_STATS_INFO)
};
#undef NVM_STATS_INFO

const int	NvmStatsNumCounters = lengthof(NvmStatsCounters);

/* the shared slots, one per PGPROC */
static NvmStatsSlotPadded *NvmStatsSlots = NULL;
static int	NvmStatsNumSlots = 0;

/* a process without a slot (e.g. the postmaster) counts here */
static NvmStatsSlot NvmStatsPrivate;
NvmStatsSlot *MyNvmStats = &NvmStatsPrivate;

static int
nvm_stats_num_slots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/*
 * NvmStatsShmemSize -- shared memory for the slots.
 */
Size
NvmStatsShmemSize(void)
{
	return mul_size(nvm_stats_num_slots(), sizeof(NvmStatsSlotPadded));
}

/*
 * NvmStatsShmemInit -- allocate the slots, or attach to them.
 */
void
NvmStatsShmemInit(void)
{
	bool		found;

	NvmStatsNumSlots = nvm_stats_num_slots();
	NvmStatsSlots = (NvmStatsSlotPadded *)
		ShmemInitStruct("pgnvm statistics", NvmStatsShmemSize(), &found);
	if (!found)
		memset(NvmStatsSlots, 0, NvmStatsShmemSize());
}

/*
 * NvmStatsAttach -- point MyNvmStats at this process's slot, once it has a
 * ProcNumber.
 */
void
NvmStatsAttach(void)
{
	if (NvmStatsSlots != NULL && MyProcNumber != INVALID_PROC_NUMBER &&
		MyProcNumber < NvmStatsNumSlots)
		MyNvmStats = &NvmStatsSlots[MyProcNumber].slot;
	else
		MyNvmStats = &NvmStatsPrivate;
}

/*
 * NvmStatsSum -- sums[i] = counter i (NvmStatsCounters[] order) summed over
 * all slots.
 */
void
NvmStatsSum(uint64 *sums)
{
	memset(sums, 0, sizeof(uint64) * NvmStatsNumCounters);
	for (int s = 0; s < NvmStatsNumSlots; s++)
	{
		const char *slot = (const char *) &NvmStatsSlots[s].slot;

		for (int i = 0; i < NvmStatsNumCounters; i++)
			sums[i] += *(const volatile uint64 *) (slot + NvmStatsCounters[i].offset);
	}
}

/*
 * NvmStatsOfProc -- values[i] = counter i (NvmStatsCounters[] order) of the
 * slot of process procno: what that process counted, on top of what earlier
 * holders of its PGPROC counted.  A test that must not see other processes'
 * work (autovacuum, another session's scans) takes the difference of two
 * readings of its own slot instead of NvmStatsSum().  Returns false, with
 * zeros, if procno has no slot (such a process counts privately).
 */
bool
NvmStatsOfProc(ProcNumber procno, uint64 *values)
{
	const char *slot;

	memset(values, 0, sizeof(uint64) * NvmStatsNumCounters);
	if (NvmStatsSlots == NULL || procno < 0 || procno >= NvmStatsNumSlots)
		return false;
	slot = (const char *) &NvmStatsSlots[procno].slot;
	for (int i = 0; i < NvmStatsNumCounters; i++)
		values[i] = *(const volatile uint64 *) (slot + NvmStatsCounters[i].offset);
	return true;
}
