/*-------------------------------------------------------------------------
 *
 * nvm_shmem.c
 *	  pgnvm's shared memory: sized and set up in one place.
 *
 * ipci.c calls NvmShmemSize() with every subsystem's size and
 * NvmShmemInit() with every subsystem's initialisation (patch 0014): this is
 * the one hook, and the one list of what pgnvm keeps in shared memory.  Each
 * part is sized and set up by the file that owns it, in every engine (the
 * readers, contrib/pgnvm, find it whatever nvm_storage_engine says):
 *
 *	nvm_buf.c		the redirection flags, a byte per shared buffer (se2)
 *	nvm_slots.c		the slot maps (se2) and the hybrid pool's free list
 *	nvm_stats.c		the counters, a slot per PGPROC
 *	nvm_verify.c	the write counters behind the helpers' verdicts (se2)
 *	nvm_wal.c		nvm_wal's counters (pgnvm_wal())
 *
 * Like ipci.c, this file stands above all of them and is called by nothing
 * of ours.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/storage/ipc/nvm_shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nvm_wal.h"
#include "storage/nvm_buf.h"
#include "storage/nvm_shmem.h"
#include "storage/nvm_slots.h"
#include "storage/nvm_stats.h"
#include "storage/nvm_verify.h"
#include "storage/shmem.h"

/*
 * NvmShmemSize -- the shared memory of every part listed above.
 */
Size
NvmShmemSize(void)
{
	Size		size = 0;

	size = add_size(size, NvmBufShmemSize());
	size = add_size(size, NvmSlotsShmemSize());
	size = add_size(size, NvmStatsShmemSize());
	size = add_size(size, NvmVerifyShmemSize());
	size = add_size(size, NvmWalShmemSize());
	return size;
}

/*
 * NvmShmemInit -- allocate and initialise every part listed above, or
 * attach to them (EXEC_BACKEND children).
 */
void
NvmShmemInit(void)
{
	NvmBufShmemInit();
	NvmSlotsShmemInit();
	NvmStatsShmemInit();
	NvmVerifyShmemInit();
	NvmWalShmemInit();
}
