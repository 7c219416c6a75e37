/* Cost of giving an 8 kB slot back (madvise MADV_REMOVE) and of taking it again
 * (first write: two 4 kB shmem faults, zero-filled, then an 8 kB memcpy), on a
 * MAP_SHARED|MAP_ANONYMOUS region mapped and touched by `procs` processes.
 * usage: madvtime MB procs */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv)
{
	size_t size = (size_t) atol(argv[1]) << 20; int procs = atoi(argv[2]);
	char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	static char src[8192]; memset(src, 7, sizeof src);
	int go[2]; pipe(go); pid_t kids[64];
	for (size_t o = 0; o < size; o += 4096) base[o] = 1;
	for (int i = 1; i < procs; i++) {
		if ((kids[i] = fork()) == 0) {
			volatile long s = 0; char c;
			for (size_t o = 0; o < size; o += 4096) s += base[o];  /* map it here too */
			close(go[1]); read(go[0], &c, 1); _exit(0);
		}
	}
	sleep(1);
	size_t n = size / 8192;
	double t0 = now();
	for (size_t i = 0; i < n; i++) madvise(base + i * 8192, 8192, MADV_REMOVE);
	double t1 = now();
	for (size_t i = 0; i < n; i++) memcpy(base + i * 8192, src, 8192);
	double t2 = now();
	for (size_t i = 0; i < n; i++) memcpy(base + i * 8192, src, 8192);
	double t3 = now();
	printf("%d process(es) mapping %zu MB: MADV_REMOVE %.2f us per 8 kB; first copy into a freed slot %.2f us; copy into a resident slot %.2f us\n",
		   procs, size >> 20, (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, (t3 - t2) / n * 1e6);
	close(go[1]); for (int i = 1; i < procs; i++) waitpid(kids[i], NULL, 0);
	return 0;
}
