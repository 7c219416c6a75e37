/*-------------------------------------------------------------------------
 *
 * test_nvm_fault.c
 *	  pgnvm: unit test of the fault guard (nvm_fault.c).
 *
 * Prefetch helper threads verify the blocks they prefetch on a copy they
 * take through the mapping with nvm_helper_copy() (nvm_prefetch.c).  The
 * backend may unmap the range, and the file may be cut short, at any moment
 * while they do: the copy must then stop at the fault (SIGSEGV, SIGBUS)
 * and the process live on.  And the handlers must not swallow anything
 * else: a fault outside a guarded copy ends the process as it did before
 * (the previous SIGSEGV action runs, SIGBUS kills), and the backend's own
 * guard (nvm_guarded(), used for copies and fault-in) keeps catching
 * SIGBUS only.
 *
 * Each case runs in a child process (a failure that kills the process is
 * seen as such) with core dumps off; the helper-side cases run in a thread
 * created with every signal blocked, as libnvmprefetch creates its helpers.
 * Prints one line per case and "N passed, M failed"; exits 1 on a failure.
 *
 * The program links the backend's nvm_fault.o; the few backend functions
 * it refers to (elog, Assert) are stubs here that abort: none of them may
 * run in these cases.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/test/nvm_fault/test_nvm_fault.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/nvm_fault.h"

#define NBLOCKS		16
#define EXIT_PREVIOUS_HANDLER	42

/* backend functions nvm_fault.o refers to: none may be reached here */
void
ExceptionalCondition(const char *conditionName, const char *fileName,
					 int lineNumber)
{
	fprintf(stderr, "assertion failed: %s (%s:%d)\n", conditionName,
			fileName, lineNumber);
	abort();
}

bool
errstart_cold(int elevel, const char *domain)
{
	fprintf(stderr, "elog(%d) reached\n", elevel);
	abort();
}

int
errmsg_internal(const char *fmt,...)
{
	abort();
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	abort();
}

static char tmpdir[] = "/tmp/test_nvm_fault.XXXXXX";
static int	npassed = 0;
static int	nfailed = 0;

