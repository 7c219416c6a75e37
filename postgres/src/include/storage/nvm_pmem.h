/*-------------------------------------------------------------------------
 *
 * nvm_pmem.h
 *	  pgnvm: the one seam to libpmem2 (storage/file/nvm_pmem.c).
 *
 * WAL through mappings (access/transam/nvm_wal.c, nvm_wal = pmem) and
 * relation blocks persisted when written (storage/smgr/nvm_smgr.c,
 * nvm_data_persist = pmem) both need the same few things from libpmem2:
 * which store granularity a file gets, whether MAP_SYNC is granted, a
 * mapping and its persist, and the power-loss check told of every persist
 * that makes no system call.  This header is all they see of libpmem2:
 * only nvm_pmem.c includes <libpmem2.h>.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_pmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_PMEM_H
#define NVM_PMEM_H

/*
 * The store granularity libpmem2 reports for a mapping: what a persist must
 * do to make a store durable.  NONE (zero) is "no libpmem2 mapping": a
 * persist is then msync(), as at page granularity.
 */
typedef enum NvmPmemGranularity
{
	NVM_PMEM_GRAN_NONE = 0,		/* nothing mapped, or libpmem2 could not map */
	NVM_PMEM_GRAN_BYTE,			/* eADR: a fence */
	NVM_PMEM_GRAN_CACHE_LINE,	/* DAX + MAP_SYNC: cache-line flushes, fence */
	NVM_PMEM_GRAN_PAGE,			/* page cache: msync() */
} NvmPmemGranularity;

/* does a persist at granularity g flush (or fence) in user space? */
#define NvmPmemFlushes(g) \
	((g) == NVM_PMEM_GRAN_BYTE || (g) == NVM_PMEM_GRAN_CACHE_LINE)

struct pmem2_map;

/*
 * A mapping libpmem2 knows: one it made (NvmPmemMapFile()) or one of ours it
 * adopted (NvmPmemAdopt()).  Embedded by its owner; zeroed means none
 * (granularity NONE: NvmPmemPersist() then msync()s).
 */
typedef struct NvmPmemMap
{
	struct pmem2_map *map;		/* NULL: none */
	char	   *base;			/* first byte */
	size_t		size;
	NvmPmemGranularity granularity;
	/* libpmem2's functions for this mapping (pmem2_get_*_fn()) */
	void	   *(*memcpy_fn) (void *dst, const void *src, size_t len,
							  unsigned flags);
	void		(*persist_fn) (const void *addr, size_t len);
	void		(*drain_fn) (void);
} NvmPmemMap;

extern const char *NvmPmemGranularityName(NvmPmemGranularity g);
extern const char *NvmPmemPersistMethod(NvmPmemGranularity g);
extern const char *NvmPmemErrorMessage(void);
extern const char *NvmPmemForced(void);

extern NvmPmemGranularity NvmPmemProbe(int fd, size_t len);
extern bool NvmPmemMapSyncOk(int fd, size_t len);
extern bool NvmPmemOnTmpfs(int fd);

extern int	NvmPmemMapFile(int fd, NvmPmemMap *pm);
extern bool NvmPmemAdopt(int fd, void *addr, size_t len,
						 NvmPmemGranularity g, NvmPmemMap *pm);
extern int	NvmPmemRelease(NvmPmemMap *pm);

extern void NvmPmemCopy(NvmPmemMap *pm, size_t offset, const void *src,
						size_t len);
extern int	NvmPmemPersist(NvmPmemMap *pm, char *addr, size_t len,
						   bool also_msync);

#endif							/* NVM_PMEM_H */
