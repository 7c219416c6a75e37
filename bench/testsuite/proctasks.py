"""Processes and their threads as /proc shows them (pure logic over a /proc root, so that
the unit tests can point it at a fake tree).

A server process's threads are the entries of ``/proc/<pid>/task`` (the main thread's tid is
the pid); a process that exited but was not reaped yet is a zombie (state ``Z`` in
``/proc/<pid>/stat``); once reaped, ``/proc/<pid>`` is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Stat:
    comm: str
    state: str
    ppid: int


def parse_stat(text: str) -> Stat:
    """``/proc/<pid>/stat``: ``pid (comm) state ppid ...``; comm may hold spaces and
    parentheses, so it ends at the *last* ``)``."""
    head, sep, rest = text.rpartition(")")
    if not sep or "(" not in head:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    fields = rest.split()
    return Stat(comm=head.split("(", 1)[1], state=fields[0], ppid=int(fields[1]))


def tasks(pid: int, root: Path = PROC) -> set[int] | None:
    """The thread ids of process ``pid`` (None once the process is gone)."""
    try:
        return {int(e.name) for e in (root / str(pid) / "task").iterdir() if e.name.isdigit()}
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None


def state(pid: int, root: Path = PROC) -> str | None:
    """The process state letter (``R``, ``S``, ``Z``...), None once it is gone."""
    try:
        return parse_stat((root / str(pid) / "stat").read_text()).state
    except (FileNotFoundError, ProcessLookupError):
        return None


def exists(pid: int, root: Path = PROC) -> bool:
    """``/proc/<pid>`` is there (running, or a zombie not reaped yet). Also true for the tid
    of a live thread of another process."""
    return (root / str(pid)).exists()


def cmdline(pid: int, root: Path = PROC) -> str:
    """The process's command line (its PostgreSQL process title), "" if gone."""
    try:
        raw = (root / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


def children(ppid: int, root: Path = PROC) -> list[int]:
    """The processes whose parent is ``ppid`` (e.g. the postmaster's server processes)."""
    out = []
    for e in root.iterdir():
        if not e.name.isdigit():
            continue
        try:
            if parse_stat((e / "stat").read_text()).ppid == ppid:
                out.append(int(e.name))
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
    return sorted(out)


def task_problem(pid: int, seen: set[int] | None, helper_tids: Iterable[int]) -> str | None:
    """Why ``seen`` (``/proc/<pid>/task``) is not exactly the backend's own thread plus its
    reported helper threads; None if it is."""
    want = {pid, *helper_tids}
    if seen is None:
        return f"process {pid} is gone"
    if seen == want:
        return None
    parts = []
    if extra := sorted(seen - want):
        parts.append(f"unexpected threads {extra}")
    if missing := sorted(want - seen):
        parts.append(f"missing threads {missing}")
    return (
        f"/proc/{pid}/task has {len(seen)} tasks {sorted(seen)}, expected {len(want)} "
        f"(the backend + helpers {sorted(want - {pid})}): " + ", ".join(parts)
    )


def wait_for(probe: Callable[[], str | None], timeout: float, interval: float = 0.05) -> str | None:
    """Call ``probe`` (None: satisfied, else why not) until it is satisfied or ``timeout``
    seconds passed; returns the last reason (None when satisfied)."""
    deadline = time.monotonic() + timeout
    while True:
        why = probe()
        if why is None or time.monotonic() >= deadline:
            return why
        time.sleep(interval)
