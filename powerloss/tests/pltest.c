/*-------------------------------------------------------------------------
 *
 * pltest.c
 *	  The scenarios of libpowerloss's tests, one program.
 *
 *	  pltest SCENARIO setup DIR    the baseline, without the preload
 *	  pltest SCENARIO run DIR      the writes and persists, under the preload
 *	  pltest SCENARIO verify DIR   DIR is what materialize made: exit 0 iff
 *	                               it holds exactly what was made durable
 *	  pltest list                  the scenario names
 *	  pltest bench DIR             the cost of a persist: 8 kB appended to a
 *	                               16 MB file then fdatasync() (WAL on file),
 *	                               and 8 kB stored then msync() (WAL on pmem),
 *	                               20,000 each; run with and without the
 *	                               preload to see what it adds
 *
 * "run" works from inside DIR with relative names, as PostgreSQL does in its
 * data directory.  run-tests.sh drives the phases (powerloss init between
 * setup and run, materialize between run and verify).
 *
 * powerloss/tests/pltest.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include "../include/powerloss.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int	failures;

static void
fail(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	printf("  not ok: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	failures++;
}

static void
xfail(const char *what)
{
	fprintf(stderr, "pltest: %s: %s\n", what, strerror(errno));
	exit(3);
}

/* write a whole file (setup) */
static void
put(const char *path, const char *content, size_t len)
{
	int			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, content, len) != (ssize_t) len || close(fd) != 0)
		xfail(path);
}

static void
put_fill(const char *path, int c, size_t len)
{
	char	   *b = malloc(len);

	memset(b, c, len);
	put(path, b, len);
	free(b);
}

/* the content of a file, NULL if absent; *len its size */
static char *
get(const char *path, size_t *len)
{
	struct stat sb;
	char	   *b;
	int			fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) != 0)
		xfail(path);
	b = calloc(1, (size_t) sb.st_size + 1);
	if (read(fd, b, (size_t) sb.st_size) != sb.st_size)
		xfail(path);
	close(fd);
	*len = (size_t) sb.st_size;
	return b;
}

static void
expect_content(const char *path, const char *want)
{
	size_t		len;
	char	   *b = get(path, &len);

	if (b == NULL)
		fail("%s absent, want \"%s\"", path, want);
	else if (len != strlen(want) || memcmp(b, want, len) != 0)
		fail("%s is \"%.*s\" (%zu bytes), want \"%s\"", path, (int) (len > 40 ? 40 : len),
			 b, len, want);
	free(b);
}

static void
expect_absent(const char *path)
{
	if (access(path, F_OK) == 0)
		fail("%s present, want absent", path);
}

/* bytes [off, off+n) of the file all equal c */
static void
expect_bytes(const char *path, size_t off, size_t n, int c)
{
	size_t		len;
	char	   *b = get(path, &len);

	if (b == NULL)
	{
		fail("%s absent", path);
		return;
	}
	if (off + n > len)
		fail("%s has %zu bytes, want at least %zu", path, len, off + n);
	else
		for (size_t i = off; i < off + n; i++)
			if (b[i] != (char) c)
			{
				fail("%s byte %zu is 0x%02x, want 0x%02x", path, i,
					 (unsigned char) b[i], (unsigned char) c);
				break;
			}
	free(b);
}

static int
xopen(const char *path, int flags)
{
	int			fd = open(path, flags, 0600);

	if (fd < 0)
		xfail(path);
	return fd;
}

static void
xwrite(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) != (ssize_t) strlen(s))
		xfail("write");
}

static void
xfsync_path(const char *path)
{
	int			fd = open(path, O_RDONLY);

	if (fd < 0 || fsync(fd) != 0)
		xfail(path);
	close(fd);
}

static void *
xmap(const char *path, size_t len)
{
	int			fd = xopen(path, O_RDWR);
	void	   *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		xfail("mmap");
	close(fd);
	return p;
}

/* ---- the scenarios: setup, run, verify ---- */

