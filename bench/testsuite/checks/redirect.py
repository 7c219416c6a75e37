"""redirect: in se2 a read-only miss redirects the buffer instead of copying the page.

A table 2.5x shared_buffers (checksums on) is VACUUMed, checkpointed and the server
restarted (cold buffers). Then, with ``pgnvm_stats`` read before and after:

* a sequential scan (no parallel workers) misses nearly every block (EXPLAIN BUFFERS
  "shared read"); in se2 ``redirects`` must grow by at least the misses minus a small
  slack, ``bytes_not_copied`` by 8 kB per redirect, and ``pgnvm_buffers()`` joined with
  ``pg_buffercache`` must show redirected buffers of the table (its relfilenode);
* after evicting the table's buffers, random lookups through the primary key (index scan,
  seq/bitmap scans off) must redirect the heap pages they fetch too (patch 0010): at least
  the number of distinct heap blocks of the looked-up rows, minus the slack.

* (se2) the views of hits (H4g of docs/storage-engines.md: a pin's view is computed
  from the buffer's tag through the process's segment cache), two sessions A and B, a
  table S of KEPT_PAGES pages and a table R of more pages than the pool has descriptors,
  with different values (a page of R read for one of S changes the sum):
  (1) A scans S cold, then again: the second scan's pins take their views through A's
  segment cache (``views_kept`` of A grows by about S's pages, ``views_resolved`` stays
  about 0);
  (1a) no per-buffer look-up: a fresh session that never pinned S's buffers scans S (all
  hits): ``views_kept`` about S's pages, ``views_resolved`` about 0 (one per segment);
  kept views per buffer would have looked up every page;
  (1b) B creates and drops a database: the SMGRRELEASE barrier closes every relation in
  every process, so A (idle) lets go of its mapping of S (``/proc/<pid>/maps``) while S's
  buffers stay: A's next scan must find its segment-cache entry stale by the mapping
  epoch alone (``views_stale`` >= 1, nothing read again) and map S anew; then across the
  barrier with a cursor of A on S: the mapping its pinned page is read through is
  retired, not unmapped, the rows are right, and it goes with the pin;
  (2) A prewarms R; B evicts R and S and reads S cold, into buffers that held R; A's scan
  of S must give S's sum (its views come from the tags, through its cache: ``views_kept``
  about S's pages); B updates rows of S (copy-on-write), A must see them; in the hybrid
  pool, after a checkpoint, copying reads of R by B make the slot clock demote S's copied
  buffers (redirected again), and A must still see B's values;
  (3) ``view_mismatches`` of A (a segment-cache entry whose epoch matched but whose
  mapping was not of the tag's segment) stays 0, and in the hybrid pool ``pgnvm_pool()``
  shows no redirected buffer with a slot and agreeing maps.

* ``pg_prewarm`` (buffer mode) of half a pool's worth of the evicted table must redirect
  every block it loads in se2 (patch 0023: prewarming spends no DRAM on page copies), and
  so must ``autoprewarm`` when it brings those blocks back after a restart (the library
  preloaded for this part only; ``autoprewarm_dump_now()`` writes the list).

* (every engine) B-tree pages in place (patch 0024), :mod:`redirect_btree`: an index-only
  scan redirects the index's pages in se2; scans that kill items (LP_DEAD, under a share
  lock) copy the page first and give the right answers; inserts and splits copy, the file
  changes only at write-back, amcheck is clean; the unique check's hints on pages read in
  place are skipped.

* (every engine) the AIO subsystem's debug messages, whose level patch 0022 tests before
  calling errstart(), still reach the client with client_min_messages = debug3 and the
  server log with log_min_messages = debug3, and neither without.

base and se1 must show the opposite: ``redirects`` stays 0 and no buffer at all is
redirected (se1 copies instead: ``mapped_reads`` grows by the misses), which also proves
that the counter can stay 0 where it must. That no ``read()`` touches the table's files in
se1/se2 is the ``strace`` check's job.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.core import counters
from bench.testsuite import nvmstats
from bench.testsuite.checks import redirect_btree
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed
from bench.testsuite.plans import index_scan_stats, scan_stats

TABLE = "redir_t"
SIZE_FACTOR = 2.5  # table size / shared_buffers
ROW_BYTES = 134  # heap bytes per row of (id int, pad = 3 md5s): tuple + line pointer
LOOKUPS = 600  # random index lookups (their heap blocks fit in shared_buffers)
INDEX_ONLY = {
    "max_parallel_workers_per_gather": "0",
    "enable_seqscan": "off",
    "enable_bitmapscan": "off",
    "enable_indexonlyscan": "off",
}


def slack(n: int) -> int:
    """How many of ``n`` misses may go without a redirect (e.g. a block another process
    read in meanwhile, or read by a non-redirecting path)."""
    return 8 + n // 100


def expect_redirects(
    engine: str, what: str, misses: int, d: dict[str, int], table_redirected: int
) -> str:
    """Judge one scan: se2 must redirect about every miss, the others never. Returns a
    description; raises CheckFailed."""
    got = d["redirects"]
    if engine == "se2":
        need = misses - slack(misses)
        if got < need:
            raise CheckFailed(
                f"{what}: {misses} block misses but redirects grew by only {got} "
                f"(expected >= {need}); {counters.fmt(d)}"
            )
        if d["bytes_not_copied"] != got * nvmstats.BLCKSZ:
            raise CheckFailed(
                f"{what}: bytes_not_copied grew by {d['bytes_not_copied']}, expected "
                f"{got} redirects x {nvmstats.BLCKSZ}"
            )
        if table_redirected == 0:
            raise CheckFailed(
                f"{what}: redirects grew by {got}, but pgnvm_buffers() shows no redirected "
                f"buffer of {TABLE} in pg_buffercache"
            )
        return (
            f"{what}: {misses} misses -> redirects+{got}, bytes_not_copied+"
            f"{d['bytes_not_copied'] >> 20} MB, {table_redirected} redirected buffers of {TABLE}"
        )
    if got != 0 or d["bytes_not_copied"] != 0 or d["cow_copies"] != 0:
        raise CheckFailed(f"{what}: {engine} must never redirect, yet {counters.fmt(d)}")
    if table_redirected:
        raise CheckFailed(f"{what}: {engine} shows {table_redirected} redirected buffers")
    out = f"{what}: {misses} misses, redirects+0"
    if engine == "se1":
        need = misses - slack(misses)
        if d["mapped_reads"] < need:
            raise CheckFailed(
                f"{what}: se1 copies every miss from its mapping, but mapped_reads grew by "
                f"{d['mapped_reads']} for {misses} misses"
            )
        out += f", mapped_reads+{d['mapped_reads']}"
    return out


WIDE_ROW_PAD = 1800  # 4 rows per heap page, not TOASTed

#: part 5 (views kept across pins): S's pages, rows per page (WIDE_ROW_PAD), R beyond the pool
KEPT_S = "redir_kept_s"
KEPT_R = "redir_kept_r"
KEPT_PAGES = 256
KEPT_R_EXTRA = 512  # R's pages beyond the pool's descriptors
KEPT_UPDATE_EVERY = 97  # B updates rows whose id is a multiple
KEPT_BUMP = 1_000_000  # ... adding this to v
DEMOTE_ROUNDS = 10


def _kept_table(c: psycopg.Connection[Any], table: str, pages: int, factor: int) -> int:
    """A table of ``pages`` heap pages (4 rows each), v = id * factor; returns sum(v)."""
    rows = pages * 4
    c.execute(f"DROP TABLE IF EXISTS {table}")
    c.execute(f"CREATE TABLE {table} (id int, v bigint, pad text) WITH (autovacuum_enabled = off)")
    c.execute(
        f"INSERT INTO {table} SELECT g, g * {factor}, "
        f"repeat(chr(65 + mod(g, 26)), {WIDE_ROW_PAD}) FROM generate_series(1, %s) g",
        (rows,),
    )
    return factor * rows * (rows + 1) // 2


def _scan_sum(c: psycopg.Connection[Any], table: str) -> tuple[int, int]:
    row = c.execute(f"SELECT count(*), sum(v) FROM {table}").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


#: the database B creates and drops for the SMGRRELEASE barrier of part 5 (1b)
BARRIER_DB = "redir_barrier"
#: rows A's cursor fetches before the barrier (4 per page): mid-page, so that the rest of
#: its page is read after the barrier, through the pointer taken before (heapam's rs_cpage)
EPOCH_FETCH = 98


def ro_mappings(maps: str, relpath: str) -> int:
    """How many read-only shared mappings (``r--s``: se2's, for redirected buffers) of the
    relation file ``relpath`` (``pg_relation_filepath()``: its first segment) a process's
    ``/proc/<pid>/maps`` text shows: distinct start - offset, should one mapping be split
    into several areas."""
    bases = set()
    for line in maps.splitlines():
        f = line.split(maxsplit=5)
        if len(f) == 6 and f[1] == "r--s" and f[5].endswith("/" + relpath):
            bases.add(int(f[0].split("-")[0], 16) - int(f[2], 16))
    return len(bases)


def _barrier(b: psycopg.Connection[Any]) -> None:
    """B creates and drops a database. DROP DATABASE makes every process close every
    relation (the SMGRRELEASE procsignal barrier: ``smgrreleaseall()``, so ``nvm_close()``
    lets go of every mapping) and waits until each has; an idle session absorbs it at once
    (its read of the next command checks for interrupts). Nothing of it touches other
    relations' buffers (CREATE DATABASE's copies take victims through rings)."""
    b.execute(f"DROP DATABASE IF EXISTS {BARRIER_DB}")
    b.execute(f"CREATE DATABASE {BARRIER_DB}")
    b.execute(f"DROP DATABASE {BARRIER_DB}")


def _epoch_probes(
    a: psycopg.Connection[Any],
    b: psycopg.Connection[Any],
    a_scan: Callable[[str, int], dict[str, int]],
    s_rows: int,
    s_sum: int,
) -> list[str]:
    """Part 5 (1b): the mapping epoch, the only guard against taking a view through a
    mapping that was let go (H4b, H4g). A's segment cache names its mapping of S; B's
    barrier lets go of A's mappings without touching S's buffers: A's next scan must find
    the cache's entry stale by its epoch (``views_stale`` >= 1, nothing of S read again),
    map S anew and take the rest of its views through the new entry. Then with a cursor
    of A on S across the barrier: the mapping its pinned page is read through is retired,
    not unmapped (``/proc/<pid>/maps``), the cursor's rows are right, the rest of the scan
    finds the entry stale, and the retired mapping goes with the last pin."""
    pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
    path = b.execute("SELECT pg_relation_filepath(%s::regclass)", (KEPT_S,)).fetchone()[0]  # type: ignore[index]
    slk = slack(KEPT_PAGES)
    notes = []

    def mapped(what: str, want: int) -> None:
        got = ro_mappings(Path(f"/proc/{pid}/maps").read_text(), path)
        if got != want:
            raise CheckFailed(
                f"kept views, barrier: {what}, session A (pid {pid}) has {got} read-only "
                f"mappings of {path} ({KEPT_S}), expected {want}"
            )

    # without a pin: the views' mapping is unmapped at once, its epoch bumped
    mapped("before B's CREATE/DROP DATABASE", 1)
    _barrier(b)
    mapped("after the barrier (A idle: it must have absorbed it)", 0)
    d = a_scan("after the SMGRRELEASE barrier", s_sum)
    if d["redirects"] > slk:
        raise CheckFailed(
            f"kept views, barrier: A read {d['redirects']} pages of {KEPT_S} again (S's "
            f"buffers must stay, with their generations, for the epoch alone to be tested); "
            f"{counters.fmt(d)}"
        )
    if d["views_stale"] < 1 or d["views_resolved"] < 1:
        raise CheckFailed(
            f"kept views, barrier: after B's DROP DATABASE let go of A's mappings, A's scan "
            f"of {KEPT_S} ({KEPT_PAGES} pages, buffers unchanged) found {d['views_stale']} "
            f"stale segment-cache entries and looked up {d['views_resolved']} pages "
            f"(expected >= 1 each): the mapping epoch did not reject the entry; "
            f"{counters.fmt(d)}"
        )
    if d["mappings_created"] < 1:
        raise CheckFailed(f"kept views, barrier: A mapped nothing anew; {counters.fmt(d)}")
    mapped("after A's scan", 1)
    notes.append(
        f"barrier: {d['views_stale']} segment entry stale by its epoch, then "
        f"{d['views_kept']} views through the new one"
    )

    # with a pin across it: the mapping is retired, and unmapped at the last pin
    with a.transaction():
        a.execute(f"DECLARE epoch_cur NO SCROLL CURSOR FOR SELECT v FROM {KEPT_S}")
        rows = a.execute(f"FETCH {EPOCH_FETCH} FROM epoch_cur").fetchall()
        _barrier(b)
        mapped("with A's cursor pinning a page of it, after the barrier", 1)
        before = counters.read_counters(a, own=True)
        rows += a.execute("FETCH ALL FROM epoch_cur").fetchall()
        d = counters.delta(before, counters.read_counters(a, own=True))
    mapped("after A's cursor closed (the retired mapping gone with its last pin)", 1)
    got = (len(rows), sum(int(r[0]) for r in rows))
    if got != (s_rows, s_sum):
        raise CheckFailed(
            f"kept views, barrier: A's cursor on {KEPT_S} across the barrier returned "
            f"(count, sum) {got}, expected {(s_rows, s_sum)}; {counters.fmt(d)}"
        )
    rest = KEPT_PAGES - 1 - (EPOCH_FETCH - 1) // 4  # pages after the one pinned then
    if d["view_mismatches"] or d["views_stale"] < 1:
        raise CheckFailed(
            f"kept views, barrier with a cursor: the rest of the scan ({rest} pages) found "
            f"{d['views_stale']} stale segment-cache entries (expected >= 1), "
            f"{d['view_mismatches']} mismatches (must be 0); {counters.fmt(d)}"
        )
    notes.append(
        f"cursor across the barrier: mapping retired, rows right, {d['views_stale']} stale"
    )
    return notes


def _kept_views(env: EngineEnv) -> str:
    """Part 5: views kept across pins (H4), probes (1)-(3) of the module's docstring. With
    the server's other writers quiet: an autovacuum worker's clock sweep evicting one of the
    scanned buffers between two scans costs a view (the bounds have a slack of
    ``slack(KEPT_PAGES)``, and after regress autovacuum works for minutes)."""
    notes = []
    with env.server.connect() as b, env.server.connect() as a, env.writers_quiet(b):
        nvmstats.ensure_extensions(b)
        b.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        descriptors = nvmstats.read_pool(b)["descriptors"]
        r_pages = descriptors + KEPT_R_EXTRA
        s_sum = _kept_table(b, KEPT_S, KEPT_PAGES, 7)
        _kept_table(b, KEPT_R, r_pages, 3)
        s_rows = KEPT_PAGES * 4
        b.execute("CHECKPOINT")
        for c in (a, b):
            c.execute("SET max_parallel_workers_per_gather = 0")
        for t in (KEPT_S, KEPT_R):
            b.execute(f"SELECT pg_buffercache_evict_relation('{t}')")

        def a_scan(what: str, want_sum: int) -> dict[str, int]:
            before = counters.read_counters(a, own=True)
            got = _scan_sum(a, KEPT_S)
            d = counters.delta(before, counters.read_counters(a, own=True))
            if got != (s_rows, want_sum):
                raise CheckFailed(
                    f"kept views, {what}: session A's scan of {KEPT_S} returned (count, sum) "
                    f"{got}, expected {(s_rows, want_sum)}; A's counters {counters.fmt(d)}"
                )
            if d["view_mismatches"] != 0:
                raise CheckFailed(
                    f"kept views, {what}: view_mismatches of session A grew by "
                    f"{d['view_mismatches']} (must stay 0: a segment-cache entry's epoch "
                    f"matched a handle whose mapping is gone or of another segment); "
                    f"{counters.fmt(d)}"
                )
            return d

        # (1) the second scan's pins take the views the first one kept
        a_scan("cold scan", s_sum)
        d = a_scan("second scan", s_sum)
        need = KEPT_PAGES - slack(KEPT_PAGES)
        if d["views_kept"] < need or d["views_resolved"] > slack(KEPT_PAGES):
            raise CheckFailed(
                f"kept views: a second scan of {KEPT_S} ({KEPT_PAGES} redirected pages) took "
                f"{d['views_kept']} kept views (expected >= {need}) and looked up "
                f"{d['views_resolved']} pages; {counters.fmt(d)}"
            )
        notes.append(f"second scan: {d['views_kept']} kept views taken")

        # (1a) no per-buffer look-up: a session that never pinned S's buffers takes
        # every hit's view through its segment cache, not by looking the page up
        with env.server.connect() as fresh:
            fresh.execute("SET max_parallel_workers_per_gather = 0")
            # the catalogs' pages it needs to plan the scan, not counted
            fresh.execute(f"EXPLAIN SELECT count(*), sum(v) FROM {KEPT_S}")
            counters.read_counters(fresh, own=True)
            before = counters.read_counters(fresh, own=True)
            got = _scan_sum(fresh, KEPT_S)
            d = counters.delta(before, counters.read_counters(fresh, own=True))
        if got != (s_rows, s_sum):
            raise CheckFailed(f"kept views: a fresh session's scan of {KEPT_S} returned {got}")
        if (
            d["views_kept"] < need
            or d["views_resolved"] > slack(KEPT_PAGES)
            or d["redirects"] > slack(KEPT_PAGES)
        ):
            raise CheckFailed(
                f"kept views: a session that never pinned {KEPT_S}'s {KEPT_PAGES} redirected "
                f"buffers took {d['views_kept']} views through its segment cache (expected "
                f">= {need}) and looked up {d['views_resolved']} pages (expected <= "
                f"{slack(KEPT_PAGES)}: one per segment, not per buffer); {counters.fmt(d)}"
            )
        notes.append(
            f"fresh session: {d['views_kept']} hits' views through the segment cache, "
            f"{d['views_resolved']} look-ups"
        )

        # (1b) the mapping epoch alone rejects A's segment-cache entry (H4b)
        notes.extend(_epoch_probes(a, b, a_scan, s_rows, s_sum))

        # (2) A keeps views of R in about every buffer; B evicts and reads S into them
        a.execute(f"SELECT pg_prewarm('{KEPT_R}', 'buffer')")
        for t in (KEPT_S, KEPT_R):
            b.execute(f"SELECT pg_buffercache_evict_relation('{t}')")
        if _scan_sum(b, KEPT_S) != (s_rows, s_sum):
            raise CheckFailed(f"kept views: session B's cold scan of {KEPT_S} is wrong")
        d = a_scan("after B read S into buffers of R", s_sum)
        if d["views_kept"] < need:
            raise CheckFailed(
                f"kept views: A's scan of {KEPT_S}, read by B into buffers that held {KEPT_R}, "
                f"took only {d['views_kept']} views through A's segment cache (expected >= "
                f"{need}): each is computed from the buffer's tag; {counters.fmt(d)}"
            )
        notes.append(f"S into R's buffers: right sum, {d['views_kept']} views from the tags")

        # ... B changes rows of S: copy-on-write
        b.execute(f"UPDATE {KEPT_S} SET v = v + {KEPT_BUMP} WHERE id % {KEPT_UPDATE_EVERY} = 0")
        updated = s_rows // KEPT_UPDATE_EVERY
        s_sum += updated * KEPT_BUMP
        a_scan("after B's update (copy-on-write)", s_sum)
        a_scan("again", s_sum)

        # ... in the hybrid pool: S's copies demoted (redirected again) by the slot clock
        if env.config.hybrid_pool:
            slots = nvmstats.read_pool(b)["slots"]
            b.execute("CHECKPOINT")
            demoted_before = nvmstats.read_pool(b)["demotions"]
            b.execute("SET zero_damaged_pages = on")  # B's reads copy, into slots
            copied = 1
            for _ in range(DEMOTE_ROUNDS):
                b.execute(f"SELECT pg_buffercache_evict_relation('{KEPT_R}')")
                b.execute(
                    f"SELECT pg_prewarm('{KEPT_R}', 'buffer', 'main', 0, %s)", (2 * slots - 1,)
                )
                copied = sum(not x.redirected for x in nvmstats.relation_buffers(b, KEPT_S))
                if copied == 0:
                    break
            b.execute("RESET zero_damaged_pages")
            p = nvmstats.read_pool(b)
            if copied:
                raise CheckFailed(
                    f"kept views: {copied} buffers of {KEPT_S} still copied after "
                    f"{DEMOTE_ROUNDS} rounds of DRAM pressure; pool {p}"
                )
            if p["demotions"] <= demoted_before:
                raise CheckFailed("kept views: the slot clock demoted nothing")
            d = a_scan("after the slot clock demoted S's copies", s_sum)
            notes.append(
                f"demoted: {p['demotions'] - demoted_before} demotions, "
                f"{d['views_kept']} views through the segment cache"
            )

        # (3) what must be 0 (A's view_mismatches: at every scan of A above; here every
        # process's since the server started)
        everyone = counters.read_counters(b)["view_mismatches"]
        if everyone != 0:
            raise CheckFailed(f"kept views: view_mismatches summed over all processes = {everyone}")
        if env.config.hybrid_pool:
            bad = nvmstats.pool_violations(nvmstats.read_pool(b))
            if bad:
                raise CheckFailed(f"kept views: {'; '.join(bad)}")
        for t in (KEPT_S, KEPT_R):
            b.execute(f"DROP TABLE {t}")
    return "kept views: " + "; ".join(notes) + "; view_mismatches 0"


#: the prefix of pgaio_debug_io() messages: "io 12 |op readv|target smgr|state ..."
AIO_DEBUG_RE = re.compile(r"^io +\d+ *\|op readv")


def _aio_debug_messages(env: EngineEnv, c: psycopg.Connection[Any], id_array: str) -> str:
    """Patch 0022 tests the level of the AIO subsystem's debug messages inline, before
    errstart(): they must still reach whoever asks for them, the client
    (client_min_messages) as well as the server log (log_min_messages), and nobody else.
    Each case reads the index scan's blocks again from storage (after an eviction)."""
    messages: list[str] = []
    c.add_notice_handler(lambda d: messages.append(d.message_primary or ""))

    def read_cold(settings: dict[str, str]) -> tuple[int, str]:
        c.execute(f"SELECT pg_buffercache_evict_relation('{TABLE}')")
        _set(c, {**INDEX_ONLY, **settings})
        messages.clear()
        offset = env.server.log_offset()
        c.execute(f"SELECT count(*) FROM {TABLE} WHERE id = ANY('{id_array}'::int[])")
        c.execute("RESET ALL")
        to_client = sum(bool(AIO_DEBUG_RE.match(m)) for m in messages)
        return to_client, env.server.log_since(offset)

    quiet, log = read_cold({})
    unasked_in_log = sum("|op readv" in line for line in log.splitlines())
    if quiet or unasked_in_log:
        raise CheckFailed(
            f"AIO debug messages nobody asked for: {quiet} to the client, "
            f"{unasked_in_log} to the log"
        )
    to_client, _ = read_cold({"client_min_messages": "debug3"})
    if to_client == 0:
        raise CheckFailed("client_min_messages = debug3: no AIO debug message reached the client")
    _, log = read_cold({"log_min_messages": "debug3"})  # the backend writes its own log
    in_log = sum("|op readv" in line for line in log.splitlines())
    if in_log == 0:
        raise CheckFailed("log_min_messages = debug3: no AIO debug message in the server log")
    return f"AIO debug messages: {to_client} to the client, {in_log} to the log, 0 unasked"


