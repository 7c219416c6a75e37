"""ha: failovers of a 3-node Patroni cluster (``./pgnvm ha``, :mod:`bench.ha`) under load;
no acknowledged commit may be lost.

One HA cluster of the release build, configuration :data:`CONFIG` (se2 with WAL and data
write-back through libpmem2; stock base where the build refuses se2), small
(``shared_buffers`` 16 MB). Rounds (:data:`ROUNDS`): pgbench (TPC-B or YCSB-A, alternating)
and the acknowledgement recorder (:func:`bench.testsuite.oltpload.recorder`) against the
primary, then after a seeded delay (1.5-3 s) a fault:

* ``kill``: ``kill -9`` of the primary's postmaster (its Patroni lives on and gives the
  leader key up at its next loop: ``primary_start_timeout = 0``);
* ``node+etcd``: one etcd member stopped, then the primary's Patroni and postmaster killed
  (a node's death: the leader key must expire, TTL);
* ``switchover``: Patroni's planned switchover.

After each: a new primary within the limit of the fault (:func:`limit_of`), the first commit
on it timed (from the fault), every acknowledged id on it, the old primary back as a
streaming replica (whether Patroni ran pg_rewind is counted from its log), every replica
caught up with the primary (served by a WAL sender of the primary, receiving the primary's
timeline and replayed up to its position), and on every node the acknowledged ids,
``pg_amcheck`` clean (replicas: the checks a server in recovery can run) and TPC-B's
balances consistent. A node that stops answering during those checks (Patroni restarting
or demoting it) is noted in the round's line and the checks run again once. At the end no
node's server log may show a crash (PANIC, a server process killed by a signal: the faults
kill postmasters, never a backend).
A failure keeps copies of every node's logs in the run's results (``ha/``).

Broken setups, to see the check fail (``PGNVM_HA_BREAK``, not for CI): ``async``
(synchronous_mode off, Patroni allowed any lag, and the standbys' WAL receivers frozen for
a second before each ``kill``, as a slow network would hold them back: acknowledged commits
are lost), ``norewind`` (no pg_rewind: an old primary that went further than its successor
does not rejoin).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.core import build, configs, osuser, procfs
from bench.core.cluster import datadir_processes
from bench.ha.control import HaCluster, new_spec
from bench.ha.spec import MEMBERS, TIMING, HaError
from bench.testsuite import errmatch
from bench.testsuite.acks import AckLog, verify_acks
from bench.testsuite.context import RunState
from bench.testsuite.model import CheckFailed
from bench.testsuite.oltpload import (
    recorder,
    round_acks,
    tpcb_consistency,
    ycsb_a_script,
    ycsb_load,
)
from bench.testsuite.pgamcheck import AMCHECK_OPTS, findings
from bench.testsuite.proc import Background
from bench.testsuite.settings import BASE_SETTINGS

#: the release build: three servers, their Patroni and a load on one machine's CPUs
#: (``tap_recovery`` runs promotion and rewind in the cassert build)
FLAVOUR = "release"
NAME = "pgnvm-test-ha"
CONFIG = "nvm_se2_pmem"
FALLBACK = configs.REFERENCE
PORT_START = 5800
DB = "hatest"
SCALE = 1
CLIENTS = 2
YCSB_ROWS = 2_000
ROUNDS: tuple[str, ...] = ("kill",) * 5 + ("node+etcd", "switchover")
LOAD_FOR = (1.5, 3.0)  # seconds of load before the fault
CATCH_UP_S = 60.0  # seconds for the replicas to stream from the new primary and replay
ROUND_ID_STRIDE = 1_000_000_000
#: what pg_amcheck can check on a server in recovery (no ShareLock: no --parent-check and
#: what implies it; no --install-missing: read-only, amcheck comes from the primary)
REPLICA_AMCHECK = ("--heapallindexed", "--checkunique")


def limit_of(fault: str) -> float:
    """Seconds from the fault to a new primary: within the TTL when the old primary's
    Patroni lives (it gives the key up); a dead node's key expires after at most the TTL,
    then a replica sees it at its next loop and promotes."""
    if fault == "node+etcd":
        return TIMING["ttl"] + 2 * TIMING["loop_wait"] + 5
    return float(TIMING["ttl"])


@dataclass
class Node:
    """One node as the ledger and TPC-B's check reach it (``connect(db)``)."""

    ha: HaCluster
    i: int

    def connect(self, dbname: str | None = None) -> Any:
        return self.ha.connect(self.i, dbname or "postgres")

    def client_env(self, dbname: str = DB) -> dict[str, str]:
        return self.ha.client_env(self.i, dbname)


