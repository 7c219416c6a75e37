"""Where pgnvm keeps things.

``PGNVM_HOME`` is ``$PGNVM_HOME`` if set, else ``/var/lib/pgnvm`` when running as root, else
``~/.cache/pgnvm``. It is re-read on every access (``paths.PGNVM_HOME`` is a module-level
attribute computed on demand), so tests and sub-tools can point it elsewhere via the
environment. Layout::

    $PGNVM_HOME/
        src/                 Debian source download cache (postgresql-18_*.orig.tar.*)
        build/<flavour>/     extracted, patched, configured tree (+ build.log, .pgnvm/ stamps)
        install/<flavour>/   install prefix (bin/, lib/, share/)
        venv/                Python virtualenv made by ./pgnvm
        clusters/<name>/     cluster state: spec.json, server log, unix socket
        disk/<name>/         data directories of clusters with storage=disk

The nvm storage root (a tmpfs, :mod:`bench.core.storage`) is one per machine and shared by
every PGNVM_HOME; each home keeps its data directories in its own subdirectory of it,
:func:`home_tag`, so two homes (a CI clone and a developer's tree) never meet there.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

#: Root of the git repository (the directory holding ./pgnvm and bench/).
REPO_ROOT: Path = Path(__file__).resolve().parents[2]
#: Patches applied in sorted order on top of the upstream tarball.
PATCHES_DIR: Path = REPO_ROOT / "postgres" / "patches"
#: Files copied over the tree's src/ (postgres/src/X -> <tree>/src/X).
OVERLAY_DIR: Path = REPO_ROOT / "postgres" / "src"
#: Our contrib modules, copied over ``<tree>/contrib``.
CONTRIB_OVERLAY_DIR: Path = REPO_ROOT / "postgres" / "contrib"
#: libnvmprefetch (prefetch/): built into every PostgreSQL tree and linked statically.
PREFETCH_DIR: Path = REPO_ROOT / "prefetch"

FLAVOURS: tuple[str, ...] = ("release", "check")


def pgnvm_home() -> Path:
    env = os.environ.get("PGNVM_HOME")
    if env:
        return Path(env).expanduser().absolute()
    if os.geteuid() == 0:
        return Path("/var/lib/pgnvm")
    return Path.home() / ".cache" / "pgnvm"


def __getattr__(name: str) -> Path:
    # PEP 562: `paths.PGNVM_HOME` always reflects the current environment.
    if name == "PGNVM_HOME":
        return pgnvm_home()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def home_tag() -> str:
    """This PGNVM_HOME's subdirectory on shared storage roots: ``<basename>-<8 hex digits of
    the sha1 of its resolved path>`` (readable, and distinct for distinct homes)."""
    home = pgnvm_home().resolve()
    digest = hashlib.sha1(str(home).encode()).hexdigest()[:8]
    return f"{home.name or 'root'}-{digest}"


def src_dir() -> Path:
    return pgnvm_home() / "src"


def _check_flavour(flavour: str) -> str:
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown flavour {flavour!r} (expected one of {', '.join(FLAVOURS)})")
    return flavour


def build_dir(flavour: str) -> Path:
    return pgnvm_home() / "build" / _check_flavour(flavour)


def install_dir(flavour: str) -> Path:
    return pgnvm_home() / "install" / _check_flavour(flavour)


def venv_dir() -> Path:
    return pgnvm_home() / "venv"


def clusters_dir() -> Path:
    return pgnvm_home() / "clusters"


def cluster_dir(name: str) -> Path:
    return clusters_dir() / name


def disk_root() -> Path:
    """Storage root of clusters with storage=disk (datadir = disk_root()/<name>/data)."""
    return pgnvm_home() / "disk"


def disk_dir(name: str) -> Path:
    return disk_root() / name


def git_commit() -> str:
    """The repository's HEAD, short ("?" outside a git checkout)."""
    r = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return r.stdout.strip() or "?"
