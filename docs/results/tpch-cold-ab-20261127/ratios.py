"""Per-query ratio of configuration A to B from a tpch runs.jsonl: medians, paired ratios per
repetition (min-max), totals, geomean of the ratios, per-repetition totals, and the median of
other work on the machine.

    python3 ratios.py RUNS.jsonl nvm_se2_hybrid mem_limit
"""

from __future__ import annotations

import json
import math
import statistics as st
import sys
from collections import defaultdict


def main(path: str, a: str, b: str) -> None:
    t: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    other: list[float] = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") != "ok":
                continue
            t[(int(r["query"]), r["rep"])][r["config"]] = r["wall_s"]
            ow = r.get("other_work", {})
            other.append(ow.get("other_cpu_s", 0) / max(ow.get("window_s", 1), 1e-9))
    qs = sorted({q for q, _ in t})
    reps = sorted({rep for _, rep in t})
    tot_a = tot_b = 0.0
    ratios = []
    for q in qs:
        ma = st.median(t[(q, r)][a] for r in reps if a in t[(q, r)])
        mb = st.median(t[(q, r)][b] for r in reps if b in t[(q, r)])
        pairs = [t[(q, r)][a] / t[(q, r)][b] for r in reps if a in t[(q, r)] and b in t[(q, r)]]
        tot_a += ma
        tot_b += mb
        ratios.append(ma / mb)
        flag = " <--" if ma / mb > 1.10 else ""
        spread = f"[{min(pairs):.2f}-{max(pairs):.2f}]"
        print(f"Q{q:02d} {ma:7.3f} {mb:7.3f} {ma / mb:5.2f}x {spread}{flag}")
    gm = math.exp(st.mean(math.log(x) for x in ratios))
    print(
        f"total {tot_a:.2f} / {tot_b:.2f} = {tot_a / tot_b:.3f}x; GM ratio {gm:.3f}x; "
        f"other work median {st.median(other):.3f} CPUs"
    )
    for rep in reps:
        sa = sum(t[(q, rep)].get(a, 0) for q in qs)
        sb = sum(t[(q, rep)].get(b, 0) for q in qs)
        print(f"  rep {rep}: {sa:.2f} / {sb:.2f} = {sa / sb:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
