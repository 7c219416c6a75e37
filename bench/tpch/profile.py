"""``./pgnvm tpch --profile``: where a query's time goes, by function (``perf record``).

For each profiled run, ``perf record -e cpu-clock -F 4999 -g -p <backend pid>`` samples the
backend and all its threads (se2's prefetch helpers included) while the query runs: the
software clock, because a machine may expose no hardware counters (this VM does not), so
shares are of CPU time on the sampled threads, not of cycles. The data stays in
``<out>/perf/<config>-<query>-r<rep>.data`` (``perf report -i`` it); the run's record gets the
top functions by self time (:func:`top_symbols`) and ``profile.md`` lists them per
configuration and query, for the first repetition.

Only ``--repeat``'s first run of each (configuration, query) is profiled: sampling costs the
backend a few percent, and the other runs stay unperturbed for the timings.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

FREQUENCY = 4999  # samples per second and thread
TOP = 10  # functions kept per run
_LINE_RE = re.compile(
    r"^\s*(?P<pct>\d+(?:\.\d+)?)%\s+(?P<dso>\S+)\s+\[(?P<kind>.)\]\s+(?P<sym>.+?)\s*$"
)


def available() -> str | None:
    """None if ``perf`` can record here, else why not."""
    if shutil.which("perf") is None:
        return "no perf binary (Debian package linux-perf)"
    return None


class PerfRecord:
    """``perf record`` of one process (all its threads) between :meth:`start` and
    :meth:`stop`."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid = pid
        self.out = out
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                "perf", "record", "-q", "-e", "cpu-clock", "-F", str(FREQUENCY), "-g",
                "-p", str(self.pid), "-o", str(self.out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
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
    """``perf report --stdio --no-children --sort dso,sym -g none`` output: the first
    ``top`` functions as ``{"pct", "dso", "symbol", "kernel"}``."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE_RE.match(line)
        if not m:
            continue
        out.append(
            {
                "pct": float(m["pct"]),
                "dso": m["dso"],
                "symbol": m["sym"],
                "kernel": m["kind"] == "k",
            }
        )
        if len(out) >= top:
            break
    return out


def top_symbols(data: Path, top: int = TOP) -> list[dict[str, Any]] | str:
    """The ``top`` functions by self time of a ``perf record`` file, or why not."""
    p = subprocess.run(
        [
            "perf", "report", "-i", str(data), "--stdio", "--no-children",
            "--sort", "dso,sym", "-g", "none", "--percent-limit", "0.5",
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if p.returncode != 0:
        return f"perf report failed: {p.stderr.strip()[-300:]}"
    return parse_report(p.stdout, top)


def render(records: list[dict[str, Any]]) -> str:
    """profile.md: per profiled run, wall time and the top functions."""
    lines = [
        "# Where the time goes (perf record -e cpu-clock, self time)",
        "",
        "Shares of the CPU samples of the query's backend and its threads (prefetch helpers "
        "included) while the query ran; software clock (no hardware counters assumed). "
        "`[k]`: kernel. Raw data: `perf/` (`perf report -i <file>`).",
        "",
    ]
    for r in records:
        prof = r.get("profile")
        if prof is None:
            continue
        q = f"Q{int(r['query']):02d}"
        head = f"## {q} {r['config']} (run {r['rep']}, {r.get('wall_s', 0):.3f} s)"
        lines += [head, ""]
        if isinstance(prof, str):
            lines += [f"not profiled: {prof}", ""]
            continue
        lines += ["| self | function | where |", "|---|---|---|"]
        for s in prof:
            kind = " [k]" if s["kernel"] else ""
            lines.append(f"| {s['pct']:.1f}% | `{s['symbol']}`{kind} | {s['dso']} |")
        lines.append("")
    return "\n".join(lines) + "\n"
