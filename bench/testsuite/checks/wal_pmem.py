"""wal_pmem: WAL written through libpmem2 mappings (nvm_wal = pmem, configuration nvm_base_walpmem).

Three parts, each on the configuration's cluster:

* granularity: the server logged the store granularity libpmem2 found in pg_wal and
  pgnvm_wal() reports the same; restarted with PMEM2_FORCE_GRANULARITY=CACHE_LINE it logs
  and reports "cache-line" (forced) and writes WAL through the forced path, copying only
  WAL not in the file yet (50 commits copy no more bytes than they insert, not a page each).
* prefault: a committing backend pre-faults the pages of its flush before it queues on
  WALWriteLock (storage-engines.md W10): two sessions take turns, one committing single
  rows, the other ~20 kB of WAL per transaction, so that each single-row commit starts
  on pages its process has not pre-faulted; pgnvm_wal() counts those pre-faults as made
  before the lock, and (almost) none under it (one per row before the change).
* waldump: one deterministic single-session workload run with nvm_wal = file, then with
  nvm_wal = pmem, each on the same copy of the stopped cluster (same transaction ID, OID
  and WAL position: records written at a counter's boundary, such as the CLOG page zeroed
  every 32768 transactions, fall in both ranges or in neither; the transaction ID is first
  moved just before such a boundary, so that the comparison always includes one);
  pg_waldump parses both ranges, and the record counts per record type agree (the
  bgwriter's timer-driven Standby records aside).
* unmappable (root, bindfs): pg_wal on a FUSE file system mounted with direct_io, which
  refuses shared writable mappings: the server does not start, with a FATAL naming the
  directory and the reason; with nvm_wal = file the same pg_wal works.
* forced on disk: pg_wal on the disk file system of the work directory (no MAP_SYNC there)
  with PMEM2_FORCE_GRANULARITY=CACHE_LINE: cache flushes alone would leave committed WAL in
  the page cache, so the server says it also msync()s, and strace of a backend committing
  (and of the WAL writer) shows an msync() per commit (none before the fix: committed
  transactions were not durable).
* full pg_wal (root): pg_wal on a tmpfs with ~1 MB to spare, `wal_init_zero = off` and
  `wal_recycle = off`, so the next segment is created with holes and a page of it the file
  system cannot provide is met when WAL is copied into the mapping. The server must not
  die of SIGBUS: the copy's pre-fault fails with ENOSPC, the copy falls back to `write()`
  and PostgreSQL PANICs as stock does (`could not write to log file ...: No space left on
  device`); no process is terminated by a signal but the PANIC's abort(). Run on a copy
  of the cluster.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg

from bench.core import cluster as clu
from bench.core import counters, osuser, storage
from bench.testsuite import errmatch, walstats
from bench.testsuite.checks.strace_check import ptrace_scope, wait_attached
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed, CheckSkipped
from bench.testsuite.proc import Background, is_root

FORCE_ENV = "PMEM2_FORCE_GRANULARITY"
WORKLOAD_ROWS = 20_000
SMALL_COMMITS = 300


def _pgnvm_wal(env: EngineEnv) -> dict[str, Any]:
    with env.server.connect() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
        c.execute("ALTER EXTENSION pgnvm UPDATE")  # a cluster made by an older build
        cur = c.execute("SELECT * FROM pgnvm_wal()")
        row = cur.fetchone()
        assert row is not None and cur.description is not None
        return {d.name: v for d, v in zip(cur.description, row, strict=True)}


def _logged(text: str) -> re.Match[str]:
    found = counters.wal_pmem_logged(text)
    if found is None:
        raise CheckFailed(f"no 'nvm_wal = pmem: ... store granularity' LOG line:\n{text[-1500:]}")
    return found


def _granularity(env: EngineEnv) -> str:
    """The logged granularity is pgnvm_wal()'s; PMEM2_FORCE_GRANULARITY=CACHE_LINE forces it."""
    first = _logged(env.server.log_since(0))
    info = _pgnvm_wal(env)
    if info["mode"] != "pmem" or info["granularity"] != first.group("gran"):
        raise CheckFailed(f"pgnvm_wal() says {info}, the log says {first.group(0)!r}")
    if first.group("dir") != str(env.server.cluster.datadir / "pg_wal"):
        raise CheckFailed(f"the LOG line names {first.group('dir')!r}, not pg_wal")
    offset = env.server.log_offset()
    try:
        env.server.apply(environment={**env.config.environment, FORCE_ENV: "CACHE_LINE"})
        env.server.restart()
        forced = _logged(env.server.log_since(offset))
        with env.server.connect() as c:
            c.execute("DROP TABLE IF EXISTS wal_pmem_forced")
            c.execute("CREATE TABLE wal_pmem_forced (a int)")
            before = _pgnvm_wal(env)
            (written_from,) = c.execute("SELECT pg_current_wal_lsn()").fetchone()
            for i in range(50):
                c.execute("INSERT INTO wal_pmem_forced VALUES (%s)", (i,))
            (wal_bytes,) = c.execute(
                "SELECT pg_current_wal_insert_lsn() - %s::pg_lsn", (written_from,)
            ).fetchone()
            after = _pgnvm_wal(env)
            n = c.execute("SELECT count(*) FROM wal_pmem_forced").fetchone()
            c.execute("DROP TABLE wal_pmem_forced")
    finally:
        env.server.apply(environment=dict(env.config.environment))
        env.server.restart()  # in the configuration's own environment again
    if forced.group("gran") != "cache-line" or not forced.group("forced"):
        raise CheckFailed(f"with {FORCE_ENV}=CACHE_LINE the server logged {forced.group(0)!r}")
    if (before["granularity"], before["forced_granularity"]) != ("cache-line", "CACHE_LINE"):
        raise CheckFailed(f"with {FORCE_ENV}=CACHE_LINE pgnvm_wal() says {before}")
    grew = {k: int(after[k]) - int(before[k]) for k in ("bytes_written", "copies", "persists")}
    if n != (50,) or min(grew.values()) <= 0:
        raise CheckFailed(f"forced cache line: rows {n}, counters grew by {grew}")
    # Each copy holds the WAL from the write pointer to the request, not the whole
    # 8 kB pages XLogWrite() hands to write(): the copies of one run are disjoint and
    # cannot add up to more than the WAL inserted meanwhile (50 commits each rewriting
    # their page: ~400 kB against ~10 kB of WAL before nvm_wal_write() skipped them).
    if grew["bytes_written"] > int(wal_bytes):
        raise CheckFailed(
            f"forced cache line: 50 commits inserted {int(wal_bytes)} B of WAL but "
            f"{grew['bytes_written']} B were copied into the mappings "
            f"({grew['copies']} copies): WAL already in the file is copied again"
        )
    back = _logged(env.server.log_since(offset))
    # back to the configuration's own environment: forced only if it forces it itself
    if bool(back.group("forced")) != (FORCE_ENV in env.config.environment):
        raise CheckFailed(
            f"after the restart in the configuration's environment "
            f"({env.config.environment or 'none'}): {back.group(0)!r}"
        )
    return (
        f"granularity {first.group('gran')} (logged = pgnvm_wal()); forced: "
        f"{forced.group('gran')}, 50 commits: {grew['copies']} copies of "
        f"{grew['bytes_written']} B ({int(wal_bytes)} B of WAL inserted), "
        f"{grew['persists']} persists"
    )


