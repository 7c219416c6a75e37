/*-------------------------------------------------------------------------
 *
 * pgnvm.c
 *	  SQL access to the state of pgnvm's storage engines.
 *
 * pgnvm_stats() sums the per-process counters kept by nvm_smgr.c and
 * nvm_buf.c in shared memory; pgnvm_buffers() reports which shared buffers
 * are redirected (se2), to be joined with pg_buffercache on bufferid.
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
#include "storage/bufmgr.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_smgr.h"
#include "utils/builtins.h"

PG_MODULE_MAGIC_EXT(.name = "pgnvm",.version = PG_VERSION);

PG_FUNCTION_INFO_V1(pgnvm_stats);
PG_FUNCTION_INFO_V1(pgnvm_buffers);

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
	Datum		values[7];
	bool		nulls[7] = {0};
	uint64		sums[5] = {0};

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
	}

	values[0] = CStringGetTextDatum(nvm_storage_engine_options[nvm_storage_engine].name);
	for (int i = 0; i < 5; i++)
		values[i + 1] = Int64GetDatum((int64) sums[i]);
	/* a redirected miss is a block that was not copied */
	values[6] = Int64GetDatum((int64) (sums[2] * BLCKSZ));

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
