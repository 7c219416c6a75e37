/*-------------------------------------------------------------------------
 *
 * plstate.h
 *	  The shadow of a data directory: what a power cut would leave of it.
 *
 * The shadow directory (POWERLOSS_SHADOW) holds
 *
 *	  state		one file mapped MAP_SHARED by every process under the preload
 *				and by the powerloss tool: a header, the slot table (one slot
 *				per file or directory identity ever seen under the root) and
 *				an append-only journal of directory snapshots;
 *	  data/N	the durable bytes of slot N's file (absent: no byte durable).
 *
 * A slot is a file identity: (st_dev, the file handle name_to_handle_at()
 * returns), which includes the inode's generation, so an inode number the
 * file system reuses after an unlink gets a new slot.  See README.md for the
 * invariants (who writes what, when) and the model.
 *
 * Everything here is also used by the tool (powerloss init/materialize).  The
 * calls it makes to read and write the shadow go through the PlSys its user
 * gives (libc's in the tool, the real functions behind the wrappers in the
 * preload), so nothing here is tracked as the application's.
 *
 * powerloss/src/plstate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PLSTATE_H
#define PLSTATE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

#define PL_MAGIC		"PWRLOSS1"
#define PL_MAX_SLOTS	32768
#define PL_HASH_SIZE	65536	/* power of two, > 2 * PL_MAX_SLOTS */
#define PL_CHUNK_SHIFT	16		/* dirty map granularity: 64 kB */
#define PL_CHUNK		((off_t) 1 << PL_CHUNK_SHIFT)
#define PL_DIRTY_WORDS	256		/* 256 * 64 chunks of 64 kB = 1 GB tracked */
#define PL_HANDLE_MAX	64
#define PL_PATH_MAX		512
#define PL_JOURNAL_BYTES ((size_t) 512 << 20)	/* sparse */
#define PL_LINE			64		/* harsh model: cache line */
#define PL_MAX_PIDS		4096	/* processes remembered for freeze/kill */

/* slot kinds */
#define PL_KIND_FILE	1
#define PL_KIND_DIR		2

/* slot flags (atomic, sticky) */
#define PL_F_MAPPED		0x01	/* mapped shared: stores are not seen; a
								 * whole-file persist compares; harsh model
								 * applies */
#define PL_F_UNTRACKED	0x02	/* written where we could not see (stdio, an
								 * fd opened behind our back, beyond the dirty
								 * map): a whole-file persist compares */
#define PL_F_NAMED		0x04	/* its name hint is in the journal */
#define PL_F_PERSISTED	0x08	/* some persist reached it (statistics) */

/* journal record types */
#define PL_REC_DIRSNAP	1		/* the entries of a directory, made durable */
#define PL_REC_NAMEHINT 2		/* first persist of a file opened by this name */

#define PL_REC_COMMITTED 0x600DF00Du

/* persist kinds, for POWERLOSS_BREAK and the counters */
typedef enum PlKind
{
	PL_FSYNC = 0,				/* fsync/fdatasync/O_SYNC write/sync/syncfs of a file */
	PL_MSYNC,					/* msync(MS_SYNC) of a mapped range */
	PL_HOOK,					/* pgnvm_powerloss_persisted(): libpmem2 flushes */
	PL_DIRFSYNC,				/* fsync of a directory */
	PL_NKINDS
} PlKind;

typedef struct PlSlot
{
	_Atomic uint32_t valid;		/* set last when the slot is created */
	uint32_t	kind;
	uint64_t	dev;
	uint64_t	ino;
	uint32_t	handle_type;
	uint32_t	handle_bytes;
	unsigned char handle[PL_HANDLE_MAX];
	_Atomic uint64_t durable_size;	/* bytes of data/N that are the file */
	_Atomic uint32_t flags;
	uint32_t	pad;
	pthread_mutex_t lock;		/* serializes persists of this slot */
	char		path[PL_PATH_MAX];	/* root-relative path when last opened */
	_Atomic uint64_t dirty[PL_DIRTY_WORDS];	/* 64 kB chunks written since
											 * taken by a persist */
} PlSlot;

