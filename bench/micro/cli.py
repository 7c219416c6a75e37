"""``./pgnvm micro``: registered by bench/cli.py through ``register(subparsers)``."""

from __future__ import annotations

import argparse

from bench.core import selection, storage, ui
from bench.micro import checksum, prefetch, settings
from bench.micro.storage import cli as storage_cli


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "micro",
        help="microbenchmarks: scan (configurations on a table larger than shared_buffers), "
        "prefetch, checksum, and paper 004's storage benchmarks: tablescan, bufman, logging, "
        "storage",
    )
    sub = p.add_subparsers(dest="micro", required=True)
    s = sub.add_parser(
        "scan",
        help="sequential scan and random index lookups over a table 4x shared_buffers",
        description=settings.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--configs",
        type=_csv,
        default=None,
        metavar="LIST",
        help="configurations to compare, in this order (ratios are to the first; names of "
        "the catalogue, as for ./pgnvm tpch): "
        + ", ".join(settings.job().names())
        + f". Default: {', '.join(settings.DEFAULT_CONFIGS)}; see --list-configs",
    )
    s.add_argument(
        "--list-configs",
        action="store_true",
        help="list the configurations (settings, availability) and exit",
    )
    s.add_argument(
        "--pages",
        type=_csv,
        default=["4k"],
        help="tmpfs page sizes: 4k, 2m (huge=always); default 4k",
    )
    s.add_argument(
        "--workloads", type=_csv, default=["seqscan", "index"], help="seqscan, index (default both)"
    )
    s.add_argument("--shared-buffers", default="128MB", help="default 128MB")
    s.add_argument(
        "--table-factor",
        type=int,
        default=4,
        help="table size as a multiple of shared_buffers (default 4)",
    )
    s.add_argument(
        "--lookups",
        type=int,
        default=100000,
        help="random index lookups per index run (default 100000)",
    )
    s.add_argument("--repeat", type=int, default=5, help="runs per configuration (default 5)")
    s.add_argument("--port", type=int, default=5560, help="port of the 4k cluster (2m: +1)")
    s.add_argument("--out", help="results directory (default results/micro-scan-<stamp>)")
    s.add_argument("--no-build", action="store_true", help="use the installed release build")
    storage.add_root_argument(s, " (--pages then only names the clusters: the root's pages)")
    s.set_defaults(func=_run_scan)

    pf = sub.add_parser(
        "prefetch",
        help="libnvmprefetch's microbenchmark on 4 KB and 2 MB tmpfs pages",
        description=prefetch.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pf.add_argument("--pages", type=_csv, default=["4k", "2m"], help="4k, 2m (default both)")
    pf.add_argument("--size", default="1G", help="bytes to scan per run (default 1G)")
    pf.add_argument("--runs", type=int, default=5, help="runs per variant (default 5)")
    pf.add_argument("--out", help="results directory (default results/micro-prefetch-<stamp>)")
    pf.add_argument("--keep-file", action="store_true", help="keep the data file afterwards")
    pf.set_defaults(func=_run_prefetch)

    ck = sub.add_parser(
        "checksum",
        help="ns per 8 KB page of each page checksum variant (scalar, AVX2, AVX-512)",
        description=checksum.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ck.add_argument("--runs", type=int, default=5, help="runs per variant (default 5)")
    ck.add_argument("--out", help="results directory (default results/micro-checksum-<stamp>)")
    ck.add_argument("--no-build", action="store_true", help="use the release build as it is")
    ck.set_defaults(func=checksum.main)
    storage_cli.register(sub)


def scan_space_needed(shared_buffers: str, table_factor: int, pages: list[str]) -> int:
    """Free space the nvm root needs for ``micro scan``: per page size a cluster with the
    table (``table_factor`` x shared_buffers), its index and WAL, ~2x the table, + 1 GB."""
    table = settings.parse_size_mb(shared_buffers) * table_factor * storage.MiB
    return 2 * table * max(1, len(pages)) + storage.GiB


def _run_scan(args: argparse.Namespace) -> int:
    try:
        job = settings.job(settings.parse_size_mb(args.shared_buffers))
        args.selection = selection.select(job, args.configs)
    except (selection.SelectionError, ValueError) as e:
        raise SystemExit(f"pgnvm micro scan: {e}") from None
    if args.nvm_root:
        storage.set_user_nvm_root(args.nvm_root)
    if args.list_configs:
        for line in selection.listing(job):
            print(line)
        for line in storage.root_lines():
            print(line)
        return 0
    need = scan_space_needed(args.shared_buffers, args.table_factor, args.pages)
    if storage.use_root_option(None, need, what="micro scan") is not None and "2m" in args.pages:
        ui.notice("--nvm-root: the 2m cluster is on the same root; its pages are the root's")
    for w in args.workloads:
        if w not in settings.WORKLOADS:
            raise SystemExit(f"unknown workload {w!r} (known: {', '.join(settings.WORKLOADS)})")
    for pg in args.pages:
        if pg not in ("4k", "2m"):
            raise SystemExit(f"unknown page size {pg!r} (4k or 2m)")
    from bench.micro.scan import Bench

    return Bench(args).main()


def _run_prefetch(args: argparse.Namespace) -> int:
    for pg in args.pages:
        if pg not in ("4k", "2m"):
            raise SystemExit(f"unknown page size {pg!r} (4k or 2m)")
    return prefetch.main(args)
