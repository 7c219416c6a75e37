"""bench/core/dram.py: the arithmetic over DRAM samples, and the sampler on this process."""

from __future__ import annotations

import mmap
import os

import pytest

from bench.core import dram, procfs

MB = 1 << 20


def test_peaks_total_is_the_largest_sum_of_one_sample() -> None:
    s = [
        dram.Sample(100 * MB, 10 * MB),
        dram.Sample(150 * MB, 2 * MB),  # shared peaks here ...
        dram.Sample(120 * MB, 40 * MB),  # ... backend and the sum here
    ]
    p = dram.peaks(s)
    assert p["shared_mb"] == 150.0 and p["backend_mb"] == 40.0
    assert p["total_mb"] == 160.0  # not 150 + 40: the peaks were not at the same time
    assert p["shared_start_mb"] == 100.0 and p["samples"] == 3


def test_peaks_with_missing_parts() -> None:
    p = dram.peaks([dram.Sample(None, 5 * MB), dram.Sample(64 * MB, None)])
    assert p == {
        "shared_mb": 64.0,
        "backend_mb": 5.0,
        "total_mb": None,  # no sample had both
        "shared_start_mb": 64.0,
        "samples": 2,
    }
    assert dram.peaks([])["shared_mb"] is None
    assert dram.peaks([dram.Sample(1536 * 1024, 0)])["shared_mb"] == 1.5  # MB, one decimal


def test_sampler_on_a_shared_mapping_of_this_process() -> None:
    m = mmap.mmap(-1, 64 * MB, mmap.MAP_SHARED)  # the largest /dev/zero mapping here
    m2 = mmap.mmap(-1, 4 * MB, mmap.MAP_SHARED)  # another one: counted too
    try:
        for off in range(0, 8 * MB, mmap.PAGESIZE):
            m[off] = 1
        for off in range(0, MB, mmap.PAGESIZE):
            m2[off] = 1
        me = os.getpid()
        s = dram.Sampler(me, me, interval=0.01)
        assert s.segments[0][1] - s.segments[0][0] == 64 * MB
        assert (s.segments[1][1] - s.segments[1][0]) == 4 * MB
        s.start()
        for off in range(8 * MB, 16 * MB, mmap.PAGESIZE):
            m[off] = 1
        got = s.stop()
        assert got["samples"] >= 2 and got["interval_s"] == 0.01
        assert got["shared_source"] in (dram.SOURCE_MINCORE, dram.SOURCE_MAPPED)
        assert got["shared_start_mb"] == 9.0 and got["shared_mb"] == 17.0  # 8 (+8) + 1
        assert got["backend_mb"] > 0 and got["total_mb"] >= got["shared_mb"]
    finally:
        m.close()
        m2.close()


def test_sampler_without_mincore_takes_the_most_one_process_has_mapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(procfs, "resident_bytes", lambda pid, seg: None)  # not CAP_SYS_ADMIN
    m = mmap.mmap(-1, 64 * MB, mmap.MAP_SHARED)
    m2 = mmap.mmap(-1, 4 * MB, mmap.MAP_SHARED)
    try:
        for off in range(0, 4 * MB, mmap.PAGESIZE):
            m[off] = 1
        for off in range(0, MB, mmap.PAGESIZE):
            m2[off] = 1
        me = os.getpid()
        s = dram.Sampler(me, me, interval=0.01)
        s.start()
        got = s.stop()
        assert got["shared_source"] == dram.SOURCE_MAPPED and got["shared_mb"] == 5.0
    finally:
        m.close()
        m2.close()


def test_sampler_without_a_segment() -> None:
    s = dram.Sampler(2**22 + 12345, 2**22 + 12346)  # no such processes
    s.start()
    got = s.stop()
    assert got["shared_mb"] is None and got["backend_mb"] is None
    assert got["shared_source"] == "no shared anonymous memory found"
    assert procfs.memory_status(2**22 + 12346) is None
