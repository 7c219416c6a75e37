"""checksum: a page corrupted behind the server's back is caught exactly as in base.

A ~1 MB table (data checksums are on) is checkpointed, its buffers evicted, and one byte
in the tuple area of one block flipped in the file. Then, with the table's buffers evicted
before each probe, the block is read by:

* ``seqscan``: a sequential scan (se2 redirects these reads and verifies the page in the
  mapping, with the read-only checksum of patch 0008);
* ``index fetch``: an index scan that lands on the block (se2 redirects heap fetches too);
* ``index range scan``: an index scan over the blocks before it and the block, long enough
  that se2's heap look-ahead (nvm_index_ahead.c) announced the block to the prefetch
  helpers before fetching it (with helpers, a failed verdict of theirs is never trusted);
* ``seqscan, ignore_checksum_failure``: the failure is ignored, the rows are returned;
* ``seqscan, zero_damaged_pages``: the page is zeroed in the buffer (never in the file)
  and its rows disappear from the result.

A second table, ~5 MB, gets block 500 corrupted the same way; it is read by probes that
decide *who verifies* the block in se2 with prefetch helpers (``nvm_prefetch = helper``,
where a helper that prefetches a redirected block also verifies it and publishes a verdict
that the backend uses, and verifies itself where no finished, successful one is there).
Whether the helper's verdict on a block is there before the backend reads it is a race
the helper may lose (on a loaded machine it lost all of 5 attempts), so these probes run
with ``nvm_verify_wait_for_helper = on`` (a developer setting, for tests): a read whose
block is in a job the helpers have not finished yet waits for its verdict (at most 1 s),
and no job is retired; who verifies the block is then decided, not timed:

* ``long seqscan``: a sequential scan whose rows cost some work (a SHA-256 each), the
  helpers running ahead of the read stream; their failed verdict on the block is never
  trusted: the backend verifies the block itself and reports stock's error. With helpers,
  ``helper_verify_failed`` must grow and so must ``verified_by_helper`` (the blocks before
  it); the probe is repeated, at most 5 times, until the former does: a write in progress
  anywhere when a job is enqueued leaves that job unverified (V3), which no wait changes;
* ``long seqscan, ignore_checksum_failure``: the same with ``ignore_checksum_failure = on``:
  the helper's failed verdict is not trusted either way, the backend verifies the block and,
  as in stock, warns and uses it (all rows counted); with helpers ``helper_verify_failed``
  must grow (repeated as above);
* ``long seqscan, backend verifies``: the same with ``nvm_prefetch = off`` (and the wait
  on, which without helpers does nothing): no helper, the backend verifies every block
  (``verified_by_backend`` grows, the helper counters do not);
* ``index range scan, announced``: an index scan over the ~25 heap blocks before the block
  and the block, whose look-ahead (nvm_index_ahead.c) announces the block to the helpers,
  which verify it; with helpers ``helper_verify_failed`` must grow (repeated as above).

A third table, as big, is read by probes of the opposite direction: a helper's
*successful* verdict must not outlive the statement that asked for it (REVIEW-verify.md,
B1). A partial scan (``LIMIT``, stopping at block 450) hands the blocks beyond its stop to
the helpers, which verify them; then one byte of block 490 is flipped in the file, the
buffers are evicted, and the whole table is scanned in the same session with
``nvm_prefetch_distance = 0`` (so the rescan's own jobs are hardly ever finished in time):

* ``stale verdict, next statement``: the two scans in separate transactions;
* ``stale verdict, same transaction``: both in one transaction block (only the statement
  differs).

Both must report stock's XX001 for block 490, as base does: a build that trusted the
partial scan's verdict returned the count instead. The byte is flipped back after each.

The counters are the probing backend's own (``pgnvm_backend_counters(pg_backend_pid())``):
the sums over all processes also count autovacuum's reads of earlier checks' tables, whose
helpers verify blocks too: the likely source of the ``verified_by_helper+194`` a CI run
once saw during the ``nvm_prefetch = off`` probe (nvm_se2_m1, after regress and isolation).

Any write to a relation file anywhere in the server cancels the helpers' verdicts (V3),
so the probes run with the server's other writers quiet (``EngineEnv.writers_quiet()``:
autovacuum off, its launcher and workers gone, then a CHECKPOINT). Without that, after regress and
isolation, autovacuum's writes left the helpers' verdict on the corrupted block unused in
all 5 runs of ``long seqscan`` in a CI run (2026-11-28: ``verified_by_helper+393
verified_by_backend+2132``); in a quiet run after the same suites, before/after: the
helpers' share of the long seqscan's blocks 150 of 509 / 503 of 509.

Every probe's outcome (result, or SQLSTATE and message) must equal base's; base itself must
report stock PostgreSQL's ``invalid page in block N of relation ...`` (XX001) for the probes
that read the block without ignoring failures. The server stays up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.core import counters
from bench.testsuite import nvmstats
from bench.testsuite.context import EngineEnv
from bench.testsuite.errmatch import DATA_CORRUPTED
from bench.testsuite.model import CheckFailed
from bench.testsuite.outcomes import against_base, describe, outcome, query_with

ROWS = 8_000  # ~1 MB heap
BLOCK = 7  # the block that gets corrupted
BLCKSZ = 8192
#: the stale-verdict probes: a partial scan stops at STALE_STOP, its helpers have verified
#: the blocks up to ~nvm_prefetch_distance (64) beyond, STALE_BLOCK among them
STALE_STOP = 450
STALE_BLOCK = 490
STALE_PROBES = ("stale verdict, next statement", "stale verdict, same transaction")
INDEX_ONLY = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"}
MUST_FAIL = (
    "seqscan",
    "index fetch",
    "index range scan",
    "long seqscan",
    "long seqscan, backend verifies",
    "index range scan, announced",
    *STALE_PROBES,
)
BIG_ROWS = 60_000  # ~740 blocks (81 rows of ~100 bytes per block)
BIG_BLOCK = 500  # far into the table: helpers run ahead of a scan that gets there
#: per-row work that keeps the backend busy while helpers verify the blocks ahead
WORK = "sha256(convert_to(repeat(pad, 4), 'UTF8')) <> ''::bytea"
#: the same amount of work on the id only, for a scan that reads the corrupted block's
#: tuples (the flipped byte makes its pad invalid UTF-8)
WORK_ON_ID = "sha256(sha256(sha256(int4send(id)))) <> ''::bytea"
#: the probes that decide who verifies: a read waits for the helper's verdict on its block
#: (nvm_verify.c). Without it the helper's verdict came first only when it won a race: the
#: index range scan lost all 5 attempts once in CI (695ab84; then made to hash 32x as much
#: per row), the long seqscan all 5 on a loaded machine (2026-11-27)
WAIT_FOR_HELPER = {"nvm_verify_wait_for_helper": "on"}
#: a probe that must see a helper's failed verdict is repeated this often: a write in
#: progress when a job is enqueued leaves the job unverified (the server's other writers
#: are kept quiet: a spare for what that cannot rule out, e.g. a checkpoint forced by WAL)
ATTEMPTS = 5


def flip_byte(path: Path, offset: int) -> None:
    """Invert one byte of a file in place."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())


