"""The one server handle: what every job does with a running PostgreSQL of a cluster.

A :class:`Server` holds a :class:`~bench.core.cluster.Cluster` (the data directory, its
spec and pgnvm.conf) and adds what the jobs share: start / stop / restart, a check that it
accepts connections, connections with the job's defaults, settings applied for good
(:meth:`Server.apply`, e.g. a configuration of the catalogue: engine + settings, switched in
place on one data directory) or for a while (:meth:`Server.temporary`), the postmaster's
pid, the server log from an offset, and pg_prewarm in a connection of its own. The jobs
(tpch's Target, the test harness's EngineEnv, micro scan) hold one and keep only their own
business (data, references, artifacts).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from typing import Any

import psycopg

from bench.core import procfs, ui
from bench.core.cluster import Cluster, port_in_use
from bench.core.configs import Config


class Server:
    def __init__(
        self,
        cluster: Cluster,
        *,
        dbname: str = "postgres",
        application_name: str | None = None,
        options: str | None = None,
        connect_timeout: int | None = None,
    ) -> None:
        self.cluster = cluster
        self.dbname = dbname  # connect()'s default database
        self.application_name = application_name
        self.options = options  # e.g. "-c statement_timeout=300000" for every session
        self.connect_timeout = connect_timeout

    @property
    def name(self) -> str:
        return self.cluster.spec.name

    @property
    def engine(self) -> str:
        return self.cluster.spec.engine

    @property
    def settings(self) -> dict[str, str]:
        return dict(self.cluster.spec.settings)

    # ---- settings

    def apply(
        self,
        engine: str | None = None,
        settings: dict[str, str] | None = None,
        environment: dict[str, str] | None = None,
    ) -> None:
        """Make ``engine``, ``settings`` (the whole set of extra settings) and
        ``environment`` (the server process's extra environment variables) the server's:
        written to pgnvm.conf and the cluster's spec now, in effect from the next start."""
        spec = self.cluster.spec
        if engine is not None:
            spec.engine = engine
        if settings is not None:
            spec.settings = dict(settings)
        if environment is not None:
            spec.environment = dict(environment)
        self.cluster.rewrite_conf()

    def apply_config(self, cfg: Config, settings: dict[str, str]) -> None:
        """A configuration of the catalogue: its engine, and ``settings`` (the job's common
        settings with the configuration's, :func:`bench.core.configs.server_settings`) and
        its server environment."""
        self.apply(cfg.engine, settings, cfg.environment)

    @contextlib.contextmanager
    def temporary(self, settings: dict[str, str]) -> Iterator[None]:
        """``settings`` on top of the usual ones for the block: written now (in effect at
        the next restart, or reload for reloadable ones); the usual ones written back and
        reloaded afterwards, also when the block fails."""
        usual = self.settings
        self.apply(settings={**usual, **settings})
        try:
            yield
        finally:
            self.apply(settings=usual)
            if self.is_running():
                self.reload()

    def reload(self) -> None:
        with contextlib.suppress(psycopg.Error), self.connect("postgres") as c:
            c.execute("SELECT pg_reload_conf()")

    # ---- lifecycle

    def is_running(self) -> bool:
        return self.cluster.is_running()

    def postmaster_pid(self) -> int | None:
        return self.cluster.pid()

    def start(self, move_port: bool = False) -> None:
        """Start the server. ``move_port``: when its port is taken by someone else, move to
        the next free one (every other port, as jobs keep port + 1 for a second cluster)
        rather than fail; never take a port someone else is using."""
        if move_port and not self.is_running() and port_in_use(self.cluster.spec.port):
            old = port = self.cluster.spec.port
            while port_in_use(port):
                port += 2
            ui.notice(f"port {old} is in use by another server; {self.name} uses {port}")
            self.cluster.spec.port = port
            self.cluster.rewrite_conf()
        self.cluster.start()

    def stop(self, mode: str = "fast") -> None:
        self.cluster.stop(mode)

    def restart(self, mode: str = "fast", move_port: bool = False) -> float:
        """Stop (``mode``) and start; returns the seconds it took."""
        t0 = time.monotonic()
        self.stop(mode)
        self.start(move_port)
        return time.monotonic() - t0

    def ensure_running(self, ready_timeout: float = 60.0) -> str:
        """Make sure the server accepts connections: start it if it is down; wait while it
        recovers from a crash (the postmaster restarts itself, and connections fail
        meanwhile with "the database system is in recovery mode"), restarting it if that
        takes longer than ``ready_timeout``. Returns a note of what happened, empty when the
        server was simply up."""
        if not self.is_running():
            self.start()
            return "note: the server was down after the previous check and was restarted. "
        deadline = time.monotonic() + ready_timeout
        waited = False
        while True:
            try:
                with self.connect("postgres", connect_timeout=10) as c:
                    c.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.restart("immediate")
                    return (
                        f"note: the server did not accept connections within "
                        f"{ready_timeout:.0f}s after the previous check and was restarted. "
                    )
                waited = True
                time.sleep(0.2)
        if waited:
            return (
                "note: the server was not accepting connections after the previous check "
                "(crash recovery?); waited until it was. "
            )
        return ""

    # ---- SQL

    def connect(
        self, dbname: str | None = None, autocommit: bool = True, **kw: Any
    ) -> psycopg.Connection[Any]:
        """A connection with the handle's defaults (``kw`` wins)."""
        if self.application_name is not None:
            kw.setdefault("application_name", self.application_name)
        if self.options is not None:
            kw.setdefault("options", self.options)
        if self.connect_timeout is not None:
            kw.setdefault("connect_timeout", self.connect_timeout)
        return psycopg.connect(
            self.cluster.conninfo(dbname or self.dbname), autocommit=autocommit, **kw
        )

    def show(self, setting: str, dbname: str = "postgres") -> str | None:
        """``SHOW setting`` (None if the server has no such setting)."""
        with self.connect(dbname) as c:
            try:
                row = c.execute(f"SHOW {setting}").fetchone()
            except psycopg.errors.UndefinedObject:
                return None
        return str(row[0]) if row else None

    def prewarm(self, relations_sql: str, dbname: str | None = None) -> tuple[float, int]:
        """``pg_prewarm`` of every relation ``relations_sql`` selects (one column of
        regclass / oid), in a connection that is closed, and its backend gone, before this
        returns: (seconds, blocks)."""
        t0 = time.monotonic()
        with self.connect(dbname) as conn:
            pid = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
            row = conn.execute(
                f"SELECT coalesce(sum(pg_prewarm(r::regclass)), 0) FROM ({relations_sql}) AS t(r)"
            ).fetchone()
        procfs.wait_gone(pid)
        return time.monotonic() - t0, int(row[0]) if row else 0

    # ---- server log

    def log_offset(self) -> int:
        try:
            return self.cluster.logfile().stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        try:
            with open(self.cluster.logfile(), "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        return ui.tail(self.cluster.logfile(), lines)


def stop_quietly(servers: Iterable[Server]) -> None:
    """Stop every server, saying (not raising) what failed: a job's cleanup, which must not
    hide the exception that got it there."""
    for s in servers:
        try:
            s.stop()
        except Exception as e:  # best effort during cleanup
            ui.error(f"could not stop {s.name}: {e}")