def _prewarm(engine: str, c: psycopg.Connection[Any], sb: int) -> str:
    """Part 4 (patch 0023): ``pg_prewarm`` in buffer mode only reads, so in se2 it
    redirects the blocks it loads (verified, no copy) like a scan, and nowhere else."""
    c.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    c.execute(f"SELECT pg_buffercache_evict_relation('{TABLE}')")
    nblocks = sb // nvmstats.BLCKSZ // 2  # fits in shared_buffers beside the index
    before = counters.read_counters(c)
    loaded = c.execute(
        f"SELECT pg_prewarm('{TABLE}', 'buffer', 'main', 0, %s)", (nblocks - 1,)
    ).fetchone()[0]  # type: ignore[index]
    d = counters.delta(before, counters.read_counters(c))
    if loaded != nblocks:
        raise CheckFailed(f"pg_prewarm loaded {loaded} blocks, asked for {nblocks}")
    redirected = sum(b.redirected for b in nvmstats.relation_buffers(c, TABLE))
    if engine != "se2" and nvmstats.redirected_anywhere(c):
        raise CheckFailed(f"{engine}: some shared buffer is redirected after pg_prewarm")
    return expect_redirects(engine, "pg_prewarm (buffer)", loaded, d, redirected)


#: part 4b: autoprewarm loads at start-up what it dumped (pg_prewarm.autoprewarm_interval = 0:
#: at shutdown only; the check dumps with autoprewarm_dump_now())
AUTOPREWARM = {
    "shared_preload_libraries": "pg_prewarm",
    "pg_prewarm.autoprewarm": "on",
    "pg_prewarm.autoprewarm_interval": "0",
    # stock autoprewarm stops when no free buffer is left: autovacuum's workers, started
    # at the same restart, take buffers for their rings
    "autovacuum": "off",
}
AUTOPREWARM_WAIT_S = 60.0


