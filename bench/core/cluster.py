"""PostgreSQL clusters managed by pgnvm.

A cluster is described by a :class:`ClusterSpec` and saved in
``$PGNVM_HOME/clusters/<name>/spec.json``; that directory also holds the server log
(``postgres.log``) and the unix socket. The data directory is on the chosen storage
(:mod:`bench.core.storage`): ``<root>/<home tag>/<name>/data`` on ``nvm``, the tmpfs at
``/mnt/pgnvm/nvm`` or ``/mnt/pgnvm/nvm-huge`` that every PGNVM_HOME shares (hence
:func:`bench.core.paths.home_tag`), or ``$PGNVM_HOME/disk/<name>/data``; ``data_root``
(API only) overrides both: datadir = ``<data_root>/data``. Processes of a data directory are found
through :mod:`bench.core.procfs`.

Every server setting pgnvm manages is written to ``<datadir>/pgnvm.conf``, which
``postgresql.conf`` includes at its end (``ALTER SYSTEM`` still overrides it). The engine is
also given to initdb (``-c nvm_storage_engine=...``) so bootstrap runs with it; for engine
``base`` the setting is not written at all, so ``base`` works on a stock build too.

``init`` on an existing cluster: a change of port/settings/flavour is applied in place
(restart to take effect); a change of engine, storage, huge, data_root or data_checksums
(API only; initdb ``--data-checksums``, the default, or ``--no-data-checksums``) needs
``force=True`` (re-initdb: the data is lost).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from bench.core import auth, osuser, paths, procfs, storage, ui

ENGINES: tuple[str, ...] = ("base", "se1", "se2")
STORAGES = storage.STORAGES
SUPERUSER = auth.SUPERUSER
CONF_NAME = "pgnvm.conf"
INCLUDE_LINE = f"include '{CONF_NAME}'  # added by pgnvm: settings managed by bench/core/cluster.py"
#: How an include line of pgnvm.conf starts (clusters made before the move of this module
#: have the same line naming bench/cluster.py: it counts, nothing is appended twice).
INCLUDE_PREFIX = f"include '{CONF_NAME}'"
SPEC_FILE = "spec.json"
LOG_FILE = "postgres.log"
STATE_VERSION = 1
#: Settings pgnvm derives from the spec: setting them via `settings` is refused.
MANAGED_SETTINGS = {"port", "unix_socket_directories", "nvm_storage_engine"}
#: Spec fields whose change needs a fresh initdb.
REINIT_FIELDS = ("engine", "storage", "huge", "data_root", "data_checksums", "nvm_root")
START_TIMEOUT = 300  # seconds (pg_ctl -t); crash recovery on big data can be slow
_GUC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1


class ClusterError(RuntimeError):
    pass


def _env_nvm_root() -> str | None:
    """A new spec's ``nvm_root``: ``$PGNVM_NVM_ROOT`` (the field ``storage`` hides the
    module inside the class body)."""
    return storage.user_nvm_root_text()


@dataclass
class ClusterSpec:
    name: str = "default"
    engine: str = "base"  # base | se1 | se2 (nvm_storage_engine)
    storage: str = "nvm"  # nvm | disk
    port: int = 5440
    flavour: str = "release"  # which install to use
    huge: bool = False  # nvm on a tmpfs mounted with huge=always
    settings: dict[str, str] = field(default_factory=dict)  # extra GUCs
    data_root: str | None = None  # explicit parent directory of the data dir
    data_checksums: bool = True  # initdb --data-checksums (False: --no-data-checksums)
    #: environment of the server process on top of ours (e.g. PMEM2_FORCE_GRANULARITY)
    environment: dict[str, str] = field(default_factory=dict)
    #: user-given nvm root (storage nvm only; default ``$PGNVM_NVM_ROOT``, None: the tmpfs)
    nvm_root: str | None = field(default_factory=_env_nvm_root)

    def __post_init__(self) -> None:
        if self.storage != "nvm":
            self.nvm_root = None

    def validate(self) -> None:
        if self.storage != "nvm":
            self.nvm_root = None
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.name):
            raise ClusterError(f"bad cluster name {self.name!r} (letters, digits, _ . -)")
        if self.engine not in ENGINES:
            raise ClusterError(f"unknown engine {self.engine!r} (one of {', '.join(ENGINES)})")
        if self.storage not in STORAGES:
            raise ClusterError(f"unknown storage {self.storage!r} (one of {', '.join(STORAGES)})")
        if self.flavour not in paths.FLAVOURS:
            raise ClusterError(f"unknown flavour {self.flavour!r}")
        if not 1 <= int(self.port) <= 65535:
            raise ClusterError(f"bad port {self.port}")
        if self.huge and self.storage != "nvm":
            raise ClusterError("--huge only applies to storage nvm")
        for k in self.environment:
            if not _ENV_NAME.match(k):
                raise ClusterError(f"bad environment variable name {k!r}")
        for k in self.settings:
            if not _GUC_NAME.match(k):
                raise ClusterError(f"bad setting name {k!r}")
            if k in MANAGED_SETTINGS:
                raise ClusterError(
                    f"setting {k!r} is derived from the spec; use --port / --engine instead"
                )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ClusterSpec:
        known = {f.name for f in fields(cls)}
        doc = {"nvm_root": None, **doc}  # saved before user-given roots: the tmpfs
        spec = cls(**{k: v for k, v in doc.items() if k in known})
        spec.port = int(spec.port)
        spec.huge = bool(spec.huge)
        spec.data_checksums = bool(spec.data_checksums)
        spec.settings = {str(k): str(v) for k, v in (spec.settings or {}).items()}
        spec.environment = {str(k): str(v) for k, v in (spec.environment or {}).items()}
        return spec


def parse_setting(text: str) -> tuple[str, str]:
    """'name=value' -> (name, value); the value may be empty or contain '='."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _GUC_NAME.match(name):
        raise ClusterError(f"bad setting {text!r}: expected name=value")
    return name, value.strip()


