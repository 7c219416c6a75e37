"""``./pgnvm oltp``: registered by bench/cli.py through ``register(subparsers)``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench.core import selection, storage
from bench.oltp import placement, plan, settings, window, workloads

DESCRIPTION = """\
Run YCSB core workloads (A 50/50 read/update, B 95/5, C read only, F read-modify-write on
YCSB's usertable, ~1 KB rows) and TPC-B (pgbench's built-in) through pgbench over the storage
configurations, with durable commits (fsync, synchronous_commit and full_page_writes on), and
paper 003's anti-caching experiment (YCSB-A as shared_buffers shrinks relative to the data).
Writes results/<timestamp>-oltp/ (runs.jsonl, per-second CSVs, per-transaction logs,
report.md, report.html, charts). Does its own set-up: release build, one cluster per storage
and data size (oltp-r<records>-nvm, oltp-r<records>-disk; loaded once, reused).

Defaults are sized for a 2-core VM (about 25 min, plus about 1.5 min for the one-off load):
YCSB-A zipfian at 1 and 8 clients, and the memory ratios 1/2 and 1/128 at 8 clients, over
disk_base, nvm_base_worker, nvm_base_walpmem_cl, nvm_se1, nvm_se2, 60 s per point after a
10 s warm-up. The full
matrix: --workloads all --clients 1,2,4,8 --memory-ratios 1/2,1/8,1/32,1/128 --repeat 3
(about 7 h).

se2's hybrid pool runs by name: --configs nvm_base_worker,nvm_se2,nvm_se2_hybrid. Its
shared_buffers (the DRAM slots for copied pages) is set like every configuration's; its
nvm_buffer_descriptors cover the database as it is at set-up, x 1.25 for the run's growth,
+25% and 64 MB (the report states both and whether they still covered the database).

1-client points run pgbench and the server's backends on one vCPU (--placement same, the
default; points with more clients run where the scheduler puts them): see --placement."""

EPILOG = """\
Emulated persistent memory: nvm storage is a tmpfs (DRAM); the report says so.
Exit status: 0, 1 if a point failed, 2 on bad options (nothing run), 130 on Ctrl-C (the
finished points are kept and reported)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "oltp",
        help="run the OLTP benchmark (YCSB, TPC-B via pgbench) over the storage configurations",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--records",
        type=int,
        default=settings.DEFAULT_RECORDS,
        metavar="N",
        help=f"usertable rows (default {settings.DEFAULT_RECORDS:,}: ~2.7 GB, "
        ">= 8x shared_buffers); TPC-B is loaded at the scale of the same size",
    )
    p.add_argument(
        "--clients",
        default=",".join(map(str, settings.DEFAULT_CLIENTS)),
        metavar="LIST",
        help="pgbench clients per point, e.g. 1,2,4,8 (default: %(default)s)",
    )
    p.add_argument(
        "--workloads",
        default=",".join(settings.DEFAULT_WORKLOADS),
        metavar="LIST",
        help=f"of {','.join(workloads.WORKLOADS)} or all (default: %(default)s); '' with "
        "--memory-ratios for the memory experiment alone",
    )
    p.add_argument(
        "--distribution",
        default=settings.DEFAULT_DISTRIBUTION,
        choices=tuple(workloads.DISTRIBUTIONS),
        help="YCSB key choice: zipfian (scrambled, s=1.001: pgbench's closest to YCSB's "
        "θ=0.99) or uniform (default: %(default)s)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=settings.DEFAULT_DURATION,
        metavar="SEC",
        help="measured seconds per point (default: %(default)s)",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=settings.DEFAULT_WARMUP,
        metavar="SEC",
        help="seconds of the same workload before each measured run (default: %(default)s)",
    )
    p.add_argument(
        "--warmup-max",
        type=float,
        default=window.DEFAULT_WARMUP_MAX,
        metavar="SEC",
        help="the warm-up goes on past --warmup, in slices of "
        f"{window.SLICE_S:g} s, until a slice writes at most --fpi-settled full-page images "
        "per transaction, for at most this many seconds in all (default: %(default)s; "
        "no warm-up at all takes --warmup 0 --warmup-max 0)",
    )
    p.add_argument(
        "--fpi-settled",
        type=float,
        default=window.DEFAULT_FPI_SETTLED,
        metavar="N",
        help="full-page images per transaction of a warm-up slice that end the warm-up "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--no-pretouch",
        action="store_true",
        help="no pre-touch. By default a TPC-B point VACUUMs pgbench_accounts, _branches "
        "and _tellers before its CHECKPOINT and after it updates one row of every heap page "
        "of them, so the first-touch full-page images are written before the warm-up, not "
        "in the window (uniform keys: they would go on for minutes); a YCSB-A, B or F point "
        "(the memory experiment's too) does the same with usertable. YCSB-C only reads: "
        "never pre-touched",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=settings.DEFAULT_REPEAT,
        metavar="N",
        help="repetitions of every point (default: %(default)s; spread is also given per second)",
    )
    p.add_argument(
        "--memory-ratios",
        default=",".join(settings.DEFAULT_MEMORY_RATIOS),
        metavar="LIST",
        help="anti-caching experiment: shared_buffers as fractions of the data, e.g. "
        "1/2,1/8,1/32,1/128; YCSB-A at the largest --clients; 'none' to skip "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--configs",
        default=None,
        metavar="LIST",
        help=f"configurations (default: {','.join(settings.default_configs())}); "
        "see --list-configs",
    )
    p.add_argument(
        "--shared-buffers",
        default=settings.DEFAULT_SHARED_BUFFERS,
        metavar="SIZE",
        help="shared_buffers of the main matrix (default: %(default)s)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="result directory (default: results/<timestamp>-oltp)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=settings.DEFAULT_PORT,
        metavar="PORT",
        help="port of the nvm cluster; disk uses PORT+1 (default: %(default)s)",
    )
    p.add_argument(
        "--placement",
        default=str(placement.DEFAULT),
        metavar="same|same:CPU|free",
        help="where 1-client points run. same (default): pgbench and the server's backends "
        "on one vCPU (the lowest this process may use; same:N for vCPU N): right after the "
        "point's server start its postmaster is pinned (taskset -a -cp; every backend it "
        "forks then inherits it, the auxiliary processes started before stay free), pgbench "
        "runs under taskset -c, and the postmaster is unpinned after the point. free: where "
        "the scheduler puts them. Points with more than one client always run free. A pin "
        "that fails (no taskset, one CPU) runs free and the point's record and the report "
        "say so. Why: " + placement.WHY,
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="where the time goes: perf record -e cpu-clock -a and the wait events of "
        "pgbench's backends during the first repetition of each point (profile.md, perf/)",
    )
    p.add_argument(
        "--no-build", action="store_true", help="use the installed release build as it is"
    )
    p.add_argument("--list-configs", action="store_true", help="list the configurations and exit")
    storage.add_root_argument(p, "; needs about 2 KB per --records row + 1 GB free")
    p.set_defaults(func=_cmd)


