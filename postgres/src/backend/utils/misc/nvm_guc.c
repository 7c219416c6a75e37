/*-------------------------------------------------------------------------
 *
 * nvm_guc.c
 *	  pgnvm's server settings: their variables and tables of values.
 *
 * The one place where a pgnvm setting is defined (see utils/nvm_guc.h for
 * the list and who reads each); guc_tables.c registers them (patch 0001)
 * with their defaults, contexts and descriptions, which must agree with the
 * initial values here, as for PostgreSQL's own settings.  Nothing here runs:
 * the hooks of a setting live with the code they serve.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/utils/misc/nvm_guc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/nvm_guc.h"

/* the storage engine, fixed at server start */
int			nvm_storage_engine = NVM_ENGINE_BASE;

const struct config_enum_entry nvm_storage_engine_options[] = {
	{"base", NVM_ENGINE_BASE, false},
	{"se1", NVM_ENGINE_SE1, false},
	{"se2", NVM_ENGINE_SE2, false},
	{NULL, 0, false}
};

/* how a block written back through a mapping is made durable */
int			nvm_data_persist = NVM_DATA_PERSIST_FSYNC;

const struct config_enum_entry nvm_data_persist_options[] = {
	{"fsync", NVM_DATA_PERSIST_FSYNC, false},
	{"pmem", NVM_DATA_PERSIST_PMEM, false},
	{NULL, 0, false}
};

/* at most this many segment mappings per process */
int			nvm_max_mappings = 256;

/* for tests: act as if every new mapping failed */
bool		nvm_debug_fail_mappings = false;

/*
 * for tests: a read's completion that finds its block in a helper's job not
 * finished yet waits for the helper's verdict (nvm_verify.c)
 */
bool		nvm_verify_wait_for_helper = false;

/* se2's buffer descriptors apart from its DRAM slots (0: one per slot) */
int			nvm_buffer_descriptors = 0;

/* se2's prefetching */
int			nvm_prefetch = NVM_PREFETCH_OFF;
char	   *nvm_prefetch_mapping = NULL;
int			nvm_prefetch_distance = 64;

const struct config_enum_entry nvm_prefetch_options[] = {
	{"off", NVM_PREFETCH_OFF, false},
	{"inline", NVM_PREFETCH_INLINE, false},
	{"helper", NVM_PREFETCH_HELPER, false},
	{NULL, 0, false}
};

/* how WAL is written */
int			nvm_wal = NVM_WAL_FILE;

const struct config_enum_entry nvm_wal_options[] = {
	{"file", NVM_WAL_FILE, false},
	{"pmem", NVM_WAL_PMEM, false},
	{NULL, 0, false}
};
