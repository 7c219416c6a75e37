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


#: the prefetch counters of the pgnvm_stats view (summed over all processes)
PREFETCH_COUNTERS: tuple[str, ...] = ("prefetch_jobs", "prefetch_bytes", "prefetch_dropped")


def read_prefetch_stats(conn: psycopg.Connection[Any]) -> dict[str, int]:
    row = conn.execute(f"SELECT {', '.join(PREFETCH_COUNTERS)} FROM pgnvm_stats").fetchone()
    assert row is not None
    return {k: int(v) for k, v in zip(PREFETCH_COUNTERS, row, strict=True)}


def delta_prefetch(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in PREFETCH_COUNTERS}


@dataclass(frozen=True)
class PrefetchPool:
    """``pgnvm_prefetch()``: the calling backend's settings and prefetch helper pool (the
    pool's fields are None/empty while it has none: ``helpers`` 0)."""

    mode: str
    mapping: str
    helpers: int
    scheme: str | None
    fallback: str | None
    tids: tuple[int, ...]
    cpus: tuple[int, ...]
    jobs_enqueued: int
    jobs_done: int
    fault_errors: int

    def describe(self) -> str:
        if not self.helpers:
            return f"mode={self.mode} mapping={self.mapping}: no helpers"
        return (
            f"mode={self.mode} mapping={self.mapping}: {self.helpers} helpers ({self.scheme}"
            + (f", fallback: {self.fallback}" if self.fallback else "")
            + f") tids {list(self.tids)} on cpus {list(self.cpus)}, jobs enqueued "
            f"{self.jobs_enqueued} done {self.jobs_done} fault errors {self.fault_errors}"
        )


PREFETCH_SQL = (
    "SELECT mode, mapping, helpers, scheme, fallback, helper_tids, helper_cpus, "
    "jobs_enqueued, jobs_done, fault_errors FROM pgnvm_prefetch()"
)


def prefetch_pool(row: tuple[Any, ...]) -> PrefetchPool:
    """A row of :data:`PREFETCH_SQL` (NULLs when the backend has no pool)."""
    mode, mapping, helpers, scheme, fallback, tids, cpus, enq, done, faults = row
    return PrefetchPool(
        mode=str(mode),
        mapping=str(mapping),
        helpers=int(helpers),
        scheme=scheme,
        fallback=fallback,
        tids=tuple(int(t) for t in tids or ()),
        cpus=tuple(int(c) for c in cpus or ()),
        jobs_enqueued=int(enq or 0),
        jobs_done=int(done or 0),
        fault_errors=int(faults or 0),
    )


def read_prefetch(conn: psycopg.Connection[Any]) -> PrefetchPool:
    row = conn.execute(PREFETCH_SQL).fetchone()
    assert row is not None
    return prefetch_pool(row)
