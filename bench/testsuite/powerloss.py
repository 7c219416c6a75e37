"""The power-loss simulation (``powerloss/``: ``libpowerloss.so`` and the ``powerloss``
tool) as the harness uses it: where it is built, building it (one make at a time), the
``powerloss`` check's knobs read from the environment, and the tool's output read back.
Pure logic apart from :func:`ensure_built` (unit-tested in tests/test_testsuite_powerloss.py).

Knobs (environment of ``./pgnvm test``):

``PGNVM_POWERLOSS_CUTS=N``
    cuts per configuration (default :data:`DEFAULT_CUTS`; the long run: 50 or more).
``PGNVM_POWERLOSS_DIRS=newfile|strict``
    the directory model of ``powerloss materialize`` (default ``newfile``: a new file's
    first fsync makes its name durable, as ext4/xfs/btrfs do and stock PostgreSQL 18
    relies on; ``strict``: only a directory's fsync does, POSIX's promise).
``PGNVM_POWERLOSS_BREAK=KIND[:PATH]``
    given to the server under the preload as ``POWERLOSS_BREAK=KIND`` and
    ``POWERLOSS_BREAK_PATH=PATH``: the library drops those persists (``fsync``, ``msync``,
    ``hook``, ``dirfsync``, ``all``; PATH a root-relative part such as ``pg_wal/``). The
    check must then fail: that is how it is shown able to.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.core import paths

DEFAULT_CUTS = 5
DIR_MODELS = ("newfile", "strict")
BREAK_KINDS = ("fsync", "msync", "hook", "dirfsync", "all")


def build_dir() -> Path:
    """Where the harness builds the library and the tool (``make -C powerloss B=...``):
    ``$PGNVM_HOME/powerloss``, readable by the server's user, one per PGNVM_HOME."""
    return paths.pgnvm_home() / "powerloss"


def library() -> Path:
    return build_dir() / "libpowerloss.so"


def tool() -> Path:
    return build_dir() / "powerloss"


def make_args() -> tuple[str, ...]:
    return (f"B={build_dir()}",)


def build_lock_file() -> Path:
    return paths.pgnvm_home() / ".powerloss-build.lock"


class BuildLock:
    """An exclusive lock on :func:`build_lock_file` for a make of ``powerloss/`` (lanes in
    other processes build the same directory)."""

    def __enter__(self) -> BuildLock:
        build_lock_file().parent.mkdir(parents=True, exist_ok=True)
        self._f = open(build_lock_file(), "a+")
        fcntl.flock(self._f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._f, fcntl.LOCK_UN)
        self._f.close()


@dataclass(frozen=True)
class Knobs:
    cuts: int
    dirs: str
    break_kind: str | None
    break_path: str | None

    def server_env(self) -> dict[str, str]:
        """What the server under the preload gets of the break (empty: nothing dropped)."""
        if self.break_kind is None:
            return {}
        out = {"POWERLOSS_BREAK": self.break_kind}
        if self.break_path:
            out["POWERLOSS_BREAK_PATH"] = self.break_path
        return out

    def describe(self) -> str:
        out = f"--dirs {self.dirs}"
        if self.break_kind is not None:
            out += f", POWERLOSS_BREAK={self.break_kind}"
            if self.break_path:
                out += f" POWERLOSS_BREAK_PATH={self.break_path}"
        return out


def knobs(environ: Mapping[str, str] | None = None) -> Knobs:
    """The check's knobs from the environment (see the module docstring); ValueError on a
    value it does not know."""
    e = os.environ if environ is None else environ
    raw_cuts = (e.get("PGNVM_POWERLOSS_CUTS") or "").strip()
    cuts = int(raw_cuts) if raw_cuts else DEFAULT_CUTS
    if cuts < 1:
        raise ValueError(f"PGNVM_POWERLOSS_CUTS={raw_cuts!r}: at least 1")
    dirs = (e.get("PGNVM_POWERLOSS_DIRS") or "newfile").strip()
    if dirs not in DIR_MODELS:
        raise ValueError(f"PGNVM_POWERLOSS_DIRS={dirs!r}: one of {', '.join(DIR_MODELS)}")
    brk = (e.get("PGNVM_POWERLOSS_BREAK") or "").strip()
    kind: str | None = None
    path: str | None = None
    if brk:
        kind, _, rest = brk.partition(":")
        path = rest or None
        for k in kind.split(","):
            if k not in BREAK_KINDS:
                raise ValueError(
                    f"PGNVM_POWERLOSS_BREAK={brk!r}: kind {k!r} not one of {', '.join(BREAK_KINDS)}"
                )
    return Knobs(cuts, dirs, kind, path)


