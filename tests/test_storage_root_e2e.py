"""End to end: every job on an nvm root given by path (``--nvm-root``), a tmpfs this test
mounts itself at ``/mnt/pgnvm-root-test`` (as root; unmounted afterwards) standing in for a
DAX file system.

Each job runs small (a few seconds): ``tpch`` (SF 0.01, Q6, nvm_base_worker and nvm_se2),
``oltp`` (2,000 records, YCSB-A, 1 client, 1 s), ``micro storage`` (``--quick``, the
smallest sizes), ``micro scan`` (16 MB table), ``cluster`` (init, start, psql, status, stop,
destroy) and ``test`` (nvm_se2 through pgnvm_ext). For each: its data directory was under
``<root>/pgnvm-<home tag>/`` (the job's JSON or a listing), its report or output says the
root is that tmpfs given by path, its answers are right (TPC-H's agree across
configurations, OLTP's rows are all there and sound, the scan counts the table's rows), and
nothing is left on the root but our own subdirectory, with nothing left in it where the job
(or ``cluster destroy``) cleans up. Then the refusals: ``tpch --sf 1`` (about 4 GB) and
``test`` with tap_recovery (2.5 GB) on the 2 GB root name the free space and the need; a
root the server user cannot write to is refused by every job with the reason, before
anything runs. A refusal that does not come within a minute fails the test and stops the
job (its process group; servers it left on the root are killed before the unmount).

The jobs run with a PGNVM_HOME of their own (:func:`home`: links to this one's builds,
venv, password and caches), so their clusters (``micro scan``'s and ``test``'s have fixed
names), the test run's lock and their subdirectory on the root are theirs: the ``./pgnvm
test`` here runs inside the ``./pgnvm test`` whose pytest check runs this file, which holds
the lock of the real home. Ports 5536-5539 and 5590 on.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.core import cluster, osuser, paths, storage
from bench.core.server import Server
from bench.oltp import targets as oltp_targets
from bench.tpch import runner

MNT = Path("/mnt/pgnvm-root-test")
PREFIX = "roottest"
TPCH_PORT, OLTP_PORT, SCAN_PORT, CLUSTER_PORT = 5536, 5537, 5538, 5539
TEST_PORT_BASE = 5590
CLUSTER = "roottest-cluster"
RECORDS = 2000
#: seconds a refusal may take (it comes before anything runs)
REFUSAL_TIMEOUT = 60
#: what the jobs' home shares with the real one (links): builds, venv, password, caches
SHARED = ("install", "build", "src", "venv", "secrets", "storagebench", "tpch")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root"
)


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
        _kill_servers_on(MNT)
        subprocess.run(["umount", str(MNT)], check=False)
        with contextlib.suppress(OSError):
            MNT.rmdir()


def _kill_servers_on(root: Path) -> None:
    """Server processes a job that failed left on the root (e.g. a TAP suite's, which an
    interrupted ./pgnvm test does not stop): killed, so that the root can be unmounted."""
    for _ in range(20):
        pids = cluster.datadir_processes(root)  # every postgres whose cwd is below the root
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)


@contextlib.contextmanager
def _in_home(home: Path) -> Iterator[None]:
    """This process on the jobs' PGNVM_HOME for the block (their clusters, their tag)."""
    old = os.environ.get("PGNVM_HOME")
    os.environ["PGNVM_HOME"] = str(home)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PGNVM_HOME", None)
        else:
            os.environ["PGNVM_HOME"] = old


@pytest.fixture(scope="module")
def home(root: Path) -> Iterator[Path]:
    """The jobs' PGNVM_HOME (see the module docstring), under the real one (the server user
    reaches it); its clusters destroyed before the root is unmounted."""
    real = paths.pgnvm_home()
    if not (real / "install" / "release" / "bin" / "postgres").is_file():
        pytest.skip("no release build installed")
    h = real / "roottest-home"
    shutil.rmtree(h, ignore_errors=True)
    h.mkdir(parents=True)
    for name in SHARED:
        if (real / name).exists():
            (h / name).symlink_to(real / name)
    try:
        yield h
    finally:
        with _in_home(h):
            for c in cluster.Cluster.all():
                with contextlib.suppress(Exception):
                    c.destroy()
        shutil.rmtree(h, ignore_errors=True)


