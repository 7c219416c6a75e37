from __future__ import annotations

from pathlib import Path

import pytest

from bench.core import counters
from bench.testsuite import nvmstats, plans
from bench.testsuite.checks import redirect, redirect_btree
from bench.testsuite.checks.prefetch_check import summary
from bench.testsuite.model import CheckFailed


def _d(**kw: int) -> dict[str, int]:
    return {k: kw.get(k, 0) for k in (*counters.COUNTERS, *counters.DERIVED)}


def test_delta_and_fmt() -> None:
    a = _d(redirects=10, mapped_reads=3)
    b = _d(redirects=25, mapped_reads=3, bytes_not_copied=15 * 8192)
    d = counters.delta(a, b)
    assert d["redirects"] == 15 and d["mapped_reads"] == 0
    assert counters.fmt(d, ("redirects", "cow_copies")) == "redirects+15 cow_copies+0"
    assert counters.fmt(d).startswith(
        "mapped_reads+0 mapped_writes+0 persisted_writes+0 redirects+15 "
    )


def test_block_bytes(tmp_path: Path) -> None:
    f = tmp_path / "rel"
    f.write_bytes(b"a" * 8192 + b"b" * 8192)
    assert nvmstats.block_bytes(f, 1) == b"b" * 8192
    with pytest.raises(OSError, match="block 2"):
        nvmstats.block_bytes(f, 2)


def test_se2_must_redirect_about_every_miss() -> None:
    ok = _d(redirects=1000, bytes_not_copied=1000 * 8192)
    assert "redirects+1000" in redirect.expect_redirects("se2", "seq", 1000, ok, 32)
    few = 1000 - redirect.slack(1000) - 1
    with pytest.raises(CheckFailed, match="only"):
        redirect.expect_redirects("se2", "seq", 1000, _d(redirects=few), 32)
    with pytest.raises(CheckFailed, match="bytes_not_copied"):
        redirect.expect_redirects("se2", "seq", 1000, _d(redirects=1000), 32)
    with pytest.raises(CheckFailed, match="no redirected buffer"):
        redirect.expect_redirects("se2", "seq", 1000, ok, 0)


def test_base_and_se1_must_never_redirect() -> None:
    assert "redirects+0" in redirect.expect_redirects("base", "seq", 1000, _d(), 0)
    with pytest.raises(CheckFailed, match="never redirect"):
        redirect.expect_redirects("base", "seq", 1000, _d(redirects=1), 0)
    with pytest.raises(CheckFailed, match="never redirect"):
        redirect.expect_redirects("se1", "seq", 1000, _d(cow_copies=1, mapped_reads=1000), 0)
    with pytest.raises(CheckFailed, match="redirected buffers"):
        redirect.expect_redirects("base", "seq", 1000, _d(), 3)
    # se1 copies every miss from its mapping
    assert "mapped_reads+995" in redirect.expect_redirects(
        "se1", "seq", 1000, _d(mapped_reads=995), 0
    )
    with pytest.raises(CheckFailed, match="mapped_reads"):
        redirect.expect_redirects("se1", "seq", 1000, _d(mapped_reads=10), 0)


def test_index_scan_stats() -> None:
    plan = [
        {
            "Plan": {
                "Node Type": "Aggregate",
                "Plans": [
                    {"Node Type": "Index Scan", "Actual Rows": 600.0, "Shared Read Blocks": 900}
                ],
            }
        }
    ]
    assert plans.index_scan_stats(plan) == (600, 900)
    with pytest.raises(CheckFailed, match="no Index Scan"):
        plans.index_scan_stats([{"Plan": {"Node Type": "Seq Scan"}}])


def test_block_of_ctid() -> None:
    assert nvmstats.block_of("(12,3)") == 12 and nvmstats.block_of("(0,1)") == 0


def test_prefetch_summary() -> None:
    out = "ok   a\n7 passed, 0 failed\n== x\n34 passed, 1 failed\n"
    assert summary(out) == "34 passed, 1 failed"
    assert summary("nothing") is None


def test_redirect_ro_mappings_counts_mappings_not_areas() -> None:
    """The epoch probe counts a process's read-only mappings of one relation file: a
    mapping split into two areas is one, read-write mappings and other files (another
    segment, a longer name ending alike) are none."""
    maps = "\n".join(
        [
            "7f0000000000-7f0000100000 r--s 00000000 00:2a 11 /nvm/d/base/5/16400",
            "7f0000100000-7f0040000000 r--s 00100000 00:2a 11 /nvm/d/base/5/16400",
            "7f1000000000-7f1040000000 r--s 00000000 00:2a 11 /nvm/d/base/5/16400",
            "7f2000000000-7f2040000000 rw-s 00000000 00:2a 11 /nvm/d/base/5/16400",
            "7f3000000000-7f3040000000 r--s 00000000 00:2a 12 /nvm/d/base/5/16400.1",
            "7f4000000000-7f4040000000 r--s 00000000 00:2a 13 /nvm/d/base/5/116400",
            "7f5000000000-7f5000001000 r-xp 00000000 08:01 14 /usr/lib/libc.so.6",
        ]
    )
    assert redirect.ro_mappings(maps, "base/5/16400") == 2
    assert redirect.ro_mappings(maps, "base/5/16401") == 0


def test_btree_key_data_is_pageinspects_int4_key() -> None:
    # bt_page_items()'s data of an int4 key: 4 little-endian bytes, padded to 8
    assert redirect_btree._key_data(43) == "2b 00 00 00 00 00 00 00"
    assert redirect_btree._key_data(256) == "00 01 00 00 00 00 00 00"
