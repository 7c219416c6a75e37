"""Storage targets of the OLTP job: ONE data directory per storage (nvm, disk) and data
size, loaded once and reused (like ``./pgnvm tpch``'s).

Cluster ``<prefix>-r<records>-<storage>`` (``oltp-r2000000-nvm``), database ``oltp``:

* ``usertable`` (YCSB: ``ycsb_key bigint`` primary key + ``field0`` .. ``field9`` text of 100
  characters each, ~1 KB rows; fillfactor :data:`~bench.oltp.settings.FILLFACTOR`), filled by
  one ``INSERT ... SELECT generate_series`` in the transaction that creates the table (with
  ``wal_level=minimal`` the server writes no WAL for it), then the primary key, ``VACUUM
  (FREEZE, ANALYZE)``, ``CHECKPOINT``. The values are deterministic (md5 of key and field).
* TPC-B, only when a run asks for it: ``pgbench -i -s <scale>`` (server-side generation) at
  the scale whose size matches ``usertable``'s (:func:`tpcb_scale`).

What was loaded is recorded in ``pgnvm_oltp_load`` (one row per part) as the load's last
step; a part is reused only when its row says the same. The workloads change the data
(updates): a reused database is the same size and key set, not the same bytes, which the
benchmark does not depend on (autovacuum keeps it in shape as in any OLTP database).
Every configuration starts the same data directory with its own settings (the on-disk
format does not depend on the engine).
"""

from __future__ import annotations

import subprocess
import time

import psycopg

from bench.core import cluster as clu
from bench.core import ui
from bench.core.server import Server
from bench.oltp import pretouch, settings, workloads

SCHEMA_VERSION = 1
DBNAME = "oltp"
META_TABLE = "pgnvm_oltp_load"
#: where extension pgnvm is created in the database (its counters, read around each window).
#: Not the server's role name (:data:`bench.core.osuser.SERVER_USER`): a schema named like
#: the role is first on the default search_path (``"$user"``), and the load's unqualified
#: tables would then be created in it, beside the extension, and not found by their stamp
#: (a run made so reloaded usertable)
EXT_SCHEMA = "pgnvm_ext"
#: settings of the load (no WAL for the table created and filled in one transaction)
LOAD_SETTINGS: dict[str, str] = {
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_wal_size": "8GB",
    "maintenance_work_mem": "1GB",
    "shared_buffers": "512MB",
    "autovacuum": "off",
}
#: bytes per TPC-B scale unit (100,000 pgbench_accounts rows and their index)
TPCB_BYTES_PER_SCALE = 15_600_000


