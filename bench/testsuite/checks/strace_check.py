"""strace: in se1+ a sequential scan reads no relation data with pread/preadv.

Acceptance criterion: ``strace -f -e trace=pread64,preadv,preadv2 -y`` of the backend
running a sequential scan of a table twice the size of shared_buffers shows no read of the
table's files. IO workers (io_method=worker, the default) read on the backend's behalf, so
they are traced too. In base the same trace MUST show reads of the table: that control
proves the check can fail.
"""

from __future__ import annotations

import re
import shutil
import signal
import time
from pathlib import Path

from bench.core import procfs
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed, CheckSkipped
from bench.testsuite.plans import scan_stats
from bench.testsuite.proc import Background, is_root

SYSCALLS = "pread64,preadv,preadv2"
# e.g. "12345 pread64(7</mnt/pgnvm/nvm/x/data/base/5/16384>, ..., 8192, 0) = 8192"
_READ_RE = re.compile(r"\b(pread64|preadv2?)\((\d+)<([^>]*)>")


def relation_reads(trace: str, relfile: str) -> list[str]:
    """Trace lines that read ``relfile`` (the file or any of its segments ``relfile.N``)."""
    return relation_calls(trace, relfile, _READ_RE)


def relation_calls(trace: str, relfile: str, call_re: re.Pattern[str]) -> list[str]:
    """Trace lines of the calls ``call_re`` matches (group 3: the path ``strace -y`` shows
    for the descriptor) on ``relfile`` or any of its segments ``relfile.N``."""
    out = []
    for line in trace.splitlines():
        m = call_re.search(line)
        if not m:
            continue
        path = m.group(3)
        if path == relfile or path.startswith(relfile + "."):
            out.append(line)
    return out


def ptrace_scope() -> int:
    try:
        return int(procfs.sysctl("kernel.yama.ptrace_scope") or 0)
    except ValueError:
        return 0


def wait_attached(log: Path, pids: list[int], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if sum(f"Process {p} attached" in text for p in pids) >= len(pids):
            return
        time.sleep(0.1)
    raise CheckFailed(
        f"strace did not attach to {pids} within {timeout}s:\n"
        f"{log.read_text(errors='replace')[-2000:] if log.exists() else ''}"
    )


def strace(env: EngineEnv, limit: float) -> str:
    if shutil.which("strace") is None:
        raise CheckFailed("strace is not installed (./pgnvm installs it as root)")
    if not is_root() and ptrace_scope() >= 1:
        raise CheckSkipped(
            "attaching strace to a server process needs root (or kernel.yama.ptrace_scope=0)"
        )
    with env.server.connect() as c:
        sb = c.execute(
            "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()[0]  # type: ignore[index]
        c.execute("DROP TABLE IF EXISTS strace_t")
        c.execute("CREATE TABLE strace_t (id int, pad text) WITH (autovacuum_enabled = off)")
        # ~2.2x shared_buffers: 130 bytes/row
        rows = int(sb * 2.2 / 130)
        c.execute(
            "INSERT INTO strace_t SELECT g, repeat(md5(g::text), 3) FROM generate_series(1, %s) g",
            (rows,),
        )
        c.execute("VACUUM strace_t")
        size = c.execute("SELECT pg_relation_size('strace_t')").fetchone()[0]  # type: ignore[index]
        relpath = c.execute("SELECT pg_relation_filepath('strace_t')").fetchone()[0]  # type: ignore[index]
    if size < 2 * sb:
        raise CheckFailed(f"strace_t is {size} bytes, not twice shared_buffers ({sb})")
    relfile = str(env.server.cluster.datadir / relpath)
    env.server.restart()  # cold buffers
    trace_log = env.workdir / "strace-scan.txt"
    out_log = env.workdir / "strace-stderr.log"
    with env.server.connect() as c:
        c.execute("SET max_parallel_workers_per_gather = 0")
        backend = c.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        workers = [
            r[0]
            for r in c.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'io worker'"
            ).fetchall()
        ]
        io_method = c.execute("SHOW io_method").fetchone()[0]  # type: ignore[index]
        pids = [backend, *workers]
        cmd = ["strace", "-f", "-e", f"trace={SYSCALLS}", "-y", "-o", str(trace_log)]
        for p in pids:
            cmd += ["-p", str(p)]
        st = Background(cmd, log=out_log)
        try:
            wait_attached(out_log, pids)
            t0 = time.monotonic()
            plan = c.execute(
                "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "
                "SELECT count(*), sum(length(pad)) FROM strace_t"
            ).fetchone()[0]  # type: ignore[index]
            scan_s = time.monotonic() - t0
        finally:
            st.signal(signal.SIGINT)  # strace detaches and flushes
            st.wait(20)
            st.stop()  # kills it if it did not exit
        c.execute("DROP TABLE strace_t")
    scanned, read_blocks = scan_stats(plan)
    blocks = size // 8192
    if scanned != rows:
        raise CheckFailed(f"the seq scan returned {scanned} rows, expected {rows}")
    if read_blocks < 0.9 * blocks:
        # all hits would mean the scan never went to storage: nothing to observe
        raise CheckFailed(
            f"the scan missed only {read_blocks} of {blocks} blocks in shared buffers: "
            "it did not read the table from storage"
        )
    trace = trace_log.read_text(errors="replace") if trace_log.exists() else ""
    reads = relation_reads(trace, relfile)
    nlines = len(trace.splitlines())
    who = f"backend {backend} + {len(workers)} io workers (io_method={io_method})"
    env.save_artifact(trace_log, "strace-scan.txt")
    if env.engine == "base":
        if not reads:
            raise CheckFailed(
                f"control failed: base showed no {SYSCALLS} of {relfile} "
                f"({nlines} traced syscalls by {who}); the check cannot see reads"
            )
        return (
            f"control: base read the table with {len(reads)} syscalls for {read_blocks} "
            f"block misses "
            f"({size >> 20} MB table, {sb >> 20} MB shared_buffers, {who}, scan {scan_s:.1f}s)"
        )
    if reads:
        sample = "\n".join(reads[:5])
        raise CheckFailed(
            f"{len(reads)} {SYSCALLS} calls read {relfile} during the scan ({who}):\n{sample}"
        )
    return (
        f"no {SYSCALLS} of the table's files during a scan of {size >> 20} MB "
        f"with {read_blocks} block misses "
        f"({nlines} other traced syscalls; {who}, scan {scan_s:.1f}s)"
    )
