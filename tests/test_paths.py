from __future__ import annotations

from pathlib import Path

import pytest

from bench.core import paths


def test_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PGNVM_HOME", str(tmp_path / "h"))
    assert paths.pgnvm_home() == tmp_path / "h"
    # the module attribute is computed on access, not frozen at import
    assert paths.PGNVM_HOME == tmp_path / "h"
    monkeypatch.setenv("PGNVM_HOME", str(tmp_path / "other"))
    assert paths.PGNVM_HOME == tmp_path / "other"


def test_relative_env_is_made_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PGNVM_HOME", "rel")
    assert paths.pgnvm_home() == tmp_path / "rel"


def test_root_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGNVM_HOME", raising=False)
    monkeypatch.setattr(paths.os, "geteuid", lambda: 0)
    assert paths.pgnvm_home() == Path("/var/lib/pgnvm")


def test_user_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PGNVM_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(paths.os, "geteuid", lambda: 1000)
    assert paths.pgnvm_home() == tmp_path / ".cache" / "pgnvm"


def test_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PGNVM_HOME", str(tmp_path))
    assert paths.src_dir() == tmp_path / "src"
    assert paths.build_dir("release") == tmp_path / "build" / "release"
    assert paths.install_dir("check") == tmp_path / "install" / "check"
    assert paths.venv_dir() == tmp_path / "venv"
    assert paths.cluster_dir("x") == tmp_path / "clusters" / "x"
    assert paths.disk_dir("x") == tmp_path / "disk" / "x"


def test_unknown_flavour_rejected() -> None:
    with pytest.raises(ValueError, match="flavour"):
        paths.build_dir("debug")
    with pytest.raises(ValueError):
        paths.install_dir("")


def test_repo_root_detected() -> None:
    assert (paths.REPO_ROOT / "pgnvm").is_file()
    assert (paths.REPO_ROOT / "bench" / "core" / "paths.py").is_file()
    assert paths.PATCHES_DIR == paths.REPO_ROOT / "postgres" / "patches"
    assert paths.OVERLAY_DIR == paths.REPO_ROOT / "postgres" / "src"


def test_unknown_attribute() -> None:
    with pytest.raises(AttributeError):
        _ = paths.NOPE  # type: ignore[attr-defined]
