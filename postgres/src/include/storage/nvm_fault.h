/*-------------------------------------------------------------------------
 *
 * nvm_fault.h
 *	  pgnvm: accesses to memory-mapped relation files that survive SIGBUS.
 *
 * A load from a mapping beyond the end of its file, or a store into a page
 * the file system cannot provide, raises SIGBUS instead of returning an
 * error.  Every access pgnvm makes through a mapping on behalf of a read or
 * a write therefore runs under one guard, nvm_guarded(): a fault inside the
 * guarded range stops the access early and reports how far it got; the
 * caller turns that into the error a read() or write() would have given.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_fault.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_FAULT_H
#define NVM_FAULT_H

/* one step of a guarded access: work on unit i of the guarded range */
typedef void (*NvmGuardedStep) (void *arg, uint32 i);

extern uint32 nvm_guarded(const void *lo, size_t len, uint32 nunits,
						  NvmGuardedStep step, void *arg);

/* the guarded accesses, in units of BLCKSZ; each returns the blocks done */
extern uint32 nvm_copy_from_mapping(void **buffers, const char *map,
									uint32 nblocks);
extern uint32 nvm_copy_to_mapping(char *map, const void **buffers,
								  uint32 nblocks);
extern uint32 nvm_touch_mapping(const char *map, uint32 nblocks);

extern uint32 nvm_helper_copy(void *dst, const char *map, uint32 nblocks);
extern bool nvm_helper_guard_intact(void);
extern bool nvm_fault_helpers_lost(void);

extern void nvm_fault_init(void);
extern bool nvm_fault_init_helpers(void);
extern size_t nvm_os_page_size(void);

#endif							/* NVM_FAULT_H */
