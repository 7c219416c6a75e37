"""What an HA cluster is (pure logic, unit-tested): its members, their ports and directories,
and the configuration files of etcd and Patroni rendered from them.

An HA cluster ``<name>`` is 3 etcd members and 3 pgnvm nodes, each node a Patroni daemon
that runs one PostgreSQL server of the release (or check) build, all on 127.0.0.1:

* state (logs, Patroni's configuration, the etcd data): ``$PGNVM_HOME/ha/<name>/``
  (``state.json``, ``etcd<i>/``, ``node<i>/``), owned by the server user;
* each node's data directory on the nvm root, as a pgnvm cluster's
  (:func:`bench.core.cluster.resolve_datadir` of the spec ``ha-<name>-node<i>``);
* secrets (superuser: the home's, :mod:`bench.core.auth`; replication, rewind and the REST
  API's: generated per cluster) in ``$PGNVM_HOME/secrets/ha-<name>.json``, mode 0600.

Patroni's timing (:data:`TIMING`): Patroni's smallest TTL, 20 s, is the failover time when
a whole node dies (its Patroni cannot give the leader key back: the key must expire);
``primary_start_timeout = 0`` makes a dead postmaster on a live node a failover at the next
loop (``loop_wait`` = 2 s) instead of a restart in place.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.core import auth, configs

MEMBERS = 3
DEFAULT_CONFIG = "nvm_se2_pmem"
#: roles Patroni creates at bootstrap (the superuser is the home's, auth.SUPERUSER)
REPLICATION_USER = "replicator"
REWIND_USER = "rewinder"
REST_USER = "patroni"
#: the leader key's TTL, Patroni's loop, its retries of the DCS and PostgreSQL
#: (loop_wait + 2 * retry_timeout <= ttl; ttl >= 20 is Patroni's minimum)
TIMING: dict[str, int] = {
    "ttl": 20,
    "loop_wait": 2,
    "retry_timeout": 5,
    "primary_start_timeout": 0,
}
#: the ports of one cluster: per member, in this order
PORT_ROLES = ("postgres", "restapi", "etcd_client", "etcd_peer")
PORT_START = 5600
#: settings every node gets on top of the configuration's (configs.server_settings)
COMMON_SETTINGS: dict[str, str] = {
    "shared_buffers": "128MB",
    "max_connections": "60",
    "hot_standby": "on",
    "wal_keep_size": "256MB",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "log_line_prefix": "%m [%p] %q%a ",
}


class HaError(RuntimeError):
    """A bad request or a fault of an HA cluster, said so that the user knows what to do."""


@dataclass
class HaSpec:
    name: str = "ha"
    config: str = DEFAULT_CONFIG  # a name of the catalogue (bench/core/configs.py)
    flavour: str = "release"
    #: member i's ports, role -> port (PORT_ROLES)
    ports: list[dict[str, int]] = field(default_factory=list)
    #: node i's data directory (on the nvm root)
    datadirs: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)  # on top of COMMON_SETTINGS

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> HaSpec:
        return cls(
            **{k: doc[k] for k in ("name", "config", "flavour", "ports", "datadirs") if k in doc},
            settings=dict(doc.get("settings", {})),
        )

    @property
    def cfg(self) -> configs.Config:
        try:
            return configs.BY_NAME[self.config]
        except KeyError:
            raise HaError(
                f"unknown configuration {self.config!r}; one of {', '.join(configs.NAMES)}"
            ) from None

    def node_names(self) -> list[str]:
        return [f"node{i + 1}" for i in range(MEMBERS)]

    def server_settings(self) -> dict[str, str]:
        """Every node's PostgreSQL settings: the common ones, the configuration's (engine
        included), ours last."""
        cfg = self.cfg
        if cfg.storage != "nvm":
            raise HaError(
                f"configuration {cfg.name} keeps its data on {cfg.storage}: HA "
                "nodes live on the nvm root; pick an nvm_* configuration"
            )
        if cfg.sized_to_db:
            raise HaError(
                f"configuration {cfg.name} sizes shared_buffers to a database: "
                "not for an HA cluster"
            )
        s = configs.server_settings(cfg, {**COMMON_SETTINGS, **self.settings})
        if cfg.engine != "base":
            s["nvm_storage_engine"] = cfg.engine
        return s


def allocate_ports(free: Any, start: int = PORT_START, fixed: bool = False) -> list[dict[str, int]]:
    """Ports for every member and role. ``free(port) -> str | None`` says why a port cannot
    be taken (None: free). From ``start`` on, skipping taken ports; with ``fixed`` (the user
    gave ``--port``), the 12 ports from ``start`` on must all be free, else HaError naming
    the first one taken and why."""
    want = MEMBERS * len(PORT_ROLES)
    chosen: list[int] = []
    port = start
    while len(chosen) < want:
        if port > 65535:
            raise HaError(f"no {want} free ports from {start} on")
        why = free(port)
        if why is None:
            chosen.append(port)
        elif fixed:
            i, r = divmod(port - start, len(PORT_ROLES))
            raise HaError(
                f"port {port} (node{i + 1}'s {PORT_ROLES[r]}) is in use: {why}; "
                f"give --port another first port (needs {want} free ports in a row)"
            )
        port += 1
    it = iter(chosen)
    return [{role: next(it) for role in PORT_ROLES} for _ in range(MEMBERS)]


def etcd_initial_cluster(spec: HaSpec) -> str:
    return ",".join(
        f"etcd{i + 1}=http://127.0.0.1:{p['etcd_peer']}" for i, p in enumerate(spec.ports)
    )


def etcd_hosts(spec: HaSpec) -> list[str]:
    return [f"127.0.0.1:{p['etcd_client']}" for p in spec.ports]


def etcd_command(spec: HaSpec, i: int, data_dir: Path, etcd: str = "etcd") -> list[str]:
    """etcd member ``i`` (0-based): client and peer URLs on 127.0.0.1 only, no metrics
    listener of its own; heartbeat 100 ms, election after 1 s (loopback: no latency)."""
    p = spec.ports[i]
    client = f"http://127.0.0.1:{p['etcd_client']}"
    peer = f"http://127.0.0.1:{p['etcd_peer']}"
    return [
        etcd,
        "--name", f"etcd{i + 1}",
        "--data-dir", str(data_dir),
        "--listen-client-urls", client,
        "--advertise-client-urls", client,
        "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer,
        "--initial-cluster", etcd_initial_cluster(spec),
        "--initial-cluster-token", f"pgnvm-ha-{spec.name}",
        "--initial-cluster-state", "new",
        "--heartbeat-interval", "100",
        "--election-timeout", "1000",
        "--log-level", "warn",
    ]  # fmt: skip


def hba_lines() -> list[str]:
    """pg_hba.conf of every node: pgnvm's (peer on the socket through the ident map,
    scram-sha-256 on loopback TCP, replication included), without its comments."""
    return [ln for ln in auth.HBA.splitlines() if ln.strip() and not ln.startswith("#")]


def ident_lines() -> list[str]:
    return [
        ln
        for ln in auth.ident_text(auth.ident_users()).splitlines()
        if ln.strip() and not ln.startswith("#")
    ]


def patroni_config(
    spec: HaSpec,
    i: int,
    *,
    secrets: dict[str, str],
    superuser_password: str,
    node_dir: Path,
    socket_dir: Path,
    bindir: Path,
) -> dict[str, Any]:
    """Patroni's configuration of node ``i`` (0-based), a YAML-able dict: scope
    ``pgnvm-<name>``, the REST API and PostgreSQL on 127.0.0.1 with passwords, etcd3, the
    dynamic configuration of a new cluster (:data:`TIMING`, synchronous mode, pg_rewind,
    slots; the server settings) and initdb with data checksums."""
    p = spec.ports[i]
    name = spec.node_names()[i]
    params = spec.server_settings()
    params["unix_socket_directories"] = str(socket_dir)
    return {
        "scope": f"pgnvm-{spec.name}",
        "name": name,
        "log": {"dir": str(node_dir), "file_num": 2, "level": "INFO"},
        "restapi": {
            "listen": f"127.0.0.1:{p['restapi']}",
            "connect_address": f"127.0.0.1:{p['restapi']}",
            "authentication": {"username": REST_USER, "password": secrets["restapi"]},
        },
        "etcd3": {"hosts": etcd_hosts(spec)},
        "bootstrap": {
            "dcs": {
                **TIMING,
                "maximum_lag_on_failover": 16 * 1024 * 1024,
                "synchronous_mode": True,
                "postgresql": {
                    "use_pg_rewind": True,
                    "use_slots": True,
                    "parameters": params,
                },
            },
            "initdb": [
                "data-checksums",
                {"encoding": "UTF8"},
                {"locale": "C"},
                {"auth-local": "peer"},
                {"auth-host": "scram-sha-256"},
            ],
        },
        "postgresql": {
            "listen": f"127.0.0.1:{p['postgres']}",
            "connect_address": f"127.0.0.1:{p['postgres']}",
            "data_dir": spec.datadirs[i],
            "bin_dir": str(bindir),
            "pgpass": str(node_dir / "pgpass"),
            "authentication": {
                "superuser": {"username": auth.SUPERUSER, "password": superuser_password},
                "replication": {"username": REPLICATION_USER, "password": secrets["replication"]},
                "rewind": {"username": REWIND_USER, "password": secrets["rewind"]},
            },
            "parameters": {"unix_socket_directories": str(socket_dir)},
            "pg_hba": hba_lines(),
            "pg_ident": ident_lines(),
            "use_unix_socket": True,
            "use_unix_socket_repl": False,
        },
        "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False},
    }


def render_yaml(doc: dict[str, Any]) -> str:
    """YAML that Patroni reads: JSON is YAML (no PyYAML needed to write it)."""
    return json.dumps(doc, indent=2) + "\n"
