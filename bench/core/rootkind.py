"""What an nvm storage root is: a tmpfs (persistent memory emulated in DRAM, 4 KB or huge
pages), a DAX file system (real PMem or CXL memory mapped without the page cache), or a
file system with a page cache (se1/se2 then read the page cache, not persistent memory).

Pure parsing and classification (:func:`parse_findmnt`, :func:`classify`: unit-tested on
``findmnt -J`` outputs) are kept apart from the probes of the machine (:func:`findmnt`,
:func:`probe_map_sync`, :func:`device_alignment`); :func:`detect` puts them together. The
facts:

* the mount (``findmnt -J -T PATH``, util-linux): file system type, source, options
  (tmpfs ``huge=``; ext4/xfs ``dax``, ``dax=always``, ``dax=inode``, ``dax=never``);
* whether a ``MAP_SYNC`` mapping of a small file there succeeds (``MAP_SHARED_VALIDATE |
  MAP_SYNC``: only a DAX file system grants it; what libpmem2 needs for cache-line
  persists without ``msync``);
* the store granularity libpmem2 would report: no tool of the build reports it without a
  server, so it is "unknown" here (the server logs it for ``pg_wal``: ``pgnvm_wal()``);
* 2 MB alignment of the mount's block device (its partition start; a whole device is
  aligned): 2 MB DAX faults need it, as they need a namespace created with ``--align 2M``.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TMPFS = "tmpfs"
DAX = "dax"
PAGE_CACHE = "page-cache"
UNKNOWN = "unknown"

MAP_SHARED_VALIDATE = 0x03
MAP_SYNC = 0x80000
TWO_MB = 2 << 20


@dataclass(frozen=True)
class Mount:
    """One file system of ``findmnt -J``."""

    target: str
    source: str
    fstype: str
    options: tuple[str, ...]

    def option(self, key: str) -> str | None:
        """The value of mount option ``key`` ("" for a bare flag), None when absent."""
        for o in self.options:
            k, sep, v = o.partition("=")
            if k == key:
                return v if sep else ""
        return None

    @property
    def bind_subdir(self) -> str | None:
        """The directory of the source file system a bind mount shows (``/dev/vda[/srv]``
        -> ``/srv``), None for a plain mount."""
        if self.source.endswith("]") and "[" in self.source:
            return self.source[self.source.index("[") + 1 : -1]
        return None

    @property
    def device(self) -> str:
        """The source without a bind mount's ``[/subdir]``."""
        return self.source.split("[", 1)[0]


def parse_findmnt(text: str) -> Mount:
    """The mount holding the path from ``findmnt -J -T PATH``'s output: the last entry
    (stacked mounts on one target are listed bottom to top; the last one is visible)."""
    doc = json.loads(text)
    fss = doc.get("filesystems") or []
    if not fss:
        raise ValueError("findmnt listed no file system")
    fs = fss[-1]
    return Mount(
        target=str(fs.get("target") or ""),
        source=str(fs.get("source") or ""),
        fstype=str(fs.get("fstype") or ""),
        options=tuple(o for o in str(fs.get("options") or "").split(",") if o),
    )


