"""``./pgnvm ha bench --tpch``: read-only TPC-H on a hot standby, one configuration against
another (se2 against stock base), interleaved in one run (:mod:`bench.ha.control`).

Two HA clusters run side by side (``--name``, default ``ha``: ``nvm_se2_pmem``; ``--vs``,
default ``ha-base``: e.g. ``nvm_base_worker``). On each, TPC-H (``bench/tpch``'s generator,
schema, load and load checksum: :mod:`bench.tpch.data`, :mod:`bench.tpch.schema`) is loaded
on the primary, or reused when its load checksum matches, and the queries
(:mod:`bench.tpch.queries`) run on a hot standby of that cluster (the asynchronous replica;
the synchronous standby when there is none) once it has replayed the primary's WAL.

Order (:func:`schedule`): per query, one discarded warm-up run on each side (both pools and
caches warm: the ``warm`` method of ``./pgnvm tpch``), then ``--repeat`` repetitions, each a
pair of runs, the side that goes first alternating (A B, B A, A B, ...): the machine's drift
falls on both sides alike. Each run: a new connection to the standby, the session settings
of ``./pgnvm tpch`` (:func:`bench.tpch.settings.common_settings`: ``work_mem``, no JIT, no
parallel workers), the query timed, its answer compared with the other side's
(:func:`bench.tpch.compare.compare`), and the standby's DRAM sampled
(:class:`bench.core.dram.Sampler`: the resident pages of the standby's shared memory and the
backend's private memory).

Report (:func:`summarize`, :func:`table`): per query the median and the spread (min-max) of
each side, the ratio of the medians, and the spread of the paired ratios (repetition r of A
over repetition r of B); the totals of the medians over the queries both sides answered and
their ratio; the DRAM peaks. ``results/ha-tpch-<stamp>/``: ``runs.jsonl``, ``summary.json``,
``report.md`` (with what this emulation cannot show, :data:`CANNOT_SHOW`).
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.core import cluster, dram, procfs, ui
from bench.ha.control import HaCluster
from bench.ha.spec import HaError
from bench.tpch import compare, data, queries, schema
from bench.tpch.settings import Common, common_settings

#: the settings of ``./pgnvm tpch`` a session may set on a standby (the others are the
#: server's: shared_buffers and the engine are the HA cluster's configuration)
SESSION_SETTINGS: tuple[str, ...] = ("work_mem", "jit", "max_parallel_workers_per_gather")
#: the load's session (the HA nodes run with PostgreSQL's 64 MB)
LOAD_SESSION: dict[str, str] = {"maintenance_work_mem": "512MB"}
REPLAY_TIMEOUT = 600.0

CANNOT_SHOW: tuple[str, ...] = (
    "PMem: the nvm root is a tmpfs, i.e. DRAM. se2 reads the standby's pages in place from "
    "DRAM-speed memory; on real PMem or CXL memory its reads are slower than DRAM's and the "
    "ratio moves (how far depends on the device, not measured here).",
    "DRAM: the tmpfs files (the emulated PMem) are DRAM too and are not counted in the "
    "standby's DRAM figure (resident shared memory + the backend's private memory); a base "
    "standby's reads go through the kernel's page cache, which here is that same tmpfs.",
    "Machines and network: both clusters (6 PostgreSQL servers, 6 Patroni, 6 etcd members) "
    "share one 2-vCPU VM, one kernel and loopback; the standby replays nothing while the "
    "queries run (no write load on the primary), so the cost of replay and of recovery "
    "conflicts on a busy standby is not measured.",
    "Noise: other sessions' builds and benchmarks share the VM; only the interleaved ratios "
    "of one run are meaningful, not the seconds.",
)


class Side:
    """One HA cluster of the comparison: its configuration and the standby that answers."""

    def __init__(self, ha: HaCluster) -> None:
        self.ha = ha
        self.config = ha.spec.config
        self.engine = ha.spec.cfg.engine
        self.primary = -1
        self.replica = -1
        self.engine_shown = "?"
        self.loaded = "not checked"

    @property
    def node(self) -> str:
        return self.ha.spec.node_names()[self.replica]

    def connect(self, i: int, dbname: str = "postgres") -> psycopg.Connection:
        conn: psycopg.Connection = self.ha.connect(i, dbname)
        return conn


# --------------------------------------------------------------------------- pure logic


def pick_replica(members: Sequence[dict[str, Any]]) -> str | None:
    """The standby that answers the queries: a streaming asynchronous replica (the hot
    standby), else a streaming synchronous standby; None when no standby streams."""
    streaming = [m for m in members if m.get("state") == "streaming"]
    for role in ("replica", "sync_standby"):
        for m in streaming:
            if m.get("role") == role:
                return str(m["name"])
    return None


@dataclass(frozen=True)
class Step:
    query: int
    rep: int  # 0: the warm-up
    side: int  # 0: A (--name), 1: B (--vs)

    @property
    def warmup(self) -> bool:
        return self.rep == 0


def schedule(qs: Sequence[int], repeat: int) -> list[Step]:
    """Per query: a warm-up on A then on B, then ``repeat`` pairs, A first in odd
    repetitions and B first in even ones."""
    out: list[Step] = []
    for q in qs:
        out += [Step(q, 0, 0), Step(q, 0, 1)]
        for rep in range(1, repeat + 1):
            order = (0, 1) if rep % 2 else (1, 0)
            out += [Step(q, rep, s) for s in order]
    return out


def session_settings() -> dict[str, str]:
    """The per-session settings of ``./pgnvm tpch``'s defaults (:data:`SESSION_SETTINGS`)."""
    common = common_settings(Common())
    return {k: common[k] for k in SESSION_SETTINGS}


