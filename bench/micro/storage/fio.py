"""The independent check: ``fio`` (Debian) runs the Linux I/O patterns of the table scan
(``rw=read``) and of the buffer manager's reads (``rw=randread``) with ``pread``
(``ioengine=psync``), 4 KiB blocks, one job per thread on that thread's data file, the same
bytes and time limit as storagebench, no per-I/O latency statistics (``gtod_reduce``: they
cost ~10% of a microsecond read), no fadvise hint (storagebench gives none: the
kernel's readahead works the same for both), page cache invalidated as fio does by default
(and dropped before every repetition on the disk, as storagebench's are). Compared with
storagebench's ``pread`` table scan and 0%-write bufman at the same thread count."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

#: fio pattern -> the storagebench measurement it checks: (benchmark, write ratio)
PATTERNS: dict[str, tuple[str, int | None]] = {
    "read": ("tablescan", None),
    "randread": ("bufman", 0),
}
BLOCK = 4096


def command(
    pattern: str, files: list[Path], size: int, io_size: int, max_seconds: float
) -> list[str]:
    """fio's command line: global options, then one job per file."""
    cmd = [
        "fio",
        "--output-format=json",
        f"--rw={pattern}",
        f"--bs={BLOCK}",
        "--ioengine=psync",
        f"--size={size}",
        f"--io_size={io_size}",
        "--group_reporting",
        "--invalidate=1",
        "--norandommap",
        "--randrepeat=0",
        "--fadvise_hint=0",  # no POSIX_FADV_RANDOM/SEQUENTIAL: storagebench gives none
        "--gtod_reduce=1",  # no clock reads per I/O (latency statistics): a loop as lean as ours
    ]
    if max_seconds > 0:
        cmd.append(f"--runtime={max(1, round(max_seconds * 1000))}ms")
    for i, f in enumerate(files):
        cmd += [f"--name=t{i}", f"--filename={f}"]
    return cmd


def parse(text: str) -> dict[str, float]:
    """Bandwidth (GiB/s) and operations/s of fio's JSON output (group_reporting: one job
    that sums all threads)."""
    doc = json.loads(text[text.index("{") :])  # fio may print notes before the JSON
    read = doc["jobs"][0]["read"]
    return {"gib_per_s": read["bw_bytes"] / (1 << 30), "ops_per_s": float(read["iops"])}


def measure(
    pattern: str,
    files: list[Path],
    size: int,
    io_size: int,
    max_seconds: float,
    reps: int,
    before_rep: Any = None,
) -> dict[str, Any]:
    """``reps`` fio runs (``before_rep()`` before each, e.g. dropping the page cache);
    median, min and max of the bandwidth."""
    cmd = command(pattern, files, size, io_size, max_seconds)
    runs = []
    for _ in range(reps):
        if before_rep is not None:
            before_rep()
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise RuntimeError(f"fio exited {p.returncode}: {p.stderr.strip()[-300:]}")
        runs.append(parse(p.stdout))
    g = [r["gib_per_s"] for r in runs]
    return {
        "pattern": pattern,
        "threads": len(files),
        "gib_per_s": statistics.median(g),
        "gib_per_s_min": min(g),
        "gib_per_s_max": max(g),
        "ops_per_s": statistics.median(r["ops_per_s"] for r in runs),
        "command": " ".join(cmd),
    }
