"""report.md, report.html, PNG charts and the console summary of a ``./pgnvm tpch`` run.

Built from the run records only (``runs.jsonl``), so a report can be rebuilt from the raw
files (:func:`rebuild`). The document is a list of blocks rendered twice (Markdown, HTML).

Charts (matplotlib, Agg backend):

* ``wallclock_normalized.png`` - per-query median wall-clock normalised to ``nvm_base_worker``
  (papers 002 Fig. 7 / 12), the ``mem_limit`` ceiling as a black mark per query, and the
  geometric mean over the queries every configuration finished.
* ``kernel_share.png`` - the backend's system / (user + system) CPU time per query (Fig. 6/11).
* ``totals.png`` - sum and geometric mean of the medians per configuration.
* ``page_faults.png`` - the backend's minor and major page faults per query.
* ``cpu_breakdown.png`` - CPU seconds per configuration: backend (main thread) user / system,
  its prefetch helper threads, I/O workers, other server processes.
* ``hw_counters.png`` - only when hardware counters were available.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.tpch import measure, stats
from bench.tpch import settings as cfgs
from bench.tpch.queries import qname

Block = tuple[Any, ...]


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    return f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"


def _ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def _num(x: float | None) -> str:
    if x is None:
        return "–"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.2f}M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def _counter(name: str) -> Callable[[dict[str, Any]], float | None]:
    """The value of perf counter ``name`` in a run record (None if not counted)."""

    def get(r: dict[str, Any]) -> float | None:
        v = ((r.get("perf") or {}).get("counters") or {}).get(name)
        return float(v) if v is not None else None

    return get


def _legend_below(ax: Any, n: int) -> None:
    ax.legend(
        fontsize=7, ncol=min(7, n), loc="upper center", bbox_to_anchor=(0.5, -0.07), frameon=False
    )


class Report:
    def __init__(
        self,
        out: Path,
        plan: dict[str, Any],
        env: dict[str, Any],
        records: list[dict[str, Any]],
        mismatches: list[dict[str, Any]],
        plans: dict[tuple[int, str], str] | None = None,
        interrupted: bool = False,
    ) -> None:
        self.out = out
        self.plan = plan
        self.env = env
        self.records = records
        self.mismatches = mismatches
        self.plans = plans or {}
        self.interrupted = interrupted
        ran = {r["config"] for r in records}
        self.configs = [c["name"] for c in plan["configs"] if c["name"] in ran]
        self.queries = [q for q in plan["queries"] if any(r["query"] == q for r in records)]
        self.table = stats.cells(records)
        self.baseline = (
            cfgs.BASELINE
            if cfgs.BASELINE in self.configs
            else (self.configs[0] if self.configs else None)
        )
        self.refs = [c for c in (cfgs.BASELINE, cfgs.CEILING, cfgs.DISK) if c in self.configs]
        self.common = stats.common_queries(self.table, self.configs, self.queries)
        self.summary = stats.summarize(self.table, self.configs, self.queries, self.refs)
        self.charts: list[tuple[str, str]] = []
        helper_cfgs = {
            c["name"]
            for c in plan["configs"]
            if (c.get("settings") or {}).get("nvm_prefetch") == "helper"
        }
        helper_cfgs |= {r["config"] for r in records if (r.get("helpers") or {}).get("threads")}
        #: configurations whose backend has prefetch helper threads
        self.helper_configs = [c for c in self.configs if c in helper_cfgs]
        self.unavailable: dict[str, str] = dict(plan.get("unavailable") or {})
        #: configurations that ran although their availability was unknown: why
        self.unknown: dict[str, str] = dict(plan.get("availability_unknown") or {})
        #: 'on' or 'off' (--data-checksums; plans written before the option: always on)
        self.checksums: str = str(plan.get("data_checksums") or "on")

    # ---- per-cell helpers over the raw records

    def _ok_runs(self, c: str, q: int) -> list[dict[str, Any]]:
        return [
            r for r in self.records if r["config"] == c and r["query"] == q and r["status"] == "ok"
        ]

    def median_of(
        self, c: str, q: int, fn: Callable[[dict[str, Any]], float | None]
    ) -> float | None:
        vals = [v for v in (fn(r) for r in self._ok_runs(c, q)) if v is not None]
        return statistics.median(vals) if vals else None

    def sum_common(self, c: str, fn: Callable[[dict[str, Any]], float | None]) -> float | None:
        vals = [self.median_of(c, q, fn) for q in self.common]
        return sum(v for v in vals if v is not None) if self.common else None

    # ---- charts

    def _plt(self) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt

    def _save(self, fig: Any, name: str, title: str) -> None:
        fig.tight_layout()
        fig.savefig(self.out / name, dpi=110)
        self._plt().close(fig)
        self.charts.append((name, title))

    def _colors(self) -> dict[str, Any]:
        plt = self._plt()
        cmap = plt.get_cmap("tab10")
        return {c: cmap(i % 10) for i, c in enumerate(self.configs)}

    def chart_normalized(self) -> None:
        if not self.baseline or not self.queries:
            return
        plt = self._plt()
        colors = self._colors()
        bars = [c for c in self.configs if c != cfgs.CEILING]
        labels = [qname(q).upper() for q in self.queries] + ["GM"]
        fig, ax = plt.subplots(
            figsize=(min(16.0, max(8.0, 0.55 * len(labels) * max(1, len(bars)) / 2.5)), 4.8)
        )
        width = 0.8 / max(1, len(bars))
        base_gm = self.summary[self.baseline].geomean
        for i, c in enumerate(bars):
            ys = [stats.normalized(self.table, c, self.baseline, q) for q in self.queries]
            gm = self.summary[c].geomean
            ys.append(gm / base_gm if gm and base_gm else None)
            xs = [j - 0.4 + width * (i + 0.5) for j in range(len(labels))]
            ax.bar(
                [x for x, y in zip(xs, ys, strict=True) if y is not None],
                [y for y in ys if y is not None],
                width,
                label=c,
                color=colors[c],
            )
        if cfgs.CEILING in self.configs:
            ys = [
                stats.normalized(self.table, cfgs.CEILING, self.baseline, q) for q in self.queries
            ]
            gm = self.summary[cfgs.CEILING].geomean
            ys.append(gm / base_gm if gm and base_gm else None)
            for j, y in enumerate(ys):
                if y is not None:
                    ax.hlines(
                        y,
                        j - 0.42,
                        j + 0.42,
                        colors="black",
                        linewidth=2,
                        label=cfgs.CEILING if j == 0 else None,
                    )
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(labels)), labels, rotation=0, fontsize=8)
        ax.set_ylabel(f"wall-clock / {self.baseline}")
        ax.set_title(
            f"TPC-H SF {self.plan['sf']:g}, checksums {self.checksums}: median wall-clock "
            f"normalised to {self.baseline} (black: {cfgs.CEILING} ceiling)"
        )
        _legend_below(ax, len(bars) + 1)
        self._save(fig, "wallclock_normalized.png", "Wall-clock normalised (Fig. 7/12)")

    def _grouped(
        self,
        name: str,
        title: str,
        ylabel: str,
        value: Callable[[str, int], float | None],
        logy: bool = False,
        scale: float = 1.0,
    ) -> None:
        if not self.queries:
            return
        plt = self._plt()
        colors = self._colors()
        fig, ax = plt.subplots(
            figsize=(min(16.0, max(8.0, 0.5 * len(self.queries) * len(self.configs) / 2.5)), 4.4)
        )
        width = 0.8 / max(1, len(self.configs))
        for i, c in enumerate(self.configs):
            xs, ys = [], []
            for j, q in enumerate(self.queries):
                v = value(c, q)
                if v is not None:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(v * scale)
            ax.bar(xs, ys, width, label=c, color=colors[c])
        ax.set_xticks(
            range(len(self.queries)), [qname(q).upper() for q in self.queries], fontsize=8
        )
        if logy:
            ax.set_yscale("log")
            ax.set_ylim(bottom=1)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        _legend_below(ax, len(self.configs))
        self._save(fig, name, title)

    def chart_kernel_share(self) -> None:
        self._grouped(
            "kernel_share.png",
            "Kernel-time share of the backend (Fig. 6/11)",
            "system / (user + system) CPU [%]",
            lambda c, q: self.table[(c, q)].kernel_share if (c, q) in self.table else None,
            scale=100.0,
        )

    def chart_page_faults(self) -> None:
        self._grouped(
            "page_faults.png",
            "Backend page faults per query (minor + major)",
            "page faults (median)",
            lambda c, q: self.median_of(
                c,
                q,
                lambda r: (
                    max(
                        1,
                        (r.get("backend") or {}).get("minflt", 0)
                        + (r.get("backend") or {}).get("majflt", 0),
                    )
                    if r.get("backend")
                    else None
                ),
            ),
            logy=True,
        )

    def chart_totals(self) -> None:
        if not self.configs or not self.common:
            return
        plt = self._plt()
        colors = self._colors()
        fig, ax = plt.subplots(figsize=(11, 0.5 * len(self.configs) + 1.5))
        totals = [self.summary[c].total or 0.0 for c in self.configs]
        ax.barh(self.configs, totals, color=[colors[c] for c in self.configs])
        # the notes form one column right of the longest bar, inside the axes
        top = max(totals) or 1.0
        for i, c in enumerate(self.configs):
            s = self.summary[c]
            notes = [f"GM {s.geomean:.3f}s" if s.geomean else ""]
            notes += [f"total {_ratio(s.total_ratios.get(r))} {r}" for r in self.refs]
            ax.text(top * 1.03, i, ", ".join(n for n in notes if n), va="center", fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"sum of median wall-clock over {len(self.common)} queries [s]")
        ax.set_title("Totals per configuration")
        ax.set_xlim(0, top * 2.7)
        self._save(fig, "totals.png", "Totals")

    def cpu_parts(self, c: str) -> dict[str, float]:
        def backend(key: str) -> Callable[[dict[str, Any]], float | None]:
            return lambda r: (r.get("backend") or {}).get(key)

        def group(name: str | None) -> Callable[[dict[str, Any]], float | None]:
            def fn(r: dict[str, Any]) -> float | None:
                o = r.get("others")
                if not o:
                    return None
                gs = o.get("groups", {})
                if name is not None:
                    g = gs.get(name, {})
                    return g.get("utime_s", 0.0) + g.get("stime_s", 0.0)
                iow = gs.get("io worker", {})
                return (
                    measure.others_cpu_total(o) - iow.get("utime_s", 0.0) - iow.get("stime_s", 0.0)
                )

            return fn

        def helpers(key: str) -> Callable[[dict[str, Any]], float | None]:
            return lambda r: (r.get("helpers") or {}).get(key)

        return {
            "backend user": self.sum_common(c, backend("utime_s")) or 0.0,
            "backend system": self.sum_common(c, backend("stime_s")) or 0.0,
            "helper threads user": self.sum_common(c, helpers("utime_s")) or 0.0,
            "helper threads system": self.sum_common(c, helpers("stime_s")) or 0.0,
            "io workers": self.sum_common(c, group("io worker")) or 0.0,
            "other server processes": self.sum_common(c, group(None)) or 0.0,
        }

    def chart_cpu(self) -> None:
        if not self.configs or not self.common:
            return
        plt = self._plt()
        fig, ax = plt.subplots(figsize=(8, 0.5 * len(self.configs) + 1.5))
        left = [0.0] * len(self.configs)
        parts = {c: self.cpu_parts(c) for c in self.configs}
        keys = list(parts[self.configs[0]])
        if not self.helper_configs:
            keys = [k for k in keys if not k.startswith("helper")]
        for k in keys:
            vals = [parts[c][k] for c in self.configs]
            ax.barh(self.configs, vals, left=left, label=k)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        ax.invert_yaxis()
        ax.set_xlabel(f"CPU seconds, sum of medians over {len(self.common)} queries")
        ax.set_title("Where the CPU time goes")
        ax.legend(fontsize=7)
        self._save(fig, "cpu_breakdown.png", "CPU breakdown")

    def hw_available(self) -> bool:
        for r in self.records:
            cs = (r.get("perf") or {}).get("counters") or {}
            if cs.get("cycles_user") is not None:
                return True
        return False

    def chart_hw(self) -> None:
        if not self.hw_available() or not self.common:
            return
        plt = self._plt()
        names = [
            "cycles",
            "instructions",
            "stalled_cycles_backend",
            "llc_read_misses",
            "l1d_read_misses",
        ]
        fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.6))
        for ax, n in zip(axes, names, strict=True):
            u = [self.sum_common(c, _counter(f"{n}_user")) or 0.0 for c in self.configs]
            k = [self.sum_common(c, _counter(f"{n}_kernel")) or 0.0 for c in self.configs]
            ax.barh(self.configs, u, label="user")
            ax.barh(self.configs, k, left=u, label="kernel")
            ax.set_title(n, fontsize=8)
            ax.tick_params(labelsize=6)
            ax.invert_yaxis()
        axes[0].legend(fontsize=6)
        fig.suptitle("Backend hardware counters, sum of medians (Fig. 8/9/13/14)")
        self._save(fig, "hw_counters.png", "Hardware counters")

    def make_charts(self) -> None:
        for fn in (
            self.chart_normalized,
            self.chart_kernel_share,
            self.chart_totals,
            self.chart_page_faults,
            self.chart_cpu,
            self.chart_hw,
        ):
            fn()

    # ---- document

    def correctness_blocks(self) -> list[Block]:
        if not self.mismatches:
            n = len({(r["config"], r["query"]) for r in self.records if r["status"] == "ok"})
            return [
                (
                    "p",
                    f"**Correctness: OK.** Every answer ({n} configuration × query pairs) "
                    "equals the first answer of the same query (numbers within a relative "
                    "1e-9; rows with equal ORDER BY keys in any order).",
                )
            ]
        rows = [
            [qname(m["query"]).upper(), m["config"], str(m["rep"]), m["reference"], m["diff"]]
            for m in self.mismatches
        ]
        return [
            (
                "p",
                f"**CORRECTNESS FAILED: {len(self.mismatches)} wrong answer(s).** "
                "The answers are in answers/ (the wrong ones as *.WRONG.json).",
            ),
            ("table", ["query", "config", "run", "differs from", "difference"], rows),
        ]

    def summary_blocks(self) -> list[Block]:
        hdr = [
            "configuration",
            "engine",
            "storage",
            f"total [s] ({len(self.common)} q)",
            "geomean [s]",
            *[f"GM ×{r}" for r in self.refs],
            *[f"total ×{r}" for r in self.refs],
            "queries ok",
            "failed",
        ]
        if self.helper_configs:
            hdr.insert(5, "helper CPU [s]")
        by = {c["name"]: c for c in self.plan["configs"]}
        rows = []
        for c in self.configs:
            s = self.summary[c]
            rows.append(
                [
                    c,
                    by[c]["engine"],
                    by[c]["storage"],
                    _fmt(s.total, 2),
                    _fmt(s.geomean, 3),
                    *[_ratio(s.ratios.get(r)) for r in self.refs],
                    *[_ratio(s.total_ratios.get(r)) for r in self.refs],
                    str(s.n_ok),
                    str(s.n_failed),
                ]
            )
            if self.helper_configs:
                rows[-1].insert(5, _fmt(self.helper_total(c), 3))
        out: list[Block] = [("table", hdr, rows)]
        for head, what, notes in (
            ("Not run", "not available", self.unavailable),
            ("Run, availability unknown", "unknown", self.unknown),
        ):
            if notes:
                text = "; ".join(f"{n} — {what}: {w}" for n, w in notes.items())
                out.append(("p", f"{head}: {text}."))
        return out

    def per_query_blocks(self) -> list[Block]:
        hdr = ["query", *self.configs]
        rows = []
        for q in self.queries:
            row = [qname(q).upper()]
            for c in self.configs:
                cell = self.table.get((c, q))
                if cell is None:
                    row.append("–")
                elif cell.ok:
                    txt = f"{cell.median:.3f} [{cell.min:.3f}–{cell.max:.3f}]"
                    if cell.status_summary() != "ok":
                        txt += f" ({cell.status_summary()})"
                    row.append(txt)
                else:
                    row.append(cell.status_summary().upper())
            rows.append(row)
        return [("table", hdr, rows)]

    def normalized_blocks(self) -> list[Block]:
        if not self.baseline:
            return []
        hdr = ["query", *self.configs]
        rows = [
            [
                qname(q).upper(),
                *[_fmt(stats.normalized(self.table, c, self.baseline, q), 3) for c in self.configs],
            ]
            for q in self.queries
        ]
        return [("table", hdr, rows)]

    def simple_table(self, fn: Callable[[str, int], str]) -> Block:
        return (
            "table",
            ["query", *self.configs],
            [[qname(q).upper(), *[fn(c, q) for c in self.configs]] for q in self.queries],
        )

    def io_blocks(self) -> list[Block]:
        def io(bt: str, col: str) -> Callable[[dict[str, Any]], float | None]:
            return lambda r: (
                measure.stat_io_sum(r["pg_stat_io"], bt, col)
                if r.get("pg_stat_io") is not None
                else None
            )

        hdr = [
            "configuration",
            "client reads",
            "client read bytes",
            "client hits",
            "io worker reads",
            "client evictions",
        ]
        rows = [
            [
                c,
                _num(self.sum_common(c, io("client backend", "reads"))),
                _num(self.sum_common(c, io("client backend", "read_bytes"))),
                _num(self.sum_common(c, io("client backend", "hits"))),
                _num(self.sum_common(c, io("io worker", "reads"))),
                _num(self.sum_common(c, io("client backend", "evictions"))),
            ]
            for c in self.configs
        ]
        return [("table", hdr, rows)]

    def cpu_blocks(self) -> list[Block]:
        hdr = [
            "configuration",
            "backend user [s]",
            "backend system [s]",
            "helper threads user [s]",
            "helper threads system [s]",
            "io workers [s]",
            "other server processes [s]",
        ]
        rows = []
        for c in self.configs:
            p = self.cpu_parts(c)
            vals = [_fmt(v, 2) for v in p.values()]
            if c not in self.helper_configs:
                vals[2] = vals[3] = "–"
            rows.append([c, *vals])
        return [
            ("table", hdr, rows),
            (
                "p",
                "Sums over the common queries of per-query medians. Backend: the main thread "
                "of the measured backend process (the computation thread), from "
                "/proc/<pid>/task/<pid>/stat; helper threads: its other threads (prefetch "
                "helpers, nvm_prefetch = helper), /proc/<pid>/task/<tid>/stat. Parallel "
                "workers are other processes, counted under other server processes "
                "(running: by backend type; exited: the postmaster's reaped-children "
                "times); a worker's CPU includes its own helper threads.",
            ),
        ]

    @staticmethod
    def _helper_cpu(r: dict[str, Any]) -> float | None:
        return stats.cpu_seconds(r.get("helpers"))

    @staticmethod
    def _backend_cpu(r: dict[str, Any]) -> float | None:
        return stats.cpu_seconds(r.get("backend"))

    def helper_total(self, c: str) -> float | None:
        """Sum over the common queries of the median helper CPU (user + system) of ``c``."""
        if c not in self.helper_configs:
            return None
        return self.sum_common(c, self._helper_cpu)

    def _prefetch(self, key: str) -> Callable[[dict[str, Any]], float | None]:
        def get(r: dict[str, Any]) -> float | None:
            v = (r.get("prefetch") or {}).get(key)
            return float(v) if isinstance(v, int | float) else None

        return get

    def helper_blocks(self) -> list[Block]:
        if not self.helper_configs:
            return [
                (
                    "p",
                    "No configuration of this run has prefetch helper threads "
                    "(nvm_prefetch = helper).",
                )
            ]
        hc = self.helper_configs

        def cell(c: str, q: int) -> str:
            h = self.median_of(c, q, self._helper_cpu)
            b = self.median_of(c, q, self._backend_cpu)
            n = self.median_of(c, q, lambda r: (r.get("helpers") or {}).get("threads"))
            if h is None:
                return "–"
            return f"{h:.3f} / {_fmt(b, 3)} ({_num(n)} thr)"

        rows = [[qname(q).upper(), *[cell(c, q) for c in hc]] for q in self.queries]
        rows.append(
            [
                f"total ({len(self.common)} q)",
                *[
                    f"{_fmt(self.helper_total(c), 3)} / "
                    f"{_fmt(self.sum_common(c, self._backend_cpu), 3)}"
                    for c in hc
                ],
            ]
        )
        out: list[Block] = [
            (
                "p",
                "CPU seconds of the backend's prefetch helper threads / of its main "
                "(computation) thread, median per query, and the number of helper threads; "
                "total: sums of the medians over the common queries. On-CPU time from "
                "/proc/<pid>/task/<tid>/schedstat (nanoseconds; helpers often run for a few "
                "ms per query, below the 10 ms ticks of the user/system split in the CPU "
                "table). Helper CPU is not in the backend columns elsewhere in this report.",
            ),
            ("table", ["query", *hc], rows),
        ]
        # the pool as the server reports it (pgnvm_prefetch(), after each query)
        have = [c for c in hc if any(r.get("prefetch") for r in self.records if r["config"] == c)]
        if not have:
            return out
        prow = []
        for c in have:
            recs = [r for r in self.records if r["config"] == c and r.get("prefetch")]
            schemes = sorted({str(r["prefetch"].get("scheme")) for r in recs})
            mappings = sorted({str(r["prefetch"].get("mapping")) for r in recs})
            cpus = sorted(
                {",".join(str(x) for x in (r["prefetch"].get("helper_cpus") or [])) for r in recs}
            )
            fbs = sorted(
                {str(r["prefetch"]["fallback"]) for r in recs if r["prefetch"].get("fallback")}
            )
            prow.append(
                [
                    c,
                    "/".join(mappings),
                    "/".join(schemes),
                    " | ".join(x or "–" for x in cpus),
                    *[
                        _num(self.sum_common(c, self._prefetch(k)))
                        for k in ("jobs_enqueued", "jobs_dropped", "jobs_skipped", "fault_errors")
                    ],
                    _fmt((self.sum_common(c, self._prefetch("helper_cpu_ms")) or 0.0) / 1e3, 3),
                    "; ".join(fbs) or "–",
                ]
            )
        out += [
            (
                "p",
                "The pools as pgnvm_prefetch() reported them after each query (sums of "
                "per-query medians over the common queries; a scheme other than the "
                "mapping asked for is the library's fallback).",
            ),
            (
                "table",
                [
                    "configuration",
                    "mapping",
                    "effective",
                    "helper CPUs",
                    "jobs enqueued",
                    "dropped",
                    "skipped",
                    "fault errors",
                    "helper CPU (library) [s]",
                    "fallback",
                ],
                prow,
            ),
        ]
        return out

    def hw_blocks(self) -> list[Block]:
        if not self.hw_available():
            return [
                (
                    "p",
                    f"Hardware counters: **not available** — "
                    f"{self.env.get('hardware_counters', 'unknown')}. Software counters "
                    "(task-clock, page faults, context switches) are in runs.jsonl.",
                )
            ]
        names = [
            n
            for n in measure.counter_names()
            if not n.startswith(("task", "page", "context", "cpu_m"))
        ]
        hdr = ["configuration", *names]
        rows = [[c, *[_num(self.sum_common(c, _counter(n))) for n in names]] for c in self.configs]
        return [
            (
                "p",
                "Hardware counters of the backend (sum over the common queries of the "
                "per-query medians; user and kernel counted apart; scaled when multiplexed).",
            ),
            ("table", hdr, rows),
        ]

    def plan_blocks(self) -> list[Block]:
        diffs = []
        for q in self.queries:
            texts = {c: self.plans[(q, c)] for c in self.configs if (q, c) in self.plans}
            if len(set(texts.values())) > 1:
                groups: dict[str, list[str]] = {}
                for c, t in texts.items():
                    groups.setdefault(t, []).append(c)
                diffs.append([qname(q).upper(), " | ".join(", ".join(g) for g in groups.values())])
        if not self.plans:
            return []
        if not diffs:
            return [
                (
                    "p",
                    "Plans (EXPLAIN, costs off; in plans/): identical in every "
                    "configuration for every query.",
                )
            ]
        return [
            (
                "p",
                "Plans (EXPLAIN, costs off; in plans/) differ between configurations "
                "for these queries (groups of configurations with the same plan):",
            ),
            ("table", ["query", "plan groups"], diffs),
        ]

    def config_blocks(self) -> list[Block]:
        rows = []
        for c in self.plan["configs"]:
            own = dict(c["server_settings"].items())
            extra = ", ".join(f"{k}={v}" for k, v in sorted(c["settings"].items()))
            sb = own.get("shared_buffers", "")
            rows.append(
                [
                    c["name"],
                    c["engine"],
                    c["storage"],
                    sb,
                    extra or "–",
                    "yes" if c["prewarm"] else "–",
                    "yes" if c["drop_caches"] else "–",
                    c["doc"],
                ]
            )
            if c["name"] in self.unknown:
                rows[-1][-1] += f" (availability unknown: {self.unknown[c['name']]})"
        for name, why in self.plan.get("unavailable", {}).items():
            rows.append([name, "", "", "", "", "", "", f"NOT AVAILABLE: {why}"])
        common = cfgs.common_settings(
            cfgs.Common(
                self.plan["shared_buffers"], self.plan["work_mem"], self.plan["parallel_workers"]
            )
        )
        return [
            (
                "table",
                [
                    "configuration",
                    "engine",
                    "storage",
                    "shared_buffers",
                    "own settings",
                    "prewarm",
                    "drop OS cache",
                    "what",
                ],
                rows,
            ),
            (
                "p",
                "Settings common to all configurations: "
                + ", ".join(f"`{k}={v}`" for k, v in common.items())
                + f"; `statement_timeout={self.plan['timeout_s']:g}s`; "
                + self.checksums_text()
                + "; everything else PostgreSQL 18's default. "
                "The server's non-default settings as it reported them are in env.json "
                "(server_settings).",
            ),
        ]

    def env_blocks(self) -> list[Block]:
        e = self.env
        keys = [
            "server_version",
            "cpu_model",
            "cpus",
            "memory",
            "kernel",
            "thp_enabled",
            "git_commit",
            "git_dirty",
            "tpchgen",
            "data_digest",
            "db_bytes",
            "data_checksums",
            "datadirs",
            "filesystems",
            "load",
            "hardware_counters",
            "cpu_topology",
            "pgnvm_extension",
            "python",
        ]
        rows = [
            [k, json.dumps(e[k]) if isinstance(e.get(k), dict | list) else str(e.get(k))]
            for k in keys
            if k in e
        ]
        return [("table", ["", ""], rows)]

    def load_blocks(self) -> list[Block]:
        loads = [r["loadavg_1m"] for r in self.records if r.get("loadavg_1m") is not None]
        if not loads:
            return []
        med, mx = statistics.median(loads), max(loads)
        text = (
            f"Machine load (1-minute load average before each run): median {med:.2f}, "
            f"max {mx:.2f}, on {self.env.get('cpus', '?')} CPUs."
        )
        if med > 1.0:
            text = (
                "**Warning: the machine was busy with other work during the runs**; "
                "timings are disturbed. " + text
            )
        return [("p", text)]

    def checksums_text(self) -> str:
        """The data checksums setting as the protocol states it."""
        if self.checksums == "off":
            return "data checksums **off** (initdb --no-data-checksums; clusters `*-nocsum`)"
        return "data checksums on (initdb --data-checksums)"

    def title(self) -> str:
        return f"TPC-H SF {self.plan['sf']:g} on pgnvm, data checksums {self.checksums}"

    def protocol_text(self) -> str:
        p = self.plan
        return (
            f"Scale factor {p['sf']:g}, queries {', '.join(str(q) for q in p['queries'])}, "
            f"{p['repeat']} repetition(s); {self.checksums_text()}. Order: {p['order']}. "
            "Each run: the server of the "
            "configuration's storage target is restarted (cold shared buffers; mem_limit: "
            "then pg_prewarm of every table and index, in a connection that has exited "
            "before the run); for data on disk the OS page cache is dropped (`sync; echo 3 > "
            "/proc/sys/vm/drop_caches`); the query runs in a fresh connection. Wall-clock: "
            "client side, from sending the query until the whole result has arrived. Backend "
            "CPU (user/system) and page faults: the backend's main thread, "
            "/proc/<pid>/task/<pid>/stat before and after (clock-tick resolution, 10 ms); its "
            "other threads are prefetch helpers (nvm_prefetch = helper; they live until the "
            "connection closes, and are read before it does), reported apart. Hardware and "
            "software counters: the main thread only. Other server processes: every child of "
            "the postmaster, grouped by backend_type, plus the postmaster's reaped-children "
            "times (parallel workers that exited); a worker's CPU includes its own helper "
            "threads. pg_stat_io: snapshots before and after in the "
            "measured session, each after `pg_stat_force_next_flush()` made the session flush "
            "its pending statistics at the end of the previous statement; client-backend rows "
            "are exact, other processes' rows are as of their own last flush. Medians over "
            "the ok runs, with min and max; totals and geometric means over the queries every "
            "configuration finished."
        )

    def blocks(self) -> list[Block]:
        b: list[Block] = [("h1", self.title())]
        b.append(
            (
                "p",
                f"Started {self.plan['started_at']}, finished "
                f"{self.env.get('finished_at', '?')}; {len(self.records)} runs; "
                f"{self.env.get('server_version', '')}.",
            )
        )
        if self.interrupted:
            b.append(("p", "**INTERRUPTED**: this report covers the finished runs only."))
        b += self.load_blocks()
        b += self.correctness_blocks()
        b.append(("h2", "Summary"))
        b += self.summary_blocks()
        b.append(
            (
                "p",
                f"Totals and geometric means are over the {len(self.common)} queries "
                "every configuration finished; ×X = ratio to configuration X (below 1: "
                "faster).",
            )
        )
        for name, title in self.charts:
            if name == "totals.png":
                b.append(("img", name, title))
        b.append(("h2", "Wall-clock per query: median [min–max] seconds"))
        b += self.per_query_blocks()
        if self.baseline:
            b.append(("h2", f"Wall-clock normalised to {self.baseline}"))
            for name, title in self.charts:
                if name == "wallclock_normalized.png":
                    b.append(("img", name, title))
            b += self.normalized_blocks()
        b.append(("h2", "Kernel-time share of the backend"))
        for name, title in self.charts:
            if name == "kernel_share.png":
                b.append(("img", name, title))
        b.append(
            self.simple_table(
                lambda c, q: _pct(self.table[(c, q)].kernel_share) if (c, q) in self.table else "–"
            )
        )
        b.append(("h2", "Page faults of the backend (median minor / major)"))
        for name, title in self.charts:
            if name == "page_faults.png":
                b.append(("img", name, title))
        b.append(self.simple_table(self._faults_text))
        b.append(("h2", "CPU of the backend and of the other server processes"))
        for name, title in self.charts:
            if name == "cpu_breakdown.png":
                b.append(("img", name, title))
        b += self.cpu_blocks()
        b.append(("h2", "Prefetch helper threads"))
        b += self.helper_blocks()
        b.append(("h2", "pg_stat_io (sum over the common queries of per-query medians)"))
        b += self.io_blocks()
        b.append(("h2", "Hardware counters"))
        for name, title in self.charts:
            if name == "hw_counters.png":
                b.append(("img", name, title))
        b += self.hw_blocks()
        b.append(("h2", "Plans"))
        b += self.plan_blocks()
        b.append(("h2", "Configurations"))
        b += self.config_blocks()
        b.append(("h2", "Protocol"))
        b.append(("p", self.protocol_text()))
        b.append(("h2", "Environment"))
        b += self.env_blocks()
        b.append(
            (
                "p",
                "Raw data: runs.jsonl (every run, every measurement), runs.csv (flat), "
                "env.json, plan.json, answers/, plans/, mismatches.json.",
            )
        )
        return b

    # ---- rendering

    @staticmethod
    def to_markdown(blocks: Sequence[Block]) -> str:
        out: list[str] = []
        for blk in blocks:
            kind = blk[0]
            if kind == "h1":
                out.append(f"# {blk[1]}\n")
            elif kind == "h2":
                out.append(f"## {blk[1]}\n")
            elif kind == "p":
                out.append(f"{blk[1]}\n")
            elif kind == "img":
                out.append(f"![{blk[2]}]({blk[1]})\n")
            elif kind == "table":
                hdr, rows = blk[1], blk[2]
                esc = [[str(x).replace("|", "\\|").replace("\n", " ") for x in r] for r in rows]
                out.append("| " + " | ".join(hdr) + " |")
                out.append("|" + "---|" * len(hdr))
                out += ["| " + " | ".join(r) + " |" for r in esc]
                out.append("")
        return "\n".join(out) + "\n"

    @staticmethod
    def to_html(blocks: Sequence[Block], title: str) -> str:
        def inline(text: str) -> str:
            t = html.escape(text)
            parts = t.split("**")
            t = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
            parts = t.split("`")
            return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

        out = [
            "<!DOCTYPE html>",
            "<html><head><meta charset='utf-8'>",
            f"<title>{html.escape(title)}</title>",
            "<style>body{font-family:sans-serif;max-width:1200px;margin:1em auto;"
            "padding:0 1em}table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
            "td:first-child,th:first-child{text-align:left}img{max-width:100%}"
            "code{background:#f3f3f3}</style></head><body>",
        ]
        for blk in blocks:
            kind = blk[0]
            if kind in ("h1", "h2"):
                out.append(f"<{kind}>{html.escape(blk[1])}</{kind}>")
            elif kind == "p":
                out.append(f"<p>{inline(blk[1])}</p>")
            elif kind == "img":
                out.append(f"<p><img src='{html.escape(blk[1])}' alt='{html.escape(blk[2])}'></p>")
            elif kind == "table":
                out.append(
                    "<table><tr>"
                    + "".join(f"<th>{html.escape(str(h))}</th>" for h in blk[1])
                    + "</tr>"
                )
                for r in blk[2]:
                    out.append(
                        "<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in r) + "</tr>"
                    )
                out.append("</table>")
        out.append("</body></html>")
        return "\n".join(out) + "\n"

    def write(self) -> None:
        self.make_charts()
        blocks = self.blocks()
        (self.out / "report.md").write_text(self.to_markdown(blocks))
        (self.out / "report.html").write_text(self.to_html(blocks, self.title()))
        summary = {
            c: {
                "total_s": s.total,
                "geomean_s": s.geomean,
                "ratios_geomean": s.ratios,
                "ratios_total": s.total_ratios,
                "queries_ok": s.n_ok,
                "queries_failed": s.n_failed,
                "helper_cpu_s": self.helper_total(c),
            }
            for c, s in self.summary.items()
        }
        per_query = {
            f"{c}/{qname(q)}": {
                "median_s": cell.median,
                "min_s": cell.min,
                "max_s": cell.max,
                "status": cell.status_summary(),
                "kernel_share": cell.kernel_share,
                "helper_cpu_s": (
                    self.median_of(c, q, self._helper_cpu) if c in self.helper_configs else None
                ),
            }
            for (c, q), cell in self.table.items()
        }
        (self.out / "summary.json").write_text(
            json.dumps(
                {
                    "common_queries": self.common,
                    "configs": summary,
                    "cells": per_query,
                    "mismatches": self.mismatches,
                    "interrupted": self.interrupted,
                    "not_available": self.unavailable,
                    "availability_unknown": self.unknown,
                    "data_checksums": self.checksums,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )

    def print_summary(self) -> None:
        from rich.console import Console
        from rich.table import Table

        con = Console(highlight=False)
        if not con.is_terminal:
            con = Console(highlight=False, width=200)
        t = Table(
            # rich markup: \\[s] is a literal [s]
            title=f"TPC-H SF {self.plan['sf']:g}, data checksums {self.checksums}: "
            "median wall-clock \\[s]" + (" (INTERRUPTED)" if self.interrupted else "")
        )
        t.add_column("query")
        for c in self.configs:
            t.add_column(c, justify="right")
        wrong = {(m["query"], m["config"]) for m in self.mismatches}
        for q in self.queries:
            row = [qname(q).upper()]
            for c in self.configs:
                cell = self.table.get((c, q))
                if cell is None:
                    row.append("–")
                elif not cell.ok:
                    row.append(f"[red]{cell.status_summary()}[/]")
                else:
                    txt = f"{cell.median:.3f}"
                    if (q, c) in wrong:
                        txt = f"[bold red]{txt} WRONG[/]"
                    elif cell.status_summary() != "ok":
                        txt += "*"
                    row.append(txt)
            t.add_row(*row)
        t.add_section()
        t.add_row(
            f"total ({len(self.common)})", *[_fmt(self.summary[c].total, 2) for c in self.configs]
        )
        t.add_row("geomean", *[_fmt(self.summary[c].geomean, 3) for c in self.configs])
        for r in self.refs:
            t.add_row(f"GM ×{r}", *[_ratio(self.summary[c].ratios.get(r)) for c in self.configs])
        t.add_row("kernel share", *[_pct(self._kernel_total(c)) for c in self.configs])
        if self.helper_configs:
            t.add_row(
                "helper CPU \\[s]",  # rich markup: a literal [s]
                *[
                    _fmt(self.helper_total(c), 3) if c in self.helper_configs else "–"
                    for c in self.configs
                ],
            )
        con.print(t)
        for n, why in self.unavailable.items():
            con.print(f"{n}: not available: {why}", markup=False)
        for n, why in self.unknown.items():
            con.print(f"{n}: availability unknown: {why}", markup=False)
        if self.mismatches:
            con.print(f"[bold red]CORRECTNESS FAILED: {len(self.mismatches)} wrong answer(s)[/]")
        else:
            con.print("correctness: every answer matches across configurations")

    def _faults_text(self, c: str, q: int) -> str:
        minflt = self.median_of(c, q, lambda r: (r.get("backend") or {}).get("minflt"))
        majflt = self.median_of(c, q, lambda r: (r.get("backend") or {}).get("majflt"))
        return f"{_num(minflt)} / {_num(majflt)}"

    def _kernel_total(self, c: str) -> float | None:
        u = self.sum_common(c, lambda r: (r.get("backend") or {}).get("utime_s"))
        s = self.sum_common(c, lambda r: (r.get("backend") or {}).get("stime_s"))
        if u is None or s is None:
            return None
        return stats.kernel_share(u, s)


def rebuild(out: Path) -> Report:
    """Rewrite the report of a result directory from its raw files."""
    plan = json.loads((out / "plan.json").read_text())
    env = json.loads((out / "env.json").read_text())
    records = [
        json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines() if line.strip()
    ]
    mism = []
    if (out / "mismatches.json").exists():
        mism = json.loads((out / "mismatches.json").read_text())
    plans: dict[tuple[int, str], str] = {}
    for p in (out / "plans").glob("q*.txt") if (out / "plans").is_dir() else []:
        q, _, c = p.stem.partition(".")
        plans[(int(q[1:]), c)] = p.read_text().rstrip("\n")
    rep = Report(out, plan, env, records, mism, plans, bool(env.get("interrupted")))
    rep.write()
    return rep
