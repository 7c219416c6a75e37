"""The report's PNG charts (matplotlib, Agg backend), drawn from an :class:`Analysis`.

* ``wallclock_normalized.png`` - per-query median wall-clock normalised to ``nvm_base_worker``
  (papers 002 Fig. 7 / 12), the ``mem_limit`` ceiling as a black mark per query, and the
  geometric mean over the queries every configuration finished.
* ``kernel_share.png`` - the backend's system / (user + system) CPU time per query (Fig. 6/11).
* ``totals.png`` - sum and geometric mean of the medians per configuration.
* ``page_faults.png`` - the backend's minor and major page faults per query.
* ``cpu_breakdown.png`` - CPU seconds per configuration: backend (main thread) user / system,
  its prefetch helper threads, I/O workers, other server processes.
* ``hw_counters.png`` - only when hardware counters were available.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.core.blocks import ratio
from bench.tpch import settings as cfgs
from bench.tpch.queries import qname
from bench.tpch.report import statistics as stats
from bench.tpch.report.statistics import Analysis, counter


def _legend_below(ax: Any, n: int) -> None:
    ax.legend(
        fontsize=7, ncol=min(7, n), loc="upper center", bbox_to_anchor=(0.5, -0.07), frameon=False
    )


class Charts:
    """The charts of one report, written into ``out``: :meth:`make` draws them and returns
    (file name, title) of each one drawn."""

    def __init__(self, a: Analysis, out: Path) -> None:
        self.a = a
        self.out = out
        self.charts: list[tuple[str, str]] = []

    def _plt(self) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt

    def _save(self, fig: Any, name: str, title: str) -> None:
        fig.tight_layout()
        fig.savefig(self.out / name, dpi=110)
        self._plt().close(fig)
        self.charts.append((name, title))

    def _colors(self) -> dict[str, Any]:
        plt = self._plt()
        cmap = plt.get_cmap("tab10")
        return {c: cmap(i % 10) for i, c in enumerate(self.a.configs)}

    def chart_normalized(self) -> None:
        if not self.a.baseline or not self.a.queries:
            return
        plt = self._plt()
        colors = self._colors()
        bars = [c for c in self.a.configs if c != cfgs.CEILING]
        labels = [qname(q).upper() for q in self.a.queries] + ["GM"]
        fig, ax = plt.subplots(
            figsize=(min(16.0, max(8.0, 0.55 * len(labels) * max(1, len(bars)) / 2.5)), 4.8)
        )
        width = 0.8 / max(1, len(bars))
        base_gm = self.a.summary[self.a.baseline].geomean
        for i, c in enumerate(bars):
            ys = [stats.normalized(self.a.table, c, self.a.baseline, q) for q in self.a.queries]
            gm = self.a.summary[c].geomean
            ys.append(gm / base_gm if gm and base_gm else None)
            xs = [j - 0.4 + width * (i + 0.5) for j in range(len(labels))]
            ax.bar(
                [x for x, y in zip(xs, ys, strict=True) if y is not None],
                [y for y in ys if y is not None],
                width,
                label=c,
                color=colors[c],
            )
        if cfgs.CEILING in self.a.configs:
            ys = [
                stats.normalized(self.a.table, cfgs.CEILING, self.a.baseline, q)
                for q in self.a.queries
            ]
            gm = self.a.summary[cfgs.CEILING].geomean
            ys.append(gm / base_gm if gm and base_gm else None)
            for j, y in enumerate(ys):
                if y is not None:
                    ax.hlines(
                        y,
                        j - 0.42,
                        j + 0.42,
                        colors="black",
                        linewidth=2,
                        label=cfgs.CEILING if j == 0 else None,
                    )
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(labels)), labels, rotation=0, fontsize=8)
        ax.set_ylabel(f"wall-clock / {self.a.baseline}")
        ax.set_title(
            f"TPC-H SF {self.a.plan['sf']:g}, checksums {self.a.checksums}: median wall-clock "
            f"normalised to {self.a.baseline} (black: {cfgs.CEILING} ceiling)"
        )
        _legend_below(ax, len(bars) + 1)
        self._save(fig, "wallclock_normalized.png", "Wall-clock normalised (Fig. 7/12)")

    def _grouped(
        self,
        name: str,
        title: str,
        ylabel: str,
        value: Callable[[str, int], float | None],
        logy: bool = False,
        scale: float = 1.0,
    ) -> None:
        if not self.a.queries:
            return
        plt = self._plt()
        colors = self._colors()
        fig, ax = plt.subplots(
            figsize=(
                min(16.0, max(8.0, 0.5 * len(self.a.queries) * len(self.a.configs) / 2.5)),
                4.4,
            )
        )
        width = 0.8 / max(1, len(self.a.configs))
        for i, c in enumerate(self.a.configs):
            xs, ys = [], []
            for j, q in enumerate(self.a.queries):
                v = value(c, q)
                if v is not None:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(v * scale)
            ax.bar(xs, ys, width, label=c, color=colors[c])
        ax.set_xticks(
            range(len(self.a.queries)), [qname(q).upper() for q in self.a.queries], fontsize=8
        )
        if logy:
            ax.set_yscale("log")
            ax.set_ylim(bottom=1)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        _legend_below(ax, len(self.a.configs))
        self._save(fig, name, title)

    def chart_kernel_share(self) -> None:
        self._grouped(
            "kernel_share.png",
            "Kernel-time share of the backend (Fig. 6/11)",
            "system / (user + system) CPU [%]",
            lambda c, q: self.a.table[(c, q)].kernel_share if (c, q) in self.a.table else None,
            scale=100.0,
        )

    def chart_page_faults(self) -> None:
        self._grouped(
            "page_faults.png",
            "Backend page faults per query (minor + major)",
            "page faults (median)",
            lambda c, q: self.a.median_of(
                c,
                q,
                lambda r: (
                    max(
                        1,
                        (r.get("backend") or {}).get("minflt", 0)
                        + (r.get("backend") or {}).get("majflt", 0),
                    )
                    if r.get("backend")
                    else None
                ),
            ),
            logy=True,
        )

    def chart_totals(self) -> None:
        if not self.a.configs or not self.a.common:
            return
        plt = self._plt()
        colors = self._colors()
        fig, ax = plt.subplots(figsize=(11, 0.5 * len(self.a.configs) + 1.5))
        totals = [self.a.summary[c].total or 0.0 for c in self.a.configs]
        ax.barh(self.a.configs, totals, color=[colors[c] for c in self.a.configs])
        # the notes form one column right of the longest bar, inside the axes
        top = max(totals) or 1.0
        for i, c in enumerate(self.a.configs):
            s = self.a.summary[c]
            notes = [f"GM {s.geomean:.3f}s" if s.geomean else ""]
            notes += [f"total {ratio(s.total_ratios.get(r))} {r}" for r in self.a.refs]
            ax.text(top * 1.03, i, ", ".join(n for n in notes if n), va="center", fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"sum of median wall-clock over {len(self.a.common)} queries [s]")
        ax.set_title("Totals per configuration")
        ax.set_xlim(0, top * 2.7)
        self._save(fig, "totals.png", "Totals")

    def chart_cpu(self) -> None:
        if not self.a.configs or not self.a.common:
            return
        plt = self._plt()
        fig, ax = plt.subplots(figsize=(8, 0.5 * len(self.a.configs) + 1.5))
        left = [0.0] * len(self.a.configs)
        parts = {c: self.a.cpu_parts(c) for c in self.a.configs}
        keys = list(parts[self.a.configs[0]])
        if not self.a.helper_configs:
            keys = [k for k in keys if not k.startswith("helper")]
        for k in keys:
            vals = [parts[c][k] for c in self.a.configs]
            ax.barh(self.a.configs, vals, left=left, label=k)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        ax.invert_yaxis()
        ax.set_xlabel(f"CPU seconds, sum of medians over {len(self.a.common)} queries")
        ax.set_title("Where the CPU time goes")
        ax.legend(fontsize=7)
        self._save(fig, "cpu_breakdown.png", "CPU breakdown")

    def chart_hw(self) -> None:
        if not self.a.hw_available() or not self.a.common:
            return
        plt = self._plt()
        names = [
            "cycles",
            "instructions",
            "stalled_cycles_backend",
            "llc_read_misses",
            "l1d_read_misses",
        ]
        fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.6))
        for ax, n in zip(axes, names, strict=True):
            u = [self.a.sum_common(c, counter(f"{n}_user")) or 0.0 for c in self.a.configs]
            k = [self.a.sum_common(c, counter(f"{n}_kernel")) or 0.0 for c in self.a.configs]
            ax.barh(self.a.configs, u, label="user")
            ax.barh(self.a.configs, k, left=u, label="kernel")
            ax.set_title(n, fontsize=8)
            ax.tick_params(labelsize=6)
            ax.invert_yaxis()
        axes[0].legend(fontsize=6)
        fig.suptitle("Backend hardware counters, sum of medians (Fig. 8/9/13/14)")
        self._save(fig, "hw_counters.png", "Hardware counters")

    def make(self) -> list[tuple[str, str]]:
        for fn in (
            self.chart_normalized,
            self.chart_kernel_share,
            self.chart_totals,
            self.chart_page_faults,
            self.chart_cpu,
            self.chart_hw,
        ):
            fn()
        return self.charts
