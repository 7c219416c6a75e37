"""CPU of a server's processes over a window, grouped by backend type: what every job's
"CPU split" (backends, I/O workers, WAL writer, checkpointer, ...) is made of.

:func:`cluster_sample` reads every child of the postmaster through :mod:`bench.core.procfs`
(and the postmaster's *reaped children* times, ``cutime``/``cstime``: processes that exit
during the window, parallel workers, short connections); :func:`cluster_delta` subtracts two
samples per group; :func:`others_cpu_total` sums a delta.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bench.core import procfs

_TITLE_GROUPS = (
    (re.compile(r"^io worker"), "io worker"),
    (re.compile(r"^parallel worker"), "parallel worker"),
    (re.compile(r"^checkpointer"), "checkpointer"),
    (re.compile(r"^background writer"), "background writer"),
    (re.compile(r"^walwriter"), "walwriter"),
    (re.compile(r"^autovacuum launcher"), "autovacuum launcher"),
    (re.compile(r"^autovacuum worker"), "autovacuum worker"),
    (re.compile(r"^logical replication launcher"), "logical replication launcher"),
    (re.compile(r"^startup"), "startup"),
    (re.compile(r"^walsender"), "walsender"),
    (re.compile(r"^walsummarizer"), "walsummarizer"),
)


def group_of(title: str, backend_type: str | None = None) -> str:
    """Group name of a server process: its backend_type if known, else from its title."""
    if backend_type:
        return backend_type
    t = title.removeprefix("postgres:").strip()
    for rx, name in _TITLE_GROUPS:
        if rx.search(t):
            return name
    return "client backend" if t else "unknown"


@dataclass
class ClusterSample:
    postmaster: procfs.ProcSample | None
    procs: dict[int, tuple[str, procfs.ProcSample]]  # pid -> (group, sample)


def cluster_sample(
    postmaster_pid: int, exclude: set[int], backend_types: dict[int, str]
) -> ClusterSample:
    procs: dict[int, tuple[str, procfs.ProcSample]] = {}
    for pid in procfs.children(postmaster_pid):
        if pid in exclude:
            continue
        s = procfs.sample(pid)
        if s is not None:
            procs[pid] = (group_of(procfs.cmdline(pid), backend_types.get(pid)), s)
    return ClusterSample(procfs.sample(postmaster_pid), procs)


def cluster_delta(before: ClusterSample, after: ClusterSample) -> dict[str, Any]:
    """CPU seconds per process group during the window, the postmaster's own, and the reaped
    children's (processes that exited: parallel workers, setup connections)."""
    groups: dict[str, dict[str, float]] = {}
    for pid, (group, s) in after.procs.items():
        prev = before.procs.get(pid)
        if prev is not None and prev[1].starttime == s.starttime:
            d = s.minus(prev[1])
        else:  # started during the window
            d = s.minus(procfs.ZERO)
        g = groups.setdefault(group, {"utime_s": 0.0, "stime_s": 0.0, "procs": 0})
        g["utime_s"] += d["utime_s"]
        g["stime_s"] += d["stime_s"]
        g["procs"] += 1
    out: dict[str, Any] = {"groups": groups}
    if before.postmaster and after.postmaster:
        d = after.postmaster.minus(before.postmaster)
        out["postmaster"] = {"utime_s": d["utime_s"], "stime_s": d["stime_s"]}
        out["exited_children"] = {
            "utime_s": after.postmaster.cutime - before.postmaster.cutime,
            "stime_s": after.postmaster.cstime - before.postmaster.cstime,
        }
    return out


def others_cpu_total(delta: dict[str, Any]) -> float:
    """Total CPU seconds of the cluster's processes other than the measured backend."""
    tot = 0.0
    for g in delta.get("groups", {}).values():
        tot += g["utime_s"] + g["stime_s"]
    for k in ("postmaster", "exited_children"):
        if k in delta:
            tot += delta[k]["utime_s"] + delta[k]["stime_s"]
    return tot
