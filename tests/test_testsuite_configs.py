"""The test harness's configurations: names of the catalogue, checked by their engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core import configs, selection
from bench.testsuite import settings


def test_names_and_select() -> None:
    job = settings.job()
    whole_db = ("nvm_base_wholedb", "nvm_se2_wholedb", "nvm_se2_hybrid", "mem_limit")
    assert job.names() == [n for n in configs.NAMES if n not in whole_db]
    assert selection.select(job, ["nvm_se2_m1", "nvm_base_worker"]).names == [
        "nvm_se2_m1",
        "nvm_base_worker",
    ]
    helper = configs.BY_NAME["nvm_se2_m1"]
    assert helper.engine == "se2" and helper.prefetch == "helper"
    assert not helper.is_reference and configs.BY_NAME["nvm_base_worker"].is_reference
    assert not configs.BY_NAME["nvm_se2"].is_reference
    assert not configs.BY_NAME["nvm_base_sync"].is_reference  # extra settings
    with pytest.raises(ValueError, match="se3"):
        selection.select(job, ["se3"])
    with pytest.raises(ValueError, match="mem_limit: shared_buffers sized to a database"):
        selection.select(job, ["mem_limit"])


def test_default_configs_add_se2s_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    def verdict(cfg, bindir, common):
        seen.append((cfg.name, common))
        return configs.AVAILABLE

    monkeypatch.setattr(configs, "verdict", verdict)
    sel = selection.select(settings.job()).judge(Path("/x"), say=print)
    assert sel.names == [
        "nvm_base_worker",
        "nvm_base_walpmem",
        "nvm_se1",
        "nvm_se1_pmem",
        "nvm_se2",
        "nvm_se2_inline",
        "nvm_se2_m1",
        "nvm_se2_pmem",
        "nvm_se2_slots",
    ]
    assert sel.notes == {"nvm_se2": "yes"}
    assert seen[0] == ("nvm_se2", settings.BASE_SETTINGS)
    monkeypatch.setattr(configs, "verdict", lambda c, b, s: configs.Verdict(False, "no se2"))
    said: list[str] = []
    sel = selection.select(settings.job()).judge(Path("/x"), say=said.append)
    assert sel.names == ["nvm_base_worker", "nvm_base_walpmem", "nvm_se1", "nvm_se1_pmem"]
    assert sel.notes == {"nvm_se2": "NO: no se2"}
    assert said[0].startswith(
        "nvm_se2, nvm_se2_inline, nvm_se2_m1, nvm_se2_pmem, nvm_se2_slots not in the"
    )
    # the test harness runs what the build refuses: its setup fails, with the reason
    assert [c.name for c in sel.wanted] == sel.names and sel.run == []
    assert "configuration nvm_se1 is not available, its checks fail: no se2" in said
    # named: no gate
    sel = selection.select(settings.job(), ["nvm_se2"]).judge(Path("/x"), say=said.append)
    assert sel.names == ["nvm_se2"] and sel.notes == {} and sel.refused == {"nvm_se2": "no se2"}


def _run(tmp_path: Path):
    from bench.testsuite.context import RunState

    return RunState(
        stamp="s",
        results_dir=tmp_path / "r",
        work_root=tmp_path / "w",
        keep=False,
        seed=1,
        tree=tmp_path,
    )


def test_engine_env_of_a_prefetch_configuration(tmp_path: Path) -> None:
    from bench.testsuite.context import EngineEnv

    run = _run(tmp_path)
    env = EngineEnv(run, configs.BY_NAME["nvm_se2_m1"], 5999)
    assert (env.engine, env.label) == ("se2", "nvm_se2_m1")
    spec = env.server.cluster.spec
    assert spec.name == "pgnvm-test-nvm_se2_m1" and spec.engine == "se2"
    assert spec.storage == "nvm" and spec.flavour == settings.FLAVOUR == "check"
    assert spec.settings == {
        **settings.BASE_SETTINGS,
        "io_method": "worker",
        "nvm_prefetch": "helper",
        "nvm_prefetch_mapping": "m1",
    }
    assert env.workdir == tmp_path / "w" / "nvm_se2_m1" and not env.records_reference
    assert env.artifacts == tmp_path / "r" / "nvm_se2_m1"
    assert EngineEnv(run, configs.BY_NAME["nvm_base_worker"], 5998).records_reference
    # the reference runs the server today's test `base` ran: io_method worker is the default
    assert configs.BY_NAME["nvm_base_worker"].settings == {"io_method": "worker"}


def test_setup_refuses_a_configuration_that_is_not_available(tmp_path: Path) -> None:
    from bench.testsuite.context import EngineEnv

    env = EngineEnv(
        _run(tmp_path),
        configs.BY_NAME["nvm_se2_m2"],
        5997,
        configs.Verdict(False, "nvmprefetch: scheme M2 cannot be honoured: no SMT"),
    )
    with pytest.raises(RuntimeError, match="not available: nvmprefetch: scheme M2"):
        env.setup()
    assert not (tmp_path / "w").exists()  # nothing was set up


def test_setup_moves_off_a_port_another_home_took(tmp_path: Path) -> None:
    """Ports are planned when a run starts; a run of another PGNVM_HOME may have started a
    server on one since (CI of 2026-11-26 lost a configuration that way): setup takes a
    spare port of the configuration's own instead of failing."""
    import socket

    from bench.core import cluster as clu
    from bench.testsuite.context import EngineEnv, spare_ports

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        spare = spare_ports(3)
        env = EngineEnv(_run(tmp_path), configs.BY_NAME["nvm_se2"], taken, spare=spare)
        assert clu.port_in_use(taken)
        env.move_off_a_foreign_port()
        moved = env.server.cluster.spec.port
        assert moved != taken and moved in spare and not clu.port_in_use(moved)
        # a free planned port stays
        env2 = EngineEnv(_run(tmp_path), configs.BY_NAME["nvm_se2"], moved, spare=spare)
        env2.move_off_a_foreign_port()
        assert env2.server.cluster.spec.port == moved
    assert list(spare_ports(0)) != list(spare_ports(1))
    assert set(spare_ports(0)).isdisjoint(spare_ports(1))