def checksum(env: EngineEnv, limit: float) -> str:
    offset = env.server.log_offset()
    pid_before = env.server.postmaster_pid()
    with env.server.connect() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        nvmstats.ensure_extensions(c)
        c.execute("ALTER EXTENSION pgnvm UPDATE")
        if c.execute("SHOW data_checksums").fetchone() != ("on",):
            raise CheckFailed("data_checksums is off")
        c.execute("DROP TABLE IF EXISTS cksum_t")
        c.execute(
            "CREATE TABLE cksum_t (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)"
        )
        c.execute(
            "INSERT INTO cksum_t SELECT g, repeat(md5(g::text), 2) FROM generate_series(1, %s) g",
            (ROWS,),
        )
        c.execute("DROP TABLE IF EXISTS cksum_big")
        c.execute(
            "CREATE TABLE cksum_big (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)"
        )
        c.execute(
            "INSERT INTO cksum_big SELECT g, repeat(md5(g::text), 2) FROM generate_series(1, %s) g",
            (BIG_ROWS,),
        )
        c.execute("DROP TABLE IF EXISTS cksum_stale")
        c.execute(
            "CREATE TABLE cksum_stale (id int PRIMARY KEY, pad text) "
            "WITH (autovacuum_enabled = off)"
        )
        c.execute(
            "INSERT INTO cksum_stale SELECT g, repeat(md5(g::text), 2) "
            "FROM generate_series(1, %s) g",
            (BIG_ROWS,),
        )
        c.execute("VACUUM (FREEZE, ANALYZE) cksum_t")
        c.execute("VACUUM (FREEZE, ANALYZE) cksum_big")
        c.execute("VACUUM (FREEZE, ANALYZE) cksum_stale")
        c.execute("CHECKPOINT")
        relpath = c.execute("SELECT pg_relation_filepath('cksum_t')").fetchone()[0]  # type: ignore[index]
        victim = c.execute(f"SELECT id FROM cksum_t WHERE ctid = '({BLOCK},1)'").fetchone()[0]  # type: ignore[index]
        path = env.server.cluster.datadir / relpath
        if path.stat().st_size < (BLOCK + 1) * BLCKSZ:
            raise CheckFailed(f"cksum_t has fewer than {BLOCK + 1} blocks")
        big_relpath = c.execute("SELECT pg_relation_filepath('cksum_big')").fetchone()[0]  # type: ignore[index]
        big_victim = c.execute(
            f"SELECT id FROM cksum_big WHERE ctid = '({BIG_BLOCK},1)'"
        ).fetchone()[0]  # type: ignore[index]
        big_path = env.server.cluster.datadir / big_relpath
        if big_path.stat().st_size < (BIG_BLOCK + 20) * BLCKSZ:
            raise CheckFailed(f"cksum_big has fewer than {BIG_BLOCK + 20} blocks")
        stale_relpath = c.execute("SELECT pg_relation_filepath('cksum_stale')").fetchone()[0]  # type: ignore[index]
        stale_path = env.server.cluster.datadir / stale_relpath
        if stale_path.stat().st_size < (STALE_BLOCK + 100) * BLCKSZ:
            raise CheckFailed(f"cksum_stale has fewer than {STALE_BLOCK + 100} blocks")
        # the partial scan returns the rows before the first of block STALE_STOP
        stale_limit = c.execute(
            f"SELECT id - 1 FROM cksum_stale WHERE ctid = '({STALE_STOP},1)'"
        ).fetchone()[0]  # type: ignore[index]

        def evict() -> None:
            c.execute("SELECT pg_buffercache_evict_relation('cksum_t')")
            c.execute("SELECT pg_buffercache_evict_relation('cksum_big')")

        evict()
        # a byte in the middle of the block: tuple data, covered by the checksum
        flip_byte(path, BLOCK * BLCKSZ + BLCKSZ // 2)
        flip_byte(big_path, BIG_BLOCK * BLCKSZ + BLCKSZ // 2)

        def probe(settings: dict[str, str], sql: str, rel: str = relpath) -> dict[str, Any]:
            evict()
            return outcome(rel, lambda: query_with(c, settings, sql))

        helpers = env.engine == "se2" and env.config.prefetch == "helper"
        notes: list[str] = []

        def probe_counted(
            name: str, settings: dict[str, str], sql: str, until: str | None
        ) -> dict[str, Any]:
            """``probe`` on cksum_big with the counters around it; with helpers and
            ``until``, repeated (at most ATTEMPTS times) until that counter grows, every
            attempt with the same outcome. Returns the outcome, keeps the counters' growth
            in ``grown[name]``."""
            first: dict[str, Any] | None = None
            total: dict[str, int] = {}
            for attempt in range(1, ATTEMPTS + 1):
                before = counters.read_counters(c, own=True)
                o = probe(settings, sql, big_relpath)
                d = counters.delta(before, counters.read_counters(c, own=True))
                total = {k: total.get(k, 0) + v for k, v in d.items()}
                if first is None:
                    first = o
                elif o != first:
                    raise CheckFailed(
                        f"{name}: attempt {attempt} gave {describe(o)}, attempt 1 {describe(first)}"
                    )
                if not (helpers and until) or d[until] > 0:
                    break
            grown[name] = total
            notes.append(f"{name}: {attempt} run(s), " + counters.fmt(total, VERIFY_COUNTERS))
            assert first is not None
            return first

        grown: dict[str, dict[str, int]] = {}

        def probe_stale(name: str, in_transaction: bool) -> dict[str, Any]:
            """Partial scan of cksum_stale, flip a byte of STALE_BLOCK (beyond the stop,
            verified by the helpers of the partial scan), evict, rescan the whole table in
            the same session with ``nvm_prefetch_distance = 0``; in one transaction block
            if ``in_transaction``. The byte is flipped back afterwards."""
            offset = STALE_BLOCK * BLCKSZ + BLCKSZ // 2
            evict_stale = "SELECT pg_buffercache_evict_relation('cksum_stale')"
            for k, v in no_par.items():
                c.execute(f"SET {k} = '{v}'")
            c.execute(evict_stale)
            before = counters.read_counters(c, own=True)
            flipped = False
            try:
                if in_transaction:
                    c.execute("BEGIN")
                c.execute(
                    f"SELECT count(*) FROM (SELECT id FROM cksum_stale LIMIT {stale_limit}) s"
                )
                flip_byte(stale_path, offset)
                flipped = True
                c.execute(evict_stale)
                c.execute("SET nvm_prefetch_distance = 0")
                o = outcome(
                    stale_relpath, lambda: c.execute("SELECT count(*) FROM cksum_stale").fetchall()
                )
            finally:
                if in_transaction:
                    c.execute("ROLLBACK")
                if flipped:
                    flip_byte(stale_path, offset)
                c.execute("RESET ALL")
                c.execute(evict_stale)
            grown[name] = counters.delta(before, counters.read_counters(c, own=True))
            notes.append(f"{name}: " + counters.fmt(grown[name], VERIFY_COUNTERS))
            return o

        # every scan from block 0: with 16 MB of shared_buffers a table of more than 512
        # blocks is synchronized-scanned, and a scan would start where the last one failed
        no_par = {"max_parallel_workers_per_gather": "0", "synchronize_seqscans": "off"}
        # any write in the server cancels the helpers' verdicts (V3): no autovacuum
        with env.writers_quiet(c):
            outcomes = {
                "seqscan": probe(no_par, "SELECT count(*) FROM cksum_t"),
                "index fetch": probe(
                    INDEX_ONLY, f"SELECT id, length(pad) FROM cksum_t WHERE id = {victim}"
                ),
                "index range scan": probe(
                    INDEX_ONLY,
                    f"SELECT count(*), sum(length(pad)) FROM cksum_t WHERE id <= {victim} + 50",
                ),
                "seqscan, ignore_checksum_failure": probe(
                    no_par | {"ignore_checksum_failure": "on"}, "SELECT count(*) FROM cksum_t"
                ),
                "seqscan, zero_damaged_pages": probe(
                    no_par | {"zero_damaged_pages": "on"}, "SELECT count(*) FROM cksum_t"
                ),
                "long seqscan": probe_counted(
                    "long seqscan",
                    no_par | WAIT_FOR_HELPER,
                    f"SELECT count(*) FROM cksum_big WHERE {WORK}",
                    "helper_verify_failed",
                ),
                "long seqscan, ignore_checksum_failure": probe_counted(
                    "long seqscan, ignore_checksum_failure",
                    no_par | WAIT_FOR_HELPER | {"ignore_checksum_failure": "on"},
                    f"SELECT count(*) FROM cksum_big WHERE {WORK_ON_ID}",
                    "helper_verify_failed",
                ),
                "long seqscan, backend verifies": probe_counted(
                    "long seqscan, backend verifies",
                    no_par | WAIT_FOR_HELPER | {"nvm_prefetch": "off"},
                    f"SELECT count(*) FROM cksum_big WHERE {WORK}",
                    None,
                ),
                "index range scan, announced": probe_counted(
                    "index range scan, announced",
                    INDEX_ONLY | WAIT_FOR_HELPER,
                    "SELECT count(*), sum(length(pad)) FROM cksum_big "
                    f"WHERE id BETWEEN {big_victim} - 1500 AND {big_victim} + 50 AND {WORK}",
                    "helper_verify_failed",
                ),
                "stale verdict, next statement": probe_stale(
                    "stale verdict, next statement", False
                ),
                "stale verdict, same transaction": probe_stale(
                    "stale verdict, same transaction", True
                ),
            }
        evict()
        c.execute("DROP TABLE cksum_t")
        c.execute("DROP TABLE cksum_big")
        c.execute("DROP TABLE cksum_stale")
        if c.execute("SELECT 1").fetchone() != (1,):
            raise CheckFailed("SELECT 1 failed after the probes")
    if env.server.postmaster_pid() != pid_before:
        raise CheckFailed("the postmaster restarted")
    problems = env.log_problems_since(offset)
    if problems:
        raise CheckFailed("server log shows a crash: " + " | ".join(problems[:5]))

    for name in MUST_FAIL:
        o = outcomes[name]
        if o.get("sqlstate") != DATA_CORRUPTED or "invalid page in block" not in o["message"]:
            raise CheckFailed(f"{name}: expected XX001 'invalid page in block ...', {describe(o)}")
    if outcomes["seqscan, ignore_checksum_failure"] != {"result": [[str(ROWS)]]}:
        raise CheckFailed(
            "ignore_checksum_failure: expected all rows, "
            f"{describe(outcomes['seqscan, ignore_checksum_failure'])}"
        )
    if outcomes["long seqscan, ignore_checksum_failure"] != {"result": [[str(BIG_ROWS)]]}:
        raise CheckFailed(
            "long seqscan, ignore_checksum_failure: expected all rows, "
            f"{describe(outcomes['long seqscan, ignore_checksum_failure'])}"
        )
    if env.engine == "se2":
        expect_verifiers(grown, helpers)
    result = against_base(env, "checksum", __file__, outcomes)
    return result + ("; " + "; ".join(notes) if env.engine == "se2" else "")


#: the counters of who verified redirected pages (storage/nvm_stats.h)
VERIFY_COUNTERS = ("verified_by_helper", "verified_by_backend", "helper_verify_failed")


def expect_verifiers(grown: dict[str, dict[str, int]], helpers: bool) -> None:
    """se2: who verified the big table's blocks in each probe (counters' growth)."""
    off = grown["long seqscan, backend verifies"]
    if (
        off["verified_by_backend"] < BIG_BLOCK
        or off["verified_by_helper"]
        or off["helper_verify_failed"]
    ):
        raise CheckFailed(
            "long seqscan, backend verifies: expected the backend to verify every block "
            f"(verified_by_backend >= {BIG_BLOCK}) and no helper, "
            + counters.fmt(off, VERIFY_COUNTERS)
        )
    for name in (
        "long seqscan",
        "long seqscan, ignore_checksum_failure",
        "index range scan, announced",
    ):
        d = grown[name]
        if not helpers:
            if d["verified_by_helper"] or d["helper_verify_failed"]:
                raise CheckFailed(f"{name}: no helpers, yet " + counters.fmt(d, VERIFY_COUNTERS))
            continue
        if d["helper_verify_failed"] < 1:
            raise CheckFailed(
                f"{name}: no helper verified the corrupted block before the backend read it "
                f"in {ATTEMPTS} runs: " + counters.fmt(d, VERIFY_COUNTERS)
            )
        if d["verified_by_helper"] < 1:
            raise CheckFailed(
                f"{name}: the backend used no helper's verdict: " + counters.fmt(d, VERIFY_COUNTERS)
            )
