"""results.drop_os_caches: a cold OS page cache for one directory tree, not the whole machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.core import results


def test_drops_every_file_under_the_directory(tmp_path: Path) -> None:
    (tmp_path / "base" / "5").mkdir(parents=True)
    for name in ("base/5/16384", "base/5/16384_fsm", "PG_VERSION"):
        (tmp_path / name).write_bytes(b"x" * 8192)
    assert results.drop_os_caches(tmp_path) == "dropped"


def test_says_which_files_it_could_not_drop(tmp_path: Path) -> None:
    (tmp_path / "ok").write_bytes(b"x")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    out = results.drop_os_caches(tmp_path)
    assert out.startswith("not dropped for 1 of 2 files (dangling: ")


def test_touches_nothing_outside_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the directory's own files, read-only: never /proc/sys/vm/drop_caches, whose
    global drop turns off fault-around on the tmpfs that emulates NVM."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "1").write_bytes(b"x" * 8192)
    opened: list[tuple[str, int]] = []
    real_open = os.open

    def spy(path: str, flags: int, *args: int) -> int:
        opened.append((str(path), flags))
        return real_open(path, flags, *args)

    def no_builtin_open(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"open{args!r}")

    monkeypatch.setattr(os, "open", spy)
    monkeypatch.setattr("builtins.open", no_builtin_open)
    assert results.drop_os_caches(tmp_path) == "dropped"
    assert opened == [(str(tmp_path / "base" / "1"), os.O_RDONLY)]
