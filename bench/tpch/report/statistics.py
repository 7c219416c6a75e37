"""Statistics of the recorded runs: pure functions over run records (unit-tested), and
:class:`Analysis`, what the report computes from a run's raw files.

Per (configuration, query): median, min and max wall-clock over the runs with status ``ok``
(timeouts and errors are counted, not averaged), and the medians of the backend's CPU times,
kernel share and page faults. Per configuration: the total of the medians and their geometric
mean over the *common* queries (those every compared configuration finished), so totals are
comparable, and both as ratios to reference configurations.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.tpch import measure
from bench.tpch import settings as cfgs


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


def repetition_total_ratios(
    runs: Iterable[dict[str, Any]], config: str, baseline: str, queries: Sequence[int]
) -> list[float]:
    """Per repetition, the total over ``queries`` of ``config`` over that of ``baseline``
    (repetition i over repetition i: with the default interleaved order the two ran minutes
    apart at most, so slow drift of the machine affects both alike), for the repetitions in
    which both finished every one of them; in repetition order."""
    walls: dict[tuple[str, int], dict[int, float]] = {}
    wanted = set(queries)
    for r in runs:
        if r["config"] in (config, baseline) and int(r["query"]) in wanted and r["status"] == "ok":
            walls.setdefault((r["config"], int(r.get("rep") or 0)), {})[int(r["query"])] = float(
                r["wall_s"]
            )
    out = []
    for rep in sorted({rep for (_, rep) in walls}):
        a, b = walls.get((config, rep), {}), walls.get((baseline, rep), {})
        if wanted and wanted <= a.keys() and wanted <= b.keys() and sum(b.values()) > 0:
            out.append(sum(a.values()) / sum(b.values()))
    return out


def paired_ratios(
    runs: Iterable[dict[str, Any]], config: str, baseline: str, q: int
) -> list[float]:
    """The per-repetition ratios of query ``q`` (:func:`repetition_total_ratios` of it alone)."""
    return repetition_total_ratios(runs, config, baseline, (q,))


#: the parts of a run's ``dram`` record (bench.core.dram.peaks), in MB
DRAM_PARTS = ("shared", "backend", "total")


def dram_peaks(runs: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    """The peak of each DRAM part (:data:`DRAM_PARTS`, MB) over ``runs``: the most any one
    run's samples saw; None for a part no run has."""
    runs = list(runs)
    out: dict[str, float | None] = {}
    for part in DRAM_PARTS:
        vals = [
            float(v) for r in runs if (v := (r.get("dram") or {}).get(f"{part}_mb")) is not None
        ]
        out[part] = max(vals) if vals else None
    return out


def counter(name: str) -> Callable[[dict[str, Any]], float | None]:
    """The value of perf counter ``name`` in a run record (None if not counted)."""

    def get(r: dict[str, Any]) -> float | None:
        v = ((r.get("perf") or {}).get("counters") or {}).get(name)
        return float(v) if v is not None else None

    return get


#: pgnvm's counters the report shows (bench.core.counters; ``verified``: verified_by_helper +
#: verified_by_backend), the few that explain se2's time: misses served in place, the
#: copies before a change, kept views taken again / found stale, page verifications, se1's
#: copies from the mapping, the hybrid pool's slot evictions
NVM_SHOWN: tuple[str, ...] = (
    "redirects",
    "cow_copies",
    "views_kept",
    "views_stale",
    "verified",
    "verified_by_helper",
    "mapped_reads",
    "slot_evictions",
)


def nvm_counter(name: str) -> Callable[[dict[str, Any]], float | None]:
    """Counter ``name`` of a run record's pgnvm delta (``pgnvm_stats``; :data:`NVM_SHOWN`'s
    ``verified`` is the sum of the two verification counters); None where the run has no
    delta or not that counter."""

    def get(r: dict[str, Any]) -> float | None:
        d = r.get("pgnvm_stats")
        if not d:
            return None
        if name == "verified":
            parts = [d.get("verified_by_helper"), d.get("verified_by_backend")]
            return None if None in parts else float(sum(int(x) for x in parts if x is not None))
        v = d.get(name)
        return float(v) if v is not None else None

    return get


