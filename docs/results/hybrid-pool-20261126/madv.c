/* Which madvise() advice gives a page of PostgreSQL-style shared memory
 * (mmap MAP_SHARED|MAP_ANONYMOUS [|MAP_HUGETLB], as sysv_shmem.c makes it,
 * or a SysV segment: shared_memory_type = sysv) back to the OS?
 * usage: madv MB {dontneed|remove|free|pageout} {anon|huge|sysv} [step_kb]
 * The parent maps, forks a child, both touch every page; the parent then
 * advises `step_kb` out of every 2x step (half of the region, alternate
 * slots of one 8 kB page by default) in the parent only, then in the child
 * too, and prints Shmem/ShmemHugePages/HugePages_Free of /proc/meminfo and
 * both processes' RssShmem from /proc/<pid>/status at each step. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>

static long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r"); char line[256]; long v = -1;
	size_t n = strlen(key);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, n) && line[n] == ':') { v = atol(line + n + 1); break; }
	fclose(f); return v;
}
static long status(pid_t pid, const char *key)
{
	char p[64]; snprintf(p, sizeof p, "/proc/%d/status", pid);
	FILE *f = fopen(p, "r"); char line[256]; long v = -1; size_t n = strlen(key);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, n) && line[n] == ':') { v = atol(line + n + 1); break; }
	fclose(f); return v;
}
static void report(const char *what, pid_t parent, pid_t child)
{
	printf("%-34s Shmem %8ld kB  ShmemHuge %6ld kB  HugePages_Free %5ld  RssShmem parent %8ld kB child %8ld kB\n",
		   what, meminfo("Shmem"), meminfo("ShmemHugePages"), meminfo("HugePages_Free"),
		   status(parent, "RssShmem"), status(child, "RssShmem"));
	fflush(stdout);
}
static int advice_of(const char *s)
{
	if (!strcmp(s, "dontneed")) return MADV_DONTNEED;
	if (!strcmp(s, "remove")) return MADV_REMOVE;
	if (!strcmp(s, "free")) return MADV_FREE;
	if (!strcmp(s, "pageout")) return MADV_PAGEOUT;
	fprintf(stderr, "advice?\n"); exit(2);
}
static int advise_all(char *base, size_t size, size_t step, int adv)
{
	int fails = 0, err = 0;
	for (size_t off = 0; off + step <= size; off += 2 * step)
		if (madvise(base + off, step, adv) != 0) { fails++; err = errno; }
	if (fails) printf("    madvise failed %d times: %s\n", fails, strerror(err));
	return fails;
}

int main(int argc, char **argv)
{
	size_t mb = atol(argv[1]), size = mb << 20;
	int adv = advice_of(argv[2]);
	const char *kind = argv[3];
	size_t step = (argc > 4 ? atol(argv[4]) : 8) << 10;
	char *base; int shmid = -1; int p2c[2], c2p[2]; char ch;

	if (!strcmp(kind, "sysv")) {
		shmid = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
		if (shmid < 0) { perror("shmget"); return 1; }
		base = shmat(shmid, NULL, 0);
		shmctl(shmid, IPC_RMID, NULL);
	} else {
		int fl = MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE;
		if (!strcmp(kind, "huge")) fl |= MAP_HUGETLB;
		base = mmap(NULL, size, PROT_READ | PROT_WRITE, fl, -1, 0);
	}
	if (base == MAP_FAILED || base == (void *) -1) { perror("map"); return 1; }
	printf("%s, %zu MB, advice %s on %zu kB of every %zu kB\n", kind, mb, argv[2], step >> 10, (2 * step) >> 10);
	report("before touching", getpid(), getpid());
	pipe(p2c); pipe(c2p);
	pid_t child = fork();
	if (child == 0) {
		for (size_t off = 0; off < size; off += 4096) base[off] = 1;  /* fault in */
		write(c2p[1], "t", 1);
		read(p2c[0], &ch, 1);
		advise_all(base, size, step, adv);
		write(c2p[1], "a", 1);
		read(p2c[0], &ch, 1);
		/* touch again: are the advised bytes zero now (freed) or kept? */
		long zero = 0, kept = 0;
		for (size_t off = 0; off + step <= size; off += 2 * step) (base[off] ? kept++ : zero++);
		printf("    child rereads advised pages: %ld read 1 (kept), %ld read 0 (freed)\n", kept, zero); fflush(stdout);
		write(c2p[1], "r", 1);
		read(p2c[0], &ch, 1);
		_exit(0);
	}
	read(c2p[0], &ch, 1);
	for (size_t off = 0; off < size; off += 4096) base[off] = 1;
	report("both touched all", getpid(), child);
	advise_all(base, size, step, adv);
	report("parent advised half", getpid(), child);
	write(p2c[1], "g", 1); read(c2p[0], &ch, 1);
	report("child advised half too", getpid(), child);
	write(p2c[1], "g", 1); read(c2p[0], &ch, 1);
	report("child reread advised pages", getpid(), child);
	write(p2c[1], "g", 1); waitpid(child, NULL, 0);
	if (shmid >= 0) shmdt(base); else munmap(base, size);
	report("after unmap", getpid(), getpid());
	return 0;
}
