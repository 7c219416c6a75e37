"""cow: in se2 a change to a redirected page is made in a copy; the file changes only when
the dirty buffer is written back, and hint bits are never written into the file.

With nothing writing behind the check's back (``bgwriter_lru_maxpages=0``,
``checkpoint_timeout=1d``, autovacuum off for the table), a ~400 kB table (small enough that
a scan keeps all of it in shared buffers) gets 3000 committed rows, then an UPDATE (through
the index, so no other block is visited) gives 60 rows from the middle new versions at the
end of the table. No tuple of block 0 or of the new versions' block has its hint bits yet
(checked with pageinspect). After a restart (cold buffers) and one sequential scan:

1. hint bits: se2 skips them on the redirected pages (``hints_skipped`` grows), so block 0
   and the block holding the updated rows' new versions stay clean and redirected, and after
   a CHECKPOINT their bytes in the file are unchanged. base and se1 set the hints (no
   skipped hint counted), the buffers are dirty and the CHECKPOINT writes them: the file
   changes, which proves the comparison can see a write.
2. copy-on-write: ``UPDATE ... WHERE ctid = '(0,1)'``. se2 copies block 0 into its slot
   (``cow_copies`` grows); the buffer is no longer redirected and is dirty, and the file's
   block 0 is byte-for-byte what it was; base and se1 never copy (``cow_copies`` stays 0).
   After a CHECKPOINT the file's block 0 differs (the change was written back) and the new
   row version is what every scan sees.
3. on-access pruning (patch 0027): a second table's full block 0 holds a dead row version
   (an UPDATE moved it away: the page had no room for it) and is prunable. After a restart
   two SELECTs of other rows of block 0 fetch it, an index-only scan's (the page is not
   all-visible) and a plain index scan's (plans checked): base and se1 prune it at the
   first (the buffer is dirty); se2 reads it in place and both leave it as it is,
   redirected and clean, no copy, ``prunes_deferred`` +2 (a read does not copy a page just
   to prune it). Then an UPDATE of a row of block 0 through the index: in se2 its own fetch
   copies and prunes the page; in every engine the new version fits in block 0 (a HOT
   update), which it could not without the prune. Then a cursor's ``SELECT ... FOR UPDATE``
   through the index reads a row of a second full, prunable block 1 and ``UPDATE ... WHERE
   CURRENT OF`` changes it: the locking read prunes in every engine (se2: one copy, no
   deferral), so the update, whose TID fetch never prunes, is HOT. Counters of the check's
   backend only.
"""

from __future__ import annotations

from typing import Any

import psycopg

from bench.core import counters
from bench.testsuite import nvmstats
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

TABLE = "cow_t"
ROWS = 3000
SETTINGS = {"bgwriter_lru_maxpages": "0", "checkpoint_timeout": "1d"}
MOVED = (1501, 1560)  # ids updated before the restart (their new versions: at the end)
INDEX_ONLY = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_tidscan": "off"}
#: (tuples with HEAP_XMIN_COMMITTED, normal tuples) of one block (pageinspect)
UNHINTED_SQL = (
    "SELECT count(*) FILTER (WHERE t_infomask & 256 <> 0), count(*) "
    "FROM heap_page_items(get_raw_page(%s, %s)) WHERE lp_flags = 1"
)


def _block_of(ctid: str) -> int:
    """'(12,3)' -> 12"""
    return int(ctid.strip("()").split(",")[0])


def _buffer(c: psycopg.Connection[Any], block: int, table: str = TABLE) -> nvmstats.BufInfo:
    for b in nvmstats.relation_buffers(c, table):
        if b.block == block:
            return b
    raise CheckFailed(f"block {block} of {table} is not in shared buffers")


def cow(env: EngineEnv, limit: float) -> str:
    se2 = env.engine == "se2"
    with env.server.temporary(SETTINGS):
        env.server.restart()
        return _cow(env, se2) + "; " + _prune(env, se2)


