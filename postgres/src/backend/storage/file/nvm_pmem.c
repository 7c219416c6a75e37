/*-------------------------------------------------------------------------
 *
 * nvm_pmem.c
 *	  pgnvm: the one seam to libpmem2 (PMDK).
 *
 * Two parts of pgnvm make stores through shared mappings durable without
 * write()/fsync(): WAL with nvm_wal = pmem (access/transam/nvm_wal.c) and
 * relation blocks written back with nvm_data_persist = pmem
 * (storage/smgr/nvm_smgr.c).  What they need from libpmem2 lives here, once:
 *
 *	- the store granularity a file gets (NvmPmemProbe(), a mapping's
 *	  granularity) and its one name for logs and pgnvm_wal();
 *	- whether a MAP_SYNC mapping is granted (NvmPmemMapSyncOk()): cache
 *	  flushes make a store durable only through one (a DAX file system keeps
 *	  the file's metadata durable at every write fault); PMEM2_FORCE_GRANULARITY
 *	  makes libpmem2 report cache-line granularity for any file, so callers
 *	  ask both;
 *	- mappings: one libpmem2 makes of a whole file (NvmPmemMapFile(), WAL
 *	  segments), or one of ours it adopts (NvmPmemAdopt(), relation
 *	  segments mapped by nvm_smgr.c), and their release;
 *	- the copy into a mapping (non-temporal stores, one drain) and the
 *	  persist of a range: libpmem2's flushes and fence where the granularity
 *	  is finer than a page, else (or additionally, when the caller says the
 *	  flushes are not durable there) msync(MS_SYNC), which we call ourselves
 *	  so that a failure is an error code the caller reports (libpmem2's own
 *	  msync path abort()s);
 *	- the power-loss check's hook (powerloss/include/powerloss.h): a persist
 *	  by cache flushes makes no system call the check's preload library could
 *	  see, so it is told of each one, after it completed, with the range.
 *
 * No other file includes <libpmem2.h>.  Nothing here keeps state beyond the
 * hook's address (per process) and the OS page size.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/storage/file/nvm_pmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <libpmem2.h>

#include "storage/nvm_pmem.h"

/*
 * The power-loss check's pgnvm_powerloss_persisted(), present only when the
 * check preloads libpowerloss.so: looked up once per process, at its first
 * persist by cache flushes; NULL in every ordinary run.
 */
static void (*nvm_pmem_powerloss_persisted) (const void *addr, size_t len);
static bool nvm_pmem_powerloss_looked_up = false;

static NvmPmemGranularity
nvm_pmem_from_pmem2(enum pmem2_granularity g)
{
	switch (g)
	{
		case PMEM2_GRANULARITY_BYTE:
			return NVM_PMEM_GRAN_BYTE;
		case PMEM2_GRANULARITY_CACHE_LINE:
			return NVM_PMEM_GRAN_CACHE_LINE;
		case PMEM2_GRANULARITY_PAGE:
			return NVM_PMEM_GRAN_PAGE;
	}
	return NVM_PMEM_GRAN_NONE;	/* not reached */
}

static enum pmem2_granularity
nvm_pmem_to_pmem2(NvmPmemGranularity g)
{
	Assert(g != NVM_PMEM_GRAN_NONE);
	if (g == NVM_PMEM_GRAN_BYTE)
		return PMEM2_GRANULARITY_BYTE;
	if (g == NVM_PMEM_GRAN_CACHE_LINE)
		return PMEM2_GRANULARITY_CACHE_LINE;
	return PMEM2_GRANULARITY_PAGE;
}

/*
 * NvmPmemGranularityName -- the granularity's one name, in every log line
 * and in pgnvm_wal().
 */
const char *
NvmPmemGranularityName(NvmPmemGranularity g)
{
	switch (g)
	{
		case NVM_PMEM_GRAN_BYTE:
			return "byte";
		case NVM_PMEM_GRAN_CACHE_LINE:
			return "cache-line";
		case NVM_PMEM_GRAN_PAGE:
			return "page";
		case NVM_PMEM_GRAN_NONE:
			break;
	}
	return "none";
}

/*
 * NvmPmemPersistMethod -- what a persist at granularity g does, for logs.
 */
const char *
NvmPmemPersistMethod(NvmPmemGranularity g)
{
	switch (g)
	{
		case NVM_PMEM_GRAN_BYTE:
			return "a fence";
		case NVM_PMEM_GRAN_CACHE_LINE:
			return "cache-line flushes and a fence";
		case NVM_PMEM_GRAN_PAGE:
		case NVM_PMEM_GRAN_NONE:
			break;
	}
	return "msync()";
}

