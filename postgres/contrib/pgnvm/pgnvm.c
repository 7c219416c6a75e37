/*-------------------------------------------------------------------------
 *
 * pgnvm.c
 *	  SQL access to the state of pgnvm's storage engines.
 *
 * pgnvm_stats() and pgnvm_counters() sum the per-process counters of the
 * storage engines (storage/nvm_stats.h, nvm_stats.c), and
 * pgnvm_backend_counters() (1.5) reads one process's; pgnvm_buffers() reports
 * which shared buffers are redirected (se2), to be joined with
 * pg_buffercache on bufferid; pgnvm_prefetch() describes the calling
 * process's prefetch helper threads; pgnvm_wal() (1.2) how WAL is written
 * (nvm_wal, access/nvm_wal.h), with where the pmem write path pre-faults
 * since 1.9; pgnvm_pool() (1.6) the buffer pool's descriptors and DRAM slots
 * (se2's hybrid pool, storage/nvm_slots.h), with the background writer's
 * pass ahead of the slot clock since 1.8.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  contrib/pgnvm/pgnvm.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/nvm_wal.h"
#include "fmgr.h"
#include "funcapi.h"
#include <nvmprefetch.h>

#include "storage/bufmgr.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_slots.h"
#include "storage/nvm_smgr.h"
#include "storage/nvm_stats.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_MODULE_MAGIC_EXT(.name = "pgnvm",.version = PG_VERSION);

PG_FUNCTION_INFO_V1(pgnvm_stats);
PG_FUNCTION_INFO_V1(pgnvm_counters);
PG_FUNCTION_INFO_V1(pgnvm_backend_counters);
PG_FUNCTION_INFO_V1(pgnvm_buffers);
PG_FUNCTION_INFO_V1(pgnvm_prefetch);
PG_FUNCTION_INFO_V1(pgnvm_pool);

/*
 * pgnvm_stats -- the engine and the counters summed over all process slots,
 * as one row whose columns are the counters of storage/nvm_stats.h, in that
 * order (the SQL declaration must match: checked here, so that a mismatch
 * between the installed SQL and the server is an error, not wrong numbers).
 *
 * Each slot is written only by its process; a concurrent read may see a
 * count that is a moment old, which is fine for statistics.
 */
Datum
pgnvm_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum	   *values;
	bool	   *nulls;
	uint64	   *sums;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != NvmStatsNumCounters + 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgnvm_stats() is declared with %d columns, the server has %d counters",
						tupdesc->natts - 1, NvmStatsNumCounters),
				 errhint("Run ALTER EXTENSION pgnvm UPDATE.")));
	for (int i = 0; i < NvmStatsNumCounters; i++)
	{
		const char *col = NameStr(TupleDescAttr(tupdesc, i + 1)->attname);

		if (strcmp(col, NvmStatsCounters[i].name) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column %d of pgnvm_stats() is \"%s\", the server's counter is \"%s\"",
							i + 2, col, NvmStatsCounters[i].name),
					 errhint("Run ALTER EXTENSION pgnvm UPDATE.")));
	}

	values = palloc(sizeof(Datum) * tupdesc->natts);
	nulls = palloc0(sizeof(bool) * tupdesc->natts);
	sums = palloc(sizeof(uint64) * NvmStatsNumCounters);
	NvmStatsSum(sums);

	values[0] = CStringGetTextDatum(nvm_storage_engine_options[nvm_storage_engine].name);
	for (int i = 0; i < NvmStatsNumCounters; i++)
		values[i + 1] = Int64GetDatum((int64) sums[i]);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * put_counter_rows -- one row (counter, value, description) per counter of
 * storage/nvm_stats.h, values[] in that order.
 */
static void
put_counter_rows(ReturnSetInfo *rsinfo, const uint64 *values)
{
	for (int i = 0; i < NvmStatsNumCounters; i++)
	{
		Datum		row[3];
		bool		nulls[3] = {0};

		row[0] = CStringGetTextDatum(NvmStatsCounters[i].name);
		row[1] = Int64GetDatum((int64) values[i]);
		row[2] = CStringGetTextDatum(NvmStatsCounters[i].description);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
}

/*
 * pgnvm_counters -- the same counters as rows (counter, value,
 * description): what programs read, whatever counters this server has.
 */
Datum
pgnvm_counters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64	   *sums = palloc(sizeof(uint64) * NvmStatsNumCounters);

	InitMaterializedSRF(fcinfo, 0);
	NvmStatsSum(sums);
	put_counter_rows(rsinfo, sums);
	return (Datum) 0;
}

