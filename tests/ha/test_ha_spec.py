"""bench/ha/spec.py: ports, the configurations an HA node takes, etcd's and Patroni's
configuration (loopback only, passwords, synchronous mode, pg_rewind, the timing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core import auth
from bench.ha import spec as S
from bench.ha.spec import HaError, HaSpec


def _spec(config: str = "nvm_se2_pmem_cl") -> HaSpec:
    s = HaSpec(name="t", config=config)
    s.ports = S.allocate_ports(lambda p: None, 6000)
    s.datadirs = [f"/nvm/ha-t-node{i}/data" for i in (1, 2, 3)]
    return s


def test_ports_skip_taken_ones_and_are_distinct() -> None:
    taken = {6001: "busy", 6005: "busy"}
    ports = S.allocate_ports(taken.get, 6000)
    flat = [p for m in ports for p in m.values()]
    assert len(flat) == len(set(flat)) == 12
    assert 6001 not in flat and 6005 not in flat
    assert ports[0] == {"postgres": 6000, "restapi": 6002, "etcd_client": 6003, "etcd_peer": 6004}


def test_a_given_port_in_use_is_named() -> None:
    with pytest.raises(HaError, match=r"port 6005 \(node2's restapi\) is in use: busy"):
        S.allocate_ports({6005: "busy"}.get, 6000, fixed=True)


def test_settings_carry_the_configuration_and_engine() -> None:
    s = _spec().server_settings()
    assert s["nvm_storage_engine"] == "se2"
    assert s["nvm_wal"] == "pmem" and s["nvm_data_persist"] == "pmem"
    assert s["hot_standby"] == "on"


@pytest.mark.parametrize("config", ["disk_base", "mem_limit", "nosuch"])
def test_configurations_an_ha_node_cannot_be(config: str) -> None:
    with pytest.raises(HaError):
        _spec(config).server_settings()


def test_etcd_listens_on_loopback_only() -> None:
    s = _spec()
    cmd = S.etcd_command(s, 1, Path("/x"))
    urls = [cmd[i + 1] for i, a in enumerate(cmd) if a.endswith("-urls")]
    assert urls and all(u.startswith("http://127.0.0.1:") for u in urls)
    assert "etcd2=http://127.0.0.1:6007" in S.etcd_initial_cluster(s)
    assert "--listen-metrics-urls" not in cmd


def test_patroni_config() -> None:
    s = _spec()
    sec = {"replication": "r", "rewind": "w", "restapi": "a"}
    doc = S.patroni_config(
        s, 2, secrets=sec, superuser_password="su", node_dir=Path("/n"),
        socket_dir=Path("/sock"), bindir=Path("/bin"),
    )  # fmt: skip
    json.loads(S.render_yaml(doc))
    assert doc["name"] == "node3"
    assert doc["restapi"]["listen"].startswith("127.0.0.1:")
    assert doc["restapi"]["authentication"] == {"username": "patroni", "password": "a"}
    pg = doc["postgresql"]
    assert pg["listen"] == f"127.0.0.1:{s.ports[2]['postgres']}"
    assert pg["data_dir"] == s.datadirs[2]
    assert pg["authentication"]["superuser"]["username"] == auth.SUPERUSER
    assert pg["authentication"]["replication"]["password"] == "r"
    assert not any("trust" in ln for ln in pg["pg_hba"])
    assert any(ln.split()[:3] == ["host", "replication", "all"] for ln in pg["pg_hba"])
    dcs = doc["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True
    assert dcs["postgresql"]["use_pg_rewind"] is True
    assert dcs["loop_wait"] + 2 * dcs["retry_timeout"] <= dcs["ttl"]
    assert dcs["ttl"] >= 20 and dcs["primary_start_timeout"] == 0
    assert "data-checksums" in doc["bootstrap"]["initdb"]
    assert doc["etcd3"]["hosts"] == [f"127.0.0.1:{p['etcd_client']}" for p in s.ports]


def test_spec_round_trips() -> None:
    s = _spec()
    assert HaSpec.from_json(json.loads(json.dumps(s.to_json()))) == s
