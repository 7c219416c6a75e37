"""Group-commit experiment: YCSB-A zipfian 8 clients 20 s, file WAL vs pmem WAL vs pmem WAL
with commit_delay; flushes per transaction. Sides rotated per repetition."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, "/work/main")
from bench.core import configs
from bench.oltp import pgbench, settings, targets, workloads

ROWS = 1_000_000
PORT = int(os.environ.get("AB_PORT", "5960"))
REPS = int(os.environ.get("AB_REPS", "3"))
WL = os.environ.get("AB_WL", "a")
CL = int(os.environ.get("AB_CLIENTS", "8"))
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, PORT)
print("load:", tg.ensure(), flush=True)
srv = tg.server
scripts = workloads.write_scripts(workloads.WORKLOADS[WL], "zipfian", Path("/tmp/gc/scripts-" + WL))
pmem = configs.BY_NAME["nvm_se2_walpmem_cl"]
file = configs.BY_NAME["nvm_se2"]
sides = {}
for spec in sys.argv[1:]:
    name, _, extra = spec.partition(":")
    base, _, _ = name.partition("+")
    cfg = pmem if base == "pmem" else file
    kv = dict(x.split("=") for x in extra.split(",")) if extra else {}
    sides[spec] = (cfg, kv)
names = list(sides)
Q = """SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname=current_database()),
 (SELECT coalesce(sum(writes),0) FROM pg_stat_io WHERE object='wal'),
 (SELECT coalesce(sum(fsyncs),0) FROM pg_stat_io WHERE object='wal')"""
for rep in range(REPS):
    k = rep % len(names)
    order = names[k:] + names[:k]
    if rep % 2:
        order.reverse()
    for side in order:
        cfg, extra = sides[side]
        srv.apply_config(cfg, {**settings.server_settings(cfg, "128MB"), **extra})
        srv.restart(move_port=True)
        with srv.connect() as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
            c.execute("ALTER EXTENSION pgnvm UPDATE")
            if os.environ.get("AB_VACUUM"):
                c.execute("VACUUM usertable")
            c.execute("CHECKPOINT")
            c.execute("SELECT pg_stat_reset_shared('io')")
            time.sleep(0.6)
            b = c.execute(Q).fetchone()
            wb = c.execute("SELECT copies, persists FROM pgnvm_wal()").fetchone()
        cmd = pgbench.command(
            srv.cluster.bin("pgbench"),
            scripts,
            clients=CL,
            threads=2,
            seconds=20,
            records=ROWS,
            dbname=targets.DBNAME,
            log_prefix=None,
        )
        t0 = os.times()
        p = subprocess.Popen(
            cmd, env=srv.cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        if os.environ.get("AB_PERF"):
            time.sleep(5)
            safe = re.sub(r"[^a-z0-9]+", "_", side)
            subprocess.run(
                [
                    "perf",
                    "record",
                    "-a",
                    "-F",
                    "1999",
                    "-e",
                    "cpu-clock",
                    "-o",
                    f"/tmp/gc/perf-{safe}-{rep}.data",
                    "--",
                    "sleep",
                    "10",
                ],
                capture_output=True,
            )
        out = p.communicate()[0]
        m = re.search(r"tps = ([\d.]+)", out)
        tps = m.group(1) if m else f"? {out[-300:]}"
        time.sleep(0.6)
        with srv.connect() as c:
            a = c.execute(Q).fetchone()
            wa = c.execute("SELECT copies, persists FROM pgnvm_wal()").fetchone()
        n = max(1, a[0] - b[0])
        with srv.connect() as c:
            av = c.execute(
                "SELECT autovacuum_count, n_dead_tup, pg_relation_size('usertable') / 8192"
                " FROM pg_stat_user_tables WHERE relname = 'usertable'"
            ).fetchone()
        print(f"av {av}", end=" ")
        print(
            f"rep {rep} {side:28s} {tps:>10s} tps  txn {n}  writes/txn {(a[1] - b[1]) / n:.3f} "
            f"fsyncs/txn {(a[2] - b[2]) / n:.3f} copies/txn {(wa[0] - wb[0]) / n:.3f} "
            f"persists/txn {(wa[1] - wb[1]) / n:.3f} "
            f"load {Path('/proc/loadavg').read_text().split()[0]}",
            flush=True,
        )
srv.stop()
