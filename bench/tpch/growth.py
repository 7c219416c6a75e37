"""How each configuration's time grows with the scale factor: ``./pgnvm tpch --compare DIR
DIR [...]`` over result directories of runs at different scale factors (issue 22 item 7).

Reads each directory's ``summary.json`` (the per-query medians, ``cells``) and ``plan.json``
(its scale factor, method and repetitions), so it works on committed runs under docs/results
too (they keep those two, not ``runs.jsonl``). Compares only what every run has: the
configurations that ran in every directory and the queries with a median in every one of
them in every directory (a query that timed out at the larger SF leaves every total). Per
configuration and directory: the total of the medians and their geometric mean, the ratio
of each to the first (smallest) scale factor's, that ratio per unit of SF (1.00: time grows
as the data; below: less than linearly), and the ratios to nvm_base_worker and mem_limit
within each run; then per query the growth of each configuration's median.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.core.blocks import Block, fmt, ratio, to_markdown
from bench.tpch import settings
from bench.tpch.queries import qname
from bench.tpch.report.statistics import geomean

#: the configurations every run is also shown against, where they ran
REFERENCES: tuple[str, ...] = (settings.BASELINE, settings.CEILING)


@dataclass(frozen=True)
class Run:
    """One result directory: its scale factor, how it ran, and the per-query medians."""

    path: Path
    sf: float
    method: str
    repeat: int
    configs: tuple[str, ...]  # in the run's order
    medians: dict[tuple[str, int], float]  # (configuration, query) -> median seconds


def load(path: Path) -> Run:
    """The :class:`Run` of result directory ``path`` (ValueError if it lacks plan.json or
    summary.json)."""
    try:
        plan = json.loads((path / "plan.json").read_text())
        summary = json.loads((path / "summary.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a ./pgnvm tpch result directory ({e})") from None
    medians: dict[tuple[str, int], float] = {}
    for key, cell in (summary.get("cells") or {}).items():
        c, _, q = key.rpartition("/")
        if cell.get("median_s") is not None:
            medians[(c, int(q.lstrip("q")))] = float(cell["median_s"])
    ran = {c for c, _ in medians}
    return Run(
        path=path,
        sf=float(plan["sf"]),
        method=str(plan.get("method") or "cold"),
        repeat=int(plan.get("repeat") or 0),
        configs=tuple(c["name"] for c in plan["configs"] if c["name"] in ran),
        medians=medians,
    )


@dataclass(frozen=True)
class Growth:
    """The comparison of :func:`compare`: runs by scale factor, the configurations and
    queries they share, and per (configuration, run) the total and geometric mean."""

    runs: list[Run]
    configs: list[str]
    queries: list[int]
    total: dict[tuple[str, int], float]  # (configuration, index of the run)
    geomean: dict[tuple[str, int], float | None]

    def grown(self, c: str, i: int, what: str = "total") -> float | None:
        """Run ``i``'s total (``what`` = "total") or geomean of ``c`` / the first run's."""
        v = self.total if what == "total" else self.geomean
        a, b = v.get((c, 0)), v.get((c, i))
        return b / a if a and b is not None else None

    def to_ref(self, c: str, ref: str, i: int) -> float | None:
        """``c``'s total / ``ref``'s total in run ``i``."""
        a, b = self.total.get((c, i)), self.total.get((ref, i))
        return a / b if a is not None and b else None

    def query_growth(self, c: str, q: int, i: int) -> float | None:
        a = self.runs[0].medians.get((c, q))
        b = self.runs[i].medians.get((c, q))
        return b / a if a and b is not None else None


def compare(runs: Sequence[Run]) -> Growth:
    """Order ``runs`` by scale factor and compare them on what they all have."""
    if len(runs) < 2:
        raise ValueError("--compare needs at least two result directories")
    rs = sorted(runs, key=lambda r: r.sf)
    configs = [c for c in rs[0].configs if all(c in r.configs for r in rs[1:])]
    if not configs:
        raise ValueError("the result directories have no configuration in common")
    qs = sorted({q for r in rs for _, q in r.medians})
    queries = [q for q in qs if all((c, q) in r.medians for r in rs for c in configs)]
    total: dict[tuple[str, int], float] = {}
    gm: dict[tuple[str, int], float | None] = {}
    for i, r in enumerate(rs):
        for c in configs:
            vals = [r.medians[(c, q)] for q in queries]
            total[(c, i)] = sum(vals)
            gm[(c, i)] = geomean(vals)
    return Growth(rs, configs, queries, total, gm)


def blocks(g: Growth) -> list[Block]:
    """The comparison as report blocks: the runs, then per configuration the totals,
    geomeans and ratios, then the growth per query."""
    first = g.runs[0]
    refs = [r for r in REFERENCES if r in g.configs]
    out: list[Block] = [
        ("h1", "TPC-H: how time grows with the scale factor"),
        (
            "table",
            ["run", "SF", "method", "repetitions"],
            [[str(r.path), f"{r.sf:g}", r.method, str(r.repeat)] for r in g.runs],
        ),
        (
            "p",
            f"Over the {len(g.queries)} queries with a median in every configuration of "
            f"every run ({', '.join(qname(q).upper() for q in g.queries) or 'none'}). "
            "Total / geomean: of the per-query medians [s]; ×SF x: that run's value / the "
            f"SF {first.sf:g} run's; per SF: that ratio / the ratio of the scale factors "
            "(1.00: grows as the data, below 1: less). ×ref: the configuration's total / "
            "the reference's total in the same run.",
        ),
    ]
    hdr = ["configuration"]
    for i, r in enumerate(g.runs):
        hdr += [f"total SF {r.sf:g}", f"geomean SF {r.sf:g}"]
        if i:
            hdr += [f"total ×SF {first.sf:g}", "per SF", f"geomean ×SF {first.sf:g}"]
    for r in g.runs:
        hdr += [f"×{ref} SF {r.sf:g}" for ref in refs]
    rows = []
    for c in g.configs:
        row = [c]
        for i, r in enumerate(g.runs):
            row += [fmt(g.total[(c, i)], 2), fmt(g.geomean[(c, i)], 3)]
            if i:
                t = g.grown(c, i)
                per = t / (r.sf / first.sf) if t is not None else None
                row += [ratio(t), fmt(per, 2), ratio(g.grown(c, i, "geomean"))]
        for i in range(len(g.runs)):
            row += [ratio(g.to_ref(c, ref, i)) for ref in refs]
        rows.append(row)
    out.append(("table", hdr, rows))
    last = len(g.runs) - 1
    out += [
        (
            "p",
            f"Median per query at SF {g.runs[last].sf:g} / at SF {first.sf:g} "
            f"(the data grew {g.runs[last].sf / first.sf:g}×):",
        ),
        (
            "table",
            ["query", *g.configs],
            [
                [qname(q).upper(), *[ratio(g.query_growth(c, q, last)) for c in g.configs]]
                for q in g.queries
            ],
        ),
    ]
    return out


def markdown(paths: Sequence[Path]) -> str:
    """``./pgnvm tpch --compare``: the Markdown of the comparison of the result
    directories ``paths`` (ValueError on anything it cannot compare)."""
    return to_markdown(blocks(compare([load(p) for p in paths])))
