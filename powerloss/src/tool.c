/*-------------------------------------------------------------------------
 *
 * tool.c
 *	  powerloss: make a shadow, and build the directory a power cut leaves.
 *
 *	  powerloss init SHADOW DATADIR
 *		  DATADIR as it is now (stopped: nobody writes it) is the durable
 *		  baseline: every file's bytes and every directory's entries.
 *	  powerloss materialize SHADOW OUT [--dirs strict|newfile]
 *					[--harsh SEED [--harsh-p P] --real DATADIR]
 *		  OUT (new) gets, from the root's durable entries down, every
 *		  durable entry with its file's durable bytes.  The server must be
 *		  frozen (SIGSTOP) or gone while this runs.  --dirs newfile: fsync()
 *		  of a new file also makes its first name durable (ext4, xfs), not
 *		  only fsync() of its directory (strict, POSIX: the default).
 *		  --harsh: of the cache lines of mapped files that differ between
 *		  DATADIR (the live files) and their durable bytes, each survives
 *		  with probability P (0.5), chosen by a hash of (SEED, file, line):
 *		  the same seed keeps the same lines.
 *	  powerloss freeze SHADOW
 *		  the cut, now: no persist starts any more, those under way finish,
 *		  then every process under the shadow is stopped (SIGSTOP).
 *	  powerloss kill SHADOW
 *		  SIGKILL every process under the shadow (after materialize).
 *	  powerloss cut SHADOW N|+K
 *		  make persist event N, or K events from now, the cut (it is not
 *		  made; as POWERLOSS_CUT_AT=N in the server's environment).
 *	  powerloss cut-wait SHADOW SECONDS
 *		  wait for the cut at POWERLOSS_CUT_AT=N (the
 *		  N-th persist), freeze the rest; print the pid that hit it.
 *	  powerloss stats SHADOW [--files]
 *		  counters: persists kept and dropped per kind, bytes copied; with
 *		  --files, each slot: kind, durable size, flags, last name.
 *
 * Prints one line per materialize ("materialized: ...") for the harness.
 *
 * powerloss/src/tool.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include "plstate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* the state's calls into the system: libc's (the tool runs without the preload) */
static const PlSys libc_sys = {
	.sys_open = open,
	.sys_openat = openat,
	.sys_close = close,
	.sys_pwrite = pwrite,
	.sys_ftruncate = ftruncate,
	.sys_mmap = mmap,
	.sys_fopen = fopen,
	.sys_fclose = fclose,
};

static void
die(const char *what, const char *arg)
{
	fprintf(stderr, "powerloss: %s \"%s\": %s\n", what, arg, strerror(errno));
	exit(1);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: powerloss init SHADOW DATADIR\n"
			"       powerloss materialize SHADOW OUT [--dirs strict|newfile] [--harsh SEED [--harsh-p P] --real DATADIR]\n"
			"       powerloss stats SHADOW [--files]\n"
			"       powerloss freeze SHADOW\n"
			"       powerloss kill SHADOW\n"
			"       powerloss cut SHADOW N|+K\n"
			"       powerloss cut-wait SHADOW SECONDS\n");
	exit(2);
}

/* ---- init ---- */

/*
 * Record directory `dfd` (root-relative `rel`) and everything below it as
 * durable: each file's bytes compared into the shadow, then the directory's
 * snapshot (which creates the slots of its entries).
 */
static void
init_walk(PlState *st, int dfd, const char *rel, int *nfiles, int *ndirs)
{
	DIR		   *d;
	struct dirent *de;
	int			dslot = pl_slot_for_fd(st, dfd, rel, true);
	int			fd2 = dup(dfd);

	if (dslot < 0 || fd2 < 0 || (d = fdopendir(fd2)) == NULL)
		die("cannot read directory", rel);
	(*ndirs)++;
	while ((de = readdir(d)) != NULL)
	{
		struct stat sb;
		char		sub[PL_PATH_MAX];
		int			fd;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			die("cannot stat", de->d_name);
		snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
		if (S_ISDIR(sb.st_mode))
		{
			fd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0)
				die("cannot open", sub);
			init_walk(st, fd, sub, nfiles, ndirs);
			close(fd);
		}
		else if (S_ISREG(sb.st_mode))
		{
			int			slot;

			fd = openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				die("cannot open", sub);
			slot = pl_slot_for_fd(st, fd, sub, true);
			if (slot < 0 || pl_persist_fd(st, slot, fd, true) != 0)
				die("cannot copy", sub);
			close(fd);
			(*nfiles)++;
		}
	}
	closedir(d);
	if (pl_dir_snapshot(st, dslot, dfd) != 0)
		die("cannot snapshot", rel);
}

