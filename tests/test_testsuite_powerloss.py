"""bench/testsuite/powerloss.py: the powerloss check's knobs, the cut's placement, the
tool's output read back; and which configurations the check runs for."""

from __future__ import annotations

import pytest

from bench.core import configs
from bench.core.configs import BY_NAME
from bench.testsuite import powerloss
from bench.testsuite.checks.powerloss_check import applies

STATS = """root /x/data
slots 1234
processes 13
frozen 1
events 40321
cut_at 40321
cut_pid 777
journal_bytes 1000
bytes_copied 99
whole_file_compares 0
overflow 0
fsync persisted 30000 dropped 0
msync persisted 12 dropped 3
hook persisted 0 dropped 0
dirfsync persisted 40 dropped 0
"""


def test_knobs_defaults() -> None:
    k = powerloss.knobs({})
    assert (k.cuts, k.dirs, k.break_kind, k.break_path) == (5, "newfile", None, None)
    assert k.server_env() == {}
    assert k.describe() == "--dirs newfile"


def test_knobs_from_the_environment() -> None:
    k = powerloss.knobs(
        {
            "PGNVM_POWERLOSS_CUTS": "50",
            "PGNVM_POWERLOSS_DIRS": "strict",
            "PGNVM_POWERLOSS_BREAK": "fsync:pg_wal/",
        }
    )
    assert (k.cuts, k.dirs) == (50, "strict")
    assert k.server_env() == {"POWERLOSS_BREAK": "fsync", "POWERLOSS_BREAK_PATH": "pg_wal/"}
    assert "POWERLOSS_BREAK=fsync POWERLOSS_BREAK_PATH=pg_wal/" in k.describe()
    k = powerloss.knobs({"PGNVM_POWERLOSS_BREAK": "dirfsync"})
    assert k.server_env() == {"POWERLOSS_BREAK": "dirfsync"}
    k = powerloss.knobs({"PGNVM_POWERLOSS_BREAK": "msync,hook:base/"})
    assert k.server_env() == {"POWERLOSS_BREAK": "msync,hook", "POWERLOSS_BREAK_PATH": "base/"}


@pytest.mark.parametrize(
    "env",
    [
        {"PGNVM_POWERLOSS_CUTS": "0"},
        {"PGNVM_POWERLOSS_CUTS": "many"},
        {"PGNVM_POWERLOSS_DIRS": "posix"},
        {"PGNVM_POWERLOSS_BREAK": "fdatasync:pg_wal/"},
    ],
)
def test_knobs_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        powerloss.knobs(env)


def test_cut_after() -> None:
    assert powerloss.cut_after(0.0, 1000.0, 2.0) == 1
    assert powerloss.cut_after(0.5, 1000.0, 2.0) == 1001
    assert powerloss.cut_after(0.999, 0.0, 2.0) == 1  # no persist seen: the next one
    assert powerloss.cut_after(0.999, -5.0, 2.0) == 1
    assert 1 <= powerloss.cut_after(0.9999, 10.0, 2.0) <= 21


def test_parse_stats() -> None:
    s = powerloss.parse_stats(STATS)
    assert s.events == 40321
    assert s.counters["cut_pid"] == 777
    assert s.persisted == {"fsync": 30000, "msync": 12, "hook": 0, "dirfsync": 40}
    assert s.dropped["msync"] == 3
    assert powerloss.parse_stats("").events == 0


def test_harsh_lines() -> None:
    out = (
        "materialized: 1500 files (190000000 bytes), 30 directories, 0 hard links; harsh seed "
        "7 p 0.50: 12 mapped files, 642 unpersisted lines, 319 kept, 0 files not found\n"
    )
    assert powerloss.harsh_lines(out) == (642, 319)
    assert (
        powerloss.harsh_lines("materialized: 1 files (8 bytes), 1 directories, 0 hard links")
        is None
    )


def test_landing() -> None:
    log = (
        "2026-11-25 LOG:  database system is ready\n"
        "powerloss: 4242 cut before persist 1234: fsync pg_wal/000000010000000000000003\n"
    )
    got = powerloss.landing(log)
    assert got == powerloss.Landing(1234, "fsync", "pg_wal/000000010000000000000003")
    assert got is not None and got.describe() == "#1234 fsync pg_wal/000000010000000000000003"
    assert powerloss.landing("powerloss: 1 cut before persist 9: dirfsync \n") == (
        powerloss.Landing(9, "dirfsync", "")
    )
    assert powerloss.landing("nothing here") is None


def test_plan_cuts() -> None:
    plan = powerloss.plan_cuts(3, pmem=False)
    assert [(c.workload, c.harsh) for c in plan] == [
        ("tpcb", False),
        ("ycsb_a", False),
        ("tpcb", False),
    ]
    plan = powerloss.plan_cuts(6, pmem=True)
    assert [c.workload for c in plan] == ["tpcb", "ycsb_a"] * 3
    assert [c.harsh for c in plan] == [False, True] * 3
    assert [c.moment for c in plan] == ["load", "load", "checkpoint"] * 2


def test_applies_to_stock_and_the_write_path() -> None:
    runs = {c.name for c in configs.CONFIGS if applies(c) is None}
    for name in ("nvm_base_worker", "nvm_base_walpmem", "nvm_se1_pmem", "nvm_se2_pmem"):
        assert name in runs
    for c in configs.CONFIGS:
        if c.name.endswith("_cl"):
            assert c.name in runs, c.name  # the forced cache-line variants: the seam hook
    assert applies(BY_NAME["nvm_se2"]) is not None
    assert applies(BY_NAME["nvm_se1"]) is not None