def space_needed(records: int) -> int:
    """Free space the nvm root needs: usertable (~1.3 KB a row with its index), TPC-B and
    WAL; about 2 KB a row + 1 GB."""
    return 2048 * records + storage.GiB


def options(args: argparse.Namespace) -> plan.Options:
    """The plan's options from the command line (raises :class:`plan.PlanError`)."""
    cfgs = [t.strip() for t in args.configs.split(",") if t.strip()] if args.configs else None
    ratios = plan.parse_ratios(args.memory_ratios)
    try:
        chosen = selection.select(settings.job(args.shared_buffers, bool(ratios)), cfgs)
    except selection.SelectionError as e:
        raise plan.PlanError(f"--configs: {e}") from None
    o = plan.Options(
        records=args.records,
        clients=plan.parse_int_list(args.clients, "--clients"),
        workloads=plan.parse_workloads(args.workloads) if args.workloads.strip() else [],
        distribution=args.distribution,
        duration=args.duration,
        warmup=args.warmup,
        warmup_max=args.warmup_max,
        fpi_settled=args.fpi_settled,
        pretouch=not args.no_pretouch,
        repeat=args.repeat,
        memory_ratios=ratios,
        selection=chosen,
        shared_buffers=args.shared_buffers,
        out=args.out,
        build=not args.no_build,
        profile=args.profile,
        placement=plan.parse_placement(args.placement),
        port=args.port,
        prefix=os.environ.get("PGNVM_OLTP_CLUSTER_PREFIX") or settings.DEFAULT_PREFIX,
    )
    plan.check(o)
    return o


def _cmd(args: argparse.Namespace) -> int:
    if args.nvm_root:
        storage.set_user_nvm_root(args.nvm_root)
    if args.list_configs:
        return _list_configs(args)
    storage.use_root_option(None, space_needed(args.records), what=f"{args.records:,} records")
    try:
        o = options(args)
    except plan.PlanError as e:
        print(f"pgnvm oltp: {e}", file=sys.stderr)
        return 2
    if o.profile:
        from bench.core import perf

        why = perf.available()
        if why:
            print(f"pgnvm oltp: --profile: {why}", file=sys.stderr)
            return 2
    from bench.oltp import runner

    return runner.run(o)


def _list_configs(args: argparse.Namespace) -> int:
    try:
        memory = bool(plan.parse_ratios(args.memory_ratios))
    except plan.PlanError as e:
        print(f"pgnvm oltp: {e}", file=sys.stderr)
        return 2
    for line in selection.listing(settings.job(args.shared_buffers, memory)):
        print(line)
    print(
        "durable (always, after the above): "
        + ", ".join(f"{k}={v}" for k, v in settings.DURABLE.items())
    )
    for line in storage.root_lines():
        print(line)
    return 0
