"""Storage targets: ONE data directory per storage (nvm, disk) and scale factor.

Each target is a pgnvm cluster named ``<prefix>-sf<SF>-<storage>`` (``tpch-sf1-nvm``,
``tpch-sf1-disk``; see ``./pgnvm cluster list``), initialised once with engine ``base`` and
loaded once (:mod:`bench.tpch.schema`). A configuration does not get its own data
directory: the target's server handle (:class:`bench.core.server.Server`, ``Target.server``)
applies the configuration's engine and settings to the cluster's ``pgnvm.conf``, and the
next start uses them. That is sound because the on-disk format does not depend on the engine
(all engines read and write the same relation files through md.c's file layout).

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

import os
from pathlib import Path

import psycopg

from bench.core import cluster as clu
from bench.core import counters, procfs, rootkind, storage, ui
from bench.core.server import Server
from bench.tpch import schema
from bench.tpch.data import Manifest, fmt_sf
from bench.tpch.settings import DEFAULT_PORT, DEFAULT_PREFIX, STORAGE_OFFSET, load_shortfall

NOCSUM_SUFFIX = "-nocsum"  # clusters / result directories without data checksums


def checksums_text(on: bool) -> str:
    """The setting as ``SHOW data_checksums`` gives it: 'on' or 'off'."""
    return "on" if on else "off"


def checksums_suffix(on: bool) -> str:
    """Name suffix of clusters and result directories: '' (on) or '-nocsum' (off)."""
    return "" if on else NOCSUM_SUFFIX


def cluster_name(prefix: str, sf: float, storage: str, data_checksums: bool = True) -> str:
    return f"{prefix}-sf{fmt_sf(sf)}-{storage}{checksums_suffix(data_checksums)}"


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
        self._server: Server | None = None
        self.db_bytes: int = 0
        self.engine: str | None = None  # engine of the running / last configured server
        self.pgnvm_schema: str | None = None  # where extension pgnvm is (None: not there)
        self.pgnvm_extension = "not checked"  # what ensure() found / did
        self.has_prefetch_fn = False  # pgnvm_prefetch() exists
        self.checksums_shown: str | None = None  # SHOW data_checksums of the loaded server

    @property
    def server(self) -> Server:
        if self._server is None:
            raise RuntimeError(f"target {self.name} not set up")
        return self._server

    @property
    def cluster(self) -> clu.Cluster:
        return self.server.cluster

    def _hold(self, c: clu.Cluster) -> Server:
        c.spec.port = self.port  # the port asked for; the server moves on if it is taken
        self._server = Server(c, dbname=schema.DBNAME, application_name="pgnvm-tpch")
        return self._server

    # ---- set-up

    def ensure(self, data_dir: Path, sf: float, manifest: Manifest) -> str:
        """Create the cluster and load the database unless a valid load is there.
        Returns what happened ('reused' or 'loaded: <why>'). Leaves the server stopped."""
        c = self._init()
        srv = self._hold(c)
        srv.apply("base", dict(schema.LOAD_SETTINGS), {})
        srv.start(move_port=True)
        shown = self.show_checksums()
        if shown != checksums_text(self.data_checksums):
            ui.notice(
                f"{self.name} ({c.datadir}) has data_checksums = {shown}, but "
                f"--data-checksums {checksums_text(self.data_checksums)} was asked for: "
                "initialising it again (its data is lost) and reloading"
            )
            srv.stop()
            srv = self._hold(self._init(force=True))
            srv.apply("base", dict(schema.LOAD_SETTINGS), {})
            srv.start(move_port=True)
            shown = self.show_checksums()
            if shown != checksums_text(self.data_checksums):
                srv.stop()
                raise RuntimeError(
                    f"{self.name}: data_checksums = {shown} after initdb "
                    f"{clu.checksums_flag(srv.cluster.spec)}"
                )
        self.checksums_shown = shown
        try:
            expected = schema.expected_checksum(sf, manifest)
            with srv.connect("postgres") as conn:
                exists = schema.database_exists(conn)
            stored = None
            if exists:
                with srv.connect() as conn:
                    stored = schema.read_checksum(conn)
            why = schema.checksum_mismatch(stored, expected)
            if why is None:
                result = "reused"
            else:
                short = self.load_shortfall(sf)
                if short:
                    raise RuntimeError(f"{self.name} ({self.cluster.datadir}): {short}")
                ui.step(
                    f"loading TPC-H SF {fmt_sf(sf)} into {self.name} "
                    f"({self.cluster.datadir}): {why}"
                )
                try:
                    times = schema.load(srv.connect, data_dir, sf, manifest)
                except psycopg.OperationalError as e:
                    if srv.is_running():
                        raise
                    # the server went away under the load (killed from outside): once more
                    ui.notice(
                        f"{self.name}: the server stopped during the load ({e}); "
                        "restarting and loading again"
                    )
                    ui.show_tail(srv.cluster.logfile(), 10)
                    srv.start(move_port=True)
                    times = schema.load(srv.connect, data_dir, sf, manifest)
                ui.info(
                    f"   loaded {self.name} in {ui.fmt_seconds(times['total'])} ("
                    + ", ".join(f"{k} {v:.0f}s" for k, v in times.items() if k != "total")
                    + ")"
                )
                result = f"loaded: {why}"
            with srv.connect() as conn:
                try:
                    self.pgnvm_schema, self.pgnvm_extension = counters.ensure_extension(
                        conn, schema.META_SCHEMA
                    )
                except psycopg.Error as e:  # the numbers do not depend on it: go on without
                    self.pgnvm_schema, self.pgnvm_extension = None, f"failed: {e}".strip()
                    ui.notice(f"{self.name}: extension pgnvm not usable: {e}")
                self.has_prefetch_fn = self.pgnvm_schema is not None and (
                    "no pgnvm_prefetch" not in self.pgnvm_extension
                )
                row = conn.execute("select pg_database_size(current_database())").fetchone()
                self.db_bytes = int(row[0]) if row else 0
        finally:
            srv.stop()
        return result

    def load_shortfall(self, sf: float) -> str | None:
        """settings.load_shortfall for the cluster's data directory: its file system's
        free space plus what the directory holds now (a reload replaces it), on a tmpfs
        MemAvailable plus the same."""
        d = self.cluster.datadir
        held = storage.du_bytes(d)
        st = os.statvfs(d)
        m = rootkind.findmnt(d)
        avail = procfs.mem_available_bytes()
        return load_shortfall(
            sf,
            st.f_bavail * st.f_frsize + held,
            None if avail is None else avail + held,
            m is not None and m.fstype == "tmpfs",
        )

    def _init(self, force: bool = False) -> clu.Cluster:
        """The target's cluster as saved, or initdb (engine base, the load settings, the
        data checksums setting of the run); ``force``: initdb over an existing one (its data
        is lost)."""
        spec = clu.job_spec(
            self.name, self.storage, self.port, schema.LOAD_SETTINGS, self.data_checksums
        )
        return clu.job_cluster(spec, force=force)

    def show_checksums(self) -> str:
        """``SHOW data_checksums`` of the running server: 'on' or 'off'."""
        return self.server.show("data_checksums") or "?"

    # ---- per configuration

    def prewarm(self) -> tuple[float, int]:
        """pg_prewarm every table and index of the TPC-H schema (its backend gone before
        this returns): (seconds, blocks)."""
        return self.server.prewarm(
            "select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = 'public' and c.relkind in ('r', 'i')"
        )
