"""1-client YCSB-A, pgbench and the server on the same vCPU: file WAL vs pmem WAL, alternating."""
import os, re, subprocess, sys, json
from pathlib import Path
sys.path.insert(0, "/work/main")
from bench.core import configs
from bench.oltp import pgbench, settings, targets, workloads

ROWS = 1_000_000
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, 5990)
tg.ensure()
srv = tg.server
scripts = workloads.write_scripts(workloads.WORKLOADS["a"], "zipfian", Path("/tmp/pin1-scripts"))
cmd = pgbench.command(srv.cluster.bin("pgbench"), scripts, clients=1, threads=1, seconds=15,
                      records=ROWS, dbname=targets.DBNAME, log_prefix=None)
for rep in range(3):
    for name in ("nvm_se2", "nvm_se2_walpmem_cl"):
        cfg = configs.BY_NAME[name]
        srv.apply_config(cfg, settings.server_settings(cfg, "128MB"))
        srv.apply(environment=dict(cfg.environment))
        srv.restart(move_port=True)
        with srv.connect() as c:
            c.execute("CHECKPOINT")
        pm = int(Path(srv.cluster.datadir, "postmaster.pid").read_text().split()[0])
        subprocess.run(["taskset", "-a", "-cp", "0", str(pm)], capture_output=True)
        out = subprocess.run(["taskset", "-c", "0"] + cmd, env=srv.cluster.env(), capture_output=True, text=True).stdout
        m = re.search(r"tps = ([\d.]+)", out)
        lat = re.search(r"latency average = ([\d.]+)", out)
        print(json.dumps({"rep": rep, "config": name, "tps": float(m.group(1)) if m else None,
                          "lat_ms": float(lat.group(1)) if lat else None, "load": os.getloadavg()[0]}), flush=True)
srv.stop()
