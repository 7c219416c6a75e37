"""``./pgnvm micro tablescan|bufman|logging|storage``: the command lines (registered by
bench/micro/cli.py). Light: imports the planner only; the runner when a command runs."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from bench.core import storage as core_storage
from bench.micro import storage
from bench.micro.storage import plan
from bench.micro.storage.plan import PlanError

HELP = {
    "tablescan": "paper 004 Fig. 2: sequential page reads per thread (pread, O_DIRECT, mmap)",
    "bufman": "paper 004 Fig. 3/4: random page reads/writes through a buffer pool "
    "(pread/pwrite+fdatasync, mmap+msync, libpmem2)",
    "logging": "paper 004 Fig. 5: small durable appends (new/recycled file, libpmemlog, "
    "our libpmem2 log)",
    "storage": "all three storage microbenchmarks with their defaults (~15 min)",
}


def _list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(sub: argparse._SubParsersAction) -> None:
    for name in (*plan.BENCHMARKS, "storage"):
        p = sub.add_parser(
            name,
            help=HELP[name],
            description=f"{HELP[name]}.\n\n{storage.__doc__}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_arguments(p, name)
        p.set_defaults(func=run, storage_command=name)


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    d = plan.defaults()
    core_storage.add_root_argument(p, " (the nvm targets then both run there)")
    p.add_argument(
        "--targets",
        type=_list,
        help=f"{', '.join(plan.TARGETS)} (nvm = both tmpfs); default all",
    )
    p.add_argument(
        "--threads", type=_list, help="thread counts; default 1, 2, 4, ... up to 2x the cores"
    )
    if name != "storage":
        names = [v.name for v in plan.VARIANTS[name]]
        p.add_argument(
            "--paths",
            type=_list,
            help=f"{', '.join(names)} (default all; the -cl paths run on nvm only, "
            "odirect on disk only)",
        )
    if name in ("tablescan", "storage"):
        p.add_argument("--page-sizes", type=_list, help="table scan: default 4k,16k")
    if name in ("bufman", "storage"):
        p.add_argument(
            "--bufman-page-sizes" if name == "storage" else "--page-sizes",
            dest="bufman_page_sizes",
            type=_list,
            help="buffer manager: default 4k",
        )
        p.add_argument("--write-ratios", type=_list, help="percent; default 0,20,80")
        p.add_argument(
            "--pool", help=f"buffer pool of all threads (default {plan.fmt_size(d.pool_size)})"
        )
    if name in ("logging", "storage"):
        p.add_argument("--entry-sizes", type=_list, help="default 128,8k")
        p.add_argument("--log-size", help=f"log per thread (default {plan.fmt_size(d.log_size)})")
    if name != "logging":
        p.add_argument(
            "--file-size",
            help=f"data file per thread (default {plan.fmt_size(d.file_size)}; the paper: 5G)",
        )
    p.add_argument("--warmup", type=int, help=f"warm-up repetitions (default {d.warmup})")
    p.add_argument("--reps", type=int, help=f"measured repetitions (default {d.reps})")
    p.add_argument(
        "--max-seconds",
        type=float,
        help=f"time limit of one repetition (default {d.max_seconds}; 0: none)",
    )
    p.add_argument("--seed", type=int, help="random seed (default 1)")
    p.add_argument("--quick", action="store_true", help="smoke run: tiny files, 2 short reps")
    p.add_argument("--no-fio", action="store_true", help="skip the fio check")
    p.add_argument("--out", help="results directory (default results/micro-storage-<stamp>)")
    p.add_argument(
        "--report", metavar="DIR", help="rewrite the report of an earlier run's DIR and exit"
    )


def options(args: argparse.Namespace, benches: list[str]) -> plan.Options:
    """The run's options: the defaults (or --quick's), then what was given; PlanError on bad
    input."""
    o = plan.defaults(quick=args.quick)
    a = vars(args)

    def sizes(key: str) -> tuple[int, ...] | None:
        return tuple(plan.parse_size(s) for s in a[key]) if a.get(key) else None

    changes: dict[str, object] = {}
    if a.get("targets"):
        changes["targets"] = plan.resolve_targets(a["targets"])
    if a.get("threads"):
        try:
            changes["threads"] = tuple(int(t) for t in a["threads"])
        except ValueError:
            raise PlanError(f"--threads takes numbers, not {a['threads']}") from None
    if a.get("paths"):
        changes["paths"] = {**o.paths, benches[0]: plan.check_paths(benches[0], a["paths"])}
    for key in ("page_sizes", "bufman_page_sizes", "entry_sizes"):
        v = sizes(key)
        if v:
            changes[key] = v
    if a.get("write_ratios"):
        try:
            changes["write_ratios"] = tuple(int(w.rstrip("%")) for w in a["write_ratios"])
        except ValueError:
            raise PlanError(f"--write-ratios takes percentages, not {a['write_ratios']}") from None
    for key, field in (("file_size", "file_size"), ("log_size", "log_size"), ("pool", "pool_size")):
        if a.get(key):
            changes[field] = plan.parse_size(a[key])
    for key in ("warmup", "reps", "max_seconds", "seed"):
        if a.get(key) is not None:
            changes[key] = a[key]
    if args.no_fio:
        changes["fio"] = False
    return replace(o, **changes)  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    name = args.storage_command
    benches = list(plan.BENCHMARKS) if name == "storage" else [name]
    if args.report:
        from bench.micro.storage import report

        print(report.write(Path(args.report)))
        return 0
    try:
        o = options(args, benches)
        plan.validate(benches, o)
    except PlanError as e:
        raise SystemExit(f"pgnvm micro {name}: {e}") from None
    from bench.micro.storage import targets
    from bench.micro.storage.runner import Run

    if args.nvm_root:
        core_storage.set_user_nvm_root(args.nvm_root)
    # each target checks the space its files need (targets.check_space)
    core_storage.use_root_option(None, core_storage.CLUSTER_MIN_BYTES, what=f"micro {name}")

    try:
        return Run(benches, o, Path(args.out) if args.out else None).main()
    except (targets.TargetError, RuntimeError) as e:
        raise SystemExit(f"pgnvm micro {name}: {e}") from None
