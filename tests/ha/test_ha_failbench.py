"""bench/ha/failbench.py without a cluster: pgbench's tps line read, the table."""

from __future__ import annotations

from bench.ha import failbench
from bench.ha.failbench import BenchRound


def test_tps_line() -> None:
    out = "latency average = 2.1 ms\ntps = 1874.123456 (without initial connection time)\n"
    m = failbench._TPS.search(out)
    assert m and float(m.group(1)) == 1874.123456


def test_table_and_median() -> None:
    rounds = [
        BenchRound(1, "node1", "node2", 1000, 900, 1.5, 2.0, 2.5),
        BenchRound(2, "node2", "node3", 1100, 950, 2.5, 3.0, 3.5),
        BenchRound(3, "node3", "node1", 1050, 1000, 0.5, 2.5, 9.0),
    ]
    lines = failbench.table(rounds)
    assert lines[2] == "| 1 | node1 -> node2 | 1000 | 900 | 1.5 | 2.0 | 2.5 |"
    assert lines[-1].endswith("median of 3: first commit 3.5 s after the kill")
