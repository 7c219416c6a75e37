"""enospc: a tablespace on a tiny tmpfs fills up; the error is clean and the server stays up."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path

import psycopg

from bench.core import osuser
from bench.testsuite.context import EngineEnv
from bench.testsuite.errmatch import ServerError, enospc_problem
from bench.testsuite.model import CheckFailed, CheckSkipped
from bench.testsuite.proc import is_root

SIZE_MB = 24
BATCH_ROWS = 2000
MAX_BATCHES = 10_000  # bound: 24 MB fills after ~100 batches


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def enospc(env: EngineEnv, limit: float) -> str:
    if not is_root():
        raise CheckSkipped("needs root to mount a tmpfs")
    mnt = Path(tempfile.mkdtemp(prefix="pgnvm-enospc-"))
    mounted = False
    offset = env.server.log_offset()
    pid_before = env.server.postmaster_pid()
    try:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m,mode=0700", "pgnvm-enospc", str(mnt)],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise CheckFailed(f"mount tmpfs failed: {r.stderr.strip()}")
        mounted = True
        osuser.chown_to_server(mnt)
        with env.server.connect() as c:
            c.execute("DROP TABLE IF EXISTS enospc_t")
            c.execute("DROP TABLESPACE IF EXISTS tiny")
            c.execute(f"CREATE TABLESPACE tiny LOCATION '{mnt}'")
            c.execute("CREATE TABLE enospc_t (id bigint, pad text) TABLESPACE tiny")
            committed = 0
            err: ServerError | None = None
            for _ in range(MAX_BATCHES):
                try:
                    c.execute(
                        "INSERT INTO enospc_t SELECT g, repeat(md5(g::text), 4) "
                        "FROM generate_series(%s::bigint, %s::bigint) g",
                        (committed + 1, committed + BATCH_ROWS),
                    )
                except psycopg.Error as e:
                    diag = e.diag
                    err = ServerError(diag.sqlstate or "?", diag.message_primary or str(e))
                    break
                committed += BATCH_ROWS
            problem = enospc_problem(err)
            if problem:
                raise CheckFailed(f"after {committed} committed rows: {problem}")
            if c.execute("SELECT 1").fetchone() != (1,):
                raise CheckFailed("SELECT 1 failed after ENOSPC")
            count = c.execute("SELECT count(*) FROM enospc_t").fetchone()
            if count is None or count[0] != committed:
                raise CheckFailed(
                    f"{committed} rows were committed before ENOSPC but "
                    f"count(*) = {count[0] if count else None}"
                )
            distinct = c.execute(
                "SELECT count(DISTINCT id), min(id), max(id) FROM enospc_t"
            ).fetchone()
            if distinct != (committed, 1, committed):
                raise CheckFailed(
                    f"committed ids 1..{committed}, table has (count, min, max) = {distinct}"
                )
            try:
                c.execute("CHECKPOINT")
            except psycopg.Error as e:
                raise CheckFailed(f"CHECKPOINT after ENOSPC failed: {e}") from e
            c.execute("DROP TABLE enospc_t")
            c.execute("DROP TABLESPACE tiny")
        if env.server.postmaster_pid() != pid_before:
            raise CheckFailed(
                f"postmaster pid changed ({pid_before} -> {env.server.postmaster_pid()})"
            )
        problems = env.log_problems_since(offset)
        if problems:
            raise CheckFailed("server log shows a crash: " + " | ".join(problems[:5]))
        return (
            f"{committed} rows committed on a {SIZE_MB} MB tablespace, then {err}; "
            "server up, rows intact, CHECKPOINT ok"
        )
    finally:
        if mounted:
            with contextlib.suppress(Exception), env.server.connect() as c:
                c.execute("DROP TABLE IF EXISTS enospc_t")
                c.execute("DROP TABLESPACE IF EXISTS tiny")
            _umount(mnt)
        with contextlib.suppress(OSError):
            mnt.rmdir()
