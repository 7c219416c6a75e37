"""What a run measures: the paths per benchmark and target, the parameters, the defaults
sized for this machine, and the list of storagebench invocations (jobs) in the order they
run. Pure logic: no file is touched here (tests/test_micro_storage.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

BENCHMARKS: tuple[str, ...] = ("tablescan", "bufman", "logging")
TARGETS: tuple[str, ...] = ("nvm-4k", "nvm-2m", "disk")
#: ``--targets`` shorthands.
TARGET_ALIASES: dict[str, tuple[str, ...]] = {"nvm": ("nvm-4k", "nvm-2m")}
NVM_TARGETS: tuple[str, ...] = ("nvm-4k", "nvm-2m")

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

#: The environment of the "forced cache-line" variants: libpmem2 persists with cache-line
#: flushes and fences instead of msync, libpmem (under libpmemlog) takes the file for
#: persistent memory; what persistent memory with ADR would do on these (DRAM) pages.
FORCE_PMEM2 = {"PMEM2_FORCE_GRANULARITY": "CACHE_LINE"}
FORCE_PMEM = {"PMEM_IS_PMEM_FORCE": "1"}
FORCE_VARS: tuple[str, ...] = (*FORCE_PMEM2, *FORCE_PMEM)


@dataclass(frozen=True)
class Variant:
    """A path as ``--paths`` names it: storagebench's ``--path``, and the environment."""

    name: str
    binary_path: str
    label: str
    targets: tuple[str, ...] = TARGETS
    env: dict[str, str] = field(default_factory=dict)

    @property
    def forced(self) -> bool:
        return bool(self.env)


#: The paths of each benchmark (the paper's, plus the forced cache-line runs on the tmpfs).
VARIANTS: dict[str, tuple[Variant, ...]] = {
    "tablescan": (
        Variant("pread", "pread", "Linux I/O (pread)"),
        Variant("odirect", "odirect", "Linux I/O (pread, O_DIRECT)", targets=("disk",)),
        Variant("mmap", "mmap", "mmap + memcpy"),
    ),
    "bufman": (
        Variant("pread", "pread", "Linux I/O (pread/pwrite + fdatasync)"),
        Variant("mmap", "mmap", "mmap + memcpy + msync"),
        Variant("pmem2", "pmem2", "libpmem2 (granularity as detected)"),
        Variant(
            "pmem2-cl",
            "pmem2",
            "libpmem2 (forced cache-line)",
            targets=NVM_TARGETS,
            env=FORCE_PMEM2,
        ),
    ),
    "logging": (
        Variant("new", "new", "Linux I/O, new file (write + fdatasync)"),
        Variant("recycled", "recycled", "Linux I/O, recycled file (write + fdatasync)"),
        Variant("pmemlog", "pmemlog", "libpmemlog (as detected)"),
        Variant(
            "pmemlog-cl", "pmemlog", "libpmemlog (forced pmem)", targets=NVM_TARGETS, env=FORCE_PMEM
        ),
        Variant("pmem2log", "pmem2log", "our log on libpmem2 (as detected)"),
        Variant(
            "pmem2log-cl",
            "pmem2log",
            "our log on libpmem2 (forced cache-line)",
            targets=NVM_TARGETS,
            env=FORCE_PMEM2,
        ),
    ),
}


def variant(bench: str, name: str) -> Variant:
    for v in VARIANTS[bench]:
        if v.name == name:
            return v
    raise KeyError(name)


class PlanError(ValueError):
    """Bad input, said before anything runs."""


@dataclass(frozen=True)
class Options:
    """The parameters of a run (defaults: :func:`defaults`)."""

    targets: tuple[str, ...]
    threads: tuple[int, ...]
    paths: dict[str, tuple[str, ...]]  # benchmark -> variant names
    page_sizes: tuple[int, ...]  # table scan
    bufman_page_sizes: tuple[int, ...]
    write_ratios: tuple[int, ...]  # percent
    entry_sizes: tuple[int, ...]
    file_size: int  # per thread, data files (table scan, bufman)
    log_size: int  # per thread, log capacity
    pool_size: int  # bufman, all threads
    warmup: int
    reps: int
    max_seconds: float
    seed: int = 1
    fio: bool = True


