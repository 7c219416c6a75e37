"""report.md, report.html, the charts and summary.json of a ``./pgnvm oltp`` run, from
the raw records only (``runs.jsonl``): :func:`rebuild` rewrites a report from a result
directory. :mod:`bench.oltp.cells` computes, :mod:`bench.oltp.charts` draws,
:func:`document` says it as blocks (:mod:`bench.core.blocks` renders them as Markdown and
HTML)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

from bench.core import blocks, results, rootkind
from bench.core.blocks import Block, fmt, ratio
from bench.oltp import placement, pretouch, settings, window, workloads
from bench.oltp.cells import CPU_GROUPS, Cell, cells, main_cell

EMULATION_CAVEAT = (
    "**Emulated persistent memory, not PMem.** `nvm` storage is a tmpfs, i.e. DRAM: reads "
    "and writes run at DRAM speed and `fsync`/`fdatasync` of its files return at once, "
    "because there is nothing to write back. What these numbers show is the cost of "
    "PostgreSQL's software path on each engine with a zero-latency durable medium; real "
    "PMem (Optane: ~3x DRAM read latency, lower write bandwidth, cache-line flushes to "
    "persist) or CXL memory would be slower. `disk_base` runs on the VM's virtual disk, "
    "where every commit's WAL flush is a real `fdatasync`."
)

WAL_PMEM_NOTE = (
    "WAL through libpmem2 (`nvm_wal = pmem`): the store granularity libpmem2 chose, as the "
    "server logged it at each start. On tmpfs libpmem2 finds *page* granularity: a commit's "
    "persist is an `msync` of the written range, which writes nothing back on tmpfs. "
    "*Cache line* (forced with `PMEM2_FORCE_GRANULARITY=CACHE_LINE`, the `_cl` "
    "configurations) persists with cache-line flushes and a fence as on real PMem/DAX: "
    "the instructions run, but they flush to DRAM, so PMem's write-back latency is not in "
    "these numbers."
)


def _wal_pmem_granularity(records: list[dict[str, Any]]) -> dict[str, str]:
    """Per configuration with nvm_wal = pmem: the granularities its starts logged."""
    seen: dict[str, set[str]] = {}
    for r in records:
        w = r.get("wal_pmem")
        if w:
            text = w["granularity"] + (" (forced)" if w.get("forced") else "")
            seen.setdefault(r["config"], set()).add(text)
    return {k: ", ".join(sorted(v)) for k, v in seen.items()}


def _main_cells(
    cs: dict[str, Cell], cfgs: list[str], workload: str, clients: list[int]
) -> list[tuple[str, int, Cell]]:
    """(configuration, clients, cell) of the main matrix that ran, by clients, then config."""
    out = []
    for n in clients:
        for cfg in cfgs:
            c = main_cell(cs, cfg, workload, n)
            if c is not None:
                out.append((cfg, n, c))
    return out


def _tps_text(c: Cell | None) -> str:
    if c is None or c.tps is None:
        return "–"
    lo, hi = c.second_spread
    rng = c.tps_range
    reps = f" [{rng[0]:.0f}–{rng[1]:.0f}]" if rng and len(c.recs) > 1 else ""
    sec = f" (1 s: {lo:.0f}–{hi:.0f})" if lo is not None and hi is not None else ""
    flag = "" if c.durable else " NOT DURABLE"
    return f"{c.tps:.0f}{reps}{sec}{flag}"


def document(
    plan: dict[str, Any], env: dict[str, Any], records: list[dict[str, Any]], charts: list[str]
) -> list[Block]:
    cs = cells(records)
    cfgs = [c["name"] for c in plan["configs"]]
    clients = plan["clients"]
    wls = list(plan["workloads"])
    b: list[Block] = [("h1", f"OLTP: YCSB / TPC-B through pgbench, {plan['records']:,} records")]
    if env.get("interrupted"):
        b.append(("p", "**Interrupted**: only the points that finished are reported."))
    root = rootkind.report_text(env)
    if root:
        b.append(("p", root))
    if rootkind.emulated(env):
        b.append(("p", EMULATION_CAVEAT))
    b.append(
        (
            "p",
            f"Key distribution: **{plan['distribution_detail']}**. Durability: every "
            "configuration runs with "
            + ", ".join(f"`{k}={v}`" for k, v in plan["durable_settings"].items())
            + " (the server's `SHOW` checked at each start; a point where it differed is "
            "marked NOT DURABLE). Each point: restart (cold buffer pool; disk: OS page cache "
            f"dropped), CHECKPOINT, {_warmup_text(plan)}, {plan['duration_s']:.0f} s "
            f"measured, {plan['repeat']} repetition(s); shared_buffers {plan['shared_buffers']}, "
            f"data (usertable + key index) {_gb(env)}; pgbench -M prepared, "
            f"--random-seed {plan['random_seed']}." + _pretouch_text(plan),
        )
    )
    placed = _placement_text(plan)
    if placed:
        b.append(("p", placed))
    fell_back = [r for r in records if r.get("placement_fallback") or r.get("unpin_error")]
    if fell_back:
        b.append(
            (
                "p",
                f"**Placement not as asked in {len(fell_back)} point(s)**: "
                + "; ".join(
                    f"{r['key']} run {r['rep']}: {r.get('placement_why') or ''}"
                    + (f" (undoing the pin: {r['unpin_error']})" if r.get("unpin_error") else "")
                    for r in fell_back[:10]
                ),
            )
        )
    if plan["workloads"]:
        b.append(
            ("table", ["workload", "what ran"], [[w, d] for w, d in plan["workloads"].items()])
        )
    hybrid = _hybrid_text(plan)
    if hybrid:
        b.append(("p", hybrid))
    gran = _wal_pmem_granularity(records)
    if gran:
        b.append(
            (
                "p",
                WAL_PMEM_NOTE + " Here: " + "; ".join(f"`{k}` {v}" for k, v in gran.items()) + ".",
            )
        )
    if plan.get("unavailable"):
        b.append(
            (
                "p",
                "Not available: " + "; ".join(f"{k}: {v}" for k, v in plan["unavailable"].items()),
            )
        )
    if plan.get("availability_unknown"):
        unknown = plan["availability_unknown"]
        b.append(
            (
                "p",
                "Availability unknown (run): " + "; ".join(f"{k}: {v}" for k, v in unknown.items()),
            )
        )
    failed = [r for r in records if r.get("status") != "ok"]
    if failed:
        b.append(
            (
                "p",
                f"**{len(failed)} point(s) failed**: "
                + "; ".join(f"{r['key']} run {r['rep']}: {r.get('error')}" for r in failed[:10]),
            )
        )
    for img in charts:
        b.append(("img", img, img.removesuffix(".png").replace("_", " ")))
    # throughput
    for w in wls:
        b.append(("h2", f"{workloads.WORKLOADS[w].title}: throughput [transactions/s]"))
        b.append(
            (
                "p",
                "Median over the repetitions [min–max of the repetitions], (1 s: p5–p95 of the "
                "per-second throughput). A YCSB transaction is one operation (read, update or "
                "read-modify-write).",
            )
        )
        rows = [[cfg] + [_tps_text(main_cell(cs, cfg, w, n)) for n in clients] for cfg in cfgs]
        b.append(("table", ["configuration"] + [f"{n} client(s)" for n in clients], rows))
        rows = []
        for cfg in cfgs:
            row = [cfg]
            for n in clients:
                c = main_cell(cs, cfg, w, n)
                d = main_cell(cs, settings.DISK, w, n)
                base = main_cell(cs, settings.BASELINE, w, n)
                row.append(f"{ratio(_div(c, d))} / {ratio(_div(c, base))}")
            rows.append(row)
        b.append(("p", f"Throughput × `{settings.DISK}` / × `{settings.BASELINE}`:"))
        b.append(("table", ["configuration"] + [f"{n} client(s)" for n in clients], rows))
        b.append(("p", "Latency [ms] (median of the repetitions' percentiles; max: of all):"))
        rows = []
        for cfg, n, c in _main_cells(cs, cfgs, w, clients):
            ops = " ".join(
                f"{op} p99 {fmt(c.op_latency(op, 'p99_ms'), 2)}"
                for op, _ in workloads.WORKLOADS[w].mix
                if len(workloads.WORKLOADS[w].mix) > 1
            )
            rows.append(
                [cfg, n]
                + [fmt(c.latency(k), 3) for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")]
                + [ops or "–"]
            )
        b.append(
            (
                "table",
                ["configuration", "clients", "p50", "p95", "p99", "max", "per operation"],
                rows,
            )
        )
        b.append(
            (
                "p",
                "WAL, checkpoints, buffer hits and CPU per transaction (µs; server processes "
                "by backend type, pgbench the client):",
            )
        )
        rows = []
        for cfg, n, c in _main_cells(cs, cfgs, w, clients):
            cpu = c.cpu_us_per_txn()
            rows.append(
                [cfg, n, fmt(c.wal_per_txn, 0), fmt(c.checkpoints, 0), _pct(c.hit_ratio)]
                + [fmt(cpu.get(g), 1) for g in (*CPU_GROUPS, "other server", "pgbench")]
            )
        b.append(
            (
                "table",
                [
                    "configuration",
                    "clients",
                    "WAL B/txn",
                    "checkpoints",
                    "buffer hit",
                    "backends",
                    "walwriter",
                    "checkpointer",
                    "bgwriter",
                    "io workers",
                    "other",
                    "pgbench",
                ],
                rows,
            )
        )
        b += window_blocks(records, w)
    # memory ratio
    mem = [c for c in cs.values() if c.ratio]
    if mem:
        b.append(("h2", "Anti-caching: YCSB-A as the buffer pool shrinks (paper 003)"))
        ratios = _by_ratio(plan["memory_ratios"])  # largest first (plan.json sorts its keys)
        b.append(
            (
                "p",
                f"YCSB-A, {plan['distribution']}, {plan['memory_clients']} clients, "
                "shared_buffers = ratio × data ("
                + ", ".join(f"{r}: {plan['memory_ratios'][r]}" for r in ratios)
                + f"); the main matrix's point at {plan['shared_buffers']} is the column "
                "'main'. Throughput [tps] (buffer hit ratio).",
            )
        )
        main = workloads.MEMORY_WORKLOAD in plan["workloads"]  # the column 'main' ran
        rows = []
        for cfg in cfgs:
            row = [cfg]
            for r in ratios:
                c = next((x for x in mem if x.config == cfg and x.ratio == r), None)
                row.append(f"{_tps_text(c)} ({_pct(c.hit_ratio if c else None)})")
            if main:
                mc = main_cell(cs, cfg, workloads.MEMORY_WORKLOAD, plan["memory_clients"])
                row.append(f"{_tps_text(mc)} ({_pct(mc.hit_ratio if mc else None)})")
            rows.append(row)
        main_col = [f"main ({plan['shared_buffers']})"] if main else []
        b.append(("table", ["configuration", *ratios, *main_col], rows))
        b += _memory_ratios_vs_baseline(cs, cfgs, ratios, env.get("cpus"))
    if cs:
        b += _pools(cs, cfgs)
    b += pgnvm_blocks(records)
    b.append(("h2", "Environment"))
    b.append(
        (
            "table",
            ["what", "value"],
            [
                [k, str(env.get(k))]
                for k in (
                    "cpu_model",
                    "cpus",
                    "memory",
                    "kernel",
                    "git_commit",
                    "git_dirty",
                    "pgbench",
                    "clusters",
                    "filesystems",
                    "load",
                    "db_bytes",
                    "tpcb_scale",
                )
                if k in env
            ],
        )
    )
    b.append(
        (
            "p",
            "Raw: `runs.jsonl` (one record per point: pgbench's summary and command, latency "
            "percentiles, per-second spread, pg_stat_wal / checkpointer / bgwriter / database "
            "deltas, CPU per backend type), `per_second/*.csv` (throughput and latency per "
            "second), `txlog/*.log.gz` (pgbench's per-transaction logs), `plan.json`, `env.json`.",
        )
    )
    return b


def _placement_text(plan: dict[str, Any]) -> str | None:
    """How the points were placed on the vCPUs, and why (runs from before ``--placement``:
    nothing, they ran free)."""
    want = plan.get("placement")
    if want is None:
        return None
    why = f"Why: {placement.WHY}."
    if want == placement.FREE:
        return (
            "Placement: **free** (`--placement free`): pgbench and the server run where the "
            f"scheduler puts them, at every client count. {why}"
        )
    return (
        f"Placement (`--placement {want}`): at **1 client** pgbench and the server's "
        "backends run on **one vCPU**: the postmaster is pinned right after the point's "
        "start (`taskset -a -cp`; the backends it forks inherit it, the auxiliary processes "
        "started before it — checkpointer, background writer, walwriter, io workers — run "
        "free) and pgbench runs under `taskset -c`; points with more clients run free. "
        f"{why} Each repetition's placement: the column 'placement' below."
    )


def _warmup_text(plan: dict[str, Any]) -> str:
    """The warm-up rule of ``plan`` (runs from before the rule: a fixed warm-up)."""
    if "warmup_max_s" not in plan:
        return f"{plan['warmup_s']:.0f} s warm-up"
    return (
        f"warm-up of at least {plan['warmup_s']:g} s, then until a {window.SLICE_S:g} s slice "
        f"writes ≤ {plan['fpi_settled']:g} full-page images per transaction (at most "
        f"{plan['warmup_max_s']:g} s)"
    )


#: per pre-touch group (:func:`bench.oltp.pretouch.wal_group`): the pages whose first-touch
#: FPIs a point without the pre-touch writes, and the column its UPDATE sets to itself
_PRETOUCH_WORDS = {
    "tpcb": ("its uniformly chosen pgbench_accounts pages", "a balance"),
    "ycsb": ("the usertable pages its keys hit", "field1"),
}


def _pretouch_text(plan: dict[str, Any]) -> str:
    """The method's sentences on the pre-touch (:mod:`bench.oltp.pretouch`) of the run's
    TPC-B and YCSB-A, B, F points, each with its leading space; empty for a run without
    such points or from before the pre-touch (before YCSB's, for its workloads)."""
    if "pretouch" not in plan:
        return ""
    ran = list(plan["workloads"])
    if plan.get("memory_ratios") and plan.get("memory_workload"):
        ran.append(plan["memory_workload"])
    touched = {"tpcb", *plan.get("pretouch_tables", {})}
    out = ""
    for group in pretouch.WAL_GROUP_TITLES:
        names = [w for w in dict.fromkeys(ran) if w in touched and pretouch.wal_group(w) == group]
        if names:
            out += _pretouch_group_text(plan, group, names)
    return out


def _pretouch_group_text(plan: dict[str, Any], group: str, names: list[str]) -> str:
    """:func:`_pretouch_text`'s sentence for the points of ``names``, pre-touch group
    ``group``."""
    label = "TPC-B" if group == "tpcb" else "YCSB-" + "/".join(n.upper() for n in names)
    pages, column = _PRETOUCH_WORDS[group]
    if not plan["pretouch"]:
        return (
            f" {label}: **no pre-touch** (`--no-pretouch`): the first-touch full-page images "
            f"of {pages} are written in the warm-up and, where it does not settle, in the "
            "measured window."
        )
    tables = ", ".join(plan.get("pretouch_tables", {}).get(names[0], []))
    return (
        f" {label}: **pre-touch** — `VACUUM` of {tables} before the CHECKPOINT (what earlier "
        "points left dead is cleaned, the tables stay bounded), and after it one `UPDATE` "
        f"per table that sets {column} to itself in one row (the smallest `ctid`) of every "
        "heap page holding a live row, so each page's first-touch full-page image is "
        "written before the warm-up, not in the window; the warm-up follows as for every "
        "point. Its seconds and full-page images: column 'pre-touch' of the window table, "
        "runs.jsonl `pretouch` for every point (`--no-pretouch` turns it off). It reads "
        f"every page of those tables: on `disk` storage their {label} windows start with "
        "them in the OS page cache, whatever the cache drop before the CHECKPOINT removed. "
        "Its full-page images are ~8 kB per page of them"
        + _pretouch_wal_text(plan.get(f"{group}_wal"), label)
        + ", a checkpoint starts during it and the window is flagged (column 'window')."
    )


def _pretouch_wal_text(sized: dict[str, dict[str, Any]] | None, label: str) -> str:
    """How the max_wal_size of ``label``'s points was sized (plan.json ``tpcb_wal``,
    ``ycsb_wal``: the runner's ``size_pretouch_wal``), up to the clause on a checkpoint that
    starts anyway; for runs from before the sizing (every point had the common
    max_wal_size) only that clause."""
    if not sized:
        return ": where that comes near `max_wal_size`"
    each = "; ".join(
        f"{storage}: **{s['max_wal_size']}** for {s['pretouch_pages']:,} pages "
        f"({_gb_or_mb(s['fpi_bytes'])} of them)"
        + (f", cut from {s['cut_from']} to fit its WAL directory" if s.get("cut_from") else "")
        for storage, s in sized.items()
    )
    one = next(iter(sized.values()))
    return (
        f", so {label}'s points run with `max_wal_size` = max({one['minimum']}, "
        f"{one['factor']} × the pre-touched pages × 8 kB) rounded up to whole GB, from the "
        f"pages counted at set-up ({each}; each point's `max_wal_size` is in runs.jsonl): "
        "the checkpoint that WAL volume starts (at `max_wal_size` / (1 + "
        "`checkpoint_completion_target`)) lies beyond the pre-touch and the warm-up. pg_wal "
        "may grow to it; where its WAL directory's file system cannot hold it, it is cut to "
        f"{settings.WAL_ROOM_SHARE:.0%} of the room there if that still holds "
        f"{one['factor']} × the pre-touch's full-page images, and the run is refused "
        "otherwise. "
        "Where WAL still comes near it"
    )


def _gb_or_mb(n: int) -> str:
    """``n`` bytes as ``2.2 GB``, or ``13 MB`` below a GB."""
    return f"{n / (1 << 30):.1f} GB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MB"


def window_rows(records: list[dict[str, Any]], workload: str) -> list[list[Any]]:
    """One row per repetition of ``workload``'s main-matrix points: tps and what its
    measured window wrote to WAL (bytes, records and FPIs per transaction), the
    checkpoints within it, the warm-up it took and why it is not comparable, if it is not
    (:func:`bench.oltp.window.flags`). Runs from before windows were recorded are
    summarised from their pg_stat deltas."""
    rows = []
    for r in records:
        if r.get("workload") != workload or r.get("ratio") or r.get("status") != "ok":
            continue
        win = r.get("window") or window.summary(r.get("stats") or {}, r.get("transactions", 0))
        warm = r.get("warmup")
        flags = r.get(
            "window_flags", window.flags(win, warm, r.get("checkpoints_before_window", 0))
        )
        ck = win["checkpoints"]
        rows.append(
            [
                r["config"],
                r["clients"],
                r["rep"],
                fmt(r.get("tps"), 0),
                fmt(win["wal_bytes_per_txn"], 0),
                fmt(win["wal_records_per_txn"], 2),
                fmt(win["wal_fpi_per_txn"], 3),
                f"{ck['started']}/{ck['done']}",
                "-" if warm is None else f"{warm.get('seconds', 0):g}",
                pretouch.summary_text(r.get("pretouch")),
                _placement_cell(r),
                "; ".join(flags) or "ok",
            ]
        )
    rows.sort(key=lambda x: (x[1], x[0], x[2]))
    return rows


def _placement_cell(r: dict[str, Any]) -> str:
    """A repetition's placement: ``same:0``, ``free``, flagged where a pin was asked for and
    did not hold; ``–`` for runs from before it was recorded."""
    where = r.get("placement")
    if where is None:
        return "–"
    if r.get("placement_fallback") or r.get("unpin_error"):
        return f"**{where} (not as asked)**"
    return str(where)


def window_blocks(records: list[dict[str, Any]], workload: str) -> list[Block]:
    """The per-repetition account of the measured windows (:func:`window_rows`)."""
    rows = window_rows(records, workload)
    if not rows:
        return []
    return [
        (
            "p",
            'The measured window of each repetition (docs/oltp.md, "The measured window"): '
            "pg_stat_wal's bytes, records and full-page images per transaction, checkpoints "
            "started/done within it, seconds of warm-up before it, TPC-B's pre-touch and "
            "YCSB-A/B/F's (its UPDATEs' seconds and full-page images; `off`: "
            "`--no-pretouch`), where pgbench and the backends ran (`same:N`: both on vCPU N; "
            "`free`: the scheduler's choice); a window with a checkpoint, after a warm-up "
            "that did not settle or after a checkpoint that started since the point's "
            "CHECKPOINT is flagged.",
        ),
        (
            "table",
            [
                "configuration",
                "clients",
                "rep",
                "tps",
                "WAL B/txn",
                "records/txn",
                "FPI/txn",
                "checkpoints",
                "warm-up s",
                "pre-touch",
                "placement",
                "window",
            ],
            rows,
        ),
    ]


#: pgnvm's counters shown per transaction (:func:`pgnvm_blocks`): (key, column)
PGNVM_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cow_copies", "copies (CoW)"),
    ("mapped_writes", "write-backs"),
    ("cleaner_writes", "by the bgwriter's pass"),
    ("slot_writes", "by the slot clock"),
    ("demotions", "demotions"),
    ("redirects", "read in place"),
    ("hints_skipped", "hints skipped"),
    ("prunes_deferred", "prunes deferred"),
)


