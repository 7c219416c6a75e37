"""``./pgnvm tpch --profile``: where a query's time goes, by function (``perf record``).

For each profiled run, ``perf record -e cpu-clock -F 4999 -g -p <backend pid>``
(:mod:`bench.core.perf`) samples the backend and all its threads (se2's prefetch helpers
included) while the query runs: the software clock, because a machine may expose no
hardware counters (this VM does not), so shares are of CPU time on the sampled threads, not
of cycles. The data stays in
``<out>/perf/<config>-<query>-r<rep>.data`` (``perf report -i`` it); the run's record gets the
top functions by self time (:func:`top_symbols`) and ``profile.md`` lists them per
configuration and query, for the first repetition.

Only ``--repeat``'s first run of each (configuration, query) is profiled: sampling costs the
backend a few percent, and the other runs stay unperturbed for the timings.
"""

from __future__ import annotations

from typing import Any

from bench.core.perf import PerfRecord, available, parse_report, top_symbols

__all__ = ["PerfRecord", "available", "parse_report", "render", "top_symbols"]


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
