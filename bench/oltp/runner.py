"""``./pgnvm oltp``: set-up, the measurement protocol, raw output, report.

Protocol of one point (configuration C, workload W, clients N, repetition R; for the memory
experiment also shared_buffers = ratio × data):

1. The other storage target's server is stopped; C's settings (the job's common settings,
   C's own, then fsync / synchronous_commit / full_page_writes = on; a TPC-B or YCSB-A, B,
   F point's max_wal_size sized at set-up from the pages its pre-touch modifies,
   :func:`size_pretouch_wal`, recorded as ``max_wal_size``) are written to the target's
   ``pgnvm.conf`` and the server restarts: shared buffers are cold. The server's ``SHOW``
   of the three durability settings is recorded (``durable``), and of its pool (``pool``:
   shared_buffers, nvm_buffer_descriptors) with the shared memory it allocated
   (``shmem_bytes``, from ``pg_shmem_allocations``: the DRAM of the pool and the rest).
   Placement (:mod:`bench.oltp.placement`): at 1 client (``--placement same``, the default)
   the new postmaster is pinned to one vCPU (``taskset -a -cp``: the backends it forks from
   then on inherit it, the auxiliary processes started before stay free) and every pgbench
   of the point runs on the same vCPU (``taskset -c``); a new backend's affinity is checked
   (``backend_cpus``) and the postmaster unpinned after the point (``backend_cpus_after``).
   Points with more clients, and ``--placement free``, run where the scheduler puts them; a
   pin that fails runs free, said in the record (``placement``, ``placement_why``,
   ``placement_fallback``).
2. TPC-B, YCSB-A, B, F (unless ``--no-pretouch``; not YCSB-C, which only reads): ``VACUUM``
   of the tables the pre-touch modifies (:mod:`bench.oltp.pretouch`: what the previous
   points left dead is cleaned, so the tables stay bounded). Data on disk: ``sync``, then
   ``posix_fadvise(DONTNEED)`` on every file of the cluster (the OS page cache is cold too;
   not ``drop_caches``: see results.drop_os_caches). Then ``CHECKPOINT``: every point
   starts right after a checkpoint. Then (the same points) the pre-touch, one ``UPDATE``
   of one row on every heap page of pgbench_accounts, _branches and _tellers (TPC-B) or of
   usertable (YCSB), writes the first-touch full-page images before the warm-up; its
   seconds, pages, rows, FPIs and WAL bytes are recorded (``pretouch``; ``done: false``
   and why where it did not run).
3. Warm-up (:meth:`Runner.warm_up`, docs/oltp.md "The measured window"): the same pgbench
   workload for ``--warmup`` seconds, then in slices of :data:`window.SLICE_S` seconds until
   a slice writes at most ``--fpi-settled`` full-page images per transaction (the
   first-touch FPIs after the checkpoint are written), for at most ``--warmup-max`` seconds;
   each slice's FPIs and checkpoints are recorded (``warmup``). The checkpoints that
   started (server log) between the point's ``CHECKPOINT`` and the window are counted
   (``checkpoints_before_window``): each starts the first-touch FPIs over.
4. Snapshots: ``pg_current_wal_lsn()``, ``pg_stat_wal``, ``pg_stat_checkpointer``,
   ``pg_stat_bgwriter``, ``pg_stat_database`` (this database), /proc of every server
   process, this process's reaped-children CPU (pgbench's).
5. The measured pgbench run, ``--duration`` seconds, per-transaction log. A sampler reads
   /proc of the server's processes every 0.5 s meanwhile, so the CPU of pgbench's
   connections (which exit with it) is seen per backend type (the last sample of an exited
   process counts: at most 0.5 s of its CPU is lost), and where the client backends it saw
   might run (``run_backend_cpus``).
6. Snapshots again (after ``pg_stat_force_next_flush()`` and a second for the other
   processes to flush) and the database's size (``db_bytes_end``: whether the pool's pages,
   in se2's hybrid pool its descriptors, still covered it, ``pool_covers_db``); the log is
   summarised (``window``: WAL records, FPIs, bytes per transaction, checkpoints within it;
   ``window_flags``: a checkpoint in it, a warm-up that did not settle); the log is
   parsed (latency percentiles per operation, per-second throughput), written as
   ``per_second/<point>.csv`` and kept gzipped in ``txlog/``.

se2's hybrid pool (``nvm_se2_hybrid``): shared_buffers is its DRAM slots, set as for every
configuration; its ``nvm_buffer_descriptors`` are sized once per run from the database's
size at set-up (:func:`bench.oltp.settings.hybrid_descriptors`).

Every point is appended to ``runs.jsonl`` at once; Ctrl-C stops the servers and still
writes the report of the finished points.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from bench.core import cluster as clu
from bench.core import configs, counters, paths, procfs, results, servercpu, ui
from bench.core.build import ensure_built
from bench.core.configs import Config
from bench.core.server import stop_quietly
from bench.oltp import (
    pgbench,
    placement,
    plan,
    pretouch,
    profile,
    report,
    settings,
    targets,
    window,
    workloads,
)

RESULTS_DIR = paths.REPO_ROOT / "results"
SAMPLE_INTERVAL = 0.5

_STAT_VIEWS = {
    "wal": "select * from pg_stat_wal",
    "checkpointer": "select * from pg_stat_checkpointer",
    "bgwriter": "select * from pg_stat_bgwriter",
    "database": "select * from pg_stat_database where datname = current_database()",
    # WAL written and flushed, by whom (PostgreSQL 18 counts them in pg_stat_io): a
    # background writer that writes back a page changed since the last flush flushes WAL
    # first, under WALWriteLock, which the committing backends wait for
    "wal_io": "select "
    + ", ".join(
        f"coalesce(sum({col}) filter (where backend_type = '{who}'), 0) as {tag}_{col}"
        for who, tag in (
            ("client backend", "backends"),
            ("background writer", "bgwriter"),
            ("walwriter", "walwriter"),
            ("checkpointer", "checkpointer"),
        )
        for col in ("writes", "fsyncs")
    )
    + " from pg_stat_io where object = 'wal'",
}


def numeric_row(conn: psycopg.Connection, sql: str) -> dict[str, float]:
    """The numeric columns of the first row of ``sql``."""
    cur = conn.execute(sql)
    row = cur.fetchone()
    if row is None or cur.description is None:
        return {}
    return {
        d.name: float(v)
        for d, v in zip(cur.description, row, strict=True)
        if isinstance(v, int | float | Decimal) and not isinstance(v, bool)
    }


def stats_snapshot(conn: psycopg.Connection) -> dict[str, Any]:
    """The statistics views of :data:`_STAT_VIEWS` and the WAL position."""
    conn.execute("select pg_stat_clear_snapshot()")
    snap: dict[str, Any] = {k: numeric_row(conn, q) for k, q in _STAT_VIEWS.items()}
    snap["lsn"] = str(conn.execute("select pg_current_wal_lsn()").fetchone()[0])  # type: ignore[index]
    return snap


NvmReading = tuple[dict[str, int] | None, dict[str, int] | None]


def nvm_snapshot(conn: psycopg.Connection, schema: str | None) -> NvmReading | str:
    """pgnvm's counters and ``pgnvm_pool()`` (the copies, demotions and write-backs of se2's
    pool), every process's since the server started: shared counters, current at once (no
    statistics flush to wait for), so they are read right at the window's ends. (None, None)
    without the extension; the error's text where the server's pgnvm cannot give them (an
    older build's: no pgnvm_pool(), a counter missing): the run goes on without them. A
    broken connection raises."""
    if schema is None:
        return (None, None)
    try:
        c = counters.read_counters(conn, schema)
    except psycopg.Error as e:
        if conn.broken or conn.closed:
            raise
        return f"pgnvm_counters(): {e}".strip()
    try:
        pool: dict[str, int] | None = counters.read_pool(conn, schema)
    except psycopg.Error:
        if conn.broken or conn.closed:
            raise
        pool = None  # pgnvm < 1.6: the counters alone (run_delta)
    return (c, pool)


def nvm_window(
    before: NvmReading | str, after: NvmReading | str
) -> tuple[dict[str, int] | None, str | None]:
    """A window's pgnvm counters from two :func:`nvm_snapshot` readings: (their differences,
    :func:`bench.core.counters.run_delta`, None without the extension; None) or (None, the
    error of a reading that failed)."""
    if isinstance(before, str):
        return None, before
    if isinstance(after, str):
        return None, after
    return counters.run_delta(before, after), None


#: client backends other than the asking one: pgbench's, while they last
_OTHER_CLIENTS = (
    "select count(*) from pg_stat_activity "
    "where backend_type = 'client backend' and pid <> pg_backend_pid()"
)


def await_flushed(conn: psycopg.Connection, timeout: float = 30.0) -> bool:
    """Wait until pgbench's backends have exited, so that their statistics (pg_stat_wal's
    FPIs among them) are in the shared counters: a backend flushes them in a
    before_shmem_exit callback, before its pg_stat_activity entry goes (on_shmem_exit);
    a fixed sleep may be too short on a busy machine. False if some remained after
    ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        conn.execute("select pg_stat_clear_snapshot()")
        row = conn.execute(_OTHER_CLIENTS).fetchone()
        if not row or row[0] == 0:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def stats_delta(conn: psycopg.Connection, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        k: {c: round(b[k][c] - v, 3) for c, v in a[k].items() if c in b[k]} for k in _STAT_VIEWS
    }
    row = conn.execute("select pg_wal_lsn_diff(%s, %s)", (b["lsn"], a["lsn"])).fetchone()
    out["wal_bytes"] = int(row[0]) if row else None
    return out


