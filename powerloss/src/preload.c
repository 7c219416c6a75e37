/*-------------------------------------------------------------------------
 *
 * preload.c
 *	  libpowerloss.so: the LD_PRELOAD library that keeps, beside a data
 *	  directory, the shadow of what a power cut would leave of it.
 *
 * Active when POWERLOSS_SHADOW names a shadow made by "powerloss init"
 * (otherwise every wrapper only calls libc).  It sees
 *
 *	- opens (open, openat, creat, fopen and their 64/fortified names): which
 *	  descriptor is which file under the root (its slot);
 *	- writes (write, pwrite, writev, pwritev[2], ftruncate, truncate,
 *	  fallocate, posix_fallocate, copy_file_range): which 64 kB chunks of a
 *	  file changed, in the shadow's shared dirty map;
 *	- mappings (mmap, munmap): which addresses are which file's bytes;
 *	- persists: fsync/fdatasync of a file (copy its changed chunks to the
 *	  shadow), of a directory (snapshot its entries), msync(MS_SYNC) of a
 *	  range and pgnvm_powerloss_persisted() (copy the range from the
 *	  mapping), writes through an O_SYNC/O_DSYNC descriptor, sync/syncfs
 *	  (everything).
 *
 * Namespace calls (rename, unlink, link, mkdir, rmdir) need no wrapper: a
 * directory's durable entries are what it held at its last fsync, read then.
 * sync_file_range() starts write-back and promises nothing, so it is not a
 * persist here either.
 *
 * POWERLOSS_CUT_AT=N (or "powerloss cut") makes the N-th persist the cut
 * (see dropped()); "powerloss freeze" cuts at once (see enter_persist()).
 * POWERLOSS_TRACE=1 logs every persist to stderr.
 *
 * POWERLOSS_BREAK=kind[,kind...] (fsync, msync, hook, dirfsync, all) makes
 * the library drop those persists (the call itself still happens), limited
 * to files whose root-relative path contains POWERLOSS_BREAK_PATH when set:
 * what tests use to show that a missing persist is caught.
 *
 * powerloss/src/preload.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include "plstate.h"
#include "../include/powerloss.h"

#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define PL_EXPORT __attribute__((visibility("default")))
#define PL_MAXFD	65536
#define PL_MAXMAPS	16384

/* per-descriptor: 0 not known yet, -1 not ours, else slot + 1 */
static int32_t fd_slot_tab[PL_MAXFD];
static uint8_t fd_flags_tab[PL_MAXFD];

#define FD_SYNC		0x01		/* O_SYNC/O_DSYNC: every write persists */

typedef struct PlMap
{
	uintptr_t	start;
	uintptr_t	end;
	off_t		off;			/* file offset of start */
	int			slot;
} PlMap;

static PlMap maps[PL_MAXMAPS];
static int nmaps;

static PlState st;
static bool active;
static unsigned break_mask;
static const char *break_path;
static bool trace;

/* inside the library: wrappers pass straight through */
static __thread int inlib;

/* the real functions */
static int	(*r_open) (const char *, int,...);
static int	(*r_open64) (const char *, int,...);
static int	(*r_openat) (int, const char *, int,...);
static int	(*r_openat64) (int, const char *, int,...);
static int	(*r___open_2) (const char *, int);
static int	(*r___open64_2) (const char *, int);
static int	(*r___openat_2) (int, const char *, int);
static int	(*r___openat64_2) (int, const char *, int);
static int	(*r_creat) (const char *, mode_t);
static int	(*r_creat64) (const char *, mode_t);
static FILE *(*r_fopen) (const char *, const char *);
static FILE *(*r_fopen64) (const char *, const char *);
static FILE *(*r_fdopen) (int, const char *);
static int	(*r_fclose) (FILE *);
static int	(*r_close) (int);
static int	(*r_dup) (int);
static int	(*r_dup2) (int, int);
static int	(*r_dup3) (int, int, int);
static ssize_t (*r_write) (int, const void *, size_t);
static ssize_t (*r_pwrite) (int, const void *, size_t, off_t);
static ssize_t (*r_pwrite64) (int, const void *, size_t, off_t);
static ssize_t (*r_writev) (int, const struct iovec *, int);
static ssize_t (*r_pwritev) (int, const struct iovec *, int, off_t);
static ssize_t (*r_pwritev64) (int, const struct iovec *, int, off_t);
static ssize_t (*r_pwritev2) (int, const struct iovec *, int, off_t, int);
static ssize_t (*r_pwritev64v2) (int, const struct iovec *, int, off_t, int);
static int	(*r_ftruncate) (int, off_t);
static int	(*r_ftruncate64) (int, off_t);
static int	(*r_truncate) (const char *, off_t);
static int	(*r_truncate64) (const char *, off_t);
static int	(*r_fallocate) (int, int, off_t, off_t);
static int	(*r_fallocate64) (int, int, off_t, off_t);
static int	(*r_posix_fallocate) (int, off_t, off_t);
static int	(*r_posix_fallocate64) (int, off_t, off_t);
static ssize_t (*r_copy_file_range) (int, off_t *, int, off_t *, size_t, unsigned);
static int	(*r_fsync) (int);
static int	(*r_fdatasync) (int);
static int	(*r_syncfs) (int);
static void (*r_sync) (void);
static int	(*r_msync) (void *, size_t, int);
static void *(*r_mmap) (void *, size_t, int, int, int, off_t);
static void *(*r_mmap64) (void *, size_t, int, int, int, off_t);
static int	(*r_munmap) (void *, size_t);

