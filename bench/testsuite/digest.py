"""Result digests for the differential check (pure logic).

A query's result is rendered exactly as the server sent it in text format:
one line per row, columns separated by a tab, NULL as ``\\N``.  The digest is
the md5 of that text, so two engines agree iff they returned byte-identical
rows in the same order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Value = bytes | str | None


def _encode(v: Value) -> bytes:
    if v is None:
        return b"\\N"
    b = v.encode() if isinstance(v, str) else bytes(v)
    # Escape the separators so that ("a\tb",) and ("a", "b") digest differently.
    return b.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")


def digest_rows(rows: Iterable[Sequence[Value]]) -> tuple[str, int]:
    """Return (md5 hex digest, row count) of the rows in the given order."""
    h = hashlib.md5()
    n = 0
    for row in rows:
        h.update(b"\t".join(_encode(v) for v in row) + b"\n")
        n += 1
    return h.hexdigest(), n


@dataclass(frozen=True)
class Mismatch:
    query: str
    engine: str
    expected: str | None
    got: str | None

    def describe(self) -> str:
        if self.expected is None:
            return f"{self.query}: not in the base reference (engine {self.engine} got {self.got})"
        if self.got is None:
            return f"{self.query}: engine {self.engine} produced no result (base {self.expected})"
        return f"{self.query}: engine {self.engine} digest {self.got} != base {self.expected}"


def compare_digests(
    reference: Mapping[str, str], got: Mapping[str, str], engine: str
) -> list[Mismatch]:
    """Every query of the reference must be present in ``got`` with the same digest.

    Queries only in ``got`` are mismatches too (the reference is stale).  The
    order follows the reference, then the extras, so the first mismatch is the
    first query that diverged.
    """
    out: list[Mismatch] = []
    for q, exp in reference.items():
        g = got.get(q)
        if g != exp:
            out.append(Mismatch(q, engine, exp, g))
    for q, g in got.items():
        if q not in reference:
            out.append(Mismatch(q, engine, None, g))
    return out
