/*-------------------------------------------------------------------------
 *
 * plstate.c
 *	  The shadow state: slots (file identities), durable bytes, directory
 *	  snapshots.  Shared by the preload library and the powerloss tool.
 *
 * Every function that changes the shadow does so in an order that leaves it
 * readable by "powerloss materialize" at any instant, because the harness
 * freezes the server's processes wherever they are (SIGSTOP) and then reads
 * the shadow without taking any lock:
 *
 *	- a slot is filled, then its `valid` word is set, then it is counted and
 *	  hashed; a journal record refers only to valid slots;
 *	- a journal record is copied, then its `committed` word is set, then
 *	  journal_used moves past it (all under the header lock), so the reader
 *	  stops at the first record not committed;
 *	- a persist writes the slot's data file, then publishes durable_size.  A
 *	  persist frozen half-way has made part of its range durable, which a
 *	  real device may also do (its fsync had not returned: nobody relied on
 *	  it).
 *
 * powerloss/src/plstate.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include "plstate.h"

#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALIGN_UP(x, a)	(((x) + (a) - 1) & ~((size_t) (a) - 1))

typedef struct PlHandle
{
	struct file_handle fh;
	unsigned char bytes[MAX_HANDLE_SZ];
} PlHandle;

/* the handle's bytes (f_handle is a zero-length array in glibc's header) */
static inline const unsigned char *
hbytes(const PlHandle *h)
{
	return (const unsigned char *) h + offsetof(struct file_handle, f_handle);
}

static size_t
header_bytes(void)
{
	return ALIGN_UP(sizeof(PlHeader), 4096);
}

static size_t
slots_bytes(void)
{
	return ALIGN_UP(sizeof(PlSlot) * PL_MAX_SLOTS, 4096);
}

/* the size of the state file (sparse: most of it is never touched) */
size_t
pl_state_size(void)
{
	return header_bytes() + slots_bytes() + PL_JOURNAL_BYTES;
}

/*
 * Lock a process-shared robust mutex.  A holder that died (a server process
 * killed while persisting) leaves at worst a persist half done, which the
 * model allows; the mutex is made consistent and used on.
 */
static void
pl_lock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m) == EOWNERDEAD)
		pthread_mutex_consistent(m);
}

static void
pl_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

