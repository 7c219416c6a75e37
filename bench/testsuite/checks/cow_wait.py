"""The ``cow`` check's part 6 (patch 0032): a statement that waits for the updater of a row
on a page se2 read in place goes on when that updater rolls back.

``heap_update()``, ``heap_delete()`` and ``heap_lock_tuple()`` wait for the transaction in a
tuple's xmax, then set ``HEAP_XMAX_INVALID`` if it aborted (``UpdateXmaxHintBits()``) and
read that hint back to decide whether they may go on. se2 never sets a hint bit on a page
read in place (patch 0007), so on such a page an aborted updater would look committed and
the row would be skipped (UPDATE 0). They are safe because they pin with ``ReadBuffer()``,
which copies a redirected page into the pool before they take its address (R3); patch 0032
asserts that premise in ``UpdateXmaxHintBits()``.

For each of UPDATE, DELETE and ``SELECT ... FOR UPDATE`` (through a sequential scan, which
reads in place): a table of 10 rows of 500 B (block 0 keeps room, so nothing prunes it), a
transaction updates row 1 and stays open; the table is written back, evicted and read by a
sequential scan (se2: block 0 redirected, the premise); a second session runs the statement
and waits for the first (checked in ``pg_stat_activity``), which rolls back. The statement
must find the row (1 row), leave the table as it says, and in se2 have copied the block
(``cow_copies`` of its backend). Shown failing with the copy at the pin disabled
(``bufmgr.c``'s ``NvmPinnedForAnyAccess()`` calls for a hit that is not read-only): the
assert-enabled build stops at 0032's assertion; without it the UPDATE returns no row.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from bench.core import counters
from bench.testsuite import nvmstats
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

WAIT_TABLE = "cow_wait_t"
ROWS = 10
ROW_ID = 1
WAIT_S = 30.0  # a step that takes longer is stuck

#: (what, the statement of the waiting session, rows it must return, the table's
#: (rows, rows with id ROW_ID, rows whose pad was changed) afterwards)
STATEMENTS = (
    (
        "UPDATE",
        f"UPDATE {WAIT_TABLE} SET pad = 'waited' WHERE id = {ROW_ID} RETURNING id",
        (ROWS, 1, 1),
    ),
    ("DELETE", f"DELETE FROM {WAIT_TABLE} WHERE id = {ROW_ID} RETURNING id", (ROWS - 1, 0, 0)),
    (
        "SELECT ... FOR UPDATE",
        f"SELECT id FROM {WAIT_TABLE} WHERE id = {ROW_ID} FOR UPDATE",
        (ROWS, 1, 0),
    ),
)


def waits(env: EngineEnv, se2: bool) -> str:
    """Part 6: each statement of :data:`STATEMENTS` waits for a rolled-back updater of a row
    on a page read in place (se2) and finds the row."""
    done = []
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        for what, sql, after in STATEMENTS:
            copies = _round(env, c, se2, what, sql, after)
            done.append(f"{what}" + (f" (cow_copies+{copies})" if se2 else ""))
        c.execute(f"DROP TABLE {WAIT_TABLE}")
    return "waits: found the row of a rolled-back updater: " + ", ".join(done)


def _round(
    env: EngineEnv,
    c: psycopg.Connection[Any],
    se2: bool,
    what: str,
    sql: str,
    after: tuple[int, int, int],
) -> int:
    t = WAIT_TABLE
    c.execute(f"DROP TABLE IF EXISTS {t}")
    c.execute(
        f"CREATE TABLE {t} (id int, pad text) WITH (fillfactor = 100, autovacuum_enabled = off)"
    )
    c.execute(f"INSERT INTO {t} SELECT g, repeat('x', 500) FROM generate_series(1, %s) g", (ROWS,))
    with env.server.connect() as holder, env.server.connect() as waiter:
        holder.execute("BEGIN")
        moved = holder.execute(
            f"UPDATE {t} SET pad = pad WHERE id = %s RETURNING ctid::text", (ROW_ID,)
        ).fetchone()
        if moved is None or nvmstats.block_of(moved[0]) != 0:
            raise CheckFailed(f"premise ({what}): the held UPDATE put its version at {moved}")
        c.execute("CHECKPOINT")
        ev = c.execute(
            f"SELECT buffers_skipped FROM pg_buffercache_evict_relation('{t}')"
        ).fetchone()
        if ev != (0,) or nvmstats.relation_buffers(c, t):
            raise CheckFailed(f"premise ({what}): {t} could not be evicted (skipped: {ev})")
        c.execute("SET max_parallel_workers_per_gather = 0")
        c.execute(f"SELECT count(*) FROM {t} WHERE length(pad) > 0")
        c.execute("RESET ALL")
        if se2 and not nvmstats.relation_buffer(c, t, 0).redirected:
            raise CheckFailed(f"premise ({what}): the scan left block 0 of {t} not redirected")

        waiter.execute("SET max_parallel_workers_per_gather = 0")
        pid = waiter.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        before = counters.read_counters(c, pid=pid)
        out: dict[str, Any] = {}

        def run() -> None:
            try:
                out["rows"] = waiter.execute(sql).fetchall()
            except psycopg.Error as e:
                out["error"] = f"{e.sqlstate}: {str(e).strip().splitlines()[0]}"

        th = threading.Thread(target=run, daemon=True)
        th.start()
        try:
            _until_waiting(c, pid, what)
        finally:
            holder.execute("ROLLBACK")
        th.join(WAIT_S)
        if th.is_alive() or "error" in out:
            raise CheckFailed(
                f"{env.engine}: the {what} waiting for a rolled-back updater "
                + ("did not finish" if th.is_alive() else f"failed: {out['error']}")
            )
        d = counters.delta(before, counters.read_counters(c, pid=pid))
    if out["rows"] != [(ROW_ID,)]:
        raise CheckFailed(
            f"{env.engine}: the {what} that waited for a rolled-back updater of row {ROW_ID} "
            f"returned {out['rows']}, expected [({ROW_ID},)]: the row was skipped"
        )
    got = c.execute(
        f"SELECT count(*), count(*) FILTER (WHERE id = %s), "
        f"count(*) FILTER (WHERE pad = 'waited') FROM {t}",
        (ROW_ID,),
    ).fetchone()
    if got != after:
        raise CheckFailed(
            f"{env.engine}: after the {what}, (rows, rows with id {ROW_ID}, rows changed) = "
            f"{got}, expected {after}"
        )
    if se2 and d["cow_copies"] < 1:
        raise CheckFailed(
            f"{env.engine}: the {what} of a row on a redirected block copied nothing "
            f"(cow_copies +{d['cow_copies']})"
        )
    if not se2 and d["cow_copies"] != 0:
        raise CheckFailed(f"{env.engine}: cow_copies grew by {d['cow_copies']}")
    return d["cow_copies"]


def _until_waiting(c: psycopg.Connection[Any], pid: int, what: str) -> None:
    """Return once backend ``pid`` waits for a lock (the held update's transaction)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        row = c.execute(
            "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        if row == ("Lock", "transactionid"):
            return
        time.sleep(0.02)
    raise CheckFailed(f"premise ({what}): the waiting session never waited for the held update")
