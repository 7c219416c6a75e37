"""A/B on one cluster, the two sides alternating: YCSB-A zipfian, 8 clients, 20 s each,
restart + CHECKPOINT before each run (adapted from ../oltp-wal-20261126/ab.py).

    ab.py prefault   # pmem WAL: pre-faulting before WALWriteLock (new) vs under it
                     # (PGNVM_AB_LOCKED=1: a temporary, uncommitted switch of the build)
    ab.py file       # file WAL (nvm_se2) vs pmem WAL (nvm_se2_walpmem_cl, new)

Prints one line per run: tps, pgnvm_wal()'s pre-fault counters, the load average.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "/work/main")
from bench.core import configs
from bench.oltp import pgbench, settings, targets, workloads

ROWS = 1_000_000
PORT = int(os.environ.get("AB_PORT", "5960"))
REPS = int(os.environ.get("AB_REPS", "3"))
what = sys.argv[1]
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, PORT)
print("load:", tg.ensure(), flush=True)
srv = tg.server
scripts = workloads.write_scripts(
    workloads.WORKLOADS["a"], "zipfian", Path("/tmp/ab-walprefault-scripts")
)
pmem = configs.BY_NAME["nvm_se2_walpmem_cl"]
sides = {
    "file": (configs.BY_NAME["nvm_se2"], {}),
    "before": (pmem, {}),
    "locked": (pmem, {"PGNVM_AB_LOCKED": "1"}),
}
names = list(sides)
for rep in range(REPS):
    order = names[rep % 3 :] + names[: rep % 3]
    if rep % 2:
        order.reverse()
    for side in order:
        cfg, extra = sides[side]
        srv.apply_config(cfg, settings.server_settings(cfg, "128MB"))
        srv.apply(environment={**cfg.environment, **extra})
        srv.restart(move_port=True)
        with srv.connect() as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
            c.execute("ALTER EXTENSION pgnvm UPDATE")
            c.execute("CHECKPOINT")
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
        m = re.search(r"tps = ([\d.]+)", out)
        tps = m.group(1) if m else f"? {out[-300:]}"
        row = None
        if side != "file":
            with srv.connect() as c:
                row = c.execute(
                    "SELECT mappings, copies, populates_locked, populates_unlocked, "
                    "round(populate_locked_ms::numeric, 1), round(populate_ms::numeric, 1) "
                    "FROM pgnvm_wal()"
                ).fetchone()
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(
            f"rep {rep} {side}: {tps} tps; mappings, copies, populates locked/unlocked, "
            f"locked/all ms: {row}; load {' '.join(load)}",
            flush=True,
        )
srv.stop()
