from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core import auth, osuser, paths, procfs, storage
from bench.core import cluster as cl
from bench.core.cluster import Cluster, ClusterError, ClusterSpec

# ----------------------------------------------------------------- spec


def test_spec_round_trip() -> None:
    spec = ClusterSpec(
        name="t1",
        engine="se2",
        storage="disk",
        port=5999,
        flavour="check",
        huge=False,
        settings={"shared_buffers": "1GB", "fsync": "off"},
        data_root="/tmp/x",
    )
    doc = json.loads(json.dumps(spec.to_json()))
    assert ClusterSpec.from_json(doc) == spec


def test_spec_from_json_tolerant() -> None:
    spec = ClusterSpec.from_json(
        {"name": "a", "port": "6000", "future_field": 1, "settings": {"work_mem": 64}}
    )
    assert spec.port == 6000 and spec.settings == {"work_mem": "64"}
    assert spec.engine == "base" and spec.storage == "nvm"


def test_spec_defaults_match_contract() -> None:
    s = ClusterSpec()
    assert (s.name, s.engine, s.storage, s.port, s.flavour, s.huge, s.settings, s.data_root) == (
        "default",
        "base",
        "nvm",
        5440,
        "release",
        False,
        {},
        None,
    )


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"engine": "se3"}, "engine"),
        ({"storage": "ssd"}, "storage"),
        ({"flavour": "debug"}, "flavour"),
        ({"port": 0}, "port"),
        ({"storage": "disk", "huge": True}, "huge"),
        ({"settings": {"port": "1"}}, "--port"),
        ({"settings": {"nvm_storage_engine": "se1"}}, "--engine"),
        ({"settings": {"bad name": "1"}}, "setting name"),
        ({"name": "../evil"}, "name"),
        ({"name": ""}, "name"),
    ],
)
def test_spec_validation(kw: dict, msg: str) -> None:
    with pytest.raises(ClusterError, match=msg):
        ClusterSpec(**kw).validate()


@pytest.mark.parametrize(
    ("text", "pair"),
    [
        ("shared_buffers=1GB", ("shared_buffers", "1GB")),
        ("listen_addresses=", ("listen_addresses", "")),
        ("search_path=a=b", ("search_path", "a=b")),
        (" work_mem = 64MB ", ("work_mem", "64MB")),
        ("pg_stat_statements.max=100", ("pg_stat_statements.max", "100")),
    ],
)
def test_parse_setting(text: str, pair: tuple[str, str]) -> None:
    assert cl.parse_setting(text) == pair


@pytest.mark.parametrize("text", ["novalue", "=1", "a b=1"])
def test_parse_setting_rejects(text: str) -> None:
    with pytest.raises(ClusterError):
        cl.parse_setting(text)


def test_quote_value() -> None:
    assert cl.quote_value("x") == "'x'"
    assert cl.quote_value("it's") == "'it''s'"
    assert cl.quote_value("a\\b") == "'a\\\\b'"


def test_render_conf_base_has_no_engine_line() -> None:
    text = cl.render_conf(ClusterSpec(port=6001), Path("/s"))
    assert "nvm_storage_engine" not in text.replace("engine=base", "")
    lines = text.splitlines()
    assert "port = 6001" in lines
    assert "listen_addresses = '127.0.0.1'" in lines
    assert "unix_socket_directories = '/s'" in lines
    assert "logging_collector = off" in lines


def test_render_conf_engine_and_settings_last() -> None:
    spec = ClusterSpec(engine="se1", settings={"shared_buffers": "2GB", "app": "it's"})
    lines = cl.render_conf(spec, Path("/s")).splitlines()
    assert "nvm_storage_engine = 'se1'" in lines
    assert lines[-2:] == ["shared_buffers = '2GB'", "app = 'it''s'"]


def test_needs_reinit() -> None:
    a = ClusterSpec()
    assert cl.needs_reinit(a, ClusterSpec(port=1, settings={"x": "y"}, flavour="check")) == []
    assert cl.needs_reinit(a, ClusterSpec(engine="se1")) == ["engine"]
    assert cl.needs_reinit(a, ClusterSpec(storage="disk", data_root="/x")) == [
        "storage",
        "data_root",
    ]
    assert cl.needs_reinit(a, ClusterSpec(huge=True)) == ["huge"]


def test_socket_dir_short_and_long() -> None:
    short = Path("/var/lib/pgnvm/clusters/default")
    assert cl.socket_dir_for(short) == short
    long = Path("/tmp/" + "x" * 120 + "/clusters/default")
    s = cl.socket_dir_for(long)
    assert s != long and str(s).startswith("/tmp/pgnvm-sock-")
    assert s == cl.socket_dir_for(long)  # deterministic
    assert len(str(s) + "/.s.PGSQL.65535") <= 107


# ----------------------------------------------------------------- datadir resolution


