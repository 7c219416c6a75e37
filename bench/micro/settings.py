"""``./pgnvm micro scan``: a table larger than shared_buffers, read in each configuration.

Two workloads over one table of ``--table-factor`` x shared_buffers (default 4x):

* ``seqscan``: ``SELECT count(*), sum(v) FROM micro_t`` (one backend, no parallel workers);
* ``index``: ``--lookups`` random primary-key lookups in one statement (a nested loop over
  ``generate_series`` with an index scan per row), so most heap pages are misses.

For every configuration of the catalogue named in ``--configs`` (:mod:`bench.core.configs`,
e.g. ``nvm_base_sync,nvm_base_worker,nvm_se1,nvm_se2,nvm_se2_m1``; default
``nvm_base_worker,nvm_se1,nvm_se2``) and page size of the emulated NVM (``--pages 4k,2m``: a
tmpfs with 4 KB pages, or one mounted ``huge=always``), the same data directory is started
with the configuration's engine and settings. A configuration the built server refuses, or
whose helper mapping the prefetching library cannot place (``nvmpf-topology``), is skipped
with the reason (``--list-configs``); ``mem_limit`` gets
shared_buffers for the whole table and its index, prewarmed after each start.
Each run restarts the server (cold shared buffers; the file pages stay in the tmpfs, which
is the "NVM"), opens a fresh connection and measures the statement's wall-clock time and
the backend's user/system CPU time (all its threads, so including prefetch helpers) and page
faults from ``/proc``. Repetitions interleave
the configurations; the report gives the median with min and max, and ratios to the first
configuration. Results: ``results/micro-scan-<stamp>/runs.jsonl`` and ``summary.md``.
"""

from __future__ import annotations

from bench.core import configs, selection

WORKLOADS = ("seqscan", "index")

#: ``./pgnvm micro scan`` without ``--configs``: stock PostgreSQL 18, se1, se2.
DEFAULT_CONFIGS: tuple[str, ...] = ("nvm_base_worker", "nvm_se1", "nvm_se2")

#: Server settings of every configuration (besides shared_buffers, ``--shared-buffers``).
COMMON_SETTINGS: dict[str, str] = {
    "max_parallel_workers_per_gather": "0",
    "jit": "off",
    "autovacuum": "off",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "1h",
}


def common(shared_buffers_mb: int) -> dict[str, str]:
    """The settings every configuration starts from."""
    return {"shared_buffers": f"{shared_buffers_mb}MB", **COMMON_SETTINGS}


def parse_size_mb(text: str) -> int:
    t = text.strip().upper().removesuffix("B")
    if t.endswith("G"):
        return int(float(t[:-1]) * 1024)
    if t.endswith("M"):
        return int(float(t[:-1]))
    raise ValueError(f"size must end in MB or GB: {text!r}")


#: Configurations of the catalogue this benchmark cannot run: name -> why.
EXCLUDED: dict[str, str] = {
    c.name: "micro scan measures the emulated NVM (tmpfs) only"
    for c in configs.CONFIGS
    if c.storage != "nvm"
}


def job(shared_buffers_mb: int = 128) -> selection.Job:
    """``./pgnvm micro scan`` for :mod:`bench.core.selection`: the nvm configurations of the
    catalogue, :data:`DEFAULT_CONFIGS` by default."""
    return selection.Job("micro scan", DEFAULT_CONFIGS, common(shared_buffers_mb), EXCLUDED)
