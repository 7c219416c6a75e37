"""The ``redirect`` check's part 6: B-tree pages read by scans are read in place (patch 0024).

With nothing writing behind the check's back (``bgwriter_lru_maxpages=0``,
``checkpoint_timeout=1d``), a table of BT_ROWS rows whose primary key has gaps (ids 4, 8,
...) is VACUUMed and checkpointed, and the server restarted. Then, each step judged with
this backend's ``pgnvm_backend_counters()`` and ``pgnvm_buffers()``:

1. **redirect**: an index-only scan of every row (no heap fetch) misses the index's blocks;
   in se2 ``redirects`` grows by about those misses and none of the index's buffers is a
   copy (in the hybrid pool: the index holds no DRAM slot; reported with the pool's
   ``slots_in_use`` before and after); base and se1 redirect nothing.
2. **killed items** (``_bt_killitems()`` sets LP_DEAD bits under a share lock): a third of
   the rows deleted, the index evicted, then an index-only scan of the lower half (a scan
   that keeps its pin: the page is copied before the lock) and a plain index scan of the
   upper half (a scan that drops its pin and pins the page again: a pin that copies) visit
   the dead rows. The answers must be right, both halves of the index must carry LP_DEAD
   items afterwards (pageinspect), and in se2 the index's buffers that carry them are
   copies, dirty, whose blocks in the file are unchanged until a CHECKPOINT writes them
   (then they differ).
3. **insert and split**: after VACUUM, CHECKPOINT and the index's eviction, an index-only
   scan redirects every index page again; BT_ROWS / 2 inserts between the existing keys
   (ids 4g + 2) go into every leaf and split them. In se2 every redirected leaf is copied
   first (``cow_copies``), none of the old blocks changes in the file before a CHECKPOINT,
   the index grew (splits), and ``bt_index_parent_check(heapallindexed, rootdescend)`` is
   clean, with the same count and sum through the index as through a sequential scan.
4. **VACUUM that records deleted pages**: the lowest quarter of the keys deleted, the
   index checkpointed, evicted and its metapage read in place by a scan; ``VACUUM
   (INDEX_CLEANUP ON)`` deletes the empty leaves and ``_bt_set_cleanup_info()`` trades its
   share lock on the metapage for an exclusive one to record them: the server must
   survive, the metapage must say so (``bt_metap()``) and amcheck be clean.
5. **unique check** (``_bt_check_unique()`` sets LP_DEAD bits on pages *right of* the
   insertion target under a share lock): a unique index built while UNIQUE_DEAD deleted
   versions of key UNIQUE_KEY were still visible to an open snapshot holds them on several
   leaf pages; once they are dead to everyone and the index evicted, an INSERT of that key
   walks them. It must succeed; base and se1 kill the entries on the pages to the right,
   se2 skips those hints on pages read in place (``hints_skipped``), so those pages have
   no LP_DEAD item (the insertion then steps right over them with BT_WRITE, which copies
   them, but changes nothing).
6. **the first root**: an empty table's primary key, its metapage read in place by an
   index scan (no root: nothing else read), then the first INSERT, whose
   ``_bt_getroot()`` trades its share lock on the metapage for an exclusive one and
   writes the new root's number: the row must be found through the index and amcheck be
   clean.

base and se1 run the same steps: nothing redirected, the same answers and LP_DEAD items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from bench.core import counters
from bench.testsuite import nvmstats
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed
from bench.testsuite.plans import plan_node

TABLE = "redir_bt"
INDEX = "redir_bt_pkey"
BT_ROWS = 100_000  # ids 4, 8, ..., 4 * BT_ROWS: ~280 leaf pages (the tests' 16 MB pool)
STEP = 4
#: Dirty pages stay unwritten until the check's CHECKPOINT: no background writer, no
#: timed checkpoint, and no autovacuum worker whose clock sweep could evict and write one
#: (after regress and isolation they work through the regression database for minutes).
SETTINGS = {"bgwriter_lru_maxpages": "0", "checkpoint_timeout": "1d", "autovacuum": "off"}
SCAN = {
    "enable_seqscan": "off",
    "enable_bitmapscan": "off",
    "max_parallel_workers_per_gather": "0",
}
UNIQUE_TABLE = "redir_bu"
UNIQUE_INDEX = "redir_bu_v"
UNIQUE_KEY = 43  # the other keys are even
UNIQUE_DEAD = 5000  # deleted versions of UNIQUE_KEY: ~13 leaf pages of the unique index
#: LP_DEAD items per block of an index (pageinspect; blocks 1.. : 0 is the metapage)
DEAD_SQL = (
    "SELECT b, (SELECT count(*) FROM bt_page_items(%s, b) WHERE dead) "
    "FROM generate_series(1, pg_relation_size(%s::regclass) / 8192 - 1) b"
)


def _slack(n: int) -> int:
    return 8 + n // 100


def _set(c: psycopg.Connection[Any], settings: dict[str, str]) -> None:
    for k, v in settings.items():
        c.execute(f"SET {k} = '{v}'")


def _one(c: psycopg.Connection[Any], sql: str, params: tuple[Any, ...] = ()) -> Any:
    row = c.execute(sql, params).fetchone()
    assert row is not None
    return row[0] if len(row) == 1 else tuple(row)


def _dead_items(c: psycopg.Connection[Any], index: str) -> dict[int, int]:
    """{block: LP_DEAD items} of an index's pages (read through the buffer pool: a copy)."""
    return {int(b): int(n) for b, n in c.execute(DEAD_SQL, (index, index)).fetchall()}


