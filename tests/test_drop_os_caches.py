"""results.drop_os_caches: a cold OS page cache for one directory tree, not the whole machine."""

from __future__ import annotations

from pathlib import Path

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
