"""The catalogue of named storage configurations (bench/core/configs.py) and each job's
default list of names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core import configs, selection, topology
from bench.micro import settings as micro
from bench.testsuite import settings as test_settings
from bench.tpch import settings as tpch

NAMES = (
    "disk_base",
    "nvm_base_sync",
    "nvm_base_worker",
    "nvm_base_io_uring",
    "nvm_se1",
    "nvm_se2",
    "nvm_se2_slots",
    "nvm_se2_inline",
    "nvm_se2_m1",
    "nvm_se2_m2",
    "nvm_se2_m3",
    "nvm_base_walpmem",
    "nvm_se1_walpmem",
    "nvm_se2_walpmem",
    "nvm_base_walpmem_cl",
    "nvm_se2_walpmem_cl",
    "nvm_se1_pmem",
    "nvm_se2_pmem",
    "nvm_se2_pmem_cl",
    "nvm_base_wholedb",
    "nvm_se2_wholedb",
    "nvm_se2_hybrid",
    "mem_limit",
)


def test_config_table() -> None:
    names = [c.name for c in configs.CONFIGS]
    assert tuple(names) == NAMES == configs.NAMES
    for c in configs.CONFIGS:
        assert c.engine in configs.ENGINES and c.storage in ("nvm", "disk"), c
        assert c.doc and c.settings.get("io_method"), c
        assert c.writes_wal_pmem == (c.settings.get("nvm_wal") == "pmem"), c
        # a server environment only where libpmem2 is told its granularity
        assert set(c.environment) <= ({"PMEM2_FORCE_GRANULARITY"} if c.writes_wal_pmem else set())
    assert configs.REFERENCE in names and configs.CEILING in names and configs.DISK in names
    assert configs.BY_NAME["disk_base"].drop_caches
    assert not configs.BY_NAME["nvm_se1"].drop_caches
    assert configs.BY_NAME["mem_limit"].prewarm
    assert configs.BY_NAME["mem_limit"].shared_buffers == configs.SB_WHOLE_DB
    # pools that cover the database, not prewarmed (tpch --method prewarm / warm decides)
    for n in ("nvm_base_wholedb", "nvm_se2_wholedb"):
        c = configs.BY_NAME[n]
        assert c.shared_buffers == configs.SB_WHOLE_DB and not c.prewarm, c
    # se2's hybrid pool: descriptors for the database, the job's shared_buffers as slots
    hybrid = configs.BY_NAME["nvm_se2_hybrid"]
    assert hybrid.engine == "se2" and hybrid.shared_buffers is None and hybrid.sized_to_db
    s = configs.server_settings(hybrid, {"shared_buffers": "128MB"}, whole_db_sb="2048MB")
    assert (s["shared_buffers"], s["nvm_buffer_descriptors"]) == ("128MB", "2048MB")
    assert configs.pool_pages_bytes(s) == 2048 << 20
    assert configs.pool_pages_bytes({"shared_buffers": "128MB"}) == 128 << 20
    assert [c.name for c in configs.CONFIGS if c.sized_to_db] == [
        "nvm_base_wholedb",
        "nvm_se2_wholedb",
        "nvm_se2_hybrid",
        "mem_limit",
    ]
    with pytest.raises(ValueError, match="nvm_se2_hybrid: the pool for the whole database"):
        configs.server_settings(hybrid, {"shared_buffers": "128MB"})
    # the reference is stock base as it ships: io_method=worker, nothing else
    ref = configs.BY_NAME[configs.REFERENCE]
    assert ref.is_reference and ref.engine == "base" and ref.settings == {"io_method": "worker"}
    assert [c.name for c in configs.CONFIGS if c.is_reference] == [configs.REFERENCE]


def test_prefetch_configs_in_table() -> None:
    for n in ("nvm_se2_inline", "nvm_se2_m1", "nvm_se2_m2", "nvm_se2_m3"):
        c = configs.BY_NAME[n]
        assert c.engine == "se2" and c.storage == "nvm", n
    assert configs.BY_NAME["nvm_se2_inline"].prefetch == "inline"
    assert configs.BY_NAME["nvm_se2_inline"].helper_mapping is None
    assert configs.BY_NAME["nvm_se2"].helper_mapping is None
    assert configs.BY_NAME["nvm_se2"].prefetch == "off"
    assert [configs.BY_NAME[f"nvm_se2_m{i}"].helper_mapping for i in (1, 2, 3)] == [
        "m1",
        "m2",
        "m3",
    ]


def test_select_by_name() -> None:
    job = tpch.job()
    assert selection.select(job, ["mem_limit", "nvm_se1"]).names == ["mem_limit", "nvm_se1"]
    assert selection.select(job, ["nvm_se1", "nvm_se1"]).names == ["nvm_se1"]
    with pytest.raises(ValueError, match="nope"):
        selection.select(job, ["nope"])
    # the old vocabularies are gone
    for old in ("base", "se2+helper", "se2_m1", "base_worker"):
        with pytest.raises(ValueError):
            selection.select(job, [old])


def test_job_defaults() -> None:
    # tpch: every configuration but the write-path ones (nvm_wal = pmem) and stock's other
    # I/O methods (by name only)
    wal_pmem = tuple(
        n for n in NAMES if n.endswith(("_walpmem", "_walpmem_cl", "_pmem", "_pmem_cl"))
    )
    data_pmem = tuple(n for n in NAMES if n.endswith(("_pmem", "_pmem_cl")))
    assert tpch.BY_NAME_ONLY == (
        "nvm_base_sync",
        "nvm_base_io_uring",
        "nvm_base_wholedb",
        "nvm_se2_wholedb",
        "nvm_se2_slots",
        "nvm_se2_hybrid",
    )
    assert tpch.DEFAULT_CONFIGS == tuple(
        n for n in NAMES if n not in wal_pmem and n not in tpch.BY_NAME_ONLY
    )
    assert all(configs.BY_NAME[n].writes_wal_pmem == (n in wal_pmem) for n in NAMES)
    assert all(configs.BY_NAME[n].persists_data_pmem == (n in data_pmem) for n in NAMES)
    # persisting data through the mappings needs an engine that writes through them
    assert all(configs.BY_NAME[n].engine in ("se1", "se2") for n in data_pmem)
    for n in ("nvm_base_worker", "nvm_se2", "nvm_se2_inline", "nvm_se2_m1", "mem_limit"):
        assert n in tpch.DEFAULT_CONFIGS
    # micro scan: base (io_method worker), se1, se2
    assert micro.DEFAULT_CONFIGS == ("nvm_base_worker", "nvm_se1", "nvm_se2")
    # test: base, base with WAL on pmem, se1, se1 with the PMem write path, then se2, its
    # prefetch variants and se2 with the PMem write path when the server has se2
    assert test_settings.DEFAULT_CONFIGS == (
        "nvm_base_worker",
        "nvm_base_walpmem",
        "nvm_se1",
        "nvm_se1_pmem",
    )
    assert test_settings.WITH_SE2 == (
        "nvm_se2",
        "nvm_se2_inline",
        "nvm_se2_m1",
        "nvm_se2_pmem",
        "nvm_se2_slots",
    )
    for job in (tpch.job(), micro.job(), test_settings.job(), test_settings.job(quick=True)):
        assert selection.select(job).names == list(job.all_defaults)


def test_server_settings() -> None:
    common = tpch.Common("256MB", "32MB", 2)
    s = tpch.server_settings(configs.BY_NAME["nvm_base_sync"], common)
    assert s["shared_buffers"] == "256MB"
    assert s["work_mem"] == "32MB"
    assert s["io_method"] == "sync"
    assert s["jit"] == "off"
    assert s["max_parallel_workers_per_gather"] == "2"
    m = tpch.server_settings(configs.BY_NAME["mem_limit"], common, whole_db_sb="4096MB")
    assert m["shared_buffers"] == "4096MB"
    with pytest.raises(ValueError):
        tpch.server_settings(configs.BY_NAME["mem_limit"], common)
    s = tpch.server_settings(configs.BY_NAME["nvm_se2_m1"], tpch.Common())
    assert s["nvm_prefetch"] == "helper" and s["nvm_prefetch_mapping"] == "m1"
    # the job's common settings under the configuration's own
    g = configs.server_settings(configs.BY_NAME["nvm_se1"], {"io_method": "sync", "x": "1"})
    assert g == {"io_method": "worker", "x": "1"}


def test_whole_db_shared_buffers() -> None:
    assert configs.whole_db_shared_buffers(0) == "128MB"
    assert configs.whole_db_shared_buffers(25 << 20) == "128MB"
    v = int(configs.whole_db_shared_buffers(1671 << 20).removesuffix("MB"))
    assert v % 128 == 0 and v >= 1671 * 1.25


def test_size_bytes() -> None:
    assert configs.size_bytes("128MB") == 128 << 20
    assert configs.size_bytes("2gb") == 2 << 30
    assert configs.size_bytes(" 16384kB ") == 16 << 20
    assert configs.size_bytes("16384") == 128 << 20  # 8 kB blocks, as shared_buffers
    # a whole-database pool covers the database it was sized for
    assert configs.size_bytes(configs.whole_db_shared_buffers(1671 << 20)) >= 1671 << 20
    for bad in ("", "12 parsecs", "1.5GB"):
        with pytest.raises(ValueError):
            configs.size_bytes(bad)


def test_probe_message() -> None:
    err = (
        '2026-01-01 GMT [1] FATAL:  invalid value for parameter "nvm_storage_engine": '
        '"se2"\n2026-01-01 GMT [1] DETAIL:  not in this build\n2026 [1] HINT:  Use base'
    )
    msg = configs.error_message(err)
    assert msg.startswith('invalid value for parameter "nvm_storage_engine"')
    assert "not in this build" in msg


def test_verdicts() -> None:
    assert configs.Verdict(True).runs and configs.Verdict(True).describe() == "yes"
    no = configs.Verdict(False, "no SMT sibling")
    assert not no.runs and no.describe() == "NO: no SMT sibling"
    unknown = configs.Verdict(None, "nvmpf-topology not installed")
    assert unknown.runs and unknown.describe() == "unknown: nvmpf-topology not installed"


def _fake_install(tmp_path: Path, topo: dict | None, refused: dict[str, str]) -> Path:
    """A bindir whose ``postgres -C`` refuses the settings ``refused`` (name=value -> the
    FATAL message) and whose nvmpf-topology prints ``topo`` (None: not installed)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    checks = "".join(
        f'    case "$a" in -c{kv}) echo "FATAL:  {msg}" >&2; exit 1;; esac\n'
        for kv, msg in refused.items()
    )
    (bindir / "postgres").write_text(
        f'#!/bin/sh\nfor a in "$@"; do\n    :\n{checks}done\necho 128MB\n'
    )
    (bindir / "postgres").chmod(0o755)
    if topo is not None:
        (bindir / "topo.json").write_text(json.dumps(topo))
        (bindir / topology.TOOL).write_text(f'#!/bin/sh\ncat "{bindir}/topo.json"\n')
        (bindir / topology.TOOL).chmod(0o755)
    return bindir


