"""Which configurations of the catalogue (:mod:`bench.core.configs`) ``./pgnvm test`` runs,
and the settings every test cluster gets.

Each configuration gets a cluster of its own (``pgnvm-test-<name>``) and names its results
(``regress[nvm_se2_m1]``); every check decides by the configuration's *engine* (which
assertions apply, the expected counters, whether the reference values are recorded or
compared with), so ``nvm_se2_m1`` is checked exactly as ``nvm_se2``. The reference is stock
base as it ships (:data:`bench.core.configs.REFERENCE`, ``nvm_base_worker``).
"""

from __future__ import annotations

import os

from bench.core import configs, selection

#: The build the checks run on (cassert, debug).
FLAVOUR = "check"
#: Settings every test cluster gets: small shared_buffers, so that the data of the checks
#: is several times larger and blocks really move between storage and buffers.
BASE_SETTINGS: dict[str, str] = {
    "shared_buffers": "16MB",
    "max_connections": "60",
    "log_line_prefix": "%m [%p] %q%a ",
}

#: Lanes of a run at most (``--jobs``): more configurations side by side than this only
#: make each check slower (and the machines we run on have 2-8 CPUs).
MAX_JOBS = 4


def default_jobs() -> int:
    """Lanes by default: one per CPU of this process's affinity, 2..MAX_JOBS (on one CPU
    two lanes still overlap one configuration's waits with another's work)."""
    return max(2, min(MAX_JOBS, len(os.sched_getaffinity(0))))


#: always run by default (se1 fails loudly, in setup, until the server has it)
DEFAULT_CONFIGS: tuple[str, ...] = (
    "nvm_base_worker",
    "nvm_base_walpmem",
    "nvm_se1",
    "nvm_se1_pmem",
)
#: run by default when the built server accepts se2: se2, its prefetch variants, se2
#: with the PMem write path (WAL and data through libpmem2), and se2's hybrid pool (only
#: the checks of :data:`bench.testsuite.registry.CONFIG_CHECKS`)
WITH_SE2: tuple[str, ...] = (
    "nvm_se2",
    "nvm_se2_inline",
    "nvm_se2_m1",
    "nvm_se2_pmem",
    "nvm_se2_slots",
)


#: ``--quick``: one configuration per engine (the reference first), se2 with helpers
#: (the prefetch checks) and se2 with the PMem write path (wal_pmem, data_pmem, crash's
#: YCSB-A rounds); the se2 ones when the server accepts se2
QUICK_CONFIGS: tuple[str, ...] = ("nvm_base_worker", "nvm_se1")
QUICK_WITH_SE2: tuple[str, ...] = ("nvm_se2", "nvm_se2_m1", "nvm_se2_pmem")


#: Configurations of the catalogue the checks cannot run: name -> why.
EXCLUDED: dict[str, str] = {
    c.name: "shared_buffers sized to a database and prewarmed: a benchmark configuration "
    "(the checks need small shared_buffers)"
    for c in configs.CONFIGS
    if c.sized_to_db or c.prewarm
}


def job(quick: bool = False) -> selection.Job:
    """``./pgnvm test`` (``--quick``) for :mod:`bench.core.selection`: :data:`DEFAULT_CONFIGS`,
    plus :data:`WITH_SE2` where the check build accepts ``nvm_se2``'s engine and settings
    (the prefetch variants fail loudly, in setup, if it refuses theirs), or the same from
    :data:`QUICK_CONFIGS` and :data:`QUICK_WITH_SE2`. A configuration the build or machine
    cannot run is a failure of the run, not a skip."""
    always, with_se2 = (QUICK_CONFIGS, QUICK_WITH_SE2) if quick else (DEFAULT_CONFIGS, WITH_SE2)
    return selection.Job(
        "test",
        always,
        BASE_SETTINGS,
        EXCLUDED,
        flavour=FLAVOUR,
        gated=with_se2,
        gate="nvm_se2",
        refused_fails=True,
    )
