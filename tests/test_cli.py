from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import pytest

from bench import cli, cluster_cli
from bench.core.cluster import Cluster, ClusterError, ClusterSpec


@pytest.mark.parametrize(
    ("argv", "head", "rest"),
    [
        (["cluster", "psql", "-c", "SHOW x"], ["cluster", "psql"], ["-c", "SHOW x"]),
        (["cluster", "psql"], ["cluster", "psql"], []),
        (
            ["cluster", "--name", "foo", "psql", "-c", "x"],
            ["cluster", "--name", "foo", "psql"],
            ["-c", "x"],
        ),
        (
            ["cluster", "psql", "--name", "foo", "-c", "x"],
            ["cluster", "--name", "foo", "psql"],
            ["-c", "x"],
        ),
        (["cluster", "psql", "--name=foo", "-tA"], ["cluster", "--name=foo", "psql"], ["-tA"]),
        # a cluster called "psql"
        (
            ["cluster", "--name", "psql", "psql", "-l"],
            ["cluster", "--name", "psql", "psql"],
            ["-l"],
        ),
        # arguments that look like ours belong to psql after the word psql
        (["cluster", "psql", "--port", "1", "psql"], ["cluster", "psql"], ["--port", "1", "psql"]),
    ],
)
def test_split_psql(argv: list[str], head: list[str], rest: list[str]) -> None:
    assert cluster_cli.split_psql(argv) == (head, rest)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["build", "--flavour", "check"],
        ["cluster", "init", "-c", "a=psql"],
        ["cluster", "start", "--name", "psql"],
        ["test", "psql"],
    ],
)
def test_split_psql_not_psql(argv: list[str]) -> None:
    assert cluster_cli.split_psql(argv) == (argv, None)


def test_parse_build() -> None:
    p = cli.build_parser()
    a = p.parse_args(["build"])
    assert a.flavour == "release" and a.force is False
    a = p.parse_args(["build", "--flavour", "all", "--force"])
    assert a.flavour == "all" and a.force is True
    with pytest.raises(SystemExit):
        p.parse_args(["build", "--flavour", "debug"])


def test_parse_cluster_init() -> None:
    p = cli.build_parser()
    a = p.parse_args(
        [
            "cluster",
            "init",
            "--engine",
            "se1",
            "--storage",
            "disk",
            "--port",
            "6000",
            "-c",
            "a=1",
            "-c",
            "b=2",
            "--flavour",
            "check",
        ]
    )
    assert (a.name, a.engine, a.storage, a.port, a.flavour) == (
        "default",
        "se1",
        "disk",
        6000,
        "check",
    )
    assert a.settings == ["a=1", "b=2"]
    assert a.huge is None  # not given: keep saved value
    assert a.no_build is False and a.force is False
    assert p.parse_args(["cluster", "start", "--no-build"]).no_build is True
    assert p.parse_args(["cluster", "start", "--force"]).force is True
    assert p.parse_args(["cluster", "init", "--huge"]).huge is True
    assert p.parse_args(["cluster", "init", "--no-huge"]).huge is False
    with pytest.raises(SystemExit):
        p.parse_args(["cluster", "init", "--engine", "se9"])


def _ns(**kw) -> argparse.Namespace:
    d = {
        "name": "default",
        "engine": None,
        "storage": None,
        "port": None,
        "flavour": None,
        "huge": None,
        "settings": None,
    }
    d.update(kw)
    return argparse.Namespace(**d)


def test_spec_from_args_new_cluster() -> None:
    s = cluster_cli.spec_from_args(_ns(name="n", engine="se2", settings=["x=1"]), None)
    assert s == ClusterSpec(name="n", engine="se2", settings={"x": "1"})


def test_spec_from_args_keeps_saved_values() -> None:
    saved = ClusterSpec(
        name="n", engine="se1", storage="disk", port=6001, settings={"a": "1", "b": "2"}
    )
    s = cluster_cli.spec_from_args(_ns(name="n", port=6002), saved)
    assert s.engine == "se1" and s.storage == "disk" and s.port == 6002
    assert s.settings == {"a": "1", "b": "2"}
    assert saved.port == 6001  # saved spec not mutated
    # -c replaces the saved set as a whole
    s = cluster_cli.spec_from_args(_ns(name="n", settings=["c=3"]), saved)
    assert s.settings == {"c": "3"}


def test_spec_from_args_validates() -> None:
    with pytest.raises(ClusterError):
        cluster_cli.spec_from_args(_ns(storage="disk", huge=True), None)
    with pytest.raises(ClusterError):
        cluster_cli.spec_from_args(_ns(settings=["port=1"]), None)


def test_main_reports_missing_cluster(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["cluster", "status", "--name", "nope"]) == 1
    assert "no cluster 'nope'" in capsys.readouterr().err
    assert cli.main(["cluster", "psql", "--name", "nope", "-c", "select 1"]) == 1


def test_main_status_json(home: Path, capsys: pytest.CaptureFixture) -> None:
    Cluster(ClusterSpec(name="j", storage="disk", port=6123)).save()
    assert cli.main(["cluster", "status", "--name", "j", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"port": 6123' in out and '"running": false' in out
    assert cli.main(["cluster", "--name", "j", "status"]) == 0
    assert "port      6123" in capsys.readouterr().out


def test_main_psql_args_reach_psql(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Cluster(ClusterSpec(name="q")).save()
    seen = {}

    def fake_psql(self, *args, dbname="postgres", check=True, capture=True):
        seen["args"] = args
        seen["capture"] = capture
        return types.SimpleNamespace(returncode=3)

    monkeypatch.setattr(Cluster, "is_running", lambda self: True)
    monkeypatch.setattr(Cluster, "psql", fake_psql)
    rc = cli.main(["cluster", "psql", "--name", "q", "-c", "SHOW nvm_storage_engine", "-tA"])
    assert rc == 3
    assert seen == {"args": ("-c", "SHOW nvm_storage_engine", "-tA"), "capture": False}


def test_plugin_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli._load_plugin("bench.no_such_plugin.cli") is None
    assert cli._load_plugin("json.no_such_submodule_xyz") is None
    # a plugin that exists but fails while importing is reported, not taken as absent
    monkeypatch.setattr(
        cli.importlib, "import_module", lambda name: (_ for _ in ()).throw(ImportError("boom"))
    )
    assert isinstance(cli._load_plugin("bench.testsuite.cli"), ImportError)


def test_test_stub_when_plugin_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(cli, "PLUGINS", ("bench.no_such_plugin.cli",))
    assert cli.main(["test", "anything"]) == 2
    assert "not available" in capsys.readouterr().err


def test_plugin_registers_subcommand(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = types.ModuleType("fake_plugin")

    def register(sub):
        p = sub.add_parser("test")
        p.add_argument("--x", type=int)
        p.set_defaults(func=lambda a: a.x)

    mod.register = register
    monkeypatch.setitem(sys.modules, "fake_plugin", mod)
    monkeypatch.setattr(cli, "PLUGINS", ("fake_plugin",))
    assert cli.main(["test", "--x", "5"]) == 5


def test_core_commands_do_not_load_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[str] = []
    monkeypatch.setattr(cli, "_load_plugin", lambda name: loaded.append(name))
    monkeypatch.setattr(cli, "PLUGINS", ("some.plugin",))
    cli.build_parser(load_plugins=False)
    assert loaded == []
    cli.build_parser()
    assert loaded == ["some.plugin"]
    with pytest.raises(SystemExit):
        cli.main(["cluster", "--help"])
    assert loaded == ["some.plugin"]  # `cluster` did not load it again
