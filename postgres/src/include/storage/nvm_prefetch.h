/*-------------------------------------------------------------------------
 *
 * nvm_prefetch.h
 *	  pgnvm se2: bringing redirected pages close to the core before the
 *	  query reads them (helper threads of libnvmprefetch, or the backend
 *	  itself).
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_prefetch.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_PREFETCH_H
#define NVM_PREFETCH_H

#include "storage/block.h"
#include "utils/guc.h"

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

/* GUC hooks of nvm_prefetch_mapping */
extern bool check_nvm_prefetch_mapping(char **newval, void **extra,
									   GucSource source);
extern void assign_nvm_prefetch_mapping(const char *newval, void *extra);

/*
 * Called by nvm_smgr.c when blocks [segblock, segblock + nblocks) of the
 * segment mapped read-only at segmap are redirected; the segment has at
 * least seglimit blocks (nothing beyond is prefetched).  ahead: the read was
 * started ahead of use (by a read stream), so prefetching can still help.
 */
extern void NvmPrefetchRedirected(char *segmap, BlockNumber segblock,
								  BlockNumber nblocks, BlockNumber seglimit,
								  bool ahead);

/*
 * Called by nvm_index_ahead.c with blocks an index scan will fetch soon:
 * nblocks blocks at addr in a read-only mapping, not faulted in yet.
 */
extern void NvmPrefetchAhead(char *addr, BlockNumber nblocks);

/* this process's helper pool, for contrib/pgnvm (NULL if none) */
struct nvmpf_pool;
extern struct nvmpf_pool *NvmPrefetchPool(void);

#endif							/* NVM_PREFETCH_H */