#: Rounds of the prefault part: one single-row commit and one ~20 kB commit each.
PREFAULT_ROUNDS = 50


def _prefault(env: EngineEnv) -> str:
    """Pre-faulting happens before WALWriteLock, not under it. With the server's other
    writers quiet: the counters are the server's, and each autovacuum worker that starts
    meanwhile makes its first write into the segment under the lock."""
    with env.server.connect() as a, env.server.connect() as b, env.writers_quiet(a):
        a.execute("DROP TABLE IF EXISTS wal_prefault")
        a.execute("CREATE TABLE wal_prefault (a int, pad text)")
        # both sessions write once first: each has the current segment mapped
        a.execute("INSERT INTO wal_prefault VALUES (0, 'a')")
        b.execute("INSERT INTO wal_prefault VALUES (0, 'b')")
        before = _pgnvm_wal(env)
        for i in range(PREFAULT_ROUNDS):
            # ~20 kB of WAL: the single row's flush then starts beyond the pages its
            # process pre-faulted for its previous one
            b.execute(
                "INSERT INTO wal_prefault SELECT g, repeat('b', 200) FROM generate_series(1, 80) g"
            )
            a.execute("INSERT INTO wal_prefault VALUES (%s, 'a')", (i,))
        after = _pgnvm_wal(env)
        a.execute("DROP TABLE wal_prefault")
    grew = {
        k: int(after[k]) - int(before[k])
        for k in ("populates_locked", "populates_unlocked", "mappings", "copies")
    }
    # Under the lock remain only a process's first write into a segment (the mapping
    # is made there) and writers that do not go through XLogFlush() (the WAL writer's
    # timer): a few, against one per single-row commit when the commit's pages were
    # pre-faulted under the lock.
    if grew["populates_unlocked"] < PREFAULT_ROUNDS or grew["populates_locked"] > (
        PREFAULT_ROUNDS // 5
    ):
        raise CheckFailed(
            f"{PREFAULT_ROUNDS} single-row commits after ~20 kB of another session's WAL "
            f"each: pre-faults before WALWriteLock {grew['populates_unlocked']} (expected "
            f">= {PREFAULT_ROUNDS}), under it {grew['populates_locked']} (expected <= "
            f"{PREFAULT_ROUNDS // 5}); counters grew by {grew}"
        )
    return (
        f"prefault: {PREFAULT_ROUNDS} rounds, {grew['populates_unlocked']} pre-faults before "
        f"WALWriteLock, {grew['populates_locked']} under it ({grew['mappings']} mappings)"
    )


