"""Per-run and per-configuration state shared by the checks."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.core import cluster as clu
from bench.core import configs, osuser, paths, ui
from bench.core.configs import AVAILABLE, Config, Verdict
from bench.core.server import Server
from bench.testsuite import errmatch, proc, proctasks
from bench.testsuite.model import CheckFailed
from bench.testsuite.settings import BASE_SETTINGS, FLAVOUR

#: the first port of the test clusters; ``$PGNVM_TEST_PORT_BASE`` moves it (a run inside
#: another, e.g. tests/test_storage_root_e2e.py under ./pgnvm test, keeps off its ports)
PORT_BASE = int(os.environ.get("PGNVM_TEST_PORT_BASE") or 5471)
NAME_PREFIX = "pgnvm-test-"
STATEMENT_TIMEOUT_MS = 300_000


@dataclass
class RunState:
    """State of one ``./pgnvm test`` run, shared by all configurations."""

    stamp: str
    results_dir: Path  # repo/results/test-<stamp>/ (artifacts kept for the user)
    work_root: Path  # PGNVM_HOME/test/<stamp>/ (owned by the server user)
    keep: bool
    seed: int
    tree: Path  # PostgreSQL build tree of the check flavour
    references: dict[str, Any] = field(default_factory=dict)  # values recorded by base
    reference_file: Path | None = None  # results/test-reference.json (base values of the last run)

    reference_in_run: bool = False  # the reference configuration is one of this run's

    def load_reference(self, key: str) -> tuple[Any, str] | None:
        """A value recorded by base in this run, else the one cached by an earlier run.
        Configurations may run in other processes than base's (lanes): base's values of
        this run reach them through the file, marked with this run's stamp."""
        if key in self.references:
            return self.references[key], "this run"
        if self.reference_file and self.reference_file.is_file():
            with contextlib.suppress(ValueError, OSError):
                doc = json.loads(self.reference_file.read_text())
                if key in doc:
                    stamp = doc[key]["stamp"]
                    where = "this run" if stamp == self.stamp else f"cached base run {stamp}"
                    return doc[key]["value"], where
        return None

    def store_reference(self, key: str, value: Any) -> None:
        self.references[key] = value
        if self.reference_file is None:
            return
        self.reference_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.reference_file.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            doc: dict[str, Any] = {}
            with contextlib.suppress(ValueError, OSError):
                doc = json.loads(self.reference_file.read_text())
            doc[key] = {"stamp": self.stamp, "value": value}
            # readers in other lanes never see a half-written file
            tmp = self.reference_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc, indent=2) + "\n")
            tmp.replace(self.reference_file)

    def tap_port_dir(self) -> Path:
        """The directory where every TAP suite of this run reserves its clusters' ports
        (PG_TEST_PORT_DIR): suites running side by side (lanes) never take the same one."""
        return osuser.ensure_dir(self.work_root / "portlock")

    # ---- the reference configuration's progress, seen by the other lanes

    def _marker(self, check: str) -> Path:
        return self.work_root / ".reference" / f"{check}.done"

    def reference_done(self, check: str) -> None:
        """The reference configuration is past ``check`` (``*``: past every check)."""
        m = self._marker(check)
        m.parent.mkdir(parents=True, exist_ok=True)
        m.touch()

    def wait_for_reference(self, check: str, limit: float = 30 * 60) -> float:
        """Wait until the reference configuration of this run is past ``check`` (whatever
        its outcome), so that a comparison uses this run's value; returns the seconds
        waited. No wait when the reference configuration is not in this run."""
        if not self.reference_in_run:
            return 0.0
        t0 = time.monotonic()
        while not (self._marker(check).exists() or self._marker("*").exists()):
            if time.monotonic() - t0 > limit:
                break
            time.sleep(0.5)
        return time.monotonic() - t0


@dataclass(frozen=True)
class Reference:
    """A value of stock base to compare with: ``value`` None when there is none yet;
    ``recorded`` when this configuration is base and has just recorded it."""

    value: Any
    source: str
    recorded: bool


def source_key(name: str, *sources: str | Path) -> str:
    """A reference key valid for these source files only: ``<name>:<hash of their bytes>``
    (a cached reference of an earlier run is ignored as soon as any of them changed)."""
    data = b"".join(Path(s).read_bytes() for s in sources)
    return f"{name}:" + hashlib.sha256(data).hexdigest()[:16]


#: Where a configuration's cluster goes if its planned port is taken when it is set up
#: (ports are planned at the start of a run: another PGNVM_HOME's run, started about the
#: same time, plans the same ones): SPARE_PORTS ports of its own per configuration, from
#: PORT_BASE + SPARE_PORTS_OFFSET, disjoint between the configurations of one run.
SPARE_PORTS_OFFSET = 400
SPARE_PORTS = 10