def _pgnvm(  # type: ignore[no-untyped-def]
    home: Path, *args: str, env_extra: dict[str, str] | None = None, timeout: float = 300
):
    """``./pgnvm ARGS`` in the jobs' home (``timeout``: a refusal comes at once; a job that
    ignored it is cut short)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(paths.REPO_ROOT)
    env["PGNVM_HOME"] = str(home)
    env[runner.PREFIX_ENV] = PREFIX
    env["PGNVM_OLTP_CLUSTER_PREFIX"] = PREFIX
    env["PGNVM_TEST_PORT_BASE"] = str(TEST_PORT_BASE)
    env.pop(storage.NVM_ROOT_ENV, None)
    env.pop(runner.PERTURB_ENV, None)
    env.update(env_extra or {})
    p = subprocess.Popen(
        [sys.executable, "-m", "bench", *args],
        cwd=paths.REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its process group: the lanes of a test run too
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)  # the job stops the servers it started
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        pytest.fail(f"./pgnvm {' '.join(args)}: still running after {timeout:.0f} s\n{out}{err}")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def _ours(root: Path, home: Path) -> Path:
    """Our own subdirectory on the root: ``pgnvm-<the jobs' home tag>``."""
    with _in_home(home):
        return storage.user_root_subdir(root)


