"""DRAM of a PostgreSQL server during a query: the resident pages of its shared memory (the
buffer pool and the rest of the main segment) and the private memory of the measured
backend, sampled at an interval by a thread (:class:`Sampler`); the readers are
:mod:`bench.core.procfs`'s.

* **shared**: the pages of the server's shared memory resident in DRAM: its shared
  anonymous mappings (:func:`procfs.shared_segments` of the postmaster: the main segment
  with the buffer pool, the System V one). Best: every resident page, whoever touched it,
  the prewarm's exited backend included (:func:`procfs.resident_bytes`, mincore: needs
  CAP_SYS_ADMIN, i.e. root). Otherwise the most any one live server process has mapped
  of them (:func:`procfs.vma_rss` of the postmaster and its children; a lower bound).
  Not the tmpfs files that emulate persistent memory: se1/se2 map them, and a process's
  ``RssShmem`` counts them with the pool.
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


@dataclass(frozen=True)
class Sample:
    """One sample in bytes (None: not readable at that moment)."""

    shared: int | None
    backend: int | None


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
        self.source: str | None = None
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def shared_bytes(self) -> int | None:
        if not self.segments:
            return None
        if self.source != SOURCE_MAPPED:
            got = [procfs.resident_bytes(self.postmaster, seg) for seg in self.segments]
            if None not in got:
                self.source = SOURCE_MINCORE
                return sum(v for v in got if v is not None)
            self.source = SOURCE_MAPPED
        rss = []
        for p in [self.postmaster, *procfs.children(self.postmaster)]:
            mine = [procfs.vma_rss(p, start) for start, _ in self.segments]
            if any(v is not None for v in mine):
                rss.append(sum(v for v in mine if v is not None))
        return max(rss) if rss else None

    def sample(self) -> Sample:
        mem = procfs.memory_status(self.backend)
        s = Sample(self.shared_bytes(), mem.get("RssAnon") if mem else None)
        self.samples.append(s)
        return s

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
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
        return {
            **peaks(self.samples),
            "interval_s": self.interval,
            "shared_source": self.source or "no shared anonymous memory found",
        }
