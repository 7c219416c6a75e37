"""mapping_limits' bound on one process's mappings (bench/testsuite/checks/faults.py).

The check judges each writer by its own counters; the bound must accept a process that let
go of everything at the end of each of its smgr lifetimes (the bgwriter after a checkpoint)
and refuse one that kept what it touched (the defect the check is for)."""

from __future__ import annotations

from bench.testsuite.checks.faults import ML_CAP, _held_bound


def _grown(created: int, evicted: int) -> dict[str, int]:
    return {"mappings_created": created, "mappings_evicted": evicted}


def test_a_process_within_the_cap_passes() -> None:
    # 1500 segments through 8 mappings in one lifetime: 1492 evicted
    assert _held_bound("checkpointer", _grown(1500, 1500 - ML_CAP), 1, "x") is None


def test_each_lifetime_may_end_with_the_cap_held() -> None:
    # the bgwriter: two lifetimes (one checkpoint), each ending with 8 let go at once
    assert _held_bound("background writer", _grown(546, 546 - 2 * ML_CAP), 2, "x") is None
    failure = _held_bound("background writer", _grown(546, 546 - 2 * ML_CAP - 1), 2, "x")
    assert failure is not None and "expected >= 530" in failure


def test_a_process_that_keeps_what_it_touched_fails() -> None:
    failure = _held_bound("checkpointer", _grown(1356, 0), 2, "1 checkpoints")
    assert failure is not None
    assert "1356 mappings made, 0 given up" in failure
