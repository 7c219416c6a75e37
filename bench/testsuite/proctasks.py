"""Judging a backend's threads (read by :mod:`bench.core.procfs`) and waiting for /proc to
show what a check expects.

A server process's threads are the entries of ``/proc/<pid>/task`` (the main thread's tid is
the pid): with prefetch helpers, exactly the backend plus the helper tids it reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable


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