NO_SMT = {
    "usable_cpus": "0-1",
    "topology_known": True,
    "note": "",
    "smt": False,
    "physical_cores": 2,
    "mappings": {
        "m1": {
            "requested": "m1",
            "effective": "m1",
            "available": True,
            "helpers": 1,
            "helper_cpus": [1],
            "fallback": [],
            "message": "",
        },
        "m2": {
            "requested": "m2",
            "effective": "m1",
            "available": False,
            "helpers": 1,
            "helper_cpus": [1],
            "fallback": ["no_smt"],
            "message": "nvmprefetch: scheme M2 cannot be honoured: CPU 0 has no SMT "
            "sibling in the allowed CPU set 0-1; falling back to M1: 1 helper(s) on "
            "another physical core (1)",
        },
        "m3": {
            "requested": "m3",
            "effective": "m1",
            "available": False,
            "helpers": 1,
            "helper_cpus": [1],
            "fallback": ["no_smt"],
            "message": "nvmprefetch: scheme M3 cannot be honoured: CPU 0 has no SMT "
            "sibling in the allowed CPU set 0-1, so there is no second-stage helper; "
            "falling back to M1: 1 helper(s) on another physical core (1)",
        },
    },
}


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(configs, "_probe_cache", {})
    monkeypatch.setattr(topology, "_cache", {})
    monkeypatch.setattr(configs.osuser, "is_root", lambda: False)