def _blocks(path: Path) -> list[bytes]:
    data = path.read_bytes()
    return [data[i : i + nvmstats.BLCKSZ] for i in range(0, len(data), nvmstats.BLCKSZ)]


def _pool(env: EngineEnv, c: psycopg.Connection[Any]) -> dict[str, int] | None:
    return nvmstats.read_pool(c) if env.config.hybrid_pool else None


def btree_in_place(env: EngineEnv) -> str:
    with env.server.temporary(SETTINGS):
        env.server.restart()
        return _btree(env)


def _btree(env: EngineEnv) -> str:
    se2 = env.engine == "se2"
    notes = []
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        for ext in ("pageinspect", "amcheck", "pg_buffercache"):
            c.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}")
        got = {k: _one(c, f"SHOW {k}") for k in SETTINGS}
        if got != SETTINGS:
            raise CheckFailed(f"btree: the part's settings are not in effect: {got}")
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(
            f"CREATE TABLE {TABLE} (id int PRIMARY KEY, k int NOT NULL) "
            "WITH (autovacuum_enabled = off)"
        )
        c.execute(
            f"INSERT INTO {TABLE} SELECT g * {STEP}, g FROM generate_series(1, %s) g",
            (BT_ROWS,),
        )
        c.execute(f"VACUUM (ANALYZE) {TABLE}")
        c.execute("CHECKPOINT")
        path = env.server.cluster.datadir / _one(c, f"SELECT pg_relation_filepath('{INDEX}')")
    env.server.restart()  # cold buffers

    with env.server.connect() as c:
        _set(c, SCAN)
        notes.append(_scan_redirects(env, c, se2))
        notes.append(_killed_items(c, se2, path))
        notes.append(_insert_split(c, se2, path))
        notes.append(_vacuum_deleted_pages(env, c, se2))
        c.execute(f"DROP TABLE {TABLE}")
        notes.append(_unique_check(env, c, se2))
        notes.append(_first_root(env, c, se2))
    return "btree: " + "; ".join(notes)


def _index_only_scan(c: psycopg.Connection[Any], where: str) -> tuple[int, int, int]:
    """(rows, blocks read, heap fetches) of an index-only scan of TABLE."""
    plan = _one(
        c,
        "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "
        f"SELECT count(*), sum(id) FROM {TABLE} WHERE {where}",
    )
    node = plan_node(plan, "Index Only Scan")
    return (
        int(float(node["Actual Rows"])),
        int(node["Shared Read Blocks"]),
        int(node.get("Heap Fetches", 0)),
    )


