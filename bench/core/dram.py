"""DRAM of a PostgreSQL server during a query: the resident pages of its shared memory (the
buffer pool and the rest of the main segment) and the private memory of the measured
backend, sampled at an interval by a thread (:class:`Sampler`); the readers are
:mod:`bench.core.procfs`'s.

* **shared**: the pages of the server's main shared memory segment resident in DRAM
  (:func:`procfs.shared_segment` of the postmaster). Best: every resident page of the
  segment, whoever touched it, the prewarm's exited backend included
  (:func:`procfs.resident_bytes`, mincore: needs CAP_SYS_ADMIN, i.e. root). Otherwise the
  most any one live server process has mapped of it (:func:`procfs.vma_rss` of the
  postmaster and its children; a lower bound). Not the tmpfs files that emulate persistent
  memory: se1/se2 map them, and a process's ``RssShmem`` counts them with the pool.
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
SOURCE_MINCORE = "resident pages of the segment (mincore)"
SOURCE_MAPPED = "most of the segment one live server process has mapped (smaps Rss)"


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
        self.segment = procfs.shared_segment(postmaster)
        self.source: str | None = None
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def shared_bytes(self) -> int | None:
        if self.segment is None:
            return None
        if self.source != SOURCE_MAPPED:
            got = procfs.resident_bytes(self.postmaster, self.segment)
            if got is not None:
                self.source = SOURCE_MINCORE
                return got
            self.source = SOURCE_MAPPED
        pids = [self.postmaster, *procfs.children(self.postmaster)]
        rss = [v for v in (procfs.vma_rss(p, self.segment[0]) for p in pids) if v is not None]
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
            "shared_source": self.source or "no shared memory segment found",
        }
