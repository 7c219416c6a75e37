"""regress, isolation and pgnvm_ext: pg_regress suites against the running test cluster
(PostgreSQL's own two, and contrib/pgnvm's regression test); tap_recovery: PostgreSQL's
recovery TAP suite with the engine in every cluster it creates."""

from __future__ import annotations

import fcntl
import re
import shutil
from pathlib import Path

from bench.core import osuser
from bench.core.configs import Config
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
            # the head of the diffs too: a CI clone's run directory is gone with it
            head = diffs.read_text(errors="replace").splitlines()[:40]
            msg += f"; diffs: {saved}, first {len(head)} lines:\n" + "\n".join(head)
        else:
            msg += f"\n{ran.tail(25)}"
        raise CheckFailed(msg, artifacts)
    return summary.group(1)


def regress(env: EngineEnv, limit: float) -> str:
    return _suite(env, "src/test/regress", "installcheck-parallel", "regress", limit)


def isolation(env: EngineEnv, limit: float) -> str:
    return _suite(env, "src/test/isolation", "installcheck", "isolation", limit)


def pgnvm_ext(env: EngineEnv, limit: float) -> str:
    """contrib/pgnvm's own test (the extension's functions in every engine). Run with the
    server's other writers quiet (:meth:`EngineEnv.writers_quiet`): it runs right after
    regress, when autovacuum works through the regression database, and its isolation
    spec ``backend_counters`` compares one session's counters before and after another's
    scan exactly (a relcache rebuild after autovacuum vacuumed a catalog, or an eviction by
    another process' clock sweep, would be one read more)."""
    with env.server.connect() as c, env.writers_quiet(c):
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

#: initdb's options for the template the TAP clusters are copied from: those of
#: PostgreSQL's own ``make check`` (src/Makefile.global, target temp-install).
TEMPLATE_INITDB_OPTS = ("--auth", "trust", "--no-sync", "--no-instructions", "--lc-messages=C")


def tap_recovery_skip(config: Config) -> str | None:
    """Why ``tap_recovery`` does not run for ``config`` (None: it runs). See
    :func:`tap_recovery` for the reasons; the runner also uses it to plan the lanes."""
    if config.prefetch == "inline":
        return f"recovery is the same as {config.engine}'s (run there)"
    if config.persists_data_pmem and config.engine != "se2":
        return (
            f"recovery is {config.engine}'s for reads and se2's with nvm_data_persist = pmem "
            "for write-back (run there)"
        )
    if config.writes_wal_pmem and not config.persists_data_pmem:
        return (
            f"recovery is {config.engine}'s with nvm_wal = file and that of WAL through "
            "libpmem2 in every cluster of se2 with nvm_data_persist = pmem (run there)"
        )
    return None


