"""bench/ha/control.py without processes: secrets kept 0600, ports of other clusters
reserved, a port in use named, a configuration refused with the reason; the ha check is
registered in a task of its own, in the default run but not in --quick."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path

import pytest

from bench.ha import cli as ha_cli
from bench.ha import control
from bench.ha.spec import HaError
from bench.testsuite import registry, runner


def test_secrets_are_private_and_kept(home: Path) -> None:
    first = control.load_secrets("x")
    f = control.secrets_file("x")
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(f.parent.stat().st_mode) == 0o700
    assert set(first) == {"replication", "rewind", "restapi"}
    assert len(set(first.values())) == 3
    assert control.load_secrets("x") == first


def test_new_spec_skips_ports_of_other_ha_clusters(home: Path) -> None:
    a = control.new_spec("a", "nvm_se2", "release", None, port_start=6100)
    control.HaCluster(a).save()
    b = control.new_spec("b", "nvm_se2", "release", None, port_start=6100)
    pa = {p for m in a.ports for p in m.values()}
    pb = {p for m in b.ports for p in m.values()}
    assert not pa & pb
    assert all("ha-a-node" in d for d in a.datadirs)
    doc = json.loads((control.state_dir("a") / control.STATE_FILE).read_text())
    assert doc["spec"]["ports"] == a.ports


def test_a_port_in_use_is_named(home: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(HaError, match=rf"port {port} \(node1's postgres\) is in use"):
            control.new_spec("c", "nvm_se2", "release", port)


def test_unknown_and_refused_configurations(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HaError, match="unknown configuration 'nope'"):
        ha_cli._check_config("nope", "release")
    monkeypatch.setattr(
        ha_cli.configs, "verdict", lambda *a: ha_cli.configs.Verdict(False, "invalid value")
    )
    with pytest.raises(HaError, match="cannot run with the release build: invalid value"):
        ha_cli._check_config("nvm_se2", "release")


def test_status_of_a_missing_cluster_says_how_to_make_it(home: Path, capsys) -> None:
    from bench import cli

    assert cli.main(["ha", "status", "--name", "nope"]) == 1
    assert "./pgnvm ha up --name nope" in capsys.readouterr().err


def test_ha_check_runs_by_default_in_a_task_of_its_own() -> None:
    assert "ha" not in registry.OPT_IN and "ha" in registry.OWN_TASK
    assert "ha" in registry.select(None)[0]
    assert registry.select(["ha"])[0] == ["ha"]
    assert "ha" not in registry.select(None, quick=True)[0]
    order = runner.lane_order([("once", runner.ONCE_NEXT), ("ha", 200.0), ("cfg", 300.0)])
    assert order == ["once", "cfg", "ha"]


def test_down_stops_the_leader_last(home: Path) -> None:
    ha = control.HaCluster(control.new_spec("d", "nvm_se2", "release", None, port_start=6400))
    assert ha.stop_order("node1") == [1, 2, 0]
    assert ha.stop_order("node2") == [0, 2, 1]
    assert ha.stop_order(None) == [0, 1, 2]


def test_waiting_for_the_first_nodes_ignores_a_later_nodes_stale_pid(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second ``up``: node2's pid of the last run is dead, node2 not started yet."""
    import os

    ha = control.HaCluster(control.new_spec("w", "nvm_se2", "release", None, port_start=6500))
    ha.pids = {"node1": os.getpid(), "node2": 2**22 + 12345}
    calls: list[int] = []

    def members() -> list[dict[str, str]]:  # not healthy at the first look, then a leader
        calls.append(1)
        return [{"name": "node1", "role": "leader", "state": "running"}] if len(calls) > 1 else []

    monkeypatch.setattr(ha, "members", members)
    assert ha.wait_healthy(timeout=5, nodes=1) == "node1"
    with pytest.raises(HaError, match="node2's Patroni exited"):
        ha.wait_healthy(timeout=2, nodes=2)


def test_a_replica_streaming_an_older_timeline_is_not_healthy(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old primary started as a standby before its pg_rewind fetches timeline 1 from the
    new primary (timeline 2): ``streaming`` in Patroni's view, but not following it."""
    ha = control.HaCluster(control.new_spec("t", "nvm_se2", "release", None, port_start=6700))
    ha.pids = {}
    view = [
        {"name": "node2", "role": "leader", "state": "running", "timeline": 2},
        {"name": "node3", "role": "sync_standby", "state": "streaming", "timeline": 2},
        {"name": "node1", "role": "replica", "state": "streaming", "timeline": 1},
    ]
    monkeypatch.setattr(ha, "members", lambda: view)
    with pytest.raises(HaError, match=r"node1: replica/streaming on timeline 1, the leader.s 2"):
        ha.wait_healthy(timeout=1)
    view[2]["timeline"] = 2  # rewound, following
    assert ha.wait_healthy(timeout=1) == "node2"