def _workload(env: EngineEnv, table: str) -> tuple[str, str]:
    """The deterministic single-session workload on a fresh table; its WAL range. The
    CHECKPOINT first: no timed checkpoint falls into the range."""
    with env.server.connect() as c:
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        c.execute("CHECKPOINT")
        start = c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        c.execute(
            f"INSERT INTO {table} SELECT g, repeat('x', g % 97) "
            f"FROM generate_series(1, {WORKLOAD_ROWS}) g"
        )
        c.execute(f"UPDATE {table} SET v = v || 'y' WHERE id % 7 = 0")
        c.execute(f"DELETE FROM {table} WHERE id % 11 = 0")
        for i in range(SMALL_COMMITS):
            c.execute(f"INSERT INTO {table} VALUES (%s, 'small')", (WORKLOAD_ROWS + 1 + i,))
        end = c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
    assert start is not None and end is not None
    return str(start[0]), str(end[0])


def _dump_stats(env: EngineEnv, start: str, end: str, name: str) -> dict[str, int]:
    ran = env.run_tool(
        [
            env.tool("pg_waldump"),
            "--stats=record",
            "-p",
            str(env.server.cluster.datadir / "pg_wal"),
            "-s",
            start,
            "-e",
            end,
        ],
        timeout=120,
        log_name=f"wal_pmem-waldump-{name}.log",
    )
    if ran.returncode != 0 or "error" in ran.output:
        raise CheckFailed(f"pg_waldump of the {name} range {start}..{end}:\n{ran.tail()}")
    return walstats.counts(walstats.parse_stats(ran.output))


