"""``./pgnvm tpch``: set-up, the measurement protocol, raw output, report.

Protocol of one run (configuration C, query Q, repetition R) with the default method,
``cold`` (``--method``, :mod:`bench.tpch.methods`: ``prewarm`` prewarms every configuration
in step 1, ``warm`` restarts once per configuration and discards a warm-up run per query):

1. The other storage target's server is stopped; C's settings are written to its target's
   ``pgnvm.conf``; the server is restarted (stop -m fast, start): shared buffers are cold.
   ``mem_limit``: every table and index is then loaded with ``pg_prewarm`` in a separate
   connection, which is closed and whose backend has exited before the run goes on.
   Data on disk: ``sync``, then ``posix_fadvise(DONTNEED)`` on every file of the cluster
   (not ``drop_caches``, which would slow the tmpfs configurations: results.drop_os_caches).
2. A fresh connection: ``pg_backend_pid()``, ``statement_timeout``, backend types of the
   server processes (``pg_stat_activity``), ``pg_stat_force_next_flush()`` (this session's
   start-up I/O is flushed to the shared statistics when that statement ends) and a
   ``pg_stat_io`` snapshot.
3. /proc samples of every thread of the backend (``/proc/<pid>/task/<tid>``) and of every
   other server process; hardware/software counters attached to the backend's main thread;
   the DRAM sampler starts (:mod:`bench.core.dram`: resident shared memory of the server,
   private memory of the backend, every 50 ms until the result is in);
   the query is sent; wall-clock = from sending it until its whole result has arrived
   (psycopg returns after libpq has received all rows; converting them to Python objects is
   not timed); counters and /proc samples are read again. The backend's main thread (tid ==
   pid) is the computation thread (``backend``); its other threads are prefetch helpers
   (``helpers``: nvm_prefetch = helper creates them in the query and they live until the
   connection closes, so the second sample still sees them). Parallel workers are other
   processes: their CPU, with their own helpers', is in ``others``.
4. ``pg_stat_force_next_flush()`` again, so the backend flushes the query's I/O statistics
   when that statement ends, then the second ``pg_stat_io`` snapshot: the ``client
   backend`` rows of the delta are this query's I/O exactly. Other processes (checkpointer,
   I/O workers, ...) flush on their own schedule, so their rows are "as of their last flush".
   Configurations with helpers: ``pgnvm_prefetch()`` (the pool's counters and placement).
   Every configuration whose database has extension pgnvm (created in schema ``pgnvm`` at
   set-up when the build has it; base has it too, and counts nothing): the delta of pgnvm's
   counters (``pgnvm_counters()``, the columns of ``pgnvm_stats``) and of the slot clock's
   counters of ``pgnvm_pool()``, read before step 2's flush and after this one's (the pool
   outside the counters' interval, so that neither reading's catalog look-ups are in the
   other's delta). Scope: the whole server, as ``pgnvm_stats`` reports it (every process's
   slot summed: the backend with its helper threads, parallel and I/O workers, the
   checkpointer), not the backend alone (:data:`NVM_SCOPE`).
5. The answer is compared with the first answer of the same query (any configuration).

Order: for each repetition, for each query, every configuration in turn (configurations
interleave, so slow drift of the machine affects them alike; every run restarts its server
anyway, so interleaving costs nothing). Every run is appended to ``runs.jsonl`` and
``runs.csv`` at once; Ctrl-C stops the servers and still writes the report of the finished
runs.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors

from bench.core import cluster as clu
from bench.core import (
    configs,
    counters,
    dram,
    otherwork,
    paths,
    procfs,
    results,
    selection,
    topology,
    ui,
)
from bench.core.build import ensure_built
from bench.core.configs import Config
from bench.core.server import stop_quietly
from bench.tpch import compare, data, measure, methods, profile, queries, report, targets
from bench.tpch.report import statistics as stats
from bench.tpch.settings import (
    BUDGET_S,
    DEFAULT_PORT,
    DEFAULT_PREFIX,
    SETUP_S_PER_SF,
    Common,
    dram_shortfall,
    estimate_seconds,
    server_settings,
)
from bench.tpch.settings import job as tpch_job

PERTURB_ENV = "PGNVM_TPCH_PERTURB"  # test hook: "config:query[,config:query...]"
PREFIX_ENV = "PGNVM_TPCH_CLUSTER_PREFIX"  # tests: clusters of their own
RESULTS_DIR = paths.REPO_ROOT / "results"

CSV_FIELDS = [
    "started_at",
    "config",
    "engine",
    "storage",
    "query",
    "rep",
    "status",
    "wall_s",
    "rows",
    "answer",
    "backend_utime_s",
    "backend_stime_s",
    "kernel_share",
    "backend_runtime_s",
    "minflt",
    "majflt",
    "vcsw",
    "nvcsw",
    "helper_threads",
    "helper_utime_s",
    "helper_stime_s",
    "helper_minflt",
    "pf_scheme",
    "pf_jobs_enqueued",
    "pf_jobs_dropped",
    "pf_jobs_skipped",
    "pf_fault_errors",
    "pf_helper_cpu_ms",
    "others_cpu_s",
    "io_worker_cpu_s",
    "exited_children_cpu_s",
    "client_reads",
    "client_read_bytes",
    "client_hits",
    "warmup",
    "restart_s",
    "prewarm_s",
    "dram_shared_mb",
    "dram_backend_mb",
    "dram_total_mb",
    "dram_hugetlb_touched_mb",
    "dram_hugetlb_reserved_mb",
    "os_cache",
    "loadavg_1m",
    "other_cpu_s",
    "error",
    *measure.counter_names(),
]
#: pgnvm's counters of a run (rec["pgnvm_stats"]) in runs.csv: nvm_<counter>, empty where
#: the server has no extension pgnvm (or an older one without pgnvm_pool(): nvm_<pool>)
NVM_KEYS: tuple[str, ...] = (*counters.COUNTERS, *counters.POOL_COUNTERS, *counters.POOL_LEVELS)
CSV_FIELDS += [f"nvm_{k}" for k in NVM_KEYS]
#: what the recorded pgnvm counters cover (plan.json: pgnvm_counters_scope)
NVM_SCOPE = (
    "whole server: pgnvm_counters() (= pgnvm_stats) sums every process's slot (the "
    "measured backend with its prefetch helper threads, parallel workers, I/O workers, "
    "checkpointer, ...); a run's value is the difference around its query (after the "
    "restart and prewarm); pgnvm_pool()'s demotions, slot_evictions, slot_writes likewise, "
    "slots_in_use_peak and slots as they are after the query"
)


@dataclass
class Options:
    sf: float = 1.0
    #: the configurations (bench.core.selection, built by the command line); None: the defaults
    selection: selection.Selection | None = None
    queries: list[int] = field(default_factory=lambda: list(queries.ALL_QUERIES))
    repeat: int = 3
    method: str = methods.DEFAULT  # --method: cold | prewarm | warm (bench.tpch.methods)
    out: Path | None = None
    timeout: float = 600.0
    parallel_workers: int = 0
    shared_buffers: str = "128MB"
    work_mem: str = "64MB"
    port: int = DEFAULT_PORT
    prefix: str = DEFAULT_PREFIX
    perf: bool = True
    profile: bool = False  # --profile: perf record of the first run of each config x query
    explain: bool = True
    build: bool = True  # False: use the installed release build as it is (--no-build)
    data_checksums: bool = True  # --data-checksums on|off: clusters of their own when off
    perturb: set[tuple[str, int]] = field(default_factory=set)

    @property
    def how(self) -> methods.Method:
        return methods.METHODS[self.method]

    @property
    def common(self) -> Common:
        return Common(self.shared_buffers, self.work_mem, self.parallel_workers)


def parse_perturb(text: str | None) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        cfg, _, q = item.partition(":")
        out.add((cfg.strip(), int(q.lstrip("qQ"))))
    return out


class Mismatch(RuntimeError):
    pass


# --------------------------------------------------------------------------- output files


class Writer:
    """The result directory; raw files are appended and flushed run by run."""

    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        (out / "answers").mkdir(exist_ok=True)
        (out / "plans").mkdir(exist_ok=True)
        self._jsonl = open(out / "runs.jsonl", "a")  # noqa: SIM115 - closed in close()
        new_csv = not (out / "runs.csv").exists()
        self._csvf = open(out / "runs.csv", "a", newline="")  # noqa: SIM115
        self._csv = csv.DictWriter(self._csvf, fieldnames=CSV_FIELDS, extrasaction="ignore")
        if new_csv:
            self._csv.writeheader()

    def run(self, rec: dict[str, Any]) -> None:
        self._jsonl.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
        self._jsonl.flush()
        self._csv.writerow(csv_row(rec))
        self._csvf.flush()

    def json(self, name: str, doc: Any) -> None:
        results.write_json(self.out / name, doc)

    def close(self) -> None:
        self._jsonl.close()
        self._csvf.close()


def csv_row(rec: dict[str, Any]) -> dict[str, Any]:
    b = rec.get("backend") or {}
    others = rec.get("others") or {}
    groups = others.get("groups", {})
    iow = groups.get("io worker", {})
    ex = others.get("exited_children", {})
    row: dict[str, Any] = {
        k: rec.get(k)
        for k in (
            "started_at",
            "config",
            "engine",
            "storage",
            "query",
            "rep",
            "status",
            "wall_s",
            "rows",
            "answer",
            "kernel_share",
            "others_cpu_s",
            "warmup",
            "restart_s",
            "prewarm_s",
            "os_cache",
            "loadavg_1m",
            "error",
        )
    }
    row["other_cpu_s"] = (rec.get("other_work") or {}).get("other_cpu_s")
    mem = rec.get("dram") or {}
    for k in ("shared", "backend", "total"):
        row[f"dram_{k}_mb"] = mem.get(f"{k}_mb")
    huge = mem.get("hugetlb") or {}  # the main segment in hugetlb pages: touched is in shared
    row["dram_hugetlb_touched_mb"] = huge.get("touched_mb")
    row["dram_hugetlb_reserved_mb"] = huge.get("reserved_mb")
    row.update(
        {
            "backend_utime_s": b.get("utime_s"),
            "backend_stime_s": b.get("stime_s"),
            "backend_runtime_s": b.get("runtime_s"),
            "minflt": b.get("minflt"),
            "majflt": b.get("majflt"),
            "vcsw": b.get("vcsw"),
            "nvcsw": b.get("nvcsw"),
            "io_worker_cpu_s": (iow.get("utime_s", 0) + iow.get("stime_s", 0)) if iow else 0,
            "exited_children_cpu_s": (ex.get("utime_s", 0) + ex.get("stime_s", 0)) if ex else None,
        }
    )
    io = rec.get("pg_stat_io") or []
    h = rec.get("helpers") or {}
    row["helper_threads"] = h.get("threads")
    row["helper_utime_s"] = h.get("utime_s")
    row["helper_stime_s"] = h.get("stime_s")
    row["helper_minflt"] = h.get("minflt")
    pf = rec.get("prefetch") or {}
    row["pf_scheme"] = pf.get("scheme")
    for k in ("jobs_enqueued", "jobs_dropped", "jobs_skipped", "fault_errors", "helper_cpu_ms"):
        row[f"pf_{k}"] = pf.get(k)
    row["client_reads"] = measure.stat_io_sum(io, "client backend", "reads") if io else None
    row["client_read_bytes"] = (
        measure.stat_io_sum(io, "client backend", "read_bytes") if io else None
    )
    row["client_hits"] = measure.stat_io_sum(io, "client backend", "hits") if io else None
    perf = (rec.get("perf") or {}).get("counters") or {}
    for k in measure.counter_names():
        row[k] = perf.get(k)
    nvm = rec.get("pgnvm_stats") or {}
    for k in NVM_KEYS:
        row[f"nvm_{k}"] = nvm.get(k)
    return row


# --------------------------------------------------------------------------- the runner


class Runner:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.configs: list[Config] = []
        self.unavailable: dict[str, str] = {}
        self.unknown: dict[str, str] = {}  # runs, but availability unknown: why
        self.settings: dict[str, dict[str, str]] = {}
        self.pool_covers_db: dict[str, bool] = {}  # shared_buffers >= the database
        self.targets: dict[str, targets.Target] = {}
        self.records: list[dict[str, Any]] = []
        self.ref: dict[int, tuple[str, list[compare.Row]]] = {}
        self.answers: dict[tuple[int, str], list[compare.Row]] = {}
        self.mismatches: list[dict[str, Any]] = []
        self.plans: dict[tuple[int, str], str] = {}
        self.server_settings_seen: dict[str, list[list[str]]] = {}
        self.env: dict[str, Any] = {}
        self.writer: Writer | None = None
        self.durations: dict[tuple[str, int], list[float]] = {}
        self.started = dt.datetime.now()
        self.t_started = time.monotonic()

    # ---- set-up

    def setup(self) -> None:
        o = self.opts
        if o.build:
            prefix = ensure_built("release")
        else:
            prefix = paths.install_dir("release")
            if not (prefix / "bin" / "postgres").is_file():
                raise RuntimeError(f"--no-build: no release build in {prefix}; run ./pgnvm build")
            ui.notice(f"--no-build: using the installed release build in {prefix} as it is")
        bindir = prefix / "bin"
        sel = (o.selection or selection.select(tpch_job(o.common))).judge(bindir)
        self.configs = sel.run
        self.unavailable = sel.refused
        self.unknown = sel.unknown
        sched = self.schedule()
        runs = len(sched)
        warmups = sum(1 for st in sched if st.warmup)
        est = estimate_seconds(runs, o.sf)
        ui.info(
            f"{runs} runs ({len(self.configs)} configurations x {len(o.queries)} queries x "
            f"{o.repeat}{f', + {warmups} warm-up runs' if warmups else ''}; method "
            f"{o.method}), estimated {ui.fmt_seconds(est)} (+ about "
            f"{ui.fmt_seconds(SETUP_S_PER_SF * o.sf)} of data generation and loading where "
            "not done before)"
        )
        if est > BUDGET_S:
            ui.notice(
                f"that is more than the {ui.fmt_seconds(BUDGET_S)} the default run is meant "
                "to take: choose fewer configurations with --configs"
            )
        data_dir, manifest = data.ensure_data(o.sf)
        self.env = results.environment()
        self.env["hardware_counters"] = measure.hardware_unavailable_reason() or "available"
        self.env["build"] = "ensure_built(release)" if o.build else "--no-build (installed as is)"
        with contextlib.suppress(OSError):
            st = (bindir / "postgres").stat()
            self.env["postgres_binary"] = {
                "path": str(bindir / "postgres"),
                "mtime": dt.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds"),
            }
        self.env["tpchgen"] = manifest.generator
        self.env["data_digest"] = manifest.digest
        self.env["data_rows"] = manifest.rows()
        self.env["load"] = {}
        for storage in sorted({c.storage for c in self.configs}, key=["nvm", "disk"].index):
            tg = targets.Target(storage, o.sf, o.prefix, o.port, o.data_checksums)
            self.env["load"][storage] = tg.ensure(data_dir, o.sf, manifest)
            self.targets[storage] = tg
        self.env["data_checksums"] = {s: t.checksums_shown for s, t in self.targets.items()}
        whole_db = None
        if any(c.shared_buffers or c.descriptors for c in self.configs):
            db_bytes = max(t.db_bytes for t in self.targets.values())
            whole_db = configs.whole_db_shared_buffers(db_bytes)
        for c in self.configs:
            self.settings[c.name] = server_settings(c, o.common, whole_db)
            pool = configs.pool_pages_bytes(self.settings[c.name])
            self.pool_covers_db[c.name] = pool >= self.targets[c.storage].db_bytes
        self.refuse_short_of_dram()
        short = [n for n, ok in self.pool_covers_db.items() if not ok]
        if o.how.prewarm_all and short:
            ui.notice(
                f"--method {o.method}: the pool of {', '.join(short)} does not cover the "
                "database (shared_buffers below its size): pg_prewarm leaves only part of it "
                "in shared buffers (a *_wholedb configuration or --shared-buffers covers it)"
            )
        self.env["db_bytes"] = {s: t.db_bytes for s, t in self.targets.items()}
        self.env["pgnvm_extension"] = {
            s: f"{t.pgnvm_extension} (schema {t.pgnvm_schema})"
            if t.pgnvm_schema
            else t.pgnvm_extension
            for s, t in self.targets.items()
        }
        self.env["cpu_topology"] = topology.summary(bindir)
        self.env["datadirs"] = {s: str(t.cluster.datadir) for s, t in self.targets.items()}
        self.env["clusters"] = {s: t.name for s, t in self.targets.items()}
        for s, t in self.targets.items():
            self.env.setdefault("filesystems", {})[s] = results.cmd(
                "findmnt", "-n", "-o", "SOURCE,FSTYPE,OPTIONS", "-T", str(t.cluster.datadir)
            )

    def refuse_short_of_dram(self) -> None:
        """Configurations whose pool would hold the whole database in more DRAM than the
        machine has available now (every server stopped: MemAvailable) are not run, and
        reported as not available (settings.dram_shortfall), rather than end in the OOM
        killer's hands."""
        avail = procfs.mem_available_bytes()
        self.env["mem_available_at_setup"] = avail
        for c in list(self.configs):
            why = dram_shortfall(c, self.targets[c.storage].db_bytes, avail)
            if why:
                ui.notice(f"{c.name}: not run: {why}")
                self.unavailable[c.name] = why
                self.configs.remove(c)

    def out_dir(self) -> Path:
        if self.opts.out is not None:
            return self.opts.out
        stamp = self.started.strftime("%Y%m%d-%H%M%S")
        return RESULTS_DIR / (
            f"{stamp}-sf{data.fmt_sf(self.opts.sf)}"
            + targets.checksums_suffix(self.opts.data_checksums)
        )

    def plan_doc(self) -> dict[str, Any]:
        o = self.opts
        return {
            "sf": o.sf,
            "queries": o.queries,
            "repeat": o.repeat,
            "timeout_s": o.timeout,
            "parallel_workers": o.parallel_workers,
            "shared_buffers": o.shared_buffers,
            "work_mem": o.work_mem,
            "data_checksums": targets.checksums_text(o.data_checksums),
            "method": o.method,
            "method_doc": o.how.doc,
            "pool_covers_db": self.pool_covers_db,
            "dram_sampling": {"interval_s": dram.INTERVAL_S},
            "pgnvm_counters_scope": NVM_SCOPE,
            "configs": [
                {
                    **asdict(c),
                    "drop_caches": c.drop_caches,
                    "server_settings": self.settings[c.name],
                }
                for c in self.configs
            ],
            "unavailable": self.unavailable,
            "availability_unknown": self.unknown,
            "order": methods.order_text(o.how),
            "started_at": self.started.isoformat(timespec="seconds"),
        }

    # ---- one run

    def run_one(self, step: methods.Step[Config]) -> dict[str, Any]:
        o = self.opts
        cfg, q, rep = step.config, step.query, step.rep
        tg = self.targets[cfg.storage]
        for other in self.targets.values():
            if other is not tg:
                other.server.stop()
        rec: dict[str, Any] = {
            "started_at": dt.datetime.now().isoformat(timespec="seconds"),
            "config": cfg.name,
            "engine": cfg.engine,
            "storage": cfg.storage,
            "query": q,
            "rep": rep,
            "status": "error",
            "error": None,
        }
        if step.warmup:
            rec["warmup"] = True  # checked, not in the statistics
        t_begin = time.monotonic()
        rec["loadavg_1m"] = procfs.loadavg()
        restart = step.restart or not tg.server.is_running()
        rec["restarted"] = restart
        if restart:
            tg.server.apply_config(cfg, self.settings[cfg.name])
            try:
                rec["restart_s"] = round(tg.server.restart(move_port=True), 3)
            except clu.ClusterError as e:
                rec["error"] = f"server did not start: {e}"
                rec["server_log_tail"] = tg.server.log_tail(30)
                ui.error(f"{cfg.name}: {rec['error']}")
                self.durations.setdefault((cfg.name, q), []).append(time.monotonic() - t_begin)
                return rec
            if methods.prewarms(o.how, cfg.prewarm):
                secs, blocks = tg.prewarm()
                rec["prewarm_s"] = round(secs, 3)
                rec["prewarm_blocks"] = blocks
        rec["os_cache"] = (
            results.drop_os_caches(tg.server.cluster.datadir)
            if cfg.drop_caches and restart
            else "kept"
        )
        pm = tg.server.postmaster_pid()
        sql = queries.sql(q, o.sf)
        rows: list[compare.Row] | None = None
        conn = tg.server.connect()
        try:
            pid = int(conn.execute("select pg_backend_pid()").fetchone()[0])  # type: ignore[index]
            rec["backend_pid"] = pid
            conn.execute(f"set statement_timeout = {int(o.timeout * 1000)}")
            btypes = {
                int(p): str(t)
                for p, t in conn.execute(
                    "select pid, backend_type from pg_stat_activity"
                ).fetchall()
                if p is not None
            }
            if "server_version" not in self.env:
                self.env["server_version"] = conn.execute("select version()").fetchone()[0]  # type: ignore[index]
            # before the flush: its own catalog look-ups are not in the pg_stat_io delta
            pool0 = _pgnvm_read(conn, tg, counters.read_pool)
            nvm0 = (_pgnvm_read(conn, tg, counters.read_counters), pool0)
            conn.execute("select pg_stat_force_next_flush()")
            io0 = measure.stat_io_snapshot(conn)
            m0 = otherwork.sample(exclude={pm} if pm else ())
            b0 = procfs.sample(pid)
            s0 = procfs.thread_samples(pid)
            c0 = measure.cluster_sample(pm, {pid}, btypes) if pm else None
            perf = measure.PerfCounters(pid) if o.perf else None
            if perf:
                perf.start()
            sampler = None
            if o.profile and rep == 1:
                assert self.writer is not None
                perf_file = f"{cfg.name}-{queries.qname(q)}-r{rep}.data"
                sampler = profile.PerfRecord([pid], self.writer.out / "perf" / perf_file)
                sampler.start()
            mem = dram.Sampler(pm, pid) if pm else None
            if mem is not None:
                mem.start()
            t0 = time.perf_counter()
            cur = None
            try:
                cur = conn.execute(sql)
                rec["status"] = "ok"
            except psycopg.errors.QueryCanceled as e:
                rec["status"] = "timeout"
                rec["error"] = str(e).strip()
            except psycopg.Error as e:
                rec["status"] = "crash" if conn.broken or conn.closed else "error"
                rec["error"] = str(e).strip()
            wall = time.perf_counter() - t0
            if mem is not None:
                rec["dram"] = mem.stop()
            rec["perf"] = perf.stop() if perf else None
            if sampler is not None:
                why = sampler.stop()
                rec["profile"] = why if why else profile.top_symbols(sampler.out)
            s1 = procfs.thread_samples(pid)
            c1 = measure.cluster_sample(pm, {pid}, btypes) if pm else None
            b1 = procfs.sample(pid)
            m1 = otherwork.sample(exclude={pm} if pm else ())
            rec["wall_s"] = round(wall, 6)
            if s0 and s1:
                b, helpers = measure.backend_delta(pid, s0, s1)
                if b is not None:
                    rec["backend"] = b  # the main (computation) thread only
                    rec["kernel_share"] = stats.kernel_share(b["utime_s"], b["stime_s"])
                rec["helpers"] = helpers
                rec["helper_cpu_s"] = round(stats.cpu_seconds(helpers) or 0.0, 6)
            if c0 and c1:
                rec["others"] = measure.cluster_delta(c0, c1)
                rec["others_cpu_s"] = round(measure.others_cpu_total(rec["others"]), 3)
                if m0 and m1 and b0 and b1:  # CPU used outside this run: other work
                    server = b1.utime + b1.stime - b0.utime - b0.stime + rec["others_cpu_s"]
                    rec["other_work"] = otherwork.delta(m0, m1, server)
            if cur is not None and rec["status"] == "ok":
                rows = [tuple(r) for r in cur.fetchall()]
            if not (conn.broken or conn.closed):
                conn.execute("select pg_stat_force_next_flush()")
                rec["pg_stat_io"] = measure.stat_io_delta(io0, measure.stat_io_snapshot(conn))
                if nvm0[0] is not None:
                    c1 = _pgnvm_read(conn, tg, counters.read_counters)
                    pool1 = _pgnvm_read(conn, tg, counters.read_pool)
                    nvm = counters.run_delta(nvm0, (c1, pool1))
                    if nvm is not None:
                        rec["pgnvm_stats"] = nvm
                if cfg.helper_mapping and tg.has_prefetch_fn:
                    rec["prefetch"] = _pgnvm_prefetch(conn, tg)
                self._after_run(conn, cfg, q, sql, rec)
        except psycopg.OperationalError as e:
            rec["status"] = "crash"
            rec["error"] = rec.get("error") or str(e).strip()
        finally:
            conn.close()
        if rec["status"] == "crash":
            rec["server_log_tail"] = tg.server.log_tail(30)
        if rows is not None:
            self._check_answer(cfg, q, rep, rows, rec)
        total = time.monotonic() - t_begin
        rec["run_total_s"] = round(total, 3)  # restart + prewarm + query + bookkeeping
        self.durations.setdefault((cfg.name, q), []).append(total)
        return rec

    def _after_run(
        self, conn: psycopg.Connection, cfg: Config, q: int, sql: str, rec: dict[str, Any]
    ) -> None:
        """Once per configuration: the server's non-default settings; once per (query,
        configuration): the plan (EXPLAIN, costs off), to see whether plans differ."""
        if cfg.name not in self.server_settings_seen:
            cur = conn.execute(
                "select name, setting || coalesce(' ' || unit, ''), source from pg_settings "
                "where source not in ('default', 'override') order by name"
            )
            self.server_settings_seen[cfg.name] = [list(r) for r in cur.fetchall()]
        if self.opts.explain and (q, cfg.name) not in self.plans and rec["status"] == "ok":
            cur = conn.execute(f"explain (costs off) {sql}")
            plan = "\n".join(r[0] for r in cur.fetchall())
            self.plans[(q, cfg.name)] = plan
            if self.writer:
                (self.writer.out / "plans" / f"{queries.qname(q)}.{cfg.name}.txt").write_text(
                    plan + "\n"
                )

    def _check_answer(
        self, cfg: Config, q: int, rep: int, rows: list[compare.Row], rec: dict[str, Any]
    ) -> None:
        if (cfg.name, q) in self.opts.perturb:
            rows = compare.perturb(rows)
            rec["perturbed"] = True
        rec["rows"] = len(rows)
        rec["answer"] = compare.digest(rows)
        first_of_config = (q, cfg.name) not in self.answers
        if first_of_config:
            self.answers[(q, cfg.name)] = rows
            self._save_answer(f"{queries.qname(q)}.{cfg.name}.json", rows)
        if q not in self.ref:
            self.ref[q] = (cfg.name, rows)
            return
        ref_cfg, ref_rows = self.ref[q]
        diff = compare.compare(ref_rows, rows, queries.ORDER_KEYS[q])
        if diff is None:
            return
        m = {"query": q, "config": cfg.name, "rep": rep, "reference": ref_cfg, "diff": diff}
        self.mismatches.append(m)
        rec["mismatch"] = m
        self._save_answer(f"{queries.qname(q)}.{cfg.name}.rep{rep}.WRONG.json", rows)
        ui.error(
            f"WRONG ANSWER: {queries.qname(q).upper()} on {cfg.name} (run {rep}) differs "
            f"from {ref_cfg}: {diff}"
        )
        if self.writer:
            self.writer.json("mismatches.json", self.mismatches)
        if self.opts.profile:
            (self.writer.out / "profile.md").write_text(profile.render(self.records))

    def _save_answer(self, name: str, rows: list[compare.Row]) -> None:
        if self.writer:
            (self.writer.out / "answers" / name).write_text(
                json.dumps(compare.rows_jsonable(rows), indent=0) + "\n"
            )

    # ---- main loop

    def schedule(self) -> list[methods.Step[Config]]:
        o = self.opts
        return methods.schedule(o.how, self.configs, o.queries, o.repeat)

    def eta(self, remaining: list[methods.Step[Config]]) -> float | None:
        if not self.durations:
            return estimate_seconds(len(remaining), self.opts.sf)
        all_d = [d for ds in self.durations.values() for d in ds]
        glob = sum(all_d) / len(all_d)
        per_q: dict[int, list[float]] = {}
        for (_, q), seen in self.durations.items():
            per_q.setdefault(q, []).extend(seen)
        tot = 0.0
        for st in remaining:
            ds = self.durations.get((st.config.name, st.query)) or per_q.get(st.query)
            tot += sum(ds) / len(ds) if ds else glob
        return tot

    def run(self) -> int:
        self.setup()
        out = self.out_dir()
        self.writer = Writer(out)
        ui.info(f"results: {out}")
        self.writer.json("plan.json", self.plan_doc())
        self.writer.json("env.json", self.env)
        sched = self.schedule()
        interrupted = False
        prog = results.Progress(len(sched), "tpch")
        try:
            with prog:
                for i, st in enumerate(sched):
                    eta = self.eta(sched[i:])
                    what = "warm-up" if st.warmup else f"run {st.rep}/{self.opts.repeat}"
                    prog.update(i, f"{queries.qname(st.query)} {st.config.name} {what}", eta)
                    rec = self.run_one(st)
                    self.records.append(rec)
                    self.writer.run(rec)
                    prog.done_one(i + 1, _run_line(i + 1, len(sched), rec))
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            stop_quietly(t.server for t in self.targets.values())
            self.finish(interrupted)
            ui.info(
                f"wall time {ui.fmt_seconds(time.monotonic() - self.t_started)} "
                f"({len(self.records)} of {len(sched)} runs, set-up included)"
            )
        if self.mismatches:
            ui.error(
                f"{len(self.mismatches)} wrong answer(s): "
                + "; ".join(
                    f"{queries.qname(m['query']).upper()} {m['config']} vs {m['reference']}"
                    for m in self.mismatches
                )
            )
            return 1
        bad = [r for r in self.records if r["status"] in ("error", "crash")]
        return 1 if bad else 0

    def finish(self, interrupted: bool) -> None:
        if self.writer is None:
            return
        self.env["finished_at"] = dt.datetime.now().isoformat(timespec="seconds")
        self.env["interrupted"] = interrupted
        self.env["server_settings"] = self.server_settings_seen
        self.writer.json("env.json", self.env)
        self.writer.json("mismatches.json", self.mismatches)
        if self.opts.profile:
            (self.writer.out / "profile.md").write_text(profile.render(self.records))
        try:
            analysis = report.Analysis(
                self.plan_doc(), self.env, self.records, self.mismatches, self.plans, interrupted
            )
            rep = report.Report(self.writer.out, analysis)
            rep.write()
            rep.print_summary()
        except Exception as e:  # the raw files are what matters; say what failed
            ui.error(f"writing the report failed: {type(e).__name__}: {e}")
        finally:
            self.writer.close()
        ui.info(f"results in {self.writer.out} (report.md, report.html, runs.jsonl, runs.csv)")


