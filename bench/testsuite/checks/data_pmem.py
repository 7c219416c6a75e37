"""data_pmem: blocks written back through the mappings persisted at once (nvm_data_persist).

Runs in every configuration; what it expects depends on ``nvm_data_persist``:

* checkpoint: a table of a few pages (never vacuumed: no visibility map) is updated in place
  (HOT: no index change, no extension), then VACUUMed (which creates its visibility map and
  free space map through md.c), and ``CHECKPOINT`` writes it back, with
  ``strace -e trace=fsync,fdatasync -y`` on the checkpointer. With ``nvm_data_persist =
  pmem`` the checkpointer must not fsync the table's main fork and
  ``pgnvm_stats.persisted_writes`` grows by at least the table's pages; everywhere else the
  checkpointer fsyncs the main fork and ``persisted_writes`` does not move. In every run the
  checkpointer must fsync the new _vm/_fsm forks: the control, in the same trace, that the
  check sees the checkpointer's fsyncs of this table. And pg_stat_io must count them: the
  checkpointer's relation fsyncs there are the fsync() calls of relation files in the trace,
  plus, with ``nvm_data_persist = pmem``, one per persist of blocks it wrote back (at least
  one, at most one per block: nvm_smgr.c counts each as the fsync it stands for).
* granularity (pmem only): the start-up LOG line names base/ and libpmem2's granularity;
  restarted with ``PMEM2_FORCE_GRANULARITY=CACHE_LINE`` the line says cache-line, forced,
  and writes go through libpmem2's cache flushes (the path real PMem takes) instead of
  msync(). Flushes make nothing durable without MAP_SYNC (tmpfs here): the line says so and
  the main fork is then *also* fsynced by the checkpoint. The configuration's environment is
  restored afterwards.
* refused (base): ``nvm_data_persist = pmem`` with ``nvm_storage_engine = base`` does not
  start: a FATAL naming both settings, nothing else in the log.
"""

from __future__ import annotations

import re
import shutil
import signal
import time
from typing import Any

from bench.testsuite.checks.strace_check import ptrace_scope, relation_calls, wait_attached
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed, CheckSkipped
from bench.testsuite.proc import Background, is_root

FORCE_ENV = "PMEM2_FORCE_GRANULARITY"
SYSCALLS = "fsync,fdatasync"
_FSYNC_RE = re.compile(r"\b(fsync|fdatasync)\((\d+)<([^>]*)>")
# nvm_smgr.c's nvm_init(), once per server start
_LOGGED_RE = re.compile(
    r'nvm_data_persist = pmem: relation blocks in "(?P<dir>[^"]+)" are persisted when '
    r"written, at (?P<gran>[a-z-]+) granularity "
    r"\((?P<how>msync\(\)|cache-line flushes and a fence|a fence)\)"
    r"(?P<forced>, forced by PMEM2_FORCE_GRANULARITY=[A-Z_]+)?"
    r"(?P<also_fsync>; not a MAP_SYNC mapping, so checkpoints still fsync them)?"
)
ROWS = 2000


def _value(c: Any, sql: str, *args: Any) -> Any:
    """The first column of the first row of ``sql``."""
    row = c.execute(sql, args or None).fetchone()
    if row is None:
        raise CheckFailed(f"no row from {sql!r}")
    return row[0]


def _persisted_writes(c: Any) -> int:
    return int(_value(c, "SELECT value FROM pgnvm_counters() WHERE counter = 'persisted_writes'"))


#: a relation file (any fork, any segment) as ``strace -y`` shows it
_RELFILE_RE = re.compile(r"/(base/\d+|global|pg_tblspc/\d+/[^/]+/\d+)/\d+(_\w+)?(\.\d+)?$")
IO_FLUSH_WAIT_S = 10.0

_IO_REL_FSYNCS = (
    "SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io "
    "WHERE backend_type = 'checkpointer' AND object = 'relation'"
)


def checkpoint_settled(c: Any) -> None:
    """CHECKPOINT, returning once the checkpointer has reported that checkpoint's I/O to
    pg_stat_io.

    CHECKPOINT returns when the checkpointer signals completion, and the checkpointer
    reports its statistics only after that, at the top of its main loop
    (checkpointer.c): a pg_stat_reset_shared('io') right after a CHECKPOINT can come
    before the report, which then lands in the counts that follow the reset (seen in CI:
    the load's 27 fsyncs counted with the 6 of the traced checkpoint). The checkpointer
    handles one request at a time and reports before it takes the next, so a second
    CHECKPOINT returns only after the first one's report; it has nothing to write or
    fsync itself (nothing was dirtied in between)."""
    c.execute("CHECKPOINT")
    c.execute("CHECKPOINT")


