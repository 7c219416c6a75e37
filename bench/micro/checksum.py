"""``./pgnvm micro checksum``: ns per 8 KB page of each page checksum variant (patch 0011).

Builds the release flavour if needed (``ensure_built``), then its ``src/test/checksum_simd``
benchmark (ours: ``bench_checksum_simd.c``) and runs it: ``pg_checksum_page_readonly()``
(what se2 calls for every page it reads in place) with each block function the CPU runs
(scalar, AVX2, AVX-512), upstream's ``pg_checksum_page()`` compiled with checksum.c's flags
as the baseline, and a read floor (XOR of the page's words: the cost of reading the page,
no checksum). Two cases: *hot* (the same 16 pages over and over: L2) and *cold* (1 GB of
pages in random order, one pass: memory). Median of ``--runs``, min-max, ratio to scalar in
the same run. The table goes to ``results/micro-checksum-<stamp>/summary.md`` with the CPU
model and flags the variants depend on.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core import build, osuser, paths, ui

SUBDIR = "src/test/checksum_simd"
#: CPU flags the variants are chosen by (avx512f: AVX-512, avx2: AVX2)
FLAGS = ("avx2", "avx512f", "avx512bw")


def cpu_summary(cpuinfo: str) -> str:
    """``model name`` and which of :data:`FLAGS` the first CPU of /proc/cpuinfo has."""
    model = "unknown CPU"
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    have = [f for f in FLAGS if f in flags]
    return f"{model}; flags: {' '.join(have) if have else 'none of ' + ' '.join(FLAGS)}"


def main(args: Any) -> int:
    if args.runs < 1:
        raise SystemExit("pgnvm micro checksum: --runs must be at least 1")
    if not args.no_build:
        build.ensure_built("release")
    tree = paths.build_dir("release") / SUBDIR
    if not tree.is_dir():
        raise SystemExit(f"pgnvm micro checksum: no {tree}: build the release flavour first")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else paths.REPO_ROOT / "results" / f"micro-checksum-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    osuser.run_pg(["make", "-s", "-C", str(tree)], check=True)
    cmd = [str(tree / "bench_checksum_simd"), "--runs", str(args.runs)]
    ui.step(f"{' '.join(cmd)} (hot: L2-resident pages; cold: 1 GB in random order)")
    p = osuser.run_pg(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        ui.error(f"bench_checksum_simd failed ({p.returncode}): {p.stderr.strip()[-500:]}")
        return 1
    cpu = cpu_summary(Path("/proc/cpuinfo").read_text())
    text = (
        f"# Page checksum variants, ns per 8 KB page\n\n"
        f"`./pgnvm micro checksum --runs {args.runs}` on {datetime.now():%Y-%m-%d}, "
        f"{cpu}; commit {paths.git_commit()}.\n\n{p.stdout.strip()}\n"
    )
    (out / "summary.md").write_text(text)
    print(text)
    print(f"results: {out}")
    return 0