def pgnvm_rows(records: list[dict[str, Any]]) -> list[list[str]]:
    """One row per repetition whose window counted something of :data:`PGNVM_COLUMNS`
    (se1/se2; base counts nothing of these), in run order."""
    rows = []
    for r in records:
        per = r.get("pgnvm_per_txn")
        if r.get("status") != "ok" or not per or not any(per.get(k) for k, _ in PGNVM_COLUMNS):
            continue
        w = workloads.WORKLOADS[r["workload"]].title.split(" ")[0]
        point = f"{w}, {r['clients']}c" + (f", ratio {r['ratio']}" if r.get("ratio") else "")
        rows.append(
            [r["config"], point, str(r["rep"])]
            + [fmt(per.get(k), 3) if k in per else "–" for k, _ in PGNVM_COLUMNS]
        )
    return rows


def pgnvm_blocks(records: list[dict[str, Any]]) -> list[Block]:
    """What pgnvm did per transaction in each measured window (:func:`pgnvm_rows`)."""
    rows = pgnvm_rows(records)
    if not rows:
        return []
    return [
        ("h2", "What pgnvm did per transaction"),
        (
            "p",
            "Per measured window, every server process's pgnvm counters (`pgnvm_counters()`, "
            "`pgnvm_pool()`) divided by the window's transactions: copies of pages read in "
            "place before a change (copy-on-write), write-backs through the mappings (of "
            "which the background writer's pass ahead of the slot clock and the slot clock's "
            "callers), pages given up to be read in place again (demotions: the hybrid "
            "pool's slots), misses read in place, hint bits not set on pages read in place, "
            "prunes deferred on them (docs/storage-engines.md, R3, R9, H5, H5a). Counts, "
            "not times.",
        ),
        ("table", ["configuration", "point", "rep", *(c for _, c in PGNVM_COLUMNS)], rows),
    ]


