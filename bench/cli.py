"""Command line of ``./pgnvm`` (``python -m bench``).

Subcommands: ``build`` (bench/build_cli.py), ``cluster`` (bench/cluster_cli.py), ``bootstrap``,
and ``test`` when the test harness is present.

Plug-in hook: each module of ``PLUGINS`` (e.g. ``bench.testsuite.cli``) that exists is
imported and its ``register(subparsers)`` called; it adds its subcommand with
``set_defaults(func=...)``, where ``func(args) -> int`` is the exit status. The test harness
registers ``test`` that way. Plugins are not imported for the core commands (``CORE_COMMANDS``).

Ctrl-C / SIGTERM during any command stops the servers that command started (see
``bench.core.cluster.stop_started``) and exits with 130 / 143.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
from types import FrameType

from bench import build_cli, cluster_cli
from bench.core import build, cluster, osuser, paths, storage, ui

PLUGINS: tuple[str, ...] = ("bench.testsuite.cli", "bench.tpch.cli", "bench.micro.cli")


class Terminated(KeyboardInterrupt):
    """Raised by the SIGTERM handler (a KeyboardInterrupt, so cleanup paths treat it alike)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def _load_plugin(modname: str):
    """The plugin module, None if it is not in this checkout, or the exception importing it
    raised (reported when its command is used, so a broken plugin cannot break `build`)."""
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as e:
        if e.name is not None and modname.startswith(e.name):
            return None
        return e
    except Exception as e:
        return e


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


#: Subcommands defined here: invoking one of them does not import the plugins (the test
#: harness pulls in psycopg & co., which would slow every `./pgnvm build` / `cluster` call).
CORE_COMMANDS = frozenset({"bootstrap", "build", "cluster"})


def build_parser(load_plugins: bool = True) -> argparse.ArgumentParser:
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
    broken: Exception | None = None
    for modname in PLUGINS if load_plugins else ():
        mod = _load_plugin(modname)
        if isinstance(mod, Exception):
            broken = mod
        elif mod is not None:
            mod.register(sub)
    if "test" not in sub.choices:
        p = sub.add_parser(
            "test", help="run the test suite (harness not available)", add_help=False
        )
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda a: _missing("test", broken))
    return parser


def _missing(cmd: str, broken: Exception | None) -> int:
    if broken is not None:
        ui.error(
            f"'{cmd}' is not available: importing bench.testsuite failed: "
            f"{type(broken).__name__}: {broken}"
        )
    else:
        ui.error(f"'{cmd}' is not available: bench/testsuite is not in this checkout")
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv, psql_args = cluster_cli.split_psql(argv)
    parser = build_parser(load_plugins=not argv or argv[0] not in CORE_COMMANDS)
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
    except (build.BuildError, cluster.ClusterError, storage.StorageError) as e:
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
