"""cow_failure: a copy-on-write that fails (the segment cannot be mapped) leaves the page as
it was, and the next access to it works (issue: "a stuck copy-on-write").

Steps (every engine; the failure path is se1's and se2's):

1. A 3000-row table, frozen and checkpointed, its buffers evicted, then one sequential scan:
   in se2 its pages are now read in place (redirected).
2. Session B maps the catalogs (EXPLAIN of the UPDATE), then its address-space limit is set
   to its current size + 256 MB (``prlimit`` as the server user): it cannot map the table's
   1 GB segment any more. ``UPDATE ... WHERE ctid = '(0,10)'``: se1/se2 fail with
   ``could not map file`` (53200), base succeeds (it never maps).
3. Session C updates another row of the same page with ``statement_timeout = 10s``: it must
   finish at once. Before the fix, B's failed copy left NVM_BUF_COW_RUNNING set and C slept
   on the buffer's condition variable until its timeout.
4. B's limit is lifted and B retries: it must succeed (before the fix: it waited for ever).

A step that does not finish within WAIT_S seconds fails the check, and the server is
restarted in immediate mode (a backend stuck with interrupts held cannot be terminated).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench import osuser
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

TABLE = "cow_fail_t"
WAIT_S = 15.0  # a step that takes longer is stuck
MAPPING_ERROR = "53200"  # ERRCODE_OUT_OF_MEMORY: could not map file


def _in_thread(fn: Callable[[], str], wait: float) -> str | None:
    """fn()'s outcome, or None if it has not finished within ``wait`` seconds."""
    out: dict[str, str] = {}

    def run() -> None:
        try:
            out["r"] = fn()
        except psycopg.Error as e:
            out["r"] = f"{e.sqlstate}: {str(e).strip().splitlines()[0]}"

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(wait)
    return out.get("r")


def _vm_size(pid: int) -> int:
    """The process's address-space size in bytes (/proc/<pid>/status VmSize)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise CheckFailed(f"no VmSize in /proc/{pid}/status")


def _prlimit_as(pid: int, soft: str) -> None:
    """Set the soft RLIMIT_AS of a backend (as the server user: root may lack
    CAP_SYS_RESOURCE, and a process may always lower its own user's soft limits)."""
    r = osuser.run_pg(["prlimit", f"--pid={pid}", f"--as={soft}:"], capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed(f"prlimit --pid={pid} --as={soft}: failed: {r.stderr.strip()}")


def _update(c: psycopg.Connection[Any], ctid: str) -> Callable[[], str]:
    def run() -> str:
        c.execute(f"UPDATE {TABLE} SET x = x + 1 WHERE ctid = '{ctid}'")
        return "ok"

    return run


class _Stuck(CheckFailed):
    """A step did not finish within WAIT_S seconds."""


def _step(what: str, fn: Callable[[], str], want: str) -> str:
    got = _in_thread(fn, WAIT_S)
    if got is None:
        raise _Stuck(f"{what}: still waiting after {WAIT_S:.0f} s")
    if not got.startswith(want):
        raise CheckFailed(f"{what}: {got} (expected {want})")
    return got


def _steps(env: EngineEnv, b: psycopg.Connection[Any], c: psycopg.Connection[Any]) -> list[str]:
    b.execute(f"EXPLAIN UPDATE {TABLE} SET x = x + 1 WHERE ctid = '(0,10)'")
    pid = b.info.backend_pid
    _prlimit_as(pid, str(_vm_size(pid) + (256 << 20)))
    want = "ok" if env.engine == "base" else MAPPING_ERROR
    got = _step("UPDATE under the address-space limit", _update(b, "(0,10)"), want)
    notes = [f"UPDATE under the limit: {got.split(':')[0]}"]

    c.execute("SET statement_timeout = '10s'")
    _step("another UPDATE of the same page after that", _update(c, "(0,11)"), "ok")
    notes.append("another UPDATE of the page: ok at once")

    _prlimit_as(pid, "unlimited")
    _step("the first UPDATE again, limit lifted", _update(b, "(0,10)"), "ok")
    notes.append("retry without the limit: ok")
    return notes


def cow_failure(env: EngineEnv, limit: float) -> str:
    with env.connect() as a:
        a.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        a.execute(f"DROP TABLE IF EXISTS {TABLE}")
        a.execute(f"CREATE TABLE {TABLE} (x int, pad text) WITH (fillfactor = 100)")
        a.execute(f"INSERT INTO {TABLE} SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g")
        a.execute(f"VACUUM (FREEZE) {TABLE}")
        a.execute("CHECKPOINT")
        a.execute(f"SELECT pg_buffercache_evict_relation('{TABLE}')")
        a.execute(f"SELECT count(*) FROM {TABLE}")
        b = env.connect()
        c = env.connect()
        try:
            notes = _steps(env, b, c)
        except _Stuck:
            # a backend stuck with interrupts held cannot be terminated, and a connection
            # cannot be closed while a thread waits on it: restart the server first
            env.restart("immediate")
            raise
        finally:
            b.close()
            c.close()
        # base's first UPDATE succeeded; the others' failed and changed nothing
        updates = 3 if env.engine == "base" else 2
        got = a.execute(f"SELECT count(*), sum(x) FROM {TABLE}").fetchone()
        if got != (3000, 3000 * 3001 // 2 + updates):
            raise CheckFailed(f"table after the updates: (count, sum) = {got}")
        a.execute(f"DROP TABLE {TABLE}")
    return "; ".join(notes)
