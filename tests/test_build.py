from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from bench import build_cli
from bench.core import build, osuser, paths

# ----------------------------------------------------------------- versions and tarballs


def test_version_key_orders_like_dpkg() -> None:
    ordered = ["18~beta1", "18~beta2", "18~rc1", "18", "18.1", "18.6", "18.9", "18.10"]
    shuffled = [ordered[i] for i in (4, 7, 0, 3, 6, 1, 5, 2)]
    assert sorted(shuffled, key=build.version_key) == ordered


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("postgresql-18_18.6.orig.tar.bz2", "18.6"),
        ("postgresql-18_18.10.orig.tar.xz", "18.10"),
        ("postgresql-18_18~rc1.orig.tar.gz", "18~rc1"),
        ("postgresql-18_18.6-3.debian.tar.xz", None),
        ("postgresql-18_18.6-3.dsc", None),
        ("postgresql-17_17.2.orig.tar.bz2", None),
        ("postgresql-18_18.6.orig.tar.bz2.asc", None),
    ],
)
def test_tarball_version(name: str, version: str | None) -> None:
    assert build.tarball_version(name) == version


def test_pick_tarball_newest_upstream(tmp_path: Path) -> None:
    names = [
        "postgresql-18_18.6-3.debian.tar.xz",
        "postgresql-18_18.6-3.dsc",
        "postgresql-18_18.9.orig.tar.bz2",
        "postgresql-18_18.10.orig.tar.bz2",
        "postgresql-18_18.2.orig.tar.xz",
        "postgresql-17_17.9.orig.tar.bz2",
    ]
    picked = build.pick_tarball(tmp_path / n for n in names)
    assert picked is not None and picked.name == "postgresql-18_18.10.orig.tar.bz2"


def test_pick_tarball_none() -> None:
    assert build.pick_tarball([]) is None
    assert build.pick_tarball([Path("postgresql-18_18.6-3.dsc")]) is None


# ----------------------------------------------------------------- patches and configure


def test_list_patches_sorted_by_name(tmp_path: Path) -> None:
    for n in ["0010-late.patch", "0002-b.patch", "0001-a.patch", "README", "0003-c.diff"]:
        (tmp_path / n).write_text("x")
    (tmp_path / "9999-dir.patch").mkdir()
    assert [p.name for p in build.list_patches(tmp_path)] == [
        "0001-a.patch",
        "0002-b.patch",
        "0010-late.patch",
    ]


def test_list_patches_missing_dir(tmp_path: Path) -> None:
    assert build.list_patches(tmp_path / "nope") == []


def test_configure_args_per_flavour(tmp_path: Path) -> None:
    rel = build.configure_args("release", tmp_path / "inst")
    chk = build.configure_args("check", tmp_path / "inst")
    assert rel[0] == f"--prefix={tmp_path / 'inst'}"
    for a in (
        "--with-liburing",
        "--with-icu",
        "--with-ssl=openssl",
        "--with-lz4",
        "--with-zstd",
        "--enable-tap-tests",
    ):
        assert a in rel and a in chk
    assert "--enable-cassert" in chk and "--enable-debug" in chk
    assert "--enable-cassert" not in rel
    # a fixed extra version: a per-commit one would force full rebuilds
    assert "--with-extra-version= (pgnvm)" in rel
    assert build.configure_env("release") == {"CFLAGS": "-O2"}
    assert "-g" in build.configure_env("check")["CFLAGS"]


def test_make_steps_cover_contribs_and_tests() -> None:
    steps = build.make_steps(3)
    assert steps[0] == ["make", "-j3"]
    dirs = {s[-1] for s in steps if "-C" in s}
    for c in build.CONTRIBS:
        assert f"contrib/{c}" in dirs
    assert {"src/test/isolation", "src/test/regress"} <= dirs
    inst = build.install_steps()
    assert inst[0] == ["make", "install"]
    assert ["make", "-C", "contrib/pageinspect", "install"] in inst


def test_make_jobs_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGNVM_MAKE_JOBS", "7")
    assert build.make_jobs() == 7
    monkeypatch.setenv("PGNVM_MAKE_JOBS", "bogus")
    assert build.make_jobs() == (os.cpu_count() or 2) + 1


