"""The benchmark's side of the configurations: which ones run by default, and the settings
every one of them shares. The configurations themselves (engine, storage, own settings,
requirements) are the catalogue, :mod:`bench.core.configs`.

The database is loaded once per storage target and scale factor; every configuration of that
target starts the same data directory with its own settings (the on-disk format does not
depend on the engine).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core import configs, selection

DEFAULT_PREFIX = "tpch"  # clusters tpch-sf<SF>-<storage>[-nocsum]
DEFAULT_PORT = 5520  # nvm: port, disk: port + 1 (the test harness uses 5471-5473)
STORAGE_OFFSET = {"nvm": 0, "disk": 1}

BASELINE = configs.REFERENCE  # the papers' normalisation baseline (pmfs_base95)
CEILING = configs.CEILING
DISK = configs.DISK

#: Configurations ``./pgnvm tpch`` runs only when named by ``--configs``: stock's other
#: I/O methods (io_method = sync, io_uring: how stock itself reads, not a question of the
#: papers; the baseline is io_method = worker, PostgreSQL 18's default).
#: Also the pools that cover the database without a prewarm (``*_wholedb``): for
#: ``--method prewarm`` and ``warm``, where they are what ``mem_limit`` is for ``cold``.
#: And se2's hybrid pool: as the tests size it (``nvm_se2_slots``: 16 MB of slots), and
#: with descriptors for the whole database and the job's shared_buffers as its DRAM slots
#: (``nvm_se2_hybrid``: issue 22's benchmark configuration, step 6 of its design).
BY_NAME_ONLY: tuple[str, ...] = (
    "nvm_base_sync",
    "nvm_base_io_uring",
    "nvm_base_wholedb",
    "nvm_se2_wholedb",
    "nvm_se2_slots",
    "nvm_se2_hybrid",
)

#: ``./pgnvm tpch`` without ``--configs``: the configurations that answer the papers'
#: questions (stock on the same memory, on disk and all in memory; se1; se2 without, with
#: inline and with helper prefetching M1/M2/M3), i.e. the catalogue but
#: :data:`BY_NAME_ONLY` and the write-path ones (``nvm_wal = pmem``: TPC-H reads, its WAL is
#: the load's). They must fit :data:`BUDGET_S` on a machine that runs all of them (SMT for
#: M2/M3): a new default must fit too (tests/test_tpch_unit.py).
DEFAULT_CONFIGS: tuple[str, ...] = tuple(
    c.name for c in configs.CONFIGS if not c.writes_wal_pmem and c.name not in BY_NAME_ONLY
)


#: What a run (restart, one query, bookkeeping) takes at SF 1 on the 2-vCPU VM of issue 21,
#: and data generation + the two loads on first use: ``./pgnvm tpch`` with its defaults (9
#: configurations there x 22 queries x 3 = 594 runs) took 19m55s. For the estimate printed
#: at the start; once runs have finished the ETA comes from their own durations.
RUN_OVERHEAD_S = 0.45
QUERY_S_PER_SF = 1.3
SETUP_S_PER_SF = 155.0
#: what ``./pgnvm tpch`` with no options may take here (issue 21): a longer estimate says so
BUDGET_S = 20 * 60


def estimate_seconds(runs: int, sf: float) -> float:
    """Seconds ``runs`` runs take at scale factor ``sf`` (without data generation and loads,
    :data:`SETUP_S_PER_SF` per unit of SF on first use)."""
    return runs * (RUN_OVERHEAD_S + QUERY_S_PER_SF * sf)


#: DRAM a configuration whose pool holds the whole database needs beside it: the backend's
#: work_mem (hashes, sorts), the other server processes, temporary files (on the nvm tmpfs:
#: DRAM as well)
DRAM_MARGIN = 1 << 30


def fills_dram_with_db(cfg: configs.Config) -> bool:
    """``cfg``'s shared_buffers are sized to the whole database and its engine copies pages
    into them (base, se1; se2 redirects them to the mapping): prewarmed (mem_limit) or read
    by the queries, they hold the database in DRAM, on top of the nvm tmpfs's copy."""
    return cfg.shared_buffers == configs.SB_WHOLE_DB and cfg.engine != "se2"


