import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "/work/wal")
from bench.core import configs
from bench.oltp import pgbench, settings, targets, workloads

ROWS = 2_000_000
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, 5525)
tg.ensure()
srv = tg.server
scripts = workloads.write_scripts(workloads.WORKLOADS["a"], "zipfian", Path("/tmp/ab-scripts"))
cfg = configs.BY_NAME["nvm_se2_walpmem_cl"]
for rep in range(3):
    for mode in ("copy", "whole"):
        env = dict(cfg.environment)
        if mode == "whole":
            env["PGNVM_AB_WHOLE"] = "1"
        srv.apply_config(cfg, settings.server_settings(cfg, "128MB"))
        srv.apply(environment=env)
        srv.restart(move_port=True)
        with srv.connect() as c:
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
        tps = re.search(r"tps = ([\d.]+)", out).group(1)
        print(f"rep {rep} {mode}: {tps} tps", flush=True)
srv.stop()
