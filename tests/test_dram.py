"""bench/core/dram.py: the arithmetic over DRAM samples, and the sampler on this process."""

from __future__ import annotations

import functools
import inspect
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _on_fake_proc(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Every reader of bench.core.procfs that takes a /proc root reads ``root`` unless its
    caller gives one."""
    for name, fn in list(vars(procfs).items()):
        if not inspect.isfunction(fn) or "root" not in inspect.signature(fn).parameters:
            continue
        monkeypatch.setattr(procfs, name, _at(fn, root))


def _at(fn: Callable[..., Any], root: Path) -> Callable[..., Any]:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def reader(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind_partial(*args, **kwargs)
        bound.arguments.setdefault("root", root)
        return fn(*bound.args, **bound.kwargs)

    return reader


def test_sampler_counts_the_hugetlb_pages_one_process_has_mapped(
    monkeypatch: pytest.MonkeyPatch, huge_proc: Path
) -> None:
    """Not root (no map_files): the most one server process has mapped, its huge pages
    (smaps Shared_Hugetlb + Private_Hugetlb; Rss and RssShmem do not have them) with the
    base pages of the other segment; the reserved segment and the pool beside it."""
    _on_fake_proc(monkeypatch, huge_proc)
    s = dram.Sampler(42, 43, interval=0.01)
    s.start()
    got = s.stop()
    assert got["shared_mb"] == 6.0  # backend 43: 3 huge pages + 8 kB of the SysV segment
    assert s.huge == {0x7F0000000000: 2 << 20}
    assert got["backend_mb"] == 5.0 and got["total_mb"] == 11.0
    assert got["shared_source"] == f"{dram.SOURCE_MAPPED}; {dram.SOURCE_HUGETLB_MAPPED}"
    assert got["hugetlb"] == {
        "counted_in_shared": "touched",
        "touched_mb": 6.0,
        "touched_start_mb": 6.0,
        "reserved_mb": 32.0,  # the whole segment, touched or not: taken from the pool
        "page_kb": 2048,
        "measured_as": dram.SOURCE_HUGETLB_MAPPED,
        "pool_mb": 48.0,  # vm.nr_hugepages = 24
        "pool_taken_mb": 36.0,  # (24 - 18 + 12) x 2 MB: allocated + promised
        "pool_rsvd_mb": 24.0,
    }


def test_sampler_counts_the_hugetlb_pages_allocated_to_the_segment(
    monkeypatch: pytest.MonkeyPatch, huge_proc: Path
) -> None:
    """Root: every huge page allocated to the segment, by whoever touched it (an exited
    backend's too): st_blocks of its map_files entry, not mincore, which sees no huge
    page the asking process has not touched itself."""
    (huge_proc / "42" / "map_files").mkdir()
    (huge_proc / "42" / "map_files" / "7f0000000000-7f0002000000").write_bytes(b"\1" * (8 << 20))
    _on_fake_proc(monkeypatch, huge_proc)
    # the SysV segment's 8 kB (base pages: mincore, which needs the real object)
    monkeypatch.setattr(
        procfs, "resident_bytes", lambda pid, seg: 8192 if seg[0] == 0x7F2000000000 else None
    )
    s = dram.Sampler(42, 43, interval=0.01)
    s.start()
    got = s.stop()
    assert got["shared_mb"] == 8.0  # 4 huge pages allocated + 8 kB
    assert got["shared_source"] == f"{dram.SOURCE_MINCORE}; {dram.SOURCE_HUGETLB_ALLOCATED}"
    assert got["hugetlb"]["touched_mb"] == 8.0 and got["hugetlb"]["reserved_mb"] == 32.0
    assert got["hugetlb"]["measured_as"] == dram.SOURCE_HUGETLB_ALLOCATED


def test_sampler_without_hugetlb_has_no_hugetlb_section() -> None:
    m = mmap.mmap(-1, 4 * MB, mmap.MAP_SHARED)
    try:
        me = os.getpid()
        s = dram.Sampler(me, me, interval=0.01)
        assert s.huge == {}
        s.start()
        got = s.stop()
        assert "hugetlb" not in got and "hugetlb" not in got["shared_source"]
    finally:
        m.close()
