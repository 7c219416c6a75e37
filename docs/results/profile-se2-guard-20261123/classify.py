"""Where the CPU time of a TPC-H query's backend and its prefetch helper goes, from the
perf.data files of ``./pgnvm tpch --profile`` (perf record -e cpu-clock on the backend and
its threads). Prints one Markdown row per run: shares of all samples, by thread and class.

    python3 classify.py RESULTS_DIR/perf
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

#: symbol classes, first match wins (self time)
CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("checksum", re.compile(r"pg_checksum")),
    ("fault-in", re.compile(r"step_touch|nvm_touch_mapping|nvm_guarded")),
    ("helper copy", re.compile(r"nvm_helper_copy|memmove|memcpy")),
    ("verdicts", re.compile(r"NvmPrefetch|nvm_verify_job|nvm_verdict|nvm_prefetch")),
    ("helper idle", re.compile(r"helper_main|helper_idle|sched_yield")),
)
#: "children% self% comm [k|.] symbol": self time is what is classified
LINE = re.compile(r"^\s+[\d.]+%\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.+?)\s*$")


def shares(data: Path) -> dict[tuple[str, str], float]:
    """(thread kind, class) -> % of all samples; kernel time is its own class."""
    out = subprocess.run(
        ["perf", "report", "-i", str(data), "--sort", "comm,sym", "--stdio", "-g", "none"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    acc: dict[tuple[str, str], float] = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        pct, comm, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        thread = "helper" if comm.startswith("nvmpf") else "backend"
        cls = "kernel" if kind == "k" else next((c for c, rx in CLASSES if rx.search(sym)), "rest")
        acc[(thread, cls)] = acc.get((thread, cls), 0.0) + pct
    return acc


def main() -> None:
    cols = ["checksum", "fault-in", "verdicts", "kernel", "rest"]
    hcols = ["helper copy", "checksum", "verdicts", "kernel", "helper idle"]
    print(
        "| run | backend: "
        + " | ".join(cols)
        + " | helper: "
        + " | ".join(hcols)
        + " | helper total |"
    )
    print("|---" * (2 + len(cols) + len(hcols)) + "|")
    for data in sorted(Path(sys.argv[1]).glob("*.data")):
        s = shares(data)
        b = [f"{s.get(('backend', c), 0.0):.1f}%" for c in cols]
        h = [f"{s.get(('helper', c), 0.0):.1f}%" for c in hcols]
        ht = sum(v for (t, _), v in s.items() if t == "helper")
        print(f"| {data.stem} | " + " | ".join(b) + " | " + " | ".join(h) + f" | {ht:.1f}% |")


if __name__ == "__main__":
    main()