/* (a) a write without fsync is lost; a new file never persisted is absent */
static void
nofsync(int phase)
{
	if (phase == 0)
		put("f", "old", 3);
	else if (phase == 1)
	{
		int			fd = xopen("f", O_RDWR);

		if (pwrite(fd, "new", 3, 0) != 3)
			xfail("pwrite");
		close(fd);
		fd = xopen("g", O_WRONLY | O_CREAT);
		xwrite(fd, "data");
		close(fd);
	}
	else
	{
		expect_content("f", "old");
		expect_absent("g");
	}
}

/* (b) a new file fsynced, its directory not: absent */
static void
newfile_nodirsync(int phase)
{
	if (phase == 1)
	{
		int			fd = xopen("g", O_WRONLY | O_CREAT);

		xwrite(fd, "hello");
		if (fsync(fd) != 0)
			xfail("fsync");
		close(fd);
	}
	else if (phase == 2)
		expect_absent("g");
}

/* same run, materialized with --dirs newfile: fsync of a new file names it */
static void
newfile_hint(int phase)
{
	if (phase == 1)
		newfile_nodirsync(1);
	else if (phase == 2)
		expect_content("g", "hello");
}

/* (c) file and directory fsynced: present with its content */
static void
newfile_dirsync(int phase)
{
	if (phase == 1)
	{
		newfile_nodirsync(1);
		xfsync_path(".");
	}
	else if (phase == 2)
		expect_content("g", "hello");
}

/* the directory fsynced, not the file: present, empty */
static void
dirsync_only(int phase)
{
	if (phase == 1)
	{
		int			fd = xopen("g", O_WRONLY | O_CREAT);

		xwrite(fd, "hello");
		close(fd);
		xfsync_path(".");
	}
	else if (phase == 2)
		expect_content("g", "");
}

/* (d) durable_rename() without the directory fsync: the old name stays */
static void
rename_nodirsync(int phase)
{
	if (phase == 0)
		put("a", "A-old", 5);
	else if (phase == 1)
	{
		int			fd = xopen("a.tmp", O_WRONLY | O_CREAT);

		xwrite(fd, "A-new");
		if (fsync(fd) != 0)
			xfail("fsync");
		close(fd);
		if (rename("a.tmp", "a") != 0)
			xfail("rename");
	}
	else
	{
		expect_content("a", "A-old");
		expect_absent("a.tmp");
	}
}

/* durable_rename() complete: the new content under the old name */
static void
rename_dirsync(int phase)
{
	if (phase == 0)
		rename_nodirsync(0);
	else if (phase == 1)
	{
		rename_nodirsync(1);
		xfsync_path(".");
	}
	else
	{
		expect_content("a", "A-new");
		expect_absent("a.tmp");
	}
}

/*
 * (e) one process writes, another fsyncs through its own descriptor (the
 * checkpointer and the backends): durable; a write after the fsync is not.
 */
static void
twoproc(int phase)
{
	if (phase == 0)
		put_fill("f", 0, 256 * 1024);
	else if (phase == 1)
	{
		pid_t		pid = fork();
		int			status;
		int			fd;
		char		b[1000];

		if (pid == 0)
		{
			fd = xopen("f", O_WRONLY);
			memset(b, 'X', sizeof(b));
			if (pwrite(fd, b, sizeof(b), 100000) != sizeof(b))
				_exit(1);
			close(fd);
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid || status != 0)
			xfail("child");
		fd = xopen("f", O_RDONLY);
		if (fsync(fd) != 0)
			xfail("fsync");
		close(fd);
		fd = xopen("f", O_WRONLY);
		memset(b, 'Y', sizeof(b));
		if (pwrite(fd, b, sizeof(b), 200000) != sizeof(b))
			xfail("pwrite");
		close(fd);
	}
	else
	{
		expect_bytes("f", 100000, 1000, 'X');
		expect_bytes("f", 200000, 1000, 0);
	}
}

