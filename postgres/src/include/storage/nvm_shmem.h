/*-------------------------------------------------------------------------
 *
 * nvm_shmem.h
 *	  pgnvm's shared memory: sized and set up in one place.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * src/include/storage/nvm_shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef NVM_SHMEM_H
#define NVM_SHMEM_H

extern Size NvmShmemSize(void);
extern void NvmShmemInit(void);

#endif							/* NVM_SHMEM_H */