def default_threads(cpus: int | None = None) -> tuple[int, ...]:
    """1, 2, 4, ... up to twice the cores."""
    n = 2 * (cpus or os.cpu_count() or 1)
    out, t = [], 1
    while t <= n:
        out.append(t)
        t *= 2
    return tuple(out)


def defaults(quick: bool = False, cpus: int | None = None) -> Options:
    """Sized for this machine (2 cores, 24 GiB RAM, a tmpfs of 75% of it): data files of
    2 GiB per thread (8 GiB at 4 threads, in RAM on the tmpfs targets; the paper: 5 GiB),
    logs of 1 GiB per thread, a 1 GiB buffer pool (smaller than the data at any thread
    count), 1 warm-up + 3 measured repetitions of at most 0.5 s each: ``./pgnvm micro
    storage`` takes ~12-15 minutes. ``quick``: a smoke run (16 MiB files, 2 repetitions of
    at most 0.05 s, 1 and 2 threads) of well under a minute."""
    opts = Options(
        targets=TARGETS,
        threads=default_threads(cpus),
        paths={b: tuple(v.name for v in VARIANTS[b]) for b in BENCHMARKS},
        page_sizes=(4 * KiB, 16 * KiB),
        bufman_page_sizes=(4 * KiB,),
        write_ratios=(0, 20, 80),
        entry_sizes=(128, 8 * KiB),
        file_size=2 * GiB,
        log_size=1 * GiB,
        pool_size=1 * GiB,
        warmup=1,
        reps=3,
        max_seconds=0.5,
    )
    if quick:
        opts = replace(
            opts,
            threads=tuple(t for t in opts.threads if t <= 2),
            file_size=16 * MiB,
            log_size=16 * MiB,
            pool_size=8 * MiB,
            warmup=0,
            reps=2,
            max_seconds=0.05,
        )
    return opts


def parse_size(text: str) -> int:
    """``4k``, ``16K``, ``2G``, ``128``, ``1GiB`` -> bytes (powers of 1024)."""
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    mult = {"k": KiB, "m": MiB, "g": GiB}.get(t[-1:], 1)
    num = t[:-1] if t[-1:] in "kmg" else t
    try:
        v = float(num)
    except ValueError:
        raise PlanError(f"not a size: {text!r} (e.g. 4k, 16k, 2G)") from None
    if v <= 0 or v * mult != int(v * mult):
        raise PlanError(f"not a size: {text!r}")
    return int(v * mult)


def fmt_size(n: int) -> str:
    """4096 -> ``4k``, 2147483648 -> ``2G``, 128 -> ``128 B`` (the report's sizes)."""
    for unit, mult in (("G", GiB), ("M", MiB), ("k", KiB)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n} B"