/* (f) msync of one page of a mapping: that page only */
static void
mmap_msync(int phase)
{
	if (phase == 0)
		put_fill("f", 0, 65536);
	else if (phase == 1)
	{
		char	   *p = xmap("f", 65536);

		memset(p, 'A', 4096);
		memset(p + 5 * 4096, 'B', 4096);
		if (msync(p, 4096, MS_SYNC) != 0)
			xfail("msync");
		munmap(p, 65536);
	}
	else
	{
		expect_bytes("f", 0, 4096, 'A');
		expect_bytes("f", 5 * 4096, 4096, 0);
	}
}

/* (g) the seam's hook after a cache-line persist: exactly that range */
static void
hook(int phase)
{
	if (phase == 0)
		put_fill("f", 0, 65536);
	else if (phase == 1)
	{
		pgnvm_powerloss_persisted_fn fn = (pgnvm_powerloss_persisted_fn)
			dlsym(RTLD_DEFAULT, PGNVM_POWERLOSS_PERSISTED);
		char	   *p = xmap("f", 65536);

		if (fn == NULL)
		{
			fprintf(stderr, "pltest: %s not found: is libpowerloss preloaded?\n",
					PGNVM_POWERLOSS_PERSISTED);
			exit(3);
		}
		memset(p + 128, 'H', 64);
		memset(p + 8192, 'U', 64);
		/* here the seam's persist_fn(p + 128, 64) would flush and fence */
		fn(p + 128, 64);
		munmap(p, 65536);
	}
	else
	{
		expect_bytes("f", 0, 128, 0);
		expect_bytes("f", 128, 64, 'H');
		expect_bytes("f", 192, 64, 0);
		expect_bytes("f", 8192, 64, 0);
	}
}

/*
 * (h) the harsh model: 256 cache lines stored, line 0 persisted.  verify
 * prints how many of the others survived (run-tests.sh compares seeds).
 */
static void
harsh(int phase)
{
	if (phase == 0)
		put_fill("f", 0, 65536);
	else if (phase == 1)
	{
		pgnvm_powerloss_persisted_fn fn = (pgnvm_powerloss_persisted_fn)
			dlsym(RTLD_DEFAULT, PGNVM_POWERLOSS_PERSISTED);
		char	   *p = xmap("f", 65536);

		if (fn == NULL)
			exit(3);
		for (int l = 0; l < 256; l++)
			memset(p + l * 64, 'a' + l % 26, 64);
		fn(p, 64);
		munmap(p, 65536);
	}
	else
	{
		size_t		len;
		char	   *b = get("f", &len);
		int			kept = 0;

		if (b == NULL || len != 65536)
		{
			fail("f absent or not 65536 bytes");
			return;
		}
		expect_bytes("f", 0, 64, 'a');
		for (int l = 1; l < 256; l++)
		{
			int			whole = 1;
			int			none = 1;

			for (int i = 0; i < 64; i++)
			{
				whole &= b[l * 64 + i] == 'a' + l % 26;
				none &= b[l * 64 + i] == 0;
			}
			if (!whole && !none)
				fail("line %d torn", l);
			kept += whole;
		}
		expect_bytes("f", 256 * 64, 65536 - 256 * 64, 0);
		printf("kept %d of 255 unpersisted lines\n", kept);
		if (kept == 0 || kept == 255)
			fail("harsh model kept %d of 255 lines: not a subset", kept);
		free(b);
	}
}

/* ftruncate then fsync: the durable size shrinks */
static void
truncate_fsync(int phase)
{
	if (phase == 0)
		put_fill("f", 'T', 131072);
	else if (phase == 1)
	{
		int			fd = xopen("f", O_RDWR);

		if (ftruncate(fd, 4096) != 0 || fsync(fd) != 0)
			xfail("ftruncate/fsync");
		close(fd);
	}
	else
	{
		size_t		len;
		char	   *b = get("f", &len);

		if (b == NULL || len != 4096)
			fail("f is %zu bytes, want 4096", b ? len : 0);
		free(b);
	}
}

/* a write through an O_DSYNC descriptor (wal_sync_method=open_datasync) */
static void
osync(int phase)
{
	if (phase == 1)
	{
		int			fd = xopen("g", O_WRONLY | O_CREAT | O_DSYNC);

		xwrite(fd, "sync");
		close(fd);
		xfsync_path(".");
	}
	else if (phase == 2)
		expect_content("g", "sync");
}

