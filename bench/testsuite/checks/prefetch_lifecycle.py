"""prefetch_lifecycle: se2's prefetch helper threads live and die with their backend.

With ``nvm_prefetch = helper`` a backend (and each parallel worker) starts helper threads
(pthreads inside the process) on its first redirected read made by a read stream, and joins
them when it exits or when nvm_prefetch / nvm_prefetch_mapping change (at the next
redirected read). Threads inside a PostgreSQL backend must never keep an exiting process
alive, swallow a signal, or outlive a setting. On a table 4x shared_buffers (a sequential
scan of it redirects nearly every block, and its ring buffer leaves the table uncached for
the next scan -- in configurations without the hybrid pool, whose bulk-read rings keep
redirected pages: docs/storage-engines.md, H5b), ``pgnvm_prefetch()`` is compared with
``/proc/<pid>/task``:

* se2 with ``nvm_prefetch = helper`` (the ``se2+helper`` variant), the whole lifecycle:
  - a fresh backend has no helper; point lookups (a nested loop's index scan, rescanned per
    row: redirected heap fetches read for immediate use) start none and enqueue nothing; an
    index range scan over many heap blocks announces the blocks of its next TIDs
    (nvm_index_ahead.c): helpers >= 1, jobs enqueued; its first seq scan enqueues more
    (and they are done), the scheme asked for (M1), and /proc/<pid>/task is exactly the
    backend plus the reported helper tids; after a normal disconnect the pid and the tids
    leave /proc;
  - query cancel (pg_cancel_backend during a long redirected scan, and during a long index
    scan that announces its heap blocks) and statement_timeout:
    ERROR 57014, the backend stays usable with the same helper tids and no extra task, and
    the next scan works and enqueues more jobs;
  - nvm_prefetch_mapping '0', then '0-1': the next scan runs new helpers on those CPUs,
    the old tids are gone; nvm_prefetch = inline, and = off: the next scan leaves the
    backend with its own thread only;
  - FATAL (pg_terminate_backend during a long redirected scan, and during a long index
    scan that announces): 57P01, and the pid and its helpers' tids leave /proc within a few
    seconds.
* se2 with ``off`` / ``inline``: redirected scans leave the backend single-threaded (inline
  still counts prefetch jobs in pgnvm_stats, off none).
* base / se1 (control) with ``SET nvm_prefetch = helper``: no read is redirected, so no
  helper starts and nothing is prefetched.

In every case: a parallel seq scan (leader not participating) launches workers that exit
with the query, leaving no process behind (with helpers, the workers' own pools enqueue the
jobs, and a sampled worker shows its helper threads; otherwise every sampled worker is
single-threaded); a non-superuser cannot SET nvm_prefetch or nvm_prefetch_mapping (42501)
but can SET nvm_prefetch_distance; an invalid value is 22023 with a DETAIL; and at the end
the postmaster is the one of the start (same pid, same pg_postmaster_start_time) with no
crash or restart line in the server log.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors

from bench.core import counters, procfs
from bench.testsuite import errmatch, nvmstats, proctasks
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed
from bench.testsuite.plans import gather_workers, scan_stats

TABLE = "pf_t"
ROLE = "pgnvm_pf_user"
SIZE_FACTOR = 4  # table size / shared_buffers
ROW_BYTES = 134  # heap bytes per row of (id int, pad = 3 md5s): tuple + line pointer
LOOKUPS = 300  # point lookups (heap fetches: redirected, not prefetched)
#: a nested loop of point lookups: the inner index scan is rescanned for every id
POINT_LOOKUPS = (
    f"SELECT count(*), sum(length(pad)) FROM unnest(%s::int[]) AS k(id) JOIN {TABLE} USING (id)"
)
POINT_LOOKUP_PLAN = (
    "enable_seqscan",
    "enable_bitmapscan",
    "enable_indexonlyscan",
    "enable_hashjoin",
    "enable_mergejoin",
    "enable_memoize",
)
#: an index range scan over many heap blocks (ids are in heap order)
RANGE_SCAN = f"SELECT count(*), sum(length(pad)) FROM {TABLE} WHERE id BETWEEN 1 AND %s"
#: a scan that runs until it is cancelled: every row of generate_series rescans the table
LONG_SQL = (
    "SELECT sum(s.n) FROM generate_series(1, 100000) g, "
    f"LATERAL (SELECT count(*) AS n FROM {TABLE} WHERE pad <> g.g::text) s"
)
#: the same with an index range scan (rows/2 of them) rescanned per row: it announces
#: the heap blocks of its next TIDs (needs enable_seqscan and enable_bitmapscan off)
LONG_INDEX_SQL = (
    "SELECT sum(s.n) FROM generate_series(1, 100000) g, "
    f"LATERAL (SELECT count(*) AS n FROM {TABLE} WHERE id <= %s AND pad <> g.g::text) s"
)
INDEX_PLAN = ("enable_seqscan", "enable_bitmapscan")
SCAN_SQL = f"SELECT count(*), sum(length(pad)) FROM {TABLE}"
EXPLAIN = "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "
RUN_BEFORE_SIGNAL = 0.7  # s the long scan runs before it is cancelled / terminated
GONE_WITHIN = 5.0  # s for an exited backend (and its threads) to leave /proc
QUERY_ENDS_WITHIN = 30.0  # s for a cancelled / terminated query to return
JOBS_DONE_WITHIN = 10.0  # s for the helpers to complete a job after a scan
CANCELED = "57014"
ADMIN_SHUTDOWN = "57P01"
INSUFFICIENT_PRIVILEGE = "42501"
INVALID_VALUE = "22023"
PARALLEL = {
    "max_parallel_workers_per_gather": "2",
    "parallel_leader_participation": "off",
    "parallel_setup_cost": "0",
    "parallel_tuple_cost": "0",
    "min_parallel_table_scan_size": "0",
}

_RESTART_RE = re.compile(
    r"^.*(?:terminating any other active server processes|"
    r"all server processes terminated; reinitializing|"
    r"server process \(PID \d+\) was terminated).*$",
    re.MULTILINE,
)


def crash_lines(log_text: str) -> list[str]:
    """Lines of the server log that show a crashed server process or a postmaster restart
    (beyond errmatch.log_problems: the restart's own lines)."""
    out = errmatch.log_problems(log_text)
    out += [m.group(0).strip() for m in _RESTART_RE.finditer(log_text) if m.group(0) not in out]
    return out


def worker_of(title: str, leader: int) -> bool:
    """Is this process title (``postgres: ... parallel worker for PID 123``) a parallel
    worker of ``leader``?"""
    return re.search(rf"\bparallel worker for PID {leader}\b", title) is not None


def pool_problem(
    pool: nvmstats.PrefetchPool, mode: str, mapping: str, scheme: str, cpus: Iterable[int] = ()
) -> str | None:
    """Why a backend's pool after a redirected seq scan is not the one asked for: the
    settings reported back, at least one helper with a tid each, jobs enqueued, the effective
    scheme, and (for a CPU list) the helpers on those CPUs. None if it is."""
    problems = []
    if (pool.mode, pool.mapping) != (mode, mapping):
        problems.append(f"reports mode={pool.mode} mapping={pool.mapping}")
    if pool.helpers < 1:
        problems.append("no helper thread after a redirected seq scan")
    elif len(pool.tids) != pool.helpers or len(set(pool.tids)) != pool.helpers:
        problems.append(f"{pool.helpers} helpers but tids {list(pool.tids)}")
    if pool.helpers and pool.jobs_enqueued <= 0:
        problems.append("no job enqueued")
    if pool.helpers and pool.scheme != scheme:
        problems.append(f"scheme {pool.scheme}, expected {scheme}")
    want_cpus = sorted(cpus)
    if want_cpus and sorted(pool.cpus) != want_cpus:
        problems.append(f"helpers on cpus {list(pool.cpus)}, expected {want_cpus}")
    return "; ".join(problems) or None


def require_pool(
    pool: nvmstats.PrefetchPool,
    what: str,
    mapping: str = "m1",
    scheme: str = "M1",
    cpus: Iterable[int] = (),
) -> None:
    """CheckFailed naming ``what`` unless ``pool`` is the helper pool asked for
    (:func:`pool_problem`)."""
    why = pool_problem(pool, "helper", mapping, scheme, cpus)
    if why:
        raise CheckFailed(f"{what}: {why}; {pool.describe()}")


@dataclass
class _Outcome:
    error: BaseException | None = None
    result: Any = None


class _Background:
    """One statement of a connection run in a thread (the connection is not touched by the
    caller meanwhile)."""

    def __init__(self, conn: psycopg.Connection[Any], sql: str) -> None:
        self.outcome = _Outcome()

        def body() -> None:
            try:
                self.outcome.result = conn.execute(sql).fetchall()
            except BaseException as e:  # reported by join()
                self.outcome.error = e

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def running(self) -> bool:
        return self.thread.is_alive()

    def join(self, what: str, timeout: float = QUERY_ENDS_WITHIN) -> _Outcome:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise CheckFailed(f"{what}: the query did not end within {timeout:.0f}s")
        return self.outcome


def _expect_error(outcome: _Outcome, what: str, sqlstate: str, message: str) -> str:
    e = outcome.error
    if e is None:
        raise CheckFailed(f"{what}: the query completed ({outcome.result}), expected {sqlstate}")
    got = getattr(e, "sqlstate", None)
    primary = getattr(getattr(e, "diag", None), "message_primary", None) or str(e)
    if got != sqlstate or message not in primary:
        raise CheckFailed(
            f"{what}: expected SQLSTATE {sqlstate} {message!r}, got {type(e).__name__} "
            f"SQLSTATE {got}: {primary}"
        )
    return f"{sqlstate} {primary!r}"


class _Backend:
    """A session and its server process (opened through _Ctx.backend(), which ends it
    whatever happens)."""

    def __init__(self, env: EngineEnv, **kw: Any) -> None:
        self.conn = env.server.connect(**kw)
        self.conn.execute("SET max_parallel_workers_per_gather = 0")
        self.pid = int(self.conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        self.bg: _Background | None = None

    def background(self, sql: str) -> _Background:
        self.bg = _Background(self.conn, sql)
        return self.bg

    def pool(self) -> nvmstats.PrefetchPool:
        return nvmstats.read_prefetch(self.conn)

    def scan(self, rows: int, what: str) -> tuple[int, int]:
        """A full seq scan; (rows, blocks missed in shared buffers). Raises if a row is
        missing."""
        plan = self.conn.execute(EXPLAIN + SCAN_SQL).fetchone()[0]  # type: ignore[index]
        got, misses = scan_stats(plan)
        if got != rows:
            raise CheckFailed(f"{what}: the seq scan returned {got} rows, expected {rows}")
        return got, misses

    def threads_are(self, helper_tids: Iterable[int], what: str, within: float = 2.0) -> None:
        """/proc/<pid>/task is exactly the backend and these helpers (waiting ``within``
        seconds for joined threads to leave)."""
        tids = list(helper_tids)
        why = proctasks.wait_for(
            lambda: proctasks.task_problem(self.pid, procfs.tasks(self.pid), tids), within
        )
        if why:
            raise CheckFailed(f"{what}: {why}")

    def close(self) -> None:
        if self.bg is not None:
            self.bg.thread.join(QUERY_ENDS_WITHIN)
        self.conn.close()


def _wait_gone(ids: Iterable[int], what: str) -> None:
    """Every pid/tid in ``ids`` leaves /proc within GONE_WITHIN seconds."""
    ids = list(ids)

    def probe() -> str | None:
        left = [i for i in ids if procfs.exists(i)]
        return f"still in /proc: {left}" if left else None

    why = proctasks.wait_for(probe, GONE_WITHIN)
    if why:
        states = {i: procfs.state(i) for i in ids}
        raise CheckFailed(f"{what}: {why} after {GONE_WITHIN:.0f}s (states {states})")


def _wait_active(c: psycopg.Connection[Any], pid: int, bg: _Background, what: str) -> None:
    """Until backend ``pid`` runs the long scan (pg_stat_activity), then a little longer."""

    def probe() -> str | None:
        if not bg.running():
            return "the long query ended early"
        row = c.execute(
            "SELECT state, query FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        if row and row[0] == "active" and "generate_series" in (row[1] or ""):
            return None
        return f"pg_stat_activity shows {row}"

    why = proctasks.wait_for(probe, 30)
    if why:
        err = bg.outcome.error
        raise CheckFailed(
            f"{what}: the long scan is not running: {why}" + (f" ({err})" if err else "")
        )
    time.sleep(RUN_BEFORE_SIGNAL)
    if not bg.running():
        o = bg.outcome
        raise CheckFailed(
            f"{what}: the long scan ended before it could be interrupted: "
            + (f"{type(o.error).__name__}: {o.error}" if o.error else f"result {o.result}")
        )


def _jobs_done(b: _Backend, what: str) -> nvmstats.PrefetchPool:
    """The pool once its helpers completed at least one job (they run on after the scan)."""
    seen: list[nvmstats.PrefetchPool] = []

    def probe() -> str | None:
        seen.append(b.pool())
        return None if seen[-1].jobs_done > 0 else "no job done"

    if proctasks.wait_for(probe, JOBS_DONE_WITHIN, interval=0.2):
        raise CheckFailed(
            f"{what}: the helpers completed no job within {JOBS_DONE_WITHIN:.0f}s: "
            f"{seen[-1].describe()}"
        )
    return seen[-1]


@dataclass
class _Ctx:
    env: EngineEnv
    c: psycopg.Connection[Any]  # control session (superuser)
    rows: int
    blocks: int
    postmaster: int
    mode: str  # nvm_prefetch of the server's configuration
    notes: list[str] = field(default_factory=list)  # what passed, for the detail line
    backends: list[_Backend] = field(default_factory=list)

    def backend(self) -> _Backend:
        b = _Backend(self.env)
        self.backends.append(b)
        return b

    def end_backends(self) -> None:
        """After a part: terminate what it left running (a failed part may leave a long
        scan behind) and close the sessions."""
        for b in self.backends:
            if b.bg is not None and b.bg.running():
                with contextlib.suppress(psycopg.Error):
                    self.c.execute("SELECT pg_terminate_backend(%s)", (b.pid,))
            with contextlib.suppress(Exception):
                b.close()
        self.backends.clear()


# ---- setup


def _make_table(c: psycopg.Connection[Any]) -> tuple[int, int, int]:
    """(rows, blocks, shared_buffers bytes) of the table, VACUUMed and not cached."""
    sb = int(
        c.execute(
            "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()[0]  # type: ignore[index]
    )
    rows = int(sb * SIZE_FACTOR / ROW_BYTES)
    c.execute(f"DROP TABLE IF EXISTS {TABLE}")
    c.execute(
        f"CREATE TABLE {TABLE} (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)"
    )
    c.execute(
        f"INSERT INTO {TABLE} SELECT g, repeat(md5(g::text), 3) FROM generate_series(1, %s) g",
        (rows,),
    )
    c.execute(f"VACUUM (ANALYZE) {TABLE}")  # hint bits, visibility map: the scans only read
    c.execute("CHECKPOINT")
    size = int(c.execute(f"SELECT pg_relation_size('{TABLE}')").fetchone()[0])  # type: ignore[index]
    if size < 3 * sb:
        raise CheckFailed(f"{TABLE} is {size} bytes, not over 3x shared_buffers ({sb})")
    _evict(c)
    return rows, size // nvmstats.BLCKSZ, sb


def _evict(c: psycopg.Connection[Any]) -> None:
    c.execute(f"SELECT * FROM pg_buffercache_evict_relation('{TABLE}')")
    left = nvmstats.relation_buffers(c, TABLE)
    if left:
        raise CheckFailed(f"{len(left)} buffers of {TABLE} still cached after eviction")


def _first_scan(ctx: _Ctx, b: _Backend, what: str) -> str:
    """The backend's first scan of the evicted table: it must have missed (nearly) every
    block, i.e. read them through se2's redirection."""
    _evict(ctx.c)
    _, misses = b.scan(ctx.rows, what)
    if misses < 0.9 * ctx.blocks:
        raise CheckFailed(
            f"{what}: the scan missed only {misses} of {ctx.blocks} blocks in shared buffers"
        )
    return f"{misses} of {ctx.blocks} blocks missed"


# ---- se2 with helpers


def _helper_lifecycle(ctx: _Ctx) -> None:
    """A fresh backend, its first scans, disconnect; query cancel and statement_timeout."""
    notes = ctx.notes
    c = ctx.c

    # 1. point lookups (a nested loop's inner index scan, rescanned per row: each rescan
    # fetches from one heap block) start no helper and enqueue no job; a long index range
    # scan announces the heap blocks of its next TIDs (nvm_index_ahead.c): helpers start
    # and jobs are enqueued. (A new backend may have started its helpers already: its first
    # catalog seq scans redirect too.)
    u = ctx.backend()
    for k in POINT_LOOKUP_PLAN:
        u.conn.execute(f"SET {k} = off")
    ids = list(range(1, ctx.rows, ctx.rows // LOOKUPS))[:LOOKUPS]
    u.conn.execute(POINT_LOOKUPS, (ids,))  # warm the catalog caches: next run reads pf_t only
    _evict(c)
    p0 = u.pool()
    u.threads_are(p0.tids, "a new backend")
    before = counters.read_counters(u.conn)
    found = u.conn.execute(POINT_LOOKUPS, (ids,)).fetchone()[0]  # type: ignore[index]
    d = counters.delta(before, counters.read_counters(u.conn))
    if found != len(ids):
        raise CheckFailed(f"point lookups found {found} of {len(ids)} rows")
    if d["redirects"] < len(ids) // 2:
        raise CheckFailed(
            f"{len(ids)} point lookups of evicted rows redirected only {d['redirects']} blocks"
        )
    p = u.pool()
    if p.tids != p0.tids or p.jobs_enqueued != p0.jobs_enqueued:
        raise CheckFailed(
            f"point lookups ({d['redirects']} redirects) prefetched: "
            f"{p0.describe()} -> {p.describe()}"
        )
    u.threads_are(p.tids, "after point lookups")
    notes.append(
        f"{len(ids)} point lookups ({d['redirects']} redirects): no helper started, no job"
    )
    _evict(c)
    before = counters.read_counters(u.conn)
    hi = ctx.rows // 4
    found = u.conn.execute(RANGE_SCAN, (hi,)).fetchone()[0]  # type: ignore[index]
    d = counters.delta(before, counters.read_counters(u.conn))
    if found != hi:
        raise CheckFailed(f"the index range scan found {found} of {hi} rows")
    p = u.pool()
    require_pool(p, f"after an index range scan over {d['redirects']} redirected blocks")
    if p.jobs_enqueued - p0.jobs_enqueued < d["redirects"] // 4:
        raise CheckFailed(
            f"an index range scan ({d['redirects']} redirects) announced only "
            f"{p.jobs_enqueued - p0.jobs_enqueued} blocks: {p.describe()}"
        )
    u.threads_are(p.tids, "after the index range scan")
    notes.append(
        f"index range scan ({d['redirects']} redirects): "
        f"{p.jobs_enqueued - p0.jobs_enqueued} blocks announced, {p.describe()}"
    )
    u.conn.execute("RESET ALL")
    u.conn.execute("SET max_parallel_workers_per_gather = 0")
    p0 = p
    pf_before = counters.read_counters(c)
    missed = _first_scan(ctx, u, "first seq scan")
    p = u.pool()
    require_pool(p, f"after the first seq scan ({missed})")
    u.threads_are(p.tids, "after the first seq scan")
    pf = counters.delta(pf_before, counters.read_counters(c))
    accepted = p.jobs_enqueued - p0.jobs_enqueued  # p0: no pool (0) or the same one
    if pf["prefetch_jobs"] < accepted:
        raise CheckFailed(
            f"pgnvm_stats.prefetch_jobs grew by {pf['prefetch_jobs']}, less than the "
            f"{accepted} jobs the backend's pool accepted during the scan"
        )
    p = _jobs_done(u, "first seq scan")
    notes.append(f"first seq scan ({missed}): {p.describe()}; /proc task list = backend + helpers")
    gone = [u.pid, *p.tids]
    u.conn.close()
    _wait_gone(gone, "normal disconnect")
    notes.append(f"disconnect: pid and helper tids left /proc within {GONE_WITHIN:.0f}s")

    # 2. cancel and statement_timeout
    s = ctx.backend()
    s.scan(ctx.rows, "scan before the cancel")
    p0 = s.pool()
    require_pool(p0, "second backend")
    long_index = LONG_INDEX_SQL.replace("%s", str(ctx.rows // 2))
    for what, long_sql in (
        ("query cancel", LONG_SQL),
        ("statement_timeout", LONG_SQL),
        ("query cancel of an index scan", long_index),
    ):
        before = s.pool()
        plan = INDEX_PLAN if long_sql is long_index else ()
        for k in plan:
            s.conn.execute(f"SET {k} = off")
        if what.startswith("query cancel"):
            bg = s.background(long_sql)
            _wait_active(c, s.pid, bg, what)
            s.threads_are(p0.tids, f"{what}: during the long scan", within=0)
            ok = c.execute("SELECT pg_cancel_backend(%s)", (s.pid,)).fetchone()[0]  # type: ignore[index]
            if ok is not True:
                raise CheckFailed(f"pg_cancel_backend({s.pid}) returned {ok}")
            err = _expect_error(
                bg.join(what), what, CANCELED, "canceling statement due to user request"
            )
        else:
            s.conn.execute("SET statement_timeout = '1500ms'")
            outcome = _Outcome()
            try:
                outcome.result = s.conn.execute(long_sql).fetchall()
            except psycopg.Error as e:
                outcome.error = e
            err = _expect_error(
                outcome, what, CANCELED, "canceling statement due to statement timeout"
            )
            s.conn.execute("RESET statement_timeout")
        for k in plan:
            s.conn.execute(f"RESET {k}")
        pid = s.conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        if pid != s.pid:
            raise CheckFailed(f"{what}: the session's backend changed ({s.pid} -> {pid})")
        after = s.pool()
        if after.tids != p0.tids:
            raise CheckFailed(f"{what}: helper tids {p0.tids} -> {after.tids}")
        if after.jobs_enqueued <= before.jobs_enqueued:
            raise CheckFailed(
                f"{what}: the interrupted scan enqueued no job ({before.jobs_enqueued} -> "
                f"{after.jobs_enqueued}): it did not scan redirected blocks"
            )
        s.threads_are(p0.tids, f"after the {what}")
        s.scan(ctx.rows, f"scan after the {what}")
        again = s.pool()
        if again.tids != p0.tids or again.jobs_enqueued <= after.jobs_enqueued:
            raise CheckFailed(
                f"the scan after the {what} enqueued no job or changed the helpers: "
                f"{after.describe()} -> {again.describe()}"
            )
        s.threads_are(p0.tids, f"after the scan after the {what}")
        notes.append(
            f"{what}: {err}; same backend and helper tids {list(p0.tids)}, no extra task; "
            f"the next scan enqueued {again.jobs_enqueued - after.jobs_enqueued} jobs"
        )


def _settings_change(ctx: _Ctx) -> None:
    """New helpers at the next redirected read after nvm_prefetch_mapping changes, none
    after nvm_prefetch leaves helper; the old ones joined."""
    notes = ctx.notes
    c = ctx.c
    s = ctx.backend()
    s.scan(ctx.rows, "first scan")
    old = s.pool()
    require_pool(old, "before the settings change")
    for mapping, cpus in (("0", [0]), ("0-1", [0, 1])):
        s.conn.execute(f"SET nvm_prefetch_mapping = '{mapping}'")
        s.scan(ctx.rows, f"scan with mapping {mapping}")
        new = s.pool()
        require_pool(new, f"mapping {mapping}", mapping, "CPUS", cpus)
        if set(new.tids) & set(old.tids):
            raise CheckFailed(f"mapping {mapping}: helper tids {new.tids} reuse {old.tids}")
        s.threads_are(new.tids, f"mapping {old.mapping} -> {mapping}")
        _wait_gone(old.tids, f"mapping {old.mapping} -> {mapping}: the old helpers")
        notes.append(
            f"mapping {mapping}: new helpers {list(new.tids)} on cpus {list(new.cpus)}, the "
            f"old ones {list(old.tids)} gone"
        )
        old = new
    s.conn.execute("RESET nvm_prefetch_mapping")
    for mode in ("inline", "off"):
        if mode == "off":  # helpers again first (the configured mode)
            s.conn.execute("RESET nvm_prefetch")
            s.scan(ctx.rows, "scan with helpers again")
            old = s.pool()
            require_pool(old, "nvm_prefetch back to helper")
            s.threads_are(old.tids, "nvm_prefetch back to helper")
        s.conn.execute(f"SET nvm_prefetch = '{mode}'")
        pf_before = counters.read_counters(c)
        s.scan(ctx.rows, f"scan with nvm_prefetch={mode}")
        pf = counters.delta(pf_before, counters.read_counters(c))
        now = s.pool()
        if now.helpers or now.tids:
            raise CheckFailed(
                f"nvm_prefetch helper -> {mode}: after a redirected scan the backend still "
                f"has helpers: {now.describe()} (were {list(old.tids)})"
            )
        s.threads_are((), f"nvm_prefetch helper -> {mode}")
        _wait_gone(old.tids, f"nvm_prefetch helper -> {mode}: the old helpers")
        if mode == "inline" and pf["prefetch_jobs"] <= 0:
            raise CheckFailed(f"nvm_prefetch=inline: the scan prefetched nothing ({pf})")
        notes.append(
            f"nvm_prefetch helper -> {mode}: the next scan joined helpers {list(old.tids)}, "
            f"1 task left (prefetch_jobs+{pf['prefetch_jobs']})"
        )


def _fatal(ctx: _Ctx) -> None:
    """pg_terminate_backend during a long redirected scan, and during a long index scan
    that announces its heap blocks."""
    c = ctx.c
    long_index = LONG_INDEX_SQL.replace("%s", str(ctx.rows // 2))
    for what, long_sql in (("scan", LONG_SQL), ("index scan", long_index)):
        t = ctx.backend()
        t.scan(ctx.rows, f"scan before the FATAL during a {what}")
        p = t.pool()
        require_pool(p, "backend to terminate")
        if long_sql is long_index:
            for k in INDEX_PLAN:
                t.conn.execute(f"SET {k} = off")
        bg = t.background(long_sql)
        _wait_active(c, t.pid, bg, f"FATAL during a {what}")
        t.threads_are(p.tids, f"FATAL: during the long {what}", within=0)
        ok = c.execute("SELECT pg_terminate_backend(%s)", (t.pid,)).fetchone()[0]  # type: ignore[index]
        if ok is not True:
            raise CheckFailed(f"pg_terminate_backend({t.pid}) returned {ok}")
        err = _expect_error(
            bg.join("FATAL"),
            "FATAL",
            ADMIN_SHUTDOWN,
            "terminating connection due to administrator",
        )
        _wait_gone([t.pid, *p.tids], f"FATAL during a {what}")
        ctx.notes.append(
            f"FATAL during a {what}: {err}; pid and helper tids {list(p.tids)} left /proc "
            f"within {GONE_WITHIN:.0f}s"
        )


# ---- no helpers: se2 off/inline, base/se1


def _no_helpers(ctx: _Ctx) -> None:
    """A redirected scan (se2) or a plain one (base/se1, with nvm_prefetch = helper set in
    the session) leaves the backend single-threaded."""
    env, c = ctx.env, ctx.c
    se2 = env.engine == "se2"
    b = ctx.backend()
    if not se2:
        b.conn.execute("SET nvm_prefetch = helper")
    mode = "helper" if not se2 else ctx.mode
    pf_before = counters.read_counters(c)
    before = counters.read_counters(c)
    missed = _first_scan(ctx, b, "seq scan")
    d = counters.delta(before, counters.read_counters(c))
    pf = counters.delta(pf_before, counters.read_counters(c))
    p = b.pool()
    if p.mode != mode:
        raise CheckFailed(f"pgnvm_prefetch() reports mode {p.mode}, expected {mode}")
    if p.helpers or p.tids:
        raise CheckFailed(f"{env.label}, nvm_prefetch={mode}: the scan started {p.describe()}")
    b.threads_are((), f"{env.label}, nvm_prefetch={mode}, after a scan")
    if se2 and d["redirects"] < 0.9 * ctx.blocks:
        raise CheckFailed(f"the scan ({missed}) redirected only {d['redirects']} blocks")
    if mode == "inline" and pf["prefetch_jobs"] <= 0:
        raise CheckFailed(f"nvm_prefetch=inline: the scan prefetched nothing ({pf})")
    if mode != "inline" and pf["prefetch_jobs"]:
        raise CheckFailed(f"{env.label}, nvm_prefetch={mode}: the scan prefetched ({pf})")
    b.conn.close()
    _wait_gone([b.pid], "disconnect")
    ctx.notes.append(
        f"nvm_prefetch={mode}: a seq scan ({missed}, redirects+{d['redirects']}) leaves the "
        f"backend with 1 task, prefetch_jobs+{pf['prefetch_jobs']}"
    )


# ---- every engine


def _parallel(ctx: _Ctx) -> None:
    """A parallel seq scan without leader participation: workers launched, their prefetching
    as the mode says, none of them left afterwards."""
    env, c = ctx.env, ctx.c
    helpers = env.engine == "se2" and ctx.mode == "helper"
    b = ctx.backend()
    for k, v in PARALLEL.items():
        b.conn.execute(f"SET {k} = '{v}'")
    if env.engine != "se2":
        b.conn.execute("SET nvm_prefetch = helper")
    leader_before = b.pool()
    pf_before = counters.read_counters(c)
    _evict(c)
    bg = b.background(
        "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "
        f"SELECT count(*), sum(length(md5(pad))) FROM {TABLE}",
    )
    samples: dict[int, list[int]] = {}  # worker pid -> task counts seen
    while bg.running():
        for pid in procfs.children(ctx.postmaster):
            if worker_of(procfs.cmdline(pid), b.pid):
                seen = procfs.tasks(pid)
                if seen is not None:
                    samples.setdefault(pid, []).append(len(seen))
        time.sleep(0.005)
    outcome = bg.join("parallel scan")
    if outcome.error is not None:
        raise CheckFailed(f"parallel scan: {outcome.error}")
    planned, launched = gather_workers(outcome.result[0][0])
    if launched < 1:
        raise CheckFailed(f"parallel scan: {launched} of {planned} workers launched")
    pf = counters.delta(pf_before, counters.read_counters(c))
    leader = b.pool()

    def leftovers() -> str | None:
        left = [
            p for p in procfs.children(ctx.postmaster) if "parallel worker" in procfs.cmdline(p)
        ]
        left += [p for p in samples if procfs.exists(p) and p not in left]
        return f"parallel workers still there: {left}" if left else None

    why = proctasks.wait_for(leftovers, GONE_WITHIN)
    if why:
        raise CheckFailed(f"parallel scan: {why} {GONE_WITHIN:.0f}s after the query")
    most = max((max(v) for v in samples.values()), default=0)
    if helpers:
        if pf["prefetch_jobs"] <= 0 or leader.jobs_enqueued != leader_before.jobs_enqueued:
            raise CheckFailed(
                f"parallel scan without the leader: the workers' pools should enqueue the "
                f"jobs, yet prefetch_jobs+{pf['prefetch_jobs']} and the leader's pool "
                f"{leader_before.jobs_enqueued} -> {leader.jobs_enqueued}"
            )
        limit = 1 + max(leader.helpers, 1)
        if most > limit:
            raise CheckFailed(f"a parallel worker had {most} tasks (at most {limit} expected)")
        long_seen = [p for p, v in samples.items() if len(v) >= 20]
        if long_seen and most < 2:
            raise CheckFailed(
                f"workers {long_seen} sampled >= 20 times during the scan never showed a "
                f"helper thread: {samples}"
            )
    else:
        if most > 1:
            raise CheckFailed(f"a parallel worker had {most} tasks without helpers: {samples}")
        expect_jobs = env.engine == "se2" and ctx.mode == "inline"
        if expect_jobs != (pf["prefetch_jobs"] > 0):
            raise CheckFailed(
                f"parallel scan, {env.label}: prefetch_jobs+{pf['prefetch_jobs']} "
                f"(expected {'> 0' if expect_jobs else '0'})"
            )
    ctx.notes.append(
        f"parallel scan: {launched}/{planned} workers, {len(samples)} sampled with at most "
        f"{most} tasks, prefetch_jobs+{pf['prefetch_jobs']} by the workers, none left after"
    )


def _privileges(ctx: _Ctx) -> None:
    env, c = ctx.env, ctx.c
    c.execute(f"DROP ROLE IF EXISTS {ROLE}")
    c.execute(f"CREATE ROLE {ROLE} LOGIN")
    try:
        with env.server.connect(user=ROLE) as u:
            for setting, value in (("nvm_prefetch", "helper"), ("nvm_prefetch_mapping", "0")):
                try:
                    u.execute(f"SET {setting} = '{value}'")
                except errors.InsufficientPrivilege as e:
                    if e.sqlstate != INSUFFICIENT_PRIVILEGE:
                        raise CheckFailed(f"non-superuser SET {setting}: {e.sqlstate} {e}") from e
                else:
                    raise CheckFailed(f"a non-superuser could SET {setting} = '{value}'")
            u.execute("SET nvm_prefetch_distance = 16")
            shown = u.execute(
                "SELECT setting FROM pg_settings WHERE name = 'nvm_prefetch_distance'"
            ).fetchone()[0]  # type: ignore[index]
            if shown != "16":
                raise CheckFailed(f"SET nvm_prefetch_distance = 16 shows {shown!r}")
    finally:
        c.execute(f"DROP ROLE IF EXISTS {ROLE}")
    details = []
    for setting, value in (("nvm_prefetch_mapping", "bogus"), ("nvm_prefetch", "bogus")):
        try:
            c.execute(f"SET {setting} = '{value}'")
        except psycopg.Error as e:
            detail = e.diag.message_detail
            if e.sqlstate != INVALID_VALUE or (setting == "nvm_prefetch_mapping" and not detail):
                raise CheckFailed(
                    f"SET {setting} = '{value}': SQLSTATE {e.sqlstate} {e.diag.message_primary} "
                    f"(DETAIL {detail}), expected {INVALID_VALUE} with a DETAIL"
                ) from e
            details.append(detail or "")
        else:
            raise CheckFailed(f"SET {setting} = '{value}' was accepted")
    ctx.notes.append(
        f"non-superuser: SET nvm_prefetch / nvm_prefetch_mapping -> {INSUFFICIENT_PRIVILEGE}, "
        f"nvm_prefetch_distance allowed; 'bogus' mapping -> {INVALID_VALUE} ({details[0]})"
    )


def prefetch_lifecycle(env: EngineEnv, limit: float) -> str:
    offset = env.server.log_offset()
    pm_pid = env.server.postmaster_pid()
    with env.server.connect() as c:
        nvmstats.ensure_extensions(c)
        started = c.execute("SELECT pg_postmaster_start_time()").fetchone()[0]  # type: ignore[index]
        mode = str(c.execute("SHOW nvm_prefetch").fetchone()[0])  # type: ignore[index]
        want = env.config.prefetch
        if mode != want:
            raise CheckFailed(f"the server runs with nvm_prefetch={mode}, expected {want}")
        rows, blocks, sb = _make_table(c)
        if pm_pid is None:
            raise CheckFailed("no postmaster pid")
        ctx = _Ctx(env, c, rows, blocks, pm_pid, mode)
        notes = ctx.notes
        notes.append(f"{blocks * nvmstats.BLCKSZ >> 20} MB table, {sb >> 20} MB shared_buffers")
        parts: list[tuple[str, Callable[[_Ctx], None]]]
        if env.engine == "se2" and mode == "helper":
            parts = [("lifecycle", _helper_lifecycle), ("FATAL", _fatal)]
        else:
            parts = [("no helpers", _no_helpers)]
        parts += [("parallel", _parallel), ("privileges", _privileges)]
        if env.engine == "se2" and mode == "helper":
            parts.append(("settings change", _settings_change))
        # every part runs, also after another one failed: the failures are reported together
        failures = []
        for name, part in parts:
            try:
                part(ctx)
            except CheckFailed as e:
                failures.append(f"{name}: {e}")
            finally:
                ctx.end_backends()
        c.execute(f"DROP TABLE {TABLE}")
        now = c.execute("SELECT pg_postmaster_start_time()").fetchone()[0]  # type: ignore[index]
    if env.server.postmaster_pid() != pm_pid or now != started:
        failures.append(
            f"the postmaster restarted: pid {pm_pid} -> {env.server.postmaster_pid()}, start time "
            f"{started} -> {now}"
        )
    crashed = crash_lines(env.server.log_since(offset))
    if crashed:
        failures.append("server log shows a crash or restart: " + " | ".join(crashed[:5]))
    if failures:
        raise CheckFailed(" || ".join(failures) + "\npassed: " + "; ".join(notes))
    return "; ".join(notes) + "; same postmaster, no crash in the log"
