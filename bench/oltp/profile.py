"""``./pgnvm oltp --profile``: where the time of a measured run goes, per configuration.

For the first repetition of every point, while pgbench's measured run lasts:

* ``perf record -e cpu-clock -F 999 -a -g`` of the whole machine (:mod:`bench.core.perf`):
  the backends of pgbench's connections come and go with the run, and pgbench itself, the
  server's other processes and the kernel's idle time (``swapper``: CPUs waiting, e.g. for a
  lock holder) belong in the picture. The top functions by self time, per command name, go
  into the record; the data stays in ``perf/<point>.data`` (``perf report -i`` it).
* a sampler of the wait events of pgbench's active backends (``pg_stat_activity``, every
  :data:`WAIT_INTERVAL` s; ``CPU`` when a backend waits on nothing): which share of the
  backends' time went to ``LWLock:WALWrite``, ``IO:WalSync``, ``Client:ClientRead``, ...

``profile.md`` lists both per point. Only the first repetition is profiled: sampling costs
a few percent, and the other repetitions stay unperturbed for the throughput figures.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.core import perf

WAIT_INTERVAL = 0.02  # seconds between wait-event samples (50 Hz)
FREQUENCY = 999  # perf samples per second and CPU
TOP = 15

_WAITS_SQL = (
    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity "
    "WHERE application_name = 'pgbench' AND state = 'active' AND pid <> pg_backend_pid()"
)


class WaitSampler:
    """Counts the wait events of pgbench's active backends on its own connection (an
    autocommit one from ``connect``), from entering the ``with`` block to leaving it."""

    def __init__(
        self, connect: Callable[[], psycopg.Connection[Any]], interval: float = WAIT_INTERVAL
    ) -> None:
        self.connect = connect
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with self.connect() as c:
                while not self._stop.is_set():
                    for (w,) in c.execute(_WAITS_SQL).fetchall():
                        self.counts[str(w)] += 1
                    self.samples += 1
                    self._stop.wait(self.interval)
        except psycopg.Error as e:
            self.error = str(e).strip()[:300]

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def shares(self) -> dict[str, float]:
        """Each wait event's share of the backend samples, largest first."""
        total = sum(self.counts.values())
        if not total:
            return {}
        return {k: round(v / total, 4) for k, v in self.counts.most_common()}


class PointProfile:
    """perf of the machine and the wait sampler around one measured run."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], data: Path) -> None:
        self.perf = perf.PerfRecord(None, data, frequency=FREQUENCY)
        self.waits = WaitSampler(connect)
        self.why_not: str | None = "not run"

    def __enter__(self) -> PointProfile:
        self.perf.start()
        self.waits.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.waits.__exit__()
        self.why_not = self.perf.stop()

    def record(self) -> dict[str, Any]:
        """What goes into the point's record under ``"profile"``."""
        top = self.why_not or perf.top_symbols(self.perf.out, top=TOP, by_command=True)
        return {
            "functions": top,
            "waits": self.waits.shares(),
            "wait_samples": self.waits.samples,
            "wait_error": self.waits.error,
            "perf_data": self.perf.out.name,
        }


def render(records: list[dict[str, Any]]) -> str:
    """profile.md: per profiled point, tps, the wait events and the top functions."""
    lines = [
        "# Where the time goes (first repetition of each point)",
        "",
        "Wait events: share of the samples of pgbench's active backends "
        f"(`pg_stat_activity` every {WAIT_INTERVAL * 1000:.0f} ms; `CPU`: waiting on "
        "nothing). Functions: self time in `perf record -e cpu-clock -a` of the whole "
        "machine (software clock; `swapper` is idle CPU), by command. Raw data: `perf/` "
        "(`perf report -i <file>`).",
        "",
    ]
    for r in records:
        prof = r.get("profile")
        if prof is None:
            continue
        tps = r.get("tps")
        lines += [f"## {r['key']} ({f'{tps:,.0f} tps' if tps else r.get('status')})", ""]
        waits = prof.get("waits") or {}
        if waits:
            lines += ["| wait event | share |", "|---|---|"]
            lines += [f"| {k} | {v:.1%} |" for k, v in list(waits.items())[:8]]
            lines.append("")
        elif prof.get("wait_error"):
            lines += [f"wait events not sampled: {prof['wait_error']}", ""]
        funcs = prof.get("functions")
        if isinstance(funcs, str):
            lines += [f"not profiled: {funcs}", ""]
            continue
        lines += ["| self | command | function | where |", "|---|---|---|---|"]
        for s in funcs or []:
            kind = " [k]" if s["kernel"] else ""
            lines.append(
                f"| {s['pct']:.1f}% | {s.get('comm', '')} | `{s['symbol']}`{kind} | {s['dso']} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"
