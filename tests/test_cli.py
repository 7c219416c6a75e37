from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path

import pytest

from bench import cli, cluster_cli
from bench.core import configs, paths
from bench.core.cluster import Cluster, ClusterError, ClusterSpec
from bench.testsuite import registry, settings


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


def test_every_command_is_registered() -> None:
    p = cli.build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {
        "bootstrap",
        "build",
        "cluster",
        "test",
        "tpch",
        "micro",
        "oltp",
        "machine",
        "ha",
    }
    a = p.parse_args(["test", "--configs", "nvm_base_worker,nvm_se2_m1", "--only", "crash"])
    assert a.configs == ["nvm_base_worker", "nvm_se2_m1"] and a.only == ["crash"]
    a = p.parse_args(["micro", "scan", "--configs", "nvm_base_worker,nvm_se2"])
    assert a.configs == ["nvm_base_worker", "nvm_se2"]
    assert p.parse_args(["micro", "scan"]).configs is None  # the defaults: the selection
    assert p.parse_args(["tpch", "--configs", "mem_limit"]).configs == ["mem_limit"]
    for argv in (
        ["tpch", "--nvm-root", "/x"],
        ["oltp", "--nvm-root", "/x"],
        ["test", "--nvm-root", "/x"],
        ["micro", "scan", "--nvm-root", "/x"],
        ["micro", "bufman", "--nvm-root", "/x"],
        ["cluster", "init", "--nvm-root", "/x"],
        ["machine", "--nvm-root", "/x"],
    ):
        assert p.parse_args(argv).nvm_root == "/x", argv
    for argv in (["test", "--engines", "base"], ["micro", "scan", "--io-methods", "sync"]):
        with pytest.raises(SystemExit):
            p.parse_args(argv)  # the old vocabulary is gone


def test_unknown_configuration_names_are_refused(capsys: pytest.CaptureFixture) -> None:
    for argv in (
        ["test", "--configs", "se2+helper", "--list"],
        ["micro", "scan", "--configs", "se2_m1", "--list-configs"],
        ["tpch", "--configs", "base"],
    ):
        with pytest.raises(SystemExit, match="unknown configuration"):
            cli.main(argv)
    with pytest.raises(SystemExit, match="mem_limit: shared_buffers sized to a database"):
        cli.main(["test", "--configs", "mem_limit", "--list"])
    with pytest.raises(SystemExit, match="disk_base: micro scan measures the emulated NVM"):
        cli.main(["micro", "scan", "--configs", "disk_base"])


def test_test_list_shows_the_plan(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["test", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("nvm_base_worker", "nvm_se1", "nvm_se2", "nvm_se2_inline", "nvm_se2_m1"):
        assert f"  {name} " in out
    assert "regress" in out and "tap_recovery" in out and "pytest" in out
    assert cli.main(["test", "--configs", "nvm_base_worker,nvm_se2_m1", "--list"]) == 0
    out = capsys.readouterr().out
    assert "configurations (as given):" in out and "nvm_se1" not in out
    n = len(registry.ENGINE_CHECKS)
    once = len(registry.GLOBAL_CHECKS) - len(registry.OPT_IN)
    assert f"2 configurations x {n} checks + {once} once" in out


def test_test_quick_list(home: Path, capsys: pytest.CaptureFixture) -> None:
    """--quick: the quick configurations (se2's if the build has se2; no build here: all
    named), every engine check but the long suites, and only the checks run once that
    test an engine."""
    assert cli.main(["test", "--quick", "--list"]) == 0
    out = capsys.readouterr().out
    names = [*settings.QUICK_CONFIGS, *settings.QUICK_WITH_SE2]
    for name in names:
        assert f"  {name} " in out
    assert "nvm_se2_inline" not in out and "nvm_base_walpmem" not in out
    for check in ("isolation", "stress", "tap_recovery", "pytest", "prefetch"):
        assert f"  {check} " not in out and not out.rstrip().endswith(f"  {check}")
    assert "  regress " in out and "  crash " in out and "  fault_guard" in out
    quick = [c for c in registry.ENGINE_CHECKS if c.name not in registry.NOT_QUICK]
    assert f"{len(names)} configurations x {len(quick)} checks + 1 once" in out
    with pytest.raises(SystemExit, match="--quick and --only"):
        cli.main(["test", "--quick", "--only", "regress"])


def test_list_configs_of_every_job(home: Path, capsys: pytest.CaptureFixture) -> None:
    for argv in (["test", "--list-configs"], ["micro", "scan", "--list-configs"]):
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        assert "nvm_se2_m1\n" in out or "nvm_se2_m1  (not in the default set)" in out
        assert "unknown (build not present yet)" in out
    assert cli.main(["tpch", "--list-configs"]) == 0
    assert "mem_limit\n" in capsys.readouterr().out


def test_help_names_the_configurations(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        cli.main(["test", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in configs.NAMES:
        if name not in settings.EXCLUDED:  # the whole-database pools
            assert name in out, name
    assert (
        "Default: nvm_base_worker, nvm_base_walpmem, nvm_se1, nvm_se1_pmem, plus nvm_se2, "
        "nvm_se2_inline, nvm_se2_m1, nvm_se2_pmem, nvm_se2_slots" in out
    )


def test_core_commands_stay_light() -> None:
    """./pgnvm build and cluster do not pay for the jobs' client libraries (psycopg, the
    test checks): the job CLIs import them in their command functions."""
    code = (
        "import sys, bench.cli; bench.cli.build_parser(); "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'matplotlib') "
        "or m.startswith(('bench.testsuite.checks', 'bench.tpch.runner', 'bench.core.server')));"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=paths.REPO_ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_out_holding_another_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """tpch and oltp append raw files run by run: a --out that holds another run's
    runs.jsonl would mix two runs in one report, so it is refused before anything runs."""
    (tmp_path / "runs.jsonl").write_text("{}\n")
    with pytest.raises(SystemExit, match="already holds the results of a run"):
        cli.main(["tpch", "--out", str(tmp_path), "--no-build"])
    assert cli.main(["oltp", "--out", str(tmp_path), "--no-build"]) == 2
    assert "already holds the results of a run" in capsys.readouterr().err
