"""YCSB-A zipfian at 1 client: vCPU placement of pgbench and its backend.

    pin.py placement   # file WAL (nvm_se2): unpinned, both on vCPU 0, on vCPUs 0 and 1
    pin.py wal         # both on vCPU 0: file WAL (nvm_se2) vs pmem WAL
                       # (nvm_se2_walpmem_cl), alternating, restart + CHECKPOINT each

The postmaster is pinned with `taskset -a -cp`, so every backend it forks inherits the
placement. 1M rows (the oltp job's cluster), 15 s per run, 3 repetitions; one JSON line
per run. Run with the repository on sys.path and PGNVM_HOME set.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "/work/main")
from bench.core import configs
from bench.oltp import pgbench, settings, targets

ROWS = 1_000_000
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, 5990)
tg.ensure()
srv = tg.server
scripts = ["-b", "tpcb-like"]
cmd = pgbench.command(
    srv.cluster.bin("pgbench"),
    scripts,
    clients=1,
    threads=1,
    seconds=20,
    records=ROWS,
    dbname=targets.DBNAME,
    log_prefix=None,
)


def start(name: str) -> int:
    """Restart the cluster as configuration `name`, checkpoint; the postmaster's pid."""
    cfg = configs.BY_NAME[name]
    srv.apply_config(cfg, settings.server_settings(cfg, "128MB"))
    srv.apply(environment=dict(cfg.environment))
    srv.restart(move_port=True)
    with srv.connect() as c:
        c.execute("CHECKPOINT")
        # take every first-touch full-page image before the window: dirty each page once
        c.execute("UPDATE pgbench_accounts SET abalance = abalance WHERE aid % 40 = 0")
        c.execute("UPDATE pgbench_branches SET bbalance = bbalance")
        c.execute("UPDATE pgbench_tellers SET tbalance = tbalance")
        c.execute("SELECT pg_stat_reset_shared('wal')")
    return int(Path(srv.cluster.datadir, "postmaster.pid").read_text().split()[0])


def run(pm: int, server_cpus: str, pgbench_cpus: str | None, **label: object) -> None:
    subprocess.run(["taskset", "-a", "-cp", server_cpus, str(pm)], capture_output=True)
    pre = ["taskset", "-c", pgbench_cpus] if pgbench_cpus else []
    out = subprocess.run(pre + cmd, env=srv.cluster.env(), capture_output=True, text=True).stdout
    with srv.connect() as c:
        fpi = c.execute("SELECT wal_fpi, wal_records FROM pg_stat_wal").fetchone()
    label["fpi_records"] = [int(fpi[0]), int(fpi[1])]
    tps = re.search(r"tps = ([\d.]+)", out)
    lat = re.search(r"latency average = ([\d.]+)", out)
    print(
        json.dumps(
            {
                **label,
                "tps": float(tps.group(1)) if tps else None,
                "lat_ms": float(lat.group(1)) if lat else None,
            }
        ),
        flush=True,
    )


if sys.argv[1] == "never":
    pm = start("nvm_se2")
    for rep in range(3):
        run(pm, "0,1", None, rep=rep, mode="free")
        run(pm, "0", "0", rep=rep, mode="same")
        run(pm, "0", "1", rep=rep, mode="cross")
    subprocess.run(["taskset", "-a", "-cp", "0,1", str(pm)], capture_output=True)
else:
    for rep in range(4):
        pair = ("nvm_se2", "nvm_se2_walpmem_cl")
        for name in pair if rep % 2 == 0 else pair[::-1]:
            run(start(name), "0", "0", rep=rep, config=name)
srv.stop()