def spare_ports(index: int) -> range:
    """The spare ports of the run's ``index``-th configuration (see SPARE_PORTS)."""
    first = PORT_BASE + SPARE_PORTS_OFFSET + index * SPARE_PORTS
    return range(first, first + SPARE_PORTS)


def pick_port(start: int, taken: set[int]) -> int:
    """A port for a test cluster that no other pgnvm cluster is configured for and nothing
    listens on (starting a cluster on a port another cluster holds is refused)."""
    known = {c.spec.port for c in clu.Cluster.all() if not c.spec.name.startswith(NAME_PREFIX)}
    for port in range(start, start + 500):
        if port in taken or port in known or clu.port_in_use(port):
            continue
        return port
    raise RuntimeError(f"no free port in {start}..{start + 499}")


class EngineEnv:
    """One configuration's cluster (held as a :class:`~bench.core.server.Server`), work
    directory and artifacts.

    Checks decide by ``engine`` (the storage engine: ``nvm_se2_m1`` is checked as se2) and
    name results by ``label`` (the configuration's name); ``records_reference`` says whether
    this is the cluster whose answers the others are compared with (stock base)."""

    def __init__(
        self,
        run: RunState,
        config: Config,
        port: int,
        verdict: Verdict = AVAILABLE,
        spare: range = range(0),
    ) -> None:
        self.run = run
        self.spare = spare  # where setup() moves if ``port`` was taken meanwhile
        self.config = config
        self.engine = config.engine
        self.label = config.name
        self.verdict = verdict  # availability of the configuration here
        spec = clu.ClusterSpec(
            name=f"{NAME_PREFIX}{config.name}",
            engine=config.engine,
            storage=config.storage,
            port=port,
            flavour=FLAVOUR,
            settings=configs.server_settings(config, BASE_SETTINGS),
            environment=dict(config.environment),
        )
        self.server = Server(
            clu.Cluster(spec),
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            connect_timeout=30,
        )
        self.workdir = run.work_root / config.name
        self.artifacts = run.results_dir / config.name

    @property
    def scratch_dir(self) -> Path:
        """A directory on the configuration's own storage, next to its cluster's data
        directory (``<storage root>/.../<cluster>/scratch``), for checks that make clusters
        of their own (tap_recovery): they then live where the configuration's data lives
        (the nvm root: the emulated persistent memory), not on PGNVM_HOME's disk. Removed
        at teardown unless ``--keep``."""
        return self.server.cluster.datadir.parent / "scratch"

    @property
    def records_reference(self) -> bool:
        return self.config.is_reference

    def reference(self, key: str, value: Any) -> Reference:
        """Stock base records ``value`` under ``key``; any other configuration gets base's
        value (of this run, else cached by an earlier one) and where it came from."""
        if self.records_reference:
            self.run.store_reference(key, value)
            return Reference(value, "recorded as reference", recorded=True)
        got = self.run.load_reference(key)
        if got is None:
            return Reference(None, "", recorded=False)
        return Reference(got[0], got[1], recorded=False)

    # ---- lifecycle

    def move_off_a_foreign_port(self) -> None:
        """Before initdb: if something that is no cluster of this PGNVM_HOME listens on the
        planned port now (e.g. a test run of another home that planned the same ports),
        take the first free spare port instead (a cluster of this home on it is left to
        Cluster.start(), which stops a stale one of ours and names any other)."""
        spec = self.server.cluster.spec
        if not clu.port_in_use(spec.port):
            return
        if any(c.spec.port == spec.port and c.is_running() for c in clu.Cluster.all()):
            return
        for port in self.spare:
            if not clu.port_in_use(port):
                ui.notice(
                    f"{self.label}: port {spec.port} is taken by a process of no cluster "
                    f"of this PGNVM_HOME; using port {port}"
                )
                spec.port = port
                return

    def setup(self) -> str:
        """initdb + start; returns a description. Raises on failure (also when the
        configuration is not available here)."""
        if self.verdict.available is False:
            raise RuntimeError(f"not available: {self.verdict.why}")
        osuser.ensure_dir(self.workdir)
        self.move_off_a_foreign_port()
        self.server.cluster.init(force=True)
        self.server.start()
        with self.server.connect() as c:
            cs = c.execute("SHOW data_checksums").fetchone()
            ver = c.execute("SELECT version()").fetchone()
            eng = None
            with contextlib.suppress(psycopg.Error):
                eng = c.execute("SHOW nvm_storage_engine").fetchone()
            extra = {k: c.execute(f"SHOW {k}").fetchone() for k in self.config.settings}
        if cs is None or cs[0] != "on":
            raise RuntimeError(f"data_checksums is {cs[0] if cs else None!r}, expected on")
        shown = eng[0] if eng else "(no nvm_storage_engine setting: stock server)"
        if self.engine != "base" and shown != self.engine:
            raise RuntimeError(
                f"server reports nvm_storage_engine={shown!r}, expected {self.engine}"
            )
        out = (
            f"{ver[0] if ver else '?'}; data_checksums=on; nvm_storage_engine={shown}; "
            f"data directory {self.server.cluster.datadir}"
        )
        for k, want in self.config.settings.items():
            got = extra[k][0] if extra[k] else None
            if got != want:
                raise RuntimeError(f"server reports {k}={got!r}, expected {want!r}")
            out += f"; {k}={got}"
        if self.verdict.available is None:
            out += f"; availability unknown: {self.verdict.why}"
        return out

    def teardown(self) -> None:
        with contextlib.suppress(Exception):
            self.server.stop("immediate")
        # servers a check started in the scratch directory and did not stop (tap_recovery
        # interrupted: pg_ctl's daemons are not in our process group), --keep or not
        with contextlib.suppress(Exception):
            clu.kill_servers_under(self.scratch_dir)
        if not self.run.keep:
            # before destroy(): it removes the cluster's parent directory only when empty
            shutil.rmtree(self.scratch_dir, ignore_errors=True)
            with contextlib.suppress(Exception):
                self.server.cluster.destroy()
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- other writers

    @contextlib.contextmanager
    def writers_quiet(
        self, c: psycopg.Connection[Any], also: dict[str, str] | None = None
    ) -> Iterator[None]:
        """For the block, no other process of the server writes relation files: autovacuum
        off and reloaded, then waited for until neither its launcher (which exits when it
        reads the setting: autovacuum.c) nor any worker is left (workers are terminated:
        a running one would go on with its list of tables), then a CHECKPOINT, so the
        background writer and the checkpointer find nothing dirty. For checks whose
        subject any write anywhere in the server cancels: se2's helper verdicts
        (docs/storage-engines.md, V3) are not used when a write started after their job
        was enqueued, and after regress and isolation autovacuum writes through its ring
        for minutes. ``c``: the check's connection (its own writes are the check's
        business). Autovacuum is as before afterwards (the postmaster starts the launcher
        again at the reload). ``also``: more reloadable settings for the block, applied with
        the same reload (``bgwriter_lru_maxpages = 0`` for a block that dirties pages itself
        and needs them still dirty at its own CHECKPOINT)."""
        with self.server.temporary({"autovacuum": "off", **(also or {})}):
            self.server.reload()

            def autovacuum_left() -> str | None:
                left = c.execute(
                    "SELECT pid, backend_type, CASE WHEN backend_type = 'autovacuum worker' "
                    "THEN pg_terminate_backend(pid) END FROM pg_stat_activity "
                    "WHERE backend_type IN ('autovacuum launcher', 'autovacuum worker')"
                ).fetchall()
                return (
                    f"autovacuum still running 60 s after it was set off: {left}" if left else None
                )

            why = proctasks.wait_for(autovacuum_left, timeout=60, interval=0.1)
            if why is not None:
                raise CheckFailed(why)
            c.execute("CHECKPOINT")
            yield

    # ---- server log

    def log_problems_since(self, offset: int) -> list[str]:
        return errmatch.log_problems(self.server.log_since(offset))

    def refused_start(self, settings: dict[str, str], want: str) -> None:
        """The server must refuse to start with ``settings`` on top of its own, with a FATAL
        saying ``want`` and nothing worse in the log; it is started again as it was.
        Raises :class:`CheckFailed` otherwise."""
        offset = self.server.log_offset()
        try:
            with self.server.temporary(settings):
                self.server.cluster.stop("fast")
                try:
                    self.server.cluster.start()
                except clu.ClusterError:
                    pass
                else:
                    raise CheckFailed(f"the server started with {settings}")
                log = self.server.log_since(offset)
        finally:
            if not self.server.cluster.is_running():
                self.server.cluster.start()
        fatal = next((ln for ln in log.splitlines() if "FATAL:" in ln), "")
        if want not in fatal:
            raise CheckFailed(f"expected a FATAL saying {want!r}, got:\n{log[-1500:]}")
        problems = errmatch.log_problems(log)
        if problems:
            raise CheckFailed(f"log after the refused start: {problems}")

    # ---- client tools

    def client_env(self) -> dict[str, str]:
        return self.server.cluster.env()

    def tool(self, name: str) -> str:
        return str(self.server.cluster.bin(name))

    def run_tool(
        self,
        cmd: list[str],
        *,
        timeout: float,
        log_name: str,
        as_server: bool = True,
        cwd: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> proc.Ran:
        return proc.run(
            cmd,
            env=self.client_env() | (extra_env or {}),
            timeout=timeout,
            log=self.workdir / log_name,
            as_server=as_server,
            cwd=cwd,
        )

    def save_artifact(self, src: Path, name: str | None = None) -> Path:
        self.artifacts.mkdir(parents=True, exist_ok=True)
        dst = self.artifacts / (name or src.name)
        shutil.copyfile(src, dst)
        return dst


def repo_results_dir() -> Path:
    return paths.REPO_ROOT / "results"
