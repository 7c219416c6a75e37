"""differential: the same queries over the same data give byte-identical results in every engine.

One deterministic dataset larger than shared_buffers (d1 ~70 MB heap + 2 indexes, d2 for
joins, d3 with out-of-line TOAST), ~30 queries covering the ways executor nodes reach
relation blocks (seq/index/index-only/bitmap/TID/TID-range scans, joins, sorts, LIMIT,
parallel workers, pg_prewarm), before and after an UPDATE/DELETE/INSERT, after VACUUM and
after a VACUUM FULL rewrite. Each result is digested (md5 of its text rows); base records
the digests and every other engine must match them exactly. EXPLAIN is checked too, so a
query meant to exercise e.g. a bitmap heap scan really does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import psycopg

from bench.core.configs import REFERENCE
from bench.testsuite.context import EngineEnv
from bench.testsuite.digest import compare_digests, digest_rows
from bench.testsuite.model import CheckFailed

DB = "difftest"
ROWS = 800_000

SETUP: list[str] = [
    "CREATE EXTENSION IF NOT EXISTS pg_prewarm",
    "CREATE TABLE d1 (id int NOT NULL, k int NOT NULL, g int NOT NULL, v text NOT NULL, "
    " n numeric NOT NULL) WITH (autovacuum_enabled = off)",
    f"INSERT INTO d1 SELECT i, hashint4(i), i % 1000, md5(i::text), (i % 9973) / 7.0 "
    f"FROM generate_series(1, {ROWS}) i",
    "ALTER TABLE d1 ADD PRIMARY KEY (id)",
    "CREATE INDEX d1_k ON d1 (k)",
    "CREATE TABLE d2 (id int PRIMARY KEY, w int NOT NULL, label text NOT NULL) "
    "WITH (autovacuum_enabled = off)",
    "INSERT INTO d2 SELECT i * 5, abs(hashint4(i * 5)) % 1000, 'L' || (i % 97) "
    "FROM generate_series(1, 200000) i",
    "CREATE TABLE d3 (id int PRIMARY KEY, big text NOT NULL) WITH (autovacuum_enabled = off)",
    "ALTER TABLE d3 ALTER COLUMN big SET STORAGE EXTERNAL",
    "INSERT INTO d3 SELECT i, (SELECT string_agg(md5(i::text || ':' || j), '') "
    "FROM generate_series(1, 100) j) FROM generate_series(1, 3000) i",
    "VACUUM ANALYZE d1, d2, d3",
]

MUTATE: list[str] = [
    "UPDATE d1 SET k = k + 1, v = md5(v) WHERE id % 10 = 0",
    "DELETE FROM d1 WHERE id % 97 = 0",
    f"INSERT INTO d1 SELECT i, hashint4(i), i % 1000, md5(i::text), (i % 9973) / 7.0 "
    f"FROM generate_series({ROWS + 1}, {ROWS + 20000}) i",
    "UPDATE d3 SET big = upper(big) WHERE id % 7 = 0",
]

SERIAL = {"max_parallel_workers_per_gather": "0"}
NO_SEQ = {**SERIAL, "enable_seqscan": "off"}


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    settings: dict[str, str] = field(default_factory=dict)
    plan: str | None = None  # substring EXPLAIN (COSTS OFF) must contain


def _q(name: str, sql: str, plan: str | None = None, **settings: str) -> Query:
    return Query(name, sql, {**SERIAL, **settings}, plan)


SEQ_AGG = _q(
    "seq_agg",
    "SELECT count(*), sum(k::bigint), sum(g), sum(n), min(v), max(v), sum(length(v)) FROM d1",
    "Seq Scan on d1",
)
GROUP_AGG = _q(
    "group_agg",
    "SELECT g, count(*), sum(k::bigint), min(id), max(id) FROM d1 GROUP BY g ORDER BY g",
)
INDEX_RANGE = _q(
    "index_scan",
    "SELECT id, k, v, n FROM d1 WHERE id BETWEEN 400000 AND 410000 ORDER BY id",
    "Index Scan using d1_pkey",
    enable_seqscan="off",
    enable_bitmapscan="off",
    enable_indexonlyscan="off",
)
INDEX_ONLY = _q(
    "index_only_scan",
    "SELECT count(*), sum(id::bigint) FROM d1 WHERE id BETWEEN 100000 AND 700000",
    "Index Only Scan using d1_pkey",
    enable_seqscan="off",
    enable_bitmapscan="off",
)
BITMAP = _q(
    "bitmap_heap_scan",
    "SELECT id, k, v FROM d1 WHERE k BETWEEN -20000000 AND 20000000 ORDER BY id",
    "Bitmap Heap Scan on d1",
    enable_seqscan="off",
    enable_indexscan="off",
)
HASH_JOIN = _q(
    "hash_join",
    "SELECT d2.label, count(*), sum(d1.k::bigint), sum(d2.w) "
    "FROM d1 JOIN d2 ON d1.id = d2.id GROUP BY d2.label ORDER BY d2.label",
    "Hash Join",
    enable_mergejoin="off",
    enable_nestloop="off",
)
MERGE_JOIN = _q(
    "merge_join",
    "SELECT d1.id, d1.v, d2.w FROM d1 JOIN d2 ON d1.id = d2.id "
    "WHERE d2.id % 100 = 0 ORDER BY d1.id",
    "Merge Join",
    enable_hashjoin="off",
    enable_nestloop="off",
)
NESTLOOP = _q(
    "nestloop_index",
    "SELECT d2.id, d1.v, d1.k FROM d2 JOIN d1 ON d1.id = d2.id WHERE d2.w = 7 ORDER BY d2.id",
    "Nested Loop",
    enable_hashjoin="off",
    enable_mergejoin="off",
)
BIG_SORT = _q(
    "external_sort", "SELECT v, id FROM d1 ORDER BY v, id OFFSET 790000", "Sort", work_mem="1MB"
)
TOPN = _q("topn_sort", "SELECT id, v FROM d1 WHERE g = 3 ORDER BY v DESC, id LIMIT 300", "Sort")
TID = _q(
    "tid_scan",
    "SELECT ctid, id, v FROM d1 WHERE ctid = ANY "
    '(\'{"(0,1)","(100,7)","(5000,3)","(9000,20)"}\'::tid[]) ORDER BY id',
    "Tid Scan",
)
TID_RANGE = _q(
    "tid_range_scan",
    "SELECT ctid, id, v FROM d1 WHERE ctid >= '(3000,0)' AND ctid < '(3012,0)' ORDER BY ctid",
    "Tid Range Scan",
)
LIMIT_DESC = _q(
    "limit_backward",
    "SELECT id, v FROM d1 ORDER BY id DESC LIMIT 50",
    "Index Scan Backward using d1_pkey",
)
# index scans long enough for se2's heap look-ahead (nvm_index_ahead.c) to announce the
# blocks of their next TIDs: backward, with a LIMIT, a merge join's inner side restored to
# its mark (the outer side has duplicate keys), parallel workers
INDEX_BACKWARD = _q(
    "index_scan_backward",
    "SELECT id, k, v FROM d1 WHERE id BETWEEN 300000 AND 330000 ORDER BY id DESC",
    "Index Scan Backward using d1_pkey",
    enable_seqscan="off",
    enable_bitmapscan="off",
    enable_indexonlyscan="off",
)
INDEX_LIMIT = _q(
    "index_scan_limit",
    "SELECT id, v FROM d1 WHERE id > 123456 ORDER BY id LIMIT 3000",
    "Index Scan using d1_pkey",
    enable_seqscan="off",
    enable_bitmapscan="off",
    enable_indexonlyscan="off",
)
MERGE_MARK = _q(
    "merge_join_mark_restore",
    "SELECT count(*), sum(d1.k::bigint), sum(o.id) "
    "FROM (SELECT id, (id / 10) * 10 AS key FROM d2) o JOIN d1 ON d1.id = o.key",
    "Merge Join",
    enable_hashjoin="off",
    enable_nestloop="off",
    enable_seqscan="off",
    enable_bitmapscan="off",
    enable_indexonlyscan="off",
)
PARALLEL_INDEX = Query(
    "parallel_index_scan",
    "SELECT count(*), sum(k::bigint), min(v), max(v) FROM d1 WHERE id BETWEEN 100000 AND 500000",
    {
        "max_parallel_workers_per_gather": "2",
        "parallel_setup_cost": "0",
        "parallel_tuple_cost": "0",
        "min_parallel_index_scan_size": "0",
        "enable_seqscan": "off",
        "enable_bitmapscan": "off",
        "enable_indexonlyscan": "off",
    },
    "Parallel Index Scan using d1_pkey",
)
PARALLEL = Query(
    "parallel_seq_agg",
    "SELECT count(*), sum(k::bigint), sum(n) FROM d1 WHERE v > '8'",
    {
        "max_parallel_workers_per_gather": "2",
        "parallel_setup_cost": "0",
        "parallel_tuple_cost": "0",
        "min_parallel_table_scan_size": "0",
    },
    "Gather",
)
PREWARM = _q(
    "pg_prewarm",
    "SELECT pg_prewarm('d2', 'read'), pg_prewarm('d2', 'buffer'), "
    "pg_prewarm('d1_k', 'buffer'), pg_prewarm('d1', 'buffer', 'main', 0, 99)",
)
TOAST = _q(
    "toast_detoast", "SELECT id, length(big), md5(big) FROM d3 WHERE id % 25 = 0 ORDER BY id"
)
DISTINCT = _q(
    "count_distinct", "SELECT count(DISTINCT v), count(DISTINCT g), count(DISTINCT k) FROM d1"
)
D2_AGG = _q(
    "d2_agg",
    "SELECT label, count(*), sum(w), min(id), max(id) FROM d2 GROUP BY label ORDER BY label",
)

#: (phase, statements to run before it, restart before it?, queries)
PHASES: list[tuple[str, list[str], bool, list[Query]]] = [
    (
        "A",
        [],
        True,
        [
            SEQ_AGG,
            GROUP_AGG,
            INDEX_RANGE,
            INDEX_ONLY,
            BITMAP,
            HASH_JOIN,
            MERGE_JOIN,
            NESTLOOP,
            BIG_SORT,
            TOPN,
            TID,
            TID_RANGE,
            LIMIT_DESC,
            INDEX_BACKWARD,
            INDEX_LIMIT,
            MERGE_MARK,
            PARALLEL_INDEX,
            PARALLEL,
            PREWARM,
            TOAST,
            DISTINCT,
        ],
    ),
    (
        "B",
        MUTATE,
        False,
        [
            SEQ_AGG,
            GROUP_AGG,
            INDEX_RANGE,
            INDEX_ONLY,
            BITMAP,
            HASH_JOIN,
            LIMIT_DESC,
            INDEX_BACKWARD,
            MERGE_MARK,
            PARALLEL_INDEX,
            PARALLEL,
            TOAST,
            DISTINCT,
        ],
    ),
    (
        "C",
        ["VACUUM d1", "VACUUM d3", "VACUUM FULL d2", "CHECKPOINT"],
        True,
        [SEQ_AGG, INDEX_ONLY, TID, TID_RANGE, NESTLOOP, D2_AGG, TOAST, PREWARM],
    ),
]


def query_set_key() -> str:
    doc = json.dumps(
        [
            SETUP,
            [(p, pre, rs, [(q.name, q.sql, q.settings) for q in qs]) for p, pre, rs, qs in PHASES],
        ],
        sort_keys=True,
    )
    return "differential:" + hashlib.sha256(doc.encode()).hexdigest()[:16]


def _run_query(conn: psycopg.Connection, q: Query) -> tuple[str, int, str]:
    """(digest, rows, plan text) of ``q`` with its settings."""
    for k, v in q.settings.items():
        conn.execute(f"SET {k} = '{v}'")
    try:
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (COSTS OFF) {q.sql}").fetchall())
        cur = conn.execute(q.sql)
        res = cur.pgresult
        assert res is not None
        rows = ([res.get_value(i, j) for j in range(res.nfields)] for i in range(res.ntuples))
        digest, n = digest_rows(rows)
    finally:
        conn.execute("RESET ALL")
    return digest, n, plan


def run_queries(env: EngineEnv) -> tuple[dict[str, str], list[str]]:
    """Build the dataset and run every phase; returns (digests by query, plan problems)."""
    with env.server.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
        c.execute(f"CREATE DATABASE {DB}")
    with env.server.connect(DB) as c:
        for stmt in SETUP:
            c.execute(stmt)
    digests: dict[str, str] = {}
    plan_problems: list[str] = []
    for phase, pre, restart, queries in PHASES:
        if pre:
            with env.server.connect(DB) as c:
                for stmt in pre:
                    c.execute(stmt)
        if restart:
            env.server.restart()
        with env.server.connect(DB) as c:
            # binary=False: text results exactly as the server renders them
            for q in queries:
                name = f"{phase}.{q.name}"
                try:
                    digest, n, plan = _run_query(c, q)
                except psycopg.Error as e:
                    raise CheckFailed(f"{name} failed in {env.label}: {e}") from e
                digests[name] = f"{digest}/{n}"
                if q.plan and q.plan not in plan:
                    plan_problems.append(f"{name}: plan lacks {q.plan!r}:\n{plan}")
    with env.server.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
    return digests, plan_problems


def differential(env: EngineEnv, limit: float) -> str:
    digests, plan_problems = run_queries(env)
    (env.workdir / "differential-digests.json").write_text(json.dumps(digests, indent=1))
    if plan_problems:
        raise CheckFailed(
            "query did not use the plan it exists to test: " + " | ".join(plan_problems)
        )
    ref = env.reference(query_set_key(), digests)
    if ref.recorded:
        return f"{len(digests)} query digests recorded as the reference"
    if ref.value is None:
        raise CheckFailed(f"no base digests for this query set: run with {REFERENCE} in --configs")
    expected, source = ref.value, ref.source
    mismatches = compare_digests(expected, digests, env.label)
    if mismatches:
        raise CheckFailed(
            f"{len(mismatches)} of {len(expected)} queries differ from base "
            f"({source}): " + "; ".join(m.describe() for m in mismatches)
        )
    return f"{len(digests)} query digests identical to base ({source})"