/* a file of NBLOCKS blocks, block i filled with byte i + 1, mapped read-only */
static char *
map_file(int *fd_out)
{
	char		path[sizeof(tmpdir) + 16];
	char		block[BLCKSZ];
	int			fd;
	char	   *map;

	snprintf(path, sizeof(path), "%s/f%d", tmpdir, (int) getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		_exit(90);
	unlink(path);
	for (int i = 0; i < NBLOCKS; i++)
	{
		memset(block, i + 1, BLCKSZ);
		if (write(fd, block, BLCKSZ) != BLCKSZ)
			_exit(91);
	}
	map = mmap(NULL, (size_t) NBLOCKS * BLCKSZ, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		_exit(92);
	*fd_out = fd;
	return map;
}

/* blocks [0, n) of dst hold what map_file() wrote */
static bool
copied_right(const char *dst, uint32 n)
{
	for (uint32 i = 0; i < n; i++)
		for (int off = 0; off < BLCKSZ; off += 512)
			if (dst[(size_t) i * BLCKSZ + off] != (char) (i + 1))
				return false;
	return true;
}

/* run fn in a thread born with every signal blocked (as a helper) */
static void *
in_helper_thread(void *(*fn) (void *))
{
	pthread_t	t;
	pthread_attr_t attr;
	sigset_t	all,
				old;
	void	   *ret = NULL;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 1024 * 1024);
	if (pthread_create(&t, &attr, fn, NULL) != 0)
		_exit(93);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_join(t, &ret);
	return ret;
}

static char copybuf[NBLOCKS * BLCKSZ];

/* helper: the whole mapping is copied */
static void *
helper_copy_all(void *arg)
{
	int			fd;
	char	   *map = map_file(&fd);
	uint32		n = nvm_helper_copy(copybuf, map, NBLOCKS);
	sigset_t	cur;
	bool		mask_ok;

	/* only the two synchronous signals were unblocked */
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	mask_ok = !sigismember(&cur, SIGBUS) && !sigismember(&cur, SIGSEGV) &&
		sigismember(&cur, SIGINT) && sigismember(&cur, SIGTERM) &&
		sigismember(&cur, SIGUSR1) && sigismember(&cur, SIGQUIT) &&
		sigismember(&cur, SIGALRM);
	return (void *) (uintptr_t) (n == NBLOCKS && copied_right(copybuf, n) &&
								 mask_ok);
}

/*
 * helper: the file is cut at the first OS page boundary past the middle of
 * block 5 (with 4 kB pages: in block 5, so 5 blocks are whole; with 64 kB
 * pages: after block 7): the blocks before the cut, then the same again
 */
static void *
helper_copy_truncated(void *arg)
{
	int			fd;
	char	   *map = map_file(&fd);
	size_t		ps = (size_t) sysconf(_SC_PAGESIZE);
	size_t		cut = (5 * BLCKSZ + BLCKSZ / 2 + ps - 1) / ps * ps;
	uint32		whole = (uint32) (cut / BLCKSZ);
	uint32		n1,
				n2,
				n3;

	if (whole >= NBLOCKS || ftruncate(fd, (off_t) cut) != 0)
		return NULL;
	n1 = nvm_helper_copy(copybuf, map, NBLOCKS);
	n2 = nvm_helper_copy(copybuf, map, NBLOCKS);	/* the guard re-arms */
	n3 = nvm_helper_copy(copybuf, map, 4);	/* and copies what is there */
	return (void *) (uintptr_t) (n1 == whole && n2 == whole && n3 == 4 &&
								 copied_right(copybuf, 4));
}

/* helper: blocks 3.. are unmapped: 3 blocks, and then a fully unmapped range */
static void *
helper_copy_unmapped(void *arg)
{
	int			fd;
	char	   *map = map_file(&fd);
	uint32		n1,
				n2,
				n3;

	if (munmap(map + 3 * BLCKSZ, (size_t) (NBLOCKS - 3) * BLCKSZ) != 0)
		return NULL;
	n1 = nvm_helper_copy(copybuf, map, NBLOCKS);
	n2 = nvm_helper_copy(copybuf, map + 8 * BLCKSZ, 2);
	n3 = nvm_helper_copy(copybuf, map, 3);
	return (void *) (uintptr_t) (n1 == 3 && n2 == 0 && n3 == 3 &&
								 copied_right(copybuf, 3));
}

/* helper: a fault outside any guarded copy (a wild pointer) */
static void *
helper_wild_load(void *arg)
{
	int			fd;
	char	   *map = map_file(&fd);

	munmap(map, (size_t) NBLOCKS * BLCKSZ);
	(void) nvm_helper_copy(copybuf, map, 0);	/* unblocks the faults */
	return (void *) (uintptr_t) *(volatile char *) map;
}

static void
previous_segv_handler(int signo)
{
	_exit(EXIT_PREVIOUS_HANDLER);
}

/*
 * Run one case in a child; expect exit status 0 (expect_signal 0) or death
 * by expect_signal, or exit status expect_exit.
 */
static void
run_case(const char *name, void (*body) (void), int expect_signal,
		 int expect_exit)
{
	pid_t		pid;
	int			status;
	bool		ok;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
	{
		struct rlimit nocore = {0, 0};

		setrlimit(RLIMIT_CORE, &nocore);
		body();
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
	{
		printf("FAIL %s: could not run\n", name);
		nfailed++;
		return;
	}
	if (expect_signal != 0)
		ok = WIFSIGNALED(status) && WTERMSIG(status) == expect_signal;
	else
		ok = WIFEXITED(status) && WEXITSTATUS(status) == expect_exit;
	if (ok)
		npassed++;
	else
		nfailed++;
	if (WIFSIGNALED(status))
		printf("%s %s: killed by signal %d\n", ok ? "ok  " : "FAIL", name,
			   WTERMSIG(status));
	else
		printf("%s %s: exit status %d\n", ok ? "ok  " : "FAIL", name,
			   WEXITSTATUS(status));
}

static void
expect_helper(void *(*fn) (void *))
{
	if (!nvm_fault_init_helpers())
		_exit(2);
	_exit(in_helper_thread(fn) != NULL ? 0 : 1);
}

static void
case_copy_all(void)
{
	expect_helper(helper_copy_all);
}

static void
case_copy_truncated(void)
{
	expect_helper(helper_copy_truncated);
}

static void
case_copy_unmapped(void)
{
	expect_helper(helper_copy_unmapped);
}

/* without the helpers' handler, a helper's copy copies nothing (no load) */
static void
case_copy_without_handler(void)
{
	int			fd;
	char	   *map = map_file(&fd);

	nvm_fault_init();
	_exit(nvm_helper_copy(copybuf, map, NBLOCKS) == 0 ? 0 : 1);
}

/* a wild load in a helper thread: must not return */
static void
wild_load_in_helper(void)
{
	if (!nvm_fault_init_helpers())
		_exit(2);
	(void) in_helper_thread(helper_wild_load);
	_exit(3);
}

/* a wild SIGSEGV in a helper meets the action the process had before */
static void
case_wild_segv_previous(void)
{
	signal(SIGSEGV, previous_segv_handler);
	wild_load_in_helper();
}

/* ... which by default ends the process with SIGSEGV */
static void
case_wild_segv_default(void)
{
	wild_load_in_helper();
}

/* a SIGSEGV sent with kill() is not caught either */
static void
case_sent_segv(void)
{
	if (!nvm_fault_init_helpers())
		_exit(2);
	kill(getpid(), SIGSEGV);
	_exit(3);
}

/*
 * The backend's guard (nvm_copy_from_mapping(), in a process that has the
 * helpers' handler too) after cut() changed the mapped file: returns the
 * blocks copied, if it returns.
 */
static uint32
backend_copy_after(void (*cut) (int fd, char *map))
{
	int			fd;
	char	   *map = map_file(&fd);
	void	   *bufs[NBLOCKS];

	if (!nvm_fault_init_helpers())
		_exit(2);
	for (int i = 0; i < NBLOCKS; i++)
		bufs[i] = copybuf + (size_t) i * BLCKSZ;
	cut(fd, map);
	return nvm_copy_from_mapping(bufs, map, NBLOCKS);
}

static void
cut_to_7_blocks(int fd, char *map)
{
	if (ftruncate(fd, 7 * BLCKSZ) != 0)
		_exit(4);
}

static void
unmap_all(int fd, char *map)
{
	munmap(map, (size_t) NBLOCKS * BLCKSZ);
}

/* the backend's guard: SIGBUS beyond the end of the file is caught */
static void
case_backend_sigbus(void)
{
	_exit(backend_copy_after(cut_to_7_blocks) == 7 &&
		  copied_right(copybuf, 7) ? 0 : 1);
}

/* ... but not SIGSEGV: an unmapped range there is a bug, not an I/O error */
static void
case_backend_segv(void)
{
	(void) backend_copy_after(unmap_all);
	_exit(3);
}

/* a SIGBUS outside any guard ends the process with SIGBUS */
static void
case_wild_sigbus(void)
{
	int			fd;
	char	   *map = map_file(&fd);

	if (!nvm_fault_init_helpers())
		_exit(2);
	if (ftruncate(fd, 0) != 0)
		_exit(4);
	_exit(*(volatile char *) map);
}

/* a helper copying in a loop, its thread id published for signals */
static volatile pid_t looping_tid = 0;
static char *volatile looping_map = NULL;

static void *
helper_copy_loop(void *arg)
{
	int			fd;
	char	   *map = map_file(&fd);

	looping_map = map;
	looping_tid = (pid_t) syscall(SYS_gettid);
	for (;;)
		(void) nvm_helper_copy(copybuf, map, NBLOCKS);
	return NULL;
}

/*
 * A SIGSEGV that is not a fault -- queued with sigqueue semantics (si_code
 * SI_QUEUE) and an si_addr inside the range -- reaches a helper while its
 * guard is armed: it must end the process, not be taken for a fault.
 */
static void
case_queued_segv_armed(void)
{
	pthread_t	t;
	sigset_t	all,
				old;
	siginfo_t	info;

	if (!nvm_fault_init_helpers())
		_exit(2);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, helper_copy_loop, NULL) != 0)
		_exit(93);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	while (looping_tid == 0)
		usleep(1000);
	usleep(20000);
	memset(&info, 0, sizeof(info));
	info.si_signo = SIGSEGV;
	info.si_code = SI_QUEUE;
	info.si_addr = looping_map + BLCKSZ;
	if (syscall(SYS_rt_tgsigqueueinfo, getpid(), looping_tid, SIGSEGV,
				&info) != 0)
		_exit(4);
	sleep(2);
	_exit(5);					/* survived: the signal was swallowed */
}

