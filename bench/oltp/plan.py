"""The options of ``./pgnvm oltp``, checked before anything runs, and the list of points
they make.

A point is one measured pgbench run: (configuration, workload, distribution, clients,
repetition) at the common shared_buffers (the main matrix), or (configuration, memory ratio,
repetition) for the anti-caching experiment: YCSB-A at the largest client count with
shared_buffers = ratio × the size of ``usertable`` (table + index). Order: for each
repetition, for each point of the main matrix and then of the memory experiment, every
configuration in turn (configurations interleave, so drift of the machine hits all alike).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from bench.core import configs, results, selection
from bench.oltp import placement, pretouch, settings, window, workloads

MIN_SHARED_BUFFERS_MB = 2
MIN_RECORDS = 1000


class PlanError(ValueError):
    """Bad options: said before anything is built, loaded or started."""


@dataclass(frozen=True)
class Point:
    config: str
    workload: str
    distribution: str
    clients: int
    rep: int
    ratio: str | None = None  # memory experiment: "1/8" (shared_buffers / data), else None

    @property
    def key(self) -> str:
        """Identifies the point without the repetition (the report's cell)."""
        mem = f"-mem{self.ratio.replace('/', 'of')}" if self.ratio else ""
        dist = self.distribution if workloads.WORKLOADS[self.workload].ycsb else "builtin"
        return f"{self.config}-{self.workload}-{dist}-c{self.clients}{mem}"

    @property
    def label(self) -> str:
        mem = f" sb={self.ratio} of data" if self.ratio else ""
        w = workloads.WORKLOADS[self.workload]
        dist = self.distribution if w.ycsb else "built-in"
        return f"{self.config} {w.title.split(' ')[0]} {dist} {self.clients}c{mem} run {self.rep}"


@dataclass
class Options:
    records: int = settings.DEFAULT_RECORDS
    clients: list[int] = field(default_factory=lambda: list(settings.DEFAULT_CLIENTS))
    workloads: list[str] = field(default_factory=lambda: list(settings.DEFAULT_WORKLOADS))
    distribution: str = settings.DEFAULT_DISTRIBUTION
    duration: float = settings.DEFAULT_DURATION
    warmup: float = settings.DEFAULT_WARMUP
    #: the warm-up goes on past ``warmup`` until a slice writes at most this many FPIs per
    #: transaction, for at most ``warmup_max`` seconds (bench.oltp.window)
    warmup_max: float = window.DEFAULT_WARMUP_MAX
    fpi_settled: float = window.DEFAULT_FPI_SETTLED
    #: TPC-B, YCSB-A, B, F: VACUUM before the CHECKPOINT and one UPDATE of every heap page
    #: after it, so the first-touch FPIs are written before the warm-up
    #: (bench.oltp.pretouch); --no-pretouch
    pretouch: bool = True
    repeat: int = settings.DEFAULT_REPEAT
    memory_ratios: list[str] = field(default_factory=lambda: list(settings.DEFAULT_MEMORY_RATIOS))
    #: the configurations (bench.core.selection, built by the command line); None: the defaults
    selection: selection.Selection | None = None
    shared_buffers: str = settings.DEFAULT_SHARED_BUFFERS
    out: Path | None = None
    build: bool = True
    port: int = settings.DEFAULT_PORT
    prefix: str = settings.DEFAULT_PREFIX
    #: --profile: perf of the machine and pgbench's wait events, first repetition of a point
    profile: bool = False
    #: --placement: where 1-client points run (bench.oltp.placement)
    placement: placement.Wanted = placement.DEFAULT

    @property
    def chosen(self) -> selection.Selection:
        """The selection (the job's defaults when the command line made none)."""
        return self.selection or selection.select(
            settings.job(self.shared_buffers, memory_experiment=bool(self.memory_ratios))
        )

    @property
    def config_names(self) -> list[str]:
        return self.chosen.names


# --------------------------------------------------------------------------- parsing


def parse_int_list(text: str, what: str) -> list[int]:
    out = []
    for t in (x.strip() for x in text.split(",")):
        if not t:
            continue
        if not t.isdigit() or int(t) < 1:
            raise PlanError(f"{what}: {t!r} is not a positive integer")
        out.append(int(t))
    if not out:
        raise PlanError(f"{what}: empty list")
    return sorted(set(out))


def parse_ratio(text: str) -> Fraction:
    """'1/8' (or '0.125', '1') -> Fraction; must be in (0, 1]."""
    t = text.strip()
    try:
        r = Fraction(t)
    except (ValueError, ZeroDivisionError):
        raise PlanError(f"--memory-ratios: {t!r} is not a ratio like 1/8") from None
    if not 0 < r <= 1:
        raise PlanError(f"--memory-ratios: {t} is not in (0, 1] (shared_buffers / data)")
    return r


def parse_ratios(text: str) -> list[str]:
    """The ratios as written (largest first); '' or 'none': no memory experiment."""
    if text.strip().lower() in ("", "none", "off"):
        return []
    items = [t.strip() for t in text.split(",") if t.strip()]
    seen: dict[Fraction, str] = {}
    for t in items:
        seen.setdefault(parse_ratio(t), t)
    return [seen[r] for r in sorted(seen, reverse=True)]


def parse_placement(text: str) -> placement.Wanted:
    try:
        return placement.parse(text)
    except ValueError as e:
        raise PlanError(f"--placement: {e}") from None


def parse_workloads(text: str) -> list[str]:
    items = [t.strip().lower().removeprefix("ycsb-") for t in text.split(",") if t.strip()]
    if items == ["all"]:
        return list(workloads.WORKLOADS)
    bad = [t for t in items if t not in workloads.WORKLOADS]
    if bad or not items:
        raise PlanError(
            f"--workloads: unknown {', '.join(bad) or '(empty)'} "
            f"(known: {', '.join(workloads.WORKLOADS)}, or all)"
        )
    return list(dict.fromkeys(items))


def size_mb(text: str) -> float:
    """A PostgreSQL size ('128MB', '1GB', '16384kB'; a bare number is 8 kB blocks) in MB."""
    try:
        return configs.size_bytes(text) / (1 << 20)
    except ValueError as e:
        raise PlanError(str(e)) from None


def ratio_shared_buffers(ratio: str, data_bytes: int) -> str:
    """shared_buffers for a memory ratio of the data (whole MB, at least 2 MB)."""
    mb = int(data_bytes * parse_ratio(ratio) / (1 << 20))
    return f"{max(MIN_SHARED_BUFFERS_MB, mb)}MB"


# --------------------------------------------------------------------------- checking


def check(o: Options) -> None:
    """Every option that can be checked without the build (the configurations are checked
    when the command line selects them): raises :class:`PlanError` with the reason."""
    if o.records < MIN_RECORDS:
        raise PlanError(f"--records: at least {MIN_RECORDS}")
    if o.distribution not in workloads.DISTRIBUTIONS:
        raise PlanError(
            f"--distribution: {o.distribution!r} (one of {', '.join(workloads.DISTRIBUTIONS)})"
        )
    if o.duration < 1:
        raise PlanError("--duration: at least 1 second")
    if o.warmup < 0:
        raise PlanError("--warmup: not negative")
    if o.warmup_max < o.warmup:
        raise PlanError("--warmup-max: at least --warmup")
    if o.fpi_settled < 0:
        raise PlanError("--fpi-settled: not negative")
    if o.repeat < 1:
        raise PlanError("--repeat: at least 1")
    if not o.clients or min(o.clients) < 1 or max(o.clients) > 90:
        raise PlanError("--clients: between 1 and 90 (max_connections is 100)")
    for w in o.workloads:
        if w not in workloads.WORKLOADS:
            raise PlanError(f"--workloads: unknown {w!r}")
    for r in o.memory_ratios:
        parse_ratio(r)
    if size_mb(o.shared_buffers) < MIN_SHARED_BUFFERS_MB:
        raise PlanError(f"--shared-buffers: at least {MIN_SHARED_BUFFERS_MB}MB")
    why = placement.check(o.placement, placement.allowed_cpus())
    if why:
        raise PlanError(f"--placement: {why}")
    if not o.workloads and not o.memory_ratios:
        raise PlanError("nothing to run: no --workloads and no --memory-ratios")
    if o.selection is not None:  # the command line's selection was made for these modes
        refused = [
            f"{c.name}: {why}"
            for c in o.selection.wanted
            if (why := settings.not_for_mode(c, bool(o.memory_ratios)))
        ]
        if refused:
            raise PlanError("--configs: " + "; ".join(refused))
    why = results.unused_out(o.out)
    if why:
        raise PlanError(why)


def data_bytes_estimate(records: int) -> int:
    return records * settings.ROW_BYTES


def size_warning(o: Options) -> str | None:
    """A notice when the data is smaller than 8x shared_buffers (the issue's minimum)."""
    data_mb = data_bytes_estimate(o.records) / (1 << 20)
    sb = size_mb(o.shared_buffers)
    if data_mb < 8 * sb:
        return (
            f"--records {o.records} is ~{data_mb:.0f} MB, less than 8x shared_buffers "
            f"({o.shared_buffers}): the main matrix runs mostly in the buffer pool"
        )
    return None


def points(o: Options, names: list[str]) -> list[Point]:
    """Every measured point, in the order they run."""
    out: list[Point] = []
    top = max(o.clients)
    for rep in range(1, o.repeat + 1):
        for w in o.workloads:
            for n in o.clients:
                out += [Point(c, w, o.distribution, n, rep) for c in names]
        for r in o.memory_ratios:
            out += [
                Point(c, workloads.MEMORY_WORKLOAD, o.distribution, top, rep, ratio=r)
                for c in names
            ]
    return out


def run_workloads(o: Options) -> list[str]:
    """The workloads a run's points run: ``--workloads``, and the memory experiment's."""
    extra = [workloads.MEMORY_WORKLOAD] if o.memory_ratios else []
    return list(dict.fromkeys([*o.workloads, *extra]))


def wal_groups(o: Options) -> list[str]:
    """The pre-touch groups (:func:`bench.oltp.pretouch.wal_group`) of a run's workloads,
    whose points' max_wal_size is sized from their pre-touched pages at set-up (with
    ``--no-pretouch`` too: the same server settings with and without it)."""
    groups = (pretouch.wal_group(w) for w in run_workloads(o))
    return list(dict.fromkeys(g for g in groups if g))


def point_seconds(o: Options, overhead: float = 5.0) -> float:
    """Expected wall-clock of one point: warm-up, measurement, restart/checkpoint/caches
    (the default run of 2026-11-23: 24 points of 70 s in 29.5 min, ~4 s each around them)."""
    return o.warmup + o.duration + overhead
