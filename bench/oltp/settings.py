"""The OLTP job's side of the configurations: its default set, its defaults (sized so that
``./pgnvm oltp`` finishes in under 30 minutes on the 2-core, 24 GiB VM, the one-off load
included: 20 points of ~75 s and ~1.5 min of loading) and the settings
every configuration shares. The configurations themselves are the catalogue,
:mod:`bench.core.configs`.

Durability is not a configuration's choice here: :data:`DURABLE` is written last for every
configuration, and a configuration of the catalogue that asks for anything else is refused
(:func:`not_durable`). After each start the server's own ``SHOW`` is recorded, and a run
whose server shows anything else is labelled "not durable" in the report.

se2's hybrid pool (``nvm_se2_hybrid``) runs here with the job's shared_buffers as its DRAM
slots (``--shared-buffers``, or ratio × data in the memory experiment, like every other
configuration) and ``nvm_buffer_descriptors`` sized by :func:`hybrid_descriptors` from the
database as it is at the run's set-up, with room for what the workloads add to it
(:data:`GROWTH_HEADROOM`). A configuration whose shared_buffers is its own cannot run in the
memory experiment (:func:`not_for_mode`): the experiment is the shared_buffers it sets.
"""

from __future__ import annotations

from bench.core import configs, selection

DEFAULT_PREFIX = "oltp"  # clusters oltp-r<records>-<storage>
DEFAULT_PORT = 5525  # nvm: port, disk: port + 1 (tpch 5520-5521, its test 5530-5531)
STORAGE_OFFSET = {"nvm": 0, "disk": 1}

DISK = configs.DISK
BASELINE = configs.REFERENCE
#: The configurations run by default: the disk baseline, stock I/O on NVM, both engines, and
#: WAL through libpmem2 next to its file-WAL twin for base and se2 (paper 004's logging
#: question on the commit path). Not by default: nvm_base_sync/io_uring (I/O methods of a
#: read path OLTP hardly uses), the read-only prefetch variants (they change nothing for
#: index lookups), nvm_se1_walpmem (se1 writes like base), and mem_limit (its
#: whole-database buffer pool is what the memory-ratio experiment varies).
_DEFAULTS = (
    "disk_base",
    "nvm_base_worker",
    "nvm_base_walpmem_cl",
    "nvm_se1",
    "nvm_se2",
)


def default_configs() -> tuple[str, ...]:
    """The default configurations: disk, the three engines, and base's WAL through libpmem2
    at cache-line granularity (as on real PMem) next to base's file WAL."""
    return tuple(n for n in _DEFAULTS if n in configs.BY_NAME)


DEFAULT_RECORDS = 2_000_000  # ~2.7 GB with fillfactor 80: > 20x 128 MB of shared_buffers
DEFAULT_CLIENTS = (1, 8)
DEFAULT_WORKLOADS = ("a",)
DEFAULT_DISTRIBUTION = "zipfian"
DEFAULT_DURATION = 60.0  # seconds measured per point
DEFAULT_WARMUP = 10.0  # seconds of the same workload before each measured run
DEFAULT_REPEAT = 1
DEFAULT_MEMORY_RATIOS = ("1/2", "1/128")
DEFAULT_SHARED_BUFFERS = "128MB"
#: usertable's fillfactor: room for one more ~1 KB row version per page, so an update can
#: be HOT (same page, no index entry) as YCSB's in-place updates are in the paper's engines
FILLFACTOR = 80
#: bytes per usertable row on disk with that fillfactor (6 rows of ~1 KB per 8 KB page) +
#: its primary key entry: for the size estimate before the load
ROW_BYTES = 8192 // 6 + 24

#: Always on, written after the configuration's own settings.
DURABLE: dict[str, str] = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}


#: Checkpoints of every configuration: far enough apart that a point's warm-up and measured
#: window (docs/oltp.md, "The measured window") hold none. PostgreSQL's max_wal_size of 1GB
#: starts one every ~540 MB of WAL (max_wal_size / (1 + checkpoint_completion_target)): 1-3
#: per 30 s TPC-B window at 8 clients in docs/results/oltp-wal-20261126, each starting the
#: full-page writes over. With 4GB, ~2.1 GB of WAL: ~3.5 min of TPC-B at 10k tps and 1 KB
#: per transaction; checkpoint_timeout likewise past a point's ~3 min. WAL on tmpfs may
#: grow to that between checkpoints. A window that holds a checkpoint anyway is flagged.
CHECKPOINTS: dict[str, str] = {"max_wal_size": "4GB", "checkpoint_timeout": "30min"}