def _hybrid_text(plan: dict[str, Any]) -> str | None:
    """What the hybrid pools of the run were: the slots and the descriptors, and the rule."""
    pools = plan.get("hybrid_pool") or {}
    if not pools:
        return None
    parts = []
    for name, h in pools.items():
        each = ", ".join(
            f"{what}: {h['pools'][what]['shared_buffers']} of slots, "
            f"{h['pools'][what]['nvm_buffer_descriptors']} of descriptors"
            for what in sorted(
                h["pools"], key=lambda w: Fraction(1 if w == "main" else w), reverse=True
            )
        )
        parts.append(f"`{name}` (database at set-up {_mb(h['db_bytes_at_setup'])}): {each}")
    return (
        "se2's hybrid pool: shared_buffers is its DRAM for pages that must be copied "
        "(the slots: the job's, ratio × data in the memory experiment, as every "
        "configuration's shared_buffers), `nvm_buffer_descriptors` the pages it holds, "
        "redirected ones without DRAM. Descriptors: the database at set-up × "
        f"{next(iter(pools.values()))['growth_headroom']} for the run's growth, then the "
        "whole-database rule (+25%, +64 MB, in steps of 128 MB), never fewer than the "
        "slots; whether they still covered the database at the end of each point: "
        "'Buffer pools and shared memory' below. " + "; ".join(parts) + "."
    )