def test_availability_topology_then_server(tmp_path: Path) -> None:
    bindir = _fake_install(tmp_path, NO_SMT, {"nvm_storage_engine=se1": "se1 is not in this build"})
    common = tpch.common_settings(tpch.Common())
    av = configs.availability(bindir, configs.CONFIGS, common)
    assert av["nvm_se2_m2"] == configs.Verdict(False, NO_SMT["mappings"]["m2"]["message"])
    assert av["nvm_se2_m3"].available is False and "no second-stage helper" in av["nvm_se2_m3"].why
    assert av["nvm_se2_m1"] == configs.AVAILABLE
    assert av["nvm_se1"] == configs.Verdict(False, "se1 is not in this build")
    assert av["nvm_se1_walpmem"] == configs.Verdict(False, "se1 is not in this build")
    refused = ("nvm_se1", "nvm_se1_walpmem", "nvm_se1_pmem", "nvm_se2_m2", "nvm_se2_m3")
    assert all(av[n].available is True for n in NAMES if n not in refused)
    lines = configs.listing(tpch.DEFAULT_CONFIGS, av, common)
    text = "\n".join(lines)
    assert "nvm_se2_m2\n" in text and "available: NO: nvmprefetch: scheme M2" in text
    assert "available: NO: se1 is not in this build" in text
    # tpch runs the write-path configurations and stock's other I/O methods only by name
    wal_pmem = [n for n in NAMES if configs.BY_NAME[n].writes_wal_pmem]
    by_name = [*wal_pmem, *tpch.BY_NAME_ONLY]
    assert len(wal_pmem) == 8 and text.count("(not in the default set)") == len(by_name)
    for n in by_name:
        assert f"{n}  (not in the default set)" in text
    assert lines[-1].startswith("common settings (all configurations): shared_buffers=128MB")
    listed = configs.listing(micro.DEFAULT_CONFIGS, None, {}, {"disk_base": "data on disk"})
    assert "disk_base  (not in the default set)" in listed
    assert "    engine=base  storage=disk  available: not for this job: data on disk" in listed
    assert "nvm_se1" in listed and "nvm_se1  (not in the default set)" not in listed


