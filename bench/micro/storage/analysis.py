"""What the report computes from a run's raw files: one row per storagebench run (median,
min and max over the measured repetitions), the paper's headline ratios on our data, the
relative bandwidths of Fig. 4, and storagebench against fio. Pure functions of the records
(tests/test_micro_storage.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.micro.storage import plan

SCHEMA_VERSION = 1
#: fio and storagebench agree when within this fraction (the issue's 15%).
FIO_TOLERANCE = 0.15
#: A measurement whose repetitions spread by more than this (max / min) is noted as noisy.
NOISY = 1.25


def check_doc(doc: dict[str, Any]) -> list[str]:
    """What is wrong with a storagebench document of schema 1 (empty if nothing)."""
    problems = []
    if doc.get("schema") != "storagebench" or doc.get("schema_version") != SCHEMA_VERSION:
        return [f"schema {doc.get('schema')!r} version {doc.get('schema_version')!r}"]
    for k in ("benchmark", "path", "params", "env", "runs", "summary"):
        if k not in doc:
            problems.append(f"no {k!r}")
    if problems:
        return problems
    for k in ("threads", "file_size", "work_bytes", "warmup", "reps", "max_seconds", "seed"):
        if k not in doc["params"]:
            problems.append(f"params: no {k!r}")
    for k in ("fs_type", "pmem2_granularity", "pmem_is_pmem", "files_reused"):
        if k not in doc["env"]:
            problems.append(f"env: no {k!r}")
    p = doc["params"]
    if len(doc["runs"]) != p.get("warmup", 0) + p.get("reps", 0):
        problems.append(f"{len(doc['runs'])} runs, not warmup + reps")
    for r in doc["runs"]:
        for k in ("warmup", "stopped", "seconds", "bytes", "ops", "gib_per_s", "ops_per_s"):
            if k not in r:
                problems.append(f"run: no {k!r}")
                break
        if len(r.get("threads", [])) != p.get("threads"):
            problems.append("run: not one entry per thread")
    s = doc["summary"]
    for m in ("gib_per_s", "ops_per_s"):
        if not isinstance(s.get(m), dict) or set(s[m]) != {"median", "min", "max"}:
            problems.append(f"summary: {m} is not median/min/max")
    return problems


@dataclass
class Row:
    """One storagebench run (a job) as the report shows it."""

    bench: str
    target: str
    variant: str
    threads: int
    size: int
    write_ratio: int | None
    gib: float | None = None
    gib_min: float | None = None
    gib_max: float | None = None
    ops: float | None = None
    ops_min: float | None = None
    ops_max: float | None = None
    reps: int = 0
    stopped_reps: int = 0
    granularity: str | None = None
    is_pmem: bool | None = None
    caches: str = "–"  # dropped / NOT dropped / –
    sys_share: float | None = None
    error: str | None = None

    def key(self) -> tuple[Any, ...]:
        return (self.bench, self.target, self.variant, self.threads, self.size, self.write_ratio)


def row_of(rec: dict[str, Any]) -> Row:
    j = rec["job"]
    r = Row(j["bench"], j["target"], j["variant"], j["threads"], j["size"], j["write_ratio"])
    doc = rec["doc"]
    if "error" in doc:
        r.error = str(doc["error"])
        return r
    s = doc["summary"]
    r.gib, r.gib_min, r.gib_max = (s["gib_per_s"][k] for k in ("median", "min", "max"))
    r.ops, r.ops_min, r.ops_max = (s["ops_per_s"][k] for k in ("median", "min", "max"))
    r.reps, r.stopped_reps = s["reps"], s["stopped_reps"]
    r.granularity = doc["env"].get("pmem2_granularity")
    r.is_pmem = doc["env"].get("pmem_is_pmem")
    measured = [x for x in doc["runs"] if not x["warmup"]]
    drops = {x.get("caches_dropped") for x in measured}
    if drops == {True}:
        r.caches = "dropped"
    elif False in drops:
        r.caches = "NOT dropped"
    cpu = [x["user_s"] + x["sys_s"] for x in measured]
    if cpu and sum(cpu) > 0:
        r.sys_share = sum(x["sys_s"] for x in measured) / sum(cpu)
    return r


def load(out: Path) -> tuple[dict[str, Any], list[Row], list[dict[str, Any]], list[dict]]:
    """env.json, the rows of runs.jsonl, fio.jsonl, and the raw records."""
    env = json.loads((out / "env.json").read_text()) if (out / "env.json").exists() else {}
    recs = _jsonl(out / "runs.jsonl")
    return env, [row_of(r) for r in recs], _jsonl(out / "fio.jsonl"), recs


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Index:
    """The rows by key."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = [r for r in rows if r.gib is not None]
        self.by = {r.key(): r for r in self.rows}

    def get(
        self,
        bench: str,
        target: str,
        variant: str,
        threads: int,
        size: int,
        write_ratio: int | None = None,
    ) -> Row | None:
        return self.by.get((bench, target, variant, threads, size, write_ratio))

    def series(
        self, bench: str, target: str, variant: str, size: int, write_ratio: int | None = None
    ) -> list[Row]:
        """The rows of one line of a figure, by thread count."""
        rs = [
            r
            for r in self.rows
            if (r.bench, r.target, r.variant, r.size, r.write_ratio)
            == (bench, target, variant, size, write_ratio)
        ]
        return sorted(rs, key=lambda r: r.threads)

    def peak(
        self, bench: str, target: str, variant: str, size: int, write_ratio: int | None = None
    ) -> Row | None:
        rs = self.series(bench, target, variant, size, write_ratio)
        return max(rs, key=lambda r: r.gib or 0) if rs else None

    def values(self, attr: str) -> list[Any]:
        return sorted({getattr(r, attr) for r in self.rows}, key=lambda x: (x is None, x))