def _spread(xs: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def summarize(records: Sequence[dict[str, Any]], a: str, b: str) -> dict[str, Any]:
    """Per query and in total, over the measured runs (warm-ups left out) with status ok:
    each side's median and min-max wall time, the ratio of the medians (A / B), the min-max
    of the paired ratios (A's repetition r / B's repetition r), the DRAM peaks. Totals and
    their ratio over the queries both sides answered in every repetition."""
    walls: dict[tuple[str, int], dict[int, float]] = {}
    mem: dict[str, list[dict[str, Any]]] = {a: [], b: []}
    failed: dict[tuple[str, int], int] = {}
    for r in records:
        if r.get("warmup"):
            continue
        key = (r["config"], r["query"])
        if r.get("status") != "ok":
            failed[key] = failed.get(key, 0) + 1
            continue
        walls.setdefault(key, {})[r["rep"]] = float(r["wall_s"])
        if r.get("dram"):
            mem[r["config"]].append(r["dram"])
    per_query: list[dict[str, Any]] = []
    common: list[int] = []
    for q in sorted({q for _, q in walls} | {q for _, q in failed}):
        wa, wb = walls.get((a, q), {}), walls.get((b, q), {})
        row: dict[str, Any] = {
            "query": q,
            "failed": {a: failed.get((a, q), 0), b: failed.get((b, q), 0)},
        }
        if wa:
            row[a] = _spread(list(wa.values()))
        if wb:
            row[b] = _spread(list(wb.values()))
        if wa and wb:
            row["ratio"] = row[a]["median"] / row[b]["median"]
            paired = [wa[r] / wb[r] for r in sorted(wa.keys() & wb.keys()) if wb[r] > 0]
            if paired:
                row["paired"] = _spread(paired)
            if not row["failed"][a] and not row["failed"][b]:
                common.append(q)
        per_query.append(row)
    by_q = {row["query"]: row for row in per_query}
    total: dict[str, Any] = {"queries": common}
    if common:
        ta = sum(by_q[q][a]["median"] for q in common)
        tb = sum(by_q[q][b]["median"] for q in common)
        total[a], total[b] = ta, tb
        total["ratio"] = ta / tb if tb > 0 else None
        reps = sorted(set.intersection(*(set(walls[(s, q)]) for s in (a, b) for q in common)))
        per_rep = [
            sum(walls[(a, q)][r] for q in common) / sum(walls[(b, q)][r] for q in common)
            for r in reps
        ]
        if per_rep:
            total["paired"] = _spread(per_rep)
        ratios = [by_q[q]["ratio"] for q in common if by_q[q]["ratio"] > 0]
        total["geomean_ratio"] = statistics.geometric_mean(ratios) if ratios else None

    def dram_of(xs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in ("total_mb", "shared_mb", "backend_mb", "shared_start_mb"):
            vals = [float(x[k]) for x in xs if x.get(k) is not None]
            out[k] = {"max": max(vals), "median": statistics.median(vals)} if vals else None
        out["source"] = sorted({str(x.get("shared_source")) for x in xs})
        return out

    return {
        "a": a,
        "b": b,
        "per_query": per_query,
        "total": total,
        "dram": {a: dram_of(mem[a]), b: dram_of(mem[b])},
    }


def _cell(s: dict[str, Any] | None) -> str:
    if not s:
        return "–"
    return f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f})"


