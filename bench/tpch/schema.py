"""TPC-H schema, load and the load checksum that guards reuse of a loaded database.

Schema: the eight tables of TPC-H clause 1.4 (keys ``integer``, money ``numeric(15,2)``,
fixed-length texts ``char(n)``, variable ones ``varchar(n)``), primary keys, foreign-key
constraints (they let the planner use foreign-key join selectivity) and indexes on foreign-key
columns only, as clause 1.5.4 permits (a foreign key whose columns lead the primary key or
another index needs no index of its own).

Load: per table ``CREATE TABLE`` + ``COPY ... FROM '<file>' (FORMAT csv, HEADER, FREEZE)`` in
one transaction (with ``wal_level=minimal`` the server skips WAL for it), two tables at a time;
then keys and indexes, foreign keys, ``VACUUM (FREEZE, ANALYZE)``, ``CHECKPOINT``. Last, in
its own schema ``pgnvm``, the table ``tpch_load`` records the load checksum: schema version,
scale factor, the data files' digest (:attr:`bench.tpch.data.Manifest.digest`) and the row
counts counted after the load. A database is reused only when all of them match; a load that
did not finish wrote no checksum, so it is redone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

from bench.core import ui
from bench.tpch.data import TABLES, Manifest, fmt_sf

#: Bump whenever the DDL or the load procedure changes: every loaded database is then reloaded.
SCHEMA_VERSION = 1
DBNAME = "tpch"
#: pgnvm's own schema in database tpch: the load's stamp table and extension pgnvm. Named
#: like the server's role, so first on the default search path (``"$user"``); harmless
#: here because every load creates its tables in a new database before this schema exists
#: and names its stamp table with the schema (the OLTP job, whose load may run in an
#: existing database, uses another: bench.oltp.targets.EXT_SCHEMA)
META_SCHEMA = "pgnvm"
META_TABLE = f"{META_SCHEMA}.tpch_load"

TABLE_DDL: dict[str, str] = {
    "region": """
        r_regionkey integer not null,
        r_name char(25) not null,
        r_comment varchar(152) not null""",
    "nation": """
        n_nationkey integer not null,
        n_name char(25) not null,
        n_regionkey integer not null,
        n_comment varchar(152) not null""",
    "supplier": """
        s_suppkey integer not null,
        s_name char(25) not null,
        s_address varchar(40) not null,
        s_nationkey integer not null,
        s_phone char(15) not null,
        s_acctbal numeric(15,2) not null,
        s_comment varchar(101) not null""",
    "customer": """
        c_custkey integer not null,
        c_name varchar(25) not null,
        c_address varchar(40) not null,
        c_nationkey integer not null,
        c_phone char(15) not null,
        c_acctbal numeric(15,2) not null,
        c_mktsegment char(10) not null,
        c_comment varchar(117) not null""",
    "part": """
        p_partkey integer not null,
        p_name varchar(55) not null,
        p_mfgr char(25) not null,
        p_brand char(10) not null,
        p_type varchar(25) not null,
        p_size integer not null,
        p_container char(10) not null,
        p_retailprice numeric(15,2) not null,
        p_comment varchar(23) not null""",
    "partsupp": """
        ps_partkey integer not null,
        ps_suppkey integer not null,
        ps_availqty integer not null,
        ps_supplycost numeric(15,2) not null,
        ps_comment varchar(199) not null""",
    "orders": """
        o_orderkey integer not null,
        o_custkey integer not null,
        o_orderstatus char(1) not null,
        o_totalprice numeric(15,2) not null,
        o_orderdate date not null,
        o_orderpriority char(15) not null,
        o_clerk char(15) not null,
        o_shippriority integer not null,
        o_comment varchar(79) not null""",
    "lineitem": """
        l_orderkey integer not null,
        l_partkey integer not null,
        l_suppkey integer not null,
        l_linenumber integer not null,
        l_quantity numeric(15,2) not null,
        l_extendedprice numeric(15,2) not null,
        l_discount numeric(15,2) not null,
        l_tax numeric(15,2) not null,
        l_returnflag char(1) not null,
        l_linestatus char(1) not null,
        l_shipdate date not null,
        l_commitdate date not null,
        l_receiptdate date not null,
        l_shipinstruct char(25) not null,
        l_shipmode char(10) not null,
        l_comment varchar(44) not null""",
}

PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "supplier": ("s_suppkey",),
    "customer": ("c_custkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}

#: (table, columns, referenced table, referenced columns)
FOREIGN_KEYS: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...]], ...] = (
    ("nation", ("n_regionkey",), "region", ("r_regionkey",)),
    ("supplier", ("s_nationkey",), "nation", ("n_nationkey",)),
    ("customer", ("c_nationkey",), "nation", ("n_nationkey",)),
    ("partsupp", ("ps_partkey",), "part", ("p_partkey",)),
    ("partsupp", ("ps_suppkey",), "supplier", ("s_suppkey",)),
    ("orders", ("o_custkey",), "customer", ("c_custkey",)),
    ("lineitem", ("l_orderkey",), "orders", ("o_orderkey",)),
    ("lineitem", ("l_partkey",), "part", ("p_partkey",)),
    ("lineitem", ("l_suppkey",), "supplier", ("s_suppkey",)),
    ("lineitem", ("l_partkey", "l_suppkey"), "partsupp", ("ps_partkey", "ps_suppkey")),
)

#: Indexes on foreign-key columns (clause 1.5.4). ps_partkey and l_orderkey lead their
#: table's primary key; lineitem (l_partkey, l_suppkey) serves both l_partkey -> part and
#: (l_partkey, l_suppkey) -> partsupp (Q17, Q20).
FK_INDEXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nation", ("n_regionkey",)),
    ("supplier", ("s_nationkey",)),
    ("customer", ("c_nationkey",)),
    ("partsupp", ("ps_suppkey",)),
    ("orders", ("o_custkey",)),
    ("lineitem", ("l_partkey", "l_suppkey")),
    ("lineitem", ("l_suppkey",)),
)

#: Server settings while loading (the benchmark configurations replace them).
LOAD_SETTINGS: dict[str, str] = {
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "1h",
    "maintenance_work_mem": "1GB",
    "max_parallel_maintenance_workers": "2",
    "shared_buffers": "512MB",
    "autovacuum": "off",
    "jit": "off",
}


def index_name(table: str, cols: tuple[str, ...]) -> str:
    return f"{table}_{'_'.join(c.split('_', 1)[1] for c in cols)}_idx"


def fk_name(table: str, cols: tuple[str, ...]) -> str:
    return f"{table}_{'_'.join(c.split('_', 1)[1] for c in cols)}_fkey"


def ddl_statements() -> dict[str, list[str]]:
    """The schema as SQL, grouped by phase (tables, keys, indexes, fks)."""
    return {
        "tables": [f"create table {t} ({TABLE_DDL[t]}\n)" for t in TABLES],
        "keys": [
            f"alter table {t} add primary key ({', '.join(c)})" for t, c in PRIMARY_KEYS.items()
        ],
        "indexes": [
            f"create index {index_name(t, c)} on {t} ({', '.join(c)})" for t, c in FK_INDEXES
        ],
        "fks": [
            f"alter table {t} add constraint {fk_name(t, c)} foreign key ({', '.join(c)}) "
            f"references {rt} ({', '.join(rc)})"
            for t, c, rt, rc in FOREIGN_KEYS
        ],
    }


def expected_checksum(sf: float, manifest: Manifest) -> dict[str, Any]:
    """The load checksum a database loaded from ``manifest``'s files must carry."""
    return {
        "schema_version": SCHEMA_VERSION,
        "sf": fmt_sf(sf),
        "data_digest": manifest.digest,
        "rows": manifest.rows(),
    }


