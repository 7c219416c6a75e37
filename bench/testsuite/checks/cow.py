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
3. on-access pruning by index fetches that only read (patch 0027), and
4. by sequential (also rescanned), bitmap heap, TID range and parallel sequential and
   bitmap heap scans that only read (patch 0029): :mod:`bench.testsuite.checks.cow_prune`;
5. VACUUM FULL and CLUSTER through an index keep a row whose UPDATE was rolled back, cold
   and after a scan that read the table in place (patch 0031: nothing under SnapshotAny
   reads in place);
6. an UPDATE, a DELETE and a ``SELECT ... FOR UPDATE`` that wait for a rolled-back updater
   of a row on a page read in place find the row (patch 0032):
   :mod:`bench.testsuite.checks.cow_wait`.
"""

from __future__ import annotations

from bench.core import counters
from bench.testsuite import nvmstats
from bench.testsuite.checks import cow_prune, cow_wait
from bench.testsuite.checks.cow_prune import INDEX_ONLY
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

TABLE = "cow_t"
ROWS = 3000
#: Dirty pages stay unwritten until the check's CHECKPOINT: no background writer, no
#: timed checkpoint, and no autovacuum worker whose clock sweep could evict and write one
#: (after regress and isolation they work through the regression database for minutes).
SETTINGS = {"bgwriter_lru_maxpages": "0", "checkpoint_timeout": "1d", "autovacuum": "off"}
MOVED = (1501, 1560)  # ids updated before the restart (their new versions: at the end)
#: (tuples with HEAP_XMIN_COMMITTED, normal tuples) of one block (pageinspect)
UNHINTED_SQL = (
    "SELECT count(*) FILTER (WHERE t_infomask & 256 <> 0), count(*) "
    "FROM heap_page_items(get_raw_page(%s, %s)) WHERE lp_flags = 1"
)


def cow(env: EngineEnv, limit: float) -> str:
    se2 = env.engine == "se2"
    with env.server.temporary(SETTINGS):
        env.server.restart()
        return "; ".join(
            (
                _cow(env, se2),
                cow_prune.prune(env, se2),
                cow_prune.scans(env, se2),
                cow_prune.rewrite(env, se2),
                cow_wait.waits(env, se2),
            )
        )


def _cow(env: EngineEnv, se2: bool) -> str:
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        c.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        got = {
            k: c.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
            for k in SETTINGS
        }
        if got != SETTINGS:
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
        new_block = max(nvmstats.block_of(r[0]) for r in moved)
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
        bufs = {b: nvmstats.relation_buffer(c, TABLE, b) for b in watched}

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
        if se2 and not nvmstats.relation_buffer(c, TABLE, 0).redirected:
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
        info = nvmstats.relation_buffer(c, TABLE, 0)
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
        if nvmstats.relation_buffer(c, TABLE, 0).dirty:
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
