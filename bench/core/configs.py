"""The catalogue of named storage configurations: ONE table (:data:`CONFIGS`), one naming
scheme for every job (``./pgnvm tpch``, ``./pgnvm micro scan``, ``./pgnvm test``).

A configuration is a storage (``nvm``: the tmpfs that emulates persistent memory, ``disk``:
PGNVM_HOME on the machine's disk), an engine (``nvm_storage_engine``: base, se1, se2) and its
own server settings, which a job puts on top of its common settings
(:func:`server_settings`); optionally a shared_buffers of its own (:data:`SB_WHOLE_DB`:
large enough for the whole database, sized by the job) and a prewarm after each start.

Requirements: a configuration runs only where

* the built server accepts its engine and settings (:func:`probe`: one ``postgres -C`` per
  engine + settings, cached), and
* the prefetching library can place its helper threads as named (``nvm_prefetch = helper``
  with mapping m1/m2/m3; asked of the library's ``nvmpf-topology`` tool,
  :mod:`bench.core.topology`: M2/M3 need an SMT sibling, and without it the library would
  silently run M1 under the name M2).

:func:`availability` gives a :class:`Verdict` per configuration: available, not available
(with the reason; the job does not run it) or unknown (e.g. ``nvmpf-topology`` not installed:
the job runs it and says so). Each job keeps its own default list of names; which of them
(or of ``--configs``) a run runs is :mod:`bench.core.selection`, the same for every job, and
``--list-configs`` prints the table (:func:`listing`).

Adding a variant (e.g. M1 with a longer prefetch distance) is one entry of :data:`CONFIGS`.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import osuser, topology

ENGINES: tuple[str, ...] = ("base", "se1", "se2")
#: stock PostgreSQL 18 as it ships (io_method=worker): the papers' normalisation baseline
#: (pmfs_base95), and the reference whose answers the test harness compares the others with
REFERENCE = "nvm_base_worker"
CEILING = "mem_limit"  # everything in shared buffers
DISK = "disk_base"

#: shared_buffers value meaning "large enough for the whole database" (sized by the job).
SB_WHOLE_DB = "whole-db"


@dataclass(frozen=True)
class Config:
    name: str
    engine: str  # nvm_storage_engine: base | se1 | se2
    storage: str  # nvm | disk
    doc: str
    settings: dict[str, str] = field(default_factory=dict)  # on top of the job's own
    shared_buffers: str | None = None  # None: the job's; SB_WHOLE_DB: sized to the database
    #: se2's hybrid pool: nvm_buffer_descriptors sized to the database (SB_WHOLE_DB), with
    #: shared_buffers (the DRAM slots for copied pages) the job's
    descriptors: str | None = None
    prewarm: bool = False  # pg_prewarm every table and index after each start
    #: environment of the server process (e.g. libpmem2's PMEM2_FORCE_GRANULARITY)
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def sized_to_db(self) -> bool:
        """Its pool is sized by the job to hold the whole database (shared_buffers, or the
        hybrid pool's descriptors): a benchmark configuration, not one for the checks."""
        return SB_WHOLE_DB in (self.shared_buffers, self.descriptors)

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

    @property
    def writes_wal_pmem(self) -> bool:
        """WAL is written through libpmem2 mappings (``nvm_wal = pmem``)."""
        return self.settings.get("nvm_wal", "file") == "pmem"

    @property
    def persists_data_pmem(self) -> bool:
        """Blocks written back through the mappings are persisted at once with libpmem2
        (``nvm_data_persist = pmem``, se1/se2): checkpoints fsync nothing for them."""
        return self.settings.get("nvm_data_persist", "fsync") == "pmem"

    @property
    def hybrid_pool(self) -> bool:
        """se2's hybrid pool: buffer descriptors apart from the DRAM slots
        (``nvm_buffer_descriptors``; shared_buffers is then the slots)."""
        return self.settings.get("nvm_buffer_descriptors", "0") not in ("0", "")

    @property
    def is_reference(self) -> bool:
        """Stock base without extra settings: the answers the others must give."""
        return self.name == REFERENCE


_WORKER = {"io_method": "worker"}

CONFIGS: tuple[Config, ...] = (
    Config(
        "disk_base",
        "base",
        "disk",
        "stock PostgreSQL, data on disk, OS page cache "
        "dropped before each query (the papers' disk_base95)",
        dict(_WORKER),
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
        dict(_WORKER),
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
        dict(_WORKER),
    ),
    Config(
        "nvm_se2",
        "se2",
        "nvm",
        "SE2: zero-copy, buffers point into the mapping",
        dict(_WORKER),
    ),
    Config(
        "nvm_se2_slots",
        "se2",
        "nvm",
        "SE2 with the hybrid pool: 16 MB of DRAM slots for copied pages (shared_buffers) and "
        "16x as many buffer descriptors (nvm_buffer_descriptors = 256MB), so that redirected "
        "buffers take no DRAM and copies are demoted or evicted under DRAM pressure (the "
        "test configuration of issue 22's design)",
        {**_WORKER, "nvm_buffer_descriptors": "256MB"},
        shared_buffers="16MB",
    ),
    Config(
        "nvm_se2_inline",
        "se2",
        "nvm",
        "SE2 + inline prefetch: the backend issues a prefetch instruction for every cache "
        "line of the blocks it has just redirected (no helper thread)",
        {**_WORKER, "nvm_prefetch": "inline"},
    ),
    Config(
        "nvm_se2_m1",
        "se2",
        "nvm",
        "SE2 + prefetch helper thread on another physical core (mapping M1)",
        {**_WORKER, "nvm_prefetch": "helper", "nvm_prefetch_mapping": "m1"},
    ),
    Config(
        "nvm_se2_m2",
        "se2",
        "nvm",
        "SE2 + prefetch helper thread on the backend's SMT sibling (mapping M2; needs SMT)",
        {**_WORKER, "nvm_prefetch": "helper", "nvm_prefetch_mapping": "m2"},
    ),
    Config(
        "nvm_se2_m3",
        "se2",
        "nvm",
        "SE2 + two-stage helpers: another core faults pages in, the SMT sibling prefetches "
        "(mapping M3; needs SMT and a second core)",
        {**_WORKER, "nvm_prefetch": "helper", "nvm_prefetch_mapping": "m3"},
    ),
    Config(
        "nvm_base_walpmem",
        "base",
        "nvm",
        "stock PostgreSQL on emulated NVM, WAL written through libpmem2 mappings (nvm_wal = pmem)",
        {**_WORKER, "nvm_wal": "pmem"},
    ),
    Config(
        "nvm_se1_walpmem",
        "se1",
        "nvm",
        "SE1, WAL written through libpmem2 mappings (nvm_wal = pmem)",
        {**_WORKER, "nvm_wal": "pmem"},
    ),
    Config(
        "nvm_se2_walpmem",
        "se2",
        "nvm",
        "SE2, WAL written through libpmem2 mappings (nvm_wal = pmem)",
        {**_WORKER, "nvm_wal": "pmem"},
    ),
    Config(
        "nvm_base_walpmem_cl",
        "base",
        "nvm",
        "nvm_base_walpmem with libpmem2 forced to cache-line granularity "
        "(PMEM2_FORCE_GRANULARITY=CACHE_LINE): WAL persisted by cache-line flushes + fence, "
        "as on real PMem (DAX); on tmpfs the default is page granularity (msync)",
        {**_WORKER, "nvm_wal": "pmem"},
        environment={"PMEM2_FORCE_GRANULARITY": "CACHE_LINE"},
    ),
    Config(
        "nvm_se2_walpmem_cl",
        "se2",
        "nvm",
        "nvm_se2_walpmem with libpmem2 forced to cache-line granularity "
        "(PMEM2_FORCE_GRANULARITY=CACHE_LINE)",
        {**_WORKER, "nvm_wal": "pmem"},
        environment={"PMEM2_FORCE_GRANULARITY": "CACHE_LINE"},
    ),
    Config(
        "nvm_se1_pmem",
        "se1",
        "nvm",
        "SE1 with the PMem write path: WAL through libpmem2 mappings (nvm_wal = pmem) and "
        "every block written back persisted at once through the mapping "
        "(nvm_data_persist = pmem: checkpoints fsync nothing for it)",
        {**_WORKER, "nvm_wal": "pmem", "nvm_data_persist": "pmem"},
    ),
    Config(
        "nvm_se2_pmem",
        "se2",
        "nvm",
        "SE2 with the PMem write path: nvm_wal = pmem and nvm_data_persist = pmem",
        {**_WORKER, "nvm_wal": "pmem", "nvm_data_persist": "pmem"},
    ),
    Config(
        "nvm_se2_pmem_cl",
        "se2",
        "nvm",
        "nvm_se2_pmem with libpmem2 forced to cache-line granularity "
        "(PMEM2_FORCE_GRANULARITY=CACHE_LINE): WAL and data blocks persisted by cache-line "
        "flushes + fence, as on real PMem (DAX); on tmpfs the default is msync()",
        {**_WORKER, "nvm_wal": "pmem", "nvm_data_persist": "pmem"},
        environment={"PMEM2_FORCE_GRANULARITY": "CACHE_LINE"},
    ),
    Config(
        "nvm_base_wholedb",
        "base",
        "nvm",
        "stock PostgreSQL on emulated NVM with shared_buffers for the whole database, not "
        "prewarmed (./pgnvm tpch --method prewarm: mem_limit's method)",
        dict(_WORKER),
        shared_buffers=SB_WHOLE_DB,
    ),
    Config(
        "nvm_se2_wholedb",
        "se2",
        "nvm",
        "SE2 with shared_buffers for the whole database, not prewarmed: a pool that covers "
        "the database (./pgnvm tpch --method prewarm or warm)",
        dict(_WORKER),
        shared_buffers=SB_WHOLE_DB,
    ),
    Config(
        "nvm_se2_hybrid",
        "se2",
        "nvm",
        "SE2 as a hybrid buffer pool: buffer descriptors for the whole database "
        "(nvm_buffer_descriptors, sized by the job), the job's shared_buffers as the DRAM "
        "slots for copied pages only: redirected pages stay resident without DRAM "
        "(./pgnvm tpch --method prewarm or warm; issue 22)",
        dict(_WORKER),
        descriptors=SB_WHOLE_DB,
    ),
    Config(
        "mem_limit",
        "base",
        "nvm",
        "in-memory ceiling: shared_buffers holds the whole "
        "database, prewarmed with pg_prewarm after each restart",
        dict(_WORKER),
        shared_buffers=SB_WHOLE_DB,
        prewarm=True,
    ),
)

BY_NAME: dict[str, Config] = {c.name: c for c in CONFIGS}
NAMES: tuple[str, ...] = tuple(BY_NAME)


def server_settings(
    cfg: Config, common: dict[str, str], whole_db_sb: str | None = None
) -> dict[str, str]:
    """The job's ``common`` settings, the configuration's shared_buffers (``whole_db_sb``
    for :data:`SB_WHOLE_DB`), then its own settings (they win)."""
    s = dict(common)
    if cfg.sized_to_db and whole_db_sb is None:
        raise ValueError(f"{cfg.name}: the pool for the whole database is not known")
    if cfg.shared_buffers == SB_WHOLE_DB:
        s["shared_buffers"] = str(whole_db_sb)
    elif cfg.shared_buffers:
        s["shared_buffers"] = cfg.shared_buffers
    if cfg.descriptors == SB_WHOLE_DB:
        s["nvm_buffer_descriptors"] = str(whole_db_sb)
    elif cfg.descriptors:
        s["nvm_buffer_descriptors"] = cfg.descriptors
    s.update(cfg.settings)
    return s


def pool_pages_bytes(settings: dict[str, str]) -> int:
    """How many bytes of pages a server with these settings keeps in its pool: the hybrid
    pool's descriptors (se2's nvm_buffer_descriptors) if set, else shared_buffers."""
    return size_bytes(settings.get("nvm_buffer_descriptors") or settings["shared_buffers"])


_SIZE = re.compile(r"^\s*(\d+)\s*(kB|MB|GB|TB)?\s*$", re.IGNORECASE)
_UNIT = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}