/*
 * pgnvm_backend_counters -- (1.5) the counters of the one server process
 * with this PID, as rows like pgnvm_counters(); no rows if no live process
 * with a PGPROC has it.  The process's slot goes on from what earlier holders
 * of its PGPROC counted, so its work is the difference of two readings taken
 * while it lives.  Unlike the sums, such a difference does not include
 * other processes' work (autovacuum, other sessions), which is what a test
 * of one session's behaviour needs.  A parallel query's workers count in
 * their own slots.
 */
Datum
pgnvm_backend_counters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			pid = PG_GETARG_INT32(0);
	uint64	   *values = palloc(sizeof(uint64) * NvmStatsNumCounters);
	PGPROC	   *proc;

	InitMaterializedSRF(fcinfo, 0);
	proc = BackendPidGetProc(pid);
	if (proc == NULL)
		proc = AuxiliaryPidGetProc(pid);
	if (proc != NULL && NvmStatsOfProc(GetNumberFromPGProc(proc), values))
		put_counter_rows(rsinfo, values);
	return (Datum) 0;
}

/*
 * pgnvm_buffers -- (bufferid, redirected) for every shared buffer.  Each
 * buffer's BM_NVM_REDIRECTED is read once, without its header spinlock
 * (NvmBufferIsRedirected()): a racy read, as pg_buffercache's view of a
 * buffer that changes meanwhile; not a snapshot of the pool.
 */
Datum
pgnvm_buffers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i < NBuffers; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {0};

		values[0] = Int32GetDatum(i + 1);
		/* the descriptor's bit, read without its spinlock, as before */
		values[1] = BoolGetDatum(NvmBufferIsRedirected(i + 1));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* an int4[] of the first n values */
static Datum
int_array(const int *v, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = Int32GetDatum(v[i]);
	return PointerGetDatum(construct_array_builtin(elems, n, INT4OID));
}

/*
 * pgnvm_prefetch -- the calling process's prefetch helpers (nvm_prefetch =
 * helper): the scheme asked for and the one running, the fallback message
 * if any, the helpers' thread ids and CPUs, and the pool's counters.  The
 * pool is created on the first redirected read that wants it, so before
 * that (or with another nvm_prefetch setting) only the settings are
 * reported and helpers is 0.
 */