static void load_reals(void);
static void register_pid(void);

/* the real function: looked up at the first call of any wrapper */
#define REAL(name) (r_##name ? r_##name : (load_reals(), r_##name))

static void
load_reals(void)
{
	r_open = (__typeof__(r_open)) dlsym(RTLD_NEXT, "open");
	r_open64 = (__typeof__(r_open64)) dlsym(RTLD_NEXT, "open64");
	r_openat = (__typeof__(r_openat)) dlsym(RTLD_NEXT, "openat");
	r_openat64 = (__typeof__(r_openat64)) dlsym(RTLD_NEXT, "openat64");
	r___open_2 = (__typeof__(r___open_2)) dlsym(RTLD_NEXT, "__open_2");
	r___open64_2 = (__typeof__(r___open64_2)) dlsym(RTLD_NEXT, "__open64_2");
	r___openat_2 = (__typeof__(r___openat_2)) dlsym(RTLD_NEXT, "__openat_2");
	r___openat64_2 = (__typeof__(r___openat64_2)) dlsym(RTLD_NEXT, "__openat64_2");
	r_creat = (__typeof__(r_creat)) dlsym(RTLD_NEXT, "creat");
	r_creat64 = (__typeof__(r_creat64)) dlsym(RTLD_NEXT, "creat64");
	r_fopen = (__typeof__(r_fopen)) dlsym(RTLD_NEXT, "fopen");
	r_fopen64 = (__typeof__(r_fopen64)) dlsym(RTLD_NEXT, "fopen64");
	r_fdopen = (__typeof__(r_fdopen)) dlsym(RTLD_NEXT, "fdopen");
	r_fclose = (__typeof__(r_fclose)) dlsym(RTLD_NEXT, "fclose");
	r_close = (__typeof__(r_close)) dlsym(RTLD_NEXT, "close");
	r_dup = (__typeof__(r_dup)) dlsym(RTLD_NEXT, "dup");
	r_dup2 = (__typeof__(r_dup2)) dlsym(RTLD_NEXT, "dup2");
	r_dup3 = (__typeof__(r_dup3)) dlsym(RTLD_NEXT, "dup3");
	r_write = (__typeof__(r_write)) dlsym(RTLD_NEXT, "write");
	r_pwrite = (__typeof__(r_pwrite)) dlsym(RTLD_NEXT, "pwrite");
	r_pwrite64 = (__typeof__(r_pwrite64)) dlsym(RTLD_NEXT, "pwrite64");
	r_writev = (__typeof__(r_writev)) dlsym(RTLD_NEXT, "writev");
	r_pwritev = (__typeof__(r_pwritev)) dlsym(RTLD_NEXT, "pwritev");
	r_pwritev64 = (__typeof__(r_pwritev64)) dlsym(RTLD_NEXT, "pwritev64");
	r_pwritev2 = (__typeof__(r_pwritev2)) dlsym(RTLD_NEXT, "pwritev2");
	r_pwritev64v2 = (__typeof__(r_pwritev64v2)) dlsym(RTLD_NEXT, "pwritev64v2");
	r_ftruncate = (__typeof__(r_ftruncate)) dlsym(RTLD_NEXT, "ftruncate");
	r_ftruncate64 = (__typeof__(r_ftruncate64)) dlsym(RTLD_NEXT, "ftruncate64");
	r_truncate = (__typeof__(r_truncate)) dlsym(RTLD_NEXT, "truncate");
	r_truncate64 = (__typeof__(r_truncate64)) dlsym(RTLD_NEXT, "truncate64");
	r_fallocate = (__typeof__(r_fallocate)) dlsym(RTLD_NEXT, "fallocate");
	r_fallocate64 = (__typeof__(r_fallocate64)) dlsym(RTLD_NEXT, "fallocate64");
	r_posix_fallocate = (__typeof__(r_posix_fallocate)) dlsym(RTLD_NEXT, "posix_fallocate");
	r_posix_fallocate64 = (__typeof__(r_posix_fallocate64)) dlsym(RTLD_NEXT, "posix_fallocate64");
	r_copy_file_range = (__typeof__(r_copy_file_range)) dlsym(RTLD_NEXT, "copy_file_range");
	r_fsync = (__typeof__(r_fsync)) dlsym(RTLD_NEXT, "fsync");
	r_fdatasync = (__typeof__(r_fdatasync)) dlsym(RTLD_NEXT, "fdatasync");
	r_syncfs = (__typeof__(r_syncfs)) dlsym(RTLD_NEXT, "syncfs");
	r_sync = (__typeof__(r_sync)) dlsym(RTLD_NEXT, "sync");
	r_msync = (__typeof__(r_msync)) dlsym(RTLD_NEXT, "msync");
	r_mmap = (__typeof__(r_mmap)) dlsym(RTLD_NEXT, "mmap");
	r_mmap64 = (__typeof__(r_mmap64)) dlsym(RTLD_NEXT, "mmap64");
	r_munmap = (__typeof__(r_munmap)) dlsym(RTLD_NEXT, "munmap");
}

