"""Flat perf profiles side by side: python3 flat.py stock2 hyb128 (prof.sh's directories
/tmp/w28/prof-LABEL, each with run.txt and script.gz: `perf script -F comm,pid,ip,sym`
turned into tab-separated comm, pid, symbol). Prints µs per transaction of postgres
processes per symbol, sorted by the difference last - first."""

import collections
import gzip
import re
import sys
from pathlib import Path

F = 999  # perf record -F
labels = sys.argv[1:]
data = {}
for label in labels:
    d = Path(f"/tmp/w28/prof-{label}")
    tps = float(re.search(r"tps = ([\d.]+)", (d / "run.txt").read_text()).group(1))
    txns = tps * 20  # the 20 s perf window
    syms: collections.Counter[str] = collections.Counter()
    comm: collections.Counter[str] = collections.Counter()
    with gzip.open(d / "script.gz", "rt") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            comm[parts[0]] += 1
            if parts[0] == "postgres":
                syms[parts[2].strip() if len(parts) > 2 else "?"] += 1
    data[label] = (tps, txns, syms)
    top = {k: round(v * 1e6 / F / txns, 2) for k, v in comm.most_common(6)}
    print(label, "tps", tps, top)


def per_txn(label: str, sym: str) -> float:
    _, txns, syms = data[label]
    return syms.get(sym, 0) * 1e6 / F / txns


total = {x: sum(data[x][2].values()) * 1e6 / F / data[x][1] for x in labels}
print(f"{'postgres total us/txn':45s}", "  ".join(f"{total[x]:7.2f}" for x in labels))
rows = sorted(([per_txn(x, s) for x in labels], s) for s in {s for x in labels for s in data[x][2]})
rows.sort(key=lambda r: -(r[0][-1] - r[0][0]))
for vals, s in [*rows[:45], ([0.0], "...most negative"), *rows[-15:]]:
    cells = "  ".join(f"{v:7.3f}" for v in vals)
    print(f"{s[:45]:45s}", cells, f" d={vals[-1] - vals[0]:+.3f}" if len(vals) > 1 else "")
