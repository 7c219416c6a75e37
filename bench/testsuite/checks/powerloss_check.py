"""powerloss: simulated power cuts under load; after each, the server starts on what the
cut left durable, and every acknowledged commit is there.

For stock PostgreSQL (``nvm_base_worker``, the control that shows the model is right) and
every configuration with a PMem write path (``nvm_wal = pmem`` and/or
``nvm_data_persist = pmem``, their forced cache-line ``_cl`` variants included). Once per
configuration: a small cluster of its own (pgbench scale 1, YCSB ``usertable``, an
``acks`` table) in the configuration's scratch directory, stopped: the template. Each cut
(:data:`powerloss.DEFAULT_CUTS`, ``PGNVM_POWERLOSS_CUTS``): a copy of the template is the
durable baseline (``powerloss init``); the server starts on it with ``libpowerloss.so``
preloaded (``LD_PRELOAD``, ``POWERLOSS_SHADOW``); TPC-B or YCSB-A (alternating) with an
acknowledgement recorder and a client that cycles through ``CHECKPOINT``,
``pg_switch_wal()`` and a new table, so that cuts land in checkpoints, segment switches
and recycling, new relation files and write-back of evicted buffers; the cut at a seeded
persist event (``powerloss cut SHADOW +K``, K a seeded fraction of the events of the next
~2 s at the measured rate; every third cut K persists into a ``CHECKPOINT`` with the load
held);
``powerloss materialize`` (``--dirs newfile`` by default; the harsh model with a seeded
subset of unpersisted cache lines on every second cut of a pmem configuration);
``powerloss kill``; a server without the preload on the materialized directory: crash
recovery completes, every acknowledged id is in ``acks``, every table created before
the cut is there, ``pg_amcheck`` clean, TPC-B's
balances agree, ``usertable`` complete. ``PGNVM_POWERLOSS_BREAK`` drops a persist kind in
the server (see :mod:`bench.testsuite.powerloss`): the check must then fail.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import psycopg

from bench.core import cluster as clu
from bench.core import configs, osuser, paths
from bench.core.server import Server
from bench.testsuite import powerloss, proc
from bench.testsuite.acks import AckLog, verify_acks
from bench.testsuite.context import STATEMENT_TIMEOUT_MS, EngineEnv, pick_port
from bench.testsuite.model import CheckFailed, CheckSkipped
from bench.testsuite.oltpload import (
    RECOVERY_MARKERS,
    recorder,
    tpcb_consistency,
    ycsb_a_script,
    ycsb_load,
)
from bench.testsuite.pgamcheck import run_amcheck

DB = "pltest"
SCALE = 1
CLIENTS = 2
#: ~11 MB: with pgbench's ~15 MB more than shared_buffers (16 MB): buffers are evicted
YCSB_ROWS = 10_000
#: settings of the cut cluster on top of the configuration's: checkpoints by WAL volume too
EXTRA_SETTINGS = {"max_wal_size": "64MB", "min_wal_size": "32MB"}
WARMUP = 1.0  # seconds of load before the cut is armed
RATE_WINDOW = 0.5  # seconds over which the persist rate is measured
CUT_WINDOW = 2.0  # the cut lands within about this many seconds of load
CUT_WAIT = 60.0  # no cut after this long: the load stalled
STIR_EVERY = 0.3  # seconds between the stirring client's steps
NEW_TABLE_ROWS = 2_000  # rows of each table the stirring client creates
PORT_OFFSET = 100  # the cut cluster's port: the first free one from the configuration's + this
#: a cut into a CHECKPOINT: K drawn in 1..this (persists of one checkpoint of the cluster:
#: its relation files, SLRUs, WAL, control file, directories)
CHECKPOINT_PERSISTS = 40
HOLD_SETTLE = 0.2  # seconds for the held load's last commits to finish
CHECKPOINT_WAIT = 3.0  # seconds for the cut inside the checkpoint before the load resumes


#: said with a failure under --dirs strict
STRICT_NOTE = (
    "note: --dirs strict is POSIX's directory model; stock PostgreSQL 18 relies on a new "
    "file's first fsync making its name durable (it never fsyncs base/<db> after creating "
    "a relation file), so stock fails it too (docs/storage-engines.md, 'Power loss')"
)


def applies(cfg: configs.Config) -> str | None:
    """None when the check runs for ``cfg``, else why it is skipped."""
    if cfg.is_reference or cfg.writes_wal_pmem or cfg.persists_data_pmem:
        return None
    return (
        "WAL written and data persisted as stock PostgreSQL does (file WAL, fsync): "
        "the control nvm_base_worker cuts that protocol"
    )


def _pl(env: EngineEnv, args: list[str | Path], log_name: str, timeout: float = 120) -> str:
    """The powerloss tool, as the server's user; CheckFailed when it fails."""
    ran = env.run_tool([str(powerloss.tool()), *map(str, args)], timeout=timeout, log_name=log_name)
    if ran.returncode != 0:
        raise CheckFailed(f"powerloss {args[0]} exited {ran.returncode}:\n{ran.tail(20)}")
    return ran.output