def _relation_fsyncs(trace: str) -> int:
    """fsync()/fdatasync() calls on relation files in an ``strace -y`` trace."""
    return sum(
        1
        for m in (_FSYNC_RE.search(line) for line in trace.splitlines())
        if m and _RELFILE_RE.search(m.group(3))
    )


def _io_rel_fsyncs(c: Any, at_least: int) -> int:
    """The checkpointer's relation fsyncs in pg_stat_io, once it has reported them (it
    does so after the checkpoint, possibly after CHECKPOINT returned): waits until they are
    at least ``at_least`` (or IO_FLUSH_WAIT_S passed), then returns them."""
    deadline = time.monotonic() + IO_FLUSH_WAIT_S
    while True:
        n = int(_value(c, _IO_REL_FSYNCS))
        if n >= at_least or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


def _checkpoint(env: EngineEnv, tag: str) -> tuple[list[str], list[str], int, int, int, int]:
    """Update the table in place, vacuum it and checkpoint under strace on the
    checkpointer: the checkpointer's fsyncs of the table's main fork and of its _vm/_fsm
    forks, the growth of persisted_writes, the table's pages, and the checkpointer's fsyncs
    as pg_stat_io counts them."""
    trace_log = env.workdir / f"data_pmem-{tag.replace(' ', '-')}.txt"
    out_log = trace_log.with_suffix(".stderr.log")
    trace_log.unlink(missing_ok=True)
    with env.server.connect() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
        c.execute("DROP TABLE IF EXISTS data_pmem_t")
        # fillfactor 30: updates stay on their page with room to spare (HOT): no index
        # change, no extension; never vacuumed until the traced part: no visibility map
        c.execute(
            "CREATE TABLE data_pmem_t (id int PRIMARY KEY, v int, pad text) "
            "WITH (fillfactor = 30, autovacuum_enabled = off)"
        )
        c.execute(
            "INSERT INTO data_pmem_t SELECT g, 0, repeat('p', 100) FROM generate_series(1, %s) g",
            (ROWS,),
        )
        checkpoint_settled(c)  # the creation's and the load's fsyncs happen here
        relpath = _value(c, "SELECT pg_relation_filepath('data_pmem_t')")
        relfile = str(env.server.cluster.datadir / relpath)
        pages = int(_value(c, "SELECT pg_relation_size('data_pmem_t') / 8192"))
        ckpt = int(
            _value(c, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
        )
        c.execute("SELECT pg_stat_reset_shared('io')")
        before = _persisted_writes(c)
        st = Background(
            ["strace", "-e", f"trace={SYSCALLS}", "-y", "-o", str(trace_log), "-p", str(ckpt)],
            log=out_log,
        )
        try:
            wait_attached(out_log, [ckpt])
            c.execute("UPDATE data_pmem_t SET v = v + 1")
            c.execute("VACUUM data_pmem_t")  # creates _vm and _fsm through md.c
            c.execute("CHECKPOINT")
        finally:
            st.signal(signal.SIGINT)  # strace detaches and flushes
            st.wait(20)
            st.stop()
        grew = _persisted_writes(c) - before
        trace = trace_log.read_text(errors="replace") if trace_log.exists() else ""
        traced = _relation_fsyncs(trace)
        io_fsyncs = _io_rel_fsyncs(c, traced + (1 if grew else 0))
        updated = c.execute("SELECT count(*), min(v), max(v) FROM data_pmem_t").fetchone()
        c.execute("DROP TABLE data_pmem_t")
    if updated != (ROWS, 1, 1):
        raise CheckFailed(f"after the update: (rows, min, max) = {updated}")
    persists_counted = io_fsyncs - traced
    if not (min(grew, 1) <= persists_counted <= grew):
        raise CheckFailed(
            f"{tag}: pg_stat_io counts {io_fsyncs} relation fsyncs of the checkpointer, the "
            f"trace shows {traced} fsync() calls of relation files and persisted_writes grew "
            f"by {grew}: expected the traced ones plus {'1..' + str(grew) if grew else 'none'} "
            "(one per persist)"
        )
    env.save_artifact(trace_log, trace_log.name)
    forks = [
        *relation_calls(trace, relfile + "_vm", _FSYNC_RE),
        *relation_calls(trace, relfile + "_fsm", _FSYNC_RE),
    ]
    return relation_calls(trace, relfile, _FSYNC_RE), forks, grew, pages, io_fsyncs, traced


def _expect(env: EngineEnv, tag: str, persists: bool, also_fsync: bool = False) -> str:
    """The checkpoint part; ``persists``: nvm_data_persist = pmem; ``also_fsync``: the
    server said its cache flushes are not durable here, so checkpoints also fsync."""
    fsyncs, forks, grew, pages, io_fsyncs, traced = _checkpoint(env, tag)
    if not forks:
        raise CheckFailed(
            f"{tag}: the checkpointer fsynced neither the new _vm nor the _fsm fork of the "
            f"table (pg_stat_io: {io_fsyncs} checkpointer fsyncs): the trace cannot see them"
        )
    want_fsync = not persists or also_fsync
    if persists and grew < pages:
        raise CheckFailed(f"{tag}: persisted_writes +{grew} for {pages} pages written back")
    if not persists and grew != 0:
        raise CheckFailed(f"{tag}: nvm_data_persist = fsync, yet persisted_writes +{grew}")
    if bool(fsyncs) != want_fsync:
        raise CheckFailed(
            f"{tag}: the checkpointer fsynced the table's main fork {len(fsyncs)} times "
            f"({fsyncs[:3]}); expected {'some' if want_fsync else 'none'}"
        )
    return (
        f"{tag}: {pages} pages written back, persisted_writes +{grew}, the checkpointer "
        f"fsynced the main fork {len(fsyncs)}x, the new _vm/_fsm forks {len(forks)}x; "
        f"pg_stat_io: {io_fsyncs} relation fsyncs = {traced} traced + {io_fsyncs - traced} "
        "persists"
    )


def _logged(text: str) -> re.Match[str]:
    found = list(_LOGGED_RE.finditer(text))
    if not found:
        raise CheckFailed(f"no 'nvm_data_persist = pmem: ...' LOG line:\n{text[-1500:]}")
    return found[-1]


def _granularity(env: EngineEnv) -> str:
    first = _logged(env.server.log_since(0))
    if first.group("dir") != str(env.server.cluster.datadir / "base"):
        raise CheckFailed(f"the LOG line names {first.group('dir')!r}, not base/")
    if bool(first.group("forced")) != (FORCE_ENV in env.config.environment):
        raise CheckFailed(f"environment {env.config.environment or 'none'}: {first.group(0)!r}")
    offset = env.server.log_offset()
    try:
        env.server.apply(environment={**env.config.environment, FORCE_ENV: "CACHE_LINE"})
        env.server.restart()
        forced = _logged(env.server.log_since(offset))
        if forced.group("gran") != "cache-line" or not forced.group("forced"):
            raise CheckFailed(f"with {FORCE_ENV}=CACHE_LINE the server logged {forced.group(0)!r}")
        cl = _expect(env, "forced cache-line", True, bool(forced.group("also_fsync")))
        if forced.group("also_fsync"):
            cl += " (not MAP_SYNC: cache flushes alone are not durable)"
    finally:
        env.server.apply(environment=dict(env.config.environment))
        env.server.restart()
    return f"logged {first.group('gran')} granularity ({first.group('how')}); {cl}"


def _refused(env: EngineEnv) -> str:
    """nvm_data_persist = pmem with base: the server does not start, with a clear FATAL."""
    env.refused_start(
        {"nvm_data_persist": "pmem"},
        '"nvm_data_persist" = pmem requires "nvm_storage_engine" se1 or se2',
    )
    return "base with nvm_data_persist = pmem refused at start (FATAL)"


def data_pmem(env: EngineEnv, limit: float) -> str:
    if shutil.which("strace") is None:
        raise CheckFailed("strace is not installed (./pgnvm installs it as root)")
    if not is_root() and ptrace_scope() >= 1:
        raise CheckSkipped(
            "attaching strace to the checkpointer needs root (or kernel.yama.ptrace_scope=0)"
        )
    persists = env.config.persists_data_pmem
    # forced cache flushes without MAP_SYNC (nvm_se2_pmem_cl on tmpfs): also fsynced
    also_fsync = persists and bool(_logged(env.server.log_since(0)).group("also_fsync"))
    parts = [_expect(env, "checkpoint", persists, also_fsync)]
    if persists:
        parts.append(_granularity(env))
    if env.engine == "base":
        parts.append(_refused(env))
    return "; ".join(parts)