@dataclass(frozen=True)
class RootKind:
    """What a storage root is (see the module docstring); ``kind`` is one of
    :data:`TMPFS`, :data:`DAX`, :data:`PAGE_CACHE`, :data:`UNKNOWN`."""

    path: str
    kind: str
    mount: Mount | None
    pages: str = ""  # tmpfs: "4 KB pages" | "2 MB pages (huge=always)" | ...
    dax_option: str | None = None  # the mount's dax option as given ("dax", "dax=always")
    map_sync: bool | None = None
    map_sync_why: str = ""
    granularity: str = "unknown"
    aligned_2m: bool | None = None
    aligned_why: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def emulated(self) -> bool:
        return self.kind == TMPFS

    def summary(self) -> str:
        """One line: what the root is (and the notes, e.g. a bind mount's source)."""
        if self.kind == UNKNOWN:
            return self._summary()
        return self._summary() + "".join(f"; {n}" for n in self.notes)

    def _summary(self) -> str:
        m = self.mount
        where = f"{self.path}" + (
            f" ({m.fstype} {m.source} on {m.target})" if m is not None else ""
        )
        if self.kind == TMPFS:
            return f"{where}: tmpfs, persistent memory EMULATED in DRAM, {self.pages}"
        if self.kind == DAX:
            ms = {True: "MAP_SYNC ok", False: "MAP_SYNC refused", None: "MAP_SYNC not probed"}
            al = {True: "2 MB-aligned", False: "NOT 2 MB-aligned", None: "2 MB alignment unknown"}
            return (
                f"{where}: DAX file system ({self.dax_option}), {ms[self.map_sync]}, "
                f"libpmem2 granularity {self.granularity}, {al[self.aligned_2m]}"
            )
        if self.kind == PAGE_CACHE:
            return (
                f"{where}: file system with a page cache (no DAX): se1/se2 map and read the "
                "page cache (DRAM), not persistent memory"
            )
        return f"{where}: unknown ({'; '.join(self.notes) or 'findmnt gave nothing'})"

    def caveats(self) -> list[str]:
        """What the numbers measured on this root do not show (emulation caveats only
        for a tmpfs)."""
        if self.kind == TMPFS:
            return [
                "persistent memory emulated by a tmpfs (DRAM), not PMem: no PMem read "
                "latency, fdatasync/msync write nothing back, cache-line flushes land in DRAM"
            ]
        if self.kind == PAGE_CACHE:
            return [
                "the nvm root is not DAX: se1/se2 read the page cache, writes reach the device "
                "at msync/fsync; libpmem2 persists with msync (page granularity)"
            ]
        out = []
        if self.kind == DAX and self.map_sync is False:
            out.append(f"MAP_SYNC is refused on this DAX mount ({self.map_sync_why})")
        if self.kind == DAX and self.aligned_2m is False:
            out.append(f"the device is not 2 MB-aligned ({self.aligned_why}): 4 KB DAX faults")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "fstype": self.mount.fstype if self.mount else None,
            "source": self.mount.source if self.mount else None,
            "mount_point": self.mount.target if self.mount else None,
            "options": ",".join(self.mount.options) if self.mount else None,
            "pages": self.pages or None,
            "dax_option": self.dax_option,
            "map_sync": self.map_sync,
            "map_sync_why": self.map_sync_why or None,
            "pmem2_granularity": self.granularity,
            "aligned_2m": self.aligned_2m,
            "notes": list(self.notes),
            "summary": self.summary(),
            "caveats": self.caveats(),
        }


def _tmpfs_pages(m: Mount) -> str:
    huge = m.option("huge")
    if huge in (None, "", "never", "deny"):
        return "4 KB pages"
    if huge == "always":
        return "2 MB pages (huge=always)"
    return f"4 KB or 2 MB pages (huge={huge})"


def dax_option(m: Mount) -> str | None:
    """The mount's DAX option as given, None when it has none (or ``dax=never``)."""
    v = m.option("dax")
    if v is None or v == "never":
        return None
    return "dax" if v == "" else f"dax={v}"


