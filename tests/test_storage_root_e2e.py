"""End to end: a job on an nvm root given by path (``--nvm-root``), a tmpfs this test mounts
itself at ``/mnt/pgnvm-root-test`` (as root; unmounted afterwards) standing in for a DAX
file system: ``./pgnvm tpch --sf 1`` (about 4 GB) on the 2 GB root is refused before
anything runs, naming the free space (statvfs of the real mount) and the need, and leaves
nothing on the root.

Clusters of their own (prefix ``roottest``, ports 5536-5539), destroyed at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core import cluster, paths, storage
from bench.tpch import runner

MNT = Path("/mnt/pgnvm-root-test")
PREFIX = "roottest"
TPCH_PORT = 5536
CLUSTER = "roottest-cluster"
CLUSTER_PORT = 5539

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root"
)


def _names() -> list[str]:
    return [CLUSTER, f"{PREFIX}-sf0.01-nvm", f"{PREFIX}-sf0.01-disk", f"{PREFIX}-sf1-nvm"]


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    MNT.mkdir(parents=True, exist_ok=True)
    if storage.mount_options(MNT) is None:
        err = storage.mount_tmpfs(MNT, "size=2g,mode=1777", "pgnvm-root-test")
        if err is not None:
            pytest.skip(f"cannot mount a tmpfs at {MNT}: {err}")
    try:
        yield MNT
    finally:
        for n in _names():
            if cluster.Cluster.exists(n):
                cluster.Cluster.load(n).destroy()
        subprocess.run(["umount", str(MNT)], check=False)
        try:
            MNT.rmdir()
        except OSError:
            pass


def _pgnvm(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(paths.REPO_ROOT)
    env[runner.PREFIX_ENV] = PREFIX
    env.pop(storage.NVM_ROOT_ENV, None)
    env.pop(runner.PERTURB_ENV, None)
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=paths.REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )


def _ours(root: Path) -> Path:
    return root / f"pgnvm-{paths.home_tag()}"


def test_tpch_refused_without_space(root: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in root.iterdir())
    r = _pgnvm("tpch", "--sf", "1", "--configs", "nvm_se2", "--nvm-root", str(root), "--no-build")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"nvm root {root}" in r.stderr and "TPC-H SF 1 needs about 4.0 GiB" in r.stderr
    assert sorted(p.name for p in root.iterdir()) == before
    assert not cluster.Cluster.exists(f"{PREFIX}-sf1-nvm")
