"""The 22 TPC-H queries (``queries/qNN.sql``) and what the answer comparison needs to know.

The files hold the queries of the TPC-H specification (rev. 3) with the substitution
parameters of its query validation (clause 2.4.x.3), in PostgreSQL syntax. Q15's view is a
common table expression (one statement). Q11's FRACTION is 0.0001 / SF (clause 2.4.11.3): the
file holds ``{{FRACTION}}`` and :func:`sql` substitutes it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

QUERY_DIR = Path(__file__).resolve().parent / "queries"
ALL_QUERIES: tuple[int, ...] = tuple(range(1, 23))

#: 0-based indexes of the output columns each query's ORDER BY sorts on (in ORDER BY order).
#: Rows whose sort keys are equal may come in any order: the comparison treats each run of
#: equal keys as a multiset. An empty list: the query returns one row.
ORDER_KEYS: dict[int, tuple[int, ...]] = {
    1: (0, 1),
    2: (0, 2, 1, 3),
    3: (1, 2),
    4: (0,),
    5: (1,),
    6: (),
    7: (0, 1, 2),
    8: (0,),
    9: (0, 1),
    10: (2,),
    11: (1,),
    12: (0,),
    13: (1, 0),
    14: (),
    15: (0,),
    16: (3, 0, 1, 2),
    17: (),
    18: (4, 3),
    19: (),
    20: (0,),
    21: (1, 0),
    22: (0,),
}


def qname(q: int) -> str:
    return f"q{q:02d}"


def path(q: int) -> Path:
    return QUERY_DIR / f"{qname(q)}.sql"


def fraction(sf: float) -> str:
    """Q11's FRACTION for scale factor ``sf`` as an SQL numeric literal."""
    return format(Decimal("0.0001") / Decimal(repr(float(sf))), "f")


def sql(q: int, sf: float) -> str:
    """The text of query ``q`` for scale factor ``sf``, without the trailing semicolon."""
    if q not in ALL_QUERIES:
        raise ValueError(f"no TPC-H query {q}")
    text = path(q).read_text()
    text = text.replace("{{FRACTION}}", fraction(sf))
    if "{{" in text:
        raise ValueError(f"{path(q)}: unknown placeholder")
    return text.strip().rstrip(";").strip()


def parse_list(text: str) -> list[int]:
    """'1-22', '1,6,14', '1-5,7', 'q3,Q05' -> sorted unique query numbers."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip().lower().replace("q", "")
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"bad query list item {part!r} (use e.g. 1-22 or 1,6,14)")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if lo > hi:
            lo, hi = hi, lo
        for q in range(lo, hi + 1):
            if q not in ALL_QUERIES:
                raise ValueError(f"no TPC-H query {q} (1-22)")
            out.add(q)
    if not out:
        raise ValueError("empty query list")
    return sorted(out)