def _scan_redirects(env: EngineEnv, c: psycopg.Connection[Any], se2: bool) -> str:
    """Step 1: an index-only scan on a fresh server redirects the index's pages."""
    pool_before = _pool(env, c)
    before = counters.read_counters(c, own=True)
    rows, misses, fetches = _index_only_scan(c, "id > 0")
    d = counters.delta(before, counters.read_counters(c, own=True))
    pool_after = _pool(env, c)
    if rows != BT_ROWS or fetches != 0:
        raise CheckFailed(
            f"btree: the index-only scan returned {rows} rows (expected {BT_ROWS}) with "
            f"{fetches} heap fetches (expected 0 after VACUUM)"
        )
    bufs = nvmstats.relation_buffers(c, INDEX)
    redirected = sum(b.redirected for b in bufs)
    copied = len(bufs) - redirected
    dram = ""
    if pool_before is not None and pool_after is not None:
        dram = f", pool slots_in_use {pool_before['slots_in_use']} -> {pool_after['slots_in_use']}"
    what = (
        f"index-only scan of {rows} rows: {misses} index blocks read, "
        f"{redirected} of the index's {len(bufs)} buffers redirected, {copied} copies "
        f"(DRAM slots){dram}; {counters.fmt(d, ('redirects', 'cow_copies', 'mapped_reads'))}"
    )
    if misses < 100:
        raise CheckFailed(f"btree: the scan read only {misses} blocks from storage: {what}")
    if se2:
        if d["redirects"] < misses - _slack(misses) or copied != 0:
            raise CheckFailed(
                f"btree: in se2 the index's pages read by a scan must be redirected, none "
                f"copied: {what}"
            )
    elif d["redirects"] != 0 or redirected != 0:
        raise CheckFailed(f"btree: {env.engine} must never redirect: {what}")
    return what


def _killed_items(c: psycopg.Connection[Any], se2: bool, path: Path) -> str:
    """Step 2: scans that kill index items of pages read in place."""
    c.execute(f"DELETE FROM {TABLE} WHERE id % {3 * STEP} = 0")
    c.execute("CHECKPOINT")
    c.execute(f"SELECT pg_buffercache_evict_relation('{INDEX}')")
    on_disk = _blocks(path)
    half = STEP * BT_ROWS // 2
    live = [g for g in range(1, BT_ROWS + 1) if g % 3 != 0]
    want_low = (
        sum(1 for g in live if g * STEP <= half),
        sum(g * STEP for g in live if g * STEP <= half),
    )
    want_high = (
        sum(1 for g in live if g * STEP > half),
        sum(g for g in live if g * STEP > half),
    )
    low_sql = f"SELECT count(*), sum(id) FROM {TABLE} WHERE id <= {half}"
    high_sql = f"SELECT count(*), sum(k) FROM {TABLE} WHERE id > {half}"
    # bitmap index scans, which kill nothing, read the index's pages first: in se2
    # in place, so that the killing scans below find them redirected
    c.execute("SET enable_indexscan = off")
    c.execute("SET enable_indexonlyscan = off")
    c.execute("SET enable_bitmapscan = on")
    plan_node(_one(c, f"EXPLAIN (FORMAT JSON) {low_sql}"), "Bitmap Index Scan")
    _one(c, low_sql)
    _one(c, high_sql)
    c.execute("RESET enable_indexscan")
    c.execute("RESET enable_indexonlyscan")
    c.execute("RESET enable_bitmapscan")
    in_place = {b.block for b in nvmstats.relation_buffers(c, INDEX) if b.redirected}
    before = counters.read_counters(c, own=True)
    # an index-only scan keeps its pin on the page (so->dropPin false) ...
    plan_node(_one(c, f"EXPLAIN (FORMAT JSON) {low_sql}"), "Index Only Scan")
    low = _one(c, low_sql)
    # ... a plain index scan drops it, and pins the page again to kill items
    c.execute("SET enable_indexonlyscan = off")
    plan_node(_one(c, f"EXPLAIN (FORMAT JSON) {high_sql}"), "Index Scan")
    high = _one(c, high_sql)
    c.execute("RESET enable_indexonlyscan")
    d = counters.delta(before, counters.read_counters(c, own=True))
    if (low, high) != (want_low, want_high):
        raise CheckFailed(
            f"btree: index scans over deleted rows returned {low} and {high}, expected "
            f"{want_low} and {want_high}"
        )
    bufs = {b.block: b for b in nvmstats.relation_buffers(c, INDEX)}
    unchanged = _blocks(path)[: len(on_disk)] == on_disk
    dead = _dead_items(c, INDEX)
    mid = len(dead) // 2
    dead_low = sum(n for b, n in dead.items() if b <= mid)
    dead_high = sum(n for b, n in dead.items() if b > mid)
    killed = [b for b, n in dead.items() if n > 0]
    what = (
        f"scans over {BT_ROWS // 3} deleted rows: right answers, LP_DEAD items "
        f"{dead_low} (index-only scan's half) + {dead_high} (index scan's half) on "
        f"{len(killed)} pages; {counters.fmt(d, ('redirects', 'cow_copies'))}"
    )
    if dead_low == 0 or dead_high == 0:
        raise CheckFailed(f"btree: a scan over dead rows killed no index item: {what}")
    if not unchanged:
        raise CheckFailed(f"btree: the index's file changed before any write-back: {what}")
    if se2:
        missed = [b for b in killed if b not in in_place]
        if missed:
            raise CheckFailed(
                f"btree: se2: pages with killed items must have been read in place "
                f"before the killing scans (so that _bt_killitems() had to copy them), "
                f"yet blocks {missed[:10]} were not ({len(in_place)} read in place): {what}"
            )
        bad = [b for b in killed if b not in bufs or bufs[b].redirected or not bufs[b].dirty]
        if bad:
            raise CheckFailed(
                f"btree: se2: pages with killed items must be dirty copies, yet blocks "
                f"{bad[:10]} are not ({[bufs.get(b) for b in bad[:3]]}): {what}"
            )
    c.execute("CHECKPOINT")
    after = _blocks(path)
    written = [b for b in killed if after[b] != on_disk[b]]
    if len(written) != len(killed):
        raise CheckFailed(
            f"btree: the CHECKPOINT wrote only {len(written)} of the {len(killed)} pages "
            f"with killed items: {what}"
        )
    return what + ", file unchanged until the CHECKPOINT wrote them"


