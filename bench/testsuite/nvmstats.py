"""contrib/pgnvm from the checks: redirected buffers of a relation (``pgnvm_buffers()``
joined with ``pg_buffercache``), the bytes of a block in the relation's file, and the
backend's prefetch pool as a typed value, the buffer pool's descriptors and slots
(``pgnvm_pool()``, read by :mod:`bench.core.counters` like the counters themselves:
``read_pool`` is re-exported here for the checks)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.core import counters
from bench.core.counters import read_pool  # noqa: F401 - re-exported: the checks' API
from bench.testsuite.model import CheckFailed

BLCKSZ = 8192


def ensure_extensions(conn: psycopg.Connection[Any]) -> None:
    """pgnvm (at the installed version: a cluster kept from an older build has an older
    pgnvm_stats(), which the server refuses) and pg_buffercache."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
    conn.execute("ALTER EXTENSION pgnvm UPDATE")
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")


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


def relation_buffer(conn: psycopg.Connection[Any], rel: str, block: int) -> BufInfo:
    """The shared buffer holding ``block`` of ``rel``; CheckFailed if it is not in the pool."""
    for b in relation_buffers(conn, rel):
        if b.block == block:
            return b
    raise CheckFailed(f"block {block} of {rel} is not in shared buffers")


def block_of(ctid: str) -> int:
    """'(12,3)' -> 12"""
    return int(ctid.strip("()").split(",")[0])


def redirected_anywhere(conn: psycopg.Connection[Any]) -> int:
    """How many shared buffers are redirected, whatever relation they hold."""
    row = conn.execute("SELECT count(*) FROM pgnvm_buffers() WHERE redirected").fetchone()
    return int(row[0]) if row else 0


def pool_violations(p: dict[str, int]) -> list[str]:
    """What a reading of ``pgnvm_pool()`` taken at any time must not show: a redirected
    buffer holding a slot, slot maps that disagree, more slots in use than the budget."""
    bad = [f"{k} = {p[k]}" for k in ("redirected_with_slot", "slot_map_mismatches") if p[k]]
    for k in ("slots_in_use", "slots_in_use_peak"):
        if p[k] > p["slots"]:
            bad.append(f"{k} = {p[k]} > slots = {p['slots']}")
    return bad


def block_bytes(path: Path, block: int) -> bytes:
    """Block ``block`` as the relation's file holds it (read as root: a plain read())."""
    with open(path, "rb") as f:
        f.seek(block * BLCKSZ)
        data = f.read(BLCKSZ)
    if len(data) != BLCKSZ:
        raise OSError(f"{path}: block {block} is {len(data)} bytes")
    return data


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


def prefetch_pool(d: dict[str, Any]) -> PrefetchPool:
    """The pool of a :func:`bench.core.counters.read_prefetch_pool` dict (NULLs when the
    backend has no pool)."""
    return PrefetchPool(
        mode=str(d["mode"]),
        mapping=str(d["mapping"]),
        helpers=int(d["helpers"]),
        scheme=d.get("scheme"),
        fallback=d.get("fallback"),
        tids=tuple(int(t) for t in d.get("helper_tids") or ()),
        cpus=tuple(int(c) for c in d.get("helper_cpus") or ()),
        jobs_enqueued=int(d.get("jobs_enqueued") or 0),
        jobs_done=int(d.get("jobs_done") or 0),
        fault_errors=int(d.get("fault_errors") or 0),
    )


def read_prefetch(conn: psycopg.Connection[Any]) -> PrefetchPool:
    return prefetch_pool(counters.read_prefetch_pool(conn))