#: max_wal_size of the pre-touched points, TPC-B's and YCSB-A/B/F's
#: (:func:`pretouch_max_wal_size`): this many times the pre-touch's full-page images (one
#: 8 kB FPI per heap page of the workload's tables, :mod:`bench.oltp.pretouch`), so the
#: checkpoint that WAL volume starts (at max_wal_size / (1 + checkpoint_completion_target),
#: ~0.53 × max_wal_size with PostgreSQL's 0.9) lies ~1.6× the pre-touch's WAL away: the
#: pre-touch, the warm-up and the window after it hold none. The default run (2M records)
#: has ~284k pages of TPC-B (pgbench scale ~173: ~2.3 GB of FPIs; it passed the 4GB trigger
#: of ~2.1 GB during its pre-touch: 7GB) and ~340k of usertable (~6 rows per page: ~2.6 GB,
#: 8-9GB; a YCSB-A window of 2.4M transactions at 8 clients writes ~0.55 GB more,
#: docs/results/hybrid-hitpath-20261127). GB here: 2^30 bytes.
PRETOUCH_WAL_FACTOR = 3
#: the smallest such max_wal_size: :data:`CHECKPOINTS`' (small databases keep every other
#: workload's setting)
PRETOUCH_WAL_MIN = CHECKPOINTS["max_wal_size"]
GB = 1 << 30