#: Transactions per CLOG page (BLCKSZ * 4 transactions per byte): crossing a multiple of
#: this zeroes a new page, logged as CLOG/ZEROPAGE.
CLOG_XACTS_PER_PAGE = 32768
#: How far before the next CLOG page boundary the comparison's workload starts: it uses
#: more transaction IDs than this (SMALL_COMMITS and a few), so it always crosses one.
BOUNDARY_LEAD = 100


def _xact_id(c: Any) -> int:
    """A new transaction ID (assigned to the statement's own transaction)."""
    row = c.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
    assert row is not None
    return int(row[0])


def _near_clog_boundary(env: EngineEnv) -> int:
    """Consume transaction IDs until the next one is BOUNDARY_LEAD before a CLOG page
    boundary; returns that next transaction ID."""
    with env.server.connect() as c:
        nxt = _xact_id(c) + 1
        need = (-BOUNDARY_LEAD - nxt) % CLOG_XACTS_PER_PAGE
        if need:
            c.execute("SET synchronous_commit = off")
            c.execute(
                f"DO $$ BEGIN FOR i IN 1..{need} LOOP "
                "PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$"
            )
        nxt = _xact_id(c)
    return nxt


def _waldump(env: EngineEnv) -> str:
    """Same workload with nvm_wal = file and = pmem, each on the same copy of the stopped
    cluster: same records, per record type."""
    stats: dict[str, dict[str, int]] = {}
    datadir = env.server.cluster.datadir
    start_copy = datadir.with_name(datadir.name + ".wal-cmp-start")
    xid = _near_clog_boundary(env)
    env.server.stop("fast")
    shutil.rmtree(start_copy, ignore_errors=True)
    shutil.copytree(datadir, start_copy, symlinks=True)
    try:
        for mode in ("file", "pmem"):
            if mode != "file":
                env.server.stop("fast")
                shutil.rmtree(datadir)
                shutil.copytree(start_copy, datadir, symlinks=True)
                osuser.chown_to_server(datadir, recursive=True)
            with env.server.temporary({"nvm_wal": mode, "autovacuum": "off"}):
                env.server.restart()
                start, end = _workload(env, f"wal_cmp_{mode}")
                stats[mode] = _dump_stats(env, start, end, mode)
                with env.server.connect() as c:
                    c.execute(f"DROP TABLE wal_cmp_{mode}")
    finally:
        shutil.rmtree(start_copy, ignore_errors=True)
        env.server.restart()  # the configuration's own settings (nvm_wal = pmem) again
    diff = walstats.differences(stats["file"], stats["pmem"], ("file", "pmem"))
    if diff:
        raise CheckFailed("record counts differ: " + "; ".join(diff))
    if not stats["pmem"].get("CLOG/ZEROPAGE"):
        raise CheckFailed(
            f"the workload started at transaction {xid}, {BOUNDARY_LEAD} before a CLOG page "
            "boundary, but neither range has a CLOG/ZEROPAGE record"
        )
    total = sum(stats["pmem"].values())
    return (
        f"pg_waldump: {total} records of {len(stats['pmem'])} types (a CLOG page boundary "
        "among them), file = pmem"
    )


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=False, capture_output=True)


