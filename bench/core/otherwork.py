"""Other work on the machine during a measurement, net of our own processes.

The load average counts the benchmark's own server, I/O workers and prefetch helpers, and
this tool: on a quiet 2-CPU machine a TPC-H run alone keeps it above 1. What disturbs the
timings is *other* work, so around each measured window (a query) we take

    other CPU seconds = machine busy CPU seconds (``/proc/stat``)
                        - the server's processes (the caller measures them: the backend,
                          its threads and every other process of the cluster, exited
                          ones included)
                        - this tool (its own process, all threads, and its children, live
                          and reaped)

and report it as "other work, CPUs busy" = other CPU seconds / wall seconds. Short windows
are pooled into blocks of at least :data:`BLOCK_S` seconds (the counters tick every 10 ms,
so a 20 ms query alone would read 0 or 0.5 CPUs); the report gives the median and the
maximum over the blocks and warns (:func:`busy`) when the median exceeds
:data:`MEDIAN_LIMIT` or the maximum :data:`MAX_LIMIT` CPUs.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core import procfs

#: wall seconds of measured windows pooled into one block at least
BLOCK_S = 1.0
#: warn when other work used more than this many CPUs in the median block (a quarter of a
#: CPU: a timing on a 2-CPU machine can then be disturbed by more than its run-to-run noise)
MEDIAN_LIMIT = 0.25
#: ... or more than one whole CPU in any block (another job ran for a while)
MAX_LIMIT = 1.0


@dataclass(frozen=True)
class Sample:
    t: float  # monotonic seconds
    busy_s: float  # the machine's busy CPU seconds since boot
    own_s: float  # this tool's CPU seconds (its process and its children)


def _cpu(s: procfs.ProcSample | None, children: bool = True) -> float:
    if s is None:
        return 0.0
    return s.utime + s.stime + ((s.cutime + s.cstime) if children else 0.0)


def own_cpu_seconds(
    pid: int | None = None, exclude: Iterable[int] = (), root: Path = procfs.PROC
) -> float:
    """CPU seconds of process ``pid`` (default: this one; all threads, reaped children
    included) and of its live children (``exclude``: processes measured otherwise)."""
    pid = os.getpid() if pid is None else pid
    skip = set(exclude)
    tot = _cpu(procfs.sample(pid, root))
    for child in procfs.children(pid, root):
        if child not in skip:
            tot += _cpu(procfs.sample(child, root))
    return tot


def sample(
    exclude: Iterable[int] = (), pid: int | None = None, root: Path = procfs.PROC
) -> Sample | None:
    """Now: the machine's busy CPU and ours (:func:`own_cpu_seconds`); None where /proc has
    no ``stat``."""
    busy = procfs.cpu_busy_seconds(root)
    if busy is None:
        return None
    return Sample(time.monotonic(), busy, own_cpu_seconds(pid, exclude, root))


def delta(before: Sample, after: Sample, server_cpu_s: float) -> dict[str, float]:
    """The window between two samples: its wall seconds, the machine's busy CPU seconds,
    ours (the server's ``server_cpu_s`` and this tool's) and the rest, "other" (never
    below 0: the counters tick in 10 ms steps)."""
    window = max(after.t - before.t, 0.0)
    busy = after.busy_s - before.busy_s
    own = after.own_s - before.own_s
    other = max(busy - server_cpu_s - own, 0.0)
    return {
        "window_s": round(window, 6),
        "busy_cpu_s": round(busy, 3),
        "server_cpu_s": round(server_cpu_s, 3),
        "tool_cpu_s": round(own, 3),
        "other_cpu_s": round(other, 3),
    }


def blocks(windows: Iterable[dict[str, Any]], block_s: float = BLOCK_S) -> list[float]:
    """CPUs busy with other work per block: consecutive windows (:func:`delta`'s) pooled
    until they span ``block_s`` wall seconds (a shorter rest joins the last block)."""
    done: list[list[float]] = []  # [other CPU seconds, wall seconds] per block
    cur = [0.0, 0.0]
    for w in windows:
        cur[0] += float(w["other_cpu_s"])
        cur[1] += float(w["window_s"])
        if cur[1] >= block_s:
            done.append(cur)
            cur = [0.0, 0.0]
    if cur[1] > 0:
        if done:
            done[-1] = [done[-1][0] + cur[0], done[-1][1] + cur[1]]
        else:
            done.append(cur)
    return [other / wall for other, wall in done]


def summary(windows: Iterable[dict[str, Any]]) -> dict[str, float] | None:
    """Median and max over the blocks (CPUs busy with other work), None without windows."""
    b = blocks(windows)
    if not b:
        return None
    return {"median": statistics.median(b), "max": max(b), "blocks": len(b)}


def busy(s: dict[str, float] | None) -> bool:
    """Was the machine materially busy with other work (see :data:`MEDIAN_LIMIT`)?"""
    return s is not None and (s["median"] > MEDIAN_LIMIT or s["max"] > MAX_LIMIT)
