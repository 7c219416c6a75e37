"""Running an HA cluster (:mod:`bench.ha.spec`): its etcd members and Patroni daemons as the
server user, in sessions of their own (they outlive the command that started them), their
pids in ``state.json``; Patroni's REST API (basic auth) for the members, switchover and
failover; etcd's health endpoint for the quorum. Patroni decides everything else: we never
promote, demote or rewind a server ourselves."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets as pysecrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.core import auth, cluster, osuser, paths, procfs, ui
from bench.ha.spec import (
    MEMBERS,
    PORT_START,
    REST_USER,
    TIMING,
    HaError,
    HaSpec,
    allocate_ports,
    etcd_command,
    patroni_config,
    render_yaml,
)

STATE_FILE = "state.json"
ETCD_START_TIMEOUT = 30.0
NODE_START_TIMEOUT = 180.0


def ha_root() -> Path:
    return paths.pgnvm_home() / "ha"


def state_dir(name: str) -> Path:
    return ha_root() / name


def secrets_file(name: str) -> Path:
    return auth.secrets_dir() / f"ha-{name}.json"


def load_secrets(name: str) -> dict[str, str]:
    """Replication, rewind and REST API passwords of cluster ``name`` (made once, 0600)."""
    f = secrets_file(name)
    if f.is_file():
        return json.loads(f.read_text())
    doc = {k: pysecrets.token_urlsafe(24) for k in ("replication", "rewind", "restapi")}
    auth.private_file(f, json.dumps(doc, indent=2) + "\n")
    return doc


def port_holder(port: int) -> str | None:
    """None when ``port`` is free on 127.0.0.1, else who holds it (as far as we can tell)."""
    if not cluster.port_in_use(port):
        return None
    for c in cluster.Cluster.all():
        if c.spec.port == port and c.is_running():
            return f"the running cluster {c.spec.name}"
    return "something listens on it (ss -ltnp shows what)"


def free_port(port: int, reserved: set[int]) -> str | None:
    if port in reserved:
        return "reserved by another pgnvm cluster or HA cluster"
    return port_holder(port)


def reserved_ports(except_name: str | None = None) -> set[int]:
    """Ports other pgnvm clusters and HA clusters of this home are configured for."""
    out = {c.spec.port for c in cluster.Cluster.all()}
    if ha_root().is_dir():
        for d in ha_root().iterdir():
            if d.name == except_name or not (d / STATE_FILE).is_file():
                continue
            with contextlib.suppress(ValueError, KeyError, OSError):
                for p in HaSpec.from_json(json.loads((d / STATE_FILE).read_text())["spec"]).ports:
                    out |= set(p.values())
    return out


def _on_timeline(member: dict[str, Any], tli: Any) -> bool:
    """Whether a member is on the leader's timeline ``tli`` (either not reported: yes)."""
    return tli is None or member.get("timeline") in (None, tli)