def test_datadir_disk(home: Path) -> None:
    assert cl.default_datadir(ClusterSpec(name="d", storage="disk")) == home / "disk/d/data"


def test_datadir_data_root(home: Path, tmp_path: Path) -> None:
    spec = ClusterSpec(name="t", data_root=str(tmp_path / "tiny"))
    assert cl.default_datadir(spec) == tmp_path / "tiny" / "data"
    assert cl.resolve_datadir(spec) == tmp_path / "tiny" / "data"  # no mounting involved


def test_datadir_nvm_root(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(osuser, "is_root", lambda: True)
    tag = paths.home_tag()
    assert cl.default_datadir(ClusterSpec(name="a")) == Path(f"/mnt/pgnvm/nvm/{tag}/a/data")
    assert cl.default_datadir(ClusterSpec(name="a", huge=True)) == Path(
        f"/mnt/pgnvm/nvm-huge/{tag}/a/data"
    )


def test_datadir_nvm_non_root_falls_back(home: Path, capsys: pytest.CaptureFixture) -> None:
    user = osuser.current_user()
    tag = paths.home_tag()
    assert cl.default_datadir(ClusterSpec(name="a")) == Path(f"/dev/shm/pgnvm-{user}/{tag}/a/data")
    assert cl.resolve_datadir(ClusterSpec(name="a", huge=True)) == Path(
        f"/dev/shm/pgnvm-{user}/{tag}/a/data"
    )
    assert "NOTICE" in capsys.readouterr().err


# ----------------------------------------------------------------- state


def test_save_load_round_trip(home: Path, tmp_path: Path) -> None:
    spec = ClusterSpec(
        name="rt", engine="se1", storage="disk", port=6010, settings={"fsync": "off"}
    )
    c = Cluster(spec, datadir=tmp_path / "somewhere" / "data")
    c.save()
    assert Cluster.exists("rt") and not Cluster.exists("other")
    d = Cluster.load("rt")
    assert d.spec == spec
    assert d.datadir == tmp_path / "somewhere" / "data"
    assert d.bindir == home / "install" / "release" / "bin"
    assert d.bin("psql") == d.bindir / "psql"
    assert d.logfile() == home / "clusters" / "rt" / "postgres.log"
    assert [x.spec.name for x in Cluster.all()] == ["rt"]


def test_load_missing(home: Path) -> None:
    with pytest.raises(ClusterError, match="cluster init"):
        Cluster.load("ghost")
    assert Cluster.all() == []
    assert cl.stop_all() == []


def test_conninfo_and_env(home: Path) -> None:
    c = Cluster(ClusterSpec(name="ci", port=6011, flavour="check"))
    sock = home / "clusters" / "ci"
    assert c.conninfo() == f"host={sock} port=6011 user=pgnvm dbname=postgres"
    assert c.conninfo("bench").endswith("dbname=bench")
    e = c.env()
    assert e["PGHOST"] == str(sock) and e["PGPORT"] == "6011" and e["PGUSER"] == "pgnvm"
    assert e["PATH"].split(os.pathsep)[0] == str(home / "install" / "check" / "bin")


def test_status_of_uninitialized(home: Path, tmp_path: Path) -> None:
    c = Cluster(ClusterSpec(name="s", storage="disk"))
    st = c.status()
    assert st["running"] is False and st["pid"] is None and st["initialized"] is False
    assert st["engine"] == "base" and st["storage"] == "disk" and st["port"] == 5440
    assert st["datadir"] == str(home / "disk" / "s" / "data")


def test_start_requires_build(home: Path) -> None:
    with pytest.raises(ClusterError, match="pgnvm build"):
        Cluster(ClusterSpec(name="nb")).start()
    with pytest.raises(ClusterError, match="pgnvm build"):
        Cluster(ClusterSpec(name="nb")).init()


# ----------------------------------------------------------------- processes


def test_read_pidfile(tmp_path: Path) -> None:
    assert cl.read_pidfile(tmp_path) is None
    (tmp_path / "postmaster.pid").write_text("4242\n/data\n")
    assert cl.read_pidfile(tmp_path) == 4242
    (tmp_path / "postmaster.pid").write_text("junk\n")
    assert cl.read_pidfile(tmp_path) is None


def test_pid_ignores_dead_and_foreign_processes(home: Path, tmp_path: Path) -> None:
    c = Cluster(ClusterSpec(name="p", data_root=str(tmp_path)))
    c.datadir.mkdir(parents=True)
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    (c.datadir / "postmaster.pid").write_text(f"{p.pid}\n")
    assert c.pid() is None  # dead
    (c.datadir / "postmaster.pid").write_text(f"{os.getpid()}\n")
    assert c.pid() is None  # alive, but not a postgres (pid reuse)


def _fake_postmaster() -> subprocess.Popen:
    # a process whose argv[0] is ".../postgres" with two children
    script = 'exec -a /fake/bin/postgres bash -c "sleep 300 & sleep 300 & wait"'
    p = subprocess.Popen(["bash", "-c", script])
    deadline = time.monotonic() + 5
    while len(procfs.children(p.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    return p


def test_kill9_kills_postmaster_and_children(home: Path, tmp_path: Path) -> None:
    c = Cluster(ClusterSpec(name="k", data_root=str(tmp_path)))
    c.datadir.mkdir(parents=True)
    pm = _fake_postmaster()
    kids = procfs.children(pm.pid)
    assert len(kids) == 2
    (c.datadir / "postmaster.pid").write_text(f"{pm.pid}\n{c.datadir}\n")
    assert c.is_running() and c.pid() == pm.pid
    c.kill9()
    pm.wait(timeout=5)
    assert pm.returncode == -9
    assert not any(procfs.alive(k) for k in kids)
    assert not c.is_running()


def test_holds_datadir() -> None:
    d = "/mnt/pgnvm/nvm/x/data"
    backend = ["postgres: pgnvm postgres [local] idle"]
    assert cl.holds_datadir(d, d, backend, "postgres")
    assert cl.holds_datadir(d, d + "/base", backend, "postgres")
    assert not cl.holds_datadir(d, "/mnt/pgnvm/nvm/x/data2", backend, "postgres")
    assert not cl.holds_datadir(d, "/elsewhere", backend, "postgres")
    assert not cl.holds_datadir(d, None, backend, "postgres")  # zombie / gone: no cwd
    # the postmaster by its argv, even where its cwd cannot be read
    pm = ["/x/bin/postgres", "-D", d + "/"]
    assert cl.holds_datadir(d, None, pm, "postgres")
    assert cl.holds_datadir(d, None, ["/x/bin/postgres", f"-D{d}"], "postgres")
    assert not cl.holds_datadir(d, None, ["/x/bin/postgres", "-D", "/other"], "postgres")
    # a shell, psql or pg_ctl sitting in the directory is not a server process
    assert not cl.holds_datadir(d, d, ["bash"], "bash")
    assert not cl.holds_datadir(d, d, ["/x/bin/psql", "-D", d], "psql")
    # argv[0] rewritten (process title) but comm still postgres, and vice versa
    assert cl.holds_datadir(d, d, ["walwriter"], "postgres")
    assert cl.holds_datadir(d, d, ["postgres: checkpointer"], "sleep")


def test_kill9_kills_stragglers_holding_the_datadir(home: Path, tmp_path: Path) -> None:
    """A backend that outlived its postmaster (forked during the freeze, reparented) is
    found by its cwd and killed; a non-server process in the directory is left alone."""
    c = Cluster(ClusterSpec(name="k2", data_root=str(tmp_path)))
    c.datadir.mkdir(parents=True)
    pm = _fake_postmaster()
    (c.datadir / "postmaster.pid").write_text(f"{pm.pid}\n{c.datadir}\n")
    straggler = subprocess.Popen(
        ["bash", "-c", "exec -a 'postgres: pgnvm postgres [local] idle' sleep 300"],
        cwd=c.datadir,
        start_new_session=True,
    )
    bystander = subprocess.Popen(["sleep", "300"], cwd=c.datadir, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while straggler.pid not in cl.datadir_processes(c.datadir):
            assert time.monotonic() < deadline, "straggler not found by its cwd"
            time.sleep(0.02)
        assert bystander.pid not in cl.datadir_processes(c.datadir)
        assert c.kill9(timeout=10) == 4  # postmaster, its 2 children, the straggler
        assert straggler.wait(timeout=5) == -9 and pm.wait(timeout=5) == -9
        assert bystander.poll() is None
        assert cl.datadir_processes(c.datadir) == [] and not c.is_running()
        assert c.kill9(timeout=1) == 0  # nothing left: a no-op
    finally:
        for p in (pm, straggler, bystander):
            p.kill()
            p.wait()


def _listen() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_start_refuses_a_port_held_by_another_cluster(home: Path, tmp_path: Path) -> None:
    sock = _listen()
    port = sock.getsockname()[1]
    pm = _fake_postmaster()
    try:
        other = Cluster(ClusterSpec(name="tpch-x", port=port, data_root=str(tmp_path / "o")))
        other.datadir.mkdir(parents=True)
        (other.datadir / "postmaster.pid").write_text(f"{pm.pid}\n")
        other.save()
        me = Cluster(ClusterSpec(name="me", port=port, data_root=str(tmp_path / "m")))
        me.datadir.mkdir(parents=True)
        with pytest.raises(ClusterError, match=r"running cluster tpch-x .*--port"):
            me._clear_stale()
        assert pm.poll() is None and other.is_running()  # untouched
        sock.close()  # the port is free again: nothing to refuse
        me._clear_stale()
    finally:
        sock.close()
        pm.kill()
        pm.wait()


def test_port_in_use() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    assert cl.port_in_use(port)
    s.close()
    assert not cl.port_in_use(port)


def test_started_registry(home: Path) -> None:
    c = Cluster(ClusterSpec(name="reg"))
    cl._started["reg"] = c
    cl.release(c)
    assert "reg" not in cl._started
    cl._started["reg"] = c
    assert cl.stop_started() == []  # not running: nothing stopped, but forgotten
    assert "reg" not in cl._started


def test_nvm_datadirs_of_two_homes_never_meet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nvm tmpfs is shared by every PGNVM_HOME: a same-named cluster of another home (a CI
    clone next to a developer's tree) must get a data directory of its own."""
    root = tmp_path / "nvmroot"
    monkeypatch.setattr(storage, "default_tmpfs_root", lambda huge: root)
    dirs = []
    for h in ("home-a", "home-b", "sub/home-a"):
        monkeypatch.setenv("PGNVM_HOME", str(tmp_path / h))
        dirs.append(Cluster(ClusterSpec(name="same")).datadir)
        assert dirs[-1].parent.parent.name.startswith("home-a-" if h.endswith("a") else "home-b-")
    assert len(set(dirs)) == 3
    assert all(d.parent.name == "same" and d.is_relative_to(root) for d in dirs)
    assert Cluster(ClusterSpec(name="same", storage="disk")).datadir == (
        tmp_path / "sub/home-a" / "disk" / "same" / "data"
    )


def test_spec_environment_reaches_the_server_and_is_validated(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration's server environment (e.g. PMEM2_FORCE_GRANULARITY) is part of the
    cluster's spec: saved with it, given to pg_ctl start on top of ours, and a bad name is
    refused."""
    spec = ClusterSpec(name="envtest", environment={"PMEM2_FORCE_GRANULARITY": "CACHE_LINE"})
    spec.validate()
    assert ClusterSpec.from_json(spec.to_json()).environment == spec.environment
    with pytest.raises(ClusterError, match="bad environment variable name"):
        ClusterSpec(name="envtest", environment={"A=B": "1"}).validate()
    seen: dict[str, object] = {}

    def fake_run_pg(cmd: list[str], **kw: object) -> subprocess.CompletedProcess:
        seen.update(cmd=cmd, env=kw.get("env"))
        return subprocess.CompletedProcess(cmd, 1, "", "no")

    c = Cluster(spec)
    monkeypatch.setattr(osuser, "run_pg", fake_run_pg)
    monkeypatch.setattr(Cluster, "_check_built", lambda self: None)
    monkeypatch.setattr(Cluster, "is_initialized", lambda self: True)
    monkeypatch.setattr(Cluster, "is_running", lambda self: False)
    monkeypatch.setattr(Cluster, "_clear_stale", lambda self: None)
    monkeypatch.setattr(auth, "write_files", lambda datadir: None)  # no data directory here
    monkeypatch.setenv("PGNVM_TEST_OURS", "1")
    with pytest.raises(ClusterError):
        c.start()
    env = seen["env"]
    assert isinstance(env, dict) and "start" in seen["cmd"]  # type: ignore[operator]
    assert env["PMEM2_FORCE_GRANULARITY"] == "CACHE_LINE" and env["PGNVM_TEST_OURS"] == "1"


def test_kill_servers_under_kills_daemons_of_clusters_below(tmp_path: Path) -> None:
    """A TAP suite's clusters (pg_ctl's daemons, outside our process group) are found by
    their cwd under a scratch directory and killed; a server elsewhere and a non-server
    process in the directory are left alone (an interrupted ./pgnvm test left them running)."""
    scratch = tmp_path / "scratch"
    inside = scratch / "tap" / "tmp_check" / "t_001_primary_data" / "pgdata"
    outside = tmp_path / "other" / "data"
    inside.mkdir(parents=True)
    outside.mkdir(parents=True)
    title = "exec -a 'postgres: checkpointer' sleep 300"
    tap = subprocess.Popen(["bash", "-c", title], cwd=inside, start_new_session=True)
    other = subprocess.Popen(["bash", "-c", title], cwd=outside, start_new_session=True)
    bystander = subprocess.Popen(["sleep", "300"], cwd=inside, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while tap.pid not in cl.datadir_processes(scratch):
            assert time.monotonic() < deadline, "the TAP server not found by its cwd"
            time.sleep(0.02)
        assert cl.kill_servers_under(scratch) == 1
        assert tap.wait(timeout=5) == -9
        assert other.poll() is None and bystander.poll() is None
        assert cl.kill_servers_under(scratch) == 0
    finally:
        for p in (tap, other, bystander):
            p.kill()
            p.wait()
