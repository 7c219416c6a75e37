"""Summarise the HTAP runs: python3 htap_sum.py A1 B1 B2 A2 (directories under runs/)."""

import re
import sys
from pathlib import Path


def kv(path: Path) -> dict[str, int]:
    return {k: int(v) for k, v in (x.split("=") for x in path.read_text().split())}


def pool(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().strip().split("|")]


for label in sys.argv[1:]:
    d = Path("runs") / label
    b, a = kv(d / "cnt.before"), kv(d / "cnt.after")
    dd = {k: a[k] - b[k] for k in a}
    pb, pa = pool(d / "pool.before"), pool(d / "pool.after")
    oltp, scan = (d / "oltp.txt").read_text(), (d / "scan.txt").read_text()
    tps = float(re.search(r"tps = ([\d.]+)", oltp).group(1))
    ntx = int(re.search(r"processed: (\d+)", oltp).group(1))
    nsc = int(re.search(r"processed: (\d+)", scan).group(1))
    lat = float(re.search(r"latency average = ([\d.]+)", scan).group(1))
    print(
        f"{label}: oltp tps {tps:.0f}; scans {nsc} (avg {lat:.0f} ms); "
        f"cow_copies {dd['cow_copies']} ({dd['cow_copies'] / ntx:.3f}/txn); "
        f"prunes_deferred {dd['prunes_deferred']}; cleaner_writes {pa[0] - pb[0]}, "
        f"demotions {pa[1] - pb[1]}, slot_writes {pa[2] - pb[2]}; redirects {dd['redirects']}; "
        f"hints_skipped {dd['hints_skipped']}"
    )