class Analysis:
    """What the report says about a run, computed from its raw files (plan.json, env.json,
    runs.jsonl, mismatches, plans): which configurations and queries ran, the cells and the
    per-configuration summary, the references (nvm_base_worker, mem_limit, disk_base), the
    configurations with prefetch helpers, and medians / sums over the common queries of
    any per-run value."""

    def __init__(
        self,
        plan: dict[str, Any],
        env: dict[str, Any],
        records: list[dict[str, Any]],
        mismatches: list[dict[str, Any]],
        plans: dict[tuple[int, str], str] | None = None,
        interrupted: bool = False,
    ) -> None:
        self.plan = plan
        self.env = env
        #: the measured runs (the warm-up runs of ``--method warm`` are checked, not counted)
        self.records = [r for r in records if not r.get("warmup")]
        self.warmups = len(records) - len(self.records)
        #: --method (plans written before the option: cold)
        self.method: str = str(plan.get("method") or "cold")
        self.method_doc: str = str(plan.get("method_doc") or "")
        records = self.records
        self.mismatches = mismatches
        self.plans = plans or {}
        self.interrupted = interrupted
        ran = {r["config"] for r in records}
        self.configs = [c["name"] for c in plan["configs"] if c["name"] in ran]
        self.queries = [q for q in plan["queries"] if any(r["query"] == q for r in records)]
        self.table = cells(records)
        self.baseline = (
            cfgs.BASELINE
            if cfgs.BASELINE in self.configs
            else (self.configs[0] if self.configs else None)
        )
        self.refs = [c for c in (cfgs.BASELINE, cfgs.CEILING, cfgs.DISK) if c in self.configs]
        self.common = common_queries(self.table, self.configs, self.queries)
        self.summary = summarize(self.table, self.configs, self.queries, self.refs)
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

    def dram(self, c: str, q: int | None = None) -> dict[str, float | None]:
        """Peak DRAM (MB: shared, backend, total) of configuration ``c`` over its ok runs
        (of query ``q``, or of every query)."""
        return dram_peaks(
            r
            for r in self.records
            if r["config"] == c and r["status"] == "ok" and (q is None or r["query"] == q)
        )

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

    @staticmethod
    def helper_cpu(r: dict[str, Any]) -> float | None:
        return cpu_seconds(r.get("helpers"))

    @staticmethod
    def backend_cpu(r: dict[str, Any]) -> float | None:
        return cpu_seconds(r.get("backend"))

    def helper_total(self, c: str) -> float | None:
        """Sum over the common queries of the median helper CPU (user + system) of ``c``."""
        if c not in self.helper_configs:
            return None
        return self.sum_common(c, self.helper_cpu)

    def prefetch_value(self, key: str) -> Callable[[dict[str, Any]], float | None]:
        def get(r: dict[str, Any]) -> float | None:
            v = (r.get("prefetch") or {}).get(key)
            return float(v) if isinstance(v, int | float) else None

        return get

    def hw_available(self) -> bool:
        for r in self.records:
            cs = (r.get("perf") or {}).get("counters") or {}
            if cs.get("cycles_user") is not None:
                return True
        return False

    @property
    def nvm_configs(self) -> list[str]:
        """Configurations with pgnvm's counters recorded (extension pgnvm present)."""
        have = {r["config"] for r in self.records if r.get("pgnvm_stats")}
        return [c for c in self.configs if c in have]

    def nvm_total(self, c: str, name: str) -> float | None:
        """Sum over the common queries of the per-query medians of pgnvm counter ``name``
        (:func:`nvm_counter`) of ``c``; None where no run of ``c`` recorded it."""
        fn = nvm_counter(name)
        vals = [v for v in (self.median_of(c, q, fn) for q in self.common) if v is not None]
        return sum(vals) if vals else None

    def kernel_total(self, c: str) -> float | None:
        u = self.sum_common(c, lambda r: (r.get("backend") or {}).get("utime_s"))
        s = self.sum_common(c, lambda r: (r.get("backend") or {}).get("stime_s"))
        if u is None or s is None:
            return None
        return kernel_share(u, s)