@dataclass
class Round:
    n: int
    fault: str
    workload: str
    old: str = ""
    new: str = ""
    to_primary: float = 0.0
    to_commit: float = 0.0
    acked: int = 0
    rewound: bool = False
    rejoin: float = 0.0  # seconds from the new primary's first commit to every replica
    # streaming from it and replayed up to its position
    checks: float = 0.0  # seconds of the checks on every node
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"r{self.n} {self.fault}/{self.workload}: {self.old}->{self.new} primary "
            f"{self.to_primary:.1f}s, first commit {self.to_commit:.1f}s, {self.acked} acked"
            f"{', rewound' if self.rewound else ''}, rejoined {self.rejoin:.1f}s, "
            f"checked {self.checks:.1f}s" + "".join(f" (noted: {x})" for x in self.notes)
        )


def _config(bindir: Path) -> tuple[str, str]:
    v = configs.verdict(configs.BY_NAME[CONFIG], bindir, BASE_SETTINGS)
    if v.available is False:
        return FALLBACK, f" ({CONFIG} refused by the build: {v.why})"
    return CONFIG, ""


def _bin(name: str) -> str:
    return str(build.bindir(FLAVOUR) / name)


def _run(cmd: list[str], env: dict[str, str], log: Path, timeout: float) -> tuple[int, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    full.update(env)
    r = osuser.run_pg(cmd, env=full, capture_output=True, text=True, timeout=timeout, check=False)
    out = (r.stdout or "") + (r.stderr or "")
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{out}\n")
    return r.returncode, out


def _wait(what: str, timeout: float, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.1)


def _first_commit(ha: HaCluster, old: str, t0: float, limit: float) -> tuple[str, float, float]:
    """(new primary, seconds to it, seconds to the first commit on it: an insert into
    ``probe``) since the fault at ``t0``."""
    try:
        return ha.wait_new_primary(
            old, t0, limit, DB, "INSERT INTO probe (at) VALUES (clock_timestamp())"
        )
    except HaError as e:
        raise CheckFailed(f"{e} (limit of this fault: {limit:.0f}s)") from None


def _walsenders(ha: HaCluster, leader: int) -> dict[str, str]:
    """The primary's WAL senders: standby name (Patroni's ``application_name``) -> state."""
    with Node(ha, leader).connect() as c:
        rows = c.execute("SELECT application_name, state FROM pg_stat_replication").fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _replica(ha: HaCluster, i: int, lsn: str) -> tuple[str, int, bool] | None:
    """Node ``i``'s WAL receiver: (status, timeline it receives, replayed up to ``lsn``);
    None when it does not answer or has no WAL receiver."""
    with contextlib.suppress(psycopg.Error), Node(ha, i).connect() as c:
        row = c.execute(
            "SELECT status, received_tli, pg_last_wal_replay_lsn() >= %s::pg_lsn"
            " FROM pg_stat_wal_receiver",
            (lsn,),
        ).fetchone()
        if row and row[0] is not None:
            return str(row[0]), int(row[1] or 0), bool(row[2])
    return None


def _position(ha: HaCluster, leader: int) -> tuple[str, int]:
    """The primary's WAL position and its timeline (the first 8 digits of its WAL file)."""
    with Node(ha, leader).connect() as c:
        lsn, walfile = c.execute(
            "SELECT pg_current_wal_lsn(), pg_walfile_name(pg_current_wal_lsn())"
        ).fetchone()
    return str(lsn), int(str(walfile)[:8], 16)


def _caught_up(ha: HaCluster, leader: int) -> None:
    """Every replica streams from the primary on the primary's timeline and has replayed
    what the primary had written when asked.

    Neither Patroni's ``streaming`` nor a replay position alone says so: an old primary is
    started as a standby before Patroni finds it must be rewound; its WAL receiver then
    fetches the old timeline from the new primary up to the fork (``streaming``, in both
    servers' views) while its replay position, on the old timeline, is past the new
    primary's. Checked then, it is stopped for pg_rewind under the checks (a CI run's
    ``connection refused`` in round 1, 2026-11-28; a rewind logged after the next round's
    fault in a run of the check before this rule). The timeline it receives tells."""
    lsn, tli = _position(ha, leader)
    others = [i for i in range(MEMBERS) if i != leader]
    seen: dict[str, str] = {}
    state: dict[int, tuple[str, int, bool] | None] = {}

    def streaming() -> bool:
        nonlocal seen
        with contextlib.suppress(psycopg.Error):
            seen = _walsenders(ha, leader)
        return all(seen.get(f"node{i + 1}") == "streaming" for i in others)

    def replayed(i: int) -> bool:
        state[i] = _replica(ha, i, lsn)
        return state[i] == ("streaming", tli, True)

    try:
        _wait(f"every replica streaming from node{leader + 1}", CATCH_UP_S, streaming)
        for i in others:
            _wait(
                f"node{i + 1} streaming timeline {tli} and replaying up to the primary's {lsn}",
                CATCH_UP_S,
                lambda i=i: replayed(i),
            )
    except CheckFailed as e:
        got = ", ".join(f"node{i + 1} (status, timeline, replayed) {v}" for i, v in state.items())
        raise CheckFailed(
            f"{e}: the primary's WAL senders {seen or 'none'}; {got or 'no replica asked'}; "
            f"Patroni: {_members(ha)}"
        ) from None


def _members(ha: HaCluster) -> str:
    """Patroni's view, one item per node (for a failure's message)."""
    return ", ".join(
        f"{m.get('name')} {m.get('role')}/{m.get('state')} timeline {m.get('timeline')}"
        for m in ha.members()
    )


def _check_node(
    ha: HaCluster, i: int, primary: bool, acked: list[int], sent: int, work: Path
) -> None:
    """Node ``i``: every acknowledged id there, TPC-B consistent, pg_amcheck clean."""
    node = Node(ha, i)
    with node.connect(DB) as c:
        present = [r[0] for r in c.execute("SELECT id FROM acks").fetchall()]
    v = verify_acks(acked, present, ROUND_ID_STRIDE, sent)
    if not v.ok:
        raise CheckFailed(f"node{i + 1}: {v.describe()}")
    tpcb_consistency(node, DB, SCALE, need_history=False)  # type: ignore[arg-type]
    opts = AMCHECK_OPTS if primary else REPLICA_AMCHECK
    log = work / f"ha-amcheck-node{i + 1}.log"
    rc, out = _run([_bin("pg_amcheck"), *opts, "-d", DB], node.client_env(), log, 300)
    if rc != 0 or findings(out):
        raise CheckFailed(f"pg_amcheck on node{i + 1} exited {rc}:\n{out[-3000:]}", [str(log)])


def _check_nodes(
    ha: HaCluster, leader: int, acked: list[int], sent: int, work: Path, notes: list[str]
) -> int:
    """Every node checked (:func:`_check_node`; the replicas caught up, :func:`_caught_up`);
    returns the leader. A node that stops answering during the checks (Patroni restarted or
    demoted it: a crash would be in its log, :func:`_crashes`) is noted and the checks run
    once more on the cluster Patroni makes healthy again; a second time fails."""
    for attempt in (1, 2):
        try:
            for i in range(MEMBERS):
                _check_node(ha, i, i == leader, acked, sent, work)
            return leader
        except psycopg.OperationalError as e:
            what = f"{str(e).splitlines()[0]} during the checks (Patroni: {_members(ha)})"
            if attempt == 2:
                raise CheckFailed(f"again: {what}; before: {'; '.join(notes)}") from None
            notes.append(what)
            leader = ha.index(ha.wait_healthy(timeout=120))
            _caught_up(ha, leader)
    raise AssertionError("unreachable")


def _crashes(ha: HaCluster) -> list[str]:
    """Crash lines (PANIC, a process killed by a signal, a TRAP) in any node's server log:
    the faults kill postmasters and Patroni, never a server process."""
    out = []
    for i in range(MEMBERS):
        with contextlib.suppress(OSError):
            text = ha.postgres_log(i).read_text(errors="replace")
            out += [f"node{i + 1}: {x}" for x in errmatch.log_problems(text)]
    return out


def _keep_logs(ha: HaCluster, dest: Path) -> list[str]:
    """Copies of every node's Patroni and server log (a failed run purges the cluster)."""
    kept = []
    dest.mkdir(parents=True, exist_ok=True)
    for i in range(MEMBERS):
        for log in (ha.patroni_log(i), ha.postgres_log(i)):
            with contextlib.suppress(OSError):
                to = dest / f"node{i + 1}-{log.name}"
                shutil.copyfile(log, to)
                kept.append(str(to))
    return kept


def _load(ha: HaCluster, leader: int, workload: str, work: Path, n: int) -> Background:
    cmd = [_bin("pgbench"), "-n", "-c", str(CLIENTS), "-j", "1", "-T", "120"]
    if workload == "ycsb_a":
        script = work / "ha-ycsb-a.sql"
        script.write_text(ycsb_a_script(YCSB_ROWS))
        script.chmod(0o644)
        cmd += ["-f", str(script)]
    return Background(
        [*cmd, DB],
        log=work / f"ha-pgbench-{n}.log",
        env=Node(ha, leader).client_env(),
        as_server=True,
    )


def _rewinds(ha: HaCluster, i: int) -> int:
    try:
        return ha.patroni_log(i).read_text(errors="replace").count("running pg_rewind from")
    except OSError:
        return 0


def _walreceivers(ha: HaCluster, leader: int) -> list[int]:
    pids = []
    for i in range(MEMBERS):
        if i != leader:
            pids += [
                p
                for p in datadir_processes(Path(ha.spec.datadirs[i]))
                if "walreceiver" in " ".join(procfs.argv(p))
            ]
    return pids


def _fault(ha: HaCluster, fault: str, leader: int, n: int, lag: bool = False) -> None:
    """``lag`` (the ``async`` broken setup): the standbys' WAL receivers are frozen for a
    second before the primary dies, as a slow network would hold them back (with
    synchronous replication the same would only hold the commits back)."""
    if lag and fault == "kill":
        frozen = _walreceivers(ha, leader)
        for p in frozen:
            os.kill(p, signal.SIGSTOP)
        time.sleep(1.0)
        try:
            _fault(ha, fault, leader, n)
        finally:
            for p in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGCONT)
        return
    if fault == "switchover":
        ha.switchover(timeout=TIMING["ttl"])
        return
    if fault == "node+etcd":
        ha.stop_process(f"etcd{n % MEMBERS + 1}")
        ha.stop_process(f"node{leader + 1}", signal.SIGKILL)
    try:
        ha.kill_postmaster(leader)
    except HaError as e:
        raise CheckFailed(str(e)) from None


