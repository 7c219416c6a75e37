"""``./pgnvm micro``: registered by bench/cli.py through ``register(subparsers)``."""

from __future__ import annotations

import argparse


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "micro",
        help="microbenchmarks: scan (engines on a table larger than shared_buffers), prefetch",
    )
    sub = p.add_subparsers(dest="micro", required=True)
    s = sub.add_parser(
        "scan",
        help="sequential scan and random index lookups over a table 4x shared_buffers",
        description=__import__("bench.micro.scan", fromlist=["x"]).__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--engines",
        type=_csv,
        default=["base", "se1", "se2"],
        help="engines to compare (default base,se1,se2; also se2_inline, se2_m1, se2_m2, "
        "se2_m3: se2 with nvm_prefetch = inline or helper with that mapping)",
    )
    s.add_argument(
        "--io-methods",
        type=_csv,
        default=["worker"],
        help="io_method values for base (default worker; e.g. sync,worker,io_uring)",
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
    s.set_defaults(func=_run_scan)

    pf = sub.add_parser(
        "prefetch",
        help="libnvmprefetch's microbenchmark on 4 KB and 2 MB tmpfs pages",
        description=__import__("bench.micro.prefetch", fromlist=["x"]).__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pf.add_argument("--pages", type=_csv, default=["4k", "2m"], help="4k, 2m (default both)")
    pf.add_argument("--size", default="1G", help="bytes to scan per run (default 1G)")
    pf.add_argument("--runs", type=int, default=5, help="runs per variant (default 5)")
    pf.add_argument("--out", help="results directory (default results/micro-prefetch-<stamp>)")
    pf.add_argument("--keep-file", action="store_true", help="keep the data file afterwards")
    pf.set_defaults(func=_run_prefetch)


def _run_scan(args: argparse.Namespace) -> int:
    from bench.micro.scan import WORKLOADS, Bench

    for w in args.workloads:
        if w not in WORKLOADS:
            raise SystemExit(f"unknown workload {w!r} (known: {', '.join(WORKLOADS)})")
    for pg in args.pages:
        if pg not in ("4k", "2m"):
            raise SystemExit(f"unknown page size {pg!r} (4k or 2m)")
    return Bench(args).main()


def _run_prefetch(args: argparse.Namespace) -> int:
    from bench.micro.prefetch import main

    for pg in args.pages:
        if pg not in ("4k", "2m"):
            raise SystemExit(f"unknown page size {pg!r} (4k or 2m)")
    return main(args)