def _largest(ratios: list[str]) -> str:
    return max(ratios, key=Fraction)


def _by_ratio(ratios: Iterable[str]) -> list[str]:
    """Memory ratios, largest first."""
    return sorted(ratios, key=Fraction, reverse=True)


#: a point counts as saturated when it used at least this share of the vCPUs
SATURATED = 0.9


def _memory_ratios_vs_baseline(
    cs: dict[str, Cell], cfgs: list[str], ratios: list[str], cpus: Any = None
) -> list[Block]:
    """Throughput × the baseline at the same ratio (the same DRAM for its pages) and × the
    baseline at the largest ratio (issue 22: se2's hybrid pool at 1/128 against stock at 1/2);
    then, where every point saturated the ``cpus`` vCPUs, the same at equal host speed,
    estimated from pgbench's CPU (:attr:`bench.oltp.cells.Cell.pgbench_cpu_rate`)."""
    mem = {(c.config, c.ratio): c for c in cs.values() if c.ratio}
    top = _largest(ratios)
    base_top = mem.get((settings.BASELINE, top))

    def table(div: Callable[[Cell | None, Cell | None], float | None]) -> list[list[str]]:
        """Per configuration and ratio: ``div`` × the baseline at that ratio / at ``top``."""
        return [
            [cfg]
            + [
                f"{ratio(div(mem.get((cfg, r)), mem.get((settings.BASELINE, r))))} / "
                f"{ratio(div(mem.get((cfg, r)), base_top))}"
                for r in ratios
            ]
            for cfg in cfgs
        ]

    rows = table(_div)
    out: list[Block] = [
        (
            "p",
            f"Throughput × `{settings.BASELINE}` at the same ratio (the same shared_buffers) / "
            f"× `{settings.BASELINE}` at the largest ratio ({top}):",
        ),
        ("table", ["configuration", *ratios], rows),
    ]
    used = [c.cpu_used for c in mem.values()]
    try:
        n = float(cpus)
    except (TypeError, ValueError):
        n = 0.0
    if not n or any(u is None or u < SATURATED * n for u in used):
        why = (
            "the number of vCPUs is not recorded"
            if not n
            else "not every point saturated the vCPUs (or its CPU was not recorded): "
            + ", ".join("–" if u is None else f"{u:.2f}" for u in used)
            + f" of {n:g} vCPU seconds per second"
        )
        return [*out, ("p", f"No estimate at equal host speed: {why}.")]
    speed_rows = table(_rate_div)
    return [
        *out,
        (
            "p",
            "The same ratios **at equal host speed, estimated** from pgbench's CPU seconds per "
            "second (median of the repetitions; the cells' repetitions used a median of "
            + f"{min(u for u in used if u is not None):.2f}-"
            + f"{max(u for u in used if u is not None):.2f} of the {n:g} vCPUs). A host "
            "whose speed drifts moves every configuration's throughput; where pgbench and the "
            "server saturate the vCPUs, pgbench's CPU rate does not move with it (a slower "
            "host stretches pgbench's and the server's work per transaction alike), but falls "
            "as the server needs more CPU per transaction. With pgbench's work per "
            "transaction the same in every configuration, the ratio of two configurations' "
            "pgbench CPU rates is their throughput ratio at equal host speed. An estimate, "
            "without an error bar: it assumes nothing else running and a slowdown that "
            "stretches pgbench's work as much as the server's (memory-bound copies may slow "
            "more than pgbench's system calls), and it counts vCPU time lost to idling as "
            "the server's. The throughput ratios above are the measurement.",
        ),
        ("table", ["configuration", *ratios], speed_rows),
    ]


