/*-------------------------------------------------------------------------
 *
 * nvm_fault.c
 *	  pgnvm: the SIGBUS guard around accesses to mapped relation files.
 *
 * A load or store through a MAP_SHARED mapping of a file raises SIGBUS
 * where read() or write() would have returned an error: a load beyond the
 * end of the file (it was truncated behind the server's back), a store into
 * a hole the file system cannot fill (ENOSPC), a media error.  The server
 * must never die of that.  nvm_guarded() runs an access, unit by unit (a
 * unit is a block), with a SIGBUS handler armed for the address range the
 * access touches; a fault there makes the handler siglongjmp() back, and
 * nvm_guarded() returns the number of units completed before it.  The
 * callers hand the rest to md.c, whose read()/write() reports exactly the
 * error stock PostgreSQL reports.
 *
 * The handler is installed once per process, before its first mapping.  A
 * SIGBUS outside a guarded access, or at an address outside the guarded
 * range, is not ours: the handler restores the default action and the
 * process dies as it would have without it.
 *
 * The guard is per thread and not reentrant (the signal handler is not a
 * place that accesses mappings).  The backend's thread guards against
 * SIGBUS only.  Prefetch helper threads (nvm_prefetch.c) read the blocks
 * they verify through the mapping with nvm_helper_copy(), which also
 * catches SIGSEGV: the backend may unmap a range at any moment without
 * waiting for its helpers (docs/storage-engines.md, P2), so a helper's load
 * may meet an unmapped address.  The SIGSEGV handler is installed only in
 * processes that start helpers (nvm_fault_init_helpers()); any SIGSEGV that
 * is not a helper's guarded load gets the action the process had before, as
 * if the handler had never been there.
 *
 * Portions Copyright (c) 2026, pgnvm developers
 *
 * IDENTIFICATION
 *	  src/backend/storage/smgr/nvm_fault.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "port/atomics.h"
#include "storage/nvm_fault.h"

/*
 * The guarded access in progress in this thread: where it resumes on a
 * fault, the range of addresses it touches, and whether SIGSEGV there is
 * caught too (helper threads only).  Thread-local variables are safe to read
 * in a signal handler here only because this file is linked into the
 * executable (initial/local-exec TLS, no lazy allocation): it must not move
 * into a loadable module.
 */
static __thread sigjmp_buf *volatile nvm_fault_jmp = NULL;
static __thread const char *volatile nvm_fault_lo = NULL;
static __thread const char *volatile nvm_fault_hi = NULL;
static __thread volatile bool nvm_fault_segv = false;

/* our handler is SIGBUS's action in this process */
static volatile sig_atomic_t nvm_sigbus_installed = false;

/* ... and SIGSEGV's (processes with helpers), with the action it replaced */
static volatile sig_atomic_t nvm_sigsegv_installed = false;
static struct sigaction nvm_sigsegv_previous;

/* a helper found our handlers replaced (nvm_helper_guard_intact()) */
static volatile sig_atomic_t nvm_helper_guard_lost = false;

static size_t nvm_page_size = 0;

/*
 * nvm_sigbus_handler -- turn a fault inside the guarded range into a
 * siglongjmp() back into nvm_guarded().
 *
 * Any other SIGBUS is not ours: restore the default action and let the
 * faulting instruction run again, so the process dies exactly as it would
 * have without this handler.  A SIGBUS that is not the fault of the
 * instruction it interrupted -- sent with kill() or sigqueue() (si_code <=
 * 0), or the kernel's asynchronous report of poison found in a mapped page
 * nobody has touched yet (BUS_MCEERR_AO, with vm.memory_failure_early_kill)
 * -- would not come back when the handler returns: it is raised again, so
 * it kills as it does without the handler, wherever it lands (even at an
 * address a guarded access is reading: it is not that access's fault).
 */
static void
nvm_sigbus_handler(int signo, siginfo_t *info, void *context)
{
	const char *addr = (const char *) info->si_addr;
	bool		fault = info->si_code > 0 && info->si_code != BUS_MCEERR_AO;

	if (nvm_fault_jmp != NULL && fault &&
		addr >= nvm_fault_lo && addr < nvm_fault_hi)
		siglongjmp(*nvm_fault_jmp, 1);

	nvm_sigbus_installed = false;
	signal(SIGBUS, SIG_DFL);
	if (!fault)
		raise(SIGBUS);
}

/*
 * nvm_sigsegv_handler -- turn a fault inside a helper thread's guarded
 * range into a siglongjmp() back into nvm_helper_copy().
 *
 * Any other SIGSEGV is not ours: put back the action the process had before
 * nvm_fault_init_helpers() and let the faulting instruction run again (or
 * re-raise a SIGSEGV sent with kill()), so it meets that action exactly as
 * it would have without this handler.
 */
static void
nvm_sigsegv_handler(int signo, siginfo_t *info, void *context)
{
	const char *addr = (const char *) info->si_addr;

	if (nvm_fault_jmp != NULL && nvm_fault_segv && info->si_code > 0 &&
		addr >= nvm_fault_lo && addr < nvm_fault_hi)
		siglongjmp(*nvm_fault_jmp, 1);

	nvm_sigsegv_installed = false;
	sigaction(SIGSEGV, &nvm_sigsegv_previous, NULL);
	if (info->si_code <= 0)
		raise(SIGSEGV);
}