def initdb_template(env: EngineEnv) -> Path:
    """The run's initdb template (made once, by the first configuration that asks, under a
    lock: configurations may run side by side). PostgreSQL::Test::Cluster copies it instead
    of running initdb for every cluster a test creates without initdb options of its own
    (INITDB_TEMPLATE, as PostgreSQL's own ``make check`` does): with the cassert build an
    initdb costs seconds of CPU and the suite creates dozens of clusters. initdb does not
    depend on the engine (the engine is set in postgresql.conf, appended by the suite)."""
    root = env.run.work_root
    template = root / "initdb-template"
    with open(root / "initdb-template.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (template / "PG_VERSION").is_file():
            shutil.rmtree(template, ignore_errors=True)
            ran = env.run_tool(
                [env.tool("initdb"), *TEMPLATE_INITDB_OPTS, "--no-clean", str(template)],
                timeout=300,
                log_name="initdb-template.log",
            )
            if ran.returncode != 0:
                raise CheckFailed(f"initdb of the TAP template failed:\n{ran.tail(15)}")
    return template


def tap_recovery(env: EngineEnv, limit: float) -> str:
    """PostgreSQL's recovery TAP suite (src/test/recovery: streaming and cascading replicas,
    archiving, PITR, crash recovery, promotion, logical decoding on standbys, ...) with the
    engine in every cluster the suite creates: the engine's settings go into TEMP_CONFIG,
    which PostgreSQL::Test::Cluster appends to each postgresql.conf.

    Skipped for se2 with ``nvm_prefetch = inline``: it changes nothing recovery does. Run
    with helpers (nvm_se2_m1): hot standbys read with them, and their verdicts depend on the
    write counting the startup process and the checkpointer take part in. The PMem write
    path runs it with se2 (``nvm_se2_pmem``): WAL through libpmem2 (``nvm_wal = pmem``) in
    every primary and standby (standbys are made from a primary's backup, postgresql.conf
    included) and data persisted through the mappings (``nvm_data_persist = pmem``:
    restartpoints and checkpoints fsync nothing for blocks written back through them);
    se2's write-back is se1's (nvm_writev), so se1 with it is skipped, its reads being
    checked with se1. Configurations with nvm_wal = pmem alone (base, se1, se2) are skipped
    too: nvm_wal changes only how WAL is written and reread, the same code in every engine,
    and every cluster of se2's run writes WAL that way (until 2026-11-25 base with nvm_wal
    = pmem ran it as well: one of six runs of the suite, the most expensive check).

    Several configurations may run the suite at once (lanes): each gets its own
    ``tmp_check`` (the recipe's CURDIR pointed at a scratch directory on the configuration's
    storage, :func:`_tap_curdir`; the build tree is only read) and all of them share one
    directory of port reservations (PG_TEST_PORT_DIR), so no two clusters of the run take
    the same port.
    """
    why = tap_recovery_skip(env.config)
    if why:
        raise CheckSkipped(why)
    tree = env.run.tree / "src/test/recovery"
    if not tree.is_dir():
        raise CheckFailed(f"no {tree}: is the check flavour built?")
    env.workdir.mkdir(parents=True, exist_ok=True)
    conf = env.workdir / "tap-temp.conf"
    conf.write_text(
        "# ./pgnvm test tap_recovery: the engine under test, in every TAP cluster\n"
        f"nvm_storage_engine = '{env.engine}'\n"
        + "".join(f"{k} = '{v}'\n" for k, v in env.config.settings.items())
    )
    conf.chmod(0o644)
    template = initdb_template(env)
    portdir = env.run.tap_port_dir()
    curdir = _tap_curdir(env)
    ran = env.run_tool(
        [
            "make",
            "-s",
            "-C",
            str(tree),
            "installcheck",
            f"TEMP_CONFIG={conf}",
            f"PROVE_FLAGS=-j{TAP_JOBS}",
            # prove_installcheck puts tmp_check (clusters, logs) under $(CURDIR)
            f"CURDIR={curdir}",
        ],
        timeout=limit,
        log_name="tap_recovery.log",
        extra_env={"INITDB_TEMPLATE": str(template), "PG_TEST_PORT_DIR": str(portdir)},
    )
    files = _PROVE_FILES_RE.search(ran.output)
    result = _PROVE_RESULT_RE.search(ran.output)
    skipped = len(_PROVE_SKIPPED_RE.findall(ran.output))
    copied = _count_template_copies(curdir / "tmp_check" / "log")
    if ran.returncode != 0 or result is None or result.group(1) != "PASS" or files is None:
        failed = _PROVE_FAILED_RE.findall(ran.output)
        msg = f"prove: {result.group(1) if result else f'make exited {ran.returncode}'}"
        if failed:
            msg += f"; failed: {', '.join(failed[:20])}"
        artifacts = [str(env.save_artifact(env.workdir / "tap_recovery.log"))]
        logs = curdir / "tmp_check" / "log"
        for t in failed[:5]:
            log = logs / f"regress_log_{t.removeprefix('t/').removesuffix('.pl')}"
            if log.is_file():
                artifacts.append(str(env.save_artifact(log, f"tap_recovery.{log.name}")))
        free = shutil.disk_usage(curdir)
        msg += (
            f"\n{ran.tail(25)}\n{tap_failure_excerpt(logs, failed[:5])}"
            f"\nfree on the suite's storage now: {free.free >> 20} MiB of {free.total >> 20} MiB"
        )
        raise CheckFailed(msg, artifacts)
    if not env.run.keep:
        # the suite passed: its clusters' leftovers and logs need not hold the tmpfs's RAM
        shutil.rmtree(curdir / "tmp_check", ignore_errors=True)
    return (
        f"{files.group(1)} test files, {files.group(2)} tests passed"
        f" ({skipped} skipped by the suite itself: injection points not built); "
        f"clusters copied from the initdb template: {copied[0]}, initdb run: {copied[1]}"
    )


#: lines of a failed TAP file's logs that say why (the runner prints only prove's summary;
#: the logs themselves are artifacts of a run directory a CI clone does not keep)
_TAP_TEST_WHY_RE = re.compile(
    r"^(?:not ok .*|#\s+Failed test .*|#\s+(?:got|expected):.*|.*\b(?:error|FATAL|PANIC):.*"
    r"|.*No space left.*|.*terminated by signal.*|.*TRAP:.*|.*was terminated.*)$",
    re.MULTILINE,
)
_TAP_SERVER_WHY_RE = re.compile(
    r"^.*(?:PANIC:|TRAP:|terminated by signal|No space left|could not (?:read|write|extend)"
    r"|invalid page|checksum verification failed).*$",
    re.MULTILINE,
)


def tap_failure_excerpt(logs: Path, failed: list[str], per_file: int = 25) -> str:
    """Why the failed TAP files failed, from their logs under ``logs`` (tmp_check/log): the
    test's own log (``regress_log_<name>``: failed assertions, errors of the commands it
    ran, the regression diffs it dumps) and its servers' logs (``<name>_<node>.log``: only
    crashes, PANICs, full storage and read/verification errors, which a test's output does
    not show), at most ``per_file`` lines from each, so that a CI log shows the cause."""
    parts: list[str] = []
    for t in failed:
        name = t.removeprefix("t/").removesuffix(".pl")
        sources = [(logs / f"regress_log_{name}", _TAP_TEST_WHY_RE)]
        sources += [(p, _TAP_SERVER_WHY_RE) for p in sorted(logs.glob(f"{name}_*.log"))]
        for path, pattern in sources:
            if not path.is_file():
                continue
            lines = [m.group(0)[:300] for m in pattern.finditer(path.read_text(errors="replace"))]
            if not lines:
                continue
            more = f" (first {per_file} of {len(lines)})" if len(lines) > per_file else ""
            parts.append(f"--- {path.name}{more}:")
            parts.extend(lines[:per_file])
    return "\n".join(parts) if parts else "(no explanatory lines in the failed files' logs)"


def _tap_curdir(env: EngineEnv) -> Path:
    """Where this configuration's run of the suite keeps its ``tmp_check``: the recipe
    (prove_installcheck, src/Makefile.global) puts it under ``$(CURDIR)``, which we point
    at ``<scratch>/tap/src/test/recovery``; the recipe also finds pg_regress as
    ``$(CURDIR)/../../../src/test/regress/pg_regress``, so ``<scratch>/tap/src/test/regress``
    is a link to the build tree's. ``<scratch>`` is :attr:`EngineEnv.scratch_dir`, on the
    configuration's storage: the suite's clusters live where the configuration's data
    lives (for an ``nvm`` configuration the tmpfs or the root given by path, where se1 and
    se2 map what they read), and on 2 CPUs the suite used ~40% less CPU there than on the
    disk (measured: 111-120 s against 178-217 s for nvm_se2; the disk's writeback and
    journal were the difference)."""
    curdir = osuser.ensure_dir(env.scratch_dir / "tap" / "src" / "test" / "recovery")
    regress = curdir.parent / "regress"
    if not regress.is_symlink():
        regress.symlink_to(env.run.tree / "src" / "test" / "regress")
    return curdir


def _count_template_copies(logdir: Path) -> tuple[int, int]:
    """(clusters copied from the template, clusters made by initdb) per the suite's logs."""
    copied = initdb = 0
    for log in logdir.glob("regress_log_*"):
        text = log.read_text(errors="replace")
        copied += text.count("initializing database system by copying initdb template")
        initdb += text.count("initializing database system by running initdb")
    return copied, initdb
