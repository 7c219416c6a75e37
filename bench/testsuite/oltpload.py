"""The write loads of the checks that stop a server under load (``crash``: ``kill -9``;
``powerloss``: a simulated power cut) and what they verify afterwards: TPC-B (pgbench's
built-in) and YCSB-A, the acknowledgement recorder (autocommit inserts whose ids are
logged once COMMIT returned, :mod:`bench.testsuite.acks`), TPC-B's balances."""

from __future__ import annotations

import threading
import time

import psycopg

from bench.core.server import Server
from bench.testsuite.acks import AckLog
from bench.testsuite.model import CheckFailed

YCSB_FIELDS = 10

#: what the server log of a crash recovery shows (one of them at least)
RECOVERY_MARKERS = (
    "database system was interrupted",
    "not properly shut down",
    "redo starts at",
    "redo done at",
)


def ycsb_a_script(rows: int) -> str:
    """YCSB-A for pgbench: 50% reads of a whole row, 50% updates of one field (always
    field0: pgbench cannot choose a column), keys zipfian (s = 1.01, pgbench's lowest)
    scattered with ``permute()`` over ``rows`` keys."""
    return f"""\\set r random(1, 100)
\\set k 1 + permute(random_zipfian(0, {rows - 1}, 1.01), {rows})
\\if :r <= 50
SELECT * FROM usertable WHERE ycsb_key = :k;
\\else
UPDATE usertable SET field0 = md5(random()::text) || md5(random()::text) || repeat('u', 36)
 WHERE ycsb_key = :k;
\\endif
"""


def ycsb_load(server: Server, db: str, rows: int) -> None:
    """``usertable``: a key and ten 100-byte fields per row (~1 KB), ``rows`` rows."""
    fields = ", ".join(f"field{i} text" for i in range(YCSB_FIELDS))
    values = ", ".join("repeat(md5(g::text), 3) || repeat('y', 4)" for _ in range(YCSB_FIELDS))
    with server.connect(db) as c:
        c.execute(f"CREATE TABLE usertable (ycsb_key int PRIMARY KEY, {fields})")
        c.execute(f"INSERT INTO usertable SELECT g, {values} FROM generate_series(1, {rows}) g")
        c.execute("VACUUM ANALYZE usertable")


def recorder(
    server: Server,
    db: str,
    log: AckLog,
    first_id: int,
    stop: threading.Event,
    errors: list[BaseException],
    hold: threading.Event | None = None,
) -> None:
    """Insert rows into ``acks`` with increasing ids in autocommit; acknowledge an id once
    COMMIT returned. Ends quietly when the server goes away under it. While ``hold`` is
    set, it sends nothing."""
    try:
        conn = server.connect(db)
    except BaseException as e:
        errors.append(e)
        return
    ident = first_id
    try:
        with conn:
            while not stop.is_set():
                if hold is not None and hold.is_set():
                    time.sleep(0.01)
                    continue
                log.sending(ident)
                conn.execute("INSERT INTO acks (id, at) VALUES (%s, clock_timestamp())", (ident,))
                log.acknowledge(ident)  # autocommit: execute() returned => COMMIT acknowledged
                ident += 1
    except psycopg.Error:
        pass  # the server was killed under us: expected
    except BaseException as e:
        errors.append(e)


def round_acks(log: AckLog, errors: list[BaseException], label: str, within: str) -> list[int]:
    """The ids the recorder saw acknowledged in a round (``label``: "round 3"); CheckFailed
    when it failed, or when nothing was acknowledged ``within`` (e.g. "in 4.2s")."""
    if errors:
        raise CheckFailed(f"{label}: the ack recorder failed: {errors[0]!r}")
    acked = log.snapshot()
    if not acked:
        raise CheckFailed(f"{label}: no insert was acknowledged {within}")
    return acked


def tpcb_consistency(server: Server, db: str, scale: int, need_history: bool = True) -> str:
    """TPC-B's invariants: ``scale`` x 100,000 accounts, sum(abalance) = sum(tbalance) =
    sum(bbalance) = sum(delta); CheckFailed otherwise (and, with ``need_history``, when
    the load committed nothing)."""
    with server.connect(db) as c:
        row = c.execute("""
            SELECT (SELECT sum(abalance) FROM pgbench_accounts),
                   (SELECT sum(tbalance) FROM pgbench_tellers),
                   (SELECT sum(bbalance) FROM pgbench_branches),
                   (SELECT coalesce(sum(delta), 0) FROM pgbench_history),
                   (SELECT count(*) FROM pgbench_history),
                   (SELECT count(*) FROM pgbench_accounts)""").fetchone()
    assert row is not None
    acc, tel, bra, hist, nhist, nacc = row
    if nacc != scale * 100_000:
        raise CheckFailed(f"pgbench_accounts has {nacc} rows, expected {scale * 100_000}")
    if not (acc == tel == bra == hist):
        raise CheckFailed(
            f"pgbench balances inconsistent after recovery: sum(abalance)={acc} "
            f"sum(tbalance)={tel} sum(bbalance)={bra} sum(delta)={hist}"
        )
    if need_history and nhist == 0:
        raise CheckFailed("pgbench_history is empty: the load committed nothing")
    return f"pgbench consistent: sum(abalance)=sum(delta)={acc} over {nhist} transactions"
