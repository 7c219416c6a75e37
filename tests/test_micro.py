"""Pure logic of ./pgnvm micro scan."""

import argparse

import pytest

from bench.core import configs, selection
from bench.micro.scan import Bench, render, summarize
from bench.micro.settings import DEFAULT_CONFIGS, job, parse_size_mb


def scan_configs(names):
    return selection.select(job(), names).wanted


def names():
    return job().names()


def test_configs_by_catalogue_name_in_the_order_given():
    cs = scan_configs(["nvm_base_sync", "nvm_base_worker", "nvm_se1", "nvm_se2"])
    assert [c.name for c in cs] == ["nvm_base_sync", "nvm_base_worker", "nvm_se1", "nvm_se2"]
    assert cs[0].settings == {"io_method": "sync"}
    assert cs[2].engine == "se1"
    assert [c.name for c in scan_configs(["nvm_se2", "nvm_base_worker"])] == [
        "nvm_se2",
        "nvm_base_worker",
    ]
    assert [c.name for c in scan_configs(list(DEFAULT_CONFIGS))] == [
        "nvm_base_worker",
        "nvm_se1",
        "nvm_se2",
    ]


def test_configs_se2_prefetch_variants_are_se2_with_settings():
    cs = scan_configs(["nvm_se2", "nvm_se2_inline", "nvm_se2_m1"])
    assert [c.engine for c in cs] == ["se2", "se2", "se2"]
    assert "nvm_prefetch" not in cs[0].settings
    assert cs[1].settings["nvm_prefetch"] == "inline"
    assert cs[2].settings == {
        "io_method": "worker",
        "nvm_prefetch": "helper",
        "nvm_prefetch_mapping": "m1",
    }
    with pytest.raises(ValueError, match="unknown configuration"):
        scan_configs(["se2"])
    with pytest.raises(ValueError, match="disk_base: micro scan measures the emulated NVM"):
        scan_configs(["disk_base"])
    assert "disk_base" not in names() and "mem_limit" in names()


def test_settings_of_a_configuration():
    args = argparse.Namespace(
        shared_buffers="64MB", table_factor=4, configs=["nvm_se2_m1", "mem_limit"], out="/x"
    )
    b = Bench(args)
    s = b.settings(configs.BY_NAME["nvm_se2_m1"])
    assert s["shared_buffers"] == "64MB" and s["nvm_prefetch"] == "helper"
    assert s["max_parallel_workers_per_gather"] == "0" and s["jit"] == "off"
    assert b.settings(configs.BY_NAME["mem_limit"])["shared_buffers"] == "64MB"  # not loaded
    b.whole_db = "384MB"
    assert b.settings(configs.BY_NAME["mem_limit"])["shared_buffers"] == "384MB"
    assert b.settings(configs.BY_NAME["nvm_se2_m1"])["shared_buffers"] == "64MB"


@pytest.mark.parametrize(
    ("text", "mb"), [("128MB", 128), ("16MB", 16), ("1GB", 1024), ("2g", 2048)]
)
def test_parse_size(text, mb):
    assert parse_size_mb(text) == mb


def test_parse_size_rejects_bare_numbers():
    with pytest.raises(ValueError):
        parse_size_mb("128")


def _run(cfg, wall, pages="4k", workload="seqscan"):
    return {
        "pages": pages,
        "workload": workload,
        "config": cfg,
        "wall_s": wall,
        "utime_s": wall / 2,
        "stime_s": wall / 4,
        "minflt": 10,
    }


def test_summarize_medians_and_ratios_to_first_config():
    runs = [_run("base", w) for w in (1.0, 3.0, 2.0)] + [_run("se1", w) for w in (1.0, 1.2, 0.8)]
    rows = summarize(runs)
    assert [r["config"] for r in rows] == ["base", "se1"]
    assert (
        rows[0]["wall_s"] == 2.0 and rows[0]["wall_s_min"] == 1.0 and rows[0]["wall_s_max"] == 3.0
    )
    assert rows[1]["ratio"] == pytest.approx(0.5)
    assert "| 4k | seqscan | se1 |" in render(rows)


def test_summarize_ratio_per_workload_and_pages():
    runs = [
        _run("base", 2.0, "2m", "index"),
        _run("se2", 1.0, "2m", "index"),
        _run("base", 4.0),
        _run("se2", 4.0),
    ]
    rows = {(r["pages"], r["workload"], r["config"]): r for r in summarize(runs)}
    assert rows[("2m", "index", "se2")]["ratio"] == pytest.approx(0.5)
    assert rows[("4k", "seqscan", "se2")]["ratio"] == pytest.approx(1.0)