typedef struct PlHeader
{
	char		magic[8];
	uint32_t	version;
	uint32_t	root_slot;
	char		root[PATH_MAX];	/* realpath of the data directory */
	uint64_t	root_dev;
	pthread_mutex_t lock;		/* slot creation, hash, journal */
	_Atomic uint32_t nslots;
	_Atomic uint64_t journal_used;
	_Atomic uint64_t persists[PL_NKINDS];	/* done */
	_Atomic uint64_t dropped[PL_NKINDS];	/* dropped by POWERLOSS_BREAK */
	_Atomic uint64_t bytes_copied;
	_Atomic uint64_t compares;	/* whole-file compares */
	_Atomic uint32_t overflow;	/* a slot or journal record did not fit */
	_Atomic uint64_t events;	/* persists seen so far, all kinds, all
								 * processes (POWERLOSS_CUT_AT counts these) */
	_Atomic uint64_t cut_at;	/* stop at this event (0: never); set by
								 * "powerloss cut" or POWERLOSS_CUT_AT */
	_Atomic uint32_t cut_pid;
	_Atomic uint32_t frozen;	/* the cut happened: no persist starts */
	_Atomic int32_t inflight;	/* persists started and not finished */
	_Atomic uint32_t npids;		/* processes seen (ring of PL_MAX_PIDS) */
	_Atomic uint32_t pids[PL_MAX_PIDS];	/* who stopped its process group at
								 * POWERLOSS_CUT_AT, 0 before */
	int32_t		hash[PL_HASH_SIZE];	/* slot + 1, 0 = empty */
} PlHeader;

typedef struct PlRecHdr
{
	_Atomic uint32_t committed; /* PL_REC_COMMITTED once complete */
	uint32_t	type;
	uint32_t	len;			/* whole record, header included, 8-aligned */
	uint32_t	slot;			/* DIRSNAP: the directory; NAMEHINT: parent */
	uint32_t	nentries;		/* DIRSNAP */
	uint32_t	pad;
} PlRecHdr;

/* entry of a DIRSNAP (and the one entry of a NAMEHINT), then name, target */
typedef struct PlRecEntry
{
	int32_t		slot;			/* -1 for a symlink or other non-file */
	uint8_t		type;			/* DT_REG, DT_DIR, DT_LNK */
	uint8_t		pad;
	uint16_t	namelen;		/* without NUL */
	uint16_t	targetlen;		/* DT_LNK: readlink() result, without NUL */
	uint16_t	pad2;
} PlRecEntry;

/*
 * The calls into the system that the state makes to read and write the
 * shadow, given by its user at create/attach: the tool passes libc's, the
 * preload the real functions behind its own wrappers (dlsym(RTLD_NEXT)).  So
 * the state's own opens, writes and persists of shadow files are never taken
 * for the application's, whoever links it, and the state depends on no
 * wrapper.  Calls the preload does not wrap (pread, fstat, readdir, ...) are
 * made directly.  (The members are not named as libc's functions, so that
 * nothing reads a call through them as a call of a wrapper.)
 */
typedef struct PlSys
{
	int			(*sys_open) (const char *, int,...);
	int			(*sys_openat) (int, const char *, int,...);
	int			(*sys_close) (int);
	ssize_t		(*sys_pwrite) (int, const void *, size_t, off_t);
	int			(*sys_ftruncate) (int, off_t);
	void	   *(*sys_mmap) (void *, size_t, int, int, int, off_t);
	FILE	   *(*sys_fopen) (const char *, const char *);
	int			(*sys_fclose) (FILE *);
} PlSys;

typedef struct PlState
{
	const PlSys *sys;			/* the system calls to use (see PlSys) */
	PlHeader   *hdr;
	PlSlot	   *slots;
	char	   *journal;
	char		shadow[PATH_MAX];
	int			shadow_dirfd;	/* the shadow directory's data/ */
	size_t		map_size;
} PlState;

extern size_t pl_state_size(void);
extern int	pl_state_create(PlState *st, const PlSys *sys, const char *shadow,
							const char *root);
extern int	pl_state_attach(PlState *st, const PlSys *sys, const char *shadow,
							bool readonly);
extern int	pl_slot_for_fd(PlState *st, int fd, const char *relpath, bool create);
extern void pl_mark_dirty(PlState *st, int slot, off_t off, off_t len);
extern int	pl_persist_fd(PlState *st, int slot, int fd, bool whole);
extern int	pl_persist_mem(PlState *st, int slot, off_t off, const void *src,
						   size_t len);
extern int	pl_dir_snapshot(PlState *st, int slot, int dirfd);
extern void pl_name_hint(PlState *st, int slot);
extern bool pl_under_root(PlState *st, const char *abspath, const char **rel);
extern void pl_persist_all(PlState *st);
extern bool pl_handle_matches(PlState *st, int slot, int fd);
extern int	pl_freeze(PlState *st, double seconds);
extern int	pl_signal_all(PlState *st, int sig);

#endif							/* PLSTATE_H */
