"""The checks of ``./pgnvm test``: names, the order they run in for each configuration, time
limits and what each is. Data only (the command line lists it without importing a check);
the functions are :data:`bench.testsuite.runner.CHECK_FUNCS`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckDef:
    name: str
    limit: float  # seconds
    doc: str
    #: compares with the value the reference configuration (stock base) records in the
    #: same run: in a run with lanes it waits until the reference is past this check
    uses_reference: bool = False


ENGINE_CHECKS: tuple[CheckDef, ...] = (
    CheckDef(
        "auth",
        2 * 60,
        "another OS user is refused over the socket (peer) and TCP (scram); ours get in",
    ),
    CheckDef("regress", 15 * 60, "make installcheck-parallel (src/test/regress)"),
    CheckDef("pgnvm_ext", 5 * 60, "make installcheck (contrib/pgnvm)"),
    CheckDef("isolation", 15 * 60, "make installcheck (src/test/isolation)"),
    CheckDef("amcheck", 10 * 60, "pg_amcheck of the regression databases"),
    CheckDef("truncated", 5 * 60, "relation file truncated behind the server", True),
    CheckDef("checksum", 5 * 60, "page corrupted behind the server: same error as base", True),
    CheckDef("enospc", 5 * 60, "tablespace on a full tmpfs (root only)"),
    CheckDef("differential", 15 * 60, "query digests identical to base", True),
    CheckDef("strace", 5 * 60, "no pread of relation files in a seq scan (se1+)"),
    CheckDef(
        "redirect",
        5 * 60,
        "se2 scans redirect buffers (none elsewhere); views kept across pins, "
        "never used once their buffer changed",
    ),
    CheckDef("cow", 5 * 60, "se2 copy-on-write: the file changes only at write-back"),
    CheckDef(
        "cow_failure",
        5 * 60,
        "a copy-on-write that cannot map the segment leaves the page usable",
    ),
    CheckDef(
        "mapping_limits",
        10 * 60,
        "1500 relations, nvm_max_mappings=8, no address space: checkpoints and scans work",
    ),
    CheckDef(
        "prefetch_lifecycle",
        5 * 60,
        "se2 prefetch helper threads survive cancel/timeout/FATAL/exit, follow the settings",
    ),
    CheckDef("stress", 6 * 60, "concurrent writers/readers/VACUUM; digest = base's", True),
    CheckDef(
        "slots",
        5 * 60,
        "se2's hybrid pool under writes: slots within the budget, none for redirected "
        "buffers, none lost, a CHECKPOINT leaves nothing dirty; a page zeroed by "
        "zero_damaged_pages is evicted, not demoted; bulk reads over slots/4; settings and "
        "allocations that follow shared_buffers follow the slots (nvm_buffer_descriptors "
        "refused in base/se1)",
    ),
    CheckDef("crash", 10 * 60, "kill -9 under load; acknowledged commits survive"),
    CheckDef(
        "powerloss",
        15 * 60,
        "simulated power cuts under load (stock and the PMem write path): only persisted "
        "bytes survive; recovery, acknowledged commits, pg_amcheck, TPC-B balances",
    ),
    CheckDef(
        "wal_pmem",
        5 * 60,
        "nvm_wal = pmem: granularity logged/forced, WAL records = file's, unmappable pg_wal FATAL",
    ),
    CheckDef(
        "data_pmem",
        5 * 60,
        "nvm_data_persist = pmem: checkpoints fsync nothing written back (control: they do), "
        "granularity logged/forced, refused with base",
    ),
    CheckDef(
        "tap_recovery",
        15 * 60,
        "PostgreSQL's recovery TAP suite, engine in TEMP_CONFIG (not for prefetch variants)",
    ),
)


@dataclass(frozen=True)
class GlobalDef:
    name: str
    limit: float  # seconds
    doc: str


#: Checks that run once, not per engine, in this order, as one task of the lanes, ordered
#: with the configurations' tasks by its estimated length (runner._plan).
#: tests/ holds end-to-end tests of other commands too (tpch builds the release flavour on a
#: fresh machine), hence pytest's generous limit.
GLOBAL_CHECKS: tuple[GlobalDef, ...] = (
    GlobalDef("prefetch", 10 * 60, "make -C prefetch test tsan-test (libnvmprefetch)"),
    GlobalDef(
        "storagebench",
        10 * 60,
        "make -C storagebench test (paper 004's storage microbenchmarks: paths, logs, CLI)",
    ),
    GlobalDef(
        "powerloss_lib",
        5 * 60,
        "make -C powerloss check (the power-loss simulation: preload library, tool, "
        "each persist kind dropped must fail)",
    ),
    GlobalDef(
        "checksum_simd",
        10 * 60,
        "page checksum variants: unit test, clusters cross-checked (src/test/checksum_simd)",
    ),
    GlobalDef(
        "fault_guard",
        5 * 60,
        "SIGBUS/SIGSEGV guard of mapped loads, helper threads included: unit test "
        "(src/test/nvm_fault)",
    ),
    GlobalDef(
        "ha",
        8 * 60,
        "3 nodes under Patroni on etcd (./pgnvm ha): 5 kill -9 of the primary, a node and an "
        "etcd member, a switchover under load: no acknowledged commit lost, the old primary "
        "rejoins, pg_amcheck and TPC-B clean on every node",
    ),
    GlobalDef("pytest", 30 * 60, "pytest -q tests"),
)
#: Checks run once that run in a task of their own (a lane takes them beside the others,
#: placed by their estimate, seconds): not in the one task of the others, which they would
#: make longer than any configuration's.
OWN_TASK: dict[str, float] = {"ha": 200.0}
GLOBAL_LIMITS: dict[str, float] = {g.name: g.limit for g in GLOBAL_CHECKS}

ALL_NAMES: tuple[str, ...] = (
    *(g.name for g in GLOBAL_CHECKS),
    *(c.name for c in ENGINE_CHECKS),
)


#: What ``./pgnvm test --quick`` leaves to the full run, and why: the long suites whose
#: configurations are covered by the checks it keeps, and the checks that test no engine.
#: ``--quick`` runs every other engine check (regress first) in its configurations
#: (:data:`bench.testsuite.settings.QUICK_CONFIGS`).
NOT_QUICK: dict[str, str] = {
    "isolation": "concurrency of the server's own locking: ~25 s per configuration",
    "stress": "concurrent writers and readers for ~1-3 min per configuration",
    "tap_recovery": "replication and recovery: ~2 min per configuration",
    "prefetch": "libnvmprefetch's own tests (no server): make -C prefetch test",
    "storagebench": "the storage microbenchmark's own tests (no server)",
    "checksum_simd": "the checksum variants' own tests (no engine)",
    "powerloss_lib": "the power-loss simulation library's own tests (no server)",
    "pytest": "the Python tooling's tests (no engine): venv/bin/pytest -q tests",
    "ha": "failovers of a 3-node Patroni cluster: ~3 min",
}

#: Checks run only when named (``--only``), not in the default run: a new check until it
#: is shown to pass reliably (``ha`` joined the default run after 4 passes in a row, one
#: beside ``crash`` in the other lane).
OPT_IN: tuple[str, ...] = ()


#: Configurations that run only these engine checks unless ``--only`` names others: what
#: they exist for, without the test time of every suite (a full run stays well under 40
#: minutes). ``nvm_se2_slots``: se2's hybrid pool, issue 22's list plus ``slots``.
CONFIG_CHECKS: dict[str, tuple[str, ...]] = {
    "nvm_se2_slots": (
        "checksum",
        "differential",
        "redirect",
        "cow",
        "stress",
        "slots",
        "crash",
    ),
}


def checks_for(config: str, checks: list[CheckDef], named: bool) -> list[CheckDef]:
    """The engine checks ``config`` runs of ``checks``: all of them if they were ``named``
    (``--only``), else those :data:`CONFIG_CHECKS` gives it (all for the others)."""
    keep = CONFIG_CHECKS.get(config)
    if named or keep is None:
        return checks
    return [c for c in checks if c.name in keep]


def select(only: list[str] | None, quick: bool = False) -> tuple[list[str], list[CheckDef]]:
    """(global checks to run, engine checks) for ``--only`` names (None: everything; with
    ``quick``: all but :data:`NOT_QUICK`), each in registry order."""
    if not only and quick:
        return (
            [g.name for g in GLOBAL_CHECKS if g.name not in NOT_QUICK and g.name not in OPT_IN],
            [c for c in ENGINE_CHECKS if c.name not in NOT_QUICK],
        )
    if not only:
        return [g.name for g in GLOBAL_CHECKS if g.name not in OPT_IN], list(ENGINE_CHECKS)
    unknown = [n for n in only if n not in ALL_NAMES]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(ALL_NAMES)}")
    return (
        [g.name for g in GLOBAL_CHECKS if g.name in only],
        [c for c in ENGINE_CHECKS if c.name in only],
    )
