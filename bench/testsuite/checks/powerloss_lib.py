"""powerloss_lib: the power-loss simulation library's own tests (powerloss/tests: each
scenario under the preload, materialized and verified; each persist kind dropped with
``POWERLOSS_BREAK`` must make the scenarios that rely on it fail), run once from the
repository root, built where the ``powerloss`` check takes it from:

    make -s -C powerloss B=$PGNVM_HOME/powerloss && make -s -C powerloss B=... check

Passes iff make exits 0; its closing ``N passed, M failed`` is the detail (log kept in the
results directory on failure).
"""

from __future__ import annotations

from pathlib import Path

from bench.testsuite import powerloss
from bench.testsuite.checks.prefetch_check import make_steps

STEPS: tuple[tuple[str, str | None], ...] = (("build", None), ("check", "check"))


def powerloss_lib_check(workdir: Path, limit: float, artifacts: Path) -> str:
    with powerloss.BuildLock():
        return make_steps("powerloss", STEPS, workdir, limit, artifacts, powerloss.make_args())
