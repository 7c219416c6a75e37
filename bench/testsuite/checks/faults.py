"""cow_failure: a copy-on-write whose segment cannot be mapped leaves the page usable
(issue: "a stuck copy-on-write").

Steps (every engine; the mapping paths are se2's: in base and se1 the scan copied the
pages into shared buffers, and the UPDATEs find them there):

1. A 3000-row table, frozen and checkpointed, its buffers evicted, then one sequential scan:
   in se2 its pages are now read in place (redirected).
2. Session B maps the catalogs (EXPLAIN of the UPDATE), then its address-space limit is set
   to its current size + 256 MB (``prlimit`` as the server user): it cannot map the table's
   1 GB segment without giving up other mappings. ``UPDATE ... WHERE ctid = '(0,10)'``
   must succeed in every engine (se2 gives up mappings to make room for the copy's
   source: ``mappings_evicted``). Before the fix it failed with ``could not map file`` (53200)
   after setting NVM_BUF_COW_RUNNING, which nothing cleared.
3. Session C updates another row of the same page with ``statement_timeout = 10s``: it must
   finish at once (before the fix: it slept on the buffer's condition variable until its
   timeout).
4. Session D cannot map anything (``nvm_debug_fail_mappings = on``) and updates a row of
   another redirected page: se2 copies the page into its buffer from the file, read with
   read() (``mapping_fallbacks``).
5. B's limit is lifted and B runs its UPDATE again (0 rows now: the row moved): it must
   finish (before the fix: it waited for ever).

A step that does not finish within WAIT_S seconds fails the check, and the server is
restarted in immediate mode (a backend stuck with interrupts held cannot be terminated).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.core import counters, osuser
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

TABLE = "cow_fail_t"
WAIT_S = 15.0  # a step that takes longer is stuck


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


def _grew(before: dict[str, int], after: dict[str, int], key: str) -> int:
    return after[key] - before[key]


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
    # only se2 needs a mapping here: base and se1 copied the pages into buffers
    mapped = env.engine == "se2"
    b.execute(f"EXPLAIN UPDATE {TABLE} SET x = x + 1 WHERE ctid = '(0,10)'")
    pid = b.info.backend_pid
    _prlimit_as(pid, str(_vm_size(pid) + (256 << 20)))
    before = counters.read_counters(c)
    _step("UPDATE under the address-space limit", _update(b, "(0,10)"), "ok")
    evicted = _grew(before, counters.read_counters(c), "mappings_evicted")
    if mapped and evicted < 1:
        raise CheckFailed("the UPDATE under the limit gave up no mapping to make room")
    notes = [f"UPDATE under the limit: ok ({evicted} mappings given up)"]

    c.execute("SET statement_timeout = '10s'")
    _step("another UPDATE of the same page after that", _update(c, "(0,11)"), "ok")
    notes.append("another UPDATE of the page: ok at once")

    c.execute("SET nvm_debug_fail_mappings = on")
    before = counters.read_counters(c)
    _step("UPDATE of another page, no mapping possible", _update(c, "(1,1)"), "ok")
    fallbacks = _grew(before, counters.read_counters(c), "mapping_fallbacks")
    c.execute("RESET nvm_debug_fail_mappings")
    if mapped and fallbacks < 1:
        raise CheckFailed("the UPDATE without mappings did not fall back to read()")
    notes.append(f"UPDATE without mappings: ok ({fallbacks} read()s)")

    _prlimit_as(pid, "unlimited")
    _step("the first UPDATE again, limit lifted", _update(b, "(0,10)"), "ok")
    notes.append("retry without the limit: ok")
    return notes


def cow_failure(env: EngineEnv, limit: float) -> str:
    with env.server.connect() as a:
        a.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        a.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
        a.execute(f"DROP TABLE IF EXISTS {TABLE}")
        a.execute(f"CREATE TABLE {TABLE} (x int, pad text) WITH (fillfactor = 100)")
        a.execute(f"INSERT INTO {TABLE} SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g")
        a.execute(f"VACUUM (FREEZE) {TABLE}")
        a.execute("CHECKPOINT")
        a.execute(f"SELECT pg_buffercache_evict_relation('{TABLE}')")
        a.execute(f"SELECT count(*) FROM {TABLE}")
        b = env.server.connect()
        c = env.server.connect()
        try:
            notes = _steps(env, b, c)
        except _Stuck:
            # a backend stuck with interrupts held cannot be terminated, and a connection
            # cannot be closed while a thread waits on it: restart the server first
            env.server.restart("immediate")
            raise
        finally:
            b.close()
            c.close()
        # three UPDATEs changed a row each; B's second found none (the row had moved)
        got = a.execute(f"SELECT count(*), sum(x) FROM {TABLE}").fetchone()
        if got != (3000, 3000 * 3001 // 2 + 3):
            raise CheckFailed(f"table after the updates: (count, sum) = {got}")
        a.execute(f"DROP TABLE {TABLE}")
    return "; ".join(notes)


# --------------------------------------------------------------------------- mapping_limits

ML_TABLES = 1500  # relations, each its own segment file
ML_BATCH = 250  # tables created / dropped per transaction (lock table size)
ML_CAP = 8  # nvm_max_mappings during the check
#: the long-lived processes that write segments back, whose own counters bound their mappings
ML_WRITERS = ("checkpointer", "background writer")
ML_SUM = ML_TABLES * (ML_TABLES + 1) // 2


def _each_table(c: psycopg.Connection[Any], sql: str) -> None:
    """Run ``sql`` (a format() string with %1$s = the table's number) for every table, in
    batches of ML_BATCH per transaction."""
    for lo in range(1, ML_TABLES + 1, ML_BATCH):
        hi = min(lo + ML_BATCH - 1, ML_TABLES)
        c.execute(
            f"DO $$ BEGIN FOR i IN {lo}..{hi} LOOP EXECUTE format($f${sql}$f$, i); END LOOP; END $$"
        )


def _sum_all(c: psycopg.Connection[Any]) -> int:
    """pgnvm_ml_sum() (made by mapping_limits()): one read of every table."""
    row = c.execute("SELECT pgnvm_ml_sum()").fetchone()
    assert row is not None
    return int(row[0])


def _checkpoint_lsn(c: psycopg.Connection[Any]) -> str:
    row = c.execute("SELECT checkpoint_lsn FROM pg_control_checkpoint()").fetchone()
    assert row is not None
    return str(row[0])


def _checkpointer_pid(c: psycopg.Connection[Any]) -> int:
    row = c.execute(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"
    ).fetchone()
    if row is None:
        raise CheckFailed("no checkpointer in pg_stat_activity")
    return int(row[0])


def _writer_pids(c: psycopg.Connection[Any]) -> dict[str, int]:
    """The PIDs of :data:`ML_WRITERS` (pg_stat_activity's backend_type)."""
    rows = c.execute(
        "SELECT backend_type, pid FROM pg_stat_activity WHERE backend_type = ANY(%s)",
        (list(ML_WRITERS),),
    ).fetchall()
    pids = {str(t): int(p) for t, p in rows}
    missing = [w for w in ML_WRITERS if w not in pids]
    if missing:
        raise CheckFailed(f"no {', '.join(missing)} in pg_stat_activity")
    return pids


def _checkpoints_done(c: psycopg.Connection[Any]) -> int:
    row = c.execute("SELECT num_done FROM pg_stat_checkpointer").fetchone()
    assert row is not None
    return int(row[0])


def _held_bound(who: str, grown: dict[str, int], lifetimes: int, what: str) -> str | None:
    """The bound of one process over a window: it lets go of mappings without counting
    them as evicted only at the ends of ``lifetimes`` spans (smgrdestroyall() after each
    checkpoint in the checkpointer and the bgwriter; in a backend, closing a relation, which
    nothing makes it do during the scan, or a transaction's end for relations the relcache
    does not hold); in each span it holds at most ML_CAP, so whatever it created beyond
    ML_CAP per span must have been evicted. A process that keeps every segment it touches
    (the defect) evicts nothing. None if the bound holds, else the failure."""
    created, evicted = grown["mappings_created"], grown["mappings_evicted"]
    if evicted >= created - ML_CAP * lifetimes:
        return None
    return (
        f"{who} ({what}) with nvm_max_mappings={ML_CAP}: {created} mappings made, "
        f"{evicted} given up (expected >= {created - ML_CAP * lifetimes}: at most {ML_CAP} "
        f"held in each of its {lifetimes} smgr lifetimes)"
    )


def _wait_setting(env: EngineEnv, name: str, value: str) -> None:
    """Wait until new backends see the reloaded value of ``name``."""
    deadline = time.monotonic() + 10
    while True:
        with env.server.connect() as probe:
            got = probe.execute(f"SHOW {name}").fetchone()
        if got == (value,):
            return
        if time.monotonic() > deadline:
            raise CheckFailed(f"{name} is {got}, not {value}, 10 s after the reload")
        time.sleep(0.1)


def mapping_limits(env: EngineEnv, limit: float) -> str:
    """Thousands of relations with nvm_max_mappings = 8: checkpoints and scans work, the
    least recently used mappings are given up (mappings_evicted); with an address-space
    limit on the checkpointer (no mapping possible at all), a CHECKPOINT still writes
    everything, with write() (mapping_fallbacks), and the checkpoint LSN moves; a backend
    that cannot map (nvm_debug_fail_mappings) reads everything with read(). Before the fix,
    each process kept a mapping of every segment it touched, and a checkpointer that could
    not map failed every checkpoint ("checkpoint request failed")."""
    mapped = env.engine != "base"
    notes: list[str] = []
    with env.server.temporary({"nvm_max_mappings": str(ML_CAP)}), env.server.connect() as c:
        c.execute("SELECT pg_reload_conf()")
        c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        c.execute(
            "CREATE OR REPLACE FUNCTION pgnvm_ml_sum() RETURNS bigint LANGUAGE plpgsql AS $$ "
            "DECLARE s bigint := 0; v int; BEGIN "
            f"FOR i IN 1..{ML_TABLES} LOOP "
            "EXECUTE format('SELECT a FROM pgnvm_ml_%s', i) INTO v; s := s + v; END LOOP; "
            "RETURN s; END $$"
        )
        try:
            _wait_setting(env, "nvm_max_mappings", str(ML_CAP))
            # 1. ~1500 segments are written (by the bgwriter, at the latest by the
            #    checkpoint) through at most 8 mappings per process. Each writer is judged
            #    by its own counters: summed over the cluster, mappings let go at an
            #    smgrdestroyall() (the bgwriter's after each checkpoint) or by a process
            #    that exits are not "evicted", and a bound on the sums failed at random.
            writers = _writer_pids(c)
            ckpts = _checkpoints_done(c)
            before = counters.read_counters(c)
            before_w = {w: counters.read_counters(c, pid=p) for w, p in writers.items()}
            _each_table(c, "CREATE TABLE pgnvm_ml_%1$s (a int)")
            _each_table(c, "INSERT INTO pgnvm_ml_%1$s VALUES (%1$s)")
            lsn = _checkpoint_lsn(c)
            c.execute("CHECKPOINT")
            after = counters.read_counters(c)
            if _writer_pids(c) != writers:
                raise CheckFailed(f"a writer restarted during the check: {writers}")
            grown_w = {
                w: counters.delta(before_w[w], counters.read_counters(c, pid=p))
                for w, p in writers.items()
            }
            lifetimes = 1 + _checkpoints_done(c) - ckpts
            created = _grew(before, after, "mappings_created")
            evicted = _grew(before, after, "mappings_evicted")
            if _checkpoint_lsn(c) == lsn:
                raise CheckFailed("CHECKPOINT did not move the checkpoint LSN")
            if mapped and created < ML_TABLES:
                raise CheckFailed(
                    f"checkpoint of {ML_TABLES} relations: {created} mappings made "
                    f"(expected >= {ML_TABLES})"
                )
            if mapped:
                for w, grown in grown_w.items():
                    failure = _held_bound(w, grown, lifetimes, f"{lifetimes - 1} checkpoints")
                    if failure:
                        raise CheckFailed(failure)
            if not mapped and created + evicted:
                raise CheckFailed(f"base made {created} mappings")
            notes.append(
                f"checkpoint: {created} mappings made, {evicted} given up; "
                + ", ".join(
                    f"{w} {g['mappings_created']}/{g['mappings_evicted']}"
                    for w, g in grown_w.items()
                )
            )

            # 2. a backend reads them all, cold, in one statement, through at most 8
            #    mappings (its own counters; three spans: the statement and the two that
            #    read the counters, which may map catalogs)
            c.execute("SELECT pg_buffercache_evict_all()")
            before = counters.read_counters(c, own=True)
            total = _sum_all(c)
            grown = counters.delta(before, counters.read_counters(c, own=True))
            if total != ML_SUM:
                raise CheckFailed(f"sum over the {ML_TABLES} tables: {total} != {ML_SUM}")
            if mapped and grown["mappings_created"] < ML_TABLES:
                raise CheckFailed(
                    f"cold scan of {ML_TABLES} relations: {grown['mappings_created']} "
                    f"mappings made (expected >= {ML_TABLES})"
                )
            failure = _held_bound("the scanning backend", grown, 3, "one statement")
            if mapped and failure:
                raise CheckFailed(failure)
            notes.append(
                f"cold scan of all: sum ok, {grown['mappings_created']} mappings made, "
                f"{grown['mappings_evicted']} given up"
            )

            # 3. the checkpointer cannot map anything: write() instead. Every page the
            #    UPDATEs dirty must still be dirty at the CHECKPOINT: one written before it
            #    by another process (the background writer's LRU scan or slot cleaning, an
            #    autovacuum worker evicting it) goes through that process' mapping and is
            #    no fallback. So those writers are quiet for the step.
            with env.writers_quiet(c, also={"bgwriter_lru_maxpages": "0"}):
                ckpt = _checkpointer_pid(c)
                _prlimit_as(ckpt, str(_vm_size(ckpt) + (256 << 20)))
                try:
                    _each_table(c, "UPDATE pgnvm_ml_%1$s SET a = a")
                    before = counters.read_counters(c)
                    lsn = _checkpoint_lsn(c)
                    c.execute("CHECKPOINT")
                    after = counters.read_counters(c)
                finally:
                    _prlimit_as(ckpt, "unlimited")
            fallbacks = _grew(before, after, "mapping_fallbacks")
            if _checkpoint_lsn(c) == lsn:
                raise CheckFailed("CHECKPOINT under the limit did not move the checkpoint LSN")
            if mapped and fallbacks < ML_TABLES:
                raise CheckFailed(
                    f"CHECKPOINT under an address-space limit: {fallbacks} writes with "
                    f"write(), expected >= {ML_TABLES}"
                )
            notes.append(f"checkpointer without address space: ok, {fallbacks} write()s")

            # 4. a backend that cannot map anything (nvm_debug_fail_mappings): read()
            with env.server.connect() as b:
                c.execute("SELECT pg_buffercache_evict_all()")
                b.execute("SET nvm_debug_fail_mappings = on")
                before = counters.read_counters(c)
                total = _sum_all(b)
                after = counters.read_counters(c)
            fallbacks = _grew(before, after, "mapping_fallbacks")
            if total != ML_SUM:
                raise CheckFailed(f"sum under an address-space limit: {total} != {ML_SUM}")
            if mapped and fallbacks < ML_TABLES:
                raise CheckFailed(
                    f"scan under an address-space limit: {fallbacks} reads with read(), "
                    f"expected >= {ML_TABLES}"
                )
            notes.append(f"backend without mappings: sum ok, {fallbacks} read()s")
        finally:
            _each_table(c, "DROP TABLE IF EXISTS pgnvm_ml_%1$s")
            c.execute("DROP FUNCTION IF EXISTS pgnvm_ml_sum()")
    return "; ".join(notes)
