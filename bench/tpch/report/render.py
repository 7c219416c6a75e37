"""The console summary table of a ``./pgnvm tpch`` run (the report's blocks are rendered by
:mod:`bench.core.blocks`)."""

from __future__ import annotations

from bench.core.blocks import fmt, pct, ratio
from bench.tpch.queries import qname
from bench.tpch.report.statistics import Analysis


def print_summary(a: Analysis) -> None:
    """The console summary of an :class:`~bench.tpch.report.statistics.Analysis`."""
    from rich.console import Console
    from rich.table import Table

    con = Console(highlight=False)
    if not con.is_terminal:
        con = Console(highlight=False, width=200)
    t = Table(
        # rich markup: \\[s] is a literal [s]
        title=f"TPC-H SF {a.plan['sf']:g}, data checksums {a.checksums}, method {a.method}: "
        "median wall-clock \\[s]" + (" (INTERRUPTED)" if a.interrupted else "")
    )
    t.add_column("query")
    for c in a.configs:
        t.add_column(c, justify="right")
    wrong = {(m["query"], m["config"]) for m in a.mismatches}
    for q in a.queries:
        row = [qname(q).upper()]
        for c in a.configs:
            cell = a.table.get((c, q))
            if cell is None:
                row.append("–")
            elif not cell.ok:
                row.append(f"[red]{cell.status_summary()}[/]")
            else:
                txt = f"{cell.median:.3f}"
                if (q, c) in wrong:
                    txt = f"[bold red]{txt} WRONG[/]"
                elif cell.status_summary() != "ok":
                    txt += "*"
                row.append(txt)
        t.add_row(*row)
    t.add_section()
    t.add_row(f"total ({len(a.common)})", *[fmt(a.summary[c].total, 2) for c in a.configs])
    t.add_row("geomean", *[fmt(a.summary[c].geomean, 3) for c in a.configs])
    for r in a.refs:
        t.add_row(f"GM ×{r}", *[ratio(a.summary[c].ratios.get(r)) for c in a.configs])
    t.add_row("kernel share", *[pct(a.kernel_total(c)) for c in a.configs])
    t.add_row("DRAM peak \\[MB]", *[fmt(a.dram(c)["total"], 0) for c in a.configs])
    if a.helper_configs:
        t.add_row(
            "helper CPU \\[s]",  # rich markup: a literal [s]
            *[fmt(a.helper_total(c), 3) if c in a.helper_configs else "–" for c in a.configs],
        )
    con.print(t)
    for n, why in a.unavailable.items():
        con.print(f"{n}: not available: {why}", markup=False)
    for n, why in a.unknown.items():
        con.print(f"{n}: availability unknown: {why}", markup=False)
    if a.mismatches:
        con.print(f"[bold red]CORRECTNESS FAILED: {len(a.mismatches)} wrong answer(s)[/]")
    else:
        con.print("correctness: every answer matches across configurations")
