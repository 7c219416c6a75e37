from __future__ import annotations

import hashlib

import pytest

from bench.testsuite import stressmodel as sm
from bench.testsuite.digest import digest_rows


def test_writer_plans_are_fixed_by_the_seed_and_own_disjoint_groups() -> None:
    a = [sm.writer_plan(42, w, 3, 64, 200) for w in range(3)]
    assert a == [sm.writer_plan(42, w, 3, 64, 200) for w in range(3)]
    assert a != [sm.writer_plan(43, w, 3, 64, 200) for w in range(3)]
    groups = [{tx.group for tx in plan} for plan in a]
    assert not (groups[0] & groups[1] or groups[0] & groups[2] or groups[1] & groups[2])
    for w, plan in enumerate(a):
        assert all(tx.group % 3 == w for tx in plan)
        assert len(plan) == 200
    ns = [tx.n for plan in a for tx in plan]
    assert len(set(ns)) == len(ns)  # every pad salt is unique
    kinds = {tx.kind for plan in a for tx in plan}
    assert kinds == {sm.HOT, sm.NON_HOT, sm.ABORT}
    assert sorted(sm.owned_groups(1, 3, 8)) == [1, 4, 7]


def test_final_state_counts_committed_updates_and_the_last_pad() -> None:
    plans = [
        [sm.Tx(0, sm.HOT, 0), sm.Tx(0, sm.NON_HOT, 2), sm.Tx(0, sm.ABORT, 4)],
        [sm.Tx(1, sm.ABORT, 1), sm.Tx(1, sm.NON_HOT, 3), sm.Tx(1, sm.HOT, 5)],
    ]
    st = sm.final_state(plans, 3)
    assert (st[0].v, st[0].pad_n) == (sm.initial_v(0) + 2, 2)
    assert (st[1].v, st[1].pad_n) == (sm.initial_v(1) + 2, 3)
    assert (st[2].v, st[2].pad_n) == (sm.initial_v(2), None)  # never updated


def test_final_rows_render_like_the_server() -> None:
    st = {0: sm.GroupState(7, None), 1: sm.GroupState(1_000_003, 9)}
    rows = list(sm.final_rows(st, 2))
    assert rows[0] == ("0", "1", "7", hashlib.md5(b"0:1").hexdigest() * 6)
    assert rows[3] == ("1", "2", "1000003", hashlib.md5(b"1:2:9").hexdigest() * 6)
    assert len(rows) == 4 and len(rows[0][3]) == 192
    # the digest is the one digest_rows computes over the server's text rows
    server = [tuple(c.encode() for c in r) for r in rows]
    assert digest_rows(rows) == digest_rows(server)


def test_check_groups_accepts_consistent_snapshots() -> None:
    seen: dict[int, int] = {}
    assert sm.check_groups([(0, 5, 5, 10), (1, 7, 7, 10)], 10, seen, groups=2) == []
    assert seen == {0: 5, 1: 7}
    assert sm.check_groups([(0, 6, 6, 10)], 10, seen) == []  # moved forward
    assert seen == {0: 6, 1: 7}


@pytest.mark.parametrize(
    ("rows", "groups", "problem"),
    [
        ([(0, 5, 6, 10)], None, "half-updated"),
        ([(0, 5, 5, 9)], None, "9 rows"),
        ([(0, 5, 5, 11)], None, "11 rows"),
        ([(0, None, None, 0)], None, "no rows"),
        ([(0, 4, 4, 10)], None, "back in time"),
        ([(0, 5, 5, 10)], 2, "missing [1]"),
        ([(0, 5, 5, 10), (0, 5, 5, 10), (1, 9, 9, 10)], 2, "3 groups"),
    ],
)
def test_check_groups_reports_violations(
    rows: list[tuple[int, int | None, int | None, int]], groups: int | None, problem: str
) -> None:
    seen = {0: 5}
    out = sm.check_groups(rows, 10, seen, groups)
    assert out and any(problem in p for p in out), out


def test_crash_lines() -> None:
    from bench.testsuite.checks.stress import crash_lines

    log = (
        "2026-11-22 01:07:54.711 UTC [368] LOG:  checkpoint complete: wrote 1163 buffers\n"
        "2026-11-22 01:07:55.869 UTC [364] LOG:  client backend (PID 403) was terminated by "
        "signal 11: Segmentation fault\n"
        "2026-11-22 01:07:55.869 UTC [364] DETAIL:  Failed process was running: VACUUM stress\n"
        "2026-11-22 01:07:55.869 UTC [364] LOG:  terminating any other active server processes\n"
    )
    assert crash_lines(log) == [
        "client backend (PID 403) was terminated by signal 11: Segmentation fault "
        "(running: VACUUM stress)"
    ]
    assert crash_lines("LOG:  all fine\n") == []
