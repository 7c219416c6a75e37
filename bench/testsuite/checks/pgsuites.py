"""regress, isolation and pgnvm_ext: pg_regress suites against the running test cluster
(PostgreSQL's own two, and contrib/pgnvm's regression test); tap_recovery: PostgreSQL's
recovery TAP suite with the engine in every cluster it creates."""

from __future__ import annotations

import re

from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed, CheckSkipped

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


# prove's closing lines: "Files=50, Tests=477, 230 wallclock secs ..." / "Result: PASS"
_PROVE_FILES_RE = re.compile(r"^Files=(\d+), Tests=(\d+)", re.MULTILINE)
_PROVE_RESULT_RE = re.compile(r"^Result: (\w+)", re.MULTILINE)
_PROVE_FAILED_RE = re.compile(r"^(t/\S+\.pl)\s+\(Wstat", re.MULTILINE)
_PROVE_SKIPPED_RE = re.compile(r"^t/\S+\.pl \.+ skipped", re.MULTILINE)


# Test files prove runs at once. The suite's clusters mostly wait (for standbys to catch up,
# for promotion, for checkpoints), so on 2 cores 3 files at a time roughly halve its wall
# time; each cluster gets its own port (PostgreSQL::Test::Cluster reserves them) and its
# own directory, as in PostgreSQL's meson runs, which run every TAP file in parallel.
TAP_JOBS = 3


def tap_recovery(env: EngineEnv, limit: float) -> str:
    """PostgreSQL's recovery TAP suite (src/test/recovery: streaming and cascading replicas,
    archiving, PITR, crash recovery, promotion, logical decoding on standbys, ...) with the
    engine in every cluster the suite creates: the engine's settings go into TEMP_CONFIG,
    which PostgreSQL::Test::Cluster appends to each postgresql.conf.

    Skipped for se2 with ``nvm_prefetch = inline``: it changes nothing recovery does. Run
    with helpers (nvm_se2_m1): hot standbys read with them, and their verdicts depend on the
    write counting the startup process and the checkpointer take part in. WAL written
    through libpmem2 (``nvm_wal = pmem``) runs it with base (every primary and standby
    writes WAL that way; standbys are made from a primary's backup, postgresql.conf
    included). Data persisted through libpmem2 (``nvm_data_persist = pmem``: restartpoints
    and checkpoints fsync nothing for blocks written back through the mappings) runs it with
    se2, whose write-back is se1's (nvm_writev): se1 with it is skipped, its reads being
    checked with se1. Other se1/se2 configurations with nvm_wal = pmem are skipped too:
    nvm_wal changes only how WAL is written (checked with base). The suite takes ~2.5 min
    per run (TAP_JOBS files at once).
    """
    if env.config.prefetch == "inline":
        raise CheckSkipped(f"recovery is the same as {env.engine}'s (run there)")
    if env.config.persists_data_pmem and env.engine != "se2":
        raise CheckSkipped(
            f"recovery is {env.engine}'s for reads and se2's with nvm_data_persist = pmem "
            "for write-back (run there)"
        )
    if env.config.writes_wal_pmem and env.engine != "base" and not env.config.persists_data_pmem:
        raise CheckSkipped(
            f"recovery is {env.engine}'s with nvm_wal = file and base's with nvm_wal = pmem "
            "(run there)"
        )
    tree = env.run.tree / "src/test/recovery"
    if not tree.is_dir():
        raise CheckFailed(f"no {tree}: is the check flavour built?")
    conf = env.workdir / "tap-temp.conf"
    env.workdir.mkdir(parents=True, exist_ok=True)
    conf.write_text(
        "# ./pgnvm test tap_recovery: the engine under test, in every TAP cluster\n"
        f"nvm_storage_engine = '{env.engine}'\n"
        + "".join(f"{k} = '{v}'\n" for k, v in env.config.settings.items())
    )
    conf.chmod(0o644)
    ran = env.run_tool(
        [
            "make",
            "-s",
            "-C",
            str(tree),
            "installcheck",
            f"TEMP_CONFIG={conf}",
            f"PROVE_FLAGS=-j{TAP_JOBS}",
        ],
        timeout=limit,
        log_name="tap_recovery.log",
    )
    files = _PROVE_FILES_RE.search(ran.output)
    result = _PROVE_RESULT_RE.search(ran.output)
    skipped = len(_PROVE_SKIPPED_RE.findall(ran.output))
    if ran.returncode != 0 or result is None or result.group(1) != "PASS" or files is None:
        failed = _PROVE_FAILED_RE.findall(ran.output)
        msg = f"prove: {result.group(1) if result else f'make exited {ran.returncode}'}"
        if failed:
            msg += f"; failed: {', '.join(failed[:20])}"
        artifacts = [str(env.save_artifact(env.workdir / "tap_recovery.log"))]
        logs = tree / "tmp_check" / "log"
        for t in failed[:5]:
            log = logs / f"regress_log_{t.removeprefix('t/').removesuffix('.pl')}"
            if log.is_file():
                artifacts.append(str(env.save_artifact(log, f"tap_recovery.{log.name}")))
        raise CheckFailed(f"{msg}\n{ran.tail(25)}", artifacts)
    return (
        f"{files.group(1)} test files, {files.group(2)} tests passed"
        f" ({skipped} skipped by the suite itself: injection points not built)"
    )
