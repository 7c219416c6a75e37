"""pg_waldump --stats=record output: record counts per record type, and their comparison
(the wal_pmem check: WAL written with nvm_wal = pmem has the records file would write)."""

from __future__ import annotations

import re

# "Heap/INSERT+INIT      1 (  0.46)     1410 (  6.47)     0 (  0.00)     1410 (  0.60)"
_ROW_RE = re.compile(
    r"^(?P<type>[A-Za-z0-9_]+/[A-Za-z0-9_+]+)\s+(?P<n>\d+)\s+\(\s*[\d.]+\)"
    r"\s+(?P<rec>\d+)\s+\(\s*[\d.]+\)\s+(?P<fpi>\d+)\s+\(",
    re.MULTILINE,
)
_TOTAL_RE = re.compile(r"^Total\s+(\d+)\s+(\d+)", re.MULTILINE)

#: Record types written by timers, not by the workload: the bgwriter's running-xacts
#: snapshots (every 15 s) land in whichever range is being written then.
TIMER_RMGRS: tuple[str, ...] = ("Standby",)


def parse_stats(text: str) -> dict[str, tuple[int, int, int]]:
    """``{"Heap/INSERT": (count, record bytes, FPI bytes), ...}`` from ``--stats=record``."""
    out: dict[str, tuple[int, int, int]] = {}
    for m in _ROW_RE.finditer(text):
        out[m.group("type")] = (int(m.group("n")), int(m.group("rec")), int(m.group("fpi")))
    if not out and _TOTAL_RE.search(text) is None:
        raise ValueError("no pg_waldump --stats=record table in the output")
    return out


def counts(
    stats: dict[str, tuple[int, int, int]], ignore: tuple[str, ...] = TIMER_RMGRS
) -> dict[str, int]:
    """Record count per record type, without the resource managers in ``ignore``."""
    return {t: v[0] for t, v in stats.items() if t.split("/", 1)[0] not in ignore}


def differences(a: dict[str, int], b: dict[str, int], names: tuple[str, str]) -> list[str]:
    """Human-readable differences between two count tables (empty: identical)."""
    out = []
    for t in sorted(set(a) | set(b)):
        if a.get(t, 0) != b.get(t, 0):
            out.append(f"{t}: {names[0]} {a.get(t, 0)}, {names[1]} {b.get(t, 0)}")
    return out