/*
 * The state's calls into the system (PlSys): the real functions, so that the
 * shadow's own files are never tracked, but its closes go through our close()
 * and fclose(), which also forget what the descriptor table knew of that
 * number (an entry left by a close we did not see, e.g. closedir()'s, must
 * not outlive the number's reuse by the state).  A function dlsym() does not
 * find is fatal, as an unattached shadow is (pl_init()).
 */
static const PlSys *
real_sys(void)
{
	static PlSys sys;

	load_reals();
	if (!r_open || !r_openat || !r_close || !r_pwrite || !r_ftruncate ||
		!r_mmap || !r_fopen || !r_fclose)
	{
		fprintf(stderr, "libpowerloss: libc's open, openat, close, pwrite, ftruncate, mmap, fopen or fclose not found (dlsym RTLD_NEXT)\n");
		abort();
	}
	sys.sys_open = r_open;
	sys.sys_openat = r_openat;
	sys.sys_close = close;
	sys.sys_pwrite = r_pwrite;
	sys.sys_ftruncate = r_ftruncate;
	sys.sys_mmap = r_mmap;
	sys.sys_fopen = r_fopen;
	sys.sys_fclose = fclose;
	return &sys;
}

static const char *kind_names[PL_NKINDS] = {"fsync", "msync", "hook", "dirfsync"};

/*
 * Constructor: attach to the shadow named by POWERLOSS_SHADOW.  A shadow that
 * cannot be attached is fatal: running on without it would make every
 * power-loss check pass for nothing.
 */
__attribute__((constructor))
static void
pl_init(void)
{
	const char *shadow = getenv("POWERLOSS_SHADOW");
	const char *br = getenv("POWERLOSS_BREAK");

	if (shadow == NULL || shadow[0] == '\0')
		return;
	inlib++;
	if (pl_state_attach(&st, real_sys(), shadow, false) != 0)
	{
		fprintf(stderr, "libpowerloss: cannot attach shadow \"%s\": %s (make it with \"powerloss init\")\n",
				shadow, strerror(errno));
		abort();
	}
	if (br != NULL && br[0] != '\0')
	{
		char	   *copy = strdup(br);
		char	   *save = NULL;

		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
		{
			bool		found = strcmp(t, "all") == 0;

			if (found)
				break_mask = (1u << PL_NKINDS) - 1;
			for (int k = 0; k < PL_NKINDS; k++)
				if (strcmp(t, kind_names[k]) == 0)
				{
					break_mask |= 1u << k;
					found = true;
				}
			if (!found)
			{
				fprintf(stderr, "libpowerloss: unknown POWERLOSS_BREAK kind \"%s\" (fsync, msync, hook, dirfsync, all)\n", t);
				abort();
			}
		}
		free(copy);
		/*
		 * A copy: the environment's memory is not ours to keep pointing
		 * into (PostgreSQL's postmaster overwrites it for its process
		 * title).
		 */
		break_path = getenv("POWERLOSS_BREAK_PATH");
		break_path = break_path && break_path[0] ? strdup(break_path) : NULL;
	}
	if (getenv("POWERLOSS_CUT_AT") != NULL)
	{
		uint64_t	none = 0;

		atomic_compare_exchange_strong(&st.hdr->cut_at, &none,
									   strtoull(getenv("POWERLOSS_CUT_AT"), NULL, 10));
	}
	register_pid();
	pthread_atfork(NULL, NULL, register_pid);
	trace = getenv("POWERLOSS_TRACE") != NULL && getenv("POWERLOSS_TRACE")[0] != '\0';
	active = true;
	inlib--;
}

