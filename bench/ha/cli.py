"""``./pgnvm ha up|status|switchover|failover|down``: a 3-node pgnvm cluster managed by
Patroni on a 3-member etcd, all on 127.0.0.1 (:mod:`bench.ha.control`; bench/ha/README.md).

    ./pgnvm ha up         [--name N] [--config NAME] [--port P] [--flavour F] [--no-build]
    ./pgnvm ha status     [--name N] [--json]
    ./pgnvm ha switchover [--name N] [--candidate NODE]
    ./pgnvm ha failover   [--name N] --candidate NODE
    ./pgnvm ha bench      [--name N] [--rounds 5] [--clients 4] [--seconds 8] [--fault F]
    ./pgnvm ha bench --tpch [--name N] [--vs N2] [--sf 0.1] [--queries 1-22] [--repeat 3]
    ./pgnvm ha down       [--name N] [--purge]
"""

from __future__ import annotations

import argparse
import json
import time

from bench.core import build, configs, storage, ui
from bench.core.paths import FLAVOURS
from bench.ha import failbench
from bench.ha.control import HaCluster, check_ports_free, new_spec
from bench.ha.spec import COMMON_SETTINGS, DEFAULT_CONFIG, HaError
from bench.tpch import queries

#: ``ha bench --tpch``: the cluster compared with ``--name``, the scale factor (small: the
#: 2-vCPU VM runs two HA clusters of 3 nodes side by side)
TPCH_VS = "ha-base"
TPCH_SF = 0.1


def _sf(text: str) -> float:
    sf = float(text)
    if not 0 < sf <= 100:
        raise argparse.ArgumentTypeError(f"scale factor {text}: between 0 and 100")
    return sf


