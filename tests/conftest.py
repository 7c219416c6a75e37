from __future__ import annotations

from pathlib import Path

import pytest

from bench.core import osuser


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private PGNVM_HOME, acting as a non-root user (no useradd/chown/mount side effects)."""
    h = tmp_path / "home"
    monkeypatch.setenv("PGNVM_HOME", str(h))
    monkeypatch.setattr(osuser, "is_root", lambda: False)
    return h


@pytest.fixture(autouse=True)
def _no_user_nvm_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests see the default nvm root even under ``PGNVM_NVM_ROOT=... ./pgnvm test``
    (and a test that exports a root through ``--nvm-root`` cannot leak it into the next):
    the variable is set and removed through monkeypatch, so it is restored afterwards."""
    monkeypatch.setenv("PGNVM_NVM_ROOT", "")
    monkeypatch.delenv("PGNVM_NVM_ROOT")
