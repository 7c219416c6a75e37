"""``./pgnvm build``: the command line of :mod:`bench.core.build`."""

from __future__ import annotations

import argparse
import time

from bench.core import paths, ui
from bench.core.build import ensure_built


def flavours_for(choice: str) -> list[str]:
    return list(paths.FLAVOURS) if choice == "all" else [choice]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "build",
        help="download, patch, configure, build and install PostgreSQL 18",
        description="Build PostgreSQL 18 (Debian's upstream tarball) with postgres/patches/*.patch "
        "and postgres/src/** into $PGNVM_HOME/install/<flavour>. Incremental: a second "
        "run is a no-op; editing postgres/src only re-runs make.",
    )
    p.add_argument(
        "--flavour",
        choices=[*paths.FLAVOURS, "all"],
        default="release",
        help="release: -O2; check: --enable-cassert --enable-debug -O1 -g; "
        "all: both (default: release)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="wipe the tree and the install prefix and rebuild from scratch",
    )
    p.add_argument(
        "--refresh-source",
        action="store_true",
        help="run apt-get source again even if a tarball is cached",
    )
    p.set_defaults(func=_cmd_build)


def _cmd_build(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    for fl in flavours_for(args.flavour):
        ensure_built(fl, force=args.force, refresh_source=args.refresh_source)
    ui.info(f"build finished in {ui.fmt_seconds(time.monotonic() - t0)}")
    return 0
