"""Command line of ``./pgnvm`` (``python -m bench``).

Subcommands: ``build`` (bench/build_cli.py), ``cluster`` (bench/cluster_cli.py),
``machine`` (bench/machine_cli.py), ``bootstrap``, and one per job: ``test``
(bench/testsuite/cli.py), ``tpch`` (bench/tpch/cli.py), ``micro`` (bench/micro/cli.py),
``oltp`` (bench/oltp/cli.py), ``ha`` (bench/ha/cli.py). Each CLI module's
``register(subparsers)`` adds its subcommand with ``set_defaults(func=...)``, where
``func(args) -> int`` is the exit status.

Ctrl-C / SIGTERM during any command stops the servers that command started (see
``bench.core.cluster.stop_started``) and exits with 130 / 143.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from types import FrameType

from bench import build_cli, cluster_cli, machine_cli
from bench.core import build, cluster, osuser, paths, selection, storage, ui
from bench.ha import cli as ha_cli
from bench.micro import cli as micro_cli
from bench.oltp import cli as oltp_cli
from bench.testsuite import cli as test_cli
from bench.tpch import cli as tpch_cli


class Terminated(KeyboardInterrupt):
    """Raised by the SIGTERM handler (a KeyboardInterrupt, so cleanup paths treat it alike)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def cmd_bootstrap(args: argparse.Namespace) -> int:
    osuser.ensure_server_user()
    home = osuser.ensure_dir(paths.pgnvm_home())
    for d in (paths.clusters_dir(), paths.disk_root()):
        osuser.ensure_dir(d)
    ui.info(
        f"PGNVM_HOME={home}  server user={osuser.server_user()}  "
        f"python={sys.executable}  repo={paths.REPO_ROOT}"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgnvm",
        description="pgnvm: PostgreSQL 18 with persistent-memory storage engines. "
        f"State lives in PGNVM_HOME ({paths.pgnvm_home()}).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("bootstrap", help="set up venv, apt packages, server user (idempotent)")
    p.set_defaults(func=cmd_bootstrap)
    build_cli.register(sub)
    cluster_cli.register(sub)
    test_cli.register(sub)
    tpch_cli.register(sub)
    micro_cli.register(sub)
    oltp_cli.register(sub)
    machine_cli.register(sub)
    ha_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv, psql_args = cluster_cli.split_psql(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if psql_args is not None:
        args.psql_args = psql_args

    old_term = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # stdout closed early (e.g. `| head`): not an error; silence the flush at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Terminated:
        cluster.stop_started()
        ui.error("terminated")
        return 143
    except KeyboardInterrupt:
        cluster.stop_started()
        ui.error("interrupted")
        return 130
    except (
        build.BuildError,
        cluster.ClusterError,
        storage.StorageError,
        selection.SelectionError,
    ) as e:
        ui.error(str(e))
        return 1
    except subprocess.CalledProcessError as e:
        ui.error(f"command failed (exit {e.returncode}): {' '.join(map(str, e.cmd))}")
        for out in (e.stdout, e.stderr):
            if out:
                print(
                    out if isinstance(out, str) else out.decode(errors="replace"), file=sys.stderr
                )
        return 1
    finally:
        signal.signal(signal.SIGTERM, old_term)
