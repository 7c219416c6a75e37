"""report.md, report.html, the PNG charts, summary.json and the console summary of a
``./pgnvm tpch`` run.

Built from the run records only (``runs.jsonl``), so a report can be rebuilt from the raw
files (:func:`rebuild`): :mod:`statistics` computes, :mod:`charts` draws, :mod:`document`
says it as blocks, :mod:`render` writes them as Markdown and HTML.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.core import blocks
from bench.tpch.queries import qname
from bench.tpch.report import render
from bench.tpch.report.charts import Charts
from bench.tpch.report.document import Document
from bench.tpch.report.statistics import NVM_SHOWN, Analysis, nvm_counter


class Report:
    """The report of ``analysis`` (:class:`Analysis` of a run's raw files), written into
    ``out``."""

    def __init__(self, out: Path, analysis: Analysis) -> None:
        self.out = out
        self.a = analysis

    def write(self) -> None:
        doc = Document(self.a, Charts(self.a, self.out).make())
        doc_blocks = doc.blocks()
        (self.out / "report.md").write_text(blocks.to_markdown(doc_blocks))
        (self.out / "report.html").write_text(blocks.to_html(doc_blocks, doc.title()))
        summary = {
            c: {
                "total_s": s.total,
                "geomean_s": s.geomean,
                "ratios_geomean": s.ratios,
                "ratios_total": s.total_ratios,
                "queries_ok": s.n_ok,
                "queries_failed": s.n_failed,
                "helper_cpu_s": self.a.helper_total(c),
                "dram_peak_mb": self.a.dram(c),
                "pgnvm_counters": self.nvm(c),
            }
            for c, s in self.a.summary.items()
        }
        per_query = {
            f"{c}/{qname(q)}": {
                "median_s": cell.median,
                "min_s": cell.min,
                "max_s": cell.max,
                "status": cell.status_summary(),
                "kernel_share": cell.kernel_share,
                "helper_cpu_s": (
                    self.a.median_of(c, q, self.a.helper_cpu)
                    if c in self.a.helper_configs
                    else None
                ),
                "dram_peak_mb": self.a.dram(c, q),
                "pgnvm_counters": self.nvm(c, q),
            }
            for (c, q), cell in self.a.table.items()
        }
        (self.out / "summary.json").write_text(
            json.dumps(
                {
                    "common_queries": self.a.common,
                    "configs": summary,
                    "cells": per_query,
                    "mismatches": self.a.mismatches,
                    "interrupted": self.a.interrupted,
                    "not_available": self.a.unavailable,
                    "availability_unknown": self.a.unknown,
                    "data_checksums": self.a.checksums,
                    "method": {
                        "name": self.a.method,
                        "means": self.a.method_doc,
                        "warmup_runs_discarded": self.a.warmups,
                    },
                    "dram": "peak MB of samples: shared (the server's main shared memory "
                    "resident; in hugetlb pages: those touched, runs.jsonl's dram.hugetlb "
                    "has the reserved segment too), backend (its private memory, RssAnon), "
                    "total (shared + backend in one sample)",
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )

    def nvm(self, c: str, q: int | None = None) -> dict[str, float | None] | None:
        """pgnvm's counters shown in the report (statistics.NVM_SHOWN) of ``c``: sums over
        the common queries of the medians, or query ``q``'s median; None where ``c`` has
        none recorded."""
        if c not in self.a.nvm_configs:
            return None
        if q is None:
            return {k: self.a.nvm_total(c, k) for k in NVM_SHOWN}
        return {k: self.a.median_of(c, q, nvm_counter(k)) for k in NVM_SHOWN}

    def print_summary(self) -> None:
        render.print_summary(self.a)


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
    rep = Report(out, Analysis(plan, env, records, mism, plans, bool(env.get("interrupted"))))
    rep.write()
    return rep