def _unmappable(env: EngineEnv) -> str:
    """pg_wal on FUSE with direct_io (no shared writable mmap): FATAL at start, not later."""
    bindfs = shutil.which("bindfs")
    if not is_root() or bindfs is None or not Path("/dev/fuse").exists():
        return "unmappable pg_wal: not run (needs root, /dev/fuse and bindfs)"
    datadir = env.server.cluster.datadir
    wal = datadir / "pg_wal"
    real = datadir / "pg_wal.fuse-source"
    mnt = env.workdir / "walfuse"
    env.server.cluster.stop("fast")
    mounted = False
    try:
        wal.rename(real)
        osuser.ensure_dir(mnt)
        r = subprocess.run(
            [bindfs, "--create-as-user", "-o", "direct_io", str(real), str(mnt)],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise CheckFailed(f"bindfs -o direct_io failed: {r.stderr.strip()}")
        mounted = True
        wal.symlink_to(mnt)
        offset = env.server.log_offset()
        try:
            env.server.cluster.start()
        except clu.ClusterError:
            pass
        else:
            raise CheckFailed("the server started with pg_wal on a FUSE direct_io mount")
        log = env.server.log_since(offset)
        want = f'"nvm_wal" = pmem: WAL files in directory "{wal}" cannot be mapped with libpmem2'
        fatal = next((ln for ln in log.splitlines() if "FATAL:" in ln), "")
        if want not in fatal or "No such device" not in fatal:
            raise CheckFailed(f"expected a FATAL naming {wal} and the reason, got:\n{log[-1500:]}")
        problems = errmatch.log_problems(log)
        if problems or env.server.cluster.is_running():
            raise CheckFailed(f"server state after the refused start: {problems}")
        with env.server.temporary({"nvm_wal": "file"}):
            env.server.cluster.start()
            with env.server.connect() as c:
                c.execute("CREATE TABLE wal_fuse (a int)")
                c.execute("INSERT INTO wal_fuse SELECT generate_series(1, 1000)")
                c.execute("CHECKPOINT")
                c.execute("DROP TABLE wal_fuse")
            env.server.cluster.stop("fast")
    finally:
        env.server.cluster.stop("immediate")
        if wal.is_symlink():
            wal.unlink()
        if mounted:
            _umount(mnt)
        if real.is_dir() and not wal.exists():
            real.rename(wal)
        with contextlib.suppress(OSError):
            mnt.rmdir()
        env.server.cluster.start()
    return f"unmappable pg_wal refused at start: {fatal.split('FATAL:', 1)[1].strip()!r}"


def _fs_type(path: Path) -> str:
    r = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True)
    return r.stdout.strip()


_MSYNC_RE = re.compile(r"\bmsync\(")


def _forced_on_disk(env: EngineEnv) -> str:
    """Forced cache-line granularity on a disk file system: every persist also msync()s."""
    if shutil.which("strace") is None or (not is_root() and ptrace_scope() >= 1):
        return "forced granularity on disk: not run (needs strace and ptrace rights)"
    disk = osuser.ensure_dir(env.workdir / "wal-disk")
    fstype = _fs_type(disk)
    if fstype in ("tmpfs", ""):
        return f"forced granularity on disk: not run (the work directory is on {fstype or '?'})"
    datadir = env.server.cluster.datadir
    wal = datadir / "pg_wal"
    real = datadir / "pg_wal.tmpfs-source"
    commits = 5
    env.server.cluster.stop("fast")
    try:
        wal.rename(real)
        shutil.copytree(real, disk, dirs_exist_ok=True)
        osuser.chown_to_server(disk, recursive=True)
        wal.symlink_to(disk)
        offset = env.server.log_offset()
        env.server.apply(environment={**env.config.environment, FORCE_ENV: "CACHE_LINE"})
        env.server.cluster.start()
        started = env.server.log_since(offset)
        logged = _logged(started)
        trace_log = env.workdir / "strace-commit.txt"
        out_log = env.workdir / "strace-commit-stderr.log"
        with env.server.connect() as c:
            c.execute("CREATE TABLE wal_forced_disk (a int)")
            c.execute("SET synchronous_commit = on")
            # the backend flushes its commits; the WAL writer may flush one first
            pids = [
                r[0]
                for r in c.execute(
                    "SELECT pid FROM pg_stat_activity "
                    "WHERE pid = pg_backend_pid() OR backend_type = 'walwriter'"
                ).fetchall()
            ]
            cmd = ["strace", "-f", "-e", "trace=msync", "-o", str(trace_log)]
            for p in pids:
                cmd += ["-p", str(p)]
            st = Background(cmd, log=out_log)
            try:
                wait_attached(out_log, pids)
                for i in range(commits):
                    c.execute("INSERT INTO wal_forced_disk VALUES (%s)", (i,))
            finally:
                st.signal(signal.SIGINT)
                st.wait(20)
                st.stop()
            c.execute("DROP TABLE wal_forced_disk")
        trace = trace_log.read_text(errors="replace") if trace_log.exists() else ""
        env.save_artifact(trace_log, "strace-commit.txt")
    finally:
        env.server.cluster.stop("fast")
        env.server.apply(environment=dict(env.config.environment))
        if wal.is_symlink():
            # the WAL written meanwhile (up to the shutdown checkpoint) is on the disk: it
            # goes back in place of the old copy, so that the cluster's WAL stays whole
            wal.unlink()
            shutil.rmtree(real)
            shutil.copytree(disk, real)
            osuser.chown_to_server(real, recursive=True)
            shutil.rmtree(disk, ignore_errors=True)
        if real.is_dir() and not wal.exists():
            real.rename(wal)
        env.server.cluster.start()
    line = logged.group(0)
    if logged.group("gran") != "cache-line" or not logged.group("forced"):
        raise CheckFailed(f"pg_wal on {fstype} with {FORCE_ENV}=CACHE_LINE logged {line!r}")
    if "then msync()" not in started:
        raise CheckFailed(
            f"pg_wal on {fstype}, forced to cache lines: the server does not say it also "
            f"msync()s (cache flushes alone leave committed WAL in the page cache): {line!r}"
        )
    msyncs = len(_MSYNC_RE.findall(trace))
    if msyncs < commits:
        raise CheckFailed(
            f"{commits} commits with pg_wal on {fstype}, forced to cache lines: {msyncs} msync() "
            f"calls (committed WAL would stay in the page cache):\n{trace[-800:]}"
        )
    return f"forced cache lines on {fstype}: {msyncs} msync() for {commits} commits"