def _stats(env: EngineEnv, shadow: Path) -> powerloss.Stats:
    return powerloss.parse_stats(_pl(env, ["stats", shadow], "powerloss-stats.log"))


def _build() -> None:
    with powerloss.BuildLock():
        ran = proc.run(
            ["make", "-s", "-C", "powerloss", *powerloss.make_args()],
            cwd=paths.REPO_ROOT,
            timeout=300,
        )
    if ran.returncode != 0:
        raise CheckFailed(f"make -C powerloss failed:\n{ran.tail(30)}")


def _server(cluster: clu.Cluster) -> Server:
    return Server(
        cluster, options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}", connect_timeout=30
    )


def _template(env: EngineEnv, root: Path) -> clu.Cluster:
    """The configuration's small cluster, loaded and stopped: every cut starts from it."""
    spec = clu.ClusterSpec(
        name=f"{env.server.name}-pl",
        engine=env.engine,
        storage=env.config.storage,
        port=pick_port(env.server.cluster.spec.port + PORT_OFFSET, set()),
        flavour=env.server.cluster.spec.flavour,
        settings={**env.server.settings, **EXTRA_SETTINGS},
        environment=dict(env.config.environment),
        data_root=str(root / "template"),
    )
    osuser.ensure_dir(root / "template")
    tmpl = clu.Cluster(spec)
    tmpl.init(force=True)
    srv = _server(tmpl)
    srv.start()
    try:
        with srv.connect() as c:
            c.execute(f"CREATE DATABASE {DB}")
        ran = env.run_tool(
            [env.tool("pgbench"), "-i", "-q", "-s", str(SCALE), DB],
            timeout=300,
            log_name="powerloss-pgbench-init.log",
            extra_env=tmpl.env(),
        )
        if ran.returncode != 0:
            raise CheckFailed(f"pgbench -i failed:\n{ran.tail()}")
        with srv.connect(DB) as c:
            c.execute("CREATE TABLE acks (id bigint PRIMARY KEY, at timestamptz)")
        ycsb_load(srv, DB, YCSB_ROWS)
        with srv.connect(DB) as c:
            c.execute("CHECKPOINT")
    finally:
        srv.stop("fast")
    return tmpl