def _broken(how: str) -> Callable[[dict[str, Any]], None] | None:
    """A deliberately broken setup (``PGNVM_HA_BREAK``), to see the check fail: ``async``
    (no synchronous replication, any lag allowed at failover: acknowledged commits can be
    lost), ``norewind`` (no pg_rewind: an old primary whose WAL went further than its
    successor's cannot rejoin)."""
    if not how:
        return None
    if how not in ("async", "norewind"):
        raise CheckFailed(f"PGNVM_HA_BREAK={how!r}: async or norewind")

    def tweak(conf: dict[str, Any]) -> None:
        dcs = conf["bootstrap"]["dcs"]
        if how == "async":
            dcs["synchronous_mode"] = False
            dcs["maximum_lag_on_failover"] = 1 << 40
        else:
            dcs["postgresql"]["use_pg_rewind"] = False

    return tweak


def ha_check(run: RunState, limit: float) -> str:
    work = osuser.ensure_dir(run.work_root / "ha")
    config, why = _config(build.bindir(FLAVOUR))
    if HaCluster.exists(NAME):  # left by an interrupted run
        old = HaCluster.load(NAME)
        old.down()
        old.purge()
    settings = dict(BASE_SETTINGS)
    ha = HaCluster(new_spec(NAME, config, FLAVOUR, None, settings, port_start=PORT_START))
    ha.tweak = _broken(os.environ.get("PGNVM_HA_BREAK", ""))
    ha.needs_sync = os.environ.get("PGNVM_HA_BREAK") != "async"
    rng = random.Random(run.seed)
    rounds: list[Round] = []
    try:
        t_up = time.monotonic()
        leader_name = ha.up()
        up_s = time.monotonic() - t_up
        leader = ha.index(leader_name)
        primary = Node(ha, leader)
        with primary.connect() as c:
            c.execute(f"CREATE DATABASE {DB}")
        rc, out = _run(
            [_bin("pgbench"), "-i", "-q", "-s", str(SCALE), DB],
            primary.client_env(),
            work / "ha-pgbench-init.log",
            300,
        )
        if rc != 0:
            raise CheckFailed(f"pgbench -i failed:\n{out[-2000:]}")
        with primary.connect(DB) as c:
            c.execute("CREATE TABLE acks (id bigint PRIMARY KEY, at timestamptz)")
            c.execute("CREATE TABLE probe (at timestamptz)")
            c.execute("CREATE EXTENSION amcheck")
        ycsb_load(primary, DB, YCSB_ROWS)  # type: ignore[arg-type]

        all_acked: list[int] = []
        for n, fault in enumerate(ROUNDS, start=1):
            r = Round(n, fault, ("tpcb", "ycsb_a")[(n - 1) % 2], old=f"node{leader + 1}")
            log = AckLog()
            stop = threading.Event()
            errors: list[BaseException] = []
            bench = _load(ha, leader, r.workload, work, n)
            rec = threading.Thread(
                target=recorder,
                args=(Node(ha, leader), DB, log, n * ROUND_ID_STRIDE + 1, stop, errors),
                daemon=True,
            )
            rewinds = _rewinds(ha, leader)
            try:
                rec.start()
                time.sleep(rng.uniform(*LOAD_FOR))
                if bench.proc.poll() is not None:
                    raise CheckFailed(f"round {n}: pgbench exited early:\n{bench.output()[-2000:]}")
                t0 = time.monotonic()
                _fault(ha, fault, leader, n, lag=not ha.needs_sync)
                r.new, r.to_primary, r.to_commit = _first_commit(ha, r.old, t0, limit_of(fault))
                stop.set()
                rec.join(timeout=30)
            finally:
                stop.set()
                bench.stop()
            acked = round_acks(log, errors, f"round {n}", "before the fault")
            r.acked = len(acked)
            all_acked += acked
            t1 = time.monotonic()
            if fault == "node+etcd":
                ha.start_etcd(n % MEMBERS)
                ha.start_node(leader)
            ha.wait_healthy(timeout=120)  # Patroni's view: the old primary back, streaming
            _caught_up(ha, ha.index(r.new))  # the servers' view (after any pg_rewind)
            r.rewound = _rewinds(ha, leader) > rewinds  # the old primary's Patroni log
            leader = ha.index(r.new)
            t2 = time.monotonic()
            leader = _check_nodes(ha, leader, all_acked, (n + 1) * ROUND_ID_STRIDE, work, r.notes)
            r.rejoin, r.checks = t2 - t1, time.monotonic() - t2
            rounds.append(r)
        if _crashes(ha):
            raise CheckFailed("a server crashed (its lines below)")
    except (CheckFailed, HaError, psycopg.Error) as e:
        done = "; ".join(x.line() for x in rounds)
        kept = _keep_logs(ha, run.results_dir / "ha")
        crashed = "".join(f"\n{x}" for x in _crashes(ha)[:5])
        raise CheckFailed(
            f"{e} (rounds done: {done or 'none'}; logs: {run.results_dir / 'ha'}){crashed}", kept
        ) from None
    finally:
        ha.down()
        if not run.keep:
            ha.purge()
    out = run.results_dir / "ha"
    out.mkdir(parents=True, exist_ok=True)
    (out / "rounds.json").write_text(
        json.dumps(
            {"config": config, "up_s": up_s, "rounds": [asdict(x) for x in rounds]}, indent=2
        )
    )
    kills = [x.to_commit for x in rounds if x.fault == "kill"]
    kills.sort()
    return (
        f"{config}{why}: up in {up_s:.0f}s; {len(rounds)} rounds, {len(all_acked)} acknowledged "
        f"ids, 0 lost on any node; kill -9 to first commit median {kills[len(kills) // 2]:.1f}s "
        f"(TTL {TIMING['ttl']}s, loop_wait {TIMING['loop_wait']}s); "
        f"{sum(x.rewound for x in rounds)} rewinds; amcheck and TPC-B clean on 3 nodes after "
        f"each: {'; '.join(x.line() for x in rounds)}"
    )
