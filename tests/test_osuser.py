from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench.core import osuser


def test_pg_command_non_root_unchanged() -> None:
    assert osuser.pg_command(["psql", Path("/x")], {"A": "1"}, root=False) == ["psql", "/x"]


def test_pg_command_root_uses_runuser_with_explicit_env() -> None:
    argv = osuser.pg_command(["initdb", "-D", "/d"], {"PATH": "/bin", "X": "a b"}, root=True)
    assert Path(argv[0]).name == "runuser"
    assert argv[1:6] == ["-u", "pgnvm", "--", "env", "-i"]
    assert argv[6:8] == ["PATH=/bin", "X=a b"]
    assert argv[-3:] == ["initdb", "-D", "/d"]


def test_server_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(osuser, "is_root", lambda: True)
    assert osuser.server_user() == "pgnvm"
    monkeypatch.setattr(osuser, "is_root", lambda: False)
    assert osuser.server_user() == osuser.current_user()


def test_server_env_root_fixes_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(osuser, "is_root", lambda: True)
    env = osuser.server_env({"HOME": "/root", "USER": "root", "KEEP": "1"})
    assert env["USER"] == env["LOGNAME"] == "pgnvm"
    assert env["HOME"] != "/root" and env["KEEP"] == "1"
    monkeypatch.setattr(osuser, "is_root", lambda: False)
    assert osuser.server_env({"HOME": "/h"}) == {"HOME": "/h"}


def test_run_pg_non_root_passes_env(home: Path) -> None:
    r = osuser.run_pg(
        [sys.executable, "-c", "import os; print(os.environ['ZZ'], os.getcwd())"],
        env={**os.environ, "ZZ": "hello"},
        capture_output=True,
        text=True,
        cwd=str(home.parent),
        check=True,
    )
    assert r.stdout.split() == ["hello", str(home.parent)]


def test_ensure_dir_nested(home: Path, tmp_path: Path) -> None:
    d = osuser.ensure_dir(tmp_path / "a" / "b" / "c")
    assert d.is_dir()
    assert osuser.ensure_dir(d) == d  # idempotent