def _ratio(s: dict[str, Any] | None) -> str:
    return f"{s['min']:.2f}-{s['max']:.2f}" if s else "–"


def table(summary: dict[str, Any]) -> list[str]:
    """The summary as Markdown: one line per query, the total, the DRAM."""
    a, b = summary["a"], summary["b"]
    lines = [
        f"| query | {a} [s] median (min-max) | {b} [s] median (min-max) | "
        f"{a} / {b} | paired ratios (min-max) |",
        "|---|---|---|---|---|",
    ]
    for row in summary["per_query"]:
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "–"
        bad = [f"{s}: {n} failed" for s, n in row["failed"].items() if n]
        lines.append(
            f"| {queries.qname(row['query']).upper()} | {_cell(row.get(a))} | "
            f"{_cell(row.get(b))} | {ratio}{' (' + ', '.join(bad) + ')' if bad else ''} | "
            f"{_ratio(row.get('paired'))} |"
        )
    t = summary["total"]
    if t.get("queries"):
        lines.append(
            f"| total of medians ({len(t['queries'])} queries) | {t[a]:.2f} | {t[b]:.2f} | "
            f"**{t['ratio']:.2f}** | {_ratio(t.get('paired'))} (per repetition) |"
        )
        if t.get("geomean_ratio"):
            lines.append(f"| geometric mean of the ratios | | | {t['geomean_ratio']:.2f} | |")
    lines += [
        "",
        "| standby DRAM [MB] | peak total | median peak total | peak shared | "
        "peak backend | shared at a run's start (median) |",
        "|---|---|---|---|---|---|",
    ]
    for s in (a, b):
        d = summary["dram"][s]

        def v(k: str, stat: str, d: dict[str, Any] = d) -> str:
            x = d.get(k)
            return f"{x[stat]:.0f}" if x else "–"

        lines.append(
            f"| {s} | {v('total_mb', 'max')} | {v('total_mb', 'median')} | "
            f"{v('shared_mb', 'max')} | {v('backend_mb', 'max')} | "
            f"{v('shared_start_mb', 'median')} |"
        )
    return lines


def answer_mismatch(
    ref: dict[int, tuple[str, list[compare.Row]]], config: str, q: int, rows: list[compare.Row]
) -> str | None:
    """Compare ``rows`` with the first answer to query ``q`` (kept in ``ref``, which the
    first answer fills); the difference, or None."""
    if q not in ref:
        ref[q] = (config, rows)
        return None
    ref_cfg, ref_rows = ref[q]
    diff = compare.compare(ref_rows, rows, queries.ORDER_KEYS[q])
    return None if diff is None else f"differs from {ref_cfg}'s answer: {diff}"


# --------------------------------------------------------------------------- the clusters


def _load_connect(side: Side, i: int) -> Callable[[str], psycopg.Connection]:
    def connect(dbname: str) -> psycopg.Connection:
        c = side.connect(i, dbname)
        for k, v in LOAD_SESSION.items():
            c.execute("select set_config(%s, %s, false)", (k, v))
        return c

    return connect


