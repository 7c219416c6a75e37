"""``./pgnvm micro prefetch``: libnvmprefetch's microbenchmark on 4 KB and 2 MB tmpfs pages.

Builds ``prefetch/bench/nvmprefetch-bench`` (``make -C prefetch bench``), mounts a tmpfs
with 4 KB pages and one with ``huge=always`` (root; otherwise /dev/shm only, said so), runs
the benchmark on a file of ``--size`` in each with ``--json``, and prints one table: ns per
cache line (median of ``--runs``, min-max) and the ratio to no prefetching, per variant (no
prefetch, inline ``__builtin_prefetch``, helper M1/M2/M3 where the topology allows them,
``MAP_POPULATE``, ``madvise(MADV_POPULATE_READ)``, and a pre-mapped reference). Raw JSON:
``results/micro-prefetch-<stamp>/``.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core import paths, storage, ui

BENCH = paths.REPO_ROOT / "prefetch" / "bench" / "nvmprefetch-bench"
MOUNTS = {
    "4k": (Path("/mnt/pgnvm/bench-4k"), "huge=never"),
    "2m": (Path("/mnt/pgnvm/bench-2m"), "huge=always"),
}


def render(results: dict[str, dict[str, Any]]) -> str:
    """Markdown table: one row per (pages, variant)."""
    lines = [
        "| pages | variant | ns/line median [min-max] | ratio to none | helper CPU ms |",
        "|---|---|---|---|---|",
    ]
    for pages, doc in results.items():
        for r in doc.get("results", []):
            if not r.get("available"):
                lines.append(
                    f"| {pages} | {r['variant']} | not available: {r.get('reason', '')} | | |"
                )
                continue
            helper = r.get("helper_cpu_ms_median")
            lines.append(
                f"| {pages} | {r['variant']} | {r['ns_per_line_median']:.2f} "
                f"[{r['ns_per_line_min']:.2f}-{r['ns_per_line_max']:.2f}] | "
                f"{r['ratio_to_none']:.2f} | {'' if helper is None else f'{helper:.1f}'} |"
            )
    return "\n".join(lines)


def _mount(pages: str) -> Path:
    """The directory for this page size: a tmpfs we mount (root) or /dev/shm."""
    mnt, opt = MOUNTS[pages]
    if os.geteuid() != 0:
        ui.notice(f"not root: {pages} pages are not guaranteed, using /dev/shm")
        return Path("/dev/shm")
    if storage.mount_options(mnt) is None:
        err = storage.mount_tmpfs(mnt, f"size=4g,{opt}")
        if err is not None:
            raise storage.StorageError(f"mount -t tmpfs -o size=4g,{opt} at {mnt} failed: {err}")
    return mnt


def main(args: Any) -> int:
    subprocess.run(["make", "-s", "-C", str(paths.REPO_ROOT / "prefetch"), "bench"], check=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else paths.REPO_ROOT / "results" / f"micro-prefetch-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    for pages in args.pages:
        d = _mount(pages)
        f = d / "nvmprefetch-bench.dat"
        ui.step(f"{pages} pages: {f}, {args.size}, {args.runs} runs per variant")
        cmd = [
            str(BENCH),
            "--file",
            str(f),
            "--size",
            args.size,
            "--runs",
            str(args.runs),
            "--json",
        ]
        p = subprocess.run(cmd, capture_output=True, text=True)
        (out / f"{pages}.json").write_text(p.stdout)
        if p.returncode != 0:
            ui.error(f"nvmprefetch-bench failed ({p.returncode}): {p.stderr.strip()[-500:]}")
            return 1
        results[pages] = json.loads(p.stdout)
        if not args.keep_file:
            f.unlink(missing_ok=True)
    text = render(results)
    (out / "summary.md").write_text(text + "\n")
    print(text)
    print(f"\nresults: {out}")
    return 0
