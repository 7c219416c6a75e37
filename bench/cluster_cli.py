"""``./pgnvm cluster ...`` subcommands (the API lives in :mod:`bench.core.cluster`).

    ./pgnvm cluster init    [--name N] [--engine E] [--storage nvm|disk] [--port P] [--huge]
                            [--flavour F] [-c name=value ...] [--force] [--no-build]
                            [--nvm-root PATH]
    ./pgnvm cluster start   [same options as init]   # init if needed (--force: re-init), start
    ./pgnvm cluster stop    [--name N | --all] [--mode fast|smart|immediate]
    ./pgnvm cluster status  [--name N | --all] [--json]
    ./pgnvm cluster list
    ./pgnvm cluster kill9   [--name N]                # simulated crash
    ./pgnvm cluster destroy [--name N]
    ./pgnvm cluster [--name N] psql [PSQL ARGS ...]

``psql``: everything after the word ``psql`` is passed to psql unchanged (so ``-c`` there is
psql's ``-c``, not pgnvm's setting option). To pick a cluster, put ``--name N`` before
``psql`` or as the very first arguments after it: ``./pgnvm cluster psql --name N -c 'SELECT 1'``.

``init``/``start`` first make sure the flavour's build is up to date (a no-op when it is;
``--no-build`` skips that, e.g. while postgres/src holds work in progress that does not
compile). ``--nvm-root PATH`` (or ``$PGNVM_NVM_ROOT``) puts an nvm cluster's data directory
on a directory of yours (e.g. a DAX file system) instead of the tmpfs: ``PATH/pgnvm-<home
tag>/<name>/data``; moving an existing cluster there needs ``--force``. Options left out of
``init``/``start`` keep the values saved for the cluster (or the defaults for a new one).
``-c`` given at all replaces the saved extra settings as a whole.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.core import build, rootkind, storage, ui
from bench.core.cluster import (
    ENGINES,
    STORAGES,
    Cluster,
    ClusterError,
    ClusterSpec,
    parse_setting,
    release,
    stop_all,
)
from bench.core.paths import FLAVOURS

# Options of `cluster` that take a value (for splitting off psql's arguments).
_VALUE_OPTIONS = {
    "--name",
    "--engine",
    "--storage",
    "--port",
    "--flavour",
    "-c",
    "--mode",
    "--nvm-root",
}


def split_psql(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Split ``cluster ... psql ARGS`` into (pgnvm argv up to and incl. 'psql', psql ARGS).

    Returns (argv, None) when this is not a ``cluster psql`` invocation. A leading
    ``--name N`` / ``--name=N`` right after ``psql`` is moved before it.
    """
    if not argv or argv[0] != "cluster":
        return argv, None
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok == "psql":
            head, rest = argv[: i + 1], argv[i + 1 :]
            if rest and rest[0] == "--name" and len(rest) >= 2:
                head = [*head[:-1], "--name", rest[1], "psql"]
                rest = rest[2:]
            elif rest and rest[0].startswith("--name="):
                head = [*head[:-1], rest[0], "psql"]
                rest = rest[1:]
            return head, rest
        if tok in _VALUE_OPTIONS:
            i += 2
            continue
        if not tok.startswith("-"):
            return argv, None  # another subcommand
        i += 1
    return argv, None


def spec_from_args(args: argparse.Namespace, saved: ClusterSpec | None) -> ClusterSpec:
    """The spec an init/start asks for: saved values (or defaults) overridden by options."""
    spec = ClusterSpec.from_json(saved.to_json()) if saved else ClusterSpec(name=args.name)
    spec.name = args.name
    for f in ("engine", "storage", "port", "flavour", "huge"):
        v = getattr(args, f, None)
        if v is not None:
            setattr(spec, f, v)
    if getattr(args, "settings", None) is not None:
        spec.settings = dict(parse_setting(s) for s in args.settings)
    root = getattr(args, "nvm_root", None) or storage.user_nvm_root_text()
    if root and spec.storage == "nvm":
        spec.nvm_root = str(Path(root).expanduser().absolute())
    spec.validate()
    return spec


