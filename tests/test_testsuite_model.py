from __future__ import annotations

import json
from pathlib import Path

from bench.testsuite.model import (
    CheckResult,
    Status,
    exit_code,
    final_line,
    report,
    summary_lines,
    write_report,
)


def _r(check: str, engine: str | None, status: Status, d: float = 1.0, detail: str = ""):
    return CheckResult(check, engine, status, d, detail)


def test_line_format() -> None:
    assert _r("regress", "se1", Status.PASS, 41.234).line() == "PASS regress[se1] 41.2s"
    assert _r("pytest", None, Status.PASS, 3).line() == "PASS pytest 3.0s"


def test_failed_line_carries_first_detail_line_only() -> None:
    line = _r("crash", "base", Status.FAIL, 2, "3 LOST after recovery\nmore\nlines").line()
    assert line == "FAIL crash[base] 2.0s  (3 LOST after recovery)"
    long = _r("x", "e", Status.FAIL, 1, "y" * 500).line()
    assert long.endswith("...)") and len(long) < 200


def test_final_line_is_exactly_n_passed_m_failed() -> None:
    rs = [_r("a", "base", Status.PASS), _r("b", "base", Status.FAIL), _r("c", "se1", Status.FAIL)]
    assert final_line(rs) == "1 passed, 2 failed"
    assert summary_lines(rs)[-1] == "1 passed, 2 failed"
    assert len(summary_lines(rs)) == 4


def test_skips_only_mentioned_when_present() -> None:
    assert final_line([_r("a", None, Status.PASS)]) == "1 passed, 0 failed"
    rs = [_r("a", None, Status.PASS), _r("e", "base", Status.SKIP)]
    assert final_line(rs) == "1 passed, 0 failed, 1 skipped"


def test_exit_code() -> None:
    assert exit_code([_r("a", None, Status.PASS), _r("b", None, Status.SKIP)]) == 0
    assert exit_code([_r("a", None, Status.PASS), _r("b", None, Status.FAIL)]) == 1
    assert exit_code([]) == 1  # running nothing is not a success


def test_report_json_roundtrip(tmp_path: Path) -> None:
    rs = [_r("regress", "base", Status.PASS, 12.3456), _r("crash", "se1", Status.FAIL, 1, "lost")]
    data = report(
        rs, started="2025-01-01T00:00:00", configs=["nvm_base_worker", "nvm_se1"], extra={"seed": 7}
    )
    out = tmp_path / "r" / "test-x.json"
    write_report(out, data)
    doc = json.loads(out.read_text())
    assert doc["passed"] == 1 and doc["failed"] == 1 and doc["seed"] == 7
    assert doc["checks"][0] == {
        "check": "regress",
        "config": "base",
        "status": "PASS",
        "duration": 12.346,
        "detail": "",
        "artifacts": [],
        "name": "regress[base]",
    }
    assert doc["checks"][1]["name"] == "crash[se1]"