#: Room left on the full pg_wal's tmpfs beyond the files copied there (bytes): the next
#: segment's file (its last byte) fits, a few hundred kB of its pages do not.
FULL_SPARE = 1 << 20
#: Bound on the WAL written to fill it (statements of ~4 MB of WAL each).
FULL_MAX_STATEMENTS = 40
_SEGMENT_RE = re.compile(r"^[0-9A-F]{24}$")
_REDO_FILE_RE = re.compile(r"Latest checkpoint's REDO WAL file:\s+([0-9A-F]{24})")


def _redo_segment(env: EngineEnv) -> str:
    """The segment of the stopped cluster's last checkpoint's redo pointer."""
    ran = env.run_tool(
        [env.tool("pg_controldata"), "-D", str(env.server.cluster.datadir)],
        timeout=60,
        log_name="wal_pmem-controldata.log",
    )
    m = _REDO_FILE_RE.search(ran.output)
    if ran.returncode != 0 or m is None:
        raise CheckFailed(f"pg_controldata:\n{ran.tail()}")
    return m.group(1)


def _fill_wal(env: EngineEnv) -> str | None:
    """Write WAL until the server goes away; the client's last error, None if it never
    did."""
    try:
        with env.server.connect() as c:
            c.execute("CREATE TABLE wal_full (a int, pad text)")
            for _ in range(FULL_MAX_STATEMENTS):
                c.execute(
                    "INSERT INTO wal_full SELECT g, repeat('w', 400) "
                    "FROM generate_series(1, 8000) g"
                )
    except psycopg.Error as e:
        return str(e).strip() or type(e).__name__
    return None