/*
 * An asynchronous memory-error report (si_code BUS_MCEERR_AO: the kernel
 * found poison in a page the process maps, nobody has touched it yet; sent
 * when vm.memory_failure_early_kill is set) is not a fault of the access in
 * progress: wherever it lands, the process must die of it, as it does
 * without the handler -- not return to where it was interrupted (the
 * default action is gone then, and a later fault outside a guard would be
 * missed), nor be taken for a fault of a guarded copy whose range holds
 * its address.  Queued as the kernel would, with sigqueue to the calling
 * thread (the only target a positive si_code may be sent to from user
 * space).
 */
static void
queue_mceerr_ao(pid_t tid, void *addr)
{
	siginfo_t	info;

	memset(&info, 0, sizeof(info));
	info.si_signo = SIGBUS;
	info.si_code = BUS_MCEERR_AO;
	info.si_addr = addr;
	if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGBUS, &info) != 0)
		_exit(4);
}

/* ... to the backend's thread, outside any guard */
static void
case_mceerr_ao_unguarded(void)
{
	int			fd;
	char	   *map = map_file(&fd);

	if (!nvm_fault_init_helpers())
		_exit(2);
	queue_mceerr_ao((pid_t) syscall(SYS_gettid), map);
	sleep(2);
	_exit(5);					/* survived: the report was swallowed */
}