def _pgnvm_read(
    conn: psycopg.Connection,
    tg: targets.Target,
    read: Callable[[psycopg.Connection, str], dict[str, int]],
) -> dict[str, int] | None:
    """A reading of extension pgnvm (``read``: :func:`bench.core.counters.read_counters`,
    pgnvm's counters since the server started, every process's slot summed, or
    :func:`bench.core.counters.read_pool`, ``pgnvm_pool()``), None without the extension or
    where the server's pgnvm lacks it (an older build's); a broken connection raises."""
    if not tg.pgnvm_schema:
        return None
    try:
        return read(conn, tg.pgnvm_schema)
    except psycopg.Error:
        if conn.broken or conn.closed:
            raise
        return None


def _pgnvm_prefetch(conn: psycopg.Connection, tg: targets.Target) -> dict[str, Any]:
    """pgnvm_prefetch() of the measured backend: mapping asked for and effective, fallback,
    helper threads and CPUs, the pool's job counters and helper CPU as the library counts it
    (this backend's pool only; parallel workers have pools of their own)."""
    try:
        return counters.read_prefetch_pool(conn, tg.pgnvm_schema)
    except psycopg.errors.Error as e:
        if conn.broken or conn.closed:
            raise
        return {"error": str(e).strip()}


def _run_line(i: int, n: int, rec: dict[str, Any]) -> str:
    st = rec["status"]
    w = rec.get("wall_s")
    extra = f" {w:.3f}s" if isinstance(w, float) and st == "ok" else f" {st.upper()}"
    if rec.get("mismatch"):
        extra += " WRONG ANSWER"
    ks = rec.get("kernel_share")
    ks_txt = f" sys {ks * 100:.0f}%" if isinstance(ks, float) else ""
    h = rec.get("helpers") or {}
    if h.get("threads"):
        ks_txt += f" helpers {h['threads']}: {rec.get('helper_cpu_s', 0):.3f}s CPU"
    mem = rec.get("dram") or {}
    if mem.get("total_mb") is not None:
        ks_txt += f" DRAM {mem['total_mb']:.0f} MB"
    what = "warm-up" if rec.get("warmup") else f"run {rec['rep']}"
    return f"[{i}/{n}] {queries.qname(rec['query'])} {rec['config']:<18} {what}:{extra}{ks_txt}"


def run(opts: Options) -> int:
    return Runner(opts).run()
