"""checksum: a page corrupted behind the server's back is caught exactly as in base.

A ~1 MB table (data checksums are on) is checkpointed, its buffers evicted, and one byte
in the tuple area of one block flipped in the file. Then, with the table's buffers evicted
before each probe, the block is read by:

* ``seqscan``: a sequential scan (se2 redirects these reads and verifies the page in the
  mapping, with the read-only checksum of patch 0008);
* ``index fetch``: an index scan that lands on the block (se2 redirects heap fetches too);
* ``index range scan``: an index scan over the blocks before it and the block, long enough
  that se2's heap look-ahead (nvm_index_ahead.c) announced the block to the prefetch
  helpers before fetching it: the helpers only bring it close, the fetch verifies it;
* ``seqscan, ignore_checksum_failure``: the failure is ignored, the rows are returned;
* ``seqscan, zero_damaged_pages``: the page is zeroed in the buffer (never in the file)
  and its rows disappear from the result.

Every probe's outcome (result, or SQLSTATE and message) must equal base's; base itself must
report stock PostgreSQL's ``invalid page in block N of relation ...`` (XX001) for the first
two. The server stays up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.testsuite.context import EngineEnv
from bench.testsuite.errmatch import DATA_CORRUPTED
from bench.testsuite.model import CheckFailed
from bench.testsuite.outcomes import against_base, describe, outcome, query_with

ROWS = 8_000  # ~1 MB heap
BLOCK = 7  # the block that gets corrupted
BLCKSZ = 8192
INDEX_ONLY = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"}
MUST_FAIL = ("seqscan", "index fetch", "index range scan")


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
        c.execute("VACUUM (FREEZE, ANALYZE) cksum_t")
        c.execute("CHECKPOINT")
        relpath = c.execute("SELECT pg_relation_filepath('cksum_t')").fetchone()[0]  # type: ignore[index]
        victim = c.execute(f"SELECT id FROM cksum_t WHERE ctid = '({BLOCK},1)'").fetchone()[0]  # type: ignore[index]
        path = env.server.cluster.datadir / relpath
        if path.stat().st_size < (BLOCK + 1) * BLCKSZ:
            raise CheckFailed(f"cksum_t has fewer than {BLOCK + 1} blocks")

        def evict() -> None:
            c.execute("SELECT pg_buffercache_evict_relation('cksum_t')")

        evict()
        # a byte in the middle of the block: tuple data, covered by the checksum
        flip_byte(path, BLOCK * BLCKSZ + BLCKSZ // 2)

        def probe(settings: dict[str, str], sql: str) -> dict[str, Any]:
            evict()
            return outcome(relpath, lambda: query_with(c, settings, sql))

        no_par = {"max_parallel_workers_per_gather": "0"}
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
        }
        evict()
        c.execute("DROP TABLE cksum_t")
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
    return against_base(env, "checksum", __file__, outcomes)