def checksum_mismatch(stored: dict[str, Any] | None, expected: dict[str, Any]) -> str | None:
    """Why a stored load checksum does not allow reuse (None: it does)."""
    if stored is None:
        return "no load checksum (never loaded, or the load did not finish)"
    for k, v in expected.items():
        if stored.get(k) != v:
            return f"{k} differs (stored {stored.get(k)!r}, expected {v!r})"
    return None


Connect = Callable[[str], psycopg.Connection]


def read_checksum(conn: psycopg.Connection) -> dict[str, Any] | None:
    row = conn.execute("select to_regclass(%s) is not null", (META_TABLE,)).fetchone()
    if not row or not row[0]:
        return None
    r = conn.execute(f"select value from {META_TABLE} where key = 'checksum'").fetchone()
    if not r:
        return None
    doc = json.loads(r[0])
    return doc if isinstance(doc, dict) else None


def database_exists(conn: psycopg.Connection) -> bool:
    r = conn.execute("select 1 from pg_database where datname = %s", (DBNAME,)).fetchone()
    return r is not None


def load(
    connect: Connect, data_dir: Path, sf: float, manifest: Manifest, jobs: int = 2
) -> dict[str, float]:
    """(Re)create database ``tpch`` and load it; returns seconds per phase.

    ``connect(dbname)`` opens an autocommit connection to the (running) server.
    """
    times: dict[str, float] = {}
    t0 = time.monotonic()
    with connect("postgres") as c:
        c.execute(f"drop database if exists {DBNAME} with (force)")
        c.execute(f"create database {DBNAME} template template0")
    ddl = ddl_statements()
    tables = dict(zip(TABLES, ddl["tables"], strict=True))

    def copy_table(t: str) -> None:
        f = data_dir / manifest.files[t].file
        with connect(DBNAME) as c, c.transaction():
            c.execute(tables[t])
            c.execute(f"copy {t} from '{f}' with (format csv, header true, freeze true)")

    def run_sql(stmt: str) -> None:
        with connect(DBNAME) as c:
            c.execute(stmt)

    def phase(name: str, fn: Callable[[Any], None], items: list[Any], par: int) -> None:
        ui.info(f"   load: {name} ({len(items)})")
        t = time.monotonic()
        if par <= 1:
            for it in items:
                fn(it)
        else:
            with ThreadPoolExecutor(max_workers=par) as ex:
                for fut in [ex.submit(fn, it) for it in items]:
                    fut.result()
        times[name] = time.monotonic() - t

    # biggest first so the two workers finish together
    order = sorted(TABLES, key=lambda t: -manifest.files[t].bytes)
    phase("copy", copy_table, order, jobs)
    # primary keys of the big tables in parallel; then FK indexes
    phase("primary keys", run_sql, sorted(ddl["keys"], key=_big_first), jobs)
    phase("foreign-key indexes", run_sql, sorted(ddl["indexes"], key=_big_first), jobs)
    # FK validation takes a share lock on the referenced table: sequential is simplest
    phase("foreign keys", run_sql, ddl["fks"], 1)
    with connect(DBNAME) as c:
        t = time.monotonic()
        ui.info("   load: vacuum (freeze, analyze)")
        c.execute("vacuum (freeze, analyze)")
        times["vacuum"] = time.monotonic() - t
        counts = {
            tb: int(c.execute(f"select count(*) from {tb}").fetchone()[0])  # type: ignore[index]
            for tb in TABLES
        }
        want = manifest.rows()
        if counts != want:
            raise RuntimeError(f"row counts after load {counts} differ from the files' {want}")
        c.execute("create extension if not exists pg_prewarm")
        c.execute(f"create schema if not exists {META_SCHEMA}")
        c.execute(f"create table if not exists {META_TABLE} (key text primary key, value text)")
        doc = expected_checksum(sf, manifest)
        doc["loaded_rows"] = counts
        doc["load_seconds"] = {k: round(v, 2) for k, v in times.items()}
        c.execute(
            f"insert into {META_TABLE} values ('checksum', %s) on conflict (key) do "
            "update set value = excluded.value",
            (json.dumps(doc, sort_keys=True),),
        )
        c.execute("checkpoint")
    times["total"] = time.monotonic() - t0
    return times


def _big_first(stmt: str) -> int:
    for i, t in enumerate(("lineitem", "orders", "partsupp", "part", "customer")):
        if f" {t} " in stmt or f" {t}(" in stmt:
            return i
    return 99
