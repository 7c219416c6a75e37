"""pgnvm's counters as the server reports them (contrib/pgnvm).

:data:`COUNTERS` is the one Python list of the counter names. Their one definition in C is
the X-macro list ``NVM_STATS_COUNTERS(X)`` of ``postgres/src/include/storage/nvm_stats.h``
(``tests/test_counters.py`` holds the two against each other once the header exists); the
server reports them, summed over every process since it started, through ``pgnvm_stats``
(today: one wide row) and ``pgnvm_counters()`` (one row per counter, to come).

Also here: the calling backend's prefetch helper pool, ``pgnvm_prefetch()``
(:func:`read_prefetch_pool`).
"""

from __future__ import annotations

from typing import Any

import psycopg

#: The counters of pgnvm, in the order the server lists them.
COUNTERS: tuple[str, ...] = (
    "mapped_reads",
    "mapped_writes",
    "redirects",
    "cow_copies",
    "hints_skipped",
    "bytes_not_copied",
    "prefetch_jobs",
    "prefetch_bytes",
    "prefetch_dropped",
)


def _qualified(name: str, schema: str | None) -> str:
    return f"{schema}.{name}" if schema else name


def read_counters(conn: psycopg.Connection[Any], schema: str | None = None) -> dict[str, int]:
    """Every counter of :data:`COUNTERS` (extension pgnvm in ``schema``, default: on the
    search path). Reads the wide view ``pgnvm_stats`` (one column per counter) until the
    server has ``pgnvm_counters()``. Raises psycopg.Error where the extension (or a counter)
    is missing."""
    row = conn.execute(
        f"SELECT {', '.join(COUNTERS)} FROM {_qualified('pgnvm_stats', schema)}"
    ).fetchone()
    if row is None:
        raise psycopg.DataError("pgnvm_stats returned no row")
    return {k: int(v or 0) for k, v in zip(COUNTERS, row, strict=True)}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """How much each counter grew (they only grow while the server runs)."""
    return {k: after[k] - before.get(k, 0) for k in after}


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