def _autoprewarm(env: EngineEnv, sb: int) -> str:
    """Part 4b (patch 0023): ``autoprewarm`` brings a restarted server back to the pool it
    dumped; in se2 it redirects the blocks it loads (verified, no copy), and nowhere else.
    With the library preloaded, :func:`_prewarm` puts half a pool's worth of the table in
    the pool, ``autoprewarm_dump_now()`` writes the list, the server restarts, and the blocks of
    the table that come back must be redirected in se2 (``redirects`` since the start at
    least that many), none in base/se1. Shown failing with autoprewarm.c's read stream not
    declared read-only: nothing redirected."""
    nblocks = sb // nvmstats.BLCKSZ // 2
    with env.server.temporary(AUTOPREWARM):
        env.server.restart()
        with env.server.connect() as c:
            _prewarm(env.engine, c, sb)  # part 4 again, now with the library loaded
            held = len(nvmstats.relation_buffers(c, TABLE))
            dumped = c.execute("SELECT autoprewarm_dump_now()").fetchone()[0]  # type: ignore[index]
        if held < nblocks - slack(nblocks) or dumped < held:
            raise CheckFailed(
                f"premise: pg_prewarm left {held} of {nblocks} blocks of {TABLE} in the pool, "
                f"autoprewarm_dump_now() dumped {dumped} blocks"
            )
        env.server.restart()
        with env.server.connect() as c:
            deadline = time.monotonic() + AUTOPREWARM_WAIT_S
            while True:
                bufs = nvmstats.relation_buffers(c, TABLE)
                busy = c.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                    "'autoprewarm worker'"
                ).fetchone()[0]  # type: ignore[index]
                if (len(bufs) >= held - slack(held) and busy == 0) or (time.monotonic() > deadline):
                    break
                time.sleep(0.1)
            if len(bufs) < held - slack(held):
                raise CheckFailed(
                    f"autoprewarm brought back {len(bufs)} of the {held} blocks of {TABLE} "
                    f"within {AUTOPREWARM_WAIT_S:.0f} s"
                )
            d = counters.read_counters(c)  # since the start: autoprewarm's work
            redirected = sum(b.redirected for b in bufs)
            if env.engine != "se2" and nvmstats.redirected_anywhere(c):
                raise CheckFailed(
                    f"{env.engine}: some shared buffer is redirected after autoprewarm"
                )
            if env.engine == "se2" and redirected < len(bufs) - slack(len(bufs)):
                raise CheckFailed(
                    f"autoprewarm: only {redirected} of the {len(bufs)} blocks of {TABLE} it "
                    "brought back are redirected (a copy spends DRAM)"
                )
            # since the start: other processes' redirects (catalog scans) count too
            out = expect_redirects(env.engine, "autoprewarm", len(bufs), d, redirected)
    env.server.restart()  # the library goes
    return out


