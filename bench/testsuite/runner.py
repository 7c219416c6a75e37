"""Runs the checks, prints one line per check and ``N passed, M failed``, writes the JSON."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bench.core import build, configs, osuser, paths, selection, storage, ui
from bench.core import cluster as clu
from bench.testsuite import lanes, model, proc, registry, settings
from bench.testsuite.checks.amcheck import amcheck
from bench.testsuite.checks.auth import auth_check
from bench.testsuite.checks.checksum import checksum
from bench.testsuite.checks.checksum_simd import checksum_simd_check
from bench.testsuite.checks.cow import cow
from bench.testsuite.checks.crash import crash
from bench.testsuite.checks.data_pmem import data_pmem
from bench.testsuite.checks.differential import differential
from bench.testsuite.checks.enospc import enospc
from bench.testsuite.checks.fault_guard import fault_guard_check
from bench.testsuite.checks.faults import cow_failure, mapping_limits
from bench.testsuite.checks.ha_check import ha_check
from bench.testsuite.checks.pgsuites import (
    isolation,
    pgnvm_ext,
    regress,
    tap_recovery,
    tap_recovery_skip,
)
from bench.testsuite.checks.powerloss_check import applies as powerloss_applies
from bench.testsuite.checks.powerloss_check import powerloss_check
from bench.testsuite.checks.powerloss_lib import powerloss_lib_check
from bench.testsuite.checks.prefetch_check import prefetch_check
from bench.testsuite.checks.prefetch_lifecycle import prefetch_lifecycle
from bench.testsuite.checks.pytest_check import pytest_check
from bench.testsuite.checks.redirect import redirect
from bench.testsuite.checks.slots import slots
from bench.testsuite.checks.storagebench_check import storagebench_check
from bench.testsuite.checks.strace_check import strace
from bench.testsuite.checks.stress import stress
from bench.testsuite.checks.truncated import truncated
from bench.testsuite.checks.wal_pmem import wal_pmem
from bench.testsuite.context import (
    PORT_BASE,
    EngineEnv,
    RunState,
    pick_port,
    repo_results_dir,
    spare_ports,
)
from bench.testsuite.errmatch import headline
from bench.testsuite.model import CheckFailed, CheckResult, CheckSkipped, Status
from bench.testsuite.settings import FLAVOUR

CheckFunc = Callable[[EngineEnv, float], str]

#: The function of each check of registry.ENGINE_CHECKS.
CHECK_FUNCS: dict[str, CheckFunc] = {
    "auth": auth_check,
    "regress": regress,
    "pgnvm_ext": pgnvm_ext,
    "isolation": isolation,
    "amcheck": amcheck,
    "truncated": truncated,
    "checksum": checksum,
    "enospc": enospc,
    "differential": differential,
    "strace": strace,
    "redirect": redirect,
    "cow": cow,
    "cow_failure": cow_failure,
    "mapping_limits": mapping_limits,
    "prefetch_lifecycle": prefetch_lifecycle,
    "stress": stress,
    "slots": slots,
    "crash": crash,
    "powerloss": powerloss_check,
    "wal_pmem": wal_pmem,
    "data_pmem": data_pmem,
    "tap_recovery": tap_recovery,
}


@dataclass
class Options:
    #: the configurations (bench.core.selection, built by the command line); None: the defaults
    selection: selection.Selection | None = None
    only: list[str] | None = None
    keep: bool = False
    seed: int | None = None
    build: bool = True  # False: use the installed check flavour as it is
    quick: bool = False  # --quick: registry.NOT_QUICK left out, settings.QUICK_CONFIGS
    jobs: int = 1  # lanes: tasks (a configuration, a check run once) run side by side


def _detail_of(e: BaseException) -> str:
    if isinstance(e, clu.ClusterError | CheckFailed | CheckSkipped | proc.CheckTimeout):
        return str(e)
    return f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C / SIGTERM during a check; carries that check's (failed) result."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.name)
        self.result = result


def run_one(
    name: str,
    config: str | None,
    limit: float,
    body: Callable[[], str],
    env: EngineEnv | None = None,
) -> CheckResult:
    """Run ``body`` under the time limit; any failure becomes a FAIL result, never a crash."""
    label = f"{name}[{config}]" if config else name
    ui.step(f"{label} (limit {limit / 60:.0f} min)")
    t0 = time.monotonic()
    offset = env.server.log_offset() if env else 0
    status, detail, artifacts = Status.PASS, "", []
    try:
        with proc.time_limit(limit):
            detail = body()
    except CheckSkipped as e:
        status, detail = Status.SKIP, str(e)
    except CheckFailed as e:
        status, detail, artifacts = Status.FAIL, str(e), e.artifacts
    except proc.CheckTimeout as e:
        status, detail = Status.FAIL, f"TIMEOUT: {e}"
    except KeyboardInterrupt as e:
        r = CheckResult(name, config, Status.FAIL, time.monotonic() - t0, "interrupted")
        raise Interrupted(r) from e
    except Exception as e:
        status, detail = Status.FAIL, _detail_of(e)
    if env is not None and status is not Status.SKIP:
        problems = env.log_problems_since(offset)
        if problems:
            if status is Status.PASS:
                status = Status.FAIL
                detail = "server log shows a crash: " + " | ".join(problems[:5])
            else:
                detail += "\nserver log: " + " | ".join(problems[:5])
    r = CheckResult(name, config, status, time.monotonic() - t0, detail, artifacts)
    (ui.error if status is Status.FAIL else ui.info)(r.line())
    if status is not Status.PASS and detail:
        print(detail.rstrip(), file=sys.stderr, flush=True)
    return r


def _config_run(
    env: EngineEnv, checks: list[registry.CheckDef], emit: Callable[[CheckResult], None]
) -> None:
    """Set up ``env``'s cluster and run ``checks`` on it, one after the other, each result
    passed to ``emit`` as soon as it is known. The reference configuration marks each check
    it is past (the other lanes wait for that before a comparison with it)."""
    try:
        _config_checks(env, checks, emit)
    finally:
        if env.records_reference:
            env.run.reference_done("*")


def _config_checks(
    env: EngineEnv, checks: list[registry.CheckDef], emit: Callable[[CheckResult], None]
) -> None:
    setup = run_one("setup", env.label, 10 * 60, env.setup, env)
    emit(setup)
    if setup.status is not Status.PASS:
        why = headline(setup.detail)
        setup.detail = f"{why}\n{setup.detail}"
        for c in checks:
            r = CheckResult(c.name, env.label, Status.FAIL, 0.0, f"cluster setup failed: {why}")
            ui.error(r.line())
            emit(r)
        return
    for c in checks:
        waited = 0.0
        if c.uses_reference and not env.records_reference:
            waited = env.run.wait_for_reference(c.name)
        pre = ""
        try:
            pre = env.server.ensure_running()
        except Exception as e:
            r = CheckResult(
                c.name, env.label, Status.FAIL, 0.0, f"server cannot be restarted: {_detail_of(e)}"
            )
            ui.error(r.line())
            emit(r)
            continue
        r = run_one(c.name, env.label, c.limit, lambda c=c: CHECK_FUNCS[c.name](env, c.limit), env)
        if env.records_reference:
            env.run.reference_done(c.name)
        if pre:
            r.detail = pre + r.detail
        if waited >= 1.0:
            r.detail += f" (waited {waited:.0f}s for the reference configuration first)"
        emit(r)
        if r.detail.startswith("TIMEOUT"):
            # sessions of the timed-out check may still run: start the next check afresh
            with contextlib.suppress(Exception):
                env.server.restart("immediate")


#: Rough seconds of a configuration's checks on a 2-core VM (cassert build), to start the
#: longest tasks first so that the lanes end together; only the order depends on it.
_EST_CONFIG = 180.0
_EST_TAP = 120.0  # tap_recovery, where it runs
_EST_PMEM_CRASH = 10.0  # crash's extra round with nvm_wal = pmem
_EST_POWERLOSS = 60.0  # powerloss's cuts, where it runs (stock and the pmem write path)
#: the label of the task that runs the checks run once
ONCE = "checks run once"


def _estimate(cfg: configs.Config, checks: list[registry.CheckDef]) -> float:
    names = {c.name for c in checks}
    est = _EST_CONFIG * len(names) / len(registry.ENGINE_CHECKS)
    if "tap_recovery" in names and tap_recovery_skip(cfg) is None:
        est += _EST_TAP
    if "crash" in names and cfg.writes_wal_pmem:
        est += _EST_PMEM_CRASH
    if "powerloss" in names and powerloss_applies(cfg) is None:
        est += _EST_POWERLOSS
    return est


def _plan(
    run: RunState,
    chosen: selection.Selection,
    checks: list[registry.CheckDef],
    global_checks: list[str],
    named: bool = False,
) -> list[lanes.Task]:
    """The run's tasks in the order the lanes take them (:func:`lane_order`); each
    configuration runs :func:`registry.checks_for` of ``checks`` (all if ``named``)."""
    tasks: list[tuple[float, lanes.Task]] = []
    if checks:
        cfgs = chosen.wanted  # refused ones too: their setup fails, with the reason
        run.reference_in_run = any(c.is_reference for c in cfgs)
        ports: set[int] = set()
        for cfg in cfgs:
            port = pick_port(PORT_BASE, ports)
            ports.add(port)
            env = EngineEnv(run, cfg, port, chosen.verdict(cfg.name), spare_ports(len(ports) - 1))
            mine = registry.checks_for(cfg.name, checks, named)
            first = REFERENCE_FIRST if cfg.is_reference else _estimate(cfg, mine)
            tasks.append((first, lanes.Task(cfg.name, _config_task(env, mine))))
    own = [g for g in global_checks if g in registry.OWN_TASK]
    for g in own:
        tasks.append((registry.OWN_TASK[g], lanes.Task(g, _global_task([g], run))))
    shared = [g for g in global_checks if g not in registry.OWN_TASK]
    if shared:
        # one task, in registry order: they share the repository's build directories
        # (prefetch/, storagebench/), so they never run side by side with each other
        tasks.append((ONCE_NEXT, lanes.Task(ONCE, _global_task(shared, run))))
    order = lane_order([(t.label, est) for est, t in tasks])
    by_label = {t.label: t for _, t in tasks}
    return [by_label[label] for label in order]


#: estimates that place a task by rule rather than by length (see lane_order)
REFERENCE_FIRST = float("inf")
ONCE_NEXT = float("-inf")


def lane_order(tasks: list[tuple[str, float]]) -> list[str]:
    """The order the lanes take the tasks ``(label, estimate)`` in: the reference
    configuration first (estimate REFERENCE_FIRST: the others compare with what it records
    and wait for it where they need a value), the checks run once next (ONCE_NEXT: they need
    no reference value, so the second lane works on them while the reference records its
    values, instead of waiting in a configuration: 36 s of one lane in a full run of
    2026-11-25), then the configurations, longest first (stable: equal estimates keep the
    catalogue's order)."""

    def key(t: tuple[str, float]) -> tuple[int, float]:
        est = t[1]
        if est == REFERENCE_FIRST:
            return (0, 0.0)
        if est == ONCE_NEXT:
            return (1, 0.0)
        return (2, -est)

    return [label for label, _ in sorted(tasks, key=key)]


def _config_task(
    env: EngineEnv, checks: list[registry.CheckDef]
) -> Callable[[Callable[[CheckResult], None]], None]:
    def task(emit: Callable[[CheckResult], None]) -> None:
        try:
            _config_run(env, checks, emit)
        finally:
            env.teardown()

    return task


def _global_task(
    names: list[str], run: RunState
) -> Callable[[Callable[[CheckResult], None]], None]:
    def task(emit: Callable[[CheckResult], None]) -> None:
        for name in names:
            emit(_run_global(name, run))

    return task


def slowest_table(results: list[CheckResult], top: int = 10) -> list[str]:
    """The checks that took longest, summed over configurations: ``check  total  max (config)``."""
    per: dict[str, list[CheckResult]] = {}
    for r in results:
        per.setdefault(r.check, []).append(r)
    rows = sorted(per.items(), key=lambda kv: -sum(r.duration for r in kv[1]))[:top]
    if not rows:
        return []
    out = ["slowest checks (seconds, summed over configurations; the longest single run):"]
    for check, rs in rows:
        worst = max(rs, key=lambda r: r.duration)
        where = f" ({worst.config})" if worst.config else ""
        out.append(
            f"  {check:<20} {sum(r.duration for r in rs):7.1f}  x{len(rs):<2} "
            f"max {worst.duration:6.1f}{where}"
        )
    return out


#: the flavour tests/' end-to-end tests run (``--no-build`` when it is installed)
E2E_FLAVOUR = "release"
#: checks run once that run the release flavour: pytest (tests/' end-to-end tests), ha
#: (3 servers, Patroni and a load on the CPUs of one machine: the cassert build's cost x3)
RELEASE_CHECKS = {"pytest", "ha"}


def _prepare(
    opts: Options, global_checks: list[str]
) -> tuple[RunState, selection.Selection, float]:
    """Build what the run uses (the check flavour; with ``pytest`` or ``ha``, also the
    release flavour, which tests/' end-to-end tests use as installed: left stale, they
    would test an older server), choose the configurations, set up the run's directories."""
    t0 = time.monotonic()
    if opts.build:
        build.ensure_built(FLAVOUR)
        if RELEASE_CHECKS & set(global_checks):
            build.ensure_built(E2E_FLAVOUR)
    elif not (build.bindir(FLAVOUR) / "postgres").is_file():
        raise build.BuildError(f"--no-build, but the {FLAVOUR} flavour is not installed")
    build_s = time.monotonic() - t0
    chosen = (opts.selection or selection.select(settings.job(opts.quick))).judge()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results_root = repo_results_dir()
    run = RunState(
        stamp=stamp,
        results_dir=results_root / f"test-{stamp}",
        work_root=paths.pgnvm_home() / "test" / stamp,
        keep=opts.keep,
        seed=opts.seed if opts.seed is not None else random.randrange(1 << 31),
        tree=paths.build_dir(FLAVOUR),
        reference_file=results_root / "test-reference.json",
    )
    osuser.ensure_dir(run.work_root)
    return run, chosen, build_s


def _run_global(name: str, run: RunState) -> CheckResult:
    """One of registry.GLOBAL_CHECKS (run once, not per configuration)."""
    limit = registry.GLOBAL_LIMITS[name]

    def body() -> str:
        if name == "pytest":
            return pytest_check(run.work_root / "pytest.log", limit, run.results_dir)
        if name == "prefetch":
            return prefetch_check(run.work_root, limit, run.results_dir)
        if name == "storagebench":
            return storagebench_check(run.work_root, limit, run.results_dir)
        if name == "powerloss_lib":
            return powerloss_lib_check(run.work_root, limit, run.results_dir)
        if name == "checksum_simd":
            return checksum_simd_check(run, limit)
        if name == "fault_guard":
            return fault_guard_check(run, limit)
        if name == "ha":
            return ha_check(run, limit)
        raise ValueError(f"unknown global check {name}")

    return run_one(name, None, limit, body)


@contextlib.contextmanager
def one_run_at_a_time() -> Iterator[None]:
    """Hold PGNVM_HOME/test/.run.lock for the whole run: the test clusters (pgnvm-test-<config>)
    and their ports are shared by every run of this PGNVM_HOME, so a second run would
    re-initdb and stop the first one's servers under it. A second run waits."""
    lock = paths.pgnvm_home() / "test" / ".run.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            other = f.read().strip() or "?"
            ui.notice(
                f"another ./pgnvm test run (pid {other}) uses the test clusters of this "
                f"PGNVM_HOME ({lock}); waiting for it to finish"
            )
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield


def run_tests(opts: Options) -> int:
    with one_run_at_a_time():
        return _run_tests(opts)


def _run_tests(opts: Options) -> int:
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    t_all = time.monotonic()
    global_checks, checks = registry.select(opts.only, opts.quick)
    results: list[CheckResult] = []
    run: RunState | None = None
    names: list[str] = []
    notes: dict[str, str] = {}
    build_s = 0.0
    interrupted = False
    root = storage.describe_nvm_root()  # the run's nvm root ($PGNVM_NVM_ROOT, else the tmpfs)
    try:
        try:
            run, chosen, build_s = _prepare(opts, global_checks)
            names, notes = chosen.names, chosen.notes
        except Exception as e:
            results.append(
                CheckResult("build", None, Status.FAIL, time.monotonic() - t_all, _detail_of(e))
            )
            ui.error(results[-1].line())
        if run is not None:
            ui.info(
                f"configurations: {', '.join(names)}; checks: "
                f"{', '.join([c.name for c in checks] + global_checks)}; "
                f"seed {run.seed}; work dir {run.work_root}"
            )
            for line in storage.root_lines(kind=root):
                ui.info(line)
            tasks = _plan(run, chosen, checks, global_checks, named=bool(opts.only))
            lanes_n = max(1, min(opts.jobs, len(tasks)))
            if lanes_n > 1:
                ui.info(
                    f"{len(tasks)} tasks on {lanes_n} lanes, in this order: "
                    + ", ".join(t.label for t in tasks)
                )
            finished = lanes.run_tasks(tasks, lanes_n)
            # reported in the order of the run's configurations, then the checks run once
            order = {n: i for i, n in enumerate([*names, ONCE])}
            for t in sorted(tasks, key=lambda t: order.get(t.label, len(order))):
                results.extend(t.results)
            if not finished:
                raise KeyboardInterrupt
    except KeyboardInterrupt as e:
        interrupted = True
        if isinstance(e, Interrupted):
            results.append(e.result)
        ui.error("interrupted: stopping the servers this run started")
    finally:
        with contextlib.suppress(BaseException):
            clu.stop_started("immediate")
        if run is not None and not opts.keep:
            shutil.rmtree(run.work_root, ignore_errors=True)

    total = time.monotonic() - t_all
    out_path = None
    if run is not None:
        data = model.report(
            results,
            started=started,
            configs=names,
            extra={
                "seed": run.seed,
                "commit": paths.git_commit(),
                "flavour": FLAVOUR,
                "build_seconds": round(build_s, 1),
                "wall_seconds": round(total, 1),
                "lanes": opts.jobs,
                "quick": opts.quick,
                "interrupted": interrupted,
                "probe": notes,
                "artifacts_dir": str(run.results_dir),
                "uid": os.geteuid(),
                "nvm_root": root.to_json(),
            },
        )
        out_path = run.results_dir.parent / f"test-{run.stamp}.json"
        model.write_report(out_path, data)
    for line in slowest_table(results):
        ui.info(line)
    print("", flush=True)
    for line in model.summary_lines(results):
        print(line, flush=True)
    ui.info(
        f"wall time {ui.fmt_seconds(total)} (build {ui.fmt_seconds(build_s)})"
        + (f"; summary {out_path}" if out_path else "")
    )
    if interrupted:
        return 130
    return model.exit_code(results)
