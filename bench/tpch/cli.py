"""``./pgnvm tpch``: registered by bench/cli.py through ``register(subparsers)``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench.core import configs, results, selection, storage
from bench.tpch import methods, queries, settings

DESCRIPTION = """\
Run the TPC-H benchmark of papers 002 (§5-§6, §8) and 004 (§4) on PostgreSQL 18 with each
storage configuration, compare every answer across configurations, and write
results/<timestamp>-sf<N>[-nocsum]/ (runs.jsonl, runs.csv, env.json, report.md, report.html,
PNG charts) plus a summary table. Does all set-up itself: builds the release flavour, generates
the data with tpchgen-cli (cached in $PGNVM_HOME/tpch/data), creates and loads one cluster per
storage target, scale factor and data checksums setting (tpch-sf<N>-nvm, tpch-sf<N>-disk;
with --data-checksums off tpch-sf<N>-nvm-nocsum, ...; reused by later runs while their load
checksum matches). By default (--method cold) each run restarts the server (cold shared
buffers), drops the OS page cache for data on disk, runs one query in a fresh connection
and records wall-clock, the backend's CPU time and page faults, the other server processes'
CPU, pg_stat_io deltas, hardware counters (where the machine has them) and the peak DRAM
(the server's resident shared memory + the backend's private memory, sampled)."""

EPILOG = (
    """\
Configurations (--list-configs for details): """
    + ", ".join(
        f"{n}{'' if n in settings.DEFAULT_CONFIGS else ' (not default)'}" for n in configs.NAMES
    )
    + """.
