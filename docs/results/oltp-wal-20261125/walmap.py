"""pgnvm_wal() counters over a 10 s YCSB-A 8-client run: segments mapped, time pre-faulting."""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from bench.core import configs
from bench.oltp import pgbench, settings, targets, workloads

tg = targets.Target("nvm", 2_000_000, settings.DEFAULT_PREFIX, 5525)
tg.ensure()
srv = tg.server
scripts = workloads.write_scripts(workloads.WORKLOADS["a"], "zipfian", Path("/tmp/walmap-scripts"))
for name in sys.argv[1].split(","):
    cfg = configs.BY_NAME[name]
    srv.apply_config(cfg, settings.server_settings(cfg, "128MB"))
    srv.restart(move_port=True)

    def wal():
        with srv.connect(targets.DBNAME) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
            cur = c.execute("SELECT * FROM pgnvm_wal()")
            row = cur.fetchone()
            d = {x.name: v for x, v in zip(cur.description, row, strict=True)}
            d["wal_bytes"] = c.execute("select wal_bytes from pg_stat_wal").fetchone()[0]
            return d

    with srv.connect() as c:
        c.execute("CHECKPOINT")
    a = wal()
    cmd = pgbench.command(
        srv.cluster.bin("pgbench"),
        scripts,
        clients=8,
        threads=2,
        seconds=10,
        records=2_000_000,
        dbname=targets.DBNAME,
        log_prefix=None,
    )
    out = subprocess.run(cmd, env=srv.cluster.env(), capture_output=True, text=True).stdout
    b = wal()
    print(
        name,
        [ln for ln in out.splitlines() if ln.startswith("tps")],
        {
            k: (b[k] - a[k])
            if isinstance(b[k], (int, float)) and not isinstance(b[k], bool)
            else b[k]
            for k in b
        },
    )
srv.stop()
