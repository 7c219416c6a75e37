"""Engine variants: an engine plus extra server settings, checked as the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.testsuite import engines


def test_variants() -> None:
    assert engines.variant("se1") == engines.Variant("se1", "se1")
    helper = engines.variant("se2+helper")
    assert helper.engine == "se2" and helper.slug == "se2-helper"
    assert helper.settings_dict == {"nvm_prefetch": "helper", "nvm_prefetch_mapping": "m1"}
    assert engines.variant("se2+inline").settings_dict == {"nvm_prefetch": "inline"}
    assert engines.variant("base").is_reference and not helper.is_reference
    assert not engines.variant("se2").is_reference
    with pytest.raises(ValueError, match="se3"):
        engines.variant("se3")
    walpmem = engines.variant("base+walpmem")
    assert walpmem.engine == "base" and walpmem.wal_pmem and walpmem.writes_wal
    assert not walpmem.is_reference and not helper.wal_pmem and not helper.writes_wal
    assert engines.with_variants(["base", "se1", "se2"]) == [
        "base",
        "base+walpmem",
        "se1",
        "se2",
        "se2+inline",
        "se2+helper",
    ]
    assert engines.with_variants(["base", "se1"]) == ["base", "base+walpmem", "se1"]
    assert set(engines.KNOWN) == {
        "base",
        "se1",
        "se2",
        "base+walpmem",
        "se2+inline",
        "se2+helper",
    }


def test_default_engines_add_se2s_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "probe", lambda bindir, e: (True, e))
    assert engines.default_engines(Path("/x"))[0] == [
        "base",
        "base+walpmem",
        "se1",
        "se2",
        "se2+inline",
        "se2+helper",
    ]
    monkeypatch.setattr(engines, "probe", lambda bindir, e: (False, "no"))
    assert engines.default_engines(Path("/x")) == (
        ["base", "base+walpmem", "se1"],
        {"se2": "no"},
    )


def test_engine_env_of_a_variant(tmp_path: Path) -> None:
    from bench.testsuite.context import BASE_SETTINGS, EngineEnv, RunState

    run = RunState(
        stamp="s",
        results_dir=tmp_path / "r",
        work_root=tmp_path / "w",
        keep=False,
        seed=1,
        tree=tmp_path,
    )
    env = EngineEnv(run, engines.variant("se2+helper"), 5999)
    assert (env.engine, env.label) == ("se2", "se2+helper")
    assert env.spec.name == "pgnvm-test-se2-helper" and env.spec.engine == "se2"
    assert env.spec.settings == {
        **BASE_SETTINGS,
        "nvm_prefetch": "helper",
        "nvm_prefetch_mapping": "m1",
    }
    assert env.workdir == tmp_path / "w" / "se2-helper" and not env.records_reference
    assert EngineEnv(run, engines.variant("base"), 5998).records_reference