def _no_slot_when_redirected(c: psycopg.Connection[Any], redirected: int) -> str:
    """se2's hybrid pool after the index scan: redirected buffers hold no slot (H1), the
    slot maps agree, and the slots in use stay within the budget (``pgnvm_pool()``)."""
    p = nvmstats.read_pool(c)
    bad = nvmstats.pool_violations(p)
    if bad:
        raise CheckFailed(f"hybrid pool after the index scan: {'; '.join(bad)}; {p}")
    if p["redirected"] < redirected:
        raise CheckFailed(
            f"pgnvm_pool() counts {p['redirected']} redirected, the table has {redirected}"
        )
    return (
        f"hybrid pool: {p['redirected']} redirected buffers hold no slot, "
        f"{p['slots_in_use']} of {p['slots']} slots in use"
    )


def _set(c: psycopg.Connection[Any], settings: dict[str, str]) -> None:
    for k, v in settings.items():
        c.execute(f"SET {k} = '{v}'")


def redirect(env: EngineEnv, limit: float) -> str:
    rng = random.Random(f"{env.run.seed}:redirect")
    with env.server.connect() as c:
        # the DRAM for pages (the slots, in se2's hybrid pool)
        sb = c.execute(
            "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()[0]  # type: ignore[index]
        rows = int(sb * SIZE_FACTOR / ROW_BYTES)
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(
            f"CREATE TABLE {TABLE} (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)"
        )
        c.execute(
            f"INSERT INTO {TABLE} SELECT g, repeat(md5(g::text), 3) FROM generate_series(1, %s) g",
            (rows,),
        )
        # hint bits and the visibility map set now: the scans below only read
        c.execute(f"VACUUM (ANALYZE) {TABLE}")
        size = c.execute(f"SELECT pg_relation_size('{TABLE}')").fetchone()[0]  # type: ignore[index]
        if size < 2 * sb:
            raise CheckFailed(f"{TABLE} is {size} bytes, not over twice shared_buffers ({sb})")
        ids = sorted(rng.sample(range(1, rows + 1), LOOKUPS))
        id_array = "{" + ",".join(map(str, ids)) + "}"
        heap_blocks = c.execute(
            f"SELECT count(DISTINCT (ctid::text::point)[0]) FROM {TABLE} WHERE id = ANY(%s)",
            (ids,),
        ).fetchone()[0]  # type: ignore[index]
        c.execute("CHECKPOINT")
    env.server.restart()  # cold buffers
    blocks = size // nvmstats.BLCKSZ
    notes = []
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)

        # 1. sequential scan
        c.execute("SET max_parallel_workers_per_gather = 0")
        before = counters.read_counters(c)
        plan = c.execute(
            "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "
            f"SELECT count(*), sum(length(pad)) FROM {TABLE}"
        ).fetchone()[0]  # type: ignore[index]
        d = counters.delta(before, counters.read_counters(c))
        scanned, misses = scan_stats(plan)
        if scanned != rows:
            raise CheckFailed(f"the seq scan returned {scanned} rows, expected {rows}")
        if misses < 0.9 * blocks:
            raise CheckFailed(
                f"the seq scan missed only {misses} of {blocks} blocks in shared buffers: it "
                "did not read the table from storage"
            )
        bufs = nvmstats.relation_buffers(c, TABLE)
        redirected = sum(b.redirected for b in bufs)
        if env.engine != "se2" and nvmstats.redirected_anywhere(c):
            raise CheckFailed(f"{env.engine}: some shared buffer is redirected")
        if any(b.redirected and b.dirty for b in bufs):
            raise CheckFailed("a redirected buffer is dirty")
        notes.append(expect_redirects(env.engine, "seq scan", misses, d, redirected))

        # 2. index scan: random lookups, heap fetches through the primary key
        ev = c.execute(
            f"SELECT buffers_evicted, buffers_skipped FROM pg_buffercache_evict_relation('{TABLE}')"
        ).fetchone()
        left = nvmstats.relation_buffers(c, TABLE)
        if left:
            raise CheckFailed(f"{len(left)} buffers of {TABLE} still cached after eviction {ev}")
        _set(c, INDEX_ONLY)
        before = counters.read_counters(c)
        plan = c.execute(
            "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "
            f"SELECT count(*), sum(length(pad)) FROM {TABLE} WHERE id = ANY('{id_array}'::int[])"
        ).fetchone()[0]  # type: ignore[index]
        d = counters.delta(before, counters.read_counters(c))
        found, read_blocks = index_scan_stats(plan)
        if found != LOOKUPS:
            raise CheckFailed(f"the index scan found {found} rows, expected {LOOKUPS}")
        if read_blocks < heap_blocks:
            raise CheckFailed(
                f"the index scan missed {read_blocks} blocks (index + heap), fewer than the "
                f"{heap_blocks} heap blocks it fetched: the heap was not read from storage"
            )
        bufs = nvmstats.relation_buffers(c, TABLE)
        redirected = sum(b.redirected for b in bufs)
        if env.engine != "se2" and nvmstats.redirected_anywhere(c):
            raise CheckFailed(f"{env.engine}: some shared buffer is redirected")
        # heap misses = the distinct heap blocks (all evicted); the index's blocks are
        # redirected too in se2 (patch 0024), but some may still be cached: at least these
        notes.append(
            expect_redirects(
                env.engine, f"index scan ({LOOKUPS} lookups)", heap_blocks, d, redirected
            )
        )
        if env.engine == "se2" and redirected < heap_blocks - slack(heap_blocks):
            raise CheckFailed(
                f"index scan: only {redirected} of the {heap_blocks} heap blocks fetched are "
                "in redirected buffers"
            )
        if env.config.hybrid_pool:
            notes.append(_no_slot_when_redirected(c, redirected))
        c.execute("RESET ALL")
        notes.append(_prewarm(env.engine, c, sb))
        notes.append(_aio_debug_messages(env, c, id_array))
    notes.append(_autoprewarm(env, sb))
    with env.server.connect() as c:
        c.execute(f"DROP TABLE {TABLE}")
    if env.engine == "se2":
        notes.append(_kept_views(env))
    notes.append(redirect_btree.btree_in_place(env))
    return f"{size >> 20} MB table, {sb >> 20} MB shared_buffers, after a restart; " + "; ".join(
        notes
    )