static void
init_mutex(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

static int
map_state(PlState *st, const char *shadow, int fd, bool readonly)
{
	void	   *p;
	char		path[PATH_MAX];

	st->map_size = pl_state_size();
	p = st->sys->sys_mmap(NULL, st->map_size,
						  readonly ? PROT_READ : PROT_READ | PROT_WRITE,
						  MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	st->hdr = p;
	st->slots = (PlSlot *) ((char *) p + header_bytes());
	st->journal = (char *) p + header_bytes() + slots_bytes();
	snprintf(st->shadow, sizeof(st->shadow), "%s", shadow);
	snprintf(path, sizeof(path), "%s/data", shadow);
	st->shadow_dirfd = st->sys->sys_open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->shadow_dirfd < 0)
		return -1;
	return 0;
}

/*
 * pl_state_create -- make a new shadow for the data directory `root`:
 * the state file and data/.  Fails if a state file is already there.  The
 * caller then records the baseline (the tool's init walks the directory).
 */
int
pl_state_create(PlState *st, const PlSys *sys, const char *shadow,
				const char *root)
{
	char		path[PATH_MAX];
	char		real[PATH_MAX];
	struct stat sb;
	int			fd;

	st->sys = sys;
	if (realpath(root, real) == NULL || stat(real, &sb) != 0)
		return -1;
	(void) mkdir(shadow, 0700);
	snprintf(path, sizeof(path), "%s/data", shadow);
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return -1;
	snprintf(path, sizeof(path), "%s/state", shadow);
	fd = st->sys->sys_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (st->sys->sys_ftruncate(fd, (off_t) pl_state_size()) != 0 ||
		map_state(st, shadow, fd, false) != 0)
	{
		st->sys->sys_close(fd);
		return -1;
	}
	st->sys->sys_close(fd);
	memcpy(st->hdr->magic, PL_MAGIC, 8);
	st->hdr->version = 1;
	snprintf(st->hdr->root, sizeof(st->hdr->root), "%s", real);
	st->hdr->root_dev = sb.st_dev;
	init_mutex(&st->hdr->lock);
	fd = st->sys->sys_open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	st->hdr->root_slot = (uint32_t) pl_slot_for_fd(st, fd, "", true);
	st->sys->sys_close(fd);
	return (int) st->hdr->root_slot < 0 ? -1 : 0;
}

/* pl_state_attach -- map an existing shadow (the preload, materialize) */
int
pl_state_attach(PlState *st, const PlSys *sys, const char *shadow,
				bool readonly)
{
	char		path[PATH_MAX];
	int			fd;
	int			rc;

	st->sys = sys;
	snprintf(path, sizeof(path), "%s/state", shadow);
	fd = st->sys->sys_open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = map_state(st, shadow, fd, readonly);
	st->sys->sys_close(fd);
	if (rc != 0)
		return -1;
	if (memcmp(st->hdr->magic, PL_MAGIC, 8) != 0)
	{
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* pl_under_root -- is abspath the root or below it?  *rel: the rest */
bool
pl_under_root(PlState *st, const char *abspath, const char **rel)
{
	size_t		n = strlen(st->hdr->root);

	if (strncmp(abspath, st->hdr->root, n) != 0)
		return false;
	if (abspath[n] == '\0')
	{
		*rel = abspath + n;
		return true;
	}
	if (abspath[n] != '/')
		return false;
	*rel = abspath + n + 1;
	return true;
}

static uint32_t
hash_key(uint64_t dev, const PlHandle *h)
{
	uint64_t	x = 1469598103934665603ULL ^ dev;

	x = (x ^ (uint64_t) h->fh.handle_type) * 1099511628211ULL;
	for (unsigned i = 0; i < h->fh.handle_bytes; i++)
		x = (x ^ hbytes(h)[i]) * 1099511628211ULL;
	return (uint32_t) (x ^ (x >> 32));
}

static bool
slot_is(const PlSlot *s, uint64_t dev, const PlHandle *h)
{
	return s->dev == dev && s->handle_type == (uint32_t) h->fh.handle_type &&
		s->handle_bytes == h->fh.handle_bytes &&
		memcmp(s->handle, hbytes(h), h->fh.handle_bytes) == 0;
}

static int
get_handle(int dirfd, const char *name, int flags, PlHandle *h)
{
	int			mnt;

	h->fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(dirfd, name, &h->fh, &mnt, flags) != 0)
		return -1;
	if (h->fh.handle_bytes > PL_HANDLE_MAX)
	{
		errno = EOVERFLOW;
		return -1;
	}
	return 0;
}

/*
 * Find or create the slot of a file identity.  Caller holds the header lock.
 * relpath (may be NULL) updates the slot's last known name.
 */
static int
slot_locked(PlState *st, const struct stat *sb, const PlHandle *h,
			const char *relpath)
{
	PlHeader   *hdr = st->hdr;
	uint32_t	i = hash_key(sb->st_dev, h) & (PL_HASH_SIZE - 1);
	PlSlot	   *s;
	uint32_t	n;

	for (;; i = (i + 1) & (PL_HASH_SIZE - 1))
	{
		int32_t		v = hdr->hash[i];

		if (v == 0)
			break;
		s = &st->slots[v - 1];
		if (slot_is(s, sb->st_dev, h))
		{
			if (relpath != NULL && strcmp(s->path, relpath) != 0)
				snprintf(s->path, sizeof(s->path), "%s", relpath);
			return v - 1;
		}
	}
	n = atomic_load(&hdr->nslots);
	if (n >= PL_MAX_SLOTS)
	{
		if (!atomic_exchange(&hdr->overflow, 1))
			fprintf(stderr, "powerloss: more than %d files: the shadow is incomplete\n",
					PL_MAX_SLOTS);
		return -1;
	}
	s = &st->slots[n];
	memset(s, 0, offsetof(PlSlot, dirty));
	s->kind = S_ISDIR(sb->st_mode) ? PL_KIND_DIR : PL_KIND_FILE;
	s->dev = sb->st_dev;
	s->ino = sb->st_ino;
	s->handle_type = (uint32_t) h->fh.handle_type;
	s->handle_bytes = h->fh.handle_bytes;
	memcpy(s->handle, hbytes(h), h->fh.handle_bytes);
	snprintf(s->path, sizeof(s->path), "%s", relpath ? relpath : "");
	init_mutex(&s->lock);
	atomic_store(&s->valid, 1);
	atomic_store(&hdr->nslots, n + 1);
	hdr->hash[i] = (int32_t) n + 1;
	return (int) n;
}

/*
 * pl_slot_for_fd -- the slot of an open file or directory (created if new:
 * a file first seen now has no durable byte).  -1 if it cannot be identified.
 */
int
pl_slot_for_fd(PlState *st, int fd, const char *relpath, bool create)
{
	struct stat sb;
	PlHandle	h;
	int			slot;

	(void) create;
	if (fstat(fd, &sb) != 0 || get_handle(fd, "", AT_EMPTY_PATH, &h) != 0)
		return -1;
	pl_lock(&st->hdr->lock);
	slot = slot_locked(st, &sb, &h, relpath);
	pl_unlock(&st->hdr->lock);
	return slot;
}

/* pl_handle_matches -- is fd still the file of `slot`? */
bool
pl_handle_matches(PlState *st, int slot, int fd)
{
	struct stat sb;
	PlHandle	h;

	return fstat(fd, &sb) == 0 && get_handle(fd, "", AT_EMPTY_PATH, &h) == 0 &&
		slot_is(&st->slots[slot], sb.st_dev, &h);
}

/*
 * pl_mark_dirty -- bytes [off, off+len) of the slot's file were written (or
 * truncated away).  Called after the write returned, so that a persist that
 * takes the bit afterwards copies bytes at least as new as the write.  Bytes
 * beyond the dirty map make the slot compare whole files.
 */
void
pl_mark_dirty(PlState *st, int slot, off_t off, off_t len)
{
	PlSlot	   *s = &st->slots[slot];
	uint64_t	c;
	uint64_t	last;

	if (len <= 0 || off < 0)
		return;
	c = (uint64_t) off >> PL_CHUNK_SHIFT;
	last = (uint64_t) (off + len - 1) >> PL_CHUNK_SHIFT;
	for (; c <= last; c++)
	{
		uint64_t	bit = (uint64_t) 1 << (c & 63);

		if (c >= (uint64_t) PL_DIRTY_WORDS * 64)
		{
			atomic_fetch_or(&s->flags, PL_F_UNTRACKED);
			return;
		}
		if (!(atomic_load_explicit(&s->dirty[c >> 6], memory_order_relaxed) & bit))
			atomic_fetch_or(&s->dirty[c >> 6], bit);
	}
}

static int
open_data(PlState *st, int slot)
{
	char		name[16];

	snprintf(name, sizeof(name), "%d", slot);
	return st->sys->sys_openat(st->shadow_dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

/* copy [off, off+len) from rfd to dfd; compare first if `compare` */
static int
copy_range(PlState *st, int rfd, int dfd, off_t off, off_t len, bool compare)
{
	/* per thread, allocated once (a 128 kB malloc per persist would mmap) */
	static __thread char *rbuf;
	static __thread char *dbuf;

	if (rbuf == NULL)
	{
		rbuf = malloc(PL_CHUNK);
		dbuf = malloc(PL_CHUNK);
		if (rbuf == NULL || dbuf == NULL)
			return -1;
	}

	while (len > 0)
	{
		size_t		want = len > PL_CHUNK ? (size_t) PL_CHUNK : (size_t) len;
		ssize_t		got = pread(rfd, rbuf, want, off);

		if (got <= 0)
			return got < 0 ? -1 : 0;
		if (!compare || pread(dfd, dbuf, (size_t) got, off) != got ||
			memcmp(rbuf, dbuf, (size_t) got) != 0)
		{
			if (st->sys->sys_pwrite(dfd, rbuf, (size_t) got, off) != got)
				return -1;
			atomic_fetch_add(&st->hdr->bytes_copied, (uint64_t) got);
		}
		off += got;
		len -= got;
	}
	return 0;
}

/*
 * pl_persist_fd -- fsync() of the file behind fd: its durable bytes become
 * what the file holds now, size included.  Copies the 64 kB chunks written
 * since the last persist (whoever wrote them: the dirty map is shared), or
 * compares the whole file when stores or writes may have gone unseen
 * (mapped, untracked) or `whole` is asked (sync(), a descriptor we did not
 * see opened).  One persist of a slot at a time: a second fsync must not
 * return before the bytes the first one took are copied.
 */
int
pl_persist_fd(PlState *st, int slot, int fd, bool whole)
{
	PlSlot	   *s = &st->slots[slot];
	struct stat sb;
	int			rfd = fd;
	int			dfd;
	int			rc = 0;
	uint64_t	taken[PL_DIRTY_WORDS];
	int			mode = fcntl(fd, F_GETFL);

	if (mode < 0)
		return -1;
	if ((mode & O_ACCMODE) == O_WRONLY)
	{
		char		p[64];

		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		rfd = st->sys->sys_open(p, O_RDONLY | O_CLOEXEC);
		if (rfd < 0)
			return -1;
	}
	pl_lock(&s->lock);
	dfd = open_data(st, slot);
	if (dfd < 0 || fstat(rfd, &sb) != 0)
	{
		rc = -1;
		goto done;
	}
	whole |= (atomic_load(&s->flags) & (PL_F_MAPPED | PL_F_UNTRACKED)) != 0;
	for (int i = 0; i < PL_DIRTY_WORDS; i++)
		taken[i] = atomic_load_explicit(&s->dirty[i], memory_order_relaxed) ?
			atomic_exchange(&s->dirty[i], 0) : 0;
	if (st->sys->sys_ftruncate(dfd, sb.st_size) != 0)
	{
		rc = -1;
		goto done;
	}
	if (whole)
	{
		atomic_fetch_add(&st->hdr->compares, 1);
		rc = copy_range(st, rfd, dfd, 0, sb.st_size, true);
	}
	else
	{
		for (int i = 0; i < PL_DIRTY_WORDS && rc == 0; i++)
		{
			while (taken[i] != 0 && rc == 0)
			{
				int			b = __builtin_ctzll(taken[i]);
				off_t		off = ((off_t) i * 64 + b) << PL_CHUNK_SHIFT;

				taken[i] &= taken[i] - 1;
				if (off >= sb.st_size)
					continue;
				rc = copy_range(st, rfd, dfd, off,
								sb.st_size - off < PL_CHUNK ? sb.st_size - off : PL_CHUNK,
								false);
			}
		}
	}
	if (rc == 0)
	{
		atomic_store(&s->durable_size, (uint64_t) sb.st_size);
		atomic_fetch_or(&s->flags, PL_F_PERSISTED);
	}
	else
	{
		/* give the chunks back: a later persist must still copy them */
		for (int i = 0; i < PL_DIRTY_WORDS; i++)
			if (taken[i])
				atomic_fetch_or(&s->dirty[i], taken[i]);
	}
done:
	if (dfd >= 0)
		st->sys->sys_close(dfd);
	pl_unlock(&s->lock);
	if (rfd != fd)
		st->sys->sys_close(rfd);
	return rc;
}

/*
 * pl_persist_mem -- msync() or a libpmem2 flush of a mapped range: bytes
 * [off, off+len) of the slot's file, read from the caller's mapping `src`,
 * become durable.  The durable size grows to cover them (the bytes lie in
 * the file: they were just stored through a mapping of it).
 */
int
pl_persist_mem(PlState *st, int slot, off_t off, const void *src, size_t len)
{
	PlSlot	   *s = &st->slots[slot];
	int			dfd;
	int			rc = 0;
	uint64_t	end = (uint64_t) off + len;

	pl_lock(&s->lock);
	dfd = open_data(st, slot);
	if (dfd < 0)
		rc = -1;
	else
	{
		if (atomic_load(&s->durable_size) < end &&
			st->sys->sys_ftruncate(dfd, (off_t) end) != 0)
			rc = -1;
		else if (st->sys->sys_pwrite(dfd, src, len, off) != (ssize_t) len)
			rc = -1;
		st->sys->sys_close(dfd);
	}
	if (rc == 0)
	{
		if (atomic_load(&s->durable_size) < end)
			atomic_store(&s->durable_size, end);
		atomic_fetch_or(&s->flags, PL_F_PERSISTED);
		atomic_fetch_add(&st->hdr->bytes_copied, len);
	}
	pl_unlock(&s->lock);
	return rc;
}

/*
 * Append a record to the journal.  Caller holds the header lock.  The record
 * is copied with committed = 0, then committed is set: a reader (materialize,
 * with the writer frozen anywhere) stops at the first record not committed.
 */
static int
journal_append_locked(PlState *st, const void *rec, size_t len)
{
	PlHeader   *hdr = st->hdr;
	uint64_t	pos = atomic_load(&hdr->journal_used);
	PlRecHdr   *r = (PlRecHdr *) (st->journal + pos);

	if (pos + len + sizeof(PlRecHdr) > PL_JOURNAL_BYTES)
	{
		if (!atomic_exchange(&hdr->overflow, 1))
			fprintf(stderr, "powerloss: journal full: the shadow is incomplete\n");
		return -1;
	}
	memcpy((char *) r + sizeof(r->committed),
		   (const char *) rec + sizeof(r->committed),
		   len - sizeof(r->committed));
	atomic_store(&r->committed, PL_REC_COMMITTED);
	atomic_store(&hdr->journal_used, pos + len);
	return 0;
}

/* a growable byte buffer for one record */
typedef struct Buf
{
	char	   *p;
	size_t		len;
	size_t		cap;
} Buf;

static void *
buf_add(Buf *b, size_t n)
{
	void	   *at;

	if (b->len + n > b->cap)
	{
		size_t		cap = b->cap ? b->cap * 2 : 4096;

		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (b->p == NULL)
			abort();
		b->cap = cap;
	}
	at = b->p + b->len;
	memset(at, 0, n);
	b->len += n;
	return at;
}

static void
add_entry(Buf *b, int slot, uint8_t type, const char *name, const char *target)
{
	PlRecEntry *e;
	size_t		nl = strlen(name);
	size_t		tl = target ? strlen(target) : 0;
	size_t		off = b->len;

	e = buf_add(b, sizeof(PlRecEntry));
	e->slot = slot;
	e->type = type;
	e->namelen = (uint16_t) nl;
	e->targetlen = (uint16_t) tl;
	memcpy(buf_add(b, nl), name, nl);
	if (tl)
		memcpy(buf_add(b, tl), target, tl);
	/* keep entries 8-aligned */
	buf_add(b, ALIGN_UP(b->len - off, 8) - (b->len - off));
}

/*
 * pl_dir_snapshot -- fsync() of a directory: the entries it holds now
 * become its durable entries (creations, renames, unlinks since its last
 * fsync).  Entries are (name, slot of the file or directory named) and
 * symlinks with their target; other kinds are left out.  Read and appended
 * under the header lock, so that snapshots of one directory are journaled in
 * the order they were taken.
 */
int
pl_dir_snapshot(PlState *st, int slot, int dirfd)
{
	Buf			b = {0};
	PlRecHdr   *rh;
	DIR		   *d;
	struct dirent *de;
	int			fd;
	int			rc;
	const char *dpath = st->slots[slot].path;

	buf_add(&b, sizeof(PlRecHdr));
	pl_lock(&st->hdr->lock);
	fd = st->sys->sys_openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL)
	{
		if (fd >= 0)
			st->sys->sys_close(fd);
		pl_unlock(&st->hdr->lock);
		free(b.p);
		return -1;
	}
	while ((de = readdir(d)) != NULL)
	{
		struct stat sb;
		char		rel[PL_PATH_MAX];

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			continue;			/* gone meanwhile */
		snprintf(rel, sizeof(rel), "%s%s%s", dpath, dpath[0] ? "/" : "",
				 de->d_name);
		if (S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode))
		{
			PlHandle	h;
			int			s = -1;

			if (get_handle(fd, de->d_name, 0, &h) == 0)
				s = slot_locked(st, &sb, &h, rel);
			if (s < 0)
				continue;
			add_entry(&b, s, S_ISDIR(sb.st_mode) ? DT_DIR : DT_REG,
					  de->d_name, NULL);
		}
		else if (S_ISLNK(sb.st_mode))
		{
			char		target[PATH_MAX];
			ssize_t		n = readlinkat(fd, de->d_name, target, sizeof(target) - 1);

			if (n < 0)
				continue;
			target[n] = '\0';
			add_entry(&b, -1, DT_LNK, de->d_name, target);
		}
		else
			continue;
		((PlRecHdr *) b.p)->nentries++;
	}
	closedir(d);
	rh = (PlRecHdr *) b.p;
	rh->type = PL_REC_DIRSNAP;
	rh->slot = (uint32_t) slot;
	rh->len = (uint32_t) b.len;
	rc = journal_append_locked(st, b.p, b.len);
	pl_unlock(&st->hdr->lock);
	free(b.p);
	return rc;
}

/*
 * pl_name_hint -- journal, once per file, the name under which it was first
 * persisted.  Only "materialize --dirs newfile" uses it: the model of ext4
 * and xfs, where fsync() of a new file also makes its name durable.  The
 * strict model (POSIX, the default) ignores it.
 */
void
pl_name_hint(PlState *st, int slot)
{
	PlSlot	   *s = &st->slots[slot];
	char		parent[PATH_MAX];
	const char *name;
	char	   *slash;
	struct stat sb;
	PlHandle	h;
	Buf			b = {0};
	PlRecHdr   *rh;
	int			ps;

	if (atomic_load(&s->flags) & PL_F_NAMED || s->path[0] == '\0')
		return;
	snprintf(parent, sizeof(parent), "%s/%s", st->hdr->root, s->path);
	slash = strrchr(parent, '/');
	*slash = '\0';
	name = s->path + (slash - parent) - strlen(st->hdr->root);
	if (stat(parent, &sb) != 0 || get_handle(AT_FDCWD, parent, 0, &h) != 0)
		return;
	buf_add(&b, sizeof(PlRecHdr));
	pl_lock(&st->hdr->lock);
	ps = slot_locked(st, &sb, &h, NULL);
	if (ps >= 0)
	{
		add_entry(&b, slot, DT_REG, name, NULL);
		rh = (PlRecHdr *) b.p;
		rh->type = PL_REC_NAMEHINT;
		rh->slot = (uint32_t) ps;
		rh->nentries = 1;
		rh->len = (uint32_t) b.len;
		if (journal_append_locked(st, b.p, b.len) == 0)
			atomic_fetch_or(&s->flags, PL_F_NAMED);
	}
	pl_unlock(&st->hdr->lock);
	free(b.p);
}

/*
 * pl_persist_all -- sync(), syncfs(): every file and directory of the shadow
 * made durable as it is now, files first (then the directories that name
 * them).  Each is found by its last known name and used only if it is still
 * the same identity.
 */
void
pl_persist_all(PlState *st)
{
	uint32_t	n = atomic_load(&st->hdr->nslots);

	for (int pass = 0; pass < 2; pass++)
	{
		for (uint32_t i = 0; i < n; i++)
		{
			PlSlot	   *s = &st->slots[i];
			char		path[PATH_MAX];
			int			fd;

			if (!atomic_load(&s->valid) ||
				(pass == 0) != (s->kind == PL_KIND_FILE))
				continue;
			snprintf(path, sizeof(path), "%s%s%s", st->hdr->root,
					 s->path[0] ? "/" : "", s->path);
			fd = st->sys->sys_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (fd < 0)
				continue;
			if (pl_handle_matches(st, (int) i, fd))
			{
				if (s->kind == PL_KIND_FILE)
					(void) pl_persist_fd(st, (int) i, fd, true);
				else
					(void) pl_dir_snapshot(st, (int) i, fd);
			}
			st->sys->sys_close(fd);
		}
	}
}

/*
 * Does process `pid` map this shadow's state file?  (The pid ring may hold
 * pids that exited and were reused by another program.)
 */
static bool
maps_shadow(PlState *st, uint32_t pid)
{
	char		path[64];
	char		state[PATH_MAX];
	char		want[PATH_MAX];
	char		line[PATH_MAX + 256];
	FILE	   *f;
	bool		found = false;

	snprintf(want, sizeof(want), "%s/state", st->shadow);
	if (realpath(want, state) == NULL)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	if ((f = st->sys->sys_fopen(path, "r")) == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
	{
		char	   *nl = strchr(line, '\n');
		size_t		n = strlen(state);
		size_t		len;

		if (nl)
			*nl = '\0';
		len = strlen(line);
		found = len >= n && strcmp(line + len - n, state) == 0;
	}
	st->sys->sys_fclose(f);
	return found;
}

/*
 * pl_signal_all -- send sig to every live process that ran under this
 * shadow (the preload remembers each process it starts in and each child
 * forked; PostgreSQL's children call setsid(), so no process group holds
 * them all).  Returns how many were signalled.
 */
int
pl_signal_all(PlState *st, int sig)
{
	uint32_t	n = atomic_load(&st->hdr->npids);
	int			count = 0;

	if (n > PL_MAX_PIDS)
		n = PL_MAX_PIDS;
	for (uint32_t i = 0; i < n; i++)
	{
		uint32_t	pid = atomic_load(&st->hdr->pids[i]);

		if (pid != 0 && pid != (uint32_t) getpid() && maps_shadow(st, pid) &&
			kill((pid_t) pid, sig) == 0)
			count++;
	}
	return count;
}

/*
 * pl_freeze -- the cut: from now on no persist starts (a process that tries
 * stops itself, see the preload's persist gate), persists under way finish,
 * then every process of the shadow is stopped.  After it the shadow no
 * longer changes.  -1 if persists were still under way after `seconds`.
 */
int
pl_freeze(PlState *st, double seconds)
{
	long		ms = (long) (seconds * 1000);

	atomic_store(&st->hdr->frozen, 1);
	for (long t = 0; atomic_load(&st->hdr->inflight) > 0; t++)
	{
		if (t > ms)
			return -1;
		usleep(1000);
	}
	return pl_signal_all(st, SIGSTOP);
}
