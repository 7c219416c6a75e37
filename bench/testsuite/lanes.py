"""Lanes: the tasks of one ``./pgnvm test`` run (a configuration with all its checks, or a
check that runs once) spread over a few worker processes.

Why processes and not threads: every check runs under a SIGALRM time limit
(:func:`bench.testsuite.proc.time_limit`), which only the main thread of a process can
take, and a check may block in C (psycopg, subprocess waits). A lane is a forked copy of
the runner that takes tasks from a shared queue one at a time and sends back each
:class:`~bench.testsuite.model.CheckResult` as soon as it has it, so a lane that dies
loses at most the result of the check it was running (reported as a FAIL of that task).

Why it pays: much of the suite waits rather than computes (TAP clusters waiting for
standbys, ``crash`` sleeping before its ``kill -9``, isolation specs waiting on locks, the
``pytest`` end-to-end runs waiting on servers), so two configurations side by side keep
both cores busy where one alone leaves them idle.

Ctrl-C reaches every lane (same process group); SIGTERM to the runner is passed on to
each lane. A lane that is interrupted sends what it has, marks the task interrupted and
exits; the runner then stops taking results and reports what arrived.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from bench.core import ui
from bench.testsuite.model import CheckResult, Status

# How a lane reports: ("result", task index, CheckResult) for each result, ("done", task
# index, None) at the end of a task, ("interrupted", task index, None) when told to stop.


@dataclass
class Task:
    """One unit of work: ``run(emit)`` calls ``emit(result)`` for each result it produces.
    ``label`` names it in messages (a configuration or a check run once)."""

    label: str
    run: Callable[[Callable[[CheckResult], None]], None]
    results: list[CheckResult] = field(default_factory=list)
    done: bool = False


class LaneInterrupted(KeyboardInterrupt):
    """A lane was told to stop (Ctrl-C or SIGTERM)."""


def _lane_main(tasks: Sequence[Task], todo: Any, out: Connection) -> None:
    """Body of one lane process: run tasks from ``todo`` until it yields None, sending each
    message through ``out`` (a pipe: a send is written before it returns, so a lane that
    dies has already delivered everything it sent)."""

    def _on_term(signum: int, frame: object) -> None:
        raise LaneInterrupted()

    signal.signal(signal.SIGTERM, _on_term)
    while True:
        try:
            i = todo.get()
        except KeyboardInterrupt:
            return
        if i is None:
            return
        try:
            tasks[i].run(lambda r, i=i: out.send(("result", i, r)))
        except KeyboardInterrupt as e:
            # the runner's Interrupted carries the interrupted check's result
            res = getattr(e, "result", None)
            if isinstance(res, CheckResult):
                out.send(("result", i, res))
            out.send(("interrupted", i, None))
            return
        except BaseException as e:  # a task must never take the lane down silently
            r = CheckResult("lane", tasks[i].label, Status.FAIL, 0.0, f"{type(e).__name__}: {e}")
            ui.error(r.line())
            out.send(("result", i, r))
        out.send(("done", i, None))


def run_tasks(tasks: list[Task], lanes: int) -> bool:
    """Run ``tasks`` (in list order as lanes free up) on ``lanes`` processes; each task's
    results land in ``task.results``. Returns False if the run was interrupted (Ctrl-C,
    SIGTERM): the lanes are stopped and what they reported is kept.

    With ``lanes`` == 1 the tasks run in this process, one after the other (no fork)."""
    if lanes <= 1:
        for t in tasks:
            try:
                t.run(t.results.append)
            except KeyboardInterrupt as e:
                res = getattr(e, "result", None)
                if isinstance(res, CheckResult):
                    t.results.append(res)
                return False
            t.done = True
        return True

    ctx = mp.get_context("fork")
    todo = ctx.SimpleQueue()
    for i in range(len(tasks)):
        todo.put(i)
    for _ in range(lanes):
        todo.put(None)
    readers: dict[Connection, BaseProcess] = {}
    for n in range(lanes):
        r, w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_lane_main, args=(tasks, todo, w), name=f"pgnvm-test-lane{n}")
        p.start()
        w.close()  # the lane holds the only writer: its end shows as EOF here
        readers[r] = p
    procs = list(readers.values())
    interrupted = False

    def receive(timeout: float) -> None:
        nonlocal interrupted
        for conn in wait(list(readers), timeout):
            assert isinstance(conn, Connection)
            try:
                kind, i, payload = conn.recv()
            except EOFError:  # the lane ended (or died)
                del readers[conn]
                continue
            if kind == "result":
                tasks[i].results.append(payload)
            elif kind == "done":
                tasks[i].done = True
            elif kind == "interrupted":
                interrupted = True

    try:
        while readers and not interrupted:
            receive(1.0)
    except KeyboardInterrupt:
        interrupted = True
    if interrupted:
        for p in procs:
            if p.is_alive() and p.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)
        # collect what the lanes still send while they clean up
        deadline = time.monotonic() + 60
        while readers and time.monotonic() < deadline:
            with contextlib.suppress(KeyboardInterrupt):
                receive(0.5)
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    if not interrupted:
        for t in tasks:
            if not t.done:
                r = CheckResult(
                    "lane",
                    t.label,
                    Status.FAIL,
                    0.0,
                    "the lane process running this task died before it finished "
                    f"(exit codes {[p.exitcode for p in procs]})",
                )
                t.results.append(r)
                ui.error(r.line())
    return not interrupted
