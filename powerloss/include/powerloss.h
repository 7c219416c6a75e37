/*-------------------------------------------------------------------------
 *
 * powerloss.h
 *	  The one entry point of libpowerloss.so that a program calls itself.
 *
 * Persists that make no system call (libpmem2's cache-line flushes and
 * fence: a DAX file mapped with MAP_SYNC, or PMEM2_FORCE_GRANULARITY=
 * CACHE_LINE) are invisible to an LD_PRELOAD library.  A program that makes
 * them tells the library after each one, with the range its persist
 * function was given:
 *
 *		typedef void (*pgnvm_powerloss_persisted_fn) (const void *, size_t);
 *		fn = (pgnvm_powerloss_persisted_fn)
 *			dlsym(RTLD_DEFAULT, PGNVM_POWERLOSS_PERSISTED);
 *		...
 *		persist_fn(addr, len);
 *		if (fn)
 *			fn(addr, len);
 *
 * Looked up once per process; without the library loaded it is NULL and the
 * program pays one test per persist.  The range must lie in a shared
 * mapping of a file (made with mmap(), which the library sees); its bytes,
 * as they are in the mapping when called, become the file's durable bytes.
 * Call it after the persist has completed (after the fence), never instead.
 *
 * powerloss/include/powerloss.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef POWERLOSS_H
#define POWERLOSS_H

#include <stddef.h>

#define PGNVM_POWERLOSS_PERSISTED "pgnvm_powerloss_persisted"

typedef void (*pgnvm_powerloss_persisted_fn) (const void *addr, size_t len);

extern void pgnvm_powerloss_persisted(const void *addr, size_t len);

#endif							/* POWERLOSS_H */
