"""Storage roots: where the data directories of clusters live.

* ``nvm``: a tmpfs mounted by pgnvm (as root) at ``/mnt/pgnvm/nvm`` (4 KiB pages) or
  ``/mnt/pgnvm/nvm-huge`` (``huge=always``), sized at 75% of RAM; it emulates persistent
  memory. When it cannot be mounted (not root, or huge pages unavailable) the fallback is
  ``/dev/shm/pgnvm-<user>``, with a notice. The tmpfs is shared by every PGNVM_HOME; each
  home keeps its data directories under its own ``paths.home_tag()`` there.
* ``disk``: ``$PGNVM_HOME/disk``.

A user-given nvm root (``--nvm-root PATH`` on the jobs, which sets ``PGNVM_NVM_ROOT`` for
everything the command starts; or the variable itself, e.g. ``PGNVM_NVM_ROOT=/x ./pgnvm
test``) replaces the tmpfs: a DAX file system on real PMem or CXL memory, or any directory.
It is used as it is: never mounted, never emptied; pgnvm works only in its own subdirectory,
``PATH/pgnvm-<home tag>`` (:func:`user_root_subdir`). :func:`check_root` refuses it with a
:class:`StorageError` (printed by the CLI) when it is not an existing directory, we or the
server user cannot create a directory there, or it lacks the free space the job needs. What
the root is (tmpfs, DAX, page cache) is :mod:`bench.core.rootkind`'s.

:func:`mount_tmpfs` is also what other tmpfs users mount with (``./pgnvm micro prefetch``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.core import osuser, paths, procfs, rootkind, ui

STORAGES: tuple[str, ...] = ("nvm", "disk")
NVM_MOUNT = Path("/mnt/pgnvm/nvm")
NVM_HUGE_MOUNT = Path("/mnt/pgnvm/nvm-huge")
NVM_FRACTION = 0.75  # tmpfs size as a fraction of RAM
#: the user-given nvm root (absolute path); ``--nvm-root`` sets it for the whole command
NVM_ROOT_ENV = "PGNVM_NVM_ROOT"
GiB = 1 << 30
MiB = 1 << 20
#: free space a cluster needs at the least on a user-given root (initdb, WAL, a little data)
CLUSTER_MIN_BYTES = 256 * MiB


class StorageError(RuntimeError):
    """A storage root cannot be used (e.g. a mount point holds something else)."""


def mount_options(path: Path) -> str | None:
    """``FSTYPE OPTIONS`` of the file system mounted at ``path``; None if nothing is."""
    r = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE,OPTIONS", "--mountpoint", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0 or not r.stdout.strip():
        return None
    return r.stdout.strip()


def mount_tmpfs(mnt: Path, options: str, source: str = "tmpfs") -> str | None:
    """``mount -t tmpfs -o options source mnt`` (root; creates ``mnt``). Returns None, or
    why it failed."""
    mnt.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, source, str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if r.returncode == 0 else (r.stderr.strip() or f"exit {r.returncode}")


def huge_shmem_denied() -> bool:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/shmem_enabled").read_text()
    except OSError:
        return True  # no THP at all
    return "[deny]" in text


def fallback_nvm_root() -> Path:
    return Path("/dev/shm") / f"pgnvm-{osuser.current_user()}"


# --------------------------------------------------------------------------- user-given root


def user_nvm_root() -> Path | None:
    """The user-given nvm root (``$PGNVM_NVM_ROOT``, made absolute), or None."""
    v = os.environ.get(NVM_ROOT_ENV, "").strip()
    return Path(v).expanduser().absolute() if v else None


def user_nvm_root_text() -> str | None:
    """:func:`user_nvm_root` as a string (the default of a cluster spec's ``nvm_root``)."""
    r = user_nvm_root()
    return None if r is None else str(r)


def set_user_nvm_root(path: str | Path) -> Path:
    """Make ``path`` the nvm root of this command and of every process it starts."""
    p = Path(path).expanduser().absolute()
    os.environ[NVM_ROOT_ENV] = str(p)
    return p


def user_root_subdir(root: Path) -> Path:
    """Our own directory on a user-given root: ``<root>/pgnvm-<home tag>`` (the only place
    we create or remove anything there)."""
    return root / f"pgnvm-{paths.home_tag()}"


def fmt_bytes(n: float) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


def _probe_mkdir_as_us(path: Path) -> str | None:
    """None if we can create (and remove) a directory in ``path``, else why not."""
    try:
        d = tempfile.mkdtemp(prefix=".pgnvm-probe-", dir=path)
    except OSError as e:
        return e.strerror or str(e)
    os.rmdir(d)
    return None


def _probe_mkdir_as_server(path: Path) -> str | None:
    """As root: None if the server user can create (and remove) a directory in ``path``."""
    script = 'd=$(mktemp -d "$1/.pgnvm-probe-XXXXXX") && rmdir "$d"'
    r = osuser.run_pg(
        ["sh", "-c", script, "sh", str(path)], capture_output=True, text=True, check=False
    )
    if r.returncode == 0:
        return None
    return (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]


def check_root(
    path: Path,
    need_bytes: int,
    *,
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
    mkdir_as_us: Callable[[Path], str | None] = _probe_mkdir_as_us,
    mkdir_as_server: Callable[[Path], str | None] | None = None,
    what: str = "the job",
) -> Path:
    """Refuse (:class:`StorageError`) a user-given root that is not an existing directory,
    where we (and, as root, the server user) cannot create a directory, or whose file
    system has less than ``need_bytes`` free (``statvfs``: ``f_bavail * f_frsize``; what
    our own subdirectory already holds counts as free). Returns ``path``. The probes are
    parameters for tests."""
    hint = f"(--nvm-root / {NVM_ROOT_ENV})"
    if not path.exists():
        raise StorageError(f"nvm root {path} {hint} does not exist")
    if not path.is_dir():
        raise StorageError(f"nvm root {path} {hint} is not a directory")
    why = mkdir_as_us(path)
    if why is not None:
        raise StorageError(
            f"nvm root {path} {hint} is not writable by {osuser.current_user()}: {why}"
        )
    if mkdir_as_server is None and osuser.is_root():
        mkdir_as_server = _probe_mkdir_as_server
    if mkdir_as_server is not None:
        why = mkdir_as_server(path)
        if why is not None:
            raise StorageError(
                f"nvm root {path} {hint}: the server user {osuser.SERVER_USER} cannot create "
                f"its directory there ({why}); e.g. chown {osuser.SERVER_USER} {path} or "
                f"chmod 1777 {path}"
            )
    st = statvfs(str(path))
    free = st.f_bavail * st.f_frsize
    ours = user_root_subdir(path)
    if ours.is_dir():
        free += du_bytes(ours)
    if free < need_bytes:
        raise StorageError(
            f"nvm root {path} {hint} has {fmt_bytes(free)} free; {what} needs about "
            f"{fmt_bytes(need_bytes)}"
        )
    return path


def du_bytes(d: Path) -> int:
    """Bytes the files under ``d`` occupy (allocated blocks; 0 for what cannot be read)."""
    total = 0
    for root, _dirs, files in os.walk(d):
        for n in files:
            try:
                total += os.lstat(os.path.join(root, n)).st_blocks * 512
            except OSError:
                pass
    return total


def use_root_option(path: str | Path | None, need_bytes: int, what: str = "the job") -> Path | None:
    """What a job's command line does with ``--nvm-root``: the option (else
    ``$PGNVM_NVM_ROOT``) checked for ``need_bytes`` (:func:`check_root`) and exported for
    every process the job starts. None (nothing checked) when neither is given."""
    root = set_user_nvm_root(path) if path else user_nvm_root()
    if root is None:
        return None
    return check_root(root, need_bytes, what=what)


def add_root_argument(p: argparse.ArgumentParser, need: str = "") -> None:
    """A job's ``--nvm-root PATH`` option (see :func:`use_root_option`)."""
    p.add_argument(
        "--nvm-root",
        default=None,
        metavar="PATH",
        help="put the nvm configurations' data on this directory (e.g. a DAX file system on "
        "PMem or CXL memory) instead of the tmpfs pgnvm mounts; used as it is, never "
        f"mounted or emptied (pgnvm works in PATH/pgnvm-<home tag>){need}. Default: "
        f"${NVM_ROOT_ENV}, else the tmpfs",
    )


def default_nvm_root(huge: bool) -> Path:
    """The nvm storage root pgnvm would use, without mounting anything (a user-given root,
    :func:`user_nvm_root`, as it is)."""
    user = user_nvm_root()
    if user is not None:
        return user
    return default_tmpfs_root(huge)


def default_tmpfs_root(huge: bool) -> Path:
    """The tmpfs nvm root (or its fallback), without mounting anything."""
    if osuser.is_root():
        return NVM_HUGE_MOUNT if huge else NVM_MOUNT
    return fallback_nvm_root()


def ensure_nvm_root(huge: bool) -> Path:
    """Mount (as root, if not yet mounted) and return the nvm storage root; a user-given
    root is checked (:func:`check_root`, :data:`CLUSTER_MIN_BYTES`) and never mounted."""
    user = user_nvm_root()
    if user is not None:
        return check_root(user, CLUSTER_MIN_BYTES, what="a cluster")
    return ensure_tmpfs_root(huge)


def ensure_tmpfs_root(huge: bool) -> Path:
    """Mount (as root, if not yet mounted) and return the tmpfs nvm root (or its fallback)."""
    mnt = NVM_HUGE_MOUNT if huge else NVM_MOUNT
    if not osuser.is_root():
        root = fallback_nvm_root()
        ui.notice(
            f"not root: cannot mount a tmpfs at {mnt}; using {root} instead"
            + (" (huge pages NOT guaranteed)" if huge else "")
        )
        return root
    if huge and huge_shmem_denied():
        root = fallback_nvm_root()
        ui.notice(f"huge pages for tmpfs are unavailable on this kernel; using {root}")
        return root
    opts = mount_options(mnt)
    if opts is not None:
        if not opts.startswith("tmpfs"):
            raise StorageError(f"{mnt} is mounted but not a tmpfs ({opts})")
        if huge and "huge=always" not in opts:
            raise StorageError(f"{mnt} is mounted without huge=always ({opts}); umount it")
        return mnt
    size_mb = int(procfs.mem_total_bytes() * NVM_FRACTION) >> 20
    o = f"size={size_mb}m,mode=0755,huge={'always' if huge else 'never'}"
    err = mount_tmpfs(mnt, o, "pgnvm-nvm")
    if err is not None:
        root = fallback_nvm_root()
        ui.notice(f"mount -t tmpfs -o {o} at {mnt} failed ({err}); using {root}")
        return root
    ui.info(f"mounted tmpfs at {mnt} ({o})")
    return mnt


def root(storage: str, huge: bool = False, mount: bool = False) -> Path:
    """The storage root of ``storage`` (nvm: mounted first when ``mount``; a user-given root
    checked instead)."""
    if storage == "disk":
        return paths.disk_root()
    return ensure_nvm_root(huge) if mount else default_nvm_root(huge)


def user_root(path: Path, mount: bool = False) -> Path:
    """A cluster's own user-given nvm root (its spec's ``nvm_root``), checked when ``mount``
    (the moment it is about to be written to)."""
    return check_root(path, CLUSTER_MIN_BYTES, what="a cluster") if mount else path


def describe_nvm_root(huge: bool = False) -> rootkind.RootKind:
    """What this command's nvm root is (:mod:`bench.core.rootkind`): the user-given root,
    else the tmpfs pgnvm mounts (described as it will be when it is not mounted yet)."""
    p = default_nvm_root(huge)
    if user_nvm_root() is None and p in (NVM_MOUNT, NVM_HUGE_MOUNT) and not mount_options(p):
        planned = rootkind.Mount(
            str(p), "pgnvm-nvm", "tmpfs", (f"huge={'always' if huge else 'never'}",)
        )
        return rootkind.classify(str(p), planned)
    return rootkind.detect(p)


def root_lines(huge: bool = False, kind: rootkind.RootKind | None = None) -> list[str]:
    """``--list-configs``' lines about the nvm root (``kind``, else :func:`describe_nvm_root`):
    what it is, and its caveats."""
    k = kind or describe_nvm_root(huge)
    return [f"nvm root: {k.summary()}"] + [f"    caveat: {c}" for c in k.caveats()]