/*
 * nvm_fault_init -- install the handler in this process, once, before its
 * first mapping.
 *
 * SA_NODEFER keeps SIGBUS unblocked after siglongjmp() leaves the handler
 * (the guard uses sigsetjmp() without saving the signal mask, which would
 * cost a system call per access).
 */
void
nvm_fault_init(void)
{
	struct sigaction act;

	if (nvm_sigbus_installed)
		return;

	memset(&act, 0, sizeof(act));
	act.sa_sigaction = nvm_sigbus_handler;
	act.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&act.sa_mask);
	if (sigaction(SIGBUS, &act, NULL) != 0)
		elog(ERROR, "could not install SIGBUS handler: %m");
	nvm_sigbus_installed = true;

	if (nvm_page_size == 0)
	{
		long		sz = sysconf(_SC_PAGESIZE);

		nvm_page_size = sz > 0 ? (size_t) sz : 4096;
	}
}

/*
 * nvm_fault_init_helpers -- before this process starts prefetch helper
 * threads that read through mappings (nvm_helper_copy()): install the
 * SIGSEGV handler too, once.  Returns false (errno set) if it cannot be
 * installed; the helpers must then not load through a mapping.
 */
bool
nvm_fault_init_helpers(void)
{
	struct sigaction act;

	nvm_fault_init();
	if (nvm_sigsegv_installed)
		return true;
	memset(&act, 0, sizeof(act));
	act.sa_sigaction = nvm_sigsegv_handler;
	act.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&act.sa_mask);
	if (sigaction(SIGSEGV, &act, &nvm_sigsegv_previous) != 0)
		return false;
	nvm_sigsegv_installed = true;
	return true;
}

/*
 * nvm_helper_guard_intact -- in a prefetch helper thread, before it copies a
 * job's blocks: are SIGSEGV's and SIGBUS's actions still our handlers?  Code
 * loaded later may install its own (a crash reporter, a language runtime);
 * a helper's fault on a range the backend has just let go (an expected
 * event, P2) would then go to that handler and end the process.  If either
 * is not ours, says so to the backend (nvm_fault_helpers_lost()) and
 * returns false from then on: the helper must not load through the
 * mapping.  The two sigaction() reads are made at most once per
 * NVM_GUARD_CHECK_NS per helper (per job they cost the helper a sixth of
 * its time on index look-ahead jobs, and it fell behind the backend): a
 * handler installed later is noticed within that time, and a helper fault
 * in that window, or between the test and the copy, is not caught.
 */
#define NVM_GUARD_CHECK_NS	1000000 /* 1 ms */

bool
nvm_helper_guard_intact(void)
{
	static __thread uint64 checked_at = 0;
	struct sigaction cur;
	struct timespec now;
	uint64		now_ns;

	if (!nvm_sigsegv_installed || !nvm_sigbus_installed ||
		nvm_helper_guard_lost)
		return false;
	if (clock_gettime(CLOCK_MONOTONIC, &now) != 0)
		return false;
	now_ns = (uint64) now.tv_sec * 1000000000 + (uint64) now.tv_nsec;
	if (checked_at != 0 && now_ns - checked_at < NVM_GUARD_CHECK_NS)
		return true;
	if (sigaction(SIGSEGV, NULL, &cur) != 0 ||
		!(cur.sa_flags & SA_SIGINFO) ||
		cur.sa_sigaction != nvm_sigsegv_handler ||
		sigaction(SIGBUS, NULL, &cur) != 0 ||
		!(cur.sa_flags & SA_SIGINFO) ||
		cur.sa_sigaction != nvm_sigbus_handler)
	{
		nvm_helper_guard_lost = true;
		return false;
	}
	checked_at = now_ns;
	return true;
}

/*
 * nvm_fault_helpers_lost -- has a helper of this process found the fault
 * guard's handlers replaced (so that its helpers verify nothing)?
 */
bool
nvm_fault_helpers_lost(void)
{
	return nvm_helper_guard_lost;
}

/*
 * nvm_helper_copy -- in a prefetch helper thread: copy nblocks blocks from
 * the mapping at map into dst, stopping at a SIGBUS (file cut short) or a
 * SIGSEGV (range unmapped) at an address of the blocks.  Returns the number
 * of blocks copied whole.  Needs nvm_fault_init_helpers() to have succeeded
 * in the process (and nvm_helper_guard_intact() to say the handlers are
 * still ours).  The thread's SIGBUS and SIGSEGV are unblocked here, once
 * (libnvmprefetch starts helpers with every signal blocked, and a fault
 * whose signal is blocked kills the process); every other signal stays
 * blocked, so signals meant for the backend still reach only its thread
 * (a SIGBUS or SIGSEGV sent with kill() may land on a helper: it is not a
 * fault at a guarded address, so it ends the process, as it would anyway).
 * No allocation, no elog: it runs outside PostgreSQL's world.
 *
 * The compiler barriers keep the copy's loads inside the window in which
 * the guard is armed, and the count of a block after its copy.
 */