def classify(
    path: str,
    mount: Mount | None,
    map_sync: bool | None = None,
    map_sync_why: str = "",
    granularity: str = "unknown",
    aligned: tuple[bool | None, str] = (None, ""),
) -> RootKind:
    """What the root at ``path`` is, from its mount and the probes' answers (pure)."""
    if mount is None:
        return RootKind(path, UNKNOWN, None, notes=("no mount found (findmnt)",))
    notes: list[str] = []
    if mount.bind_subdir is not None:
        notes.append(f"bind mount of {mount.bind_subdir} of {mount.device}")
    if mount.fstype == "tmpfs":
        return RootKind(path, TMPFS, mount, pages=_tmpfs_pages(mount), notes=tuple(notes))
    dax = dax_option(mount)
    if dax == "dax=inode" and map_sync is not True:
        notes.append("dax=inode: DAX only for files and directories with the dax attribute")
        dax = None
    if dax is None and map_sync is True:
        dax = "DAX without a dax mount option"
    if dax is None:
        return RootKind(
            path,
            PAGE_CACHE,
            mount,
            map_sync=map_sync,
            map_sync_why=map_sync_why,
            notes=tuple(notes),
        )
    return RootKind(
        path,
        DAX,
        mount,
        dax_option=dax,
        map_sync=map_sync,
        map_sync_why=map_sync_why,
        granularity=granularity,
        aligned_2m=aligned[0],
        aligned_why=aligned[1],
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- probes


def findmnt(path: Path) -> Mount | None:
    """The mount holding ``path`` (``findmnt -J -T``), None if findmnt fails."""
    try:
        r = subprocess.run(
            ["findmnt", "-J", "-T", str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    try:
        return parse_findmnt(r.stdout)
    except (ValueError, KeyError, TypeError):
        return None


def probe_map_sync(directory: Path) -> tuple[bool | None, str]:
    """Map a small file in ``directory`` with ``MAP_SHARED_VALIDATE | MAP_SYNC``: (True,
    "") when the kernel grants it (a DAX file system), (False, why) when it refuses, (None,
    why) when the probe could not run (no file could be made there)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".pgnvm-mapsync-", dir=directory)
    except OSError as e:
        return None, f"cannot create a file there: {e.strerror or e}"
    try:
        os.ftruncate(fd, mmap.PAGESIZE)
        try:
            m = mmap.mmap(
                fd,
                mmap.PAGESIZE,
                flags=MAP_SHARED_VALIDATE | MAP_SYNC,
                prot=mmap.PROT_READ | mmap.PROT_WRITE,
            )
        except OSError as e:
            if e.errno == errno.EOPNOTSUPP:
                return False, "EOPNOTSUPP: the file system does not map without a page cache"
            return False, f"{errno.errorcode.get(e.errno or 0, e.errno)}: {e.strerror}"
        m.close()
        return True, ""
    finally:
        os.close(fd)
        os.unlink(name)


def device_alignment(source: str, sys_root: Path = Path("/sys")) -> tuple[bool | None, str]:
    """Whether the block device ``source`` (``/dev/pmem0p1``) starts on a 2 MB boundary:
    a partition's ``start`` sector (x 512) modulo 2 MB; a whole device is aligned. (None,
    why) when ``source`` is not a block device we can look up."""
    if not source.startswith("/dev/"):
        return None, f"{source or 'no source'} is not a block device"
    name = Path(os.path.realpath(source)).name
    d = sys_root / "class" / "block" / name
    if not d.exists():
        return None, f"{name} not in {sys_root}/class/block"
    start = d / "start"
    if not start.exists():
        return True, f"{name} is a whole device"
    try:
        sectors = int(start.read_text().strip())
    except (OSError, ValueError) as e:
        return None, f"cannot read {start}: {e}"
    off = sectors * 512
    return off % TWO_MB == 0, f"{name} starts at byte {off}"


def detect(path: Path) -> RootKind:
    """What the root ``path`` is: findmnt, then the MAP_SYNC probe and (DAX) the device's
    alignment."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # not made yet (e.g. /dev/shm/pgnvm-<user>): its parent's
    m = findmnt(existing)
    if m is None:
        return classify(str(path), None)
    ms, why = (None, "") if m.fstype == "tmpfs" else probe_map_sync(existing)
    aligned = device_alignment(m.device) if dax_option(m) or ms else (None, "")
    return classify(str(path), m, ms, why, "unknown", aligned)


def report_text(env: dict[str, Any]) -> str | None:
    """The report header's sentence about the nvm root from a job's ``env.json``
    (:func:`RootKind.to_json` under ``nvm_root``): what it is and its caveats; None for
    runs recorded before roots were described."""
    root = env.get("nvm_root")
    if not isinstance(root, dict) or not root.get("summary"):
        return None
    caveats = " ".join(f"{c[0].upper()}{c[1:]}." for c in root.get("caveats") or [])
    return f"**nvm root:** {root['summary']}." + (f" {caveats}" if caveats else "")


def emulated(env: dict[str, Any]) -> bool:
    """Whether a run's nvm root was a tmpfs (runs recorded before roots were described
    always were)."""
    root = env.get("nvm_root")
    return not isinstance(root, dict) or root.get("kind") in (None, TMPFS)
