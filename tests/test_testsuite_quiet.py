"""EngineEnv.writers_quiet(): autovacuum off, its launcher and workers gone, a CHECKPOINT,
then the block; autovacuum as before afterwards (the checksum check relies on it: V3)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from bench.testsuite import proctasks
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

Row = tuple[int, str, bool | None]  # pid, backend_type, pg_terminate_backend() or NULL
LAUNCHER: Row = (10, "autovacuum launcher", None)
WORKER: Row = (11, "autovacuum worker", True)


class FakeServer:
    def __init__(self) -> None:
        self.events: list[str] = []

    @contextlib.contextmanager
    def temporary(self, settings: dict[str, str]) -> Iterator[None]:
        self.events.append(f"set {settings}")
        try:
            yield
        finally:
            self.events.append("restore")

    def reload(self) -> None:
        self.events.append("reload")


class FakeConn:
    """Answers the autovacuum query with ``rounds`` (one list of rows per call, then [])."""

    def __init__(self, server: FakeServer, rounds: list[list[Row]]) -> None:
        self.server = server
        self.rounds = rounds

    def execute(self, sql: str) -> FakeResult:
        rows: list[Row] = []
        if "autovacuum launcher" in sql:
            rows = self.rounds.pop(0) if self.rounds else []
            self.server.events.append(f"terminate {len(rows)}")
        else:
            self.server.events.append(sql)
        return FakeResult(rows)


class FakeResult:
    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows

    def fetchall(self) -> list[Row]:
        return self.rows


def env_with(server: FakeServer) -> EngineEnv:
    env = EngineEnv.__new__(EngineEnv)
    env.server = server  # type: ignore[assignment]
    return env


def test_quiet_terminates_workers_then_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proctasks.time, "sleep", lambda s: None)
    server = FakeServer()
    conn = FakeConn(server, [[LAUNCHER, WORKER], [LAUNCHER]])
    with env_with(server).writers_quiet(conn):  # type: ignore[arg-type]
        server.events.append("body")
    assert server.events == [
        "set {'autovacuum': 'off'}",
        "reload",
        "terminate 2",
        "terminate 1",
        "terminate 0",
        "CHECKPOINT",
        "body",
        "restore",
    ]


def test_quiet_gives_up_on_autovacuum_that_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 7))
    monkeypatch.setattr(proctasks.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(proctasks.time, "sleep", lambda s: None)
    server = FakeServer()
    conn = FakeConn(server, [[WORKER]] * 100)
    with (
        pytest.raises(CheckFailed, match="still running"),
        env_with(server).writers_quiet(conn),  # type: ignore[arg-type]
    ):
        server.events.append("body")
    assert "body" not in server.events and "CHECKPOINT" not in server.events
    assert server.events[-1] == "restore"


def test_quiet_applies_more_settings_with_the_same_reload() -> None:
    server = FakeServer()
    conn = FakeConn(server, [])
    with env_with(server).writers_quiet(conn, also={"bgwriter_lru_maxpages": "0"}):  # type: ignore[arg-type]
        server.events.append("body")
    assert server.events[:2] == [
        "set {'autovacuum': 'off', 'bgwriter_lru_maxpages': '0'}",
        "reload",
    ]
    assert server.events[-2:] == ["body", "restore"]