def test_topology_unknown_runs_and_says_so(tmp_path: Path) -> None:
    bindir = _fake_install(tmp_path, None, {})
    av = configs.availability(
        bindir, [configs.BY_NAME["nvm_se2"], configs.BY_NAME["nvm_se2_m2"]], {}
    )
    assert av["nvm_se2"] == configs.AVAILABLE
    assert av["nvm_se2_m2"] == configs.Verdict(None, "nvmpf-topology not installed")
    assert av["nvm_se2_m2"].runs
    assert av["nvm_se2_m2"].describe() == "unknown: nvmpf-topology not installed"


def test_topology_unknown_but_server_refuses(tmp_path: Path) -> None:
    bindir = _fake_install(
        tmp_path, None, {"nvm_prefetch=helper": 'invalid value for parameter "nvm_prefetch"'}
    )
    v = configs.verdict(configs.BY_NAME["nvm_se2_m1"], bindir, {})
    assert v.available is False and v.why.startswith("invalid value")


def test_probe_is_cached_and_survives_a_missing_binary(tmp_path: Path) -> None:
    bindir = _fake_install(tmp_path, None, {})
    assert configs.probe(bindir, "se2", {"a": "1"}) == (True, "ok")
    (bindir / "postgres").unlink()
    assert configs.probe(bindir, "se2", {"a": "1"}) == (True, "ok")  # cached
    ok, msg = configs.probe(bindir, "se1", {})
    assert not ok and msg.startswith("cannot run")
