"""``./pgnvm ha bench``: what a failover costs a running HA cluster (:mod:`bench.ha.control`).

Each round: pgbench TPC-B (``--clients``, ``--seconds``) against the primary, the standbys'
replay lag sampled meanwhile (``pg_stat_replication`` on the primary, every 0.5 s), then the
fault (:data:`FAULTS`) during a second pgbench; the time to a new primary and to the first
commit on it; pgbench again on the new primary; the cluster healthy again (the old primary
rejoined; after a ``node`` fault its Patroni started again) before the next round. A JSON
of the rounds and a table.

* ``postmaster``: ``kill -9`` of the primary's postmaster. Its Patroni lives, sees it at its
  next loop (``loop_wait``) and, with ``primary_start_timeout = 0``, gives the leader key up:
  a standby promotes at once.
* ``node``: ``kill -9`` of the primary's Patroni, then of its postmaster: a whole node's
  death. Nobody gives the key up: the standbys wait until it expires (``ttl``) and promote
  at their next loop, up to ``ttl + loop_wait`` after the last renewal.
"""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.core import osuser
from bench.ha.control import HaCluster
from bench.ha.spec import TIMING

DB = "habench"
FAULTS: tuple[str, ...] = ("postmaster", "node")
SCALE = 10
_TPS = re.compile(r"^tps = ([0-9.]+)", re.M)


@dataclass
class BenchRound:
    n: int
    old: str
    new: str
    tps_before: float
    tps_after: float
    lag_max_ms: float  # the largest replay lag of a standby while loaded
    to_primary: float
    to_commit: float
    fault: str = "postmaster"


def pgbench(ha: HaCluster, i: int, args: list[str], timeout: float) -> str:
    cmd = [str(ha.bindir() / "pgbench"), *args, DB]
    r = osuser.run_pg(
        cmd, env=ha.client_env(i, DB), capture_output=True, text=True, timeout=timeout
    )
    return (r.stdout or "") + (r.stderr or "")


def tps(ha: HaCluster, i: int, clients: int, seconds: int) -> tuple[float, float]:
    """TPC-B's tps on node ``i`` for ``seconds``, and the largest replay lag (ms) of a
    standby meanwhile."""
    lags: list[float] = [0.0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                with ha.connect(i) as c:
                    row = c.execute(
                        "SELECT coalesce(max(extract(epoch FROM replay_lag)) * 1000, 0) "
                        "FROM pg_stat_replication"
                    ).fetchone()
                lags.append(float(row[0]) if row else 0.0)
            except Exception:
                pass
            stop.wait(0.5)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        args = ["-n", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds)]
        out = pgbench(ha, i, args, seconds + 60)
    finally:
        stop.set()
        t.join(5)
    m = _TPS.search(out)
    return (float(m.group(1)) if m else 0.0), max(lags)


def limit_of(fault: str) -> float:
    """Seconds from the fault to a new primary before the round fails: the TTL; a dead
    node's key expires up to a TTL after its last renewal, seen at a standby's next loop."""
    if fault == "node":
        return TIMING["ttl"] + 2 * TIMING["loop_wait"] + 5
    return float(TIMING["ttl"])


def kill(ha: HaCluster, fault: str, i: int) -> None:
    """The fault on node ``i``, the primary (:data:`FAULTS`)."""
    if fault not in FAULTS:
        raise ValueError(f"no fault {fault!r}; one of {', '.join(FAULTS)}")
    if fault == "node":
        ha.stop_process(f"node{i + 1}", signal.SIGKILL)
    ha.kill_postmaster(i)


def run(
    ha: HaCluster,
    rounds: int,
    clients: int,
    seconds: int,
    out: Path,
    fault: str = "postmaster",
) -> list[BenchRound]:
    leader = ha.index(ha.wait_healthy())
    with ha.connect(leader) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,)).fetchone():
            c.execute(f"CREATE DATABASE {DB}")
            pgbench(ha, leader, ["-i", "-q", "-s", str(SCALE)], 600)
    with ha.connect(leader, DB) as c:
        c.execute("CREATE TABLE IF NOT EXISTS probe (at timestamptz)")
    done: list[BenchRound] = []
    for n in range(1, rounds + 1):
        before, lag = tps(ha, leader, clients, seconds)
        old = ha.spec.node_names()[leader]
        load = subprocess.Popen(
            osuser.pg_command(
                [str(ha.bindir() / "pgbench"), "-n", "-c", str(clients), "-T", "60", DB],
                osuser.server_env({**ha.client_env(leader, DB), "PATH": "/usr/bin:/bin"}),
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(2)
        t0 = time.monotonic()
        kill(ha, fault, leader)
        new, to_primary, to_commit = ha.wait_new_primary(
            old, t0, limit_of(fault), DB, "INSERT INTO probe (at) VALUES (clock_timestamp())"
        )
        load.wait(60)
        if fault == "node":
            ha.start_node(leader)  # the node comes back: its Patroni rejoins it
        leader = ha.index(new)
        after, _ = tps(ha, leader, clients, seconds)
        done.append(BenchRound(n, old, new, before, after, lag, to_primary, to_commit, fault))
        ha.wait_healthy()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([asdict(r) for r in done], indent=2) + "\n")
    return done


def table(rounds: list[BenchRound]) -> list[str]:
    lines = [
        "| round | old -> new | tps before | tps after | standby lag max [ms] | "
        "new primary [s] | first commit [s] |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        lines.append(
            f"| {r.n} | {r.old} -> {r.new} | {r.tps_before:.0f} | {r.tps_after:.0f} | "
            f"{r.lag_max_ms:.1f} | {r.to_primary:.1f} | {r.to_commit:.1f} |"
        )
    if rounds:
        med = statistics.median(r.to_commit for r in rounds)
        faults = ", ".join(sorted({r.fault for r in rounds}))
        lines.append(
            f"\nmedian of {len(rounds)}: first commit {med:.1f} s after the kill ({faults})"
        )
    return lines
