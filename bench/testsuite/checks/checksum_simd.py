"""checksum_simd: the page checksum's variants (scalar, AVX2, AVX-512: patch 0011,
``src/port/pg_checksum_simd.c``), run once, in the check flavour's tree, as the server's OS
user (initdb refuses root)::

    make -s -C <tree>/src/test/checksum_simd                 the test and benchmark programs
    make -s -C <tree>/src/test/checksum_simd unitcheck UNIT_OPTS='--seed <run seed>'
    make -s -C <tree>/src/test/checksum_simd installcheck    (TAP, t/001_cross_check.pl)

``unitcheck`` compares every variant the CPU runs with upstream's algorithm on random and
edge-case pages and prints ``N passed, M failed``; ``installcheck`` writes a cluster with each
variant (``PGNVM_CHECKSUM_IMPL``) and checks it with every other one (``pg_checksums
--check``, a server with se2 verifying in place), and tests the variable's handling.

Passes iff every make exits 0, the unit test reports 0 failed and prove ``Result: PASS``.
The logs (and the TAP suite's ``regress_log``) are kept in the results directory on failure.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from bench.testsuite import proc
from bench.testsuite.checks.prefetch_check import summary
from bench.testsuite.context import RunState
from bench.testsuite.model import CheckFailed

SUBDIR = "src/test/checksum_simd"

_VARIANTS_RE = re.compile(r"^variants:((?: \w+)+)\s*$", re.MULTILINE)
_SEED_RE = re.compile(r"^seed (\d+),", re.MULTILINE)
_PROVE_TESTS_RE = re.compile(r"^Files=(\d+), Tests=(\d+)", re.MULTILINE)
_PROVE_RESULT_RE = re.compile(r"^Result: (\w+)", re.MULTILINE)


def unit_detail(output: str) -> str | None:
    """``N passed, M failed (seed S; variants a b c)`` from the unit test's output, or None
    without its summary line."""
    line = summary(output)
    if line is None:
        return None
    extra = []
    if m := _SEED_RE.search(output):
        extra.append(f"seed {m.group(1)}")
    if m := _VARIANTS_RE.search(output):
        extra.append(f"variants{m.group(1)}")
    return line + (f" ({'; '.join(extra)})" if extra else "")


def prove_detail(output: str) -> str | None:
    """``N tests in F files`` if prove's last result is PASS, else None."""
    results = _PROVE_RESULT_RE.findall(output)
    counts = _PROVE_TESTS_RE.findall(output)
    if not results or results[-1] != "PASS" or not counts:
        return None
    files, tests = counts[-1]
    return f"{tests} tests in {files} file(s) passed"


def _fail(message: str, ran: proc.Ran, logs: list[Path], artifacts: Path) -> CheckFailed:
    artifacts.mkdir(parents=True, exist_ok=True)
    saved = []
    for log in logs:
        if log.is_file():
            dst = artifacts / f"checksum_simd.{log.name}"
            shutil.copyfile(log, dst)
            saved.append(str(dst))
    return CheckFailed(f"{message} (logs: {', '.join(saved)})\n{ran.tail(30)}", saved)


def checksum_simd_check(run: RunState, limit: float) -> str:
    tree = run.tree / SUBDIR
    if not tree.is_dir():
        raise CheckFailed(f"no {tree}: is the check flavour built (postgres/src overlay)?")
    make = ["make", "-s", "-C", str(tree)]
    steps = (
        ("build", [*make], None),
        ("unit", [*make, "unitcheck", f"UNIT_OPTS=--seed {run.seed}"], unit_detail),
        ("tap", [*make, "installcheck"], prove_detail),
    )
    tap_log = tree / "tmp_check" / "log" / "regress_log_001_cross_check"
    parts = []
    # its TAP clusters reserve ports where the other lanes' TAP suites do
    env = {"PG_TEST_PORT_DIR": str(run.tap_port_dir())}
    for name, cmd, detail in steps:
        log = run.work_root / f"checksum_simd-{name}.log"
        ran = proc.run(cmd, env=env, timeout=limit, log=log, as_server=True)
        line = detail(ran.output) if detail else ""
        # the programs exit non-zero on a failure; no summary line is one too
        if ran.returncode != 0 or line is None:
            what = f"{' '.join(cmd)} exited {ran.returncode}"
            raise _fail(what, ran, [log, tap_log], run.results_dir)
        if line:
            parts.append(f"{name}: {line}")
    return "; ".join(parts)
