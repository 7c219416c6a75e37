"""crash: kill -9 the server under a write load; every acknowledged commit must survive.

Each round runs a pgbench load and an acknowledgement recorder (autocommit inserts whose ids
are logged once COMMIT returned), kills every process of the cluster after a seeded random
delay, restarts (crash recovery) and checks that every acknowledged id is there. Loads:
TPC-B (pgbench's built-in) and YCSB-A (50% reads, 50% updates of one 100-byte field of
``usertable``, keys zipfian (s = 1.01, pgbench's lowest) scattered with ``permute()``).
Configurations that write WAL through libpmem2 (``nvm_wal = pmem``) get 4 rounds,
alternating TPC-B and YCSB-A; the others 3 rounds of TPC-B. Afterwards: ``pg_amcheck``
clean, TPC-B balances consistent, ``usertable`` complete.

(Those configurations had 10 rounds while ``crash`` was the only check of their write path
under load. A ``kill -9`` keeps every byte written, persisted or not, in the page cache:
whether WAL and written-back blocks were made durable is ``powerloss``'s to show, with 5
simulated power cuts per such configuration under the same two loads. Here the rounds check
what a process crash alone checks: recovery from a server killed at any moment.)
"""

from __future__ import annotations

import contextlib
import random
import threading
import time

from bench.testsuite.acks import AckLog, verify_acks
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed
from bench.testsuite.oltpload import (
    RECOVERY_MARKERS,
    recorder,
    round_acks,
    tpcb_consistency,
    ycsb_a_script,
    ycsb_load,
)
from bench.testsuite.pgamcheck import run_amcheck
from bench.testsuite.proc import TIMED_LOAD_NICE, Background, yield_cpu

DB = "crashtest"
SCALE = 5
CLIENTS = 4
ROUNDS = ("tpcb",) * 3
#: configurations writing WAL through libpmem2: both loads (durability: ``powerloss``)
WAL_PMEM_ROUNDS = ("tpcb", "ycsb_a") * 2
YCSB_ROWS = 20_000  # ~1 KB rows: ~22 MB, larger than the test clusters' shared_buffers
YCSB_A = ycsb_a_script(YCSB_ROWS)
KILL_AFTER = (3.0, 8.0)
ROUND_ID_STRIDE = 1_000_000_000  # round r writes ids r*STRIDE+1, r*STRIDE+2, ...


def _load_command(env: EngineEnv, workload: str) -> list[str]:
    """pgbench running ``workload`` (tpcb | ycsb_a) until killed (at most 30 s)."""
    cmd = [env.tool("pgbench"), "-n", "-c", str(CLIENTS), "-j", "2", "-T", "30", "-P", "1"]
    if workload == "ycsb_a":
        script = env.workdir / "crash-ycsb-a.sql"
        script.write_text(YCSB_A)
        script.chmod(0o644)
        cmd += ["-f", str(script)]
    return [*cmd, DB]


def _yield_load_cpu(env: EngineEnv, within: float) -> int:
    """pgbench's backends are a timed load (they run until the kill): lower their CPU
    priority (proc.yield_cpu) so the acknowledgement recorder, whose commits the check
    verifies, and the configuration beside this one in the other lane go first. Looks for
    the CLIENTS backends for up to ``within`` seconds; returns how many were found."""
    deadline = time.monotonic() + within
    found: set[int] = set()
    with env.server.connect() as c:
        while len(found) < CLIENTS and time.monotonic() < deadline:
            rows = c.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'"
            ).fetchall()
            new = {int(r[0]) for r in rows} - found
            found |= set(yield_cpu(sorted(new)))
            if len(found) < CLIENTS:
                time.sleep(0.05)
    return len(found)


