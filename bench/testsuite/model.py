"""Check results, the summary lines and the JSON report (pure logic)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class Status(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass
class CheckResult:
    check: str
    config: str | None  # the configuration's name; None: a check that runs once
    status: Status
    duration: float = 0.0
    detail: str = ""
    artifacts: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.check}[{self.config}]" if self.config else self.check

    def line(self) -> str:
        """One summary line: ``PASS regress[nvm_se1] 41.2s`` (+ a short reason when not passing)."""
        out = f"{self.status.value} {self.name} {self.duration:.1f}s"
        if self.status is not Status.PASS and self.detail:
            first = self.detail.strip().splitlines()[0] if self.detail.strip() else ""
            if len(first) > 160:
                first = first[:157] + "..."
            out += f"  ({first})"
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["name"] = self.name
        d["duration"] = round(self.duration, 3)
        return d


class CheckFailed(Exception):
    """Raised by a check to fail with a message (and optional artifacts)."""

    def __init__(self, message: str, artifacts: list[str] | None = None) -> None:
        super().__init__(message)
        self.artifacts = artifacts or []


class CheckSkipped(Exception):
    """Raised by a check that cannot run in this environment (e.g. not root)."""


def counts(results: list[CheckResult]) -> tuple[int, int, int]:
    passed = sum(1 for r in results if r.status is Status.PASS)
    failed = sum(1 for r in results if r.status is Status.FAIL)
    skipped = sum(1 for r in results if r.status is Status.SKIP)
    return passed, failed, skipped


def final_line(results: list[CheckResult]) -> str:
    """The closing line CI reads: ``N passed, M failed`` (``, K skipped`` only if any)."""
    passed, failed, skipped = counts(results)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    return line


def summary_lines(results: list[CheckResult]) -> list[str]:
    return [r.line() for r in results] + [final_line(results)]


def exit_code(results: list[CheckResult]) -> int:
    _, failed, _ = counts(results)
    if failed or not results:
        return 1
    return 0


def report(
    results: list[CheckResult],
    *,
    started: str,
    configs: list[str],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    passed, failed, skipped = counts(results)
    return {
        "started": started,
        "configs": configs,
        "passed": passed,
        "failed": failed,
        "skipped": skipped,
        "total_duration": round(sum(r.duration for r in results), 3),
        "checks": [r.to_json() for r in results],
        **(extra or {}),
    }


def write_report(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