def pgnvm_per_txn(delta: dict[str, int] | None, transactions: int) -> dict[str, float] | None:
    """pgnvm's counters of a window per transaction (what a backend or the background writer
    did for each: copies, demotions, write-backs, pages read in place); the pool's levels
    (:data:`bench.core.counters.POOL_LEVELS`) are not rates and are left out. None without
    counters or transactions."""
    if not delta or not transactions:
        return None
    return {
        k: round(v / transactions, 4)
        for k, v in delta.items()
        if k not in counters.POOL_LEVELS and k not in counters.DERIVED
    }


class CpuSampler:
    """/proc of every server process every :data:`SAMPLE_INTERVAL` seconds while a run
    lasts; :meth:`delta` gives CPU seconds per backend type over the run."""

    def __init__(self, postmaster: int) -> None:
        self.pm = postmaster
        self.before = servercpu.cluster_sample(postmaster, set(), {})
        self.last: dict[int, tuple[str, procfs.ProcSample]] = {}
        #: client backends seen: where each may run (``Cpus_allowed_list``, read once)
        self.affinity: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _tick(self) -> None:
        for pid, (group, s) in servercpu.cluster_sample(self.pm, set(), {}).procs.items():
            prev = self.last.get(pid)
            if prev is not None and prev[1].starttime == s.starttime:
                if s.utime + s.stime < prev[1].utime + prev[1].stime:
                    continue  # read while exiting: keep the last full sample
                if group == "unknown":  # an exiting process has no title any more
                    group = prev[0]
            self.last[pid] = (group, s)
            if group == "client backend" and pid not in self.affinity:
                cpus = procfs.cpus_allowed(pid)
                if cpus is not None:
                    self.affinity[pid] = cpus

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL):
            self._tick()

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def backend_cpus(self) -> list[str]:
        """The distinct CPU lists the client backends seen during the run might run on
        (pgbench's and the job's own connection): ``["0"]`` when all were pinned to CPU 0."""
        return sorted(set(self.affinity.values()))

    def delta(self) -> dict[str, Any]:
        self._tick()
        after = servercpu.ClusterSample(procfs.sample(self.pm), dict(self.last))
        return servercpu.cluster_delta(self.before, after)


