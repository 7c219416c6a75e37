"""contrib/pgnvm from the checks: counters of ``pgnvm_stats``, redirected buffers of a relation
(``pgnvm_buffers()`` joined with ``pg_buffercache``), and the bytes of a block in the
relation's file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

BLCKSZ = 8192
#: the counters of the pgnvm_stats view (everything but ``engine``)
COUNTERS: tuple[str, ...] = (
    "mapped_reads",
    "mapped_writes",
    "redirects",
    "cow_copies",
    "hints_skipped",
    "bytes_not_copied",
)


def ensure_extensions(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")


def read_stats(conn: psycopg.Connection[Any]) -> dict[str, int]:
    row = conn.execute(f"SELECT {', '.join(COUNTERS)} FROM pgnvm_stats").fetchone()
    assert row is not None
    return {k: int(v) for k, v in zip(COUNTERS, row, strict=True)}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """How much each counter grew (they only grow while the server runs)."""
    return {k: after[k] - before[k] for k in COUNTERS}


def fmt(d: dict[str, int], keys: tuple[str, ...] = COUNTERS) -> str:
    return " ".join(f"{k}+{d[k]}" for k in keys)


@dataclass(frozen=True)
class BufInfo:
    block: int
    redirected: bool
    dirty: bool


#: the shared buffers holding blocks of a relation's main fork in the current database
BUFFERS_SQL = """
SELECT b.relblocknumber, n.redirected, b.isdirty
  FROM pg_buffercache b JOIN pgnvm_buffers() n USING (bufferid)
 WHERE b.relfilenode = pg_relation_filenode(%s::regclass)
   AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND b.relforknumber = 0
 ORDER BY b.relblocknumber
"""


def relation_buffers(conn: psycopg.Connection[Any], rel: str) -> list[BufInfo]:
    return [
        BufInfo(int(r[0]), bool(r[1]), bool(r[2]))
        for r in conn.execute(BUFFERS_SQL, (rel,)).fetchall()
    ]


def redirected_anywhere(conn: psycopg.Connection[Any]) -> int:
    """How many shared buffers are redirected, whatever relation they hold."""
    row = conn.execute("SELECT count(*) FROM pgnvm_buffers() WHERE redirected").fetchone()
    return int(row[0]) if row else 0


def block_bytes(path: Path, block: int) -> bytes:
    """Block ``block`` as the relation's file holds it (read as root: a plain read())."""
    with open(path, "rb") as f:
        f.seek(block * BLCKSZ)
        data = f.read(BLCKSZ)
    if len(data) != BLCKSZ:
        raise OSError(f"{path}: block {block} is {len(data)} bytes")
    return data
