"""truncated: a relation file shrinks behind the server's back.

Reading the missing blocks must raise an ERROR (not crash a backend, not SIGBUS a
mapping), and every engine must behave exactly like base: the same result or the same
SQLSTATE and message (file paths normalised) for each probe query.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg

from bench.testsuite.context import EngineEnv
from bench.testsuite.errmatch import DATA_CORRUPTED, SHORT_READ_RE, normalise_message
from bench.testsuite.model import CheckFailed

ROWS = 16_000  # ~2 MB heap with the pad below

#: (name, settings, query). The first reads the table sequentially (its size comes from
#: the file, so stock PostgreSQL sees a shorter table); the second fetches a heap tuple of
#: the lost half through the index, which must fail.
PROBES: list[tuple[str, dict[str, str], str]] = [
    ("seqscan count(*)", {}, "SELECT count(*) FROM trunc_t"),
    (
        "index fetch of a lost row",
        {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"},
        f"SELECT id, length(pad) FROM trunc_t WHERE id = {ROWS}",
    ),
]
MUST_FAIL = "index fetch of a lost row"


def _probe(
    conn: psycopg.Connection, settings: dict[str, str], sql: str, relpath: str
) -> dict[str, Any]:
    for k, v in settings.items():
        conn.execute(f"SET {k} = '{v}'")
    try:
        rows = conn.execute(sql).fetchall()
        out: dict[str, Any] = {"result": [list(map(str, r)) for r in rows]}
    except psycopg.Error as e:
        out = {
            "sqlstate": e.diag.sqlstate,
            "message": normalise_message(e.diag.message_primary or str(e), {relpath: "<relfile>"}),
        }
    for k in settings:
        conn.execute(f"RESET {k}")
    return out


def _describe(o: dict[str, Any]) -> str:
    if "sqlstate" in o:
        return f"ERROR {o['sqlstate']}: {o['message']}"
    return f"result {o['result']}"


def truncated(env: EngineEnv, limit: float) -> str:
    offset = env.log_offset()
    pid_before = env.cluster.pid()
    with env.connect() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        c.execute("DROP TABLE IF EXISTS trunc_t")
        c.execute(
            "CREATE TABLE trunc_t (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)"
        )
        c.execute(
            "INSERT INTO trunc_t SELECT g, repeat(md5(g::text), 2) FROM generate_series(1, %s) g",
            (ROWS,),
        )
        c.execute("VACUUM ANALYZE trunc_t")
        c.execute("CHECKPOINT")
        relpath = c.execute("SELECT pg_relation_filepath('trunc_t')").fetchone()[0]  # type: ignore[index]
        path = env.cluster.datadir / relpath
        size = path.stat().st_size
        if not 1 << 20 <= size <= 4 << 20:
            raise CheckFailed(f"trunc_t is {size} bytes, expected about 2 MB")
        ev = c.execute(
            "SELECT buffers_evicted, buffers_flushed, buffers_skipped "
            "FROM pg_buffercache_evict_relation('trunc_t')"
        ).fetchone()
        left = c.execute(
            "SELECT count(*) FROM pg_buffercache WHERE relfilenode = "
            "pg_relation_filenode('trunc_t') AND reldatabase = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
        if left is None or left[0] != 0:
            raise CheckFailed(f"{left} buffers of trunc_t still cached after eviction {ev}")
        os.truncate(path, size // 2)
        outcomes = {name: _probe(c, s, q, relpath) for name, s, q in PROBES}
        if c.execute("SELECT 1").fetchone() != (1,):
            raise CheckFailed("SELECT 1 failed on the same connection after the probes")
    with env.connect() as c:
        c.execute("SELECT 1")
        c.execute("DROP TABLE trunc_t")
    if env.cluster.pid() != pid_before:
        raise CheckFailed(
            f"postmaster pid changed ({pid_before} -> {env.cluster.pid()}): the server restarted"
        )
    problems = env.log_problems_since(offset)
    if problems:
        raise CheckFailed("server log shows a crash: " + " | ".join(problems[:5]))

    lost = outcomes[MUST_FAIL]
    if "sqlstate" not in lost:
        raise CheckFailed(f"{MUST_FAIL}: expected an ERROR, got {_describe(lost)}")
    if env.engine == "base":
        # stock behaviour, recorded as the reference: proves the probe does hit a short read
        if lost["sqlstate"] != DATA_CORRUPTED or not SHORT_READ_RE.search(lost["message"]):
            raise CheckFailed(
                f"{MUST_FAIL}: expected stock XX001 'could not read blocks ... "
                f"read only N of M bytes', got {_describe(lost)}"
            )
        env.run.store_reference("truncated", outcomes)
        source = "recorded as reference"
    else:
        ref = env.run.load_reference("truncated")
        if ref is None:
            raise CheckFailed("no base reference: run with base in --engines (once suffices)")
        expected, source = ref
        diffs = [
            f"{n}: base {_describe(expected[n])} / {env.engine} {_describe(outcomes[n])}"
            for n in expected
            if outcomes.get(n) != expected[n]
        ]
        if diffs:
            raise CheckFailed("differs from base: " + "; ".join(diffs))
        source = f"same as base ({source})"
    return "; ".join(f"{n} -> {_describe(o)}" for n, o in outcomes.items()) + f" [{source}]"