def shmem_bytes(conn: psycopg.Connection) -> int | None:
    """Bytes of shared memory the server allocated (``pg_shmem_allocations``, the unused
    rest left out): Buffer Blocks (the DRAM pages, in se2's hybrid pool its slots), the
    descriptors and everything else. None where the view cannot be read."""
    try:
        row = conn.execute(
            "select sum(allocated_size) from pg_shmem_allocations where name is not null"
        ).fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


def backend_cpus(srv: Any) -> str | None:
    """Where a backend the server forks now may run: the ``Cpus_allowed_list`` of a new
    connection's backend (None if it cannot be asked)."""
    try:
        with srv.connect() as conn:
            row = conn.execute("select pg_backend_pid()").fetchone()
            return procfs.cpus_allowed(int(row[0])) if row else None
    except psycopg.Error:
        return None


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Runner:
    def __init__(self, opts: plan.Options) -> None:
        self.o = opts
        plan.check(opts)
        self.chosen = opts.chosen
        self.configs: list[Config] = []
        self.unavailable: dict[str, str] = {}
        self.unknown: dict[str, str] = {}  # runs, but availability unknown: why
        self.targets: dict[str, targets.Target] = {}
        self.records: list[dict[str, Any]] = []
        self.env: dict[str, Any] = {}
        self.started = dt.datetime.now()
        self.out = opts.out or RESULTS_DIR / f"{self.started:%Y%m%d-%H%M%S}-oltp"
        self.bindir = paths.install_dir("release") / "bin"
        self.mem_sb: dict[str, str] = {}  # ratio -> shared_buffers
        #: storage -> bytes of the database at set-up (sizes se2's hybrid pool)
        self.db_bytes: dict[str, int] = {}
        #: pre-touch group (:func:`pretouch.wal_group`) -> storage -> the max_wal_size of its
        #: points and what it was sized from (:func:`size_pretouch_wal`)
        self.pretouch_wal: dict[str, dict[str, dict[str, Any]]] = {}
        self.seen_durations: list[float] = []

    # ---- set-up

    def setup(self) -> None:
        o = self.o
        warn = plan.size_warning(o)
        if warn:
            ui.notice(warn)
        if o.build:
            self.bindir = ensure_built("release") / "bin"
        elif not (self.bindir / "postgres").is_file():
            raise RuntimeError(f"--no-build: no release build in {self.bindir}; run ./pgnvm build")
        if not (self.bindir / "pgbench").is_file():
            raise RuntimeError(f"no pgbench in {self.bindir}")
        sel = self.chosen.judge(self.bindir)
        self.configs = sel.run
        self.unavailable = sel.refused
        self.unknown = sel.unknown
        self.env = results.environment()
        self.env["load"] = {}
        for storage in sorted({c.storage for c in self.configs}, key=["nvm", "disk"].index):
            tg = targets.Target(storage, o.records, o.prefix, o.port)
            self.env["load"][storage] = tg.ensure()
            self.targets[storage] = tg
        data_bytes = max(t.data_bytes for t in self.targets.values())
        if "tpcb" in o.workloads:
            scale = targets.tpcb_scale(data_bytes)
            for tg in self.targets.values():
                self.env["load"][f"{tg.storage}-tpcb"] = tg.ensure_tpcb(scale)
            self.env["tpcb_scale"] = scale
        for group in plan.wal_groups(o):
            self.pretouch_wal[group] = {
                tg.storage: size_pretouch_wal(tg, group) for tg in self.targets.values()
            }
        self.env["data_bytes"] = {s: t.data_bytes for s, t in self.targets.items()}
        self.db_bytes = {s: t.db_bytes for s, t in self.targets.items()}
        self.env["db_bytes"] = dict(self.db_bytes)
        self.mem_sb = {r: plan.ratio_shared_buffers(r, data_bytes) for r in o.memory_ratios}
        self.env["clusters"] = {s: t.name for s, t in self.targets.items()}
        self.env["datadirs"] = {s: str(t.server.cluster.datadir) for s, t in self.targets.items()}
        for s, t in self.targets.items():
            self.env.setdefault("filesystems", {})[s] = results.cmd(
                "findmnt", "-n", "-o", "SOURCE,FSTYPE,OPTIONS", "-T", str(t.server.cluster.datadir)
            )
        self.env["pgbench"] = results.cmd(str(self.bindir / "pgbench"), "--version")

    def descriptors(self, cfg: Config, shared_buffers: str) -> str | None:
        """``nvm_buffer_descriptors`` this job sizes for ``cfg`` at ``shared_buffers`` (se2's
        hybrid pool: :func:`settings.hybrid_descriptors` of the database at set-up), else
        None (the configuration's own, if any)."""
        if cfg.descriptors != configs.SB_WHOLE_DB:
            return None
        return settings.hybrid_descriptors(self.db_bytes[cfg.storage], shared_buffers)

    def point_settings(
        self, cfg: Config, shared_buffers: str, workload: str | None = None
    ) -> dict[str, str]:
        """The settings of a point of ``cfg`` at ``shared_buffers``; a pre-touched workload's
        point (TPC-B, YCSB-A, B, F) has the max_wal_size sized for its cluster
        (:func:`size_pretouch_wal`)."""
        s = settings.server_settings(cfg, shared_buffers, self.descriptors(cfg, shared_buffers))
        sized = self.pretouch_wal.get(pretouch.wal_group(workload or "") or "", {})
        if cfg.storage in sized:
            s["max_wal_size"] = sized[cfg.storage]["max_wal_size"]
        return s

    def hybrid_doc(self) -> dict[str, Any]:
        """plan.json's account of the hybrid pools of this run: the database size at set-up
        the rule started from, and the pool (slots and descriptors) of each experiment."""
        pools: list[tuple[str, str]] = [("main", self.o.shared_buffers)] if self.o.workloads else []
        pools += list(self.mem_sb.items())
        out: dict[str, Any] = {}
        for c in self.configs:
            if self.descriptors(c, self.o.shared_buffers) is None:
                continue
            out[c.name] = {
                "db_bytes_at_setup": self.db_bytes[c.storage],
                "growth_headroom": settings.GROWTH_HEADROOM,
                "pools": {
                    what: {"shared_buffers": sb, "nvm_buffer_descriptors": self.descriptors(c, sb)}
                    for what, sb in pools
                },
            }
        return out

    def plan_doc(self) -> dict[str, Any]:
        o = self.o
        return {
            "records": o.records,
            "clients": o.clients,
            "workloads": {w: workloads.WORKLOADS[w].describe() for w in o.workloads},
            "distribution": o.distribution,
            "distribution_detail": workloads.DISTRIBUTIONS[o.distribution],
            "duration_s": o.duration,
            "warmup_s": o.warmup,
            "warmup_max_s": o.warmup_max,
            "fpi_settled": o.fpi_settled,
            "pretouch": o.pretouch,
            "pretouch_tables": {w: [t for t, _ in pretouch.TABLES[w]] for w in pretouch.TABLES},
            "repeat": o.repeat,
            "placement": str(o.placement),
            "shared_buffers": o.shared_buffers,
            "memory_ratios": {r: self.mem_sb.get(r) for r in o.memory_ratios},
            "memory_workload": workloads.MEMORY_WORKLOAD,
            "memory_clients": max(o.clients),
            "configs": [
                {
                    "name": c.name,
                    "engine": c.engine,
                    "storage": c.storage,
                    "doc": c.doc,
                    "drop_caches": c.drop_caches,
                    "server_settings": self.point_settings(c, o.shared_buffers),
                }
                for c in self.configs
            ],
            "hybrid_pool": self.hybrid_doc(),
            "tpcb_wal": self.pretouch_wal.get("tpcb", {}),
            "ycsb_wal": self.pretouch_wal.get("ycsb", {}),
            "unavailable": self.unavailable,
            "availability_unknown": self.unknown,
            "durable_settings": settings.DURABLE,
            "random_seed": workloads.RANDOM_SEED,
            "fillfactor": settings.FILLFACTOR,
            "started_at": self.started.isoformat(timespec="seconds"),
        }

    # ---- one point

    def run_point(self, p: plan.Point) -> dict[str, Any]:
        o = self.o
        cfg = next(c for c in self.configs if c.name == p.config)
        tg = self.targets[cfg.storage]
        w = workloads.WORKLOADS[p.workload]
        for other in self.targets.values():
            if other is not tg:
                other.server.stop()
        sb = self.mem_sb[p.ratio] if p.ratio else o.shared_buffers
        written = self.point_settings(cfg, sb, p.workload)
        rec: dict[str, Any] = {
            "started_at": dt.datetime.now().isoformat(timespec="seconds"),
            "key": p.key,
            "config": p.config,
            "engine": cfg.engine,
            "storage": cfg.storage,
            "workload": p.workload,
            "distribution": p.distribution if w.ycsb else "uniform (pgbench tpcb-like)",
            "clients": p.clients,
            "rep": p.rep,
            "ratio": p.ratio,
            "shared_buffers": sb,
            "nvm_buffer_descriptors": written.get("nvm_buffer_descriptors"),
            "max_wal_size": written["max_wal_size"],
            "status": "error",
            "loadavg_1m": procfs.loadavg(),
        }
        srv = tg.server
        srv.apply_config(cfg, written)
        log_offset = srv.log_offset()
        try:
            rec["restart_s"] = round(srv.restart(move_port=True), 3)
        except clu.ClusterError as e:
            rec["error"] = f"server did not start: {e}"
            rec["server_log_tail"] = srv.log_tail(30)
            ui.error(f"{p.config}: {rec['error']}")
            return rec
        placed = placement.PointPlacement(o.placement, p.clients)
        rec.update(placed.apply(srv.postmaster_pid(), lambda: backend_cpus(srv)))
        if placed.warning:
            ui.error(f"{p.label}: placement: {placed.warning}")
        try:
            self.measure(p, cfg, srv, rec, written, log_offset, placed)
        finally:
            rec.update(placed.undo(lambda: backend_cpus(srv)))
            if "unpin_error" in rec:
                ui.error(f"{p.label}: undoing the pin: {rec['unpin_error']}")
        return rec

    def measure(
        self,
        p: plan.Point,
        cfg: Config,
        srv: Any,
        rec: dict[str, Any],
        written: dict[str, str],
        log_offset: int,
        placed: placement.PointPlacement,
    ) -> None:
        """The point after its server started and was placed (``rec`` takes the results):
        durability and pool as shown, caches, CHECKPOINT, warm-up, the measured run."""
        o = self.o
        w = workloads.WORKLOADS[p.workload]
        touch = pretouch.applies(p.workload, o.pretouch)
        with srv.connect() as conn:
            shown = {k: srv.show(k) for k in settings.DURABLE}
            rec["durability"] = shown
            rec["durable"] = shown == settings.DURABLE
            rec["pool"] = {k: srv.show(k) for k in ("shared_buffers", "nvm_buffer_descriptors")}
            rec["max_wal_size_shown"] = srv.show("max_wal_size")
            rec["shmem_bytes"] = shmem_bytes(conn)
            try:
                nvm_schema, rec["pgnvm_extension"] = counters.ensure_extension(
                    conn, targets.EXT_SCHEMA
                )
            except psycopg.Error as e:  # the numbers do not depend on it: go on without
                nvm_schema, rec["pgnvm_extension"] = None, f"failed: {e}".strip()
            rec["pgnvm_schema"] = nvm_schema
            if cfg.writes_wal_pmem:
                rec["wal_pmem"] = _wal_pmem(srv.log_since(log_offset))
            vacuum_s = _vacuum(conn, p.workload) if touch else None
            rec["os_cache"] = (
                results.drop_os_caches(srv.cluster.datadir) if cfg.drop_caches else "kept"
            )
            conn.execute("checkpoint")
            after_checkpoint = srv.log_offset()
            if touch:
                rec["pretouch"] = {"vacuum_s": vacuum_s, **pre_touch(conn, p.workload)}
            else:
                rec["pretouch"] = pretouch.skipped(p.workload, o.pretouch)
        scripts = workloads.write_scripts(w, p.distribution, self.out / "scripts")
        cluster = srv.cluster

        def bench(
            seconds: float, log: Path | None, seed: int = workloads.RANDOM_SEED
        ) -> subprocess.CompletedProcess[str]:
            cmd = pgbench.command(
                cluster.bin("pgbench"),
                scripts,
                clients=p.clients,
                threads=os.cpu_count() or 1,
                seconds=seconds,
                records=o.records,
                dbname=targets.DBNAME,
                log_prefix=log,
                seed=seed,
            )
            cmd = placed.command(cmd)
            if log is not None:
                rec["command"] = " ".join(cmd)
            return subprocess.run(
                cmd, env=cluster.env(), capture_output=True, text=True, check=False
            )

        warm = self.warm_up(srv, bench)
        rec["warmup"] = warm
        if "error" in warm:
            rec["error"] = warm["error"]
            return
        logdir = self.out / "txlog"
        logdir.mkdir(parents=True, exist_ok=True)
        prefix = logdir / f"{p.key}-rep{p.rep}"
        for f in pgbench.log_files(prefix):
            f.unlink()
        pm = srv.postmaster_pid()
        rec["checkpoints_before_window"] = pretouch.checkpoints_started(
            srv.log_since(after_checkpoint)
        )
        with srv.connect() as conn:
            s0 = stats_snapshot(conn)
            sampler = CpuSampler(pm) if pm else None
            prof = (
                profile.PointProfile(srv.connect, self.out / "perf" / f"{p.key}.data")
                if o.profile and p.rep == 1
                else None
            )
            with sampler or contextlib.nullcontext(), prof or contextlib.nullcontext():
                n0 = nvm_snapshot(conn, nvm_schema)
                # pgbench's CPU alone: perf (a child too) is still running, not yet waited for
                cpu0 = children_cpu()
                t0 = time.monotonic()
                r = bench(o.duration, prefix)
                rec["elapsed_s"] = round(time.monotonic() - t0, 3)
                rec["pgbench_cpu_s"] = round(children_cpu() - cpu0, 3)
                n1 = nvm_snapshot(conn, nvm_schema)
            if prof is not None:
                rec["profile"] = prof.record()
            if sampler:
                rec["server_cpu"] = sampler.delta()
                rec["run_backend_cpus"] = sampler.backend_cpus()
            conn.execute("select pg_stat_force_next_flush()")
            rec["stats_flushed"] = await_flushed(conn)
            time.sleep(1.0)
            rec["stats"] = stats_delta(conn, s0, stats_snapshot(conn))
            rec["stats"]["pgnvm"], nvm_error = nvm_window(n0, n1)
            if nvm_error is not None:
                rec["pgnvm_error"] = nvm_error
            rec["db_bytes_end"] = targets.database_size(conn)
            rec["pool_covers_db"] = configs.pool_pages_bytes(written) >= rec["db_bytes_end"]
        rec["pgbench_exit"] = r.returncode
        rec["pgbench_stdout"] = r.stdout[-3000:]
        if r.returncode != 0:
            rec["error"] = f"pgbench exit {r.returncode}: {r.stderr.strip()[-800:]}"
        rec["summary"] = pgbench.parse_summary(r.stdout)
        files = pgbench.log_files(prefix)
        st = pgbench.parse_logs(files, workloads.script_names(w))
        if files:
            (self.out / "per_second").mkdir(exist_ok=True)
            secs = [st.seconds[k] for k in sorted(st.seconds)]
            pgbench.write_per_second(secs, self.out / "per_second" / f"{p.key}-rep{p.rep}.csv")
            pgbench.compress_logs(files, logdir / f"{p.key}-rep{p.rep}.log.gz")
        rec["latency"] = pgbench.latency_summary(st.all_latencies())
        rec["latency_by_op"] = {
            st.scripts[i] if i < len(st.scripts) else str(i): pgbench.latency_summary(sorted(v))
            for i, v in sorted(st.latencies.items())
        }
        rec["per_second"] = pgbench.per_second_summary(st.full_seconds())
        rec["transactions"] = sum(len(v) for v in st.latencies.values())
        rec["failed"] = st.failed
        rec["tps"] = rec["summary"].get("tps")
        if rec["transactions"] and rec["stats"].get("wal_bytes") is not None:
            rec["wal_bytes_per_txn"] = round(rec["stats"]["wal_bytes"] / rec["transactions"], 1)
        rec["window"] = window.summary(rec["stats"], rec["transactions"])
        rec["pgnvm_per_txn"] = pgnvm_per_txn(rec["stats"].get("pgnvm"), rec["transactions"])
        rec["window_flags"] = window.flags(rec["window"], warm, rec["checkpoints_before_window"])
        if r.returncode == 0 and rec["transactions"]:
            rec["status"] = "ok"

    def warm_up(
        self,
        srv: Any,
        bench: Callable[[float, Path | None, int], subprocess.CompletedProcess[str]],
    ) -> dict[str, Any]:
        """The point's warm-up (docs/oltp.md, "The measured window"): slices of the same
        workload as :func:`window.next_slice` decides, each measured by pg_stat_wal (FPIs per
        transaction), until one writes at most ``--fpi-settled`` FPIs per transaction or
        ``--warmup-max`` seconds are spent. The account of it, with "error" if pgbench
        failed."""
        o = self.o
        out: dict[str, Any] = {"threshold": o.fpi_settled, "seconds": 0.0, "slices": []}
        spent, last = 0.0, None
        with srv.connect() as conn:
            nxt = window.next_slice
            while (sec := nxt(spent, last, o.warmup, o.warmup_max, o.fpi_settled)) is not None:
                s0 = stats_snapshot(conn)
                seed = window.slice_seed(workloads.RANDOM_SEED, len(out["slices"]))
                r = bench(sec, None, seed)
                if r.returncode != 0:
                    out["error"] = (
                        f"warm-up: pgbench exit {r.returncode}: {r.stderr.strip()[-500:]}"
                    )
                    return out
                flushed = await_flushed(conn)
                d = stats_delta(conn, s0, stats_snapshot(conn))
                txns = pgbench.parse_summary(r.stdout).get("transactions", 0.0)
                last = window.fpi_per_txn(d["wal"], txns)
                spent += sec
                out["slices"].append(
                    {
                        "seconds": sec,
                        "seed": seed,
                        "transactions": int(txns),
                        "fpi_per_txn": None if last is None else round(last, 4),
                        "checkpoints": window.checkpoints(d["checkpointer"]),
                        "flushed": flushed,
                    }
                )
        out["seconds"] = spent
        out["last_fpi_per_txn"] = None if last is None else round(last, 4)
        out["settled"] = window.settled(last, o.fpi_settled)
        return out

    # ---- main loop

    def run(self) -> int:
        self.setup()
        self.out.mkdir(parents=True, exist_ok=True)
        ui.info(f"results: {self.out}")
        results.write_json(self.out / "plan.json", self.plan_doc())
        results.write_json(self.out / "env.json", self.env)
        pts = plan.points(self.o, [c.name for c in self.configs])
        interrupted = False
        prog = results.Progress(len(pts), "oltp")
        prog.every = 1
        est = plan.point_seconds(self.o)
        try:
            with prog, open(self.out / "runs.jsonl", "a") as jl:
                for i, p in enumerate(pts):
                    per = (
                        sum(self.seen_durations) / len(self.seen_durations)
                        if self.seen_durations
                        else est
                    )
                    prog.update(i, p.label, per * (len(pts) - i))
                    t = time.monotonic()
                    rec = self.run_point(p)
                    self.seen_durations.append(time.monotonic() - t)
                    self.records.append(rec)
                    jl.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
                    jl.flush()
                    prog.done_one(i + 1, _line(i + 1, len(pts), p, rec))
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            stop_quietly(t.server for t in self.targets.values())
            self.finish(interrupted)
        return 1 if any(r["status"] != "ok" for r in self.records) else 0

    def finish(self, interrupted: bool) -> None:
        if not self.out.is_dir():
            return
        self.env["finished_at"] = dt.datetime.now().isoformat(timespec="seconds")
        self.env["interrupted"] = interrupted
        results.write_json(self.out / "env.json", self.env)
        try:
            report.write(self.out, self.plan_doc(), self.env, self.records)
            if self.o.profile:
                (self.out / "profile.md").write_text(profile.render(self.records))
        except Exception as e:  # the raw files are what matters; say what failed
            ui.error(f"writing the report failed: {type(e).__name__}: {e}")
        ui.info(f"results in {self.out} (report.md, report.html, runs.jsonl, per_second/)")