/*
 * The persist gate.  Every persist enters it first: once the cut has
 * happened (frozen, set by "powerloss freeze" or at POWERLOSS_CUT_AT) the
 * process stops itself instead and never persists again; otherwise it is
 * counted in flight until it leaves, so that the freezer can wait for the
 * persists under way.  (Sequentially consistent atomics on both sides: the
 * freezer sets frozen then reads inflight, a persist adds to inflight then
 * reads frozen, so one of them sees the other.)
 */
static void
stop_forever(void)
{
	for (;;)
		raise(SIGSTOP);
}

static void
enter_persist(void)
{
	if (atomic_load(&st.hdr->frozen))
		stop_forever();
	atomic_fetch_add(&st.hdr->inflight, 1);
	if (atomic_load(&st.hdr->frozen))
	{
		atomic_fetch_sub(&st.hdr->inflight, 1);
		stop_forever();
	}
}

static void
leave_persist(void)
{
	atomic_fetch_sub(&st.hdr->inflight, 1);
}

/* remember this process, for "powerloss freeze" and "powerloss kill" */
static void
register_pid(void)
{
	uint32_t	i = atomic_fetch_add(&st.hdr->npids, 1) % PL_MAX_PIDS;

	atomic_store(&st.hdr->pids[i], (uint32_t) getpid());
}

/*
 * Should this persist be dropped (POWERLOSS_BREAK)?  Counts it either way;
 * POWERLOSS_TRACE=1 logs it to stderr (pid, kind, file).
 */
static bool
dropped(PlKind kind, int slot)
{
	uint64_t	ev = atomic_fetch_add(&st.hdr->events, 1) + 1;
	bool		drop = (break_mask & (1u << kind)) &&
		(break_path == NULL || strstr(st.slots[slot].path, break_path) != NULL);

	/*
	 * The cut point (POWERLOSS_CUT_AT=N, or "powerloss cut SHADOW N|+K" at
	 * any time): the N-th persist (of any process) is not made; its
	 * process closes the gate (frozen: no other persist starts) and stops
	 * itself, and the harness, waiting for cut_pid ("powerloss cut-wait"),
	 * stops the others and takes the cut there.  A cut at a chosen persist: inside a
	 * checkpoint's fsyncs, between a segment's fsync and its rename, ...
	 */
	if (ev == atomic_load_explicit(&st.hdr->cut_at, memory_order_relaxed))
	{
		/* always logged: the harness reports where each cut landed */
		fprintf(stderr, "powerloss: %d cut before persist %llu: %s %s\n",
				(int) getpid(), (unsigned long long) ev, kind_names[kind],
				st.slots[slot].path);
		atomic_store(&st.hdr->frozen, 1);
		atomic_store(&st.hdr->cut_pid, (uint32_t) getpid());
		leave_persist();
		stop_forever();
	}
	atomic_fetch_add(drop ? &st.hdr->dropped[kind] : &st.hdr->persists[kind], 1);
	if (trace)
		fprintf(stderr, "powerloss: %d %s%s %s\n", (int) getpid(),
				drop ? "DROPPED " : "", kind_names[kind], st.slots[slot].path);
	return drop;
}

/*
 * The slot of a descriptor's file, registering it when it lies under the
 * root (a regular file or directory on the root's device whose /proc path
 * is below it).  -1: not ours.
 */
