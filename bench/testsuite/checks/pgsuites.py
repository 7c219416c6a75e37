"""regress, isolation and pgnvm_ext: pg_regress suites against the running test cluster
(PostgreSQL's own two, and contrib/pgnvm's regression test)."""

from __future__ import annotations

import re

from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

# pg_regress' closing lines: "# All 229 tests passed." / "# 3 of 229 tests failed."
_SUMMARY_RE = re.compile(r"^#?\s*(All \d+ tests passed\.|\d+ of \d+ tests failed\.)", re.MULTILINE)
_FAILED_TEST_RE = re.compile(r"^not ok \d+\s+[-+]\s+(\S+)", re.MULTILINE)


def _suite(env: EngineEnv, subdir: str, target: str, name: str, timeout: float) -> str:
    """``make <target>`` in ``subdir`` of the build tree (pg_regress against the cluster)."""
    tree = env.run.tree / subdir
    if not tree.is_dir():
        raise CheckFailed(f"no {tree}: is the check flavour built?")
    out = env.workdir / name
    # The server writes into outputdir/results (COPY TO), so it belongs to the server user;
    # pg_regress creates it (we run it as that user).
    ran = env.run_tool(
        ["make", "-s", "-C", str(tree), target, f"EXTRA_REGRESS_OPTS=--outputdir={out}"],
        timeout=timeout,
        log_name=f"{name}.log",
    )
    summary = _SUMMARY_RE.search(ran.output)
    diffs = out / "regression.diffs"
    if ran.returncode != 0 or summary is None or "failed" in summary.group(1):
        failed = _FAILED_TEST_RE.findall(ran.output)
        msg = summary.group(1) if summary else f"make {target} exited {ran.returncode}"
        if failed:
            msg += f" failed: {', '.join(failed[:20])}"
        artifacts = [str(env.save_artifact(env.workdir / f"{name}.log"))]
        if diffs.is_file() and diffs.stat().st_size:
            saved = env.save_artifact(diffs, f"{name}.regression.diffs")
            artifacts.insert(0, str(saved))
            msg += f"; diffs: {saved}"
        else:
            msg += f"\n{ran.tail(25)}"
        raise CheckFailed(msg, artifacts)
    return summary.group(1)


def regress(env: EngineEnv, limit: float) -> str:
    return _suite(env, "src/test/regress", "installcheck-parallel", "regress", limit)


def isolation(env: EngineEnv, limit: float) -> str:
    return _suite(env, "src/test/isolation", "installcheck", "isolation", limit)


def pgnvm_ext(env: EngineEnv, limit: float) -> str:
    """contrib/pgnvm's own test (the extension's functions in every engine)."""
    return _suite(env, "contrib/pgnvm", "installcheck", "pgnvm_ext", limit)