/*
 * ... in a helper thread, between two copies (the kernel accepts a positive
 * si_code only from the thread it is sent to, so a report that lands while
 * a helper's guard is armed cannot be made here; the handler tells it from
 * a fault by its si_code, not by where it lands)
 */
static void *
helper_mceerr_ao(void *arg)
{
	int			fd;
	char	   *map = map_file(&fd);

	if (nvm_helper_copy(copybuf, map, NBLOCKS) != NBLOCKS)
		_exit(6);
	queue_mceerr_ao((pid_t) syscall(SYS_gettid), map + BLCKSZ);
	sleep(2);
	(void) nvm_helper_copy(copybuf, map, NBLOCKS);
	return NULL;
}

static void
case_mceerr_ao_helper(void)
{
	if (!nvm_fault_init_helpers())
		_exit(2);
	(void) in_helper_thread(helper_mceerr_ao);
	_exit(5);					/* survived: the report was swallowed */
}

/*
 * Two guards at once (the guard state is per thread): a helper copies
 * ranges that fault (unmapped, then cut short) in a loop while the main
 * thread copies a valid mapping with the backend's guard; both must live
 * and count right.
 */
static volatile int two_guards_stop = 0;
static volatile int two_guards_wrong = 0;

static void *
helper_faulting_loop(void *arg)
{
	int			fd1,
				fd2;
	char	   *gone = map_file(&fd1);
	char	   *cut = map_file(&fd2);
	static char buf[NBLOCKS * BLCKSZ];

	munmap(gone, (size_t) NBLOCKS * BLCKSZ);
	if (ftruncate(fd2, 0) != 0)
		two_guards_wrong = 1;
	while (!two_guards_stop)
	{
		if (nvm_helper_copy(buf, gone, NBLOCKS) != 0 ||
			nvm_helper_copy(buf, cut, NBLOCKS) != 0)
			two_guards_wrong = 1;
	}
	return NULL;
}