Datum
pgnvm_prefetch(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[14];
	bool		nulls[14] = {0};
	struct nvmpf_pool *pool = NvmPrefetchPool();
	nvmpf_info	info;
	nvmpf_stats st;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	values[0] = CStringGetTextDatum(nvm_prefetch_options[nvm_prefetch].name);
	values[1] = CStringGetTextDatum(nvm_prefetch_mapping);
	values[2] = Int32GetDatum(nvm_prefetch_distance);
	if (pool == NULL ||
		nvmpf_get_info(pool, &info) != NVMPF_OK ||
		nvmpf_get_stats(pool, &st) != NVMPF_OK)
	{
		values[3] = Int32GetDatum(0);
		for (int i = 4; i < 14; i++)
			nulls[i] = true;
	}
	else
	{
		int			tids[NVMPF_MAX_HELPERS];

		values[3] = Int32GetDatum((int32) info.nhelpers);
		values[4] = CStringGetTextDatum(nvmpf_scheme_name(info.effective));
		if (info.message[0] != '\0')
			values[5] = CStringGetTextDatum(info.message);
		else
			nulls[5] = true;
		for (unsigned int i = 0; i < info.nhelpers; i++)
			tids[i] = (int) info.helper_tid[i];
		values[6] = int_array(tids, (int) info.nhelpers);
		values[7] = int_array(info.helper_cpu, (int) info.nhelpers);
		values[8] = Int64GetDatum((int64) st.enqueued);
		values[9] = Int64GetDatum((int64) st.dropped);
		values[10] = Int64GetDatum((int64) st.jobs_done);
		values[11] = Int64GetDatum((int64) st.jobs_skipped);
		values[12] = Int64GetDatum((int64) st.fault_errors);
		values[13] = Float8GetDatum((double) st.helper_cpu_ns / 1e6);
	}

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * pgnvm_wal -- how this server writes WAL (nvm_wal): the mode, the store
 * granularity libpmem2 found in pg_wal at server start (NULL with file),
 * PMEM2_FORCE_GRANULARITY if set, and the counters of the pmem write path
 * summed over all processes since start (access/nvm_wal.h).  Declared with
 * 9 columns up to 1.8 and 12 since 1.9 (where the pre-faulting is done);
 * either declaration gets its columns.
 */
PG_FUNCTION_INFO_V1(pgnvm_wal);

Datum
pgnvm_wal(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[12];
	bool		nulls[12] = {0};
	NvmWalInfo	info;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != 9 && tupdesc->natts != lengthof(values))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgnvm_wal() is declared with %d columns, the server has %d",
						tupdesc->natts, (int) lengthof(values)),
				 errhint("Run ALTER EXTENSION pgnvm UPDATE.")));

	NvmWalGetInfo(&info);
	values[0] = CStringGetTextDatum(nvm_wal_options[info.mode].name);
	if (info.granularity == NVM_PMEM_GRAN_NONE)
		nulls[1] = true;
	else
		values[1] = CStringGetTextDatum(NvmPmemGranularityName(info.granularity));
	if (info.forced == NULL)
		nulls[2] = true;
	else
		values[2] = CStringGetTextDatum(info.forced);
	values[3] = Int64GetDatum((int64) info.bytes_written);
	values[4] = Int64GetDatum((int64) info.copies);
	values[5] = Int64GetDatum((int64) info.persists);
	values[6] = Int64GetDatum((int64) info.mappings);
	values[7] = Int64GetDatum((int64) info.mapping_failures);
	values[8] = Float8GetDatum((double) info.populate_usec / 1000.0);
	values[9] = Int64GetDatum((int64) info.populates_locked);
	values[10] = Int64GetDatum((int64) info.populates_unlocked);
	values[11] = Float8GetDatum((double) info.populate_locked_usec / 1000.0);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * pgnvm_pool -- one row: the buffer pool's descriptors (in use, redirected,
 * copied), its DRAM slots (the budget, in use, the highest use, free) and
 * the slot clock's work, with two checks of se2's hybrid pool that must
 * read 0 at any time: redirected buffers that hold a slot (outside a
 * copy-on-write) and slot maps that disagree; since 1.8 also the background
 * writer's pass ahead of the slot clock (its write-backs and demotions).
 * Without the hybrid pool every descriptor owns its slot for good (slots =
 * descriptors, all in use).  Scans every descriptor (see NvmPoolScan()).
 * Declared with 15 columns (1.6, 1.7) or 17 (1.8): the first columns are the
 * same in both.
 */
Datum
pgnvm_pool(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[17];
	bool		nulls[17] = {0};
	NvmPoolReport r;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != 15 && tupdesc->natts != lengthof(values))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgnvm_pool() is declared with %d columns, the server has %d",
						tupdesc->natts, (int) lengthof(values)),
				 errhint("Run ALTER EXTENSION pgnvm UPDATE.")));

	NvmPoolScan(&r);
	values[0] = BoolGetDatum(r.hybrid);
	values[1] = Int64GetDatum(r.descriptors);
	values[2] = Int64GetDatum(r.descriptors_in_use);
	values[3] = Int64GetDatum(r.redirected);
	values[4] = Int64GetDatum(r.copied);
	values[5] = Int64GetDatum(r.slots);
	values[6] = Int64GetDatum(r.slots_in_use);
	values[7] = Int64GetDatum(r.slots_in_use_peak);
	values[8] = Int64GetDatum(r.slots_free);
	values[9] = Int64GetDatum(r.slots_held);
	values[10] = Int64GetDatum(r.redirected_with_slot);
	values[11] = Int64GetDatum(r.slot_map_mismatches);
	values[12] = Int64GetDatum(r.demotions);
	values[13] = Int64GetDatum(r.slot_evictions);
	values[14] = Int64GetDatum(r.slot_writes);
	values[15] = Int64GetDatum(r.cleaner_writes);
	values[16] = Int64GetDatum(r.cleaner_demotions);
	/* 1.6's declaration takes the first 15 */
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