def _cow(env: EngineEnv, se2: bool) -> str:
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        c.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        got = {
            k: c.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
            for k in SETTINGS
        }
        if got != {"bgwriter_lru_maxpages": "0", "checkpoint_timeout": "1d"}:
            raise CheckFailed(f"the check's settings are not in effect: {got}")
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(
            f"CREATE TABLE {TABLE} (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL) "
            "WITH (autovacuum_enabled = off)"
        )
        c.execute(
            f"INSERT INTO {TABLE} SELECT g, g, repeat(md5(g::text), 3) "
            "FROM generate_series(1, %s) g",
            (ROWS,),
        )
        # new versions of rows in the middle of the table go to its end; through the index,
        # so that no other block is visited (a visit would set hint bits)
        for k, v in INDEX_ONLY.items():
            c.execute(f"SET {k} = '{v}'")
        moved = c.execute(
            f"UPDATE {TABLE} SET v = v + 1 WHERE id BETWEEN %s AND %s RETURNING ctid::text",
            MOVED,
        ).fetchall()
        c.execute("RESET ALL")
        if len(moved) != MOVED[1] - MOVED[0] + 1:
            raise CheckFailed(f"the UPDATE of ids {MOVED} returned {moved}")
        new_block = max(_block_of(r[0]) for r in moved)
        nblocks = c.execute(f"SELECT pg_relation_size('{TABLE}') / 8192").fetchone()[0]  # type: ignore[index]
        if new_block < nblocks - 2:
            raise CheckFailed(f"the updated rows went to block {new_block} of {nblocks}")
        # the premise: no tuple of the watched blocks has its hint bits yet
        for b in (0, new_block):
            hinted = c.execute(UNHINTED_SQL, (TABLE, b)).fetchone()
            if hinted is None or hinted[0] != 0 or hinted[1] == 0:
                raise CheckFailed(f"block {b}: (hinted, tuples) = {hinted} before the restart")
        relpath = c.execute(f"SELECT pg_relation_filepath('{TABLE}')").fetchone()[0]  # type: ignore[index]
    path = env.server.cluster.datadir / relpath
    env.server.restart()  # shutdown checkpoint writes everything; cold buffers

    watched = (0, new_block)
    notes = [f"{nblocks} blocks; {len(moved)} rows moved to block {new_block}"]
    with env.server.connect() as c:
        on_disk = {b: nvmstats.block_bytes(path, b) for b in watched}
        c.execute("SET max_parallel_workers_per_gather = 0")
        before = counters.read_counters(c)
        n = c.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]  # type: ignore[index]
        d = counters.delta(before, counters.read_counters(c))
        if n != ROWS:
            raise CheckFailed(f"the scan counted {n} rows, expected {ROWS}")
        bufs = {b: _buffer(c, b) for b in watched}

        # 1. hint bits
        if se2:
            if d["hints_skipped"] <= 0:
                raise CheckFailed(
                    f"se2: a scan of {ROWS} unhinted tuples skipped no hint bit ({counters.fmt(d)})"
                )
            for b, info in bufs.items():
                if not info.redirected or info.dirty:
                    raise CheckFailed(
                        f"se2: after the scan, block {b} should be redirected and clean: {info}"
                    )
        else:
            if d["hints_skipped"] != 0 or d["redirects"] != 0:
                raise CheckFailed(f"{env.engine} skipped hints / redirected: {counters.fmt(d)}")
            for b, info in bufs.items():
                if info.redirected or not info.dirty:
                    raise CheckFailed(
                        f"{env.engine}: after the scan set hint bits, block {b} should be "
                        f"dirty and not redirected: {info}"
                    )
        c.execute("CHECKPOINT")
        changed = [b for b in watched if nvmstats.block_bytes(path, b) != on_disk[b]]
        if se2 and changed:
            raise CheckFailed(
                f"se2: blocks {changed} changed in the file after the scan and a CHECKPOINT, "
                "though nothing modified them (hint bits written through?)"
            )
        if not se2 and changed != list(watched):
            raise CheckFailed(
                f"{env.engine}: the CHECKPOINT after the scan wrote the hint bits of blocks "
                f"{changed} only, expected {list(watched)}: the check cannot see writes"
            )
        notes.append(
            f"scan: hints_skipped+{d['hints_skipped']}, blocks {list(watched)} "
            + ("redirected, file unchanged after CHECKPOINT" if se2 else "hinted and written")
        )

        # 2. copy-on-write of block 0
        if se2 and not _buffer(c, 0).redirected:
            raise CheckFailed("se2: block 0 is no longer redirected after the CHECKPOINT")
        block0 = nvmstats.block_bytes(path, 0)
        before = counters.read_counters(c)
        upd = c.execute(
            f"UPDATE {TABLE} SET v = -v WHERE ctid = '(0,1)' RETURNING id, v, ctid::text"
        ).fetchall()
        d = counters.delta(before, counters.read_counters(c))
        if len(upd) != 1:
            raise CheckFailed(f"UPDATE of (0,1) returned {upd}")
        row_id, new_v, new_ctid = upd[0]
        info = _buffer(c, 0)
        if se2:
            if d["cow_copies"] < 1:
                raise CheckFailed(
                    f"se2: the UPDATE of a redirected block made no copy ({counters.fmt(d)})"
                )
        elif d["cow_copies"] != 0:
            raise CheckFailed(f"{env.engine}: cow_copies grew ({counters.fmt(d)})")
        if info.redirected or not info.dirty:
            raise CheckFailed(f"after the UPDATE block 0 should be dirty, not redirected: {info}")
        if nvmstats.block_bytes(path, 0) != block0:
            raise CheckFailed("the file's block 0 changed before any write-back of the buffer")
        c.execute("CHECKPOINT")
        if nvmstats.block_bytes(path, 0) == block0:
            raise CheckFailed("the CHECKPOINT did not write the dirty block 0 to the file")
        if _buffer(c, 0).dirty:
            raise CheckFailed("block 0 is still dirty after the CHECKPOINT")
        seen = c.execute(f"SELECT v, ctid::text FROM {TABLE} WHERE id = %s", (row_id,)).fetchall()
        if seen != [(new_v, new_ctid)]:
            raise CheckFailed(f"row {row_id}: expected {(new_v, new_ctid)}, a scan sees {seen}")
        total = c.execute(f"SELECT count(*), sum(v) FROM {TABLE}").fetchone()
        expect_sum = ROWS * (ROWS + 1) // 2 + len(moved) - 2 * 1  # id 1: v 1 -> -1
        if total != (ROWS, expect_sum):
            raise CheckFailed(f"count/sum(v) {total}, expected {(ROWS, expect_sum)}")
        notes.append(
            f"UPDATE (0,1): cow_copies+{d['cow_copies']}, block 0 dirty"
            + (" (was redirected)" if se2 else "")
            + ", file unchanged until the CHECKPOINT wrote it; new version visible"
        )
        c.execute(f"DROP TABLE {TABLE}")
    return "; ".join(notes)


