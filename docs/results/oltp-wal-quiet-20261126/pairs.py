"""Paired pmem/file ratios of an oltp run: python3 pairs.py <dir>/runs.jsonl.

The points of one repetition alternate file WAL (nvm_se2) and pmem WAL
(nvm_se2_walpmem_cl), so repetition i of each is a pair.
"""

import json
import statistics
import sys

with open(sys.argv[1]) as runs:
    rows = [json.loads(line) for line in runs]
points: dict = {}
for r in rows:
    points.setdefault((r["workload"], r["clients"]), {}).setdefault(r["config"], {})[r["rep"]] = r
for (workload, clients), by_config in sorted(points.items()):
    f, p = by_config["nvm_se2"], by_config["nvm_se2_walpmem_cl"]
    reps = sorted(f)
    pairs = [p[i]["tps"] / f[i]["tps"] for i in reps if i in p]
    ratio = statistics.median(p[i]["tps"] for i in p) / statistics.median(f[i]["tps"] for i in reps)
    print(
        workload,
        clients,
        "file",
        [round(f[i]["tps"]) for i in reps],
        "pmem",
        [round(p[i]["tps"]) for i in sorted(p)],
        f"medians {ratio:.2f}",
        "pairs",
        [round(x, 2) for x in pairs],
    )
