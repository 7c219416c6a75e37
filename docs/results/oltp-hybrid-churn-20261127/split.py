"""Where the hybrid pool's OLTP CPU goes at 1/128 vs 1/2 (issue 22, branch churn).

One build, one cluster (500,000 records), YCSB-A zipfian, 8 clients, 2 pgbench threads.
Per run: restart + CHECKPOINT, pgbench for SECONDS; after WARM s a window of WINDOW s in
which it reads, for every child of the postmaster, /proc/<pid>/stat (utime, stime,
minflt) by group, pg_stat_database's commits, pgnvm_counters() and pgnvm_pool(); with
SPLIT_PERF=1 also ``perf record -e cpu-clock -F 999 -g`` of the cluster's processes over
the window (perf/<label>.data). Environment: SPLIT_RUNS="label:config:ratio:churn,...",
churn = value of the temporary switch PGNVM_AB_CHURN ('' = unset). Prints and appends one
JSON line per run to SPLIT_OUT."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, "/work/churn")
from bench.core import configs, counters, procfs, servercpu
from bench.oltp import pgbench, plan, settings, targets, workloads

ROWS = int(os.environ.get("SPLIT_ROWS", "500000"))
PORT = int(os.environ.get("SPLIT_PORT", "5860"))
SECONDS = int(os.environ.get("SPLIT_SECONDS", "30"))
WARM = float(os.environ.get("SPLIT_WARM", "8"))
WINDOW = float(os.environ.get("SPLIT_WINDOW", "15"))
PERF = os.environ.get("SPLIT_PERF") == "1"
# what perf samples: cpu-clock at 999 Hz, or e.g. SPLIT_PERF_EVENT="-e sched:sched_wakeup -c 1"
PERF_EVENT = os.environ.get("SPLIT_PERF_EVENT", "-e cpu-clock -F 999").split()
OUT = Path(os.environ.get("SPLIT_OUT", "/tmp/churn-split/split.jsonl"))
PERFDIR = OUT.parent / "perf"
RUNS = os.environ.get(
    "SPLIT_RUNS", "h128:nvm_se2_hybrid:1/128:,h2:nvm_se2_hybrid:1/2:,b2:nvm_base_worker:1/2:"
)

tg = targets.Target("nvm", ROWS, settings.DEFAULT_PREFIX, PORT)
tg.ensure()
srv = tg.server
scripts = workloads.write_scripts(
    workloads.WORKLOADS["a"], "zipfian", Path("/tmp/churn-split/scripts")
)
XACT_SQL = "select xact_commit from pg_stat_database where datname = current_database()"
AV_SQL = (
    "select coalesce(sum(autovacuum_count), 0), coalesce(sum(autoanalyze_count), 0) "
    "from pg_stat_user_tables"
)
IO_SQL = (
    "select coalesce(sum(writes) filter (where backend_type = 'client backend'), 0), "
    "coalesce(sum(writes) filter (where backend_type = 'background writer'), 0) "
    "from pg_stat_io where object = 'relation'"
)


def snapshot(c, pm: int) -> dict:
    xact = c.execute(XACT_SQL).fetchone()[0]
    cnt = counters.read_counters(c)
    pool = counters.read_pool(c)
    io = c.execute(IO_SQL).fetchone()
    types = dict(c.execute("select pid, backend_type from pg_stat_activity").fetchall())
    av = c.execute(AV_SQL).fetchone()
    procs = {}
    for pid in procfs.children(pm):
        s = procfs.sample(pid)
        if s is not None:
            procs[pid] = (servercpu.group_of(procfs.cmdline(pid), types.get(pid)), s)
    return {
        "xact": xact,
        "cnt": cnt,
        "pool": pool,
        "io": io,
        "procs": procs,
        "t": time.time(),
        "pm": procfs.sample(pm),
        "av": av,
    }


def run(label: str, cfg_name: str, ratio: str, churn: str) -> dict:
    cfg = configs.BY_NAME[cfg_name]
    sb = plan.ratio_shared_buffers(ratio, tg.data_bytes)
    desc = settings.hybrid_descriptors(tg.db_bytes, sb) if cfg.descriptors else None
    env = dict(cfg.environment)
    if churn:
        env["PGNVM_AB_CHURN"] = churn
    srv.apply_config(cfg, settings.server_settings(cfg, sb, desc))
    srv.apply(environment=env)
    srv.restart(move_port=True)
    with srv.connect() as c:
        c.execute("CHECKPOINT")
        c.execute("CREATE EXTENSION IF NOT EXISTS pgnvm")
        c.execute("ALTER EXTENSION pgnvm UPDATE")
    pm = srv.postmaster_pid()
    cmd = pgbench.command(
        srv.cluster.bin("pgbench"),
        scripts,
        clients=8,
        threads=2,
        seconds=SECONDS,
        records=ROWS,
        dbname=targets.DBNAME,
        log_prefix=None,
    )
    load0 = os.getloadavg()[0]
    pg = subprocess.Popen(cmd, env=srv.cluster.env(), stdout=subprocess.PIPE, text=True)
    time.sleep(WARM)
    with srv.connect() as c:
        a = snapshot(c, pm)
        perf = None
        if PERF:
            PERFDIR.mkdir(parents=True, exist_ok=True)
            # the postmaster too: workers it forks during the window inherit the event
            pids = ",".join(str(p) for p in [pm, *a["procs"]])
            perf = subprocess.Popen(
                [
                    "perf",
                    "record",
                    "-q",
                    *PERF_EVENT,
                    "-g",
                    "-p",
                    pids,
                    "-o",
                    str(PERFDIR / f"{label}.data"),
                    "--",
                    "sleep",
                    str(WINDOW),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            perf.wait()
        else:
            time.sleep(WINDOW)
        b = snapshot(c, pm)
    out = pg.communicate()[0]
    load1 = os.getloadavg()[0]
    summ = pgbench.parse_summary(out)
    txns = b["xact"] - a["xact"]
    groups: dict[str, dict[str, float]] = {}
    for pid, (grp, s) in b["procs"].items():
        prev = a["procs"].get(pid)
        d = s.minus(prev[1] if prev and prev[1].starttime == s.starttime else procfs.ZERO)
        g = groups.setdefault(
            grp, {"cpu_us": 0.0, "utime_us": 0.0, "minflt": 0, "vcsw": 0, "nvcsw": 0, "procs": 0}
        )
        g["cpu_us"] += (d["utime_s"] + d["stime_s"]) * 1e6
        g["utime_us"] += d["utime_s"] * 1e6
        g["minflt"] += d["minflt"]
        g["vcsw"] += d["vcsw"]
        g["nvcsw"] += d["nvcsw"]
        g["procs"] += 1
    # processes that exited during the window (autovacuum workers): the postmaster's
    # reaped children
    ex = (b["pm"].cutime + b["pm"].cstime - a["pm"].cutime - a["pm"].cstime) * 1e6
    groups["exited"] = {"cpu_us": ex, "utime_us": 0.0, "minflt": 0, "procs": 0}
    per_txn = {
        g: {k: round(v / txns, 3) for k, v in d.items() if k != "procs"} for g, d in groups.items()
    }
    cnt = {k: round((b["cnt"][k] - a["cnt"][k]) / txns, 4) for k in counters.COUNTERS}
    pool = {
        k: round((b["pool"][k] - a["pool"][k]) / txns, 4)
        for k in counters.POOL_COUNTERS
        if k in a["pool"]
    }
    r = {
        "label": label,
        "config": cfg_name,
        "ratio": ratio,
        "churn": churn,
        "tps_pgbench": summ.get("tps"),
        "window_s": round(b["t"] - a["t"], 2),
        "window_tps": round(txns / (b["t"] - a["t"]), 1),
        "txns": txns,
        "server_cpu_us_per_txn": round(sum(g["cpu_us"] for g in groups.values()) / txns, 2),
        "minflt_per_txn": round(sum(g["minflt"] for g in groups.values()) / txns, 3),
        "groups_per_txn": per_txn,
        "counters_per_txn": cnt,
        "pool_per_txn": pool,
        "io_writes_per_txn": [round(float(b["io"][i] - a["io"][i]) / txns, 4) for i in (0, 1)],
        "load1": [round(load0, 2), round(load1, 2)],
        "autovacuums": int(b["av"][0] - a["av"][0]),
        "autoanalyzes": int(b["av"][1] - a["av"][1]),
    }
    print(json.dumps(r), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as f:
        f.write(json.dumps(r) + "\n")
    return r


for spec in RUNS.split(","):
    label, cfg_name, ratio, churn = spec.split(":")
    run(label, cfg_name, ratio, churn)
srv.stop()