def size_bytes(text: str) -> int:
    """A PostgreSQL size setting ('128MB', '1GB', '16384kB'; a bare number is 8 kB blocks,
    as shared_buffers takes it) in bytes; ValueError on anything else."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"bad size {text!r} (e.g. 128MB, 1GB)")
    unit = (m.group(2) or "").lower()
    return int(m.group(1)) * (_UNIT[unit] if unit else 8192)


def whole_db_shared_buffers(db_bytes: int) -> str:
    """shared_buffers that holds a database of ``db_bytes`` (+25% headroom, catalogs, the
    buffers of other backends), rounded up to 128 MB."""
    mb = (int(db_bytes * 1.25) >> 20) + 64
    mb = max(128, -(-mb // 128) * 128)
    return f"{mb}MB"


# --------------------------------------------------------------------------- availability


@dataclass(frozen=True)
class Verdict:
    """Whether a configuration can run here: ``available`` True, False (``why`` says why
    not; not run) or None (unknown, ``why`` says why; run, and said so)."""

    available: bool | None
    why: str = ""

    @property
    def runs(self) -> bool:
        return self.available is not False

    def describe(self) -> str:
        if self.available is True:
            return "yes"
        return f"{'NO' if self.available is False else 'unknown'}: {self.why}"


AVAILABLE = Verdict(True)

_probe_cache: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[bool, str]] = {}


def probe(bindir: Path, engine: str, settings: dict[str, str]) -> tuple[bool, str]:
    """Does the built server accept ``nvm_storage_engine=<engine>`` and ``settings``?

    ``postgres -C`` parses the configuration and exits: an unknown parameter or a value a
    check hook refuses fails there, without a cluster (an empty postgresql.conf in a
    temporary directory). Cached per (install, engine, settings). Returns (ok, message).
    """
    key = (str(bindir), engine, tuple(sorted(settings.items())))
    if key in _probe_cache:
        return _probe_cache[key]
    args = [f"-c{k}={v}" for k, v in sorted(settings.items())]
    if engine != "base":
        args.append(f"-cnvm_storage_engine={engine}")
    tmp = Path(tempfile.mkdtemp(prefix="pgnvm-probe-"))
    try:
        (tmp / "postgresql.conf").write_text("")
        (tmp / "postgresql.auto.conf").write_text("")  # else a LOG line says it is missing
        osuser.chown_to_server(tmp, recursive=True)
        r = osuser.run_pg(
            [str(bindir / "postgres"), "-D", str(tmp), "-C", "shared_buffers", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        res = (r.returncode == 0, "ok" if r.returncode == 0 else error_message(r.stderr))
    except OSError as e:  # no such binary
        res = (False, f"cannot run {bindir / 'postgres'}: {e.strerror or e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _probe_cache[key] = res
    return res


def error_message(stderr: str) -> str:
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


def topology_verdict(cfg: Config, bindir: Path) -> Verdict:
    """The topology requirement of ``cfg`` (helper mappings only), asked of the library's
    ``nvmpf-topology`` in ``bindir``."""
    m = cfg.helper_mapping
    if m is None:
        return AVAILABLE
    available, why = topology.mapping_verdict(bindir, m)
    return Verdict(available, why)


def verdict(cfg: Config, bindir: Path, common: dict[str, str]) -> Verdict:
    """Can ``cfg`` run with the install ``bindir`` on this machine: the topology first,
    then the server's own check of the engine and the settings (``common`` + the
    configuration's; a whole-database shared_buffers is probed as 128MB)."""
    topo = topology_verdict(cfg, bindir)
    if topo.available is False:
        return topo
    ok, msg = probe(bindir, cfg.engine, server_settings(cfg, common, whole_db_sb="128MB"))
    if not ok:
        return Verdict(False, msg or "refused by the server")
    return topo