/* unlink: gone once the directory is fsynced, still there otherwise */
static void
unlink_dirs(int phase)
{
	if (phase == 0)
	{
		if (mkdir("d1", 0700) != 0 || mkdir("d2", 0700) != 0)
			xfail("mkdir");
		put("d1/a", "a", 1);
		put("d2/b", "b", 1);
	}
	else if (phase == 1)
	{
		if (unlink("d1/a") != 0 || unlink("d2/b") != 0)
			xfail("unlink");
		xfsync_path("d1");
	}
	else
	{
		expect_absent("d1/a");
		expect_content("d2/b", "b");
	}
}

/*
 * A name unlinked and created again (the inode number may be reused): the
 * durable name still means the old file, with the old bytes.
 */
static void
reuse(int phase)
{
	if (phase == 0)
		put("a", "AAAA", 4);
	else if (phase == 1)
	{
		int			fd;

		if (unlink("a") != 0)
			xfail("unlink");
		fd = xopen("a", O_WRONLY | O_CREAT);
		xwrite(fd, "BBBB");
		if (fsync(fd) != 0)
			xfail("fsync");
		close(fd);
	}
	else
		expect_content("a", "AAAA");
}

/* a new directory: its entries, then its name in the parent */
static void
newdir(int phase)
{
	if (phase == 1)
	{
		int			fd;

		if (mkdir("d", 0700) != 0)
			xfail("mkdir");
		fd = xopen("d/f", O_WRONLY | O_CREAT);
		xwrite(fd, "in d");
		if (fsync(fd) != 0)
			xfail("fsync");
		close(fd);
		xfsync_path("d");
		xfsync_path(".");
	}
	else if (phase == 2)
		expect_content("d/f", "in d");
}

/*
 * A cut at a chosen persist (POWERLOSS_CUT_AT=4, set by run-tests.sh): the
 * directory fsync is persist 1, a, b, c are 2, 3, 4; the process stops its
 * group before persisting c.
 */
static void
cutat(int phase)
{
	if (phase == 1)
	{
		const char *names[] = {"a", "b", "c"};
		int			fds[3];

		for (int i = 0; i < 3; i++)
		{
			fds[i] = xopen(names[i], O_RDWR | O_CREAT);
			xwrite(fds[i], names[i]);
		}
		xfsync_path(".");
		for (int i = 0; i < 3; i++)
			if (fsync(fds[i]) != 0)
				xfail("fsync");
		/* not reached with the cut: the harness kills us */
	}
	else if (phase == 2)
	{
		expect_content("a", "a");
		expect_content("b", "b");
		expect_content("c", "");
	}
}

/*
 * "powerloss freeze" across sessions: two children, each in its own session
 * (as PostgreSQL's backends, which call setsid()), write a counter to their
 * file, fsync it, then record the counter as acknowledged in a ledger
 * outside the root.  After the freeze no persist completes, so each durable
 * counter is at least the last one acknowledged.  The parent only waits.
 */
static void
freeze(int phase)
{
	if (phase == 1)
	{
		for (int k = 0; k < 2; k++)
		{
			if (fork() == 0)
			{
				char		name[16];
				char		ledger[32];
				char		buf[16];
				int			fd;
				int			lfd;

				setsid();
				snprintf(name, sizeof(name), "f%d", k);
				snprintf(ledger, sizeof(ledger), "../ledger%d", k);
				fd = xopen(name, O_RDWR | O_CREAT);
				lfd = xopen(ledger, O_RDWR | O_CREAT);
				xfsync_path(".");
				for (int i = 1;; i++)
				{
					snprintf(buf, sizeof(buf), "%08d", i);
					if (pwrite(fd, buf, 8, 0) != 8 || fsync(fd) != 0 ||
						pwrite(lfd, buf, 8, 0) != 8)
						_exit(1);
				}
			}
		}
		for (;;)
			pause();
	}
	else if (phase == 2)
	{
		for (int k = 0; k < 2; k++)
		{
			char		name[16];
			char		ledger[32];
			size_t		n1;
			size_t		n2;
			char	   *d;
			char	   *l;

			snprintf(name, sizeof(name), "f%d", k);
			snprintf(ledger, sizeof(ledger), "../ledger%d", k);
			d = get(name, &n1);
			l = get(ledger, &n2);
			if (l == NULL || n2 != 8)
				fail("%s: no acknowledgement recorded", ledger);
			else if (d == NULL || n1 != 8 || atoi(d) < atoi(l))
				fail("%s: durable %s, acknowledged %s", name, d ? d : "(absent)", l);
			else
				printf("%s: durable %d >= acknowledged %d\n", name, atoi(d), atoi(l));
			free(d);
			free(l);
		}
	}
}

