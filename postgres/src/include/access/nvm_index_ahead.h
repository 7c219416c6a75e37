/*-------------------------------------------------------------------------
 *
 * nvm_index_ahead.h
 *	  pgnvm se2: announce the heap blocks an index scan will fetch next, so
 *	  that prefetching (nvm_prefetch) can bring them close before the fetch.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/access/nvm_index_ahead.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_INDEX_AHEAD_H
#define NVM_INDEX_AHEAD_H

#include "access/relscan.h"

/* a scan's look-ahead state (IndexScanDesc->xs_nvm_ahead), see the .c file */
typedef struct NvmIndexAhead NvmIndexAhead;

extern void NvmIndexFetchAhead(IndexScanDesc scan);
extern void NvmIndexAheadReset(IndexScanDesc scan);

#endif							/* NVM_INDEX_AHEAD_H */
