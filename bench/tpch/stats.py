"""Summary statistics of the recorded runs (pure functions: unit-tested).

Per (configuration, query): median, min and max wall-clock over the runs with status ``ok``
(timeouts and errors are counted, not averaged), and the medians of the backend's CPU times,
kernel share and page faults. Per configuration: the total of the medians and their geometric
mean over the *common* queries (those every compared configuration finished), so totals are
comparable, and both as ratios to reference configurations.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


def median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def geomean(xs: Iterable[float]) -> float | None:
    vals = [x for x in xs if x is not None]
    if not vals or any(x <= 0 for x in vals):
        return None
    return math.exp(sum(math.log(x) for x in vals) / len(vals))


def kernel_share(utime: float, stime: float) -> float | None:
    """system / (user + system); None when no CPU time was recorded."""
    tot = utime + stime
    return stime / tot if tot > 0 else None


def cpu_seconds(d: dict[str, Any] | None) -> float | None:
    """CPU seconds of a /proc delta (``backend`` or ``helpers`` of a run record): the
    on-CPU time from schedstat (ns resolution) when it was read, else user + system (10 ms
    clock ticks); None without a delta."""
    if not d:
        return None
    rt = d.get("runtime_s")
    if rt:
        return float(rt)
    return float(d.get("utime_s", 0.0)) + float(d.get("stime_s", 0.0))


@dataclass
class Cell:
    """One (configuration, query): every run's outcome and the summary of the ok ones."""

    config: str
    query: int
    walls: list[float] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    utime: list[float] = field(default_factory=list)
    stime: list[float] = field(default_factory=list)
    minflt: list[float] = field(default_factory=list)
    majflt: list[float] = field(default_factory=list)
    others_cpu: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.walls)

    @property
    def median(self) -> float | None:
        return median(self.walls)

    @property
    def min(self) -> float | None:
        return min(self.walls) if self.walls else None

    @property
    def max(self) -> float | None:
        return max(self.walls) if self.walls else None

    @property
    def kernel_share(self) -> float | None:
        u, s = median(self.utime), median(self.stime)
        if u is None or s is None:
            return None
        return kernel_share(u, s)

    def status_summary(self) -> str:
        """'ok' if every run was ok, else e.g. '2 ok, 1 timeout'."""
        if self.statuses and all(s == "ok" for s in self.statuses):
            return "ok"
        counts: dict[str, int] = {}
        for s in self.statuses:
            counts[s] = counts.get(s, 0) + 1
        return ", ".join(f"{n} {s}" for s, n in counts.items()) or "not run"


def cells(runs: Iterable[dict[str, Any]]) -> dict[tuple[str, int], Cell]:
    """Group run records ({config, query, status, wall_s, backend: {...}, ...}) into cells."""
    out: dict[tuple[str, int], Cell] = {}
    for r in runs:
        key = (r["config"], int(r["query"]))
        c = out.setdefault(key, Cell(*key))
        c.statuses.append(r["status"])
        if r["status"] != "ok":
            continue
        c.walls.append(float(r["wall_s"]))
        b = r.get("backend") or {}
        if b:
            c.utime.append(float(b["utime_s"]))
            c.stime.append(float(b["stime_s"]))
            c.minflt.append(float(b["minflt"]))
            c.majflt.append(float(b["majflt"]))
        if r.get("others_cpu_s") is not None:
            c.others_cpu.append(float(r["others_cpu_s"]))
    return out


@dataclass
class ConfigSummary:
    config: str
    total: float | None  # sum of medians over the common queries
    geomean: float | None
    n_ok: int  # queries with at least one ok run
    n_failed: int  # queries with a non-ok run
    ratios: dict[str, float | None] = field(default_factory=dict)  # per reference: geomean ratio
    total_ratios: dict[str, float | None] = field(default_factory=dict)


def common_queries(
    table: dict[tuple[str, int], Cell], configs: Sequence[str], queries: Sequence[int]
) -> list[int]:
    """Queries with an ok median in every one of ``configs``."""
    return [q for q in queries if all((c, q) in table and table[(c, q)].ok for c in configs)]


def summarize(
    table: dict[tuple[str, int], Cell],
    configs: Sequence[str],
    queries: Sequence[int],
    references: Sequence[str] = (),
) -> dict[str, ConfigSummary]:
    common = common_queries(table, configs, queries)
    out: dict[str, ConfigSummary] = {}
    for c in configs:
        meds = [table[(c, q)].median for q in common]
        vals = [m for m in meds if m is not None]
        n_ok = sum(1 for q in queries if (c, q) in table and table[(c, q)].ok)
        n_failed = sum(
            1 for q in queries if (c, q) in table and any(s != "ok" for s in table[(c, q)].statuses)
        )
        out[c] = ConfigSummary(c, sum(vals) if common else None, geomean(vals), n_ok, n_failed)
    for c, s in out.items():
        for ref in references:
            if ref not in out:
                continue
            r = out[ref]
            s.ratios[ref] = (s.geomean / r.geomean) if s.geomean and r.geomean else None
            s.total_ratios[ref] = (s.total / r.total) if s.total and r.total else None
        del c
    return out


def normalized(
    table: dict[tuple[str, int], Cell], config: str, baseline: str, q: int
) -> float | None:
    """Median of ``config`` / median of ``baseline`` for query ``q``."""
    a = table.get((config, q))
    b = table.get((baseline, q))
    if a is None or b is None or a.median is None or not b.median:
        return None
    return a.median / b.median
