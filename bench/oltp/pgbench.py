"""pgbench: the command of one measured run, its summary and its per-transaction log.

The measured run writes the per-transaction log (``--log``: one line per transaction,
``client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]``,
``time`` the latency in µs or ``failed`` / ``skipped``; one file per pgbench thread). From it
:func:`parse_logs` computes what the report gives: the latency percentiles (overall and per
operation) and the per-second aggregates (transactions completed in each second,
:class:`Second`), which are written as ``per_second.csv`` (the same numbers pgbench's
``--aggregate-interval 1`` would log, from the same run).
"""

from __future__ import annotations

import gzip
import math
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.oltp import workloads


def command(
    pgbench: Path,
    script_args: Sequence[str],
    *,
    clients: int,
    threads: int,
    seconds: float,
    records: int,
    dbname: str,
    log_prefix: Path | None,
    seed: int = workloads.RANDOM_SEED,
) -> list[str]:
    """The pgbench command of one run (``log_prefix``: per-transaction log, else none;
    ``seed``: its ``--random-seed``, the same sequence of keys for the same seed)."""
    cmd = [
        str(pgbench),
        "-n",  # no vacuum of pgbench's own tables before the run
        "-M",
        "prepared",
        "-c",
        str(clients),
        "-j",
        str(max(1, min(threads, clients))),
        "-T",
        str(max(1, math.ceil(seconds))),
        "-D",
        f"records={records}",
        f"--random-seed={seed}",
        *script_args,
    ]
    if log_prefix is not None:
        cmd += ["--log", f"--log-prefix={log_prefix}"]
    return [*cmd, dbname]


_SUMMARY = {
    "transactions": re.compile(r"number of transactions actually processed:\s*(\d+)"),
    "failed": re.compile(r"number of failed transactions:\s*(\d+)"),
    "latency_avg_ms": re.compile(r"latency average = ([\d.]+) ms"),
    "latency_stddev_ms": re.compile(r"latency stddev = ([\d.]+) ms"),
    "initial_connection_ms": re.compile(r"initial connection time = ([\d.]+) ms"),
    "tps": re.compile(r"tps = ([\d.]+) \(without initial connection time\)"),
}


def parse_summary(stdout: str) -> dict[str, float]:
    """pgbench's closing summary: transactions, failed, latency average/stddev (ms), tps."""
    out: dict[str, float] = {}
    for k, rx in _SUMMARY.items():
        m = rx.search(stdout)
        if m:
            out[k] = float(m.group(1))
    return out


@dataclass
class Second:
    """Transactions that completed within one second of the run."""

    epoch: int
    count: int = 0
    failed: int = 0
    latency_sum_us: int = 0
    latency_max_us: int = 0

    @property
    def latency_avg_ms(self) -> float | None:
        return self.latency_sum_us / self.count / 1000 if self.count else None


@dataclass
class LogStats:
    scripts: list[str]
    latencies: dict[int, list[int]] = field(default_factory=dict)  # script_no -> µs
    seconds: dict[int, Second] = field(default_factory=dict)
    failed: int = 0
    skipped: int = 0
    lines: int = 0
    bad_lines: int = 0

    def all_latencies(self) -> list[int]:
        return sorted(x for v in self.latencies.values() for x in v)

    def full_seconds(self) -> list[Second]:
        """The per-second records without the first and last (partial) seconds."""
        secs = [self.seconds[k] for k in sorted(self.seconds)]
        return secs[1:-1] if len(secs) > 2 else secs


def parse_lines(lines: Iterable[str], stats: LogStats) -> None:
    for line in lines:
        parts = line.split()
        if len(parts) < 6:
            if line.strip():
                stats.bad_lines += 1
            continue
        stats.lines += 1
        try:
            script = int(parts[3])
            epoch = int(parts[4])
        except ValueError:
            stats.bad_lines += 1
            continue
        sec = stats.seconds.get(epoch)
        if sec is None:
            sec = stats.seconds[epoch] = Second(epoch)
        if parts[2] == "failed":
            stats.failed += 1
            sec.failed += 1
            continue
        if parts[2] == "skipped":
            stats.skipped += 1
            continue
        try:
            lat = int(parts[2])
        except ValueError:
            stats.bad_lines += 1
            continue
        stats.latencies.setdefault(script, []).append(lat)
        sec.count += 1
        sec.latency_sum_us += lat
        sec.latency_max_us = max(sec.latency_max_us, lat)


def log_files(prefix: Path) -> list[Path]:
    """pgbench's log files of ``prefix``: ``<prefix>.<pid>`` and ``<prefix>.<pid>.<thread>``."""
    return sorted(p for p in prefix.parent.glob(prefix.name + ".*") if not p.name.endswith(".gz"))


def parse_logs(files: Sequence[Path], scripts: list[str]) -> LogStats:
    stats = LogStats(scripts)
    for f in files:
        with open(f, errors="replace") as fh:
            parse_lines(fh, stats)
    return stats


def compress_logs(files: Sequence[Path], dest: Path) -> int:
    """Concatenate the thread logs into one gzip file; remove them. Returns its size."""
    with gzip.open(dest, "wb", compresslevel=3) as out:
        for f in files:
            with open(f, "rb") as fh:
                shutil.copyfileobj(fh, out)
            f.unlink()
    return dest.stat().st_size


def percentile(sorted_xs: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (``p`` in 0..100) of sorted values."""
    if not sorted_xs:
        return None
    k = max(0, min(len(sorted_xs) - 1, math.ceil(p / 100 * len(sorted_xs)) - 1))
    return float(sorted_xs[k])


def latency_summary(sorted_us: Sequence[int]) -> dict[str, float | None]:
    """p50/p95/p99/max and mean of latencies in µs, as milliseconds."""

    def ms(x: float | None) -> float | None:
        return None if x is None else round(x / 1000, 4)

    return {
        "n": len(sorted_us),
        "mean_ms": ms(sum(sorted_us) / len(sorted_us)) if sorted_us else None,
        "p50_ms": ms(percentile(sorted_us, 50)),
        "p95_ms": ms(percentile(sorted_us, 95)),
        "p99_ms": ms(percentile(sorted_us, 99)),
        "max_ms": ms(float(sorted_us[-1])) if sorted_us else None,
    }


def per_second_summary(secs: Sequence[Second]) -> dict[str, float | None]:
    """Spread of the per-second throughput: min, p5, median, p95, max, mean."""
    xs = sorted(float(s.count) for s in secs)
    return {
        "seconds": len(xs),
        "min": xs[0] if xs else None,
        "p5": percentile(xs, 5),
        "median": percentile(xs, 50),
        "p95": percentile(xs, 95),
        "max": xs[-1] if xs else None,
        "mean": sum(xs) / len(xs) if xs else None,
    }


def write_per_second(secs: Sequence[Second], dest: Path) -> None:
    """per_second CSV: second (from the first), epoch, committed, failed, latency avg/max."""
    t0 = secs[0].epoch if secs else 0
    lines = ["second,epoch,transactions,failed,latency_avg_ms,latency_max_ms"]
    for s in secs:
        avg = s.latency_avg_ms
        lines.append(
            f"{s.epoch - t0},{s.epoch},{s.count},{s.failed},"
            f"{'' if avg is None else f'{avg:.3f}'},{s.latency_max_us / 1000:.3f}"
        )
    dest.write_text("\n".join(lines) + "\n")