def _insert_split(c: psycopg.Connection[Any], se2: bool, path: Path) -> str:
    """Step 3: inserts and splits into an index read in place."""
    c.execute(f"VACUUM {TABLE}")
    c.execute("CHECKPOINT")
    c.execute(f"SELECT pg_buffercache_evict_relation('{INDEX}')")
    _index_only_scan(c, "id > 0")  # redirects every page of the index again
    bufs = nvmstats.relation_buffers(c, INDEX)
    redirected = sum(b.redirected for b in bufs)
    if se2 and redirected < len(bufs) - _slack(len(bufs)):
        raise CheckFailed(
            f"btree: after VACUUM and eviction only {redirected} of {len(bufs)} index "
            "buffers were redirected by the scan"
        )
    pages = _one(c, f"SELECT pg_relation_size('{INDEX}') / 8192")
    on_disk = _blocks(path)
    before = counters.read_counters(c, own=True)
    c.execute(
        f"INSERT INTO {TABLE} SELECT g * {STEP} + 2, -g FROM generate_series(1, %s, 2) g",
        (BT_ROWS,),
    )
    d = counters.delta(before, counters.read_counters(c, own=True))
    grown = _one(c, f"SELECT pg_relation_size('{INDEX}') / 8192") - pages
    old_blocks = _blocks(path)[:pages]
    copies = sum(not b.redirected for b in nvmstats.relation_buffers(c, INDEX))
    what = (
        f"{BT_ROWS // 2} inserts into {pages} index pages ({redirected} redirected): "
        f"{grown} new pages (splits), {copies} index buffers now copies; "
        f"{counters.fmt(d, ('cow_copies', 'redirects'))}"
    )
    if grown <= 0:
        raise CheckFailed(f"btree: the inserts split no page: {what}")
    if se2 and d["cow_copies"] < redirected - _slack(redirected) - 4:
        raise CheckFailed(
            f"btree: se2: inserts into every leaf of an index read in place must copy "
            f"them first: {what}"
        )
    if old_blocks != on_disk:
        changed = [i for i, b in enumerate(old_blocks) if b != on_disk[i]]
        raise CheckFailed(
            f"btree: blocks {changed[:10]} of the index changed in the file before any "
            f"write-back: {what}"
        )
    c.execute("CHECKPOINT")
    if _blocks(path)[:pages] == on_disk:
        raise CheckFailed(f"btree: the CHECKPOINT wrote none of the changed pages: {what}")
    c.execute(f"SELECT bt_index_parent_check('{INDEX}', true, true)")
    by_index = _one(
        c, f"SELECT count(*), sum(id::bigint), sum(k::bigint) FROM {TABLE} WHERE id > 0"
    )
    c.execute("SET enable_seqscan = on")
    c.execute("SET enable_indexscan = off")
    c.execute("SET enable_indexonlyscan = off")
    by_seq = _one(c, f"SELECT count(*), sum(id::bigint), sum(k::bigint) FROM {TABLE}")
    _set(c, {"enable_seqscan": "off", "enable_indexscan": "on", "enable_indexonlyscan": "on"})
    if by_index != by_seq:
        raise CheckFailed(f"btree: through the index {by_index}, by a seq scan {by_seq}")
    return what + ", file unchanged until the CHECKPOINT; bt_index_parent_check clean"