def dram_shortfall(cfg: configs.Config, db_bytes: int, available: int | None) -> str | None:
    """Why ``cfg`` cannot run on a machine with ``available`` bytes of DRAM available
    (MemAvailable, every server of the job stopped) for a database of ``db_bytes``, or None:
    a pool that holds the whole database (:func:`fills_dram_with_db`) needs it and
    :data:`DRAM_MARGIN` (without swap the kernel's OOM killer would end the server, or
    another process on the machine, in the middle of the run)."""
    if available is None or not fills_dram_with_db(cfg):
        return None
    need = db_bytes + DRAM_MARGIN
    if need <= available:
        return None
    gib = 1 << 30
    return (
        f"its shared_buffers would hold the whole database in DRAM: about {need / gib:.1f} "
        f"GiB (the {db_bytes / gib:.1f} GiB database + {DRAM_MARGIN / gib:.0f} GiB for the "
        f"backend, the server's processes and temporary files), only {available / gib:.1f} "
        "GiB available (MemAvailable, which does not count the nvm tmpfs's data nor other "
        "servers' shared memory); a smaller --sf, or free memory"
    )


#: Bytes of the loaded database (tables and indexes) per unit of SF: 1,671,083,711 at SF 1
#: (docs/results/tpch-default-20261125, env.json: db_bytes), for the check before a load.
DB_BYTES_PER_SF = 1.68e9
#: What a load needs beside the database at most: the index builds' memory
#: (maintenance_work_mem 1 GB, schema.LOAD_SETTINGS) and sort files, WAL (wal_level
#: minimal: little). Both grow with the data sorted, so a load needs the smaller of this and
#: the database's size, plus LOAD_FLOOR (the server's own files, the catalogs).
LOAD_MARGIN = 2 << 30
LOAD_FLOOR = 256 << 20


def load_bytes(sf: float) -> int:
    """Bytes a load at scale factor ``sf`` needs on its file system: the database, what
    sorting it takes (up to :data:`LOAD_MARGIN`) and :data:`LOAD_FLOOR` (SF 0.01: ~0.3 GiB,
    SF 1: ~3.6 GiB, SF 3: ~6.9 GiB)."""
    db = int(DB_BYTES_PER_SF * sf)
    return db + min(db, LOAD_MARGIN) + LOAD_FLOOR


def load_shortfall(sf: float, free: int, available: int | None, tmpfs: bool) -> str | None:
    """Why loading TPC-H at scale factor ``sf`` into a data directory whose file system has
    ``free`` bytes free (what the data directory holds counts as free: a reload replaces
    it) would fail, or None: :func:`load_bytes` must fit, on a ``tmpfs`` (the emulated
    PMem: its files are DRAM) in the DRAM ``available`` too (MemAvailable; no swap here:
    past it the OOM killer, not ENOSPC)."""
    need = load_bytes(sf)
    gib = 1 << 30
    what = f"loading TPC-H SF {sf:g} needs about {need / gib:.1f} GiB"
    if need > free:
        return f"{what}, its file system has {free / gib:.1f} GiB free"
    if tmpfs and available is not None and need > available:
        return (
            f"{what} on a tmpfs, i.e. of DRAM, only {available / gib:.1f} GiB available "
            "(MemAvailable: other homes' clusters on the tmpfs and running servers take theirs)"
        )
    return None


@dataclass(frozen=True)
class Common:
    """Settings every configuration shares (from the command line)."""

    shared_buffers: str = "128MB"
    work_mem: str = "64MB"
    parallel_workers: int = 0


def common_settings(common: Common) -> dict[str, str]:
    """Server settings of every configuration (a configuration's own settings win)."""
    return {
        "shared_buffers": common.shared_buffers,
        "work_mem": common.work_mem,
        "maintenance_work_mem": "512MB",
        "jit": "off",
        "max_parallel_workers_per_gather": str(common.parallel_workers),
        "max_parallel_workers": str(max(8, common.parallel_workers)),
        "max_worker_processes": str(max(8, common.parallel_workers) + 4),
        # read-only benchmark on a frozen, analysed database: no background work in between
        "autovacuum": "off",
        "max_wal_size": "4GB",
        "checkpoint_timeout": "1h",
        "track_io_timing": "off",
        "log_min_duration_statement": "-1",
    }


def server_settings(
    cfg: configs.Config, common: Common, whole_db_sb: str | None = None
) -> dict[str, str]:
    """Every setting pgnvm writes for ``cfg`` (besides port/socket/engine)."""
    return configs.server_settings(cfg, common_settings(common), whole_db_sb)


def job(common: Common | None = None) -> selection.Job:
    """``./pgnvm tpch`` for :mod:`bench.core.selection`: every configuration of the
    catalogue, :data:`DEFAULT_CONFIGS` by default."""
    return selection.Job("tpch", DEFAULT_CONFIGS, common_settings(common or Common()))