def ensure_loaded(side: Side, sf: float, data_dir: Path, manifest: data.Manifest) -> str:
    """TPC-H on the primary of ``side``: reused when its load checksum matches, else loaded
    (bench/tpch's load). Returns what happened."""
    expected = schema.expected_checksum(sf, manifest)
    with side.connect(side.primary) as c:
        exists = schema.database_exists(c)
    stored = None
    if exists:
        with side.connect(side.primary, schema.DBNAME) as c:
            stored = schema.read_checksum(c)
    why = schema.checksum_mismatch(stored, expected)
    if why is None:
        return "reused"
    ui.step(f"loading TPC-H SF {data.fmt_sf(sf)} on {side.ha.spec.name}'s primary: {why}")
    times = schema.load(_load_connect(side, side.primary), data_dir, sf, manifest)
    ui.info(f"   loaded in {ui.fmt_seconds(times['total'])}")
    return f"loaded in {times['total']:.0f}s: {why}"


def wait_replayed(side: Side, timeout: float = REPLAY_TIMEOUT) -> None:
    """Until the standby has replayed what the primary had written when asked."""
    with side.connect(side.primary) as c:
        lsn = str(c.execute("select pg_current_wal_lsn()").fetchone()[0])  # type: ignore[index]
    deadline = time.monotonic() + timeout
    while True:
        try:
            with side.connect(side.replica) as c:
                row = c.execute("select pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
            if row and row[0]:
                return
        except psycopg.Error:
            pass
        if time.monotonic() > deadline:
            raise HaError(
                f"{side.ha.spec.name}'s {side.node} has not replayed up to the primary's {lsn} "
                f"after {timeout:.0f}s; its log: {side.ha.postgres_log(side.replica)}"
            )
        time.sleep(0.5)


def prepare(side: Side, sf: float, data_dir: Path, manifest: data.Manifest) -> None:
    ha = side.ha
    side.primary = ha.index(ha.wait_healthy())
    name = pick_replica(ha.members())
    if name is None:
        raise HaError(f"HA cluster {ha.spec.name}: no standby streams (./pgnvm ha status)")
    side.replica = ha.index(name)
    side.loaded = ensure_loaded(side, sf, data_dir, manifest)
    wait_replayed(side)
    with side.connect(side.replica) as c:
        side.engine_shown = str(c.execute("show nvm_storage_engine").fetchone()[0])  # type: ignore[index]
    ui.info(
        f"{ha.spec.name} ({side.config}): primary {ha.spec.node_names()[side.primary]}, "
        f"queries on the standby {side.node} (nvm_storage_engine = {side.engine_shown}); "
        f"TPC-H {side.loaded}"
    )


def run_one(side: Side, step: Step, sf: float, timeout: float) -> tuple[dict[str, Any], Any]:
    """One query on the standby of ``side``: the record and the rows (None: no answer)."""
    rec: dict[str, Any] = {
        "started_at": dt.datetime.now().isoformat(timespec="seconds"),
        "cluster": side.ha.spec.name,
        "config": side.config,
        "node": side.node,
        "query": step.query,
        "rep": step.rep,
        "warmup": step.warmup,
        "status": "error",
        "loadavg_1m": procfs.loadavg(),
    }
    rows = None
    try:
        with side.connect(side.replica, schema.DBNAME) as conn:
            row = conn.execute("select pg_is_in_recovery(), pg_backend_pid()").fetchone()
            if not row or not row[0]:
                rec["error"] = f"{side.node} is not a standby any more"
                return rec, None
            pid = int(row[1])
            for k, v in session_settings().items():
                conn.execute("select set_config(%s, %s, false)", (k, v))
            conn.execute(f"set statement_timeout = {int(timeout * 1000)}")
            pm = cluster.read_pidfile(Path(side.ha.spec.datadirs[side.replica]))
            mem = dram.Sampler(pm, pid) if pm else None
            if mem is not None:
                mem.start()
            t0 = time.perf_counter()
            try:
                cur = conn.execute(queries.sql(step.query, sf))
                rows = [tuple(r) for r in cur.fetchall()]
                rec["status"] = "ok"
            except psycopg.errors.QueryCanceled as e:
                rec["status"], rec["error"] = "timeout", str(e).strip()
            finally:
                rec["wall_s"] = round(time.perf_counter() - t0, 6)
                if mem is not None:
                    rec["dram"] = mem.stop()
    except psycopg.Error as e:
        rec["error"] = str(e).strip()
    return rec, rows


# --------------------------------------------------------------------------- the run


def run(
    a: HaCluster,
    b: HaCluster,
    sf: float,
    qs: Sequence[int],
    repeat: int,
    timeout: float,
    out: Path,
) -> tuple[dict[str, Any], list[str]]:
    """The whole benchmark; returns the summary and the problems (wrong answers, failed
    runs). Files in ``out``."""
    if a.spec.config == b.spec.config:
        raise HaError(
            f"HA clusters {a.spec.name} and {b.spec.name} both run {a.spec.config}: "
            "compare two configurations"
        )
    sides = [Side(a), Side(b)]
    data_dir, manifest = data.ensure_data(sf)
    for s in sides:
        prepare(s, sf, data_dir, manifest)
    out.mkdir(parents=True, exist_ok=True)
    steps = schedule(qs, repeat)
    ref: dict[int, tuple[str, list[compare.Row]]] = {}
    problems: list[str] = []
    records: list[dict[str, Any]] = []
    t_start = time.monotonic()
    with open(out / "runs.jsonl", "w") as f:
        for n, st in enumerate(steps, 1):
            side = sides[st.side]
            rec, rows = run_one(side, st, sf, timeout)
            if rows is not None:
                rec["rows"] = len(rows)
                rec["answer"] = compare.digest(rows)
                why = answer_mismatch(ref, side.config, st.query, rows)
                if why:
                    rec["mismatch"] = why
                    problems.append(f"WRONG ANSWER {queries.qname(st.query)} {side.config}: {why}")
                    ui.error(problems[-1])
            if rec["status"] != "ok":
                problems.append(
                    f"{queries.qname(st.query)} {side.config} rep {st.rep}: {rec['status']} "
                    f"{rec.get('error', '')}".strip()
                )
                ui.error(problems[-1])
            records.append(rec)
            f.write(json.dumps(rec, default=str) + "\n")
            f.flush()
            ui.info(
                f"[{n}/{len(steps)}] {queries.qname(st.query)} {side.config:<16} "
                f"{'warm-up' if st.warmup else f'rep {st.rep}'}: {rec['status']} "
                f"{rec.get('wall_s', 0):.3f}s"
            )
    summary = summarize(records, a.spec.config, b.spec.config)
    summary["run"] = {
        "sf": sf,
        "queries": list(qs),
        "repeat": repeat,
        "timeout_s": timeout,
        "session_settings": session_settings(),
        "order": "per query: a warm-up on each side, then pairs, the first side alternating",
        "seconds": round(time.monotonic() - t_start, 1),
        "tpchgen": manifest.generator,
        "data_digest": manifest.digest,
        "sides": [
            {
                "cluster": s.ha.spec.name,
                "config": s.config,
                "engine": s.engine,
                "nvm_storage_engine_on_standby": s.engine_shown,
                "primary": s.ha.spec.node_names()[s.primary],
                "standby": s.node,
                "server_settings": s.ha.spec.server_settings(),
                "tpch": s.loaded,
            }
            for s in sides
        ],
        "problems": problems,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "report.md").write_text("\n".join(report_lines(summary)) + "\n")
    return summary, problems


def report_lines(summary: dict[str, Any]) -> list[str]:
    r = summary["run"]
    a, b = summary["a"], summary["b"]
    lines = [
        f"# read-only TPC-H on a hot standby: {a} vs {b}",
        "",
        f"SF {data.fmt_sf(r['sf'])}, {len(r['queries'])} queries, {r['repeat']} repetitions "
        f"(+ one warm-up each), {r['order']}; session settings "
        + ", ".join(f"{k} = {v}" for k, v in r["session_settings"].items())
        + f"; {r['seconds']:.0f} s.",
        "",
    ]
    for s in r["sides"]:
        lines.append(
            f"- {s['config']}: HA cluster {s['cluster']}, queries on {s['standby']} "
            f"(nvm_storage_engine = {s['nvm_storage_engine_on_standby']}, shared_buffers "
            f"{s['server_settings'].get('shared_buffers')}); TPC-H {s['tpch']}"
        )
    lines += ["", *table(summary), "", "What this emulation cannot show:", ""]
    lines += [f"- {c}" for c in CANNOT_SHOW]
    if r["problems"]:
        lines += ["", "Problems:", "", *(f"- {p}" for p in r["problems"])]
    return lines