# ----------------------------------------------------------------- stamps and the plan

ARGS = ["--prefix=/x", "--with-icu"]
ENV = {"CFLAGS": "-O2"}


def test_config_stamp_sensitivity() -> None:
    base = build.config_stamp("t-18.6", [("0001-a.patch", b"A")], ARGS, ENV)
    assert base == build.config_stamp("t-18.6", [("0001-a.patch", b"A")], ARGS, ENV)
    variants = [
        build.config_stamp("t-18.7", [("0001-a.patch", b"A")], ARGS, ENV),
        build.config_stamp("t-18.6", [("0001-a.patch", b"B")], ARGS, ENV),
        build.config_stamp("t-18.6", [("0001-b.patch", b"A")], ARGS, ENV),
        build.config_stamp("t-18.6", [], ARGS, ENV),
        build.config_stamp("t-18.6", [("0001-a.patch", b"A")], [*ARGS, "--x"], ENV),
        build.config_stamp("t-18.6", [("0001-a.patch", b"A")], ARGS, {"CFLAGS": "-O0"}),
        # a change to libnvmprefetch relinks the server from scratch
        build.config_stamp("t-18.6", [("0001-a.patch", b"A")], ARGS, ENV, {"src/x.c": "1"}),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)
    assert build.config_stamp(
        "t-18.6", [("0001-a.patch", b"A")], ARGS, ENV, {"src/x.c": "1"}
    ) != build.config_stamp("t-18.6", [("0001-a.patch", b"A")], ARGS, ENV, {"src/x.c": "2"})


def test_prefetch_library_is_linked_from_the_tree(tmp_path) -> None:
    env = build.configure_env("release", tmp_path / "tree")
    assert env["CPPFLAGS"] == f"-I{tmp_path / 'tree' / 'nvmprefetch' / 'include'}"
    assert env["LIBS"].endswith("tree/nvmprefetch/build/libnvmprefetch.a")
    files = build.prefetch_files(build.paths.PREFETCH_DIR)
    assert "Makefile" in files and "include/nvmprefetch.h" in files
    assert "src/nvmprefetch.c" in files
    # only what the library build needs: no tests, benchmark or build products
    assert not any(r.startswith(("tests/", "bench/", "build/")) for r in files)
    inst = build.install_steps(tmp_path / "prefix")
    assert inst[-1] == ["make", "-C", "nvmprefetch", f"PREFIX={tmp_path / 'prefix'}", "install"]


def test_config_stamp_patch_order_matters() -> None:
    a, b = ("0001-a.patch", b"A"), ("0002-b.patch", b"B")
    assert build.config_stamp("t", [a, b], ARGS, ENV) != build.config_stamp("t", [b, a], ARGS, ENV)


def test_install_stamp_tracks_overlay_content() -> None:
    s1 = build.install_stamp("cfg", {"a.c": "h1"}, [["make"]])
    assert s1 == build.install_stamp("cfg", {"a.c": "h1"}, [["make"]])
    assert s1 != build.install_stamp("cfg", {"a.c": "h2"}, [["make"]])
    assert s1 != build.install_stamp("cfg", {"a.c": "h1", "b.c": "h1"}, [["make"]])
    assert s1 != build.install_stamp("cfg2", {"a.c": "h1"}, [["make"]])


def _decide(**kw):
    d = {
        "force": False,
        "saved_config": "c",
        "new_config": "c",
        "configured": True,
        "saved_install": "i",
        "new_install": "i",
        "installed": True,
    }
    d.update(kw)
    return build.decide(**d).action


def test_decide_table() -> None:
    assert _decide() == "noop"
    assert _decide(force=True) == "full"
    assert _decide(saved_config=None) == "full"
    assert _decide(configured=False) == "full"
    assert _decide(new_config="c2") == "full"
    assert _decide(new_config="c2", new_install="i2") == "full"
    assert _decide(new_install="i2") == "incremental"
    assert _decide(saved_install=None) == "incremental"
    assert _decide(installed=False) == "incremental"


# ----------------------------------------------------------------- overlay sync


