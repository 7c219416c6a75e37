"""A/B of the background writer's slot pass (slotclean): one build, one cluster, the pass
switched off by the temporary environment variable PGNVM_AB_NOSLOTCLEAN (A = off, as
main; B = on), alternating, YCSB-A zipfian 8 clients, 20 s each after restart +
CHECKPOINT; nvm_base_worker at 1/2 as the reference. Prints one line per run and
pgnvm_pool()'s / pg_stat_io's counters around it."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, "/work/slotclean")
from bench.core import configs, counters
from bench.oltp import pgbench, plan, settings, targets, workloads

ROWS = int(os.environ.get("AB_ROWS", "500000"))
REPS = int(os.environ.get("AB_REPS", "3"))
PORT = 5900
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, PORT)
tg.ensure()
srv = tg.server
scripts = workloads.write_scripts(
    workloads.WORKLOADS["a"], "zipfian", Path("/tmp/slotclean-ab/scripts")
)
hyb = configs.BY_NAME["nvm_se2_hybrid"]
base = configs.BY_NAME["nvm_base_worker"]
sb = {r: plan.ratio_shared_buffers(r, tg.data_bytes) for r in ("1/2", "1/128")}
desc = settings.hybrid_descriptors(tg.db_bytes, sb["1/2"])
print(
    f"rows {ROWS} data {tg.data_bytes >> 20} MB db {tg.db_bytes >> 20} MB",
    f"sb {sb} descriptors {desc}",
    flush=True,
)

IO_SQL = (
    "select coalesce(sum(writes) filter (where backend_type = 'client backend'), 0), "
    "coalesce(sum(writes) filter (where backend_type = 'background writer'), 0) "
    "from pg_stat_io where object = 'relation'"
)


def run(label: str, cfg: configs.Config, ratio: str, off: bool) -> dict:
    env = dict(cfg.environment)
    if off:
        env["PGNVM_AB_NOSLOTCLEAN"] = "1"
    d = settings.hybrid_descriptors(tg.db_bytes, sb[ratio]) if cfg is hyb else None
    srv.apply_config(cfg, settings.server_settings(cfg, sb[ratio], d))
    srv.apply(environment=env)
    srv.restart(move_port=True)
    with srv.connect() as c:
        c.execute("CHECKPOINT")
        c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
        c.execute("ALTER EXTENSION pgnvm UPDATE")
        p0 = counters.read_pool(c)
        io0 = c.execute(IO_SQL).fetchone()
    load0 = os.getloadavg()[0]
    cmd = pgbench.command(
        srv.cluster.bin("pgbench"),
        scripts,
        clients=8,
        threads=2,
        seconds=20,
        records=ROWS,
        dbname=targets.DBNAME,
        log_prefix=None,
    )
    out = subprocess.run(cmd, env=srv.cluster.env(), capture_output=True, text=True).stdout
    load1 = os.getloadavg()[0]
    with srv.connect() as c:
        p1 = counters.read_pool(c)
        io1 = c.execute(IO_SQL).fetchone()
    m = re.search(r"tps = ([\d.]+)", out)
    tps = float(m.group(1)) if m else float("nan")
    txn = re.search(r"number of transactions actually processed: (\d+)", out)
    n = int(txn.group(1)) if txn else 0
    r = {
        "label": label,
        "ratio": ratio,
        "tps": tps,
        "txns": n,
        "pool": {k: p1[k] - p0[k] for k in counters.POOL_COUNTERS if k in p0},
        "client_writes": int(io1[0] - io0[0]),
        "bgwriter_writes": int(io1[1] - io0[1]),
        "load1_before": round(load0, 2),
        "load1_after": round(load1, 2),
    }
    print(json.dumps(r), flush=True)
    return r


results = []
t0 = time.time()
ORDER = (False, True) if os.environ.get("AB_ORDER") == "BA" else (True, False)
RATIOS = tuple(os.environ.get("AB_RATIOS", "1/128,1/2").split(","))
for rep in range(REPS):
    if os.environ.get("AB_ORDER") == "ALT" and rep % 2:
        ORDER = (False, True)
    elif os.environ.get("AB_ORDER") == "ALT":
        ORDER = (True, False)
    for ratio in RATIOS:
        for off in ORDER:
            results.append(run(f"hybrid-{'A_off' if off else 'B_on'}", hyb, ratio, off))
    if not os.environ.get("AB_NO_BASE"):
        results.append(run("base", base, "1/2", False))
srv.stop()
Path(os.environ.get("AB_OUT", "/tmp/slotclean-ab/results.jsonl")).write_text(
    "".join(json.dumps(r) + "\n" for r in results)
)
print(f"done in {time.time() - t0:.0f} s")
