"""./pgnvm micro checksum: the CPU summary and the refusals before anything runs."""

from __future__ import annotations

import pytest

from bench import cli
from bench.micro import checksum

CPUINFO = """processor\t: 0
model name\t: Example CPU @ 2.0GHz
flags\t\t: fpu sse2 avx2 avx512f
processor\t: 1
model name\t: Other
flags\t\t: fpu
"""


def test_cpu_summary() -> None:
    assert checksum.cpu_summary(CPUINFO) == "Example CPU @ 2.0GHz; flags: avx2 avx512f"
    assert checksum.cpu_summary("flags: fpu\n") == (
        "unknown CPU; flags: none of avx2 avx512f avx512bw"
    )


def test_bad_runs_refused_before_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_build(*a: object, **k: object) -> None:
        raise AssertionError("built")

    monkeypatch.setattr(checksum.build, "ensure_built", no_build)
    with pytest.raises(SystemExit, match="--runs must be at least 1"):
        cli.main(["micro", "checksum", "--runs", "0"])