def _full_wal(env: EngineEnv) -> str:
    """pg_wal fills up while WAL is copied into a segment with holes: PANIC, not SIGBUS.
    On a copy of the stopped cluster, put back afterwards."""
    if not is_root():
        return "full pg_wal: not run (needs root to mount a tmpfs)"
    datadir = env.server.cluster.datadir
    saved = datadir.with_name(datadir.name + ".wal-full-save")
    mnt = env.workdir / "walfull"
    env.server.stop("fast")
    redo = _redo_segment(env)
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(datadir, saved, symlinks=True)
    mounted = False
    error: str | None = None
    log = ""
    try:
        wal = datadir / "pg_wal"
        # the redo segment and what is not a segment: earlier segments are not needed
        # after a clean shutdown, later ones (recycled: fully allocated) must not be there
        keep = [p for p in wal.iterdir() if not _SEGMENT_RE.match(p.name) or p.name == redo]
        size = sum(p.stat().st_size for p in keep if p.is_file()) + FULL_SPARE
        why = storage.mount_tmpfs(mnt, f"size={size // 1024}k,mode=0700", "pgnvm-walfull")
        if why:
            raise CheckFailed(f"mount tmpfs failed: {why}")
        mounted = True
        for p in keep:
            if p.is_dir():
                shutil.copytree(p, mnt / p.name, symlinks=True)
            else:
                shutil.copy2(p, mnt / p.name)
        osuser.chown_to_server(mnt, recursive=True)
        shutil.rmtree(wal)
        wal.symlink_to(mnt)
        # the expected PANIC goes to a log of this part's own (the logging collector's),
        # not to the cluster's, where any PANIC fails the check
        logdir = osuser.ensure_dir(env.workdir / "walfull-log")
        osuser.chown_to_server(logdir)
        settings = {
            "wal_init_zero": "off",
            "wal_recycle": "off",
            "restart_after_crash": "off",
            "logging_collector": "on",
            "log_directory": str(logdir),
            "log_filename": "full.log",
        }
        with env.server.temporary(settings):
            env.server.cluster.start()
            error = _fill_wal(env)
            env.server.cluster.stop("immediate")
        log = (logdir / "full.log").read_text(errors="replace")
    finally:
        env.server.cluster.stop("immediate")
        if mounted:
            _umount(mnt)
        with contextlib.suppress(OSError):
            mnt.rmdir()
        if saved.is_dir():
            shutil.rmtree(datadir, ignore_errors=True)
            saved.rename(datadir)
            osuser.chown_to_server(datadir, recursive=True)
        env.server.cluster.start()
    kept = env.workdir / "wal_pmem-full.log"
    kept.write_text(log)
    env.save_artifact(kept)
    # a PANIC ends its process with abort() (signal 6); any other signal is the defect
    signalled = [
        ln
        for ln in log.splitlines()
        if "terminated by signal" in ln and "terminated by signal 6:" not in ln
    ]
    if signalled:
        raise CheckFailed(f"pg_wal full: a process died of a signal: {signalled[0].strip()}")
    panic = next((ln for ln in log.splitlines() if "PANIC:" in ln), "")
    if error is None or "No space left on device" not in panic:
        raise CheckFailed(
            f"pg_wal full ({FULL_SPARE >> 10} kB spare): expected a PANIC with ENOSPC "
            f"(client: {error!r}), log:\n{log[-1500:]}"
        )
    if "could not pre-fault WAL segment" not in log:
        raise CheckFailed(
            "pg_wal full: the PANIC came, but no copy's pre-fault failed first (the WAL "
            f"was not written through a mapping?):\n{log[-1500:]}"
        )
    return (
        f"full pg_wal: {panic.split('PANIC:', 1)[1].strip()!r} after a pre-fault fell back "
        "to write(), no signal but the PANIC's"
    )


def wal_pmem(env: EngineEnv, limit: float) -> str:
    if not env.config.writes_wal_pmem:
        raise CheckSkipped("nvm_wal = file here: WAL is written as stock PostgreSQL writes it")
    parts = (
        _granularity(env),
        _prefault(env),
        _waldump(env),
        _unmappable(env),
        _forced_on_disk(env),
    )
    return "; ".join((*parts, _full_wal(env)))
