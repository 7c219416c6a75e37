"""``./pgnvm test``: registered by bench/cli.py through ``register(subparsers)``."""

from __future__ import annotations

import argparse

from bench.testsuite import engines, registry


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "test",
        help="run the test suite (regress, isolation, amcheck, crash, ... per engine)",
        description="Build the check flavour (cassert) and run, for each storage engine, "
        "PostgreSQL's regression and isolation suites plus pgnvm's checks, on a cluster on "
        "tmpfs with shared_buffers=16MB and data checksums. Prints one line per check and "
        "'N passed, M failed'; exits non-zero if any check failed. Checks: "
        + "; ".join(f"{c.name}: {c.doc}" for c in registry.ENGINE_CHECKS)
        + "".join(f"; {g.name}: {g.doc} (once)" for g in registry.GLOBAL_CHECKS)
        + ".",
    )
    p.add_argument(
        "--engines",
        type=_csv,
        default=None,
        metavar="E1,E2",
        help="engines (or engine variants) to test, of "
        + ",".join(engines.KNOWN)
        + " (default: base,se1, plus se2 and its variants if the server accepts se2)",
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
        "--no-build",
        dest="build",
        action="store_false",
        help="use the installed check flavour as it is (no rebuild of postgres/)",
    )
    p.set_defaults(func=_cmd_test)


def _cmd_test(args: argparse.Namespace) -> int:
    from bench.testsuite.runner import Options, run_tests

    bad = [e for e in (args.engines or []) if e not in engines.KNOWN]
    if bad:
        raise SystemExit(
            f"pgnvm test: unknown engine(s) {', '.join(bad)} (known: {', '.join(engines.KNOWN)})"
        )
    try:
        registry.select(args.only)
    except ValueError as e:
        raise SystemExit(f"pgnvm test: {e}") from None
    return run_tests(
        Options(
            engines=args.engines, only=args.only, keep=args.keep, seed=args.seed, build=args.build
        )
    )