PRUNE_TABLE = "cow_prune_t"
PRUNE_ROWS = 200
#: (pd_prune_xid, free bytes) of one block (pageinspect)
PAGE_HEADER_SQL = (
    "SELECT prune_xid::text::bigint, upper - lower FROM page_header(get_raw_page(%s, %s))"
)


def _prune(env: EngineEnv, se2: bool) -> str:
    """Part 3 (see the module's docstring): read-only fetches (an index-only scan's and a
    plain index scan's) leave a page read in place unpruned; the UPDATE's own fetch prunes
    it. Counters of this backend only (autovacuum's work on catalogs is not in them)."""
    with env.server.connect() as c:
        c.execute(f"DROP TABLE IF EXISTS {PRUNE_TABLE}")
        c.execute(
            f"CREATE TABLE {PRUNE_TABLE} (id int PRIMARY KEY, pad text NOT NULL) "
            "WITH (autovacuum_enabled = off)"
        )
        c.execute(
            f"INSERT INTO {PRUNE_TABLE} SELECT g, repeat('p', 200) FROM generate_series(1, %s) g",
            (PRUNE_ROWS,),
        )
        for k, v in INDEX_ONLY.items():
            c.execute(f"SET {k} = '{v}'")
        # ids 2, 3 and 4 share block 0 with id 1, id 36 block 1 with id 35 (looked at
        # before any row version is dead: a fetch after the UPDATEs would prune on access)
        placed = c.execute(
            f"SELECT id, ctid::text FROM {PRUNE_TABLE} WHERE id IN (2, 3, 4, 36) ORDER BY id"
        ).fetchall()
        if [_block_of(t) for _, t in placed] != [0, 0, 0, 1]:
            raise CheckFailed(f"premise: ids 2, 3, 4 in block 0 and 36 in block 1: {placed}")
        # blocks 0 and 1 are full: the new versions of ids 1 and 35 go elsewhere, their old
        # ones are dead
        for row_id, block in ((1, 0), (35, 1)):
            moved = c.execute(
                f"UPDATE {PRUNE_TABLE} SET pad = pad WHERE id = %s RETURNING ctid::text",
                (row_id,),
            ).fetchone()
            if moved is None or _block_of(moved[0]) <= 1:
                raise CheckFailed(f"premise: the new version of id {row_id} is at {moved}")
            header = c.execute(PAGE_HEADER_SQL, (PRUNE_TABLE, block)).fetchone()
            lp_len = c.execute(
                "SELECT lp_len FROM heap_page_items(get_raw_page(%s, %s)) WHERE lp = 3",
                (PRUNE_TABLE, block),
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
                    f"premise: block {block} should be prunable and too full for another "
                    f"version: (prune_xid, free) = {header}, tuple length {lp_len}"
                )
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
            plan = "\n".join(r[0] for r in c.execute(f"EXPLAIN (COSTS OFF) {sql}").fetchall())
            if f"{node} using" not in plan or (node == "Index Scan" and "Only" in plan):
                raise CheckFailed(f"premise: {sql!r} should be an {node}: {plan}")
        c.execute(f"EXPLAIN UPDATE {PRUNE_TABLE} SET pad = pad WHERE id = 3")
        nvmstats.relation_buffers(c, PRUNE_TABLE)
        before = counters.read_counters(c, own=True)
        for sql in reads.values():
            if len(c.execute(sql).fetchall()) != 1:
                raise CheckFailed(f"{sql!r} did not return one row")
        block0 = _buffer(c, 0, PRUNE_TABLE)
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
        want = (2, 0) if se2 else (0, 0)
        if (d["prunes_deferred"], d["cow_copies"]) != want:
            raise CheckFailed(
                f"{env.engine}: (prunes_deferred, cow_copies) of the two SELECTs = "
                f"{(d['prunes_deferred'], d['cow_copies'])}, expected {want}"
            )

        before = counters.read_counters(c, own=True)
        upd = c.execute(
            f"UPDATE {PRUNE_TABLE} SET pad = pad WHERE id = 3 RETURNING ctid::text"
        ).fetchone()
        d = counters.delta(before, counters.read_counters(c, own=True))
        if upd is None or _block_of(upd[0]) != 0:
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
        if upd is None or _block_of(upd[0]) != 1:
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
