"""Comparing query answers between configurations.

Values: numbers (int, Decimal, float) are equal when they differ by at most a relative
``1e-9`` (absolute ``1e-12`` near zero); everything else (text, dates, NULL) must be equal.
PostgreSQL's ``numeric`` arithmetic is exact, so answers of the same query should be identical
across storage engines; the tolerance only keeps a float-valued plan change from being
reported as a wrong answer.

Order: rows must come in the same order, except that rows whose ORDER BY keys
(:data:`bench.tpch.queries.ORDER_KEYS`) are equal may come in any order: each run of equal
keys is compared as a multiset. (A tie that straddles a LIMIT could legitimately return
different rows; TPC-H's validation answers have none.)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

REL_TOL = 1e-9
ABS_TOL = 1e-12

Row = tuple[Any, ...]


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def values_equal(a: Any, b: Any, rel: float = REL_TOL, abs_: float = ABS_TOL) -> bool:
    if _is_number(a) and _is_number(b):
        if a == b:
            return True
        fa, fb = float(a), float(b)
        return abs(fa - fb) <= max(abs_, rel * max(abs(fa), abs(fb)))
    return bool(a == b)


def rows_equal(r1: Row, r2: Row) -> bool:
    return len(r1) == len(r2) and all(values_equal(a, b) for a, b in zip(r1, r2, strict=True))


def _runs(rows: Sequence[Row], keys: Sequence[int]) -> list[list[Row]]:
    """Split ``rows`` into maximal runs of consecutive rows with equal sort keys."""
    runs: list[list[Row]] = []
    for r in rows:
        if runs and all(values_equal(r[k], runs[-1][0][k]) for k in keys):
            runs[-1].append(r)
        else:
            runs.append([r])
    return runs


def _multiset_diff(ref: list[Row], got: list[Row]) -> tuple[Row | None, Row | None] | None:
    """None if the two lists hold equal rows (in any order); else (a row of ``got`` without a
    partner in ``ref`` or None, a row of ``ref`` without a partner in ``got`` or None)."""
    left = list(ref)
    extra: Row | None = None
    for r in got:
        for i, s in enumerate(left):
            if rows_equal(r, s):
                del left[i]
                break
        else:
            if extra is None:
                extra = r
    if extra is None and not left:
        return None
    return extra, (left[0] if left else None)


def fmt_row(r: Row) -> str:
    return "(" + ", ".join(fmt_value(v) for v in r) + ")"


def fmt_value(v: Any) -> str:
    if isinstance(v, str):
        return repr(v.rstrip())
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def compare(ref: Sequence[Row], got: Sequence[Row], order_keys: Sequence[int]) -> str | None:
    """None if ``got`` is the same answer as ``ref``; otherwise what differs (one line)."""
    if len(ref) != len(got):
        return f"{len(got)} rows instead of {len(ref)}"
    first_bad = next(
        (i for i, (a, b) in enumerate(zip(ref, got, strict=True)) if not rows_equal(a, b)), None
    )
    if first_bad is None:
        return None
    if not order_keys:
        return (
            f"row {first_bad + 1}: {fmt_row(got[first_bad])} instead of {fmt_row(ref[first_bad])}"
        )
    ra, rb = _runs(ref, order_keys), _runs(got, order_keys)
    pos = 0
    for a, b in zip(ra, rb, strict=False):
        if len(a) != len(b) or not all(values_equal(a[0][k], b[0][k]) for k in order_keys):
            return (
                f"row {pos + 1}: {fmt_row(b[0])} instead of {fmt_row(a[0])} "
                "(order or content differs)"
            )
        d = _multiset_diff(a, b)
        if d is not None:
            where = (
                f"row {pos + 1}"
                if len(a) == 1
                else (f"rows {pos + 1}-{pos + len(a)} (equal ORDER BY keys, any order)")
            )
            got_txt = fmt_row(d[0]) if d[0] is not None else "?"
            ref_txt = fmt_row(d[1]) if d[1] is not None else "?"
            return f"{where}: {got_txt} instead of {ref_txt}"
        pos += len(a)
    if len(ra) != len(rb):
        return f"row {pos + 1}: order differs"
    return None  # only ties ordered differently


def jsonable(v: Any) -> Any:
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dt.date | dt.datetime | dt.time):
        return v.isoformat()
    if isinstance(v, bytes | memoryview):
        return bytes(v).hex()
    if isinstance(v, int | float | str) or v is None:
        return v
    return str(v)


def rows_jsonable(rows: Sequence[Row]) -> list[list[Any]]:
    return [[jsonable(v) for v in r] for r in rows]


def digest(rows: Sequence[Row]) -> str:
    """A short hash of an answer (informational: equality is decided by :func:`compare`)."""
    text = json.dumps(rows_jsonable(rows), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def perturb(rows: list[Row]) -> list[Row]:
    """A deliberately wrong version of an answer (the test hook PGNVM_TPCH_PERTURB): the
    first number is increased by one; an answer without numbers gets an extra row."""
    out = list(rows)
    for i, r in enumerate(out):
        for j, v in enumerate(r):
            if _is_number(v):
                out[i] = (*r[:j], v + 1, *r[j + 1 :])
                return out
    out.append(tuple("perturbed" for _ in (out[0] if out else ("x",))))
    return out
