/*-------------------------------------------------------------------------
 *
 * pgnvm.c
 *	  SQL access to the state of pgnvm's storage engines.
 *
 * pgnvm_stats() sums the per-process counters kept by nvm_smgr.c,
 * nvm_buf.c and nvm_prefetch.c in shared memory; pgnvm_buffers() reports
 * which shared buffers are redirected (se2), to be joined with
 * pg_buffercache on bufferid; pgnvm_prefetch() describes the calling
 * process's prefetch helper threads.
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
#include "fmgr.h"
#include "funcapi.h"
#include <nvmprefetch.h>

#include "storage/bufmgr.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_prefetch.h"
#include "storage/nvm_smgr.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_MODULE_MAGIC_EXT(.name = "pgnvm",.version = PG_VERSION);

PG_FUNCTION_INFO_V1(pgnvm_stats);
PG_FUNCTION_INFO_V1(pgnvm_buffers);
PG_FUNCTION_INFO_V1(pgnvm_prefetch);

/*
 * pgnvm_stats -- the engine and the counters summed over all process slots.
 *
 * Each slot is written only by its process; a concurrent read may see a
 * count that is a moment old, which is fine for statistics.
 */
Datum
pgnvm_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[10];
	bool		nulls[10] = {0};
	uint64		sums[8] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	for (int i = 0; i < NvmStatsSlots; i++)
	{
		volatile NvmStatsSlot *slot = &NvmStats[i];

		sums[0] += slot->mapped_reads;
		sums[1] += slot->mapped_writes;
		sums[2] += slot->redirects;
		sums[3] += slot->cow_copies;
		sums[4] += slot->hints_skipped;
		sums[5] += slot->prefetch_jobs;
		sums[6] += slot->prefetch_bytes;
		sums[7] += slot->prefetch_dropped;
	}

	values[0] = CStringGetTextDatum(nvm_storage_engine_options[nvm_storage_engine].name);
	for (int i = 0; i < 5; i++)
		values[i + 1] = Int64GetDatum((int64) sums[i]);
	/* a redirected miss is a block that was not copied */
	values[6] = Int64GetDatum((int64) (sums[2] * BLCKSZ));
	for (int i = 5; i < 8; i++)
		values[i + 2] = Int64GetDatum((int64) sums[i]);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * pgnvm_buffers -- (bufferid, redirected) for every shared buffer.
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
		values[1] = BoolGetDatum((NvmBufferFlags[i] & NVM_BUF_REDIRECTED) != 0);
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