uint32
nvm_helper_copy(void *dst, const char *map, uint32 nblocks)
{
	static __thread bool unblocked = false;
	sigjmp_buf	jmp;
	volatile uint32 done = 0;

	if (!nvm_sigsegv_installed || !nvm_sigbus_installed)
		return 0;
	if (!unblocked)
	{
		sigset_t	faults;

		sigemptyset(&faults);
		sigaddset(&faults, SIGBUS);
		sigaddset(&faults, SIGSEGV);
		if (pthread_sigmask(SIG_UNBLOCK, &faults, NULL) != 0)
			return 0;
		unblocked = true;
	}

	if (sigsetjmp(jmp, 0) == 0)
	{
		nvm_fault_lo = map;
		nvm_fault_hi = map + (size_t) nblocks * BLCKSZ;
		nvm_fault_segv = true;
		nvm_fault_jmp = &jmp;
		pg_compiler_barrier();

		while (done < nblocks)
		{
			memcpy((char *) dst + (size_t) done * BLCKSZ,
				   map + (size_t) done * BLCKSZ, BLCKSZ);
			pg_compiler_barrier();
			done = done + 1;
		}
	}
	pg_compiler_barrier();
	nvm_fault_jmp = NULL;
	nvm_fault_segv = false;

	return done;
}

/*
 * nvm_os_page_size -- the operating system's page size (the granularity of
 * page faults); valid after nvm_fault_init().
 */
size_t
nvm_os_page_size(void)
{
	Assert(nvm_page_size != 0);
	return nvm_page_size;
}

/*
 * nvm_guarded -- run step(arg, i) for i = 0 .. nunits - 1, stopping at a
 * SIGBUS at an address in [lo, lo + len).  Returns the number of units
 * completed; a unit interrupted by the fault is not counted.
 *
 * step must only access memory inside the range through the mapping (a
 * fault elsewhere is not caught) and must not throw.
 */
uint32
nvm_guarded(const void *lo, size_t len, uint32 nunits,
			NvmGuardedStep step, void *arg)
{
	sigjmp_buf	jmp;
	volatile uint32 done = 0;

	nvm_fault_init();
	Assert(nvm_fault_jmp == NULL);

	if (sigsetjmp(jmp, 0) == 0)
	{
		nvm_fault_lo = (const char *) lo;
		nvm_fault_hi = (const char *) lo + len;
		nvm_fault_jmp = &jmp;
		pg_compiler_barrier();

		while (done < nunits)
		{
			step(arg, done);
			pg_compiler_barrier();
			done = done + 1;
		}
	}
	pg_compiler_barrier();
	nvm_fault_jmp = NULL;

	return done;
}

/* the arguments of the copy and touch steps */
typedef struct NvmBlockAccess
{
	char	   *map;			/* mapped address of the first block */
	void	  **buffers;		/* buffers[i]: the i-th block's buffer */
} NvmBlockAccess;

static void
step_copy_from(void *arg, uint32 i)
{
	NvmBlockAccess *a = (NvmBlockAccess *) arg;

	memcpy(a->buffers[i], a->map + (size_t) i * BLCKSZ, BLCKSZ);
}

static void
step_copy_to(void *arg, uint32 i)
{
	NvmBlockAccess *a = (NvmBlockAccess *) arg;

	memcpy(a->map + (size_t) i * BLCKSZ, a->buffers[i], BLCKSZ);
}

static void
step_touch(void *arg, uint32 i)
{
	NvmBlockAccess *a = (NvmBlockAccess *) arg;
	const volatile char *blk = a->map + (size_t) i * BLCKSZ;

	for (size_t off = 0; off < BLCKSZ; off += nvm_page_size)
		(void) blk[off];
}

/*
 * nvm_copy_from_mapping -- copy nblocks mapped blocks into buffers[].
 */
uint32
nvm_copy_from_mapping(void **buffers, const char *map, uint32 nblocks)
{
	NvmBlockAccess a = {(char *) map, buffers};

	return nvm_guarded(map, (size_t) nblocks * BLCKSZ, nblocks,
					   step_copy_from, &a);
}

/*
 * nvm_copy_to_mapping -- copy buffers[] into nblocks mapped blocks.
 */
uint32
nvm_copy_to_mapping(char *map, const void **buffers, uint32 nblocks)
{
	NvmBlockAccess a = {map, (void **) buffers};

	return nvm_guarded(map, (size_t) nblocks * BLCKSZ, nblocks,
					   step_copy_to, &a);
}

/*
 * nvm_touch_mapping -- fault in the pages of nblocks mapped blocks (one load
 * per OS page): afterwards they can be read without a page fault, as long
 * as the mapping and the file stay.
 */
uint32
nvm_touch_mapping(const char *map, uint32 nblocks)
{
	NvmBlockAccess a = {(char *) map, NULL};

	return nvm_guarded(map, (size_t) nblocks * BLCKSZ, nblocks,
					   step_touch, &a);
}