def crash(env: EngineEnv, limit: float) -> str:
    rng = random.Random(env.run.seed)
    rounds = WAL_PMEM_ROUNDS if env.config.writes_wal_pmem else ROUNDS
    with env.server.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
        c.execute(f"CREATE DATABASE {DB}")
    ran = env.run_tool(
        [env.tool("pgbench"), "-i", "-q", "-s", str(SCALE), DB],
        timeout=300,
        log_name="crash-pgbench-init.log",
    )
    if ran.returncode != 0:
        raise CheckFailed(f"pgbench -i failed:\n{ran.tail()}")
    with env.server.connect(DB) as c:
        c.execute("CREATE TABLE acks (id bigint PRIMARY KEY, at timestamptz)")
    if "ycsb_a" in rounds:
        ycsb_load(env.server, DB, YCSB_ROWS)

    total_checked = 0
    notes = []
    all_acked: list[int] = []
    for rnd, workload in enumerate(rounds, start=1):
        first = rnd * ROUND_ID_STRIDE + 1
        log = AckLog()
        stop = threading.Event()
        errors: list[BaseException] = []
        bench = Background(
            _load_command(env, workload),
            log=env.workdir / f"crash-pgbench-{rnd}.log",
            env=env.client_env(),
            as_server=True,
        )
        rec = threading.Thread(
            target=recorder, args=(env.server, DB, log, first, stop, errors), daemon=True
        )
        try:
            rec.start()
            delay = rng.uniform(*KILL_AFTER)
            t0 = time.monotonic()
            yielded = _yield_load_cpu(env, min(delay, 2.0))
            time.sleep(max(0.0, delay - (time.monotonic() - t0)))
            if bench.proc.poll() is not None:
                raise CheckFailed(f"round {rnd}: pgbench exited early:\n{bench.output()[-2000:]}")
            if not rec.is_alive():
                raise CheckFailed(f"round {rnd}: the ack recorder stopped early: {errors}")
            # kills every process of the data directory and waits until they are gone
            killed = env.server.cluster.kill9()
            stop.set()
            rec.join(timeout=30)
            if rec.is_alive():
                raise CheckFailed(f"round {rnd}: the ack recorder did not notice the crash")
            if bench.wait(30) is None:
                raise CheckFailed(f"round {rnd}: pgbench kept running after the crash")
        finally:
            stop.set()
            bench.stop()
        acked = round_acks(log, errors, f"round {rnd}", f"in {delay:.1f}s")

        offset = env.server.log_offset()
        env.server.start()  # crash recovery; raises if the server cannot come back
        recovery_log = env.server.log_since(offset)
        if not any(m in recovery_log for m in RECOVERY_MARKERS):
            raise CheckFailed(
                f"round {rnd}: restart after kill -9 shows no crash recovery in the "
                f"server log:\n{recovery_log[-2000:]}"
            )
        with env.server.connect(DB) as c:
            present = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM acks WHERE id >= %s", (rnd * ROUND_ID_STRIDE,)
                ).fetchall()
            ]
        verdict = verify_acks(acked, present, first, log.attempted)
        if not verdict.ok:
            raise CheckFailed(f"round {rnd} (killed after {delay:.1f}s): {verdict.describe()}")
        total_checked += verdict.checked
        all_acked += acked
        notes.append(
            f"r{rnd} {workload}: kill@{delay:.1f}s {verdict.checked} acked, "
            f"{len(present) - verdict.checked} unacked-but-committed, {killed} processes killed, "
            f"{yielded} load backends at nice {TIMED_LOAD_NICE}"
        )

    # every acknowledged id of every round, once more after all crashes
    with env.server.connect(DB) as c:
        present_all = [r[0] for r in c.execute("SELECT id FROM acks").fetchall()]
    final = verify_acks(
        all_acked, present_all, ROUND_ID_STRIDE, (len(rounds) + 1) * ROUND_ID_STRIDE
    )
    if not final.ok:
        raise CheckFailed(f"after {len(rounds)} crashes: {final.describe()}")
    amc = run_amcheck(env, [DB], max(60.0, limit / 3), "crash-amcheck.log")
    cons = tpcb_consistency(env.server, DB, SCALE)
    if "ycsb_a" in rounds:
        with env.server.connect(DB) as c:
            n = c.execute("SELECT count(*) FROM usertable").fetchone()
        if n != (YCSB_ROWS,):
            raise CheckFailed(f"usertable has {n} rows after the crashes, expected {YCSB_ROWS}")
        cons += f"; usertable complete ({YCSB_ROWS} rows)"
    with contextlib.suppress(Exception), env.server.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
    return (
        f"{len(rounds)} kill -9 rounds (seed {env.run.seed}): {total_checked} acknowledged ids "
        f"checked, 0 lost ({'; '.join(notes)}); {amc}; {cons}"
    )