A configuration whose engine or settings the built server refuses (e.g. nvm_se2 before se2
lands), or whose prefetch helper mapping the prefetching library cannot place as named
(nvmpf-topology: nvm_se2_m2/m3 need an SMT sibling among the CPUs this process may use), is
reported as not available and skipped; where nvmpf-topology is not installed the helper
configurations run and the report says their availability is unknown.
Exit status: 0, or 1 if an answer differs between configurations or a run failed with an
error or crash (timeouts are reported, not failures), 130 on Ctrl-C (finished runs are kept
and reported)."""
)


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _queries(text: str) -> list[int]:
    try:
        return queries.parse_list(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _sf(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad scale factor {text!r}") from None
    if not 0 < v <= 1000:
        raise argparse.ArgumentTypeError("scale factor must be in (0, 1000]")
    return v


def _positive_int(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return v


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "tpch",
        help="run the TPC-H benchmark over the storage configurations",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--sf",
        type=_sf,
        default=1.0,
        metavar="SF",
        help="TPC-H scale factor (default: 1, about 1 GB of data; 0.01 for a smoke test)",
    )
    p.add_argument(
        "--configs",
        type=_csv,
        default=None,
        metavar="LIST",
        help="comma-separated configurations to run (default: "
        f"{','.join(settings.DEFAULT_CONFIGS)}); see --list-configs",
    )
    p.add_argument(
        "--queries",
        type=_queries,
        default=list(queries.ALL_QUERIES),
        metavar="LIST",
        help="queries to run, e.g. 1-22 (default), 1,6,14 or 1-5,7",
    )
    p.add_argument(
        "--repeat",
        type=_positive_int,
        default=3,
        metavar="N",
        help="runs of every query in every configuration (default: 3); the report "
        "gives the median with min and max",
    )
    p.add_argument(
        "--method",
        choices=methods.NAMES,
        default=methods.DEFAULT,
        help="how each query is run: "
        + "; ".join(f"{m.name}: {m.doc}" for m in methods.METHODS.values())
        + f" (default: {methods.DEFAULT})",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="result directory (default: results/<timestamp>-sf<SF> in the repo, "
        "results/<timestamp>-sf<SF>-nocsum with --data-checksums off)",
    )
    p.add_argument(
        "--compare",
        type=Path,
        nargs="+",
        default=None,
        metavar="DIR",
        help="print (Markdown) how each configuration's time grows with the scale factor "
        "over result directories of runs at different SFs (their summary.json and plan.json; "
        "e.g. an SF 1 and an SF 3 run): totals and geomeans, their ratio to the smallest SF's, "
        "and the ratios to nvm_base_worker and mem_limit at each SF; then exit",
    )
    p.add_argument(
        "--list-configs",
        action="store_true",
        help="list the configurations (settings, storage, availability) and exit",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SEC",
        help="per-query statement_timeout in seconds (default: 600); a query that "
        "hits it is recorded as a timeout",
    )
    p.add_argument(
        "--parallel-workers",
        type=int,
        default=0,
        metavar="N",
        help="max_parallel_workers_per_gather (default: 0, no parallel query, as in the papers)",
    )
    p.add_argument(
        "--shared-buffers",
        default="128MB",
        metavar="SIZE",
        help="shared_buffers of every configuration except mem_limit, which gets "
        "the whole database (default: 128MB)",
    )
    p.add_argument(
        "--work-mem",
        default="64MB",
        metavar="SIZE",
        help="work_mem of every configuration (default: 64MB)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=settings.DEFAULT_PORT,
        metavar="PORT",
        help=f"port of the nvm cluster; the disk cluster uses PORT+1 (default: "
        f"{settings.DEFAULT_PORT})",
    )
    p.add_argument(
        "--data-checksums",
        choices=("on", "off"),
        default="on",
        help="initdb the clusters with data checksums (on, the default) or without (off, "
        "PostgreSQL 9.5's default, as in the papers); each setting has clusters of its own "
        "(off: tpch-sf<N>-<storage>-nocsum) and off results go to results/<timestamp>-sf<N>-nocsum",
    )
    p.add_argument(
        "--no-build",
        action="store_true",
        help="use the installed release build as it is instead of running the "
        "(incremental) build first",
    )
    p.add_argument(
        "--no-perf", action="store_true", help="do not attach perf_event counters to the backend"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="perf record (software clock) the backend and its threads during the first run "
        "of each configuration x query; top functions in profile.md, data in perf/",
    )
    p.add_argument(
        "--no-explain",
        action="store_true",
        help="do not record each query's plan (EXPLAIN, costs off) per configuration",
    )
    storage.add_root_argument(p, "; needs about 4 GB free per unit of --sf (1 GB at least)")
    p.set_defaults(func=_cmd_tpch)


def space_needed(sf: float) -> int:
    """Free space the nvm root needs for TPC-H at ``sf``: ~4 GB at SF 1 (database, WAL,
    temporary files), 1 GB at the least."""
    return max(storage.GiB, int(4 * storage.GiB * sf))


def _cmd_tpch(args: argparse.Namespace) -> int:
    if args.nvm_root:
        storage.set_user_nvm_root(args.nvm_root)
    if args.list_configs:
        return _list_configs(args)
    if args.compare:
        from bench.tpch import growth

        try:
            print(growth.markdown(args.compare), end="")
        except ValueError as e:
            raise SystemExit(f"pgnvm tpch --compare: {e}") from None
        return 0
    storage.use_root_option(None, space_needed(args.sf), what=f"TPC-H SF {args.sf:g}")
    from bench.tpch import runner

    common = settings.Common(args.shared_buffers, args.work_mem, args.parallel_workers)
    try:
        chosen = selection.select(settings.job(common), args.configs)
    except selection.SelectionError as e:
        raise SystemExit(f"pgnvm tpch: {e}") from None
    why = results.unused_out(args.out)
    if why:
        raise SystemExit(f"pgnvm tpch: {why}")
    if args.profile:
        from bench.tpch import profile

        why = profile.available()
        if why:
            raise SystemExit(f"pgnvm tpch: --profile: {why}")
    opts = runner.Options(
        sf=args.sf,
        selection=chosen,
        queries=args.queries,
        repeat=args.repeat,
        method=args.method,
        out=args.out,
        timeout=args.timeout,
        parallel_workers=args.parallel_workers,
        shared_buffers=args.shared_buffers,
        work_mem=args.work_mem,
        port=args.port,
        prefix=os.environ.get(runner.PREFIX_ENV) or settings.DEFAULT_PREFIX,
        perf=not args.no_perf,
        profile=args.profile,
        explain=not args.no_explain,
        build=not args.no_build,
        data_checksums=args.data_checksums == "on",
        perturb=runner.parse_perturb(os.environ.get(runner.PERTURB_ENV)),
    )
    return runner.run(opts)


def _list_configs(args: argparse.Namespace) -> int:
    common = settings.Common(args.shared_buffers, args.work_mem, args.parallel_workers)
    for line in selection.listing(settings.job(common)):
        print(line)
    for line in storage.root_lines():
        print(line)
    return 0
