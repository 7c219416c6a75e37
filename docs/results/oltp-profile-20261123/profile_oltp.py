"""One-off: where the time goes at 8 clients, YCSB-A, file WAL vs pmem WAL (se2).

For each configuration: start the oltp cluster with it, CHECKPOINT, run pgbench (8 clients,
40 s) and meanwhile (from t=10 s, 20 s) perf record -e cpu-clock -a -g and a 50 Hz sampler of
pg_stat_activity wait events of the pgbench backends. Prints tps, wait-event shares and the
top symbols.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from bench.core import configs
from bench.oltp import pgbench, settings, targets, workloads

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
CONFIGS = sys.argv[2].split(",")
tg = targets.Target("nvm", 2_000_000, settings.DEFAULT_PREFIX, 5525)
tg.ensure()
srv = tg.server
scripts = workloads.write_scripts(workloads.WORKLOADS["a"], "zipfian", OUT / "scripts")

for name in CONFIGS:
    cfg = configs.BY_NAME[name]
    srv.apply_config(cfg, settings.server_settings(cfg, "128MB"))
    srv.restart(move_port=True)
    with srv.connect() as c:
        c.execute("CHECKPOINT")
    cmd = pgbench.command(
        srv.cluster.bin("pgbench"),
        scripts,
        clients=8,
        threads=2,
        seconds=40,
        records=2_000_000,
        dbname=targets.DBNAME,
        log_prefix=None,
    )
    pb = subprocess.Popen(
        cmd, env=srv.cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    time.sleep(10)
    waits: collections.Counter[str] = collections.Counter()
    stop = threading.Event()

    def sample(waits: collections.Counter[str] = waits, stop: threading.Event = stop) -> None:
        with srv.connect() as s:
            while not stop.is_set():
                for (w,) in s.execute(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') "
                    "FROM pg_stat_activity WHERE application_name = 'pgbench' "
                    "AND state = 'active'"
                ).fetchall():
                    waits[w] += 1
                time.sleep(0.02)

    th = threading.Thread(target=sample)
    th.start()
    data = OUT / f"{name}.perf.data"
    subprocess.run(
        [
            "perf",
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "-a",
            "-g",
            "-o",
            str(data),
            "--",
            "sleep",
            "20",
        ],
        check=False,
    )
    stop.set()
    th.join()
    out, _ = pb.communicate()
    tps = [ln for ln in out.splitlines() if ln.startswith("tps")]
    total = sum(waits.values())
    lines = [f"# {name}: {tps}", "wait events of active pgbench backends (share of samples):"]
    lines += [f"  {k:40s} {v / total:6.1%}" for k, v in waits.most_common(12)]
    rep = subprocess.run(
        [
            "perf",
            "report",
            "-i",
            str(data),
            "--no-children",
            "--sort",
            "comm,sym",
            "--stdio",
            "-g",
            "none",
            "--percent-limit",
            "0.7",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    lines += [ln for ln in rep.splitlines() if ln.strip() and not ln.startswith("#")][:45]
    text = "\n".join(lines)
    print(text, flush=True)
    (OUT / f"{name}.txt").write_text(text + "\n")
    os.unlink(data)
srv.stop()
