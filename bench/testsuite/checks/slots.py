"""slots: se2's hybrid pool (``nvm_buffer_descriptors``) keeps the DRAM slots of copied
pages within the budget under a write-heavy run, gives none to redirected buffers, and
loses none; base and se1 refuse the setting.

In a configuration with the hybrid pool (``nvm_se2_slots``: 16 MB of slots, 16x as many
descriptors), a table ~3x the slots is loaded and VACUUMed, then :data:`WRITERS` clients
update rows chosen at random (seeded; each writer its own rows; every batch touches
hundreds of pages, each first copied into a slot: copy-on-write under DRAM pressure),
interleaved with sequential scans (which redirect), while ``pgnvm_pool()`` (contrib/pgnvm
1.6) is read after every batch a writer finishes (counted, not timed). Every reading must show:

* ``slots_in_use`` and its peak at most ``slots`` (the budget);
* ``redirected_with_slot`` = 0: no redirected buffer holds a slot (H1; a copy-on-write in
  progress, which holds its destination, is not counted);
* ``slot_map_mismatches`` = 0: ``NvmSlotOwner`` agrees with ``NvmSlotOf``.

After the writers (nothing running): every slot is either held or free
(``slots_in_use + slots_free = slots``: none lost), the descriptors holding one are exactly
``slots_in_use``, the slot clock ran (``demotions`` grew: DRAM pressure made copies
redirected again) and more buffers were redirected at some reading than there are slots,
the background writer's pass ahead of the slot clock wrote dirty copies back
(``cleaner_writes`` grew, pgnvm 1.8: patch 0025, H5a; with the default
``bgwriter_lru_maxpages``), and the table's sum equals the number of updates made (no
update lost to a demotion or a write-back).
Then a ``CHECKPOINT`` must leave none of the table's buffers dirty (the writers left some):
``BufferSync()`` walks the slots' owners, not the descriptors (H8), and must still find every
dirty buffer.

Three probes run first, each on a fresh table or a restart:

* ``zeroed page not demoted``: a block of a checkpointed table is corrupted in the file
  behind the server (one byte flipped, as the ``checksum`` check does) and read with
  ``zero_damaged_pages = on``: the buffer holds a zeroed page, valid and clean, that is
  *not* the file's. An index scan of a table three times the slots, also with
  ``zero_damaged_pages = on`` (so its reads copy), makes the slot clock take every slot;
  it must evict that buffer, not demote it (a demoted buffer is read in place, unverified:
  the damaged bytes). Then a read with ``zero_damaged_pages = off`` must raise stock's
  ``invalid page in block`` (XX001), as base does once the buffer is evicted.
* ``bulk read from slots``: a cold sequential scan of a table of twice ``slots / 4``
  pages (under ``descriptors / 4``) uses a bulk-read ring, as stock does for a table over
  a quarter of ``shared_buffers``: the threshold is the slots (the DRAM), not the
  descriptors. The ring recycles what holds DRAM, not what is read in place (patch 0030):
  after the scan all the table's pages but ``BULK_SLACK`` are in buffers, every one
  redirected; after the same scan with ``zero_damaged_pages = on`` (whose reads never
  redirect: copied into slots) far fewer than its pages are. A cold scan of a table of
  half the descriptors keeps only a quarter of them (stock's bound on one scan), plus
  its ring (as many pages as the copied scan kept), then reuses redirected elements.
* ``sizing``: what follows ``shared_buffers`` follows the slots (H8), but the commit log.
  The server is restarted without the hybrid pool (``nvm_buffer_descriptors = 0``: se2 with
  the same ``shared_buffers``), then with :data:`SIZING_DESCRIPTORS` of descriptors (32,768,
  where stock's autotune of the SLRUs, 1/512 of ``NBuffers``, gives 64 buffers, not 16):
  every setting in ``pg_settings`` must be the same in both (``subtransaction_buffers``,
  ``commit_timestamp_buffers``, ``wal_buffers``, ``io_max_concurrency`` are autotuned from
  it) but ``transaction_buffers``, which must be stock's autotune of the descriptors with
  the hybrid pool (64) and of the slots without it (16: patch 0028, the commit log serves
  the readers of redirected pages, whose hint bits are never set); and every allocation of
  ``pg_shmem_allocations`` the same size, but those of :data:`PER_DESCRIPTOR` (which must
  grow): "Checkpoint BufferIds", "Checkpointer Data", "XLOG Ctl", the other SLRUs, AIO's
  handles and "Buffer Blocks" among them. The detail gives the shared memory per added
  descriptor.

In base and se1 the server refuses to start with ``nvm_buffer_descriptors`` (H9), with a
FATAL naming the setting. se2 without the setting has nothing to check (skipped).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from bench.testsuite import nvmstats
from bench.testsuite.checks.checksum import BLCKSZ, flip_byte
from bench.testsuite.context import EngineEnv
from bench.testsuite.errmatch import DATA_CORRUPTED
from bench.testsuite.model import CheckFailed, CheckSkipped
from bench.testsuite.outcomes import describe, outcome

TABLE = "slots_t"
SIZE_FACTOR = 3  # table size / slots
ROW_PAD = 200  # ~40 rows per heap page
WRITERS = 2
BATCHES = 25  # per writer
ROWS_PER_BATCH = 150  # random rows: ~as many pages, each copied
REFUSED = '"nvm_buffer_descriptors" requires "nvm_storage_engine" = se2'
ZD_TABLE = "slots_zd"  # the table whose block ZD_BLOCK is corrupted
ZD_ROWS = 8_000  # ~130 blocks: under slots / 4, read without a ring
ZD_BLOCK = 7
PRESSURE = "slots_pressure"  # three times the slots: the slot clock takes every slot
#: descriptors for the sizing probe: 32,768 (with 16 MB of slots, 2,048)
SIZING_DESCRIPTORS = "256MB"
#: the allocations that follow the descriptors (NBuffers), not the slots: the only ones
#: whose size may change with ``nvm_buffer_descriptors`` ("Shared Buffer Lookup Table" is
#: the mapping hash's header and directory, its entries are ``<anonymous>``)
PER_DESCRIPTOR = (
    "Buffer Descriptors",
    "Buffer IO Condition Variables",
    "Shared Buffer Lookup Table",
    "<anonymous>",
    "pgnvm buffer flags",
    "pgnvm slot maps",
    "transaction",  # the commit log's buffers (patch 0028), and its bank locks and LSNs
)
#: of those, the ones that are NBuffers entries: they must grow (the restart took effect)
GROWS = (
    "Buffer Descriptors",
    "Buffer IO Condition Variables",
    "pgnvm buffer flags",
    "transaction",
)
#: allocations of the hybrid pool only (4 B per slot)
HYBRID_ONLY = ("pgnvm slot free list",)
#: settings that may differ between the two pools
SIZING_SETTINGS = (
    "nvm_buffer_descriptors",
    "shared_memory_size",
    "shared_memory_size_in_huge_pages",
    "transaction_buffers",  # checked on its own: _clog_autotune()
)


def _clog_autotune(buffers: int) -> int:
    """Stock's autotuned ``transaction_buffers`` for a pool of ``buffers`` pages
    (SimpleLruAutotuneBuffers(512, 1024): banks of 16)."""
    return min(1024, max(16, buffers // 512 - (buffers // 512) % 16))


BULK = "slots_bulk"  # 2 x slots / 4 pages: bulk read by the slots' threshold
BULK_SLACK = 8  # pages of it a cold scan may leave out of the pool
#: the bounded case's table exceeds a quarter of the descriptors by at least this much
BULK_BOUND_SLACK = 1024
#: a sequential scan from block 0 (not an index-only scan of the frozen table)
NO_PAR = (
    "SET max_parallel_workers_per_gather = 0",
    "SET synchronize_seqscans = off",
    "SET enable_indexscan = off",
    "SET enable_indexonlyscan = off",
    "SET enable_bitmapscan = off",
)


def at_rest(p: dict[str, int]) -> list[str]:
    """What a reading with nothing running must show: every slot held or free."""
    bad = nvmstats.pool_violations(p)
    if p["slots_in_use"] + p["slots_free"] != p["slots"]:
        bad.append(
            f"slots lost: {p['slots_in_use']} in use + {p['slots_free']} free != {p['slots']} slots"
        )
    if p["slots_held"] != p["slots_in_use"]:
        bad.append(f"{p['slots_held']} descriptors hold a slot, {p['slots_in_use']} counted")
    return bad


@dataclass
class Load:
    """What the writers did and what the readings showed, shared with the threads."""

    updates: int = 0
    readings: int = 0
    max_redirected: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _writer(env: EngineEnv, w: int, rows: int, seed: str, load: Load) -> None:
    rng = random.Random(f"{seed}:{w}")
    try:
        with env.server.connect() as c, env.server.connect() as mon:
            for b in range(BATCHES):
                # rows of this writer only (id mod WRITERS): no lock waits, no deadlocks
                ids = [
                    w + 1 + WRITERS * i for i in rng.sample(range(rows // WRITERS), ROWS_PER_BATCH)
                ]
                n = c.execute(f"UPDATE {TABLE} SET v = v + 1 WHERE id = ANY(%s)", (ids,)).rowcount
                if b % 5 == 4:
                    c.execute(f"SELECT count(*) FROM {TABLE}")  # redirects (a ring's worth)
                p = nvmstats.read_pool(mon)
                with load.lock:
                    load.updates += n
                    load.readings += 1
                    load.max_redirected = max(load.max_redirected, p["redirected"])
                    load.errors += [
                        f"writer {w}, batch {b}: {v}" for v in nvmstats.pool_violations(p)
                    ]
    except Exception as e:  # reported by the check, not lost in the thread
        with load.lock:
            load.errors.append(f"writer {w}: {type(e).__name__}: {e}")


def _hybrid(env: EngineEnv) -> str:
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        p0 = nvmstats.read_pool(c)
        if not p0["hybrid"] or p0["descriptors"] <= p0["slots"]:
            raise CheckFailed(f"the configuration's pool is not hybrid: {p0}")
        rows = p0["slots"] * SIZE_FACTOR * 40
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(
            f"CREATE TABLE {TABLE} (id int PRIMARY KEY, v bigint NOT NULL, pad text NOT NULL) "
            "WITH (autovacuum_enabled = off, fillfactor = 90)"
        )
        c.execute(
            f"INSERT INTO {TABLE} SELECT g, 0, repeat('x', {ROW_PAD}) "
            "FROM generate_series(1, %s) g",
            (rows,),
        )
        c.execute(f"VACUUM (ANALYZE) {TABLE}")
        pages = c.execute(f"SELECT pg_relation_size('{TABLE}') / 8192").fetchone()[0]  # type: ignore[index]
        c.execute("CHECKPOINT")
    if pages < 2 * p0["slots"]:
        raise CheckFailed(f"{TABLE} has {pages} pages, not over twice the {p0['slots']} slots")
    env.server.restart()  # cold: every page first read by the load
    with env.server.connect() as c:
        before = nvmstats.read_pool(c)
        # redirect the table into descriptors (beyond the slots) before the writes
        c.execute("SET max_parallel_workers_per_gather = 0")
        c.execute("SET enable_seqscan = off")
        c.execute(f"SELECT count(*), sum(length(pad)) FROM {TABLE} WHERE id > 0")
        scanned = nvmstats.read_pool(c)
    load = Load(max_redirected=scanned["redirected"])
    load.errors += [f"after an index scan: {v}" for v in nvmstats.pool_violations(scanned)]
    threads = [
        threading.Thread(target=_writer, args=(env, w, rows, f"{env.run.seed}:slots", load))
        for w in range(WRITERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with env.server.connect() as c:
        after = nvmstats.read_pool(c)
        total = c.execute(f"SELECT sum(v) FROM {TABLE}").fetchone()[0]  # type: ignore[index]
        # nothing touches the table from here: a checkpoint must write all it finds dirty
        dirty = _dirty(c)
        c.execute("CHECKPOINT")
        left = _dirty(c)
        c.execute(f"DROP TABLE {TABLE}")
    if load.errors:
        raise CheckFailed("; ".join(load.errors[:10]))
    bad = at_rest(after)
    if bad:
        raise CheckFailed(f"after the writers: {'; '.join(bad)}; {after}")
    if total != load.updates:
        raise CheckFailed(f"sum(v) = {total}, but the writers made {load.updates} updates")
    if dirty == 0 or left:
        raise CheckFailed(
            f"CHECKPOINT: {dirty} buffers of {TABLE} and its index dirty before, {left} after "
            f"(expected some before, none after: BufferSync() missed dirty buffers); {after}"
        )
    demoted = after["demotions"] - before["demotions"]
    cleaned = after["cleaner_writes"] - before["cleaner_writes"]
    if cleaned <= 0:
        raise CheckFailed(
            f"the background writer wrote no slot back ahead of the slot clock "
            f"(cleaner_writes {before['cleaner_writes']} -> {after['cleaner_writes']}) while "
            f"the writers' backends wrote {after['slot_writes'] - before['slot_writes']}: "
            f"no pass over the slots (H5a); {after}"
        )
    if demoted <= 0:
        raise CheckFailed(
            f"the slot clock demoted nothing: no DRAM pressure ({pages} pages, "
            f"{after['slots']} slots); {after}"
        )
    if load.max_redirected <= after["slots"]:
        raise CheckFailed(
            f"at most {load.max_redirected} buffers were redirected at once, not more than "
            f"the {after['slots']} slots: redirected buffers were not beyond the budget"
        )
    return (
        f"{pages} pages, {after['descriptors']} descriptors, {after['slots']} slots; "
        f"{load.updates} updates by {WRITERS} writers, {load.readings} readings: peak "
        f"{after['slots_in_use_peak']} slots in use, up to {load.max_redirected} redirected "
        f"buffers; slot clock: {demoted} demotions, "
        f"{after['slot_evictions'] - before['slot_evictions']} evictions, "
        f"{after['slot_writes'] - before['slot_writes']} write-backs; background writer "
        f"ahead of it: {cleaned} write-backs, "
        f"{after['cleaner_demotions'] - before['cleaner_demotions']} demotions; at rest "
        f"{after['slots_in_use']} in use + {after['slots_free']} free; CHECKPOINT wrote "
        f"all {dirty} dirty buffers of the table"
    )


def _dirty(c: Any) -> int:
    """Dirty shared buffers of the load's table and its index."""
    row = c.execute(
        "SELECT count(*) FROM pg_buffercache b "
        "WHERE b.isdirty AND b.relfilenode IN "
        f"(pg_relation_filenode('{TABLE}'), pg_relation_filenode('{TABLE}_pkey')) "
        "AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchone()
    return int(row[0]) if row else 0


def _fill(c: Any, table: str, rows: int) -> int:
    """A fresh table of ``rows`` rows of ~ROW_PAD bytes, frozen, analysed, checkpointed and
    evicted from the buffers; returns its pages."""
    c.execute(f"DROP TABLE IF EXISTS {table}")
    c.execute(
        f"CREATE TABLE {table} (id int PRIMARY KEY, pad text NOT NULL) "
        "WITH (autovacuum_enabled = off)"
    )
    c.execute(
        f"INSERT INTO {table} SELECT g, repeat('x', {ROW_PAD}) FROM generate_series(1, %s) g",
        (rows,),
    )
    c.execute(f"VACUUM (FREEZE, ANALYZE) {table}")
    c.execute("CHECKPOINT")
    c.execute(f"SELECT pg_buffercache_evict_relation('{table}')")
    return int(c.execute(f"SELECT pg_relation_size('{table}') / {BLCKSZ}").fetchone()[0])  # type: ignore[index]


def _zeroed_page(env: EngineEnv, slots: int) -> str:
    """A page zeroed by ``zero_damaged_pages`` is not the file's: the slot clock evicts
    it, never demotes it; the next read without the setting raises stock's XX001."""
    with env.server.connect() as c:
        _fill(c, ZD_TABLE, ZD_ROWS)
        # 3x: its heap copies alone exceed the free slots plus a round of the clock (the
        # index's pages no longer copy on a hit since patch 0024; twice the slots took
        # only ~1,400 slots after the other checks' tables had freed theirs)
        pressure = _fill(c, PRESSURE, slots * 3 * 40)
        relpath = c.execute(f"SELECT pg_relation_filepath('{ZD_TABLE}')").fetchone()[0]  # type: ignore[index]
        path = env.server.cluster.datadir / relpath
        offset = ZD_BLOCK * BLCKSZ + BLCKSZ // 2  # tuple data, under the checksum
        flip_byte(path, offset)
        try:
            for sql in NO_PAR:
                c.execute(sql)
            c.execute("SET zero_damaged_pages = on")
            zeroed = c.execute(f"SELECT count(*) FROM {ZD_TABLE} WHERE length(pad) > 0").fetchone()[
                0
            ]  # type: ignore[index]
            held = {b.block: b for b in nvmstats.relation_buffers(c, ZD_TABLE)}
            if zeroed >= ZD_ROWS or ZD_BLOCK not in held or held[ZD_BLOCK].redirected:
                raise CheckFailed(
                    f"zero_damaged_pages: {zeroed} of {ZD_ROWS} rows, block {ZD_BLOCK} "
                    f"{held.get(ZD_BLOCK)}: expected its rows gone and a copied buffer"
                )
            before = nvmstats.read_pool(c)
            c.execute("SET enable_seqscan = off")
            c.execute("SET enable_indexscan = on")
            c.execute(f"SELECT count(*), sum(length(pad)) FROM {PRESSURE} WHERE id > 0")
            after = nvmstats.read_pool(c)
            c.execute("RESET ALL")
            for sql in NO_PAR:
                c.execute(sql)
            block = {b.block: b for b in nvmstats.relation_buffers(c, ZD_TABLE)}.get(ZD_BLOCK)
            taken = (after["demotions"] - before["demotions"]) + (
                after["slot_evictions"] - before["slot_evictions"]
            )
            read = outcome(
                relpath,
                lambda: c.execute(
                    f"SELECT count(*) FROM {ZD_TABLE} WHERE length(pad) > 0"
                ).fetchall(),
            )
        finally:
            flip_byte(path, offset)
            c.execute("RESET ALL")
            c.execute(f"DROP TABLE IF EXISTS {ZD_TABLE}")
            c.execute(f"DROP TABLE IF EXISTS {PRESSURE}")
    if taken < slots:
        raise CheckFailed(
            f"zeroed page: the slot clock took {taken} slots reading {pressure} pages, "
            f"not a round of the {slots}: no pressure"
        )
    if read.get("sqlstate") != DATA_CORRUPTED or "invalid page in block" not in read["message"]:
        raise CheckFailed(
            f"zeroed page: after the slot clock ({taken} slots taken; block {ZD_BLOCK}'s "
            f"buffer then: {block}), a read with zero_damaged_pages = off gave "
            f"{describe(read)}, not XX001 'invalid page in block ...' (base's, once evicted)"
        )
    return f"zeroed page: evicted, not demoted ({taken} slots taken), then XX001 as base"


def _bulk_read(env: EngineEnv, slots: int, descriptors: int) -> str:
    """A cold sequential scan of more than slots / 4 pages reads through a bulk-read ring
    (the threshold follows the slots): the pages it reads in place stay in the pool (patch
    0030), the pages it must copy (``zero_damaged_pages`` reads never redirect) go round
    the ring, and a scan of more than a quarter of the descriptors keeps no more than that
    quarter (plus its ring)."""
    seen = {}
    for case, rows, copied in (
        ("kept", slots // 2 * 40, False),
        ("copied", slots // 2 * 40, True),
        ("bounded", descriptors // 2 * 40, False),
    ):
        with env.server.connect() as c:
            pages = _fill(c, BULK, rows)
            try:
                low, high = (slots // 4, descriptors // 4)
                if case == "bounded":
                    low, high = (descriptors // 4 + BULK_BOUND_SLACK, descriptors)
                if not low < pages < high:
                    raise CheckFailed(
                        f"{BULK} ({case}) has {pages} pages, not between {low} and {high}"
                    )
                for sql in NO_PAR:
                    c.execute(sql)
                if copied:
                    c.execute("SET zero_damaged_pages = on")
                c.execute(f"SELECT count(*) FROM {BULK} WHERE length(pad) > 0")
                c.execute("RESET ALL")
                bufs = nvmstats.relation_buffers(c, BULK)
            finally:
                c.execute(f"DROP TABLE IF EXISTS {BULK}")
        seen[case] = (pages, len(bufs), sum(b.redirected for b in bufs))
    pages, kept, redirected = seen["kept"]
    # a ring would keep a few dozen of them
    if kept < pages - BULK_SLACK or redirected != kept:
        raise CheckFailed(
            f"bulk read: a cold sequential scan of {pages} pages (> slots / 4 = {slots // 4}) "
            f"left {kept} of them in buffers ({redirected} redirected): redirected pages "
            "went round the ring (they hold no DRAM: they should stay)"
        )
    c_pages, c_kept, c_redirected = seen["copied"]
    if not 0 < c_kept <= c_pages // 2 or c_redirected != 0:
        raise CheckFailed(
            f"bulk read: a cold sequential scan of {c_pages} pages copied into slots "
            f"(zero_damaged_pages) left {c_kept} of them in buffers ({c_redirected} "
            "redirected): no bulk-read ring (threshold from the descriptors)"
        )
    # the copied scan's pages left in buffers are its ring's
    b_pages, b_kept, _ = seen["bounded"]
    bound = descriptors // 4
    if not bound <= b_kept <= bound + c_kept + BULK_SLACK:
        raise CheckFailed(
            f"bulk read: a cold sequential scan of {b_pages} pages (> descriptors / 4 = "
            f"{bound}) left {b_kept} of them in buffers, not between {bound} and {bound} + "
            f"its ring ({c_kept}) + {BULK_SLACK}: a ring keeps at most a quarter of the "
            "descriptors (stock's bound on one scan), then reuses redirected elements"
        )
    return (
        f"bulk read: {kept} of {pages} pages kept, redirected; copied: {c_kept} of "
        f"{c_pages} kept (a ring); {b_kept} of {b_pages} kept (a quarter of "
        f"{descriptors} descriptors and the ring)"
    )


def _pool_shape(env: EngineEnv, descriptors: str) -> dict[str, Any]:
    """Restart with ``nvm_buffer_descriptors = descriptors``; the settings, the shared
    memory allocations and the pool's counts then."""
    with env.server.temporary({"nvm_buffer_descriptors": descriptors}):
        env.server.restart()
        with env.server.connect() as c:
            nvmstats.ensure_extensions(c)
            pool = nvmstats.read_pool(c)
            settings = dict(c.execute("SELECT name, setting FROM pg_settings").fetchall())
            allocs: dict[str, int] = {}
            for name, size in c.execute(
                "SELECT name, size FROM pg_shmem_allocations WHERE name IS NOT NULL"
            ).fetchall():
                allocs[name] = allocs.get(name, 0) + int(size)
            used = c.execute(
                "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NOT NULL"
            ).fetchone()[0]  # type: ignore[index]
    return {"pool": pool, "settings": settings, "allocs": allocs, "used": int(used)}


def _sizing(env: EngineEnv) -> str:
    """What is sized or autotuned from shared_buffers follows the slots, not the
    descriptors: the same settings and allocations with and without the hybrid pool."""
    try:
        plain = _pool_shape(env, "0")
        hybrid = _pool_shape(env, SIZING_DESCRIPTORS)
    finally:
        env.server.restart()  # the configuration's own pool again
    p0, p1 = plain["pool"], hybrid["pool"]
    if p0["hybrid"] or not p1["hybrid"] or p0["slots"] != p1["slots"]:
        raise CheckFailed(f"sizing: pools not as asked: without {p0}; with {p1}")
    bad = [
        f"{k} = {plain['settings'].get(k)} without the hybrid pool, "
        f"{hybrid['settings'].get(k)} with it"
        for k in sorted(set(plain["settings"]) | set(hybrid["settings"]))
        if k not in SIZING_SETTINGS and plain["settings"].get(k) != hybrid["settings"].get(k)
    ]
    for name, shape, pages in (
        ("without the hybrid pool", plain, p0["slots"]),
        ("with it", hybrid, p1["descriptors"]),
    ):
        got = shape["settings"].get("transaction_buffers")
        if got != str(_clog_autotune(pages)):
            bad.append(
                f"transaction_buffers = {got} {name}, expected {_clog_autotune(pages)}: the "
                f"autotune of {pages} buffers (the commit log follows the descriptors)"
            )
    a0, a1 = plain["allocs"], hybrid["allocs"]
    for name in sorted(set(a0) | set(a1)):
        if name in PER_DESCRIPTOR or name in HYBRID_ONLY:
            continue
        if a0.get(name) != a1.get(name):
            bad.append(
                f'"{name}" {a0.get(name)} B without the hybrid pool, {a1.get(name)} B with it'
            )
    for name in GROWS:
        if not a1.get(name, 0) > a0.get(name, 0):
            bad.append(f'"{name}" did not grow: {a0.get(name)} B, then {a1.get(name)} B')
    if bad:
        raise CheckFailed(
            f"sizing: with {p1['descriptors']} descriptors instead of {p0['descriptors']} "
            f"({p0['slots']} slots both), what follows shared_buffers must not change: "
            + "; ".join(bad)
        )
    added = p1["descriptors"] - p0["descriptors"]
    per = (hybrid["used"] - plain["used"]) / added
    s = plain["settings"]
    return (
        f"sizing: {added} more descriptors, settings unchanged (wal_buffers "
        f"{s['wal_buffers']}, io_max_concurrency {s['io_max_concurrency']}) but "
        f"transaction_buffers ({s['transaction_buffers']} -> "
        f"{hybrid['settings']['transaction_buffers']}), allocations unchanged but the "
        "descriptors' and the commit log's "
        f"({per:.1f} B of shared memory per added descriptor)"
    )


def _refused(env: EngineEnv) -> str:
    """base/se1 with nvm_buffer_descriptors: the server does not start, with a FATAL."""
    env.refused_start({"nvm_buffer_descriptors": "64MB"}, REFUSED)
    return f"{env.engine} with nvm_buffer_descriptors refused at start (FATAL)"


def slots(env: EngineEnv, limit: float) -> str:
    if env.engine != "se2":
        return _refused(env)
    if not env.config.hybrid_pool:
        raise CheckSkipped("no hybrid pool in this configuration (nvm_buffer_descriptors)")
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        p0 = nvmstats.read_pool(c)
    probes = [
        _zeroed_page(env, p0["slots"]),
        _bulk_read(env, p0["slots"], p0["descriptors"]),
        _sizing(env),
    ]
    return "; ".join([_hybrid(env), *probes])
