"""The ``cow`` check's parts 3 to 5 (parts 1 and 2: :mod:`cow`): on-access pruning by an
index fetch (patch 0027) or a table scan (patch 0029) that only reads does not copy a page
se2 reads in place (R9 of docs/storage-engines.md).

Part 3 (:func:`prune`):

A table whose full blocks 0 and 1 each hold one dead row version (an UPDATE moved the row
away: the page had no room for the new version), checked with pageinspect: each block is
prunable (``pd_prune_xid`` set) and too full for another version. After a restart the
blocks leave the pool, and se2 reads them in place. Two SELECTs of other rows of block 0, an
index-only scan's heap fetch (the page is not all-visible) and a plain index scan's (plans
checked): base and se1 prune it at the first (the buffer is dirty); se2 leaves it as it is,
redirected and clean, no copy, ``prunes_deferred`` +2. Then an UPDATE of a row of block 0
through the index: in se2 its own fetch copies and prunes the page; in every engine the new
version fits in block 0 (a HOT update), which it could not without the prune. Then a
cursor's ``SELECT ... FOR UPDATE`` through the index reads a row of block 1 and ``UPDATE ...
WHERE CURRENT OF`` changes it: the locking read prunes in every engine (se2: one copy, no
deferral), so the update, whose TID fetch never prunes, is HOT.

Part 4 (:func:`scans`): the same table made again, a restart, then a sequential, a bitmap
heap and a TID range scan (plans and counts checked) each leave blocks 0 and 1 redirected
and clean in se2 (``prunes_deferred`` +2 each, no copy), and so do a sequential scan
run 3 times by a SubPlan (2 rescans; +2 per pass), a parallel bitmap heap scan run by
workers only (its leader, which runs none of it, neither defers nor copies), a parallel
sequential scan run by workers only (``Workers Launched`` checked; their counters are not
the backend's, the buffers are looked at) and one run by the leader alone; base and se1
prune both blocks at the first scan (``pd_prune_xid`` 0). Then two UPDATEs prune in
every engine (se2: one copy each) and are HOT: one finds its row of block 0 by TID through
another scan of the table (an InitPlan's TID range scan; the Tid Scan that changes it never
prunes), one finds its row of block 1 by its own sequential scan.

Part 5 (:func:`rewrite`, patch 0031): VACUUM FULL and CLUSTER through an index (HOT and
key-changing variants) keep the live row of an UPDATE that was rolled back, on the cold
table and after a sequential scan that read it in place.

Counters of the check's backend only (autovacuum's work on catalogs is not in them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from bench.core import counters
from bench.testsuite import nvmstats
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

INDEX_ONLY = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_tidscan": "off"}
PRUNE_TABLE = "cow_prune_t"
PRUNE_ROWS = 200
#: (pd_prune_xid, free bytes) of one block (pageinspect)
PAGE_HEADER_SQL = (
    "SELECT prune_xid::text::bigint, upper - lower FROM page_header(get_raw_page(%s, %s))"
)
#: the counters the parts judge, in this order
DEFERRED_COPIES = ("prunes_deferred", "cow_copies")
#: (id, its block) of the rows the UPDATEs move away, leaving a dead version in blocks 0, 1
MOVES = ((1, 0), (35, 1))
#: id -> block of every row the check relies on (200-byte rows: 34 per block)
PLACED = {1: 0, 2: 0, 3: 0, 4: 0, 35: 1, 36: 1}


def _prunable_table(c: psycopg.Connection[Any]) -> None:
    """Create :data:`PRUNE_TABLE` with :data:`PRUNE_ROWS` rows; for each (id, block) of
    :data:`MOVES` an UPDATE through the index moves the row out of its full block, leaving a
    dead version there. Premises checked: the rows of :data:`PLACED` are where expected
    before any version is dead (a fetch after the UPDATEs would prune on access), each new
    version lands after blocks 0 and 1, and each of those is prunable and too full for one
    more version without the prune."""
    table = PRUNE_TABLE
    c.execute(f"DROP TABLE IF EXISTS {table}")
    c.execute(
        f"CREATE TABLE {table} (id int PRIMARY KEY, pad text NOT NULL) "
        "WITH (autovacuum_enabled = off)"
    )
    c.execute(
        f"INSERT INTO {table} SELECT g, repeat('p', 200) FROM generate_series(1, %s) g",
        (PRUNE_ROWS,),
    )
    for k, v in INDEX_ONLY.items():
        c.execute(f"SET {k} = '{v}'")
    placed = dict(
        c.execute(
            f"SELECT id, ctid::text FROM {table} WHERE id = ANY(%s)", (sorted(PLACED),)
        ).fetchall()
    )
    if {i: nvmstats.block_of(t) for i, t in placed.items()} != PLACED:
        raise CheckFailed(f"premise: rows {PLACED} (id: block) of {table} are at {placed}")
    for row_id, block in MOVES:
        moved = c.execute(
            f"UPDATE {table} SET pad = pad WHERE id = %s RETURNING ctid::text", (row_id,)
        ).fetchone()
        if moved is None or nvmstats.block_of(moved[0]) <= 1:
            raise CheckFailed(f"premise: the new version of id {row_id} is at {moved}")
        header = c.execute(PAGE_HEADER_SQL, (table, block)).fetchone()
        lp_len = c.execute(
            "SELECT lp_len FROM heap_page_items(get_raw_page(%s, %s)) WHERE lp = 3",
            (table, block),
        ).fetchone()
        # no room for one more version (its line pointer included) without the prune
        if (
            header is None
            or lp_len is None
            or header[0] == 0
            or header[1] >= 8192 // 10
            or header[1] >= (lp_len[0] + 7) // 8 * 8 + 4
        ):
            raise CheckFailed(
                f"premise: block {block} of {table} should be prunable and too full for "
                f"another version: (prune_xid, free) = {header}, tuple length {lp_len}"
            )
    c.execute("RESET ALL")


def _plan(c: psycopg.Connection[Any], sql: str, node: str) -> str:
    """EXPLAIN (COSTS OFF) of ``sql``, which must use ``node``."""
    plan = "\n".join(r[0] for r in c.execute(f"EXPLAIN (COSTS OFF) {sql}").fetchall())
    if node not in plan:
        raise CheckFailed(f"premise: {sql!r} should use a {node}: {plan}")
    return plan


def _expect(
    env: EngineEnv, what: str, d: dict[str, int], keys: tuple[str, str], want: tuple[int, int]
) -> None:
    """CheckFailed unless the counters ``keys`` of the delta ``d`` are ``want``."""
    got = (d[keys[0]], d[keys[1]])
    if got != want:
        raise CheckFailed(f"{env.engine}: {what}: ({', '.join(keys)}) = {got}, expected {want}")


def prune(env: EngineEnv, se2: bool) -> str:
    """Part 3 (see the module's docstring): read-only index fetches (an index-only scan's and
    a plain index scan's) leave a page read in place unpruned; the UPDATE's own fetch and a
    locking read prune it."""
    with env.server.connect() as c:
        _prunable_table(c)
    env.server.restart()  # block 0 leaves the pool: read in place by se2's next fetch

    with env.server.connect() as c:
        c.execute("SET max_parallel_workers_per_gather = 0")
        for k, v in INDEX_ONLY.items():
            c.execute(f"SET {k} = '{v}'")
        reads = {
            "Index Only Scan": f"SELECT id FROM {PRUNE_TABLE} WHERE id = 2",
            "Index Scan": f"SELECT pad FROM {PRUNE_TABLE} WHERE id = 4",
        }
        locking = f"SELECT pad FROM {PRUNE_TABLE} WHERE id = 36 FOR UPDATE"
        # the plans (and with them the caches) before the counters are read
        for node, sql in (*reads.items(), ("Index Scan", locking)):
            plan = _plan(c, sql, f"{node} using")
            if node == "Index Scan" and "Only" in plan:
                raise CheckFailed(f"premise: {sql!r} should be an {node}: {plan}")
        c.execute(f"EXPLAIN UPDATE {PRUNE_TABLE} SET pad = pad WHERE id = 3")
        nvmstats.relation_buffers(c, PRUNE_TABLE)
        before = counters.read_counters(c, own=True)
        for sql in reads.values():
            if len(c.execute(sql).fetchall()) != 1:
                raise CheckFailed(f"{sql!r} did not return one row")
        block0 = nvmstats.relation_buffer(c, PRUNE_TABLE, 0)
        if se2 and (not block0.redirected or block0.dirty):
            raise CheckFailed(
                "se2: a SELECT copied block 0 to prune it on access; it should stay "
                f"redirected and clean: {block0}"
            )
        if not se2 and (block0.redirected or not block0.dirty):
            raise CheckFailed(
                f"{env.engine}: the SELECTs should have pruned block 0 (dirty): {block0}"
            )
        d = counters.delta(before, counters.read_counters(c, own=True))
        # se2: both fetches leave it (the index-only scan's heap fetch and the index scan's);
        # base/se1: the first prunes it, the second finds nothing to prune
        _expect(env, "the two SELECTs", d, DEFERRED_COPIES, (2, 0) if se2 else (0, 0))

        before = counters.read_counters(c, own=True)
        upd = c.execute(
            f"UPDATE {PRUNE_TABLE} SET pad = pad WHERE id = 3 RETURNING ctid::text"
        ).fetchone()
        d = counters.delta(before, counters.read_counters(c, own=True))
        if upd is None or nvmstats.block_of(upd[0]) != 0:
            raise CheckFailed(
                f"{env.engine}: the UPDATE of id 3 put its new version at {upd}: block 0 was "
                "not pruned before it (the dead version of id 1 is still there)"
            )
        if se2 and (d["cow_copies"], d["prunes_deferred"]) != (1, 0):
            raise CheckFailed(
                "se2: the UPDATE's fetch should copy block 0 once and prune it: "
                f"(cow_copies, prunes_deferred) = {(d['cow_copies'], d['prunes_deferred'])}"
            )
        # a locking read prunes as stock (its lock changes the page anyway): the UPDATE
        # that then finds the row by TID (WHERE CURRENT OF never prunes) is HOT
        before = counters.read_counters(c, own=True)
        with c.transaction():
            c.execute(f"DECLARE prune_cur CURSOR FOR {locking}")
            c.execute("FETCH prune_cur")
            upd = c.execute(
                f"UPDATE {PRUNE_TABLE} SET pad = pad WHERE CURRENT OF prune_cur "
                "RETURNING ctid::text"
            ).fetchone()
        d = counters.delta(before, counters.read_counters(c, own=True))
        if upd is None or nvmstats.block_of(upd[0]) != 1:
            raise CheckFailed(
                f"{env.engine}: the UPDATE WHERE CURRENT OF of id 36 put its new version at "
                f"{upd}: the locking read did not prune block 1 (not HOT)"
            )
        if d["prunes_deferred"] != 0 or (se2 and d["cow_copies"] != 1):
            raise CheckFailed(
                f"{env.engine}: the locking read and its UPDATE: (cow_copies, prunes_deferred)"
                f" = {(d['cow_copies'], d['prunes_deferred'])}, expected "
                f"{(1 if se2 else 0, 0)}"
            )
        n = c.execute(f"SELECT count(*) FROM {PRUNE_TABLE}").fetchone()
        if n != (PRUNE_ROWS,):
            raise CheckFailed(f"{PRUNE_TABLE} has {n} rows, expected {PRUNE_ROWS}")
        c.execute(f"DROP TABLE {PRUNE_TABLE}")
    return (
        "prune: "
        + (
            "two read-only fetches left block 0 redirected (prunes_deferred+2), the UPDATE's "
            "fetch copied and pruned it"
            if se2
            else "the first SELECT pruned block 0"
        )
        + "; the UPDATE is HOT (new version in block 0); a FOR UPDATE read pruned block 1"
    )


#: part 4's read-only scans (blocks 0 and 1 hold 33 live rows each: 34 per block, one moved
#: away)
NO_INDEX = {"enable_indexscan": "off", "enable_indexonlyscan": "off"}
SEQ_ONLY = {**NO_INDEX, "enable_bitmapscan": "off", "enable_tidscan": "off"}
SEQ_SQL = f"SELECT count(*) FROM {PRUNE_TABLE} WHERE pad <> ''"
BITMAP_SQL = f"SELECT count(*) FROM {PRUNE_TABLE} WHERE id IN (2, 36)"
#: a sequential scan rescanned (a SubPlan run once per row of its outer query: the scan
#: keeps its descriptor, heap_rescan() its flags): RESCANS passes over blocks 0 and 1
RESCANS = 3
RESCAN_SQL = (
    f"SELECT sum((SELECT count(*) FROM {PRUNE_TABLE} t WHERE t.id >= v.x)) "
    f"FROM (VALUES {', '.join(f'({i})' for i in range(1, RESCANS + 1))}) v(x)"
)
#: (what, query, its count, settings forcing the plan, nodes it must show, passes over
#: blocks 0 and 1)
TABLE_SCANS = (
    ("Seq Scan", SEQ_SQL, PRUNE_ROWS, SEQ_ONLY, ("Seq Scan",), 1),
    (
        "Bitmap Heap Scan",
        BITMAP_SQL,
        2,
        {**NO_INDEX, "enable_seqscan": "off"},
        ("Bitmap Heap Scan",),
        1,
    ),
    (
        "Tid Range Scan",
        f"SELECT count(*) FROM {PRUNE_TABLE} WHERE ctid < '(2,0)'",
        66,
        {**NO_INDEX, "enable_seqscan": "off", "enable_bitmapscan": "off"},
        ("Tid Range Scan",),
        1,
    ),
    (
        f"Seq Scan run {RESCANS} times by a SubPlan ({RESCANS - 1} rescans)",
        RESCAN_SQL,
        sum(PRUNE_ROWS + 1 - i for i in range(1, RESCANS + 1)),
        SEQ_ONLY,
        ("SubPlan", "Seq Scan on"),
        RESCANS,
    ),
)
#: a parallel sequential scan by workers only (or, with max_parallel_workers = 0, by the
#: leader alone)
PARALLEL = {
    **SEQ_ONLY,
    "parallel_setup_cost": "0",
    "parallel_tuple_cost": "0",
    "min_parallel_table_scan_size": "0",
    "max_parallel_workers_per_gather": "2",
    "parallel_leader_participation": "off",
}
#: and a parallel bitmap heap scan by workers only (each begins its own heap scan; two
#: rows are too few for the planner to choose one: blocks 0-2)
PARALLEL_BITMAP_SQL = f"SELECT count(*) FROM {PRUNE_TABLE} WHERE id <= 100"
PARALLEL_BITMAP = {
    **PARALLEL,
    "enable_bitmapscan": "on",
    "enable_seqscan": "off",
    "min_parallel_index_scan_size": "0",
}
#: an UPDATE that finds its row through another scan of the same table (a TID range scan of
#: block 0 in an InitPlan) and changes it by TID (a Tid Scan, which never prunes): a
#: statement that changes a table prunes in every scan of it, under any range table entry
BY_TID = (
    f"UPDATE {PRUNE_TABLE} SET pad = pad WHERE ctid = ANY (ARRAY("
    f"SELECT ctid FROM {PRUNE_TABLE} WHERE ctid < '(1,0)' AND id = 3)) RETURNING ctid::text"
)


def _set(c: psycopg.Connection[Any], settings: dict[str, str]) -> None:
    c.execute("RESET ALL")
    c.execute("SET max_parallel_workers_per_gather = 0")
    for k, v in settings.items():
        c.execute(f"SET {k} = '{v}'")


def _check_blocks(c: psycopg.Connection[Any], env: EngineEnv, se2: bool, what: str) -> None:
    """se2: blocks 0 and 1 still redirected and clean (unpruned); base/se1: both pruned
    (``pd_prune_xid`` 0, which pageinspect may read: their pages are in DRAM)."""
    for block in (0, 1):
        b = nvmstats.relation_buffer(c, PRUNE_TABLE, block)
        if se2 and (not b.redirected or b.dirty):
            raise CheckFailed(
                f"se2: {what} copied prunable block {block} to prune it on access; it "
                f"should stay redirected and clean: {b}"
            )
        if not se2:
            header = c.execute(PAGE_HEADER_SQL, (PRUNE_TABLE, block)).fetchone()
            if header is None or header[0] != 0:
                raise CheckFailed(
                    f"{env.engine}: {what} should have pruned block {block}: (prune_xid, "
                    f"free) = {header}"
                )


def _parallel(
    c: psycopg.Connection[Any], workers: bool, sql: str = SEQ_SQL, node: str = "Parallel Seq Scan"
) -> None:
    """Run ``sql`` (under EXPLAIN ANALYZE) as a parallel scan (``node``), by workers only
    or (not ``workers``) by the leader alone, which the plan's ``Workers Launched`` must
    show."""
    settings = PARALLEL_BITMAP if node == "Parallel Bitmap Heap Scan" else PARALLEL
    _set(c, settings if workers else {**settings, "max_parallel_workers": "0"})
    _plan(c, sql, node)
    rows = c.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {sql}")
    plan = "\n".join(r[0] for r in rows.fetchall())
    launched = "Workers Launched: 0" not in plan and "Workers Launched" in plan
    if launched != workers:
        who = "in workers" if workers else "in the leader alone"
        raise CheckFailed(f"premise: the parallel scan should run {who}: {plan}")


def scans(env: EngineEnv, se2: bool) -> str:
    """Part 4 (patch 0029): read-only table scans -- sequential, bitmap heap, TID range, a
    sequential scan rescanned, a parallel bitmap heap scan by workers only, and a parallel
    sequential scan by workers only and by the leader alone -- leave the prunable blocks 0
    and 1 read in place unpruned (se2: redirected, clean, ``prunes_deferred`` +2 per pass
    over the blocks by the check's backend, no copy) and return the right counts; base and
    se1 prune both at the first scan. Then an UPDATE that finds its row
    through another scan of the table and changes it by TID, and one that finds it by its
    own sequential scan, prune in every engine (se2: one copy each), so their new versions
    are HOT."""
    with env.server.connect() as c:
        _prunable_table(c)
    env.server.restart()  # blocks 0 and 1 leave the pool: se2's next scan reads in place

    with env.server.connect() as c:
        deferred = 0
        for what, sql, count, settings, nodes, passes in TABLE_SCANS:
            _set(c, settings)
            for node in nodes:
                _plan(c, sql, node)
            before = counters.read_counters(c, own=True)
            got = c.execute(sql).fetchone()
            d = counters.delta(before, counters.read_counters(c, own=True))
            if got != (count,):
                raise CheckFailed(f"{env.engine}: {sql!r} returned {got}, expected {count}")
            # se2: both prunable blocks left as they are at every pass (a rescan keeps the
            # scan's flag); base/se1: never deferred
            want = (2 * passes, 0) if se2 else (0, 0)
            _expect(env, f"the {what}", d, DEFERRED_COPIES, want)
            deferred += d["prunes_deferred"]
            _check_blocks(c, env, se2, f"the {what}")

        # parallel_leader_participation = off: the workers build the bitmap and scan
        before = counters.read_counters(c, own=True)
        _parallel(c, True, PARALLEL_BITMAP_SQL, "Parallel Bitmap Heap Scan")
        d = counters.delta(before, counters.read_counters(c, own=True))
        _expect(env, "the parallel bitmap heap scan's leader", d, DEFERRED_COPIES, (0, 0))
        _check_blocks(c, env, se2, "a parallel bitmap heap scan (the workers')")

        for workers in (True, False):
            before = counters.read_counters(c, own=True)
            _parallel(c, workers)
            d = counters.delta(before, counters.read_counters(c, own=True))
            who = "workers'" if workers else "leader's"
            if not workers:  # the leader's own counters see its scan
                _expect(
                    env, f"the {who} parallel scan", d, DEFERRED_COPIES, (2, 0) if se2 else (0, 0)
                )
                deferred += d["prunes_deferred"]
            _check_blocks(c, env, se2, f"a parallel sequential scan (the {who})")

        # statements that change the table prune every scan of it (se2: copy first)
        for what, sql, nodes, settings, block in (
            (
                "found by TID through another scan of the table",
                BY_TID,
                ("Tid Range Scan", "Tid Scan on"),
                {**NO_INDEX, "enable_bitmapscan": "off", "enable_seqscan": "off"},
                0,
            ),
            (
                "found by its own sequential scan",
                f"UPDATE {PRUNE_TABLE} SET pad = pad WHERE id = 36 RETURNING ctid::text",
                ("Seq Scan",),
                SEQ_ONLY,
                1,
            ),
        ):
            _set(c, settings)
            for node in nodes:
                _plan(c, sql, node)
            before = counters.read_counters(c, own=True)
            upd = c.execute(sql).fetchone()
            d = counters.delta(before, counters.read_counters(c, own=True))
            if upd is None or nvmstats.block_of(upd[0]) != block:
                raise CheckFailed(
                    f"{env.engine}: an UPDATE {what} put its new version at {upd}: block "
                    f"{block} was not pruned before it (not HOT)"
                )
            _expect(env, f"the UPDATE {what}", d, DEFERRED_COPIES, (0, 1) if se2 else (0, 0))
        c.execute("RESET ALL")
        n = c.execute(f"SELECT count(*) FROM {PRUNE_TABLE}").fetchone()
        if n != (PRUNE_ROWS,):
            raise CheckFailed(f"{PRUNE_TABLE} has {n} rows, expected {PRUNE_ROWS}")
        c.execute(f"DROP TABLE {PRUNE_TABLE}")
    if se2:
        return (
            "scans: seq, bitmap, TID range, rescanned seq, parallel seq (workers, leader) "
            "and parallel bitmap heap (workers) scans left "
            f"blocks 0 and 1 redirected (prunes_deferred+{deferred}); UPDATEs finding rows "
            "by TID through another scan and by their own seq scan copied and pruned them (HOT)"
        )
    return "scans: the first seq scan pruned blocks 0 and 1; both UPDATEs are HOT"


#: part 5: a table whose row ABORTED_ID has an aborted update (patch 0031)
REWRITE_TABLE = "cow_rewrite_t"
ABORTED_ID = 1


@dataclass(frozen=True)
class Rewrite:
    """One rewrite of part 5: the command, the rows of 500 B the table gets, the rolled-back
    UPDATE's SET list, and whether its dead version lands on block 0 (the live version's)."""

    command: str
    what: str
    rows: int
    set_list: str
    same_block: bool


#: VACUUM FULL (a sequential scan): 100 rows fill block 0, the aborted version goes to the
#: last block. CLUSTER through the index (heap fetches): 10 rows leave block 0 with room,
#: so the update stays on it (HOT, or a new index entry when the key changes) and the
#: fetches' on-access prune, which would copy the block, finds nothing to do (free space
#: above a tenth of the page).
REWRITES = (
    Rewrite("VACUUM FULL", "VACUUM FULL", 100, "pad = pad", False),
    Rewrite("CLUSTER VERBOSE", "CLUSTER via the index, HOT update", 10, "pad = pad", True),
    Rewrite("CLUSTER VERBOSE", "CLUSTER via the index, key changed", 10, "id = 1001", True),
)


def rewrite(env: EngineEnv, se2: bool) -> str:
    """Part 5 (patch 0031): CLUSTER and VACUUM FULL keep a row whose update was rolled back.
    Their copy judges each tuple under SnapshotAny with HeapTupleSatisfiesVacuum() and takes
    a live tuple whose xmax lacks the ``HEAP_XMAX_INVALID`` hint that call sets for an
    updated one, forgetting it when it meets the aborted update's dead version; se2 never
    sets hint bits on a page read in place, so the row was lost: by VACUUM FULL's sequential
    scan before 0031 (found by 027_stream_regress: VACUUM FULL pg_class lost a row) and by
    CLUSTER's heap fetches through the index before 0031 covered them. Each rewrite of
    ``REWRITES`` runs twice: on the cold table (misses) and after a sequential scan that read
    it in place (se2: redirected hits, which the rewrite must copy); the row and the count
    must survive, in every engine."""
    rounds = []
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        messages: list[str] = []
        c.add_notice_handler(lambda d: messages.append(d.message_primary or ""))
        for rw in REWRITES:
            for warm in (False, True):
                what = f"{rw.what} ({'after a scan that read it' if warm else 'cold'})"
                _rewrite_round(c, env, se2, rw, warm, what, messages)
                rounds.append(what)
        c.execute(f"DROP TABLE {REWRITE_TABLE}")
    return f"rewrite: kept the row of a rolled-back UPDATE: {'; '.join(rounds)}"


def _rewrite_round(
    c: psycopg.Connection[Any],
    env: EngineEnv,
    se2: bool,
    rw: Rewrite,
    warm: bool,
    what: str,
    messages: list[str],
) -> None:
    t = REWRITE_TABLE
    c.execute(f"DROP TABLE IF EXISTS {t}")
    c.execute(
        f"CREATE TABLE {t} (id int, pad text) WITH (fillfactor = 100, autovacuum_enabled = off)"
    )
    c.execute(
        f"INSERT INTO {t} SELECT g, repeat('x', 500) FROM generate_series(1, %s) g", (rw.rows,)
    )
    c.execute(f"CREATE INDEX {t}_id ON {t} (id)")
    c.execute("BEGIN")
    moved = c.execute(
        f"UPDATE {t} SET {rw.set_list} WHERE id = %s RETURNING ctid::text", (ABORTED_ID,)
    ).fetchone()
    c.execute("ROLLBACK")
    if moved is None or (nvmstats.block_of(moved[0]) == 0) != rw.same_block:
        raise CheckFailed(
            f"premise ({what}): the rolled-back UPDATE put its version at {moved}, expected "
            f"{'on' if rw.same_block else 'after'} block 0 (the live version's)"
        )
    c.execute("CHECKPOINT")
    ev = c.execute(f"SELECT buffers_skipped FROM pg_buffercache_evict_relation('{t}')").fetchone()
    if ev != (0,) or nvmstats.relation_buffers(c, t):
        raise CheckFailed(f"premise ({what}): {t} could not be evicted (skipped: {ev})")
    if warm:
        _set(c, {})  # no parallel workers: the backend's own scan
        c.execute(f"SELECT count(*) FROM {t} WHERE length(pad) > 0")
        c.execute("RESET ALL")
        bufs = nvmstats.relation_buffers(c, t)
        if se2 and (not bufs or not all(b.redirected for b in bufs)):
            raise CheckFailed(
                f"premise ({what}): the scan left {t}'s blocks {bufs}, expected them redirected"
            )
    before = counters.read_counters(c, own=True)
    messages.clear()
    if rw.command == "VACUUM FULL":
        c.execute(f"VACUUM FULL {t}")
    else:
        _set(c, {"enable_sort": "off"})
        c.execute(f"{rw.command} {t} USING {t}_id")
        c.execute("RESET ALL")
        if not any("using index scan" in m for m in messages):
            raise CheckFailed(f"premise ({what}): CLUSTER did not use the index: {messages}")
    d = counters.delta(before, counters.read_counters(c, own=True))
    got = c.execute(
        f"SELECT count(*), count(*) FILTER (WHERE id = %s) FROM {t}", (ABORTED_ID,)
    ).fetchone()
    if got != (rw.rows, 1):
        raise CheckFailed(
            f"{env.engine}: {what} of a table whose row {ABORTED_ID} had a rolled-back UPDATE "
            f"left (rows, rows with id {ABORTED_ID}) = {got}, expected ({rw.rows}, 1): the live "
            "row was lost"
        )
    if se2 and warm and d["cow_copies"] < 1:
        raise CheckFailed(
            f"{env.engine}: {what} copied none of the redirected blocks it judged "
            f"(cow_copies +{d['cow_copies']})"
        )
