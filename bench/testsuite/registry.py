"""The checks of ``./pgnvm test``, in the order they run for each engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.testsuite.checks.amcheck import amcheck
from bench.testsuite.checks.crash import crash
from bench.testsuite.checks.differential import differential
from bench.testsuite.checks.enospc import enospc
from bench.testsuite.checks.pgsuites import isolation, regress
from bench.testsuite.checks.strace_check import strace
from bench.testsuite.checks.truncated import truncated
from bench.testsuite.context import EngineEnv

CheckFunc = Callable[[EngineEnv, float], str]


@dataclass(frozen=True)
class CheckDef:
    name: str
    func: CheckFunc
    limit: float  # seconds
    doc: str


ENGINE_CHECKS: tuple[CheckDef, ...] = (
    CheckDef("regress", regress, 15 * 60, "make installcheck-parallel (src/test/regress)"),
    CheckDef("isolation", isolation, 15 * 60, "make installcheck (src/test/isolation)"),
    CheckDef("amcheck", amcheck, 10 * 60, "pg_amcheck of the regression databases"),
    CheckDef("truncated", truncated, 5 * 60, "relation file truncated behind the server"),
    CheckDef("enospc", enospc, 5 * 60, "tablespace on a full tmpfs (root only)"),
    CheckDef("differential", differential, 15 * 60, "query digests identical to base"),
    CheckDef("strace", strace, 5 * 60, "no pread of relation files in a seq scan (se1+)"),
    CheckDef("crash", crash, 10 * 60, "kill -9 under load; acknowledged commits survive"),
)
#: Checks that run once, not per engine.
GLOBAL_CHECKS: tuple[str, ...] = ("pytest",)
#: tests/ holds end-to-end tests of other commands too (tpch builds the release flavour on a
#: fresh machine), hence the generous limit.
PYTEST_LIMIT = 30 * 60

ALL_NAMES: tuple[str, ...] = (*GLOBAL_CHECKS, *(c.name for c in ENGINE_CHECKS))


def select(only: list[str] | None) -> tuple[bool, list[CheckDef]]:
    """(run pytest?, engine checks) for ``--only`` names (None: everything)."""
    if not only:
        return True, list(ENGINE_CHECKS)
    unknown = [n for n in only if n not in ALL_NAMES]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(ALL_NAMES)}")
    return "pytest" in only, [c for c in ENGINE_CHECKS if c.name in only]