def size_pretouch_wal(tg: targets.Target, group: str) -> dict[str, Any]:
    """The max_wal_size of the points of pre-touch group ``group`` (``tpcb``, ``ycsb``:
    :func:`pretouch.wal_group`) on target ``tg`` (:func:`settings.pretouch_max_wal_size` of
    the heap pages its pre-touch modifies, counted at set-up) and what it was sized from.
    Where the file system of the cluster's WAL directory (``pg_wal``, on nvm the tmpfs)
    cannot hold that much WAL besides what it holds now, it is cut to fit
    (:func:`settings.fit_pretouch_max_wal_size`; a NOTICE says so and ``cut_from`` records
    the size it was cut from); RuntimeError when even
    :data:`settings.PRETOUCH_WAL_FACTOR` × the pre-touch's full-page images do not fit
    (:func:`settings.wal_space_shortfall`)."""
    pages = tg.pretouch_pages[group]
    size = settings.pretouch_max_wal_size(pages)
    wal_dir = (tg.server.cluster.datadir / "pg_wal").resolve()
    fs = os.statvfs(wal_dir)
    free = fs.f_bavail * fs.f_frsize
    wal = sum(f.stat().st_size for f in wal_dir.iterdir() if f.is_file())
    title = pretouch.WAL_GROUP_TITLES[group]
    fitted = settings.fit_pretouch_max_wal_size(size, pages, free, wal)
    if fitted is None:
        raise RuntimeError(
            f"{tg.name}: {title}'s max_wal_size is sized from its "
            f"{pages:,} pre-touched pages "
            f"(max({settings.PRETOUCH_WAL_MIN}, {settings.PRETOUCH_WAL_FACTOR} × their full-page "
            f"images)), and {settings.wal_space_shortfall(size, free, wal)} ({wal_dir}), nor "
            f"does {settings.PRETOUCH_WAL_FACTOR} × their full-page images within "
            f"{settings.WAL_ROOM_SHARE:.0%} of it. Free space there, or run fewer --records."
        )
    sized: dict[str, Any] = {
        "pretouch_pages": pages,
        "fpi_bytes": pages * 8192,
        "factor": settings.PRETOUCH_WAL_FACTOR,
        "minimum": settings.PRETOUCH_WAL_MIN,
        "max_wal_size": fitted,
        "wal_dir": str(wal_dir),
        "wal_dir_free_bytes": free,
        "wal_bytes_at_setup": wal,
    }
    if fitted != size:
        sized["cut_from"] = size
        ui.notice(
            f"{tg.name}: {title}'s points run with max_wal_size {fitted}, cut from {size}: "
            f"{settings.wal_space_shortfall(size, free, wal)} ({wal_dir}); {fitted} is "
            f"{settings.WAL_ROOM_SHARE:.0%} of that and still holds "
            f"{settings.PRETOUCH_WAL_FACTOR} × the pre-touch's "
            f"{pages * 8192 / settings.MB:,.0f} MB of full-page images"
        )
    return sized


