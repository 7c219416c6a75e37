"""pgnvm's counters as the server reports them (contrib/pgnvm).

:data:`COUNTERS` is the one Python list of the counter names. Their one definition in C is
the X-macro list ``NVM_STATS_COUNTERS(X)`` of ``postgres/src/include/storage/nvm_stats.h``
(``tests/test_counters.py`` holds the two against each other); the server reports them,
summed over every process since it started, through ``pgnvm_counters()`` (one row per
counter, what this module reads) and the wide view ``pgnvm_stats``, which also derives
:data:`DERIVED` from them; one process's through ``pgnvm_backend_counters(pid)`` (1.5):
``read_counters(conn, own=True)``, for a test that must not count other processes' work
(autovacuum, other sessions).

Also here: the buffer pool's descriptors and DRAM slots, ``pgnvm_pool()`` (1.6,
:func:`read_pool`), whose slot clock counters (:data:`POOL_COUNTERS`) grow like the counters
and are taken as differences with them (:func:`run_delta`, what a benchmark records around
one query); the calling backend's prefetch helper pool, ``pgnvm_prefetch()``
(:func:`read_prefetch_pool`), and the store granularity of WAL written through libpmem2 as
the server logs it at start (:func:`wal_pmem_logged`); and :func:`ensure_extension`, which
makes the extension usable in a benchmark's database.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

#: The counters of pgnvm, in the order the server lists them (NVM_STATS_COUNTERS).
COUNTERS: tuple[str, ...] = (
    "mapped_reads",
    "mapped_writes",
    "persisted_writes",
    "redirects",
    "cow_copies",
    "hints_skipped",
    "prefetch_jobs",
    "prefetch_bytes",
    "prefetch_dropped",
    "verified_by_helper",
    "verified_by_backend",
    "helper_verify_failed",
    "mappings_created",
    "mappings_evicted",
    "mapping_fallbacks",
    "views_kept",
    "views_resolved",
    "views_stale",
    "view_mismatches",
    "prunes_deferred",
)
#: Values the pgnvm_stats view derives from the counters (bytes_not_copied = redirects x
#: the server's block size), read from the server too.
DERIVED: tuple[str, ...] = ("bytes_not_copied",)


def _qualified(name: str, schema: str | None) -> str:
    return f"{schema}.{name}" if schema else name


def read_counters(
    conn: psycopg.Connection[Any],
    schema: str | None = None,
    *,
    own: bool = False,
    pid: int | None = None,
) -> dict[str, int]:
    """Every counter the server has, and :data:`DERIVED` (extension pgnvm in ``schema``,
    default: on the search path): from ``pgnvm_counters()``, summed over all processes, or
    with ``own`` from ``pgnvm_backend_counters(pg_backend_pid())``, the connection's own
    backend only (what it counted on top of earlier holders of its slot: use differences;
    a parallel query's workers are not in it); with ``pid`` those of that server process
    (e.g. the checkpointer; no rows, hence psycopg.DataError, once it has exited). Raises
    psycopg.Error where the extension is missing, psycopg.DataError where a counter of
    :data:`COUNTERS` is."""
    if own or pid is not None:
        who = "pg_backend_pid()" if pid is None else str(int(pid))
        # no per-process view: bytes_not_copied derived here as the view derives it
        sql = (
            "WITH c AS (SELECT counter, value FROM "
            f"{_qualified('pgnvm_backend_counters', schema)}({who})) "
            "SELECT counter, value FROM c UNION ALL "
            "SELECT 'bytes_not_copied', value * current_setting('block_size')::bigint "
            "FROM c WHERE counter = 'redirects'"
        )
    else:
        sql = (
            f"SELECT counter, value FROM {_qualified('pgnvm_counters', schema)}() "
            f"UNION ALL SELECT 'bytes_not_copied', bytes_not_copied "
            f"FROM {_qualified('pgnvm_stats', schema)}"
        )
    rows = conn.execute(sql).fetchall()
    got = {str(k): int(v or 0) for k, v in rows}
    missing = [k for k in (*COUNTERS, *DERIVED) if k not in got]
    if missing:
        raise psycopg.DataError(f"the server's pgnvm has no counter {', '.join(missing)}")
    return got


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """How much each counter grew (they only grow while the server runs)."""
    return {k: after[k] - before.get(k, 0) for k in after}


#: Columns of ``pgnvm_pool()`` that only grow while the server runs: the slot clock's work
#: and (1.8) the background writer's pass ahead of it (se2's hybrid pool; 0 without it).
POOL_COUNTERS: tuple[str, ...] = (
    "demotions",
    "slot_evictions",
    "slot_writes",
    "cleaner_writes",
    "cleaner_demotions",
)
#: ... and those that are a level, taken as they are after a query: the highest number of
#: slots in use since the server started, and the budget.
POOL_LEVELS: tuple[str, ...] = ("slots_in_use_peak", "slots")


def read_pool(conn: psycopg.Connection[Any], schema: str | None = None) -> dict[str, int]:
    """One row of ``pgnvm_pool()`` as {column: value} (``hybrid`` as 0/1). Scans every
    buffer descriptor. Raises psycopg.Error where the function is missing (pgnvm < 1.6)."""
    cur = conn.execute(f"SELECT * FROM {_qualified('pgnvm_pool', schema)}()")
    row = cur.fetchone()
    assert row is not None and cur.description is not None
    return {d.name: int(v) for d, v in zip(cur.description, row, strict=True)}


def pool_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What the slot clock did between two :func:`read_pool` readings
    (:data:`POOL_COUNTERS` as differences; those an older pgnvm lacks, absent) and
    :data:`POOL_LEVELS` as they are after."""
    out = {k: after[k] - before[k] for k in POOL_COUNTERS if k in before and k in after}
    out.update({k: after[k] for k in POOL_LEVELS})
    return out


def run_delta(
    before: tuple[dict[str, int] | None, dict[str, int] | None],
    after: tuple[dict[str, int] | None, dict[str, int] | None],
) -> dict[str, int] | None:
    """The counters of one measured interval from (counters, pool) readings before and
    after it (either None where it could not be read): :func:`delta` of the counters with
    :func:`pool_delta` of the pool merged in; None without counters on both sides (no
    extension: nothing recorded, no zeros)."""
    (c0, p0), (c1, p1) = before, after
    if c0 is None or c1 is None:
        return None
    out = delta(c0, c1)
    if p0 is not None and p1 is not None:
        out.update(pool_delta(p0, p1))
    return out


def ensure_extension(conn: psycopg.Connection[Any], schema: str) -> tuple[str | None, str]:
    """Make contrib ``pgnvm`` (``pgnvm_stats``, ``pgnvm_pool()``, ``pgnvm_prefetch()``) usable
    in a benchmark's database: created in ``schema`` (away from the benchmark's tables;
    a schema named like the connecting role is first on the default search path and takes
    every unqualified CREATE made after it exists: :data:`bench.oltp.targets.EXT_SCHEMA`,
    :data:`bench.tpch.schema.META_SCHEMA`), updated to this build's version, recreated
    when an older build's script lacked ``pgnvm_prefetch()``. Called on every set-up, not
    part of a load (a reused database gets it too). Where the extension exists already, in
    whatever schema, it stays there. Returns (schema of the extension or None, what
    happened / why it is not there)."""

    def where() -> str | None:
        row = conn.execute(
            "select n.nspname from pg_extension e join pg_namespace n "
            "on n.oid = e.extnamespace where e.extname = 'pgnvm'"
        ).fetchone()
        return str(row[0]) if row else None

    def has_prefetch(nsp: str) -> bool:
        row = conn.execute(
            "select to_regprocedure(%s) is not null", (f"{nsp}.pgnvm_prefetch()",)
        ).fetchone()
        return bool(row and row[0])

    row = conn.execute("select 1 from pg_available_extensions where name = 'pgnvm'").fetchone()
    if row is None:
        return None, "extension pgnvm is not installed in this build"
    nsp = where()
    if nsp is not None:
        # an older build's version: bring it to this build's (pgnvm_counters() is 1.1)
        conn.execute("alter extension pgnvm update")
    if nsp is not None and has_prefetch(nsp):
        return nsp, "present"
    if nsp is not None:
        conn.execute("drop extension pgnvm")
    conn.execute(f"create schema if not exists {schema}")
    conn.execute(f"create extension pgnvm schema {schema}")
    nsp = where()
    if nsp is None:
        return None, "create extension pgnvm failed"
    if not has_prefetch(nsp):
        return nsp, "created; this build has no pgnvm_prefetch()"
    return nsp, "created"


def fmt(d: dict[str, int], keys: tuple[str, ...] | None = None) -> str:
    """``redirects+15 cow_copies+0 ...`` (``keys``: those only, default all of ``d``)."""
    return " ".join(f"{k}+{d[k]}" for k in (keys if keys is not None else tuple(d)))


def read_prefetch_pool(conn: psycopg.Connection[Any], schema: str | None = None) -> dict[str, Any]:
    """``pgnvm_prefetch()`` of the calling backend as a dict: the settings (mode, mapping,
    distance), the pool's helpers, effective scheme, fallback, helper tids and CPUs, jobs
    enqueued / dropped / done / skipped, fault errors, helper CPU as the library counts it
    (the pool's fields are NULL while the backend has none: ``helpers`` 0). Raises
    psycopg.Error where the function is missing."""
    cur = conn.execute(f"SELECT * FROM {_qualified('pgnvm_prefetch', schema)}()")
    cols = [d.name for d in cur.description or []]
    row = cur.fetchone()
    if row is None:
        return {}
    return {
        k: (list(v) if isinstance(v, list | tuple) else v) for k, v in zip(cols, row, strict=True)
    }


#: the LOG line of a server with nvm_wal = pmem (nvm_wal.c), once per start
WAL_PMEM_LOG_RE = re.compile(
    r"LOG:  nvm_wal = pmem: WAL in \"(?P<dir>[^\"]+)\" is written through libpmem2 mappings, "
    r"store granularity (?P<gran>byte|cache-line|page)(?P<forced> \(forced by [^)]*\))?"
)


def wal_pmem_logged(log_text: str) -> re.Match[str] | None:
    """The last ``nvm_wal = pmem`` start-up LOG line in ``log_text`` (groups ``dir``,
    ``gran``: byte | cache-line | page, ``forced``: set when PMEM2_FORCE_GRANULARITY chose
    it), or None."""
    found = list(WAL_PMEM_LOG_RE.finditer(log_text))
    return found[-1] if found else None