def database_size(conn: psycopg.Connection) -> int:
    """Bytes of the connection's database (every relation of it: what a pool must cover)."""
    row = conn.execute("select pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def pretouch_pages(conn: psycopg.Connection, tables: tuple[tuple[str, str], ...]) -> int:
    """Heap pages of ``tables``, a pre-touch's table list (:data:`bench.oltp.pretouch.TABLES`):
    one full-page image each when it runs."""
    total = 0
    for table, _ in tables:
        row = conn.execute(pretouch.PAGES_SQL, (table,)).fetchone()
        total += int(row[0]) if row and row[0] is not None else 0
    return total


def cluster_name(prefix: str, records: int, storage: str) -> str:
    return f"{prefix}-r{records}-{storage}"


def usertable_stamp(records: int) -> str:
    return f"v{SCHEMA_VERSION} records={records} fillfactor={settings.FILLFACTOR}"


def tpcb_scale(data_bytes: int) -> int:
    """pgbench's scale whose database is about ``data_bytes`` big."""
    return max(1, round(data_bytes / TPCB_BYTES_PER_SCALE))


def usertable_ddl() -> str:
    fields = ", ".join(f"field{i} text not null" for i in range(workloads.FIELDS))
    return (
        f"create table {workloads.TABLE} (ycsb_key bigint not null, {fields}) "
        f"with (fillfactor = {settings.FILLFACTOR})"
    )


def usertable_fill(records: int) -> str:
    values = ", ".join(
        f"substr(repeat(md5(i::text || ':{f}'), 4), 1, {workloads.FIELD_LEN})"
        for f in range(workloads.FIELDS)
    )
    return (
        f"insert into {workloads.TABLE} select i, {values} "
        f"from generate_series(1, {records}) as g(i)"
    )


class Target:
    def __init__(self, storage: str, records: int, prefix: str, port_base: int) -> None:
        self.storage = storage
        self.records = records
        self.name = cluster_name(prefix, records, storage)
        self.port = port_base + settings.STORAGE_OFFSET[storage]
        self._server: Server | None = None
        self.data_bytes = 0  # usertable + its index
        #: the whole database (pg_database_size): what se2's hybrid pool must cover
        self.db_bytes = 0
        self.tpcb: int | None = None  # scale loaded
        #: heap pages of the tables the pre-touch modifies, at set-up (sizes max_wal_size),
        #: per :func:`bench.oltp.pretouch.wal_group`: ``ycsb`` (usertable) once loaded,
        #: ``tpcb`` once TPC-B's tables are
        self.pretouch_pages: dict[str, int] = {}

    @property
    def server(self) -> Server:
        if self._server is None:
            raise RuntimeError(f"target {self.name} not set up")
        return self._server

    def ensure(self) -> str:
        """Create the cluster and load usertable unless a valid load is there. Returns
        'reused' or 'loaded'. Leaves the server stopped."""
        c = clu.job_cluster(clu.job_spec(self.name, self.storage, self.port, LOAD_SETTINGS))
        srv = self._server = Server(c, dbname=DBNAME, application_name="pgnvm-oltp")
        srv.apply("base", dict(LOAD_SETTINGS), {})
        srv.start(move_port=True)
        try:
            with srv.connect("postgres") as conn:
                if not conn.execute(
                    "select 1 from pg_database where datname = %s", (DBNAME,)
                ).fetchone():
                    conn.execute(f"create database {DBNAME} template template0")
            with srv.connect() as conn:
                conn.execute(
                    f"create table if not exists {META_TABLE} (part text primary key, stamp text)"
                )
                stored = self._stamps(conn)
                result = "reused"
                if stored.get("usertable") != usertable_stamp(self.records):
                    self._load_usertable(conn)
                    result = "loaded"
                row = conn.execute(f"select pg_total_relation_size('{workloads.TABLE}')").fetchone()
                self.data_bytes = int(row[0]) if row else 0
                self.db_bytes = database_size(conn)
                self.pretouch_pages["ycsb"] = pretouch_pages(conn, pretouch.YCSB_TABLES)
        finally:
            srv.stop()
        return result

    @staticmethod
    def _stamps(conn: psycopg.Connection) -> dict[str, str]:
        return {str(p): str(s) for p, s in conn.execute(f"select part, stamp from {META_TABLE}")}

    def _load_usertable(self, conn: psycopg.Connection) -> None:
        ui.step(f"loading usertable ({self.records:,} rows) into {self.name}")
        t0 = time.monotonic()
        conn.execute(f"delete from {META_TABLE} where part = 'usertable'")
        with conn.transaction():
            conn.execute(f"drop table if exists {workloads.TABLE}")
            conn.execute(usertable_ddl())
            conn.execute(usertable_fill(self.records))
        conn.execute(f"alter table {workloads.TABLE} add primary key (ycsb_key)")
        conn.execute(f"vacuum (freeze, analyze) {workloads.TABLE}")
        conn.execute("checkpoint")
        conn.execute(
            f"insert into {META_TABLE} values ('usertable', %s) on conflict (part) do update "
            "set stamp = excluded.stamp",
            (usertable_stamp(self.records),),
        )
        ui.info(f"   loaded in {ui.fmt_seconds(time.monotonic() - t0)}")

    def ensure_tpcb(self, scale: int) -> str:
        """pgbench's TPC-B tables at ``scale`` in the database (loaded unless there), and
        the heap pages its pre-touch will modify (``pretouch_pages["tpcb"]``). Leaves the server
        stopped. Returns 'reused' or 'loaded'."""
        srv = self.server
        stamp = f"v{SCHEMA_VERSION} scale={scale}"
        srv.apply("base", dict(LOAD_SETTINGS), {})
        srv.start(move_port=True)
        try:
            with srv.connect() as conn:
                if self._stamps(conn).get("tpcb") == stamp:
                    self.tpcb = scale
                    self.db_bytes = database_size(conn)
                    self.pretouch_pages["tpcb"] = pretouch_pages(conn, pretouch.TPCB_TABLES)
                    return "reused"
                conn.execute(f"delete from {META_TABLE} where part = 'tpcb'")
            ui.step(f"loading TPC-B (pgbench -i -s {scale}) into {self.name}")
            t0 = time.monotonic()
            subprocess.run(
                [
                    str(srv.cluster.bin("pgbench")),
                    "-i",
                    "-q",
                    "-I",
                    "dtGvp",
                    "-s",
                    str(scale),
                    DBNAME,
                ],
                env=srv.cluster.env(),
                check=True,
                capture_output=True,
                text=True,
            )
            with srv.connect() as conn:
                conn.execute("checkpoint")
                conn.execute(
                    f"insert into {META_TABLE} values ('tpcb', %s) on conflict (part) do update "
                    "set stamp = excluded.stamp",
                    (stamp,),
                )
                self.db_bytes = database_size(conn)
                self.pretouch_pages["tpcb"] = pretouch_pages(conn, pretouch.TPCB_TABLES)
            ui.info(f"   loaded in {ui.fmt_seconds(time.monotonic() - t0)}")
            self.tpcb = scale
            return "loaded"
        finally:
            srv.stop()
