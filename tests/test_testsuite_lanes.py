"""Lanes of ``./pgnvm test`` (bench/testsuite/lanes.py) and what the runner builds on them:
tasks side by side in worker processes, results collected, a dying lane reported, the
reference configuration's values reaching the other lanes, the slowest-checks table."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.testsuite import lanes, runner
from bench.testsuite.context import RunState
from bench.testsuite.model import CheckResult, Status

Emit = Callable[[CheckResult], None]


def _run_state(tmp_path: Path, stamp: str = "s1") -> RunState:
    return RunState(
        stamp=stamp,
        results_dir=tmp_path / "results",
        work_root=tmp_path / "work",
        keep=False,
        seed=1,
        tree=tmp_path / "tree",
        reference_file=tmp_path / "results" / "test-reference.json",
    )


def _passing(label: str, n: int, pause: float = 0.0) -> lanes.Task:
    def run(emit: Emit) -> None:
        for k in range(n):
            time.sleep(pause)
            emit(CheckResult(f"c{k}", label, Status.PASS, 0.1, f"pid {os.getpid()}"))

    return lanes.Task(label, run)


def test_tasks_run_side_by_side_in_other_processes(tmp_path: Path) -> None:
    tasks = [_passing(f"t{i}", 3, pause=0.3) for i in range(4)]
    t0 = time.monotonic()
    assert lanes.run_tasks(tasks, 2)
    took = time.monotonic() - t0
    assert all(t.done for t in tasks)
    assert [[r.check for r in t.results] for t in tasks] == [["c0", "c1", "c2"]] * 4
    pids = {r.detail for t in tasks for r in t.results}
    assert len(pids) == 2 and f"pid {os.getpid()}" not in pids  # two lanes, not this process
    assert took < 4 * 3 * 0.3  # overlapped (sequentially it would take 3.6 s at least)


def test_one_lane_runs_here_in_order() -> None:
    seen: list[str] = []

    def run(emit: Emit) -> None:
        seen.append("ran")
        emit(CheckResult("c", "x", Status.PASS, 0.0, f"pid {os.getpid()}"))

    tasks = [lanes.Task("x", run), _passing("y", 1)]
    assert lanes.run_tasks(tasks, 1)
    assert seen == ["ran"]
    assert tasks[0].results[0].detail == f"pid {os.getpid()}"


def test_a_task_that_raises_fails_and_the_lane_goes_on() -> None:
    def boom(emit: Emit) -> None:
        emit(CheckResult("first", "b", Status.PASS))
        raise RuntimeError("kaputt")

    tasks = [lanes.Task("b", boom), _passing("after", 2)]
    assert lanes.run_tasks(tasks, 2)
    assert [r.status for r in tasks[0].results] == [Status.PASS, Status.FAIL]
    assert "RuntimeError: kaputt" in tasks[0].results[1].detail
    assert [r.status for r in tasks[1].results] == [Status.PASS, Status.PASS]


def test_a_lane_that_dies_is_reported_and_the_other_tasks_still_run() -> None:
    def die(emit: Emit) -> None:
        emit(CheckResult("before", "d", Status.PASS))
        os._exit(7)

    tasks = [lanes.Task("d", die), *[_passing(f"t{i}", 1) for i in range(3)]]
    assert lanes.run_tasks(tasks, 2)
    assert [r.check for r in tasks[0].results] == ["before", "lane"]
    assert tasks[0].results[1].status is Status.FAIL
    assert "died" in tasks[0].results[1].detail and "7" in tasks[0].results[1].detail
    assert all(t.results and t.results[0].status is Status.PASS for t in tasks[1:])


def test_reference_values_reach_other_processes_marked_as_this_run(tmp_path: Path) -> None:
    run = _run_state(tmp_path)
    run.reference_in_run = True

    def base(emit: Emit) -> None:
        time.sleep(0.5)  # the other lane asks first and must wait
        run.store_reference("k", [1, 2])
        run.reference_done("differential")
        emit(CheckResult("differential", "base", Status.PASS))

    def other(emit: Emit) -> None:
        waited = run.wait_for_reference("differential")
        got = run.load_reference("k")
        emit(CheckResult("differential", "other", Status.PASS, 0.0, json.dumps([waited, got])))

    tasks = [lanes.Task("base", base), lanes.Task("other", other)]
    assert lanes.run_tasks(tasks, 2)
    waited, got = json.loads(tasks[1].results[0].detail)
    assert waited >= 0.3
    assert got == [[1, 2], "this run"]
    # a later run sees it as cached, with the stamp it was recorded in
    later = _run_state(tmp_path, stamp="s2")
    assert later.load_reference("k") == ([1, 2], "cached base run s1")


def test_no_wait_without_the_reference_in_the_run(tmp_path: Path) -> None:
    run = _run_state(tmp_path)
    assert run.wait_for_reference("stress") == 0.0


def test_the_end_of_the_reference_task_releases_every_wait(tmp_path: Path) -> None:
    run = _run_state(tmp_path)
    run.reference_in_run = True
    waited: list[float] = []
    th = threading.Thread(target=lambda: waited.append(run.wait_for_reference("stress")))
    th.start()
    time.sleep(0.6)
    assert th.is_alive()
    run.reference_done("*")
    th.join(5)
    assert not th.is_alive() and waited[0] >= 0.5


def test_the_wait_has_a_limit(tmp_path: Path) -> None:
    run = _run_state(tmp_path)
    run.reference_in_run = True
    assert 0.9 <= run.wait_for_reference("stress", limit=1.0) < 3


def test_slowest_table_sums_over_configurations() -> None:
    rs = [
        CheckResult("stress", "a", Status.PASS, 60.0),
        CheckResult("stress", "b", Status.PASS, 70.0),
        CheckResult("regress", "a", Status.PASS, 20.0),
        CheckResult("pytest", None, Status.PASS, 100.0),
    ]
    lines = runner.slowest_table(rs, top=2)
    assert lines[1].split()[:2] == ["stress", "130.0"] and "max   70.0 (b)" in lines[1]
    assert lines[2].split()[:2] == ["pytest", "100.0"]
    assert len(lines) == 3
    assert runner.slowest_table([]) == []
