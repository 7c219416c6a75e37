"""bench/tpch/growth.py: how time grows with the scale factor across result directories
(``./pgnvm tpch --compare``), on directories made here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import cli
from bench.tpch import growth


def _run_dir(
    path: Path, sf: float, medians: dict[str, dict[int, float | None]], method: str = "cold"
) -> Path:
    """A result directory as ./pgnvm tpch leaves it, reduced to what --compare reads."""
    path.mkdir(parents=True)
    plan = {"sf": sf, "method": method, "repeat": 1, "configs": [{"name": c} for c in medians]}
    cells = {
        f"{c}/q{q:02d}": {"median_s": m, "status": "ok" if m is not None else "1 timeout"}
        for c, qs in medians.items()
        for q, m in qs.items()
    }
    (path / "plan.json").write_text(json.dumps(plan))
    (path / "summary.json").write_text(json.dumps({"cells": cells}))
    return path


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    sf1 = _run_dir(
        tmp_path / "sf1",
        1,
        {
            "nvm_base_worker": {1: 2.0, 6: 1.0, 9: 4.0},
            "nvm_se2_m1": {1: 1.0, 6: 0.5, 9: 3.0},
            "mem_limit": {1: 1.0, 6: 0.25, 9: 2.0},
            "nvm_se1": {1: 1.0, 6: 1.0, 9: 1.0},  # not in the SF 3 run: left out
        },
    )
    sf3 = _run_dir(
        tmp_path / "sf3",
        3,
        {
            "nvm_base_worker": {1: 6.0, 6: 3.0, 9: 40.0},
            "nvm_se2_m1": {1: 3.0, 6: 2.0, 9: None},  # Q09 timed out: Q09 left out
            "mem_limit": {1: 2.0, 6: 1.0, 9: 5.0},
        },
    )
    return sf1, sf3


def test_compare_on_what_every_run_has(two_runs: tuple[Path, Path]) -> None:
    sf1, sf3 = two_runs
    g = growth.compare([growth.load(sf3), growth.load(sf1)])  # ordered by SF
    assert [r.sf for r in g.runs] == [1.0, 3.0]
    assert g.configs == ["nvm_base_worker", "nvm_se2_m1", "mem_limit"] and g.queries == [1, 6]
    assert g.total[("nvm_se2_m1", 0)] == 1.5 and g.total[("nvm_se2_m1", 1)] == 5.0
    assert g.grown("nvm_se2_m1", 1) == pytest.approx(5.0 / 1.5)
    # geomean: sqrt(3*2) / sqrt(1*0.5)
    assert g.grown("nvm_se2_m1", 1, "geomean") == pytest.approx((6.0 / 0.5) ** 0.5)
    assert g.to_ref("nvm_se2_m1", "nvm_base_worker", 1) == pytest.approx(5.0 / 9.0)
    assert g.to_ref("nvm_se2_m1", "mem_limit", 0) == pytest.approx(1.5 / 1.25)
    assert g.query_growth("mem_limit", 6, 1) == pytest.approx(4.0)


def test_markdown_table(two_runs: tuple[Path, Path]) -> None:
    md = growth.markdown(list(two_runs))
    assert "Over the 2 queries with a median in every configuration of every run (Q01, Q06)" in md
    hdr = next(line for line in md.splitlines() if line.startswith("| configuration"))
    assert hdr.split(" | ")[5:8] == ["total ×SF 1", "per SF", "geomean ×SF 1"]
    # nvm_base_worker: 3.0 -> 9.0 (3.00×, per SF 1.00); ×mem_limit 3/1.25 and 9/3
    assert (
        "| nvm_base_worker | 3.00 | 1.414 | 9.00 | 4.243 | 3.00× | 1.00 | 3.00× | 1.00× | 2.40× "
        "| 1.00× | 3.00× |" in md
    )
    assert "| Q06 | 3.00× | 4.00× | 4.00× |" in md
    assert "nvm_se1" not in md


def test_cli_compare(two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    sf1, sf3 = two_runs
    assert cli.main(["tpch", "--compare", str(sf1), str(sf3)]) == 0
    assert "| nvm_se2_m1 | 1.50 |" in capsys.readouterr().out
    for args, why in (
        ([str(sf1)], "at least two result directories"),
        ([str(sf1), str(sf1.parent)], "not a ./pgnvm tpch result directory"),
    ):
        with pytest.raises(SystemExit, match=why):
            cli.main(["tpch", "--compare", *args])


def test_no_configuration_in_common(tmp_path: Path) -> None:
    a = growth.load(_run_dir(tmp_path / "a", 1, {"nvm_se1": {1: 1.0}}))
    b = growth.load(_run_dir(tmp_path / "b", 3, {"nvm_se2": {1: 1.0}}))
    with pytest.raises(ValueError, match="no configuration in common"):
        growth.compare([a, b])