def cut_after(fraction: float, rate: float, window: float) -> int:
    """How many persist events from now the cut lands (``powerloss cut SHADOW +K``): a
    seeded ``fraction`` (0 <= f < 1) of the events expected in ``window`` seconds at
    ``rate`` events per second, at least 1."""
    return max(1, 1 + int(fraction * max(0.0, rate) * window))


_STATS_RE = re.compile(r"^(\w+) (\d+)$")
_KIND_RE = re.compile(r"^(\w+) persisted (\d+) dropped (\d+)$")


@dataclass(frozen=True)
class Stats:
    counters: dict[str, int]
    persisted: dict[str, int]
    dropped: dict[str, int]

    @property
    def events(self) -> int:
        return self.counters.get("events", 0)


def parse_stats(text: str) -> Stats:
    """``powerloss stats SHADOW``'s output."""
    counters: dict[str, int] = {}
    persisted: dict[str, int] = {}
    dropped: dict[str, int] = {}
    for line in text.splitlines():
        m = _KIND_RE.match(line.strip())
        if m:
            persisted[m[1]] = int(m[2])
            dropped[m[1]] = int(m[3])
            continue
        m = _STATS_RE.match(line.strip())
        if m:
            counters[m[1]] = int(m[2])
    return Stats(counters, persisted, dropped)


_HARSH_RE = re.compile(
    r"harsh seed (\d+) p ([\d.]+): (\d+) mapped files, (\d+) unpersisted lines, (\d+) kept"
)


def harsh_lines(materialized: str) -> tuple[int, int] | None:
    """(unpersisted lines, kept) from ``powerloss materialize --harsh``'s line, else None."""
    m = _HARSH_RE.search(materialized)
    return (int(m[4]), int(m[5])) if m else None


_CUT_RE = re.compile(r"powerloss: (\d+) cut before persist (\d+): (\w+) (\S*)")


@dataclass(frozen=True)
class Landing:
    event: int
    kind: str  # fsync | msync | hook | dirfsync
    path: str  # root-relative

    def describe(self) -> str:
        return f"#{self.event} {self.kind} {self.path or '.'}"


def landing(server_log: str) -> Landing | None:
    """Where the cut landed, from the library's line in the server log (the last one)."""
    found = _CUT_RE.findall(server_log)
    if not found:
        return None
    _, ev, kind, path = found[-1]
    return Landing(int(ev), kind, path)


@dataclass(frozen=True)
class PlannedCut:
    workload: str  # tpcb | ycsb_a
    harsh: bool  # the harsh model at materialize
    moment: str  # "load": K persists into the load; "checkpoint": K persists into a CHECKPOINT


def plan_cuts(n: int, pmem: bool) -> list[PlannedCut]:
    """The ``n`` cuts of a configuration: TPC-B and YCSB-A alternating; every third cut
    inside a checkpoint (the load held, K persists into a ``CHECKPOINT``: its data fsyncs
    or persists, its WAL and control file), the others anywhere in the load (where WAL
    persists dominate); the harsh model (unpersisted cache lines of mapped files kept at
    random) on every second cut of a configuration with a pmem path, never elsewhere (no
    mapped file to keep)."""
    return [
        PlannedCut(
            "tpcb" if i % 2 == 0 else "ycsb_a",
            pmem and i % 2 == 1,
            "checkpoint" if i % 3 == 2 else "load",
        )
        for i in range(n)
    ]
