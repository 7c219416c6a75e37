"""The report's content: sections, tables and text as blocks (:mod:`render` turns them
into Markdown and HTML)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

from bench.core import dram, otherwork, rootkind
from bench.core.blocks import Block, fmt, num, pct, ratio
from bench.tpch import measure, methods
from bench.tpch import settings as cfgs
from bench.tpch.queries import qname
from bench.tpch.report import statistics as stats
from bench.tpch.report.statistics import Analysis, counter

#: the summary's DRAM columns (peaks, MB), in the order of statistics.DRAM_PARTS
DRAM_HEADERS = ("shared [MB]", "backend [MB]", "DRAM [MB]")
#: column titles of :data:`stats.NVM_SHOWN`
NVM_TITLES: dict[str, str] = {
    "redirects": "redirects",
    "cow_copies": "COW copies",
    "views_kept": "views kept",
    "views_stale": "views stale",
    "verified": "verified",
    "verified_by_helper": "by helper",
    "mapped_reads": "mapped reads",
    "slot_evictions": "slot evictions",
}
#: the per-query cells: letter, counter
NVM_CELL: tuple[tuple[str, str], ...] = (
    ("R", "redirects"),
    ("K", "views_kept"),
    ("S", "views_stale"),
    ("C", "cow_copies"),
    ("V", "verified"),
)


class Document:
    """The blocks of the report of ``a``, with the ``charts`` drawn (file, title)."""

    def __init__(self, a: Analysis, charts: list[tuple[str, str]]) -> None:
        self.a = a
        self.charts = charts

    def correctness_blocks(self) -> list[Block]:
        if not self.a.mismatches:
            n = len({(r["config"], r["query"]) for r in self.a.records if r["status"] == "ok"})
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
            for m in self.a.mismatches
        ]
        return [
            (
                "p",
                f"**CORRECTNESS FAILED: {len(self.a.mismatches)} wrong answer(s).** "
                "The answers are in answers/ (the wrong ones as *.WRONG.json).",
            ),
            ("table", ["query", "config", "run", "differs from", "difference"], rows),
        ]

    def summary_blocks(self) -> list[Block]:
        hdr = [
            "configuration",
            "engine",
            "storage",
            f"total [s] ({len(self.a.common)} q)",
            "geomean [s]",
            *DRAM_HEADERS,
            *[f"GM ×{r}" for r in self.a.refs],
            *[f"total ×{r}" for r in self.a.refs],
            "queries ok",
            "failed",
        ]
        if self.a.helper_configs:
            hdr.insert(5 + len(DRAM_HEADERS), "helper CPU [s]")
        by = {c["name"]: c for c in self.a.plan["configs"]}
        rows = []
        for c in self.a.configs:
            s = self.a.summary[c]
            rows.append(
                [
                    c,
                    by[c]["engine"],
                    by[c]["storage"],
                    fmt(s.total, 2),
                    fmt(s.geomean, 3),
                    *self.dram_cells(c),
                    *[ratio(s.ratios.get(r)) for r in self.a.refs],
                    *[ratio(s.total_ratios.get(r)) for r in self.a.refs],
                    str(s.n_ok),
                    str(s.n_failed),
                ]
            )
            if self.a.helper_configs:
                rows[-1].insert(5 + len(DRAM_HEADERS), fmt(self.a.helper_total(c), 3))
        out: list[Block] = [("table", hdr, rows)]
        for head, what, notes in (
            ("Not run", "not available", self.a.unavailable),
            ("Run, availability unknown", "unknown", self.a.unknown),
        ):
            if notes:
                text = "; ".join(f"{n} — {what}: {w}" for n, w in notes.items())
                out.append(("p", f"{head}: {text}."))
        return out

    def dram_cells(self, c: str, q: int | None = None) -> list[str]:
        """The peaks of :data:`DRAM_HEADERS` of ``c`` (over query ``q`` or all), MB."""
        d = self.a.dram(c, q)
        return [fmt(d[part], 0) for part in stats.DRAM_PARTS]

    def dram_blocks(self) -> list[Block]:
        """Peak DRAM per query and configuration (shared + backend = total, MB) and what
        the samples mean."""
        rows = []
        for q in self.a.queries:
            row = [qname(q).upper()]
            for c in self.a.configs:
                sh, be, tot = self.dram_cells(c, q)
                row.append("–" if tot == "–" else f"{tot} ({sh} + {be})")
            rows.append(row)
        return [("table", ["query", *self.a.configs], rows), ("p", self.dram_text())]

    def dram_text(self) -> str:
        """What the DRAM columns mean."""
        sources = sorted({str(r["dram"]["shared_source"]) for r in self.a.records if r.get("dram")})
        interval = (self.a.plan.get("dram_sampling") or {}).get("interval_s", dram.INTERVAL_S)
        return (
            "DRAM [MB]: the peak over the runs of samples taken when the query is sent, every "
            f"{interval * 1000:g} ms while it runs and when its result is in, so a peak "
            "shorter than the interval can be missed. *shared*: the pages of the server's "
            "shared memory (its shared anonymous mappings: the main segment with the buffer "
            "pool, the System V one) resident in DRAM — the pool as touched, by this query "
            "or before it (restart, prewarm, earlier queries); measured as: "
            f"{'; '.join(sources) or 'not sampled'}. "
            "*backend*: the measured backend's private memory (RssAnon: heap, work_mem, "
            "sorts and hashes, its helper threads' stacks). *total*: the largest shared + "
            "backend of one sample. Not counted: the tmpfs files that emulate persistent "
            "memory (se1/se2 map them; a process's RssShmem would count them as DRAM), "
            "the OS page cache, other server processes' private memory." + self.hugetlb_text()
        )

    def hugetlb_text(self) -> str:
        """What *shared* counted of a server whose main segment was in hugetlb pages
        (``huge_pages`` with ``vm.nr_hugepages`` reserved; the run record's
        ``dram.hugetlb``), with its leading space; empty where no run had one."""
        per: dict[str, list[dict[str, Any]]] = {}
        for r in self.a.records:
            huge = (r.get("dram") or {}).get("hugetlb")
            if huge and r.get("status") == "ok":
                per.setdefault(r["config"], []).append(huge)
        if not per:
            return ""

        def top(xs: list[dict[str, Any]], key: str) -> str:
            vals = [float(x[key]) for x in xs if x.get(key) is not None]
            return fmt(max(vals), 0) if vals else "–"

        each = "; ".join(
            f"{c}: {top(xs, 'touched_mb')} MB touched of {top(xs, 'reserved_mb')} MB reserved"
            for c, xs in per.items()
        )
        pools = [x for xs in per.values() for x in xs]
        return (
            " **Huge pages**: the main shared memory segment was in hugetlb pages "
            f"({top(pools, 'page_kb')} kB; `huge_pages` with `vm.nr_hugepages` reserved) in "
            f"{', '.join(per)}. *shared* counts the huge pages the server **touched** (those "
            "allocated to its segment), as it counts base pages; not the ones it "
            "**reserved**: PostgreSQL maps the whole segment at its start and the pool "
            "holds it for it, touched or not, out of everyone else's reach (peaks: "
            f"{each}; the pool: {top(pools, 'pool_mb')} MB, of it "
            f"{top(pools, 'pool_taken_mb')} MB allocated or promised). Both per run: "
            "`dram.hugetlb` in runs.jsonl, runs.csv's `dram_hugetlb_touched_mb` and "
            "`dram_hugetlb_reserved_mb`."
        )

    def per_query_blocks(self) -> list[Block]:
        hdr = ["query", *self.a.configs]
        rows = []
        for q in self.a.queries:
            row = [qname(q).upper()]
            for c in self.a.configs:
                cell = self.a.table.get((c, q))
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
        if not self.a.baseline:
            return []
        base = self.a.baseline
        hdr = ["query", *self.a.configs]
        rows = [
            [qname(q).upper(), *[self._normalized_cell(c, q) for c in self.a.configs]]
            for q in self.a.queries
        ]
        blocks: list[Block] = [("table", hdr, rows)]
        per_rep = []
        for c in self.a.configs:
            if c == base:
                continue
            totals = stats.repetition_total_ratios(self.a.records, c, base, self.a.common)
            if len(totals) > 1:
                per_rep.append(f"{c} " + ", ".join(f"{x:.3f}" for x in totals))
        text = (
            "Median of the configuration over the median of "
            f"{base}; in brackets, when there is more than one repetition, the lowest and "
            f"highest of the per-repetition ratios (repetition i over repetition i of {base})."
        )
        if per_rep:
            text += (
                f" The total over the {len(self.a.common)} common queries, per repetition, "
                f"× {base}: " + "; ".join(per_rep) + "."
            )
        blocks.append(("p", text))
        return blocks

    def _normalized_cell(self, c: str, q: int) -> str:
        """``median ratio [lowest–highest paired ratio]`` of configuration c at query q."""
        base = self.a.baseline
        assert base is not None
        cell = fmt(stats.normalized(self.a.table, c, base, q), 3)
        pairs = stats.paired_ratios(self.a.records, c, base, q) if c != base else []
        if len(pairs) > 1:
            cell += f" [{min(pairs):.2f}–{max(pairs):.2f}]"
        return cell

    def simple_table(
        self, fn: Callable[[str, int], str], configs: list[str] | None = None
    ) -> Block:
        """One row per query, one column per configuration (``configs``, default all)."""
        cs = self.a.configs if configs is None else configs
        return (
            "table",
            ["query", *cs],
            [[qname(q).upper(), *[fn(c, q) for c in cs]] for q in self.a.queries],
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
                num(self.a.sum_common(c, io("client backend", "reads"))),
                num(self.a.sum_common(c, io("client backend", "read_bytes"))),
                num(self.a.sum_common(c, io("client backend", "hits"))),
                num(self.a.sum_common(c, io("io worker", "reads"))),
                num(self.a.sum_common(c, io("client backend", "evictions"))),
            ]
            for c in self.a.configs
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
        for c in self.a.configs:
            p = self.a.cpu_parts(c)
            vals = [fmt(v, 2) for v in p.values()]
            if c not in self.a.helper_configs:
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

    def helper_blocks(self) -> list[Block]:
        if not self.a.helper_configs:
            return [
                (
                    "p",
                    "No configuration of this run has prefetch helper threads "
                    "(nvm_prefetch = helper).",
                )
            ]
        hc = self.a.helper_configs

        def cell(c: str, q: int) -> str:
            h = self.a.median_of(c, q, self.a.helper_cpu)
            b = self.a.median_of(c, q, self.a.backend_cpu)
            n = self.a.median_of(c, q, lambda r: (r.get("helpers") or {}).get("threads"))
            if h is None:
                return "–"
            return f"{h:.3f} / {fmt(b, 3)} ({num(n)} thr)"

        rows = [[qname(q).upper(), *[cell(c, q) for c in hc]] for q in self.a.queries]
        rows.append(
            [
                f"total ({len(self.a.common)} q)",
                *[
                    f"{fmt(self.a.helper_total(c), 3)} / "
                    f"{fmt(self.a.sum_common(c, self.a.backend_cpu), 3)}"
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
        have = [c for c in hc if any(r.get("prefetch") for r in self.a.records if r["config"] == c)]
        if not have:
            return out
        prow = []
        for c in have:
            recs = [r for r in self.a.records if r["config"] == c and r.get("prefetch")]
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
                        num(self.a.sum_common(c, self.a.prefetch_value(k)))
                        for k in ("jobs_enqueued", "jobs_dropped", "jobs_skipped", "fault_errors")
                    ],
                    fmt(
                        (self.a.sum_common(c, self.a.prefetch_value("helper_cpu_ms")) or 0.0) / 1e3,
                        3,
                    ),
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

    def nvm_blocks(self) -> list[Block]:
        """pgnvm's counters: per configuration the sums over the common queries of the
        per-query medians of :data:`stats.NVM_SHOWN` (columns zero everywhere left out),
        then the medians per query of the configurations that counted anything."""
        a = self.a
        have = a.nvm_configs
        if not have:
            return [
                (
                    "p",
                    "Not recorded: no configuration's database had extension pgnvm "
                    "(env.json: pgnvm_extension), or the run predates their recording.",
                )
            ]
        totals = {c: {k: a.nvm_total(c, k) for k in stats.NVM_SHOWN} for c in have}
        keys = [k for k in stats.NVM_SHOWN if any(totals[c][k] for c in have)]
        counted = [c for c in have if any(totals[c][k] for k in stats.NVM_SHOWN)]
        by = {c["name"]: c for c in a.plan["configs"]}
        rows = [[c, by[c]["engine"], *[num(totals[c][k]) for k in keys]] for c in have]
        out: list[Block] = [
            (
                "p",
                "Deltas of pgnvm's counters around each query (`pgnvm_stats`, and "
                "`pgnvm_pool()`'s slot clock), **whole server**: every process's counters "
                "summed (the backend and its prefetch helper threads, parallel and I/O "
                "workers, the checkpointer), after the restart and prewarm. Sums over the "
                f"{len(a.common)} common queries of the per-query medians; *verified*: pages "
                "verified by a prefetch helper (*by helper*) or by the backend. Every counter "
                "is in runs.csv (nvm_*) and runs.jsonl (pgnvm_stats).",
            ),
            ("table", ["configuration", "engine", *[NVM_TITLES[k] for k in keys]], rows),
        ]
        idle = [c for c in have if c not in counted]
        if idle:
            out.append(("p", f"{', '.join(idle)}: every counter shown is 0."))
        if counted:
            legend = " / ".join(f"{ltr} {NVM_TITLES[k]}" for ltr, k in NVM_CELL)

            def cell(c: str, q: int) -> str:
                vals = [a.median_of(c, q, stats.nvm_counter(k)) for _, k in NVM_CELL]
                return "–" if all(v is None for v in vals) else " / ".join(num(v) for v in vals)

            out += [
                ("p", f"Median per query: {legend}."),
                self.simple_table(cell, counted),
            ]
        return out

    def hw_blocks(self) -> list[Block]:
        if not self.a.hw_available():
            return [
                (
                    "p",
                    f"Hardware counters: **not available** — "
                    f"{self.a.env.get('hardware_counters', 'unknown')}. Software counters "
                    "(task-clock, page faults, context switches) are in runs.jsonl.",
                )
            ]
        names = [
            n
            for n in measure.counter_names()
            if not n.startswith(("task", "page", "context", "cpu_m"))
        ]
        hdr = ["configuration", *names]
        rows = [
            [c, *[num(self.a.sum_common(c, counter(n))) for n in names]] for c in self.a.configs
        ]
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
        for q in self.a.queries:
            texts = {c: self.a.plans[(q, c)] for c in self.a.configs if (q, c) in self.a.plans}
            if len(set(texts.values())) > 1:
                groups: dict[str, list[str]] = {}
                for c, t in texts.items():
                    groups.setdefault(t, []).append(c)
                diffs.append([qname(q).upper(), " | ".join(", ".join(g) for g in groups.values())])
        if not self.a.plans:
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
        how = methods.METHODS[self.a.method]
        covers = self.a.plan.get("pool_covers_db") or {}
        for c in self.a.plan["configs"]:
            own = dict(c["server_settings"].items())
            extra = ", ".join(f"{k}={v}" for k, v in sorted(c["settings"].items()))
            sb = own.get("shared_buffers", "")
            rows.append(
                [
                    c["name"],
                    c["engine"],
                    c["storage"],
                    sb + {True: "", False: " (< database)"}.get(covers.get(c["name"], True), ""),
                    extra or "–",
                    "yes" if methods.prewarms(how, c["prewarm"]) else "–",
                    "yes" if c["drop_caches"] else "–",
                    c["doc"],
                ]
            )
            if c["name"] in self.a.unknown:
                rows[-1][-1] += f" (availability unknown: {self.a.unknown[c['name']]})"
        for name, why in self.a.plan.get("unavailable", {}).items():
            rows.append([name, "", "", "", "", "", "", f"NOT AVAILABLE: {why}"])
        common = cfgs.common_settings(
            cfgs.Common(
                self.a.plan["shared_buffers"],
                self.a.plan["work_mem"],
                self.a.plan["parallel_workers"],
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
                + f"; `statement_timeout={self.a.plan['timeout_s']:g}s`; "
                + self.checksums_text()
                + "; everything else PostgreSQL 18's default. "
                "The server's non-default settings as it reported them are in env.json "
                "(server_settings).",
            ),
        ]

    def env_blocks(self) -> list[Block]:
        e = self.a.env
        keys = [
            "server_version",
            "cpu_model",
            "cpus",
            "memory",
            "kernel",
            "thp_enabled",
            "nvm_root",
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
        rows += [[k, v] for k, v in self.machine_rows()]
        return [("table", ["", ""], rows)]

    def other_work(self) -> dict[str, float] | None:
        """Other work on the machine during the measured queries (CPUs busy outside this
        run's server and tool, per block of >= 1 s: bench.core.otherwork)."""
        return otherwork.summary(r["other_work"] for r in self.a.records if r.get("other_work"))

    def machine_rows(self) -> list[tuple[str, str]]:
        """The environment's rows on other work and the load average."""
        out = []
        ow = self.other_work()
        if ow is not None:
            out.append(
                (
                    "other work (CPUs busy outside this run)",
                    f"median {ow['median']:.2f}, max {ow['max']:.2f} over {ow['blocks']} "
                    f"blocks of >= {otherwork.BLOCK_S:g} s of measured queries (warning above "
                    f"{otherwork.MEDIAN_LIMIT:g} median or {otherwork.MAX_LIMIT:g} max)",
                )
            )
        loads = [r["loadavg_1m"] for r in self.a.records if r.get("loadavg_1m") is not None]
        if loads:
            out.append(
                (
                    "load average (1 min, before each run; this run's own server included)",
                    f"median {statistics.median(loads):.2f}, max {max(loads):.2f}",
                )
            )
        return out

    def load_blocks(self) -> list[Block]:
        """The warning at the top when other work (net of this run's server and tool) was
        material; the figures are in the environment section."""
        ow = self.other_work()
        if not otherwork.busy(ow):
            return []
        assert ow is not None
        return [
            (
                "p",
                "**Warning: the machine was busy with other work during the runs**; "
                f"timings are disturbed. CPUs busy outside this run's server and tool: "
                f"median {ow['median']:.2f}, max {ow['max']:.2f} on "
                f"{self.a.env.get('cpus', '?')} CPUs.",
            )
        ]

    def checksums_text(self) -> str:
        """The data checksums setting as the protocol states it."""
        if self.a.checksums == "off":
            return "data checksums **off** (initdb --no-data-checksums; clusters `*-nocsum`)"
        return "data checksums on (initdb --data-checksums)"

    def title(self) -> str:
        return f"TPC-H SF {self.a.plan['sf']:g} on pgnvm, data checksums {self.a.checksums}"

    def method_text(self) -> str:
        """The method line: its name and what it means."""
        doc = self.a.method_doc or methods.METHODS[self.a.method].doc
        text = f"**Method: {self.a.method}** (`--method {self.a.method}`): {doc}."
        if self.a.warmups:
            text += f" {self.a.warmups} warm-up run(s) discarded (answers checked)."
        short = [n for n, ok in (self.a.plan.get("pool_covers_db") or {}).items() if not ok]
        if self.a.method == "prewarm" and short:
            text += (
                f" The pool of {', '.join(short)} does not cover the database: the prewarm "
                "left only part of it in shared buffers."
            )
        return text

    def protocol_text(self) -> str:
        p = self.a.plan
        return (
            f"Scale factor {p['sf']:g}, queries {', '.join(str(q) for q in p['queries'])}, "
            f"{p['repeat']} repetition(s); {self.checksums_text()}. {self.method_text()} "
            f"Order: {p['order']}. "
            "A restart stops and starts the server of the configuration's storage target "
            "(cold shared buffers); a prewarm is pg_prewarm of every table and index, in a "
            "connection that has exited before the run; after a restart, for data on disk the "
            "cluster's files leave the OS page cache "
            "(`sync`, then `posix_fadvise(DONTNEED)` on each: a global `drop_caches` would "
            "turn off the kernel's fault-around on tmpfs); the query runs in a fresh "
            "connection. Wall-clock: "
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
                f"Started {self.a.plan['started_at']}, finished "
                f"{self.a.env.get('finished_at', '?')}; {len(self.a.records)} runs; "
                f"{self.a.env.get('server_version', '')}.",
            )
        )
        b.append(("p", self.method_text()))
        if self.a.interrupted:
            b.append(("p", "**INTERRUPTED**: this report covers the finished runs only."))
        root = rootkind.report_text(self.a.env)
        if root:
            b.append(("p", root))
        b += self.load_blocks()
        b += self.correctness_blocks()
        b.append(("h2", "Summary"))
        b += self.summary_blocks()
        b.append(
            (
                "p",
                f"Totals and geometric means are over the {len(self.a.common)} queries "
                "every configuration finished; ×X = ratio to configuration X (below 1: "
                "faster). DRAM: peaks over every run of the configuration, shared memory "
                "of the server + private memory of the backend (see the DRAM section).",
            )
        )
        b += self.image("totals.png")
        b.append(("h2", "Wall-clock per query: median [min–max] seconds"))
        b += self.per_query_blocks()
        b.append(("h2", "Peak DRAM per query: total (shared + backend) [MB]"))
        b += self.dram_blocks()
        if self.a.baseline:
            b.append(("h2", f"Wall-clock normalised to {self.a.baseline}"))
            b += self.image("wallclock_normalized.png")
            b += self.normalized_blocks()
        b.append(("h2", "Kernel-time share of the backend"))
        b += self.image("kernel_share.png")
        b.append(
            self.simple_table(
                lambda c, q: (
                    pct(self.a.table[(c, q)].kernel_share) if (c, q) in self.a.table else "–"
                )
            )
        )
        b.append(("h2", "Page faults of the backend (median minor / major)"))
        b += self.image("page_faults.png")
        b.append(self.simple_table(self._faults_text))
        b.append(("h2", "CPU of the backend and of the other server processes"))
        b += self.image("cpu_breakdown.png")
        b += self.cpu_blocks()
        b.append(("h2", "Prefetch helper threads"))
        b += self.helper_blocks()
        b.append(("h2", "pgnvm counters"))
        b += self.nvm_blocks()
        b.append(("h2", "pg_stat_io (sum over the common queries of per-query medians)"))
        b += self.io_blocks()
        b.append(("h2", "Hardware counters"))
        b += self.image("hw_counters.png")
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

    def image(self, name: str) -> list[Block]:
        """The chart ``name`` if it was drawn."""
        return [("img", n, title) for n, title in self.charts if n == name]

    def _faults_text(self, c: str, q: int) -> str:
        minflt = self.a.median_of(c, q, lambda r: (r.get("backend") or {}).get("minflt"))
        majflt = self.a.median_of(c, q, lambda r: (r.get("backend") or {}).get("majflt"))
        return f"{num(minflt)} / {num(majflt)}"
