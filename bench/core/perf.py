"""``perf record`` / ``perf report`` for the jobs' ``--profile`` (tpch, oltp): where CPU time goes.

Sampling uses the software clock (``-e cpu-clock``), because a machine may expose no
hardware counters (this VM does not): shares are of CPU time on the sampled threads, not of
cycles. A recording is either of some processes and all their threads (``pids``: a tpch
query's backend and its prefetch helpers) or of the whole machine (``pids=None``: an OLTP
run's backends come and go with pgbench's connections, and its clients and the kernel's idle
time belong in the picture).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOP = 10  # functions kept per profile
_LINE_RE = re.compile(
    r"^\s*(?P<pct>\d+(?:\.\d+)?)%\s+(?:(?P<comm>\S+)\s+)?(?P<dso>\S+)\s+\[(?P<kind>.)\]\s+"
    r"(?P<sym>.+?)\s*$"
)


def available() -> str | None:
    """None if ``perf`` can record here, else why not."""
    if shutil.which("perf") is None:
        return "no perf binary (Debian package linux-perf)"
    return None


class PerfRecord:
    """``perf record -e cpu-clock -g`` between :meth:`start` and :meth:`stop`: of the
    processes ``pids`` (all their threads), or of every CPU when ``pids`` is None."""

    def __init__(self, pids: Sequence[int] | None, out: Path, frequency: int = 4999) -> None:
        self.pids = list(pids) if pids is not None else None
        self.out = out
        self.frequency = frequency
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        target = ["-a"] if self.pids is None else ["-p", ",".join(map(str, self.pids))]
        return [
            "perf", "record", "-q", "-e", "cpu-clock", "-F", str(self.frequency), "-g",
            *target, "-o", str(self.out),
        ]  # fmt: skip

    def start(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        # perf attaches to every thread, then writes its header: wait for the file
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.out.exists() and self.out.stat().st_size > 0:
                break
            time.sleep(0.01)
        time.sleep(0.05)

    def stop(self) -> str | None:
        """Stop recording; None if the data was written, else perf's complaint."""
        if self.proc is None:
            return "not started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "perf record did not stop"
        if self.proc.returncode not in (0, -signal.SIGINT, 130) or not self.out.exists():
            return (err or b"").decode(errors="replace").strip()[-300:] or "perf record failed"
        return None


def parse_report(text: str, top: int = TOP) -> list[dict[str, Any]]:
    """``perf report --stdio --no-children --sort [comm,]dso,sym -g none`` output: the first
    ``top`` functions as ``{"pct", "dso", "symbol", "kernel"}`` (and ``"comm"``, the
    command name, when the report was sorted by it)."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE_RE.match(line)
        if not m:
            continue
        rec: dict[str, Any] = {
            "pct": float(m["pct"]),
            "dso": m["dso"],
            "symbol": m["sym"],
            "kernel": m["kind"] == "k",
        }
        if m["comm"] is not None:
            rec["comm"] = m["comm"]
        out.append(rec)
        if len(out) >= top:
            break
    return out


def top_symbols(data: Path, top: int = TOP, by_command: bool = False) -> list[dict[str, Any]] | str:
    """The ``top`` functions by self time of a ``perf record`` file (per command name too
    when ``by_command``), or why not."""
    sort = "comm,dso,sym" if by_command else "dso,sym"
    p = subprocess.run(
        [
            "perf", "report", "-i", str(data), "--stdio", "--no-children",
            "--sort", sort, "-g", "none", "--percent-limit", "0.5",
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if p.returncode != 0:
        return f"perf report failed: {p.stderr.strip()[-300:]}"
    return parse_report(p.stdout, top)