def _vacuum(conn: psycopg.Connection, workload: str) -> float:
    """The pre-touch's VACUUM (before the point's CHECKPOINT); its seconds."""
    t0 = time.monotonic()
    conn.execute(pretouch.vacuum_sql(workload))
    return round(time.monotonic() - t0, 3)


def pre_touch(conn: psycopg.Connection, workload: str) -> dict[str, Any]:
    """The pre-touch of a point (:mod:`bench.oltp.pretouch`), right after its CHECKPOINT:
    per table the pages it had, the rows the UPDATE changed (one per page with a live row)
    and the seconds; in all the seconds, and from pg_stat_wal (this connection's own
    counters, flushed before they are read) the full-page images, records and bytes it
    wrote, and the checkpoints started and done meanwhile."""
    conn.execute("select pg_stat_force_next_flush()")  # the VACUUM's counters out of the way
    s0 = stats_snapshot(conn)
    tables: dict[str, Any] = {}
    t0 = time.monotonic()
    for table, column in pretouch.TABLES[workload]:
        row = conn.execute(pretouch.PAGES_SQL, (table,)).fetchone()
        t1 = time.monotonic()
        cur = conn.execute(pretouch.update_sql(table, column))
        tables[table] = {
            "pages": int(row[0]) if row else None,
            "rows": cur.rowcount,
            "seconds": round(time.monotonic() - t1, 3),
        }
    seconds = round(time.monotonic() - t0, 3)
    conn.execute("select pg_stat_force_next_flush()")  # our WAL counters, at the next idle
    d = stats_delta(conn, s0, stats_snapshot(conn))
    wal = d["wal"]
    return {
        "done": True,
        "seconds": seconds,
        "tables": tables,
        "pages": sum(t["pages"] or 0 for t in tables.values()),
        "rows": sum(t["rows"] for t in tables.values()),
        "wal_fpi": int(wal.get("wal_fpi", 0)),
        "wal_records": int(wal.get("wal_records", 0)),
        "wal_bytes": d["wal_bytes"],
        "checkpoints": window.checkpoints(d["checkpointer"]),
    }


def _wal_pmem(log_text: str) -> dict[str, Any]:
    """How WAL was persisted through libpmem2 at this start (the server's LOG line)."""
    m = counters.wal_pmem_logged(log_text)
    if m is None:
        return {"granularity": "unknown (no start-up LOG line)", "forced": False}
    return {"granularity": m.group("gran"), "forced": bool(m.group("forced"))}


def _line(i: int, n: int, p: plan.Point, rec: dict[str, Any]) -> str:
    if rec["status"] != "ok":
        return f"[{i}/{n}] {p.label}: {rec['status'].upper()} {rec.get('error') or ''}"
    lat = rec.get("latency") or {}
    return (
        f"[{i}/{n}] {p.label}: {rec['tps']:.0f} tps, p50 {lat.get('p50_ms')} ms, "
        f"p99 {lat.get('p99_ms')} ms, WAL {rec.get('wal_bytes_per_txn')} B/txn, "
        f"placement {rec.get('placement')}"
    )


def run(opts: plan.Options) -> int:
    return Runner(opts).run()