def _stirrer(
    server: Server, stop: threading.Event, hold: threading.Event, created: list[str]
) -> None:
    """In turn until stopped or the server goes away (not while ``hold`` is set):
    CHECKPOINT, pg_switch_wal(), a new table of :data:`NEW_TABLE_ROWS` rows with a primary
    key (new relation files, whose names only a directory fsync makes durable under
    POSIX's model); each table whose CREATE ... AS returned is appended to ``created``."""
    try:
        with server.connect(DB) as c:
            n = 0
            while not stop.wait(STIR_EVERY):
                if hold.is_set():
                    continue
                step = n % 3
                if step == 0:
                    c.execute("CHECKPOINT")
                elif step == 1:
                    c.execute("SELECT pg_switch_wal()")
                else:
                    name = f"stir_{n // 3}"
                    c.execute(
                        f"CREATE TABLE {name} AS SELECT g AS id, repeat('s', 100) AS pad "
                        f"FROM generate_series(1, {NEW_TABLE_ROWS}) g"
                    )
                    c.execute(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")
                    created.append(name)
                n += 1
    except psycopg.Error:
        pass  # the cut: the server was killed under us


def _checkpoint(server: Server) -> None:
    """One CHECKPOINT (in its own thread: a cut inside it leaves it waiting)."""
    with contextlib.suppress(psycopg.Error), server.connect() as c:
        c.execute("CHECKPOINT")


def _signal_group(bench: proc.Background, sig: int) -> None:
    """``sig`` to pgbench's process group (runuser, env and pgbench itself)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(bench.proc.pid, sig)


def _wait_gone(datadir: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while clu.datadir_processes(datadir):
        if time.monotonic() > deadline:
            raise CheckFailed(f"processes of {datadir} still alive {timeout:.0f}s after the kill")
        time.sleep(0.05)


@dataclasses.dataclass
class Cut:
    number: int
    workload: str
    moment: str  # load | checkpoint (powerloss.PlannedCut)
    harsh_seed: int | None
    after_events: int = 0  # K of "powerloss cut +K"
    landed: powerloss.Landing | None = None
    lines: tuple[int, int] | None = None  # harsh: (unpersisted lines, kept)
    acked: int = 0
    tables: int = 0  # tables the stirring client had created
    history: str = ""

    def describe(self) -> str:
        where = self.landed.describe() if self.landed else "?"
        into = " into a CHECKPOINT" if self.moment == "checkpoint" else ""
        out = (
            f"c{self.number} {self.workload} +{self.after_events}{into} at {where}, "
            f"{self.acked} acked, {self.tables} tables created"
        )
        if self.lines is not None:
            out += f", harsh {self.harsh_seed}: {self.lines[1]}/{self.lines[0]} lines kept"
        return out


def _arm_in_checkpoint(
    env: EngineEnv,
    srv: Server,
    shadow: Path,
    bench: proc.Background,
    hold: threading.Event,
    cut: Cut,
    frac: float,
) -> None:
    """The cut K persists into a CHECKPOINT: the load held (pgbench stopped, the recorder
    and the stirrer waiting), the cut armed, a CHECKPOINT started; if it makes fewer than
    K persists, the load resumes and the cut lands in it."""
    hold.set()
    _signal_group(bench, signal.SIGSTOP)
    time.sleep(HOLD_SETTLE)
    cut.after_events = powerloss.cut_after(frac, CHECKPOINT_PERSISTS, 1.0)
    _pl(env, ["cut", shadow, f"+{cut.after_events}"], "powerloss-cut.log")
    threading.Thread(target=_checkpoint, args=(srv,), daemon=True).start()
    ran = env.run_tool(
        [str(powerloss.tool()), "stats", str(shadow)], timeout=30, log_name="powerloss-stats.log"
    )
    deadline = time.monotonic() + CHECKPOINT_WAIT
    while powerloss.parse_stats(ran.output).counters.get("cut_pid", 0) == 0:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
        ran = env.run_tool(
            [str(powerloss.tool()), "stats", str(shadow)],
            timeout=30,
            log_name="powerloss-stats.log",
        )
    _signal_group(bench, signal.SIGCONT)
    hold.clear()


def _one_cut(
    env: EngineEnv, tmpl: clu.Cluster, root: Path, cut: Cut, kn: powerloss.Knobs, frac: float
) -> None:
    w = root / "cut"
    shutil.rmtree(w, ignore_errors=True)
    osuser.ensure_dir(w)
    data, shadow, after = w / "data", w / "shadow", w / "after"
    subprocess.run(["cp", "-a", str(tmpl.datadir), str(data)], check=True)
    _pl(env, ["init", shadow, data], "powerloss-init.log")
    preload = {
        "LD_PRELOAD": str(powerloss.library()),
        "POWERLOSS_SHADOW": str(shadow),
        **kn.server_env(),
    }
    live = clu.Cluster(
        dataclasses.replace(tmpl.spec, environment={**tmpl.spec.environment, **preload}), data
    )
    srv = _server(live)
    offset = srv.log_offset()
    srv.start()
    cenv = live.env()
    cmd = [env.tool("pgbench"), "-n", "-c", str(CLIENTS), "-j", str(CLIENTS), "-T", "120"]
    if cut.workload == "ycsb_a":
        script = w / "ycsb-a.sql"
        script.write_text(ycsb_a_script(YCSB_ROWS))
        script.chmod(0o644)
        cmd += ["-f", str(script)]
    bench = proc.Background(
        [*cmd, DB],
        log=env.workdir / f"powerloss-pgbench-{cut.number}.log",
        env=cenv,
        as_server=True,
    )
    log = AckLog()
    stop = threading.Event()
    hold = threading.Event()
    created: list[str] = []
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=recorder, args=(srv, DB, log, 1, stop, errors, hold), daemon=True),
        threading.Thread(target=_stirrer, args=(srv, stop, hold, created), daemon=True),
    ]
    try:
        for t in threads:
            t.start()
        time.sleep(WARMUP)
        if bench.proc.poll() is not None:
            raise CheckFailed(f"cut {cut.number}: pgbench exited early:\n{bench.output()[-2000:]}")
        if cut.moment == "checkpoint":
            _arm_in_checkpoint(env, srv, shadow, bench, hold, cut, frac)
        else:
            s0, t0 = _stats(env, shadow), time.monotonic()
            time.sleep(RATE_WINDOW)
            s1 = _stats(env, shadow)
            rate = (s1.events - s0.events) / max(1e-3, time.monotonic() - t0)
            cut.after_events = powerloss.cut_after(frac, rate, CUT_WINDOW)
            _pl(env, ["cut", shadow, f"+{cut.after_events}"], "powerloss-cut.log")
        ran = env.run_tool(
            [str(powerloss.tool()), "cut-wait", str(shadow), str(CUT_WAIT)],
            timeout=CUT_WAIT + 30,
            log_name="powerloss-cut-wait.log",
        )
        if ran.returncode != 0:
            raise CheckFailed(
                f"cut {cut.number}: no cut {cut.after_events} persists on within "
                f"{CUT_WAIT:.0f}s ({ran.tail(5)}):\n{srv.log_since(offset)[-2000:]}"
            )
        cut.landed = powerloss.landing(srv.log_since(offset))
        opts = ["--dirs", kn.dirs, "--real", str(data)]
        if cut.harsh_seed is not None:
            opts += ["--harsh", str(cut.harsh_seed)]
        out = _pl(env, ["materialize", shadow, after, *opts], "powerloss-materialize.log")
        cut.lines = powerloss.harsh_lines(out)
    finally:
        with contextlib.suppress(CheckFailed):
            _pl(env, ["kill", shadow], "powerloss-kill.log")
        stop.set()
        hold.clear()
        bench.stop()
        _wait_gone(data)
        for t in threads:
            t.join(timeout=30)
        clu.release(live)
    if errors:
        raise CheckFailed(f"cut {cut.number}: ack recorder failed: {errors[0]!r}")
    acked = log.snapshot()
    cut.acked = len(acked)
    # what the killed postmaster left: its lock files (postmaster.pid was fsynced)
    (after / "postmaster.pid").unlink(missing_ok=True)
    for name in (f".s.PGSQL.{live.spec.port}", f".s.PGSQL.{live.spec.port}.lock"):
        (live.socket_dir / name).unlink(missing_ok=True)
    after.chmod(0o700)
    cut.tables = len(created)
    _verify(env, tmpl, after, cut, acked, log.attempted, kn, list(created))
    shutil.rmtree(w, ignore_errors=True)


def _verify(
    env: EngineEnv,
    tmpl: clu.Cluster,
    after: Path,
    cut: Cut,
    acked: list[int],
    attempted: int,
    kn: powerloss.Knobs,
    created: list[str],
) -> None:
    """A server without the preload on the materialized directory: recovery, every
    acknowledged id, pg_amcheck, TPC-B balances, usertable complete."""
    what = f"cut {cut.number} ({cut.describe()}; {kn.describe()})"
    asrv = _server(clu.Cluster(dataclasses.replace(tmpl.spec), after))
    offset = asrv.log_offset()
    try:
        try:
            asrv.start()
        except clu.ClusterError as e:
            raise CheckFailed(
                f"{what}: the server did not start on the materialized directory: "
                f"{str(e)[-300:]}\n{asrv.log_since(offset)[-2500:]}"
            ) from None
        rlog = asrv.log_since(offset)
        if not any(m in rlog for m in RECOVERY_MARKERS):
            raise CheckFailed(f"{what}: no crash recovery in the server log:\n{rlog[-2000:]}")
        try:
            with asrv.connect(DB) as c:
                present = [r[0] for r in c.execute("SELECT id FROM acks").fetchall()]
                nycsb = c.execute("SELECT count(*) FROM usertable").fetchone()
            verdict = verify_acks(acked, present, 1, attempted)
            if not verdict.ok:
                raise CheckFailed(f"{what}: {verdict.describe()}")
            if nycsb != (YCSB_ROWS,):
                raise CheckFailed(f"{what}: usertable has {nycsb} rows, expected {YCSB_ROWS}")
            with asrv.connect(DB) as c:
                for name in created:
                    got = c.execute(f"SELECT count(*) FROM {name}").fetchone()
                    if got != (NEW_TABLE_ROWS,):
                        raise CheckFailed(
                            f"{what}: table {name}, created before the cut, has {got} rows, "
                            f"expected {NEW_TABLE_ROWS}"
                        )
            cut.history = tpcb_consistency(asrv, DB, SCALE, need_history=False)
        except psycopg.Error as e:
            raise CheckFailed(f"{what}: {type(e).__name__}: {e}") from None
        except CheckFailed as e:
            raise CheckFailed(f"{what}: {e}" if not str(e).startswith(what) else str(e)) from None
        try:
            run_amcheck(
                env, [DB], 300, f"powerloss-amcheck-{cut.number}.log", client_env=asrv.cluster.env()
            )
        except CheckFailed as e:
            raise CheckFailed(f"{what}: {e}") from None
    finally:
        with contextlib.suppress(Exception):
            asrv.stop("immediate")


def powerloss_check(env: EngineEnv, limit: float) -> str:
    why = applies(env.config)
    if why is not None:
        raise CheckSkipped(why)
    try:
        kn = powerloss.knobs()
    except ValueError as e:
        raise CheckFailed(str(e)) from None
    _build()
    rng = random.Random(env.run.seed)
    pmem = env.config.writes_wal_pmem or env.config.persists_data_pmem
    root = osuser.ensure_dir(env.scratch_dir / "powerloss")
    t0 = time.monotonic()
    tmpl = _template(env, root)
    t_tmpl = time.monotonic() - t0
    cuts: list[Cut] = []
    try:
        for n, planned in enumerate(powerloss.plan_cuts(kn.cuts, pmem), start=1):
            frac = rng.random()
            seed = rng.randrange(1, 1 << 31)
            cut = Cut(n, planned.workload, planned.moment, seed if planned.harsh else None)
            try:
                _one_cut(env, tmpl, root, cut, kn, frac)
            except CheckFailed as e:
                if kn.dirs != "strict":
                    raise
                raise CheckFailed(f"{e}\n{STRICT_NOTE}", e.artifacts) from None
            cuts.append(cut)
    finally:
        with contextlib.suppress(Exception):
            tmpl.destroy()
        if not env.run.keep:
            shutil.rmtree(root, ignore_errors=True)
    kinds: dict[str, int] = {}
    for c in cuts:
        if c.landed is not None:
            kinds[c.landed.kind] = kinds.get(c.landed.kind, 0) + 1
    harsh = [c.lines for c in cuts if c.lines is not None]
    return (
        f"{len(cuts)} cuts (seed {env.run.seed}, {kn.describe()}; template {t_tmpl:.0f}s): "
        f"all recovered, every acknowledged commit present ({sum(c.acked for c in cuts)}), "
        f"pg_amcheck clean, TPC-B consistent, usertable complete; landed on "
        f"{', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))}"
        + (
            f"; harsh model on {len(harsh)} cuts: {sum(k for _, k in harsh)} of "
            f"{sum(u for u, _ in harsh)} unpersisted lines kept"
            if harsh
            else ""
        )
        + f" ({'; '.join(c.describe() for c in cuts)})"
    )