class HaCluster:
    def __init__(self, spec: HaSpec) -> None:
        self.spec = spec
        self.dir = state_dir(spec.name)
        self.pids: dict[str, int] = {}
        self._secrets: dict[str, str] | None = None
        #: changes Patroni's configuration of every node before it is written (the ``ha``
        #: check's deliberately broken setups)
        self.tweak: Callable[[dict[str, Any]], None] | None = None
        #: healthy needs a synchronous standby (False: a setup without synchronous_mode)
        self.needs_sync = True

    # ---- state

    @classmethod
    def load(cls, name: str) -> HaCluster:
        f = state_dir(name) / STATE_FILE
        try:
            doc = json.loads(f.read_text())
        except FileNotFoundError:
            raise HaError(
                f"no HA cluster {name!r} ({f} missing); ./pgnvm ha up --name {name}"
            ) from None
        c = cls(HaSpec.from_json(doc["spec"]))
        c.pids = {k: int(v) for k, v in doc.get("pids", {}).items()}
        return c

    @classmethod
    def exists(cls, name: str) -> bool:
        return (state_dir(name) / STATE_FILE).is_file()

    def save(self) -> None:
        osuser.ensure_dir(self.dir)
        tmp = self.dir / (STATE_FILE + ".tmp")
        tmp.write_text(
            json.dumps({"spec": self.spec.to_json(), "pids": self.pids}, indent=2) + "\n"
        )
        os.replace(tmp, self.dir / STATE_FILE)

    @property
    def secrets(self) -> dict[str, str]:
        if self._secrets is None:
            self._secrets = load_secrets(self.spec.name)
        return self._secrets

    def etcd_dir(self, i: int) -> Path:
        return self.dir / f"etcd{i + 1}"

    def node_dir(self, i: int) -> Path:
        return self.dir / f"node{i + 1}"

    def patroni_log(self, i: int) -> Path:
        return self.node_dir(i) / "patroni.log"

    def postgres_log(self, i: int) -> Path:
        return self.node_dir(i) / "postgres.log"

    def socket_dir(self, i: int) -> Path:
        return cluster.socket_dir_for(self.node_dir(i))

    def bindir(self) -> Path:
        return paths.install_dir(self.spec.flavour) / "bin"

    def pg_port(self, i: int) -> int:
        return self.spec.ports[i]["postgres"]

    def conninfo(self, i: int, dbname: str = "postgres") -> str:
        """TCP (scram) to node ``i`` as the superuser; PGPASSFILE gives the password."""
        return (
            f"host=127.0.0.1 port={self.pg_port(i)} user={auth.SUPERUSER} dbname={dbname} "
            f"passfile={auth.pgpass_file()} connect_timeout=5"
        )

    def connect(self, i: int, dbname: str = "postgres") -> Any:
        """An autocommit connection to node ``i`` over TCP (scram)."""
        import psycopg

        return psycopg.connect(self.conninfo(i, dbname), autocommit=True)

    def client_env(self, i: int, dbname: str = "postgres") -> dict[str, str]:
        """libpq's environment that reaches node ``i`` over TCP (pgbench, pg_amcheck)."""
        return {
            "PGHOST": "127.0.0.1",
            "PGPORT": str(self.pg_port(i)),
            "PGUSER": auth.SUPERUSER,
            "PGDATABASE": dbname,
            "PGPASSFILE": str(auth.pgpass_file()),
            "PGCONNECT_TIMEOUT": "5",
        }

    def wait_new_primary(
        self, old: str | None, t0: float, limit: float, dbname: str, commit_sql: str
    ) -> tuple[str, float, float]:
        """After a fault at ``t0`` (time.monotonic()): (the new leader, seconds until Patroni
        names a running leader other than ``old``, seconds until ``commit_sql`` first
        commits on it). HaError when either takes longer than ``limit``."""
        import psycopg

        deadline = t0 + limit
        new = None
        while new is None:
            lead = self.leader()
            if lead and lead != old:
                new = lead
            elif time.monotonic() > deadline:
                raise HaError(f"no new primary within {limit:.0f}s of the fault")
            else:
                time.sleep(0.1)
        to_primary = time.monotonic() - t0
        i = self.index(new)
        while True:
            try:
                with self.connect(i, dbname) as c:
                    c.execute(commit_sql)
                return new, to_primary, time.monotonic() - t0
            except psycopg.Error as e:
                if time.monotonic() > deadline + 60:
                    raise HaError(f"no commit on the new primary {new}: {e}") from None
                time.sleep(0.1)

    def kill_postmaster(self, i: int) -> int:
        """``kill -9`` of node ``i``'s postmaster (its Patroni lives on); returns its pid."""
        pid = cluster.read_pidfile(Path(self.spec.datadirs[i]))
        if pid is None or not procfs.alive(pid):
            raise HaError(f"node{i + 1}: no postmaster to kill (postmaster.pid: {pid})")
        os.kill(pid, signal.SIGKILL)
        return pid

    # ---- processes

    def running(self, key: str) -> bool:
        """Whether our process ``key`` (etcd<i>, node<i>: its Patroni) runs."""
        pid = self.pids.get(key)
        return pid is not None and procfs.alive(pid) and procfs.state(pid) != "Z"

    def _spawn(self, key: str, cmd: list[str], log: Path, env: dict[str, str]) -> None:
        """Start ``cmd`` as the server user in a session of its own, output to ``log``;
        record the pid of the program itself (not of runuser around it)."""
        osuser.ensure_dir(log.parent)
        with open(log, "ab") as out:
            osuser.chown_to_server(log)
            p = osuser.popen_pg(
                cmd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=str(log.parent),
            )
        pid = p.pid
        if osuser.is_root():  # runuser forks the program: find it
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                kids = procfs.children(p.pid)
                if kids:
                    pid = kids[0]
                    break
                if p.poll() is not None:
                    break
                time.sleep(0.02)
        self.pids[key] = pid
        self.save()

    def start_etcd(self, i: int) -> None:
        key = f"etcd{i + 1}"
        if self.running(key):
            return
        d = self.etcd_dir(i)
        osuser.ensure_dir(d)
        os.chmod(d, 0o700)
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        if not Path(etcd).exists():
            raise HaError(
                "etcd is not installed (Debian package etcd-server; ./pgnvm bootstrap "
                "installs it as root)"
            )
        self._spawn(
            key,
            etcd_command(self.spec, i, d / "data", etcd),
            d / "etcd.log",
            {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )

    def node_env(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL") if k in os.environ}
        env.update(self.spec.cfg.environment)  # e.g. PMEM2_FORCE_GRANULARITY: postgres inherits
        return env

    def write_node_config(self, i: int) -> Path:
        d = self.node_dir(i)
        osuser.ensure_dir(d)
        os.chmod(d, 0o700)
        osuser.ensure_dir(self.socket_dir(i))
        conf = patroni_config(
            self.spec,
            i,
            secrets=self.secrets,
            superuser_password=auth.password(),
            node_dir=d,
            socket_dir=self.socket_dir(i),
            bindir=self.bindir(),
        )
        if self.tweak is not None:
            self.tweak(conf)
        f = d / "patroni.yml"
        auth.private_file(f, render_yaml(conf))
        return f

    def start_node(self, i: int) -> None:
        key = f"node{i + 1}"
        if self.running(key):
            return
        conf = self.write_node_config(i)
        parent = osuser.ensure_dir(Path(self.spec.datadirs[i]).parent)
        osuser.chown_to_server(parent)
        patroni = paths.venv_dir() / "bin" / "patroni"
        if not patroni.exists():
            raise HaError(
                f"{patroni} missing: Patroni is installed into the venv by ./pgnvm "
                "(requirements.txt)"
            )
        self._spawn(key, [str(patroni), str(conf)], self.postgres_log(i), self.node_env())

    def stop_process(self, key: str, sig: int = signal.SIGTERM, timeout: float = 60.0) -> bool:
        """Signal a process of ours and wait until it is gone; SIGKILL after ``timeout``."""
        pid = self.pids.get(key)
        if pid is None or not self.running(key):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while self.running(key):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
            time.sleep(0.05)
        return True

    # ---- etcd

    def etcd_health(self, i: int, timeout: float = 2.0) -> tuple[bool, str]:
        port = self.spec.ports[i]["etcd_client"]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as r:
                doc = json.loads(r.read() or b"{}")
        except (OSError, ValueError) as e:
            return False, f"unreachable ({getattr(e, 'reason', e)})"
        return doc.get("health") in ("true", True), str(doc.get("reason") or doc.get("health"))

    def etcd_quorum(self) -> tuple[bool, list[str]]:
        """Whether a majority of the etcd members is healthy (a member answers healthy only
        while the cluster has a leader), and one line per member."""
        lines, healthy = [], 0
        for i in range(MEMBERS):
            ok, why = self.etcd_health(i)
            healthy += ok
            alive = "running" if self.running(f"etcd{i + 1}") else "not running"
            lines.append(
                f"etcd{i + 1} 127.0.0.1:{self.spec.ports[i]['etcd_client']} {alive}, "
                f"{'healthy' if ok else 'unhealthy: ' + why}"
            )
        return healthy > MEMBERS // 2, lines

    def wait_etcd(self, timeout: float = ETCD_START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            ok, lines = self.etcd_quorum()
            if ok:
                return
            if time.monotonic() > deadline:
                logs = ", ".join(str(self.etcd_dir(i) / "etcd.log") for i in range(MEMBERS))
                raise HaError(
                    "etcd has no quorum (a majority of 3 members healthy) after "
                    f"{timeout:.0f}s:\n  " + "\n  ".join(lines) + f"\nlogs: {logs}"
                )
            time.sleep(0.3)

    # ---- Patroni's REST API

    def _auth_header(self) -> str:
        token = f"{REST_USER}:{self.secrets['restapi']}".encode()
        return "Basic " + base64.b64encode(token).decode()

    def rest(
        self,
        i: int,
        path: str,
        method: str = "GET",
        body: dict | None = None,
        timeout: float = 5.0,
        auth_: bool = True,
    ) -> tuple[int, Any]:
        """(HTTP status, JSON or text) of Patroni's REST API on node ``i``; (0, why) when
        it cannot be reached."""
        url = f"http://127.0.0.1:{self.spec.ports[i]['restapi']}{path}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if auth_:
            req.add_header("Authorization", self._auth_header())
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except OSError as e:
            return 0, str(getattr(e, "reason", e))
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace").strip()

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (``GET /cluster`` of the first node that answers)."""
        for i in range(MEMBERS):
            status, doc = self.rest(i, "/cluster")
            if status == 200 and isinstance(doc, dict):
                return list(doc.get("members", []))
        return []

    def leader(self) -> str | None:
        for m in self.members():
            if m.get("role") == "leader" and m.get("state") == "running":
                return str(m["name"])
        return None

    def index(self, node: str) -> int:
        try:
            return self.spec.node_names().index(node)
        except ValueError:
            raise HaError(f"no node {node!r}; nodes: {', '.join(self.spec.node_names())}") from None

    def wait_healthy(self, timeout: float = NODE_START_TIMEOUT, nodes: int = MEMBERS) -> str:
        """Until there is a running leader and ``nodes`` - 1 replicas stream from it, one of
        them synchronous; returns the leader. HaError naming the logs of the nodes not there.

        A replica streams from the leader when it receives the leader's timeline (Patroni's
        ``timeline`` of a replica is its WAL receiver's): an old primary that must be
        rewound is first started as a standby and fetches the old timeline from the new
        primary up to the fork, ``streaming`` in Patroni's view too, until Patroni stops it
        for pg_rewind."""
        deadline = time.monotonic() + timeout
        members: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            members = self.members()
            leader = [
                m for m in members if m.get("role") == "leader" and m.get("state") == "running"
            ]
            tli = leader[0].get("timeline") if leader else None
            streaming = [
                m
                for m in members
                if m.get("role") in ("replica", "sync_standby")
                and m.get("state") == "streaming"
                and _on_timeline(m, tli)
            ]
            sync = [m for m in streaming if m.get("role") == "sync_standby"]
            if (
                leader
                and len(streaming) >= nodes - 1
                and (nodes < 2 or sync or not self.needs_sync)
            ):
                return str(leader[0]["name"])
            for i in range(nodes):  # those started so far (a stale pid of a later one: no)
                key = f"node{i + 1}"
                if key in self.pids and not self.running(key):
                    raise HaError(
                        f"{key}'s Patroni exited; its log: {self.patroni_log(i)} "
                        f"(PostgreSQL's: {self.postgres_log(i)})\n"
                        + ui.tail(self.patroni_log(i), 15)
                    )
            time.sleep(0.5)
        there = {str(m.get("name")): m for m in members}
        tli = next((m.get("timeline") for m in members if m.get("role") == "leader"), None)
        good = ("leader/running", "replica/streaming", "sync_standby/streaming")

        def bad(m: dict[str, Any] | None) -> str | None:
            """What is wrong with a member (None: nothing)."""
            if m is None:
                return "not in the cluster"
            said = f"{m.get('role')}/{m.get('state')}"
            if said not in good:
                return said
            if not _on_timeline(m, tli):
                return f"{said} on timeline {m.get('timeline')}, the leader's {tli}"
            return None

        lines = [
            f"{n}: {why}; logs {self.patroni_log(i)}, {self.postgres_log(i)}"
            for i, n in enumerate(self.spec.node_names())
            if i < nodes and (why := bad(there.get(n)))
        ]
        if not lines and self.needs_sync:
            lines = ["no synchronous standby (synchronous_mode)"]
        raise HaError(f"the cluster is not healthy after {timeout:.0f}s:\n  " + "\n  ".join(lines))

    # ---- the commands

    def bootstrapped(self) -> bool:
        """Whether a node has a data directory already (a cluster started before)."""
        return any((Path(d) / "PG_VERSION").exists() for d in self.spec.datadirs)

    def up(self, timeout: float = NODE_START_TIMEOUT) -> str:
        """Start etcd (waits for its quorum), then the Patroni nodes: a new cluster's one
        after the other (the first bootstraps: initdb; the others clone it with
        pg_basebackup), an existing cluster's all at once (after a ``down`` only the node
        that was leader last, or its synchronous standby, may take the lead: Patroni's
        synchronous mode; waiting for node1 alone could wait for ever); returns the leader
        once every node runs."""
        osuser.ensure_server_user()
        auth.pgpass_file()  # for clients over TCP: PGPASSFILE
        osuser.ensure_dir(ha_root())
        osuser.ensure_dir(self.dir)
        self.save()
        for i in range(MEMBERS):
            self.start_etcd(i)
        self.wait_etcd()
        if self.bootstrapped():
            for i in range(MEMBERS):
                self.start_node(i)
            return self.wait_healthy(timeout)
        for i in range(MEMBERS):
            self.start_node(i)
            self.wait_healthy(timeout, nodes=i + 1)
        return self.wait_healthy(timeout)

    def stop_order(self, leader: str | None) -> list[int]:
        """The nodes in the order :meth:`down` stops them: the leader last. Stopped first,
        its Patroni would give the key up and a standby whose Patroni still runs would
        promote (a new timeline) just before being stopped itself."""
        names = self.spec.node_names()
        return [i for i, n in enumerate(names) if n != leader] + [
            i for i, n in enumerate(names) if n == leader
        ]

    def down(self) -> list[str]:
        """Stop every Patroni (each stops its PostgreSQL, fast), the leader last, and then
        etcd."""
        stopped = []
        for i in self.stop_order(self.leader()):
            if self.stop_process(f"node{i + 1}"):
                stopped.append(f"node{i + 1}")
        for i in range(MEMBERS):
            # a node whose Patroni was SIGKILLed may have left its postgres running
            cluster.kill_servers_under(Path(self.spec.datadirs[i]))
        for i in range(MEMBERS):
            if self.stop_process(f"etcd{i + 1}"):
                stopped.append(f"etcd{i + 1}")
        return stopped

    def purge(self) -> None:
        """Remove the data directories, the state and the secrets (after :meth:`down`)."""
        for d in self.spec.datadirs:
            shutil.rmtree(Path(d).parent, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        secrets_file(self.spec.name).unlink(missing_ok=True)

    def switchover(self, candidate: str | None = None, timeout: float = 60.0) -> tuple[str, str]:
        """A planned switchover (Patroni's ``POST /switchover``); (old, new leader)."""
        old = self.leader()
        if old is None:
            raise HaError("no running leader: a switchover needs one (./pgnvm ha failover)")
        body: dict[str, Any] = {"leader": old}
        if candidate:
            self.index(candidate)
            body["candidate"] = candidate
        return old, self._change("/switchover", body, old, timeout)

    def failover(self, candidate: str, timeout: float = 60.0) -> tuple[str | None, str]:
        """A manual failover to ``candidate`` (``POST /failover``), also without a leader."""
        self.index(candidate)
        old = self.leader()
        return old, self._change("/failover", {"candidate": candidate}, old, timeout)

    def _change(self, path: str, body: dict[str, Any], old: str | None, timeout: float) -> str:
        status, doc = 0, ""
        for i in range(MEMBERS):
            status, doc = self.rest(i, path, "POST", body, timeout=timeout)
            if status:
                break
        if status != 200:
            raise HaError(f"Patroni refused {path} (HTTP {status}): {doc}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            new = self.leader()
            if new and new != old:
                return new
            time.sleep(0.3)
        raise HaError(f"{path}: no new leader after {timeout:.0f}s (still {self.leader()})")

    def status_lines(self) -> list[str]:
        ok, lines = self.etcd_quorum()
        out = [
            f"HA cluster {self.spec.name}: configuration {self.spec.config}, "
            f"flavour {self.spec.flavour}; TTL {TIMING['ttl']}s, loop_wait {TIMING['loop_wait']}s",
            f"etcd: {'quorum' if ok else 'NO QUORUM'}",
            *(f"  {ln}" for ln in lines),
        ]
        members = {str(m.get("name")): m for m in self.members()}
        out.append("nodes:" if members else "nodes: no Patroni answers")
        for i, n in enumerate(self.spec.node_names()):
            m = members.get(n)
            alive = "running" if self.running(n) else "not running"
            desc = (
                f"{m.get('role')} {m.get('state')} timeline {m.get('timeline', '?')} "
                f"lag {m.get('lag', 0)}"
                if m
                else "not in the cluster"
            )
            out.append(
                f"  {n} postgres 127.0.0.1:{self.pg_port(i)} REST 127.0.0.1:"
                f"{self.spec.ports[i]['restapi']}: Patroni {alive}; {desc}; "
                f"data {self.spec.datadirs[i]}; log {self.patroni_log(i)}"
            )
        return out


def new_spec(
    name: str,
    config: str,
    flavour: str,
    port: int | None,
    settings: dict[str, str] | None = None,
    port_start: int = PORT_START,
) -> HaSpec:
    """A new cluster's spec: free ports (from ``port`` exactly, or the first free ones from
    ``port_start``), data directories on the nvm root."""
    spec = HaSpec(name=name, config=config, flavour=flavour, settings=dict(settings or {}))
    spec.server_settings()  # refuses configurations that cannot be HA nodes
    reserved = reserved_ports(except_name=name)
    spec.ports = allocate_ports(
        lambda p: free_port(p, reserved),
        port_start if port is None else port,
        fixed=port is not None,
    )
    spec.datadirs = [
        str(cluster.resolve_datadir(cluster.ClusterSpec(name=f"ha-{name}-{n}", storage="nvm")))
        for n in spec.node_names()
    ]
    return spec


def check_ports_free(spec: HaSpec) -> None:
    """Before a start: every port of the spec free, else HaError naming it."""
    for i, p in enumerate(spec.ports):
        for role, port in p.items():
            why = port_holder(port)
            if why:
                raise HaError(
                    f"port {port} (node{i + 1}'s {role}) is in use: {why}; "
                    f"./pgnvm ha down --name {spec.name} --purge and up again with "
                    "another --port"
                )
