/*-------------------------------------------------------------------------
 *
 * nvm_guc.h
 *	  pgnvm's server settings: their variables, values and hooks.
 *
 * Every setting pgnvm adds to PostgreSQL is defined in nvm_guc.c (its
 * variable and, for an enum, its table of values) and registered in
 * guc_tables.c by patch 0001, which includes only this header.  Code that
 * reads a setting includes this header; a setting's hooks are declared here
 * and defined with the code they serve, as utils/guc_hooks.h does for
 * PostgreSQL's own.
 *
 *	nvm_storage_engine		how relation blocks move (storage/nvm_smgr.h)
 *	nvm_data_persist		how blocks written through mappings are made
 *							durable (nvm_smgr.c)
 *	nvm_max_mappings		segment mappings per process (nvm_smgr.c)
 *	nvm_buffer_descriptors	se2's buffer descriptors apart from the DRAM
 *							slots, the hybrid pool (storage/nvm_slots.h)
 *	nvm_debug_fail_mappings	for tests: every new mapping fails (nvm_smgr.c)
 *	nvm_prefetch, nvm_prefetch_mapping, nvm_prefetch_distance
 *							se2's prefetching (nvm_prefetch.c)
 *	nvm_verify_wait_for_helper
 *							for tests: a read waits for the helper's
 *							verdict on its block (nvm_verify.c,
 *							nvm_prefetch.c)
 *	nvm_wal					how WAL is written (access/nvm_wal.h)
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/utils/nvm_guc.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_GUC_H
#define NVM_GUC_H

#include "utils/guc.h"

/* values of nvm_storage_engine */
typedef enum NvmStorageEngine
{
	NVM_ENGINE_BASE = 0,
	NVM_ENGINE_SE1,
	NVM_ENGINE_SE2,
} NvmStorageEngine;

extern PGDLLIMPORT int nvm_storage_engine;
extern PGDLLIMPORT const struct config_enum_entry nvm_storage_engine_options[];

/*
 * values of nvm_data_persist: how a block written back through a mapping
 * (se1, se2) is made durable -- by the next checkpoint's fsync of its file,
 * as in stock PostgreSQL, or at once, through libpmem2 (nvm_smgr.c)
 */
typedef enum NvmDataPersist
{
	NVM_DATA_PERSIST_FSYNC = 0,
	NVM_DATA_PERSIST_PMEM,
} NvmDataPersist;

extern PGDLLIMPORT int nvm_data_persist;
extern PGDLLIMPORT const struct config_enum_entry nvm_data_persist_options[];

/* at most this many segment mappings per process; for tests, fail them */
extern PGDLLIMPORT int nvm_max_mappings;
extern PGDLLIMPORT bool nvm_debug_fail_mappings;

/*
 * se2, the hybrid pool: the number of buffer descriptors (NBuffers), while
 * shared_buffers is the number of DRAM slots for pages; 0: as many
 * descriptors as slots, each owning its own (nvm_slots.c)
 */
extern PGDLLIMPORT int nvm_buffer_descriptors;

/* values of nvm_prefetch */
typedef enum NvmPrefetchMode
{
	NVM_PREFETCH_OFF = 0,
	NVM_PREFETCH_INLINE,		/* the backend issues prefetch instructions */
	NVM_PREFETCH_HELPER,		/* helper threads of libnvmprefetch */
} NvmPrefetchMode;

extern PGDLLIMPORT int nvm_prefetch;
extern PGDLLIMPORT char *nvm_prefetch_mapping;
extern PGDLLIMPORT int nvm_prefetch_distance;
extern PGDLLIMPORT const struct config_enum_entry nvm_prefetch_options[];

/*
 * for tests (checksum check): a read's completion that finds its block in a
 * job of this statement's that no helper has finished yet waits for the
 * helper's verdict (bounded) instead of verifying at once, and no job is
 * retired, so that the helper's verdict is always there (nvm_verify.c)
 */
extern PGDLLIMPORT bool nvm_verify_wait_for_helper;

/* hooks of nvm_prefetch_mapping (nvm_prefetch.c) */
extern bool check_nvm_prefetch_mapping(char **newval, void **extra,
									   GucSource source);
extern void assign_nvm_prefetch_mapping(const char *newval, void *extra);

/* values of nvm_wal: how XLogWrite() writes and syncs WAL segments */
typedef enum NvmWalMode
{
	NVM_WAL_FILE,				/* pg_pwrite() and fsync/fdatasync (stock) */
	NVM_WAL_PMEM,				/* libpmem2: copy into a mapping, persist */
} NvmWalMode;

extern PGDLLIMPORT int nvm_wal;
extern PGDLLIMPORT const struct config_enum_entry nvm_wal_options[];

#endif							/* NVM_GUC_H */
