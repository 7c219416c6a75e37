"""The benchmark configurations: ONE table (:data:`CONFIGS`).

A configuration is a storage target (``nvm``: the tmpfs that emulates persistent memory,
``disk``: PGNVM_HOME on the machine's disk), an engine (``nvm_storage_engine``) and extra
server settings on top of :func:`common_settings`. The database is loaded once per storage
target and scale factor; every configuration of that target starts the same data directory
with its own settings (the on-disk format does not depend on the engine).

To add a variant (e.g. se2 with another prefetch setting) add one line to :data:`CONFIGS`;
it is shown by ``--list-configs``, and it is skipped with "not available" when the built server
refuses its engine or one of its settings (probed with ``postgres -C``), or when it asks for
prefetch helpers on a mapping the machine's CPU topology cannot honour (M2/M3 need an SMT
sibling, :mod:`bench.tpch.topology`): the library would fall back to M1 and the results would
carry the wrong name. ``default=False`` keeps it out of the default set (it then runs only
when named in ``--configs``).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import osuser
from bench.tpch import topology

BASELINE = "nvm_base_worker"  # the papers' normalisation baseline (pmfs_base95)
CEILING = "mem_limit"  # everything in shared buffers
DISK = "disk_base"

#: shared_buffers value meaning "large enough for the whole database" (sized at run time).
SB_WHOLE_DB = "whole-db"


@dataclass(frozen=True)
class Config:
    name: str
    engine: str  # nvm_storage_engine: base | se1 | se2
    storage: str  # nvm | disk
    doc: str
    settings: dict[str, str] = field(default_factory=dict)  # on top of common_settings()
    shared_buffers: str | None = None  # None: --shared-buffers; SB_WHOLE_DB: sized to the DB
    prewarm: bool = False  # pg_prewarm every table and index after each restart
    default: bool = True  # part of the default --configs

    @property
    def drop_caches(self) -> bool:
        """Drop the OS page cache before each run (data on disk: a cold start)."""
        return self.storage == "disk"

    @property
    def prefetch(self) -> str:
        """nvm_prefetch of this configuration: off | inline | helper."""
        return self.settings.get("nvm_prefetch", "off")

    @property
    def helper_mapping(self) -> str | None:
        """nvm_prefetch_mapping when the backend has prefetch helper threads, else None."""
        if self.prefetch != "helper":
            return None
        return self.settings.get("nvm_prefetch_mapping", "m1")


CONFIGS: tuple[Config, ...] = (
    Config(
        "disk_base",
        "base",
        "disk",
        "stock PostgreSQL, data on disk, OS page cache "
        "dropped before each query (the papers' disk_base95)",
        {"io_method": "worker"},
    ),
    Config(
        "nvm_base_sync",
        "base",
        "nvm",
        "stock PostgreSQL on emulated NVM, io_method=sync (read() by the backend)",
        {"io_method": "sync"},
    ),
    Config(
        "nvm_base_worker",
        "base",
        "nvm",
        "stock PostgreSQL on emulated NVM, "
        "io_method=worker (PG 18 default; the normalisation baseline, pmfs_base95)",
        {"io_method": "worker"},
    ),
    Config(
        "nvm_base_io_uring",
        "base",
        "nvm",
        "stock PostgreSQL on emulated NVM, io_method=io_uring",
        {"io_method": "io_uring"},
    ),
    Config(
        "nvm_se1",
        "se1",
        "nvm",
        "SE1: segments mmap'd, a buffer miss is one memcpy from the mapping",
        {"io_method": "worker"},
    ),
    Config(
        "nvm_se2",
        "se2",
        "nvm",
        "SE2: zero-copy, buffers point into the mapping",
        {"io_method": "worker"},
    ),
    Config(
        "nvm_se2_inline",
        "se2",
        "nvm",
        "SE2 + inline prefetch: the backend issues a prefetch instruction for every cache "
        "line of the blocks it has just redirected (no helper thread)",
        {"io_method": "worker", "nvm_prefetch": "inline"},
    ),
    Config(
        "nvm_se2_m1",
        "se2",
        "nvm",
        "SE2 + prefetch helper thread on another physical core (mapping M1)",
        {"io_method": "worker", "nvm_prefetch": "helper", "nvm_prefetch_mapping": "m1"},
    ),
    Config(
        "nvm_se2_m2",
        "se2",
        "nvm",
        "SE2 + prefetch helper thread on the backend's SMT sibling (mapping M2; needs SMT)",
        {"io_method": "worker", "nvm_prefetch": "helper", "nvm_prefetch_mapping": "m2"},
    ),
    Config(
        "nvm_se2_m3",
        "se2",
        "nvm",
        "SE2 + two-stage helpers: another core faults pages in, the SMT sibling prefetches "
        "(mapping M3; needs SMT and a second core)",
        {"io_method": "worker", "nvm_prefetch": "helper", "nvm_prefetch_mapping": "m3"},
    ),
    Config(
        "mem_limit",
        "base",
        "nvm",
        "in-memory ceiling: shared_buffers holds the whole "
        "database, prewarmed with pg_prewarm after each restart",
        {"io_method": "worker"},
        shared_buffers=SB_WHOLE_DB,
        prewarm=True,
    ),
)

BY_NAME: dict[str, Config] = {c.name: c for c in CONFIGS}


def default_names() -> list[str]:
    return [c.name for c in CONFIGS if c.default]


def resolve(names: list[str] | None) -> list[Config]:
    """Configs by name, in table order; None = the defaults. Unknown names raise ValueError."""
    if not names:
        return [c for c in CONFIGS if c.default]
    bad = [n for n in names if n not in BY_NAME]
    if bad:
        raise ValueError(
            f"unknown configuration(s) {', '.join(bad)} "
            f"(known: {', '.join(BY_NAME)}; see --list-configs)"
        )
    wanted = set(names)
    return [c for c in CONFIGS if c.name in wanted]


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


def server_settings(cfg: Config, common: Common, whole_db_sb: str | None = None) -> dict[str, str]:
    """Every setting pgnvm writes for ``cfg`` (besides port/socket/engine)."""
    s = common_settings(common)
    if cfg.shared_buffers == SB_WHOLE_DB:
        if whole_db_sb is None:
            raise ValueError(f"{cfg.name}: shared_buffers for the whole database not known")
        s["shared_buffers"] = whole_db_sb
    elif cfg.shared_buffers:
        s["shared_buffers"] = cfg.shared_buffers
    s.update(cfg.settings)
    return s


def whole_db_shared_buffers(db_bytes: int) -> str:
    """shared_buffers that holds a database of ``db_bytes`` (+25% headroom, catalogs, the
    buffers of other backends), rounded up to 128 MB."""
    mb = (int(db_bytes * 1.25) >> 20) + 64
    mb = max(128, -(-mb // 128) * 128)
    return f"{mb}MB"


# --------------------------------------------------------------------------- availability

_probe_cache: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[bool, str]] = {}


def probe(bindir: Path, engine: str, settings: dict[str, str]) -> tuple[bool, str]:
    """Does the built server accept ``nvm_storage_engine=<engine>`` and ``settings``?

    ``postgres -C`` parses the configuration and exits: an unknown parameter or a value a
    check hook refuses fails there, without a cluster (an empty postgresql.conf in a
    temporary directory). Returns (ok, message).
    """
    key = (str(bindir), engine, tuple(sorted(settings.items())))
    if key in _probe_cache:
        return _probe_cache[key]
    args = [f"-c{k}={v}" for k, v in sorted(settings.items())]
    if engine != "base":
        args.append(f"-cnvm_storage_engine={engine}")
    tmp = Path(tempfile.mkdtemp(prefix="pgnvm-tpch-probe-"))
    try:
        (tmp / "postgresql.conf").write_text("")
        osuser.chown_to_server(tmp, recursive=True)
        r = osuser.run_pg(
            [str(bindir / "postgres"), "-D", str(tmp), "-C", "shared_buffers", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        res = (r.returncode == 0, "ok" if r.returncode == 0 else _error_message(r.stderr))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _probe_cache[key] = res
    return res


def _error_message(stderr: str) -> str:
    """'invalid value ... (detail)' from the server's FATAL/DETAIL lines, without prefixes."""
    parts = []
    for line in (stderr or "").splitlines():
        m = re.search(r"\b(FATAL|ERROR|DETAIL):\s+(.*)$", line)
        if m:
            parts.append(m.group(2).strip())
    if not parts:
        lines = (stderr or "").strip().splitlines()
        return lines[-1] if lines else "refused by the server"
    return parts[0] + (f" ({'; '.join(parts[1:])})" if len(parts) > 1 else "")


def topology_availability(
    configs: list[Config], topo: topology.Topology | None = None
) -> dict[str, str | None]:
    """name -> None if the CPU topology lets the config run as named, else why not (helper
    mappings only; every other configuration is None)."""
    topo = topo if topo is not None else topology.current()
    out: dict[str, str | None] = {}
    for c in configs:
        m = c.helper_mapping
        out[c.name] = topo.mapping_unavailable(m) if m else None
    return out


def availability(
    bindir: Path, configs: list[Config], common: Common, topo: topology.Topology | None = None
) -> dict[str, str | None]:
    """name -> None if the built server can run the config on this machine, else why not
    (the CPU topology first, then the server's own check)."""
    out = topology_availability(configs, topo)
    for c in configs:
        if out[c.name] is not None:
            continue
        settings = server_settings(c, common, whole_db_sb="128MB")
        ok, msg = probe(bindir, c.engine, settings)
        out[c.name] = None if ok else (msg or "refused by the server")
    return out