typedef struct Scenario
{
	const char *name;
	void		(*fn) (int phase);
} Scenario;

static const Scenario scenarios[] = {
	{"nofsync", nofsync},
	{"newfile_nodirsync", newfile_nodirsync},
	{"newfile_hint", newfile_hint},
	{"newfile_dirsync", newfile_dirsync},
	{"dirsync_only", dirsync_only},
	{"rename_nodirsync", rename_nodirsync},
	{"rename_dirsync", rename_dirsync},
	{"twoproc", twoproc},
	{"mmap_msync", mmap_msync},
	{"hook", hook},
	{"harsh", harsh},
	{"truncate_fsync", truncate_fsync},
	{"osync", osync},
	{"unlink_dirs", unlink_dirs},
	{"reuse", reuse},
	{"newdir", newdir},
	{"cutat", cutat},
	{"freeze", freeze},
};

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* pltest bench DIR: microseconds per write+persist, two ways */
static int
bench(const char *dir)
{
	const size_t seg = 16 << 20;
	const int	n = 20000;
	char		blk[8192];
	int			fd;
	char	   *p;
	double		t0;

	if (chdir(dir) != 0)
		xfail(dir);
	put_fill("seg", 0, seg);
	memset(blk, 'w', sizeof(blk));
	fd = xopen("seg", O_RDWR);
	t0 = now_us();
	for (int i = 0; i < n; i++)
		if (pwrite(fd, blk, sizeof(blk), (off_t) ((i * sizeof(blk)) % seg)) != sizeof(blk) ||
			fdatasync(fd) != 0)
			xfail("pwrite/fdatasync");
	printf("pwrite 8 kB + fdatasync: %.2f us\n", (now_us() - t0) / n);
	p = mmap(NULL, seg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		xfail("mmap");
	t0 = now_us();
	for (int i = 0; i < n; i++)
	{
		char	   *at = p + (i * sizeof(blk)) % seg;

		memcpy(at, blk, sizeof(blk));
		if (msync(at, sizeof(blk), MS_SYNC) != 0)
			xfail("msync");
	}
	printf("store 8 kB + msync: %.2f us\n", (now_us() - t0) / n);
	munmap(p, seg);
	close(fd);
	return 0;
}

int
main(int argc, char **argv)
{
	static const char *phases[] = {"setup", "run", "verify"};

	if (argc == 3 && strcmp(argv[1], "bench") == 0)
		return bench(argv[2]);

	if (argc == 2 && strcmp(argv[1], "list") == 0)
	{
		for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
			printf("%s\n", scenarios[i].name);
		return 0;
	}
	if (argc != 4)
	{
		fprintf(stderr, "usage: pltest SCENARIO setup|run|verify DIR | pltest list\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
	{
		if (strcmp(scenarios[i].name, argv[1]) != 0)
			continue;
		for (int ph = 0; ph < 3; ph++)
		{
			if (strcmp(phases[ph], argv[2]) != 0)
				continue;
			if (chdir(argv[3]) != 0)
				xfail(argv[3]);
			scenarios[i].fn(ph);
			return failures ? 1 : 0;
		}
	}
	fprintf(stderr, "pltest: unknown scenario or phase\n");
	return 2;
}
