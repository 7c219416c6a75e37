"""Per-query ratio A/B from a tpch runs.jsonl: medians, paired per repetition (min-max)."""
import json, sys, statistics as st
from collections import defaultdict
path, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
t = defaultdict(dict)
other = []
for line in open(path):
    r = json.loads(line)
    if r.get("status") != "ok":
        continue
    t[(r["query"], r["rep"])][r["config"]] = r["wall_s"]
    other.append(r.get("other_work", {}).get("other_cpu_s", 0) / max(r.get("other_work", {}).get("window_s", 1), 1e-9))
qs = sorted({q for q, _ in t})
tot = defaultdict(float); gm = defaultdict(list); reps = sorted({rep for _, rep in t})
rows = []
for q in qs:
    ma = st.median(t[(q, r)][a] for r in reps if a in t[(q, r)])
    mb = st.median(t[(q, r)][b] for r in reps if b in t[(q, r)])
    pairs = [t[(q, r)][a] / t[(q, r)][b] for r in reps if a in t[(q, r)] and b in t[(q, r)]]
    rows.append((q, ma, mb, ma / mb, min(pairs), max(pairs)))
    tot[a] += ma; tot[b] += mb
import math
g = math.exp(st.mean(math.log(r[3]) for r in rows))
for r in rows:
    flag = " <--" if r[3] > 1.10 else ""
    print(f"Q{int(r[0]):02d} {r[1]:7.3f} {r[2]:7.3f} {r[3]:5.2f}x [{r[4]:.2f}-{r[5]:.2f}]{flag}")
print(f"total {tot[a]:.2f} / {tot[b]:.2f} = {tot[a]/tot[b]:.3f}x; GM ratio {g:.3f}x; other work median {st.median(other):.3f} CPUs")
# per repetition totals
for rep in reps:
    sa = sum(t[(q, rep)].get(a, 0) for q in qs); sb = sum(t[(q, rep)].get(b, 0) for q in qs)
    print(f"  rep {rep}: {sa:.2f} / {sb:.2f} = {sa/sb:.3f}")
