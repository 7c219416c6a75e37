"""Storage roots: where the data directories of clusters live.

* ``nvm``: a tmpfs mounted by pgnvm (as root) at ``/mnt/pgnvm/nvm`` (4 KiB pages) or
  ``/mnt/pgnvm/nvm-huge`` (``huge=always``), sized at 75% of RAM; it emulates persistent
  memory. When it cannot be mounted (not root, or huge pages unavailable) the fallback is
  ``/dev/shm/pgnvm-<user>``, with a notice. The tmpfs is shared by every PGNVM_HOME; each
  home keeps its data directories under its own ``paths.home_tag()`` there.
* ``disk``: ``$PGNVM_HOME/disk``.

:func:`mount_tmpfs` is also what other tmpfs users mount with (``./pgnvm micro prefetch``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.core import osuser, paths, procfs, ui

STORAGES: tuple[str, ...] = ("nvm", "disk")
NVM_MOUNT = Path("/mnt/pgnvm/nvm")
NVM_HUGE_MOUNT = Path("/mnt/pgnvm/nvm-huge")
NVM_FRACTION = 0.75  # tmpfs size as a fraction of RAM


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


def default_nvm_root(huge: bool) -> Path:
    """The nvm storage root pgnvm would use, without mounting anything."""
    if osuser.is_root():
        return NVM_HUGE_MOUNT if huge else NVM_MOUNT
    return fallback_nvm_root()


def ensure_nvm_root(huge: bool) -> Path:
    """Mount (as root, if not yet mounted) and return the nvm storage root."""
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
    """The storage root of ``storage`` (nvm: mounted first when ``mount``)."""
    if storage == "disk":
        return paths.disk_root()
    return ensure_nvm_root(huge) if mount else default_nvm_root(huge)
