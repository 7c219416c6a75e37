"""The charts of a ``./pgnvm oltp`` report (matplotlib, Agg): throughput vs clients per
configuration, throughput normalised to disk_base and nvm_base_worker, latency percentiles,
CPU per transaction, and the memory-ratio curve."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from bench.oltp import settings, workloads
from bench.oltp.cells import CPU_GROUPS, Cell, main_cell


def draw(out: Path, plan: dict[str, Any], cs: dict[str, Cell]) -> list[str]:
    """Draw every chart the data allows into ``out``; returns the file names."""
    if not cs:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfgs = [c["name"] for c in plan["configs"]]
    wls = [
        w for w in plan["workloads"] if any(c.workload == w and not c.ratio for c in cs.values())
    ]
    clients = plan["clients"]
    made: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append(name)

    if wls:
        fig, axes = plt.subplots(1, len(wls), figsize=(5 * len(wls), 4), squeeze=False)
        for ax, w in zip(axes[0], wls, strict=True):
            for cfg in cfgs:
                pts = [(n, main_cell(cs, cfg, w, n)) for n in clients]
                xs = [n for n, c in pts if c and c.tps]
                ys = [c.tps for _, c in pts if c and c.tps]
                if not xs:
                    continue
                lo = [c.second_spread[0] or c.tps for _, c in pts if c and c.tps]
                hi = [c.second_spread[1] or c.tps for _, c in pts if c and c.tps]
                line = ax.plot(xs, ys, marker="o", label=cfg)[0]
                ax.fill_between(xs, lo, hi, alpha=0.15, color=line.get_color())
            ax.set_title(workloads.WORKLOADS[w].title)
            ax.set_xlabel("clients")
            ax.set_ylabel("transactions/s (band: 1 s p5–p95)")
            ax.set_xscale("log", base=2)
            ax.set_xticks(clients, [str(n) for n in clients])
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8)
        save(fig, "throughput_vs_clients.png")

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, ref in zip(axes, (settings.DISK, settings.BASELINE), strict=True):
            groups = [(w, n) for w in wls for n in clients]
            width = 0.8 / max(1, len(cfgs))
            for i, cfg in enumerate(cfgs):
                ys = []
                for w, n in groups:
                    c, r = main_cell(cs, cfg, w, n), main_cell(cs, ref, w, n)
                    ys.append(c.tps / r.tps if c and r and c.tps and r.tps else 0)
                ax.bar([g + i * width for g in range(len(groups))], ys, width, label=cfg)
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xticks(
                [g + width * (len(cfgs) - 1) / 2 for g in range(len(groups))],
                [f"{w.upper()} {n}c" for w, n in groups],
                fontsize=8,
            )
            ax.set_ylabel(f"throughput × {ref}")
            ax.legend(fontsize=7)
        save(fig, "throughput_normalised.png")

        top = max(clients)
        fig, axes = plt.subplots(1, len(wls), figsize=(5 * len(wls), 4), squeeze=False)
        for ax, w in zip(axes[0], wls, strict=True):
            ks = ("p50_ms", "p95_ms", "p99_ms", "max_ms")
            width = 0.8 / len(ks)
            for j, k in enumerate(ks):
                ys = [(main_cell(cs, cfg, w, top) or None) for cfg in cfgs]
                vals = [c.latency(k) or 0 if c else 0 for c in ys]
                ax.bar([i + j * width for i in range(len(cfgs))], vals, width, label=k[:-3])
            ax.set_yscale("log")
            ax.set_xticks(
                [i + 1.5 * width for i in range(len(cfgs))], cfgs, fontsize=7, rotation=20
            )
            ax.set_ylabel("latency [ms]")
            ax.set_title(f"{workloads.WORKLOADS[w].title}, {top} clients")
            ax.legend(fontsize=8)
        save(fig, "latency_percentiles.png")

        fig, ax = plt.subplots(figsize=(7, 4))
        w = wls[0]
        parts = (*CPU_GROUPS, "other server", "pgbench")
        bottoms = [0.0] * len(cfgs)
        for part in parts:
            vals = []
            for cfg in cfgs:
                c = main_cell(cs, cfg, w, top)
                vals.append(c.cpu_us_per_txn().get(part, 0.0) if c else 0.0)
            ax.bar(range(len(cfgs)), vals, bottom=bottoms, label=part)
            bottoms = [a + v for a, v in zip(bottoms, vals, strict=True)]
        ax.set_xticks(range(len(cfgs)), cfgs, fontsize=7, rotation=20)
        ax.set_ylabel("CPU µs per transaction")
        ax.set_title(f"CPU split, {workloads.WORKLOADS[w].title}, {top} clients")
        ax.legend(fontsize=7)
        save(fig, "cpu_split.png")

    mem = [c for c in cs.values() if c.ratio]
    if mem:
        fig, ax = plt.subplots(figsize=(7, 4))
        for cfg in cfgs:
            pts = sorted(
                (float(Fraction(c.ratio)), c.tps)
                for c in mem
                if c.config == cfg and c.ratio and c.tps
            )
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=cfg)
        # issue 22's target for se2's hybrid pool: at the smallest ratio >= 0.98x the
        # baseline at the largest one (the DRAM pool stops mattering)
        top = max(
            (c for c in mem if c.config == settings.BASELINE and c.tps),
            default=None,
            key=lambda c: Fraction(c.ratio or 0),
        )
        if top is not None and any(c.descriptors for c in mem):
            ax.axhline(
                0.98 * (top.tps or 0.0),
                linestyle=":",
                color="grey",
                label=f"0.98 × {settings.BASELINE} at {top.ratio}",
            )
        ax.set_xscale("log", base=2)
        ax.invert_xaxis()
        ax.set_xlabel("shared_buffers / data (in se2's hybrid pool: its DRAM slots)")
        ax.set_ylabel("YCSB-A transactions/s")
        ax.set_ylim(bottom=0)
        ax.set_title("Anti-caching: throughput as the buffer pool shrinks")
        ax.legend(fontsize=8)
        save(fig, "memory_ratio.png")
    return made