static int
cmd_init(const char *shadow, const char *datadir)
{
	PlState		st;
	int			fd;
	int			nfiles = 0;
	int			ndirs = 0;

	if (pl_state_create(&st, &libc_sys, shadow, datadir) != 0)
		die("cannot create shadow", shadow);
	fd = open(st.hdr->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die("cannot open", st.hdr->root);
	init_walk(&st, fd, "", &nfiles, &ndirs);
	close(fd);
	printf("baseline: %d files, %d directories of %s in %s\n",
		   nfiles, ndirs, st.hdr->root, shadow);
	return 0;
}

/* ---- materialize ---- */

typedef struct Ent
{
	const PlRecEntry *e;		/* into the journal */
	const char *name;
	const char *target;
} Ent;

typedef struct DirState
{
	bool		known;
	int			n;
	int			cap;
	Ent		   *ents;
} DirState;

typedef struct Mat
{
	PlState		st;
	DirState   *dirs;			/* per slot */
	char	  **first_path;		/* per slot: where its file went first */
	bool		newfile;
	bool		harsh;
	uint64_t	seed;
	double		p;
	const char *real;
	long		nfiles;
	long		ndirs;
	long		nlinks;
	long		bytes;
	long		harsh_files;
	long		harsh_lines;
	long		harsh_kept;
	long		harsh_skipped;
} Mat;

static void
ent_parse(const PlRecEntry *e, Ent *out)
{
	out->e = e;
	out->name = strndup((const char *) (e + 1), e->namelen);
	out->target = e->targetlen ?
		strndup((const char *) (e + 1) + e->namelen, e->targetlen) : NULL;
}

static size_t
ent_size(const PlRecEntry *e)
{
	size_t		n = sizeof(PlRecEntry) + e->namelen + e->targetlen;

	return (n + 7) & ~(size_t) 7;
}

/*
 * Replay the journal: each directory's durable entries are those of its last
 * committed snapshot (plus, with --dirs newfile, the names under which files
 * were first persisted, in journal order).  Stops at the first record not
 * committed: a writer frozen in the middle of it.
 */
static void
replay(Mat *m)
{
	uint64_t	used = atomic_load(&m->st.hdr->journal_used);
	uint64_t	pos = 0;

	while (pos + sizeof(PlRecHdr) <= used)
	{
		const PlRecHdr *r = (const PlRecHdr *) (m->st.journal + pos);
		const char *p = (const char *) (r + 1);
		DirState   *d;

		if (atomic_load(&((PlRecHdr *) r)->committed) != PL_REC_COMMITTED || r->len == 0)
			break;
		d = &m->dirs[r->slot];
		if (r->type == PL_REC_DIRSNAP)
		{
			d->known = true;
			d->n = 0;
			for (uint32_t i = 0; i < r->nentries; i++)
			{
				const PlRecEntry *e = (const PlRecEntry *) p;

				if (d->n == d->cap)
				{
					d->cap = d->cap ? d->cap * 2 : 16;
					d->ents = realloc(d->ents, sizeof(Ent) * d->cap);
				}
				ent_parse(e, &d->ents[d->n++]);
				p += ent_size(e);
			}
		}
		else if (r->type == PL_REC_NAMEHINT && m->newfile)
		{
			const PlRecEntry *e = (const PlRecEntry *) p;
			Ent			ne;
			int			i;

			ent_parse(e, &ne);
			for (i = 0; i < d->n; i++)
				if (strcmp(d->ents[i].name, ne.name) == 0)
					break;
			if (i == d->n)
			{
				if (d->n == d->cap)
				{
					d->cap = d->cap ? d->cap * 2 : 16;
					d->ents = realloc(d->ents, sizeof(Ent) * d->cap);
				}
				d->n++;
			}
			d->ents[i] = ne;
			d->known = true;
		}
		pos += r->len;
	}
}

/* deterministic choice of a line: splitmix64 of (seed, slot, line) */
static bool
keep_line(Mat *m, int slot, uint64_t line)
{
	uint64_t	z = m->seed ^ ((uint64_t) slot * 0x9E3779B97F4A7C15ULL) ^
		(line * 0xD1B54A32D192ED03ULL);

	z += 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (double) (z >> 11) / (double) (1ULL << 53) < m->p;
}

/*
 * The harsh model for one mapped file: lines of the live file (under
 * --real, found by the slot's last name and checked to be the same
 * identity) that differ from the durable bytes survive when chosen.  Only
 * within the durable size: stores cannot lengthen a file.
 */
static void
harsh_file(Mat *m, int slot, int outfd, uint64_t size)
{
	PlSlot	   *s = &m->st.slots[slot];
	char		path[PATH_MAX];
	char		a[PL_LINE * 64];
	char		b[PL_LINE * 64];
	int			fd;

	snprintf(path, sizeof(path), "%s/%s", m->real, s->path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || !pl_handle_matches(&m->st, slot, fd))
	{
		m->harsh_skipped++;
		if (fd >= 0)
			close(fd);
		return;
	}
	m->harsh_files++;
	for (uint64_t off = 0; off < size; off += sizeof(a))
	{
		ssize_t		na = pread(fd, a, sizeof(a), (off_t) off);
		ssize_t		nb = pread(outfd, b, sizeof(b), (off_t) off);
		ssize_t		n = na < nb ? na : nb;

		if (n <= 0)
			break;
		if (memcmp(a, b, (size_t) n) == 0)
			continue;
		for (ssize_t l = 0; l < n; l += PL_LINE)
		{
			size_t		len = (size_t) (n - l < PL_LINE ? n - l : PL_LINE);
			uint64_t	line = (off + (uint64_t) l) / PL_LINE;

			if (memcmp(a + l, b + l, len) == 0)
				continue;
			m->harsh_lines++;
			if (keep_line(m, slot, line))
			{
				if (pwrite(outfd, a + l, len, (off_t) (off + (uint64_t) l)) != (ssize_t) len)
					die("cannot write", path);
				m->harsh_kept++;
			}
		}
	}
	close(fd);
}

/* write slot's durable bytes as file `out` (a hard link if already out) */
static void
mat_file(Mat *m, int slot, const char *out)
{
	PlSlot	   *s = &m->st.slots[slot];
	uint64_t	size = atomic_load(&s->durable_size);
	char		name[16];
	char		buf[1 << 16];
	int			dfd;
	int			ofd;
	uint64_t	off = 0;

	if (m->first_path[slot] != NULL)
	{
		if (link(m->first_path[slot], out) != 0)
			die("cannot link", out);
		m->nlinks++;
		return;
	}
	m->first_path[slot] = strdup(out);
	ofd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (ofd < 0)
		die("cannot create", out);
	snprintf(name, sizeof(name), "%d", slot);
	dfd = openat(m->st.shadow_dirfd, name, O_RDONLY | O_CLOEXEC);
	while (dfd >= 0 && off < size)
	{
		ssize_t		n = pread(dfd, buf,
							  size - off < sizeof(buf) ? (size_t) (size - off) : sizeof(buf),
							  (off_t) off);

		if (n <= 0)
			break;				/* a persist frozen after the size: zeros */
		if (pwrite(ofd, buf, (size_t) n, (off_t) off) != n)
			die("cannot write", out);
		off += (uint64_t) n;
	}
	if (ftruncate(ofd, (off_t) size) != 0)
		die("cannot size", out);
	if (dfd >= 0)
		close(dfd);
	m->bytes += (long) size;
	m->nfiles++;
	if (m->harsh && (atomic_load(&s->flags) & PL_F_MAPPED))
	{
		close(ofd);
		ofd = open(out, O_RDWR | O_CLOEXEC);
		if (ofd < 0)
			die("cannot reopen", out);
		harsh_file(m, slot, ofd, size);
	}
	close(ofd);
}

/* create directory `out` with slot's durable entries, recursively */
static void
mat_dir(Mat *m, int slot, const char *out, int depth)
{
	DirState   *d = &m->dirs[slot];

	if (mkdir(out, 0700) != 0)
		die("cannot create directory", out);
	m->ndirs++;
	if (depth > 64)
		return;
	for (int i = 0; i < d->n; i++)
	{
		Ent		   *e = &d->ents[i];
		char		path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", out, e->name);
		if (e->e->type == DT_DIR)
			mat_dir(m, e->e->slot, path, depth + 1);
		else if (e->e->type == DT_REG)
			mat_file(m, e->e->slot, path);
		else if (e->e->type == DT_LNK && symlink(e->target, path) != 0)
			die("cannot symlink", path);
	}
}

static int
cmd_materialize(int argc, char **argv)
{
	Mat			m = {0};
	const char *shadow = argv[0];
	const char *out = argv[1];

	m.p = 0.5;
	for (int i = 2; i < argc; i++)
	{
		if (strcmp(argv[i], "--dirs") == 0 && i + 1 < argc)
		{
			i++;
			if (strcmp(argv[i], "newfile") == 0)
				m.newfile = true;
			else if (strcmp(argv[i], "strict") != 0)
				usage();
		}
		else if (strcmp(argv[i], "--harsh") == 0 && i + 1 < argc)
		{
			m.harsh = true;
			m.seed = strtoull(argv[++i], NULL, 0);
		}
		else if (strcmp(argv[i], "--harsh-p") == 0 && i + 1 < argc)
			m.p = strtod(argv[++i], NULL);
		else if (strcmp(argv[i], "--real") == 0 && i + 1 < argc)
			m.real = argv[++i];
		else
			usage();
	}
	if (m.harsh && m.real == NULL)
		usage();
	if (pl_state_attach(&m.st, &libc_sys, shadow, true) != 0)
		die("cannot attach shadow", shadow);
	if (m.st.hdr->overflow)
	{
		fprintf(stderr, "powerloss: the shadow overflowed (slots, journal or mappings): refusing to materialize\n");
		return 1;
	}
	m.dirs = calloc(PL_MAX_SLOTS, sizeof(DirState));
	m.first_path = calloc(PL_MAX_SLOTS, sizeof(char *));
	replay(&m);
	mat_dir(&m, (int) m.st.hdr->root_slot, out, 0);
	printf("materialized: %ld files (%ld bytes), %ld directories, %ld hard links",
		   m.nfiles, m.bytes, m.ndirs, m.nlinks);
	if (m.harsh)
		printf("; harsh seed %llu p %.2f: %ld mapped files, %ld unpersisted lines, %ld kept, %ld files not found",
			   (unsigned long long) m.seed, m.p, m.harsh_files, m.harsh_lines,
			   m.harsh_kept, m.harsh_skipped);
	printf("\n");
	return 0;
}

static int
cmd_stats(const char *shadow, bool files)
{
	PlState		st;
	static const char *kinds[PL_NKINDS] = {"fsync", "msync", "hook", "dirfsync"};

	if (pl_state_attach(&st, &libc_sys, shadow, true) != 0)
		die("cannot attach shadow", shadow);
	printf("root %s\nslots %u\nprocesses %u\nfrozen %u\nevents %llu\ncut_at %llu\ncut_pid %u\njournal_bytes %llu\nbytes_copied %llu\nwhole_file_compares %llu\noverflow %u\n",
		   st.hdr->root, atomic_load(&st.hdr->nslots),
		   atomic_load(&st.hdr->npids), atomic_load(&st.hdr->frozen),
		   (unsigned long long) atomic_load(&st.hdr->events),
		   (unsigned long long) atomic_load(&st.hdr->cut_at),
		   atomic_load(&st.hdr->cut_pid),
		   (unsigned long long) atomic_load(&st.hdr->journal_used),
		   (unsigned long long) atomic_load(&st.hdr->bytes_copied),
		   (unsigned long long) atomic_load(&st.hdr->compares),
		   atomic_load(&st.hdr->overflow));
	for (int k = 0; k < PL_NKINDS; k++)
		printf("%s persisted %llu dropped %llu\n", kinds[k],
			   (unsigned long long) atomic_load(&st.hdr->persists[k]),
			   (unsigned long long) atomic_load(&st.hdr->dropped[k]));
	for (uint32_t i = 0; files && i < atomic_load(&st.hdr->nslots); i++)
	{
		PlSlot	   *s = &st.slots[i];
		uint32_t	f = atomic_load(&s->flags);

		printf("slot %u %s size %llu%s%s%s%s %s\n", i,
			   s->kind == PL_KIND_DIR ? "dir" : "file",
			   (unsigned long long) atomic_load(&s->durable_size),
			   f & PL_F_MAPPED ? " mapped" : "",
			   f & PL_F_UNTRACKED ? " untracked" : "",
			   f & PL_F_PERSISTED ? " persisted" : "",
			   f & PL_F_NAMED ? " named" : "", s->path);
	}
	return 0;
}

/*
 * cut-wait SHADOW SECONDS: wait until a process stopped its group at
 * POWERLOSS_CUT_AT; print its pid.  Exit 1 after SECONDS without.
 */
static int
cmd_cut_wait(const char *shadow, const char *secs)
{
	PlState		st;
	long		ms = (long) (strtod(secs, NULL) * 1000);

	if (pl_state_attach(&st, &libc_sys, shadow, false) != 0)
		die("cannot attach shadow", shadow);
	for (long t = 0; t <= ms; t += 10)
	{
		uint32_t	pid = atomic_load(&st.hdr->cut_pid);

		if (pid != 0)
		{
			char		path[64];
			char		buf[512];
			FILE	   *f;
			char	   *p;

			/* and wait until it has stopped */
			snprintf(path, sizeof(path), "/proc/%u/stat", pid);
			f = fopen(path, "r");
			if (f != NULL && fgets(buf, sizeof(buf), f) != NULL &&
				(p = strrchr(buf, ')')) != NULL && p[2] != 'T' && t < ms)
			{
				fclose(f);
				usleep(10000);
				continue;
			}
			if (f != NULL)
				fclose(f);
			if (pl_freeze(&st, 10) < 0)
			{
				fprintf(stderr, "powerloss: persists still under way after 10 s\n");
				return 1;
			}
			printf("%u\n", pid);
			return 0;
		}
		usleep(10000);
	}
	fprintf(stderr, "powerloss: no cut within %s s\n", secs);
	return 1;
}

/*
 * cut SHADOW N|+K: the running server stops at persist event N, or K events
 * from now.  Prints the event chosen.
 */
static int
cmd_cut(const char *shadow, const char *arg)
{
	PlState		st;
	uint64_t	n = strtoull(arg + (arg[0] == '+'), NULL, 10);

	if (pl_state_attach(&st, &libc_sys, shadow, false) != 0)
		die("cannot attach shadow", shadow);
	if (arg[0] == '+')
		n += atomic_load(&st.hdr->events);
	atomic_store(&st.hdr->cut_at, n);
	printf("%llu\n", (unsigned long long) n);
	return 0;
}

/* freeze SHADOW: the cut, now (see pl_freeze()) */
static int
cmd_freeze(const char *shadow)
{
	PlState		st;
	int			n;

	if (pl_state_attach(&st, &libc_sys, shadow, false) != 0)
		die("cannot attach shadow", shadow);
	n = pl_freeze(&st, 10);
	if (n < 0)
	{
		fprintf(stderr, "powerloss: persists still under way after 10 s\n");
		return 1;
	}
	printf("frozen: %d processes stopped\n", n);
	return 0;
}

/* kill SHADOW: SIGKILL every live process of the shadow */
static int
cmd_kill(const char *shadow)
{
	PlState		st;

	if (pl_state_attach(&st, &libc_sys, shadow, true) != 0)
		die("cannot attach shadow", shadow);
	printf("killed: %d processes\n", pl_signal_all(&st, SIGKILL));
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "init") == 0)
		return cmd_init(argv[2], argv[3]);
	if (argc >= 4 && strcmp(argv[1], "materialize") == 0)
		return cmd_materialize(argc - 2, argv + 2);
	if (argc == 3 && strcmp(argv[1], "stats") == 0)
		return cmd_stats(argv[2], false);
	if (argc == 3 && strcmp(argv[1], "freeze") == 0)
		return cmd_freeze(argv[2]);
	if (argc == 3 && strcmp(argv[1], "kill") == 0)
		return cmd_kill(argv[2]);
	if (argc == 4 && strcmp(argv[1], "cut") == 0)
		return cmd_cut(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "cut-wait") == 0)
		return cmd_cut_wait(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "stats") == 0 && strcmp(argv[3], "--files") == 0)
		return cmd_stats(argv[2], true);
	usage();
	return 2;
}