def _add_name(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default="default", help="cluster name (default: default)")


def _add_spec_options(p: argparse.ArgumentParser) -> None:
    _add_name(p)
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="nvm_storage_engine (default: base, not written to the config)",
    )
    p.add_argument(
        "--storage",
        choices=STORAGES,
        default=None,
        help="nvm: tmpfs under /mnt/pgnvm; disk: $PGNVM_HOME/disk (default: nvm)",
    )
    p.add_argument("--port", type=int, default=None, help="TCP port (default: 5440)")
    p.add_argument(
        "--huge",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="nvm tmpfs mounted with huge=always",
    )
    p.add_argument(
        "--flavour", choices=FLAVOURS, default=None, help="which build to run (default: release)"
    )
    p.add_argument(
        "-c",
        dest="settings",
        action="append",
        metavar="NAME=VALUE",
        default=None,
        help="extra server setting (repeatable; replaces the saved set)",
    )
    p.add_argument(
        "--nvm-root",
        default=None,
        metavar="PATH",
        help="storage nvm on this directory (e.g. a DAX file system), used as it is: never "
        f"mounted (default: ${storage.NVM_ROOT_ENV}, else the tmpfs)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="re-initdb even if the cluster exists (its data is lost)",
    )
    p.add_argument(
        "--no-build",
        action="store_true",
        help="use the installed binaries as they are (skip the up-to-date check)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    cp = subparsers.add_parser(
        "cluster",
        help="create, start, stop and query PostgreSQL clusters",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cp.add_argument("--name", dest="pre_name", default=None, help=argparse.SUPPRESS)
    sub = cp.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", help="initdb and write settings (starts nothing)")
    _add_spec_options(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("start", help="start (initializing first if needed)")
    _add_spec_options(p)
    p.set_defaults(func=cmd_start)

    p = sub.add_parser("stop", help="stop a cluster")
    _add_name(p)
    p.add_argument("--all", action="store_true", help="stop every running pgnvm cluster")
    p.add_argument("--mode", choices=("smart", "fast", "immediate"), default="fast")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("status", help="engine, storage, port, running/pid, datadir")
    _add_name(p)
    p.add_argument("--all", action="store_true", help="every cluster")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("list", help="all clusters, one line each")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("kill9", help="SIGKILL the postmaster and its children (crash)")
    _add_name(p)
    p.set_defaults(func=cmd_kill9)

    p = sub.add_parser("destroy", help="stop and remove data directory and state")
    _add_name(p)
    p.set_defaults(func=cmd_destroy)

    p = sub.add_parser(
        "psql",
        help="run psql against the cluster; all later arguments go to psql",
        description="Everything after 'psql' is passed to psql. Use --name before 'psql' "
        "(or as the first arguments after it) to pick the cluster.",
    )
    p.set_defaults(func=cmd_psql, psql_args=[])


def _name(args: argparse.Namespace) -> str:
    pre = getattr(args, "pre_name", None)
    name = getattr(args, "name", None)
    if pre and (name in (None, "default")):
        return pre
    return name or "default"


def _saved(name: str) -> Cluster | None:
    return Cluster.load(name) if Cluster.exists(name) else None


def _print_status(st: dict) -> None:
    run = f"running (pid {st['pid']})" if st["running"] else "stopped"
    eng = st["engine"]
    sto = st["storage"] + (" (huge)" if st["huge"] else "")
    if st.get("nvm_root"):
        sto += f" on the user-given root {st['nvm_root']}"
    print(f"cluster   {st['name']}")
    print(f"state     {run}{'' if st['initialized'] else ', NOT initialized'}")
    print(f"engine    {eng}")
    print(f"storage   {sto}")
    print(f"port      {st['port']}")
    print(f"flavour   {st['flavour']}")
    print(f"datadir   {st['datadir']}")
    if st.get("nvm_root"):
        print(f"nvm root  {rootkind.detect(Path(st['nvm_root'])).summary()}")
    print(f"log       {st['logfile']}")
    print(f"conninfo  {st['conninfo']}")
    if st["settings"]:
        print("settings  " + ", ".join(f"{k}={v}" for k, v in st["settings"].items()))


def _check_root(spec: ClusterSpec) -> None:
    """A user-given nvm root refused (storage.StorageError) before anything is built."""
    if spec.storage == "nvm" and spec.nvm_root:
        storage.user_root(Path(spec.nvm_root), mount=True)


def cmd_init(args: argparse.Namespace) -> int:
    args.name = _name(args)
    saved = _saved(args.name)
    spec = spec_from_args(args, saved.spec if saved else None)
    _check_root(spec)
    if not args.no_build:
        build.ensure_built(spec.flavour)
    c = Cluster(spec, saved.datadir if saved else None)
    c.init(force=args.force)
    ui.info(f"cluster {spec.name} ready (not started): {c.datadir}")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    args.name = _name(args)
    saved = _saved(args.name)
    spec = spec_from_args(args, saved.spec if saved else None)
    _check_root(spec)
    if not args.no_build:
        build.ensure_built(spec.flavour)
    c = Cluster(spec, saved.datadir if saved else None)
    if saved is not None and not saved.is_initialized():
        ui.notice(f"data directory {saved.datadir} is gone (tmpfs cleared?); re-initializing")
    if args.force or saved is None or saved.spec != spec or not c.is_initialized():
        c.init(force=args.force)
    c.start()
    release(c)  # the server outlives this command
    ui.info(f"cluster {spec.name} started (pid {c.pid()}): {c.conninfo()}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    if args.all:
        names = stop_all(args.mode)
        ui.info(f"stopped: {', '.join(names)}" if names else "no cluster was running")
        return 0
    c = Cluster.load(_name(args))
    if not c.is_running():
        ui.info(f"cluster {c.spec.name} is not running")
        return 0
    c.stop(args.mode)
    ui.info(f"cluster {c.spec.name} stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    clusters = Cluster.all() if args.all else [Cluster.load(_name(args))]
    sts = [c.status() for c in clusters]
    if args.json:
        print(json.dumps(sts if args.all else sts[0], indent=2))
        return 0
    for i, st in enumerate(sts):
        if i:
            print()
        _print_status(st)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    clusters = Cluster.all()
    if not clusters:
        ui.info("no clusters")
        return 0
    for c in clusters:
        st = c.status()
        run = f"running pid {st['pid']}" if st["running"] else "stopped"
        sto = st["storage"] + ("/huge" if st["huge"] else "")
        print(
            f"{st['name']:<16} {st['engine']:<5} {sto:<9} port {st['port']:<6} "
            f"{st['flavour']:<8} {run:<18} {st['datadir']}"
        )
    return 0


def cmd_kill9(args: argparse.Namespace) -> int:
    c = Cluster.load(_name(args))
    pid = c.pid()
    if pid is None:
        ui.info(f"cluster {c.spec.name} is not running")
        return 0
    c.kill9()
    ui.info(f"cluster {c.spec.name}: killed postmaster {pid} and its children")
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    c = Cluster.load(_name(args))
    c.destroy()
    ui.info(f"cluster {c.spec.name} destroyed")
    return 0


def cmd_psql(args: argparse.Namespace) -> int:
    c = Cluster.load(_name(args))
    if not c.is_running():
        raise ClusterError(
            f"cluster {c.spec.name} is not running; ./pgnvm cluster start --name {c.spec.name}"
        )
    sys.stdout.flush()
    r = c.psql(*args.psql_args, check=False, capture=False)
    return r.returncode