/* NvmPmemErrorMessage -- why the last libpmem2 call of this thread failed */
const char *
NvmPmemErrorMessage(void)
{
	return pmem2_errormsg();
}

/*
 * NvmPmemForced -- PMEM2_FORCE_GRANULARITY, the environment variable with
 * which libpmem2 reports the granularity it names for every file (how the
 * cache-line path is emulated on tmpfs), or NULL.
 */
const char *
NvmPmemForced(void)
{
	return getenv("PMEM2_FORCE_GRANULARITY");
}

/*
 * nvm_pmem_new -- a libpmem2 mapping of the first len bytes of the file open
 * as fd (the whole file when len is 0), shared and writable, at whatever
 * granularity the file system gives (we ask which one it was).  Returns the
 * pmem2 error code; NvmPmemErrorMessage() says why.
 */
static int
nvm_pmem_new(int fd, size_t len, struct pmem2_map **map)
{
	struct pmem2_source *src;
	struct pmem2_config *cfg;
	int			rc;

	*map = NULL;
	rc = pmem2_source_from_fd(&src, fd);
	if (rc != 0)
		return rc;
	rc = pmem2_config_new(&cfg);
	if (rc != 0)
	{
		(void) pmem2_source_delete(&src);
		return rc;
	}
	rc = pmem2_config_set_required_store_granularity(cfg,
													 PMEM2_GRANULARITY_PAGE);
	if (rc == 0 && len > 0)
		rc = pmem2_config_set_length(cfg, len);
	if (rc == 0)
		rc = pmem2_map_new(map, cfg, src);
	(void) pmem2_config_delete(&cfg);
	(void) pmem2_source_delete(&src);
	return rc;
}

/*
 * NvmPmemProbe -- the store granularity libpmem2 finds for the file open as
 * fd (MAP_SYNC, eADR and PMEM2_FORCE_GRANULARITY are its business), from a
 * mapping of its first len bytes, which must exist; NONE if it cannot map
 * the file (NvmPmemErrorMessage() says why).
 */
NvmPmemGranularity
NvmPmemProbe(int fd, size_t len)
{
	struct pmem2_map *map;
	NvmPmemGranularity g;

	Assert(len > 0);
	if (nvm_pmem_new(fd, len, &map) != 0)
		return NVM_PMEM_GRAN_NONE;
	g = nvm_pmem_from_pmem2(pmem2_map_get_store_granularity(map));
	(void) pmem2_map_delete(&map);
	return g;
}

/*
 * NvmPmemMapSyncOk -- can the file open as fd be mapped with MAP_SYNC (a DAX
 * file system on persistent memory), so that cache flushes alone make
 * stores through the mapping durable?  Tried on its first len bytes.
 */
bool
NvmPmemMapSyncOk(int fd, size_t len)
{
#if defined(MAP_SYNC) && defined(MAP_SHARED_VALIDATE)
	void	   *addr = mmap(NULL, len, PROT_READ | PROT_WRITE,
							MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);

	if (addr == MAP_FAILED)
		return false;
	(void) munmap(addr, len);
	return true;
#else
	return false;
#endif
}

/*
 * NvmPmemOnTmpfs -- is the file open as fd on tmpfs, whose pages in memory
 * are all there is, so that msync() writes nothing back?
 */
bool
NvmPmemOnTmpfs(int fd)
{
	struct statfs st;

	return fstatfs(fd, &st) == 0 && st.f_type == TMPFS_MAGIC;
}

/*
 * nvm_pmem_fill -- pm describes libpmem2's mapping map.
 */
static void
nvm_pmem_fill(NvmPmemMap *pm, struct pmem2_map *map)
{
	pm->map = map;
	pm->base = pmem2_map_get_address(map);
	pm->size = pmem2_map_get_size(map);
	pm->granularity = nvm_pmem_from_pmem2(pmem2_map_get_store_granularity(map));
	pm->memcpy_fn = pmem2_get_memcpy_fn(map);
	pm->persist_fn = pmem2_get_persist_fn(map);
	pm->drain_fn = pmem2_get_drain_fn(map);
}

/*
 * NvmPmemMapFile -- map the whole file open as fd with libpmem2 (MAP_SHARED,
 * MAP_SYNC where the file system grants it) into pm.  Returns the pmem2
 * error code (0 on success); NvmPmemErrorMessage() says why.
 */