@dataclass
class Ratio:
    """a / b of two rows' medians, with the range the repetitions allow."""

    value: float
    low: float
    high: float
    a: Row
    b: Row


def ratio(a: Row | None, b: Row | None) -> Ratio | None:
    if a is None or b is None or not b.gib or not b.gib_min or not b.gib_max or a.gib is None:
        return None
    assert a.gib_min is not None and a.gib_max is not None
    return Ratio(a.gib / b.gib, a.gib_min / b.gib_max, a.gib_max / b.gib_min, a, b)


@dataclass
class Headline:
    """One line of the comparison with the paper."""

    what: str
    paper: str
    target: str
    ours: Ratio | None
    how: str  # which of our rows, e.g. "pmem2-cl / pread, 1 thread"


def headlines(ix: Index, targets: list[str]) -> list[Headline]:
    """The paper's headline ratios (§3.4, §3.5) on each target of ours."""
    out: list[Headline] = []
    t1 = min(ix.values("threads"), default=1)
    page = 4 * plan.KiB
    for target in targets:
        nvm = target.startswith("nvm")
        for v in ("pmem2-cl", "pmem2") if nvm else ("pmem2",):
            out.append(
                Headline(
                    "libpmem2 vs Linux I/O, bufman 80% writes, 4 KiB, 1 thread",
                    "4.7× (PMem)",
                    target,
                    ratio(
                        ix.get("bufman", target, v, t1, page, 80),
                        ix.get("bufman", target, "pread", t1, page, 80),
                    ),
                    f"{v} / pread",
                )
            )
        out.append(
            Headline(
                "mmap+msync vs Linux I/O, bufman 80% writes, 4 KiB, 1 thread",
                "0.01–0.02× (PMem), ~0.9× (NVMe, few threads)",
                target,
                ratio(
                    ix.get("bufman", target, "mmap", t1, page, 80),
                    ix.get("bufman", target, "pread", t1, page, 80),
                ),
                "mmap / pread",
            )
        )
        for v in ("pmemlog-cl", "pmemlog") if nvm else ("pmemlog",):
            out.append(
                Headline(
                    "libpmemlog vs recycled Linux I/O log, 128 B entries, peak over threads",
                    "21.7× (PMem)",
                    target,
                    ratio(
                        ix.peak("logging", target, v, 128),
                        ix.peak("logging", target, "recycled", 128),
                    ),
                    f"{v} / recycled, peaks",
                )
            )
        for e in (128, 8 * plan.KiB):
            out.append(
                Headline(
                    f"recycled vs new log file, {plan.fmt_size(e)} entries, peak over threads",
                    "up to 14.1× (PMem); 3.1× (NVMe), 3.8× (RAID)",
                    target,
                    ratio(
                        ix.peak("logging", target, "recycled", e),
                        ix.peak("logging", target, "new", e),
                    ),
                    "recycled / new, peaks",
                )
            )
    return out


def relative(
    ix: Index, target: str, variant: str, write_ratio: int = 80
) -> list[tuple[Row, Ratio]]:
    """Fig. 4: a path's bandwidth relative to Linux I/O (pread), 4 KiB, per thread count."""
    out = []
    for r in ix.series("bufman", target, variant, 4 * plan.KiB, write_ratio):
        q = ratio(r, ix.get("bufman", target, "pread", r.threads, r.size, write_ratio))
        if q is not None:
            out.append((r, q))
    return out


@dataclass
class FioCheck:
    target: str
    pattern: str
    threads: int
    fio: dict[str, Any]
    ours: Row | None

    @property
    def diff(self) -> float | None:
        """ours / fio - 1."""
        if self.ours is None or self.ours.gib is None or not self.fio["gib_per_s"]:
            return None
        return self.ours.gib / self.fio["gib_per_s"] - 1

    @property
    def agrees(self) -> bool | None:
        d = self.diff
        return None if d is None else abs(d) <= FIO_TOLERANCE

    def noise(self) -> str:
        """Which side's repetitions spread by more than NOISY (max/min): a comparison of
        such runs says more about the machine at the time than about the two programs."""
        out = []
        if (
            self.fio["gib_per_s_min"]
            and self.fio["gib_per_s_max"] / self.fio["gib_per_s_min"] > NOISY
        ):
            out.append("fio's repetitions spread")
        o = self.ours
        if o is not None and o.gib_min and o.gib_max and o.gib_max / o.gib_min > NOISY:
            out.append("ours spread")
        return ", ".join(out)


def fio_checks(ix: Index, fio_rows: list[dict[str, Any]]) -> list[FioCheck]:
    from bench.micro.storage.fio import BLOCK, PATTERNS

    out = []
    for f in fio_rows:
        bench, w = PATTERNS[f["pattern"]]
        ours = ix.get(bench, f["target"], "pread", f["threads"], BLOCK, w)
        out.append(FioCheck(f["target"], f["pattern"], f["threads"], f, ours))
    return out