def _rate_div(a: Cell | None, b: Cell | None) -> float | None:
    """a's pgbench CPU rate over b's (:attr:`bench.oltp.cells.Cell.pgbench_cpu_rate`)."""
    ra = a.pgbench_cpu_rate if a else None
    rb = b.pgbench_cpu_rate if b else None
    return ra / rb if ra and rb else None


def _pools(cs: dict[str, Cell], cfgs: list[str]) -> list[Block]:
    """Each point's pool as the server had it, and the DRAM: shared_buffers (in the hybrid
    pool the slots), the hybrid pool's descriptors, the shared memory the server allocated
    (pg_shmem_allocations), and whether the pool's pages still covered the database."""
    order = {c: i for i, c in enumerate(cfgs)}
    rows = []
    for c in sorted(
        cs.values(),
        key=lambda c: (
            order.get(c.config, len(order)),
            c.ratio is not None,
            -Fraction(c.ratio or 0),
            c.key,
        ),
    ):
        w = workloads.WORKLOADS[c.workload].title.split(" ")[0]
        covers = {True: "yes", False: "**no**", None: "–"}[c.pool_covers_db]
        rows.append(
            [
                c.config,
                f"{w}, {c.clients} client(s)" + (f", ratio {c.ratio}" if c.ratio else ""),
                c.shared_buffers,
                c.descriptors or "–",
                _mb(c.shmem_bytes),
                _mb(c.db_bytes_end),
                covers,
            ]
        )
    return [
        ("h2", "Buffer pools and shared memory"),
        (
            "p",
            "Per point: shared_buffers (the DRAM for pages; in se2's hybrid pool the slots for "
            "copied pages), the hybrid pool's descriptors (the pages it holds, redirected ones "
            "without DRAM; ~145 B of shared memory each), the shared memory the server "
            "allocated (`pg_shmem_allocations`: pages, descriptors and the rest; the pool's "
            "DRAM is in it), the database at the end of the measured run, and whether the "
            "pool's pages (its descriptors, else shared_buffers) still covered it.",
        ),
        (
            "table",
            [
                "configuration",
                "point",
                "shared_buffers",
                "nvm_buffer_descriptors",
                "shared memory",
                "database at the end",
                "pool covers it",
            ],
            rows,
        ),
    ]


