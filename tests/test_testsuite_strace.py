from __future__ import annotations

import json

import pytest

from bench.testsuite.checks.strace_check import relation_reads
from bench.testsuite.model import CheckFailed
from bench.testsuite.plans import scan_stats

REL = "/mnt/pgnvm/nvm/pgnvm-test-base/data/base/5/16384"

TRACE = f"""\
101 pread64(7<{REL}>, "\\0\\0"..., 8192, 0) = 8192
101 preadv(7<{REL}>, [{{iov_base=..., iov_len=8192}}], 16, 131072) = 131072
102 pread64(9<{REL}.1>, "..."..., 8192, 0) = 8192
102 preadv2(9<{REL}_fsm>, [...], 1, 0, 0) = 8192
101 pread64(8<{REL}5>, "..."..., 8192, 0) = 8192
101 pread64(3</mnt/pgnvm/nvm/pgnvm-test-base/data/global/pg_control>, "..."..., 296, 0) = 296
101 --- SIGUSR1 {{si_signo=SIGUSR1}} ---
101 +++ exited with 0 +++
"""


def test_counts_reads_of_the_relation_and_its_segments_only() -> None:
    reads = relation_reads(TRACE, REL)
    assert len(reads) == 3
    assert all(REL in r for r in reads)
    assert not any("_fsm" in r or "16384 5" in r or "pg_control" in r for r in reads)


def test_other_relfile_with_common_prefix_not_counted() -> None:
    # relfilenode 163845 shares the prefix of 16384: must not count
    assert relation_reads(TRACE, REL[:-1] + "5") == []  # .../1638 + 5 = 16385: absent
    assert relation_reads(f"1 pread64(3<{REL}45>, ..., 8192, 0) = 8192\n", REL) == []


def test_empty_trace() -> None:
    assert relation_reads("", REL) == []


def test_scan_stats_finds_the_seq_scan() -> None:
    plan = [
        {
            "Plan": {
                "Node Type": "Aggregate",
                "Actual Rows": 1.0,
                "Shared Read Blocks": 4600,
                "Plans": [
                    {"Node Type": "Seq Scan", "Actual Rows": 281000.0, "Shared Read Blocks": 4600}
                ],
            }
        }
    ]
    assert scan_stats(plan) == (281000, 4600)
    assert scan_stats(json.dumps(plan)) == (281000, 4600)


def test_scan_stats_without_seq_scan_fails() -> None:
    with pytest.raises(CheckFailed, match="no Seq Scan"):
        scan_stats([{"Plan": {"Node Type": "Result", "Actual Rows": 1}}])
