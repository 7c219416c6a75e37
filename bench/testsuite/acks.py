"""Acknowledged-commit bookkeeping for the crash check (pure logic).

The recorder appends an id only after the server acknowledged the COMMIT of
the row carrying that id.  After a crash and recovery every acknowledged id
must be present; ids that were sent but not acknowledged may or may not be.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class AckLog:
    acked: list[int] = field(default_factory=list)
    attempted: int = 0  # highest id sent to the server
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sending(self, ident: int) -> None:
        with self._lock:
            self.attempted = max(self.attempted, ident)

    def acknowledge(self, ident: int) -> None:
        with self._lock:
            self.acked.append(ident)

    def snapshot(self) -> list[int]:
        with self._lock:
            return list(self.acked)


@dataclass(frozen=True)
class AckVerdict:
    checked: int
    missing: list[int]
    unexpected: list[int]  # present ids never sent: the table holds rows we did not write

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected

    def describe(self, limit: int = 10) -> str:
        parts = [f"checked {self.checked} acknowledged ids"]
        if self.missing:
            shown = ", ".join(map(str, self.missing[:limit]))
            more = "" if len(self.missing) <= limit else f" (+{len(self.missing) - limit} more)"
            parts.append(f"{len(self.missing)} LOST after recovery: {shown}{more}")
        if self.unexpected:
            shown = ", ".join(map(str, self.unexpected[:limit]))
            parts.append(f"{len(self.unexpected)} ids present that were never sent: {shown}")
        return "; ".join(parts)


def verify_acks(acked: Iterable[int], present: Iterable[int], lo: int, hi: int) -> AckVerdict:
    """Check acknowledged ids against the ids found in the table.

    ``lo..hi`` (inclusive) is the range of ids this round could have sent;
    ``present`` are the ids found in that range after recovery.
    """
    acked_set = set(acked)  # duplicates are harmless: each id is checked once
    present_set = set(present)
    missing = sorted(acked_set - present_set)
    unexpected = sorted(i for i in present_set if i < lo or i > hi)
    return AckVerdict(checked=len(acked_set), missing=missing, unexpected=unexpected)
