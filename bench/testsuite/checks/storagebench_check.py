"""storagebench: the storage microbenchmark's own tests (storagebench/tests: every I/O path
reads back what it wrote, the libpmem2 and libpmemlog logs survive reopening with every
entry in order, the new/recycled log files, the command line's refusals and its JSON
document), run once from the repository root, built where ``./pgnvm micro storage`` builds:

    make -s -C storagebench B=$PGNVM_HOME/storagebench test

Passes iff make exits 0; its closing ``N passed, M failed`` is the detail (log kept in the
results directory on failure).
"""

from __future__ import annotations

from pathlib import Path

from bench.core import paths
from bench.testsuite.checks.prefetch_check import make_steps

STEPS: tuple[tuple[str, str | None], ...] = (("test", "test"),)


def storagebench_check(workdir: Path, limit: float, artifacts: Path) -> str:
    build = f"B={paths.pgnvm_home() / 'storagebench'}"
    return make_steps("storagebench", STEPS, workdir, limit, artifacts, (build,))
