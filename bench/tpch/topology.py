"""CPU topology: can the prefetch helper mappings M1/M2/M3 be honoured here?

libnvmprefetch (``prefetch/src/topology.c``) places helper threads by the CPU topology in
sysfs: M1 on another physical core than the computation thread, M2 on its SMT sibling, M3
one helper of each. When the machine cannot honour a scheme the library falls back (M2 runs
as M1 on a machine without SMT) and logs it once; the benchmark would then measure M1 under
the name M2. So ``./pgnvm tpch`` decides before running whether a mapping is available, with
the same rules as the library: two CPUs share a physical core when each is in the other's
``cpuN/topology/thread_siblings_list`` (else: same ``physical_package_id`` and ``core_id``),
and only CPUs that are online and in this process's affinity mask (``os.sched_getaffinity``;
the server inherits it) count.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SYSFS_CPU = Path("/sys/devices/system/cpu")


def parse_cpulist(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11}; raises ValueError on a malformed list."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        a = int(lo)
        b = int(hi) if sep else a
        if b < a:
            raise ValueError(f"bad CPU range {part!r}")
        out.update(range(a, b + 1))
    return out


def format_cpulist(cpus: set[int] | list[int]) -> str:
    """{0, 1, 2, 5} -> '0-2,5'."""
    xs = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class Topology:
    """The usable CPUs (allowed and online) and the physical core of each."""

    cpus: frozenset[int]
    core: dict[int, int] = field(default_factory=dict)  # cpu -> core key (lowest sibling)
    siblings_outside: frozenset[int] = frozenset()  # SMT siblings not in the usable set
    known: bool = True  # False: sysfs did not say (every CPU taken as its own core)
    note: str = ""  # why the topology is not known

    def cores(self) -> dict[int, set[int]]:
        """core key -> usable CPUs of that core."""
        out: dict[int, set[int]] = {}
        for c in self.cpus:
            out.setdefault(self.core.get(c, c), set()).add(c)
        return out

    def has_smt_sibling(self) -> bool:
        """Some usable CPU has an SMT sibling that is usable too."""
        return any(len(cs) > 1 for cs in self.cores().values())

    def physical_cores(self) -> int:
        return len(self.cores())

    def smt_unavailable(self) -> str | None:
        """None when M2 can run (an SMT sibling among the usable CPUs), else why not."""
        if self.has_smt_sibling():
            return None
        cl = format_cpulist(set(self.cpus))
        what = f"CPU {cl} is" if len(self.cpus) == 1 else f"CPUs {cl} are"
        if not self.known:
            return f"no SMT sibling known: {self.note}; {what} taken as one thread per core"
        if self.siblings_outside:
            return (
                f"no SMT sibling: {what} one thread per core in this process's CPU affinity "
                f"(their siblings {format_cpulist(set(self.siblings_outside))} are outside it)"
            )
        return f"no SMT sibling: {what} one thread per core"

    def other_core_unavailable(self) -> str | None:
        """None when M1 can run (usable CPUs on two physical cores or more), else why not."""
        if self.physical_cores() >= 2:
            return None
        cl = format_cpulist(set(self.cpus))
        return f"no second physical core: the usable CPUs {cl} are one core"

    def mapping_unavailable(self, mapping: str) -> str | None:
        """Why ``nvm_prefetch_mapping = mapping`` would not run as asked (None: it would).
        An explicit CPU list is not judged here (the library places it and says so)."""
        m = mapping.strip().lower()
        if m == "m1":
            return self.other_core_unavailable()
        if m == "m2":
            return self.smt_unavailable()
        if m == "m3":
            why = [w for w in (self.smt_unavailable(), self.other_core_unavailable()) if w]
            return "; ".join(why) or None
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    t = _read(path)
    try:
        return int(t.strip()) if t is not None else None
    except ValueError:
        return None


def detect(allowed: set[int] | None = None, sysfs: Path = SYSFS_CPU) -> Topology:
    """The topology of the CPUs this process may use (``allowed``: default its affinity)."""
    if allowed is None:
        allowed = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
        if not allowed:
            allowed = set(range(os.cpu_count() or 1))
    online_txt = _read(sysfs / "online")
    usable = set(allowed)
    note = ""
    known = True
    if online_txt is not None:
        try:
            online = parse_cpulist(online_txt)
            usable = (allowed & online) or set(allowed)
        except ValueError:
            known, note = False, f"{sysfs / 'online'} unreadable"
    else:
        known, note = False, f"{sysfs / 'online'} missing"
    core: dict[int, int] = {}
    outside: set[int] = set()
    pkg_core: dict[tuple[int, int], int] = {}
    for c in sorted(usable):
        topo = sysfs / f"cpu{c}" / "topology"
        sib_txt = _read(topo / "thread_siblings_list")
        sib: set[int] | None = None
        if sib_txt is not None:
            try:
                sib = parse_cpulist(sib_txt)
            except ValueError:
                sib = None
        if sib is not None and c in sib:
            core[c] = min(sib)
            outside |= sib - usable
            continue
        p, k = _int(topo / "physical_package_id"), _int(topo / "core_id")
        if p is None or k is None:
            known = False
            note = note or f"{topo} has no thread_siblings_list nor core_id"
            core[c] = c
            continue
        core[c] = pkg_core.setdefault((p, k), c)
    return Topology(frozenset(usable), core, frozenset(outside), known, note)


_cached: Topology | None = None


def current() -> Topology:
    """:func:`detect` of this machine, once per process."""
    global _cached
    if _cached is None:
        _cached = detect()
    return _cached
