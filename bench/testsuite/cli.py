"""``./pgnvm test``: registered by bench/cli.py through ``register(subparsers)``."""

from __future__ import annotations

import argparse

from bench.core import configs, selection, storage
from bench.testsuite import registry, settings
from bench.testsuite.settings import FLAVOUR


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "test",
        help="run the test suite (regress, isolation, amcheck, crash, ... per engine)",
        description="Build the check flavour (cassert) and run, for each storage "
        "configuration, PostgreSQL's regression and isolation suites plus pgnvm's checks, "
        "on a cluster of its own with shared_buffers=16MB and data checksums; each check "
        "decides by the configuration's engine. Prints one line per check and "
        "'N passed, M failed'; exits non-zero if any check failed. Checks: "
        + "; ".join(f"{c.name}: {c.doc}" for c in registry.ENGINE_CHECKS)
        + "".join(f"; {g.name}: {g.doc} (once)" for g in registry.GLOBAL_CHECKS)
        + ".",
    )
    p.add_argument(
        "--configs",
        type=_csv,
        default=None,
        metavar="LIST",
        help="configurations to test, in this order (names of the catalogue, as for "
        "./pgnvm tpch): "
        + ", ".join(settings.job().names())
        + f". Default: {', '.join(settings.DEFAULT_CONFIGS)}, plus "
        f"{', '.join(settings.WITH_SE2)} if the server accepts se2; see --list-configs",
    )
    p.add_argument(
        "--list-configs",
        action="store_true",
        help="list the configurations (settings, availability with the check build) and exit",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="list what a run would test (configurations and checks) and exit",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="day-to-day run (<= 10 min): "
        + ", ".join([*settings.QUICK_CONFIGS, *settings.QUICK_WITH_SE2])
        + " (the se2 ones if the server accepts se2) through every check but "
        + ", ".join(registry.NOT_QUICK)
        + "; CI runs the full suite",
    )
    p.add_argument(
        "--only",
        type=_csv,
        default=None,
        metavar="NAMES",
        help=f"run only these checks ({','.join(registry.ALL_NAMES)})",
    )
    p.add_argument(
        "--keep", action="store_true", help="keep the test clusters and work directories afterwards"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the crash check's kill timing, the stress check's transaction sequences "
        "and the random lookups (default: random, printed)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=settings.default_jobs(),
        metavar="N",
        help="lanes: run up to N tasks side by side (a configuration with its checks, or a "
        "check run once), each configuration on its own cluster and port; the reference "
        "configuration goes first and the others wait for its values before comparing. "
        f"1: one after the other. Default: {settings.default_jobs()} (CPUs here, at most "
        f"{settings.MAX_JOBS})",
    )
    p.add_argument(
        "--no-build",
        dest="build",
        action="store_false",
        help="use the installed check flavour as it is (no rebuild of postgres/)",
    )
    storage.add_root_argument(
        p,
        f"; needs about {storage.fmt_bytes(CONFIG_ROOT_BYTES)} free per configuration on "
        f"the root (+ {storage.fmt_bytes(TAP_ROOT_BYTES)} where tap_recovery runs), for as "
        "many configurations as run side by side (--jobs; all of them with --keep)",
    )
    p.set_defaults(func=_cmd_test)


#: free space a configuration's cluster takes on the nvm root at the most: initdb, the
#: checks' databases (regress's), WAL up to a checkpoint (nvm_se2 after regress and
#: isolation: 335 MB, 2026-11-25)
CONFIG_ROOT_BYTES = 512 * storage.MiB
#: tap_recovery's scratch directory next to the cluster (EngineEnv.scratch_dir): the TAP
#: suite's own clusters, up to pgsuites.TAP_JOBS of its scripts at once (nvm_se2: 1.5 GB
#: at the peak, 2026-11-25)
TAP_ROOT_BYTES = 2 * storage.GiB


def space_needed(
    cfgs: list[configs.Config], checks: list[registry.CheckDef], jobs: int, keep: bool
) -> int:
    """Free space ``./pgnvm test`` needs on a user-given nvm root: per configuration on
    storage nvm its cluster (:data:`CONFIG_ROOT_BYTES`) and, where tap_recovery runs, the
    TAP suite's scratch (:data:`TAP_ROOT_BYTES`); summed over the ``jobs`` largest (a
    configuration's cluster is removed when its lane is done with it), over all of them
    with ``keep``."""
    from bench.testsuite.checks.pgsuites import tap_recovery_skip

    tap = any(c.name == "tap_recovery" for c in checks)
    each = sorted(
        (
            CONFIG_ROOT_BYTES + (TAP_ROOT_BYTES if tap and tap_recovery_skip(c) is None else 0)
            for c in cfgs
            if c.storage == "nvm"
        ),
        reverse=True,
    )
    return sum(each if keep else each[: max(1, jobs)])


def _cmd_test(args: argparse.Namespace) -> int:
    try:
        chosen = selection.select(settings.job(args.quick), args.configs)
        registry.select(args.only)
    except ValueError as e:
        raise SystemExit(f"pgnvm test: {e}") from None
    if args.quick and args.only:
        raise SystemExit("pgnvm test: --quick and --only do not go together")
    if args.jobs < 1:
        raise SystemExit(f"pgnvm test: --jobs must be at least 1, not {args.jobs}")
    if args.nvm_root:
        storage.set_user_nvm_root(args.nvm_root)
    if args.list_configs:
        for line in [*selection.listing(settings.job()), *storage.root_lines()]:
            print(line)
        return 0
    if args.list:
        return _list(args, chosen)
    _, checks = registry.select(args.only, args.quick)
    need = space_needed(chosen.wanted, checks, args.jobs, args.keep)
    storage.use_root_option(None, need, what="./pgnvm test")
    from bench.testsuite.runner import Options, run_tests

    return run_tests(
        Options(
            selection=chosen,
            only=args.only,
            keep=args.keep,
            seed=args.seed,
            build=args.build,
            jobs=args.jobs,
            quick=args.quick,
        )
    )


def _list(args: argparse.Namespace, chosen: selection.Selection) -> int:
    """The configurations and checks a run with these options would test."""
    global_checks, checks = registry.select(args.only, args.quick)
    job = chosen.job
    if chosen.given:
        how = "as given"
    elif job.built():
        chosen.judge(say=lambda _: None)
        how = f"default; the {FLAVOUR} build's se2: {chosen.notes[job.gate]}"
    else:
        how = f"default, {', '.join(job.gated)} if the {FLAVOUR} build accepts se2"
    names = chosen.names
    print(f"configurations ({how}):")
    for c in chosen.wanted:
        print(f"  {c.name:<18} engine={c.engine} {c.doc}")
    print("checks per configuration:")
    for c in checks:
        print(f"  {c.name:<18} {c.doc}")
    print("checks run once:")
    for name in global_checks:
        print(f"  {name}")
    print(
        f"{len(names)} configurations x {len(checks)} checks + {len(global_checks)} once: "
        f"{len(names) * (len(checks) + 1) + len(global_checks)} results (with setup)"
    )
    return 0