int
NvmPmemMapFile(int fd, NvmPmemMap *pm)
{
	struct pmem2_map *map;
	int			rc;

	memset(pm, 0, sizeof(*pm));
	rc = nvm_pmem_new(fd, 0, &map);
	if (rc == 0)
		nvm_pmem_fill(pm, map);
	return rc;
}

/*
 * NvmPmemAdopt -- make libpmem2 persist at granularity g (cache-line or
 * byte: what NvmPmemProbe() said) through len bytes at addr, a shared
 * writable mapping of ours of the file open as fd.  libpmem2 never unmaps
 * what it did not map: NvmPmemRelease() only makes it forget the range.
 * False if libpmem2 refuses (pm is then zeroed: persists msync()).
 */
bool
NvmPmemAdopt(int fd, void *addr, size_t len, NvmPmemGranularity g,
			 NvmPmemMap *pm)
{
	struct pmem2_source *src;
	struct pmem2_map *map;
	bool		ok = false;

	Assert(NvmPmemFlushes(g));
	memset(pm, 0, sizeof(*pm));
	if (pmem2_source_from_fd(&src, fd) != 0)
		return false;
	if (pmem2_map_from_existing(&map, src, addr, len,
								nvm_pmem_to_pmem2(g)) == 0)
	{
		nvm_pmem_fill(pm, map);
		ok = true;
	}
	(void) pmem2_source_delete(&src);
	return ok;
}

/*
 * NvmPmemRelease -- let go of pm's mapping (unmapped if libpmem2 made it,
 * forgotten if adopted); pm is zeroed.  Returns the pmem2 error code.
 * Never throws: runs during error cleanup and in critical sections.
 */
int
NvmPmemRelease(NvmPmemMap *pm)
{
	int			rc = 0;

	if (pm->map != NULL)
		rc = pmem2_map_delete(&pm->map);
	memset(pm, 0, sizeof(*pm));
	return rc;
}

/*
 * NvmPmemCopy -- copy len bytes from src to offset in pm's mapping:
 * non-temporal stores, no flush (the persist flushes the whole range once;
 * at page granularity a flush would be an msync() per copy), one drain at
 * the end, so that this CPU's write-combining buffers are empty when it
 * returns (no other CPU's fence drains them).  Cannot fail.
 */
void
NvmPmemCopy(NvmPmemMap *pm, size_t offset, const void *src, size_t len)
{
	Assert(pm->map != NULL && offset + len <= pm->size);
	pm->memcpy_fn(pm->base + offset, src, len,
				  PMEM2_F_MEM_NONTEMPORAL | PMEM2_F_MEM_NOFLUSH |
				  PMEM2_F_MEM_NODRAIN);
	pm->drain_fn();
}

/*
 * NvmPmemPersist -- make len bytes at addr, inside pm's mapping (or, when pm
 * has no libpmem2 mapping, inside any shared mapping of ours) durable.
 *
 * At cache-line or byte granularity: libpmem2's flushes and fence, then the
 * power-loss check is told; then also msync() when also_msync (the caller
 * found the flushes not durable there: forced granularity without MAP_SYNC).
 * At page granularity or without a libpmem2 mapping: msync(MS_SYNC) of the
 * pages holding the range (msync() wants a page-aligned start; OS pages may
 * be larger than the caller's blocks).  Returns 0, or -1 with errno set by
 * msync(): the caller reports it (PANIC for WAL, data_sync_elevel() for
 * relation blocks), as for the fsync it stands for.
 */
int
NvmPmemPersist(NvmPmemMap *pm, char *addr, size_t len, bool also_msync)
{
	static size_t page_size = 0;
	char	   *start;

	if (pm->map != NULL && NvmPmemFlushes(pm->granularity))
	{
		Assert(addr >= pm->base && addr + len <= pm->base + pm->size);
		pm->persist_fn(addr, len);
		if (!nvm_pmem_powerloss_looked_up)
		{
			nvm_pmem_powerloss_persisted = (void (*) (const void *, size_t))
				dlsym(RTLD_DEFAULT, "pgnvm_powerloss_persisted");
			nvm_pmem_powerloss_looked_up = true;
		}
		if (nvm_pmem_powerloss_persisted != NULL)
			nvm_pmem_powerloss_persisted(addr, len);
		if (!also_msync)
			return 0;
	}
	if (page_size == 0)
		page_size = (size_t) sysconf(_SC_PAGESIZE);
	start = (char *) TYPEALIGN_DOWN(page_size, addr);
	return msync(start, len + (addr - start), MS_SYNC);
}