static int
resolve(int fd)
{
	struct stat sb;
	char		p[64];
	char		path[PATH_MAX];
	ssize_t		n;
	const char *rel;

	if (fstat(fd, &sb) != 0 || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode)) ||
		(uint64_t) sb.st_dev != st.hdr->root_dev)
		return -1;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, path, sizeof(path) - 1);
	if (n <= 0)
		return -1;
	path[n] = '\0';
	if (!pl_under_root(&st, path, &rel))
		return -1;
	return pl_slot_for_fd(&st, fd, rel, true);
}

/* after an open we saw: remember which file fd is */
static void
track_open(int fd, int flags)
{
	int			slot;

	if (!active || inlib || fd < 0 || fd >= PL_MAXFD)
		return;
	inlib++;
	slot = resolve(fd);
	fd_slot_tab[fd] = slot >= 0 ? slot + 1 : -1;
	fd_flags_tab[fd] = (flags & (O_SYNC | O_DSYNC)) ? FD_SYNC : 0;
	if (slot >= 0 && (flags & O_TRUNC))
		pl_mark_dirty(&st, slot, 0, (off_t) PL_DIRTY_WORDS * 64 * PL_CHUNK);
	inlib--;
}

/*
 * The slot of fd, or -1.  A descriptor we did not see opened (dup'ed by
 * fcntl, opened inside libc) is resolved now; writes to it may have gone
 * unseen, so its file is compared whole at each persist from now on.
 */
static int
fd_slot(int fd)
{
	int32_t		v;

	if (fd < 0 || fd >= PL_MAXFD)
		return -1;
	v = fd_slot_tab[fd];
	if (v == 0)
	{
		int			slot = resolve(fd);

		if (slot >= 0)
			atomic_fetch_or(&st.slots[slot].flags, PL_F_UNTRACKED);
		v = fd_slot_tab[fd] = slot >= 0 ? slot + 1 : -1;
	}
	return v - 1;
}

static void
forget_fd(int fd)
{
	if (fd >= 0 && fd < PL_MAXFD)
	{
		fd_slot_tab[fd] = 0;
		fd_flags_tab[fd] = 0;
	}
}

/* fsync() and friends of a descriptor that succeeded */
static void
persist_fd(int fd)
{
	int			slot;

	if (!active || inlib)
		return;
	inlib++;
	enter_persist();
	slot = fd_slot(fd);
	if (slot >= 0)
	{
		if (st.slots[slot].kind == PL_KIND_DIR)
		{
			if (!dropped(PL_DIRFSYNC, slot))
				(void) pl_dir_snapshot(&st, slot, fd);
		}
		else if (!dropped(PL_FSYNC, slot))
		{
			(void) pl_persist_fd(&st, slot, fd, false);
			pl_name_hint(&st, slot);
		}
	}
	leave_persist();
	inlib--;
}

/* a write of len bytes at off through fd returned */
static void
after_write(int fd, off_t off, ssize_t len)
{
	int			slot;

	if (!active || inlib || len <= 0)
		return;
	inlib++;
	slot = fd_slot(fd);
	if (slot >= 0)
	{
		if (off < 0)
			off = lseek(fd, 0, SEEK_CUR) - len;
		pl_mark_dirty(&st, slot, off, len);
		if (fd_flags_tab[fd] & FD_SYNC)
		{
			enter_persist();
			if (!dropped(PL_FSYNC, slot))
				(void) pl_persist_fd(&st, slot, fd, false);
			leave_persist();
		}
	}
	inlib--;
}

/* ftruncate() of fd to len: everything from len on changed */
static void
after_truncate(int slot, off_t len)
{
	off_t		end = (off_t) PL_DIRTY_WORDS * 64 * PL_CHUNK;

	if (len < end)
		pl_mark_dirty(&st, slot, len, end - len);
}

/* a range of memory was persisted: copy the bytes of mapped files in it */
static void
persist_mem(PlKind kind, const void *addr, size_t len)
{
	uintptr_t	lo = (uintptr_t) addr;
	uintptr_t	hi = lo + len;

	if (!active || inlib || len == 0)
		return;
	inlib++;
	enter_persist();
	for (int i = 0; i < nmaps; i++)
	{
		PlMap	   *m = &maps[i];
		uintptr_t	a = lo > m->start ? lo : m->start;
		uintptr_t	b = hi < m->end ? hi : m->end;

		if (a >= b)
			continue;
		if (!dropped(kind, m->slot))
			(void) pl_persist_mem(&st, m->slot, m->off + (off_t) (a - m->start),
								  (const void *) a, b - a);
	}
	leave_persist();
	inlib--;
}

