"""Pure logic of the prefetch_lifecycle check: /proc, pgnvm_prefetch(), plans, the log."""

from __future__ import annotations

import time

import pytest

from bench.testsuite import nvmstats, plans, proctasks
from bench.testsuite.checks import prefetch_lifecycle as pl
from bench.testsuite.model import CheckFailed

# ---- /proc


def test_task_problem() -> None:
    assert proctasks.task_problem(10, {10, 11}, [11]) is None
    assert proctasks.task_problem(10, {10}, []) is None
    assert proctasks.task_problem(10, None, [11]) == "process 10 is gone"
    why = proctasks.task_problem(10, {10, 11, 12}, [11])
    assert why is not None and "unexpected threads [12]" in why and "missing" not in why
    why = proctasks.task_problem(10, {10}, [11, 12])
    assert why is not None and "missing threads [11, 12]" in why
    why = proctasks.task_problem(10, {10, 13}, [11])
    assert why is not None and "unexpected threads [13]" in why and "missing threads [11]" in why


def test_wait_for_returns_the_last_reason() -> None:
    calls: list[float] = []

    def never() -> str | None:
        calls.append(time.monotonic())
        return "not yet"

    t0 = time.monotonic()
    assert proctasks.wait_for(never, 0.2, interval=0.05) == "not yet"
    assert 0.2 <= time.monotonic() - t0 < 2 and len(calls) >= 2
    n = iter([None])
    assert proctasks.wait_for(lambda: next(n), 0) is None


# ---- pgnvm_prefetch()


def _pool(**kw: object) -> nvmstats.PrefetchPool:
    row = {
        "mode": "helper",
        "mapping": "m1",
        "distance": 64,
        "helpers": 1,
        "scheme": "M1",
        "fallback": None,
        "helper_tids": [501],
        "helper_cpus": [1],
        "jobs_enqueued": 10,
        "jobs_dropped": 0,
        "jobs_done": 9,
        "jobs_skipped": 0,
        "fault_errors": 0,
        "helper_cpu_ms": 1.5,
    }
    row.update({("helper_" + k if k in ("tids", "cpus") else k): v for k, v in kw.items()})
    return nvmstats.prefetch_pool(row)


def test_prefetch_pool_from_a_row() -> None:
    p = _pool()
    assert p.tids == (501,) and p.cpus == (1,) and p.jobs_enqueued == 10
    cols = ("scheme", "fallback", "helper_tids", "helper_cpus", "jobs_enqueued", "jobs_done")
    none = nvmstats.prefetch_pool(
        {"mode": "off", "mapping": "m1", "distance": 64, "helpers": 0, **dict.fromkeys(cols)}
    )
    assert none.helpers == 0 and none.tids == () and none.jobs_enqueued == 0
    assert "no helpers" in none.describe() and "tids [501]" in p.describe()


def test_pool_problem() -> None:
    assert pl.pool_problem(_pool(), "helper", "m1", "M1") is None
    assert "no helper" in (pl.pool_problem(_pool(helpers=0, tids=[]), "helper", "m1", "M1") or "")
    assert "tids" in (pl.pool_problem(_pool(helpers=2), "helper", "m1", "M1") or "")
    assert "no job" in (pl.pool_problem(_pool(jobs_enqueued=0), "helper", "m1", "M1") or "")
    assert "scheme" in (pl.pool_problem(_pool(scheme="NONE"), "helper", "m1", "M1") or "")
    assert "mode=off" in (pl.pool_problem(_pool(mode="off"), "helper", "m1", "M1") or "")
    two = _pool(mapping="0-1", scheme="CPUS", helpers=2, tids=[7, 8], cpus=[1, 0])
    assert pl.pool_problem(two, "helper", "0-1", "CPUS", [0, 1]) is None
    assert "cpus" in (pl.pool_problem(two, "helper", "0-1", "CPUS", [0]) or "")


# ---- plans, process titles, log


def test_gather_workers() -> None:
    plan = [
        {
            "Plan": {
                "Node Type": "Aggregate",
                "Plans": [
                    {
                        "Node Type": "Gather",
                        "Workers Planned": 2,
                        "Workers Launched": 1,
                        "Plans": [{"Node Type": "Parallel Seq Scan"}],
                    }
                ],
            }
        }
    ]
    assert plans.gather_workers(plan) == (2, 1)
    with pytest.raises(CheckFailed, match="no Gather"):
        plans.gather_workers([{"Plan": {"Node Type": "Seq Scan"}}])


def test_worker_of() -> None:
    assert pl.worker_of("postgres: parallel worker for PID 123", 123)
    assert pl.worker_of("postgres: pgnvm-test-se2: parallel worker for PID 123 ", 123)
    assert not pl.worker_of("postgres: parallel worker for PID 1234", 123)
    assert not pl.worker_of("postgres: pgnvm postgres [local] SELECT", 123)


def test_crash_lines() -> None:
    fine = (
        "2026-11-22 02:00:00 GMT [5] FATAL:  terminating connection due to administrator command\n"
        "2026-11-22 02:00:00 GMT [6] ERROR:  canceling statement due to user request\n"
    )
    assert pl.crash_lines(fine) == []
    crash = (
        "LOG:  server process (PID 77) was terminated by signal 11: Segmentation fault\n"
        "LOG:  terminating any other active server processes\n"
        "LOG:  all server processes terminated; reinitializing\n"
    )
    got = pl.crash_lines(crash)
    assert len(got) == 3 and "signal 11" in got[0] and "reinitializing" in got[2]