def _queries(text: str) -> list[int]:
    try:
        return queries.parse_list(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1")
    return n


def _check_config(config: str, flavour: str) -> None:
    """Refuse a configuration the build or this machine cannot run, with the server's reason."""
    if config not in configs.BY_NAME:
        raise HaError(f"unknown configuration {config!r}; one of {', '.join(configs.NAMES)}")
    bindir = build.bindir(flavour)
    v = configs.verdict(configs.BY_NAME[config], bindir, COMMON_SETTINGS)
    if v.available is False:
        raise HaError(f"configuration {config} cannot run with the {flavour} build: {v.why}")


def cmd_up(args: argparse.Namespace) -> int:
    storage.use_root_option(args.nvm_root, storage.CLUSTER_MIN_BYTES * 3, "an HA cluster")
    if HaCluster.exists(args.name):
        ha = HaCluster.load(args.name)
        if args.config and args.config != ha.spec.config:
            raise HaError(
                f"HA cluster {args.name} exists with configuration {ha.spec.config}; "
                f"./pgnvm ha down --name {args.name} --purge first"
            )
    else:
        config = args.config or DEFAULT_CONFIG
        if args.build:
            build.ensure_built(args.flavour)
        _check_config(config, args.flavour)
        ha = HaCluster(new_spec(args.name, config, args.flavour, args.port))
    if ha.leader() is None:
        down = [i for i in range(3) if not ha.running(f"node{i + 1}")]
        if len(down) == 3 and not any(ha.running(f"etcd{i + 1}") for i in range(3)):
            check_ports_free(ha.spec)
    ui.step(f"HA cluster {args.name}: etcd x3 + Patroni x3, configuration {ha.spec.config}")
    leader = ha.up()
    for line in ha.status_lines():
        print(line)
    ui.info(
        f"leader: {leader}; connect: psql 'host=127.0.0.1 port="
        f"{ha.pg_port(ha.index(leader))} user=pgnvm' (PGPASSFILE=$PGNVM_HOME/secrets/pgpass)"
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    ha = HaCluster.load(args.name)
    if args.json:
        print(
            json.dumps(
                {
                    "spec": ha.spec.to_json(),
                    "members": ha.members(),
                    "etcd_quorum": ha.etcd_quorum()[0],
                },
                indent=2,
            )
        )
    else:
        for line in ha.status_lines():
            print(line)
    return 0 if ha.leader() else 1


def cmd_switchover(args: argparse.Namespace) -> int:
    ha = HaCluster.load(args.name)
    old, new = ha.switchover(args.candidate)
    ui.info(f"switchover: {old} -> {new}")
    return 0


def cmd_failover(args: argparse.Namespace) -> int:
    ha = HaCluster.load(args.name)
    old, new = ha.failover(args.candidate)
    ui.info(f"failover: {old or 'no leader'} -> {new}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from bench.core import paths

    if args.tpch:
        return cmd_bench_tpch(args)
    ha = HaCluster.load(args.name)
    out = paths.REPO_ROOT / "results" / f"ha-bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    rounds = failbench.run(ha, args.rounds, args.clients, args.seconds, out, args.fault)
    for line in failbench.table(rounds):
        print(line)
    ui.info(f"rounds: {out}")
    return 0


def cmd_bench_tpch(args: argparse.Namespace) -> int:
    from bench.core import paths
    from bench.ha import tpchbench

    a = HaCluster.load(args.name)
    if not HaCluster.exists(args.vs):
        raise HaError(
            f"no HA cluster {args.vs!r} to compare with: ./pgnvm ha up --name {args.vs} "
            "--config nvm_base_worker (or give --vs)"
        )
    b = HaCluster.load(args.vs)
    out = paths.REPO_ROOT / "results" / f"ha-tpch-{time.strftime('%Y%m%d-%H%M%S')}"
    summary, problems = tpchbench.run(a, b, args.sf, args.queries, args.repeat, args.timeout, out)
    for line in tpchbench.table(summary):
        print(line)
    ui.info(f"report: {out / 'report.md'} (runs.jsonl, summary.json)")
    for p in problems:
        ui.error(p)
    return 1 if problems else 0


def cmd_down(args: argparse.Namespace) -> int:
    ha = HaCluster.load(args.name)
    stopped = ha.down()
    ui.info(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    if args.purge:
        ha.purge()
        ui.info(f"removed the data, state and secrets of HA cluster {args.name}")
    return 0


def _safe(func):
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except HaError as e:
            ui.error(str(e))
            return 1

    return run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ha",
        help="a highly available cluster: 3 pgnvm nodes under Patroni on a 3-member etcd",
        description="3 pgnvm nodes (one primary, synchronous and hot standbys) managed by "
        "Patroni on a 3-member etcd, all on 127.0.0.1 (bench/ha/README.md).",
    )
    hs = p.add_subparsers(dest="ha_command", required=True, metavar="ACTION")

    def add(name: str, func, help_: str) -> argparse.ArgumentParser:
        q = hs.add_parser(name, help=help_, description=help_)
        q.add_argument("--name", default="ha", help="the HA cluster (default: ha)")
        q.set_defaults(func=_safe(func))
        return q

    q = add("up", cmd_up, "start etcd and the 3 nodes (the first run bootstraps them)")
    q.add_argument(
        "--config",
        default=None,
        metavar="NAME",
        help=f"a configuration of the catalogue (default {DEFAULT_CONFIG})",
    )
    q.add_argument(
        "--port",
        type=int,
        default=None,
        help="first of 12 ports in a row (default: the first free ones from 5600)",
    )
    q.add_argument("--flavour", choices=FLAVOURS, default="release")
    q.add_argument(
        "--no-build", dest="build", action="store_false", help="use the installed build as it is"
    )
    storage.add_root_argument(q)
    q = add("status", cmd_status, "etcd's quorum and Patroni's members (exit 1: no leader)")
    q.add_argument("--json", action="store_true")
    q = add("switchover", cmd_switchover, "a planned switchover to a synchronous standby")
    q.add_argument("--candidate", default=None, help="the node to promote (default: Patroni's)")
    q = add("failover", cmd_failover, "a manual failover to --candidate (also without leader)")
    q.add_argument("--candidate", required=True)
    q = add(
        "bench",
        cmd_bench,
        "failover benchmark: kill -9 of the primary under TPC-B, rounds; --tpch: read-only "
        "TPC-H on a hot standby, this cluster against --vs",
    )
    q.add_argument("--rounds", type=int, default=5)
    q.add_argument("--clients", type=int, default=4)
    q.add_argument("--seconds", type=int, default=8, help="pgbench before and after each kill")
    q.add_argument(
        "--fault",
        choices=failbench.FAULTS,
        default="postmaster",
        help="postmaster: kill -9 of the primary's postmaster (its Patroni lives); node: its "
        "Patroni killed too, a whole node's death (the leader key must expire: TTL)",
    )
    q.add_argument(
        "--tpch",
        action="store_true",
        help="read-only TPC-H on a hot standby of --name and of --vs, interleaved (both "
        "clusters up; TPC-H loaded on their primaries when not there)",
    )
    q.add_argument(
        "--vs",
        default=TPCH_VS,
        metavar="NAME",
        help=f"--tpch: the HA cluster to compare with (default {TPCH_VS}, "
        "e.g. up with --config nvm_base_worker)",
    )
    q.add_argument("--sf", type=_sf, default=TPCH_SF, help="--tpch: scale factor")
    q.add_argument(
        "--queries", type=_queries, default=list(queries.ALL_QUERIES), help="--tpch: e.g. 1-22"
    )
    q.add_argument("--repeat", type=_positive, default=3, help="--tpch: measured pairs per query")
    q.add_argument("--timeout", type=float, default=600.0, help="--tpch: seconds per query")
    q = add("down", cmd_down, "stop the nodes (Patroni stops PostgreSQL) and etcd")
    q.add_argument("--purge", action="store_true", help="also remove data, state and secrets")