def quote_value(value: str) -> str:
    """A postgresql.conf string literal."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


def needs_reinit(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """Spec fields that differ and cannot be changed without a new initdb."""
    return [f for f in REINIT_FIELDS if getattr(old, f) != getattr(new, f)]


def checksums_flag(spec: ClusterSpec) -> str:
    """initdb's data checksums option for ``spec`` (PostgreSQL 18's initdb enables them by
    default, so off must be asked for)."""
    return "--data-checksums" if spec.data_checksums else "--no-data-checksums"


def socket_dir_for(state_dir: Path) -> Path:
    """Unix socket directory: the cluster's state dir, unless that path is too long for a
    socket (108 bytes incl. '/.s.PGSQL.NNNNN'), then a short /tmp dir derived from it."""
    if len(str(state_dir)) + len("/.s.PGSQL.65535") <= _SUN_PATH_MAX:
        return state_dir
    h = hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]
    return Path("/tmp") / f"pgnvm-sock-{h}"


def render_conf(spec: ClusterSpec, socket_dir: Path) -> str:
    """Content of <datadir>/pgnvm.conf."""
    lines = [
        "# Managed by pgnvm (bench/core/cluster.py); rewritten by `pgnvm cluster init`. "
        "Do not edit.",
        f"# cluster {spec.name}: engine={spec.engine} storage={spec.storage}"
        f"{' huge' if spec.huge else ''} flavour={spec.flavour}",
        f"port = {int(spec.port)}",
        "listen_addresses = '127.0.0.1'",
        f"unix_socket_directories = {quote_value(str(socket_dir))}",
        "logging_collector = off",
    ]
    if spec.engine != "base":
        lines.append(f"nvm_storage_engine = {quote_value(spec.engine)}")
    if spec.settings:
        lines.append("# extra settings (-c name=value)")
        lines += [f"{k} = {quote_value(v)}" for k, v in spec.settings.items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- data directory


def _datadir_under(root: Path, spec: ClusterSpec) -> Path:
    if spec.storage == "disk":
        return root / spec.name / "data"  # the disk root is this home's own
    if spec.nvm_root:
        return storage.user_root_subdir(root) / spec.name / "data"
    return root / paths.home_tag() / spec.name / "data"


def _root_of(spec: ClusterSpec, mount: bool) -> Path:
    if spec.storage == "nvm" and spec.nvm_root:
        return storage.user_root(Path(spec.nvm_root), mount=mount)
    if spec.storage == "nvm":
        return (
            storage.ensure_tmpfs_root(spec.huge) if mount else storage.default_tmpfs_root(spec.huge)
        )
    return storage.root(spec.storage, spec.huge, mount=mount)


def default_datadir(spec: ClusterSpec) -> Path:
    """``<storage root>[/<home tag>]/<name>/data`` (see the module docstring), or
    ``<data_root>/data``."""
    if spec.data_root:
        return Path(spec.data_root) / "data"
    return _datadir_under(_root_of(spec, mount=False), spec)


def resolve_datadir(spec: ClusterSpec) -> Path:
    """Like :func:`default_datadir`, but mounts the nvm tmpfs / falls back as needed (a
    user-given root is checked, never mounted)."""
    if spec.data_root:
        return default_datadir(spec)
    try:
        return _datadir_under(_root_of(spec, mount=True), spec)
    except storage.StorageError as e:
        raise ClusterError(str(e)) from e


# --------------------------------------------------------------------------- processes


def holds_datadir(datadir: str, cwd: str | None, cmdline: list[str], comm: str) -> bool:
    """Whether a process (its cwd, argv and /proc comm) is a server process of ``datadir``
    (a resolved path). Only PostgreSQL processes qualify (comm or argv[0] says
    ``postgres``; a backend's argv[0] is its process title, ``postgres: ...``), never e.g.
    a shell that happens to sit in the directory. Every server process chdirs into its
    data directory, and a backend forked by a dying postmaster inherits that cwd; the
    postmaster's argv names the directory too (``postgres -D <datadir>``)."""
    if "postgres" not in comm and not (cmdline and "postgres" in cmdline[0]):
        return False
    if cwd is not None and (cwd == datadir or cwd.startswith(datadir + "/")):
        return True
    for i, a in enumerate(cmdline):
        if a == "-D" and i + 1 < len(cmdline) and cmdline[i + 1].rstrip("/") == datadir:
            return True
        if a.startswith("-D") and len(a) > 2 and a[2:].rstrip("/") == datadir:
            return True
    return False


def datadir_processes(datadir: Path) -> list[int]:
    """Live (non-zombie) server processes of ``datadir``, see :func:`holds_datadir`."""
    real = os.path.realpath(datadir)
    out = []
    for pid in procfs.pids():
        if pid == os.getpid():
            continue
        cwd = procfs.cwd(pid)  # None: gone, a zombie, or not ours to look at
        if holds_datadir(real, cwd, procfs.argv(pid), procfs.comm(pid)) and procfs.alive(pid):
            out.append(pid)
    return out


def kill_servers_under(directory: Path, timeout: float = 10.0) -> int:
    """SIGKILL every server process whose data directory lies under ``directory`` (found
    by cwd, :func:`datadir_processes`), e.g. the clusters a TAP suite started with pg_ctl:
    daemons outside our process group that an interrupted run would leave running. Waits
    up to ``timeout`` for them to go; returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in datadir_processes(directory) if procfs.state(p) != "Z"]
        if not pids or time.monotonic() > deadline:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.05)


def read_pidfile(datadir: Path) -> int | None:
    try:
        first = (datadir / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, ValueError, IndexError):
        return None


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


# registry of clusters started by this process: stopped on Ctrl-C / SIGTERM
_started: dict[str, Cluster] = {}


def stop_started(mode: str = "immediate") -> list[str]:
    """Stop every cluster this process started and has not stopped (signal cleanup)."""
    names = []
    for name, c in list(_started.items()):
        try:
            if c.is_running():
                ui.info(f"stopping cluster {name} (started by this command)")
                c.stop(mode)
                names.append(name)
        except Exception as e:  # best effort during cleanup
            ui.error(f"could not stop {name}: {e}")
        _started.pop(name, None)
    return names


# --------------------------------------------------------------------------- Cluster


class Cluster:
    def __init__(self, spec: ClusterSpec, datadir: Path | None = None) -> None:
        spec.validate()
        self.spec = spec
        self.datadir: Path = Path(datadir) if datadir else default_datadir(spec)
        self.bindir: Path = paths.install_dir(spec.flavour) / "bin"

    def __repr__(self) -> str:
        return f"Cluster({self.spec.name!r}, {self.datadir})"

    # ---- state

    @property
    def state_dir(self) -> Path:
        return paths.cluster_dir(self.spec.name)

    @property
    def socket_dir(self) -> Path:
        return socket_dir_for(self.state_dir)

    @staticmethod
    def state_file(name: str) -> Path:
        return paths.cluster_dir(name) / SPEC_FILE

    @classmethod
    def exists(cls, name: str) -> bool:
        return cls.state_file(name).is_file()

    @classmethod
    def load(cls, name: str) -> Cluster:
        path = cls.state_file(name)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(
                f"no cluster {name!r} ({path} missing); run ./pgnvm cluster init --name {name}"
            ) from None
        spec = ClusterSpec.from_json(doc["spec"])
        return cls(spec, Path(doc["datadir"]) if doc.get("datadir") else None)

    @classmethod
    def all(cls) -> list[Cluster]:
        out = []
        root = paths.clusters_dir()
        if root.is_dir():
            for d in sorted(root.iterdir()):
                if (d / SPEC_FILE).is_file():
                    try:
                        out.append(cls.load(d.name))
                    except (ClusterError, ValueError, KeyError, TypeError) as e:
                        ui.notice(f"ignoring broken cluster state {d}: {e}")
        return out

    def save(self) -> None:
        osuser.ensure_dir(self.state_dir)
        doc = {"version": STATE_VERSION, "spec": self.spec.to_json(), "datadir": str(self.datadir)}
        tmp = self.state_file(self.spec.name).with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file(self.spec.name))

    # ---- paths

    def bin(self, name: str) -> Path:
        return self.bindir / name

    def logfile(self) -> Path:
        return self.state_dir / LOG_FILE

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={self.spec.port} user={SUPERUSER} dbname={dbname}"

    def env(self) -> dict[str, str]:
        """Environment for client tools (psql, pgbench, pg_regress ...) to reach this cluster."""
        e = dict(os.environ)
        e.update(
            PGHOST=str(self.socket_dir),
            PGPORT=str(self.spec.port),
            PGUSER=SUPERUSER,
            PGDATABASE="postgres",
            PGDATA=str(self.datadir),
            PGPASSFILE=str(auth.pgpass_file()),
            PATH=f"{self.bindir}{os.pathsep}{e.get('PATH', '/usr/bin:/bin')}",
        )
        return e

    # ---- queries

    def is_initialized(self) -> bool:
        return (self.datadir / "PG_VERSION").is_file()

    def pid(self) -> int | None:
        """PID of the running postmaster, or None."""
        pid = read_pidfile(self.datadir)
        if pid is None or not procfs.alive(pid):
            return None
        cmd = procfs.argv(pid)
        if cmd and "postgres" not in Path(cmd[0]).name:
            return None  # pid reused by something else
        return pid

    def is_running(self) -> bool:
        return self.pid() is not None

    def status(self) -> dict[str, Any]:
        pid = self.pid()
        return {
            "name": self.spec.name,
            "engine": self.spec.engine,
            "storage": self.spec.storage,
            "huge": self.spec.huge,
            "nvm_root": self.spec.nvm_root,
            "port": self.spec.port,
            "flavour": self.spec.flavour,
            "settings": dict(self.spec.settings),
            "running": pid is not None,
            "pid": pid,
            "initialized": self.is_initialized(),
            "datadir": str(self.datadir),
            "socket_dir": str(self.socket_dir),
            "logfile": str(self.logfile()),
            "conninfo": self.conninfo(),
        }

    # ---- lifecycle

    def _check_built(self) -> None:
        if not self.bin("postgres").is_file():
            raise ClusterError(
                f"PostgreSQL flavour {self.spec.flavour!r} is not built ({self.bindir}); "
                f"run ./pgnvm build --flavour {self.spec.flavour}"
            )

    def _write_conf(self) -> None:
        conf = self.datadir / "postgresql.conf"
        text = conf.read_text()
        if not any(line.startswith(INCLUDE_PREFIX) for line in text.splitlines()):
            with open(conf, "a") as f:
                f.write(("" if text.endswith("\n") else "\n") + INCLUDE_LINE + "\n")
        target = self.datadir / CONF_NAME
        target.write_text(render_conf(self.spec, self.socket_dir))
        osuser.chown_to_server(target)
        os.chmod(target, 0o600)

    def rewrite_conf(self) -> None:
        """Write pgnvm.conf and the saved state for the spec as it is now, without initdb:
        a change of engine, settings or port takes effect at the next start (at a reload for
        reloadable settings). Switching the engine of an initialised data directory in place
        is sound: the on-disk format does not depend on it (``init`` refuses it to protect
        clusters of the command line, whose engine is part of what they are)."""
        self.spec.validate()
        self._write_conf()
        self.save()

    def _prepare_dirs(self) -> None:
        osuser.ensure_server_user()
        osuser.ensure_dir(paths.clusters_dir())
        osuser.ensure_dir(self.state_dir)
        osuser.chown_to_server(self.state_dir)
        osuser.ensure_dir(self.socket_dir)

    def init(self, force: bool = False) -> None:
        """initdb (if needed) and write settings; starts nothing."""
        self._check_built()
        self._prepare_dirs()
        saved: Cluster | None = None
        if self.exists(self.spec.name):
            with contextlib.suppress(ClusterError, ValueError, KeyError, TypeError):
                saved = Cluster.load(self.spec.name)
        if saved is not None and saved.is_initialized():
            changed = needs_reinit(saved.spec, self.spec)
            if not force and not changed:
                self.datadir = saved.datadir
                self._write_conf()
                self.save()
                msg = f"cluster {self.spec.name}: settings updated in {self.datadir}"
                if self.is_running():
                    msg += " (running: restart to apply)"
                ui.info(msg)
                return
            if not force:
                was = ", ".join(f"{f}={getattr(saved.spec, f)}" for f in changed)
                raise ClusterError(
                    f"cluster {self.spec.name} exists with a different {', '.join(changed)} "
                    f"({was}); pass --force to re-initdb (destroys its data) or destroy it first"
                )
            saved.stop("immediate")
            _remove_datadir(saved.datadir, remove_parent=not saved.spec.data_root)
        target = resolve_datadir(self.spec)
        self.datadir = target
        if self.is_running():
            self.stop("immediate")
        if self.datadir.exists():
            _remove_datadir(self.datadir, remove_parent=False)
        osuser.ensure_dir(self.datadir.parent)
        osuser.chown_to_server(self.datadir.parent)
        cmd = [
            str(self.bin("initdb")),
            "-D",
            str(self.datadir),
            "-U",
            SUPERUSER,
            checksums_flag(self.spec),
            *auth.INITDB_OPTIONS,
            f"--pwfile={auth.password_file()}",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ]
        if self.spec.engine != "base":
            cmd += ["-c", f"nvm_storage_engine={self.spec.engine}"]
        ui.step(
            f"initdb {self.spec.name} (engine={self.spec.engine}, storage={self.spec.storage}"
            f"{', huge' if self.spec.huge else ''}"
            f"{'' if self.spec.data_checksums else ', no data checksums'}) in {self.datadir}"
        )
        r = osuser.run_pg(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise ClusterError(f"initdb failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")
        auth.write_files(self.datadir)
        auth.mark_password_set(self.datadir)
        self._write_conf()
        self.save()

    def _pg_ctl(
        self, *args: str, check: bool = False, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        return osuser.run_pg(
            [str(self.bin("pg_ctl")), "-D", str(self.datadir), *args],
            capture_output=True,
            text=True,
            check=check,
            env=env,
        )

    def _clear_dead_pidfile(self) -> None:
        """Remove a postmaster.pid left by a crashed (e.g. kill9'd) server whose postmaster is
        still a zombie: postgres takes a zombie for a live postmaster and refuses to start.
        Zombies hold no shared memory, so removing the lock file is safe."""
        pidfile = self.datadir / "postmaster.pid"
        old = read_pidfile(self.datadir)
        if old is None or not procfs.is_zombie(old):
            return
        deadline = time.monotonic() + 3  # give the reaper (init) a moment first
        while time.monotonic() < deadline and procfs.is_zombie(old):
            time.sleep(0.05)
        if procfs.is_zombie(old):
            ui.notice(
                f"cluster {self.spec.name}: postmaster.pid names zombie pid {old} "
                "(crashed server not yet reaped); removing the stale lock file"
            )
            pidfile.unlink(missing_ok=True)

    def _clear_stale(self) -> None:
        """Before a start: stop a server still running on this data directory (or a running
        server of this very cluster found on its port), remove a zombie's lock file; refuse
        to start when the port belongs to anything else."""
        pid = self.pid()
        if pid is not None:
            ui.notice(
                f"cluster {self.spec.name}: a server is already running (pid {pid}); "
                "stopping it (immediate)"
            )
            self._stop_pid(pid, "immediate")
        self._clear_dead_pidfile()
        if not port_in_use(self.spec.port):
            return
        for other in Cluster.all():
            if other.spec.port != self.spec.port or not other.is_running():
                continue
            if other.spec.name != self.spec.name and other.datadir != self.datadir:
                raise ClusterError(
                    f"port {self.spec.port} is in use by the running cluster "
                    f"{other.spec.name} (pid {other.pid()}, {other.datadir}); stop it "
                    f"(./pgnvm cluster stop --name {other.spec.name}) or give "
                    f"{self.spec.name} another --port"
                )
            ui.notice(
                f"port {self.spec.port} is used by a stale server of cluster "
                f"{other.spec.name} (pid {other.pid()}); stopping it (immediate)"
            )
            other.stop("immediate")
        for _ in range(50):
            if not port_in_use(self.spec.port):
                return
            time.sleep(0.1)
        raise ClusterError(
            f"port {self.spec.port} is in use by a process that is not a running cluster "
            "of this PGNVM_HOME; pick another --port"
        )

    def start(self, wait: bool = True) -> None:
        """pg_ctl start (-w). A stale server of this cluster (same data directory, or same
        name on the same port) is stopped first; a port held by another cluster or process
        is an error naming it, never a reason to stop someone else's server."""
        self._check_built()
        if not self.is_initialized():
            raise ClusterError(
                f"cluster {self.spec.name} is not initialized ({self.datadir}); "
                f"run ./pgnvm cluster init --name {self.spec.name}"
            )
        self._prepare_dirs()
        self._clear_stale()
        auth.write_files(self.datadir)
        log = self.logfile()
        if not log.exists():
            log.touch()
            osuser.chown_to_server(log)
        offset = log.stat().st_size
        _started[self.spec.name] = self
        r = self._pg_ctl(
            "start",
            "-w" if wait else "-W",
            "-t",
            str(START_TIMEOUT),
            "-l",
            str(log),
            env={**os.environ, **self.spec.environment},
        )
        if r.returncode != 0:
            ui.show_tail(log, 40, offset)
            if not self.is_running():
                _started.pop(self.spec.name, None)
            raise ClusterError(
                f"pg_ctl start failed for cluster {self.spec.name} "
                f"(exit {r.returncode}): {r.stdout}{r.stderr}".rstrip()
            )
        if wait and not auth.password_is_set(self.datadir):
            why = auth.set_password(self.conninfo(), self.datadir)
            if why:
                ui.notice(
                    f"cluster {self.spec.name}: the superuser has no password yet ({why}): "
                    "TCP connections are refused until it has one"
                )

    def _stop_pid(self, pid: int, mode: str) -> None:
        r = self._pg_ctl("stop", "-m", mode, "-w", "-t", str(START_TIMEOUT))
        if r.returncode != 0 and procfs.alive(pid):
            if mode != "immediate":
                r = self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "60")
            if procfs.alive(pid):
                ui.notice(f"pg_ctl stop failed ({r.stderr.strip()}); killing pid {pid}")
                self.kill9()

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop -m <mode> (smart|fast|immediate); no-op when not running."""
        pid = self.pid()
        if pid is not None:
            self._stop_pid(pid, mode)
        _started.pop(self.spec.name, None)

    def kill9(self, timeout: float = 60.0) -> int:
        """Simulated crash: SIGKILL the postmaster and every process of this data directory;
        returns how many processes were killed.

        The postmaster is frozen (SIGSTOP, waited for) first so it forks nothing new while
        its children are collected. Then, until nothing is left: SIGKILL every live process
        that is a child of the postmaster, has its cwd in the data directory, or is a
        postmaster of it by argv (a backend forked just before the freeze may not show up as
        a child yet, and outlives its postmaster otherwise). Returns only when the
        postmaster's pid has left the process table (a killed postmaster stays a zombie
        until its reaper, which can take seconds, gets to it; while it is one, postgres
        refuses to start: "lock file already exists") and no process holds the data
        directory, so the next start() finds nothing of the old server. A zombie whose
        parent is this very process counts as gone: only we can reap it."""
        pid = self.pid()
        killed: set[int] = set()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)  # freeze: no new children while we look
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and procfs.state(pid) not in (None, "T", "Z"):
                time.sleep(0.005)
        deadline = time.monotonic() + timeout
        while True:
            targets = set(datadir_processes(self.datadir))
            if pid is not None and procfs.alive(pid):
                targets |= {pid, *(k for k in procfs.children(pid) if procfs.alive(k))}
            for p in targets:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
            killed |= targets
            pm_gone = pid is None or procfs.reaped_or_child_zombie(pid, os.getpid())
            if not targets and pm_gone:
                break
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"cluster {self.spec.name}: the killed server did not go away within "
                    f"{timeout:.0f}s (postmaster {pid} gone: {pm_gone}; still alive: "
                    f"{sorted(targets)})"
                )
            time.sleep(0.02)
        _started.pop(self.spec.name, None)
        return len(killed)

    def psql(
        self, *args: str, dbname: str = "postgres", check: bool = True, capture: bool = True
    ) -> subprocess.CompletedProcess:
        """Run psql against the cluster (as the server user). With ``capture`` (default) the
        output is returned as text in ``.stdout``/``.stderr``; ``check`` raises
        CalledProcessError on failure (ON_ERROR_STOP is set)."""
        cmd = [
            str(self.bin("psql")),
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.socket_dir),
            "-p",
            str(self.spec.port),
            "-U",
            SUPERUSER,
            "-d",
            dbname,
            *args,
        ]
        if capture:
            return osuser.run_pg(cmd, capture_output=True, text=True, check=check)
        return osuser.run_pg(cmd, check=check)

    def destroy(self) -> None:
        """Stop (immediate) and remove the data directory and the cluster state."""
        self.stop("immediate")
        _remove_datadir(self.datadir, remove_parent=not self.spec.data_root)
        if self.socket_dir != self.state_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
        shutil.rmtree(self.state_dir, ignore_errors=True)


def _remove_datadir(datadir: Path, remove_parent: bool = True) -> None:
    shutil.rmtree(datadir, ignore_errors=True)
    if remove_parent:
        # remove the per-cluster parent (<storage root>/<name>) if we left it empty
        with contextlib.suppress(OSError):
            datadir.parent.rmdir()


def stop_all(mode: str = "fast") -> list[str]:
    """Stop every cluster under PGNVM_HOME/clusters that is running; returns their names."""
    stopped = []
    for c in Cluster.all():
        if c.is_running():
            ui.info(f"stopping cluster {c.spec.name} (pid {c.pid()})")
            c.stop(mode)
            stopped.append(c.spec.name)
    return stopped


@contextlib.contextmanager
def managed(cluster: Cluster, mode: str = "fast") -> Iterator[Cluster]:
    """Start ``cluster`` (if not running) for the duration of the block; stop it afterwards,
    also on exceptions and Ctrl-C."""
    if not cluster.is_running():
        cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(mode)


def release(cluster: Cluster) -> None:
    """Forget that this process started ``cluster``: it is meant to outlive the command (e.g.
    ``pgnvm cluster start``), so Ctrl-C / SIGTERM cleanup must not stop it."""
    _started.pop(cluster.spec.name, None)


def job_spec(
    name: str, storage: str, port: int, settings: dict[str, str], data_checksums: bool = True
) -> ClusterSpec:
    """The spec of a benchmark job's data cluster: release flavour, engine base (the job
    switches the engine per configuration, :meth:`bench.core.server.Server.apply_config`)."""
    return ClusterSpec(
        name=name,
        engine="base",
        storage=storage,
        port=port,
        flavour="release",
        settings=dict(settings),
        data_checksums=data_checksums,
    )


def job_cluster(spec: ClusterSpec, force: bool = False) -> Cluster:
    """The cluster ``spec.name`` as saved when it is there and initialised (on ``spec.port``),
    else a new one from ``spec`` (initdb; ``force``: over an existing one, its data lost)."""
    c: Cluster | None = None
    if not force and Cluster.exists(spec.name):
        with contextlib.suppress(ClusterError, ValueError, KeyError, TypeError):
            c = Cluster.load(spec.name)
    if c is not None and c.spec.nvm_root != spec.nvm_root:
        ui.notice(
            f"cluster {spec.name} is on nvm root {c.spec.nvm_root or 'the tmpfs'} "
            f"({c.datadir}); this run asks for {spec.nvm_root or 'the tmpfs'}: "
            "initialising it there (the old data directory is removed)"
        )
        c, force = None, True
    if c is None or not c.is_initialized():
        c = Cluster(spec)
        c.init(force=force)
    c.spec.port = spec.port
    return c
