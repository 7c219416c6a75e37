"""Per-run and per-engine state shared by the checks."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.core import cluster as clu
from bench.core import osuser, paths
from bench.testsuite import errmatch, proc
from bench.testsuite.engines import Variant

#: Settings every test cluster gets: small shared_buffers, so that the data of the checks
#: is several times larger and blocks really move between storage and buffers.
BASE_SETTINGS: dict[str, str] = {
    "shared_buffers": "16MB",
    "max_connections": "60",
    "log_line_prefix": "%m [%p] %q%a ",
}
FLAVOUR = "check"
PORT_BASE = 5471
NAME_PREFIX = "pgnvm-test-"
STATEMENT_TIMEOUT_MS = 300_000


@dataclass
class RunState:
    """State of one ``./pgnvm test`` run, shared by all engines."""

    stamp: str
    results_dir: Path  # repo/results/test-<stamp>/ (artifacts kept for the user)
    work_root: Path  # PGNVM_HOME/test/<stamp>/ (owned by the server user)
    keep: bool
    seed: int
    tree: Path  # PostgreSQL build tree of the check flavour
    references: dict[str, Any] = field(default_factory=dict)  # values recorded by base
    reference_file: Path | None = None  # results/test-reference.json (base values of the last run)

    def load_reference(self, key: str) -> tuple[Any, str] | None:
        """A value recorded by base in this run, else the one cached by an earlier run."""
        if key in self.references:
            return self.references[key], "this run"
        if self.reference_file and self.reference_file.is_file():
            with contextlib.suppress(ValueError, OSError):
                doc = json.loads(self.reference_file.read_text())
                if key in doc:
                    return doc[key]["value"], f"cached base run {doc[key]['stamp']}"
        return None

    def store_reference(self, key: str, value: Any) -> None:
        self.references[key] = value
        if self.reference_file is None:
            return
        doc: dict[str, Any] = {}
        with contextlib.suppress(ValueError, OSError):
            doc = json.loads(self.reference_file.read_text())
        doc[key] = {"stamp": self.stamp, "value": value}
        self.reference_file.parent.mkdir(parents=True, exist_ok=True)
        self.reference_file.write_text(json.dumps(doc, indent=2) + "\n")


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
    """One engine's (or engine variant's) cluster and work directory.

    Checks decide by ``engine`` (the storage engine: a variant of se2 is checked as se2) and
    name results by ``label`` (``se2+helper``); ``records_reference`` says whether this is
    the cluster whose answers the others are compared with (stock base)."""

    def __init__(self, run: RunState, variant: Variant, port: int) -> None:
        self.run = run
        self.variant = variant
        self.engine = variant.engine
        self.label = variant.label
        self.spec = clu.ClusterSpec(
            name=f"{NAME_PREFIX}{variant.slug}",
            engine=variant.engine,
            storage="nvm",
            port=port,
            flavour=FLAVOUR,
            settings={**BASE_SETTINGS, **variant.settings_dict},
        )
        self.cluster = clu.Cluster(self.spec)
        self.workdir = run.work_root / variant.slug
        self.artifacts = run.results_dir / variant.slug

    @property
    def records_reference(self) -> bool:
        return self.variant.is_reference

    # ---- lifecycle

    def setup(self) -> str:
        """initdb + start; returns a description. Raises on failure."""
        osuser.ensure_dir(self.workdir)
        self.cluster.init(force=True)
        self.cluster.start()
        with self.connect() as c:
            cs = c.execute("SHOW data_checksums").fetchone()
            ver = c.execute("SELECT version()").fetchone()
            eng = None
            with contextlib.suppress(psycopg.Error):
                eng = c.execute("SHOW nvm_storage_engine").fetchone()
            extra = {k: c.execute(f"SHOW {k}").fetchone() for k in self.variant.settings_dict}
        if cs is None or cs[0] != "on":
            raise RuntimeError(f"data_checksums is {cs[0] if cs else None!r}, expected on")
        shown = eng[0] if eng else "(no nvm_storage_engine setting: stock server)"
        if self.engine != "base" and shown != self.engine:
            raise RuntimeError(
                f"server reports nvm_storage_engine={shown!r}, expected {self.engine}"
            )
        out = f"{ver[0] if ver else '?'}; data_checksums=on; nvm_storage_engine={shown}"
        for k, want in self.variant.settings:
            got = extra[k][0] if extra[k] else None
            if got != want:
                raise RuntimeError(f"server reports {k}={got!r}, expected {want!r}")
            out += f"; {k}={got}"
        return out

    def teardown(self) -> None:
        with contextlib.suppress(Exception):
            self.cluster.stop("immediate")
        if not self.run.keep:
            with contextlib.suppress(Exception):
                self.cluster.destroy()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def ensure_running(self, ready_timeout: float = 60.0) -> str:
        """Make sure the server accepts connections before a check: start it if a check left
        it down; wait while it recovers from a crash a check caused (the postmaster restarts
        itself, and connections fail meanwhile with "the database system is in recovery
        mode"), restarting it if that takes longer than ``ready_timeout``. Returns a note for
        the next check's detail, empty when the server was simply up."""
        if not self.cluster.is_running():
            self.cluster.start()
            return "note: the server was down after the previous check and was restarted. "
        deadline = time.monotonic() + ready_timeout
        waited = False
        while True:
            try:
                with self.connect(connect_timeout=10) as c:
                    c.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.restart("immediate")
                    return (
                        f"note: the server did not accept connections within "
                        f"{ready_timeout:.0f}s after the previous check and was restarted. "
                    )
                waited = True
                time.sleep(0.2)
        if waited:
            return (
                "note: the server was not accepting connections after the previous check "
                "(crash recovery?); waited until it was. "
            )
        return ""

    def restart(self, mode: str = "fast") -> None:
        self.cluster.stop(mode)
        self.cluster.start()

    @contextlib.contextmanager
    def extra_settings(self, settings: dict[str, str]) -> Iterator[None]:
        """Server settings for one check: written to the cluster's pgnvm.conf now (they take
        effect at the next restart, or reload for reloadable ones), the usual ones written
        back afterwards and reloaded, also when the check fails."""
        usual = dict(self.spec.settings)
        self.spec.settings = {**usual, **settings}
        self.cluster.init()  # same spec but the settings: rewrites pgnvm.conf only
        try:
            yield
        finally:
            self.spec.settings = usual
            self.cluster.init()
            if self.cluster.is_running():
                with contextlib.suppress(psycopg.Error), self.connect() as c:
                    c.execute("SELECT pg_reload_conf()")

    # ---- SQL

    def connect(
        self, dbname: str = "postgres", autocommit: bool = True, **kw: Any
    ) -> psycopg.Connection:
        kw.setdefault("connect_timeout", 30)
        conn = psycopg.connect(
            self.cluster.conninfo(dbname),
            autocommit=autocommit,
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            **kw,
        )
        return conn

    # ---- server log

    def log_offset(self) -> int:
        try:
            return self.cluster.logfile().stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        try:
            with open(self.cluster.logfile(), "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_problems_since(self, offset: int) -> list[str]:
        return errmatch.log_problems(self.log_since(offset))

    # ---- client tools

    def client_env(self) -> dict[str, str]:
        return self.cluster.env()

    def tool(self, name: str) -> str:
        return str(self.cluster.bin(name))

    def run_tool(
        self,
        cmd: list[str],
        *,
        timeout: float,
        log_name: str,
        as_server: bool = True,
        cwd: Path | None = None,
    ) -> proc.Ran:
        return proc.run(
            cmd,
            env=self.client_env(),
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