def _names(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


@contextlib.contextmanager
def _leaves_nothing(root: Path, home: Path) -> Iterator[Path]:
    """After the block (a job and its clean-up): nothing new on the root but our own
    subdirectory, nothing new in that one. Yields that subdirectory."""
    ours = _ours(root, home)
    on_root, in_ours = _names(root), _names(ours)
    yield ours
    assert _names(root) <= on_root | {ours.name}, _names(root)
    assert _names(ours) == in_ours, _names(ours)


def _said(text: str, root: Path) -> None:
    """The output or report calls the root what it is: the tmpfs given by path (not the
    tmpfs pgnvm mounts), persistent memory emulated."""
    assert f"{root} (tmpfs pgnvm-root-test on {root}): tmpfs, persistent memory EMULATED" in text


def _root_doc(doc: dict[str, Any], root: Path) -> None:
    """A job's JSON about the root (``nvm_root``): this tmpfs, given by path."""
    assert (doc["path"], doc["kind"], doc["mount_point"]) == (str(root), "tmpfs", str(root))
    _said(doc["summary"], root)


def _job_on_root(
    home: Path,
    root: Path,
    out: Path,
    *args: str,
    report: str = "report.md",
    cluster_name: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``./pgnvm ARGS --nvm-root ROOT --out OUT``, passed; its ``env.json`` and its report
    say what the root is; with ``cluster_name``, its data directory was that cluster's in
    our subdirectory of the root (``env.json``'s ``datadirs``). Returns the ``env.json`` and
    the runs (``runs.jsonl``)."""
    _ok(_pgnvm(home, *args, "--nvm-root", str(root), "--out", str(out)))
    env = json.loads((out / "env.json").read_text())
    _root_doc(env["nvm_root"], root)
    _said((out / report).read_text(), root)
    if cluster_name is not None:
        assert env["datadirs"] == {"nvm": str(_ours(root, home) / cluster_name / "data")}
    return env, _jsonl(out / "runs.jsonl")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


#: a job that needs more than the 2 GB root holds, and what it says it needs
TOO_BIG: dict[str, tuple[list[str], str]] = {
    "tpch": (
        ["tpch", "--sf", "1", "--configs", "nvm_se2", "--queries", "6", "--repeat", "1"],
        "TPC-H SF 1 needs about 4.0 GiB",
    ),
    "test": (  # tap_recovery's scratch included
        ["test", "--configs", "nvm_se2", "--only", "regress,tap_recovery"],
        "./pgnvm test needs about 2.5 GiB",
    ),
}


@pytest.mark.parametrize("job", list(TOO_BIG))
def test_refused_without_space(root: Path, home: Path, tmp_path: Path, job: str) -> None:
    """Refused before anything runs (the test run: before its lock), naming the free space
    (statvfs of the mount) and the need; no cluster made."""
    args, need = TOO_BIG[job]
    out = ["--out", str(tmp_path / "out")] if job == "tpch" else []
    with _leaves_nothing(root, home):
        with _in_home(home):
            clusters = {c.spec.name for c in cluster.Cluster.all()}
        r = _pgnvm(
            home, *args, *out, "--nvm-root", str(root), "--no-build", timeout=REFUSAL_TIMEOUT
        )
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"nvm root {root}" in r.stderr and need in r.stderr, r.stderr
        with _in_home(home):
            assert {c.spec.name for c in cluster.Cluster.all()} == clusters


def test_tpch_on_root(root: Path, home: Path, tmp_path: Path) -> None:
    out, name = tmp_path / "tpch", f"{PREFIX}-sf0.01-nvm"
    with _leaves_nothing(root, home) as ours:
        _, runs = _job_on_root(
            home,
            root,
            out,
            *("tpch", "--sf", "0.01", "--queries", "6", "--repeat", "1"),
            *("--configs", "nvm_base_worker,nvm_se2", "--port", str(TPCH_PORT)),
            *("--timeout", "120", "--no-build", "--no-perf", "--no-explain"),
            cluster_name=name,
        )
        assert (ours / name / "data" / "PG_VERSION").is_file()  # kept for the next run
        assert "Correctness: OK" in (out / "report.md").read_text()
        assert {(x["config"], x["status"]) for x in runs} == {
            ("nvm_base_worker", "ok"),
            ("nvm_se2", "ok"),
        }
        assert len({x["answer"] for x in runs}) == 1  # the same answer from both engines
        _ok(_pgnvm(home, "cluster", "destroy", "--name", name))


def test_oltp_on_root(root: Path, home: Path, tmp_path: Path) -> None:
    out, name = tmp_path / "oltp", oltp_targets.cluster_name(PREFIX, RECORDS, "nvm")
    with _leaves_nothing(root, home):
        _, runs = _job_on_root(
            home,
            root,
            out,
            *("oltp", "--records", str(RECORDS), "--workloads", "a", "--clients", "1"),
            *("--duration", "1", "--warmup", "0", "--memory-ratios", "none"),
            *("--configs", "nvm_se2", "--port", str(OLTP_PORT), "--no-build"),
            cluster_name=name,
        )
        assert [(x["config"], x["status"]) for x in runs] == [("nvm_se2", "ok")]
        assert runs[0]["transactions"] > 0 and runs[0]["failed"] == 0
        with _in_home(home):
            srv = Server(cluster.Cluster.load(name), dbname=oltp_targets.DBNAME)
            srv.start()
            try:
                with srv.connect() as conn:  # every row still there, the heap sound
                    row = conn.execute("select count(*) from usertable").fetchone()
                    assert row is not None and row[0] == RECORDS
                    conn.execute("create extension if not exists amcheck")
                    bad = conn.execute("select * from verify_heapam('usertable')").fetchall()
                    assert bad == []
            finally:
                srv.stop()
            cluster.Cluster.load(name).destroy()


def test_micro_storage_on_root(root: Path, home: Path, tmp_path: Path) -> None:
    out = tmp_path / "storage"
    with _leaves_nothing(root, home) as ours:  # the job removes its run directory
        env, runs = _job_on_root(
            home,
            root,
            out,
            *("micro", "storage", "--targets", "nvm-4k", "--threads", "1", "--quick"),
            *("--no-fio", "--page-sizes", "4k", "--bufman-page-sizes", "4k"),
            *("--write-ratios", "80", "--entry-sizes", "128"),
        )
        d = Path(env["targets"]["nvm-4k"]["dir"])
        assert d.parent == ours and d.name.startswith("storagebench-"), d
        assert runs, out
        for x in runs:  # storagebench ran in that directory, and without an error
            assert x["job"]["target"] == "nvm-4k" and f"--dir {d} " in x["command"], x["label"]
            assert "error" not in x["doc"], (x["label"], x["doc"]["error"])


def test_micro_scan_on_root(root: Path, home: Path, tmp_path: Path) -> None:
    """Its cluster (a fixed name) saved earlier on the default tmpfs is initialised again on
    the root asked for, not reused."""
    out, name = tmp_path / "scan", "micro-scan-4k"
    with _in_home(home):
        spec = cluster.ClusterSpec(name=name, port=SCAN_PORT, nvm_root=None)
        cluster.Cluster(spec).save()  # state only: its data directory was never made
    with _leaves_nothing(root, home) as ours:
        _, ran = _job_on_root(
            home,
            root,
            out,
            *("micro", "scan", "--configs", "nvm_se2", "--pages", "4k"),
            *("--shared-buffers", "16MB", "--table-factor", "1", "--lookups", "1000"),
            *("--repeat", "1", "--port", str(SCAN_PORT), "--no-build"),
            report="summary.md",
        )
        with _in_home(home):
            c = cluster.Cluster.load(name)
            assert (c.spec.nvm_root, c.datadir) == (str(root), ours / name / "data")
            assert (c.datadir / "PG_VERSION").is_file()
        runs = {x["workload"]: x for x in ran}
        assert runs["seqscan"]["result"][0] == str(16 * storage.MiB // 260)  # the table's rows
        assert runs["index"]["result"][0] == "1000"  # one row per lookup
        _ok(_pgnvm(home, "cluster", "destroy", "--name", name))


def test_cluster_on_root(root: Path, home: Path) -> None:
    with _leaves_nothing(root, home) as ours:
        _ok(
            _pgnvm(
                home,
                *("cluster", "init", "--name", CLUSTER, "--engine", "se2"),
                *("--nvm-root", str(root), "--port", str(CLUSTER_PORT), "--no-build"),
            )
        )
        try:
            _ok(_pgnvm(home, "cluster", "start", "--name", CLUSTER, "--no-build"))
            r = _pgnvm(
                home,
                *("cluster", "psql", "--name", CLUSTER, "-At", "-c", "SHOW data_directory"),
                *("-c", "SHOW nvm_storage_engine"),
                *("-c", "SELECT sum(g) FROM generate_series(1, 100) g"),
            )
            _ok(r)
            assert r.stdout.split() == [str(ours / CLUSTER / "data"), "se2", "5050"], r.stdout
            status = _ok(_pgnvm(home, "cluster", "status", "--name", CLUSTER))
            assert f"on the user-given root {root}" in status
            _said(status, root)
            _ok(_pgnvm(home, "cluster", "stop", "--name", CLUSTER))
        finally:
            _ok(_pgnvm(home, "cluster", "destroy", "--name", CLUSTER))


def test_test_job_on_root(root: Path, home: Path) -> None:
    with _leaves_nothing(root, home) as ours:  # the run destroys its clusters
        said = _ok(
            _pgnvm(
                home,
                *("test", "--configs", "nvm_se2", "--only", "pgnvm_ext"),
                *("--nvm-root", str(root), "--jobs", "1", "--no-build"),
            )
        )
        m = re.search(r"summary (\S+\.json)", said)
        assert m, said
        summary = Path(m.group(1))  # in the repository's results/: read, then removed
        doc = json.loads(summary.read_text())
        summary.unlink()
        shutil.rmtree(summary.with_suffix(""), ignore_errors=True)
        _said(said, root)
        _root_doc(doc["nvm_root"], root)
        assert (doc["passed"], doc["failed"]) == (2, 0), doc["checks"]
        setup = next(c for c in doc["checks"] if c["check"] == "setup")
        assert f"data directory {ours / 'pgnvm-test-nvm_se2' / 'data'}" in setup["detail"]


#: each job's command line on a root (appended: --nvm-root, or the variable in the last)
REFUSED: dict[str, list[str]] = {
    "tpch": ["tpch", "--sf", "0.01", "--configs", "nvm_se2", "--no-build"],
    "oltp": ["oltp", "--records", "1000", "--configs", "nvm_se2", "--no-build"],
    "micro scan": ["micro", "scan", "--configs", "nvm_se2", "--no-build"],
    "micro storage": ["micro", "storage", "--quick", "--no-fio"],
    "cluster": ["cluster", "init", "--name", CLUSTER, "--engine", "se2", "--no-build"],
    "machine": ["machine"],
    "test": ["test", "--configs", "nvm_se2", "--only", "pgnvm_ext", "--no-build"],
    "test (PGNVM_NVM_ROOT)": ["test", "--configs", "nvm_se2", "--only", "pgnvm_ext", "--no-build"],
}


@pytest.mark.parametrize("job", list(REFUSED))
def test_refused_where_the_server_cannot_write(root: Path, home: Path, job: str) -> None:
    """A root the server user may not create its directory in (root's, mode 0755) is
    refused with the reason before anything runs: nothing made there, no cluster."""
    ro = root / f"not-for-{osuser.SERVER_USER}"
    ro.mkdir(mode=0o755)
    try:
        with _in_home(home):
            clusters = {c.spec.name for c in cluster.Cluster.all()}
        if job.endswith("(PGNVM_NVM_ROOT)"):
            env = {storage.NVM_ROOT_ENV: str(ro)}
            r = _pgnvm(home, *REFUSED[job], env_extra=env, timeout=REFUSAL_TIMEOUT)
        else:
            r = _pgnvm(home, *REFUSED[job], "--nvm-root", str(ro), timeout=REFUSAL_TIMEOUT)
        assert r.returncode == 1, r.stdout + r.stderr
        assert (
            f"nvm root {ro} (--nvm-root / {storage.NVM_ROOT_ENV}): the server user "
            f"{osuser.SERVER_USER} cannot create its directory there"
        ) in r.stderr, r.stderr
        assert _names(ro) == set()
        with _in_home(home):
            assert {c.spec.name for c in cluster.Cluster.all()} == clusters
    finally:
        ro.rmdir()
