"""Storage targets: ONE data directory per storage (nvm, disk) and scale factor.

Each target is a pgnvm cluster named ``<prefix>-sf<SF>-<storage>`` (``tpch-sf1-nvm``,
``tpch-sf1-disk``; see ``./pgnvm cluster list``), initialised once with engine ``base`` and
loaded once (:mod:`bench.tpch.schema`). A configuration does not get its own data
directory: :meth:`Target.configure` rewrites the cluster's ``pgnvm.conf`` with the
configuration's engine and settings, and the next start uses them. That is sound because the
on-disk format does not depend on the engine (all engines read and write the same
relation files through md.c's file layout).

A second ``./pgnvm tpch`` finds the clusters, checks the load checksum stored in the database
and reuses them; a failed check (other data, other schema version, an interrupted load)
reloads.

Data checksums (``--data-checksums on|off``) are fixed at initdb, so each setting has clusters
of its own: ``off`` adds the suffix ``-nocsum`` (``tpch-sf1-nvm-nocsum``). Switching the
option back and forth therefore reuses both sets and never reloads. A reused cluster's
``SHOW data_checksums`` must match the option; if it does not (a data directory initialised
some other way), the cluster is initialised again with the right setting and reloaded.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psycopg

from bench.core import cluster as clu
from bench.core import procfs, ui
from bench.tpch import schema
from bench.tpch.data import Manifest, fmt_sf

DEFAULT_PREFIX = "tpch"
DEFAULT_PORT = 5520  # nvm: port, disk: port + 1 (the test harness uses 5471-5473)
STORAGE_OFFSET = {"nvm": 0, "disk": 1}


NOCSUM_SUFFIX = "-nocsum"  # clusters / result directories without data checksums


def checksums_text(on: bool) -> str:
    """The setting as ``SHOW data_checksums`` gives it: 'on' or 'off'."""
    return "on" if on else "off"


def checksums_suffix(on: bool) -> str:
    """Name suffix of clusters and result directories: '' (on) or '-nocsum' (off)."""
    return "" if on else NOCSUM_SUFFIX


def cluster_name(prefix: str, sf: float, storage: str, data_checksums: bool = True) -> str:
    return f"{prefix}-sf{fmt_sf(sf)}-{storage}{checksums_suffix(data_checksums)}"


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """Wait until process ``pid`` has exited and been reaped (its /proc entry is gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not procfs.exists(pid):
            return True
        time.sleep(0.005)
    return False


class Target:
    def __init__(
        self,
        storage: str,
        sf: float,
        prefix: str = DEFAULT_PREFIX,
        port_base: int = DEFAULT_PORT,
        data_checksums: bool = True,
    ) -> None:
        self.storage = storage
        self.sf = sf
        self.data_checksums = data_checksums
        self.name = cluster_name(prefix, sf, storage, data_checksums)
        self.port = port_base + STORAGE_OFFSET[storage]
        self._cluster: clu.Cluster | None = None
        self.db_bytes: int = 0
        self.engine: str | None = None  # engine of the running / last configured server
        self.pgnvm_schema: str | None = None  # where extension pgnvm is (None: not there)
        self.pgnvm_extension = "not checked"  # what ensure() found / did
        self.has_prefetch_fn = False  # pgnvm_prefetch() exists
        self.checksums_shown: str | None = None  # SHOW data_checksums of the loaded server

    @property
    def cluster(self) -> clu.Cluster:
        if self._cluster is None:
            raise RuntimeError(f"target {self.name} not set up")
        return self._cluster

    # ---- set-up

    def ensure(self, data_dir: Path, sf: float, manifest: Manifest) -> str:
        """Create the cluster and load the database unless a valid load is there.
        Returns what happened ('reused' or 'loaded: <why>'). Leaves the server stopped."""
        c: clu.Cluster | None = None
        if clu.Cluster.exists(self.name):
            with contextlib.suppress(clu.ClusterError, ValueError, KeyError, TypeError):
                c = clu.Cluster.load(self.name)
        if c is None or not c.is_initialized():
            c = self._init()
        self._cluster = c
        self.configure("base", dict(schema.LOAD_SETTINGS))
        self.start()
        shown = self.show_checksums()
        if shown != checksums_text(self.data_checksums):
            ui.notice(
                f"{self.name} ({c.datadir}) has data_checksums = {shown}, but "
                f"--data-checksums {checksums_text(self.data_checksums)} was asked for: "
                "initialising it again (its data is lost) and reloading"
            )
            c.stop("fast")
            self._cluster = c = self._init(force=True)
            self.configure("base", dict(schema.LOAD_SETTINGS))
            self.start()
            shown = self.show_checksums()
            if shown != checksums_text(self.data_checksums):
                c.stop("fast")
                raise RuntimeError(
                    f"{self.name}: data_checksums = {shown} after initdb "
                    f"{clu.checksums_flag(c.spec)}"
                )
        self.checksums_shown = shown
        try:
            expected = schema.expected_checksum(sf, manifest)
            with self.connect("postgres") as conn:
                exists = schema.database_exists(conn)
            stored = None
            if exists:
                with self.connect(schema.DBNAME) as conn:
                    stored = schema.read_checksum(conn)
            why = schema.checksum_mismatch(stored, expected)
            if why is None:
                result = "reused"
            else:
                ui.step(
                    f"loading TPC-H SF {fmt_sf(sf)} into {self.name} "
                    f"({self.cluster.datadir}): {why}"
                )
                try:
                    times = schema.load(self.connect, data_dir, sf, manifest)
                except psycopg.OperationalError as e:
                    if self.cluster.is_running():
                        raise
                    # the server went away under the load (killed from outside): once more
                    ui.notice(
                        f"{self.name}: the server stopped during the load ({e}); "
                        "restarting and loading again"
                    )
                    ui.show_tail(self.cluster.logfile(), 10)
                    self.start()
                    times = schema.load(self.connect, data_dir, sf, manifest)
                ui.info(
                    f"   loaded {self.name} in {ui.fmt_seconds(times['total'])} ("
                    + ", ".join(f"{k} {v:.0f}s" for k, v in times.items() if k != "total")
                    + ")"
                )
                result = f"loaded: {why}"
            with self.connect(schema.DBNAME) as conn:
                try:
                    self.pgnvm_schema, self.pgnvm_extension = schema.ensure_pgnvm_extension(conn)
                except psycopg.Error as e:  # the numbers do not depend on it: go on without
                    self.pgnvm_schema, self.pgnvm_extension = None, f"failed: {e}".strip()
                    ui.notice(f"{self.name}: extension pgnvm not usable: {e}")
                self.has_prefetch_fn = self.pgnvm_schema is not None and (
                    "no pgnvm_prefetch" not in self.pgnvm_extension
                )
                row = conn.execute("select pg_database_size(current_database())").fetchone()
                self.db_bytes = int(row[0]) if row else 0
        finally:
            self.cluster.stop("fast")
        return result

    def _init(self, force: bool = False) -> clu.Cluster:
        """initdb the target's cluster (engine base, the load settings, the data checksums
        setting of the run); ``force``: over an existing one (its data is lost)."""
        spec = clu.ClusterSpec(
            name=self.name,
            engine="base",
            storage=self.storage,
            port=self.port,
            flavour="release",
            settings=dict(schema.LOAD_SETTINGS),
            data_checksums=self.data_checksums,
        )
        c = clu.Cluster(spec)
        c.init(force=force)
        return c

    def show_checksums(self) -> str:
        """``SHOW data_checksums`` of the running server: 'on' or 'off'."""
        with self.connect("postgres") as conn:
            row = conn.execute("show data_checksums").fetchone()
        return str(row[0]) if row else "?"

    # ---- per configuration

    def configure(self, engine: str, settings: dict[str, str]) -> None:
        """Write the cluster's pgnvm.conf for ``engine`` + ``settings`` (applied at the next
        start). The engine is changed in place on purpose (see the module docstring)."""
        c = self.cluster
        c.spec.engine = engine
        c.spec.settings = dict(settings)
        c.spec.port = self.port
        c.spec.validate()
        c._write_conf()  # private on purpose: the in-place engine switch init() refuses
        c.save()
        self.engine = engine

    def start(self) -> None:
        """Start the server on a free port: never take a port someone else is using
        (Cluster.start() refuses a port another cluster holds)."""
        if not self.cluster.is_running() and clu.port_in_use(self.port):
            old = self.port
            while clu.port_in_use(self.port):
                self.port += 2
            ui.notice(f"port {old} is in use by another server; {self.name} uses {self.port}")
            c = self.cluster
            c.spec.port = self.port
            c._write_conf()  # private on purpose, see configure()
            c.save()
        self.cluster.start()

    def restart(self) -> float:
        """Stop (fast) and start the server; returns the seconds it took."""
        t0 = time.monotonic()
        self.cluster.stop("fast")
        self.start()
        return time.monotonic() - t0

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.stop("fast")

    def postmaster_pid(self) -> int | None:
        return self.cluster.pid()

    def connect(self, dbname: str = schema.DBNAME) -> psycopg.Connection:
        return psycopg.connect(
            self.cluster.conninfo(dbname), autocommit=True, application_name="pgnvm-tpch"
        )

    def prewarm(self) -> tuple[float, int]:
        """pg_prewarm every table and index of the TPC-H schema in a connection that is
        closed (and its backend gone) before returning: (seconds, blocks)."""
        t0 = time.monotonic()
        with self.connect() as conn:
            pid = int(conn.execute("select pg_backend_pid()").fetchone()[0])  # type: ignore[index]
            row = conn.execute(
                "select coalesce(sum(pg_prewarm(c.oid::regclass)), 0) from pg_class c "
                "join pg_namespace n on n.oid = c.relnamespace "
                "where n.nspname = 'public' and c.relkind in ('r', 'i')"
            ).fetchone()
        wait_gone(pid)
        return time.monotonic() - t0, int(row[0]) if row else 0


def drop_os_caches() -> str:
    """``sync; echo 3 > /proc/sys/vm/drop_caches``: 'dropped' or why not."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        return f"not dropped: {e.strerror or e}"
    return "dropped"