def _overlay(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return build.overlay_files(root)


def _age(p: Path) -> float:
    old = time.time() - 1000
    os.utime(p, (old, old))
    return p.stat().st_mtime


def test_overlay_files_ignores_noise(tmp_path: Path) -> None:
    ov = _overlay(
        tmp_path,
        {
            "a/x.c": "1",
            ".gitkeep": "",
            "a/x.c~": "",
            "a/.#x.c": "",
            "a/.x.c.swp": "",
            "include/y.h": "2",
        },
    )
    assert sorted(ov) == ["a/x.c", "include/y.h"]
    assert build.overlay_files(tmp_path / "missing") == {}


def test_sync_copies_only_changed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src" / "backend").mkdir(parents=True)
    upstream = tree / "src" / "backend" / "up.c"
    upstream.write_text("upstream")
    ov = _overlay(tmp_path / "ov", {"backend/up.c": "mine", "backend/new/n.c": "new"})

    res = build.sync_overlay(ov, tree)
    assert sorted(res.copied) == ["backend/new/n.c", "backend/up.c"]
    assert upstream.read_text() == "mine"
    assert (tree / "src" / "backend" / "new" / "n.c").read_text() == "new"

    # unchanged content: nothing copied, mtimes left alone (make stays idle)
    t_up = _age(upstream)
    res = build.sync_overlay(ov, tree)
    assert not res.changed
    assert upstream.stat().st_mtime == t_up

    # an edit is copied with a fresh mtime
    (tmp_path / "ov" / "backend" / "up.c").write_text("mine v2")
    res = build.sync_overlay(build.overlay_files(tmp_path / "ov"), tree)
    assert res.copied == ["backend/up.c"]
    assert upstream.read_text() == "mine v2"
    assert upstream.stat().st_mtime > t_up


def test_sync_reverts_removed_files(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    upstream = tree / "src" / "up.c"
    upstream.write_text("patched upstream")
    ov_dir = tmp_path / "ov"
    ov = _overlay(ov_dir, {"up.c": "mine", "dummy.c": "dummy"})
    build.sync_overlay(ov, tree)
    assert (tree / build.META / "orig" / "up.c").read_text() == "patched upstream"

    t = _age(upstream)
    (ov_dir / "up.c").unlink()
    (ov_dir / "dummy.c").unlink()
    res = build.sync_overlay(build.overlay_files(ov_dir), tree)
    assert res.reverted == ["up.c"] and res.removed == ["dummy.c"]
    assert upstream.read_text() == "patched upstream"
    assert upstream.stat().st_mtime > t  # so make rebuilds it
    assert not (tree / "src" / "dummy.c").exists()
    assert not (tree / build.META / "orig" / "up.c").exists()
    # and it is stable afterwards
    assert not build.sync_overlay(build.overlay_files(ov_dir), tree).changed


def test_sync_contrib_subdir_has_its_own_manifest(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "contrib").mkdir()
    src_ov = _overlay(tmp_path / "ov", {"x.c": "src side"})
    contrib_ov = _overlay(tmp_path / "cov", {"pgnvm/pgnvm.c": "contrib side"})
    build.sync_overlay(src_ov, tree)
    res = build.sync_overlay(contrib_ov, tree, subdir="contrib")
    assert res.copied == ["pgnvm/pgnvm.c"]
    assert (tree / "contrib" / "pgnvm" / "pgnvm.c").read_text() == "contrib side"
    # syncing src again does not consider the contrib files its own (nothing removed)
    assert not build.sync_overlay(build.overlay_files(tmp_path / "ov"), tree).changed
    # removing the contrib file removes it from the tree
    (tmp_path / "cov" / "pgnvm" / "pgnvm.c").unlink()
    res = build.sync_overlay(build.overlay_files(tmp_path / "cov"), tree, subdir="contrib")
    assert res.removed == ["pgnvm/pgnvm.c"]
    assert not (tree / "contrib" / "pgnvm" / "pgnvm.c").exists()


def test_sync_calls_chown_on_written_files(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    ov = _overlay(tmp_path / "ov", {"d/e/f.c": "x"})
    chowned: list[Path] = []
    build.sync_overlay(ov, tree, chowned.append)
    names = {p.name for p in chowned}
    assert {"d", "e"} <= names  # created directories
    assert any(p.name.startswith("f.c") for p in chowned)


def test_sync_preserves_exec_bit(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    ov = _overlay(tmp_path / "ov", {"tool.sh": "#!/bin/sh\n"})
    os.chmod(ov["tool.sh"], 0o755)
    build.sync_overlay(ov, tree)
    assert os.access(tree / "src" / "tool.sh", os.X_OK)


# ----------------------------------------------------------------- ensure_built (no real build)


class Recorder:
    def __init__(self) -> None:
        self.cmds: list[list[str]] = []

    def __call__(self, cmd, **kw):
        self.cmds.append([str(c) for c in cmd])
        return subprocess.CompletedProcess(cmd, 0)


@pytest.fixture
def fake_repo(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    patches = tmp_path / "patches"
    overlay = tmp_path / "overlay"
    patches.mkdir()
    overlay.mkdir()
    monkeypatch.setattr(paths, "PATCHES_DIR", patches)
    monkeypatch.setattr(paths, "OVERLAY_DIR", overlay)
    monkeypatch.setattr(paths, "CONTRIB_OVERLAY_DIR", tmp_path / "contrib-overlay")
    src = home / "src"
    src.mkdir(parents=True)
    (src / "postgresql-18_18.6.orig.tar.bz2").write_bytes(b"not really")
    rec = Recorder()
    monkeypatch.setattr(osuser, "run_pg", rec)

    def fake_install():
        # what a successful `make install` leaves behind
        (home / "install" / "release" / "bin").mkdir(parents=True, exist_ok=True)
        (home / "install" / "release" / "bin" / "postgres").write_text("")
        (home / "build" / "release" / "config.status").write_text("")

    return patches, overlay, rec, fake_install


def test_ensure_built_full_then_noop_then_incremental(fake_repo, home: Path) -> None:
    patches, overlay, rec, fake_install = fake_repo
    (patches / "0001-x.patch").write_text("--- a\n+++ b\n")

    build.ensure_built("release")
    kinds = [c[0] for c in rec.cmds]
    # libnvmprefetch's archive is built before configure, which links against it
    assert kinds[:4] == ["tar", "patch", "make", "./configure"]
    assert rec.cmds[2][:3] == ["make", "-C", "nvmprefetch"]
    assert "make" in kinds
    fake_install()

    rec.cmds.clear()
    assert build.ensure_built("release") == home / "install" / "release"
    assert rec.cmds == []  # up to date: nothing runs

    (overlay / "backend").mkdir()
    (overlay / "backend" / "dummy.c").write_text("int x;\n")
    build.ensure_built("release")
    kinds = [c[0] for c in rec.cmds]
    assert "tar" not in kinds and "./configure" not in kinds and "patch" not in kinds
    assert kinds and set(kinds) == {"make"}
    assert (home / "build" / "release" / "src" / "backend" / "dummy.c").exists()

    # a patch change means a from-scratch rebuild
    rec.cmds.clear()
    (patches / "0002-y.patch").write_text("--- a\n+++ b\n")
    build.ensure_built("release")
    assert [c[0] for c in rec.cmds][:5] == ["tar", "patch", "patch", "make", "./configure"]
    # applied in sorted order, each fed on stdin with -p1 --forward --batch
    assert rec.cmds[1] == ["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch"]


def test_ensure_built_failed_patch_names_it(fake_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    patches, _, _, _ = fake_repo
    (patches / "0001-bad.patch").write_text("garbage")

    def run(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1 if cmd[0] == "patch" else 0)

    monkeypatch.setattr(osuser, "run_pg", run)
    with pytest.raises(build.BuildError, match=r"0001-bad\.patch"):
        build.ensure_built("release")


def test_ensure_built_unknown_flavour() -> None:
    with pytest.raises(build.BuildError):
        build.ensure_built("fast")


def test_build_cli_flavour_all() -> None:
    assert build_cli.flavours_for("all") == ["release", "check"]
    assert build_cli.flavours_for("check") == ["check"]
