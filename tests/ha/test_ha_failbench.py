"""bench/ha/failbench.py without a cluster: pgbench's tps line read, the table."""

from __future__ import annotations

import pytest

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
    assert lines[-1].endswith("median of 3: first commit 3.5 s after the kill (postmaster)")


class _FakeHa:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def stop_process(self, key: str, sig: int) -> bool:
        self.calls.append(("stop_process", (key, sig)))
        return True

    def kill_postmaster(self, i: int) -> int:
        self.calls.append(("kill_postmaster", i))
        return 1


def test_a_node_fault_kills_patroni_before_the_postmaster() -> None:
    import signal

    ha = _FakeHa()
    failbench.kill(ha, "node", 1)  # type: ignore[arg-type]
    assert ha.calls == [("stop_process", ("node2", signal.SIGKILL)), ("kill_postmaster", 1)]
    ha = _FakeHa()
    failbench.kill(ha, "postmaster", 0)  # type: ignore[arg-type]
    assert ha.calls == [("kill_postmaster", 0)]
    with pytest.raises(ValueError, match="no fault 'disk'"):
        failbench.kill(_FakeHa(), "disk", 0)  # type: ignore[arg-type]


def test_a_dead_node_may_take_the_ttl_and_a_loop() -> None:
    ttl, loop = failbench.TIMING["ttl"], failbench.TIMING["loop_wait"]
    assert failbench.limit_of("postmaster") == ttl
    assert failbench.limit_of("node") > ttl + loop
    rounds = [BenchRound(1, "node1", "node2", 1000, 900, 1.5, 20.5, 20.7, "node")]
    assert failbench.table(rounds)[-1].endswith("first commit 20.7 s after the kill (node)")


def test_the_fault_is_a_bench_option() -> None:
    from bench import cli

    args = cli.build_parser().parse_args(["ha", "bench", "--fault", "node", "--rounds", "3"])
    assert args.fault == "node" and not args.tpch
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["ha", "bench", "--fault", "disk"])
