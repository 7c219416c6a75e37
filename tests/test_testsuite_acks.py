from __future__ import annotations

import threading

from bench.testsuite.acks import AckLog, verify_acks


def test_all_acknowledged_present_is_ok() -> None:
    v = verify_acks([1, 2, 3], [1, 2, 3, 4], lo=1, hi=4)  # 4: committed, ack lost in the crash
    assert v.ok and v.checked == 3 and v.missing == [] and v.unexpected == []
    assert "checked 3" in v.describe()


def test_lost_acknowledged_commit_is_reported() -> None:
    v = verify_acks([1, 2, 3, 5], [1, 3, 4], lo=1, hi=6)
    assert not v.ok
    assert v.missing == [2, 5]
    assert "2 LOST" in v.describe() and "2, 5" in v.describe()


def test_rows_never_sent_are_reported() -> None:
    v = verify_acks([1], [1, 99], lo=1, hi=10)
    assert not v.ok and v.unexpected == [99]


def test_duplicate_acks_checked_once_and_generators_accepted() -> None:
    v = verify_acks((i for i in [1, 1, 2]), iter([1, 2]), lo=1, hi=2)
    assert v.ok and v.checked == 2


def test_describe_truncates_long_lists() -> None:
    v = verify_acks(range(1, 101), [], lo=1, hi=100)
    d = v.describe(limit=3)
    assert "100 LOST" in d and "1, 2, 3" in d and "(+97 more)" in d


def test_acklog_is_thread_safe() -> None:
    log = AckLog()

    def work(base: int) -> None:
        for i in range(base, base + 1000):
            log.sending(i)
            log.acknowledge(i)

    ts = [threading.Thread(target=work, args=(k * 1000,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    snap = log.snapshot()
    assert sorted(snap) == list(range(4000)) and log.attempted == 3999
    snap.append(-1)  # a snapshot is a copy
    assert -1 not in log.acked