/* forget the mappings in [lo, hi) (munmap, or a MAP_FIXED over them) */
static void
forget_maps(uintptr_t lo, uintptr_t hi)
{
	for (int i = 0; i < nmaps;)
	{
		PlMap	   *m = &maps[i];

		if (m->end <= lo || m->start >= hi)
		{
			i++;
			continue;
		}
		if (m->start < lo && m->end > hi && nmaps < PL_MAXMAPS)
		{
			/* a hole in the middle: split */
			PlMap		tail = *m;

			tail.off += (off_t) (hi - m->start);
			tail.start = hi;
			m->end = lo;
			maps[nmaps++] = tail;
			i++;
			continue;
		}
		if (m->start < lo)
		{
			m->end = lo;
			i++;
		}
		else if (m->end > hi)
		{
			m->off += (off_t) (hi - m->start);
			m->start = hi;
			i++;
		}
		else
			maps[i] = maps[--nmaps];
	}
}

static void
after_mmap(void *r, size_t len, int flags, int fd, off_t off)
{
	int			type = flags & MAP_TYPE;
	int			slot;

	if (!active || inlib || r == MAP_FAILED)
		return;
	inlib++;
	forget_maps((uintptr_t) r, (uintptr_t) r + len);
	if (fd >= 0 && (type == MAP_SHARED || type == MAP_SHARED_VALIDATE) &&
		(slot = fd_slot(fd)) >= 0)
	{
		/* stores are not seen: whole-file compares, harsh model applies */
		atomic_fetch_or(&st.slots[slot].flags, PL_F_MAPPED);
		if (nmaps < PL_MAXMAPS)
			maps[nmaps++] = (PlMap)
		{
			(uintptr_t) r, (uintptr_t) r + len, off, slot
		};
		else
		{
			fprintf(stderr, "libpowerloss: more than %d mappings: persists through the rest are lost\n",
					PL_MAXMAPS);
			atomic_store(&st.hdr->overflow, 1);
		}
	}
	inlib--;
}

/* ---- the hook the libpmem2 seam calls (include/powerloss.h) ---- */

PL_EXPORT void
pgnvm_powerloss_persisted(const void *addr, size_t len)
{
	persist_mem(PL_HOOK, addr, len);
}

/* ---- opens ---- */

#define MODE_ARG(flags, mode) \
	do { \
		if ((flags) & (O_CREAT | O_TMPFILE)) \
		{ \
			va_list ap; \
			va_start(ap, flags); \
			mode = va_arg(ap, int); \
			va_end(ap); \
		} \
	} while (0)

