"""bench/testsuite/checks/ha_check.py without processes: when the replicas count as caught
up (the primary's WAL senders, not the replica's own word), a node Patroni restarts during
the checks (noted, checked again once; a second time fails), crash lines in a node's log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench.ha import control
from bench.testsuite.checks import ha_check
from bench.testsuite.model import CheckFailed


@pytest.fixture
def ha(home: Path, monkeypatch: pytest.MonkeyPatch) -> control.HaCluster:
    c = control.HaCluster(control.new_spec("t", "nvm_se2", "release", None, port_start=6600))
    monkeypatch.setattr(c, "members", lambda: [{"name": "node1", "role": "leader"}])
    monkeypatch.setattr(ha_check, "CATCH_UP_S", 0.3)
    monkeypatch.setattr(ha_check, "_position", lambda ha, leader: ("0/6368700", 2))
    return c


def test_a_replica_past_the_primary_on_the_old_timeline_is_not_caught_up(
    ha: control.HaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old primary node1, started as a standby before its rewind, fetches timeline 1
    from the new primary node2 (on timeline 2) up to the fork: both say ``streaming``, and
    its replay position, on timeline 1, is past node2's."""
    senders = {"node1": "streaming", "node3": "streaming"}
    monkeypatch.setattr(ha_check, "_walsenders", lambda ha, leader: senders)
    states = {0: ("streaming", 1, True), 2: ("streaming", 2, True)}
    monkeypatch.setattr(ha_check, "_replica", lambda ha, i, lsn: states[i])
    with pytest.raises(CheckFailed, match=r"node1 streaming timeline 2 .*\('streaming', 1, True\)"):
        ha_check._caught_up(ha, 1)
    states[0] = ("streaming", 2, True)  # rewound, back on timeline 2
    ha_check._caught_up(ha, 1)


def test_a_replica_not_streaming_from_the_primary_or_behind_it_is_not_caught_up(
    ha: control.HaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    senders = {"node1": "streaming", "node3": "catchup"}
    monkeypatch.setattr(ha_check, "_walsenders", lambda ha, leader: senders)
    states: dict[int, tuple[str, int, bool] | None] = {0: ("streaming", 2, True), 2: None}
    monkeypatch.setattr(ha_check, "_replica", lambda ha, i, lsn: states[i])
    with pytest.raises(CheckFailed, match=r"every replica streaming from node2.*'catchup'"):
        ha_check._caught_up(ha, 1)
    senders["node3"] = "streaming"
    with pytest.raises(CheckFailed, match=r"node3 streaming timeline 2 .* None"):
        ha_check._caught_up(ha, 1)
    states[2] = ("streaming", 2, False)
    with pytest.raises(CheckFailed, match=r"replaying up to the primary's 0/6368700"):
        ha_check._caught_up(ha, 1)
    states[2] = ("streaming", 2, True)
    ha_check._caught_up(ha, 1)


def _refused() -> psycopg.OperationalError:
    return psycopg.OperationalError('connection to server at "127.0.0.1" failed: refused')


def test_a_node_restarted_during_the_checks_is_noted_and_checked_again(
    ha: control.HaCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    checked: list[int] = []
    fail_at = {1}  # node2 refuses once

    def check_node(ha: Any, i: int, primary: bool, *rest: Any) -> None:
        if i in fail_at:
            fail_at.discard(i)
            raise _refused()
        checked.append(i)

    monkeypatch.setattr(ha_check, "_caught_up", lambda ha, leader: None)
    monkeypatch.setattr(ha_check, "_check_node", check_node)
    monkeypatch.setattr(ha, "wait_healthy", lambda timeout: "node3")
    notes: list[str] = []
    assert ha_check._check_nodes(ha, 1, [], 0, tmp_path, notes) == 2  # Patroni's leader now
    assert checked == [0, 0, 1, 2]
    assert len(notes) == 1 and "refused during the checks" in notes[0]

    fail_at.update({1})
    monkeypatch.setattr(
        ha_check, "_check_node", lambda ha, i, *rest: (_ for _ in ()).throw(_refused())
    )
    with pytest.raises(CheckFailed, match=r"again: .*refused during the checks"):
        ha_check._check_nodes(ha, 1, [], 0, tmp_path, [])


def test_crash_lines_in_any_nodes_log_are_found(ha: control.HaCluster) -> None:
    for i in range(3):
        ha.node_dir(i).mkdir(parents=True, exist_ok=True)
        ha.postgres_log(i).write_text(
            "LOG:  database system is ready to accept connections\n"
            "FATAL:  terminating connection due to unexpected postmaster exit\n"
        )
    assert ha_check._crashes(ha) == []
    with open(ha.postgres_log(2), "a") as f:
        f.write("LOG:  server process (PID 77) was terminated by signal 7: Bus error\n")
    assert ha_check._crashes(ha) == [
        "node3: LOG:  server process (PID 77) was terminated by signal 7: Bus error"
    ]
