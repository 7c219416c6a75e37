"""The paper's figures re-drawn on our data (matplotlib, Agg backend), from an
:class:`~bench.micro.storage.analysis.Index`:

* ``fig2_tablescan.png``: table scan bandwidth vs threads, one panel per page size, a line
  per target and path (Fig. 2);
* ``fig3_bufman.png``: buffer management with Linux I/O, 4 KiB pages, one panel per write
  ratio, a line per target (Fig. 3), and ``fig3_bufman_paths.png``: every path;
* ``fig4_relative.png``: bandwidth of mmap+msync and libpmem2 relative to Linux I/O at 80%
  writes, one panel per target, absolute GiB/s at the markers (Fig. 4);
* ``fig5_logging.png``: logging bandwidth vs threads, one panel per entry size (log scale).

Error bars span min-max of the measured repetitions. Colour is the target, the marker and
line style the path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.micro.storage import analysis, plan
from bench.micro.storage.analysis import Index, Row

TARGET_COLORS = {"nvm-4k": "tab:blue", "nvm-2m": "tab:green", "disk": "tab:red"}
STYLES = ["-o", "--s", ":^", "-.D", "-v", "--P"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _line(ax: Any, rows: list[Row], label: str, color: str, style: str) -> None:
    if not rows:
        return
    xs = [r.threads for r in rows]
    ys = [r.gib for r in rows]
    lo = [(r.gib or 0) - (r.gib_min or 0) for r in rows]
    hi = [(r.gib_max or 0) - (r.gib or 0) for r in rows]
    ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, color=color, label=label, capsize=2, ms=5)


def _threads_axis(ax: Any, ix: Index) -> None:
    """Threads on a log2 axis; plain numbers on a log y axis (0.1, 2, not 10^-1, 2x10^0)."""
    from matplotlib.ticker import FormatStrFormatter

    if ax.get_yscale() == "log":
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        lo, hi = ax.get_ylim()
        if hi / lo < 10:  # less than a decade: label the minor ticks too
            ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
            ax.tick_params(axis="y", which="minor", labelsize=6)
    ts = ix.values("threads")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ts)
    ax.set_xticklabels([str(t) for t in ts])
    ax.set_xlabel("threads")
    ax.grid(alpha=0.3)


class Charts:
    """Draws what the data has into ``out``; :meth:`make` returns (file, title) each."""

    def __init__(self, ix: Index, out: Path) -> None:
        self.ix = ix
        self.out = out
        self.made: list[tuple[str, str]] = []

    def _save(self, fig: Any, name: str, title: str) -> None:
        fig.tight_layout()
        fig.savefig(self.out / name, dpi=100)
        _plt().close(fig)
        self.made.append((name, title))

    def _panels(
        self,
        name: str,
        title: str,
        bench: str,
        panels: list[tuple[str, int, int | None]],
        lines: list[tuple[str, str]],
        log: bool = False,
    ) -> None:
        """One figure: a panel per (title, size, write ratio), a line per (target, path)."""
        if not panels:
            return
        plt = _plt()
        fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
        styles = {
            v: STYLES[i % len(STYLES)] for i, v in enumerate(dict.fromkeys(v for _, v in lines))
        }
        for ax, (ptitle, size, w) in zip(axes[0], panels, strict=True):
            for target, v in lines:
                rows = self.ix.series(bench, target, v, size, w)
                _line(ax, rows, f"{target} {v}", TARGET_COLORS.get(target, "k"), styles[v])
            ax.set_title(ptitle, fontsize=9)
            ax.set_ylabel("GiB/s")
            if log:
                ax.set_yscale("log")
            _threads_axis(ax, self.ix)
        handles, labels = axes[0][0].get_legend_handles_labels()
        ncol = 4
        fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=ncol, frameon=False)
        fig.suptitle(title, fontsize=10)
        legend_rows = -(-len(labels) // ncol)
        fig.tight_layout(rect=(0, 0.02 + 0.045 * legend_rows, 1, 0.95))
        fig.savefig(self.out / name, dpi=100)
        plt.close(fig)
        self.made.append((name, title))

    def _lines(self, bench: str, variants: list[str] | None = None) -> list[tuple[str, str]]:
        have = {(r.target, r.variant) for r in self.ix.rows if r.bench == bench}
        order = [v.name for v in plan.VARIANTS[bench] if variants is None or v.name in variants]
        return [(t, v) for t in plan.TARGETS for v in order if (t, v) in have]

    def make(self) -> list[tuple[str, str]]:
        ix = self.ix
        sizes = sorted({r.size for r in ix.rows if r.bench == "tablescan"})
        self._panels(
            "fig2_tablescan.png",
            "Fig. 2: table scan bandwidth",
            "tablescan",
            [(f"{plan.fmt_size(s)} pages", s, None) for s in sizes],
            self._lines("tablescan"),
        )
        ws = sorted({r.write_ratio for r in ix.rows if r.bench == "bufman" and r.size == 4096})
        panels = [(f"{w}% writes, 4 KiB pages", 4096, w) for w in ws if w is not None]
        self._panels(
            "fig3_bufman.png",
            "Fig. 3: buffer management with Linux I/O (pread/pwrite + fdatasync)",
            "bufman",
            panels,
            self._lines("bufman", ["pread"]),
            log=True,
        )
        self._panels(
            "fig3_bufman_paths.png",
            "Buffer management, every path",
            "bufman",
            panels,
            self._lines("bufman"),
            log=True,
        )
        self.relative()
        es = sorted({r.size for r in ix.rows if r.bench == "logging"})
        self._panels(
            "fig5_logging.png",
            "Fig. 5: logging bandwidth",
            "logging",
            [(f"{plan.fmt_size(e)} entries", e, None) for e in es],
            self._lines("logging"),
            log=True,
        )
        return self.made

    def relative(self) -> None:
        """Fig. 4."""
        tgts = [t for t in plan.TARGETS if self.ix.series("bufman", t, "pread", 4096, 80)]
        if not tgts:
            return
        plt = _plt()
        fig, axes = plt.subplots(1, len(tgts), figsize=(4.6 * len(tgts), 3.8), squeeze=False)
        for ax, t in zip(axes[0], tgts, strict=True):
            for i, v in enumerate(("mmap", "pmem2", "pmem2-cl")):
                pts = analysis.relative(self.ix, t, v)
                if not pts:
                    continue
                xs = [r.threads for r, _ in pts]
                ys = [q.value for _, q in pts]
                ax.plot(xs, ys, STYLES[i], label=v, ms=4)
                for (r, _), x, y in zip(pts, xs, ys, strict=True):
                    ax.annotate(
                        f"{r.gib:.3g}",
                        (x, y),
                        fontsize=6,
                        xytext=(2, 3),
                        textcoords="offset points",
                    )
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_yscale("log")
            ax.set_title(f"{t}: relative to Linux I/O (80% writes, 4 KiB)", fontsize=9)
            ax.set_ylabel("× Linux I/O bandwidth")
            _threads_axis(ax, self.ix)
            ax.legend(fontsize=7)
        self._save(
            fig, "fig4_relative.png", "Fig. 4: mmap+msync and libpmem2 relative to Linux I/O"
        )