PL_EXPORT int
open(const char *path, int flags,...)
{
	int			mode = 0;
	int			fd;

	MODE_ARG(flags, mode);
	fd = REAL(open) (path, flags, mode);
	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
open64(const char *path, int flags,...)
{
	int			mode = 0;
	int			fd;

	MODE_ARG(flags, mode);
	fd = REAL(open64) (path, flags, mode);
	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
openat(int dirfd, const char *path, int flags,...)
{
	int			mode = 0;
	int			fd;

	MODE_ARG(flags, mode);
	fd = REAL(openat) (dirfd, path, flags, mode);
	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
openat64(int dirfd, const char *path, int flags,...)
{
	int			mode = 0;
	int			fd;

	MODE_ARG(flags, mode);
	fd = REAL(openat64) (dirfd, path, flags, mode);
	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
__open_2(const char *path, int flags)
{
	int			fd = REAL(__open_2) (path, flags);

	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
__open64_2(const char *path, int flags)
{
	int			fd = REAL(__open64_2) (path, flags);

	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
__openat_2(int dirfd, const char *path, int flags)
{
	int			fd = REAL(__openat_2) (dirfd, path, flags);

	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
__openat64_2(int dirfd, const char *path, int flags)
{
	int			fd = REAL(__openat64_2) (dirfd, path, flags);

	track_open(fd, flags);
	return fd;
}

PL_EXPORT int
creat(const char *path, mode_t mode)
{
	int			fd = REAL(creat) (path, mode);

	track_open(fd, O_CREAT | O_WRONLY | O_TRUNC);
	return fd;
}

PL_EXPORT int
creat64(const char *path, mode_t mode)
{
	int			fd = REAL(creat64) (path, mode);

	track_open(fd, O_CREAT | O_WRONLY | O_TRUNC);
	return fd;
}

/*
 * A stream: its writes (fwrite) happen inside libc where we cannot see them,
 * so a file opened for writing this way is compared whole at each persist.
 */
static FILE *
track_stream(FILE *f, const char *mode)
{
	int			fd;

	if (f == NULL || !active || inlib)
		return f;
	fd = fileno(f);
	track_open(fd, strchr(mode, 'w') ? O_TRUNC : 0);
	if (fd >= 0 && fd < PL_MAXFD && fd_slot_tab[fd] > 0 &&
		strpbrk(mode, "wa+") != NULL)
		atomic_fetch_or(&st.slots[fd_slot_tab[fd] - 1].flags, PL_F_UNTRACKED);
	return f;
}

PL_EXPORT FILE *
fopen(const char *path, const char *mode)
{
	return track_stream(REAL(fopen) (path, mode), mode);
}

PL_EXPORT FILE *
fopen64(const char *path, const char *mode)
{
	return track_stream(REAL(fopen64) (path, mode), mode);
}

PL_EXPORT FILE *
fdopen(int fd, const char *mode)
{
	FILE	   *f = REAL(fdopen) (fd, mode);

	if (f != NULL && active && !inlib && strpbrk(mode, "wa+") != NULL)
	{
		int			slot;

		inlib++;
		slot = fd_slot(fd);
		if (slot >= 0)
			atomic_fetch_or(&st.slots[slot].flags, PL_F_UNTRACKED);
		inlib--;
	}
	return f;
}

PL_EXPORT int
fclose(FILE *f)
{
	int			fd = f ? fileno(f) : -1;
	int			rc = REAL(fclose) (f);

	forget_fd(fd);
	return rc;
}

PL_EXPORT int
close(int fd)
{
	forget_fd(fd);
	return REAL(close) (fd);
}

static int
after_dup(int oldfd, int newfd)
{
	if (newfd >= 0 && newfd < PL_MAXFD && oldfd >= 0 && oldfd < PL_MAXFD)
	{
		fd_slot_tab[newfd] = fd_slot_tab[oldfd];
		fd_flags_tab[newfd] = fd_flags_tab[oldfd];
	}
	return newfd;
}

PL_EXPORT int
dup(int fd)
{
	return after_dup(fd, REAL(dup) (fd));
}

PL_EXPORT int
dup2(int fd, int fd2)
{
	return after_dup(fd, REAL(dup2) (fd, fd2));
}

PL_EXPORT int
dup3(int fd, int fd2, int flags)
{
	return after_dup(fd, REAL(dup3) (fd, fd2, flags));
}

/* ---- writes ---- */

PL_EXPORT ssize_t
write(int fd, const void *buf, size_t n)
{
	ssize_t		r = REAL(write) (fd, buf, n);

	after_write(fd, -1, r);
	return r;
}

PL_EXPORT ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	ssize_t		r = REAL(pwrite) (fd, buf, n, off);

	after_write(fd, off, r);
	return r;
}

PL_EXPORT ssize_t
pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	ssize_t		r = REAL(pwrite64) (fd, buf, n, off);

	after_write(fd, off, r);
	return r;
}

PL_EXPORT ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	ssize_t		r = REAL(writev) (fd, iov, n);

	after_write(fd, -1, r);
	return r;
}

PL_EXPORT ssize_t
pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	ssize_t		r = REAL(pwritev) (fd, iov, n, off);

	after_write(fd, off, r);
	return r;
}

PL_EXPORT ssize_t
pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
	ssize_t		r = REAL(pwritev64) (fd, iov, n, off);

	after_write(fd, off, r);
	return r;
}

PL_EXPORT ssize_t
pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	ssize_t		r = REAL(pwritev2) (fd, iov, n, off, flags);

	after_write(fd, off, r);
	if (r > 0 && (flags & (RWF_SYNC | RWF_DSYNC)))
		persist_fd(fd);
	return r;
}

PL_EXPORT ssize_t
pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	ssize_t		r = REAL(pwritev64v2) (fd, iov, n, off, flags);

	after_write(fd, off, r);
	if (r > 0 && (flags & (RWF_SYNC | RWF_DSYNC)))
		persist_fd(fd);
	return r;
}