def pretouch_max_wal_size(pretouch_pages: int, block_size: int = 8192) -> str:
    """``max_wal_size`` of the points of a workload whose pre-touched tables hold
    ``pretouch_pages`` heap pages: :data:`PRETOUCH_WAL_FACTOR` × their full-page images
    (``pages × block_size``) rounded up to whole GB, never below :data:`PRETOUCH_WAL_MIN`."""
    need = -(-PRETOUCH_WAL_FACTOR * pretouch_pages * block_size // GB)  # ceiling
    return f"{max(need, configs.size_bytes(PRETOUCH_WAL_MIN) // GB)}GB"


#: the share of its WAL directory's room (free space + WAL already there) a max_wal_size cut
#: to fit may take (:func:`fit_pretouch_max_wal_size`): the data files grow on the same file
#: system (on nvm one tmpfs holds both) while a run writes WAL
WAL_ROOM_SHARE = 0.75
MB = 1 << 20


def fit_pretouch_max_wal_size(
    want: str, pretouch_pages: int, free_bytes: int, wal_bytes: int, block_size: int = 8192
) -> str | None:
    """The max_wal_size a pre-touched point runs with on a WAL directory with ``free_bytes``
    free on its file system and ``wal_bytes`` of WAL in it already: ``want``
    (:func:`pretouch_max_wal_size`) when that room holds it; else the room's
    :data:`WAL_ROOM_SHARE` in whole MB when that still holds :data:`PRETOUCH_WAL_FACTOR` ×
    the pre-touch's full-page images (what keeps the checkpoint out of the pre-touch and the
    warm-up; small databases on a small device: only the 4GB floor did not fit); else None
    (the run is refused: :func:`wal_space_shortfall` says why)."""
    if wal_space_shortfall(want, free_bytes, wal_bytes) is None:
        return want
    cut = int((free_bytes + wal_bytes) * WAL_ROOM_SHARE) // MB
    if cut * MB >= PRETOUCH_WAL_FACTOR * pretouch_pages * block_size:
        return f"{cut}MB"
    return None


def wal_space_shortfall(max_wal_size: str, free_bytes: int, wal_bytes: int) -> str | None:
    """Why a WAL directory with ``free_bytes`` free on its file system and ``wal_bytes`` of
    WAL in it already cannot hold ``max_wal_size`` of WAL (pg_wal grows to it between
    checkpoints; on the tmpfs that emulates persistent memory that is DRAM), or None."""
    need = configs.size_bytes(max_wal_size)
    room = free_bytes + wal_bytes
    if room >= need:
        return None
    return (
        f"max_wal_size {max_wal_size} does not fit: pg_wal may grow to it between checkpoints, "
        f"but its file system has {room / GB:.1f} GB for WAL ({free_bytes / GB:.1f} GB free + "
        f"{wal_bytes / GB:.1f} GB of WAL already there)"
    )


def common_settings(shared_buffers: str) -> dict[str, str]:
    """Server settings of every configuration (PostgreSQL 18's defaults for everything
    that makes OLTP durable: wal_level replica, autovacuum on; checkpoints apart,
    :data:`CHECKPOINTS`)."""
    return {
        "shared_buffers": shared_buffers,
        **CHECKPOINTS,
        "max_connections": "100",
        "jit": "off",
        "track_io_timing": "on",
        "log_checkpoints": "on",
        "log_min_duration_statement": "-1",
    }


def not_durable(cfg: configs.Config) -> str | None:
    """Why ``cfg`` cannot run in this job (it turns durability off), or None."""
    bad = [f"{k}={v}" for k, v in cfg.settings.items() if k in DURABLE and v != DURABLE[k]]
    return f"not durable ({', '.join(bad)}); this job measures durable commits" if bad else None


#: se2's hybrid pool in this job: ``nvm_buffer_descriptors`` covers the database as measured at
#: the run's set-up (``pg_database_size`` of the benchmark's database: usertable, TPC-B's
#: tables if ever loaded, the catalogs; a reused cluster's earlier growth included) times
#: this factor, for what the run's writes add to it: YCSB's updates leave dead row versions
#: and non-HOT new ones (the default run of 2026-11-23, 31M transactions on nvm, grew
#: usertable by 11.6%: 2,776 -> 3,098 MB), TPC-B appends ~76 B of pgbench_history per
#: transaction (~45 MB per 70 s point at 8k tps). 25% is twice the default run's growth;
#: the catalogue's whole-database rule adds its own 25% and 64 MB on top (catalogs, other
#: databases), as for ./pgnvm tpch. Whether the descriptors still covered the database at
#: the end of each point is measured and reported, not assumed.
GROWTH_HEADROOM = 1.25


def hybrid_descriptors(db_bytes: int, shared_buffers: str) -> str:
    """``nvm_buffer_descriptors`` of se2's hybrid pool for a database of ``db_bytes`` at the
    run's start: :func:`bench.core.configs.whole_db_shared_buffers` of ``db_bytes`` ×
    :data:`GROWTH_HEADROOM` (≈ 1.56 × the database + 64 MB, in steps of 128 MB), and never
    fewer than the slots (``shared_buffers``: the server refuses fewer descriptors than
    slots)."""
    rule = configs.whole_db_shared_buffers(int(db_bytes * GROWTH_HEADROOM))
    mb = max(configs.size_bytes(rule), configs.size_bytes(shared_buffers)) >> 20
    return f"{mb}MB"


def server_settings(
    cfg: configs.Config, shared_buffers: str, descriptors: str | None = None
) -> dict[str, str]:
    """Every setting pgnvm writes for ``cfg``: common (``shared_buffers``: the DRAM pages,
    in the hybrid pool its slots), the configuration's (``descriptors``: its
    ``nvm_buffer_descriptors`` when the job sizes them, :func:`hybrid_descriptors`),
    durability. ValueError for a configuration whose shared_buffers the job would have to
    size (not for this job, :data:`NOT_FOR_OLTP`) or whose descriptors are not given."""
    if cfg.shared_buffers == configs.SB_WHOLE_DB:
        raise ValueError(f"{cfg.name}: {NOT_FOR_OLTP[cfg.name]}")
    s = configs.server_settings(cfg, common_settings(shared_buffers), whole_db_sb=descriptors)
    s.update(DURABLE)
    return s


#: catalogue configurations this job cannot run, and why (besides :func:`not_durable`):
#: shared_buffers for the whole database (the hybrid pool, whose *descriptors* cover it and
#: whose shared_buffers are the job's, runs)
NOT_FOR_OLTP: dict[str, str] = {
    c.name: "its whole-database buffer pool is what the memory-ratio experiment "
    "varies (--memory-ratios 1/1 is the same point"
    + (" without the prewarm)" if c.prewarm else ")")
    for c in configs.CONFIGS
    if c.shared_buffers == configs.SB_WHOLE_DB
}


def not_for_mode(cfg: configs.Config, memory_experiment: bool) -> str | None:
    """Why ``cfg`` cannot run in a run with (``memory_experiment``) or without the memory
    experiment, or None. The experiment sets shared_buffers to ratio × data: a
    configuration with shared_buffers (or descriptors) of its own would run every ratio at
    the same pool."""
    if cfg.name in NOT_FOR_OLTP:
        return NOT_FOR_OLTP[cfg.name]
    if not memory_experiment:
        return None
    own = [
        f"{k} = {v}"
        for k, v in (
            ("shared_buffers", cfg.shared_buffers),
            (
                "nvm_buffer_descriptors",
                cfg.descriptors or cfg.settings.get("nvm_buffer_descriptors"),
            ),
        )
        if v and v != configs.SB_WHOLE_DB
    ]
    if own:
        return (
            f"a pool of its own ({' and '.join(own)}), while the memory experiment sets "
            "shared_buffers to ratio × data (run it with --memory-ratios none)"
        )
    return None


def job(
    shared_buffers: str = DEFAULT_SHARED_BUFFERS, memory_experiment: bool = True
) -> selection.Job:
    """``./pgnvm oltp`` for :mod:`bench.core.selection`: its defaults, and every
    configuration of the catalogue but those it cannot run (:data:`NOT_FOR_OLTP`; with
    ``memory_experiment``, also those :func:`not_for_mode` refuses) and the ones that are
    not durable."""
    excluded: dict[str, str] = {}
    for c in configs.CONFIGS:
        why = not_durable(c) or not_for_mode(c, memory_experiment)
        if why:
            excluded[c.name] = why
    return selection.Job("oltp", default_configs(), common_settings(shared_buffers), excluded)
