"""TPC-B at 8 clients, file WAL (nvm_se2) vs pmem WAL (nvm_se2_walpmem_cl), with the
first-touch full-page images taken before the window (as ../oltp-wal-placed-20261127/tpcb1.py
at 1 client): restart, CHECKPOINT, one UPDATE dirtying every page of the three tables,
then 20 s of pgbench -b tpcb-like -c 8 -j 2, unpinned; the pair's order alternates.
One JSON line per run: tps, FPI/records in the window, WAL writes and flushes per
transaction (pg_stat_io, object wal: the pmem path counts its copies and persists there).
Run with PGNVM_HOME set; the cluster is the oltp job's (oltp-r1000000-nvm);
PGNVM_NVM_ROOT=/mnt/pgnvm/nvm-huge puts it on the huge=always tmpfs.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, "/work/main")
from bench.core import configs
from bench.oltp import pgbench, settings, targets

ROWS = 1_000_000
REPS = int(os.environ.get("AB_REPS", "5"))
CLIENTS = int(os.environ.get("AB_CLIENTS", "8"))
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, 5990)
tg.ensure()
tg.ensure_tpcb(targets.tpcb_scale(tg.data_bytes))
srv = tg.server
cmd = pgbench.command(
    srv.cluster.bin("pgbench"),
    ["-b", "tpcb-like"],
    clients=CLIENTS,
    threads=min(2, CLIENTS),
    seconds=20,
    records=ROWS,
    dbname=targets.DBNAME,
    log_prefix=None,
)


def start(name: str) -> int:
    cfg = configs.BY_NAME[name]
    srv.apply_config(cfg, settings.server_settings(cfg, "128MB"))
    srv.apply(environment=dict(cfg.environment))
    srv.restart(move_port=True)
    with srv.connect() as c:
        c.execute("CHECKPOINT")
        c.execute("UPDATE pgbench_accounts SET abalance = abalance WHERE aid % 40 = 0")
        c.execute("UPDATE pgbench_branches SET bbalance = bbalance")
        c.execute("UPDATE pgbench_tellers SET tbalance = tbalance")
        c.execute("SELECT pg_stat_reset_shared('wal')")
        c.execute("SELECT pg_stat_reset_shared('io')")
    return int(Path(srv.cluster.datadir, "postmaster.pid").read_text().split()[0])


for rep in range(REPS):
    pair = ("nvm_se2", "nvm_se2_walpmem_cl")
    for name in pair if rep % 2 == 0 else pair[::-1]:
        pm = start(name)
        pre: list[str] = []
        if CLIENTS == 1:  # as the oltp job's --placement same: server and client on vCPU 0
            subprocess.run(["taskset", "-a", "-cp", "0", str(pm)], capture_output=True)
            pre = ["taskset", "-c", "0"]
        p = subprocess.Popen(
            pre + cmd,
            env=srv.cluster.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        if os.environ.get("AB_PERF"):  # a system-wide software-clock profile of 10 s inside
            time.sleep(6)
            data = f"{os.environ['AB_PERF']}/perf-{name}-{rep}.data"
            perf = ["perf", "record", "-a", "-g", "-F", "1999", "-e", "cpu-clock", "-o", data]
            subprocess.run([*perf, "--", "sleep", "10"], capture_output=True)
        out = p.communicate()[0]
        with srv.connect() as c:
            fpi, rec = c.execute("SELECT wal_fpi, wal_records FROM pg_stat_wal").fetchone()
            writes, fsyncs = c.execute(
                "SELECT sum(writes), sum(fsyncs) FROM pg_stat_io WHERE object = 'wal'"
            ).fetchone()
        tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
        txns = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
        print(
            json.dumps(
                {
                    "rep": rep,
                    "config": name,
                    "tps": tps,
                    "fpi_per_txn": round(fpi / txns, 4),
                    "records_per_txn": round(rec / txns, 2),
                    "wal_writes_per_txn": round(float(writes) / txns, 3),
                    "wal_flushes_per_txn": round(float(fsyncs) / txns, 3),
                    "load1": Path("/proc/loadavg").read_text().split()[0],
                }
            ),
            flush=True,
        )
srv.stop()
