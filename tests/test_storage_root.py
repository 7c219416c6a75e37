"""A user-given nvm root (``--nvm-root`` / ``PGNVM_NVM_ROOT``): what it is (detection on
``findmnt -J`` outputs of each kind), the refusals (not a directory, not writable, not
enough space), and where clusters put their data directories on it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.core import cluster as cl
from bench.core import configs, paths, rootkind, storage
from bench.core.cluster import Cluster, ClusterSpec


def _findmnt(target: str, source: str, fstype: str, options: str) -> str:
    fs = {"target": target, "source": source, "fstype": fstype, "options": options}
    return json.dumps({"filesystems": [fs]}, indent=3)


TMPFS = _findmnt("/mnt/r", "pgnvm-root-test", "tmpfs", "rw,relatime,size=2097152k")
TMPFS_HUGE = _findmnt("/mnt/r", "tmpfs", "tmpfs", "rw,relatime,size=2097152k,huge=always")
EXT4_DAX = _findmnt("/mnt/pmem0", "/dev/pmem0", "ext4", "rw,relatime,dax")
XFS_DAX = _findmnt(
    "/mnt/pmem1", "/dev/pmem1", "xfs", "rw,relatime,attr2,dax=always,inode64,noquota"
)
EXT4 = _findmnt("/", "/dev/vda", "ext4", "rw,relatime,discard")
BIND = _findmnt("/srv/x", "/dev/vda[/var/x]", "ext4", "rw,relatime,discard")
XFS_DAX_INODE = _findmnt("/mnt/pmem1", "/dev/pmem1", "xfs", "rw,dax=inode")
EXT4_DAX_NEVER = _findmnt("/mnt/pmem0", "/dev/pmem0", "ext4", "rw,dax=never")


def test_parse_findmnt_takes_the_visible_mount() -> None:
    doc = {
        "filesystems": [
            {"target": "/dev/shm", "source": "tmpfs", "fstype": "tmpfs", "options": "rw"},
            {"target": "/dev/shm", "source": "top", "fstype": "tmpfs", "options": "rw,huge=always"},
        ]
    }
    m = rootkind.parse_findmnt(json.dumps(doc))
    assert (m.source, m.option("huge"), m.option("rw"), m.option("size")) == (
        "top",
        "always",
        "",
        None,
    )
    with pytest.raises(ValueError, match="no file system"):
        rootkind.parse_findmnt('{"filesystems": []}')


def test_tmpfs_4k_and_huge() -> None:
    k = rootkind.classify("/mnt/r", rootkind.parse_findmnt(TMPFS))
    assert (k.kind, k.pages, k.emulated) == ("tmpfs", "4 KB pages", True)
    assert "EMULATED" in k.summary() and "emulated by a tmpfs" in k.caveats()[0]
    h = rootkind.classify("/mnt/r", rootkind.parse_findmnt(TMPFS_HUGE))
    assert (h.kind, h.pages) == ("tmpfs", "2 MB pages (huge=always)")


@pytest.mark.parametrize(("text", "option"), [(EXT4_DAX, "dax"), (XFS_DAX, "dax=always")])
def test_dax_mounts(text: str, option: str) -> None:
    m = rootkind.parse_findmnt(text)
    k = rootkind.classify(m.target, m, True, "", "unknown", (True, "pmem0 is a whole device"))
    assert (k.kind, k.dax_option, k.map_sync, k.aligned_2m) == ("dax", option, True, True)
    assert "MAP_SYNC ok" in k.summary() and "2 MB-aligned" in k.summary()
    assert k.caveats() == []  # no emulation caveat on real DAX
    bad = rootkind.classify(m.target, m, False, "EOPNOTSUPP", "unknown", (False, "at 4096"))
    assert any("MAP_SYNC is refused" in c for c in bad.caveats())
    assert any("not 2 MB-aligned" in c for c in bad.caveats())


def test_page_cache_file_systems() -> None:
    for text in (EXT4, EXT4_DAX_NEVER, XFS_DAX_INODE):
        m = rootkind.parse_findmnt(text)
        k = rootkind.classify(m.target, m, False, "EOPNOTSUPP")
        assert k.kind == "page-cache", text
        assert "read the page cache" in k.summary()
        assert not any("emulated" in c for c in k.caveats())
    # dax=inode where the probe's file did get MAP_SYNC (the directory has the dax flag)
    m = rootkind.parse_findmnt(XFS_DAX_INODE)
    assert rootkind.classify(m.target, m, True).kind == "dax"


def test_bind_mount() -> None:
    m = rootkind.parse_findmnt(BIND)
    assert (m.bind_subdir, m.device) == ("/var/x", "/dev/vda")
    k = rootkind.classify("/srv/x", m, False, "EOPNOTSUPP")
    assert k.kind == "page-cache"
    assert k.notes == ("bind mount of /var/x of /dev/vda",)
    assert k.summary().endswith("; bind mount of /var/x of /dev/vda")


def test_unknown_without_a_mount() -> None:
    assert rootkind.classify("/x", None).kind == "unknown"


def test_device_alignment(tmp_path: Path) -> None:
    blk = tmp_path / "class" / "block"
    (blk / "pmem0").mkdir(parents=True)
    (blk / "pmem0p1").mkdir()
    (blk / "pmem0p1" / "start").write_text("2048\n")  # 1 MB: not 2 MB-aligned
    (blk / "pmem0p2").mkdir()
    (blk / "pmem0p2" / "start").write_text("4096\n")  # 2 MB
    assert rootkind.device_alignment("/dev/pmem0", tmp_path)[0] is True
    assert rootkind.device_alignment("/dev/pmem0p1", tmp_path)[0] is False
    assert rootkind.device_alignment("/dev/pmem0p2", tmp_path)[0] is True
    assert rootkind.device_alignment("tmpfs", tmp_path)[0] is None


def test_map_sync_probe_refused_off_dax(tmp_path: Path) -> None:
    """tmp_path is on no DAX file system here: the kernel refuses MAP_SYNC."""
    ok, why = rootkind.probe_map_sync(tmp_path)
    assert ok is False and "EOPNOTSUPP" in why
    assert list(tmp_path.iterdir()) == []  # the probe's file is gone
    assert rootkind.probe_map_sync(tmp_path / "missing")[0] is None


def test_detect_shm() -> None:
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    assert rootkind.detect(Path("/dev/shm")).kind == "tmpfs"


# ----------------------------------------------------------------- refusals


class _Vfs:
    def __init__(self, free: int) -> None:
        self.f_bavail = free // 4096
        self.f_frsize = 4096


def _ok(path: Path) -> str | None:
    return None


def test_refuses_a_missing_root(tmp_path: Path) -> None:
    with pytest.raises(storage.StorageError, match="does not exist"):
        storage.check_root(tmp_path / "nope", 0, mkdir_as_server=_ok)


def test_refuses_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(storage.StorageError, match="is not a directory"):
        storage.check_root(f, 0, mkdir_as_server=_ok)


def test_refuses_a_root_we_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(storage.StorageError, match=r"not writable by .*: Permission denied"):
        storage.check_root(
            tmp_path, 0, mkdir_as_us=lambda p: "Permission denied", mkdir_as_server=_ok
        )
    if os.geteuid() != 0:  # a real read-only directory (root writes anyway)
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        with pytest.raises(storage.StorageError, match="not writable"):
            storage.check_root(ro, 0)


def test_refuses_a_root_the_server_user_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(storage.StorageError, match="server user pgnvm cannot create"):
        storage.check_root(tmp_path, 0, mkdir_as_server=lambda p: "Permission denied")


def test_refuses_a_root_without_space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGNVM_HOME", str(tmp_path / "home"))
    with pytest.raises(storage.StorageError, match=r"has 1\.0 GiB free; TPC-H SF 1 needs about 4"):
        storage.check_root(
            tmp_path,
            4 * storage.GiB,
            statvfs=lambda p: _Vfs(storage.GiB),  # type: ignore[arg-type,return-value]
            mkdir_as_server=_ok,
            what="TPC-H SF 1",
        )
    assert (
        storage.check_root(
            tmp_path,
            4 * storage.GiB,
            statvfs=lambda p: _Vfs(5 * storage.GiB),  # type: ignore[arg-type,return-value]
            mkdir_as_server=_ok,
        )
        == tmp_path
    )


def test_use_root_option_exports_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(storage.NVM_ROOT_ENV, raising=False)
    monkeypatch.setattr(storage, "_probe_mkdir_as_server", _ok)
    assert storage.use_root_option(None, 0) is None  # nothing given: nothing checked
    assert storage.use_root_option(str(tmp_path), 0) == tmp_path
    assert os.environ[storage.NVM_ROOT_ENV] == str(tmp_path)
    with pytest.raises(storage.StorageError, match="does not exist"):
        storage.use_root_option(str(tmp_path / "gone"), 0)


# ----------------------------------------------------------------- clusters on the root


def test_cluster_on_a_user_root(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "pmem"
    root.mkdir()
    monkeypatch.setenv(storage.NVM_ROOT_ENV, str(root))
    spec = ClusterSpec(name="a")
    assert spec.nvm_root == str(root)
    want = root / f"pgnvm-{paths.home_tag()}" / "a" / "data"
    assert cl.default_datadir(spec) == want
    assert cl.resolve_datadir(spec) == want  # checked, nothing mounted
    assert ClusterSpec(name="d", storage="disk").nvm_root is None
    # saved before roots existed: the tmpfs, whatever the environment says
    doc = ClusterSpec(name="old").to_json()
    del doc["nvm_root"]
    assert ClusterSpec.from_json(doc).nvm_root is None
    # another root is a re-initdb
    assert cl.needs_reinit(ClusterSpec.from_json(doc), spec) == ["nvm_root"]
    monkeypatch.delenv(storage.NVM_ROOT_ENV)
    assert ClusterSpec(name="a").nvm_root is None
    assert Cluster(ClusterSpec(name="a")).datadir.is_relative_to(storage.default_tmpfs_root(False))


def test_cluster_refuses_a_missing_user_root(home: Path, tmp_path: Path) -> None:
    spec = ClusterSpec(name="a", nvm_root=str(tmp_path / "nope"))
    with pytest.raises(cl.ClusterError, match="does not exist"):
        cl.resolve_datadir(spec)


# ----------------------------------------------------------------- reports


def test_report_text_states_the_root_and_caveats_only_for_tmpfs() -> None:
    m = rootkind.parse_findmnt(EXT4_DAX)
    dax = rootkind.classify(m.target, m, True, "", "unknown", (True, "whole device")).to_json()
    text = rootkind.report_text({"nvm_root": dax})
    assert text is not None and "DAX file system (dax)" in text and "emulated" not in text
    assert not rootkind.emulated({"nvm_root": dax})
    tmp = rootkind.classify("/mnt/r", rootkind.parse_findmnt(TMPFS)).to_json()
    assert "Persistent memory emulated by a tmpfs" in (
        rootkind.report_text({"nvm_root": tmp}) or ""
    )
    assert rootkind.emulated({"nvm_root": tmp})
    # runs recorded before roots were described: no sentence, the old emulation caveat
    assert rootkind.report_text({}) is None and rootkind.emulated({})


def test_oltp_report_caveat_follows_the_root() -> None:
    from bench.oltp import report

    m = rootkind.parse_findmnt(XFS_DAX)
    dax = rootkind.classify(m.target, m, True, "", "unknown", (True, "")).to_json()
    plan = {
        "configs": [],
        "clients": [],
        "workloads": {},
        "records": 10,
        "distribution_detail": "zipfian",
        "durable_settings": {},
        "warmup_s": 1,
        "duration_s": 1,
        "repeat": 1,
        "shared_buffers": "128MB",
        "random_seed": 1,
    }
    try:
        doc = report.document(plan, {"nvm_root": dax}, [], [])
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
        pytest.skip(f"the OLTP report needs a fuller plan here: {e}")
    paras = [b[1] for b in doc if b[0] == "p"]
    assert any("DAX file system (dax=always)" in p for p in paras)
    assert report.EMULATION_CAVEAT not in paras


def test_detect_a_root_not_made_yet(tmp_path: Path) -> None:
    """The fallback /dev/shm/pgnvm-<user> before its first cluster: its parent's mount."""
    here = rootkind.detect(tmp_path)
    later = rootkind.detect(tmp_path / "not" / "yet")
    assert later.kind == here.kind != "unknown"
    assert later.path == str(tmp_path / "not" / "yet")


def test_test_job_space_needed() -> None:
    """``./pgnvm test`` on a root: a cluster per nvm configuration (+ tap_recovery's scratch
    where it runs), for as many as the lanes hold at once (all of them with --keep)."""
    from bench.testsuite import cli as test_cli
    from bench.testsuite import registry

    se2, inline, disk = (configs.BY_NAME[n] for n in ("nvm_se2", "nvm_se2_inline", "disk_base"))
    every = list(registry.ENGINE_CHECKS)
    no_tap = [c for c in every if c.name != "tap_recovery"]
    c, t = test_cli.CONFIG_ROOT_BYTES, test_cli.TAP_ROOT_BYTES

    def need(cfgs: list[configs.Config], checks: list, jobs: int, keep: bool = False) -> int:
        return test_cli.space_needed(cfgs, checks, jobs, keep)

    assert need([inline, se2, disk], every, 1) == c + t  # the largest: se2 with its TAP suite
    assert need([inline, se2, disk], every, 2) == 2 * c + t  # inline: no tap_recovery
    assert need([inline, se2, disk], every, 1, keep=True) == 2 * c + t  # disk: not on the root
    assert need([inline, se2], no_tap, 4) == 2 * c
    assert need([disk], every, 2) == 0