static void
truncated_fd(int fd, off_t len)
{
	int			slot;

	if (!active || inlib)
		return;
	inlib++;
	if ((slot = fd_slot(fd)) >= 0)
		after_truncate(slot, len);
	inlib--;
}

PL_EXPORT int
ftruncate(int fd, off_t len)
{
	int			r = REAL(ftruncate) (fd, len);

	if (r == 0)
		truncated_fd(fd, len);
	return r;
}

PL_EXPORT int
ftruncate64(int fd, off_t len)
{
	int			r = REAL(ftruncate64) (fd, len);

	if (r == 0)
		truncated_fd(fd, len);
	return r;
}

/* truncate(path): open it (without tracking) to find its slot */
static void
truncated_path(const char *path, off_t len)
{
	int			fd;

	if (!active || inlib)
		return;
	inlib++;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
	{
		int			slot = resolve(fd);

		if (slot >= 0)
			after_truncate(slot, len);
		close(fd);
	}
	inlib--;
}

PL_EXPORT int
truncate(const char *path, off_t len)
{
	int			r = REAL(truncate) (path, len);

	if (r == 0)
		truncated_path(path, len);
	return r;
}

PL_EXPORT int
truncate64(const char *path, off_t len)
{
	int			r = REAL(truncate64) (path, len);

	if (r == 0)
		truncated_path(path, len);
	return r;
}

PL_EXPORT int
fallocate(int fd, int mode, off_t off, off_t len)
{
	int			r = REAL(fallocate) (fd, mode, off, len);

	if (r == 0)
		after_write(fd, off, (ssize_t) len);
	return r;
}

PL_EXPORT int
fallocate64(int fd, int mode, off_t off, off_t len)
{
	int			r = REAL(fallocate64) (fd, mode, off, len);

	if (r == 0)
		after_write(fd, off, (ssize_t) len);
	return r;
}

PL_EXPORT int
posix_fallocate(int fd, off_t off, off_t len)
{
	int			r = REAL(posix_fallocate) (fd, off, len);

	if (r == 0)
		after_write(fd, off, (ssize_t) len);
	return r;
}

PL_EXPORT int
posix_fallocate64(int fd, off_t off, off_t len)
{
	int			r = REAL(posix_fallocate64) (fd, off, len);

	if (r == 0)
		after_write(fd, off, (ssize_t) len);
	return r;
}

PL_EXPORT ssize_t
copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t len,
				unsigned flags)
{
	off_t		start = outoff ? *outoff : -1;
	ssize_t		r = REAL(copy_file_range) (in, inoff, out, outoff, len, flags);

	after_write(out, start, r);
	return r;
}

/* ---- persists ---- */

PL_EXPORT int
fsync(int fd)
{
	int			r = REAL(fsync) (fd);

	if (r == 0)
		persist_fd(fd);
	return r;
}

PL_EXPORT int
fdatasync(int fd)
{
	int			r = REAL(fdatasync) (fd);

	if (r == 0)
		persist_fd(fd);
	return r;
}

static void
persist_everything(void)
{
	if (!active || inlib)
		return;
	inlib++;
	enter_persist();
	if (break_mask & (1u << PL_FSYNC))
		atomic_fetch_add(&st.hdr->dropped[PL_FSYNC], 1);
	else
		pl_persist_all(&st);
	leave_persist();
	inlib--;
}

PL_EXPORT int
syncfs(int fd)
{
	int			r = REAL(syncfs) (fd);

	if (r == 0)
		persist_everything();
	return r;
}

PL_EXPORT void
sync(void)
{
	REAL(sync) ();
	persist_everything();
}

PL_EXPORT int
msync(void *addr, size_t len, int flags)
{
	int			r = REAL(msync) (addr, len, flags);

	if (r == 0 && (flags & MS_SYNC))
		persist_mem(PL_MSYNC, addr, len);
	return r;
}

/* ---- mappings ---- */

PL_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void	   *r = REAL(mmap) (addr, len, prot, flags, fd, off);

	after_mmap(r, len, flags, fd, off);
	return r;
}

PL_EXPORT void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void	   *r = REAL(mmap64) (addr, len, prot, flags, fd, off);

	after_mmap(r, len, flags, fd, off);
	return r;
}

PL_EXPORT int
munmap(void *addr, size_t len)
{
	int			r = REAL(munmap) (addr, len);

	if (r == 0 && active && !inlib)
		forget_maps((uintptr_t) addr, (uintptr_t) addr + len);
	return r;
}