def availability(
    bindir: Path, configs: Iterable[Config], common: dict[str, str]
) -> dict[str, Verdict]:
    """name -> :func:`verdict` of each configuration."""
    return {c.name: verdict(c, bindir, common) for c in configs}


def listing(
    defaults: Iterable[str],
    verdicts: dict[str, Verdict] | None,
    common: dict[str, str],
    not_for_job: dict[str, str] | None = None,
) -> list[str]:
    """The lines ``--list-configs`` prints: every configuration of the catalogue with its
    settings, whether it is in the job's ``defaults`` and its availability (``verdicts``
    None: the build is not there yet); ``not_for_job``: name -> why the job cannot run it."""
    defaults = set(defaults)
    not_for_job = not_for_job or {}
    out = []
    for c in CONFIGS:
        if c.name in not_for_job:
            a = f"not for this job: {not_for_job[c.name]}"
        elif verdicts is None:
            a = "unknown (build not present yet)"
        else:
            a = verdicts[c.name].describe()
        own = dict(c.settings)
        for key, value in (
            ("shared_buffers", c.shared_buffers),
            ("nvm_buffer_descriptors", c.descriptors),
        ):
            if value:
                own[key] = (
                    value + " (sized to hold the whole database)" if value == SB_WHOLE_DB else value
                )
        out.append(f"{c.name}{'' if c.name in defaults else '  (not in the default set)'}")
        out.append(f"    {c.doc}")
        out.append(f"    engine={c.engine}  storage={c.storage}  available: {a}")
        out.append(
            f"    settings: {', '.join(f'{k}={v}' for k, v in own.items()) or '-'}"
            + ("; pg_prewarm after each restart" if c.prewarm else "")
            + ("; OS page cache dropped before each run" if c.drop_caches else "")
        )
    out.append(
        "common settings (all configurations): " + ", ".join(f"{k}={v}" for k, v in common.items())
    )
    return out