def _metapage_in_place(
    env: EngineEnv, c: psycopg.Connection[Any], se2: bool, table: str, index: str
) -> None:
    """Checkpoint, evict ``index`` and read its metapage from a new session (whose
    relcache has no copy of it, ``rd_amcache``), by planning an index scan of ``table``
    (``_bt_getrootheight()``) and running it (``_bt_getroot(BT_READ)``); in se2 the
    metapage's buffer must then be redirected."""
    c.execute("CHECKPOINT")
    c.execute(f"SELECT pg_buffercache_evict_relation('{index}')")
    with env.server.connect() as fresh:
        _set(fresh, SCAN)
        fresh.execute(f"SELECT count(*) FROM {table} WHERE id = 1")
    meta = [b for b in nvmstats.relation_buffers(c, index) if b.block == 0]
    if se2 and not (meta and meta[0].redirected):
        raise CheckFailed(f"btree: the metapage of {index} was not read in place: {meta}")


def _vacuum_deleted_pages(env: EngineEnv, c: psycopg.Connection[Any], se2: bool) -> str:
    """Step 4: _bt_set_cleanup_info()'s lock upgrade on a metapage read in place."""
    c.execute(f"DELETE FROM {TABLE} WHERE id <= %s", (STEP * BT_ROWS // 4,))
    _metapage_in_place(env, c, se2, TABLE, INDEX)
    c.execute(f"VACUUM (INDEX_CLEANUP ON) {TABLE}")
    deleted = _one(c, f"SELECT last_cleanup_num_delpages FROM bt_metap('{INDEX}')")
    meta = [b for b in nvmstats.relation_buffers(c, INDEX) if b.block == 0]
    what = (
        f"VACUUM of a quarter of the keys: {deleted} deleted pages recorded in the metapage "
        f"(buffer {meta[0] if meta else 'gone'})"
    )
    if deleted <= 0:
        raise CheckFailed(f"btree: VACUUM recorded no deleted page in the metapage: {what}")
    c.execute(f"SELECT bt_index_parent_check('{INDEX}', true, true)")
    return what + ", amcheck clean"


def _first_root(env: EngineEnv, c: psycopg.Connection[Any], se2: bool) -> str:
    """Step 6: _bt_getroot()'s lock upgrade on a metapage read in place."""
    table, index = "redir_be", "redir_be_pkey"
    c.execute(f"DROP TABLE IF EXISTS {table}")
    c.execute(f"CREATE TABLE {table} (id int PRIMARY KEY) WITH (autovacuum_enabled = off)")
    _metapage_in_place(env, c, se2, table, index)
    before = counters.read_counters(c, own=True)
    c.execute(f"INSERT INTO {table} VALUES (1)")
    d = counters.delta(before, counters.read_counters(c, own=True))
    root = _one(c, f"SELECT root FROM bt_metap('{index}')")
    found = _one(c, f"SELECT count(*) FROM {table} WHERE id = 1")
    what = (
        f"first INSERT into an empty index (metapage read in place): root {root}, "
        f"found {found}; {counters.fmt(d, ('cow_copies',))}"
    )
    if root <= 0 or found != 1:
        raise CheckFailed(f"btree: {what}")
    if se2 and d["cow_copies"] <= 0:
        raise CheckFailed(f"btree: se2: the metapage read in place was not copied: {what}")
    c.execute(f"SELECT bt_index_parent_check('{index}', true, true)")
    c.execute(f"DROP TABLE {table}")
    return what + ", amcheck clean"


def _unique_check(env: EngineEnv, c: psycopg.Connection[Any], se2: bool) -> str:
    """Step 5: _bt_check_unique()'s hints on pages right of the target, read in place."""
    c.execute(f"DROP TABLE IF EXISTS {UNIQUE_TABLE}")
    c.execute(f"CREATE TABLE {UNIQUE_TABLE} (v int NOT NULL) WITH (autovacuum_enabled = off)")
    c.execute(f"INSERT INTO {UNIQUE_TABLE} SELECT 2 * g FROM generate_series(1, 4000) g")
    with env.server.connect() as h:
        h.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        h.execute(f"SELECT count(*) FROM {UNIQUE_TABLE}")  # its snapshot keeps them
        c.execute(
            f"INSERT INTO {UNIQUE_TABLE} SELECT {UNIQUE_KEY} FROM generate_series(1, %s)",
            (UNIQUE_DEAD,),
        )
        c.execute(f"DELETE FROM {UNIQUE_TABLE} WHERE v = {UNIQUE_KEY}")
        # recently dead: indexed, not checked for uniqueness
        c.execute(f"CREATE UNIQUE INDEX {UNIQUE_INDEX} ON {UNIQUE_TABLE} (v)")
        h.execute("ROLLBACK")
    key_pages = [
        int(b)
        for (b,) in c.execute(
            "SELECT b FROM generate_series(1, pg_relation_size(%s::regclass) / 8192 - 1) b "
            "WHERE (SELECT type FROM bt_page_stats(%s, b)) = 'l' "
            "AND EXISTS (SELECT 1 FROM bt_page_items(%s, b) WHERE data = %s AND itemoffset > 1)",
            (UNIQUE_INDEX, UNIQUE_INDEX, UNIQUE_INDEX, _key_data(UNIQUE_KEY)),
        ).fetchall()
    ]
    if len(key_pages) < 3:
        raise CheckFailed(
            f"btree: the {UNIQUE_DEAD} dead versions of key {UNIQUE_KEY} lie on pages "
            f"{key_pages}, expected several"
        )
    c.execute("CHECKPOINT")
    c.execute(f"SELECT pg_buffercache_evict_relation('{UNIQUE_INDEX}')")
    before = counters.read_counters(c, own=True)
    c.execute(f"INSERT INTO {UNIQUE_TABLE} VALUES ({UNIQUE_KEY})")
    d = counters.delta(before, counters.read_counters(c, own=True))
    right = key_pages[1:]
    dead = _dead_items(c, UNIQUE_INDEX)
    dead_right = sum(dead.get(b, 0) for b in right)
    dead_first = dead.get(key_pages[0], 0)
    n = _one(c, f"SELECT count(*) FROM {UNIQUE_TABLE} WHERE v = {UNIQUE_KEY}")
    what = (
        f"INSERT of a key with {UNIQUE_DEAD} dead entries on pages {key_pages}: LP_DEAD "
        f"items on the first page {dead_first}, on the pages right of it {dead_right}; "
        f"{counters.fmt(d, ('hints_skipped', 'cow_copies'))}"
    )
    if n != 1:
        raise CheckFailed(f"btree: {n} rows with v = {UNIQUE_KEY} after the INSERT: {what}")
    if se2:
        if dead_right != 0 or d["hints_skipped"] <= 0 or dead_first == 0:
            raise CheckFailed(
                f"btree: se2 must skip the hints on pages read in place (none killed, "
                f"hints_skipped > 0) and set them on the target page it copied: {what}"
            )
    elif dead_right == 0:
        raise CheckFailed(
            f"btree: {env.engine}: the unique check killed no entry right of the target "
            f"(the premise of this step): {what}"
        )
    c.execute(f"SELECT bt_index_check('{UNIQUE_INDEX}', true)")
    c.execute(f"DROP TABLE {UNIQUE_TABLE}")
    return what


def _key_data(v: int) -> str:
    """bt_page_items()'s ``data`` of an int4 key: its 8 bytes in hex, little-endian."""
    return " ".join(f"{x:02x}" for x in v.to_bytes(4, "little") + bytes(4))
