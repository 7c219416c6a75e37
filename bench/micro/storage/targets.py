"""The targets' directories: the tmpfs with 4 KB pages and the one with 2 MB pages that
emulate persistent memory (mounted through :mod:`bench.core.storage`), and the disk
(``$PGNVM_HOME/disk``). Each run works in a directory of its own below the root
(``storagebench-<pid>``), removed at the end; a kind of file is removed after the last job
that uses it, so a target never holds more than one kind at once."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.core import osuser, paths, procfs, storage
from bench.micro.storage.plan import GiB, MiB


class TargetError(RuntimeError):
    """A target that cannot be used (said before anything runs)."""


@dataclass
class Target:
    name: str
    root: Path
    dir: Path
    fs: str  # "FSTYPE OPTIONS" of the file system holding dir
    drop_caches: bool  # disk, as root: sync + drop the page cache before every repetition
    note: str

    @property
    def tmpfs(self) -> bool:
        return self.fs.startswith("tmpfs")

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dir": str(self.dir),
            "fs": self.fs,
            "drop_caches": self.drop_caches,
            "note": self.note,
        }


def fs_of(path: Path) -> str:
    """``FSTYPE OPTIONS`` of the file system that holds ``path`` ("" if findmnt fails)."""
    r = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE,OPTIONS", "-T", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""


def _root(name: str) -> Path:
    if name == "disk":
        return paths.disk_root()
    return storage.ensure_nvm_root(huge=(name == "nvm-2m"))


def _remove_stale(root: Path) -> None:
    """Directories of earlier runs whose process is gone (a run that was killed)."""
    for d in root.glob("storagebench-*"):
        pid = d.name.removeprefix("storagebench-")
        if pid.isdigit() and not procfs.alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def resolve(name: str) -> Target:
    """Mount (nvm, as root) and make the run's directory of target ``name``; TargetError
    when the target is not what its name says (e.g. no tmpfs with huge=always)."""
    try:
        root = _root(name)
    except storage.StorageError as e:
        raise TargetError(f"target {name}: {e}") from None
    root.mkdir(parents=True, exist_ok=True)
    fs = fs_of(root)
    user = storage.user_nvm_root()
    if user is not None and name.startswith("nvm"):
        root = storage.user_root_subdir(user)
        osuser.ensure_dir(root)
        kind = storage.describe_nvm_root()
        _remove_stale(root)
        d = root / f"storagebench-{os.getpid()}"
        d.mkdir(parents=True, exist_ok=True)
        return Target(name, root, d, fs, False, f"user-given nvm root: {kind.summary()}")
    if name.startswith("nvm"):
        if not fs.startswith("tmpfs"):
            raise TargetError(f"target {name}: {root} is not a tmpfs ({fs or 'unknown'})")
        if name == "nvm-2m" and "huge=always" not in fs:
            raise TargetError(
                f"target {name}: no tmpfs with huge=always could be mounted (got {root}: {fs}); "
                "it needs root and transparent huge pages for shmem"
            )
    _remove_stale(root)
    d = root / f"storagebench-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=True)
    drop = name == "disk" and osuser.is_root()
    if name == "disk":
        note = (
            "the disk the OS runs from; page cache dropped before every repetition"
            if drop
            else "WARM: not root, the page cache cannot be dropped (cached reads)"
        )
    else:
        note = "tmpfs, 2 MB pages (huge=always)" if name == "nvm-2m" else "tmpfs, 4 KB pages"
    return Target(name, root, d, fs, drop, note)


def check_space(t: Target, need: int, pool: int) -> None:
    """TargetError unless the target's file system (and, for a tmpfs, the RAM) has room for
    ``need`` bytes of files beside a buffer pool of ``pool`` bytes."""
    st = os.statvfs(t.dir)
    free = st.f_bavail * st.f_frsize
    if need + 256 * MiB > free:
        raise TargetError(
            f"target {t.name} ({t.dir}): the files need {need / GiB:.1f} GiB, only "
            f"{free / GiB:.1f} GiB free (lower --file-size, --log-size or --threads)"
        )
    if t.tmpfs:
        avail = procfs.meminfo().get("MemAvailable", "0 kB").split()[0]
        ram = int(avail) * 1024 if avail.isdigit() else 0
        if ram and need + pool + GiB > ram:
            raise TargetError(
                f"target {t.name}: the files ({need / GiB:.1f} GiB, in RAM on a tmpfs) and the "
                f"buffer pool ({pool / GiB:.1f} GiB) need more than the {ram / GiB:.1f} GiB of "
                "RAM available (minus 1 GiB for the OS); lower --file-size or --threads"
            )


def remove_files(t: Target, kind: str) -> None:
    for f in t.dir.glob(f"sb-{kind}-*.dat"):
        f.unlink(missing_ok=True)


def cleanup(t: Target) -> None:
    shutil.rmtree(t.dir, ignore_errors=True)


def shmem_huge_bytes() -> int:
    """ShmemHugePages of /proc/meminfo: tmpfs memory in 2 MB pages right now."""
    v = procfs.meminfo().get("ShmemHugePages", "0 kB").split()[0]
    return int(v) * 1024 if v.isdigit() else 0