def _mb(x: float | None) -> str:
    return "–" if x is None else f"{x / (1 << 20):,.0f} MB"


def _gb(env: dict[str, Any]) -> str:
    sizes = env.get("data_bytes") or {}
    return ", ".join(f"{s} {v / 1e9:.2f} GB" for s, v in sizes.items()) or "?"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"


def _div(a: Cell | None, b: Cell | None) -> float | None:
    if a is None or b is None or not a.tps or not b.tps:
        return None
    return a.tps / b.tps


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for k, c in cells(records).items():
        out[k] = {
            "config": c.config,
            "workload": c.workload,
            "distribution": c.distribution,
            "clients": c.clients,
            "ratio": c.ratio,
            "shared_buffers": c.shared_buffers,
            "reps": len(c.recs),
            "tps_median": c.tps,
            "tps_range": c.tps_range,
            "tps_1s_p5_p95": c.second_spread,
            "latency_ms": {k2: c.latency(k2) for k2 in ("p50_ms", "p95_ms", "p99_ms", "max_ms")},
            "wal_bytes_per_txn": c.wal_per_txn,
            "checkpoints": c.checkpoints,
            "buffer_hit_ratio": c.hit_ratio,
            "cpu_us_per_txn": c.cpu_us_per_txn(),
            "durable": c.durable,
            "nvm_buffer_descriptors": c.descriptors,
            "shmem_bytes": c.shmem_bytes,
            "db_bytes_end": c.db_bytes_end,
            "pool_covers_db": c.pool_covers_db,
            "placement": c.placements,
        }
    return out


def write(
    out: Path, plan: dict[str, Any], env: dict[str, Any], records: list[dict[str, Any]]
) -> None:
    from bench.oltp import charts

    imgs = charts.draw(out, plan, cells(records))
    doc = document(plan, env, records, imgs)
    (out / "report.md").write_text(blocks.to_markdown(doc))
    (out / "report.html").write_text(blocks.to_html(doc, "pgnvm oltp"))
    results.write_json(out / "summary.json", summary(records))


def load_records(out: Path) -> list[dict[str, Any]]:
    path = out / "runs.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rebuild(out: Path) -> None:
    """Rewrite the report of a result directory from its raw files."""
    plan = json.loads((out / "plan.json").read_text())
    env = json.loads((out / "env.json").read_text())
    write(out, plan, env, load_records(out))