static void
case_two_guards(void)
{
	pthread_t	t;
	sigset_t	all,
				old;
	int			fd;
	char	   *map = map_file(&fd);
	static char own[NBLOCKS * BLCKSZ];
	void	   *bufs[NBLOCKS];

	if (!nvm_fault_init_helpers())
		_exit(2);
	for (int i = 0; i < NBLOCKS; i++)
		bufs[i] = own + (size_t) i * BLCKSZ;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, helper_faulting_loop, NULL) != 0)
		_exit(93);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (int i = 0; i < 20000; i++)
	{
		memset(own, 0, sizeof(own));
		if (nvm_copy_from_mapping(bufs, map, NBLOCKS) != NBLOCKS ||
			!copied_right(own, NBLOCKS))
			_exit(6);
	}
	two_guards_stop = 1;
	pthread_join(t, NULL);
	_exit(two_guards_wrong ? 7 : 0);
}

/* a handler installed later (a crash reporter): the helpers must notice */
static void
case_handler_replaced(void)
{
	bool		before;

	if (!nvm_fault_init_helpers())
		_exit(2);
	before = nvm_helper_guard_intact() && !nvm_fault_helpers_lost();
	signal(SIGSEGV, previous_segv_handler);
	usleep(5000);				/* a helper looks at most once per ms */
	_exit(before && !nvm_helper_guard_intact() &&
		  nvm_fault_helpers_lost() ? 0 : 1);
}

int
main(void)
{
	if (mkdtemp(tmpdir) == NULL)
	{
		perror("mkdtemp");
		return 1;
	}
	run_case("helper copy, whole mapping", case_copy_all, 0, 0);
	run_case("helper copy, file cut short (SIGBUS caught)",
			 case_copy_truncated, 0, 0);
	run_case("helper copy, range unmapped (SIGSEGV caught)",
			 case_copy_unmapped, 0, 0);
	run_case("helper copy without the helpers' handler copies nothing",
			 case_copy_without_handler, 0, 0);
	run_case("wild SIGSEGV in a helper: previous handler runs",
			 case_wild_segv_previous, 0, EXIT_PREVIOUS_HANDLER);
	run_case("wild SIGSEGV in a helper: process dies of it",
			 case_wild_segv_default, SIGSEGV, 0);
	run_case("SIGSEGV sent with kill(): process dies of it",
			 case_sent_segv, SIGSEGV, 0);
	run_case("SIGSEGV queued to a helper inside its guard: process dies of it",
			 case_queued_segv_armed, SIGSEGV, 0);
	run_case("a helper's and the backend's guard at once, per thread",
			 case_two_guards, 0, 0);
	run_case("a SIGSEGV handler installed later: the helpers notice",
			 case_handler_replaced, 0, 0);
	run_case("backend guard: SIGBUS beyond the end of the file caught",
			 case_backend_sigbus, 0, 0);
	run_case("backend guard: SIGSEGV not caught", case_backend_segv,
			 SIGSEGV, 0);
	run_case("SIGBUS outside any guard: process dies of it",
			 case_wild_sigbus, SIGBUS, 0);
	run_case("asynchronous memory error (BUS_MCEERR_AO) outside a guard: process dies of it",
			 case_mceerr_ao_unguarded, SIGBUS, 0);
	run_case("asynchronous memory error (BUS_MCEERR_AO) in a helper between copies: process dies of it",
			 case_mceerr_ao_helper, SIGBUS, 0);
	rmdir(tmpdir);
	printf("%d passed, %d failed\n", npassed, nfailed);
	return nfailed == 0 ? 0 : 1;
}