def resolve_targets(names: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for n in names:
        for t in TARGET_ALIASES.get(n, (n,)):
            if t not in TARGETS:
                known = ", ".join([*TARGETS, *TARGET_ALIASES])
                raise PlanError(f"unknown target {n!r} (known: {known})")
            if t not in out:
                out.append(t)
    if not out:
        raise PlanError("no target")
    return tuple(out)


def check_paths(bench: str, names: list[str]) -> tuple[str, ...]:
    known = [v.name for v in VARIANTS[bench]]
    for n in names:
        if n not in known:
            raise PlanError(f"unknown path {n!r} for {bench} (known: {', '.join(known)})")
    return tuple(names)


@dataclass(frozen=True)
class Job:
    """One storagebench invocation."""

    bench: str
    target: str
    variant: str
    threads: int
    size: int  # page size (table scan, bufman) or entry size (logging)
    write_ratio: int | None = None  # percent, bufman

    @property
    def v(self) -> Variant:
        return variant(self.bench, self.variant)

    @property
    def files(self) -> str:
        """The kind of files it uses (data files are shared by the table scan and bufman;
        each log path has its own)."""
        return "data" if self.bench != "logging" else f"log-{self.v.binary_path}"

    def label(self) -> str:
        size = f"{'entry ' if self.bench == 'logging' else ''}{fmt_size(self.size)}"
        w = f" w{self.write_ratio}%" if self.write_ratio is not None else ""
        return f"{self.target} {self.bench} {self.variant} {size}{w} t{self.threads}"

    def key(self) -> dict[str, object]:
        return {
            "bench": self.bench,
            "target": self.target,
            "variant": self.variant,
            "threads": self.threads,
            "size": self.size,
            "write_ratio": self.write_ratio,
        }


def jobs(benches: list[str], o: Options) -> list[Job]:
    """The invocations, target by target (the files of one target are gone before the next
    target's are made), then benchmark, path, size, write ratio, threads."""
    out: list[Job] = []
    for target in o.targets:
        for bench in benches:
            for name in o.paths[bench]:
                if target not in variant(bench, name).targets:
                    continue
                sizes = {
                    "tablescan": o.page_sizes,
                    "bufman": o.bufman_page_sizes,
                    "logging": o.entry_sizes,
                }[bench]
                ratios: tuple[int | None, ...] = o.write_ratios if bench == "bufman" else (None,)
                for size in sizes:
                    for w in ratios:
                        for t in o.threads:
                            out.append(Job(bench, target, name, t, size, w))
    return out


def validate(benches: list[str], o: Options) -> list[Job]:
    """The jobs of a run, or PlanError with what is wrong (before anything runs)."""
    if not o.threads or min(o.threads) < 1 or max(o.threads) > 256:
        raise PlanError("--threads must be 1..256")
    for s in (*o.page_sizes, *o.bufman_page_sizes):
        if s % (4 * KiB):
            raise PlanError(f"page size {fmt_size(s)} is not a multiple of 4k")
        if o.file_size % s:
            raise PlanError(f"--file-size must be a multiple of the page size {fmt_size(s)}")
    for w in o.write_ratios:
        if not 0 <= w <= 100:
            raise PlanError(f"write ratio {w}% is not 0..100")
    for e in o.entry_sizes:
        if e > o.log_size:
            raise PlanError(f"entry size {fmt_size(e)} exceeds --log-size {fmt_size(o.log_size)}")
    if o.reps < 1 or o.warmup < 0 or o.max_seconds < 0:
        raise PlanError("--reps must be >= 1, --warmup >= 0, --max-seconds >= 0")
    if "bufman" in benches and o.pool_size >= min(o.threads) * o.file_size:
        raise PlanError(
            f"the buffer pool ({fmt_size(o.pool_size)}) must be smaller than the data "
            f"({min(o.threads)} thread(s) x --file-size {fmt_size(o.file_size)}): the paper's "
            "pool cannot hold the data"
        )
    js = jobs(benches, o)
    if not js:
        raise PlanError(
            "nothing to run: no path of "
            + ", ".join(benches)
            + " runs on "
            + ", ".join(o.targets)
            + " (the -cl paths run on nvm targets only, odirect on disk only)"
        )
    return js


def bytes_on_target(js: list[Job], o: Options) -> int:
    """The most a target's directory holds at once: files of one kind at a time (the
    runner removes a kind after its last job), for the most threads that use it."""
    need = 0
    kinds: dict[str, int] = {}
    for j in js:
        kinds[j.files] = max(kinds.get(j.files, 0), j.threads)
    for kind, threads in kinds.items():
        per = o.file_size if kind == "data" else o.log_size + 2 * MiB
        need = max(need, threads * per)
    return need


def estimate_seconds(js: list[Job], o: Options) -> float:
    """A first guess of the run time (the runner refines it from finished jobs)."""
    per_rep = o.max_seconds if o.max_seconds > 0 else 1.0
    total = 0.0
    for j in js:
        total += (o.warmup + o.reps) * (per_rep + (0.4 if j.target == "disk" else 0.05)) + 0.1
    return total
