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
