"""TPC-H data files: generated with ``tpchgen-cli`` (PyPI), cached per scale factor.

``$PGNVM_HOME/tpch/data/sf<SF>/<table>.csv`` (CSV with a header line, as ``tpchgen-cli csv``
writes it) plus ``manifest.json``: generator version, per file its size, row count and
SHA-256, and a hash over all of them (:attr:`Manifest.digest`) that goes into the load
checksum of every database loaded from these files. A directory is reused when its manifest
matches the files' sizes; generation writes into a temporary directory renamed into place,
so an interrupted generation leaves nothing half-done behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core import osuser, paths, ui

TABLES: tuple[str, ...] = (
    "region",
    "nation",
    "supplier",
    "customer",
    "part",
    "partsupp",
    "orders",
    "lineitem",
)
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


def fmt_sf(sf: float) -> str:
    """1.0 -> '1', 0.01 -> '0.01', 10 -> '10'."""
    text = repr(float(sf))
    return text[:-2] if text.endswith(".0") else text


def tpch_home() -> Path:
    return paths.pgnvm_home() / "tpch"


def data_dir(sf: float) -> Path:
    return tpch_home() / "data" / f"sf{fmt_sf(sf)}"


def tpchgen_binary() -> str:
    """The tpchgen-cli of this venv (next to the interpreter), else the one on PATH."""
    cand = Path(sys.executable).parent / "tpchgen-cli"
    if cand.is_file() and os.access(cand, os.X_OK):
        return str(cand)
    found = shutil.which("tpchgen-cli")
    if found:
        return found
    raise RuntimeError(
        "tpchgen-cli not found: it is pinned in requirements.txt, run ./pgnvm "
        "(which installs the venv) or pip install tpchgen-cli"
    )


def tpchgen_version(binary: str) -> str:
    r = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return (r.stdout or r.stderr).strip() or "unknown"


@dataclass
class FileInfo:
    file: str
    bytes: int
    rows: int
    sha256: str


@dataclass
class Manifest:
    sf: float
    generator: str
    files: dict[str, FileInfo]

    @property
    def digest(self) -> str:
        """Hash of the generator and every file's hash and row count."""
        h = hashlib.sha256()
        h.update(f"v{MANIFEST_VERSION} {self.generator} sf={fmt_sf(self.sf)}\n".encode())
        for t in TABLES:
            fi = self.files[t]
            h.update(f"{t} {fi.rows} {fi.bytes} {fi.sha256}\n".encode())
        return h.hexdigest()

    def rows(self) -> dict[str, int]:
        return {t: self.files[t].rows for t in TABLES}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MANIFEST_VERSION,
            "sf": self.sf,
            "generator": self.generator,
            "files": {t: vars(fi) for t, fi in self.files.items()},
            "digest": self.digest,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Manifest:
        if doc.get("version") != MANIFEST_VERSION:
            raise ValueError("manifest version mismatch")
        files = {t: FileInfo(**doc["files"][t]) for t in TABLES}
        return cls(float(doc["sf"]), str(doc["generator"]), files)


def hash_file(path: Path) -> tuple[str, int, int]:
    """(sha256, bytes, data rows = lines - 1 header line) of a CSV file."""
    h = hashlib.sha256()
    size = 0
    lines = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    return h.hexdigest(), size, max(0, lines - 1)


def load_manifest(d: Path) -> Manifest | None:
    """The manifest of ``d`` if it exists and matches the files' sizes, else None."""
    try:
        m = Manifest.from_json(json.loads((d / MANIFEST).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for fi in m.files.values():
        try:
            if (d / fi.file).stat().st_size != fi.bytes:
                return None
        except OSError:
            return None
    return m


def ensure_data(sf: float) -> tuple[Path, Manifest]:
    """Generate (if not cached) the CSV files of scale factor ``sf``."""
    d = data_dir(sf)
    m = load_manifest(d)
    if m is not None and abs(m.sf - sf) < 1e-12:
        return d, m
    binary = tpchgen_binary()
    version = tpchgen_version(binary)
    osuser.ensure_dir(d.parent)
    tmp = d.parent / f".{d.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    os.chmod(tmp, 0o755)
    t0 = time.monotonic()
    ui.step(f"generating TPC-H data, scale factor {fmt_sf(sf)} ({version}) into {d}")
    try:
        r = subprocess.run(
            [
                binary,
                "csv",
                "-s",
                fmt_sf(sf),
                "-o",
                str(tmp),
                "-q",
                "--no-progress",
                "-n",
                str(max(1, os.cpu_count() or 1)),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise RuntimeError(f"tpchgen-cli failed (exit {r.returncode}): {r.stderr.strip()}")
        files: dict[str, FileInfo] = {}
        for t in TABLES:
            p = tmp / f"{t}.csv"
            if not p.is_file():
                raise RuntimeError(f"tpchgen-cli wrote no {p.name}")
            os.chmod(p, 0o644)
            digest, size, rows = hash_file(p)
            files[t] = FileInfo(p.name, size, rows, digest)
        m = Manifest(sf, version, files)
        (tmp / MANIFEST).write_text(json.dumps(m.to_json(), indent=2) + "\n")
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp, d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = sum(fi.bytes for fi in m.files.values())
    ui.info(f"   generated {total / 1e6:.0f} MB in {ui.fmt_seconds(time.monotonic() - t0)}")
    return d, m
