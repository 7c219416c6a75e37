"""fault_guard: the fault guard around loads through mapped relation files
(``src/backend/storage/smgr/nvm_fault.c``), run once, in the check flavour's tree, as the
server's OS user::

    make -s -C <tree>/src/test/nvm_fault unitcheck

The unit test (``test_nvm_fault.c``, linking the backend's ``nvm_fault.o``) runs each case in
a child process: a prefetch helper thread's guarded copy stops at a file cut short (SIGBUS)
and at a range unmapped under it (SIGSEGV) and the process lives on; every other fault still
ends the process as before (a wild SIGSEGV meets the previous action, a SIGSEGV sent with
kill(), a SIGBUS outside any guard and an asynchronous memory-error report (BUS_MCEERR_AO)
kill), and the backend's own guard catches SIGBUS only.

Passes iff make exits 0 and the test reports ``N passed, 0 failed``; its log is kept in the
results directory on failure.
"""

from __future__ import annotations

import shutil

from bench.testsuite import proc
from bench.testsuite.checks.prefetch_check import summary
from bench.testsuite.context import RunState
from bench.testsuite.model import CheckFailed

SUBDIR = "src/test/nvm_fault"


def fault_guard_check(run: RunState, limit: float) -> str:
    tree = run.tree / SUBDIR
    if not tree.is_dir():
        raise CheckFailed(f"no {tree}: is the check flavour built (postgres/src overlay)?")
    cmd = ["make", "-s", "-C", str(tree), "unitcheck"]
    log = run.work_root / "fault_guard.log"
    ran = proc.run(cmd, timeout=limit, log=log, as_server=True)
    line = summary(ran.output)
    if ran.returncode != 0 or line is None or not line.endswith(" 0 failed"):
        run.results_dir.mkdir(parents=True, exist_ok=True)
        dst = run.results_dir / "fault_guard.log"
        if log.is_file():
            shutil.copyfile(log, dst)
        raise CheckFailed(
            f"{' '.join(cmd)} exited {ran.returncode} (log: {dst})\n{ran.tail(30)}", [str(dst)]
        )
    return line
