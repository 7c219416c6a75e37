"""DRAM of a PostgreSQL server during a query: the resident pages of its shared memory (the
buffer pool and the rest of the main segment) and the private memory of the measured
backend, sampled at an interval by a thread (:class:`Sampler`); the readers are
:mod:`bench.core.procfs`'s.

* **shared**: the pages of the server's shared memory resident in DRAM: its shared
  anonymous mappings (:func:`procfs.shared_segments` of the postmaster: the main segment
  with the buffer pool, the System V one). Best: every resident page, whoever touched it,
  the prewarm's exited backend included (:func:`procfs.resident_bytes`, mincore: needs
  CAP_SYS_ADMIN, i.e. root). Otherwise the most any one live server process has mapped
  of them (``Rss`` of :func:`procfs.vma_fields` of the postmaster and its children; a lower bound).
  Not the tmpfs files that emulate persistent memory: se1/se2 map them, and a process's
  ``RssShmem`` counts them with the pool.
* **hugetlb** (``huge_pages = on|try`` with ``vm.nr_hugepages`` reserved: the main segment
  is a hugetlb mapping, ``/anon_hugepage``): its huge pages are in neither ``RssShmem`` nor
  ``Rss``, and mincore of a fresh mapping of its object sees none of them (it asks the
  asking process's page tables). *shared* counts the huge pages the server **touched**:
  those allocated to the segment's object, whoever touched them
  (:func:`procfs.hugetlb_allocated_bytes`, root), otherwise the most one live process has
  mapped (``Shared_Hugetlb`` + ``Private_Hugetlb``, :func:`procfs.hugetlb_mapped`). The record's
  ``hugetlb`` section also has what the server **reserved**: PostgreSQL maps the segment
  without MAP_NORESERVE, so the whole segment is taken from the pool at server start,
  touched or not, and no one else can have it (``reserved_mb``); and the machine's pool
  (``/proc/meminfo``: allocated + promised, ``HugePages_Total - Free + Rsvd``, and its size).
* **backend**: the measured backend's private memory (``RssAnon``: heap, work_mem, sorts and
  hashes, its prefetch helper threads' stacks; :func:`procfs.memory_status`).

A sample is taken when the sampler starts and when it stops, and every ``interval`` seconds
in between, so a peak shorter than the interval can be missed. :func:`peaks` is the
arithmetic over the samples: the peak of each part and the peak of their sum in one sample
(at most the sum of the peaks).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.core import procfs

INTERVAL_S = 0.05
MB = 1 << 20

#: how the shared part was measured (a run record's ``dram.shared_source``)
SOURCE_MINCORE = "resident pages of the shared memory (mincore)"
SOURCE_MAPPED = "most of the shared memory one live server process has mapped (smaps Rss)"
#: how the hugetlb part of it was measured (added to ``shared_source``)
SOURCE_HUGETLB_ALLOCATED = (
    "hugetlb pages touched: allocated to the segment, by any process (st_blocks of map_files)"
)
SOURCE_HUGETLB_MAPPED = (
    "hugetlb pages touched: most one live server process has mapped "
    "(smaps Shared_Hugetlb + Private_Hugetlb)"
)


@dataclass(frozen=True)
class Sample:
    """One sample in bytes (None: not readable at that moment); ``hugetlb``: the part of
    ``shared`` in hugetlb pages (None: the server has no hugetlb segment)."""

    shared: int | None
    backend: int | None
    hugetlb: int | None = None


def peaks(samples: Sequence[Sample]) -> dict[str, Any]:
    """The peaks over ``samples`` in MB: ``shared``, ``backend``, and ``total`` (the largest
    shared + backend of one sample, taken only from samples that have both), the shared
    memory of the first sample (``shared_start``; what the restart or prewarm left) and the
    number of samples. A part no sample has is None."""

    def top(xs: list[int]) -> float | None:
        return round(max(xs) / MB, 1) if xs else None

    shared = [s.shared for s in samples if s.shared is not None]
    backend = [s.backend for s in samples if s.backend is not None]
    both = [s.shared + s.backend for s in samples if s.shared is not None and s.backend is not None]
    return {
        "shared_mb": top(shared),
        "backend_mb": top(backend),
        "total_mb": top(both),
        "shared_start_mb": round(shared[0] / MB, 1) if shared else None,
        "samples": len(samples),
    }


class Sampler:
    """Samples the DRAM of the server of ``postmaster`` and of its backend ``backend``
    every ``interval`` seconds between :meth:`start` and :meth:`stop`."""

    def __init__(self, postmaster: int, backend: int, interval: float = INTERVAL_S) -> None:
        self.postmaster = postmaster
        self.backend = backend
        self.interval = interval
        self.segments = procfs.shared_segments(postmaster)
        #: the segments in hugetlb pages (start -> page size)
        self.huge = {
            start: size
            for start in procfs.hugetlb_segments(postmaster)
            if (size := procfs.hugetlb_page_size(postmaster, start)) is not None
        }
        self.source: str | None = None
        self.huge_source: str | None = None
        self.pools: list[dict[str, int]] = []
        self._huge_now: int | None = None
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _resident(self, seg: tuple[int, int]) -> int | None:
        """Bytes of segment ``seg`` in DRAM, touched by any process (None: not root)."""
        if seg[0] in self.huge:
            return procfs.hugetlb_allocated_bytes(self.postmaster, seg)
        return procfs.resident_bytes(self.postmaster, seg)

    def shared_bytes(self) -> int | None:
        """The shared part of a sample (:class:`Sample`); its hugetlb part is left in
        ``_huge_now``."""
        self._huge_now = None
        if not self.segments:
            return None
        if self.source != SOURCE_MAPPED:
            got = [self._resident(seg) for seg in self.segments]
            if None not in got:
                self.source = SOURCE_MINCORE
                self.huge_source = SOURCE_HUGETLB_ALLOCATED if self.huge else None
                if self.huge:
                    self._huge_now = sum(
                        v for seg, v in zip(self.segments, got, strict=True) if seg[0] in self.huge
                    )
                return sum(v for v in got if v is not None)
            self.source = SOURCE_MAPPED
            self.huge_source = SOURCE_HUGETLB_MAPPED if self.huge else None
        # the process that has mapped the most (base + huge pages) of the shared memory
        best: tuple[int, int] | None = None
        for p in [self.postmaster, *procfs.children(self.postmaster)]:
            fields = [procfs.vma_fields(p, start) for start, _ in self.segments]
            if all(f is None for f in fields):
                continue
            mapped = huge = 0
            for (start, _), f in zip(self.segments, fields, strict=True):
                f = f or {}
                mapped += f.get("Rss", 0)
                if start in self.huge:  # its pages are not Rss
                    huge += procfs.hugetlb_mapped(f)
            if best is None or mapped + huge > best[0]:
                best = (mapped + huge, huge)
        if best is None:
            return None
        if self.huge:
            self._huge_now = best[1]
        return best[0]

    def sample(self) -> Sample:
        mem = procfs.memory_status(self.backend)
        s = Sample(self.shared_bytes(), mem.get("RssAnon") if mem else None, self._huge_now)
        self.samples.append(s)
        return s

    def pool(self) -> None:
        """The machine's hugetlb pool now (only for a server with a hugetlb segment)."""
        if self.huge:
            now = procfs.hugepages()
            if now is not None:
                self.pools.append(now)

    def hugetlb(self) -> dict[str, Any] | None:
        """The record's ``hugetlb`` section (None: no hugetlb segment): the touched peak
        (counted in ``shared_mb``), the reserved segment, the pool."""
        if not self.huge:
            return None
        touched = [s.hugetlb for s in self.samples if s.hugetlb is not None]
        reserved = sum(end - start for start, end in self.segments if start in self.huge)
        out: dict[str, Any] = {
            "counted_in_shared": "touched",
            "touched_mb": round(max(touched) / MB, 1) if touched else None,
            "touched_start_mb": round(touched[0] / MB, 1) if touched else None,
            "reserved_mb": round(reserved / MB, 1),
            "page_kb": max(self.huge.values()) // 1024,
            "measured_as": self.huge_source,
        }
        if self.pools:
            page = self.pools[-1]["page_bytes"]
            out["pool_mb"] = round(max(p["total"] for p in self.pools) * page / MB, 1)
            out["pool_taken_mb"] = round(
                max(p["total"] - p["free"] + p["rsvd"] for p in self.pools) * page / MB, 1
            )
            out["pool_rsvd_mb"] = round(max(p["rsvd"] for p in self.pools) * page / MB, 1)
        return out

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        self.pool()
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="dram-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """The last sample, then :func:`peaks` with the interval and the shared part's
        source."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        self.pool()
        source = self.source or "no shared anonymous memory found"
        out = {
            **peaks(self.samples),
            "interval_s": self.interval,
            "shared_source": f"{source}; {self.huge_source}" if self.huge_source else source,
        }
        huge = self.hugetlb()
        if huge is not None:
            out["hugetlb"] = huge
        return out
