"""The points of a ``./pgnvm oltp`` run as cells: the repetitions of one point (a
configuration, workload, distribution, client count and, in the memory-ratio experiment, a
ratio) with the medians the report and the charts read (throughput, its spread, latency
percentiles, WAL per transaction, checkpoints, buffer hits, CPU per transaction by backend
type). Computed from the raw records (``runs.jsonl``) only."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from bench.core import configs

#: the CPU split's groups (backend types) and what else counts as "other"
CPU_GROUPS = ("client backend", "walwriter", "checkpointer", "background writer", "io worker")


@dataclass
class Cell:
    """The repetitions of one point (configuration, workload, distribution, clients[, ratio])."""

    key: str
    config: str
    workload: str
    distribution: str
    clients: int
    ratio: str | None
    shared_buffers: str
    recs: list[dict[str, Any]] = field(default_factory=list)

    def _med(self, get: Any) -> float | None:
        xs = [v for v in (get(r) for r in self.recs) if v is not None]
        return statistics.median(xs) if xs else None

    @property
    def tps(self) -> float | None:
        return self._med(lambda r: r.get("tps"))

    @property
    def tps_range(self) -> tuple[float, float] | None:
        xs = [r["tps"] for r in self.recs if r.get("tps") is not None]
        return (min(xs), max(xs)) if xs else None

    @property
    def second_spread(self) -> tuple[float | None, float | None]:
        """p5 and p95 of the per-second throughput (the lowest p5, highest p95 of the reps)."""
        p5 = [r["per_second"]["p5"] for r in self.recs if (r.get("per_second") or {}).get("p5")]
        p95 = [r["per_second"]["p95"] for r in self.recs if (r.get("per_second") or {}).get("p95")]
        return (min(p5) if p5 else None, max(p95) if p95 else None)

    def latency(self, k: str) -> float | None:
        if k == "max_ms":
            xs = [r["latency"][k] for r in self.recs if (r.get("latency") or {}).get(k)]
            return max(xs) if xs else None
        return self._med(lambda r: (r.get("latency") or {}).get(k))

    def op_latency(self, op: str, k: str) -> float | None:
        return self._med(lambda r: ((r.get("latency_by_op") or {}).get(op) or {}).get(k))

    @property
    def wal_per_txn(self) -> float | None:
        return self._med(lambda r: r.get("wal_bytes_per_txn"))

    @property
    def checkpoints(self) -> float | None:
        def n(r: dict[str, Any]) -> float | None:
            c = (r.get("stats") or {}).get("checkpointer") or {}
            if not c:
                return None
            return c.get("num_timed", 0) + c.get("num_requested", 0)

        return self._med(n)

    @property
    def hit_ratio(self) -> float | None:
        def h(r: dict[str, Any]) -> float | None:
            d = (r.get("stats") or {}).get("database") or {}
            tot = d.get("blks_hit", 0) + d.get("blks_read", 0)
            return d.get("blks_hit", 0) / tot if tot else None

        return self._med(h)

    @property
    def durable(self) -> bool:
        return all(r.get("durable") for r in self.recs)

    @property
    def descriptors(self) -> str | None:
        """se2's hybrid pool: the nvm_buffer_descriptors written (the repetitions' largest;
        None without a hybrid pool)."""
        xs = [r["nvm_buffer_descriptors"] for r in self.recs if r.get("nvm_buffer_descriptors")]
        return max(xs, key=configs.size_bytes) if xs else None

    @property
    def shmem_bytes(self) -> float | None:
        """Shared memory the server allocated (pg_shmem_allocations), median of the reps."""
        return self._med(lambda r: r.get("shmem_bytes"))

    @property
    def db_bytes_end(self) -> int | None:
        """The database's size at the end of the measured run (the largest of the reps)."""
        xs = [r["db_bytes_end"] for r in self.recs if r.get("db_bytes_end") is not None]
        return max(xs) if xs else None

    @property
    def pool_covers_db(self) -> bool | None:
        """Did the pool's pages (in the hybrid pool: its descriptors) cover the database at
        the end of every repetition? None where not measured."""
        xs = [r["pool_covers_db"] for r in self.recs if r.get("pool_covers_db") is not None]
        return all(xs) if xs else None

    @property
    def placements(self) -> list[str]:
        """Where the repetitions ran (``same:0``, ``free``), each placement once."""
        return sorted({str(r["placement"]) for r in self.recs if r.get("placement")})

    @property
    def pgbench_cpu_rate(self) -> float | None:
        """pgbench's CPU seconds per second of the measured window, median of the reps: on a
        machine the benchmark saturates, pgbench's share of the vCPUs, which the host's
        speed does not change (a slower host stretches pgbench's and the server's work per
        transaction alike) but the server's CPU per transaction does (what it uses is not
        left to pgbench). Ratios of it estimate throughput ratios at equal host speed."""
        return self._med(
            lambda r: (
                r["pgbench_cpu_s"] / r["elapsed_s"]
                if r.get("pgbench_cpu_s") and r.get("elapsed_s")
                else None
            )
        )

    @property
    def cpu_used(self) -> float | None:
        """vCPU seconds per second the server's processes and pgbench used in the measured
        window (median of the reps; 2.0 on a saturated 2-vCPU machine)."""

        def used(r: dict[str, Any]) -> float | None:
            groups = (r.get("server_cpu") or {}).get("groups")
            if not groups or not r.get("pgbench_cpu_s") or not r.get("elapsed_s"):
                return None
            server = sum(v.get("utime_s", 0.0) + v.get("stime_s", 0.0) for v in groups.values())
            return (server + r["pgbench_cpu_s"]) / r["elapsed_s"]

        return self._med(used)

    def cpu_us_per_txn(self) -> dict[str, float]:
        """CPU µs per transaction by group (+ 'other server', 'pgbench'), median of reps."""
        per: dict[str, list[float]] = {}
        for r in self.recs:
            n = r.get("transactions") or 0
            groups = (r.get("server_cpu") or {}).get("groups") or {}
            if not n:
                continue
            acc = dict.fromkeys([*CPU_GROUPS, "other server", "pgbench"], 0.0)
            for g, v in groups.items():
                cpu = v.get("utime_s", 0.0) + v.get("stime_s", 0.0)
                acc[g if g in CPU_GROUPS else "other server"] += cpu
            acc["pgbench"] = r.get("pgbench_cpu_s") or 0.0
            for k, v in acc.items():
                per.setdefault(k, []).append(v / n * 1e6)
        return {k: statistics.median(v) for k, v in per.items()}


def cells(records: list[dict[str, Any]]) -> dict[str, Cell]:
    out: dict[str, Cell] = {}
    for r in records:
        if r.get("status") != "ok":
            continue
        c = out.get(r["key"])
        if c is None:
            c = out[r["key"]] = Cell(
                r["key"],
                r["config"],
                r["workload"],
                r["distribution"],
                int(r["clients"]),
                r.get("ratio"),
                r.get("shared_buffers", ""),
            )
        c.recs.append(r)
    return out


def main_cell(cs: dict[str, Cell], config: str, workload: str, clients: int) -> Cell | None:
    for c in cs.values():
        if c.config == config and c.workload == workload and c.clients == clients and not c.ratio:
            return c
    return None
