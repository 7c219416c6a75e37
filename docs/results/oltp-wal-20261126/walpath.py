"""Where a commit's WAL time goes, file WAL vs pmem WAL (one configuration pair, YCSB-A).

For each configuration named (argv[1], comma-separated) and each client count (argv[2]):
restart with track_wal_io_timing = on, CHECKPOINT, reset pg_stat_io, pgbench 10 s, then
print tps, pg_stat_io's WAL row (writes/fsyncs, their time per commit) and pgnvm_wal()'s
counters (segments mapped, time pre-faulting). Repeated argv[3] times, configurations
interleaved. Uses the oltp job's 2M-row YCSB cluster (created if missing).
"""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from bench.core import configs
from bench.oltp import pgbench, settings, targets, workloads

ROWS = 2_000_000
tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, 5525)
tg.ensure()
srv = tg.server
scripts = workloads.write_scripts(workloads.WORKLOADS["a"], "zipfian", Path("/tmp/walpath"))
names = sys.argv[1].split(",")
clients = [int(x) for x in sys.argv[2].split(",")]
repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 1


def sample() -> dict:
    with srv.connect(targets.DBNAME) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
        cur = c.execute("SELECT * FROM pgnvm_wal()")
        row = cur.fetchone()
        d = {x.name: v for x, v in zip(cur.description, row, strict=True)}
        io = c.execute(
            "SELECT sum(writes)::bigint, sum(write_time)::float8, sum(fsyncs)::bigint, "
            "sum(fsync_time)::float8 "
            "FROM pg_stat_io WHERE object = 'wal' AND context = 'normal'"
        ).fetchone()
        d.update(zip(("io_writes", "io_write_ms", "io_fsyncs", "io_fsync_ms"), io, strict=True))
        d["commits"] = c.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
        return d


for rep in range(repeat):
    for n in clients:
        for name in names:
            cfg = configs.BY_NAME[name]
            s = settings.server_settings(cfg, "128MB")
            s["track_wal_io_timing"] = "on"
            srv.apply_config(cfg, s)
            srv.restart(move_port=True)
            with srv.connect() as c:
                c.execute("CHECKPOINT")
            a = sample()
            cmd = pgbench.command(
                srv.cluster.bin("pgbench"),
                scripts,
                clients=n,
                threads=min(n, 2),
                seconds=10,
                records=ROWS,
                dbname=targets.DBNAME,
                log_prefix=None,
            )
            out = subprocess.run(cmd, env=srv.cluster.env(), capture_output=True, text=True)
            b = sample()
            d = {
                k: b[k] - a[k]
                for k in b
                if isinstance(b[k], (int, float))
                and not isinstance(b[k], bool)
                and a.get(k) is not None
            }
            tps = next(
                (ln.split()[2] for ln in out.stdout.splitlines() if ln.startswith("tps")), "?"
            )
            commits = max(d["commits"], 1)
            wal_us = (float(d["io_write_ms"]) + float(d["io_fsync_ms"])) * 1000 / commits
            print(
                f"rep {rep} clients {n} {name}: tps {tps}; WAL write+sync "
                f"{wal_us:.2f} us/commit (write {float(d['io_write_ms']):.0f} ms, "
                f"sync {float(d['io_fsync_ms']):.0f} ms, {d['io_writes']} writes, "
                f"{d['io_fsyncs']} syncs, {commits} commits); mappings {d.get('mappings', 0)}, "
                f"populate {float(d.get('populate_ms', 0)):.0f} ms",
                flush=True,
            )
srv.stop()
