"""Per-buffer shared memory of pgnvm (PG 18.6): pg_shmem_allocations at four shared_buffers."""

import csv
from pathlib import Path

PTS = {"128MB": 16384, "1GB": 131072, "4GB": 524288, "8GB": 1048576}


def per_buffer(a: int, b: int, lo: str, hi: str) -> float:
    return (b - a) / (PTS[hi] - PTS[lo])


d: dict[str, dict[str, int]] = {}
for k in PTS:
    with Path(f"alloc-{k}.csv").open() as f:
        for row in csv.reader(f):
            name = row[1] if row[1] else "(unused)"
            d.setdefault(name, {})[k] = int(row[2])
tot = {k: sum(v.get(k, 0) for v in d.values()) for k in PTS}
rows = []
for name, v in d.items():
    vals = [v.get(k, 0) for k in PTS]
    if len(set(vals)) > 1:
        a = per_buffer(vals[1], vals[2], "1GB", "4GB")
        rows.append((name, *vals, a, per_buffer(vals[2], vals[3], "4GB", "8GB")))
rows.sort(key=lambda r: -r[4])
print("| allocation | 128 MB | 1 GB | 4 GB | 8 GB | B/buffer 1→4 GB | B/buffer 4→8 GB |")
print("|---|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r[0]} | {r[1]:,} | {r[2]:,} | {r[3]:,} | {r[4]:,} | {r[5]:.2f} | {r[6]:.2f} |")
t = [tot[k] for k in PTS]
a, b = per_buffer(t[1], t[2], "1GB", "4GB"), per_buffer(t[2], t[3], "4GB", "8GB")
print(f"| **total** | {t[0]:,} | {t[1]:,} | {t[2]:,} | {t[3]:,} | {a:.2f} | {b:.2f} |")
