"""bench/ha/tpchbench.py without a cluster: the interleaved order, the standby chosen, the
session settings taken from ./pgnvm tpch's, the summary (medians, spread, paired ratios,
totals over the common queries, DRAM), the answers compared, the report's caveats, the
command line and its refusals."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from bench import cli
from bench.ha import control, tpchbench
from bench.ha.spec import HaError
from bench.ha.tpchbench import Step
from bench.tpch import settings as tpch_settings


def test_schedule_warms_up_then_interleaves_alternating_the_first_side() -> None:
    steps = tpchbench.schedule([6, 1], 3)
    assert len(steps) == 2 * (2 + 2 * 3)
    q6 = [(s.rep, s.side) for s in steps if s.query == 6]
    assert q6 == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1), (2, 0), (3, 0), (3, 1)]
    assert [s.query for s in steps[:8]] == [6] * 8  # one query's runs together
    assert [s.warmup for s in steps[:3]] == [True, True, False]
    for rep in (1, 2, 3):  # every measured repetition has both sides
        assert sorted(s.side for s in steps if s.query == 1 and s.rep == rep) == [0, 1]


def test_the_standby_asked_is_the_hot_standby_else_the_synchronous_one() -> None:
    members = [
        {"name": "node1", "role": "leader", "state": "running"},
        {"name": "node2", "role": "sync_standby", "state": "streaming"},
        {"name": "node3", "role": "replica", "state": "streaming"},
    ]
    assert tpchbench.pick_replica(members) == "node3"
    members[2]["state"] = "starting"
    assert tpchbench.pick_replica(members) == "node2"
    members[1]["state"] = "stopped"
    assert tpchbench.pick_replica(members) is None


def test_session_settings_are_those_of_pgnvm_tpch(monkeypatch: pytest.MonkeyPatch) -> None:
    got = tpchbench.session_settings()
    assert got == {"work_mem": "64MB", "jit": "off", "max_parallel_workers_per_gather": "0"}
    # taken from bench/tpch, not a copy of its values
    monkeypatch.setattr(
        tpchbench, "common_settings", lambda c: {**tpch_settings.common_settings(c), "jit": "on"}
    )
    assert tpchbench.session_settings()["jit"] == "on"


def _rec(config: str, q: int, rep: int, wall: float, status: str = "ok", mb: float = 100.0):
    return {
        "config": config,
        "query": q,
        "rep": rep,
        "warmup": rep == 0,
        "status": status,
        "wall_s": wall,
        "dram": {
            "total_mb": mb,
            "shared_mb": mb - 10,
            "backend_mb": 10.0,
            "shared_start_mb": mb - 20,
            "shared_source": "mincore",
        },
    }


def _records() -> list[dict[str, Any]]:
    recs = [_rec("se2", 1, 0, 99.0, mb=5000.0), _rec("base", 1, 0, 99.0)]  # warm-ups: ignored
    for rep, (a, b) in enumerate([(1.0, 2.0), (3.0, 2.0), (2.0, 4.0)], 1):
        recs += [_rec("se2", 1, rep, a, mb=100 + rep), _rec("base", 1, rep, b, mb=200 + rep)]
    for rep in (1, 2, 3):  # q2: base failed once: not in the totals
        recs += [
            _rec("se2", 2, rep, 1.0),
            _rec("base", 2, rep, 1.0, "timeout" if rep == 2 else "ok"),
        ]
    for rep in (1, 2, 3):
        recs += [_rec("se2", 3, rep, 0.5), _rec("base", 3, rep, 1.0)]
    return recs


def test_summary_medians_spread_paired_ratios_and_totals() -> None:
    s = tpchbench.summarize(_records(), "se2", "base")
    q1 = next(r for r in s["per_query"] if r["query"] == 1)
    assert q1["se2"] == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert q1["base"] == {"median": 2.0, "min": 2.0, "max": 4.0, "n": 3}
    assert q1["ratio"] == 1.0
    assert q1["paired"]["min"] == 0.5 and q1["paired"]["max"] == 1.5
    q2 = next(r for r in s["per_query"] if r["query"] == 2)
    assert q2["failed"] == {"se2": 0, "base": 1} and q2["base"]["n"] == 2
    t = s["total"]
    assert t["queries"] == [1, 3]
    assert t["se2"] == 2.5 and t["base"] == 3.0
    assert t["ratio"] == pytest.approx(2.5 / 3.0)
    # per repetition: (1+.5)/(2+1), (3+.5)/(2+1), (2+.5)/(4+1)
    assert t["paired"]["min"] == pytest.approx(0.5) and t["paired"]["max"] == pytest.approx(3.5 / 3)
    assert t["geomean_ratio"] == pytest.approx((1.0 * 0.5) ** 0.5)
    d = s["dram"]
    assert d["se2"]["total_mb"]["max"] == 103.0  # the warm-up's 5000 left out
    assert d["base"]["total_mb"]["max"] == 203.0
    assert d["se2"]["backend_mb"]["median"] == 10.0


def test_table_and_report_name_the_ratio_spread_dram_and_caveats() -> None:
    s = tpchbench.summarize(_records(), "se2", "base")
    lines = tpchbench.table(s)
    assert lines[2] == "| Q01 | 2.000 (1.000-3.000) | 2.000 (2.000-4.000) | 1.00 | 0.50-1.50 |"
    assert any(ln.startswith("| Q02 |") and "base: 1 failed" in ln for ln in lines)
    assert any(
        "total of medians (2 queries) | 2.50 | 3.00 | **0.83** | 0.50-1.17" in ln for ln in lines
    )
    assert "| se2 | 103 | 100 | 93 | 10 | 80 |" in lines
    s["run"] = {
        "sf": 0.3,
        "queries": [1, 2, 3],
        "repeat": 3,
        "order": "interleaved",
        "session_settings": {"jit": "off"},
        "seconds": 12.0,
        "sides": [],
        "problems": ["WRONG ANSWER q01"],
    }
    text = "\n".join(tpchbench.report_lines(s))
    assert "SF 0.3, 3 queries, 3 repetitions" in text
    assert "tmpfs, i.e. DRAM" in text and "loopback" in text
    assert "- WRONG ANSWER q01" in text


def test_answers_are_compared_between_the_sides() -> None:
    ref: dict[int, Any] = {}
    rows = [("A", Decimal("1.00")), ("B", Decimal("2.00"))]
    assert tpchbench.answer_mismatch(ref, "se2", 4, rows) is None  # the first is the reference
    assert tpchbench.answer_mismatch(ref, "base", 4, list(rows)) is None
    wrong = [("A", Decimal("1.00")), ("B", Decimal("2.50"))]
    why = tpchbench.answer_mismatch(ref, "base", 4, wrong)
    assert why is not None and why.startswith("differs from se2's answer")


def test_cli_options_and_refusals(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args(
        ["ha", "bench", "--tpch", "--vs", "b", "--sf", "0.3", "--queries", "1,6", "--repeat", "5"]
    )
    assert args.tpch and args.vs == "b" and args.sf == 0.3
    assert args.queries == [1, 6] and args.repeat == 5
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["ha", "bench", "--tpch", "--repeat", "0"])
    control.HaCluster(control.new_spec("ha", "nvm_se2", "release", None, port_start=6200)).save()
    assert cli.main(["ha", "bench", "--tpch"]) == 1
    assert "./pgnvm ha up --name ha-base --config nvm_base_worker" in capsys.readouterr().err
    same = control.HaCluster(control.new_spec("s", "nvm_se2", "release", None, port_start=6300))
    with pytest.raises(HaError, match="both run nvm_se2"):
        tpchbench.run(same, same, 0.1, [1], 1, 10.0, home / "out")


def test_a_step_knows_its_warmup() -> None:
    assert Step(1, 0, 0).warmup and not Step(1, 1, 0).warmup
