"""truncated: a relation file shrinks behind the server's back.

A ~2 MB table is checkpointed, its buffers evicted, and its file cut to half its size.
Three probes then read it:

* ``seqscan count(*)``: a new scan takes the table's size from the file, so stock
  PostgreSQL silently counts the remaining half (no error);
* ``index fetch of a lost row``: an index points into the lost half; reading that block
  must fail;
* ``seqscan cursor across the cut``: a sequential scan opened *before* the cut (it still
  believes in the old size) runs into the missing blocks; must fail too. This is where a
  mapping-based engine would touch bytes beyond the end of the file (SIGBUS).

The server must stay up (same postmaster, no crash in the log), and every engine must
behave exactly like base: the same result, or the same SQLSTATE and message (file path
normalised), for each probe.
"""

from __future__ import annotations

import os

from bench.testsuite.context import EngineEnv
from bench.testsuite.errmatch import DATA_CORRUPTED, SHORT_READ_RE
from bench.testsuite.model import CheckFailed
from bench.testsuite.outcomes import against_base, describe, outcome, query_with

ROWS = 16_000  # ~2 MB heap with the pad below
INDEX_ONLY = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"}
#: probes that must raise an error (in base: XX001 "could not read blocks ...")
MUST_FAIL = ("index fetch of a lost row", "seqscan cursor across the cut")
#: cached base outcomes are only valid for this very check (any edit invalidates them)


def truncated(env: EngineEnv, limit: float) -> str:
    offset = env.server.log_offset()
    pid_before = env.server.postmaster_pid()
    with env.server.connect() as c:
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
        path = env.server.cluster.datadir / relpath
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

        # a sequential scan that starts before the cut: it sized the table at 100%
        with env.server.connect(autocommit=False) as early:
            early.execute("SET max_parallel_workers_per_gather = 0")
            early.execute("DECLARE cur NO SCROLL CURSOR FOR SELECT id, length(pad) FROM trunc_t")
            first = early.execute("FETCH 10 FROM cur").fetchall()
            if len(first) != 10:
                raise CheckFailed(f"cursor returned {first}")

            os.truncate(path, size // 2)

            outcomes = {
                "seqscan count(*)": outcome(
                    relpath, lambda: c.execute("SELECT count(*) FROM trunc_t").fetchall()
                ),
                "index fetch of a lost row": outcome(
                    relpath,
                    lambda: query_with(
                        c, INDEX_ONLY, f"SELECT id, length(pad) FROM trunc_t WHERE id = {ROWS}"
                    ),
                ),
                "seqscan cursor across the cut": outcome(
                    relpath, lambda: [(len(early.execute("FETCH ALL FROM cur").fetchall()),)]
                ),
            }
            early.rollback()
        if c.execute("SELECT 1").fetchone() != (1,):
            raise CheckFailed("SELECT 1 failed on the same connection after the probes")
    with env.server.connect() as c:
        c.execute("SELECT 1")
        c.execute("DROP TABLE trunc_t")
    if env.server.postmaster_pid() != pid_before:
        raise CheckFailed(
            f"postmaster pid changed ({pid_before} -> {env.server.postmaster_pid()}): "
            "the server restarted"
        )
    problems = env.log_problems_since(offset)
    if problems:
        raise CheckFailed("server log shows a crash: " + " | ".join(problems[:5]))

    for name in MUST_FAIL:
        if "sqlstate" not in outcomes[name]:
            raise CheckFailed(f"{name}: expected an ERROR, got {describe(outcomes[name])}")
    if env.engine == "base":
        # stock behaviour, recorded as the reference; proves the probes do hit short reads
        for name in MUST_FAIL:
            o = outcomes[name]
            if o["sqlstate"] != DATA_CORRUPTED or not SHORT_READ_RE.search(o["message"]):
                raise CheckFailed(
                    f"{name}: expected stock XX001 'could not read blocks ... read only N of M "
                    f"bytes', got {describe(o)}"
                )
    return against_base(env, "truncated", __file__, outcomes)
